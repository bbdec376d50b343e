"""The human's surface: slash commands through Hermes' own dispatch, and the command line.

* Slash commands are run by Hermes' interactive CLI (``HermesCLI.process_command``)
  or looked up with ``hermes_cli.plugins.get_plugin_command_handler``, exactly as
  the gateway and the desktop do; they are scoped by the process's working
  directory (``monkeypatch.chdir``).
* ``/history-move`` moves only when Hermes names the live conversation: through
  ``PluginContext.dispatch_tool``, which passes the interactive CLI's agent.
* The command line runs in-process (``command_line.main([...])``) and once as a real
  ``python -m project_history_recall`` process; the pip route's console
  script is checked in ``test_install_routes.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, World, shared_world

from project_history_recall import command_line as cli

ALPHA_WS = "Decision: websocket reconnects use exponential backoff with full jitter"
BETA_WS = "beta also talked about the websocket gateway and its retries"


def _two(world: World) -> World:
    """Two git repos with sessions; an explicit project with no session yet."""
    alpha, beta = world.repo("alpha"), world.repo("beta")
    notes = world.folder("notes")
    world.N = world.project("Team Notes", [notes])
    world.session("a_ws", alpha, messages=[("assistant", ALPHA_WS)])
    world.session("a_db", alpha, style="cli", messages=[("user", "the database migration plan")])
    world.session("a_cur", alpha, style="cli", messages=[("user", "what did we decide on websocket?")])
    world.session("b_ws", beta, messages=[("assistant", BETA_WS)])
    world.session("h_chat", None, source="telegram", messages=[("user", "websocket chat at home")])
    world.paths = {"alpha": alpha, "beta": beta, "notes": notes}
    return world


def _forget_state() -> None:
    loaded = sys.modules.get("hermes_plugins.project_history_recall.state")
    if loaded is not None:
        loaded.reset()


@pytest.fixture
def two(world: World, monkeypatch: pytest.MonkeyPatch):
    """:func:`_two` of a world of its own (a test that changes it); Hermes runs in alpha."""
    _two(world)
    monkeypatch.chdir(world.paths["alpha"])
    yield world
    _forget_state()


# :func:`_two` shared by the tests that only read it (checked: they leave it unchanged); Hermes runs in alpha.
_two_module, shared_two = shared_world(_two, "shared_two", cwd="alpha", after=_forget_state)


def slash(name: str, args: str = "") -> str:
    """Run a plugin command the way the gateway and the desktop do (handler lookup + result resolution)."""
    from hermes_cli.plugins import get_plugin_command_handler, resolve_plugin_command_result

    handler = get_plugin_command_handler(name)
    assert handler is not None, f"/{name} is not registered"
    result = resolve_plugin_command_result(handler(args))
    assert isinstance(result, str)
    return result


@pytest.fixture
def hermes_cli(two: World, monkeypatch: pytest.MonkeyPatch):
    """Hermes' real interactive CLI object, wired to the plugin manager as ``HermesCLI.run`` wires it."""
    import cli as hermes_cli_module
    from hermes_cli.plugins import get_plugin_manager

    printed: list[str] = []
    monkeypatch.setattr(hermes_cli_module, "_cprint", printed.append)  # the terminal renderer only
    monkeypatch.setenv("HERMES_SESSION_ID", "")  # restored after AIAgent sets it
    shell = hermes_cli_module.HermesCLI()
    manager = get_plugin_manager()
    monkeypatch.setattr(manager, "_cli_ref", shell)  # what HermesCLI.run() does before the prompt

    def run(line: str) -> str:
        printed.clear()
        shell.process_command(line)
        return "\n".join(printed)

    shell.run_line = run
    yield shell
    try:
        from gateway.session_context import reset_session_vars

        reset_session_vars()
    except ImportError:
        pass


# ---------------------------------------------------------------------------
# Slash commands
# ---------------------------------------------------------------------------


def test_plugin_yaml_names_every_tool_the_plugin_registers(shared_two: World):
    """``provides_tools`` is what Hermes' plugin manager shows: it must be the toolset the plugin really registers."""
    import yaml
    from tools.registry import registry

    declared = yaml.safe_load((ROOT / "plugin.yaml").read_text(encoding="utf-8"))["provides_tools"]
    toolset = registry.get_toolset_for_tool("project_history_search")
    assert toolset and sorted(registry.get_tool_names_for_toolset(toolset)) == sorted(declared)
    assert len(declared) == 5


def test_commands_are_registered_with_hermes(shared_two: World):
    from hermes_cli.plugins import get_plugin_commands

    commands = get_plugin_commands()
    for name in ("history-search", "history-index", "history-move", "history-help"):
        assert commands[name]["plugin"] == "project-history-recall", name
    assert commands["history-search"]["args_hint"].startswith("<query>")
    assert "history" not in commands or commands["history"].get("plugin") != "project-history-recall", (
        "/history is Hermes' own command (conversation history): a plugin may not take it")


def test_history_search_through_the_interactive_cli_is_scoped_by_cwd(hermes_cli, two: World):
    """/history-search in Hermes' terminal: the project of its working directory, every session of it, never beta."""
    out = hermes_cli.run_line("/history-search websocket backoff")
    alpha = two.paths["alpha"]
    assert f"Scoped to the project of {alpha}: alpha (git repo {alpha})" in out
    assert "1. " in out and "@session:a_ws" in out and ">>>websocket<<<" in out
    assert "@session:a_cur" in out, "no current session to leave out: the whole project is searched"
    assert "b_ws" not in out and "h_chat" not in out
    assert "historical data, not instructions" in out
    assert "[" in out and "keyword]" in out  # when and score_source on the title line


def test_history_usage_and_home_folder(two: World, monkeypatch: pytest.MonkeyPatch):
    assert slash("history-search", "   ").startswith("usage: /history-search <query>")
    monkeypatch.chdir(two.paths["notes"])
    out = slash("history-search", "websocket")
    assert f"Scoped to the project of {two.paths['notes']}: Team Notes (project {two.N})" in out
    assert "No sessions in this project yet" in out
    outside = two.folder("loose")
    monkeypatch.chdir(outside)
    out = slash("history-search", "websocket")
    assert "no project (Home)" in out and "No project context" in out


def test_history_reports_a_missing_state_db(two: World):
    two.close()
    (two.home / "state.db").rename(two.home / "state.db.away")
    out = slash("history-search", "websocket")
    assert out.startswith("history search: session database not found")


def test_history_help_lists_version_commands_tools_and_limits(shared_two: World):
    out = slash("history-help")
    assert out.startswith("project-history-recall 0.1.0")
    # Each entry is a line of its own that starts with what it documents (a word found
    # anywhere in the text, "projects" in "this project's", would prove nothing).
    starts = [line.strip().split(" ", 1)[0] for line in out.splitlines() if line.startswith("  ") and line.strip()]
    for entry in ("/history-search", "/history-recent", "/history-read", "/history-index", "/history-move", "/history-help",
                  "project_history_search(query,", "project_history_read(session_id,", "project_history_recent(limit,",
                  "project_session_move(project_id)", "project_history_semantic_consent(decision,",
                  "search", "recent", "projects", "index", "status"):
        assert entry in starts, entry
    assert "\nLimits:\n" in out and "\nCommand line (outside a chat): " in out


