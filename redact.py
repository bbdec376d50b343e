"""Redaction: what of an endpoint or a text may be shown, stored, logged or sent.

* Endpoints: :func:`redact_url` gives a URL as it may be shown or stored
  (consent matches a digest instead: :func:`config_schema.endpoint_digest`);
  :func:`split_query` and :func:`endpoint_secrets` take apart a configured URL
  for the HTTP client and for scrubbing error texts.
* Text that leaves the machine: :func:`redact_secrets` replaces secret-looking
  strings by ``[redacted]``; the patterns are in :mod:`secret_patterns` and :mod:`secret_labels`.
* Logs: :func:`guard_logs` keeps an endpoint's credentials out of the records
  of the HTTP client's loggers.

Invariants: every function here is pure and never raises, except :func:`guard_logs`, which installs one logging
filter on the HTTP client's loggers. The secrets that filter knows are process-wide and only ever grow (forgetting
one would let a client built earlier log it), so they are not kept in :mod:`state` and no reset clears them. Which
module finds which shapes of secret is docs/architecture.md's table (the ``*_secrets`` modules, :mod:`seed_phrases`,
:mod:`random_tokens`, :mod:`folding`); this one runs them in order (:func:`redaction_steps`).
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from . import (
    code_secrets,
    command_secrets,
    config_secrets,
    cookie_secrets,
    folding,
    literal_secrets,
    prefilter,
    prose_secrets,
    random_tokens,
    seed_phrases,
    sql_secrets,
    table_secrets,
)
from . import secret_labels as labels
from . import secret_patterns as patterns
from .output_secrets import redact as redact_output

#: What :func:`redact_secrets` puts in place of a secret-looking string.
REDACTED = "[redacted]"
#: What an endpoint's credentials become where the endpoint is shown, and in scrubbed texts and logs.
MASK = "***"
#: Secrets shorter than this are never replaced: they would match ordinary text.
_MIN_SECRET = 4

# ---------------------------------------------------------------------------
# Endpoints
# ---------------------------------------------------------------------------

def _query_pairs(url: str) -> list[tuple[str, str, bool]]:
    """``(name, raw value, looks secret)`` of each ``name=value`` of ``url``'s query string."""
    try:
        query = urlsplit(url).query
    except ValueError:
        return []
    out = []
    for part in query.split("&"):
        name, sep, value = part.partition("=")
        if not sep:
            continue
        secret = bool(value) and (
            patterns.URL_SECRET_NAMES.match(_param_key(name)) is not None
            or redact_secrets(unquote(value)) != unquote(value)
        )
        out.append((name, value, secret))
    return out


def _param_key(name: str) -> str:
    """A query parameter's name as :data:`secret_patterns.URL_SECRET_NAMES` is matched: unquoted, lower case, ``-`` as
    ``_``."""
    return unquote(name).strip().lower().replace("-", "_")


def split_query(url: str) -> tuple[str, dict[str, str]]:
    """``(url without its query string and fragment, {name: value} of that query, unquoted)``; never raises.

    The HTTP client is given the query apart: it would append its own path after a query left in the base URL.
    An empty or unparsable URL, or one without a query, comes back as it is with ``{}``.
    """
    if not url:
        return url, {}
    try:
        parts = urlsplit(url)
    except ValueError:
        return url, {}
    if not parts.query:
        return url, {}
    query = {}
    for part in parts.query.split("&"):
        name, _, value = part.partition("=")
        if name:
            query[unquote(name)] = unquote(value)
    return urlunsplit(parts._replace(query="", fragment="")), query


def redact_url(url: str) -> str:
    """``url`` as it may be shown or stored: userinfo (``user:key@``) and secret-looking query values become ``***``.

    A value is secret-looking by its parameter's name (``key``, ``token``, ``sig``...) or by its form
    (:func:`redact_secrets`); path segments go through :func:`redact_secrets`, a secret-looking fragment becomes
    ``***``. A URL that cannot be parsed goes through :func:`redact_secrets` whole. Never raises.
    """
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
    except ValueError:
        return redact_secrets(url)
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = parts.query
    if query:
        secret = {(name, value) for name, value, is_secret in _query_pairs(url) if is_secret}
        pieces = []
        for part in query.split("&"):
            name, sep, value = part.partition("=")
            pieces.append(f"{name}=***" if sep and (name, value) in secret else part)
        query = "&".join(pieces)
    path = "/".join(quote(redact_secrets(unquote(seg)), safe="@:$&'()*+,;=-._~[]!") if seg else seg
                    for seg in parts.path.split("/"))
    fragment = "***" if parts.fragment and redact_secrets(unquote(parts.fragment)) != unquote(parts.fragment) else parts.fragment
    return urlunsplit((parts.scheme, netloc, path, query, fragment))


