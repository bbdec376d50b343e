"""IO shell: reads of Hermes' full-text indexes (``messages_fts``, ``messages_fts_trigram``).

Read-only. Every value is an SQL parameter; the only identifiers put into SQL are the two table names, from
:data:`TABLES` (never from input). A damaged index raises ``sqlite3.DatabaseError`` ("database disk image is
malformed"); ``lexical`` catches it and searches by substring.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import conversations, session_rows, state, store, stored_text
from .query import fts_quote
from .ranking import PER_CONVERSATION_SESSIONS, Stats
from .records import Scope

logger = logging.getLogger(__name__)

#: The FTS tables Hermes keeps, by the short name this module takes.
TABLES = {"words": "messages_fts", "trigram": "messages_fts_trigram"}
_DF_TTL_S = 600.0

# Rows a search never ranks: the answers of the recall tools themselves (``store.RECALL_TOOLS``); their
# calls are left out of the scored text by ``store``.
_NOT_ECHO = "NOT (m.role = 'tool' AND COALESCE(m.tool_name, '') IN (SELECT value FROM json_each(?)))"
# Nor Hermes' own user rows for the model (``stored_text``): a note to it, and a /skill turn, whose body Hermes' index
# holds but whose text here is ``/name instruction``. As candidates they would take a session's places (its best few
# rows by the index's rank) from the messages that match, then score nothing. The role is tested first: only a user
# row's content is read.
_NOT_SCAFFOLD = f"NOT {stored_text.SKILL_ROW_SQL} AND NOT {stored_text.NOTE_ROW_SQL}"


def _varints(blob: bytes) -> list[int]:
    """SQLite's big-endian varints, as FTS5 stores its averages record."""
    out, i = [], 0
    while i < len(blob):
        value = 0
        for n in range(9):
            byte = blob[i]
            i += 1
            if n == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def stats(conn: sqlite3.Connection, space: str) -> Stats:
    """Rows and mean row length of one index, from FTS5's averages record. Raises ``sqlite3.DatabaseError``."""
    row = conn.execute(f"SELECT block FROM {TABLES[space]}_data WHERE id = 1").fetchone()
    values = _varints(bytes(row[0])) if row and row[0] else []
    rows = values[0] if values else 0
    tokens = values[1] if len(values) > 1 else 0
    return Stats(rows, tokens / rows if rows else 1.0)


def _kept(key: tuple[str, str, str], now: float) -> int | None:
    """The count kept under ``key`` (database, index, term) if it is under ten minutes old, else ``None``."""
    counts = state.cache("term_counts")
    with counts.lock:
        held = counts.data.get(key)
    return held[0] if held is not None and held[1] > now else None


def _keep(key: tuple[str, str, str], value: int, now: float) -> None:
    """Keep ``value`` under ``key`` for ten minutes (all dropped past 50,000 kept). A count a little out of date
    only weighs a term a little wrong; callers never keep "no row" (it would keep the term from picking
    candidates after the next message holds it)."""
    counts = state.cache("term_counts")
    with counts.lock:
        if len(counts.data) > 50_000:
            counts.data.clear()
        counts.data[key] = (value, now + _DF_TTL_S)


def _counted(conn: sqlite3.Connection, space: str, name: str, count: Callable[[], int]) -> int:
    """``count()``, kept under ``name`` in ``space`` of this database (:func:`_keep`; 0 is counted again)."""
    key, now = (_db_name(conn), space, name), time.monotonic()
    value = _kept(key, now)
    if value is None:
        value = count()
        if value:
            _keep(key, value, now)
    return value


def _db_name(conn: sqlite3.Connection) -> str:
    return str(conn.execute("PRAGMA database_list").fetchone()[2])


def _vocab(conn: sqlite3.Connection, space: str) -> str:
    name = f"phr_vocab_{space}"
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{name} USING fts5vocab(main, '{TABLES[space]}', 'row')")
    return f"temp.{name}"


