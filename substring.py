"""IO shell: reads of a scope's messages by substring (an escaped ``LIKE``), where Hermes' full-text indexes do not
reach: a rebuild in progress or a damaged index, 0.21's tool output past its indexed prefix, CJK words of two characters.

Read-only. Every value is an SQL parameter. Each read is bounded by its caller's budget of rows or of sessions.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence

from . import conversations, fts, store
from .ranking import PER_CONVERSATION_SESSIONS
from .records import Scope

LIKE_BATCH = 2_000  # message ids of consecutive sessions one LIKE query reads


def escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


_LIKE_TEXT = ("m.content", "m.tool_name", "m.tool_calls")


def _likes(needles: Sequence[str]) -> tuple[str, list[str]]:
    """The SQL (an ``OR`` of escaped ``LIKE`` tests, for ``messages`` as ``m``) and parameters of "holds a needle".
    Written before ``fts.row_filters`` in a ``WHERE``: SQLite tests the terms in order, and a row's visibility reads
    the columns past its content and seeks its clock tick, for every row read, where the needles leave a few."""
    patterns = [f"%{escape_like(n)}%" for n in needles]
    return " OR ".join(f"{col} LIKE ? ESCAPE '\\'" for _ in patterns for col in _LIKE_TEXT), [p for p in patterns for _ in _LIKE_TEXT]


def like_in_range(
    conn: sqlite3.Connection, needles: Sequence[str], scope: Scope, low: int, high: int, *, limit: int
) -> list[tuple[int, str]]:
    """Messages of the scope with ids in ``(low, high]`` holding any needle (an escaped, case-insensitive ``LIKE``
    on content, tool name and tool calls), newest first, at most ``limit``: ``[(message id, session id)]``. Reads
    every row of the range, so the caller bounds it."""
    if not needles or high <= low:
        return []
    likes, like_params = _likes(needles)
    shown = store.visible(conn, "SELECT b.id FROM messages b WHERE b.id > ?1 AND b.id <= ?2")
    where, params = fts.row_filters(conn, scope, shown)
    sql = f"""
        SELECT m.id, m.session_id FROM messages m
        WHERE m.id > ?1 AND m.id <= ?2 AND +{store.SCOPE_SQL} AND ({likes}) AND {where}
        ORDER BY m.id DESC LIMIT ?
    """
    rows = conn.execute(sql, [low, high, scope.ids_json, *like_params, *params, limit])
    return [(int(r[0]), r[1]) for r in rows]


def like_newest(
    conn: sqlite3.Connection, needles: Sequence[str], scope: Scope, session_id: str, *, limit: int, read: int
) -> tuple[list[tuple[int, str]], int, bool]:
    """One session's live messages holding any needle (as :func:`like_candidates`), among its newest ``read``
    messages, through the session's own index. ``session_id`` must be one of ``scope``'s (not checked).

    Returns ``(matches, messages read, whether older messages were left unread)``: at most ``limit`` matches,
    newest first.
    """
    if not needles or read <= 0:
        return [], 0, False
    # The newest message left unread, if any: ``read`` entries down Hermes' (session_id, timestamp) index.
    edge = conn.execute("SELECT timestamp, id FROM messages WHERE session_id = ? ORDER BY timestamp DESC, id DESC "
                        "LIMIT 1 OFFSET ?", (session_id, read)).fetchone()
    if edge is None:  # the whole session is read: at most ``read`` messages to count
        read = int(conn.execute("SELECT count(*) FROM messages WHERE session_id = ?", (session_id,)).fetchone()[0])
    likes, like_params = _likes(needles)
    # The rows it reads are among the session's from the edge's clock tick on (its own index: ids only).
    among = "SELECT b.id FROM messages b WHERE b.session_id = ?1" + ("" if edge is None else " AND b.timestamp >= ?2")
    where, params = fts.row_filters(conn, scope, store.visible(conn, among))
    select = f"SELECT m.id, m.session_id FROM messages m WHERE m.session_id = ?1 {{newer}} AND ({likes}) AND {where}"
    if edge is None:
        sql, args = select.format(newer="") + " ORDER BY m.id DESC LIMIT ?", [session_id, *like_params, *params, limit]
    else:  # past the edge: its clock tick by id, and the ticks after it, two seeks (one condition on the timestamp
        # seeks the tick's start and steps through the whole tick, which an imported session's rows may share)
        sql = (select.format(newer="AND m.timestamp = ?2 AND m.id > ?") + " UNION ALL "
               + select.format(newer="AND m.timestamp > ?2") + " ORDER BY 1 DESC LIMIT ?")
        args = [session_id, edge[0], edge[1], *like_params, *params, *like_params, *params, limit]
    rows = conn.execute(sql, args)
    return [(int(r[0]), r[1]) for r in rows], read, edge is not None


def like_candidates(
    conn: sqlite3.Connection,
    needles: Sequence[str],
    scope: Scope,
    ranges: Sequence[tuple[str, int, int]],
    *,
    per_session: int,
    limit: int,
    max_scanned: int,
    want_sessions: int,
) -> tuple[list[tuple[int, str]], bool]:
    """Live messages of the scope holding any needle (an escaped, case-insensitive ``LIKE`` on the text the FTS
    index holds); needs no FTS index (the fallback when one is damaged).

    Sessions are read newest first (``ranges``, from ``lexical.ranges.newest_first``) until ``want_sessions``
    conversations matched (a long compression chain's continuations are one: counted as sessions, they stopped the
    read before the older conversations), ``limit`` rows are found or the sessions' id spans reach ``max_scanned``; a
    session wider than what is left is read newest first as far as that (:func:`like_newest`). Each session keeps its
    newest ``per_session`` matches, a conversation's later sessions ``PER_CONVERSATION_SESSIONS`` sessions' worth
    (the newest; its first session's all). Returns ``([(message id, session id)], cut)``: ``cut`` when a bound stopped it
    with messages unread and fewer than ``want_sessions`` conversations matched.
    """
    if not needles or not ranges:
        return [], False
    likes, like_params = _likes(needles)
    shown = store.visible(conn, "SELECT b.id FROM messages b WHERE b.session_id IN (SELECT sid FROM batch)")
    where, params = fts.row_filters(conn, scope, shown)
    sql = f"""
        WITH batch(sid) AS (SELECT value FROM json_each(?))
        SELECT id, session_id FROM (
            SELECT m.id AS id, m.session_id AS session_id,
                   row_number() OVER (PARTITION BY m.session_id ORDER BY m.id DESC) AS n
            FROM messages m
            WHERE m.session_id IN (SELECT sid FROM batch) AND ({likes}) AND {where}
        ) WHERE n <= ? ORDER BY id DESC
    """
    out: list[tuple[int, str]] = []
    roots: dict[str, str] = {}  # each session's conversation (``conversations.conversation_roots``), walked once
    forks: dict[str, str] = {}  # each session's branch, walked with it
    matched: set[str] = set()  # the conversations kept rows are of
    copies: dict[str, int] = {}  # rows kept of each conversation's later sessions
    scanned = 0
    batch: list[str] = []
    batch_size = 0

    def found(rows: Iterable[tuple[int, str]]) -> None:
        """Keep ``rows`` (newest first) up to ``limit``: of a conversation's later sessions (a compression's
        continuations, each holding a copy of its first turns) ``PER_CONVERSATION_SESSIONS`` sessions' worth, so that
        hundreds of them do not fill ``limit``; its first session's (the originals) all."""
        rows = list(rows)
        keys = conversations.conversation_roots(conn, [sid for _, sid in rows], roots, forks)
        # A branch's own rows (not its copies of the session it left), and its continuations', are the branch's
        # conversation's, as in the index's candidates: counted with the family, a family of 20 branches' copies and
        # decisions filled the family's cap and six branches' decisions were never candidates.
        mine = conversations.branch_own(conn, {mid: sid for mid, sid in rows if keys[sid] != sid}, forks)
        for mid, sid in rows:
            conv = forks[sid] if mid in mine else keys[sid]
            if len(out) < limit and (conv == sid or copies.get(conv, 0) < per_session * PER_CONVERSATION_SESSIONS):
                out.append((mid, sid))
                matched.add(conv)
                copies[conv] = copies.get(conv, 0) + (conv != sid)

    def run() -> None:
        """Read the batch of sessions gathered so far and start a new one."""
        nonlocal batch, batch_size, scanned
        found((int(r[0]), r[1]) for r in conn.execute(sql, [json.dumps(batch), *like_params, *params, per_session]))
        scanned += batch_size
        batch, batch_size = [], 0

    def stop(unread: bool) -> tuple[list[tuple[int, str]], bool] | None:
        """The answer when a bound or enough sessions stop the read here (``unread``: sessions after it); else None."""
        if len(matched) >= want_sessions:
            return out, False
        if len(out) >= limit:  # the rows a query held past the limit were never read
            return out, True
        return (out, unread) if scanned >= max_scanned else None

    for i, (session_id, low, high) in enumerate(ranges):
        unread = i + 1 < len(ranges)
        if high - low + 1 > max_scanned - scanned - batch_size:  # wider than the budget has left: newest first
            if batch:
                run()
                if (done := stop(True)) is not None:
                    return done
            rows, read, older = like_newest(conn, needles, scope, session_id, limit=min(per_session, limit - len(out)),
                                            read=max_scanned - scanned)
            found(rows)
            scanned += read
            if (done := stop(older or unread)) is not None:
                return done
            continue
        batch.append(session_id)
        batch_size += high - low + 1
        if batch_size >= LIKE_BATCH or not unread:
            run()
            if (done := stop(unread)) is not None:
                return done
    return out, False
