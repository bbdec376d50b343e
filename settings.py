"""The plugin's settings from the profile's ``config.yaml``, and the embedding API key.

Parsed settings are kept per file (``state.py``: ``settings``) and read again
only when its size, mtime, ctime or inode changes: a real Hermes config.yaml
is hundreds of lines, slow to parse in pure Python. An unreadable file means
defaults (logged), never a failure.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from . import config_schema, state

logger = logging.getLogger(__name__)


def load_settings(home: Path) -> config_schema.Settings:
    """This profile's plugin settings from ``config.yaml`` (defaults when absent or unreadable), kept per file."""
    import yaml

    path = Path(home) / "config.yaml"
    try:
        stat = path.stat()
        stamp: tuple[int, ...] | None = (stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size, stat.st_ino)
    except OSError:
        stamp = None
    with _settings.lock:
        cached = _settings.data.get(str(path))
    if cached is not None and cached[0] == stamp:
        return cached[1]
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=loader) if stamp is not None else {}  # noqa: S506 (a safe loader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        logger.warning("config.yaml unreadable (%s): %s", path, exc)
        raw = {}
    settings = config_schema.parse_settings(raw if isinstance(raw, dict) else {})
    with _settings.lock:
        _settings.data[str(path)] = (stamp, settings)
    return settings


_settings = state.cache("settings")  # path -> (file stamp, settings)


def embedding_api_key(home: Path) -> str:
    """``PROJECT_HISTORY_EMBEDDING_API_KEY`` for the profile at ``home`` (``""`` when none is found): its ``.env``
    first, as Hermes reads the credentials it manages (``get_env_value_prefer_dotenv``: an edit there wins over a
    stale shell export), then the process env through Hermes' secret scope. A gateway serving several profiles from
    one process (``gateway.multiplex_profiles``) keeps each profile's keys out of the process env, which holds the
    launching profile's: there an unscoped read finds nothing rather than another profile's key."""
    name = "PROJECT_HISTORY_EMBEDDING_API_KEY"
    env_file = Path(home) / ".env"
    found = ""
    try:  # as Hermes' load_env reads it: a byte-order mark ignored, the last line naming the key wins
        for line in env_file.read_text(encoding="utf-8-sig", errors="replace").splitlines():
            key, sep, value = line.strip().partition("=")
            if sep and key.strip().removeprefix("export ").strip() == name:
                found = value.strip().strip("'\"")
    except OSError:
        pass
    if found:
        return found
    try:
        from agent.secret_scope import UnscopedSecretError, get_secret
    except ImportError:  # a Hermes without profile scopes
        return os.environ.get(name, "")
    try:
        return get_secret(name) or ""
    except UnscopedSecretError:  # several profiles in this process, and none scoped to this thread
        return ""
