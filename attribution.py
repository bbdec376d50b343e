"""Project attribution: which project a session belongs to (the rule in full: ``docs/attribution.md``).

Pure functions over plain data. Nothing here reads files, probes git or
touches SQLite; ``session_rows``, ``store`` and ``workspace`` gather the inputs
(``sessions`` rows, git roots, the projects of ``projects.db``) and call in here.

A session belongs to exactly one of three kinds of :class:`Project`:

* ``explicit`` (``id``, ``name``) -- a folder of an explicit project
  (``projects.db``) is the longest ancestor of the session's ``cwd`` or of its
  git repo root;
* ``auto`` (``key``, ``root``, ``name``) -- otherwise, the git repo root
  (linked worktrees are already folded into their main repo by the caller);
* ``home`` -- neither.

Path comparison is segment-wise (``/a/alpha`` never contains ``/a/alphabet``),
ignores trailing separators and ``.`` segments, resolves ``..`` lexically, and
compares Windows-looking paths (``C:\\x``, ``\\\\server\\share``) case-folded with
either separator. POSIX paths stay case-sensitive, as on the desktop tree.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple


@dataclass(frozen=True)
class Project:
    """The project a session belongs to; :meth:`to_json` is its shape in answers.

    ``id``: the projects.db id (explicit only). ``key``: the git root as
    compared (:func:`path_key`, auto only). ``root``: the git root as recorded
    (auto only). ``name``: the project's name, or the root's last folder.
    Two sessions share a project iff their :attr:`identity` is equal (a renamed explicit project is the same one).
    """

    kind: str = "home"
    id: str = ""
    name: str = ""
    key: str = ""
    root: str = ""

    @property
    def identity(self) -> tuple[str, str]:
        """A hashable key: ``("explicit", id)``, ``("auto", key)`` or ``("home", "")``."""
        if self.kind == "explicit":
            return ("explicit", self.id)
        if self.kind == "auto":
            return ("auto", self.key)
        return ("home", "")

    @property
    def scope_key(self) -> str:
        """The project as one string (``auto:/src/app``, ``explicit:p_abc``, ``home:``): what consent and caches key by."""
        kind, ident = self.identity
        return f"{kind}:{ident}"

    @property
    def is_home(self) -> bool:
        return self.kind not in ("explicit", "auto")

    def to_json(self) -> dict[str, str]:
        """The project in answers: ``{kind, id, name}``, ``{kind, key, root, name}`` or ``{kind}``."""
        if self.kind == "explicit":
            return {"kind": "explicit", "id": self.id, "name": self.name}
        if self.kind == "auto":
            return {"kind": "auto", "key": self.key, "root": self.root, "name": self.name}
        return {"kind": "home"}


HOME = Project()


@dataclass(frozen=True)
class ProjectFolder:
    """One folder of an explicit project, as projects.db's ``project_folders`` holds it."""

    path: str
    is_primary: bool = False


@dataclass(frozen=True)
class ProjectRecord:
    """One explicit project as projects.db holds it (what attribution matches folders against)."""

    id: str
    name: str
    slug: str = ""
    primary_path: str | None = None
    archived: bool = False
    folders: tuple[ProjectFolder, ...] = ()

#: A ``/new`` session starts within this many seconds of the session it ended.
NEW_SESSION_WINDOW_S = 10.0


class SessionRow(NamedTuple):
    """What attribution reads of one ``sessions`` row (blank strings mean none); a census builds one per session."""

    id: str
    parent: str = ""
    cwd: str = ""
    root: str = ""
    source: str = ""
    started_at: float | None = None
    ended_at: float | None = None
    end_reason: str = ""


class Workspace(NamedTuple):
    """A session's effective working folder and git root, and where they come from.

    ``basis``: ``recorded`` (its own row), ``parent`` (inherited along
    ``parent_session_id``: compression continuations, branches, delegates)
    or ``previous_session`` (a CLI session started by ``/new``, which Hermes
    records no folder for: :func:`new_session_predecessors`). ``via``: the
    session it was taken from.
    """

    cwd: str | None
    root: str | None
    basis: str = "recorded"
    via: str | None = None


