"""What an index run with nothing new to embed reads of state.db, on the large bench state.db.

The index command first asks state.db which of the project's live
user/assistant messages the vector index lacks and how many it should hold
(``store.lacking_ids``: ids from Hermes' (session, active) index, rows only of
the messages not indexed; before it, ``store.unindexed_messages`` and
``store.count_indexable``, which read every row). With every message already
indexed, that is all it does with state.db; this times it for the biggest
project of the file that ``keyword_latency.py`` builds, with every indexable
message counted as indexed (the set is read before timing).

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
    # Every indexable message indexed: nothing is new.
    indexed = {int(r[0]) for r in conn.execute(f"SELECT m.id FROM messages m WHERE {store._INDEXABLE}", (scope.ids_json,))}
    print(f"{project['name']}: {len(scope.session_ids):,} sessions, {len(indexed):,} indexable messages; code {args.code}")
    if hasattr(store, "lacking_ids"):
        started = time.perf_counter()
        lacking, held = store.lacking_ids(conn, scope, indexed)
        print(f"lacking_ids: {time.perf_counter() - started:.2f} s, {len(lacking)} new, {held:,} held")
    else:
        started = time.perf_counter()
        missing = store.unindexed_messages(conn, scope, indexed, 10**9)
        scanned = time.perf_counter() - started
        started = time.perf_counter()
        total = store.count_indexable(conn, scope)
        counted = time.perf_counter() - started
        print(f"unindexed_messages: {scanned:.2f} s, {len(missing)} new; count_indexable: {counted:.2f} s, {total:,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
