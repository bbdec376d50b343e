"""One argument grammar for the slash commands, shared with the command line (``command_args.py``).

Every command is run through Hermes' own lookup (``get_plugin_command_handler``,
as the gateway and the desktop run them) in a real profile: valid flags act,
and anything not understood is refused with a message naming it, followed by
the usage line. The command line is checked as a real process where it
shares a flag with them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, World, shared_world
from test_cli_commands import slash

from project_history_recall import command_args

WS = "Decision: websocket reconnects use exponential backoff with full jitter"


def _repo(world: World) -> World:
    """Repo alpha with three sessions."""
    alpha = world.repo("alpha")
    world.session("a_ws", alpha, messages=[("assistant", WS)])
    world.a_db = world.session("a_db", alpha, style="cli", messages=[("user", "the keyword mode of the database plan")])
    world.session("a_old", alpha, style="cli", messages=[("user", "websocket notes from an older day")])
    world.paths = {"alpha": alpha}
    return world


@pytest.fixture
def repo(world: World, monkeypatch: pytest.MonkeyPatch) -> World:
    """:func:`_repo` of a world of its own (a test that changes it); Hermes runs in alpha (slash commands are
    scoped by its folder)."""
    _repo(world)
    monkeypatch.chdir(world.paths["alpha"])
    return world


# :func:`_repo` shared by the tests that only read it (checked: they leave it unchanged); Hermes runs in alpha.
_repo_module, shared_repo = shared_world(_repo, "shared_repo", cwd="alpha")


def assert_refused(name: str, text: str, named: str) -> str:
    """The command refuses ``text``: its reason names ``named``, and the usage line follows."""
    out = slash(name, text)
    first, *rest = out.splitlines()
    assert first.startswith(f"/{name}: ") and named in first, (text, out)
    assert any(line.startswith(f"usage: /{name}") for line in rest), (text, out)
    assert "Scoped to" not in out, "a refused command runs nothing"
    return out


def test_search_flags_anywhere_change_the_search_not_the_query(shared_repo: World):
    """`--mode keyword websocket` once searched for the words "mode" and "keyword" in hybrid mode."""
    out = slash("history-search", "--mode keyword websocket")
    assert "mode keyword;" in out and "@session:a_ws" in out
    assert "a_db" not in out, "'mode' and 'keyword' were searched for"
    out = slash("history-search", "websocket --limit=1 --mode KEYWORD")
    assert "mode keyword;" in out and out.count("@session:") == 1
    out = slash("history-search", "websocket --role tool --since 7d --mode keyword")
    assert "No matching messages" in out and "@session:" not in out
    # After --, words are the query even when they start with --.
    out = slash("history-search", "--mode keyword -- --mode keyword")
    assert "mode keyword;" in out and "@session:a_db" in out


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("--mode fuzzy websocket", "--mode must be one of hybrid, keyword, semantic, got 'fuzzy'"),
        ("websocket --limit 0", "--limit must be a whole number from 1 to 10, got '0'"),
        ("websocket --limit abc", "got 'abc'"),
        ("websocket --limit", "--limit needs a value (N)"),
        ("websocket --limit 1 --limit 2", "--limit is given twice"),
        ("websocket --since 100000d", "the age '100000d' is too large"),
        ("websocket --since yesterday", "cannot read 'yesterday' as a date"),
        ("websocket --until 2026-01-01 --since 2026-02-01", "must be before"),
        ("websocket --role system", "--role must be one of user, assistant, tool"),
        ("websocket --max-chars 500", "unknown flag --max-chars: /history-search takes --mode, --limit"),
        ("--mode keyword", "the query is empty"),
        ('"unterminated --mode keyword', 'a quote is not closed: "unterminated --mode keyword'),
        ('"flux capacitor" "x --limit 2', 'a quote is not closed: "x --limit 2'),
    ],
)
def test_search_refuses_what_it_does_not_understand(shared_repo: World, text: str, named: str):
    assert_refused("history-search", text, named)


def test_curly_quotes_mark_a_phrase_as_straight_ones_do(shared_repo: World):
    """Smart punctuation and Chinese input methods write "..." as \u201c...\u201d: the phrase was searched as loose words
    (the older session's "websocket notes" matched too). A pair of curly quotes is now a pair of quotes; a lone one is
    a character of its word."""
    straight = slash("history-search", '"websocket reconnects" --mode keyword')
    curly = slash("history-search", "\u201cwebsocket reconnects\u201d --mode keyword")
    assert "@session:a_ws" in curly and "a_old" not in curly and curly == straight, curly
    assert_refused("history-search", '\u201cwebsocket "reconnects --mode keyword', "a quote is not closed")
    # Curly quotes inside a straight-quoted phrase are its characters: the phrase stays one (the second review's
    # t_curly_nested.py: it was cut into two phrases and loose words).
    assert command_args.search_args('"use \u201cexponential\u201d backoff" --mode keyword', default_limit=5)["query"] == \
        '"use \u201cexponential\u201d backoff"'
    assert command_args.search_args('\u201cTeam Notes\u201d "x"', default_limit=5)["query"] == '"Team Notes" "x"'


def test_a_flag_written_with_an_em_or_en_dash_is_a_flag(shared_repo: World, capsys):
    """Smart punctuation writes `--mode` as `—mode`: it was searched for as the words "mode" and "keyword" in
    hybrid mode. An em or en dash (or two) before a known flag's name is `--`; before any other word, a word."""
    out = slash("history-search", "—mode keyword websocket")
    assert "mode keyword;" in out and "@session:a_ws" in out and "a_db" not in out
    out = slash("history-search", "websocket –limit=1 ——mode keyword")
    assert "mode keyword;" in out and out.count("@session:") == 1
    assert_refused("history-search", "websocket —limit 1 —limit 2", "--limit is given twice")
    out = slash("history-search", "—keyword —mode keyword")
    assert "mode keyword;" in out and "@session:a_db" in out, "—keyword is no flag: a query word"
    assert slash("history-recent", "–limit 1").count("@session:") == 1
    from project_history_recall import command_line

    code = command_line.main(["search", "websocket", "—mode", "keyword", "–limit", "1", "--json",
                              "--cwd", str(shared_repo.paths["alpha"])])
    answer = json.loads(capsys.readouterr().out)
    assert code == 0 and answer["mode"] == "keyword" and len(answer["results"]) == 1, answer


def test_recent_takes_n_or_limit_and_dates(shared_repo: World):
    """`/history-recent --limit 3` and `/history-recent abc` once both showed the default 5, silently."""
    for text in ("1", "--limit 1", "--limit=1 --since 2000-01-01"):
        out = slash("history-recent", text)
        assert out.count("@session:") == 1, (text, out)
    assert slash("history-recent", "--until 2000-01-01").count("@session:") == 0
    for text, named in [
        ("abc", "unexpected word 'abc'"),
        ("--limit 3 4", "the number of sessions is given twice"),
        ("3 4", "unexpected word '4'"),
        ("--limit 11", "--limit must be a whole number from 1 to 10, got '11'"),
        ("--role user", "unknown flag --role: /history-recent takes --limit, --since and --until"),
        ("--since 100000d", "too large"),
    ]:
        assert_refused("history-recent", text, named)


def test_read_flags_anywhere_and_its_words_checked(shared_repo: World):
    """`/history-read alpha -5` or extra words once gave the usage line with no reason."""
    ws_id = shared_repo.db.get_messages("a_ws")[0]["id"]
    out = slash("history-read", f"--before 0 a_ws {ws_id} --max-chars 500")
    assert WS in out and "<== the hit" in out
    out = slash("history-read", f'"@session:a_ws" --after=0 {ws_id}')
    assert WS in out
    for text, named in [
        ("alpha -5", "the message id must be a whole number of 1 or more (a search result's message id), got '-5'"),
        (f"a_ws {ws_id} extra", "unexpected word 'extra'"),
        ("a_ws --before 21", "--before must be a whole number from 0 to 20, got '21'"),
        ("a_ws --max-chars 10", "--max-chars must be a whole number from 500 to 20000"),
        ("a_ws --mode keyword", "unknown flag --mode: /history-read takes --before, --after, --max-chars, --query and --offset"),
        ("a_ws --offset -1", "--offset must be a whole number from 0"),
        ("--before 2", "the session id is missing"),
    ]:
        assert_refused("history-read", text, named)


def test_read_shows_a_long_hit_where_the_words_match_and_says_which_part(repo: World):
    """`/history-read s m --query WORDS` shows a long message where the search's words match, `--offset N` from a
    character on, and the heading says which characters of how many; the command read only the message's start."""
    log = "".join(f"step {i:05d} ok\n" for i in range(4000)) + "FAILED test_refund_rounding\n"
    repo.session("a_log", repo.paths["alpha"], messages=[("tool", log)])
    log_id = repo.db.get_messages("a_log")[0]["id"]
    out = slash("history-read", f'a_log {log_id} --query "refund rounding"')
    assert "FAILED test_refund_rounding" in out and f"of {len(log.strip())})" in out, out[:300]
    out = slash("history-read", f"a_log {log_id} --offset 1000")
    assert "characters 1000-" in out and "FAILED" not in out, out[:300]


def test_move_home_flag_and_refusals(shared_repo: World):
    """`/history-move --home gamma` once answered "project not found: --home gamma"."""
    out = assert_refused("history-move", "--home gamma", "--home takes no target, got 'gamma'")
    assert "Or --home" in out, "the valid targets follow"
    assert_refused("history-move", "gamma --home", "--home takes no target")
    assert_refused("history-move", "--home=yes", "--home takes no value")
    assert_refused("history-move", "--project gamma", "unknown flag --project: /history-move takes --home")
    out = slash("history-move", "--home")
    assert "cannot tell which conversation is yours" in out and "to Home (out of any project)" in out


def test_index_and_help_take_no_arguments(shared_repo: World):
    assert_refused("history-index", "now", "unexpected word 'now': /history-index takes no arguments")
    assert_refused("history-index", "--force", "unknown flag --force: /history-index takes no flags")
    out = slash("history-help", "search")
    assert out.startswith("/history-help takes no arguments (ignored: search)") and "Slash commands:" in out
    assert "--max-chars N" in slash("history-help"), "the help names every flag"


def test_long_values_are_echoed_cut(shared_repo: World):
    """A 5,000-character session id was echoed whole (a 5,091-character answer)."""
    long_id = "x" * 5000
    out = slash("history-read", long_id)
    assert out.startswith("history read: session not found in state.db: xxx") and "(5,000 characters)" in out
    assert len(out) < 400, len(out)
    answer = shared_repo.call("project_history_read", {"session_id": long_id}, "a_db")
    assert answer["code"] == "session_not_found" and len(answer["error"]) < 300
    out = assert_refused("history-search", "x --since " + "1" * 5000 + "d", "too large")
    assert len(out) < 800
    answer = shared_repo.search("a_db", "x", mode="m" * 5000)
    assert answer["code"] == "bad_argument" and len(answer["error"]) < 300


def test_the_command_line_shares_the_grammar_and_exit_codes(repo: World, tmp_path: Path, capsys,
                                                           monkeypatch: pytest.MonkeyPatch):
    """Exit 2 for usage errors, the cursor's included; the same messages as the slash commands; echoes cut. A usage
    error and a search run as real processes (``python -m``); the other refusals through the same ``main``."""
    from project_history_recall import command_line

    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "project_history_recall").symlink_to(ROOT, target_is_directory=True)
    env = {**os.environ, "PYTHONPATH": str(shim), "HERMES_HOME": str(repo.home)}
    repo.close()

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "project_history_recall", *argv], capture_output=True, text=True,
                              env=env, cwd=repo.paths["alpha"], timeout=120)

    cursor = run("search", "websocket", "--cursor", "garbage", "--json")
    assert cursor.returncode == 2, cursor.stderr
    assert "usage:" in cursor.stderr and "'cursor' is not one this tool returned" in cursor.stderr
    assert json.loads(cursor.stdout)["code"] == "bad_argument"
    monkeypatch.chdir(repo.paths["alpha"])

    def main(*argv: str) -> tuple[int, str]:
        capsys.readouterr()
        return command_line.main(list(argv)), capsys.readouterr().err

    code, err = main("search", "websocket", "--since", "100000d")
    assert code == 2 and "the age '100000d' is too large" in err and "cannot read" not in err, err
    code, err = main("recent", "--limit", "11")
    assert code == 2 and "--limit must be a whole number from 1 to 10, got '11'" in err, err
    code, err = main("search", "x", "--cwd", "/" + "d" * 5000)
    assert code == 2 and "(5,001 characters)" in err and len(err) < 1500, err
    found = run("search", "websocket", "--mode", "keyword", "--limit", "1", "--json")
    assert found.returncode == 0, found.stderr
    assert len(json.loads(found.stdout)["results"]) == 1
