"""project_history_search end to end: real Hermes loader, dispatch, SessionDB, git.

The world: project P is explicit (a git repo ``pay`` and a plain folder
``pay-docs``); project Q is an auto repo ``quasar`` with a linked worktree;
plus Home sessions, an archived session, a delegate child, rewound messages,
tool output, a compression continuation without ``cwd``, and CLI sessions
that record only ``cwd``.
"""

from __future__ import annotations

import functools
import json
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import World, phr, result_sessions, shared_world

RESULT_KEYS = {"session_id", "link", "title", "message_id", "snippet", "score_source", "when"}


def _pq(world: World) -> World:
    """Projects P (explicit: repo pay and folder pay-docs) and Q (auto: repo quasar and its worktree), Home
    sessions, and the asking lineage cur_p -> cur_p2 in P (see the module docstring)."""
    w = world
    pay, quasar = w.repo("pay"), w.repo("quasar")
    (pay / "src").mkdir()
    docs = w.folder("pay-docs")
    wt = w.worktree(quasar, "quasar-wt-feat", "feat")
    plain = w.folder("plain")
    w.P = w.project("Payments", [pay, docs])
    w.paths = {"pay": pay, "docs": docs, "quasar": quasar, "wt": wt, "plain": plain}

    w.session("p_desk", pay, messages=[
        ("user", "How do we fix the websocket reconnect storm?"),
        ("assistant", "Use exponential backoff with jitter on the websocket client."),
        ("user", "另外，数据库迁移方案定了吗？"),
        ("assistant", "数据库迁移方案：先加列，再回填，最后切换读路径。"),
    ])
    w.session("p_docs", docs, style="cli", messages=[("user", "document the websocket protocol for payments")])
    w.session("p_cli_sub", pay / "src", style="cli", messages=[("assistant", "the websocket handler lives in src/ws.py")])
    w.session("p_long", pay, style="cli", messages=[("user", "long debugging session about ledgers")])
    w.continuation("p_long", "p_cont", messages=[("assistant", "continuing: websocket heartbeat every 30s")])
    w.session("p_tool", pay, messages=[("user", "run the integration tests")])
    w.say("p_tool", "tool", "FAILED test_ws.py::test_reconnect - ECONNRESET zorbulated websocket closed", tool_name="terminal")
    w.session("p_arch", pay, messages=[("user", "archived websocket idea")])
    w.db.set_session_archived("p_arch", True)
    w.delegate("p_desk", "p_deleg", messages=[("assistant", "delegate looked at websocket internals")])
    w.session("p_rewound", pay, messages=[("user", "unrelated ledger question")])
    rewound_id = w.say("p_rewound", "user", "websocket rewound draft")
    w.db.rewind_to_message("p_rewound", rewound_id)

    w.session("q_main", quasar, messages=[("user", "websocket in quasar: use a ring buffer")])
    w.session("q_wt", wt, messages=[("assistant", "feature branch websocket heartbeat")])
    w.session("q_cli_wt", wt, style="cli", messages=[("user", "websocket retry in the worktree")])

    w.session("home_gw", None, source="telegram", messages=[("user", "websocket from the gateway")])
    w.session("home_plain", plain, style="cli", messages=[("user", "websocket in a plain folder")])

    w.session("cur_p", pay, style="cli", messages=[("user", "what did we decide before?")])
    w.continuation("cur_p", "cur_p2", messages=[("user", "websocket current lineage")])
    w.say("cur_p", "assistant", "websocket in the current conversation")
    return w


@pytest.fixture
def pq(world: World):
    """:func:`_pq` of a world of its own (a test that adds to it)."""
    return _pq(world)


# :func:`_pq` shared by the tests that only read it (checked: they leave it unchanged).
_pq_module, shared_pq = shared_world(_pq, "shared_pq")


P_WEBSOCKET = {"p_desk", "p_docs", "p_cli_sub", "p_cont", "p_tool"}


def test_search_from_p_returns_only_p_sessions(shared_pq):
    answer = shared_pq.search("cur_p", "websocket", mode="keyword", limit=10)
    assert set(result_sessions(answer)) == P_WEBSOCKET
    assert answer["project"] == {"kind": "explicit", "id": shared_pq.P, "name": "Payments"}
    assert answer["mode"] == "keyword" and answer["semantic_status"] == "consent_required"


def test_the_conversation_s_live_context_is_left_out_and_its_compressed_past_searched(shared_pq):
    """cur_p ended at a compression and continues as cur_p2. From cur_p2, cur_p's messages left the live context
    (summarised into cur_p2): they are searched, as Hermes' own search does, so "what did we decide earlier in
    this conversation?" is answered after a compression. cur_p2 itself is never searched from either end, nor is
    anything from cur_p (the asking session is its own context, and its continuation carries it)."""
    assert set(result_sessions(shared_pq.search("cur_p2", "websocket", limit=10))) == P_WEBSOCKET | {"cur_p"}
    assert set(result_sessions(shared_pq.search("cur_p", "websocket", limit=10))) == P_WEBSOCKET


def test_a_reset_starts_a_conversation_of_its_own(pq):
    """Hermes 0.21 keeps a reset's predecessor as the parent of the session that /new (desktop, TUI), a gateway
    chat's /reset or its idle or daily expiry starts, though none of its transcript is carried over: marked
    ``_reset_from`` in model_config, or, before the marker, a parent ended at a reset that shares the child's
    routing key. Each side finds the other; a compression continuation and a plain child stay the conversation's."""
    w, pay = pq, str(pq.paths["pay"])
    w.session("r_old", pay, messages=[("user", "zeppelin cache: we chose redis streams")])
    w.db.end_session("r_old", "session_reset")
    w.session("r_new", pay, parent="r_old", model_config={"_reset_from": "r_old"},
              messages=[("user", "what did we pick for the zeppelin cache?")])
    w.continuation("r_new", "r_new2", messages=[("assistant", "zeppelin cache, continued")])
    w.db.create_session("g_old", "telegram", session_key="tg:1", cwd=pay)
    w.say("g_old", "user", "zeppelin retries: three, then give up")
    w.db.end_session("g_old", "idle")
    w.db.create_session("g_new", "telegram", session_key="tg:1", cwd=pay, parent_session_id="g_old")
    w.say("g_new", "user", "zeppelin again")
    w.db.create_session("g_sub", "telegram", session_key="tg:2", cwd=pay, parent_session_id="g_old")
    w.say("g_sub", "assistant", "zeppelin from a child of another route")

    def found(current: str) -> set[str]:  # a conversation is one result: g_old with its child g_sub, r_new with r_new2
        answer = w.search(current, "zeppelin", mode="keyword", limit=20)
        conversation = {"g_sub": "g_old", "r_new2": "r_new"}
        named = [conversation.get(sid, sid) for sid in result_sessions(answer)]
        assert len(named) == len(set(named)), answer
        return set(named)

    assert found("r_new") == {"r_old", "g_old", "g_new"}
    assert found("r_new2") == {"r_new", "r_old", "g_old", "g_new"}  # r_new: compressed into r_new2
    assert found("r_old") == {"r_new", "g_old", "g_new"}
    assert found("g_new") == {"r_old", "r_new", "g_old"}
    assert found("g_old") == {"r_old", "r_new", "g_new"}  # g_sub: its own child, not a reset's


