"""IO shell: Hermes' state.db and projects.db, git probing, and the move write.

Invariants:

* state.db and projects.db are opened read-only (``mode=ro`` through
  ``Path.as_uri()``, so ``#`` or ``?`` in a path cannot open another file) and
  never created or migrated here. Reads never open a write transaction.
* The only write to Hermes data is :func:`move_session`, and it goes through
  Hermes' own ``SessionDB`` (``update_session_cwd`` and its write helper).
* Paths come from ``$HERMES_HOME`` (profile-aware), never a hard-coded home.

Failures are raised as :class:`StoreError` subclasses carrying a stable
``code``; the tool handlers translate them into the design's failure table.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import sqlite3
import subprocess
import threading
import time
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import attribution

logger = logging.getLogger(__name__)

#: Roles whose messages are searchable. Tool output counts: users expect a
#: match in a command's output to find the session.
SEARCH_ROLES: tuple[str, ...] = ("user", "assistant", "tool")
#: Tools whose calls and answers are recall itself, never project history: a
#: search that found its own earlier queries and results would feed on itself.
#: The plugin's tools and Hermes' built-in ``session_search``.
RECALL_TOOLS: tuple[str, ...] = (
    "project_history_search",
    "project_history_read",
    "project_history_recent",
    "project_session_move",
    "project_history_semantic_consent",
    "session_search",
)
#: ``busy_timeout`` for read connections: a writer checkpointing must not
#: surface as "database is locked".
BUSY_TIMEOUT_MS = 5000
GIT_TIMEOUT_S = 1.5
_NEGATIVE_TTL_S = 30.0


class StoreError(Exception):
    """A failure the tools report as ``{"success": false, "code": code}``."""

    code = "store_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = details


class NoStateDB(StoreError):
    code = "no_db"


class StateDBUnreadable(StoreError):
    code = "db_unreadable"


class NoSession(StoreError):
    code = "no_session"


class SessionNotFound(StoreError):
    code = "session_not_found"


class ProjectNotFound(StoreError):
    code = "project_not_found"


class FolderNotFound(StoreError):
    code = "folder_not_found"


class MoveRefused(StoreError):
    code = "move_refused"


# ---------------------------------------------------------------------------
# Locations and connections
# ---------------------------------------------------------------------------


def hermes_home() -> Path:
    """The active profile's HERMES_HOME (Hermes' resolver when importable)."""
    try:
        from hermes_constants import get_hermes_home
    except ImportError:  # outside Hermes: same rule as Hermes itself
        return Path(os.environ.get("HERMES_HOME") or Path.home() / ".hermes")
    return Path(get_hermes_home())


def state_db_path(home: Path) -> Path:
    return Path(home) / "state.db"


def projects_db_path(home: Path) -> Path:
    return Path(home) / "projects.db"


def plugin_data_dir(home: Path) -> Path:
    """The plugin's private, per-profile data folder (embeddings.db, consent.json).

    ``$HERMES_HOME/plugins/project-history-recall/data``: beside a drop-in
    install (git-ignored there), and never inside site-packages for pip.
    """
    return Path(home) / "plugins" / "project-history-recall" / "data"


def load_settings(home: Path) -> Any:
    """This profile's plugin settings from ``config.yaml`` (defaults when absent or unreadable).

    A real Hermes config.yaml is hundreds of lines (about 40 ms to parse in
    pure Python), so the parsed settings are kept per file and re-read only
    when its size or modification time changes.
    """
    import yaml

    from . import config_schema

    path = Path(home) / "config.yaml"
    try:
        stat = path.stat()
        stamp: tuple[int, ...] | None = (stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size, stat.st_ino)
    except OSError:
        stamp = None
    cached = _settings_cache.get(str(path))
    if cached is not None and cached[0] == stamp:
        return cached[1]
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=loader) if stamp is not None else {}  # noqa: S506 (a safe loader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        logger.warning("config.yaml unreadable (%s): %s", path, exc)
        raw = {}
    settings = config_schema.parse_settings(raw if isinstance(raw, dict) else {})
    _settings_cache[str(path)] = (stamp, settings)
    return settings


_settings_cache: dict[str, tuple[tuple[int, ...] | None, Any]] = {}


def embedding_api_key(home: Path) -> str:
    """``PROJECT_HISTORY_EMBEDDING_API_KEY`` the way Hermes reads its env: process env, then ``$HERMES_HOME/.env``."""
    name = "PROJECT_HISTORY_EMBEDDING_API_KEY"
    if os.environ.get(name):
        return os.environ[name]
    try:
        from hermes_cli.config import get_env_value
    except ImportError:
        get_env_value = None
    if get_env_value is not None:
        value = get_env_value(name)
        if value:
            return str(value)
    env_file = Path(home) / ".env"
    try:
        for line in env_file.read_text(encoding="utf-8").splitlines():
            key, sep, value = line.strip().partition("=")
            if sep and key.strip().removeprefix("export ").strip() == name:
                return value.strip().strip("'\"")
    except OSError:
        pass
    return ""


def connect_ro(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only. Never creates the file.

    Raises ``FileNotFoundError`` when the file does not exist and
    ``sqlite3.OperationalError`` when SQLite cannot open it.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(str(path))
    uri = path.resolve().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    # One value that is not valid UTF-8 (a folder name, a pasted binary) must not
    # fail every search: it reads with U+FFFD in place of the bad bytes.
    conn.text_factory = _TEXT
    return conn


_TEXT = functools.partial(str, encoding="utf-8", errors="replace")


def state_db_key(home: Path) -> str:
    """The key per-database caches use: the resolved path of ``<home>/state.db``."""
    return str(state_db_path(home).resolve())


def open_state_db(home: Path) -> sqlite3.Connection:
    """Read-only connection to ``<home>/state.db``; :class:`NoStateDB` if absent."""
    path = state_db_path(home)
    try:
        conn = connect_ro(path)
        conn.execute("SELECT 1 FROM sessions LIMIT 1").fetchall()
    except FileNotFoundError:
        raise NoStateDB("session database not found", path=str(path)) from None
    except sqlite3.DatabaseError as exc:
        raise StateDBUnreadable(f"session database unreadable: {exc}", path=str(path)) from None
    return conn


# ---------------------------------------------------------------------------
# Projects
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ProjectList:
    projects: tuple[dict[str, Any], ...]
    available: bool  # False: projects.db missing or unreadable -> auto attribution only
    note: str = ""


def load_projects(home: Path) -> ProjectList:
    """Every project (archived included, flagged) with its folders.

    A missing ``projects.db`` is normal (profiles that never used the
    desktop): it degrades to auto attribution, design §7. The file is never
    created (``projects_db.connect()`` would).
    """
    path = projects_db_path(home)
    try:
        conn = connect_ro(path)
    except FileNotFoundError:
        return ProjectList((), False)
    except sqlite3.DatabaseError as exc:
        logger.warning("projects.db unreadable (%s): %s", path, exc)
        return ProjectList((), False, f"projects.db unreadable: {exc}")
    try:
        rows = conn.execute(
            # Hermes' own order (projects_db.list_projects): creation time, then insertion for a tie.
            "SELECT id, slug, name, primary_path, archived FROM projects ORDER BY created_at ASC, rowid ASC"
        ).fetchall()
        folder_rows = conn.execute(
            "SELECT project_id, path, is_primary FROM project_folders ORDER BY is_primary DESC, added_at ASC, path ASC"
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        logger.warning("projects.db query failed (%s): %s", path, exc)
        return ProjectList((), False, f"projects.db unreadable: {exc}")
    finally:
        conn.close()
    folders: dict[str, list[dict[str, Any]]] = {}
    for project_id, fpath, is_primary in folder_rows:
        folders.setdefault(project_id, []).append({"path": fpath, "is_primary": bool(is_primary)})
    projects = tuple(
        {
            "id": pid,
            "slug": slug,
            "name": name,
            "primary_path": primary,
            "archived": bool(archived),
            "folders": folders.get(pid, []),
        }
        for pid, slug, name, primary, archived in rows
    )
    return ProjectList(projects, True)


# ---------------------------------------------------------------------------
# Git probing (cached, bounded by a timeout)
# ---------------------------------------------------------------------------


class _GitProbe:
    """``common_repo_root`` / ``branch`` for a folder.

    Uses Hermes' ``tui_gateway.git_probe`` when importable (shares its cache
    with the desktop); otherwise runs ``git`` itself with the same timeout and
    the same worktree folding. Negative answers expire after 30 s so a folder
    that becomes a repo is picked up.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roots: dict[str, tuple[str, float]] = {}

    @staticmethod
    def _hermes_probe() -> Any | None:
        try:
            from tui_gateway import git_probe
        except ImportError:
            return None
        return git_probe

    @staticmethod
    def _run_git(cwd: str, *args: str) -> str:
        try:
            result = subprocess.run(
                ["git", "-C", cwd, *args],
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="replace",
                timeout=GIT_TIMEOUT_S,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError):
            return ""
        return result.stdout.strip() if result.returncode == 0 else ""

    def _probe_root(self, cwd: str) -> str:
        probe = self._hermes_probe()
        if probe is not None:
            return probe.common_repo_root(cwd) or ""
        gitdir = self._run_git(cwd, "rev-parse", "--path-format=absolute", "--git-common-dir")
        if gitdir:
            gitdir = os.path.realpath(gitdir)
            if os.path.basename(gitdir) == ".git":
                return os.path.dirname(gitdir)
        return self._run_git(cwd, "rev-parse", "--show-toplevel")

    def common_root(self, cwd: str | None) -> str:
        """The main repo root containing ``cwd`` ("" if none).

        A folder that no longer exists (a deleted subfolder, a removed
        worktree) is answered by what this process's probe knew of it, else
        by its nearest existing ancestor.
        """
        if not cwd:
            return ""
        now = time.monotonic()
        with self._lock:
            hit = self._roots.get(cwd)
        if hit is not None and (hit[0] or hit[1] > now):
            return hit[0]
        folder = cwd if os.path.isdir(cwd) else nearest_existing_folder(cwd)
        root = self._probe_root(folder) if folder else ""
        with self._lock:
            self._roots[cwd] = (root, now + _NEGATIVE_TTL_S)
        return root

    def branch(self, cwd: str) -> str:
        probe = self._hermes_probe()
        if probe is not None:
            return probe.branch(cwd) or ""
        return self._run_git(cwd, "branch", "--show-current") or self._run_git(cwd, "rev-parse", "--short", "HEAD")

    def invalidate(self) -> None:
        with self._lock:
            self._roots.clear()
        probe = self._hermes_probe()
        if probe is not None and hasattr(probe, "invalidate"):
            probe.invalidate()