def endpoint_secrets(base_url: str, api_key: str) -> list[str]:
    """What must never appear in an error text or a log: ``api_key``, and the credentials inside ``base_url``.

    Those are the userinfo (raw, unquoted, and as a Basic auth header carries it) and the secret-looking query
    values (raw and unquoted), longest first (a secret containing another is replaced whole), without duplicates
    or any shorter than 4 characters. Never raises.
    """
    found = [api_key]
    try:
        parts = urlsplit(base_url)
        user, password = parts.username or "", parts.password or ""
    except ValueError:
        user = password = ""
    found += [user, password, unquote(user), unquote(password)]
    if user or password:
        found.append(base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode())
    found += [v for _, value, secret in _query_pairs(base_url) if secret for v in (value, unquote(value))]
    return sorted({f for f in found if len(f) >= _MIN_SECRET}, key=len, reverse=True)


def mask_secrets(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` (longest first, as :func:`endpoint_secrets` gives them) replaced by ``***``."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


# ---------------------------------------------------------------------------
# Text that leaves the machine
# ---------------------------------------------------------------------------


def _name_segments(name: str) -> list[str]:
    """``DB_PASSWORD`` -> ``[db, password]``, ``apiKey`` -> ``[api, key]``, ``x-api-key`` -> ``[x, api, key]``."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w.lower() for w in re.split(r"[\s_.-]+", spaced) if w]


def _credential_kind(name: str) -> str | None:
    """``"strong"`` for a name whose value is a credential (``DB_PASSWORD``, ``PGPASSWORD``, ``apiKey``), ``"weak"``
    for one whose value is a credential only if it looks like one (``auth``, ``DB_PASS``, ``STRIPE_KEY``, ``GITHUB_PAT``), else None.

    ``PWD`` alone is weak: the shell's working directory (a path, :func:`_names_something`) or ODBC's password.
    """
    words = _name_segments(name)
    if not words or (words[-1] in ("token", "tokens") and words[-2:-1] in (["max"], ["min"], ["num"])):
        return None  # a count of a model's tokens (max_token=4096), not a token
    last = "password" if words[-1] == "passwords" else words[-1]  # a list of them: passwords: a, b
    if len(words) >= 2 and words[-2] == "pass":
        last = "pass" + last  # PassPhrase, PassWord
    if last in patterns.CREDENTIAL_WORDS or last.endswith(patterns.CREDENTIAL_ENDINGS):
        return "strong"
    if last == "key" and len(words) >= 2:
        if words[-2] in patterns.KEY_QUALIFIERS:
            return "strong"
        if words[-2] in patterns.WEAK_KEY_QUALIFIERS:
            return "weak"
        bare = name.lstrip("-")
        if bare.isupper() and "_" in bare and words[-2] not in patterns.PLAIN_KEY_QUALIFIERS:
            return "weak"
    if last == "pat" and len(words) >= 2 and name.lstrip("-").isupper():
        return "weak"  # a personal access token's (GITHUB_PAT, AZURE_DEVOPS_PAT); a pattern's is in lower case (url_pat)
    if last in patterns.WEAK_CREDENTIAL_WORDS:
        return "weak"
    if last == "pw" and patterns.PW_NAME.search(name.lstrip("-")):
        return "weak"
    return None


def redact_secrets(text: str) -> str:
    """``text`` with secret-looking strings replaced by ``[redacted]``, the rest left as it was.

    docs/guarantees.md lists the shapes replaced (keys, tokens, passwords and PINs in code, command lines, URLs,
    headers and prose in fourteen languages, seed phrases, random-looking tokens) and those kept (git object ids,
    UUIDs, identifiers, paths); :mod:`secret_patterns` says why each pattern is written so. Secrets are looked for
    in the text as :func:`folding.fold` reads it; when one is found, that folded text is returned with it replaced, else
    ``text`` exactly as given. Linear in the length of ``text``. Never raises.
    """
    steps = redaction_steps(text)
    folded = next(steps)
    redacted = deque(steps, maxlen=1)[0]  # the last step's text
    return text if redacted == folded else redacted


def redaction_steps(text: str) -> Iterator[str]:
    """``text`` after each step of :func:`redact_secrets`: folded by :func:`folding.fold`, then after each pass over it, in
    order (a pass reads what the one before it gave). The last is the redacted text. Each step is linear in the
    length of ``text``, which tests check step by step: a step's cost is not hidden by the others'."""
    text = folding.fold(text)
    yield text
    yield (text := prefilter.sub(patterns.PEM, REDACTED, text))
    yield (text := prefilter.sub(patterns.URL_USERINFO, _userinfo, text))
    yield (text := prefilter.sub(patterns.WEBHOOK, _webhook, text))
    yield (text := prefilter.sub(patterns.QUERY_PAIR, _query_pair, text))
    yield (text := prefilter.sub(patterns.COOKIE_HEADER, lambda m: m.group(1) + prefilter.sub(patterns.COOKIE_PAIR, _cookie_pair, m.group(2)), text))
    yield (text := cookie_secrets.redact(text, REDACTED))
    yield (text := prefilter.sub(patterns.AUTH_HEADER, lambda m: (m.group(1) or m.group(3)) + REDACTED, text))
    yield (text := prefilter.sub(patterns.WRAPPED_KEY, _wrapped_key, text))
    yield (text := prefilter.sub(patterns.KEY_FORMATS, lambda m: m.group() if len(set(m.group()[-12:])) == 1 else REDACTED, text))  # docs' sk-xxx…x stays
    yield (text := prose_secrets.redact(text, REDACTED))
    yield (text := table_secrets.redact(text, REDACTED))
    yield (text := prefilter.sub(patterns.CLI_SECRET, _cli_secret, text))
    yield (text := sql_secrets.redact(text, REDACTED, _cli_secret))
    yield (text := prefilter.sub(patterns.CREDENTIAL_FILE, _cli_secret, text))
    yield (text := code_secrets.redact(text, REDACTED, _judged_secret))
    yield (text := literal_secrets.redact(text, REDACTED, _judged_secret))
    yield (text := sql_secrets.inserted(text, REDACTED, _judged_secret))
    yield (text := command_secrets.redact(text, REDACTED, _judged_secret))
    yield (text := config_secrets.redact(text, REDACTED, _judged_secret))
    yield (text := redact_output(text, REDACTED, _judged_secret))
    yield (text := prefilter.sub(patterns.NAMED_VALUE, _named_value, text))
    yield (text := prefilter.sub(labels.LABELLED, _labelled, text))
    yield (text := prefilter.sub(labels.LABELLED_DIGEST, lambda m: m.group(1) + REDACTED, text))
    yield (text := prefilter.sub(labels.LABELLED_KEY, lambda m: random_tokens.labelled_key(m, REDACTED), text))
    yield (text := prefilter.sub(random_tokens.KEY_NEARBY, lambda m: random_tokens.key_nearby(m, REDACTED), text))
    yield (text := seed_phrases.redact(text, REDACTED))
    yield (text := prefilter.sub(patterns.ASSIGNMENT, _assignment, text))
    yield (text := prose_secrets.listed(text, REDACTED))
    yield random_tokens.redact(text, REDACTED)


def _is_placeholder(value: str, name: str, quoted: bool = False) -> bool:
    """Whether an assigned or labelled value is not a literal secret: already redacted, code (unless ``quoted``: a
    string is not code, ``"Winter.Is.Coming7"``) or a placeholder, or the name again (``this.password = password``)."""
    pattern = patterns.PLACEHOLDER_VALUE if quoted else patterns.CODE_VALUE  # in backticks too (`null`)
    value = value.strip()
    if quoted and patterns.COLOUR.fullmatch(value) and (_password_name(name) or name in labels.CJK_PASSWORD_LABELS):
        return False  # password: "#ab12ef" is a password's value; a colour is named otherwise (color:, a theme's secret:)
    return (value.lstrip("(\"'").startswith(REDACTED[:-1]) or bool(pattern.match(value.strip("`")))
            or value in (name, name.rpartition(".")[2]))  # ("[redacted]": a parenthesised string redacted before


