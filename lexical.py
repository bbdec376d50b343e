"""The keyword leg: which of the project's messages to read, then BM25 (``ranking.py``) over them.

Hermes' own indexes answer "which rows hold these words"; the ranking is ours (a word and its plural are
one term). The work per search is bounded however big state.db grows, and bounds apply per session:

1. **Selective terms** (the rarest, together matching at most ``RANK_BUDGET`` rows of the whole index) pick
   candidates anywhere in the project, at most ``PER_SESSION`` per session (so one busy session cannot hide
   the others).
2. **Common terms** score every candidate but pick none: when they are all the query has, or the selective
   ones found fewer than ``want_sessions`` conversations, the project's sessions are read newest first through
   FTS5 range seeks until enough matched (within ``SCAN_MESSAGES``; the answer says when that ran out).
3. **Two-character CJK words** have no trigram: an escaped ``LIKE`` over the project's sessions, newest first.
4. **A damaged FTS index** (``database disk image is malformed``) does not fail the search: the project's
   messages are searched by ``LIKE`` instead (bounded, newest first) and the answer says so.

Every candidate is then scored on every term of the query.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import conversations, errors, fts, session_rows, state, store, substring, unicode61
from .query import ParsedQuery, Unit, cjk_trigrams, fts_quote, stem_variants
from .ranking import Hit, Scorer, SessionRank, Stats, Term, demote_earlier, rank_sessions, score_texts
from .records import MessageRow, Scope

logger = logging.getLogger(__name__)

RANK_BUDGET = 12_000  # index rows the selective terms may match (whole state.db)
GLUED_BOUND = 4 * RANK_BUDGET  # rows of a word's rarest trigram beyond which it is not looked for inside CJK runs
GLUED_GRAMS = 16  # trigrams of a word counted for that bound (a word of up to 18 characters: all of them)
PER_SESSION = 3  # candidates kept per session before re-scoring (the messages a session's score counts)
CANDIDATE_ROWS = 600  # candidates kept per index (200 sessions)
LIKE_PER_SESSION = 10  # a session's newest matches a substring search keeps (CANDIDATE_ROWS of them: 60 sessions)
SCAN_MESSAGES = 60_000  # message ids a newest-first scan of the project may cover
SCAN_BATCH = 4_000  # message ids one range query of that scan covers at most
SCAN_GAP = 64  # sessions are read together when no more ids than this lie between them
SCAN_QUERIES = 150  # queries a newest-first scan may run
SCAN_ROWS = 5_000  # matching rows one of its queries may return
SUBSTRING_MESSAGES = 4 * SCAN_MESSAGES  # message ids a substring search of the project's newest sessions may cover
NEAR_SLACK = 20_000  # new message ids a scope's id filter lets through before it is built again
NEAR_SCOPES = 4  # scopes whose id filters are kept per state.db (a gateway answers several projects)

TOOL_SCAN_MESSAGES = 5_000  # message ids of the project's newest sessions read by substring for tool output
GAP_SCAN_MESSAGES = 10_000  # newest ids not yet indexed (a rebuild in progress) read by substring

_LIKE_ANSWER = ("this answer comes from a plain substring search of the project's newest messages instead "
                "(slower, less well ranked)")
#: What to run to rebuild a damaged index: Hermes 0.21's supported command (it takes Hermes' rebuild lock and
#: keeps its markers), or on 0.19, which has none, FTS5's own rebuild.
_REPAIR = {
    True: "Repair it with `hermes sessions optimize-storage` (close the other Hermes windows first; it resumes if "
          "interrupted).",
    False: "Hermes rebuilds the index with: sqlite3 <HERMES_HOME>/state.db \"INSERT INTO messages_fts(messages_fts) "
           "VALUES('rebuild'); INSERT INTO messages_fts_trigram(messages_fts_trigram) VALUES('rebuild')\" "
           "(close Hermes first).",
}


def damaged_note(error: Any, optimize_storage: bool) -> str:
    """What the answer says when Hermes' full-text index cannot be read (the repair this line of Hermes supports)."""
    return f"Hermes' full-text index of state.db is damaged ({error}); {_LIKE_ANSWER}. {_REPAIR[optimize_storage]}"


