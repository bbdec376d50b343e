"""Cost of semantic search with the local model: indexing throughput, pick-up
of new messages, hybrid query latency at 100k and 300k indexed chunks, memory.

1. throughput: the plugin's local provider (1 thread, as configured in the
   plugin) embedding 1,000 synthetic developer-chat messages (EN/ZH mix);
2. pick-up: a project with 500 indexed messages gets 100 new ones; one hybrid
   search (which indexes within its 1.5 s budget) is timed and must end
   ``ready``;
3. hybrid latency: on the large bench state.db (``keyword_latency.py`` builds
   it), chunks are written straight into embeddings.db for every indexable
   message of a ~100k-chunk and a ~300k-chunk project (random unit vectors
   under the local model's fingerprint, each with its message's content hash:
   the vector leg's cost does not depend on their values), then hybrid
   searches from those projects are timed;
   The first query is timed in five new processes without any "complete up to" mark (the marks each
   one wrote are taken away before the next; the first two apart,
   ``fresh_process_first_query_without_marks_first_two_ms``: the first meets state.db's pages as the
   writing left them, then ``fresh_process_first_query_without_marks_ms``: as the first search after
   a repair), beside Hermes'
   built-in ``session_search`` in two new processes (``fresh_process_builtin_session_search_ms``), then,
   marked as the index command leaves them, in three new processes (``fresh_process_first_query_ms``), then in
   this one twice: cold (indexes reset, modules and caches kept), and after the
   session-start warm-up (``search.warm_up``) has loaded the model and matrix.
   Then ``varied_queries``: twice ``--reps`` different questions (plain, numbers, identifiers, Chinese),
   each asked once, beside Hermes' built-in ``session_search`` on the same question in this process.
   Keyword-mode searches (which read only the index's status) are timed with
   the index in memory, in a new process, and right after a warm-up started;
   After writing each project's chunks, the bench does what the index command
   does at its end (``VectorIndex.sync``: copy into the shared vector files,
   learn their basis) and reports how long that took. ``--million`` then
   grows the index to 1M chunks (seven projects) and times again from the
   largest;
4. memory: peak RSS of this process.

``--code DIR`` runs another checkout of the plugin (an older commit, for a before/after) with this bench.

Run: .venv/bin/python bench/semantic_cost.py [--db /tmp/phr-bench/home/state.db] [--reps 20] [--million] [--latency-only]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _common  # noqa: E402
from _common import load_plugin, semantic_entry, summary_ms  # noqa: E402

WORDS = ("websocket reconnect backoff jitter migration column backfill cache eviction token refresh "
         "pipeline wheel build deploy rollback schema index query latency timeout retry queue worker "
         "handler config flag feature branch merge review test fixture mock coverage lint").split()
ZH = ["数据库迁移方案", "连接池耗尽", "重试策略", "缓存失效", "部署回滚", "接口超时"]


def message(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(30, 90))]
    if rng.random() < 0.35:
        words.insert(rng.randrange(len(words)), rng.choice(ZH))
    return " ".join(words).capitalize() + "."


def throughput(phr, n: int) -> dict:
    from project_history_recall import embeddings

    rng = random.Random(7)
    texts = [message(rng) for _ in range(n)]
    out: dict = {"messages": n, "mean_chars": round(sum(map(len, texts)) / n)}
    with tempfile.TemporaryDirectory() as folder:
        embeddings.LocalProvider(threads=1, copy_folder=Path(folder)).load()  # writes the model's copy
        # The plugin's provider (weights mapped from the copy), then the package's own load, in turn.
        for label, provider in (("", embeddings.LocalProvider(threads=1, copy_folder=Path(folder))),
                                ("package_", embeddings.LocalProvider(threads=1))):
            provider.embed(["warm up"])
            start = time.perf_counter()
            for i in range(0, n, 64):
                provider.embed(texts[i : i + 64])
            elapsed = time.perf_counter() - start
            out[f"{label}seconds"], out[f"{label}messages_per_s"] = round(elapsed, 2), round(n / elapsed, 1)
    return out


def git_init(path: Path) -> None:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)


def write_local_config(home: Path) -> None:
    (home / "config.yaml").write_text(
        "plugins:\n  entries:\n    project-history-recall:\n      embedding:\n        provider: local\n")


def pickup(phr) -> dict:
    from hermes_state import SessionDB

    rng = random.Random(11)
    with tempfile.TemporaryDirectory(prefix="phr-pickup-") as tmp:
        home, repo = Path(tmp) / "home", Path(tmp) / "repo"
        home.mkdir()
        git_init(repo)
        os.environ["HERMES_HOME"] = str(home)
        db = SessionDB(db_path=home / "state.db")
        for s in range(10):
            db.create_session(f"s{s}", "cli", cwd=str(repo))
            for _ in range(50):
                db.append_message(f"s{s}", rng.choice(["user", "assistant"]), message(rng))
        db.create_session("cur", "cli", cwd=str(repo))
        db.append_message("cur", "user", "hi")
        write_local_config(home)
        semantic_entry(phr).record_consent(home=home, session_id="cur", decision="allow")
        semantic_entry(phr).index_projects(home=home)
        for _ in range(100):
            db.append_message("s3", rng.choice(["user", "assistant"]), message(rng))
        db.close()
        start = time.perf_counter()
        answer = phr.search.search_history(home=home, session_id="cur", query="websocket reconnect backoff", mode="hybrid")
        elapsed = time.perf_counter() - start
        phr.vector_index.reset_indexes()
        return {"new_messages": 100, "seconds": round(elapsed, 2), "status_after": answer["semantic_status"]}


def synthesize_chunks(phr, home: Path, conn: sqlite3.Connection, sessions: list[str], target: int,
                      provider=None) -> int:
    """Write chunks for every indexable message of ``sessions`` (some get 2 chunks) until ``target``, as
    indexing stores them but with random unit vectors: under ``provider``'s fingerprint (the local model's by
    default), each with the content hash of its text as indexing reads it (what a search checks every hit against:
    another hash, such as one of the text with its tool calls, has each such hit dropped and embedded again);
    a message without text gets none, as in indexing."""
    import numpy as np

    from project_history_recall import embeddings, vector_index

    provider = provider or embeddings.LocalProvider()
    dims = provider.dims or 512
    index = vector_index.VectorIndex(phr.paths.plugin_data_dir(home) / "embeddings.db", provider)
    # What the plugin's indexing would embed, read through its own functions: the rows it holds
    # (index_reads.indexable_row) and each one's text and session as a search checks them (store.shown_texts).
    listed = [mid for (mid,) in conn.execute(
        f"SELECT m.id FROM messages m WHERE m.session_id IN (SELECT value FROM json_each(?)) AND {phr.index_reads.indexable_row(conn)}",
        (json.dumps(sessions),))]
    shown: dict[int, tuple[str, str]] = {}
    for start in range(0, len(listed), 5000):
        shown.update(phr.store.shown_texts(conn, listed[start:start + 5000]))
    hashes = {mid: embeddings.content_hash(text) for mid, (_, text) in shown.items()}
    ids = [(mid, shown[mid][0]) for mid in listed if mid in shown]
    extra = max(0, target - len(ids))
    rng = np.random.default_rng(5)
    rows = []
    for n, (mid, sid) in enumerate(ids):
        for chunk in range(2 if n < extra else 1):
            vec = rng.standard_normal(dims).astype(np.float32)
            vec /= np.linalg.norm(vec)
            rows.append((sid, mid, chunk, hashes[mid], provider.fingerprint, vec.astype("<f4").tobytes(), time.time()))
    with index._conn:
        index._conn.executemany(
            "INSERT OR IGNORE INTO chunks (session_id, message_id, chunk_index, content_hash, model_fingerprint, vector, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    index.close()
    return len(rows)


def keyword_mode_costs(phr, home: Path, current: str, queries: list[str], reps: int) -> dict:
    """Keyword-mode searches, which read only the index's status (no matrix, no waiting): ms.

    ``index_in_memory``: the index is loaded and matches the file (status from
    memory); ``new_process``: nothing loaded (status counted in the file);
    ``during_warm_up``: one search sent right after a warm-up started.
    """
    def timed(n: int) -> list[float]:
        samples = []
        for i in range(n):
            start = time.perf_counter()
            answer = phr.search.search_history(home=home, session_id=current, query=queries[i % 3], mode="keyword")
            samples.append(time.perf_counter() - start)
            assert answer["semantic_status"] == "ready", answer["semantic_status"]
        return samples

    out = {"index_in_memory": summary_ms(timed(reps))}
    phr.vector_index.reset_indexes()
    out["new_process"] = summary_ms(timed(reps))
    phr.vector_index.reset_indexes()
    warming = semantic_entry(phr).warm_up(home)
    during = timed(1)[0]
    out["during_warm_up_ms"] = round(during * 1000, 1)
    out["warm_up_still_loading_then"] = warming is not None and warming.is_alive()
    if warming is not None:
        warming.join()
    return out


#: (project, its chunks, timed): 400k chunks, atlas-api holding 75 %
STAGES = (("lumen-web", 100_000, True), ("atlas-api", 300_000, True))
#: --million: then 1M chunks over seven projects (up to 2 per message), atlas-api holding 38 %, timed there
MILLION = (("lumen-web", 166_000, False), ("relic-core", 131_000, False), ("orbit-cli", 112_000, False),
           ("nimbus-infra", 103_000, False), ("quill-docs", 78_000, False), ("ember-ml", 26_000, False),
           ("atlas-api", 384_000, True))


FRESH = r"""
import os, sys, time
from contextlib import closing
from pathlib import Path
sys.path.insert(0, {bench!r})
import _common
_common.ROOT = Path({code!r})
phr = _common.load_plugin()
started = time.perf_counter()
answer = phr.search.search_history(home=Path({home!r}), session_id={current!r}, query={query!r}, mode="hybrid")
assert answer["semantic_status"] == "ready", answer["semantic_status"]
print(round((time.perf_counter() - started) * 1000, 1))
"""


BUILTIN = r"""
import json, os, sys, time
from contextlib import closing
from pathlib import Path
from hermes_state import SessionDB
from tools.session_search_tool import session_search
started = time.perf_counter()
db = SessionDB(db_path=Path({db!r}))
found = json.loads(session_search(query={query!r}, limit=3, db=db, current_session_id={current!r}))
assert found.get("success", True), found
print(round((time.perf_counter() - started) * 1000, 1))
"""


def varied_queries(n: int, seed: int = 7) -> list[str]:
    """``n`` different questions in the words the bench state.db is written in (``make_big_statedb``): plain
    questions, keyword lists, numbers ("error 4031"), identifiers (``cache_token``) and Chinese ones. Each is
    asked once: nothing of it (term counts, patterns) was worked out by an earlier search of this process; its
    messages' pages are in the page cache only if an earlier run asked it (the same ``seed`` gives the same ones)."""
    import make_big_statedb as big

    rng = random.Random(seed)
    verbs, nouns, adjs = big.VERBS, big.NOUNS, big.ADJS
    cjk = [line.strip("。，") for line in big.CJK_SENTENCES]
    shapes = [
        lambda: f"how did we {rng.choice(verbs)} the {rng.choice(adjs)} {rng.choice(nouns)}?",
        lambda: " ".join(rng.sample(nouns, 3)),
        lambda: f"why was the {rng.choice(nouns)} {rng.choice(adjs)} after we {rng.choice(verbs)} the {rng.choice(nouns)}",
        lambda: f"{rng.choice(nouns)} {rng.choice(adjs)} {rng.randint(100, 9999)}",
        lambda: f"{rng.choice(verbs)} {rng.choice(nouns)}_{rng.choice(nouns)}",
        lambda: (lambda t: t[(k := rng.randrange(max(1, len(t) - 5))):k + rng.randint(4, 6)])(rng.choice(cjk)),
        lambda: f"{rng.choice(cjk)[:4]} {rng.choice(nouns)}",
    ]
    out: list[str] = []
    while len(out) < n:
        query = shapes[len(out) % len(shapes)]()
        if query not in out:
            out.append(query)
    return out


