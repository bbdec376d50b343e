"""The semantic side of a search bounded: what it embeds, reads and checks while the index is partial.

Counted, never timed (``tests/work.py``): chunks given to the embedder per call
(a clock that moves one second per call makes the indexing budget a number of
calls), texts read from state.db, SQLite steps at n and 4n.
"""

from __future__ import annotations

import functools
import importlib
import json
import re
import sqlite3
import time
import types
from collections.abc import Callable
from contextlib import closing
from typing import Any

import pytest
from conftest import World
from work import measure, plugin_dir

WORDS = "websocket reconnect backoff jitter postgres migration column backfill reads cache parser deploy canary".split()


def plugin(name: str) -> Any:
    return importlib.import_module(f"hermes_plugins.project_history_recall.{name}")


def words(i: int, size: int) -> str:
    """About ``size`` characters of plain words, different for each ``i``."""
    line = f"note {i}: " + " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(8)) + " "
    return line * max(1, size // len(line))


def bulk(world: World, sid: str, n: int, text: Callable[[int], str], roles: tuple[str, ...] = ("user", "assistant")) -> None:
    """Append ``n`` messages to session ``sid`` straight into state.db (Hermes' own writes cost minutes at 8,000)."""
    world.db  # noqa: B018  (the file exists)
    with closing(sqlite3.connect(world.home / "state.db")) as conn, conn:
        base = int(conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0])
        conn.executemany("INSERT INTO messages (session_id, role, content, timestamp, active) VALUES (?, ?, ?, ?, 1)",
                         [(sid, roles[i % len(roles)], text(base + i), 1_700_000_000 + base + i) for i in range(n)])
        conn.execute("UPDATE sessions SET message_count = message_count + ? WHERE id = ?", (n, sid))


@pytest.fixture
def remote(world: World, fake) -> World:
    """Repo app, the asking session ``cur``, a loopback embedder consented to for every project."""
    world.paths = {"app": world.repo("app")}  # type: ignore[attr-defined]
    world.session("cur", world.paths["app"], style="cli", messages=[("user", "hi")])  # type: ignore[attr-defined]
    server = fake(dims=16, words=True)
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    assert world.call("project_history_semantic_consent", {"decision": "allow", "projects": "all"}, "cur")["success"]
    # embeddings.db made as a first hybrid search makes it (a keyword search makes none): keyword status counts
    plugin("gate").open_vectors(world.home, plugin("settings").load_settings(world.home))
    return world


def embedding_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many texts each call to the provider carried; a clock that moves one second per call stands in for
    the vector leg's and the index's."""
    embeddings = plugin("embeddings")
    calls: list[int] = []
    clock = types.SimpleNamespace(monotonic=lambda: float(len(calls)), time=time.time)
    real = embeddings.OpenAIProvider.embed

    def embed(self: Any, texts: Any) -> Any:
        calls.append(len(texts))
        return real(self, texts)

    monkeypatch.setattr(embeddings.OpenAIProvider, "embed", embed)
    for name in ("vector_leg", "vector_index"):
        monkeypatch.setattr(plugin(name), "time", clock)
    return calls


def stored_chunks(world: World) -> dict[int, int]:
    """``{message id: chunks stored}`` in the profile's embeddings.db."""
    path = world.home / "plugins" / "project-history-recall" / "data" / "embeddings.db"
    with closing(sqlite3.connect(path.as_uri() + "?mode=ro", uri=True)) as conn:
        return dict(conn.execute("SELECT message_id, count(*) FROM chunks GROUP BY message_id").fetchall())


def chunks_of(world: World, message_ids: list[int]) -> dict[int, int]:
    """``{message id: chunks its text makes}``, as the remote provider is given it."""
    with closing(sqlite3.connect(world.home / "state.db")) as conn:
        rows = conn.execute(f"SELECT id, content FROM messages WHERE id IN ({','.join('?' * len(message_ids))})", message_ids)
        return {mid: _chunk_count(text) for mid, text in rows}


@functools.cache
def _chunk_count(text: str) -> int:
    """How many chunks ``text`` makes as the remote provider is given it (redacted: 0.4 s per 100 KB, so once)."""
    embeddings = plugin("embeddings")
    return len(embeddings.chunk_text(embeddings.OpenAIProvider.outbound_text(text), 512, 64))


