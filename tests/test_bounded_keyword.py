"""The keyword leg's costs grow with what a search reads, never with its square: the hostile review's cases.

Each cost is counted at n and at 4n (SQLite VM steps, bytes written or
scanned, index counts: ``tests/work.py``), never timed: linear code gives a
ratio of about 4, quadratic code about 16.
"""

from __future__ import annotations

import importlib
import random
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import World, result_sessions
from hypothesis import given, settings
from hypothesis import strategies as st
from work import bytes_read, linear, measure, plugin_dir


def plugin(name: str) -> Any:
    return importlib.import_module(f"hermes_plugins.project_history_recall.{name}")


def insert(world: World, rows: list[tuple[str, str, str]], *, one_tick: bool = False) -> None:
    """Append ``(session id, role, content)`` rows to state.db in one transaction (thousands at once), a second
    apart, or all at one time (``one_tick``: an imported session's rows may share one)."""
    world.close()
    conn = sqlite3.connect(world.home / "state.db")
    with conn:
        base = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
        conn.executemany("INSERT INTO messages(session_id, role, content, timestamp) VALUES (?, ?, ?, ?)",
                         [(sid, role, text, 1_800_000_000 + base + (0 if one_tick else i))
                          for i, (sid, role, text) in enumerate(rows)])
    conn.close()


# -- the scope's id filter ------------------------------------------------------------


class CountingMask(bytearray):
    """A filter's bytes that count what is written into them (by slice)."""

    written = 0

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, slice):
            CountingMask.written += len(value)
        super().__setitem__(key, value)


def test_the_id_filter_of_sessions_written_side_by_side_is_written_once(world: World, monkeypatch):
    """S sessions whose messages were written in turn (each spans almost every id): building the scope's id
    filter wrote each session's whole span, S x its width (S=100: 190,100 bytes, S=400: 3,040,400)."""
    lexical, store = plugin("lexical"), plugin("store")
    monkeypatch.setattr(lexical, "bytearray", CountingMask, raising=False)

    def build(count: int) -> tuple[int, bytes, dict[str, tuple[int, int]]]:
        repo = world.repo(f"turns{count}")
        sids = tuple(world.session(f"t{count}_{i}", repo) for i in range(count))
        insert(world, [(sids[j % count], "user", f"turn {j}") for j in range(20 * count)])
        conn = store.connect_ro(world.home / "state.db")
        try:
            lexical.ranges.read(conn, "k")
            CountingMask.written = 0
            near = lexical.ranges.near(conn, "k", sids)
            assert near is not None
            spans = {sid: lexical.ranges.newest_first(conn, "k", (sid,))[0][1:] for sid in sids}
        finally:
            conn.close()
        return CountingMask.written, near.mask, spans

    small, _, _ = build(100)
    large, mask, spans = build(400)
    assert small > 0, "the filter is written through its slices"
    assert linear(small, large), (small, large)
    expected = bytearray(len(mask))
    for low, high in spans.values():
        expected[low : high + 1] = b"\x01" * (high - low + 1)
    assert mask == bytes(expected), "the same ids pass as when every session's span is written"


# -- a long word that may sit inside CJK text -------------------------------------------


def test_a_long_hex_word_is_looked_for_inside_cjk_text_with_a_bounded_number_of_counts(world: World, monkeypatch):
    """A word is also looked for run into CJK text ("用redis缓存") when the trigram index may hold it there; each
    of its trigrams was counted in the index first, a query a character (400 characters: 381, 1,600: 1,212)."""
    fts, rng = plugin("fts"), random.Random(2)
    repo = world.repo("hex")
    world.session("h1", repo, messages=[("user", "用Redis缓存 一些中文")])
    insert(world, [("h1", "tool", "commit " + "".join(rng.choice("0123456789abcdef") for _ in range(40))) for _ in range(3000)])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    counts = {"n": 0}
    real = fts.count_matches

    def counting(*args: Any) -> int:
        counts["n"] += 1
        return int(real(*args))

    monkeypatch.setattr(fts, "count_matches", counting)

    def run(n: int) -> tuple[dict[str, Any], int]:
        word = "".join(rng.choice("0123456789abcdef") for _ in range(n))
        world.session(f"glued{n}", repo, messages=[("assistant", f"修复了提交{word}的问题")])
        counts["n"] = 0
        answer = world.search("cur", f"deploy {word}", mode="keyword")
        return answer, counts["n"]

    (small_answer, small), (large_answer, large) = run(400), run(1600)
    assert result_sessions(small_answer) == ["glued400"] and result_sessions(large_answer) == ["glued1600"]
    assert large <= small <= 40, (small, large)  # a few dozen counts, whatever the length of the word


# -- the newest-first scan of a common word ------------------------------------------------


