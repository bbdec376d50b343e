"""The record of state.db messages never indexed (a role other than user and assistant), kept in embeddings.db.

A full check of a scope (the first search of a process without "complete up to" marks, the index
command) reads the rows of every message the index lacks, to tell which of them it should hold; most
are tool output, which it never holds. Their ids are recorded so that no later check reads those rows
again: the record must never hide a message that should be indexed, whatever happened to state.db
(restored in place, replaced by another file), and a record that cannot be written leaves the check
right. Real state.db written by Hermes' SessionDB, real embeddings.db, the real plugin and loader."""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import threading
from contextlib import closing

import numpy as np
import pytest
from conftest import World
from test_complete_marks import new_process
from test_index_check import agrees_on_random_partial_indexes, by_every_row, scope_of, varied_project
from test_warm_up import consent, data_dir, plugin


def other_role_ids(conn: sqlite3.Connection, scope) -> set[int]:
    """The definition: the scope's messages whose role is neither user nor assistant."""
    return {int(r[0]) for r in conn.execute(
        "SELECT id FROM messages WHERE session_id IN (SELECT value FROM json_each(?)) AND role NOT IN ('user', 'assistant')",
        (scope.ids_json,))}


def recorded(world: World) -> tuple[set[int], str | None]:
    """``(the ids recorded, the state.db they are recorded for)``, read straight from embeddings.db."""
    id_bits = plugin("id_bits")
    with closing(sqlite3.connect((data_dir(world) / "embeddings.db").as_uri() + "?mode=ro", uri=True)) as conn:
        rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('never_indexed', 'never_indexed_source')"))
    bits = rows.get("never_indexed")
    if bits is None:
        return set(), rows.get("never_indexed_source")
    mask = np.frombuffer(bits, dtype=np.uint8)
    return {int(i) for i in np.flatnonzero(id_bits.members(mask, np.arange(len(mask) * 8)))}, rows.get("never_indexed_source")


@pytest.fixture
def rows_read(monkeypatch):
    """The message ids whose rows each full check reads (a spy on the real query, which still runs)."""
    store = plugin("store")
    real = store.sort_out_text
    calls: list[set[int]] = []

    def spy(conn, ids_json):
        import json

        calls.append(set(json.loads(ids_json)))
        return real(conn, ids_json)

    monkeypatch.setattr(store, "sort_out_text", spy)
    return calls


def check_once(world: World, vectors) -> tuple[list[int], int]:
    """One full check of ``cur``'s project on a connection of its own: its answer."""
    conn, scope = scope_of(world)
    try:
        return plugin("semantic")._full_check(conn, vectors, scope)
    finally:
        conn.close()


def vectors_of(world: World):
    semantic, settings = plugin("semantic"), plugin("settings")
    return semantic.open_vectors(world.home, settings.load_settings(world.home))


def indexed_world(world: World, fake):
    varied_project(world)
    server = fake()
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(world)
    return server


def test_a_full_check_records_the_other_roles_and_the_next_reads_none_of_their_rows(world: World, fake, rows_read):
    indexed_world(world, fake)
    semantic, store = plugin("semantic"), plugin("store")
    vectors = vectors_of(world)
    conn, scope = scope_of(world)
    try:
        should = by_every_row(conn, scope)
        tools = other_role_ids(conn, scope)
        assert tools, "the project really holds tool messages"
        assert semantic._full_check(conn, vectors, scope) == (should[::-1], len(should))
        assert tools <= rows_read[-1], "nothing recorded yet: their rows are read"
        ids, source = recorded(world)
        assert ids == tools and source == store.source_key(conn)
        assert semantic._full_check(conn, vectors, scope) == (should[::-1], len(should))
        assert not rows_read[-1] & tools, "recorded: never read again"
        assert set(should) <= rows_read[-1], "what the index lacks is still read"
    finally:
        conn.close()


