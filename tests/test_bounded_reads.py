"""Reading a session costs what is read, never the session: ``project_history_read`` and the previews of
``project_history_recent`` walk an index of the session from where they start and stop at what they show.

Work is counted at n and 4n (``tests/work.py``): SQLite's VM steps, and the bytes the process reads (overflow
pages of 100 KB tool logs), on a Hermes 0.19 state.db and on a schema-30 one (``tests/schema30.py``). The
windows and previews are those of the session's order, checked against every row of a session with rewound,
compacted, hidden and tool rows.
"""

from __future__ import annotations

import importlib
import json
import random
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest
from conftest import World
from schema30 import Schema30
from work import bytes_read, linear, measure, plugin_dir

LAYOUTS = ("0.19", "30")


def plugin(name: str) -> Any:
    return importlib.import_module(f"hermes_plugins.project_history_recall.{name}")


@pytest.fixture(params=LAYOUTS)
def hermes(request: pytest.FixtureRequest, world: World) -> World:
    """``world`` on a state.db of Hermes 0.19 (its own ``SessionDB``) or of schema 30 (fresh); ``world.open(sid,
    repo)`` makes a session in a repo, ``write(world, sid, rows)`` its messages. On both, a connection stays open
    while the plugin reads, as Hermes' ``SessionDB`` keeps one: with none, each read-only connection the plugin opens
    rebuilds the WAL index from the whole WAL (the 100 KB logs written last), which is the WAL's cost, not the read's."""
    if request.param == "30":
        db = Schema30(world.home / "state.db", "fresh")
        hermes_own = sqlite3.connect(world.home / "state.db")
        request.addfinalizer(hermes_own.close)
        world.open = lambda sid, repo: db.session(sid, cwd=repo, git_repo_root=repo)
    else:
        world.open = lambda sid, repo: world.session(sid, repo)
    world.layout, world.clock = request.param, 1_800_000_000.0
    return world


def write(world: World, sid: str, rows: list[dict[str, Any]]) -> list[int]:
    """Messages of ``sid``, in order: each ``{role, content}`` with optional ``active``, ``compacted``,
    ``tool_name``, ``display_kind`` and ``same_time`` (the timestamp of the row before). Returns their ids."""
    conn = sqlite3.connect(world.home / "state.db")
    ids = []
    for row in rows:
        world.clock += 0 if row.get("same_time") else 1
        columns = {"session_id": sid, "timestamp": world.clock, "active": 1, "compacted": 0,
                   **{k: v for k, v in row.items() if k != "same_time"}}
        names = ", ".join(columns)
        cursor = conn.execute(f"INSERT INTO messages ({names}) VALUES ({', '.join('?' * len(columns))})", list(columns.values()))
        ids.append(int(cursor.lastrowid or 0))
    conn.execute("UPDATE sessions SET message_count = message_count + ? WHERE id = ?", (len(rows), sid))
    conn.commit()
    conn.close()
    return ids


def cost(world: World, monkeypatch: pytest.MonkeyPatch, calls: list[Callable[[], dict[str, Any]]]) -> tuple[int, int]:
    """``(SQLite VM steps in hundreds, bytes read)`` of ``calls``, each answered with success."""
    steps, read = 0, 0
    for call in calls:
        start = bytes_read()
        answer, work = measure([world.home / "plugins" / "project-history-recall"], monkeypatch, call, plugin("store"))
        read += bytes_read() - start
        assert answer["success"] is True, answer
        steps += work.sql
    return steps, read


def long_session(world: World, n: int, *, beside: bool = False) -> tuple[str, list[int]]:
    """Session ``big<n>`` alone in repo ``r<n>`` (asked from ``cur<n>``): a question, the answer, ``n`` short
    turns, the last answer; with ``beside``, each of its rows follows one of session ``side<n>`` (another repo's,
    written at the same time). Returns the session and the ids of the answer and the last answer."""
    repo = world.repo(f"r{n}")
    sid = world.open(f"big{n}", repo)
    if beside:
        world.open(f"side{n}", world.repo(f"side{n}"))
    rows = [{"role": "user", "content": "what do pelicans eat?"}, {"role": "assistant", "content": "the pelican answer"},
            *({"role": "user" if i % 2 else "assistant", "content": f"step {i} " + "y" * 200} for i in range(n)),
            {"role": "assistant", "content": "last words"}]
    if beside:
        rows = [r for row in rows for r in ({"role": "user", "content": "elsewhere", "session_id": f"side{n}"}, row)]
    ids = [mid for mid, row in zip(write(world, sid, rows), rows, strict=True) if "session_id" not in row]
    world.open(f"cur{n}", repo)
    return sid, [ids[1], ids[-1]]


