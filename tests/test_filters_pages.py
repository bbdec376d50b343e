"""Filters (since / until / role), cron ranked last, and pages (next_cursor),
end to end through Hermes' loader and dispatch with real SessionDB files."""

from __future__ import annotations

import base64
import datetime as dt
import sys
import time

import pytest
from conftest import World, result_sessions, shared_world


def plugin(name: str):
    return sys.modules[f"hermes_plugins.project_history_recall.{name}"]


def close_indexes() -> None:
    """Forget what the plugin kept for the process (the vector indexes a test opened among it)."""
    module = sys.modules.get("hermes_plugins.project_history_recall.state")
    if module is not None:
        module.reset()


def local(y: int, m: int, d: int, hh: int = 12) -> float:
    return time.mktime(dt.datetime(y, m, d, hh).timetuple())


def _dated(world: World) -> World:
    """One repo; sessions whose 'websocket' messages carry known timestamps and roles."""
    repo = world.repo("dated")
    world.paths = {"repo": repo}
    world.ids = {}
    for sid, when, role in [
        ("jan", local(2026, 1, 10), "user"),
        ("feb", local(2026, 2, 10), "assistant"),
        ("feb_end", local(2026, 2, 28, 23), "user"),
        ("mar", local(2026, 3, 10), "assistant"),
    ]:
        world.session(sid, repo, style="cli")
        world.ids[sid] = world.db.append_message(sid, role, f"websocket note written in {sid}", timestamp=when)
    now = time.time()
    world.session("recent", repo, style="cli")
    world.ids["recent"] = world.db.append_message("recent", "tool", "websocket output from yesterday", timestamp=now - 86_400)
    world.session("cur", repo, style="cli", messages=[("user", "what did we do?")])
    return world


@pytest.fixture
def dated(world: World):
    """:func:`_dated` of a world of its own (a test that adds to it)."""
    yield _dated(world)
    close_indexes()


# :func:`_dated` shared by the tests that only read it (checked: they leave it unchanged).
_dated_module, shared_dated = shared_world(_dated, "shared_dated", after=close_indexes)


def found(answer) -> set[str]:
    assert answer["success"] is True, answer
    return set(result_sessions(answer))


def test_no_filter_finds_everything(shared_dated):
    assert found(shared_dated.search("cur", "websocket", mode="keyword", limit=10)) == {"jan", "feb", "feb_end", "mar", "recent"}


@pytest.mark.parametrize(
    "args, expected",
    [
        ({"since": "2026-02-01"}, {"feb", "feb_end", "mar", "recent"}),
        ({"until": "2026-02-28"}, {"jan", "feb", "feb_end"}),  # a day bound includes the whole day
        ({"since": "2026-02-01", "until": "2026-02-27"}, {"feb"}),
        ({"since": "2026-02-10T13:00"}, {"feb_end", "mar", "recent"}),  # local date-time, to the minute
        ({"since": "7d"}, {"recent"}),
        ({"until": "2d"}, {"jan", "feb", "feb_end", "mar"}),
        ({"role": "user"}, {"jan", "feb_end"}),
        ({"role": "Assistant"}, {"feb", "mar"}),
        ({"role": "tool"}, {"recent"}),
        ({"role": "user", "since": "2026-02-01"}, {"feb_end"}),
    ],
)
def test_filters_narrow_the_messages_searched(shared_dated, args, expected):
    answer = shared_dated.search("cur", "websocket", mode="keyword", limit=10, **args)
    assert found(answer) == expected
    assert set(answer["filters"]) == set(args)


def test_a_date_time_with_an_offset_is_exact(shared_dated):
    feb = dt.datetime.fromtimestamp(local(2026, 2, 10)).astimezone()
    just_after = (feb + dt.timedelta(seconds=1)).isoformat()
    just_before = (feb - dt.timedelta(seconds=1)).astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    assert "feb" not in found(shared_dated.search("cur", "websocket", mode="keyword", limit=10, since=just_after))
    assert "feb" in found(shared_dated.search("cur", "websocket", mode="keyword", limit=10, since=just_before))


def test_filtered_results_return_a_message_that_passes_the_filter(dated):
    dated.db.append_message("feb", "user", "websocket follow-up from the user in march", timestamp=local(2026, 3, 1))
    answer = dated.search("cur", "websocket", mode="keyword", limit=10, role="assistant")
    by_session = {r["session_id"]: r["message_id"] for r in answer["results"]}
    assert by_session["feb"] == dated.ids["feb"], "the assistant message, not the newer user one"


