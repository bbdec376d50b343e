"""This process's map of one model's vector files, kept up to embeddings.db: what a vector search scores.

The files (:mod:`vector_file`) are shared by every process through the page
cache; this keeps the process's view of them (which rows it has mapped, each
session's code in them, the last scope's mask), copies new chunks in from
embeddings.db (:mod:`vector_store`), and scores a scope over the mapped rows
(:mod:`vector_scores`). The index (:mod:`vector_index`) owns the lock every
method here runs under, and decides what a damaged vector means.

Invariant: files another process started over for another vector size since
this one mapped them are never started over by this one (its view is the older).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

import numpy as np

from . import index_file, vector_file, vector_scores
from .embeddings import EmbeddingUnavailable, Provider, decode_vectors
from .index_file import IndexNotNow
from .ranking import Hit
from .vector_store import ChunkStore

logger = logging.getLogger(__name__)

_LOAD_BATCH = 2_000  # chunks decoded per step when vectors are copied in (bounds what the copying process holds)
_PAGE = 4_096  # bytes of a memory page: the warm-up reads one value of each
RECONCILE_S = 30.0  # how often a process checks that no gone chunk is still marked live (another process died mid-way)


class MappedVectors:
    """The vector files of one model beside the embeddings.db at ``path``, as this process maps them.

    ``db`` names the embeddings.db file the rows come from (device, inode, token): files of another are
    started over. The caller holds the index's lock around every method but :meth:`learn_basis`.
    """

    def __init__(self, path: Path, provider: Provider, db: tuple[Any, ...] | None) -> None:
        self.path = path
        self.files = vector_file.VectorFile(path, provider.fingerprint)  # shared with every process
        self.view = vector_file.EMPTY  # the rows this process has mapped
        self._provider, self._db = provider, db
        self._codes: dict[str, int] = {}  # session id -> code in the vector files (of self.view)
        self._member: tuple[tuple[str, int], frozenset[str], np.ndarray] | None = None  # the last scope's mask of codes
        # Last check for gone chunks still marked live: none at opening, so a new process's first search does not pay.
        self._checked_at = time.monotonic()

    def cut(self, message_ids: Sequence[int], *, keep: Sequence[int] = ()) -> None:
        """Mark ``message_ids``' rows gone in the files, except the chunks ``keep`` (every process sees it at once);
        a refusal is logged (the rows stay live until :meth:`refresh` reconciles them)."""
        if message_ids:
            try:
                self.files.mark_gone(message_ids, keep_chunks=keep)
            except OSError as exc:
                logger.warning("embeddings index %s: could not mark vectors gone (%s)", self.path, exc)

    def reconcile_now(self) -> None:
        """Make the next :meth:`refresh` look for rows of gone chunks (the index command's sync)."""
        self._checked_at = -RECONCILE_S

    def refresh(self, conn: sqlite3.Connection, store: ChunkStore) -> list[int]:
        """Bring the files up to embeddings.db (``conn``) and map what they commit; returns the messages whose stored
        vectors are of the wrong size (not copied: the caller repairs them).

        Chunks another process copied already are not read. Files of another size than the provider's start
        over, unless another process started them over since this one mapped them (:meth:`_newer_size`). Raises
        :class:`IndexNotNow` (or :class:`index_file.IndexBlocked`) when the files cannot be written, ``sqlite3``
        errors from embeddings.db.
        """
        top = store.top_chunk(conn)
        head = self.files.head()
        view = self.files.view(self._db)
        damaged: list[int] = []
        dims = self.expected_dims(conn, store) if top else 0
        mapped = self.view.head.epoch
        if top and head.restarted_since(mapped, self._db, dims):
            dims = self._newer_size(head.dims, dims)
        stale = head.db != self._db or head.upto < top or not head.rows or head.dims != dims
        if top and (stale or view.n != head.rows):  # behind, of other dims (edited), or files that do not map

            def read_after(upto: int) -> Any:
                size = dims * 4
                for batch in store.chunks_after(conn, upto, top, _LOAD_BATCH):
                    good = [r for r in batch if len(r[3]) == size]
                    damaged.extend(int(r[1]) for r in batch if len(r[3]) != size)
                    yield ([r[0] for r in good], [r[1] for r in good], [r[2] for r in good],
                           decode_vectors([r[3] for r in good], dims))

            try:
                with conn:  # one snapshot of the chunks
                    copied = self.files.append(self._db, dims, read_after, seen=mapped)
            except OSError as exc:
                raise self._copy_failed(exc) from exc
            if copied.dims != dims:  # started over for another size by another process meanwhile: decide again
                return self.refresh(conn, store)
            view = self.files.view(self._db)
        if view is not self.view:
            if view.head.epoch != self.view.head.epoch or len(view.names) < len(self._codes):  # new files: new codes
                self._codes = {}
            for code in range(len(self._codes), len(view.names)):
                self._codes[view.names[code]] = code
            self.view = view
        self._reconcile(conn, store)
        return damaged

    def _newer_size(self, newer: int, mine: int) -> int:
        """The size of files another process started over since this one mapped them, when this process's provider
        expects ``mine``: that process's provider confirmed ``newer`` after this one learnt its own, so this one takes
        it (its next reply checks it). Raises :class:`EmbeddingUnavailable` when the provider's size is fixed: the
        files and their vectors are never dropped for an older view (two processes would embed everything by turns)."""
        if not self._provider.expect(newer):
            raise EmbeddingUnavailable(f"another process started the vector files over for {newer}-d vectors; this "
                                       f"process's model gives {mine}-d: semantic search is unavailable here until Hermes restarts")
        return newer

    def _copy_failed(self, exc: OSError) -> IndexNotNow:
        """What a failed copy into the files means: :class:`index_file.IndexBlocked` when one of them is not a file
        or cannot be written (the user must act), else a temporary :class:`IndexNotNow` (a full disk, a quota)."""
        blocker = index_file.first_blocker(self.files.files())
        if blocker is not None:
            return blocker
        return IndexNotNow(f"the vector files beside {self.path} cannot be written ({exc}); semantic search "
                           "retries on a later search", code="index_error")

    def _reconcile(self, conn: sqlite3.Connection, store: ChunkStore) -> None:
        """Every ``RECONCILE_S``: mark gone the rows whose chunks embeddings.db no longer holds (a process that died
        between deleting chunks and marking their rows, or a file changed by hand). One count; the ids are read
        only when it differs."""
        now = time.monotonic()
        view = self.view
        if now - self._checked_at < RECONCILE_S or not view.n:
            return
        self._checked_at = now
        live = view.rows[:, 1] != -1
        count, stored_ids = store.live_chunks(conn, view.head.upto)
        if int(np.count_nonzero(live)) <= count:
            return
        stale = view.rows[live, 0][~np.isin(view.rows[live, 0], stored_ids())]
        try:
            self.files.mark_gone((), gone_chunks=stale.tolist())
        except OSError as exc:
            logger.warning("embeddings index %s: could not mark vectors gone (%s)", self.path, exc)

    def expected_dims(self, conn: sqlite3.Connection, store: ChunkStore) -> int:
        """The vector size of this model: the provider's when it knows it; else the size the files were started over
        at (their head) when the newest chunk they copied has it (a head edited to another size is copied again, its
        vectors kept), else the commonest among embeddings.db's first chunks (1 when none reads). The provider is
        told it (:meth:`embeddings.Provider.expect`): a reply of another size must then be confirmed before the files
        start over. Raises ``sqlite3`` errors."""
        if self._provider.dims > 0:
            return int(self._provider.dims)
        head = self.files.head()
        if head.db == self._db and head.dims and store.newest_size(conn, head.upto) == head.dims * 4:
            size = head.dims * 4  # chunks of an older size a repair could not delete are older than these
        else:
            size = store.commonest_size(conn)
        if not size:
            return 1
        self._provider.expect(size // 4)
        return size // 4

    def scores(self, query: np.ndarray, sessions: set[str], top_sessions: int, per_session: int,
               group: Callable[[list[str]], Mapping[str, str]] | None = None,
               keys: Callable[[Mapping[int, str]], Mapping[int, str]] | None = None) -> list[Hit]:
        """The best messages of the ``top_sessions`` sessions of ``sessions`` most similar to ``query`` (a unit
        vector of the mapped rows' size), at most ``per_session`` of each, a message scored by its best chunk; with
        ``group`` (sessions -> conversations) and ``keys`` (messages -> the conversations they stand for),
        ``top_sessions`` counts conversations (``vector_scores.two_pass``, ``vector_scores.best_of_sessions``)."""
        view = self.view
        if not view.n or not sessions:
            return []
        names = view.names  # as they belong to this view (another thread may map newer files)
        ids, owners, scores = vector_scores.scope_scores(view, self._member_mask(view, sessions), query, wanted=top_sessions,
                                                         group=group)
        return vector_scores.best_of_sessions(names, sessions, ids, owners, scores, top_sessions, per_session, keys)

    def _member_mask(self, view: vector_file.View, sessions: AbstractSet[str]) -> np.ndarray:
        """:func:`vector_scores.member_mask` of ``sessions`` in ``view``, kept for the last scope searched: a
        session's code never changes within the files' epoch, so the same sessions (compared in full) over as
        many names give the same mask."""
        key = (view.head.epoch, len(view.names))
        held = self._member
        if held is not None and held[0] == key and held[1] == sessions:
            return held[2]
        mask = vector_scores.member_mask(view, self._codes, set(sessions))
        self._member = (key, frozenset(sessions), mask)
        return mask

    @property
    def live_rows(self) -> int:
        """How many live vectors this process has mapped (mapped, not copied: the pages are the shared files')."""
        view = self.view
        return int(np.count_nonzero(view.rows[:, 1] != -1)) if view.n else 0

    def pages_of(self, sessions: AbstractSet[str] | None) -> tuple[vector_file.View, np.ndarray | None]:
        """``(the view, the mask of the rows of sessions, None for every row)``, for :func:`touch` (the lock held)."""
        view = self.view
        return view, (self._member_mask(view, sessions) if sessions is not None and view.n else None)

    def learn_basis(self) -> None:
        """Learn the files' basis when they are large and have none (or grew much since): see
        :meth:`vector_file.VectorFile.organise`. A folder that refuses it, or vectors with nothing finite to learn
        from, is logged: searches stay exact. Needs no lock: searches go on meanwhile."""
        try:
            self.files.organise(self._db)
        except (OSError, ValueError) as exc:  # ValueError: numpy's LinAlgError too
            logger.warning("embeddings index %s: could not write the vectors' basis (%s); searches score every row", self.path, exc)


def touch(view: vector_file.View, member: np.ndarray | None) -> None:
    """Read one value of every page of the mapped files that holds a row of ``member`` (every page when ``None``):
    pages the page cache lost come from disk now, and this process's page tables are filled now."""
    _touch_pages(view.rows)  # read whole: it says which rows are whose
    vectors = (view.vectors, *((view.low,) if view.low is not None else ()))
    if member is None:
        for mapped in vectors:
            _touch_pages(mapped)
        return
    # Of each of the scope's rows, values a page apart and its last: every page it lies on.
    rows = np.flatnonzero(member[view.rows[:, 2]] & (view.rows[:, 1] != -1))
    for mapped in vectors:
        mine = rows[rows < len(mapped)]
        width = mapped.shape[1]
        if len(mine) and width:
            columns = np.unique(np.append(np.arange(0, width, max(1, _PAGE // mapped.itemsize)), width - 1))
            mapped[mine[:, None], columns[None, :]].sum()


def _touch_pages(mapped: np.ndarray) -> None:
    """Read one value of every page of ``mapped`` (a mapped file's array)."""
    flat = mapped.reshape(-1)
    if len(flat):
        flat[:: max(1, _PAGE // flat.itemsize)].sum()
