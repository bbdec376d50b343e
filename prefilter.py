"""Whether a redaction pattern can match a text at all, told by the strings every match of it contains.

Python's regular expressions try a pattern at every position of a text; ``in`` finds a string hundreds of times
faster. So a pass of redaction over a whole text is skipped when the text holds none of its pattern's
:func:`required` strings: a pass that cannot match would leave the text as it was.

Those strings are read from the pattern's parse tree (``re._parser``, CPython's own, present from 3.11 through 3.14):
literals in sequence, alternatives joined, a group repeated at least once; anything else (a class of many
characters, ``.``, a back reference, a lookaround's body) requires nothing. When the tree cannot be read, the pattern
requires nothing and its pass always runs. Texts and strings are compared in lower case, which holds for a pattern
matching case-insensitively too, once the few characters a pattern's ``(?i)`` matches but ``str.lower`` does not turn
into the same letter (:data:`UNLOWERED`: ``ſ``, ``ı``, ``µ``, a final ``ς``...) are written as that letter (:func:`fold`).
Pure; never raises; the cost of a check is one folded copy of a text per change of it (:func:`_lowered` keeps the last)
and one ``in`` per string.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Iterator
from typing import Any

try:  # the parse tree's untyped tuples: read as Any
    _C: Any = importlib.import_module("re._constants")
    _P: Any = importlib.import_module("re._parser")
except ImportError:  # a Python whose re keeps its parser elsewhere: every pass runs
    _C = _P = None

#: Characters that ``(?i)`` matches as a letter that ``str.lower`` does not give: the dotless ``ı`` and dotted ``İ``
#: (as i), the long ``ſ`` (as s), Greek and Cyrillic variant forms (``ϐ`` as β, ``ᲂ`` as о), ``µ`` as μ.
#: ``tests/test_redaction_gates.py`` checks every code point against every letter a pattern requires.
UNLOWERED = re.compile("[\u0130\u0131\u017f\u00b5\u0345\u0390\u03b0\u03c2\u03d0\u03d1\u03d5\u03d6\u03f0\u03f1\u03f5"
                       "\u1c80-\u1c88\u1e9b\u1fbe\u1fd3\u1fe3\ufb05\ufb06]")
#: Each :data:`UNLOWERED` character lower-cased, as the letter ``(?i)`` matches it with (``İ`` is written ``i`` before
#: lowering: ``str.lower`` gives it a combining dot after); ``ﬅ`` and ``ﬆ``, ``ΐ`` and ``ΐ``, ``ΰ`` and ``ΰ`` as one.
_FOLDED = {c: c.upper().lower() for c in "\u0131\u017f\u00b5\u0345\u03c2\u03d0\u03d1\u03d5\u03d6\u03f0\u03f1\u03f5"
           "\u1c80\u1c81\u1c82\u1c83\u1c84\u1c85\u1c86\u1c87\u1c88\u1e9b\u1fbe"}
_FOLDED.update({"\u0390": "\u0390", "\u1fd3": "\u0390", "\u03b0": "\u03b0", "\u1fe3": "\u03b0", "\ufb05": "\ufb06", "\ufb06": "\ufb06"})


def fold(text: str) -> str:
    """``text`` in lower case, each :data:`UNLOWERED` character as the letter ``(?i)`` matches it with: a text a
    pattern matches holds, so folded, the folded strings it requires."""
    if text.isascii():
        return text.lower()
    low = (text.replace("\u0130", "i") if "\u0130" in text else text).lower()
    return UNLOWERED.sub(lambda m: _FOLDED[m.group()], low) if UNLOWERED.search(low) else low


#: Most strings a set may hold: past it, checking them would cost what the pass does.
_MOST = 128

_REPEATS = () if _C is None else (_C.MAX_REPEAT, _C.MIN_REPEAT, _C.POSSESSIVE_REPEAT)
_ZERO_WIDTH = () if _C is None else (_C.AT, _C.ASSERT, _C.ASSERT_NOT)

Strings = frozenset[str]
_EMPTY: Strings = frozenset({""})


def _union(sets: list[Strings | None], empty: bool) -> Strings | None:
    """The strings of all ``sets`` (``""`` among them only when ``empty``), or None when one is None or they are many."""
    if any(s is None or (not empty and (not s or "" in s)) for s in sets):
        return None
    out = frozenset(x for s in sets if s is not None for x in s)
    return out if len(out) <= _MOST else None


def _product(a: Strings, b: Strings) -> Strings | None:
    """Each string of ``a`` followed by each of ``b``, or None when they are many."""
    return _union([frozenset(x + y for x in a for y in b)], empty=True)


def _exact(items: Any) -> Strings | None:
    """Every string the parsed sequence ``items`` can match, when they are few; else None."""
    out: Strings | None = _EMPTY
    for op, av in items:
        node = _exact_node(op, av)
        out = None if node is None or out is None else _product(out, node)
    return out


def _exact_node(op: Any, av: Any) -> Strings | None:
    if op is _C.LITERAL:
        return frozenset({chr(av)})
    if op in _ZERO_WIDTH:  # a lookaround or an anchor matches no character
        return _EMPTY
    if op is _C.SUBPATTERN:
        return _exact(av[3])
    if op is _C.ATOMIC_GROUP:
        return _exact(av)
    if op is _C.BRANCH:
        return _union([_exact(alt) for alt in av[1]], empty=True)
    if op is _C.IN:  # a class of a few characters written out: [\"'`]
        chars = frozenset(chr(a) for o, a in av if o is _C.LITERAL)
        return chars if len(chars) == len(av) <= 4 else None
    if op in _REPEATS and av[0] == av[1] <= 4:  # z{2}
        return _exact(list(av[2]) * av[0])
    return None


def _better(a: Strings | None, b: Strings | None) -> Strings | None:
    """Of two sets, the one whose shortest string is longer (then the one of fewer strings); a set holding ``""``
    is none."""
    def rank(s: Strings | None) -> tuple[int, int]:
        return (-1, 0) if not s or "" in s else (min(map(len, s)), -len(s))
    best = max((a, b), key=rank)
    return None if rank(best)[0] < 0 else best


def _required(items: Any) -> Strings | None:
    """A set of strings one of which every match of the parsed sequence ``items`` contains, or None."""
    best: Strings | None = None
    run = _EMPTY  # what the exact items since the last inexact one match, joined
    for op, av in items:
        node = _exact_node(op, av)
        joined = None if node is None else _product(run, node)
        if joined is not None:
            run = joined
        elif node is not None:  # too many strings joined: a new run starts
            best, run = _better(best, run), node
        else:
            best, run = _better(_better(best, run), _required_node(op, av)), _EMPTY
    return _better(best, run)


def _required_node(op: Any, av: Any) -> Strings | None:
    if op is _C.SUBPATTERN:
        return _required(av[3])
    if op is _C.ATOMIC_GROUP:
        return _required(av)
    if op in _REPEATS:
        return _required(av[2]) if av[0] >= 1 else None
    if op is _C.BRANCH:
        return _union([_required(alt) for alt in av[1]], empty=False)
    if op is _C.GROUPREF_EXISTS:  # (?(name)yes|no): one of the two
        _, yes, no = av
        return None if no is None else _union([_required(yes), _required(no)], empty=False)
    return None


@functools.cache
def required(pattern: re.Pattern[str]) -> tuple[str, ...] | None:
    """The strings, in lower case, one of which every match of ``pattern`` contains (a string containing another of
    them left out: the shorter is found wherever it is), or None when no such set of a few strings is read. Read once
    for each pattern."""
    if _P is None:
        return None
    try:
        found = _required(_P.parse(pattern.pattern, pattern.flags))
    except (AttributeError, TypeError, ValueError, IndexError, RecursionError, re.error):  # a parse tree of another shape
        return None
    if found is None:
        return None
    lowered = {fold(s) for s in found}
    return tuple(sorted(s for s in lowered if not any(o != s and o in s for o in lowered)))


@functools.lru_cache(maxsize=1)
def _lowered(text: str) -> str:
    """``text`` folded (:func:`fold`). The last text's is kept: every pass of one redaction checks the same text until
    one changes it."""
    return fold(text)


def may_match(pattern: re.Pattern[str], text: str) -> bool:
    """False only when ``pattern`` cannot match anywhere in ``text`` (it holds none of :func:`required`'s strings)."""
    strings = required(pattern)
    if strings is None:
        return True
    low = _lowered(text)
    return any(s in low for s in strings)


def sub(pattern: re.Pattern[str], repl: Callable[[re.Match[str]], str] | str, text: str) -> str:
    """``pattern.sub(repl, text)``, or ``text`` itself when the pattern cannot match it."""
    return pattern.sub(repl, text) if may_match(pattern, text) else text


def finditer(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text)``, or nothing when the pattern cannot match it."""
    return pattern.finditer(text) if may_match(pattern, text) else iter(())
