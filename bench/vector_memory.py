"""What the vector leg costs a Hermes process: private memory, the first search, later searches.

Every Hermes CLI window, the gateway and every cron run is its own process,
so the cost that matters is per process. This builds (once, cached in
``--work``) an embeddings.db of ``--chunks`` random unit vectors under one
model's fingerprint, spread over sessions of a big project (``--share`` of
the chunks) and many small ones, then starts ``--processes`` fresh Python
processes at once. Each one, with nothing loaded:

1. times its first ``VectorIndex.search`` over the big project (the vector
   leg alone: no model load, no keyword leg);
2. times ``--reps`` more searches there and in one small project (p50, p95);
3. reads ``/proc/self/smaps_rollup`` before and after, once all of them have
   searched (so shared pages are seen as shared): the growth of Rss, Pss,
   Private_Dirty and Anonymous (what the process copied into its own memory)
   and of Private_Clean (file pages only this process maps: shared with the
   page cache, dropped under pressure, not copied).

First the index command's last step runs once (``VectorIndex.sync``: the
vectors copied into the shared files, their basis learned), unless
``--no-sync``. ``--code DIR`` runs the same against another checkout of the
plugin (an older commit, for a before/after). ``--cold`` drops the index's files from
the page cache first (as after a restart); ``--warm-up SECONDS`` has each
process run the session-start warm-up and wait before its first search. The first process ever after the index
grew also copies the new vectors into the shared vector files: run once
with ``--processes 1`` to see that cost, then again.

Run: .venv/bin/python bench/vector_memory.py --chunks 400000 --share 0.75 --processes 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import ROOT, percentile  # noqa: E402

FINGERPRINT = "bench-vectors-512"
BIG, SMALL = "big-project-session", "small-project-session"

#: What both child scripts start with: the plugin of ``code`` imported, and a provider that embeds nothing.
PRELUDE = r"""
import json, sys, time, os
from pathlib import Path
import numpy as np
sys.path.insert(0, {bench!r})
import _common
_common.ROOT = Path({code!r})
_common.load_plugin()
import importlib
vector_index = importlib.import_module("project_history_recall.vector_index")
vector_file = importlib.import_module("project_history_recall.vector_file")

class Provider:
    model_id = "bench"
    dims = {dims}
    fingerprint = {fingerprint!r}
    def load(self): pass
    def expect(self, dims): return dims == self.dims
    def outbound_text(self, text): return text
    def embed(self, texts): raise RuntimeError("the benchmark embeds nothing")
"""

CHILD = PRELUDE + r"""
def rollup():
    out = {{}}
    for line in open("/proc/self/smaps_rollup"):
        parts = line.split()
        if len(parts) >= 3 and parts[-1] == "kB":
            out[parts[0].rstrip(":")] = int(parts[1])
    return out

big = set(json.loads(Path({big!r}).read_text()))
small = set(json.loads(Path({small!r}).read_text()))
rng = np.random.default_rng(os.getpid())
def query():
    q = rng.standard_normal({dims}).astype(np.float32)
    return (q / np.linalg.norm(q))[None, :]
before = rollup()
warm_ms = None
t = time.perf_counter()
index = vector_index.VectorIndex(Path({db!r}), Provider())
if {warm_up} >= 0:  # a conversation starts: the warm-up, then the person types for a while
    index.warm()
    warm_ms = (time.perf_counter() - t) * 1000
    time.sleep({warm_up})
    t = time.perf_counter()
hits = index.search(query(), big, 3)
first = (time.perf_counter() - t) * 1000
assert hits, "no hits"
after_first = rollup()
big_ms, small_ms = [], []
for _ in range({reps}):
    t = time.perf_counter(); index.search(query(), big, 3); big_ms.append((time.perf_counter() - t) * 1000)
    t = time.perf_counter(); index.search(query(), small, 3); small_ms.append((time.perf_counter() - t) * 1000)
print(json.dumps({{"ready": True}}), flush=True)
while not Path({go!r}).exists():
    time.sleep(0.05)
end = rollup()
print(json.dumps({{"first_ms": first, "warm_ms": warm_ms, "big_ms": big_ms, "small_ms": small_ms, "before": before,
                  "after_first": after_first, "end": end}}), flush=True)
