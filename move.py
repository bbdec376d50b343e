"""The move: the only write to Hermes' data, through Hermes' own ``SessionDB``.

A session's whole compression lineage gets the target project's folder,
with the folder's git branch and common repo root, written by
``SessionDB.update_session_cwd``; moving into a folder outside git also
clears the stale git fields (``update_session_cwd`` never does).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import attribution, errors, paths, session_rows, store, workspace


def open_session_db(home: Path) -> Any:
    """Hermes' own read-write ``SessionDB`` on ``<home>/state.db`` (never created here)."""
    path = paths.state_db_path(home)
    if not path.is_file():
        raise errors.NoStateDB("session database not found", path=str(path))
    from hermes_state import SessionDB

    return SessionDB(db_path=path)


def clear_git_meta(db: Any, session_id: str) -> bool:
    """Drop a stale ``git_branch`` / ``git_repo_root`` after a move out of a repo.

    ``update_session_cwd`` only ever sets non-empty git fields, so without
    this a session moved from a repo into a plain folder would still be keyed
    by the old repo (by us, by ``workspace_key`` and by the desktop tree).
    Goes through Hermes' own write path (locking, retries); returns False
    when this Hermes has no such path (the fields are then left as they are).
    """
    execute_write = getattr(db, "_execute_write", None)
    if not callable(execute_write):
        return False
    execute_write(
        lambda conn: conn.execute(
            "UPDATE sessions SET git_branch = NULL, git_repo_root = NULL WHERE id = ?", (session_id,)
        )
    )
    return True


@dataclass(frozen=True)
class MoveOutcome:
    project: attribution.Project  # attribution after the move, as search will see it
    target: attribution.ProjectRecord | None  # the project moved into; None: Home
    cwd: str
    git_branch: str
    git_repo_root: str
    session_ids: tuple[str, ...]
    warnings: tuple[str, ...] = ()


def _home_cwd() -> str:
    return os.path.expanduser("~")


def resolve_move_target(home: Path, token: str) -> tuple[attribution.ProjectRecord | None, str]:
    """``(target project, folder)`` for a move; an empty ``token`` means Home: ``(None, the user's home folder)``.

    Raises :class:`ProjectNotFound`, :class:`MoveRefused` (archived project,
    project without folders) or :class:`FolderNotFound`.
    """
    if not token.strip():
        return None, _home_cwd()
    listing = store.load_projects(home)
    project = attribution.find_project(listing.projects, token)
    if project is None:
        if listing.available:
            raise errors.ProjectNotFound(f"project not found: {token}")
        why = listing.note or "this profile has no projects.db: create a project with `hermes project create` first"
        raise errors.ProjectNotFound(f"project not found: {token} ({why})")
    if project.archived:
        raise errors.MoveRefused(f"project is archived: {project.name} (restore it with `hermes project restore` first)")
    folder = attribution.primary_folder(project)
    if not folder:
        raise errors.FolderNotFound(f"project has no folder: {project.name}")
    folder = os.path.expanduser(folder)
    if not os.path.isdir(folder):
        raise errors.FolderNotFound(f"project folder not found: {folder}")
    return project, folder


def move_session(home: Path, session_id: str, token: str) -> MoveOutcome:
    """Move a session's whole compression lineage into project ``token``.

    The lineage's ``cwd`` becomes the target folder, with the folder's git
    branch and common repo root, written through Hermes' own
    ``SessionDB.update_session_cwd``. Moving into a folder outside git clears
    the stale git fields so attribution really follows. Raises
    :class:`StoreError` subclasses (no state.db, unknown session, delegate
    session, unknown project, missing folder).
    """
    conn = store.open_state_db(home)
    try:
        current = session_rows.session_info(conn, session_id)
    finally:
        conn.close()
    if current is None:
        raise errors.SessionNotFound(f"session not found in state.db: {session_id}")
    if current.is_delegate:
        raise errors.MoveRefused("subagent sessions cannot be moved; ask in the parent conversation")
    target, folder = resolve_move_target(home, token)
    workspace.git.invalidate()  # the target may have become (or stopped being) a repo
    branch, root = workspace.git.branch(folder), workspace.git.common_root(folder)
    warnings: list[str] = []
    db = open_session_db(home)
    try:
        lineage = [sid for sid in (db.get_compression_lineage(session_id) or []) if sid] or [session_id]
        if session_id not in lineage:
            lineage.append(session_id)
        workspace.membership.invalidate()
        for sid in lineage:
            db.update_session_cwd(sid, folder, branch or None, root or None)
            if not root and not clear_git_meta(db, sid):
                warnings.append("this Hermes has no SessionDB._execute_write: stale git fields were kept")
    finally:
        workspace.membership.invalidate()
        db.close()
    listing = store.load_projects(home)
    conn = store.open_state_db(home)
    try:
        moved = session_rows.session_info(conn, session_id)
    finally:
        conn.close()
    after = workspace.attributor_for(home, listing.projects).project_of(moved) if moved else attribution.HOME
    wanted = ("home", "") if target is None else ("explicit", target.id)
    if after.identity != wanted:
        warnings.append(f"the folder {folder} is attributed to {after.to_json()} (a nested project folder claims it)")
    return MoveOutcome(after, target, folder, branch, root, tuple(lineage), tuple(warnings))
