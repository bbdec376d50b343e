"""Semantic and hybrid search end to end, through Hermes' loader and dispatch:
consent, privacy (what is sent where), every semantic_status, the real local
model, and degradation to keyword results."""

from __future__ import annotations

import importlib
import itertools

import pytest
from conftest import World, result_sessions, seed_local_model

ALPHA = {
    "a_ws": "We fixed the flaky websocket by adding exponential backoff with jitter to the reconnect loop.",
    "a_db": "The Postgres migration adds the column first, then backfills rows, then switches reads.",
    "a_css": "Dark mode colours now come from CSS custom properties defined on the root element.",
    "a_ci": "The CI pipeline caches pip wheels between jobs to cut build minutes in half.",
    "a_auth": "Login tokens expire after fifteen minutes and are refreshed silently by the client.",
}
BETA_TEXT = "beta secret: websocket backoff with jitter in the beta service"


def plugin(name: str):
    """A module of the plugin as Hermes' loader imported it (imported now if no search needed it yet)."""
    return importlib.import_module(f"hermes_plugins.project_history_recall.{name}")


@pytest.fixture
def sem(world: World):
    alpha, beta = world.repo("alpha"), world.repo("beta")
    for sid, text in ALPHA.items():
        world.session(sid, alpha, messages=[("assistant", text)])
    world.session("b_ws", beta, messages=[("assistant", BETA_TEXT)])
    world.session("b_cur", beta, style="cli", messages=[("user", "hi")])
    world.session("cur", alpha, style="cli", messages=[("user", "what did we decide?")])
    world.paths = {"alpha": alpha, "beta": beta}
    yield world
    plugin("vector_index").reset_indexes()


@pytest.fixture
def model_copy(sem: World, local_model) -> None:
    """The local model's ready-parsed copy in ``sem``'s data folder, as the profile's first load leaves it: the
    local model loads from it (what that first load does is tested in test_model_cache.py and test_warm_up.py)."""
    seed_local_model(sem, local_model)


def sent_texts(server) -> list[str]:
    return [text for request in server.requests for text in request["body"]["input"]]


def consent(world: World, sid: str = "cur", **args):
    answer = world.call("project_history_semantic_consent", {"decision": "allow", **args}, sid)
    assert answer["success"] is True, answer
    return answer


def test_nothing_is_embedded_or_sent_before_consent(sem, fake):
    server = fake()
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    for mode in ("hybrid", "semantic", "keyword"):
        answer = sem.search("cur", "websocket backoff", mode=mode)
        assert answer["semantic_status"] == "consent_required"
        assert result_sessions(answer) == ["a_ws"], "keyword results stand in"
        assert "project_history_semantic_consent" in answer["semantic_note"]
    assert server.requests == []
    assert not (sem.home / "plugins" / "project-history-recall" / "data" / "embeddings.db").exists()


def test_after_consent_only_the_consented_project_is_embedded(sem, fake):
    server = fake()
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    record = consent(sem)["consent"]
    assert record["projects"] == [f"auto:{sem.paths['alpha']}"]
    assert {"profile", "projects", "provider", "endpoint", "model", "confirmed_at", "scope"} <= set(record)
    answer = sem.search("cur", "websocket backoff")
    assert answer["semantic_status"] == "ready", answer
    texts = sent_texts(server)
    assert set(ALPHA.values()) <= set(texts)
    assert BETA_TEXT not in texts and "hi" not in texts and "what did we decide?" not in texts
    assert {r["score_source"] for r in answer["results"]} <= {"keyword", "semantic", "both"}
    assert answer["results"][0]["session_id"] == "a_ws"
    # From beta (not consented): consent_required again, and nothing of beta is sent.
    before = len(server.requests)
    assert sem.search("b_cur", "websocket")["semantic_status"] == "consent_required"
    assert len(server.requests) == before


def test_a_new_model_or_endpoint_needs_consent_again(sem, fake):
    server = fake()
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(sem)
    assert sem.search("cur", "websocket")["semantic_status"] == "ready"
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m2")
    assert sem.search("cur", "websocket")["semantic_status"] == "consent_required"
    other = fake()
    sem.configure_embedding(provider="openai", base_url=other.base_url, model="m")
    assert sem.search("cur", "websocket")["semantic_status"] == "consent_required"
    assert other.requests == []