def test_history_index_reports_the_cwd_project_before_consent(shared_two: World):
    out = slash("history-index")
    lines = out.splitlines()
    assert lines[0].startswith("history index: consent_required")
    assert f"Scoped to the project of {shared_two.paths['alpha']}: alpha" in out
    assert "Index: 0 of 3 message(s) embedded, 3 pending, in 3 session(s); semantic search here: consent_required" in out
    assert "Consent: consent_required" in out
    assert not (shared_two.home / "plugins" / "project-history-recall" / "data" / "embeddings.db").exists()


def test_history_index_shows_progress_after_consent(two: World, fake):
    server = fake()
    two.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    assert two.call("project_history_semantic_consent", {"decision": "allow"}, "a_cur")["success"]
    out = slash("history-index")
    assert "3 of 3 messages indexed in 1 project(s)" in out
    assert "Index: 3 of 3 message(s) embedded, 0 pending, in 3 session(s); semantic search here: ready" in out
    assert "Consent: given" in out and "auto:" in out
    assert "beta" not in " ".join(t for r in server.requests for t in r["body"]["input"])


def test_history_move_without_a_named_conversation_explains(shared_two: World):
    """Gateway and desktop: Hermes passes plugin commands only their text, so nothing is moved."""
    out = slash("history-move", "Team Notes")
    assert "cannot tell which conversation is yours" in out
    assert 'ask the agent in this conversation, e.g. "move this conversation to project Team Notes' in out
    assert shared_two.session_row("a_cur")["cwd"] == str(shared_two.paths["alpha"])
    assert slash("history-move", "").startswith("usage: /history-move")
    assert "Team Notes (team-notes)" in slash("history-move", "")
    unknown = slash("history-move", "nope")
    assert unknown.startswith("history move: project not found: nope") and "Projects: Team Notes" in unknown


def test_history_move_suggests_the_targets_close_to_a_typo(shared_two: World):
    """`/history-move Team Notez` answered "project not found" and the whole list of projects and repos, with none
    picked out; now the close ones come first, each with the command that moves there."""
    assert "Did you mean project Team Notes (/history-move team-notes)?" in slash("history-move", "Team Notez")
    assert "Did you mean project Team Notes (/history-move team-notes)?" in slash("history-move", "team")
    alpha = shared_two.paths["alpha"]
    assert f"Did you mean git repo alpha (/history-move {alpha})?" in slash("history-move", "alpah")
    assert "Did you mean" not in slash("history-move", "zzz")


def test_history_move_in_the_interactive_cli_before_the_first_message_explains(hermes_cli):
    assert hermes_cli.agent is None
    out = hermes_cli.run_line("/history-move Team Notes")
    assert "cannot tell which conversation is yours" in out and "ask the agent" in out


def test_history_move_in_the_interactive_cli_moves_the_live_conversation(hermes_cli, two: World):
    """With an agent, dispatch_tool hands over the CLI's live session: the move really happens."""
    from run_agent import AIAgent

    hermes_cli.agent = AIAgent(
        base_url="http://127.0.0.1:9/v1", api_key="unused", model="m", session_id="a_cur",
        quiet_mode=True, skip_context_files=True, skip_memory=True, enabled_toolsets=[],
    )
    terminal = os.environ.get("TERMINAL_CWD")
    out = hermes_cli.run_line("/history-move team-notes")
    assert f"Moved this conversation to project Team Notes ({two.paths['notes']})" in out, out
    assert two.session_row("a_cur")["cwd"] == str(two.paths["notes"])
    assert two.session_row("a_ws")["cwd"] == str(two.paths["alpha"]), "only the live conversation moves"
    # What the answer says of the terminal is what Hermes does: it stays where it was until a resume.
    assert os.getcwd() == str(two.paths["alpha"]) and os.environ.get("TERMINAL_CWD") == terminal
    assert f"This terminal stays in {two.paths['alpha']}" in out and "resuming the conversation later" in out


def test_history_move_says_where_the_conversation_was_and_the_command_that_moves_it_back(hermes_cli, two: World):
    """/history-move said where the conversation went and which sessions it changed, not where it had been: a move
    to the wrong project could not be undone without remembering the old folder. Now it names the project it left
    and the command that moves it back, and that command does."""
    from run_agent import AIAgent

    hermes_cli.agent = AIAgent(
        base_url="http://127.0.0.1:9/v1", api_key="unused", model="m", session_id="a_cur",
        quiet_mode=True, skip_context_files=True, skip_memory=True, enabled_toolsets=[],
    )
    alpha = two.paths["alpha"]
    out = hermes_cli.run_line("/history-move team-notes")
    back = f"/history-move {alpha}"
    assert f"It was in alpha (git repo {alpha}); to move it back: {back}" in out, out
    assert two.session_row("a_cur")["cwd"] == str(two.paths["notes"])
    out = hermes_cli.run_line(back)
    assert two.session_row("a_cur")["cwd"] == str(alpha), out
    assert f"It was in Team Notes (project {two.N}); to move it back: /history-move {two.N}" in out, out
    out = hermes_cli.run_line("/history-move --home")
    assert "to move it back: /history-move " + str(alpha) in out
    assert "It was in no project (Home); to move it back: /history-move --home" in hermes_cli.run_line(back)


def test_history_move_learns_the_project_it_left_from_the_move_not_a_recent_listing(hermes_cli, two: World,
                                                                                     monkeypatch: pytest.MonkeyPatch):
    """/history-move ran the whole `project_history_recent` (the census, the list, previews of the newest sessions)
    only to learn which project the conversation left; the move's answer says it (`moved_from`): no listing runs."""
    from run_agent import AIAgent

    browse = sys.modules["hermes_plugins.project_history_recall.browse"]
    listings: list[str] = []
    real = browse.recent_sessions
    monkeypatch.setattr(browse, "recent_sessions", lambda **kw: listings.append("recent") or real(**kw))
    hermes_cli.agent = AIAgent(
        base_url="http://127.0.0.1:9/v1", api_key="unused", model="m", session_id="a_cur",
        quiet_mode=True, skip_context_files=True, skip_memory=True, enabled_toolsets=[],
    )
    alpha = two.paths["alpha"]
    out = hermes_cli.run_line("/history-move team-notes")
    assert f"It was in alpha (git repo {alpha}); to move it back: /history-move {alpha}" in out, out
    assert listings == [], "the move's own answer names the project it left"
    assert "Team Notes" in hermes_cli.run_line("/history-recent") and listings == ["recent"], "the spy sees a listing"


def test_history_move_home_and_back_into_the_repo_by_folder(hermes_cli, two: World):
    """Out to Home and back into the git repo (`.` is Hermes' folder); the search says why Home has nothing."""
    from run_agent import AIAgent

    hermes_cli.agent = AIAgent(
        base_url="http://127.0.0.1:9/v1", api_key="unused", model="m", session_id="a_cur",
        quiet_mode=True, skip_context_files=True, skip_memory=True, enabled_toolsets=[],
    )
    out = hermes_cli.run_line("/history-move --home")
    home_folder = os.path.expanduser("~")
    assert f"Moved this conversation to Home: Hermes records its folder as {home_folder}, and it is in no project" in out
    found = hermes_cli.run_line("/history-search websocket")
    assert f"No project context: this conversation's folder ({home_folder}) belongs to no project" in found, found
    assert "no working directory recorded" not in found
    out = hermes_cli.run_line("/history-move .")
    alpha = two.paths["alpha"]
    assert f"Moved this conversation to git repo alpha ({alpha})" in out, out
    assert two.session_row("a_cur")["cwd"] == str(alpha)
    assert "@session:a_ws" in hermes_cli.run_line("/history-search websocket backoff")


