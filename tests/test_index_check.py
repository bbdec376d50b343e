"""What the vector index should hold of a project, and what it lacks, read without every message row.

The check reads the scope's message ids from Hermes' per-session index and reads rows only of the
messages not indexed; it must agree with reading every row (the definition: live user/assistant
messages with text), on a real state.db written by Hermes' SessionDB with every kind of message
Hermes stores: tool output, calls without text, blank text, rewound turns, compaction-archived
turns, messages of sessions outside the project. And the first search of a process with no
"complete up to" marks must embed exactly what is missing, through the real plugin and loader."""

from __future__ import annotations

import random
import sqlite3
from contextlib import closing

import pytest
from conftest import World
from test_complete_marks import new_process, stored_marks
from test_warm_up import consent, data_dir, plugin


def varied_project(world: World) -> None:
    """Sessions of project ``api`` with every kind of message, and one of another project."""
    api, other = world.repo("api"), world.repo("other")
    world.session("cur", api)
    world.session("a1", api, messages=[("user", "How do we retry the websocket?"), ("assistant", "Backoff with jitter.")])
    world.say("a1", "assistant", "", tool_calls=[{"id": "c1", "type": "function",
                                                  "function": {"name": "terminal", "arguments": "{}"}}])
    world.say("a1", "tool", "exit 0\nall tests passed", tool_name="terminal", tool_call_id="c1")
    world.say("a1", "assistant", "   \n\t ")
    world.say("a1", "user", "We keep the jitter at 20 %.")
    world.session("a2", api, messages=[("user", "Schema migration plan?"), ("assistant", "Add the column, backfill, then swap.")])
    rewound = world.say("a2", "user", "Actually drop the table.")
    world.say("a2", "assistant", "Dropping it.")
    world.db.rewind_to_message("a2", rewound)
    world.session("a3", api, messages=[("user", "第一次讨论缓存失效"), ("assistant", "用版本号做缓存键。")])
    world.db.archive_and_compact("a3", [{"role": "user", "content": "[summary] cache keys carry a version"}])
    world.say("a3", "tool", "stdout only", tool_name="terminal")
    world.session("o1", other, messages=[("user", "Unrelated project's websocket retry"), ("assistant", "Elsewhere.")])


def scope_of(world: World, session_id: str = "cur"):
    store, workspace, paths = plugin("store"), plugin("workspace"), plugin("paths")
    conn = store.open_state_db(world.home)
    attributor = workspace.attributor_for(world.home, store.load_projects(world.home).projects)
    return conn, workspace.compute_scope(conn, attributor, session_id, db_key=paths.state_db_key(world.home))


def by_every_row(conn: sqlite3.Connection, scope) -> list[int]:
    """The definition, reading every row of the scope: live user/assistant messages with text."""
    store = plugin("store")
    where = f"{store.SCOPE_SQL} AND {plugin('index_reads').indexable_row(conn)}"
    return sorted(int(r[0]) for r in conn.execute(f"SELECT m.id FROM messages m WHERE {where}", (scope.ids_json,)))


def test_the_full_check_agrees_with_reading_every_row(world: World, fake):
    """The search's check as arrays (the index's ids read from embeddings.db) gives the same answer."""
    varied_project(world)
    server = fake()
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(world)
    index_check, settings = plugin("index_check"), plugin("settings")
    vectors = plugin("gate").open_vectors(world.home, settings.load_settings(world.home))
    conn, scope = scope_of(world)
    try:
        should = by_every_row(conn, scope)
        assert index_check.full_check(conn, vectors, scope) == (should[::-1], len(should))
        assert world.search("cur", "websocket retry")["semantic_status"] == "ready"
        # A message of spaces, tabs and newlines has no text to embed: the check never counts it.
        (blank,) = [i for i, t in conn.execute("SELECT id, content FROM messages WHERE session_id = 'a1'")
                    if t is not None and t != "" and not t.strip()]
        assert blank not in should
        assert index_check.full_check(conn, vectors, scope) == ([], len(should))
    finally:
        conn.close()