def test_consent_for_all_projects(sem, fake):
    server = fake()
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(sem, projects="all")
    assert sem.search("b_cur", "websocket")["semantic_status"] == "ready"
    assert BETA_TEXT in sent_texts(server)


def test_declined_or_turned_off_is_disabled(sem, fake):
    server = fake()
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    assert sem.call("project_history_semantic_consent", {"decision": "decline"}, "cur")["success"]
    assert sem.search("cur", "websocket")["semantic_status"] == "disabled"
    sem.configure_embedding(provider="none")
    assert sem.search("cur", "websocket")["semantic_status"] == "disabled"
    assert server.requests == []


def test_consent_that_cannot_be_given_is_a_clear_failure_and_records_nothing(sem, fake):
    """Consent asked where there is nothing to consent to: the provider switched off in config.yaml, a conversation
    of no project (Home), a session state.db does not hold. Each is a failure that says why; no consent is written."""
    server = fake()
    sem.session("home_chat", None, source="telegram", messages=[("user", "hi")])
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    home = sem.call("project_history_semantic_consent", {"decision": "allow"}, "home_chat")
    assert home["success"] is False and "no project (Home)" in home["error"], home
    unknown = sem.call("project_history_semantic_consent", {"decision": "allow"}, "no-such-session")
    assert unknown["success"] is False and unknown["code"] == "session_not_found", unknown
    sem.configure_embedding(provider="none")
    off = sem.call("project_history_semantic_consent", {"decision": "allow"}, "cur")
    assert off["success"] is False and "embedding.provider: none" in off["error"], off
    assert not (sem.home / "plugins" / "project-history-recall" / "data" / "consent.json").exists()
    assert server.requests == []


@pytest.mark.parametrize(("value", "status", "said"), [
    *[(off, "disabled", "embedding.enabled: false") for off in (False, "false", "off", "no")],
    # a list or mapping once read as the default (on): with consent given, ``enabled: [false]`` embedded and sent
    *[(odd, "unavailable", "neither true nor false") for odd in (["false"], {"value": False}, "flase")],
])
def test_enabled_off_or_unreadable_keeps_semantic_off_even_after_consent(sem, fake, value, status, said):
    server = fake()
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(sem)
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m", enabled=value)
    answer = sem.search("cur", "websocket backoff")
    assert answer["semantic_status"] == status and said in answer["semantic_note"], answer
    assert result_sessions(answer) == ["a_ws"], "keyword results stand"
    assert server.requests == []


def test_a_keyword_search_after_consent_creates_no_index(sem, fake):
    """README: only a hybrid or semantic search writes; a keyword one after consent says how far indexing is."""
    server = fake()
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(sem)
    data = sem.home / "plugins" / "project-history-recall" / "data"
    answer = sem.search("cur", "websocket backoff", mode="keyword")
    assert sorted(p.name for p in data.iterdir()) == ["consent.json"], "nothing created"
    assert answer["semantic_status"] == "indexing" and "Nothing is indexed yet" in answer["semantic_note"], answer
    assert result_sessions(answer) == ["a_ws"]
    assert sem.search("cur", "websocket backoff")["semantic_status"] == "ready"
    assert sem.search("cur", "websocket backoff", mode="keyword")["semantic_status"] == "ready"


def test_a_keyword_search_with_no_index_says_what_stops_one_as_a_hybrid_search_does(sem, fake):
    """No embeddings.db yet, and something in its place a search may not use (a link, never followed: here one
    to a disk not mounted): a keyword search's status is the hybrid one's (unavailable, and what to do), not
    "Nothing is indexed yet: a hybrid or semantic search indexes the project", which none would."""
    import os

    server = fake()
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(sem)
    path = sem.home / "plugins" / "project-history-recall" / "data" / "embeddings.db"
    os.symlink(sem.tmp / "unmounted" / "embeddings.db", path)
    for mode in ("keyword", "hybrid", "keyword"):
        answer = sem.search("cur", "websocket backoff", mode=mode)
        assert answer["semantic_status"] == "unavailable" and "symbolic link" in answer["semantic_note"], (mode, answer)
        assert result_sessions(answer) == ["a_ws"]
    assert server.requests == [] and os.path.islink(path) and not os.path.exists(path)


