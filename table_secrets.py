"""Secrets in tables, for :mod:`redact`: a credential's column under a header that names it (``| 环境 | 账号 | 密码 |``,
``host,port,user,password``, ``name<TAB>api_key``, ``Name     Password`` aligned by spaces), and a Markdown row's cell after a cell that names it (``| Password
| … |``, ``| Host | db1 | 密码 | … |``, ``| 1 | password | … |``), as an HTML row's or definition list's does
(``<th>Password</th><td>…</td>``, ``<dt>API Key</dt><dd>…</dd>``), and an HTML table's column under its ``<th>`` row.

A column is read in each row under its header: in a Markdown table, every line holding a ``|`` up to a blank line (a
short or split row is passed, not taken for the table's end); in CSV or TSV, up to a line without the separator; aligned
by spaces, up to a line of another number of cells. A
password's value goes when it is one written-out word with a digit or a symbol that is not a placeholder, a mask, a
name or prose (``admin123``, ``Hz@2024abc``; not ``-``, ``***``, ``FAIL``, ``bcrypt``, ``见 vault``); a key's or
token's when it also has letters and digits and 12+ characters (a column of token counts keeps them). A cell after a
label in a header row (followed by its delimiter row) goes only when it plainly reads as a password: it is more often
the next header (``| Password | Note |``). Each line is read once and rebuilt once: linear in the length of the text.
Pure; never raises.
"""

from __future__ import annotations

import re

from . import prefilter, prose_secrets
from . import secret_labels as labels
from . import secret_patterns as patterns

#: What a label may have before it: words of what it is for (``DB Password``, ``root_pwd``, ``Login/Password``,
#: ``Prod DB Root Password``, ``数据库密码``), and after it: what it is for in brackets (``Password (prod)``).
_BEFORE = r"(?i)(?:[A-Za-z0-9. _/-]{0,40}?[ _/-]|[\u4e00-\u9fff]{0,8})?"
_AFTER = r"(?:[ \t]*+[(（][^()（）\n]{0,20}+[)）])?"
#: A cell that names a password (``pass`` and ``pw`` only after what they are for: ``Pass`` and ``First pass`` are a
#: test's, ``PW`` a pulse's width).
PASSWORD_HEADER = re.compile(
    _BEFORE + r"(?:passwords?|passwd|pwd|passphrase|密码|密碼|口令|パスワード|비밀번호|패스워드|비번|암호|пароль|"
    + "|".join(sorted(labels.FOREIGN_PASSWORD_LABELS, key=lambda label: (-len(label), label))) + ")" + _AFTER
    + r"|(?i:(?:[A-Za-z0-9]{1,20}+_){1,2}pass|(?:[A-Za-z0-9]{1,20}+[ _-]){1,2}pw)"
)
#: A header's cell that names a login's user, beside which ``pass`` and ``pw`` alone name its password.
USER_HEADER = re.compile(r"(?i)user(?:[ _-]?name)?|login|account|e-?mail|用户名?|用戶名?|账号|帳號")
#: A cell that names a key or a token (``API Key``, ``secret_access_key``, ``Access Token``, ``SK``, ``密钥``, ``令牌``);
#: not a count of tokens or a key of another kind (``Tokens``, ``Max Token``, ``Key``, ``Primary Key``).
KEY_HEADER = re.compile(
    r"(?i)(?:(?:(?!max|min|input|output|total|used|limit|count|num|primary|foreign|sort|partition)[A-Za-z0-9.]{1,20}+[ _/-]){0,2}"
    r"|[\u4e00-\u9fff]{0,8})"
    r"(?:api[ _-]?key|(?:secret|private|access)[ _-]?(?:access[ _-]?)?key|key[ _-]?secret|(?:app|client|api)[ _-]?secret"
    r"|secret|(?:access|auth|api|bearer|refresh|bot)[ _-]?token|token|sk|私钥|私鑰|密钥|密鑰|秘钥|令牌|授权码|授權碼|凭证|憑證)"
    + _AFTER
)
#: A text that may hold a table's credential label (a cheap first look: most texts hold none).
_HINT = re.compile(r"(?i)pass|pw|sk|secret|token|key|密|口令|令牌|授权|授權|凭|憑|パス|비밀|패스|비번|암호|пароль")
#: A Markdown table's delimiter row (``|---|:--:|``), which follows its header: pipes, dashes, colons and spaces, with
#: a pipe after its first dash (in a quote, after ``>``).
DELIMITER_ROW = re.compile(r"[ \t>]*+\|?[ \t:]*+-[ \t:-]*+\|[ \t|:-]*+")
#: One cell of a row, by separator: a Markdown cell (``\|`` inside it), a CSV field (quoted with ``""`` inside, or
#: bare), a TSV field.
CELL = {"|": re.compile(r"(?:[^|\r\n\\]|\\.)*+"), ",": re.compile(r"[ \t]*+\"(?:[^\"\r\n]|\"\")*+\"[ \t]*+|[^,\r\n]*+"),
        "\t": re.compile(r"[^\t\r\n]*+")}
