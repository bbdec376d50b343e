"""What a scope's vector index lacks, and how far every process may trust that it lacks nothing.

The truth is what state.db holds: every visible user or assistant message with
text of the scope's sessions should have vectors. Checking that in full
(:func:`full_check`) costs a new process's first search as much as the rest of
it, so three hints keep later checks to what is new once it is complete, each
with what corrects it when wrong:

* a process's own watermark (state cache ``semantic_complete``): the scope was
  complete up to a message id. Keyed by the index's generation (a repair made
  here) and the marks' stamp (a repair made anywhere).
* the shared "complete up to" marks per session in embeddings.db, written by
  searches and the index command: a new process checks only what is newer.
  A repair voids the marks of the sessions it touched (a new stamp).
* state.db's history (:mod:`state_history`), stored with every write:
  :func:`agree` drops what the index knows above where a restored state.db
  parted from it, marks included, before any check trusts them.

While a scope's index is partial, a fourth keeps each search from checking it
in full again: the process's record of the ids it lacks (state cache
``semantic_lacking``, :class:`Lacking`, one per asking scope, the newest
``RECORDS_KEPT``), exact up to a state.db message id and an index chunk id; a
search reads what is newer than either. Once made, it answers every search of
its scope until the scope is complete. What it cannot see (a message deleted or
rewound below its id) is found when its text is read: only what the index
should hold is read (:func:`store.shown_texts`), and the rest leaves the
record; the full check renews it after ``RECHECK_S``.

A hint wrong in a way none of these catches costs a semantic hit, never a wrong
answer: every hit is checked against state.db before it is shown
(:mod:`vector_leg`).
"""

from __future__ import annotations

import dataclasses
import logging
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from . import index_reads, state, state_history, store
from .records import Scope

if TYPE_CHECKING:  # imported where used: keyword search runs without numpy
    import numpy as np

    from . import vector_index

logger = logging.getLogger(__name__)

T = TypeVar("T")

INDEX_BATCH = 2000  # new message ids above a watermark taken at once; more and the record's count is used
MARKS_LAG = 5_000  # message ids the shared "complete up to" marks may lag before a search moves them up
READ_PAGE = 8  # texts read from state.db at a time, as the embedding reaches them
RECHECK_S = 600.0  # a record of what a scope lacks is checked in full again after this long
RECORDS_KEPT = 8  # records of partial scopes kept (each asking chat has its own scope; a gateway answers many)
WATERMARKS_KEPT = 64  # complete scopes' watermarks kept (older ones, and those of dead generations, go first)

Key = tuple[int, str, str, str]  # (index generation, marks stamp, project, the scope's sessions as JSON)


@dataclass(frozen=True)
class Lack:
    """What one search learned of its scope's index.

    ``pending``: ``(id, session id, text)`` to embed, newest first, read only
    as they are taken (:func:`read_texts`); ``missing``: how many ids are
    pending; ``total``: how many the scope should hold (0 when none is
    missing, ``None`` when not counted); ``top``: state.db's newest message id
    the check saw; ``marks``: the shared marks read before checking (``None``
    when this process's watermark answered); ``gone``: the pending ids found,
    once read, no longer to be indexed (deleted, rewound, hidden, without text).
    """

    pending: Iterator[tuple[int, str, str]]
    missing: int
    total: int | None
    top: int
    marks: vector_index.CompleteMarks | None
    gone: list[int]


@dataclass
class Lacking:
    """A process's record of a scope's index while it is partial: exact for state.db up to message id ``below``
    and the index up to chunk id ``chunks`` (chunk ids are never reused), so a search reads only what is newer.

    ``missing``: the ids the index lacks, newest first (int64); ``total``: how many it should hold; ``long``:
    ids too long for a search (:meth:`vector_index.VectorIndex.add`), left out of later searches' pending
    unread; ``made``: when the full check behind it ran (``time.monotonic``).
    """

    below: int
    chunks: int
    missing: np.ndarray
    total: int
    long: set[int]
    made: float


# Key -> message-id watermark once the scope is complete (the newest WATERMARKS_KEPT)
_complete_cache = state.cache("semantic_complete")
_complete: dict[Key, int] = _complete_cache.data


# Key -> the scope's record while its index is partial (the newest RECORDS_KEPT)
_lacking_cache = state.cache("semantic_lacking")
_lacking: dict[Key, Lacking] = _lacking_cache.data


def _keep(kept: dict[Key, T], key: Key, value: T, most: int) -> T:
    """Store ``value`` under ``key`` as the newest of ``kept`` (an entry in use is dropped last), dropping the
    least recently used beyond ``most``. The caller holds the cache's lock. Returns ``value``."""
    kept.pop(key, None)
    kept[key] = value
    while len(kept) > most:
        kept.pop(next(iter(kept)))
    return value


