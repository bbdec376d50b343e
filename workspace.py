"""Which project a folder and a session belong to, and what a search may read (its scope).

The IO half of attribution: the per-profile attributor (asking ``folders`` of git and the file system), and the
per-state.db membership cache (every session's project). The rule itself is the pure ``attribution.resolve_project``; process-wide data lives in
``state.py``.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import attribution, conversations, errors, folders, paths, session_rows, state, store
from .records import Scope, SessionDetails, SessionInfo

logger = logging.getLogger(__name__)

@dataclass
class _Members:
    attributor: Attributor  # the one it was made with, held: a dropped one's id() is handed out again
    read_at: float  # monotonic time of the full read
    max_rowid: int
    count: int
    where: dict[str, tuple[str, str]]  # searchable session -> project identity
    by_identity: dict[tuple[str, str], set[str]]
    messages: dict[str, int]  # message_count when last read (sizes the scan strategy)
    # every session's workspace as last read (None: it has none)
    workspaces: dict[str, attribution.Workspace | None] = field(default_factory=dict)
    fingerprint: tuple[Any, ...] = ()  # db_fingerprint() when loaded
    # each project's searchable sessions sorted (:meth:`sorted_members`), dropped when one joins or leaves it
    sorted_by_identity: dict[tuple[str, str] | None, tuple[str, ...]] = field(default_factory=dict)

    def place(self, session_id: str, identity: tuple[str, str] | None, messages: int = 0) -> None:
        if self.where.get(session_id) == identity and (identity is None or self.messages.get(session_id) == messages):
            return  # as it was (the recent sessions are placed again on every search)
        old = self.where.pop(session_id, None)
        self.messages.pop(session_id, None)
        if old is not None:
            self.by_identity.get(old, set()).discard(session_id)
        if identity is not None:
            self.where[session_id] = identity
            self.messages[session_id] = messages
            self.by_identity.setdefault(identity, set()).add(session_id)
        if old != identity:
            self.sorted_by_identity.pop(old, None)
            self.sorted_by_identity.pop(identity, None)

    def sorted_members(self, identity: tuple[str, str]) -> tuple[str, ...]:
        """The project's searchable sessions, sorted once while none joins or leaves it (a session that grows stays):
        every search's scope starts from them (5,500 sessions sorted took 1 ms a search)."""
        held = self.sorted_by_identity.get(identity)
        if held is None:
            held = self.sorted_by_identity[identity] = tuple(sorted(self.by_identity.get(identity, ())))
        return held


#: What an answer shows of a session whose row was not there to read.
_UNREAD = SessionDetails(None, None, "")


