"""Search latency against the depth of the deepest compression chain anywhere in state.db.

Issue 11: a search used to re-read the 64 newest sessions and walk each one's
parents one query per level, so a long compression chain in *another* project
made every search slow (2 ms at depth 0, 860 ms at depth 1,600).

This builds a throwaway HERMES_HOME (deleted at the end) with Hermes' own
``SessionDB`` and real ``git``:

* project A: a git repo with 40 CLI sessions of 10 messages (the asking
  project);
* project B: an unrelated explicit project (``projects_db.create_project``)
  whose newest sessions are one compression chain, written as Hermes'
  compression writes it (the parent ends with ``end_reason='compression'``,
  the child has ``parent_session_id`` and no cwd), grown to each depth in
  turn (0, 200, 800, 1600 by default).

At each depth it times ``search.search_history(mode="keyword")`` from a
session of A, in this process:

* ``first``: the first search after the plugin's caches are dropped (the
  membership cache, the attributors, the git probe): every session row read
  and resolved, as in a new process. Repeated ``--reps`` times;
* ``steady``: searches with the caches warm (each re-reads the newest
  sessions: the chain's tail). ``--reps`` times after one warm-up.

and prints p50 / p95 per depth and the command. ``--plugin PATH`` runs another
checkout (e.g. an export of an older commit) with the same data.

Usage::

    .venv/bin/python bench/lineage_depth.py
    .venv/bin/python bench/lineage_depth.py --depths 0,200,800,1600 --reps 20
    .venv/bin/python bench/lineage_depth.py --plugin /tmp/old-plugin
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _common  # noqa: E402
from _common import load_plugin, summary_ms  # noqa: E402

QUERY = "websocket reconnect backoff"
A_SESSIONS, A_MESSAGES = 40, 10


def _git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@example.invalid", "GIT_CONFIG_GLOBAL": "/dev/null"}
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, env=env)


def build_base(tmp: Path) -> tuple[Path, Any, str, str]:
    """HERMES_HOME with project A (repo) and project B (explicit, one root session); returns (home, db, asking id, chain head)."""
    from hermes_cli import projects_db
    from hermes_state import SessionDB

    home, work = tmp / "home", tmp / "work"
    home.mkdir()
    repo_a, folder_b = work / "alpha-api", work / "beta-notes"
    repo_a.mkdir(parents=True)
    folder_b.mkdir(parents=True)
    _git(repo_a, "init", "-q", "-b", "main")
    (repo_a / "README").write_text("a")
    _git(repo_a, "add", "README")
    _git(repo_a, "commit", "-q", "-m", "init")
    with projects_db.connect_closing(home / "projects.db") as conn:
        projects_db.create_project(conn, name="Beta notes", folders=[str(folder_b)])
    db = SessionDB(db_path=home / "state.db")
    topics = ["websocket reconnect storm", "ledger rounding", "backoff with jitter", "schema migration", "cache eviction"]
    ts = 1_700_000_000.0
    for i in range(A_SESSIONS):
        sid = f"a{i:03d}"
        db.create_session(sid, "cli", cwd=str(repo_a))
        for j in range(A_MESSAGES):
            ts += 1
            db.append_message(sid, "user" if j % 2 == 0 else "assistant",
                              f"session {i} turn {j}: {topics[(i + j) % len(topics)]} notes", timestamp=ts)
    db.create_session("a_current", "cli", cwd=str(repo_a))
    db.append_message("a_current", "user", "what did we decide before?", timestamp=ts + 1)
    db.create_session("b000000", "cli", cwd=str(folder_b))
    db.append_message("b000000", "user", "long-running notes session", timestamp=ts + 2)
    return home, db, "a_current", "b000000"


def grow_chain(db: Any, tail: str, have: int, want: int) -> str:
    """Compression continuations until the chain under the root is ``want`` deep; returns the new tail."""
    for depth in range(have + 1, want + 1):
        child = f"b{depth:06d}"
        db.end_session(tail, "compression")
        db.create_session(child, "cli", parent_session_id=tail)
        db.append_message(child, "assistant", f"continued notes part {depth}")
        tail = child
    return tail


def drop_caches(phr: Any) -> None:
    phr.state.reset()


def time_search(phr: Any, home: Path, session_id: str) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    answer = phr.search.search_history(home=home, session_id=session_id, query=QUERY, mode="keyword")
    return time.perf_counter() - started, answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depths", default="0,200,800,1600", help="chain depths, ascending (default 0,200,800,1600)")
    parser.add_argument("--reps", type=int, default=20, help="searches timed per depth and phase (default 20)")
    parser.add_argument("--plugin", type=Path, help="another checkout to load instead of this one")
    args = parser.parse_args(argv)
    depths = sorted(int(d) for d in args.depths.split(","))

    tmp = Path(tempfile.mkdtemp(prefix="phr-lineage-"))
    os.environ["HERMES_HOME"] = str(tmp / "home")  # before Hermes is imported: nothing touches ~/.hermes
    if args.plugin:
        _common.ROOT = args.plugin.resolve()
    phr = load_plugin()
    rows = []
    try:
        home, db, asking, tail = build_base(tmp)
        have = 0
        for depth in depths:
            tail = grow_chain(db, tail, have, depth)
            have = depth
            first, steady = [], []
            for _ in range(args.reps):
                drop_caches(phr)
                seconds, answer = time_search(phr, home, asking)
                first.append(seconds)
            assert answer.get("success") and answer["results"], answer
            assert answer["project"]["kind"] == "auto" and answer["sessions_in_scope"] == A_SESSIONS + 1, answer
            time_search(phr, home, asking)
            for _ in range(args.reps):
                seconds, answer = time_search(phr, home, asking)
                steady.append(seconds)
            rows.append((depth, summary_ms(first), summary_ms(steady)))
            print(f"  depth {depth}: done", file=sys.stderr)
        db.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    plugin = args.plugin or _common.ROOT
    print(f"lineage depth vs keyword search latency from an unrelated project ({plugin})")
    print(f"project A: {A_SESSIONS} sessions x {A_MESSAGES} messages; query {QUERY!r}; {args.reps} reps per cell\n")
    print("| chain depth | first p50 ms | first p95 ms | steady p50 ms | steady p95 ms |")
    print("|---:|---:|---:|---:|---:|")
    for depth, first, steady in rows:
        print(f"| {depth} | {first['p50_ms']} | {first['p95_ms']} | {steady['p50_ms']} | {steady['p95_ms']} |")
    command = " ".join([".venv/bin/python", "bench/lineage_depth.py", *(argv if argv is not None else sys.argv[1:])])
    print(f"\ncommand: {command}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
