"""Demo: project-history-recall inside a real Hermes, in a throwaway HERMES_HOME.

Creates two git repos (projects "payments" and "quasar"), records sessions in
both through Hermes' own SessionDB, installs the plugin drop-in, loads it with
Hermes' real plugin loader, then prints a scoped search, a read around its first
hit, the project's recent sessions, a Chinese search, the consent step and a
semantic (paraphrase) search with the offline model, two slash commands, the
command line, and a move there and back, as the agent would see them (each
call printed before its answer). Nothing outside a temporary folder is touched.

Run: make demo   (or: .venv/bin/python scripts/demo.py)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What a drop-in install copies (the tests' too): what the wheel ships, as pyproject.toml says: every module at the
# root (the root is the package) and the package's data (the manifest, the seed-phrase word list redaction reads).
_SHIPPED = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["project_history_recall"]
PLUGIN_FILES = (*_SHIPPED, *sorted(p.name for p in ROOT.glob("*.py")))


def git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "demo", "GIT_AUTHOR_EMAIL": "demo@example.invalid",
           "GIT_COMMITTER_NAME": "demo", "GIT_COMMITTER_EMAIL": "demo@example.invalid", "GIT_CONFIG_GLOBAL": "/dev/null"}
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, env=env)


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text(path.name)
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "init")
    return path.resolve()


def show(title: str, answer: str) -> None:
    """The answer of the call printed just before it (``>>> tool(args)``), under what it shows."""
    print(f"=== {title}")
    print(json.dumps(json.loads(answer), indent=2, ensure_ascii=False))


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="phr-demo-") as tmp:
        tmp_path = Path(tmp)
        home = tmp_path / "hermes_home"
        (home / "plugins" / "project-history-recall").mkdir(parents=True)
        for name in PLUGIN_FILES:  # the drop-in install
            shutil.copy2(ROOT / name, home / "plugins" / "project-history-recall" / name)
        (home / "config.yaml").write_text("plugins:\n  enabled:\n    - project-history-recall\n")
        os.environ["HERMES_HOME"] = str(home)  # before any Hermes import

        payments, quasar = make_repo(tmp_path / "payments"), make_repo(tmp_path / "quasar")
        from hermes_cli import projects_db
        from hermes_state import SessionDB

        with projects_db.connect_closing(home / "projects.db") as conn:
            projects_db.create_project(conn, name="Quasar", folders=[str(quasar)], primary_path=str(quasar))

        db = SessionDB(db_path=home / "state.db")
        sessions = {
            "pay_websocket": (payments, [
                ("user", "The websocket keeps dropping during settlement runs. How do we fix the reconnect storm?"),
                ("assistant", "Decision: exponential backoff with full jitter, capped at 30s, in ws_client.reconnect()."),
            ]),
            "pay_migration": (payments, [
                ("user", "数据库迁移怎么做才不停机？"),
                ("assistant", "先加新列并双写，回填历史数据，最后切换读路径。The migration runs in three steps."),
            ]),
            "quasar_websocket": (quasar, [
                ("user", "In quasar the websocket server needs a ring buffer for fan-out."),
            ]),
        }
        for sid, (cwd, messages) in sessions.items():
            db.create_session(sid, "cli", cwd=str(cwd))  # a plain CLI session records only cwd
            for role, content in messages:
                db.append_message(sid, role, content)
        db.create_session("current", "cli", cwd=str(payments))
        db.append_message("current", "user", "what did we decide about the websocket reconnects?")
        db.close()

        import model_tools  # runs Hermes' plugin discovery with this HERMES_HOME
        from hermes_cli.plugins import get_plugin_manager

        plugin = get_plugin_manager()._plugins["project-history-recall"]
        print(f"plugin loaded: enabled={plugin.enabled} error={plugin.error} tools={plugin.tools_registered}")

        def call(tool: str, args: dict) -> str:
            print(f"\n>>> {tool}({', '.join(f'{k}={v!r}' for k, v in args.items())})")
            return model_tools.handle_function_call(tool, args, "demo-task", tool_call_id="c1", session_id="current")

        found = call("project_history_search", {"query": "how did we handle websocket reconnects?"})
        show("search from a payments session (quasar is never searched)", found)
        hit = json.loads(found)["results"][0]
        show("read around the first hit",
             call("project_history_read", {"session_id": hit["session_id"], "message_id": hit["message_id"],
                                           "before": 1, "after": 1}))
        show("no topic, just 'where did we leave off?': the latest sessions, newest first",
             call("project_history_recent", {"limit": 3}))
        show("a Chinese query in the same project",
             call("project_history_search", {"query": "数据库迁移", "mode": "keyword"}))
        show("the user agrees to semantic search: consent for this project (local model, nothing leaves the machine)",
             call("project_history_semantic_consent", {"decision": "allow"}))
        show("a paraphrase sharing no content word with the answer (hybrid: found by meaning)",
             call("project_history_search", {"query": "how did we deal with the real-time channel going down repeatedly?"}))
        show("only what the user said, in the last week (filters: role, since)",
             call("project_history_search", {"query": "websocket", "mode": "keyword", "role": "user", "since": "7d"}))

        import importlib

        commands = get_plugin_manager()._plugin_commands
        os.chdir(payments)  # slash commands have no session: they search the folder Hermes runs in
        print("\n>>> /history-search --mode keyword websocket   (typed at the Hermes prompt, in the payments folder)")
        print(commands["history-search"]["handler"]("--mode keyword websocket"))
        print("\n>>> /history-recent --limit many   (anything not understood is refused, naming it)")
        print(commands["history-recent"]["handler"]("--limit many"))
        cli = importlib.import_module("hermes_plugins.project_history_recall.command_line")
        print("\n>>> project-history-recall projects   (the command line: where attribution is checked)")
        cli.main(["projects"])

        show("move this session to project Quasar", call("project_session_move", {"project_id": "Quasar"}))
        show("the same search now looks in quasar",
             call("project_history_search", {"query": "how did we handle websocket reconnects?"}))
        show("and back into the payments git repo, by its folder (a repo is no project of projects.db)",
             call("project_session_move", {"project_id": str(payments)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