def test_a_search_embeds_a_few_chunks_per_call_and_stores_only_whole_messages(remote: World, monkeypatch):
    """Unindexed messages of 25 KB, then of 100 KB (14 and 56 chunks each): one search gave the embedder up to
    32 messages' chunks in one call (at 32 messages 448, then 1,792 chunks: 63 s of the local model against a
    1.5 s budget) and checked the budget only after it. Now each call carries at most 32 chunks, the budget is
    checked between calls, a message is stored only with all its chunks, and one longer than a call is left to
    the index command (the note says so). Here 5 of 25 KB, then 5 of 70 KB (14 and 40 chunks each)."""
    world = remote
    calls = embedding_calls(monkeypatch)
    cap = plugin("vector_index").EMBED_CHUNKS
    for size in (25_000, 70_000):
        world.session(f"big{size}", world.paths["app"])  # type: ignore[attr-defined]
        bulk(world, f"big{size}", 5, lambda i, size=size: words(i, size))
        calls.clear()
        answer = world.search("cur", "lighthouse keeper")
        indexing = calls[:-1]  # the last call embeds the question
        assert max(indexing, default=0) <= cap and sum(indexing) <= 2 * cap, (size, calls)
        assert answer["semantic_status"] == "partial"
        stored = stored_chunks(world)
        assert stored == chunks_of(world, list(stored)), "a message stored without all its chunks"
    assert "too long to embed during a search" in answer["semantic_note"]
    monkeypatch.undo()
    assert plugin("indexing").index_projects(home=world.home)["remaining"] == 0
    stored = stored_chunks(world)
    assert len(stored) == 11 and stored == chunks_of(world, list(stored))


def counts(note: str) -> tuple[int, int]:
    """``(indexed, of how many)`` from a semantic note."""
    found = re.search(r"(\d+) of (\d+) messages indexed", note)
    assert found, note
    return int(found[1]), int(found[2])


