"""PINs, one-time and recovery codes, licence keys and TOTP seeds after their labels, for :mod:`prose_secrets`.

``PIN: 4821``, ``验证码：553201``, ``backup codes: 1234 5678, 2345 6789``, ``激活码：KX7P2-…``, ``TOTP secret JBSWY3DP…``:
a label, then codes of a code's shape (:func:`_is_code`) or a base32 seed. Ordinary text has these labels too (``GPIO
pin 18``, ``random seed: 42``, ``npm publish --otp 123456``, a command's code used at once), so each value is judged.
Pure; linear in the length of the text; never raises.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from . import prefilter
from . import secret_patterns as patterns

#: A cloud drive's share code (百度网盘's 提取码): four letters and digits.
SHARE_CODE = re.compile(r"[A-Za-z0-9]{4}")
#: A PIN, one-time code or recovery code after its label (``PIN: 4821``, ``pin is 482193``, ``PIN码：4821``,
#: ``passcode 9921``, ``OTP: 482913``, ``ADMIN_PIN=4821``, ``{"pin": "4821"}``, ``recovery codes: 4f8a-99c2, …``,
#: ``验证码：553201``, a share's ``提取码：x7k2``, ``BitLocker recovery key: 123456-…``, a licence's ``激活码：KX7P2-…``, what a code is for
#: after it: ``the code for 2FA backup is …``): the label, what joins it (what
#: it is for, a quote, up to two of ``:`` ``=`` ``#`` ``is`` ``是``... (a Latin one not glued to a letter after it, a
#: CJK one glued too), a line break and a list's bullet, an opening bracket; a bare ``pin``
#: needs a sign or a verb: ``GPIO pin 18``), and, looked ahead at (a value without a code is not consumed: ``mfa:
#: backup_codes: …``), a run of letters, digits, spaces, ``,`` ``;`` ``-`` and brackets, whose leading codes
#: :func:`_codes` takes. Groups: ``label``, ``join``, ``value``.
LABELLED_CODE = re.compile(
    r"(?i)(?<![A-Za-z0-9])(?=[potvsa2mbrlcdgeh验驗校动取提暗認確인пк激序注产產ラプ])(?P<label>pin(?:[ _-]?code)?|passcode|otp|totp|2fa|mfa"
    r"|one[ _-]time[ _-](?:code|password|passcode)|(?:backup|recovery)[ _-](?:codes?|keys?)"
    r"|(?:verification|security|auth|authentication|2fa|mfa|login|sms|access|confirmation|door|gate|alarm|lock|safe"
    r"|entry|garage|building)[ _-]codes?|codes?[ _-]for[ _-](?:(?:the|my|your|our)[ _-])?(?:2fa|mfa|totp|otp)(?:[ _-](?:backup|recovery|login))?"
    r"|激活码|激活碼|序列号|序列號|注册码|註冊碼|产品密钥|產品金鑰|ライセンスキー|プロダクトキー|(?:license|licence|product|activation)[ _-]key"
    r"|PIN码|PIN碼|验证码|驗證碼|校验码|动态码|动态密码|取件码|提取码|提取碼|暗証番号|認証コード|確認コード|인증번호|인증 ?코드|пин-код|pin-код"
    r"|код подтверждения|code de vérification|código de verificación)(?![A-Za-z])"
    r"(?P<join>\\*+[\"']?(?:[ \t]++(?:for|of|on)[ \t]++(?:(?:the|my|our|your)[ \t]++)?[A-Za-z0-9_.-]{1,30}+)?"
    r"(?:[ \t]*+(?:(?:[:=#]|is|was)(?![A-Za-z])|[：是为為は는은—])){0,2}[ \t]*+(?:\r?\n[ \t]*+(?:-[ \t]++)?)?"
    r"\\*+[\"'\[(（「]?)"
    r"(?=(?P<value>[A-Za-z0-9][A-Za-z0-9,; \t\r\n\[\]-]{0,200}+))"
)
#: The labels of :data:`LABELLED_CODE` that name a licence or product key, whose codes hold letters.
LICENCE_LABEL = re.compile(r"(?i)激活码|激活碼|序列号|序列號|注册码|註冊碼|产品密钥|產品金鑰|ライセンスキー|プロダクトキー"
                           r"|(?:license|licence|product|activation)[ _-]key")
#: The labels of :data:`LABELLED_CODE` that name a code good for one login, for seconds or minutes (``--otp``,
#: ``--mfa-code``), not a PIN, a door's code or a recovery code, which last.
ONE_TIME_LABEL = re.compile(r"(?i)otp|totp|2fa|mfa|one[ _-]time[ _-](?:code|password|passcode)"
                            r"|(?:verification|auth|authentication|2fa|mfa|login|sms|confirmation)[ _-]codes?")
#: What separates two codes of a :data:`LABELLED_CODE` value: commas, spaces, line breaks, brackets, a list's bullet.
CODE_SEPARATOR = re.compile(r"((?:[,;\s\[\]]|(?<!\S)-(?!\S))++)")
#: The signs and verbs a bare ``pin`` needs before its code.
PIN_JOIN = re.compile(r"[:=：#是为為は는은—]|\b(?:is|was)\b")
#: A command's flag ending in ``pin`` (``--pin``, ``--new-pin``, ``-pin``), read in the 50 characters before the label: a
#: PIN given to a command (``ykman piv access change-pin --pin … --new-pin …``) needs no sign.
PIN_FLAG = re.compile(r"(?<![\w-])--?(?:[A-Za-z]{1,20}+-){0,2}+$")
#: A TOTP seed after its label (base32: 16+ capitals and digits 2 to 7, or one case in 4 or 8 groups of 4 as authenticator
#: apps show it): ``TOTP``, ``2FA``, ``MFA`` or ``OTP`` and ``secret``, ``seed`` or ``key`` (``TOTP secret …``, ``MFA seed: …``), or
#: ``seed`` alone (``seed: JBSWY3DP…``, ``2FA enabled for admin. seed: …``; not ``random seed: 42``, nor ``random_seed``).
#: A value in lower case or in groups needs a digit (``TOTP secret with your real name`` is prose), and so does one after
#: ``seed`` without a one-time code's word before it (:data:`OTP_WORD`: ``seed: ABSOLUTELYDETERMINISTIC`` is a word).
#: Groups ``otp``, ``value``.
_GROUPS = " ".join(["[A-Za-z2-7]{4}"] * 4)
OTP_SEED = re.compile(r"(?i)(?<![\w-])(?:(?P<otp>totp|2fa|mfa|otp)[ \t_-]*+(?:secret|seed|key)|seed)(?:[ \t]*+(?:[:=：是为為は]|is(?=[ \t]))[ \t]*+|[ \t]++)[\"'`]?"
                      r"(?P<value>(?-i:[A-Z2-7]{16,}+|[a-z2-7]{16,}+|" + _GROUPS + "(?: " + _GROUPS + r")?)=*+)(?![\w=])")
#: A one-time code's word that makes a ``seed`` on its line or the line before a TOTP seed (read in up to 120 characters
#: before it) whatever its letters: a seed of letters alone goes after it.
OTP_WORD = re.compile(r"(?i)(?<![\w-])(?:totp|2fa|mfa|otp|two[ -]factor|authenticator)(?![\w-])|两步验证|二步验证|双因素|二要素|2段階")


def redact(text: str, redacted: str, key: Callable[[str], bool]) -> str:
    """``text`` with the codes after a :data:`LABELLED_CODE` and the seeds after an :data:`OTP_SEED` label replaced by
    ``redacted``, the rest as it was; ``key`` tells a piece of a key (:func:`prose_secrets.key_piece`), which goes as a
    code does when 10+ characters long (``2FA backup code is Kq7vLp2WxR9t``)."""
    text = _codes(text, redacted, key)
    return prefilter.sub(OTP_SEED, lambda m: _otp_seed(m, redacted), text)


def _otp_seed(m: re.Match[str], redacted: str) -> str:
    """An :data:`OTP_SEED` match with its seed redacted: in one case, in capitals alone or with a digit, after its
    label; after ``seed`` alone with a digit, unless a one-time code's word comes before it."""
    value = m.group("value")
    digit = re.search("[2-7]", value) is not None
    if not (value.isupper() or value.islower()) or (value.islower() or " " in value) and not digit:
        return m.group()
    if m.group("otp") is None and not digit and OTP_WORD.search(m.string, max(m.start() - 120, 0), m.start()) is None:
        return m.group()
    return patterns.replace_group(m, "value", redacted)


