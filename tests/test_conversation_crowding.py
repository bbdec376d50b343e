"""A conversation of many sessions (a long compression chain, a /branch family) is one result among the others: its
copies of its first turns never crowd the other conversations out of a search's candidates or its pages."""

from __future__ import annotations

import importlib
import json

import pytest
from conftest import World, result_sessions


def _chain(world: World, repo, links: int, question: str = "How do we stop the zeppelin reconnect storm in the gateway?",
           answer: str = "Use exponential backoff with jitter for zeppelin reconnects.") -> None:
    """A conversation ``a1`` of 21 turns compressed ``links - 1`` times (``a2`` … ``a<links>``), each continuation
    holding Hermes' compressor's copy of its first turns, which answer the zeppelin question (or ``question``)."""
    from test_browse import _compressed

    turns = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    for i in range(10):
        turns += [{"role": "user", "content": f"step {i} unrelated ledger detail " + "x " * 40},
                  {"role": "assistant", "content": f"answer {i} unrelated ledger detail " + "y " * 40}]
    world.session("a1", repo, style="cli")
    for t in turns:
        world.say("a1", t["role"], t["content"])
    compressed = _compressed(turns, "zeppelin: backoff with jitter")
    for k in range(2, links + 1):
        world.continuation(f"a{k - 1}", f"a{k}")
        world.db.replace_messages(f"a{k}", compressed)


QUEUE = [("user", "which queue for the invoice mailer?"), ("assistant", "candidates: sqs, rabbitmq, nats")]


def _family(world: World, history: list[tuple[str, str]], branches: int, decision) -> None:
    """Session P of repo alpha said ``history``; each of ``branches`` /branch sessions ``B<k>`` copies it and then
    decides ``decision(k)``; ``cur`` asks from alpha."""
    alpha = world.repo("alpha")
    world.session("P", alpha, style="cli", messages=history)
    for k in range(branches):
        world.branch("P", f"B{k}", messages=history)
        world.say(f"B{k}", "assistant", decision(k))
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])


def _indexed(world: World, server, asker: str) -> None:
    """The profile set to embed with ``server`` (a loopback OpenAI-compatible endpoint), consent given from ``asker``'s
    session, every project indexed."""
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    assert world.call("project_history_semantic_consent", {"decision": "allow"}, asker)["success"] is True
    out = importlib.import_module("hermes_plugins.project_history_recall.indexing").index_projects(home=world.home)
    assert out["success"], out


def _every_page(world: World, query: str, **args) -> set[str]:
    """The sessions of every page of ``cur``'s search for ``query``, 10 a page."""
    answer = world.search("cur", query, limit=10, **args)
    got = set(result_sessions(answer))
    while answer.get("next_cursor"):
        answer = world.search("cur", query, limit=10, cursor=answer["next_cursor"], **args)
        got |= set(result_sessions(answer))
    return got


@pytest.mark.parametrize("links", [10, 60, 320])
def test_a_long_chain_does_not_crowd_other_conversations_out(world: World, links: int):
    repo = world.repo("pay")
    _chain(world, repo, links)
    world.session("other1", repo, messages=[("user", "zeppelin reconnect storm: we also added a circuit breaker")])
    world.session("other2", repo, messages=[("assistant", "the zeppelin gateway backoff caps at 30s")])
    world.session("cur_z", repo, style="cli", messages=[("user", "hi")])
    answer = world.search("cur_z", "zeppelin reconnect backoff jitter", mode="keyword", limit=3)
    got = [r["session_id"] for r in answer["results"]]
    assert set(got) == {"a1", "other1", "other2"}, answer


@pytest.mark.parametrize("links", [10, 60])
def test_common_words_scan_is_not_filled_by_one_chain(world: World, monkeypatch, links: int):
    """The newest-first scan (words too common to pick candidates) stops once want_sessions conversations matched: a
    chain of 60 links read a few sessions a query (each query reads at most SCAN_BATCH ids), counted as sessions, stopped
    it after 51 of the chain's, and the older conversations (and the chain's first session) were never read."""
    import importlib

    lexical = importlib.import_module("hermes_plugins.project_history_recall.lexical")
    monkeypatch.setattr(lexical, "RANK_BUDGET", 1)  # every word is 'common': the newest-first scan picks
    monkeypatch.setattr(lexical, "SCAN_BATCH", 100)  # a few of the chain's sessions a query, not all 60 in one
    repo = world.repo("pay")
    world.session("other1", repo, messages=[("user", "zeppelin reconnect storm: we also added a circuit breaker")])
    world.session("other2", repo, messages=[("assistant", "the zeppelin gateway backoff caps at 30s")])
    _chain(world, repo, links)
    world.session("cur_z", repo, style="cli", messages=[("user", "hi")])
    answer = world.search("cur_z", "zeppelin reconnect backoff jitter", mode="keyword", limit=3)
    got = [r["session_id"] for r in answer["results"]]
    assert set(got) == {"a1", "other1", "other2"}, answer


