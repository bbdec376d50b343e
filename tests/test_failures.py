"""The failure table (design §7) and bad inputs: always a JSON answer with
``success``, never a traceback, never a silent empty list."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import World, result_sessions, shared_world


def _two(world: World) -> World:
    """Repo app with one past session ('old') and the asking one ('cur')."""
    repo = world.repo("app")
    world.session("old", repo, messages=[("user", "the websocket backoff plan")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    return world


@pytest.fixture
def two(world: World):
    """:func:`_two` of a world of its own, for a test that changes it."""
    return _two(world)


def _twelve(world: World) -> None:
    """:func:`_two` and 11 more sessions saying 'websocket': 12 matching sessions."""
    _two(world)
    for i in range(11):
        world.session(f"s{i}", world.session_row("old")["cwd"], messages=[("user", f"websocket note {i}")])


# Shared by the tests that only read them (checked: they leave them unchanged).
_two_module, shared_two = shared_world(_two, "shared_two")
_twelve_module, shared_twelve = shared_world(_twelve, "shared_twelve")


BAD_SEARCH_ARGS = [
    # (args, expected code or None when it must succeed, why)
    ({}, "bad_argument", "query missing"),
    ({"query": None}, "bad_argument", "query null"),
    ({"query": ""}, "bad_argument", "query empty"),
    ({"query": "   \n\t"}, "bad_argument", "query whitespace"),
    ({"query": ["websocket"]}, "bad_argument", "query a list"),
    ({"query": {"q": 1}}, "bad_argument", "query an object"),
    ({"query": True}, "bad_argument", "query a boolean"),
    ({"query": 12345}, None, "query a number is searched as text"),
    ({"query": "websocket", "mode": "fuzzy"}, "bad_argument", "unknown mode"),
    ({"query": "websocket", "mode": 3}, "bad_argument", "mode of the wrong type"),
    ({"query": "websocket", "limit": "many"}, "bad_argument", "non-numeric limit"),
    ({"query": "websocket", "limit": True}, "bad_argument", "boolean limit"),
    ({"query": "websocket", "limit": [3]}, "bad_argument", "list limit"),
    ({"query": "websocket", "extra": "ignored"}, None, "unknown keys ignored"),
    ({"query": "x" * 100_000}, None, "100k-character query"),
    ({"query": "websocket " * 20_000}, None, "100k-character query of real words"),
    ({"query": "\x00\x01\x02"}, None, "control characters only"),
    ({"query": "\ud800\udfff websocket"}, None, "lone surrogates"),
    ({"query": '"unbalanced AND ( websocket'}, None, "FTS operators and unbalanced input"),
    ({"query": "NEAR(websocket backoff, 2)"}, None, "FTS function syntax"),
    ({"query": "col:websocket"}, None, "column filter syntax"),
]


@pytest.mark.parametrize("args,code,why", BAD_SEARCH_ARGS, ids=[c[2] for c in BAD_SEARCH_ARGS])
def test_bad_search_inputs(shared_two, args, code, why):
    answer = shared_two.call("project_history_search", args, "cur")
    if code is None:
        assert answer["success"] is True, answer
        assert isinstance(answer["results"], list)
        assert len(answer["results"]) <= 10
        if answer["results"] == []:
            assert answer.get("message"), "an empty result always says why"
    else:
        assert answer["success"] is False and answer["code"] == code, answer
        assert answer["error"]


NORMALISED_ARGS = [
    # (args, results expected of the 12 matching sessions, mode answered)
    ({}, 3, "hybrid"),
    ({"mode": None}, 3, "hybrid"),
    ({"mode": "KEYWORD"}, 3, "keyword"),
    ({"mode": " Semantic "}, 3, "semantic"),
    ({"limit": None}, 3, "hybrid"),
    ({"limit": ""}, 3, "hybrid"),
    ({"limit": 0}, 1, "hybrid"),
    ({"limit": -5}, 1, "hybrid"),
    ({"limit": 10_000}, 10, "hybrid"),
    ({"limit": 99, "mode": "keyword"}, 10, "keyword"),
    ({"limit": "7"}, 7, "hybrid"),
    ({"limit": 2.9}, 2, "hybrid"),
    ({"limit": "4.0"}, 4, "hybrid"),
]


@pytest.mark.parametrize("args,count,mode", NORMALISED_ARGS, ids=[str(a) for a, _, _ in NORMALISED_ARGS])
def test_limit_and_mode_are_normalised(shared_twelve, args, count, mode):
    """Against 12 matching sessions, so a clamp or a default that is wrong shows in the count."""
    answer = shared_twelve.call("project_history_search", {"query": "websocket", **args}, "cur")
    assert answer["success"] is True, answer
    assert answer["mode"] == mode
    assert len(answer["results"]) == count, answer
    assert len(set(result_sessions(answer))) == count, "one hit per session"


def test_long_query_is_flagged(shared_two):
    answer = shared_two.search("cur", "websocket " * 20_000)
    assert answer["success"] is True and answer["query_truncated"] is True
    assert result_sessions(answer) == ["old"]


@pytest.mark.parametrize("session_id", [None, "", "   "])
def test_no_session_id(shared_two, session_id):
    for tool, args in (("project_history_search", {"query": "websocket"}), ("project_session_move", {"project_id": ""})):
        answer = shared_two.call(tool, args, session_id)
        assert answer["success"] is False and answer["code"] == "no_session"
        assert "session id" in answer["error"]


def test_session_not_in_state_db(shared_two):
    answer = shared_two.search("missing-session", "websocket")
    assert answer["success"] is False and answer["code"] == "session_not_found"


@pytest.mark.parametrize("args", [None, [], "websocket", 42])
def test_arguments_not_an_object(shared_two, args):
    import json

    from project_history_recall.handlers import handle_move, handle_search

    for handler in (handle_search, handle_move):
        answer = json.loads(handler(args, session_id="cur"))
        assert answer["success"] is False and answer["code"] == "bad_argument"


@pytest.mark.parametrize(
    "value,code",
    [(None, "bad_argument"), (["p"], "bad_argument"), ({"id": "p"}, "bad_argument"), (True, "bad_argument"), (5, "project_not_found")],
)
def test_move_bad_project_id(shared_two, value, code):
    answer = shared_two.move("cur", value)
    assert answer["success"] is False and answer["code"] == code, answer
    assert shared_two.session_row("cur")["cwd"] == shared_two.session_row("old")["cwd"]


def test_no_state_db(world: World):
    answer = world.search("cur", "websocket")
    assert answer == {"success": False, "error": "session database not found", "code": "no_db"}
    answer = world.move("cur", "")
    assert answer["code"] == "no_db"
    assert not (world.home / "state.db").exists(), "a search must never create state.db"


def test_sessions_kept_in_postgres_are_said_so(two, capsys):
    """Hermes can keep a profile's sessions in PostgreSQL (config.yaml ``database: {backend: postgres}``); state.db is
    then absent or stale. Every tool and the command line say so (no stale answer, no false "no matches") and the move
    writes nothing; ``sqlite`` spelled out reads state.db as before."""
    from project_history_recall import command_line

    config = two.home / "config.yaml"
    original = config.read_text()
    config.write_text(original + "database:\n  backend: postgres\n")
    before = (two.home / "state.db").read_bytes()
    answers = [two.search("cur", "websocket"), two.move("cur", ""),
               two.call("project_history_read", {"session_id": "old"}, "cur"), two.call("project_history_recent", {}, "cur")]
    for answer in answers:
        assert answer["success"] is False and answer["code"] == "sessions_not_in_state_db", answer
        assert "postgres" in answer["error"] and "state.db" in answer["error"]
    assert (two.home / "state.db").read_bytes() == before
    code = command_line.main(["--hermes-home", str(two.home), "search", "websocket", "--cwd", str(two.work / "app")])
    printed = capsys.readouterr()
    assert code != 0 and "postgres" in printed.err and "Traceback" not in printed.err, printed
    command_line.main(["--hermes-home", str(two.home), "status"])
    assert "sessions in postgres" in capsys.readouterr().out
    config.write_text(original + "database:\n  backend: SQLite\n")
    assert two.search("cur", "websocket")["success"] is True


def test_corrupt_state_db(world: World):
    (world.home / "state.db").write_bytes(b"this is not a database" * 100)
    answer = world.search("cur", "websocket")
    assert answer["success"] is False and answer["code"] in ("db_unreadable", "db_error")


def test_corrupt_projects_db_degrades_to_auto(two):
    (two.home / "projects.db").write_bytes(b"garbage" * 100)
    answer = two.search("cur", "websocket")
    assert answer["success"] is True and result_sessions(answer) == ["old"]
    assert answer["project"]["kind"] == "auto" and "projects.db unreadable" in answer["projects_note"]


def _table_leaves(data: bytes, page_size: int, root: int) -> list[int]:
    """The leaf pages of a table b-tree, leftmost first (SQLite's file format)."""
    offset = (root - 1) * page_size
    header = offset + (100 if root == 1 else 0)
    kind = data[header]
    if kind == 0x0D:
        return [root]
    assert kind == 0x05, f"page {root} is not a table b-tree page"
    cells = int.from_bytes(data[header + 3 : header + 5], "big")
    children = []
    for i in range(cells):
        pointer = int.from_bytes(data[header + 12 + 2 * i : header + 14 + 2 * i], "big")
        children.append(int.from_bytes(data[offset + pointer : offset + pointer + 4], "big"))
    children.append(int.from_bytes(data[header + 8 : header + 12], "big"))
    return [leaf for child in children for leaf in _table_leaves(data, page_size, child)]


def damage_fts(world: World, table: str) -> None:
    """Overwrite, in the real file, every page of an FTS table's segment store but its first.

    ``<table>_data``'s first leaf holds FTS5's structure and averages records,
    so the table still opens; every other leaf holds term lists, which now
    read as "database disk image is malformed". Filler messages first make
    the store span several pages; Hermes' own connection is closed and the WAL
    checkpointed, so the damage is in the main file every reader opens.
    """
    for i in range(300):
        world.say("filler", "user", f"filler message {i} about websocket backoff and 数据库迁移 details " * 3)
    world.close()
    conn = sqlite3.connect(world.home / "state.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (f"{table}_data",)).fetchone()[0]
    conn.close()
    path = world.home / "state.db"
    leaves = _table_leaves(path.read_bytes(), page_size, root)
    assert len(leaves) > 1, "the segment store fits one page: add filler"
    with open(path, "r+b") as f:
        for leaf in leaves[1:]:
            f.seek((leaf - 1) * page_size)
            f.write((b"\xff\x00damaged" * page_size)[:page_size])
    check = sqlite3.connect(path)
    probe = "数据库迁移" if "trigram" in table else "websocket"
    with pytest.raises(sqlite3.DatabaseError, match="malformed"):
        check.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (f'"{probe}"',)).fetchall()
    check.close()


@pytest.mark.parametrize("mode", ["keyword", "hybrid", "semantic"])
def test_a_damaged_fts_index_degrades_to_substring_search(two, mode):
    """'database disk image is malformed' from messages_fts: success, the right session, and a note saying so (on
    0.19's layout, with FTS5's own rebuild: 0.19 has no optimize-storage)."""
    two.session("other", two.session_row("old")["cwd"], messages=[("user", "nothing relevant")])
    two.session("filler", two.work / "elsewhere")
    damage_fts(two, "messages_fts")
    answer = two.search("cur", "websocket backoff", mode=mode)
    assert answer["success"] is True and result_sessions(answer) == ["old"]
    assert answer["strategy"] == "like-damaged" and "damaged" in answer["keyword_note"]
    assert "'rebuild'" in answer["keyword_note"] and "optimize-storage" not in answer["keyword_note"]


def test_a_damaged_trigram_index_degrades_to_substring_search(two):
    two.say("old", "assistant", "数据库迁移方案：先加列，再回填")
    two.session("filler", two.work / "elsewhere")
    damage_fts(two, "messages_fts_trigram")
    answer = two.search("cur", "数据库迁移", mode="keyword")
    assert answer["success"] is True and result_sessions(answer) == ["old"]
    assert "damaged" in answer["keyword_note"]


def test_substring_fallback_matches_identifiers_literally(two):
    """With the FTS index damaged, '_' in an identifier is not a LIKE wildcard."""
    repo = two.session_row("old")["cwd"]
    two.session("ident", repo, messages=[("assistant", "call update_session_cwd here")])
    two.session("decoy", repo, messages=[("assistant", "call updateXsessionYcwd here")])
    two.session("filler", two.work / "elsewhere")
    damage_fts(two, "messages_fts")
    answer = two.search("cur", "update_session_cwd", limit=10)
    assert result_sessions(answer) == ["ident"] and "like" in answer["strategy"]


def test_check_fn_follows_hermes_home(world: World, monkeypatch):
    from project_history_recall.handlers import check_available

    assert check_available() is True
    monkeypatch.setenv("HERMES_HOME", str(world.tmp / "does-not-exist"))
    assert check_available() is False


def test_handler_never_raises_on_internal_errors(shared_two, monkeypatch):
    import sys

    plugin_search = sys.modules["hermes_plugins.project_history_recall.search"]

    def boom(**kw):
        raise RuntimeError("unexpected")

    monkeypatch.setattr(plugin_search, "search_history", boom)
    answer = shared_two.search("cur", "websocket")
    assert answer == {"success": False, "error": "internal error in project_history_search: RuntimeError", "code": "internal_error"}


def test_state_db_read_only_even_if_writable(two):
    """Searching leaves state.db byte-identical and never creates projects.db."""
    db_path = two.home / "state.db"
    two.close()
    before = db_path.read_bytes()
    mtime = os.stat(db_path).st_mtime_ns
    for q in ("websocket", "数据库", "迁移", "col:x"):
        two.search("cur", q)
    assert db_path.read_bytes() == before and os.stat(db_path).st_mtime_ns == mtime
    assert not (two.home / "projects.db").exists()


def test_paths_with_uri_metacharacters(tmp_path, monkeypatch):
    """A HERMES_HOME containing '#', '?' or '%' opens the right file, read-only."""
    from conftest import git
    from hermes_state import SessionDB

    weird = tmp_path / "we#ird?home%20x"
    weird.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(weird))
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    db = SessionDB(db_path=weird / "state.db")
    for sid, text in (("a", "weird home websocket"), ("b", "hi")):
        db.create_session(sid, "cli", cwd=str(repo))
        db.append_message(sid, "user", text)
    db.close()
    from project_history_recall import paths, search

    answer = search.search_history(home=paths.hermes_home(), session_id="b", query="websocket")
    assert result_sessions(answer) == ["a"]
    assert not any(p.name.startswith("we") and p != weird for p in tmp_path.iterdir())


