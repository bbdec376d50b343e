#!/usr/bin/env python3
"""What the two-pass vector scoring of a large scope costs recall: the dev sets' questions over one pooled scope.

Usage::

    python bench/two_pass_recall.py SET_DIR [SET_DIR ...] --work DIR [--distractors STATE_DB --count N]
        [--keep 0.02,0.05] [--columns 0.25,0.375]

The plugin scores a scope in two passes (``vector_basis``: every row along the
principal directions first, then the best ``KEEP_SHARE`` exactly) only when
the scope holds at least ``vector_basis.TWO_PASS_FROM_ROWS`` rows, more than
any dev set's project. So the dev-set recall runs (``bench/recall.py``) never
exercise it. This bench does, with the plugin's own code (``vector_basis``,
``vector_scores``) on real embeddings:

* every set is built and indexed as ``bench/recall.py --work DIR`` does it
  (the same homes are reused), and the vectors of all sets are pooled into
  one scope, each set's sessions kept apart by name;
* ``--distractors`` adds ``--count`` messages of another state.db (e.g. the
  large bench file of ``bench/make_big_statedb.py``), embedded with the local
  model once and kept in ``--work``;
* every question with evidence is embedded and searched over the whole pool:
  every row scored exactly, then in two passes keeping each share of
  ``--keep`` of the rows, with a basis of each share of ``--columns`` of the
  dimensions (learned from the pool as the plugin learns it; the plugin
  reads ``vector_basis.COLUMNS_SHARE``: 0.375, 192 of 512).

Reported per set: the evidence session's R@1/5/10 and MRR in the top 10 of
the pooled ranking (harder than a set's own project: every other set's
sessions compete), how many of the exact top-10 sessions the two-pass search
also returns, and the share of rows scored exactly. The data sets are only read.
"""

from __future__ import annotations

import argparse
import hashlib
import shlex
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import recall  # noqa: E402
from _common import load_plugin  # noqa: E402

TOP = 10


def set_vectors(phr: Any, ds: recall.DataSet, root: Path) -> tuple[np.ndarray, np.ndarray, list[str], list[tuple[str, set[str]]]]:
    """``(vectors, message ids, session name of each row, [(question, evidence session names)])`` of one set."""
    from project_history_recall import embeddings, vector_file

    built = recall.build_home(ds, root)
    home = built.home
    recall.index_with_local_model(phr, home, ds.name)
    db = phr.paths.plugin_data_dir(home) / "embeddings.db"
    files = vector_file.VectorFile(db, embeddings.LocalProvider().fingerprint)
    view = files.view(files.head().db)  # the files the index command just brought up to this embeddings.db
    live = view.rows[:, 1] != -1
    names = [f"{ds.name}/{view.names[c]}" for c in view.rows[live, 2]]
    questions = [(q.text, {f"{ds.name}/{built.sid[k]}" for k in q.evidence_sessions}) for q in ds.questions]
    return np.array(view.vectors[live]), np.array(view.rows[live, 1]), names, questions


def distractors(phr: Any, state_db: Path, count: int, work: Path) -> tuple[np.ndarray, list[str]]:
    """``count`` messages of ``state_db`` embedded with the local model (kept in ``work`` for the next run)."""
    from project_history_recall import embeddings

    key = hashlib.sha256(f"{state_db.resolve()}:{count}".encode()).hexdigest()[:12]
    cache = work / f"distractors-{key}.npz"
    if cache.is_file():
        saved = np.load(cache)
        return saved["vectors"], [f"distractor/{s}" for s in saved["sessions"].tolist()]
    conn = sqlite3.connect(state_db.resolve().as_uri() + "?mode=ro", uri=True)
    rows = conn.execute(
        "SELECT session_id, content FROM messages WHERE role IN ('user', 'assistant') AND length(content) > 20 "
        "ORDER BY (id * 2654435761) % 4294967296 LIMIT ?", (count,)).fetchall()
    conn.close()
    provider = embeddings.LocalProvider(threads=2)
    started = time.perf_counter()
    parts = []
    for start in range(0, len(rows), 500):
        parts.append(provider.embed([text[: provider.max_chars] for _, text in rows[start : start + 500]]))
        print(f"  distractors embedded: {start + len(parts[-1])}/{len(rows)} ({time.perf_counter() - started:.0f}s)", flush=True)
    vectors = np.concatenate(parts).astype(np.float32)
    np.savez(cache, vectors=vectors, sessions=np.array([s for s, _ in rows]))
    return vectors, [f"distractor/{s}" for s, _ in rows]


