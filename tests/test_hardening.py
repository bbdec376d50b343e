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
from contextlib import closing
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

db_path, report_path, seconds, interval, sids, repo, journal = sys.argv[1:8]
seconds, interval, sids = float(seconds), float(interval), sids.split(",")
if journal == "delete":  # as Hermes 0.21 keeps a file out of WAL when the linked SQLite has the WAL-reset bug
    import hermes_state
    hermes_state.apply_wal_with_fallback = lambda conn, **_: conn.execute("PRAGMA journal_mode").fetchone()[0]
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
mode = db._conn.execute("PRAGMA journal_mode").fetchone()[0]
db.close()
Path(report_path).write_text(json.dumps({"appended": appended, "created": created, "errors": errors[:20],
                                         "error_count": len(errors), "lock_errors": lock_errors, "worst_s": worst,
                                         "journal_mode": mode}))
sys.exit(1 if errors else 0)
"""


def start_writer(world: World, sids: list[str], repo: Path, *, seconds: float, interval: float,
                 journal: str = "wal") -> tuple[subprocess.Popen, Path]:
    """Start the writer process on ``world``'s state.db, keeping its journal mode (``journal="delete"``: as Hermes 0.21
    keeps it when it is not in WAL); returns ``(process, report path)``."""
    report = world.tmp / "writer-report.json"
    env = {**__import__("os").environ, "HERMES_HOME": str(world.home)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(world.home / "state.db"), str(report), str(seconds), str(interval), ",".join(sids),
         str(repo), journal],
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


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_searches_while_hermes_writes(project: World, journal: str):
    """A Hermes writer in another process and our searches never get in each other's way.

    Guards against: "database is locked" in an answer, a failed append in
    Hermes, or a search that fails while the WAL grows and is checkpointed.
    In rollback-journal mode (Hermes 0.21 keeps a file so when the linked SQLite
    has the WAL-reset bug, or when configured), each read of a search holds a
    shared lock that the writer's commit waits for: the reads are short enough
    that Hermes' 1 s busy timeout is never reached.
    """
    if journal == "delete":
        with closing(sqlite3.connect(project.home / "state.db")) as conn:
            assert conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
    proc, report_path = start_writer(project, ["old1", "old2", "old3"], project.repo_path, seconds=3.0, interval=0.004,
                                     journal=journal)
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
    assert report["error_count"] == 0 and report["lock_errors"] == 0 and report["journal_mode"] == journal, report
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
    connection takes the write lock at once (``BEGIN IMMEDIATE``, no busy wait).

    Hermes' own connection stays open, as in a running Hermes: the WAL index is
    live. (When *no* connection is open, SQLite's WAL recovery in whichever
    connection opens first, a reader included, briefly takes the write lock;
    Hermes' writer waits that out with its busy timeout and retries.)
    """
    project.say("old1", "user", "Hermes is running")  # opens Hermes' SessionDB and keeps it open
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
    locker = sqlite3.connect(project.home / "state.db", timeout=0, isolation_level=None)
    thread.start()
    probes = 0
    try:
        deadline = time.monotonic() + 60
        while (rounds[0] < 30 or probes < 200) and time.monotonic() < deadline and thread.is_alive():
            locker.execute("BEGIN IMMEDIATE")  # raises 'database is locked' if anyone holds the write lock
            locker.execute("ROLLBACK")
            probes += 1
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not failures and rounds[0] >= 30 and probes >= 200, (failures, rounds, probes)
    # Caches alive, no search running: the lock is still free at once, and a write goes through.
    try:
        locker.execute("BEGIN IMMEDIATE")
        locker.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES ('old1', 'user', 'probe', 1)")
        locker.execute("ROLLBACK")
    finally:
        locker.close()
    project.say("old1", "user", "and Hermes still writes")


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


# ---------------------------------------------------------------------------
# b. Fuzz: hostile arguments for all three tools
# ---------------------------------------------------------------------------

