#!/usr/bin/env python3
"""What each leg of a real search returned, recorded per question, and ranked again by the plugin's own functions.

Usage::

    python bench/rank_lab.py SET_DIR [SET_DIR ...] --work DIR [--no-semantic] [--recapture]

Each question of each set (built by ``bench/recall.py``'s builders into
``--work``: the same homes and vector indexes) is searched once through
``search.search_history``, in hybrid mode (keyword mode with
``--no-semantic``), and what the legs returned is recorded: the keyword leg's
sessions with their BM25 scores, its strength and terms, each candidate
message's share of its score per term, the vector leg's message hits with
their cosines, and each session's start and message times. The record
(``<work>/<set>/legs.json``, ``legs-kw.json`` with ``--no-semantic``: ids,
scores and times only, no set text) is reused on later runs unless
``--recapture``.

The recorded legs are then ranked by the plugin's own ``search.fuse`` /
``ranking.rank_sessions`` and session R@1 / R@5 / MRR are printed per set and
mode, so a change of fusion or pooling is measured on every set in seconds
without searching again; ``bench/vector_floor.py`` and
``bench/embedding_units.py`` read the same record.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import recall  # noqa: E402
from _common import load_plugin  # noqa: E402

Legs = dict[str, Any]


def capture(ds: recall.DataSet, root: Path, phr: Any, semantic: bool) -> list[Legs]:
    """Each question's recorded legs (see the module docstring)."""
    built = recall.build_home(ds, root)
    home = built.home
    import os

    os.environ["HERMES_HOME"] = str(home)
    if semantic:
        recall.index_with_local_model(phr, home, ds.name)
    seen: dict[str, Any] = {}
    real = (phr.lexical.search, phr.search._semantic_leg_apart, phr.lexical.score_texts, phr.lexical.demote_earlier)

    def kw(*args: Any, **kwargs: Any) -> Any:
        seen["kw"] = answer = real[0](*args, **kwargs)
        return answer

    def sem(*args: Any, **kwargs: Any) -> Any:
        seen["sem"] = leg = real[1](*args, **kwargs)
        return leg

    def score_texts(scorer: Any, texts: Any, lengths: Any = None, calls: Any = None) -> Any:
        seen["scorer"] = scorer
        seen["parts"] = {m: (sid, scorer.parts(text, (lengths or {}).get(m, (None, None)))) for m, (sid, text) in texts.items()}
        return real[2](scorer, texts, lengths, calls)

    def demote(hits: Any, earlier: Any, reach: int, group: Any = None) -> Any:
        def noted(ids: Any) -> Any:  # the earlier recalls among the hits the demotion checks (those within reach)
            found = earlier(ids)
            seen.setdefault("questions", set()).update(found)
            return found

        return real[3](hits, noted, reach, group)

    phr.lexical.search, phr.search._semantic_leg_apart, phr.lexical.score_texts, phr.lexical.demote_earlier = kw, sem, score_texts, demote
    conn = sqlite3.connect((home / "state.db").as_uri() + "?mode=ro", uri=True)
    started = {sid: ts for sid, ts in conn.execute("SELECT id, started_at FROM sessions")}
    out: list[Legs] = []
    try:
        for q in ds.questions:
            seen.clear()
            current = built.current[q.project]
            phr.search.search_history(home=home, session_id=current, query=q.text, mode="hybrid" if semantic else "keyword",
                                      limit=10)
            answer, leg, scorer = seen.get("kw"), seen.get("sem"), seen.get("scorer")
            parts = {m: (sid, p) for m, (sid, p) in (seen.get("parts") or {}).items() if p}
            out.append({
                "project": q.project,
                "type": q.qtype,
                "evidence": sorted(built.sid[k] for k in q.evidence_sessions),
                "kw": [[r.session_id, r.score, r.hit.message_id] for r in answer.sessions] if answer else [],
                "kw_weight": answer.weight if answer else 0.0,
                "terms": [[t.kind, list(t.forms), t.df, t.idf(scorer.grams if t.kind == "gram" else scorer.words)]
                          for t in scorer.terms] if scorer else [],
                "msgs": {str(m): [sid, {str(i): v for i, v in p.items()}, m in (seen.get("questions") or ())]
                         for m, (sid, p) in parts.items()},
                "sem": [[h.message_id, h.session_id, h.score] for h in leg.hits] if leg is not None else [],
                "sem_status": leg.status if leg is not None else "",
            })
    finally:
        phr.lexical.search, phr.search._semantic_leg_apart, phr.lexical.score_texts, phr.lexical.demote_earlier = real
    mids = sorted({int(m) for q in out for m in q["msgs"]} | {h[0] for q in out for h in q["sem"]})
    stamp: dict[int, tuple[float, str]] = {}
    for start in range(0, len(mids), 5000):
        for mid, ts, role in conn.execute("SELECT id, timestamp, role FROM messages WHERE id IN (SELECT value FROM json_each(?))",
                                          (json.dumps(mids[start : start + 5000]),)):
            stamp[int(mid)] = (ts, role)
    for q in out:
        sids = {s[0] for s in q["kw"]} | {h[1] for h in q["sem"]} | {v[0] for v in q["msgs"].values()}
        q["started"] = {sid: started.get(sid) for sid in sids}
        q["stamp"] = {str(m): stamp.get(int(m)) for m in [*q["msgs"], *(h[0] for h in q["sem"])]}
    conn.close()
    return out


