"""Secrets in a table's credential column, for :mod:`redact`: a Markdown table, or CSV or TSV lines, whose header
names a password or a key (``| 环境 | 账号 | 密码 |``, ``host,port,user,password``, ``name<TAB>api_key``).

Each row under such a header, up to the first line that is not a row of the table's width, has the value in that
column judged: a password column's value goes when it is one written-out word that is not a placeholder, a mask or
prose (``admin123``, ``Hz@2024abc``; not ``-``, ``***``, ``required``, ``见 vault``); a key's or token's when it also
has letters and digits and 12+ characters (a column of token counts keeps them). A table read row by row in the text
as :func:`folding.fold` gives it, each line once: linear in the length of the text. Pure; never raises.
"""

from __future__ import annotations

import re

from . import prose_secrets
from . import secret_patterns as patterns

#: A header cell that names a password: the label alone, after at most two words of what it is for (``DB Password``,
#: ``root_pwd``, ``数据库密码``, ``登录口令``).
PASSWORD_HEADER = re.compile(
    r"(?i)(?:(?:[A-Za-z0-9.]{1,20}+[ _-]){0,2}|[\u4e00-\u9fff]{0,8})(?:password|passwd|pwd|passphrase|pass|pw|密码|密碼|口令|パスワード|비밀번호|비번|암호"
    r"|пароль|" + "|".join(sorted(patterns.FOREIGN_PASSWORD_LABELS, key=lambda label: (-len(label), label))) + ")"
)
#: A header cell that names a key or a token (``API Key``, ``secret_access_key``, ``Access Token``, ``SK``, ``密钥``,
#: ``令牌``); not a count of tokens or a key of another kind (``Tokens``, ``Max Token``, ``Key``, ``Primary Key``).
KEY_HEADER = re.compile(
    r"(?i)(?:(?:(?!max|min|input|output|total|used|limit|count|num|primary|foreign|sort|partition)[A-Za-z0-9.]{1,20}+[ _-]){0,2}"
    r"|[\u4e00-\u9fff]{0,8})"
    r"(?:api[ _-]?key|(?:secret|private|access)[ _-]?(?:access[ _-]?)?key|key[ _-]?secret|(?:app|client|api)[ _-]?secret"
    r"|secret|(?:access|auth|api|bearer|refresh|bot)[ _-]?token|token|sk|私钥|私鑰|密钥|密鑰|秘钥|令牌|授权码|授權碼|凭证|憑證)"
)
#: A Markdown table's delimiter row (``|---|:--:|``), which follows its header: pipes, dashes, colons and spaces, with
#: a pipe after its first dash.
DELIMITER_ROW = re.compile(r"[ \t]*+\|?[ \t:]*+-[ \t:-]*+\|[ \t|:-]*+")
#: One cell of a row, by separator: a Markdown cell, a CSV field (quoted with ``""`` inside, or bare), a TSV field.
CELL = {"|": re.compile(r"[^|\r\n]*+"), ",": re.compile(r"[ \t]*+\"(?:[^\"\r\n]|\"\")*+\"[ \t]*+|[^,\r\n]*+"),
        "\t": re.compile(r"[^\t\r\n]*+")}
#: A value a table shows where there is none, or points elsewhere (what the word lists and placeholders miss).
NO_VALUE = re.compile(r"(?i)[-—–/?]+|n/?a|\(?(?:none|empty|unset|not set|same|ditto)\)?|\**+redacted\**+")


def redact(text: str, redacted: str) -> str:
    """``text`` with the values of every table's credential column that read as secrets replaced by ``redacted``."""
    if ("|" not in text and "," not in text and "\t" not in text) or not patterns.MARKED_CREDENTIAL.search(text):
        return text
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    separator, width, columns = "", 0, dict[int, bool]()
    for i, line in enumerate(lines):
        if columns:
            spans = _cells(line, separator)
            if len(spans) == width:
                if separator != "|" or not DELIMITER_ROW.fullmatch(line.rstrip("\r\n")):
                    line = _row(line, spans, columns, redacted)
                out.append(line)
                continue
            columns = {}
        following = lines[i + 1] if i + 1 < len(lines) else ""
        separator, width, columns = _header(line, following)
        out.append(line)
    return "".join(out)


def _header(line: str, following: str) -> tuple[str, int, dict[int, bool]]:
    """``(separator, width, {column: whether it is a password's})`` when ``line`` is the header of a table holding a
    credential column (a Markdown header is followed by its delimiter row; a CSV or TSV one by a row of its width, and
    all its cells are short labels); else ``("", 0, {})``."""
    if "|" in line and DELIMITER_ROW.fullmatch(following.rstrip("\r\n")):
        separator = "|"
    elif "\t" in line or "," in line:
        separator = "\t" if "\t" in line else ","
    else:
        return "", 0, {}
    cells = [_bare(line[start:end]) for start, end in _cells(line, separator)]
    if separator != "|" and (len(_cells(following, separator)) != len(cells)
                             or not all(re.fullmatch(r"[\w .()/#-]{1,40}", cell) for cell in cells)):
        return "", 0, {}
    columns: dict[int, bool] = {}
    for column, cell in enumerate(cells):
        if len(cell) > 40:
            continue
        if PASSWORD_HEADER.fullmatch(cell):
            columns[column] = True
        elif KEY_HEADER.fullmatch(cell):
            columns[column] = False
    return (separator, len(cells), columns) if columns else ("", 0, {})


def _cells(line: str, separator: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` of each cell of ``line`` split at ``separator`` (a Markdown row's outer pipes are not cells);
    ``[]`` for a line that is not a row (a Markdown line without a pipe, a CSV line without its separator)."""
    body = line.rstrip("\r\n")
    if separator not in body:
        return []
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


def _row(line: str, spans: list[tuple[int, int]], columns: dict[int, bool], redacted: str) -> str:
    """``line`` with the cells of ``columns`` redacted where they read as secrets (:func:`_secret`)."""
    for column in sorted(columns, reverse=True):  # right to left: the offsets of the cells left of it stand
        start, end = spans[column]
        cell = line[start:end]
        value = _bare(cell)
        if value and _secret(value, columns[column], redacted):
            at = start + cell.index(value)
            line = line[:at] + redacted + line[at + len(value) :]
    return line


def _bare(cell: str) -> str:
    """A cell's text without the spaces, quotes and Markdown code or emphasis marks around it."""
    return cell.strip().strip("\"'`*").strip()


def _secret(value: str, password: bool, redacted: str) -> bool:
    """Whether a credential column's ``value`` is a secret: one written-out word of 4+ printable ASCII characters, not
    already redacted, a placeholder, a mask or prose; a key's or token's also 12+ characters with letters and digits."""
    if (len(value) < 4 or not value.isascii() or not value.isprintable() or " " in value or value.startswith(redacted[:-1])
            or patterns.PLACEHOLDER_VALUE.match(value) or NO_VALUE.fullmatch(value)
            or value.lower() in prose_secrets.PROSE_WORDS or re.fullmatch(r"(.)\1*+", value)):
        return False
    return password or (len(value) >= 12 and re.search("[A-Za-z]", value) is not None and re.search("[0-9]", value) is not None)
