"""rev31: the vector leg picks its 51 best *sessions*: a long compression chain's copies fill them (semantic mode)."""
from __future__ import annotations

import importlib

import pytest
from conftest import World


@pytest.mark.parametrize("links", [10, 60])
def test_a_long_chain_does_not_crowd_the_vector_leg(world: World, fake, links: int):
    from test_browse import _compressed

    server = fake(dims=64, words=True)
    repo = world.repo("pay")
    turns = [{"role": "user", "content": "How do we stop the zeppelin reconnect storm in the gateway?"},
             {"role": "assistant", "content": "Use exponential backoff with jitter for zeppelin reconnects."}]
    for i in range(10):
        turns += [{"role": "user", "content": f"step {i} unrelated ledger detail " + "x " * 40},
                  {"role": "assistant", "content": f"answer {i} unrelated ledger detail " + "y " * 40}]
    world.session("a1", repo, style="cli")
    for t in turns:
        world.say("a1", t["role"], t["content"])
    compressed = _compressed(turns, "zeppelin: backoff with jitter")
    prev = "a1"
    for k in range(2, links + 1):
        world.continuation(prev, f"a{k}")
        world.db.replace_messages(f"a{k}", compressed)
        prev = f"a{k}"
    world.session("other1", repo, messages=[("user", "zeppelin reconnect storm in the gateway: we also added a circuit breaker")])
    world.session("other2", repo, messages=[("assistant", "how do we stop the zeppelin gateway reconnect storm? backoff caps at 30s")])
    world.session("cur_z", repo, style="cli", messages=[("user", "hi")])
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    assert world.call("project_history_semantic_consent", {"decision": "allow"}, "cur_z")["success"] is True
    indexing = importlib.import_module("hermes_plugins.project_history_recall.indexing")
    out = indexing.index_projects(home=world.home)
    assert out["success"], out
    answer = world.search("cur_z", "how do we stop the zeppelin reconnect storm in the gateway", mode="semantic", limit=3)
    got = [(r["session_id"], r["score_source"]) for r in answer["results"]]
    print(links, got, answer.get("semantic_status"), answer.get("message"))
    assert {s for s, _ in got} == {"a1", "other1", "other2"}, answer
    importlib.import_module("hermes_plugins.project_history_recall.vector_index").reset_indexes()
