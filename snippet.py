"""Snippets (pure): a bounded window of a message around what the query matched.

Every match inside the window is marked ``>>>like this<<<`` (words and their plurals as whole words, phrases
across punctuation, CJK chunks by the trigrams the search finds them by, a run of them as one mark); cut ends are
marked ``...``. The window is placed where it holds the most distinct query terms (a word, a phrase, a trigram).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import unicode61
from .echo import without_markers
from .query import ONE_PASS, Unit, WordMatcher, by_length, cjk_trigrams, stem_variants

SNIPPET_CHARS = 280


def _matcher(unit: Unit) -> WordMatcher | None:
    """What finds a word or phrase unit in the folded text (:func:`unicode61.fold`); ``None`` for a phrase of no tokens."""
    if unit.kind == "word":
        return WordMatcher.any_of(stem_variants(unit.text))
    tokens = unicode61.tokens(unit.text)
    return WordMatcher.phrase(tokens) if tokens else None


def _grams(unit: Unit) -> list[str]:
    """What the search looks a CJK chunk up by: its character trigrams, or the chunk itself when it is shorter."""
    return cjk_trigrams(unit.text) or [unit.text]


def _gram_spans(flat: str, grams: Sequence[str]) -> list[tuple[int, int, str]]:
    """``(start, end, gram)`` of every occurrence of each gram in ``flat`` (CJK characters have no case). Past
    ``ONE_PASS`` grams of one length the text is read once for all of them, as the search counts them."""
    found: list[tuple[int, int, str]] = []
    for size, group in by_length(grams).items():
        if len(group) <= ONE_PASS:
            for gram in group:
                at = flat.find(gram)
                while at >= 0:
                    found.append((at, at + size, gram))
                    at = flat.find(gram, at + size)
            continue
        wanted = set(group)
        found.extend((i, i + size, flat[i : i + size]) for i in range(len(flat) - size + 1) if flat[i : i + size] in wanted)
    return found


def _matches(flat: str, units: Sequence[Unit]) -> list[tuple[int, int, int]]:
    """``(start, end, term)`` in ``flat`` of every match, in text order, with ends in order too; words and phrases
    matched as FTS5 tokens ("Größe" for "grösse"), not overlapping; a CJK chunk by its grams (:func:`_grams`, each its
    own term, as the search scores them), which may overlap one another. ``term``: the unit's index for a word or
    phrase, ``len(units)`` and up for a gram."""
    folded, where = unicode61.fold_with_positions(flat)
    found: list[tuple[int, int, int]] = []
    gram_terms: dict[str, int] = {}
    for index, unit in enumerate(units):
        if unit.kind == "cjk":
            for gram in _grams(unit):
                gram_terms.setdefault(gram, len(units) + len(gram_terms))
            continue
        matcher = _matcher(unit)
        if matcher is not None:
            found.extend((where[s], where[e], index) for s, e in matcher.spans(folded) if e > s)
    found.extend((s, e, gram_terms[g]) for s, e, g in _gram_spans(flat, list(gram_terms)))
    found.sort()
    out: list[tuple[int, int, int]] = []
    for match in found:
        last = out[-1] if out else None
        if last is None or match[0] >= last[1] or (match[2] >= len(units) and last[2] >= len(units) and match[1] >= last[1]):
            out.append(match)
    return out


def _marked_spans(matches: Sequence[tuple[int, int, int]], terms: int) -> list[tuple[int, int, bool]]:
    """The spans to mark: each word or phrase match; overlapping or touching gram matches as one span (``数据库`` and
    ``据库连`` mark ``数据库连``). ``(start, end, is a gram span)``, in text order, not overlapping."""
    spans: list[tuple[int, int, bool]] = []
    for start, end, term in matches:
        gram = term >= terms
        if gram and spans and spans[-1][2] and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]), True)
        else:
            spans.append((start, end, gram))
    return spans


def best_window(matches: Sequence[tuple[int, int, int]], width: int) -> int:
    """The start of the first match from which a window of ``width`` characters holds the most distinct terms.

    ``matches``: ``(start, end, term)`` in text order with their ends in order too (:func:`_matches`: words do not
    overlap, grams of one chunk may); one pass with two pointers, linear in the matches.
    """
    counts: dict[int, int] = {}
    best_start, best_count, right = matches[0][0], -1, 0
    for left, (start, _, _) in enumerate(matches):
        while right < len(matches) and matches[right][1] <= start + width:
            unit = matches[right][2]
            counts[unit] = counts.get(unit, 0) + 1
            right += 1
        if len(counts) > best_count:
            best_start, best_count = start, len(counts)
        unit = matches[left][2]
        if right > left:  # the match at ``left`` leaves the window
            counts[unit] -= 1
            if not counts[unit]:
                del counts[unit]
        else:  # a match longer than the window: the next window starts empty
            right = left + 1
    return best_start


def make_snippet(text: str, units: Sequence[Unit], width: int = SNIPPET_CHARS) -> str:
    """At most ``width`` characters of ``text`` (plus markers) around its matches of ``units``."""
    flat = " ".join(without_markers(text).split())  # an echoed snippet's markers: marked once, by this search
    matches = _matches(flat, units)
    if not matches:
        return flat[:width] + ("..." if len(flat) > width else "")
    best_start = best_window(matches, width)
    left = max(0, min(best_start - width // 4, len(flat) - width))
    right = min(len(flat), left + width)
    parts, pos = [], left
    for start, end, gram in _marked_spans(matches, len(units)):
        if gram:  # a run of grams: its part inside the window
            start, end = max(start, left), min(end, right)
            if start >= end:
                continue
        elif start < left or end > right:
            continue
        parts.append(flat[pos:start] + ">>>" + flat[start:end] + "<<<")
        pos = end
    parts.append(flat[pos:right])
    return ("..." if left > 0 else "") + "".join(parts) + ("..." if right < len(flat) else "")


def focus(text: str, units: Sequence[Unit], width: int) -> int | None:
    """Where a part of ``width`` characters of ``text`` (as given: positions are ``text``'s) best starts to show its
    matches of ``units``, placed as a snippet is (a quarter of the width before the best window's first match);
    ``None`` when nothing matches. Linear in the text and its matches."""
    matches = _matches(text, units)
    if not matches:
        return None
    return max(0, min(best_window(matches, width) - width // 4, len(text) - width))