def _with_bang(value: str, written: str) -> int:
    """How much of ``written`` (a value as written, ``value`` without the punctuation after it) is redacted: ``value``,
    and the ``!`` after it when it reads as a password, whose last characters they are as often as a sentence's."""
    after = written[len(value) :]
    bangs = len(after) - len(after.lstrip("!"))
    return len(value) + (bangs if bangs and prose_secrets.reads_as_password(value) else 0)


def _userinfo(m: re.Match[str]) -> str:
    """A URL's ``user:password@`` redacted, unless its password is empty or a placeholder (``root:@``, ``:<password>@``,
    ``:${DB_PASS}@``); a long token as the user alone goes."""
    _, colon, password = m.group(2).partition(":")
    return m.group(0) if colon and (not password or _is_placeholder(password, "", quoted=True)) else f"{m.group(1)}{REDACTED}@"


def _webhook(m: re.Match[str]) -> str:
    """A webhook URL's secret path redacted, unless each segment of it is a placeholder, as documentation writes them
    (``T00000000/B00000000/XXXXXXXX``, ``hook/xxxxxxxx``, ``YOUR/WEBHOOK/URL``): two distinct characters at most, or
    capitals and ``_`` alone."""
    segments = [s for s in m.group(0)[len(m.group(1)) :].split("/") if s]
    if all(len(set(s)) <= 2 or re.fullmatch("[A-Z_]++", s) or _is_placeholder(s, "", quoted=True) for s in segments):
        return m.group(0)
    return m.group(1) + REDACTED


