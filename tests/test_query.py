"""Query parsing, snippets and per-session selection (pure parts of search.py)."""

from __future__ import annotations

import sqlite3
import unicodedata
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from project_history_recall import query as Q
from project_history_recall import snippet as N


def texts(query: str) -> list[tuple[str, str]]:
    return [(u.text, u.kind) for u in Q.parse_query(query).units]


@pytest.mark.parametrize(
    "query,expected",
    [
        ("How did we fix the websocket reconnect bug?", [("fix", "word"), ("websocket", "word"), ("reconnect", "word"), ("bug", "word")]),
        ('"exact phrase" foo', [("exact phrase", "phrase"), ("foo", "word")]),
        ("update_session_cwd", [("update_session_cwd", "phrase")]),
        ("chat-send P2.2", [("chat-send", "phrase"), ("p2.2", "phrase")]),
        ("TODO: fix", [("todo", "word"), ("fix", "word")]),
        ("src/app.py", [("src/app.py", "phrase")]),
        ("AND websocket OR", [("websocket", "word")]),
        ("NOT", [("not", "word")]),
        ("what is it", [("what", "word"), ("is", "word"), ("it", "word")]),
        ("数据库迁移", [("数据库迁移", "cjk")]),
        ("我们怎么处理数据库迁移的问题", [("处理数据库迁移", "cjk"), ("问题", "cjk")]),
        ("websocket 重连", [("websocket", "word"), ("重连", "cjk")]),
        ("数据库迁移怎么做", [("数据库迁移", "cjk")]),  # a lone character is dropped ...
        ("做", [("做", "cjk")]),  # ... unless it is all there is
        ('"unbalanced quote', [("unbalanced", "word"), ("quote", "word")]),
        ("*x*", [("x", "word")]),
        ("cat's", [("cat", "word")]),
        ("C++ and C#", [("c++", "phrase"), ("c#", "phrase")]),
    ],
)
def test_parse_query_units(query, expected):
    assert texts(query) == expected


def test_stop_words_are_kept_when_nothing_else_is_left():
    assert texts("the") == [("the", "word")]


@pytest.mark.parametrize("query", ["", "   ", "***", '""', "\x00\x01", "?!.,;"])
def test_parse_query_with_nothing_searchable(query):
    assert Q.parse_query(query).units == ()


def test_long_queries_are_capped():
    parsed = Q.parse_query("word " * 50_000)
    assert len(parsed.units) <= Q.MAX_UNITS and parsed.truncated
    parsed = Q.parse_query(" ".join(f"w{i}" for i in range(100)))
    assert len(parsed.units) == Q.MAX_UNITS and parsed.truncated


# Every unit becomes a quoted FTS5 phrase: whatever the user typed, the
# expression must parse. Checked against a real FTS5 table, like state.db's.
@pytest.fixture(scope="module")
def fts():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(content)")
    conn.execute("CREATE VIRTUAL TABLE g USING fts5(content, tokenize='trigram')")
    return conn


HAZARDS = [
    "hermes-agent", "a:b", "cat's", "NOT", "foo OR", "AND", '"unbalanced', "*x", "x*", "NEAR(a b)",
    "col:term", "^start", "a + b", "{a b}", "(((", ")))", "'single'", '""""', "a\\b", "a\"b\"c",
    "/usr/local/bin/python3", "C:\\Users\\x", "数据库", "数据库迁移", "🙂 emoji", "\u200b zero width",
    "x" * 10_000, "\ud800 lone surrogate", "tab\tnew\nline", "-leading", "trailing-", "a--b", "1.2.3",
]


@pytest.mark.parametrize("query", HAZARDS)
def test_hostile_queries_find_their_own_text_and_nothing_else(fts, query):
    """Each unit's FTS5 expression parses, and finds the text it came from but not a filler row.

    A unit that parses but matches nothing (quoting gone wrong, a fold FTS5
    does not share) would pass a "parses" check and still never find anything.
    """
    # What a database can hold, and as much as a query reads (MAX_QUERY_CHARS).
    text = query[: Q.MAX_QUERY_CHARS].encode("utf-8", "replace").decode("utf-8")
    fts.execute("DELETE FROM t")
    fts.execute("DELETE FROM g")
    for table in ("t", "g"):
        fts.executemany(f"INSERT INTO {table}(rowid, content) VALUES (?, ?)", [(1, text), (2, "unrelated filler words here")])
    parsed = Q.parse_query(query)
    assert parsed.units or not any(ch.isalnum() for ch in text), query
    for unit in parsed.units:
        if unit.kind == "cjk":
            for gram in Q.cjk_trigrams(unit.text):
                assert fts.execute("SELECT rowid FROM g WHERE g MATCH ?", (Q.fts_quote(gram),)).fetchall() == [(1,)], gram
            continue
        found = fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (Q.fts_quote(unit.text),)).fetchall()
        assert found == [(1,)], (unit, found)


