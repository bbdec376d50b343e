"""Redaction: what of an endpoint or a text may be shown, stored, logged or sent.

* Endpoints: :func:`redact_url` gives a URL as it may be shown or stored
  (userinfo and secret-looking query values and path segments as ``***``);
  :func:`endpoint_digest` is what consent matches instead of the URL's
  credentials; :func:`split_query` and :func:`endpoint_secrets` take apart a
  configured URL for the HTTP client and for scrubbing error texts.
* Text that leaves the machine: :func:`redact_secrets` replaces secret-looking
  strings (key formats, private key blocks, ``Authorization`` values,
  credential assignments, long random tokens) by ``[redacted]``.
* Logs: :func:`guard_logs` keeps an endpoint's credentials out of the records
  of the HTTP client's loggers.

Invariants: every function here is pure and never raises, except
:func:`guard_logs`, which installs one logging filter on the HTTP client's
loggers. The secrets that filter knows are process-wide and only ever grow:
they are not a cache (forgetting one would let a client built earlier log it),
so they are not kept in :mod:`state` and no reset clears them. Imports nothing
of the plugin.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import math
import re
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from urllib.parse import quote, unquote, urlsplit, urlunsplit

#: What :func:`redact_secrets` puts in place of a secret-looking string.
REDACTED = "[redacted]"
#: What an endpoint's credentials become where the endpoint is shown, and in scrubbed texts and logs.
MASK = "***"
#: Secrets shorter than this are never replaced: they would match ordinary text.
_MIN_SECRET = 4

# ---------------------------------------------------------------------------
# Endpoints
# ---------------------------------------------------------------------------

#: Query parameter names whose values are credentials (compared lower-case, ``-`` read as ``_``).
_URL_SECRET_NAMES = re.compile(
    r"^(?:.*_)?(?:key|apikey|api_key|token|access_token|auth|authorization|secret|client_secret|password|passwd|pwd"
    r"|sig|signature|code|credential|credentials|session|sas)$"
)


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
            _URL_SECRET_NAMES.match(unquote(name).strip().lower().replace("-", "_")) is not None
            or redact_secrets(unquote(value)) != unquote(value)
        )
        out.append((name, value, secret))
    return out


def split_query(url: str) -> tuple[str, dict[str, str]]:
    """``(url without its query string and fragment, {name: value} of that query, unquoted)``; never raises.

    The HTTP client is given the query apart (it would append its own path
    after a query left in the base URL) and sends it with every request. An
    empty or unparsable URL, or one without a query, comes back as it is with ``{}``.
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

    A value is secret-looking by its parameter's name (``key``, ``api_key``,
    ``token``, ``sig``...) or by its form (see :func:`redact_secrets`); secret-looking
    path segments are redacted too. A URL that cannot be parsed is passed
    through :func:`redact_secrets` whole. Never raises.
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


def endpoint_digest(url: str) -> str:
    """The SHA-256 (hex) of an endpoint as configured (credentials included): what consent matches, without storing them."""
    return hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()


