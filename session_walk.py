"""IO shell: a session's messages in Hermes' order, read from where a read starts (``project_history_read``'s
window, ``project_history_recent``'s previews), never the whole session.

Read-only. Hermes orders a session by id. A walk reads at most its count plus its reach of rows Hermes does
not show (:data:`HIDDEN_REACH`), and the copies a compaction left on its way (one seek each; a large clock tick's
rows told apart once, ``ticks``), along the (session_id, id) index, or on 0.19 (none) along the table by id as far
as :data:`SPREAD` allows and on by time: its cost grows with the rows it passes, never with the session beyond them.
Raises ``sqlite3`` errors.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from . import store, stored_text
from .records import MessageRow

#: Rows a walk reads past the ones it keeps (a rewind takes back whole turns) before it stops and says so. A row
#: passed costs a seek and its record's header, where the tested columns' usual values (0, 1, NULL) live.
HIDDEN_REACH = 1000


#: Table rows a walk in id order passes per message asked for, with no (session_id, id) index (0.19): enough for
#: a session written beside another (a gateway's chats), or rows written before the clock stepped back.
SPREAD = 4

_BY_TIME = ("m.timestamp", "m.id")  # Hermes 0.19's (session_id, timestamp) index, time then id


def walk_session(
    conn: sqlite3.Connection, session_id: str, start: tuple[float, int] | None, *, back: bool, count: int,
    reach: int | None = None, role: str | None = None,
) -> tuple[list[int], bool]:
    """The ids of the next ``count`` messages Hermes shows of ``session_id``, in its order (by id; a message stored
    more than once where its first row lies), backwards with ``back``, and whether the walk stopped at its reach:
    ``(ids, stopped)``.

    It starts after ``start`` (a message's ``(timestamp, id)``; ``None``: the session's first message, or last
    with ``back``) and reads ``count`` messages and at most ``reach`` other rows (``reach``: :data:`HIDDEN_REACH`
    unless given), passing the copies of messages shown where an earlier row lies (a compaction's) besides: as many
    as lie on its way, one seek each (a large clock tick's rows told apart once a connection: ``store.ticks_of``). With
    ``role``, only messages read as that role (:func:`stored_text.role_of`) with text as read are kept
    (:data:`store.SHOWS_TEXT`: not Hermes' notes to the model or its compaction summaries); a user or assistant row
    of another role is asked whether it is such a copy only when an earlier row of its clock tick is not live (a
    tool row's is never asked: its time lies past its log). ``stopped``: fewer than ``count`` kept and the session
    has more rows past them.
    """
    if count <= 0:
        return [], False
    reach = HIDDEN_REACH if reach is None else reach
    shape = store.layout_of(conn)
    copies = store.ticks_of(conn)
    kept_sql = shape.rows_sql()
    status: tuple[str, list[Any]] = (f"CASE WHEN {kept_sql} THEN 1 ELSE 0 END", [])
    if role is not None:  # role first: no tool log's content read
        role_sql, roles = stored_text.roles_sql((role,), display=shape.display)
        status = (f"CASE WHEN {role_sql} AND {store.SHOWS_TEXT} AND {kept_sql} THEN 1 WHEN {_MAY_BE_COPY} AND {kept_sql}"
                  " THEN 2 ELSE 0 END", list(roles))
    ids: list[int] = []
    passed = 0  # rows read that are neither kept nor copies
    rows = _session_rows(conn, session_id, start, back=back, span=SPREAD * (count + 1), kept=status)
    for mid, kept in rows:
        if len(ids) + passed >= count + reach:
            return ids, True
        # A message stored more than once (copies a compaction left) is shown where its first row lies, as the row
        # Hermes shows of it; asked only of the rows kept (and of other roles' rows that may be copies), one at a
        # time, as the walk reaches them. A copy is passed without counting: a compaction that carried more rows
        # than the reach would hide every message before them.
        shown = copies.shown_here(mid) if kept else None
        if kept and shown is None:
            continue
        if kept == 1 and shown is not None:
            ids.append(shown)
            if len(ids) == count:
                return ids, False
        else:
            passed += 1
    return ids, False


#: A user or assistant row that may be a copy of a message shown where an earlier row lies: its clock tick holds an
#: earlier row that is not live (compaction archives the rows it copies), read from Hermes' (session_id, active,
#: timestamp) index alone. A tool row is never asked: its time lies past its content, a long log's overflow pages.
_MAY_BE_COPY = ("m.role IN ('user', 'assistant') AND EXISTS (SELECT 1 FROM messages c WHERE c.session_id = m.session_id"
                " AND c.active = 0 AND c.timestamp = m.timestamp AND c.id < m.id)")


def _session_rows(
    conn: sqlite3.Connection, session_id: str, start: tuple[float, int] | None, *, back: bool, span: int,
    kept: tuple[str, list[Any]],
) -> Iterator[tuple[int, int]]:
    """``(id, status)`` of the session's rows after ``start`` in id order (backwards with ``back``), read as they are
    asked for (the caller stops); ``status`` the value of the SQL ``kept[0]`` (its parameters ``kept[1]``).

    Walks the (session_id, id) index where it exists. Else (0.19) the table by id from ``start`` (:func:`_edge`
    for ``None``), passing at most ``span`` rows, then the (timestamp, id) index past them
    (:func:`_by_time_pages`): id order but where the clock stepped back across other rows or pages.
    """
    if store.layout_of(conn).ids_by_session:
        for key, is_kept in _by_index(conn, session_id, start, back=back, cap=None, kept=kept, order=("m.id",)):
            yield key[-1], is_kept
        return
    if start is None:
        first = _edge(conn, session_id, back=back, span=span)
        if first is None:
            return
        since, past = first, "="  # the edge itself is the first row read
    else:
        since, past = start[1], ""
    towards, desc = ("<" if back else ">") + past, " DESC" if back else ""
    sql = (f"SELECT id, kept FROM (SELECT m.id AS id, m.session_id AS sid, CASE WHEN m.session_id = ? THEN {kept[0]} "
           f"ELSE 0 END AS kept FROM messages m WHERE m.id {towards} ? ORDER BY m.id{desc} LIMIT ?) "
           f"WHERE sid = ? ORDER BY id{desc}")
    for mid, is_kept in conn.execute(sql, [session_id, *kept[1], since, span, session_id]):
        yield int(mid), int(is_kept)
    last = conn.execute(f"SELECT m.id FROM messages m WHERE m.id {towards} ? ORDER BY m.id{desc} LIMIT 1 OFFSET ?",
                        (since, span - 1)).fetchone()
    if last is None:  # every row that way was passed: the session has no more
        return
    yield from _by_time_pages(conn, session_id, start, back=back, page=span, kept=kept, passed=int(last[0]))


def _by_time_pages(
    conn: sqlite3.Connection, session_id: str, start: tuple[float, int] | None, *, back: bool, page: int,
    kept: tuple[str, list[Any]], passed: int,
) -> Iterator[tuple[int, int]]:
    """``(id, status)`` of the session's rows after ``start`` along its (timestamp, id) index, leaving out those up
    to id ``passed`` (down to it with ``back``), in pages that double from ``page`` rows, each put in id order.
    Read as asked for, so a caller that stops early pays for a page or two."""
    key = start
    while True:
        rows = list(_by_index(conn, session_id, key, back=back, cap=page, kept=kept, order=_BY_TIME))
        yield from sorted(((k[-1], is_kept) for k, is_kept in rows if (k[-1] < passed if back else k[-1] > passed)),
                          reverse=back)
        if len(rows) < page:  # the session has no more rows that way
            return
        key, page = rows[-1][0], 2 * page


def _by_index(
    conn: sqlite3.Connection, session_id: str, start: tuple[float, int] | None, *, back: bool, cap: int | None,
    kept: tuple[str, list[Any]], order: Sequence[str],
) -> Iterator[tuple[tuple[Any, ...], int]]:
    """``(key, status)`` of the session's rows after ``start`` along the index of ``order`` (columns of ``messages``
    as ``m``, ending in its id), at most ``cap`` (``None``: no limit): ``key`` is the row's values of ``order``, its
    id last; ``status`` the value of the SQL ``kept[0]``."""
    keys = ", ".join(f"{c} DESC" for c in order) if back else ", ".join(order)
    values = () if start is None else start[-len(order):]
    after = f" AND ({', '.join(order)}) {'<' if back else '>'} ({', '.join('?' * len(values))})" if values else ""
    sql = f"SELECT {', '.join(order)}, {kept[0]} FROM messages m WHERE m.session_id = ?{after} ORDER BY {keys} LIMIT ?"
    for *key, is_kept in conn.execute(sql, [*kept[1], session_id, *values, -1 if cap is None else cap]):
        yield (*key[:-1], int(key[-1])), int(is_kept)


def _edge(conn: sqlite3.Connection, session_id: str, *, back: bool, span: int) -> int | None:
    """The id of the session's first row (its last with ``back``) on a state.db without an index on
    (session_id, id): its first row in time, or a row before it by id within ``span`` rows (written before the
    clock stepped back). ``None`` when the session has no rows."""
    desc = " DESC" if back else ""
    seed = conn.execute(f"SELECT m.id FROM messages m WHERE m.session_id = ? ORDER BY m.timestamp{desc}, m.id{desc} "
                        "LIMIT 1", (session_id,)).fetchone()
    if seed is None:
        return None
    sql = (f"SELECT {'max' if back else 'min'}(id) FROM (SELECT m.id AS id, m.session_id AS sid FROM messages m "
           f"WHERE m.id {'>' if back else '<'} ? ORDER BY m.id{'' if back else ' DESC'} LIMIT ?) WHERE sid = ?")
    beyond = conn.execute(sql, (seed[0], span, session_id)).fetchone()[0]
    return int(seed[0] if beyond is None else beyond)


def messages_around(
    conn: sqlite3.Connection, session_id: str, message_id: int | None, before: int, after: int
) -> tuple[list[MessageRow], bool]:
    """Messages Hermes shows of a session around ``message_id``, in the session's order: ``before`` earlier, the
    message, ``after`` later; with ``message_id`` ``None``, the session's first ``after + 1``.

    Returns ``(rows, stopped)`` (``stopped`` as :func:`walk_session`'s, on either side); ``rows`` is empty when
    ``message_id`` is not a message Hermes shows of that session. Texts as :func:`store.fetch_messages` gives them.
    """
    if message_id is None:
        ids, stopped = walk_session(conn, session_id, None, back=False, count=after + 1)
    else:
        shown, told = store.visible_of(conn, [message_id])
        anchor = conn.execute(f"SELECT m.id, CASE WHEN {shown} THEN 1 ELSE 0 END FROM messages m WHERE m.id = ?"
                              " AND m.session_id = ?", (*told, message_id, session_id)).fetchone()
        at = store.ticks_of(conn).first_row(message_id)  # where it is shown
        if anchor is None or not anchor[1] or at is None:
            return [], False
        earlier, cut_before = walk_session(conn, session_id, at, back=True, count=before)
        later, cut_after = walk_session(conn, session_id, at, back=False, count=after)
        ids, stopped = [*reversed(earlier), message_id, *later], cut_before or cut_after
    rows = store.fetch_messages(conn, ids)
    return [rows[i] for i in ids if i in rows], stopped
