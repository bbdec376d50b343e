"""Searches with since/until: the sessions searched are those with a message in the window, so newer or older
sessions that fail the dates never spend a search's budget or its best sessions (a false \"no matches\")."""

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


@pytest.mark.parametrize("newer", [5, 40])
def test_until_reaches_the_window_past_newer_sessions(world: World, monkeypatch, newer: int):
    lexical = importlib.import_module("hermes_plugins.project_history_recall.lexical")
    monkeypatch.setattr(lexical, "RANK_BUDGET", 1)  # 'ledger' is common: read newest first
    monkeypatch.setattr(lexical, "SCAN_MESSAGES", 200)  # the 60,000 ids of state.db, scaled down with the history
    monkeypatch.setattr(lexical, "SCAN_BATCH", 20)  # and the 4,000 ids of one range query
    repo = world.repo("pay")
    world.session("old", repo, messages=[("assistant", "ledger decision: double-entry with a suspense account")])
    cut = max(r[0] for r in world.db._conn.execute("SELECT timestamp FROM messages")) + 1
    for i in range(newer):
        world.session(f"n{i}", repo, messages=[("user", f"ledger question {i}")] + [("assistant", f"filler {k}") for k in range(10)]
                      + [("assistant", f"ledger answer {i}")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    until = dt.datetime.fromtimestamp(cut).astimezone().isoformat()
    answer = world.search("cur", "ledger", mode="keyword", until=until)
    print(newer, [r["session_id"] for r in answer["results"]], answer.get("strategy"), answer.get("keyword_note"), answer.get("message"))
    assert [r["session_id"] for r in answer["results"]] == ["old"], answer
