"""Query parsing (pure): what a user's text asks for, as searchable units and terms.

``parse_query`` never raises and never passes the user's text through to FTS5: every unit becomes a quoted
FTS5 string, so operators, quotes and punctuation are inert.

* A **word** is a Latin-script content word (stop words dropped unless nothing else is left), compared by a
  light plural stemmer (``s_stem``): "timeouts" finds "timeout".
* A **phrase** is a quoted phrase or an identifier joined by ``. _ - / : @ # +`` (``update_session_cwd``,
  ``src/app.py``): its tokens in order.
* A **cjk** unit is a run of CJK text split at function words, searched by its character trigrams, or as a
  2-character word.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from . import unicode61

MAX_QUERY_CHARS = 2000
#: What of a question longer than the redaction window (:func:`embedding_text`) is never embedded: longer than the
#: piece of a secret redaction may miss when the window cuts it (a passphrase, 11 words of a seed phrase).
OUTBOUND_TAIL = 1000
MAX_UNITS = 24
ONE_PASS = 128  # needles of one length counted in a text one by one (beyond: one pass over the text)

# NLTK's English stop words, with common question fillers and the words asking for the present state
# (they say when, not what: "now" would match every "from now on").
STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been before being below
    between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each
    few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself
    him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most
    mustn't my myself no nor not of off on once only or other ought our ours ourselves out over own same shan't
    she she'd she'll she's should shouldn't so some such than that that's the their theirs them themselves then
    there there's these they they'd they'll they're they've this those through to too under until up very was
    wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while who who's
    whom why why's will with won't would wouldn't you you'd you'll you're you've your yours yourself yourselves
    also just may might must shall would could can get got us via yes yet
    now currently nowadays anymore still
    """.split()
)

# Function words that split a CJK run into content chunks; longest first, so "我们" goes before "我".
CJK_STOP = tuple(
    sorted(
        """
        我们 你们 他们 她们 它们 咱们 怎么 怎样 怎么样 如何 什么 为什么 哪里 哪个 哪些 这个 那个 这些 那些 这里 那里
        之前 以前 上次 之后 以后 当时 时候 一下 一个 一些 可以 没有 还是 是否 关于 是不是 有没有 能不能 应该 需要 已经
        的 了 吗 呢 吧 啊 呀 嘛 么 是 在 和 与 及 或 把 被 就 都 也 又 还 我 你 他 她 它 这 那 有 对 从 给 让 得 地 着 过
        """.split(),
        key=len,
        reverse=True,
    )
)

CJK_CLASS = (
    "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    "\U00020000-\U0002ffff"
)
_CJK_RUN = re.compile(f"[{CJK_CLASS}]+")
# Where a query word starts and ends in a folded text (:func:`unicode61.comparable`):
# not next to a letter or digit, except CJK, which writers run Latin words into ("用Redis缓存").
WORD_START = rf"(?<![^\W_{CJK_CLASS}])"
WORD_END = rf"(?![^\W_{CJK_CLASS}])"
# A character a query word may not touch: a letter or digit outside CJK.
_WORDISH = re.compile(rf"[^\W_{CJK_CLASS}]")
_PLAIN_TOKEN = re.compile(rf"[^\W_{CJK_CLASS}]+")


class WordMatcher:
    """Whole-word matches in a folded text (:func:`unicode61.comparable`): what ``WORD_START(?:body)WORD_END`` finds.

    A pattern with the CJK class compiles slowly, and each question's are new: when every part is letters and
    digits outside CJK, the body alone is searched and each match's neighbours tested against one class
    compiled once (the same matches); other parts use the full pattern.
    """

    def __init__(self, body: str, parts: Sequence[str]) -> None:
        plain = bool(parts) and all(_PLAIN_TOKEN.fullmatch(p) for p in parts)
        self._body = re.compile(body) if plain else None
        self._full = None if plain else re.compile(f"{WORD_START}(?:{body}){WORD_END}")
        self._source = body

    @classmethod
    def any_of(cls, forms: Sequence[str]) -> WordMatcher:
        """Any of ``forms`` as a whole word (longer forms tried first at each place)."""
        ordered = sorted(dict.fromkeys(forms), key=len, reverse=True)
        return cls("|".join(re.escape(f) for f in ordered), ordered)

    @classmethod
    def phrase(cls, tokens: Sequence[str]) -> WordMatcher:
        """``tokens`` in order, across any run of the characters FTS5 skips (``[\\W_]+``)."""
        return cls(r"[\W_]+".join(re.escape(t) for t in tokens), tokens)

    def counts(self, text: str) -> Counter[str]:
        """How many times each matched string is found (:meth:`spans`'s matches), counted in C when the text holds no
        CJK: there the neighbours' class is a plain word character's, which compiles fast."""
        if self._body is not None and not _CJK_RUN.search(text):
            return Counter(self._outside_cjk.findall(text))
        return Counter(text[start:end] for start, end in self.spans(text))

    @functools.cached_property
    def _outside_cjk(self) -> re.Pattern[str]:
        return re.compile(rf"(?<![^\W_])(?:{self._source})(?![^\W_])")

    def spans(self, text: str) -> Iterator[tuple[int, int]]:
        """``(start, end)`` of each match, left to right, not overlapping."""
        if self._full is not None:
            for whole in self._full.finditer(text):
                yield whole.span()
            return
        assert self._body is not None
        search, wordish, n, pos = self._body.search, _WORDISH.match, len(text), 0
        while (found := search(text, pos)) is not None:
            start, end = found.span()
            if (start and wordish(text, start - 1)) or (end < n and wordish(text, end)):
                pos = start + 1
                continue
            yield start, end
            pos = end


