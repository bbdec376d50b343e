"""The session-start warm-up, through Hermes' real plugin manager: after
consent it loads the model and the vector index in the background (so the
first semantic search does not pay for it), and before consent, or when
switched off, it touches nothing. It never embeds or sends anything."""

from __future__ import annotations

import importlib
import itertools
import json
import logging
import shutil
import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest
from conftest import ALPHA_TEXTS, World, result_sessions

TEXTS = ALPHA_TEXTS


def plugin(name: str):
    """A module of the plugin as Hermes loaded it (imported now if it was not yet)."""
    return importlib.import_module(f"hermes_plugins.project_history_recall.{name}")


def warming() -> threading.Thread | None:
    """The last warm-up thread this process started (kept in the plugin's declared caches), of any profile."""
    threads = plugin("state").cache("warm_up").data.get("threads", {})
    return list(threads.values())[-1] if threads else None


def start_session(sid: str = "new-session") -> threading.Thread | None:
    """Fire ``on_session_start`` the way Hermes' conversation loop does; return the warm-up thread, if any."""
    from hermes_cli.plugins import invoke_hook

    before = warming()
    invoke_hook("on_session_start", session_id=sid, model="test-model", platform="cli")
    thread = warming()
    if thread is None or thread is before:
        return None
    thread.join(timeout=60)
    assert not thread.is_alive(), "warm-up did not finish"
    return thread


def open_indexes() -> dict:
    return dict(plugin("state").cache("vector_indexes").data)


def data_dir(world: World):
    return world.home / "plugins" / "project-history-recall" / "data"


def stored_chunks(world: World) -> int:
    with closing(sqlite3.connect((data_dir(world) / "embeddings.db").as_uri() + "?mode=ro", uri=True)) as conn:
        return conn.execute("SELECT count(*) FROM chunks").fetchone()[0]


def consent(world: World, **args) -> None:
    answer = world.call("project_history_semantic_consent", {"decision": "allow", **args}, "cur")
    assert answer["success"] is True, answer


def indexed_then_new_process(world: World, fake):
    """Consent with the loopback endpoint, index the project by a search, then drop
    the loaded index as a new process would start; returns the endpoint."""
    server = fake()
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(world)
    assert world.search("cur", "websocket backoff")["semantic_status"] == "ready"
    plugin("vector_index").reset_indexes()
    return server


def test_the_hooks_are_registered_with_hermes(warm):
    assert {"on_session_start", "pre_llm_call"} <= set(warm.loaded.hooks_registered)


def test_a_resumed_conversation_warms_up_at_its_first_turn_once(warm, fake, monkeypatch):
    """Hermes fires no start hook for a resumed conversation: its first turn warms up,
    later turns do nothing, and the turn hook injects nothing into the turn."""
    from hermes_cli.plugins import invoke_hook

    server = indexed_then_new_process(warm, fake)
    plugin("state").cache("warm_up").data.pop("threads", None)  # a process where nothing warmed up yet
    sent = len(server.requests)
    turn = dict(session_id="cur", user_message="hi", conversation_history=[], is_first_turn=False, model="m", platform="cli")
    assert invoke_hook("pre_llm_call", **turn) == [], "nothing is injected into the turn"
    thread = warming()
    assert thread is not None
    thread.join(timeout=60)
    (index,) = open_indexes().values()
    assert index.vectors_in_memory == stored_chunks(warm)
    invoke_hook("pre_llm_call", **turn)
    assert warming() is thread, "one warm-up per process from turns"
    assert len(server.requests) == sent, "nothing embedded or sent"


def test_before_consent_nothing_starts_and_no_file_is_made(warm, fake):
    server = fake()
    warm.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    assert start_session() is None
    assert open_indexes() == {}
    assert not (data_dir(warm) / "embeddings.db").exists()
    assert server.requests == []