def session_calls(world: World, n: int, sid: str, answers: list[int]) -> list[Callable[[], dict[str, Any]]]:
    """Reading around the answer near the start, around the last message, from the start; and the recent list."""
    asker = f"cur{n}"
    return [
        lambda: world.call("project_history_read", {"session_id": sid, "message_id": answers[0]}, asker),
        lambda: world.call("project_history_read", {"session_id": sid, "message_id": answers[1]}, asker),
        lambda: world.call("project_history_read", {"session_id": sid}, asker),
        lambda: world.call("project_history_recent", {}, asker),
    ]


@pytest.mark.parametrize("beside", [False, True])
def test_reading_a_long_session_costs_what_the_window_costs(hermes: World, monkeypatch: pytest.MonkeyPatch, beside: bool):
    """Reading 11 messages around a hit, at the session's end or start, and the recent list's previews, in a
    session of 500 and of 2,000 messages, alone or written beside another session: the same SQLite steps (about 35
    hundred each). On Hermes 0.19, reading the whole session and sorting it (273 -> 1,039 hundred steps for the
    read at 1,500 and 6,000 messages, 354 -> 1,368 for the list: about 17 a hundred messages) made them grow with it."""
    costs = []
    for n in (500, 2000):
        sid, answers = long_session(hermes, n, beside=beside)
        calls = session_calls(hermes, n, sid, answers)
        for call in calls:
            call()  # the project's census, as any first call reads it
        costs.append([cost(hermes, monkeypatch, [call])[0] for call in calls])
    small, large = costs
    assert all(b <= 1.25 * a + 5 for a, b in zip(small, large, strict=True)), costs


def test_reading_past_compaction_copies_costs_what_the_window_costs(hermes: World, monkeypatch: pytest.MonkeyPatch):
    """A session compacted every 10 messages before hermes-agent #99545, each compaction leaving archived copies of
    the two messages it carried (500 and 2,000 messages, the last two live): reading around the first answer and
    the last one, from the start, and the recent list cost the same SQLite steps, and the windows show each message
    once. A copy is told by one seek of Hermes' (session_id, timestamp) index."""
    costs = []
    for n in (500, 2000):
        repo = hermes.repo(f"c{n}")
        sid = hermes.open(f"comp{n}", repo)
        hermes.open(f"cur{n}", repo)
        archived = {"active": 0, "compacted": 1}
        rows: list[dict[str, Any]] = []
        for i, (role, text) in enumerate([("user", "what do herons eat?"), ("assistant", "the heron answer"),
                                          *((("user" if k % 2 else "assistant"), f"step {k} " + "y" * 200) for k in range(n))]):
            hermes.clock += 1
            rows.append({"role": role, "content": text, "timestamp": hermes.clock, **archived})
            if i % 10 == 3:
                rows += [dict(row) for row in rows[-2:]]  # the copies a compaction carried
        rows += [{**row, "active": 1, "compacted": 0} for row in rows[-2:]]  # the last compaction's, live
        ids = write(hermes, sid, rows)
        calls = session_calls(hermes, n, sid, [ids[1], ids[-1]])
        for call in calls:
            call()
        first = [m["text"] for m in calls[2]()["messages"]]
        assert first == [str(row["content"]) for row in rows[:2] + rows[4:6] + rows[6:8]], first
        costs.append([cost(hermes, monkeypatch, [call])[0] for call in calls])
    small, large = costs
    assert all(b <= 1.25 * a + 5 for a, b in zip(small, large, strict=True)), costs