@pytest.mark.parametrize("links,batch", [(10, 50), (60, 50), (320, 2_000)])
def test_a_long_chain_does_not_crowd_the_substring_read(world: World, monkeypatch, links: int, batch: int):
    """A two-character CJK word (no trigram: read by substring, newest sessions first) stops once want_sessions
    conversations matched: the chain's 60 links, read a few sessions a query and counted as sessions, stopped it
    after 51 of them, and the older conversations (and the chain's first session) were never read. Nor do a chain's
    copies fill the read's 600 rows: 320 links' did, and the read stopped there."""
    monkeypatch.setattr(importlib.import_module("hermes_plugins.project_history_recall.substring"), "LIKE_BATCH", batch)
    repo = world.repo("pay")
    world.session("other1", repo, messages=[("user", "网关的问题: we also added a circuit breaker")])
    world.session("other2", repo, messages=[("assistant", "重连问题: the gateway backoff caps at 30s")])
    _chain(world, repo, links, "网关重连风暴的问题怎么解决?", "这个问题用指数退避加抖动解决。")
    world.session("cur_z", repo, style="cli", messages=[("user", "hi")])
    answer = world.search("cur_z", "问题", mode="keyword", limit=3)
    assert set(result_sessions(answer)) == {"a1", "other1", "other2"}, answer


RECALL_CALL = [{"id": "c1", "type": "function", "function": {"name": "project_history_search", "arguments": "{}"}}]


@pytest.mark.parametrize("links", [10, 60])
def test_earlier_recalls_below_a_long_chain_are_weighed_down(world: World, monkeypatch, links: int):
    """An earlier question (a recall answered it: not history) ranked below a long chain's sessions is weighed down
    as far as the first want_sessions conversations reach: counted as sessions, the chain's 60 filled the reach, the
    question kept its score, and one answer of another conversation fell off the page."""
    lexical = importlib.import_module("hermes_plugins.project_history_recall.lexical")
    monkeypatch.setattr(lexical, "RANK_BUDGET", 1)  # the newest-first scan picks: every session of the chain
    repo = world.repo("pay")
    world.session("other1", repo, messages=[("user", "zeppelin notes: we also added a circuit breaker")])
    world.session("other2", repo, messages=[("assistant", "the zeppelin gateway caps at 30s")])
    world.session("asked", repo, messages=[("user", "zeppelin reconnect jitter?")])
    world.say("asked", "assistant", "", tool_calls=RECALL_CALL)
    _chain(world, repo, links)
    world.session("cur_z", repo, style="cli", messages=[("user", "hi")])
    answer = world.search("cur_z", "zeppelin reconnect backoff jitter", mode="keyword", limit=3)
    found = result_sessions(answer)
    assert found[0] == "a1" and set(found) == {"a1", "other1", "other2"}, answer


@pytest.mark.parametrize("links", [10, 60])
def test_a_long_chain_does_not_crowd_the_vector_leg(world: World, fake, links: int):
    server = fake(dims=64, words=True)
    repo = world.repo("pay")
    _chain(world, repo, links)
    world.session("other1", repo, messages=[("user", "zeppelin reconnect storm in the gateway: we also added a circuit breaker")])
    world.session("other2", repo, messages=[("assistant", "how do we stop the zeppelin gateway reconnect storm? backoff caps at 30s")])
    world.session("cur_z", repo, style="cli", messages=[("user", "hi")])
    _indexed(world, server, "cur_z")
    answer = world.search("cur_z", "how do we stop the zeppelin reconnect storm in the gateway", mode="semantic", limit=3)
    got = [(r["session_id"], r["score_source"]) for r in answer["results"]]
    assert {s for s, _ in got} == {"a1", "other1", "other2"}, answer
    importlib.import_module("hermes_plugins.project_history_recall.vector_index").reset_indexes()