def _wrapped_key(m: re.Match[str]) -> str:
    """A :data:`secret_patterns.WRAPPED_KEY` match redacted whole when its two lines join into a known key format that
    its first line does not hold whole (a whole key's next line is its own, a log's ``starting server``: the key
    alone goes, by :data:`secret_patterns.KEY_FORMATS`)."""
    first, rest = re.split(patterns.LINE_BREAK, m.group(0), maxsplit=1)
    if patterns.KEY_FORMATS.fullmatch(first) or not patterns.KEY_FORMATS.fullmatch(first + rest):
        return m.group(0)
    return REDACTED


def _query_pair(m: re.Match[str]) -> str:
    """A query string's ``name=value`` with the value redacted when the name is a credential's."""
    name, value = _param_key(m.group(1)), m.group(2)
    if patterns.URL_SECRET_NAMES.match(name) is None or len(value) < _MIN_SECRET or _is_placeholder(value, name):
        return m.group(0)
    return patterns.replace_group(m, 2, REDACTED)


def _cookie_pair(m: re.Match[str]) -> str:
    """A cookie's ``name=value`` with the value redacted when the name is a session's or a credential's, or the value
    reads as a password whatever surrounds it (``user_info=Kq7#vLp2Wx``; ``_ga=GA1.1.123``, ``lang=zh`` stay)."""
    if len(m.group(2)) < _MIN_SECRET:
        return m.group(0)
    if patterns.COOKIE_SECRET_NAMES.search(m.group(1)) is None and not prose_secrets.reads_strongly(m.group(2)):
        return m.group(0)
    return patterns.replace_group(m, 2, REDACTED)


def _cli_secret(m: re.Match[str]) -> str:
    """A :data:`secret_patterns.CLI_SECRET`, :data:`sql_secrets.SQL_PASSWORD` or :data:`sql_secrets.ORACLE_LOGIN`
    match (groups ``q`` and ``value``) with the password redacted (kept when a variable or placeholder)."""
    value = m.group("value")
    if len(value) < _MIN_SECRET or value.startswith("$") or _is_placeholder(value, "", quoted=bool(m.group("q"))):
        return m.group(0)
    if not m.group("q") and value.lower().rstrip(patterns.VALUE_END) in patterns.FLAG_PROSE:
        return m.group(0)  # the flag named in prose: "use the --password option", "--token flag"
    return patterns.replace_group(m, "value", REDACTED)


def _assignment(m: re.Match[str]) -> str:
    """An :data:`secret_patterns.ASSIGNMENT` match with its literal value redacted (kept when code or prose).

    A bare value runs to the next space; the sentence or call punctuation that ends it (``,`` ``)`` ``.``) stays.
    """
    group = next(g for g in (6, 7, 8, 9, 10) if m.group(g) is not None)  # one of them: the pattern ends in their alternatives
    start, end = m.span(group)
    value = m.group(group)
    if group == 10:
        shell = patterns.SHELL_DEFAULT.match(m.string, max(m.start() - 2, 0)) or patterns.SHELL_DEFAULT.match(m.string, start)
        if shell and shell.end() > start:  # a shell's default after its operator (${DB_PASSWORD:-…}; :? a message's, none)
            start, value = shell.end(), "" if shell.group().endswith("?") else m.string[shell.end() : end]
        if m.string.endswith(("?", "&"), 0, m.start()):
            value = value.partition("&")[0]  # a query's pair (?password=true&x=1): the next pair is not its value
        value = value.rstrip(patterns.VALUE_END + "\\")
        end = start + len(value)
        if (REDACTED[:-1] in value or (value.endswith(("-", "_")) and _is_placeholder(m.group(10), m.group(1)))
                or m.string.endswith("--- PASS", 0, m.end(1))):
            return m.group(0)  # a pair redacted before (PW: bob/[redacted]: its user stays), a key's prefix and an ellipsis
            # as docs write a key (ANTHROPIC_API_KEY=sk-ant-...), a Go test passed (--- PASS: TestLogin2)
        if m.string.endswith(("$", "$env:"), 0, m.start()) and re.fullmatch(r"[A-Z][a-z]{1,15}+-[A-Z][A-Za-z]{1,40}+", value):
            return m.group(0)  # PowerShell runs a bare word: a cmdlet ($env:API_KEY = Read-Host -AsSecureString)
    if group == 8 and m.group(3) and m.group(4) == ":" and not m.group(5) and re.fullmatch(r"[A-Za-z_]\w{0,62}+", value):
        return m.group(0)  # psql's variable interpolated as a literal (ALTER USER app WITH PASSWORD :'pw')
    if (m.group(4) == "=>" or "]" in m.group(2)) and not (patterns.DEFAULT_SECRET.fullmatch(value) and (
            group != 10 or prose_secrets.reads_as_password(value))):
        return m.group(0)  # a rule or a message in an array ('password' => 'required|min:8', errors['token'] = '…'), a
        # match arm's or a hash's name (Token => TokenType); a bare value is the line's last word (secrets.DB_PASSWORD => …)
    prose_colon = m.group(4) == ":" and bool(m.group(5))
    if not _assigned_secret(m.group(1), value, m.string, end, group == 10, prose_colon):
        return m.group(0)
    return m.string[m.start() : start] + REDACTED + m.string[start + _with_bang(value, m.string[start : m.end(group)]) : m.end()]


