"""Faults of the semantic leg that must not stay silent or never heal (issue 11),
through Hermes' loader and dispatch, the command line and the slash commands:

* a data folder or index file that cannot be written (denied for real: ``chattr +i``
  as root, where modes do not stop writes; ``chmod`` otherwise): permanent, named,
  remembered, and keyword mode stays fast;
* index damage: a vector of the wrong size (dropped and embedded again), a schema
  written by a newer plugin (left alone), a folder at the file's path (what to
  remove), a dropped table (moved aside and rebuilt);
* a malformed ``consent.json`` (no consent), one that cannot be written (a code and
  the path);
* credentials inside ``base_url`` (never shown or stored), and secrets inside past
  messages or the query (never sent to a remote endpoint).

Keyword results stand in every case.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
from conftest import ALPHA_TEXTS, World, result_sessions

TEXTS = ALPHA_TEXTS


def plugin(name: str):
    """A module of the plugin as Hermes loaded it (imported now if it was not yet)."""
    return importlib.import_module(f"hermes_plugins.project_history_recall.{name}")


def data_dir(world: World) -> Path:
    return world.home / "plugins" / "project-history-recall" / "data"


def index_path(world: World) -> Path:
    return data_dir(world) / "embeddings.db"


def consent(world: World, sid: str = "cur", **args) -> dict:
    answer = world.call("project_history_semantic_consent", {"decision": "allow", **args}, sid)
    assert answer["success"] is True, answer
    return answer


def sent_texts(server) -> list[str]:
    return [text for request in server.requests for text in request["body"]["input"]]


@pytest.fixture
def faults(warm: World) -> World:
    """conftest's ``warm`` world, under the name these tests use."""
    return warm


def indexed_then_new_process(world: World, fake):
    """Consent for the loopback endpoint, index the project by a search, then close the
    index as a new process would start (SQLite removes the -wal and -shm files)."""
    server = fake()
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(world)
    assert world.search("cur", "websocket backoff")["semantic_status"] == "ready"
    plugin("vector_index").reset_indexes()
    assert not Path(f"{index_path(world)}-shm").exists(), "the index is closed: a new open must create its -shm"
    return server


def run_cli(capsys, world: World, *argv: str) -> tuple[int, dict, str]:
    from project_history_recall.__main__ import main

    code = main(["--hermes-home", str(world.home), *argv, "--json"])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


def slash(name: str, cwd: Path | None = None) -> str:
    """A slash command as typed at the Hermes prompt, run in ``cwd`` (slash commands are scoped by Hermes' folder)."""
    from hermes_cli.plugins import get_plugin_manager

    before = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        return get_plugin_manager()._plugin_commands[name]["handler"]("")
    finally:
        os.chdir(before)


# ---------------------------------------------------------------------------
# Writes really denied
# ---------------------------------------------------------------------------


@contextmanager
def writes_denied(path: Path) -> Iterator[None]:
    """Deny every write to ``path`` (a folder: no file created in it; a file: not opened for writing), for real.

    As root, permission bits do not stop writes, so the immutable flag does
    (``chattr +i``, which root too must lift first); otherwise ``chmod``. Skips
    the test, saying why, when neither really denies a write here.
    """
    folder = path.is_dir()
    if os.geteuid() == 0:
        if shutil.which("chattr") is None:
            pytest.skip("running as root without chattr: no way to deny a write to root here")
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"chattr +i is not supported here ({done.stderr.strip()}): root cannot be denied a write")
        undo = ["chattr", "-i", str(path)]
    else:
        mode = path.stat().st_mode
        path.chmod(0o555 if folder else 0o444)
        undo = None
    try:
        try:  # prove it: a write must fail
            if folder:
                (path / ".probe").touch()
                (path / ".probe").unlink()
            else:
                with open(path, "ab"):
                    pass
        except PermissionError:
            pass
        else:
            pytest.skip(f"writes to {path} could not be denied on this file system")
        yield
    finally:
        if undo:
            subprocess.run(undo, check=True)
        else:
            path.chmod(mode)


def timed_keyword_searches(world: World, count: int = 3) -> list[tuple[float, dict]]:
    out = []
    for _ in range(count):
        started = time.monotonic()
        answer = world.search("cur", "websocket backoff", mode="keyword")
        out.append((time.monotonic() - started, answer))
    return out


# ---------------------------------------------------------------------------
# 6. A read-only data folder or index file
# ---------------------------------------------------------------------------


