"""Text as FTS5's ``unicode61`` tokenizer sees it, asked of the SQLite this process runs.

Hermes indexes messages with ``unicode61`` at its default options: letters,
numbers, private-use and unassigned characters (and most symbols, emoji
included) make tokens; everything else separates them; case is folded and
Latin diacritics are removed ("Größe" is the token ``große``, "Ǆ" is ``ǆ``,
"ς" is ``σ``), and combining accents are dropped. Python's ``lower()`` and
``\\w`` agree with it on plain ASCII only, so a query word compared in
Python's terms misses what FTS5 holds ("größe" counted 0 rows, "Straße"
never matched a text scored by ``casefold()``).

Rather than copy SQLite's tables, each character is looked up once per
process in a private in-memory FTS5 table (``x<char>x`` tells whether the
character joins a token, folds to another, separates or is dropped): what
SQLite does is the answer by definition. No file is read or written.

:func:`fold` maps a text to the same length-or-shorter string in which every
token character is folded and every separator is one space, so
``fold(text).split()`` are FTS5's tokens. :func:`comparable` is the cheaper
form for matching words (``lower()`` wherever that already agrees).
"""

from __future__ import annotations

import re
import sqlite3
import string

from . import state

_ASCII = {cp: (chr(cp).lower() if chr(cp) in string.ascii_letters + string.digits else " ") for cp in range(128)}
_PROBE_BATCH = 2_000


def _table() -> dict[int, str]:
    data = state.cache("unicode61").data
    table = data.get("table")
    if table is None:
        table = data["table"] = dict(_ASCII)
    return table


def _learn(table: dict[int, str], codepoints: set[int]) -> None:
    """Ask SQLite what ``unicode61`` makes of each of ``codepoints`` (added to ``table``)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE probe USING fts5(x)")
        conn.execute("CREATE VIRTUAL TABLE probe_terms USING fts5vocab(probe, 'instance')")
        todo = sorted(codepoints)
        for start in range(0, len(todo), _PROBE_BATCH):
            batch = todo[start : start + _PROBE_BATCH]
            conn.executemany("INSERT INTO probe(rowid, x) VALUES (?, ?)", [(cp, f"x{chr(cp)}x") for cp in batch])
            tokens: dict[int, list[tuple[int, str]]] = {}
            for doc, term, offset in conn.execute("SELECT doc, term, offset FROM probe_terms"):
                tokens.setdefault(int(doc), []).append((int(offset), str(term)))
            for cp in batch:
                seen = [term for _, term in sorted(tokens.get(cp, []))]
                if seen == ["xx"]:
                    table[cp] = ""  # dropped inside a token (a combining accent)
                elif len(seen) == 1 and len(seen[0]) == 3:
                    table[cp] = seen[0][1]
                else:  # ["x", "x"]: a separator
                    table[cp] = " "
            conn.execute("DELETE FROM probe")
    finally:
        conn.close()


def fold(text: str) -> str:
    """``text`` with token characters folded as ``unicode61`` folds them and separators as single spaces.

    Never raises (a lone surrogate, which no database holds, is a separator).
    The result is as long as ``text`` unless combining accents were dropped.
    """
    if text.isascii():
        return text.translate(_ASCII)
    table = _table()
    unknown = {ord(ch) for ch in set(text)} - table.keys()
    if unknown:
        with state.cache("unicode61").lock:
            unknown -= table.keys()
            surrogates = {cp for cp in unknown if 0xD800 <= cp <= 0xDFFF}
            table.update(dict.fromkeys(surrogates, " "))
            if unknown - surrogates:
                _learn(table, unknown - surrogates)
    return text.translate(table)


# Characters whose lower case is already what unicode61 makes of them, or which are
# separators in both (matching works at non-word characters, see ``query.WORD_START``):
# ASCII, CJK and kana, CJK and full-width punctuation, general punctuation, arrows and
# symbols, emoji. A text of only these is compared by ``lower()`` (fast); any other
# character (accented Latin, Greek, Cyrillic...) sends it through :func:`fold`.
_LOWER_IS_FOLD = re.compile(
    "[\x00-\x7f\u2000-\u206f\u2190-\u2bff\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff01-\uff20\uff3b-\uff40\uff5b-\uff65"
    "\U0001f000-\U0001faff\U00020000-\U0002ffff]*"
)


def comparable(text: str) -> str:
    """``text`` with every token character folded as unicode61 folds it; separators may stay as they are.

    For matching query words at non-word boundaries: cheaper than
    :func:`fold` for ASCII and CJK text (``lower()``), exact otherwise.
    """
    if text.isascii() or _LOWER_IS_FOLD.fullmatch(text):
        return text.lower()
    return fold(text)


def fold_with_positions(text: str) -> tuple[str, list[int]]:
    """``(fold(text), where)``: ``where[i]`` is the index in ``text`` of the folded string's character ``i``.

    ``where`` has one more entry, ``len(text)``, so a match ``[start, end)``
    of the folded string is ``text[where[start]:where[end]]``.
    """
    folded = fold(text)
    if len(folded) == len(text):
        return folded, list(range(len(text) + 1))
    table = _table()
    where = [i for i, ch in enumerate(text) if (table.get(ord(ch), " ") if not ch.isascii() else "x")]
    where.append(len(text))
    return folded, where


def without_dropped(text: str) -> str:
    """``text`` without the characters ``unicode61`` drops inside a token (combining accents): what is left
    splits into words where FTS5 splits it. ``nai`` + U+0308 + ``ve`` (a decomposed "naïve", as macOS input
    sends it) is one word, ``naive``-to-be, not ``nai`` and ``ve``. Never raises."""
    if text.isascii():
        return text
    fold(text)  # learns what is not known yet
    table = _table()
    dropped = {ord(ch): None for ch in set(text) if table.get(ord(ch)) == ""}
    return text.translate(dropped) if dropped else text


def tokens(text: str) -> list[str]:
    """``text``'s FTS5 ``unicode61`` tokens, folded, in order."""
    return fold(text).split()
