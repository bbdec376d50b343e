"""One process, two profiles: Hermes 0.21 imports a plugin once per profile scope (a gateway serving several
profiles), as ``hermes_plugins.<slug>`` for the first and ``hermes_plugins.<slug>__home_<digest>`` for the
others, and resolves HERMES_HOME per call. Nothing one profile's copy answers, keeps or starts may reach the
other's: not an answer, not a cache entry, not a thread."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import PLUGIN_NAME, World, copy_plugin


def load_copy(folder: Path, home: Path) -> Any:
    """The plugin at ``folder`` imported as Hermes 0.21 names the copy of a second profile."""
    name = f"hermes_plugins.project_history_recall__home_{hashlib.sha256(str(home).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py", submodule_search_locations=[str(folder)])
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def two_profiles(world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Profile A (the world, loaded by Hermes' loader) and profile B (another home, its own copy of the plugin),
    each with a repo and sessions named alike: ``s1`` (the history) and ``cur`` (the asker)."""
    from hermes_state import SessionDB

    a_repo = world.repo("alpha")
    world.session("s1", a_repo, messages=[("user", "profile A decided: heron queue with retries")])
    world.session("cur", a_repo, style="cli", messages=[("user", "hi")])
    home_b = tmp_path / "home_b"
    copy_plugin(home_b / "plugins" / PLUGIN_NAME)
    (home_b / "config.yaml").write_text((world.home / "config.yaml").read_text())
    b_repo = world.repo("beta")
    db = SessionDB(db_path=home_b / "state.db")
    try:
        for sid, text in (("s1", "profile B decided: heron cache without retries"), ("cur", "hi")):
            db.create_session(sid, "cli", cwd=str(b_repo))
            db.append_message(sid, "user", text)
    finally:
        db.close()
    a = sys.modules["hermes_plugins.project_history_recall"]
    b = load_copy(home_b / "plugins" / PLUGIN_NAME, home_b)
    yield world, a, b, home_b
    sub(b, "state").reset()
    for name in [m for m in sys.modules if m.startswith(b.__name__)]:
        del sys.modules[name]


def sub(module: Any, name: str) -> Any:
    """A module of one profile's copy of the plugin (imported now if it was not yet)."""
    return importlib.import_module(f"{module.__name__}.{name}")


def ask(module: Any, home: Path, monkeypatch: pytest.MonkeyPatch, query: str) -> dict[str, Any]:
    monkeypatch.setenv("HERMES_HOME", str(home))
    return json.loads(sub(module, "handlers").handle_search({"query": query, "mode": "keyword"}, session_id="cur"))


def test_answers_caches_and_threads_stay_with_their_profile(two_profiles, monkeypatch, fake):
    world, a, b, home_b = two_profiles
    for _ in range(2):  # interleaved, twice: the second round answers from each copy's caches
        got_a, got_b = ask(a, world.home, monkeypatch, "heron"), ask(b, home_b, monkeypatch, "heron")
        assert [r["snippet"] for r in got_a["results"]] == ["profile A decided: >>>heron<<< queue with retries"]
        assert [r["snippet"] for r in got_b["results"]] == ["profile B decided: >>>heron<<< cache without retries"]
        assert got_a["project"]["name"] == "alpha" and got_b["project"]["name"] == "beta"
    # Each profile's warm-up (after consent to a loopback endpoint) runs in its own copy, for its own home.
    for module, home in ((a, world.home), (b, home_b)):
        server = fake()
        monkeypatch.setenv("HERMES_HOME", str(home))
        (home / "config.yaml").write_text(
            "plugins:\n  enabled:\n    - project-history-recall\n  entries:\n    project-history-recall:\n"
            f"      embedding:\n        provider: openai\n        model: m\n        base_url: {server.base_url}\n")
        assert json.loads(sub(module, "handlers").handle_consent({"decision": "allow"}, session_id="cur"))["success"]
        thread = sub(module, "warm_up").warm_up(home, session_id="cur")
        assert isinstance(thread, threading.Thread)
        thread.join(30)
        answer = json.loads(sub(module, "handlers").handle_search({"query": "heron"}, session_id="cur"))
        assert answer["semantic_status"] == "ready", answer
        assert server.requests, "each profile embeds through its own endpoint"
    for module, mine, other in ((a, world.home, home_b), (b, home_b, world.home)):
        held = " ".join(f"{entry.name}={entry.data!r}" for entry in sub(module, "state").caches())
        assert str(mine) in held, "the copy keeps what it learned of its own profile"
        assert str(other) not in held, f"{module.__name__} keeps something of the other profile"
        threads = sub(module, "state").cache("warm_up").data.get("threads", {})
        assert set(threads) == {mine}
    for module in (a, b):
        sub(module, "vector_index").reset_indexes()


def test_home_outside_hermes_follows_hermes_rule(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Where Hermes cannot be imported (the command line in another Python), HERMES_HOME is read as Hermes' later
    lines read it: spaces around it ignored, ``~`` and ``$VARS`` expanded; unset or blank, ``~/.hermes``."""
    from project_history_recall import paths

    monkeypatch.setitem(sys.modules, "hermes_constants", None)  # import fails as outside Hermes
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PROFILE_DIR", "work")
    monkeypatch.setenv("HERMES_HOME", " ~/profiles/$PROFILE_DIR ")
    assert paths.hermes_home() == tmp_path / "profiles" / "work"
    monkeypatch.setenv("HERMES_HOME", "  ")
    assert paths.hermes_home() == tmp_path / ".hermes"
