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
from .query import WORD_END, WORD_START, Unit, fts_tokens, stem_variants

SNIPPET_CHARS = 280


def _pattern(unit: Unit) -> str | None:
    """A regex for ``unit``'s matches: over the folded text (:func:`unicode61.fold`), or the text itself for CJK."""
    if unit.kind == "cjk":
        return re.escape(unit.text)
    if unit.kind == "word":
        body = "|".join(re.escape(f) for f in sorted(stem_variants(unit.text), key=len, reverse=True))
    else:
        tokens = fts_tokens(unit.text)
        if not tokens:
            return None
        body = r"[\W_]+".join(re.escape(t) for t in tokens)
    return rf"{WORD_START}(?:{body}){WORD_END}"


def _matches(flat: str, units: Sequence[Unit]) -> list[tuple[int, int, int]]:
    """``(start, end, unit index)`` in ``flat`` of every match, in text order, non-overlapping.

    Words and phrases are matched as FTS5 tokens ("Größe" for "grösse"),
    CJK chunks as case-folded substrings.
    """
    folded, where = unicode61.fold_with_positions(flat)
    found: list[tuple[int, int, int]] = []
    for index, unit in enumerate(units):
        pattern = _pattern(unit)
        if not pattern:
            continue
        if unit.kind == "cjk":
            found.extend((m.start(), m.end(), index) for m in re.finditer(pattern, flat, re.IGNORECASE) if m.end() > m.start())
            continue
        found.extend((where[m.start()], where[m.end()], index) for m in re.finditer(pattern, folded) if m.end() > m.start())
    found.sort()
    out: list[tuple[int, int, int]] = []
    for match in found:
        if not out or match[0] >= out[-1][1]:
            out.append(match)
    return out


def make_snippet(text: str, units: Sequence[Unit], width: int = SNIPPET_CHARS) -> str:
    """At most ``width`` characters of ``text`` (plus markers) around its matches of ``units``."""
    flat = " ".join(text.split())
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