def _named_value(m: re.Match[str]) -> str:
    """A :data:`secret_patterns.NAMED_VALUE` match with its value redacted when an assignment of it to its name would
    be (:func:`_assigned_secret`); a default, or a JSON pair's value (a header's in a HAR or Postman file: ``{"name":
    "X-CSRF-Token", "value": "Fetch"}``), only when it also reads as a password by itself."""
    name = next(m.group(g) for g in patterns.NAMED_NAMES if m.group(g))
    group = next(g for g in patterns.NAMED_VALUES if m.group(g) is not None)
    start, value = m.start(group), m.group(group)
    if group == "bare":
        value = value.rstrip(patterns.VALUE_END + "\\")
    json_pair = group == "quoted" and ":" in m.string[m.start() : m.start("attr")]
    if (group in patterns.DEFAULT_VALUES or json_pair) and not patterns.DEFAULT_SECRET.fullmatch(value):
        return m.group(0)
    if not _assigned_secret(name, value, m.string, start + len(value), group == "bare", group == "bare"):
        return m.group(0)
    return patterns.replace_group(m, group, REDACTED, _with_bang(value, m.group(group)))


def _assigned_secret(name: str, value: str, text: str, end: int, bare: bool, prose_colon: bool) -> bool:
    """Whether ``value`` (ending at ``end`` in ``text``; ``bare``: not quoted; ``prose_colon``: after ``: ``) assigned
    to ``name`` is a literal credential: the name is a credential's (:func:`_credential_kind`) or a password's, and
    the value is not code, a placeholder, prose, a variable, a setting or a name."""
    kind = _credential_kind(name)
    password = _password_name(name)
    if (kind is None and not password) or not value or _is_placeholder(value, name, quoted=not bare):
        return False
    if not bare and prose_secrets.reads_as_sentence(value):
        return False  # a UI string or a message under a credential's key ("Enter your password")
    if password and value.isascii() and value.isalpha() and _passphrase(value, text, end):
        return True  # a pass's or pwd's too, which letters alone otherwise leave a setting
    if kind is None:
        return False
    if bare:
        if prose_colon and re.fullmatch(r"[A-Za-z_]+", value):
            return False  # prose ("token: the one from the vault") or an annotation, not a literal
        segments = _name_segments(value)
        named = re.fullmatch(r"[A-Za-z_]\w*", value) or (not password and re.fullmatch(r"[a-z][a-z0-9]*+(?:-[a-z0-9]++)++", value))
        if named and len(segments) > 1 and patterns.CREDENTIAL_PART.fullmatch(segments[-1]):
            return False  # a variable (password=hashed_password, api_key = refreshed_key) or a Secret's name (existingSecret:
            # db-credentials), not a literal (password=secret, password: super-secret)
        if len(value) < _MIN_SECRET:
            return False
    if kind == "weak" and (not re.search(r"[^A-Za-z_.-]", value) or re.search(r"\{\w{0,40}+\}|%[sd]", value)
                           or re.fullmatch(r"[a-z]{2,12}+(?::[\w.-]{1,40}+){1,4}+", value)):
        # a setting (auth=basic, credentials: 'same-origin'), a template (f"task_{digest}", "sess:{}", "sess:%s") or a
        # namespaced cache key ('cart:v2:items'), not a credential
        return False
    segments = _name_segments(name)
    if segments[-1] == "pat" and not (re.fullmatch(r"[A-Za-z0-9_-]{20,200}+", value) and re.search(r"\d", value)):
        return False  # a personal access token is one run of 20+ letters and digits; a pattern's value is not (IPV4_PAT = r"…")
    login = re.fullmatch(r"[\w.@-]{1,64}+/(?P<pw>[^/\s]{6,200}+)", value) if segments[-1] == "auth" else None
    if login and prose_secrets.reads_as_password(login["pw"]):
        return True  # a login and its password (NEO4J_AUTH=neo4j/Hq4!zWm8Rt, neo4j/Password123), not a path
    if kind == "weak" and (segments[-1] not in ("pass", "pwd", "pw") or segments == ["pwd"]) and _names_something(value):
        return False  # a name (S3_KEY=uploads/a.png, auth: oauth2, PWD=/home/bob); a pass's value is a password whatever it reads as
    return True


