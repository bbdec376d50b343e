"""project_session_move end to end: the write goes through Hermes' SessionDB and
searches (ours and Hermes' own workspace grouping) follow the new project."""

from __future__ import annotations

import shutil

import pytest
from conftest import World, result_sessions


@pytest.fixture
def mv(world: World):
    w = world
    pay, quasar = w.repo("pay"), w.repo("quasar")
    notes = w.folder("notes")
    w.P = w.project("Payments", [pay])
    w.Q = w.project("Quasar", [quasar])
    w.N = w.project("Team Notes", [notes])
    w.paths = {"pay": pay, "quasar": quasar, "notes": notes}
    w.session("p_old", pay, messages=[("user", "websocket in payments")])
    w.session("q_old", quasar, messages=[("user", "websocket in quasar")])
    w.session("n_old", notes, style="cli", messages=[("user", "websocket in the notes")])
    w.session("h_old", None, source="telegram", messages=[("user", "websocket at home")])
    w.session("cur", pay, messages=[("user", "this is really about quasar")])
    w.continuation("cur", "cur2", messages=[("user", "still going")])
    return w


def workspace_key(world: World, sid: str):
    from hermes_state import workspace_key

    return workspace_key(world.session_row(sid))


def test_move_p_to_q_moves_the_lineage_and_search_follows(mv):
    assert result_sessions(mv.search("cur2", "websocket")) == ["p_old"]
    answer = mv.move("cur2", "quasar")  # by slug
    assert answer["success"] is True, answer
    assert answer["project"] == {"kind": "explicit", "id": mv.Q, "name": "Quasar"}
    assert answer["cwd"] == str(mv.paths["quasar"]) and answer["git_branch"] == "main"
    assert set(answer["sessions_updated"]) == {"cur", "cur2"}
    for sid in ("cur", "cur2"):
        row = mv.session_row(sid)
        assert row["cwd"] == str(mv.paths["quasar"]) and row["git_repo_root"] == str(mv.paths["quasar"])
    assert result_sessions(mv.search("cur2", "websocket")) == ["q_old"]
    assert result_sessions(mv.search("cur", "websocket")) == ["q_old"]
    # And from P, the moved conversation is now out of scope.
    assert "cur" not in result_sessions(mv.search("p_old", "still going quasar"))


def test_the_answer_names_the_project_the_conversation_left(mv):
    """/history-move ran a whole recent listing (census, list, previews) to learn which project the conversation
    left; the move reads the session before it writes, so its answer says it (`moved_from`), as its searches
    decided it: for a continuation that records no folder of its own too, for Home, and for a git repo."""
    answer = mv.move("cur2", "quasar")  # cur2 inherits its folder from cur
    assert answer["moved_from"] == {"kind": "explicit", "id": mv.P, "name": "Payments"}, answer
    answer = mv.move("cur2", "")
    assert answer["moved_from"] == {"kind": "explicit", "id": mv.Q, "name": "Quasar"}, answer
    alpha = mv.repo("alpha")
    assert mv.move("cur", str(alpha))["moved_from"] == {"kind": "home"}
    back = mv.move("cur", mv.P)
    assert back["moved_from"] == {"kind": "auto", "key": str(alpha), "root": str(alpha), "name": "alpha"}, back
    assert "moved_from" not in mv.move("cur", "p_nope"), "a refused move left nothing"


def test_move_from_repo_to_non_git_folder_clears_stale_git_fields(mv):
    """update_session_cwd never clears git_repo_root; the move must, or attribution stays in the repo."""
    assert mv.move("cur", mv.Q)["success"]
    answer = mv.move("cur", "Team Notes")  # by exact name
    assert answer["success"] is True, answer
    assert answer["project"]["id"] == mv.N and answer["git_repo_root"] is None
    row = mv.session_row("cur")
    assert row["cwd"] == str(mv.paths["notes"]) and row["git_repo_root"] is None and row["git_branch"] is None
    assert workspace_key(mv, "cur") == str(mv.paths["notes"])  # Hermes' own grouping follows too
    assert result_sessions(mv.search("cur2", "websocket")) == ["n_old"]


def test_move_to_home(mv):
    answer = mv.move("cur2", "")
    assert answer["success"] is True and answer["project"] == {"kind": "home"}
    assert mv.session_row("cur")["git_repo_root"] is None
    after = mv.search("cur2", "websocket")
    assert after["results"] == [] and "No project context" in after["message"]


def test_a_search_in_home_says_no_project_not_disabled(mv):
    """A search from Home answered semantic_status "disabled", which the docs keep for semantic search switched off
    or declined: Home has no project, so nothing is searched or embedded whatever the settings."""
    answer = mv.search("h_old", "websocket")
    assert answer["results"] == [] and answer["semantic_status"] == "no_project", answer
    assert answer["message"].startswith("No project context") and "semantic_note" not in answer


