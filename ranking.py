"""Ranking (pure): BM25 over message texts, sessions by their best messages, fusion of the two legs.

The caller hands in texts and the index's statistics. Scores are "higher is better" throughout.

Keyword scoring is Okapi BM25 computed here, not by FTS5's ``bm25()``, so that a word and its plural count
as one term (FTS5 indexes them apart). Two token spaces are scored side by side, each with its own
statistics, as Hermes indexes them: unicode61 tokens (words and phrases) and character trigrams (CJK text).

A session's score is its best message's plus a decaying share of its next best (``SESSION_DECAY``), in both
legs: a session that returns to a topic ranks above one that mentions it once, without a long session
outweighing a focused one. Hybrid adds the legs' standardised session scores (:func:`fuse_scores`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from . import unicode61
from .query import WordMatcher, by_length, count_grouped

K1 = 0.9
B = 0.9
SESSION_DECAY = 0.5  # weight of a session's 2nd best message (3rd: its square)
SESSION_MESSAGES = 3  # messages counted per session
EARLIER_QUESTION = 0.1  # weight of a user turn that a recall answered (an earlier question, not history)
CALLS_WEIGHT = 0.1  # weight of a message that matches only in its tool name or tool-call JSON
SAMPLED_OVER = 8_192  # characters: a longer text is counted in its ends (Scorer.parts)


@dataclass(frozen=True)
class Stats:
    """One FTS index's size: rows and mean row length in tokens."""

    rows: int
    avg_length: float


@dataclass(frozen=True)
class Term:
    """One thing a message can match: ``word`` (any of ``forms`` as a token), ``phrase`` (``forms`` as
    consecutive tokens) or ``gram`` (``forms[0]`` as a substring of the case-folded text; CJK). ``df``: the
    indexed rows holding it.
    """

    kind: str
    forms: tuple[str, ...]
    df: int

    def idf(self, stats: Stats) -> float:
        """BM25's idf, floored like FTS5's so a very common term still counts a little."""
        df = min(self.df, stats.rows)  # a word's forms counted apart can add up past the rows
        return max(math.log((stats.rows - df + 0.5) / (df + 0.5)), 1e-6)