def _judged_secret(name: str, value: str, bare: bool) -> bool:
    """:func:`_assigned_secret` of ``value`` alone, the judge :mod:`code_secrets` and :mod:`command_secrets` are given."""
    return _assigned_secret(name, value, value, len(value), bare, False)


def _password_name(name: str) -> bool:
    """Whether ``name`` (an assignment's name or a label) is a password's, after which letters alone can be one
    (:func:`_passphrase`): ending in :data:`secret_patterns.PASSWORD_ENDINGS`, or ``pass`` as its last word."""
    return name.lower().endswith(patterns.PASSWORD_ENDINGS) or _name_segments(name)[-1:] == ["pass"]


def _names_something(value: str, password: bool = False) -> bool:
    """Whether ``value`` names something (a path, a constant, an algorithm, ``bearer-token-v2``) rather than being a
    secret: :data:`secret_patterns.NAME_VALUE`, or words and numbers joined by ``-`` ``_`` ``.``, each piece a
    :data:`secret_patterns.NAME_PIECE` (``hGzPp1nM`` is not: its case and digits change inside a piece); after a
    password's label not a generator's passphrase, 3+ Capitalised words and a number joined by ``-`` (``Orange-Tractor-91-Lemon``)."""
    if patterns.NAME_VALUE.fullmatch(value):
        return True
    pieces = re.split(r"[-_.]", value)
    if password and "_" not in value and "." not in value and sum(p.isalpha() and p.istitle() for p in pieces) >= 3 and any(p.isdigit() for p in pieces):
        return not all(p.isdigit() or (p.isalpha() and p.istitle()) for p in pieces)
    return len(pieces) > 1 and any(c.isalpha() for c in value) and all(patterns.NAME_PIECE.fullmatch(p) for p in pieces)


def _passphrase(value: str, text: str, end: int) -> bool:
    """Whether ``value`` (letters alone after a password's name or label, ending at ``end`` in ``text``) is a passphrase:
    a clause ends right after it (:data:`secret_patterns.CLAUSE_END`, read in place: no copy of the rest of the text),
    and it is, in lower case if written all in capitals or Capitalised, a :data:`secret_patterns.PASSPHRASE` not a word
    with an adjective's ending, or three or more Capitalised words not ending as a type's name does."""
    if patterns.CLAUSE_END.match(text, end) is None:
        return False
    if value.isupper() or value.istitle():
        value = value.lower()  # PASSWORD: CORRECTHORSE…, password: Correcthorse…; not CamelCase, told below
    if patterns.PASSPHRASE.fullmatch(value):
        return len(value) > patterns.WORD_LENGTH or not value.endswith(patterns.WORD_ENDINGS)
    words = patterns.CAMEL_WORD.findall(value)
    return (len(value) >= 12 and len(words) >= 3 and "".join(words) == value
            and not value.endswith(patterns.TYPE_ENDINGS))


