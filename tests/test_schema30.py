"""Hermes 0.21 as its users run it: schema-30 state.db files (fresh, migrated but not optimised, half-way through
the chunked rebuild), each declaring a CJK index whose tokenizer this process cannot load, searched through the
real plugin loader of the 0.19 host. Each test is one of the seven behaviours, on all three files."""

from __future__ import annotations

import importlib
import sqlite3
from typing import Any

import pytest
from conftest import World, result_sessions
from schema30 import UPGRADED, VARIANTS, Schema30
from test_failures import _table_leaves


def plugin(name: str) -> Any:
    return importlib.import_module(f"hermes_plugins.project_history_recall.{name}")


@pytest.fixture(params=VARIANTS)
def s30(request, world: World) -> Any:
    """Repo alpha's sessions in a schema-30 state.db of each variant; ``cur`` asks. On ``backfill``, everything
    written before ``start_rebuild`` waits for the rebuild (``s30.db.backfill``)."""
    db = Schema30(world.home / "state.db", request.param, cjk=True)
    alpha = world.repo("alpha")
    world.s30, world.alpha = db, alpha

    def session(sid: str, **kw: Any) -> str:
        kw.setdefault("cwd", alpha)
        kw.setdefault("git_repo_root", alpha)
        return db.session(sid, **kw)

    world.s30_session = session
    return world


def finish(world: World) -> None:
    """Everything is written: on ``backfill``, the rebuild starts and is done (the behaviours then hold whatever
    state the index is in; the rebuild's own test leaves it half-way)."""
    if world.s30.variant == "backfill":
        world.s30.start_rebuild()
        with sqlite3.connect(world.home / "state.db") as conn:
            (top,) = conn.execute("SELECT max(id) FROM messages").fetchone()
        world.s30.backfill(top)


def test_hidden_scaffolding_and_model_only_rows_are_never_shown(s30: World, fake):
    """As Hermes' display SQL reads them: ``COALESCE(json_extract(display_metadata, '$.model_only'), 0) = 0`` is
    shown."""
    s30.s30_session("plain", messages=[("user", "the zebra migration plan is in the doc")])
    s30.s30_session("scaffold", messages=[("user", "what now?")])
    s30.s30.say("scaffold", "assistant", "[CONTEXT COMPACTION] earlier: quokka rollout and pelican notes", display_kind="hidden")
    s30.s30.say("scaffold", "user", "merged quokka question", display_metadata={"model_only": True, "channel_state": "x"})
    # Hermes hides a row whose model_only is anything but absent, null, false or 0: the text "false" too
    s30.s30.say("scaffold", "user", "a quokka turn for the model", display_metadata={"model_only": "false"})
    s30.s30.say("scaffold", "assistant", "the pelican answer shown to the person", display_metadata={"model_only": False})
    s30.s30_session("cur", messages=[("user", "hi")])
    finish(s30)
    assert result_sessions(s30.search("cur", "quokka", mode="keyword")) == []
    assert result_sessions(s30.search("cur", "pelican", mode="keyword")) == ["scaffold"]
    read = s30.call("project_history_read", {"session_id": "scaffold"}, "cur")
    assert [m["text"] for m in read["messages"]] == ["what now?", "the pelican answer shown to the person"]
    recent = s30.call("project_history_recent", {}, "cur")
    preview = {s["session_id"]: s for s in recent["sessions"]}["scaffold"]
    assert "quokka" not in str(preview) and "COMPACTION" not in str(preview)
    server = fake()
    s30.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    assert s30.call("project_history_semantic_consent", {"decision": "allow"}, "cur")["success"]
    try:
        answer = s30.search("cur", "quokka rollout")
        assert answer["semantic_status"] == "ready", answer
        sent = " ".join(t for r in server.requests for t in r["body"]["input"])
        assert "pelican answer" in sent and "quokka" not in sent.replace("quokka rollout", "", 1), sent
        assert "scaffold" not in result_sessions(answer) or answer["results"][0]["snippet"] != "", answer
    finally:
        plugin("vector_index").reset_indexes()


