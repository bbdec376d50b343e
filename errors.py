"""The failures the tools answer as ``{"success": false, "code": ...}``: one class a code.

Raised deep, translated once at the tool boundary (``handlers.py``), the slash
commands and the command line; and what an SQLite error means for an answer
(:func:`transient`, :func:`locked`, :func:`temporary`). Pure: no imports of the plugin.
"""

from __future__ import annotations

import sqlite3
from typing import Any

#: How much of a value a message repeats: a 5,000-character id is not echoed whole (queries are cut too).
ECHO_CHARS = 200


#: The ``extra`` key of a logged warning that names the words an answer says the same problem in (:func:`said_as`).
SAID_AS = "phr_said_as"


def said_as(words: str) -> dict[str, str]:
    """A warning's ``extra`` for ``logger.warning``: ``words``, the part of an answer's note that says the same
    problem. The command line shows an answer and the warnings logged while it was made: one whose words the answer
    holds is said once, in the answer (where no answer says it, the warning is still shown)."""
    return {SAID_AS: words}


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


# -- what an SQLite error means for an answer ------------------------------------


def transient(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's "disk I/O error" (``SQLITE_IOERR`` and its extended codes), raised as is or met
    opening state.db (``store.open_state_db``) or reading projects.db (``store.load_projects``): a
    :class:`StoreError` says ``temporary`` and is not ``locked``. A read-only connection meets it while
    another process checkpoints or resets the WAL (seen on macOS and WSL2); it is gone milliseconds later, and
    Hermes retries its own read-only reads for it (hermes-agent #100436, #100882): ``store.read_again``."""
    if isinstance(exc, StoreError):
        return bool(exc.details.get("temporary")) and not exc.locked
    return isinstance(exc, sqlite3.OperationalError) and getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_IOERR


def locked(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's "database is locked" (``SQLITE_BUSY``, ``SQLITE_LOCKED``): another process (a
    rollback-journal writer, a backup) held a lock past ``store.BUSY_TIMEOUT_MS``. It passes by itself, but the wait
    is spent: answered at once as temporary, never read again here."""
    if isinstance(exc, StoreError):
        return exc.locked
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    if code is None:
        return "database is locked" in str(exc) or "database table is locked" in str(exc)
    return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def temporary(exc: BaseException) -> bool:
    """Whether an answer says ``temporary: true`` for ``exc``: a :func:`transient` or a :func:`locked` error."""
    return transient(exc) or locked(exc)


def unreadable(kind: type[StoreError], message: str, path: object, exc: BaseException) -> StoreError:
    """A ``kind`` failure for the SQLite error ``exc`` at ``path``: ``temporary`` when :func:`temporary`, and
    ``locked`` when :func:`locked`."""
    failure = kind(message, path=str(path), **({"temporary": True} if temporary(exc) else {}))
    failure.locked = locked(exc)
    return failure
