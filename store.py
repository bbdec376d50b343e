"""IO shell: reads of Hermes' state.db and projects.db (connections, projects, messages).

Invariants:

* state.db and projects.db are opened read-only (``mode=ro`` through ``Path.as_uri()``, so ``#`` or ``?`` in
  a path cannot open another file), never created or migrated here, and never in a write transaction.
* A value that is not valid UTF-8 reads with U+FFFD in its place.
* Every SQL value is a parameter.

Failures are raised as ``errors.StoreError`` subclasses carrying a stable ``code``; the tool boundary
translates them. The move (the only write) is ``move.py``; sessions are ``session_rows.py``; a session read
in order is ``session_walk.py``.
"""

from __future__ import annotations

import functools
import json
import logging
import operator
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from . import attribution, echo, errors, layout, paths, settings, stored_text, ticks
from .records import MessageRow, Scope

logger = logging.getLogger(__name__)


#: The plugin's tools and Hermes' ``session_search``: their calls and answers are recall itself, never project
#: history (a search that found its own earlier results would feed on itself).
RECALL_TOOLS: tuple[str, ...] = (
    "project_history_search",
    "project_history_read",
    "project_history_recent",
    "project_session_move",
    "project_history_semantic_consent",
    "session_search",
)


#: ``busy_timeout`` for read connections: a writer checkpointing must not surface as "database is locked".
BUSY_TIMEOUT_MS = 5000


#: Attempts of one read that meets a :func:`errors.transient` error, and the pause after the first (doubled after each).
READ_ATTEMPTS, READ_PAUSE_S = 3, 0.05

_P = ParamSpec("_P")
_T = TypeVar("_T")