def test_a_first_search_without_marks_after_the_index_command_reads_no_tool_row(world: World, fake, rows_read):
    """The index command records them too: a new process's first search after a repair voided the marks
    reads the rows of none of them, and embeds exactly what is missing."""
    server = indexed_world(world, fake)
    semantic = plugin("semantic")
    assert semantic.index_projects(home=world.home)["remaining"] == 0
    conn, scope = scope_of(world)
    try:
        tools = other_role_ids(conn, scope)
        gone = by_every_row(conn, scope)[:2]
    finally:
        conn.close()
    assert recorded(world)[0] >= tools
    with closing(sqlite3.connect(data_dir(world) / "embeddings.db")) as db, db:
        db.execute("DELETE FROM chunks WHERE message_id IN (SELECT value FROM json_each(?))", (str(gone),))
        db.execute("DELETE FROM meta WHERE key LIKE 'complete_upto:%'")
    new_process()
    rows_read.clear()
    sent = len(server.requests)
    answer = world.search("cur", "websocket retry")
    assert answer["semantic_status"] == "ready", answer
    assert rows_read and not any(call & tools for call in rows_read)
    embedded = [t for r in server.requests[sent:] for t in r["body"]["input"]]
    assert len(embedded) == 3 and embedded[-1] == "websocket retry"


def test_messages_added_later_are_checked_and_recorded(world: World, fake, rows_read):
    indexed_world(world, fake)
    semantic = plugin("semantic")
    vectors = vectors_of(world)
    check_once(world, vectors)
    new_tool = world.say("a1", "tool", "later output", tool_name="terminal")
    new_user = world.say("a1", "user", "A later question about retries")
    conn, scope = scope_of(world)
    try:
        lacking, _ = semantic._full_check(conn, vectors, scope)
        assert new_user in lacking and new_tool not in lacking
        assert {new_tool, new_user} <= rows_read[-1]
        assert new_tool in recorded(world)[0] and new_user not in recorded(world)[0]
    finally:
        conn.close()


def test_a_state_db_replaced_in_place_by_another_is_not_trusted(world: World, fake, tmp_path, rows_read):
    """A different history written over state.db (same inode), where the recorded ids are user messages:
    the sample check refuses the record, every row is read again, nothing is hidden, and the record is
    rewritten from the new file."""
    indexed_world(world, fake)
    semantic = plugin("semantic")
    vectors = vectors_of(world)
    conn, scope = scope_of(world)
    try:
        semantic._full_check(conn, vectors, scope)
        tools = other_role_ids(conn, scope)
    finally:
        conn.close()
    assert recorded(world)[0] == tools
    # The other history: the same sessions, every message a user's, as many of them.
    with closing(sqlite3.connect(world.home / "state.db")) as db, db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("UPDATE messages SET role = 'user', content = 'replaced history ' || id WHERE role != 'user'")
    new_process()
    conn, scope = scope_of(world)
    try:
        should = by_every_row(conn, scope)
        assert tools <= set(should)
        lacking, total = semantic._full_check(conn, vectors, scope)
        assert tools <= set(lacking) and total == len(should)
        assert tools <= rows_read[-1]
        assert recorded(world)[0] == set(), "rewritten from the file it now reads: no other role in it"
    finally:
        conn.close()


def test_another_state_db_file_never_uses_the_record(world: World, fake, rows_read):
    """A state.db restored as a new file (another inode, e.g. a profile copied in): the record is of the old
    file, so it is not used, whatever its contents."""
    indexed_world(world, fake)
    semantic, store = plugin("semantic"), plugin("store")
    vectors = vectors_of(world)
    conn, scope = scope_of(world)
    try:
        semantic._full_check(conn, vectors, scope)
        tools, old = other_role_ids(conn, scope), store.source_key(conn)
    finally:
        conn.close()
    world.close()
    state = world.home / "state.db"
    with sqlite3.connect(state) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(state, state.with_suffix(".new"))
    state.with_suffix(".new").replace(state)
    new_process()
    conn, scope = scope_of(world)
    try:
        assert store.source_key(conn) != old
        semantic._full_check(conn, vectors, scope)
        assert tools <= rows_read[-1]
        assert recorded(world) == (tools, store.source_key(conn))
    finally:
        conn.close()