def agree(conn: sqlite3.Connection, vectors: vector_index.VectorIndex) -> state_history.History:
    """Make sure what the index knows was learned from the state.db ``conn`` reads, before any check trusts it;
    returns state.db's history now, which every write that follows stores with what it writes.

    When state.db parted from the stored history, what the index knows above where they part is dropped
    (:meth:`vector_index.VectorIndex.forget_after`). Raises ``sqlite3`` errors of either file (the caller reads
    them through :meth:`VectorIndex.trouble`), :class:`index_file.IndexNotNow` when the index file was replaced.
    """
    text = vectors.store.stored_history()
    known = state_history.decode(text)
    with store.one_snapshot(conn):
        counter = store.message_id_counter(conn)
        parted = None if known is None else state_history.parted_at(
            known, counter, store.message_timestamps(conn, [i for i, _ in known.points]))
        now = state_history.of(counter, store.points_at(conn, state_history.targets(counter)))
    if parted is not None:
        vectors.forget_after(parted, text, now)
    return now


def lacking(conn: sqlite3.Connection, vectors: vector_index.VectorIndex, scope: Scope, key: Key) -> Lack:
    """What the scope's index lacks (see :class:`Lack`), ``key`` the process's key for the scope (:func:`key_of`).

    While the process keeps a record of the scope (it was found partial), the record answers (:func:`record`),
    the ids too long for a search left out; otherwise nothing below a watermark is checked again
    (:func:`_above_watermark`, which never waits for a load in progress). Only ids are read here: texts are read as
    the embedding takes them. Raises ``sqlite3`` errors.
    """
    top = store.max_message_id(conn)
    ids, marks = _above_watermark(conn, vectors, scope, key, top)
    gone: list[int] = []
    if ids is not None:
        return Lack(read_texts(conn, ids, gone), len(ids), None if ids else 0, top, marks, gone)
    if marks is None:
        marks = vectors.complete_marks(set(scope.session_ids), top)
    import numpy as np

    with _lacking_cache.lock:
        found = record(conn, vectors, scope, key)
        ids_left = found.missing if not found.long else found.missing[~np.isin(found.missing, list(found.long))]
        return Lack(read_texts(conn, ids_left.tolist(), gone), len(found.missing), found.total, found.below, marks, gone)


def _above_watermark(conn: sqlite3.Connection, vectors: vector_index.VectorIndex, scope: Scope, key: Key, top: int
                     ) -> tuple[list[int] | None, vector_index.CompleteMarks | None]:
    """``(ids, marks)``: the ids of the scope's messages the index lacks above a watermark, newest first, or
    ``None`` when the process's record must answer instead; ``marks``, the shared marks when they were read.

    While the process keeps a record of the scope (:func:`record`: it was found partial), the record answers.
    Otherwise the watermark is this process's own, else the shared per-session marks; a session without a mark
    is checked in full (:func:`full_check`). Without marks, or when ``INDEX_BATCH`` ids or more are found, the
    record answers (it counts them all: else the watermark would move past messages no search then indexes).
    A load that dropped damaged vectors (``vectors.generation`` moved on from ``key``'s) voids the watermark.
    Raises ``sqlite3`` errors.
    """
    with _lacking_cache.lock:
        recorded = key in _lacking
    with _complete_cache.lock:
        known = _complete.get(key)
        if known is not None:
            _keep(_complete, key, known, WATERMARKS_KEPT)  # in use: the newest, dropped last
    if recorded:
        return None, None
    marks = None
    if known is not None:  # the key holds the sessions, compared in full, never by hash
        parts = [(scope, known)]
    else:
        marks = vectors.complete_marks(set(scope.session_ids), top)
        unmarked = tuple(sid for sid in scope.session_ids if sid not in marks.upto)
        marked = tuple(sid for sid in scope.session_ids if sid in marks.upto)
        parts = [] if not marked else [(dataclasses.replace(scope, session_ids=marked), min(marks.upto.values()))]
        if marked and unmarked:
            parts.append((dataclasses.replace(scope, session_ids=unmarked), 0))
    if not parts or vectors.generation != key[0]:  # a changed generation: damaged vectors, below the watermark too
        return None, marks
    ids: list[int] = []
    for part, above in parts:
        if above:
            ids += _new_above(conn, vectors, part, above)[0]
        else:  # sessions without a mark (new ones, mostly): every message of theirs
            ids += full_check(conn, vectors, part)[0]
    if len(ids) >= INDEX_BATCH:
        return None, marks
    ids.sort(reverse=True)
    return ids, marks