STALE_NOTE = ("Hermes marked its full-text index of state.db as damaged and searches without it until it rebuilds "
              f"it, which it does when it next opens state.db with no other Hermes process running; {_LIKE_ANSWER}.")
SCAN_NOTE = ("Words this common were looked for only in the project's newest sessions, as far as a fixed budget "
             f"reached (at most {SCAN_MESSAGES:,} message ids of state.db): older ones may hold more matches.")
LIKE_NOTE = ("Words of the question that Hermes' index cannot look up (two CJK characters, or text in tool output "
             "past what it indexes) were looked for by substring in the project's newest messages only: older ones "
             "may hold more matches.")
SUBSTRING_CUT_NOTE = ("The substring search read only the project's newest sessions, as far as its limits reached "
                      f"(at most {SUBSTRING_MESSAGES:,} message ids of state.db, {2 * CANDIDATE_ROWS:,} matching "
                      "messages): older ones may hold more matches.")
REBUILD_NOTE = ("Hermes is rebuilding its full-text index (`hermes sessions optimize-storage`, {percent}% done): "
                "messages not indexed yet were searched by substring{cut}.")


@dataclass(frozen=True)
class KeywordAnswer:
    """What the keyword leg found.

    ``sessions``: one per session, best first (BM25 of its best messages). ``rows``: the candidates' messages.
    ``strategy``: the paths taken, for diagnostics. ``notes``: why the answer is degraded, if it is.
    ``weight``: the sum of the query's terms' idf (what a message matching every term once would score).
    ``hits`` and ``scorer``: every scored message and its scorer (set in every answer of :func:`search`), for
    ``recency.current_first``.
    """

    sessions: tuple[SessionRank, ...]
    rows: dict[int, MessageRow] = field(default_factory=dict)
    strategy: str = "none"
    notes: tuple[str, ...] = ()
    weight: float = 0.0
    hits: tuple[Hit, ...] = ()
    scorer: Scorer | None = None
    keys: Mapping[int, str] = field(default_factory=dict)  # conversations of candidates the pick asked (result_keys)

    @property
    def note(self) -> str:
        """The notes as the answer's one ``keyword_note``: each once, in order (``""`` when none)."""
        return " ".join(dict.fromkeys(n for n in self.notes if n))

    @property
    def strength(self) -> float:
        """How much of the query the best session explains: its score over ``weight`` (0 when nothing matched)."""
        return self.sessions[0].score / self.weight if self.sessions and self.weight > 0 else 0.0


@dataclass
class _Plan:
    """The query's terms, split into what picks candidates and what only scores."""

    terms: list[Term]
    selective: dict[str, list[str]]  # space -> FTS expressions that pick candidates
    common: dict[str, list[str]]  # space -> FTS expressions left to the newest-first scan
    like: list[str]  # needles found by LIKE (2-character CJK words, no trigram index)
    needles: dict[str, list[str]]  # space -> substrings covering its terms (for LIKE reads of one session)
    glued: list[str] = field(default_factory=list)  # trigram expressions for words run into CJK text


