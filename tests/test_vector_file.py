"""The shared vector files beside embeddings.db, under every kind of writer and damage.

Real files, real processes: half-written blocks left by a writer that died,
files deleted or garbled under an open index, another embeddings.db at the
path, processes appending at once, a disk that refuses the write
(``RLIMIT_FSIZE``), and a process that died between deleting chunks and
marking them gone.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_index import CountingProvider, short_busy_waits

from project_history_recall import index_file, vector_file, vector_index, vector_view
from project_history_recall.embeddings import EmbeddingUnavailable

P = vector_index.PendingMessage


def source_key(path: Path) -> tuple[Any, ...] | None:
    """What the vector files beside ``path`` record as their source when they come from the embeddings.db there
    now: ``(device, inode, token)``, the token read on a read-only connection; ``None`` when there is no file."""
    found = index_file.identity(path)
    if found is None:
        return None
    with closing(index_file.connect_read_only(Path(path).absolute())) as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = 'file_token'").fetchone()
    return (*found, str(row[0]) if row else "")


def files(path: Path, kind: str) -> Path:
    (found,) = path.parent.glob(f"{path.name}.*.{kind}")
    return found


def hits(index: vector_index.VectorIndex, provider: CountingProvider, sessions: set[str], text: str = "ab") -> list[int]:
    return sorted(h.message_id for h in index.search(provider.embed([text]), sessions, 1000, per_session=1000))


@pytest.fixture
def built(tmp_path):
    provider = CountingProvider()
    path = tmp_path / "embeddings.db"
    index = vector_index.VectorIndex(path, provider)
    index.add([P(i + 1, "s" if i < 8 else "t", f"text {i} ab") for i in range(10)])
    assert hits(index, provider, {"s"}) == list(range(1, 9))
    return path, provider, index


def test_a_half_written_block_is_never_seen_and_is_cut_by_the_next_writer(built):
    path, provider, index = built
    head = vector_file.VectorFile(path, provider.fingerprint).head()
    # A writer died after writing data past the committed end, before its head.
    with open(files(path, "vec"), "ab") as f:
        f.write(np.full((3, 26), 7.0, np.float32).tobytes()[:-5])
    with open(files(path, "rows"), "ab") as f:
        f.write(np.array([[999, 999, 0]] * 3, "<i8").tobytes()[:-3])
    fresh = vector_index.VectorIndex(path, provider)
    assert hits(fresh, provider, {"s"}) == list(range(1, 9)), "only committed rows are read"
    fresh.add([P(11, "s", "new ab")])
    assert hits(fresh, provider, {"s"}) == [*range(1, 9), 11]
    after = vector_file.VectorFile(path, provider.fingerprint).head()
    assert after.rows == head.rows + 1
    assert files(path, "vec").stat().st_size == after.rows * 26 * 4, "the torn tail was cut, not kept"


@pytest.mark.parametrize("damage", ["deleted", "garbled head", "short vectors", "rows missing"])
def test_vector_files_lost_or_damaged_under_an_open_index_are_built_again(built, damage):
    path, provider, index = built
    if damage == "deleted":
        for kind in ("vec", "rows", "sessions", "head"):
            files(path, kind).unlink()
    elif damage == "garbled head":
        files(path, "head").write_bytes(b"\x00{not json")
    elif damage == "short vectors":
        with open(files(path, "vec"), "r+b") as f:
            f.truncate(100)
    else:
        files(path, "rows").unlink()
    for reader in (index, vector_index.VectorIndex(path, provider)):  # the open one, and a new process's
        assert hits(reader, provider, {"s"}) == list(range(1, 9))
    reader.add([P(12, "s", "more ab")])
    assert hits(index, provider, {"s"}) == [*range(1, 9), 12]


def test_another_embeddings_db_at_the_path_starts_the_files_over(built):
    path, provider, index = built
    path.rename(path.with_name("moved-aside.db"))
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    other = vector_index.VectorIndex(path, provider)  # a new, empty embeddings.db
    assert hits(other, provider, {"s"}) == [], "no vector of the old file is served for the new one"
    other.add([P(50, "s", "fresh ab")])
    assert hits(other, provider, {"s"}) == [50]


@pytest.mark.parametrize("recorded", ["the old file's token", "no token (written before tokens)"])
def test_a_new_embeddings_db_that_got_the_old_ones_inode_starts_the_files_over(built, recorded):
    """Deleted and made again, embeddings.db often gets the same inode: the vector files must not take the
    new file's chunks for the old one's (old vectors served, new ones never copied)."""
    path, provider, index = built
    head_path = files(path, "head")
    old_token = json.loads(head_path.read_text())["db"][2]
    index.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    index_file.open_index(path).conn.close()  # a new, empty embeddings.db
    st = path.stat()
    head = json.loads(head_path.read_text())
    head["db"] = [st.st_dev, st.st_ino, old_token] if recorded.startswith("the old") else [st.st_dev, st.st_ino]
    head_path.write_text(json.dumps(head))  # as if the new file had the old one's inode
    fresh = vector_index.VectorIndex(path, provider)
    assert hits(fresh, provider, {"s"}) == [], "no vector of the old file is served for the new one"
    fresh.add([P(50, "s", "fresh ab"), P(51, "s", "more ab")])
    assert hits(fresh, provider, {"s"}) == [50, 51]
    assert hits(vector_index.VectorIndex(path, provider), provider, {"s"}) == [50, 51], "another process agrees"


def test_a_process_that_died_before_marking_its_deletions_is_caught_up(built, monkeypatch):
    path, provider, index = built
    with sqlite3.connect(path) as conn:  # chunks deleted, rows never marked gone
        conn.execute("DELETE FROM chunks WHERE message_id IN (2, 3)")
    monkeypatch.setattr(vector_view, "RECONCILE_S", 0.0)
    fresh = vector_index.VectorIndex(path, provider)
    assert hits(fresh, provider, {"s"}) == [1, 4, 5, 6, 7, 8]
    assert hits(index, provider, {"s"}) == [1, 4, 5, 6, 7, 8], "the other process sees the marks at once"


def test_a_new_process_leaves_that_check_to_later_or_to_the_index_command(built):
    """The check counts every chunk (a tenth of a second at a million): not in a new process's first search,
    but _RECONCILE_S later or at once in the index command's sync."""
    path, provider, index = built
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM chunks WHERE message_id IN (2, 3)")
    fresh = vector_index.VectorIndex(path, provider)
    assert hits(fresh, provider, {"s"}) == [1, 2, 3, 4, 5, 6, 7, 8]
    fresh.sync()
    assert hits(fresh, provider, {"s"}) == [1, 4, 5, 6, 7, 8]
    assert hits(index, provider, {"s"}) == [1, 4, 5, 6, 7, 8]


