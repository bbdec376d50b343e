"""The shared "complete up to" marks: a new process's first search checks only what is newer than every
session's mark, a session without one is checked in full, and a repair voids the marks of the sessions it
repaired for every process.

Through Hermes' real plugin loader and handlers, a real state.db and embeddings.db, the loopback
OpenAI-compatible endpoint as the embedder."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest
from conftest import World
from test_warm_up import consent, data_dir, indexed_then_new_process, loaded_index, plugin, stored_chunks


def new_process() -> None:
    """Forget what this process knows of the index, as a new Hermes window starts."""
    plugin("vector_index").reset_indexes()
    for name in ("semantic_complete", "semantic_lacking"):
        plugin("state").cache(name).clear()


def stored_marks(world: World) -> dict:
    with closing(sqlite3.connect((data_dir(world) / "embeddings.db").as_uri() + "?mode=ro", uri=True)) as conn:
        rows = conn.execute("SELECT key, value FROM meta WHERE key LIKE 'complete_upto:%'").fetchall()
    import json

    return {key: json.loads(value) for key, value in rows}


@pytest.fixture
def counted(monkeypatch):
    """Every full check (each scope message against every indexed one: ``"count <its sessions>"``)."""
    index_check = plugin("index_check")
    calls: list[str] = []
    real_count = index_check.full_check

    def count(conn, vectors, scope, **kw):
        calls.append("count " + ",".join(sorted(scope.session_ids)))
        return real_count(conn, vectors, scope, **kw)

    monkeypatch.setattr(index_check, "full_check", count)
    return calls


@pytest.fixture
def scans(monkeypatch):
    """Each scan for unindexed messages: ``(its sessions, the id it starts above)``."""
    reads = plugin("index_reads")
    seen: list[tuple[tuple[str, ...], int]] = []
    real = reads.indexable_ids_above

    def scan(conn, scope, above):
        seen.append((tuple(sorted(scope.session_ids)), above))
        return real(conn, scope, above)

    monkeypatch.setattr(reads, "indexable_ids_above", scan)
    return seen


def test_a_new_process_checks_only_what_is_newer_than_the_marks(warm, fake, counted, scans):
    """The first search of a process after another one found the project complete reads neither the whole
    indexed set nor every message: it checks, embeds and finds only the message written since."""
    server = indexed_then_new_process(warm, fake)
    assert warm.search("cur", "websocket")["semantic_status"] == "ready"  # the marks are shared now
    (marks,) = stored_marks(warm).values()
    assert set(marks) == {"a_ws", "a_db"}
    new_process()
    new = warm.say("a_db", "assistant", "We pinned the ORM so the migration generator stops reordering columns.")
    counted.clear()
    scans.clear()
    sent = len(server.requests)
    answer = warm.search("cur", "ORM migration generator column order")
    assert answer["semantic_status"] == "ready"
    assert counted == [], "no full check and no load of every indexed id"
    assert scans == [(("a_db", "a_ws"), marks["a_ws"])] and marks["a_ws"] == marks["a_db"] > 0, scans
    assert new in {r["message_id"] for r in answer["results"]}
    assert len(server.requests) == sent + 2, "the new message and the query embedded, nothing else"
    assert stored_chunks(warm) == 3


def test_a_session_moved_in_without_a_mark_is_checked_in_full(warm, fake, counted, scans):
    """A session of another project (never indexed there) moved into this one has no mark: its every message
    is checked and embedded, while the marked sessions are checked only above their marks."""
    indexed_then_new_process(warm, fake)
    assert warm.search("cur", "websocket")["semantic_status"] == "ready"
    mark = stored_marks(warm).popitem()[1]["a_ws"]
    alpha = warm.work / "alpha"
    project = warm.project("alpha-all", [alpha])
    warm.session("b_img", warm.repo("beta"), messages=[
        ("user", "Why are thumbnails blurry?"), ("assistant", "The resizer used nearest-neighbour; we switched to Lanczos.")])
    assert warm.move("b_img", project)["success"] is True
    consent(warm)  # consent is per project: this one is new
    new_process()
    counted.clear()
    scans.clear()
    answer = warm.search("cur", "thumbnail resizer Lanczos")
    assert answer["semantic_status"] == "ready", answer
    assert counted == ["count b_img"], "the marked sessions were not checked in full, nor loaded"
    assert scans == [(("a_db", "a_ws"), mark)], scans
    assert "b_img" in {r["session_id"] for r in answer["results"]}
    assert stored_chunks(warm) == 4
    (marks,) = stored_marks(warm).values()
    assert set(marks) == {"a_ws", "a_db", "b_img"}


def test_a_repair_voids_the_marks_of_the_sessions_it_repaired(warm, fake, counted, scans):
    """Vectors found damaged are dropped and their messages must be embedded again: the marks that said
    their sessions were indexed go with them, for every process, so a new process's first search checks
    those sessions in full and re-embeds them; the other sessions' marks still hold."""
    indexed_then_new_process(warm, fake)
    assert warm.search("cur", "websocket")["semantic_status"] == "ready"
    stamp = loaded_index(warm).store.stamp_now()
    (before,) = stored_marks(warm).values()
    with closing(sqlite3.connect(data_dir(warm) / "embeddings.db")) as conn, conn:
        conn.execute("UPDATE chunks SET vector = x'00' WHERE session_id = 'a_ws'")  # real damage: a 1-byte vector
    new_process()
    index = loaded_index(warm)
    assert index.repair_damaged() == 1
    (after,) = stored_marks(warm).values()
    assert after == {"a_db": before["a_db"]} and index.store.stamp_now() != stamp
    new_process()
    counted.clear()
    scans.clear()
    answer = warm.search("cur", "websocket backoff jitter")
    assert answer["semantic_status"] == "ready"
    assert stored_chunks(warm) == 2, "the damaged message was embedded again"
    assert counted == ["count a_ws"] and scans == [(("a_db",), before["a_db"])], (counted, scans)