def test_a_read_only_data_folder_is_permanent_named_remembered_and_keyword_mode_stays_fast(faults, fake, capsys):
    """Was: every search, keyword mode included, spent about 1 s retrying the WAL switch, and
    the answer said "busy ... resumes later". Now the first search finds out, later ones cost
    a few stat calls, and every answer names the folder and the fix."""
    indexed_then_new_process(faults, fake)
    folder = data_dir(faults)
    with writes_denied(folder):
        timed = timed_keyword_searches(faults)
        for seconds, answer in timed:
            assert result_sessions(answer) == ["a_ws"], "keyword results stand"
            assert answer["semantic_status"] == "unavailable"
            note = answer["semantic_note"]
            assert str(folder) in note and "writable" in note and "until" in note, note
            assert "busy" not in note and "later search" not in note, "not temporary"
        assert max(seconds for seconds, _ in timed) < 0.5, [round(s, 2) for s, _ in timed]
        hybrid = faults.search("cur", "websocket backoff")
        assert hybrid["semantic_status"] == "unavailable" and str(folder) in hybrid["semantic_note"]
        assert result_sessions(hybrid)[0] == "a_ws"

        code, answer, err = run_cli(capsys, faults, "index")
        assert code == 1 and answer["code"] == "index_read_only" and answer["temporary"] is False, answer
        assert str(folder) in answer["error"] and str(folder) in err
        line = slash("history-index", faults.paths["alpha"])
        assert "internal" not in line and str(folder) in line, line
        assert "semantic search here: unavailable" in line

        code, report, _ = run_cli(capsys, faults, "status")
        assert report["index"]["code"] == "index_read_only" and str(folder) in report["index"]["error"]
        from project_history_recall import render

        assert str(folder) in render.render_status(report)
    # Writable again: the remembered condition goes with the folder's change.
    assert faults.search("cur", "websocket backoff")["semantic_status"] == "ready"


def test_a_read_only_data_folder_with_no_index_yet_is_named_by_a_keyword_search_too(faults, fake):
    """Consent given, no embeddings.db yet (a keyword search creates none), and the data folder cannot be written:
    a hybrid search could not index, and a keyword search says so as the hybrid one does (unavailable, the
    folder and the fix), not "a hybrid or semantic search indexes the project as it goes"."""
    server = fake()
    faults.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(faults)
    folder = data_dir(faults)
    with writes_denied(folder):
        for mode in ("keyword", "hybrid", "keyword"):
            answer = faults.search("cur", "websocket backoff", mode=mode)
            assert result_sessions(answer)[0] == "a_ws", "keyword results stand"
            assert answer["semantic_status"] == "unavailable", (mode, answer)
            assert str(folder) in answer["semantic_note"] and "writable" in answer["semantic_note"], (mode, answer)
    assert not index_path(faults).exists() and server.requests == []


def test_a_read_only_index_file_is_permanent_and_named(faults, fake):
    indexed_then_new_process(faults, fake)
    path = index_path(faults)
    with writes_denied(path):
        timed = timed_keyword_searches(faults)
        for seconds, answer in timed:
            assert result_sessions(answer) == ["a_ws"]
            assert answer["semantic_status"] == "unavailable"
            assert str(path) in answer["semantic_note"] and "writable" in answer["semantic_note"]
            assert "busy" not in answer["semantic_note"]
        assert max(seconds for seconds, _ in timed) < 0.5, [round(s, 2) for s, _ in timed]
        assert faults.search("cur", "websocket backoff")["semantic_status"] == "unavailable"
    assert faults.search("cur", "websocket backoff")["semantic_status"] == "ready"


def test_a_data_folder_that_cannot_be_created_is_a_clear_consent_error(faults, fake):
    """The data folder missing and its parent read-only, or a file in its place: the consent
    tool answers a code and what to fix (it was internal_error); keyword results stand."""
    server = fake()
    faults.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    parent = data_dir(faults).parent
    with writes_denied(parent):
        refused = faults.call("project_history_semantic_consent", {"decision": "allow"}, "cur")
        assert refused["success"] is False and refused["code"] == "consent_unwritable", refused
        assert str(parent) in refused["error"] and "writable" in refused["error"]
        answer = faults.search("cur", "websocket backoff")
        assert result_sessions(answer)[0] == "a_ws" and answer["semantic_status"] == "consent_required"
    data_dir(faults).write_text("not a folder")
    refused = faults.call("project_history_semantic_consent", {"decision": "allow"}, "cur")
    assert refused["success"] is False and refused["code"] == "consent_unwritable", refused
    assert str(data_dir(faults)) in refused["error"] and "is a file" in refused["error"]
    assert result_sessions(faults.search("cur", "websocket backoff"))[0] == "a_ws"
    assert server.requests == []


# ---------------------------------------------------------------------------
# 7. Index damage that never healed
# ---------------------------------------------------------------------------


def test_the_index_command_repairs_a_vector_of_the_wrong_size(faults, fake, capsys):
    """Was: ``index`` answered internal_error, for ever (only deleting the file helped). Status counts the vectors
    of the wrong size a search will meet: among the chunks the vector files have not copied (it read every vector's
    size, 8.7 s at a million chunks); the index command looks through the whole file."""
    server = indexed_then_new_process(faults, fake)
    with sqlite3.connect(index_path(faults)) as conn:
        (mid,) = conn.execute("SELECT message_id FROM chunks WHERE id = (SELECT min(id) FROM chunks)").fetchone()
        conn.execute("UPDATE chunks SET vector = x'00010203' WHERE id = (SELECT min(id) FROM chunks)")
    with sqlite3.connect(faults.home / "state.db") as conn:
        (damaged_text,) = conn.execute("SELECT content FROM messages WHERE id = ?", (mid,)).fetchone()
    code, report, _ = run_cli(capsys, faults, "status")
    assert report["index"]["damaged_vectors"] == 0, "the vector files hold the chunk as it was copied"
    (head,) = data_dir(faults).glob("embeddings.db.*.head")
    head.unlink()  # the files start over: the next search copies every chunk again
    code, report, _ = run_cli(capsys, faults, "status")
    assert report["index"]["damaged_vectors"] == 1
    sent = len(sent_texts(server))
    code, answer, _ = run_cli(capsys, faults, "index")
    assert code == 0 and answer["success"] is True and answer["repaired"] == 1, answer
    assert answer["semantic_status"] == "ready" and "wrong size" in answer["note"]
    # The damaged message again, and the one no search had indexed (the current session's).
    assert sorted(sent_texts(server)[sent:]) == sorted([damaged_text, "what did we decide?"])
    with sqlite3.connect(index_path(faults)) as conn:
        assert {n for (n,) in conn.execute("SELECT length(vector) FROM chunks")} == {32}
    code, report, _ = run_cli(capsys, faults, "status")
    assert report["index"]["damaged_vectors"] == 0
    line = slash("history-index", faults.paths["alpha"])
    assert "semantic search here: ready" in line, line
    answer = faults.search("cur", "websocket backoff")
    assert answer["semantic_status"] == "ready" and result_sessions(answer)[0] == "a_ws"


