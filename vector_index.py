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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import errors, index_file, state, state_history, vector_view
from .embeddings import EmbeddingUnavailable, Provider, chunk_text, normalise
from .index_file import IndexBlocked, IndexNotNow
from .ranking import Hit
from .vector_store import ChunkStore, CompleteMarks

__all__ = ["CompleteMarks", "PendingMessage", "VectorIndex", "index_for", "reset_indexes"]

logger = logging.getLogger(__name__)

_generations = itertools.count(1)

EMBED_CHUNKS = 32  # chunks given to the provider per call: the most a deadline is overrun by
PASS_CHARS = 2_000_000  # characters of too-long messages one add reads and chunks before it stops (~20 of 100 KB)



@dataclass(frozen=True)
class PendingMessage:
    """A message to embed: its id and session in state.db, and its text as stored there."""

    message_id: int
    session_id: str
    text: str


class VectorIndex:
    """Chunks of messages and their vectors, for one embedding model, and their mapped copy.

    A damaged file is moved aside and rebuilt (:func:`index_file.open_index`);
    ``note`` then says so. Vectors of the wrong size are dropped when they are
    loaded and their messages count as not indexed, so the next indexing embeds
    them again (:meth:`pop_news` says so once). The text a provider is given is its
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
        self.retired = False  # replaced, or found damaged or unwritable: no more writes; index_for opens the file again
        self._checked: tuple[Any, ...] | None = None  # the file's and its journal's stat_key when last checked whole
        self._mapped = vector_view.MappedVectors(self.path, provider, self._db)  # this process's map of the shared files
        self._damaged: set[int] = set()  # messages whose stored vectors were unusable: not indexed until embedded again
        self._damage_kept = False  # a repair could not delete damaged vectors from the file: no marks are trusted or written
        self.repaired = 0  # how many such messages this index found
        self._news: list[str] = []  # what the next search should say once (see pop_news)
        self._news_lock = threading.Lock()

    # -- the file ------------------------------------------------------------------
    def trouble(self, exc: sqlite3.Error) -> EmbeddingUnavailable:
        """What an SQLite error met during a search means (from this index or from state.db, read beside it): a
        damaged or unwritable index file retires this index (the next :func:`index_for` opens it again, and moves a
        damaged file aside); busy is temporary, and so is damage the index's schema and b-trees' ends do not show:
        the whole file is then checked in the background (:meth:`_check_inside`). Never raises.
        """
        problem = index_file.unusable(self.path, exc)
        with self._lock:
            sound = problem.code == "index_damaged" and index_file.healthy(self._conn)
        if sound:
            self._check_inside()
        if problem.code in ("index_busy", "index_error") or sound:
            return IndexNotNow(f"semantic search could not finish just now ({exc}); it retries on a later search",
                               code="db_error" if sound else problem.code)
        if problem.code in ("index_damaged", "index_read_only", "index_not_a_file"):
            self.retired = True
            if isinstance(problem, IndexBlocked):
                index_file.remember(self.path, problem)
        logger.warning("embeddings index %s: %s", self.path, exc, extra=errors.said_as(str(problem)))
        return problem

    def _check_inside(self) -> None:
        """Have every page of the file checked in a thread of its own (:func:`index_file.damaged_inside`: seconds for
        a large file), once for each state of the file and its journal; found damaged, the file is moved aside and
        this index retires (an error saying "damaged" may also be state.db's, read beside)."""
        # Size and modification time, not ctime: opening the journal (the check's own connection) changes it.
        stamp = tuple((index_file.stat_key(Path(f"{self.path}{journal}")) or ())[:7] for journal in ("", "-wal"))
        with self._lock:
            if self._checked == stamp:
                return
            self._checked = stamp

        def run() -> None:
            try:
                if index_file.damaged_inside(self.path) and self.same_file():
                    self.retired = True
                    index_file.move_aside(self.path, sqlite3.DatabaseError("pages damaged inside the file"))
            except (IndexBlocked, OSError) as exc:  # cannot move it: the next open says so
                logger.warning("embeddings index %s: %s", self.path, exc)

        threading.Thread(target=run, name="phr-index-inside", daemon=True).start()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _check_current(self) -> None:
        if self.retired:
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
        logger.warning("embeddings index %s: %s", self.path, message, extra=errors.said_as(message))

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
    def add(self, messages: Iterable[PendingMessage], *, deadline: float | None = None, longest: int | None = None,
            passed: list[int] | None = None, history: state_history.History | None = None) -> int:
        """Embed and store ``messages``, taken one at a time as the work reaches them (:func:`_groups`: at most
        ``EMBED_CHUNKS`` chunks a call, a message of more than ``longest`` chunks passed over into ``passed``),
        until ``deadline``, overrun by one call at most. A message is stored with all its chunks or not at all; one
        embedded before loses its old rows. ``history``: state.db's history when the messages were read
        (:func:`index_check.agree`), so a later restore drops what was written above it.
        Returns how many messages were stored. Raises :class:`EmbeddingUnavailable` when the provider fails
        (what was stored stays), ``sqlite3`` errors when the file refuses the write (see :meth:`trouble`).
        """
        def before_deadline() -> bool:
            return deadline is None or time.monotonic() < deadline

        def chunked(text: str) -> list[str]:
            return _chunks(self.provider, text, self.chunk_size, self.chunk_overlap, longest)

        done = 0
        for group in _groups(messages, chunked, before_deadline, longest, passed):
            done += self._embed_and_store(group, deadline, history)
        return done

    def _embed_and_store(self, group: list[tuple[PendingMessage, list[str]]], deadline: float | None,
                         history: state_history.History | None) -> int:
        """Embed ``group``'s chunks, ``EMBED_CHUNKS`` per call (more than one call only for a message that has more),
        and store its messages in one transaction; returns how many were stored (0 when the deadline passed
        between two calls: nothing of the group is stored)."""
        pieces = [(m, i, c) for m, chunks in group for i, c in enumerate(chunks)]
        vectors = _embed(self.provider, [c for _, _, c in pieces], deadline)
        if vectors is None:
            return 0
        now = time.time()
        messages = [m for m, _ in group]
        with self._lock:
            self._check_current()
            before = self.store.stored_among(self._conn, [m.message_id for m in messages])
            written = self.store.write(self._conn, messages, [(m, i, v) for (m, i, _), v in zip(pieces, vectors, strict=True)],
                                       now, history)
            # A changed message's old vectors are marked gone in the vector files (only once
            # the new ones are stored: a failed write keeps the old ones in use).
            self._mapped.cut([m.message_id for m in messages if m.message_id in before], keep=written)
            self._damaged.difference_update(m.message_id for m in messages)
            self._damage_kept = self._damage_kept and bool(self._damaged)  # embedded again: their old rows went
        return len(messages)

    def drop(self, message_ids: Sequence[int]) -> None:
        """Forget messages that were deleted or rewound."""
        if not message_ids:
            return
        with self._lock:
            self._check_current()
            self.store.delete(self._conn, message_ids)
            self._mapped.cut(message_ids)  # after the commit: a failed delete leaves the rows live

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
            gone = self.store.of_other_size(self._conn, self._mapped.expected_dims(self._conn, self.store) * 4)
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
        self._mapped.cut(gone)
        self.repaired += len(gone)
        self.generation = next(_generations)  # a watermark saying "complete" no longer holds
        self._say(f"{len(gone)} message(s) had vectors {why} in the embeddings index: they were dropped and are "
                  "embedded again")
        if self.retired:
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
            self._mapped.cut(gone)
            self.generation = next(_generations)  # this process's watermarks no longer hold
        self._say(f"state.db no longer holds the messages this index knew above message id {parted} (restored from "
                  f"an older copy?): the vectors of {len(gone)} message(s) were dropped and the index is checked again")
        return len(gone)

    # -- the mapped vector files and the search --------------------------------------------
    def _refresh(self) -> None:
        """Bring the mapped files up to embeddings.db; vectors of the wrong size met on the way are repaired (the
        caller holds ``_lock``). Raises :class:`IndexNotNow` when the files cannot be written, ``sqlite3`` errors."""
        damaged = self._mapped.refresh(self._conn, self.store)
        if damaged:
            self._repair(damaged, "of the wrong size")

    def catch_up(self) -> None:
        """Copy the chunks stored since into the shared vector files and map them; vectors of the wrong size
        met on the way are repaired now (a new ``generation``). Raises like a search's refresh."""
        with self._lock:
            self._refresh()

    def sync(self) -> None:
        """Copy what embeddings.db holds into the shared vector files now, so that no search pays for it; then learn
        their principal directions once they are many. Rows whose chunks another process deleted without marking
        them gone are marked now. Raises like a search's refresh."""
        with self._lock:
            self._mapped.reconcile_now()
            self._refresh()
        self._mapped.learn_basis()

    def search(self, query: np.ndarray, sessions: set[str], top_sessions: int, *, per_session: int = 1,
               group: Callable[[list[str]], Mapping[str, str]] | None = None,
               keys: Callable[[Mapping[int, str]], Mapping[int, str]] | None = None) -> list[Hit]:
        """The best messages of the ``top_sessions`` sessions most similar to ``query``: hits scored by cosine, best
        first, at most ``per_session`` of each session, so one session with many similar messages cannot crowd out
        the others (:meth:`vector_view.MappedVectors.scores`). Scope is applied here, at query time."""
        with self._lock:
            self._refresh()
            query = normalise(query)[0]
            if self._mapped.view.n and len(query) != self._mapped.view.head.dims:
                # Files of another size than this model's (started over by a process whose endpoint
                # answers another size, since the refresh): nothing here to compare the query with.
                return []
            return self._mapped.scores(query, sessions, top_sessions, per_session, group, keys)

    @property
    def vectors_in_memory(self) -> int:
        """How many live vectors this process has mapped for this index (0 until a search or warm-up maps them)."""
        return self._mapped.live_rows

    def warm(self, sessions: AbstractSet[str] | None = None) -> None:
        """Do now what the first search would: load the model, map the vector files brought up to the file, and read
        one value of every page that holds a vector of ``sessions`` (every page when ``None``): shared pages, no
        copy; other projects' vectors are left on disk. Embeds no message and sends nothing. Raises what a search
        would (:class:`EmbeddingUnavailable`, ``sqlite3`` errors)."""
        load = getattr(self.provider, "load", None)
        if load is not None:
            load()
        with self._lock:
            self._refresh()
            view, member = self._mapped.pages_of(sessions)
        vector_view.touch(view, member)


Group = list[tuple[PendingMessage, list[str]]]


def _chunks(provider: Provider, text: str, size: int, overlap: int, longest: int | None) -> list[str]:
    """The chunks of ``text`` as ``provider`` may be given it; those of ``text`` as stored when they are more than
    ``longest``. A message too long for a search is passed over and never sent, so it is not redacted (redaction
    costs ~0.2 s a 100 KB message, chunking ~1 ms)."""
    raw = chunk_text(text, size, overlap)
    if longest is not None and len(raw) > longest:
        return raw
    sent = provider.outbound_text(text)
    return raw if sent == text else chunk_text(sent, size, overlap)


def _groups(messages: Iterable[PendingMessage], chunked: Callable[[str], list[str]], before_deadline: Callable[[], bool],
            longest: int | None, passed: list[int] | None) -> Iterator[Group]:
    """Whole messages with their chunks, in groups of at most ``EMBED_CHUNKS`` chunks (a longer message alone),
    taken from ``messages`` only while ``before_deadline()``; a message of more than ``longest`` chunks is passed
    over (its id appended to ``passed``) and those behind it are taken, until ``PASS_CHARS`` characters of passed
    messages were read and chunked (finding a message too long costs reading it): then nothing more is taken."""
    taken = iter(messages)
    group: Group = []
    size = read_over = 0
    while before_deadline():
        message = next(taken, None)
        if message is None:
            break
        chunks = chunked(message.text)
        if longest is not None and len(chunks) > longest:
            if passed is not None:
                passed.append(message.message_id)
            read_over += len(message.text)
            if read_over >= PASS_CHARS:
                break
            continue
        if group and size + len(chunks) > EMBED_CHUNKS:
            yield group
            group, size = [], 0
        group.append((message, chunks))
        size += len(chunks)
    if group and before_deadline():
        yield group


def _embed(provider: Provider, chunks: Sequence[str], deadline: float | None) -> np.ndarray | None:
    """The vectors of ``chunks``, ``EMBED_CHUNKS`` per call to the provider; ``None`` when the deadline passed
    between two calls (what was embedded is dropped). Raises what ``provider.embed`` raises."""
    parts = []
    for start in range(0, len(chunks), EMBED_CHUNKS):
        if start and deadline is not None and time.monotonic() >= deadline:
            return None
        parts.append(provider.embed(list(chunks[start : start + EMBED_CHUNKS])))
    return np.vstack(parts) if parts else np.zeros((0, 1), np.float32)


def _close_all(indexes: dict[tuple[str, str], VectorIndex]) -> None:
    """Close every index of the registry (before :func:`state.reset` empties it)."""
    for index in indexes.values():
        index.close()


#: (resolved path, model fingerprint) -> the open index
_indexes = state.cache("vector_indexes", on_reset=_close_all)


def index_for(path: Path, provider: Provider, *, chunk_size: int = 512, chunk_overlap: int = 64) -> VectorIndex:
    """The process-wide index for this file and model (its matrix stays loaded).

    Raises what opening it raises (:class:`IndexNotNow`, :class:`IndexBlocked`).
    A permanent condition (:class:`IndexBlocked`) is remembered
    (:func:`index_file.remember`): later calls raise it again at once, without
    opening anything.
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
            index.retired = True  # its writes would land in a file nobody reads, or break the new one's journal
            index = None
        if index is not None and getattr(index.provider, "api_key", None) != getattr(provider, "api_key", None):
            index.provider = provider  # the key changed in the profile's .env (the fingerprint holds none): sent now
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


def reset_indexes() -> None:
    """Close every open index and forget the remembered problems (tests, a new process's view); never raises."""
    _indexes.clear()
    state.cache("index_problems").clear()
