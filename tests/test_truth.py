"""State.db is the truth: a semantic hit is shown only if state.db says it is that message, live, of a session in
this scope, with the text that was embedded. Whatever the vector side records (which session and text a message
id has) is a hint; a hint gone wrong costs an embedding again, never another project's message.

Real SessionDB, state.db and embeddings.db, the loopback embedder, the real plugin and loader."""

from __future__ import annotations

import importlib
import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from conftest import World, result_sessions


def plugin(name: str) -> Any:
    return importlib.import_module(f"hermes_plugins.project_history_recall.{name}")


def checkpointed(world: World) -> None:
    """Hermes' connection closed and state.db's WAL folded in, so the file alone holds the history."""
    world.close()
    with closing(sqlite3.connect(world.home / "state.db")) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def restore_in_place(world: World, backup: Path) -> None:
    """``cp backup state.db``: the same inode, an older history (and AUTOINCREMENT counter) in it."""
    checkpointed(world)
    state = world.home / "state.db"
    for suffix in ("-wal", "-shm"):
        state.with_name(state.name + suffix).unlink(missing_ok=True)
    shutil.copyfile(backup, state)


def consent(world: World, sid: str = "cur") -> None:
    answer = world.call("project_history_semantic_consent", {"decision": "allow", "projects": "all"}, sid)
    assert answer["success"] is True, answer


def new_process() -> None:
    """Forget what this process knows, as a new Hermes window starts."""
    plugin("vector_index").reset_indexes()
    plugin("state").reset()


@pytest.fixture
def p_and_q(world: World, fake) -> Any:
    """Projects P and Q in one profile, semantic search on (a loopback endpoint whose vectors are bags of words)."""
    p, q = world.repo("p"), world.repo("q")
    world.session("p1", p, messages=[("user", "P's first talk about the release train")])
    world.session("q1", q, messages=[("user", "Q's first talk about its own thing")])
    world.session("cur", p, style="cli", messages=[("user", "hi")])
    server = fake(dims=64, words=True)
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(world)
    world.paths, world.server = {"p": p, "q": q}, server
    yield world
    plugin("vector_index").reset_indexes()


def test_a_restore_and_an_import_never_show_another_projects_message(p_and_q: World, tmp_path):
    """Back up state.db; a message in P's p2, a secret in Q's q2, 8 messages in P's p3; index. Export the three
    sessions, copy the backup over state.db, import them q2, p2, p3: import keeps timestamps, and the id of p2's
    message now belongs to q2's secret. P's semantic search never shows the secret, as p2's or anyone's."""
    world = p_and_q
    p, q = world.paths["p"], world.paths["q"]
    checkpointed(world)
    backup = tmp_path / "backup.db"
    shutil.copyfile(world.home / "state.db", backup)
    world.session("p2", p, messages=[("user", "the vault unseal procedure for staging")])
    world.session("q2", q, messages=[("user", "Q secret: the vault unseal key is zebra-7741-orchid")])
    world.session("p3", p, messages=[("user", f"P note {i} on the release train") for i in range(8)])
    assert plugin("indexing").index_projects(home=world.home)["remaining"] == 0
    before = world.search("cur", "vault unseal", mode="semantic")
    assert "p2" in result_sessions(before)
    exported = [world.db.export_session(sid) for sid in ("q2", "p2", "p3")]
    restore_in_place(world, backup)
    report = world.db.import_sessions(exported)
    assert report.get("imported") == 3, report
    checkpointed(world)
    with closing(sqlite3.connect(world.home / "state.db")) as conn:
        owner = dict(conn.execute("SELECT id, session_id FROM messages WHERE content LIKE '%vault%'"))
    for fresh in (False, True):
        if fresh:
            new_process()
        for mode in ("semantic", "hybrid"):
            answer = world.search("cur", "vault unseal key", mode=mode, limit=10)
            shown = " ".join(r["snippet"] for r in answer["results"])
            assert "zebra" not in shown and "q2" not in result_sessions(answer), (mode, fresh, answer, owner)
            assert all(owner.get(r["message_id"]) in (None, r["session_id"]) for r in answer["results"]), answer


def test_a_hit_whose_text_changed_since_it_was_embedded_is_dropped_and_embedded_again(p_and_q: World):
    """A message edited in place (Hermes 0.21 updates content; a restore can put another text under the same id
    and session): its old vector still points at it. The hit is not shown with the new text under the old
    vector's meaning; its vector is dropped, and the next indexing embeds the new text."""
    world = p_and_q
    p = world.paths["p"]
    world.session("p2", p, messages=[("user", "the kestrel deploy uses blue green switching")])
    world.session("p3", p, messages=[("user", "a blue green rollout elsewhere")])
    assert result_sessions(world.search("cur", "kestrel deploy", mode="semantic"))[:1] == ["p2"]
    checkpointed(world)
    with closing(sqlite3.connect(world.home / "state.db")) as conn:
        conn.execute("UPDATE messages SET content = 'lunch plans for friday' WHERE session_id = 'p2'")
        conn.commit()
    answer = world.search("cur", "kestrel deploy blue green", mode="semantic", limit=10)
    assert result_sessions(answer)[:1] == ["p3"], answer
    again = world.search("cur", "lunch plans friday", mode="semantic", limit=10)
    assert result_sessions(again)[:1] == ["p2"], "the new text was embedded and is found by meaning"