def in_place(world: World, elsewhere: str, said: list[tuple[str, str]], compacted: list[dict[str, str]]) -> tuple[int, int]:
    """Session ``other_ip`` saying ``elsewhere`` and the asking ``cur_ip`` saying ``said`` (two messages), then compacted
    in place by Hermes (``archive_and_compact`` with ``compacted``, its new live rows); returns the two ids."""
    repo = world.repo("inplace")
    world.session("other_ip", repo, messages=[("user", elsewhere)])
    world.session("cur_ip", repo, style="cli", messages=said)
    first, second = (m["id"] for m in world.db.get_messages("cur_ip"))
    world.db.archive_and_compact("cur_ip", compacted)
    return first, second


@pytest.mark.parametrize("mode", ["keyword", "hybrid", "semantic"])
def test_what_a_compaction_in_place_archived_of_the_asking_session_is_searched(world: World, fake, mode):
    """Hermes' own config compacts in place (``compression.in_place``): the conversation keeps its session, and its
    summarised-away turns stay archived in it (``archive_and_compact``). Those left the live context and are
    searched from the session itself, as Hermes' own search does; its live rows (the summary Hermes wrote, what was
    said since) never are, in either leg."""
    asked, decided = in_place(world, "the narwhal cache evicts least recently used entries", [
        ("user", "how should the narwhal queue retry failed jobs?"),
        ("assistant", "narwhal queue: retry three times with exponential backoff, then park the job")], [
        {"role": "user", "content": "[CONTEXT COMPACTION — REFERENCE ONLY] narwhal queue retries were settled"},
        {"role": "assistant", "content": "narwhal queue retries: noted, as agreed before"}])
    live = world.say("cur_ip", "user", "narwhal queue: what did we decide about retrying failed jobs?")
    if mode != "keyword":
        server = fake()
        world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
        assert world.call("project_history_semantic_consent", {"decision": "allow"}, "cur_ip")["success"] is True
    answer = world.search("cur_ip", "narwhal queue retry failed jobs backoff", mode=mode, limit=10)
    hits = {r["session_id"]: r["message_id"] for r in answer["results"]}
    assert hits.get("cur_ip") == decided and set(hits) == {"cur_ip", "other_ip"}, answer
    assert answer["sessions_in_scope"] == 2, answer
    for query in ("what did we decide about retrying", "noted, as agreed before", "settled",  # words of live rows
                  "narwhal queue: what did we decide about retrying failed jobs?"):  # a live row's very text
        found = world.search("cur_ip", query, mode=mode, limit=10)["results"]
        assert all(r["message_id"] in (asked, decided) for r in found if r["session_id"] == "cur_ip"), (query, found)
    assert world.call("project_history_read", {"session_id": "cur_ip", "message_id": decided, "before": 0, "after": 0},
                      "cur_ip")["messages"][0]["message_id"] == decided
    assert live not in hits.values()


def test_the_asking_session_s_archive_is_found_by_vectors_however_many_live_rows_are_nearer(world: World, fake):
    """A compaction in place archived what was decided; since then the conversation kept talking about the subject
    (live rows, its context). The vector leg takes a few messages per session and then drops the asking session's
    live ones: its archived message must still be found, not crowded out by the live rows it drops."""
    asked, decided = in_place(world, "an unrelated note about the ledger export", [
        ("user", "narwhal queue retry policy for failed jobs"),
        ("assistant", "narwhal queue retry policy: three tries with exponential backoff then park")],
        [{"role": "user", "content": "[CONTEXT COMPACTION — REFERENCE ONLY] done"}])
    for i in range(6):  # the live conversation keeps to the subject, in the query's very words
        world.say("cur_ip", "user" if i % 2 == 0 else "assistant", "narwhal queue retry policy failed jobs")
    server = fake(dims=64, words=True)
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    assert world.call("project_history_semantic_consent", {"decision": "allow"}, "cur_ip")["success"] is True
    answer = world.search("cur_ip", "narwhal queue retry policy failed jobs", mode="semantic", limit=10)
    assert answer["semantic_status"] == "ready", answer
    hits = {r["session_id"]: r["message_id"] for r in answer["results"]}
    assert hits.get("cur_ip") in (asked, decided), answer


def test_a_conversation_is_one_result_however_often_it_was_compressed_or_branched(world: World):
    """Hermes' compression copies a conversation's first messages and its tail into every continuation, and /branch
    copies the whole history into the branch. Each copy matches as its original does: the conversation is one
    result, its original message (where it was said first), and the other conversations keep their places."""
    from test_browse import _compressed

    repo = world.repo("pay")
    turns = [{"role": "user", "content": "How do we stop the zeppelin reconnect storm in the gateway?"},
             {"role": "assistant", "content": "Use exponential backoff with jitter for zeppelin reconnects."}]
    for i in range(10):
        turns += [{"role": "user", "content": f"step {i} unrelated ledger detail " + "x " * 40},
                  {"role": "assistant", "content": f"answer {i} unrelated ledger detail " + "y " * 40}]
    world.session("a1", repo, style="cli")
    original = [world.say("a1", t["role"], t["content"]) for t in turns][1]
    world.continuation("a1", "a2")
    world.db.replace_messages("a2", _compressed(turns, "zeppelin: backoff with jitter"))
    world.continuation("a2", "a3")
    world.db.replace_messages("a3", _compressed(turns, "zeppelin: backoff with jitter, again"))
    world.session("a_branch", None, parent="a3")  # /branch: the history appended again (cli_commands_mixin)
    for row in world.db.get_messages("a3"):
        world.say("a_branch", row["role"], row["content"] or "")
    world.session("other1", repo, messages=[("user", "zeppelin reconnect storm: we also added a circuit breaker")])
    world.session("other2", repo, messages=[("assistant", "the zeppelin gateway backoff caps at 30s")])
    world.session("cur_z", repo, style="cli", messages=[("user", "hi")])
    copies = [r[0] for r in world.db._conn.execute("SELECT id FROM messages WHERE content = ?", (turns[1]["content"],))]
    assert len(copies) == 4  # a1, a2, a3 and the branch
    answer = world.search("cur_z", "zeppelin reconnect backoff jitter", mode="keyword", limit=3)
    hits = {r["session_id"]: r["message_id"] for r in answer["results"]}
    assert set(hits) == {"a1", "other1", "other2"} and hits["a1"] == original, answer
    # From the branch: its parent a3 is its context, and a1 and a2 were compressed away, but the zeppelin turns were
    # carried forward into a3 and copied into the branch: they are its context still, not history to find.
    from_branch = world.search("a_branch", "zeppelin reconnect backoff jitter", mode="keyword", limit=3)
    assert {r["session_id"]: r["message_id"] for r in from_branch["results"]} == {
        k: v for k, v in hits.items() if k != "a1"}, from_branch
    assert result_sessions(world.search("a_branch", "unrelated ledger detail", mode="keyword", limit=3)) == ["a1"]


