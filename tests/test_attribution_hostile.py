"""Attribution against what Hermes really records, driven through Hermes' own code paths.

Nothing of Hermes is faked here:

* ``/new`` is Hermes' ``cli.HermesCLI.new_session`` on a real ``HermesCLI``
  whose agent is a real ``run_agent.AIAgent`` talking to a loopback stub model
  (tests/fake_chat.py; a remote model cannot run here). The agent writes
  state.db itself: the first session of a CLI gets ``os.getcwd()`` as its cwd
  (``run_agent._launch_cwd_for_session``), and the session ``/new`` creates has
  no cwd and no parent (``new_session`` creates the row itself and sets
  ``agent._session_db_created``). ``new_session`` also exports the new id as
  ``HERMES_SESSION_ID`` (``_sync_process_session_id``), which is how a search
  knows it runs inside that very CLI.
* Projects are created with Hermes' ``projects_db.create_project``, sessions
  with Hermes' ``SessionDB`` (and ``tui_gateway.git_probe`` for desktop-style
  rows), folders are real folders, symlinks and git worktrees, deleted for real.
* Searches go through ``model_tools.handle_function_call`` (``world.search``);
  where a cold process matters the search runs in a new Python process.

Time: ``/new`` matching looks at when sessions started and ended. Where a test
needs "a minute later" it shifts the recorded times of the sessions named
(``elapse``) instead of sleeping.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from conftest import World, git, result_sessions
from fake_chat import FakeChat

from project_history_recall import command_line

# ---------------------------------------------------------------------------
# Harness: Hermes' interactive CLI, a stub model, time, a fresh process
# ---------------------------------------------------------------------------

ANSWER = "noted."  # every answer of the stub model: no word any test searches for


@pytest.fixture(scope="module")
def chat() -> Iterator[FakeChat]:
    server = FakeChat(lambda body: {"content": ANSWER})
    yield server
    server.close()


class LiveCLI:
    """One interactive Hermes CLI (``cli.HermesCLI``) running in ``folder``.

    All CLIs of a test live in this one process, so the process-wide things a
    real CLI owns (its working folder, ``HERMES_SESSION_ID``) are switched to
    this CLI's around each of its actions (:meth:`enter`).
    """

    def __init__(self, world: World, chat: FakeChat, folder: Path, *, prompt_folder: bool = True) -> None:
        import cli as hermes_cli_module
        from run_agent import AIAgent

        self.world, self.folder, self.prompt_folder = world, folder, prompt_folder
        os.chdir(folder)
        os.environ["TERMINAL_CWD"] = str(folder)
        self.shell = hermes_cli_module.HermesCLI()
        assert Path(self.shell._session_db.db_path) == world.home / "state.db"
        # What HermesCLI._init_agent builds, with the loopback model.
        self.shell.agent = AIAgent(
            model=chat.model, api_key="sk-loopback", base_url=chat.base_url, provider="custom",
            api_mode="chat_completions", enabled_toolsets=["project_history_recall"], quiet_mode=True,
            session_id=self.shell.session_id, platform="cli", session_db=self.shell._session_db,
            skip_context_files=True, skip_memory=True, max_iterations=4, tool_delay=0.0,
        )

    @property
    def sid(self) -> str:
        return self.shell.session_id

    def enter(self) -> LiveCLI:
        """Be inside this CLI's process: its folder (and ``TERMINAL_CWD``, which Hermes' CLI sets to it at launch),
        its live session id."""
        from gateway.session_context import set_current_session_id

        os.chdir(self.folder)
        os.environ["TERMINAL_CWD"] = str(self.folder)
        set_current_session_id(self.sid)
        return self

    def turn(self, text: str) -> str:
        """One chat turn, as HermesCLI runs it (cli.py ``_run_turn``); returns the session it went to."""
        self.enter()
        result = self.shell.agent.run_conversation(user_message=text, conversation_history=self.shell.conversation_history)
        assert result.get("final_response") == ANSWER, result
        self.shell.conversation_history = result["messages"]
        if not self.prompt_folder:  # a Hermes whose prompt names no folder: what the /new rule is for
            with closing(sqlite3.connect(self.world.home / "state.db")) as conn:
                conn.execute("UPDATE sessions SET system_prompt = NULL WHERE id = ?", (self.sid,))
                conn.commit()
        return self.sid

    def new(self) -> str:
        """``/new``: Hermes' own ``HermesCLI.new_session``; returns the new session id."""
        self.enter()
        old = self.sid
        self.shell.new_session(silent=True)
        assert self.sid != old and os.environ["HERMES_SESSION_ID"] == self.sid
        return self.sid

    def close(self) -> None:
        db = getattr(self.shell, "_session_db", None)
        if db is not None:
            db.close()


