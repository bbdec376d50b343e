"""The private vector index (embeddings.db): its schema, skip-unchanged,
model separation, corrupt or foreign files, chunk merging."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from project_history_recall import embeddings as E
from project_history_recall import index_file, vector_index, vector_scores


class CountingProvider:
    """A deterministic bag-of-letters embedder that counts calls (the index's unit tests)."""

    def __init__(self, name: str = "count") -> None:
        self.model_id, self.dims, self.calls, self.texts = name, 26, 0, 0
        self.fingerprint = f"fp-{name}"

    def expect(self, dims):
        return dims == self.dims

    @staticmethod
    def outbound_text(text):
        return text

    def embed(self, texts):
        self.calls += 1
        self.texts += len(texts)
        out = np.zeros((len(texts), 26), dtype=np.float32)
        for i, t in enumerate(texts):
            for ch in t.lower():
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1
        return E.normalise(out)


def msgs(*pairs):
    return [vector_index.PendingMessage(i + 1, sid, text) for i, (sid, text) in enumerate(pairs)]


def test_add_search_and_skip_unchanged(tmp_path):
    provider = CountingProvider()
    index = vector_index.VectorIndex(tmp_path / "embeddings.db", provider)
    batch = msgs(("s1", "aaaa"), ("s1", "bbbb"), ("s2", "abab"))
    assert index.add(batch) == 3
    assert set(index.indexed()) == {1, 2, 3}
    hits = index.search(provider.embed(["aaa"]), {"s1", "s2"}, 2)
    assert [h.message_id for h in hits] == [1, 3]
    assert [h.message_id for h in index.search(provider.embed(["aaa"]), {"s2"}, 5)] == [3], "scope is applied at query time"
    assert len(index.indexed_array('["s1"]')) == 2
    index.close()
    again = vector_index.VectorIndex(tmp_path / "embeddings.db", provider)
    assert again.indexed() == {m.message_id: E.content_hash(m.text) for m in batch}


def test_models_never_mix(tmp_path):
    a, b = CountingProvider("a"), CountingProvider("b")
    vector_index.VectorIndex(tmp_path / "e.db", a).add(msgs(("s", "aaaa")))
    other = vector_index.VectorIndex(tmp_path / "e.db", b)
    assert other.indexed() == {} and other.search(b.embed(["aaaa"]), {"s"}, 5) == []


def test_long_messages_are_chunked_and_merged(tmp_path):
    provider = CountingProvider()
    index = vector_index.VectorIndex(tmp_path / "e.db", provider, chunk_size=16, chunk_overlap=2)
    long = "x " * 200 + "zzzz zzzz"
    index.add(msgs(("s", long)))
    rows = sqlite3.connect(tmp_path / "e.db").execute("SELECT count(*) FROM chunks").fetchone()[0]
    assert rows > 1
    [hit] = index.search(provider.embed(["zzzz"]), {"s"}, 5, per_session=5)
    assert hit.message_id == 1 and hit.score > 0.5, "the message scores as its best chunk (only the last has z)"


def test_deadline_bounds_the_work(tmp_path):
    provider = CountingProvider()
    index = vector_index.VectorIndex(tmp_path / "e.db", provider)
    assert index.add(msgs(*[("s", "abc")] * 100), deadline=0.0) == 0
    assert provider.calls == 0


def test_drop_forgets_messages(tmp_path):
    provider = CountingProvider()
    index = vector_index.VectorIndex(tmp_path / "e.db", provider)
    index.add(msgs(("s", "aaaa"), ("s", "bbbb")))
    index.search(provider.embed(["a"]), {"s"}, 5, per_session=5)
    index.drop([1])
    assert [h.message_id for h in index.search(provider.embed(["a"]), {"s"}, 5, per_session=5)] == [2]


@pytest.mark.parametrize("content", [b"garbage" * 500, None])
def test_corrupt_or_foreign_file_is_moved_aside_and_rebuilt(tmp_path, content):
    path = tmp_path / "embeddings.db"
    if content is None:  # a foreign SQLite database
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE unrelated (x)")
        conn.commit()
        conn.close()
    else:
        path.write_bytes(content)
    index = vector_index.VectorIndex(path, CountingProvider())
    assert "rebuilt" in index.note
    assert list(tmp_path.glob("embeddings.db.broken-*"))
    assert index.add(msgs(("s", "aaaa"))) == 1


@pytest.mark.parametrize("tree", ["chunks", "sqlite_autoindex_chunks_1", "chunks_by_model_message", "chunks_indexed",
                                  "chunks_by_model", "last page"])
def test_a_file_damaged_at_a_root_or_an_end_is_moved_aside_when_opened(tmp_path, tree):
    """Garbage over the root page of the table or of one of its indexes, or over the file's last page: the open
    reads the first and last entries of each (a few pages, whatever the file's size), finds it, and rebuilds."""
    path = tmp_path / "embeddings.db"
    index = vector_index.VectorIndex(path, CountingProvider())
    index.add([vector_index.PendingMessage(i + 1, f"s{i % 30}", "abcdefgh"[: 1 + i % 8] * 40) for i in range(3_000)])
    index.close()
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        page = (conn.execute("PRAGMA page_count").fetchone()[0] if tree == "last page" else
                conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (tree,)).fetchone()[0])
    with open(path, "r+b") as f:
        f.seek((page - 1) * size)
        f.write(bytes(range(256)) * (size // 256))
    reopened = vector_index.VectorIndex(path, CountingProvider())
    assert "rebuilt" in reopened.note and list(tmp_path.glob("embeddings.db.broken-*"))
    assert reopened.add(msgs(("s", "aaaa"))) == 1


def _damaged_in_the_middle(path: Path, tree: str) -> None:
    """``path`` (embeddings.db of 3,000 chunks) with garbage over a leaf page in the middle of b-tree ``tree``."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        leaves = [p for (p,) in conn.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno", (tree,))]
    assert len(leaves) >= 3, leaves
    with open(path, "r+b") as f:
        f.seek((leaves[len(leaves) // 2] - 1) * size)
        f.write(bytes(range(256)) * (size // 256))


@pytest.mark.parametrize("tree", ["chunks", "chunks_indexed"])
def test_a_file_damaged_deep_inside_is_moved_aside_when_a_read_meets_the_damage(tmp_path, tree):
    """Damage in the middle of a b-tree passes the open's check (its ends) and fails the first read that meets it:
    the whole file is then checked, found damaged and moved aside, and the next open builds a new one, where it
    looped as a temporary error before, every search failing alike."""
    path = tmp_path / "embeddings.db"
    index = vector_index.VectorIndex(path, CountingProvider())
    index.add([vector_index.PendingMessage(i + 1, f"s{i % 30}", "abcdefgh"[: 1 + i % 8] * 40) for i in range(3_000)])
    index.close()
    _damaged_in_the_middle(path, tree)
    index = vector_index.VectorIndex(path, CountingProvider())
    assert "rebuilt" not in index.note, "its ends read: the open does not see it"
    with pytest.raises(sqlite3.DatabaseError) as met:
        with closing(index_file.connect_read_only(path)) as conn:
            conn.execute("SELECT max(session_id || content_hash) FROM chunks INDEXED BY chunks_indexed" if tree != "chunks"
                         else "SELECT sum(length(vector)) FROM chunks").fetchone()
    problem = index.trouble(met.value)
    assert problem.code == "db_error", "that search answers unavailable at once; the whole file is checked beside"
    deadline = time.monotonic() + 20
    while not list(tmp_path.glob("embeddings.db.broken-*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert index.retired and list(tmp_path.glob("embeddings.db.broken-*"))
    fresh = vector_index.VectorIndex(path, CountingProvider())
    assert fresh.indexed() == {} and fresh.add(msgs(("s", "aaaa"))) == 1


def test_a_damaged_read_with_a_sound_index_is_temporary_and_checks_the_index_once(tmp_path, monkeypatch):
    """An error saying "damaged" while the index reads whole (state.db's, read beside it) is temporary, and the whole
    file is checked once, not at every search that meets the damaged state.db."""
    index = vector_index.VectorIndex(tmp_path / "embeddings.db", CountingProvider())
    index.add(msgs(("s", "aaaa"), ("t", "bbbb")))
    checks = []
    real = index_file.damaged_inside
    monkeypatch.setattr(index_file, "damaged_inside", lambda path: checks.append(1) or real(path))
    for _ in range(3):
        problem = index.trouble(sqlite3.DatabaseError("database disk image is malformed"))
        assert problem.code == "db_error" and not index.retired
    time.sleep(0.5)
    assert len(checks) == 1 and not index.retired and not list(tmp_path.glob("embeddings.db.broken-*"))


def test_a_new_file_has_the_schema_and_its_version(tmp_path):
    vector_index.VectorIndex(tmp_path / "e.db", CountingProvider()).close()
    conn = sqlite3.connect(tmp_path / "e.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == index_file.SCHEMA_VERSION
    assert conn.execute("PRAGMA application_id").fetchone()[0] == index_file.INDEX_APP_ID


def test_chunks_written_by_another_process_count_as_indexed(tmp_path):
    """A second writer (the index command beside a running gateway) is seen without re-embedding."""
    provider = CountingProvider()
    ours = vector_index.VectorIndex(tmp_path / "e.db", provider)
    ours.add(msgs(("s", "aaaa")))
    theirs = vector_index.VectorIndex(tmp_path / "e.db", CountingProvider())
    theirs.add([vector_index.PendingMessage(7, "s", "bbbb")])
    assert 7 in ours.indexed() and len(ours.indexed_array('["s"]')) == 2
    assert [h.message_id for h in ours.search(provider.embed(["bbbb"]), {"s"}, 1)] == [7]


@pytest.mark.parametrize("scope", [{"s1"}, {"s0", "s2"}, {"s0", "s1", "s2"}], ids=["copied", "most", "everything"])
def test_interleaved_adds_and_searches_match_a_fresh_index(tmp_path, scope):
    """Indexing while searching (the matrix and the scope cache grow in place) gives a fresh index's answers."""
    provider = CountingProvider()
    words = ["apple", "banana", "cherry", "damson", "elder", "fig", "grape", "hazel"]
    pending = [vector_index.PendingMessage(i + 1, f"s{i % 3}", f"{words[i % 8]} {words[(i * 5) % 8]} {i}") for i in range(3000)]
    live = vector_index.VectorIndex(tmp_path / "live.db", provider)
    for start in range(0, len(pending), 250):
        live.add(pending[start : start + 250])
        live.search(provider.embed(["apple"]), scope, 5)  # grows the cached scope rows
    fresh = vector_index.VectorIndex(tmp_path / "fresh.db", provider)
    fresh.add(pending)
    for query in ("apple fig", "cherry", "zzz hazel"):
        q = provider.embed([query])
        assert live.search(q, scope, 3, per_session=7) == fresh.search(q, scope, 3, per_session=7)


def test_one_session_with_many_similar_messages_does_not_crowd_out_the_others(tmp_path):
    """Bounds are per session: 450 near-identical messages in one session, 20 other sessions with one each."""
    provider = CountingProvider()
    index = vector_index.VectorIndex(tmp_path / "e.db", provider)
    loud = [vector_index.PendingMessage(i + 1, "loud", "websocket reconnect " * 3 + str(i)) for i in range(450)]
    quiet = [vector_index.PendingMessage(1000 + i, f"q{i:02d}", f"websocket reconnect then something else {i}") for i in range(20)]
    index.add(loud + quiet)
    scope = {"loud"} | {f"q{i:02d}" for i in range(20)}
    hits = index.search(provider.embed(["websocket reconnect"]), scope, 21)
    assert {h.session_id for h in hits} == scope, "every session is reached"
    three = index.search(provider.embed(["websocket reconnect"]), scope, 21, per_session=3)
    assert max(sum(1 for h in three if h.session_id == s) for s in scope) == 3


def test_changed_message_leaves_no_stale_vector(tmp_path):
    provider = CountingProvider()
    index = vector_index.VectorIndex(tmp_path / "e.db", provider)
    index.add([vector_index.PendingMessage(1, "s", "zzzz"), vector_index.PendingMessage(2, "s", "yyyy")])
    assert index.search(provider.embed(["zzzz"]), {"s"}, 1)[0].message_id == 1  # matrix loaded
    index.add([vector_index.PendingMessage(1, "s", "aaaa")])  # message 1 was edited
    hits = index.search(provider.embed(["zzzz"]), {"s"}, 1, per_session=5)
    assert [(h.message_id, round(h.score, 3)) for h in hits] == [(1, 0.0), (2, 0.0)], "the old 'zzzz' vector is gone"
    assert index.search(provider.embed(["aaaa"]), {"s"}, 1)[0].message_id == 1


def test_a_scope_scored_in_place_never_returns_other_sessions(tmp_path):
    """Most of the matrix in scope (scored in place, the rest masked): a wide search stays in scope."""
    provider = CountingProvider()
    index = vector_index.VectorIndex(tmp_path / "e.db", provider)
    pending = [vector_index.PendingMessage(i + 1, "big" if i < 95 else f"other{i}", f"text {i} " + "ab" * (i % 7)) for i in range(100)]
    index.add(pending)
    assert 95 / 100 > vector_scores.IN_PLACE_SHARE
    hits = index.search(provider.embed(["ab"]), {"big"}, 1, per_session=1000)
    assert len(hits) == 95 and {h.session_id for h in hits} == {"big"}
    assert [(h.message_id, h.session_id) for h in index.search(provider.embed(["ab"]), {"other97"}, 1000)] == [(98, "other97")]


def test_a_scope_scored_in_place_follows_new_chunks(tmp_path):
    """The cached mask of a scope scored in place grows with the matrix: new chunks
    of the scope are found, new chunks of other sessions stay out, edits and drops apply."""
    provider = CountingProvider()
    index = vector_index.VectorIndex(tmp_path / "e.db", provider)
    P = vector_index.PendingMessage
    index.add([P(i + 1, "big" if i < 8 else "other", f"text {i}") for i in range(10)])
    assert 8 / 10 > vector_scores.IN_PLACE_SHARE
    query = provider.embed(["ab ab"])
    assert len(index.search(query, {"big"}, 100, per_session=100)) == 8  # scored in place; its mask is cached
    index.add([P(11, "big", "ab ab"), P(12, "other", "ab ab"), P(13, "newcomer", "ab ab")])
    hits = index.search(query, {"big"}, 100, per_session=100)
    assert {h.message_id for h in hits} == set(range(1, 9)) | {11}
    assert hits[0].message_id == 11 and {h.session_id for h in hits} == {"big"}
    index.add([P(11, "big", "something else")])  # edited: its old vector leaves
    index.drop([1])
    hits = index.search(query, {"big"}, 100, per_session=100)
    assert {h.message_id for h in hits} == set(range(2, 9)) | {11} and hits[0].message_id != 11
    assert {h.message_id for h in index.search(query, {"big", "newcomer"}, 100, per_session=100)} == set(range(2, 9)) | {11, 13}


def test_a_gathered_scope_and_one_scored_in_place_find_the_same(tmp_path, monkeypatch):
    """A small scope is gathered block by block, a large one scored in place: the same hits either way, and never another session's."""
    provider = CountingProvider()
    index = vector_index.VectorIndex(tmp_path / "e.db", provider)
    P = vector_index.PendingMessage
    index.add([P(i + 1, "mine" if i % 3 == 0 else f"other{i}", f"text {i} " + "ab" * i) for i in range(60)])
    query = provider.embed(["ab"])
    monkeypatch.setattr(vector_scores, "BLOCK", 4)  # several blocks for a 20-row scope
    gathered = index.search(query, {"mine"}, 1000, per_session=1000)
    monkeypatch.setattr(vector_scores, "IN_PLACE_SHARE", 0.0)
    in_place = index.search(query, {"mine"}, 1000, per_session=1000)
    assert gathered == in_place and len(gathered) == 20 and {h.session_id for h in gathered} == {"mine"}


def test_processes_share_one_copy_of_the_vectors(tmp_path):
    """A second index on the same file maps what the first copied (nothing read from embeddings.db's
    vectors), and a row marked gone by one is gone for the other at once."""
    provider = CountingProvider()
    P = vector_index.PendingMessage
    first = vector_index.VectorIndex(tmp_path / "e.db", provider)
    first.add([P(i + 1, "s", f"text {i} ab") for i in range(10)])
    query = provider.embed(["ab"])
    assert len(first.search(query, {"s"}, 100, per_session=100)) == 10
    files = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("e.db."))
    assert [f.rsplit(".", 1)[1] for f in files if not f.endswith("-wal") and not f.endswith("-shm")] == ["head", "lock", "rows", "sessions", "vec"]
    second = vector_index.VectorIndex(tmp_path / "e.db", provider)
    before = (tmp_path / next(f for f in files if f.endswith(".vec"))).stat().st_mtime_ns
    assert len(second.search(query, {"s"}, 100, per_session=100)) == 10
    assert (tmp_path / next(f for f in files if f.endswith(".vec"))).stat().st_mtime_ns == before, "nothing copied again"
    first.drop([3])
    assert 3 not in {h.message_id for h in second.search(query, {"s"}, 100, per_session=100)}
    assert second.vectors_in_memory == 9


def test_chunk_ids_are_never_reused(tmp_path):
    """A running index loads chunks above the highest id it saw: a reused id would stay invisible."""
    provider = CountingProvider()
    index = vector_index.VectorIndex(tmp_path / "e.db", provider)
    P = vector_index.PendingMessage
    index.add([P(1, "s", "alpha"), P(2, "s", "beta"), P(3, "s", "gamma")])
    assert len(index.search(provider.embed(["a"]), {"s"}, 10, per_session=10)) == 3  # the matrix is loaded
    index.drop([3])  # the newest message was rewound
    index.add([P(4, "s", "delta")])
    assert {h.message_id for h in index.search(provider.embed(["d"]), {"s"}, 10, per_session=10)} == {1, 2, 4}
    index.add([P(4, "s", "delta edited")])  # the newest message edited: re-embedded
    hits = index.search(provider.embed(["delta edited"]), {"s"}, 10, per_session=10)
    assert hits[0].message_id == 4 and hits[0].score == pytest.approx(1.0)


def test_a_newer_schema_is_left_alone(tmp_path):
    path = tmp_path / "e.db"
    vector_index.VectorIndex(path, CountingProvider()).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {index_file.SCHEMA_VERSION + 1}")
    with pytest.raises(index_file.IndexNotNow, match="newer plugin"):
        vector_index.VectorIndex(path, CountingProvider())
    assert path.exists() and not list(tmp_path.glob("e.db.broken-*"))


def test_a_busy_file_is_not_mistaken_for_damage(tmp_path):
    """A new file another connection holds the write lock of (another process creating it): 'busy', left as it
    is, its schema created by a later open."""
    path = tmp_path / "e.db"
    with sqlite3.connect(path, timeout=0) as holder:
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(index_file.IndexNotNow, match="busy"):
            _open_with_short_timeout(path)
        holder.execute("ROLLBACK")
    assert not list(tmp_path.glob("e.db.broken-*"))
    index = vector_index.VectorIndex(path, CountingProvider())
    assert index.add(msgs(("s", "alpha"))) == 1 and index.indexed() == {1: E.content_hash("alpha")}


def test_an_up_to_date_file_opens_while_another_connection_writes(tmp_path):
    """Only a migration takes the write lock: a search in a new process is not held up by the index command."""
    path = tmp_path / "e.db"
    vector_index.VectorIndex(path, CountingProvider()).add([vector_index.PendingMessage(1, "s", "alpha")])
    with sqlite3.connect(path, timeout=0) as holder:
        holder.execute("BEGIN IMMEDIATE")
        assert _open_with_short_timeout(path).indexed() == {1: E.content_hash("alpha")}
        holder.execute("ROLLBACK")


def _schema_one_file(path: Path, rows: list) -> None:
    """An index as a build before the first release wrote it (schema 1: chunk ids reused, two indexes fewer), holding ``rows``."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")  # as every version of the plugin created it
    for statement in (index_file.SCHEMA[0].replace(" AUTOINCREMENT", ""), index_file.SCHEMA[1], index_file.SCHEMA[-1]):
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute(f"PRAGMA application_id = {index_file.INDEX_APP_ID}")
    conn.executemany(
        "INSERT INTO chunks (session_id, message_id, chunk_index, content_hash, model_fingerprint, vector, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    conn.commit()
    conn.close()


def _open_with_short_timeout(path):
    real_connect = sqlite3.connect

    def quick(*args, **kwargs):
        kwargs["timeout"] = 0.2
        return real_connect(*args, **kwargs)

    sqlite3.connect = quick
    try:
        return vector_index.VectorIndex(path, CountingProvider())
    finally:
        sqlite3.connect = real_connect


def test_an_older_schema_is_moved_aside_and_rebuilt(tmp_path):
    """A file of schema 1 (a build before the first release): moved aside as it is, a new one made, the note says
    why, and its messages count as not indexed (embedded again)."""
    path = tmp_path / "e.db"
    _schema_one_file(path, [("s", 1, 0, E.content_hash("alpha"), "fp-count", E.encode_vector(np.ones(26, np.float32)), 0.0)])
    index = vector_index.VectorIndex(path, CountingProvider())
    assert "before its first release, schema 1 where this one's is 2" in index.note and "rebuilt" in index.note, index.note
    (aside,) = tmp_path.glob("e.db.broken-*")
    assert aside.name in index.note
    with closing(sqlite3.connect(aside)) as old:
        assert old.execute("SELECT message_id FROM chunks").fetchall() == [(1,)], "kept as it was"
    assert index.indexed() == {} and index.add(msgs(("s", "alpha"))) == 1


def test_an_open_that_waited_while_another_process_rebuilt_the_file_leaves_the_new_one(tmp_path):
    """Two processes open a file of an older schema at once: the first moves it aside and builds a new one while
    the second waits for the old file's write lock. The second then finds the old schema on the file it opened,
    and must not move aside the new file now at the path: it is told to retry, and the new file stays."""
    import threading

    path = tmp_path / "e.db"
    _schema_one_file(path, [])
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the first process, about to find the old schema, holds the lock
    outcome: list = []

    def second() -> None:
        try:
            outcome.append(index_file.open_index(path))
        except index_file.IndexNotNow as exc:
            outcome.append(exc)

    waiting = threading.Thread(target=second)
    waiting.start()
    time.sleep(0.5)  # the second process reads the version, then waits for the write lock (5 s at most)
    index_file.move_aside(path, index_file.IndexBroken("schema 1"))  # what the first process's open does
    new = index_file.open_index(path)
    holder.execute("ROLLBACK")
    holder.close()
    waiting.join(10)
    assert isinstance(outcome[0], index_file.IndexNotNow), outcome
    assert index_file.identity(path) == new.identity, "the new file was not moved aside"
    assert len(list(tmp_path.glob("e.db.broken-*"))) == 1
    new.conn.close()


def short_busy_waits(monkeypatch) -> None:
    """The index files' connections wait 0.1 s, not 5 s, for another process's write to end."""
    real = index_file.connect

    def connect(path: Path) -> sqlite3.Connection:
        conn = real(path)
        conn.execute("PRAGMA busy_timeout = 100")
        return conn

    monkeypatch.setattr(index_file, "connect", connect)


def test_a_failed_re_embedding_keeps_the_old_vectors(tmp_path, monkeypatch):
    short_busy_waits(monkeypatch)
    provider = CountingProvider()
    index = vector_index.VectorIndex(tmp_path / "e.db", provider)
    index.add([vector_index.PendingMessage(1, "s", "alpha"), vector_index.PendingMessage(2, "s", "bravo")])
    assert {h.message_id for h in index.search(provider.embed(["b"]), {"s"}, 10, per_session=10)} == {1, 2}
    with sqlite3.connect(tmp_path / "e.db") as other:
        other.execute("BEGIN IMMEDIATE")  # another process is writing
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            index.add([vector_index.PendingMessage(2, "s", "bravo edited")])
        other.execute("ROLLBACK")
    assert {h.message_id for h in index.search(provider.embed(["b"]), {"s"}, 10, per_session=10)} == {1, 2}, "message 2 is still found"
    assert index.indexed()[2] == E.content_hash("bravo"), "and still known by its stored text"


def test_a_message_re_embedded_by_another_process_leaves_no_stale_rows(tmp_path):
    provider = CountingProvider()
    mine, theirs = (vector_index.VectorIndex(tmp_path / "e.db", provider) for _ in range(2))
    mine.add([vector_index.PendingMessage(1, "s", "zzzz"), vector_index.PendingMessage(2, "s", "yyyy")])
    assert mine.search(provider.embed(["zzzz"]), {"s"}, 1)[0].message_id == 1
    mine.catch_up()  # what is indexed is mapped in this process
    theirs.add([vector_index.PendingMessage(1, "s", "aaaa")])  # e.g. the index command after an edit
    hits = mine.search(provider.embed(["zzzz"]), {"s"}, 5, per_session=5)
    assert [(h.message_id, round(h.score, 3)) for h in hits] == [(1, 0.0), (2, 0.0)], "the old 'zzzz' vector is gone here too"
    assert mine.indexed()[1] == E.content_hash("aaaa")


def test_a_replaced_file_retires_the_old_index(tmp_path):
    """Once the path holds another file, the old index may still be read by a search in
    flight, but never writes: its writes would land in a file nobody reads, or share
    the new file's journal."""
    provider = CountingProvider()
    path = tmp_path / "e.db"
    old = vector_index.index_for(path, provider)
    try:
        old.add([vector_index.PendingMessage(1, "s", "alpha")])
        assert vector_index.index_for(path, provider) is old
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        new = vector_index.index_for(path, provider)
        assert new is not old and new.indexed() == {}
        with pytest.raises(index_file.IndexNotNow, match="replaced"):
            old.add([vector_index.PendingMessage(2, "s", "beta")])
        with pytest.raises(index_file.IndexNotNow, match="replaced"):
            old.drop([1])
        assert old.search(provider.embed(["alpha"]), {"s"}, 5)[0].message_id == 1  # reads stay harmless
        new.add([vector_index.PendingMessage(2, "s", "beta")])
        assert vector_index.index_for(path, provider) is new and new.indexed() == {2: E.content_hash("beta")}
    finally:
        vector_index.reset_indexes()


def test_a_file_replaced_while_it_is_opened_is_not_taken_for_the_new_one(tmp_path, monkeypatch):
    """Another process moves the file aside and rebuilds it while this open waits: the
    connection may be on the old file, so this open gives up (busy) instead of writing there."""
    path = tmp_path / "e.db"
    vector_index.VectorIndex(path, CountingProvider()).close()
    real = index_file.prepare

    def prepare_then_replaced(conn):
        conn = real(conn)
        path.rename(tmp_path / "e.db.broken-1")
        for suffix in ("-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        monkeypatch.setattr(index_file, "prepare", real)
        vector_index.VectorIndex(path, CountingProvider()).close()  # the other process's rebuilt file
        return conn

    monkeypatch.setattr(index_file, "prepare", prepare_then_replaced)
    with pytest.raises(index_file.IndexNotNow, match="replaced while it was being opened"):
        vector_index.VectorIndex(path, CountingProvider())
    index = vector_index.VectorIndex(path, CountingProvider())
    index.add([vector_index.PendingMessage(1, "s", "alpha")])
    assert index.same_file() and index.indexed() == {1: E.content_hash("alpha")}


def test_damaged_files_moved_aside_never_replace_each_other(tmp_path):
    """Two damaged files found in the same second are both kept for inspection."""
    path = tmp_path / "e.db"
    for damage in (b"not a database, first", b"not a database, second"):
        path.write_bytes(damage * 400)
        vector_index.VectorIndex(path, CountingProvider()).close()
    kept = sorted(p.read_bytes()[:21] for p in tmp_path.glob("e.db.broken-*"))
    assert kept == [b"not a database, first", b"not a database, secon"], kept


class WideProvider:
    """256 dimensions (1 KB a vector), a fixed pseudo-random vector per text: rows a quarter of a page."""

    model_id, dims, fingerprint = "wide", 256, "fp-wide"
    expect, outbound_text = CountingProvider.expect, staticmethod(CountingProvider.outbound_text)

    def embed(self, texts):
        out = np.stack([np.random.default_rng(abs(hash(t)) % 2**32).standard_normal(256).astype(np.float32) for t in texts])
        return E.normalise(out)


def mapped_kb(suffix: str) -> int:
    """Resident kB of this process's mappings of files whose names end with ``suffix`` (``/proc/self/smaps``)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and all(c in "0123456789abcdef-" for c in fields[0]):
            inside = len(fields) >= 6 and fields[-1].endswith(suffix)
        elif inside and fields and fields[0] == "Rss:":
            total += int(fields[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads which pages this process has mapped (Linux)")
def test_the_warm_up_of_one_project_reads_only_that_projects_vectors(tmp_path):
    """2,000 vectors of project a (2 MB of .vec), then 6,000 of project b: warming a's sessions maps a's pages
    into this process, not b's; warming with no project maps them all."""
    import gc

    provider = WideProvider()
    writer = vector_index.VectorIndex(tmp_path / "embeddings.db", provider)
    pending = [vector_index.PendingMessage(i + 1, f"a{i % 10}", f"project a note {i}") for i in range(2_000)]
    pending += [vector_index.PendingMessage(i + 2_001, f"b{i % 30}", f"project b note {i}") for i in range(6_000)]
    assert writer.add(pending) == 8_000
    writer.sync()
    writer.close()
    del writer
    gc.collect()
    assert mapped_kb(".vec") == 0, "nothing of the vector file is mapped before the warm-up"
    reader = vector_index.VectorIndex(tmp_path / "embeddings.db", provider)
    reader.warm({f"a{i}" for i in range(10)})
    project_a = mapped_kb(".vec")
    assert 1_900 <= project_a <= 1_953 + 256, project_a  # a's 2,000,000 bytes, and the kernel's read-around at its end
    reader.warm()
    assert mapped_kb(".vec") >= 7_700
    assert [h.session_id for h in reader.search(provider.embed(["project a note 7"]), {"a7"}, 1)] == ["a7"]
    reader.close()


def test_damage_met_while_copying_is_embedded_again_when_the_repair_was_refused(tmp_path, monkeypatch):
    """Another process stored a damaged vector; this process meets it while copying new chunks into the
    vector files, but its repair finds the file busy. The message must not stay counted as indexed: a later
    search embeds it again (in this process, which remembers what it could not delete)."""
    short_busy_waits(monkeypatch)
    p = CountingProvider()
    path = tmp_path / "e.db"
    index = vector_index.VectorIndex(path, p)
    index.add([vector_index.PendingMessage(1, "s", "alpha")])
    other = vector_index.VectorIndex(path, p)
    other.add([vector_index.PendingMessage(2, "s", "bravo")])
    other.add([vector_index.PendingMessage(3, "s", "charlie")])
    other.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE chunks SET vector = x'00010203' WHERE message_id = 2")
    lock = sqlite3.connect(path)
    lock.execute("BEGIN IMMEDIATE")  # another process writing
    try:
        try:
            index.catch_up()
        except (sqlite3.OperationalError, E.EmbeddingUnavailable):
            pass  # busy: this search's semantic side is unavailable for the moment
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    index.catch_up()
    assert 2 not in index.indexed(), "the damaged message counts as missing, so the next indexing embeds it"
    assert [h.message_id for h in index.search(p.embed(["charlie"]), {"s"}, 10, per_session=10)][:1] == [3]


def test_a_write_sqlite_refuses_after_the_file_system_allowed_it_is_tried_once(tmp_path, monkeypatch):
    """SQLite opens a file read-only when ``open(O_RDWR)`` is refused by something ``access(2)`` does not see
    (an LSM rule, some FUSE mounts). The first indexing finds out; later ones embed nothing, where they would
    otherwise send a remote provider the same texts at every search."""
    p = CountingProvider()
    path = tmp_path / "embeddings.db"
    vector_index.index_for(path, p).add([vector_index.PendingMessage(1, "s", "alpha")])
    vector_index.reset_indexes()
    monkeypatch.setattr(index_file, "connect", lambda path: sqlite3.connect(
        Path(path).as_uri() + "?mode=ro", uri=True, check_same_thread=False))
    sent = p.texts
    for _ in range(3):  # three searches, as the vector leg runs them
        try:
            index = vector_index.index_for(path, p)
            try:
                index.add([vector_index.PendingMessage(2, "s", "secret text")])
            except sqlite3.Error as exc:
                raise index.trouble(exc) from exc
        except E.EmbeddingUnavailable:
            pass
    assert p.texts - sent == 1, "embedded once, then the refusal is remembered"
    vector_index.reset_indexes()