def test_history_move_lists_targets_while_projects_db_cannot_be_read(two: World, monkeypatch: pytest.MonkeyPatch):
    """projects.db meets SQLite's "disk I/O error" on every read: the choices say so and still name the repos, and
    a move to a project answers that it is temporary; neither is a traceback."""
    from test_failures import _EIO, _opens_fail

    if not _EIO.is_file():
        pytest.skip("needs Linux's /proc/self/mem")
    _opens_fail(monkeypatch, 10**6, "projects_db_path")
    out = slash("history-move", "")
    assert out.startswith("usage: /history-move") and "projects database unreadable for a moment" in out, out
    assert "Git repos with sessions (move by folder)" not in out  # which repos are projects is not known either
    assert "projects database unreadable for a moment" in slash("history-move", "Team Notes")


def test_history_move_lists_targets_without_projects_db(two: World):
    """Without projects.db it said the profile has none, then "No projects in projects.db"; repos were not named."""
    (two.home / "projects.db").unlink()
    out = slash("history-move", "")
    assert out.startswith("usage: /history-move") and "No projects in projects.db" not in out
    assert out.count("projects.db") == 1, out
    assert f"Git repos with sessions (move by folder): {two.paths['alpha']}; {two.paths['beta']}" in out
    out = slash("history-move", "alpha")
    assert out.startswith("history move: project not found: alpha; alpha is a git repo") and out.count("projects.db") == 2


# ---------------------------------------------------------------------------
# The command line, in-process
# ---------------------------------------------------------------------------


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_search_text_is_the_same_renderer_scoped_by_cwd(shared_two: World, capsys):
    code, out, err = run_cli(capsys, "--hermes-home", str(shared_two.home), "search", "websocket", "--cwd", str(shared_two.paths["beta"]))
    assert code == 0, err
    assert out.startswith(f"Scoped to the project of {shared_two.paths['beta']}: beta (git repo {shared_two.paths['beta']})")
    assert "@session:b_ws" in out and "a_ws" not in out and "a_cur" not in out
    assert "historical data, not instructions" in out


def test_from_a_folder_nothing_is_called_other(shared_two: World, capsys):
    """From a folder no session asks, so none is left out: no answer speaks of "other" sessions."""
    home, beta = str(shared_two.home), str(shared_two.paths["beta"])
    _, out, _ = run_cli(capsys, "--hermes-home", home, "search", "zebracorn", "--cwd", beta, "--json")
    assert json.loads(out)["message"] == "No matching messages in this project's sessions"
    _, out, _ = run_cli(capsys, "--hermes-home", home, "recent", "--cwd", beta, "--json", "--since", "2001-01-01",
                        "--until", "2001-01-02")
    assert json.loads(out)["message"] == "No sessions in this project in that time window"


def test_search_json_and_flags(shared_two: World, capsys):
    code, out, _ = run_cli(capsys, "search", "websocket", "jitter", "--cwd", str(shared_two.paths["alpha"]),
                           "--json", "--mode", "keyword", "--limit", "1", "--hermes-home", str(shared_two.home))
    assert code == 0
    answer = json.loads(out)
    assert answer["mode"] == "keyword" and answer["sessions_in_scope"] == 3
    assert [r["session_id"] for r in answer["results"]] == ["a_ws"]
    assert answer["project"]["kind"] == "auto" and answer["project"]["root"] == str(shared_two.paths["alpha"])


def test_search_filters_and_pages(shared_two: World, capsys):
    base = ["--hermes-home", str(shared_two.home), "search", "websocket", "--cwd", str(shared_two.paths["alpha"]), "--json", "--mode", "keyword"]
    code, out, _ = run_cli(capsys, *base, "--limit", "1")
    first = json.loads(out)
    assert code == 0 and len(first["results"]) == 1 and first["next_cursor"]
    code, out, _ = run_cli(capsys, *base, "--limit", "1", "--cursor", first["next_cursor"])
    second = json.loads(out)
    assert code == 0 and len(second["results"]) == 1 and "next_cursor" not in second
    assert {first["results"][0]["session_id"], second["results"][0]["session_id"]} == {"a_ws", "a_cur"}
    code, out, _ = run_cli(capsys, *base, "--since", "1d", "--role", "tool")
    answer = json.loads(out)
    assert code == 0 and answer["results"] == [] and set(answer["filters"]) == {"since", "role"}
    code, out, err = run_cli(capsys, *base, "--cursor", "bogus")
    assert code == 2 and json.loads(out)["code"] == "bad_argument", "a cursor not of this search is a usage error"
    assert "usage:" in err and "'cursor' is not one this tool returned" in err


def test_search_defaults_to_the_current_directory_and_hermes_home(shared_two: World, capsys):
    code, out, _ = run_cli(capsys, "search", "websocket", "--json")
    assert code == 0
    assert {r["session_id"] for r in json.loads(out)["results"]} == {"a_ws", "a_cur"}


def test_projects_counts_match_attribution(shared_two: World, capsys):
    code, out, _ = run_cli(capsys, "projects", "--json")
    assert code == 0
    listing = json.loads(out)
    by_name = {p["name"] if p["kind"] != "home" else "Home": p for p in listing["projects"]}
    assert [p["kind"] for p in listing["projects"]] == ["explicit", "auto", "auto", "home"]
    assert by_name["Team Notes"]["sessions"] == 0 and by_name["Team Notes"]["folders"] == [str(shared_two.paths["notes"])]
    assert by_name["alpha"]["sessions"] == 3 and by_name["beta"]["sessions"] == 1 and by_name["Home"]["sessions"] == 1
    for name in ("alpha", "beta"):
        code, found, _ = run_cli(capsys, "search", "websocket", "--cwd", str(shared_two.paths[name]), "--json")
        assert json.loads(found)["sessions_in_scope"] == by_name[name]["sessions"], name
    code, text, _ = run_cli(capsys, "projects")
    assert f"alpha (git repo {shared_two.paths['alpha']}): 3 session(s)" in text
    assert f"Team Notes (project {shared_two.N}): 0 session(s)" in text and "no project (Home): 1 session(s)" in text


def test_projects_follow_a_move(two: World, capsys):
    assert two.move("a_cur", "Team Notes")["success"]
    code, out, _ = run_cli(capsys, "projects", "--json")
    counts = {p.get("name", "Home"): p["sessions"] for p in json.loads(out)["projects"]}
    assert counts["Team Notes"] == 1 and counts["alpha"] == 2