def read_again(read: Callable[_P, _T]) -> Callable[_P, _T]:
    """``read`` (a whole read of state.db and projects.db on connections of its own) run again while it raises a
    :func:`errors.transient` error, ``READ_ATTEMPTS`` times in all; the last attempt's error is raised."""

    @functools.wraps(read)
    def attempts(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        for attempt in range(READ_ATTEMPTS - 1):
            try:
                return read(*args, **kwargs)
            except (sqlite3.OperationalError, errors.StoreError) as exc:
                if not errors.transient(exc):
                    raise
                logger.info("a read met %s; reading again", exc)
                time.sleep(READ_PAUSE_S * 2**attempt)
        return read(*args, **kwargs)

    return attempts


class StateConnection(sqlite3.Connection):
    """A read-only connection that knows the :class:`layout.Layout` of the file it reads (asked once, on first use)
    and, as SQL's ``phr_cron_folder(session id)``, the folders of the profile's cron jobs when it was opened; SQL's
    ``phr_prompt_folder(system prompt)`` is the working directory a session's system prompt names."""

    layout: layout.Layout | None = None
    ticks: ticks.Ticks | None = None
    links: dict[str, tuple[str, bool]] | None = None  # sessions' parent links the readers asked (conversations._links)
    cron_folders: Mapping[str, str] = {}


def layout_of(conn: sqlite3.Connection) -> layout.Layout:
    """The schema facts of the state.db ``conn`` reads (:mod:`layout`), read once per connection of
    :func:`connect_ro` (every time for another connection). Raises ``sqlite3`` errors."""
    known = getattr(conn, "layout", None)
    if known is not None:
        return known
    found = layout.read(conn)
    if isinstance(conn, StateConnection):
        conn.layout = found
    return found


def ticks_of(conn: sqlite3.Connection) -> ticks.Ticks:
    """The large clock ticks the readers of ``conn`` met, each grouped once (``ticks``): one per connection of
    :func:`connect_ro` (a search, a read, the index command's run), a new one every time for another connection."""
    known = getattr(conn, "ticks", None)
    if known is not None:
        return known
    found = ticks.Ticks(conn, layout_of(conn))
    if isinstance(conn, StateConnection):
        conn.ticks = found
    return found


def visible(conn: sqlite3.Connection, among: str | None = None) -> str:
    """The SQL condition on ``messages`` as ``m`` that keeps the rows Hermes shows a person: not rewound, on 0.21 not
    hidden scaffolding or kept for the model only, each message once (:meth:`layout.Layout.visible_sql`). ``among``: for
    one statement that finds many rows itself (a scan), an SQL subquery naming every row it is asked of: a large clock
    tick's rows are then told apart once, in the statement (:meth:`layout.Layout.visible_among_sql`)."""
    shape = layout_of(conn)
    return shape.visible_sql() if among is None else shape.visible_among_sql(among)


def visible_of(conn: sqlite3.Connection, ids: Sequence[int]) -> tuple[str, list[str]]:
    """:func:`visible` for a reader that asks of rows it holds, ``ids``, in one of many statements (a batch, a page, a
    row): the SQL condition and its two parameters, a large clock tick's rows told apart once a connection
    (:func:`ticks_of`: sorted in each statement, a tick of T rows read a batch at a time cost T for each)."""
    return layout_of(conn).visible_told_sql(), list(ticks_of(conn).told(ids))


def connect_ro(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only (a :class:`StateConnection`), never creating it. Raises ``FileNotFoundError`` when
    the file does not exist, ``sqlite3.OperationalError`` when SQLite cannot open it."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(str(path))
    uri = path.resolve().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False, factory=StateConnection)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    folders = conn.cron_folders = settings.cron_folders(path.parent)
    conn.create_function("phr_cron_folder", 1, functools.partial(attribution.cron_folder, folders), deterministic=True)
    conn.create_function("phr_prompt_folder", 1, attribution.prompt_folder, deterministic=True)
    # One value that is not valid UTF-8 (a folder name, a pasted binary) must not fail every search.
    conn.text_factory = _TEXT
    return conn


_TEXT = operator.methodcaller("decode", "utf-8", "replace")  # bytes -> str, as str(b, "utf-8", "replace")


def open_state_db(home: Path) -> sqlite3.Connection:
    """Read-only connection to ``<home>/state.db``; raises ``errors.StateElsewhere`` when the profile's config.yaml
    keeps Hermes' sessions in another store (``database.backend: postgres``: state.db would be absent or stale),
    ``errors.NoStateDB`` if absent, ``errors.StateDBUnreadable`` if SQLite cannot read it (with ``temporary=True``
    in its details for a :func:`errors.temporary` error)."""
    backend = settings.load_settings(home).sessions_backend
    if backend != "sqlite":
        raise errors.StateElsewhere(f"this profile keeps Hermes' sessions in {errors.echo(backend)} (config.yaml "
                                    "database.backend), not in state.db: project history reads state.db only",
                                    backend=errors.echo(backend))
    path = paths.state_db_path(home)
    try:
        conn = connect_ro(path)
        conn.execute("SELECT 1 FROM sessions LIMIT 1").fetchall()
    except FileNotFoundError:
        raise errors.NoStateDB("session database not found", path=str(path)) from None
    except sqlite3.DatabaseError as exc:  # temporary, locked: for read_again, and said in the answer
        what = "busy (locked by another process)" if errors.locked(exc) else "unreadable"
        raise errors.unreadable(errors.StateDBUnreadable, f"session database {what}: {exc}", path, exc) from None
    return conn


@dataclass(frozen=True)
class ProjectList:
    projects: tuple[attribution.ProjectRecord, ...]
    available: bool  # False: projects.db missing or unreadable -> auto attribution only
    note: str = ""


def load_projects(home: Path) -> ProjectList:
    """Every project (archived included, flagged) with its folders.

    A missing or unreadable ``projects.db`` (normal for profiles that never used the desktop) gives
    ``available=False``: auto attribution only (docs/attribution.md). The file is never created. Raises
    :class:`errors.ProjectsDBUnreadable` for a :func:`errors.transient` error (the projects exist but cannot be read just
    now: for :func:`read_again`, else said; a lock is said at once), ``OSError`` when its folder cannot be examined (a permission refused).
    """
    path = paths.projects_db_path(home)
    try:
        with closing(connect_ro(path)) as conn:
            rows = conn.execute(
                # Hermes' own order (projects_db.list_projects): creation time, then insertion for a tie.
                "SELECT id, slug, name, primary_path, archived FROM projects ORDER BY created_at ASC, rowid ASC"
            ).fetchall()
            folder_rows = conn.execute(
                "SELECT project_id, path, is_primary FROM project_folders ORDER BY is_primary DESC, added_at ASC, path ASC"
            ).fetchall()
    except FileNotFoundError:
        return ProjectList((), False)
    except sqlite3.DatabaseError as exc:  # opening it or reading it
        _raise_if_transient(path, exc)
        note = f"projects.db unreadable: {exc}"
        logger.warning("projects.db unreadable (%s): %s", path, exc, extra=errors.said_as(note))
        return ProjectList((), False, note)
    folders: dict[str, list[attribution.ProjectFolder]] = {}
    for project_id, fpath, is_primary in folder_rows:
        if isinstance(fpath, str) and fpath:
            folders.setdefault(project_id, []).append(attribution.ProjectFolder(fpath, bool(is_primary)))
    projects = tuple(
        attribution.ProjectRecord(
            id=str(pid),
            name=str(name or ""),
            slug=str(slug or ""),
            primary_path=primary if isinstance(primary, str) and primary else None,
            archived=bool(archived),
            folders=tuple(folders.get(pid, ())),
        )
        for pid, slug, name, primary, archived in rows
    )
    return ProjectList(projects, True)


def _raise_if_transient(path: Path, exc: sqlite3.DatabaseError) -> None:
    """Raise :class:`errors.ProjectsDBUnreadable` when ``exc``, met reading projects.db at ``path``, is
    :func:`errors.temporary` (a disk I/O error, or a lock held past the busy timeout)."""
    if errors.temporary(exc):
        what = "busy (locked by another process)" if errors.locked(exc) else "unreadable for a moment"
        raise errors.unreadable(errors.ProjectsDBUnreadable, f"projects database {what}: {exc}", path, exc) from None


def projects_as_known(home: Path) -> ProjectList:
    """:func:`load_projects`, with a transient error said in the list's note (``available=False``) instead of raised:
    for reports and choices, which show what they can. Raises ``OSError`` as :func:`load_projects` does."""
    try:
        return load_projects(home)
    except errors.ProjectsDBUnreadable as exc:
        return ProjectList((), False, str(exc))


def state_counts(conn: sqlite3.Connection) -> tuple[int, int]:
    """``(sessions, messages)`` rows in state.db, whatever their kind."""
    sessions = int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0])
    messages = int(conn.execute("SELECT count(*) FROM messages").fetchone()[0])
    return sessions, messages


