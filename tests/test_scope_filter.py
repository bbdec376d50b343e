"""The keyword leg's message id filter (``lexical.ranges.near``, ``fts.Near``), on real state.db files.

Once a process has read every session's message id range (the warm-up does),
a selective term's matches in other projects are passed over before they are
looked up in ``messages``. The filter only skips work: every answer is the
one the plain join gives, however the sessions' messages interleave, when
messages arrive after the ranges were read, when a session moves into the
project, and when state.db is replaced by another file.
"""

from __future__ import annotations

import importlib
import shutil
from contextlib import closing

import pytest
from conftest import World, result_sessions


def plugin(name: str):
    return importlib.import_module(f"hermes_plugins.project_history_recall.{name}")


def read_ranges(world: World) -> None:
    """What the warm-up does: read every session's message id range in this process."""
    with closing(plugin("store").open_state_db(world.home)) as conn:
        plugin("lexical").ranges.read(conn, plugin("paths").state_db_key(world.home))


def spy_near(monkeypatch) -> list:
    """Record the ``near`` each candidate query of the keyword leg was given."""
    fts = plugin("fts")
    seen: list = []

    def spy(name: str) -> None:
        real = getattr(fts, name)

        def spying(*args, **kwargs):
            seen.append(kwargs.get("near"))
            return real(*args, **kwargs)

        monkeypatch.setattr(fts, name, spying)

    spy("session_candidates")  # words run into CJK text ("用heron缓存") too
    return seen


def answers(world: World, queries: list[str], sid: str = "cur") -> list[list[tuple[str, int]]]:
    out = []
    for query in queries:
        answer = world.search(sid, query, mode="keyword", limit=50)
        out.append([(r["session_id"], r["message_id"]) for r in answer["results"]])
    return out


@pytest.fixture
def woven(world: World):
    """Projects a and b whose sessions were written at the same time, message by message (two windows
    open), plus sessions written one after the other; 'pelican' in most messages of both, 'heron' rarer."""
    a, b = world.repo("a"), world.repo("b")
    for i in range(4):
        world.session(f"a{i}", a)
        world.session(f"b{i}", b)
    for turn in range(6):
        for i in range(4):
            world.say(f"a{i}", "user", f"pelican step {turn} in a{i}" + (" heron" if (turn + i) % 3 == 0 else ""))
            world.say(f"b{i}", "assistant", f"pelican note {turn} from b{i}" + (" heron" if turn == i else ""))
    for i in range(4, 8):
        world.session(f"a{i}", a, messages=[("user", f"pelican alone {i}"), ("assistant", "heron seen"),
                                             ("user", f"我们用heron缓存第{i}次")])
        world.session(f"b{i}", b, messages=[("user", f"pelican elsewhere {i}"), ("assistant", "heron too"),
                                             ("user", f"他们用heron缓存第{i}次")])
    world.session("cur", a, style="cli", messages=[("user", "hi")])
    world.paths = {"a": a, "b": b}
    return world


QUERIES = ["pelican", "heron", "pelican heron", "step heron", "\"pelican note\"", "alone OR elsewhere", "缓存 heron"]


def test_answers_are_the_same_with_the_filter_as_without(woven: World, monkeypatch):
    seen = spy_near(monkeypatch)
    plain = answers(woven, QUERIES)
    assert seen and all(n is None for n in seen), "no ranges read yet: no filter"
    assert {sid for got in plain for sid, _ in got} == {f"a{i}" for i in range(8)}
    read_ranges(woven)
    seen.clear()
    assert answers(woven, QUERIES) == plain
    assert seen and all(n is not None for n in seen), "every candidate query was filtered"
    assert "glued" in woven.search("cur", "heron", mode="keyword")["strategy"], "the words-run-into-CJK path was taken"


