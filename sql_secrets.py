"""Passwords in SQL and Oracle's logins, for :mod:`redact`.

A password a statement sets (``CREATE USER … IDENTIFIED BY '…'``, ``ALTER USER … WITH PASSWORD '…'``, Neo4j's ``SET
PASSWORD FROM '…' TO '…'``) or a call (``db.changeUserPassword('bob', '…')``, ``sp_addlogin 'bob', '…'``), quoted or, after ``IDENTIFIED BY``, bare as Oracle takes it; an Oracle login on a
command line or in a JDBC URL (``sqlplus scott/…@db``); and an ``INSERT``'s value in a credential's column
(:func:`inserted`); MySQL's native password hash in lower case where its line names a password or a hash
(:data:`MYSQL_HASH`: in capitals it is a key format of :mod:`secret_patterns`). A quoted value goes unless a placeholder; a bare one only when
it reads as a password (:func:`prose_secrets.reads_as_password`), not a bind variable or a substitution (``:pw``,
``&pw``, ``?``). Pure; linear in the length of the text (each pattern starts at a keyword and reads a value after it
to its end, each value from one start); never raises.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from . import prefilter, prose_secrets
from .secret_patterns import line_start

#: A password in SQL: after ``IDENTIFIED BY`` (``IDENTIFIED WITH mysql_native_password BY``), ``PASSWORD`` (``WITH
#: PASSWORD``, ``LOGIN PASSWORD``, ``PASSWORD =``), MySQL's ``SET PASSWORD FOR 'bob'@'%' =`` (``= PASSWORD('…')`` too) or
#: Neo4j's ``SET PASSWORD FROM '…' TO`` (the new one), in single
#: quotes (not a selector's ``'#password'``); after ``IDENTIFIED BY`` in double quotes too, or bare to a space, ``;`` or
#: ``,`` (Oracle's ``IDENTIFIED BY Tiger2024#``; a DSL's ``password "#{…}"`` is code). Groups: ``q`` the quote,
#: ``value`` the password (to its closing quote however long, past a quote escaped by ``\\``: ``'Kq7\\'vLp'``), ``bare`` one unquoted.
SQL_PASSWORD = re.compile(
    r"(?i)(?:(?<![A-Za-z0-9_'\"#.])(?:(?P<by>IDENTIFIED[ \t]++(?:WITH[ \t]++\w{1,40}+[ \t]++)?BY)|PASSWORD)"
    r"|(?<![A-Za-z0-9_])SET[ \t]++PASSWORD[ \t]++(?:FROM[ \t]++'[^'\n]{0,200}+'[ \t]++TO|FOR[ \t]++[^\s=;]{1,200}+))[ \t]*+=?[ \t]*+"
    r"(?:PASSWORD[ \t]*+\([ \t]*+)?"
    r"(?:(?P<q>(?(by)['\"]|'))(?P<value>(?!(?P=q))[^\s,\\](?:\\[^\n]|(?!(?P=q))[^\\\n])*+)(?P=q)"
    r"|(?(by)(?P<bare>[^\s'\";,()]++)(?=[\s;,)]|$)|(?!)))")
#: An Oracle login on a command line (``sqlplus scott/…@db``, ``CONNECT system/…@XE``; Oracle's own tools without a
#: database too: ``sqlplus scott/… as sysdba``; Dameng's ``disql``; quoted: ``sqlplus "scott/…@//h/sid"``) or in a JDBC URL (``jdbc:oracle:thin:scott/…@//h``).
#: Groups: ``q`` (empty), ``value`` the password.
ORACLE_LOGIN = re.compile(
    r"(?i)(?<![A-Za-z0-9_-])(?:(?:(?P<tool>sqlplus|sqlldr|expdp|impdp|rman|dgmgrl|disql)|exp|imp|conn|connect)"
    r"(?:[ \t]++-[A-Za-z]{1,10}+){0,2}[ \t]++[\"']?|jdbc:oracle:thin:)\w{1,30}+/(?P<q>)(?P<value>[^\s/@'\"]++)"
    r"(?:@|(?(tool)(?=\s|$)|(?!)))")
#: A password given to a call that sets a login's as its second argument, after the login's name: MongoDB's
#: ``db.changeUserPassword('bob', '…')``, SQL Server's ``sp_addlogin 'bob', '…'`` (``@loginame =``, ``@passwd =``, ``N'…'``).
#: Groups: ``q`` the quote, ``value`` the password.
LOGIN_CALL = re.compile(
    r"(?i)(?:\.changeUserPassword[ \t]*+\([ \t]*+|(?<![\w])sp_addlogin[ \t]++(?:@loginame[ \t]*+=[ \t]*+)?)N?(?P<uq>['\"])[^'\"\n]{1,128}+(?P=uq)"
    r"[ \t]*+,[ \t]*+(?:@passwd[ \t]*+=[ \t]*+)?N?(?P<q>['\"])(?P<value>(?:(?!(?P=q))[^\\\n]|\\[^\n])++)(?P=q)")

#: MySQL's native password hash in lower case: ``*`` and 40 hex digits, not inside a word or between two ``*``
#: (``*…*`` is emphasis), redacted with its ``*`` when :data:`HASH_CONTEXT` names a password or a hash on its line before
#: it (``authentication_string: *…``, ``IDENTIFIED BY PASSWORD '*…'``) or it fills a table's cell (``| *… |``). A git
#: id has no ``*``; a bare ``*`` and 40 hex digits elsewhere (a glob, a footnote) stay.
MYSQL_HASH = re.compile(r"(?<![\w*])\*(?=\d{0,39}+[a-f])[0-9a-f]{40}(?![\w*])")
#: What names a password or a hash on the line before a :data:`MYSQL_HASH`, read in the 120 characters before it.
HASH_CONTEXT = re.compile(r"(?i)passw|pwd|hash|auth(?:entication)?_string|mysql_native|密码|密碼|口令|パスワード")
#: A table's cell holding the hash alone: a ``|`` and spaces before it, spaces and a ``|`` after it.
HASH_CELL = re.compile(r"[ \t]*+\|")


def redact(text: str, redacted: str, quoted_secret: Callable[[re.Match[str]], str]) -> str:
    """``text`` with SQL's passwords and Oracle's logins replaced by ``redacted``: a quoted one or a login as
    ``quoted_secret`` (:mod:`redact`'s judge of a command's password, groups ``q`` and ``value``) returns it, a bare
    one when it reads as a password; and a lower-case MySQL hash named so (:func:`_mysql_hash`)."""
    text = prefilter.sub(MYSQL_HASH, lambda m: redacted if _mysql_hash(m) else m.group(), text)
    text = prefilter.sub(SQL_PASSWORD, lambda m: _sql_password(m, redacted, quoted_secret), text)
    text = prefilter.sub(LOGIN_CALL, quoted_secret, text)
    return prefilter.sub(ORACLE_LOGIN, quoted_secret, text)


def _mysql_hash(m: re.Match[str]) -> bool:
    """Whether a :data:`MYSQL_HASH` is a password's: its line names a password or a hash before it, in up to 120
    characters (:data:`HASH_CONTEXT`), or it is a table's cell (``|`` before it and after it, spaces aside)."""
    text, start = m.string, m.start()
    line = line_start(text, start, 120)
    if HASH_CONTEXT.search(text, line, start):
        return True
    return text[line:start].rstrip(" \t").endswith("|") and HASH_CELL.match(text, m.end()) is not None


