"""Semantic and hybrid say "no matches" when nothing is close enough, as keyword does (``ranking.close_enough``).

With the real local model and every message indexed: a word that only
another project holds, and a query of punctuation alone, find nothing in
any mode, where the vector leg would otherwise return this project's
nearest messages ("ok"). A question the project does answer still finds it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import World, local_semantic, phr, result_sessions

MODES = ("semantic", "hybrid", "keyword")


@pytest.fixture
def two_projects(world: World, local_model) -> Iterator[World]:
    alpha, beta = world.repo("alpha"), world.repo("beta")
    world.session("a_ok", alpha, messages=[("user", "ok"), ("assistant", "ok")])
    world.session("a_ws", alpha, messages=[("assistant", "We fixed the flaky websocket by adding exponential backoff to the reconnect loop.")])
    world.session("b_kafka", beta, messages=[("assistant", "The kafka consumer group rebalances on every deploy; we pinned the partition count.")])
    world.session("cur", alpha, style="cli", messages=[("user", "let's continue")])
    yield from local_semantic(world, "cur", local_model)


def test_a_word_only_another_project_holds_finds_nothing(two_projects: World):
    for mode in MODES:
        answer = two_projects.search("cur", "kafka", mode=mode)
        assert answer["semantic_status"] == "ready", answer
        assert answer["results"] == [], (mode, answer["results"])
        if mode == "keyword":
            assert answer["message"] == "No matching messages in this project's other sessions"
        else:  # the nearest messages were set aside: the answer says why, and how to ask by meaning
            assert answer["message"].startswith("No message in this project's other sessions matches “kafka”. A single "
                                                "word is searched by its spelling"), answer["message"]
            assert "(“what did we decide about kafka?”) is searched by meaning" in answer["message"]
    # The same word from the project that holds it is found, by meaning too.
    beta_cur = two_projects.session("b_cur", two_projects.work / "beta", style="cli", messages=[("user", "hi")])
    for mode in MODES:
        assert result_sessions(two_projects.search(beta_cur, "kafka", mode=mode)) == ["b_kafka"], mode


def test_a_quoted_phrase_alone_is_named_as_typed(two_projects: World):
    answer = two_projects.search("cur", '"kafka consumer"', mode="hybrid")
    assert answer["results"] == [] and "matches “kafka consumer”." in answer["message"], answer


def test_punctuation_alone_has_no_searchable_words_in_every_mode(two_projects: World):
    for mode in MODES:
        answer = two_projects.search("cur", "***", mode=mode)
        assert answer["results"] == [] and answer["message"] == "The query has no searchable words", (mode, answer)


def test_a_question_the_project_answers_is_still_found(two_projects: World):
    for mode in ("semantic", "hybrid"):
        order = result_sessions(two_projects.search("cur", "how did we stop the socket from dropping all the time?", mode=mode))
        assert order[:1] == ["a_ws"], (mode, order)


def test_close_enough_pure():
    Hit = phr.ranking.Hit
    hits = [Hit(1, "a", 0.9), Hit(2, "b", phr.ranking.LOCAL_FLOOR - 0.01)]
    assert phr.ranking.close_enough(hits, provider="local", one_word=False, keyword_sessions=()) == tuple(hits)
    assert phr.ranking.close_enough(hits[1:], provider="local", one_word=False, keyword_sessions={"b"}) == ()
    assert phr.ranking.close_enough(hits, provider="local", one_word=True, keyword_sessions=()) == ()
    assert phr.ranking.close_enough(hits, provider="local", one_word=True, keyword_sessions={"a", "b"}) == tuple(hits)
    assert phr.ranking.close_enough(hits, provider="local", one_word=True, keyword_sessions={"b"}) == (hits[1],)
    assert phr.ranking.close_enough(hits, provider="openai", one_word=False, keyword_sessions=()) == tuple(hits)
    assert phr.ranking.close_enough(hits, provider="openai", one_word=True, keyword_sessions=()) == ()


def test_a_word_the_project_holds_is_ordered_by_meaning_among_the_sessions_that_hold_it(two_projects: World):
    """Review 31: for "walrus", held by 2 sessions, hybrid and semantic filled the page with 8 more, the word's nearest
    vectors ("ok", "logo update"), which tell nothing the word does not."""
    for mode in MODES:
        answer = two_projects.search("cur", "websocket", mode=mode, limit=5)
        assert answer["semantic_status"] == "ready" and result_sessions(answer) == ["a_ws"], (mode, answer["results"])