#: One cell of a table aligned by spaces (``Name     Password``, as a CLI prints one): words joined by single spaces,
#: two or more between cells.
ALIGNED_CELL = re.compile(r"\S(?:\S| (?=\S))*+")
#: A value a table shows where there is none, or points elsewhere (what the word lists and placeholders miss), or that
#: is a column's type, a measure or a name: ``varchar(255)``, ``1,000``, ``12.3s``, ``$1.20``, ``2.1.0``, ``8-64``,
#: ``365d``, ``colorNeutralForeground1``, ``ORDER#5f3e…``.
NO_VALUE = re.compile(r"(?i)[-—–/?]+|n/?a|\(?(?:none|empty|unset|not set|same|ditto)\)?|\**+redacted\**+"
                      r"|\w{1,30}+\([\d, ]{1,20}+\)|[$€£¥]?\d++[,.][\d,.]*+(?:%|[a-z]{1,3}+)?|[$€£¥]?\d++(?:%|[a-z]{1,3}+)"
                      r"|[$€£¥]\d++|\d++[-~–]\d++|(?-i:[a-z]++[A-Z][A-Za-z]*+\d{0,3}+|[A-Z]{2,}+#\S++)")


#: An HTML row's or definition list's cell that names a credential and the cell after it (``<th>Password</th><td>…</td>``,
#: ``<td>密码</td><td>…</td>``, ``<dt>API Key</dt><dd>…</dd>``), its value inside a ``<code>`` or emphasis too; attributes
#: and up to 40 spaces between the cells. Each attempt starts at a ``<`` and reads one pair of cells at most. Groups:
#: ``label``, ``value``.
HTML_PAIR = re.compile(
    r"(?i)<(?:td|th|dt)(?:\s[^<>]{0,200}+)?+>[ \t]*+(?P<label>[^<>\n]{1,60}+)</(?:td|th|dt)>\s{0,40}+<(?:td|dd)(?:\s[^<>]{0,200}+)?+>"
    r"[ \t]*+(?:<(?:code|kbd|b|strong|span)(?:\s[^<>]{0,100}+)?+>)?(?P<value>[^<>\n]++)<"
)

#: What an HTML table is read by, in order: a row's start (group ``tr``), a table's end, and a cell (group ``cell``: ``th``
#: or ``td``) with its text (group ``value``, in a ``<code>`` or emphasis too). A row of ``<th>`` cells names the columns
#: of the ``<td>`` rows after it (``<tr><th>User</th><th>Password</th></tr><tr><td>bob</td><td>…</td></tr>``).
HTML_CELL = re.compile(r"(?i)<(?P<tr>tr)(?=[\s>])|</table>|<(?P<cell>th|td)(?:\s[^<>]{0,200}+)?+>[ \t]*+"
                       r"(?:<(?:code|kbd|b|strong|span)(?:\s[^<>]{0,100}+)?+>)?(?P<value>[^<>\n]*+)")