def test_the_filter_holds_every_message_of_the_scope_and_skips_other_projects(woven: World):
    """A superset of the scope's messages; the ids of sessions written apart from the project's are left out."""
    read_ranges(woven)
    store, paths, workspace = plugin("store"), plugin("paths"), plugin("workspace")
    with closing(store.open_state_db(woven.home)) as conn:
        attributor = workspace.attributor_for(woven.home, store.load_projects(woven.home).projects)
        scope = workspace.compute_scope(conn, attributor, "cur", db_key=paths.state_db_key(woven.home))
        near = plugin("lexical").ranges.near(conn, paths.state_db_key(woven.home), scope.session_ids)
        owners = dict(conn.execute("SELECT id, session_id FROM messages").fetchall())
    assert near is not None and near.top == max(owners)
    passed = {mid for mid in owners if near.mask[mid] == 1}
    assert {mid for mid, sid in owners.items() if sid in scope.session_ids} <= passed
    apart = {mid for mid, sid in owners.items() if sid in {"b4", "b5", "b6", "b7"}}
    assert apart and not passed & apart


def test_messages_written_after_the_ranges_were_read_are_found(woven: World, monkeypatch):
    read_ranges(woven)
    assert answers(woven, ["pelican"])  # builds the filter for this scope
    monkeypatch.setattr(plugin("lexical"), "NEAR_SLACK", 10**9)  # the filter is kept: new ids pass by its top
    seen = spy_near(monkeypatch)
    woven.say("a1", "assistant", "a kingfisher turned up")
    woven.say("b1", "user", "kingfisher in b")
    assert result_sessions(woven.search("cur", "kingfisher", mode="keyword")) == ["a1"]
    assert seen[-1] is not None and seen[-1].top < max(woven.db.get_messages("a1"), key=lambda m: m["id"])["id"]
    woven.session("a9", woven.paths["a"], messages=[("user", "kingfisher again")])
    assert sorted(result_sessions(woven.search("cur", "kingfisher", mode="keyword"))) == ["a1", "a9"]


def test_the_filter_is_built_again_once_state_db_grew_past_its_slack(woven: World, monkeypatch):
    monkeypatch.setattr(plugin("lexical"), "NEAR_SLACK", 1)
    read_ranges(woven)
    seen = spy_near(monkeypatch)
    answers(woven, ["heron"])
    first = seen[-1]
    woven.say("a2", "user", "heron number two")
    woven.say("a3", "user", "heron number three")
    got = answers(woven, ["heron"])[0]
    assert seen[-1].top == first.top + 2 and seen[-1].mask[first.top + 2] == 1
    assert {"a2", "a3"} <= {sid for sid, _ in got}


def test_a_session_moved_into_the_project_is_found(woven: World):
    read_ranges(woven)
    assert "b5" not in result_sessions(woven.search("cur", "elsewhere", mode="keyword"))
    target = woven.project("a-project", [woven.paths["a"]])
    assert woven.move("b5", target)["success"] is True
    assert woven.move("cur", target)["success"] is True
    assert result_sessions(woven.search("cur", "elsewhere", mode="keyword")) == ["b5"]


def test_another_state_db_at_the_same_path_is_not_filtered_by_the_old_ranges(woven: World):
    """A restored backup: the same path, other sessions, the same message ids in other places."""
    read_ranges(woven)
    assert answers(woven, ["pelican"])
    woven.close()
    backup = woven.tmp / "old-state"
    shutil.move(str(woven.home / "state.db"), str(backup))
    for suffix in ("-wal", "-shm"):
        (woven.home / f"state.db{suffix}").unlink(missing_ok=True)
    b, a = woven.paths["b"], woven.paths["a"]
    woven.session("y1", a, messages=[("user", "osprey over project a")])  # id 1, which a0 held before
    for i in range(40):  # then more messages than the old file had, all of another project
        woven.session(f"x{i}", b, messages=[("user", f"osprey {i}"), ("assistant", "noted")])
    woven.session("cur", a, style="cli", messages=[("user", "hi")])
    assert result_sessions(woven.search("cur", "osprey", mode="keyword")) == ["y1"]