def endpoint_secrets(base_url: str, api_key: str) -> list[str]:
    """What must never appear in an error text or a log: ``api_key``, and the credentials inside ``base_url``.

    Those are the userinfo (raw, unquoted, and as the Basic auth header
    carries them) and the secret-looking query values (raw and unquoted).
    Returns them longest first (a secret containing another is replaced
    whole), without duplicates or any shorter than 4 characters. Never raises.
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


# Where a secret may start: not right after an ASCII letter, digit or joiner of its own kind. The classes are
# ASCII on purpose: CJK characters are word characters (``\w``, ``\b``), and people write keys straight into
# Chinese or Japanese text ("访问密钥是AKIA...请"). Every pattern below starts with such a lookbehind, so a match is
# tried only at the start of a run of its characters, never again inside it (a run of 100,000 letters and dots is
# tried once, not 100,000 times), and quantifiers followed by a character their class excludes are possessive
# (``*+``, ``++``): what cannot match is given up at once instead of backtracked over.
_TOKEN_START = r"(?<![A-Za-z0-9_-])"

# Provider key formats (each a whole token).
_KEY_FORMATS = re.compile(
    _TOKEN_START + r"(?:"
    r"sk-ant-[A-Za-z0-9_-]{16,}+"  # Anthropic
    r"|sk-(?:proj-|svcacct-|admin-|or-v1-)?(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{20,}+"  # OpenAI, OpenRouter
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}+"  # Stripe
    r"|gh[pousr]_[A-Za-z0-9]{30,}+|github_pat_[A-Za-z0-9_]{22,}+"  # GitHub
    r"|glpat-[A-Za-z0-9_-]{20,}+"  # GitLab
    r"|xox[abposr]-[A-Za-z0-9-]{10,}+"  # Slack
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key id
    r"|AIza[0-9A-Za-z_-]{35}"  # Google
    r"|hf_[A-Za-z0-9]{30,}+"  # Hugging Face
    r"|eyJ[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+"  # a JWT
    r")"
)
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*-----|\Z)", re.DOTALL)
_AUTH_HEADER = re.compile(
    r"(?i)(?<![A-Za-z0-9_])(authorization[\"']?\s*+[:=]\s*+[\"']?(?:(?:bearer|basic|token|bot)\s++)?)(?!(?-i:[a-z]+)(?![A-Za-z0-9_]))"
    r"([A-Za-z0-9._~+/=-]{8,}+)"
    # a bare bearer token has digits: "bearer authentication" is prose
    r"|(?<![A-Za-z0-9_])(bearer\s++)(?=[A-Za-z0-9._~+/=-]*\d)([A-Za-z0-9._~+/=-]{12,}+)"
)
_URL_USERINFO = re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*+://)([^\s/@:]*+:[^\s/@]++|[^\s/@:]{16,}+)@")
#: Webhook URLs whose path is the credential (Slack, Discord): the path goes, the host stays.
_WEBHOOK = re.compile(
    r"(?<![A-Za-z0-9.-])((?:hooks\.slack\.com/(?:services|workflows|triggers)|(?:discord(?:app)?\.com|ptb\.discord\.com)"
    r"/api/webhooks)/)([A-Za-z0-9_/-]{8,}+)"
)
#: ``name = value`` / ``name: value`` where the name ends in a credential word (``DB_PASSWORD``, ``apiKey``, ``token``...);
#: only such names are matched, so ``database: password=...`` is not swallowed by ``database:``. A name starts a
#: run of name characters (dots included), so each run is tried once.
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.-])((?:[A-Za-z_][A-Za-z0-9_.-]{0,60}?)?(?i:password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key"
    r"|secret[_-]?key|private[_-]?key|signing[_-]?key|encryption[_-]?key|master[_-]?key))"
    r"([\"']?)(\s*+)(:|=|：)(\s*+)(?:(\"|')([^\"'\n]{1,200})\6|((?:(?![\"'`,;<>)\]}])[!-~]){1,200}))"
)
#: A password or key written after a label in prose, in the languages users write (``密码是hGzPp1nM``,
#: ``口令：x9``, ``パスワードは…``, ``비밀번호는 …``, ``пароль: …``, ``password is …``): the label, what joins it to
#: the value (``是``, ``为``, ``：``, ``は``, ``is``...), and the value, a run of printable ASCII (which ends where the
#: text goes back to its own script) or a quoted string. English labels need ``is``/``was`` or a CJK joiner here
#: (``password=...`` is :data:`_ASSIGNMENT`'s), and a value with a digit or a symbol (prose: "the password is in
#: the vault").
_LABELLED = re.compile(
    r"(?i)(?<![A-Za-z0-9_])(密码|密碼|口令|密钥|密鑰|秘钥|令牌|パスワード|暗証番号|비밀번호|암호|пароль|паролем|пароля"
    r"|password|passwd|passphrase|pwd)"
    r"(\s*+(?:(?:是|为|為|は|が|는|은|가|이|:|：|=|is|was|—|-)\s*+){0,2})"
    r"(?:([\"'“「『])([^\"'”」』\n]{1,200})[\"'”」』]|([!-~]{4,200}+))"
)
#: Trailing punctuation that ends a sentence, not a password
_VALUE_END = ".,;:!?)]}>'\""
#: ("credentials" is not one: fetch's ``credentials: 'include'`` is code.)
_CREDENTIAL_WORDS = {"password", "passwd", "passphrase", "secret", "token", "apikey", "accesskey", "secretkey", "privatekey",
                     "clientsecret"}
_KEY_QUALIFIERS = {"api", "access", "secret", "private", "signing", "encryption", "master"}
_CODE_VALUE = re.compile(
    r"^(?:None|null|nil|true|false|True|False|undefined|str|bytes|int|bool|float|dict|list|string|number|boolean|Any"
    r"|[A-Za-z_]\w*[.(\[].*"  # an attribute, call or index: code, not a literal
    r"|[A-Z]\w*\[.*"  # a type such as Optional[str]
    r"|\$\{?\w+\}?|%\(?\w*\)?s|\{.*|\[.*|<.*|\*+|x{3,}|X{3,}|\.{3}|…)$"  # a placeholder, a list or dict
)
_LONG_TOKEN = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/=_-]{32,}+")
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def _name_segments(name: str) -> list[str]:
    """``DB_PASSWORD`` -> ``[db, password]``, ``apiKey`` -> ``[api, key]``, ``x-api-key`` -> ``[x, api, key]``."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w.lower() for w in re.split(r"[\s_.-]+", spaced) if w]


