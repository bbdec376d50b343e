"""Lineage markers in the shapes Hermes writes them, read by the recent list as by a search: a marker Hermes reads as
absent (``null``) and a reset whose parent a compression ended."""

from __future__ import annotations

import pytest
from conftest import World
from test_conversation_crowding import _every_page


def listed(world: World, asker: str) -> list[str]:
    return [s["session_id"] for s in world.call("project_history_recent", {"limit": 20}, asker)["sessions"]]


def test_a_continuation_whose_markers_are_null_is_one_conversation_with_its_parent(world: World):
    """Hermes reads a ``null`` marker as none (``json_extract(...) IS NOT NULL``; its own lineage fixture: 'Null values
    for branch and delegate do not stop lineage traversal', a compression child with ``{"_branched_from": null,
    "_delegate_from": null}``). The compressed conversation is one entry of the recent list, as one result of a
    search."""
    repo = world.repo("app")
    world.session("P", repo, style="cli", messages=[("user", "okapi cache: we chose redis")])
    world.db.end_session("P", "compression")
    world.session("P2", None, parent="P", model_config={"_branched_from": None, "_delegate_from": None},
                  messages=[("assistant", "okapi cache, continued after the compression")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    found = [sid for sid in (r["session_id"] for r in world.search("cur", "okapi cache", mode="keyword")["results"])]
    assert len(set(found) & {"P", "P2"}) == 1, found
    assert len(set(listed(world, "cur")) & {"P", "P2"}) == 1, listed(world, "cur")


def test_a_reset_of_a_session_a_compression_ended_is_listed_beside_the_continuation(world: World):
    """A stale reset can leave its parent ended 'compression' (hermes-agent
    ``test_reset_continuation_stays_out_of_the_family_it_hangs_off``): the reset child is a conversation of its own,
    as a search tells it, not a segment of the compressed one. Both conversations are listed."""
    repo = world.repo("app")
    world.session("R", repo, style="cli", messages=[("user", "tapir deploys go out on fridays")])
    world.continuation("R", "T", messages=[("assistant", "tapir deploys, continued after the compression")])
    world.session("C", repo, style="cli", parent="R", model_config={"_reset_from": "R"},
                  messages=[("user", "a fresh start: tapir rollback plan")])
    world.continuation("C", "C2", messages=[("assistant", "tapir rollback, continued")])  # inherits _reset_from: R
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    found = {r["session_id"] for r in world.search("cur", "tapir", mode="keyword")["results"]}
    assert len(found & {"C", "C2"}) == 1 and len(found & {"R", "T"}) == 1, found
    shown = listed(world, "cur")
    assert len(set(shown) & {"C", "C2"}) == 1 and len(set(shown) & {"R", "T"}) == 1, shown


def _compressed_family(world: World, history: list[tuple[str, str]], branches: int, decision, *, inherit: bool = True
                       ) -> None:
    """Session P of repo alpha said ``history``; each of ``branches`` /branch sessions ``B<k>`` copies it, is compressed
    (its continuation ``B<k>c`` inherits its ``model_config`` with ``inherit``, as 0.21 hands it on; not, as 0.19's
    CLI) and decides ``decision(k)`` in the continuation; ``cur`` asks from alpha."""
    alpha = world.repo("alpha")
    world.session("P", alpha, style="cli", messages=history)
    for k in range(branches):
        world.branch("P", f"B{k}", messages=history)
        world.continuation(f"B{k}", f"B{k}c", messages=[("assistant", decision(k))], inherit=inherit)
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])


@pytest.mark.parametrize(("history", "query", "decision", "inherit"), [
    ([("user", "which queue for the invoice mailer?"), ("assistant", "candidates: sqs, rabbitmq, nats")],
     "invoice mailer queue decided", "invoice mailer queue decided: option{k}", True),
    ([("user", "发票邮件用哪个队列?"), ("assistant", "候选: sqs, rabbitmq, nats 队列")], "队列", "队列 决定: option{k}", True),
    ([("user", "发票邮件用哪个队列?"), ("assistant", "候选: sqs, rabbitmq, nats 队列")], "队列", "队列 决定: option{k}", False),
], ids=["fts", "substring", "substring-0.19"])
def test_what_a_branch_decided_after_its_compression_is_the_branchs_own(world: World, history, query, decision,
                                                                        inherit):
    """test_every_branchs_own_decision_is_a_result (tests/test_conversation_crowding.py) where each branch went on to
    decide in its compression continuation: the continuation is the branch's conversation, so what it said is the
    branch's own, never the family's copies. Counted with the family (capped at four sessions' worth), most of 20
    branches' decisions were never candidates."""
    _compressed_family(world, history, 20, lambda k: decision.format(k=k), inherit=inherit)
    got = _every_page(world, query, mode="keyword")
    lost = [k for k in range(20) if not {f"B{k}", f"B{k}c"} & got]
    assert not lost, (lost, sorted(got))


def test_what_a_branch_decided_after_its_compression_is_a_semantic_result(world: World, fake):
    """The vector leg's cap as the keyword candidates': what 14 branches decided in their continuations is each a
    result (the leg keys hits by ``conversations.result_keys``, which follows a continuation to its branch)."""
    import importlib

    server = fake(dims=64, words=True)
    _compressed_family(world, [("user", "which queue for the invoice mailer?"), ("assistant", "candidates: sqs, nats")],
                       14, lambda k: f"invoice mailer queue decided: option{k}")
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    assert world.call("project_history_semantic_consent", {"decision": "allow"}, "cur")["success"] is True
    assert importlib.import_module("hermes_plugins.project_history_recall.indexing").index_projects(home=world.home)["success"]
    got = _every_page(world, "invoice mailer queue decided", mode="semantic")
    importlib.import_module("hermes_plugins.project_history_recall.vector_index").reset_indexes()
    lost = [k for k in range(14) if not {f"B{k}", f"B{k}c"} & got]
    assert not lost, (lost, sorted(got))