def test_a_keyword_search_reads_only_what_is_new_while_one_message_is_unindexed(remote: World, monkeypatch):
    """Index complete but for one message of the project: each keyword search checked the whole project again
    (its status, kept only until state.db got any message, the asking conversation's own turns included): x3.3
    the SQLite steps for 4n. Now the first check is kept and what is new is read; the status stays true."""
    world, store = remote, plugin("store")
    for k in range(4):
        world.session(f"s{k}", world.paths["app"])  # type: ignore[attr-defined]
    work = {}
    for n in (1000, 4000):
        for k in range(4):
            bulk(world, f"s{k}", (n - (0 if n == 1000 else 1000)) // 4, lambda i: words(i, 60), ("user", "assistant", "tool"))
        assert plugin("indexing").index_projects(home=world.home)["remaining"] == 0
        world.say("s1", "user", f"an unindexed question {n}")
        world.search("cur", "brand new question", mode="keyword")
        world.say("cur", "assistant", "the asking conversation's own turn")  # outside the scope
        answer, work[n] = measure([plugin_dir()], monkeypatch,
                                  lambda: world.search("cur", "brand new question", mode="keyword"), store)
        done, total = counts(answer["semantic_note"])
        assert total - done == 1, answer["semantic_note"]
        world.say("s2", "assistant", f"one more unindexed answer {n}")
        assert counts(world.search("cur", "question", mode="keyword")["semantic_note"]) == (done, total + 1)
    assert work[4000].sql <= 2 * work[1000].sql, work


def test_a_search_of_a_half_built_index_does_not_read_the_project_again(remote: World, monkeypatch):
    """Nothing indexed yet and no time to index (budget 0): every hybrid search checked every message of the
    project again and read 2,000 texts to embed none (x3.2 the SQLite steps for 4n; 48 MB of text at 20 KB a
    message). Now the first check is kept while the index is partial, and texts are read only as they are
    embedded."""
    world, store = remote, plugin("store")
    monkeypatch.setattr(plugin("vector_leg"), "INDEX_BUDGET_S", 0.0)
    read: list[int] = []
    real = store.shown_texts
    monkeypatch.setattr(store, "shown_texts", lambda conn, ids: read.append(len(ids)) or real(conn, ids))
    work, made = {}, 0
    for n in (2000, 8000):
        while made < n // 500:
            world.session(f"s{made}", world.paths["app"])  # type: ignore[attr-defined]
            bulk(world, f"s{made}", 500, lambda i: words(i, 200))
            made += 1
        world.search("cur", "lighthouse keeper")
        read.clear()
        answer, work[n] = measure([plugin_dir()], monkeypatch, lambda: world.search("cur", "lighthouse keeper"), store)
        assert answer["semantic_status"] == "indexing" and f"0 of {n}" in answer["semantic_note"], answer["semantic_note"]
        assert sum(read) == 0, read
    assert work[8000].sql <= 2 * work[2000].sql, work


def test_long_messages_above_a_watermark_do_not_stall_indexing(remote: World, monkeypatch):
    """Index complete, then one short message and 33 of 100 KB: every search took the watermark path, read the 33
    again and passed over the same 32 (it stopped after 32 passed over), so the short message was never embedded
    by a search and the note said 32 of them were too long. Now a search reads past long messages (up to a bound
    in characters), the record remembers them on either path and leaves them out, and the note counts them all.
    A message passed over is not redacted: redacting each first (~0.2 s) let a search pass only 8 of them."""
    world, redact = remote, plugin("redact")
    redacted: list[int] = []
    real = redact.redact_secrets
    monkeypatch.setattr(redact, "redact_secrets", lambda text: redacted.append(len(text)) or real(text))
    world.session("s1", world.paths["app"])  # type: ignore[attr-defined]
    bulk(world, "s1", 4, lambda i: words(i, 60))
    assert plugin("indexing").index_projects(home=world.home)["remaining"] == 0
    short = world.say("s1", "user", "an ordinary short question about lighthouses")
    world.session("big", world.paths["app"])  # type: ignore[attr-defined]
    bulk(world, "big", 33, lambda i: words(i, 100_000))
    for _ in range(4):
        answer = world.search("cur", "lighthouse keeper")
    assert short in stored_chunks(world), "the short message was never embedded by a search"
    assert counts(answer["semantic_note"]) == (5, 38), answer["semantic_note"]
    assert "33 of them are too long" in answer["semantic_note"], answer["semantic_note"]
    assert redacted and max(redacted) < 100_000, sorted(redacted)[-3:]


def test_keyword_status_reads_no_text_above_a_watermark(remote: World, monkeypatch):
    """Index complete, then 1,500 unindexed messages of 20 KB: each keyword search read every new text above the
    watermark (30 MB) to count them. Now the watermark path reads ids only, and texts only as they are embedded."""
    world, store = remote, plugin("store")
    world.session("s1", world.paths["app"])  # type: ignore[attr-defined]
    bulk(world, "s1", 4, lambda i: words(i, 60))
    assert plugin("indexing").index_projects(home=world.home)["remaining"] == 0
    bulk(world, "s1", 1500, lambda i: words(i, 20_000))
    read: list[int] = []
    real = store.shown_texts
    monkeypatch.setattr(store, "shown_texts", lambda conn, ids: read.append(len(ids)) or real(conn, ids))
    for _ in range(3):
        answer = world.search("cur", "lighthouse keeper", mode="keyword")
        assert counts(answer["semantic_note"]) == (4, 1504), answer["semantic_note"]
    assert sum(read) == 0, read


def test_a_message_rewound_after_the_record_was_made_is_never_embedded(remote: World, monkeypatch):
    """The record of a partial index listed a message; it was rewound; the next search read its text by id alone
    (exists, has text), sent it to the provider and stored it. Now texts are read only of what the index should
    hold (shown, user or assistant, with text), and a rewound one leaves the record."""
    world = remote
    world.session("s1", world.paths["app"])  # type: ignore[attr-defined]
    bulk(world, "s1", 10, lambda i: words(i, 60))
    monkeypatch.setattr(plugin("vector_leg"), "INDEX_BUDGET_S", 0.0)
    assert world.search("cur", "lighthouse keeper")["semantic_status"] == "indexing"
    with closing(sqlite3.connect(world.home / "state.db")) as conn, conn:
        rewound = conn.execute("SELECT max(id) FROM messages WHERE session_id='s1'").fetchone()[0]
        conn.execute("UPDATE messages SET active = 0 WHERE id = ?", (rewound,))
    monkeypatch.setattr(plugin("vector_leg"), "INDEX_BUDGET_S", 30.0)
    answer = world.search("cur", "lighthouse keeper")
    assert rewound not in stored_chunks(world), "a rewound message was sent to the provider and stored"
    assert answer["semantic_status"] == "ready", answer


def test_two_asking_chats_of_one_project_keep_a_record_each(remote: World, monkeypatch):
    """Two chats of one project asking in turn (a gateway): the record was kept per project with one scope, and
    each chat's scope differs (its own conversation is left out), so each search replaced the other's record by a
    full check. Now each scope keeps its own (a few kept): one full check per chat."""
    world = remote
    world.session("cur2", world.paths["app"], style="cli", messages=[("user", "hello")])  # type: ignore[attr-defined]
    world.session("s1", world.paths["app"])  # type: ignore[attr-defined]
    bulk(world, "s1", 50, lambda i: words(i, 60))
    monkeypatch.setattr(plugin("vector_leg"), "INDEX_BUDGET_S", 0.0)
    index_check = plugin("index_check")
    checks: list[int] = []
    real = index_check.full_check
    monkeypatch.setattr(index_check, "full_check", lambda *a, **k: checks.append(1) or real(*a, **k))
    for asker in ["cur", "cur2"] * 3:
        world.search(asker, "lighthouse keeper", mode="keyword")
    assert len(checks) == 2, checks


@pytest.mark.parametrize("content", ["\n\n", "\u3000\t ", "\x00json:" + json.dumps([{"type": "image_url", "image_url": {"url": "x"}}])])
def test_a_message_without_text_is_never_counted_as_missing(remote: World, content: str):
    """An assistant message of line breaks (before a tool call) or of an image only has no text to embed: keyword
    mode's status counts it as the embedding reads it, so it says ready, not partial for ever."""
    world = remote
    world.session("s1", world.paths["app"])
    bulk(world, "s1", 4, lambda i: words(i, 60))
    assert plugin("indexing").index_projects(home=world.home)["remaining"] == 0
    bulk(world, "s1", 1, lambda i: content, roles=("assistant",))
    for _ in range(2):
        answer = world.search("cur", "lighthouse keeper", mode="keyword")
        assert answer["semantic_status"] == "ready", answer


def test_keyword_mode_forgets_its_record_once_the_scope_is_complete(remote: World, monkeypatch: pytest.MonkeyPatch):
    """Keyword mode found the scope partial (a record made); the index command then finished it. The next keyword
    search remembers the scope as complete, so no later one checks the project in full again."""
    world = remote
    world.session("s1", world.paths["app"])
    bulk(world, "s1", 50, lambda i: words(i, 60))
    index_check = plugin("index_check")
    assert world.search("cur", "lighthouse keeper", mode="keyword")["semantic_status"] != "ready"
    assert plugin("indexing").index_projects(home=world.home)["remaining"] == 0
    checks: list[int] = []
    real = index_check.full_check
    monkeypatch.setattr(index_check, "full_check", lambda *a, **k: checks.append(1) or real(*a, **k))
    monkeypatch.setattr(index_check, "RECHECK_S", -1.0)  # every record is due for its full check again
    assert world.search("cur", "lighthouse keeper", mode="keyword")["semantic_status"] == "ready"
    checks.clear()
    for _ in range(3):
        assert world.search("cur", "lighthouse keeper", mode="keyword")["semantic_status"] == "ready"
    assert checks == []


def test_the_record_in_use_is_dropped_last(remote: World, monkeypatch: pytest.MonkeyPatch):
    """Nine chats of one project ask in keyword mode while its index is partial; the process keeps eight records.
    The chat that keeps asking keeps its record (the least recently used one goes), so its searches check the
    project in full once, not each time another chat pushed it out."""
    world = remote
    world.session("s1", world.paths["app"])
    bulk(world, "s1", 50, lambda i: words(i, 60))
    index_check = plugin("index_check")
    chats = [f"chat{i}" for i in range(index_check.RECORDS_KEPT + 1)]
    for chat in chats:
        world.session(chat, world.paths["app"], style="cli", messages=[("user", "hi")])
    checks: list[str] = []
    real = index_check.full_check
    monkeypatch.setattr(index_check, "full_check", lambda *a, **k: checks.append("full") or real(*a, **k))

    def ask(chat: str) -> None:
        assert world.search(chat, "lighthouse keeper", mode="keyword")["semantic_status"] != "ready"

    for chat in chats[:-1]:  # eight records, the first chat's the oldest
        ask(chat)
    ask(chats[0])  # in use again
    ask(chats[-1])  # a ninth: the least recently used record goes, not the first chat's
    checks.clear()
    ask(chats[0])
    assert checks == []


def traced(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[str]:
    """The statements run on every connection ``module.name`` opens from now on (SQLite's trace callback)."""
    statements: list[str] = []
    real = getattr(module, name)

    def connect(*args: Any, **kwargs: Any) -> Any:
        conn = real(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(module, name, connect)
    return statements


def test_keyword_status_brings_the_record_up_to_date_once(remote: World, monkeypatch: pytest.MonkeyPatch):
    """While a scope's index was partial, each keyword search brought the process's record up to date twice (once
    to list what to embed, which keyword mode throws away, once to count it) and read the shared marks it never
    uses. Now one pass: one read of the chunks embedded since, no marks read, the same counts."""
    world = remote
    world.session("s1", world.paths["app"])
    bulk(world, "s1", 50, lambda i: words(i, 60))
    answer = world.search("cur", "lighthouse keeper", mode="keyword")  # the record is made
    assert counts(answer["semantic_note"]) == (0, 50), answer["semantic_note"]
    statements = traced(monkeypatch, plugin("index_file"), "connect_read_only")
    for n in range(2):
        world.say("s1", "user", f"one more question {n}")
        statements.clear()
        answer = world.search("cur", "lighthouse keeper", mode="keyword")
        assert answer["semantic_status"] == "indexing" and counts(answer["semantic_note"]) == (0, 51 + n)
        since = [s for s in statements if "FROM chunks INDEXED BY chunks_by_model WHERE model_fingerprint" in s and " AND id > " in s]
        marks = [s for s in statements if "complete_upto:" in s]
        assert (len(since), len(marks)) == (1, 0), statements


def test_the_index_command_reads_texts_a_batch_at_a_time(remote: World, monkeypatch: pytest.MonkeyPatch):
    """The index command read the texts it embeds 8 ids a statement, the page sized for a search's deadline: 26
    statements for 201 messages (the asking chat's included). Now it reads as many as it embeds at a time (64): 4."""
    world = remote
    world.session("s1", world.paths["app"])
    bulk(world, "s1", 200, lambda i: words(i, 60))
    statements = traced(monkeypatch, plugin("store"), "connect_ro")
    assert plugin("indexing").index_projects(home=world.home)["remaining"] == 0
    reads = [s for s in statements if s.startswith("SELECT m.id, m.session_id, m.content, m.role FROM messages m WHERE m.id IN")]
    assert len(reads) == 4, len(reads)


def test_a_secret_written_across_lines_is_redacted_in_the_chunks_the_index_sends(world: World, fake):
    """The index redacts a message whole (what spans lines and chunks), then each chunk as it is sent: the chunks'
    lines are joined by spaces, and a password written on the line after its label reads as one only then. Sending
    the chunks without that second pass sent these three in clear (the hostile review's t_leak_e2e.py)."""
    secrets = ["q8Zr2Lx9Vb7Nm4Kp", "Zx81Qw73Er65Ty49", "Mn27Bv38Cx49Lk50"]
    app = world.repo("app")
    world.session("old", app, style="cli", messages=[
        ("user", f"my maven settings.xml:\n<server>\n  <id>corp</id>\n  <password>\n    {secrets[0]}\n  </password>\n</server>"),
        ("assistant", f"ok, sshpass -p\n{secrets[1]} ssh deploy@host will work"),
        ("user", f'settings.py has DB_PASSWORD = """\n{secrets[2]}\n"""')])
    world.session("cur", app, style="cli", messages=[("user", "hi")])
    server = fake(dims=16, words=True)
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    assert world.call("project_history_semantic_consent", {"decision": "allow", "projects": "all"}, "cur")["success"]
    assert plugin("indexing").index_projects(home=world.home)["remaining"] == 0
    sent = [t for r in server.requests for t in r["body"]["input"]]
    assert any("sshpass" in t for t in sent), sent
    assert not [t for t in sent if any(s in t for s in secrets)], sent


def searched_tick(world: World, monkeypatch: pytest.MonkeyPatch, sid: str, n: int) -> tuple[dict, Any]:
    """Session ``sid`` of a repo of its own, ``n`` rows of one tick compacted in place (``World.compacted_tick``), and a
    keyword search of it from a new chat there: ``(answer, its measured cost)``."""
    repo, asker = world.repo(sid), f"cur{n}"
    world.session(sid, repo)
    world.compacted_tick(sid, [f"lighthouse note {i}" for i in range(n)])
    world.session(asker, repo, style="cli", messages=[("user", "hi")])
    return measure([plugin_dir()], monkeypatch, lambda: world.search(asker, "lighthouse", mode="keyword"), plugin("store"))


def test_rows_of_one_clock_tick_archived_by_a_compaction_are_checked_once(remote: World, monkeypatch):
    """A session of n rows sharing one timestamp, archived by a compaction: whether each archived row is the copy
    Hermes shows was asked of every other row of its tick (rows alike are sought by session and time), n x n rows for
    the index check's count of a project (n = 1,000 -> 4,000: 61,850 -> 967,618 hundred steps a keyword search; its
    sort of 8,000 such rows took 5 s). Now a tick's rows are told apart once a statement (4,168 -> 16,866), the same count."""
    world, store, layout = remote, plugin("store"), plugin("layout")
    work = []
    for n in (1000, 4000):
        answer, cost = searched_tick(world, monkeypatch, f"tick{n}", n)
        with closing(store.connect_ro(world.home / "state.db")) as conn:
            row_by_row = conn.execute(f"SELECT count(*) FROM messages m WHERE m.session_id = ? AND {layout.Layout().visible_sql()}",
                                      (f"tick{n}",)).fetchone()[0]
        assert counts(answer["semantic_note"]) == (0, n) and row_by_row == n, (answer["semantic_note"], row_by_row)
        work.append(cost.sql)
    assert work[1] <= 5 * work[0], work


def test_a_clock_tick_wider_than_a_page_of_ids_is_told_apart_once(remote: World, monkeypatch):
    """The same session of n rows at one time, archived by a compaction, read a page of ids at a time as the index
    check, the index command's check of live vectors and ``status`` read (``index_reads.PAGE_IDS``, 4,096; 256 here
    so that n = 1,000 -> 4,000 spans 4 -> 16 pages): each page sorted the whole tick again, T x T / 256 (8,000 ->
    32,000 rows with 4,096 a page: 40,722 -> 349,746 hundred steps, 0.13 -> 0.95 s a keyword search; here 7,057 ->
    74,512). The tick is now told apart once for every page (4,832 -> 19,524), the count the same."""
    world, store = remote, plugin("store")
    monkeypatch.setattr(plugin("index_reads"), "PAGE_IDS", 256)
    work = []
    for n in (1000, 4000):
        answer, cost = searched_tick(world, monkeypatch, f"wide{n}", n)
        with closing(store.connect_ro(world.home / "state.db")) as conn:
            rows = [i for (i,) in conn.execute("SELECT id FROM messages WHERE session_id = ? ORDER BY id", (f"wide{n}",))]
            live = plugin("index_reads").live_message_ids(conn, rows)
        assert counts(answer["semantic_note"]) == (0, n), answer["semantic_note"]
        assert live == set(rows[: n - 2] + rows[n:]), "the two rows carried forward are shown as their live copies"
        work.append(cost.sql)
    assert work[1] <= 5 * work[0], work
