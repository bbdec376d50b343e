"""Text as FTS5's ``unicode61`` tokenizer sees it, asked of the SQLite this process runs.

Hermes indexes messages with ``unicode61`` at its default options: letters, numbers, private-use and
unassigned characters (and most symbols, emoji included) make tokens; everything else separates them; case is
folded, Latin diacritics removed ("Größe" is ``große``, "ς" is ``σ``) and combining accents dropped. Python's
``lower()`` and ``\\w`` agree with it on plain ASCII only.

Each character is looked up once per process in a private in-memory FTS5 table (``x<char>x`` tells whether
it joins a token, folds to another, separates or is dropped): SQLite's answer by definition. No file is read
or written.

``fold(text).split()`` are FTS5's tokens; :func:`comparable` is the cheaper form for matching words.
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
    """``text`` with token characters folded as ``unicode61`` folds them and separators as single spaces; as long
    as ``text`` unless combining accents were dropped. Never raises (a lone surrogate is a separator).
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


# Characters whose lower case is already what unicode61 makes of them, or separators in both (see
# ``query.WORD_START``): ASCII, CJK and kana, punctuation, arrows and symbols, emoji. A text of only these is
# compared by ``lower()``; any other character (accented Latin, Greek, Cyrillic...) sends it through fold().
_LOWER_IS_FOLD = re.compile(
    "[\x00-\x7f\u2000-\u206f\u2190-\u2bff\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff01-\uff20\uff3b-\uff40\uff5b-\uff65"
    "\U0001f000-\U0001faff\U00020000-\U0002ffff]*"
)


def comparable(text: str) -> str:
    """``text`` with every token character folded as unicode61 folds it, separators maybe left as they are: for
    matching words at non-word boundaries, cheaper than :func:`fold` for ASCII and CJK text."""
    if text.isascii() or _LOWER_IS_FOLD.fullmatch(text):
        return text.lower()
    return fold(text)


def fold_with_positions(text: str) -> tuple[str, list[int]]:
    """``(fold(text), where)``: ``where[i]`` is the index in ``text`` of the folded string's character ``i``, plus
    ``len(text)`` last, so a match ``[start, end)`` of the folded string is ``text[where[start]:where[end]]``."""
    folded = fold(text)
    if len(folded) == len(text):
        return folded, list(range(len(text) + 1))
    table = _table()
    where = [i for i, ch in enumerate(text) if (table.get(ord(ch), " ") if not ch.isascii() else "x")]
    where.append(len(text))
    return folded, where


def without_dropped(text: str) -> str:
    """``text`` without the characters ``unicode61`` drops inside a token (combining accents), so that it splits
    into words where FTS5 does (a decomposed "naïve" is one word, not ``nai`` and ``ve``). Never raises."""
    if text.isascii():
        return text
    fold(text)  # learns what is not known yet
    table = _table()
    dropped = {ord(ch): None for ch in set(text) if table.get(ord(ch)) == ""}
    return text.translate(dropped) if dropped else text


def tokens(text: str) -> list[str]:
    """``text``'s FTS5 ``unicode61`` tokens, folded, in order."""
    return fold(text).split()