@pytest.mark.parametrize("value", [True, None])
def test_enabled_true_or_unset_still_needs_consent(sem, fake, value):
    server = fake()
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m", **({} if value is None else {"enabled": value}))
    assert sem.search("cur", "websocket backoff")["semantic_status"] == "consent_required"
    assert server.requests == []
    consent(sem)
    assert sem.search("cur", "websocket backoff")["semantic_status"] == "ready"


def test_endpoint_down_is_unavailable_and_keyword_stands(sem, fake):
    server = fake()
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(sem)
    server.close()
    answer = sem.search("cur", "websocket backoff")
    assert answer["semantic_status"] == "unavailable" and "unreachable" in answer["semantic_note"]
    assert result_sessions(answer) == ["a_ws"]


def test_indexing_partial_ready(sem, fake, monkeypatch):
    server = fake()
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(sem)
    semantic = plugin("vector_leg")
    monkeypatch.setattr(semantic, "INDEX_BUDGET_S", 0.0)
    answer = sem.search("cur", "websocket")
    assert answer["semantic_status"] == "indexing" and "0 of 5" in answer["semantic_note"]
    assert result_sessions(answer) == ["a_ws"]
    monkeypatch.setattr(semantic, "INDEX_BUDGET_S", 5.0)
    vector_index = plugin("vector_index")
    real = vector_index.VectorIndex.add
    with monkeypatch.context() as two:  # a search whose budget ends after two messages
        two.setattr(vector_index.VectorIndex, "add", lambda self, messages, **k: real(self, itertools.islice(messages, 2), **k))
        answer = sem.search("cur", "websocket")
    assert answer["semantic_status"] == "partial" and "2 of 5" in answer["semantic_note"]
    assert sem.search("cur", "websocket")["semantic_status"] == "ready"


def test_new_messages_are_picked_up_and_rewound_ones_drop_out(sem, fake):
    server = fake()
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(sem)
    sem.search("cur", "websocket")
    mid = sem.say("a_db", "user", "one more decision about the cache eviction policy")
    sem.search("cur", "websocket")
    assert "one more decision about the cache eviction policy" in sent_texts(server)
    sem.db.rewind_to_message("a_db", mid)
    answer = sem.search("cur", "cache eviction policy", mode="semantic", limit=10)
    assert mid not in [r["message_id"] for r in answer["results"]]


def test_a_move_never_re_embeds(sem, fake):
    """Vectors belong to messages, not projects: a session moved into another
    indexed project is found there by meaning, and only the query is sent."""
    server = fake(words=True, dims=64)
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    sem.project("beta-proj", [sem.paths["beta"]])
    consent(sem, projects="all")
    sem.search("cur", "websocket")
    sem.search("b_cur", "websocket")
    assert "a_db" not in result_sessions(sem.search("b_cur", "Postgres migration backfills", mode="semantic", limit=10))
    before = len(sent_texts(server))
    assert sem.move("a_db", "beta-proj")["success"]
    answer = sem.search("b_cur", "Postgres migration backfills", mode="semantic", limit=10)
    assert answer["semantic_status"] == "ready"
    assert result_sessions(answer)[0] == "a_db", "found in its new project by its old vector"
    assert sent_texts(server)[before:] == ["Postgres migration backfills"], "only the query was embedded"
    assert "a_db" not in result_sessions(sem.search("cur", "Postgres migration backfills", mode="semantic", limit=10))


def test_corrupt_index_is_rebuilt_and_reported(sem, fake):
    server = fake()
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(sem)
    sem.search("cur", "websocket")
    plugin("vector_index").reset_indexes()
    data = sem.home / "plugins" / "project-history-recall" / "data"
    (data / "embeddings.db").write_bytes(b"not sqlite" * 100)
    for suffix in ("-wal", "-shm"):
        (data / f"embeddings.db{suffix}").unlink(missing_ok=True)
    answer = sem.search("cur", "websocket backoff")
    assert answer["semantic_status"] == "ready" and "rebuilt" in answer.get("semantic_note", "")
    assert result_sessions(answer)[0] == "a_ws"


