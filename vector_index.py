"""The vectors of embeddings.db, and the one open index per file and model.

:class:`VectorIndex` writes chunks to embeddings.db (the truth, through
:mod:`vector_store`), keeps the model's vector files (:mod:`vector_file`) up to
it and maps them: every process shares one copy of the vectors in the page
cache instead of loading its own. Similarity searches score the mapped rows
(:mod:`vector_scores`), scope applied at query time. :func:`index_for` gives
the process-wide index of a file and model (state cache ``vector_indexes``);
:func:`reset_indexes` closes them all.

Invariants: vectors of different models never mix; vectors are keyed by
message, never by project, so a move never re-embeds; a scope is compared in
full, never by hash. The file itself (opening, schema, damage, write blockers)
is :mod:`index_file`'s; an index that found its file replaced, damaged or
unwritable retires (no more writes) and :func:`index_for` opens the file again.
What the index holds is a hint: a search shows a hit only once state.db
confirms it (:mod:`vector_leg`).

``generation`` numbers come from one counter for the life of the process: it
is an identity, not a cache (searches key their caches by it), so no reset
rewinds it.
"""

from __future__ import annotations

import itertools
import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import index_file, state, state_history, vector_file, vector_scores
from .embeddings import EmbeddingUnavailable, Provider, chunk_text, decode_vectors, normalise
from .index_file import IndexBlocked, IndexNotNow
from .ranking import Hit
from .vector_store import ChunkStore, CompleteMarks

__all__ = ["CompleteMarks", "PendingMessage", "VectorIndex", "index_for", "reset_indexes"]

logger = logging.getLogger(__name__)

_generations = itertools.count(1)

_LOAD_BATCH = 2_000  # chunks decoded per step when vectors are copied in (bounds what the copying process holds)
_PAGE = 4_096  # bytes of a memory page: the warm-up reads one value of each
_RECONCILE_S = 30.0  # how often a process checks that no gone chunk is still marked live (another process died mid-way)


@dataclass(frozen=True)
class PendingMessage:
    """A message to embed: its id and session in state.db, and its text as stored there."""

    message_id: int
    session_id: str
    text: str


