"""Echoes of earlier recalls in the assistant's own replies (``echo.py``, ``store.recall_echoes``).

A recall's tool calls and answers are left out already (tests/test_echo.py);
the reply that follows often repeats what it found: the snippet with its
``>>>match<<<`` markers and ``@session:`` link, or the snippet's words in a
sentence of its own. Those replies are ranked as earlier questions are, below
the decision they quote, in keyword, semantic and hybrid mode alike; and a
snippet of such a reply is marked once, never ``>>>>>>websocket<<<<<<``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest
from conftest import World, phr, result_sessions, seed_local_model
from work import bytes_read

E = phr.echo

DECISION = "Decision: the websocket client reconnects with exponential backoff and full jitter, capped at 30 seconds."
SNIPPET = "Decision: the >>>websocket<<< client reconnects with exponential backoff and full jitter, capped at 30 seconds."


def steps_of(world: World, check: Callable[[sqlite3.Connection], bool]) -> int:
    """SQLite's steps, in hundreds, that ``check`` takes on a new state.db connection; ``check`` must hold."""
    conn = phr.store.open_state_db(world.home)
    steps = [0]

    def step() -> int:
        steps[0] += 1
        return 0

    conn.set_progress_handler(step, 100)
    try:
        assert check(conn)
    finally:
        conn.close()
    return steps[0]


def test_shows_recall():
    assert E.shows_recall("Earlier: the >>>websocket<<< client reconnects")
    assert E.shows_recall("see @session:20260901_143022_a1b2")
    assert not E.shows_recall(">>> import websocket\n>>> websocket.connect()")  # a Python prompt is no marker
    assert not E.shows_recall("a << b and c >> d")


def test_quotes_and_recall_snippets():
    answer = json.dumps({"success": True, "results": [{"snippet": "..." + SNIPPET + "...", "session_id": "d"}]})
    snippets = E.recall_snippets(answer)
    assert snippets and ">>>" not in snippets[0]
    runs = E.runs(snippets)
    assert E.quotes("As decided then, the websocket client reconnects with exponential backoff and full jitter.", [runs])
    assert not E.quotes("We should look at the websocket backoff again.", [runs])
    assert not E.quotes("As decided then, the websocket client reconnects with exponential backoff.", [E.runs(["too short"])])
    assert E.recall_snippets("not json") == [] and E.recall_snippets("[1, 2]") == []
    read = json.dumps({"success": True, "messages": [{"text": DECISION}]})
    assert E.recall_snippets(read) == [DECISION]


def test_snippet_of_an_echo_is_marked_once():
    units = phr.query.parse_query("websocket").units
    snippet = phr.snippet.make_snippet("We said: " + SNIPPET, units)
    assert ">>>websocket<<<" in snippet and ">>>>>>" not in snippet and "<<<<<<" not in snippet


@pytest.fixture
def echoes(world: World) -> World:
    """A decision, two later sessions whose replies echo a recall of it (marked; quoted in words), the asker."""
    repo = world.repo("payments")
    world.session("decision", repo, messages=[("user", "how should the websocket client reconnect?"), ("assistant", DECISION)])
    world.session("marked", repo, messages=[("user", "remind me of the reconnect rule"),
                                            ("assistant", f"How does the websocket client reconnect after a drop? You decided earlier "
                                                          f"(@session:decision): {SNIPPET} Full jitter backoff websocket.")])
    world.session("quoted", repo, messages=[("user", "remind me once more")])
    world.say("quoted", "assistant", "", tool_calls=[{"id": "c1", "type": "function", "function": {
        "name": "project_history_search", "arguments": json.dumps({"query": "websocket reconnect"})}}])
    world.say("quoted", "tool", json.dumps({"success": True, "results": [{"session_id": "decision", "snippet": SNIPPET}]}),
              tool_name="project_history_search", tool_call_id="c1")
    world.say("quoted", "assistant", "As found: the websocket client reconnects with exponential backoff and full jitter, "
                                     "capped at 30 seconds. Websocket backoff websocket jitter.")
    world.session("cur", repo, style="cli", messages=[("user", "let's go on")])
    return world