@pytest.mark.parametrize(
    "args, fragment",
    [
        ({"since": "last tuesday"}, "cannot read 'last tuesday' as a date"),
        ({"until": "2026-13-01"}, "as a date"),
        ({"since": "2026-03-01", "until": "2026-02-01"}, "must be before"),
        ({"role": "system"}, "'role' must be one of user, assistant, tool"),
        ({"role": ["user"]}, "'role' must be a string"),
        ({"since": {"days": 3}}, "'since' must be a string"),
        ({"since": "7x"}, "as a date"),
    ],
)
def test_bad_filters_are_clear_answers(shared_dated, args, fragment):
    answer = shared_dated.search("cur", "websocket", **args)
    assert answer["success"] is False and answer["code"] == "bad_argument"
    assert fragment in answer["error"]


def test_empty_filter_strings_mean_no_filter(shared_dated):
    answer = shared_dated.search("cur", "websocket", mode="keyword", limit=10, since="", until="", role="")
    assert len(answer["results"]) == 5 and "filters" not in answer


# ---------------------------------------------------------------------------
# Cron sessions
# ---------------------------------------------------------------------------


def test_cron_sessions_rank_after_interactive_ones(world: World):
    repo = world.repo("jobs")
    # The cron run matches best (every word, short message), the interactive one weakly.
    world.session("cron_run", repo, source="cron", messages=[("assistant", "nightly backup rotation report")])
    world.session("chat", repo, style="cli", messages=[
        ("user", "we talked about the backup schedule and many other things in this long message about "
                 "deployment, logging, dashboards and on-call rotas for the team"),
    ])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    answer = world.search("cur", "nightly backup rotation report", mode="keyword", limit=5)
    assert result_sessions(answer) == ["chat", "cron_run"], "cron stays searchable, after interactive sessions"
    # Alone, the cron session is found as usual.
    assert result_sessions(world.search("cur", "nightly", mode="keyword")) == ["cron_run"]