#: FTS5 syntax, quoting hazards, control characters, lone surrogates, CJK, emoji.
PIECES = [
    "AND", "OR", "NOT", "NEAR", "NEAR(", "NEAR(websocket backoff, 2)", "NEAR(a b,", "*", "^", "^websocket",
    "websocket*", "*websocket", ":", "content:", "role:", "{content role}:", "-content:", "messages_fts:", "rank:",
    "(", ")", "((", "))", '"', '""', '"websocket backoff"', "'", "cat's", "\\", "%", "_", "%_%", "+", "-", "--", ",",
    ".", ";", "/*", "*/", "'; DROP TABLE messages; --", "websocket", "backoff", "jitter", "update_session_cwd",
    "src/app.py", "chat-send", "hermes-agent", "a:b", "数据库", "迁移", "问题", "数据库迁移方案", "「引号」", "🙂", "👍🏽",
    "👨‍👩‍👧", "\x00", "\x01", "\x07", "\x1b[31m", "\r\n", "\t", "\x7f", "\u200b", "\ufeff", "\u202e", "\ud800",
    "\udfff", "\udbff\udc00", "\U0010ffff", "\uffff", "null", "true", "0", "-1", "1e309", "NaN",
]


def weighted(*choices: tuple[int, Any]) -> Any:
    """Draw from each strategy with the given weight (``one_of`` flattens and dedupes, so it cannot weight)."""
    return st.sampled_from([strategy for weight, strategy in choices for _ in range(weight)]).flatmap(lambda strategy: strategy)


surrogates = st.integers(0xD800, 0xDFFF).map(chr)
any_char = st.one_of(st.characters(), surrogates, st.sampled_from(["\x00", "\x1f", "数", "🙂", '"', "*", ":", "("]))
texts = st.one_of(
    st.lists(st.sampled_from(PIECES), min_size=1, max_size=12).map(" ".join),
    st.lists(st.sampled_from(PIECES), min_size=1, max_size=12).map("".join),
    st.text(any_char, max_size=60),
    st.text(min_size=1, max_size=200),
)
huge = st.builds(lambda piece, n: ((piece + " ") * (n // (len(piece) + 1) + 1))[:n],
                 st.sampled_from(PIECES), st.integers(100_000, 250_000))
wrong_types = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(allow_nan=True, allow_infinity=True),
    st.lists(st.one_of(st.integers(), st.text(max_size=5), st.none()), max_size=3),
    st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=5)), max_size=3),
)
values = st.one_of(texts, wrong_types, huge)
extra_keys = st.dictionaries(st.sampled_from(["extra", "session_id", "task_id", "query ", "Query", "", "\x00", "🙂"]),
                             st.one_of(texts, wrong_types), max_size=2)


def tool_args(fields: dict[str, Any]) -> Any:
    """Arguments for one call: usually an object (any subset of ``fields``, plus
    stray keys), sometimes not an object at all, or the object as a JSON string."""
    obj = st.builds(lambda known, extra: {**extra, **known}, st.fixed_dictionaries({}, optional=fields), extra_keys)
    return weighted((5, obj), (1, obj.map(lambda d: json.dumps(d))), (1, wrong_types), (1, texts))


#: Well-typed searches (hostile text, valid mode and limit) reach the query parser, FTS,
#: LIKE and the vector leg; the rest exercise argument validation.
WELL_TYPED_SEARCH = st.fixed_dictionaries(
    {"query": weighted((20, texts), (1, huge))},
    optional={"mode": st.sampled_from(["hybrid", "keyword", "semantic", "KEYWORD", " semantic "]),
              "limit": st.one_of(st.integers(-5, 20), st.sampled_from(["3", "7.5", "10"])),
              "since": st.sampled_from(["2026-01-01", "7d", "12h", "2026-02-10T13:00+08:00", "2026-02-10T05:00Z", ""]),
              "until": st.sampled_from(["2030-01-01", "1w", "2026-02-28", ""]),
              "role": st.sampled_from(["user", "assistant", "tool", "USER", ""])},
)
WHEN = st.one_of(st.sampled_from(["2026-13-40", "99999999d", "0d", "-1d", "2026-02-30", "T", "yesterday", "2026-01-01T25:00",
                                  "9999-12-31", "0001-01-01", "2026-01-01T00:00+99:00"]), texts, wrong_types)
