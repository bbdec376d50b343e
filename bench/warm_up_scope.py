"""What the session-start warm-up maps into a process: its conversation's project only, or every vector.

On a home that ``semantic_cost.py`` left, each variant runs in a new Python
process: the warm-up (``warm_up.warm_up``) given the session of ``--project``
(as Hermes' hooks give it) or no session (every page of the vector files read
ahead), then one hybrid search from that session. Prints, per run, the
warm-up's seconds, the search's milliseconds and the process's resident and
private clean memory (``/proc/self/smaps_rollup``, kB: mapped file pages, shared
with every other process that maps them).

Run: .venv/bin/python bench/warm_up_scope.py /tmp/phr-bench/phr-semcost-XXXX/home [--project atlas-api] [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = r"""
import json, os, sys, time
from pathlib import Path
sys.path.insert(0, {bench!r})
import _common
phr = _common.load_plugin()
home = Path({home!r})
started = time.perf_counter()
thread = phr.warm_up.warm_up(home, session_id={session!r})
assert thread is not None, "no warm-up: this home has no consent"
thread.join()
warm = time.perf_counter() - started
started = time.perf_counter()
answer = phr.search.search_history(home=home, session_id={current!r}, query="how did we handle the flaky reconnect?", mode="hybrid")
assert answer["semantic_status"] == "ready", answer["semantic_status"]
first = time.perf_counter() - started
memory = {{line.split(":")[0]: int(line.split()[1]) for line in open("/proc/self/smaps_rollup") if line.split(":")[0] in ("Rss", "Private_Clean", "Private_Dirty")}}
print(json.dumps({{"warm_up_s": round(warm, 2), "first_search_ms": round(first * 1000, 1), **memory}}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("home", type=Path)
    ap.add_argument("--project", default="atlas-api")
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    meta = json.loads(Path(str((args.home / "state.db").resolve()) + ".meta.json").read_text())
    current = {p["name"]: p for p in meta["projects"]}[args.project]["current_session_id"]
    for _ in range(args.runs):
        for label, session in (("every vector", ""), ("the project's", current)):
            script = CHILD.format(bench=str(HERE), home=str(args.home), session=session, current=current)
            out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                                 env={**os.environ, "HERMES_HOME": str(args.home)})
            print(args.project, label, out.stdout.strip().splitlines()[-1], flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