def _plan(conn: sqlite3.Connection, parsed: ParsedQuery, trigram: bool) -> _Plan:
    """Turn units into scored terms and candidate expressions (reads term counts)."""
    terms: list[Term] = []
    picks: dict[str, list[tuple[int, str]]] = {"words": [], "trigram": []}
    like: list[str] = []
    words = [u for u in parsed.units if u.kind == "word"]
    forms_of = {u.text: stem_variants(u.text) for u in words}
    counts = fts.doc_frequencies(conn, "words", [f for forms in forms_of.values() for f in forms])
    glued: list[str] = []
    glue = trigram and bool(words) and fts.holds_cjk(conn)
    for unit in words:
        present = [f for f in forms_of[unit.text] if counts.get(f)] or forms_of[unit.text][:1]
        df = sum(counts.get(f, 0) for f in present)
        inside = glued_rows(conn, forms_of[unit.text], df) if glue else (0, "")
        if inside[0]:
            glued.append(inside[1])
            present = list(dict.fromkeys(present + forms_of[unit.text]))
        terms.append(Term("word", tuple(present), df or inside[0]))
        if df:
            picks["words"].append((df, " OR ".join(fts_quote(f) for f in present)))
    for unit in parsed.units:
        if unit.kind == "phrase":
            _plan_phrase(conn, unit, terms, picks, counts)
        elif unit.kind == "cjk":
            grams = cjk_trigrams(unit.text)
            if not trigram:
                terms.append(Term("gram", (unit.text.lower(),), 0))
                like.append(unit.text)
            elif grams:
                gram_counts = fts.doc_frequencies(conn, "trigram", grams)
                for gram in grams:
                    terms.append(Term("gram", (gram.lower(),), gram_counts.get(gram, 0)))
                    if gram_counts.get(gram):
                        picks["trigram"].append((gram_counts[gram], fts_quote(gram)))
            else:  # two characters: no trigram holds them
                terms.append(Term("gram", (unit.text.lower(),), fts.prefix_frequency(conn, "trigram", unit.text)))
                like.append(unit.text)
    selective: dict[str, list[str]] = {}
    common: dict[str, list[str]] = {}
    for space, pairs in picks.items():
        pairs.sort()
        total = 0
        for df, expr in pairs:
            total += df
            if total <= RANK_BUDGET or not selective.get(space) and df <= RANK_BUDGET:
                selective.setdefault(space, []).append(expr)
            else:
                common.setdefault(space, []).append(expr)
    needles = {
        # Every form of a word (``query`` is no substring of ``queries``); a phrase's first token.
        "words": [f for t in terms if t.kind == "word" for f in t.forms] + [t.forms[0] for t in terms if t.kind == "phrase" and t.forms],
        "trigram": [t.forms[0] for t in terms if t.kind == "gram"],
    }
    return _Plan(terms, selective, common, like, needles, glued)


def glued_rows(conn: sqlite3.Connection, forms: Sequence[str], df: int) -> tuple[int, str]:
    """Whether a word may also sit inside a longer unicode61 token, run into CJK text ("用redis缓存"), which
    only the trigram index holds.

    Returns ``(rows holding it as a substring, trigram expression)`` when more rows hold the substring than
    the word (and at most ``RANK_BUDGET``), else ``(0, "")``; also ``(0, "")`` for words shorter than 3
    characters or not ASCII letters and digits.
    """
    if df >= RANK_BUDGET:  # the substring is in at least the word's rows: never df < rows <= RANK_BUDGET
        return 0, ""
    shortest = [f for f in forms if len(f) >= 3 and f.isascii() and f.isalnum()]
    shortest = [f for f in shortest if not any(g != f and g in f for g in shortest)]
    if not shortest:
        return 0, ""
    # The rarest trigram bounds the rows holding a form as a substring. Two things are decided: is some trigram
    # under GLUED_BOUND (else too common to check cheaply), and is some trigram in no more rows than the word
    # (then nothing lies beyond it)? So trigrams are counted up to GLUED_BOUND until one is under it, then only
    # up to df + 1. Middle trigrams first: a word's first and last ones are the prefixes and suffixes many words
    # share. A long word (a hash) is bounded by GLUED_GRAMS evenly spaced trigrams, not all.
    grams = list(dict.fromkeys(f[i : i + 3] for f in shortest for i in range(len(f) - 2)))
    step = max(len(grams) / GLUED_GRAMS, 1.0)
    chosen = [grams[int(i * step)] for i in range(min(len(grams), GLUED_GRAMS))]
    middle = (len(chosen) - 1) / 2
    cap, common = GLUED_BOUND + 1, True
    for gram in (chosen[i] for i in sorted(range(len(chosen)), key=lambda i: abs(i - middle))):
        rows = fts.rows_up_to(conn, "trigram", gram, cap)
        if rows <= df:  # nothing beyond the word itself
            return 0, ""
        if rows <= GLUED_BOUND:
            common, cap = False, df + 1
    if common:  # too common to check cheaply
        return 0, ""
    expr = " OR ".join(fts_quote(f) for f in shortest)
    rows = fts.phrase_frequency(conn, "trigram", expr, RANK_BUDGET + 1)
    return (rows, expr) if df < rows <= RANK_BUDGET else (0, "")