def record(conn: sqlite3.Connection, vectors: vector_index.VectorIndex, scope: Scope, key: Key) -> Lacking:
    """The process's record of what the scope's index lacks (:class:`Lacking`), brought up to now: the
    messages state.db got and the chunks the index got since it was. Made by a full check (:func:`full_check`)
    when there is none for ``key``, when the index's generation moved on, or when it is ``RECHECK_S`` old. The
    caller holds the cache's lock. Raises ``sqlite3`` errors.
    """
    import numpy as np

    found = _lacking.get(key)
    if found is None or vectors.generation != key[0] or time.monotonic() - found.made > RECHECK_S:
        chunks = vectors.store.stored_upto()  # before the check: a chunk written meanwhile is seen again
        top = store.max_message_id(conn)
        missing, total = full_check(conn, vectors, scope, upto=top)  # what is newer, the next search reads
        made = Lacking(top, chunks, np.array(missing, dtype=np.int64), total, set(), time.monotonic())
        return _keep(_lacking, key, made, RECORDS_KEPT)
    embedded, found.chunks = vectors.store.messages_since(found.chunks)
    if len(embedded):
        found.missing = found.missing[~np.isin(found.missing, embedded)]
    with store.one_snapshot(conn):
        top = store.max_message_id(conn)
        if top > found.below:
            new, should = _new_above(conn, vectors, scope, found.below)
            found.missing = np.concatenate([np.array(new, dtype=np.int64), found.missing])
            found.total += should
            found.below = top
    return _keep(_lacking, key, found, RECORDS_KEPT)  # in use: the newest, dropped last


def _new_above(conn: sqlite3.Connection, vectors: vector_index.VectorIndex, scope: Scope, above: int
               ) -> tuple[list[int], int]:
    """``(ids, should)``: of the scope's messages above message id ``above`` that the index should hold
    (:func:`index_reads.indexable_ids_above`, newest first, ``should`` of them), those it does not hold yet. An indexed
    id of a row no longer shown is not counted. Raises ``sqlite3`` errors of either file."""
    indexed = vectors.store.ids_in(scope.ids_json, above)
    should = index_reads.indexable_ids_above(conn, scope, above)
    return [i for i in should if i not in indexed], len(should)


def left(conn: sqlite3.Connection, vectors: vector_index.VectorIndex, scope: Scope, key: Key,
         found: Lack, stored: int, passed: list[int]) -> tuple[int, int, int]:
    """``(missing, total, of the missing those known too long for a search)`` after a search took ``found``'s
    messages: ``stored`` of them embedded, ``passed`` too long for a search (``found.gone``: no longer to be
    indexed once read). When all of a watermark's new messages were embedded or gone, ``(0, 0, 0)``; else the
    record's count (:func:`_recount`). Raises ``sqlite3`` errors."""
    if not found.total and found.missing <= stored + len(found.gone):  # a watermark's new messages, all embedded or gone
        return 0, 0, 0
    return _recount(conn, vectors, scope, key, passed, found.gone)[:3]


def _recount(conn: sqlite3.Connection, vectors: vector_index.VectorIndex, scope: Scope, key: Key,
             passed: list[int], gone: list[int]) -> tuple[int, int, int, int]:
    """``(missing, total, of the missing those known too long for a search, up to which message id that holds)``
    from the process's record (:func:`record`, made now if there is none), which learns ``passed`` (left out of
    its later searches) and drops ``gone``. Raises ``sqlite3`` errors."""
    import numpy as np

    with _lacking_cache.lock:
        known = record(conn, vectors, scope, key)
        known.long.update(passed)
        if gone:
            lost = np.isin(known.missing, gone)
            known.missing, known.total = known.missing[~lost], known.total - int(np.count_nonzero(lost))
        long = int(np.count_nonzero(np.isin(known.missing, list(known.long)))) if known.long else 0
        return len(known.missing), known.total, long, known.below


def read_texts(conn: sqlite3.Connection, ids: list[int], gone: list[int], *, page: int = READ_PAGE
               ) -> Iterator[tuple[int, str, str]]:
    """``(id, session id, text)`` of those of the messages ``ids`` the index should hold once read
    (:func:`store.shown_texts`), in that order, read ``page`` at a time as they are taken (``READ_PAGE``: a
    search's); the ids of the others (deleted, rewound, hidden or without text since they were listed) are
    appended to ``gone``, never sent to a provider. Raises ``sqlite3`` errors."""
    for start in range(0, len(ids), page):
        taken = ids[start : start + page]
        found = store.shown_texts(conn, taken)
        gone.extend(i for i in taken if i not in found)
        yield from ((i, *found[i]) for i in taken if i in found)