ANY_SEARCH = tool_args({
    "query": values,
    "mode": st.one_of(st.sampled_from(["hybrid", "keyword", "semantic", "KEYWORD", " semantic ", "fuzzy", ""]), texts, wrong_types),
    "limit": st.one_of(st.integers(-(10**20), 10**20), st.sampled_from(["3", "7.5", "1e3", "inf", "-inf", "nan", "many", "", "0x10", " 4 "]),
                       wrong_types),
    "since": WHEN,
    "until": WHEN,
    "role": st.one_of(st.sampled_from(["user", "system", "", "tool "]), texts, wrong_types),
    "cursor": st.one_of(st.sampled_from(["", "MTA6YWJj", "NTA6eHg", "=", "a" * 5000]), texts, wrong_types),
})
SEARCH_ARGS = weighted((3, WELL_TYPED_SEARCH), (1, ANY_SEARCH))
MOVE_ARGS = weighted(
    (2, st.fixed_dictionaries({"project_id": weighted((1, st.sampled_from(["", "Quasar", "quasar", "QUASAR", "@PID", "p_missing"])),
                                                      (1, texts))})),
    (1, tool_args({"project_id": weighted((1, st.sampled_from(["", "Quasar", "@PID"])), (2, values))})),
)
CONSENT_ARGS = weighted(
    (2, st.fixed_dictionaries({"decision": st.sampled_from(["allow", "decline", "ALLOW", " Decline "])},
                              optional={"projects": st.sampled_from(["this", "all", "ALL", " this "])})),
    (1, tool_args({"decision": weighted((1, st.sampled_from(["allow", "decline", "maybe", ""])), (1, values)),
                   "projects": weighted((1, st.sampled_from(["this", "all", "some", ""])), (1, values))})),
)
SESSION_IDS = weighted((12, st.just("cur")), (1, st.sampled_from(["", "   ", "missing", "\x00", "\ud800", "cur\x00", "x" * 5000])),
                       (1, st.none()))
VIA = st.sampled_from(["registry", "registry", "registry", "dispatch"])  # Hermes' dispatcher for a quarter of the calls



