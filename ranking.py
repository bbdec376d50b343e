"""Ranking (pure): BM25 over message texts, sessions by their best messages, RRF.

Nothing here reads a database: the caller hands in texts and the index's
statistics. Scores are "higher is better" throughout.

Keyword scoring is Okapi BM25 computed here rather than by FTS5's ``bm25()``,
so that a word and its plural count as one term (FTS5 indexes them apart) and
the parameters are ours. Two token spaces are scored side by side, each with
its own statistics, as Hermes indexes them: unicode61 tokens (words and
phrases) and character trigrams (CJK text).

A session's score is its best message's score plus a decaying share of its
next best (``SESSION_DECAY``): a session that returns to a topic in several
messages ranks above one that mentions it once, without letting a long
session outweigh a focused one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .query import fts_tokens

K1 = 0.9
B = 0.9
SESSION_DECAY = 0.5  # weight of a session's 2nd best message (3rd: its square)
SESSION_MESSAGES = 3  # messages counted per session


@dataclass(frozen=True)
class Stats:
    """One FTS index's size: rows and mean row length in tokens."""

    rows: int
    avg_length: float


@dataclass(frozen=True)
class Term:
    """One thing a message can match, with its weight.

    ``kind``: ``word`` (any of ``forms`` as a token), ``phrase`` (``forms`` as
    consecutive tokens) or ``gram`` (``forms[0]`` as a substring of the
    case-folded text; CJK). ``df`` is the number of indexed rows holding it.
    """

    kind: str
    forms: tuple[str, ...]
    df: int

    def idf(self, stats: Stats) -> float:
        """BM25's idf, floored like FTS5's so a very common term still counts a little."""
        return max(math.log((stats.rows - self.df + 0.5) / (self.df + 0.5)), 1e-6)


@dataclass(frozen=True)
class Scorer:
    """Scores texts against a query's terms (build once per query)."""

    terms: tuple[Term, ...]
    words: Stats  # unicode61 space: words and phrases
    grams: Stats  # trigram space: CJK
    k1: float = K1
    b: float = B

    def score(self, text: str) -> float:
        """BM25 of ``text`` for the terms (0.0 when nothing matches)."""
        token_terms = [t for t in self.terms if t.kind != "gram"]
        total = 0.0
        if token_terms:
            tokens = fts_tokens(text)
            total += self._space(tokens, len(tokens), token_terms, self.words)
        gram_terms = [t for t in self.terms if t.kind == "gram"]
        if gram_terms:
            folded = text.casefold()
            total += self._space(folded, max(len(folded) - 2, 1), gram_terms, self.grams)
        return total

    def _space(self, body: Any, length: int, terms: Sequence[Term], stats: Stats) -> float:
        norm = self.k1 * (1 - self.b + self.b * length / max(stats.avg_length, 1.0))
        total = 0.0
        for term in terms:
            tf = term_frequency(term, body)
            if tf:
                total += term.idf(stats) * tf * (self.k1 + 1) / (tf + norm)
        return total


def term_frequency(term: Term, body: Any) -> int:
    """How often ``term`` occurs: in a token list (word, phrase) or a case-folded string (gram)."""
    if term.kind == "gram":
        return body.count(term.forms[0])
    if term.kind == "word":
        forms = set(term.forms)
        return sum(1 for token in body if token in forms)
    n = len(term.forms)
    if not n:
        return 0
    first = term.forms[0]
    return sum(1 for i, token in enumerate(body) if token == first and tuple(body[i : i + n]) == term.forms)


def session_score(message_scores: Iterable[float]) -> float:
    """A session's score from its messages' scores (any order)."""
    best = sorted(message_scores, reverse=True)[:SESSION_MESSAGES]
    return math.fsum(s * SESSION_DECAY**i for i, s in enumerate(best))


@dataclass(frozen=True)
class Hit:
    """One message found for a query: the one shape every leg and layer passes on.

    ``score`` is higher-better within its leg (BM25 for keyword, cosine for
    semantic).
    """

    message_id: int
    session_id: str
    score: float


def rank_sessions(hits: Iterable[Hit]) -> list[Hit]:
    """One hit per session (its best message), sessions best first by :func:`session_score`.

    Ties: the newer message first, so the order is deterministic.
    """
    by_session: dict[str, list[Hit]] = {}
    for hit in hits:
        by_session.setdefault(hit.session_id, []).append(hit)
    ranked = []
    for session_hits in by_session.values():
        best = max(session_hits, key=lambda h: (h.score, h.message_id))
        ranked.append((session_score(h.score for h in session_hits), best))
    ranked.sort(key=lambda pair: (-pair[0], -pair[1].message_id))
    return [hit for _, hit in ranked]


def best_per_session(hits: Sequence[Hit], limit: int) -> list[Hit]:
    """The first (strongest) hit of each session in ``hits`` order, at most ``limit`` sessions."""
    out: list[Hit] = []
    seen: set[str] = set()
    for hit in hits:
        if hit.session_id not in seen:
            seen.add(hit.session_id)
            out.append(hit)
            if len(out) >= limit:
                break
    return out


def fuse_rrf(
    rankings: Sequence[Sequence[Any]], *, k: int = 60, weights: Sequence[float] | None = None
) -> list[tuple[Any, float]]:
    """Reciprocal Rank Fusion of best-first rankings.

    ``score(x) = sum_i weight_i / (k + rank_i(x))`` with 1-based ranks over
    the lists that contain ``x``. Returns ``[(item, score)]`` best first;
    equal scores are ordered by the item itself, so the result is
    deterministic. Inputs are not mutated; duplicates within one list count
    at their first (best) rank.
    """
    if weights is not None and len(weights) != len(rankings):
        raise ValueError("one weight per ranking")
    parts: dict[Any, list[float]] = {}
    for i, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else float(weights[i])
        seen: set[Any] = set()
        for rank, item in enumerate(ranking, start=1):
            if item not in seen:
                seen.add(item)
                parts.setdefault(item, []).append(weight / (k + rank))
    # fsum: exact, so the result does not depend on the order of the lists.
    scores = {item: math.fsum(values) for item, values in parts.items()}
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def score_texts(scorer: Scorer, texts: Mapping[int, tuple[str, str]]) -> list[Hit]:
    """``texts`` (message id -> (session id, text)) scored; only messages that match."""
    out = []
    for message_id, (session_id, text) in texts.items():
        score = scorer.score(text)
        if score > 0:
            out.append(Hit(message_id, session_id, score))
    return out
