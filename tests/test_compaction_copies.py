"""Copies left by Hermes' in-place compaction before hermes-agent #99545 (#86366): each message is shown once.

``archive_and_compact`` archived every live row (``active = 0, compacted = 1``) and inserted the summary and the
tail it carried forward as new live rows, each copy with its original's timestamp: after n compactions a message
of the tail is stored n + 1 times. Hermes' transcript (``get_messages(include_compacted=True)``, the resume
history) shows each message once: rows of a session alike in role, content, timestamp and tool columns are one
message, shown as its live row, else its newest (``hermes_state_messages._dedupe_display_generations`` and
``_display_rows_from_conn``, NousResearch/hermes-agent 01e8a2d0; :func:`hermes_shows` below is that rule).

The files are written by the 0.19 host's own ``SessionDB.archive_and_compact`` (the code before #99545) and, for
schema 30 and 31, as that code writes them (``Schema30.compact``).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any

import pytest
from conftest import World, result_sessions
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from schema30 import Schema30

TURNS = [("user", "plan the heron queue"), ("assistant", "heron queue uses retries"), ("user", "ok"),
         ("assistant", "the heron backoff is exponential with jitter"), ("user", "ok"), ("assistant", "noted, jitter it is")]
LATER = [("user", "what about dead letters?"), ("assistant", "dead letters go to the heron-dlq topic")]


def hermes_shows(path: Any, sid: str) -> list[int]:
    """The ids Hermes' transcript shows of ``sid``, in its order: its display rule (``_dedupe_display_generations``)
    on the rows it reads (``active = 1 OR compacted = 1``): of the rows alike, the live one, else the newest, where
    the first of them lies."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT id, active, role, content, timestamp, tool_call_id, tool_calls, tool_name FROM messages"
                            " WHERE session_id = ? AND (active = 1 OR compacted = 1) ORDER BY id", (sid,)).fetchall()
    chosen: dict[tuple[Any, ...], tuple[int, int]] = {}
    first: dict[tuple[Any, ...], int] = {}
    for mid, active, *key in rows:
        chosen[tuple(key)] = max(chosen.get(tuple(key), (0, 0)), (int(active == 1), mid))
        first.setdefault(tuple(key), mid)
    return [chosen[key][1] for key in sorted(chosen, key=first.__getitem__)]


@pytest.fixture(params=["0.19", "30", "31"])
def compacted(request: pytest.FixtureRequest, world: World) -> World:
    """Session ``long`` (asked from ``cur``): :data:`TURNS`, compacted keeping its first message and last two,
    :data:`LATER`, compacted again keeping the same. ``world.copies``: the live copies' ids, the last two."""
    alpha = world.repo("alpha")
    if request.param == "0.19":
        world.session("long", alpha, messages=TURNS)
        for extra, summary in (([], "[CONTEXT COMPACTION] heron queue and backoff"), (LATER, "[CONTEXT COMPACTION] dead letters")):
            for role, text in extra:
                world.say("long", role, text)
            live = world.db.get_messages_as_conversation("long")
            world.db.archive_and_compact("long", [live[0], {"role": "user", "content": summary}, *live[-2:]])
        world.session("cur", alpha, messages=[("user", "hi")])
        with sqlite3.connect(world.home / "state.db") as conn:
            world.copies = [r[0] for r in conn.execute("SELECT id FROM messages WHERE session_id = 'long' AND active = 1"
                                                       " AND content NOT LIKE '[CONTEXT%' ORDER BY id")][-2:]
    else:
        db = Schema30(world.home / "state.db", "fresh", schema=int(request.param))
        db.session("long", cwd=alpha, git_repo_root=alpha, messages=TURNS)
        db.compact("long", "[CONTEXT COMPACTION] heron queue and backoff", keep=2, head=1)
        for role, text in LATER:
            db.say("long", role, text)
        world.copies = db.compact("long", "[CONTEXT COMPACTION] dead letters", keep=2, head=1)
        db.session("cur", cwd=alpha, git_repo_root=alpha, messages=[("user", "hi")])
    return world


