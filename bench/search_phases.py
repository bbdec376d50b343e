#!/usr/bin/env python3
"""Where a warmed process's searches spend their time: milliseconds per search in each phase.

Usage::

    python bench/search_phases.py HOME [--mode hybrid|keyword] [--questions 40] [--new] [--start-hook SECONDS]
                                       [--mmap BYTES] [--per-question]

``HOME`` is a profile ``bench/fresh_windows.py`` built (e.g.
``/tmp/phr-bench/windows/local-1m/home``). The process loads Hermes' tools (and
so the plugin from the profile), asks ``--questions`` different questions
(``semantic_cost.varied_queries``) once to warm up, then again, timing each
phase of the second pass. With ``--new`` the timed questions are new to the
process instead: it asks ``fresh_windows``' three warm-up questions ten times
over (as its warmed process does), then times ``--questions`` others, each
once: what a new question costs (term counts, first reads), not a repeated one.
``--start-hook SECONDS`` fires ``on_session_start`` first, as a Hermes conversation
does, and waits that long (the warm-up then has read the vectors and every
session's message id range; without it no search has the keyword leg's id
filter until one reads its scope's ranges itself). A phase that ran in the
vector leg's thread is marked ``[thread]``; phases nest (``_semantic_leg_apart``
holds ``VectorIndex.search``; ``lexical.search`` holds ``lexical._plan``, which
holds the term counts). Each phase: mean, p50 and p95 over the questions, ms.
``--mmap`` sets ``PRAGMA mmap_size`` on every state.db connection (an
experiment: the plugin does not).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import statistics
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

PHASES = [("search", "_semantic_leg_apart"), ("lexical", "search"), ("workspace", "compute_scope"),
          ("session_rows", "session_details"), ("session_rows", "recorded"), ("store", "fetch_messages"), ("search", "make_snippet"),
          ("store", "recall_echoes"), ("store", "recall_questions"), ("vector_leg", "confirmed"),
          ("index_check", "lacking"), ("index_check", "agree"), ("search", "fuse"),
          # the keyword leg's parts (names it calls through its module, or imported into it)
          ("lexical", "_plan"), ("lexical", "glued_rows"), ("lexical", "_scan"), ("lexical", "demote_earlier"),
          ("lexical", "score_texts"), ("fts", "doc_frequencies"), ("fts", "rows_up_to"), ("fts", "phrase_frequency"),
          ("fts", "session_candidates"), ("substring", "like_candidates"),
          ("fts", "doc_lengths"), ("embeddings", "LocalProvider.embed"), ("vector_scores", "two_pass"),
          # a conversation's sessions (compression chains, branch families), asked by both legs
          ("conversations", "conversation_roots"), ("conversations", "result_keys"), ("vector_scores", "best_of_sessions")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("home", type=Path)
    ap.add_argument("--mode", choices=("keyword", "hybrid"), default="hybrid")
    ap.add_argument("--questions", type=int, default=40)
    ap.add_argument("--new", action="store_true", help="time questions new to the process (see above)")
    ap.add_argument("--start-hook", type=float, default=0.0, metavar="SECONDS",
                    help="fire on_session_start first and wait this long")
    ap.add_argument("--mmap", type=int, default=0)
    ap.add_argument("--per-question", action="store_true", help="also print each question's time and its slowest phases")
    args = ap.parse_args()
    os.environ["HERMES_HOME"] = str(args.home)
    import model_tools  # Hermes' plugin discovery loads the plugin from the profile
    import semantic_cost
    from fresh_windows import WARM_QUESTIONS, DroppedHits

    dropped = DroppedHits()
    logging.getLogger().addHandler(dropped)

    current = json.loads((args.home.parent / "ready.json").read_text())["current"]
    package = next(n for n in sys.modules if n.startswith("hermes_plugins") and n.endswith("project_history_recall"))
    if args.start_hook:
        from hermes_cli.plugins import invoke_hook

        invoke_hook("on_session_start", session_id=current, model="bench", platform="cli")
        time.sleep(args.start_hook)
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
        owner: Any = importlib.import_module(f"{package}.{module_name}")
        *classes, attr = name.split(".")
        for class_name in classes:
            owner = getattr(owner, class_name)
        setattr(owner, attr, timed(getattr(owner, attr), f"{module_name}.{name}"))
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
    warm_up = questions
    if args.new:
        warm_up = WARM_QUESTIONS * 10
        questions = [q for q in questions if q not in WARM_QUESTIONS]

    def ask(query: str) -> float:
        started = time.perf_counter()
        raw = model_tools.handle_function_call("project_history_search", {"query": query, "mode": args.mode}, "bench",
                                               tool_call_id="c1", session_id=current)
        if "results" not in json.loads(raw):
            raise SystemExit(f"{query!r}: {raw[:500]}")
        dropped.check(repr(query), args.home)
        return (time.perf_counter() - started) * 1000

    for query in warm_up:
        ask(query)
    per_question: list[dict[str, float]] = []
    ms = []
    for query in questions:
        spent.clear()
        ms.append(ask(query))
        per_question.append(dict(spent))
    if args.per_question:
        for query, took, phases in zip(questions, ms, per_question, strict=True):
            top = sorted(phases.items(), key=lambda kv: -kv[1])[:6]
            print(f"{took:7.0f} {query[:60]!r:62s} " + ", ".join(f"{k}={v * 1000:.0f}" for k, v in top))
    ms.sort()
    print(f"{args.mode}, {len(questions)} {'new ' if args.new else ''}questions: p50 {statistics.median(ms):.0f} ms, "
          f"p95 {_common.percentile(ms, 95):.0f} ms; load {Path('/proc/loadavg').read_text().split()[:3]}")
    labels = sorted({k for d in per_question for k in d}, key=lambda k: -sum(d.get(k, 0.0) for d in per_question))
    print(f"  {'phase':40s} {'mean':>7s} {'p50':>7s} {'p95':>7s}")
    for label in labels:
        values = [d.get(label, 0.0) * 1000 for d in per_question]
        print(f"  {label:40s} {statistics.mean(values):7.1f} {statistics.median(values):7.1f} "
              f"{_common.percentile(values, 95):7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