def _plan_phrase(
    conn: sqlite3.Connection, unit: Unit, terms: list[Term], picks: dict[str, list[tuple[int, str]]], counts: dict[str, int]
) -> None:
    tokens = tuple(unicode61.tokens(unit.text))
    if not tokens:
        return
    if len(tokens) == 1:
        df = counts.get(tokens[0])
        if df is None:
            df = fts.doc_frequencies(conn, "words", tokens)[tokens[0]]
        terms.append(Term("word", tokens, df))
        if df:
            picks["words"].append((df, fts_quote(tokens[0])))
        return
    expr = fts_quote(" ".join(tokens))
    df = fts.phrase_frequency(conn, "words", expr, RANK_BUDGET + 1)
    terms.append(Term("phrase", tokens, df))
    if df:
        picks["words"].append((df, expr))


class _Ranges:
    """Per state.db: sessions' lowest and highest message ids, kept current past a watermark.

    A search reads the ranges of its scope's sessions not read yet (from Hermes' per-session index, no
    message read), the warm-up those of every session; then only ids past the watermark are read. Message
    ids only grow and never change session; a deleted message leaves a range a little wide (one more seek).
    A file restored in place is told by the watermark's message: it must still exist, in the same session.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # db_key -> (file identity, watermark, session -> (lowest, highest), session of the watermark's message,
        # the sessions whose ranges are read (None: every session))
        self._entries: dict[str, tuple[tuple[Any, ...], int, dict[str, tuple[int, int]], str | None, set[str] | None]] = (
            state.cache("session_ranges").data)
        # db_key -> [(scope's sessions, filter)] of the file the entry above holds, the most recent last
        self._near: dict[str, list[tuple[tuple[str, ...], fts.Near]]] = state.cache("scope_filters").data

    def _current(self, conn: sqlite3.Connection, db_key: str, sessions: Sequence[str] | None, *,
                 build: bool = True) -> tuple[int, dict[str, tuple[int, int]]] | None:
        """``(watermark, ranges)`` of ``db_key`` holding at least ``sessions`` (``None``: every session), brought
        up to ``conn``'s view of state.db; lock held. ``None`` without ``build`` when a range would have to be
        read (never read, or another file: what was kept is dropped).
        """
        identity = session_rows.db_fingerprint(conn, db_key)
        top = store.max_message_id(conn)
        held = self._entries.get(db_key)
        if held is not None and (held[0] != identity or top < held[1] or (held[1] and _owner(conn, held[1]) != held[3])):
            held = None  # another file at the same path, or the same file restored from a copy
            self._entries.pop(db_key, None)
            self._near.pop(db_key, None)
        mark, ranges, covered = (held[1], held[2], held[4]) if held is not None else (0, {}, set())
        unread = [] if covered is None else [sid for sid in (sessions or ()) if sid not in covered]
        if (unread or sessions is None and covered is not None) and not build:
            return None
        if held is not None and top > mark:
            # Unary + keeps SQLite on the rowid range past the mark instead of scanning the session index.
            for sid, low, high in conn.execute(
                    "SELECT session_id, min(id), max(id) FROM messages WHERE id > ? GROUP BY +session_id", (mark,)):
                if covered is None or sid in covered:  # another session's is read in full when it is asked for
                    _widen(ranges, sid, int(low), int(high))
        read: list[Any] = []
        if sessions is None and covered is not None:
            # Hermes' (session_id, timestamp) index covers the query (no message is read).
            read = conn.execute("SELECT session_id, min(id), max(id) FROM messages GROUP BY session_id").fetchall()
            covered = None
        elif unread and covered is not None:
            read = conn.execute("SELECT session_id, min(id), max(id) FROM messages WHERE session_id IN "
                                "(SELECT value FROM json_each(?)) GROUP BY session_id", (json.dumps(unread),)).fetchall()
            covered.update(unread)
        for sid, low, high in read:
            _widen(ranges, sid, int(low), int(high))
        if held is None or top > mark or read or unread:
            self._entries[db_key] = (identity, top, ranges, _owner(conn, top), covered)
        return top, ranges

    def read(self, conn: sqlite3.Connection, db_key: str) -> None:
        """Read every session's range now (the warm-up) for :meth:`near`. Raises ``sqlite3.Error``."""
        with self._lock:
            self._current(conn, db_key, None)

    def newest_first(self, conn: sqlite3.Connection, db_key: str, session_ids: Sequence[str]) -> list[tuple[str, int, int]]:
        """``(session id, lowest id, highest id)`` of those of ``session_ids`` that hold messages, newest first."""
        with self._lock:
            current = self._current(conn, db_key, session_ids)
        ranges = current[1] if current is not None else {}
        out = [(sid, *ranges[sid]) for sid in session_ids if sid in ranges]
        out.sort(key=lambda r: -r[2])
        return out

    def near(self, conn: sqlite3.Connection, db_key: str, session_ids: tuple[str, ...]) -> fts.Near | None:
        """Which message ids may belong to ``session_ids`` (:class:`fts.Near`), or ``None`` when their ranges are
        not at hand (not read yet, read for another file, or being read by another thread: a search never
        waits). The last ``NEAR_SCOPES`` filters are kept while state.db grew by at most ``NEAR_SLACK`` ids."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            current = self._current(conn, db_key, session_ids, build=False)
            if current is None:
                return None
            top, ranges = current
            kept = self._near.setdefault(db_key, [])  # dropped by _current with the ranges of another file
            for i, (sessions, near) in enumerate(kept):
                if sessions == session_ids and 0 <= top - near.top <= NEAR_SLACK:
                    kept.append(kept.pop(i))
                    return near
            mask = bytearray(top + 1)
            # A range read past top (a newer statement) is cut at top. Sessions written side by side, or resumed,
            # have overlapping ranges: merged first, each id is written once (not once per session around it).
            spans = ((s[0], min(s[1], top)) for s in map(ranges.get, session_ids) if s is not None and s[0] <= top)
            covered = 0
            for low, high in _merged(spans):
                mask[low : high + 1] = b"\x01" * (high - low + 1)
                covered += high - low + 1
            near = fts.Near(bytes(mask), top, covered)
            kept[:] = [k for k in kept if k[0] != session_ids][-(NEAR_SCOPES - 1):] + [(session_ids, near)]
            return near
        finally:
            self._lock.release()

    def invalidate(self) -> None:
        with self._lock:
            self._entries.clear()
            self._near.clear()


def _widen(ranges: dict[str, tuple[int, int]], sid: str, low: int, high: int) -> None:
    old = ranges.get(sid)
    ranges[sid] = (min(old[0], low), max(old[1], high)) if old else (low, high)


def _merged(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive ``(low, high)`` spans as the fewest disjoint ones covering the same ids, lowest first."""
    out: list[tuple[int, int]] = []
    for low, high in sorted(spans):
        if out and low <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], high))
        else:
            out.append((low, high))
    return out