def test_after_consent_it_loads_the_index_and_sends_nothing(warm, fake):
    server = indexed_then_new_process(warm, fake)
    sent = len(server.requests)

    assert start_session() is not None
    assert len(server.requests) == sent, "warm-up must not embed or send anything"
    (index,) = open_indexes().values()
    assert index.vectors_in_memory == stored_chunks(warm) == len(TEXTS)  # every stored chunk is in memory
    assert index.provider.loaded  # the client is built (no request)

    answer = warm.search("cur", "websocket backoff", mode="hybrid")
    assert answer["semantic_status"] == "ready"
    assert result_sessions(answer)[0] == "a_ws"
    assert len(server.requests) == sent + 1, "only the query itself is embedded"
    assert list(open_indexes().values()) == [index], "the search used the warmed index"


def test_the_warm_up_does_the_census_so_the_first_search_does_not(warm, fake, monkeypatch):
    """Attributing every session to its project is the first search's largest cost (0.4 s at 20,000
    sessions): after a warm-up, the first search of the process, keyword mode included, reads no session row
    beyond the newest ones."""
    indexed_then_new_process(warm, fake)
    workspace = plugin("workspace")
    workspace.membership.invalidate()  # a new process: no census yet
    session_rows = plugin("session_rows")
    full = []
    real = session_rows.scan_sessions  # a full read of the sessions: every session row
    monkeypatch.setattr(session_rows, "scan_sessions", lambda conn: full.append(1) or real(conn))
    assert start_session() is not None
    assert full == [1], "the warm-up did the census"
    for mode in ("keyword", "hybrid"):
        assert warm.search("cur", "websocket backoff", mode=mode)["semantic_status"] == "ready"
    assert full == [1], "no search did it again"


def test_the_warm_up_reads_the_id_ranges_so_the_keyword_leg_filters_by_them(warm, fake, monkeypatch):
    """After a warm-up the first search passes over other projects' matches by message id (fts.Near)."""
    indexed_then_new_process(warm, fake)
    plugin("lexical").ranges.invalidate()  # a new process: no ranges read yet
    fts = plugin("fts")
    seen = []
    real = fts.session_candidates
    monkeypatch.setattr(fts, "session_candidates", lambda *a, **k: seen.append(k.get("near")) or real(*a, **k))
    assert warm.search("cur", "websocket", mode="keyword")["results"]
    assert seen == [None], "without the warm-up the search does not read the ranges"
    plugin("lexical").ranges.invalidate()
    assert start_session() is not None
    seen.clear()
    for mode in ("keyword", "hybrid"):
        assert result_sessions(warm.search("cur", "websocket", mode=mode))[0] == "a_ws"
    assert len(seen) == 2 and all(near is not None for near in seen)


def test_the_warm_up_reads_ahead_only_the_vectors_of_the_conversations_project(warm, fake, monkeypatch):
    """Hermes names the conversation in its hooks: the warm-up reads that project's vectors, no other's;
    a conversation whose project is not known yet (not in state.db) reads them all."""
    indexed_then_new_process(warm, fake)
    beta = warm.repo("beta")
    warm.session("b_old", beta, messages=[("assistant", "beta's own websocket notes")])
    assert warm.search("cur", "websocket", mode="hybrid")["semantic_status"] == "ready"
    plugin("vector_index").reset_indexes()
    asked = []
    real = plugin("vector_index").VectorIndex.warm
    monkeypatch.setattr(plugin("vector_index").VectorIndex, "warm", lambda self, sessions=None: asked.append(sessions) or real(self, sessions))
    assert start_session("cur") is not None
    assert asked == [frozenset({"a_ws", "a_db"})]
    assert start_session("not-written-yet") is not None
    assert asked[-1] is None
    from hermes_cli.plugins import invoke_hook

    plugin("state").cache("warm_up").data.clear()  # a new process, whose first turn is of a resumed conversation
    invoke_hook("pre_llm_call", session_id="b_old", task_id="t", turn_id="1", user_message="hi", conversation_history=[],
                is_first_turn=False, model="m", platform="cli", sender_id="")
    warming().join(timeout=60)
    assert asked[-1] == frozenset()  # b_old is beta's only session: nothing of beta's others to read


