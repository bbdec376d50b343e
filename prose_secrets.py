"""Secrets written the way people write them rather than in a format, for :mod:`redact`.

A login's password in ``user:password@host`` without a URL's ``//`` or with a ``/`` in it, in a pair after a label
(``creds: admin / …``) or in a command's user and password flags; PINs and one-time or recovery codes after their
label; and passphrases of words and spaces after a password label. Each is found by a pattern of
:mod:`secret_patterns` and judged here: these shapes are also what ordinary text is made of
(``email:alice2024@example.com``, ``GPIO pin 18``, ``password: see the vault entry``, ``docker run -u 1000:1000 -p
8080:80``), so a value goes only when it reads as a secret. Pure; linear in the length of the text; never raises.
"""

from __future__ import annotations

import re

from . import secret_patterns as patterns


def redact(text: str, redacted: str) -> str:
    """``text`` with those secrets replaced by ``redacted``, the rest as it was."""
    text = patterns.BARE_USERINFO.sub(lambda m: _bare_userinfo(m, redacted), text)
    text = patterns.SLASHED_USERINFO.sub(lambda m: _slashed_userinfo(m, redacted), text)
    text = patterns.CREDENTIAL_PAIR.sub(lambda m: _password_in(m, redacted), text)
    text = patterns.USER_PASS_FLAGS.sub(lambda m: _password_in(m, redacted), text)
    text = _codes(text, redacted)
    return patterns.PASSPHRASE_WORDS.sub(lambda m: _passphrase_words(m, redacted), text)


def reads_as_password(value: str, redacted: str) -> bool:
    """Whether ``value`` is written out (not already redacted, a variable or a placeholder such as ``$PASS``) and reads
    as a password: 6+ characters with a letter and a symbol (``Sup3r$ecret9``) or letters of both cases and a digit
    (``Sup3rS3cretPw``). ``alice2024``, ``8080:80`` and ``shop`` do not."""
    if len(value) < 6 or value.startswith(redacted[:-1]) or patterns.CODE_VALUE.match(value):
        return False
    lower, upper, digit = (any(map(test, value)) for test in (str.islower, str.isupper, str.isdigit))
    return (lower or upper) and (patterns.PASSWORD_SYMBOL.search(value) is not None or (lower and upper and digit))


def _bare_userinfo(m: re.Match[str], redacted: str) -> str:
    """A :data:`secret_patterns.BARE_USERINFO` match with its password redacted when it reads as one, after a user
    that is not an address's label (``email:``, ``mailto:``)."""
    if m.group("user").lower() in patterns.ADDRESS_LABELS or not reads_as_password(m.group("password"), redacted):
        return m.group()
    return f"{m.group('user')}:{redacted}@"


def _slashed_userinfo(m: re.Match[str], redacted: str) -> str:
    """A :data:`secret_patterns.SLASHED_USERINFO` match with its password redacted when, its ``/`` aside, it reads as
    one and does not start with a port (``https://host:8443/api/Items2Get@x`` is a host, a port and a path)."""
    password = m.group("password")
    if password.partition("/")[0].isdigit() or not reads_as_password(password.replace("/", ""), redacted):
        return m.group()
    return m.string[m.start() : m.start("password")] + redacted + "@"


def _password_in(m: re.Match[str], redacted: str) -> str:
    """A :data:`secret_patterns.CREDENTIAL_PAIR` or :data:`secret_patterns.USER_PASS_FLAGS` match with its ``value``
    redacted when it reads as a password (trailing punctuation of a sentence stays)."""
    value = m.group("value").rstrip(patterns.VALUE_END)
    if not reads_as_password(value, redacted):
        return m.group()
    start = m.start("value")
    return m.string[m.start() : start] + redacted + m.string[start + len(value) : m.end()]


def _is_code(token: str) -> bool:
    """4 to 12 digits, or 2 to 8 groups of 3 to 10 ASCII letters and digits joined by ``-``, each with a digit, or of
    one length and most with a digit (``4f8a-99c2``, ``ABCD-EF12-GH34``; not ``totp-sha1``, ``ERR-404-timeout``)."""
    if token.isdigit():
        return 4 <= len(token) <= 12
    groups = token.split("-")
    with_digit = sum(any(c.isdigit() for c in g) for g in groups)
    return (2 <= len(groups) <= 8 and all(g.isascii() and g.isalnum() and 3 <= len(g) <= 10 for g in groups)
            and (with_digit == len(groups) or (len(set(map(len, groups))) == 1 and 2 * with_digit > len(groups))))


def _codes(text: str, redacted: str) -> str:
    """``text`` with the codes at the start of each :data:`secret_patterns.LABELLED_CODE` value redacted (each of a
    list: ``backup codes: 1234 5678, 2345 6789``); the words after them stay. A bare ``pin`` needs a sign or a verb
    (:data:`secret_patterns.PIN_JOIN`): ``pin 18`` is a board's. A match ends before its value, so a value without
    a code is searched again for a label (``mfa: backup_codes: …``); one with codes is skipped past."""
    out, done = [], 0
    for m in patterns.LABELLED_CODE.finditer(text):
        if m.start() < done or (m.group("label").lower() == "pin" and not patterns.PIN_JOIN.search(m.group("join"))):
            continue
        pieces = patterns.CODE_SEPARATOR.split(m.group("value"))  # codes at even places, what separates them at odd ones
        taken = 0
        while taken < len(pieces) and (taken % 2 or _is_code(pieces[taken])):
            taken += 1
        if taken:
            out += [text[done : m.end()], *(redacted if i % 2 == 0 else piece for i, piece in enumerate(pieces[:taken]))]
            done = m.end() + sum(map(len, pieces[:taken]))
    return "".join(out) + text[done:] if out else text


def _passphrase_words(m: re.Match[str], redacted: str) -> str:
    """A :data:`secret_patterns.PASSPHRASE_WORDS` match with its words redacted when they read as a passphrase: 3 to 8
    words of letters (4 to 8 after a verb, but for a passphrase's: ``the password was rotated last week``), one may be a number, all lower
    case or all Capitalised, none of :data:`secret_patterns.PROSE_WORDS`, and no Latin letter right after them (the
    clause ends; CJK text may follow). A sentence-case run is a description (``password: Keyring backend name``)."""
    value = m.group("value").rstrip(" \t'-")
    end = m.start("value") + len(value)
    after = m.string[end : end + 1]
    words = value.split()
    letters = [w for w in words if not w.isdigit()]
    verb = patterns.LATIN_VERBS.search(m.string, m.end("label"), m.start("value")) is not None
    fewest = 4 if verb and m.group("label").lower() != "passphrase" else 3
    if (not fewest <= len(words) <= 8 or len(words) - len(letters) > 1 or (after.isalpha() and after < "\u0250")
            or not all(w.isalpha() for w in letters)
            or not (all(w.islower() for w in letters) or all(w.istitle() for w in letters))
            or any(w.lower() in patterns.PROSE_WORDS for w in words)):
        return m.group()
    return m.string[m.start() : m.start("value")] + redacted + m.string[end : m.end()]