def _owner(conn: sqlite3.Connection, message_id: int) -> str | None:
    """The session of message ``message_id`` (``None`` when there is none)."""
    row = conn.execute("SELECT session_id FROM messages WHERE id = ?", (message_id,)).fetchone()
    return None if row is None else str(row[0])


ranges = _Ranges()


def _scan(
    conn: sqlite3.Connection, space: str, match: str, needles: Sequence[str], scope: Scope,
    order: list[tuple[str, int, int]], want_sessions: int, found: dict[int, str], roots: dict[str, str],
) -> bool:
    """Read the scope's sessions newest first into ``found`` until ``want_sessions`` conversations matched (a long
    compression chain's continuations, each holding a copy of its first turns, are one: counted as sessions, they
    filled the count and the older conversations were never read).

    Sessions with ids close together are read by one FTS5 range seek; a session spread wide (resumed months
    later) through its own messages (``LIKE`` on ``needles``), not by seeking over everyone else's rows. Both
    count against ``SCAN_MESSAGES``. Each session keeps its ``PER_SESSION`` shortest matches (for common
    words, BM25's first). ``roots``: the sessions' conversations the search has asked (``conversations.
    conversation_roots``' ``known``), added to. Returns whether the bounds left messages unread with too few
    conversations matched.
    """
    matched: dict[int, str] = {}
    matched_conversations = set(conversations.conversation_roots(conn, found.values(), roots).values())
    covered = queries = 0
    i = 0
    cut = False  # the budget ran out inside a wide session (its older messages unread; the scan ends there)
    while i < len(order) and covered < SCAN_MESSAGES and queries < SCAN_QUERIES and len(matched_conversations) < want_sessions:
        low, high = order[i][1], order[i][2]
        j = i + 1
        while (j < len(order) and order[j][2] >= low - SCAN_GAP
               and max(high, order[j][2]) - min(low, order[j][1]) <= SCAN_BATCH):
            low, high = min(low, order[j][1]), max(high, order[j][2])
            j += 1
        if high - low > SCAN_BATCH:  # one session spread wide: its own newest messages, as many as the budget has left
            rows, read, cut = substring.like_newest(conn, needles, scope, order[i][0], limit=SCAN_ROWS,
                                                 read=SCAN_MESSAGES - covered)
        else:
            rows = fts.range_matches(conn, space, match, scope, [o[0] for o in order[i:j]], low, high, SCAN_ROWS,
                                      per_session=PER_SESSION)
            read = high - low + 1
        matched.update(rows)
        matched_conversations.update(conversations.conversation_roots(conn, [sid for _, sid in rows], roots).values())
        covered += read
        queries += 1
        i = j
    lengths = fts.doc_lengths(conn, space, list(matched))
    by_session: dict[str, list[int]] = {}
    for mid, sid in matched.items():
        by_session.setdefault(sid, []).append(mid)
    for sid, mids in by_session.items():
        for mid in sorted(mids, key=lambda m: (lengths.get(m, 1 << 30), -m))[:PER_SESSION]:
            found.setdefault(mid, sid)
    return (cut or i < len(order)) and len(matched_conversations) < want_sessions


