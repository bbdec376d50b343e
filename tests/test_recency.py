"""The current decision first: ``recency.py`` as a pure function, then end to end through Hermes' dispatch.

The end-to-end cases write a project whose naming convention for methods
changes twice (``x_``, then ``p_``, then ``ud_``) between sessions about other
things, the way MemoryCode's conversations do (bench/recall.py, kind
``memorycode``), and ask for the convention *now*: the session that set it
last must come first, the earlier ones after it, and every hit shows its time.
"""

from __future__ import annotations

from conftest import World, phr, result_sessions

R = phr.recency
Hit, Scorer, Stats, Term = phr.ranking.Hit, phr.ranking.Scorer, phr.ranking.Stats, phr.ranking.Term


def scorer(*words: str, phrase: tuple[str, ...] = ()) -> object:
    terms = [Term("word", (w, w + "s"), 5) for w in words]
    if phrase:
        terms.append(Term("phrase", phrase, 5))
    return Scorer(tuple(terms), Stats(1000, 20.0), Stats(1, 1.0))


def test_asks_current():
    for query in ("what is our convention for method names now?", "which decorator do we use these days",
                  "Is redis still pinned?", "what's the current deploy command", "我们现在用什么缓存？", "目前的方案是什么"):
        assert R.asks_current(query), query
    for query in ("what did we decide about method names?", "when did we pin redis", "knowledge of the snow",
                  "nowhere to be found", "我们之前用什么缓存？",
                  "Do you still remember which fruits were mentioned for candied fruit?"):
        assert not R.asks_current(query), query


def test_subject_pairs_and_meta_words():
    s = scorer("convention", "function", "names")
    assert R.subject(s, "Always end function names with _d") == frozenset({1, 2, (1, 2)})
    # The same words apart: both terms, no pair, so it does not hold the subject above.
    assert R.subject(s, "end function argument names with _x") == frozenset({1, 2})
    # "convention" names a kind of decision: matched, but never part of the subject.
    assert R.subject(s, "our naming convention") == frozenset()
    # A quoted phrase or identifier ranks, but is no subject (a project's name is in most sessions).
    with_phrase = scorer("redis", phrase=("ecommerce", "api"))
    assert R.subject(with_phrase, "the ecommerce-api caches sessions in redis") == frozenset({0})


def test_a_word_saying_when_does_not_split_a_pair():
    """"the API now listens on port 9090" states what "the API listens on port 8080" states: "now" between two query
    words kept the newer decision from the older's subject, and the older one led (hostile review 29, t_now2.py)."""
    s = scorer("port", "api", "listens")
    assert R.subject(s, "Done: the API now listens on port 9090.") == R.subject(s, "the API listens on port 8080")


def test_words_asking_for_the_present_are_no_subject():
    """Issue 30: "the current status of the Stripe webhook integration" made "current status" part of the subject,
    so an older status summary ("Current status: ...") outranked the newer session on the integration itself."""
    s = scorer("current", "status", "stripe", "webhook")
    assert R.subject(s, "Current status: the Stripe webhook is live") == frozenset({2, 3, (2, 3)})


def test_a_lone_peer_stays_below_a_session_matching_a_phrase_it_lacks():
    """Issue 30 (mem-gallery): a session the keyword leg scored above the lone peer for the query's "AI-generated" alone
    was taken for one stating part of the peer's subject (phrases are no subject), and the older peer jumped over it."""
    s = scorer("negative", "attitude", "content", phrase=("ai", "generated"))
    texts = {1: "she shares AI-generated art every day", 2: "a negative attitude towards most content online"}
    hits = [Hit(1, "art", 9.0), Hit(2, "old", 8.0)]
    out, peers = R.current_first(_rank("art", "old"), hits, texts, {1: 200.0, 2: 100.0}, s)
    assert [h.session_id for h in out] == ["art", "old"] and peers == 0
    # Without the phrase, the session above states part of the peer's subject, and the peer leads.
    out, peers = R.current_first(_rank("art", "old"), hits, {**texts, 1: "content she shares every day"}, {1: 200.0, 2: 100.0}, s)
    assert [h.session_id for h in out] == ["old", "art"] and peers == 1
    # Weaker on keyword than the peer (placed above it by the vector leg), it is judged by its subject alone:
    # a phrase such as the project's name, said in most sessions, does not hold the peer below it.
    weaker = [Hit(1, "art", 7.0), Hit(2, "old", 8.0)]
    out, peers = R.current_first(_rank("art", "old"), weaker, texts, {1: 200.0, 2: 100.0}, s)
    assert [h.session_id for h in out] == ["old", "art"] and peers == 1