class MembershipCache:
    """Per state.db: project identity -> searchable member sessions. Thread-safe.

    Reading every session row is expensive (each holds the session's system prompt), so a search does it only
    the first time, when sessions were deleted, when the projects or the file changed, and past
    ``stale_limit`` seconds. Past ``ttl``, a search answers from the cache and starts the full read in a thread
    of its own. Otherwise each search re-reads only new sessions and the ``recent`` newest (the desktop records
    a new session's cwd just after creating it), inheriting workspaces from the cache. So a change another
    process makes to an *old* session shows within about ``ttl``, and always within ``stale_limit``.
    """

    def __init__(self, ttl: float = 60.0, recent: int = 64, stale_limit: float = 300.0) -> None:
        self.ttl = ttl
        self.stale_limit = stale_limit
        self.recent = recent
        self.lock = threading.Lock()  # held by the entries' writers, and by readers of their sessions (compute_scope)
        self._entries: dict[str, _Members] = state.cache("membership").data
        self._reloads: dict[str, threading.Thread] = state.cache("membership_reloads").data

    def members(self, conn: sqlite3.Connection, db_key: str, attributor: Attributor) -> _Members:
        count, top, mark = _census_state(conn, db_key)
        now = time.monotonic()
        with self.lock:
            entry = self._entries.get(db_key)
            if (entry is not None and entry.attributor is attributor and entry.fingerprint == mark
                    and now < entry.read_at + self.stale_limit):
                if self._refresh(conn, entry, attributor, count, top):
                    if now >= entry.read_at + self.ttl:
                        self._reload_behind(db_key, entry, attributor)
                    return entry
            entry = self._full(conn, attributor, count, top, now)
            entry.fingerprint = mark
            self._entries[db_key] = entry
            return entry

    def still_members(self, conn: sqlite3.Connection, db_key: str, attributor: Attributor, scope: Scope,
                      ids: Sequence[str]) -> dict[str, SessionDetails]:
        """Of ``ids`` (sessions an answer is about to show, chosen by the census for ``scope``), those state.db still
        puts there, each with what an answer shows of it (read in the same statement): the row is there and
        searchable, and the folder it records is the one the census read, or one of the scope's project. A session that records no folder (a ``/branch``, a continuation, a ``/new`` session) is
        asked of the session the census took its folder from (its ``owner``: a move writes that one's folder). The
        census is a hint, re-read up to ``stale_limit`` late: a session another process deleted, archived or moved
        since is left out of the answer (until the census is read again), never shown as this project's. The census
        may be voided meanwhile (a move in this process): each folder, a row's own or its chain's, is then asked of
        the attributor. The asking session's own archive (``scope.live``) is kept whatever it is. One read of those
        rows and their owners', a folder probed only where it changed."""
        identity = scope.project.identity
        asked = [sid for sid in ids if sid != scope.live]
        with self.lock:  # each session's folder as the census read it, and whose row it is
            entry = self._entries.get(db_key)
            census, where = (entry.workspaces, entry.where) if entry is not None else ({}, {})
            # a census read again meanwhile that files a session elsewhere is no census of it (asked as with none)
            read = {sid: census.get(sid) if where.get(sid) == identity else None for sid in asked}
            owners = _owners(census, [sid for sid, ws in read.items() if ws is not None and ws.via])
        rows = session_rows.recorded(conn, [*ids, *set(owners.values())])
        kept: dict[str, SessionDetails] = {}
        if scope.live and scope.live in ids:  # the asking session's own archive, whatever it is
            kept[scope.live] = rows[scope.live][3] if scope.live in rows else _UNREAD
        for sid in asked:
            if sid not in rows or not rows[sid][2]:  # gone, archived or a delegate's
                continue
            ws, (cwd, root, _, details) = read[sid], rows[sid]
            if not cwd and not root and sid in owners:  # its folder is its owner's: a move rewrites that one's
                if owners[sid] not in rows:  # the owner deleted: no folder to inherit
                    continue
                cwd, root = rows[owners[sid]][:2]
                moved = bool(cwd) and ws is not None and (ws.cwd or "", ws.root or "") != (cwd, root)
            elif not cwd and not root and ws is None:  # no census says whose folder it takes: its chain's, if any
                if (now := session_rows.resolve_workspace(conn, sid)[1]) is None:
                    continue
                cwd, root, moved = now.cwd or "", now.root or "", True
            else:
                moved = bool(cwd) and (ws is None or ws.cwd != cwd)
            if not moved or attributor.project_for_workspace(cwd, root or None).identity == identity:
                kept[sid] = details
        return kept

    def _reload_behind(self, db_key: str, entry: _Members, attributor: Attributor) -> None:
        """Start the full read of ``db_key`` in a thread of its own (one at a time, on its own connection); lock
        held. It replaces ``entry`` only if that is still in use and the file the same; a failure is logged."""
        running = self._reloads.get(db_key)
        if running is not None and running.is_alive():
            return

        def reload() -> None:
            try:
                with closing(store.connect_ro(Path(db_key))) as conn:
                    count, top, mark = _census_state(conn, db_key)
                    fresh = self._full(conn, attributor, count, top, time.monotonic())
                fresh.fingerprint = mark
                with self.lock:
                    if self._entries.get(db_key) is entry and entry.fingerprint == mark:
                        self._entries[db_key] = fresh  # sessions newer than its read: the next search's refresh
            except (OSError, sqlite3.Error) as exc:  # state.db busy, moved or damaged: the search path tells
                logger.info("re-reading the sessions of %s in the background failed: %s", db_key, exc)
            except Exception:  # a thread's escape would print a traceback into the user's terminal
                logger.exception("re-reading the sessions of %s in the background failed", db_key)

        thread = threading.Thread(target=reload, name="phr-census", daemon=True)
        try:
            thread.start()
        except RuntimeError as exc:  # no more threads, or the interpreter is shutting down: the search goes on
            logger.info("could not re-read the sessions of %s in the background: %s", db_key, exc)
            return
        self._reloads[db_key] = thread

    def settle(self, timeout: float = 30.0) -> None:
        """Wait for the full reads started in the background (tests; a process about to exit need not)."""
        for thread in list(self._reloads.values()):
            thread.join(timeout)

    def _full(self, conn: sqlite3.Connection, attributor: Attributor, count: int, top: int, now: float) -> _Members:
        scan = session_rows.scan_sessions(conn)
        entry = _Members(attributor, now, top, count, {}, {}, {}, dict(scan.workspaces))
        groups = scan.groups()
        # The folders the attributor will probe (an existing one, or one gone without a stored root), all at once.
        folders.git.prefetch(cwd for cwd, root in groups
                     if cwd and not attributor.knows(cwd, root) and (not root or os.path.isdir(cwd)))
        for (cwd, root), sessions in groups.items():
            identity = attributor.project_for_workspace(cwd, root).identity
            for sid, messages in sessions:
                entry.place(sid, identity, messages)
        return entry

    def _refresh(self, conn: sqlite3.Connection, entry: _Members, attributor: Attributor, count: int, top: int) -> bool:
        """Re-read new and recent sessions; False when a full reload is needed."""
        new_rows = top - entry.max_rowid
        if new_rows < 0 or count != entry.count + new_rows:
            return False  # rows deleted (or rowids reused): start over
        for r in session_rows.rows_after(conn, min(entry.max_rowid, top) - self.recent):  # parents before children
            row = session_rows._session_row(r)
            held = entry.workspaces.get(row.id)
            ws: attribution.Workspace | None
            if row.cwd or row.root:
                ws = attribution.Workspace(row.cwd, row.root)
            elif row.parent and row.parent in entry.workspaces:  # the parent's, or none when it has none
                parent = entry.workspaces[row.parent]
                ws = None if parent is None else attribution.Workspace(parent.cwd, parent.root, "parent", row.parent)
            elif held is not None and held.basis != "recorded":
                ws = held  # inherited before: the chain above it has not changed
            else:
                ws = session_rows.resolve_workspace(conn, row.id, entry.workspaces)[1]
            entry.workspaces[row.id] = ws
            if r[8] or r[9] or ws is None:
                entry.place(row.id, None)
                continue
            identity = attributor.project_for_workspace(ws.cwd, ws.root).identity
            entry.place(row.id, identity if identity[0] != "home" else None, int(r[10] or 0))
        entry.max_rowid, entry.count = top, count
        return True

    def invalidate(self) -> None:
        with self.lock:
            self._entries.clear()


