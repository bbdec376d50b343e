"""What a text is read as before secrets are looked for in it, for :mod:`redact`: JSON ``\\uXXXX`` escapes read,
Markdown and HTML marks around a credential's label dropped, NFC, invisible characters and marks stranded on ASCII
dropped, full-width ASCII and half-width kana, circled digits in a value, curly quotes (single ones around a word), other hyphens and look-alike letters in a credential's name read as
ASCII, spaces of other widths as a space (:func:`fold`).

Each change keeps a secret in one piece for the patterns of :mod:`secret_patterns`, which read the folded text. Pure
data and functions; linear in the length of the text; never raises.
"""

from __future__ import annotations

import re
import unicodedata

from . import prefilter
from . import secret_labels as labels
from . import secret_patterns as patterns

#: Invisible characters (zero-width spaces and joiners, direction marks, the BOM, tag characters, the soft hyphen,
#: Hangul fillers): one inside a key would split it in two for every pattern.
INVISIBLE = re.compile("[\u00ad\u061c\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\u3164"
                       "\ufeff\uffa0\U000e0001\U000e0020-\U000e007f]")
#: Combining marks and variation selectors left on an ASCII letter or digit after NFC (no precomposed letter has
#: them): ``F\u0301`` or ``k\ufe0f`` in a key. An emoji keeps its selector.
STRAY_MARKS = re.compile("(?<=[A-Za-z0-9])[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe00-\ufe0f\ufe20-\ufe2f]+")
#: Full-width ASCII (``ｓｋ－ｐｒｏｊ``, ``ＰＡＳＳＷＯＲＤ＝``) read as ASCII, except the punctuation CJK prose is written
#: with (``，`` ``：`` ``（）``...), which the patterns know as it is.
_CJK_PUNCTUATION = "！（），：；？～"
FULL_WIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F) if chr(c) not in _CJK_PUNCTUATION}
#: Colons drawn apart from ``：`` (the ratio ``∶``, the vertical ``︰`` of Hong Kong and Taiwan, the small ``﹕``), read
#: as ``：``: ``密码∶…`` is a label and its value.
OTHER_COLONS = dict.fromkeys((0x2236, 0xFE13, 0xFE30, 0xFE55), 0xFF1A)
#: Curly double quotes read as straight ones (``“password”: “…”``, as a word processor or a chat app writes code);
#: not single ones, which prose writes as apostrophes (``password’s``).
CURLY_QUOTES = {0x201C: 0x22, 0x201D: 0x22}
#: Hyphens drawn apart from ``-`` (``‐``, the non-breaking ``‑`` a word processor puts in ``sk‑proj‑…``), read as ``-``.
HYPHENS = dict.fromkeys((0x2010, 0x2011), 0x2D)
#: Spaces of other widths (no-break, en to hair, narrow no-break, the ideographic space) that a web page or an editor
#: puts between a command's words, read as a space.
OTHER_SPACES = dict.fromkeys((0x00A0, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000), 0x20)
_AS_ASCII = {**FULL_WIDTH, **CURLY_QUOTES, **OTHER_COLONS, **HYPHENS, **OTHER_SPACES}
#: One word (no space) in curly single quotes before ``:`` or ``=`` or right after one (``‘password’: ‘…’``, as a chat app
#: retypes code), read in straight ones; prose's apostrophes (``don’t``) and quoted words (``enter ‘twice’``) keep theirs.
SINGLE_QUOTED = re.compile("(?:(?<=[:=])|(?<=[:=] ))‘([^‘’\\s]{1,200}+)’|‘([^‘’\\s]{1,200}+)’(?=[ \t]{0,4}[:=])")
#: The full-width punctuation :data:`FULL_WIDTH` keeps, between two full-width letters or digits: inside a value typed
#: with a full-width keyboard (``Ｔｑ７！ｖＲｍ２Ｘｓ``), not CJK prose, which writes it after CJK or ASCII text. Read as ASCII.
WIDE_INNER = re.compile(f"(?<=[０-９Ａ-Ｚａ-ｚ])[{_CJK_PUNCTUATION}]++(?=[０-９Ａ-Ｚａ-ｚ])")
#: Cyrillic and Greek letters drawn like Latin ones (``pаssword`` with a Cyrillic ``а``), read as Latin only inside a
#: credential word (:data:`secret_patterns.CREDENTIAL_PART`) of a :data:`HOMOGLYPH_WORD`: read so in Russian text glued to a key or a
#: label (``…8Aа``, ``пожалуPassword``), they would lengthen the key past its format or the label into another word.
_LOOK_ALIKES = "аеорксухіјѕԁһӏԛԝАВЕКМНОРСТХУІЈЅαοκρινΑΒΕΖΗΙΚΜΝΟΡΤΥΧ"
HOMOGLYPHS = str.maketrans(_LOOK_ALIKES, "aeopkcyxijsdhlqwABEKMHOPCTXYIJSaokpivABEZHIKMNOPTYX")
#: A run of ASCII letters and look-alikes holding at least one of each (one lookahead for each).
HOMOGLYPH_WORD = re.compile(f"(?<![A-Za-z{_LOOK_ALIKES}])(?=[A-Za-z]*+[{_LOOK_ALIKES}])(?=[{_LOOK_ALIKES}]*+[A-Za-z])"
                            f"[A-Za-z{_LOOK_ALIKES}]++")