def test_a_later_session_reuses_the_index_and_loads_only_what_is_new(warm, fake):
    indexed_then_new_process(warm, fake)
    start_session("s1")
    (index,) = open_indexes().values()
    # Another process (the index command) stores a vector meanwhile.
    mid = warm.say("a_db", "assistant", "Rate limits moved to the gateway.")
    other = plugin("vector_index").VectorIndex(index.path, plugin("gate").make_provider(plugin("settings").load_settings(warm.home), warm.home))
    other.add([plugin("vector_index").PendingMessage(mid, "a_db", "Rate limits moved to the gateway.")])
    other.close()
    start_session("s2")
    assert list(open_indexes().values()) == [index], "the loaded index is kept, not reloaded"
    assert index.vectors_in_memory == stored_chunks(warm) == len(TEXTS) + 1
    assert mid in index.indexed()


@pytest.mark.parametrize(
    "embedding",
    [{"preload": False}, {"enabled": False}, {"provider": "none"}, {"enabled": [False]}, {"enabled": "flase"}],
    ids=["preload-false", "enabled-false", "provider-none", "enabled-a-list", "enabled-misspelt"],
)
def test_switched_off_in_config_nothing_starts(warm, fake, embedding):
    """Off, or an ``enabled`` that is neither true nor false (semantic search off until it is fixed): neither the
    warm-up nor a first search's preparation opens, loads or creates anything, whatever consent is on record."""
    server = fake()
    warm.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(warm)
    warm.configure_embedding(**{"provider": "openai", "base_url": server.base_url, "model": "m", **embedding})
    assert start_session() is None
    assert open_indexes() == {}
    if "preload" not in embedding:
        assert warm.search("cur", "websocket backoff")["semantic_status"] in ("disabled", "unavailable")
        for thread in [t for t in threading.enumerate() if t.name == "project-history-recall-prepare"]:
            thread.join(timeout=30)
        assert open_indexes() == {}
    assert not (data_dir(warm) / "embeddings.db").exists()
    assert server.requests == []


@pytest.mark.parametrize("change", ["declined", "other-model"])
def test_declined_or_consent_for_another_model_loads_nothing(warm, fake, change):
    server = fake()
    warm.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    if change == "declined":
        assert warm.call("project_history_semantic_consent", {"decision": "decline"}, "cur")["success"]
    else:
        consent(warm)
        warm.configure_embedding(provider="openai", base_url=server.base_url, model="another")
    start_session()  # the thread may start (consent.json exists); it must stop before opening anything
    assert open_indexes() == {}
    assert not (data_dir(warm) / "embeddings.db").exists()
    assert server.requests == []


def test_a_broken_index_is_rebuilt_quietly_and_the_next_search_says_so(warm, fake, caplog):
    indexed_then_new_process(warm, fake)
    for suffix in ("-wal", "-shm"):
        (data_dir(warm) / f"embeddings.db{suffix}").unlink(missing_ok=True)
    (data_dir(warm) / "embeddings.db").write_bytes(b"this is not a database" * 100)
    escaped: list = []
    hook, threading.excepthook = threading.excepthook, escaped.append
    try:
        with caplog.at_level(logging.WARNING):
            assert start_session() is not None
    finally:
        threading.excepthook = hook
    assert escaped == [], "nothing may escape the warm-up thread"
    assert any("moved to" in r.getMessage() for r in caplog.records)
    answer = warm.search("cur", "websocket backoff")
    assert "rebuilt" in answer.get("semantic_note", "")
    assert result_sessions(answer)[0] == "a_ws", "keyword results stand while the index is rebuilt"