def test_a_damaged_vector_is_dropped_embedded_again_and_reported(sem, fake):
    """A vector of the wrong size never healed (only deleting the file did): the next
    semantic search drops it, embeds its message again, and says so once.

    The vector files beside embeddings.db are a copy of its vectors: a row damaged
    after it was copied keeps answering from the copy, and the damage shows when the
    files are built again (here: deleted, as a user clearing space would).
    """
    import sqlite3

    server = fake()
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(sem)
    assert sem.search("cur", "websocket")["semantic_status"] == "ready"
    plugin("vector_index").reset_indexes()
    path = sem.home / "plugins" / "project-history-recall" / "data" / "embeddings.db"
    with sqlite3.connect(path) as conn:
        mid = conn.execute("SELECT message_id FROM chunks WHERE id = (SELECT max(id) FROM chunks)").fetchone()[0]
        conn.execute("UPDATE chunks SET vector = x'00010203' WHERE id = (SELECT max(id) FROM chunks)")
    copied = sem.search("cur", "websocket backoff")
    assert copied["semantic_status"] == "ready" and "wrong size" not in copied.get("semantic_note", ""), copied
    assert result_sessions(copied)[0] == "a_ws"
    plugin("vector_index").reset_indexes()
    for kind in ("vec", "rows", "sessions", "head"):
        for copy in path.parent.glob(f"embeddings.db.*.{kind}"):
            copy.unlink()
    # Keyword mode reads no vector: it cannot see the damage yet.
    assert sem.search("cur", "websocket backoff", mode="keyword")["semantic_status"] == "ready"
    sent = len(sent_texts(server))
    answer = sem.search("cur", "websocket backoff")
    assert answer["success"] is True and answer["semantic_status"] == "ready", answer
    assert "wrong size" in answer["semantic_note"] and "embedded again" in answer["semantic_note"]
    assert result_sessions(answer)[0] == "a_ws", "keyword results stand"
    assert len(sent_texts(server)) == sent + 2, sent_texts(server)[sent:]
    with sqlite3.connect(path) as conn:
        sizes = {n for (n,) in conn.execute("SELECT length(vector) FROM chunks")}
        assert sizes == {8 * 4}, "no vector of the wrong size is left in the file"
        assert conn.execute("SELECT count(*) FROM chunks WHERE message_id = ?", (mid,)).fetchone()[0] == 1
    again = sem.search("cur", "websocket backoff")
    assert again["semantic_status"] == "ready" and "wrong size" not in again.get("semantic_note", "")
    assert sem.search("cur", "websocket backoff", mode="keyword")["semantic_status"] == "ready"


def test_real_local_model_paraphrase_and_cross_lingual(sem, model_copy):
    """The shipped multilingual model finds meaning, not words."""
    sem.configure_embedding(provider="local")
    consent(sem)
    paraphrase = "how did we stop the unstable socket connection from dropping all the time?"
    keyword_only = sem.search("cur", paraphrase, mode="keyword")
    assert "a_ws" not in result_sessions(keyword_only)[:1]
    answer = sem.search("cur", paraphrase, mode="semantic", limit=1)
    assert answer["semantic_status"] == "ready" and result_sessions(answer) == ["a_ws"]
    assert answer["results"][0]["score_source"] == "semantic"
    chinese = sem.search("cur", "网络连接不稳定，断线后怎么自动重连？", mode="semantic", limit=1)
    assert result_sessions(chinese) == ["a_ws"]
    hybrid = sem.search("cur", paraphrase, mode="hybrid", limit=3)
    assert result_sessions(hybrid)[0] == "a_ws"


def test_hybrid_lets_meaning_beat_a_one_word_keyword_match(sem, model_copy):
    """A session sharing one incidental word with the question is not keyword evidence in hybrid."""
    sem.session("a_notes", sem.paths["alpha"], messages=[("assistant", "The staging connection string now lives in the vault.")])
    sem.configure_embedding(provider="local")
    consent(sem)
    question = "how did we stop the unstable socket connection from dropping all the time?"
    assert result_sessions(sem.search("cur", question, mode="keyword", limit=1)) == ["a_notes"]
    hybrid = sem.search("cur", question, mode="hybrid", limit=3)
    assert hybrid["semantic_status"] == "ready"
    assert result_sessions(hybrid)[0] == "a_ws"
    # A question whose words the right session really contains stays a keyword win.
    exact = sem.search("cur", "Postgres migration backfills", mode="hybrid", limit=1)
    assert result_sessions(exact) == ["a_db"] and exact["results"][0]["score_source"] == "both"


