"""The search service: one scoped search over a project's past sessions, keyword, semantic or hybrid.

Called by the tool handlers, the slash commands and the command line. How a query is answered:

1. The scope (``workspace.py``): the project's other searchable sessions, narrowed by the optional filters
   (``since``/``until``, ``role``). Home has no scope.
2. The query is parsed, never passed through (``query.py``); any of its words may match, so a question asked
   verbatim still finds its session.
3. The keyword leg (``lexical.py``): bounded reads of Hermes' FTS indexes, sessions ranked by BM25.
4. ``semantic``/``hybrid`` add the vector leg once the user consented (``vector_leg.py``), in a thread beside
   the keyword leg; it counts only when close enough to the query (``ranking.close_enough``), and hybrid adds
   the legs' standardised scores (:func:`fuse`).
5. When the query asks how things stand now and its words are strong evidence (``CURRENT_FIRST_STRENGTH``),
   the newest of the leading sessions on its subject leads (``recency.py``).
6. One message per conversation (a compression's continuation and a branch carry copies of what came before:
   ``ranking.one_per_conversation``); cron sessions after interactive ones; ``limit`` sessions a page, later pages
   through ``next_cursor``, up to ``pages.MAX_REACH`` sessions.
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from . import (
    answers,
    conversations,
    errors,
    gate,
    lexical,
    pages,
    paths,
    ranking,
    recency,
    store,
    vector_leg,
    warm_up,
    workspace,
)
from .attribution import Project, ProjectRecord, project_folders
from .filters import Filters, describe_filters
from .query import folder_names, parse_query
from .ranking import Hit, fuse_scores, rank_sessions
from .records import Scope, SessionDetails
from .settings import load_settings
from .snippet import make_snippet

if TYPE_CHECKING:
    from .config_schema import Settings

logger = logging.getLogger(__name__)

T = TypeVar("T")


MODES = ("hybrid", "keyword", "semantic")


DEFAULT_LIMIT = 3


MAX_LIMIT = 10


SEMANTIC_WEIGHT = 0.5  # hybrid: weight of the vector leg's standardised scores while keyword is strong


SEMANTIC_LEADS = 3.0  # ... and while it is weak


WEAK_KEYWORD = 0.15  # keyword is weak when its best session explains less of the query's term weight
CURRENT_FIRST_STRENGTH = 0.25  # the current decision first only when keyword explains this much of the query


def cron_last(chosen: Sequence[Hit], details: dict[str, SessionDetails]) -> list[Hit]:
    """Interactive sessions first, cron sessions after them, each group in rank order."""
    def is_cron(hit: Hit) -> bool:
        info = details.get(hit.session_id)
        return info is not None and info.source == "cron"

    return [c for c in chosen if not is_cron(c)] + [c for c in chosen if is_cron(c)]


def fuse(keyword: lexical.KeywordAnswer, semantic: Sequence[Hit], limit: int) -> list[Hit]:
    """Hybrid: each session's hit (``found_by`` set) by standardised score, best first, at most ``limit``.

    Where the best keyword session explains at least ``WEAK_KEYWORD`` of the query's term weight, vectors weigh
    ``SEMANTIC_WEIGHT``; below it the words matched are incidental (a paraphrase, another language) and
    vectors lead (``SEMANTIC_LEADS``).
    """
    weight = SEMANTIC_WEIGHT if keyword.strength >= WEAK_KEYWORD else SEMANTIC_LEADS
    return fuse_scores(keyword.sessions, rank_sessions(semantic), semantic_weight=weight)[:limit]


def beside(work: Callable[[], T]) -> Future[T]:
    """``work()`` started in a thread of its own, as a future (``result()`` returns or raises what it did). Where
    no thread can be started, the work runs in the caller's thread before this returns.
    """
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as exc:  # relayed unchanged by result()
            future.set_exception(exc)

    try:  # in the caller's context: Hermes scopes a turn's profile (its secrets, its home) by context variables
        context = contextvars.copy_context()
        threading.Thread(target=context.run, args=(run,), name="project-history-recall-vectors", daemon=True).start()
    except RuntimeError:
        run()
    return future


def _folder_names(project: Project, records: Sequence[ProjectRecord]) -> frozenset[str]:
    """The names of ``project``'s folders (an explicit project's folders and primary path, an auto project's git
    root), which the vector leg leaves out of its question's second text (:func:`query.vector_queries`)."""
    paths: list[str] = []
    if project.kind == "auto":
        paths = [project.root]
    elif project.kind == "explicit":
        paths = next((project_folders(r) for r in records if r.id == project.id), [])
    return folder_names(paths)