git = _GitProbe()


def nearest_existing_folder(path: str) -> str | None:
    """``path`` itself or its nearest ancestor that is a folder on disk (``None`` for a relative or empty path)."""
    if not path or not os.path.isabs(path):
        return None
    current = os.path.normpath(path)
    while not os.path.isdir(current):
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
    return current


def physical(path: str | None) -> str | None:
    """The folder as the filesystem resolves it (symlinks, then ``..``), or ``None`` when it does not exist."""
    if not path or not os.path.isabs(path) or not os.path.exists(path):
        return None
    return os.path.realpath(path)


def worktree_main_root(path: str, roots: Iterable[str]) -> str:
    """The main repo among ``roots`` whose git metadata still names ``path`` as one of its worktrees ("" if none).

    A worktree folder deleted without ``git worktree remove`` leaves
    ``<root>/.git/worktrees/<name>/gitdir`` pointing at ``<path>/.git``.
    """
    wanted = os.path.normpath(os.path.join(path, ".git"))
    for root in roots:
        base = os.path.join(root, ".git", "worktrees")
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            try:
                with open(os.path.join(base, name, "gitdir"), encoding="utf-8", errors="replace") as f:
                    if os.path.normpath(f.read().strip()) == wanted:
                        return root
            except OSError:
                continue
    return ""


# ---------------------------------------------------------------------------
# Sessions and attribution
#
# One scan of ``sessions`` gives every row's own folder, parent and /new
# predecessor; attribution.effective_workspaces resolves inheritance in
# Python (linear, cycle-guarded), and Python attributes each *distinct*
# workspace (cwd, stored git root) once.
# ---------------------------------------------------------------------------

# Delegate children and tool runs are never project history. The LIKE is a
# cheap pre-check so json_valid() parses only the rare candidate rows.
_DELEGATE = (
    "(COALESCE({a}source, '') IN ('subagent', 'tool') OR "
    "({a}model_config LIKE '%\\_delegate\\_from%' ESCAPE '\\' AND json_valid({a}model_config) "
    "AND json_extract({a}model_config, '$._delegate_from') IS NOT NULL))"
)


def _cols(template: str, alias: str) -> str:
    return template.format(a=f"{alias}." if alias else "")


# What attribution reads of a row, then the searchable flags and size.
_ROW_COLUMNS = f"""
    s.id, COALESCE(s.parent_session_id, ''), TRIM(COALESCE(s.cwd, '')), TRIM(COALESCE(s.git_repo_root, '')),
    COALESCE(s.source, ''), s.started_at, s.ended_at, COALESCE(s.end_reason, ''),
    s.archived, {_cols(_DELEGATE, 's')}, s.message_count, s.title
"""