def redact(text: str, redacted: str) -> str:
    """``text`` with the values of tables' credential columns and cells that read as secrets replaced by ``redacted``."""
    if not prefilter.may_match(_HINT, text):
        return text
    text = prefilter.sub(HTML_PAIR, lambda m: _html_pair(m, redacted), text)
    if "<t" in text or "<T" in text:
        text = _html_columns(text, redacted)
    if "|" not in text and "," not in text and "\t" not in text and "  " not in text:
        return text
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    separator, columns, width = "", dict[int, bool](), 0
    for i, line in enumerate(lines):
        following = lines[i + 1] if i + 1 < len(lines) else ""
        header = False
        spans = _cells(line, separator) if columns else []
        if spans and (separator == "|" or len(spans) == width):
            # a row of the table: a Markdown one short too (its cells that exist are read), a CSV or TSV one whole
            taken = {c: kind for c, kind in columns.items() if c < len(spans)}
            if separator == "|" and DELIMITER_ROW.fullmatch(line.rstrip("\r\n")):
                taken = {}
        else:
            separator, columns = _header(line, following)
            width = len(_cells(line, separator)) if columns else 0
            spans, taken, header = [], {}, bool(columns)
        pairs = _pairs(line, spans if separator == "|" and spans else _cells(line, "|"), following, header) if "|" in line else {}
        out.append(_rebuilt(line, spans, taken, pairs, redacted))
    return "".join(out)


def _html_pair(m: re.Match[str], redacted: str) -> str:
    """An :data:`HTML_PAIR` match with its value redacted when the first cell names a credential and the value reads as
    its secret (:func:`_secret`)."""
    kind = _label(_bare(m.group("label")))
    value = _bare(m.group("value"))
    if kind is None or not value or not _secret(value, kind):
        return m.group()
    start = m.start("value") + m.group("value").index(value)
    return m.string[m.start() : start] + redacted + m.string[start + len(value) : m.end()]


def _html_columns(text: str, redacted: str) -> str:
    """``text`` with the ``<td>`` cells of an HTML table's credential columns (named by the ``<th>`` row above them)
    redacted where they read as secrets (:func:`_secret`). Each cell is read once, in order."""
    out, done = [], 0
    columns: dict[int, bool] = {}
    labels: list[str] = []
    column = 0
    for m in HTML_CELL.finditer(text):
        if m["cell"] is None:  # a row's start or a table's end: a row of headers above names the columns
            if labels and len(labels) == column:
                columns = {c: kind for c, label in enumerate(labels) if (kind := _label(_bare(label))) is not None}
            columns = {} if not m["tr"] else columns
            labels, column = [], 0
            continue
        if m["cell"].lower() == "th":
            labels.append(m["value"])
        elif column in columns and (value := _bare(m["value"])) and _secret(value, columns[column]):
            start = m.start("value") + m["value"].index(value)
            out += [text[done:start], redacted]
            done = start + len(value)
        column += 1
    return "".join(out) + text[done:] if out else text


def _header(line: str, following: str) -> tuple[str, dict[int, bool]]:
    """``(separator, {column: whether it is a password's})`` when ``line`` is the header of a table holding a
    credential column (a Markdown header is followed by its delimiter row; a CSV or TSV one by a row of its width, and
    all its cells are short labels); else ``("", {})``."""
    if "|" in line and DELIMITER_ROW.fullmatch(following.rstrip("\r\n")):
        separator = "|"
    elif "\t" in line or "," in line:
        separator = "\t" if "\t" in line else ","
    elif re.search(r"\S  ", line.strip()):
        separator = "  "  # aligned by spaces
    else:
        return "", {}
    cells = [_bare(line[start:end]) for start, end in _cells(line, separator)]
    if separator != "|" and (len(cells) < 2 or len(_cells(following, separator)) != len(cells)
                             or not all(re.fullmatch(r"[\w .()/#:+-]{1,40}", cell) for cell in cells[1:] or cells)
                             or not re.fullmatch(r"[\w .()/#:+-]{0,40}", cells[0])):
        return "", {}  # not a header: a list's item (``"password",``), an argument, prose; pandas leaves the first empty
    login = any(USER_HEADER.fullmatch(cell) for cell in cells)
    columns = {column: kind for column, cell in enumerate(cells) if (kind := _label(cell, login)) is not None}
    if separator == "  " and (any(map(prose_secrets.reads_as_password, cells)) or 0 in columns):
        return "", {}  # a name and its value (DB_PASSWORD  Kq7…, then S3_BUCKET  logs), not a header and its column
    return (separator, columns) if columns else ("", {})


def _label(cell: str, login: bool = False) -> bool | None:
    """Whether ``cell`` names a password (True) or a key or token (False); ``None`` when it names neither. In a header
    with a user's column (``login``), ``pass`` and ``pw`` alone name a password (``user,pass``)."""
    cell = re.sub(r"^[^\w(（]++", "", cell)  # an emoji or a bullet before it (``🔑 Password``)
    if len(cell) > 40:
        return None
    if PASSWORD_HEADER.fullmatch(cell) or (login and re.fullmatch(r"(?i)pass|pw", cell)):
        return True
    return False if KEY_HEADER.fullmatch(cell) else None