@given(st.text(max_size=300))
def test_property_any_text_parses_to_valid_fts5(fts_query_conn, text):
    parsed = Q.parse_query(text)
    if parsed.units:
        expr = " OR ".join(Q.fts_quote(u.text) for u in parsed.units)
        fts_query_conn.execute("SELECT count(*) FROM t WHERE t MATCH ?", (expr,)).fetchall()


@pytest.fixture(scope="module")
def fts_query_conn():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(content)")
    return conn


def test_cjk_trigrams():
    assert Q.cjk_trigrams("数据库迁移") == ["数据库", "据库迁", "库迁移"]
    assert Q.cjk_trigrams("迁移") == []


def test_snippet_is_bounded_and_marks_the_match():
    text = "x " * 2000 + "the websocket backoff fix" + " y" * 2000
    snip = N.make_snippet(text, Q.parse_query("websocket").units)
    assert ">>>websocket<<<" in snip
    assert len(snip) <= N.SNIPPET_CHARS + len(">>><<<") + 2 * len("...")
    assert snip.startswith("...") and snip.endswith("...")


def test_snippet_marks_every_matching_word():
    snip = N.make_snippet("exponential backoff between websocket reconnects; backoffs capped", Q.parse_query("websocket backoff").units)
    assert snip == "exponential >>>backoff<<< between >>>websocket<<< reconnects; >>>backoffs<<< capped"
    assert ">>>" not in N.make_snippet("websockets2 are not websocket_x", Q.parse_query("websocket").units).split("are")[0]


def test_snippet_without_match_is_the_start():
    assert N.make_snippet("short text", Q.parse_query("zzz").units) == "short text"


def test_plural_forms_are_one_term():
    from project_history_recall import query

    assert query.s_stem("timeouts") == query.s_stem("timeout") == "timeout"
    assert query.s_stem("queries") == "query" and query.s_stem("status") == "status"
    assert set(query.stem_variants("timeout")) >= {"timeout", "timeouts"}
    assert "queries" in query.stem_variants("query")
    assert all(query.s_stem(f) == query.s_stem("cache") for f in query.stem_variants("caches"))


def test_a_session_that_returns_to_a_topic_ranks_above_a_single_mention():
    from project_history_recall import ranking

    hits = [ranking.Hit(1, "once", 2.0), ranking.Hit(2, "often", 1.9), ranking.Hit(3, "often", 1.5), ranking.Hit(4, "often", 1.0)]
    ranked = ranking.rank_sessions(hits)
    assert [r.session_id for r in ranked] == ["often", "once"]
    assert ranked[0].hit.message_id == 2, "a session shows its best message"


def test_bm25_counts_a_plural_as_the_word_and_prefers_the_focused_message():
    from project_history_recall import query, ranking

    term = ranking.Term("word", tuple(query.stem_variants("timeout")), df=2)
    scorer = ranking.Scorer((term,), ranking.Stats(100, 10.0), ranking.Stats(100, 50.0))
    assert scorer.score("the upstream timeouts were raised") > 0
    assert scorer.score("set the timeout") > scorer.score("set the timeout " + "and a lot more words " * 10)
    assert scorer.score("nothing of the sort") == 0.0


# Characters around which word boundaries differ: ASCII and other letters, digits (also non-ASCII ones),
# CJK of both planes, kana, hangul, underscore, separators.
_CHARS = "ab1_ é²٣用缓\U00020001ーか가-./"
_PLAIN = "ab1é٣"


def _old_spans(body: str, text: str) -> list[tuple[int, int]]:
    import re

    return [m.span() for m in re.finditer(rf"{Q.WORD_START}(?:{body}){Q.WORD_END}", text)]


def _old_any_of_spans(forms: list[str], text: str) -> list[tuple[int, int]]:
    """The full pattern as the scorer built it: the distinct forms, longest first."""
    import re

    return _old_spans("|".join(re.escape(f) for f in sorted(dict.fromkeys(forms), key=len, reverse=True)), text)


@given(forms=st.lists(st.text(_PLAIN, min_size=1, max_size=4), min_size=1, max_size=4),
       text=st.text(_CHARS, max_size=24))
def test_word_matcher_finds_what_the_full_pattern_finds(forms: list[str], text: str) -> None:
    """Forms of letters and digits (the checked-neighbour path), prefix-related ones included."""
    assert list(Q.WordMatcher.any_of(forms).spans(text)) == _old_any_of_spans(forms, text)