def _session_row(r: Sequence[Any]) -> attribution.SessionRow:
    return attribution.SessionRow(str(r[0]), r[1] or "", r[2] or "", r[3] or "", r[4] or "", r[5], r[6], r[7] or "")


@dataclass(frozen=True)
class SessionInfo:
    id: str
    cwd: str | None  # effective: inherited (see ``basis``) when the row has none
    git_repo_root: str | None  # stored, effective like cwd
    is_delegate: bool
    archived: bool
    title: str | None
    started_at: float | None
    message_count: int
    basis: str = "recorded"  # attribution.Workspace.basis; "" when the session has no workspace at all
    via: str | None = None  # the session the workspace was taken from
    source: str = ""

    @property
    def searchable(self) -> bool:
        """Archived sessions and delegate/tool runs are never project history."""
        return not self.archived and not self.is_delegate


_CHAIN_SQL = f"""
WITH RECURSIVE up(id, depth) AS (
    SELECT :sid, 0
    UNION ALL
    SELECT s.parent_session_id, up.depth + 1 FROM up JOIN sessions s ON s.id = up.id
    WHERE TRIM(COALESCE(s.cwd, '')) = '' AND TRIM(COALESCE(s.git_repo_root, '')) = ''
      AND COALESCE(s.parent_session_id, '') != '' AND up.depth < 100000
)
SELECT {_ROW_COLUMNS} FROM up JOIN sessions s ON s.id = up.id ORDER BY up.depth
"""
_ENDED_BY_NEW_SQL = f"""
SELECT {_ROW_COLUMNS} FROM sessions s
WHERE s.end_reason = 'new_session' AND s.source = ? AND s.ended_at >= ? AND s.ended_at <= ?
"""
# Sessions started in a time window without a folder or parent (read through Hermes' started_at index).
_FRESH_CLI_SQL = f"""
SELECT {_ROW_COLUMNS} FROM sessions s
WHERE s.source = ? AND s.started_at >= ? AND s.started_at <= ? AND COALESCE(s.parent_session_id, '') = ''
  AND TRIM(COALESCE(s.cwd, '')) = '' AND TRIM(COALESCE(s.git_repo_root, '')) = ''
"""


def _chain_rows(conn: sqlite3.Connection, session_id: str, rows: dict[str, attribution.SessionRow]) -> list[Any]:
    """Rows of ``session_id`` and its ancestors up to the first with a folder (one recursive query)."""
    found = conn.execute(_CHAIN_SQL, {"sid": session_id}).fetchall()
    for r in found:
        rows.setdefault(str(r[0]), _session_row(r))
    return found


def resolve_workspace(
    conn: sqlite3.Connection, session_id: str, known: Mapping[str, attribution.Workspace] | None = None, *, hops: int = 20
) -> tuple[Any, attribution.Workspace | None]:
    """One session's row and effective workspace, reading only what it needs.

    Its ancestors come from one recursive query (the cost does not grow
    with other sessions' chains). A ``/new`` session's predecessor is
    looked up by time; ``known`` (workspaces already resolved, e.g. the
    membership cache's) short-cuts a walk. Returns ``(row or None, workspace
    or None)``.
    """
    rows: dict[str, attribution.SessionRow] = {}
    chain = _chain_rows(conn, session_id, rows)
    if not chain:
        return None, None
    first = chain[0]
    for _ in range(hops):
        top = rows[str(chain[-1][0])]
        if top.cwd or top.root or top.parent or top.source != "cli" or top.started_at is None:
            break
        if known is not None and top.id in known:
            break
        # The sessions /new ended shortly before, and the /new sessions that may have taken
        # them first (two windows back: a taker's own choice looks one window further).
        window = 2 * attribution.NEW_SESSION_WINDOW_S
        low, high = top.started_at - window, top.started_at
        for r in [*conn.execute(_ENDED_BY_NEW_SQL, (top.source, low, high)), *conn.execute(_FRESH_CLI_SQL, (top.source, low, high))]:
            rows.setdefault(str(r[0]), _session_row(r))
        previous = attribution.new_session_predecessors(rows.values()).get(top.id)
        if previous is None or previous in {str(r[0]) for r in chain}:
            break
        chain = _chain_rows(conn, previous, rows)
        if not chain:
            break
    # Sessions already resolved end a walk; their rows still count for /new matching.
    return first, attribution.effective_workspaces(rows, known=known).get(session_id)


def _info(row: Sequence[Any], ws: attribution.Workspace | None) -> SessionInfo:
    return SessionInfo(
        str(row[0]), ws.cwd if ws else None, ws.root if ws else None, bool(row[9]), bool(row[8]), row[11], row[5],
        int(row[10] or 0), ws.basis if ws else "", ws.via if ws else None, row[4] or "",
    )


_ONE_ROW_SQL = f"SELECT {_ROW_COLUMNS} FROM sessions s WHERE s.id = ?"


def session_info(
    conn: sqlite3.Connection, session_id: str, *, known: Mapping[str, attribution.Workspace] | None = None
) -> SessionInfo | None:
    """One session with its effective workspace; ``None`` when unknown.

    Taken from ``known`` (resolved workspaces, e.g. the membership cache's)
    when it holds the session, else resolved (:func:`resolve_workspace`).
    """
    if known is not None and session_id in known:
        row = conn.execute(_ONE_ROW_SQL, (session_id,)).fetchone()
        return None if row is None else _info(row, known[session_id])
    row, ws = resolve_workspace(conn, session_id, known)
    return None if row is None else _info(row, ws)


_ALL_ROWS_SQL = f"SELECT {_ROW_COLUMNS} FROM sessions s"


def db_fingerprint(conn: sqlite3.Connection, path: str) -> tuple[Any, ...]:
    """Tells one state.db file from another at the same path: the file's identity and its oldest session.

    A file replaced by another (a restored backup, a test rebuilding it) may
    reuse the inode: its first session row tells them apart. Caches keyed by
    path compare it before they trust what they hold.
    """
    try:
        st = os.stat(path)
        identity: tuple[Any, ...] = (st.st_dev, st.st_ino)
    except OSError:
        identity = (0, 0)
    first = conn.execute("SELECT id, started_at FROM sessions ORDER BY rowid LIMIT 1").fetchone()
    return (*identity, *(first or ("", 0.0)))

_LINEAGE_SQL = """
WITH RECURSIVE
up(id, parent) AS (
    SELECT id, parent_session_id FROM sessions WHERE id = :current
    UNION
    SELECT s.id, s.parent_session_id FROM sessions s JOIN up ON s.id = up.parent
),
lineage(id) AS (
    SELECT id FROM up
    UNION
    SELECT c.id FROM sessions c JOIN lineage l ON c.parent_session_id = l.id
)
SELECT id FROM lineage
"""