def _rank(*sessions: str) -> list[Hit]:
    return [Hit(i + 1, sid, 10.0 - i) for i, sid in enumerate(sessions)]


def test_current_first_puts_the_newest_peer_first_and_keeps_the_rest():
    s = scorer("method", "names")
    texts = {1: "start method names with x_", 2: "lunch plans", 3: "end method names with _p", 4: "method names: use ud_ now"}
    times = {1: 100.0, 2: 400.0, 3: 200.0, 4: 300.0}
    ranked = _rank("old", "lunch", "mid", "new")
    hits = [Hit(1, "old", 9.0), Hit(3, "mid", 8.0), Hit(4, "new", 7.0), Hit(2, "lunch", 0.5)]
    out, peers = R.current_first(ranked, hits, texts, times, s)
    assert [h.session_id for h in out] == ["new", "mid", "old", "lunch"] and peers == 3


def test_current_first_keeps_an_older_session_that_alone_states_the_subject():
    s = scorer("method", "names")
    texts = {1: "start method names with x_", 2: "add the retry decorator to all methods", 3: "names of the new hires"}
    times = {1: 100.0, 2: 300.0, 3: 400.0}
    ranked = _rank("old", "deco", "hires")
    hits = [Hit(1, "old", 9.0), Hit(2, "deco", 8.0), Hit(3, "hires", 7.0)]
    out, peers = R.current_first(ranked, hits, texts, times, s)
    assert [h.session_id for h in out] == ["old", "deco", "hires"] and peers == 0
    # Ranked lower, it leads when the session above states part of what it states ("methods", not "method names")...
    out, peers = R.current_first(_rank("deco", "old"), hits, texts, times, s)
    assert [h.session_id for h in out] == ["old", "deco"] and peers == 1
    # ... and not when a session above states something else of the query ("hires").
    out, peers = R.current_first(_rank("hires", "old"), hits, texts, times, scorer("method", "names", "hires"))
    assert [h.session_id for h in out] == ["hires", "old"] and peers == 0


def test_current_first_needs_a_strong_peer():
    """A later session that states the subject in passing, far weaker than the best, does not jump ahead."""
    s = scorer("method", "names")
    texts = {1: "start method names with x_", 2: "method names, as always"}
    ranked = _rank("old", "weak")
    hits = [Hit(1, "old", 10.0), Hit(2, "weak", 10.0 * R.PEER_STRENGTH * 0.9)]
    out, _ = R.current_first(ranked, hits, texts, {1: 1.0, 2: 2.0}, s)
    assert [h.session_id for h in out] == ["old", "weak"]


def test_current_first_without_keyword_subjects_changes_nothing():
    ranked = _rank("a", "b")
    assert R.current_first(ranked, [], {}, {}, scorer("x")) == (ranked, 0)


def test_last_words_show_a_sessions_newest_statement_of_its_subject():
    """Review 31: a value changed later in the same session ("raised to 120" 26 messages after "30") was answered by
    the first statement, and a read around it never reached the change. Asked how things stand now, each session
    shows its newest message by the same speaker that states the shown one's subject."""
    Row = phr.records.MessageRow
    s = scorer("request", "timeout")
    rows = {1: Row(1, "one", "assistant", "Set the request timeout to 30 seconds.", 100.0),
            2: Row(2, "one", "user", "is the request timeout too short?", 300.0),
            3: Row(3, "one", "assistant", "Raised the request timeout to 120 seconds now.", 200.0),
            4: Row(4, "one", "assistant", "the timeout of the request is fine", 400.0),
            5: Row(5, "two", "assistant", "request timeout 10 seconds", 50.0)}
    hits = [Hit(1, "one", 9.0), Hit(2, "one", 8.0), Hit(3, "one", 7.0), Hit(4, "one", 6.0), Hit(5, "two", 5.0)]
    out = R.last_words([Hit(1, "one", 9.0, "keyword"), Hit(5, "two", 5.0, "keyword")], hits, rows, s)
    # 2 is newer but the user's question; 4 is newer but its words apart state less (no "request timeout" pair)
    assert out == [Hit(3, "one", 9.0, "keyword"), Hit(5, "two", 5.0, "keyword")]
    # A message the keyword leg did not score (the vector leg's pick) stays, and so does an older one.
    assert R.last_words([Hit(9, "one", 9.0)], hits, rows, s) == [Hit(9, "one", 9.0)]
    assert R.last_words([Hit(3, "one", 9.0)], hits, rows, s) == [Hit(3, "one", 9.0)]
    assert R.last_words([Hit(1, "one", 9.0, "semantic")], hits, rows, s) == [Hit(1, "one", 9.0, "semantic")]


# -- end to end ----------------------------------------------------------------