def varied_latency(phr, home: Path, current: str, queries: list[str]) -> dict:
    """Each of ``queries`` once, hybrid, in this process, beside Hermes' built-in ``session_search`` on the
    same query (who goes first alternates: the first pays for state.db pages not yet read): ms."""
    from hermes_state import SessionDB
    from tools.session_search_tool import session_search

    db = SessionDB(db_path=home / "state.db")
    ours, builtin = [], []

    def hybrid(query: str) -> None:
        started = time.perf_counter()
        answer = phr.search.search_history(home=home, session_id=current, query=query, mode="hybrid")
        ours.append(time.perf_counter() - started)
        assert answer["semantic_status"] == "ready", answer["semantic_status"]

    def hermes(query: str) -> None:
        started = time.perf_counter()
        found = json.loads(session_search(query=query, limit=3, db=db, current_session_id=current))
        builtin.append(time.perf_counter() - started)
        assert found.get("success", True), found

    for i, query in enumerate(queries):
        for run in ((hybrid, hermes) if i % 2 == 0 else (hermes, hybrid)):
            run(query)
    db.close()
    slowest = sorted(zip(ours, queries), reverse=True)[:3]
    return {"queries": len(queries), **summary_ms(ours), "max_ms": round(max(ours) * 1000, 1),
            "slowest": [[q, round(t * 1000, 1)] for t, q in slowest], "builtin_session_search": summary_ms(builtin)}


