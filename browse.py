"""Browsing a project's history without a query: read around a hit, and list recent sessions.

Two services beside the search, with its scope rules: only sessions of the current conversation's project
(here its own lineage too: reading your own conversation is harmless), read-only, output bounded in messages
and characters, and the historical-data notice on every answer.

* :func:`read_around`: up to ``MAX_AROUND`` messages on each side of one message, within a character budget.
* :func:`recent_sessions`: the project's sessions, most recently active first, with previews cut to
  ``PREVIEW_CHARS``, in pages (up to ``pages.MAX_REACH`` sessions).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from . import answers, conversations, errors, pages, paths, session_rows, session_walk, store, workspace
from .filters import Filters
from .query import parse_query
from .records import Scope
from .snippet import focus

MAX_AROUND = 20
DEFAULT_AROUND = 5
DEFAULT_CHARS = 6_000
MAX_CHARS = 20_000
MIN_CHARS = 500
PREVIEW_CHARS = 240
RECENT_DEFAULT = 5
RECENT_MAX = 10

CUT = " [...cut]"
CUT_BEFORE = "[cut...] "


class NotInProject(errors.StoreError):
    """The session asked for belongs to another project (or none)."""

    code = "not_in_project"


def _clip(text: str, budget: int) -> tuple[str, bool]:
    flat = text.strip()
    if len(flat) <= budget:
        return flat, False
    return flat[: max(budget - len(CUT), 0)].rstrip() + CUT, True


def _part(flat: str, budget: int, start: int) -> tuple[str, dict[str, int]]:
    """``budget`` characters of ``flat`` (markers included) from about ``start``: the part, and which it is
    (``{start, end, length}``, characters of ``flat``). A part that does not start the text begins with
    :data:`CUT_BEFORE`, one that does not end it ends with :data:`CUT`."""
    width = max(budget - len(CUT) - len(CUT_BEFORE), 1)
    start = max(0, min(start, len(flat) - width))
    end = min(len(flat), start + width)
    if start == 0:  # the part starts the text: its budget goes to the text, as a cut from the start
        end = min(len(flat), max(budget - len(CUT), 0))
    elif end == len(flat):
        start = max(0, len(flat) - max(budget - len(CUT_BEFORE), 0))
    text = (CUT_BEFORE if start else "") + flat[start:end] + (CUT if end < len(flat) else "")
    return text, {"start": start, "end": end, "length": len(flat)}


def _anchor_start(flat: str, budget: int, query: str, offset: int | None) -> int:
    """Where the hit's part starts: ``offset`` when given; else where ``query``'s terms match (placed as the search's
    snippet is); else the start."""
    if offset is not None:
        return offset
    if query.strip():
        found = focus(flat, parse_query(query).units, max(budget - len(CUT) - len(CUT_BEFORE), 1))
        if found is not None:
            return found
    return 0


LEFT_OUT = "not project history: an earlier history search or its results, or Hermes' own note to the model"
STOPPED = (f"a side of the window ends after passing {session_walk.HIDDEN_REACH} rewound or hidden messages; the session "
           "may go on past them, beyond what this tool reads")


def _readable(scope: Scope, attributor: workspace.Attributor, conn: Any, target: str, db_key: str) -> bool:
    """Whether ``target`` may be read: a session of the scope that state.db still puts there
    (:meth:`workspace.MembershipCache.still_members`), or of the asking lineage still in the same project (a branch
    moved to another project is that project's to read)."""
    if target in scope.session_ids:
        return target in workspace.membership.still_members(conn, db_key, attributor, scope, [target])
    if scope.current is None or scope.project.is_home or target not in conversations.lineage_ids(conn, scope.current.id):
        return False
    info = session_rows.session_info(conn, target)
    return info is not None and attributor.project_of(info).identity == scope.project.identity


@store.read_again
def read_around(
    *, home: Path, session_id: str = "", cwd: str | None = None, target_session: str, message_id: int | None,
    before: int = DEFAULT_AROUND,
    after: int = DEFAULT_AROUND, max_chars: int = DEFAULT_CHARS, query: str = "", offset: int | None = None,
) -> dict[str, Any]:
    """Messages of ``target_session`` around ``message_id`` (its start when ``None``), for ``session_id``'s
    conversation, or with ``cwd`` that folder's project.

    The hit (``message_id``) longer than the budget is shown in part: from ``offset`` when given, else around the
    best match of ``query``'s terms (a search's question: a long tool log's failing line), else from its start.

    Returns ``{success, session_id, link, title, project, messages: [{message_id, role, when, text, cut?, part?,
    left_out?}], anchor, truncated, stopped?, notice}``: ``truncated`` when the budget cut a message or the
    window, ``part`` (``{start, end, length}``) which characters of a cut message are shown, ``stopped`` as
    :data:`STOPPED`. Raises :class:`NotInProject` for a session of another project,
    :class:`errors.SessionNotFound` for an unknown session or a message not in it.
    """
    before = max(0, min(MAX_AROUND, before))
    after = max(0, min(MAX_AROUND, after))
    max_chars = max(MIN_CHARS, min(MAX_CHARS, max_chars))
    conn = store.open_state_db(home)
    try:
        scope, attributor, _ = workspace.scope_for(conn, home, session_id, cwd)
        details = session_rows.session_details(conn, [target_session]).get(target_session)
        if details is None:
            raise errors.SessionNotFound(f"session not found in state.db: {errors.echo(target_session)}")
        if scope.project.is_home or not _readable(scope, attributor, conn, target_session, paths.state_db_key(home)):
            raise NotInProject(
                f"session {errors.echo(target_session)} is not in this conversation's project; only this project's sessions can be read"
            )
        rows, stopped = session_walk.messages_around(conn, target_session, message_id, before, after)
    finally:
        conn.close()
    if message_id is not None and not any(r.id == message_id for r in rows):
        raise errors.SessionNotFound(f"message {message_id} is not a live message of session {errors.echo(target_session)}")
    anchor = message_id if message_id is not None else (rows[0].id if rows else None)
    # Spend the budget from the anchor outwards, so what is cut is what lies farthest from it.
    order = sorted(range(len(rows)), key=lambda i: (abs(rows[i].id - (anchor or 0)), rows[i].id))
    budget = max_chars
    kept: dict[int, dict[str, Any]] = {}
    truncated = False
    for i in order:
        row = rows[i]
        if budget <= 0:
            truncated = True
            break
        room = budget if row.id != anchor else max(budget, MIN_CHARS)
        flat = row.text.strip()
        part: dict[str, int] | None = None
        if len(flat) <= room:
            text = flat
        elif row.id == anchor:
            text, part = _part(flat, room, _anchor_start(flat, room, query, offset))
        else:
            text = _clip(flat, room)[0]
            part = {"start": 0, "end": len(text) - len(CUT), "length": len(flat)}
        budget -= len(text)
        entry: dict[str, Any] = {"message_id": row.id, "role": row.role, "when": answers.format_when(row.timestamp), "text": text}
        if part is not None:
            entry["cut"], entry["part"] = True, part
        if not row.text.strip():  # a recall's question or answer, a note of Hermes': its text is left out (store.fetch_messages)
            entry["left_out"] = LEFT_OUT
        kept[i] = entry
    messages = [kept[i] for i in sorted(kept)]
    return {
        "success": True,
        "session_id": target_session,
        "link": f"@session:{target_session}",
        "title": details.title,
        "project": scope.project.to_json(),
        "anchor": anchor,
        "messages": messages,
        "truncated": truncated or any(m.get("cut") for m in messages),
        **({"stopped": STOPPED} if stopped else {}),
        "notice": answers.HISTORY_NOTICE,
    }


@store.read_again
def recent_sessions(
    *, home: Path, session_id: str = "", cwd: str | None = None, limit: int = RECENT_DEFAULT,
    filters: Filters = Filters(), cursor: str | None = None,
) -> dict[str, Any]:
    """The project's conversations, most recently active first (the asking conversation left out, its compressed
    past too), each once at its newest session (``conversations.recent_conversations``): a conversation compressed
    six times is one entry, not six pushing the others off the page.

    ``filters``' dates keep conversations active in that window; roles are not used. With ``cwd`` the project is
    that folder's and every conversation is listed. Returns ``{success, project, sessions: [{session_id, link,
    title, started, last_active, messages, sessions, first_user, last_assistant, source}], sessions_in_scope,
    conversations_in_scope, message?, next_cursor?, notice}``: ``session_id`` the conversation's newest session,
    ``started``, ``messages`` and ``sessions`` the conversation's, the previews its newest session's. Raises
    :class:`errors.StoreError` (no state.db, unknown session, a bad cursor).
    """
    limit = max(1, min(RECENT_MAX, limit))
    conn = store.open_state_db(home)
    try:
        scope, attributor, _ = workspace.scope_for(conn, home, session_id, cwd)
        key = pages.search_key(query="\x00recent", mode="recent", scope=dataclasses.replace(scope, filters=filters),
                                anchor=session_id if cwd is None else f"cwd:{cwd}")
        page = pages.read_cursor(cursor, key) if cursor else pages.Page(0, filters.since, filters.until)
        base: dict[str, Any] = {"success": True, "project": scope.project.to_json(), "sessions": [],
                                "sessions_in_scope": scope.in_project, "conversations_in_scope": 0}
        if scope.project.is_home:
            base["message"] = answers.no_project_message(scope.current, cwd)
            return base
        limit = max(0, min(limit, pages.MAX_REACH - page.offset))
        others = scope.session_ids
        if scope.current is not None:  # "where did we leave off?" asks of other conversations: not this one's past
            own = conversations.conversation_ids(conn, scope.current.id)
            others = tuple(sid for sid in others if sid not in own)
        listed, base["conversations_in_scope"] = conversations.recent_conversations(
            conn, others, since=page.since, until=page.until, offset=page.offset, limit=limit + 1)
        # Pages count the census's list: one left out below leaves this page short, not the next page unreachable.
        more = len(listed) > limit and page.offset + limit < pages.MAX_REACH
        listed = listed[:limit]
        still = workspace.membership.still_members(conn, paths.state_db_key(home), attributor, scope, [s.id for s in listed])
        listed = [s for s in listed if s.id in still]  # the census's list, as state.db has it now
        previews = conversations.session_previews(conn, [s.id for s in listed])
    finally:
        conn.close()
    out = []
    for entry in listed:
        first, last = previews.get(entry.id, ("", ""))
        out.append({
            "session_id": entry.id,
            "link": f"@session:{entry.id}",
            "title": entry.title,
            "started": answers.format_when(entry.started_at),
            "last_active": answers.format_when(entry.last_active),
            "messages": entry.message_count,
            "sessions": entry.segments,
            "first_user": _clip(first, PREVIEW_CHARS)[0] or None,
            "last_assistant": _clip(last, PREVIEW_CHARS)[0] or None,
            "source": entry.source,
        })
    base["sessions"] = out
    base["notice"] = answers.HISTORY_NOTICE
    if not out and not more:
        base["message"] = "No more sessions" if page.offset else f"No {'other ' if cwd is None else ''}sessions in this project" + (
            " in that time window" if filters.since is not None or filters.until is not None else "")
    if more:
        base["next_cursor"] = pages.make_cursor(key, dataclasses.replace(page, offset=page.offset + limit))
    return base

