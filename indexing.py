"""The index command: embed every consented project's messages now (``/history-index``, the command line's ``index``).

Searches embed what is new for a moment each; this is the batch run. It
drops the vectors of messages deleted or rewound since, repairs vectors of
the wrong size, embeds what the full check (:func:`index_check.full_check`)
finds missing, copies it into the shared vector files as it goes, and marks
the projects complete for every process. Nothing is embedded without consent
(:func:`gate.closed`).
"""

from __future__ import annotations

import itertools
import sqlite3
import time
from pathlib import Path
from typing import Any

from . import attribution, gate, index_check, index_reads, paths, store, workspace
from .records import Scope
from .settings import load_settings

BATCH = 64  # messages the index command reads from state.db and embeds at a time
SYNC_EVERY_S = 30.0  # how often the index command copies new vectors into the shared vector files


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
    if gate.config_closes(settings):  # config.yaml's gate, before numpy is looked for
        return _closed(gate.closed(home, settings))
    missing = gate.missing_requirements(settings)
    if missing:
        return {"success": False, "error": missing, "code": "requirements_missing", "temporary": False,
                "install": gate.install_command(settings), "semantic_status": "unavailable", "indexed": 0, "total": 0}
    from . import embeddings, vector_index

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
            if project.is_home or gate.closed(home, settings, project) is not None:
                continue
            scopes.append(Scope(None, project, tuple(sorted(sessions)), len(sessions)))
        if not scopes:
            return _closed(gate.closed(home, settings))
        try:
            vectors = gate.open_vectors(home, settings)
            repaired_before = vectors.repaired
            history = index_check.agree(conn, vectors)
            known = list(vectors.indexed())  # a copy: another thread may be indexing
        except embeddings.EmbeddingUnavailable as exc:
            return failed(exc, 0, 0)
        except sqlite3.Error as exc:
            return failed(vectors.trouble(exc) if vectors is not None else exc, 0, 0)
        # Vectors of messages deleted or rewound since they were embedded (whole
        # sessions deleted too) are dropped; searches would never show them.
        live = index_reads.live_message_ids(conn, known) if known else set()
        stale = [m for m in known if m not in live]
        try:
            vectors.drop(stale)
            vectors.repair_damaged()  # vectors of the wrong size are dropped and count as missing
            top = store.max_message_id(conn)
            marks = vectors.complete_marks(set(), top)  # the stamp, read before checking (see mark_complete)
        except embeddings.EmbeddingUnavailable as exc:
            return failed(exc, 0, 0)
        except sqlite3.Error as exc:
            return failed(vectors.trouble(exc), 0, 0)
        work: list[int] = []  # ids only: the texts are read a batch at a time as they are embedded
        total = 0
        try:
            for scope in scopes:  # state.db's errors are the caller's (errors.StoreError)
                lacking, should = index_check.full_check(conn, vectors, scope)
                work.extend(lacking)
                total += should
        except embeddings.EmbeddingUnavailable as exc:  # embeddings.db's, from the check
            return failed(exc, 0, 0)
        already = total - len(work)
        gone: list[int] = []  # deleted, or without text once read: never indexed, not counted
        pending = (vector_index.PendingMessage(*m) for m in index_check.read_texts(conn, work, gone, page=BATCH))
        done = 0
        synced = time.monotonic()
        try:
            while deadline is None or time.monotonic() < deadline:
                batch = list(itertools.islice(pending, BATCH))
                if not batch:
                    break
                done += vectors.add(batch, deadline=deadline, history=history)
                if progress is not None:
                    progress(already + done, total - len(gone))
                if time.monotonic() - synced >= SYNC_EVERY_S:  # searches meanwhile find the new vectors copied already
                    vectors.sync()
                    synced = time.monotonic()
            vectors.sync()  # what was embedded is copied here, not by the next search
            if done + len(gone) == len(work):  # every consented project is complete up to top: a new process's first search checks only what is newer
                index_check.mark_all(vectors, [sid for scope in scopes for sid in scope.session_ids], top, marks, history, replace=True)
        except embeddings.EmbeddingUnavailable as exc:
            return failed(exc, already + done, total - len(gone))
        except sqlite3.Error as exc:
            return failed(vectors.trouble(exc), already + done, total - len(gone))
    finally:
        conn.close()
    total -= len(gone)
    remaining = len(work) - len(gone) - done
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


def _closed(blocked: gate.SemanticLeg | None) -> dict[str, Any]:
    """The index command's answer when nothing may be embedded: why (``blocked``), or no consented project with
    sessions."""
    return {"success": True, "semantic_status": blocked.status if blocked else "ready",
            "message": blocked.note if blocked else "no consented project has sessions", "projects": 0,
            "indexed": 0, "total": 0, "remaining": 0, "seconds": 0.0}
