"""rev31: the newest-first scan of a common word spends its budget on sessions after 'until' (every row fails the
date), never reaching the window asked for."""
from __future__ import annotations

import datetime as dt
import importlib

import pytest
from conftest import World


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
