"""The vectors of embeddings.db, and the one open index per file and model.

:class:`VectorIndex` writes chunks to embeddings.db (the truth), keeps the
model's vector files (:mod:`vector_file`) up to it and maps them: every
process shares one copy of the vectors in the page cache instead of loading
its own. Similarity searches score the mapped rows (:mod:`vector_scores`),
scope applied at query time.
:func:`index_for` gives the process-wide index of a file and model (state
cache ``vector_indexes``); :func:`reset_indexes` closes them all.

Invariants: vectors of different models never mix (every read filters on the
provider's fingerprint); vectors are keyed by message, never by project, so a
move never re-embeds; a scope is compared in full, never by hash. The file
itself (opening, schema, damage, write blockers) is :mod:`index_file`'s; an
index that found its file replaced, damaged or unwritable retires (no more
writes) and :func:`index_for` opens the file again.

``generation`` numbers come from one counter for the life of the process: it
is an identity, not a cache (searches key their caches by it), so no reset
rewinds it.
"""

from __future__ import annotations

import itertools
import json
import logging
import secrets
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Container, Sequence
from collections.abc import Set as AbstractSet
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import index_file, state, state_history, vector_file, vector_scores
from .embeddings import EmbeddingUnavailable, Provider, chunk_text, content_hash, decode_vectors, encode_vector, normalise
from .index_file import IndexBlocked, IndexNotNow
from .ranking import Hit

logger = logging.getLogger(__name__)

_generations = itertools.count(1)

_LOAD_BATCH = 2_000  # chunks decoded per step when vectors are copied in (bounds what the copying process holds)
_PAGE = 4_096  # bytes of a memory page: the warm-up reads one value of each
# meta: the history of state.db that everything here was learned from (:mod:`state_history`, its JSON text)
_HISTORY_KEY = "state_history"
_HISTORY_WAIT_S = 0.0  # how long storing a first history waits for another writer: not at all (a later search does it)
# The messages (chunk 0) of a model (parameter 1) and of sessions (parameter 2, a JSON array) the file holds
# vectors of, one row per message, from a covering index. Above a message id, the (model, chunk, message,
# ...) index: one range of the newest ids.
_SESSIONS_INDEXED = ("FROM chunks INDEXED BY chunks_indexed WHERE model_fingerprint = ? AND chunk_index = 0"
                     " AND session_id IN (SELECT value FROM json_each(?))")
# All of them, from the UNIQUE (session, message, chunk, model) index: a seek per session. Unary + keeps
# SQLite off the other index, which it would prefer and read whole here (every chunk 0 of every project).
_SESSIONS_ALL_INDEXED = ("FROM chunks WHERE +model_fingerprint = ? AND +chunk_index = 0"
                         " AND session_id IN (SELECT value FROM json_each(?))")

_RECONCILE_S = 30.0  # how often a process checks that no gone chunk is still marked live (another process died mid-way)


@dataclass(frozen=True)
class CompleteMarks:
    """How far sessions are known to be indexed: ``upto[session id]`` = a message id such that every indexable
    message of the session up to it has vectors in the file; ``stamp`` names the marks' state since the last
    repair."""

    upto: dict[str, int]
    stamp: str
    behind: bool = False  # state.db's ids went back below the stored marks: they are to be replaced, not merged


@dataclass(frozen=True)
class PendingMessage:
    """A message to embed: its id and session in state.db, and its text as stored there."""

    message_id: int
    session_id: str
    text: str