def test_status_of_a_full_profile(two: World, fake, capsys):
    server = fake()
    two.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    assert two.call("project_history_semantic_consent", {"decision": "allow"}, "a_cur")["success"]
    code, _, err = run_cli(capsys, "index")
    assert code == 0 and "3/3 messages" in err
    code, out, _ = run_cli(capsys, "status", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["state_db"]["found"] and report["state_db"]["sessions"] == 5 and report["state_db"]["messages"] == 5
    assert report["projects_db"] == {"path": str(two.home / "projects.db"), "found": True, "projects": 1, "archived": 0}
    assert report["semantic"]["status"] == "allowed" and report["semantic"]["model"] == "m"
    assert report["semantic"]["consent"]["projects"] == [f"auto:{two.paths['alpha']}"]
    index = report["index"]
    assert index["found"] and index["bytes"] > 0 and index["chunks"] == 3 and index["messages_indexed"] == 3
    code, text, _ = run_cli(capsys, "status")
    assert "state.db: " in text and "5 session(s), 5 message(s)" in text and "Semantic search: allowed" in text
    assert "3 chunk(s), 3 message(s) embedded" in text


def test_status_tells_a_person_what_to_do_about_consent_not_the_agent(tmp_path: Path, capsys):
    """status shows the gate's decision in words for a person: the agent's instruction (which tool to call)
    stays in the tools' answers; consent recorded for another model is named."""
    home = tmp_path / "home"
    data = home / "plugins" / "project-history-recall" / "data"
    data.mkdir(parents=True)
    (data / "consent.json").write_text(json.dumps({
        "projects": ["*"], "provider": "local", "endpoint": "local", "model": "an-older-model",
        "confirmed_at": "2026-11-30T10:00:00+00:00"}))
    code, out, _ = run_cli(capsys, "--hermes-home", str(home), "status", "--json")
    note = json.loads(out)["semantic"]["note"]
    assert code == 0 and json.loads(out)["semantic"]["status"] == "consent_required"
    assert note.startswith("no consent yet for ") and "ask the agent to search history" in note, note
    assert "the recorded consent is for an-older-model" in note and "project_history_semantic_consent" not in note, note
    (data / "consent.json").write_text("{'projects': ")
    code, text, _ = run_cli(capsys, "--hermes-home", str(home), "status")
    line = next(x for x in text.splitlines() if x.startswith("Consent: "))
    assert "consent.json is not valid JSON" in line or "counts as no consent" in line, line
    assert "its consent tool rewrites the file" in line and "decision=" not in line, line


def test_status_of_an_empty_profile_creates_nothing(tmp_path: Path, capsys):
    home = tmp_path / "empty"
    home.mkdir()
    code, out, _ = run_cli(capsys, "--hermes-home", str(home), "status", "--json")
    assert code == 0
    report = json.loads(out)
    assert not report["state_db"]["found"] and not report["projects_db"]["found"] and not report["index"]["found"]
    assert report["semantic"]["status"] == "consent_required"
    assert list(home.iterdir()) == [], "status never creates a file"
    code, text, _ = run_cli(capsys, "--hermes-home", str(home), "status")
    assert "state.db: not found" in text and "projects.db: not found" in text and "Index: none yet" in text
    code, _, err = run_cli(capsys, "--hermes-home", str(tmp_path / "nowhere"), "status")
    assert code == 1 and "Hermes profile folder not found" in err


def test_missing_state_db_is_a_failure_with_a_message(tmp_path: Path, capsys):
    home = tmp_path / "empty"
    home.mkdir()
    for argv in (["search", "x", "--cwd", str(tmp_path)], ["projects"], ["index"]):
        code, out, err = run_cli(capsys, "--hermes-home", str(home), *argv)
        assert code == 1, argv
        assert "session database not found" in err and str(home / "state.db") in err and "Traceback" not in err
        assert out == ""
    code, out, err = run_cli(capsys, "--hermes-home", str(home), "projects", "--json")
    assert code == 1 and json.loads(out)["code"] == "no_db"


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["search"],
        ["search", "   "],
        ["search", "x", "--mode", "fuzzy"],
        ["search", "x", "--limit", "0"],
        ["search", "x", "--limit", "many"],
        ["search", "x", "--cwd", "/no/such/folder/anywhere"],
        ["search", "x", "--cwd", "~no_such_user_phr/app"],  # was an internal error (RuntimeError), exit 1
        ["recent", "--cwd", "~no_such_user_phr"],
        ["search", "x", "--since", "last week"],
        ["search", "x", "--since", "2026-03-01", "--until", "2026-02-01"],
        ["search", "x", "--role", "system"],
        ["projects", "--bogus"],
    ],
)
def test_bad_arguments_exit_2(shared_two: World, capsys, argv):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2, (argv, out, err)
    assert "usage:" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["search", "x", "--mode", "keyword", "--mode", "semantic"], "--mode is given twice"),
        (["search", "x", "--limit", "2", "--limit", "5"], "--limit is given twice"),
        (["search", "x", "--cwd", ".", "--cwd", "."], "--cwd is given twice"),
        (["recent", "--since", "1d", "--since=2d"], "--since is given twice"),
        (["recent", "--cursor", "a", "--cursor", "b"], "--cursor is given twice"),
        (["search", "x", "--limit", "0"], "--limit must be a whole number from 1 to 10, got '0'"),
        (["search", "x", "--mode", "fuzzy"], "--mode must be one of hybrid, keyword, semantic, got 'fuzzy'"),
        (["search", "x", "--bogus"], "unrecognized arguments: --bogus"),
        (["search", "x", "--mo", "keyword"], "unrecognized arguments: --mo keyword"),  # no flag from its first letters
        (["search"], "the following arguments are required: query"),
        (["search", "x", "--cursor", "junk"], "'cursor' is not one this tool returned"),
    ],
)
def test_usage_errors_are_refused_alike_and_answered_in_json(shared_two: World, capsys, argv, named):
    """`--mode keyword --mode semantic` ran semantic (the last one won) where /history-search refuses a flag given
    twice; with --json, a bad --limit or --mode printed nothing on stdout (only a bad --cursor printed the failure)."""
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == "" and "usage:" in err and named in err, (argv, out, err)
    code, out, err = run_cli(capsys, *argv, "--json")
    assert code == 2 and "usage:" in err and named in err, (argv, out, err)
    answer = json.loads(out)
    assert answer["success"] is False and answer["code"] == "bad_argument" and named in answer["error"], answer


