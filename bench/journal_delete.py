#!/usr/bin/env python3
"""What searching costs Hermes' writes when state.db is in rollback-journal (DELETE) mode, not WAL.

Hermes 0.21 keeps a new state.db out of WAL when the SQLite it links has the WAL-reset bug (3.7.0 to 3.51.2, but
3.50.7 and 3.44.6), or when ``database.journal_mode: delete`` is set, or on a cross-VM file system. There every read
holds a shared lock that a writer's commit must wait for; Hermes' writers wait 1 s (their busy timeout), then retry
within 20 s, and a turn whose transcript write runs out of that fails.

This bench copies ``--db`` (the bench state.db ``keyword_latency.py`` builds) to ``--work/state.db`` in DELETE mode,
starts a writer in its own process that does what Hermes' does for each message (``BEGIN IMMEDIATE``, one insert,
``COMMIT``, on a connection with a 1 s busy timeout) every 20 ms, and runs ``fresh_windows.py`` on the copy (new
processes asking hybrid, keyword and built-in questions, then warmed ones: the census, the index check and the vector
leg included); with ``--index``, then the index command of the local profile too, for ``--index-seconds``. The writer
reports how long each write took from ``BEGIN`` to ``COMMIT`` (p50 / p95 / p99 / max), how many took over 100 ms and
over 1 s (the busy timeout: Hermes would have retried), and how many failed "locked". The messages it wrote are
deleted at the end.

With ``--index-of PROFILE`` it runs only the index command, of a copy of that profile (``fresh_windows.py``'s
``local-400k/home``; its plugin data copied, the plugin code of this checkout) on the DELETE-mode copy, for
``--index-seconds``, after dropping the page cache (``--cold``, as root): the check's reads of a large project
cold, beside the writer.

Run: .venv/bin/python bench/journal_delete.py [--db /tmp/phr-bench/home/state.db] [--work /tmp/phr-bench/delete]
     [--index] [fresh_windows.py's options, e.g. --provider local --processes 4 --questions 5]
     .venv/bin/python bench/journal_delete.py --index-of /tmp/phr-bench/windows/local-400k/home --cold
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WRITER = r"""
import json, os, sqlite3, sys, time
db, out, stop = sys.argv[1], sys.argv[2], sys.argv[3]
conn = sqlite3.connect(db, timeout=1.0, isolation_level=None)
sid = conn.execute("SELECT id FROM sessions ORDER BY started_at DESC LIMIT 1").fetchone()[0]
took, locked = [], 0
while not os.path.exists(stop):
    start = time.monotonic()
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, 'user', 'journal bench', ?)",
                         (sid, time.time()))
            conn.execute("COMMIT")
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            locked += 1
            if conn.in_transaction:
                conn.execute("ROLLBACK")
    took.append(time.monotonic() - start)
    time.sleep(0.02)
conn.execute("DELETE FROM messages WHERE content = 'journal bench' AND session_id = ?", (sid,))
took.sort()
ms = lambda q: round(took[min(len(took) - 1, int(q * len(took)))] * 1000, 1)
json.dump({"writes": len(took), "locked": locked, "p50_ms": ms(0.5), "p95_ms": ms(0.95), "p99_ms": ms(0.99),
           "max_ms": ms(1.0), "over_100ms": sum(t > 0.1 for t in took), "over_1s": sum(t > 1 for t in took)}, open(out, "w"))
"""

#: Loaded by every process the bench starts: a connection opened without a factory of its own (Hermes 0.19's
#: SessionDB's, its async-delegation store's) leaves the journal mode as it is when asked for WAL, as 0.21 does.
KEEP_JOURNAL = """
import sqlite3

class _KeepJournal(sqlite3.Connection):
    def execute(self, sql, *args):
        if "".join(sql.split()).lower() == "pragmajournal_mode=wal":
            sql = "PRAGMA journal_mode"
        return super().execute(sql, *args)

_connect = sqlite3.connect

def connect(*args, **kwargs):
    kwargs.setdefault("factory", _KeepJournal)
    return _connect(*args, **kwargs)

sqlite3.connect = connect
"""


def _profile_copy(profile: Path, home: Path, state_db: Path) -> Path:
    """A fresh copy of ``profile`` at ``home`` (its plugin data included, the plugin code this checkout's), its
    state.db a link to ``state_db``; returns ``home``."""
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(profile, home, symlinks=True, ignore=shutil.ignore_patterns("state.db*"))
    (home / "state.db").symlink_to(state_db)
    code = home / "plugins" / "project-history-recall"
    for path in HERE.parent.glob("*.py"):
        shutil.copyfile(path, code / path.name)
    shutil.copyfile(HERE.parent / "plugin.yaml", code / "plugin.yaml")
    return home


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, default=Path("/tmp/phr-bench/home/state.db"))
    ap.add_argument("--work", type=Path, default=Path("/tmp/phr-bench/delete"))
    ap.add_argument("--index", action="store_true", help="then run the index command of the local profile")
    ap.add_argument("--index-seconds", type=float, default=120.0)
    ap.add_argument("--index-of", type=Path, help="only the index command, of a copy of this profile")
    ap.add_argument("--cold", action="store_true", help="drop the page cache first (root)")
    args, windows_args = ap.parse_known_args()
    args.work.mkdir(parents=True, exist_ok=True)
    copy = args.work / "state.db"
    if not copy.exists():
        shutil.copyfile(args.db, copy)
        shutil.copyfile(f"{args.db}.meta.json", f"{copy}.meta.json")
    with sqlite3.connect(copy) as conn:
        mode = conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0]
    assert mode == "delete", mode
    stop, report = args.work / "writer.stop", args.work / "writer.json"
    stop.unlink(missing_ok=True)
    # Hermes 0.19 turns a file it opens to WAL (the built-in's SessionDB in fresh_windows); 0.21 keeps it as it is.
    keep = args.work / "keep_journal"
    keep.mkdir(exist_ok=True)
    (keep / "sitecustomize.py").write_text(KEEP_JOURNAL)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(keep), os.environ.get("PYTHONPATH")]))}
    home = _profile_copy(args.index_of, args.work / "index-of", copy) if args.index_of else None
    if args.cold:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(copy), str(report), str(stop)])
    try:
        if home is None:
            subprocess.run([sys.executable, str(HERE / "fresh_windows.py"), "--db", str(copy), "--work", str(args.work),
                            *windows_args], check=True, env=env)
        if args.index or home is not None:
            home = home or next(args.work.glob("local-*/home"))
            plugin = home / "plugins" / "project-history-recall"
            started = time.monotonic()
            try:
                subprocess.run([sys.executable, str(plugin), "index"], env={**env, "HERMES_HOME": str(home)},
                               timeout=args.index_seconds, stdout=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                pass
            print(f"index command: {time.monotonic() - started:.0f} s")
    finally:
        stop.touch()
        writer.wait(timeout=600)
    with sqlite3.connect(copy) as conn:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    print("writer:", json.dumps(json.loads(report.read_text())), "journal mode at the end:", mode)
    print("command:", " ".join(["python", "bench/journal_delete.py", *sys.argv[1:]]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
