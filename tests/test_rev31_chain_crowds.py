"""rev31: a long compression chain whose protected first messages match crowds the other conversations out."""
from __future__ import annotations

import pytest
from conftest import World


@pytest.mark.parametrize("links", [10, 60, 320])
def test_a_long_chain_does_not_crowd_other_conversations_out(world: World, links: int):
    from test_browse import _compressed

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
        sid = f"a{k}"
        world.continuation(prev, sid)
        world.db.replace_messages(sid, compressed)
        prev = sid
    world.session("other1", repo, messages=[("user", "zeppelin reconnect storm: we also added a circuit breaker")])
    world.session("other2", repo, messages=[("assistant", "the zeppelin gateway backoff caps at 30s")])
    world.session("cur_z", repo, style="cli", messages=[("user", "hi")])
    answer = world.search("cur_z", "zeppelin reconnect backoff jitter", mode="keyword", limit=3)
    got = [r["session_id"] for r in answer["results"]]
    print(links, got, answer.get("next_cursor"), answer.get("message"))
    assert set(got) == {"a1", "other1", "other2"}, answer


@pytest.mark.parametrize("links", [10, 60])
def test_common_words_scan_is_not_filled_by_one_chain(world: World, monkeypatch, links: int):
    """The newest-first scan (words too common to pick candidates) stops at want_sessions sessions: counted as sessions."""
    import importlib

    lexical = importlib.import_module("hermes_plugins.project_history_recall.lexical")
    monkeypatch.setattr(lexical, "RANK_BUDGET", 1)  # every word is 'common': the newest-first scan picks
    from test_browse import _compressed

    repo = world.repo("pay")
    world.session("other1", repo, messages=[("user", "zeppelin reconnect storm: we also added a circuit breaker")])
    world.session("other2", repo, messages=[("assistant", "the zeppelin gateway backoff caps at 30s")])
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
    world.session("cur_z", repo, style="cli", messages=[("user", "hi")])
    answer = world.search("cur_z", "zeppelin reconnect backoff jitter", mode="keyword", limit=3)
    got = [r["session_id"] for r in answer["results"]]
    print(links, got, answer.get("strategy"), answer.get("keyword_note"), answer.get("message"))
    assert set(got) == {"a1", "other1", "other2"}, answer
