"""Searches while Hermes writes: latency of ours and the built-in, and the writer's own pace.

On a private copy of the large state.db (``make_big_statedb.py``: 20k sessions,
1M messages; built first if missing), runs these phases, each ``--duration``
seconds:

1. ``ours``: our keyword search alone (``search.search_history``, the tool
   path minus JSON), cycling through keyword_latency.py's queries from a
   session of the biggest project;
2. ``builtin``: Hermes' ``tools.session_search_tool.session_search`` alone,
   same queries (questions as an OR of their words, as keyword_latency.py does);
3. ``writer``: a separate process appending messages through Hermes' own
   ``hermes_state.SessionDB`` (WAL) at ``--rate`` messages/s, to new sessions
   of the same project (a new session every 100 messages), nothing else running;
4. ``writer+ours`` and 5. ``writer+builtin``: the writer and the searches at
   the same time.

It prints search p50/p95 per phase (and per query), the writer's throughput
(messages/s) and append latency p50/p95/max per phase, and every error (a
"database is locked" included) on either side. The shared database in
``/tmp/phr-bench`` is never written: state.db (and any -wal) is copied to a
temporary folder first, and the copy is deleted at the end.

Usage::

    .venv/bin/python bench/concurrency.py                       # 20 s phases, writer at 50 messages/s
    .venv/bin/python bench/concurrency.py --duration 10 --rate 200
    .venv/bin/python bench/concurrency.py --rate 0              # writer as fast as it can (throughput ceiling)
    .venv/bin/python bench/concurrency.py --out bench/out/concurrency.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import load_plugin, percentile, summary_ms  # noqa: E402
from keyword_latency import QUESTIONS, ensure_db  # noqa: E402

#: The writer process. argv: state.db, report path, seconds, rate (0: unthrottled),
#: project folder, start-signal path. Waits for the start file, then appends
#: through Hermes' SessionDB and writes ``{"appended", "seconds", "latencies", "errors"}``.
#: It reopens its SessionDB every 900 writes, as a new Hermes process would: every
#: 1,000 writes of one instance Hermes runs an FTS ``optimize``, and the first one on
#: this bulk-built, never-merged 1M-message index stalls the writer for ~40 s (it is
#: nearly free on an index Hermes keeps merged). That is Hermes' own cost, the same
#: with or without searches, and would drown what this benchmark measures.
WRITER = r"""
import json, sqlite3, sys, time
from pathlib import Path
from hermes_state import SessionDB

db_path, report, seconds, rate, cwd, go = sys.argv[1:7]
seconds, rate = float(seconds), float(rate)
db = SessionDB(db_path=Path(db_path))
stamp = time.strftime("%H%M%S")
while not Path(go).exists():
    time.sleep(0.005)
latencies, errors, appended, sid = [], [], 0, None
start = next_at = time.monotonic()
writes = 0
while time.monotonic() - start < seconds:
    try:
        if writes >= 900:
            db.close()
            db, writes = SessionDB(db_path=Path(db_path)), 0
        if appended % 100 == 0:
            sid = f"bench_writer_{stamp}_{appended}"
            db.create_session(sid, "cli", cwd=cwd)
            writes += 1
        role = ("user", "assistant", "tool")[appended % 3]
        text = (f"writer note {appended}: the websocket error in that function came back; "
                f"we retried with backoff and checked the connection pool. 数据库迁移 step {appended}.")
        t = time.perf_counter()
        db.append_message(sid, role, text, tool_name="terminal" if role == "tool" else None)
        latencies.append(time.perf_counter() - t)
        appended += 1
        writes += 1
    except sqlite3.Error as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
    if rate > 0:
        next_at += 1.0 / rate
        time.sleep(max(0.0, next_at - time.monotonic()))
elapsed = time.monotonic() - start
db.close()
Path(report).write_text(json.dumps({"appended": appended, "seconds": elapsed, "latencies": latencies, "errors": errors[:50],
                                    "error_count": len(errors)}))
