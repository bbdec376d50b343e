"""Keyword search latency on a large state.db, beside Hermes' built-in search.

Builds (once, cached) a state.db with Hermes' real schema -- 20k sessions / 1M
messages across several git repos by default, see ``make_big_statedb.py`` --
then times, in the same process and on the same file:

* ours: ``search.search_history(mode="keyword", limit=3)`` from a session of a
  project (the biggest, a middle-sized and the smallest), i.e. the full tool path minus
  JSON: attribution of every session, scope, FTS, snippets;
* built-in: ``tools.session_search_tool.session_search(query, limit=3)`` with
  a read-write ``SessionDB`` (its read-only mode cannot search).

for rare, medium and very common terms, a Chinese term, and natural-language
questions. Prints p50/p95 per query class and a markdown table.

Run: .venv/bin/python bench/keyword_latency.py [--db /tmp/phr-bench/home/state.db] [--reps 20]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import load_plugin, summary_ms  # noqa: E402

QUESTIONS = [
    "how did we fix the websocket error in that function?",
    "what did we decide about idempotency keys for the error handler?",
]


def ensure_db(db: Path, sessions: int, messages: int) -> dict:
    meta_path = Path(str(db) + ".meta.json")
    if not meta_path.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        # Repos live beside HERMES_HOME, not inside it: repos under HERMES_HOME
        # are never projects (the desktop's rule, which the plugin follows).
        cmd = [sys.executable, str(HERE / "make_big_statedb.py"), "--out", str(db),
               "--projects-root", str(db.parent.parent / "projects"),
               "--sessions", str(sessions), "--messages", str(messages)]
        print("building:", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    return json.loads(meta_path.read_text())


def ensure_config(home: Path) -> None:
    """A Hermes-sized config.yaml (Hermes' own defaults), so the per-search settings read is measured."""
    path = home / "config.yaml"
    if not path.exists():
        import yaml
        from hermes_cli.config import DEFAULT_CONFIG

        path.write_text(yaml.safe_dump(DEFAULT_CONFIG, sort_keys=False), encoding="utf-8")


def time_calls(fn, reps: int) -> tuple[list[float], object]:
    out = fn()  # warm-up (page cache, statement cache)
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        out = fn()
        samples.append(time.perf_counter() - start)
    return samples, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, default=Path("/tmp/phr-bench/home/state.db"))
    ap.add_argument("--sessions", type=int, default=20_000)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = ap.parse_args()

    meta = ensure_db(args.db, args.sessions, args.messages)
    home = args.db.parent
    os.environ["HERMES_HOME"] = str(home)
    phr = load_plugin()
    from hermes_state import SessionDB
    from tools.session_search_tool import session_search

    ensure_config(home)
    projects = sorted(meta["projects"], key=lambda p: -p.get("messages_bound", 0))
    picks = [projects[0], projects[len(projects) // 2], projects[-1]]
    queries: list[tuple[str, str, int | None]] = []
    for cls in ("rare", "medium", "very_common", "phrases", "cjk"):
        for entry in meta["terms"].get(cls, [])[:2]:
            queries.append((cls, entry["term"], entry.get("df")))
    queries.append(("cjk-short", "问题", None))  # 2 characters: no trigram, a bounded LIKE scan
    queries += [("question", q, None) for q in QUESTIONS]

    db = SessionDB(db_path=args.db)
    print(f"state.db: {meta['counts']['sessions']:,} sessions, {meta['counts']['messages']:,} messages, "
          f"{os.path.getsize(args.db) / 2**30:.2f} GiB; reps={args.reps}\n", flush=True)

    # Cold: the first search in a fresh process pays for git probes of every distinct cwd.
    cold = subprocess.run(
        [sys.executable, "-c", (
            "import sys, time, os; sys.path.insert(0, %r); os.environ['HERMES_HOME'] = %r\n"
            "from _common import load_plugin; phr = load_plugin(); from pathlib import Path\n"
            "t = time.perf_counter(); phr.search.search_history(home=Path(%r), session_id=%r, query='websocket', mode='keyword')\n"
            "print(round((time.perf_counter() - t) * 1000, 1))") % (str(HERE), str(home), str(home), picks[0]["current_session_id"])],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    print(f"cold first search in a new process (git probes of every distinct cwd): {cold} ms\n")

    rows = []
    for project in picks:
        sid = project["current_session_id"]
        for cls, query, df in queries:
            ours, answer = time_calls(
                lambda: phr.search.search_history(home=home, session_id=sid, query=query, mode="keyword", limit=3), args.reps)
            cold_scope, _ = time_calls(lambda: (phr.store.membership.invalidate(), phr.search.search_history(
                home=home, session_id=sid, query=query, mode="keyword", limit=3)), max(3, args.reps // 4))
            # The built-in gets the query as typed; for questions (which it
            # cannot answer verbatim) it also gets a hand-made OR of the words.
            builtin_query = query
            if cls == "question":
                builtin_query = " OR ".join(u.text for u in phr.search.parse_query(query).units)
            builtin, found = time_calls(lambda: session_search(query=builtin_query, limit=3, db=db, current_session_id=sid), args.reps)
            row = {
                "project": project["name"], "project_messages": project.get("messages_bound"), "class": cls,
                "query": query, "builtin_query": builtin_query, "df": df, "ours": summary_ms(ours),
                "ours_scope_recomputed": summary_ms(cold_scope), "builtin": summary_ms(builtin),
                "ours_results": len(answer["results"]), "builtin_results": len(json.loads(found).get("results") or []),
                "strategy": answer.get("strategy"),
            }
            rows.append(row)
            print(f"{project['name']:<14} {cls:<12} {query[:40]:<40} df={df!s:<8} ours p50 {row['ours']['p50_ms']:>7} "
                  f"p95 {row['ours']['p95_ms']:>7} (scope recomputed p50 {row['ours_scope_recomputed']['p50_ms']:>7}) | "
                  f"built-in p50 {row['builtin']['p50_ms']:>8} p95 {row['builtin']['p95_ms']:>8}"
                  f"  [{row['strategy']}, ours {row['ours_results']} / built-in {row['builtin_results']} hits]", flush=True)
    db.close()

    print("\n| project (messages) | class | query | df | ours p50 | ours p95 | ours p50, scope recomputed | built-in p50 | built-in p95 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        query = r["query"] if r["builtin_query"] == r["query"] else f"{r['query']} (built-in: `{r['builtin_query']}`)"
        print(f"| {r['project']} ({r['project_messages']:,}) | {r['class']} | {query} | {r['df'] if r['df'] is not None else '-'} "
              f"| {r['ours']['p50_ms']} | {r['ours']['p95_ms']} | {r['ours_scope_recomputed']['p50_ms']} "
              f"| {r['builtin']['p50_ms']} | {r['builtin']['p95_ms']} |")
    worst = max(r["ours"]["p95_ms"] for r in rows)
    slower = [r for r in rows if r["ours"]["p50_ms"] > r["builtin"]["p50_ms"]]
    print(f"\nours worst p95: {worst} ms (target < 100); queries where ours p50 > built-in p50: {len(slower)}")
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "cold_ms": cold, "meta_counts": meta["counts"]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
