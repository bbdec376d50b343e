#!/usr/bin/env python3
"""How close a vector hit must be to count: the cosines of what should and should not be found, per set.

Usage::

    python bench/vector_floor.py SET_DIR [SET_DIR ...] --work DIR [--words 15] [--projects 20] [--floors 0.2,0.25,...]

Reads the homes and vector indexes ``bench/recall.py`` built in ``--work``
(run it first with semantic search), and ``bench/rank_lab.py``'s record of
each question's legs (``legs.json``: run it first too). Three kinds of query,
each asked in semantic mode from the project's current session:

* **questions** (the record): the cosine of the evidence session's best
  message (what a floor must keep) and of the best message found at all;
* **foreign words**: single words that occur in another project of the set
  and nowhere in this one (keyword mode finds nothing for them), up to
  ``--words`` per project: the best cosine (what a floor must refuse);
* **own words**: single words of this project that keyword mode finds: the
  best cosine (a word the project holds should still find something);
* **foreign pairs** / **own pairs**: the same with two words at once.

Prints the percentiles of each, and for each candidate floor: the share of
foreign words answered with nothing, of own words still answered, and of
questions whose evidence session keeps a hit. Words are drawn with a fixed
seed; only counts and cosines are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import recall  # noqa: E402
from _common import load_plugin, percentile  # noqa: E402
from stopwords import EN_STOP_WORDS  # noqa: E402

_WORD = re.compile(r"[a-z]{5,}")


def words_of(project: recall.SetProject) -> set[str]:
    return {w for s in project.sessions for m in s.messages for w in _WORD.findall(m.content.lower())} - EN_STOP_WORDS


def best_cosine(phr: Any, home: Path, session_id: str, query: str, mode: str = "semantic") -> tuple[float | None, int]:
    """``(best cosine of the vector leg or None when it found nothing, results the search returned)``."""
    seen: dict[str, Any] = {}
    real = phr.search._semantic_leg_apart

    def leg(*args: Any, **kwargs: Any) -> Any:
        seen["leg"] = found = real(*args, **kwargs)
        return found

    phr.search._semantic_leg_apart = leg
    try:
        res = phr.search.search_history(home=home, session_id=session_id, query=query, mode=mode, limit=10)
    finally:
        phr.search._semantic_leg_apart = real
    hits = seen["leg"].hits if "leg" in seen else ()
    return (max(h.score for h in hits) if hits else None), len(res.get("results") or [])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="+", type=Path)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--words", type=int, default=15, help="foreign and own words per project")
    ap.add_argument("--projects", type=int, default=20, help="projects per set (the first ones)")
    ap.add_argument("--floors", default="0.15,0.2,0.25,0.3,0.35,0.4,0.45,0.5")
    ap.add_argument("--out", type=Path, help="write the cosines here (JSON, numbers only)")
    args = ap.parse_args(argv)
    floors = [float(f) for f in args.floors.split(",")]
    phr = load_plugin()
    phr.vector_leg.INDEX_BUDGET_S = 3600.0
    rng = random.Random(30)
    report: dict[str, Any] = {}
    for path in args.sets:
        ds = recall.load_set(path.resolve())
        root = args.work.resolve() / ds.name
        built = recall.build_home(ds, root)
        os.environ["HERMES_HOME"] = str(built.home)
        legs = json.loads((root / "legs.json").read_text(encoding="utf-8"))
        evidence_cos, question_top = [], []
        for q in legs:
            cos = [h[2] for h in q["sem"] if h[1] in set(q["evidence"])]
            evidence_cos.append(max(cos) if cos else None)
            question_top.append(max((h[2] for h in q["sem"]), default=None))
        vocab = {p.key: words_of(p) for p in ds.projects}
        foreign, own, foreign2, own2 = [], [], [], []
        for project in ds.projects[: args.projects]:
            others = sorted(set().union(*(v for k, v in vocab.items() if k != project.key)) - vocab[project.key])
            mine = sorted(vocab[project.key])
            current = built.current[project.key]
            for pool, out, must_find, size in ((others, foreign, False, 1), (mine, own, True, 1),
                                               (others, foreign2, False, 2), (mine, own2, True, 2)):
                tried = 0
                if len(pool) < size:
                    continue
                for word in (" ".join(rng.sample(pool, size)) for _ in range(args.words * 3)):
                    if tried >= args.words:
                        break
                    found = phr.search.search_history(home=built.home, session_id=current, query=word, mode="keyword", limit=1)
                    if bool(found.get("results")) != must_find:
                        continue  # the word's presence as keyword mode sees it decides
                    tried += 1
                    out.append(best_cosine(phr, built.home, current, word)[0])
        report[ds.name] = {"evidence": evidence_cos, "question_top": question_top, "foreign": foreign, "own": own,
                           "foreign_pairs": foreign2, "own_pairs": own2}
        print(f"\n**{ds.name}**: {len(legs)} questions, {len(foreign)} foreign words, {len(own)} own words\n")
        print("| cosines | p1 | p5 | p25 | p50 | p75 | p95 | p99 |")
        print("|---|---|---|---|---|---|---|---|")
        for name, values in (("evidence session's best", evidence_cos), ("question's best", question_top),
                             ("foreign word's best", foreign), ("own word's best", own),
                             ("foreign pair's best", foreign2), ("own pair's best", own2)):
            vals = [v for v in values if v is not None]
            if vals:
                print(f"| {name} | " + " | ".join(f"{percentile(vals, p):.3f}" for p in (1, 5, 25, 50, 75, 95, 99)) + " |")
        print("\n| floor | foreign words answered nothing | own words still answered | questions keeping the evidence hit |")
        print("|---|---|---|---|")
        for f in floors:
            refused = sum(1 for v in foreign if v is None or v < f) / max(len(foreign), 1)
            kept_own = sum(1 for v in own if v is not None and v >= f) / max(len(own), 1)
            kept_ev = sum(1 for v in evidence_cos if v is not None and v >= f) / max(sum(1 for v in evidence_cos if v is not None), 1)
            print(f"| {f:.2f} | {refused:.3f} | {kept_own:.3f} | {kept_ev:.3f} |")
    if args.out:
        args.out.write_text(json.dumps(report) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