@pytest.mark.parametrize("blank", ["  ", "\t", " \n "])
def test_a_blank_target_is_refused_not_taken_for_home(mv, blank):
    """`project_id: "  "` moved the conversation to Home, as `""` does: a target lost on the way (a name
    that came out empty) must not send the conversation out of its project."""
    before = mv.session_row("cur2")["cwd"]
    answer = mv.move("cur2", blank)
    assert answer["success"] is False and answer["code"] == "bad_argument", answer
    assert "blank" in answer["error"] and "'' (empty) moves to Home" in answer["error"]
    assert mv.session_row("cur2")["cwd"] == before


def test_move_back_into_a_project_by_id(mv):
    mv.move("cur", "")
    answer = mv.move("cur", mv.P)
    assert answer["project"]["id"] == mv.P
    assert result_sessions(mv.search("cur", "websocket")) == ["p_old"]


def test_case_insensitive_slug_or_name(mv):
    assert mv.move("cur", "QUASAR")["project"]["id"] == mv.Q
    assert mv.move("cur", "team notes")["project"]["id"] == mv.N


def test_move_never_touches_messages(mv):
    before = [(m["id"], m["content"]) for m in mv.db.get_messages("cur")]
    mv.move("cur", "quasar")
    assert [(m["id"], m["content"]) for m in mv.db.get_messages("cur")] == before


def test_refused_for_subagent_sessions(mv):
    mv.delegate("cur", "child", messages=[("assistant", "delegated work")])
    answer = mv.move("child", "quasar")
    assert answer == {"success": False, "error": answer["error"], "code": "move_refused"}
    assert "subagent" in answer["error"]
    assert mv.session_row("child").get("cwd") is None


def test_unknown_project(mv):
    answer = mv.move("cur", "p_nope")
    assert answer["success"] is False and answer["code"] == "project_not_found"
    assert answer["error"].startswith("project not found: p_nope; a target is a project of projects.db")
    assert "a folder given as an absolute path (a git repo's, or a project's)" in answer["error"]


@pytest.mark.parametrize("token", ["~\ud800", "~\ud800/src", "~a\x00b"])
def test_a_home_folder_no_file_name_can_hold_is_not_found(mv, token):
    """``~`` and a user name with a lone surrogate or a NUL (what a fuzzer or a broken client sends): a clear
    "folder not found", not an internal error (expanding it raised)."""
    answer = mv.move("cur", token)
    assert answer["success"] is False and answer["code"] == "folder_not_found", answer
    assert mv.session_row("cur")["cwd"] == str(mv.paths["pay"])


def test_missing_project_folder(mv):
    gone = mv.folder("gone")
    mv.project("Gone", [gone])
    shutil.rmtree(gone)
    answer = mv.move("cur", "Gone")
    assert answer["success"] is False and answer["code"] == "folder_not_found"
    assert answer["error"] == f"project folder not found: {gone}"
    assert mv.session_row("cur")["cwd"] == str(mv.paths["pay"])


def test_archived_project_is_refused(mv):
    from hermes_cli import projects_db

    with projects_db.connect_closing(mv.home / "projects.db") as conn:
        projects_db.archive_project(conn, mv.Q)
    answer = mv.move("cur", "quasar")
    assert answer["success"] is False and answer["code"] == "move_refused" and "archived" in answer["error"]


def test_no_projects_db(world: World):
    repo = world.repo("r")
    world.session("s", repo, messages=[("user", "x")])
    answer = world.move("s", "anything")
    assert answer["success"] is False and answer["code"] == "project_not_found"
    assert not (world.home / "projects.db").exists()
    assert world.move("s", "")["success"] is True


def test_unknown_session(mv):
    answer = mv.move("nope", "quasar")
    assert answer["success"] is False and answer["code"] == "session_not_found"


def test_desktop_callback_is_told_when_present(mv, monkeypatch):
    from tools import project_tools

    seen = []
    monkeypatch.setattr(project_tools, "_workspace_callback", lambda task, path, name: seen.append((task, path, name)))
    mv.call("project_session_move", {"project_id": "quasar"}, "cur", task_id="tui-key")
    assert seen == [("tui-key", str(mv.paths["quasar"]), "Quasar")]


def test_git_probe_fallback_without_hermes_probe(mv, monkeypatch):
    """Without tui_gateway.git_probe, our own probe (timeout, worktree folding) is used."""
    import sys

    plugin_store = sys.modules["hermes_plugins.project_history_recall.folders"]
    monkeypatch.setitem(sys.modules, "tui_gateway", None)  # a Hermes without it: the import fails
    plugin_store.git.invalidate()
    from conftest import git

    wt = mv.work / "quasar-wt"
    git(mv.paths["quasar"], "worktree", "add", "-q", "-b", "wtb", str(wt))
    assert plugin_store.git.common_root(str(wt)) == str(mv.paths["quasar"])
    assert plugin_store.git.branch(str(wt)) == "wtb"
    assert plugin_store.git.common_root(str(mv.paths["notes"])) == ""
    answer = mv.move("cur", "quasar")
    assert answer["git_branch"] == "main" and answer["git_repo_root"] == str(mv.paths["quasar"])


