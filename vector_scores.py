"""Scoring a scope over the mapped vectors, and keeping the best messages of the best sessions.

Numpy over the arrays of a :class:`vector_file.View`; opens no file (the
pages are the shared vector files', mapped by the caller).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

import numpy as np

from . import vector_basis, vector_file
from .ranking import PER_CONVERSATION_SESSIONS, Hit

BLOCK = 32_768  # rows scored per step when a scope is gathered (bounds the transient copy)
#: A scope holding more than this share of the rows is scored in place (one product over
#: every row, the rest masked) rather than gathered block by block.
IN_PLACE_SHARE = 0.5
EXACT_BLOCK = 8_192  # rows the two-pass scoring gathers per step for its exact pass
ROUGH_SPAN = 8_192  # rows of the first pass read in place at a time (spans without a row of the scope are skipped)


def dot(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``matrix @ query`` on this thread's core alone (numpy's own loops, not BLAS).

    BLAS would spread the product over every core, contending with the keyword leg's SQLite work beside it;
    the cost is reading the rows (memory bandwidth), which numpy's loops do as fast as one BLAS thread.
    """
    return np.einsum("ij,j->i", matrix, query, optimize=False)


def member_mask(view: vector_file.View, codes: Mapping[str, int], sessions: Iterable[str]) -> np.ndarray:
    """One bool per session code of ``view`` (and one spare): true for the codes of ``sessions``.

    ``codes``: each session's code in ``view``; a session without one (no
    vector yet) is left out.
    """
    member = np.zeros(len(view.names) + 1, dtype=bool)
    member[np.fromiter((codes[s] for s in sessions if s in codes), dtype=np.int64)] = True
    return member


