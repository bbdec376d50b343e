"""rev31: the vector leg picks its 51 best sessions before the date filter: a since that fails them answers nothing."""
from __future__ import annotations

import datetime as dt
import importlib

import pytest
from conftest import World, local_semantic


@pytest.fixture
def sem_world(world: World, local_model):
    repo = world.repo("pay")
    world.paths = {"pay": repo}
    for i in range(60):
        world.session(f"old{i}", repo, messages=[("assistant", f"The websocket reconnect storm #{i} was fixed with exponential backoff and jitter.")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    yield from local_semantic(world, "cur", local_model)


@pytest.mark.parametrize("old", [40, 60])
def test_a_date_filter_does_not_empty_the_vector_leg(sem_world: World, old: int):
    world = sem_world
    repo = world.paths["pay"]
    for i in range(old, 60):  # fewer old sessions: delete the extra ones
        world.db.delete_session(f"old{i}")
    last = max(r[0] for r in world.db._conn.execute("SELECT timestamp FROM messages"))
    world.session("new", repo, messages=[("assistant", "We made the socket client wait a random, growing delay before trying again.")])
    since = dt.datetime.fromtimestamp(last + 0.5).astimezone().isoformat()
    indexing = importlib.import_module("hermes_plugins.project_history_recall.indexing")
    assert indexing.index_projects(home=world.home)["success"]
    answer = world.search("cur", "websocket reconnect storm fix", mode="semantic", since=since, limit=3)
    print(old, [(r["session_id"], r["score_source"]) for r in answer["results"]], answer.get("semantic_status"),
          answer.get("message"))
    plain = world.search("cur", "websocket reconnect storm fix", mode="semantic", limit=60)
    print(old, "unfiltered rank of new:", [r["session_id"] for r in plain["results"]].index("new") if any(r["session_id"] == "new" for r in plain["results"]) else None)
    assert [r["session_id"] for r in answer["results"]] == ["new"], answer
