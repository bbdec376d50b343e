"""Where things are: the active Hermes profile and the files of it the plugin reads or writes.

Paths come from ``$HERMES_HOME`` (profile-aware, Hermes' own resolver when
importable), never from Hermes' import-time ``DEFAULT_DB_PATH``.
"""

from __future__ import annotations

import os
from pathlib import Path


def hermes_home() -> Path:
    """The active profile's HERMES_HOME (Hermes' resolver when importable)."""
    try:
        from hermes_constants import get_hermes_home
    except ImportError:  # outside Hermes: Hermes' own rule (its later lines expand ~ and $VARS)
        value = os.environ.get("HERMES_HOME", "").strip()
        return Path(os.path.expandvars(os.path.expanduser(value))) if value else Path.home() / ".hermes"
    return Path(get_hermes_home())


def state_db_path(home: Path) -> Path:
    return Path(home) / "state.db"


def projects_db_path(home: Path) -> Path:
    return Path(home) / "projects.db"


def plugin_data_dir(home: Path) -> Path:
    """The plugin's private, per-profile data folder (embeddings.db, consent.json).

    Beside a drop-in install (git-ignored there), never inside site-packages for pip.
    """
    return Path(home) / "plugins" / "project-history-recall" / "data"


def embeddings_db_path(home: Path) -> Path:
    """The plugin's vector index (embeddings.db) of the profile ``home``."""
    return plugin_data_dir(home) / "embeddings.db"


def consent_path(home: Path) -> Path:
    """The plugin's record of consent (consent.json) of the profile ``home``."""
    return plugin_data_dir(home) / "consent.json"


def state_db_key(home: Path) -> str:
    """The key per-database caches use: the resolved path of ``<home>/state.db``."""
    return str(state_db_path(home).resolve())