_QUOTED = re.compile(r'"([^"]*)"')
# A word, or an identifier joined by . _ - / : (kept whole as a phrase).
_TOKEN = re.compile(r"[^\W_]+(?:[._\-/:@#+][^\W_]+)*[+#]*|[^\W_]+", re.UNICODE)
_COMPOUND = re.compile(r"[._\-/:@#+]")


@dataclass(frozen=True)
class Unit:
    """One searchable piece of a query; ``kind``: ``word``, ``phrase`` or ``cjk`` (see the module docstring)."""

    text: str
    kind: str


@dataclass(frozen=True)
class ParsedQuery:
    units: tuple[Unit, ...]
    truncated: bool = False


#: Full-width letters, digits and the marks inside identifiers (``_-.``) as ASCII: a Chinese input method's
#: full-width mode writes ``ｒｅｄｉｓ`` for ``redis``, which FTS5 does not fold (NFKC would also change CJK text).
#: A question is looked for in both forms.
_FULL_WIDTH = {c: c - 0xFEE0 for c in (*range(0xFF10, 0xFF1A), *range(0xFF21, 0xFF3B), *range(0xFF41, 0xFF5B),
                                       0xFF3F, 0xFF0D, 0xFF0E)}


def clean_query(text: str) -> tuple[str, bool]:
    """Drop control characters and lone surrogates, cap the length, and put the text in the form FTS5 sees:
    composed (NFC, as macOS may send ``naïve`` decomposed) without the combining marks unicode61 drops inside
    a word. Not NFKC: FTS5 does not fold full-width letters (:func:`parse_query` looks for both forms). Returns
    ``(clean text, truncated)``.
    """
    truncated = len(text) > MAX_QUERY_CHARS
    text = text[:MAX_QUERY_CHARS]
    if not text.isascii():
        text = unicode61.without_dropped(unicodedata.normalize("NFC", "".join(
            ch for ch in text if unicodedata.category(ch) != "Cs")))
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        out.append(" " if cat in ("Cc", "Cf", "Zl", "Zp") else ch)
    return "".join(out), truncated


def embedding_text(text: str, outbound: Callable[[str], str]) -> str:
    """``text`` as the vector leg embeds it, at most ``MAX_QUERY_CHARS`` long: lone surrogates and Cf characters
    (zero-width spaces, soft hyphens) dropped, NFC, control characters but line breaks and tabs read as spaces. Not
    :func:`clean_query`'s form: messages are embedded as written, and a key in the question must reach redaction
    whole before a remote embedder (the keyword form may split it in two). Pure but for ``outbound``.

    ``outbound`` (the provider's :meth:`~embeddings.Provider.outbound_text`: a remote embedder's redaction, the
    local model's text as it is) is applied before the cut, to twice the cap of the text in that form (read from at
    most ``8 * MAX_QUERY_CHARS`` characters as written): a secret across the cut is redacted whole, and what is kept
    is a prefix of redacted text. When the question is longer than that window (a secret may cross its end), the
    last :data:`OUTBOUND_TAIL` characters of what redaction leaves of it are never kept, so a piece of that secret
    cannot reach the kept part even when redaction shortened the text before it. Invisible characters are dropped
    before the window is taken, so they never push the question out of it."""
    formed = _embedding_form(text[: 8 * MAX_QUERY_CHARS])
    window = formed[: 2 * MAX_QUERY_CHARS]
    sent = outbound(window)
    whole = len(text) <= 8 * MAX_QUERY_CHARS and len(formed) <= len(window)
    keep = MAX_QUERY_CHARS if whole else min(MAX_QUERY_CHARS, len(sent) - OUTBOUND_TAIL)
    return sent[: max(keep, 0)]