def doc_frequencies(conn: sqlite3.Connection, space: str, terms: Iterable[str]) -> dict[str, int]:
    """Rows of the index holding each token (``fts5vocab``; cached). Raises ``sqlite3.DatabaseError``."""
    db, now = _db_name(conn), time.monotonic()
    out: dict[str, int] = {}
    missing = []
    for term in dict.fromkeys(terms):
        hit = _kept((db, space, term), now)
        if hit is None:
            missing.append(term)
        else:
            out[term] = hit
    if missing:
        vocab = _vocab(conn, space)
        for term in missing:
            row = conn.execute(f"SELECT doc FROM {vocab} WHERE term = ?", (term,)).fetchone()
            out[term] = int(row[0]) if row else 0
            if out[term]:  # "absent" is read again next time: a new message may hold it
                _keep((db, space, term), out[term], now)
    return out


def rows_up_to(conn: sqlite3.Connection, space: str, term: str, cap: int) -> int:
    """Rows of the index holding ``term``: the exact count when below ``cap``, else ``cap``.

    Reads at most ``cap`` entries, where :func:`doc_frequencies` reads a common trigram's whole list. Cached:
    an exact count as :func:`doc_frequencies` keeps it, a capped one as a lower bound. Raises
    ``sqlite3.DatabaseError``.
    """
    db, now = _db_name(conn), time.monotonic()
    exact = _kept((db, space, term), now)
    if exact is not None:
        return min(exact, cap)
    at_least = _kept((db, space, "at least:" + term), now)
    if at_least is not None and at_least >= cap:
        return cap
    value = count_matches(conn, space, fts_quote(term), cap)
    if value >= cap:
        _keep((db, space, "at least:" + term), value, now)
    elif value:  # "absent" is read again next time, as doc_frequencies does
        _keep((db, space, term), value, now)
    return value


def prefix_frequency(conn: sqlite3.Connection, space: str, prefix: str) -> int:
    """Rows holding a token that starts with ``prefix``, summed over tokens (an upper bound; cached): how
    common a 2-character CJK word is, from the trigram index."""

    def count() -> int:
        sql = f"SELECT COALESCE(sum(doc), 0) FROM {_vocab(conn, space)} WHERE term >= ? AND term < ?"
        return int(conn.execute(sql, (prefix, prefix + "\U0010ffff")).fetchone()[0] or 0)

    return _counted(conn, space, "prefix:" + prefix, count)


#: CJK text: kana, the unified ideographs and Hangul (the trigrams between these bounds, as FTS5 sorts them).
_CJK = ("\u3040", "\ud7b0")


_CJK_GLOB = f"*[{_CJK[0]}-{chr(ord(_CJK[1]) - 1)}]*"  # a text holding CJK, as GLOB tests it


def holds_cjk(conn: sqlite3.Connection) -> bool:
    """Whether the trigram index may hold CJK text (a yes or a no kept for ten minutes).

    A vocabulary seek first: it reads the whole list of the trigram sorted just before CJK (a progress bar's
    ``━━━`` in every tool log of the state.db). A no is kept with the highest message id it covers, and later
    searches look for CJK only in the text of newer messages (Hermes adds messages, it does not edit them): what
    they cost grows with what was written since, not with the state.db. The no holds only for the file and history
    it was read of (:func:`_no_cjk_witness`: another file, or one put back from an older copy whose ids were handed
    out again, is asked in full), and is never kept during a chunked rebuild (rows not indexed yet are indexed
    later, below the id it would be kept up to).
    """
    db, now = _db_name(conn), time.monotonic()
    if _kept((db, "trigram", "holds:cjk"), now):
        return True
    top, upto = store.max_message_id(conn), _kept((db, "trigram", "no cjk up to"), now)
    if upto is not None and (upto > top or _kept((db, "trigram", "no cjk witness"), now) != _no_cjk_witness(conn, db, upto)):
        upto = None  # another file or history at the same path: asked in full
    if upto is not None and upto == top:
        return False
    if upto is not None:
        found = conn.execute("SELECT 1 FROM messages WHERE id > ? AND id <= ? AND content GLOB ? LIMIT 1",
                             (upto, top, _CJK_GLOB)).fetchone() is not None
    else:
        sql = f"SELECT 1 FROM {_vocab(conn, 'trigram')} WHERE term >= ? AND term < ? LIMIT 1"
        found = conn.execute(sql, _CJK).fetchone() is not None
    if found:
        _keep((db, "trigram", "holds:cjk"), 1, now)
    elif store.layout_of(conn).rebuild is None:
        _keep((db, "trigram", "no cjk witness"), _no_cjk_witness(conn, db, top), now)
        _keep((db, "trigram", "no cjk up to"), top, now)
    return found


