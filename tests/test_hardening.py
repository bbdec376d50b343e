"""Hardening: searches while Hermes writes, fuzzed arguments, and secrets.

* **Concurrency.** A separate process appends messages through Hermes' own
  ``SessionDB`` (WAL, as Hermes runs it) while this process searches through
  ``model_tools.handle_function_call``. Every answer must be JSON with
  ``success: true``; the writer must never see an error; our process must
  never hold a write lock on state.db nor change it.
* **Fuzz.** hypothesis throws FTS5 operators, broken quoting, control
  characters, NUL, lone surrogates, 100k+ character strings, CJK, emoji and
  wrong JSON types at all three tools. Every answer is a JSON object with a
  boolean ``success``, and a failure always carries ``error`` and ``code``
  (never ``internal_error``, which would mean a swallowed traceback).
* **Secrets.** With the openai provider and a key in ``$HERMES_HOME/.env``,
  the key (and the ``.env`` text) never reaches a log record or an answer,
  also when the endpoint answers 401 (echoing the key back) or is down.

No timed assertions: waits are generous upper bounds, never expectations.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import World, result_sessions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TOOLS = ("project_history_search", "project_session_move", "project_history_semantic_consent")

# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def check_answer(raw: Any) -> dict[str, Any]:
    """Assert the tool-answer contract; returns the parsed answer.

    A str, UTF-8 encodable, parsing as a JSON object with a boolean
    ``success``; failures carry string ``error`` and ``code``; never
    ``internal_error`` nor a lock error.
    """
    assert isinstance(raw, str), type(raw)
    raw.encode("utf-8")
    answer = json.loads(raw)
    assert isinstance(answer, dict), answer
    assert isinstance(answer.get("success"), bool), answer
    if not answer["success"]:
        assert isinstance(answer.get("error"), str) and answer["error"], answer
        assert isinstance(answer.get("code"), str) and answer["code"], answer
        assert answer["code"] != "internal_error", answer
    assert "database is locked" not in raw.lower(), answer
    return answer


def dispatch(tool: str, args: Any, session_id: Any = "cur") -> str:
    """The raw string Hermes' real dispatcher returns for one tool call."""
    import model_tools

    return model_tools.handle_function_call(tool, args, "task-x", tool_call_id="c1", session_id=session_id)


def handler(tool: str) -> Any:
    """The handler the plugin registered in Hermes' tool registry."""
    from tools.registry import registry

    entry = registry.get_entry(tool)
    assert entry is not None, f"{tool} not registered"
    return entry.handler


def plugin(name: str) -> Any:
    return sys.modules[f"hermes_plugins.project_history_recall.{name}"]


# ---------------------------------------------------------------------------
# a. Searches while Hermes writes
# ---------------------------------------------------------------------------

#: A Hermes writer in its own process. argv: state.db path, report path,
#: seconds, interval (s), session ids (comma separated), repo path.
#: Appends through ``hermes_state.SessionDB`` at a steady rate, opens one new
#: session of the project per 100 messages, and writes a JSON report.
WRITER = r"""
import json, sqlite3, sys, time
from pathlib import Path
from hermes_state import SessionDB

db_path, report_path, seconds, interval, sids, repo = sys.argv[1:7]
seconds, interval, sids = float(seconds), float(interval), sids.split(",")
db = SessionDB(db_path=Path(db_path))
appended, created, errors, lock_errors, worst = 0, [], [], 0, 0.0
start = time.monotonic()
next_at = start
while time.monotonic() - start < seconds:
    sid = sids[appended % len(sids)]
    try:
        if appended and appended % 100 == 0:
            sid = f"w_new_{appended}"
            db.create_session(sid, "cli", cwd=repo)
            created.append(sid)
        t = time.perf_counter()
        db.append_message(sid, "assistant", f"writer websocket note {appended}: backoff with jitter, 数据库迁移 {appended}")
        worst = max(worst, time.perf_counter() - t)
        appended += 1
    except sqlite3.Error as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
        lock_errors += "locked" in str(exc).lower() or "busy" in str(exc).lower()
    next_at += interval
    time.sleep(max(0.0, next_at - time.monotonic()))
db.close()
Path(report_path).write_text(json.dumps({"appended": appended, "created": created, "errors": errors[:20],
                                         "error_count": len(errors), "lock_errors": lock_errors, "worst_s": worst}))
sys.exit(1 if errors else 0)
"""