def _census_state(conn: sqlite3.Connection, db_key: str) -> tuple[int, int, tuple[Any, ...]]:
    """``(sessions, their highest rowid, the file's fingerprint and the cron jobs' folders)``: what a census is
    checked against. Raises ``sqlite3`` errors. Two subqueries: alone, ``count(*)`` counts the smallest index's pages
    and ``max(rowid)`` is one seek; together in one select SQLite steps through every entry of an index (1 ms at
    20,000 sessions, every search)."""
    count, top = conn.execute(
        "SELECT (SELECT count(*) FROM sessions), (SELECT COALESCE(max(rowid), 0) FROM sessions)").fetchone()
    return int(count), int(top), (*session_rows.db_fingerprint(conn, db_key), getattr(conn, "cron_folders", None))


membership = MembershipCache()


class Attributor:
    """Attribute workspaces to projects, caching per distinct workspace for ``ttl`` seconds.

    Folders are compared as recorded and as the filesystem resolves them (symlinks, ``..``), so one repo never
    splits in two. A recorded folder that no longer exists is attributed by the stored git root, then the probe
    of its nearest existing ancestor, then the git metadata of repos seen before (a deleted worktree).
    """

    def __init__(self, projects: Sequence[attribution.ProjectRecord], junk_roots: Iterable[str] = (), junk_trees: Iterable[str] = (), ttl: float = 60.0) -> None:
        self.projects = tuple(_with_physical_folders(p) for p in projects)
        self._folders = attribution.folder_index(self.projects)
        self.junk_roots = tuple(junk_roots)
        self.junk_trees = tuple(junk_trees)
        self.ttl = ttl
        self._cache: dict[tuple[str | None, str | None], tuple[attribution.Project, float]] = {}
        self._roots_seen: set[str] = set()
        # the worktrees the repos seen name (gitdir -> repo), each repo listed once a ttl: a census of many folders
        # gone costs the repos once, not once a folder
        self._worktrees: dict[str, str] = {}
        self._listed: set[str] = set()
        self._worktrees_until = 0.0

    def project_of(self, info: SessionInfo) -> attribution.Project:
        """The project of a session, from its effective workspace."""
        return self.project_for_workspace(info.cwd, info.git_repo_root)

    def knows(self, cwd: str | None, stored_root: str | None) -> bool:
        """Whether :meth:`project_for_workspace` answers this workspace from its cache (no git probe)."""
        return self._cached(_workspace_key(cwd, stored_root), time.monotonic()) is not None

    def _cached(self, key: tuple[str | None, str | None], now: float) -> attribution.Project | None:
        hit = self._cache.get(key)
        return hit[0] if hit is not None and hit[1] > now else None

    def project_for_workspace(self, cwd: str | None, stored_root: str | None) -> attribution.Project:
        key = _workspace_key(cwd, stored_root)
        now = time.monotonic()
        cached = self._cached(key, now)
        if cached is not None:
            return cached
        # A relative folder (an editor's "." when it sent none) names no folder here: probed, it would be this
        # process's own.
        probe = cwd if cwd and os.path.isabs(cwd) else ""
        # As the desktop tree: a live probe of cwd first (folds worktrees; CLI sessions store no root), then the
        # stored root. A folder gone since: the stored root first, then the probe of what is left.
        if probe and os.path.isdir(probe):
            root = folders.git.common_root(probe) or (stored_root or "")
        else:
            root = stored_root or folders.git.common_root(probe) or (self._worktree_main_root(probe, now) if probe else "")
        # An existing folder counts as the filesystem resolves it (symlinks, then ".."), never as text.
        where = folders.physical(cwd) or cwd
        candidates = {"cwd": where, "git_repo_root": root, "also": [p for p in (folders.physical(root),) if p and p != root]}
        project = attribution.resolve_project(candidates, self._folders, junk_roots=self.junk_roots, junk_trees=self.junk_trees)
        if project.kind == "auto" and root:
            self._roots_seen.add(root)
        self._cache[key] = (project, now + self.ttl)
        return project

    def _worktree_main_root(self, path: str, now: float) -> str:
        """The repo seen before whose git metadata still names ``path`` as one of its worktrees ("" if none)."""
        if now >= self._worktrees_until:
            self._worktrees, self._listed, self._worktrees_until = {}, set(), now + self.ttl
        for root in sorted(self._roots_seen - self._listed):
            self._listed.add(root)
            for gitdir in folders.worktree_gitdirs(root):
                self._worktrees.setdefault(gitdir, root)
        return self._worktrees.get(os.path.normpath(os.path.join(path, ".git")), "")