def search(conn: sqlite3.Connection, parsed: ParsedQuery, scope: Scope, *, want_sessions: int, db_key: str) -> KeywordAnswer:
    """The keyword leg for ``parsed`` (some units) within ``scope`` (some sessions: ``search.search_history``
    answers without the legs otherwise), looking for ``want_sessions`` matching sessions.

    Raises ``sqlite3.DatabaseError`` only when state.db itself cannot be read (a damaged FTS index degrades,
    see the module docstring).
    """
    shape = store.layout_of(conn)
    if shape.stale:
        return _search_like(conn, parsed, scope, want_sessions, db_key, notes=[STALE_NOTE], strategy="like-stale")
    try:
        return _search_fts(conn, parsed, scope, want_sessions, db_key)
    except sqlite3.DatabaseError as exc:
        if errors.temporary(exc):
            raise  # a moment's I/O error or a lock, not the index's: read again (store.read_again) or answered
        if isinstance(exc, sqlite3.OperationalError) and "malformed" not in str(exc):
            logger.info("FTS query failed (%s); searching by substring", exc)
            return _search_like(conn, parsed, scope, want_sessions, db_key, notes=[], strategy="like-fallback")
        note = damaged_note(exc, shape.display)
        logger.warning("state.db's FTS index is damaged (%s); searching by substring", exc, extra=errors.said_as(note))
        return _search_like(conn, parsed, scope, want_sessions, db_key, notes=[note], strategy="like-damaged")