def test_hermes_compressed_past_summaries_and_editor_sessions_on_schema_30(s30: World):
    """On every schema-30 state: what a compaction in place archived of the asking session is searched from it, its
    live rows never; a compaction summary is no history, shown or not; an editor's (ACP) session, its folder in
    ``model_config``, is the project's, and so is a CLI session of no parent whose prompt, kept by hash, names its
    folder; a compression continuation and its parent are one result."""
    s30.s30_session("cur", messages=[("user", "which port does the quokka api use?")])
    decided = s30.s30.say("cur", "assistant", "quokka api: port 8443, TLS only")
    s30.s30.say("cur", "user", "thanks")
    s30.s30.compact("cur", "[CONTEXT COMPACTION \u2014 REFERENCE ONLY] quokka port settled", keep=1)  # "thanks" carried
    s30.s30.say("cur", "user", "quokka api port again, what did we say?")
    s30.s30.session("acp1", None, source="acp", model_config={"cwd": str(s30.alpha)},
                    messages=[("user", "in zed: the quokka api gets a health check")])
    s30.s30_session("p1", messages=[("user", "quokka api port planning")])
    with sqlite3.connect(s30.home / "state.db") as conn:
        conn.execute("UPDATE sessions SET end_reason = 'compression' WHERE id = 'p1'")
    s30.s30.session("p2", None, parent="p1", messages=[("assistant", "quokka api port: continued after compression")])
    s30.s30.session("orphan", None, messages=[("user", "quokka api port, the first session deleted")])
    with sqlite3.connect(s30.home / "state.db") as conn:  # 0.21 keeps a prompt once, by hash
        conn.execute("INSERT INTO system_prompts (hash, prompt) VALUES ('h1', ?)",
                     (f"You are Hermes.\nUser home directory: /home/u\nCurrent working directory: {s30.alpha}\n",))
        conn.execute("UPDATE sessions SET system_prompt_hash = 'h1' WHERE id = 'orphan'")
    finish(s30)
    answer = s30.search("cur", "quokka api port", mode="keyword", limit=10)
    hits = {r["session_id"]: r["message_id"] for r in answer["results"]}
    assert hits.get("cur") == decided and "acp1" in hits and "orphan" in hits, answer
    assert len({"p1", "p2"} & set(hits)) == 1, answer  # one conversation, one result
    assert result_sessions(s30.search("cur", "settled", mode="keyword", limit=10)) == []  # the summary
    assert "cur" not in result_sessions(s30.search("cur", "what did we say", mode="keyword", limit=10))  # live


def test_kanban_workers_are_not_history_and_hidden_sessions_are_not_listed(s30: World):
    s30.s30_session("worker", source="kanban", messages=[("user", "walrus ticket 7 done")])
    s30.s30_session("botchat", hidden=True, messages=[("user", "walrus chat in the bot")])
    s30.s30_session("cur", messages=[("user", "hi")])
    finish(s30)
    assert result_sessions(s30.search("cur", "walrus", mode="keyword")) == ["botchat"]
    listed = [s["session_id"] for s in s30.call("project_history_recent", {}, "cur")["sessions"]]
    assert listed == [], listed


@pytest.mark.parametrize("s30", [*VARIANTS, UPGRADED], indirect=True)
def test_tool_output_past_the_index_prefix_is_found_with_role_tool(s30: World):
    s30.s30_session("build", messages=[("user", "run the build")])
    s30.s30.say("build", "tool", "compiling module\n" * 700 + "error: narwhal linker failed", tool_name="terminal")
    s30.s30_session("cur", messages=[("user", "hi")])
    finish(s30)
    assert len("compiling module\n" * 700) > 8192
    answer = s30.search("cur", "narwhal", mode="keyword", role="tool")
    assert result_sessions(answer) == ["build"], answer
    assert ">>>narwhal<<<" in answer["results"][0]["snippet"]


def test_messages_not_indexed_yet_during_a_rebuild_are_found_and_said(s30: World):
    s30.s30_session("early", messages=[("user", "the okapi cache was dropped")])
    s30.s30_session("late", messages=[("user", "the okapi cache is back, with a TTL")])
    s30.s30_session("cur", messages=[("user", "hi")])
    if s30.s30.variant == "backfill":
        s30.s30.start_rebuild()
        s30.s30.backfill(2)  # 'early' is indexed again, 'late' waits
        s30.s30_session("newer", messages=[("user", "okapi cache again: written during the rebuild")])
    answer = s30.search("cur", "okapi cache", mode="keyword", limit=5)
    expected = {"early", "late"} | ({"newer"} if s30.s30.variant == "backfill" else set())
    assert set(result_sessions(answer)) == expected, answer
    if s30.s30.variant == "backfill":
        assert "rebuilding its full-text index" in answer["keyword_note"] and "optimize-storage" in answer["keyword_note"]
    else:
        assert "keyword_note" not in answer


