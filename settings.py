"""What the profile's own files say: the plugin's settings in ``config.yaml``, the cron jobs' folders in
``cron/jobs.json``, and the embedding API key.

Each parsed file is kept (``state.py``: ``settings``) and read again only when
its size, mtime, ctime or inode changes: a real Hermes config.yaml is hundreds
of lines, slow to parse in pure Python. An unreadable file means defaults
(logged), never a failure.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar, cast

from . import config_schema, state

logger = logging.getLogger(__name__)
T = TypeVar("T")


def load_settings(home: Path) -> config_schema.Settings:
    """This profile's plugin settings from ``config.yaml`` (defaults when absent or unreadable), kept per file."""
    return _kept(Path(home) / "config.yaml", _parse_settings, absent=_DEFAULTS)


def _parse_settings(path: Path) -> config_schema.Settings:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 (a safe loader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        logger.warning("config.yaml unreadable (%s): %s", path, exc)
        raw = {}
    return config_schema.parse_settings(raw if isinstance(raw, dict) else {})


def cron_folders(home: Path) -> dict[str, str]:
    """``{job id: workdir}`` of the profile's cron jobs that run in a folder (``cron/jobs.json``, an absolute
    ``workdir``); ``{}`` when there is no such file or it cannot be read (logged). Hermes records no folder for a
    cron run's session (``cron_<job id>_<time>``); the job's folder is where it worked. Kept per file."""
    return _kept(Path(home) / "cron" / "jobs.json", _parse_cron_folders, absent={})


_JOBS_LIMIT = 16 << 20  # bytes: a jobs.json larger than this is not Hermes' own


def _parse_cron_folders(path: Path) -> dict[str, str]:
    try:
        with path.open("rb") as f:
            text = f.read(_JOBS_LIMIT + 1)
        if len(text) > _JOBS_LIMIT:
            raise ValueError(f"over {_JOBS_LIMIT} bytes")
        raw = json.loads(text.decode("utf-8-sig"), strict=False)  # as Hermes' load_jobs reads it
    except (OSError, ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        logger.warning("cron/jobs.json unreadable (%s): %s", path, exc)
        return {}
    jobs = raw.get("jobs") if isinstance(raw, dict) else raw
    found: dict[str, str] = {}
    for job in jobs if isinstance(jobs, list) else ():
        if isinstance(job, dict) and isinstance(job.get("id"), str) and isinstance(job.get("workdir"), str):
            folder = os.path.expanduser(job["workdir"].strip())
            if os.path.isabs(folder):
                found[job["id"]] = folder
    return found


def _kept(path: Path, parse: Callable[[Path], T], *, absent: T) -> T:
    """``parse(path)``, or what it gave while the file's size, mtime, ctime and inode were the same; ``absent``
    when there is no file."""
    try:
        stat = path.stat()
        stamp: tuple[int, ...] | None = (stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size, stat.st_ino)
    except OSError:
        stamp = None
    with _settings.lock:
        cached = _settings.data.get(str(path))
    if cached is not None and cached[0] == stamp:
        return cast(T, cached[1])
    value = parse(path) if stamp is not None else absent
    with _settings.lock:
        _settings.data[str(path)] = (stamp, value)
    return value


_DEFAULTS = config_schema.parse_settings({})
_settings = state.cache("settings")  # path -> (file stamp, what it parsed into)


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