# A fuzz test of a tool's arguments: 100 calls in `make test` (docs/guarantees.md; the other property tests make 50),
# 1,000 in `make fuzz` (tests/conftest.py); the health checks that a test with a fixture, slow calls and large
# arguments trips are off.
fuzz = settings(max_examples=max(100, settings.default.max_examples),
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture
def arena(world: World, fake) -> World:
    """A project with history, an explicit project to move to, and the openai
    provider on a loopback fake (so consent and hybrid searches really embed)."""
    repo, other = world.repo("app"), world.repo("quasar")
    world.session("old1", repo, messages=[("user", "the websocket backoff plan"), ("assistant", "use jitter: update_session_cwd")])
    world.session("old2", repo, style="cli", messages=[("assistant", "数据库迁移方案：先加列，再回填 🙂")])
    world.session("cur", repo, style="cli", messages=[("user", "what did we decide?")])
    world.session("mover", repo, style="cli", messages=[("user", "I may be moved around")])
    world.pid = world.project("Quasar", [other])
    server = fake()
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    yield world
    plugin("vector_index").reset_indexes()


def call(world: World, tool: str, args: Any, session_id: Any, via: str) -> dict[str, Any]:
    """One fuzzed call through the registry handler or Hermes' dispatcher; returns the checked answer."""
    if isinstance(args, dict) and args.get("project_id") == "@PID":
        args = {**args, "project_id": world.pid}
    if via == "dispatch":
        raw = dispatch(tool, args, session_id)
    else:
        raw = handler(tool)(args, session_id=session_id, task_id="task-x")
    return check_answer(raw)


@fuzz
@given(args=SEARCH_ARGS, session_id=SESSION_IDS, via=VIA, grant=st.integers(0, 40))
def test_fuzz_search(arena: World, args, session_id, via, grant):
    """project_history_search answers JSON for any argument, before and after consent."""
    if grant == 0:  # now and then the user consents (or declines), so hybrid/semantic run both ways
        check_answer(handler("project_history_semantic_consent")({"decision": "allow"}, session_id="cur"))
    elif grant == 1:
        check_answer(handler("project_history_semantic_consent")({"decision": "decline"}, session_id="cur"))
    answer = call(arena, "project_history_search", args, session_id, via)
    if answer["success"]:
        assert isinstance(answer["results"], list) and len(answer["results"]) <= 10
        assert answer["semantic_status"] in ("disabled", "consent_required", "indexing", "partial", "ready", "unavailable",
                                             "no_project")


@fuzz
@given(args=MOVE_ARGS, session_id=SESSION_IDS.map(lambda s: "mover" if s == "cur" else s), via=VIA)
def test_fuzz_move(arena: World, args, session_id, via):
    """project_session_move answers JSON for any argument; a real move keeps the world consistent."""
    answer = call(arena, "project_session_move", args, session_id, via)
    if answer["success"]:
        assert answer["sessions_updated"] == ["mover"]
        assert arena.session_row("mover")["cwd"] == answer["cwd"]


@fuzz
@given(args=CONSENT_ARGS, session_id=SESSION_IDS, via=VIA)
def test_fuzz_consent(arena: World, args, session_id, via):
    """project_history_semantic_consent answers JSON for any argument; consent.json stays readable."""
    answer = call(arena, "project_history_semantic_consent", args, session_id, via)
    path = arena.home / "plugins" / "project-history-recall" / "data" / "consent.json"
    if answer["success"]:
        assert isinstance(json.loads(path.read_text()), dict)


@pytest.mark.parametrize("tool,args", [
    ("project_history_search", {"query": "websocket"}),
    ("project_session_move", {"project_id": ""}),
    ("project_history_semantic_consent", {"decision": "allow"}),
])
@pytest.mark.parametrize("session_id", ["\ud800", "cur\udfff"])
def test_session_id_with_lone_surrogates_is_not_found(arena: World, tool, args, session_id):
    """Found by the fuzz: a session id that is not valid UTF-8 made SQLite's
    parameter binding raise UnicodeEncodeError (``internal_error``); no session
    can have such an id, so it is ``session_not_found``."""
    answer = check_answer(handler(tool)(args, session_id=session_id, task_id="task-x"))
    assert answer["success"] is False and answer["code"] == "session_not_found", answer


# ---------------------------------------------------------------------------
# c. Secrets never leak
# ---------------------------------------------------------------------------

SECRET = "sk-test-SECRET-4f9c2e7a1b8d6053"
DOTENV = f"# Hermes keys\nOPENROUTER_API_KEY=sk-or-dotenv-OTHER-77e1\nPROJECT_HISTORY_EMBEDDING_API_KEY={SECRET}\n"


class Everything(logging.Handler):
    """Keeps every record, formatted with its traceback, at every level."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s %(args)r"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record) + repr(record.__dict__))


@pytest.fixture
def all_logs(caplog):
    """Every log record at DEBUG: root (caplog) plus a handler on each logger that might see the key."""
    caplog.set_level(logging.DEBUG)
    names = ("", "project_history_recall", "hermes_plugins", "hermes_plugins.project_history_recall", "openai", "httpx", "httpcore")
    keep = Everything()
    saved = []
    for name in names:
        logger = logging.getLogger(name)
        saved.append((logger, logger.level))
        logger.setLevel(logging.DEBUG)
        logger.addHandler(keep)
    yield lambda: keep.lines + [caplog.text] + [r.getMessage() + repr(r.__dict__) for r in caplog.records]
    for logger, level in saved:
        logger.removeHandler(keep)
        logger.setLevel(level)


def assert_no_secret(texts: list[str]) -> None:
    secrets = [SECRET, SECRET.removeprefix("sk-"), "sk-or-dotenv-OTHER-77e1", DOTENV.strip()]
    for text in texts:
        for secret in secrets:
            assert secret not in text, f"secret leaked: {text[:500]}"


def test_the_key_is_the_profile_s_own(project: World, fake, monkeypatch):
    """A gateway serving several profiles from one process holds the launching profile's keys in the process env:
    each profile's searches send the key of its own ``.env`` (also where the shell exports another, as Hermes reads
    the credentials it manages), and with profiles multiplexed a profile without a key of its own sends none, never
    the launching profile's."""
    from agent import secret_scope

    launching = "sk-launching-profile-0c5e8d2b9a7f"
    monkeypatch.setenv("PROJECT_HISTORY_EMBEDDING_API_KEY", launching)
    (project.home / ".env").write_text(DOTENV)
    server = fake()
    project.configure_embedding(provider="openai", base_url=server.base_url, model="text-embedding-3-small")
    check_answer(dispatch("project_history_semantic_consent", {"decision": "allow"}))
    answer = check_answer(dispatch("project_history_search", {"query": "websocket backoff", "mode": "hybrid"}))
    assert answer["semantic_status"] == "ready" and {r["auth"] for r in server.requests} == {f"Bearer {SECRET}"}, answer
    plugin("vector_index").reset_indexes()
    (project.home / ".env").write_text("OPENROUTER_API_KEY=sk-or-dotenv-OTHER-77e1\n")
    monkeypatch.setattr(secret_scope, "_MULTIPLEX_ACTIVE", True)
    sent = len(server.requests)
    answer = check_answer(dispatch("project_history_search", {"query": "websocket backoff jitter", "mode": "hybrid"}))
    assert answer["success"] is True and "old1" in result_sessions(answer), answer
    assert server.requests[sent:] and {r["auth"] for r in server.requests[sent:]} == {"Bearer not-needed"}  # no key
    plugin("vector_index").reset_indexes()
    # Hermes scopes a multiplexed turn to its profile's secrets (a context variable): the vector leg's thread sees it
    scoped, sent = "sk-scoped-profile-5e1f0a9c3b7d", len(server.requests)
    token = secret_scope.set_secret_scope({"PROJECT_HISTORY_EMBEDDING_API_KEY": scoped})
    try:
        answer = check_answer(dispatch("project_history_search", {"query": "websocket backoff retry", "mode": "hybrid"}))
    finally:
        secret_scope.reset_secret_scope(token)
    assert answer["semantic_status"] == "ready" and {r["auth"] for r in server.requests[sent:]} == {f"Bearer {scoped}"}
    plugin("vector_index").reset_indexes()


