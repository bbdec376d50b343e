"""The vector leg of one search: index what is new for a moment, find the nearest messages, and show only what
state.db confirms.

The vector side's records (a message id's session and text) are hints; state.db is the truth.
:func:`confirmed` checks every hit against it: the message exists, is shown by Hermes (not rewound, not
hidden scaffolding), is a user or assistant message, belongs to the session its vector is filed under (in
this scope), and its text is the text that was embedded (a content hash). A hit failing any of these is
never shown, and its vector is dropped; a message still shown is embedded again, by this search in its scope.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from . import config_schema, conversations, errors, gate, index_check, pages, paths, session_rows, store, warm_up
from .gate import SemanticLeg
from .query import embedding_text, vector_queries
from .ranking import Hit, demote_earlier
from .records import MessageRow, Scope

if TYPE_CHECKING:  # numpy comes with it
    from . import vector_index

logger = logging.getLogger(__name__)

INDEX_BUDGET_S = 1.5  # indexing time one search may spend
SEMANTIC_PER_SESSION = 3  # messages of a session the vector leg returns


class Question(NamedTuple):
    """What a search asks the vector leg: the question as the user wrote it, and the names of the project's
    folders (left out of its second text: :func:`query.vector_queries`)."""

    text: str
    folders: frozenset[str]


def embedded_texts(question: Question, outbound: Callable[[str], str]) -> tuple[str, ...]:
    """The texts embedded for ``question``: :func:`query.vector_queries` of the question as ``outbound`` (the
    provider's :meth:`embeddings.Provider.outbound_text`) gives it, read before the question is cut
    (:func:`query.embedding_text`); the text without the folder names is made from that one, so a label whose
    name is left out (``token for billing-api: …``) still holds its value when redaction reads it."""
    return vector_queries(embedding_text(question.text, outbound), question.folders)


NOTHING_YET = "Nothing is indexed yet: a hybrid or semantic search indexes the project as it goes, the index command all of it."


def semantic_leg(conn: sqlite3.Connection, home: Path, scope: Scope, question: Question | None,
                 settings: config_schema.Settings, *, index: bool = True) -> SemanticLeg:
    """Vector hits in the scope for the normalised mean of the vectors of ``question``'s texts
    (:func:`embedded_texts`), after indexing for at most ``INDEX_BUDGET_S`` (none without ``index``: a later page
    ranks what page one's index held, so that pages neither repeat nor skip while the index is partial).

    With no ``question`` (keyword mode) only the status is worked out: nothing is embedded, searched or
    created (no embeddings.db yet: ``indexing``, or ``unavailable`` with what would stop a search creating it:
    ``index_file.index_problem``), and a warm-up in progress is not waited for. Call only when :func:`gate.closed` allowed it. Never
    raises (state.db and embeddings.db errors included): the status says ``unavailable``, keyword results stand
    alone, and the note says whether a later search retries or what the user must do. Damaged vectors found on
    the way are dropped and embedded again, and the note says so once.
    """
    from . import embeddings, index_file, vector_index

    vectors = None
    try:
        path = paths.embeddings_db_path(home)
        if question is None and not os.path.lexists(path):  # keyword mode creates nothing: what stops an index, or none yet
            problem = index_file.index_problem(path)
            return SemanticLeg("unavailable", str(problem)) if problem is not None else SemanticLeg("indexing", NOTHING_YET)
        vectors = gate.open_vectors(home, settings)
        provider = vectors.provider  # one provider (and one loaded model) per index
        if question is not None:
            warm_up.load_meanwhile(provider)
            vectors.catch_up()  # damaged vectors met copying them are repaired first: this search embeds them again
        history = index_check.agree(conn, vectors)
        key = index_check.key_of(vectors, scope)
        if question is None:  # keyword mode: the status only
            counts = index_check.status_counts(conn, vectors, scope, key)
            return _progress(vectors, *counts)
        found = index_check.lacking(conn, vectors, scope, key)
        passed: list[int] = []  # too long for a search
        pending = (vector_index.PendingMessage(*m) for m in found.pending)
        started = time.monotonic()  # one budget for what is lacking and for stale hits below
        budget = INDEX_BUDGET_S if index else 0.0
        stored = vectors.add(pending, deadline=started + budget, longest=vector_index.EMBED_CHUNKS,
                             passed=passed, history=history)
        left = budget - (time.monotonic() - started)
        missing, total, long = index_check.left(conn, vectors, scope, key, found, stored, passed)
        if missing <= 0:
            index_check.complete(vectors, scope, key, found.top, found.marks, history)
        # Filters are applied after the vector search: look further when they are on.
        per_session = SEMANTIC_PER_SESSION * (4 if scope.filters.active else 1)
        asked = provider.embed(list(embedded_texts(question, provider.outbound_text)))  # unit rows, one batch
        mean = embeddings.normalise(asked.sum(axis=0, keepdims=True)) if len(asked) > 1 else asked
        # The best conversations, not sessions: a compression chain's or a branch family's copies of its first turns
        # would fill the sessions (search.py collapses each conversation to one result afterwards).
        searched = set(scope.session_ids) - {scope.live}
        if scope.filters.since is not None or scope.filters.until is not None:
            # Dates are checked on the hits below; the best sessions are picked among those that can pass, or a
            # window that fails the 51 most similar sessions would answer nothing (a false "no matching messages").
            searched = session_rows.active_between(conn, sorted(searched), scope.filters.since, scope.filters.until)
        keyed: dict[int, str] = {}  # a message's conversation does not depend on the others asked with it
        roots: dict[str, str] = {}  # a session's neither: the first pass's widenings and the demotion ask alike

        def group(ids: list[str]) -> dict[str, str]:
            return conversations.conversation_roots(conn, ids, roots)

        def keys(hits: Mapping[int, str]) -> dict[int, str]:
            """``conversations.result_keys`` of ``hits``, each asked once: a widened head asks its first rows again
            (each time reading every session a branch among them left, whole)."""
            new = {m: s for m, s in hits.items() if m not in keyed}
            if new:
                keyed.update(conversations.result_keys(conn, new)[0])
            return {m: keyed[m] for m in hits}

        def nearest() -> list[Hit]:
            """The vector search's hits, best first; of the asking session (``scope.live``), only its archive, looked
            for past its live rows (its context)."""
            raw = vectors.search(mean, searched, pages.MAX_REACH + 1, per_session=per_session, group=group, keys=keys)
            if not scope.live:
                return raw
            live = store.live_ids(conn, scope.live)
            own = vectors.search(mean, {scope.live}, 1, per_session=per_session + len(live))
            return sorted([*raw, *[h for h in own if h.message_id not in live][:per_session]], key=lambda h: -h.score)

        # A stale vector costs an embedding now, not the answer: a message of this scope whose text (or session)
        # changed is embedded again, in what is left of the budget, and the search looked at again (another scope's
        # waits for its own search).
        hits, stale = confirmed(conn, vectors, nearest())
        again = (vector_index.PendingMessage(*m) for m in stale if m[1] in scope.session_ids)
        if vectors.add(again, deadline=time.monotonic() + left, longest=vector_index.EMBED_CHUNKS, history=history):
            hits = confirmed(conn, vectors, nearest())[0]
        copies = store.context_copies(conn, scope, [h.message_id for h in hits])  # still the conversation's context
        hits = [h for h in hits if h.message_id not in copies]
        rows: dict[int, MessageRow] = {}
        if scope.filters.active and hits:
            rows = store.fetch_messages(conn, sorted(h.message_id for h in hits))
            hits = [h for h in hits if h.message_id in rows and scope.filters.admits(rows[h.message_id].role,
                                                                                   rows[h.message_id].timestamp)]
        kept = demote_earlier(hits, lambda ids: store.earlier_recalls(conn, ids), pages.MAX_REACH + 1, group)
        progress = _progress(vectors, missing, total, long)
        return SemanticLeg(progress.status, progress.note, tuple(kept), rows)
    except embeddings.EmbeddingUnavailable as exc:
        return SemanticLeg("unavailable", str(exc))
    except sqlite3.Error as exc:  # a database busy, read-only or damaged mid-search: keyword results stand
        if vectors is not None:
            return SemanticLeg("unavailable", str(vectors.trouble(exc)))
        note = f"semantic search could not finish just now ({exc}); it retries on a later search"
        logger.warning("semantic search failed: %s", exc, extra=errors.said_as(note))
        return SemanticLeg("unavailable", note)
    except OSError as exc:  # the data folder's file system
        note = f"semantic search could not use its data folder just now ({exc}); it retries on a later search"
        logger.warning("semantic search failed on its data folder: %s", exc, extra=errors.said_as(note))
        return SemanticLeg("unavailable", note)
    except Exception as exc:  # anything else on the vector side (a file we wrote, damaged in a new way): keyword stands
        note = f"semantic search failed ({type(exc).__name__}: {exc}); keyword results stand"
        logger.exception("semantic search failed", extra=errors.said_as(note))
        return SemanticLeg("unavailable", note)


def confirmed(conn: sqlite3.Connection, vectors: vector_index.VectorIndex, raw: list[Hit]
              ) -> tuple[list[Hit], list[tuple[int, str, str]]]:
    """Of ``raw`` (the vector search's hits, best first), those state.db confirms (see the module docstring), in
    order, and ``(id, session, text)`` of the messages still shown whose text or session changed. The others' vectors
    are dropped; those of messages still shown are embedded again (:meth:`vector_index.VectorIndex.requeue`), where
    they are in a scope searched. Raises ``sqlite3`` errors."""
    if not raw:
        return [], []
    from .embeddings import content_hash

    ids = [h.message_id for h in raw]
    shown = store.shown_texts(conn, ids)
    stored = vectors.store.stored_hashes(ids)
    kept, gone, wrong = [], [], []
    for hit in raw:
        found = shown.get(hit.message_id)
        if found is None:  # deleted, rewound, hidden, no text: nothing to embed again
            gone.append(hit.message_id)
        elif found[0] != hit.session_id or content_hash(found[1]) != stored.get(hit.message_id):
            wrong.append((hit.message_id, *found))
        else:
            kept.append(hit)
    vectors.drop(gone)
    vectors.requeue([m for m, _, _ in wrong], "that no longer match state.db (the message changed, or its id was handed out again)")
    return kept, wrong


def _progress(vectors: vector_index.VectorIndex, missing: int, total: int, long: int = 0) -> SemanticLeg:
    done = max(total - missing, 0)
    status = "ready" if missing <= 0 else ("partial" if done else "indexing")
    return SemanticLeg(status, _note(vectors, status, done, missing, long))


def _note(vectors: vector_index.VectorIndex, status: str, done: int, missing: int, long: int) -> str:
    """What the semantic side says once: the index's news (a damaged file moved aside, vectors repaired), and how
    far indexing is when it is not done (``long``: how many of the rest are too long for a search)."""
    note = " ".join(part for part in (vectors.note, vectors.pop_news()) if part)
    if status != "ready":
        note = (note + " " if note else "") + (
            f"{done} of {done + missing} messages indexed; the rest is indexed on later searches or by the index command.")
        if long:
            note += f" {long} of them {'is' if long == 1 else 'are'} too long to embed during a search: the index command embeds them."
    return note.strip()