@pytest.mark.parametrize("marked", [True, False])
def test_a_branch_is_searched_and_listed_from_its_parent_and_its_siblings(world: World, marked: bool):
    """/branch as Hermes' CLI makes it: the parent ended ``branched``, each branch its child marked ``_branched_from``,
    the history copied. What a branch decided after the fork was found from no session of the family, with a false
    "no matches", and the recent list left the branches out (the hostile review's t_branch_scope.py). A branch is a
    conversation of its own: its turns after the fork are searched and listed from its parent and siblings, and what
    it copied stays out while the asking session's live context repeats it. A branch made before Hermes marked them
    is told as Hermes tells it: it started after its parent ended ``branched``."""
    alpha = world.repo("alpha")
    history = [("user", "we need a cache for the pricing service"), ("assistant", "options: redis or memcached")]
    world.session("P", alpha, style="cli", messages=history)
    for branch in ("B1", "B2"):
        world.db.end_session("P", "branched")
        world.session(branch, None, parent="P", model_config={"_branched_from": "P"} if marked else None, messages=history)
    world.say("B1", "assistant", "benchmarked memcached: p99 latency 4ms, eviction storms above 2GB")
    world.say("B2", "assistant", "redis cluster works")
    world.say("P", "user", "which cache did we pick?")
    for asker, others in (("P", ["B1", "B2"]), ("B2", ["B1", "P"])):
        found = world.search(asker, "memcached eviction storms p99 latency", mode="keyword")
        assert result_sessions(found) == ["B1"], (asker, found)
        assert world.search(asker, "pricing service", mode="keyword")["results"] == [], asker
        listed = world.call("project_history_recent", {}, asker)["sessions"]
        assert sorted(s["session_id"] for s in listed) == others, (asker, listed)
    assert result_sessions(world.search("B1", "which cache did we pick", mode="keyword")) == ["P"]


@pytest.mark.parametrize("desktop", [False, True])
def test_what_a_branch_copied_is_no_hit_from_the_branch_or_its_parent(world: World, desktop: bool):
    """The history a branch copied at the fork is the branch's live context, turns that called tools too, which the
    desktop's branch copies without their calls: those were hits from the branch (its parent's originals) and from the
    parent (the branch's copies), as the copies check compared tool calls (the second review's
    t_branch_own_copies.py). Tool output is not compared (reading the live context's logs would cost every search):
    the copied log is a hit, the output the asker holds. What the branch said after the fork stays found."""
    calls = [{"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{\"command\": \"kubectl get pods\"}"}}]
    before = [("user", "check the quasar pods", {}), ("assistant", "checking the quasar pods with kubectl", {"tool_calls": calls}),
              ("tool", "NAME READY STATUS\nquasar-api-7f9 1/1 CrashLoopBackOff", {"tool_name": "terminal", "tool_call_id": "c1"}),
              ("assistant", "the quasar api pod is crashlooping", {})]
    alpha = world.repo("alpha")
    world.session("P", alpha, style="cli")
    for role, text, extra in before:
        world.say("P", role, text, **extra)
    if not desktop:
        world.db.end_session("P", "branched")
    world.session("B", alpha if desktop else None, style="cli", parent="P", model_config={"_branched_from": "P"})
    for role, text, extra in before:
        world.say("B", role, text, **({} if desktop else extra))
    world.say("B", "assistant", "the quasar logs show an OOM kill at 512Mi")
    for asker in ("B", "P"):
        for query in ("checking pods with kubectl", "crashlooping"):
            found = world.search(asker, query, mode="keyword")["results"]
            assert found == [], (asker, query, [(r["session_id"], r["message_id"], r["snippet"]) for r in found])
    assert result_sessions(world.search("P", "quasar OOM kill", mode="keyword")) == ["B"]


def test_search_from_q_stays_in_q_including_worktrees(shared_pq):
    got = set(result_sessions(shared_pq.search("q_main", "websocket", limit=10)))
    assert got == {"q_wt", "q_cli_wt"}
    answer = shared_pq.search("q_cli_wt", "websocket", limit=10)
    assert set(result_sessions(answer)) == {"q_main", "q_wt"}
    assert answer["project"]["kind"] == "auto" and answer["project"]["root"] == str(shared_pq.paths["quasar"])


def test_home_session_has_no_project_context(shared_pq):
    for sid in ("home_gw", "home_plain"):
        answer = shared_pq.search(sid, "websocket")
        assert answer["success"] is True and answer["results"] == []
        assert answer["sessions_in_scope"] == 0
        assert "No project context" in answer["message"]


def test_result_shape_and_history_marking(shared_pq):
    answer = shared_pq.search("cur_p", "websocket reconnect storm", limit=1)
    assert answer["success"] is True
    assert {"success", "mode", "project", "results", "sessions_in_scope", "semantic_status"} <= set(answer)
    [hit] = answer["results"]
    assert set(hit) == RESULT_KEYS
    assert hit["session_id"] == "p_desk" and hit["link"] == "@session:p_desk"
    assert hit["score_source"] == "keyword" and isinstance(hit["message_id"], int)
    assert ">>>" in hit["snippet"] and len(hit["snippet"]) < 400
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d [+-]\d\d:\d\d", hit["when"]), hit["when"]
    assert "not instructions" in answer["notice"]
    assert answer["sessions_in_scope"] == 8  # 7 searchable P sessions + this conversation


def test_one_strongest_hit_per_session_and_limit(shared_pq):
    answer = shared_pq.search("cur_p", "websocket", limit=2)
    ids = result_sessions(answer)
    assert len(ids) == 2 and len(set(ids)) == 2