def _semantic_leg_apart(home: Path, scope: Scope, question: vector_leg.Question, settings: Settings,
                        index: bool) -> gate.SemanticLeg:
    """:func:`vector_leg.semantic_leg` (indexing, if ``index``, then searching) on a state.db connection of its own;
    one that cannot be opened makes an ``unavailable`` leg (keyword results stand)."""
    try:
        conn = store.open_state_db(home)
    except errors.StoreError as exc:
        return gate.SemanticLeg("unavailable", f"semantic search could not open the session database just now "
                                f"({exc}); it retries on a later search")
    try:
        return vector_leg.semantic_leg(conn, home, scope, question, settings, index=index)
    finally:
        conn.close()


def _one_per_conversation(conn: sqlite3.Connection, ranked: Sequence[Hit], found: lexical.KeywordAnswer) -> list[Hit]:
    """``ranked`` (a hit a session, best first) as one result a conversation (``ranking.one_per_conversation`` over
    ``conversations.result_keys``). A branch whose best keyword hit is a copy of what the session it left said stands
    there for that conversation, and just after it for its own by its best hit of its own that matches every term the
    copy does: what it went on to decide on the question is not hidden by the history it copied (a lesser mention of
    a word is not a result). A session is one result: where its copy stands for the family (no other session of it
    is a result: the original filtered out, rewound or in another project), its own reply takes the copy's place."""
    keys, own = conversations.result_keys(conn, {h.message_id: h.session_id for h in (*ranked, *found.hits)}, found.keys)
    mine: dict[str, list[Hit]] = {}  # each session's keyword hits of its own conversation
    for h in found.hits:
        if keys[h.message_id] == own[h.session_id]:
            mine.setdefault(h.session_id, []).append(h)

    def terms(mid: int) -> set[int]:
        return set(found.scorer.parts(found.rows[mid].text)) if found.scorer and mid in found.rows else set()

    shown = []
    for hit in ranked:
        shown.append(hit)
        if keys[hit.message_id] != own[hit.session_id] and hit.found_by != "semantic":
            copied = terms(hit.message_id)
            kept = [h for h in mine.get(hit.session_id, ()) if terms(h.message_id) >= copied]
            shown += [ranking.found(max(kept, key=lambda h: (h.score, -h.message_id)), hit.found_by)] if kept else []
    place: dict[str, int] = {}  # each session's place among the results
    results: list[Hit] = []
    for hit in ranking.one_per_conversation(shown, keys):
        if hit.session_id not in place:
            place[hit.session_id] = len(results)
            results.append(hit)
        elif keys[hit.message_id] == own[hit.session_id]:
            results[place[hit.session_id]] = hit
    return results


