"""Snippets (pure): a bounded window of a message around what the query matched.

Every match inside the window is marked ``>>>like this<<<`` (words and their plurals as whole words, phrases
across punctuation, CJK chunks as substrings); cut ends are marked ``...``. The window is placed where it
holds the most distinct query units.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from . import unicode61
from .echo import without_markers
from .query import Unit, WordMatcher, stem_variants

SNIPPET_CHARS = 280


def _matcher(unit: Unit) -> WordMatcher | None:
    """What finds a word or phrase unit in the folded text (:func:`unicode61.fold`); ``None`` for a phrase of no tokens."""
    if unit.kind == "word":
        return WordMatcher.any_of(stem_variants(unit.text))
    tokens = unicode61.tokens(unit.text)
    return WordMatcher.phrase(tokens) if tokens else None


def _matches(flat: str, units: Sequence[Unit]) -> list[tuple[int, int, int]]:
    """``(start, end, unit index)`` in ``flat`` of every match, in text order, non-overlapping; words and phrases
    matched as FTS5 tokens ("Größe" for "grösse"), CJK chunks as case-folded substrings."""
    folded, where = unicode61.fold_with_positions(flat)
    found: list[tuple[int, int, int]] = []
    for index, unit in enumerate(units):
        if unit.kind == "cjk":
            found.extend((m.start(), m.end(), index) for m in re.finditer(re.escape(unit.text), flat, re.IGNORECASE) if m.end() > m.start())
            continue
        matcher = _matcher(unit)
        if matcher is not None:
            found.extend((where[s], where[e], index) for s, e in matcher.spans(folded) if e > s)
    found.sort()
    out: list[tuple[int, int, int]] = []
    for match in found:
        if not out or match[0] >= out[-1][1]:
            out.append(match)
    return out


def best_window(matches: Sequence[tuple[int, int, int]], width: int) -> int:
    """The start of the first match from which a window of ``width`` characters holds the most distinct units.

    ``matches``: ``(start, end, unit)`` in text order, not overlapping (:func:`_matches`), so their ends are in
    order too; one pass with two pointers, linear in the matches.
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
    for start, end, _ in matches:
        if start < left or end > right:
            continue
        parts.append(flat[pos:start] + ">>>" + flat[start:end] + "<<<")
        pos = end
    parts.append(flat[pos:right])
    return ("..." if left > 0 else "") + "".join(parts) + ("..." if right < len(flat) else "")