@pytest.mark.parametrize("one_tick", [False, True])
def test_a_long_session_is_read_by_the_scan_only_as_far_as_its_budget(world: World, monkeypatch, one_tick: bool):
    """A common word is looked for newest first within ``SCAN_MESSAGES``; a session spread over more ids than a
    range read is read through its own messages, and was read whole whatever its size while counting as one
    range (n=16,000 tool rows: 5,659 hundred steps, 64,000: 22,604). Now it is read as far as the budget goes,
    and the answer says that older messages may hold more matches. Rows sharing one timestamp (an import) were
    read to the tick's start past the budget's edge (4,000 → 16,000 rows: 1,052 → 2,039 hundred steps)."""
    lexical, folders, store = plugin("lexical"), [plugin_dir()], plugin("store")
    monkeypatch.setattr(lexical, "RANK_BUDGET", 3)  # "pelican" is common: it picks no candidates
    monkeypatch.setattr(lexical, "SCAN_BATCH", 100)
    monkeypatch.setattr(lexical, "SCAN_MESSAGES", 2_000)
    other = world.repo("other")
    for i in range(5):
        world.session(f"o{i}", other, messages=[("user", "the pelican is common elsewhere")])

    def run(n: int) -> tuple[dict[str, Any], Any]:
        repo = world.repo(f"r{n}")
        world.session(f"big{n}", repo, messages=[("user", "a pelican at the start")])
        insert(world, [(f"big{n}", "tool", f"line {i} " + "z" * 300) for i in range(n)] + [(f"big{n}", "user", "a pelican at the end")],
               one_tick=one_tick)
        world.session(f"cur{n}", repo, style="cli", messages=[("user", "hi")])
        world.search(f"cur{n}", "pelican", mode="keyword")  # the session ranges are read once per process
        return measure(folders, monkeypatch, lambda: world.search(f"cur{n}", "pelican", mode="keyword"), store)

    (small_answer, small), (large_answer, large) = run(4_000), run(16_000)
    assert large.sql <= 1.5 * small.sql, (small.sql, large.sql)  # the budget, not the session
    for n, answer in ((4_000, small_answer), (16_000, large_answer)):
        assert result_sessions(answer) == [f"big{n}"] and "end" in answer["results"][0]["snippet"]
        assert "older ones may hold more matches" in answer["keyword_note"]


# -- a long CJK query --------------------------------------------------------------------


def scanned(call: Any) -> tuple[Any, int]:
    """``(call(), characters that str.count read in it)``: C work a line count does not see."""
    total = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal total
        if event == "c_call" and getattr(arg, "__name__", "") == "count" and isinstance(getattr(arg, "__self__", None), str):
            total += len(arg.__self__)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        return call(), total
    finally:
        sys.setprofile(previous)


def test_a_long_cjk_query_reads_each_candidate_once(world: World, monkeypatch):
    """A CJK query has a trigram per character, and each was counted in every candidate's text in turn: the
    query's length times the candidates' (400 characters over three 20 KB messages: 23.9 MB read; 1,600: 95.9 MB)."""
    query, rng = plugin("query"), random.Random(1)
    alphabet = [chr(c) for c in range(0x4E00 + 500, 0x4E00 + 700) if chr(c) not in "".join(query.CJK_STOP)]
    folders, store = [plugin_dir()], plugin("store")

    def run(n: int) -> tuple[dict[str, Any], int]:
        repo = world.repo(f"zh{n}")
        asked = "".join(rng.choice(alphabet) for _ in range(n))
        world.session(f"zh{n}", repo)
        for _ in range(3):  # candidates as long as the query, ten times over
            world.say(f"zh{n}", "assistant", "".join(rng.choice(alphabet) for _ in range(5 * n)) + asked
                      + "".join(rng.choice(alphabet) for _ in range(4 * n)))
        world.session(f"cur{n}", repo, style="cli", messages=[("user", "hi")])
        world.search(f"cur{n}", asked, mode="keyword")
        (answer, work), chars = scanned(lambda: measure(folders, monkeypatch, lambda: world.search(f"cur{n}", asked, mode="keyword"), store))
        return answer, work.total + chars

    (small_answer, small), (large_answer, large) = run(400), run(1600)
    assert result_sessions(small_answer) == ["zh400"] and result_sessions(large_answer) == ["zh1600"]
    assert linear(small, large), (small, large)


