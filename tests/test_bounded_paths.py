"""Bounded keyword retrieval (lexical.py), forced on a small state.db by shrinking its budgets.

Whatever path answers, every matching session of the project stays
reachable, wherever the project's rows sit in state.db, and nothing of
another project leaks in (the latency is measured in bench/keyword_latency.py).
"""

from __future__ import annotations

import sys

import pytest
from conftest import World, result_sessions


def plugin(name: str):
    return sys.modules[f"hermes_plugins.project_history_recall.{name}"]


def pages(world: World, sid: str, query: str, **args) -> list[dict]:
    answers = [world.search(sid, query, limit=10, **args)]
    while answers[-1].get("next_cursor"):
        answers.append(world.search(sid, query, limit=10, cursor=answers[-1]["next_cursor"], **args))
    return answers


@pytest.fixture
def old(world: World):
    """Project A's history is older than all of project B's; the user comes back to A today."""
    a, b = world.repo("a"), world.repo("b")
    for i in range(6):
        world.session(f"a{i}", a, messages=[
            ("user", f"error in function handler number {i}"),
            ("assistant", "the function returned an error; 数据库迁移 问题" + (" pelican" if i == 2 else "")),
        ])
    for i in range(40):
        world.session(f"b{i:02d}", b, messages=[("user", f"error function {'pelican' if i < 2 else ''} {i}"), ("assistant", "问题 error")])
    world.session("cur", a, style="cli", messages=[("user", "hi")])
    return world


A_SESSIONS = {f"a{i}" for i in range(6)}


def test_a_common_word_is_found_in_a_project_older_than_the_rest(old, monkeypatch):
    """Every word the project holds is found, even when it is common and the project's rows are the oldest."""
    monkeypatch.setattr(plugin("lexical"), "RANK_BUDGET", 3)  # 'error' is now common
    answer = old.search("cur", "error", limit=10)
    assert "newest" in answer["strategy"]
    assert set(result_sessions(answer)) == A_SESSIONS


def test_the_rare_word_leads_and_common_words_fill_the_page(old, monkeypatch):
    """'pelican' is rare, 'error' common: the session with both first, then the project's other 'error' sessions."""
    monkeypatch.setattr(plugin("lexical"), "RANK_BUDGET", 3)
    got = result_sessions(old.search("cur", "pelican error", limit=10))
    assert got[0] == "a2" and set(got) == A_SESSIONS


def test_a_query_of_common_words_only_still_answers(old, monkeypatch):
    monkeypatch.setattr(plugin("lexical"), "RANK_BUDGET", 1)
    answer = old.search("cur", "how did we handle the error in that function?", limit=10)
    assert set(result_sessions(answer)) == A_SESSIONS
    assert "No matching" not in answer.get("message", "")


def test_the_newest_first_scan_is_bounded(old, monkeypatch):
    """The scan stops after SCAN_MESSAGES message ids: newest sessions only, never another project's."""
    lexical = plugin("lexical")
    monkeypatch.setattr(lexical, "RANK_BUDGET", 1)
    monkeypatch.setattr(lexical, "SCAN_BATCH", 1)
    monkeypatch.setattr(lexical, "SCAN_MESSAGES", 2)  # two sessions of two messages, one id each batch
    got = result_sessions(old.search("cur", "error", limit=10))
    assert got and set(got) <= {"a5", "a4"}


def test_one_session_with_hundreds_of_matches_does_not_hide_the_others(world: World):
    """Bounds are per session: 450 matching messages in one session, 20 other sessions with one each."""
    repo = world.repo("app")
    world.session("loud", repo, style="cli")
    for i in range(450):
        world.say("loud", "assistant" if i % 2 else "user", f"websocket frame {i} dropped, websocket reconnect")
    for i in range(20):
        world.session(f"q{i:02d}", repo, messages=[("user", f"the websocket idea number {i}")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    answers = pages(world, "cur", "websocket", mode="keyword")
    first = result_sessions(answers[0])
    assert len(first) == 10 == len(set(first)), "a page holds limit distinct sessions"
    seen = [sid for a in answers for sid in result_sessions(a)]
    assert len(seen) == len(set(seen)) == 21, "the cursor reaches every matching session once"


def test_pages_reach_fifty_sessions(world: World):
    repo = world.repo("wide")
    for i in range(60):
        world.session(f"w{i:02d}", repo, messages=[("user", f"retry policy tweak {i}")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    answers = pages(world, "cur", "retry policy", mode="keyword")
    seen = [sid for a in answers for sid in result_sessions(a)]
    assert len(seen) == len(set(seen)) == plugin("pages").MAX_REACH


def test_short_cjk_words_are_read_newest_first_and_stop_once_enough_matched(world: World, monkeypatch):
    """A two-character CJK word has no trigram: a LIKE over the project's sessions, newest first, bounded."""
    repo = world.repo("many")
    for i in range(60):
        world.session(f"m{i:02d}", repo, messages=[("user", f"第{i + 10}个问题")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    substring = plugin("substring")
    calls = []
    real = substring.like_candidates

    def counting(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append(len({sid for _, sid in out[0]}))
        return out

    monkeypatch.setattr(substring, "LIKE_BATCH", 1)  # one session a query
    monkeypatch.setattr(substring, "like_candidates", counting)
    answer = world.search("cur", "问题", limit=10)
    got = result_sessions(answer)
    assert got == [f"m{i:02d}" for i in range(59, 49, -1)], "the newest sessions, newest first"
    reach = plugin("pages").MAX_REACH
    assert calls == [reach + 1], f"the scan stopped after {reach + 1} sessions, not all 60"
    assert answer["next_cursor"], "the next page exists"


def test_a_short_cjk_word_past_the_substring_budget_is_never_a_silent_no_match(world: World, monkeypatch):
    """The word lies only in the oldest session, past what the substring search may read: the answer says older
    messages may hold more matches instead of a bare "no matches"; with the whole project read, it says nothing."""
    repo = world.repo("many")
    world.session("oldest", repo, messages=[("user", "这个问题很难")])
    for i in range(30):
        world.session(f"m{i:02d}", repo, messages=[("user", f"第{i + 10}个方案"), ("assistant", "好的")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    lexical = plugin("lexical")
    monkeypatch.setattr(plugin("substring"), "LIKE_BATCH", 1)
    monkeypatch.setattr(lexical, "SUBSTRING_MESSAGES", 20)  # the ten newest sessions
    answer = world.search("cur", "问题")
    assert answer["results"] == [] and answer["keyword_note"] == lexical.LIKE_NOTE, answer
    monkeypatch.setattr(lexical, "SUBSTRING_MESSAGES", 240_000)
    answer = world.search("cur", "问题")
    assert result_sessions(answer) == ["oldest"] and "keyword_note" not in answer, answer


def test_short_cjk_words_are_found_in_an_old_project(old):
    got = result_sessions(old.search("cur", "问题", limit=10))
    assert set(got) == A_SESSIONS