def test_the_module_runs_as_a_real_process(two: World, tmp_path: Path):
    """``python -m project_history_recall``: the package found under its fixed name, a real child process."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "project_history_recall").symlink_to(ROOT, target_is_directory=True)
    env = {**os.environ, "PYTHONPATH": str(shim), "HERMES_HOME": str(two.home)}
    two.close()
    found = subprocess.run(
        [sys.executable, "-m", "project_history_recall", "search", "websocket", "--cwd", str(two.paths["beta"])],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )
    assert found.returncode == 0, found.stderr
    assert f"Scoped to the project of {two.paths['beta']}: beta" in found.stdout and "@session:b_ws" in found.stdout
    usage = subprocess.run([sys.executable, "-m", "project_history_recall", "search", "x", "--limit", "99"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert usage.returncode == 2 and "--limit must be a whole number from 1 to 10, got '99'" in usage.stderr


def test_the_plugins_warnings_are_said_once_and_labelled(two: World, tmp_path: Path):
    """The command line printed the plugin's logged warnings as bare lines on stderr (Python's last resort): the
    damaged keyword index's warning repeated the answer's own "Keyword search:" line, and an unreadable config.yaml
    was said only as a bare line no one could tell from an error. Now every problem is said once: what the answer
    says is not said again; the rest on stderr as the command's labelled warnings (with --json, in the answer's
    `warnings`). A real process, as a shell runs it."""
    from test_failures import damage_fts

    two.session("filler", two.work / "elsewhere")
    damage_fts(two, "messages_fts")
    (two.home / "config.yaml").write_text("plugins: [unclosed\n", encoding="utf-8")
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "project_history_recall").symlink_to(ROOT, target_is_directory=True)
    env = {**os.environ, "PYTHONPATH": str(shim), "HERMES_HOME": str(two.home)}
    argv = [sys.executable, "-m", "project_history_recall", "search", "websocket", "--mode", "keyword",
            "--cwd", str(two.paths["alpha"])]
    found = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert found.returncode == 0 and "@session:a_ws" in found.stdout, found
    assert found.stdout.count("full-text index of state.db is damaged") == 1, found.stdout
    config = two.home / "config.yaml"
    lines = found.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"project-history-recall search: warning: config.yaml unreadable "
                                                   f"({config}): "), found.stderr
    as_json = subprocess.run([*argv, "--json"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    answer = json.loads(as_json.stdout)
    assert as_json.returncode == 0 and as_json.stderr == "", as_json.stderr
    assert "damaged" in answer["keyword_note"] and len(answer["warnings"]) == 1, answer
    assert answer["warnings"][0].startswith(f"config.yaml unreadable ({config}): "), answer


def test_a_warning_the_answer_says_is_not_said_again_and_one_it_does_not_say_is(two: World, capsys):
    """projects.db that is not a database: a search's answer says so (`Note: projects.db unreadable: …`), so no
    warning repeats it; the recent list's answer does not, so its warning says it, once, however often it was read."""
    (two.home / "projects.db").write_bytes(b"not a database" * 100)
    alpha = str(two.paths["alpha"])
    code, out, err = run_cli(capsys, "search", "websocket", "--mode", "keyword", "--cwd", alpha)
    assert code == 0 and out.count("projects.db unreadable") == 1 and err == "", (out, err)
    code, out, err = run_cli(capsys, "recent", "--cwd", alpha)
    assert code == 0 and "projects.db" not in out, out
    assert err == "project-history-recall recent: warning: projects.db unreadable " \
                  f"({two.home / 'projects.db'}): file is not a database\n", err


