"""Recall does not feed on itself, through Hermes' real agent loop.

Hermes indexes an assistant message's ``tool_calls`` JSON and a tool
message's content in state.db's FTS (hermes_state.FTS_SQL). So every recall
conversation leaves searchable copies of its own query (the call to
``project_history_search``) and of its answer (the tool result, full of
snippets). The plugin leaves both out of what it ranks (store.RECALL_TOOLS,
store.fetch_messages, fts._NOT_ECHO); real tool output still counts.

Nothing here is staged by hand: real ``run_agent.AIAgent`` conversations,
constructed as the CLI constructs them (hermes_cli/cli_agent_setup_mixin.py)
and driven by a loopback stub model (tests/fake_chat.py), recall the redis
decision three times: the user asks in their own words and the model calls
``project_history_search`` with "what did we decide about redis?" through
Hermes' tool dispatch. One more conversation runs a real ``terminal``
command whose output is a Python traceback. The agent writes state.db itself, and
the session rows get the repo as cwd the way the plain CLI records it
(run_agent._launch_cwd_for_session: ``os.getcwd()`` for ``source="cli"``).

The conversations run once per module (about 5 s); the tests only read.
The user turns and the final answers avoid the words searched for, so in a
recall conversation only its echoes match: without the exclusion (scratch
copy with ``RECALL_TOOLS = ()``) those sessions rank above the decision.

A user turn that a recall answered (its session's next message calls a
recall tool) is an earlier question, not history: it is kept but weighted
down (store.recall_questions, ranking.demote), so asking the same question
verbatim a fourth time still finds the decision first.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import World, phr, result_sessions
from fake_chat import FakeChat

QUESTION = "what did we decide about redis?"
RUN_CHECK = "run the rate check and tell me what broke"
CHECK_SCRIPT = "rates_check.py"
#: How the user asks in each recall conversation: none of the query's content words.
ASKS = {
    "recall0": "which version of the cache server is pinned, and why?",
    "recall1": "remind me why the cache server version is held back",
    "recall2": "is the cache server still held at the older version?",
}
RECALL_SESSIONS = tuple(ASKS)
RECALL_TOOL_NAMES = ("project_history_search", "project_history_read", "project_history_recent",
                     "project_session_move", "project_history_semantic_consent", "session_search")
ECHO_MARKERS = ('"query"', '"results"', '"snippet"', "project_history_search")


def _respond(body: dict[str, Any]) -> dict[str, Any]:
    """The stub model: a tool call for the user's turn, then an answer after the tool result.

    Stateless (decided by the request's messages), so a retried request gets
    the same answer. The final answers avoid the words searched for later,
    so a hit on them can only come from the rows the test means.
    """
    messages = body["messages"]
    last = messages[-1]
    if last["role"] == "tool":
        if "ZeroDivisionError" in str(last.get("content")):
            return {"content": "The check crashed; the traceback is above."}
        return {"content": "Per the earlier session: pinned to 7.2, since 7.4 broke the lua scripts."}
    user = next(m for m in reversed(messages) if m["role"] == "user")
    text = user["content"] if isinstance(user["content"], str) else json.dumps(user["content"])
    if QUESTION in text or text in ASKS.values():
        return {"tool_calls": [("project_history_search", {"query": QUESTION, "mode": "keyword"})]}
    if RUN_CHECK in text:
        return {"tool_calls": [("terminal", {"command": f"{sys.executable} {CHECK_SCRIPT}"})]}
    raise AssertionError(f"unscripted user turn: {text!r}")


def _converse(world: World, chat: FakeChat, sid: str, prompt: str) -> dict[str, Any]:
    """One CLI conversation through ``AIAgent.run_conversation``, with its own SessionDB connection."""
    from hermes_state import SessionDB
    from run_agent import AIAgent

    db = SessionDB(db_path=world.home / "state.db")
    try:
        agent = AIAgent(
            model=chat.model,
            api_key="sk-loopback",  # explicit key + base_url: the client is built directly (agent_init)
            base_url=chat.base_url,
            provider="custom",
            api_mode="chat_completions",
            enabled_toolsets=["project_history_recall", "terminal"],
            quiet_mode=True,
            session_id=sid,
            platform="cli",
            session_db=db,
            skip_context_files=True,
            skip_memory=True,
            max_iterations=4,
            tool_delay=0.0,
        )
        return agent.run_conversation(prompt)
    finally:
        db.close()


def cli_in(world: World, mp: pytest.MonkeyPatch, app: Any) -> None:
    """A plain CLI launched in ``app`` (it exports TERMINAL_CWD for the terminal tool, cli.py
    load_cli_config; the local backend), and the human decision recorded there before."""
    mp.chdir(app)
    mp.setenv("TERMINAL_CWD", str(app))
    mp.setenv("TERMINAL_ENV", "local")
    world.session("decision", app, style="cli", messages=[
        ("user", "we decided to pin redis to 7.2 because 7.4 broke the lua scripts"),
        ("assistant", "noted: redis pinned to 7.2"),
    ])


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A repo with one human decision, three agent recall conversations and one real tool run."""
    mp = pytest.MonkeyPatch()
    chat = FakeChat(_respond)
    world = World(tmp_path_factory.mktemp("echo"), mp)
    try:
        app = world.repo("app")
        (app / CHECK_SCRIPT).write_text("def test_rates():\n    return 1 / 0\n\n\ntest_rates()\n")
        cli_in(world, mp, app)
        world.close()  # the agent writes through its own connection, like another process

        world.answers = {}
        for sid, ask in ASKS.items():
            world.answers[sid] = _converse(world, chat, sid, ask)
        world.answers["work"] = _converse(world, chat, "work", RUN_CHECK)
        assert not chat.errors, chat.errors
        world.chat_requests = list(chat.requests)

        world.session("now", app, style="cli", messages=[("user", "starting on the cache layer")])
        world.app = app
        yield world
    finally:
        world.close()
        chat.close()
        mp.undo()


def _rows(world: World, where: str = "1", params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
    conn = sqlite3.connect(world.home / "state.db")
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(
            f"SELECT m.id, m.session_id, m.role, m.content, m.tool_name, m.tool_calls, s.cwd, s.source"
            f" FROM messages m JOIN sessions s ON s.id = m.session_id WHERE {where} ORDER BY m.id", params
        ).fetchall()
    finally:
        conn.close()


def _fts(world: World, match: str) -> set[int]:
    conn = sqlite3.connect(world.home / "state.db")
    try:
        return {int(r[0]) for r in conn.execute("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (match,))}
    finally:
        conn.close()


def _calls(row: sqlite3.Row) -> list[dict[str, Any]]:
    return json.loads(row["tool_calls"]) if row["tool_calls"] else []


def _call_name(call: dict[str, Any]) -> str:
    return (call.get("function") or {}).get("name") or call.get("name") or ""


def test_the_agent_loop_really_stored_searchable_echoes(history: World) -> None:
    """The premise: without the exclusion, the recall conversations' own rows would be keyword hits."""
    w = history
    for sid, answer in w.answers.items():
        assert answer.get("completed") is True and answer.get("final_response"), (sid, answer)
    # Two model requests per conversation (tool call, then answer); the plugin's
    # tool was offered to the model by Hermes' real loader and toolset resolution.
    assert len(w.chat_requests) == 8
    offered = {t["function"]["name"] for t in w.chat_requests[0].get("tools", [])}
    assert {"project_history_search", "terminal"} <= offered

    rows = _rows(w)
    sessions = {r["session_id"]: (r["cwd"], r["source"]) for r in rows}
    for sid in (*RECALL_SESSIONS, "work"):
        assert sessions[sid] == (str(w.app), "cli"), sid

    redis_hits = _fts(w, "redis")
    for sid in RECALL_SESSIONS:
        mine = [r for r in rows if r["session_id"] == sid]
        calls = [r for r in mine if r["role"] == "assistant" and any(_call_name(c) == "project_history_search" for c in _calls(r))]
        answers = [r for r in mine if r["role"] == "tool" and r["tool_name"] == "project_history_search"]
        assert len(calls) == 1 and len(answers) == 1, [dict(r) for r in mine]
        (call,) = _calls(calls[0])
        assert json.loads(call["function"]["arguments"])["query"] == QUESTION
        answer = json.loads(answers[0]["content"])
        assert answer["success"] is True and answer["results"], answer
        # Both echoes are in Hermes' FTS index: a plain MATCH finds them.
        assert calls[0]["id"] in redis_hits and answers[0]["id"] in redis_hits, sid
        # The answer is the row right after its call, which is how store.recall_answers finds it.
        assert [r["id"] for r in mine if r["id"] > calls[0]["id"]][0] == answers[0]["id"], [dict(r) for r in mine]
        conn = sqlite3.connect(f"file:{w.home / 'state.db'}?mode=ro", uri=True)
        try:
            found = phr.store.recall_answers(conn, [mine[-1]["id"]])
        finally:
            conn.close()
        assert [tid for tid, _ in found[mine[-1]["id"]]] == [answers[0]["id"]], (sid, found)
    # The very first recall, before any echo existed, found the decision.
    first = json.loads(next(r["content"] for r in rows if r["session_id"] == "recall0" and r["role"] == "tool"))
    assert first["results"][0]["session_id"] == "decision"
    # Every answer quotes the decision's words: each recall adds another copy to the index.
    for sid in RECALL_SESSIONS:
        quoted = next(r["content"] for r in rows if r["session_id"] == sid and r["role"] == "tool")
        assert '"session_id": "decision"' in quoted and ">>>redis<<<" in quoted, sid


def test_recall_echoes_are_never_ranked(history: World) -> None:
    w = history
    answer = w.search("now", QUESTION, limit=3, mode="keyword")
    found = result_sessions(answer)
    assert found[0] == "decision", answer
    # The recall conversations match only through their echoes: they are not found at all.
    assert not set(found) & set(RECALL_SESSIONS), answer
    by_id = {r["id"]: r for r in _rows(w)}
    everything = w.search("now", QUESTION, limit=10, mode="keyword")
    for result in answer["results"] + everything["results"]:
        row = by_id[result["message_id"]]
        assert row["role"] in ("user", "assistant") and row["tool_name"] is None, (result, dict(row))
        assert not any(_call_name(c) in RECALL_TOOL_NAMES for c in _calls(row)), (result, dict(row))
        assert row["content"], (result, dict(row))  # not an assistant row that is only a recall call
        for marker in ECHO_MARKERS:
            assert marker not in result["snippet"], result
    assert everything.get("next_cursor") is None, everything


def test_real_tool_output_still_counts(history: World) -> None:
    w = history
    answer = w.search("now", "ZeroDivisionError test_rates", limit=3, mode="keyword")
    assert result_sessions(answer) == ["work"], answer
    (result,) = answer["results"]
    row = {r["id"]: r for r in _rows(w)}[result["message_id"]]
    # The hit is the terminal tool's own output row (the call only names the script).
    assert (row["role"], row["tool_name"]) == ("tool", "terminal"), dict(row)
    assert "ZeroDivisionError" in row["content"] and "ZeroDivisionError" in result["snippet"], result


def test_a_question_asked_verbatim_before_does_not_bury_the_decision(world: World, monkeypatch) -> None:
    """The user turn a recall answered is an earlier question, not history: it ranks after the decision."""
    app = world.repo("app")
    cli_in(world, monkeypatch, app)
    # Another project's everyday history: word weights as in a real state.db, not a seven-row one.
    world.session("elsewhere", world.repo("other"), style="cli", messages=[
        ("user" if i % 2 else "assistant", f"step {i}: refactor the parser and update the tests") for i in range(200)
    ])
    world.close()
    chat = FakeChat(_respond)
    try:
        assert _converse(world, chat, "asked", QUESTION).get("completed") is True
    finally:
        chat.close()
    world.session("now", app, style="cli", messages=[("user", "starting on the cache layer")])
    answer = world.search("now", QUESTION, limit=3, mode="keyword")
    assert result_sessions(answer)[0] == "decision", answer


def _one_tick(world: World, sid: str, rows: list[tuple[str, str, bool]], tick: float = 1_800_000_000.0) -> list[int]:
    """Messages ``(role, content, calls a recall)`` of ``sid``, the first two in one clock tick (one timestamp, ids in
    order), the rest a second apart; their ids."""
    call = [{"id": "c", "type": "function", "function": {"name": "project_history_search", "arguments": json.dumps({"query": QUESTION})}}]
    return [world.db.append_message(sid, role, content, tool_calls=call if recall else None, timestamp=tick + max(i - 1, 0))
            for i, (role, content, recall) in enumerate(rows)]


def test_the_turn_after_a_question_is_the_next_in_order_within_a_clock_tick(world: World, monkeypatch) -> None:
    """A question written in the same clock tick as the message before it: the turn checked for a recall call is the
    one after it (timestamp, then id), not the earlier row sharing its timestamp. Checking that one left the verbatim
    earlier question unweighted, above the decision."""
    app = world.repo("app")
    cli_in(world, monkeypatch, app)
    world.session("elsewhere", world.repo("other"), style="cli", messages=[
        ("user" if i % 2 else "assistant", f"step {i}: refactor the parser and update the tests") for i in range(200)
    ])
    world.session("asked", app, style="cli")
    _one_tick(world, "asked", [("assistant", "starting on the cache layer", False), ("user", QUESTION, False), ("assistant", "", True)])
    world.session("now", app, style="cli", messages=[("user", "starting on the cache layer")])
    answer = world.search("now", QUESTION, limit=3, mode="keyword")
    assert result_sessions(answer)[0] == "decision", answer


def test_a_recall_call_before_a_question_in_its_clock_tick_is_not_its_answer(world: World) -> None:
    """The other way round: a question written in the tick of the recall call before it, and answered in words, is no
    earlier question."""
    world.session("s", world.repo("app"), style="cli")
    _, question, _ = _one_tick(world, "s", [("assistant", "", True), ("user", "and the lua scripts?", False),
                                             ("assistant", "they broke on 7.4", False)])
    conn = phr.store.open_state_db(world.home)
    try:
        assert phr.store.recall_questions(conn, [question]) == set()
    finally:
        conn.close()


def test_an_answer_nested_past_the_parsers_depth_quotes_nothing():
    """A tool row named like a recall tool whose content is brackets nested past the JSON parser's depth (damage,
    or another writer): no quoted text, never an error out of the check (RecursionError failed the search)."""
    assert phr.echo.recall_snippets("[" * 5000) == []
    assert phr.echo.recall_snippets('{"results": [{"snippet": "the jitter decision"}]}') == ["the jitter decision"]


def test_a_notice_of_background_work_answered_by_a_recall_is_no_earlier_question(world: World) -> None:
    """Hermes wakes the agent with a notice of background work (a user row, read as tool output: the person wrote
    none); when the agent's next turn calls a recall tool, the notice is its work's output, not a question a recall
    answered: it keeps its weight (it was weighed down as an earlier question)."""
    from tools.process_registry import format_process_notification

    world.session("s", world.repo("app"), style="cli")
    notice = world.say("s", "user", format_process_notification({
        "type": "async_delegation", "delegation_id": "d1", "goal": "audit", "status": "completed",
        "summary": "the wombat ledger double-counts refunds"}))
    world.say("s", "assistant", "", tool_calls=[{"id": "c1", "type": "function", "function": {
        "name": "project_history_search", "arguments": json.dumps({"query": "wombat ledger"})}}])
    question = world.say("s", "user", "why does the wombat ledger fail?")
    world.say("s", "assistant", "", tool_calls=[{"id": "c2", "type": "function", "function": {
        "name": "project_history_search", "arguments": json.dumps({"query": "wombat ledger"})}}])
    conn = phr.store.open_state_db(world.home)
    try:
        assert phr.store.recall_questions(conn, [notice, question]) == {question}
    finally:
        conn.close()