def test_ranking_counts_what_was_said_not_tool_call_json(s30: World):
    s30.s30_session("ran", messages=[("user", "check it")])
    s30.s30.say("ran", "assistant", "", tool_calls=[{"id": "c1", "type": "function", "function": {
        "name": "terminal", "arguments": '{"command": "grep -rn pangolin config"}'}}])
    s30.s30_session("said", messages=[("user", "we settled the pangolin config format: YAML with a schema, every key "
                                               "documented, defaults in one place, and the loader rejects unknown keys")])
    s30.s30_session("cur", messages=[("user", "hi")])
    finish(s30)
    assert result_sessions(s30.search("cur", "pangolin config", mode="keyword", limit=5)) == ["said", "ran"]


def test_a_damaged_index_is_searched_by_substring_and_the_advice_is_optimize_storage(s30: World):
    s30.s30_session("old", messages=[("user", "websocket backoff with jitter")])
    s30.s30_session("filler", messages=[(
        "user", f"filler {i} about websocket backoff and 数据库迁移 details " * 3) for i in range(300)])
    s30.s30_session("cur", messages=[("user", "hi")])
    finish(s30)
    path = s30.home / "state.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'messages_fts_data'").fetchone()[0]
    conn.close()
    leaves = _table_leaves(path.read_bytes(), page_size, root)
    assert len(leaves) > 1
    with open(path, "r+b") as f:
        for leaf in leaves[1:]:
            f.seek((leaf - 1) * page_size)
            f.write((b"\xff\x00damaged" * page_size)[:page_size])
    answer = s30.search("cur", "jitter", mode="keyword")
    assert result_sessions(answer) == ["old"] and answer["strategy"] == "like-damaged", answer
    assert "hermes sessions optimize-storage" in answer["keyword_note"] and "'rebuild'" not in answer["keyword_note"]


def test_an_index_hermes_marked_stale_is_searched_by_substring(s30: World):
    s30.s30_session("old", messages=[("user", "the marmot service moved to port 8443")])
    s30.s30_session("cur", messages=[("user", "hi")])
    finish(s30)
    with sqlite3.connect(s30.home / "state.db") as conn:
        conn.execute("INSERT INTO state_meta (key, value) VALUES ('fts_stale', '1')")
    answer = s30.search("cur", "marmot port", mode="keyword")
    assert result_sessions(answer) == ["old"] and answer["strategy"] == "like-stale", answer
    assert "marked its full-text index" in answer["keyword_note"]


def test_cjk_words_and_everything_else_work_beside_a_cjk_index_this_process_cannot_load(s30: World):
    s30.s30_session("zh", messages=[("user", "数据库迁移方案：先加列，再回填"), ("assistant", "好的，按这个做")])
    s30.s30_session("cur", messages=[("user", "hi")])
    finish(s30)
    # SQLite 3.40 says "no such tokenizer", 3.53 "vtable constructor failed"
    with pytest.raises(sqlite3.OperationalError, match="tokenizer|vtable constructor failed"):
        sqlite3.connect(s30.home / "state.db").execute("SELECT * FROM messages_fts_cjk WHERE messages_fts_cjk MATCH 'x'")
    assert result_sessions(s30.search("cur", "数据库迁移", mode="keyword")) == ["zh"]
    assert result_sessions(s30.search("cur", "回填", mode="keyword")) == ["zh"]
    read = s30.call("project_history_read", {"session_id": "zh"}, "cur")
    assert read["success"] and len(read["messages"]) == 2


