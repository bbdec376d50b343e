"""IO shell: what the vector index should hold, read from state.db by message id (no text leaves SQLite).

Reads of many rows by id go ``PAGE_IDS`` ids at a time, in ascending id order (the file's row order), each page a
statement and so a read transaction of its own: in rollback-journal mode (Hermes 0.21 on an SQLite with the
WAL-reset bug) a reader holds Hermes' commits back, and a large project's check reads about 100,000 rows (4.6 s on a
cold page cache at 300,000 messages, where Hermes' writers wait 1 s before they retry). A row that changes between
pages is read as it is then; what that can miscount costs a search speed, never a wrong answer (every hit is checked
against state.db before it is shown).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from . import filters, store
from .records import Scope

PAGE_IDS = 4096  # ids whose rows one statement reads (a page; see the module's docstring)

_OTHER_ROLE_SQL = "m.role NOT IN ('user', 'assistant')"


#: A page's ids, as a paged statement names them (the rows it reads are among them: :data:`PAGE`).
PAGE = "SELECT id FROM page"


def _paged(conn: sqlite3.Connection, sql: str, ids: Sequence[int], *params: Any) -> Iterator[Any]:
    """The rows of ``sql`` over every page of ``ids``, ascending: ``sql`` reads the page's ids from the table
    ``page`` (:data:`PAGE`), its parameters ``params``, and may ask which rows Hermes shows with :func:`_page_visible`
    (a large clock tick's rows told apart once for every page: ``ticks``). Inside a transaction the caller holds,
    every page reads in it. Raises ``sqlite3`` errors."""
    ordered = sorted(int(i) for i in ids)
    copies = store.ticks_of(conn)
    for start in range(0, len(ordered), PAGE_IDS):
        page = ordered[start : start + PAGE_IDS]
        yield from conn.execute(f"WITH page(id) AS (SELECT value FROM json_each(?)), told(id) AS (SELECT value FROM"
                                f" json_each(?)), shown(id) AS (SELECT value FROM json_each(?)) {sql}",
                                (json.dumps(page), *copies.told(page), *params)).fetchall()


def _page_visible(conn: sqlite3.Connection) -> str:
    """:func:`store.visible` of a row of a page :func:`_paged` reads: an archived row of a large clock tick told apart
    with its tick once for every page (``ticks``; a tick of T rows sorted for each page it spans cost T x T / 4,096)."""
    return store.layout_of(conn).visible_told_sql("m.id IN (SELECT id FROM told)", "SELECT id FROM shown")


def indexable_row(conn: sqlite3.Connection, among: str | None = None) -> str:
    """The SQL condition for a row the vector index should hold: a visible user or assistant message with text
    as it is embedded (:data:`store.HAS_TEXT`: a row of blanks or images only, or Hermes' note to the model, would
    count as missing for ever). ``among``: as :func:`store.visible` takes it."""
    return _indexable(store.visible(conn, among))


def _indexable(visible: str) -> str:
    """:func:`indexable_row` with ``visible`` the SQL condition that the row is shown."""
    return f"m.role IN ('user', 'assistant') AND {visible} AND {store.HAS_TEXT}"


def scope_message_ids(conn: sqlite3.Connection, scope: Scope) -> str:
    """Every message id of the scope's sessions, comma-separated, in no particular order ("" when none), negated
    when the message is not active (rewound, or archived by a compaction). Read from Hermes' (session, active)
    index alone, in one statement: no message row is read."""
    row = conn.execute(f"SELECT group_concat(CASE WHEN m.active = 1 THEN m.id ELSE -m.id END) FROM messages m"
                       f" WHERE {store.SCOPE_SQL}", (scope.ids_json,)).fetchone()
    return str(row[0] or "")


def count_indexable(conn: sqlite3.Connection, scope: Scope) -> int:
    """How many messages of the scope the vector index should hold (:func:`indexable_row`), read a page at a
    time. Raises ``sqlite3`` errors."""
    ids = [abs(int(i)) for i in scope_message_ids(conn, scope).split(",") if i]
    return sum(int(r[0]) for r in _paged(
        conn, f"SELECT count(*) FROM messages m WHERE m.id IN ({PAGE}) AND {_indexable(_page_visible(conn))}", ids))


def sort_out(conn: sqlite3.Connection, ids: Sequence[int]) -> list[int]:
    """The message ids ``ids`` sorted out, ascending: a row :func:`indexable_row` keeps as its id, one of another
    role (never indexed: a role never changes) negated; the others (no text, rewound, deleted) left out. Read a
    page at a time. Raises ``sqlite3`` errors."""
    return [int(r[0]) for r in _paged(
        conn, f"SELECT CASE WHEN {_OTHER_ROLE_SQL} THEN -m.id ELSE m.id END FROM messages m"
        f" WHERE m.id IN ({PAGE}) AND ({_OTHER_ROLE_SQL} OR {_indexable(_page_visible(conn))})", ids)]


def live_message_ids(conn: sqlite3.Connection, ids: Sequence[int]) -> set[int]:
    """Which of ``ids`` are still live, searchable messages (not deleted or rewound), read a page at a time.
    Raises ``sqlite3`` errors."""
    roles_sql, roles = filters.Filters().sql()  # the searchable roles, as every search reads them
    return {int(r[0]) for r in _paged(
        conn, f"SELECT m.id FROM messages m WHERE m.id IN ({PAGE}) AND {roles_sql} AND {_page_visible(conn)}",
        ids, *roles)}


def indexable_ids_above(conn: sqlite3.Connection, scope: Scope, above: int) -> list[int]:
    """Ids of the scope's messages above message id ``above`` that the vector index should hold
    (:func:`indexable_row`), newest first. SQLite is kept on the id range (new messages sit above a watermark),
    not the per-session index. Raises ``sqlite3`` errors."""
    where = f"+{store.SCOPE_SQL} AND {indexable_row(conn, 'SELECT b.id FROM messages b WHERE b.id > ?2')}"
    rows = conn.execute(f"SELECT m.id FROM messages m WHERE {where} AND m.id > ?2", (scope.ids_json, int(above)))
    return sorted((int(r[0]) for r in rows), reverse=True)
