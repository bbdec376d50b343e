"""IO shell: a session's messages in Hermes' order, read from where a read starts (``project_history_read``'s
window, ``project_history_recent``'s previews), never the whole session.

Read-only, like every reader of state.db. A walk reads at most its count and its reach of rows Hermes does not
show (:data:`HIDDEN_REACH`), so its cost never grows with the session. Raises ``sqlite3`` errors.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from . import store
from .records import MessageRow

#: Rows a walk of a session reads past the ones it keeps (a rewind takes back whole turns, tool calls and all):
#: a walk that meets this many rows it does not keep stops there, and says so. Each row passed is a seek and a
#: test of columns after ``content``; their usual values (0, 1, NULL) live in the record's header, so a tool
#: log's overflow pages are not read for them.
HIDDEN_REACH = 1000


def walk_session(
    conn: sqlite3.Connection, session_id: str, start: Sequence[Any] | None, *, back: bool, count: int,
    reach: int | None = None, role: str | None = None,
) -> tuple[list[int], bool]:
    """The ids of the next ``count`` messages Hermes shows of ``session_id``, in walk order, and whether the walk
    stopped at its reach: ``(ids, stopped)``.

    The walk follows an index in the session's order (:meth:`layout.Layout.order_sql`) from ``start`` (that
    order's values of a message, which is not included; ``None``: the session's first message, or its last
    with ``back``), backwards with ``back``. It reads at most ``count + reach`` rows and tests only those, so
    its cost never grows with the session (``reach``: :data:`HIDDEN_REACH` unless given). With ``role``, only
    messages of that role with text are kept.
    ``stopped`` is true when it kept fewer than ``count`` of those rows and the session has another row past them
    (one row more is asked for to tell).
    """
    if count <= 0:
        return [], False
    reach = HIDDEN_REACH if reach is None else reach
    order = store.layout_of(conn).order_sql()
    keys = ", ".join(f"{c} DESC" for c in order.split(", ")) if back else order
    after = f" AND ({order}) {'<' if back else '>'} ({', '.join('?' * len(start))})" if start else ""
    kept_sql = store.visible(conn)
    if role is not None:
        kept_sql = f"m.role = ? AND TRIM(COALESCE(m.content, '')) != '' AND {kept_sql}"  # role first: no tool log's content read
    sql = (f"SELECT m.id, CASE WHEN {kept_sql} THEN 1 ELSE 0 END FROM messages m WHERE m.session_id = ?{after} "
           f"ORDER BY {keys} LIMIT ?")
    params = [*([role] if role is not None else []), session_id, *(start or ()), count + reach + 1]
    ids: list[int] = []
    read = 0
    for mid, kept in conn.execute(sql, params):
        read += 1
        if read > count + reach:
            return ids, True
        if kept:
            ids.append(int(mid))
            if len(ids) == count:
                return ids, False
    return ids, False


def messages_around(
    conn: sqlite3.Connection, session_id: str, message_id: int | None, before: int, after: int
) -> tuple[list[MessageRow], bool]:
    """Messages Hermes shows of a session around ``message_id``, in the session's order: ``before`` earlier, the
    message, ``after`` later; with ``message_id`` ``None``, the session's first ``after + 1``.

    Returns ``(rows, stopped)``: ``stopped`` when a side met ``HIDDEN_REACH`` rows Hermes does not show
    (rewound, hidden) before it had its count (:func:`walk_session`). ``rows`` is empty when ``message_id`` is not
    a message Hermes shows of that session. The text is the searchable text (:func:`store.fetch_messages`: recall
    tools' calls and answers left out).
    """
    if message_id is None:
        ids, stopped = walk_session(conn, session_id, None, back=False, count=after + 1)
    else:
        sql = (f"SELECT {store.layout_of(conn).order_sql()}, CASE WHEN {store.visible(conn)} THEN 1 ELSE 0 END "
               "FROM messages m WHERE m.id = ? AND m.session_id = ?")
        anchor = conn.execute(sql, (message_id, session_id)).fetchone()
        if anchor is None or not anchor[-1]:
            return [], False
        earlier, cut_before = walk_session(conn, session_id, anchor[:-1], back=True, count=before)
        later, cut_after = walk_session(conn, session_id, anchor[:-1], back=False, count=after)
        ids, stopped = [*reversed(earlier), message_id, *later], cut_before or cut_after
    rows = store.fetch_messages(conn, ids)
    return [rows[i] for i in ids if i in rows], stopped