def _embedding_form(text: str) -> str:
    text = unicodedata.normalize("NFC", "".join(ch for ch in text if unicodedata.category(ch) not in ("Cs", "Cf")))
    return "".join(" " if unicodedata.category(ch) in ("Cc", "Zl", "Zp") and ch not in "\n\t" else ch for ch in text)


def split_cjk(run: str) -> list[str]:
    """A CJK run cut at function words into its content chunks."""
    chunks = [run]
    for stop in CJK_STOP:
        chunks = [piece for chunk in chunks for piece in chunk.split(stop)]
    return [c for c in chunks if c]


def parse_query(text: str) -> ParsedQuery:
    """Free text as search units (see the module docstring): de-duplicated, Latin text lower-cased, at most
    ``MAX_UNITS``. The question's other forms come after its own units, within the cap: its full-width letters and
    digits as ASCII, and its kana with (han)dakuten and Hangul decomposed, as macOS writes file names (no index folds
    one form into the other). Pure; never raises."""
    clean, truncated = clean_query(text)
    units, fallback = _units(clean)
    chosen = units or fallback
    truncated = truncated or len(chosen) > MAX_UNITS
    folded = clean.translate(_FULL_WIDTH)
    forms = _units(folded)[0 if units else 1] if folded != clean else []
    forms += [Unit(unicodedata.normalize("NFD", u.text), "cjk") for u in chosen + forms if u.kind == "cjk"]
    others = [u for u in dict.fromkeys(forms) if u not in chosen]
    return ParsedQuery(tuple((chosen[:MAX_UNITS] + others)[:MAX_UNITS]), truncated)


def _units(clean: str) -> tuple[list[Unit], list[Unit]]:
    """``(units, fallback)`` of a clean question: the fallback (stop words, lone letters and CJK characters) is
    searched when there is nothing else."""
    units: list[Unit] = []
    fallback: list[Unit] = []

    def add(unit: Unit, bucket: list[Unit]) -> None:
        if unit.text and unit not in bucket:
            bucket.append(unit)

    def scan(fragment: str, quoted: bool) -> None:
        pos = 0
        for cjk in _CJK_RUN.finditer(fragment):
            scan_latin(fragment[pos : cjk.start()], quoted)
            for chunk in split_cjk(cjk.group()) if not quoted else [cjk.group()]:
                # A lone CJK character is nearly a stop word (and a costly scan): kept only when nothing else is.
                add(Unit(chunk, "cjk"), units if len(chunk) > 1 or quoted else fallback)
            pos = cjk.end()
        scan_latin(fragment[pos:], quoted)

    def scan_latin(fragment: str, quoted: bool) -> None:
        tokens = [t.lower() for t in _TOKEN.findall(fragment.replace("\u2019", "'"))]
        if quoted and len(tokens) > 1:
            add(Unit(" ".join(tokens), "phrase"), units)
            return
        for token in tokens:
            compound = bool(_COMPOUND.search(token))
            unit = Unit(token, "phrase" if compound else "word")
            if compound or quoted:
                add(unit, units)
            elif token in STOP_WORDS or (len(token) == 1 and not token.isdigit()):
                add(unit, fallback)
            else:
                add(unit, units)

    pos = 0
    for match in _QUOTED.finditer(clean):
        scan(clean[pos : match.start()], False)
        scan(match.group(1), True)
        pos = match.end()
    # An apostrophe ends a word ("app's" is "app", "don't" is "don"), as FTS5 splits it.
    scan(clean[pos:].replace('"', " ").replace("'", " ").replace("\u2019", " "), False)
    return units, fallback


# A folder's name standing alone in a question (Latin words joined by . _ -, between spaces, marks or CJK text),
# as :func:`vector_queries` finds it. Not inside a URL, path or credential (``postgres://ecommerce-api:pw@db``):
# cutting there could leave half a secret that redaction no longer recognises, sent to a remote embedder.
_LATIN_WORD = _PLAIN_TOKEN.pattern  # letters and digits outside CJK
_STANDING_NAME = re.compile(
    rf"(?<![^\s(\[{{\"'“‘{CJK_CLASS}])({_LATIN_WORD}(?:[._\-]{_LATIN_WORD})*)(?:['’]s)?"
    rf"(?=[.,;:!?)\]}}\"'”’，。？！：；）]*(?:\s|$|[{CJK_CLASS}]))")