@pytest.mark.parametrize("budget", [5.0, 0.0])
def test_a_first_search_without_marks_embeds_exactly_what_is_missing(world: World, fake, monkeypatch, budget):
    """Vectors of some messages gone and no marks (as after a repair, or an index written by another
    version): a new process's first search checks every message, embeds only those, and its status
    counts what the index holds and lacks."""
    varied_project(world)
    server = fake()
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(world)
    assert world.search("cur", "websocket retry")["semantic_status"] == "ready"
    assert stored_marks(world)
    conn, scope = scope_of(world)
    try:
        text = dict(conn.execute("SELECT id, content FROM messages"))
        should = by_every_row(conn, scope)  # what is embedded (not the blank message)
        assert all(text[i].strip() for i in should)
        gone = [should[0], should[-1]]
        texts = {i: t for i, t in conn.execute(
            "SELECT id, content FROM messages WHERE id IN (SELECT value FROM json_each(?))", (str(gone),))}
    finally:
        conn.close()
    with closing(sqlite3.connect(data_dir(world) / "embeddings.db")) as db, db:
        db.execute("DELETE FROM chunks WHERE message_id IN (SELECT value FROM json_each(?))", (str(gone),))
        db.execute("DELETE FROM meta WHERE key LIKE 'complete_upto:%'")
    new_process()
    sent = len(server.requests)
    monkeypatch.setattr(plugin("vector_leg"), "INDEX_BUDGET_S", budget)
    answer = world.search("cur", "websocket retry")
    embedded = [t for r in server.requests[sent:] for t in r["body"]["input"]]
    if budget:
        assert answer["semantic_status"] == "ready", answer
        assert sorted(embedded[:-1]) == sorted(texts.values()) and embedded[-1] == "websocket retry"
    else:
        assert answer["semantic_status"] == "partial", answer
        assert f"{len(should) - 2} of {len(should)} messages indexed" in answer["semantic_note"]
        assert embedded == ["websocket retry"]


def agrees_on_random_partial_indexes(world: World, seed: int, rounds: int, before_check=None) -> None:
    """The arrays path of the search against the definition, on an index holding random subsets of what had
    text when embedded (rewound messages among them), another project's messages and a deleted one;
    ``before_check(round)`` runs before each check."""
    index_check, settings, vector_index = plugin("index_check"), plugin("settings"), plugin("vector_index")
    vectors = plugin("gate").open_vectors(world.home, settings.load_settings(world.home))
    conn, scope = scope_of(world)
    try:
        text = {i: (s, t) for i, s, t in conn.execute("SELECT id, session_id, content FROM messages")}
        should = [i for i in by_every_row(conn, scope) if text[i][1].strip()]
        once = [int(r[0]) for r in conn.execute(  # what a search could have embedded once, in any project
            "SELECT id FROM messages WHERE role IN ('user', 'assistant') AND TRIM(COALESCE(content, '')) != ''")
            if text[int(r[0])][1].strip()]
        rng = random.Random(seed)
        held: set[int] = set()
        for n in range(rounds):
            pick = set(rng.sample(once, rng.randint(0, len(once))))
            vectors.drop(sorted(held - pick))
            vectors.add([vector_index.PendingMessage(i, text[i][0], text[i][1]) for i in sorted(pick - held)])
            held = pick
            if before_check is not None:
                before_check(n)
            lacking, total = index_check.full_check(conn, vectors, scope)
            assert [i for i in lacking if text[i][1].strip()] == sorted(set(should) - held, reverse=True)
            assert total - (len(lacking) - len([i for i in lacking if text[i][1].strip()])) == len(should)
    finally:
        conn.close()


def test_the_full_check_agrees_on_every_kind_of_partial_index(world: World, fake):
    """The arrays path of the search against the definition, on an index holding random subsets of what
    had text when embedded (rewound messages among them), another project's messages and a deleted one."""
    varied_project(world)
    server = fake()
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(world)
    agrees_on_random_partial_indexes(world, seed=11, rounds=6)


