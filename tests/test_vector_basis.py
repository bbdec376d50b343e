"""The vectors' principal directions: a large scope's two-pass search, under writers and damage.

Real files and real processes; the size thresholds are lowered so that a
few thousand rows stand for the tens of thousands the plugin needs first.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from test_vector_file import source_key

from project_history_recall import vector_basis, vector_file, vector_index, vector_scores

DIMS = 32
COLS = vector_basis.columns(DIMS)  # the columns the first pass reads (12)
SESSIONS = 50


def low_rank(count: int, seed: int, rank: int = 6, noise: float = 0.01) -> np.ndarray:
    """``count`` unit vectors that lie (nearly) in a ``rank``-dimensional subspace, as embeddings mostly do."""
    rng = np.random.default_rng(seed)
    directions = np.linalg.qr(np.random.default_rng(99).standard_normal((DIMS, rank)))[0].T
    vectors = rng.standard_normal((count, rank)) @ directions + noise * rng.standard_normal((count, DIMS))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def small_thresholds(monkeypatch):
    monkeypatch.setattr(vector_basis, "BASIS_FROM_ROWS", 2_000)
    monkeypatch.setattr(vector_basis, "TWO_PASS_FROM_ROWS", 1_000)
    monkeypatch.setattr(vector_basis, "KEEP_AT_LEAST", 100)


def append(files: vector_file.VectorFile, vectors: np.ndarray, *, first_chunk: int = 1) -> vector_file.Head:
    """Append ``vectors`` as chunks ``first_chunk..`` (message id = chunk id) spread over ``SESSIONS`` sessions."""
    def read_after(upto):
        ids = list(range(first_chunk, first_chunk + len(vectors)))
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            yield part, part, [f"s{i % SESSIONS}" for i in part], vectors[start : start + len(part)]

    return files.append((1, 1), DIMS, read_after)


def learned(tmp_path: Path, seed: int) -> tuple[Path, vector_file.VectorFile, np.ndarray]:
    """3,000 rows appended and their basis learned: ``(embeddings.db's path, its vector files, the vectors)``."""
    path = tmp_path / "embeddings.db"
    files = vector_file.VectorFile(path, "fp")
    vectors = low_rank(3_000, seed)
    append(files, vectors)
    assert files.organise((1, 1))
    return path, files, vectors


def exact_best(vectors: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    return (np.argsort(-(vectors @ query), kind="stable")[:k] + 1).tolist()


def searched(files: vector_file.VectorFile, query: np.ndarray, sessions: set[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(message ids, scores)`` of every row the scope's scoring returned, best first."""
    view = files.view((1, 1))
    codes = {name: i for i, name in enumerate(view.names)}
    ids, _, scores = vector_scores.scope_scores(view, vector_scores.member_mask(view, codes, sessions or {f"s{i}" for i in range(SESSIONS)}), query)
    order = np.argsort(-scores, kind="stable")
    return ids[order], scores[order]


def test_the_basis_spans_what_the_vectors_span():
    vectors = low_rank(5_000, 1)
    basis = vector_basis.learn(vectors)
    assert basis.shape == (DIMS, COLS) and basis.dtype == np.float32
    assert np.allclose(basis.T @ basis, np.eye(COLS), atol=1e-5), "orthonormal columns"
    low = vector_basis.project(vectors, basis)
    assert low.dtype == np.dtype("<f4") and np.allclose(low, vectors @ basis, atol=1e-6)
    queries = low_rank(20, 2)
    assert np.allclose(low @ (queries @ basis).T, vectors @ queries.T, atol=0.01), "dot products kept"
    assert np.array_equal(vector_basis.learn(vectors), basis), "the same vectors give the same basis"
    with pytest.raises(ValueError):
        vector_basis.learn(np.zeros((0, DIMS), np.float32))


def test_the_first_pass_keeps_a_share_of_the_scope_and_never_fewer_than_the_floor(monkeypatch):
    monkeypatch.setattr(vector_basis, "KEEP_AT_LEAST", 4_096)
    assert vector_basis.kept(300_000) == 6_000
    assert vector_basis.kept(60_000) == 4_096
    assert vector_basis.kept(1_000) == 1_000


def test_few_rows_get_no_basis_and_a_two_pass_search_finds_what_an_exact_one_does(tmp_path, small_thresholds):
    files = vector_file.VectorFile(tmp_path / "embeddings.db", "fp")
    vectors = low_rank(1_500, 3)
    append(files, vectors)
    assert files.organise((1, 1)) is False, "below BASIS_FROM_ROWS nothing is learned"
    more = low_rank(3_000, 4)
    vectors = np.concatenate([vectors, more])
    append(files, more, first_chunk=1_501)
    assert files.organise((1, 1)) is True
    head = files.head()
    assert (head.projected, head.basis_from, head.rows) == (4_500, 4_500, 4_500) and head.basis
    view = files.view((1, 1))
    assert view.basis is not None and view.low is not None and view.low.shape == (4_500, COLS)
    for query in low_rank(30, 5):
        ids, scores = searched(files, query)
        assert len(ids) == vector_basis.kept(4_500) < 4_500, "only the kept rows are scored exactly"
        assert ids[:10].tolist() == exact_best(vectors, query, 10)
        assert np.allclose(scores, vectors[ids - 1] @ query, atol=1e-6), "every score returned is the exact cosine"
    assert files.organise((1, 1)) is False, "a basis already, not grown: nothing to do"


def test_a_vector_far_from_every_learned_direction_can_be_missed_by_the_first_pass(tmp_path, small_thresholds, monkeypatch):
    """The approximation, stated: a row unlike nearly all others has little weight along the directions
    learned, so a large scope's first pass may drop it; a scope under TWO_PASS_FROM_ROWS finds it."""
    files = vector_file.VectorFile(tmp_path / "embeddings.db", "fp")
    vectors = low_rank(3_000, 6, rank=COLS, noise=0.0)  # as many directions as the first pass keeps
    odd = np.linalg.svd(vectors, full_matrices=True)[2][-1]  # a direction no other row has any weight along
    vectors[-1] = odd
    append(files, vectors)
    assert files.organise((1, 1))
    query = (0.9 * odd + 0.1 * vectors[0]) / np.linalg.norm(0.9 * odd + 0.1 * vectors[0])
    assert exact_best(vectors, query, 1) == [3_000]
    ids, _ = searched(files, query)
    assert 3_000 not in ids.tolist(), "the first pass dropped it"
    monkeypatch.setattr(vector_basis, "TWO_PASS_FROM_ROWS", 10**9)
    assert searched(files, query)[0][0] == 3_000, "one exact pass finds it"


def test_rows_appended_later_get_their_coordinates_and_are_found(tmp_path, small_thresholds):
    _, files, vectors = learned(tmp_path, 7)
    late = low_rank(5, 8)
    head = append(files, late, first_chunk=3_001)
    assert head.projected == head.rows == 3_005
    view = files.view((1, 1))
    assert view.low is not None and view.basis is not None
    assert np.allclose(view.low[-5:], late @ view.basis, atol=1e-6)
    for i in range(5):
        assert searched(files, late[i])[0][0] == 3_001 + i


def test_rows_appended_while_learning_get_their_coordinates_too(tmp_path, small_thresholds, monkeypatch):
    """Learning runs without the lock: another process appending meanwhile is not held up, and its rows
    get their coordinates at the commit."""
    path = tmp_path / "embeddings.db"
    files = vector_file.VectorFile(path, "fp")
    vectors = low_rank(3_000, 9)
    append(files, vectors)
    later = low_rank(700, 10)
    learn = vector_basis.learn

    def learn_while_another_appends(data, **kw):
        append(vector_file.VectorFile(path, "fp"), later, first_chunk=3_001)  # "another process", mid-way
        return learn(data, **kw)

    monkeypatch.setattr(vector_basis, "learn", learn_while_another_appends)
    assert files.organise((1, 1))
    head = files.head()
    assert head.rows == head.projected == 3_700 and head.basis_from == 3_000
    view = files.view((1, 1))
    assert view.low is not None and view.basis is not None
    assert np.allclose(view.low, np.concatenate([vectors, later]) @ view.basis, atol=1e-6)


def test_files_started_over_while_learning_commit_nothing_and_leave_no_files(tmp_path, small_thresholds, monkeypatch):
    path = tmp_path / "embeddings.db"
    files = vector_file.VectorFile(path, "fp")
    vectors = low_rank(3_000, 11)
    append(files, vectors)
    learn = vector_basis.learn

    def learn_while_another_starts_over(data, **kw):
        other = vector_file.VectorFile(path, "fp")
        other.append((2, 2), DIMS, lambda upto: iter(()))  # another embeddings.db's, then this one's again
        append(other, vectors[:2_500])
        return learn(data, **kw)

    monkeypatch.setattr(vector_basis, "learn", learn_while_another_starts_over)
    assert files.organise((1, 1)) is False
    assert files.head().basis == "" and files.head().rows == 2_500
    assert not list(tmp_path.glob("*.low")) and not list(tmp_path.glob("*.basis"))


@pytest.mark.parametrize("damage", ["low deleted", "low short", "basis deleted", "basis too long"])
def test_damaged_basis_files_fall_back_to_one_exact_pass_and_are_learned_again(tmp_path, small_thresholds, damage):
    path, files, vectors = learned(tmp_path, 12)
    (low,) = tmp_path.glob("*.low")
    (basis,) = tmp_path.glob("*.basis")
    kind, how = damage.split(" ", 1)
    target = low if kind == "low" else basis
    if how == "deleted":
        target.unlink()
    elif how == "short":
        with open(target, "r+b") as f:
            f.truncate(400)
    else:
        with open(target, "ab") as f:
            f.write(b"\0" * 64)
    reader = vector_file.VectorFile(path, "fp")  # a new process
    view = reader.view((1, 1))
    assert view.n == 3_000 and view.low is None and view.basis is None, "damaged: not used"
    query = vectors[123]
    ids, _ = searched(reader, query)
    assert len(ids) == 3_000 and ids[:10].tolist() == exact_best(vectors, query, 10), "every row scored exactly"
    head = append(reader, vectors[:3], first_chunk=3_001)
    assert reader.view((1, 1)).n == head.rows == 3_003, "appending still works"
    assert reader.organise((1, 1)) is True, "learned again"
    assert reader.view((1, 1)).low is not None and reader.head().projected == 3_003


def test_a_basis_learned_again_replaces_the_old_files_without_pulling_them_from_a_reader(tmp_path, small_thresholds):
    """Grown RELEARN_GROWTH times: learned again under a new token; the old files are deleted, and a process
    still mapping them keeps reading them (deleted, never truncated)."""
    path = tmp_path / "embeddings.db"
    files = vector_file.VectorFile(path, "fp")
    append(files, low_rank(2_000, 13))
    assert files.organise((1, 1))
    old = files.view((1, 1))
    first = files.head().basis
    append(files, low_rank(5_990, 14), first_chunk=2_001)
    assert files.organise((1, 1)) is False, "not grown 4 times yet"
    append(files, low_rank(10, 15), first_chunk=7_991)
    assert files.organise((1, 1)) is True, "grown 4 times: learned again"
    head = files.head()
    assert head.basis != first and head.projected == head.basis_from == 8_000
    assert sorted(p.name.split(".")[-2] for p in tmp_path.glob("*.low")) == [head.basis]
    assert old.low is not None and float(np.abs(old.low).sum()) > 0, "the old mapping still reads"


def test_the_index_command_learns_a_basis_and_a_large_scope_is_scored_in_two_passes(tmp_path, small_thresholds):
    """End to end through VectorIndex: sync() learns the basis; a large scope's search scores few rows
    exactly and finds what an exact search finds; a small scope is scored exactly."""
    from test_index import CountingProvider

    provider = CountingProvider()  # 26 letter counts: the basis keeps 9 directions
    index = vector_index.VectorIndex(tmp_path / "embeddings.db", provider)
    rng = np.random.default_rng(16)
    messages = [vector_index.PendingMessage(i + 1, f"s{i % 60}", "".join(rng.choice(list("abcdef"), 8)))
                for i in range(2_400)]
    index.add(messages)
    index.sync()
    files = vector_file.VectorFile(tmp_path / "embeddings.db", provider.fingerprint)
    head = files.head()
    assert head.basis and head.projected == head.rows == 2_400
    everyone = {f"s{i}" for i in range(60)}
    texts = {m.message_id: m for m in messages}
    for query in ("aaab", "fedc", "bbbbbe"):
        hits = index.search(provider.embed([query]), everyone, 5, per_session=1)
        exact = provider.embed([m.text for m in messages]) @ provider.embed([query])[0]
        best_per_session: dict[str, float] = {}
        for m, score in zip(messages, exact, strict=True):
            best_per_session[m.session_id] = max(best_per_session.get(m.session_id, -1.0), float(score))
        assert [round(h.score, 5) for h in hits] == [round(v, 5) for v in sorted(best_per_session.values(), reverse=True)[:5]]
        assert all(texts[h.message_id].session_id == h.session_id for h in hits)
    view = files.view(source_key(tmp_path / "embeddings.db"))
    codes = {name: i for i, name in enumerate(view.names)}
    assert len(vector_scores.scope_scores(view, vector_scores.member_mask(view, codes, everyone), provider.embed(["abc"])[0])[2]) == vector_basis.kept(2_400)
    small = vector_scores.scope_scores(view, vector_scores.member_mask(view, codes, {"s0", "s7"}), provider.embed(["abc"])[0])
    assert len(small[2]) == 80, "a small scope: every one of its rows scored exactly"


LEARNS_WHILE_APPENDING = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    import conftest
    from test_vector_basis import append, low_rank
    from project_history_recall import vector_file, vector_basis
    vector_basis.BASIS_FROM_ROWS = 2_000
    files = vector_file.VectorFile({path!r}, "fp")
    if sys.argv[1] == "append":
        for k in range(20):
            append(files, low_rank(100, 100 + k), first_chunk=files.head().upto + 1)
    else:
        for _ in range(5):
            files.organise((1, 1))
    print("ok")
""")


def test_learning_and_appending_processes_at_once_keep_every_row_and_its_coordinates(tmp_path):
    path = tmp_path / "embeddings.db"
    files = vector_file.VectorFile(path, "fp")
    append(files, low_rank(3_000, 17))
    script = LEARNS_WHILE_APPENDING.format(tests=str(Path(__file__).parent), path=str(path))
    procs = [subprocess.Popen([sys.executable, "-c", script, role], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for role in ("append", "organise", "organise")]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and out.strip() == "ok", err[-2000:]
    head = files.head()
    assert head.rows == 5_000 and head.upto == 5_000
    view = files.view((1, 1))
    assert view.rows[:, 0].tolist() == list(range(1, 5_001)), "every chunk once, in order"
    assert head.basis and head.projected == head.rows, "learned once, every later row projected as it came"
    assert view.low is not None and view.basis is not None
    assert np.allclose(view.low, np.array(view.vectors) @ view.basis, atol=1e-6)
    tokens = {p.name.split(".")[-2] for p in [*tmp_path.glob("*.low"), *tmp_path.glob("*.basis")]}
    assert tokens == {head.basis}, "no basis files left behind but the committed one"


def test_a_vector_that_is_not_finite_does_not_void_the_basis(tmp_path, small_thresholds):
    """A NaN from an endpoint in one row: the basis is learned from the finite rows, searches still find the rest."""
    files = vector_file.VectorFile(tmp_path / "embeddings.db", "fp")
    vectors = low_rank(3_000, 18)
    vectors[10] = np.nan
    append(files, vectors)
    assert files.organise((1, 1))
    view = files.view((1, 1))
    assert view.basis is not None and np.isfinite(view.basis).all()
    for i in (101, 2_500):
        ids, _ = searched(files, vectors[i])
        assert ids[0] == i + 1 and 11 not in ids.tolist()


@pytest.mark.parametrize("field", ["a token that names no file", "more rows projected than committed"])
def test_a_head_whose_basis_fields_are_damaged_is_read_as_having_none_and_learned_again(tmp_path, small_thresholds, field):
    import json

    path, files, vectors = learned(tmp_path, 19)
    (head_file,) = tmp_path.glob("*.head")
    raw = json.loads(head_file.read_text())
    if field.startswith("a token"):
        raw["basis"] = "../x/y"
    else:
        raw["projected"] = raw["rows"] + 7
    head_file.write_text(json.dumps(raw))
    reader = vector_file.VectorFile(path, "fp")  # a new process
    assert reader.head().basis == "" and reader.view((1, 1)).basis is None
    ids, _ = searched(reader, vectors[5])
    assert len(ids) == 3_000 and ids[0] == 6, "every row scored exactly"
    assert append(reader, low_rank(3, 20), first_chunk=3_001).rows == 3_003
    assert reader.organise((1, 1)) and reader.view((1, 1)).low is not None


def test_files_of_no_committed_basis_are_removed_by_the_next_index_run(tmp_path, small_thresholds):
    """A process that died while learning (or between its commit and its clean-up) leaves files no head names."""
    _, files, _ = learned(tmp_path, 21)
    committed = files.head().basis
    for token in ("0123456789abcdef", "fedcba9876543210"):
        for kind in ("low", "basis"):
            (tmp_path / f"{files.prefix.name}.{token}.{kind}").write_bytes(b"\0" * 4096)
    assert files.organise((1, 1)) is False, "nothing to learn"
    assert sorted(p.name.split(".")[-2] for p in [*tmp_path.glob("*.low"), *tmp_path.glob("*.basis")]) == [committed] * 2


def test_the_exact_pass_is_widened_until_it_holds_the_sessions_a_page_needs(tmp_path, small_thresholds):
    """The best rows all in a few long sessions: the rows kept are widened, so that later pages do not end early."""
    files = vector_file.VectorFile(tmp_path / "embeddings.db", "fp")
    vectors = low_rank(3_000, 22)
    query = vectors[0]
    order = np.argsort(-(vectors @ query))
    sessions = np.empty(3_000, dtype=object)
    sessions[order[:300]] = [f"s{i % 5}" for i in range(300)]  # the best 10 %: five sessions
    sessions[order[300:]] = [f"s{5 + i % 55}" for i in range(2_700)]

    def read_after(upto):
        ids = list(range(1, 3_001))
        yield ids, ids, list(sessions), vectors

    files.append((1, 1), DIMS, read_after)
    assert files.organise((1, 1))
    view = files.view((1, 1))
    codes = {name: i for i, name in enumerate(view.names)}
    everyone = {f"s{i}" for i in range(60)}
    narrow = vector_scores.scope_scores(view, vector_scores.member_mask(view, codes, everyone), query)
    assert len(set(narrow[1].tolist())) == 5, "the kept rows alone hold five sessions"
    wide = vector_scores.scope_scores(view, vector_scores.member_mask(view, codes, everyone), query, wanted=51)
    assert len(set(wide[1].tolist())) >= 51
    best = vector_scores.best_of_sessions(view.names, everyone, *wide, 51, 1)
    assert len(best) == 51


def test_a_scope_in_runs_among_other_projects_rows_is_scored_only_on_its_own_rows(tmp_path, small_thresholds, monkeypatch):
    """Rows laid out as projects are indexed: runs of the scope's sessions between runs of others', spans
    holding both and, in the second half, spans holding none (the first pass skips them). Only the scope's
    rows are kept, and its best rows are found as an exact search finds them."""
    monkeypatch.setattr(vector_scores, "ROUGH_SPAN", 256)
    vectors = low_rank(6_000, 21)
    owners = [f"in{i % 7}" if (i // 700) % 3 == 0 or (i < 3_000 and i % 11 == 0) else f"out{i % 5}" for i in range(6_000)]

    def read_after(upto):
        for start in range(0, 6_000, 500):
            ids = list(range(start + 1, start + 501))
            yield ids, ids, owners[start : start + 500], vectors[start : start + 500]

    files = vector_file.VectorFile(tmp_path / "embeddings.db", "fp")
    files.append((1, 1), DIMS, read_after)
    assert files.organise((1, 1))
    view = files.view((1, 1))
    codes = {name: i for i, name in enumerate(view.names)}
    scope = {f"in{i}" for i in range(7)}
    member = vector_scores.member_mask(view, codes, scope)
    mine = np.array([o in scope for o in owners])
    for query in low_rank(10, 22):
        ids, sessions, scores = vector_scores.scope_scores(view, member, query)
        assert len(ids) == vector_basis.kept(int(mine.sum())) and all(view.names[c] in scope for c in sessions)
        assert np.allclose(scores, vectors[ids - 1] @ query, atol=1e-6)
        exact = np.flatnonzero(mine)[np.argsort(-(vectors[mine] @ query), kind="stable")[:10]] + 1
        assert ids[np.argsort(-scores, kind="stable")[:10]].tolist() == exact.tolist()
    monkeypatch.setattr(vector_basis, "KEEP_AT_LEAST", 6_000)  # every row of the scope kept: the exact pass is all of it
    ids, _, _ = vector_scores.scope_scores(view, member, low_rank(1, 23)[0])
    assert sorted(ids.tolist()) == (np.flatnonzero(mine) + 1).tolist()


def test_a_scope_of_mostly_vectors_not_finite_keeps_no_row_of_another_scope(small_thresholds):
    """When fewer of a scope's rows have a finite first-pass score than the pass keeps, the rest of what it keeps is
    not filled with rows scored minus infinity: other sessions' rows and gone rows (id -1) are never scored."""
    import types

    rng = np.random.default_rng(5)
    n = 3_000
    vectors = rng.standard_normal((n, DIMS)).astype(np.float32)
    basis = vector_basis.learn(vectors)
    low = vector_basis.project(vectors, basis)
    owners = np.arange(n) % 3
    ids = np.arange(n, dtype=np.int64) + 1
    ids[owners == 1] = -1  # gone rows of the scope's session
    scope_rows = np.flatnonzero(owners == 0)
    low[scope_rows[10:]] = np.nan  # all but ten of the scope's rows not finite
    view = types.SimpleNamespace(rows=np.stack([np.zeros(n, np.int64), ids, owners], axis=1), vectors=vectors, n=n)
    inside = (owners == 0) & (ids != -1)
    got, sessions, _ = vector_scores.two_pass(view, basis, low, rng.standard_normal(DIMS).astype(np.float32), inside)
    assert set(got.tolist()) <= set(ids[scope_rows].tolist()) and set(sessions.tolist()) == {0}
