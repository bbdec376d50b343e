"""A conversation across its sessions and its profile: its chain walked in linear time, its key read as Hermes reads it
and changed while the process runs, and one count of the project's sessions from one conversation."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing

from conftest import World
from test_bounded_index import plugin


def result_sessions(answer):
    return [r["session_id"] for r in answer["results"]]


def _chain(db, n: int) -> str:
    """``n`` sessions, each a compression continuation of the one before, written straight into state.db."""
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("DELETE FROM sessions WHERE id LIKE 'c%'")
        conn.executemany("INSERT INTO sessions (id, source, started_at, parent_session_id, end_reason) VALUES (?, 'cli', 1, ?, ?)",
                         [(f"c{i}", f"c{i - 1}" if i else None, "compression" if i < n - 1 else None) for i in range(n)])
    return f"c{n - 1}"


def test_conversation_roots_is_linear_in_a_deep_chain(world: World):
    """A long-lived gateway chat compressed thousands of times: one search's grouping walks the chain of each ranked
    session once. At 4x the chain it must cost about 4x, not 16x (a list searched at every step)."""
    conversations = plugin("conversations")
    world.db  # noqa: B018
    path = world.home / "state.db"
    took = {}
    for n in (4_000, 16_000):
        deepest = _chain(path, n)
        with closing(sqlite3.connect(path)) as conn:
            start = time.perf_counter()
            assert conversations.conversation_roots(conn, [deepest, "c1"]) == {deepest: "c0", "c1": "c0"}
            took[n] = time.perf_counter() - start
    assert took[16_000] < 8 * took[4_000], took


def test_the_key_hermes_would_read_from_env(tmp_path, monkeypatch):
    """Hermes reads a profile's .env as a dict: a key written twice is its last value (``hermes config set`` or an
    appended line wins), and a .env saved with a byte-order mark (Notepad) still names its first key."""
    from project_history_recall import settings
    monkeypatch.delenv("PROJECT_HISTORY_EMBEDDING_API_KEY", raising=False)
    (tmp_path / ".env").write_text("PROJECT_HISTORY_EMBEDDING_API_KEY=sk-old-revoked\nPROJECT_HISTORY_EMBEDDING_API_KEY=sk-new\n")
    assert settings.embedding_api_key(tmp_path) == "sk-new"
    (tmp_path / ".env").write_text("\ufeffPROJECT_HISTORY_EMBEDDING_API_KEY=sk-bom\n", encoding="utf-8")
    assert settings.embedding_api_key(tmp_path) == "sk-bom"


def test_a_key_rotated_in_env_is_sent_by_the_next_search(world: World, fake, monkeypatch):
    """The key is read from the profile's .env "as Hermes reads the credentials it manages: an edit there wins".
    A user whose key was revoked writes the new one into .env while the gateway runs: the next search sends it,
    not the revoked one for the rest of the process's life."""
    monkeypatch.delenv("PROJECT_HISTORY_EMBEDDING_API_KEY", raising=False)
    repo = world.repo("app")
    world.session("old1", repo, messages=[("user", "the websocket backoff plan"), ("assistant", "use jitter")])
    world.session("cur", repo, style="cli", messages=[("user", "what did we decide?")])
    (world.home / ".env").write_text("PROJECT_HISTORY_EMBEDDING_API_KEY=sk-revoked-1111\n")
    server = fake()
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    assert world.call("project_history_semantic_consent", {"decision": "allow"}, "cur")["success"] is True
    assert world.search("cur", "websocket backoff", mode="hybrid")["semantic_status"] == "ready"
    (world.home / ".env").write_text("PROJECT_HISTORY_EMBEDDING_API_KEY=sk-rotated-2222\n")
    sent = len(server.requests)
    world.search("cur", "websocket jitter plan", mode="hybrid")
    assert server.requests[sent:] and {r["auth"] for r in server.requests[sent:]} == {"Bearer sk-rotated-2222"}
    plugin("vector_index").reset_indexes()


def test_sessions_in_scope_is_one_number_for_one_conversation(world: World):
    """``sessions_in_scope``: "the project's searchable sessions, this one included" (docs/tools.md). The search and
    the recent listing asked from the same conversation count the same project."""
    repo = world.repo("app")
    world.session("other", repo, messages=[("user", "quokka plans")])
    world.session("cur_a", repo, style="cli", messages=[("user", "quokka earlier in this conversation")])
    world.continuation("cur_a", "cur_b", messages=[("user", "hi")])
    searched = world.search("cur_b", "quokka", mode="keyword")
    recent = world.call("project_history_recent", {}, "cur_b")
    assert searched["sessions_in_scope"] == recent["sessions_in_scope"], (searched, recent)


def test_a_search_reads_its_sessions_parent_links_once(world: World, monkeypatch):
    """A keyword search asks which conversation each session stands for at its pick of candidates, at the demotion of
    its scores and for its results: the parent links of the same sessions were read from state.db three times (a
    recursive statement each, every session's row read: on 0.19 past its system prompt). They are read once a
    connection (``conversations._links``), the answer the same."""
    repo = world.repo("alpha")
    for k in range(3):
        world.session(f"s{k}", repo, messages=[("user", f"lighthouse keeper {k}"), ("assistant", f"lighthouse answer {k}")])
        world.continuation(f"s{k}", f"s{k}c", messages=[("user", f"lighthouse keeper {k}"), ("assistant", f"more lighthouse {k}")])
    world.branch("s0c", "b0", messages=[("user", "lighthouse keeper 0"), ("assistant", "the branch went on")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    store, statements = plugin("store"), []
    real = store.connect_ro

    def connect(path):
        conn = real(path)
        conn.set_trace_callback(lambda sql: statements.append(sql) if "WITH RECURSIVE up(id, parent, branch)" in sql else None)
        return conn

    monkeypatch.setattr(store, "connect_ro", connect)
    answer = world.search("cur", "lighthouse keeper", mode="keyword")
    assert sorted(result_sessions(answer)) == ["s0", "s1", "s2"], answer
    assert len(statements) == 1, statements