@dataclass(frozen=True)
class SessionScan:
    """One pass over ``sessions``: every effective workspace, and which sessions are searchable."""

    workspaces: dict[str, attribution.Workspace]
    searchable: dict[str, int]  # searchable session -> message_count (archived, delegate and tool runs left out)

    def groups(self) -> dict[tuple[str | None, str | None], list[tuple[str, int]]]:
        """Searchable sessions with a workspace, grouped by ``(cwd, stored root)``: ``[(session id, message_count)]``.

        Folders that still exist come first: attributing them first reveals
        the repos a deleted worktree's folder can then be traced to.
        """
        out: dict[tuple[str | None, str | None], list[tuple[str, int]]] = {}
        for sid, count in self.searchable.items():
            ws = self.workspaces.get(sid)
            if ws is not None:
                out.setdefault((ws.cwd, ws.root), []).append((sid, count))
        return dict(sorted(out.items(), key=lambda item: not (item[0][0] and os.path.isdir(item[0][0]))))


def scan_sessions(conn: sqlite3.Connection) -> SessionScan:
    """Read every session row once and resolve every workspace (``/new`` sessions included)."""
    rows: dict[str, attribution.SessionRow] = {}
    searchable: dict[str, int] = {}
    for r in conn.execute(_ALL_ROWS_SQL):
        row = _session_row(r)
        rows[row.id] = row
        if not r[8] and not r[9]:
            searchable[row.id] = int(r[10] or 0)
    return SessionScan(attribution.effective_workspaces(rows), searchable)


def searchable_workspaces(conn: sqlite3.Connection) -> dict[tuple[str | None, str | None], list[tuple[str, int]]]:
    """Searchable sessions grouped by effective workspace ``(cwd, stored root)``: ``[(session id, message_count)]``.

    cwd-less children (compression continuations) inherit their nearest
    ancestor's workspace and ``/new`` sessions their predecessor's;
    archived sessions and delegate/tool runs are left out; sessions with no
    workspace at all (Home) are not listed.
    """
    return scan_sessions(conn).groups()


def lineage_ids(conn: sqlite3.Connection, session_id: str) -> set[str]:
    """The session, its ancestors and every descendant of those (its conversation)."""
    return {r[0] for r in conn.execute(_LINEAGE_SQL, {"current": session_id})}


@dataclass
class _Members:
    attributor_id: int
    full_until: float  # monotonic time of the next full reload
    max_rowid: int
    count: int
    where: dict[str, tuple[str, str]]  # searchable session -> project identity
    by_identity: dict[tuple[str, str], set[str]]
    messages: dict[str, int]  # message_count when last read (sizes the scan strategy)
    workspaces: dict[str, attribution.Workspace] = field(default_factory=dict)  # every session with one
    fingerprint: tuple[Any, ...] = ()  # db_fingerprint() when loaded

    def place(self, session_id: str, identity: tuple[str, str] | None, messages: int = 0) -> None:
        old = self.where.pop(session_id, None)
        self.messages.pop(session_id, None)
        if old is not None:
            self.by_identity.get(old, set()).discard(session_id)
        if identity is not None:
            self.where[session_id] = identity
            self.messages[session_id] = messages
            self.by_identity.setdefault(identity, set()).add(session_id)


class MembershipCache:
    """Per state.db: project identity -> searchable member sessions.

    Reading every session row is expensive on a real state.db (each row holds
    the session's full system prompt), so it happens only on the first search,
    when sessions were deleted, when the projects changed, after a move made
    by this process, and at most every ``ttl`` seconds. In between, each search
    re-reads only new sessions and the ``recent`` newest ones (the desktop
    records a new session's cwd just after creating it): a recent session
    without a folder of its own takes its parent's or predecessor's workspace
    from the cache, so a deep compression chain costs nothing per search. A
    cwd changed, or a session archived, by another process in an *old*
    session shows up within ``ttl`` seconds. Thread-safe.
    """

    def __init__(self, ttl: float = 60.0, recent: int = 64) -> None:
        self.ttl = ttl
        self.recent = recent
        self._lock = threading.Lock()
        self._entries: dict[str, _Members] = {}

    def members(self, conn: sqlite3.Connection, db_key: str, attributor: "Attributor") -> _Members:
        count, top = conn.execute("SELECT count(*), COALESCE(max(rowid), 0) FROM sessions").fetchone()
        mark = db_fingerprint(conn, db_key)
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(db_key)
            if entry is not None and entry.attributor_id == id(attributor) and now < entry.full_until and entry.fingerprint == mark:
                if self._refresh(conn, entry, attributor, int(count), int(top)):
                    return entry
            entry = self._full(conn, attributor, int(count), int(top), now)
            entry.fingerprint = mark
            self._entries[db_key] = entry
            return entry

    def _full(self, conn: sqlite3.Connection, attributor: "Attributor", count: int, top: int, now: float) -> _Members:
        scan = scan_sessions(conn)
        entry = _Members(id(attributor), now + self.ttl, top, count, {}, {}, {}, dict(scan.workspaces))
        for (cwd, root), sessions in scan.groups().items():
            identity = attribution.project_identity(attributor.project_for_workspace(cwd, root))
            for sid, messages in sessions:
                entry.place(sid, identity, messages)
        return entry

    def _refresh(self, conn: sqlite3.Connection, entry: _Members, attributor: "Attributor", count: int, top: int) -> bool:
        """Re-read new and recent sessions; False when a full reload is needed."""
        new_rows = top - entry.max_rowid
        if new_rows < 0 or count != entry.count + new_rows:
            return False  # rows deleted (or rowids reused): start over
        sql = f"SELECT {_ROW_COLUMNS} FROM sessions s WHERE s.rowid > ?"
        for r in conn.execute(sql, (min(entry.max_rowid, top) - self.recent,)).fetchall():
            row = _session_row(r)
            if row.cwd or row.root:
                ws: attribution.Workspace | None = attribution.Workspace(row.cwd, row.root)
            elif row.parent and row.parent in entry.workspaces:
                parent = entry.workspaces[row.parent]
                ws = attribution.Workspace(parent.cwd, parent.root, "parent", row.parent)
            elif row.id in entry.workspaces and entry.workspaces[row.id].basis != "recorded":
                ws = entry.workspaces[row.id]  # inherited before: the chain above it has not changed
            else:
                ws = resolve_workspace(conn, row.id, entry.workspaces)[1]
            if ws is None:
                entry.workspaces.pop(row.id, None)
            else:
                entry.workspaces[row.id] = ws
            if r[8] or r[9] or ws is None:
                entry.place(row.id, None)
                continue
            identity = attribution.project_identity(attributor.project_for_workspace(ws.cwd, ws.root))
            entry.place(row.id, identity if identity[0] != "home" else None, int(r[10] or 0))
        entry.max_rowid, entry.count = top, count
        return True

    def invalidate(self) -> None:
        with self._lock:
            self._entries.clear()