def test_candidates_that_are_long_logs_are_scored_by_their_ends(world: World, monkeypatch):
    """Scoring read every candidate whole: 200 sessions of three matching 50 KB build logs took seconds a search
    (each match of each log counted). A text over ``ranking.SAMPLED_OVER`` characters is counted in its ends: the
    characters scored a candidate stay the same from 64 KB logs to 256 KB ones, and the sessions found are the same."""
    ranking = plugin("ranking")
    scored: list[int] = []
    real = ranking.Scorer._counts
    monkeypatch.setattr(ranking.Scorer, "_counts", lambda self, text: scored.append(len(text)) or real(self, text))
    line = "src/module_{i}.c:42: warning: unused variable 'tmp' [-Wunused-variable]\n"
    costs = []
    for size in (64_000, 256_000):
        repo = world.repo(f"logs{size}")
        log = "".join(line.format(i=i) for i in range(size // len(line)))
        world.session(f"build{size}", repo, style="cli", messages=[("user", "build it"), ("tool", log), ("tool", log + "x")])
        world.session(f"plain{size}", repo, style="cli", messages=[("user", "that unused variable warning again")])
        world.session(f"cur{size}", repo, style="cli", messages=[("user", "hi")])
        scored.clear()
        answer = world.search(f"cur{size}", "unused variable", mode="keyword", limit=10)
        assert set(result_sessions(answer)) == {f"build{size}", f"plain{size}"}, answer
        costs.append(sum(scored))
    assert costs[1] <= costs[0] * 1.1 and costs[0] <= 3 * 2 * ranking.SAMPLED_OVER, costs


def test_a_long_text_is_scored_by_the_density_of_its_matches_and_never_missed():
    """A long log's sampled score is within 2 % of its whole count when its matches are spread through it; one whose
    only match lies in its middle is counted whole, so a candidate the index found is never scored as no match, and so
    is one whose ends miss a term its middle holds (the hostile review's t_scorer_unit.py)."""
    ranking = plugin("ranking")
    terms = (ranking.Term("word", ("unused",), 50), ranking.Term("word", ("variable",), 80))
    scorer = ranking.Scorer(terms, ranking.Stats(1000, 40.0), ranking.Stats(1000, 120.0))
    rng = random.Random(3)
    words = ["warning", "unused", "variable", "module", "tmp", "error", "line", "build"]
    log = " ".join(rng.choice(words) for _ in range(40_000))
    sampled = scorer.score(log)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ranking, "SAMPLED_OVER", 10**9)
        whole = scorer.score(log)
    assert abs(sampled - whole) <= 0.02 * whole, (sampled, whole)
    middle = "filler " * 10_000 + "one unused variable here " + "filler " * 10_000
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ranking, "SAMPLED_OVER", 10**9)
        exact = scorer.parts(middle)
    assert exact and scorer.parts(middle) == exact
    # One term at the ends, the question's other only in the middle (the rare word of one failing line): counted whole.
    split = "unused " + "filler " * 10_000 + "one variable here " + "filler " * 10_000 + "unused"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ranking, "SAMPLED_OVER", 10**9)
        exact = scorer.parts(split)
    assert set(exact) == {0, 1} and scorer.parts(split) == exact


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="aab中中文", max_size=60), st.lists(st.text(alphabet="aab中文", min_size=1, max_size=4), max_size=12))
def test_one_pass_counts_what_str_count_counts(text: str, needles: list[str]):
    """Occurrences that do not overlap, leftmost first, whichever way a length's needles are counted."""
    from project_history_recall import query

    expected = {needle: text.count(needle) for needle in needles}
    for one_pass in (0, query.ONE_PASS):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(query, "ONE_PASS", one_pass)
            assert query.count_grouped(text, query.by_length(needles)) == expected


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="一二三一二Aa", max_size=80), st.text(alphabet="一二三Aa", min_size=3, max_size=12))
def test_a_long_query_scores_as_one_counted_a_trigram_at_a_time(text: str, asked: str):
    """BM25 of the query's trigrams is the same, to the bit, when the text is read once for all of them."""
    from project_history_recall import query, ranking

    terms = tuple(ranking.Term("gram", (gram.lower(),), df) for df, gram in enumerate(query.cjk_trigrams(asked)))
    scorer = ranking.Scorer(terms, ranking.Stats(100, 20.0), ranking.Stats(100, 30.0))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(query, "ONE_PASS", 10**9)  # str.count per trigram, as before
        before = scorer.parts(text)
        patch.setattr(query, "ONE_PASS", 0)
        assert scorer.parts(text) == before


# -- the substring search ------------------------------------------------------------------


def test_a_session_wider_than_the_substring_budget_is_read_only_as_far_as_it(world: World, monkeypatch):
    """Tool output past what Hermes 0.21 indexes is looked for by substring in the project's newest sessions, up to
    ``TOOL_SCAN_MESSAGES`` message ids; one session of 2,000 or 8,000 tool rows was read whole, the budget checked
    only after it (803 -> 3,145 hundred steps), and the answer said nothing of what it left unread. Now the
    same steps (258 -> 260), and the note says older messages may hold more matches."""
    from schema30 import Schema30

    lexical, folders, store = plugin("lexical"), [plugin_dir()], plugin("store")
    monkeypatch.setattr(lexical, "TOOL_SCAN_MESSAGES", 500)
    world.close()
    db = Schema30(world.home / "state.db", "fresh")

    def run(n: int) -> tuple[dict[str, Any], Any]:
        repo = world.repo(f"r{n}")
        db.session(f"logs{n}", cwd=repo, git_repo_root=repo)
        with db.connect() as conn:
            conn.executemany("INSERT INTO messages (session_id, role, content, tool_name, timestamp) VALUES (?, 'tool', ?, 'terminal', ?)",
                             [(f"logs{n}", ("x" * 9_000 + " flamingo") if i == 0 else f"line {i}", 1_700_000_000 + i)
                              for i in range(n)])
        db.session(f"cur{n}", cwd=repo, git_repo_root=repo)
        world.search(f"cur{n}", "flamingo", role="tool", mode="keyword")
        return measure(folders, monkeypatch, lambda: world.search(f"cur{n}", "flamingo", role="tool", mode="keyword"), store)

    (small_answer, small), (large_answer, large) = run(2_000), run(8_000)
    assert large.sql <= 1.25 * small.sql + 5, (small.sql, large.sql)
    for answer in (small_answer, large_answer):
        assert answer["results"] == [] and "older ones may hold more matches" in answer["keyword_note"], answer


def test_one_session_with_hundreds_of_substring_matches_does_not_hide_an_older_one(world: World):
    """A two-character CJK word is looked for by substring: a newer session holding it in 700 messages filled the
    600 rows the search keeps, so the older session holding it once was never read, and nothing said so. Each
    session keeps its newest few matches: both are found."""
    repo = world.repo("loud")
    world.session("older", repo, messages=[("user", "这个问题很难")])
    world.session("newer", repo)
    insert(world, [("newer", "user", f"第{i}个问题") for i in range(700)])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    answer = world.search("cur", "问题", limit=10, mode="keyword")
    assert result_sessions(answer) == ["newer", "older"] and "keyword_note" not in answer, answer