def _workspace_key(cwd: str | None, stored_root: str | None) -> tuple[str | None, str | None]:
    """The attributor's cache key of a workspace: the census's groups say "no stored root" as ``None``, a refresh's
    workspaces as ``""``."""
    return cwd or None, stored_root or None


def _with_physical_folders(project: attribution.ProjectRecord) -> attribution.ProjectRecord:
    """The project with each folder's resolved path added beside it as typed (when they differ)."""
    kept = list(project.folders)
    typed = [f.path for f in kept]
    for path in [*typed, project.primary_path]:
        real = folders.physical(os.path.expanduser(path)) if path else None
        if real and real not in typed:
            kept.append(attribution.ProjectFolder(real))
            typed.append(real)
    return dataclasses.replace(project, folders=tuple(kept))


_attributors: dict[tuple[Any, ...], Attributor] = state.cache("attributors").data


_attributors_lock = threading.Lock()


def attributor_for(home: Path, projects: Sequence[attribution.ProjectRecord]) -> Attributor:
    """The process-wide attributor for this profile and this list of projects."""
    user_home = os.path.expanduser("~")
    junk_roots = (user_home, os.path.realpath(user_home))
    junk_trees = (str(home), os.path.realpath(str(home)))
    key = (str(home), tuple(projects), junk_roots)
    with _attributors_lock:
        found = _attributors.get(key)
        if found is None:
            if len(_attributors) > 16:
                _attributors.clear()
            found = _attributors[key] = Attributor(projects, junk_roots, junk_trees)
        return found