membership = MembershipCache()


@dataclass(frozen=True)
class SessionDetails:
    title: str | None
    started_at: float | None
    source: str  # Hermes' platform name: cli, desktop, telegram, cron...


def session_details(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, SessionDetails]:
    """``{id: SessionDetails}`` for the sessions of ``ids`` that exist."""
    sql = "SELECT id, title, started_at, source FROM sessions WHERE id IN (SELECT value FROM json_each(?))"
    return {r[0]: SessionDetails(r[1], r[2], r[3] or "") for r in conn.execute(sql, (json.dumps(list(ids)),))}


class Attributor:
    """Attribute workspaces to projects, caching per distinct workspace.

    Folders are compared as recorded and as the filesystem resolves them
    (a project registered through a symlink, a ``..`` after one), so one
    repo never splits in two. A recorded folder that no longer exists is
    attributed by the stored git root, then what the git probe finds from
    its nearest existing ancestor, then by the git metadata of repos seen
    before (a deleted worktree). Entries expire after ``ttl`` seconds so a
    folder that became a repo is picked up.
    """

    def __init__(self, projects: Sequence[dict[str, Any]], junk_roots: Iterable[str] = (), junk_trees: Iterable[str] = (), ttl: float = 60.0) -> None:
        self.projects = tuple(_with_physical_folders(p) for p in projects)
        self.junk_roots = tuple(junk_roots)
        self.junk_trees = tuple(junk_trees)
        self.ttl = ttl
        self._cache: dict[tuple[str | None, str | None], tuple[dict[str, str], float]] = {}
        self._roots_seen: set[str] = set()

    def project_of(self, info: SessionInfo) -> dict[str, str]:
        """The project of a session, from its effective workspace."""
        return self.project_for_workspace(info.cwd, info.git_repo_root)

    def project_for_workspace(self, cwd: str | None, stored_root: str | None) -> dict[str, str]:
        key = (cwd, stored_root)
        now = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and hit[1] > now:
            return hit[0]
        exists = bool(cwd) and os.path.isdir(cwd or "")
        # Same precedence as the desktop tree: a live probe of cwd first
        # (folds worktrees; CLI sessions store no root), then the stored root.
        # A folder gone since: the stored root first, then the probe of what is left.
        if exists:
            root = git.common_root(cwd) or (stored_root or "")
        else:
            root = stored_root or git.common_root(cwd) or (worktree_main_root(cwd, sorted(self._roots_seen)) if cwd else "")
        # An existing folder counts as the filesystem resolves it (symlinks, then ".."), never as text.
        where = physical(cwd) or cwd
        candidates = {"cwd": where, "git_repo_root": root, "also": [p for p in (physical(root),) if p and p != root]}
        project = attribution.resolve_project(candidates, self.projects, junk_roots=self.junk_roots, junk_trees=self.junk_trees)
        if project.get("kind") == "auto" and root:
            self._roots_seen.add(root)
        self._cache[key] = (project, now + self.ttl)
        return project


def _with_physical_folders(project: dict[str, Any]) -> dict[str, Any]:
    """The project with each folder's resolved path added beside it as typed (when they differ)."""
    folders = list(project.get("folders") or [])
    typed = [f if isinstance(f, str) else f.get("path") for f in folders]
    for path in [*typed, project.get("primary_path")]:
        real = physical(os.path.expanduser(path)) if isinstance(path, str) and path else None
        if real and real not in typed:
            folders.append({"path": real, "is_primary": False})
            typed.append(real)
    return {**project, "folders": folders}


_attributors: dict[tuple[Any, ...], Attributor] = {}
_attributors_lock = threading.Lock()


def attributor_for(home: Path, projects: Sequence[dict[str, Any]]) -> Attributor:
    """The process-wide attributor for this profile and this list of projects."""
    user_home = os.path.expanduser("~")
    junk_roots = (user_home, os.path.realpath(user_home))
    junk_trees = (str(home), os.path.realpath(str(home)))
    key = (str(home), json.dumps(projects, sort_keys=True, default=str), junk_roots)
    with _attributors_lock:
        found = _attributors.get(key)
        if found is None:
            if len(_attributors) > 16:
                _attributors.clear()
            found = _attributors[key] = Attributor(projects, junk_roots, junk_trees)
        return found


@dataclass(frozen=True)
class Filters:
    """Message-level filters of one search; the default admits every searchable message.

    ``since`` is inclusive and ``until`` exclusive (Unix seconds, compared
    with ``messages.timestamp``; a message without a timestamp never passes
    a date bound). ``roles`` is a subset of :data:`SEARCH_ROLES`.
    """

    since: float | None = None
    until: float | None = None
    roles: tuple[str, ...] = SEARCH_ROLES
    #: The filters as the user typed them (since, until, role): what a page cursor is tied to.
    label: tuple[str, ...] = field(default=(), compare=False)

    @property
    def active(self) -> bool:
        return self != Filters()

    def sql(self) -> tuple[str, list[Any]]:
        """``(clause, params)`` for the ``m`` alias of ``messages``."""
        clause = "m.role IN ({})".format(", ".join("?" * len(self.roles)))
        params: list[Any] = list(self.roles)
        if self.since is not None:
            clause += " AND m.timestamp >= ?"
            params.append(self.since)
        if self.until is not None:
            clause += " AND m.timestamp < ?"
            params.append(self.until)
        return clause, params

    def admits(self, row: "MessageRow") -> bool:
        """The same test as :meth:`sql`, for rows already fetched."""
        if row.role not in self.roles:
            return False
        if self.since is not None and (row.timestamp is None or row.timestamp < self.since):
            return False
        return self.until is None or (row.timestamp is not None and row.timestamp < self.until)


@dataclass(frozen=True)
class Scope:
    """What one search may read: the project's other sessions."""

    current: SessionInfo | None  # None when the scope is a whole project (indexing)
    project: dict[str, str]
    session_ids: tuple[str, ...]  # searchable sessions of the project, current lineage excluded
    in_project: int  # searchable sessions attributed to the project, the current one counted once
    messages: int = 0  # messages of ``session_ids`` (as last read; sizes the scan strategy)
    filters: Filters = Filters()  # message-level filters of this search

    @functools.cached_property
    def ids_json(self) -> str:
        """``session_ids`` as the JSON array the queries take (built once per search)."""
        return json.dumps(list(self.session_ids))