def test_cjk_without_trigram_table_uses_like(two):
    """SQLite builds without the trigram tokenizer have no messages_fts_trigram."""
    two.say("old", "assistant", "数据库迁移方案：先加列，再回填")
    two.close()
    conn = sqlite3.connect(two.home / "state.db")
    conn.executescript(
        "DROP TRIGGER IF EXISTS messages_fts_trigram_insert; DROP TRIGGER IF EXISTS messages_fts_trigram_delete;"
        "DROP TRIGGER IF EXISTS messages_fts_trigram_update; DROP TABLE messages_fts_trigram;"
    )
    conn.close()
    answer = two.search("cur", "数据库迁移 websocket", limit=3)
    assert result_sessions(answer) == ["old"] and "like" in answer["strategy"]


def test_profiles_are_separate(world: World, tmp_path, monkeypatch):
    """Each profile (HERMES_HOME) searches its own state.db."""
    from hermes_state import SessionDB

    repo = world.repo("shared")
    world.session("a_old", repo, messages=[("user", "profile A websocket")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    other = tmp_path / "profile_b"
    other.mkdir()
    db = SessionDB(db_path=other / "state.db")
    db.create_session("b_old", "cli", cwd=str(repo))
    db.append_message("b_old", "user", "profile B websocket")
    db.create_session("cur", "cli", cwd=str(repo))
    db.close()
    assert result_sessions(world.search("cur", "websocket")) == ["a_old"]
    monkeypatch.setenv("HERMES_HOME", str(other))
    assert result_sessions(world.search("cur", "websocket")) == ["b_old"]


def test_import_has_no_side_effects(tmp_path):
    """Importing the plugin opens nothing, starts nothing, creates nothing."""
    import subprocess
    import sys

    from conftest import ROOT

    home = tmp_path / "never-created"
    code = (
        "import importlib.util, sys, threading\n"
        f"spec = importlib.util.spec_from_file_location('project_history_recall', {str(ROOT / '__init__.py')!r}, "
        f"submodule_search_locations=[{str(ROOT)!r}])\n"
        "m = importlib.util.module_from_spec(spec); sys.modules[spec.name] = m; spec.loader.exec_module(m)\n"
        # the package's __init__ imports none of its modules (register does): these are what Hermes' load imports
        "import project_history_recall.commands, project_history_recall.handlers, project_history_recall.command_line\n"
        "assert threading.active_count() == 1, threading.enumerate()\n"
        "assert 'hermes_state' not in sys.modules and 'model_tools' not in sys.modules\n"
        # nor redaction, which compiles its patterns as it loads (0.14 s of CPU): a local model sends nothing
        "from pathlib import Path\n"
        "from project_history_recall import config_schema, settings\n"
        f"assert config_schema.provider_spec(settings.load_settings(Path({str(home)!r}))).provider == 'local'\n"
        "assert 'project_history_recall.redact' not in sys.modules\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env={"HERMES_HOME": str(home), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    assert not home.exists()


def test_answers_are_always_encodable(shared_two):
    """A lone surrogate echoed in an error must not make the answer unencodable."""
    import json

    from project_history_recall.handlers import handle_search

    raw = handle_search({"query": "x", "mode": "\ud800bad"}, session_id="cur")
    raw.encode("utf-8")
    assert json.loads(raw)["code"] == "bad_argument"


def test_settings_are_re_read_only_when_config_yaml_changes(tmp_path):
    from project_history_recall import settings

    config = tmp_path / "config.yaml"
    assert settings.load_settings(tmp_path).embedding.provider == "local", "no file: defaults"
    config.write_text("plugins:\n  entries:\n    project-history-recall:\n      embedding: {provider: none}\n")
    first = settings.load_settings(tmp_path)
    assert first.embedding.provider == "none"
    assert settings.load_settings(tmp_path) is first, "unchanged file: the parsed settings are reused"
    replacement = tmp_path / "config.yaml.new"
    replacement.write_text("plugins:\n  entries:\n    project-history-recall:\n      embedding: {provider: openai}\n")
    replacement.replace(config)  # same size, maybe the same mtime tick: a new inode
    assert settings.load_settings(tmp_path).embedding.provider == "openai"
    config.write_text(": not yaml [")
    assert settings.load_settings(tmp_path).embedding.provider == "local", "unreadable: defaults"
    config.unlink()
    assert settings.load_settings(tmp_path).embedding.provider == "local"


# A read of /proc/self/mem fails with EIO: SQLite's real "disk I/O error", the error a read-only reader of
# state.db meets while another process checkpoints or resets the WAL (on macOS and WSL2; it cannot be timed
# here, so the failing reads are pointed at that file instead).
_EIO = Path("/proc/self/mem")


def _opens_fail(monkeypatch, times: int, where: str = "state_db_path") -> list[int]:
    """The next ``times`` opens of the file ``paths.<where>`` names (state.db, or projects.db) read ``_EIO``; returns
    the list the opens are counted in."""
    paths = sys.modules["hermes_plugins.project_history_recall.paths"]
    real, opened = getattr(paths, where), []

    def flaky(home):
        opened.append(1)
        return _EIO if len(opened) <= times else real(home)

    monkeypatch.setattr(paths, where, flaky)
    return opened


@pytest.mark.skipif(not _EIO.is_file(), reason="needs Linux's /proc/self/mem")
@pytest.mark.parametrize("tool,args", [
    ("project_history_search", {"query": "websocket", "mode": "keyword"}),
    ("project_history_read", {"session_id": "old"}),
    ("project_history_recent", {}),
])
def test_a_disk_io_error_for_a_moment_is_read_again(shared_two, monkeypatch, tool, args):
    opened = _opens_fail(monkeypatch, 2)
    answer = shared_two.call(tool, args, "cur")
    assert answer["success"] is True and "backoff plan" in json.dumps(answer), answer
    assert len(opened) >= 3  # two attempts met the error, the third read


@pytest.mark.skipif(not _EIO.is_file(), reason="needs Linux's /proc/self/mem")
def test_a_disk_io_error_that_lasts_is_a_temporary_database_error(shared_two, monkeypatch):
    opened = _opens_fail(monkeypatch, 10**6)
    answer = shared_two.search("cur", "websocket", mode="keyword")
    assert answer == {"success": False, "error": "session database unreadable: disk I/O error", "code": "db_unreadable",
                      "temporary": True}, answer
    assert len(opened) == 3


@pytest.mark.skipif(not _EIO.is_file(), reason="needs Linux's /proc/self/mem")
def test_a_disk_io_error_inside_the_keyword_leg_is_read_again_not_taken_for_a_damaged_index(shared_two, monkeypatch):
    try:
        sqlite3.connect(f"file:{_EIO}?mode=ro", uri=True).execute("SELECT 1 FROM sqlite_master")
    except sqlite3.OperationalError as exc:
        eio = exc
    fts = sys.modules["hermes_plugins.project_history_recall.fts"]
    real, calls = fts.session_candidates, []

    def once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise eio
        return real(*args, **kwargs)

    monkeypatch.setattr(fts, "session_candidates", once)
    answer = shared_two.search("cur", "websocket", mode="keyword")
    assert answer["success"] and answer["strategy"] == "words" and "keyword_note" not in answer, answer
    assert result_sessions(answer) == ["old"] and len(calls) == 2


def _billing(world: World) -> World:
    """:func:`_two` with repo app made project Billing in projects.db: 'old' is Billing's, never auto's."""
    _two(world)
    world.project("Billing", [Path(world.session_row("old")["cwd"])])
    return world


_billing_module, shared_billing = shared_world(_billing, "shared_billing")


@pytest.mark.skipif(not _EIO.is_file(), reason="needs Linux's /proc/self/mem")
@pytest.mark.parametrize("tool,args", [
    ("project_history_search", {"query": "websocket", "mode": "keyword"}),
    ("project_history_read", {"session_id": "old"}),
    ("project_history_recent", {}),
])
def test_a_disk_io_error_reading_projects_db_for_a_moment_is_read_again(shared_billing, monkeypatch, tool, args):
    """projects.db meets SQLite's "disk I/O error" twice: the whole read is run again and answers in project Billing.
    It answered at once in the auto project of repo app, another project, saying only that projects.db was
    unreadable."""
    opened = _opens_fail(monkeypatch, 2, "projects_db_path")
    answer = shared_billing.call(tool, args, "cur")
    assert answer["success"] is True and "backoff plan" in json.dumps(answer), answer
    assert answer["project"]["kind"] == "explicit" and answer["project"]["name"] == "Billing", answer
    assert "projects_note" not in answer and len(opened) >= 3


@pytest.mark.skipif(not _EIO.is_file(), reason="needs Linux's /proc/self/mem")
@pytest.mark.parametrize("tool,args", [
    ("project_history_search", {"query": "websocket", "mode": "keyword"}),
    ("project_history_read", {"session_id": "old"}),
    ("project_history_recent", {}),
    ("project_session_move", {"project_id": "Billing"}),
    ("project_session_move", {"project_id": ""}),  # Home: the project it leaves is projects.db's to say
])
def test_a_disk_io_error_reading_projects_db_that_lasts_is_a_temporary_error(shared_billing, monkeypatch, tool, args):
    """It lasts: a temporary failure, not an answer from another project (nor, for a move, 'project not found')."""
    _opens_fail(monkeypatch, 10**6, "projects_db_path")
    answer = shared_billing.call(tool, args, "cur")
    assert answer == {"success": False, "error": "projects database unreadable for a moment: disk I/O error",
                      "code": "projects_db_unreadable", "temporary": True}, answer


@pytest.mark.skipif(not _EIO.is_file(), reason="needs Linux's /proc/self/mem")
def test_a_move_written_before_projects_db_fails_says_so(billing_world, monkeypatch):
    """projects.db is read to find the target, then fails: the move is done, and the answer says where it was
    going and that where the session now belongs was not checked."""
    paths = sys.modules["hermes_plugins.project_history_recall.paths"]
    real, reads = paths.projects_db_path, []
    monkeypatch.setattr(paths, "projects_db_path", lambda home: reads.append(1) or (real(home) if len(reads) == 1 else _EIO))
    answer = billing_world.move("cur", "Billing")
    assert answer["success"] is True and answer["project"]["name"] == "Billing", answer
    assert any("where the session now belongs was not checked" in w for w in answer["warnings"]), answer
    assert billing_world.session_row("cur")["cwd"] == billing_world.session_row("old")["cwd"]


@pytest.fixture
def billing_world(world: World) -> World:
    """:func:`_billing` of a world of its own, for a test that changes it."""
    return _billing(world)


@contextmanager
def _locked(db: Path) -> Iterator[None]:
    """``db`` in rollback-journal mode, locked EXCLUSIVE by another connection (a writer, a backup) meanwhile."""
    holder = sqlite3.connect(db, isolation_level=None, timeout=0)
    holder.execute("PRAGMA journal_mode=DELETE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        holder.execute("COMMIT")
        holder.close()


@pytest.mark.parametrize("tool,args", [
    ("project_history_search", {"query": "websocket", "mode": "keyword"}),
    ("project_history_read", {"session_id": "old"}),
    ("project_history_recent", {}),
])
@pytest.mark.parametrize("db", ["state.db", "projects.db"])
def test_a_database_locked_past_the_busy_timeout_is_a_temporary_failure(billing_world, monkeypatch, tool, args, db):
    """Locked EXCLUSIVE elsewhere, state.db answered "session database unreadable: database is locked" with no
    `temporary`, as if damaged. It is temporary, answered once the busy timeout is spent (not waited for again), and
    a locked projects.db never gives the answer of the project the folder would have without it."""
    store = sys.modules["hermes_plugins.project_history_recall.store"]
    monkeypatch.setattr(store, "BUSY_TIMEOUT_MS", 300)
    billing_world.call("project_history_recent", {}, "cur")  # Hermes' own first reads, before the lock
    billing_world.close()
    with _locked(billing_world.home / db):
        started = time.monotonic()
        answer = billing_world.call(tool, args, "cur")
        took = time.monotonic() - started
    assert answer["success"] is False and answer["temporary"] is True, answer
    assert "database is locked" in answer["error"] and "busy (locked by another process)" in answer["error"], answer
    wanted = "db_unreadable" if db == "state.db" else "projects_db_unreadable"
    assert answer["code"] == wanted and took < 2.5, (answer, took)
    assert billing_world.call(tool, args, "cur")["success"] is True, "the lock gone, the same call answers"


def test_a_lock_met_inside_the_keyword_leg_is_not_taken_for_a_damaged_index(two, monkeypatch):
    """A lock met by the FTS query itself (state.db opened before the lock) fell back to a substring search, which
    waited on the same lock: it is the same temporary failure."""
    two.close()
    with _locked(two.home / "state.db"):
        try:
            sqlite3.connect(two.home / "state.db", timeout=0).execute("SELECT 1 FROM sessions").fetchall()
        except sqlite3.OperationalError as exc:
            busy = exc
    fts = sys.modules["hermes_plugins.project_history_recall.fts"]

    def locked(*args, **kwargs):
        raise busy

    monkeypatch.setattr(fts, "session_candidates", locked)
    answer = two.search("cur", "websocket", mode="keyword")
    assert answer == {"success": False, "error": "session database error: database is locked", "code": "db_error",
                      "temporary": True}, answer
