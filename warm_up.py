"""The warm-up: what a process loads ahead of its first semantic search, in threads of their own.

When a conversation starts (Hermes' ``on_session_start`` hook, or the first
turn of a resumed one), :func:`warm_up` reads every session's project (the
census), loads the model, maps the vector files and reads the asking project's
vectors ahead, then every session's message id range (the keyword leg's
filter). A first search in a process that had none (:func:`prepare`) brings the
vector files up to embeddings.db beside its census; :func:`load_meanwhile`
loads the model while a search checks the index. All of it only after consent
(:func:`gate.loading_refused`), embedding and sending nothing, and never
raising: trouble is logged and the next search reports it.

The threads are this module's (state cache ``warm_up``): one warm-up per
profile at a time, one preparation per profile and process, one model load
per provider.
"""

from __future__ import annotations

import contextvars
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from . import config_schema, errors, gate, lexical, paths, state, store, workspace
from .settings import load_settings

logger = logging.getLogger(__name__)


# "threads": {profile's home: the last warm-up started for it in this process}; "prepared": the homes a
# search prepared (see prepare); "loading": (provider, thread) of a model load started beside a search
_warming = state.cache("warm_up")


def warm_up(home: Path, *, first_only: bool = False, session_id: str = "") -> threading.Thread | None:
    """Start loading the vector leg in the background; returns the thread, or ``None`` when there is nothing to do.

    With ``first_only`` (called on every turn, for resumed conversations,
    which fire no start hook) it acts only if no warm-up ran in this process
    yet. With ``session_id``, only the vectors of that session's project are
    read ahead (all of them when its project is not known yet). Acts only when
    config.yaml does not switch semantic search off (nor holds a setting that does not read: an ``enabled``
    neither true nor false, an unknown provider), ``embedding.preload`` is
    not false and a consent is on record (the thread checks it covers the
    configured provider, endpoint and model); before that it creates no file.
    One warm-up per profile runs at a time; a later one only loads what is
    new. Never raises.
    """
    try:
        settings = load_settings(home)
        if gate.config_closes(settings) or not settings.embedding.preload:
            return None
        if not paths.consent_path(home).is_file():
            return None
    except (OSError, errors.StoreError) as exc:
        logger.warning("project-history-recall: no warm-up (%s)", exc)
        return None
    with _warming.lock:
        threads = _warming.data.setdefault("threads", {})
        last = threads.get(home)
        if last is not None and (first_only or last.is_alive()):
            return None
        # in the caller's context: Hermes scopes a turn's profile (its secrets, its home) by context variables
        thread = threading.Thread(target=contextvars.copy_context().run, args=(_warm, home, settings, session_id),
                                  name="project-history-recall-warm-up", daemon=True)
        try:
            thread.start()
        except RuntimeError as exc:  # no more threads (or the interpreter is shutting down)
            logger.warning("project-history-recall: no warm-up (%s)", exc)
            return None
        threads[home] = thread
        return thread



def prepare(home: Path, settings: config_schema.Settings) -> threading.Thread | None:
    """Start, beside a search's census of every session's project, what its
    vector leg needs in any project: open the index and bring the mapped vector files up to embeddings.db.
    Returns the thread, or ``None`` when there is nothing to do.

    For the first semantic or hybrid search of a process that had no warm-up (``embedding.preload: false``,
    or a host that fired no start hook): once per process and profile, on the warm-up's terms (consent
    checked in the thread); the search's own gate still decides whether its project may be searched.
    Never raises: the search meets any trouble again and reports it.
    """
    with _warming.lock:
        prepared = _warming.data.setdefault("prepared", set())
        if home in _warming.data.get("threads", {}) or home in prepared:  # every later search: no file looked at
            return None
        try:
            if gate.config_closes(settings) or not paths.consent_path(home).is_file():
                return None
        except OSError:
            return None
        prepared.add(home)
        thread = threading.Thread(target=contextvars.copy_context().run, args=(_prepare, home, settings),
                                  name="project-history-recall-prepare", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no more threads: the search does it all itself
            return None
        return thread



def _prepare(home: Path, settings: config_schema.Settings) -> None:
    """The body of :func:`prepare` (in its thread)."""
    try:
        if gate.loading_refused(home, settings) is not None:
            return
        from . import embeddings

        try:
            # Not the model: its load holds the interpreter lock, as the census does; it goes better
            # beside the index check, which runs in SQLite (the search's semantic leg starts it).
            gate.open_vectors(home, settings).catch_up()
        except (embeddings.EmbeddingUnavailable, OSError, sqlite3.Error) as exc:
            logger.info("project-history-recall: vector leg not prepared (%s); the search reports it", exc)
    except Exception:  # a thread's escape would print a traceback into the user's terminal
        logger.exception("project-history-recall: preparing the vector leg failed")



def _warm(home: Path, settings: config_schema.Settings, session_id: str) -> None:
    """The body of :func:`warm_up` (in its thread)."""
    refused = gate.loading_refused(home, settings)
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
    vector when ``None``: :meth:`vector_index.VectorIndex.warm`); trouble is logged (the unforeseen by :func:`_warm`)."""
    from . import embeddings

    vectors = None
    try:
        vectors = gate.open_vectors(home, settings)
        vectors.warm(scope)
    except (embeddings.EmbeddingUnavailable, OSError) as exc:
        logger.warning("project-history-recall: warm-up stopped (%s); the next search reports it", exc)
    except sqlite3.Error as exc:  # classified (and a damaged or unwritable index retired) for the next search
        logger.warning("project-history-recall: warm-up stopped (%s); the next search reports it",
                       vectors.trouble(exc) if vectors is not None else exc)



def _census(home: Path, session_id: str) -> frozenset[str] | None:
    """Attribute every session to its project now (:data:`workspace.membership`) for the process's first search.
    Returns the sessions a search from ``session_id`` reads (none for a session in Home), or ``None`` when
    that is not known: no session id, a session not in state.db yet, or trouble (logged)."""
    try:
        conn = store.open_state_db(home)
        try:
            # compute_scope reads the census first, then raises SessionNotFound for "" or a session not there yet
            scope = workspace.scope_for(conn, home, session_id, None)[0]
        except errors.SessionNotFound:
            return None
        finally:
            conn.close()
        return frozenset(scope.session_ids)
    except (errors.StoreError, sqlite3.Error) as exc:
        logger.info("project-history-recall: warm-up: no census of the sessions (%s)", exc)
        return None



def _read_ranges(home: Path) -> None:
    """Read every session's message id range now (:data:`lexical.ranges`: the keyword leg's filter of other
    projects' matches); trouble is logged, and searches go without the filter."""
    try:
        conn = store.open_state_db(home)
        try:
            lexical.ranges.read(conn, paths.state_db_key(home))
        finally:
            conn.close()
    except (errors.StoreError, sqlite3.Error) as exc:
        logger.info("project-history-recall: warm-up: no message id ranges (%s)", exc)



def load_meanwhile(provider: Any) -> None:
    """Start loading a local model that is not loaded yet in a thread of its own, so that it loads while the
    index is checked (the first search of a process); the first embedding waits
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