def test_a_search_does_not_wait_while_another_thread_reads_the_ranges(woven: World, monkeypatch):
    """The warm-up reads the ranges under their lock (0.2 s at a million messages): a search meanwhile
    goes without the filter rather than waiting, and answers the same.

    Asked: the queries whose candidates the filter would narrow (words, and words run into CJK text). Not
    asked: a query whose plan reads the project's sessions newest first (a two-character CJK word, searched
    by substring): that scan needs the ranges themselves, so it waits for the read to end.
    """
    import threading

    read_ranges(woven)
    plans = {query: woven.search("cur", query, mode="keyword", limit=50)["strategy"].split("+") for query in QUERIES}
    asked = [q for q in QUERIES if not any(p == "like" or p.endswith("-newest") for p in plans[q])]
    assert {"words", "glued"} <= {p for q in asked for p in plans[q]}, plans
    plain = answers(woven, asked)
    seen = spy_near(monkeypatch)
    holding, done = threading.Event(), threading.Event()

    def slow_state_db() -> int:  # the read's statements wait until the searches are done
        holding.set()
        done.wait(60)  # reached only when a search waits for the lock: that search then gets a filter, and fails
        return 0  # go on

    def reader() -> None:  # the warm-up's read of the ranges, slow; lets go once the searches are done
        with closing(plugin("store").open_state_db(woven.home)) as conn:
            conn.set_progress_handler(slow_state_db, 1)
            plugin("lexical").ranges.read(conn, plugin("paths").state_db_key(woven.home))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        assert holding.wait(60)
        busy = answers(woven, asked)
    finally:
        done.set()
        thread.join()
    assert busy == plain
    assert seen and all(n is None for n in seen), "no search waited for the lock to get the filter"


def test_a_state_db_restored_in_place_is_not_filtered_by_the_old_ranges(world: World, monkeypatch):
    """`sqlite3 state.db ".restore backup.db"` keeps the path, the inode and the first session, and Hermes
    gives the backup's later ids out again, to other sessions: the ranges read before are dropped."""
    import sqlite3

    a, b = world.repo("a"), world.repo("b")
    world.session("a0", a, messages=[("user", "hello from a")])
    world.session("b0", b, messages=[("user", "b talk")])
    world.session("cur", a, style="cli", messages=[("user", "hi")])
    db, backup = world.home / "state.db", world.tmp / "backup.db"
    with closing(sqlite3.connect(db)) as live, closing(sqlite3.connect(backup)) as copy:
        live.backup(copy)
    for i in range(20):
        world.say("b0", "user", f"b message {i}")
    read_ranges(world)
    assert result_sessions(world.search("cur", "hello", mode="keyword")) == ["a0"]
    inode = db.stat().st_ino
    world.close()
    with closing(sqlite3.connect(backup)) as copy, closing(sqlite3.connect(db)) as live:
        copy.backup(live)
    assert db.stat().st_ino == inode
    world.session("a1", a, messages=[("user", f"osprey {i}") for i in range(20)])  # the ids b0 held
    world.session("a2", a, messages=[("user", "other")] * 3)
    seen = spy_near(monkeypatch)
    assert result_sessions(world.search("cur", "osprey", mode="keyword")) == ["a1"]
    assert seen == [None], "the old ranges are dropped, and the search does not read them again in full"
    read_ranges(world)  # the next warm-up
    assert result_sessions(world.search("cur", "osprey", mode="keyword")) == ["a1"] and seen[-1] is not None


def test_the_newest_session_deleted_drops_the_ranges_and_answers_stay_right(woven: World, monkeypatch):
    read_ranges(woven)
    assert answers(woven, ["pelican"])
    woven.session("late", woven.paths["b"], messages=[("user", "pelican late")])
    assert answers(woven, ["pelican"])  # the ranges now reach the late session's message
    woven.db.delete_session("late")
    woven.say("a3", "user", "pelican after the delete")
    seen = spy_near(monkeypatch)
    got = answers(woven, ["pelican after"])[0]
    assert got and got[0][0] == "a3" and seen[-1] is None