def test_a_search_reads_the_rows_of_the_sessions_it_shows_once(world: World, monkeypatch: pytest.MonkeyPatch):
    """A search read the rows of the sessions it shows twice: whether state.db still puts each in the project
    (``session_rows.recorded``), then their titles, times and sources (``session_details``). One statement serves
    both now, and the answer keeps what the second gave: titles, and cron runs after interactive sessions."""
    repo = world.repo("jobs")
    world.session("cron_run", repo, source="cron", messages=[("assistant", "nightly backup rotation report")])
    world.session("chat", repo, style="cli", messages=[("user", "the nightly backup rotation, and much else besides "
                                                                "about deployment, logging and dashboards")])
    world.db.set_session_title("chat", "backup talk")
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    world.search("cur", "warm", mode="keyword")  # the census is read: what follows is a search's own reads
    store, statements = plugin("store"), []
    real = store.connect_ro

    def traced(*args, **kwargs):
        conn = real(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(store, "connect_ro", traced)
    answer = world.search("cur", "nightly backup rotation report", mode="keyword", limit=5)
    assert result_sessions(answer) == ["chat", "cron_run"] and answer["results"][0]["title"] == "backup talk", answer
    shown = '["cron_run", "chat"]'  # the shown sessions' rows, asked by id: of whom, then their titles
    rows = [s for s in statements if s.lstrip().startswith("SELECT") and (
        f"FROM sessions s WHERE s.id IN (SELECT value FROM json_each('{shown}'))" in s
        or f"FROM sessions WHERE id IN (SELECT value FROM json_each('{shown}'))" in s)]
    assert len(rows) == 1 and "title" in rows[0], rows


# ---------------------------------------------------------------------------
# Pages
# ---------------------------------------------------------------------------


def _many(world: World) -> World:
    """27 sessions of repo many that say 'reconnect loop', two asking ones, and one of another project."""
    repo, other = world.repo("many"), world.repo("other")
    for i in range(27):
        world.session(f"s{i:02d}", repo, style="cli", messages=[("user", f"reconnect loop attempt {i} " + "retry " * (i % 5))])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    world.session("cur2", repo, style="cli", messages=[("user", "hi again")])
    world.session("elsewhere", other, style="cli", messages=[("user", "reconnect loop elsewhere")])
    return world


# :func:`_many`, shared by the tests of it: they only read it (checked).
_many_module, many = shared_world(_many, "many")


def pages(world: World, session: str, query: str, cursor: str | None = None, **args) -> list[dict]:
    """The answers of a search's pages, from page one or from ``cursor``'s page."""
    answers: list[dict] = []
    while True:
        answer = world.search(session, query, limit=10, **({"cursor": cursor} if cursor else {}), **args)
        assert answer["success"] is True, answer
        answers.append(answer)
        cursor = answer.get("next_cursor")
        if not cursor:
            return answers
        assert len(answers) < 10, "pages must end"


def test_pages_cover_every_session_once_in_rank_order(many):
    answers = pages(many, "cur", "reconnect loop", mode="keyword")
    assert [len(a["results"]) for a in answers] == [10, 10, 7]
    seen = [sid for a in answers for sid in result_sessions(a)]
    assert len(seen) == len(set(seen)), "no session twice"
    assert set(seen) == {f"s{i:02d}" for i in range(27)}, "every match, nothing from another project"
    whole = many.search("cur", "reconnect loop", mode="keyword", limit=10)
    assert result_sessions(whole) == seen[:10], "page one is the plain answer"


def test_a_page_of_a_small_answer_has_no_cursor(many):
    answer = many.search("cur", "\"attempt 3\"", mode="keyword", limit=10)
    assert result_sessions(answer) == ["s03"]
    assert "next_cursor" not in answer


def test_pages_with_filters_and_hybrid_before_consent(many):
    answers = pages(many, "cur", "reconnect loop", role="user", since="2000-01-01")
    assert sum(len(a["results"]) for a in answers) == 27
    assert all(a["semantic_status"] == "consent_required" for a in answers)


@pytest.mark.parametrize(
    "change",
    [
        {"query": "reconnect"},
        {"mode": "semantic"},
        {"role": "user"},
        {"session": "cur2"},
    ],
)
def test_a_cursor_belongs_to_its_search(many, change):
    first = many.search("cur", "reconnect loop", mode="keyword", limit=10)
    args = {"query": "reconnect loop", "mode": "keyword", "limit": 10, "cursor": first["next_cursor"], **change}
    session = args.pop("session", "cur")
    answer = many.call("project_history_search", args, session)
    assert answer["success"] is False and answer["code"] == "bad_argument"
    assert "another search" in answer["error"]


@pytest.mark.parametrize("cursor", ["garbage!", "MTAw", 12, "", "   ", base64.urlsafe_b64encode(b"[" * 3000).decode()])
def test_malformed_cursors(many, cursor):
    """Garbage, a number, JSON nested past the parser's depth (it answered internal_error): bad_argument."""
    answer = many.search("cur", "reconnect loop", mode="keyword", cursor=cursor)
    if isinstance(cursor, str) and not cursor.strip():
        assert answer["success"] is True and len(answer["results"]) == 3, "an empty cursor is the first page"
    else:
        assert answer["success"] is False and answer["code"] == "bad_argument", answer


def test_cursor_offsets_are_bounded(many):
    import base64
    import json

    pages = plugin("pages")
    answer = many.search("cur", "reconnect loop", mode="keyword", limit=10)
    key = json.loads(base64.urlsafe_b64decode(answer["next_cursor"] + "==").decode())["k"]
    for offset in (0, -5, pages.MAX_REACH, 10**9):
        forged = pages.make_cursor(key, pages.Page(offset))
        bad = many.search("cur", "reconnect loop", mode="keyword", limit=10, cursor=forged)
        assert bad["success"] is False and bad["code"] == "bad_argument"


def test_semantic_hits_pass_the_same_filters(world: World, fake):
    repo = world.repo("sem")
    text = "exponential backoff with jitter"
    world.session("said_by_assistant", repo, style="cli")
    world.db.append_message("said_by_assistant", "assistant", text, timestamp=local(2026, 1, 5))
    world.session("said_by_user", repo, style="cli")
    world.db.append_message("said_by_user", "user", text, timestamp=local(2026, 3, 5))
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    server = fake()
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    assert world.call("project_history_semantic_consent", {"decision": "allow"}, "cur")["success"] is True
    try:
        both = world.search("cur", text, mode="semantic", limit=10)
        assert both["semantic_status"] == "ready" and found(both) == {"said_by_assistant", "said_by_user"}
        assert result_sessions(world.search("cur", text, mode="semantic", role="user")) == ["said_by_user"]
        assert result_sessions(world.search("cur", text, mode="semantic", until="2026-02-01")) == ["said_by_assistant"]
        answer = world.search("cur", text, mode="semantic", since="2026-04-01")
        assert answer["success"] is True and answer["results"] == []
    finally:
        close_indexes()


@pytest.mark.parametrize("since, until", [("0001-01-01", "0001-01-05"), ("99999w", None), ("9999-12-30", None)])
def test_extreme_dates_are_answers_not_errors(shared_dated, since, until):
    answer = shared_dated.search("cur", "websocket", mode="keyword", since=since, **({"until": until} if until else {}))
    assert answer["success"] is True and "since" in answer["filters"]


def test_pages_with_a_relative_date_keep_page_one_window(world: World):
    """'7d' on page two is the same search, over the same window, as on page one."""
    repo = world.repo("recent")
    now = time.time()
    for i in range(14):
        world.session(f"r{i:02d}", repo, style="cli")
        world.db.append_message(f"r{i:02d}", "user", f"reconnect loop attempt {i}", timestamp=now - 3600 - i)
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    first = world.search("cur", "reconnect loop", mode="keyword", limit=10, since="7d")
    assert first["success"] is True and first["next_cursor"]
    time.sleep(1.1)  # the clock moves: "7d" now resolves to a later bound
    second = world.search("cur", "reconnect loop", mode="keyword", limit=10, since="7d", cursor=first["next_cursor"])
    assert second["success"] is True, second
    assert second["filters"]["since"] == first["filters"]["since"], "page one's window"
    seen = result_sessions(first) + result_sessions(second)
    assert sorted(seen) == [f"r{i:02d}" for i in range(14)]
    other = world.search("cur", "reconnect loop", mode="keyword", limit=10, since="8d", cursor=first["next_cursor"])
    assert other["success"] is False and "another search" in other["error"]


def test_pages_of_a_newest_first_scan_never_repeat(world: World, monkeypatch):
    """A common word is read newest first through the project's sessions: every page ranks the same candidates."""
    repo = world.repo("big")
    for i in range(60):
        world.session(f"s{i:02d}", repo, style="cli")
        # Older sessions: short, focused messages (better BM25); newer ones: long.
        text = "reconnect loop" if i < 30 else "reconnect loop " + "filler words here " * 20 + str(i)
        world.db.append_message(f"s{i:02d}", "user", text, timestamp=1_700_000_000 + i)
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    monkeypatch.setattr(plugin("lexical"), "RANK_BUDGET", 20)  # 60 matches: the words are common
    answers = pages(world, "cur", "reconnect loop", mode="keyword")
    assert all("newest" in a["strategy"] for a in answers)
    seen = [sid for a in answers for sid in result_sessions(a)]
    assert len(seen) == len(set(seen)), "no session on two pages"
    assert len(seen) > plugin("search").MAX_LIMIT, "more than one page"


@pytest.mark.parametrize("text", ["2026-02-28", "20260228"])
def test_any_date_only_form_includes_the_whole_day_as_until(text):
    filters = __import__("project_history_recall.filters", fromlist=["filters"])
    end = filters.parse_when(text, end=True, now=0)
    assert end == local(2026, 3, 1, 0), "the next midnight"
    assert filters.parse_when(text, end=False, now=0) == local(2026, 2, 28, 0)


@pytest.mark.parametrize("text,fraction", [("2026-02-28T10:00:21.5", 0.5), ("2026-02-28T10:00:21.250+00:00", 0.25)])
def test_a_date_time_keeps_its_fraction_of_a_second(text, fraction):
    """``until=…:21.5`` is half a second after ``:21``, not ``:21`` (a message at ``:21.2`` is before it)."""
    filters = __import__("project_history_recall.filters", fromlist=["filters"])
    whole = filters.parse_when(text.split(".")[0] + text.split(".")[1].lstrip("0123456789"), end=False, now=0)
    assert filters.parse_when(text, end=False, now=0) == pytest.approx(whole + fraction, abs=1e-3)


def test_pages_rank_page_ones_index_while_it_is_partial(world: World, fake, monkeypatch):
    """While the project's index is partial, each search embeds some more (newest first), which re-ranked the
    hybrid answer between pages: sessions shown on page one came again on page two, others never. A later page
    embeds nothing: it ranks what page one's index held, so the pages show each matching session once."""
    repo = world.repo("paged")
    for i in range(30):  # the oldest sessions are the ones nearest the question in meaning, embedded last
        extra = "jitter backoff reconnect storm" if i < 12 else "pagination header footer"
        world.session(f"s{i:02d}", repo, style="cli", messages=[
            ("user", f"reconnect loop attempt {i}"), ("assistant", f"{extra} note {i}"),
            ("user", f"{extra} again {i}"), ("assistant", f"done {i}")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    server = fake(dims=64, words=True, delay=0.2)
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    assert world.call("project_history_semantic_consent", {"decision": "allow"}, "cur")["success"] is True
    monkeypatch.setattr(plugin("vector_leg"), "INDEX_BUDGET_S", 0.3)  # two calls of 32 messages a search
    question = "reconnect loop with jitter backoff"

    def indexed() -> int:  # the embedding calls of messages, not of the question
        return sum(r["body"]["input"] != [question] for r in server.requests)

    try:
        first = world.search("cur", question, mode="hybrid", limit=10)
        assert first["semantic_status"] == "partial" and indexed() >= 1, first
        after_first = indexed()
        answers = [first, *pages(world, "cur", question, mode="hybrid", cursor=first["next_cursor"])]
        seen = [sid for a in answers for sid in result_sessions(a)]
        assert len(seen) == len(set(seen)) and set(seen) == {f"s{i:02d}" for i in range(30)}, seen
        assert indexed() == after_first, "the later pages embed only the question"
    finally:
        close_indexes()