def _sql_password(m: re.Match[str], redacted: str, quoted_secret: Callable[[re.Match[str]], str]) -> str:
    """A :data:`SQL_PASSWORD` match with its password redacted: a quoted one as ``quoted_secret`` judges it, a bare one
    when it reads as a password and is not a bind variable or a substitution (``:pw``, ``&pw``, ``@pw``)."""
    bare = m.group("bare")
    if bare is None:
        return quoted_secret(m)
    if bare[0] in ":&@?$<{%" or not prose_secrets.reads_as_password(bare):
        return m.group()
    start = m.start("bare") - m.start()
    return m.group()[:start] + redacted + m.group()[start + len(bare) :]


#: An ``INSERT``'s columns, up to its ``VALUES`` (``INSERT INTO users (name, password) VALUES (…)``): each row's values
#: after it are read by :func:`inserted`, a credential column's quoted value judged as assigned to the column's name.
#: Group ``cols``.
INSERT_COLUMNS = re.compile(
    r"(?i)(?<![\w$])INSERT[ \t]++(?:IGNORE[ \t]++)?INTO[ \t]++[\w.`\"\[\]]{1,200}+[ \t]*+\((?P<cols>[^()\n;]{1,1000}+)\)\s{0,40}+VALUES\s{0,40}+(?=\()")