def test_display_metadata_that_is_not_json_breaks_nothing(s30: World):
    """A row whose ``display_metadata`` is text that is not JSON but names ``model_only`` (a damaged row, another
    writer): it is shown as any row, and search, read and recent all answer. ``json_extract`` of it would fail
    each of them with "malformed JSON" wherever SQLite evaluated it beside ``json_valid``."""
    s30.s30_session("odd", messages=[("user", "the walrus plan")])
    mid = s30.s30.say("odd", "assistant", "walrus answer kept", display_metadata={"model_only": True})
    s30.s30_session("cur", messages=[("user", "hi")])
    finish(s30)
    with sqlite3.connect(s30.home / "state.db") as db:
        db.execute("UPDATE messages SET display_metadata = ? WHERE id = ?", ("model_only: {not json", mid))
    assert result_sessions(s30.search("cur", "walrus", mode="keyword")) == ["odd"]
    read = s30.call("project_history_read", {"session_id": "odd"}, "cur")
    assert [m["text"] for m in read["messages"]] == ["the walrus plan", "walrus answer kept"], read
    recent = s30.call("project_history_recent", {}, "cur")
    assert {s["session_id"]: s for s in recent["sessions"]}["odd"]["last_assistant"] == "walrus answer kept", recent


@pytest.mark.parametrize("schema", [30, 31])
def test_a_session_the_idle_sweep_archived_is_still_history_one_archived_on_purpose_is_not(world: World, schema: int):
    """Schema 31's idle sweep archives every chat idle for 3 days and marks it ``auto_archived``; a person's
    archive clears the mark. Schema 30 cannot tell the two apart: both stay out, as before."""
    db = Schema30(world.home / "state.db", "fresh", schema=schema)
    alpha = world.repo("alpha")
    for sid, text in (("idle", "we chose the heron queue for retries"), ("dropped", "heron idea, scrapped"),
                      ("cur", "hi")):
        db.session(sid, cwd=alpha, git_repo_root=alpha, messages=[("user", text)])
    db.archive("idle", by_sweep=True)
    db.archive("dropped")
    if schema == 31:  # every message got its stable id from Hermes' trigger
        with sqlite3.connect(world.home / "state.db") as conn:
            assert conn.execute("SELECT count(*) FROM messages WHERE message_uid IS NULL").fetchone() == (0,)
    kept = ["idle"] if schema == 31 else []
    assert result_sessions(world.search("cur", "heron", mode="keyword")) == kept
    recent = world.call("project_history_recent", {}, "cur")
    assert [s["session_id"] for s in recent["sessions"]] == kept
    if kept:
        read = world.call("project_history_read", {"session_id": "idle"}, "cur")
        assert [m["text"] for m in read["messages"]] == ["we chose the heron queue for retries"]


def test_words_run_into_cjk_are_found_once_a_rebuild_has_indexed_them(world: World):
    """0.21's ``optimize-storage`` empties the index and fills it again in chunks: a search while the CJK rows wait
    found no CJK in the trigram index, and that no, kept up to the newest message, hid the words run into CJK text
    from every later search once the rebuild had indexed it (the substring top-up of the rows in between stops)."""
    db = Schema30(world.home / "state.db", "backfill")
    alpha = world.repo("alpha")
    db.session("zh", alpha, git_repo_root=alpha, messages=[("user", "部署用redis缓存会话")])
    db.session("cur", alpha, git_repo_root=alpha, messages=[("user", "hi")])
    db.start_rebuild()
    assert "zh" in result_sessions(world.search("cur", "redis", mode="keyword"))  # read by substring meanwhile
    with sqlite3.connect(world.home / "state.db") as conn:
        (top,) = conn.execute("SELECT max(id) FROM messages").fetchone()
    db.backfill(top)
    with sqlite3.connect(world.home / "state.db") as conn:
        conn.execute("DELETE FROM state_meta WHERE key IN ('fts_rebuild_high_water', 'fts_rebuild_progress')")
    db.say("cur", "user", "and redis?")
    assert "zh" in result_sessions(world.search("cur", "redis", mode="keyword")), "a word run into CJK after a rebuild"


