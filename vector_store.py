"""One model's rows in embeddings.db: the chunks and their vectors, the "complete up to" marks, state.db's history.

The SQL of the vector index, apart from what it loads and maps
(:mod:`vector_index`). Reads that a search makes beside a load in progress
open a read-only connection of their own and never wait for the index's lock;
writes take the connection they are given, inside its write transaction.
Every statement filters on the model's fingerprint, so vectors of two models
never mix; every value is a parameter.

``meta`` keys of one model: ``complete_upto:<fingerprint>`` (JSON ``{session
id: message id}``: every indexable message of the session up to that id has
vectors) and ``complete_stamp:<fingerprint>`` (renewed by every repair: marks
read before it no longer hold). ``state_history`` (:mod:`state_history`) is
the file's, shared by every model.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import index_file, state_history
from .embeddings import content_hash, encode_vector

_HISTORY_KEY = "state_history"
# The messages (chunk 0) of sessions (a JSON array) the file holds vectors of, one row per message. Above a
# message id: the covering (model, chunk, message, session, hash) index, one range of the newest ids.
_SESSIONS_ABOVE = ("FROM chunks INDEXED BY chunks_indexed WHERE model_fingerprint = ? AND chunk_index = 0"
                   " AND session_id IN (SELECT value FROM json_each(?)) AND message_id > ?")
# All of them: the UNIQUE (session, message, chunk, model) index, a seek per session. Unary + keeps SQLite off
# the other index, which it would prefer and read whole here (every chunk 0 of every project).
_SESSIONS_ALL = ("FROM chunks WHERE +model_fingerprint = ? AND +chunk_index = 0"
                 " AND session_id IN (SELECT value FROM json_each(?))")
_IN = "IN (SELECT value FROM json_each(?))"


@dataclass(frozen=True)
class CompleteMarks:
    """How far sessions are known to be indexed: ``upto[session id]`` = a message id such that every indexable
    message of the session up to it has vectors in the file; ``stamp`` names the marks' state since the last
    repair."""

    upto: dict[str, int]
    stamp: str
    behind: bool = False  # state.db's ids went back below the stored marks: they are to be replaced, not merged


def _ids(message_ids: Iterable[int]) -> str:
    return json.dumps([int(m) for m in message_ids])


class ChunkStore:
    """The rows of one model (``fingerprint``) in the embeddings.db at ``path``."""

    def __init__(self, path: Path, fingerprint: str) -> None:
        self.path = Path(path).absolute()
        self.fingerprint = fingerprint
        self.marks_key = f"complete_upto:{fingerprint}"
        self.stamp_key = f"complete_stamp:{fingerprint}"

    def _reader(self) -> sqlite3.Connection:
        return index_file.connect_read_only(self.path)

    # -- reads of their own (never waiting for a load) -------------------------------------------------
    def ids_in(self, sessions_json: str, above: int) -> set[int]:
        """The ids of the messages of the sessions (a JSON array) above ``above`` (a watermark, above 0) that the file
        holds vectors of. Raises ``sqlite3`` errors (as every read here)."""
        with closing(self._reader()) as conn:
            return {int(r[0]) for r in conn.execute(f"SELECT message_id {_SESSIONS_ABOVE}", (self.fingerprint, sessions_json, int(above)))}

    def ids_array(self, sessions_json: str) -> np.ndarray:
        """The ids of every message of the sessions (a JSON array) that the file holds vectors of, int64, in no
        particular order (read as one text, parsed in one pass)."""
        with closing(self._reader()) as conn:
            row = conn.execute(f"SELECT group_concat(message_id) {_SESSIONS_ALL}", (self.fingerprint, sessions_json)).fetchone()
        return np.fromstring(str(row[0] or ""), dtype=np.int64, sep=",")

    def stored_hashes(self, message_ids: Sequence[int]) -> dict[int, str]:
        """``{message id: content hash}`` of those of ``message_ids`` that have vectors: the hash of the text they
        were embedded from (a covering index)."""
        with closing(self._reader()) as conn:
            rows = conn.execute("SELECT message_id, content_hash FROM chunks INDEXED BY chunks_indexed WHERE"
                                f" model_fingerprint = ? AND chunk_index = 0 AND message_id {_IN}",
                                (self.fingerprint, _ids(message_ids)))
            return {int(m): str(h) for m, h in rows}

    def stored_upto(self) -> int:
        """The highest chunk id of this model in the file (0 when none)."""
        with closing(self._reader()) as conn:
            return self.top_chunk(conn)

    def messages_since(self, chunk: int) -> tuple[np.ndarray, int]:
        """``(the ids of the messages with chunks above chunk id chunk, int64, repeats left in; the highest chunk id)``:
        what was embedded since, by any process (chunk ids are never reused)."""
        with closing(self._reader()) as conn:
            row = conn.execute("SELECT group_concat(message_id), max(id) FROM chunks INDEXED BY chunks_by_model"
                               " WHERE model_fingerprint = ? AND id > ?", (self.fingerprint, int(chunk))).fetchone()
        return np.fromstring(str(row[0] or ""), dtype=np.int64, sep=","), int(row[1] or chunk)

    def stamp_now(self) -> str:
        """The marks' stamp (a new one after any process's repair)."""
        with closing(self._reader()) as conn:
            return self.stamp(conn)

    def stored_history(self) -> str | None:
        """The stored :mod:`state_history`, as its JSON text (``None`` before any)."""
        with closing(self._reader()) as conn:
            return history_text(conn)

    def marks(self, sessions: AbstractSet[str], top: int) -> CompleteMarks:
        """The "complete up to" marks of ``sessions``; ``top`` is state.db's highest message id now. None (only the
        stamp) when the stored marks do not read as an object of ids (edited by hand: the next write replaces
        them), or when one of them is above ``top`` (state.db went back: a restored copy reuses ids)."""
        with closing(self._reader()) as conn:  # one statement: both rows from one snapshot
            rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN (?, ?)", (self.marks_key, self.stamp_key)))
        stamp = str(rows.get(self.stamp_key, ""))
        try:
            stored = json.loads(rows[self.marks_key]) if self.marks_key in rows else {}
        except (TypeError, ValueError, RecursionError):
            stored = None
        if not isinstance(stored, dict):
            return CompleteMarks({}, stamp)
        upto = {sid: u for sid, u in stored.items() if type(u) is int}
        if any(u > top for u in upto.values()):
            return CompleteMarks({}, stamp, behind=True)
        return CompleteMarks({sid: u for sid, u in upto.items() if sid in sessions}, stamp)

    # -- on the index's connection ------------------------------------------------------------------------
    def top_chunk(self, conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT max(id) FROM chunks INDEXED BY chunks_by_model WHERE model_fingerprint = ?",
                           (self.fingerprint,)).fetchone()
        return int(row[0] or 0)

    def stamp(self, conn: sqlite3.Connection) -> str:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (self.stamp_key,)).fetchone()
        return str(row[0]) if row else ""

    def indexed(self, conn: sqlite3.Connection) -> dict[int, str]:
        """``{message id: content hash}`` of everything embedded with this model (a covering index)."""
        rows = conn.execute("SELECT message_id, content_hash FROM chunks INDEXED BY chunks_indexed"
                            " WHERE model_fingerprint = ? AND chunk_index = 0", (self.fingerprint,))
        return {int(m): str(h) for m, h in rows}

    def stored_among(self, conn: sqlite3.Connection, message_ids: Sequence[int]) -> set[int]:
        """Which of ``message_ids`` have vectors in the file."""
        rows = conn.execute("SELECT DISTINCT message_id FROM chunks INDEXED BY chunks_by_model_message"
                            f" WHERE model_fingerprint = ? AND message_id {_IN}", (self.fingerprint, _ids(message_ids)))
        return {int(r[0]) for r in rows}

    def commonest_size(self, conn: sqlite3.Connection) -> int:
        """The commonest vector size in bytes among the first chunks, the larger on a tie (0 when none): a
        damaged row is the odd one out."""
        sizes: dict[int, int] = {}
        for (size,) in conn.execute("SELECT length(vector) FROM chunks WHERE +model_fingerprint = ? ORDER BY id LIMIT 256",
                                    (self.fingerprint,)):
            if size and int(size) % 4 == 0:
                sizes[int(size)] = sizes.get(int(size), 0) + 1
        return max(sizes.items(), key=lambda item: (item[1], item[0]))[0] if sizes else 0

    def newest_size(self, conn: sqlite3.Connection, upto: int) -> int:
        """The vector size in bytes of the newest chunk with an id up to ``upto`` (0 when none)."""
        row = conn.execute("SELECT length(vector) FROM chunks INDEXED BY chunks_by_model WHERE model_fingerprint = ? AND id <= ?"
                           " ORDER BY id DESC LIMIT 1", (self.fingerprint, int(upto))).fetchone()
        return int(row[0] or 0) if row else 0

    def of_other_size(self, conn: sqlite3.Connection, size: int) -> list[int]:
        """The messages with a vector of another size than ``size`` bytes (one pass over the sizes, not the vectors)."""
        return [int(r[0]) for r in conn.execute(
            "SELECT DISTINCT message_id FROM chunks WHERE model_fingerprint = ? AND length(vector) != ?", (self.fingerprint, size))]

    def chunks_after(self, conn: sqlite3.Connection, upto: int, top: int, batch: int) -> Iterator[list[Any]]:
        """``(id, message id, session id, vector blob)`` of the chunks with ids in ``(upto, top]``, in id order, a
        ``batch`` at a time (unary + keeps SQLite on the rowid range)."""
        cursor = conn.execute("SELECT id, message_id, session_id, vector FROM chunks WHERE id > ? AND id <= ?"
                              " AND +model_fingerprint = ? ORDER BY id", (upto, top, self.fingerprint))
        while rows := cursor.fetchmany(batch):
            yield rows

    def live_chunks(self, conn: sqlite3.Connection, upto: int) -> tuple[int, Any]:
        """``(how many chunks up to id upto the file holds, a function giving their ids as an array)``."""
        (count,) = conn.execute("SELECT count(*) FROM chunks INDEXED BY chunks_by_model WHERE model_fingerprint = ? AND id <= ?",
                                (self.fingerprint, upto)).fetchone()
        return int(count), lambda: np.fromiter((r[0] for r in conn.execute(
            "SELECT id FROM chunks INDEXED BY chunks_by_model WHERE model_fingerprint = ? AND id <= ?", (self.fingerprint, upto))),
            dtype=np.int64)

    # -- writes: the caller's connection, one transaction each ---------------------------------------------
    def write(self, conn: sqlite3.Connection, messages: Sequence[Any], pieces: list[tuple[Any, int, np.ndarray]], now: float,
              history: state_history.History | None) -> list[int]:
        """Replace the chunks of ``messages`` (each with ``message_id``, ``session_id``, ``text``) by ``pieces``
        (``(message, chunk index, vector)``) in one transaction, ``history`` stored with them; returns the new
        chunk ids."""
        written: list[int] = []
        with conn:
            conn.execute("BEGIN IMMEDIATE")
            if history is not None:
                store_history(conn, history)
            conn.execute(f"DELETE FROM chunks WHERE model_fingerprint = ? AND message_id {_IN}",
                         (self.fingerprint, _ids(m.message_id for m in messages)))
            for m, i, vector in pieces:
                cursor = conn.execute(
                    "INSERT INTO chunks (session_id, message_id, chunk_index, content_hash, model_fingerprint, vector, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (m.session_id, m.message_id, i, content_hash(m.text), self.fingerprint, encode_vector(vector), now))
                written.append(int(cursor.lastrowid or 0))
        return written

    def delete(self, conn: sqlite3.Connection, message_ids: Sequence[int]) -> None:
        with conn:
            conn.execute(f"DELETE FROM chunks WHERE model_fingerprint = ? AND message_id {_IN}", (self.fingerprint, _ids(message_ids)))

    def delete_repaired(self, conn: sqlite3.Connection, message_ids: Sequence[int]) -> None:
        """Delete ``message_ids``' chunks and the marks of their sessions, with a new stamp, in one transaction (the
        other sessions' marks still hold)."""
        with conn:
            conn.execute("BEGIN IMMEDIATE")
            sessions = {str(r[0]) for r in conn.execute(
                f"SELECT DISTINCT session_id FROM chunks WHERE model_fingerprint = ? AND message_id {_IN}",
                (self.fingerprint, _ids(message_ids)))}
            conn.execute(f"DELETE FROM chunks WHERE model_fingerprint = ? AND message_id {_IN}", (self.fingerprint, _ids(message_ids)))
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (self.marks_key,)).fetchone()
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?), (?, ?)",
                         (self.marks_key, _marks_without(row[0] if row else None, sessions), self.stamp_key, secrets.token_hex(8)))

    def mark(self, conn: sqlite3.Connection, sessions: Sequence[str], upto: int, marks: CompleteMarks, *, replace: bool,
             history: state_history.History | None) -> bool:
        """Record that every indexable message of ``sessions`` up to ``upto`` has vectors (see the module docstring),
        unless the stamp moved on since ``marks`` were read; returns whether it did."""
        patch = json.dumps({sid: int(upto) for sid in sessions})
        with conn:
            conn.execute("BEGIN IMMEDIATE")  # the stamp is compared and the marks written under one lock
            if self.stamp(conn) != marks.stamp:
                return False
            if history is not None:  # state.db's history when it was checked: a restore since is found next time
                store_history(conn, history)
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value ="
                " CASE WHEN ? = 0 AND json_valid(value) AND json_type(value) = 'object'"
                " THEN json_patch(value, excluded.value) ELSE excluded.value END",
                (self.marks_key, patch, int(marks.behind or replace)))
            return True

    def forget_above(self, conn: sqlite3.Connection, parted: int, known: str | None,
                     history: state_history.History) -> list[int] | None:
        """Drop, for every model, the chunks of messages above ``parted`` and every mark (new stamps for every model:
        every process's watermarks start over), and store ``history``, in one transaction; returns the messages of
        this model dropped, or ``None`` when the stored history is no longer ``known`` (another process did it)."""
        with conn:
            conn.execute("BEGIN IMMEDIATE")
            if history_text(conn) != known:
                return None
            gone = [int(r[0]) for r in conn.execute(
                "SELECT DISTINCT message_id FROM chunks WHERE +model_fingerprint = ? AND message_id > ?", (self.fingerprint, int(parted)))]
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) SELECT 'complete_stamp:' || f, lower(hex(randomblob(8))) FROM"
                " (SELECT DISTINCT model_fingerprint AS f FROM chunks INDEXED BY chunks_by_model"
                "  UNION SELECT substr(key, 16) FROM meta WHERE key LIKE 'complete\\_stamp:%' ESCAPE '\\' UNION SELECT ?)",
                (self.fingerprint,))
            conn.execute("DELETE FROM chunks WHERE message_id > ?", (int(parted),))
            conn.execute("DELETE FROM meta WHERE key LIKE 'complete\\_upto:%' ESCAPE '\\'")
            store_history(conn, history)
        return gone


def history_text(conn: sqlite3.Connection) -> str | None:
    """The stored :mod:`state_history` of the file ``conn`` reads, as its JSON text (``None`` before any)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_HISTORY_KEY,)).fetchone()
    return row[0] if row else None


def store_history(conn: sqlite3.Connection, history: state_history.History) -> None:
    """Store ``history`` as the state of state.db the file ``conn`` writes was learned from (inside its write transaction)."""
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (_HISTORY_KEY, state_history.encode(history)))


def _marks_without(stored: Any, sessions: AbstractSet[str]) -> str:
    """The stored marks (JSON text) without those of ``sessions``; ``"{}"`` when they do not read as an object."""
    try:
        marks = json.loads(stored) if isinstance(stored, str) else None
    except (ValueError, RecursionError):
        marks = None
    if not isinstance(marks, dict):
        return "{}"
    return json.dumps({sid: upto for sid, upto in marks.items() if sid not in sessions})