def test_an_unreachable_endpoint_does_not_matter_to_the_warm_up(warm, fake):
    """Warm-up sends nothing, so a down endpoint cannot slow or break it."""
    server = indexed_then_new_process(warm, fake)
    server.close()
    assert start_session() is not None
    (index,) = open_indexes().values()
    assert index.vectors_in_memory == stored_chunks(warm) == len(TEXTS)
    answer = warm.search("cur", "websocket backoff")
    assert answer["semantic_status"] == "unavailable"  # the query itself cannot be embedded
    assert result_sessions(answer)[0] == "a_ws"


def test_a_search_during_the_warm_up_waits_for_it_and_answers_right(warm, fake):
    indexed_then_new_process(warm, fake)
    from hermes_cli.plugins import invoke_hook

    invoke_hook("on_session_start", session_id="racing", model="m", platform="cli")
    answer = warm.search("cur", "Postgres migration backfills", mode="hybrid")  # while it loads
    thread = warming()
    thread.join(timeout=60)
    assert answer["semantic_status"] == "ready"
    assert result_sessions(answer)[0] == "a_db"
    assert len(open_indexes()) == 1, "one index per file and model, shared by both"


def test_real_local_model_is_loaded_by_the_warm_up(warm):
    warm.configure_embedding(provider="local")
    consent(warm)
    assert start_session() is not None
    (index,) = open_indexes().values()
    assert index.provider.loaded, "the weights were read before the first search"
    answer = warm.search("cur", "网络连接不稳定，断线后怎么自动重连？", mode="semantic", limit=1)
    assert answer["semantic_status"] == "ready"
    assert result_sessions(answer) == ["a_ws"]


def loaded_index(world: World):
    """The process's index for the configured provider, opened as a search would (nothing loaded yet)."""
    return plugin("gate").open_vectors(world.home, plugin("settings").load_settings(world.home))


def test_a_keyword_search_during_a_load_answers_without_waiting(warm, fake, monkeypatch):
    """A keyword-mode search needs only the index's status: it neither waits for
    a warm-up holding the index nor loads the matrix itself."""
    indexed_then_new_process(warm, fake)
    index = loaded_index(warm)
    mapped = plugin("vector_view").MappedVectors
    real_refresh, loading, loaded = mapped.refresh, threading.Event(), threading.Event()

    def slow_refresh(self, *args):  # the load holds the index until the search is done
        loading.set()
        loaded.wait(60)
        return real_refresh(self, *args)

    monkeypatch.setattr(mapped, "refresh", slow_refresh)
    loader = threading.Thread(target=index.catch_up)  # a load in progress
    loader.start()
    answers: list = []
    try:
        assert loading.wait(20)
        searcher = threading.Thread(target=lambda: answers.append(warm.search("cur", "Postgres migration", mode="keyword")))
        searcher.start()
        searcher.join(timeout=20)
        waited = searcher.is_alive()
        in_memory = index.vectors_in_memory
    finally:
        loaded.set()
        loader.join()
    searcher.join()
    assert not waited, "the keyword search waited for the index's lock"
    (answer,) = answers
    assert answer["semantic_status"] == "ready"
    assert result_sessions(answer)[0] == "a_db"
    assert in_memory == 0, "a keyword search loaded the index"