def ranked(view: Any, codes: dict[str, int], query: np.ndarray, sessions: set[str]) -> list[str]:
    from project_history_recall import vector_scores

    ids, owners, scores = vector_scores.scope_scores(view, vector_scores.member_mask(view, codes, sessions), query)
    return [h.session_id for h in vector_scores.best_of_sessions(view.names, sessions, ids, owners, scores, TOP, 1)]


def metrics(runs: list[tuple[list[str], set[str]]]) -> dict[str, float]:
    n = len(runs)
    ranks = [next((i + 1 for i, s in enumerate(r) if s in gold), None) for r, gold in runs]
    out = {f"R@{k}": round(sum(1 for x in ranks if x and x <= k) / n, 4) for k in (1, 5, 10)}
    out["MRR"] = round(sum(1 / x for x in ranks if x) / n, 4)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="+", type=Path)
    ap.add_argument("--work", type=Path, required=True, help="the built homes and indexes (as bench/recall.py --work)")
    ap.add_argument("--distractors", type=Path, help="a state.db whose messages are added to the pool")
    ap.add_argument("--count", type=int, default=50_000, help="how many of its messages (default 50000)")
    ap.add_argument("--keep", default="0.02,0.05", help="shares of the pool the first pass keeps, comma-separated")
    ap.add_argument("--columns", default="0.375", help="shares of the dimensions the first pass reads, comma-separated")
    args = ap.parse_args(argv)
    print("command:", shlex.join([sys.executable, *(sys.argv if argv is None else [__file__, *argv])]))
    phr = load_plugin()
    from project_history_recall import embeddings, vector_basis, vector_file
    from project_history_recall import query as query_mod

    work = args.work.resolve()
    vectors, names, questions = [], [], []
    for path in args.sets:
        ds = recall.load_set(path.resolve())
        v, _, n, q = set_vectors(phr, ds, work / ds.name)
        vectors.append(v)
        names.extend(n)
        questions.append((ds.name, q))
        print(f"[{ds.name}] {len(v)} vectors, {len(q)} questions", flush=True)
    if args.distractors:
        v, n = distractors(phr, args.distractors, args.count, work)
        vectors.append(v)
        names.extend(n)
        print(f"[distractors] {len(v)} vectors", flush=True)
    matrix = np.concatenate(vectors).astype(np.float32)
    session_names = sorted(set(names))
    codes = {s: i for i, s in enumerate(session_names)}
    rows = np.zeros((len(matrix), 3), dtype=np.int64)
    rows[:, 0] = rows[:, 1] = np.arange(1, len(matrix) + 1)
    rows[:, 2] = [codes[s] for s in names]
    head = vector_file.Head(rows=len(matrix), dims=matrix.shape[1])
    exact = vector_file.View(head, matrix, rows, tuple(session_names))
    bases = {}
    for share in [float(c) for c in args.columns.split(",")]:
        vector_basis.COLUMNS_SHARE = share
        started = time.perf_counter()
        basis = vector_basis.learn(matrix)
        bases[share] = vector_file.View(head, matrix, rows, tuple(session_names), basis, vector_basis.project(matrix, basis))
        print(f"pool: {len(matrix)} vectors, {len(session_names)} sessions; basis of {basis.shape[1]} directions "
              f"learned in {time.perf_counter() - started:.1f}s")
    sessions = set(session_names)
    provider = embeddings.LocalProvider(threads=2)
    vector_basis.TWO_PASS_FROM_ROWS = 0  # the pool is the scope: two passes whatever its size
    keeps = [float(k) for k in args.keep.split(",")]
    print(f"{'set':<14} {'search':<16} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'MRR':>6} {'top10 kept':>10} {'exact rows':>10}")
    for name, qs in questions:
        query_vectors = embeddings.normalise(provider.embed([query_mod.clean_query(text)[0] for text, _ in qs]))
        golds = [gold for _, gold in qs]
        results: dict[str, list[list[str]]] = {}
        read: dict[str, float] = {}
        variants = [("exact", exact, None)] + [
            (f"{view.basis.shape[1]} dims, {k:g}", view, k) for view in bases.values() for k in keeps]
        for label, view, keep in variants:
            if keep is not None:
                vector_basis.KEEP_SHARE, vector_basis.KEEP_AT_LEAST = keep, 0
            results[label] = [ranked(view, codes, q, sessions) for q in query_vectors]
            read[label] = 1.0 if keep is None else vector_basis.kept(len(matrix)) / len(matrix)
        for label, found in results.items():
            m = metrics(list(zip(found, golds)))
            kept = np.mean([len(set(f) & set(e)) / max(1, len(e)) for f, e in zip(found, results["exact"])])
            print(f"{name:<14} {label:<16} {m['R@1']:>6.3f} {m['R@5']:>6.3f} {m['R@10']:>6.3f} {m['MRR']:>6.3f} "
                  f"{kept:>10.3f} {read[label]:>10.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
