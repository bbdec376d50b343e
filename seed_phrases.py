"""Seed phrases (a wallet's 12 to 24 recovery words) in a text, label or not, for :mod:`redact`.

A run of words is a seed phrase when nearly every word is on the BIP-39 English list. The list is the one
file this module reads: ``bip39_english.txt`` beside it (copied from Trezor's python-mnemonic 0.21, MIT
licence), once, when the first text is searched. A phrase of the Chinese lists is told by its shape
(:data:`HAN_PHRASE`), without a list. Pure otherwise; never raises. Imports nothing of the plugin.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

#: A word of a seed phrase (group 2: a run of ASCII letters), a run of other letters (neither group: ``别外传``, glued
#: to a phrase's last word, ends it), or a markup tag between its words (group 1: ``<p>``, ``</td>``, ``<br/>``), which
#: :func:`redact` reads through. A tag is bounded, so it is read once.
SEED_TOKEN = re.compile(r"(</?[A-Za-z][A-Za-z0-9]{0,9}+(?:[ /][^<>\n]{0,60}+)?>)|([A-Za-z]++)|[^\W\d_A-Za-z]++")
#: The most characters between two words of a seed phrase (tags aside): a list's number and bullet, a table's ``|``
#: cells, quotes and commas, a line break and its indent.
SEED_GAP = 24
#: The BIP-39 English word list the words must come from, beside this module (:func:`words` reads it).
BIP39_WORDS_FILE = "bip39_english.txt"

#: A seed phrase of BIP-39's Chinese lists (each word one character): 12 to 24 Han characters, each apart from the next
#: by a space (``的 一 是 在 …``, after ``是`` too), the run no longer, or run together right after ``助记词：``; :func:`_han_phrase` counts
#: them. Prose does not space its characters.
HAN_PHRASE = re.compile("(?<![\u3400-\u9fff])(?:(?<=[是为為] )|(?<![\u3400-\u9fff][ \u3000]))[\u3400-\u9fff](?:[ \u3000][\u3400-\u9fff]){11,23}+"
                        "(?![ \u3000]?[\u3400-\u9fff])"
                        "|(?<=助记词：|助記詞：|助记词:|助記詞:|助记词是|助記詞是|助记词 |助記詞 )[\u3400-\u9fff]{12,24}+(?![\u3400-\u9fff])")


#: A seed phrase's label right before its first word (``助记词：``, ``mnemonic:``, ``seed phrase is``, ``シードフレーズ``; a
#: list's ``1.``): after it, words met before in the run are no doubt (BIP-39's test vectors repeat words:
#: ``abandon abandon … about``, ``legal winner thank year … legal winner thank yellow``).
SEED_LABEL = re.compile(r"(?i)(?:助记词|助記詞|(?<![\w-])(?:mnemonic|(?:seed|recovery|backup)[ _-]?phrase)|恢复短语|恢復短語|シードフレーズ|ニーモニック"
                        r"|リカバリーフレーズ|復元フレーズ)(?:[ \t]*+(?:是|为|為|は|is|[:=：]))?[ \t\"'「]*+(?:\r?\n[ \t]*+)?(?:1[.)、][ \t]*+)?$")


def _han_phrase(m: re.Match[str], mask: str) -> str:
    """A :data:`HAN_PHRASE` replaced by ``mask`` when it has a phrase's length (12, 15, 18, 21 or 24 words; 12 or 24 run
    together after its label) and few
    characters twice (a phrase's words are drawn at random from 2,048: a spaced-out slogan repeats its own)."""
    spaced = m.group()[1:2] in (" ", "\u3000")
    chars = m.group()[::2] if spaced else m.group()
    lengths = (12, 15, 18, 21, 24) if spaced else (12, 24)  # run together, the usual lengths only: prose is written so
    return mask if len(chars) in lengths and len(set(chars)) >= len(chars) - 2 else m.group()


@functools.cache
def words() -> tuple[frozenset[str], frozenset[tuple[int, str]]]:
    """The 2,048 words of the BIP-39 English list, read once from ``bip39_english.txt`` beside this module (copied from
    Trezor's python-mnemonic 0.21, MIT licence), and each word with one letter left out, as ``(position, what is
    left)`` (:func:`_typo`); both empty when the file cannot be read."""
    try:
        listed = frozenset(Path(__file__).with_name(BIP39_WORDS_FILE).read_text(encoding="ascii").split())
    except (OSError, ValueError):
        return frozenset(), frozenset()
    return listed, frozenset((i, w[:i] + w[i + 1 :]) for w in listed for i in range(len(w)))


@functools.lru_cache(maxsize=8192)
def _typo(word: str) -> bool:
    """Whether ``word`` (lower case, not on the list) is one edit from a BIP-39 word: a letter left out, added, changed,
    or two neighbours swapped (``abandn``, ``abandonn``, ``abendon``, ``abadnon``). A changed letter leaves the same
    remainder at the same place as one left out of the list word. Cached: prose repeats its words."""
    known, dropped = words()
    n = len(word)
    return (any((i, word) in dropped for i in range(n + 1))
            or any(word[:i] + word[i + 1 :] in known or (i, word[:i] + word[i + 1 :]) in dropped for i in range(n))
            or any(word[:i] + word[i + 1] + word[i] + word[i + 2 :] in known for i in range(n - 1)))


def redact(text: str, mask: str) -> str:
    """``text`` with every seed phrase replaced by ``mask``, label or not: a run of 12 or more words, 6 or more right
    after a seed phrase's label (:data:`SEED_TOKEN`: any case, a few non-letters apart, markup tags read through) each a BIP-39
    word, a typo of one (:func:`_typo`, 4+ letters; a list word with an ``s`` is a plural, not a typo) or a list
    word again, with few typos and repeats (:func:`_seed_span`). Prose fails: its small words (``a``, ``of``,
    ``to``, ``the``, ``and``) are none of these; code fails on the names it repeats. Without the list (its file
    unreadable), any word of 3 to 8 letters counts, so prose is taken too: a secret is never sent for want of the
    file."""
    text = HAN_PHRASE.sub(lambda m: _han_phrase(m, mask), text)
    known, _ = words()
    spans: list[tuple[int, int]] = []
    run: list[tuple[int, int, int]] = []  # (start, end, doubt) of each word of the current run
    seen: set[str] = set()  # the words of the current run
    last = 0
    for token in SEED_TOKEN.finditer(text):
        if token.start() - last > SEED_GAP:
            spans += _seed_span(run, text)
            run, seen = [], set()
        last = token.end()
        if token.group(1) is not None:  # a tag
            continue
        word = (token.group(2) or "").lower()
        if 3 <= len(word) <= 9 and (word in known if known else len(word) <= 8):
            run.append((token.start(), token.end(), 2 if word in seen else 0))
            seen.add(word)
        elif known and 4 <= len(word) <= 9 and not (word[-1] == "s" and word[:-1] in known) and _typo(word):
            run.append((token.start(), token.end(), 1))
        else:
            spans += _seed_span(run, text)
            run, seen = [], set()
    spans += _seed_span(run, text)
    if not spans:
        return text
    pieces, last = [], 0
    for start, end in spans:
        pieces += [text[last:start], mask]
        last = end
    return "".join(pieces) + text[last:]


#: The fewest words of a seed phrase: 12, the shortest BIP-39 phrase; after a :data:`SEED_LABEL`, 6 (a phrase cut short,
#: or its first half, is still most of one: 6 words leave 66 of its 128 bits to guess, and prose after a label runs into
#: a word off the list, ``a``, ``it`` or ``the``, before 6).
FEWEST_WORDS = 12
FEWEST_LABELLED = 6


def _seed_span(run: list[tuple[int, int, int]], text: str) -> list[tuple[int, int]]:
    """The span of the seed phrase in ``run`` (``(start, end, doubt)`` of consecutive words of ``text``: 0 a list word, 1
    a typo, 2 a word met before in the run, as code repeats its names and a phrase rarely does, unless a
    :data:`SEED_LABEL` comes right before the run or one of its first three words), as a list of none or one: the whole
    run when it holds :data:`FEWEST_WORDS` (after a label :data:`FEWEST_LABELLED`, then with no doubt) or more and its doubts
    are at most one in six; else, read left to right, the first that many words that stay so (a piece is cut before the word that would
    break that share), with all the run after them."""
    if len(run) < FEWEST_LABELLED:
        return []
    labelled = next((i for i in range(min(3, len(run))) if SEED_LABEL.search(text, max(run[i][0] - 40, 0), run[i][0])), None)
    fewest = FEWEST_WORDS
    if labelled is not None:  # from the word after the label, which may be words of the list itself (seed phrase:)
        run = [(start, end, doubt % 2) for start, end, doubt in run[labelled:]]
        fewest = FEWEST_LABELLED
    if len(run) < fewest or len(run) < FEWEST_WORDS and any(doubt for _, _, doubt in run):
        return []  # a short run after a label holds list words alone (``enter your twelve word secret phrase``: a typo)
    if 6 * sum(doubt for _, _, doubt in run) <= len(run):
        return [(run[0][0], run[-1][1])]
    begin = doubts = 0
    for i, (_, _, doubt) in enumerate(run):
        if i - begin >= fewest:
            return [(run[begin][0], run[-1][1])]
        if doubt and 6 * (doubts + doubt) > i - begin + 1:
            begin, doubts = i + 1, 0
        else:
            doubts += doubt
    return [(run[begin][0], run[-1][1])] if len(run) - begin >= fewest else []