def test_api_key_never_in_logs_or_answers(project: World, fake, all_logs, monkeypatch):
    """The embedding key from ``$HERMES_HOME/.env`` is sent to the endpoint, and to
    nowhere else: not in an answer nor a log record (DEBUG included), also when the
    endpoint refuses it with 401 and echoes it back, or is down."""
    monkeypatch.delenv("PROJECT_HISTORY_EMBEDDING_API_KEY", raising=False)
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    (project.home / ".env").write_text(DOTENV)
    answers: list[str] = []

    def ask(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        raw = dispatch(tool, args)
        answers.append(raw)
        return check_answer(raw)

    refusing = fake(refuse=True)
    project.configure_embedding(provider="openai", base_url=refusing.base_url, model="text-embedding-3-small")
    before = ask("project_history_search", {"query": "websocket backoff"})
    assert before["semantic_status"] == "consent_required"
    ask("project_history_semantic_consent", {"decision": "allow"})
    for mode in ("hybrid", "semantic", "keyword"):
        answer = ask("project_history_search", {"query": "websocket backoff", "mode": mode})
        assert answer["success"] is True and result_sessions(answer) == ["old1"]
        if mode != "keyword":
            assert answer["semantic_status"] == "unavailable" and "401" in answer["semantic_note"], answer
    auth = [r["auth"] for r in refusing.requests]
    assert auth and all(a == f"Bearer {SECRET}" for a in auth), "the key from .env was sent"
    plugin("vector_index").reset_indexes()
    refusing.close()

    # The endpoint is down (nothing listens on its port any more).
    project.configure_embedding(provider="openai", base_url=refusing.base_url, model="text-embedding-3-small")
    ask("project_history_semantic_consent", {"decision": "allow"})
    answer = ask("project_history_search", {"query": "websocket backoff", "mode": "hybrid"})
    assert answer["semantic_status"] == "unavailable" and "unreachable" in answer["semantic_note"], answer
    plugin("vector_index").reset_indexes()

    # A working endpoint: the key is used, and still appears nowhere else.
    server = fake()
    project.configure_embedding(provider="openai", base_url=server.base_url, model="text-embedding-3-small")
    ask("project_history_semantic_consent", {"decision": "allow"})
    answer = ask("project_history_search", {"query": "websocket backoff", "mode": "hybrid"})
    assert answer["semantic_status"] == "ready", answer
    assert server.requests and {r["auth"] for r in server.requests} == {f"Bearer {SECRET}"}
    from hermes_cli.plugins import get_plugin_manager

    answers.append(get_plugin_manager()._plugin_commands["history-index"]["handler"](""))
    plugin("vector_index").reset_indexes()

    assert len(answers) >= 10
    assert_no_secret(answers)
    logs = all_logs()
    assert any("embeddings" in line for line in logs), "the HTTP traffic was logged at DEBUG, and captured"
    assert_no_secret(logs)
    # Nor in any file of the profile but .env: Hermes' log files, consent.json, embeddings.db.
    for path in project.home.rglob("*"):
        if path.is_file() and path.name != ".env":
            assert SECRET.encode() not in path.read_bytes(), path