def _search_fts(conn: sqlite3.Connection, parsed: ParsedQuery, scope: Scope, want_sessions: int, db_key: str) -> KeywordAnswer:
    trigram = store.layout_of(conn).trigram
    plan = _plan(conn, parsed, trigram)
    found: dict[int, str] = {}
    keyed: dict[int, str] = {}  # each candidate's conversation, as far as the picks asked (conversations.result_keys)
    roots: dict[str, str] = {}  # each session's conversation, as far as the reads asked (conversations.conversation_roots)
    paths: list[str] = []
    notes: list[str] = []
    near = ranges.near(conn, db_key, scope.session_ids) if plan.selective or plan.glued else None
    for space, exprs in plan.selective.items():
        found.update(fts.session_candidates(conn, space, " OR ".join(exprs), scope, per_session=PER_SESSION,
                                            limit=CANDIDATE_ROWS, near=near, keyed=keyed))
        paths.append(space)
    if plan.glued:
        found.update(fts.session_candidates(conn, "trigram", " OR ".join(plan.glued), scope, per_session=PER_SESSION,
                                            limit=CANDIDATE_ROWS, near=near, newest=True, keyed=keyed))
        paths.append("glued")
    order = _newest_first(conn, scope, db_key)
    if plan.like:
        if _substrings(conn, order, plan.like, scope, want_sessions, found, SUBSTRING_MESSAGES):
            notes.append(LIKE_NOTE)
        paths.append("like")
    if plan.common and len(set(conversations.conversation_roots(conn, found.values(), roots).values())) < want_sessions:
        for space, exprs in plan.common.items():
            if _scan(conn, space, " OR ".join(exprs + plan.selective.get(space, [])), plan.needles[space], scope, order(),
                     want_sessions, found, roots):
                notes.append(SCAN_NOTE)
            paths.append(space + "-newest")
    notes.extend(_beyond_the_index(conn, parsed, scope, want_sessions, order, found, paths))
    rows = store.fetch_messages(conn, _outside_context(conn, scope, found))
    scorer = Scorer(
        tuple(plan.terms), fts.stats(conn, "words"), fts.stats(conn, "trigram") if trigram else Stats(1, 1.0)
    )
    words = fts.doc_lengths(conn, "words", list(rows)) if any(t.kind != "gram" for t in plan.terms) else {}
    grams = fts.doc_lengths(conn, "trigram", list(rows)) if trigram and any(t.kind == "gram" for t in plan.terms) else {}
    weight = sum(t.idf(scorer.grams if t.kind == "gram" else scorer.words) for t in plan.terms)
    answer = _answer(conn, rows, scorer, want_sessions, "+".join(paths) or "none", notes,
                     {m: (words.get(m), grams.get(m)) for m, r in rows.items() if r.whole}, weight, roots)
    return dataclasses.replace(answer, keys=keyed)


#: The scope's sessions newest first, as ``(session, first id, last id)``, asked when a read needs them.
Order = Callable[[], list[tuple[str, int, int]]]


def _newest_first(conn: sqlite3.Connection, scope: Scope, db_key: str) -> Order:
    """The scope's sessions newest first (``ranges.newest_first``) less those with no message in the search's
    ``since``/``until`` (their first and last messages' times: ``session_rows.active_between``): a newest-first read
    spends its budget on sessions whose rows could pass, not on a year of sessions after ``until``. Made once a
    search, when a read first asks (the substring reads and the common words' scan share it)."""
    @functools.cache
    def order() -> list[tuple[str, int, int]]:
        listed = ranges.newest_first(conn, db_key, scope.session_ids)
        f = scope.filters
        if f.since is None and f.until is None:
            return listed
        keep = session_rows.active_between(conn, [o[0] for o in listed], f.since, f.until)
        return [o for o in listed if o[0] in keep]
    return order


def _substrings(conn: sqlite3.Connection, order: Order, needles: Sequence[str], scope: Scope, want_sessions: int,
                found: dict[int, str], reach: int, limit: int = CANDIDATE_ROWS) -> bool:
    """Add to ``found`` the scope's messages holding a needle, its newest sessions first (``order``), up to ``reach``
    message ids (:func:`substring.like_candidates`); returns whether a bound left older messages unread."""
    liked, cut = substring.like_candidates(conn, needles, scope, order(),
                                     per_session=LIKE_PER_SESSION, limit=limit, max_scanned=reach, want_sessions=want_sessions)
    found.update(liked)
    return cut


def _outside_context(conn: sqlite3.Connection, scope: Scope, found: Mapping[int, str]) -> list[int]:
    """The candidates ``found`` less the rows of the asking conversation's past that its live context repeats
    (``store.context_copies``: one query over the candidates, whatever the past's size; the index's candidates were
    picked without them, a substring scan's are dropped here)."""
    copies = store.context_copies(conn, scope, list(found))
    return [m for m in found if m not in copies]


