"""Hybrid fusion as pure functions: both legs' session rankings by standardised scores."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st


def _ranks(pairs):
    from project_history_recall.ranking import Hit, SessionRank

    return [SessionRank(Hit(i + 1, sid, score), score) for i, (sid, score) in enumerate(pairs)]


def test_fused_scores_are_standardised_per_leg():
    """BM25 and cosine live on different scales: each leg counts by its z-scores, not its raw numbers."""
    from project_history_recall.ranking import fuse_scores

    keyword = _ranks([("a", 40.0), ("b", 39.0), ("c", 1.0)])  # a and b close, c far below
    semantic = _ranks([("b", 0.90), ("a", 0.50), ("c", 0.45)])  # b clearly best
    fused = fuse_scores(keyword, semantic, semantic_weight=1.0)
    assert [h.session_id for h in fused] == ["b", "a", "c"]
    assert {h.session_id: h.found_by for h in fused} == {"a": "both", "b": "both", "c": "both"}
    assert [h.session_id for h in fuse_scores(keyword, semantic, semantic_weight=0.0)] == ["a", "b", "c"]


def test_a_session_missing_from_a_leg_counts_as_its_lowest():
    from project_history_recall.ranking import fuse_scores

    fused = fuse_scores(_ranks([("a", 5.0), ("b", 1.0), ("e", 0.0)]), _ranks([("c", 0.9), ("a", 0.6), ("f", 0.0)]), semantic_weight=1.0)
    assert [(h.session_id, h.found_by) for h in fused][:3] == [("a", "both"), ("c", "semantic"), ("b", "keyword")]
    assert fuse_scores([], [], semantic_weight=1.0) == []


def test_a_session_keeps_its_keyword_message():
    from project_history_recall.ranking import Hit, SessionRank, fuse_scores

    keyword = [SessionRank(Hit(7, "a", 3.0), 3.0)]
    semantic = [SessionRank(Hit(8, "a", 0.9), 0.9)]
    assert [h.message_id for h in fuse_scores(keyword, semantic, semantic_weight=1.0)] == [7]


scores = st.dictionaries(st.sampled_from("abcdefgh"), st.floats(0.0, 50.0, allow_nan=False), max_size=8)


@given(scores, scores, st.floats(0.0, 5.0))
def test_property_dominance_of_fused_scores(kw, sem, weight):
    """A session at least as good as another in both legs (absent = the leg's lowest) never ranks below it."""
    from project_history_recall.ranking import fuse_scores

    keyword = _ranks(sorted(kw.items(), key=lambda p: -p[1]))
    semantic = _ranks(sorted(sem.items(), key=lambda p: -p[1]))
    order = [h.session_id for h in fuse_scores(keyword, semantic, semantic_weight=weight)]
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
    assert search.fuse(strong, semantic, 10)[0].session_id == "kw"
    assert search.fuse(weak, semantic, 10)[0].session_id == "sem"


@given(st.lists(st.tuples(st.integers(0, 40), st.booleans()), max_size=120), st.randoms(use_true_random=False), st.integers(1, 8))
def test_property_earlier_recalls_checked_within_reach_rank_as_checking_every_hit(found, rnd, reach):
    """Checking only what can reach the first ``reach`` sessions ranks them as checking every hit would, checks
    each hit at most once, and asks in a number of rounds logarithmic in the sessions."""
    from project_history_recall.ranking import Hit, demote, demote_earlier, rank_sessions

    values = rnd.sample(range(1000), len(found))  # distinct scores in [1, 2); demoted ones fall in [0.1, 0.2)
    hits = [Hit(i + 1, f"s{sid}", 1.0 + v / 1000) for i, ((sid, _), v) in enumerate(zip(found, values, strict=True))]
    echoes = {h.message_id for h, (_, echo) in zip(hits, found, strict=True) if echo}
    asked: list[int] = []
    rounds = []

    def earlier(ids: list[int]) -> set[int]:
        asked.extend(ids)
        rounds.append(len(ids))
        return echoes & set(ids)

    bounded = rank_sessions(demote_earlier(hits, earlier, reach))[:reach]
    full = rank_sessions(demote(hits, echoes))[:reach]
    assert [(r.session_id, r.hit.message_id, r.score) for r in bounded] == [(r.session_id, r.hit.message_id, r.score) for r in full]
    assert len(asked) == len(set(asked))
    assert set(asked) >= {h.message_id for h in hits if h.session_id in {r.session_id for r in full}}
    assert len(rounds) <= (len({h.session_id for h in hits}) + 2).bit_length(), rounds


def test_earlier_recalls_are_checked_in_the_sessions_a_page_can_reach_only():
    """300 sessions matched, a page reaches 51: about those 51 sessions' hits are checked, not 300."""
    from project_history_recall.ranking import Hit, demote_earlier

    hits = [Hit(i + 1, f"s{i}", 1.0 + i / 1000) for i in range(300)]
    asked: list[int] = []
    echoes = {300, 299}  # the two best are echoes: two more sessions come in
    ranked = demote_earlier(hits, lambda ids: asked.extend(ids) or echoes & set(ids), 51)
    assert len(asked) == 53 and {h.message_id for h in ranked if h.score < 1} == echoes


def test_a_run_of_earlier_questions_is_checked_in_a_few_rounds():
    """50 strong sessions, then 400 weaker ones that are each an earlier question: each demotion brings the next
    one within a page's 51 sessions. Checking one more session per round took 401 rounds, each ranking every
    hit (the hits' square); widening the check geometrically takes a handful, and the page is the same."""
    from project_history_recall.ranking import Hit, demote, demote_earlier, rank_sessions

    hits = [Hit(i + 1, f"top{i}", 10.0 + i) for i in range(50)]
    hits += [Hit(100 + i, f"asked{i}", 5.0 - i / 1000) for i in range(400)]
    questions = {h.message_id for h in hits if h.session_id.startswith("asked")}
    rounds: list[int] = []
    ranked = demote_earlier(hits, lambda ids: rounds.append(len(ids)) or questions & set(ids), 51)
    assert rank_sessions(ranked)[:51] == rank_sessions(demote(hits, questions))[:51]
    assert len(rounds) <= 10 and sum(rounds) == len(hits), rounds