CHILD = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    import conftest  # the plugin under its fixed name
    from test_index import CountingProvider
    from project_history_recall import vector_index
    from pathlib import Path
    index = vector_index.VectorIndex(Path({path!r}), CountingProvider())
    base = {base}
    for step in range(10):
        index.add([vector_index.PendingMessage(base + step * 5 + i, "s{base}", "text ab " * (i + 1)) for i in range(5)])
        index.search(CountingProvider().embed(["ab"]), {{"s{base}"}}, 3)
    """
)


def test_processes_indexing_and_searching_at_once_copy_each_chunk_once(tmp_path):
    path = tmp_path / "embeddings.db"
    vector_index.VectorIndex(path, CountingProvider()).close()
    tests = str(Path(__file__).parent)
    children = [subprocess.Popen([sys.executable, "-c", CHILD.format(tests=tests, path=str(path), base=base)])
                for base in (1000, 2000, 3000)]
    assert [child.wait(timeout=120) for child in children] == [0, 0, 0]
    provider = CountingProvider()
    index = vector_index.VectorIndex(path, provider)
    assert len(hits(index, provider, {"s1000", "s2000", "s3000"})) == 150
    view = vector_file.VectorFile(path, provider.fingerprint).view(source_key(path))
    live = view.rows[view.rows[:, 1] != -1]
    with sqlite3.connect(path) as conn:
        stored = sorted(r[0] for r in conn.execute("SELECT id FROM chunks"))
    assert sorted(live[:, 0].tolist()) == stored, "every chunk exactly once"


FULL_DISK = textwrap.dedent(
    """
    import resource, signal, sys, json
    sys.path.insert(0, {tests!r})
    import conftest
    from test_index import CountingProvider
    from project_history_recall import vector_index
    from project_history_recall.index_file import IndexNotNow
    from pathlib import Path
    provider = CountingProvider()
    index = vector_index.VectorIndex(Path({path!r}), provider)
    index.add([vector_index.PendingMessage(i + 1, "s", "text ab " * 50) for i in range(200)])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    size = Path({path!r}).stat().st_size
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 4096, size + 4096))  # embeddings.db fits, the copy does not
    try:
        index.search(provider.embed(["ab"]), {{"s"}}, 3)
        print(json.dumps({{"raised": None}}))
    except IndexNotNow as exc:
        print(json.dumps({{"raised": exc.code, "message": str(exc)}}))
    """
)


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE as Linux applies it")
def test_a_disk_that_refuses_the_copy_is_a_temporary_answer(tmp_path):
    import json

    out = subprocess.run([sys.executable, "-c", FULL_DISK.format(tests=str(Path(__file__).parent), path=str(tmp_path / "e.db"))],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    assert answer["raised"] == "index_error" and "retries on a later search" in answer["message"], answer
    provider = CountingProvider()
    index = vector_index.VectorIndex(tmp_path / "e.db", provider)  # room again: the next search copies and answers
    assert len(hits(index, provider, {"s"})) == 200


STARTS_OVER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    import conftest
    import numpy as np
    from test_index import CountingProvider
    from project_history_recall import vector_file, vector_index
    from pathlib import Path
    from test_vector_file import source_key
    provider = CountingProvider()
    index = vector_index.VectorIndex(Path({path!r}), provider)
    index.add([vector_index.PendingMessage(i + 1, "s", "text ab " * (i + 1)) for i in range(50)])
    index.search(provider.embed(["ab"]), {{"s"}}, 3)
    files = vector_file.VectorFile(Path({path!r}), provider.fingerprint)
    mapped = files.view(source_key(Path({path!r}))).vectors  # what this process reads while another one starts over
    assert len(mapped) == 50
    files.append((0, 0), 26, lambda upto: iter(()))  # another embeddings.db at the path: start over
    print(float(np.asarray(mapped).sum()) > 0)
    """
)