@store.read_again
def search_history(
    *,
    home: Path,
    session_id: str = "",
    query: str,
    mode: str = "hybrid",
    limit: int = DEFAULT_LIMIT,
    cwd: str | None = None,
    filters: Filters = Filters(),
    cursor: str | None = None,
) -> dict[str, Any]:
    """Search the current session's project; returns the tool's answer (docs/tools.md).

    ``semantic`` and ``hybrid`` answer with keyword results while the vector leg cannot run, saying why in
    ``semantic_status``/``semantic_note``. At most ``limit`` sessions; ``next_cursor``, passed back with the
    same query, mode, filters and asking session, gives the next page. With ``cwd`` the scope is that folder's
    project (:func:`workspace.compute_scope_for_cwd`) and ``session_id`` is ignored.

    Arguments are assumed validated. Raises :class:`errors.StoreError` (no state.db, unknown session, a bad
    cursor) for the handler to translate.
    """
    parsed = parse_query(query)
    settings = load_settings(home)
    if mode != "keyword":
        warm_up.prepare(home, settings)  # the vector leg's first load, beside the census below
    conn = store.open_state_db(home)
    try:
        scope, attributor, listing = workspace.scope_for(conn, home, session_id, cwd)
        scope = dataclasses.replace(scope, filters=filters)
        key = pages.search_key(query=query, mode=mode, scope=scope, anchor=session_id if cwd is None else f"cwd:{cwd}")
        page = pages.read_cursor(cursor, key) if cursor else pages.Page(0, filters.since, filters.until)
        if cursor:  # later pages keep page one's date window ("7d" is not re-read against a later clock)
            filters = dataclasses.replace(filters, since=page.since, until=page.until)
            scope = dataclasses.replace(scope, filters=filters)
        offset = page.offset
        base: dict[str, Any] = {
            "success": True,
            "mode": mode,
            "project": scope.project.to_json(),
            "results": [],
            "sessions_in_scope": scope.in_project,
            "semantic_status": gate.NO_PROJECT,
        }
        if filters.active:
            base["filters"] = describe_filters(filters)
        if listing.note:
            base["projects_note"] = listing.note
        basis = answers.project_basis(scope.current)
        if basis:
            base["project_basis"], base["project_note"] = basis
        if parsed.truncated:
            base["query_truncated"] = True
        if scope.project.is_home:
            base["message"] = answers.no_project_message(scope.current, cwd)
            return base
        blocked = gate.closed(home, settings, scope.project)
        base["semantic_status"] = blocked.status if blocked else "ready"
        if blocked is not None and blocked.note:
            base["semantic_note"] = blocked.note
        if not scope.session_ids:
            base["message"] = "No other sessions in this project" if cwd is None else "No sessions in this project yet"
            return base
        if not parsed.units:  # punctuation alone: nothing to match, and nothing a vector could mean either
            base["message"] = "The query has no searchable words"
            return base
        # The legs run side by side: each spends most of its time outside the interpreter (matrix products, SQLite)
        semantic_on = blocked is None and mode != "keyword"
        vectors = None
        if semantic_on:
            asked = vector_leg.Question(query, _folder_names(scope.project, listing.projects))
            # A later page embeds nothing: it ranks what page one's index held (pages neither repeat nor skip while
            # the index is partial; another process indexing between pages can still change the order)
            vectors = beside(lambda: _semantic_leg_apart(home, scope, asked, settings, index=not offset))
        try:
            # Every page ranks the same candidates (enough for all pages), of the same index (above).
            found = lexical.search(conn, parsed, scope, want_sessions=pages.MAX_REACH + 1, db_key=paths.state_db_key(home))
        except BaseException:
            if vectors is not None and vectors.exception() is not None:  # the keyword leg's error is the answer
                logger.info("vector leg beside a failed keyword leg: %r", vectors.exception())
            raise
        strategy = found.strategy
        if found.note:
            base["keyword_note"] = found.note
        rows = dict(found.rows)
        leg = blocked or (vectors.result() if vectors is not None else
                          vector_leg.semantic_leg(conn, home, scope, None, settings))
        rows.update(leg.rows)
        base["semantic_status"] = leg.status
        if leg.note:
            base["semantic_note"] = leg.note
        one_word = len(parsed.units) == 1 and parsed.units[0].kind != "cjk"
        near = ranking.close_enough(leg.hits, provider=settings.embedding.provider, one_word=one_word,
                                    keyword_sessions={r.hit.session_id for r in found.sessions})
        set_aside = parsed.units[0].text if one_word and leg.hits and not found.sessions else None
        # Every session the legs ranked, collapsed to conversations before the pages' reach is cut: a conversation
        # compressed or branched more than MAX_REACH times carries that many copies of its first turns, which would
        # otherwise fill the reach and leave one result (a copy, not the original) and no other conversation.
        if mode == "keyword" or not near:
            ranked = [ranking.found(r.hit, "keyword") for r in found.sessions]
        elif mode == "semantic":
            ranked = [ranking.found(r.hit, "semantic") for r in rank_sessions(near)]
        else:
            ranked = fuse(found, near, len(found.sessions) + len(near))
        if found.scorer is not None and found.strength >= CURRENT_FIRST_STRENGTH and recency.asks_current(query):
            ranked, peers = recency.current_first(ranked, found.hits, {m: r.text for m, r in found.rows.items()},
                                                  {m: r.timestamp for m, r in found.rows.items()}, found.scorer)
            ranked = recency.last_words(ranked, found.hits, found.rows, found.scorer)
            if peers > 1:
                base["order_note"] = recency.ORDER_NOTE.format(count=peers)
        ranked = _one_per_conversation(conn, ranked, found)
        ranked = ranked[: pages.MAX_REACH + 1]
        # The census chose the sessions; state.db says whether they are still this project's to show.
        details = workspace.membership.still_members(conn, paths.state_db_key(home), attributor, scope,
                                                     [h.session_id for h in ranked])
        ranked = cron_last([h for h in ranked if h.session_id in details], details)[:pages.MAX_REACH]
        chosen = ranked[offset : offset + limit]
        missing = [h.message_id for h in chosen if h.message_id not in rows]
        rows = {**rows, **store.fetch_messages(conn, missing)}
    finally:
        conn.close()
    results = []
    for hit in chosen:
        info, msg = details.get(hit.session_id), rows.get(hit.message_id)
        if msg is None or msg.session_id != hit.session_id:  # deleted since it matched, or its id handed to another session
            continue
        results.append(
            {
                "session_id": hit.session_id,
                "link": f"@session:{hit.session_id}",
                "title": info.title if info else None,
                "message_id": hit.message_id,
                "snippet": make_snippet(msg.text, parsed.units),
                "score_source": hit.found_by,
                "when": answers.format_when(msg.timestamp or (info.started_at if info else None)),
            }
        )
    base["results"] = results
    base["notice"] = answers.HISTORY_NOTICE
    if results:
        base["read_more"] = answers.READ_MORE
    elif offset:
        base["message"] = "No more matching sessions"
    else:
        base["message"] = answers.no_matches_message(cwd is None, set_aside)
    if len(ranked) > offset + limit:
        base["next_cursor"] = pages.make_cursor(key, dataclasses.replace(page, offset=offset + limit))
    base["strategy"] = strategy
    return base
