#!/usr/bin/env python3
"""The recency rule (``recency.current_first``) measured again in seconds, on recorded inputs.

Usage::

    python bench/recency_lab.py SET_DIR [SET_DIR ...] --work DIR --base RECALL_JSON [--recapture]

The rule only reorders the answers to questions that ask how things stand
now (``recency.asks_current``), and only from what the search hands it: the
ranked sessions, the keyword leg's scored messages, their texts and times,
the query's scorer. For each such question of each set (built by
``bench/recall.py``'s builders into ``--work``: the same homes and vector
indexes) and each mode (keyword, semantic, hybrid), ``search.search_history``
runs once and those inputs are recorded (``<work>/<set>/recency.pickle``;
reused unless ``--recapture``; it holds message texts, like the home beside
it). Nothing the rule does changes them, so a change of ``recency.py`` is
measured by ranking the record again with this checkout's ``current_first``.

``--base``: a ``bench/recall.py --out`` JSON of the same sets (the code
before). Each recorded question's rank is replaced by the one this checkout
gives, every other question keeps its rank there, and R@1 / MRR per set and
mode are printed beside the base's, with memorycode's first form ("what is
our convention for X now?") apart and each question of another set that
moved.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import recall  # noqa: E402
from _common import load_plugin  # noqa: E402

MODES = ("keyword", "semantic", "hybrid")
FIRST_FORM = "what is our convention for"

# One recorded question: (index in the set, text, evidence session ids, mode -> current_first's arguments or None).
Record = tuple[int, str, list[str], dict[str, Any]]


def capture(ds: recall.DataSet, root: Path, phr: Any) -> list[Record]:
    """``current_first``'s arguments for each question asking for the present, per mode (None: the rule's gate was shut)."""
    built = recall.build_home(ds, root)
    os.environ["HERMES_HOME"] = str(built.home)
    recall.index_with_local_model(phr, built.home, ds.name)
    recency = phr.recency
    real = recency.current_first
    seen: dict[str, Any] = {}

    def spy(ranked: Any, keyword_hits: Any, texts: Any, times: Any, scorer: Any) -> Any:
        ids = {h.message_id for h in keyword_hits}
        seen["args"] = (list(ranked), list(keyword_hits), {m: t for m, t in texts.items() if m in ids},
                        {m: t for m, t in times.items() if m in ids}, scorer)
        return real(ranked, keyword_hits, texts, times, scorer)

    out: list[Record] = []
    recency.current_first = spy
    try:
        for i, q in enumerate(ds.questions):
            if not recency.asks_current(q.text):
                continue
            per: dict[str, Any] = {}
            for mode in MODES:
                seen.clear()
                phr.search.search_history(home=built.home, session_id=built.current[q.project], query=q.text, mode=mode,
                                          limit=recall.LIMIT)
                per[mode] = seen.get("args")
            out.append((i, q.text, sorted(built.sid[k] for k in q.evidence_sessions), per))
    finally:
        recency.current_first = real
    return out


def rank_of(order: list[str], evidence: set[str]) -> int | None:
    return next((i + 1 for i, sid in enumerate(order[: recall.LIMIT]) if sid in evidence), None)


def summary(ranks: list[int | None]) -> tuple[float, float]:
    """``(R@1, MRR)``."""
    return sum(1 for r in ranks if r == 1) / len(ranks), sum(1 / r for r in ranks if r) / len(ranks)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="+", type=Path)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--base", type=Path, required=True, help="bench/recall.py --out JSON of the same sets")
    ap.add_argument("--recapture", action="store_true")
    args = ap.parse_args(argv)
    phr = load_plugin()
    phr.vector_leg.INDEX_BUDGET_S = 3600.0
    base = json.loads(args.base.read_text(encoding="utf-8"))["per_question"]
    print(f"{'set':26s} {'mode':8s} {'R@1 base':>9s} {'R@1 now':>8s} {'MRR base':>9s} {'MRR now':>8s}")
    for path in args.sets:
        ds = recall.load_set(path.resolve())
        root = args.work.resolve() / ds.name
        record = root / "recency.pickle"
        if args.recapture or not record.is_file():
            t0 = time.perf_counter()
            captured = capture(ds, root, phr)
            record.write_bytes(pickle.dumps(captured))
            print(f"[{ds.name}] captured {len(captured)} questions in {time.perf_counter() - t0:.0f}s", flush=True)
        records: list[Record] = pickle.loads(record.read_bytes())
        for mode in MODES:
            before = [q[mode]["rank"] for q in base[ds.name]]
            now = list(before)
            moved = []
            for i, text, evidence, per in records:
                if per.get(mode) is None:
                    continue
                ranked, _ = phr.recency.current_first(*per[mode])
                now[i] = rank_of([h.session_id for h in ranked], set(evidence))
                if now[i] != before[i]:
                    moved.append(f"    {i}: {before[i]} -> {now[i]}  {text}")
            groups = [("", range(len(now)))]
            if ds.kind == "memorycode":
                first = [i for i, text, _, _ in records if text.startswith(FIRST_FORM)]
                groups.append(("  first form", first))
            for label, idx in groups:
                (b1, bm), (n1, nm) = summary([before[i] for i in idx]), summary([now[i] for i in idx])
                print(f"{ds.name + label:26s} {mode:8s} {b1:9.4f} {n1:8.4f} {bm:9.4f} {nm:8.4f}")
            if moved and ds.kind != "memorycode":
                print("\n".join(moved))
    return 0


if __name__ == "__main__":
    sys.exit(main())