def test_vectors_of_another_size_from_the_endpoint_are_dropped_and_embedded_again(faults, fake):
    """The endpoint now answers 16-d vectors for the same model: the 8-d ones in the file are stale."""
    indexed_then_new_process(faults, fake)
    bigger = fake(dims=16)
    faults.configure_embedding(provider="openai", base_url=bigger.base_url, model="m")
    consent(faults)  # another endpoint: consent again, a new fingerprint; same size check on its own vectors
    assert faults.search("cur", "websocket backoff")["semantic_status"] == "ready"
    # Same endpoint and model, the server's vectors change size (a model swapped behind the name).
    bigger.dims = 12
    plugin("vector_index").reset_indexes()
    first = faults.search("cur", "websocket backoff")
    assert first["success"] is True and result_sessions(first)[0] == "a_ws"
    assert "embedded again" in first.get("semantic_note", ""), first
    answer = faults.search("cur", "websocket backoff")
    assert answer["semantic_status"] == "ready", answer
    with sqlite3.connect(index_path(faults)) as conn:
        sizes = {n for (n,) in conn.execute("SELECT length(vector) FROM chunks WHERE length(vector) != 32")}
    assert sizes == {48}, "the 16-d vectors were replaced by 12-d ones"


def chunk_sizes(world: World) -> list[int]:
    """The byte length of every stored vector, in chunk id order."""
    with closing(sqlite3.connect(index_path(world))) as conn:
        return [n for (n,) in conn.execute("SELECT length(vector) FROM chunks ORDER BY id")]


def test_one_reply_of_another_size_starts_nothing_over(faults, fake):
    """Was: a new process whose first reply had another size than the stored vectors took that size, dropped
    every vector and embedded (sent) the whole history again. A size changes only when a second reply (a fixed
    probe) agrees: that search's vector leg finds nothing and says so, keyword results stand, nothing is dropped."""
    server = indexed_then_new_process(faults, fake)
    stored, sent = chunk_sizes(faults), len(sent_texts(server))
    server.odd = 1  # one bad reply
    first = faults.search("cur", "websocket backoff")
    assert result_sessions(first)[0] == "a_ws", "keyword results stand"
    assert first["semantic_status"] == "unavailable" and "12-d" in first["semantic_note"], first
    again = faults.search("cur", "websocket backoff")
    assert again["semantic_status"] == "ready" and result_sessions(again)[0] == "a_ws", again
    assert chunk_sizes(faults) == stored, "no vector dropped or embedded again"
    assert len(sent_texts(server)) - sent == 3, sent_texts(server)[sent:]  # the question, the probe, the question