def metrics(ranked: list[list[str]], questions: list[Legs]) -> dict[str, float]:
    n = len(questions)
    ranks = []
    for order, q in zip(ranked, questions):
        ev = set(q["evidence"])
        ranks.append(next((i + 1 for i, sid in enumerate(order[:10]) if sid in ev), None))
    return {
        "R@1": sum(1 for r in ranks if r == 1) / n,
        "R@5": sum(1 for r in ranks if r and r <= 5) / n,
        "MRR": sum(1 / r for r in ranks if r) / n,
    }


def rankers(phr: Any) -> dict[str, Callable[[Legs], list[str]]]:
    """Mode name -> ranks recorded legs the way the plugin does now (``phr``'s functions)."""
    ranking = phr.ranking
    SessionRank, Hit = ranking.SessionRank, ranking.Hit

    def kw_sessions(q: Legs) -> list[Any]:
        return [SessionRank(Hit(mid, sid, score), score) for sid, score, mid in q["kw"]]

    def sem_hits(q: Legs) -> list[Any]:
        return [Hit(mid, sid, score) for mid, sid, score in q["sem"]]

    class Answer:
        def __init__(self, q: Legs) -> None:
            self.sessions = tuple(kw_sessions(q))
            self.weight = q["kw_weight"]

        @property
        def strength(self) -> float:
            return self.sessions[0].score / self.weight if self.sessions and self.weight > 0 else 0.0

    def keyword(q: Legs) -> list[str]:
        return [r.session_id for r in kw_sessions(q)]

    def semantic(q: Legs) -> list[str]:
        return [r.session_id for r in ranking.rank_sessions(sem_hits(q))]

    def hybrid(q: Legs) -> list[str]:
        if not q["sem"]:
            return keyword(q)
        return [h.session_id for h in phr.search.fuse(Answer(q), sem_hits(q), 51)]

    return {"keyword": keyword, "semantic": semantic, "hybrid": hybrid}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="+", type=Path)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--no-semantic", action="store_true")
    ap.add_argument("--recapture", action="store_true")
    args = ap.parse_args(argv)
    phr = load_plugin()
    phr.vector_leg.INDEX_BUDGET_S = 3600.0
    modes = ["keyword"] if args.no_semantic else ["keyword", "semantic", "hybrid"]
    for path in args.sets:
        ds = recall.load_set(path.resolve())
        root = args.work.resolve() / ds.name
        record = root / ("legs-kw.json" if args.no_semantic else "legs.json")
        if args.recapture or not record.is_file():
            t0 = time.perf_counter()
            legs = capture(ds, root, phr, not args.no_semantic)
            record.write_text(json.dumps(legs), encoding="utf-8")
            print(f"[{ds.name}] captured {len(legs)} questions in {time.perf_counter() - t0:.0f}s", flush=True)
        legs = json.loads(record.read_text(encoding="utf-8"))
        ranks = rankers(phr)
        for mode in modes:
            m = metrics([ranks[mode](q) for q in legs], legs)
            print(f"{ds.name:14s} {mode:8s} R@1 {m['R@1']:.3f} R@5 {m['R@5']:.3f} MRR {m['MRR']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
