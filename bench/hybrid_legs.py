"""Where a hybrid search's time goes: each leg alone and beside the other, with and without the id filter.

On a home that ``semantic_cost.py`` left (its state.db and embeddings.db), in
one process, after the session-start warm-up: rounds of four searches from
the largest project's session, taken in turns so that the machine's drift
falls on every variant alike:

* ``keyword`` and ``hybrid`` searches, each with the keyword leg's message id
  filter (``fts.Near``, what the warm-up makes possible) and without it (the
  filter switched off in this process, as in a process with no warm-up);
* for each, how long the keyword leg took (``lexical.search``) and, in
  hybrid, the vector leg in its thread.

A keyword leg slower in hybrid than in keyword mode is waiting for the
interpreter lock the vector leg's thread holds. Prints one JSON line (ms).

Run: .venv/bin/python bench/hybrid_legs.py /tmp/phr-bench/phr-semcost-XXXX/home [--rounds 45] [--project atlas-api]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import load_plugin, summary_ms  # noqa: E402

QUERIES = ["how did we handle the flaky reconnect?", "websocket backoff jitter", "数据库迁移怎么做"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("home", type=Path, help="a home semantic_cost.py wrote (its state.db links the large bench state.db)")
    ap.add_argument("--rounds", type=int, default=45)
    ap.add_argument("--project", default="atlas-api")
    args = ap.parse_args()
    home = args.home
    os.environ["HERMES_HOME"] = str(home)
    meta = json.loads(Path(str((home / "state.db").resolve()) + ".meta.json").read_text())
    current = {p["name"]: p for p in meta["projects"]}[args.project]["current_session_id"]
    phr = load_plugin()
    from project_history_recall import lexical, search

    started = time.perf_counter()
    warming = phr.warm_up.warm_up(home)
    if warming is None:
        print("no warm-up: this home has no consent or semantic search is off", file=sys.stderr)
        return 1
    warming.join()
    warm_up = time.perf_counter() - started

    legs: dict[str, list[float]] = {}
    label = [""]
    keyword_leg, vector_leg = lexical.search, search._semantic_leg_apart

    def timed(real, name):
        def run(*a, **k):
            began = time.perf_counter()
            try:
                return real(*a, **k)
            finally:
                legs.setdefault(f"{label[0]} {name}", []).append(time.perf_counter() - began)
        return run

    lexical.search = timed(keyword_leg, "keyword leg")
    search._semantic_leg_apart = timed(vector_leg, "vector leg")
    with_filter = lexical._Ranges.near
    variants = [(f"{mode} {'with' if on else 'without'} filter", mode, on) for mode in ("keyword", "hybrid") for on in (False, True)]
    total: dict[str, list[float]] = {}
    for rep in range(-1, args.rounds):  # round -1: every query once cold, not counted
        for name, mode, on in variants:
            lexical._Ranges.near = with_filter if on else (lambda self, *a: None)
            for query in (QUERIES if rep < 0 else [QUERIES[rep % len(QUERIES)]]):
                label[0] = name
                began = time.perf_counter()
                answer = phr.search.search_history(home=home, session_id=current, query=query, mode=mode)
                if rep >= 0:
                    total.setdefault(name, []).append(time.perf_counter() - began)
                assert answer["semantic_status"] == "ready", answer["semantic_status"]
        if rep < 0:
            legs.clear()
    lexical._Ranges.near = with_filter
    out = {"warm_up_s": round(warm_up, 2), "rounds": args.rounds,
           "search": {name: summary_ms(samples) for name, samples in total.items()},
           "legs": {name: summary_ms(samples) for name, samples in legs.items()}}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