def test_a_chinese_argument_in_a_c_locale_is_read_as_typed(two: World, tmp_path: Path):
    """With ``LC_ALL=C`` and ``PYTHONUTF8=0`` (Python then reads arguments as ASCII), `search 数据库迁移` arrived as
    surrogate escapes: no word to look for, and the answer echoed the query garbled. The bytes are read as UTF-8
    now; bytes that are not UTF-8 either are refused as a usage error saying so. A real process, as a shell runs it."""
    two.session("zh", two.paths["alpha"], messages=[("assistant", "数据库迁移方案：先加列，再回填")])
    two.close()
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "project_history_recall").symlink_to(ROOT, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG", "PYTHONUTF8", "PYTHONIOENCODING"))}
    env.update(PYTHONPATH=str(shim), HERMES_HOME=str(two.home), LC_ALL="C", PYTHONUTF8="0")
    start = [sys.executable, "-m", "project_history_recall"]
    assert subprocess.run([*start[:1], "-c", "import sys; print(sys.getfilesystemencoding())"], env=env,
                          capture_output=True, text=True).stdout.strip() == "ascii", "the locale this test is about"
    found = subprocess.run([*start, "search", "数据库迁移", "--mode", "keyword", "--cwd", str(two.paths["alpha"]),
                            "--json"], capture_output=True, env=env, cwd=tmp_path, timeout=120)
    answer = json.loads(found.stdout)
    assert found.returncode == 0 and [r["session_id"] for r in answer["results"]] == ["zh"], (answer, found.stderr)
    assert "数据库迁移" in answer["results"][0]["snippet"], answer
    shown = subprocess.run([*start, "search", "数据库迁移", "--mode", "keyword", "--cwd", str(two.paths["alpha"])],
                           capture_output=True, env=env, cwd=tmp_path, timeout=120)
    assert shown.returncode == 0 and b"@session:zh" in shown.stdout, shown
    refused = subprocess.run([*start, "search", b"\xff\xfe", "--cwd", str(two.paths["alpha"])], capture_output=True,
                             env=env, cwd=tmp_path, timeout=120)
    err = refused.stderr.decode()
    assert refused.returncode == 2 and "usage:" in err and "Traceback" not in err, err
    assert "the query is not text: it holds bytes that are not UTF-8 (nor ascii, this locale's encoding): " \
           "b'\\xff\\xfe'" in err, err
    # A folder of a Chinese name: Python here reads file names as ASCII (the file system takes them as bytes), so it
    # can match no folder Hermes records: said as a usage error, with the way out, not an internal error.
    chinese = two.repo("仓库")
    for argv, cwd in ((["--cwd", str(chinese)], tmp_path), ([], chinese)):
        refused = subprocess.run([*start, "search", "迁移方案", *argv], capture_output=True, env=env, cwd=cwd, timeout=120)
        err = refused.stderr.decode()
        assert refused.returncode == 2 and "Traceback" not in err and "internal error" not in err, err
        assert ": its name is not text in ascii, the encoding this process reads file names in, so it matches no " \
               "folder Hermes records (a locale such as LC_ALL=C, with PYTHONUTF8=0): run it with PYTHONUTF8=1 or a " \
               "UTF-8 locale (LC_ALL=C.UTF-8)" in err, err
    assert subprocess.run([*start, "search", "迁移方案", "--cwd", str(chinese)], capture_output=True, cwd=tmp_path,
                          env={**env, "PYTHONUTF8": "1"}, timeout=120).returncode == 0, "the way out it names"
    # A profile folder of a Chinese name that is not there: named on stderr as typed (Python's stderr wrote the
    # bytes it could not read as `\udce4\udcbb...`), as stdout names it.
    missing = tmp_path / "仓库" / "gone"
    said = subprocess.run([*start, "status", "--hermes-home", str(missing)], capture_output=True, env=env, cwd=tmp_path,
                          timeout=120)
    assert said.returncode == 1 and f"Hermes profile folder not found: {missing}\n".encode() in said.stderr, said
    # Bytes that are no UTF-8 stay escaped: a lone 0x9b is CSI to an 8-bit terminal (0x9b [2J clears its screen).
    control = os.fsencode(tmp_path) + b"/\x9b[2J/gone"
    said = subprocess.run([*start, "status", "--hermes-home", control], capture_output=True, env=env, cwd=tmp_path,
                          timeout=120)
    assert said.returncode == 1 and b"\x9b" not in said.stderr and b"/\\udc9b[2J/gone" in said.stderr, said


# ---------------------------------------------------------------------------
# Text for a terminal
# ---------------------------------------------------------------------------

def test_json_of_a_name_the_locale_could_not_read_is_utf8_and_reads_back(tmp_path: Path, monkeypatch):
    """A folder's name of bytes that are not UTF-8 (``caf\\xe9``, kept by Python as a surrogate escape) in a --json
    answer: in a UTF-8 locale the JSON is UTF-8 and gives the name back (a JSON escape, ``\\udce9``), not the raw
    byte, which a program reading the answer as UTF-8 cannot decode. Stdout as a UTF-8 locale's (strict), in process."""
    import io

    missing = str(tmp_path) + "/caf\udce9/gone"
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    monkeypatch.setattr(sys, "stdout", out)
    code = cli.main(["status", "--hermes-home", missing, "--json"])
    out.flush()
    answer = json.loads(out.buffer.getvalue().decode("utf-8"))
    assert code == 1 and missing in json.dumps(answer, ensure_ascii=False), answer


#: A coloured test log whose output also sets the window title (OSC 0), writes the clipboard (OSC 52), clears the
#: screen and writes over the line (CR): Hermes keeps escape sequences in web, browser and MCP outputs.
HOSTILE_LOG = ("pytest run: \x1b[31mFAILED\x1b[0m test_refund \x1b]0;pwned-title\x07\x1b]52;c;ZWNobyBoaQ==\x07"
               "\x1b[2J\x1b[H\x9b2J refund rounding fixed\rover\nnext\tline")
HOSTILE_SHOWN = ("pytest run: \\x1b[31mFAILED\\x1b[0m test_>>>refund<<< \\x1b]0;pwned-title\\x07"
                 "\\x1b]52;c;ZWNobyBoaQ==\\x07\\x1b[2J\\x1b[H\\x9b2J >>>refund<<< >>>rounding<<< fixed")


def test_control_characters_in_history_reach_the_terminal_escaped(two: World, capsys):
    """A stored message's escape sequences were printed raw by the command line's search and in /history-search
    and /history-read: a search could retitle the terminal, write the clipboard or clear the screen. Newlines and
    tabs stay; --json keeps the values (JSON escapes C0; DEL and C1 are escaped the same way)."""
    two.session("a_log", two.paths["alpha"], messages=[("user", "run the tests"), ("tool", HOSTILE_LOG)])
    alpha = str(two.paths["alpha"])
    code, out, err = run_cli(capsys, "search", "refund rounding", "--mode", "keyword", "--cwd", alpha)
    assert code == 0, err
    assert HOSTILE_SHOWN in out and "\x1b" not in out and "\x07" not in out and "\x9b" not in out and "\r" not in out
    code, out, _ = run_cli(capsys, "search", "refund rounding", "--mode", "keyword", "--cwd", alpha, "--json")
    assert code == 0 and json.loads(out)["results"][0]["snippet"].startswith("pytest run: \x1b[31mFAILED")
    assert "\x9b" not in out and "\\u009b2J" in out and "\x9b2J" in json.loads(out)["results"][0]["snippet"], out
    found = slash("history-search", "refund rounding --mode keyword")
    assert HOSTILE_SHOWN in found and "\x1b" not in found
    read = slash("history-read", "a_log")
    assert "\x1b" not in read and "\x07" not in read and "\\x1b]52;c;ZWNobyBoaQ==\\x07" in read
    assert "fixed\\x0dover" in read, "a CR that would write over the line is shown"
    assert "over\nnext\tline" in read, "newlines and tabs are kept"
    code, _, err = run_cli(capsys, "search", "x", "--cwd", alpha + "/\x1b]0;t\x07")
    assert code == 2 and "\\x1b]0;t\\x07" in err and "\x1b" not in err, "an echoed argument is escaped too"


# ---------------------------------------------------------------------------
# A careful tool in a shell: pipes, Ctrl-C, a wrong --hermes-home
# ---------------------------------------------------------------------------


def _module_process(home: Path, tmp_path: Path, *argv: str) -> subprocess.Popen:
    """``python -m project_history_recall ARGV`` whose stdout reader has gone away before it writes (``| head``)."""
    shim = tmp_path / "shim"
    if not shim.exists():
        shim.mkdir()
        (shim / "project_history_recall").symlink_to(ROOT, target_is_directory=True)
    env = {**os.environ, "PYTHONPATH": str(shim), "HERMES_HOME": str(home)}
    return subprocess.Popen([sys.executable, "-m", "project_history_recall", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=tmp_path)


def test_a_reader_that_goes_away_is_no_traceback(two: World, tmp_path: Path):
    """`project-history-recall search websocket | head -1` (and any reader that stops early) printed a
    BrokenPipeError traceback and exited 1; now it stops quietly with 141, as a tool SIGPIPE ends."""
    two.close()
    for argv in (["search", "websocket", "--cwd", str(two.paths["alpha"])], ["status", "--json"]):
        proc = _module_process(two.home, tmp_path, *argv)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the reader is gone before the first line
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == cli.EXIT_PIPE, (argv, err)
        assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, (argv, err)


def test_ctrl_c_exits_130_with_one_line(shared_two: World, capsys, monkeypatch: pytest.MonkeyPatch):
    """Ctrl-C during a search or an index printed a KeyboardInterrupt traceback; now one line on stderr and 130
    (with --json, a failure answer on stdout), and the index says that what it embedded is kept."""

    def interrupted(**_: object) -> dict:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.search, "search_history", interrupted)
    monkeypatch.setattr(cli.indexing, "index_projects", interrupted)
    code, out, err = run_cli(capsys, "search", "websocket")
    assert code == 130 and out == "" and err == "project-history-recall: interrupted\n", err
    code, out, err = run_cli(capsys, "search", "websocket", "--json")
    assert code == 130 and json.loads(out)["code"] == "interrupted" and "Traceback" not in err
    code, out, err = run_cli(capsys, "index")
    assert code == 130 and "Traceback" not in err, err
    assert err.endswith("project-history-recall: interrupted: the messages embedded so far are kept; index again goes "
                        "on from there\n"), err


#: A ``sitecustomize`` that sends the process a real SIGINT (Ctrl-C) as the command line's module starts loading: the
#: half second of imports before its own handling begins. (Not a module only some commands import, such as the
#: redaction patterns ``status`` loads only with semantic search set up: the test then depended on the shared world.)
CTRL_C_WHILE_LOADING = """
import importlib.abc, os, signal, sys

# As a terminal's Ctrl-C finds a command: SIGINT neither blocked nor ignored (a process may inherit either from the
# test run; with it ignored or blocked the signal never came and the command ran to its end).
with open(os.environ["PHR_SIGNAL_STATE"], "w") as f:
    f.write(repr((signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, []))))
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
signal.signal(signal.SIGINT, signal.default_int_handler)

class CtrlC(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.endswith(".command_line"):
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, CtrlC())
"""


#: How each install route starts the command line: ``python -m``, the console script pip writes (this import, then
#: ``main()``), the plugin folder run by path.
START_ROUTES = {"python -m": ["-m", "project_history_recall"],
                "console script": ["-c", "import sys; from project_history_recall.__main__ import main; sys.exit(main())"],
                "folder by path": [str(ROOT)]}


def _ctrl_c_while_loading(tmp_path: Path, home: Path) -> tuple[Path, dict[str, str]]:
    """``(the shim folder, the environment)`` that runs the command line on ``home`` with :data:`CTRL_C_WHILE_LOADING`
    as its ``sitecustomize`` (delete it from the shim to run without the Ctrl-C)."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "project_history_recall").symlink_to(ROOT, target_is_directory=True)
    (shim / "sitecustomize.py").write_text(CTRL_C_WHILE_LOADING, encoding="utf-8")
    return shim, {**os.environ, "PYTHONPATH": str(shim), "HERMES_HOME": str(home),
                  "PHR_SIGNAL_STATE": str(tmp_path / "signal-state")}


@pytest.mark.parametrize("route", ["python -m", "console script", "folder by path"])
def test_ctrl_c_while_the_modules_load_exits_130_with_one_line(shared_two: World, tmp_path: Path, route: str):
    """Ctrl-C in the first half second, while the command line's modules load (the package's ``__init__`` imported
    them all), printed a KeyboardInterrupt traceback: the command line's own handling had not begun. Now each route
    (``python -m``, the console script pip writes, the plugin folder run by path) exits 130 with the one line."""
    shim, env = _ctrl_c_while_loading(tmp_path, shared_two.home)
    start = START_ROUTES[route]
    ran = subprocess.run([sys.executable, *start, "status"], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=120)
    inherited = (tmp_path / "signal-state").read_text()
    assert (ran.returncode, ran.stdout, ran.stderr) == (130, "", "project-history-recall: interrupted\n"), (ran, inherited)
    os.unlink(shim / "sitecustomize.py")
    assert subprocess.run([sys.executable, *start, "status"], capture_output=True, env=env, cwd=tmp_path,
                          timeout=120).returncode == 0, "without Ctrl-C the same route runs"


@pytest.mark.parametrize("route", ["python -m", "console script", "folder by path"])
def test_ctrl_c_while_the_modules_load_answers_json_when_asked(shared_two: World, tmp_path: Path, route: str):
    """Review 27 (rev27): with ``--json``, a Ctrl-C during a command writes its failure answer on stdout (``code:
    interrupted``) besides the line on stderr, as every failure does; one while the modules load wrote the line alone,
    and a program reading the JSON found no answer. Each route answers as a Ctrl-C a moment later does."""
    _, env = _ctrl_c_while_loading(tmp_path, shared_two.home)
    start = START_ROUTES[route]
    ran = subprocess.run([sys.executable, *start, "status", "--json"], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120)
    assert (ran.returncode, ran.stderr) == (130, "project-history-recall: interrupted\n"), ran
    assert json.loads(ran.stdout) == {"success": False, "error": "interrupted", "code": "interrupted"}, ran
    query = subprocess.run([sys.executable, *start, "search", "--", "--json"], capture_output=True, text=True, env=env,
                           cwd=tmp_path, timeout=120)
    assert (query.returncode, query.stdout) == (130, ""), "a query's word --json asks for no JSON"


@pytest.mark.parametrize(("given", "named"), [
    ("", "--hermes-home is empty"),
    ("~no_such_user_phr/profile", "no such user's home folder"),
    ("state.db", "--hermes-home is a file, not a folder"),
    ("/tmp/" + "n" * 300 + "/profile", "File name too long"),
])
def test_a_hermes_home_that_cannot_be_a_profile_is_a_usage_error(shared_two: World, capsys, given, named):
    """`--hermes-home "$UNSET"` read the current folder as the profile, `--hermes-home ~nosuchuser/x` was a
    RuntimeError traceback, `--hermes-home ~/.hermes/state.db` answered "state.db/state.db not found"; each is
    now a usage error that says what the flag wants."""
    if given == "state.db":
        given = str(shared_two.home / "state.db")
    for argv in (["--hermes-home", given, "status"], ["search", "websocket", "--hermes-home", given, "--json"]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and named in err and "usage:" in err and "Traceback" not in err, (argv, err)
        assert out == "" or json.loads(out)["code"] == "bad_argument", out


def test_the_text_says_what_the_json_says(two: World, capsys):
    """The text output left out facts the --json answer holds: a next page (the text had no cursor to go on with),
    the --since/--role filters (an empty answer read as "nothing"), a damaged keyword index and its repair
    (keyword_note), the order of a "now" question (order_note), how many conversations recent lists."""
    from test_failures import damage_fts

    from project_history_recall import render

    alpha = str(two.paths["alpha"])
    base = ["search", "websocket", "--mode", "keyword", "--cwd", alpha, "--limit", "1"]
    code, out, _ = run_cli(capsys, *base, "--json")
    cursor = json.loads(out)["next_cursor"]
    code, text, _ = run_cli(capsys, *base)
    assert code == 0 and f"More sessions match than these: add --cursor {cursor} for the next page" in text, text
    code, text, _ = run_cli(capsys, *base, "--cursor", cursor)
    assert code == 0 and "More sessions match" not in text and text.count("@session:") == 1
    code, text, _ = run_cli(capsys, *base, "--since", "2d", "--role", "tool")
    assert "; only messages since " in text and ", of role tool" in text, text
    code, text, _ = run_cli(capsys, "recent", "--cwd", alpha, "--limit", "1")
    assert "3 conversation(s) in this list, newest first" in text and "More conversations than these: add --cursor " in text
    assert "More sessions match than these: narrow it with --since" in slash("history-search", "websocket --limit 1")
    now = render.render_search({"success": True, "results": [], "order_note": "The query asks how things stand now"},
                               cwd=alpha)
    assert "Order: The query asks how things stand now" in now
    two.session("filler", two.work / "elsewhere")
    damage_fts(two, "messages_fts")
    code, text, _ = run_cli(capsys, "search", "websocket", "--mode", "keyword", "--cwd", alpha)
    assert code == 0 and "Keyword search: Hermes' full-text index of state.db is damaged" in text, text


def test_the_index_progress_fits_the_terminal_and_a_log_gets_plain_lines(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path, capsys):
    """On a 40-column terminal the 60-column bar wrapped at every redraw, filling the window with copies; with stderr
    in a log file every batch wrote a `\\r` redraw (thousands on a large profile); an index that failed before
    embedding left a blank line above its error. Now the bar is cut to the terminal's width, a log gets a plain line
    every 10 s and the last one, and no bar drawn is no newline."""
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("COLUMNS", "40")
    terminal = Terminal()
    progress = cli._Progress(terminal)
    for done in range(0, 123457, 4096):
        progress(done, 123456)
    progress.close()
    redraws = terminal.getvalue().split("\r")[1:]
    assert redraws and all(len(line.rstrip("\n")) <= 39 for line in redraws), redraws
    assert "123456 messages" in redraws[-1] and redraws[-1].endswith("\n")
    log = io.StringIO()
    progress = cli._Progress(log)
    for done in range(1, 1001):
        progress(done, 1000)
    progress.close()
    assert "\r" not in log.getvalue() and log.getvalue().splitlines()[-1].startswith("1000/1000 messages")
    assert len(log.getvalue().splitlines()) <= 2, log.getvalue()
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli(capsys, "--hermes-home", str(tmp_path / "empty"), "index")
    assert code == 1 and err.startswith("project-history-recall index: session database not found"), repr(err)


def test_bidi_overrides_in_history_reach_the_terminal_escaped(two: World, capsys):
    """A stored U+202E (right-to-left override) or U+2066 (isolate) reached the terminal raw in /history-search,
    /history-read and the command line's text and --json: on a terminal that lays out bidi text the rest of the
    line showed in another order than it is (`--dry-run` read as `nur-yrd--`, a flag of a command to copy). Now each is shown as
    `\\u202e`; Hebrew or Arabic text itself is kept."""
    trojan = "deploy with ./ship.sh \u202e--dry-run\u202c then \u2066check\u2069 שלום"
    two.session("a_bidi", two.paths["alpha"], messages=[("user", trojan)])
    alpha = str(two.paths["alpha"])
    for out in (run_cli(capsys, "search", "ship.sh", "--mode", "keyword", "--cwd", alpha)[1],
                run_cli(capsys, "search", "ship.sh", "--mode", "keyword", "--cwd", alpha, "--json")[1],
                slash("history-search", "ship.sh --mode keyword"), slash("history-read", "a_bidi")):
        assert "\u202e" not in out and "\u2066" not in out and "\\u202e--dry-run\\u202c" in out, out
        assert "שלום" in out
    code, out, _ = run_cli(capsys, "search", "ship.sh", "--mode", "keyword", "--cwd", alpha, "--json")
    assert "\u202e--dry-run" in json.loads(out)["results"][0]["snippet"], "a program reading the JSON gets the text"


@pytest.mark.parametrize(("argv", "said"), [
    (["search", "git", "--force-with-lease", "rebase"],
     "(--force-with-lease: read as a flag; a query with words that start with - goes after --, as in: "
     "project-history-recall search -- git --force-with-lease rebase)"),
    (["search", "-x"], "required: query (-x: read as a flag; a query with words that start with - goes after --, "
                       "as in: project-history-recall search -- -x)"),
    (["search", "websocket", "--mo", "keyword"], "unrecognized arguments: --mo keyword (--mo: did you mean --mode?)"),
    (["search", "websocket", "--limt=3"], "(--limt: did you mean --limit?)"),
])
def test_a_query_word_or_a_flag_misspelt_with_a_dash_says_what_to_type(shared_two: World, capsys, argv, said):
    """`search git --force-with-lease` answered the program's usage (not search's) and "unrecognized arguments";
    `search -x`, "the following arguments are required: query"; `--mo` for --mode, no more. Now search's usage, and
    the flag meant, or the query after --."""
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and said in err and "usage: project-history-recall search" in err, err
    code, _, err = run_cli(capsys, "projects", "--bogus")
    assert code == 2 and "usage: project-history-recall projects" in err and "error: unrecognized arguments: --bogus\n" in err


def test_a_folder_in_no_project_says_where_to_look_instead(shared_two: World, capsys, tmp_path: Path):
    """`search` or `recent` run in a folder of no project answered "No project context: this folder is in no git
    repo and no project folder" and nothing more; now it names --cwd and the `projects` command."""
    loose = str(tmp_path)
    for argv in (["search", "websocket", "--cwd", loose], ["recent", "--cwd", loose]):
        code, out, _ = run_cli(capsys, *argv)
        assert code == 0 and "No project context" in out, out
        assert out.rstrip().endswith("(--cwd DIR looks in the project of another folder; `project-history-recall "
                                     "projects` lists the projects, their folders and sessions)"), out
    code, out, _ = run_cli(capsys, "search", "websocket", "--cwd", str(shared_two.paths["alpha"]))
    assert "--cwd DIR looks" not in out