def read(world: World, **args: Any) -> dict[str, Any]:
    return world.call("project_history_read", {"session_id": "long", "max_chars": 20_000, **args}, "cur")


def test_the_window_shows_what_hermes_shows_each_message_once(compacted: World):
    """Read from the start: the messages Hermes' transcript shows, each once and where it was first said (the carried
    head was there three times, the first question ahead of all; the tail two or three times: the second "ok" and
    "noted", the dead letters); messages summarized away with no live copy stay, and the first "ok", said at another
    time, is a message of its own. Before, the copies were all shown; shown once as the live copy where it lies, the
    first question came after the rest of the first compaction's messages."""
    shown = hermes_shows(compacted.home / "state.db", "long")
    answer = read(compacted, after=30)
    assert [m["message_id"] for m in answer["messages"]] == shown, answer
    texts = [m["text"] for m in answer["messages"] if not m.get("left_out")]
    assert texts == [text for _, text in TURNS + LATER], texts
    with sqlite3.connect(compacted.home / "state.db") as conn:  # the summaries: Hermes' handoff to the model, no history
        summaries = {r[0] for r in conn.execute("SELECT id FROM messages WHERE content LIKE '[CONTEXT COMPACTION]%'")}
    assert summaries and {m["message_id"] for m in answer["messages"] if m.get("left_out")} == summaries & set(shown)


def test_an_archived_copy_is_no_anchor_and_its_live_copy_reads_once(compacted: World):
    """Around the live copy of the last answer: the question before it once. Around an archived copy of it Hermes
    does not show: no window, as for any row it does not show."""
    last = compacted.copies[-1]
    answer = read(compacted, message_id=last, before=3, after=0)
    assert [m["text"] for m in answer["messages"][-2:]] == [text for _, text in LATER], answer
    assert len({m["text"] for m in answer["messages"]}) == len(answer["messages"]), answer
    with sqlite3.connect(compacted.home / "state.db") as conn:
        archived = [r[0] for r in conn.execute("SELECT id FROM messages WHERE session_id = 'long' AND compacted = 1 AND"
                                               " content = ?", (LATER[-1][1],))]
    assert archived and all(read(compacted, message_id=mid)["code"] == "session_not_found" for mid in archived)


def test_search_and_recent_name_the_copy_hermes_shows(compacted: World):
    """A search for the dead letters finds the live copy (the archived ones are not shown); the recent list's
    previews are the first question and the last answer."""
    answer = compacted.search("cur", "heron-dlq dead letters", mode="keyword")
    assert [(r["session_id"], r["message_id"]) for r in answer["results"]] == [("long", compacted.copies[-1])], answer
    listed = compacted.call("project_history_recent", {}, "cur")["sessions"]
    assert [(s["first_user"], s["last_assistant"]) for s in listed] == [(TURNS[0][1], LATER[-1][1])], listed


def test_the_question_asked_is_not_found_in_the_conversation_s_own_past(world: World):
    """Hermes' compaction copies the turns it carries forward into the live context: in place (0.19's default), as new
    live rows with a new time in the CLI, beside the archived originals; by rotation, into the continuation, the
    parent keeping the turn flushed before it ended. Those rows of the conversation's past are its context still:
    the question being asked is not its own top hit (the hostile review's t_selfq.py), while the past it summarised
    away stays searched."""
    question = "How many kafka partitions did we settle on for the orders topic?"
    repo = world.repo("copies")
    world.session("O", repo, messages=[("user", "kafka sizing"),
                                       ("assistant", "We settled on 12 partitions for the orders topic in kafka.")])
    world.session("cur", repo, style="cli", messages=[("user", "the CI cache keeps wheels for a week"),
                                                     ("assistant", "ok")])
    world.say("cur", "user", question)
    world.say("cur", "assistant", "I don't remember; I can look it up in our history.")
    world.db.archive_and_compact("cur", [  # Hermes' own in-place compaction: the tail carried forward, a new time
        {"role": "user", "content": "[CONTEXT COMPACTION \u2014 REFERENCE ONLY] the CI cache was discussed."},
        {"role": "user", "content": question},
        {"role": "assistant", "content": "I don't remember; I can look it up in our history."},
    ])
    world.say("cur", "user", "yes please look it up")
    answer = world.search("cur", question, mode="keyword", limit=5)
    assert result_sessions(answer)[:1] == ["O"], answer
    assert result_sessions(world.search("cur", "CI cache wheels", mode="keyword")) == ["cur"]

    question = "Which retention did we pick for the kafka audit topic?"  # another conversation's question
    world.session("R", repo, messages=[("assistant", "We picked 30 days of retention for the kafka audit topic.")])
    world.session("P", repo, style="cli", messages=[("user", "the brokers run on three hosts"), ("user", question)])
    world.continuation("P", "C", messages=[("user", "[CONTEXT COMPACTION \u2014 REFERENCE ONLY] brokers"),
                                           ("user", question)])
    answer = world.search("C", question, mode="keyword", limit=5)
    assert result_sessions(answer)[:1] == ["R"], answer
    assert result_sessions(world.search("C", "brokers three hosts", mode="keyword")) == ["P"]


