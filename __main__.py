"""Command line: ``python -m project_history_recall index [--hermes-home DIR]``.

``index`` embeds every message of the projects the user consented to, with
a progress bar; searches then answer with ``semantic_status: "ready"``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def _bar(done: int, total: int, started: float) -> None:
    width = 30
    filled = int(width * done / total) if total else width
    rate = done / max(time.monotonic() - started, 1e-6)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} messages  {rate:.0f}/s ")
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m project_history_recall", description=__doc__.split("\n\n")[0])
    parser.add_argument("--hermes-home", type=Path, help="the Hermes profile folder (default: $HERMES_HOME or ~/.hermes)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("index", help="embed the consented projects' messages (progress bar on stderr)")
    args = parser.parse_args(argv)
    if args.hermes_home:
        os.environ["HERMES_HOME"] = str(args.hermes_home)
    from . import search, store

    home = store.hermes_home()
    started = time.monotonic()
    try:
        result = search.index_projects(home=home, progress=lambda d, t: _bar(d, t, started))
    except store.StoreError as exc:
        result = {"success": False, "error": str(exc), "code": exc.code}
    sys.stderr.write("\n")
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0 if result.get("success") else 1


if __name__ == "__main__":
    sys.exit(main())