def new_session_predecessors(rows: Iterable[SessionRow]) -> dict[str, str]:
    """For each CLI session started by ``/new``, the session ``/new`` ended just before it.

    New sessions (no folder, no parent) are matched in the order they started,
    each to the one session of the same source, not yet taken, that ``/new``
    ended (``end_reason='new_session'``) at most ``NEW_SESSION_WINDOW_S`` before.
    When two are free (two CLI windows at once), the new session is left out:
    guessing could file it under the wrong project.
    """
    rows = list(rows)
    ended = sorted((r.ended_at, r.id) for r in rows if r.end_reason == "new_session" and r.ended_at is not None
                   and r.source == "cli")
    times = [e[0] for e in ended]
    # untaken[i]: an index at or after i towards the first ended session not yet taken (pointers halved as they are
    # followed): a burst of /new reads each taken one about once, not once for every session after it
    untaken = list(range(len(ended) + 1))

    def first_free(i: int) -> int:
        while untaken[i] != i:
            untaken[i] = i = untaken[untaken[i]]
        return i

    out: dict[str, str] = {}
    fresh = [r for r in rows if not (r.cwd or r.root or r.parent) and r.source == "cli" and r.started_at is not None]
    for row in sorted(fresh, key=lambda r: (r.started_at, r.id)):
        start = float(row.started_at or 0.0)
        i, hi = first_free(bisect.bisect_left(times, start - NEW_SESSION_WINDOW_S)), bisect.bisect_right(times, start)
        free: list[int] = []
        while i < hi and len(free) < 2:  # two free are enough to leave the session out
            if ended[i][1] != row.id:
                free.append(i)
            i = first_free(i + 1)
        if len(free) == 1:
            out[row.id] = ended[free[0]][1]
            untaken[free[0]] = free[0] + 1
    return out


def effective_workspaces(
    rows: Mapping[str, SessionRow], *, known: Mapping[str, Workspace | None] | None = None
) -> dict[str, Workspace]:
    """The effective workspace of every session of ``rows`` (sessions with none at all are left out).

    A row's own ``cwd`` / git root first; else its parent's (along
    ``parent_session_id``); else, for a ``/new`` session, its predecessor's
    (:func:`new_session_predecessors`). ``known``: workspaces already
    resolved, ``None`` for a session known to have none (a walk stops there;
    the rows still decide ``/new`` matching). Cycles and dangling links end a
    walk with no workspace. Linear in the rows: each session is walked through
    at most once, whether its walk finds a workspace or not.
    """
    previous = new_session_predecessors(rows.values())
    known = known or {}
    out: dict[str, Workspace] = {}  # not a copy of ``known``: it may hold every session of state.db
    none: set[str] = set()  # sessions found to have no workspace
    folders: dict[tuple[str | None, str | None], Workspace] = {}  # one object for a folder's sessions, not one each

    def recorded(row: SessionRow) -> Workspace:
        key = (row.cwd or None, row.root or None)
        return folders.get(key) or folders.setdefault(key, Workspace(*key))

    for start in rows:
        if start in out or start in none:
            continue
        if start in known:
            held = known[start]
            if held is not None:
                out[start] = held
            continue
        own = rows[start]
        if own.cwd or own.root:  # most sessions: a folder of their own, no walk
            out[start] = recorded(own)
            continue
        path: list[tuple[str, str]] = []  # (session, how it links to the next)
        seen: set[str] = set()
        sid: str | None = start
        found: Workspace | None = None
        while sid is not None and sid not in seen:
            seen.add(sid)
            if sid in out:
                found = out[sid]
                break
            if sid in none:
                break
            if sid in known:
                found = known[sid]
                break
            row = rows.get(sid)
            if row is None:
                break
            if row.cwd or row.root:
                found = out[sid] = recorded(row)
                break
            if row.parent:
                path.append((sid, "parent"))
                sid = row.parent
            elif sid in previous:
                path.append((sid, "previous_session"))
                sid = previous[sid]
            else:
                break
        if found is None:  # every session of this walk would walk the same way: none of them has one
            none.update(seen)
            continue
        # Every session on the walk takes the workspace, named by its own link.
        via = sid
        for session, how in reversed(path):
            out[session] = Workspace(found.cwd, found.root, how, via)
            via = session
    return out