def live_cli_folder(session: SessionInfo) -> str | None:
    """The folder of the live CLI running ``session`` when Hermes recorded none for it; ``None`` otherwise.

    Hermes' CLI creates a ``/new`` session's row without a folder. When the
    search runs inside that very CLI process (``HERMES_SESSION_ID`` names the
    session, its source is ``cli`` and the terminal is local), the process's
    own working folder is the one the CLI records for its sessions
    (``os.getcwd()``). A gateway or desktop process never answers for a
    session of another source.
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


def compute_scope(conn: sqlite3.Connection, attributor: Attributor, current_id: str, *, db_key: str) -> Scope:
    """The searchable sessions sharing ``current_id``'s project.

    The current session's workspace is its own, inherited
    (:func:`resolve_workspace`), or, for a ``/new`` session searched from
    inside its live CLI with nothing else to go on, that CLI's folder
    (:func:`live_cli_folder`; ``current.basis`` is then ``live_cli``).
    Raises :class:`SessionNotFound` when ``current_id`` is not in state.db.
    Home has no scope: a session without a workspace searches nothing.
    """
    entry = membership.members(conn, db_key, attributor)
    current = session_info(conn, current_id, known=entry.workspaces)
    if current is None:
        raise SessionNotFound(f"session not found in state.db: {current_id}")
    live = live_cli_folder(current)
    if live:
        current = dataclasses.replace(current, cwd=live, basis="live_cli")
    project = attributor.project_of(current)
    identity = attribution.project_identity(project)
    if identity[0] == "home":
        return Scope(current, project, (), 0)
    excluded = lineage_ids(conn, current_id)
    others = tuple(sorted(sid for sid in entry.by_identity.get(identity, ()) if sid not in excluded))
    return Scope(current, project, others, len(others) + 1, sum(entry.messages.get(sid, 0) for sid in others))


def compute_scope_for_cwd(conn: sqlite3.Connection, attributor: Attributor, cwd: str, *, db_key: str) -> Scope:
    """Every searchable session of the project that folder ``cwd`` belongs to.

    The sibling of :func:`compute_scope` for callers with no session id (a
    slash command typed by the human, the command line): the folder is
    attributed like a session recorded there, and since there is no current
    conversation nothing is excluded. ``Scope.current`` is ``None``. A folder
    in no project (Home) has no scope. Never raises for the folder itself (a
    missing folder is attributed by its path alone).
    """
    project = attributor.project_for_workspace(cwd or None, None)
    identity = attribution.project_identity(project)
    if identity[0] == "home":
        return Scope(None, project, (), 0)
    entry = membership.members(conn, db_key, attributor)
    members = tuple(sorted(entry.by_identity.get(identity, ())))
    return Scope(None, project, members, len(members), sum(entry.messages.get(sid, 0) for sid in members))


@dataclass(frozen=True)
class ProjectCount:
    """One project as attribution sees it, with its searchable sessions."""

    project: dict[str, str]  # one of attribution's three shapes
    sessions: int  # searchable sessions (archived and delegate/tool runs left out)
    messages: int  # their message_count, summed
    workspaces: tuple[str, ...]  # distinct recorded working folders, sorted


_SEARCHABLE_COUNT_SQL = f"SELECT count(*), COALESCE(sum(message_count), 0) FROM sessions WHERE archived = 0 AND NOT {_cols(_DELEGATE, '')}"


def project_census(conn: sqlite3.Connection, attributor: Attributor) -> list[ProjectCount]:
    """Every project that holds searchable sessions, and Home, with counts.

    Attribution is the one the search uses (``Attributor.project_for_workspace``
    over each distinct effective workspace), read fresh rather than from the
    membership cache. Home counts the searchable sessions in no project,
    including those with no recorded folder at all. Sorted by kind
    (explicit, auto, home), then name. Raises ``sqlite3.DatabaseError`` when
    state.db cannot be read.
    """
    counts: dict[tuple[str, str], list[Any]] = {}
    for (cwd, root), sessions in searchable_workspaces(conn).items():
        project = attributor.project_for_workspace(cwd, root)
        slot = counts.setdefault(attribution.project_identity(project), [project, 0, 0, set()])
        slot[1] += len(sessions)
        slot[2] += sum(messages for _, messages in sessions)
        if cwd:
            slot[3].add(cwd)
    total_sessions, total_messages = conn.execute(_SEARCHABLE_COUNT_SQL).fetchone()
    placed = sum(slot[1] for key, slot in counts.items() if key[0] != "home")
    placed_messages = sum(slot[2] for key, slot in counts.items() if key[0] != "home")
    home = counts.pop(("home", ""), [dict(attribution.HOME), 0, 0, set()])
    home[1], home[2] = int(total_sessions) - placed, int(total_messages) - placed_messages
    order = {"explicit": 0, "auto": 1}
    rows = sorted(counts.values(), key=lambda s: (order.get(s[0].get("kind", ""), 2), str(s[0].get("name", "")).casefold()))
    return [ProjectCount(p, n, m, tuple(sorted(w))) for p, n, m, w in [*rows, home]]


def state_counts(conn: sqlite3.Connection) -> tuple[int, int]:
    """``(sessions, messages)`` rows in state.db, whatever their kind."""
    sessions = int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0])
    messages = int(conn.execute("SELECT count(*) FROM messages").fetchone()[0])
    return sessions, messages


# ---------------------------------------------------------------------------
# Message queries (all bounded, all parameters)
# ---------------------------------------------------------------------------

LIVE_SQL = "(m.active = 1 OR m.compacted = 1)"
SCOPE_SQL = "m.session_id IN (SELECT value FROM json_each(?))"


def max_message_id(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT max(id) FROM messages").fetchone()
    return int(row[0] or 0)


_INDEXABLE = f"{SCOPE_SQL} AND {LIVE_SQL} AND m.role IN ('user', 'assistant') AND TRIM(COALESCE(m.content, '')) != ''"


def count_indexable(conn: sqlite3.Connection, scope: Scope) -> int:
    """Live user/assistant messages of the scope (what the vector index should hold)."""
    return int(conn.execute(f"SELECT count(*) FROM messages m WHERE {_INDEXABLE}", (scope.ids_json,)).fetchone()[0])


def count_unindexed(conn: sqlite3.Connection, scope: Scope, indexed: Container[int]) -> tuple[int, int]:
    """``(live user/assistant messages of the scope, how many of them are not in ``indexed``)``.

    Checked id by id, not by subtracting counts: vectors of deleted or rewound
    messages stay in the index until a search or the index command drops
    them, and would otherwise hide as many new messages.
    """
    total = missing = 0
    for (mid,) in conn.execute(f"SELECT m.id FROM messages m WHERE {_INDEXABLE}", (scope.ids_json,)):
        total += 1
        missing += mid not in indexed
    return total, missing


def unindexed_messages(
    conn: sqlite3.Connection, scope: Scope, indexed: Container[int], limit: int, *, above: int = 0
) -> list[tuple[int, str, str]]:
    """Live user/assistant messages of the scope not yet in the vector index.

    Newest first, at most ``limit``, only ids greater than ``above``:
    ``(id, session id, text)``. Message ids are immutable and increasing in
    Hermes, so "indexed" is decided by id and new messages sit above a
    watermark.
    """
    out: list[tuple[int, str, str]] = []
    # Above a watermark the id range is small: keep SQLite on it (unary +)
    # rather than on the per-session index.
    where = _INDEXABLE.replace("m.session_id IN", "+m.session_id IN") if above else _INDEXABLE
    sql = f"""
        SELECT m.id, m.session_id, m.content FROM messages m
        WHERE {where} AND m.id < ? AND m.id > {int(above)} ORDER BY m.id DESC LIMIT 500
    """
    below = max_message_id(conn) + 1
    while len(out) < limit:
        rows = conn.execute(sql, (scope.ids_json, below)).fetchall()
        if not rows:
            break
        for mid, sid, content in rows:
            if int(mid) not in indexed:
                text = _message_text(content, None, None)
                if text.strip():
                    out.append((int(mid), sid, text))
        below = int(rows[-1][0])
    return out[:limit]


def live_message_ids(conn: sqlite3.Connection, ids: Sequence[int]) -> set[int]:
    """Which of ``ids`` are still live, searchable messages (not deleted or rewound)."""
    roles_sql, roles = Filters().sql()  # the searchable roles, as every search reads them
    rows = conn.execute(
        f"SELECT m.id FROM messages m WHERE m.id IN (SELECT value FROM json_each(?)) AND {LIVE_SQL} AND {roles_sql}",
        (json.dumps([int(i) for i in ids]), *roles),
    )
    return {int(r[0]) for r in rows}


def recall_questions(conn: sqlite3.Connection, ids: Sequence[int]) -> set[int]:
    """Which of ``ids`` are user turns answered by a recall: the session's next message calls a recall tool.

    Such a turn is an earlier question, not project history: the searches
    rank it last (a verbatim earlier question would otherwise outrank its
    own answer).
    """
    if not ids:
        return set()
    sql = """
        SELECT m.id, (SELECT n.tool_calls FROM messages n
                      WHERE n.session_id = m.session_id AND n.timestamp >= m.timestamp AND n.id != m.id
                      ORDER BY n.timestamp, n.id LIMIT 1)
        FROM messages m WHERE m.id IN (SELECT value FROM json_each(?)) AND m.role = 'user'
    """  # in timestamp order: Hermes' (session_id, timestamp) index answers it with one seek
    out = set()
    for mid, next_calls in conn.execute(sql, (json.dumps([int(i) for i in ids]),)):
        if next_calls and _calls_recall(next_calls):
            out.add(int(mid))
    return out


def _calls_recall(tool_calls: Any) -> bool:
    calls = _parsed_calls(tool_calls)
    return bool(calls) and any(_call_name(c) in RECALL_TOOLS for c in calls)


def _parsed_calls(tool_calls: Any) -> list[Any] | None:
    """``tool_calls`` JSON as a list when it may call a recall tool; ``None`` when it cannot or is not a list."""
    raw = tool_calls if isinstance(tool_calls, str) else str(tool_calls)
    if not any(name in raw for name in RECALL_TOOLS):
        return None
    try:
        calls = json.loads(raw)
    except ValueError:
        return None
    return calls if isinstance(calls, list) else None


@dataclass(frozen=True)
class MessageRow:
    id: int
    session_id: str
    role: str
    text: str
    timestamp: float | None


def fetch_messages(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, MessageRow]:
    """Message rows by id; ``text`` is the searchable text (content, tool name, tool call JSON)."""
    if not ids:
        return {}
    sql = """
        SELECT m.id, m.session_id, m.role, m.content, m.tool_name, m.tool_calls, m.timestamp
        FROM messages m WHERE m.id IN (SELECT value FROM json_each(?))
    """
    out: dict[int, MessageRow] = {}
    for mid, sid, role, content, tool_name, tool_calls, ts in conn.execute(sql, (json.dumps(list(ids)),)):
        out[int(mid)] = MessageRow(int(mid), sid, role or "", _message_text(content, tool_name, tool_calls), ts)
    return out


_CONTENT_JSON_PREFIX = "\x00json:"


def _message_text(content: Any, tool_name: Any, tool_calls: Any) -> str:
    """The searchable text of a message row: content, tool name and tool calls, as Hermes indexes it.

    Calls of the recall tools (:data:`RECALL_TOOLS`) are left out, and so is
    the whole text of a recall tool's answer: they repeat earlier queries and
    results, not project history.
    """
    if tool_name in RECALL_TOOLS:
        return ""
    text = content if isinstance(content, str) else ("" if content is None else str(content))
    if text.startswith(_CONTENT_JSON_PREFIX):
        text = _flatten_multimodal(text[len(_CONTENT_JSON_PREFIX):])
    calls = _without_recall_calls(tool_calls) if tool_calls else ""
    extra = " ".join(str(x) for x in (tool_name, calls) if x)
    return f"{text} {extra}".strip() if extra else text


def _without_recall_calls(tool_calls: Any) -> str:
    """``tool_calls`` JSON with the recall tools' calls removed ("" when none is left)."""
    calls = _parsed_calls(tool_calls)
    if calls is None:
        return tool_calls if isinstance(tool_calls, str) else str(tool_calls)
    kept = [c for c in calls if _call_name(c) not in RECALL_TOOLS]
    if len(kept) == len(calls):
        return tool_calls if isinstance(tool_calls, str) else str(tool_calls)
    return json.dumps(kept, ensure_ascii=False) if kept else ""