def _no_cjk_witness(conn: sqlite3.Connection, db: str, upto: int) -> int:
    """What tells the state.db a no of :func:`holds_cjk` was read of: the file (``session_rows.db_fingerprint``) and
    message ``upto``'s session and time (a copy put back in place hands its ids out again to other messages)."""
    row = conn.execute("SELECT session_id, timestamp FROM messages WHERE id = ?", (upto,)).fetchone()
    return hash((session_rows.db_fingerprint(conn, db), tuple(row) if row else None))


def count_matches(conn: sqlite3.Connection, space: str, match: str, cap: int) -> int:
    """Rows matching ``match`` in the whole index, counted up to ``cap``."""
    table = TABLES[space]
    sql = f"SELECT count(*) FROM (SELECT rowid FROM {table} WHERE {table} MATCH ? LIMIT ?)"
    return int(conn.execute(sql, (match, cap)).fetchone()[0])


def phrase_frequency(conn: sqlite3.Connection, space: str, match: str, cap: int) -> int:
    """Rows matching a phrase expression, up to ``cap`` (kept like token counts: "no row" is never kept)."""
    return _counted(conn, space, "match:" + match, lambda: count_matches(conn, space, match, cap))


def row_filters(conn: sqlite3.Connection, scope: Scope, shown: str, shown_params: Sequence[Any] = ()
                ) -> tuple[str, list[Any]]:
    """The conditions every candidate row meets: shown by Hermes (the SQL condition ``shown`` and its parameters:
    ``store.visible`` for a scan, ``store.visible_of`` for rows asked a batch at a time), admitted by the search's
    filters, not a recall, not Hermes' own user rows for the model, not a live row of the asking session
    (:func:`_live_left_out`)."""
    filter_sql, filter_params = scope.filters.sql(display=store.layout_of(conn).display)
    live_sql, live_params = _live_left_out(scope)
    clause = f"{shown} AND {filter_sql} AND {_NOT_ECHO} AND {_NOT_SCAFFOLD}{live_sql}"
    return clause, [*shown_params, *filter_params, json.dumps(list(store.RECALL_TOOLS)), *live_params]


def _live_left_out(scope: Scope) -> tuple[str, list[Any]]:
    """``(" AND …", params)`` leaving out the asking session's live rows when a compaction archived some of it in
    place (only the archive is searched: the live rows are its context), through Hermes' (session_id, active)
    index, which reads no row; ``("", [])`` otherwise."""
    if not scope.live:
        return "", []
    return (" AND NOT (m.session_id = ? AND m.id IN (SELECT l.id FROM messages l WHERE l.session_id = ?"
            " AND l.active = 1))", [scope.live, scope.live])


#: Rows a candidate pick checks at first (:func:`_first_passing`); each later batch is twice the last.
CHECK_BATCH = 64


def _early_filters(scope: Scope) -> tuple[str, list[Any]]:
    """The conditions of :func:`row_filters` a row's first columns answer (the roles it may be stored with,
    :func:`stored_text.stored_roles`), and the asking session's live rows left out (:func:`_live_left_out`): none
    reads past a row's content. A row's visibility, time and tool name lie past it, in a long log's overflow pages,
    and are checked by :func:`_first_passing`; so is whether a user row reads as ``tool``."""
    roles = stored_text.stored_roles(scope.filters.roles)
    live_sql, live_params = _live_left_out(scope)
    return "m.role IN ({}){}".format(", ".join("?" * len(roles)), live_sql), [*roles, *live_params]