def _labelled(m: re.Match[str]) -> str:
    """A :data:`secret_labels.LABELLED` match with the value after the label redacted, when it reads as one.

    A Latin label needs a verb (``is``, ``ist``...) or a CJK joiner (``password=`` is an assignment), or ``:`` or
    ``=`` after a label that is not ASCII (``contraseña=``, which assignments, named in ASCII, miss) or after what
    the value is for (``password for the db:``), or ``=>`` ``->`` ``→`` `` - `` (``:`` after two words: ``api key:``) before a
    value that reads as a password (:func:`prose_secrets.reads_as_password`) and holds no brackets or quotes, as code
    does; and a value with a digit or a symbol, or a passphrase, that names nothing (:func:`_names_something`).
    Trailing punctuation stays (``!`` goes with a value that reads as a password); so does a value already redacted in
    part (``admin/[redacted]``).
    """
    label, joiner = m.group(1), m.group(2)
    group = next(g for g in (5, "coded", "paren", 7) if m.group(g) is not None)  # quoted, in <code>, in brackets, bare
    quoted = m.group(group) if group != 7 else None
    value, start = m.group(group), m.start(group)
    if quoted is None:
        value = value.rstrip(patterns.VALUE_END)
    if len(value) < _MIN_SECRET or _is_placeholder(value, label, quoted=quoted is not None) or REDACTED[:-1] in value:
        return m.group(0)
    if quoted is None and not value.isascii() and not re.search(r"[0-9!-/:-@\[-`{-~]", value):
        return m.group(0)  # a word of another script, not a password (пароль от почты лежит в сейфе; Café2024! goes)
    if re.fullmatch(r"\d{1,5}+(?:[-~～到至]\d{1,5}+)?", value) and m.string.startswith(patterns.SIZE_UNITS, start + len(value)):
        return m.group(0)  # a length or a size (密码是8-16位, 密钥是2048位), not a value
    if _NEGATED.match(m.group("purpose") or "") and _QUANTITY.fullmatch(value):
        return m.group(0)  # what the label does not do (The token do not expire: 3600s), not what it holds
    foreign = labels.FOREIGN_LABEL.fullmatch(label) is not None
    after = joiner[len(m.group("purpose") or "") :].strip()  # what joins the value, what it is for left out
    if max(label) < "\u0250" or foreign:  # Latin script, or a word for key or token of another
        words = after.lower().replace("…", "...")  # an ellipsis as its dots
        assigned = (foreign or not label.isascii() or m.group("purpose") is not None) and words[:1] in (":", "=", "：")
        arrow = words[:2] in ("=>", "->", "..", ". ") or words[:1] in ("→", "⇒") or (words[:1] == "-" and joiner[:1].isspace() and joiner[-1:].isspace())  # not password-login, --flag
        arrow |= (" " in label or "/" in label or group == "coded") and words[:1] == ":"  # a label no assignment names: api key:, p/w:
        reads = prose_secrets.reads_strongly if re.match(r"(?:\.{3}|…)[ \t]", joiner) else prose_secrets.reads_as_password
        digits_key = label[:3].lower() == "wpa" and value.isdigit() and 8 <= len(value) <= 63  # a Wi-Fi key of digits (WPA: 8 to 63)
        assigned |= arrow and (reads(value) or digits_key) and not re.search("[\"'()\\[\\]{}<>|`]", value)  # after an ellipsis (Checking password... Passed2), strongly
        # the label's word and a version, as code names a kind (a match arm's Token => TokenV2), not a password's
        assigned &= _password_name(label) or not re.fullmatch(f"(?i:{re.escape(label.replace(' ', ''))})[-_]?[Vv]\\d{{1,3}}+", value)
        # a password's label right before its value, after a login's user or a clause (username admin password …, user
        # root pwd …, the wifi is X, password …), in brackets (the db password (…) expired, password: […]) or of another language, as
        # Turkish writes it (şifrem …, yeni şifre …)
        paren = group == "paren" and words in ("", ":", "：", "=")  # password (…), password: (…), password(…)
        if (paren or not words and joiner[:1].isspace()) and re.search(r"\d", value) and (prose_secrets.reads_as_password(value) or digits_key):
            before = _USER_BEFORE.search(m.string, max(m.start(1) - 80, 0), m.start(1))
            assigned = label.lower() in labels.FOREIGN_PASSWORD_LABELS or ((_password_name(label) or label.lower() == "pw") and (paren or (
                before is not None and (before[1] is not None or prose_secrets.reads_strongly(m.group(group)))))) or (label[:3].lower() == "wpa" and len(value) >= 8)
        if not assigned and (not words or words[0] in ":=-→⇒" or (words.isascii() and not labels.LATIN_VERBS.search(words))):
            return m.group(0)
        password = _password_name(label) or label.lower() in labels.FOREIGN_PASSWORD_LABELS
        passphrase = password and _passphrase(value, m.string, start + len(value))
        if not (passphrase or re.search(r"[0-9!-/:-@\[-`{-~]", value)) or _names_something(value, password):
            return m.group(0)  # prose, or a name (the private key is id_ed25519)
    elif patterns.CJK_NAME_VALUE.fullmatch(value) or (value.isalpha() and _PLACE_AFTER.match(m.string, start + len(value))):
        return m.group(0)  # an algorithm, or where it is kept (パスワードは Vault に保存, 密码是 Vault 里的)
    if _weakly_labelled(m, after) and not _plainly_a_password(value, label):
        return m.group(0)  # what it uses or is (密码也是 bcrypt 哈希的, Set max token to 4096), not a value
    return patterns.replace_group(m, group, REDACTED, _with_bang(value, m.group(group)))


#: A purpose that says what not to do (``password do not share:``, ``token do not expire:``): a value after it is
#: judged as after any purpose, but for a time (:data:`_QUANTITY`), which says when, not what (``3600s``).
_NEGATED = re.compile(r"(?i)[ \t]++\w++[ \t]++not(?![\w.@-])")
#: A number and a unit of time (``3600s``, ``90d``, ``24h``, ``30days``).
_QUANTITY = re.compile(r"(?i)\d{1,9}+(?:\.\d{1,3}+)?(?:ms|s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|w|weeks?|mo|months?|y|yrs?|years?)")