def test_echoes_rank_below_the_decision_they_quote(echoes: World):
    answer = echoes.search("cur", "websocket backoff jitter", mode="keyword", limit=5)
    order = result_sessions(answer)
    assert order[0] == "decision", order
    assert ">>>>>>" not in json.dumps(answer)


def test_echoes_rank_below_the_decision_by_meaning_too(echoes: World, local_model):
    seed_local_model(echoes, local_model)
    echoes.configure_embedding(provider="local")
    assert echoes.call("project_history_semantic_consent", {"decision": "allow"}, "cur")["success"]
    try:
        for mode in ("semantic", "hybrid"):
            answer = echoes.search("cur", "how does the websocket client reconnect after a drop?", mode=mode, limit=5)
            assert answer["semantic_status"] == "ready", answer
            assert result_sessions(answer)[0] == "decision", (mode, answer)
    finally:
        import importlib

        importlib.import_module("hermes_plugins.project_history_recall.vector_index").reset_indexes()


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/io"), reason="needs Linux's /proc/self/io")
def test_finding_a_sessions_recall_answers_reads_none_of_its_tool_logs(world: World):
    """A tool row keeps its name after its content: telling the recall answers among 100 KB tool logs by their
    names would read every log. They are found through the turns that called them instead."""
    repo = world.repo("build")
    world.session("long", repo, messages=[("user", "run the build and remind me of the reconnect rule")])
    for i in range(40):
        world.say("long", "assistant", "", tool_calls=[{"id": f"t{i}", "type": "function", "function": {
            "name": "terminal", "arguments": json.dumps({"command": "make"})}}])
        world.say("long", "tool", f"build log {i}: " + "compiling module ok " * 5_000, tool_name="terminal", tool_call_id=f"t{i}")
    world.say("long", "assistant", "", tool_calls=[{"id": "r", "type": "function", "function": {
        "name": "project_history_search", "arguments": json.dumps({"query": "websocket reconnect"})}}])
    world.say("long", "tool", json.dumps({"success": True, "results": [{"session_id": "decision", "snippet": SNIPPET}]}),
              tool_name="project_history_search", tool_call_id="r")
    reply = world.say("long", "assistant", "As found: the websocket client reconnects with exponential backoff and full "
                                           "jitter, capped at 30 seconds.")
    conn = phr.store.open_state_db(world.home)
    try:
        before = bytes_read()
        echoes = phr.store.recall_echoes(conn, [reply])
        read = bytes_read() - before
    finally:
        conn.close()
    assert echoes == {reply}
    assert read < 1_000_000, f"{read:,} bytes read: the 4 MB of tool logs were walked"


def test_the_echo_check_of_a_reply_costs_the_same_in_a_long_session(world: World):
    """A reply's recall answers are looked for among the messages right before it: SQLite's steps for a reply
    at the end of a session of 1,200 messages are those of one of 300 (scanning the session: 4 times more)."""
    repo = world.repo("chatty")

    def session(sid: str, turns: int) -> int:
        world.session(sid, repo, messages=[("user", "start")])
        for i in range(turns):
            world.say(sid, "user", f"step {i}: check the queue")
            world.say(sid, "assistant", f"step {i} done")
        return world.say(sid, "assistant", "As found: the websocket client reconnects with exponential backoff.")

    steps = []
    for sid, turns in (("short", 150), ("long", 600)):
        reply = session(sid, turns)
        steps.append(steps_of(world, lambda conn, reply=reply: phr.store.recall_echoes(conn, [reply]) == set()))
    assert steps[1] <= 1.5 * max(steps[0], 1), steps