def _is_code(token: str) -> bool:
    """4 to 12 digits, or 2 to 8 groups of 3 to 10 ASCII letters and digits joined by ``-``, each with a digit, or of
    one length and most with a digit (``4f8a-99c2``, ``ABCD-EF12-GH34``; not ``totp-sha1``, ``ERR-404-timeout``)."""
    if token.isdigit():
        return 4 <= len(token) <= 12
    groups = token.split("-")
    with_digit = sum(any(c.isdigit() for c in g) for g in groups)
    return (2 <= len(groups) <= 8 and all(g.isascii() and g.isalnum() and 3 <= len(g) <= 10 for g in groups)
            and (with_digit == len(groups) or (len(set(map(len, groups))) == 1 and 2 * with_digit > len(groups))))


def _codes(text: str, redacted: str, key: Callable[[str], bool]) -> str:
    """``text`` with the codes at the start of each :data:`secret_patterns.LABELLED_CODE` value redacted (each of a
    list: ``backup codes: 1234 5678, 2345 6789``); the words after them stay. A bare ``pin`` needs a sign or a verb
    (:data:`PIN_JOIN`), or to be a command's flag (:data:`PIN_FLAG`: ``--pin 482913``): ``pin 18`` is a board's. A match ends before its value, so a value without
    a code is searched again for a label (``mfa: backup_codes: …``); one with codes is skipped past. A command's flag
    for a one-time code (:data:`ONE_TIME_LABEL` after ``--``: ``npm publish --otp 123456``) is left: the command uses
    the code at once, and it expires."""
    out, done = [], 0
    for m in prefilter.finditer(LABELLED_CODE, text):
        if m.start() < done or (m.group("label").lower() == "pin" and not PIN_JOIN.search(m.group("join"))
                                and not PIN_FLAG.search(text, max(m.start() - 50, 0), m.start())):
            continue
        if text.endswith("--", 0, m.start()) and ONE_TIME_LABEL.fullmatch(m.group("label")):
            continue
        pieces = CODE_SEPARATOR.split(m.group("value"))  # codes at even places, what separates them at odd ones
        share = m.group("label") in ("提取码", "提取碼")  # a cloud drive's share code: 4 letters and digits (x7k2)
        # A licence key has letters: digits alone after 序列号 or "product key" are a sequence number, a table's key.
        licence = LICENCE_LABEL.fullmatch(m.group("label")) is not None
        taken = 0
        while taken < len(pieces) and (taken % 2 or (_is_code(pieces[taken]) and not (licence and pieces[taken].isdigit()))
                                       or (share and SHARE_CODE.fullmatch(pieces[taken])) or (len(pieces[taken]) >= 10 and key(pieces[taken]))):
            taken += 1
        if taken:
            out += [text[done : m.end()], *(redacted if i % 2 == 0 else piece for i, piece in enumerate(pieces[:taken]))]
            done = m.end() + sum(map(len, pieces[:taken]))
    return "".join(out) + text[done:] if out else text