def test_index_command_and_slash_command(sem, fake, capsys):
    server = fake()
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    from hermes_cli.plugins import get_plugin_manager

    commands = get_plugin_manager()._plugin_commands
    assert "history-index" in commands
    handler = commands["history-index"]["handler"]
    assert "consent" in handler("")  # nothing consented yet: nothing sent
    assert server.requests == []
    consent(sem)
    sem.say("a_ws", "user", "and one more message")
    from project_history_recall.__main__ import main

    assert main(["--hermes-home", str(sem.home), "index", "--json"]) == 0
    out = capsys.readouterr()
    report = __import__("json").loads(out.out)
    assert report["semantic_status"] == "ready" and report["remaining"] == 0 and report["total"] == 7
    assert "7/7 messages" in out.err
    line = handler("")
    assert "7 of 7 messages indexed" in line and "ready" in line


def test_a_session_moved_in_gets_indexed(sem, fake):
    """After the scope was complete, a session moved into the project is noticed and embedded."""
    server = fake()
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(sem)
    assert sem.search("cur", "websocket")["semantic_status"] == "ready"
    assert BETA_TEXT not in sent_texts(server)
    # The desktop moves an old beta session into alpha (same project key, new member).
    sem.db.update_session_cwd("b_ws", str(sem.paths["alpha"]), "main", str(sem.paths["alpha"]))
    plugin("workspace").membership.invalidate()
    assert sem.search("cur", "websocket")["semantic_status"] == "ready"
    assert BETA_TEXT in sent_texts(server)


