"""Reciprocal Rank Fusion as a pure function (design §4.4: k=60, 1-based ranks)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from project_history_recall.ranking import fuse_rrf

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


def _ranks(pairs):
    from project_history_recall.ranking import Hit, SessionRank

    return [SessionRank(Hit(i + 1, sid, score), score) for i, (sid, score) in enumerate(pairs)]


def test_fused_scores_are_standardised_per_leg():
    """BM25 and cosine live on different scales: each leg counts by its z-scores, not its raw numbers."""
    from project_history_recall.ranking import fuse_scores

    keyword = _ranks([("a", 40.0), ("b", 39.0), ("c", 1.0)])  # a and b close, c far below
    semantic = _ranks([("b", 0.90), ("a", 0.50), ("c", 0.45)])  # b clearly best
    fused = fuse_scores(keyword, semantic, semantic_weight=1.0)
    assert [h.session_id for h, _ in fused] == ["b", "a", "c"]
    assert dict((h.session_id, src) for h, src in fused) == {"a": "both", "b": "both", "c": "both"}
    assert [h.session_id for h, _ in fuse_scores(keyword, semantic, semantic_weight=0.0)] == ["a", "b", "c"]


def test_a_session_missing_from_a_leg_counts_as_its_lowest():
    from project_history_recall.ranking import fuse_scores

    fused = fuse_scores(_ranks([("a", 5.0), ("b", 1.0), ("e", 0.0)]), _ranks([("c", 0.9), ("a", 0.6), ("f", 0.0)]), semantic_weight=1.0)
    assert [(h.session_id, src) for h, src in fused][:3] == [("a", "both"), ("c", "semantic"), ("b", "keyword")]
    assert fuse_scores([], [], semantic_weight=1.0) == []


def test_a_session_keeps_its_keyword_message():
    from project_history_recall.ranking import Hit, SessionRank, fuse_scores

    keyword = [SessionRank(Hit(7, "a", 3.0), 3.0)]
    semantic = [SessionRank(Hit(8, "a", 0.9), 0.9)]
    assert [h.message_id for h, _ in fuse_scores(keyword, semantic, semantic_weight=1.0)] == [7]


scores = st.dictionaries(st.sampled_from("abcdefgh"), st.floats(0.0, 50.0, allow_nan=False), max_size=8)


@settings(max_examples=300)
@given(scores, scores, st.floats(0.0, 5.0))
def test_property_dominance_of_fused_scores(kw, sem, weight):
    """A session at least as good as another in both legs (absent = the leg's lowest) never ranks below it."""
    from project_history_recall.ranking import fuse_scores

    keyword = _ranks(sorted(kw.items(), key=lambda p: -p[1]))
    semantic = _ranks(sorted(sem.items(), key=lambda p: -p[1]))
    order = [h.session_id for h, _ in fuse_scores(keyword, semantic, semantic_weight=weight)]
    assert sorted(order) == sorted(set(kw) | set(sem))
    low_k, low_s = min(kw.values(), default=0.0), min(sem.values(), default=0.0)
    for x in order:
        for y in order:
            if x < y and kw.get(x, low_k) > kw.get(y, low_k) and sem.get(x, low_s) > sem.get(y, low_s):
                assert order.index(x) < order.index(y)


def test_weak_keyword_lets_the_vector_leg_lead():
    """Incidental keyword matches (a paraphrase) no longer outvote a clear semantic winner."""
    from project_history_recall import lexical, search
    from project_history_recall.ranking import Hit

    def answer(score, weight):
        return lexical.KeywordAnswer(tuple(_ranks([("kw", score), ("x", score * 0.9), ("sem", score * 0.1)])), weight=weight)

    semantic = [Hit(1, "sem", 0.9), Hit(2, "kw", 0.3), Hit(3, "x", 0.28)]
    strong = answer(5.0, 10.0)  # the best session explains half of the query's weight
    weak = answer(0.5, 10.0)  # ... a twentieth of it
    assert strong.strength >= search.WEAK_KEYWORD > weak.strength
    assert search.fuse(strong, semantic, 10)[0][0].session_id == "kw"
    assert search.fuse(weak, semantic, 10)[0][0].session_id == "sem"