def test_user_rows_hermes_writes_itself_are_tool_output(s30: World):
    """Hermes 0.21 types the user rows it writes itself by ``display_kind`` (a background process's completion, an
    async delegation's result, a model switch...), whatever its text; ``steer`` is the person's own words sent
    mid-turn, and a kind not known is taken for the person's. ``role: user`` finds the person's, ``role: tool``
    Hermes' own, and a read shows them so."""
    s30.s30_session("work")
    asked = s30.s30.say("work", "user", "run the wombat suite")  # no kind: the person's
    done = s30.s30.say("work", "user", "pytest finished: 42 wombat tests passed", display_kind="process_complete")
    steer = s30.s30.say("work", "user", "also check the wombat cache", display_kind="steer")
    result = s30.s30.say("work", "user", "child result: the wombat cache is cold", display_kind="async_delegation_complete")
    spoken = s30.s30.say("work", "user", "and the wombat logs?", display_kind="voice")  # a kind not known: the person's
    s30.s30_session("cur", messages=[("user", "hi")])
    finish(s30)
    found = {role: {r["message_id"] for r in s30.search("cur", "wombat", mode="keyword", role=role, limit=10)["results"]}
             for role in ("user", "tool")}
    assert done not in found["user"] and result not in found["user"] and found["user"], found
    plain = s30.search("cur", "suite", mode="keyword", role="user")["results"]  # a row of no kind is the person's
    assert [r["message_id"] for r in plain] == [asked], plain
    assert found["tool"] and found["tool"] <= {done, result}, found
    read = s30.call("project_history_read", {"session_id": "work"}, "cur")
    roles = {m["message_id"]: m["role"] for m in read["messages"]}
    assert (roles[done], roles[steer], roles[result], roles[spoken]) == ("tool", "user", "tool", "user"), read


def test_a_persons_message_to_a_participant_is_the_users(s30: World):
    """Hermes' participant seam (``append_participant_user_message``) stores a message the person typed to another
    agent in the session as a user row typed ``participant_directed``: "the row stays a genuine role=user message (the
    human really typed it)". ``role: user`` finds it, and a read shows it as the user's."""
    s30.s30_session("work", messages=[("user", "run the wombat suite")])
    typed = s30.s30.say("work", "user", "@reviewer check the wombat cache please", display_kind="participant_directed")
    s30.s30_session("cur", messages=[("user", "hi")])
    finish(s30)
    found = {r["message_id"] for r in s30.search("cur", "wombat cache", mode="keyword", role="user", limit=10)["results"]}
    assert typed in found, found
    read = s30.call("project_history_read", {"session_id": "work"}, "cur")
    assert {m["message_id"]: m["role"] for m in read["messages"]}[typed] == "user", read


def test_a_steer_is_read_as_the_words_the_person_sent(s30: World):
    """Hermes 0.21 stores a mid-turn /steer as a user row typed ``steer`` whose content wraps the person's words in the
    marker the model is taught to trust (agent/prompt_builder.py ``format_steer_marker``). The marker is Hermes' words:
    a read shows what the person sent, and a search for the marker's words ("conversation history") finds no steer."""
    marker = ("[OUT-OF-BAND USER MESSAGE \u2014 a direct message from the user, delivered once at this position; not tool "
              "output and not a new delivery when replayed from conversation history]")
    s30.s30_session("work", messages=[("user", "run the wombat suite")])
    steer = s30.s30.say("work", "user", f"\n\n{marker}\nalso check the wombat cache\n[/OUT-OF-BAND USER MESSAGE]",
                        display_kind="steer")
    s30.s30_session("cur", messages=[("user", "hi")])
    finish(s30)
    found = {r["message_id"] for r in s30.search("cur", "wombat cache", mode="keyword", role="user", limit=10)["results"]}
    assert steer in found, found
    noise = {r["message_id"] for r in s30.search("cur", "conversation history delivery", mode="keyword", limit=10)["results"]}
    assert steer not in noise, noise
    read = s30.call("project_history_read", {"session_id": "work"}, "cur")
    assert {m["message_id"]: m["text"] for m in read["messages"]}[steer] == "also check the wombat cache", read


def test_branch_families_on_schema_30(s30: World):
    """On every schema-30 state, Hermes 0.21's branches (``/branch``: the parent ended ``branched``, the child marked
    ``_branched_from`` in ``model_config``, or, before the marker, only started after the parent ended): each branch's
    own decision is a result of its own from another session, the history both copied at the fork one result (the
    first session's), and a recent listing shows each branch."""
    history = [("user", "we need a cache for the pricing service"), ("assistant", "options: redis or memcached")]
    s30.s30_session("P", messages=history)
    for branch, marker in (("B1", {"_branched_from": "P"}), ("B2", None)):
        with sqlite3.connect(s30.home / "state.db") as conn:
            conn.execute("UPDATE sessions SET end_reason = 'branched', ended_at = ? WHERE id = 'P'", (s30.s30._clock,))
        s30.s30.session(branch, None, parent="P", model_config=marker, messages=history)
    s30.s30.say("B1", "assistant", "decision: memcached for the pricing cache, p99 latency 4ms")
    s30.s30.say("B2", "assistant", "decision: redis cluster for the pricing cache, persistence needed")
    s30.s30_session("cur", messages=[("user", "hi")])
    finish(s30)
    found = s30.search("cur", "pricing cache", mode="keyword", limit=5)
    assert sorted(result_sessions(found)) == ["B1", "B2", "P"], found  # the history once, each decision
    assert result_sessions(s30.search("cur", "options: redis or memcached", mode="keyword", limit=5)) == ["P"]
    recent = [s["session_id"] for s in s30.call("project_history_recent", {}, "cur")["sessions"]]
    assert {"B1", "B2"} <= set(recent), recent