def test_keyword_mode_status_follows_the_file_without_loading_the_matrix(warm, fake):
    indexed_then_new_process(warm, fake)
    assert warm.search("cur", "websocket", mode="keyword")["semantic_status"] == "ready"
    warm.say("a_db", "user", "Then we dropped the old column once reads had switched.")
    answer = warm.search("cur", "websocket", mode="keyword")
    assert answer["semantic_status"] == "partial"
    assert "2 of 3 messages indexed" in answer["semantic_note"]
    index = loaded_index(warm)
    assert index.vectors_in_memory == 0, "keyword mode loaded the matrix"
    # Another process (the index command) embeds the new message: the file, not memory, is counted.
    other = plugin("vector_index").VectorIndex(index.path, index.provider)
    with closing(sqlite3.connect((warm.home / "state.db").as_uri() + "?mode=ro", uri=True)) as conn:
        mid, text = conn.execute("SELECT id, content FROM messages WHERE session_id = 'a_db' ORDER BY id DESC").fetchone()
    other.add([plugin("vector_index").PendingMessage(mid, "a_db", text)])
    other.close()
    assert warm.search("cur", "websocket", mode="keyword")["semantic_status"] == "ready"
    # A hybrid search loads the index; keyword mode then answers from memory, and stays right.
    assert warm.search("cur", "websocket backoff", mode="hybrid")["semantic_status"] == "ready"
    assert index.vectors_in_memory == stored_chunks(warm) == 3
    warm.say("a_ws", "assistant", "Jitter is drawn from the full backoff window.")
    assert warm.search("cur", "websocket", mode="keyword")["semantic_status"] == "partial"


def test_keyword_mode_with_a_relative_hermes_home(warm, fake, monkeypatch, capsys):
    """``--hermes-home hermes_home`` (relative) works in keyword mode as in hybrid mode."""
    indexed_then_new_process(warm, fake)
    monkeypatch.chdir(warm.tmp)
    cli = plugin("command_line")
    args = ["--hermes-home", warm.home.name, "search", "--cwd", str(warm.work / "alpha"), "--json", "websocket"]
    # The folder's scope includes "cur", whose message no search has indexed yet.
    for mode, status in (("keyword", "partial"), ("hybrid", "ready")):
        assert cli.main([*args[:3], "--mode", mode, *args[3:]]) == 0
        answer = json.loads(capsys.readouterr().out)
        assert answer["semantic_status"] == status, (mode, answer)


def test_a_rewind_does_not_hide_new_messages_from_the_index(warm, fake):
    """A rewound message keeps its vector until it is dropped; it must not count
    for a new message, or the project would read ready with the new one never indexed."""
    server = indexed_then_new_process(warm, fake)
    del server
    old = warm.say("a_db", "user", "Please keep the cache eviction policy simple.")
    assert warm.search("cur", "cache eviction")["semantic_status"] == "ready"
    plugin("vector_index").reset_indexes()  # a new process
    warm.db.rewind_to_message("a_db", old)  # `old` leaves the conversation, its vector stays for now
    new = warm.say("a_ws", "user", "The retry budget for the reconnect loop is five attempts.")
    keyword = warm.search("cur", "retry budget", mode="keyword")
    assert keyword["semantic_status"] == "partial" and "2 of 3 messages indexed" in keyword["semantic_note"]
    assert warm.search("cur", "retry budget")["semantic_status"] == "ready"
    assert new in loaded_index(warm).indexed()


def test_a_keyword_search_does_not_wait_for_another_writer_of_the_index(warm, fake):
    """Opening the index in a new process takes SQLite's write lock only to migrate."""
    indexed_then_new_process(warm, fake)
    with closing(sqlite3.connect(data_dir(warm) / "embeddings.db", isolation_level=None)) as writer:
        writer.execute("BEGIN IMMEDIATE")  # e.g. the index command storing a batch
        answers: list = []
        searcher = threading.Thread(target=lambda: answers.append(warm.search("cur", "websocket", mode="keyword")))
        searcher.start()
        searcher.join(timeout=3)  # waiting would take the 5 s busy timeout and end unavailable
        waited = searcher.is_alive()
        writer.execute("ROLLBACK")
    searcher.join()
    assert not waited and answers[0]["semantic_status"] == "ready", answers


