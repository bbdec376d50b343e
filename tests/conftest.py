"""Test harness: a real Hermes 0.19.0 host with a throwaway HERMES_HOME.

* The plugin under test is imported under the fixed name
  ``project_history_recall`` (never through the checkout folder's name), and
  end-to-end tests load it through Hermes' real plugin loader from
  ``$HERMES_HOME/plugins/project-history-recall`` (the drop-in route).
* Sessions are written by Hermes' real ``SessionDB`` into a real state.db;
  projects by Hermes' real ``projects_db``; repos are real ``git init`` repos.
* Tools are called through ``model_tools.handle_function_call`` with the
  ``session_id`` kwarg, exactly as the agent loop does.
"""

from __future__ import annotations

import atexit
import functools
import gc
import importlib.util
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]

# Property tests: 50 examples each in `make test`, no deadline (a loaded 2-core machine); `make fuzz` runs
# them with 1,000 (PHR_HYPOTHESIS=thorough), twenty times as many. A test that builds a Hermes profile per
# example sets its own, smaller count.
settings.register_profile("quick", max_examples=50, deadline=None)
settings.register_profile("thorough", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("PHR_HYPOTHESIS", "quick"))

PLUGIN_NAME = "project-history-recall"
sys.path.insert(0, str(ROOT / "scripts"))
from demo import PLUGIN_FILES  # what a drop-in install copies (one list: the demo installs so too)

# Hermes must never see the developer's real ~/.hermes while modules import.
_BOOT_HOME = Path(os.environ.get("PHR_TEST_BOOT_HOME", "/tmp/phr-test-boot-home"))
_BOOT_HOME.mkdir(parents=True, exist_ok=True)
os.environ["HERMES_HOME"] = str(_BOOT_HOME)
for _var in ("HERMES_SESSION_ID", "HERMES_SESSION_SOURCE", "TERMINAL_CWD", "TERMINAL_ENV", "HERMES_SAFE_MODE"):
    os.environ.pop(_var, None)


def _import_checkout() -> Any:
    """Import this checkout as ``project_history_recall`` (a fixed name)."""
    spec = importlib.util.spec_from_file_location(
        "project_history_recall", ROOT / "__init__.py", submodule_search_locations=[str(ROOT)]
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["project_history_recall"] = module
    spec.loader.exec_module(module)
    return module


phr = _import_checkout()
# The package imports its modules lazily (register() does): imported here, ``phr.store`` and the like are there for a
# test file run alone as for the whole suite.
for _module in sorted(ROOT.glob("*.py")):
    if _module.stem not in ("__init__", "__main__"):
        importlib.import_module(f"project_history_recall.{_module.stem}")


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }
    # No automatic maintenance: git 2.47 and newer run it detached after a commit, and its lock file in .git/objects
    # came and went while a World copied the template repository.
    out = subprocess.run(["git", "-C", str(cwd), "-c", "maintenance.auto=false", *args], check=True, capture_output=True,
                         text=True, env=env)
    return out.stdout.strip()


@functools.cache
def template_repo() -> Path:
    """A real git repository with one commit (a README) on ``main``, made once per test run and copied by
    :meth:`World.repo` (three git processes cost 23 ms of CPU, a copy 7 ms; runs build about 460 repos)."""
    path = Path(tempfile.mkdtemp(prefix="phr-template-repo-"))
    atexit.register(shutil.rmtree, path, True)
    git(path, "init", "-q", "-b", "main", "--template=")  # no sample hooks: fewer files to copy
    (path / "README").write_text("a repository\n")
    git(path, "add", "README")
    git(path, "commit", "-q", "-m", "init")
    return path


@functools.cache
def template_state_db() -> Path:
    """An empty state.db as Hermes' ``SessionDB`` creates it, made once per test run: a World's first
    ``SessionDB`` opens a copy (its schema checked and found current) instead of creating every table."""
    from hermes_state import SessionDB

    folder = Path(tempfile.mkdtemp(prefix="phr-template-db-"))
    atexit.register(shutil.rmtree, folder, True)
    SessionDB(db_path=folder / "state.db").close()
    assert not (folder / "state.db-wal").exists(), "closed: everything is in the file"
    return folder / "state.db"