@pytest.fixture
def clis(world: World, chat: FakeChat, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``clis(folder, prompt_folder=True) -> LiveCLI``; the process folder and session variables are restored
    afterwards. ``prompt_folder=False``: each session's stored system prompt is dropped after each turn, so its
    folder is not read from it (:class:`LiveCLI`)."""
    import cli as hermes_cli_module

    monkeypatch.chdir(world.tmp)
    monkeypatch.setenv("HERMES_SESSION_ID", "")
    monkeypatch.setenv("TERMINAL_ENV", "local")  # what load_cli_config exports for the local backend
    monkeypatch.setenv("TERMINAL_CWD", str(world.tmp))  # and the launch folder, set by each CLI (LiveCLI.enter)
    monkeypatch.setattr(hermes_cli_module, "_cprint", lambda *a, **k: None)  # the terminal renderer only
    opened: list[LiveCLI] = []

    def open_cli(folder: Path, *, prompt_folder: bool = True) -> LiveCLI:
        opened.append(LiveCLI(world, chat, folder, prompt_folder=prompt_folder))
        return opened[-1]

    yield open_cli
    for c in opened:
        c.close()
    from gateway.session_context import reset_session_vars

    reset_session_vars()


def elsewhere(world: World, session_id: str = "") -> None:
    """A process that is not any of the CLIs: another folder, another (or no) live session."""
    from gateway.session_context import set_current_session_id

    os.chdir(world.tmp)
    set_current_session_id(session_id)


def elapse(world: World, seconds: float, *session_ids: str) -> None:
    """Let ``seconds`` pass for the sessions named: their recorded start and end move that far back."""
    with closing(sqlite3.connect(world.home / "state.db")) as conn:
        for sid in session_ids:
            conn.execute(
                "UPDATE sessions SET started_at = started_at - ?, ended_at = ended_at - ? WHERE id = ?",
                (seconds, seconds, sid),
            )
        conn.commit()


def census(world: World, capsys: pytest.CaptureFixture[str]) -> dict[tuple[str, str], int]:
    """``project-history-recall projects --json``: sessions per project, keyed ``(kind, root or id)``."""
    capsys.readouterr()
    code = command_line.main(["--hermes-home", str(world.home), "projects", "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    counts = {}
    for row in json.loads(out)["projects"]:
        key = row.get("root") if row["kind"] == "auto" else row.get("id", "")
        counts[(row["kind"], key or "")] = row["sessions"]
    return counts


#: A process that imports Hermes once, in a profile of its own with no plugin, then forks one child per
#: request. The child is the new process a search runs in: it points Hermes at the world's profile, loads the
#: plugin there through Hermes' loader (its first import in that process: every cache of the plugin cold, and
#: git_probe's too, as the parent never searched nor probed), answers the one tool call through
#: model_tools.handle_function_call and exits. Importing Hermes costs 2 s of CPU; a child, a tenth of that.
FORK_SERVER = r"""
import json, os, sys
from pathlib import Path
import model_tools
import hermes_state
import hermes_cli.plugins as plugins
for line in sys.stdin:
    ask = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.environ["HERMES_HOME"] = ask["home"]
            os.chdir(ask["cwd"])
            hermes_state.DEFAULT_DB_PATH = Path(ask["home"]) / "state.db"  # what importing Hermes there sets
            plugins._plugin_manager = None
            plugins.discover_plugins(force=True)
            answer = model_tools.handle_function_call(ask["tool"], ask["args"], "task-x", tool_call_id="c1",
                                                      session_id=ask["sid"])
            sys.stdout.write("@@" + answer + "\n")
            code = 0
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(f"##exit {os.waitstatus_to_exitcode(status)}\n")
    sys.stdout.flush()
"""


class NewProcesses:
    """Starts :data:`FORK_SERVER` on first use; :meth:`call` runs one tool call in a new process of it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.server: subprocess.Popen | None = None

    def call(self, home: Path, cwd: Path, tool: str, session_id: str, args: dict[str, Any]) -> dict[str, Any]:
        if self.server is None:
            boot = self.folder / "fork-server-home"
            boot.mkdir()
            env = {k: v for k, v in os.environ.items() if k not in ("HERMES_SESSION_ID", "TERMINAL_CWD", "TERMINAL_ENV")}
            env["HERMES_HOME"] = str(boot)
            self.errors = open(self.folder / "fork-server.err", "w+")  # noqa: SIM115  # closed in close()
            self.server = subprocess.Popen([sys.executable, "-c", FORK_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           stderr=self.errors, text=True, env=env, cwd=str(self.folder))
        assert self.server.stdin is not None and self.server.stdout is not None
        start = self.errors.tell()
        ask = {"home": str(home), "cwd": str(cwd), "tool": tool, "sid": session_id, "args": args}
        self.server.stdin.write(json.dumps(ask) + "\n")
        self.server.stdin.flush()
        answer = None
        while True:
            line = self.server.stdout.readline()
            assert line, f"the fork server ended: {self._errors(0)}"
            if line.startswith("@@"):
                answer = json.loads(line[2:])
            elif line.startswith("##exit "):
                assert line.split()[1] == "0" and answer is not None, self._errors(start)
                return answer

    def _errors(self, start: int) -> str:
        self.errors.flush()
        self.errors.seek(start)
        return self.errors.read()[-3000:]

    def close(self) -> None:
        if self.server is not None:
            assert self.server.stdin is not None
            self.server.stdin.close()
            self.server.wait(timeout=60)
            self.errors.close()
            self.server = None


@pytest.fixture(scope="module")
def new_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NewProcesses]:
    processes = NewProcesses(tmp_path_factory.mktemp("new-processes"))
    yield processes
    processes.close()


def search_in_new_process(processes: NewProcesses, world: World, session_id: str, query: str, **args: Any) -> dict[str, Any]:
    """The same tool call from a new Python process (every cache of the plugin and of git_probe cold), run in
    the world's temporary folder, without the session variables of this process."""
    return processes.call(world.home, world.tmp, "project_history_search", session_id, {"query": query, **args})


def auto(root: Path) -> dict[str, str]:
    return {"kind": "auto", "key": str(root), "root": str(root), "name": root.name}


# ---------------------------------------------------------------------------
# 1. /new in the CLI
# ---------------------------------------------------------------------------

REDIS = "we decided to pin redis to 7.2 because 7.4 broke the lua scripts"


def test_new_session_in_the_cli_searches_its_repo_and_joins_its_history(world: World, new_processes: NewProcesses, clis, capsys):
    app, other = world.repo("app"), world.repo("other")
    world.session("o1", other, style="cli", messages=[("user", "in other we also pin redis to 7.2")])
    cli = clis(app, prompt_folder=False)
    first = cli.turn("the websocket client retries with exponential backoff and jitter")
    new = cli.new()
    # What Hermes recorded: the old session ended by /new, the new one without folder or parent.
    row, old_row = world.session_row(new), world.session_row(first)
    assert old_row["end_reason"] == "new_session" and old_row["cwd"] == str(app)
    assert row["cwd"] is None and row["git_repo_root"] is None and row["parent_session_id"] is None
    cli.turn(REDIS)
    assert world.session_row(new)["cwd"] is None, "the agent's turn does not record a folder either"

    # From the /new session itself, inside its CLI.
    cli.enter()
    answer = world.search(new, "websocket backoff jitter", mode="keyword", limit=10)
    assert answer["project"] == auto(app)
    assert result_sessions(answer) == [first]
    assert answer["project_basis"] == "previous_session"
    assert first in answer["project_note"] and "/new" in answer["project_note"]

    # Outside the CLI (another folder, no live session) the answer is the same: it is history, not a guess.
    elsewhere(world)
    answer = world.search(new, "websocket backoff jitter", mode="keyword", limit=10)
    assert answer["project"] == auto(app) and result_sessions(answer) == [first]
    assert answer["project_basis"] == "previous_session"

    # Later, another CLI in the repo finds what was said in the /new session; the other repo stays out.
    later = clis(app, prompt_folder=False)
    later.turn("what did we settle about the cache server?")
    later.enter()
    answer = world.search(later.sid, "pin redis 7.2", mode="keyword", limit=10)
    assert result_sessions(answer) == [new]
    assert "project_basis" not in answer, "a session with its own folder has nothing inferred"
    assert result_sessions(search_in_new_process(new_processes, world, later.sid, "pin redis 7.2", mode="keyword", limit=10)) == [new]
    counts = census(world, capsys)
    assert counts[("auto", str(app))] == 3  # first, the /new session, later
    assert counts[("auto", str(other))] == 1
    assert counts.get(("home", ""), 0) == 0


def test_a_new_session_s_folder_is_the_one_its_prompt_names(world: World, clis, capsys):
    """Hermes 0.19 writes the CLI's working directory into each session's system prompt: a ``/new`` session has it as
    its own folder from its first turn, with nothing inferred, even after the session ``/new`` ended is deleted."""
    app = world.repo("app")
    cli = clis(app)
    first = cli.turn("the websocket client retries with exponential backoff and jitter")
    new = cli.new()
    cli.turn(REDIS)
    assert world.session_row(new)["cwd"] is None and str(app) in world.session_row(new)["system_prompt"]
    elsewhere(world)
    answer = world.search(new, "websocket backoff jitter", mode="keyword", limit=10)
    assert answer["project"] == auto(app) and result_sessions(answer) == [first] and "project_basis" not in answer
    assert world.db.delete_session(first)
    answer = world.search(new, "pin redis", mode="keyword", limit=10)
    assert answer["project"] == auto(app), answer
    assert census(world, capsys)[("auto", str(app))] == 1


def test_new_twice_in_a_row_chains_back_to_the_first_folder(world: World, clis, capsys):
    """A -> /new -> B -> (a minute later) /new -> C: C takes A's folder through B."""
    app = world.repo("app")
    world.session("r", app, style="cli", messages=[("user", "deploy notes for the app")])
    cli = clis(app, prompt_folder=False)
    a = cli.turn("the websocket client retries with exponential backoff and jitter")
    b = cli.new()
    cli.turn("the cache layer uses lru eviction")
    elapse(world, 60, a, b)
    c = cli.new()
    cli.turn(REDIS)
    cli.enter()
    answer = world.search(c, "websocket jitter lru eviction", mode="keyword", limit=10)
    assert answer["project"] == auto(app)
    assert set(result_sessions(answer)) == {a, b}
    assert answer["project_basis"] == "previous_session" and b in answer["project_note"]
    elsewhere(world, "r")
    assert result_sessions(world.search("r", "pin redis 7.2", mode="keyword", limit=10)) == [c]
    assert census(world, capsys)[("auto", str(app))] == 4


def test_new_chain_is_found_by_a_process_whose_cache_is_already_warm(world: World, clis, capsys):
    """A long-lived process (a gateway, this CLI) searched before the chain grew: it must see C too.

    Same history as the test above; the only difference is that searches ran
    in this process while it happened.
    """
    app = world.repo("app")
    world.session("r", app, style="cli", messages=[("user", "deploy notes for the app")])
    cli = clis(app, prompt_folder=False)
    a = cli.turn("the websocket client retries with exponential backoff and jitter")
    elsewhere(world, "r")
    assert result_sessions(world.search("r", "websocket", mode="keyword", limit=10)) == [a]
    b = cli.new()
    cli.turn("the cache layer uses lru eviction")
    elsewhere(world, "r")
    assert result_sessions(world.search("r", "lru eviction", mode="keyword", limit=10)) == [b]
    elapse(world, 60, a, b)
    c = cli.new()
    cli.turn(REDIS)
    assert census(world, capsys)[("auto", str(app))] == 4, "a fresh scan puts C in the repo"
    elsewhere(world, "r")
    answer = world.search("r", "pin redis 7.2", mode="keyword", limit=10)
    assert result_sessions(answer) == [c], (
        "the warm membership cache lost C: MembershipCache._refresh -> resolve_workspace(C, known) replaces B's row "
        "by its cached workspace without end_reason/ended_at, so new_session_predecessors no longer sees B "
        "as ended by /new"
    )
    cli.enter()
    answer = world.search(c, "websocket jitter lru eviction", mode="keyword", limit=10)
    assert answer["project"] == auto(app) and set(result_sessions(answer)) == {a, b}
    assert answer["project_basis"] == "previous_session", "C's project is known from history, not only from the live CLI"


def test_new_twice_within_ten_seconds_in_one_cli_is_not_ambiguous(world: World, clis, capsys):
    """A -> /new -> B -> /new -> C, quickly: A already led to B, so only B can have led to C."""
    app = world.repo("app")
    world.session("r", app, style="cli", messages=[("user", "deploy notes for the app")])
    cli = clis(app)
    a = cli.turn("the websocket client retries with exponential backoff and jitter")
    b = cli.new()
    cli.turn("the cache layer uses lru eviction")
    c = cli.new()
    cli.turn(REDIS)
    ended = [world.session_row(s)["ended_at"] for s in (a, b)]
    assert ended[1] - ended[0] < 10 and world.session_row(c)["started_at"] - ended[0] < 10
    elsewhere(world, "r")
    answer = world.search("r", "pin redis 7.2", mode="keyword", limit=10)
    assert result_sessions(answer) == [c], (
        "C was left out as ambiguous: new_session_predecessors counts A and B as candidates although A was "
        "already the predecessor of B (a session /new ended is followed by exactly one new session)"
    )
    assert census(world, capsys)[("auto", str(app))] == 4


def test_two_clis_new_at_once_in_different_repos_are_not_misattributed(world: World, clis, capsys):
    one, two = world.repo("one"), world.repo("two")
    world.session("r1", one, style="cli", messages=[("user", "notes for one")])
    world.session("r2", two, style="cli", messages=[("user", "notes for two")])
    cli1, cli2 = clis(one, prompt_folder=False), clis(two, prompt_folder=False)
    cli1.turn("one: the websocket client uses jitter")
    cli2.turn("two: the websocket client uses a ring buffer")
    n1 = cli1.new()
    n2 = cli2.new()  # within the window of cli1's /new: two candidates, one already taken by n1
    cli1.turn("one decided: postgres 16")
    cli2.turn("two decided: mysql 8")

    elsewhere(world, "r1")
    assert n2 not in result_sessions(world.search("r1", "mysql", mode="keyword", limit=10))
    elsewhere(world, "r2")
    assert n1 not in result_sessions(world.search("r2", "postgres", mode="keyword", limit=10))
    elsewhere(world)
    assert world.search(n2, "websocket", mode="keyword")["project"].get("root") != str(one)
    assert world.search(n1, "websocket", mode="keyword")["project"].get("root") != str(two)
    # Inside cli2 itself: its own project, whether matched in order (cli1's /new came first and took
    # its own predecessor, so cli2's is the one left) or, when the order cannot tell, by its folder.
    cli2.enter()
    answer = world.search(n2, "websocket ring buffer", mode="keyword", limit=10)
    assert answer["project"] == auto(two) and answer["project_basis"] in ("previous_session", "live_cli")
    assert answer["project_basis"] == "live_cli" or str(two) not in answer["project_note"]
    counts = census(world, capsys)
    assert counts[("auto", str(one))] in (2, 3) and counts[("auto", str(two))] in (2, 3)
    assert counts[("auto", str(one))] + counts[("auto", str(two))] + counts.get(("home", ""), 0) == 6


def test_new_after_an_empty_discarded_session_uses_the_live_cli_folder_only(world: World, clis, capsys):
    """A -> /new -> B (nothing said) -> a minute later /new: Hermes deletes B, C has no predecessor.

    Documented (store.live_cli_folder): inside its live CLI, C takes the
    CLI's folder; from anywhere else C has no project (Home).
    """
    app = world.repo("app")
    world.session("r", app, style="cli", messages=[("user", "deploy notes for the app")])
    cli = clis(app, prompt_folder=False)
    a = cli.turn("the websocket client retries with exponential backoff and jitter")
    b = cli.new()
    elapse(world, 60, a, b)
    c = cli.new()
    assert world.db.get_session(b) is None, "Hermes discarded the empty session"
    cli.turn(REDIS)

    cli.enter()
    answer = world.search(c, "websocket jitter", mode="keyword", limit=10)
    assert answer["project"] == auto(app) and result_sessions(answer) == [a]
    assert answer["project_basis"] == "live_cli" and str(app) in answer["project_note"]
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TERMINAL_ENV", raising=False)  # unset means local
        assert world.search(c, "websocket jitter", mode="keyword")["project_basis"] == "live_cli"

    elsewhere(world, "r")
    assert result_sessions(world.search("r", "pin redis 7.2", mode="keyword", limit=10)) == []
    answer = world.search(c, "websocket jitter", mode="keyword")
    assert answer["project"] == {"kind": "home"} and "project_basis" not in answer
    counts = census(world, capsys)
    assert counts[("auto", str(app))] == 2 and counts[("home", "")] == 1


def test_new_after_a_discarded_session_is_not_taken_by_another_clis_new(world: World, clis, capsys):
    """cli2: A2 -> /new -> B2 (empty); a minute later cli1 does /new, then cli2 does /new (B2 deleted) -> C2.

    The only session that /new ended in C2's window is cli1's A1, which
    already led to cli1's N1: C2 must not be filed under repo one.
    """
    one, two = world.repo("one"), world.repo("two")
    world.session("r1", one, style="cli", messages=[("user", "notes for one")])
    cli1, cli2 = clis(one), clis(two)
    a2 = cli2.turn("two: the websocket client uses a ring buffer")
    b2 = cli2.new()
    elapse(world, 60, a2, b2)
    cli1.turn("one: the websocket client uses jitter")
    cli1.new()
    cli1.turn("one decided: postgres 16")
    c2 = cli2.new()
    assert world.db.get_session(b2) is None
    cli2.turn(REDIS)

    cli2.enter()
    answer = world.search(c2, "websocket", mode="keyword", limit=10)
    assert answer["project"] == auto(two), (
        f"inside cli2 (cwd {two}) the /new session searched {answer['project']} "
        f"(basis {answer.get('project_basis')}: {answer.get('project_note')})"
    )
    elsewhere(world, "r1")
    assert c2 not in result_sessions(world.search("r1", "pin redis 7.2", mode="keyword", limit=10))


def test_a_gateway_session_without_folder_never_takes_the_process_folder(world: World, monkeypatch):
    app = world.repo("app")
    world.session("a1", app, style="cli", messages=[("user", "websocket jitter in the app")])
    world.session("tg0", None, source="telegram", messages=[("user", "old telegram chat")])
    world.db.end_session("tg0", "new_session")  # the gateway's /new, same moment as tg1 starts
    world.session("tg1", None, source="telegram", messages=[("user", "websocket from telegram")])
    monkeypatch.chdir(app)  # the gateway process happens to run in the repo
    monkeypatch.setenv("HERMES_SESSION_ID", "tg1")
    monkeypatch.delenv("TERMINAL_ENV", raising=False)
    answer = world.search("tg1", "websocket", mode="keyword")
    assert answer["project"] == {"kind": "home"} and answer["results"] == []
    assert "project_basis" not in answer and "project_note" not in answer
    # A CLI on a remote backend (docker, ssh) records no host folder, and its host cwd means nothing.
    world.session("dock", None, source="cli", messages=[("user", "websocket in a container")])
    monkeypatch.setenv("HERMES_SESSION_ID", "dock")
    monkeypatch.setenv("TERMINAL_ENV", "docker")
    answer = world.search("dock", "websocket", mode="keyword")
    assert answer["project"] == {"kind": "home"} and "project_basis" not in answer


# ---------------------------------------------------------------------------
# 2. Symlinks and ".." after them
# ---------------------------------------------------------------------------


def _cli_cwd(folder: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The cwd the plain CLI records when launched in ``folder`` (Hermes' own function: os.getcwd())."""
    from run_agent import _launch_cwd_for_session

    monkeypatch.chdir(folder)
    monkeypatch.setenv("TERMINAL_ENV", "local")
    cwd = _launch_cwd_for_session("cli")
    monkeypatch.chdir(folder.parent)
    assert cwd
    return cwd


@pytest.mark.parametrize("kind", ["git", "plain"])
def test_project_registered_through_a_symlink_holds_sessions_recorded_physically(world: World, monkeypatch, capsys, kind):
    real = world.repo("real-app") if kind == "git" else world.folder("real-app")
    link = world.work / "app-link"
    link.symlink_to(real, target_is_directory=True)
    pid = world.project("App", [link])  # `hermes project create App --folder <link>`: stored as typed
    from hermes_cli import projects_db

    with projects_db.connect_closing(world.home / "projects.db") as conn:
        assert [f.path for f in projects_db.get_project(conn, pid).folders] == [str(link)]
    cwd = _cli_cwd(link, monkeypatch)
    assert cwd == str(real), "os.getcwd() is the physical folder"
    world.session("s1", cwd, style="cli", messages=[("user", "the websocket client retries with jitter")])
    world.session("s2", link, style="desktop", messages=[("user", "websocket heartbeat every 30s")])
    world.session("cur", cwd, style="cli", messages=[("user", "what did we decide?")])
    answer = world.search("cur", "websocket", mode="keyword", limit=10)
    assert answer["project"] == {"kind": "explicit", "id": pid, "name": "App"}
    assert set(result_sessions(answer)) == {"s1", "s2"}
    counts = census(world, capsys)
    assert counts[("explicit", pid)] == 3
    assert not [k for k in counts if k[0] == "auto"], f"the repo split into an auto project: {counts}"


@pytest.mark.parametrize("kind", ["git", "plain"])
def test_project_registered_physically_holds_sessions_recorded_through_a_symlink(world: World, capsys, kind):
    real = world.repo("real-app") if kind == "git" else world.folder("real-app")
    (real / "src").mkdir()
    link = world.work / "app-link"
    link.symlink_to(real, target_is_directory=True)
    pid = world.project("App", [real])
    # A frontend that knows the folder as the user opened it (through the link) records it so.
    world.session("s1", link / "src", style="desktop", messages=[("user", "the websocket client retries with jitter")])
    world.session("s2", link, style="cli", messages=[("user", "websocket heartbeat every 30s")])
    world.session("cur", real, style="cli", messages=[("user", "what did we decide?")])
    assert world.session_row("s1")["cwd"] == str(link / "src")
    answer = world.search("cur", "websocket", mode="keyword", limit=10)
    assert answer["project"]["id"] == pid and set(result_sessions(answer)) == {"s1", "s2"}
    assert world.search("s1", "heartbeat", mode="keyword")["project"]["id"] == pid
    assert census(world, capsys)[("explicit", pid)] == 3


def _dotdot_world(world: World) -> tuple[Path, Path, str]:
    """``<work>/link -> <work>/far/inner``: ``<work>/link/../x`` is ``<work>/far/x`` on disk, ``<work>/x`` by text."""
    inner = world.folder("far/inner")
    far_x = world.folder("far/x")
    link = world.work / "link"
    link.symlink_to(inner, target_is_directory=True)
    typed = f"{link}/../x"
    assert os.path.realpath(typed) == str(far_x) and os.path.isdir(typed)
    return inner, far_x, typed


def test_a_cwd_with_dotdot_after_a_symlink_is_where_the_filesystem_says(world: World, capsys):
    _, far_x, typed = _dotdot_world(world)
    pid = world.project("Far", [far_x])
    world.session("s1", typed, style="desktop", messages=[("user", "the websocket client retries with jitter")])
    world.session("cur", far_x, style="cli", messages=[("user", "what did we decide?")])
    assert world.session_row("s1")["cwd"] == typed, "Hermes stores the folder as the frontend gave it"
    assert result_sessions(world.search("cur", "websocket", mode="keyword")) == ["s1"]
    assert world.search("s1", "anything", mode="keyword")["project"]["id"] == pid
    assert census(world, capsys)[("explicit", pid)] == 2


def test_a_cwd_with_dotdot_after_a_symlink_is_not_filed_under_its_textual_twin(world: World, capsys):
    """``<work>/x`` exists too and is another project: the text of the path must not win over the disk."""
    _, far_x, typed = _dotdot_world(world)
    decoy = world.folder("x")
    decoy_id = world.project("Decoy", [decoy])  # created first: wins ties
    far_id = world.project("Far", [far_x.parent])  # <work>/far: as long as <work>/x
    world.session("s1", typed, style="desktop", messages=[("user", "the websocket client retries with jitter")])
    world.session("in_far", far_x, style="cli", messages=[("user", "what did we decide?")])
    world.session("in_decoy", decoy, style="cli", messages=[("user", "decoy websocket notes")])
    answer = world.search("s1", "websocket", mode="keyword", limit=10)
    assert answer["project"]["id"] == far_id, (
        f"{typed} is {far_x} on disk (project Far) but was attributed to {answer['project']}: "
        "attribution.match_explicit matches the lexical reading (<work>/x, project Decoy) as well as the "
        "physical one, and the tie goes to the earlier project"
    )
    assert "s1" not in result_sessions(world.search("in_decoy", "websocket", mode="keyword", limit=10))
    assert census(world, capsys)[("explicit", decoy_id)] == 1


# ---------------------------------------------------------------------------
# 3. Deleted working folders
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("style", ["cli", "desktop"])
def test_sessions_in_a_deleted_subfolder_stay_in_the_repo(world: World, new_processes: NewProcesses, capsys, style):
    app = world.repo("app")
    sub = app / "build-tmp"
    sub.mkdir()
    world.session("gone", sub, style=style, messages=[("user", "the websocket client retries with jitter")])
    world.session("live", app, style="cli", messages=[("user", "websocket heartbeat every 30s")])
    shutil.rmtree(sub)
    for search in (world.search, lambda *a, **k: search_in_new_process(new_processes, world, *a, **k)):
        answer = search("live", "websocket", mode="keyword", limit=10)
        assert answer["project"] == auto(app) and result_sessions(answer) == ["gone"]
        answer = search("gone", "websocket", mode="keyword", limit=10)
        assert answer["project"] == auto(app) and result_sessions(answer) == ["live"]
    assert census(world, capsys)[("auto", str(app))] == 2


def test_a_census_probes_its_folders_at_once_and_attributes_them_as_one_by_one(world: World, monkeypatch):
    """A process's first census asks git about its folders in parallel threads, then attributes every session
    from those answers: each lands where probing the folders one at a time puts it (repos, a worktree folded
    into its repo, a subfolder, a symlink, a plain folder in Home, a subfolder deleted since)."""
    import threading

    from project_history_recall import folders as plugin_folders
    from project_history_recall import paths, state, store, workspace

    repos = [world.repo(f"r{i}") for i in range(5)]
    deep = repos[1] / "pkg" / "deep"
    deep.mkdir(parents=True)
    gone = repos[2] / "scratch"
    gone.mkdir()
    link = world.work / "link-to-r3"
    link.symlink_to(repos[3])
    folders = [*repos, world.worktree(repos[0], "r0-feature", "feature"), deep, gone, link, world.folder("notes")]
    for i, folder in enumerate(folders):
        world.session(f"s{i}", folder, style="cli", messages=[("user", f"note {i}")])
    shutil.rmtree(gone)
    from tui_gateway import git_probe  # Hermes' probe, which the plugin's asks

    probed: list[str] = []
    probe = git_probe.common_repo_root

    def recorded(cwd):
        probed.append(threading.current_thread().name)
        return probe(cwd)

    monkeypatch.setattr(git_probe, "common_repo_root", recorded)

    def census() -> dict[str, Any]:
        state.reset()  # as a new process: no census, no attributor, no git answer kept
        plugin_folders.git.invalidate()
        probed.clear()
        with closing(store.open_state_db(world.home)) as conn:
            attributor = workspace.attributor_for(world.home, store.load_projects(world.home).projects)
            return dict(workspace.membership.members(conn, paths.state_db_key(world.home), attributor).where)

    at_once = census()
    assert len(probed) == len(folders), "every folder probed once (the deleted one from its nearest parent)"
    assert all(name.startswith("project-history-recall-git") for name in probed), probed
    assert len(set(probed)) > 1, "the probes ran side by side"
    monkeypatch.setattr(plugin_folders.git, "prefetch", lambda cwds: None)
    one_by_one = census()
    assert set(probed) == {"MainThread"}
    assert at_once == one_by_one
    assert at_once["s5"] == at_once["s0"] and at_once["s6"] == at_once["s1"] and at_once["s7"] == at_once["s2"]
    assert at_once["s8"] == at_once["s3"] and at_once.get("s9", ("home",))[0] == "home"  # a plain folder: Home


REMOVALS = {
    "git worktree remove": lambda repo, wt: git(repo, "worktree", "remove", "--force", str(wt)),
    "rm -rf": lambda repo, wt: shutil.rmtree(wt),
}


_WORKTREE_CASES = [
    ("desktop", "git worktree remove"),
    ("desktop", "rm -rf"),
    ("cli", "rm -rf"),  # <repo>/.git/worktrees/<name>/gitdir still names the folder
    pytest.param("cli", "git worktree remove", marks=pytest.mark.xfail(strict=True, reason=(
        "nothing is left that links the folder to its repo: a CLI row stores no git root and "
        "`git worktree remove` deletes <repo>/.git/worktrees/<name>"))),
]


@pytest.mark.parametrize("style,removal", _WORKTREE_CASES)
def test_sessions_in_a_removed_worktree_stay_in_the_repo(world: World, new_processes: NewProcesses, capsys, style, removal):
    """The worktree's session is the oldest row (attributed first in a scan); the searches run in a new process."""
    app = world.repo("app")
    wt = world.worktree(app, "app-wt-feat", "feat")
    world.session("in_wt", wt, style=style, messages=[("user", "the websocket client retries with jitter")])
    world.session("main", app, style="cli", messages=[("user", "websocket heartbeat every 30s")])
    REMOVALS[removal](app, wt)
    assert not wt.exists()
    answer = search_in_new_process(new_processes, world, "main", "websocket", mode="keyword", limit=10)
    assert result_sessions(answer) == ["in_wt"], f"the removed worktree's session left the repo ({removal}, {style})"
    answer = search_in_new_process(new_processes, world, "in_wt", "websocket", mode="keyword", limit=10)
    assert answer["project"] == auto(app) and result_sessions(answer) == ["main"]
    answer = world.search("in_wt", "websocket", mode="keyword", limit=10)
    assert answer["project"] == auto(app)
    assert census(world, capsys)[("auto", str(app))] == 2


def test_a_removed_worktree_found_after_its_repo_in_the_same_scan(world: World, new_processes: NewProcesses, capsys):
    """The same rm -rf case with the main repo's session recorded first: the repo is known when the worktree comes."""
    app = world.repo("app")
    wt = world.worktree(app, "app-wt-feat", "feat")
    world.session("main", app, style="cli", messages=[("user", "websocket heartbeat every 30s")])
    world.session("in_wt", wt, style="cli", messages=[("user", "the websocket client retries with jitter")])
    shutil.rmtree(wt)
    answer = search_in_new_process(new_processes, world, "main", "websocket", mode="keyword", limit=10)
    assert result_sessions(answer) == ["in_wt"]


@pytest.mark.xfail(strict=True, reason=(
    "the nearest-existing-ancestor fallback cannot tell a deleted nested clone from a deleted subfolder: "
    "both are untracked folders inside the outer repo"))
def test_a_deleted_nested_repo_does_not_move_into_the_outer_repo(world: World, new_processes: NewProcesses):
    """``outer/vendor/clone`` was its own repo (its own auto project); once deleted it must not join ``outer``."""
    outer = world.repo("outer")
    clone = outer / "vendor" / "clone"
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "-b", "main")
    world.session("in_clone", clone, style="cli", messages=[("user", "websocket in the vendored clone")])
    world.session("o", outer, style="cli", messages=[("user", "websocket in outer")])
    assert result_sessions(world.search("o", "websocket", mode="keyword", limit=10)) == []
    shutil.rmtree(clone)
    assert result_sessions(search_in_new_process(new_processes, world, "o", "websocket", mode="keyword", limit=10)) == []


# ---------------------------------------------------------------------------
# 4. Deep compression lineages
# ---------------------------------------------------------------------------


def _chain(world: World, head: str, first: int, last: int, words: dict[int, str]) -> str:
    """Continuations ``deep<first>..deep<last>`` under ``head``; ``words[i]`` is said in ``deep<i>``."""
    parent = head
    for i in range(first, last + 1):
        parent = world.continuation(parent, f"deep{i}", messages=[("user", words[i])] if i in words else None)
    return parent


def test_a_300_deep_compression_chain_stays_in_its_project(world: World, capsys):
    app, other = world.repo("app"), world.repo("other")
    world.session("deep0", app, style="cli", messages=[("user", "start of a long debugging session")])
    world.session("sibling", app, style="cli", messages=[("user", "websocket heartbeat every 30s")])
    world.session("o1", other, style="cli", messages=[("user", "websocket in the other repo, quokka")])
    deepest = _chain(world, "deep0", 1, 300, {150: "mid-chain websocket note: quokka backoff", 299: "late websocket note"})
    answer = world.search("sibling", "quokka", mode="keyword", limit=10)
    assert answer["project"] == auto(app) and result_sessions(answer) == ["deep150"]
    answer = world.search(deepest, "websocket quokka", mode="keyword", limit=10)
    assert answer["project"] == auto(app)
    # The chain's compressed past is searched (it left the live context), one result for the conversation; the
    # other repo is out.
    assert sorted(result_sessions(answer)) == ["deep150", "sibling"], answer
    assert answer["sessions_in_scope"] == 302 and "project_basis" not in answer
    assert census(world, capsys)[("auto", str(app))] == 302

    # The cache is warm now; the chain grows by more than the 64 rows a search re-reads.
    deepest = _chain(world, deepest, 301, 400, {350: "newer note: wombat retry"})
    assert result_sessions(world.search("sibling", "wombat", mode="keyword", limit=10)) == ["deep350"]
    answer = world.search(deepest, "websocket wombat quokka", mode="keyword", limit=10)
    found = result_sessions(answer)  # one result for the chain, where its best message is
    assert answer["project"] == auto(app) and len(found) == 2 and "sibling" in found and set(found) - {"sibling"} <= {"deep150", "deep350"}
    assert census(world, capsys)[("auto", str(app))] == 402


# ---------------------------------------------------------------------------
# 5. An ambiguous move target: one project's slug is another's name
# ---------------------------------------------------------------------------


def _create_tied(world: World, specs: list[tuple[str, str, Path]]) -> list[str]:
    """Create the projects in one second (Hermes' created_at is whole seconds), ids in descending order.

    Hermes' ids are random; descending ids make a tie broken by id (instead of
    by creation) pick the later project, so such a tie-break cannot pass by luck.
    Returns the ids in creation order.
    """
    from hermes_cli import projects_db

    for _ in range(100):
        with projects_db.connect_closing(world.home / "projects.db") as conn:
            for project in projects_db.list_projects(conn, include_archived=True):
                projects_db.delete_project(conn, project.id)
            ids = [projects_db.create_project(conn, name=name, slug=slug, folders=[str(folder)]) for name, slug, folder in specs]
            stamps = {p.created_at for p in projects_db.list_projects(conn, include_archived=True)}
        if len(stamps) == 1 and ids == sorted(ids, reverse=True):
            return ids
    pytest.fail("could not create the projects within one second")


@pytest.mark.parametrize("trial", range(4))
def test_move_to_an_ambiguous_token_picks_hermes_project(world: World, trial):
    """``alpha`` is X's slug and Y's name, both created in the same second; the move goes where project_switch goes."""
    from hermes_cli import projects_db
    from tools import project_tools

    fx, fy, start = world.folder("x-folder"), world.folder("y-folder"), world.folder("start")
    x = ("Alpha Team", "alpha", fx)
    y = ("alpha", "alpha-named", fy)
    ids = _create_tied(world, [x, y] if trial % 2 == 0 else [y, x])
    token = "alpha" if trial < 2 else "ALPHA"  # exact pass, then the case-insensitive pass
    with projects_db.connect_closing(world.home / "projects.db") as conn:
        expected = project_tools._resolve(conn, token)
    switched = json.loads(project_tools.project_switch(token))
    assert switched["success"] and switched["id"] == expected.id
    world.session("mv", start, style="cli", messages=[("user", "move me")])
    answer = world.move("mv", token)
    assert answer["success"] is True, answer
    assert answer["project"] == {"kind": "explicit", "id": expected.id, "name": expected.name}, (
        f"creation order {ids}, Hermes picks {expected.id} ({expected.name})")
    assert answer["cwd"] == switched["primary_path"] == world.session_row("mv")["cwd"]


# ---------------------------------------------------------------------------
# 10. Invalid UTF-8 in state.db
# ---------------------------------------------------------------------------


def _plant_bytes(world: World, table: str, column: str, raw: bytes, key_column: str, key: Any) -> None:
    """Write ``raw`` as TEXT (not a BLOB) with sqlite3, as a C writer or a damaged file could."""
    path = world.home / "state.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(f"UPDATE {table} SET {column} = CAST(? AS TEXT) WHERE {key_column} = ?", (raw, key))
        conn.commit()
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute(f"SELECT typeof({column}) FROM {table} WHERE {key_column} = ?", (key,)).fetchone() == ("text",)
        with pytest.raises(sqlite3.OperationalError, match="decode"):  # what a default sqlite3 reader gets
            conn.execute(f"SELECT {column} FROM {table} WHERE {key_column} = ?", (key,)).fetchall()


def test_invalid_utf8_in_another_sessions_cwd_does_not_fail_searches(world: World, capsys):
    app, other = world.repo("app"), world.repo("other")
    world.session("a1", app, style="cli", messages=[("user", "the websocket client retries with jitter")])
    world.session("cur", app, style="cli", messages=[("user", "what did we decide?")])
    world.session("bad", other, style="cli", messages=[("user", "websocket in a folder with a broken name")])
    _plant_bytes(world, "sessions", "cwd", str(other).encode() + b"/caf\xe9-\xff", "id", "bad")
    answer = world.search("cur", "websocket", mode="keyword", limit=10)
    assert answer["success"] is True and result_sessions(answer) == ["a1"]
    answer = world.search("bad", "websocket", mode="keyword", limit=10)
    assert answer["success"] is True, answer
    counts = census(world, capsys)
    assert counts[("auto", str(app))] == 2


def test_invalid_utf8_in_one_message_and_a_title_does_not_fail_searches(world: World):
    app = world.repo("app")
    world.session("a1", app, style="cli", messages=[("user", "the websocket client retries with jitter")])
    world.session("a2", app, style="cli")
    bad_id = world.say("a2", "assistant", "placeholder")
    world.session("cur", app, style="cli", messages=[("user", "what did we decide?")])
    _plant_bytes(world, "messages", "content", b"websocket frames \xff\xfe\xc3 were dropped", "id", bad_id)
    _plant_bytes(world, "sessions", "title", b"ti\xfftle", "id", "a2")
    answer = world.search("cur", "websocket", mode="keyword", limit=10)
    assert answer["success"] is True, answer
    assert set(result_sessions(answer)) == {"a1", "a2"}
    hit = next(r for r in answer["results"] if r["session_id"] == "a2")
    assert "\ufffd" in hit["snippet"] and "dropped" in hit["snippet"] and "\ufffd" in hit["title"]
    json.dumps(answer, ensure_ascii=False).encode("utf-8")  # the answer itself is valid UTF-8


# ---------------------------------------------------------------------------
# 12. Bounds the clock cannot hold; a move without projects.db
# ---------------------------------------------------------------------------


@pytest.fixture
def dated(world: World) -> World:
    app = world.repo("app")
    world.session("a1", app, style="cli", messages=[("user", "the websocket client retries with jitter")])
    world.session("cur", app, style="cli", messages=[("user", "what did we decide?")])
    return world


def test_until_the_last_day_of_year_9999_is_no_bound(dated: World):
    answer = dated.search("cur", "websocket", mode="keyword", until="9999-12-31")
    assert answer["success"] is True, answer
    assert result_sessions(answer) == ["a1"]
    answer = dated.search("cur", "websocket", mode="keyword", since="9999-12-31")
    assert answer["success"] is True and answer["results"] == []


@pytest.mark.parametrize("bound,value", [
    ("until", "0001-01-01T00:00+05:00"),  # before the clock's first second: nothing is before it
    ("since", "9999-12-31T23:59-05:00"),  # after the clock's last second: nothing is after it
])
def test_a_bound_beyond_the_clock_keeps_its_direction(dated: World, bound, value):
    answer = dated.search("cur", "websocket", mode="keyword", **{bound: value})
    if answer.get("success") is False:
        assert answer["code"] == "bad_argument" and "range" in answer["error"], answer
        return
    assert answer["results"] == [], (
        f"{bound}={value!r} bounds out every message, but search.parse_when answers OverflowError with "
        f"{'+inf' if bound == 'until' else '-inf'} and make_filters then drops the bound: every message matched"
    )


def test_a_move_to_an_unknown_project_without_projects_db_says_there_is_none(world: World):
    world.session("mv", world.folder("start"), style="cli", messages=[("user", "move me")])
    assert not (world.home / "projects.db").exists()
    answer = world.move("mv", "Q")
    assert answer["success"] is False and answer["code"] == "project_not_found"
    assert "()" not in answer["error"] and answer["error"].startswith("project not found: Q")
    assert "projects.db" in answer["error"] and "hermes project create" in answer["error"]
    assert not (world.home / "projects.db").exists(), "looking it up created nothing"