def live_cli_folder(session: SessionInfo) -> str | None:
    """The folder of the live CLI running ``session`` when Hermes recorded none for it; ``None`` otherwise.

    Hermes' CLI creates a ``/new`` session's row without a folder. Inside that very CLI process
    (``HERMES_SESSION_ID`` names the session, its source is ``cli``, the terminal local), ``os.getcwd()`` is
    the folder the CLI records for its sessions.
    """
    if session.cwd or session.git_repo_root or session.source != "cli":
        return None
    if os.environ.get("HERMES_SESSION_ID") != session.id:
        return None
    if (os.environ.get("TERMINAL_ENV") or "local").strip().lower() != "local":
        return None
    try:
        return os.getcwd()
    except OSError:  # the folder was deleted under the process
        return None


def as_asked(session: SessionInfo) -> SessionInfo:
    """``session`` as its project is decided when it asks: with its live CLI's folder (:func:`live_cli_folder`,
    ``basis`` ``live_cli``) when Hermes recorded none for it."""
    live = live_cli_folder(session)
    return dataclasses.replace(session, cwd=live, basis="live_cli") if live else session


def _owners(census: Mapping[str, attribution.Workspace | None], ids: Sequence[str]) -> dict[str, str]:
    """``{id: the session whose own row gives it its folder}`` for the sessions ``ids`` that inherit one, by the
    census's ``via`` links (a session's parent or predecessor on the walk). Sessions met on an earlier walk end a
    later one: a long chain is walked once for all of its sessions, not once each. Pure."""
    owner: dict[str, str] = {}
    for start in ids:
        path, sid = dict[str, None](), start  # the walk, in order
        while sid not in owner:
            ws = census.get(sid)
            if ws is None or not ws.via or sid in path:  # its own row's folder (or a loop the census cannot hold)
                owner[sid] = sid
                break
            path[sid] = None
            sid = ws.via
        for walked in path:
            owner[walked] = owner[sid]
    return {sid: owner[sid] for sid in ids}


def compute_scope(conn: sqlite3.Connection, attributor: Attributor, current_id: str, *, db_key: str) -> Scope:
    """The searchable sessions sharing ``current_id``'s project, the part of its lineage still in its live context
    left out (a compression's summarised-away past is searched, as in Hermes' own search: the sessions of its lineage
    a compression ended, its branches' family, and what a compaction in place archived of the asking session
    itself, ``Scope.live``; ``Scope.past``).

    The current session's workspace is its own, inherited (``session_rows.resolve_workspace``), or its live
    CLI's folder (:func:`live_cli_folder`; ``current.basis`` is then ``live_cli``). Home has no scope. Raises
    ``errors.SessionNotFound`` when ``current_id`` is not in state.db.
    """
    entry = membership.members(conn, db_key, attributor)
    current = session_rows.session_info(conn, current_id, known=entry.workspaces)
    if current is None:
        raise errors.SessionNotFound(f"session not found in state.db: {current_id}")
    current = as_asked(current)
    project = attributor.project_of(current)
    identity = project.identity
    if project.is_home:
        return Scope(current, project, (), 0)
    excluded, lineage_past = conversations.lineage(conn, current_id)
    # A compaction in place archived part of the asking session: that part left its context, and is searched.
    live = current_id if store.compacted_in_place(conn, current_id) else ""
    with membership.lock:  # the project's sessions less the asking lineage's live context (a few sessions)
        others = tuple(itertools.filterfalse(excluded.__contains__, entry.sorted_members(identity)))
        messages = sum(map(entry.messages.__getitem__, others)) + (entry.messages.get(live, 0) if live else 0)
        inside = entry.by_identity.get(identity, set())
        searched_past = {sid for sid in lineage_past if sid in inside and sid not in excluded}
    at = bisect.bisect(others, live)  # the asking session among the others, in order
    searched = (*others[:at], live, *others[at:]) if live else others
    past = tuple(sorted(searched_past | {live} if live else searched_past))
    return Scope(current, project, searched, len(others) + 1, messages, live=live, past=past)