def test_status_of_a_profile_that_is_missing_or_a_file_is_a_failure_answer(tmp_path: Path, capsys,
                                                                          monkeypatch: pytest.MonkeyPatch):
    """`status --json` of a missing profile answered success false with an error but no code (every other failure
    answer has one); HERMES_HOME set to state.db itself read "Hermes profile folder not found" of a file that is
    there. Now code no_profile, and a file is named as one. Which it is is a field of the answer
    (`profile_problem`), which the text is rendered from: it was told by the error's wording."""
    code, out, _ = run_cli(capsys, "--hermes-home", str(tmp_path / "nowhere"), "status", "--json")
    answer = json.loads(out)
    assert code == 1 and (answer["code"], answer["profile_problem"]) == ("no_profile", "not_found"), answer
    code, out, _ = run_cli(capsys, "--hermes-home", str(tmp_path / "nowhere"), "status")
    assert code == 1 and f"Hermes profile: {tmp_path / 'nowhere'}  (NOT FOUND)" in out, out
    (tmp_path / "state.db").write_bytes(b"")
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "state.db"))
    code, out, err = run_cli(capsys, "status")
    assert code == 1 and f"Hermes profile: {tmp_path / 'state.db'}  (NOT A FOLDER)" in out, out
    assert f"the Hermes profile is not a folder: {tmp_path / 'state.db'}" in err and "Traceback" not in err, err
    code, out, _ = run_cli(capsys, "status", "--json")
    assert json.loads(out)["profile_problem"] == "not_a_folder"
    from project_history_recall import render

    worded = {"home_exists": False, "profile_problem": "not_found", "error": "not a folder, said in other words"}
    assert "(NOT FOUND)" in render.render_status(worded), "the field decides, not the error's wording"