def test_the_check_for_earlier_recalls_costs_the_same_in_a_session_sharing_one_timestamp(world: World):
    """Every row of a session may carry one timestamp (a clock that does not tick, an import). The check of its
    first and last turns reads their windows and next messages only: SQLite's steps in a session of 600 rows are
    those of one of 150. Seeking with one condition on the tick stepped through every row of it written after a
    reply (or before a question), and the answers were looked for among all rows between a call and the reply."""
    repo = world.repo("tick")
    tick = 1_800_000_000.0

    def session(sid: str, rows: int) -> tuple[list[int], set[int]]:
        world.session(sid, repo)
        ids: list[int] = []
        for i in range(rows // 4):
            ids.append(int(world.db.append_message(sid, "user", f"what was rule {i}", timestamp=tick)))
            world.db.append_message(sid, "assistant", "", timestamp=tick, tool_calls=[{"id": f"r{i}", "type": "function",
                                    "function": {"name": "project_history_search", "arguments": "{}"}}])
            world.db.append_message(sid, "tool", json.dumps({"success": True, "results": [{"snippet": SNIPPET}]}),
                                    timestamp=tick, tool_name="project_history_search", tool_call_id=f"r{i}")
            ids.append(int(world.db.append_message(sid, "assistant", "As found: the websocket client reconnects with "
                                                   "exponential backoff and full jitter.", timestamp=tick)))
        return ids[:8] + ids[-4:], set(ids[:8] + ids[-4:])

    steps = []
    for sid, rows in (("short", 150), ("long", 600)):
        first, expected = session(sid, rows)
        steps.append(steps_of(world, lambda conn, first=first, expected=expected:
                              phr.store.earlier_recalls(conn, first) == expected))
    assert steps[1] <= 1.5 * max(steps[0], 1), steps


def test_rows_sharing_a_replys_later_tick_after_it_are_not_read_for_its_answers(world: World):
    """A call in one clock tick, its answer and the reply quoting it in the next, and many rows written after the
    reply in that same tick (an import, a clock that stopped): the answers are looked for among the rows between
    the call and the reply only, so SQLite's steps with 600 rows after the reply are those with 150."""
    repo = world.repo("later-tick")
    tick = 1_800_000_000.0

    def session(sid: str, after: int) -> int:
        world.session(sid, repo)
        world.db.append_message(sid, "user", "remind me of the reconnect rule", timestamp=tick)
        world.db.append_message(sid, "assistant", "", timestamp=tick, tool_calls=[{"id": "r", "type": "function",
                                "function": {"name": "project_history_search", "arguments": "{}"}}])
        world.db.append_message(sid, "tool", json.dumps({"success": True, "results": [{"snippet": SNIPPET}]}),
                                timestamp=tick + 1, tool_name="project_history_search", tool_call_id="r")
        reply = int(world.db.append_message(sid, "assistant", "As found: the websocket client reconnects with "
                                            "exponential backoff and full jitter.", timestamp=tick + 1))
        for i in range(after):
            world.db.append_message(sid, "tool" if i % 2 else "user", f"later row {i}", timestamp=tick + 1,
                                    tool_name="terminal" if i % 2 else None)
        return reply

    steps = []
    for sid, after in (("short", 150), ("long", 600)):
        reply = session(sid, after)
        steps.append(steps_of(world, lambda conn, reply=reply: phr.store.recall_echoes(conn, [reply]) == {reply}))
    assert steps[1] <= 1.5 * max(steps[0], 1), steps


def test_rows_sharing_a_replys_timestamp_after_it_do_not_shorten_its_reach(world: World):
    """The ``ECHO_REACH`` messages before a reply are counted in (timestamp, id) order: rows written after it in the
    same clock tick are not among them, and did not take the place of the oldest ones (the recall it quotes)."""
    world.session("s", world.repo("app"), messages=[("user", "remind me of the reconnect rule")])
    tick = 1_800_000_000.0

    def say(role: str, content: str, at: float, **kw) -> int:
        return int(world.db.append_message("s", role, content, timestamp=at, **kw))

    say("assistant", "", tick, tool_calls=[{"id": "r", "type": "function", "function": {
        "name": "project_history_search", "arguments": json.dumps({"query": "websocket reconnect"})}}])
    say("tool", json.dumps({"success": True, "results": [{"session_id": "decision", "snippet": SNIPPET}]}), tick + 1,
        tool_name="project_history_search", tool_call_id="r")
    for i in range(phr.store.ECHO_REACH - 2):
        say("user" if i % 2 else "assistant", f"step {i}", tick + 2 + i)
    end = tick + phr.store.ECHO_REACH
    reply = say("assistant", "As found: the websocket client reconnects with exponential backoff and full jitter.", end)
    for i in range(3):
        say("user", f"later in the same tick {i}", end)
    conn = phr.store.open_state_db(world.home)
    try:
        assert phr.store.recall_echoes(conn, [reply]) == {reply}
    finally:
        conn.close()


def test_the_check_for_earlier_recalls_runs_a_few_statements_for_a_page_of_replies(world: World):
    """The check reads the windows before all replies in one statement, then the recall answers found through
    them: four statements for 36 replies in 12 sessions, whatever their number (one a reply's window and one a
    session's answers before: 50)."""
    repo = world.repo("app")
    ids, expected = [], set()
    for s in range(12):
        sid = world.session(f"s{s}", repo)
        question = world.say(sid, "user", "remind me of the reconnect rule")
        world.say(sid, "assistant", "", tool_calls=[{"id": "r", "type": "function", "function": {
            "name": "project_history_search", "arguments": json.dumps({"query": "websocket reconnect"})}}])
        world.say(sid, "tool", json.dumps({"success": True, "results": [{"session_id": "decision", "snippet": SNIPPET}]}),
                  tool_name="project_history_search", tool_call_id="r")
        quoting = world.say(sid, "assistant", "As found: the websocket client reconnects with exponential backoff and full jitter.")
        plain = [world.say(sid, "assistant", f"step {i}: the queue drains") for i in range(2)]
        ids += [question, quoting, *plain]
        expected |= {question, quoting}
    conn = phr.store.open_state_db(world.home)
    phr.store.layout_of(conn)  # the schema's facts, read once per connection (as every search's first read does)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        found = phr.store.earlier_recalls(conn, ids)
    finally:
        conn.close()
    assert found == expected
    assert len(statements) <= 4, len(statements)


def test_every_recall_tool_is_told_apart_inside_sqlite():
    """Tool calls holding no part of a recall tool's name never reach Python: a recall tool named without one
    would never be found calling."""
    assert all(any(part in name for part in phr.store._RECALL_NAME_PARTS) for name in phr.store.RECALL_TOOLS)


def _sessions(world: World, layout: str, sids: tuple[str, ...]) -> Any:
    """Sessions ``sids`` of a 0.19 state.db or a schema-30 one (``layout``), and ``say(sid, role, content, at,
    **columns) -> id`` writing a row of one at timestamp ``at`` as Hermes' SQL does."""
    if layout == "0.19":
        for sid in sids:
            world.session(sid, world.repo(f"app-{sid}"))
    else:
        from schema30 import Schema30

        db = Schema30(world.home / "state.db", layout)
        for sid in sids:
            db.session(sid)

    def say(sid: str, role: str, content: str, at: float, **columns: Any) -> int:
        row = {"session_id": sid, "role": role, "content": content, "timestamp": at, **columns}
        with sqlite3.connect(world.home / "state.db") as conn:
            cursor = conn.execute(f"INSERT INTO messages ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                                  tuple(row.values()))
        conn.close()
        return int(cursor.lastrowid or 0)

    return say


@pytest.mark.parametrize("layout", ["0.19", "fresh"])
def test_a_replys_window_counts_rewound_and_hidden_rows_in_timestamp_order(world: World, monkeypatch, layout: str):
    """A reply's ``ECHO_REACH`` messages (4 here) are the rows of its session before it in (timestamp, id) order:
    rewound and hidden ones count, a row written after a clock step back sits where its timestamp puts it, rows
    sharing a timestamp are in id order. Those windows decide which replies echo a recall, on either layout."""
    monkeypatch.setattr(phr.store, "ECHO_REACH", 4)
    say, tick = _sessions(world, layout, ("hidden", "stepped", "tick", "early")), 1_800_000_000.0
    quote = "As found: the websocket client reconnects with exponential backoff and full jitter."
    call = json.dumps([{"id": "r", "type": "function", "function": {"name": "project_history_search", "arguments": "{}"}}])
    answer = json.dumps({"success": True, "results": [{"snippet": SNIPPET}]})

    def recall(sid: str) -> int:
        question = say(sid, "user", "remind me of the reconnect rule", tick)
        say(sid, "assistant", "", tick + 1, tool_calls=call)
        say(sid, "tool", answer, tick + 2, tool_name="project_history_search")
        return question

    questions = [recall(sid) for sid in ("hidden", "stepped", "tick", "early")]
    say("hidden", "assistant", "a rewound turn", tick + 3, active=0)
    say("hidden", "assistant", "a hidden turn", tick + 4, **({"active": 0} if layout == "0.19" else {"display_kind": "hidden_scaffold"}))
    within = say("hidden", "assistant", quote, tick + 5)  # the call, the answer, the two turns
    say("hidden", "user", "go on", tick + 6)
    beyond = say("hidden", "assistant", quote, tick + 7)  # the answer is five rows back
    for i in range(5):
        say("stepped", "user" if i % 2 else "assistant", f"step {i}", tick + 3 + i)
    stepped_back = say("stepped", "assistant", quote, tick + 2.5)  # written last, right after the answer in time
    same_tick = say("tick", "assistant", quote, tick + 2)  # the answer's timestamp, a higher id: after it
    say("early", "user", "go on", tick + 3)
    before_answer = say("early", "assistant", quote, tick + 1)  # the call's timestamp: the answer is after it
    replies = [within, beyond, stepped_back, same_tick, before_answer]
    conn = phr.store.open_state_db(world.home)
    try:
        assert phr.store.recall_echoes(conn, replies) == {within, stepped_back, same_tick}
        assert phr.store.recall_questions(conn, [*questions, *replies]) == set(questions)
    finally:
        conn.close()


def test_a_replys_verdict_does_not_depend_on_the_replies_asked_with_it(world: World, monkeypatch):
    """A recall answer counts for a reply when the turn that called it lies in the reply's window: a later reply
    whose window holds the answer but not its call is no echo, asked alone or beside one whose window holds both."""
    monkeypatch.setattr(phr.store, "ECHO_REACH", 4)
    sid = world.session("s", world.repo("app"), messages=[("user", "remind me of the reconnect rule")])
    quote = "As found: the websocket client reconnects with exponential backoff and full jitter."
    world.say(sid, "assistant", "", tool_calls=[{"id": "r", "type": "function", "function": {
        "name": "project_history_search", "arguments": "{}"}}])
    world.say(sid, "tool", json.dumps({"success": True, "results": [{"snippet": SNIPPET}]}),
              tool_name="project_history_search", tool_call_id="r")
    near = world.say(sid, "assistant", quote)
    world.say(sid, "user", "and then?")
    world.say(sid, "assistant", "the queue drains")
    far = world.say(sid, "assistant", quote)  # its 4 rows before: the answer, not the call
    conn = phr.store.open_state_db(world.home)
    try:
        alone = {reply: phr.store.recall_echoes(conn, [reply]) for reply in (near, far)}
        together = phr.store.recall_echoes(conn, [near, far])
    finally:
        conn.close()
    assert alone == {near: {near}, far: set()} and together == {near}