"""


def build(work: Path, chunks: int, dims: int, share: float) -> tuple[Path, Path, Path]:
    """The cached embeddings.db and the two scopes' session lists."""
    db = work / f"embeddings-{chunks}-{dims}-{share}.db"
    big, small = work / f"big-{chunks}-{share}.json", work / f"small-{chunks}-{share}.json"
    if db.exists() and big.exists() and small.exists():
        return db, big, small
    opened = _common_load().open_index(db.absolute())
    conn = opened.conn
    rng = np.random.default_rng(7)
    big_sessions = [f"{BIG}-{i}" for i in range(max(1, int(2000 * share)))]
    small_sessions = [f"{SMALL}-{p}-{i}" for p in range(20) for i in range(max(1, int(100 * (1 - share))))]
    n_big = int(chunks * share)
    t = time.perf_counter()
    batch = 20_000
    for start in range(0, chunks, batch):
        count = min(batch, chunks - start)
        vectors = rng.standard_normal((count, dims)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        rows = []
        for i in range(count):
            n = start + i
            sid = big_sessions[n % len(big_sessions)] if n < n_big else small_sessions[n % len(small_sessions)]
            rows.append((sid, n + 1, 0, f"h{n}", FINGERPRINT, vectors[i].astype("<f4").tobytes(), 0.0))
        with conn:
            conn.executemany("INSERT INTO chunks (session_id, message_id, chunk_index, content_hash, model_fingerprint, vector,"
                             " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    conn.close()
    big.write_text(json.dumps(big_sessions))
    small.write_text(json.dumps([s for s in small_sessions if s.startswith(f"{SMALL}-0-")]))
    print(f"built {db} ({chunks:,} chunks, {db.stat().st_size / 2**20:.0f} MiB) in {time.perf_counter() - t:.0f} s", flush=True)
    return db, big, small


SYNC = PRELUDE + r"""
index = vector_index.VectorIndex(Path({db!r}), Provider())
if hasattr(index, "sync"):
    index.sync()
print(vector_file.VectorFile(Path({db!r}), {fingerprint!r}).head())
"""


def sync(code: Path, db: Path, dims: int) -> str:
    """Run ``VectorIndex.sync`` of the checkout ``code`` on ``db`` in a process of its own; its head afterwards."""
    script = SYNC.format(bench=str(HERE), code=str(code), dims=dims, fingerprint=FINGERPRINT, db=str(db))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def evict(db: Path) -> None:
    """Drop embeddings.db and the vector files beside it from the page cache (clean pages no process maps)."""
    for path in [db, *db.parent.glob(f"{db.name}.*"), *db.parent.glob(f"{db.name}-*")]:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _common_load():
    """The plugin's index_file module (creates embeddings.db's schema as the plugin does)."""
    import importlib

    from _common import load_plugin

    load_plugin()
    return importlib.import_module("project_history_recall.index_file")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=400_000)
    parser.add_argument("--dims", type=int, default=512)
    parser.add_argument("--share", type=float, default=0.75, help="share of the chunks in the big project")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--work", type=Path, default=Path("/tmp/phr-vectors"))
    parser.add_argument("--code", type=Path, default=ROOT, help="the plugin checkout to run (default: this one)")
    parser.add_argument("--cold", action="store_true",
                        help="drop the index's files from the page cache first (as after a restart or memory pressure)")
    parser.add_argument("--no-sync", action="store_true",
                        help="do not run what the index command does at its end first (VectorIndex.sync: copy the "
                             "vectors into the shared files, learn their basis): the first process then copies them")
    parser.add_argument("--warm-up", type=float, default=-1.0, metavar="SECONDS",
                        help="each process runs the warm-up, waits SECONDS (someone typing), then searches")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    db, big, small = build(args.work, args.chunks, args.dims, args.share)
    if not args.no_sync:
        started = time.perf_counter()
        synced = sync(args.code.resolve(), db, args.dims)
        print(f"index command's sync (copy into the vector files, learn their basis): {time.perf_counter() - started:.1f} s; "
              f"head {synced}", flush=True)
    if args.cold:
        evict(db)
    go = Path(tempfile.mkdtemp()) / "go"
    script = CHILD.format(bench=str(HERE), code=str(args.code.resolve()), dims=args.dims, fingerprint=FINGERPRINT,
                          big=str(big), small=str(small), db=str(db), reps=args.reps, go=str(go), warm_up=args.warm_up)
    children = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
                for _ in range(args.processes)]
    for child in children:
        line = child.stdout.readline() if child.stdout else ""
        if '"ready"' not in line:
            print("a process failed:", line, file=sys.stderr)
            return 1
    go.write_text("")
    results = [json.loads(child.communicate()[0].strip().splitlines()[-1]) for child in children]

    def grow(r: dict, key: str, stage: str = "end") -> float:
        return (r[stage].get(key, 0) - r["before"].get(key, 0)) / 1024

    print(f"\n{args.chunks:,} chunks x {args.dims} dims ({db.stat().st_size / 2**20:.0f} MiB embeddings.db), big project "
          f"{args.share:.0%} of them, {args.processes} processes at once, code {args.code}\n")
    if args.warm_up >= 0:
        print("warm-up ms per process: " + ", ".join(f"{r['warm_ms']:.0f}" for r in results)
              + f"; then {args.warm_up:g} s before the first search\n")
    print("| process | first search ms | big p50 | big p95 | small p50 | small p95 | Rss +MB | Pss +MB | "
          "Private_Dirty +MB | Anonymous +MB | Private_Clean +MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(results, 1):
        print(f"| {i} | {r['first_ms']:.0f} | {percentile(r['big_ms'], 50):.1f} | {percentile(r['big_ms'], 95):.1f} | "
              f"{percentile(r['small_ms'], 50):.1f} | {percentile(r['small_ms'], 95):.1f} | {grow(r, 'Rss'):.0f} | "
              f"{grow(r, 'Pss'):.0f} | {grow(r, 'Private_Dirty'):.0f} | {grow(r, 'Anonymous'):.0f} | {grow(r, 'Private_Clean'):.0f} |")
    print(f"\ncommand: {' '.join(sys.argv)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