_JOINED_NAME = re.compile(rf"{_LATIN_WORD}(?:[._\-]{_LATIN_WORD})+")


def _name_key(name: str) -> str:
    return unicodedata.normalize("NFC", name).casefold().replace("_", "-")


def folder_names(paths: Iterable[str]) -> frozenset[str]:
    """The last folder names of ``paths`` (a project's folders), as :func:`vector_queries` compares them:
    NFC (macOS writes names decomposed), case-folded, ``_`` read as ``-``. Pure; never raises."""
    out = set()
    for path in paths:
        last = re.split(r"[\\/]", path.strip().rstrip("\\/"))[-1]
        if last:
            out.add(_name_key(last))
    return frozenset(out)


#: Runs of spaces and tabs (a line break is kept: a key cut by one is still found by redaction).
_SPACES = re.compile(r"[ \t]+")


def vector_queries(text: str, folders: frozenset[str]) -> tuple[str, ...]:
    """The texts the vector leg embeds for ``text``; it searches their vectors' normalised mean. Never raises.

    ``(text,)``, or ``(text, text without the folder names)`` when ``text`` names some but not all of
    ``folders`` (:func:`folder_names`) and a content word of two or more characters is left. A folder's name
    says where to look, not what is asked: embedded, it pulls toward the sessions that write it most; the mean
    keeps it in half the vector, as it may be the subject too. Only joined names standing alone
    (``ecommerce-api``, not ``api``, which a question may be about) are left out.
    """
    if len(folders) < 2:
        return (text,)
    named = {_name_key(m.group(1)) for m in _STANDING_NAME.finditer(text)} & folders
    left_out = {name for name in named if _JOINED_NAME.fullmatch(name)}
    if not left_out or named == folders:
        return (text,)
    rest = _SPACES.sub(" ", _STANDING_NAME.sub(lambda m: " " if _name_key(m.group(1)) in left_out else m.group(), text)).strip()
    if not any(u.text not in STOP_WORDS and (len(u.text) > 1 or u.text.isdigit()) for u in parse_query(rest).units):
        return (text,)
    return (text, rest)


def fts_quote(text: str) -> str:
    """An FTS5 string literal (a phrase); embedded quotes are doubled."""
    return '"' + text.replace('"', '""') + '"'


def cjk_trigrams(chunk: str) -> list[str]:
    """The character trigrams of a CJK chunk (none for fewer than 3 characters)."""
    return [chunk[i : i + 3] for i in range(len(chunk) - 2)]


def by_length(needles: Iterable[str]) -> dict[int, list[str]]:
    """The distinct ``needles`` grouped by length, as :func:`count_grouped` takes them (once per query)."""
    out: dict[int, list[str]] = {}
    for needle in dict.fromkeys(needles):
        out.setdefault(len(needle), []).append(needle)
    return out


def count_grouped(text: str, groups: dict[int, list[str]]) -> dict[str, int]:
    """``needle -> text.count(needle)`` for each needle of ``groups`` (:func:`by_length`): occurrences that do not
    overlap, leftmost first.

    Past ``ONE_PASS`` needles of one length (a long CJK query has a trigram per character), the text is read
    once for all of them instead of once per needle; fewer keep ``str.count``, faster per character.
    """
    out: dict[str, int] = {}
    for size, group in groups.items():
        if len(group) <= ONE_PASS or not size:
            out.update((needle, text.count(needle)) for needle in group)
            continue
        counts, free = dict.fromkeys(group, 0), dict.fromkeys(group, 0)  # free: where a next occurrence may start
        for i in range(len(text) - size + 1):
            piece = text[i : i + size]
            if piece in counts and free[piece] <= i:
                counts[piece] += 1
                free[piece] = i + size
        out.update(counts)
    return out


def s_stem(word: str) -> str:
    """Harman's "S" plural stemmer for ASCII words of 4+ letters (``queries`` -> ``query``, ``caches`` ->
    ``cache``; ``status``, ``class`` and non-ASCII words left as they are)."""
    if len(word) <= 3 or not word.isascii():
        return word
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def stem_variants(word: str) -> list[str]:
    """The forms FTS5 may hold for ``word``'s stem (each ``w`` with ``s_stem(w) == s_stem(word)``), the word
    as FTS5 folds it first. Pure: which exist is for the index to say."""
    word = " ".join(unicode61.tokens(word)) or word
    stem = s_stem(word)
    forms = [word, stem, stem + "s", stem + "es"]
    if stem.endswith("y"):
        forms.append(stem[:-1] + "ies")
    return [f for f in dict.fromkeys(forms) if s_stem(f) == stem]