class VectorIndex:
    """Chunks of messages and their vectors, for one embedding model, and their mapped copy.

    A corrupt or foreign file, or one missing a table or index of the schema,
    is moved aside (``*.broken-<time>-<pid>``) and rebuilt; ``note`` then says
    so. Vectors of the wrong size are dropped when they are loaded and their
    messages count as not indexed, so the next indexing embeds them again
    (:meth:`pop_news` says so once). The text a provider is given is its
    ``outbound_text`` of a message (redacted for a remote one); what is stored
    as the message's content hash is always the hash of the message itself.
    ``store`` answers the plain reads, on connections of their own.
    """

    def __init__(self, path: Path, provider: Provider, *, chunk_size: int = 512, chunk_overlap: int = 64) -> None:
        self.path = Path(path).absolute()  # a relative home must still give a file URI (read-only opens)
        self.provider = provider
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.generation = next(_generations)  # distinguishes this open index from any earlier one
        self.store = ChunkStore(self.path, provider.fingerprint)
        self._lock = threading.Lock()  # serialises every use of the connection and of what is mapped
        opened = index_file.open_index(self.path)
        self._conn = opened.conn
        self._file = opened.identity  # the file this connection has open
        # What the vector files record as their source: the file, and its token (an inode is reused).
        self._db = (*opened.identity, opened.token) if opened.identity is not None else None
        self.note = opened.note
        self._retired = False  # set when a newer open of the path replaced this one: no more writes
        self._vectors = vector_file.VectorFile(self.path, provider.fingerprint)  # shared with every process
        self._view = vector_file.EMPTY  # the rows this process has mapped
        self._codes: dict[str, int] = {}  # session id -> code in the vector files (of self._view)
        self._member: tuple[tuple[str, int], frozenset[str], np.ndarray] | None = None  # the last scope's mask of codes
        # When this process last checked for gone chunks still marked live: the first check comes a while
        # after opening (a new process's first search does not pay for it) or with the index command's sync.
        self._checked_at = time.monotonic()
        self._odd_dims = 0  # the size of the last query vector that did not match the index (0: none)
        self._stored_dims: int | None = None  # the size of embeddings.db's vectors, once read (see _expected_dims)
        self._damaged: set[int] = set()  # messages whose stored vectors were unusable: not indexed until embedded again
        self._damage_kept = False  # a repair could not delete damaged vectors from the file: no marks are trusted or written
        self.repaired = 0  # how many such messages this index found
        self._news: list[str] = []  # what the next search should say once (see pop_news)
        self._news_lock = threading.Lock()

    # -- the file ------------------------------------------------------------------
    def trouble(self, exc: sqlite3.Error) -> EmbeddingUnavailable:
        """What an SQLite error met during a search means (from this index or from state.db, read beside it).

        A damaged or unwritable index file retires this index, so the next
        :func:`index_for` opens it again (and moves it aside, or reports the
        condition at once, remembered). Damage this index does not show (its
        schema and table read fine) is state.db's: a temporary answer, and the
        index is kept. Busy is temporary. Never raises.
        """
        problem = index_file.unusable(self.path, exc)
        if problem.code in ("index_busy", "index_error") or problem.code == "index_damaged" and self._healthy():
            return IndexNotNow(f"semantic search could not finish just now ({exc}); it retries on a later search",
                               code="db_error" if problem.code == "index_damaged" else problem.code)
        if problem.code in ("index_damaged", "index_read_only", "index_not_a_file"):
            self._retired = True
            if isinstance(problem, IndexBlocked):
                index_file.remember(self.path, problem)
        logger.warning("embeddings index %s: %s", self.path, exc)
        return problem

    def _healthy(self) -> bool:
        with self._lock:
            return index_file.healthy(self._conn)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def retire(self) -> None:
        """Refuse writes from now on: the path holds another file (see :func:`index_for`). Reads stay harmless."""
        self._retired = True

    @property
    def retired(self) -> bool:
        """Whether this index refuses writes (replaced, or found damaged or unwritable): :func:`index_for` opens the file again."""
        return self._retired

    def _check_current(self) -> None:
        if self._retired:
            raise IndexNotNow("the embeddings index file was replaced; the next search uses the new one")

    def same_file(self) -> bool:
        """Whether the file at ``path`` is still the one this index has open (not deleted, replaced or moved aside)."""
        return self._file is not None and index_file.identity(self.path) == self._file

    def pop_news(self) -> str:
        """What happened to the index since the last call that a search should report once; ``""`` when nothing."""
        with self._news_lock:  # not the index's lock: a keyword-mode search never waits for a load
            news, self._news = self._news, []
        return " ".join(news)

    def _say(self, message: str) -> None:
        with self._news_lock:
            self._news.append(message + ".")
        logger.warning("embeddings index %s: %s", self.path, message)

    # -- what is indexed -----------------------------------------------------------
    def indexed(self) -> dict[int, str]:
        """``{message id: content hash}`` of everything embedded with this model, damaged ones this process could not
        delete left out. Raises ``sqlite3`` errors."""
        with self._lock:
            found = self.store.indexed(self._conn)
        return {m: h for m, h in found.items() if m not in self._damaged}

    def indexed_array(self, sessions_json: str) -> np.ndarray:
        """The ids of the messages of the sessions (a JSON array) that the file holds vectors of, damaged ones this
        process could not delete left out; never waits for a load. Raises ``sqlite3`` errors."""
        ids = self.store.ids_array(sessions_json)
        if self._damaged:
            ids = ids[~np.isin(ids, np.fromiter(self._damaged, np.int64, len(self._damaged)))]
        return ids

    def complete_marks(self, sessions: AbstractSet[str], top: int) -> CompleteMarks:
        """The "complete up to" marks of ``sessions`` (:meth:`vector_store.ChunkStore.marks`); none while this process
        keeps damaged vectors it could not delete. Raises ``sqlite3`` errors."""
        marks = self.store.marks(sessions, top)
        return CompleteMarks({}, marks.stamp) if self._damage_kept else marks

    def mark_complete(self, sessions: Sequence[str], upto: int, marks: CompleteMarks, *, replace: bool = False,
                      history: state_history.History | None = None) -> bool:
        """Record, for every process, that every indexable message of ``sessions`` up to message id ``upto`` has
        vectors here. ``marks``: :meth:`complete_marks`'s answer, read before that was checked (a repair since
        refuses the write). Marks that do not read, or that state.db went back from, are replaced, as all are
        with ``replace`` (the index command); others are merged. Returns whether they were written; raises
        ``sqlite3`` errors (busy, read-only: the marks are only a shortcut)."""
        if self._damage_kept:
            return False
        with self._lock:
            self._check_current()
            return self.store.mark(self._conn, sessions, upto, marks, replace=replace, history=history)

    # -- writes --------------------------------------------------------------------
    def add(self, messages: Sequence[PendingMessage], *, deadline: float | None = None, batch: int = 32,
            history: state_history.History | None = None) -> int:
        """Embed and store ``messages`` until ``deadline`` (one embedded before is embedded again: its old rows go).

        ``history``: state.db's history when the messages were read (:func:`index_check.agree`), stored with
        the vectors: when state.db is put back from an older copy later, the next check finds where it parted
        from it and drops what was written above that point. Each message is chunked as the provider may be
        given it (``provider.outbound_text``: secrets redacted before a remote endpoint sees them, so a key cut
        in two by a chunk boundary is redacted whole). Returns how many messages were stored. Raises
        :class:`EmbeddingUnavailable` when the provider fails (what was stored before stays), ``sqlite3`` errors
        when the file refuses the write (see :meth:`trouble`).
        """
        done = 0
        outbound = getattr(self.provider, "outbound_text", None)
        for start in range(0, len(messages), batch):
            if deadline is not None and time.monotonic() >= deadline:
                break
            group = messages[start : start + batch]
            pieces = [(m, i, c) for m in group
                      for i, c in enumerate(chunk_text(outbound(m.text) if outbound else m.text, self.chunk_size, self.chunk_overlap))]
            vectors = self.provider.embed([c for _, _, c in pieces]) if pieces else np.zeros((0, 1), np.float32)
            now = time.time()
            with self._lock:
                self._check_current()
                before = self.store.stored_among(self._conn, [m.message_id for m in group])
                written = self.store.write(self._conn, group, [(m, i, v) for (m, i, _), v in zip(pieces, vectors, strict=True)],
                                           now, history)
                # A changed message's old vectors are marked gone in the vector files (only once
                # the new ones are stored: a failed write keeps the old ones in use).
                self._cut([m.message_id for m in group if m.message_id in before], keep=written)
                self._damaged.difference_update(m.message_id for m in group)
                self._damage_kept = self._damage_kept and bool(self._damaged)  # embedded again: their old rows went
            done += len(group)
        return done

    def drop(self, message_ids: Sequence[int]) -> None:
        """Forget messages that were deleted or rewound."""
        if not message_ids:
            return
        with self._lock:
            self._check_current()
            self.store.delete(self._conn, message_ids)
            self._cut(message_ids)  # after the commit: a failed delete leaves the rows live

    def requeue(self, message_ids: Sequence[int], why: str) -> None:
        """Forget the vectors of ``message_ids``, which no longer describe their messages (``why``), so that the next
        indexing embeds them again where they should still be indexed (:meth:`_repair`)."""
        if message_ids:
            with self._lock:
                self._repair(message_ids, why)

    def repair_damaged(self) -> int:
        """Find this model's stored vectors of the wrong size in embeddings.db and repair them (:meth:`_repair`): the
        index command heals the file itself (searches read a vector once, when it is copied into the vector
        files). Returns how many messages were repaired; raises ``sqlite3`` errors."""
        with self._lock:
            self._refresh()
            gone = self.store.of_other_size(self._conn, self._expected_dims() * 4)
            if gone:
                self._repair(gone, "of the wrong size")
            return len(gone)

    def _repair(self, message_ids: Sequence[int], why: str) -> None:
        """Forget ``message_ids``' stored vectors (``why``) so that the next indexing embeds them again: their rows
        are marked gone in the vector files and deleted from the file with the marks of their sessions (best
        effort: a busy file keeps them until the messages are embedded again); a new ``generation`` voids this
        process's watermarks. The caller holds ``_lock``."""
        gone = sorted(set(message_ids))
        self._damaged.update(gone)
        self._cut(gone)
        self.repaired += len(gone)
        self.generation = next(_generations)  # a watermark saying "complete" no longer holds
        self._say(f"{len(gone)} message(s) had vectors {why} in the embeddings index: they were dropped and are "
                  "embedded again")
        if self._retired:
            return
        try:
            self.store.delete_repaired(self._conn, gone)
        except sqlite3.Error as exc:
            self._damage_kept = True
            logger.warning("embeddings index %s: damaged vectors left in the file for now (%s)", self.path, exc)

    def forget_after(self, parted: int, known: str | None, history: state_history.History) -> int:
        """State.db parted from the stored history ``known`` (its text, as read) above message id ``parted``
        (:func:`state_history.parted_at`): drops, for every process and model, what the file knows of later ids,
        every mark, and stores ``history`` (:meth:`vector_store.ChunkStore.forget_above`). Returns how many
        messages' vectors were dropped (0 when another process did it first). Raises ``sqlite3`` errors (busy,
        read-only: a later search retries), :class:`IndexNotNow` when the file was replaced."""
        with self._lock:
            self._check_current()
            gone = self.store.forget_above(self._conn, parted, known, history)
            if gone is None:
                return 0
            self._cut(gone)
            self.generation = next(_generations)  # this process's watermarks no longer hold
        self._say(f"state.db no longer holds the messages this index knew above message id {parted} (restored from "
                  f"an older copy?): the vectors of {len(gone)} message(s) were dropped and the index is checked again")
        return len(gone)

    # -- the mapped vector files ---------------------------------------------------------
    def _cut(self, message_ids: Sequence[int], *, keep: Sequence[int] = ()) -> None:
        """Mark ``message_ids``' rows gone in the vector files, except the chunks ``keep`` (every process sees it at once)."""
        if message_ids:
            try:
                self._vectors.mark_gone(message_ids, keep_chunks=keep)
            except OSError as exc:  # left live: the next check (_reconcile) marks them
                logger.warning("embeddings index %s: could not mark vectors gone (%s)", self.path, exc)

    def catch_up(self) -> None:
        """Copy the chunks stored since into the shared vector files and map them; vectors of the wrong size
        met on the way are repaired now (a new ``generation``). Raises like a search's refresh."""
        with self._lock:
            self._refresh()

    def sync(self) -> None:
        """Copy what embeddings.db holds into the shared vector files now, so that no search pays for it; then
        learn their principal directions once they are many (:meth:`vector_file.VectorFile.organise`). Rows whose
        chunks another process deleted without marking them gone (it died in between) are marked now. Raises like
        a search's refresh; a basis the folder refuses is logged and left for the next sync."""
        with self._lock:
            self._checked_at = -_RECONCILE_S  # check for rows of gone chunks now
            self._refresh()
        self._learn_basis()

    def _refresh(self) -> None:
        """Bring the vector files up to embeddings.db, and map what they commit (the caller holds ``_lock``).

        Chunks newer than the files' head are copied in batch by batch (by this process, or already by another
        one: then nothing is read). A vector of the wrong size (see :meth:`_expected_dims`) is not copied: its
        message is repaired, so the next indexing embeds it again. Raises :class:`IndexNotNow` when the vector
        files cannot be written (a full disk), ``sqlite3`` errors from embeddings.db.
        """
        top = self.store.top_chunk(self._conn)
        head = self._vectors.head()
        view = self._vectors.view(self._db)
        damaged: list[int] = []
        dims = self._expected_dims() if top else 0
        stale = head.db != self._db or head.upto < top or not head.rows or head.dims != dims
        if top and (stale or view.n != head.rows):  # behind, of other dims (edited), or files that do not map

            def read_after(upto: int) -> Any:
                size = dims * 4
                for batch in self.store.chunks_after(self._conn, upto, top, _LOAD_BATCH):
                    good = [r for r in batch if len(r[3]) == size]
                    damaged.extend(int(r[1]) for r in batch if len(r[3]) != size)
                    yield ([r[0] for r in good], [r[1] for r in good], [r[2] for r in good],
                           decode_vectors([r[3] for r in good], dims))

            try:
                with self._conn:  # one snapshot of the chunks
                    self._vectors.append(self._db, dims, read_after)
            except OSError as exc:
                raise self._copy_failed(exc) from exc
            view = self._vectors.view(self._db)
        if view is not self._view:
            if view.head.epoch != self._view.head.epoch or len(view.names) < len(self._codes):  # new files: new codes
                self._codes = {}
            for code in range(len(self._codes), len(view.names)):
                self._codes[view.names[code]] = code
            self._view = view
        if damaged:
            self._repair(damaged, "of the wrong size")
        self._reconcile()

    def _copy_failed(self, exc: OSError) -> IndexNotNow:
        """What a failed copy into the vector files means: :class:`IndexBlocked` when one of them is not a file or
        cannot be written (the user must act), else a temporary :class:`IndexNotNow` (a full disk, a quota)."""
        blocker = index_file.first_blocker(self._vectors.files())
        if blocker is not None:
            return blocker
        return IndexNotNow(f"the vector files beside {self.path} cannot be written ({exc}); semantic search "
                           "retries on a later search", code="index_error")

    def _reconcile(self) -> None:
        """Every ``_RECONCILE_S``: mark gone the rows whose chunks embeddings.db no longer holds (a process that
        died between deleting chunks and marking their rows, or a file changed by hand). One count; the ids
        are read only when it differs."""
        now = time.monotonic()
        view = self._view
        if now - self._checked_at < _RECONCILE_S or not view.n:
            return
        self._checked_at = now
        live = view.rows[:, 1] != -1
        count, stored_ids = self.store.live_chunks(self._conn, view.head.upto)
        if int(np.count_nonzero(live)) <= count:
            return
        stale = view.rows[live, 0][~np.isin(view.rows[live, 0], stored_ids())]
        try:
            self._vectors.mark_gone((), gone_chunks=stale.tolist())
        except OSError as exc:
            logger.warning("embeddings index %s: could not mark vectors gone (%s)", self.path, exc)

    def _expected_dims(self) -> int:
        """The vector size of this model: the provider's when it knows it, else the commonest among embeddings.db's
        first chunks. Never the vector files' head: a file of ours that says otherwise is copied again from
        embeddings.db, its vectors kept. Read once per index (the caller holds ``_lock``)."""
        if self.provider.dims > 0:
            return int(self.provider.dims)
        if self._stored_dims is None:
            size = self.store.commonest_size(self._conn)
            if not size:
                return 1
            self._stored_dims = size // 4
        return self._stored_dims

    # -- search --------------------------------------------------------------------
    def search(
        self, query: np.ndarray, sessions: set[str], top_sessions: int, *, per_session: int = 1
    ) -> list[Hit]:
        """The best messages of the ``top_sessions`` sessions most similar to ``query``.

        Returns hits scored by cosine, best first, at most
        ``per_session`` messages of each session, so one session with many
        similar messages cannot crowd out the others. One matrix product over
        the loaded chunks (kept in memory, refreshed incrementally); chunks
        merge to their message's best cosine. Scope is applied here, at query
        time: vectors never depend on a project.
        """
        with self._lock:
            self._refresh()
            query = normalise(query)[0]
            view = self._view
            if view.n and len(query) != view.head.dims:
                # The endpoint's vectors changed size. Once could be one bad answer (a proxy, a
                # truncated reply): every vector is dropped only when the provider itself says so
                # or the next query has the new size too; until then this search finds nothing.
                seen_before, self._odd_dims = self._odd_dims == len(query), len(query)
                if not (seen_before or self.provider.dims == len(query)):
                    with self._news_lock:
                        self._news.append(f"The embedding endpoint answered a vector of {len(query)} dimensions where the "
                                          f"index holds {view.head.dims}; semantic search skipped this once.")
                    return []
                live = view.rows[:, 1][view.rows[:, 1] != -1]
                self._repair(np.unique(live).tolist(), f"of {view.head.dims} dimensions (the model now gives {len(query)})")
                self._vectors.reset()
                self._stored_dims = None  # the vectors are embedded again, at the size the model gives now
                return []
            self._odd_dims = 0
            if not view.n or not sessions:
                return []
            names = view.names  # as they belong to this view (another thread may map newer files)
            ids, owners, scores = vector_scores.scope_scores(view, self._member_mask(view, sessions), query, wanted=top_sessions)
        return vector_scores.best_of_sessions(names, sessions, ids, owners, scores, top_sessions, per_session)

    def _member_mask(self, view: vector_file.View, sessions: set[str]) -> np.ndarray:
        """:func:`vector_scores.member_mask` of ``sessions`` in ``view``, kept for the last scope searched: a
        session's code never changes within the files' epoch, so the same sessions (compared in full) over
        as many names give the same mask. Lock held."""
        key = (view.head.epoch, len(view.names))
        held = self._member
        if held is not None and held[0] == key and held[1] == sessions:
            return held[2]
        mask = vector_scores.member_mask(view, self._codes, sessions)
        self._member = (key, frozenset(sessions), mask)
        return mask

    @property
    def vectors_in_memory(self) -> int:
        """How many live vectors this process has mapped for this index (0 until a search or warm-up maps them).

        Mapped, not copied: the pages are the shared vector files'.
        """
        view = self._view
        return int(np.count_nonzero(view.rows[:, 1] != -1)) if view.n else 0

    def warm(self, sessions: AbstractSet[str] | None = None) -> None:
        """Do now what the first search would: load the model and map the vector files, brought up to the file.

        Then reads one value of every page of the mapped files that holds a
        vector of ``sessions`` (every page when ``None``), as the first search
        would: pages the page cache lost (after a restart, or under memory
        pressure) come from disk now, and this process's page tables are
        filled now, not during the first search. Shared pages, no copy; other
        projects' vectors are left on disk. Embeds no message and sends
        nothing. Raises what a search would (:class:`EmbeddingUnavailable`,
        :class:`IndexBroken`, ``sqlite3`` errors).
        """
        load = getattr(self.provider, "load", None)
        if load is not None:
            load()
        with self._lock:
            self._refresh()
            view = self._view
            member = self._member_mask(view, set(sessions)) if sessions is not None and view.n else None
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

    def _learn_basis(self) -> None:
        """Learn the vector files' basis when they are large and have none (or grew much since): see
        :meth:`vector_file.VectorFile.organise`. A folder that refuses it, or vectors with nothing finite to
        learn from, is logged: searches stay exact."""
        try:
            self._vectors.organise(self._db)  # without the index's lock: searches go on meanwhile
        except (OSError, ValueError) as exc:  # ValueError: numpy's LinAlgError too
            logger.warning("embeddings index %s: could not write the vectors' basis (%s); searches score every row", self.path, exc)