# ---------------------------------------------------------------------------
# Folders as targets: the way back into a git repo (projects.db lists no repo)
# ---------------------------------------------------------------------------


def test_move_back_into_a_git_repo_by_its_folder(mv):
    """After a move out of a repo there was no way back: only projects of projects.db were targets."""
    alpha = mv.repo("alpha")
    mv.session("a_old", alpha, messages=[("user", "websocket in alpha")])
    mv.session("a_cur", alpha, style="cli", messages=[("user", "about alpha")])
    assert mv.move("a_cur", "quasar")["success"]
    answer = mv.move("a_cur", str(alpha))
    assert answer["success"] is True, answer
    assert answer["project"] == {"kind": "auto", "key": str(alpha), "root": str(alpha), "name": "alpha"}
    assert answer["message"] == f"Moved to alpha (git repo {alpha}), cwd now {alpha}"
    assert answer["git_repo_root"] == str(alpha) and answer["git_branch"] == "main"
    assert result_sessions(mv.search("a_cur", "websocket")) == ["a_old"]
    sub = alpha / "src"
    sub.mkdir()
    inside = mv.move("a_cur", f"{sub}/")  # any folder inside the repo: its project is the repo's
    assert inside["project"]["root"] == str(alpha) and inside["cwd"] == str(sub)
    assert mv.session_row("a_cur")["cwd"] == str(sub)


def test_move_by_a_project_folder_names_the_project(mv):
    answer = mv.move("cur", str(mv.paths["notes"]))
    assert answer["success"] and answer["project"] == {"kind": "explicit", "id": mv.N, "name": "Team Notes"}
    assert answer["message"].startswith(f"Moved to Team Notes (project {mv.N})")


def test_a_misspelt_target_names_the_close_ones_with_what_to_give(mv):
    """The agent's move of a typo ("Team Notez", "quaser") answered "project not found" and what a target is; it
    now names the close targets, each with the project_id that moves there, and moves with that one."""
    answer = mv.move("cur", "Team Notez")
    assert answer["code"] == "project_not_found"
    assert "did you mean project Team Notes (project_id 'team-notes')" in answer["error"], answer
    assert "did you mean" not in mv.move("cur", "zzz")["error"]
    assert mv.move("cur", "team-notes")["project"]["name"] == "Team Notes"


def test_a_misspelt_repo_is_named_for_the_agent_in_a_profile_without_projects_db(world: World):
    """Most profiles have no projects.db (their projects are git repos): the agent's move to "alpah" named no
    close target there, where /history-move's answer did; it names the repo with its folder to give."""
    alpha = world.repo("alpha")
    world.session("a_old", alpha, messages=[("user", "alpha work")])
    world.session("cur", None, source="telegram", messages=[("user", "hi")])
    assert not (world.home / "projects.db").exists()
    answer = world.move("cur", "alpah")
    assert answer["code"] == "project_not_found", answer
    assert f"did you mean git repo alpha (project_id '{alpha}')" in answer["error"], answer
    assert "no projects.db" in answer["error"], answer
    assert world.move("cur", str(alpha))["success"]


def test_a_repo_name_says_repos_are_moved_to_by_folder(mv):
    """`/history-move alpha` answered "project not found: alpha" without saying that repos are not projects."""
    alpha = mv.repo("alpha")
    mv.session("a_old", alpha, messages=[("user", "alpha work")])
    answer = mv.move("cur", "alpha")
    assert answer["code"] == "project_not_found"
    assert f"alpha is a git repo, not a project of projects.db: move into it by its folder, {alpha}" in answer["error"]


@pytest.mark.parametrize("kind", ["plain folder", "missing folder", "relative folder"])
def test_folders_that_make_no_project_are_refused_saying_what_a_target_is(mv, kind):
    plain = mv.folder("plain")
    token = {"plain folder": str(plain), "missing folder": str(plain / "gone"), "relative folder": "work/plain"}[kind]
    answer = mv.move("cur", token)
    code = {"plain folder": "move_refused", "missing folder": "folder_not_found", "relative folder": "project_not_found"}
    assert answer["success"] is False and answer["code"] == code[kind], answer
    assert "a folder given as an absolute path (a git repo's, or a project's)" in answer["error"]
    assert mv.session_row("cur")["cwd"] == str(mv.paths["pay"]), "nothing moved"