def copy_plugin(dest: Path) -> Path:
    """Drop-in install: the plugin's files copied to ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in PLUGIN_FILES:
        shutil.copy2(ROOT / name, dest / name)
    return dest


def _profile_config(disabled: tuple[str, ...]) -> str:
    """A World's config.yaml: the plugin enabled (no tool override), the ``disabled`` bundled plugins off."""
    return ("plugins:\n  enabled:\n    - project-history-recall\n  disabled:\n"
            + "".join(f"    - {name}\n" for name in disabled)
            + "  entries:\n    project-history-recall:\n      allow_tool_override: false\n")


#: The profile :func:`loaded_plugin` loads the plugin from; a World's plugin folder links to its files.
LOADED_HOME = Path(tempfile.mkdtemp(prefix="phr-loaded-plugin-")) / "hermes_home"
atexit.register(shutil.rmtree, LOADED_HOME.parent, True)


@functools.cache
def loaded_plugin() -> tuple[Any, Any]:
    """``(Hermes' plugin manager, the plugin's LoadedPlugin)``: Hermes' loader run once per test run, in a profile of
    its own (a drop-in copy, enabled as in :class:`World`), and shared by every World.

    Hermes imports a plugin's modules once per process (each discovery runs only the package's ``__init__`` and
    ``register`` again, the modules stay in ``sys.modules``) but imports every bundled plugin again and reads
    config.yaml five times: 40 ms of CPU a World, for a manager like the last. The plugin resolves ``HERMES_HOME``
    at each call (as it must where Hermes 0.21 serves several profiles from one process), so every World shares
    this one. Loading itself is tested by the install routes and the tests that start Hermes in a new process.
    """
    import hermes_cli.plugins as plugins

    home = LOADED_HOME
    copy_plugin(home / "plugins" / PLUGIN_NAME)
    (home / "config.yaml").write_text(_profile_config(World.DISABLED))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HERMES_HOME", str(home))
        mp.setattr(plugins, "_plugin_manager", None)
        plugins.discover_plugins(force=True)
        manager = plugins.get_plugin_manager()
    loaded = manager._plugins.get(PLUGIN_NAME)
    assert loaded is not None, "plugin not discovered"
    assert loaded.enabled and loaded.error is None, f"plugin failed to load: {loaded.error}"
    assert set(loaded.tools_registered) >= {"project_history_search", "project_session_move"}
    return manager, loaded


