"""Counting work, not time: what a call costs in Python lines of the plugin and in SQLite's VM steps.

A test that guards a cost measures it twice, at n and at 4n, and compares the
counts: code linear in n gives about 4 (less when a fixed part dominates),
quadratic code about 16. Counts do not depend on the machine's speed or load.

* Python: every line the plugin's own modules execute (``sys.settrace``, in this
  thread and in the threads started inside the block: a hybrid search's vector
  leg runs in a thread of its own).
* SQLite: the virtual machine instructions of every connection the plugin
  opens on state.db (``set_progress_handler``, counted in steps of 100).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

_STEP = 100  # SQLite instructions per progress callback


@dataclass
class Work:
    lines: int = 0  # lines of the plugin's modules executed
    sql: int = 0  # SQLite VM instructions, in hundreds

    @property
    def total(self) -> int:
        return self.lines + self.sql


@contextmanager
def counting(folders: list[Path], monkeypatch: pytest.MonkeyPatch, store: Any = None) -> Iterator[Work]:
    """Count the work done inside the block by code in ``folders`` (and, with ``store``, the plugin's store
    module, by the SQLite connections it opens). Yields the running :class:`Work`."""
    work = Work()
    roots = tuple(str(f.resolve()) + "/" for f in folders)

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            work.lines += 1
        return local

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "call" and frame.f_code.co_filename.startswith(roots):
            return local
        return None

    if store is not None:
        real = store.connect_ro

        def connect(path: Any) -> Any:
            conn = real(path)

            def step() -> int:
                work.sql += 1
                return 0

            conn.set_progress_handler(step, _STEP)
            return conn

        monkeypatch.setattr(store, "connect_ro", connect)
    previous, previous_threads = sys.gettrace(), threading.gettrace()
    sys.settrace(trace)
    threading.settrace(trace)  # threads started inside the block too: a hybrid search's vector leg runs in its own
    try:
        yield work
    finally:
        sys.settrace(previous)
        threading.settrace(previous_threads)  # type: ignore[arg-type]
        if store is not None:
            monkeypatch.setattr(store, "connect_ro", real)


def measure(folders: list[Path], monkeypatch: pytest.MonkeyPatch, call: Callable[[], T], store: Any = None) -> tuple[T, Work]:
    """``(call(), the work it did)``."""
    with counting(folders, monkeypatch, store) as work:
        out = call()
    return out, work


def plugin_dir() -> Path:
    """The folder the plugin's modules run from: Hermes' loader imports the plugin once per process, from the first
    World's copy (a later World's copy never runs: the lines of its files count nothing)."""
    import importlib

    return Path(importlib.import_module("hermes_plugins.project_history_recall.store").__file__ or "").resolve().parent


def linear(small: int, large: int, *, bound: float = 5.0) -> bool:
    """Whether going from n to 4n multiplied the work by at most ``bound`` (linear: about 4; quadratic: about 16)."""
    return large <= bound * max(small, 1)


def bytes_read() -> int:
    """Bytes this process has read from files so far (``rchar`` of ``/proc/self/io``: SQLite reads its pages with
    ``pread``, so the overflow pages of a long message count). Linux only."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")