def _pairs(line: str, spans: list[tuple[int, int]], following: str, header: bool) -> dict[tuple[int, int], bool]:
    """The cells of a Markdown row (``spans``, :func:`_cells`) that come right after a cell naming a credential,
    ``{span: whether a password's}``; in a header row (``header``, or followed by a delimiter row) only those that
    plainly read as a password."""
    header = header or bool(DELIMITER_ROW.fullmatch(following.rstrip("\r\n")))
    out = {}
    for (start, end), value_span in zip(spans, spans[1:], strict=False):
        kind = _label(_bare(line[start:end]))
        if kind is None:
            continue
        value = _bare(line[value_span[0] : value_span[1]])
        if header and not prose_secrets.reads_as_password(value):
            continue
        out[value_span] = kind
    return out


def _cells(line: str, separator: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` of each cell of ``line`` split at ``separator`` (a Markdown row's outer pipes are not cells);
    ``[]`` for a line that is not a row (a Markdown line without a pipe, a CSV line without its separator)."""
    body = line.rstrip("\r\n")
    if separator not in body:
        return []
    if separator == "  ":
        return [m.span() for m in ALIGNED_CELL.finditer(body)]
    start, end = 0, len(body)
    if separator == "|":
        start = len(body) - len(body.lstrip())
        start += body.startswith("|", start)
        stripped = body.rstrip()
        end = len(stripped) - (stripped.endswith("|") and len(stripped) > start)
    spans, at = [], start
    pattern = CELL[separator]
    while True:
        m = pattern.match(body, at, end)
        stop = m.end() if m else at
        spans.append((at, stop))
        if stop >= end or body[stop] != separator:
            return spans if stop >= end else []
        at = stop + 1


def _rebuilt(line: str, spans: list[tuple[int, int]], columns: dict[int, bool], pairs: dict[tuple[int, int], bool],
             redacted: str) -> str:
    """``line`` with the cells of ``columns`` and ``pairs`` redacted where they read as secrets (:func:`_secret`),
    built once, left to right."""
    cells = {spans[c]: kind for c, kind in columns.items()} | pairs
    if not cells:
        return line
    out, done = [], 0
    for (start, end), password in sorted(cells.items()):
        cell = line[start:end]
        value = _bare(cell)
        if value and _secret(value, password):
            at = start + cell.index(value)
            out += [line[done:at], redacted]
            done = at + len(value)
    return "".join(out) + line[done:] if out else line


def _bare(cell: str) -> str:
    """A cell's text without the spaces, quotes, Markdown code or emphasis marks and a label's colon around it."""
    return cell.strip().strip("\"'`*").strip().rstrip(":：").strip()


def _secret(value: str, password: bool) -> bool:
    """Whether a credential's ``value`` is a secret: one written-out word of 4+ printable characters without CJK, with a
    digit or a symbol, not a placeholder (already redacted too: a list's ``[…]``), a mask, a name or prose; a key's or token's also 12+
    characters with digits and letters of both cases, or a piece of 12+ lower-case letters and digits (a hex key,
    ``ak_9f8e…``), not a product's code or a resource's name (``SKU-12345-XL``, ``db-credentials-v2``)."""
    if (len(value) < 4 or re.search(r"[\u2e80-\u9fff\uac00-\ud7af\uff00-\uffef]", value) or not value.isprintable()
            or " " in value or value.isalpha() or patterns.PLACEHOLDER_VALUE.match(value) or NO_VALUE.fullmatch(value)
            or patterns.NAME_VALUE.fullmatch(value) or value.lower() in prose_secrets.PROSE_WORDS
            or re.fullmatch(r"(.)\1*+", value)):
        return False
    if password:
        return True
    mixed = re.search("[a-z]", value) is not None and re.search("[A-Z]", value) is not None
    random = any(len(part) >= 12 and re.search("[a-z]", part) and re.search("[0-9]", part) for part in re.split("[-_.]", value))
    return len(value) >= 12 and re.search("[0-9]", value) is not None and (mixed or random)