def _is_credential_name(name: str) -> bool:
    words = _name_segments(name)
    if not words:
        return False
    if words[-1] in _CREDENTIAL_WORDS:
        return True
    return len(words) >= 2 and words[-1] == "key" and words[-2] in _KEY_QUALIFIERS


def _entropy(token: str) -> float:
    counts = Counter(token)
    return -sum(c / len(token) * math.log2(c / len(token)) for c in counts.values())


def _class_runs(token: str) -> float:
    """The mean length of runs of one character class (lower, upper, digit) in ``token``'s pieces between separators.

    Random base64 switches class every 1.5 characters or so; identifiers and
    paths are made of words (``AbstractSingletonProxy``: runs of 4 and more).
    """
    runs = letters = 0
    for piece in re.split(r"[/+=_-]+", token):
        if piece:
            runs += len(re.findall(r"[a-z]+|[A-Z]+|[0-9]+", piece))
            letters += len(piece)
    return letters / max(runs, 1)


def _looks_random(token: str) -> bool:
    """Whether a long token (32+ characters) reads as a key rather than a word, a path or a digest.

    Pure hex of 40 or 64 digits (git object ids, SHA-256 digests) and UUIDs are
    kept; other hex of 32+ digits is taken for a key (many services issue 32-hex
    keys; an MD5 checksum goes with them). Otherwise a token needs either all
    three classes (lower, upper, digits), over 4.0 bits of Shannon entropy per
    character and classes switching every couple of characters
    (:func:`_class_runs` under 2.4: identifiers and paths are made of words), or
    one case of letters with digits making up 15 % of it or more, over 3.6 bits
    per character and runs under 3.2 (``20240311_0942_add_currency`` is words).
    A heuristic: about 1 random mixed-case key in 200 reads as a word and is
    kept, and a larger share of one-case keys.
    """
    stripped = token.strip("=")
    if _HEX.match(stripped):
        return len(stripped) not in (40, 64)
    if _UUID.match(token):
        return False
    lower, upper, digits = (len(re.findall(pattern, token)) for pattern in ("[a-z]", "[A-Z]", "[0-9]"))
    if lower and upper and digits:
        return _entropy(token) > 4.0 and _class_runs(token) < 2.4
    return (bool(digits) and (lower == 0) != (upper == 0) and digits >= 0.15 * len(token) and _entropy(token) > 3.6
            and _class_runs(token) < 3.2)


