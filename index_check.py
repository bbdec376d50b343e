"""What a scope's vector index lacks, and how far every process may trust that it lacks nothing.

The truth is what state.db holds: every visible user or assistant message with
text of the scope's sessions should have vectors. Checking that in full (every
message id of the scope against every indexed one: :func:`full_check`) costs a
new process's first search about as much as the rest of it, so three hints
keep later checks to what is new once it is complete, each with what corrects it
when wrong:

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

While a scope's index is partial, a fourth keeps each search from checking it
in full again: the process's record of the ids it lacks (state cache
``semantic_lacking``, :class:`Lacking`), exact up to a state.db message id and
an index chunk id; a search reads what is newer than either. What it cannot
see (a message deleted or rewound below its id) is read as its text is, or by
the full check that renews it after ``RECHECK_S``.

A hint wrong in a way none of these catches costs a semantic hit, never a wrong
answer: every hit is checked against state.db before it is shown
(:mod:`vector_leg`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from . import state, state_history, store
from .records import Scope

if TYPE_CHECKING:  # imported where used: keyword search runs without numpy
    import numpy as np

    from . import vector_index

logger = logging.getLogger(__name__)

T = TypeVar("T")

INDEX_BATCH = 2000  # new messages above a watermark read at once; more and the record's count is used
MARKS_LAG = 5_000  # message ids the shared "complete up to" marks may lag before a search moves them up
READ_PAGE = 8  # texts read from state.db at a time, as the embedding reaches them
RECHECK_S = 600.0  # a record of what a scope lacks is checked in full again after this long


@dataclass(frozen=True)
class Lack:
    """What one search learned of its scope's index.

    ``pending``: ``(id, session id, text)`` to embed, newest first, read as
    they are taken; ``missing``: how many are; ``total``: how many the scope
    should hold (0 when none is missing, ``None`` when not counted); ``top``:
    state.db's newest message id the check saw; ``marks``: the shared marks
    read before checking (``None`` when this process's watermark answered);
    ``gone``: the pending ids found deleted or without text as they were read.
    """

    pending: Iterator[tuple[int, str, str]]
    missing: int
    total: int | None
    top: int
    marks: vector_index.CompleteMarks | None
    gone: list[int] = field(default_factory=list)


@dataclass
class Lacking:
    """A process's record of a scope's index while it is partial: exact for state.db up to message id ``below``
    and the index up to chunk id ``chunks`` (chunk ids are never reused), so a search reads only what is newer.

    ``missing``: the ids the index lacks, newest first (int64); ``total``: how many it should hold; ``long``:
    ids too long for a search (:meth:`vector_index.VectorIndex.add`), passed over unread; ``made``: when the
    full check behind it ran (``time.monotonic``).
    """

    sessions: str
    below: int
    chunks: int
    missing: np.ndarray
    total: int
    long: set[int]
    made: float


# (index generation, marks stamp, project) -> (the scope's sessions as JSON, message-id watermark) once complete
_complete: dict[tuple[int, str, str], tuple[str, int]] = state.cache("semantic_complete").data


# (index generation, marks stamp, project) -> the scope's record while its index is partial
_lacking_cache = state.cache("semantic_lacking")
_lacking: dict[tuple[int, str, str], Lacking] = _lacking_cache.data


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

    Below a watermark nothing is checked again: this process's own, else the shared per-session marks; what is
    new above it is read, and a session without a mark is checked in full (:func:`full_check`). Without marks,
    or when ``INDEX_BATCH`` messages or more are found, the process's record of the scope answers (:func:`record`: a full check once, then what is new). What
    is indexed is always read from the file, never waiting for a load in progress. A load that dropped damaged
    vectors (``vectors.generation`` moved on from ``key``'s) voids the watermark. Raises ``sqlite3`` errors.
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
            return Lack(iter(pending), len(pending), None if pending else 0, top, marks)
        # More: the record counts them all (else the watermark would move past messages no search then indexes).
    if marks is None:
        marks = vectors.complete_marks(sessions, top)
    import numpy as np

    with _lacking_cache.lock:
        found = record(conn, vectors, scope, key)
        ids = found.missing if not found.long else found.missing[~np.isin(found.missing, list(found.long))]
        gone: list[int] = []
        return Lack(read_texts(conn, ids.tolist(), gone), len(found.missing), found.total, found.below, marks, gone)


def record(conn: sqlite3.Connection, vectors: vector_index.VectorIndex, scope: Scope, key: tuple[int, str, str]) -> Lacking:
    """The process's record of what the scope's index lacks (:class:`Lacking`), brought up to now: the
    messages state.db got and the chunks the index got since it was. Made by a full check (:func:`full_check`)
    when there is none for ``key`` and these sessions, when the index's generation moved on, or when it is
    ``RECHECK_S`` old (a message deleted or rewound below ``below`` is not seen before). The caller holds the
    cache's lock. Raises ``sqlite3`` errors.
    """
    import numpy as np

    found = _lacking.get(key)
    if (found is None or found.sessions != scope.ids_json or vectors.generation != key[0]
            or time.monotonic() - found.made > RECHECK_S):
        chunks = _index_read(vectors, vectors.store.stored_upto)  # before the check: a chunk written meanwhile is seen again
        with store.one_snapshot(conn):
            top = store.max_message_id(conn)
            missing, total = full_check(conn, vectors, scope)
        found = _lacking[key] = Lacking(scope.ids_json, top, chunks, np.array(missing, dtype=np.int64), total, set(),
                                        time.monotonic())
        return found
    embedded, found.chunks = _index_read(vectors, lambda: vectors.store.messages_since(found.chunks))
    if len(embedded):
        found.missing = found.missing[~np.isin(found.missing, embedded)]
    with store.one_snapshot(conn):
        top = store.max_message_id(conn)
        if top > found.below:
            indexed = _index_read(vectors, lambda: vectors.store.ids_in(scope.ids_json, found.below))
            new = [m[0] for m in store.unindexed_messages(conn, scope, indexed, top, above=found.below)]
            found.missing = np.concatenate([np.array(new, dtype=np.int64), found.missing])
            found.total += len(new) + len(indexed)
            found.below = top
    return found


def left(conn: sqlite3.Connection, vectors: vector_index.VectorIndex, scope: Scope, key: tuple[int, str, str],
         found: Lack, stored: int, passed: list[int]) -> tuple[int, int, int]:
    """``(missing, total, of them too long for a search)`` after a search took ``found``'s messages: ``stored`` of them embedded, ``passed`` too
    long for a search (``found.gone``: deleted or without text once read). When all of a watermark's new messages
    were embedded, ``(0, 0, 0)``; else the record's count (:func:`record`), which learns ``passed`` and ``gone``.
    Raises ``sqlite3`` errors."""
    if not found.total and found.missing <= stored:  # a watermark's new messages, all embedded
        return 0, 0, 0
    import numpy as np

    with _lacking_cache.lock:
        known = record(conn, vectors, scope, key)
        known.long.update(passed)
        if found.gone:
            lost = np.isin(known.missing, found.gone)
            known.missing, known.total = known.missing[~lost], known.total - int(np.count_nonzero(lost))
        return len(known.missing), known.total, len(known.long)


def read_texts(conn: sqlite3.Connection, ids: list[int], gone: list[int]) -> Iterator[tuple[int, str, str]]:
    """``(id, session id, text)`` of the messages ``ids``, in that order, read ``READ_PAGE`` at a time as they are
    taken; the ids of those deleted or without text once read are appended to ``gone``. Raises ``sqlite3``
    errors."""
    for start in range(0, len(ids), READ_PAGE):
        page = ids[start : start + READ_PAGE]
        found = store.texts_to_embed(conn, page, READ_PAGE)
        if len(found) < len(page):
            have = {m[0] for m in found}
            gone.extend(i for i in page if i not in have)
        yield from found


def _index_read(vectors: vector_index.VectorIndex, read: Callable[[], T]) -> T:
    """``read()``, embeddings.db's errors the index's trouble (:meth:`vector_index.VectorIndex.trouble`)."""
    try:
        return read()
    except sqlite3.Error as exc:
        raise vectors.trouble(exc) from exc


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
                  key: tuple[int, str, str]) -> tuple[int, int, int]:
    """``(missing, total, of them too long for a search)`` for keyword mode's status, without embedding anything: what is new above a
    watermark, else the process's record (:func:`record`). Raises ``sqlite3`` errors."""
    return left(conn, vectors, scope, key, lacking(conn, vectors, scope, key), 0, [])


def complete(vectors: vector_index.VectorIndex, scope: Scope, key: tuple[int, str, str], found: Lack,
             history: state_history.History) -> None:
    """The scope is complete up to ``found.top``: remember it in this process (a repair meanwhile gave a new
    generation, which voids it) and, when the shared marks lack a session of the scope or lag ``MARKS_LAG``
    ids behind, for every process."""
    _complete[(vectors.generation, key[1], key[2])] = (scope.ids_json, found.top)
    with _lacking_cache.lock:
        _lacking.pop(key, None)
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