def in_another_process(world: World, command: str) -> dict:
    """``command`` (``search`` or ``index``) run by the command line in a process of its own: a new process, which
    learns the endpoint's vector size anew."""
    argv = ["search", "websocket backoff", "--cwd", str(world.paths["alpha"])] if command == "search" else ["index"]
    done = subprocess.run([sys.executable, str(world.home / "plugins" / "project-history-recall"), *argv, "--json"],
                          capture_output=True, text=True, env={**os.environ, "HERMES_HOME": str(world.home)}, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_an_older_process_never_drops_what_a_newer_one_embedded_at_a_new_size(faults, fake):
    """Was: the endpoint's vectors change size while a process lives; a new process starts the files over and
    embeds everything at the new size; the old process, still expecting the old size, dropped all of it (and sent
    its texts to be refused), and the next new process sent it all again, back and forth. Now the old process takes
    the newer files' size: nothing is dropped, and each search sends only its question."""
    server = indexed_then_new_process(faults, fake)
    assert faults.search("cur", "websocket backoff")["semantic_status"] == "ready"  # this process knows 8-d replies
    server.dims = 12  # a model swapped behind the name
    assert in_another_process(faults, "search")["success"] is True  # learns the new size: starts the files over
    newer = in_another_process(faults, "index")
    assert newer["semantic_status"] == "ready" and chunk_sizes(faults) == [48] * 3, newer  # everything at the new size
    sent = len(sent_texts(server))
    older = faults.search("cur", "websocket backoff")
    assert older["semantic_status"] == "ready" and result_sessions(older)[0] == "a_ws", older
    again = in_another_process(faults, "search")
    assert again["semantic_status"] == "ready" and result_sessions(again)[0] == "a_ws", again
    assert chunk_sizes(faults) == [48] * 3, "nothing dropped"
    assert sent_texts(server)[sent:] == ["websocket backoff"] * 2, "each search sent its question, nothing more"


def test_a_schema_from_a_newer_plugin_is_left_alone_and_says_what_to_do(faults, fake, capsys):
    """Was: the index command and /history-index answered internal_error; searches called it temporary."""
    indexed_then_new_process(faults, fake)
    path = index_path(faults)
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {plugin('index_file').SCHEMA_VERSION + 1}")
    before = path.read_bytes()
    for mode in ("keyword", "hybrid"):
        answer = faults.search("cur", "websocket backoff", mode=mode)
        assert result_sessions(answer)[0] == "a_ws", "keyword results stand"
        assert answer["semantic_status"] == "unavailable"
        note = answer["semantic_note"]
        assert "newer plugin version" in note and "upgrade the plugin" in note.lower() and "move the file aside" in note, note
    code, answer, err = run_cli(capsys, faults, "index")
    assert code == 1 and answer["code"] == "index_newer_schema" and answer["temporary"] is False, answer
    assert "upgrade the plugin" in err.lower()
    line = slash("history-index", faults.paths["alpha"])
    assert "internal" not in line and "upgrade the plugin" in line.lower(), line
    assert "semantic search here: unavailable" in line
    code, report, _ = run_cli(capsys, faults, "status")
    assert report["index"]["code"] == "index_newer_schema"
    assert path.read_bytes() == before and not list(data_dir(faults).glob("embeddings.db.broken-*")), "left alone"
    # Moved aside as the note says: the remembered condition goes with the file, and a new index is built.
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{path}{suffix}").exists():
            Path(f"{path}{suffix}").rename(f"{path}.newer{suffix}")
    assert faults.search("cur", "websocket backoff")["semantic_status"] == "ready"


def test_an_older_schema_is_moved_aside_and_rebuilt_and_keyword_answers_stand(faults, fake):
    """A file of schema 1 (a build before the first release): the search moves it aside, says why, embeds its
    messages again, and answers."""
    server = indexed_then_new_process(faults, fake)
    with sqlite3.connect(index_path(faults)) as conn:
        conn.execute("PRAGMA user_version = 1")
    answer = faults.search("cur", "websocket backoff")
    assert result_sessions(answer)[0] == "a_ws", "keyword results stand"
    (aside,) = data_dir(faults).glob("embeddings.db.broken-*")
    note = answer["semantic_note"]
    assert "before its first release" in note and f"moved to {aside.name} and rebuilt" in note, note
    assert answer["semantic_status"] == "ready" and set(TEXTS.values()) <= set(sent_texts(server)[-3:])


def test_a_folder_at_the_index_path_says_what_to_remove(faults, fake, capsys):
    indexed_then_new_process(faults, fake)
    path = index_path(faults)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.mkdir()
    (path / "something.txt").write_text("the user's")
    timed = timed_keyword_searches(faults, 2)
    for seconds, answer in timed:
        assert result_sessions(answer) == ["a_ws"]
        assert answer["semantic_status"] == "unavailable"
        assert str(path) in answer["semantic_note"] and "is a folder" in answer["semantic_note"]
        assert "rm -r" in answer["semantic_note"] and "busy" not in answer["semantic_note"]
    assert max(seconds for seconds, _ in timed) < 0.5
    assert faults.search("cur", "websocket backoff")["semantic_status"] == "unavailable"
    code, answer, _ = run_cli(capsys, faults, "index")
    assert code == 1 and answer["code"] == "index_not_a_file" and answer["temporary"] is False, answer
    code, report, _ = run_cli(capsys, faults, "status")
    assert report["index"]["code"] == "index_not_a_file"
    from project_history_recall import render

    assert "none yet" not in render.render_status(report) and "is a folder" in render.render_status(report)
    assert (path / "something.txt").read_text() == "the user's", "nothing of the user's is removed"
    shutil.rmtree(path)
    assert faults.search("cur", "websocket backoff")["semantic_status"] == "ready", "a new index is built"


def test_a_folder_at_a_vector_file_path_is_permanent_and_says_what_to_remove(faults, fake, capsys):
    """The shared vector files beside embeddings.db: a folder where one belongs is the user's to remove, not a busy disk."""
    indexed_then_new_process(faults, fake)
    (vec,) = data_dir(faults).glob("embeddings.db.*.vec")
    vec.unlink()
    vec.mkdir()
    (vec / "something.txt").write_text("the user's")
    answer = faults.search("cur", "websocket backoff")
    assert result_sessions(answer)[0] == "a_ws", "keyword results still answer"
    assert answer["semantic_status"] == "unavailable"
    note = answer["semantic_note"]
    assert str(vec) in note and "is a folder" in note and "rm -r" in note and "retries" not in note, note
    code, answer, _ = run_cli(capsys, faults, "index")
    assert code == 1 and answer["code"] == "index_not_a_file" and answer["temporary"] is False, answer
    code, report, _ = run_cli(capsys, faults, "status")
    assert report["index"]["code"] == "index_not_a_file" and str(vec) in report["index"]["error"], report["index"]
    assert (vec / "something.txt").read_text() == "the user's", "nothing of the user's is removed"
    shutil.rmtree(vec)
    assert faults.search("cur", "websocket backoff")["semantic_status"] == "ready", "the files are built again"


def test_a_vector_file_that_cannot_be_written_is_permanent(faults, fake, capsys):
    indexed_then_new_process(faults, fake)
    (head,) = data_dir(faults).glob("embeddings.db.*.head")
    head.write_text("{}")  # the files must be built again, and the next writer cannot
    (vec,) = data_dir(faults).glob("embeddings.db.*.vec")
    with writes_denied(vec):
        answer = faults.search("cur", "websocket backoff")
        assert result_sessions(answer)[0] == "a_ws"
        assert answer["semantic_status"] == "unavailable"
        assert str(vec) in answer["semantic_note"] and "chmod u+w" in answer["semantic_note"], answer["semantic_note"]
        code, answer, _ = run_cli(capsys, faults, "index")
        assert code == 1 and answer["code"] == "index_read_only" and answer["temporary"] is False, answer
    assert faults.search("cur", "websocket backoff")["semantic_status"] == "ready"


def test_a_dropped_table_is_moved_aside_and_rebuilt(faults, fake, capsys):
    """Was: "busy" on every search, for ever."""
    server = indexed_then_new_process(faults, fake)
    with sqlite3.connect(index_path(faults)) as conn:
        conn.execute("DROP TABLE chunks")
    answer = faults.search("cur", "websocket backoff")
    assert answer["semantic_status"] == "ready" and "rebuilt" in answer["semantic_note"], answer
    assert result_sessions(answer)[0] == "a_ws"
    assert list(data_dir(faults).glob("embeddings.db.broken-*")), "the damaged file is kept aside"
    assert set(TEXTS.values()) <= set(sent_texts(server)[-3:]), "its messages were embedded again"
    # The same while this process has the index open and loaded.
    with sqlite3.connect(index_path(faults)) as conn:
        conn.execute("DROP TABLE chunks")
    first = faults.search("cur", "websocket backoff")
    assert result_sessions(first)[0] == "a_ws"
    assert first["semantic_status"] == "unavailable" and "moves it aside and rebuilds it" in first["semantic_note"], first
    answer = faults.search("cur", "websocket backoff")
    assert answer["semantic_status"] == "ready", answer
    assert len(list(data_dir(faults).glob("embeddings.db.broken-*"))) == 2
    # And from the index command in a new process.
    plugin("vector_index").reset_indexes()
    with sqlite3.connect(index_path(faults)) as conn:
        conn.execute("DROP TABLE chunks")
    code, answer, _ = run_cli(capsys, faults, "index")
    assert code == 0 and answer["semantic_status"] == "ready" and "rebuilt" in answer["note"], answer


# ---------------------------------------------------------------------------
# 8. consent.json of the wrong shape
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("damage", [
    "projects-a-string", "projects-of-numbers", "declined-a-string", "model-a-number", "a-list", "not-json",
])
def test_a_malformed_consent_file_is_no_consent_and_says_how_to_fix(world: World, fake, damage, capsys):
    """Was: ``"projects": "auto:/…/alphabet"`` (a string) was matched by substring, so alpha,
    never consented, was embedded."""
    alpha, alphabet = world.repo("alpha"), world.repo("alphabet")
    world.session("a_ws", alpha, messages=[("assistant", TEXTS["a_ws"])])
    world.session("cur", alpha, style="cli", messages=[("user", "hi")])
    world.session("b_ws", alphabet, messages=[("assistant", "alphabet websocket notes")])
    server = fake()
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    record = {"profile": "default", "projects": f"auto:{alphabet}", "provider": "openai", "endpoint": server.base_url,
              "model": "m", "confirmed_at": "2026-01-01T00:00:00+0000", "scope": "history+incremental"}
    if damage == "projects-of-numbers":
        record["projects"] = [1, 2]
    elif damage == "declined-a-string":
        record = {"declined": "no", "projects": [f"auto:{alpha}"], **{k: record[k] for k in ("provider", "endpoint", "model")}}
    elif damage == "model-a-number":
        record = {**record, "projects": [f"auto:{alpha}"], "model": 5}
    path = data_dir(world) / "consent.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text({"a-list": "[1, 2]", "not-json": "{'projects': "}.get(damage) or json.dumps(record))
    try:
        answer = world.search("cur", "websocket backoff")
        assert result_sessions(answer) == ["a_ws"], "keyword results stand"
        assert answer["semantic_status"] == "consent_required", answer
        note = answer["semantic_note"]
        assert "consent.json" in note and "project_history_semantic_consent" in note and "rewrites" in note, note
        assert server.requests == [], "nothing was embedded"
        assert world.search("cur", "websocket", mode="keyword")["semantic_status"] == "consent_required"
        code, report, _ = run_cli(capsys, world, "status")
        assert report["semantic"]["status"] == "consent_required" and "consent tool rewrites" in report["semantic"]["note"]
        assert "consent_required" in slash("history-index", alpha) and server.requests == []
        # Asking again rewrites the file, and then semantic search runs.
        assert "replaced" in consent(world)["message"]
        assert world.search("cur", "websocket backoff")["semantic_status"] == "ready"
        assert TEXTS["a_ws"] in sent_texts(server)
    finally:
        plugin("vector_index").reset_indexes()


# ---------------------------------------------------------------------------
# 12 (part). consent.json that cannot be written
# ---------------------------------------------------------------------------


def test_consent_file_that_is_a_folder_is_a_clear_error_with_its_path(faults, fake):
    server = fake()
    faults.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    path = data_dir(faults) / "consent.json"
    path.mkdir(parents=True)
    answer = faults.search("cur", "websocket backoff")
    assert answer["semantic_status"] == "consent_required" and "a folder" in answer["semantic_note"]
    for decision in ("allow", "decline"):
        refused = faults.call("project_history_semantic_consent", {"decision": decision}, "cur")
        assert refused["success"] is False and refused["code"] == "consent_unwritable", refused
        assert str(path) in refused["error"] and "rm -r" in refused["error"] and refused["file"] == str(path)
        assert "a folder, not a file" in refused["error"]
    assert path.is_dir() and server.requests == []


def test_consent_file_in_a_folder_that_cannot_be_written(faults, fake):
    server = fake()
    faults.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    folder = data_dir(faults)
    folder.mkdir(parents=True)
    with writes_denied(folder):
        refused = faults.call("project_history_semantic_consent", {"decision": "allow"}, "cur")
        assert refused["success"] is False and refused["code"] == "consent_unwritable", refused
        assert str(folder) in refused["error"] and "writable" in refused["error"]
        assert result_sessions(faults.search("cur", "websocket backoff")) == ["a_ws"]
    assert not list(folder.iterdir()), "no partial file left"
    consent(faults)


# ---------------------------------------------------------------------------
# 9. Credentials inside base_url
# ---------------------------------------------------------------------------

URL_USER_KEY = "sk-userinfo-9d8c7b6a5f4e3d2c"
URL_QUERY_KEY = "Qk7xW2pL9mN4vB8zR3tY6uH1"


class Everything(logging.Handler):
    """Keeps every record as formatted, with its attributes, at every level."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage() + repr(record.__dict__))


@pytest.fixture
def every_log():
    """Every log record at DEBUG of the loggers that could see an endpoint's URL."""
    keep = Everything()
    saved = []
    for name in ("", "hermes_plugins", "project_history_recall", "openai", "openai._base_client", "httpx", "httpcore"):
        target = logging.getLogger(name)
        saved.append((target, target.level))
        target.setLevel(logging.DEBUG)
        target.addHandler(keep)
    yield keep.lines
    for target, level in saved:
        target.removeHandler(keep)
        target.setLevel(level)


@pytest.mark.parametrize("name", ["api_key", "key", "token", "sig", "access_token", "apikey", "X-Api-Key", "code"])
def test_an_endpoints_credentials_are_masked_and_known_by_every_query_name(name):
    """What the end-to-end case below shows for two names, for each name a query's credential goes by: the endpoint
    shown or stored holds ``***`` for the userinfo and the value, and the list of secrets kept out of errors and logs
    holds both (raw and as Basic auth carries them)."""
    import base64

    from project_history_recall import redact

    url = f"http://phr:{URL_USER_KEY}@127.0.0.1:8080/v1?{name}={URL_QUERY_KEY}&model=m"
    assert redact.redact_url(url) == f"http://***@127.0.0.1:8080/v1?{name}=***&model=m"
    secrets = redact.endpoint_secrets(url, "")
    assert {URL_USER_KEY, URL_QUERY_KEY, base64.b64encode(f"phr:{URL_USER_KEY}".encode()).decode()} <= set(secrets)
    assert redact.mask_secrets(f"GET {url} failed", secrets) == "GET http://phr:***@127.0.0.1:8080/v1?" + f"{name}=***&model=m failed"


@pytest.mark.parametrize("name", ["api_key", "sig"])
def test_credentials_in_the_endpoint_never_reach_answers_or_files(faults, fake, capsys, every_log, name):
    server = fake()
    port = server.base_url.split(":")[2].split("/")[0]
    base_url = f"http://phr:{URL_USER_KEY}@127.0.0.1:{port}/v1?{name}={URL_QUERY_KEY}"
    faults.configure_embedding(provider="openai", base_url=base_url, model="m")
    shown: list[str] = []

    def keep(answer):
        shown.append(json.dumps(answer))
        return answer

    before = keep(faults.search("cur", "websocket backoff"))
    assert before["semantic_status"] == "consent_required" and f"127.0.0.1:{port}" in before["semantic_note"]
    record = keep(consent(faults))
    assert record["consent"]["endpoint"] == f"http://***@127.0.0.1:{port}/v1?{name}=***"
    answer = keep(faults.search("cur", "websocket backoff"))
    assert answer["semantic_status"] == "ready", answer
    # The HTTP client used the URL as configured: the query on every request, the userinfo as Basic auth.
    assert server.requests and all(r["path"] == f"/v1/embeddings?{name}={URL_QUERY_KEY}" for r in server.requests)
    import base64

    assert {r["auth"] for r in server.requests} == {"Basic " + base64.b64encode(f"phr:{URL_USER_KEY}".encode()).decode()}
    code, report, _ = run_cli(capsys, faults, "status")
    shown.append(json.dumps(report))
    shown.append(slash("history-index", faults.paths["alpha"]))
    # Another key on the same host: the consent does not cover it, nothing is sent.
    sent = len(server.requests)
    faults.configure_embedding(provider="openai", base_url=base_url.replace(URL_QUERY_KEY, "Zz9other8KEY7value6"), model="m")
    other = keep(faults.search("cur", "websocket backoff"))
    assert other["semantic_status"] == "consent_required" and len(server.requests) == sent
    code, report, _ = run_cli(capsys, faults, "status")
    shown.append(json.dumps(report))
    # Down: the error names the endpoint, redacted.
    faults.configure_embedding(provider="openai", base_url=base_url, model="m")
    server.close()
    down = keep(faults.search("cur", "jitter reconnect", mode="semantic"))
    assert down["semantic_status"] == "unavailable" and "unreachable" in down["semantic_note"], down
    shown.append((data_dir(faults) / "consent.json").read_text())
    assert any("/v1/embeddings" in line for line in every_log), "the HTTP traffic was logged, and captured"
    for text in shown + every_log:
        assert URL_USER_KEY not in text and URL_QUERY_KEY not in text, text
    stored = json.loads((data_dir(faults) / "consent.json").read_text())
    assert stored["endpoint_sha256"] == plugin("config_schema").endpoint_digest(base_url)
    for path in faults.home.rglob("*"):
        if path.is_file() and path.name != "config.yaml":
            assert URL_USER_KEY.encode() not in path.read_bytes(), path


def test_a_consent_recorded_without_the_endpoints_digest_is_asked_again(faults, fake):
    """consent.json written by a build before the first release (no endpoint_sha256): no consent, nothing sent."""
    server = fake()
    faults.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    record = {"profile": "default", "projects": [f"auto:{faults.paths['alpha']}"], "provider": "openai",
              "endpoint": server.base_url, "model": "m", "confirmed_at": "2026-01-01T00:00:00+0000",
              "scope": "history+incremental"}
    (data_dir(faults)).mkdir(parents=True)
    (data_dir(faults) / "consent.json").write_text(json.dumps(record))
    answer = faults.search("cur", "websocket backoff")
    assert answer["semantic_status"] == "consent_required" and result_sessions(answer)[0] == "a_ws", answer
    assert not server.requests


# ---------------------------------------------------------------------------
# 11. Secrets in past messages (and in the query) never leave the machine
# ---------------------------------------------------------------------------

PEM_BODY = [
    "MIIEpAIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK",
    "LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo",
    "9z+40RQzuVaE8AkAFmxZzow3x+VJYKdjykkJ0iT9wCS0DRTXu269V264Vf/3jvre",
]
SECRETS = {
    "openai": "sk-proj-T3BlbkFJ4x9Qm2Lw7Vn5Rk8Pz1Yc6Hd0",
    "anthropic": "sk-ant-api03-Xq7Lm2Nw9Pz4Rk8Vb1Tc6Yh3Jd5Fg0",
    "github": "ghp_Z8x7C6v5B4n3M2a1S9d8F7g6H5j4K3l2P1o0",
    "gitlab": "glpat-Rt5Yu8Io2Pa4Sd6Fg9Hj1K",
    "slack": "xoxb-2048-4096-Qw3Er5Ty7Ui9Op",
    "aws": "AKIAZ7X3C9V5B1N8M2Q4",
    "google": "AIzaSyD4f7G1h9J3k6L2m8N5p0Q7r4S1t9U6v3W",
    "bearer": "eK9mP2qR7sT4vW1xY6zA3bC8dE5fG0hJ",
    "basic": "cGhyOm9wZW4tc2VzYW1l",
    "password": "Hunter2-Correct-Horse",
    "token": "tok_live_8c1f0e2d",
    "entropy": "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg8Kq3",
}
GIT_SHA = "3f786850e387550fdab836ed7e6dc881de23001b"
SECRET_MESSAGES = [
    f"I exported OPENAI_API_KEY={SECRETS['openai']} before running the importer.",
    f"The Claude key is {SECRETS['anthropic']} and the GitHub one {SECRETS['github']}.",
    f"CI uses {SECRETS['gitlab']} for GitLab and posts to Slack with {SECRETS['slack']}.",
    f"AWS access key id {SECRETS['aws']}, Google {SECRETS['google']}.",
    f"curl -H 'Authorization: Bearer {SECRETS['bearer']}' https://api.example.com/v1/items",
    f"the proxy wants headers={{'Authorization': 'Basic {SECRETS['basic']}'}} on every call",
    f"the staging database: password={SECRETS['password']} token: \"{SECRETS['token']}\"",
    f"A session blob {SECRETS['entropy']} turned up in the logs.",
    "Here is the deploy key, do not share it:\n-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_BODY * 12)
    + "\n-----END RSA PRIVATE KEY-----\nThe deploy key goes in the vault.",
    f"We reverted commit {GIT_SHA} because the websocket reconnect regressed.",
]


def test_secrets_in_messages_and_the_query_are_redacted_before_they_are_sent(world: World, fake):
    repo = world.repo("alpha")
    world.session("s_secrets", repo, messages=[("user" if i % 2 else "assistant", text) for i, text in enumerate(SECRET_MESSAGES)])
    world.session("s_plain", repo, messages=[("assistant", TEXTS["a_ws"])])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    server = fake()
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(world)
    try:
        answer = world.search("cur", f"which key did we use, was it {SECRETS['openai']} or password=Query-Secret-77x?")
        assert answer["semantic_status"] == "ready", answer
        texts = sent_texts(server)
        sent = "\n".join(texts)
        for kind, secret in SECRETS.items():
            assert secret not in sent, kind
        for line in PEM_BODY:
            assert line not in sent, "a line of the private key was sent"
        assert "Query-Secret-77x" not in sent, "the query is redacted too"
        assert TEXTS["a_ws"] in texts, "ordinary text is sent as it is"
        assert "I exported OPENAI_API_KEY=[redacted] before running the importer." in texts
        assert any("The deploy key goes in the vault." in t for t in texts)
        assert f"We reverted commit {GIT_SHA} because the websocket reconnect regressed." in texts, "git SHAs are kept"
        # Unchanged messages are known by the hash of their own text: nothing is embedded again.
        before = len(texts)
        again = world.search("cur", "websocket reconnect regressed")
        assert again["semantic_status"] == "ready" and len(sent_texts(server)) == before + 1
        # The keyword leg reads state.db as it is: the secret's own words still find the session.
        keyword = world.search("cur", "Hunter2-Correct-Horse", mode="keyword")
        assert result_sessions(keyword) == ["s_secrets"]
    finally:
        plugin("vector_index").reset_indexes()


@pytest.mark.parametrize("text", [
    "We fixed the flaky websocket by adding exponential backoff with jitter to the reconnect loop.",
    "def connect(api_key: str, token: Optional[str] = None): client = OpenAI(api_key=api_key)",
    "max_tokens=512, tokenizer=bert-base, token_count=5, password_hash=argon2",
    "the password is in the vault; bearer tokens expire after an hour",
    f"commit {GIT_SHA} and sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "uuid 123e4567-e89b-12d3-a456-426614174000 in /usr/lib/python3.11/site-packages/project_history_recall/embeddings.py",
    "AbstractSingletonProxyFactoryBean2 and test_a_scope_scored_in_place_never_returns_other_sessions",
    "数据库迁移方案：先加列，再回填 🙂",
    "login(password=hashed_password); fetch(url, {credentials: 'include'}); tokens = [1, 2]",
    "see migrations/versions/20240311_0942_add_currency_to_vendor_orders.py and --collation-server=utf8mb4_0900_ai_ci",
    "the authorization header is missing; git@github.com:org/repo.git",
])
def test_ordinary_prose_and_code_are_not_redacted(text):
    from project_history_recall import redact

    assert redact.redact_secrets(text) == text


@pytest.mark.parametrize("text,kept", [
    ("password=secret and secret=topsecret", "password= and secret="),
    ('{"api_key": "abcd1234efgh", "name": "x"}', '{"api_key": "", "name": "x"}'),
    ("DATABASE_URL=postgresql://app:s3cr3t@db:5432/shop", "DATABASE_URL=postgresql://@db:5432/shop"),
    ("apiKey: 'Zx9-long-literal-77'", "apiKey: ''"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n(cut off here", ""),
    ("an md5-like key 9e107d9d372bb6826bd81d3542a419d6 here", "an md5-like key  here"),
    # review 36: MySQL's native password hash (a git id is in lower case, without the *), Airtable's token whole
    ("IDENTIFIED BY PASSWORD '*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19';", "IDENTIFIED BY PASSWORD '';"),
    ("authentication_string: *2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19", "authentication_string: "),
    ("etag: W/x, api key 9e107d9d372bb6826bd81d3542a419d6", "etag: W/x, api key "),
    # review 36: a key after a certificate's END, or in one cut off before it, is judged as anywhere
    ("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\nkey Zq8Wq3Lm9Pn2Rt5Yv7Bx1Cd4Ef6Gh8Jk0Xy",
     "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\nkey "),
    ("-----BEGIN CERTIFICATE-----\nkey Zq8Wq3Lm9Pn2Rt5Yv7Bx1Cd4Ef6Gh8Jk0Xy", "-----BEGIN CERTIFICATE-----\nkey "),
    # review 36: a JWT's header alone stays, its signature after a space does not
    ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9 SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9 "),
    ("AIRTABLE_PAT=patAbCdEf12345678.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "AIRTABLE_PAT="),
    ("token patAbCdEf12345678.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef ok", "token  ok"),
])
def test_secret_looking_strings_are_redacted(text, kept):
    from project_history_recall import redact

    out = redact.redact_secrets(text)
    assert "[redacted]" in out and out.replace("[redacted]", "") == kept, out


def test_the_local_model_needs_no_redaction():
    """Nothing leaves the machine with the local provider: it is given the text as it is."""
    from project_history_recall import embeddings

    text = "password: Sup3r$ecret!9 and sk-proj-T3BlbkFJ4x9Qm2Lw7Vn5Rk8Pz1Yc6Hd0aB"
    assert embeddings.LocalProvider.outbound_text(text) == text
    assert embeddings.OpenAIProvider.outbound_text(text) != text


def test_the_index_command_leaves_the_shared_vector_files_current(faults, fake, capsys):
    """What the index command embedded is copied into the shared vector files there, not by the next search."""
    server = fake()
    faults.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    consent(faults)
    code, answer, _ = run_cli(capsys, faults, "index")
    assert code == 0 and answer["indexed"] == answer["total"] > 0, answer
    with closing(sqlite3.connect(index_path(faults).as_uri() + "?mode=ro", uri=True)) as conn:
        top = conn.execute("SELECT max(id) FROM chunks").fetchone()[0]
    (head,) = data_dir(faults).glob("embeddings.db.*.head")
    assert json.loads(head.read_text())["upto"] == top