#: A CJK particle or word of place after a word (``Vault に``, ``Bitwarden で``, ``Vault 里``; not ``に変更``, ``です``): where it is kept.
_PLACE_AFTER = re.compile(r"[ \t]*+(?:に(?!変|な)|で(?!す|し)|へ|里|裡)")
#: A login's user (group 1) or a clause's comma right before a password's label (``username admin password …``, ``user: root
#: pwd …``, ``account bob@corp.com pwd …``; ``ssh pi@raspberrypi.local, password …`` when it reads strongly: not ``, password Hashing2024 job``).
_USER_BEFORE = re.compile(r"(?i)(?:(?<![\w-])((?:user(?:name)?|login|account)[ \t]*+[:=：]?[ \t]*+[\w.@-]{1,64}+[ \t,，]++)|[,，;；][ \t]*+)$")


def _weakly_labelled(m: re.Match[str], joiner: str) -> bool:
    """Whether a :data:`secret_labels.LABELLED` match, joined to its value by ``joiner``, is of a form as often
    followed by what the credential is as by its value: a joiner not :data:`secret_labels.PLAIN_JOIN`'s (a space
    alone before a word: ``密码 reset link sent``), a label of :data:`secret_labels.NAMING_LABELS`, one glued after a
    word (``Redis密码是 requirepass 配置的``; not a network's: ``wifi密码是 88888888a`` is its value) or in JSON quotes
    (``"密码": "Password"``), a value in brackets (``密码（至少8位）``) or a label two clauses back (``redis 没设密码，mongo 的是 …``)."""
    before = m.string[m.start(1) - 1] if m.start(1) else " "
    glued = before.isascii() and before.isalnum() and not re.search(r"(?i)(?:wi-?fi|wlan)$", m.string[max(m.start(1) - 5, 0) : m.start(1)])
    aside = m.group("paren") is not None or (m.group("purpose") or " ")[0] in "，," or (not joiner and (m.group(7) or "").isalpha())
    return m.group(1) in labels.NAMING_LABELS or glued or aside or labels.PLAIN_JOIN.sub("", joiner).strip() != ""


def _plainly_a_password(value: str, label: str) -> bool:
    """Whether ``value`` reads as a password (:func:`prose_secrets.reads_as_password`) and as nothing else: not a
    name, a path, an address (``root@localhost``), an algorithm, an assignment, code in backticks, words or an aside
    (``(stored in vault)``); or is a mail server's 授权码 (16 lower-case letters)."""
    if label in ("授权码", "授權碼") and re.fullmatch("[a-z]{16}", value):
        return True
    return (prose_secrets.reads_as_password(value) and not _names_something(value, _password_name(label))
            and not patterns.CJK_NAME_VALUE.fullmatch(value) and code_secrets.EMAIL.fullmatch(value) is None
            and re.search(r"[\s`=]|^[(\[{<]", value) is None and not re.fullmatch(r"[A-Za-z_.-]++@[A-Za-z_.-]++", value))


# ---------------------------------------------------------------------------
# Logs
# ---------------------------------------------------------------------------


class _SecretsFilter(logging.Filter):
    """Replaces known secrets by ``***`` in the records of the HTTP client's loggers (they log request URLs as configured)."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: tuple[str, ...] = ()

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a record whose arguments do not fit its format: left to logging's own report
            return True
        clean = mask_secrets(message, self.secrets)
        if clean != message:
            record.msg, record.args = clean, None
        return True


_LOG_FILTER = _SecretsFilter()
#: Held while the filter's secrets are extended: two clients built at once must not drop each other's.
_LOG_FILTER_LOCK = threading.Lock()
#: The loggers that print a request's URL: httpx at INFO, openai's client at DEBUG.
_URL_LOGGERS = ("httpx", "openai._base_client", "openai")


def guard_logs(secrets: Sequence[str]) -> None:
    """Keep ``secrets`` (an endpoint's credentials) out of the log records of the HTTP client; returns nothing, never raises.

    Idempotent: the filter is installed once per logger; its secrets only grow (see the module docstring).
    """
    with _LOG_FILTER_LOCK:
        known = set(_LOG_FILTER.secrets) | {s for s in secrets if len(s) >= _MIN_SECRET}
        if not known:
            return
        _LOG_FILTER.secrets = tuple(sorted(known, key=len, reverse=True))
        for name in _URL_LOGGERS:
            target = logging.getLogger(name)
            if _LOG_FILTER not in target.filters:
                target.addFilter(_LOG_FILTER)
