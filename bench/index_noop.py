"""What an index run with nothing new to embed reads of state.db, on the large bench state.db.

The index command first asks state.db which of the project's live
user/assistant messages the vector index lacks (``store.unindexed_messages``)
and how many it should hold (``store.count_indexable``). With every message
already indexed, that is all it does with state.db; this times both for the
biggest project of the file that ``keyword_latency.py`` builds, with every
message counted as indexed.

Run: .venv/bin/python bench/index_noop.py [--home /tmp/phr-bench/home] [--code DIR]
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _common  # noqa: E402


class Everything:
    """A container holding every message id: nothing is new."""

    def __contains__(self, _: object) -> bool:
        return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=Path("/tmp/phr-bench/home"))
    parser.add_argument("--code", type=Path, default=_common.ROOT, help="the plugin checkout to run (default: this one)")
    args = parser.parse_args()
    _common.ROOT = args.code.resolve()
    _common.load_plugin()
    store = importlib.import_module("project_history_recall.store")
    workspace = importlib.import_module("project_history_recall.workspace")
    paths = importlib.import_module("project_history_recall.paths")
    meta = json.loads((args.home / "state.db.meta.json").read_text())
    project = next(p for p in meta["projects"] if p["name"] == meta["biggest_project"])
    conn = store.open_state_db(args.home)
    attributor = workspace.attributor_for(args.home, store.load_projects(args.home).projects)
    scope = workspace.compute_scope(conn, attributor, project["current_session_id"], db_key=paths.state_db_key(args.home))
    started = time.perf_counter()
    missing = store.unindexed_messages(conn, scope, Everything(), 10**9)
    scanned = time.perf_counter() - started
    started = time.perf_counter()
    total = store.count_indexable(conn, scope)
    counted = time.perf_counter() - started
    print(f"{project['name']}: {len(scope.session_ids):,} sessions, {total:,} indexable messages, {len(missing)} new")
    print(f"unindexed_messages: {scanned:.2f} s; count_indexable: {counted:.2f} s; code {args.code}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
