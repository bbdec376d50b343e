"""IO shell: which of state.db's sessions make one conversation, read-only, and the conversations most recently active.

A compression continuation (and a delegate's run) continues its parent's conversation; a ``/branch`` and a reset's
child start their own, as Hermes tells them (the markers below). Searches key each hit to its conversation
(:func:`conversation_roots`, :func:`result_keys`), the live context is told from the past (:func:`lineage`), and the
recent list shows each conversation once at its newest session (:func:`recent_conversations`). Every value is an SQL
parameter.
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import sqlite3
from collections.abc import Collection, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

from . import session_walk, store
from .records import RecentSession

# A reset's child (Hermes 0.21: /new in the desktop and TUI, a gateway chat's /reset, idle or daily expiry) keeps
# ``parent_session_id`` for Hermes' own bookkeeping but starts a new conversation: none of its predecessor's
# transcript is carried into it. Hermes marks it ``_reset_from`` in ``model_config``; a row written before the
# marker is told as Hermes tells it (hermes_state_common ``_RESET_CHILD_SQL``): its parent ended at a reset and
# both carry the same gateway routing key. A marker counts where it names the parent: Hermes hands ``model_config``
# on to a compression continuation as it is, so a reset's continuation carries the reset's marker (as its
# compression tells, ``_non_continuation_child_sql``). A marker that is ``null``, or a child with no parent, is no
# reset: 0, never NULL (a NULL would make ``NOT`` of it NULL, dropping the row). ``{c}``: the child's alias.
_RESET_CHILD = (
    "(({c}.model_config LIKE '%\\_reset\\_from%' ESCAPE '\\' AND CASE WHEN json_valid({c}.model_config) "
    "THEN COALESCE(json_extract({c}.model_config, '$._reset_from') = {c}.parent_session_id, 0) ELSE 0 END) "
    "OR (COALESCE({c}.session_key, '') != '' AND EXISTS (SELECT 1 FROM sessions p WHERE p.id = {c}.parent_session_id "
    "AND p.end_reason IN ('session_reset', 'session_switch', 'idle', 'daily', 'suspended', 'resume_pending_expired') "
    "AND p.session_key = {c}.session_key)))"
)

# A branch (``/branch``): a conversation of its own, though its parent may have ended at a compression since. As
# Hermes tells one (hermes_state ``_BRANCH_CHILD_SQL``): marked ``_branched_from`` naming its parent (a branch's
# compression continuation carries the branch's marker, as a reset's does), or, before the marker, started after its
# parent ended ``branched``.
_BRANCH_CHILD = (
    "((s.model_config LIKE '%\\_branched\\_from%' ESCAPE '\\' AND CASE WHEN json_valid(s.model_config) "
    "THEN COALESCE(json_extract(s.model_config, '$._branched_from') = s.parent_session_id, 0) ELSE 0 END) "
    "OR EXISTS (SELECT 1 FROM sessions bp WHERE bp.id = s.parent_session_id AND bp.end_reason = 'branched' "
    "AND s.started_at >= bp.ended_at))"
)

# The asking session's lineage: its ancestors and every descendant of those, across parent links but not a reset's;
# of each, how it ended, its parent and whether it is a branch.
_LINEAGE_SQL = f"""
WITH RECURSIVE
up(id, parent) AS (
    SELECT s.id, CASE WHEN {_RESET_CHILD.format(c="s")} THEN NULL ELSE s.parent_session_id END
    FROM sessions s WHERE s.id = :current
    UNION
    SELECT s.id, CASE WHEN {_RESET_CHILD.format(c="s")} THEN NULL ELSE s.parent_session_id END
    FROM sessions s JOIN up ON s.id = up.parent
),
lineage(id) AS (
    SELECT id FROM up
    UNION
    SELECT c.id FROM sessions c JOIN lineage l ON c.parent_session_id = l.id WHERE NOT {_RESET_CHILD.format(c="c")}
)
SELECT l.id, COALESCE(s.end_reason, ''), COALESCE(s.parent_session_id, ''), {_BRANCH_CHILD}
FROM lineage l LEFT JOIN sessions s ON s.id = l.id
"""





# Of the sessions ``:ids`` (a JSON array), each and every ancestor up the parent links a reset does not cut: ``(id,
# parent, whether a branch)``, each session that has such a parent once. Each session's row is read once: on Hermes
# 0.19 its parent link lies past the system prompt kept in it (an overflow chain of pages).
_UP_SQL = f"""
WITH RECURSIVE up(id, parent, branch) AS (
    SELECT s.id, CASE WHEN {_RESET_CHILD.format(c="s")} THEN '' ELSE COALESCE(s.parent_session_id, '') END, {_BRANCH_CHILD}
    FROM sessions s WHERE s.id IN (SELECT value FROM json_each(:ids))
    UNION
    SELECT s.id, CASE WHEN {_RESET_CHILD.format(c="s")} THEN '' ELSE COALESCE(s.parent_session_id, '') END, {_BRANCH_CHILD}
    FROM up JOIN sessions s ON s.id = up.parent WHERE up.parent != ''
)
SELECT id, parent, branch FROM up WHERE parent != ''
"""


def _links(conn: sqlite3.Connection, ids: Iterable[str]) -> tuple[dict[str, str], set[str]]:
    """``(parent, branches)`` of ``ids`` and every session up their parent links: each one's parent up a link a reset
    does not cut (none: not in ``parent``), and those that are a branch. Asked of state.db once a connection
    (``store.StateConnection.links``: a search's pick, the demotion of its scores and its results ask of the same
    sessions), in one recursive query for the sessions not asked before; linear in the sessions it passes."""
    ids = list(dict.fromkeys(ids))
    memo: dict[str, tuple[str, bool]] = getattr(conn, "links", None) or {}
    if isinstance(conn, store.StateConnection):
        conn.links = memo
    asked = [sid for sid in ids if sid not in memo]
    if asked:
        memo.update({str(r[0]): (str(r[1]), bool(r[2])) for r in conn.execute(_UP_SQL, {"ids": json.dumps(asked)})})
    parent: dict[str, str] = {}
    branches: set[str] = set()
    for node in ids:
        while node not in parent:
            up, branch = memo.setdefault(node, ("", False))  # no row: a session with no parent (a root)
            if not up:
                break
            if branch:
                branches.add(node)
            parent[node] = node = up
    return parent, branches


def conversation_roots(conn: sqlite3.Connection, ids: Collection[str], known: dict[str, str] | None = None,
                       forks: dict[str, str] | None = None) -> dict[str, str]:
    """``{id: the first session of its conversation}`` for the sessions ``ids``: up the parent links (compression
    continuations, branches, delegates), not across a reset (:func:`_links`). ``known``: the roots a caller asked
    before, given every session a walk passes: a newest-first read asks a chain's older sessions of it, not again.
    ``forks``, kept beside ``known``: each session walked -> the last branch its walk up passed (the session itself
    when it is one; "" for none): a branch's compression continuation continues the branch's conversation."""
    known = {} if known is None else known
    asked = list(dict.fromkeys(sid for sid in ids if sid not in known))
    if asked:
        parents, branches = _links(conn, asked)
        known.update(_roots(parents, asked))
        if forks is not None:
            _forks(parents, branches, [*asked, *parents], forks)
    return {sid: known[sid] for sid in ids}


def _forks(parents: Mapping[str, str], branches: AbstractSet[str], ids: Iterable[str], forks: dict[str, str]) -> None:
    """Into ``forks``, for ``ids`` and every session their walks pass, the nearest branch up the parent links
    (``branches``), itself included ("" for none). Linear: a walk stops at a session already in ``forks``."""
    for sid in ids:
        path: dict[str, None] = {}
        node = sid
        while node not in forks and node not in branches and node in parents and node not in path:
            path[node] = None
            node = parents[node]
        fork = forks.get(node, node if node in branches else "")
        forks.setdefault(node, fork)
        for passed in path:
            forks[passed] = fork


def result_keys(conn: sqlite3.Connection, hits: Mapping[int, str],
                known: Mapping[int, str] | None = None) -> tuple[dict[int, str], dict[str, str]]:
    """``({message: the conversation it stands for}, {session: its own conversation})`` for ``hits`` (``{message: its
    session}``), what a search shows one result of: a session and its compression continuations are one conversation
    (:func:`conversation_roots`); so is a branch family for what a branch copied from the session it left (the
    history Hermes copies at the fork), while a branch's other messages, what it went on to decide, stand for the
    branch's own conversation. One recursive query, and one statement for each session branched from among the hits
    (its user and assistant rows read once); raises ``sqlite3`` errors. ``known``: keys asked before (by the keyword
    leg's pick), not asked again."""
    known = known or {}
    sessions = list(dict.fromkeys(hits.values()))
    parent, branches = _links(conn, sessions)
    family = _roots(parent, sessions)
    own = _roots({sid: p for sid, p in parent.items() if sid not in branches}, [*sessions, *parent.values()])
    keys = {mid: known.get(mid, own[sid]) for mid, sid in hits.items()}
    # A copy is followed up fork by fork: what a branch of a branch copied from its parent, that parent had copied from
    # the session it left in turn. The sessions left are asked deepest first, each once with every hit waiting on it
    # (a hit climbs only to shallower ones): a chain of n nested branches costs n statements, not n per level.
    depth: dict[str, int] = {}
    for sid in parent:
        path, node = [], sid
        while node not in depth and node in parent and node not in path:
            path.append(node)
            node = parent[node]
        base = depth.get(node, 0)
        for k, passed in enumerate(reversed(path), 1):
            depth[passed] = base + k
    waiting: dict[str, list[int]] = {}  # a session some branch left -> the hits keyed to that branch
    for mid, sid in hits.items():
        if own[sid] != family[sid] and mid not in known:
            waiting.setdefault(parent[own[sid]], []).append(mid)
    heap = [(-depth.get(left, 0), left) for left in waiting]
    heapq.heapify(heap)
    done: set[str] = set()
    # Hits of one text found copied at one fork climb on as one (the first of them): above it they are keyed alike.
    # Else the hits of a nested chain's copies of one turn, one a branch, each climbed every fork above its own
    # (n²/2 ids asked of n statements).
    same: dict[int, int] = {}  # a hit -> the hit of its text that climbs for it
    while heap:
        left = heapq.heappop(heap)[1]
        inside = waiting.pop(left, [])
        done.add(left)
        copied = _copies_of(conn, inside, left) if inside else {}
        for mid, first in copied.items():
            if mid != first:
                same[mid] = first
                continue
            keys[mid] = up = own.get(left, left)
            if up != family[hits[mid]] and up in parent and parent[up] not in done:  # done: a cycle of links
                if parent[up] not in waiting:
                    heapq.heappush(heap, (-depth.get(parent[up], 0), parent[up]))
                waiting.setdefault(parent[up], []).append(mid)
    for mid in same:  # a chain of hits each climbing for the one before: each walked once
        climbed, first = [], mid
        while first in same:
            climbed.append(first)
            first = same[first]
        for hit in climbed:
            same[hit] = first
            keys[hit] = keys[first]
    return keys, {sid: own[sid] for sid in sessions}


def _roots(parent: Mapping[str, str], ids: Iterable[str]) -> dict[str, str]:
    """``{id: the last session up its parent links}`` for ``ids`` and every session passed (``parent``: session ->
    its parent); a cycle ends a walk. Linear: a chain's sessions are walked once, however many of them are asked."""
    roots: dict[str, str] = {}
    for sid in ids:
        path: dict[str, None] = {}  # the sessions walked, in order (a dict: a deep chain is walked in linear time)
        node = sid
        while node not in roots and node in parent and node not in path:
            path[node] = None
            node = parent[node]
        root = roots.get(node, node)
        for passed in path:
            roots[passed] = root
        roots.setdefault(sid, root)
    return roots


def branch_own(conn: sqlite3.Connection, rows: Mapping[int, str], forks: Mapping[str, str]) -> set[int]:
    """Of ``rows`` (``{message: its session}``), those that are not copies of the session their branch left (``forks``,
    from :func:`conversation_roots`: a session's branch, itself or the one its compressions continue): what the branch
    went on to say, its own conversation's (:func:`result_keys`, for a read that keys sessions by
    :func:`conversation_roots`). One statement, and one for each session branched from among them (its rows read
    once)."""
    branch = {mid: forks[sid] for mid, sid in rows.items() if forks.get(sid)}
    if not branch:
        return set()
    left = {str(r[0]): str(r[1]) for r in conn.execute(
        "SELECT s.id, s.parent_session_id FROM sessions s WHERE s.id IN (SELECT value FROM json_each(?))",
        [json.dumps(sorted(set(branch.values())))])}
    waiting: dict[str, list[int]] = {}
    for mid, fork in branch.items():
        if left.get(fork):
            waiting.setdefault(left[fork], []).append(mid)
    own: set[int] = set()
    for parent, mids in waiting.items():
        own.update(set(mids) - set(_copies_of(conn, mids, parent)))
    return own


def _copies_of(conn: sqlite3.Connection, ids: Sequence[int], session_id: str) -> dict[int, int]:
    """Of the messages ``ids``, those whose role and text a user or assistant row of ``session_id`` has, or a tool row
    when one of ``ids`` is a tool's output (what a branch copied from the session it left; a log copied at the fork
    is the left conversation's too), each with the first of them of its role and text. One statement: the session's
    rows read once."""
    return {int(r[0]): int(r[1]) for r in conn.execute(
        f"SELECT m.id, min(m.id) OVER (PARTITION BY {store.TURN.format(t='m')}) FROM messages m"
        " WHERE m.id IN (SELECT value FROM json_each(?1)) AND COALESCE(m.content, '') != ''"
        f" AND {store.TURN.format(t='m')} IN (SELECT {store.TURN.format(t='l')} FROM messages l WHERE l.session_id = ?2"
        " AND (l.role IN ('user', 'assistant') OR (l.role = 'tool' AND EXISTS (SELECT 1 FROM messages h"
        " WHERE h.id IN (SELECT value FROM json_each(?1)) AND h.role = 'tool'))))", [json.dumps(list(ids)), session_id])}


def lineage_ids(conn: sqlite3.Connection, session_id: str) -> set[str]:
    """The session, its ancestors and every descendant of those (compression continuations, branches, delegates), a
    reset's predecessor and successors left out (each its own conversation)."""
    return set(_lineage_rows(conn, session_id))


def lineage(conn: sqlite3.Connection, session_id: str) -> tuple[set[str], set[str]]:
    """The sessions of :func:`lineage_ids` as ``(in the asking session's live context, past)``, as Hermes' own search
    tells them. In its context: the sessions of its conversation (:func:`conversation_ids`) but those a compression
    ended; past: those (summarised into their continuation, their messages left the context) and the lineage's
    other conversations: a branch, its parent, its siblings (a branch copied its parent's history at the fork, then
    went its own way). What of the past the live context still repeats is left out of a search
    (``store.context_copies_sql``)."""
    rows = _lineage_rows(conn, session_id)
    own = _conversation(rows, session_id)
    context = {sid for sid in own if sid == session_id or rows[sid][0] != "compression"}
    return context, set(rows) - context


def conversation_ids(conn: sqlite3.Connection, session_id: str) -> set[str]:
    """``session_id``'s conversation: the sessions of its lineage it is joined to by parent links other than a
    branch's (compressions, delegates), its past and its live context."""
    return _conversation(_lineage_rows(conn, session_id), session_id)


def _lineage_rows(conn: sqlite3.Connection, session_id: str) -> dict[str, tuple[str, str, bool]]:
    """``{id: (end reason, parent, is a branch)}`` of the sessions of :func:`lineage_ids`."""
    return {sid: (ended, parent, bool(branch)) for sid, ended, parent, branch in conn.execute(_LINEAGE_SQL, {"current": session_id})}


def _conversation(rows: Mapping[str, tuple[str, str, bool]], session_id: str) -> set[str]:
    """Of the lineage ``rows`` (:func:`_lineage_rows`), the sessions joined to ``session_id`` by links of a child
    that is no branch to its parent."""
    def joined(child: str) -> bool:
        return rows[child][1] in rows and not rows[child][2]

    children: dict[str, list[str]] = {}
    for sid in rows:
        if joined(sid):
            children.setdefault(rows[sid][1], []).append(sid)
    found: set[str] = set()
    todo = [session_id] if session_id in rows else []
    while todo:
        sid = todo.pop()
        if sid in found:
            continue
        found.add(sid)
        todo.extend(children.get(sid, ()))
        if joined(sid):
            todo.append(rows[sid][1])
    return found


# Of the sessions ``:ids``, each one's compression predecessor ('' for none: its parent did not end at a compression,
# or it is a branch or a reset), start, message count and title. A reset's parent mostly ends otherwise
# ('session_reset', ...), but a stale reset can hang off a parent a compression ended (as Hermes' own
# ``get_compression_family`` tells): its marker keeps it a conversation of its own, as a search reads it.
_SEGMENTS_SQL = f"""
SELECT s.id, CASE WHEN p.end_reason = 'compression' AND NOT {_BRANCH_CHILD} AND NOT {_RESET_CHILD.format(c="s")}
                  THEN p.id ELSE '' END,
       s.started_at, COALESCE(s.message_count, 0), s.title
FROM sessions s LEFT JOIN sessions p ON p.id = s.parent_session_id
WHERE s.id IN (SELECT value FROM json_each(:ids)){{hidden}}
"""


def recent_conversations(
    conn: sqlite3.Connection, session_ids: Sequence[str], *, since: float | None, until: float | None, offset: int, limit: int
) -> tuple[list[RecentSession], int]:
    """Of the conversations of ``session_ids``, the ``limit`` most recently active from ``offset`` on, newest first,
    and how many there are in the window.

    A conversation is a session and its compression continuations among ``session_ids`` (as Hermes' own listing
    follows one to its live tip; a branch and a reset's child are conversations of their own). It is listed at its
    most recently active newest session (one no continuation in ``session_ids`` follows), with the conversation's
    start, messages, and the title of its newest titled session. It is active in ``[since, until)`` when it
    started before ``until`` and its last activity is at or after ``since``. Only the newest sessions' activity is
    read (a compressed session's messages all precede its continuation's): the cost grows with the conversations,
    not with how often they were compressed.
    """
    ids = list(dict.fromkeys(session_ids))
    hidden = " AND s.hidden = 0" if store.layout_of(conn).hidden_sessions else ""  # hidden from Hermes' listing (0.21)
    rows = {str(r[0]): r for r in conn.execute(_SEGMENTS_SQL.format(hidden=hidden), {"ids": json.dumps(ids)})}
    parent = {sid: str(r[1]) for sid, r in rows.items() if r[1] and str(r[1]) in rows}
    root_of = _roots(parent, rows)
    members: dict[str, list[str]] = {}
    for sid in rows:
        members.setdefault(root_of[sid], []).append(sid)
    followed = set(parent.values())
    out: list[RecentSession] = []
    count = 0  # conversations active in the window; an entry is made only for those of the page
    for tip in recent_sessions(conn, [sid for sid in rows if sid not in followed], since=None, until=None, offset=0,
                               limit=len(rows)):
        group = members.pop(root_of[tip.id], None)
        if group is None:  # a newer tip of the conversation came first
            continue
        started = min((rows[sid][2] for sid in group if rows[sid][2] is not None), default=tip.started_at) \
            if until is not None or offset <= count < offset + limit else None
        if (until is not None and (started is None or started >= until)) or (
                since is not None and (tip.last_active is None or tip.last_active < since)):
            continue
        count += 1
        if count <= offset or count > offset + limit:
            continue
        title, node = tip.title, tip.id
        while not title and node in parent:
            node = parent[node]
            title = rows[node][4]
        out.append(dataclasses.replace(tip, title=title, started_at=started, segments=len(group),
                                       message_count=sum(int(rows[sid][3] or 0) for sid in group)))
    return out, count


def recent_sessions(
    conn: sqlite3.Connection, session_ids: Sequence[str], *, since: float | None, until: float | None, offset: int, limit: int
) -> list[RecentSession]:
    """Of ``session_ids``, the ``limit`` most recently active from ``offset`` on, newest first.

    A session is active in ``[since, until)`` when it started before ``until`` and its last message shown
    (looked for past at most ``session_walk.HIDDEN_REACH`` hidden rows; none: its start) is at or after
    ``since``. Sessions hidden from Hermes' listing (``sessions.hidden``, 0.21) are left out.
    """
    shape = store.layout_of(conn)
    hidden = " AND s.hidden = 0" if shape.hidden_sessions else ""
    shown = shape.visible_sql()
    # The newest message shown: the newest live row (one seek of Hermes' (session_id, active, timestamp) index),
    # unless a shown inactive row is newer, looked for only among the newest HIDDEN_REACH inactive rows
    # (``floor``) so that a long rewound tail is not walked. Those rows' copies are told a tick at a time: the
    # live row's tick may hold every row of a session written at one time.
    newer = shape.visible_among_sql("SELECT b.id FROM x AS y JOIN messages b ON b.session_id = y.id AND b.active = 0"
                                    " AND b.timestamp >= y.floor")
    sql = f"""
        WITH live AS MATERIALIZED (
            SELECT s.id, s.title, s.started_at, s.message_count, COALESCE(s.source, '') AS source, (
                SELECT t FROM (SELECT m.timestamp AS t, {shown} AS ok FROM messages m
                               WHERE m.session_id = s.id AND m.active = 1 ORDER BY m.timestamp DESC LIMIT :reach)
                WHERE ok LIMIT 1) AS live
            FROM sessions s WHERE s.id IN (SELECT value FROM json_each(:ids)){hidden}
              AND (:until IS NULL OR s.started_at < :until)
        ), x AS MATERIALIZED (
            SELECT live.*, COALESCE((SELECT f.timestamp FROM messages f WHERE f.session_id = live.id AND f.active = 0
                                       AND f.timestamp > COALESCE(live.live, -1e308)
                                     ORDER BY f.timestamp DESC LIMIT 1 OFFSET :reach), live.live, -1e308) AS floor
            FROM live
        )
        SELECT id, title, started_at, COALESCE((SELECT max(m.timestamp) FROM messages m WHERE m.session_id = x.id
                                                  AND m.active = 0 AND m.timestamp >= x.floor AND {newer}),
                                                 live, started_at) AS last_active, message_count, source
        FROM x ORDER BY last_active DESC, id
    """
    out = []
    for r in conn.execute(sql, {"ids": json.dumps(list(session_ids)), "until": until, "reach": session_walk.HIDDEN_REACH}):
        if since is not None and (r[3] is None or r[3] < since):
            continue
        out.append(RecentSession(r[0], r[1], r[2], r[3], int(r[4] or 0), r[5]))
        if len(out) >= offset + limit:
            break
    return out[offset:]


#: Messages read from each end of a session for its previews (rows of other roles cost little: a row's role lies
#: before its content); none within this many: no preview there. The copies a compaction left of messages shown
#: earlier (``session_walk``) are passed besides: they are not the session's end as Hermes shows it.
PREVIEW_REACH = 400


def session_previews(conn: sqlite3.Connection, session_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Each session's first user and last assistant message that Hermes shows: ``{id: (first_user,
    last_assistant)}``, ``""`` for one not within ``PREVIEW_REACH`` of its end."""
    out: dict[str, tuple[str, str]] = {}
    for sid in session_ids:
        first, _ = session_walk.walk_session(conn, sid, None, back=False, count=1, reach=PREVIEW_REACH, role="user")
        last, _ = session_walk.walk_session(conn, sid, None, back=True, count=1, reach=PREVIEW_REACH, role="assistant")
        rows = store.fetch_messages(conn, first + last)
        out[sid] = (rows[first[0]].text if first and first[0] in rows else "", rows[last[0]].text if last and last[0] in rows else "")
    return out
