"""What an index run costs before it embeds anything, on a home the cost bench indexed.

The index command first drops stale vectors and asks, for every consented project, which of its live
user/assistant messages the vector index lacks (``index_check.full_check``: ids from Hermes' (session,
active) index, the indexed ids from embeddings.db, rows read only of the messages not indexed). This
runs ``indexing.index_projects`` with a deadline that has already passed (all of that work, nothing
embedded) in new processes, one after another.

Run (after ``bench/semantic_cost.py --million``, which leaves the home):
  .venv/bin/python bench/index_noop.py [--home /tmp/phr-bench/phr-semcost-*/home] [--runs 3] [--code DIR]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _common  # noqa: E402

RUN = r"""
import json, sys, time
from pathlib import Path
sys.path.insert(0, {bench!r})
import _common
_common.ROOT = Path({code!r})
phr = _common.load_plugin()
started = time.perf_counter()
answer = phr.indexing.index_projects(home=Path({home!r}), deadline=time.monotonic())
print(json.dumps({{"s": round(time.perf_counter() - started, 2), "total": answer.get("total"),
                  "remaining": answer.get("remaining"), "success": answer.get("success")}}))
"""


def newest_home() -> Path:
    homes = sorted(glob.glob("/tmp/phr-bench/phr-semcost-*/home"), key=os.path.getmtime)
    if not homes:
        raise SystemExit("no home: run bench/semantic_cost.py --million first, or pass --home")
    return Path(homes[-1])


def run_once(home: Path, code: Path) -> dict:
    script = RUN.format(bench=str(HERE), code=str(code), home=str(home))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         env={**os.environ, "HERMES_HOME": str(home)})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=None)
    parser.add_argument("--runs", type=int, default=3, help="processes in all")
    parser.add_argument("--code", type=Path, default=_common.ROOT, help="the plugin checkout to run (default: this one)")
    args = parser.parse_args()
    home = args.home or newest_home()
    print(f"home {home}; code {args.code}")
    for run in range(args.runs):
        answer = run_once(home, args.code.resolve())
        print(f"run {run + 1}: {answer['s']:.2f} s"
              f" ({answer['total']:,} messages should be indexed, {answer['remaining']:,} not yet; success {answer['success']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