def test_index_says_when_it_rebuilt_the_index(two: World, fake, capsys):
    """`index` (and /history-index) that found embeddings.db unusable moved it aside and rebuilt it, and said so only
    in --json (note): the text answered "3 of 3 messages indexed" as if nothing had happened. Now the note follows."""
    server = fake()
    two.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    assert two.call("project_history_semantic_consent", {"decision": "allow"}, "a_cur")["success"]
    data = two.home / "plugins" / "project-history-recall" / "data"
    (data / "embeddings.db").write_bytes(b"not a database, " * 4096)
    code, out, _ = run_cli(capsys, "index")
    assert code == 0 and "3 of 3 messages indexed" in out, out
    assert "\nhistory index: note: the embeddings index was unusable" in out and "moved to embeddings.db.broken-" in out


def test_history_read_of_a_long_hit_says_how_to_read_on(two: World):
    """/history-read of a hit longer than the budget showed "characters 0-491 of 2000" and no way to the rest (the
    tool's `offset`, /history-read's --offset, was not named); a window that stopped at 1,000 rewound messages did
    not say so (JSON's `stopped`). Now both are said."""
    from project_history_recall import render

    two.session("a_long", two.paths["alpha"], messages=[("user", "the long log")])
    hit = two.say("a_long", "assistant", "LONGLOG " + "x" * 2000)
    out = slash("history-read", f"a_long {hit} --max-chars 500 --before 0 --after 0")
    assert "(the hit goes on: --offset 491 shows it from character 491 of 2008)" in out, out
    out = slash("history-read", f"a_long {hit} --max-chars 500 --before 0 --after 0 --offset 1600")
    assert "the hit goes on" not in out, out
    stopped = render.render_read({"success": True, "messages": [], "stopped": "a side of the window ends"})
    assert "(stopped: a side of the window ends)" in stopped


def test_recent_keeps_each_conversation_on_its_lines(two: World, capsys):
    """A conversation whose first request or last answer had several lines printed them as they were, at the left
    margin: an answer's "2. run the migration" line read as the list's second conversation. Now each is one line."""
    two.session("a_multi", two.paths["alpha"], messages=[
        ("user", "plan the release\nstep by step"), ("assistant", "Here is the plan:\n1. tag\n2. run the migration")])
    code, out, _ = run_cli(capsys, "recent", "--cwd", str(two.paths["alpha"]), "--limit", "1")
    assert code == 0 and "   asked: plan the release step by step\n" in out, out
    assert "   last answer: Here is the plan: 1. tag 2. run the migration\n" in out, out
    assert "\n2. " not in out


def test_index_before_consent_tells_the_person_what_to_do(shared_two: World, capsys):
    """`index` (and /history-index) before consent answered only the gate's note for the agent ("Ask the user; if
    they agree, call project_history_semantic_consent"), which a person at a shell cannot act on; now the line that
    says how a person gives consent follows, as a search's text has it."""
    code, out, _ = run_cli(capsys, "index")
    assert code == 0 and out.startswith("history index: consent_required: "), out
    assert "(You are the user: to allow it, tell the agent in a conversation of this project" in out, out
    assert "(You are the user: to allow it" in slash("history-index")
