"""Review 31b: result_keys' groupings of a branch family."""
from __future__ import annotations

from conftest import World, result_sessions


def _history(world, sid, history):
    for role, text in history:
        world.say(sid, role, text)


def test_a_branch_of_a_branch_copies_the_first_conversations_turn_once(world: World):
    """P -> B1 -> B2 (a /branch of a /branch): the turn P said before both forks is in all three; one result."""
    alpha = world.repo("alpha")
    history = [("user", "should the ledger export use parquet or csv"), ("assistant", "parquet: columnar, typed, smaller")]
    world.session("P", alpha, style="cli", messages=history)
    world.db.end_session("P", "branched")
    world.session("B1", None, parent="P", model_config={"_branched_from": "P"}, messages=history)
    world.say("B1", "user", "and the retention of ledger exports?")
    world.db.end_session("B1", "branched")
    world.session("B2", None, parent="B1", model_config={"_branched_from": "B1"},
                  messages=history + [("user", "and the retention of ledger exports?")])
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])
    found = result_sessions(world.search("cur", "ledger export parquet columnar", mode="keyword", limit=5))
    assert found == ["P"], found


def test_a_copied_tool_output_is_one_result(world: World):
    """A log the conversation printed before the fork, copied by each branch: one result, not one a branch."""
    alpha = world.repo("alpha")
    history = [("user", "run the migration"), ("assistant", "running it")]
    log = "ERROR zanzibar migration 0042 failed: relation ledger_exports already exists"
    world.session("P", alpha, style="cli", messages=history)
    world.say("P", "tool", log, tool_call_id="c1")
    for branch in ("B1", "B2"):
        world.db.end_session("P", "branched")
        world.session(branch, None, parent="P", model_config={"_branched_from": "P"}, messages=history)
        world.say(branch, "tool", log, tool_call_id="c1")
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])
    answer = world.search("cur", "zanzibar migration failed", mode="keyword", limit=5)
    print([(r["session_id"], r.get("snippet")) for r in answer["results"]])
    assert result_sessions(answer) == ["P"], answer