def test_each_note_of_the_keyword_leg_is_said_once(world: World, monkeypatch):
    """During Hermes 0.21's index rebuild, a two-character CJK word asked of tool output is looked for by substring
    twice (the word, and tool output past the index), both cut by their budgets: the note said that older messages
    may hold more matches twice, once joined to the rebuild's note."""
    from schema30 import Schema30

    lexical = plugin("lexical")
    monkeypatch.setattr(plugin("substring"), "LIKE_BATCH", 1)  # a session a query
    monkeypatch.setattr(lexical, "TOOL_SCAN_MESSAGES", 5)
    monkeypatch.setattr(lexical, "SUBSTRING_MESSAGES", 5)
    world.close()
    db = Schema30(world.home / "state.db", "backfill")
    repo = world.repo("logs")
    for i in range(4):
        db.session(f"s{i}", cwd=repo, git_repo_root=repo)
        for j in range(10):
            db.say(f"s{i}", "tool", f"line {j} of run {i}", tool_name="terminal")
    db.session("cur", cwd=repo, git_repo_root=repo)
    db.start_rebuild()
    note = world.search("cur", "问题", role="tool", mode="keyword")["keyword_note"]
    assert note.count(lexical.LIKE_NOTE) == 1 and "rebuilding" in note, note


# -- candidates' late columns ----------------------------------------------------------------


def logs_session(world: World, sid: str, repo: Path, n: int, *, live: bool = False, bar: bool = False) -> None:
    """Session ``sid`` in ``repo``: ``n`` tool logs of 100 KB, each holding 'pelican' (with ``bar``: a progress bar
    of '━' instead of the filler); with ``live``, an asking session compacted in place (one archived row, the logs
    its live context)."""
    world.session(sid, repo, style="cli")
    world.close()
    conn = sqlite3.connect(world.home / "state.db")
    with conn:
        base = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
        rows = [("user", "archived: the pelican plan", 0, 1)] if live else []
        rows += [("tool", f"log {i}: pelican seen " + ("━" if bar else "z") * 100_000, 1, 0) for i in range(n)]
        conn.executemany("INSERT INTO messages (session_id, role, content, tool_name, active, compacted, timestamp) "
                         "VALUES (?, ?, ?, 'terminal', ?, ?, ?)",
                         [(sid, role, text, active, compacted, 1_800_000_000 + base + i)
                          for i, (role, text, active, compacted) in enumerate(rows)])
    conn.close()


@pytest.mark.parametrize("path", ["selective", "common", "live"])
def test_a_session_of_many_matching_logs_is_read_for_the_candidates_it_keeps(world: World, monkeypatch, path: str):
    """A session of n tool logs of 100 KB, every one holding the query's word (a rare word, or a common one read
    newest first), or the asking session compacted in place with those logs as its live context: a search read every
    log whole (2.5 MB at n=24, 9.8 MB at n=96) to keep a session's best three, as a row's visibility, tool name and
    time lie past its content, in its overflow pages. Now only the rows a session may keep are checked (0.42 MB,
    0.62 MB; the asking session's live rows are left out through Hermes' (session_id, active) index)."""
    if path == "common":
        monkeypatch.setattr(plugin("lexical"), "RANK_BUDGET", 20)  # 'pelican' picks no candidates: the scan reads it
    # CJK text in the profile: whether words may be run into it is asked once (fts.holds_cjk keeps a yes)
    world.session("cjk", world.repo("cjk"), messages=[("user", "用缓存")])
    costs = []
    for n in (24, 96):
        repo = world.repo(f"r{n}")
        for i in range(5):
            world.session(f"o{n}_{i}", repo, style="cli", messages=[("user", f"a pelican {i}")])
        asker = f"cur{n}"
        if path == "live":
            logs_session(world, asker, repo, n, live=True)
        else:
            logs_session(world, f"logs{n}", repo, n)
            world.session(asker, repo, style="cli", messages=[("user", "hi")])
        world.search(asker, "pelican", mode="keyword")  # the census and the session ranges, once per process
        start = bytes_read()
        answer = world.search(asker, "pelican", mode="keyword", limit=10)
        costs.append(bytes_read() - start)
        expected = {f"o{n}_{i}" for i in range(5)} | {asker if path == "live" else f"logs{n}"}
        assert set(result_sessions(answer)) == expected, answer
    small, large = costs
    assert large - small <= 0.1 * 72 * 100_000, costs  # 72 more logs of 100 KB: a page or so each, not the log