def test_a_record_that_cannot_be_written_leaves_the_check_right(world: World, fake, rows_read):
    """Another process holds embeddings.db's write lock: the record is not written (it does not wait), and the
    check answers as the definition does; the next check reads those rows again and writes it."""
    indexed_world(world, fake)
    semantic = plugin("semantic")
    vectors = vectors_of(world)
    with closing(sqlite3.connect(data_dir(world) / "embeddings.db", isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")
        conn, scope = scope_of(world)
        try:
            should = by_every_row(conn, scope)
            assert semantic._full_check(conn, vectors, scope) == (should[::-1], len(should))
        finally:
            conn.close()
        other.execute("ROLLBACK")
    assert recorded(world)[0] == set()
    conn, scope = scope_of(world)
    try:
        semantic._full_check(conn, vectors, scope)
        assert recorded(world)[0] == other_role_ids(conn, scope)
    finally:
        conn.close()


def test_records_of_several_writers_are_merged(world: World, fake):
    """Records of the same file are merged under the write lock. Writers at the same instant do not wait for
    each other: one writes, the others are refused as busy (and a later check writes theirs); what each
    wrote stays."""
    indexed_world(world, fake)
    vectors = vectors_of(world)
    conn, _ = scope_of(world)
    source = plugin("store").source_key(conn)
    conn.close()
    batches = [np.arange(start, 5000, 7, dtype=np.int64) for start in range(1, 8)]
    wrote: list[int] = []
    refused: list[int] = []

    def write(n: int) -> None:
        try:
            vectors.record_never_indexed(source, batches[n], [])
            wrote.append(n)
        except sqlite3.OperationalError as exc:
            assert "locked" in str(exc), exc
            refused.append(n)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(len(batches))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrote and sorted(wrote + refused) == list(range(len(batches)))
    assert recorded(world)[0] == {int(i) for n in wrote for i in batches[n]}
    for n in refused:
        vectors.record_never_indexed(source, batches[n], [])
    assert recorded(world)[0] == {int(i) for ids in batches for i in ids}


def test_the_bitmap_is_a_set():
    """id_bits against Python sets, on random ids (some far apart, some beyond the bitmap)."""
    id_bits = plugin("id_bits")
    rng = random.Random(5)
    for _ in range(60):
        a = {rng.randrange(1, rng.choice([9, 64, 5000, 10**6])) for _ in range(rng.randint(0, 300))}
        b = {rng.randrange(1, 70_000) for _ in range(rng.randint(0, 300))}
        bits_a = id_bits.with_ids(id_bits.EMPTY, np.array(sorted(a), dtype=np.int64))
        both = id_bits.with_ids(bits_a, np.array(sorted(b), dtype=np.int64))
        assert np.array_equal(both, id_bits.union(bits_a, id_bits.with_ids(id_bits.EMPTY, np.array(sorted(b), dtype=np.int64))))
        probe = np.array(sorted(a | b | {0, 10**7, *(rng.randrange(1, 10**6) for _ in range(50))}), dtype=np.int64)
        assert [int(i) for i in probe[id_bits.members(both, probe)]] == sorted(a | b)
        assert id_bits.count(both) == len(a | b)
        picked = id_bits.sample(both, 16)
        assert set(picked) <= a | b and len(picked) == min(16, len(a | b))
        assert picked == sorted(picked) and (not a | b or picked[-1] == max(a | b))


def checkpointed(world: World) -> None:
    """Hermes' connection closed and state.db's WAL folded in, so the file alone holds the history."""
    world.close()
    with closing(sqlite3.connect(world.home / "state.db")) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def restore_in_place(world: World, backup) -> None:
    """``cp backup state.db``: the same inode, an older history (and AUTOINCREMENT counter) in it."""
    checkpointed(world)
    state = world.home / "state.db"
    for suffix in ("-wal", "-shm"):
        state.with_name(state.name + suffix).unlink(missing_ok=True)
    inode = state.stat().st_ino
    shutil.copyfile(backup, state)
    assert state.stat().st_ino == inode


def history_then_lost_tool_output(world: World, tmp_path):
    """A busy history, a copy of state.db, then three tool outputs the copy lacks (their ids are lost by a
    restore of the copy and handed out again by Hermes)."""
    for i in range(200):
        world.say("a2", "tool", f"earlier output {i}", tool_name="terminal")
    checkpointed(world)
    backup = tmp_path / "backup.db"
    shutil.copyfile(world.home / "state.db", backup)
    lost = [world.say("a1", "tool", f"output {i}", tool_name="terminal") for i in range(3)]
    return backup, lost


def grow_again(world: World) -> list[int]:
    """What Hermes writes after the restore: a question, its answer, a tool's output (the newest again a tool's)."""
    new = [world.say("a1", "user", "A new question after the restore"), world.say("a1", "assistant", "Its answer"),
           world.say("a1", "tool", "exit 0", tool_name="terminal")]
    world.close()
    return new


def test_a_state_db_restored_in_place_and_grown_again_hides_nothing(world: World, fake, tmp_path):
    """state.db restored in place from an older copy, then Hermes hands the lost ids out again, to a user
    message among others, the newest a tool message again (so roles alone would pass): the record's anchors
    (the highest recorded ids with their timestamps) no longer match, the record is refused, and the check
    answers as reading every row does."""
    indexed_world(world, fake)
    backup, lost = history_then_lost_tool_output(world, tmp_path)
    semantic = plugin("semantic")
    vectors = vectors_of(world)
    check_once(world, vectors)
    assert set(lost) <= recorded(world)[0]
    restore_in_place(world, backup)
    new = grow_again(world)
    assert new == lost, "the lost ids are handed out again"
    new_process()
    conn, scope = scope_of(world)
    try:
        should = by_every_row(conn, scope)
        assert new[0] in should and new[1] in should
        assert semantic._full_check(conn, vectors, scope) == (should[::-1], len(should))
        # No record is written while state.db is parted from the index's history; what every search does
        # first drops the record, and the next check writes it anew.
        semantic._same_history(conn, vectors_of(world))
        assert semantic._full_check(conn, vectors_of(world), scope) == (should[::-1], len(should))
        assert recorded(world)[0] & set(new[:2]) == set()
    finally:
        conn.close()


def test_right_after_a_restore_in_place_the_record_is_refused(world: World, fake, tmp_path, rows_read):
    """Before Hermes writes again, the recorded ids lost with the restore are above its id counter."""
    indexed_world(world, fake)
    backup, lost = history_then_lost_tool_output(world, tmp_path)
    semantic = plugin("semantic")
    vectors = vectors_of(world)
    check_once(world, vectors)
    restore_in_place(world, backup)
    new_process()
    conn, scope = scope_of(world)
    try:
        should = by_every_row(conn, scope)
        assert semantic._full_check(conn, vectors, scope) == (should[::-1], len(should))
        assert other_role_ids(conn, scope) <= rows_read[-1], "refused: every row read again"
        # Not rewritten while state.db is parted from the index's history: what every search does first drops it,
        # and the next check writes it from the restored file.
        semantic._same_history(conn, vectors_of(world))
        assert not recorded(world)[0]
        assert semantic._full_check(conn, vectors_of(world), scope) == (should[::-1], len(should))
        assert recorded(world)[0] and not set(lost) & recorded(world)[0], "rewritten from the restored file"
    finally:
        conn.close()


def test_after_a_restore_in_place_the_index_command_embeds_the_messages_that_reuse_ids(world: World, fake, tmp_path):
    server = indexed_world(world, fake)
    backup, lost = history_then_lost_tool_output(world, tmp_path)
    semantic = plugin("semantic")
    assert semantic.index_projects(home=world.home)["remaining"] == 0
    assert set(lost) <= recorded(world)[0]
    restore_in_place(world, backup)
    assert grow_again(world) == lost
    new_process()
    answer = semantic.index_projects(home=world.home)
    assert answer["success"] and answer["remaining"] == 0, answer
    sent = [t for r in server.requests for t in r["body"]["input"]]
    assert "A new question after the restore" in sent and "Its answer" in sent


def test_a_transcript_rewrite_deleting_the_highest_recorded_ids_refuses_the_record(world: World, fake, rows_read):
    """/retry, /undo and /compress rewrite a session's rows (Hermes' replace_messages: deleted, inserted again
    with new ids), often the newest tool output among them. A deleted anchor proves nothing (after a restore in
    place its id may have been handed out again and deleted), so the record is refused: the check reads every
    row again, answers exactly, and writes a record with anchors that exist."""
    indexed_world(world, fake)
    semantic = plugin("semantic")
    for i in range(20):
        world.say("a1", "tool", f"output {i}", tool_name="terminal")
    vectors = vectors_of(world)
    conn, scope = scope_of(world)
    try:
        semantic._full_check(conn, vectors, scope)
        tools = other_role_ids(conn, scope)
    finally:
        conn.close()
    world.db.replace_messages("a1", [{"role": "user", "content": "How do we retry the websocket?"},
                                     {"role": "assistant", "content": "Backoff with jitter."},
                                     {"role": "tool", "content": "rewritten output", "tool_name": "terminal"}])
    conn, scope = scope_of(world)
    try:
        should = by_every_row(conn, scope)
        gone = tools - other_role_ids(conn, scope)
        assert max(recorded(world)[0]) in gone, "the highest recorded id was deleted"
        assert semantic._full_check(conn, vectors, scope)[1] == len(should)
        assert (tools - gone) <= rows_read[-1], "refused: read again"
        assert recorded(world)[0] == other_role_ids(conn, scope)
    finally:
        conn.close()


def test_anchors_edited_by_hand_refuse_the_record(world: World, fake, rows_read):
    indexed_world(world, fake)
    semantic = plugin("semantic")
    vectors = vectors_of(world)
    conn, scope = scope_of(world)
    try:
        semantic._full_check(conn, vectors, scope)
        tools = other_role_ids(conn, scope)
        for mangled in ("[[1, 2", '{"a": 1}', "[[1.5, 2]]", None):
            with closing(sqlite3.connect(data_dir(world) / "embeddings.db")) as db, db:
                if mangled is None:
                    db.execute("DELETE FROM meta WHERE key = 'never_indexed_anchors'")
                else:
                    db.execute("UPDATE meta SET value = ? WHERE key = 'never_indexed_anchors'", (mangled,))
            should = by_every_row(conn, scope)
            assert semantic._full_check(conn, vectors, scope) == (should[::-1], len(should))
            assert tools <= rows_read[-1], f"refused: {mangled!r}"
            assert recorded(world)[0] == tools, "and written again"
    finally:
        conn.close()


def test_the_check_agrees_with_every_row_with_and_without_the_record(world: World, fake):
    """Random partial indexes (rewound messages' vectors among them, another project's, a deleted message's),
    the record there or taken away before each check."""
    indexed_world(world, fake)

    def every_other_round_forget(n: int) -> None:
        if n % 2:
            with closing(sqlite3.connect(data_dir(world) / "embeddings.db")) as db, db:
                db.execute("DELETE FROM meta WHERE key LIKE 'never_indexed%'")

    agrees_on_random_partial_indexes(world, seed=13, rounds=12, before_check=every_other_round_forget)

def test_embeddings_db_damage_met_by_the_index_commands_check_is_the_index_s_trouble(world: World, fake):
    """A damaged page of embeddings.db that only the check reads (the per-session index of the chunks): the
    index command answers as a search does for the same error (``VectorIndex.trouble``: the semantic status,
    a retry later), not with the plain state.db failure."""
    indexed_world(world, fake)
    assert world.search("cur", "websocket retry")["semantic_status"] == "ready"
    plugin("vector_index").reset_indexes()
    db = data_dir(world) / "embeddings.db"
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_chunks_1'").fetchone()
        (size,) = conn.execute("PRAGMA page_size").fetchone()
    with open(db, "r+b") as f:  # real damage: the index's root page overwritten
        f.seek((root - 1) * size)
        f.write(b"\xff" * size)
    new_process()
    answer = json.loads(plugin("handlers").guarded("/history-index", lambda: plugin("semantic").index_projects(home=world.home)))
    assert answer["success"] is False and answer["semantic_status"] == "unavailable", answer
    assert answer["error"].startswith("semantic search could not finish just now") and answer["temporary"] is True


def test_ids_beyond_the_limit_are_not_recorded(world: World, fake):
    """The bitmap's size follows the highest id: ids from ``NEVER_ID_LIMIT`` on (a foreign or hand-made state.db)
    are left out, and read each time, instead of a bitmap of gigabytes."""
    indexed_world(world, fake)
    vectors, vector_index = vectors_of(world), plugin("vector_index")
    limit = vector_index.NEVER_ID_LIMIT
    vectors.record_never_indexed("1:2", np.array([5, limit - 1, limit, 2**62], dtype=np.int64), [(limit - 1, 1.0), (2**62, 2.0)])
    ids, source = recorded(world)
    assert ids == {5, limit - 1} and source == "1:2"
    bits, anchors = vectors.never_indexed("1:2")
    assert len(bits) == limit // 8 and anchors == [(limit - 1, 1.0)]


def test_anchors_deleted_by_a_rewrite_after_a_restore_and_regrowth_refuse_the_record(world, fake, tmp_path):
    """Old history: a1 tool output at id X, then 8 a2 tool outputs (the anchors). Restore an older copy
    (counter below X). Hermes hands X out again to an a1 *user* message and the anchor ids to a2 messages;
    then /retry (replace_messages) rewrites a2, deleting the rows at the anchor ids. Every anchor is now
    'deleted, not above the counter' and a deleted anchor must refuse the record, or X would stay hidden (found by a review)."""
    indexed_world(world, fake)
    semantic, store = plugin("semantic"), plugin("store")
    for i in range(200):
        world.say("a2", "tool", f"earlier output {i}", tool_name="terminal")
    checkpointed(world)
    backup = tmp_path / "backup.db"
    shutil.copyfile(world.home / "state.db", backup)
    x = world.say("a1", "tool", "lost a1 output", tool_name="terminal")
    anchors = [world.say("a2", "tool", f"lost a2 output {i}", tool_name="terminal") for i in range(8)]
    vectors = vectors_of(world)
    check_once(world, vectors)
    assert {x, *anchors} <= recorded(world)[0]
    restore_in_place(world, backup)
    hidden = world.say("a1", "user", "A new question after the restore")
    again = [world.say("a2", "tool", f"new a2 output {i}", tool_name="terminal") for i in range(8)]
    assert hidden == x and again == anchors
    world.db.replace_messages("a2", [{"role": "user", "content": "Schema migration plan?"},
                                     {"role": "assistant", "content": "Add the column."}])
    world.close()
    new_process()
    conn, scope = scope_of(world)
    try:
        bits, anc = vectors.never_indexed(store.source_key(conn))
        print("anchors", anc, "counter", store.message_id_counter(conn), "x", x)
        print("sample", plugin("id_bits").sample(bits, semantic.NEVER_SAMPLE))
        print("holds", store.record_holds(conn, plugin("id_bits").sample(bits, semantic.NEVER_SAMPLE), anc))
        should = by_every_row(conn, scope)
        assert hidden in should
        lacking, total = semantic._full_check(conn, vectors, scope)
        assert hidden in lacking, "the user message that reuses a recorded id is hidden"
        assert total == len(should)
    finally:
        conn.close()