SCOPE_SQL = "m.session_id IN (SELECT value FROM json_each(?))"


def compacted_in_place(conn: sqlite3.Connection, session_id: str) -> bool:
    """Whether a compaction archived messages of the session in place (``compression.in_place``, on in Hermes' own
    config): rows that left its live context, kept for its transcript. One seek of Hermes' (session, active) index."""
    return conn.execute("SELECT 1 FROM messages m WHERE m.session_id = ? AND m.active = 0 AND m.compacted = 1 LIMIT 1",
                        (session_id,)).fetchone() is not None


#: A row's role and text as one value (the length makes it unambiguous): SQLite looks a single value up in a list
#: subquery's index, where a row value ``(role, content) IN (SELECT ...)`` scans the list for each row.
TURN = "{t}.role || length({t}.content) || ':' || {t}.content"


def context_copies_sql(scope: Scope) -> tuple[str, list[Any]]:
    """``(condition, params)`` true of a row (``messages`` as ``m``) of the asking conversation's past
    (``scope.past``) whose role and text a live row of the asking session repeats (the question asked now, a turn a
    compaction carried forward with a new time, the history a branch copied at the fork): still the conversation's
    context, not history to find. User and assistant rows with text (a turn that only called tools has none); tool
    calls are not compared, as the desktop's branch copies a turn's text without them. Tool output is not compared:
    the live context's logs would be read whole for every search (a log a branch copied can be a hit, the output
    the asker holds). The live rows are read once a statement, through Hermes' (session, active) index, into the
    list each candidate is looked up in: the cost is the live context's rows plus the candidates, never their
    product. ``("0", [])`` when the scope searches none of its past. The same text said again after a compaction
    repeats its earlier copy too, which is then left out."""
    if not scope.past or scope.current is None:
        return "0", []
    return ("(m.session_id IN (SELECT value FROM json_each(?)) AND m.role IN ('user', 'assistant')"
            f" AND COALESCE(m.content, '') != '' AND {TURN.format(t='m')} IN (SELECT {TURN.format(t='l')}"
            " FROM messages l WHERE l.session_id = ? AND l.active = 1 AND l.role IN ('user', 'assistant')))",
            [json.dumps(list(scope.past)), scope.current.id])


