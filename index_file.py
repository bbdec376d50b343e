"""The embeddings.db file: its schema, opening it, and what can be wrong with it.

The file holds the chunks of messages and their vectors (table ``chunks``,
see :data:`SCHEMA`); :mod:`vector_index` reads and writes them, this
module owns the file's lifecycle:

* opening: :func:`open_index` creates the file (``PRAGMA user_version``,
  one creator at a time) and checks its schema; a damaged or foreign file,
  or one of an older schema, is moved aside
  (``embeddings.db.broken-<time>-<pid>``) and rebuilt;
* conditions: :class:`IndexBroken` (damaged: moved aside, never leaves an
  open), :class:`IndexNotNow` (temporary: a later search retries) and
  :class:`IndexBlocked` (permanent until the user acts: the message says what
  to do); :func:`unusable` tells which one an SQLite error means;
* write blockers found from the file system alone (:func:`write_blocker`),
  and the permanent problems this process found, remembered per path until
  the file or a folder above it changes (:func:`remember`,
  :func:`remembered_problem`; state cache ``index_problems``).

Invariants: a file of a newer schema is never written or moved (it is left
for the newer plugin); a damaged or foreign file is moved aside, never
deleted, and never replaces an earlier one moved aside; the schema is only
created, in one transaction under the write lock, never changed. No function
here raises ``sqlite3`` errors or ``OSError`` unless its docstring says so.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import sqlite3
import time
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import errors, state
from .embeddings import EmbeddingUnavailable, _Condition

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------------------
# Schema
# ---------------------------------------------------------------------------

INDEX_APP_ID = 0x50485231  # "PHR1" in PRAGMA application_id: marks the file as ours

_CHUNK_COLUMNS = "id, session_id, message_id, chunk_index, content_hash, model_fingerprint, vector, created_at"

#: ``PRAGMA user_version`` of a file of :data:`SCHEMA`. A file of an older one (written by a build before the
#: first release) is moved aside and rebuilt, as a damaged one is; a newer one is left for the newer plugin.
SCHEMA_VERSION = 2
#: The schema, created in one ``BEGIN IMMEDIATE`` transaction with its version.
SCHEMA: tuple[str, ...] = (
    # Chunk ids are never reused (AUTOINCREMENT): a running process loads the
    # chunks above the highest id it has seen, so a reused id would stay
    # invisible to it. Three indexes: a message's chunks of a model; what is
    # indexed, read without touching the vector pages (a covering index); and
    # (model, rowid) ranges, which count a model's new chunks without scanning
    # the old ones.
    """CREATE TABLE chunks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        message_id INTEGER NOT NULL,
        chunk_index INTEGER NOT NULL,
        content_hash TEXT NOT NULL,
        model_fingerprint TEXT NOT NULL,
        vector BLOB NOT NULL,
        created_at REAL NOT NULL,
        UNIQUE(session_id, message_id, chunk_index, model_fingerprint)
    )""",
    "CREATE INDEX chunks_by_model_message ON chunks(model_fingerprint, message_id)",
    "CREATE INDEX chunks_indexed ON chunks(model_fingerprint, chunk_index, message_id, session_id, content_hash)",
    "CREATE INDEX chunks_by_model ON chunks(model_fingerprint)",
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)

#: What the current schema must hold (a file missing any is damaged: moved aside and rebuilt).
_SCHEMA = {("table", "chunks"), ("table", "meta"), ("index", "chunks_by_model_message"), ("index", "chunks_indexed"),
           ("index", "chunks_by_model")}


# ---------------------------------------------------------------------------
# Conditions
# ---------------------------------------------------------------------------


class IndexBroken(_Condition, RuntimeError):
    """embeddings.db is damaged (a corrupt or foreign file, a missing table or index).

    Raised by :func:`prepare` (an older schema too); :func:`open_index` then moves the file aside
    and rebuilds it, so it never leaves an open.
    """

    code = "index_damaged"


class IndexNotNow(EmbeddingUnavailable):
    """embeddings.db cannot be used now (busy, replaced while opened); it is left alone and a later search retries."""

    code = "index_busy"


class IndexBlocked(IndexNotNow):
    """embeddings.db cannot be used until the user acts; it is left alone and the message says what to do.

    ``code``: ``index_read_only`` (the data folder or the file cannot be
    written), ``index_newer_schema`` (written by a newer plugin version),
    ``index_not_a_file`` (a folder or something else at the file's path).
    Remembered per process (:func:`remember`) until the file or folder changes.
    """

    code = "index_read_only"
    temporary = False


#: SQLite primary result codes (``sqlite3.Error.sqlite_errorcode & 0xff``).
_SQLITE_BUSY_CODES = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED
_SQLITE_DENIED_CODES = {3, 8}  # SQLITE_PERM, SQLITE_READONLY
_SQLITE_CANTOPEN, _SQLITE_FULL, _SQLITE_DAMAGE_CODES = 14, 13, {11, 26}  # ..., SQLITE_CORRUPT, SQLITE_NOTADB
_SCHEMA_DAMAGE = re.compile(r"no such (?:table|index|column)|malformed|corrupt", re.IGNORECASE)


def sqlite_kind(exc: sqlite3.Error) -> str:
    """``busy``, ``denied`` (cannot write), ``cantopen``, ``full``, ``damaged`` or ``other`` for an SQLite error."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary in _SQLITE_BUSY_CODES or (primary is None and "locked" in str(exc)):
        return "busy"
    if primary in _SQLITE_DENIED_CODES:
        return "denied"
    if primary == _SQLITE_CANTOPEN:
        return "cantopen"
    if primary == _SQLITE_FULL:
        return "full"
    if primary in _SQLITE_DAMAGE_CODES or isinstance(exc, sqlite3.DatabaseError) and _SCHEMA_DAMAGE.search(str(exc)):
        return "damaged"
    if type(exc) is sqlite3.DatabaseError:  # a plain DatabaseError, not an operational one: the file itself is bad
        return "damaged"
    return "other"


def _read_only_folder(folder: Path, why: str) -> IndexBlocked:
    return IndexBlocked(
        f"semantic search is off until its data folder can be written: {folder} is {why}. Make it writable "
        "(chmod u+w; chattr -i if it is immutable), then search again.", code="index_read_only")


def _read_only_file(path: Path, why: str) -> IndexBlocked:
    return IndexBlocked(
        f"semantic search is off until the index file can be written: {path} is {why}. Make it writable "
        "(chmod u+w; chattr -i if it is immutable), or delete it to start over.", code="index_read_only")


def _newer_schema(path: Path, version: int) -> IndexBlocked:
    return IndexBlocked(
        f"semantic search is off: the embeddings index {path} was written by a newer plugin version (schema {version}; "
        f"this one knows {SCHEMA_VERSION}). Upgrade the plugin, or move the file aside to start over (rename it, "
        f"e.g. to {path.name}.newer).", code="index_newer_schema")


def _not_a_file(path: Path) -> IndexBlocked:
    kind = "a symbolic link" if path.is_symlink() else "a folder" if path.is_dir() else "not a regular file"
    return IndexBlocked(
        f"semantic search is off: {path} is {kind}, where a file of the semantic index should be. Remove it (rm -r, "
        "after saving anything you keep there) and the next search builds it again.", code="index_not_a_file")


def file_blocker(path: Path, *, written: bool = True) -> IndexBlocked | None:
    """What stops the plugin from using its file at ``path`` until the user acts, from the file system alone.

    Something other than a file there, or, for a file ``written`` in place,
    one it cannot read and write; ``None`` when nothing does (nothing there
    yet included). A few ``stat``/``access`` calls; never raises.
    """
    if os.path.lexists(path) and (path.is_symlink() or not path.is_file()):  # a link is never followed: not ours
        return _not_a_file(path)
    if written and path.is_file() and not os.access(path, os.R_OK | os.W_OK):
        return _read_only_file(path, _denied(path))
    return None


def first_blocker(files: Iterable[tuple[Path, bool]]) -> IndexBlocked | None:
    """:func:`file_blocker` of the first of ``files`` (``(path, written in place)``) that has one, else ``None``."""
    return next((found for path, written in files if (found := file_blocker(path, written=written)) is not None), None)


def _denied(path: Path) -> str:
    """Why the file system refuses writes at ``path`` (``os.access`` honours modes, immutable flags and read-only mounts)."""
    return "read-only" if not os.access(path, os.W_OK) else "not accessible"


def write_blocker(path: Path) -> IndexBlocked | None:
    """What stops ``path`` (embeddings.db) from being opened for writing, from the file system alone; ``None`` when nothing does.

    A few ``stat``/``access`` calls, no SQLite: a folder (or anything but a
    file) at the path; a file where the data folder should be; a data folder,
    or (when it does not exist yet) the folder it would be created in, that
    cannot be written; the file or its ``-wal`` / ``-shm`` read-only.
    """
    path = Path(path)
    if (blocker := file_blocker(path, written=False)) is not None:
        return blocker
    folder = path.parent
    probe = folder
    while not os.path.lexists(probe) and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        return IndexBlocked(
            f"semantic search is off: {probe} is a file where the plugin's data folder {folder} should be. "
            f"Remove or rename it, and the next search creates the folder.", code="index_not_a_file")
    if not os.access(probe, os.W_OK | os.X_OK):
        return _read_only_folder(probe, _denied(probe))
    for part in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if part.is_file() and not os.access(part, os.R_OK | os.W_OK):
            return _read_only_file(part, _denied(part))
    return None


# ---------------------------------------------------------------------------
# Opening
# ---------------------------------------------------------------------------


def identity(path: Path) -> tuple[int, int] | None:
    """``(device, inode)`` of the file at ``path``, ``None`` when there is none: which file a path holds now. Never raises."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def connect(path: Path) -> sqlite3.Connection:
    """A read-write connection to ``path`` (created when missing), shared between threads; raises ``sqlite3`` errors."""
    return sqlite3.connect(path, check_same_thread=False, timeout=5)


def connect_read_only(path: Path, *, timeout: float = 5) -> sqlite3.Connection:
    """A read-only connection to the existing file at ``path`` (an absolute path); raises ``sqlite3`` errors."""
    return sqlite3.connect(Path(path).as_uri() + "?mode=ro", uri=True, timeout=timeout)


def prepare(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Give ``conn``'s file the schema when it is new, one creator at a time; returns ``conn``.

    Raises :class:`IndexBroken` (a foreign file, an older schema, or tables
    or indexes of the schema missing), :class:`IndexBlocked` (a newer schema) or
    ``sqlite3`` errors; ``conn`` is closed when it raises.
    """
    try:
        # A new file gets 16 KiB pages: a 512-d vector row (~2.1 KB) leaves half of
        # a 4 KiB page empty. (No effect on an existing file.)
        conn.execute("PRAGMA page_size = 16384")
        for attempt in range(20):  # on a brand-new file, several processes switching it at once get "locked" at once
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as exc:
                if attempt == 19 or sqlite_kind(exc) != "busy":  # read-only or unopenable: waiting changes nothing
                    raise
                time.sleep(0.05)
        # An up-to-date file (every open but the first) needs no write lock: another
        # process writing vectors then never delays this open.
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if app_id == INDEX_APP_ID and version > SCHEMA_VERSION:  # refused without taking the write lock
            raise _newer_schema(Path(conn.execute("PRAGMA database_list").fetchone()[2]), version)
        if app_id != INDEX_APP_ID or version != SCHEMA_VERSION:
            conn.isolation_level = None  # explicit transactions below
            conn.execute("BEGIN IMMEDIATE")  # the version is read and bumped under the write lock
            try:
                app_id = conn.execute("PRAGMA application_id").fetchone()[0]
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
                if app_id != INDEX_APP_ID and (tables or version):
                    raise IndexBroken("not a project-history-recall index")
                if version > SCHEMA_VERSION:
                    raise _newer_schema(Path(conn.execute("PRAGMA database_list").fetchone()[2]), version)
                if app_id == INDEX_APP_ID and version < SCHEMA_VERSION:
                    raise IndexBroken(f"written by a build of the plugin before its first release, schema {version} "
                                      f"where this one's is {SCHEMA_VERSION}")
                if app_id != INDEX_APP_ID:  # a new file (another process may have created it meanwhile)
                    for statement in SCHEMA:
                        conn.execute(statement)
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                    conn.execute(f"PRAGMA application_id = {INDEX_APP_ID}")
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            finally:
                conn.isolation_level = "DEFERRED"  # back to the module default ("" is the same)
        missing = _schema_missing(conn)
        if missing:  # e.g. a table dropped by hand: never heals by itself
            raise IndexBroken(f"its schema is damaged: {', '.join(missing)} missing")
    except BaseException:
        conn.close()
        raise
    return conn


def _schema_missing(conn: sqlite3.Connection) -> list[str]:
    """The names of the current schema's tables and indexes missing from ``conn``'s file, sorted (``[]`` when none).

    When none is missing, every column of ``chunks`` is selected and the first and last entries of the table
    and of each of its indexes are read, so a file damaged at a root or an end fails here, fast (a few page
    reads each, whatever the file's size): raises ``sqlite3`` errors. Damage in the middle of a b-tree fails
    the read that meets it (that search's vector leg is ``unavailable``; keyword results stand).
    """
    present = set(conn.execute("SELECT type, name FROM sqlite_master"))
    missing = sorted(name for _, name in _SCHEMA - present)
    if not missing:
        conn.execute(f"SELECT {_CHUNK_COLUMNS} FROM chunks LIMIT 0").fetchall()  # every column is there
        for index, columns in _EDGES:
            for way in ("", " DESC"):
                order = ", ".join(column + way for column in columns.split(", "))
                source = f"chunks INDEXED BY {index}" if index else "chunks"
                conn.execute(f"SELECT {columns if index else _CHUNK_COLUMNS} FROM {source} ORDER BY {order} LIMIT 1").fetchall()
    return missing


#: The b-trees of ``chunks`` (``""``: the table itself, every column read) with the columns each is ordered by:
#: :func:`_schema_missing` reads the first and last entry of each.
_EDGES = (("", "id"),
          ("sqlite_autoindex_chunks_1", "session_id, message_id, chunk_index, model_fingerprint, id"),
          ("chunks_by_model_message", "model_fingerprint, message_id, id"),
          ("chunks_indexed", "model_fingerprint, chunk_index, message_id, session_id, content_hash, id"),
          ("chunks_by_model", "model_fingerprint, id"))


def healthy(conn: sqlite3.Connection) -> bool:
    """Whether ``conn``'s file still reads as an index: the schema's tables and indexes, every column, the ends
    of every b-tree (:func:`_schema_missing`). Never raises (an SQLite error is ``False``); the caller serialises
    use of ``conn``.
    """
    try:
        return not _schema_missing(conn)
    except sqlite3.Error:
        return False


def damaged_inside(path: Path) -> bool:
    """Whether SQLite's ``quick_check`` finds a page of the file at ``path`` damaged, on a read-only connection of
    its own (it reads the whole file). ``False`` when the file cannot be read now (busy, gone). Never raises."""
    try:
        with closing(connect_read_only(path)) as conn:
            return conn.execute("PRAGMA quick_check(1)").fetchone()[0] != "ok"
    except sqlite3.Error as exc:
        return sqlite_kind(exc) == "damaged"


def move_aside(path: Path, damage: Exception) -> Path:
    """Rename the damaged file (``embeddings.db.broken-<time>-<pid>``) and drop its journal; returns the new name.

    Raises :class:`IndexBlocked` when the folder does not let it move.
    """
    # Named by time and process, numbered if taken: a second damaged file never replaces the first.
    stem = f"{path.name}.broken-{int(time.time())}-{os.getpid()}"
    aside = path.with_name(stem)
    for number in itertools.count(2):
        if not aside.exists():
            break
        aside = path.with_name(f"{stem}-{number}")
    try:
        path.rename(aside)
        for suffix in ("-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
    except OSError as exc:
        raise write_blocker(path) or IndexBlocked(
            f"semantic search is off: the embeddings index {path} is damaged ({damage}) and cannot be moved "
            f"aside ({exc.strerror or exc}): move or delete it by hand, and the next search builds a new one",
            code="index_damaged") from None
    logger.warning("embeddings index %s unusable (%s); moved to %s and rebuilt", path, damage, aside,
                   extra=errors.said_as(moved_aside(aside)))
    return aside


def moved_aside(aside: Path) -> str:
    """How an answer says that the index was moved to ``aside`` and built again."""
    return f"it was moved to {aside.name} and rebuilt"


@dataclass(frozen=True)
class OpenFile:
    """An index file opened by :func:`open_index`."""

    conn: sqlite3.Connection  #: of the current schema
    identity: tuple[int, int] | None  #: the file ``conn`` has open (see :func:`identity`)
    note: str = ""  #: what the open did that a search should say (a damaged file moved aside and rebuilt), else ``""``
    token: str = ""  #: the file's own random name (:func:`file_token`): tells it from an earlier file that had its inode


def open_index(path: Path) -> OpenFile:
    """Open ``path`` (an absolute path), creating the file; a damaged or foreign one, or one of an older schema, is moved
    aside and rebuilt.

    Raises :class:`IndexNotNow` when the file cannot be used now (busy, or
    replaced by another process while this open waited: a later search
    retries), :class:`IndexBlocked` when it cannot be used until the user acts
    (the data folder or the file read-only, a newer schema, a folder at its
    path: left as it is), both with the reason and what to do in the message.
    Never raises ``sqlite3`` errors or ``OSError``.
    """
    before = identity(path)
    conn, note = _open(path)
    opened = identity(path)
    if before is not None and before != opened and not note:
        # Replaced by another process while this open waited: the connection may be on
        # the old file. (A file this open moved aside itself says so in ``note``.)
        conn.close()
        raise IndexNotNow("the embeddings index was replaced while it was being opened; the next search uses the new one")
    try:
        token = file_token(conn)
    except sqlite3.Error as exc:  # busy (another process writing for seconds): a later search opens it again
        conn.close()
        raise unusable(path, exc) from None
    return OpenFile(conn, opened, note, token)


def file_token(conn: sqlite3.Connection) -> str:
    """The file's random name in its ``meta`` table, written by the first open that finds none (one short write,
    once per file). A file deleted and made again often gets the same inode: the vector files beside it tell
    the two apart by this. Raises ``sqlite3`` errors (busy: no process may go on without it, or processes
    would disagree on the files' source and build them over and over)."""
    token = stored_token(conn)
    if token is None:
        with conn:
            conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('file_token', lower(hex(randomblob(8))))")
        token = stored_token(conn)
    return str(token)


def stored_token(conn: sqlite3.Connection) -> str | None:
    """The file's own random name, ``None`` before one was given (a read: :func:`file_token` gives one)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'file_token'").fetchone()
    return None if row is None else str(row[0])


def _open(path: Path) -> tuple[sqlite3.Connection, str]:
    """``(connection, note)``: :func:`open_index` but for the check that the file stayed the same."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_blocker(path) or _read_only_folder(path.parent, exc.strerror or str(exc)) from None
    damage: Exception
    examined = identity(path)
    try:
        return prepare(connect(path)), ""
    except sqlite3.Error as exc:
        if sqlite_kind(exc) != "damaged":  # locked, read-only, a race with another creator: not damage
            raise unusable(path, exc) from None
        damage = exc
    except IndexBroken as exc:
        damage = exc
    if examined is not None and identity(path) != examined:
        # Another process moved the file this open examined aside (while this one waited for its lock) and
        # built a new one at the path: that one is not the damaged file, and is not moved.
        raise IndexNotNow("the embeddings index was replaced while it was being opened; the next search uses the new one")
    aside = move_aside(path, damage)
    note = f"the embeddings index was unusable ({damage}); {moved_aside(aside)}"
    try:
        return prepare(connect(path)), note
    except sqlite3.Error as again:
        raise unusable(path, again) from None
    except IndexBroken as again:  # another process put something at the path meanwhile
        raise IndexNotNow(f"the embeddings index could not be rebuilt just now ({again}); semantic search retries "
                          "on a later search", code="index_error") from None


def unusable(path: Path, exc: sqlite3.Error) -> EmbeddingUnavailable:
    """What an SQLite error on the index at ``path`` means for searches: an :class:`IndexNotNow` (temporary) or :class:`IndexBlocked` (the user must act).

    Busy, a full disk or an unknown error is temporary; a read-only file
    or folder is permanent. Damage found while in use is temporary too: the
    index in use moves the file aside and retires, and the next search's open
    builds a new one (:meth:`vector_index.VectorIndex.trouble`). Never raises.
    """
    kind = sqlite_kind(exc)
    if kind == "busy":
        return IndexNotNow(f"the embeddings index is busy ({exc}); semantic search resumes on a later search")
    if kind in ("denied", "cantopen"):
        blocker = write_blocker(path)
        if blocker is not None:
            return blocker
        if kind == "denied":
            return _read_only_file(path, str(exc))
        return IndexNotNow(f"the embeddings index {path} cannot be opened just now ({exc}); "
                           "semantic search retries on a later search")
    if kind == "full":
        return IndexNotNow(f"the disk holding {path} is full ({exc}): free some space; semantic search "
                           "resumes on a later search", code="index_disk_full")
    if kind == "damaged":
        return IndexNotNow(f"the embeddings index is damaged ({exc}); the next search moves it aside and rebuilds it",
                           code="index_damaged")
    return IndexNotNow(f"the embeddings index could not be used just now ({exc}); semantic search retries on a later search",
                       code="index_error")


# ---------------------------------------------------------------------------
# Permanent problems, remembered per process
# ---------------------------------------------------------------------------

#: resolved path (str) -> (its :func:`stamp` when the problem was found, the problem)
_problems = state.cache("index_problems")


def remember(path: Path, problem: IndexBlocked) -> None:
    """Remember ``problem`` for ``path`` until the file or its folders change (see :func:`remembered_problem`); never raises."""
    resolved = Path(path).resolve()
    with _problems.lock:
        _problems.data[str(resolved)] = (stamp(resolved), problem.again())


def remembered_problem(path: Path) -> IndexBlocked | None:
    """The permanent problem this process found at ``path`` and that still holds (nothing changed since), else ``None``.

    A fresh exception each time (see :meth:`_Condition.again`); a problem
    whose file or folders changed is forgotten. A few ``stat`` calls; never raises.
    """
    resolved = Path(path).resolve()
    with _problems.lock:
        known = _problems.data.get(str(resolved))
        if known is None:
            return None
        if known[0] == stamp(resolved):
            return known[1].again()
        del _problems.data[str(resolved)]
    return None


def stamp(path: Path) -> tuple[Any, ...]:
    """What changes when ``path``, its journal files or its folder change (mode, owner, flags via ctime, contents via mtime, the mount going read-write).

    ``stat`` of the file, its ``-wal`` and ``-shm``, and each folder up to the
    first that exists; ``statvfs`` flags of that folder.
    """
    parts: list[Any] = []
    for item in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        parts.append(stat_key(item))
    folder = path.parent
    while True:
        key = stat_key(folder)
        parts.append(key)
        if key is not None or folder.parent == folder:
            break
        folder = folder.parent
    try:
        parts.append(os.statvfs(folder).f_flag)
    except OSError:
        parts.append(None)
    return tuple(parts)


def stat_key(path: Path) -> tuple[int, ...] | None:
    """What ``stat`` says of ``path`` that changes with its contents, owner or mode; ``None`` when there is none."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_mode, info.st_uid, info.st_gid, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def index_problem(path: Path) -> IndexBlocked | None:
    """What would stop a search from using the index at ``path`` for good, found without writing anything; ``None`` when nothing does.

    The condition this process remembers, else :func:`write_blocker`, else a
    schema newer than this plugin's (read on a read-only connection). For
    status reports: creates and changes nothing, never raises.
    """
    path = Path(path).absolute()
    problem = remembered_problem(path) or write_blocker(path)
    if problem is not None or not path.is_file():
        return problem
    try:
        with closing(connect_read_only(path, timeout=1)) as conn:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.Error:
        return None  # damage or a busy file: a search deals with it (moves it aside, or retries)
    return _newer_schema(path, version) if app_id == INDEX_APP_ID and version > SCHEMA_VERSION else None
