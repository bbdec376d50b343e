"""rev31: from outside the family, a /branch family is one search result: each branch's own post-fork decision is hidden
behind the best hit of the family (the recent list shows branches as conversations of their own)."""
from __future__ import annotations

import pytest
from conftest import World, result_sessions


@pytest.mark.xfail(strict=True, reason="rev31 F2: reported, not fixed")
def test_branches_own_decisions_are_reachable_from_another_session(world: World):
    alpha = world.repo("alpha")
    history = [("user", "we need a cache for the pricing service"), ("assistant", "options: redis or memcached")]
    world.session("P", alpha, style="cli", messages=history)
    for branch in ("B1", "B2"):
        world.db.end_session("P", "branched")
        world.session(branch, None, parent="P", model_config={"_branched_from": "P"}, messages=history)
    world.say("B1", "assistant", "decision: memcached for the pricing cache, p99 latency 4ms")
    world.say("B2", "assistant", "decision: redis cluster for the pricing cache, persistence needed")
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])
    found = world.search("cur", "pricing cache decision", mode="keyword", limit=5)
    print("search:", [(r["session_id"], r["snippet"]) for r in found["results"]], found.get("next_cursor"))
    listed = world.call("project_history_recent", {}, "cur")["sessions"]
    print("recent:", sorted(s["session_id"] for s in listed))
    assert {"B1", "B2"} <= set(result_sessions(found)), found