def _passing(conn: sqlite3.Connection, scope: Scope, ids: Sequence[int]) -> set[int]:
    """Those of the message ids ``ids`` that meet every condition of :func:`row_filters` and are no copy of the asking
    session's context (``store.context_copies_sql``: asked of these rows alone, never of a scan's). A large clock
    tick's copies are told apart once for every check of the search (``store.ticks_of``: a tick of T rows sorted
    for each batch cost T for each of the search's checks)."""
    where, params = row_filters(conn, scope, *store.visible_of(conn, ids))
    copies, copies_params = store.context_copies_sql(scope)
    sql = (f"WITH asked(id) AS (SELECT value FROM json_each(?)) SELECT m.id FROM messages m"
           f" WHERE m.id IN (SELECT id FROM asked) AND {where} AND NOT {copies}")
    return {int(r[0]) for r in conn.execute(sql, [json.dumps([int(i) for i in ids]), *params, *copies_params])}


ROOTS_CHUNK = 1_024  # matches a pick looks up first (then four times as many as so far, if it walks past them)


class _Ordered:
    """``(message id, session id)`` of the matches ``ids`` (best first) that are the scope's and meet
    :func:`_early_filters`, in order, looked up in ``messages`` as a pick reaches them: the first ``ROOTS_CHUNK``, then
    four times as many as looked up so far. A pick keeps its ``limit`` within the first few hundred of thousands of
    matches: the others' rows are never read; where few matches are the scope's the lookups reach at most five times
    as far as the pick needs. ``sessions``: each match's session, known already (a join's: the scope's matches alone).

    With ``keyed``, the conversation each row stands for (``conversations.result_keys``: a branch's own rows its own,
    its copies of the session it left that one's) is asked with each lookup, and learnt into ``keyed``:
    a session branched from is read once a lookup: three times for the 12,000 matches a pick may have
    (``lexical.RANK_BUDGET``), not once for every ``ROOTS_CHUNK`` of them."""

    def __init__(self, conn: sqlite3.Connection, scope: Scope, ids: Sequence[int], sessions: Mapping[int, str] | None = None,
                 keyed: dict[int, str] | None = None) -> None:
        self._conn, self._scope, self._ids, self._sessions, self._asked = conn, scope, ids, sessions, 0
        self._rows: list[tuple[int, str]] = []
        if sessions is None:  # the lookup's statement, the same for every chunk
            cheap, self._params = _early_filters(scope)
            self._sql = f"SELECT m.id, m.session_id FROM messages m WHERE m.id IN (SELECT value FROM json_each(?)) AND {cheap}"
        self.keyed = keyed

    def has(self, index: int) -> bool:
        """Whether there is a row ``index``, looking matches up until there is or none is left."""
        while index >= len(self._rows) and self._asked < len(self._ids):
            asked = self._ids[self._asked : max(5 * self._asked, ROOTS_CHUNK)]
            self._asked += len(asked)
            if self._sessions is not None:
                rows = [(m, self._sessions[m]) for m in asked]
            else:
                sessions = dict(self._conn.execute(self._sql, [json.dumps(asked), *self._params]).fetchall())
                rows = [(m, sessions[m]) for m in asked if sessions.get(m) in self._scope.id_set]
            if self.keyed is not None:
                unkeyed = {m: sid for m, sid in rows if m not in self.keyed}
                self.keyed.update(conversations.result_keys(self._conn, unkeyed)[0] if unkeyed else {})
            self._rows += rows
        return index < len(self._rows)

    def __getitem__(self, index: int) -> tuple[int, str]:
        return self._rows[index]