def test_index_command_drops_vectors_of_deleted_sessions(sem, fake):
    server = fake()
    sem.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(sem)
    semantic = plugin("indexing")
    assert semantic.index_projects(home=sem.home)["dropped"] == 0
    db_path = sem.home / "plugins" / "project-history-recall" / "data" / "embeddings.db"
    import sqlite3

    def indexed_sessions() -> set[str]:
        with sqlite3.connect(db_path) as conn:
            return {r[0] for r in conn.execute("SELECT DISTINCT session_id FROM chunks")}

    assert "a_css" in indexed_sessions()
    assert sem.db.delete_session("a_css")
    report = semantic.index_projects(home=sem.home)
    assert report["success"] and report["dropped"] == 1 and report["semantic_status"] == "ready"
    assert "a_css" not in indexed_sessions() and "a_db" in indexed_sessions()
    assert semantic.index_projects(home=sem.home)["dropped"] == 0


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_one_session_with_hundreds_of_similar_messages_does_not_hide_the_others(world: World, fake, mode):
    """Bounds are per session in the vector leg too: 450 near-identical messages in one session, 20 other sessions."""
    server = fake(dims=64, words=True)
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    repo = world.repo("app")
    world.session("loud", repo, style="cli")
    for i in range(450):
        world.say("loud", "assistant" if i % 2 else "user", f"websocket reconnect {i}")  # closer to the query
    for i in range(20):
        world.session(f"q{i:02d}", repo, messages=[("user", f"the websocket reconnect idea number {i}")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    consent(world)
    plugin("vector_leg").INDEX_BUDGET_S = 60.0
    try:
        answers = [world.search("cur", "websocket reconnect", mode=mode, limit=10)]
        assert answers[0]["semantic_status"] == "ready", answers[0]
        while answers[-1].get("next_cursor"):
            answers.append(world.search("cur", "websocket reconnect", mode=mode, limit=10, cursor=answers[-1]["next_cursor"]))
    finally:
        plugin("vector_leg").INDEX_BUDGET_S = 1.5
        plugin("vector_index").reset_indexes()
    first = result_sessions(answers[0])
    assert len(first) == 10 == len(set(first)), "a page holds limit distinct sessions"
    seen = [sid for a in answers for sid in result_sessions(a)]
    assert len(seen) == len(set(seen)) == 21, "the cursor reaches every session once"


def blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_the_vector_leg_runs_beside_the_keyword_leg_and_answers_as_in_one_thread(sem, model_copy, monkeypatch):
    """Hybrid and semantic searches run the vector leg in a thread of their own; the answers are the ones a
    search in one thread gives (a process out of threads runs it so), and the process's BLAS threads are
    left as they were (the plugin's products use none)."""
    import threading

    sem.configure_embedding(provider="local")
    consent(sem)
    before = blas_threads()
    seen: list[str] = []
    semantic = plugin("vector_leg")
    leg = semantic.semantic_leg

    def watched(*args, **kwargs):
        seen.append(threading.current_thread().name)
        return leg(*args, **kwargs)

    monkeypatch.setattr(semantic, "semantic_leg", watched)
    questions = [("how did we stop the unstable socket connection from dropping?", "hybrid"),
                 ("Postgres migration backfills", "hybrid"), ("dark mode colours", "semantic")]
    apart = [sem.search("cur", q, mode=mode, limit=5) for q, mode in questions]
    assert seen == ["project-history-recall-vectors"] * 3
    assert blas_threads() == before

    def no_threads(self):
        raise RuntimeError("can't start new thread")

    seen.clear()
    monkeypatch.setattr(threading.Thread, "start", no_threads)
    alone = [sem.search("cur", q, mode=mode, limit=5) for q, mode in questions]
    assert seen == [threading.current_thread().name] * 3, "run in the caller's thread"
    for a, b in zip(apart, alone, strict=True):
        assert a["semantic_status"] == b["semantic_status"] == "ready"
        assert [(r["session_id"], r["message_id"], r["score_source"]) for r in a["results"]] == \
            [(r["session_id"], r["message_id"], r["score_source"]) for r in b["results"]]
    assert blas_threads() == before


def test_a_vector_leg_that_cannot_open_the_session_database_leaves_keyword_results_standing(sem, model_copy, monkeypatch):
    """The vector leg's own state.db connection fails (as with too many open files): it is an unavailable leg.
    (Out of file descriptors cannot be brought about for one thread's open alone: the open is made to fail.)"""
    import threading

    sem.configure_embedding(provider="local")
    consent(sem)
    assert sem.search("cur", "websocket backoff")["semantic_status"] == "ready"
    store = plugin("store")
    search = plugin("search")
    opened = store.open_state_db

    def fails_beside(home):
        if threading.current_thread().name == "project-history-recall-vectors":
            raise plugin("errors").StateDBUnreadable("session database unreadable: unable to open database file", path="x")
        return opened(home)

    monkeypatch.setattr(search.store, "open_state_db", fails_beside)
    answer = sem.search("cur", "websocket backoff")
    assert answer["success"] is True and result_sessions(answer) == ["a_ws"]
    assert answer["semantic_status"] == "unavailable" and "retries on a later search" in answer["semantic_note"]


def test_a_vector_leg_whose_last_state_db_read_fails_leaves_keyword_results_standing(sem, model_copy, monkeypatch):
    """After the vector search, the leg reads state.db once more (which hits are earlier recalls): that read
    failing (as when another process holds the database locked) is an unavailable leg, not a failed search. It
    escaped the leg's handling, and the keyword answer was lost. (A lock that lands on that one read cannot be
    timed from outside: the read is made to fail in the leg's thread.)"""
    import sqlite3
    import threading

    sem.configure_embedding(provider="local")
    consent(sem)
    assert sem.search("cur", "websocket backoff")["semantic_status"] == "ready"
    store = plugin("store")
    earlier = store.earlier_recalls

    def locked_beside(conn, ids):
        if threading.current_thread().name == "project-history-recall-vectors":
            raise sqlite3.OperationalError("database is locked")
        return earlier(conn, ids)

    monkeypatch.setattr(store, "earlier_recalls", locked_beside)
    answer = sem.search("cur", "websocket backoff")
    assert answer["success"] is True and result_sessions(answer) == ["a_ws"]
    assert answer["semantic_status"] == "unavailable" and "database is locked" in answer["semantic_note"]


def test_the_first_search_loads_the_model_while_it_checks_the_index(sem, model_copy, monkeypatch):
    """The local model loads in a thread of its own while the first search counts what is indexed;
    the query's embedding waits for it, once."""
    import threading

    sem.configure_embedding(provider="local")
    consent(sem)
    plugin("vector_index").reset_indexes()  # a process that has not loaded the model yet
    embeddings = plugin("embeddings")
    loads: list[str] = []
    load = embeddings.LocalProvider.load

    def watched(self):
        loads.append(threading.current_thread().name)
        return load(self)

    monkeypatch.setattr(embeddings.LocalProvider, "load", watched)
    answer = sem.search("cur", "how did we stop the unstable socket connection from dropping?", mode="hybrid")
    assert answer["semantic_status"] == "ready" and result_sessions(answer)[0] == "a_ws"
    assert loads == ["project-history-recall-model"]
    assert sem.search("cur", "dark mode colours", mode="semantic")["semantic_status"] == "ready"
    assert loads == ["project-history-recall-model"], "loaded once"