def context_copies(conn: sqlite3.Connection, scope: Scope, ids: Sequence[int]) -> set[int]:
    """Of the messages ``ids``, those :func:`context_copies_sql` is true of. Raises ``sqlite3`` errors."""
    sql, params = context_copies_sql(scope)
    if sql == "0" or not ids:
        return set()
    return {int(r[0]) for r in conn.execute(f"SELECT m.id FROM messages m WHERE m.id IN (SELECT value FROM json_each(?))"
                                            f" AND {sql}", [json.dumps(list(ids)), *params])}


def live_ids(conn: sqlite3.Connection, session_id: str) -> set[int]:
    """The ids of the session's live rows, from Hermes' (session, active) index alone (no row read)."""
    return {int(r[0]) for r in conn.execute("SELECT m.id FROM messages m WHERE m.session_id = ? AND m.active = 1",
                                            (session_id,))}


def max_message_id(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT max(id) FROM messages").fetchone()
    return int(row[0] or 0)


#: What ``str.strip()`` removes (every character ``str.isspace()`` accepts), as SQLite's TRIM is told it.
_BLANKS = "char(" + ", ".join(str(c) for c in range(0x3001) if chr(c).isspace()) + ")"
_PARTS = "CAST(substr(CAST(m.content AS BLOB), 7) AS TEXT)"  # a multimodal row's JSON, after its prefix
def _has_text(plain: str) -> str:
    """The SQL condition that a row's content has text as :func:`shown_texts` reads it (:func:`stored_text.text_of`,
    then ``strip()``): ``plain`` (the test of plain content), or multimodal content with a text part not blank
    (or not a JSON list: read as it is); and the row is not Hermes' note to the model or its compaction summary,
    which read as no text (:data:`stored_text.NOTE_ROW_SQL`). Nested CASEs keep SQLite from parsing JSON that is
    not valid."""
    return (
        f"(CASE WHEN NOT COALESCE(substr(CAST(m.content AS BLOB), 1, 6) = X'{stored_text.JSON_PREFIX.encode().hex()}', 0) "
        f"THEN {plain} WHEN NOT json_valid({_PARTS}) THEN 1 "
        f"WHEN json_type({_PARTS}) != 'array' THEN 1 ELSE EXISTS (SELECT 1 FROM json_each({_PARTS}) j WHERE TRIM(CASE "
        f"WHEN j.type = 'object' THEN CASE WHEN json_type(j.value, '$.text') = 'text' THEN json_extract(j.value, '$.text') "
        f"END END, {_BLANKS}) != '') END) AND NOT {stored_text.NOTE_ROW_SQL}"
    )


#: Whether a row has text as it is embedded: plain content not all blank.
HAS_TEXT = _has_text(f"TRIM(COALESCE(m.content, ''), {_BLANKS}) != ''")
#: :data:`HAS_TEXT` for a walk that may pass many rows (previews): plain content with a non-blank among its first
#: 1,024 characters, so a long run of blanks costs no more than a short one (text after 1,024 blanks is passed).
SHOWS_TEXT = _has_text(f"TRIM(substr(COALESCE(m.content, ''), 1, 1024), {_BLANKS}) != ''")


def message_id_counter(conn: sqlite3.Connection) -> int:
    """The highest message id Hermes has handed out: the AUTOINCREMENT counter (``sqlite_sequence``), at least the
    highest id there is. It only grows, unless state.db is restored from an older copy (which hands out the lost
    ids again)."""
    try:
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").fetchone()
    except sqlite3.OperationalError:  # no AUTOINCREMENT row written yet: no sqlite_sequence table
        row = None
    return max(int(row[0]) if row and row[0] is not None else 0, max_message_id(conn))


@contextmanager
def one_snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """Every read of ``conn`` inside sees one state of state.db (a read transaction; never nested: the reads of
    state.db open no other). Raises ``sqlite3`` errors."""
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.rollback()  # read-only: nothing to keep


def points_at(conn: sqlite3.Connection, targets: Sequence[int]) -> list[tuple[int, float]]:
    """``(id, timestamp)`` of the message with the highest id at or below each of ``targets`` that has one (the
    ids a :mod:`state_history` keeps), in the order of ``targets``; one rowid seek each."""
    out = []
    for target in targets:
        row = conn.execute("SELECT id, timestamp FROM messages WHERE id <= ? ORDER BY id DESC LIMIT 1", (int(target),)).fetchone()
        if row is not None:
            out.append((int(row[0]), float(row[1])))
    return out


def message_timestamps(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, float]:
    """``{id: timestamp}`` of those of the messages ``ids`` that exist."""
    return {int(r[0]): r[1] for r in conn.execute(
        "SELECT m.id, m.timestamp FROM messages m WHERE m.id IN (SELECT value FROM json_each(?))",
        (json.dumps([int(i) for i in ids]),))}


def shown_texts(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, tuple[str, str]]:
    """``{id: (session id, text)}`` of those of the messages ``ids`` the vector index may hold (as
    :func:`index_reads.indexable_row`, told once the text is read), the text as it is embedded. An id left out (deleted,
    rewound, emptied) is never sent to a provider (:func:`visible_of`: the index command reads its texts a page at a
    time). Raises ``sqlite3`` errors."""
    shown, told = visible_of(conn, ids)
    rows = conn.execute(
        f"SELECT m.id, m.session_id, m.content, m.role FROM messages m WHERE m.id IN (SELECT value FROM json_each(?))"
        f" AND {shown} AND m.role IN ('user', 'assistant')", (json.dumps([int(i) for i in ids]), *told))
    out = {}
    for mid, sid, content, role in rows:
        text = stored_text.text_of(content, role)
        if text.strip():
            out[int(mid)] = (str(sid), text)
    return out


#: Parts of the recall tools' names, one in each (``RECALL_TOOLS``): tool calls holding none of them call no
#: recall tool, told inside SQLite so that other calls' JSON never reaches Python (which tells the rest exactly).
_RECALL_NAME_PARTS = ("project_", "session_search")


def _may_call_recall(column: str) -> str:
    """The SQL condition that ``column`` (tool calls JSON) holds one of ``_RECALL_NAME_PARTS``."""
    return "(" + " OR ".join(f"instr({column}, '{part}') > 0" for part in _RECALL_NAME_PARTS) + ")"


def recall_questions(conn: sqlite3.Connection, ids: Sequence[int]) -> set[int]:
    """Which of ``ids`` are user turns answered by a recall: the session's next message calls a recall tool (not
    Hermes' notices of background work: tool output, :func:`stored_text.role_of`).

    Such a turn is an earlier question, not history (verbatim, it would outrank its own answer). "Next" is in
    (timestamp, id) order, the one Hermes' index seeks to; it differs from id order only where the clock
    stepped back. One statement. Raises ``sqlite3`` errors.
    """
    user_sql, user = stored_text.roles_sql(("user",), display=layout_of(conn).display)
    sql = f"""
        SELECT m.id, (SELECT CASE WHEN {_may_call_recall("n.tool_calls")} THEN n.tool_calls END FROM messages n
                      WHERE n.id = ({_NEXT_SQL}))
        FROM messages m WHERE m.id IN (SELECT value FROM json_each(?)) AND {user_sql}
    """
    out = set()
    for mid, next_calls in conn.execute(sql, (json.dumps([int(i) for i in ids]), *user)):
        if next_calls and _recall_calls(next_calls):
            out.add(int(mid))
    return out


def recall_echoes(conn: sqlite3.Connection, ids: Sequence[int]) -> set[int]:
    """Which of ``ids`` are assistant replies echoing an earlier recall (:func:`echo.shows_recall` or :func:`echo.quotes`).

    A reply showing a recall's marks is an echo wherever it is; otherwise when it quotes a recall answer among
    the ``ECHO_REACH`` messages before it (:func:`recall_answers`). Raises ``sqlite3`` errors.
    """
    replies = conn.execute(
        "SELECT m.id, m.content FROM messages m WHERE m.id IN (SELECT value FROM json_each(?)) AND m.role = 'assistant'",
        (json.dumps([int(i) for i in ids]),),
    )
    out = set()
    unmarked: dict[int, str] = {}
    for mid, content in replies:
        text = stored_text.text_of(content)
        if echo.shows_recall(text):
            out.add(int(mid))
        else:
            unmarked[int(mid)] = text
    for mid, found in recall_answers(conn, list(unmarked)).items():
        if echo.quotes(unmarked[mid], [runs for _, runs in found]):
            out.add(mid)
    return out


ECHO_REACH = 32  # messages before a reply where the recall it may quote is looked for


def _in_order_sql(anchor: str, *, back: bool, limit: str) -> str:
    """SQL for the ids of up to ``limit`` messages of the session of message ``anchor`` (a table alias) next to it
    in (timestamp, id) order, before it with ``back``, from Hermes' (session_id, timestamp) index alone. Two seeks
    merged in order, into ``anchor``'s clock tick (the index ends each entry with the row id) and past the tick,
    so that the rows read are the ones asked for whatever shares a timestamp: one condition
    ``timestamp <= t AND (timestamp < t OR id < i)`` bounds no seek by id, and steps through the whole tick."""
    way, order = ("<", " DESC") if back else (">", "")
    return f"""SELECT id FROM (
    SELECT b.id, b.timestamp FROM messages b WHERE b.session_id = {anchor}.session_id AND b.timestamp = {anchor}.timestamp AND b.id {way} {anchor}.id
    UNION ALL SELECT b.id, b.timestamp FROM messages b WHERE b.session_id = {anchor}.session_id AND b.timestamp {way} {anchor}.timestamp
    ORDER BY 2{order}, 1{order} LIMIT {limit})"""


#: The ``ECHO_REACH`` (first parameter) message ids of the session of message ``r`` before it in (timestamp, id)
#: order. Rewound and hidden rows count: the window only weighs visible hits down.
_WINDOW_SQL = _in_order_sql("r", back=True, limit="?1")

#: The id of the message of the session of message ``m`` right after it in (timestamp, id) order.
_NEXT_SQL = _in_order_sql("m", back=False, limit="1")

#: ``(reply, row, tool calls)`` of each assistant row in the window of each of the replies ``?2`` whose calls may
#: name a recall tool; no content read.
_WINDOW_CALLS_SQL = f"""
    SELECT r.id, m.id, m.tool_calls FROM messages r JOIN messages m ON m.id IN ({_WINDOW_SQL})
    WHERE r.id IN (SELECT value FROM json_each(?2)) AND m.role = 'assistant' AND {_may_call_recall("m.tool_calls")}"""

#: ``(id, tool name, content, keys)`` of the tool rows among the ``n`` messages right after row ``c`` and before
#: reply ``r``, for each ``[c, n, r]`` of ``?`` (``c`` in ``r``'s window: fewer than ``ECHO_REACH`` rows apart);
#: ``keys``: a JSON array of the positions in ``?`` of the triples that reached the row. The rows between are read
#: from the index alone, in three seeks that each reach only rows between ``c`` and ``r`` (a clock tick shared with
#: ``c`` or ``r`` bounded by row id, the ticks between them), whatever shares a timestamp; their content is read
#: only for the tool rows kept, once each.
_ANSWERS_SQL = """
    WITH p AS (SELECT j.key AS k, json_extract(j.value, '$[1]') AS n, c.session_id AS s, c.timestamp AS ct, c.id AS ci,
                      r.timestamp AS rt, r.id AS ri
               FROM json_each(?) j JOIN messages c ON c.id = json_extract(j.value, '$[0]')
               JOIN messages r ON r.id = json_extract(j.value, '$[2]'))
    SELECT t.id, t.tool_name, t.content, f.keys FROM (
        SELECT id, json_group_array(k) AS keys FROM (
            SELECT k, id, n, row_number() OVER (PARTITION BY k ORDER BY timestamp, id) AS at FROM (
                SELECT p.k, p.n, a.id, a.timestamp FROM p JOIN messages a ON a.session_id = p.s AND a.timestamp = p.ct
                    AND a.id > p.ci AND a.id < CASE WHEN p.rt = p.ct THEN p.ri ELSE 9223372036854775807 END
                UNION ALL SELECT p.k, p.n, a.id, a.timestamp FROM p JOIN messages a ON a.session_id = p.s
                    AND a.timestamp > p.ct AND a.timestamp < p.rt
                UNION ALL SELECT p.k, p.n, a.id, a.timestamp FROM p JOIN messages a ON a.session_id = p.s
                    AND a.timestamp = p.rt AND a.id < p.ri WHERE p.rt > p.ct))
        WHERE at <= n GROUP BY id) f
    JOIN messages t ON t.id = f.id WHERE t.role = 'tool'"""


def recall_answers(conn: sqlite3.Connection, replies: Sequence[int]) -> dict[int, list[tuple[int, frozenset[tuple[str, ...]]]]]:
    """``{reply id: [(message id, runs)]}``: for each of the message ids ``replies``, the recall tools' answers
    among the ``ECHO_REACH`` messages of its session before it in (timestamp, id) order, by id, with their
    :func:`echo.runs` (``[]`` when none; a reply that does not exist has none).

    Answers are found through the turns that called them: the tool rows among the rows right after a turn whose
    calls name a recall tool (one a call), within a reply's window; a tool row's name lies after its content, so
    telling answers by name would read every log. An answer counts for a reply when the turn that called it lies
    in the reply's window too, whatever other replies are asked with it. At most two statements for all
    ``replies``, the windows read from Hermes' (session_id, timestamp) index. Raises ``sqlite3`` errors.
    """
    out: dict[int, list[tuple[int, frozenset[tuple[str, ...]]]]] = {int(r): [] for r in replies}
    if not out:
        return out
    calls: dict[int, int] = {}  # a calling row -> its recall calls, parsed once however many windows hold it
    follow = []  # [calling row, its calls, reply]: the rows after it in the reply's window that may answer it
    for reply, mid, tool_calls in conn.execute(_WINDOW_CALLS_SQL, (ECHO_REACH, json.dumps(sorted(out)))):
        if mid not in calls:
            calls[mid] = len(_recall_calls(tool_calls))
        if calls[mid]:
            follow.append([int(mid), calls[mid], int(reply)])
    if not follow:
        return out
    held: dict[int, dict[int, frozenset[tuple[str, ...]]]] = {}
    for tid, tool_name, content, keys in conn.execute(_ANSWERS_SQL, (json.dumps(follow),)):
        if tool_name in RECALL_TOOLS and isinstance(content, str) and (snippets := echo.recall_snippets(content)):
            runs = echo.runs(snippets)
            for key in json.loads(keys):
                held.setdefault(follow[key][2], {})[int(tid)] = runs
    for reply, found in held.items():
        out[reply] = sorted(found.items())
    return out


def earlier_recalls(conn: sqlite3.Connection, ids: Sequence[int]) -> set[int]:
    """Which of ``ids`` are earlier recalls, not project history: user turns a recall answered
    (:func:`recall_questions`) and assistant replies echoing one (:func:`recall_echoes`)."""
    return recall_questions(conn, ids) | recall_echoes(conn, ids)


def _recall_calls(tool_calls: Any) -> list[Any]:
    """The calls of ``tool_calls`` JSON when one of them calls a recall tool (its answers follow, one per call); ``[]``
    when none does."""
    calls = _parsed_calls(tool_calls) or []
    return calls if any(_call_name(c) in RECALL_TOOLS for c in calls) else []


def _parsed_calls(tool_calls: Any) -> list[Any] | None:
    """``tool_calls`` JSON as a list when it may call a recall tool; ``None`` when it cannot or is not a list."""
    raw = tool_calls if isinstance(tool_calls, str) else str(tool_calls)
    if not any(name in raw for name in RECALL_TOOLS):
        return None
    try:
        calls = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser
        return None
    return calls if isinstance(calls, list) else None


def fetch_messages(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, MessageRow]:
    """Message rows by id; ``text`` is the searchable text (content, tool name, tool call JSON), ``role`` the role
    it is read as (:func:`stored_text.role_of`)."""
    if not ids:
        return {}
    kind = "m.display_kind" if layout_of(conn).display else "NULL"
    sql = f"""
        SELECT m.id, m.session_id, m.role, m.content, m.tool_name, m.tool_calls, m.timestamp, {kind}
        FROM messages m WHERE m.id IN (SELECT value FROM json_each(?))
    """
    out: dict[int, MessageRow] = {}
    for mid, sid, role, content, tool_name, tool_calls, ts, display_kind in conn.execute(sql, (json.dumps(list(ids)),)):
        body = stored_text.text_of(content, role or "")
        calls = _calls_text(tool_name, tool_calls) if tool_name or tool_calls else ""
        text = "" if tool_name in RECALL_TOOLS else _joined(body, calls)
        whole = content is None or body == content  # read as stored
        out[int(mid)] = MessageRow(int(mid), sid, stored_text.role_of(role or "", content, display_kind), text, ts,
                                   calls if text.endswith(calls) else "", whole)
    return out


def _joined(text: str, calls: str) -> str:
    """A row's text and its calls' text as one searchable text."""
    return f"{text} {calls}".strip() if calls else text


def _calls_text(tool_name: Any, tool_calls: Any) -> str:
    """The tool name and tool-call JSON of a row as its searchable text has them (recall tools' calls left out)."""
    calls = _without_recall_calls(tool_calls) if tool_calls else ""
    return " ".join(str(x) for x in (tool_name, calls) if x)


def _without_recall_calls(tool_calls: Any) -> str:
    """``tool_calls`` JSON with the recall tools' calls removed ("" when none is left)."""
    calls = _parsed_calls(tool_calls)
    if calls is None:
        return tool_calls if isinstance(tool_calls, str) else str(tool_calls)
    kept = [c for c in calls if _call_name(c) not in RECALL_TOOLS]
    if len(kept) == len(calls):
        return tool_calls if isinstance(tool_calls, str) else str(tool_calls)
    return json.dumps(kept, ensure_ascii=False) if kept else ""


def _call_name(call: Any) -> str:
    if not isinstance(call, dict):
        return ""
    function = call.get("function")
    name = function.get("name") if isinstance(function, dict) else call.get("name")
    return name if isinstance(name, str) else ""