def _first_passing(conn: sqlite3.Connection, scope: Scope, ordered: _Ordered | Sequence[tuple[int, str]], *, per_session: int,
                   limit: int) -> list[tuple[int, str]]:
    """Of ``ordered`` (``(message id, session id)``, best first, each meeting :func:`_early_filters`; or an
    :class:`_Ordered` looking them up as the walk reaches them), the rows meeting
    every condition of :func:`row_filters`, at most ``per_session`` of a session and ``limit`` in all, in order: what
    checking every row, keeping each session's best ``per_session`` and the best ``limit`` of those gives. With
    conversations keyed (:class:`_Ordered`), a conversation keeps at most ``PER_CONVERSATION_SESSIONS`` sessions' worth.

    Rows are checked a batch at a time (``CHECK_BATCH``, then twice as many), in order, only those a session may
    still keep: a session's rows past its best are never read (a 100 KB log's overflow pages, for its visibility),
    but for as many more as of its rows failed, so a session whose rows keep failing (a ``since`` after them all)
    has twice as many checked each time, not ``per_session``, and the rows are walked a few times, not once for
    every ``per_session`` of them. Near the limit a check reaches past what is left of it by ``spare`` rows, doubled
    at each such check: rows that fail after the limit is all but reached take a few queries, not one each."""
    if not isinstance(ordered, _Ordered):
        ordered = _Ordered(conn, scope, [m for m, _ in ordered], dict(ordered))
    keys = ordered.keyed
    out: list[tuple[int, str]] = []
    # Counts by session and by ("\x00", conversation); without ``keys`` each session is its own conversation.
    taken: dict[Any, int] = {}
    failed: dict[Any, int] = {}
    per_conv = per_session * (PER_CONVERSATION_SESSIONS if keys is not None else 1)
    conversation = (lambda k: ("\x00", keys[ordered[k][0]])) if keys is not None else lambda k: ("\x00", ordered[k][1])
    verdict: dict[int, bool] = {}
    i, batch, spare = 0, CHECK_BATCH, 0
    while len(out) < limit and ordered.has(i):
        # The rows to check: those the sessions may keep if every row not checked yet passes (and as many more as
        # failed), as far as they fill what is left of the limit and ``spare`` more (or a batch).
        need: list[tuple[int, str, Any]] = []
        planned, room, k = dict(taken), limit - len(out), i
        while ordered.has(k) and room > -spare and len(need) < batch:
            mid, sid = ordered[k]
            conv = conversation(k)
            if (planned.get(sid, 0) < per_session + failed.get(sid, 0) and verdict.get(mid, True)
                    and planned.get(conv, 0) < per_conv + failed.get(conv, 0)):
                planned[sid] = planned.get(sid, 0) + 1
                planned[conv] = planned.get(conv, 0) + 1
                room -= 1
                if mid not in verdict:
                    need.append((mid, sid, conv))
            k += 1
        if room <= -spare:  # stopped by the limit: the next check near it reaches further
            spare = max(1, 2 * spare)
        if need:
            passed = _passing(conn, scope, [mid for mid, _, _ in need])
            for mid, sid, conv in need:
                verdict[mid] = mid in passed
                failed[sid] = failed.get(sid, 0) + (mid not in passed)
                failed[conv] = failed.get(conv, 0) + (mid not in passed)
        # Keep rows in order up to the first one a session may keep that is not checked yet.
        while len(out) < limit and ordered.has(i):
            mid, sid = ordered[i]
            conv = conversation(i)
            if taken.get(sid, 0) < per_session and taken.get(conv, 0) < per_conv:
                if mid not in verdict:
                    break
                if verdict[mid]:
                    out.append((mid, sid))
                    taken[sid] = taken.get(sid, 0) + 1
                    taken[conv] = taken.get(conv, 0) + 1
            i += 1
        batch *= 2
    return out


@dataclass(frozen=True)
class Near:
    """Which message ids may belong to a scope, tested inside SQLite before a match is ranked or looked up.

    Byte ``i`` of ``mask`` is 1 when id ``i`` lies in one of the scope's sessions' id ranges; every id above
    ``top`` passes too. A superset: the scope is still checked on each row that passes.
    """

    mask: bytes
    top: int
    covered: int = 0  # ids up to ``top`` it lets through

    def mostly(self, scope: Scope) -> bool:
        """Whether most ids it lets through are ``scope``'s messages (its sessions' ranges hold few of others')."""
        return 2 * scope.messages >= self.covered