def test_starting_over_never_pulls_rows_from_under_a_reader(tmp_path):
    """Starting over writes new files: a process still reading the old rows is not crashed (SIGBUS)."""
    out = subprocess.run([sys.executable, "-c", STARTS_OVER.format(tests=str(Path(__file__).parent), path=str(tmp_path / "e.db"))],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert out.stdout.strip().splitlines()[-1] == "True"


class Endpoint:
    """A remote endpoint's model: the size of the vectors it answers, which may change behind the same name."""

    def __init__(self, width: int) -> None:
        self.width = width


class Learning(CountingProvider):
    """A remote provider as :class:`embeddings.OpenAIProvider` is: ``dims`` 0 until its first answer or until told
    the stored size (``expect``), then an answer of another size refused unless a second one (a probe) agrees."""

    def __init__(self, endpoint: Endpoint) -> None:
        super().__init__("learning")
        self.endpoint, self.dims = endpoint, 0

    def expect(self, dims: int) -> bool:
        self.dims = dims
        return True

    def embed(self, texts):
        width = self.endpoint.width
        if self.dims and width != self.dims:
            self.calls, self.texts = self.calls + 1, self.texts + 1  # the probe
            if self.endpoint.width != width:
                raise EmbeddingUnavailable(f"endpoint returned {width}-d vectors, expected {self.dims}")
        self.dims = width
        out = np.zeros((len(texts), width), dtype=np.float32)
        for i, t in enumerate(texts):
            for ch in t.lower():
                if "a" <= ch <= "z":
                    out[i, (ord(ch) - 97) % width] += 1
            out[i, -1] += 0.01
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def scoped(index: vector_index.VectorIndex, session: str) -> list[tuple[int, str]]:
    return [(h.message_id, h.session_id) for h in index.search(index.provider.embed(["zebra"]), {session}, 5)]


def test_rebuilt_files_never_label_one_session_with_anothers_name(tmp_path):
    """The endpoint's vectors change size: a new process drops the stored ones and starts the files over, and
    sessions get new codes. A scoped search finds only its sessions' messages, named right, though that process
    read the old files' names before it started them over (found by a hostile review)."""
    endpoint = Endpoint(26)
    index = vector_index.VectorIndex(tmp_path / "e.db", Learning(endpoint))
    index.add([P(1, "sess-AAAA", "alpha apple"), P(2, "sess-BBBB", "zebra zoo")])
    assert scoped(index, "sess-AAAA") == [(1, "sess-AAAA")]
    endpoint.width = 30  # a model swapped behind the name
    renewed = vector_index.VectorIndex(tmp_path / "e.db", Learning(endpoint))  # a new process
    assert scoped(renewed, "sess-AAAA") == []  # every stored vector of the old size dropped, to embed again
    assert renewed.indexed() == {} and "of the wrong size" in renewed.pop_news()
    renewed.add([P(2, "sess-BBBB", "zebra zoo"), P(1, "sess-AAAA", "alpha apple")])  # now in the other order
    for reader in (renewed, vector_index.VectorIndex(tmp_path / "e.db", Learning(endpoint))):
        assert scoped(reader, "sess-AAAA") == [(1, "sess-AAAA")]
        assert scoped(reader, "sess-BBBB") == [(2, "sess-BBBB")]


def test_a_process_of_a_fixed_size_never_drops_files_a_newer_one_started_over(tmp_path):
    """Was: a process whose model gives the old size, meeting files another process started over for a new size,
    started them over again and dropped every vector of the new size (the other embedded them all again, by
    turns). Now its semantic search is unavailable, saying why, and every vector stays."""
    path = tmp_path / "e.db"
    older = vector_index.VectorIndex(path, CountingProvider("learning"))  # 26-d, the size fixed
    older.add([P(1, "s", "alpha"), P(2, "s", "zebra")])
    assert scoped(older, "s")[0] == (2, "s")
    newer = vector_index.VectorIndex(path, Learning(Endpoint(30)))  # the same model, now answering 30-d
    assert scoped(newer, "s") == [] and "of the wrong size" in newer.pop_news()  # confirmed: started over
    newer.add([P(1, "s", "alpha"), P(2, "s", "zebra")])
    kept = newer.indexed()
    with pytest.raises(EmbeddingUnavailable, match="another process started the vector files over for 30-d"):
        older.search(older.provider.embed(["zebra"]), {"s"}, 5)
    assert newer.indexed() == kept and older.pop_news() == ""
    assert scoped(newer, "s")[0] == (2, "s")


def test_a_new_process_takes_the_size_the_files_were_started_over_at_not_that_of_old_chunks_left_behind(tmp_path, monkeypatch):
    """Was: a new process learnt the stored size from a vote of embeddings.db's first chunks. A newer process had
    started the files over for a new size but could not delete the old-size chunks (another process was writing),
    so the vote named the old size: the new process started the files over for it, dropping the new-size vectors,
    and its first reply (the probe agreeing) started them over again. Now it takes the size the files were started
    over at, which the newest chunk they copied confirms: nothing starts over, nothing is dropped."""
    short_busy_waits(monkeypatch)
    path, endpoint = tmp_path / "e.db", Endpoint(26)
    older = vector_index.VectorIndex(path, Learning(endpoint))
    older.add([P(1, "s", "alpha"), P(2, "s", "apple"), P(3, "s", "amber")])
    assert scoped(older, "s")  # the files hold 26-d vectors
    endpoint.width = 30  # a model swapped behind the name
    newer = vector_index.VectorIndex(path, Learning(endpoint))
    newer.add([P(4, "s", "zebra")])  # its first reply: 30-d
    with closing(sqlite3.connect(path)) as other:
        other.execute("BEGIN IMMEDIATE")  # another process writing: the 26-d chunks cannot be deleted
        assert scoped(newer, "s") == [(4, "s")]  # the files started over for 30-d vectors
        other.rollback()
    started = vector_file.VectorFile(path, newer.provider.fingerprint).head()
    assert started.dims == 30
    later = vector_index.VectorIndex(path, Learning(endpoint))  # a new process
    later.catch_up()  # as its warm-up does, before any reply
    assert vector_file.VectorFile(path, later.provider.fingerprint).head().epoch == started.epoch, "not started over"
    assert scoped(later, "s") == [(4, "s")] and 4 in later.indexed()
    assert vector_file.VectorFile(path, later.provider.fingerprint).head().epoch == started.epoch


@pytest.mark.parametrize(("seen", "head", "since"), [
    ("e1", vector_file.Head(dims=30, db=(1, 1), epoch="e2"), True),  # started over for another size since
    ("e1", vector_file.Head(dims=26, db=(1, 1), epoch="e2"), False),  # for this size: nothing to decide
    ("e2", vector_file.Head(dims=30, db=(1, 1), epoch="e2"), False),  # the files it mapped: its own size is newer
    ("", vector_file.Head(dims=30, db=(1, 1), epoch="e2"), False),  # it mapped none: its size is as new as theirs
    ("e1", vector_file.Head(dims=30, db=(2, 2), epoch="e2"), False),  # another embeddings.db's files
    ("e1", vector_file.Head(), False),  # no files, or a head that does not read
])
def test_files_restarted_since_a_process_mapped_them(seen, head, since):
    """The one rule a refresh (against the epoch it mapped) and a writer under the lock share."""
    assert head.restarted_since(seen, (1, 1), 26) is since
    assert vector_file.Head().restarted_since("e1", None, 26) is False


def test_files_started_over_for_another_size_since_the_writer_looked_are_left_alone(built):
    """A process that read the head, then found under the lock that another one started the files over for another
    size meanwhile, leaves them as they are (the refresh decides again) instead of starting them over for its own."""
    path, provider, index = built
    files_ = vector_file.VectorFile(path, provider.fingerprint)
    seen = files_.head()
    newer = files_.append(seen.db, 30, lambda upto: iter(()))  # another process, a new size
    assert newer.epoch != seen.epoch
    assert files_.append(seen.db, 26, lambda upto: pytest.fail("nothing is read"), seen=seen.epoch) == newer
    assert files_.head() == newer


def test_a_query_of_another_size_than_the_files_finds_nothing_and_drops_nothing(built):
    """Files of another size than the query (started over by a process whose endpoint answers another size)
    are not compared with it: that search finds nothing, and every vector stays."""
    path, provider, index = built
    odd = np.ones((1, 30), np.float32) / np.sqrt(30)
    assert index.search(odd, {"s"}, 5) == []
    assert index.pop_news() == ""
    assert hits(index, provider, {"s"}) == list(range(1, 9)), "the next normal query finds everything"
    assert len(index.indexed()) == 10


@pytest.mark.parametrize("damage", ["sessions", "rows"])
def test_damage_that_keeps_the_sizes_is_found_and_rebuilt(built, damage):
    """Garbled session names, or a row naming a session code that does not exist: started over, searches answer."""
    path, provider, index = built
    target = files(path, damage)
    data = bytearray(target.read_bytes())
    if damage == "sessions":
        data[0:4] = b"\xff\xfe{x"
    else:
        data[16:24] = np.array([7], "<i8").tobytes()  # row 0's session code
    target.write_bytes(bytes(data))
    fresh = vector_index.VectorIndex(path, provider)
    fresh.add([P(20, "s", "late ab")])
    assert hits(fresh, provider, {"s"}) == [*range(1, 9), 20]
    assert hits(fresh, provider, {"t"}) == [9, 10]


def test_marking_gone_matches_a_plain_reading_of_the_rule(tmp_path):
    """Every row of the messages except the kept chunks, plus the gone chunks; rows already gone stay gone."""
    rng = np.random.default_rng(3)
    files_ = vector_file.VectorFile(tmp_path / "embeddings.db", "fp")
    chunk_ids = np.sort(rng.choice(10_000, 600, replace=False)) + 1
    message_ids = rng.integers(1, 200, len(chunk_ids))
    vectors = rng.standard_normal((len(chunk_ids), 4)).astype(np.float32)

    def read_after(upto):
        for start in range(0, len(chunk_ids), 128):
            part = slice(start, start + 128)
            yield chunk_ids[part].tolist(), message_ids[part].tolist(), ["s"] * len(chunk_ids[part]), vectors[part]

    files_.append((1, 1), 4, read_after)
    expected = message_ids.copy()
    for _ in range(20):
        messages = set(rng.choice(200, 5).tolist())
        keep = set(rng.choice(chunk_ids, 10).tolist()) | {999_999}
        gone = set(rng.choice(chunk_ids, 3).tolist()) | {0, 10**9}  # absent chunk ids are ignored
        rule = (np.isin(expected, list(messages)) & ~np.isin(chunk_ids, list(keep))) | np.isin(chunk_ids, list(gone))
        rule &= expected != -1
        expected[rule] = -1
        assert files_.mark_gone(messages, keep_chunks=keep, gone_chunks=gone) == int(rule.sum())
        assert files_.view((1, 1)).rows[:, 1].tolist() == expected.tolist()



@pytest.mark.parametrize("damaged", [
    b'"s1"\n"a\rb","c"\n',  # a raw line break other than \n inside a name, and two values on a line
    b'"s1"\n"a\x1cb","c"\n',
    b'"s1"\n"a\xe2\x80\xa8b","c"\n',
    b'"s1"\n"s2", "s3"\n',  # two values on one line
    b'"s1"\n\n"s2"\n',  # an empty line
    b'"s1"\n7\n',  # not a string
    b'"s1"\n"s2\n',  # cut inside a name
])
def test_session_names_that_do_not_read_as_one_string_a_line_are_damage(damaged):
    with pytest.raises(ValueError):
        vector_file.parse_names(damaged)


def test_session_names_read_as_written():
    names = ["s1", "20251130_104022_9f1764", "é\u2028\r\x1c", 'q"uote']
    data = "".join(json.dumps(n) + "\n" for n in names).encode()
    assert vector_file.parse_names(data) == names
    assert vector_file.parse_names(b"") == []


def test_a_file_without_its_token_opened_while_another_process_writes_waits_for_a_later_search(built):
    """The token of a file written before tokens is added by the first open; while another process holds the
    write lock, that open is a temporary refusal (the next search opens it), never a process going on with
    no token, which would build the vector files over for itself and again for every other process."""
    path, provider, index = built
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM meta WHERE key = 'file_token'")
    index.close()
    writer = sqlite3.connect(path, timeout=0)
    writer.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(index_file.IndexNotNow) as refused:
            vector_index.VectorIndex(path, provider)
        assert refused.value.temporary
    finally:
        writer.rollback()
        writer.close()
    fresh = vector_index.VectorIndex(path, provider)
    assert hits(fresh, provider, {"s"}) == list(range(1, 9))
    assert json.loads(files(path, "head").read_text())["db"][2] == source_key(path)[2] != ""