@given(tokens=st.lists(st.text(_PLAIN, min_size=1, max_size=3), min_size=1, max_size=3),
       text=st.text(_CHARS, max_size=24))
def test_phrase_matcher_finds_what_the_full_pattern_finds(tokens: list[str], text: str) -> None:
    """Repeated tokens ("b b" in "xb b b") must find the match that starts inside a rejected one."""
    import re

    assert list(Q.WordMatcher.phrase(tokens).spans(text)) == _old_spans(r"[\W_]+".join(re.escape(t) for t in tokens), text)


@given(forms=st.lists(st.text(_CHARS, min_size=1, max_size=3), min_size=1, max_size=3),
       tokens=st.lists(st.text(_PLAIN, min_size=1, max_size=3), min_size=1, max_size=3),
       text=st.text(_CHARS, max_size=24) | st.text(_CHARS.replace("用缓\U00020001ーか가", ""), max_size=24))
def test_matchers_count_what_the_full_pattern_finds(forms: list[str], tokens: list[str], text: str) -> None:
    """``counts`` (read in C where the text holds no CJK) counts the strings the full pattern matches."""
    import re
    from collections import Counter

    for matcher, body in ((Q.WordMatcher.any_of(forms), "|".join(re.escape(f) for f in sorted(dict.fromkeys(forms), key=len, reverse=True))),
                          (Q.WordMatcher.phrase(tokens), r"[\W_]+".join(re.escape(t) for t in tokens))):
        assert matcher.counts(text) == Counter(text[a:b] for a, b in _old_spans(body, text))


@given(forms=st.lists(st.text(_CHARS, min_size=1, max_size=3), min_size=1, max_size=3),
       text=st.text(_CHARS, max_size=24))
def test_word_matcher_with_any_characters_in_its_forms(forms: list[str], text: str) -> None:
    """Forms holding CJK, ``_`` or separators (unicode61 tokens of a CJK run, say) go through the full pattern."""
    assert list(Q.WordMatcher.any_of(forms).spans(text)) == _old_any_of_spans(forms, text)


@pytest.mark.parametrize("forms,text,expected", [
    (["config", "configs"], "configs configsx 用configs缓 config_ xconfig", [(0, 7), (18, 25), (27, 33)]),
    (["b"], "ab b用b", [(3, 4), (5, 6)]),
])
def test_word_matcher_examples(forms: list[str], text: str, expected: list[tuple[int, int]]) -> None:
    assert list(Q.WordMatcher.any_of(forms).spans(text)) == expected


@pytest.mark.parametrize("tokens,text,expected", [
    (["b", "b"], "xb b b", [(3, 6)]),  # the match starts inside one rejected for its start
    (["a1", "b"], "a1-b a1__b 用a1 b缓 a1 bc", [(0, 4), (5, 10), (12, 16)]),
])
def test_phrase_matcher_examples(tokens: list[str], text: str, expected: list[tuple[int, int]]) -> None:
    assert list(Q.WordMatcher.phrase(tokens).spans(text)) == expected


# --- the vector leg's query: a folder of the project named in the question (query.vector_queries) ---

APPS = Q.folder_names(["/w/shop/ecommerce-api", "/w/shop/Dashboard_App/", "/w/shop/docs", "C:\\w\\shop\\web-app", ""])


def test_folder_names_are_the_last_folders_as_compared():
    # Case-folded, "_" read as "-", Windows paths split, macOS's decomposed names composed.
    assert APPS == {"ecommerce-api", "dashboard-app", "docs", "web-app"}
    assert Q.folder_names(["/w/hermes.nvim", "/w/cafe\u0301-api/", "/"]) == {"hermes.nvim", "caf\u00e9-api"}


@pytest.mark.parametrize(
    "question,rest",
    [
        ("What database does the ecommerce-api use?", "What database does the use?"),
        ("how is auth done in Ecommerce_API now", "how is auth done in now"),
        ("what does ecommerce-api's cache hold?", "what does cache hold?"),
        ('is "ecommerce-api", or web-app, stateless?', 'is " ", or , stateless?'),
        ("ecommerce-api用什么数据库？", "用什么数据库？"),  # a Latin name run into Chinese text
        # Not standing alone: inside a URL, a path, a credential; another name; not joined.
        ("postgres://ecommerce-api:S3cr3tPassw0rd@db/orders which database?", None),
        ("see ecommerce-api/src/db.py", None),
        ("token=abc+ecommerce-api+Q9zW8xV7 database", None),
        ("ecommerce-api-v2 database", None),
        ("ecommerce api database", None),
        ("what do the docs say about deploys?", None),
        # Every folder named (one-word names count); nothing but stop words or one letter left.
        ("the docs, web-app, dashboard-app and ecommerce-api: which database?", None),
        ("what is the ecommerce-api?", None),
        ("ecommerce-api x", None),
        ("ecommerce-api", None),
    ],
)
def test_vector_queries_leave_a_named_folder_out_of_half_the_vector(question, rest):
    assert Q.vector_queries(question, APPS) == ((question, rest) if rest else (question,))