def _indexed_then_edited(world: World) -> World:
    """p2's message indexed as lunch plans, then edited in place to the kestrel deploy (its old vector stays)."""
    world.session("p2", world.paths["p"], messages=[("user", "lunch plans for friday")])
    assert world.search("cur", "lunch plans", mode="semantic")["semantic_status"] == "ready"
    checkpointed(world)
    with closing(sqlite3.connect(world.home / "state.db")) as conn:
        conn.execute("UPDATE messages SET content = 'the kestrel deploy uses blue green switching' WHERE session_id = 'p2'")
        conn.commit()
    return world


def test_a_message_edited_to_the_question_is_found_by_the_first_search_that_meets_its_old_vector(p_and_q: World):
    """A stale vector costs an embedding, not the answer: the search that drops it embeds the new text at once and
    looks again, so the first semantic search after the edit finds the message by what it says now."""
    world = _indexed_then_edited(p_and_q)
    answer = world.search("cur", "kestrel deploy blue green", mode="semantic", limit=10)
    assert result_sessions(answer)[:1] == ["p2"] and "kestrel" in answer["results"][0]["snippet"], answer


def test_embedding_a_stale_hit_again_stays_within_the_searchs_indexing_budget(p_and_q: World, monkeypatch):
    """A search spends ``INDEX_BUDGET_S`` on what the index lacks; a stale hit met afterwards is embedded again only
    within what is left of it: it had a budget of its own, so a search of a partial index with a remote provider
    spent twice the indexing time (and sent the edited text on top)."""
    world = _indexed_then_edited(p_and_q)
    world.session("p9", world.paths["p"], messages=[("user", f"note {i} about the release train") for i in range(200)])
    monkeypatch.setattr(plugin("vector_leg"), "INDEX_BUDGET_S", 0.3)
    world.server.delay = 0.25
    world.server.requests.clear()
    answer = world.search("cur", "kestrel deploy blue green", mode="semantic", limit=10)
    assert answer["semantic_status"] == "partial", answer
    sent = [t for r in world.server.requests for t in r["body"]["input"]]
    assert not any("switching" in t for t in sent), "embedded past the search's indexing budget"


# -- files we write are never trusted ---------------------------------------------------------------------------


def vector_files(world: World, kind: str) -> Path:
    (found,) = (world.home / "plugins" / "project-history-recall" / "data").glob(f"embeddings.db.*.{kind}")
    return found


@pytest.fixture
def indexed(p_and_q: World) -> World:
    """P's sessions embedded through a search, then a new process (the index closed, its files on disk)."""
    world = p_and_q
    world.session("p2", world.paths["p"], messages=[("user", "the kestrel deploy uses blue green switching")])
    assert world.search("cur", "kestrel deploy", mode="semantic")["semantic_status"] == "ready"
    new_process()
    return world


def sent_since(server_requests: list, before: int) -> list[str]:
    return [t for r in server_requests[before:] for t in r["body"]["input"]]


def edit_head(world: World, **values: Any) -> None:
    path = vector_files(world, "head")
    head = json.loads(path.read_text())
    head.update(values)
    path.write_text(json.dumps(head))


def nested_sessions(world: World) -> None:
    """``.sessions`` holding brackets nested past what a parser takes, every byte of it committed by the head."""
    text = "[" * 100_000 + "]" * 100_000 + "\n"
    vector_files(world, "sessions").write_text(text)
    edit_head(world, session_bytes=len(text))


DAMAGE = {
    "negative rows and dims": lambda world: edit_head(world, rows=-3, dims=-64),
    "nested head": lambda world: vector_files(world, "head").write_text("[" * 100_000 + "]" * 100_000),
    "nested sessions": nested_sessions,
    "other dims": lambda world: edit_head(world, dims=16),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_vector_files_are_copied_again_from_embeddings_db_without_embedding(indexed: World, damage):
    """A ``.head`` with negative rows or dims, brackets nested past what a parser takes in ``.head`` or
    ``.sessions``, a ``.head`` edited to other dims: the keyword answer stands, the semantic answer comes back,
    and nothing is embedded again (embeddings.db still holds every vector): only the queries are sent."""
    DAMAGE[damage](indexed)
    before = len(indexed.server.requests)
    for query in ("kestrel deploy", "blue green switching"):
        answer = indexed.search("cur", query, mode="hybrid")
        assert answer["success"] is True and result_sessions(answer)[:1] == ["p2"], answer
        assert answer["semantic_status"] == "ready", answer
    assert sent_since(indexed.server.requests, before) == ["kestrel deploy", "blue green switching"], \
        "only the queries are embedded"


@pytest.mark.parametrize("size", [12, 1_000_000])
def test_a_symbolic_link_planted_at_a_vector_file_is_never_followed(indexed: World, tmp_path, size):
    """A link at the ``.vec`` path to a file outside HERMES_HOME, shorter than the head says or long enough to pass
    for ours: that file is never mapped, truncated or written. The files are started over (the link replaced by a
    file of ours), and both answers stand."""
    victim = tmp_path / "precious.bin"
    victim.write_bytes(b"x" * size)
    path = vector_files(indexed, "vec")
    path.unlink()
    path.symlink_to(victim)
    answer = indexed.search("cur", "kestrel deploy", mode="hybrid")
    assert answer["success"] is True and result_sessions(answer)[:1] == ["p2"], answer
    assert answer["semantic_status"] == "ready" and not path.is_symlink(), answer
    assert victim.read_bytes() == b"x" * size