def test_the_hit_kept_for_a_session_is_its_strongest_message(world):
    """Of a session's matching messages the one that matches the query best is shown, not the first or the newest."""
    repo = world.repo("app")
    world.session("many", repo)
    world.say("many", "user", "the websocket client is flaky")
    best = world.say("many", "assistant", "websocket reconnect: exponential backoff with jitter fixed the reconnect storm")
    world.say("many", "user", "thanks, and the websocket tests pass now " + "more words to make it long " * 10)
    world.session("other", repo, messages=[("assistant", "websocket reconnect handled in the client")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    answer = world.search("cur", "websocket reconnect backoff", mode="keyword", limit=5)
    assert result_sessions(answer) == ["many", "other"], answer
    assert answer["results"][0]["message_id"] == best
    assert ">>>backoff<<<" in answer["results"][0]["snippet"]


def test_natural_language_question_finds_the_session(shared_pq):
    answer = shared_pq.search("cur_p", "How did we handle the reconnect storm in the websocket client?", limit=1)
    assert result_sessions(answer) == ["p_desk"]


def test_tool_output_matches_count(shared_pq):
    answer = shared_pq.search("cur_p", "ECONNRESET zorbulated", limit=3)
    assert result_sessions(answer) == ["p_tool"]


def test_identifier_and_path_queries(shared_pq):
    assert result_sessions(shared_pq.search("cur_p", "src/ws.py", limit=3)) == ["p_cli_sub"]
    assert result_sessions(shared_pq.search("cur_p", "test_ws.py::test_reconnect", limit=3)) == ["p_tool"]


@pytest.mark.parametrize(
    "query",
    ["数据库迁移", "数据库迁移方案是什么", "迁移", "回填", "websocket 数据库迁移", "数据库迁移 backoff"],
)
def test_chinese_and_mixed_queries(shared_pq, query):
    ids = result_sessions(shared_pq.search("cur_p", query, limit=3))
    assert ids and ids[0] == "p_desk"


def test_chinese_query_never_leaks_out_of_scope(pq):
    pq.say("q_main", "user", "quasar 也讨论了数据库迁移")
    assert result_sessions(pq.search("cur_p", "数据库迁移", limit=10)) == ["p_desk"]
    assert result_sessions(pq.search("q_wt", "数据库迁移", limit=10)) == ["q_main"]
    assert result_sessions(pq.search("q_wt", "迁移", limit=10)) == ["q_main"]


def test_rewound_archived_and_delegate_text_is_never_found(shared_pq):
    for query in ("rewound draft", "archived idea", "delegate internals"):
        assert shared_pq.search("cur_p", query, limit=10)["results"] == []


def test_hits_open_in_hermes_session_search_scroll_mode(shared_pq):
    """Our (session_id, message_id) pairs are valid anchors for the built-in scroll mode."""
    from tools.session_search_tool import session_search

    for hit in shared_pq.search("cur_p", "websocket", limit=10)["results"]:
        view = json.loads(session_search(session_id=hit["session_id"], around_message_id=hit["message_id"], db=shared_pq.db, current_session_id="cur_p"))
        assert view.get("success") is not False, view
        assert hit["message_id"] in [m.get("id") for m in view["messages"]], view


def test_no_match_says_so(shared_pq):
    answer = shared_pq.search("cur_p", "xylophone", limit=3)
    assert answer["success"] is True and answer["results"] == []
    assert "No matching" in answer["message"]


def test_only_session_in_project(world: World):
    repo = world.repo("solo")
    world.session("only", repo, messages=[("user", "hello websocket")])
    answer = world.search("only", "websocket")
    assert answer["results"] == [] and answer["sessions_in_scope"] == 1
    assert answer["message"] == "No other sessions in this project"


def test_in_place_compaction_keeps_archived_originals_searchable(world: World):
    repo = world.repo("comp")
    world.session("c1", repo, messages=[("user", "the frobnicator design"), ("assistant", "use a queue")])
    world.db.archive_and_compact("c1", [{"role": "user", "content": "[summary] discussed design"}])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    assert result_sessions(world.search("cur", "frobnicator")) == ["c1"]


def test_an_editor_session_belongs_to_the_editor_s_folder(world: World):
    """Zed, VS Code and JetBrains run Hermes through its ACP adapter, which keeps the editor's folder in the session's
    ``model_config`` (Hermes records ``sessions.cwd`` for the CLI alone). Written by Hermes' own adapter: the session
    is in the folder's project, its compression continuation with it, and it searches that project; a row whose
    ``model_config`` is damaged or names no folder is in Home, and breaks no search."""
    from types import SimpleNamespace

    from acp_adapter.session import SessionManager

    repo, other = world.repo("editor"), world.repo("elsewhere")
    world.session("cli_old", repo, style="cli", messages=[("user", "the wombat service keeps its queue in redis")])
    manager = SessionManager(agent_factory=lambda: SimpleNamespace(model="m"), db=world.db)
    state = manager.create_session(cwd=str(repo / "src"))
    state.history = [{"role": "user", "content": "in zed: rename the wombat service"},
                     {"role": "assistant", "content": "renamed the wombat service to billing-core"}]
    manager.save_session(state.session_id)
    world.continuation(state.session_id, "acp_next", messages=[("user", "wombat service: the continuation")])
    elsewhere = manager.create_session(cwd=str(other))
    elsewhere.history = [{"role": "user", "content": "wombat service elsewhere"}]
    manager.save_session(elsewhere.session_id)
    world.session("acp_damaged", None, source="acp", messages=[("user", "wombat service, damaged row")])
    world.session("acp_relative", None, source="acp", model_config={"cwd": "."},
                  messages=[("user", "wombat service, no folder")])
    with sqlite3.connect(world.home / "state.db") as db:
        db.execute("UPDATE sessions SET model_config = ? WHERE id = 'acp_damaged'", ('{"cwd": ',))
    world.session("cur_editor", repo, style="cli", messages=[("user", "hi")])
    answer = world.search("cur_editor", "wombat service", limit=10)
    assert answer["success"] is True and answer["project"]["kind"] == "auto", answer
    found = result_sessions(answer)  # the editor's conversation is one result, its continuation a part of it
    assert len(found) == 2 and "cli_old" in found and set(found) & {state.session_id, "acp_next"}, answer
    from_editor = world.search(state.session_id, "wombat redis queue", limit=10)
    assert from_editor["project"] == answer["project"] and result_sessions(from_editor) == ["cli_old"], from_editor
    relative = world.search("acp_relative", "wombat", limit=10)
    assert relative["project"]["kind"] == "home", relative


def test_a_cron_run_belongs_to_its_job_s_folder(world: World):
    """Hermes records no folder for a cron run's session (``cron_<job id>_<time>``); a job made with a ``workdir``
    runs there. Made by Hermes' own ``cron.jobs``: the run is in the folder's project, searched from it and searching
    it; a job without a folder, a deleted job and a damaged jobs.json leave their runs in Home, and break no search.
    The folder is read again when jobs.json changes."""
    from cron.jobs import create_job, remove_job, update_job, use_cron_store

    repo, other = world.repo("nightly"), world.repo("elsewhere")
    with use_cron_store(world.home):
        in_repo = create_job("review the open PRs", "every 1d", workdir=str(repo))
        homeless = create_job("summarise the news", "every 1d")
        gone = create_job("check the backups", "every 1d", workdir=str(repo))
        remove_job(gone["id"])
    run = world.session(f"cron_{in_repo['id']}_20261206_083000", None, source="cron",
                        messages=[("user", "review the open PRs"), ("assistant", "the quokka migration PR needs a rebase")])
    world.session(f"cron_{homeless['id']}_20261206_083000", None, source="cron",
                  messages=[("assistant", "quokka news of the day")])
    world.session(f"cron_{gone['id']}_20261206_083000", None, source="cron", messages=[("assistant", "quokka backups")])
    world.session("cli_old", repo, style="cli", messages=[("user", "the quokka migration renames the orders table")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    answer = world.search("cur", "quokka migration", limit=10)
    assert answer["success"] is True and answer["project"]["kind"] == "auto", answer
    assert sorted(result_sessions(answer)) == sorted(["cli_old", run]), answer
    from_cron = world.search(run, "quokka orders table", limit=10)
    assert from_cron["project"] == answer["project"] and result_sessions(from_cron) == ["cli_old"], from_cron

    with use_cron_store(world.home):
        update_job(in_repo["id"], {"workdir": str(other)})
    assert result_sessions(world.search("cur", "quokka migration", limit=10)) == ["cli_old"]
    (world.home / "cron" / "jobs.json").write_text('{"jobs": [', encoding="utf-8")
    damaged = world.search("cur", "quokka migration", limit=10)
    assert damaged["success"] is True and result_sessions(damaged) == ["cli_old"], damaged
    assert world.search(run, "quokka", limit=10)["project"]["kind"] == "home"


def test_a_conversation_whose_first_session_was_deleted_keeps_its_project(world: World, monkeypatch):
    """Hermes records a CLI conversation's folder on its first session alone; deleting or pruning that session
    unlinks its compression continuations (``parent_session_id`` set to NULL). The working directory Hermes wrote
    into each continuation's system prompt (its own ``build_environment_hints``) keeps the conversation in its
    project; a prompt that names none (a remote terminal) leaves it in Home, and a gateway chat never takes the
    gateway's folder from its prompt."""
    from agent.prompt_builder import build_environment_hints

    repo, other = world.repo("pruned"), world.repo("gateway-folder")
    monkeypatch.setenv("TERMINAL_CWD", str(repo))
    monkeypatch.delenv("TERMINAL_ENV", raising=False)
    prompt = "You are Hermes.\n\n" + build_environment_hints()
    world.session("first", repo, style="cli", messages=[("user", "the pelican cache lives in redis")])
    world.continuation("first", "second", messages=[("user", "pelican cache: eviction is LRU")])
    world.db.update_system_prompt("second", prompt)
    world.continuation("second", "third", messages=[("user", "hi")])
    world.db.update_system_prompt("third", prompt)
    world.session("cli_other", repo, style="cli", messages=[("user", "pelican cache sizing")])
    before = world.search("third", "pelican cache", limit=10)
    assert sorted(result_sessions(before)) == ["cli_other", "second"], before
    assert world.db.delete_session("first")
    after = world.search("third", "pelican cache", limit=10)
    assert after["success"] is True and after["project"] == before["project"], after
    assert sorted(result_sessions(after)) == ["cli_other", "second"], after

    # A repository's AGENTS.md, which Hermes writes into the prompt after its own environment block, naming another
    # folder in the same two lines (an example, or a hostile repo), moves nothing.
    from agent.prompt_builder import build_context_files_prompt

    (repo / "AGENTS.md").write_text(f"Paste your environment:\nUser home directory: /home/dev\n"
                                    f"Current working directory: {other}\n", encoding="utf-8")
    world.session("new1", None, messages=[("user", "pelican cache: a /new session")])
    world.db.update_system_prompt("new1", prompt + "\n\n" + build_context_files_prompt(cwd=str(repo)))
    assert str(other) in world.session_row("new1")["system_prompt"]
    assert world.search("new1", "pelican", limit=10)["project"] == before["project"]

    monkeypatch.setenv("TERMINAL_CWD", str(other))
    world.session("chat", None, source="telegram", messages=[("user", "pelican cache from telegram")])
    world.db.update_system_prompt("chat", build_environment_hints())
    world.session("remote", None, messages=[("user", "pelican cache on docker")])
    world.db.update_system_prompt("remote", "You are Hermes.\nWorking directory: /workspace")
    assert world.search("chat", "pelican", limit=10)["project"]["kind"] == "home"
    assert world.search("remote", "pelican", limit=10)["project"]["kind"] == "home"
    assert "chat" not in result_sessions(world.search("third", "pelican cache", limit=10))


def test_projects_db_missing_degrades_to_auto(world: World):
    repo = world.repo("nodesk")
    world.session("a", repo, messages=[("user", "quokka plans")])
    world.session("b", repo, style="cli", messages=[("user", "hi")])
    answer = world.search("b", "quokka")
    assert result_sessions(answer) == ["a"] and answer["project"]["kind"] == "auto"
    assert not (world.home / "projects.db").exists()


def _plugin_store():
    import sys

    return sys.modules["hermes_plugins.project_history_recall.workspace"]


def test_new_and_recently_updated_sessions_are_seen_at_once(world: World):
    """The scope cache re-reads new and recent sessions on every search."""
    repo, other = world.repo("alpha"), world.repo("beta")
    world.session("old", repo, messages=[("user", "pelican plan")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    assert result_sessions(world.search("cur", "pelican")) == ["old"]
    world.session("new", repo, style="cli", messages=[("user", "pelican follow-up")])
    assert set(result_sessions(world.search("cur", "pelican"))) == {"old", "new"}
    # The desktop records a new session's cwd just after creating it.
    world.db.update_session_cwd("new", str(other))
    assert result_sessions(world.search("cur", "pelican")) == ["old"]


def _old_session_among_many(world: World) -> None:
    repo = world.repo("alpha")
    world.session("old", repo, messages=[("user", "pelican plan")])
    for i in range(70):  # push "old" out of the always-re-read recent window
        world.session(f"filler{i}", None, source="telegram")
    world.session("cur", repo, style="cli", messages=[("user", "hi")])


def _count_full_reads(monkeypatch, workspace) -> list[str]:
    """The threads every full read of the sessions (a scan of every session row) ran in."""
    import threading

    session_rows = sys.modules["hermes_plugins.project_history_recall.session_rows"]
    seen: list[str] = []
    real = session_rows.scan_sessions

    def counting(conn):
        seen.append(threading.current_thread().name)
        return real(conn)

    monkeypatch.setattr(session_rows, "scan_sessions", counting)
    return seen


def test_old_session_changed_elsewhere_shows_up_after_the_reload_in_the_background(world: World, monkeypatch):
    """Old sessions are re-read after ``ttl`` (0 here: every search) behind the search that found them due:
    that search answers at once from what it had, the next one sees the change."""
    workspace = _plugin_store()
    monkeypatch.setattr(workspace.membership, "ttl", 0.0)
    _old_session_among_many(world)
    assert result_sessions(world.search("cur", "pelican")) == ["old"]
    workspace.membership.settle()
    reads = _count_full_reads(monkeypatch, workspace)
    world.db.set_session_archived("old", True)  # as if archived in the desktop app
    assert world.search("cur", "pelican")["results"] == [], "the census had it; state.db has it archived"
    workspace.membership.settle()
    assert reads == ["phr-census"], "read again once, not in the search's thread"
    assert world.search("cur", "pelican")["results"] == []


def test_a_session_another_process_moved_is_never_shown_as_this_projects(world: World):
    """Another Hermes window moves an old session to project beta (Hermes' own ``update_session_cwd``, as the move
    writes it) while this process's census still files it under alpha: alpha's search, read and recent list leave
    it out at once (state.db is asked of the sessions an answer shows), not for up to the census's stale limit."""
    _old_session_among_many(world)
    beta = world.repo("beta")
    assert result_sessions(world.search("cur", "pelican")) == ["old"]
    world.db.update_session_cwd("old", str(beta), None, str(beta))
    assert world.search("cur", "pelican")["results"] == []
    assert world.call("project_history_read", {"session_id": "old"}, "cur")["code"] == "not_in_project"
    assert "old" not in [s["session_id"] for s in world.call("project_history_recent", {}, "cur")["sessions"]]


def test_a_branch_goes_with_its_parent_another_process_moved(world: World):
    """A ``/branch`` records no folder of its own: its project is its parent's. Another Hermes window moves the
    parent to beta (``update_session_cwd``, as the move writes a conversation) while this process's census still
    files the branch under alpha: the branch is left out of alpha's search, read and recent list at once too."""
    _old_session_among_many(world)
    world.branch("old", "kid", messages=[("user", "pelican plan"), ("assistant", "pelican roost decided")])
    beta = world.repo("beta")
    assert "kid" in result_sessions(world.search("cur", "pelican roost"))
    world.db.update_session_cwd("old", str(beta), None, str(beta))
    assert world.search("cur", "pelican roost")["results"] == []
    assert world.call("project_history_read", {"session_id": "kid"}, "cur")["code"] == "not_in_project"
    assert "kid" not in [s["session_id"] for s in world.call("project_history_recent", {}, "cur")["sessions"]]


def _moving(world: World, sid: str, folder: Path, real):
    """``real`` that first moves ``sid`` to ``folder`` as another chat of this process does (Hermes'
    ``update_session_cwd``, as the move writes it, then the census voided), at that moment."""
    def during(*args, **kw):
        world.db.update_session_cwd(sid, str(folder), None, str(folder))
        _plugin_store().membership.invalidate()
        return real(*args, **kw)
    return during


def _answer_parts() -> tuple[Any, Any, Any]:
    """The loaded plugin's ``lexical``, ``conversations`` and ``session_rows``: where a search, the recent list and
    a read are under way."""
    return tuple(sys.modules[f"hermes_plugins.project_history_recall.{m}"] for m in ("lexical", "conversations", "session_rows"))


def test_a_branch_whose_parent_another_chat_moves_during_a_search_is_left_out(world: World, monkeypatch):
    """The move voids the census in the middle of a search: the branch's parent now sits in beta and the branch,
    which records no folder of its own, goes with it. With no census to say whose folder it took, the branch is
    still asked of state.db (its chain), never kept unasked as alpha's."""
    _old_session_among_many(world)
    world.branch("old", "kid", messages=[("user", "pelican plan"), ("assistant", "pelican roost decided")])
    alpha, beta = (world.work / "alpha").resolve(), world.repo("beta")
    assert "kid" in result_sessions(world.search("cur", "pelican roost"))
    lexical, conversations, session_rows = _answer_parts()
    moving = functools.partial(_moving, world, "old", beta)
    originals = [(lexical, "search", lexical.search), (session_rows, "session_details", session_rows.session_details),
                 (conversations, "recent_conversations", conversations.recent_conversations)]

    def back() -> None:
        for module, name, real in originals:
            monkeypatch.setattr(module, name, real)
        world.db.update_session_cwd("old", str(alpha), None, str(alpha))
        _plugin_store().membership.invalidate()
        assert "kid" in [s["session_id"] for s in world.call("project_history_recent", {}, "cur")["sessions"]]

    monkeypatch.setattr(lexical, "search", moving(lexical.search))
    assert world.search("cur", "pelican roost")["results"] == []
    back()
    monkeypatch.setattr(conversations, "recent_conversations", moving(conversations.recent_conversations))
    assert "kid" not in [s["session_id"] for s in world.call("project_history_recent", {}, "cur")["sessions"]]
    back()
    monkeypatch.setattr(session_rows, "session_details", moving(session_rows.session_details))
    assert world.call("project_history_read", {"session_id": "kid"}, "cur").get("code") == "not_in_project"


def test_a_census_read_again_during_a_search_after_a_move_never_passes_its_sessions(world: World, monkeypatch):
    """Another chat of this process moves a session to beta during this search, and a third chat's answer reads the
    census again before this search checks what it shows: the new census files the moved session (and the branch
    that takes its folder) under beta, as state.db does. Compared with that census, nothing looks moved; they were
    chosen as alpha's, and must not be shown as alpha's."""
    _old_session_among_many(world)
    world.branch("old", "kid", messages=[("user", "pelican plan"), ("assistant", "pelican roost decided")])
    beta = world.repo("beta")
    assert set(result_sessions(world.search("cur", "pelican"))) == {"old", "kid"}
    lexical = _answer_parts()[0]
    real = lexical.search

    def third_chat(*args, **kw):  # a third chat's answer reads the census again, then this search goes on
        world.call("project_history_recent", {}, "cur")
        return real(*args, **kw)

    monkeypatch.setattr(lexical, "search", _moving(world, "old", beta, third_chat))
    assert world.search("cur", "pelican")["results"] == []


def test_a_move_made_by_another_chat_during_a_search_leaves_its_results(world: World, monkeypatch):
    """A gateway serves two chats in one process: one moves its session to beta while the other's search, read or
    recent list is under way. The move voids the census (``membership.invalidate``); the other answer still shows
    alpha's sessions as state.db has them (every session whose row records a folder was left out: no results, a
    read refused as ``not_in_project``, an empty recent list)."""
    _old_session_among_many(world)
    beta = world.repo("beta")
    world.session("mover", (world.work / "alpha").resolve(), messages=[("user", "hi")])
    assert result_sessions(world.search("cur", "pelican")) == ["old"]
    lexical, conversations, session_rows = _answer_parts()
    moving = functools.partial(_moving, world, "mover", beta)
    monkeypatch.setattr(lexical, "search", moving(lexical.search))
    monkeypatch.setattr(conversations, "recent_conversations", moving(conversations.recent_conversations))
    monkeypatch.setattr(session_rows, "session_details", moving(session_rows.session_details))
    assert result_sessions(world.search("cur", "pelican")) == ["old"]
    assert world.call("project_history_read", {"session_id": "old"}, "cur").get("code") is None
    assert "old" in [s["session_id"] for s in world.call("project_history_recent", {}, "cur")["sessions"]]


def test_a_census_past_its_stale_limit_is_read_again_in_the_search(world: World, monkeypatch):
    """However seldom a process searches, a change to an old session shows up within ``stale_limit``."""
    workspace = _plugin_store()
    monkeypatch.setattr(workspace.membership, "stale_limit", 0.0)
    _old_session_among_many(world)
    assert result_sessions(world.search("cur", "pelican")) == ["old"]
    reads = _count_full_reads(monkeypatch, workspace)
    world.db.set_session_archived("old", True)
    assert world.search("cur", "pelican")["results"] == []
    assert len(reads) == 1 and reads[0] != "phr-census"


def test_a_new_list_of_projects_never_reuses_a_census_made_for_an_old_one(world: World):
    """Past 16 lists of projects the attributors are dropped, and the one made for the new list may get a dropped
    one's address: the census made with the old list must not pass for the new one's. Project Y now claims the old
    session's folder: X's search no longer finds it (it did, for 5 minutes, as X's)."""
    shared = world.folder("shared")
    world.project("X", [shared])
    world.session("old", shared / "sub", style="cli", messages=[("user", "the pelican migration plan")])
    for i in range(70):  # "old" out of the always-re-read recent window
        world.session(f"filler{i}", None, source="telegram")
    world.session("cur", shared, style="cli", messages=[("user", "hi")])
    assert result_sessions(world.search("cur", "pelican")) == ["old"]
    for i in range(16):  # 16 more lists of projects: the next one drops every attributor
        world.project(f"P{i}", [world.folder(f"p{i}")])
        assert result_sessions(world.search("cur", "pelican")) == ["old"]
    world.project("Y", [shared / "sub"])
    assert world.search("cur", "pelican")["results"] == []


def test_a_background_read_begun_before_a_move_is_not_used_after_it(world: World, monkeypatch):
    """The move makes the census void; a read that began before it (its rows from before the move) is dropped."""
    import threading

    workspace, session_rows = _plugin_store(), sys.modules["hermes_plugins.project_history_recall.session_rows"]
    alpha, beta = world.repo("alpha"), world.repo("beta")
    project = world.project("Alpha", [alpha])
    world.session("old", alpha, messages=[("user", "pelican plan")])
    world.session("elsewhere", beta, messages=[("user", "pelican in beta")])
    for i in range(70):
        world.session(f"filler{i}", None, source="telegram")
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])
    assert result_sessions(world.search("cur", "pelican")) == ["old"]
    monkeypatch.setattr(workspace.membership, "ttl", 0.0)
    started, release = threading.Event(), threading.Event()
    real_scan = session_rows.scan_sessions

    def held_scan(conn):
        found = real_scan(conn)  # the rows as they were before the move
        if threading.current_thread().name == "phr-census":
            started.set()
            release.wait(30)
        return found

    monkeypatch.setattr(session_rows, "scan_sessions", held_scan)
    world.search("cur", "pelican")  # starts the background read, which stops after reading the rows
    assert started.wait(30)
    monkeypatch.setattr(workspace.membership, "ttl", 60.0)
    moved = world.move("elsewhere", project)
    assert moved.get("success", True) and "error" not in moved, moved
    assert set(result_sessions(world.search("cur", "pelican"))) == {"old", "elsewhere"}
    release.set()
    workspace.membership.settle()
    assert set(result_sessions(world.search("cur", "pelican"))) == {"old", "elsewhere"}, "the old read was dropped"


def test_a_background_read_that_fails_leaves_the_census_and_is_tried_again(world: World, monkeypatch):
    """state.db moved away under the background read: the searches go on with what they had, nothing raised."""
    workspace = _plugin_store()
    _old_session_among_many(world)
    assert result_sessions(world.search("cur", "pelican")) == ["old"]
    monkeypatch.setattr(workspace.membership, "ttl", 0.0)
    import threading

    store = sys.modules["hermes_plugins.project_history_recall.store"]
    real_connect, failed = store.connect_ro, []

    def moved_away_once(path):  # the background read's open of state.db fails, once
        if threading.current_thread().name == "phr-census" and not failed:
            failed.append(path)
            raise sqlite3.OperationalError("unable to open database file")
        return real_connect(path)

    monkeypatch.setattr(store, "connect_ro", moved_away_once)
    reads = _count_full_reads(monkeypatch, workspace)
    assert result_sessions(world.search("cur", "pelican")) == ["old"]
    workspace.membership.settle()
    assert len(failed) == 1 and reads == [], "the background read failed before reading"
    assert result_sessions(world.search("cur", "pelican")) == ["old"]
    workspace.membership.settle()
    assert reads == ["phr-census"], "the census was kept (no full read in the search) and the next search past ttl reads again"


def test_a_search_answers_when_no_thread_can_be_started_for_the_background_read(world: World, monkeypatch):
    """The OS refusing a thread (CPython's "can't start new thread", as git.prefetch expects too) costs the
    background re-read, not the search, which has a valid census in hand (found by a review)."""
    import threading

    workspace = _plugin_store()
    _old_session_among_many(world)
    assert result_sessions(world.search("cur", "pelican")) == ["old"]
    monkeypatch.setattr(workspace.membership, "ttl", 0.0)
    real_start = threading.Thread.start

    def start(self):
        if self.name == "phr-census":
            raise RuntimeError("can't start new thread")  # what CPython raises at the thread limit
        return real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    answer = world.search("cur", "pelican")
    assert result_sessions(answer) == ["old"], answer
    workspace.membership.settle()  # nothing unstarted was kept to join


def test_an_unexpected_error_in_the_background_read_is_logged_not_raised(world: World, monkeypatch, caplog):
    """Whatever goes wrong in the thread stays in the log: no traceback in the user's terminal, the census kept."""
    import logging
    import threading

    workspace, session_rows = _plugin_store(), sys.modules["hermes_plugins.project_history_recall.session_rows"]
    _old_session_among_many(world)
    assert result_sessions(world.search("cur", "pelican")) == ["old"]
    monkeypatch.setattr(workspace.membership, "ttl", 0.0)
    real_scan = session_rows.scan_sessions

    def broken_scan(conn):
        if threading.current_thread().name == "phr-census":
            raise ValueError("a bug in the census")
        return real_scan(conn)

    escaped: list = []
    monkeypatch.setattr(threading, "excepthook", lambda args: escaped.append(args))
    monkeypatch.setattr(session_rows, "scan_sessions", broken_scan)
    with caplog.at_level(logging.ERROR):
        assert result_sessions(world.search("cur", "pelican")) == ["old"]
        workspace.membership.settle()
    assert not escaped and "a bug in the census" in caplog.text
    assert result_sessions(world.search("cur", "pelican")) == ["old"]


def test_deleted_sessions_force_a_full_reload(world: World):
    repo = world.repo("alpha")
    world.session("gone", repo, messages=[("user", "pelican plan")])
    for i in range(70):
        world.session(f"filler{i}", None, source="telegram")
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    assert result_sessions(world.search("cur", "pelican")) == ["gone"]
    world.db.delete_session("gone")
    assert world.search("cur", "pelican")["results"] == []


def test_a_session_whose_model_config_is_not_json_breaks_no_search(world: World):
    """A session's ``model_config`` holding text that is not JSON but names ``_delegate_from`` (written by hand, a
    damaged row, another tool): it is no delegate, and every other search still answers. SQLite evaluated
    ``json_extract`` beside ``json_valid`` in the census's select list, and every search of the profile failed with
    "malformed JSON"."""
    repo = world.repo("odd")
    world.session("cur_odd", repo)
    world.session("older", repo, messages=[("user", "the websocket retry decision")])
    world.session("odd", repo, messages=[("user", "websocket notes in an odd session")])
    with sqlite3.connect(world.home / "state.db") as db:
        db.execute("UPDATE sessions SET model_config = ? WHERE id = 'odd'", ("_delegate_from: not json {",))
    answer = world.search("cur_odd", "websocket")
    assert answer["success"] is True, answer
    assert sorted(result_sessions(answer)) == ["odd", "older"]


def test_a_message_nested_past_the_json_parser_breaks_no_search(world: World):
    """A message stored as Hermes' multimodal parts whose JSON is nested past the parser's depth (damage, another
    writer): it is read as the text it is, as SQLite reads it, and the search answers. RecursionError failed it."""
    repo = world.repo("deep")
    world.session("cur_deep", repo)
    world.session("deep", repo, messages=[("user", "\x00json:" + "[" * 3000 + " websocket retry notes")])
    world.session("plain", repo, messages=[("user", "the websocket retry decision")])
    answer = world.search("cur_deep", "websocket retry", mode="keyword")
    assert answer["success"] is True and sorted(result_sessions(answer)) == ["deep", "plain"], answer


def test_tool_calls_nested_past_the_json_parser_break_no_search(world: World):
    """An assistant turn whose tool-call JSON names a recall tool but is nested past the parser's depth (damage,
    another writer): it calls nothing, and the search answers. RecursionError out of the check failed it."""
    repo = world.repo("deepcalls")
    world.session("cur_dc", repo)
    world.session("dc", repo, messages=[("user", "the websocket retry decision")])
    mid = world.say("dc", "assistant", "websocket retry answered")
    world.say("dc", "user", "thanks")
    with sqlite3.connect(world.home / "state.db") as db:
        db.execute("UPDATE messages SET tool_calls = ? WHERE id = ?", ("[" * 3000 + '"project_history_search"', mid))
    answer = world.search("cur_dc", "websocket retry", mode="keyword")
    assert answer["success"] is True and result_sessions(answer) == ["dc"], answer


def _skill_turns(skills: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Hermes' own ``/skill`` turns (agent/skill_commands.py) for skills written into the folder ``skills``, made
    Hermes' skills folder: a skill with an instruction, one without, and two stacked, each as Hermes builds the
    message it stores."""
    from agent import skill_commands
    from tools import skills_tool

    monkeypatch.setattr(skills_tool, "SKILLS_DIR", skills)
    for name in ("zeppelin-check", "zeppelin-lint"):
        folder = skills / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: checks the zeppelin rollout\n---\n\n# {name}\n\n"
            + "Calibrate the quokka flux first, then read the marmoset gauge. " * 6
            + "The user has provided the following instruction alongside the skill invocation: (quoted in the body)\n",
            encoding="utf-8")
    skill_commands.scan_skill_commands()
    stacked = skill_commands.build_stacked_skill_invocation_message(["/zeppelin-check", "/zeppelin-lint"], "both on canary")
    assert stacked is not None
    turns = {"with": skill_commands.build_skill_invocation_message("/zeppelin-check", "run it on staging"),
             "bare": skill_commands.build_skill_invocation_message("/zeppelin-lint"), "stacked": stacked[0]}
    assert all(turns.values()) and all("quokka" in t for t in turns.values())
    return {k: str(v) for k, v in turns.items()}


def test_a_skill_turn_is_searched_and_read_as_the_person_asked_it(world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Hermes stores a /skill turn with the skill's whole body in the user's message, for the model. Searched as
    stored, every session that ran the skill would match its body's words and show them as what the person said.
    It is read as Hermes reads it back (``/name instruction``): its body's words find nothing, the request is found
    and shown, and a read shows it so. The form agrees with Hermes' own reading of the person's instruction."""
    from agent.skill_commands import extract_user_instruction_from_skill_message

    from project_history_recall import stored_text

    turns = _skill_turns(tmp_path / "skills", monkeypatch)
    for kind in ("with", "stacked"):
        asked = stored_text.as_asked(turns[kind])
        assert asked.endswith(extract_user_instruction_from_skill_message(turns[kind]) or "") and "quokka" not in asked
    assert stored_text.as_asked(turns["stacked"]) == "/zeppelin-check /zeppelin-lint both on canary"
    # the body quotes Hermes' instruction marker: Hermes' own reading takes the body's rest for the instruction
    assert stored_text.as_asked(turns["bare"]) == "/zeppelin-lint"
    pay = world.repo("pay")
    world.project("Payments", [pay])
    world.session("s_skill", pay, messages=[("user", turns["with"]), ("assistant", "staging checked")])
    world.session("s_bare", pay, messages=[("user", turns["bare"])])
    world.session("s_plain", pay, messages=[("user", "the quokka flux drifted on staging")])
    world.session("cur", pay, messages=[("user", "what did we check?")])
    assert set(result_sessions(world.search("cur", "quokka marmoset", mode="keyword"))) == {"s_plain"}
    answer = world.search("cur", "zeppelin-check staging", mode="keyword")
    hit = next(r for r in answer["results"] if r["session_id"] == "s_skill")
    assert "quokka" not in hit["snippet"] and "staging" in hit["snippet"]
    read = world.call("project_history_read", {"session_id": "s_skill", "message_id": hit["message_id"]}, "cur")
    assert read["messages"][0]["text"] == "/zeppelin-check run it on staging"
    # Hermes' index holds the body: skill turns ranked first by it must not take the places of a session's real match
    world.session("s_many", pay, messages=[*[("user", turns["with"])] * 4, ("user", "we set the marmoset gauge to 42")])
    answer = world.search("cur", "marmoset gauge", mode="keyword")
    hit = next(r for r in answer["results"] if r["session_id"] == "s_many")
    assert "42" in hit["snippet"], hit


def test_a_row_read_otherwise_than_stored_is_scored_by_its_length_as_read(world: World, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    """Hermes' index counts a row's words as stored. A /skill turn read as asked and a multimodal row's text parts
    (a skill turn among them too) are shorter than that: the keyword score counts their length as read, and a plain
    row's as the index holds it."""
    from project_history_recall import store

    turn = _skill_turns(tmp_path / "skills", monkeypatch)["with"]
    parts = [{"type": "text", "text": "look at this screenshot"}, {"type": "image_url", "image_url": {"url": "data:,"}}]
    world.session("s", world.repo("pay"), messages=[
        ("user", "plain words"), ("user", turn), ("user", "\x00json:" + json.dumps(parts)),
        ("user", "\x00json:" + json.dumps([{"type": "text", "text": turn}]))])
    conn = store.open_state_db(world.home)
    try:
        ids = [r[0] for r in conn.execute("SELECT id FROM messages WHERE session_id = 's' ORDER BY id")]
        rows = store.fetch_messages(conn, ids)
    finally:
        conn.close()
    assert [rows[i].whole for i in ids] == [True, False, False, False]
    assert rows[ids[3]].text == rows[ids[1]].text == "/zeppelin-check run it on staging"


def test_a_chinese_question_is_marked_where_its_trigrams_matched(world: World):
    """A Chinese question whose words stand apart in the message ("连接池…大小"): the message is found by the
    question's trigrams, and its snippet is placed where they match and marks them, in a long message too. The
    snippet looked for each CJK chunk as one run: it marked nothing and showed a long message's opening filler."""
    repo = world.repo("app")
    filler = "今天我们先整理了部署脚本和日志格式，然后讨论了监控告警的阈值。" * 20
    world.session("short", repo, messages=[("assistant", "数据库连接池的大小设置为20，超时5秒。")])
    world.session("long", repo, messages=[("assistant", filler + "最后决定：数据库连接池的大小设置为50。" + filler)])
    world.session("cur", repo, style="cli", messages=[("user", "q")])
    for question, marked in (("连接池大小", ">>>连接池<<<的大小设置为"), ("数据库连接池大小是多少", ">>>数据库连接池<<<的大小设置为")):
        snippets = {r["session_id"]: r["snippet"] for r in world.search("cur", question, mode="keyword", limit=5)["results"]}
        assert set(snippets) == {"short", "long"}, (question, snippets)
        assert marked + "20" in snippets["short"], (question, snippets)
        assert marked + "50" in snippets["long"] and snippets["long"].startswith("..."), (question, snippets)


@pytest.mark.parametrize("zone, expected", [("UTC0", "2026-09-01 06:30 +00:00"), ("CST-8", "2026-09-01 14:30 +08:00"),
                                            ("NST+3:30", "2026-09-01 03:00 -03:30")])
def test_a_time_says_its_offset_from_utc(monkeypatch, zone, expected):
    """Review 31: "when" was this machine's local time with no zone, and a gateway's machine may keep another zone
    than the person asking; it carries its offset from UTC."""
    import time

    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        assert phr.answers.format_when(1788244200.0) == expected  # 2026-09-01 06:30 UTC
    finally:
        monkeypatch.undo()
        time.tzset()