def test_a_turn_that_only_called_tools_is_no_copy_of_another(world: World):
    """Hermes stores an assistant turn that only calls tools with no text: the past's calls are history still,
    whatever live turn only calls a tool too (the hostile review's t_empty_toolcall.py)."""
    call = [{"name": "terminal", "arguments": "{\"command\": \"kubectl rollout restart deploy/quokka-api -n prod\"}"}]
    world.session("C", world.repo("calls"), style="cli", messages=[("user", "the api pods are stuck, please fix")])
    world.say("C", "assistant", "", tool_calls=call)
    world.say("C", "tool", "deployment.apps restarted", tool_call_id="t1")
    world.db.archive_and_compact("C", [{"role": "user", "content": "[CONTEXT COMPACTION \u2014 REFERENCE ONLY] api pods fixed."}])
    world.say("C", "user", "what did you run to fix the api pods?")
    world.say("C", "assistant", "", tool_calls=[{"name": "read_file", "arguments": "{\"path\": \"README.md\"}"}])
    answer = world.search("C", "kubectl rollout restart quokka-api", mode="keyword", limit=5)
    assert result_sessions(answer) == ["C"], answer


def test_a_delegate_finds_what_a_compaction_in_place_archived_of_its_own_run(world: World):
    """A delegate's run is never another session's history, but what a compaction in place archived of its own run
    left its context and is searched, as for any asking session: the check of an answer's sessions against state.db
    (which leaves delegates' runs out) does not apply to the asking session itself."""
    repo = world.repo("alpha")
    world.session("P", repo, style="cli", messages=[("user", "build the release")])
    world.delegate("P", "D", messages=[("user", "find where the wheels are kept"),
                                       ("assistant", "the CI cache holds the wheels of every build")])
    world.db.archive_and_compact("D", [
        {"role": "user", "content": "[CONTEXT COMPACTION \u2014 REFERENCE ONLY] the CI cache was discussed."},
        {"role": "user", "content": "go on"}])
    world.say("D", "user", "where were the wheels again?")
    answer = world.search("D", "CI cache wheels", mode="keyword")
    assert result_sessions(answer) == ["D"], answer
    read = world.call("project_history_read", {"session_id": "D", "message_id": answer["results"][0]["message_id"]}, "D")
    assert read.get("success"), read


_POOL = [("user", "a", None, None, None), ("assistant", "a", None, None, None), ("user", "a", "call-1", None, None),
         ("tool", "log", "call-1", "terminal", None), ("assistant", None, None, None, '[{"id": "call-1"}]'), ("user", "b", None, None, None)]


