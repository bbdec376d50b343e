#!/usr/bin/env python3
"""A warmed process's searches, and what of them is the check for earlier recalls.

Usage::

    python bench/warm_searches.py HOME [--mode keyword|hybrid] [--questions 60] [--seed 11] [--code CHECKOUT]

``HOME`` is a profile ``bench/fresh_windows.py`` built (e.g.
``/tmp/phr-bench/windows/local-400k/home``: the large state.db, the plugin
dropped in, vectors for two projects); its ``plugins/project-history-recall``
holds the code measured: ``--code`` copies a checkout's plugin files there first
(an older commit's, from ``git worktree add``, to compare in turns).
The process loads Hermes' tools (and so the plugin), asks ``--questions``
different questions (``semantic_cost.varied_queries``) through
``model_tools.handle_function_call`` from the profile's current session, then
asks them all again and times that second pass: p50 / p95 per search, and the
mean time spent inside ``store.recall_echoes`` and ``store.recall_questions``
(the check that weighs earlier recalls down) per search.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("home", type=Path)
    ap.add_argument("--mode", choices=("keyword", "hybrid"), default="keyword")
    ap.add_argument("--questions", type=int, default=60)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--code", type=Path, help="a checkout whose plugin.yaml and *.py are copied into the profile first")
    args = ap.parse_args()
    if args.code:
        for path in [args.code / "plugin.yaml", *sorted(args.code.glob("*.py"))]:
            shutil.copy2(path, args.home / "plugins" / "project-history-recall" / path.name)
    os.environ["HERMES_HOME"] = str(args.home)
    import model_tools  # Hermes' plugin discovery loads the plugin from the profile
    import semantic_cost

    current = json.loads((args.home.parent / "ready.json").read_text())["current"]
    store = next(m for n, m in sys.modules.items() if n.endswith(".store") and hasattr(m, "recall_echoes"))
    spent = {"recall_echoes": 0.0, "recall_questions": 0.0}
    for name in spent:
        real = getattr(store, name)

        def timed(*a, _real=real, _name=name, **k):
            started = time.perf_counter()
            try:
                return _real(*a, **k)
            finally:
                spent[_name] += time.perf_counter() - started

        setattr(store, name, timed)
    questions = semantic_cost.varied_queries(args.questions, seed=args.seed)

    def ask(query: str) -> float:
        started = time.perf_counter()
        raw = model_tools.handle_function_call("project_history_search", {"query": query, "mode": args.mode}, "bench",
                                               tool_call_id="c1", session_id=current)
        elapsed = time.perf_counter() - started
        if "results" not in json.loads(raw):
            raise SystemExit(f"{query!r}: {raw[:500]}")
        return elapsed * 1000

    for query in questions:  # the first pass reads the pages and fills the caches
        ask(query)
    spent.update({k: 0.0 for k in spent})
    ms = sorted(ask(query) for query in questions)
    per = {k: round(v * 1000 / len(questions), 1) for k, v in spent.items()}
    print(json.dumps({"mode": args.mode, "questions": len(questions), "p50_ms": round(statistics.median(ms)),
                      "p95_ms": round(ms[max(0, int(len(ms) * 0.95) - 1)]), "per_search_ms": per,
                      "loadavg": Path("/proc/loadavg").read_text().split()[:3]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