def test_a_branch_goes_with_its_parent_another_process_moved_on_schema_30(s30: World):
    """``test_e2e_search``'s branch whose parent another Hermes window moves, on every schema-30 state: the branch
    (``_branched_from`` its parent, no folder of its own) sits in the parent's project, and when a 0.21 window moves
    the parent to beta (its ``update_session_cwd``: the folder, the git fields and their generation) while this
    process's census still files the branch under alpha, alpha's search, read and recent list leave it out at once."""
    s30.s30_session("old", messages=[("user", "pelican plan")])
    with sqlite3.connect(s30.home / "state.db") as conn:
        conn.execute("UPDATE sessions SET end_reason = 'branched', ended_at = ? WHERE id = 'old'", (s30.s30._clock,))
    s30.s30.session("kid", None, parent="old", model_config={"_branched_from": "old"},
                    messages=[("user", "pelican plan"), ("assistant", "pelican roost decided")])
    for i in range(70):  # push both out of the window of newest sessions every search reads again
        s30.s30.session(f"filler{i}", None, source="telegram")
    s30.s30_session("cur", messages=[("user", "hi")])
    finish(s30)
    assert "kid" in result_sessions(s30.search("cur", "pelican roost", mode="keyword"))
    beta = s30.repo("beta")
    with sqlite3.connect(s30.home / "state.db") as conn:
        conn.execute("UPDATE sessions SET cwd = ?, git_branch = 'main', git_repo_root = ?, "
                     "git_metadata_generation = git_metadata_generation + 1 WHERE id = 'old'", (str(beta), str(beta)))
    assert s30.search("cur", "pelican roost", mode="keyword")["results"] == []
    assert s30.call("project_history_read", {"session_id": "kid"}, "cur")["code"] == "not_in_project"
    assert "kid" not in [s["session_id"] for s in s30.call("project_history_recent", {}, "cur")["sessions"]]


def test_the_candidates_ranked_in_the_index_are_those_the_join_picks_on_schema_30(s30: World):
    """``fts.session_candidates``' two ways to a pick (the index ranks every match where the id filter is tight, else
    a join leaves other projects' matches out first) keep the same rows in the same order on each schema-30 file:
    hidden scaffolding, model-only rows and tool rows among the matches, and a session of another repo in turn."""
    fts, store, workspace = plugin("fts"), plugin("store"), plugin("workspace")
    beta = s30.repo("beta")
    for i in range(6):
        s30.s30_session(f"a{i}")
        s30.s30.session(f"b{i}", cwd=beta, git_repo_root=beta)
    for k in range(60):
        sid = f"{'ab'[k % 2]}{k % 6}"
        s30.s30.say(sid, ["user", "assistant", "tool"][k % 3], f"heron egret {k}" if k % 4 else "heron stork",
                    display_kind="hidden" if k % 7 == 0 else None,
                    display_metadata={"model_only": True} if k % 11 == 0 else None)
    s30.s30_session("cur", messages=[("user", "hi")])
    finish(s30)
    conn = store.connect_ro(s30.home / "state.db")
    try:
        scope = workspace.scope_for(conn, s30.home, "cur", None)[0]
        top = store.max_message_id(conn)
        loose = fts.Near(b"\x01" * (top + 1), top, 0)  # lets everything through, and is taken at its word
        for match in ("heron", "egret OR stork"):
            for limit, per_session in ((600, 3), (4, 1)):
                picked = [fts.session_candidates(conn, "words", match, scope, near=near, keyed={}, per_session=per_session,
                                                 limit=limit) for near in (None, loose)]
                assert picked[0] == picked[1] and picked[0], (match, limit)
    finally:
        conn.close()
