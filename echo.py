"""Echoes of earlier recalls in a message's text (pure).

A recall's own calls and answers are left out of what a search ranks
(``store.RECALL_TOOLS``), but the assistant's reply after a recall often
repeats what it found: snippets with their ``>>>match<<<`` markers (the
plugin's and Hermes' ``session_search`` mark matches alike), ``@session:``
links, or the snippet's words in a sentence of its own. Such a reply is an
echo of the session it quotes, not a decision of its own: the searches rank
it as they rank an earlier question (``ranking.demote``), below the sessions
it quotes.

What counts as an echo:

* text holding a match marker (``>>>word<<<``) or an ``@session:`` link:
  those only ever come from a recall's answer;
* text that repeats ``QUOTE_TOKENS`` consecutive words of a snippet of a
  recall answered earlier in the same session (:func:`recall_snippets`
  reads them from the answer's JSON, :func:`runs` their words).
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
    """The quoted texts of a recall tool's answer (its JSON): each result's ``snippet`` and each read message's text.

    ``[]`` when the answer is not JSON or holds none. Markers and ``...`` cuts are removed.
    """
    try:
        data = json.loads(answer)
    except ValueError:
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
    :func:`quotes` looks for (worked out once per recall answer, however many replies may quote it)."""
    return frozenset(run for snippet in snippets for run in _shingles(snippet))


def _shingles(text: str) -> set[tuple[str, ...]]:
    tokens = unicode61.tokens(text)
    return {tuple(tokens[i : i + QUOTE_TOKENS]) for i in range(len(tokens) - QUOTE_TOKENS + 1)}


def quotes(text: str, answers: Iterable[frozenset[tuple[str, ...]]]) -> bool:
    """Whether ``text`` repeats ``QUOTE_TOKENS`` consecutive words (FTS5 tokens, case folded) of a recall answer:
    one of the :func:`runs` in ``answers``, each a recall answer's. ``text`` is not read when there is no run to
    look for (most replies have no recall answer before them)."""
    wanted = [answer for answer in answers if answer]
    if not wanted:
        return False
    mine = _shingles(text)
    return any(not mine.isdisjoint(answer) for answer in wanted)
