"""Text as FTS5's unicode61 sees it: ``unicode61.fold`` against Hermes' own index, and searches that depend on it.

The reference is Hermes' real ``messages_fts`` in a real state.db written by
``SessionDB``: its ``fts5vocab`` lists the tokens FTS5 made of each message.
"""

from __future__ import annotations

import re
import sqlite3

import pytest
from conftest import result_sessions, shared_world
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from project_history_recall import fts, state, store, unicode61
from project_history_recall import query as Q
from project_history_recall import snippet as N

# The alphabets people write in, and the characters where Python and unicode61 part:
# accents precomposed and combining, ß, final sigma, dotted I, Cyrillic, CJK, kana with
# (half-width) dakuten, emoji, no-break and ideographic spaces, zero-width characters.
ALPHABET = (
    "abcxyzABCXYZ0123456789 _-./:'\"#+"
    "éèêëÉÈàâäÄöÖüÜçÇñÑßẞøØåÅœŒæÆłŁžŽčČ"
    "\u0301\u0308\u0327"
    "αβγΣσςΩωέΆ"
    "абвЖжЁё"
    "数据库迁移缓存会话用设为分钟的"
    "ガカ\u3099ｶﾞｱ"
    "🙂🚀✓©"
    "\u00a0\u3000\u200b\u200d\ufeff\t\n，。、！"
    "İıǄǅǆﬁ"
)


@pytest.fixture(scope="module")
def hermes_fts(tmp_path_factory):
    from hermes_state import SessionDB

    path = tmp_path_factory.mktemp("u61") / "state.db"
    db = SessionDB(db_path=path)
    db.create_session("s", "cli")
    conn = sqlite3.connect(path)
    conn.execute("CREATE VIRTUAL TABLE temp.words USING fts5vocab(main, messages_fts, 'instance')")

    def tokens_of(text: str) -> list[str]:
        mid = db.append_message("s", "user", text)
        rows = conn.execute("SELECT term FROM temp.words WHERE doc = ? ORDER BY offset", (mid,)).fetchall()
        return [r[0] for r in rows]

    yield tokens_of
    conn.close()
    db.close()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=ALPHABET, max_size=60))
def test_tokens_are_hermes_fts_tokens(hermes_fts, text):
    assert unicode61.tokens(text) == hermes_fts(text)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=ALPHABET, max_size=60))
def test_every_latin_token_is_found_where_fts5_holds_it(hermes_fts, text):
    """What the scorer and snippets match in (``comparable``) holds each of FTS5's word tokens as a word."""
    seen = unicode61.comparable(text)
    cjk = re.compile(f"[{Q.CJK_CLASS}]")
    for token in hermes_fts(text):
        if re.fullmatch(r"[^\W_]+", token) and not cjk.search(token):
            assert re.search(Q.WORD_START + re.escape(token) + Q.WORD_END, seen), (token, seen)


@pytest.mark.parametrize(
    "text,tokens",
    [
        ("Größe und Straße", ["große", "und", "straße"]),
        ("ΣΊΣΥΦΟΣ ς", ["σίσυφοσ", "σ"]),  # Greek keeps its accents, final sigma folds
        ("我们决定用Redis缓存", ["我们决定用redis缓存"]),
        ("cafe\u0301 ok", ["cafe", "ok"]),
        ("🚀launch ✓ok", ["launch", "ok"]),
        ("no\u00a0break", ["no", "break"]),
    ],
)
def test_known_folds(hermes_fts, text, tokens):
    assert unicode61.tokens(text) == tokens == hermes_fts(text)


def test_positions_map_back_across_dropped_accents():
    text = "un cafe\u0301 noir"
    folded, where = unicode61.fold_with_positions(text)
    assert folded == "un cafe noir"
    start = folded.index("noir")
    assert text[where[start] : where[start + 4]] == "noir"
    assert N.make_snippet(text, Q.parse_query("noir cafe").units) == "un >>>cafe\u0301<<< >>>noir<<<"


def test_snippets_mark_folded_and_glued_words():
    units = Q.parse_query("GRÖßE redis").units
    assert N.make_snippet("Die Größe: 用Redis缓存", units) == "Die >>>Größe<<<: 用>>>Redis<<<缓存"