def test_tool_logs_past_a_window_are_not_read(hermes: World, monkeypatch: pytest.MonkeyPatch):
    """A session of 100 KB tool logs, 24 or 96 of them, the second half rewound, then a question asked again and
    answered: reading around its answers and listing it read the same bytes and steps. On Hermes 0.19 every log
    was read and sorted, and a window reads on past rewound logs only up to its reach (8 rows here, so that 24
    logs pass it). No log's overflow pages are read but those of the logs shown."""
    monkeypatch.setattr(plugin("session_walk"), "HIDDEN_REACH", 8, raising=False)
    costs = []
    for n in (24, 96):
        repo = hermes.repo(f"r{n}")
        sid = hermes.open(f"logs{n}", repo)
        hermes.open(f"cur{n}", repo)
        ids = write(hermes, sid, [{"role": "user", "content": "run the suite"}, {"role": "assistant", "content": "running it"},
                                  *({"role": "tool", "tool_name": "terminal", "content": f"log {i} " + "x" * 100_000,
                                     **({"active": 0} if i >= n // 2 else {})} for i in range(n)),
                                  {"role": "user", "content": "run it again"}, {"role": "assistant", "content": "all green"}])
        calls = session_calls(hermes, n, sid, [ids[1], ids[-1]])
        for call in calls:
            call()
        costs.append(cost(hermes, monkeypatch, calls))
    (small_steps, small_bytes), (large_steps, large_bytes) = costs
    assert large_bytes <= 1.25 * small_bytes, costs
    assert large_steps <= 1.25 * small_steps + 5, costs


# -- the windows are those of the session's order ---------------------------------------------------

#: How Hermes keeps a row, and whether it shows it: live, compacted away (still shown), rewound, and on schema 30
#: hidden scaffolding.
KINDS = {"live": ({}, True), "compacted": ({"active": 0, "compacted": 1}, True), "rewound": ({"active": 0}, False)}
KINDS_30 = {**KINDS, "hidden": ({"display_kind": "hidden"}, False)}


def mixed_session(world: World) -> tuple[list[int], list[tuple[str, bool, str]]]:
    """Session ``mixed`` (asked from ``cur``): 60 rows of every kind and role, some at the same time as the row
    before, starting and ending with rows Hermes does not show. Returns the ids and ``(role, shown, text)``."""
    repo = world.repo("mixed")
    world.open("mixed", repo)
    world.open("cur", repo)
    kinds = KINDS_30 if world.layout == "30" else KINDS
    rng = random.Random(30)
    plan = [("user", "rewound"), *((rng.choice(["user", "assistant", "assistant", "tool"]), rng.choice(sorted(kinds)))
                                   for _ in range(58)), ("assistant", "rewound")]
    rows, facts = [], []
    for i, (role, kind) in enumerate(plan):
        text = "" if role == "assistant" and i % 7 == 0 else f"{kind} {role} {i}"
        rows.append({"role": role, "content": text, **kinds[kind][0], "same_time": i % 5 == 4,
                     **({"tool_name": "terminal"} if role == "tool" else {})})
        facts.append((role, kinds[kind][1], text))
    return write(world, "mixed", rows), facts


def test_windows_and_previews_are_those_of_every_row_in_order(hermes: World):
    """Around every row of a session mixing live, compacted, rewound and hidden rows (user, assistant, tool, some
    at the same time): the messages Hermes shows, in id order, ``before`` and ``after`` of it; a row it does not
    show is no anchor; the previews are the first user and last assistant message with text it shows."""
    ids, facts = mixed_session(hermes)
    shown = [mid for mid, (_, visible, _) in zip(ids, facts, strict=True) if visible]
    for before, after in ((2, 3), (0, 0), (20, 20)):
        start = hermes.call("project_history_read", {"session_id": "mixed", "after": after}, "cur")
        assert [m["message_id"] for m in start["messages"]] == shown[: after + 1] and "stopped" not in start, start
        for mid, (_, visible, _) in zip(ids, facts, strict=True):
            answer = hermes.call("project_history_read", {"session_id": "mixed", "message_id": mid, "before": before,
                                                          "after": after, "max_chars": 20_000}, "cur")
            if not visible:
                assert answer["code"] == "session_not_found", answer
                continue
            at = shown.index(mid)
            assert [m["message_id"] for m in answer["messages"]] == shown[max(0, at - before): at + after + 1], (mid, answer)
            assert "stopped" not in answer
    listed = hermes.call("project_history_recent", {}, "cur")["sessions"]
    first = next(text for role, visible, text in facts if role == "user" and visible and text)
    last = next(text for role, visible, text in reversed(facts) if role == "assistant" and visible and text)
    assert [(s["first_user"], s["last_assistant"]) for s in listed] == [(first, last)]


def test_a_preview_passes_over_messages_with_no_text(hermes: World):
    """A session opens with a user message of only an image (Hermes' multimodal parts, no text part) and one of
    blanks, then asks in words; it ends with an assistant reply of only an image: the previews are the first user
    message and the last assistant message with text, as the index and the window read text. The image-only
    message was the preview before: an empty ``first_user``."""
    image = "\x00json:" + json.dumps([{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}])
    repo = hermes.repo("pics")
    sid = hermes.open("pics", repo)
    hermes.open("cur-pics", repo)
    write(hermes, sid, [{"role": "user", "content": image}, {"role": "user", "content": " \u3000\n"},
                        {"role": "user", "content": "why is the build red"}, {"role": "assistant", "content": "a flaky test"},
                        {"role": "assistant", "content": image}])
    listed = hermes.call("project_history_recent", {}, "cur-pics")["sessions"]
    assert [(s["first_user"], s["last_assistant"]) for s in listed] == [("why is the build red", "a flaky test")]


def test_a_window_stops_at_a_long_run_of_rewound_messages_and_says_so(hermes: World, monkeypatch: pytest.MonkeyPatch):
    """Before the asked message lie 6,000 rewound ones, then the session's start: the window does not read them
    all (its steps are those of 1,500), keeps the messages after, and says that it stopped. Reading on to the next
    message shown read every one of them."""
    walk = plugin("session_walk")
    costs = []
    for n in (1500, 6000):
        repo = hermes.repo(f"rw{n}")
        sid = hermes.open(f"rw{n}", repo)
        hermes.open(f"cur{n}", repo)
        ids = write(hermes, sid, [{"role": "user", "content": "the start"},
                                  *({"role": "assistant", "content": f"taken back {i}", "active": 0} for i in range(n)),
                                  {"role": "user", "content": "asked again"}, {"role": "assistant", "content": "answered"}])
        def read(sid: str = sid, anchor: int = ids[-2], asker: str = f"cur{n}") -> dict[str, Any]:
            return hermes.call("project_history_read", {"session_id": sid, "message_id": anchor}, asker)

        read()
        answer = read()
        assert [m["message_id"] for m in answer["messages"]] == ids[-2:], answer
        assert answer["stopped"] == plugin("browse").STOPPED and str(walk.HIDDEN_REACH) in answer["stopped"]
        costs.append(cost(hermes, monkeypatch, [read])[0])
    assert costs[1] <= 1.25 * costs[0] + 5, costs


@pytest.mark.parametrize("beyond", [3, 4])
def test_a_window_that_reads_to_the_session_end_has_not_stopped(hermes: World, monkeypatch: pytest.MonkeyPatch,
                                                                  beyond: int):
    """Past the asked message lie reach + 3 rewound messages, then 2 shown ones where the session ends: a side of 5
    reads all of them (its count and its reach of rows) and shows both, without ``stopped``. It said ``stopped``,
    taking the last row it read for a sign of more. With one rewound message more the second shown one lies past
    the side's rows: it is left out, and the answer says the window stopped. Both ways from the message."""
    reach = 8
    monkeypatch.setattr(plugin("session_walk"), "HIDDEN_REACH", reach)
    repo = hermes.repo(f"edge{beyond}")
    sid = hermes.open(f"edge{beyond}", repo)
    hermes.open(f"cur{beyond}", repo)
    ids = write(hermes, sid, [{"role": "user", "content": "the question"},
                              *({"role": "assistant", "content": f"taken back {i}", "active": 0} for i in range(reach + beyond)),
                              {"role": "assistant", "content": "kept one"}, {"role": "user", "content": "kept two"}])
    forward = hermes.call("project_history_read", {"session_id": sid, "message_id": ids[0], "after": 5}, f"cur{beyond}")
    back = hermes.call("project_history_read", {"session_id": sid, "message_id": ids[-1], "before": 5}, f"cur{beyond}")
    if beyond == 3:
        assert [m["message_id"] for m in forward["messages"]] == [ids[0], ids[-2], ids[-1]] and "stopped" not in forward
        assert [m["message_id"] for m in back["messages"]] == [ids[0], ids[-2], ids[-1]] and "stopped" not in back
    else:
        assert [m["message_id"] for m in forward["messages"]] == [ids[0], ids[-2]] and "stopped" in forward
        assert [m["message_id"] for m in back["messages"]] == [ids[-2], ids[-1]] and "stopped" in back


def test_windows_and_previews_follow_hermes_order_when_the_clock_stepped_back(hermes: World):
    """Messages 1-6 of a session written at 100, 101, 102, then (the clock stepped back) 50, 51, 52: Hermes shows
    them by id. On a 0.19 state.db, which has no index of a session by id, the window followed time: from the
    start [4, 5, 6, 1, 2, 3], around message 3 nothing after it, and the last assistant preview message 2."""
    repo = hermes.repo("stepped")
    hermes.open("stepped", repo)
    hermes.open("cur", repo)
    base = hermes.clock
    ids = write(hermes, "stepped", [{"role": role, "content": f"{role} {i}", "timestamp": base + at}
                                    for i, (role, at) in enumerate(zip(["user", "assistant"] * 3, [100, 101, 102, 50, 51, 52], strict=True))])
    start = hermes.call("project_history_read", {"session_id": "stepped"}, "cur")
    assert [m["message_id"] for m in start["messages"]] == ids, start
    for mid in ids:
        around = hermes.call("project_history_read", {"session_id": "stepped", "message_id": mid}, "cur")
        assert [m["message_id"] for m in around["messages"]] == ids, (mid, around)
        one = hermes.call("project_history_read", {"session_id": "stepped", "message_id": mid, "before": 1, "after": 1}, "cur")
        at = ids.index(mid)
        assert [m["message_id"] for m in one["messages"]] == ids[max(0, at - 1): at + 2], (mid, one)
    listed = hermes.call("project_history_recent", {}, "cur")["sessions"]
    assert [(s["first_user"], s["last_assistant"]) for s in listed] == [("user 0", "assistant 5")], listed


def test_windows_of_a_session_written_beside_others_are_in_id_order(hermes: World):
    """Five sessions written turn about (a gateway's chats): around every message, 20 either side (on 0.19 more than
    a walk by id passes rows for, so it reads on by time), the window is the session's messages in id order."""
    repo = hermes.repo("turns")
    hermes.open("a", repo)
    other = hermes.repo("other")
    for sid in "bcde":
        hermes.open(sid, other)
    hermes.open("cur", repo)
    rows = [{"role": "user" if i % 10 < 5 else "assistant", "content": f"turn {i}", "session_id": "abcde"[i % 5]}
            for i in range(300)]
    ids = [mid for mid, row in zip(write(hermes, "a", rows), rows, strict=True) if row["session_id"] == "a"]
    for mid in ids:
        answer = hermes.call("project_history_read", {"session_id": "a", "message_id": mid, "before": 20, "after": 20}, "cur")
        at = ids.index(mid)
        assert [m["message_id"] for m in answer["messages"]] == ids[max(0, at - 20): at + 21], (mid, answer)
    start = hermes.call("project_history_read", {"session_id": "a", "after": 20}, "cur")
    assert [m["message_id"] for m in start["messages"]] == ids[:21]


def test_the_recent_list_passes_a_rewound_tail_only_as_far_as_its_reach(hermes: World, monkeypatch: pytest.MonkeyPatch):
    """A session whose last 2,000 or 8,000 messages were rewound: the recent list finds its last message shown for
    the same SQLite steps, and its last activity is that message's time. Looking for the newest message shown
    walked back past every rewound one (159 -> 579 hundred steps)."""
    costs = []
    for n in (2000, 8000):
        repo = hermes.repo(f"tail{n}")
        sid = hermes.open(f"tail{n}", repo)
        hermes.open(f"cur{n}", repo)
        write(hermes, sid, [{"role": "user", "content": "the question"}, {"role": "assistant", "content": "the answer"}])
        shown_at = hermes.clock
        write(hermes, sid, [{"role": "assistant", "content": f"taken back {i}", "active": 0} for i in range(n)])

        def recent(asker: str = f"cur{n}") -> dict[str, Any]:
            return hermes.call("project_history_recent", {}, asker)

        listed = recent()["sessions"]
        assert [s["session_id"] for s in listed] == [sid], listed
        assert listed[0]["last_active"] == plugin("answers").format_when(shown_at), (listed, shown_at)
        costs.append(cost(hermes, monkeypatch, [recent])[0])
    assert costs[1] <= 1.25 * costs[0] + 5, costs


def test_a_session_written_beside_five_others_is_read_for_what_its_window_takes(hermes: World,
                                                                                monkeypatch: pytest.MonkeyPatch):
    """Six sessions written turn about, n and 4n rows each, the asked one ending in 12 user messages: reading 5
    either side of a message a quarter in, and the recent list's previews (its last assistant message lies past
    the rows a walk by id passes), cost the same SQLite steps, and show the session's messages in id order. On
    Hermes 0.19 the read on by time took every row it might need (count + reach + 1) and sorted them before
    keeping the first: 52 -> 124 hundred steps for the window, 42 -> 76 for the list."""
    costs = []
    for n in (150, 600):
        repo, other = hermes.repo(f"t{n}"), hermes.repo(f"o{n}")
        names = [f"{s}{n}" for s in "abcdef"]
        hermes.open(names[0], repo)
        for sid in names[1:]:
            hermes.open(sid, other)
        hermes.open(f"cur{n}", repo)
        roles = ["user" if (i // 6) % 2 else "assistant" for i in range(6 * n)] + ["user"] * 72
        rows = [{"role": role, "content": f"turn {i}", "session_id": names[i % 6]} for i, role in enumerate(roles)]
        ids = [mid for mid, row in zip(write(hermes, names[0], rows), rows, strict=True) if row["session_id"] == names[0]]
        at = len(ids) // 4
        last_assistant = next(row["content"] for row in reversed(rows)
                              if row["session_id"] == names[0] and row["role"] == "assistant")

        def read(sid: str = names[0], anchor: int = ids[at], asker: str = f"cur{n}") -> dict[str, Any]:
            return hermes.call("project_history_read", {"session_id": sid, "message_id": anchor, "before": 5,
                                                        "after": 5}, asker)

        def recent(asker: str = f"cur{n}") -> dict[str, Any]:
            return hermes.call("project_history_recent", {}, asker)

        read()
        assert [m["message_id"] for m in read()["messages"]] == ids[at - 5: at + 6]
        listed = recent()["sessions"]
        assert [(s["first_user"], s["last_assistant"]) for s in listed] == [("turn 6", last_assistant)], listed
        costs.append([cost(hermes, monkeypatch, [call])[0] for call in (read, recent)])
    small, large = costs
    assert all(b <= 1.25 * a + 5 for a, b in zip(small, large, strict=True)), costs


def test_reading_a_long_log_around_its_match_costs_what_the_log_costs(hermes: World, monkeypatch: pytest.MonkeyPatch):
    """A tool log of n and 4n lines whose failing line is its last but one, read around the hit with the search's
    query: the part shown holds the failure, and the work (the plugin's Python lines, SQLite's steps) grows with
    the log at most linearly, never with its square (finding the match is one pass over the message)."""
    costs = []
    for n in (2000, 8000):
        repo = hermes.repo(f"log{n}")
        sid = hermes.open(f"log{n}", repo)
        hermes.open(f"cur{n}", repo)
        log = "".join(f"test_case_{i:05d} PASSED\n" for i in range(n)) + "FAILED test_refund_rounding\nteardown ok\n"
        ids = write(hermes, sid, [{"role": "user", "content": "run the suite"},
                                  {"role": "tool", "tool_name": "terminal", "content": log}])

        def read(sid: str = sid, anchor: int = ids[1], asker: str = f"cur{n}") -> dict[str, Any]:
            return hermes.call("project_history_read", {"session_id": sid, "message_id": anchor,
                                                        "query": "test_refund_rounding"}, asker)

        shown = next(m for m in read()["messages"] if m["message_id"] == ids[1])
        assert "FAILED test_refund_rounding" in shown["text"] and shown["part"]["start"] > 0, shown["part"]
        answer, work = measure([plugin_dir()], monkeypatch, read, plugin("store"))
        assert answer["success"] is True, answer
        costs.append((work.lines, work.sql))
    (small_lines, small_sql), (large_lines, large_sql) = costs
    assert linear(small_lines, large_lines) and linear(small_sql, large_sql), costs


def test_the_recent_list_of_a_long_compressed_conversation_reads_its_sessions_rows_only(hermes: World,
                                                                                        monkeypatch: pytest.MonkeyPatch):
    """One conversation compressed 80 or 320 times, beside four other sessions: the list shows it once, at its
    newest session, with that session's previews. Only the newest sessions' activity and messages are read (a
    compressed session's messages all precede its continuation's); of the others, their rows once (which session
    follows which): under 75 SQLite steps a session, the census's reads included. Listing each session read the
    activity of all of them, about 200 steps a session, and showed five of the conversation's sessions."""
    costs = []
    for n in (80, 320):
        repo = hermes.repo(f"chain{n}")
        for i in range(4):
            write(hermes, hermes.open(f"side{n}_{i}", repo), [{"role": "user", "content": f"side task {i}"}])
        first = hermes.open(f"c{n}_0", repo)
        write(hermes, first, [{"role": "user", "content": "migrate billing"}, {"role": "assistant", "content": "plan"}])
        conn = sqlite3.connect(hermes.home / "state.db")
        with conn:  # each compression: the session ends, its continuation starts and is written in
            for k in range(1, n + 1):
                hermes.clock += 1
                conn.execute("UPDATE sessions SET end_reason = 'compression', ended_at = ? WHERE id = ?",
                             (hermes.clock, f"c{n}_{k - 1}"))
                conn.execute("INSERT INTO sessions (id, source, started_at, parent_session_id, message_count) "
                             "VALUES (?, 'cli', ?, ?, 2)", (f"c{n}_{k}", hermes.clock, f"c{n}_{k - 1}"))
                for role, text in (("user", f"step {k}"), ("assistant", f"done {k}")):
                    hermes.clock += 1
                    conn.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, ?, ?, ?)",
                                 (f"c{n}_{k}", role, text, hermes.clock))
        conn.close()
        hermes.open(f"cur{n}", repo)

        def recent(asker: str = f"cur{n}") -> dict[str, Any]:
            return hermes.call("project_history_recent", {}, asker)

        listed = recent()["sessions"]
        assert [s["session_id"] for s in listed] == [f"c{n}_{n}", *(f"side{n}_{i}" for i in (3, 2, 1, 0))], listed
        assert listed[0]["sessions"] == n + 1 and listed[0]["last_assistant"] == f"done {n}", listed[0]
        costs.append(cost(hermes, monkeypatch, [recent])[0])
    assert costs[1] - costs[0] <= 0.75 * (320 - 80), costs  # hundreds of steps: under 75 a session


def compacted_whole(world: World, n: int, *, same_time: bool) -> tuple[str, list[int]]:
    """Session ``whole<n>`` (asked from ``cur<n>``): n rows, assistant first, at one time or each a second after
    the last, compacted in place carrying them all forward (each archived, a live copy of it written after them
    all, at its time). Returns the session and the ids, archived rows first."""
    repo = world.repo(f"whole{n}")
    sid = world.open(f"whole{n}", repo)
    start = world.clock
    rows = [{"role": ("assistant", "user")[i % 2], "content": f"turn {i}", "active": 0, "compacted": 1,
             "timestamp": start + (0 if same_time else i)} for i in range(n)]
    world.clock = start + n
    ids = write(world, sid, rows + [{**row, "active": 1, "compacted": 0} for row in rows])
    world.open(f"cur{n}", repo)
    return sid, ids


@pytest.mark.parametrize("same_time", [True, False], ids=["one-tick", "a-tick-each"])
def test_the_recent_list_and_a_read_of_a_session_compacted_whole_cost_its_rows(
        hermes: World, monkeypatch: pytest.MonkeyPatch, same_time: bool):
    """A session of n rows compacted in place carrying every row forward (n = 500 -> 2,000), its rows written at one
    time (an import) or each at its own: the recent list's previews are its first user and last assistant message, and
    reading around its last message shows the session's last messages without saying it stopped, for work that grows
    with the rows. The n live copies after the last message Hermes shows used up the previews' reach (400 rows) and
    the window's (1,000): ``last_assistant`` came back empty, and the window said it stopped. At one time, each row
    asked whether it is the copy Hermes shows passed the other rows of the tick: the walks were held to their reach
    to stay linear; a tick of more than ``layout.LARGE_TICK`` rows is now told apart once for the whole read."""
    costs = []
    for n in (500, 2000):
        sid, ids = compacted_whole(hermes, n, same_time=same_time)

        def recent(asker: str = f"cur{n}") -> dict[str, Any]:
            return hermes.call("project_history_recent", {}, asker)

        def read(sid: str = sid, last: int = ids[-1], asker: str = f"cur{n}") -> dict[str, Any]:
            return hermes.call("project_history_read", {"session_id": sid, "message_id": last, "before": 2, "after": 2},
                               asker)

        listed = recent()["sessions"]
        assert [(s["session_id"], s["first_user"], s["last_assistant"]) for s in listed] == [
            (sid, "turn 1", f"turn {n - 2}")], listed
        window = read()
        assert [m["text"] for m in window["messages"]] == [f"turn {n - 3}", f"turn {n - 2}", f"turn {n - 1}"], window
        assert [m["message_id"] for m in window["messages"]] == ids[-3:] and "stopped" not in window, window
        costs.append([cost(hermes, monkeypatch, [call])[0] for call in (recent, read)])
    small, large = costs
    assert all(linear(a, b) for a, b in zip(small, large, strict=True)), costs


@pytest.mark.parametrize("carried", ["two", "all"])
def test_the_index_commands_reads_of_a_crowded_tick_cost_its_rows(hermes: World, monkeypatch: pytest.MonkeyPatch,
                                                                  carried: str):
    """The index command reads the texts of what it embeds 64 ids at a time (``indexing.BATCH``): of a session of
    n rows written at one time and compacted in place (the last two rows carried forward, or all of them), each
    message once, for SQLite steps that grow with n (500 -> 2,000). Each archived row's check passed the tick's other
    rows (30,280 -> 481,068 hundred steps on 0.19, all carried: 0.5 s at 2,000 rows, 7.6 s at 8,000); the tick is now
    grouped once for the whole run."""
    index_check, indexing = plugin("index_check"), plugin("indexing")
    costs = []
    for n in (500, 2000):
        repo = hermes.repo(f"ix{n}")
        sid = hermes.open(f"ix{n}", repo)
        rows = [{"role": ("assistant", "user")[i % 2], "content": f"turn {i}", "active": 0, "compacted": 1,
                 "same_time": i > 0} for i in range(n)]
        copies = rows if carried == "all" else rows[-2:]
        written = rows + [{**row, "active": 1, "compacted": 0, "same_time": True} for row in copies]
        ids = write(hermes, sid, written)
        shown = ids[:n - len(copies)] + ids[n:]  # an archived row carried forward is shown as its live copy

        def read(ids: list[int] = ids) -> list[tuple[int, str, str]]:
            conn = plugin("store").connect_ro(hermes.home / "state.db")
            try:
                return list(index_check.read_texts(conn, ids, [], page=indexing.BATCH))
            finally:
                conn.close()

        texts, work = measure([], monkeypatch, read, plugin("store"))
        assert [(mid, text) for mid, _, text in texts] == [(mid, row["content"]) for mid, row in zip(ids, written, strict=True)
                                                           if mid in shown]
        costs.append(work.sql)
    assert linear(*costs), costs


def test_the_recent_list_of_a_session_compacted_at_one_time_costs_its_rows(hermes: World, monkeypatch: pytest.MonkeyPatch):
    """A session of n rows sharing one timestamp (an import), compacted in place carrying them all forward (each row
    archived, a live copy of it written after them): the list looks for an archived row shown after the newest live
    one among the rows of that timestamp, every archived row here, and asked of each whether it is the copy Hermes shows
    by passing the other rows of its tick (n = 500 -> 2,000: 30,589 -> 482,255 hundred steps on 0.19). Now the rows of
    the tick are told apart once (1,950 -> 7,696)."""
    costs = []
    for n in (500, 2000):
        repo = hermes.repo(f"tick{n}")
        sid = hermes.open(f"tick{n}", repo)
        rows = [{"role": ("assistant", "user")[i % 2], "content": f"turn {i}", "active": 0, "compacted": 1, "same_time": i > 0}
                for i in range(n)]
        write(hermes, sid, rows + [{**row, "active": 1, "compacted": 0, "same_time": True} for row in rows])
        hermes.open(f"cur{n}", repo)

        def recent(asker: str = f"cur{n}") -> dict[str, Any]:
            return hermes.call("project_history_recent", {}, asker)

        listed = recent()["sessions"]
        assert [(s["session_id"], s["first_user"], s["last_assistant"]) for s in listed] == [
            (sid, "turn 1", f"turn {n - 2}")], listed
        costs.append(cost(hermes, monkeypatch, [recent])[0])
    assert linear(*costs), costs