def test_a_pick_of_the_index_candidates_looks_up_the_matches_it_reaches(world: World, monkeypatch):
    """Two sessions whose n rows each hold the query's word (each row alone on a page of state.db; the sessions'
    message counts kept as Hermes keeps them, which tell the id filter is tight): the pick keeps
    ``CANDIDATE_ROWS`` of them (6 here), best first, but every match was joined to ``messages`` before the first was
    kept, a page read each (6.4 MB at n=750, 24.9 MB at 4n). Now the matches are looked up only as far as the pick
    reaches, the first ``fts.ROOTS_CHUNK`` of them (4.5 MB at n and at 4n); ranking them reads the index alone."""
    monkeypatch.setattr(plugin("lexical"), "CANDIDATE_ROWS", 6)
    world.session("cjk", world.repo("cjk"), messages=[("user", "用缓存")])  # the glued-word check, asked once
    costs = []
    for n in (750, 3_000):
        repo = world.repo(f"r{n}")
        for sid in (f"a{n}", f"b{n}", f"cur{n}"):
            world.session(sid, repo, style="cli")
        world.close()
        conn = sqlite3.connect(world.home / "state.db")
        with conn:  # the sessions' rows in turn; a row of 3 KB (its reasoning, not indexed) fills a page
            base = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
            conn.executemany("INSERT INTO messages (session_id, role, content, reasoning, timestamp) VALUES (?, ?, ?, ?, ?)",
                             [(f"{'ab'[i % 2]}{n}", "assistant", f"the pelican note {i}", "z" * 3_000,
                               1_800_000_000 + base + i) for i in range(2 * n)])
            conn.execute("UPDATE sessions SET message_count = (SELECT count(*) FROM messages m WHERE m.session_id = sessions.id)")
        conn.close()
        # The census and the project's sessions' id ranges (a two-character CJK word reads them; so does the warm-up)
        world.search(f"cur{n}", "缓存", mode="keyword")
        start = bytes_read()
        answer = world.search(f"cur{n}", "pelican", mode="keyword")
        costs.append(bytes_read() - start)
        assert set(result_sessions(answer)) == {f"a{n}", f"b{n}"}, answer
    small, large = costs
    assert large - small <= 0.1 * 4_500 * 4_096, costs  # 4,500 more matches: not a page each


def test_the_candidates_ranked_in_the_index_are_those_the_join_picks(world: World):
    """``fts.session_candidates`` has two ways to a pick: where the id filter lets through mostly the scope's rows, the
    index ranks every match and the pick looks them up as it goes; else a join leaves other projects' matches out
    first. Over two projects written in turn, branches and compressions copying turns, roles the filters leave out
    and rows that share a score, both keep the same rows in the same order, for every limit."""
    fts, store, workspace = plugin("fts"), plugin("store"), plugin("workspace")
    rng = random.Random(7)
    words = ["heron", "egret", "ibis", "stork"]
    alpha, beta = world.repo("alpha"), world.repo("beta")
    for i in range(12):
        world.session(f"a{i}", alpha, style="cli")
        world.session(f"b{i}", beta, style="cli")
    insert(world, [(f"{rng.choice('ab')}{rng.randrange(12)}", rng.choice(["user", "assistant", "tool", "system"]),
                    " ".join(rng.choices(words, k=rng.randint(1, 4)))) for _ in range(400)])
    world.branch("a3", "a3b", messages=[("user", "heron egret"), ("assistant", "ibis heron")])
    world.continuation("a5", "a5c", messages=[("user", "heron egret"), ("assistant", "stork")])
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])
    world.close()
    conn = store.connect_ro(world.home / "state.db")
    try:
        scope = workspace.scope_for(conn, world.home, "cur", None)[0]
        top = store.max_message_id(conn)
        loose = fts.Near(b"\x01" * (top + 1), top, 0)  # lets everything through, and is taken at its word
        for match in ("heron", "egret OR stork", '"heron egret"', "ibis OR heron OR egret OR stork"):
            for limit, per_session, newest in ((600, 3, False), (7, 1, False), (5, 2, True), (0, 3, False)):
                joined, ranked = ({}, {})
                args = dict(per_session=per_session, limit=limit, newest=newest)
                picked = [fts.session_candidates(conn, "words", match, scope, near=near, keyed=keyed, **args)
                          for near, keyed in ((None, joined), (loose, ranked))]
                assert picked[0] == picked[1], (match, limit, per_session, newest)
                assert {m: joined[m] for m, _ in picked[0]} == {m: ranked[m] for m, _ in picked[1]}
                assert limit == 0 or picked[0], match
    finally:
        conn.close()


@settings(max_examples=300)
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), max_size=60), st.integers(1, 4), st.integers(0, 30))
def test_candidates_checked_as_sessions_fill_are_those_every_row_checked_gives(rows, per_session: int, limit: int):
    """``fts._first_passing`` keeps what checking every row, then each session's best ``per_session``, then the best
    ``limit`` of those keeps; a batch of one row at a time or of many."""
    from project_history_recall import fts

    ordered = [(mid, f"s{session}") for mid, (session, _) in enumerate(rows)]
    passes = {mid for mid, (_, ok) in enumerate(rows) if ok}
    taken: dict[str, int] = {}
    expected = []
    for mid, sid in ordered:
        if mid in passes and taken.get(sid, 0) < per_session:
            taken[sid] = taken.get(sid, 0) + 1
            expected.append((mid, sid))
    for batch in (1, 3, 64):
        checked: list[int] = []
        real = (fts._passing, fts.CHECK_BATCH)
        fts._passing = lambda conn, scope, ids, checked=checked: checked.extend(ids) or {i for i in ids if i in passes}
        fts.CHECK_BATCH = batch
        try:
            assert fts._first_passing(None, None, ordered, per_session=per_session, limit=limit) == expected[:limit]
        finally:
            fts._passing, fts.CHECK_BATCH = real
        assert len(checked) == len(set(checked))  # each row checked once