#: The most characters of rows :func:`inserted` reads after one ``VALUES``.
_ROWS_READ = 20_000


def inserted(text: str, redacted: str, judge: Callable[[str, str, bool], bool]) -> str:
    """``text`` with the quoted values of an ``INSERT``'s credential columns replaced by ``redacted`` (``INSERT INTO
    api_keys (name, key) VALUES ('prod', '…')``), each as ``judge`` (:mod:`redact`'s judge of an assignment) finds it
    assigned to its column's name; rows of another number of values than the columns are left. Each row is read once."""
    if "insert" not in text.lower():
        return text
    out, done, read = [], 0, 0
    for m in INSERT_COLUMNS.finditer(text):
        if m.start() < read:
            continue
        cols = [c.strip().strip("`\"[]") for c in m.group("cols").split(",")]
        if not any(judge(c, "Kq7#vLp2Wx9!", False) for c in cols):
            continue  # no credential column: a value of none is a credential's
        rows, read = _rows(text, m.end(), min(len(text), m.end() + _ROWS_READ))
        for row in rows:
            if len(row) != len(cols):
                continue
            for col, (start, stop) in zip(cols, row, strict=True):
                if start is not None and judge(col, text[start:stop], False) and start >= done:
                    out += [text[done:start], redacted]
                    done = stop
    return "".join(out) + text[done:] if out else text


def _rows(text: str, pos: int, limit: int) -> tuple[list[list[tuple[int | None, int]]], int]:
    """The rows of values from ``pos`` (a ``(``) to ``limit``: for each value, the span of a quoted one's content or
    ``(None, 0)`` for a bare one (a number, ``NULL``, ``NOW()``); and where the reading stopped."""
    rows: list[list[tuple[int | None, int]]] = []
    while pos < limit and text[pos] == "(":
        row: list[tuple[int | None, int]] = []
        pos += 1
        while pos < limit:
            while pos < limit and text[pos] in " \t\r\n":
                pos += 1
            if pos < limit and text[pos] in "'\"":
                quote, start = text[pos], pos + 1
                pos = start
                while pos < limit and (text[pos] != quote or text[pos + 1 : pos + 2] == quote):
                    pos += 2 if text[pos] == quote or text[pos] == "\\" else 1
                row.append((start, pos))
                pos += 1
            else:
                depth = 0
                while pos < limit and (depth or text[pos] not in ",)"):
                    depth += (text[pos] == "(") - (text[pos] == ")")
                    pos += 1
                row.append((None, 0))
            while pos < limit and text[pos] in " \t\r\n":
                pos += 1
            if pos >= limit or text[pos] != ",":
                break
            pos += 1
        if pos >= limit or text[pos] != ")":
            return rows, pos
        rows.append(row)
        pos += 1
        while pos < limit and text[pos] in " \t\r\n,":
            pos += 1
    return rows, pos
