"""The failures the tools answer as ``{"success": false, "code": ...}``: one class a code.

Raised deep, translated once at the tool boundary (``handlers.py``), the slash
commands and the command line. Pure: no imports of the plugin.
"""

from __future__ import annotations

from typing import Any

#: How much of a value a message repeats: a 5,000-character id is not echoed whole (queries are cut too).
ECHO_CHARS = 200


def echo(value: object) -> str:
    """``value`` as a message may repeat it: whole up to :data:`ECHO_CHARS` characters, else cut, saying its length."""
    text = str(value)
    if len(text) <= ECHO_CHARS:
        return text
    return f"{text[:ECHO_CHARS]}… ({len(text):,} characters)"


class StoreError(Exception):
    """A failure the tools report as ``{"success": false, "code": code}``."""

    code = "store_error"
    #: A lock another process held past the read's busy timeout: ``temporary`` in the details, but not read again
    #: at once (the wait is spent); a later call tries again.
    locked = False

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = details


class NoStateDB(StoreError):
    code = "no_db"


class StateDBUnreadable(StoreError):
    code = "db_unreadable"


class StateElsewhere(StoreError):
    """The profile's config.yaml keeps Hermes' sessions in another store than state.db (``database.backend``)."""

    code = "sessions_not_in_state_db"


class ProjectsDBUnreadable(StoreError):
    """projects.db met SQLite's "disk I/O error", or stayed locked (``temporary`` in its details): the projects are not
    known just now, and a scope made without them would be another project's."""

    code = "projects_db_unreadable"


class NoSession(StoreError):
    code = "no_session"


class SessionNotFound(StoreError):
    code = "session_not_found"


class ProjectNotFound(StoreError):
    code = "project_not_found"


class FolderNotFound(StoreError):
    code = "folder_not_found"


class MoveRefused(StoreError):
    code = "move_refused"