def _mixed(world) -> None:
    """Chinese with a Latin word run into it, German with ß and umlauts, and English words holding 'redis' and
    'ttl'."""
    repo = world.repo("app")
    world.session("zh", repo, messages=[("assistant", "我们决定用Redis缓存会话，TTL设为30分钟")])
    world.session("de", repo, messages=[("assistant", "Straße und Größe: die Änderung bleibt")])
    world.session("long", repo, messages=[("assistant", "we redistribute the load and fetch attlist")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])


# :func:`_mixed`, shared by the tests of it: they only read it (checked).
_mixed_module, mixed = shared_world(_mixed, "mixed")


@pytest.mark.parametrize(
    "query,expected",
    [
        ("redis", ["zh"]),  # run into Chinese: one unicode61 token, found through the trigram index
        ("Redis TTL", ["zh"]),
        ("ttl 30", ["zh"]),
        ("größe", ["de"]),  # unicode61 removes the umlaut from its tokens
        ("GRÖSSE änderung", ["de"]),
        ("straße", ["de"]),
    ],
)
def test_keyword_search_finds_words_as_fts5_holds_them(mixed, query, expected):
    answer = mixed.search("cur", query, mode="keyword")
    assert result_sessions(answer) == expected, answer


def test_a_word_inside_a_longer_latin_word_is_not_a_match(mixed):
    """"redis" is a substring of "redistribute" and "ttl" of "attlist": neither is the word."""
    for query in ("redis", "ttl"):
        answer = mixed.search("cur", query, mode="keyword")
        assert "long" not in result_sessions(answer), answer


