"""Review 31b: result_keys' groupings of a branch family."""
from __future__ import annotations

import pytest
from conftest import World, result_sessions


def _history(world, sid, history):
    for role, text in history:
        world.say(sid, role, text)


def test_a_branch_of_a_branch_copies_the_first_conversations_turn_once(world: World):
    """P -> B1 -> B2 (a /branch of a /branch): the turn P said before both forks is in all three; one result."""
    alpha = world.repo("alpha")
    history = [("user", "should the ledger export use parquet or csv"), ("assistant", "parquet: columnar, typed, smaller")]
    world.session("P", alpha, style="cli", messages=history)
    world.db.end_session("P", "branched")
    world.session("B1", None, parent="P", model_config={"_branched_from": "P"}, messages=history)
    world.say("B1", "user", "and the retention of ledger exports?")
    world.db.end_session("B1", "branched")
    world.session("B2", None, parent="B1", model_config={"_branched_from": "B1"},
                  messages=history + [("user", "and the retention of ledger exports?")])
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
        world.db.end_session("P", "branched")
        world.session(branch, None, parent="P", model_config={"_branched_from": "P"}, messages=history)
        world.say(branch, "tool", log, tool_call_id="c1")
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])
    answer = world.search("cur", "zanzibar migration failed", mode="keyword", limit=5)
    print([(r["session_id"], r.get("snippet")) for r in answer["results"]])
    assert result_sessions(answer) == ["P"], answer


@pytest.mark.xfail(strict=True, reason="review 31b: a branch is keyed by its best hit only; a copy outscoring its own decision hides it")
def test_a_branchs_own_decision_is_found_when_its_copy_scores_higher(world: World):
    """A branch copies its parent's turns about the pricing cache and decides on its own in a longer reply: the
    copy is the branch's best hit (keyed to P), and the decision, a result of its own by result_keys, is lost."""
    alpha = world.repo("alpha")
    history = [("user", "pricing cache for the pricing service: redis or memcached for the pricing cache?"),
               ("assistant", "pricing cache options: redis or memcached; the pricing cache needs eviction")]
    world.session("P", alpha, style="cli", messages=history)
    for k in (8,):
        world.db.end_session("P", "branched")
        world.session(f"B{k}", None, parent="P", model_config={"_branched_from": "P"}, messages=history)
    world.say("B8", "assistant", "after the load test of both we went with memcached for the pricing cache, "
              + "the eviction behaviour under the nightly batch and the ops team's runbooks tipped it " * 3)
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])
    answer = world.search("cur", "pricing cache memcached", mode="keyword", limit=5)
    print([(r["session_id"], r.get("snippet")) for r in answer["results"]])
    assert "B8" in result_sessions(answer), answer


@pytest.mark.parametrize("branches", [3, pytest.param(14, marks=pytest.mark.xfail(
    strict=True, reason="review 31b: fts.session_candidates caps a branch family by its first session (12 rows)"))])
def test_every_branchs_own_decision_is_a_result(world: World, branches: int):
    """Each branch decided on its own (short, the query's words): each decision is a result of its own, however many
    branches the family has (the candidates cap the family, by its first session, at four sessions' worth)."""
    alpha = world.repo("alpha")
    history = [("user", "which queue for the invoice mailer?"), ("assistant", "candidates: sqs, rabbitmq, nats")]
    world.session("P", alpha, style="cli", messages=history)
    for k in range(branches):
        world.db.end_session("P", "branched")
        world.session(f"B{k}", None, parent="P", model_config={"_branched_from": "P"}, messages=history)
        world.say(f"B{k}", "assistant", f"invoice mailer queue decided: option{k}")
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])
    answer = world.search("cur", "invoice mailer queue decided", mode="keyword", limit=10)
    got = set(result_sessions(answer))
    while answer.get("next_cursor"):
        answer = world.search("cur", "invoice mailer queue decided", mode="keyword", limit=10, cursor=answer["next_cursor"])
        got |= set(result_sessions(answer))
    assert {f"B{k}" for k in range(branches)} <= got, ({f"B{k}" for k in range(branches)} - got, answer.get("next_cursor"), len(got))


def _nested_branches(n: int):
    import json
    import sqlite3

    c = sqlite3.connect(":memory:")
    c.execute("create table sessions(id text primary key, parent_session_id text, model_config text, session_key text,"
              " end_reason text, ended_at real, started_at real)")
    c.execute("create table messages(id integer primary key, session_id text, role text, content text, active int,"
              " timestamp real)")
    c.execute("create index ms on messages(session_id, active, timestamp)")
    c.execute("insert into sessions values('P', null, '{}', null, 'branched', 10, 0)")
    history = [("user" if i % 2 == 0 else "assistant", f"turn {i} " + "lorem ipsum " * 20) for i in range(50)]
    c.executemany("insert into messages(session_id, role, content, active, timestamp) values('P', ?, ?, 1, 0)", history)
    hits, prev = {"P": 1}, "P"
    for b in range(n):
        sid = f"B{b}"
        c.execute("insert into sessions values(?, ?, ?, null, 'branched', ?, ?)",
                  (sid, prev, json.dumps({"_branched_from": prev}), 10**6 + b, 11 + b))
        c.executemany("insert into messages(session_id, role, content, active, timestamp) values(?, ?, ?, 1, 0)",
                      [(sid, r, t) for r, t in history])
        hits[sid] = c.execute("select min(id) from messages where session_id = ?", (sid,)).fetchone()[0]
        prev = sid
    return c, hits


def test_a_chain_of_nested_branches_is_keyed_in_few_steps():
    """n branches each of the one before, each hit a copy of P's first turn: one result, each left session asked
    once (a level-by-level walk asked every left session once a level: 1.03M SQLite steps at 25, 7.2M at 100; now
    31k and 225k: what is left over linear is each hit's id looked up once a level it climbs)."""
    from project_history_recall import session_rows

    steps = {}
    for n in (25, 100):
        conn, hits = _nested_branches(n)
        steps[n] = 0

        def step(n: int = n) -> int:
            steps[n] += 1
            return 0

        conn.set_progress_handler(step, 100)
        assert set(session_rows.result_keys(conn, hits).values()) == {"P"}
    assert steps[100] < 5_000, steps  # in hundreds of steps