#: A label set off by Markdown or HTML: emphasis or code (``**Password:**``, ``__Token__:``, `` `DB_PASSWORD` ``),
#: a tag (``<b>Password:</b>``); a table's cells are :mod:`table_secrets`'. Read without its marks when it holds a
#: credential word (:data:`secret_labels.MARKED_CREDENTIAL`): the patterns know a label joined to its value by
#: ``:``, not by ``**``. As in Markdown, a mark is set against the label, not a space (``/* password: … */`` is a
#: comment, its ``*`` kept). Groups: the label and the colon inside the marks, in emphasis (2, 3) and in a tag (4, 5).
MARKED_LABEL = re.compile(
    r"(?<![\w*`])(\*{1,2}+|_{1,2}+|`)(?!\s)([^*`<>|\n]{1,40}?)(?<!\s)([:：]?)\1(?![\w*`])"
    r"|<(?:b|strong|em|i|u|code)>([^<>|\n]{1,40}?)([:：]?)</(?:b|strong|em|i|u|code)>"
)
#: Half-width katakana (``ﾊﾟｽﾜｰﾄﾞ``, as old Japanese systems write it), read as the full-width kana they stand for.
HALF_WIDTH_KANA = re.compile("[\uff61-\uff9f]++")
#: Circled, negative-circled and dingbat digits (``①``, ``⓪``, ``❼``, ``➁``) between two printable ASCII characters, read
#: as ASCII digits: typed into a password (``Kq⑦#vLp②Wx``), they would end it for every pattern. A list's ``① 安装``
#: keeps its marks, and superscripts (``x²``, ``m³``) are not read.
_COMPAT_DIGITS = "①②③④⑤⑥⑦⑧⑨⓪❶❷❸❹❺❻❼❽❾➀➁➂➃➄➅➆➇➈➊➋➌➍➎➏➐➑➒"
COMPAT_DIGIT = re.compile(f"(?<=[!-~])[{_COMPAT_DIGITS}]++(?=[!-~])")
COMPAT_DIGITS = str.maketrans(_COMPAT_DIGITS, "1234567890" + "123456789" * 3)
#: ``\\uXXXX`` escapes of JSON (``json.dumps`` writes ``密码是`` as ``\\u5bc6\\u7801\\u662f``), read as their characters.
JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


def _unescape(m: re.Match[str]) -> str:
    """A JSON ``\\uXXXX`` escape as its character; a surrogate (half an emoji) is left escaped."""
    char = chr(int(m.group(1), 16))
    return m.group(0) if "\ud800" <= char <= "\udfff" else char


def fold(text: str) -> str:
    """``text`` as secrets are looked for in it: JSON ``\\uXXXX`` escapes read, Markdown and HTML marks around a
    credential's label dropped, NFC, invisible characters and marks stranded on ASCII dropped, full-width ASCII and
    half-width kana, curly quotes and look-alikes in a credential's name read as ASCII."""
    if "\\u" in text:
        text = JSON_ESCAPE.sub(_unescape, text)
    text = prefilter.sub(MARKED_LABEL, _unmarked_label, text)
    if text.isascii():
        return text
    text = INVISIBLE.sub("", unicodedata.normalize("NFC", text))
    text = STRAY_MARKS.sub("", text)
    text = COMPAT_DIGIT.sub(lambda m: m.group().translate(COMPAT_DIGITS), text)
    text = WIDE_INNER.sub(lambda m: unicodedata.normalize("NFKC", m.group()), text).translate(_AS_ASCII)
    text = HALF_WIDTH_KANA.sub(lambda m: unicodedata.normalize("NFKC", m.group()), text)
    text = SINGLE_QUOTED.sub(lambda m: f"'{m.group(1) or m.group(2)}'", text)
    return HOMOGLYPH_WORD.sub(_latin_name, text)


def _unmarked_label(m: re.Match[str]) -> str:
    """A :data:`MARKED_LABEL` match without its marks, when the
    label holds a credential word; else as it is."""
    label = m.group(2) or m.group(4)
    if not labels.MARKED_CREDENTIAL.search(label):
        return m.group()
    return label + (m.group(3) or m.group(5) or "")


def _latin_name(m: re.Match[str]) -> str:
    """A :data:`secret_HOMOGLYPH_WORD` with the credential words it holds once read as Latin read so, the
    rest as written (one character for one, so offsets in the two readings agree)."""
    word = m.group()
    latin = word.translate(HOMOGLYPHS)
    parts, last = [], 0
    for part in patterns.CREDENTIAL_PART.finditer(latin):
        parts += [word[last : part.start()], part.group()]
        last = part.end()
    return "".join(parts) + word[last:]