CONVENTION = [
    ("s1", "From now on, always start method names with 'x_'. It marks our own code."),
    ("s2", "Let's use Jira as the project management tool from now on."),
    ("s3", "Update to the naming convention: method names now start with 'p_' instead."),
    ("s4", "Add the '@retry' decorator from pedantic to all methods, please."),
    ("s5", "One more change: method names start with 'ud_' going forward."),
    ("s6", "Remember to take a break every ninety minutes."),
]


def _convention_project(world: World) -> None:
    repo = world.repo("mentor")
    for sid, text in CONVENTION:
        world.session(sid, repo, messages=[("user", text), ("assistant", "Understood, I'll follow that from now on.")])
    world.session("cur", repo, style="cli", messages=[("user", "let's continue")])


def test_the_newest_convention_comes_first_with_its_time(world: World):
    _convention_project(world)
    answer = world.search("cur", "what is our convention for method names now?", mode="keyword", limit=5)
    order = result_sessions(answer)
    assert order[:3] == ["s5", "s3", "s1"], order
    times = [r["when"] for r in answer["results"][:3]]
    assert all(times) and times == sorted(times, reverse=True)
    assert "newest first" in answer["order_note"]
    # Asked about the past, relevance alone ranks: the session that states it most fully leads.
    past = world.search("cur", "which prefix did method names start with at first?", mode="keyword", limit=5)
    assert set(result_sessions(past)[:3]) == {"s1", "s3", "s5"} and "order_note" not in past


def test_an_older_decision_nobody_revisited_stays_first(world: World):
    _convention_project(world)
    order = result_sessions(world.search("cur", "which project management tool do we use now?", mode="keyword", limit=3))
    assert order[0] == "s2", order


def test_the_newest_session_on_a_subject_leads_over_an_older_status_summary(world: World):
    """Issue 30 (devmembench, the Stripe webhook): "what is the current status of X?" put an older session first
    because it said "Current status:", words that ask when, not what; the newer one on X itself must lead."""
    repo = world.repo("shop")
    world.session("s1", repo, messages=[("user", "Current status: the Stripe webhook integration is half done."),
                                        ("assistant", "Noted, I'll finish it next.")])
    for sid, text in (("s2", "Add a status page for the current sprint."), ("s4", "What's the current build status?")):
        world.session(sid, repo, messages=[("user", text), ("assistant", "Done.")])
    world.session("s5", repo, messages=[("user", "The Stripe webhook integration is finished and verifies signatures."),
                                        ("assistant", "Great, it's deployed.")])
    world.session("cur", repo, style="cli", messages=[("user", "let's continue")])
    answer = world.search("cur", "What is the current status of the Stripe webhook integration?", mode="keyword", limit=3)
    assert result_sessions(answer)[:2] == ["s5", "s1"], result_sessions(answer)


def test_asked_now_a_session_answers_with_its_last_word_and_the_verb_use_is_no_subject(world: World):
    """Review 31: a value changed later in one session showed the first value; and "which database does the orders
    service use now?" kept the old decision first because it said "use" and the change ("moved ... to SQLite") did
    not: "use" asks for the state of a choice, like "decide", and tells no two subjects apart."""
    repo = world.repo("svc")
    lint = [m for i in range(12) for m in (("user", f"next, lint warning {i}"), ("assistant", f"Fixed lint warning {i}."))]
    world.session("one", repo, messages=[("user", "set up the HTTP client"),
                                         ("assistant", "Set the request timeout to 30 seconds (REQUEST_TIMEOUT = 30)."),
                                         *lint, ("user", "the nightly export keeps failing"),
                                         ("assistant", "Raised the request timeout to 120 seconds; 30 was too short.")])
    world.session("pg", repo, messages=[("user", "Which database should we use for the orders service?"),
                                        ("assistant", "Decision: we use Postgres for the orders service database.")])
    world.session("mig", repo, messages=[("user", "We moved the orders service database to SQLite last week."),
                                         ("assistant", "Removed Postgres; the orders service database is SQLite now.")])
    for i in range(8):
        world.session(f"f{i}", repo, messages=[("user", f"fix the navbar issue {i}"), ("assistant", "Fixed the navbar.")])
    world.session("cur", repo, style="cli", messages=[("user", "let's continue")])
    answer = world.search("cur", "what is the request timeout now?", mode="keyword", limit=3)
    assert "120" in answer["results"][0]["snippet"], answer["results"][0]
    assert "30 seconds" in world.search("cur", "what was the request timeout at first?", mode="keyword")["results"][0]["snippet"]
    for query in ("which database does the orders service use now?", "what database does the orders service use now?"):
        assert result_sessions(world.search("cur", query, mode="keyword", limit=3))[:2] == ["mig", "pg"], query
