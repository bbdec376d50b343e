"""Snippets (pure): a bounded window of a message around what the query matched.

Every match inside the window is marked ``>>>like this<<<`` (Latin words and
their plural forms as whole words, phrases across punctuation, CJK chunks
as substrings); cut ends are marked ``...``. The window is placed where it
holds the most distinct query units.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from . import unicode61
from .echo import without_markers
from .query import Unit, WordMatcher, fts_tokens, stem_variants

SNIPPET_CHARS = 280


def _matcher(unit: Unit) -> WordMatcher | None:
    """What finds a word or phrase unit in the folded text (:func:`unicode61.fold`); ``None`` for a phrase of no tokens."""
    if unit.kind == "word":
        return WordMatcher.any_of(stem_variants(unit.text))
    tokens = fts_tokens(unit.text)
    return WordMatcher.phrase(tokens) if tokens else None


def _matches(flat: str, units: Sequence[Unit]) -> list[tuple[int, int, int]]:
    """``(start, end, unit index)`` in ``flat`` of every match, in text order, non-overlapping.

    Words and phrases are matched as FTS5 tokens ("Größe" for "grösse"),
    CJK chunks as case-folded substrings.
    """
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


def make_snippet(text: str, units: Sequence[Unit], width: int = SNIPPET_CHARS) -> str:
    """At most ``width`` characters of ``text`` (plus markers) around its matches of ``units``."""
    flat = " ".join(without_markers(text).split())  # an echoed snippet's markers: marked once, by this search
    matches = _matches(flat, units)
    if not matches:
        return flat[:width] + ("..." if len(flat) > width else "")
    # The window start (at a match) that covers the most distinct units.
    best_start, best_count = matches[0][0], -1
    for start, _, _ in matches:
        count = len({u for s, e, u in matches if s >= start and e <= start + width})
        if count > best_count:
            best_start, best_count = start, count
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