def fresh_process_builtin(home: Path, current: str, query: str) -> float:
    """ms of Hermes' built-in ``session_search`` first call in a new Python process (modules imported), same
    state.db and page cache: what the first search of a window costs without the plugin."""
    script = BUILTIN.format(db=str(home / "state.db"), current=current, query=query)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         env={**os.environ, "HERMES_HOME": str(home)})
    return float(out.stdout.strip().splitlines()[-1])


def fresh_process_query(home: Path, current: str, query: str) -> float:
    """ms of the first hybrid query of a new Python process (plugin imported, nothing else done), as a new
    Hermes window's first search: the model's load, the project census, the index's bookkeeping, both legs."""
    script = FRESH.format(bench=str(HERE), code=str(_common.ROOT), home=str(home), current=current, query=query)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         env={**os.environ, "HERMES_HOME": str(home)})
    return float(out.stdout.strip().splitlines()[-1])


def hybrid_latency(phr, db_path: Path, reps: int, stages=STAGES) -> list[dict]:
    from project_history_recall import embeddings, settings, vector_file

    meta = json.loads(Path(str(db_path) + ".meta.json").read_text())
    projects = {p["name"]: p for p in meta["projects"]}
    work = Path(tempfile.mkdtemp(prefix="phr-semcost-", dir=str(db_path.parent.parent)))
    home = work / "home"
    home.mkdir()
    (home / "state.db").symlink_to(db_path)
    write_local_config(home)
    os.environ["HERMES_HOME"] = str(home)
    semantic_entry(phr).record_consent(home=home, session_id="", decision="allow", projects="all")
    out = []
    conn = phr.store.open_state_db(home)
    listing = phr.store.load_projects(home)
    attributor = phr.workspace.attributor_for(home, listing.projects)
    for name, target, timed in stages:
        current = projects[name]["current_session_id"]
        scope = phr.workspace.compute_scope(conn, attributor, current, db_key=str(db_path.resolve()))
        chunks = synthesize_chunks(phr, home, conn, list(scope.session_ids) + [current], target)
        if not timed:
            continue
        # What the index command does at its end: copy into the shared vector files, learn their basis.
        started = time.perf_counter()
        vectors = semantic_entry(phr).open_vectors(home, settings.load_settings(home))
        vectors.sync()
        synced = time.perf_counter() - started
        # The local model's ready-parsed copy is written by a profile's first load, once: not timed here.
        vectors.provider.load()
        queries = ["how did we handle the flaky reconnect?", "websocket backoff jitter", "数据库迁移怎么做"]
        # No "complete up to" marks yet (the chunks were written straight into the file): the first
        # search of a process checks every message, as the first after a repair would. New processes,
        # the marks each wrote taken away again before the next; they read the rows of every message
        # not indexed. The first meets state.db as the bench left it (pages this VM's reclaim paged out
        # after a minute unread), the others as a busy Hermes keeps it.
        top = phr.store.max_message_id(conn)
        unrecorded, unmarked = [], []
        for run in range(5):
            vectors.mark_complete([], top, vectors.complete_marks(set(), top), replace=True)
            (unrecorded if run < 2 else unmarked).append(fresh_process_query(home, current, queries[0]))
        builtin = [fresh_process_builtin(home, current, queries[0]) for _ in range(2)]
        # ... the index command ends by marking every project it completed.
        vectors.mark_complete([*scope.session_ids, current], top, vectors.complete_marks(set(), top), replace=True)
        fresh = [fresh_process_query(home, current, queries[0]) for _ in range(3)]
        phr.vector_index.reset_indexes()  # start like a new process: load the index from the file
        first = time.perf_counter()
        answer = phr.search.search_history(home=home, session_id=current, query=queries[0], mode="hybrid")
        cold = time.perf_counter() - first
        # Again as a new process, but with the session-start warm-up (model and matrix loaded in the
        # background before the first search). The keyword side is warm by now: the figure is the
        # semantic side's first-query cost after a warm-up.
        phr.vector_index.reset_indexes()
        started = time.perf_counter()
        warming = semantic_entry(phr).warm_up(home)
        assert warming is not None, "no warm-up: consent and config are written above"
        warming.join()
        warm_up = time.perf_counter() - started
        first = time.perf_counter()
        phr.search.search_history(home=home, session_id=current, query=queries[0], mode="hybrid")
        after_warm_up = time.perf_counter() - first
        for q in queries[1:]:  # each query once cold (first FTS pages, first df lookups), then measure warm
            phr.search.search_history(home=home, session_id=current, query=q, mode="hybrid")
        samples = []
        for i in range(reps):
            start = time.perf_counter()
            answer = phr.search.search_history(home=home, session_id=current, query=queries[i % 3], mode="hybrid")
            samples.append(time.perf_counter() - start)
        varied = varied_latency(phr, home, current, varied_queries(reps * 2, seed=len(out)))
        keyword = keyword_mode_costs(phr, home, current, queries, reps)
        out.append({"project": name, "chunks_written": chunks, "status": answer["semantic_status"],
                    "chunks_in_files": vector_file.VectorFile(
                        phr.paths.plugin_data_dir(home) / "embeddings.db", embeddings.LocalProvider().fingerprint).head().rows,
                    "index_sync_s": round(synced, 2), "fresh_process_first_query_ms": fresh,
                    "fresh_process_first_query_without_marks_ms": unmarked,
                    "fresh_process_first_query_without_marks_first_two_ms": unrecorded,
                    "fresh_process_builtin_session_search_ms": builtin,
                    "first_query_ms": round(cold * 1000, 1), "warm_up_s": round(warm_up, 2),
                    "first_query_after_warm_up_ms": round(after_warm_up * 1000, 1), **summary_ms(samples),
                    "varied_queries": varied, "keyword_mode": keyword})
        print(json.dumps(out[-1]), flush=True)
    conn.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, default=Path("/tmp/phr-bench/home/state.db"))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--million", action="store_true", help="then grow the index to 1M chunks and time again")
    ap.add_argument("--latency-only", action="store_true", help="skip throughput and pick-up")
    ap.add_argument("--code", type=Path, default=_common.ROOT,
                    help="the plugin checkout to run (default: this one; an older one for a before/after)")
    args = ap.parse_args()
    _common.ROOT = args.code.resolve()
    phr = load_plugin()
    report: dict = {}
    if not args.latency_only:
        report["throughput"] = throughput(phr, 1000)
        print("throughput:", json.dumps(report["throughput"]), flush=True)
        report["pickup"] = pickup(phr)
        print("pick-up:", json.dumps(report["pickup"]), flush=True)
    if not args.skip_latency:
        if not args.db.exists():
            print(f"{args.db} missing: build it with bench/keyword_latency.py first", file=sys.stderr)
            return 2
        report["hybrid"] = hybrid_latency(phr, args.db, args.reps, STAGES + (MILLION if args.million else ()))
    report["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(report, indent=2))
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
