#!/usr/bin/env python3
"""Where a warmed process's searches spend their time: milliseconds per search in each phase.

Usage::

    python bench/search_phases.py HOME [--mode hybrid|keyword] [--questions 40] [--mmap BYTES]

``HOME`` is a profile ``bench/fresh_windows.py`` built (e.g.
``/tmp/phr-bench/windows/local-1m/home``). The process loads Hermes' tools (and
so the plugin from the profile), asks ``--questions`` different questions
(``semantic_cost.varied_queries``) once to warm up, then again, timing each
phase of the second pass. A phase that ran in the vector leg's thread is marked
``[thread]``; phases nest (``_semantic_leg_apart`` holds ``VectorIndex.search``).
``--mmap`` sets ``PRAGMA mmap_size`` on every state.db connection (an
experiment: the plugin does not).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

PHASES = [("search", "_semantic_leg_apart"), ("lexical", "search"), ("workspace", "compute_scope"),
          ("session_rows", "session_details"), ("store", "fetch_messages"), ("search", "make_snippet"),
          ("store", "recall_echoes"), ("store", "recall_questions"), ("vector_leg", "confirmed"),
          ("index_check", "lacking"), ("index_check", "agree"), ("search", "fuse")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("home", type=Path)
    ap.add_argument("--mode", choices=("keyword", "hybrid"), default="hybrid")
    ap.add_argument("--questions", type=int, default=40)
    ap.add_argument("--mmap", type=int, default=0)
    args = ap.parse_args()
    os.environ["HERMES_HOME"] = str(args.home)
    import model_tools  # Hermes' plugin discovery loads the plugin from the profile
    import semantic_cost

    current = json.loads((args.home.parent / "ready.json").read_text())["current"]
    package = next(n for n in sys.modules if n.startswith("hermes_plugins") and n.endswith("project_history_recall"))
    spent: dict[str, float] = defaultdict(float)

    def timed(real: Any, label: str) -> Any:
        def run(*a: Any, **k: Any) -> Any:
            started = time.perf_counter()
            try:
                return real(*a, **k)
            finally:
                where = "" if threading.current_thread() is threading.main_thread() else " [thread]"
                spent[label + where] += time.perf_counter() - started
        return run

    for module_name, name in PHASES:
        module = importlib.import_module(f"{package}.{module_name}")
        setattr(module, name, timed(getattr(module, name), f"{module_name}.{name}"))
    vector_index = importlib.import_module(f"{package}.vector_index").VectorIndex
    vector_index.search = timed(vector_index.search, "VectorIndex.search")
    if args.mmap:
        store = importlib.import_module(f"{package}.store")
        connect = store.connect_ro

        def connect_ro(path: Path) -> Any:
            conn = connect(path)
            conn.execute(f"PRAGMA mmap_size = {args.mmap}")
            return conn

        store.connect_ro = connect_ro
    questions = semantic_cost.varied_queries(args.questions, seed=11)

    def ask(query: str) -> float:
        started = time.perf_counter()
        raw = model_tools.handle_function_call("project_history_search", {"query": query, "mode": args.mode}, "bench",
                                               tool_call_id="c1", session_id=current)
        if "results" not in json.loads(raw):
            raise SystemExit(f"{query!r}: {raw[:500]}")
        return (time.perf_counter() - started) * 1000

    for query in questions:
        ask(query)
    spent.clear()
    ms = sorted(ask(query) for query in questions)
    print(f"{args.mode}, {len(questions)} questions: p50 {statistics.median(ms):.0f} ms, "
          f"p95 {ms[max(0, int(len(ms) * 0.95) - 1)]:.0f} ms; load {Path('/proc/loadavg').read_text().split()[:3]}")
    for label, seconds in sorted(spent.items(), key=lambda kv: -kv[1]):
        print(f"  {label:40s} {seconds * 1000 / len(questions):7.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