def _close_all(indexes: dict[tuple[str, str], VectorIndex]) -> None:
    """Close every index of the registry (before :func:`state.reset` empties it)."""
    for index in indexes.values():
        index.close()


#: (resolved path, model fingerprint) -> the open index
_indexes = state.cache("vector_indexes", on_reset=_close_all)


def index_for(path: Path, provider: Provider, *, chunk_size: int = 512, chunk_overlap: int = 64) -> VectorIndex:
    """The process-wide index for this file and model (its matrix stays loaded).

    Raises what opening it raises (:class:`IndexNotNow`, :class:`IndexBlocked`).
    A permanent condition (:class:`IndexBlocked`: a read-only folder or file, a
    newer schema, a folder at the path) is remembered: until the file or a
    folder above it changes (seen by a few ``stat`` calls), later calls raise
    it again at once, without opening anything.
    """
    key = (str(Path(path).resolve()), provider.fingerprint)
    with _indexes.lock:
        index = _indexes.data.get(key)
        if index is not None and (index.retired or not index.same_file()):
            # Deleted by the user, or moved aside and rebuilt by another process: this
            # process would go on with a file nobody else sees. Or found damaged or
            # unwritable in use: opened again, the file is moved aside or the condition
            # reported. (The old index is not closed: a search may still be using it.)
            logger.info("embeddings index %s was replaced, removed or damaged; opening it again", path)
            index.retire()  # its writes would land in a file nobody reads, or break the new one's journal
            index = None
        if index is None:
            known = index_file.remembered_problem(Path(key[0]))
            if known is not None:
                raise known
            try:
                blocker = index_file.write_blocker(Path(path).absolute())
                if blocker is not None:
                    raise blocker
                index = _indexes.data[key] = VectorIndex(path, provider, chunk_size=chunk_size, chunk_overlap=chunk_overlap)
            except IndexBlocked as exc:
                index_file.remember(Path(key[0]), exc)
                raise
        return index


def _touch_pages(mapped: np.ndarray) -> None:
    """Read one value of every page of ``mapped`` (a mapped file's array)."""
    flat = mapped.reshape(-1)
    if len(flat):
        flat[:: max(1, _PAGE // flat.itemsize)].sum()


def reset_indexes() -> None:
    """Close every open index and forget the remembered problems (tests, a new process's view); never raises."""
    _indexes.clear()
    state.cache("index_problems").clear()