def _answer(conn: sqlite3.Connection, rows: dict[int, MessageRow], scorer: Scorer, want_sessions: int, strategy: str,
            notes: Sequence[str], lengths: dict[int, tuple[int | None, int | None]] | None = None, weight: float = 0.0,
            roots: dict[str, str] | None = None) -> KeywordAnswer:
    """The candidates' messages scored, earlier recalls weighed down (``ranking.demote_earlier``), by session.
    ``roots``: the sessions' conversations the search asked already (not asked again)."""
    roots = {} if roots is None else roots
    hits = score_texts(scorer, {m: (r.session_id, r.text) for m, r in rows.items()}, lengths,
                       calls={m: r.calls for m, r in rows.items() if r.calls})
    hits = demote_earlier(hits, lambda ids: store.earlier_recalls(conn, ids), want_sessions,
                          lambda ids: conversations.conversation_roots(conn, ids, roots))
    return KeywordAnswer(tuple(rank_sessions(hits)), rows, strategy, tuple(notes), weight, tuple(hits), scorer)


def _beyond_the_index(
    conn: sqlite3.Connection, parsed: ParsedQuery, scope: Scope, want_sessions: int, order: Order,
    found: dict[int, str], paths: list[str],
) -> list[str]:
    """Add to ``found`` what Hermes' index does not hold, by substring, newest first; returns the answer's notes.

    * A chunked rebuild in progress (0.21's ``optimize-storage``): the newest ``GAP_SCAN_MESSAGES`` ids between
      its progress and high water marks.
    * ``role: tool`` on 0.21's layout, whose index holds only a tool row's first characters (its trigram index
      none): the project's newest sessions, up to ``TOOL_SCAN_MESSAGES`` ids.
    """
    shape = store.layout_of(conn)
    needles = [u.text for u in parsed.units]
    notes: list[str] = []
    if shape.rebuild is not None:
        done, high = shape.rebuild
        low = max(done, high - GAP_SCAN_MESSAGES)
        found.update(substring.like_in_range(conn, needles, scope, low, high, limit=CANDIDATE_ROWS))
        paths.append("like-unindexed")
        notes.append(REBUILD_NOTE.format(percent=min(99, int(100 * done / high)),
                                         cut="" if low == done else f" (the newest {GAP_SCAN_MESSAGES:,} of them)"))
    if scope.filters.roles == ("tool",) and (shape.tool_prefix or not shape.trigram_tools):
        if _substrings(conn, order, needles, scope, want_sessions, found, TOOL_SCAN_MESSAGES):
            notes.append(LIKE_NOTE)
        paths.append("like-tool")
    return notes


def _search_like(
    conn: sqlite3.Connection, parsed: ParsedQuery, scope: Scope, want_sessions: int, db_key: str, *, notes: list[str],
    strategy: str,
) -> KeywordAnswer:
    """Substring search of the project's messages, newest first (no FTS index read)."""
    found: dict[int, str] = {}
    cut = _substrings(conn, _newest_first(conn, scope, db_key), [u.text for u in parsed.units], scope, want_sessions, found, SUBSTRING_MESSAGES,
                      2 * CANDIDATE_ROWS)
    rows = store.fetch_messages(conn, _outside_context(conn, scope, found))
    # No index statistics to read: every term weighs the same, length still normalises.
    terms: list[Term] = []
    for unit in parsed.units:
        if unit.kind == "cjk":
            terms.append(Term("gram", (unit.text.lower(),), 0))
        elif unit.kind == "word":
            terms.append(Term("word", tuple(stem_variants(unit.text)), 0))
        else:
            tokens = tuple(unicode61.tokens(unit.text))
            terms.append(Term("phrase" if len(tokens) > 1 else "word", tokens, 0))
    stats = Stats(max(len(rows), 1) * 10, 40.0)
    return _answer(conn, rows, Scorer(tuple(terms), stats, Stats(stats.rows, 200.0)), want_sessions, strategy,
                   [*notes, *([SUBSTRING_CUT_NOTE] if cut else [])])
