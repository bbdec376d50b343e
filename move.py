"""The move: the only write to Hermes' data, through Hermes' own ``SessionDB``.

A session's whole compression lineage gets the target project's folder,
with the folder's git branch and common repo root, written by
``SessionDB.update_session_cwd``; moving into a folder outside git also
clears the stale git fields (``update_session_cwd`` never does). A target is
a project of projects.db, or a folder: a git repo's (the way back into a
repo, which projects.db does not list) or a project's.
"""

from __future__ import annotations

import difflib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import attribution, errors, folders, paths, session_rows, store, workspace


def open_session_db(home: Path) -> Any:
    """Hermes' own read-write ``SessionDB`` on ``<home>/state.db`` (never created here)."""
    path = paths.state_db_path(home)
    if not path.is_file():
        raise errors.NoStateDB("session database not found", path=str(path))
    from hermes_state import SessionDB

    return SessionDB(db_path=path)


def clear_git_meta(db: Any, session_id: str) -> bool:
    """Drop a stale ``git_branch`` / ``git_repo_root`` after a move out of a repo.

    Without it the session stays keyed by the old repo (here, by
    ``workspace_key`` and by the desktop tree). Goes through Hermes' own write
    path (locking, retries); returns False when this Hermes has none (the
    fields are then left as they are).
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


#: What a move may target, as errors and usage lines say it.
TARGETS = (
    "a target is a project of projects.db (its id, slug or name), a folder given as an absolute path "
    "(a git repo's, or a project's), or '' for Home (out of any project)"
)


@dataclass(frozen=True)
class MoveTarget:
    """Where a move goes: the folder the conversation will record, and the project attribution gives that folder."""

    folder: str
    project: attribution.Project  # explicit, auto (a git repo) or Home


@dataclass(frozen=True)
class MoveOutcome:
    project: attribution.Project  # attribution after the move, as search will see it
    cwd: str
    git_branch: str
    git_repo_root: str
    session_ids: tuple[str, ...]
    left: attribution.Project  # the project the session was in before the move (what moves it back)
    warnings: tuple[str, ...] = ()


def resolve_move_target(home: Path, token: str, listing: store.ProjectList | None = None) -> MoveTarget:
    """Where a move to ``token`` goes; an empty ``token`` means Home (the user's home folder). ``listing``: the
    projects of projects.db when the caller has read them (else read here).

    ``token`` is a project's id, slug or name (matched as Hermes'
    ``project_switch`` matches it), else a folder given as an absolute path:
    a git repo's (any folder inside it) or a project's. Raises
    :class:`errors.ProjectNotFound` (saying what a target is, and naming a git
    repo's folder when ``token`` is such a repo's name),
    :class:`errors.MoveRefused` (archived project; a folder in no project) or
    :class:`errors.FolderNotFound`.
    """
    token = token.strip()
    if not token:
        return MoveTarget(os.path.expanduser("~"), attribution.HOME)
    if listing is None:
        listing = store.load_projects(home)
    record = attribution.find_project(listing.projects, token)
    if record is None and (token.startswith(("/", "~")) or os.path.isabs(token)):  # a path: /src/app, ~/src/app
        return _folder_target(home, listing.projects, token)
    if record is None:
        raise errors.ProjectNotFound(_not_found(home, listing, token))
    if record.archived:
        raise errors.MoveRefused(f"project is archived: {record.name} (restore it with `hermes project restore` first)")
    folder = attribution.primary_folder(record)
    if not folder:
        raise errors.FolderNotFound(f"project has no folder: {record.name}")
    folder = os.path.expanduser(folder)
    if not os.path.isdir(folder):
        raise errors.FolderNotFound(f"project folder not found: {folder}")
    return MoveTarget(folder, attribution.Project("explicit", id=record.id, name=record.name))


def _folder_target(home: Path, projects: tuple[attribution.ProjectRecord, ...], token: str) -> MoveTarget:
    try:
        folder = os.path.expanduser(token)
    except ValueError:  # ~ and a user name no file name can hold (a lone surrogate, a NUL): no such folder
        folder = token
    if not os.path.isdir(folder):
        raise errors.FolderNotFound(f"folder not found: {errors.echo(folder)} ({TARGETS})")
    folder = os.path.realpath(folder)  # as Hermes records a working folder
    folders.git.invalidate()  # the folder may have become a repo a moment ago
    project = workspace.attributor_for(home, projects).project_for_workspace(folder, None)
    if project.is_home:
        raise errors.MoveRefused(
            f"{errors.echo(folder)} is in no git repo and no project folder, so it belongs to no project: {TARGETS}")
    return MoveTarget(folder, project)


def _not_found(home: Path, listing: store.ProjectList, token: str) -> str:
    """Why ``token`` names no target, and what would (the targets whose names are close to it, each with what
    to give)."""
    why = [f"project not found: {errors.echo(token)}"]
    known = known_repos(home)
    repos = [r for r in known if r.name.casefold() == token.casefold()]
    if repos:
        why.append(f"{errors.echo(token)} is a git repo, not a project of projects.db: move into it by its folder, "
                   f"{repos[0].root}")
    else:
        if not listing.available:  # no projects (or none readable): the repos may still be close
            why.append(listing.note or "this profile has no projects.db (`hermes project create` makes one)")
        close = close_targets(home, token, known)
        if close:
            why.append("did you mean " + " or ".join(f"{what} (project_id {given!r})" for what, given in close))
    why.append(TARGETS)
    return "; ".join(why)


def close_targets(home: Path, token: str, repos: list[attribution.Project] | None = None) -> list[tuple[str, str]]:
    """Up to three targets whose names are close to ``token`` (a typo, another case, a part of the name:
    ``Quaser``, ``team``, ``payment``), best first: ``(what it is, what to give a move for it)``; ``[]`` when
    none is. Active projects of projects.db by name and slug, and the git repos that hold sessions by name
    (``repos``: :func:`known_repos`, read here when not given)."""
    typed = token.strip().casefold()
    if not typed:
        return []
    named: dict[str, tuple[str, str]] = {}  # a name as compared -> the target it stands for
    for p in store.projects_as_known(home).projects:
        if not p.archived:
            named.update({n.casefold(): (f"project {p.name}", p.slug or p.id) for n in (p.name, p.slug) if n})
    for repo in known_repos(home) if repos is None else repos:
        named.setdefault(str(repo.name).casefold(), (f"git repo {repo.name}", repo.root))
    close = difflib.get_close_matches(typed, list(named), n=3, cutoff=0.6)
    close += [n for n in named if n not in close and len(typed) >= 2 and (typed in n or n in typed)]
    return list(dict.fromkeys(named[n] for n in close))[:3]


def known_repos(home: Path) -> list[attribution.Project]:
    """The git repos (auto projects) that hold sessions of this profile, by name; ``[]`` when state.db cannot be read."""
    try:
        conn = store.open_state_db(home)
    except errors.StoreError:
        return []
    try:
        listing = store.load_projects(home)
        census = workspace.project_census(conn, workspace.attributor_for(home, listing.projects))
    except (sqlite3.DatabaseError, errors.ProjectsDBUnreadable):
        return []
    finally:
        conn.close()
    return [count.project for count in census if count.project.kind == "auto"]


def move_session(home: Path, session_id: str, token: str) -> MoveOutcome:
    """Move a session's whole compression lineage to the target ``token`` names (see :func:`resolve_move_target`).

    Returns attribution after the move and before it (a :class:`MoveOutcome`, with warnings).
    Raises :class:`errors.StoreError` subclasses (no state.db, unknown session,
    delegate session, unknown project, missing folder, a folder in no project).
    """
    conn = store.open_state_db(home)
    try:
        current = session_rows.session_info(conn, session_id)
    finally:
        conn.close()
    if current is None:
        raise errors.SessionNotFound(f"session not found in state.db: {errors.echo(session_id)}")
    if current.is_delegate:
        raise errors.MoveRefused("subagent sessions cannot be moved; ask in the parent conversation")
    listing = store.load_projects(home)
    target = resolve_move_target(home, token, listing)
    # The project it leaves, decided as its searches decide it (read before the write, which changes it).
    left = workspace.attributor_for(home, listing.projects).project_of(workspace.as_asked(current))
    folder = target.folder
    folders.git.invalidate()  # the target may have become (or stopped being) a repo
    branch, root = folders.git.branch(folder), folders.git.common_root(folder)
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
    try:
        listing = store.read_again(store.load_projects)(home)
    except errors.ProjectsDBUnreadable as exc:  # the move is done: said, not failed
        warnings.append(f"{exc}: where the session now belongs was not checked")
        return MoveOutcome(target.project, folder, branch, root, tuple(lineage), left, tuple(warnings))
    conn = store.open_state_db(home)
    try:
        moved = session_rows.session_info(conn, session_id)
    finally:
        conn.close()
    after = workspace.attributor_for(home, listing.projects).project_of(moved) if moved else attribution.HOME
    if after.identity != target.project.identity:
        warnings.append(f"the folder {folder} is attributed to {after.to_json()} (a nested project folder claims it)")
    return MoveOutcome(after, folder, branch, root, tuple(lineage), left, tuple(warnings))