"""


def private_copy(db: Path, into: Path) -> Path:
    """Copy ``db`` (and its -wal, if any) into ``into/home``; returns the copy's path.

    A plain file copy: the benchmark database is idle (nothing writes it), so
    main file plus WAL is a consistent snapshot.
    """
    home = into / "home"
    home.mkdir(parents=True)
    target = home / "state.db"
    shutil.copyfile(db, target)
    wal = Path(str(db) + "-wal")
    if wal.exists():
        shutil.copyfile(wal, Path(str(target) + "-wal"))
    return target


def start_writer(db: Path, work: Path, phase: str, seconds: float, rate: float, cwd: str) -> tuple[subprocess.Popen, Path, Path]:
    """Start the writer (it waits for the returned start file); returns ``(process, report, start file)``."""
    report, go = work / f"writer-{phase}.json", work / f"go-{phase}"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db), str(report), str(seconds), str(rate), cwd, str(go)],
                            env={**os.environ, "HERMES_HOME": str(db.parent)})
    return proc, report, go


def writer_summary(report: Path) -> dict[str, Any]:
    """``{"messages", "msgs_per_s", "append_p50_ms", "append_p95_ms", "append_max_ms", "append_max_at", "errors",
    "error_samples"}`` from a writer report."""
    data = json.loads(report.read_text())
    lat = data["latencies"] or [0.0]
    return {
        "messages": data["appended"],
        "msgs_per_s": round(data["appended"] / data["seconds"], 1),
        "append_p50_ms": round(percentile(lat, 50) * 1000, 2),
        "append_p95_ms": round(percentile(lat, 95) * 1000, 2),
        "append_max_ms": round(max(lat) * 1000, 2),
        "append_max_at": lat.index(max(lat)),  # message number: reopens happen near multiples of 900 writes
        "errors": data["error_count"],
        "error_samples": data["errors"][:3],
    }


def search_loop(calls: list[tuple[str, Any]], seconds: float, failures: tuple[type[BaseException], ...]) -> dict[str, Any]:
    """Cycle through ``calls`` (label, zero-argument callable) for ``seconds``.

    Returns ``{"all": summary, "per_query": {label: summary}, "searches", "errors"}``
    (summaries as ``_common.summary_ms``); an exception of ``failures``, or an
    answer with ``success: false`` or an ``error``, counts as an error, its text
    kept in ``error_samples``.
    """
    per: dict[str, list[float]] = {label: [] for label, _ in calls}
    errors: list[str] = []
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        label, fn = calls[i % len(calls)]
        i += 1
        start = time.perf_counter()
        try:
            out = fn()
        except failures as exc:
            errors.append(f"{label}: {type(exc).__name__}: {exc}")
            continue
        per[label].append(time.perf_counter() - start)
        answer = json.loads(out) if isinstance(out, str) else out
        if isinstance(answer, dict) and (answer.get("success") is False or answer.get("error")):
            errors.append(f"{label}: {answer.get('error')}")
    everything = [s for samples in per.values() for s in samples]
    return {
        "searches": len(everything),
        "all": summary_ms(everything) if everything else {},
        "per_query": {label: summary_ms(s) for label, s in per.items() if s},
        "errors": len(errors),
        "error_samples": errors[:3],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, default=Path("/tmp/phr-bench/home/state.db"), help="the shared large state.db (only read)")
    ap.add_argument("--duration", type=float, default=20.0, help="seconds per phase (default 20)")
    ap.add_argument("--rate", type=float, default=50.0, help="writer messages per second; 0 = as fast as it can (default 50)")
    ap.add_argument("--sessions", type=int, default=20_000, help="if the database must be built")
    ap.add_argument("--messages", type=int, default=1_000_000, help="if the database must be built")
    ap.add_argument("--tmp", type=Path, default=None, help="where the private copy goes (default: a new folder in $TMPDIR)")
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = ap.parse_args()

    meta = ensure_db(args.db, args.sessions, args.messages)
    project = max(meta["projects"], key=lambda p: p.get("messages_bound", 0))
    sid, cwd = project["current_session_id"], project["current_session_cwd"]
    queries: list[tuple[str, str]] = []
    for cls in ("rare", "medium", "very_common", "phrases", "cjk"):
        queries += [(cls, entry["term"]) for entry in meta["terms"].get(cls, [])[:2]]
    queries.append(("cjk-short", "问题"))
    queries += [("question", q) for q in QUESTIONS]

    work = Path(tempfile.mkdtemp(prefix="phr-concurrency-", dir=args.tmp))
    try:
        t0 = time.monotonic()
        db = private_copy(args.db, work)
        print(f"private copy: {db} ({os.path.getsize(db) / 2**30:.2f} GiB, {time.monotonic() - t0:.0f} s); "
              f"project {project['name']} ({project['messages_bound']:,} messages), session {sid}; "
              f"phases of {args.duration:g} s, writer rate {'unthrottled' if args.rate <= 0 else f'{args.rate:g}/s'}\n", flush=True)
        home = db.parent
        os.environ["HERMES_HOME"] = str(home)
        phr = load_plugin()
        from hermes_state import SessionDB
        from tools.session_search_tool import session_search

        builtin_db = SessionDB(db_path=db)
        ours_calls = [(q, (lambda q=q: phr.search.search_history(home=home, session_id=sid, query=q, mode="keyword", limit=3)))
                      for _, q in queries]
        builtin_calls = []
        for cls, q in queries:
            typed = " OR ".join(u.text for u in phr.query.parse_query(q).units) if cls == "question" else q
            builtin_calls.append((q, (lambda t=typed: session_search(query=t, limit=3, db=builtin_db, current_session_id=sid))))
        for _, fn in ours_calls + builtin_calls:  # warm-up: page cache, attribution, git probes
            fn()

        results: dict[str, Any] = {}

        def run(phase: str, calls: list | None, writer: bool) -> None:
            proc = report = None
            if writer:
                proc, report, go = start_writer(db, work, phase, args.duration, args.rate, cwd)
                time.sleep(2.0)  # let it import Hermes and open the database
                go.touch()
            searches = search_loop(calls, args.duration, (sqlite3.Error, phr.errors.StoreError)) if calls else None
            if proc is not None:
                proc.wait(timeout=args.duration + 120)
            results[phase] = {"search": searches, "writer": writer_summary(report) if report else None}
            line = f"{phase:<15}"
            if searches:
                line += (f" search p50 {searches['all']['p50_ms']:>8} ms p95 {searches['all']['p95_ms']:>8} ms"
                         f" ({searches['searches']} searches, {searches['errors']} errors)")
            if report:
                w = results[phase]["writer"]
                line += (f" | writer {w['msgs_per_s']:>7}/s append p50 {w['append_p50_ms']} ms p95 {w['append_p95_ms']} ms"
                         f" max {w['append_max_ms']} ms at #{w['append_max_at']} ({w['messages']} messages, {w['errors']} errors)")
            print(line, flush=True)
            for sample in (searches or {}).get("error_samples", []) + ((results[phase]["writer"] or {}).get("error_samples") or []):
                print("   error:", sample)

        run("ours", ours_calls, False)
        run("builtin", builtin_calls, False)
        run("writer", None, True)
        run("writer+ours", ours_calls, True)
        run("writer+builtin", builtin_calls, True)
        builtin_db.close()

        print("\n| search | alone p50 | alone p95 | with writer p50 | with writer p95 | errors |")
        print("|---|---|---|---|---|---|")
        for name, alone, busy in (("ours", "ours", "writer+ours"), ("built-in session_search", "builtin", "writer+builtin")):
            a, b = results[alone]["search"], results[busy]["search"]
            print(f"| {name} | {a['all']['p50_ms']} | {a['all']['p95_ms']} | {b['all']['p50_ms']} | {b['all']['p95_ms']} "
                  f"| {a['errors'] + b['errors']} |")
        print("\n| writer (Hermes SessionDB.append_message) | messages/s | append p50 ms | append p95 ms | append max ms | errors |")
        print("|---|---|---|---|---|---|")
        for name, phase in (("alone", "writer"), ("with our searches", "writer+ours"), ("with built-in searches", "writer+builtin")):
            w = results[phase]["writer"]
            print(f"| {name} | {w['msgs_per_s']} | {w['append_p50_ms']} | {w['append_p95_ms']} | {w['append_max_ms']} | {w['errors']} |")
        print("\nper query, ours p50/p95 ms: alone -> with writer")
        for _, q in queries:
            a, b = results["ours"]["search"]["per_query"].get(q, {}), results["writer+ours"]["search"]["per_query"].get(q, {})
            print(f"  {q[:50]:<50} {a.get('p50_ms')}/{a.get('p95_ms')} -> {b.get('p50_ms')}/{b.get('p95_ms')}")
        print("\ncommand:", " ".join([Path(sys.executable).name, *sys.argv]))
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "project": project["name"],
                                            "queries": [q for _, q in queries], "results": results}, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