def test_an_index_deleted_or_replaced_while_hermes_runs_is_opened_again(warm, fake):
    """A user deleting embeddings.db to start over, or another process moving a damaged one
    aside: this process must not go on with the file nobody else sees."""
    indexed_then_new_process(warm, fake)
    assert warm.search("cur", "websocket backoff")["semantic_status"] == "ready"  # loaded in this process
    path = data_dir(warm) / "embeddings.db"
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    keyword = warm.search("cur", "websocket", mode="keyword")
    assert keyword["semantic_status"] == "indexing" and "Nothing is indexed yet" in keyword["semantic_note"]
    assert not path.exists(), "a keyword search creates no index"
    assert warm.search("cur", "websocket backoff")["semantic_status"] == "ready"  # indexed again, in the new file
    assert stored_chunks(warm) == len(TEXTS)
    # Moved aside and rebuilt by another process (as VectorIndex does with a damaged file): the same.
    provider = loaded_index(warm).provider
    path.rename(path.with_name("embeddings.db.broken-1"))
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    plugin("vector_index").VectorIndex(path, provider).close()
    assert warm.search("cur", "Postgres migration backfills")["semantic_status"] == "ready"
    assert stored_chunks(warm) == len(TEXTS)


def test_more_new_messages_than_one_batch_are_all_indexed(warm, fake, monkeypatch):
    """After a project was complete, more new messages than one indexing batch: the
    watermark must not move past the older ones (no search would index them then)."""
    indexed_then_new_process(warm, fake)
    semantic = plugin("vector_leg")
    assert warm.search("cur", "websocket")["semantic_status"] == "ready"  # complete: a watermark is set
    monkeypatch.setattr(plugin("index_check"), "INDEX_BATCH", 2)
    monkeypatch.setattr(semantic, "INDEX_BUDGET_S", 60.0)
    embeds_two(monkeypatch)
    new = [warm.say("a_db", "user", f"Note {i} about the rollout of the new schema.") for i in range(5)]
    keyword = warm.search("cur", "rollout", mode="keyword")
    assert keyword["semantic_status"] == "partial" and "2 of 7 messages indexed" in keyword["semantic_note"]
    statuses = [warm.search("cur", "rollout")["semantic_status"] for _ in range(3)]
    assert statuses == ["partial", "partial", "ready"]
    assert set(new) <= set(loaded_index(warm).indexed())


def embeds_two(monkeypatch) -> None:
    """Make every indexing embed at most two messages (a search whose budget ends there)."""
    vector_index = plugin("vector_index")
    real = vector_index.VectorIndex.add
    monkeypatch.setattr(vector_index.VectorIndex, "add",
                        lambda self, messages, **k: real(self, itertools.islice(messages, 2), **k))


def test_keyword_mode_checks_the_project_in_full_once(warm, fake, monkeypatch):
    """While a project is not fully indexed, keyword mode (which indexes nothing) would check
    every message on every search; it checks in full once, then reads only what is new."""
    indexed_then_new_process(warm, fake)
    warm.say("a_db", "user", "Then we dropped the old column once reads had switched.")
    index_check = plugin("index_check")
    checks = []
    real = index_check.full_check
    monkeypatch.setattr(index_check, "full_check", lambda *a, **k: checks.append(1) or real(*a, **k))
    for _ in range(3):
        answer = warm.search("cur", "websocket", mode="keyword")
        assert answer["semantic_status"] == "partial" and "2 of 3" in answer["semantic_note"]
        warm.say("cur", "assistant", "the asking conversation goes on")  # outside the scope
    assert len(checks) == 1
    warm.say("a_ws", "assistant", "Jitter is drawn from the full backoff window.")
    assert "2 of 4" in warm.search("cur", "websocket", mode="keyword")["semantic_note"]
    assert len(checks) == 1
    assert warm.search("cur", "websocket backoff")["semantic_status"] == "ready"  # indexes both
    assert warm.search("cur", "websocket", mode="keyword")["semantic_status"] == "ready"


