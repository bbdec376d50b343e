"""Session cookies written outside a ``Cookie:`` header, for :mod:`redact`.

A cookie's value given in code or a file rather than a header line (which
:data:`secret_patterns.COOKIE_HEADER` reads): a dict or a call under a session cookie's name (``cookies =
{"sessionid": "…"}``, ``s.cookies.set('sessionid', '…')``, PowerShell's ``Cookie("sessionid", "…")``), a call setting
a cookie (``res.cookie('session', '…')``, ``set_cookie(…)``), Go's
``http.Cookie{Name: "session", Value: "…"}``, a HAR file's ``{"name": …, "value": …}``, a Netscape ``cookies.txt`` line (curl's, yt-dlp's: domain, flags, path,
expiry, name, value between tabs), a row copied from a browser's cookie table (name, value, domain, path) and
Bilibili's ``SESSDATA`` by its shape.

A value goes when its cookie's name is a session's or a credential's (:data:`secret_patterns.COOKIE_SECRET_NAMES`);
in a dict or a call, where the name may be a setting's (``{"session": "default"}``), only under a session cookie's
own name (:data:`SESSION_COOKIE`) and when it reads as a token: 16+ letters and digits with both, not a UUID. Pure; linear in the
length of the text (each pattern starts at a quote, ``Cookie{`` or a line's start and reads a value after it to its
end, each value from one start); never raises.
"""

from __future__ import annotations

import re

from . import prefilter
from . import secret_patterns as patterns

#: The names frameworks give their session cookie (Django's ``sessionid``, PHP's, Java's and ASP.NET's, Express'
#: ``connect.sid``, Bilibili's ``SESSDATA``, Rails' and Laravel's ``_app_session``).
SESSION_COOKIE = re.compile(r"(?i)sessionid|phpsessid|jsessionid|asp\.net_sessionid|connect\.sid|sessdata|[a-z0-9_]{0,40}?_session")
#: A session cookie's name quoted, then ``:`` (a dict) or ``,`` (a call: ``set('sessionid', …)``, ``Cookie("sessionid",
#: …)``), then its quoted value. Groups ``name``, ``value``.
QUOTED_COOKIE = re.compile(
    r"(?<![\w\"'])[\"'](?P<name>[\w.-]{1,60}+)[\"'][ \t]*+[:,][ \t]*+[\"'](?P<value>[A-Za-z0-9%._:-]{16,}+)[\"']")
#: A cookie's ``name=value`` pasted without its header (``sessionid=…; csrftoken=…``), judged as :data:`QUOTED_COOKIE`'s
#: (a session cookie's name, a token's value). Groups ``name``, ``value``.
BARE_COOKIE = re.compile(r"(?<![\w.-])(?P<name>[\w.-]{1,60}+)=(?P<value>[A-Za-z0-9%._:-]{16,}+)")
#: A call that sets a cookie, its name then its value (Express' ``res.cookie('session', '…')``, Flask's and Django's
#: ``set_cookie('session', '…')`` and ``key=``/``value=``, PHP's ``setcookie(…)``, Gin's ``c.SetCookie("token", "…", …)``,
#: ``cookies.set(…)``): the name is a cookie's for certain, so any session's or credential's goes
#: (:data:`secret_patterns.COOKIE_SECRET_NAMES`), when the value, to its closing quote, has letters and digits. Groups ``name``, ``value``.
COOKIE_CALL = re.compile(
    r"(?i)(?<![\w$])(?:set_?cookie|cookie|cookies\.(?:set|add))\([ \t]*+(?:key[ \t]*+=[ \t]*+)?[\"'](?P<name>[\w.-]{1,60}+)[\"']"
    r"[ \t]*+,[ \t]*+(?:value[ \t]*+=[ \t]*+)?(?P<q>[\"'])(?P<value>(?:\\[^\n]|(?!(?P=q))[^\\\n])++)(?P=q)")
#: Bilibili's ``SESSDATA`` by its shape, under any name or none (``SESSDATA=…``, ``"SESSDATA": "…"``, ``SESSDATA 是 …``): 8
#: hex digits, a 10-digit expiry, 5 hex digits, ``*`` and the rest, joined by ``,`` (URL-encoded ``%2C`` and ``%2A`` too).
SESSDATA = re.compile(r"(?<![A-Za-z0-9%])[0-9a-f]{8}(?:%2[Cc]|,)\d{10}(?:%2[Cc]|,)[0-9a-f]{5}(?:%2[Aa]|\*)[A-Za-z0-9_-]{2,}+")
#: Go's ``http.Cookie{Name: "…", Value: "…"}``. Groups ``name``, ``value``.
GO_COOKIE = re.compile(
    r"Cookie\{\s*+Name:[ \t]*+\"(?P<name>[^\"\n]{1,100}+)\"[ \t]*+,\s*+Value:[ \t]*+\"(?P<value>(?:[^\"\\\n]|\\[^\n]){4,}+)\"")