# A cron run's session id: ``cron_<job id>_<YYYYmmdd_HHMMSS>`` (Hermes' cron scheduler).
_CRON_RUN = re.compile(r"cron_(.+)_\d{8}_\d{6}")


def cron_folder(folders: Mapping[str, str], session_id: object) -> str | None:
    """The folder of the job (``folders``: job id -> its folder) that ran the cron session ``session_id``; ``None``
    when it names none."""
    found = _CRON_RUN.fullmatch(session_id) if isinstance(session_id, str) else None
    return folders.get(found.group(1)) if found else None


# The working directory in the environment block of the system prompt Hermes writes for a session on a local terminal
# (``prompt_builder.build_environment_hints``): two lines of their own.
_PROMPT_FOLDER = re.compile(r"^User home directory: [^\n]*\nCurrent working directory: ([^\n]+)$", re.MULTILINE)


def prompt_folder(prompt: object) -> str | None:
    """The working directory the system prompt ``prompt`` names: its first environment block, which Hermes writes
    before the project's context files (AGENTS.md, a repository's to write) and memory (``agent/system_prompt.py``);
    ``None`` when none."""
    found = _PROMPT_FOLDER.search(prompt) if isinstance(prompt, str) else None
    return (found.group(1).strip() or None) if found else None


#: Drive-letter and UNC paths, which compare case-insensitively.
_WINDOWS_PATH = re.compile(r"^(?:[A-Za-z]:(?:[\\/]|$)|\\\\|//[^/])")


def path_segments(path: str | None) -> tuple[str, ...]:
    """``path`` as comparable segments, ``()`` when empty; Windows paths case-folded.

    The first segment marks the root (``"/"`` POSIX, ``"c:"`` a drive, ``"//"``
    UNC, ``"."`` relative), so a relative path never matches an absolute one.
    """
    if not path or not path.strip():
        return ()
    raw = path.strip()
    windows = bool(_WINDOWS_PATH.match(raw))
    if windows:
        raw = raw.replace("\\", "/").casefold()
    if raw.startswith("//"):
        head, rest = "//", raw[2:]
    elif windows:
        drive, _, rest = raw.partition("/")
        head = drive
    elif raw.startswith("/"):
        head, rest = "/", raw[1:]
    else:
        head, rest = ".", raw
    parts: list[str] = []
    for part in rest.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return (head, *parts)


def path_key(path: str | None) -> str:
    """A canonical string for ``path``: equal keys mean the same folder."""
    segments = path_segments(path)
    if not segments:
        return ""
    head, rest = segments[0], segments[1:]
    if head == "/":
        return "/" + "/".join(rest)
    if head == "//":
        return "//" + "/".join(rest)
    if head == ".":
        return "/".join(rest)
    return head + "/" + "/".join(rest)


def is_within(path: str | None, folder: str | None) -> bool:
    """True when ``folder`` is ``path`` or one of its ancestors (segment-wise)."""
    inner, outer = path_segments(path), path_segments(folder)
    return bool(outer) and inner[: len(outer)] == outer


def project_folders(project: ProjectRecord) -> list[str]:
    """Every folder path of a project: its ``folders`` plus ``primary_path``."""
    paths: list[str] = []
    for folder in project.folders:
        if folder.path and folder.path not in paths:
            paths.append(folder.path)
    if project.primary_path and project.primary_path not in paths:
        paths.append(project.primary_path)
    return paths


def primary_folder(project: ProjectRecord) -> str | None:
    """The folder a session moved into ``project`` gets as its ``cwd``.

    Mirrors Hermes' ``project_tools._primary_path``: ``primary_path``, else
    the folder flagged primary, else the first folder, else ``None``.
    """
    if project.primary_path:
        return project.primary_path
    for folder in project.folders:
        if folder.is_primary:
            return folder.path
    return project.folders[0].path if project.folders else None