def redact_secrets(text: str) -> str:
    """``text`` with secret-looking strings replaced by ``[redacted]``, the rest left as it was.

    Replaced: private key blocks (``-----BEGIN ... PRIVATE KEY-----`` to its
    ``END`` line, or to the end of the text); provider key formats (``sk-...``,
    ``sk-ant-...``, ``ghp_...``, ``github_pat_...``, ``glpat-...``, ``xox?-...``,
    ``AKIA...``, ``AIza...``, ``hf_...``, JWTs); bearer tokens and
    ``Authorization:`` values; the ``user:password@`` of URLs and the path of
    Slack and Discord webhook URLs; the value of an assignment whose name ends in
    a credential word (``password=``, ``DB_PASSWORD:``, ``api_key=``, ``apiKey:``,
    ``token=``, ``client_secret``...) unless the value is code (a call, attribute,
    type, ``None``) or a placeholder; a value written after a password label in
    prose, in Chinese, Japanese, Korean, Russian or English (``密码是…``,
    ``パスワードは…``, ``password is …``); and long random-looking tokens (see
    :func:`_looks_random`). Secrets written straight into CJK text are found as
    in spaced text. Git object ids (40 or 64 hex digits), UUIDs, identifiers and
    paths are kept. Linear in the length of ``text`` (every pattern is tried once
    per run of its characters). Never raises.
    """
    if not text:
        return text
    text = _PEM.sub(REDACTED, text)
    text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    text = _WEBHOOK.sub(lambda m: m.group(1) + REDACTED, text)
    text = _AUTH_HEADER.sub(lambda m: (m.group(1) or m.group(3)) + REDACTED, text)
    text = _KEY_FORMATS.sub(REDACTED, text)
    text = _LABELLED.sub(_labelled, text)
    text = _ASSIGNMENT.sub(_assignment, text)
    return _LONG_TOKEN.sub(lambda m: REDACTED if _looks_random(m.group(0)) else m.group(0), text)


def _is_placeholder(value: str, name: str) -> bool:
    """Whether an assigned or labelled value is not a literal secret: already redacted, code, or the name again."""
    return value.startswith(REDACTED[:-1]) or bool(_CODE_VALUE.match(value.strip())) or value.strip() == name


def _assignment(m: re.Match[str]) -> str:
    """An :data:`_ASSIGNMENT` match with its literal value redacted (kept as it is when the value is code or prose)."""
    name, quoted, bare = m.group(1), m.group(7), m.group(8)
    if not _is_credential_name(name):
        return m.group(0)
    value = quoted if quoted is not None else bare
    if value is None or _is_placeholder(value, name):
        return m.group(0)
    if quoted is None:
        if m.group(4) == ":" and m.group(5) and re.fullmatch(r"[A-Za-z_]+", value):
            return m.group(0)  # prose ("token: the one from the vault") or an annotation, not a literal
        if re.fullmatch(r"[A-Za-z_]\w*", value) and _is_credential_name(value) and len(_name_segments(value)) > 1:
            return m.group(0)  # a variable (password=hashed_password), not a literal (password=secret)
        if len(value) < 4:
            return m.group(0)
    start, end = m.span(7) if quoted is not None else m.span(8)
    return m.string[m.start() : start] + REDACTED + m.string[end : m.end()]


def _labelled(m: re.Match[str]) -> str:
    """A :data:`_LABELLED` match with the value after the label redacted, when it reads as one.

    An English label counts only with a joiner in words or CJK (``is``, ``是``, ``：``; ``password=`` is an
    assignment) and a value holding a digit or a symbol. Trailing sentence punctuation stays.
    """
    label, joiner = m.group(1), m.group(2)
    quoted = m.group(4)
    value = quoted if quoted is not None else m.group(5)
    start = m.start(4) if quoted is not None else m.start(5)
    if quoted is None:
        value = value.rstrip(_VALUE_END)
    if len(value) < 4 or _is_placeholder(value, label):
        return m.group(0)
    if label.isascii():
        words = joiner.strip().lower()
        if not words or words[0] in ":=-" or (words.isascii() and not re.search(r"\b(?:is|was)\b", words)):
            return m.group(0)
        if not re.search(r"[0-9!-/:-@\[-`{-~]", value):
            return m.group(0)
    end = start + len(value)
    return m.string[m.start() : start] + REDACTED + m.string[end : m.end()]


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

    Idempotent: the filter is installed once per logger, and the secrets it
    knows only grow (a client built earlier may still log an older one).
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