def test_words_are_looked_for_inside_cjk_runs_only_where_there_is_cjk_text(world):
    """The trigram look-up for words run into CJK costs a search only in a state.db that holds CJK text."""
    repo = world.repo("app")
    world.session("en", repo, messages=[("assistant", "we redistribute the redis load")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    answer = world.search("cur", "redis", mode="keyword")
    assert result_sessions(answer) == ["en"] and "glued" not in answer["strategy"], answer
    world.session("zh", repo, messages=[("assistant", "决定用Redis缓存")])
    answer = world.search("cur", "redis", mode="keyword")
    assert sorted(result_sessions(answer)) == ["en", "zh"] and "glued" in answer["strategy"], answer


def test_a_word_absent_everywhere_is_found_as_soon_as_a_message_holds_it(world):
    """"Not in any row" is remembered only until state.db gets a newer message."""
    repo = world.repo("app")
    world.session("zh", repo, messages=[("assistant", "我们决定用缓存")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    assert result_sessions(world.search("cur", "valkey", mode="keyword")) == []
    world.say("zh", "assistant", "后来改用Valkey缓存会话")
    answer = world.search("cur", "valkey", mode="keyword")
    assert result_sessions(answer) == ["zh"] and "glued" in answer["strategy"], answer


def test_rows_of_a_trigram_are_counted_only_up_to_what_decides(world):
    """The look-up inside CJK runs counts a trigram's rows only up to a cap: exact below it, the cap above it,
    and a count that reached a lower cap is counted again for a higher one (never taken as exact)."""
    repo = world.repo("app")
    world.session("zh", repo, messages=[("assistant", f"第{i}次用Redis缓存 alpha") for i in range(30)]
                  + [("user", f"omega 问题 {i}") for i in range(5)])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    conn = store.open_state_db(world.home)
    try:
        assert fts.rows_up_to(conn, "trigram", "alp", 10) == 10
        assert fts.rows_up_to(conn, "trigram", "alp", 100) == 30, "the lower bound kept is not an exact count"
        assert fts.rows_up_to(conn, "trigram", "alp", 10) == 10
        assert fts.rows_up_to(conn, "trigram", "ome", 10) == 5
        assert fts.rows_up_to(conn, "trigram", "zzz", 10) == 0
        assert fts.doc_frequencies(conn, "trigram", ["alp", "ome"]) == {"alp": 30, "ome": 5}
        state.cache("term_counts").clear()
        assert fts.doc_frequencies(conn, "trigram", ["ome"]) == {"ome": 5}
        assert fts.rows_up_to(conn, "trigram", "ome", 3) == 3, "an exact count answers a lower cap"
    finally:
        conn.close()
    answer = world.search("cur", "redis", mode="keyword")
    assert result_sessions(answer) == ["zh"] and "glued" in answer["strategy"], answer


def _glued_by_full_counts(conn, forms, df):
    """The look-up's rule as it was, on full trigram counts (fts5vocab): the reference for the capped one."""
    from project_history_recall import lexical

    shortest = [f for f in forms if len(f) >= 3 and f.isascii() and f.isalnum()]
    shortest = [f for f in shortest if not any(g != f and g in f for g in shortest)]
    if not shortest:
        return 0, ""
    bound = min(min(fts.doc_frequencies(conn, "trigram", [f[i : i + 3] for i in range(len(f) - 2)]).values()) for f in shortest)
    if bound <= df or bound > lexical.GLUED_BOUND:
        return 0, ""
    expr = " OR ".join(Q.fts_quote(f) for f in shortest)
    rows = fts.phrase_frequency(conn, "trigram", expr, lexical.RANK_BUDGET + 1)
    return (rows, expr) if df < rows <= lexical.RANK_BUDGET else (0, "")


def test_capped_trigram_counts_decide_the_look_up_as_full_counts_did(world, monkeypatch):
    import random

    from project_history_recall import lexical

    repo = world.repo("app")
    rng = random.Random(5)
    words = ["redis", "rediscover", "cache", "caches", "valkey", "retry", "retries", "abc", "abcabc", "xyz"]
    world.session("zh", repo, messages=[
        ("assistant", f"第{i}次用{rng.choice(words)}缓存" if rng.random() < 0.6 else f"we {rng.choice(words)} it {i}")
        for i in range(80)])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    conn = store.open_state_db(world.home)
    try:
        for bound, budget in ((1, 12_000), (3, 12_000), (8, 12_000), (20, 12_000), (48_000, 12_000), (20, 25), (48_000, 4)):
            monkeypatch.setattr(lexical, "GLUED_BOUND", bound)
            monkeypatch.setattr(lexical, "RANK_BUDGET", budget)  # a word's rows at the budget or above: not looked up
            for word in words + ["redi", "zzzz", "cachex"]:
                forms = Q.stem_variants(word)
                grams = [f[i : i + 3] for f in forms for i in range(len(f) - 2)]
                rarest = min(fts.doc_frequencies(conn, "trigram", grams).values(), default=0)
                for df in sorted({0, 1, 30, max(rarest - 1, 0), rarest, rarest + 1, budget - 1, budget}):  # the edges too
                    for cached in (False, True):  # from a cold cache, then from what it kept
                        if not cached:
                            state.cache("term_counts").clear()
                        new = lexical.glued_rows(conn, forms, df)
                        state.cache("term_counts").clear()
                        assert new == _glued_by_full_counts(conn, forms, df), (bound, word, df, cached)
    finally:
        conn.close()


def test_once_a_trigram_bounds_the_look_up_the_others_are_counted_only_past_the_words_rows(world, monkeypatch):
    """The look-up reads a trigram's rows up to ``GLUED_BOUND`` only until one trigram is under it; from then on
    each trigram is read only far enough to show that it holds more rows than the word (``df + 1``), whatever
    the order the trigrams are counted in."""
    from project_history_recall import lexical

    repo = world.repo("app")
    # "quartz" in 6 rows; of its trigrams only "uar" is under the bound of 30 (6 + 4 rows), the others in 40 more.
    world.session("zh", repo, messages=[("assistant", "用quartz调度") for _ in range(6)] + [("user", f"guard {i}") for i in range(4)]
                  + [("user", f"quack party artz {i}") for i in range(40)])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    read: list[tuple[int, int]] = []
    counted = fts.count_matches

    def count(conn, space, match, cap):
        read.append((cap, counted(conn, space, match, cap)))
        return read[-1][1]

    monkeypatch.setattr(fts, "count_matches", count)
    monkeypatch.setattr(lexical, "GLUED_BOUND", 30)
    conn = store.open_state_db(world.home)
    try:
        state.cache("term_counts").clear()
        df = 3  # fewer rows than the substring's 6: the word is looked for inside CJK runs
        assert lexical.glued_rows(conn, ["quartz"], df) == (6, '"quartz"')
        *trigrams, phrase = read
        assert phrase[0] == lexical.RANK_BUDGET + 1 and len(trigrams) == 4
        first_under = next(i for i, (_, rows) in enumerate(trigrams) if rows <= lexical.GLUED_BOUND)
        assert all(cap == lexical.GLUED_BOUND + 1 for cap, _ in trigrams[: first_under + 1]), trigrams
        assert all(cap == df + 1 for cap, _ in trigrams[first_under + 1 :]) and first_under < 3, trigrams
    finally:
        conn.close()