def test_a_profile_without_cjk_asks_again_only_of_new_messages(world: World):
    """Whether words may be run into CJK text is asked of the trigram index by a vocabulary seek, which reads the list
    of the trigram sorted just before CJK: a progress bar's ``━━━`` in every tool log, the whole state.db's. A no was
    never kept, so every search of a profile without CJK read it again (3.5 MB at 24 logs, 14.3 MB at 96). Now a
    no is kept up to the newest message, and later searches read only newer messages for CJK; CJK written later is
    still found."""
    repo = world.repo("alpha")
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    costs = []
    for n in (24, 96):
        logs_session(world, f"bars{n}", repo, n, bar=True)
        world.search("cur", "pelican", mode="keyword")  # asks the index once
        world.say("cur", "user", "and the pelican again?")  # a new message: only it is read for CJK
        start = bytes_read()
        world.search("cur", "pelican", mode="keyword")
        costs.append(bytes_read() - start)
    # 72 more logs of 300 KB ('━' is 3 bytes): a few pages of each match, not their trigram's list (10.8 MB before)
    assert costs[1] - costs[0] <= 0.1 * 72 * 300_000, costs
    world.session("zh", repo, style="cli", messages=[("user", "部署用redis缓存会话")])
    assert "zh" in result_sessions(world.search("cur", "redis", mode="keyword")), "a word run into CJK written later"


def test_words_run_into_cjk_are_found_after_a_snapshot_restore(world: World):
    """A no kept up to message T, then Hermes' ``/snapshot restore`` puts back a copy whose newest id is below T; the
    chat goes on (no search between) past T. The ids up to T are handed out again to new messages, one of them CJK:
    reading only the messages above T for CJK missed it, and a word run into it was never found again."""
    from hermes_cli.backup import create_quick_snapshot, restore_quick_snapshot

    repo = world.repo("alpha")
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    world.session("old", repo, style="cli", messages=[("user", "the cache is redis")])
    world.close()
    snapshot = create_quick_snapshot(label="before", hermes_home=world.home)
    assert snapshot
    for i in range(4):
        world.say("cur", "user", f"plain message {i}")
    world.close()
    assert result_sessions(world.search("cur", "redis", mode="keyword")) == ["old"]  # no CJK: kept up to the newest id
    assert restore_quick_snapshot(snapshot, hermes_home=world.home)
    world.session("zh", repo, style="cli", messages=[("user", "部署用redis缓存会话")])
    for i in range(6):
        world.say("zh", "assistant", f"noted {i}")
    world.close()
    assert "zh" in result_sessions(world.search("cur", "redis", mode="keyword")), "a word run into CJK after a restore"


@pytest.mark.parametrize("failing", [1_250, 5_000])
def test_candidates_checked_near_the_limit_take_few_queries(failing: int):
    """A pick one row short of its limit (599 of 600 kept) with n rows after it that fail the late columns (a
    ``role: tool`` search past user rows, recall answers, rewound turns): each check planned only as many rows as the
    limit had room for, one, so the n rows took n queries (5,003 at n=5,000). Checks still double: a few queries."""
    from project_history_recall import fts

    ordered = [(i, f"s{i}") for i in range(599 + failing)]
    queries: list[int] = []
    real = fts._passing
    fts._passing = lambda conn, scope, ids: queries.append(len(ids)) or {i for i in ids if i < 599}
    try:
        assert len(fts._first_passing(None, None, ordered, per_session=3, limit=600)) == 599
    finally:
        fts._passing = real
    assert len(queries) <= 20 and sum(queries) == len(ordered), (len(queries), sum(queries))  # log2(n) or so


def _chain_with_a_long_context(world: World, past: int, live: int) -> None:
    """A CLI conversation compressed ``past`` times, each session of its past with five matching answers, asked from
    a continuation whose live context is ``live`` turns that match nothing."""
    repo = world.repo("chain")
    world.session("p0", repo, style="cli", messages=[("user", "start the kafka plan")])
    for i in range(1, past):
        world.continuation(f"p{i - 1}", f"p{i}", messages=[("user", "[CONTEXT COMPACTION] kafka so far")])
    world.continuation(f"p{past - 1}", "cur", messages=[("user", "[CONTEXT COMPACTION] kafka so far")])
    insert(world, [(f"p{i}", "assistant", f"kafka topic orders: partitions note {i}.{j}") for i in range(past)
                   for j in range(5)]
           + [("cur", ("user", "assistant")[j % 2], f"live turn {j} on something else entirely " * 3) for j in range(live)])


def test_the_live_context_is_compared_with_the_past_once_not_for_each_candidate(tmp_path, monkeypatch):
    """A past candidate is left out when a live turn of the asking session repeats it (``store.context_copies_sql``,
    the vector leg's hits too). Each candidate was compared with every live turn, so the check cost candidates x live
    turns: a chain of 25 past sessions with 250 live turns took 3,184 hundred steps, one of 100 with 1,000 took 46,151
    (14 times; now 514 and 1,904). The live turns are now read once a statement, each candidate looked up in them."""
    work = []
    for n in (1, 4):
        world = World(tmp_path / f"n{n}", monkeypatch)
        try:
            _chain_with_a_long_context(world, 25 * n, 250 * n)
            answer, cost = measure([plugin_dir()], monkeypatch,
                                   lambda w=world: w.search("cur", "kafka topic orders", mode="keyword"), plugin("store"))
        finally:
            world.close()
        assert [s[0] for s in result_sessions(answer)] == ["p"], answer  # one conversation, found in its past
        work.append(cost.sql)
    assert linear(*work), work


