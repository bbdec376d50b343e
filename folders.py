"""The file system's and git's view of a folder: its repo's main root and branch (git asked with a timeout,
answers cached), the folder as symlinks resolve it, its nearest ancestor still on disk, and the worktrees a repo's
metadata still names. IO; process-wide data lives in ``state.py``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from . import state

logger = logging.getLogger(__name__)

GIT_TIMEOUT_S = 1.5
PROBE_THREADS = 4  # git probes a census runs at once (each is a short subprocess)
_NEGATIVE_TTL_S = 30.0


class _GitProbe:
    """``common_repo_root`` / ``branch`` for a folder: Hermes' ``tui_gateway.git_probe`` when importable (its
    cache is the desktop's), else ``git`` with the same timeout and worktree folding. A "no repo" answer expires
    after ``_NEGATIVE_TTL_S`` so a folder that becomes a repo is picked up.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roots: dict[str, tuple[str, float]] = state.cache("git_roots").data

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
        """The main repo root containing ``cwd`` ("" if none); for a folder that no longer exists, what this
        process knew of it, else its nearest existing ancestor's."""
        if not cwd:
            return ""
        now = time.monotonic()
        with self._lock:
            hit = self._known(cwd, now)
        if hit is not None:
            return hit
        folder = cwd if os.path.isdir(cwd) else nearest_existing_folder(cwd)
        root = self._probe_root(folder) if folder else ""
        with self._lock:
            self._roots[cwd] = (root, now + _NEGATIVE_TTL_S)
        return root

    def _known(self, cwd: str, now: float) -> str | None:
        """The root kept for ``cwd`` (a repo's for good, "" until the negative answer expires), or ``None``. Lock held."""
        hit = self._roots.get(cwd)
        return hit[0] if hit is not None and (hit[0] or hit[1] > now) else None

    def prefetch(self, cwds: Iterable[str]) -> None:
        """Probe the folders among ``cwds`` whose root is not known, ``PROBE_THREADS`` at a time, so that
        :meth:`common_root` answers from the cache. Where no thread can be started, nothing is probed here.
        """
        folders = {c for c in cwds if c}
        now = time.monotonic()
        with self._lock:
            wanted = sorted(c for c in folders if self._known(c, now) is None)
        if len(wanted) < 2:
            return
        try:
            with ThreadPoolExecutor(max_workers=min(PROBE_THREADS, len(wanted)),
                                    thread_name_prefix="project-history-recall-git") as pool:
                for _ in pool.map(self.common_root, wanted):
                    pass
        except RuntimeError:  # no more threads, or the interpreter is shutting down
            return

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


def worktree_gitdirs(root: str) -> list[str]:
    """The ``.git`` files of the worktrees repo ``root``'s git metadata still names, normalised: a worktree deleted
    without ``git worktree remove`` leaves ``<root>/.git/worktrees/<name>/gitdir``. ``[]`` when none can be read."""
    base = os.path.join(root, ".git", "worktrees")
    try:
        names = os.listdir(base)
    except OSError:
        return []
    found = []
    for name in names:
        try:
            with open(os.path.join(base, name, "gitdir"), encoding="utf-8", errors="replace") as f:
                found.append(os.path.normpath(f.read().strip()))
        except OSError:
            continue
    return found