def full_check(conn: sqlite3.Connection, vectors: vector_index.VectorIndex, scope: Scope, *, upto: int | None = None
               ) -> tuple[list[int], int]:
    """``(ids of the scope's messages the index should hold and lacks, newest first; how many it should hold)``,
    every message id of the scope (up to message id ``upto`` when given) checked against every indexed one of its
    sessions.

    Checked id by id, not by subtracting counts: vectors of deleted or rewound messages stay in the
    index until a search or the index command drops them, and would otherwise hide as many new ones.
    Rows are read only of the messages not indexed and of the inactive indexed ones, to tell which of them
    the index should hold, a page at a time (:mod:`index_reads`: no read holds Hermes' writes back for long).
    Raises ``sqlite3`` errors of state.db, and :class:`embeddings.EmbeddingUnavailable` for embeddings.db's
    (:meth:`VectorIndex.trouble`).
    """
    import numpy as np

    signed = np.fromstring(index_reads.scope_message_ids(conn, scope), dtype=np.int64, sep=",")
    if upto is not None:
        signed = signed[np.abs(signed) <= upto]
    scope_ids = np.abs(signed)
    try:  # the index command tells embeddings.db's errors from state.db's (its caller's)
        indexed = vectors.indexed_array(scope.ids_json)
    except sqlite3.Error as exc:
        raise vectors.trouble(exc) from exc
    held = np.isin(scope_ids, indexed)
    sorted_out = np.array(index_reads.sort_out(conn, scope_ids[~held | (signed < 0)].tolist()), dtype=np.int64)
    should = sorted_out[sorted_out > 0]
    lacking_ids = should[~np.isin(should, scope_ids[held])]
    total = int(np.count_nonzero(held & (signed > 0))) + len(should)
    return np.sort(lacking_ids)[::-1].tolist(), total


def status_counts(conn: sqlite3.Connection, vectors: vector_index.VectorIndex, scope: Scope,
                  key: Key) -> tuple[int, int, int]:
    """``(missing, total, of them too long for a search)`` for keyword mode's status, without embedding or reading
    any text: ``(0, 0, 0)`` when nothing is new above a watermark (:func:`_above_watermark`), else the process's
    record brought up to now once (:func:`_recount`). A scope found complete is remembered as complete in this
    process, so its record goes and no full check is run for it again. Raises ``sqlite3`` errors."""
    top = store.max_message_id(conn)
    ids, _ = _above_watermark(conn, vectors, scope, key, top)
    if ids is not None and not ids:
        complete(vectors, scope, key, top)
        return 0, 0, 0
    missing, total, long, below = _recount(conn, vectors, scope, key, [], [])
    if missing <= 0:
        complete(vectors, scope, key, below)
    return missing, total, long


def complete(vectors: vector_index.VectorIndex, scope: Scope, key: Key, top: int,
             marks: vector_index.CompleteMarks | None = None, history: state_history.History | None = None) -> None:
    """The scope is complete up to message id ``top``: remember it in this process and, with ``marks`` (read
    before the check) and ``history`` (a search that indexed; keyword mode writes nothing), when the shared
    marks lack a session of the scope or lag ``MARKS_LAG`` ids behind, for every process. Nothing is remembered
    when a repair gave ``vectors`` a new generation since ``key`` was taken."""
    if vectors.generation != key[0]:  # a repair since the check began: what it found complete is out of date
        return
    with _complete_cache.lock:
        _keep(_complete, key, top, WATERMARKS_KEPT)
    with _lacking_cache.lock:
        _lacking.pop(key, None)
    if history is None or marks is None or (not marks.behind and len(marks.upto) == len(scope.session_ids)
                         and min(marks.upto.values(), default=top) >= top - MARKS_LAG):
        return
    mark_all(vectors, list(scope.session_ids), top, marks, history)


def mark_all(vectors: vector_index.VectorIndex, sessions: list[str], top: int, marks: vector_index.CompleteMarks,
             history: state_history.History, *, replace: bool = False) -> None:
    """:meth:`vector_index.VectorIndex.mark_complete`, a refusal logged: the marks are a shortcut, never the truth."""
    from . import index_file

    try:
        vectors.mark_complete(sessions, top, marks, replace=replace, history=history)
    except (sqlite3.Error, index_file.IndexNotNow) as exc:
        logger.info("project-history-recall: could not share how far the index is complete (%s)", exc)


def key_of(vectors: vector_index.VectorIndex, scope: Scope) -> Key:
    """The key of what this process keeps of ``scope`` in ``vectors`` (its watermark, its record): each asking
    chat's scope has its own, and any process's repair (a new stamp) voids what is kept. Raises ``sqlite3``
    errors."""
    return vectors.generation, vectors.store.stamp_now(), scope.project.scope_key, scope.ids_json