#: The folders of projects, as :func:`path_segments`: each with its rank (projects in order, then their folders) and
#: the first project that has it (:func:`folder_index`).
FolderIndex = dict[tuple[str, ...], tuple[int, ProjectRecord]]


def folder_index(projects: Sequence[ProjectRecord]) -> FolderIndex:
    """Every folder of the projects not archived, for :func:`match_explicit`: built once for many matches, so that
    each costs the depth of its paths, not the number of projects."""
    index: FolderIndex = {}
    rank = 0
    for project in projects:
        if project.archived:
            continue
        for folder in project_folders(project):
            segments = path_segments(folder)
            if segments:
                index.setdefault(segments, (rank, project))
            rank += 1
    return index


def match_explicit(candidates: Iterable[str | None], projects: Sequence[ProjectRecord] | FolderIndex) -> ProjectRecord | None:
    """The project owning the longest folder that contains any candidate path (``projects``, or their
    :func:`folder_index`).

    Archived projects never match. Ties (the same folder in two projects, or folders of one length holding two
    candidates) go to the earlier project in ``projects``, then its earlier folder. Returns the project or ``None``.
    """
    index = projects if isinstance(projects, dict) else folder_index(projects)
    best: tuple[tuple[int, int], ProjectRecord] | None = None
    for candidate in candidates:
        target = path_segments(candidate)
        for length in range(len(target), 0, -1):  # the candidate's longest owned ancestor
            hit = index.get(target[:length])
            if hit is not None:
                if best is None or (length, -hit[0]) > best[0]:
                    best = ((length, -hit[0]), hit[1])
                break
    return None if best is None else best[1]


def resolve_project(
    session_row: Mapping[str, Any],
    projects: Sequence[ProjectRecord] | FolderIndex,
    *,
    junk_roots: Iterable[str] = (),
    junk_trees: Iterable[str] = (),
) -> Project:
    """Attribute one session to a project: a :class:`Project`; never raises on missing or empty fields.

    ``session_row`` needs ``cwd`` and ``git_repo_root`` (either may be empty,
    already inherited and with worktrees folded by the caller) and may give
    ``also``: the same folders with symlinks resolved, which an explicit
    project's folder may contain. As on the desktop
    tree, a git root equal to one of ``junk_roots`` (the user's home) or inside
    one of ``junk_trees`` (HERMES_HOME) is never an auto project; explicit
    projects there are still honoured.
    """
    cwd = (session_row.get("cwd") or "").strip()
    root = (session_row.get("git_repo_root") or "").strip()
    project = match_explicit([cwd, root, *(session_row.get("also") or ())], projects)
    if project is not None:
        return Project("explicit", id=project.id, name=project.name)
    if root and not is_junk_root(root, junk_roots, junk_trees):
        return Project("auto", key=path_key(root), root=root, name=_basename(root))
    return HOME


def is_junk_root(root: str, junk_roots: Iterable[str] = (), junk_trees: Iterable[str] = ()) -> bool:
    """True when ``root`` is one of ``junk_roots`` or lies inside a ``junk_trees`` folder."""
    key = path_key(root)
    if not key:
        return True
    if any(key == path_key(j) for j in junk_roots if j):
        return True
    return any(is_within(root, t) for t in junk_trees if t)


def _basename(path: str) -> str:
    segments = path_segments(path)
    return segments[-1] if len(segments) > 1 else path



def find_project(projects: Sequence[ProjectRecord], token: str) -> ProjectRecord | None:
    """A project by id, slug or name as Hermes' ``project_switch`` finds it; ``None`` for no match.

    Exact id / slug / name first, then case-insensitive slug / name, each
    pass in ``projects`` order (Hermes': creation time, then insertion), so an
    ambiguous token picks the same project as Hermes.
    """
    token = (token or "").strip()
    if not token:
        return None
    for project in projects:
        if token in (project.id, project.slug, project.name):
            return project
    low = token.lower()
    for project in projects:
        if low in (project.slug.lower(), project.name.lower()):
            return project
    return None
