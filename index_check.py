"""What a scope's vector index lacks, and how far every process may trust that it lacks nothing.

The truth is what state.db holds: every visible user or assistant message with
text of the scope's sessions should have vectors. Checking that in full (every
message id of the scope against every indexed one: :func:`full_check`) costs a
new process's first search about as much as the rest of it, so three hints
keep later checks to what is new, each with what corrects it when wrong:

* a process's own watermark (state cache ``semantic_complete``): the scope was
  complete up to a message id. Keyed by the index's generation (a repair made
  here) and the marks' stamp (a repair made anywhere).
* the shared "complete up to" marks per session in embeddings.db, written by
  searches and the index command: a new process checks only what is newer.
  A repair voids the marks of the sessions it touched (a new stamp).
* state.db's history (:mod:`state_history`), stored with every write: a
  state.db put back from an older copy hands out its lost ids again, under
  which the marks and vectors would describe other messages; :func:`agree`
  finds where state.db parted from it and drops what the index knows above
  that point, marks included, before any check trusts them.

A hint wrong in a way none of these catches costs a semantic hit, never a wrong
answer: every hit is checked against state.db before it is shown
(:mod:`vector_leg`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import state, state_history, store
from .records import Scope

if TYPE_CHECKING:  # numpy comes with it
    from . import vector_index

logger = logging.getLogger(__name__)

INDEX_BATCH = 2000  # unindexed messages looked at per search
MARKS_LAG = 5_000  # message ids the shared "complete up to" marks may lag before a search moves them up


@dataclass(frozen=True)
class Lack:
    """What one search learned of its scope's index.

    ``pending``: ``(id, session id, text)`` to embed, newest first, at most
    ``INDEX_BATCH``; ``missing``: how many are; ``total``: how many the scope
    should hold (0 when none is missing, ``None`` when not counted); ``top``:
    state.db's newest message id; ``marks``: the shared marks read before
    checking (``None`` when this process's watermark answered).
    """

    pending: list[tuple[int, str, str]]
    missing: int
    total: int | None
    top: int
    marks: vector_index.CompleteMarks | None


# (index generation, marks stamp, project) -> (the scope's sessions as JSON, message-id watermark) once complete
_complete: dict[tuple[int, str, str], tuple[str, int]] = state.cache("semantic_complete").data


# (index generation, marks stamp, project) -> ((the scope's sessions as JSON, state.db's top message id, the index's
# top chunk id), (missing, total)): keyword mode's last status, valid while nothing new was written to either file
_status_seen: dict[tuple[int, str, str], tuple[tuple[str, int, int], tuple[int, int]]] = state.cache("semantic_status").data


def agree(conn: sqlite3.Connection, vectors: vector_index.VectorIndex) -> state_history.History:
    """Make sure what the index knows was learned from the state.db ``conn`` reads, before any check trusts it;
    returns state.db's history now, which every write that follows stores with what it writes.

    When state.db parted from the stored history (put back from an older copy: the lost ids are handed out
    again), what the index knows above where they part is dropped (:meth:`vector_index.VectorIndex.forget_after`).
    When none is stored, state.db's now is. A few point reads of each file. Raises ``sqlite3`` errors of
    state.db, and :class:`embeddings.EmbeddingUnavailable` for embeddings.db's (:meth:`VectorIndex.trouble`).
    """
    try:
        text = vectors.store.stored_history()
    except sqlite3.Error as exc:
        raise vectors.trouble(exc) from exc
    known = state_history.decode(text)
    with store.one_snapshot(conn):
        counter = store.message_id_counter(conn)
        parted = None if known is None else state_history.parted_at(
            known, counter, store.message_timestamps(conn, [i for i, _ in known.points]))
        now = state_history.of(counter, store.points_at(conn, state_history.targets(counter)))
    try:
        if parted is not None:
            vectors.forget_after(parted, text, now)
        elif known is None:  # a file of an earlier version, or none stored yet: from now on
            vectors.store.store_first_history(now)
    except sqlite3.Error as exc:
        if parted is not None:
            raise vectors.trouble(exc) from exc
        logger.info("project-history-recall: could not store state.db's history yet (%s)", exc)
    return now


def lacking(conn: sqlite3.Connection, vectors: vector_index.VectorIndex, scope: Scope, key: tuple[int, str, str]) -> Lack:
    """What the scope's index lacks (see :class:`Lack`), ``key`` the process's watermark key.

    Below a watermark nothing is checked again: this process's own, else the shared per-session marks; only
    a session without a mark has all its messages checked (:func:`full_check`). What is indexed is always read
    from the file, never waiting for a load in progress. A load that dropped damaged vectors (``vectors.generation``
    moved on from ``key``'s) voids the watermark. Raises ``sqlite3`` errors.
    """
    sessions = set(scope.session_ids)
    top = store.max_message_id(conn)
    marks = None
    known = _complete.get(key)
    if known is not None and known[0] == scope.ids_json:  # the sessions compared in full, never by hash
        parts = [(scope, known[1])]
    else:
        marks = vectors.complete_marks(sessions, top)
        unmarked = tuple(sid for sid in scope.session_ids if sid not in marks.upto)
        marked = tuple(sid for sid in scope.session_ids if sid in marks.upto)
        parts = [] if not marked else [(dataclasses.replace(scope, session_ids=marked), min(marks.upto.values()))]
        if marked and unmarked:
            parts.append((dataclasses.replace(scope, session_ids=unmarked), 0))
    if parts and vectors.generation == key[0]:  # else loading found damaged vectors, below the watermark too: count all
        pending: list[tuple[int, str, str]] = []
        for part, above in parts:
            if above:
                indexed = vectors.store.ids_in(part.ids_json, above)
                pending += store.unindexed_messages(conn, part, indexed, INDEX_BATCH, above=above)
            else:  # sessions without a mark (new ones, mostly): every message of theirs
                pending += store.texts_to_embed(conn, full_check(conn, vectors, part)[0], INDEX_BATCH)
        if len(pending) < INDEX_BATCH:  # every scan reached its watermark: that is all
            pending.sort(key=lambda m: -m[0])
            return Lack(pending, len(pending), None if pending else 0, top, marks)
        # A full batch: more may be missing below it. Count them all, or the watermark
        # would move past messages no search then indexes.
    if marks is None:
        marks = vectors.complete_marks(sessions, top)
    missing_ids, total = full_check(conn, vectors, scope)
    if not missing_ids:
        return Lack([], 0, 0, top, marks)
    pending = store.texts_to_embed(conn, missing_ids, INDEX_BATCH)
    missing = len(missing_ids)
    if len(pending) < INDEX_BATCH:
        # The scan reached the oldest message: that is all that is missing. The rest
        # have no text once read (e.g. only images) and are never indexed.
        total, missing = total - (missing - len(pending)), len(pending)
    return Lack(pending, missing, total, top, marks)


def full_check(conn: sqlite3.Connection, vectors: vector_index.VectorIndex, scope: Scope) -> tuple[list[int], int]:
    """``(ids of the scope's messages the index should hold and lacks, newest first; how many it should hold)``,
    every message id of the scope checked against every indexed one of its sessions, as arrays.

    Checked id by id, not by subtracting counts: vectors of deleted or rewound messages stay in the
    index until a search or the index command drops them, and would otherwise hide as many new ones.
    The ids come from Hermes' (session, active) index; rows are read only of the messages not indexed
    and of the inactive indexed ones (rewound, or archived by a compaction), to tell which of them the
    index should hold. Raises ``sqlite3`` errors of state.db, and :class:`embeddings.EmbeddingUnavailable`
    for embeddings.db's (:meth:`VectorIndex.trouble`).
    """
    import numpy as np

    with store.one_snapshot(conn):  # the ids and the rows read from one state of state.db
        signed = np.fromstring(store.scope_message_ids_text(conn, scope), dtype=np.int64, sep=",")
        scope_ids = np.abs(signed)
        try:  # embeddings.db's errors are the index's trouble, state.db's go on as they are
            held = np.isin(scope_ids, vectors.indexed_array(scope.ids_json))
        except sqlite3.Error as exc:
            raise vectors.trouble(exc) from exc
        read = scope_ids[~held | (signed < 0)]
        sorted_out = np.fromstring(store.sort_out_text(conn, json.dumps(read.tolist())), dtype=np.int64, sep=",") if len(read) else read
    should = sorted_out[sorted_out > 0]
    lacking_ids = should[~np.isin(should, scope_ids[held])]
    total = int(np.count_nonzero(held & (signed > 0))) + len(should)
    return np.sort(lacking_ids)[::-1].tolist(), total


def status_counts(conn: sqlite3.Connection, vectors: vector_index.VectorIndex, scope: Scope,
                  key: tuple[int, str, str]) -> tuple[int, int]:
    """``(missing, total)`` for keyword mode's status, without embedding anything; reused while neither state.db
    nor the index has changed. Raises ``sqlite3`` errors."""
    seen_state = (scope.ids_json, store.max_message_id(conn), vectors.store.stored_upto())  # compared in full, never by hash
    seen = _status_seen.get(key)
    if seen is not None and seen[0] == seen_state:
        return seen[1]
    found = lacking(conn, vectors, scope, key)
    total = full_check(conn, vectors, scope)[1] if found.total is None else found.total
    _status_seen[key] = (seen_state, (found.missing, total))
    return found.missing, total


def complete(vectors: vector_index.VectorIndex, scope: Scope, key: tuple[int, str, str], found: Lack,
             history: state_history.History) -> None:
    """The scope is complete up to ``found.top``: remember it in this process (a repair meanwhile gave a new
    generation, which voids it) and, when the shared marks lack a session of the scope or lag ``MARKS_LAG``
    ids behind, for every process."""
    _complete[(vectors.generation, key[1], key[2])] = (scope.ids_json, found.top)
    marks = found.marks
    if marks is None or (not marks.behind and len(marks.upto) == len(scope.session_ids)
                         and min(marks.upto.values(), default=found.top) >= found.top - MARKS_LAG):
        return
    mark_all(vectors, list(scope.session_ids), found.top, marks, history)


def mark_all(vectors: vector_index.VectorIndex, sessions: list[str], top: int, marks: vector_index.CompleteMarks,
             history: state_history.History, *, replace: bool = False) -> None:
    """:meth:`vector_index.VectorIndex.mark_complete`, a refusal logged: the marks are a shortcut, never the truth."""
    from . import index_file

    try:
        vectors.mark_complete(sessions, top, marks, replace=replace, history=history)
    except (sqlite3.Error, index_file.IndexNotNow) as exc:
        logger.info("project-history-recall: could not share how far the index is complete (%s)", exc)


def key_of(vectors: vector_index.VectorIndex, scope: Scope) -> tuple[int, str, str]:
    """The watermark key of ``scope`` in ``vectors``: any process's repair (a new stamp) voids what is kept.
    Raises ``sqlite3`` errors."""
    return vectors.generation, vectors.store.stamp_now(), scope.project.scope_key