@pytest.mark.parametrize("links", [60])
def test_a_long_chain_does_not_crowd_the_vector_legs_first_pass(world: World, fake, monkeypatch, links: int):
    """A scope large enough for the two-pass vector search (the thresholds lowered): the first pass keeps its best rows
    (55 here), widened until they hold the sessions a search wants (51 conversations); a chain's 60 links, counted as
    sessions, ended the widening with the other conversations' rows left out, and the chain was the one result."""
    vector_basis = importlib.import_module("hermes_plugins.project_history_recall.vector_basis")
    monkeypatch.setattr(vector_basis, "BASIS_FROM_ROWS", 300)
    monkeypatch.setattr(vector_basis, "TWO_PASS_FROM_ROWS", 300)
    monkeypatch.setattr(vector_basis, "KEEP_AT_LEAST", 400)
    server = fake(dims=64, words=True)
    repo = world.repo("pay")
    world.session("other1", repo, messages=[("user", "zeppelin reconnect storm in the gateway: we also added a circuit breaker")])
    world.session("other2", repo, messages=[("assistant", "how do we stop the zeppelin gateway reconnect storm? backoff caps at 30s")])
    _chain(world, repo, links)
    world.session("cur_z", repo, style="cli", messages=[("user", "hi")])
    _indexed(world, server, "cur_z")
    vector_scores = importlib.import_module("hermes_plugins.project_history_recall.vector_scores")
    passes = []
    two_pass = vector_scores.two_pass
    monkeypatch.setattr(vector_scores, "two_pass", lambda *a, **k: passes.append(1) or two_pass(*a, **k))
    answer = world.search("cur_z", "how do we stop the zeppelin reconnect storm in the gateway", mode="semantic", limit=3)
    assert passes, "the scope is scored in two passes"
    assert set(result_sessions(answer)) == {"a1", "other1", "other2"}, answer
    importlib.import_module("hermes_plugins.project_history_recall.vector_index").reset_indexes()


def test_branches_own_decisions_are_reachable_from_another_session(world: World):
    """Two branches of one conversation decided apart after the fork: each decision is a result of its own from
    another session (they were one result of the family), and the history they copied is one result."""
    alpha = world.repo("alpha")
    history = [("user", "we need a cache for the pricing service"), ("assistant", "options: redis or memcached")]
    world.session("P", alpha, style="cli", messages=history)
    for branch in ("B1", "B2"):
        world.branch("P", branch, messages=history)
    world.say("B1", "assistant", "decision: memcached for the pricing cache, p99 latency 4ms")
    world.say("B2", "assistant", "decision: redis cluster for the pricing cache, persistence needed")
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])
    found = world.search("cur", "pricing cache decision", mode="keyword", limit=5)
    assert {"B1", "B2"} <= set(result_sessions(found)), found
    assert set(result_sessions(world.search("cur", "options: redis or memcached", mode="keyword", limit=5))) == {"P"}


def test_a_branchs_compression_continues_the_branchs_conversation(world: World):
    """Hermes hands a session's ``model_config`` on to its compression continuation, so a branch's continuation
    carries ``_branched_from`` naming the session the branch left, not its parent: it continues the branch (a
    marker counts where it names the parent, as Hermes' own compression tells). The branch and its continuation are
    one result, beside the history it copied."""
    alpha = world.repo("alpha")
    history = [("user", "we need a cache for the pricing service"), ("assistant", "options: redis or memcached")]
    world.session("P", alpha, style="cli", messages=history)
    world.branch("P", "B", messages=history)
    world.say("B", "assistant", "pricing cache: memcached, decided")
    world.continuation("B", "B2", messages=[("assistant", "pricing cache on memcached: the rollout plan")])
    assert json.loads(world.session_row("B2")["model_config"]) == {"_branched_from": "P"}
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])
    found = result_sessions(world.search("cur", "pricing cache memcached", mode="keyword", limit=5))
    assert "P" in found and len(set(found) & {"B", "B2"}) == 1, found