class VectorIndex:
    """Chunks of messages and their vectors, for one embedding model.

    Vectors of different models never mix (every read filters on the
    provider's fingerprint). Vectors are keyed by message, never by project:
    scope is applied at query time, so a move never re-embeds. A corrupt or
    foreign file, or one missing a table or index of the schema, is moved aside
    (``*.broken-<time>-<pid>``) and rebuilt; ``note`` then says so. Vectors of
    the wrong size are dropped when they are loaded and their messages count
    as not indexed, so the next indexing embeds them again (:meth:`pop_news`
    says so once). The text a provider is given is its ``outbound_text`` of a
    message (redacted for a remote one); what is stored as the message's content
    hash is always the hash of the message itself.
    """

    def __init__(self, path: Path, provider: Provider, *, chunk_size: int = 512, chunk_overlap: int = 64) -> None:
        self.path = Path(path).absolute()  # a relative home must still give a file URI (read-only opens)
        self.provider = provider
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.generation = next(_generations)  # distinguishes this open index from any earlier one
        self._lock = threading.Lock()  # serialises every use of the connection and of what is loaded
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
        self._indexed_upto = 0  # highest chunk id whose message counts in _indexed
        self._indexed: set[int] = set()  # message ids embedded with this model (no hashes: 16 MB, not 60, at 400k)
        self._indexed_loaded = False
        self._damaged: set[int] = set()  # messages whose stored vectors were unusable: not indexed until embedded again
        self._damage_kept = False  # a repair could not delete damaged vectors from the file: no marks are trusted or written
        self._indexed_stamp: str | None = None  # the marks' stamp when _indexed was read (a repair since voids it)
        self.repaired = 0  # how many such messages this index found
        self._news: list[str] = []  # what the next search should say once (see pop_news)
        self._news_lock = threading.Lock()

    # -- file ------------------------------------------------------------------
    def unusable(self, exc: sqlite3.Error) -> EmbeddingUnavailable:
        """What an SQLite error on this index means for searches (see :func:`index_file.unusable`); never raises."""
        return index_file.unusable(self.path, exc)

    def trouble(self, exc: sqlite3.Error) -> EmbeddingUnavailable:
        """:meth:`unusable` for an SQLite error met during a search (from this index or from state.db, read beside it).

        A damaged or unwritable index file retires this index, so the next
        :func:`index_for` opens it again (and moves it aside, or reports the
        condition at once, remembered). Damage this index does not show (its
        schema and table read fine) is state.db's: a temporary answer, and the
        index is kept. Busy is temporary. Never raises.
        """
        problem = self.unusable(exc)
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
        """Whether this index's file still reads as an index (see :func:`index_file.healthy`)."""
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

    # -- what is indexed ---------------------------------------------------------
    def _load_indexed(self) -> None:
        """Read the set of every indexed message, again when another process repaired vectors since (rows it
        deleted would otherwise stay in the set: only additions are caught up with). The caller holds ``_lock``."""
        stamp = self._stamp(self._conn)
        if self._indexed_loaded and stamp != self._indexed_stamp:
            self._indexed_loaded = False
        if not self._indexed_loaded:
            self._indexed_stamp = stamp
            self._indexed_upto = self._top_chunk(self._conn)  # read first: later chunks are read again, harmlessly
            # One row per message (chunk 0), read from the covering index.
            self._indexed = {int(r[0]) for r in self._conn.execute(
                "SELECT message_id FROM chunks INDEXED BY chunks_indexed WHERE model_fingerprint = ? AND chunk_index = 0",
                (self.provider.fingerprint,),
            )}
            self._indexed -= self._damaged  # their rows may still be in the file (the repair could not delete them)
            self._indexed_loaded = True

    def pop_news(self) -> str:
        """What happened to the index since the last call that a search should report once (e.g. damaged vectors dropped); ``""`` when nothing."""
        with self._news_lock:  # not the index's lock: a keyword-mode search never waits for a load
            news, self._news = self._news, []
        return " ".join(news)

    def _catch_up(self) -> None:
        """Bring the mapped vector files up to the file (the caller holds ``_lock``). The set of every indexed
        message (:meth:`_load_indexed`, costly at hundreds of thousands of chunks) is read only by what needs it."""
        self._refresh_matrix()

    def indexed(self) -> dict[int, str]:
        """``{message id: content hash}`` of everything embedded with this model, read from the file (a copy).

        Raises ``sqlite3`` errors.
        """
        with self._lock:
            self._load_indexed()
            rows = self._conn.execute(
                "SELECT message_id, content_hash FROM chunks INDEXED BY chunks_indexed WHERE model_fingerprint = ? AND chunk_index = 0",
                (self.provider.fingerprint,),
            )
            return {int(mid): digest for mid, digest in rows if int(mid) in self._indexed}

    def sync(self) -> None:
        """Copy what embeddings.db holds into the shared vector files now, so that no search pays for it; then
        learn their principal directions once they are many (:meth:`vector_file.VectorFile.organise`), so that a
        large project's search reads 3/8 of its vectors' bytes first. Rows whose chunks another process deleted
        without marking them gone (it died in between) are marked now, not only every ``_RECONCILE_S``.

        Raises like a search's refresh (:class:`IndexNotNow`, ``sqlite3`` errors). A basis that the folder
        refuses is logged and left for the next sync: searches then score every row exactly.
        """
        with self._lock:
            self._checked_at = -_RECONCILE_S  # check for rows of gone chunks now
            self._catch_up()
        self._learn_basis()

    def catch_up(self) -> None:
        """Copy the chunks stored since into the shared vector files and map them; vectors of the wrong size
        met on the way are repaired now (a new ``generation``). Raises like a search's refresh."""
        with self._lock:
            self._catch_up()

    def indexed_ids(self) -> AbstractSet[int]:
        """The message ids embedded with this model: the live set, not a copy (callers only read it)."""
        with self._lock:
            self._load_indexed()
            self._catch_up()
            return self._indexed

    def repair_damaged(self) -> int:
        """Find this model's stored vectors of the wrong size in embeddings.db and repair them (:meth:`_repair`).

        Searches read a vector once, when it is copied into the vector files;
        one damaged in embeddings.db after that keeps answering from the copy.
        The index command calls this to heal the file itself (one pass over
        the chunks' sizes, not their contents). Returns how many messages were
        repaired; raises ``sqlite3`` errors.
        """
        with self._lock:
            self._catch_up()
            size = self._expected_dims() * 4
            gone = [int(r[0]) for r in self._conn.execute(
                "SELECT DISTINCT message_id FROM chunks WHERE model_fingerprint = ? AND length(vector) != ?",
                (self.provider.fingerprint, size),
            )]
            if gone:
                self._repair(gone, "of the wrong size")
            return len(gone)

    def add(self, messages: Sequence[PendingMessage], *, deadline: float | None = None, batch: int = 32,
            history: state_history.History | None = None) -> int:
        """Embed and store ``messages`` until ``deadline`` (one embedded before is embedded again: its old rows go).

        ``history``: state.db's history when the messages were read (:func:`index_check.agree`), stored with
        the vectors in one transaction: when state.db is put back from an older copy later, the next check
        finds where it parted from this history and drops what was written above that point.

        Each message is chunked as the provider may be given it
        (``provider.outbound_text``: secrets redacted before a remote endpoint
        sees them, so a key cut in two by a chunk boundary is redacted whole);
        its content hash is that of the message as it is. Returns how many
        messages were stored. Raises :class:`EmbeddingUnavailable` when the
        provider fails (what was stored before stays), ``sqlite3`` errors when
        the file refuses the write (see :meth:`trouble`).
        """
        done = 0
        fingerprint = self.provider.fingerprint
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
                before = self._stored_among([m.message_id for m in group])
                written, kept = self._write_group(group, pieces, vectors, fingerprint, now, history)
                # A changed message's old vectors are marked gone in the vector files (only once
                # the new ones are stored: a failed write keeps the old ones in use).
                self._cut([m.message_id for m in kept if m.message_id in before], keep=written)
                for m in kept:
                    if self._indexed_loaded:
                        self._indexed.add(m.message_id)
                    self._damaged.discard(m.message_id)
                self._damage_kept = self._damage_kept and bool(self._damaged)  # embedded again: their old rows went
            done += len(kept)
        return done

    def _stored_among(self, message_ids: Sequence[int]) -> set[int]:
        """Which of ``message_ids`` have vectors of this model in the file (the caller holds ``_lock``)."""
        rows = self._conn.execute(
            "SELECT DISTINCT message_id FROM chunks INDEXED BY chunks_by_model_message WHERE model_fingerprint = ?"
            " AND message_id IN (SELECT value FROM json_each(?))",
            (self.provider.fingerprint, json.dumps([int(m) for m in message_ids])),
        )
        return {int(r[0]) for r in rows}

    def _write_group(self, group: Sequence[PendingMessage], pieces: list, vectors: np.ndarray, fingerprint: str, now: float,
                     history: state_history.History | None) -> tuple[list[int], list[PendingMessage]]:
        """Replace the stored chunks of ``group``'s messages in one transaction (rolled back on error), ``history``
        stored with them; returns ``(the new chunk ids, the messages written)``."""
        written: list[int] = []
        with self._conn:
            self._conn.execute("BEGIN IMMEDIATE")
            if history is not None:
                _store_history(self._conn, history)
            for m in group:
                self._conn.execute("DELETE FROM chunks WHERE model_fingerprint = ? AND message_id = ?", (fingerprint, m.message_id))
            for (m, i, _), vector in zip(pieces, vectors, strict=True):
                cursor = self._conn.execute(
                    "INSERT INTO chunks (session_id, message_id, chunk_index, content_hash, model_fingerprint, vector, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (m.session_id, m.message_id, i, content_hash(m.text), fingerprint, encode_vector(vector), now),
                )
                written.append(int(cursor.lastrowid or 0))
        return written, list(group)

    def requeue(self, message_ids: Sequence[int], why: str) -> None:
        """Forget the vectors of ``message_ids``, which no longer describe their messages (``why``), so that the next
        indexing embeds them again where they should still be indexed: their rows go, and so do this process's
        watermarks and every process's marks of their sessions (:meth:`_repair`)."""
        if message_ids:
            with self._lock:
                self._repair(message_ids, why)

    def drop(self, message_ids: Sequence[int]) -> None:
        """Forget messages that were deleted or rewound."""
        if not message_ids:
            return
        with self._lock:
            with self._conn:
                self._check_current()
                self._conn.execute(
                    "DELETE FROM chunks WHERE model_fingerprint = ? AND message_id IN (SELECT value FROM json_each(?))",
                    (self.provider.fingerprint, json.dumps([int(m) for m in message_ids])),
                )
            for mid in message_ids:  # (not loaded: the next load reads the file without them)
                self._indexed.discard(int(mid))
            self._cut(message_ids)  # after the commit: a failed delete leaves the rows live

    # -- search ------------------------------------------------------------------
    def _cut(self, message_ids: Sequence[int], *, keep: Sequence[int] = ()) -> None:
        """Mark ``message_ids``' rows gone in the vector files, except the chunks ``keep`` (every process sees it at once)."""
        if message_ids:
            try:
                self._vectors.mark_gone(message_ids, keep_chunks=keep)
            except OSError as exc:  # left live: the next check (_reconcile) marks them
                logger.warning("embeddings index %s: could not mark vectors gone (%s)", self.path, exc)

    def _refresh_matrix(self) -> None:
        """Bring the vector files up to embeddings.db, and map what they commit.

        Chunks newer than the files' head are copied in batch by batch (by
        this process, or already by another one: then nothing is read). A
        vector of the wrong size (see :meth:`_expected_dims`) is not copied:
        its message is repaired (:meth:`_repair`), so the next indexing embeds
        it again. Raises :class:`IndexNotNow` when the vector files cannot be
        written (a full disk), ``sqlite3`` errors from embeddings.db.
        """
        fingerprint = self.provider.fingerprint
        top = self._top_chunk(self._conn)
        if self._indexed_loaded and top > self._indexed_upto:
            # Chunks written by another process (e.g. the index command) count as indexed.
            for (mid,) in self._conn.execute(
                "SELECT message_id FROM chunks WHERE id > ? AND id <= ? AND +model_fingerprint = ? AND chunk_index = 0",
                (self._indexed_upto, top, fingerprint),
            ):
                self._indexed.add(int(mid))
            self._indexed_upto = top
        head = self._vectors.head()
        view = self._vectors.view(self._db)
        damaged: list[int] = []
        dims = self._expected_dims() if top else 0
        stale = head.db != self._db or head.upto < top or not head.rows or head.dims != dims
        if top and (stale or view.n != head.rows):  # behind, of other dims (edited), or files that do not map

            def read_after(upto: int) -> Any:
                cursor = self._conn.execute(
                    # Unary + keeps SQLite on the rowid range (only chunks newer than the files).
                    "SELECT id, message_id, session_id, vector FROM chunks WHERE id > ? AND id <= ? AND +model_fingerprint = ? ORDER BY id",
                    (upto, top, fingerprint),
                )
                size = dims * 4
                while batch := cursor.fetchmany(_LOAD_BATCH):
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
        """Every ``_RECONCILE_S``: mark gone the rows whose chunks embeddings.db no longer holds.

        A process that deleted chunks marks their rows itself; this catches
        one that died in between (or a file changed by hand). One count over
        the (model, id) index; the ids are read only when the count differs.
        """
        now = time.monotonic()
        view = self._view
        if now - self._checked_at < _RECONCILE_S or not view.n:
            return
        self._checked_at = now
        live = view.rows[:, 1] != -1
        (count,) = self._conn.execute(
            "SELECT count(*) FROM chunks INDEXED BY chunks_by_model WHERE model_fingerprint = ? AND id <= ?",
            (self.provider.fingerprint, view.head.upto),
        ).fetchone()
        if int(np.count_nonzero(live)) <= int(count):
            return
        stored = np.fromiter((r[0] for r in self._conn.execute(
            "SELECT id FROM chunks INDEXED BY chunks_by_model WHERE model_fingerprint = ? AND id <= ?",
            (self.provider.fingerprint, view.head.upto),
        )), dtype=np.int64)
        stale = view.rows[live, 0][~np.isin(view.rows[live, 0], stored)]
        try:
            self._vectors.mark_gone((), gone_chunks=stale.tolist())
        except OSError as exc:
            logger.warning("embeddings index %s: could not mark vectors gone (%s)", self.path, exc)

    def _expected_dims(self) -> int:
        """The vector size of this model: the provider's when it knows it, else the commonest whole number of floats
        among the first chunks of embeddings.db, the larger on a tie (a damaged row is the odd one out, and a real
        embedding has more than a handful of dimensions). Never the vector files' head: a file of ours that says
        otherwise is copied again from embeddings.db, its vectors kept. Read once per index (the caller holds
        ``_lock``)."""
        if self.provider.dims > 0:
            return int(self.provider.dims)
        if self._stored_dims is None:
            rows = self._conn.execute("SELECT length(vector) FROM chunks WHERE +model_fingerprint = ? ORDER BY id LIMIT 256",
                                      (self.provider.fingerprint,))
            sizes = Counter(int(r[0]) for r in rows if r[0] and int(r[0]) % 4 == 0)
            if not sizes:
                return 1
            self._stored_dims = max(sizes.items(), key=lambda item: (item[1], item[0]))[0] // 4
        return self._stored_dims

    def _repair(self, message_ids: Sequence[int], why: str) -> None:
        """Forget ``message_ids``' stored vectors (unusable: ``why``) so that the next indexing embeds them again.

        Their rows are marked gone in the vector files and deleted from the file (best effort: a busy
        file keeps them until the messages are embedded again, which replaces
        them); searches' per-index caches start over (a new ``generation``).
        The caller holds ``_lock``.
        """
        gone = sorted(set(message_ids))
        self._damaged.update(gone)
        for mid in gone:
            self._indexed.discard(mid)
        self._cut(gone)
        self.repaired += len(gone)
        self.generation = next(_generations)  # a watermark saying "complete" no longer holds
        message = (f"{len(gone)} message(s) had vectors {why} in the embeddings index: they were dropped and are "
                   "embedded again")
        with self._news_lock:
            self._news.append(message + ".")
        logger.warning("embeddings index %s: %s", self.path, message)
        if self._retired:
            return
        try:
            with self._conn:
                self._conn.execute("BEGIN IMMEDIATE")  # the sessions, the marks and the delete under one lock
                sessions = {str(r[0]) for r in self._conn.execute(
                    "SELECT DISTINCT session_id FROM chunks WHERE model_fingerprint = ? AND message_id IN (SELECT value FROM json_each(?))",
                    (self.provider.fingerprint, json.dumps(gone)))}
                self._conn.execute(
                    "DELETE FROM chunks WHERE model_fingerprint = ? AND message_id IN (SELECT value FROM json_each(?))",
                    (self.provider.fingerprint, json.dumps(gone)),
                )
                # The "complete up to" marks of those sessions go, for every process, with a new stamp (see
                # mark_complete): the marks of the other sessions still hold.
                row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (self._marks_key,)).fetchone()
                self._conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?), (?, ?)",
                                   (self._marks_key, _marks_without(row[0] if row else None, sessions),
                                    self._stamp_key, secrets.token_hex(8)))
            if self._indexed_loaded:
                self._indexed_stamp = self._stamp(self._conn)  # this process's own repair: its set is right
        except sqlite3.Error as exc:
            self._damage_kept = True
            logger.warning("embeddings index %s: damaged vectors left in the file for now (%s)", self.path, exc)

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
            self._refresh_matrix()
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
            self._catch_up()
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

    def indexed_in(self, sessions: set[str]) -> int:
        """How many messages of ``sessions`` are indexed with this model (after catching up with the file)."""
        with self._lock:
            self._catch_up()
            return len(self._ids_in(self._conn, json.dumps(sorted(sessions))))

    # -- what is indexed, without waiting (status only) ----------------------------
    def indexed_ids_now(self, sessions_json: str, *, above: int = 0) -> Container[int]:
        """The indexed message ids of the sessions above ``above``, without waiting for a load in progress and without loading the matrix.

        ``sessions_json``: the session ids as a JSON array (a scope's
        ``ids_json``, built once per search). From memory (every session's
        ids, a live view) when what is loaded matches the file, else read
        from the file on a read-only connection (a set). Raises ``sqlite3`` errors.
        """
        if self.in_step():
            return self._indexed
        with closing(self._reader()) as conn:
            return self._ids_in(conn, sessions_json, above)

    def indexed_array(self, sessions_json: str) -> np.ndarray:
        """The ids of the messages of the sessions (a JSON array, as :meth:`indexed_ids_now`) that the file
        holds vectors of (int64, in no particular order), read from the file on a read-only connection,
        without waiting for a load and without the set of every indexed id; damaged ones this process could
        not delete left out. Raises ``sqlite3`` errors."""
        with closing(self._reader()) as conn:
            row = conn.execute(f"SELECT group_concat(message_id) {_SESSIONS_ALL_INDEXED}",
                               (self.provider.fingerprint, sessions_json)).fetchone()
        ids = np.fromstring(str(row[0] or ""), dtype=np.int64, sep=",")
        if self._damaged:
            ids = ids[~np.isin(ids, np.fromiter(self._damaged, np.int64, len(self._damaged)))]
        return ids

    def stored_hashes(self, message_ids: Sequence[int]) -> dict[int, str]:
        """``{message id: content hash}`` of those of ``message_ids`` that have vectors of this model: the hash of
        the text they were embedded from. Read-only, from a covering index, never waiting for a load. Raises
        ``sqlite3`` errors."""
        with closing(self._reader()) as conn:
            rows = conn.execute(
                "SELECT message_id, content_hash FROM chunks INDEXED BY chunks_indexed WHERE model_fingerprint = ?"
                " AND chunk_index = 0 AND message_id IN (SELECT value FROM json_each(?))",
                (self.provider.fingerprint, json.dumps([int(m) for m in message_ids])))
            return {int(m): str(h) for m, h in rows}

    def stored_upto(self) -> int:
        """The highest chunk id of this model in the file (0 when none); read-only, never waits for a load.

        Raises like :meth:`indexed_ids_now`.
        """
        with closing(self._reader()) as conn:
            return self._top_chunk(conn)

    def in_step(self) -> bool:
        """Whether what is indexed in memory can answer now: not busy loading or indexing, nothing new in the
        file, and no repair by any process since it was read."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            return (self._indexed_loaded and self._top_chunk(self._conn) == self._indexed_upto
                    and self._stamp(self._conn) == self._indexed_stamp)
        finally:
            self._lock.release()

    def _top_chunk(self, conn: sqlite3.Connection) -> int:
        """The highest chunk id of this model in the file (0 when none)."""
        row = conn.execute(
            "SELECT max(id) FROM chunks INDEXED BY chunks_by_model WHERE model_fingerprint = ?", (self.provider.fingerprint,)
        ).fetchone()
        return int(row[0] or 0)

    def _ids_in(self, conn: sqlite3.Connection, sessions_json: str, above: int = 0) -> set[int]:
        """The ids of the messages of the sessions (a JSON array) above ``above`` that the file holds vectors of."""
        rows = conn.execute(f"SELECT message_id {_SESSIONS_INDEXED if above else _SESSIONS_ALL_INDEXED} AND message_id > ?",
                            (self.provider.fingerprint, sessions_json, int(above)))
        return {int(r[0]) for r in rows}

    # -- how far each session is indexed, shared by every process -------------------
    @property
    def _marks_key(self) -> str:
        return f"complete_upto:{self.provider.fingerprint}"

    @property
    def _stamp_key(self) -> str:
        return f"complete_stamp:{self.provider.fingerprint}"

    def _stamp(self, conn: sqlite3.Connection) -> str:
        """The marks' stamp: a new one after each repair of this model's vectors ("" before any)."""
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (self._stamp_key,)).fetchone()
        return str(row[0]) if row else ""

    def complete_marks(self, sessions: AbstractSet[str], top: int) -> CompleteMarks:
        """The "complete up to" marks of ``sessions`` (see :meth:`mark_complete`), read-only and without waiting
        for a load; ``top`` is state.db's highest message id now. No marks (only the stamp) while this process
        keeps damaged vectors it could not delete, when the stored marks do not read as an object of ids,
        or when one of them is above ``top`` (state.db went back: a restored copy reuses ids). Raises
        ``sqlite3`` errors."""
        with closing(self._reader()) as conn:  # one statement: both rows from one snapshot
            rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN (?, ?)", (self._marks_key, self._stamp_key)))
        stamp = str(rows.get(self._stamp_key, ""))
        try:
            stored = json.loads(rows[self._marks_key]) if self._marks_key in rows else {}
        except (TypeError, ValueError, RecursionError):  # mangled by hand: no marks; the next mark_complete replaces them
            stored = None
        if self._damage_kept or not isinstance(stored, dict):
            return CompleteMarks({}, stamp)
        upto = {sid: u for sid, u in stored.items() if type(u) is int}
        if any(u > top for u in upto.values()):
            return CompleteMarks({}, stamp, behind=True)
        return CompleteMarks({sid: u for sid, u in upto.items() if sid in sessions}, stamp)

    def mark_complete(self, sessions: Sequence[str], upto: int, marks: CompleteMarks, *, replace: bool = False,
                      history: state_history.History | None = None) -> bool:
        """Record, for every process, that every indexable message of ``sessions`` up to message id ``upto`` has
        vectors of this model in this file. ``marks`` is :meth:`complete_marks`'s answer, read before that was
        checked: when vectors were repaired since (the stamp moved on), nothing is recorded. Marks that do not
        read as an object, or that state.db went back from, are replaced, as all are with ``replace`` (the index
        command, which checked every consented session: marks of deleted sessions go); others are merged. Returns whether
        the marks were written; raises ``sqlite3`` errors (busy, read-only: the marks are only a shortcut)."""
        if self._damage_kept:
            return False
        patch = json.dumps({sid: int(upto) for sid in sessions})
        with self._lock:
            self._check_current()
            with self._conn:
                self._conn.execute("BEGIN IMMEDIATE")  # the stamp is compared and the marks written under one lock
                if self._stamp(self._conn) != marks.stamp:
                    return False
                if history is not None:  # state.db's history when it was checked: a restore since is found next time
                    _store_history(self._conn, history)
                self._conn.execute(
                    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value ="
                    " CASE WHEN ? = 0 AND json_valid(value) AND json_type(value) = 'object'"
                    " THEN json_patch(value, excluded.value) ELSE excluded.value END",
                    (self._marks_key, patch, int(marks.behind or replace)))
                return True

    # -- the history of state.db this index was learned from ------------------------
    def stored_history(self) -> str | None:
        """The stored :mod:`state_history` (its JSON text; ``None`` before any), read-only, never waiting for a
        load. Raises ``sqlite3`` errors."""
        with closing(self._reader()) as conn:
            return _history_text(conn)

    def store_history(self, history: state_history.History) -> None:
        """Store state.db's ``history`` when none is stored (a file of an earlier version, or one that did not read),
        on a connection of its own that never waits for another writer. Raises ``sqlite3`` errors (busy,
        read-only: a later search tries again)."""
        with closing(index_file.connect_existing(self.path, timeout=_HISTORY_WAIT_S)) as conn, conn:
            conn.execute("BEGIN IMMEDIATE")
            if state_history.decode(_history_text(conn)) is None:  # else another process stored one meanwhile
                _store_history(conn, history)

    def forget_after(self, parted: int, known: str | None, history: state_history.History) -> int:
        """State.db parted from the stored history ``known`` (its text, as read) above message id ``parted``
        (:func:`state_history.parted_at`): what this file knows of later ids is of other messages, or of none.
        Drops, for every process and every model, the vectors of messages above ``parted``, every "complete up
        to" mark (with new stamps: watermarks and caches of every process start over) and the record of
        messages never indexed, and stores ``history`` (state.db's now), all in one transaction. Nothing is
        done when the stored history is no longer ``known`` (another process did it first). Returns how many
        messages' vectors were dropped. Raises ``sqlite3`` errors (busy, read-only: a later search retries),
        :class:`IndexNotNow` when the file was replaced."""
        with self._lock:
            self._check_current()
            with self._conn:
                self._conn.execute("BEGIN IMMEDIATE")
                if _history_text(self._conn) != known:
                    return 0
                gone = [int(r[0]) for r in self._conn.execute(
                    "SELECT DISTINCT message_id FROM chunks WHERE +model_fingerprint = ? AND message_id > ?",
                    (self.provider.fingerprint, int(parted)))]
                # A new stamp for every model the file holds or held (each process's watermarks are kept per stamp)
                self._conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) SELECT 'complete_stamp:' || f, lower(hex(randomblob(8))) FROM"
                    " (SELECT DISTINCT model_fingerprint AS f FROM chunks INDEXED BY chunks_by_model"
                    "  UNION SELECT substr(key, 16) FROM meta WHERE key LIKE 'complete\\_stamp:%' ESCAPE '\\' UNION SELECT ?)",
                    (self.provider.fingerprint,))
                self._conn.execute("DELETE FROM chunks WHERE message_id > ?", (int(parted),))
                self._conn.execute("DELETE FROM meta WHERE key LIKE 'complete\\_upto:%' ESCAPE '\\'")
                _store_history(self._conn, history)
            for mid in gone:
                self._indexed.discard(mid)
            if self._indexed_loaded:
                self._indexed_stamp = self._stamp(self._conn)  # its set is right: the ids dropped are out of it
            self._cut(gone)
            self.generation = next(_generations)  # this process's watermarks no longer hold
        message = (f"state.db no longer holds the messages this index knew above message id {parted} (restored from "
                   f"an older copy?): the vectors of {len(gone)} message(s) were dropped and the index is checked again")
        with self._news_lock:
            self._news.append(message + ".")
        logger.warning("embeddings index %s: %s", self.path, message)
        return len(gone)

    def stamp_now(self) -> str:
        """The marks' stamp (see :meth:`complete_marks`), read-only, never waiting for a load: a new one after
        any process's repair. Raises ``sqlite3`` errors."""
        with closing(self._reader()) as conn:
            return self._stamp(conn)

    def _reader(self) -> sqlite3.Connection:
        return index_file.connect_read_only(self.path)


def _history_text(conn: sqlite3.Connection) -> str | None:
    """The stored :mod:`state_history` of the file ``conn`` reads, as its JSON text (``None`` before any)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_HISTORY_KEY,)).fetchone()
    return row[0] if row else None


def _store_history(conn: sqlite3.Connection, history: state_history.History) -> None:
    """Store ``history`` as the state of state.db the file ``conn`` writes was learned from (inside its write transaction)."""
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (_HISTORY_KEY, state_history.encode(history)))


def _marks_without(stored: Any, sessions: AbstractSet[str]) -> str:
    """The stored marks (JSON text, see :meth:`VectorIndex.mark_complete`) without those of ``sessions``, as JSON
    text; ``"{}"`` when they do not read as an object."""
    try:
        marks = json.loads(stored) if isinstance(stored, str) else None
    except (ValueError, RecursionError):
        marks = None
    if not isinstance(marks, dict):
        return "{}"
    return json.dumps({sid: upto for sid, upto in marks.items() if sid not in sessions})


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