#: A cookie of a HAR file or a browser's export, an object of ``"name"`` then ``"value"`` (``{"name": "sessionid",
#: "value": "…"}``), on one line or several. Groups ``name``, ``value``.
NAME_VALUE_COOKIE = re.compile(
    r"\"name\"\s*+:\s*+\"(?P<name>[^\"\n]{1,100}+)\"\s*+,\s*+\"value\"\s*+:\s*+\"(?P<value>[A-Za-z0-9%._:+/=-]{16,}+)\"")
#: A Netscape ``cookies.txt`` line (``#HttpOnly_`` marks one), or a row of a browser's cookie table: name, value,
#: domain, path (the row's name at a line's start or after a tab, so each value is read from one start). Each value,
#: as :data:`QUOTED_COOKIE`'s, :data:`GO_COOKIE`'s and :data:`NAME_VALUE_COOKIE`'s, runs to its end however long (a
#: session's cookie may hold a few KB). Groups ``name``, ``value``.
COOKIE_LINE = re.compile(
    r"(?m:^)(?:(?:#HttpOnly_)?[\w.-]{1,253}+\t(?i:TRUE|FALSE)\t[^\t\n]{1,200}+\t(?i:TRUE|FALSE)\t\d{1,20}+\t"
    r"(?P<name>[^\t\n]{1,100}+)\t(?P<value>[^\t\n]{4,}+)(?m:$)"
    r"|(?:(?m:^)|(?<=\t))(?P<name2>[^\t\n]{1,100}+)\t(?P<value2>[^\t\n]{4,}+)\t\.?[\w-]{1,63}+\.[\w.-]{1,190}+\t/)")


def redact(text: str, redacted: str) -> str:
    """``text`` with those cookies' values replaced by ``redacted``, the rest as it was."""
    text = prefilter.sub(QUOTED_COOKIE, lambda m: _quoted(m, redacted), text)
    text = prefilter.sub(BARE_COOKIE, lambda m: _quoted(m, redacted), text)
    text = prefilter.sub(COOKIE_CALL, lambda m: _named(m, redacted, token=True), text)
    text = prefilter.sub(GO_COOKIE, lambda m: _named(m, redacted), text)
    text = prefilter.sub(NAME_VALUE_COOKIE, lambda m: _named(m, redacted, token=True), text)
    text = prefilter.sub(COOKIE_LINE, lambda m: _named(m, redacted), text)
    return prefilter.sub(SESSDATA, redacted, text)


def _quoted(m: re.Match[str], redacted: str) -> str:
    """A :data:`QUOTED_COOKIE` or :data:`BARE_COOKIE` match with its value redacted under a session cookie's name, when it reads as a token."""
    value = m.group("value")
    token = re.search("[A-Za-z]", value) is not None and re.search("[0-9]", value) is not None
    if not SESSION_COOKIE.fullmatch(m.group("name")) or not token:  # not [redacted] either: no digit
        return m.group()
    if re.fullmatch(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}", value):
        return m.group()  # a UUID: a conversation's or a client's id ("sessionId": "9b2c6f1e-…"), not a session's secret
    return patterns.replace_group(m, "value", redacted)


def _named(m: re.Match[str], redacted: str, token: bool = False) -> str:
    """A :data:`COOKIE_CALL`, :data:`GO_COOKIE`, :data:`NAME_VALUE_COOKIE` or :data:`COOKIE_LINE` match with its value redacted when the
    cookie's name is a session's or a credential's (and, with ``token``, the value has letters and digits)."""
    group = "value" if m.group("name") is not None else "value2"
    name = m.group("name") or m.group("name2")
    if patterns.COOKIE_SECRET_NAMES.search(name) is None or m.group(group).startswith(redacted[:-1]):
        return m.group()
    if token and not (re.search("[A-Za-z]", m.group(group)) and re.search("[0-9]", m.group(group))):
        return m.group()
    return patterns.replace_group(m, group, redacted)