def test_what_branches_copied_is_one_result_of_the_family(world: World):
    """A question only the history before the fork answers: the family is one result (its first session's), not one
    result a branch, each showing the same copied turn; a branch's own reply is a result of its own."""
    alpha = world.repo("alpha")
    history = [("user", "should the ledger export use parquet or csv"), ("assistant", "parquet: columnar, typed, smaller")]
    world.session("P", alpha, style="cli", messages=history)
    for branch in ("B1", "B2", "B3"):
        world.branch("P", branch, messages=history)
    world.say("B3", "assistant", "after all: ledger export as csv for the auditors' spreadsheet tools")
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])
    found = result_sessions(world.search("cur", "ledger export parquet columnar", mode="keyword", limit=5))
    assert found == ["P"], found
    found = result_sessions(world.search("cur", "ledger export csv auditors", mode="keyword", limit=5))
    assert "B3" in found, found


def test_a_branch_of_a_branch_copies_the_first_conversations_turn_once(world: World):
    """P -> B1 -> B2 (a /branch of a /branch): the turn P said before both forks is in all three; one result."""
    alpha = world.repo("alpha")
    history = [("user", "should the ledger export use parquet or csv"), ("assistant", "parquet: columnar, typed, smaller")]
    world.session("P", alpha, style="cli", messages=history)
    world.branch("P", "B1", messages=history)
    world.say("B1", "user", "and the retention of ledger exports?")
    world.branch("B1", "B2", messages=history + [("user", "and the retention of ledger exports?")])
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])
    found = result_sessions(world.search("cur", "ledger export parquet columnar", mode="keyword", limit=5))
    assert found == ["P"], found


def test_a_copied_tool_output_is_one_result(world: World):
    """A log the conversation printed before the fork, copied by each branch: one result, not one a branch."""
    alpha = world.repo("alpha")
    history = [("user", "run the migration"), ("assistant", "running it")]
    log = "ERROR zanzibar migration 0042 failed: relation ledger_exports already exists"
    world.session("P", alpha, style="cli", messages=history)
    world.say("P", "tool", log, tool_call_id="c1")
    for branch in ("B1", "B2"):
        world.branch("P", branch, messages=history)
        world.say(branch, "tool", log, tool_call_id="c1")
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])
    answer = world.search("cur", "zanzibar migration failed", mode="keyword", limit=5)
    assert result_sessions(answer) == ["P"], answer


def test_a_branchs_own_decision_is_found_when_its_copy_scores_higher(world: World):
    """A branch copies its parent's turns about the pricing cache and decides on its own in a longer reply: the
    copy is the branch's best hit (keyed to P); the decision, its best hit of its own, is a result too (it was lost)."""
    alpha = world.repo("alpha")
    history = [("user", "pricing cache for the pricing service: redis or memcached for the pricing cache?"),
               ("assistant", "pricing cache options: redis or memcached; the pricing cache needs eviction")]
    world.session("P", alpha, style="cli", messages=history)
    for k in (8,):
        world.branch("P", f"B{k}", messages=history)
    world.say("B8", "assistant", "after the load test of both we went with memcached for the pricing cache, "
              + "the eviction behaviour under the nightly batch and the ops team's runbooks tipped it " * 3)
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])
    answer = world.search("cur", "pricing cache memcached", mode="keyword", limit=5)
    assert "B8" in result_sessions(answer), answer


@pytest.mark.parametrize("args", [{}, {"since": "2022-01-01"}, {"role": "assistant"}])
def test_a_branch_whose_copy_stands_for_its_family_is_one_result(world: World, args: dict):
    """The parent's turns were said in 2020 and the branch copied them in 2023: with ``since`` 2022 the branch's copy
    stands for the family, and the branch is one result, by its own decision (it was shown twice: copy, then reply)."""
    alpha = world.repo("alpha")
    history = [("user", "pricing cache for the pricing service: redis or memcached?"),
               ("assistant", "pricing cache options: redis or memcached")]
    world.session("P", alpha, style="cli")
    for role, content in history:
        world.db.append_message("P", role, content, timestamp=1_600_000_000.0)
    world.branch("P", "B", messages=history)
    decision = world.say("B", "assistant", "after the load test we went with memcached for the pricing cache, "
                         + "the eviction behaviour under the nightly batch tipped it " * 3)
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])
    answer = world.search("cur", "pricing cache memcached", mode="keyword", limit=10, **args)
    sessions = result_sessions(answer)
    assert len(sessions) == len(set(sessions)) and "B" in sessions, answer
    if args.get("since"):
        assert [(r["session_id"], r["message_id"]) for r in answer["results"]] == [("B", decision)], answer