def test_without_a_warm_up_the_first_search_prepares_the_vector_leg_beside_the_census(warm, fake, monkeypatch):
    """No warm-up ran (``preload: false``, or a host that fires no start hook): the first semantic search of
    the process opens the index and brings the vector files up to date in a thread of its own while it
    attributes every session; it embeds only the query. Once per process; never in keyword mode."""
    server = indexed_then_new_process(warm, fake)
    warm.configure_embedding(provider="openai", base_url=server.base_url, model="m", preload=False)
    vector_index, workspace, session_rows = plugin("vector_index"), plugin("workspace"), plugin("session_rows")
    caught_up, census = [], []
    real_catch_up, real_scan = vector_index.VectorIndex.catch_up, session_rows.scan_sessions
    monkeypatch.setattr(vector_index.VectorIndex, "catch_up",
                        lambda self: caught_up.append(threading.current_thread().name) or real_catch_up(self))
    monkeypatch.setattr(session_rows, "scan_sessions",  # a full read of the sessions: every session row
                        lambda conn: census.append(threading.current_thread().name) or real_scan(conn))

    def new_process():
        vector_index.reset_indexes()
        workspace.membership.invalidate()
        plugin("state").cache("warm_up").data.clear()

    new_process()
    assert start_session() is None, "preload is off: no warm-up"
    assert warm.search("cur", "websocket backoff", mode="keyword")["semantic_status"] == "ready"
    assert caught_up == [] and "prepared" not in plugin("state").cache("warm_up").data, "keyword mode prepares nothing"
    new_process()
    sent = len(server.requests)
    answer = warm.search("cur", "Postgres migration backfills", mode="hybrid")
    assert answer["semantic_status"] == "ready" and result_sessions(answer)[0] == "a_db"
    assert census == ["MainThread", "MainThread"]
    assert "project-history-recall-prepare" in caught_up, caught_up
    assert len(server.requests) == sent + 1, "only the query is embedded"
    caught_up.clear()
    assert warm.search("cur", "websocket backoff", mode="semantic")["semantic_status"] == "ready"
    assert "project-history-recall-prepare" not in caught_up, "once per process"


def test_a_first_search_prepares_nothing_where_the_warm_up_would_not(warm, fake, monkeypatch):
    """Before consent, or with consent for another model, the preparation loads and opens nothing."""
    server = fake()
    warm.configure_embedding(provider="openai", base_url=server.base_url, model="m", preload=False)
    prepared = []
    monkeypatch.setattr(plugin("gate"), "open_vectors", lambda *a, **k: prepared.append(1))
    assert warm.search("cur", "websocket backoff", mode="hybrid")["semantic_status"] == "consent_required"
    consent(warm)
    warm.configure_embedding(provider="openai", base_url=server.base_url, model="other", preload=False)
    plugin("state").cache("warm_up").data.clear()
    assert warm.search("cur", "websocket backoff", mode="hybrid")["semantic_status"] == "consent_required"
    thread = [t for t in threading.enumerate() if t.name == "project-history-recall-prepare"]
    for t in thread:
        t.join(timeout=30)
    assert prepared == [] and server.requests == [] and open_indexes() == {}


def test_each_profile_of_a_process_warms_up_once(warm, fake, tmp_path):
    """One process serving two profiles (two Hermes homes): the first turn of a resumed conversation in the
    second warms that profile up although the first one's warm-up ran already, and each only once."""
    indexed_then_new_process(warm, fake)
    semantic = plugin("warm_up")
    warm.close()
    with sqlite3.connect(warm.home / "state.db") as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    other = tmp_path / "other-profile"
    shutil.copytree(warm.home, other)
    plugin("state").cache("warm_up").data.clear()
    first = semantic.warm_up(warm.home, first_only=True)
    assert first is not None
    first.join()
    second = semantic.warm_up(other, first_only=True)
    assert second is not None, "the other profile's first turn warms it up"
    second.join()
    assert semantic.warm_up(warm.home, first_only=True) is None and semantic.warm_up(other, first_only=True) is None
    assert {index.path for index in open_indexes().values()} == {
        data_dir(warm) / "embeddings.db", other / "plugins" / "project-history-recall" / "data" / "embeddings.db"}