def compute_scope_for_cwd(conn: sqlite3.Connection, attributor: Attributor, cwd: str, *, db_key: str) -> Scope:
    """Every searchable session of the project that folder ``cwd`` belongs to, for callers with no session id
    (slash commands, the command line): nothing is excluded and ``Scope.current`` is ``None``. Home has no scope.
    Never raises for the folder itself (a missing one is attributed by its path).
    """
    project = attributor.project_for_workspace(cwd or None, None)
    identity = project.identity
    if project.is_home:
        return Scope(None, project, (), 0)
    entry = membership.members(conn, db_key, attributor)
    with membership.lock:
        members = entry.sorted_members(identity)
        return Scope(None, project, members, len(members), sum(map(entry.messages.__getitem__, members)))


def scope_for(conn: sqlite3.Connection, home: Path, session_id: str, cwd: str | None
              ) -> tuple[Scope, Attributor, store.ProjectList]:
    """The asking session's scope (:func:`compute_scope`), or with ``cwd`` (slash commands, the command line) that
    folder's (:func:`compute_scope_for_cwd`), with the attributor that decided it and the projects it knew."""
    listing = store.load_projects(home)
    attributor = attributor_for(home, listing.projects)
    if cwd is not None:
        return compute_scope_for_cwd(conn, attributor, cwd, db_key=paths.state_db_key(home)), attributor, listing
    return compute_scope(conn, attributor, session_id, db_key=paths.state_db_key(home)), attributor, listing


@dataclass(frozen=True)
class ProjectCount:
    """One project as attribution sees it, with its searchable sessions."""

    project: attribution.Project
    sessions: int  # searchable sessions (archived and delegate/tool runs left out)
    messages: int  # their message_count, summed
    workspaces: tuple[str, ...]  # distinct recorded working folders, sorted


def project_census(conn: sqlite3.Connection, attributor: Attributor) -> list[ProjectCount]:
    """Every project that holds searchable sessions, and Home, with counts; sorted by kind (explicit, auto,
    home), then name. Read fresh (not from the membership cache) with the search's attribution; Home counts the
    searchable sessions in no project, those with no folder included. Raises ``sqlite3.DatabaseError``.
    """
    counts: dict[tuple[str, str], list[Any]] = {}
    scan = session_rows.scan_sessions(conn)
    for (cwd, root), sessions in scan.groups().items():
        project = attributor.project_for_workspace(cwd, root)
        slot = counts.setdefault(project.identity, [project, 0, 0, set()])
        slot[1] += len(sessions)
        slot[2] += sum(messages for _, messages in sessions)
        if cwd:
            slot[3].add(cwd)
    placed = sum(slot[1] for key, slot in counts.items() if key[0] != "home")
    placed_messages = sum(slot[2] for key, slot in counts.items() if key[0] != "home")
    home = counts.pop(("home", ""), [attribution.HOME, 0, 0, set()])
    home[1], home[2] = len(scan.searchable) - placed, sum(scan.searchable.values()) - placed_messages
    order = {"explicit": 0, "auto": 1}
    rows = sorted(counts.values(), key=lambda s: (order.get(s[0].kind, 2), s[0].name.casefold()))
    return [ProjectCount(p, n, m, tuple(sorted(w))) for p, n, m, w in [*rows, home]]