def scope_scores(
    view: vector_file.View, member: np.ndarray, query: np.ndarray, *, wanted: int = 0,
    group: Callable[[list[str]], Mapping[str, str]] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(message ids, session codes, cosines)`` of the live rows of the sessions ``member`` marks in ``view``.

    ``member``: :func:`member_mask` of the scope's sessions; ``query``: a unit vector of the view's dimensions.
    A scope holding most rows is scored in place (one product over the mapped matrix, no copy, the rest masked
    to ``-inf``); a smaller one is gathered ``BLOCK`` rows at a time, so a small project reads only its own
    rows. A scope of ``vector_basis.TWO_PASS_FROM_ROWS`` rows or more in files with a basis goes to
    :func:`two_pass`. Codes are only a shortcut: :func:`best_of_sessions` checks every row's session in full.
    """
    owners = view.rows[:, 2]
    ids = view.rows[:, 1]
    inside = member[owners] & (ids != -1)
    share = int(np.count_nonzero(inside))
    if view.basis is not None and view.low is not None and share >= vector_basis.TWO_PASS_FROM_ROWS:
        return two_pass(view, view.basis, view.low, query, inside, wanted=wanted, group=group)
    if share > IN_PLACE_SHARE * view.n:
        scores = dot(view.vectors, query)
        scores[~inside] = -np.inf
        return ids, owners, scores
    where = np.flatnonzero(inside)
    scores = np.empty(len(where), dtype=np.float32)
    for start in range(0, len(where), BLOCK):
        part = where[start : start + BLOCK]
        scores[start : start + len(part)] = dot(view.vectors[part], query)
    return ids[where], owners[where], scores


def two_pass(
    view: vector_file.View, basis: np.ndarray, low: np.ndarray, query: np.ndarray, inside: np.ndarray, *, wanted: int = 0,
    group: Callable[[list[str]], Mapping[str, str]] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Like :func:`scope_scores` for the rows ``inside``, scoring exactly only the best of them along ``basis``.

    The first pass scores each row's coordinates ``low`` against ``query @ basis``; the best
    ``vector_basis.kept()`` of the scope's rows, and every row of the scope past ``low`` (appended since the
    basis), are then scored exactly. The rows kept are widened until they hold ``wanted`` sessions or the whole
    scope, so that later pages do not end early where a few long sessions fill the best rows; with ``group``
    (sessions -> each one's conversation), until they hold ``wanted`` conversations too, or every one of the scope: a
    long chain's continuations (each a copy of its first turns) are sessions enough to fill the best rows alone.
    Every cosine returned is exact; a row the first pass ranks far down is missed.
    """
    projected = len(low)
    rough_query = query @ basis
    first = inside[:projected]
    count = int(np.count_nonzero(first))
    # The first pass reads, in place (no copy), every span of ROUGH_SPAN rows that holds a row of the
    # scope: a project's rows mostly come in long runs (they are indexed project by project). Runs of
    # consecutive spans are scored by one product each; ``rows`` are the file rows ``rough`` scores.
    # Which spans hold a row of the scope, a spare False at each end; the whole spans told a row of a reshape each.
    whole = projected // ROUGH_SPAN * ROUGH_SPAN
    spans = np.zeros(-(-projected // ROUGH_SPAN) + 2, dtype=bool)
    spans[1 : whole // ROUGH_SPAN + 1] = first[:whole].reshape(-1, ROUGH_SPAN).any(axis=1)
    spans[-2] |= first[whole:].any()  # the last span when it is not whole
    edges = np.flatnonzero(spans[1:] != spans[:-1]).tolist()
    runs = [(begin * ROUGH_SPAN, min(end * ROUGH_SPAN, projected)) for begin, end in zip(edges[::2], edges[1::2], strict=True)]
    rows = np.concatenate([np.arange(start, stop) for start, stop in runs]) if runs else np.empty(0, dtype=np.int64)
    rough = np.concatenate([dot(low[start:stop], rough_query) for start, stop in runs]) if runs else np.empty(0, np.float32)
    mine = np.concatenate([first[start:stop] for start, stop in runs]) if runs else np.empty(0, dtype=bool)  # first[rows]
    rough[~mine | np.isnan(rough)] = -np.inf  # another scope's row, or a vector not finite: last
    keep = vector_basis.kept(count)

    def conversations(codes: list[int]) -> int:
        return len(set(group([view.names[c] for c in codes]).values())) if group is not None else len(codes)

    @functools.cache
    def everyone() -> int:  # the scope's conversations: all of them held, widening further finds no other
        return conversations(np.unique(view.rows[np.flatnonzero(inside), 2]).tolist())

    def enough(best: np.ndarray) -> bool:
        """Whether the rows ``best`` hold ``wanted`` conversations, or every one of the scope. Their sessions are
        asked best first, twice ``wanted`` of them, then twice as many each time, until enough are found: most
        searches ask about a hundred sessions, not the thousands the kept rows hold."""
        if group is None:
            return True
        codes = view.rows[rows[best[np.argsort(-rough[best], kind="stable")]], 2]
        _, first_at = np.unique(codes, return_index=True)
        ordered = codes[np.sort(first_at)].tolist()  # each session once, by its best row
        found: set[str] = set()
        start, step = 0, 2 * wanted
        while start < len(ordered):
            found.update(group([view.names[c] for c in ordered[start : start + step]]).values())
            if len(found) >= wanted:
                return True
            start, step = start + step, 2 * step
        return len(found) >= everyone()

    while True:
        cut = len(rough) - keep  # the best keep rows, without a negated copy of the scores
        best = np.argpartition(rough, cut)[cut:] if 0 < keep < count else np.flatnonzero(rough > -np.inf)
        best = best[rough[best] > -np.inf]  # never a row of another scope, a gone one or one not finite
        chosen = np.sort(rows[best])  # in file order: the gather reads forward
        if keep >= count or len(np.unique(view.rows[chosen, 2])) >= wanted and enough(best):
            break
        keep = min(count, keep * 4)
    chosen = np.concatenate([chosen, projected + np.flatnonzero(inside[projected:])])
    scores = np.empty(len(chosen), dtype=np.float32)
    for start in range(0, len(chosen), EXACT_BLOCK):
        part = chosen[start : start + EXACT_BLOCK]
        scores[start : start + len(part)] = dot(view.vectors[part], query)
    return view.rows[chosen, 1], view.rows[chosen, 2], scores


def best_of_sessions(
    names: Sequence[str], sessions: AbstractSet[str], ids: np.ndarray, owners: np.ndarray, scores: np.ndarray,
    top_sessions: int, per_session: int, keys: Callable[[Mapping[int, str]], Mapping[int, str]] | None = None,
) -> list[Hit]:
    """The best messages of the ``top_sessions`` best sessions among scored rows, best first.

    At most ``per_session`` messages of a session; a message's score is its
    best chunk's. Rows of a session not in ``sessions`` are never returned,
    whatever the codes say. Looks at a head of the best rows, widened until
    it holds enough sessions. With ``keys`` (``{message: its session}`` -> the conversation each message stands for,
    asked only of the rows looked at: ``conversations.result_keys``), ``top_sessions``
    counts conversations, and a conversation keeps at most ``PER_CONVERSATION_SESSIONS`` sessions' worth of
    messages, the first said of those scored alike: a compression's continuations and a branch carry copies of
    its first turns (one vector each, alike), which would otherwise fill the sessions and leave one conversation
    (a branch's own messages are its own conversation's).
    """
    if not len(scores):
        return []
    head = min(len(scores), max(top_sessions * per_session * 4, 64))
    while True:
        best, taken = _head(names, sessions, ids, owners, scores, head, top_sessions, per_session, keys)
        if len(taken) >= top_sessions or head >= len(scores):
            break
        head = min(len(scores), head * 4)
    return sorted((Hit(m, sid, score) for m, (sid, score) in best.items()), key=lambda h: (-h.score, h.message_id))


def _head(
    names: Sequence[str], sessions: AbstractSet[str], ids: np.ndarray, owners: np.ndarray, scores: np.ndarray,
    head: int, top_sessions: int, per_session: int, keys: Callable[[Mapping[int, str]], Mapping[int, str]] | None = None,
) -> tuple[dict[int, tuple[str, float]], dict[str, int]]:
    """The best rows of the head; returns them and how many each session (or, with ``keys``, each conversation)
    took."""
    part = np.argpartition(-scores, head - 1)[:head] if head < len(scores) else np.arange(len(scores))
    best: dict[int, tuple[str, float]] = {}
    taken: dict[str, int] = {}  # by conversation (with ``keys``; else each session is its own)
    own: dict[str, int] = {}  # by session
    order = part[np.lexsort((ids[part], -scores[part]))]  # ties: the message said first (an original before its copies)
    # As Python numbers: indexing numpy arrays one element at a time would cost more than the loop. Out of scope: a
    # score of -inf (the rest), or another session's message, whatever the codes say.
    rows = [(mid, names[code], score) for mid, code, score in zip(ids[order].tolist(), owners[order].tolist(),
                                                                    scores[order].tolist(), strict=True)
            if score != -np.inf and names[code] in sessions]
    conversation = keys({mid: sid for mid, sid, _ in rows}) if keys is not None else {}
    cap = per_session * (PER_CONVERSATION_SESSIONS if keys is not None else 1)  # a conversation's rows
    for mid, sid, score in rows:
        if mid in best:
            continue
        conv = conversation.get(mid, sid)
        count = taken.get(conv, 0)
        if own.get(sid, 0) >= per_session or count >= cap or (not count and len(taken) >= top_sessions):
            continue
        own[sid] = own.get(sid, 0) + 1
        taken[conv] = count + 1
        best[mid] = (sid, score)
    return best, taken
