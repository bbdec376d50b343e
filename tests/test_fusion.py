"""Reciprocal Rank Fusion as a pure function (design §4.4: k=60, 1-based ranks)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from project_history_recall.search import fuse_rrf

ranking = st.lists(st.integers(0, 40), max_size=25, unique=True)


def test_worked_example():
    fused = fuse_rrf([[1, 2, 3], [3, 1]])
    assert [item for item, _ in fused] == [1, 3, 2]
    assert fused[0][1] == 1 / 61 + 1 / 62
    assert fused[2][1] == 1 / 62


def test_ties_are_broken_by_id():
    assert [item for item, _ in fuse_rrf([[7], [3]])] == [3, 7]


def test_weights():
    assert [item for item, _ in fuse_rrf([[1], [2]], weights=[1.0, 0.5])] == [1, 2]
    assert [item for item, _ in fuse_rrf([[1], [2]], weights=[0.5, 1.0])] == [2, 1]


@settings(max_examples=300)
@given(st.lists(ranking, min_size=1, max_size=4))
def test_property_union_and_order(rankings):
    snapshot = [list(r) for r in rankings]
    fused = fuse_rrf(rankings)
    assert rankings == snapshot, "inputs are not mutated"
    assert {item for item, _ in fused} == {x for r in rankings for x in r}
    scores = [score for _, score in fused]
    assert scores == sorted(scores, reverse=True)
    assert fuse_rrf(list(reversed(rankings))) == fused, "the order of the lists does not matter"


@settings(max_examples=300)
@given(st.lists(ranking.filter(bool), min_size=1, max_size=4))
def test_property_first_everywhere_wins(rankings):
    top = rankings[0][0]
    rankings = [[top] + [x for x in r if x != top] for r in rankings]
    assert fuse_rrf(rankings)[0][0] == top


@settings(max_examples=300)
@given(st.lists(ranking, min_size=1, max_size=4), st.integers(0, 40), st.integers(0, 40))
def test_property_dominance(rankings, a, b):
    """If a is ranked at least as well as b in every list (absent = worst), a scores at least as high."""
    def rank(r, x):
        return r.index(x) if x in r else len(r) + 1

    if a != b and all(rank(r, a) <= rank(r, b) for r in rankings):
        scores = dict(fuse_rrf(rankings))
        assert scores.get(a, 0.0) >= scores.get(b, 0.0)


def test_strong_keyword_needs_two_query_units():
    search = __import__("project_history_recall.search", fromlist=["search"])
    units = search.parse_query("unstable socket connection dropping").units
    hits = [search.Hit(1, "a", -3.0), search.Hit(2, "b", -2.0), search.Hit(3, "c", -1.0)]
    texts = {1: "We spent a long time on the socket docs", 2: "the socket connection kept dropping", 3: "nothing here"}
    assert [h.message_id for h in search.strong_keyword(hits, texts, units)] == [2]
    one = search.parse_query("socket").units
    assert [h.message_id for h in search.strong_keyword(hits, texts, one)] == [1, 2], "a one-word query needs that word"
    assert search.strong_keyword(hits, texts, ()) == hits, "no units: nothing to require"


def test_fuse_sessions_counts_only_strong_keyword_sessions():
    search = __import__("project_history_recall.search", fromlist=["search"])
    H = search.Hit
    keyword = [H(1, "weak", -5.0), H(2, "strong", -4.0), H(3, "weak_only", -3.0)]
    semantic = [H(10, "meaning", -0.9), H(11, "strong", -0.8), H(12, "weak", -0.7)]
    fused = search.fuse_sessions(keyword, semantic, 10, counted={"strong"})
    assert [(h.session_id, h.message_id, src) for h, src in fused] == [
        ("strong", 2, "both"),  # both legs vote
        ("meaning", 10, "semantic"),  # the vector leg's first
        ("weak", 1, "both"),  # keyword does not vote for it, but its keyword message is shown
        ("weak_only", 3, "keyword"),  # not voted for by either leg: after the fused sessions
    ]
    plain = search.fuse_sessions(keyword, semantic, 10)
    assert plain[0][0].session_id == "weak", "without counted every keyword session votes"


def test_coverage_matches_phrases_across_separators():
    search = __import__("project_history_recall.search", fromlist=["search"])
    units = search.parse_query('"reconnect loop" src/app.py update_session_cwd').units
    assert search.coverage("the Reconnect\nloop fired twice", units) == 1
    assert search.coverage("see reconnect-loop, in SRC/app.py", units) == 2
    assert search.coverage("update_session_cwd() was called", units) == 1
    assert search.coverage("update session cwd", units) == 0, "an identifier stays whole"