@pytest.mark.parametrize("branches", [3, 14])
def test_every_branchs_own_decision_is_a_result(world: World, branches: int):
    """Each branch decided on its own (short, the query's words): each decision is a result of its own, however many
    branches the family has (the candidates cap what the family copied at four sessions' worth, not a branch's own)."""
    _family(world, QUEUE, branches, lambda k: f"invoice mailer queue decided: option{k}")
    got = _every_page(world, "invoice mailer queue decided", mode="keyword")
    assert {f"B{k}" for k in range(branches)} <= got, ({f"B{k}" for k in range(branches)} - got, len(got))


def test_a_chain_of_nested_branches_is_keyed_in_few_steps(world: World):
    """n branches each of the one before, each hit a copy of P's first turn: one result, each session left asked once
    (a level-by-level walk asked every one of them once a level: 1.03M SQLite steps at 25, 7.2M at 100)."""
    from project_history_recall import conversations, store

    alpha = world.repo("alpha")
    history = [("user" if i % 2 == 0 else "assistant", f"turn {i} " + "lorem ipsum " * 20) for i in range(10)]
    world.session("P", alpha, style="cli", messages=history)
    steps, made, prev = {}, 0, "P"
    for n in (25, 100):
        for b in range(made, n):
            world.branch(prev, f"B{b}", messages=history)
            prev = f"B{b}"
        made = n
        conn = store.open_state_db(world.home)
        hits = {sid: conn.execute("SELECT min(id) FROM messages WHERE session_id = ?", (sid,)).fetchone()[0]
                for sid in ["P", *(f"B{b}" for b in range(n))]}
        count = [0]

        def step(count: list[int] = count) -> int:
            count[0] += 1
            return 0

        conn.set_progress_handler(step, 100)
        assert set(conversations.result_keys(conn, {mid: sid for sid, mid in hits.items()})[0].values()) == {"P"}
        conn.close()
        steps[n] = count[0]
    # Each session left asked once (here 154 and 1,629 hundred steps); once a level would be about 30 times as many.
    assert steps[100] < 5_000, steps



def test_every_branchs_own_decision_is_a_semantic_result(world: World, fake):
    """The vector leg's cap as the keyword candidates' (test_every_branchs_own_decision_is_a_result): a branch's own
    messages are its own conversation's, its copies the family's (the family was capped by its first session at four
    sessions' worth, and two of 14 branches' decisions fell out)."""
    server = fake(dims=64, words=True)
    _family(world, QUEUE, 14, lambda k: f"invoice mailer queue decided: option{k}")
    _indexed(world, server, "cur")
    got = _every_page(world, "invoice mailer queue decided", mode="semantic")
    importlib.import_module("hermes_plugins.project_history_recall.vector_index").reset_indexes()
    assert {f"B{k}" for k in range(14)} <= got, ({f"B{k}" for k in range(14)} - got, len(got))


def test_every_branchs_own_decision_is_a_substring_result(world: World):
    """test_every_branchs_own_decision_is_a_result for a two-character CJK word (the substring read): a branch's own
    rows are its own conversation's there too. Counted with the family (its first session's), 20 branches' copies
    and decisions filled the family's 40 rows and six branches' decisions were never candidates."""
    _family(world, [("user", "发票邮件用哪个队列?"), ("assistant", "候选: sqs, rabbitmq, nats 队列")], 20, lambda k: f"队列 决定: option{k}")
    got = _every_page(world, "队列", mode="keyword")
    assert {f"B{k}" for k in range(20)} <= got, ({f"B{k}" for k in range(20)} - got, len(got))