def test_vector_queries_need_two_folders_to_narrow():
    # A project of one folder (an auto project's root): naming it is naming every folder.
    assert Q.vector_queries("What database does hermes-agent use?", frozenset({"hermes-agent"})) == (
        "What database does hermes-agent use?",)
    assert Q.vector_queries("What database?", frozenset()) == ("What database?",)


_NAMES = ["ecommerce-api", "Ecommerce_API", "web-app", "docs", "dashboard-app's"]
_FILLER = st.sampled_from(["what", "database", "the", "auth", "x", "://", "/", "+", "用什么", "(", ")", "?", ",", "'", "s"])


@given(st.lists(st.one_of(st.sampled_from(_NAMES), _FILLER), max_size=12), st.sampled_from([" ", "\n", " \t"]))
def test_vector_queries_leave_out_every_named_joined_folder(parts, gap):
    # Parts written apart (names glued to other text are the examples above).
    text = gap.join(parts)
    made = Q.vector_queries(text, APPS)
    assert made[0] == text and len(made) in (1, 2)
    if len(made) == 2:
        rest = made[1]
        words = {w.lstrip("\"'(").rstrip("\"'),?").casefold().replace("_", "-").removesuffix("'s") for w in rest.split()}
        assert not words & {"ecommerce-api", "web-app", "dashboard-app"}, rest
        assert Counter("".join(rest.split())) <= Counter(text), "only taken away, never added"


@given(st.text(max_size=200))
def test_vector_queries_never_raise_and_keep_the_question_first(text):
    made = Q.vector_queries(text, APPS)
    assert made[0] == text and 1 <= len(made) <= 2


@pytest.mark.parametrize(("asked", "embedded"), [
    ("key sk-ab\u200bcd\nnext\tline", "key sk-abcd\nnext\tline"),  # invisible characters dropped, line breaks kept
    ("nai\u0308ve\x00bell\x07", "na\u00efve bell "),  # composed; other control characters read as spaces
    ("\ud800lone surrogate", "lone surrogate"),
    ("x" * (Q.MAX_QUERY_CHARS + 5), "x" * Q.MAX_QUERY_CHARS),
    # invisible characters do not count towards the window: the question is not cut away behind them
    ("a" * 600 + "\u200b" * 3000 + "b" * 1000, "a" * 600 + "b" * 1000),
])
def test_the_question_is_embedded_as_written(asked: str, embedded: str):
    assert Q.embedding_text(asked, lambda text: text) == embedded  # the local model's: nothing leaves the machine


def test_a_cjk_snippet_marks_a_run_of_trigrams_once_and_english_as_before():
    """Trigrams of one chunk that overlap are one mark (the chunk "数据库连接池大小" is not in the text as one run);
    a Latin word beside them is marked as ever. The chunk was looked for whole: nothing CJK was marked."""
    snip = N.make_snippet("我们把数据库连接池的大小调大了，用Redis缓存", Q.parse_query("数据库连接池大小 redis").units)
    assert snip == "我们把>>>数据库连接池<<<的大小调大了，用>>>Redis<<<缓存"


def test_a_question_s_other_forms_never_push_its_own_units_out():
    """Each Hangul or kana chunk's decomposed form took a unit of its own before the question's later words, so a
    long Korean question lost the identifier at its end (the second review's t_nfd_units.py). The other forms come
    after the question's own units, within the cap; a full-width word is looked for in both forms."""
    text = ("지난주 회의에서 결정한 배포 일정과 롤백 절차, 데이터베이스 마이그레이션 순서, 캐시 무효화 전략, "
            "모니터링 알림 기준, 그리고 장애 대응 담당자를 다시 정리해 주세요 update_session_cwd")
    parsed = Q.parse_query(text)
    own = [u for u in parsed.units if unicodedata.is_normalized("NFC", u.text)]
    assert Q.Unit("update_session_cwd", "phrase") in own and not parsed.truncated, parsed
    assert own == [u for u in parsed.units[: len(own)]], "a decomposed form before one of the question's own units"
    assert [u.text for u in Q.parse_query("ｒｅｄｉｓ 缓存").units][:3] == ["ｒｅｄｉｓ", "缓存", "redis"]