def test_a_repair_over_marks_mangled_by_hand_voids_them_all(warm, fake):
    indexed_then_new_process(warm, fake)
    assert warm.search("cur", "websocket")["semantic_status"] == "ready"
    with closing(sqlite3.connect(data_dir(warm) / "embeddings.db")) as conn, conn:
        conn.execute("UPDATE meta SET value = '[1, 2' WHERE key LIKE 'complete_upto:%'")
        conn.execute("UPDATE chunks SET vector = x'00' WHERE session_id = 'a_ws'")
    new_process()
    assert loaded_index(warm).repair_damaged() == 1
    assert stored_marks(warm) == {next(iter(stored_marks(warm))): {}}


def test_marks_written_before_a_repair_are_refused(warm, fake):
    """A search that checked before another process repaired vectors must not write its marks after it."""
    indexed_then_new_process(warm, fake)
    index = loaded_index(warm)
    top = 10**6
    marks = index.complete_marks({"a_ws", "a_db"}, top)
    other = plugin("vector_index").VectorIndex(index.path, index.provider)  # another process
    with closing(sqlite3.connect(data_dir(warm) / "embeddings.db")) as conn:
        (damaged,) = conn.execute("SELECT message_id FROM chunks WHERE session_id = 'a_ws' LIMIT 1").fetchone()
    other.requeue([damaged], "damaged for the test")
    other.close()
    assert index.repaired == 0, "this process saw no damage itself"
    assert index.mark_complete(["a_ws", "a_db"], top, marks) is False
    assert set(index.complete_marks({"a_ws", "a_db"}, top).upto) == {"a_db"}, "nothing written; a_ws's mark gone"
    assert index.mark_complete(["a_ws", "a_db"], top, index.complete_marks({"a_ws", "a_db"}, top)) is True
    assert index.complete_marks({"a_ws", "a_db"}, top).upto == {"a_ws": top, "a_db": top}


def test_another_processs_repair_is_seen_at_once(warm, fake):
    """A long-running process reads what is indexed from the file every time: another process's repair (a
    message's vectors deleted) is never hidden by something this process kept, and its next search embeds the
    message again."""
    indexed_then_new_process(warm, fake)
    index = loaded_index(warm)
    victim = min(index.indexed())
    other = plugin("vector_index").VectorIndex(index.path, index.provider)
    other.requeue([victim], "damaged for the test")
    other.close()
    assert victim not in index.indexed()
    assert warm.search("cur", "websocket backoff")["semantic_status"] == "ready"
    assert victim in index.indexed(), "embedded again by the search"


def test_marks_above_state_dbs_newest_message_are_ignored_and_replaced(warm, fake, counted):
    """state.db restored from a copy reuses message ids below the marks: marks above its newest id are not
    trusted (every message is checked), and the next marks replace them instead of merging."""
    indexed_then_new_process(warm, fake)
    assert warm.search("cur", "websocket")["semantic_status"] == "ready"
    with closing(sqlite3.connect(data_dir(warm) / "embeddings.db")) as conn, conn:
        conn.execute("UPDATE meta SET value = json_set(value, '$.a_db', 99999999, '$.gone', 99999999)"
                     " WHERE key LIKE 'complete_upto:%'")
    new_process()
    counted.clear()
    assert warm.search("cur", "websocket")["semantic_status"] == "ready"
    assert any(c.startswith("count ") for c in counted), "checked in full"
    (marks,) = stored_marks(warm).values()
    assert set(marks) == {"a_ws", "a_db"} and max(marks.values()) < 99999999


@pytest.mark.parametrize("shape", ["{not json", "[1, 2]", '"text"', '{"a_ws": "x", "a_db": 1.5}', "[" * 5000 + "]" * 5000])
def test_marks_mangled_by_hand_are_ignored_then_rewritten(warm, fake, counted, shape):
    """Marks that do not read as an object of ids (not JSON, another shape, nested past any parser): the first
    search checks everything (right answer) and writes sound marks."""
    indexed_then_new_process(warm, fake)
    assert warm.search("cur", "websocket")["semantic_status"] == "ready"
    with closing(sqlite3.connect(data_dir(warm) / "embeddings.db")) as conn, conn:
        conn.execute("UPDATE meta SET value = ? WHERE key LIKE 'complete_upto:%'", (shape,))
    new_process()
    counted.clear()
    assert warm.search("cur", "websocket")["semantic_status"] == "ready"
    assert any(c.startswith("count ") for c in counted), "checked in full"
    (marks,) = stored_marks(warm).values()
    assert set(marks) == {"a_ws", "a_db"}


def test_the_index_command_marks_what_it_completed(warm, fake, counted):
    """After the index command embedded every consented project, the first search of a new process checks only
    what is newer: it neither loads every indexed id nor checks every message."""
    server = fake()
    warm.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(warm)
    index = loaded_index(warm)
    index.mark_complete(["deleted-long-ago"], 1, index.complete_marks(set(), 1))
    result = plugin("indexing").index_projects(home=warm.home)
    assert result["success"] is True and result["remaining"] == 0, result
    (marks,) = stored_marks(warm).values()
    assert set(marks) == {"a_ws", "a_db", "cur"}, "every consented session, and only those"
    new_process()
    counted.clear()
    assert warm.search("cur", "websocket backoff")["semantic_status"] == "ready"
    assert counted == []