def start_writer(world: World, sids: list[str], repo: Path, *, seconds: float, interval: float) -> tuple[subprocess.Popen, Path]:
    """Start the writer process on ``world``'s state.db; returns ``(process, report path)``."""
    report = world.tmp / "writer-report.json"
    env = {**__import__("os").environ, "HERMES_HOME": str(world.home)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(world.home / "state.db"), str(report), str(seconds), str(interval), ",".join(sids), str(repo)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    return proc, report


@pytest.fixture
def project(world: World) -> World:
    """One repo with three past sessions and the current one ('cur'); Hermes' writer closed."""
    repo = world.repo("app")
    world.session("old1", repo, messages=[("user", "the websocket backoff plan"), ("assistant", "use jitter")])
    world.session("old2", repo, style="cli", messages=[("assistant", "数据库迁移方案：先加列，再回填")])
    world.session("old3", repo, messages=[("user", "connection pool sizing for the error handler")])
    world.session("cur", repo, style="cli", messages=[("user", "what did we decide?")])
    world.repo_path = repo
    world.close()
    return world


def test_searches_while_hermes_writes(project: World):
    """A Hermes writer in another process and our searches never get in each other's way.

    Guards against: "database is locked" in an answer, a failed append in
    Hermes, or a search that fails while the WAL grows and is checkpointed.
    """
    proc, report_path = start_writer(project, ["old1", "old2", "old3"], project.repo_path, seconds=3.0, interval=0.004)
    answers, queries = [], ["websocket", "backoff jitter", "数据库迁移", "what did we decide about the websocket?", '"connection pool"']
    # Search for as long as the writer runs (at least a few rounds, in case it finished very fast).
    while proc.poll() is None or len(answers) < 20:
        query = queries[len(answers) % len(queries)]
        mode = ("keyword", "hybrid")[len(answers) % 2]
        answers.append(check_answer(dispatch("project_history_search", {"query": query, "mode": mode, "limit": 10})))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, (out, err, report_path.read_text() if report_path.exists() else None)
    report = json.loads(report_path.read_text())
    print("writer:", report, "searches:", len(answers))
    assert report["error_count"] == 0 and report["lock_errors"] == 0, report
    assert report["appended"] > 50, report  # a few seconds at a steady rate: hundreds, on any machine
    assert all(a["success"] is True for a in answers)
    assert all(a["semantic_status"] in ("consent_required", "disabled") for a in answers)
    # Everything the writer wrote is there, and the next search sees the new sessions.
    conn = sqlite3.connect(project.home / "state.db")
    try:
        written = conn.execute("SELECT COUNT(*) FROM messages WHERE content LIKE 'writer websocket note %'").fetchone()[0]
    finally:
        conn.close()
    assert written == report["appended"]
    final = check_answer(dispatch("project_history_search", {"query": "writer websocket note", "mode": "keyword", "limit": 10}))
    assert result_sessions(final), final
    assert final["sessions_in_scope"] == 4 + len(report["created"])


def test_no_write_lock_held_during_or_after_searches(project: World):
    """While searches run (and with the plugin's caches alive afterwards), another
    connection takes the write lock at once (``BEGIN IMMEDIATE``, no busy wait)."""
    stop = threading.Event()
    failures: list[str] = []
    rounds = [0]

    def searcher() -> None:
        queries = ["websocket", "数据库迁移", "connection pool", "col:x AND (", "问题"]
        while not stop.is_set():
            answer = check_answer(dispatch("project_history_search", {"query": queries[rounds[0] % len(queries)], "mode": "keyword"}))
            if not answer["success"]:
                failures.append(json.dumps(answer))
            rounds[0] += 1

    thread = threading.Thread(target=searcher, daemon=True)
    thread.start()
    probes = 0
    try:
        deadline = time.monotonic() + 60
        while (rounds[0] < 30 or probes < 200) and time.monotonic() < deadline and thread.is_alive():
            locker = sqlite3.connect(project.home / "state.db", timeout=0, isolation_level=None)
            try:
                locker.execute("BEGIN IMMEDIATE")  # raises 'database is locked' if anyone holds the write lock
                locker.execute("ROLLBACK")
            finally:
                locker.close()
            probes += 1
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not failures and rounds[0] >= 30 and probes >= 200, (failures, rounds, probes)
    # Caches alive, no search running: the lock is still free at once.
    locker = sqlite3.connect(project.home / "state.db", timeout=0, isolation_level=None)
    try:
        locker.execute("BEGIN IMMEDIATE")
        locker.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES ('old1', 'user', 'probe', 1)")
        locker.execute("ROLLBACK")
    finally:
        locker.close()


def table_snapshot(path: Path) -> tuple[list[tuple], list[tuple]]:
    conn = sqlite3.connect(path.as_uri() + "?mode=ro", uri=True)
    try:
        return (conn.execute("SELECT * FROM sessions ORDER BY id").fetchall(),
                conn.execute("SELECT * FROM messages ORDER BY id").fetchall())
    finally:
        conn.close()


def test_search_changes_nothing_in_a_live_wal_database(project: World):
    """With Hermes' writer connection open (WAL and shm in use, frames not yet
    checkpointed), a search leaves state.db, its WAL and both tables untouched
    and creates no rollback journal: the plugin's connections are read-only."""
    db_path = project.home / "state.db"
    for i in range(30):  # un-checkpointed frames in the WAL, as in a running Hermes
        project.say("old1", "assistant", f"live wal websocket frame {i}")
    wal = Path(str(db_path) + "-wal")
    assert wal.exists() and wal.stat().st_size > 0
    before = (db_path.read_bytes(), wal.read_bytes(), table_snapshot(db_path))
    consent_before = sorted(p.name for p in project.home.rglob("*"))
    for query in ("websocket", "数据库迁移", "问题", "col:x", '"unbalanced', "live wal frame"):
        for mode in ("keyword", "hybrid"):
            check_answer(dispatch("project_history_search", {"query": query, "mode": mode}))
    after = (db_path.read_bytes(), wal.read_bytes(), table_snapshot(db_path))
    assert after[0] == before[0], "state.db changed"
    assert after[1] == before[1], "state.db-wal changed"
    assert after[2] == before[2], "sessions or messages changed"
    assert not Path(str(db_path) + "-journal").exists()
    assert sorted(p.name for p in project.home.rglob("*")) == consent_before, "a search created files"
    # Hermes can still write and checkpoint afterwards.
    project.say("old1", "user", "after the searches")
    project.close()


def test_search_of_a_rollback_journal_database_creates_no_journal(project: World):
    """A state.db in DELETE journal mode (Hermes' NFS fallback): a search takes a
    shared lock only, and leaves no ``-journal`` and no WAL behind."""
    db_path = project.home / "state.db"
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    before = db_path.read_bytes()
    for query in ("websocket", "数据库迁移", "jitter"):
        answer = check_answer(dispatch("project_history_search", {"query": query, "mode": "keyword"}))
        assert answer["success"] is True and answer["results"], answer
    assert db_path.read_bytes() == before
    assert not Path(str(db_path) + "-journal").exists() and not Path(str(db_path) + "-wal").exists()
