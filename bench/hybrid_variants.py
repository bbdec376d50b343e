#!/usr/bin/env python3
"""Hybrid mode again under a variant of its fusion, every question of each set, against a ``bench/recall.py --out`` base.

Usage::

    python bench/hybrid_variants.py VARIANT SET_DIR [SET_DIR ...] --work DIR --base RECALL_JSON

Only hybrid's fusion changes between the variants, so keyword, semantic and
plain-bm25 keep the base's figures and only hybrid is searched again (through
``search.search_history``, on the homes and vector indexes ``bench/recall.py``
built in ``--work``: a few minutes for the five dev sets, against half an hour
for ``recall.py``). Variants:

* ``base``: this checkout unchanged (must move no question: a check of the run);
* ``w<x>``: ``search.SEMANTIC_WEIGHT`` (the vector leg's weight while keyword is strong) set to ``x``;
* ``union0``: both legs standardised over the same sessions (the union of the two
  legs'), a session the keyword leg did not find scoring its BM25 (0), one the
  vector leg did not return that leg's lowest.

Prints per set hybrid MRR and R@5, base and variant, keyword's MRR beside,
how many questions moved and how many of them up; for memorycode also the
first form ("what is our convention for X now?"), R@1 and MRR.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import recall  # noqa: E402
from _common import load_plugin  # noqa: E402

FIRST_FORM = "what is our convention for"


def union_fusion(ranking: Any) -> Any:
    """``fuse_scores`` with both legs standardised over the union of their sessions (see the module docstring)."""
    def fuse_scores(keyword: Any, semantic: Any, *, semantic_weight: float) -> list[Any]:
        best = {r.session_id: r.hit for r in semantic}
        best.update({r.session_id: r.hit for r in keyword})
        kw_raw = {r.session_id: r.score for r in keyword}
        sem_raw = {r.session_id: r.score for r in semantic}
        sem_floor = min(sem_raw.values()) if sem_raw else 0.0

        def z(raw: dict[str, float], missing: float) -> dict[str, float]:
            values = [raw.get(s, missing) for s in best]
            mean = math.fsum(values) / len(values)
            spread = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
            return {s: (raw.get(s, missing) - mean) / spread if spread else 0.0 for s in best}

        kz, sz = z(kw_raw, 0.0), z(sem_raw, sem_floor)
        fused = {s: kz[s] + semantic_weight * sz[s] for s in best}
        order = sorted(fused, key=lambda s: (-fused[s], s))
        return [ranking.found(best[s], "both" if s in kw_raw and s in sem_raw else ("keyword" if s in kw_raw else "semantic"))
                for s in order]
    return fuse_scores


def mrr(ranks: list[int | None]) -> float:
    return sum(1 / r for r in ranks if r) / len(ranks)


def at(ranks: list[int | None], k: int) -> float:
    return sum(1 for r in ranks if r and r <= k) / len(ranks)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("variant", help="base, w<weight> or union0")
    ap.add_argument("sets", nargs="+", type=Path)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--base", type=Path, required=True, help="bench/recall.py --out JSON of the same sets")
    args = ap.parse_args(argv)
    phr = load_plugin()
    if args.variant == "union0":
        phr.search.fuse_scores = union_fusion(phr.ranking)
    elif args.variant.startswith("w"):
        phr.search.SEMANTIC_WEIGHT = float(args.variant[1:])
    elif args.variant != "base":
        raise SystemExit(f"unknown variant {args.variant!r}")
    base = json.loads(args.base.read_text(encoding="utf-8"))["per_question"]
    for path in args.sets:
        ds = recall.load_set(path.resolve())
        built = recall.build_home(ds, args.work.resolve() / ds.name)  # reused: built and indexed by recall.py
        os.environ["HERMES_HOME"] = str(built.home)
        now: list[int | None] = []
        for q in ds.questions:
            answer = phr.search.search_history(home=built.home, session_id=built.current[q.project], query=q.text,
                                               mode="hybrid", limit=recall.LIMIT)
            evidence = {built.sid[k] for k in q.evidence_sessions}
            now.append(next((i + 1 for i, r in enumerate(answer["results"][: recall.LIMIT]) if r["session_id"] in evidence),
                            None))
        before = [p["hybrid"]["rank"] for p in base[ds.name]]
        keyword = [p["keyword"]["rank"] for p in base[ds.name]]
        moved = [i for i in range(len(now)) if now[i] != before[i]]
        up = sum(1 for i in moved if now[i] and (not before[i] or now[i] < before[i]))
        print(f"{ds.name:15s} {args.variant}: hybrid MRR {mrr(before):.5f} -> {mrr(now):.5f} (keyword {mrr(keyword):.5f}), "
              f"R@5 {at(before, 5):.4f} -> {at(now, 5):.4f}; {len(moved)} moved, {up} up", flush=True)
        if ds.kind == "memorycode":
            first = [i for i, q in enumerate(ds.questions) if q.text.startswith(FIRST_FORM)]
            b, n = [before[i] for i in first], [now[i] for i in first]
            print(f"{'  first form':15s} R@1 {at(b, 1):.4f} -> {at(n, 1):.4f}, MRR {mrr(b):.4f} -> {mrr(n):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