def test_the_vector_legs_first_pass_asks_the_scopes_conversations_only_when_its_rows_hold_too_few(world: World, fake,
                                                                                                  monkeypatch):
    """vector_scores.two_pass stops widening at ``wanted`` conversations or every one of the scope; the scope's were
    asked first, so every two-pass search walked every session of the scope up its parent links (240 here) even when
    its best rows held enough. The kept rows' sessions are asked best first, twice ``wanted`` at a time: here their
    400 rows hold about 200 sessions, each its own conversation, and the first 102 are enough (all were asked)."""
    import inspect

    vector_basis = importlib.import_module("hermes_plugins.project_history_recall.vector_basis")
    monkeypatch.setattr(vector_basis, "BASIS_FROM_ROWS", 300)
    monkeypatch.setattr(vector_basis, "TWO_PASS_FROM_ROWS", 300)
    monkeypatch.setattr(vector_basis, "KEEP_AT_LEAST", 400)
    server = fake(dims=64, words=True)
    repo = world.repo("pay")
    for i in range(240):
        world.session(f"s{i}", repo, messages=[("user", f"zeppelin gateway note {i} about reconnect storms"),
                                                ("assistant", f"reply {i}: backoff and jitter for the zeppelin gateway")])
    world.session("cur_z", repo, style="cli", messages=[("user", "hi")])
    _indexed(world, server, "cur_z")
    conversations = importlib.import_module("hermes_plugins.project_history_recall.conversations")
    asked: list[int] = []
    real = conversations.conversation_roots

    def roots(conn, ids, known=None):
        if any(f.function == "two_pass" for f in inspect.stack()):
            asked.append(len(list(ids)))
        return real(conn, ids, known)

    monkeypatch.setattr(conversations, "conversation_roots", roots)
    answer = world.search("cur_z", "zeppelin gateway reconnect storm", mode="semantic", limit=3)
    importlib.import_module("hermes_plugins.project_history_recall.vector_index").reset_indexes()
    assert len(result_sessions(answer)) == 3, answer
    wanted = importlib.import_module("hermes_plugins.project_history_recall.pages").MAX_REACH + 1
    assert asked and sum(asked) <= 2 * wanted, asked


def test_the_vector_legs_widened_head_asks_a_branchs_rows_once(world: World, fake, monkeypatch):
    """vector_scores.best_of_sessions widens its head until it holds enough conversations, asking each time which
    conversation each row stands for (``conversations.result_keys``, which reads the session a branch left whole): the
    rows asked before are not asked again (a session of 3,000 rows branched from was read at each of three widenings).
    Its 1,000 rows here widen the head once (612 -> 1,006 rows): asked again, the session would be asked twice."""
    import inspect
    import sqlite3

    server = fake(dims=64, words=True)
    alpha = world.repo("alpha")
    history = [("user", "pricing cache for the pricing service: redis or memcached?"),
               ("assistant", "pricing cache options: redis or memcached")]
    world.session("P", alpha, style="cli", messages=history)
    world.close()
    with sqlite3.connect(world.home / "state.db") as conn:
        base = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
        conn.executemany("INSERT INTO messages(session_id, role, content, timestamp) VALUES ('P', ?, ?, ?)",
                         [("user" if i % 2 == 0 else "assistant", f"ledger detail {i} " + "filler " * 30,
                           1_800_000_000 + base + i) for i in range(1000)])
    world.branch("P", "B", messages=history)
    world.say("B", "assistant", "decision: memcached for the pricing cache")
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])
    _indexed(world, server, "cur")
    conversations = importlib.import_module("hermes_plugins.project_history_recall.conversations")
    heads: list[str] = []
    real = conversations._copies_of

    def copies_of(conn, ids, left):
        if any(f.function == "_head" for f in inspect.stack()):
            heads.append(left)
        return real(conn, ids, left)

    monkeypatch.setattr(conversations, "_copies_of", copies_of)
    answer = world.search("cur", "pricing cache memcached", mode="hybrid")
    importlib.import_module("hermes_plugins.project_history_recall.vector_index").reset_indexes()
    assert set(result_sessions(answer)) == {"B", "P"}, answer
    assert heads == ["P"], heads


def test_a_keyword_search_reads_the_session_a_branch_left_once(world: World, monkeypatch):
    """Which conversation a branch's row stands for reads the session it left whole (``conversations._copies_of``): the
    keyword pick's answers are kept for the search's results, not asked again (read by the pick, then again by the
    search: twice the base's work; a session of 10,000 rows branched from cost 3,160 hundred steps, now 1,610)."""
    history = [("user", "pricing cache for the pricing service: redis or memcached?"),
               ("assistant", "pricing cache options: redis or memcached")]
    alpha = world.repo("alpha")
    world.session("P", alpha, style="cli", messages=history)
    world.branch("P", "B", messages=history)
    world.say("B", "assistant", "decision: memcached for the pricing cache")
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])
    conversations = importlib.import_module("hermes_plugins.project_history_recall.conversations")
    left: list[str] = []
    real = conversations._copies_of
    monkeypatch.setattr(conversations, "_copies_of", lambda conn, ids, sid: left.append(sid) or real(conn, ids, sid))
    answer = world.search("cur", "pricing cache memcached", mode="keyword")
    assert set(result_sessions(answer)) == {"B", "P"}, answer
    assert left == ["P"], left
