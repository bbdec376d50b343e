"""The bounded retrieval paths for big databases, forced on a small one by
shrinking their thresholds: results must stay scoped and correct whichever
path answers (the latency itself is measured in bench/keyword_latency.py)."""

from __future__ import annotations

import sys

import pytest
from conftest import World, result_sessions


def plugin(name: str):
    return sys.modules[f"hermes_plugins.project_history_recall.{name}"]


@pytest.fixture
def big(world: World):
    """Project A (the current one) and B share common words; A also has rarer ones."""
    a, b = world.repo("a"), world.repo("b")
    for i in range(6):
        world.session(f"a{i}", a, messages=[
            ("user", f"error in function handler number {i}"),
            ("assistant", "the function returned an error; 数据库迁移 问题" + (" pelican" if i == 2 else "")),
        ])
        world.session(f"b{i}", b, messages=[("user", f"error function {'pelican' if i < 2 else ''} {i}"), ("assistant", "问题 error")])
    world.session("cur", a, style="cli", messages=[("user", "hi")])
    return world


A_SESSIONS = {f"a{i}" for i in range(6)}


def test_windows_over_the_newest_matches(big, monkeypatch):
    monkeypatch.setattr(plugin("search"), "RANK_BUDGET", 3)
    monkeypatch.setattr(plugin("search"), "SCOPE_SCAN_LIMIT", 0)  # treat the project as big
    answer = big.search("cur", "error", limit=3)
    assert "windows" in answer["strategy"]
    got = result_sessions(answer)
    assert len(got) == 3 and set(got) <= A_SESSIONS
    # Windows walk back from the newest matches: the newest sessions win.
    assert set(got) == {"a5", "a4", "a3"}


def test_small_project_common_term_scans_the_project(big, monkeypatch):
    monkeypatch.setattr(plugin("search"), "RANK_BUDGET", 3)
    answer = big.search("cur", "error function", limit=10)
    assert "like-scope" in answer["strategy"]
    assert set(result_sessions(answer)) == A_SESSIONS


def test_like_windows_in_a_big_project(big, monkeypatch):
    monkeypatch.setattr(plugin("search"), "SCOPE_SCAN_LIMIT", 0)
    monkeypatch.setattr(plugin("search"), "LIKE_WINDOW", 4)  # many tiny id windows
    answer = big.search("cur", "问题", limit=10)
    assert answer["strategy"] == "like"
    assert set(result_sessions(answer)) == A_SESSIONS


def test_like_windows_stop_at_the_scan_cap(big, monkeypatch):
    monkeypatch.setattr(plugin("search"), "SCOPE_SCAN_LIMIT", 0)
    monkeypatch.setattr(plugin("search"), "LIKE_WINDOW", 2)
    monkeypatch.setattr(plugin("search"), "LIKE_SCAN_CAP", 6)  # only the newest 6 message ids
    answer = big.search("cur", "问题", limit=10)
    assert set(result_sessions(answer)) <= {"a5", "a4"}


def test_common_words_dropped_then_all_words_when_the_rare_ones_miss(big, monkeypatch):
    """'pelican' is rarer than 'error' overall but mostly in project B."""
    search = plugin("search")
    monkeypatch.setattr(search, "RANK_BUDGET", 3)
    monkeypatch.setattr(search, "COMMON_FRACTION", 0.2)
    plugin("store")._df_cache.clear()
    answer = big.search("cur", "pelican error", limit=3)
    got = result_sessions(answer)
    assert got[0] == "a2" and set(got) <= A_SESSIONS and len(got) == 3
    assert "all words" in answer["strategy"]


def test_like_windows_stop_once_enough_sessions_matched(world: World, monkeypatch):
    """A big project's short-CJK scan ends when a full page of sessions (and one more) has matched."""
    repo = world.repo("many")
    for i in range(30):
        world.session(f"m{i:02d}", repo, messages=[("user", f"第{i}个问题")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    store = plugin("store")
    calls = []
    real = store.like_candidates

    def counting(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append(len(out))
        return out

    monkeypatch.setattr(plugin("search"), "SCOPE_SCAN_LIMIT", 0)
    monkeypatch.setattr(plugin("search"), "LIKE_WINDOW", 3)  # 3 message ids a window
    monkeypatch.setattr(store, "like_candidates", counting)
    answer = world.search("cur", "问题", limit=10)
    got = result_sessions(answer)
    assert got == [f"m{i:02d}" for i in range(29, 19, -1)], "the newest sessions, newest first"
    assert calls == [plugin("search").MAX_LIMIT + 1], "the scan stopped after 11 sessions, not all 30"
    assert answer["next_cursor"], "the 11th session is the next page"