@settings(max_examples=settings.default.max_examples // 2, suppress_health_check=[HealthCheck.function_scoped_fixture])  # a database an example
@given(st.sampled_from(["0.19", "30"]), st.lists(st.tuples(st.integers(0, 1), st.integers(0, len(_POOL) - 1), st.integers(0, 1),
                                                         st.sampled_from([(1, 0), (1, 1), (0, 1), (0, 0)]), st.integers(0, 3)),
                                               min_size=1, max_size=40), st.sets(st.integers(1, 40)))
@example("0.19", [(0, 0, 0, (1, 0), 0), (0, 0, 0, (0, 1), 0)], {2})  # an archived copy newer than the live one
@example("0.19", [(0, 0, 0, (1, 0), 0), (0, 0, 0, (0, 1), 0), (0, 5, 0, (0, 1), 0)], {2})  # ... in a crowded tick
@example("0.19", [(0, 0, 0, (0, 1), 0), (0, 5, 0, (0, 1), 0), (0, 1, 0, (0, 1), 0), (0, 2, 0, (0, 1), 0)],
         {1, 2, 3})  # archived messages of one tick, alike but for their text, role or tool call
@example("0.19", [(0, 0, 0, (0, 1), 0), (0, 1, 0, (0, 1), 0), (0, 0, 1, (0, 1), 0), (0, 1, 1, (0, 1), 0)], {1, 3})  # two ticks
@example("0.19", [(0, 0, 0, (0, 1), 0), (0, 1, 0, (0, 1), 0), (1, 0, 0, (0, 1), 0), (1, 1, 0, (0, 1), 0)], {1, 3})  # two sessions
@example("30", [(0, 1, 0, (0, 1), 0), (0, 1, 0, (0, 1), 0), (0, 1, 0, (1, 0), 1)], {1, 2})  # a hidden live row
@example("0.19", [(0, k % 6, 0, (0, 1), 0) for k in range(10)] + [(0, 0, 0, (1, 0), 0)], set(range(1, 12)))  # a large tick
def test_copies_told_a_tick_at_a_time_are_those_told_row_by_row(tmp_path_factory, kind, rows, asked_ids):
    """The two ways a large clock tick's rows are told apart, grouped once in the statement that reads them
    (``store.visible`` given ``among``: a scan) and once a connection (``store.visible_of``: rows asked a batch at a
    time), keep the rows ``visible_sql`` keeps (rows alike sought for each row): sessions of rows from a few shapes,
    ticks and states (live, archived by a compaction, rewound; on schema 30 hidden or for the model only), any subset
    asked."""
    import json

    from project_history_recall import store

    path = tmp_path_factory.mktemp("copies") / "state.db"
    if kind == "0.19":
        sqlite3.connect(path).executescript(
            "CREATE TABLE sessions (id TEXT PRIMARY KEY); CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT,"
            " role TEXT, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT, timestamp REAL, active INTEGER,"
            " compacted INTEGER); CREATE INDEX idx_messages_session ON messages(session_id, timestamp);").close()
    else:
        Schema30(path, "fresh")
    with sqlite3.connect(path) as conn:
        for sid, shape, tick, (active, compacted), display in rows:
            role, content, call_id, tool, calls = _POOL[shape]
            extra = {} if kind == "0.19" else {"display_kind": "hidden" if display == 1 else None,
                                               "display_metadata": '{"model_only": true}' if display == 2 else None}
            values = {"session_id": f"s{sid}", "role": role, "content": content, "tool_call_id": call_id, "tool_name": tool,
                      "tool_calls": calls, "timestamp": 1_800_000_000.0 + tick, "active": active, "compacted": compacted, **extra}
            conn.execute(f"INSERT INTO messages ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})", list(values.values()))
    conn.close()
    ids = sorted(i for i in asked_ids if i <= len(rows))
    with closing(store.connect_ro(path)) as conn:
        shape = store.layout_of(conn)
        asked = "SELECT m.id FROM messages m WHERE m.id IN (SELECT value FROM json_each(?1)) AND "
        row_by_row = {r[0] for r in conn.execute(asked + shape.visible_sql(), [json.dumps(ids)])}
        in_statement = {r[0] for r in conn.execute(asked + store.visible(conn, "SELECT value FROM json_each(?1)"),
                                                   [json.dumps(ids)])}
        shown, told = store.visible_of(conn, ids)
        by_connection = {r[0] for r in conn.execute(asked + shown, [json.dumps(ids), *told])}
    assert in_statement == row_by_row == by_connection