def session_candidates(
    conn: sqlite3.Connection,
    space: str,
    match: str,
    scope: Scope,
    *,
    per_session: int,
    limit: int,
    near: Near | None = None,
    newest: bool = False,
    keyed: dict[int, str] | None = None,
) -> list[tuple[int, str]]:
    """The scope's live messages matching ``match``, at most ``per_session`` per session and ``limit`` in all:
    ``[(message id, session id)]``, best first.

    FTS5's ``bm25()`` orders them (a first cut: the caller re-scores); with ``newest``, the newest first, for
    expressions whose matches are too many to rank each (``lexical.glued_rows``). ``near`` passes over the
    matches no session of the scope can hold inside the index. Where most ids it lets through are the scope's, the
    index ranks the matches and they are looked up in ``messages`` only as far as the pick reaches (:class:`_Ordered`);
    else (no filter yet, or a loose one) a join to ``messages`` leaves other projects' matches out before any is ranked.
    Raises ``sqlite3.OperationalError`` on an FTS syntax error, ``sqlite3.DatabaseError`` on a damaged index.
    """
    table = TABLES[space]
    # The id filter reads only the FTS row: a match no session of the scope can hold is never ranked.
    early = "" if near is None else f" AND ({table}.rowid > ? OR substr(?, {table}.rowid + 1, 1) = x'01')"
    params = (match,) if near is None else (match, near.top, near.mask)
    order = f"{table}.rowid DESC" if newest else f"bm25({table}), {table}.rowid"
    sessions = None
    if near is not None and near.mostly(scope):
        sql = f"SELECT rowid FROM {table} WHERE {table} MATCH ?{early} ORDER BY {order}"
        ids = [int(r[0]) for r in conn.execute(sql, params)]
    else:
        cheap, cheap_params = _early_filters(scope)
        sql = (f"SELECT m.id, m.session_id FROM {table} JOIN messages m ON m.id = {table}.rowid WHERE {table} MATCH ?"
               f"{early} AND {store.SCOPE_SQL} AND {cheap} ORDER BY {order}")
        sessions = {int(r[0]): r[1] for r in conn.execute(sql, [*params, scope.ids_json, *cheap_params])}
        ids = list(sessions)
    # A conversation keeps at most PER_CONVERSATION_SESSIONS sessions' worth (its compressions' and branches' copies of
    # its first turns score alike: hundreds would fill ``limit``, every other conversation left out; a branch's own rows
    # are its own conversation's); of copies scored alike the first said (ties in id order: the original first).
    # ``keyed``: the conversation of each row a pick asked before (another index's pick, kept for the search's
    # results): a session branched from is read by the first only.
    return _first_passing(conn, scope, _Ordered(conn, scope, ids, sessions, keyed={} if keyed is None else keyed),
                          per_session=per_session, limit=limit)


def range_matches(
    conn: sqlite3.Connection, space: str, match: str, scope: Scope, sessions: Sequence[str], low: int, high: int,
    limit: int, *, per_session: int,
) -> list[tuple[int, str]]:
    """Live messages of ``sessions`` matching ``match`` with ids in ``[low, high]``, each session's ``per_session``
    shortest (in the index's tokens; the newer of two alike), at most ``limit``: ``[(message id, session id)]``.

    ``scope`` supplies the filters. FTS5 seeks each term's list to the range, so the cost grows with the
    matches inside it. No ``bm25()``: it would count a common term's rows in the whole index on every call. Only
    the rows a session may keep are read past their first columns (:func:`_first_passing`).
    """
    table = TABLES[space]
    cheap, cheap_params = _early_filters(scope)
    sql = f"""
        SELECT m.id, m.session_id FROM {table} JOIN messages m ON m.id = {table}.rowid
        WHERE {table} MATCH ? AND {table}.rowid >= ? AND {table}.rowid <= ?
          AND {cheap} AND +m.session_id IN (SELECT value FROM json_each(?))
    """
    rows = [(int(r[0]), r[1]) for r in conn.execute(sql, [match, low, high, *cheap_params, json.dumps(list(sessions))])]
    lengths = doc_lengths(conn, space, [mid for mid, _ in rows])
    rows.sort(key=lambda r: (lengths.get(r[0], 1 << 30), -r[0]))
    return _first_passing(conn, scope, rows, per_session=per_session, limit=limit)


def doc_lengths(conn: sqlite3.Connection, space: str, ids: Sequence[int]) -> dict[int, int]:
    """Each row's length in tokens as FTS5 counted it (``<table>_docsize``); rows not indexed are left out."""
    if not ids:
        return {}
    sql = f"SELECT id, sz FROM {TABLES[space]}_docsize WHERE id IN (SELECT value FROM json_each(?))"
    out = {}
    for rowid, blob in conn.execute(sql, (json.dumps([int(i) for i in ids]),)):
        sizes = _varints(bytes(blob)) if blob else []
        out[int(rowid)] = sizes[0] if sizes else 0
    return out
