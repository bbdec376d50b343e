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

import pytest
from conftest import World, phr, result_sessions, seed_local_model

E = phr.echo

DECISION = "Decision: the websocket client reconnects with exponential backoff and full jitter, capped at 30 seconds."
SNIPPET = "Decision: the >>>websocket<<< client reconnects with exponential backoff and full jitter, capped at 30 seconds."


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


def _bytes_read() -> int:
    """Bytes this process has read through read(2) so far (page cache hits included): SQLite's page reads."""
    return int(next(line.split()[1] for line in open("/proc/self/io") if line.startswith("rchar:")))


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
        before = _bytes_read()
        echoes = phr.store.recall_echoes(conn, [reply])
        read = _bytes_read() - before
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
        conn = phr.store.open_state_db(world.home)
        steps.append(0)

        def step() -> int:
            steps[-1] += 1
            return 0

        conn.set_progress_handler(step, 100)
        try:
            assert phr.store.recall_echoes(conn, [reply]) == set()
        finally:
            conn.close()
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
