"""Echoes of earlier recalls in a message's text (pure).

A recall's own calls and answers are never ranked (``store.RECALL_TOOLS``), but the reply after one often
repeats what it found. Such a reply echoes the session it quotes; the searches weigh it down as an earlier
question (``ranking.demote``). An echo is text that holds:

* a match marker (``>>>word<<<``, as the plugin and Hermes' ``session_search`` mark) or an ``@session:``
  link: only a recall's answer writes those;
* ``QUOTE_TOKENS`` consecutive words of a snippet of a recall answered earlier in the same session
  (:func:`recall_snippets`, :func:`runs`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from . import unicode61

QUOTE_TOKENS = 8  # consecutive words of a recalled snippet that make a reply its echo

_MARKED = re.compile(r">>>[^\s<>](?:[^<>]{0,200}?)<<<")
_LINK = re.compile(r"@session:[\w.:-]+")
_MARKERS = re.compile(r">{3,}|<{3,}")


def shows_recall(text: str) -> bool:
    """Whether ``text`` holds a recall's marks: a ``>>>match<<<`` marker or an ``@session:`` link."""
    return bool(_MARKED.search(text) or _LINK.search(text))


def without_markers(text: str) -> str:
    """``text`` with match markers (runs of 3 or more ``>`` or ``<``) removed, so a snippet of it is marked once."""
    return _MARKERS.sub("", text)


def recall_snippets(answer: str) -> list[str]:
    """The quoted texts of a recall tool's answer (its JSON): each result's ``snippet``, each read message's text
    and each listed session's ``last_answer``, markers and ``...`` cuts removed; ``[]`` when not JSON or none.
    """
    try:
        data = json.loads(answer)
    except (ValueError, RecursionError):
        return []
    if not isinstance(data, dict):
        return []
    texts: list[str] = []
    for key, field in (("results", "snippet"), ("messages", "text"), ("sessions", "last_answer")):
        items = data.get(key)
        if isinstance(items, list):
            texts.extend(str(item[field]) for item in items if isinstance(item, dict) and isinstance(item.get(field), str))
    return [without_markers(t).replace("...", " ") for t in texts if t.strip()]


def runs(snippets: Iterable[str]) -> frozenset[tuple[str, ...]]:
    """Every ``QUOTE_TOKENS`` consecutive words (FTS5 tokens, case folded) of each of ``snippets``: what
    :func:`quotes` looks for (once per recall answer)."""
    return frozenset(run for snippet in snippets for run in _shingles(snippet))


def _shingles(text: str) -> set[tuple[str, ...]]:
    tokens = unicode61.tokens(text)
    return {tuple(tokens[i : i + QUOTE_TOKENS]) for i in range(len(tokens) - QUOTE_TOKENS + 1)}


def quotes(text: str, answers: Iterable[frozenset[tuple[str, ...]]]) -> bool:
    """Whether ``text`` holds one of the :func:`runs` in ``answers`` (each a recall answer's); ``text`` is not
    read when there is none to look for."""
    wanted = [answer for answer in answers if answer]
    if not wanted:
        return False
    mine = _shingles(text)
    return any(not mine.isdisjoint(answer) for answer in wanted)
