"""Passwords in SQL and Oracle's logins, for :mod:`redact`.

A password a statement sets (``CREATE USER … IDENTIFIED BY '…'``, ``ALTER USER … WITH PASSWORD '…'``, Neo4j's ``SET
PASSWORD FROM '…' TO '…'``), quoted or, after ``IDENTIFIED BY``, bare as Oracle takes it; and an Oracle login on a
command line or in a JDBC URL (``sqlplus scott/…@db``). A quoted value goes unless a placeholder; a bare one only when
it reads as a password (:func:`prose_secrets.reads_as_password`), not a bind variable or a substitution (``:pw``,
``&pw``, ``?``). Pure; linear in the length of the text (each pattern starts at a keyword and reads a bounded stretch
after it); never raises.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from . import prefilter, prose_secrets

#: A password in SQL: after ``IDENTIFIED BY`` (``IDENTIFIED WITH mysql_native_password BY``), ``PASSWORD`` (``WITH
#: PASSWORD``, ``LOGIN PASSWORD``, ``PASSWORD =``) or Neo4j's ``SET PASSWORD FROM '…' TO`` (the new one), in single
#: quotes (not a selector's ``'#password'``); after ``IDENTIFIED BY`` in double quotes too, or bare to a space, ``;`` or
#: ``,`` (Oracle's ``IDENTIFIED BY Tiger2024#``; a DSL's ``password "#{…}"`` is code). Groups: ``q`` the quote,
#: ``value`` the password, ``bare`` one unquoted.
SQL_PASSWORD = re.compile(
    r"(?i)(?:(?<![A-Za-z0-9_'\"#.])(?:(?P<by>IDENTIFIED[ \t]++(?:WITH[ \t]++\w{1,40}+[ \t]++)?BY)|PASSWORD)"
    r"|(?<![A-Za-z0-9_])SET[ \t]++PASSWORD[ \t]++FROM[ \t]++'[^'\n]{0,200}+'[ \t]++TO)[ \t]*+=?[ \t]*+"
    r"(?:(?P<q>(?(by)['\"]|'))(?P<value>(?!(?P=q))[^\s,](?:(?!(?P=q))[^\n]){0,199}+)(?P=q)"
    r"|(?(by)(?P<bare>[^\s'\";,()]{1,200}+)(?=[\s;,)]|$)|(?!)))")
#: An Oracle login on a command line (``sqlplus scott/…@db``, ``CONNECT system/…@XE``; Oracle's own tools without a
#: database too: ``sqlplus scott/… as sysdba``; Dameng's ``disql``; quoted: ``sqlplus "scott/…@//h/sid"``) or in a JDBC URL (``jdbc:oracle:thin:scott/…@//h``).
#: Groups: ``q`` (empty), ``value`` the password.
ORACLE_LOGIN = re.compile(
    r"(?i)(?<![A-Za-z0-9_-])(?:(?:(?P<tool>sqlplus|sqlldr|expdp|impdp|rman|dgmgrl|disql)|exp|imp|conn|connect)"
    r"(?:[ \t]++-[A-Za-z]{1,10}+){0,2}[ \t]++[\"']?|jdbc:oracle:thin:)\w{1,30}+/(?P<q>)(?P<value>[^\s/@'\"]{1,128}+)"
    r"(?:@|(?(tool)(?=\s|$)|(?!)))")


def redact(text: str, redacted: str, quoted_secret: Callable[[re.Match[str]], str]) -> str:
    """``text`` with SQL's passwords and Oracle's logins replaced by ``redacted``: a quoted one or a login as
    ``quoted_secret`` (:mod:`redact`'s judge of a command's password, groups ``q`` and ``value``) returns it, a bare
    one when it reads as a password."""
    text = prefilter.sub(SQL_PASSWORD, lambda m: _sql_password(m, redacted, quoted_secret), text)
    return prefilter.sub(ORACLE_LOGIN, quoted_secret, text)


def _sql_password(m: re.Match[str], redacted: str, quoted_secret: Callable[[re.Match[str]], str]) -> str:
    """A :data:`SQL_PASSWORD` match with its password redacted: a quoted one as ``quoted_secret`` judges it, a bare one
    when it reads as a password and is not a bind variable or a substitution (``:pw``, ``&pw``, ``@pw``)."""
    bare = m.group("bare")
    if bare is None:
        return quoted_secret(m)
    if bare[0] in ":&@?$<{%" or not prose_secrets.reads_as_password(bare, redacted):
        return m.group()
    start = m.start("bare") - m.start()
    return m.group()[:start] + redacted + m.group()[start + len(bare) :]