class World:
    """A throwaway Hermes profile with the plugin installed (a drop-in folder), enabled and loaded.

    Hermes' plugin manager is the one :func:`loaded_plugin` made once for the run. Its config.yaml turns one
    bundled plugin off, as a user may: ``dashboard_auth/basic``, the web dashboard's password login, whose
    import hashes a dummy password with scrypt (60 ms of CPU). Nothing of it meets this plugin; the other
    bundled plugins load as in any profile.
    """

    DISABLED = ("dashboard_auth/basic",)

    def __init__(self, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp = tmp
        self.home = tmp / "hermes_home"
        self.work = tmp / "work"
        self.work.mkdir(parents=True)
        self.home.mkdir(parents=True)
        self.manager: Any = None
        self.enter(monkeypatch)
        # The plugin's folder in this profile, as a drop-in install leaves it: its files are links to those of the copy
        # Hermes loaded (:func:`loaded_plugin`), 70 links instead of 70 copies a World; its data folder is its own.
        folder = self.home / "plugins" / PLUGIN_NAME
        folder.mkdir(parents=True)
        loaded_plugin()
        for name in PLUGIN_FILES:
            (folder / name).symlink_to(LOADED_HOME / "plugins" / PLUGIN_NAME / name)
        (self.home / "config.yaml").write_text(_profile_config(self.DISABLED))
        self._db = None
        self._seq = 0
        self.load_plugin(monkeypatch)

    def configure_embedding(self, **embedding: Any) -> None:
        """Write ``plugins.entries.project-history-recall.embedding`` into config.yaml."""
        import yaml

        config = {
            "plugins": {
                "enabled": ["project-history-recall"],
                "disabled": list(self.DISABLED),
                "entries": {"project-history-recall": {"allow_tool_override": False, "embedding": embedding}},
            }
        }
        (self.home / "config.yaml").write_text(yaml.safe_dump(config))

    # -- host ---------------------------------------------------------------
    def enter(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Point this process at this world: ``HERMES_HOME``, Hermes' default state.db path, no session
        variables and, once the plugin is loaded, the plugin manager that loaded it from this profile."""
        monkeypatch.setenv("HERMES_HOME", str(self.home))
        for var in ("HERMES_SESSION_ID", "HERMES_SESSION_SOURCE", "TERMINAL_CWD", "TERMINAL_ENV"):
            monkeypatch.delenv(var, raising=False)
        import hermes_state

        monkeypatch.setattr(hermes_state, "DEFAULT_DB_PATH", self.home / "state.db")
        if self.manager is not None:
            import hermes_cli.plugins as plugins

            monkeypatch.setattr(plugins, "_plugin_manager", self.manager)

    def load_plugin(self, monkeypatch: pytest.MonkeyPatch) -> Any:
        """Point Hermes at the plugin manager of the run (:func:`loaded_plugin`), the profile's folders and files laid
        out as Hermes lays them out when it first reads its config (``SOUL.md``, ``logs/``, ...); returns the plugin's
        LoadedPlugin."""
        from hermes_cli.config import ensure_hermes_home

        self.manager, self.loaded = loaded_plugin()
        self.enter(monkeypatch)
        ensure_hermes_home()
        return self.loaded

    @property
    def db(self) -> Any:
        if self._db is None:
            from hermes_state import SessionDB

            path = self.home / "state.db"
            if not path.exists():
                shutil.copyfile(template_state_db(), path)
            self._db = SessionDB(db_path=path)
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def call(self, tool: str, args: Any, session_id: str | None = None, **kw: Any) -> dict[str, Any]:
        import model_tools

        raw = model_tools.handle_function_call(tool, args, kw.pop("task_id", "task-x"), tool_call_id="c1", session_id=session_id, **kw)
        assert isinstance(raw, str)
        return json.loads(raw)

    def search(self, session_id: str | None, query: Any, **args: Any) -> dict[str, Any]:
        return self.call("project_history_search", {"query": query, **args}, session_id)

    def move(self, session_id: str | None, project_id: Any) -> dict[str, Any]:
        return self.call("project_session_move", {"project_id": project_id}, session_id)

    # -- fixtures of the world ----------------------------------------------
    def repo(self, name: str) -> Path:
        """A git repository at ``work/name`` with one commit on ``main``: a copy of one made by ``git init``
        once per run (:func:`template_repo`; a repository's files hold no path of its own)."""
        path = self.work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(template_repo(), path)
        return path.resolve()

    def worktree(self, repo: Path, name: str, branch: str) -> Path:
        path = self.work / name
        git(repo, "worktree", "add", "-q", "-b", branch, str(path))
        return path.resolve()

    def folder(self, name: str) -> Path:
        path = self.work / name
        path.mkdir(parents=True, exist_ok=True)
        return path.resolve()

    def project(self, name: str, folders: list[Path], primary: Path | None = None) -> str:
        from hermes_cli import projects_db

        with projects_db.connect_closing(self.home / "projects.db") as conn:
            return projects_db.create_project(
                conn, name=name, folders=[str(f) for f in folders], primary_path=str(primary or folders[0])
            )

    def session(
        self,
        sid: str,
        cwd: Path | str | None = None,
        *,
        style: str = "desktop",
        source: str = "cli",
        parent: str | None = None,
        model_config: dict[str, Any] | None = None,
        messages: list[tuple[str, str]] | None = None,
    ) -> str:
        """Create a session the way Hermes records it.

        ``style="desktop"``: cwd plus git branch/common root (tui_gateway);
        ``style="cli"``: cwd only (plain CLI); no cwd: gateway, cron, /new,
        compression continuations and delegates.
        """
        kwargs: dict[str, Any] = {}
        if cwd is not None:
            kwargs["cwd"] = str(cwd)
        if parent:
            kwargs["parent_session_id"] = parent
        if model_config:
            kwargs["model_config"] = model_config
        self.db.create_session(sid, source, **kwargs)
        if cwd is not None and style == "desktop":
            from tui_gateway import git_probe

            self.db.update_session_cwd(sid, str(cwd), git_probe.branch(str(cwd)), git_probe.common_repo_root(str(cwd)))
        for role, content in messages or ():
            self.say(sid, role, content)
        return sid

    def continuation(self, parent: str, sid: str, messages: list[tuple[str, str]] | None = None, *,
                     inherit: bool = True) -> str:
        """A compression rotation: the parent ends with 'compression', the child has no cwd and, with ``inherit``,
        the parent's ``model_config``: Hermes hands the agent's ``_session_init_model_config`` on, which holds the
        row's markers where the agent was made from the row (0.21; a branch's or a reset's continuation then carries
        ``_branched_from`` or ``_reset_from`` naming a session that is not its parent). 0.19's CLI ``/branch`` writes
        its marker into the row alone: ``inherit=False``."""
        self.db.end_session(parent, "compression")
        inherited = json.loads(self.session_row(parent).get("model_config") or "null") if inherit else None
        return self.session(sid, None, parent=parent, messages=messages, model_config=inherited or None)

    def branch(self, parent: str, sid: str, messages: list[tuple[str, str]] | None = None) -> str:
        """A ``/branch`` as Hermes 0.21 writes it: the parent ends 'branched', the child copies what it is given and is
        marked ``_branched_from`` its parent."""
        self.db.end_session(parent, "branched")
        return self.session(sid, None, parent=parent, model_config={"_branched_from": parent}, messages=messages)

    def delegate(self, parent: str, sid: str, messages: list[tuple[str, str]] | None = None) -> str:
        return self.session(sid, None, source="subagent", parent=parent, model_config={"_delegate_from": parent}, messages=messages)

    def say(self, sid: str, role: str, content: str, **kw: Any) -> int:
        self._seq += 1
        return int(self.db.append_message(sid, role, content, timestamp=1_700_000_000 + self._seq, **kw))

    def compacted_tick(self, sid: str, texts: list[str], *, carried: int = 2, at: float = 1_700_000_000.0) -> int:
        """Session ``sid`` (made already): a user and an assistant row in turn of ``texts``, all written at one time
        ``at`` (an import, an old gateway's turn), then compacted in place as Hermes did before #99545: every row
        archived, the last ``carried`` written again after them all as live copies with their timestamp. Returns the
        id of the first live copy."""
        rows = [(sid, ("user", "assistant")[i % 2], text, at) for i, text in enumerate(texts)]
        with closing(sqlite3.connect(self.home / "state.db")) as conn, conn:
            conn.executemany("INSERT INTO messages (session_id, role, content, timestamp, active, compacted)"
                             " VALUES (?, ?, ?, ?, 0, 1)", rows)
            first_copy = int(conn.execute("SELECT max(id) + 1 FROM messages").fetchone()[0])
            conn.executemany("INSERT INTO messages (session_id, role, content, timestamp, active, compacted)"
                             " VALUES (?, ?, ?, ?, 1, 0)", rows[len(rows) - carried :])
        return first_copy

    def session_row(self, sid: str) -> dict[str, Any]:
        return dict(self.db.get_session(sid) or {})


@pytest.fixture(autouse=True)
def _forget_process_state() -> Iterator[None]:
    """Every test starts like a new Hermes process: the plugin's declared caches
    (both the checkout import and the copy Hermes' loader imported) are emptied after it."""
    yield
    for name in ("project_history_recall.state", "hermes_plugins.project_history_recall.state"):
        loaded = sys.modules.get(name)
        if loaded is not None:
            loaded.reset()


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    w = World(tmp_path, monkeypatch)
    try:
        yield w
    finally:
        w.close()


@contextmanager
def module_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A World for all the tests of a module that only read it (searches, reads, refused arguments).

    Built in a module-scoped fixture, it loads the plugin once instead of once
    per test (Hermes' loader imports every bundled plugin again: 0.15 s of CPU
    a World). The plugin's caches are still emptied after every test
    (``_forget_process_state``), so each test searches as a new process would.
    Hand it to each test through :func:`shared`.
    """
    with pytest.MonkeyPatch.context() as mp:
        world = World(tmp_path_factory.mktemp("world"), mp)
        try:
            yield world
        finally:
            world.close()


def shared_world(build: Callable[[World], Any], name: str, *, cwd: str | None = None,
                 after: Callable[[], None] | None = None) -> tuple[Any, Any]:
    """The two fixtures of a world the tests of a module only read: ``_<name>_module`` builds it once with
    ``build`` (:func:`module_world`), and ``name`` hands it to each test (:func:`shared`), the process in
    ``world.paths[cwd]`` when ``cwd`` is given, then runs ``after``. A test module binds both:
    ``_proj_module, shared_proj = shared_world(_proj, "shared_proj", cwd="alpha")``."""
    module_name = f"_{name}_module"

    @pytest.fixture(scope="module", name=module_name)
    def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
        with module_world(tmp_path_factory) as world:
            build(world)
            yield world

    @pytest.fixture(name=name)
    def handed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
        with shared(request.getfixturevalue(module_name), monkeypatch) as world:
            if cwd is not None:
                monkeypatch.chdir(world.paths[cwd])
            yield world
        if after is not None:
            after()

    return built, handed


def footprint(world: World) -> dict[str, tuple[int, int]]:
    """``{path: (size, mtime_ns)}`` of every file of the world, profile and work folders. SQLite's ``-shm``
    files are left out (readers write their read marks there), and so is an empty ``-wal`` (a reader that
    opens a WAL database no connection holds open creates it)."""
    out = {}
    for path in world.tmp.rglob("*"):
        if not path.is_file() or path.name.endswith("-shm"):
            continue
        stat = path.stat()
        if not (path.name.endswith("-wal") and stat.st_size == 0):
            out[str(path.relative_to(world.tmp))] = (stat.st_size, stat.st_mtime_ns)
    return out


@contextmanager
def shared(world: World, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """Hand a module's world (:func:`module_world`) to one test: the process pointed at it (:meth:`World.enter`:
    another world may have been built since), and a failure if a file of it was created, removed or written
    meanwhile (a test that writes to a shared world would change what the tests after it see)."""
    world.enter(monkeypatch)
    before = footprint(world)
    yield world
    after = footprint(world)
    assert after == before, f"a test changed the shared world: {sorted(set(after.items()) ^ set(before.items()))}"


@pytest.fixture(scope="session")
def local_model(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A ``LocalProvider`` after a real first load with a copy folder (``local_model.copy_folder``): the model
    read from the package, its ready-parsed copy written there. Once per run (3 s of CPU); never change its
    folder, copy its file (:func:`seed_local_model`)."""
    from project_history_recall import embeddings

    provider = embeddings.LocalProvider(threads=1, copy_folder=tmp_path_factory.mktemp("local-model"))
    provider.load()
    return provider


def seed_local_model(world: World, local_model: Any) -> None:
    """Put the local model's copy in ``world``'s data folder, as the profile's first load of the model leaves it:
    the next load there maps it instead of reading the package (what that first load does is tested in
    test_model_cache.py, and in a profile by the warm-up test of the real model, in test_warm_up.py)."""
    from project_history_recall import model_cache

    name = model_cache.copy_name()
    assert name is not None
    folder = world.home / "plugins" / PLUGIN_NAME / "data" / "model"
    folder.mkdir(parents=True, exist_ok=True)
    # A hard link, not 86 MB written again per world: the plugin only maps the copy read-only, and writes a
    # new one to a temporary file it renames over the name, which leaves the linked file as it was.
    try:
        os.link(local_model.copy_folder / name, folder / name)
    except OSError:  # another file system
        shutil.copyfile(local_model.copy_folder / name, folder / name)


def local_semantic(world: World, asking: str, local_model: Any) -> Iterator[World]:
    """Semantic search with the local model (its copy seeded: :func:`seed_local_model`), consented for every
    project from session ``asking``; yields ``world``, then closes the plugin's open vector indexes (for a
    fixture: ``yield from``)."""
    seed_local_model(world, local_model)
    world.configure_embedding(provider="local")
    assert world.call("project_history_semantic_consent", {"decision": "allow", "projects": "all"}, asking)["success"]
    yield world
    importlib.import_module("hermes_plugins.project_history_recall.vector_index").reset_indexes()


#: The two past sessions of repo alpha that the semantic tests index.
ALPHA_TEXTS = {
    "a_ws": "We fixed the flaky websocket by adding exponential backoff with jitter to the reconnect loop.",
    "a_db": "The Postgres migration adds the column first, then backfills rows, then switches reads.",
}


@pytest.fixture
def warm(world: World) -> Iterator[World]:
    """Repo alpha with the sessions of ``ALPHA_TEXTS`` and the asking one, ``cur``; the plugin's open vector
    indexes are closed before and after (``world.paths["alpha"]`` is the repo)."""
    alpha = world.repo("alpha")
    for sid, text in ALPHA_TEXTS.items():
        world.session(sid, alpha, messages=[("assistant", text)])
    world.session("cur", alpha, style="cli", messages=[("user", "what did we decide?")])
    world.paths = {"alpha": alpha}
    reset = importlib.import_module("hermes_plugins.project_history_recall.vector_index").reset_indexes
    reset()
    yield world
    reset()


def result_sessions(answer: dict[str, Any]) -> list[str]:
    assert answer.get("success") is True, answer
    return [r["session_id"] for r in answer["results"]]


@pytest.fixture
def fake():
    """Start loopback embedding servers: ``fake(dims=8, b64=False, fail=0, delay=0.0)``."""
    from fakes import FakeEmbeddings

    servers = []

    def make(**kw):
        servers.append(FakeEmbeddings(**kw))
        return servers[-1]

    yield make
    for server in servers:
        server.close()



class _RootIsADirectory:
    """Collect the repo root as a plain directory, never as a package.

    The root *is* the plugin package, and a checkout's folder name (CI clones
    into another one) may not be a valid package name: pytest would then fail
    to import the root ``__init__.py``. Tests import the plugin under its fixed
    name instead (above). Registered as a plugin (not a conftest hook) because
    the root is collected with the hooks of its *parent* folder.
    """

    @pytest.hookimpl(tryfirst=True)
    def pytest_collect_directory(self, path, parent):
        if Path(path).resolve() == ROOT:
            return pytest.Dir.from_parent(parent, path=Path(path))
        return None


def pytest_configure(config):
    config.pluginmanager.register(_RootIsADirectory(), "phr-root-is-a-directory")


def pytest_collection_finish(session):
    """What is alive once the tests are collected (Hermes, numpy, the plugin, the test modules) lives to the end: the
    collector's full passes leave it out (``gc.freeze``) instead of walking it again each time (about 45 full passes
    a run over 400,000 objects)."""
    gc.collect()
    gc.freeze()
