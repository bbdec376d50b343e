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