def _call_name(call: Any) -> str:
    if not isinstance(call, dict):
        return ""
    function = call.get("function")
    name = function.get("name") if isinstance(function, dict) else call.get("name")
    return name if isinstance(name, str) else ""


def _flatten_multimodal(raw: str) -> str:
    try:
        parts = json.loads(raw)
    except ValueError:
        return raw
    if isinstance(parts, list):
        texts = [p.get("text", "") for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return " ".join(t for t in texts if t)
    return raw


def messages_around(
    conn: sqlite3.Connection, session_id: str, message_id: int | None, before: int, after: int
) -> list[MessageRow]:
    """Live messages of a session around ``message_id``, in order: ``before`` earlier, the message, ``after`` later.

    With ``message_id`` ``None``, the session's first ``after + 1`` messages.
    Rewound messages are skipped; the text is the searchable text
    (:func:`fetch_messages`: recall tools' calls and answers left out).
    """
    base = f"SELECT m.id FROM messages m WHERE m.session_id = ? AND {LIVE_SQL}"
    if message_id is None:
        ids = [r[0] for r in conn.execute(f"{base} ORDER BY m.id LIMIT ?", (session_id, after + 1))]
    else:
        earlier = [r[0] for r in conn.execute(f"{base} AND m.id < ? ORDER BY m.id DESC LIMIT ?", (session_id, message_id, before))]
        later = [r[0] for r in conn.execute(f"{base} AND m.id >= ? ORDER BY m.id LIMIT ?", (session_id, message_id, after + 1))]
        ids = [*reversed(earlier), *later]
    rows = fetch_messages(conn, ids)
    return [rows[i] for i in ids if i in rows]


@dataclass(frozen=True)
class RecentSession:
    id: str
    title: str | None
    started_at: float | None
    last_active: float | None  # the newest message's time (the start when it has none)
    message_count: int
    source: str


def recent_sessions(
    conn: sqlite3.Connection, session_ids: Sequence[str], *, since: float | None, until: float | None, offset: int, limit: int
) -> list[RecentSession]:
    """Of ``session_ids``, the ``limit`` most recently active from ``offset`` on, newest first.

    A session is active in ``[since, until)`` when it started before
    ``until`` and its last message is at or after ``since``.
    """
    sql = f"""
        SELECT s.id, s.title, s.started_at, COALESCE((SELECT max(m.timestamp) FROM messages m WHERE m.session_id = s.id
                                                      AND {LIVE_SQL}), s.started_at) AS last_active,
               s.message_count, COALESCE(s.source, '')
        FROM sessions s WHERE s.id IN (SELECT value FROM json_each(?))
          AND (? IS NULL OR s.started_at < ?)
        ORDER BY last_active DESC, s.id
    """
    out = []
    for r in conn.execute(sql, (json.dumps(list(session_ids)), until, until)):
        if since is not None and (r[3] is None or r[3] < since):
            continue
        out.append(RecentSession(r[0], r[1], r[2], r[3], int(r[4] or 0), r[5]))
        if len(out) >= offset + limit:
            break
    return out[offset:]


def session_previews(conn: sqlite3.Connection, session_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Each session's first user message and last assistant message with text: ``{id: (first_user, last_assistant)}``."""
    out: dict[str, tuple[str, str]] = {}
    first_sql = f"""SELECT m.id FROM messages m WHERE m.session_id = ? AND m.role = 'user' AND {LIVE_SQL}
                    AND TRIM(COALESCE(m.content, '')) != '' ORDER BY m.id LIMIT 1"""
    last_sql = f"""SELECT m.id FROM messages m WHERE m.session_id = ? AND m.role = 'assistant' AND {LIVE_SQL}
                   AND TRIM(COALESCE(m.content, '')) != '' ORDER BY m.id DESC LIMIT 1"""
    for sid in session_ids:
        first = conn.execute(first_sql, (sid,)).fetchone()
        last = conn.execute(last_sql, (sid,)).fetchone()
        rows = fetch_messages(conn, [r[0] for r in (first, last) if r])
        out[sid] = (rows[first[0]].text if first and first[0] in rows else "", rows[last[0]].text if last and last[0] in rows else "")
    return out


# ---------------------------------------------------------------------------
# The move (the only write to Hermes data)
# ---------------------------------------------------------------------------


def open_session_db(home: Path) -> Any:
    """Hermes' own read-write ``SessionDB`` on ``<home>/state.db`` (never created here)."""
    path = state_db_path(home)
    if not path.is_file():
        raise NoStateDB("session database not found", path=str(path))
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
    project: dict[str, str]  # attribution after the move, as search will see it
    target: dict[str, Any]  # {"kind": "home"} or the project record moved into
    cwd: str
    git_branch: str
    git_repo_root: str
    session_ids: tuple[str, ...]
    warnings: tuple[str, ...] = ()


def _home_cwd() -> str:
    return os.path.expanduser("~")


def resolve_move_target(home: Path, token: str) -> tuple[dict[str, Any], str]:
    """``(target record, folder)`` for a move; ``""`` means Home.

    Raises :class:`ProjectNotFound`, :class:`MoveRefused` (archived project,
    project without folders) or :class:`FolderNotFound`.
    """
    if not token.strip():
        return dict(attribution.HOME), _home_cwd()
    listing = load_projects(home)
    project = attribution.find_project(listing.projects, token)
    if project is None:
        if listing.available:
            raise ProjectNotFound(f"project not found: {token}")
        why = listing.note or "this profile has no projects.db: create a project with `hermes project create` first"
        raise ProjectNotFound(f"project not found: {token} ({why})")
    if project.get("archived"):
        raise MoveRefused(f"project is archived: {project['name']} (restore it with `hermes project restore` first)")
    folder = attribution.primary_folder(project)
    if not folder:
        raise FolderNotFound(f"project has no folder: {project['name']}")
    folder = os.path.expanduser(folder)
    if not os.path.isdir(folder):
        raise FolderNotFound(f"project folder not found: {folder}")
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
    conn = open_state_db(home)
    try:
        current = session_info(conn, session_id)
    finally:
        conn.close()
    if current is None:
        raise SessionNotFound(f"session not found in state.db: {session_id}")
    if current.is_delegate:
        raise MoveRefused("subagent sessions cannot be moved; ask in the parent conversation")
    target, folder = resolve_move_target(home, token)
    git.invalidate()  # the target may have become (or stopped being) a repo
    branch, root = git.branch(folder), git.common_root(folder)
    warnings: list[str] = []
    db = open_session_db(home)
    try:
        lineage = [sid for sid in (db.get_compression_lineage(session_id) or []) if sid] or [session_id]
        if session_id not in lineage:
            lineage.append(session_id)
        membership.invalidate()
        for sid in lineage:
            db.update_session_cwd(sid, folder, branch or None, root or None)
            if not root and not clear_git_meta(db, sid):
                warnings.append("this Hermes has no SessionDB._execute_write: stale git fields were kept")
    finally:
        membership.invalidate()
        db.close()
    listing = load_projects(home)
    conn = open_state_db(home)
    try:
        moved = session_info(conn, session_id)
    finally:
        conn.close()
    after = attributor_for(home, listing.projects).project_of(moved) if moved else dict(attribution.HOME)
    wanted = target if target.get("kind") == "home" else {"kind": "explicit", "id": target["id"]}
    if attribution.project_identity(after) != attribution.project_identity(wanted):
        warnings.append(f"the folder {folder} is attributed to {after} (a nested project folder claims it)")
    return MoveOutcome(after, target, folder, branch, root, tuple(lineage), tuple(warnings))