def test_a_repair_during_a_check_voids_what_the_check_found_complete(world: World, fake):
    """A search's check began (its key), then a repair in this process dropped a message's vector while the file
    was busy (so no other process's stamp changed), then the search found its scope complete: that finding is out
    of date and must not stand for the next search. It was kept under the repair's new generation, and the next
    check answered "nothing lacking" from it: the repaired message waited for the full check."""
    varied_project(world)
    server = fake()
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(world)
    assert world.search("cur", "websocket retry")["semantic_status"] == "ready"
    index_check, settings, store = plugin("index_check"), plugin("settings"), plugin("store")
    vectors = plugin("gate").open_vectors(world.home, settings.load_settings(world.home))
    conn, scope = scope_of(world)
    try:
        repaired = by_every_row(conn, scope)[0]
        key, top = index_check.key_of(vectors, scope), store.max_message_id(conn)
        with closing(sqlite3.connect(data_dir(world) / "embeddings.db", timeout=0)) as busy:
            busy.execute("BEGIN IMMEDIATE")  # another process writing: the repair cannot delete the stored vector
            vectors.requeue([repaired], "that no longer match state.db")
            busy.rollback()
        index_check.complete(vectors, scope, key, top)
        found = index_check.lacking(conn, vectors, scope, index_check.key_of(vectors, scope))
        assert [m[0] for m in found.pending] == [repaired]
    finally:
        conn.close()


def test_the_full_check_lets_hermes_commit_between_its_reads(world: World, fake, monkeypatch):
    """In rollback-journal mode (Hermes 0.21 on an SQLite with the WAL-reset bug) a reader holds Hermes' commits back.
    The check holds no read from one statement to the next (its rows read a page at a time): a writer that does not
    wait at all commits before each of them, and the record made by the check neither misses nor counts twice what
    was written meanwhile. The index command's check of which vectors are still live reads the same way."""
    varied_project(world)
    for n in range(6):
        world.say("a1", "tool", f"build log {n}", tool_name="terminal")
        world.say("a2", "user", f"another question {n}")
    server = fake()
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(world)
    world.close()
    state_db = world.home / "state.db"
    with closing(sqlite3.connect(state_db)) as db:
        assert db.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
    index_check, index_reads, settings = plugin("index_check"), plugin("index_reads"), plugin("settings")
    written: list[int] = []

    def commit_now(sql: str) -> None:  # a Hermes append that never waits: "database is locked" if a read is open
        if "json_each" not in sql:  # a statement of the check's (not the fixture's own reads)
            return
        with closing(sqlite3.connect(state_db, timeout=0, isolation_level=None)) as db:
            db.execute("BEGIN IMMEDIATE")
            written.append(db.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES"
                                      " ('a1', 'user', ?, 2e9)", (f"written meanwhile {len(written)}",)).lastrowid)
            db.execute("COMMIT")

    monkeypatch.setattr(index_reads, "PAGE_IDS", 3)
    vectors = plugin("gate").open_vectors(world.home, settings.load_settings(world.home))
    conn, scope = scope_of(world)
    try:
        should = by_every_row(conn, scope)[::-1]
        conn.set_trace_callback(commit_now)
        found = index_check.full_check(conn, vectors, scope)
        assert found == (sorted([*should, written[0]], reverse=True), len(should) + 1)
        assert len(written) >= 4  # before the scope's ids (so in it), then before each page's reads
        first = len(written)
        key = index_check.key_of(vectors, scope)
        made = index_check.record(conn, vectors, scope, key)
        before = sorted(written[:first], reverse=True) + should  # the first check's writes, not the record's own
        assert made.missing.tolist() == before and made.total == len(before) and made.below == written[first - 1]
        conn.set_trace_callback(None)
        now = index_check.record(conn, vectors, scope, key)  # brought up to now: what was written during the check
        assert now.missing.tolist() == sorted(written[first:], reverse=True) + before
        assert now.total == len(now.missing) and now.below == written[-1] and len(written) > first
        every, first = [int(r[0]) for r in conn.execute("SELECT id FROM messages")], len(written)
        conn.set_trace_callback(commit_now)
        live = index_reads.live_message_ids(conn, every)
        conn.set_trace_callback(None)
        # two short reads a page: its rows in large clock ticks (ticks.Ticks.told), then its rows
        assert len(written) - first == 2 * -(-len(every) // 3) and live == index_reads.live_message_ids(conn, every)
        assert set(should) <= live and len(live) < len(every)
    finally:
        conn.close()