@pytest.mark.parametrize("sessions", [1, 20])
def test_rows_that_keep_failing_a_late_filter_are_walked_a_few_times(monkeypatch, sessions: int):
    """Every candidate fails a condition checked late (a ``since`` after them all, ``role: tool`` past user rows,
    archived copies): each check planned ``per_session`` rows of a session and walked every row after them, so a
    session's n failing rows cost n / 3 walks of n (one session of 8,000 messages: 6.1 s). A session's rows that
    failed now let as many more be checked: each row checked once, the rows walked a few times (the hostile
    review's t_since_quadratic.py: 0.1 s)."""
    from project_history_recall import fts

    work, queries = [], []
    monkeypatch.setattr(fts, "_passing", lambda conn, scope, ids: queries.append(len(ids)) or set())
    for n in (2_000, 8_000):
        ordered = [(i, f"s{i % sessions}") for i in range(n)]
        queries.clear()
        out, cost = measure([Path(fts.__file__).parent], monkeypatch,
                            lambda o=ordered: fts._first_passing(None, None, o, per_session=3, limit=600))
        assert out == [] and sum(queries) == n, (len(queries), sum(queries))  # each row checked once
        work.append(cost.lines)
    assert linear(*work), work


def test_copies_of_one_message_left_by_many_compactions_cost_a_seek_each(tmp_path, monkeypatch):
    """Hermes' in-place compaction before #99545 stores the head it carries forward once more each time, with its
    timestamp: a session compacted k times holds k + 1 rows of its first message, and a search shows the newest.
    Each row looked for a newer or live row alike among all of them, k x k rows (k = 25 -> 100: 151 -> 1,659
    hundred steps; the hostile review's t_inplace.py, 100 -> 400: 212 -> 2,647 thousand). A newer row is now sought
    from the row on, an older live one only for the newest: a seek a row."""
    work = []
    for k in (25, 100):
        world = World(tmp_path / f"k{k}", monkeypatch)
        try:
            alpha = world.repo("alpha")
            world.session("long", alpha, style="cli", messages=[("user", "plan the heron queue with retries")])
            for i in range(k):
                world.say("long", "assistant", f"round {i}: noted")
                live = world.db.get_messages_as_conversation("long")
                world.db.archive_and_compact("long", [live[0], {"role": "user", "content": f"[CONTEXT COMPACTION] {i}"},
                                                      *live[-1:]])
            world.session("cur", alpha, style="cli", messages=[("user", "hi")])
            answer, cost = measure([plugin_dir()], monkeypatch, lambda w=world: w.search(
                "cur", "plan the heron queue", mode="keyword"), plugin("store"))
        finally:
            world.close()
        assert [r["session_id"] for r in answer["results"]] == ["long"], answer
        work.append(cost.sql)
    assert linear(*work), work


def test_a_branch_familys_copies_are_told_from_its_own_rows_reading_the_session_left_a_few_times(tmp_path, monkeypatch):
    """A session of n matching turns branched 3 times, each branch holding a copy of them all: the candidates' pick
    walks every row (the family's cap is reached early), each asked whether it copies the session left
    (``conversations.result_keys``, which reads that session's rows). Asked 1,024 rows at a time, that session was read
    once per 1,024 rows (700 and 2,800 turns: 2,030 and 10,633 hundred steps); now once for each lookup of the pick
    (``fts._Ordered``: the first 1,024 matches, then four times as many as so far): two and three times (2,759 and
    10,961, the lookups included)."""
    work = []
    for n in (1, 4):
        world = World(tmp_path / f"n{n}", monkeypatch)
        try:
            alpha = world.repo("alpha")
            world.session("P", alpha, style="cli", messages=[("user", "start")])
            for b in range(3):
                world.branch("P", f"B{b}", messages=[("user", "start")])
            turns = [f"kestrel note {i} " + "filler " * 5 for i in range(700 * n)]
            insert(world, [(sid, "assistant", text) for sid in ("P", "B0", "B1", "B2") for text in turns])
            world.session("cur", alpha, style="cli", messages=[("user", "hi")])
            answer, cost = measure([plugin_dir()], monkeypatch,
                                   lambda w=world: w.search("cur", "kestrel", mode="keyword"), plugin("store"))
        finally:
            world.close()
        assert result_sessions(answer) == ["P"], answer
        work.append(cost.sql)
    assert linear(*work), work


def test_the_common_words_scan_through_a_long_chain_walks_the_chain_once(world: World, monkeypatch):
    """The newest-first scan counts conversations (a chain's continuations are one), asking each query's new sessions'
    first session (``conversations.conversation_roots``): the sessions a walk passed are kept, so the chain's older
    sessions, read by later queries, are not walked up again (walked once a query, 30 and 120 links took 259 and 1,695
    hundred steps; now 205 and 764)."""
    lexical = plugin("lexical")
    monkeypatch.setattr(lexical, "RANK_BUDGET", 1)  # every word is 'common': the newest-first scan picks
    monkeypatch.setattr(lexical, "SCAN_BATCH", 8)  # a few sessions a query
    work = _chain_search_work(world, monkeypatch, "osprey nesting plan", "osprey nesting")
    assert linear(*work), work


def _chain_search_work(world: World, monkeypatch, said: str, query: str) -> list[int]:
    """SQLite steps (hundreds) of searching ``query`` from beside a compression chain of 30 and of 120 links whose
    every session says ``said``: one result, the chain's first session."""
    folders, store = [plugin_dir()], plugin("store")
    work = []
    for n in (30, 120):
        repo = world.repo(f"chain{n}")
        world.session(f"c{n}_0", repo, style="cli", messages=[("user", said)])
        for i in range(1, n):
            world.continuation(f"c{n}_{i - 1}", f"c{n}_{i}", messages=[("user", said), ("assistant", "ok")])
        world.session(f"cur{n}", repo, style="cli", messages=[("user", "hi")])
        answer, cost = measure(folders, monkeypatch, lambda n=n: world.search(f"cur{n}", query, mode="keyword"), store)
        assert result_sessions(answer) == [f"c{n}_0"], answer
        work.append(cost.sql)
    return work


