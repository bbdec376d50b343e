"""The loaded vectors of embeddings.db, and the one open index per file and model.

:class:`VectorIndex` keeps every chunk of one embedding model in memory
(:class:`_Rows`, loaded incrementally as the file grows) and answers
similarity searches with one matrix product, scope applied at query time.
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

from . import index_file, state
from .embeddings import EmbeddingUnavailable, Provider, chunk_text, content_hash, decode_vectors, encode_vector, normalise
from .index_file import IndexBlocked, IndexNotNow
from .ranking import Hit

logger = logging.getLogger(__name__)

_generations = itertools.count(1)

#: A scope holding more than this share of the loaded chunks is scored in place
#: (full matrix product, then a mask) instead of being copied. Measured at 300k of
#: 400k chunks: in place costs +12 ms a query (39 vs 27 ms); the copy cost 600 MB
#: for the life of the process and 1.4 s on the first query.
SHARED_SCOPE = 0.5
#: A scope scored in place is copied again only once it falls under this share.
COPY_AGAIN = 0.4
_LOAD_BATCH = 20_000  # chunks decoded per step when the matrix is loaded


class _Rows:
    """Chunk rows in memory: vectors with their message id and session code.

    Appends grow the buffers geometrically, so indexing while searching
    costs amortised O(rows added), not a copy of the whole matrix per query.
    ``vectors`` / ``ids`` / ``sessions`` are views of the used part (no copy).
    """

    def __init__(self, dims: int) -> None:
        self.n = 0
        self._vectors = np.zeros((0, dims), dtype=np.float32)
        self._ids = np.zeros(0, dtype=np.int64)
        self._sessions = np.zeros(0, dtype=np.int32)

    @property
    def dims(self) -> int:
        return int(self._vectors.shape[1])

    @property
    def vectors(self) -> np.ndarray:
        return self._vectors[: self.n]

    @property
    def ids(self) -> np.ndarray:
        return self._ids[: self.n]

    @property
    def sessions(self) -> np.ndarray:
        return self._sessions[: self.n]

    def extend(self, vectors: np.ndarray, ids: np.ndarray, sessions: np.ndarray) -> None:
        """Append rows; the first block is adopted as is (a fresh array, or a view of rows that are
        never written again: buffers are only written past ``n``), later ones copied in."""
        need = self.n + len(ids)
        if self.n == 0 and len(ids) > len(self._ids):  # the first load: no copy of a big block
            self._vectors = np.ascontiguousarray(vectors, dtype=np.float32)
            self._ids = np.ascontiguousarray(ids, dtype=np.int64)
            self._sessions = np.ascontiguousarray(sessions, dtype=np.int32)
            self.n = need
            return
        if need > len(self._ids):
            capacity = max(need, self.n + self.n // 2, 1024)
            grown = np.zeros((capacity, self.dims), dtype=np.float32)
            grown[: self.n] = self.vectors
            self._vectors = grown
            self._ids = np.concatenate([self.ids, np.zeros(capacity - self.n, dtype=np.int64)])
            self._sessions = np.concatenate([self.sessions, np.zeros(capacity - self.n, dtype=np.int32)])
        self._vectors[self.n : need] = vectors
        self._ids[self.n : need] = ids
        self._sessions[self.n : need] = sessions
        self.n = need

    def keep(self, mask: np.ndarray) -> None:
        """Keep only the rows where ``mask`` is true (compacts; the rare path)."""
        self._vectors, self._ids, self._sessions = self.vectors[mask], self.ids[mask], self.sessions[mask]
        self.n = len(self._ids)


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
        self.note = opened.note
        self._retired = False  # set when a newer open of the path replaced this one: no more writes
        self._matrix = _Rows(max(provider.dims, 1))  # every loaded chunk of this model
        self._session_codes: dict[str, int] = {}
        self._session_names: list[str] = []
        self._loaded_upto = 0  # highest chunk id in the matrix
        # The last scope, prepared once and extended as chunks arrive: (sessions
        # signature, matrix rows seen, its rows copied, or the mask of rows outside it)
        self._scope_rows: tuple[frozenset[str], int, Any] | None = None
        self._indexed: dict[int, str] = {}  # message id -> content hash
        self._indexed_loaded = False
        self._damaged: set[int] = set()  # messages whose stored vectors were unusable: not indexed until embedded again
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
        if not self._indexed_loaded:
            # One row per message (chunk 0), read from the covering index.
            self._indexed = dict(self._conn.execute(
                "SELECT message_id, content_hash FROM chunks INDEXED BY chunks_indexed"
                " WHERE model_fingerprint = ? AND chunk_index = 0",
                (self.provider.fingerprint,),
            ))
            for mid in self._damaged:  # their rows may still be in the file (the repair could not delete them)
                self._indexed.pop(mid, None)
            self._indexed_loaded = True

    def pop_news(self) -> str:
        """What happened to the index since the last call that a search should report once (e.g. damaged vectors dropped); ``""`` when nothing."""
        with self._news_lock:  # not the index's lock: a keyword-mode search never waits for a load
            news, self._news = self._news, []
        return " ".join(news)

    def _catch_up(self) -> None:
        """Bring what is indexed and the loaded matrix up to the file (the caller holds ``_lock``)."""
        self._load_indexed()
        self._refresh_matrix()

    def indexed(self) -> dict[int, str]:
        """``{message id: content hash}`` of everything embedded with this model (a copy)."""
        with self._lock:
            self._load_indexed()
            return dict(self._indexed)

    def indexed_ids(self) -> Any:
        """The message ids embedded with this model (a live, read-only view: no copy)."""
        with self._lock:
            self._catch_up()
            return self._indexed.keys()

    def add(self, messages: Sequence[PendingMessage], *, deadline: float | None = None, batch: int = 32) -> int:
        """Embed and store ``messages`` (re-embedding changed ones) until ``deadline``.

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
                self._load_indexed()
                self._write_group(group, pieces, vectors, fingerprint, now)
                # A changed message's old vectors leave the loaded matrix with its old chunks
                # (only once the new ones are stored: a failed write keeps the old ones in use).
                self._cut([m.message_id for m in group if m.message_id in self._indexed])
                for m in group:
                    self._indexed[m.message_id] = content_hash(m.text)
                    self._damaged.discard(m.message_id)
            done += len(group)
        return done

    def _write_group(self, group: Sequence[PendingMessage], pieces: list, vectors: np.ndarray, fingerprint: str, now: float) -> None:
        """Replace the stored chunks of ``group``'s messages in one transaction (rolled back on error)."""
        with self._conn:
            for m in group:
                self._conn.execute("DELETE FROM chunks WHERE model_fingerprint = ? AND message_id = ?", (fingerprint, m.message_id))
            for (m, i, _), vector in zip(pieces, vectors, strict=True):
                self._conn.execute(
                    "INSERT INTO chunks (session_id, message_id, chunk_index, content_hash, model_fingerprint, vector, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (m.session_id, m.message_id, i, content_hash(m.text), fingerprint, encode_vector(vector), now),
                )

    def drop(self, message_ids: Sequence[int]) -> None:
        """Forget messages that were deleted or rewound."""
        if not message_ids:
            return
        with self._lock, self._conn:
            self._check_current()
            self._conn.execute(
                "DELETE FROM chunks WHERE model_fingerprint = ? AND message_id IN (SELECT value FROM json_each(?))",
                (self.provider.fingerprint, json.dumps([int(m) for m in message_ids])),
            )
            self._load_indexed()
            for mid in message_ids:
                self._indexed.pop(int(mid), None)
            # Cut their rows out of the loaded matrix (a reload would cost seconds on a big index).
            self._cut(message_ids)

    # -- search ------------------------------------------------------------------
    def _cut(self, message_ids: Sequence[int]) -> None:
        """Remove ``message_ids``' rows from the loaded matrix (a reload would cost seconds on a big index)."""
        gone = np.array([int(m) for m in message_ids], dtype=np.int64)
        if len(gone) and self._matrix.n:
            keep = ~np.isin(self._matrix.ids, gone)
            if not keep.all():
                self._matrix.keep(keep)
                self._scope_rows = None

    def _refresh_matrix(self) -> None:
        """Load the chunks written since the last call (all of them the first time).

        Vectors are copied batch by batch into one preallocated matrix: no
        intermediate copy of the whole file's vectors. A vector of the wrong
        size (see :meth:`_expected_dims`) is not loaded: its message is
        repaired (:meth:`_repair`), so the next indexing embeds it again.
        """
        fingerprint = self.provider.fingerprint
        if self._loaded_upto == 0:
            self._scope_rows = None
            self._matrix = _Rows(max(self.provider.dims, 1))
        began = not self._conn.in_transaction
        if began:  # one snapshot for the count and the rows
            self._conn.execute("BEGIN")
        damaged: list[int] = []
        try:
            count, top = self._conn.execute(
                "SELECT count(*), max(id) FROM chunks INDEXED BY chunks_by_model WHERE model_fingerprint = ? AND id > ?",
                (fingerprint, self._loaded_upto),
            ).fetchone()
            if not count:
                return
            cursor = self._conn.execute(
                # Unary + keeps SQLite on the rowid range (only chunks newer than the matrix).
                "SELECT id, message_id, session_id, vector, chunk_index, content_hash FROM chunks"
                " WHERE id > ? AND id <= ? AND +model_fingerprint = ? ORDER BY id",
                (self._loaded_upto, top, fingerprint),
            )
            vectors: np.ndarray | None = None
            ids = np.empty(count, dtype=np.int64)
            codes = np.empty(count, dtype=np.int32)
            n = seen = last = 0
            replaced: list[int] = []
            while batch := cursor.fetchmany(_LOAD_BATCH):
                batch = batch[: count - seen]
                seen += len(batch)
                last = batch[-1][0]
                if vectors is None:
                    vectors = np.empty((count, self._expected_dims(batch)), dtype=np.float32)
                size = vectors.shape[1] * 4
                if any(len(r[3]) != size for r in batch):
                    damaged.extend(int(r[1]) for r in batch if len(r[3]) != size)
                    batch = [r for r in batch if len(r[3]) == size]
                    if not batch:
                        continue
                vectors[n : n + len(batch)] = decode_vectors([r[3] for r in batch], vectors.shape[1])
                ids[n : n + len(batch)] = [r[1] for r in batch]
                codes[n : n + len(batch)] = [self._session_codes.setdefault(r[2], len(self._session_codes)) for r in batch]
                if self._indexed_loaded:  # chunks written by another process (e.g. the index command) count as indexed
                    for row in batch:
                        known = self._indexed.get(int(row[1]))
                        if row[4] == 0 and known != row[5]:
                            if known is not None:  # re-embedded elsewhere: its old rows must go
                                replaced.append(int(row[1]))
                            self._indexed[int(row[1])] = row[5]
                n += len(batch)
        finally:
            if began:
                self._conn.commit()
        self._loaded_upto = last
        if vectors is not None and n:
            self._cut(replaced)  # before the new rows join: they share the message ids
            if self._matrix.dims != vectors.shape[1]:
                self._matrix, self._scope_rows = _Rows(vectors.shape[1]), None
            self._session_names.extend(name for name in list(self._session_codes)[len(self._session_names):])
            self._matrix.extend(vectors[:n], ids[:n], codes[:n])
        if damaged:
            self._repair(damaged, "of the wrong size")

    def _expected_dims(self, batch: Sequence[Any]) -> int:
        """The vector size of this model: the provider's when it knows it, else the loaded matrix's, else the
        commonest whole number of floats in ``batch``, the larger on a tie (a damaged row is the odd one out,
        and a real embedding has more than a handful of dimensions)."""
        if self.provider.dims > 0:
            return int(self.provider.dims)
        if self._matrix.n:
            return self._matrix.dims
        sizes = Counter(len(r[3]) for r in batch if len(r[3]) % 4 == 0 and r[3])
        if not sizes:
            return 1
        return max(sizes.items(), key=lambda item: (item[1], item[0]))[0] // 4

    def _repair(self, message_ids: Sequence[int], why: str) -> None:
        """Forget ``message_ids``' stored vectors (unusable: ``why``) so that the next indexing embeds them again.

        Their rows leave the loaded matrix and the file (best effort: a busy
        file keeps them until the messages are embedded again, which replaces
        them); searches' per-index caches start over (a new ``generation``).
        The caller holds ``_lock``.
        """
        gone = sorted(set(message_ids))
        self._damaged.update(gone)
        for mid in gone:
            self._indexed.pop(mid, None)
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
                self._conn.execute(
                    "DELETE FROM chunks WHERE model_fingerprint = ? AND message_id IN (SELECT value FROM json_each(?))",
                    (self.provider.fingerprint, json.dumps(gone)),
                )
        except sqlite3.Error as exc:
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
            if self._matrix.n and len(query) != self._matrix.dims:  # the endpoint's vectors changed size: all are stale
                self._repair(self._matrix.ids.tolist(), f"of {self._matrix.dims} dimensions (the model now gives {len(query)})")
            if not self._matrix.n or not sessions:
                return []
            ids, owners, scores = self._scope_scores(query, sessions)
            if not len(ids):
                return []
        # Look at a head of the best chunks, widened until it holds enough sessions.
        head = min(len(scores), max(top_sessions * per_session * 4, 64))
        while True:
            best, taken = self._head(ids, owners, scores, head, top_sessions, per_session)
            if len(taken) >= top_sessions or head >= len(scores):
                break
            head = min(len(scores), head * 4)
        return sorted((Hit(m, sid, score) for m, (sid, score) in best.items()), key=lambda h: (-h.score, h.message_id))

    def _head(
        self, ids: np.ndarray, owners: np.ndarray, scores: np.ndarray, head: int, top_sessions: int, per_session: int
    ) -> tuple[dict[int, tuple[str, float]], dict[str, int]]:
        part = np.argpartition(-scores, head - 1)[:head] if head < len(scores) else np.arange(len(scores))
        best: dict[int, tuple[str, float]] = {}
        taken: dict[str, int] = {}
        for i in part[np.argsort(-scores[part], kind="stable")]:
            if scores[i] == -np.inf:  # the rest is out of scope
                break
            mid = int(ids[i])
            if mid in best:
                continue
            sid = self._session_names[int(owners[i])]
            count = taken.get(sid, 0)
            if count >= per_session or (not count and len(taken) >= top_sessions):
                continue
            taken[sid] = count + 1
            best[mid] = (sid, float(scores[i]))
        return best, taken

    def _scope_scores(self, query: np.ndarray, sessions: set[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(message ids, session codes, cosines)`` of the loaded chunks of ``sessions``.

        A scope holding most of the matrix is scored in place, its outside
        masked to ``-inf`` (no copy: memory and the first query stay cheap). A
        smaller one gets a copy of its rows, so a small project never pays for
        the whole file. Either the mask or the copy is cached for the last
        scope and extended in place as chunks arrive; a scope that crosses
        the line as they arrive switches.
        """
        matrix = self._matrix
        signature = frozenset(sessions)  # compared in full, not by hash: a collision would leak another scope
        cached = self._scope_rows
        if cached is None or cached[0] != signature or cached[1] > matrix.n:
            cached = self._prepare_scope(signature)
        _, start, kept = cached
        if start < matrix.n:  # chunks arrived since: extend the cached scope
            inside = self._membership(sessions)[matrix.sessions[start:]]
            if isinstance(kept, _Rows):
                kept.extend(matrix.vectors[start:][inside], matrix.ids[start:][inside], matrix.sessions[start:][inside])
                share = kept.n
            else:
                kept = np.concatenate([kept, ~inside])
                share = len(kept) - int(np.count_nonzero(kept))
            self._scope_rows = (signature, matrix.n, kept)
            # Switch when the scope crosses the line, with a margin back so that a scope
            # near it is not copied again and again.
            if share < COPY_AGAIN * matrix.n if isinstance(kept, np.ndarray) else share > SHARED_SCOPE * matrix.n:
                _, _, kept = self._prepare_scope(signature)
        if isinstance(kept, _Rows):
            return kept.ids, kept.sessions, kept.vectors @ query
        scores = matrix.vectors @ query
        scores[kept] = -np.inf  # out of scope: never selected
        return matrix.ids, matrix.sessions, scores

    def _prepare_scope(self, sessions: frozenset[str]) -> tuple[frozenset[str], int, Any]:
        """Cache and return ``sessions``' scope: the mask of rows outside it when it holds over ``SHARED_SCOPE`` of the matrix, else a copy of its rows."""
        matrix = self._matrix
        inside = self._membership(sessions)[matrix.sessions]
        if int(np.count_nonzero(inside)) > SHARED_SCOPE * matrix.n:
            kept: np.ndarray | _Rows = ~inside  # the rows to mask out
        else:
            kept = _Rows(matrix.dims)
            kept.extend(matrix.vectors[inside], matrix.ids[inside], matrix.sessions[inside])
        self._scope_rows = (sessions, matrix.n, kept)
        return self._scope_rows

    def _membership(self, sessions: AbstractSet[str]) -> np.ndarray:
        """A boolean lookup by session code: True for the codes of ``sessions``."""
        member = np.zeros(len(self._session_codes) + 1, dtype=bool)
        codes = [self._session_codes[s] for s in sessions if s in self._session_codes]
        member[np.array(codes, dtype=np.int64)] = True
        return member

    @property
    def vectors_in_memory(self) -> int:
        """How many vectors this process holds in memory for this index (0 until a search or warm-up loads them)."""
        return self._matrix.n

    def warm(self) -> None:
        """Do now what the first search would: load the model, what is indexed, and the matrix.

        Embeds no message and sends nothing. Raises what a search would
        (:class:`EmbeddingUnavailable`, :class:`IndexBroken`, ``sqlite3`` errors).
        """
        load = getattr(self.provider, "load", None)
        if load is not None:
            load()
        with self._lock:
            self._catch_up()

    def indexed_in(self, sessions: set[str]) -> int:
        """How many messages of ``sessions`` are indexed with this model (after catching up with the file)."""
        with self._lock:
            self._catch_up()
            return len(self._ids_in(self._conn, sessions))

    # -- what is indexed, without waiting (status only) ----------------------------
    def indexed_ids_now(self, sessions: set[str], *, above: int = 0) -> Container[int]:
        """The indexed message ids of ``sessions`` above ``above``, without waiting for a load in progress and without loading the matrix.

        From memory (every session's ids, a live view) when what is loaded
        matches the file, else read from the file on a read-only connection
        (a set). Raises ``sqlite3`` errors.
        """
        if self._in_step():
            return self._indexed.keys()
        with closing(self._reader()) as conn:
            return self._ids_in(conn, sessions, above)

    def stored_upto(self) -> int:
        """The highest chunk id of this model in the file (0 when none); read-only, never waits for a load.

        Raises like :meth:`indexed_ids_now`.
        """
        with closing(self._reader()) as conn:
            return self._top_chunk(conn)

    def _in_step(self) -> bool:
        """Whether what is indexed in memory can answer now: not busy loading or indexing, and nothing new in the file."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            return self._indexed_loaded and self._top_chunk(self._conn) == self._loaded_upto
        finally:
            self._lock.release()

    def _top_chunk(self, conn: sqlite3.Connection) -> int:
        """The highest chunk id of this model in the file (0 when none)."""
        row = conn.execute(
            "SELECT max(id) FROM chunks INDEXED BY chunks_by_model WHERE model_fingerprint = ?", (self.provider.fingerprint,)
        ).fetchone()
        return int(row[0] or 0)

    def _ids_in(self, conn: sqlite3.Connection, sessions: set[str], above: int = 0) -> set[int]:
        """The ids of the messages of ``sessions`` above ``above`` that the file holds vectors of."""
        rows = conn.execute(
            "SELECT message_id FROM chunks INDEXED BY chunks_indexed WHERE model_fingerprint = ? AND chunk_index = 0"
            " AND message_id > ? AND session_id IN (SELECT value FROM json_each(?))",
            (self.provider.fingerprint, int(above), json.dumps(sorted(sessions))),
        )
        return {int(r[0]) for r in rows}

    def _reader(self) -> sqlite3.Connection:
        return index_file.connect_read_only(self.path)


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


def reset_indexes() -> None:
    """Close every open index and forget the remembered problems (tests, a new process's view); never raises."""
    _indexes.clear()
    state.cache("index_problems").clear()
