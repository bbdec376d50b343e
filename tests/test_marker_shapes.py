"""Lineage markers in the shapes Hermes writes them, read by the recent list as by a search: a marker Hermes reads as
absent (``null``) and a reset whose parent a compression ended."""

from __future__ import annotations

from conftest import World


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
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    found = {r["session_id"] for r in world.search("cur", "tapir", mode="keyword")["results"]}
    assert "C" in found and len(found & {"R", "T"}) == 1, found
    shown = listed(world, "cur")
    assert "C" in shown and len(set(shown) & {"R", "T"}) == 1, shown