def test_the_substring_read_through_a_long_chain_walks_the_chain_once(world: World, monkeypatch):
    """The substring read (a two-character CJK word) counts conversations as the scan does, a batch of sessions at a
    time: the sessions a walk passed are kept, so the chain's older sessions, read by later batches, are not walked
    up again (walked once a batch, 30 and 120 links took 235 and 1,623 hundred steps; now 181 and 692)."""
    monkeypatch.setattr(plugin("substring"), "LIKE_BATCH", 8)  # a few sessions a batch
    work = _chain_search_work(world, monkeypatch, "鱼鹰的问题", "问题")
    assert linear(*work), work


def test_a_chain_of_nested_branches_is_searched_in_linear_work(tmp_path, monkeypatch):
    """n branches each of the one before, each holding a copy of P's six turns: the candidates' pick keys every row
    (``conversations.result_keys``), and each branch's copy of a turn climbed every fork above it on its own (n²/2 ids
    asked; 25 and 100 branches took 719 and 8,720 hundred steps, 22,121 and 208,946 lines): hits of one text found
    copied at a fork climb on as one."""
    history = [("user" if i % 2 == 0 else "assistant", f"turn {i} zebrafish lorem " + "ipsum " * 20) for i in range(6)]
    sql, lines = [], []
    for n in (25, 100):
        world = World(tmp_path / f"n{n}", monkeypatch)
        try:
            alpha = world.repo("alpha")
            world.session("P", alpha, style="cli", messages=history)
            prev = "P"
            for b in range(n):
                world.branch(prev, f"B{b}", messages=history)
                prev = f"B{b}"
            world.session("cur", alpha, style="cli", messages=[("user", "hi")])
            answer, cost = measure([plugin_dir()], monkeypatch,
                                   lambda w=world: w.search("cur", "zebrafish lorem", mode="keyword"), plugin("store"))
        finally:
            world.close()
        assert result_sessions(answer) == ["P"], answer
        sql.append(cost.sql)
        lines.append(cost.lines)
    assert linear(*sql) and linear(*lines), (sql, lines)


def test_a_substring_read_of_one_clock_tick_archived_by_a_compaction_is_linear(world: World, monkeypatch):
    """A session of n rows sharing one timestamp (an import), each holding a two-character CJK word, archived by a
    compaction that carried the last two forward: the substring read asked of each matching row whether it is the
    copy Hermes shows by passing every other row of the tick (n = 1,000 -> 4,000: 61,370 -> 965,256 hundred steps,
    1.7 s). Now the tick's rows are told apart once a statement (3,043 -> 11,939), the same answer."""
    folders, store, work = [plugin_dir()], plugin("store"), []
    for n in (1000, 4000):
        repo, sid = world.repo(f"tick{n}"), f"tick{n}"
        world.session(sid, repo)
        world.close()
        world.compacted_tick(sid, [f"用缓存 {i}" for i in range(n)], at=1_800_000_000.0)
        world.session(f"cur{n}", repo, style="cli", messages=[("user", "hi")])
        world.search(f"cur{n}", "缓存", mode="keyword")  # the census and the session ranges, once per process
        answer, cost = measure(folders, monkeypatch, lambda n=n: world.search(f"cur{n}", "缓存", mode="keyword"), store)
        assert result_sessions(answer) == [sid] and f"<<< {n - 1}" in answer["results"][0]["snippet"], answer
        work.append(cost.sql)
    assert linear(*work), work


def test_the_index_candidates_of_one_clock_tick_carried_whole_are_checked_in_linear_work(world: World, monkeypatch):
    """A session of n rows sharing one timestamp, each holding the query's words, compacted in place carrying every
    row forward (each archived, a live copy written after them all): the candidates picked from the index are checked
    a batch at a time (``fts._first_passing``), and each batch's check sorted the whole tick again to tell its copies
    apart; the batches grow with the candidates (n = 2,000 -> 8,000: 43,277 -> 284,294 hundred steps, 0.33 -> 2.14 s
    of CPU at 4,000 -> 16,000). The tick is now told apart once a search (``store.ticks_of``: 10,644 -> 42,508), the
    same answer: one result, a live copy."""
    store, work = plugin("store"), []
    for n in (2000, 8000):
        repo, sid = world.repo(f"whole{n}"), f"whole{n}"
        world.session(sid, repo)
        world.close()
        first_copy = world.compacted_tick(sid, [f"lighthouse note {i}" for i in range(n)], carried=n, at=1_800_000_000.0)
        world.session(f"cur{n}", repo, style="cli", messages=[("user", "hi")])
        world.search(f"cur{n}", "lighthouse note", mode="keyword")  # the census and the session ranges, once per process
        answer, cost = measure([], monkeypatch, lambda n=n: world.search(f"cur{n}", "lighthouse note", mode="keyword"), store)
        assert result_sessions(answer) == [sid] and answer["results"][0]["message_id"] >= first_copy, answer
        work.append(cost.sql)
    assert linear(*work), work