@dataclass(frozen=True)
class Scorer:
    """Scores texts against a query's terms (build once per query)."""

    terms: tuple[Term, ...]
    words: Stats  # unicode61 space: words and phrases
    grams: Stats  # trigram space: CJK

    @functools.cached_property
    def _word_pattern(self) -> tuple[WordMatcher | None, dict[str, int]]:
        """One matcher for every word form (whole tokens, like FTS5) and form -> term index."""
        term_of: dict[str, int] = {}
        for i, term in enumerate(self.terms):
            if term.kind == "word":
                for form in term.forms:
                    term_of.setdefault(form, i)
        if not term_of:
            return None, term_of
        return WordMatcher.any_of(list(term_of)), term_of

    @functools.cached_property
    def _phrase_patterns(self) -> list[tuple[int, WordMatcher]]:
        """Each phrase as its tokens in order, across any punctuation FTS5 also skips."""
        return [(i, WordMatcher.phrase(term.forms)) for i, term in enumerate(self.terms) if term.kind == "phrase" and term.forms]

    @functools.cached_property
    def _word_idfs(self) -> tuple[float, ...]:
        """Each term's idf in the words space, by the term's index."""
        return tuple(term.idf(self.words) for term in self.terms)

    @functools.cached_property
    def _gram_terms(self) -> tuple[tuple[int, str, float], ...]:
        """The gram terms as ``(term index, substring, idf in the trigram space)``."""
        return tuple((i, term.forms[0], term.idf(self.grams)) for i, term in enumerate(self.terms) if term.kind == "gram")

    @functools.cached_property
    def _gram_groups(self) -> dict[int, list[str]]:
        """The gram terms' substrings grouped for counting (:func:`query.by_length`)."""
        return by_length(gram for _, gram, _ in self._gram_terms)

    def score(self, text: str, lengths: tuple[int | None, int | None] = (None, None)) -> float:
        """BM25 of ``text`` for the terms (0.0 when nothing matches). ``lengths``: the text's length in each space
        as FTS5 counted it (tokens, trigrams); counted here when not given."""
        return math.fsum(self.parts(text, lengths).values())

    def parts(self, text: str, lengths: tuple[int | None, int | None] = (None, None)) -> dict[int, float]:
        """Each matching term's share of :meth:`score`: term index (in ``terms``) -> its BM25 (only terms that match).

        A text longer than :data:`SAMPLED_OVER` characters (a tool log) is counted in its first and last
        ``SAMPLED_OVER // 2``, its counts scaled to its length: a long text's BM25 is the density of its matches,
        which its ends tell, and counting every match of a few hundred whole logs takes seconds. A text is counted
        whole when its ends match no term, or when a term they miss lies in its middle (a look for the term's
        characters, in C: the rare word of a question in one line of a long log counts as it should), and for a
        question with CJK, whose trigrams are counted in one pass (``query.count_grouped``) and are many."""
        if len(text) > SAMPLED_OVER and not self._gram_terms:  # words and phrases only: no gram is counted here
            ends = _ends(text, SAMPLED_OVER // 2)
            sampled: Counter[int] = Counter()
            for part in ends:
                sampled.update(self._counts(part)[0])
            if sampled and not self._in_middle(text, set(sampled)):
                scale = len(text) / sum(len(part) for part in ends)
                if lengths[0] is None:
                    lengths = (round(sum(len(unicode61.tokens(part)) for part in ends) * scale), lengths[1])
                return self._bm25(sampled, {}, lengths, text, scale)
        words, grams = self._counts(text)
        return self._bm25(words, grams, lengths, text, 1.0)

    def _in_middle(self, text: str, counted: set[int]) -> bool:
        """Whether a word or phrase term not in ``counted`` (term indices) may be in ``text``: its characters are
        there (a word's form, every token of a phrase), boundaries not looked at."""
        missing = [term for i, term in enumerate(self.terms) if i not in counted]
        if not missing:
            return False
        folded = unicode61.comparable(text)
        return any(all(form in folded for form in term.forms) if term.kind == "phrase" else
                   any(form in folded for form in term.forms) for term in missing)

    def _counts(self, text: str) -> tuple[dict[int, int], dict[int, int]]:
        """``(word and phrase counts, gram counts)`` in ``text``, by term index (only terms that match)."""
        folded = unicode61.comparable(text)
        words: dict[int, int] = {}
        pattern, term_of = self._word_pattern
        if pattern is not None:
            for form, found in pattern.counts(folded).items():
                index = term_of[form]
                words[index] = words.get(index, 0) + found
        for index, phrase in self._phrase_patterns:
            found = sum(phrase.counts(folded).values())
            if found:
                words[index] = found
        grams: dict[int, int] = {}
        if self._gram_terms:
            counted = count_grouped(text.lower(), self._gram_groups)  # the trigram tokenizer folds case only
            grams = {i: tf for i, gram, _ in self._gram_terms if (tf := counted[gram])}
        return words, grams

    def _bm25(self, words: Mapping[int, int], grams: Mapping[int, int], lengths: tuple[int | None, int | None],
              text: str, scale: float) -> dict[int, float]:
        """BM25 shares of the counts (each times ``scale``) in a text of ``lengths`` (counted in ``text`` where
        missing)."""
        out: dict[int, float] = {}
        saturated = K1 + 1
        if words:
            length = lengths[0] if lengths[0] is not None else len(unicode61.tokens(text))
            norm = self._norm(length, self.words)
            idfs = self._word_idfs
            for i, tf in words.items():
                out[i] = idfs[i] * tf * scale * saturated / (tf * scale + norm)
        if grams:
            length = lengths[1] if lengths[1] is not None else max(len(text) - 2, 1)
            norm = self._norm(length, self.grams)
            gram_idfs = {i: idf for i, _, idf in self._gram_terms}
            for i, tf in grams.items():
                out[i] = out.get(i, 0.0) + gram_idfs[i] * tf * scale * saturated / (tf * scale + norm)
        return out

    def _norm(self, length: int, stats: Stats) -> float:
        return K1 * (1 - B + B * length / max(stats.avg_length, 1.0))


def _ends(text: str, half: int) -> tuple[str, str]:
    """The first and last ``half`` characters of ``text`` or a little fewer, each cut at a space where one is near
    (so that no word is cut in two)."""
    cut = text.rfind(" ", half // 2, half)
    start = text.find(" ", len(text) - half, len(text) - half // 2)
    return text[: cut if cut >= 0 else half], text[start if start >= 0 else len(text) - half:]


def session_score(message_scores: Iterable[float]) -> float:
    """A session's score from its messages' scores (any order)."""
    best = sorted(message_scores, reverse=True)[:SESSION_MESSAGES]
    return math.fsum(s * SESSION_DECAY**i for i, s in enumerate(best))


@dataclass(frozen=True)
class Hit:
    """One message found for a query: the one shape every leg and layer passes on.

    ``score``: higher-better within its leg (BM25 or cosine). ``found_by``: which legs found its session
    (``keyword``, ``semantic`` or ``both``) once the legs are merged; ``""`` before.
    """

    message_id: int
    session_id: str
    score: float
    found_by: str = ""


@dataclass(frozen=True)
class SessionRank:
    """A session in one leg's ranking: its best message and its score (:func:`session_score`)."""

    hit: Hit
    score: float

    @property
    def session_id(self) -> str:
        return self.hit.session_id


def rank_sessions(hits: Iterable[Hit]) -> list[SessionRank]:
    """One entry per session (its best message), best first by :func:`session_score`; ties: the newer message."""
    by_session: dict[str, list[Hit]] = {}
    for hit in hits:
        by_session.setdefault(hit.session_id, []).append(hit)
    return _in_order([_session_rank(session_hits) for session_hits in by_session.values()])


def _session_rank(session_hits: Sequence[Hit]) -> SessionRank:
    """One session's entry of :func:`rank_sessions` (``session_hits``: its hits, at least one)."""
    best = max(session_hits, key=lambda h: (h.score, h.message_id))
    return SessionRank(best, session_score(h.score for h in session_hits))


def _in_order(ranked: list[SessionRank]) -> list[SessionRank]:
    ranked.sort(key=lambda r: (-r.score, -r.hit.message_id))
    return ranked


def _standardised(ranking: Sequence[SessionRank]) -> tuple[dict[str, float], float]:
    """Scores as z-scores within their own list, and the lowest one (what a session missing from it gets)."""
    if not ranking:
        return {}, 0.0
    values = [r.score for r in ranking]
    mean = math.fsum(values) / len(values)
    spread = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    if not spread:  # one session, or all equal: as a clear winner over the sessions not found
        return {r.session_id: 1.0 for r in ranking}, -1.0
    z = {r.session_id: (r.score - mean) / spread for r in ranking}
    return z, min(z.values())


def fuse_scores(keyword: Sequence[SessionRank], semantic: Sequence[SessionRank], *, semantic_weight: float) -> list[Hit]:
    """Sessions of both legs by ``z(keyword) + semantic_weight * z(semantic)``: each session's hit, best first.

    Standardised within each leg, as BM25 and cosine live on different scales; a session missing from a leg
    counts as that leg's lowest. A session shows its keyword message when it has one; ties go to the session id.
    """
    kw, kw_floor = _standardised(keyword)
    sem, sem_floor = _standardised(semantic)
    best = {r.session_id: r.hit for r in semantic}
    best.update({r.session_id: r.hit for r in keyword})
    fused = {sid: kw.get(sid, kw_floor) + semantic_weight * sem.get(sid, sem_floor) for sid in best}
    order = sorted(fused, key=lambda sid: (-fused[sid], sid))
    return [found(best[sid], "both" if sid in kw and sid in sem else ("keyword" if sid in kw else "semantic")) for sid in order]


#: The cosine the local model's best hit needs for the vector leg to count at all: below the evidence session's
#: best cosine for 99 % of the questions of every dev set (bench/vector_floor.py, docs/benchmarks.md).
LOCAL_FLOOR = 0.14


#: Candidates one conversation may keep across its sessions, in sessions' worth (``fts.session_candidates``, the vector
#: leg's best sessions): a compression's continuations and a branch carry copies of its first turns, which match
#: alike; hundreds of them would fill a search's candidates and leave every other conversation out.
PER_CONVERSATION_SESSIONS = 4


def one_per_conversation(ranked: Sequence[Hit], keys: Mapping[int, str]) -> list[Hit]:
    """``ranked`` (hits, best first) with one hit per conversation (``keys``: the conversation each message stands
    for; sessions linked by a compression or a branch, whose continuation and branch carry copies of what came
    before): the conversation where its best hit ranked, that hit the earliest message of those scored alike (a copy
    scores as its original). A message without a key stands for its session."""
    best: dict[str, Hit] = {}
    for hit in ranked:
        key = keys.get(hit.message_id, hit.session_id)
        kept = best.get(key)
        if kept is None or (hit.score == kept.score and hit.message_id < kept.message_id):
            best[key] = hit
    return list(best.values())


def close_enough(hits: Sequence[Hit], *, provider: str, one_word: bool, keyword_sessions: Collection[str]) -> tuple[Hit, ...]:
    """The vector leg's hits that are evidence for the query, else ``()``.

    A single word (``one_word``) counts only in the sessions the keyword leg found it in (``keyword_sessions``):
    its nearest vectors tell nothing the word does not (a word only another project holds scores as high), so
    meaning orders the sessions that hold the word and adds none. Otherwise the local model's best hit must reach
    ``LOCAL_FLOOR`` (all of them or none); another provider's cosine scale is unknown, and its hits count.
    """
    if provider == "local" and max((h.score for h in hits), default=0.0) < LOCAL_FLOOR:
        return ()
    if one_word:
        return tuple(h for h in hits if h.session_id in keyword_sessions)
    return tuple(hits)


def found(hit: Hit, found_by: str) -> Hit:
    """``hit`` labelled with the legs that found it (built directly: ``dataclasses.replace`` is slower)."""
    return Hit(hit.message_id, hit.session_id, hit.score, found_by)


def demote(hits: Iterable[Hit], questions: set[int]) -> list[Hit]:
    """``hits`` with the earlier questions (message ids in ``questions``) weighted down by ``EARLIER_QUESTION``."""
    return [dataclasses.replace(h, score=h.score * EARLIER_QUESTION) if h.message_id in questions else h for h in hits]


def demote_earlier(hits: Sequence[Hit], earlier: Callable[[list[int]], set[int]], reach: int,
                   group: Callable[[list[str]], Mapping[str, str]] | None = None) -> list[Hit]:
    """``hits`` with the earlier recalls among them weighted down (:func:`demote`), checked where they can
    change the first ``reach`` conversations of :func:`rank_sessions` (``group``: sessions -> each one's conversation;
    without it each session is its own); ``earlier(ids)`` says which of ``ids`` are. Counted as sessions, a long
    compression chain's continuations (alike: copies of its first turns) filled the reach, and an earlier question
    ranked below them kept its score.

    Rounds check the unchecked sessions ranked within ``reach``, with at least twice as many as the round
    before (logarithmic rounds), until the first ``reach`` are all checked: a demotion only lowers a session,
    so they and their order are what checking every hit gives. Sessions further down keep their scores; each
    hit is checked at most once.
    """
    by_session: dict[str, list[Hit]] = {}
    for hit in hits:
        by_session.setdefault(hit.session_id, []).append(hit)
    roots = group(list(by_session)) if group is not None else {}
    # A session's entry changes only when a check finds an earlier recall among its own hits: kept, not ranked again.
    entries = {sid: _session_rank(session_hits) for sid, session_hits in by_session.items()}
    checked: set[str] = set()
    found: set[int] = set()
    more = 1  # unchecked sessions a round checks at least
    while True:
        ranked = [r.session_id for r in _in_order(list(entries.values()))]
        seen: set[str] = set()  # the conversations of the sessions within reach, as far as ``reach`` of them
        within = 0
        for sid in ranked:
            seen.add(roots.get(sid, sid))
            if len(seen) > reach:
                break
            within += sid not in checked
        if not within:
            return demote(hits, found)
        todo = [sid for sid in ranked if sid not in checked][: max(within, more)]
        checked.update(todo)
        news = earlier([h.message_id for sid in todo for h in by_session[sid]])
        found |= news
        for sid in todo:
            if any(h.message_id in news for h in by_session[sid]):
                entries[sid] = _session_rank(demote(by_session[sid], news))
        more *= 2


def score_texts(
    scorer: Scorer, texts: Mapping[int, tuple[str, str]], lengths: Mapping[int, tuple[int | None, int | None]] | None = None,
    calls: Mapping[int, str] | None = None,
) -> list[Hit]:
    """``texts`` (message id -> (session id, text)) scored; only messages that match.

    ``lengths``: each message's lengths as FTS5 counted them (counted here where missing). ``calls``: the end
    of a message's text that is its tool name and tool-call JSON: scored on the rest, and only when the rest
    matches nothing on the whole text, weighted ``CALLS_WEIGHT`` (a turn that only ran ``grep websocket``
    never outranks the message that discussed it).
    """
    out = []
    for message_id, (session_id, text) in texts.items():
        length = lengths.get(message_id, (None, None)) if lengths else (None, None)
        extra = calls.get(message_id, "") if calls else ""
        score = scorer.score(text[: len(text) - len(extra)] if extra else text, length)
        if score <= 0 and extra:
            score = scorer.score(text, length) * CALLS_WEIGHT
        if score > 0:
            out.append(Hit(message_id, session_id, score))
    return out
