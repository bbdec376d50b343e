"""The shapes of secrets in text: the patterns and word lists :mod:`redact` finds them with.

Pure data, compiled once at import, :func:`replace_group`, the one way the modules that use the patterns put
``[redacted]`` in place of a match's group, :func:`line_start`, how far back they read a match's line, and
:func:`quoted_run`, what a quoted value holds past an escaped quote: each pattern is named for what it catches and says why it is
written so. Every pattern starts with a lookbehind that lets it start only at the start of a run of its
characters (a run of 100,000 letters is tried once, not 100,000 times), and no quantifier is nested in
another over the same characters; quantifiers followed by a character their class excludes are
possessive (``*+``, ``++``). So each pattern is linear in the length of the text. The lookbehinds use
ASCII classes on purpose: CJK characters are word characters (``\\w``, ``\\b``), and people write keys
straight into Chinese or Japanese text ("访问密钥是AKIA...请"). The labels of prose and what joins them to a value are
:mod:`secret_labels`'. Imports nothing of the plugin.
"""

from __future__ import annotations

import re

# ---------------------------------------------------------------------------
# Key formats and blocks
# ---------------------------------------------------------------------------

#: Where a secret may start: not right after an ASCII letter, digit or joiner of its own kind.
TOKEN_START = r"(?<![A-Za-z0-9_-])"

#: A line break inside a key: a terminal's or log viewer's wrap, a shell's escaped one (``\`` then a line break), or one
#: written as ``\n`` or ``\r\n`` inside a JSON or Python string; then the next line's log prefix, if it has one: up to
#: two bracketed fields, timestamps or a container's name (``[12:00:01]``, ``2024-03-11 12:00:01,124``, ``app-1  |``)
#: and a level (``INFO``), which a logger writes before the rest of a key it wrapped.
LINE_BREAK = (r"(?:\\?\r?\n|(?:\\r)?\\n)"
              r"(?:(?:\[[^\]\n]{1,40}+\]|(?:\d{4}-\d\d-\d\d[T ])?\d\d:\d\d:\d\d(?:[.,]\d++)?Z?|[A-Za-z0-9_.-]{1,40}+[ \t]*+\|)"
              r"[ \t]*+){0,2}+"
              r"(?:(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR)[ \t:]++)?+")
#: Provider key formats (each a whole token); a key that ends at a :data:`LINE_BREAK` takes the next line's leading run
#: of key characters with it, unless that run is a name given a value (``=`` or ``:`` after it: the next line of a
#: ``.env``, whose value would be left behind its name's redaction) or a word of lower-case letters before a space (prose).
KEY_FORMATS = re.compile(
    r"(?:" + TOKEN_START + r"(?:"
    # Anthropic, OpenAI, OpenRouter: after the prefix, 8 characters are enough (a log cuts a key short), unless all
    # lower-case letters (``sk-ant-design``)
    r"sk-(?:ant|proj|svcacct|admin|or-v1)-(?=[A-Za-z0-9_-]*[A-Z0-9])[A-Za-z0-9_-]{8,}+"
    r"|sk-(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{20,}+"  # OpenAI's older keys, DeepSeek and others
    r"|sk-(?=[A-Za-z0-9]*[a-z])(?=[A-Za-z0-9]*[A-Z])[A-Za-z0-9]{32,}+|sk-[a-z]{40,64}+(?![A-Za-z0-9_-])"  # no digit: 32+, both
    # cases; SiliconFlow's 48 lower-case letters (40 to 64)
    r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{12,}+|whsec_[A-Za-z0-9]{24,}+"  # Stripe
    r"|gh[pousr]_[A-Za-z0-9]{30,}+|github_pat_[A-Za-z0-9_]{22,}+|[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_-]{40,}+"  # GitHub, Terraform
    r"|gl(?:pat|rt|ptt|dt|cbt|ft|soat|agent)-[A-Za-z0-9_-]{20,}+(?:\.\w{2}\.\w{7,}+)?"  # GitLab: personal, runner... tokens
    r"|xox[a-z](?:\.xox[a-z])?-[A-Za-z0-9-]{10,}+|xapp-\d-[A-Za-z0-9-]{10,}+"  # Slack: bot, user, refresh, app tokens
    r"|AIza[0-9A-Za-z_-]{35}|hf_[A-Za-z0-9]{30,}+"  # Google, Hugging Face
    r"|eyJ[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.(?:[A-Za-z0-9_-]{8,}+)?"  # a JWT (unsigned: alg none)
    r"|sk\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+"  # Mapbox's secret token
    r"|[A-Za-z0-9_.-]{3}\dQ~[A-Za-z0-9_~.-]{31,}+"  # Azure AD client secret: 40 characters, the 4th to 6th "<digit>Q~"
    r"|SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"  # SendGrid
    r"|(?:npm_[A-Za-z0-9]{36}|pypi-AgE[A-Za-z0-9_-]{50,}+|gsk_[A-Za-z0-9]{40,}+)"  # npm, PyPI, Groq
    r"|(?:do[por]_v1_[a-f0-9]{64}|shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}|AGE-SECRET-KEY-1[0-9A-Z]{50,}+)"  # DigitalOcean, Shopify, age
    r"|(?:SK[0-9a-fA-F]{32}|key-[0-9a-f]{32}|pplx-[A-Za-z0-9]{40,}+)"  # Twilio, Mailgun, Perplexity
    r"|[0-9a-f]{32}(?:-us\d{1,2}+|\.[A-Za-z0-9]{16})(?![A-Za-z0-9_-])"  # Mailchimp, Zhipu (an id and its secret)
    r"|hv[sbr]\.[A-Za-z0-9_-]{24,}+"  # HashiCorp Vault: service, batch and recovery tokens
    r"|tskey-[a-z]{3,6}+-[A-Za-z0-9]{6,}+-[A-Za-z0-9]{16,}+"  # Tailscale's auth, API and OAuth client keys
    r"|(?<!\.)s\.(?=[A-Za-z0-9]{0,23}[0-9])(?=[A-Za-z0-9]{0,23}[A-Z])(?=[A-Za-z0-9]{0,23}[a-z])[A-Za-z0-9]{24}(?![A-Za-z0-9_.-])"  # Vault's
    # service tokens before 1.10 (s. and 24 letters and digits, read as an attribute otherwise)
    r"|[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}+|pat[A-Za-z0-9]{14}\.[0-9a-f]{64}"  # Discord bot: a user
    # id in base64, a time, an HMAC; Airtable's personal access token: its id, then its secret in hex
    r"|AKID[A-Za-z0-9]{32}(?![A-Za-z0-9])|LTAI[A-Za-z0-9]{12}(?:[A-Za-z0-9]{8})?(?![A-Za-z0-9])"  # Tencent Cloud's SecretId,
    # Alibaba Cloud's AccessKey ID (16 or 24 characters): ids as AWS's are, sent beside their secret
    r")"
    # AWS access key ids, also run into a word or a name (``ID_AKIA…``, ``idAKIA…``): 20 upper-case characters (not the docs' …EXAMPLE);
    # MySQL's native password hash, ``*`` and 40 hex digits in capitals (a git id is in lower case and has no ``*``; ``**…**`` is bold)
    r"|(?<![A-Z0-9])(?:AKIA|ASIA|A3T[A-Z0-9])[0-9A-Z]{16}(?<!EXAMPLE)(?![A-Za-z0-9])|(?<![\w*])\*(?=\d{0,39}+[A-F])[0-9A-F]{40}(?![\w*])"
    r")(?:" + LINE_BREAK + r"(?![a-z]++[ \t]|(?:[A-Z]++|[A-Z][A-Z0-9]{0,6}+|[A-Z][A-Z0-9]*+_[A-Z0-9_]*+)[ \t]|[A-Z][a-z]++[ \t])[A-Za-z0-9_-]++(?![ \t]*+[=:]))?"  # not the next line's name
    # (.env's OPENAI_API_KEY=sk-… then DB_PASSWORD=…, an INI file's aws_secret_access_key = …, a listing's or a Dockerfile's
    # DB_PASSWORD …, ENV …, S3 …, Password …; 8 or more capitals and digits without _ are a key's rest: BLD3PCBZXB) nor its
    # first word of prose ([12:00:01] starting server …)
)
#: A key cut by a line break before its format is complete (``ghp_Z8x7C6\nv5B4n3...``): a key prefix, the rest of its
#: line and the next line's leading key characters, redacted when they join into a :data:`KEY_FORMATS` key and the
#: first line holds none whole (:func:`redact._wrapped_key`; its rest may read as a word: ``…Czt`` then ``t fore``). It starts only after a character its body cannot take (``.`` and ``~`` too), so
#: ``.sk-.sk-...`` is read once, not once per prefix.
WRAPPED_KEY = re.compile(
    r"(?<![A-Za-z0-9_.~-])(?:sk-|(?:sk|rk|pk)_(?:live|test)_|gh[pousr]_|github_pat_|gl(?:pat|rt)-|xox[a-z]-|xapp-|AKIA|ASIA|AIza|hf_|eyJ|npm_|pypi-|gsk_)"
    r"[A-Za-z0-9_.~-]*+" + LINE_BREAK + r"[A-Za-z0-9_.~-]++(?![ \t]*+[=:])"
)
#: A private key block, to its ``END`` line or, cut off, to the end of the text.
PEM = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*-----|\Z)", re.DOTALL)

# ---------------------------------------------------------------------------
# Headers and URLs
# ---------------------------------------------------------------------------

#: ``Authorization:`` values. After a scheme (``Bearer``, ``Basic``...) any credential of 8+ characters goes; without
#: one, a lower-case word is prose ("authorization: required"). Without ``:`` or ``=``, as web servers set the header
#: (``proxy_set_header Authorization "Basic …"``, Apache's ``RequestHeader set Authorization …``) or Kotlin's ``to``
#: pairs it, a scheme and a credential with a digit or a base64 sign. Set in code, after a scheme: a subscript's
#: (``headers["Authorization"] = "Basic …"``), a setter's pair (``Header.Set("Authorization", "Bearer …")``,
#: ``setRequestProperty``, ``.header(``) and C#'s ``AuthenticationHeaderValue("Basic", "…")``; a scheme then a variable
#: (``"Bearer " + token``) stays. A placeholder stays: ``YOUR_API_KEY``,
#: ``your-token-here`` (capitals and ``_`` alone, or ``your`` and letters). A bare ``bearer`` token needs a digit:
#: "bearer authentication" is prose. A credential holds a password's ``!``, ``#``, ``@`` and ``^`` too (``Token Kq7#…``),
#: not a template's ``$`` ``%`` ``{``, a mask's ``*`` nor a query's ``&``.
AUTH_HEADER = re.compile(
    r"(?i)(?<![A-Za-z0-9_])((?:proxy-)?authorization[\"']?(?:\s*+[:=：]\s*+[\"']?"
    r"(?:(?:bearer|basic|token|bot)\s++|(?!(?-i:[a-z]+)(?![A-Za-z0-9_])))"
    r"|(?:\][ \t]*+=|(?<=[\"'])\s*+,)\s*+[\"'](?:bearer|basic|token)\s++"
    r"|[ \t]++(?:to[ \t]++)?[\"']?(?:bearer|basic|token)[ \t]++(?=[A-Za-z0-9._~+/=-]*[\d=+/]))"
    r"|authenticationheadervalue\(\s*+\"(?:bearer|basic)\"\s*+,\s*+\")"
    r"(?!(?-i:your|YOUR|Your)[A-Za-z_-]*+(?![A-Za-z0-9._~+/=-])|(?-i:[A-Z_]++)(?![A-Za-z0-9._~+/=-]))"
    r"([A-Za-z0-9._~+/=!#@^-]{8,}+)"
    r"|(?<![A-Za-z0-9_])(bearer\s++)(?=[A-Za-z0-9._~+/=-]*\d)([A-Za-z0-9._~+/=-]{12,}+)"
)
#: The ``user:password@`` (or a long token as the user) of a URL, also one without its scheme (``//user:…@``) or
#: written with a full-width colon (``https：//``). The password runs to the last ``@`` before the
#: first ``/`` or space: passwords hold ``@`` and ``:`` unencoded (``mysql://root:p@ss:w0rd!@localhost/db``).
URL_USERINFO = re.compile(
    r"(?<![A-Za-z0-9+.-])((?:[A-Za-z][A-Za-z0-9+.-]*+[:：])?//)([^\s/@:]*+:[^\s/]*|[^\s/@:]{16,}+)@")
#: ``user:password@host`` without a scheme's ``//``, as command lines and connection strings write it (``psql …
#: admin:Sup3r$ecret9@db.internal``, ``redis-cli -u default:Hx8!kq2Lm@cache:6379``). The password may hold one ``@``;
#: the user starts a run of its characters (not after ``/`` or ``:``: ``img:tag@sha256``, ``a:b:c@d``), the host
#: starts with a letter or digit (not ``@2x``, an image's scale). Kept unless the password reads as one
#: (:func:`prose_secrets._bare_userinfo`): ``email:alice2024@example.com`` is a label and an address.
#: A password's characters after a user's ``:``, to its end however long, holding two ``:`` at most: each ``:`` may end
#: another's user, so a password is read from three starts at most. One with more (``p#a:b:c:d@host``) is read as
#: before, up to 128 characters.
_LOGIN_REST = r"(?=[^\s/\\@])[^\s/\\@:]*+(?::[^\s/\\@:]*+)?(?::[^\s/\\@:]*+)?"
BARE_USERINFO = re.compile(
    r"(?<![A-Za-z0-9_.+/:%-])(?P<user>[A-Za-z0-9_.+-]{1,64}+):(?P<password>" + _LOGIN_REST + r"(?:@" + _LOGIN_REST + r")?(?=@)"
    r"|[^\s/\\@]{1,128}+(?:@[^\s/\\@]{1,128}+)?)@"
    r"(?=[A-Za-z0-9])(?!sha\d|\d++x(?![A-Za-z0-9]))")
#: A URL's password holding an unencoded ``/`` (``postgres://u:ab/cd12345XYZ@h/db``), which :data:`URL_USERINFO` stops
#: at: after ``//``, a user and ``:``, a run to the next ``@`` holding a ``/``. Kept unless the password reads as one
#: (:func:`prose_secrets._slashed_userinfo`: ``https://host:8080/path@v2`` is a port and a path). The password runs to
#: its ``@`` however long, up to the next ``//`` (another's start, so each is read once).
SLASHED_USERINFO = re.compile(
    r"(?<!/)//(?P<user>[^\s/@:]{1,64}+):(?=[^\s@/]*+/)"
    r"(?P<password>(?:[^\s@/]|/(?!/))++)@(?=[A-Za-z0-9])")
#: Users that are a label before an address (``email:alice2024@example.com``, ``mailto:…``), not a login.
ADDRESS_LABELS = {"email", "e-mail", "mail", "mailto", "contact", "from", "to", "cc", "bcc", "reply-to", "sender", "author",
                  "by", "user", "username", "login", "owner", "maintainer", "committer", "reviewer", "assignee",
                  "sip", "sips", "xmpp", "im", "urn", "tel", "fix", "feat", "task", "ref"}  # URI schemes, commit tags
#: A character of a password that is not a letter, digit or a joiner an address or a name also holds.
PASSWORD_SYMBOL = re.compile(r"[^\w.+:-]")
#: Webhook URLs whose path is the credential (Slack, Discord, Microsoft Teams, Feishu, Lark): the path goes, the host
#: stays; and notification services whose key is one segment of the path (group ``seg``: Bark's ``api.day.app/<key>/…``,
#: IFTTT's ``maker.ifttt.com/trigger/<event>/with/key/<key>``, ServerChan's ``sctapi.ftqq.com/<key>.send``): the key
#: goes, the message after it stays; and self-hosted chats' incoming webhooks (Mattermost's, Rocket.Chat's
#: ``https://<host>/hooks/<id>[/<token>]``), where the id is 20 to 64 letters and digits with a digit and a lower-case
#: letter (``/hooks/12`` and ``/hooks/pre-commit`` stay).
WEBHOOK = re.compile(
    r"(?<![A-Za-z0-9.-])((?:hooks\.slack\.com/(?:services|workflows|triggers)|(?:discord(?:app)?\.com|ptb\.discord\.com)"
    r"/api/webhooks|(?:[a-z0-9-]++\.)?(?:outlook\.office(?:365)?\.com|webhook\.office\.com)/webhook(?:b2)?"
    r"|open\.(?:feishu\.cn|larksuite\.com)/open-apis/bot/v2/hook"
    r"|(?P<seg>api\.day\.app|maker\.ifttt\.com/trigger/[\w-]{1,60}+(?:/json)?/with/key|(?:sctapi|sc)\.ftqq\.com)"
    r"|(?<=//)[A-Za-z0-9.-]{1,253}+(?::\d{1,5}+)?/(?P<hook>hooks))/)"
    r"(?(seg)[A-Za-z0-9_-]{8,}+|(?(hook)(?=[A-Za-z0-9]{0,63}?[0-9])(?=[A-Za-z0-9]{0,63}?[a-z])[A-Za-z0-9]{20,64}+"
    r"(?:/[A-Za-z0-9]{20,64}+)?(?![\w-])|[A-Za-z0-9_/@.-]{8,}+))"
)
#: Query parameter names whose values are credentials (``key``, ``pass``, ``X-Amz-Signature``, Azure SAS's ``sig``, Baidu's
#: ``ak``...), as :func:`redact._param_key` writes them.
URL_SECRET_NAMES = re.compile(
    r"^(?:.*_)?(?:key|apikey|api_key|token|access_token|auth|authorization|secret|client_secret|password|passwd|pass|pwd"
    r"|sig|signature|code|credential|credentials|session|sas|ak|sk|appkey|appsecret|authkey|accesskey|secretkey)$"
)
#: A query string's ``name=value`` anywhere in text (a URL in prose, a log line); the value runs to the next ``&``,
#: quote or space; a ``#`` and what follows it too (a fragment, or ``#`` typed into a key, once or more: ``ak=Kq7#vLp2Wx``,
#: ``password=Kq7#ab#cd``), which goes with the value when the name is a credential's.
QUERY_PAIR = re.compile(r"(?<=[?&])([A-Za-z0-9_.~%-]{1,60}+)=([^&#\s\"'<>]{1,1000}+(?:#[^&\s\"'<>]{1,200}+)?)")
#: A ``Cookie:`` or ``Set-Cookie:`` header, to the end of its line, also as a quoted key (``{'Cookie': 'SESSDATA=…'}``,
#: fetch's ``"cookie": "sid=…"``) or curl's ``-b``/``--cookie`` (``curl … -b 'SESSDATA=…'``; a file's name has no
#: pairs): its session-like pairs are redacted.
COOKIE_HEADER = re.compile(r"(?i)(?<![A-Za-z0-9_])((?:set-)?cookie[\"']?\s*+[:=]\s*+[\"']?"
                           r"|curl(?=[ \t])[^\n]{0,300}?[ \t](?:-b|--cookie)[ \t]++[\"']?)([^\n]{1,2000}+)")
#: One ``name=value`` of a cookie header.
COOKIE_PAIR = re.compile(r"([^=;,\s]{1,100}+)=([^;,\s\"']{1,1000}+)")
#: Cookie names that hold a session or a credential (``sessionid``, ``PHPSESSID``, ``sid``, ``connect.sid``,
#: ``csrftoken``, ``auth``...).
COOKIE_SECRET_NAMES = re.compile(r"(?i)sess|(?:^|[._])sid$|token|auth|jwt|secret|key|remember")

# ---------------------------------------------------------------------------
# Credentials after a name or a label
# ---------------------------------------------------------------------------

#: The credential words (a name holding one is a credential's; a look-alike word is read as Latin for them).
CREDENTIAL_PART = re.compile(r"(?i)passw(?:or)?d|passphrase|passcode|pass|pwd|secret|token|key|auth|credentials?")
#: What an unquoted value is made of: anything but spaces and CJK text (the value of ``密码=x9Kp请保管`` ends at
#: ``请``). Symbols are in it: a value is not cut at ``,`` ``;`` ``)`` ``'`` ``€``... (``PASSWORD=Sup3r,S3cret``).
VALUE_CHAR = r"[^\s\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
#: A call that only wraps a credential's literal: Go's ``[]byte(…)``, pydantic's ``SecretStr(…)``/``SecretBytes(…)``,
#: ``Buffer.from(…)``, Rust's ``String::from(…)``.
LITERAL_WRAPPER = r"(?:\[\]byte|(?:pydantic\.)?Secret(?:Str|Bytes)|Buffer\.from|String::from)\("
#: A quoted value whose closing quote never comes (``password: "Kq7#vLp2Wx`` and the line or the text ends): a run
#: of 4 or more without spaces or quotes to the end of its line, which is the value; a string with a space in it
#: (``"token: " + t``) or code's closing signs after a string (``get("k", "Password:")``) is not.
UNCLOSED_VALUE = r"[^\s\"'\\]{4,}+(?<![)\]};,])[ \t]*+(?=\r?\n|\Z)"
#: ``name = value`` / ``name: value`` / ``--name=value`` where the name ends in a credential word (``DB_PASSWORD``,
#: ``apiKey``, ``STRIPE_KEY``, ``GITHUB_PAT``, ``passwords`` (not ``Passwords:``, a heading)...; :func:`redact._credential_kind`
#: decides), so ``database:`` does not swallow ``password=...``. A name starts a run of name characters (dots included):
#: each run is tried once. Quotes may be backslash-escaped (JSON in JSON: ``{\\"token\\": \\"x\\"}``). The value may be
#: on the next line (a YAML list's first item too: ``password:`` then ``- …``), unless that line is another ``name:`` (a
#: YAML parent ``auth:`` would otherwise take its child ``password:`` for its value and hide it). A bare value is not a tuple or call's arguments (``auth=(user, password)``:
#: :data:`CLI_SECRET` reads those) nor a code fence, nor a query string's next pair (``api_key=&sign=…``: an empty value). The name may be a quoted subscript (``os.environ["DB_PASSWORD"] =
#: "…"``, ``$config['db_password'] = '…'``) and the sign PHP's and Ruby's ``=>`` before a quoted value (``'password' =>
#: '…'``) or a bare one that ends its line (a CI log's ``secrets.DB_PASSWORD => …``): those must read as a password by
#: themselves (:func:`redact._assignment`), as arrays of rules and messages and match arms are written so (``'password' =>
#: 'required|min:8'``, ``errors['token'] = 'Invalid token.'``, ``Token => TokenType``). YAML's anchor or
#: standard tag after ``: `` (``password: &pw …``, ``!!str``) and block scalar (``password: |`` then the value) are
#: passed; CloudFormation's ``!Ref``... are code. ``::`` is a path's, not a sign (``Auth::user()``, ``std::auth::Token``), but
#: before a space LDIF's (``userPassword:: <base64>``). A value runs to its real end however long (a bound would send its
#: rest), a quoted one past an escaped quote (``'Kq7\\'vLp'``) to its closing quote, or to its line's end when none comes
#: (:data:`UNCLOSED_VALUE`); each start is a name's, so each value is read once. Groups: 1 name, 4 the sign, 5 the space after it, 6-9 a quoted value
#: (escaped, double, single, a backtick string in ``[]byte(…)``; in a :data:`LITERAL_WRAPPER` or after a string prefix
#: too: ``b'…'``, ``r"…"``), 10 bare.
#: A shell's expansion of a variable up to its default (``${DB_PASSWORD:-``, ``${TOKEN=``), which an :data:`ASSIGNMENT`'s
#: value may start with or be in: the default alone is a value, after the operator (``:?`` gives a message, no value).
SHELL_DEFAULT = re.compile(r"\$\{[A-Za-z_]\w{0,60}+:?[-=+?]")
ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.-])(-{0,2}(?:[A-Za-z_][A-Za-z0-9_.-]{0,60}?)?"
    r"(?:passwords|(?i:password|pasword|passwrod|passowrd|passwd|passphrase|passcode|pass|pwd|pw|psk|sk|secret|token|credentials?|auth|key)|PAT))"
    r"((?:_(?:\d{1,2}+|(?i:old|new|prod|production|staging|stage|dev|test|uat|qa|local|backup))(?![A-Za-z0-9]))?+"
    r"\\*+(?:[\"'][ \t]*+\]?)?)(\s*+)(=>(?=[^\S\r\n]*+(?:[\"']|[^\s\"',;]{1,200}+[ \t]*+(?:\r?\n|$)))|<-(?=[^\S\r\n]*+[\"'])|:(?::(?=[ \t]))?+(?!:)|[=：])([^\S\r\n]*+(?:[|>][-+]?[ \t]*+(?=\r?\n))?"
    r"(?:\r?\n\s*+(?:-{3,}+[ \t]*+\r?\n[ \t]*+|-[ \t]++)?(?![A-Za-z_][\w.-]*+[^\S\r\n]*+[:=：]))?)(?:(?<=[:：] )(?:&(?!(?:mut|dyn|impl)\b)[\w-]{1,40}+|!![\w-]{1,40}+)[ \t]++)?"
    r"(?:(?:" + LITERAL_WRAPPER + r"[ \t]*+b?|[bBrRuUfF]{1,2}+(?=[\"']))?+"
    r"(?:\\++\"([^\"\\\n]++)\\++\""
    r"|\"(?:\"\"(?!\"))?+(?=(?:[^\"\\\n]|\\[^\n])++\"|" + UNCLOSED_VALUE + r")((?:[^\"\\\n]|\\[^\n])++)\"?"
    r"|'(?:''(?!'))?+(?=(?:[^'\\\n]|\\[^\n]|'')++'|" + UNCLOSED_VALUE + r")((?:[^'\\\n]|\\[^\n]|'')++)'?"
    r"|(?<=\[\]byte\()`([^`\n]++)`)|(?![\"'\\]|```|\{[ \t]*+\"|-{3,}+(?:\s|$)|&[A-Za-z_][\w.-]{0,60}+=|\((?:[^),\n]{0,100}+,|[^)\n]{0,40}+\)))(" + VALUE_CHAR + r"++))"
)
#: Command lines that take a password as an argument: ``mysql -pSECRET``, ``sshpass -p SECRET``, ``redis-cli -a SECRET``
#: (``REDIS-CLI`` too) or ``--pass SECRET``, ``curl -u user:SECRET``, httpie's ``http -a user:SECRET`` (``--auth``,
#: ``https``), ``--password SECRET`` / ``--with-token SECRET`` / ``--requirepass SECRET`` (the ``=`` form is an
#: :data:`ASSIGNMENT`), ``keytool -storepass SECRET`` (not ``changeit``: a placeholder, the JDK keystores' default),
#: ``ssh-keygen -N SECRET``, ``consul acl set-agent-token TYPE SECRET``, ``nmcli … password SECRET`` (or ``wifi-sec.psk``; only in a command that sets it, ``c
#: m``/``d wifi c`` too, after up to two flags: ``--ask``; not ``-g``/``-f``), redis's ``ACL SETUSER … >SECRET`` (or
#: ``'>SECRET'``, an ACL file's ``user bob on [up to six rules] >SECRET``), ``sentinel auth-pass NAME SECRET``
#: (``SENTINEL SET NAME auth-pass SECRET``), ``MIGRATE … AUTH[2 user] SECRET`` and a client's ``execute_command("AUTH",
#: "SECRET")`` (``redis.call(``, ``sendCommand(["AUTH", …])``) (those two not lower-case letters alone: docs write
#: ``AUTH password``; the call's last argument, group ``call``), strongSwan's ``… : PSK "SECRET"`` (a space before the
#: colon; ``RSA file "SECRET"`` too, the file holding a ``.`` or ``/``: ``RSA 2048 "server-cert"`` is a key's type, and
#: the secret not a path); a basic-auth call's quoted second argument (``HTTPBasicAuth('bob', 'SECRET')``,
#: ``SetBasicAuth`` (a Go raw string too), C#'s ``NetworkCredential(``, OkHttp's ``Credentials.basic(``,
#: ``.basic_auth("bob", Some("SECRET"))`` (``Some(&…``, ``Some(String::from(…``), Ruby's ``basic_auth 'bob', 'SECRET'``,
#: Faraday's ``request :basic_auth, 'bob', 'SECRET'`` and ``request :authorization, :basic, …``,
#: ``basic_auth=(get_user(), b"SECRET")``; after ``.auth(``, ``auth:`` or ``auth =>`` (group ``kv``) one holding a digit
#: or a symbol, not capitals and digits alone, and a list (group ``list``; also after ``=``: ``auth = [``, ``AUTH = (``,
#: ``auth = {``) closing after it: ``"auth": ("cli.auth", "build_auth_parser")``, ``auth: ['Login', 'Logout']``,
#: ``"auth": ["HS256", "RS256"]`` are tables). A backtick quotes a call's argument only. Some take the password as the
#: command's last word (group ``last``; CJK prose may follow), which is then not lower-case letters alone nor all
#: capitals (prose, a placeholder; redis's ``HELLO`` may go on with ``SETNAME``): ``htpasswd -b[…] [file] user SECRET``
#: (group ``nofile``: ``-n``, no file), ``wpa_passphrase SSID SECRET``, ``rclone obscure SECRET``, redis's ``AUTH [user] SECRET`` after redis-cli's
#: prompt (``host:port>``, ``…[db]>``, a cluster's ``(master)>``, ``redis>``) or, upper-case (or ``hello 3 auth``) and
#: not a SASL mechanism or scheme (``AUTH LOGIN``, ``AUTH Bearer``), at a line's start or after a bare ``>`` prompt, and
#: ``requirepass``/``masterauth`` (redis.conf, ``CONFIG SET``) or Debian's ``wpa-psk`` at a line's start (or after CJK prose) or in an
#: ``iface`` line, and redis-cli's inline ``AUTH`` after its flags alone (prose around redis-cli is not). Group
#: ``value`` is the password (a quoted one may hold spaces), ``q`` its quote. The basic-auth branch looks ahead at its
#: names' first letters (``[HSBDPbhpdaACN]``): a position starting none goes at once. CJK text (ideographs, kana,
#: hangul, full-width forms), where an unquoted command-line value or a default in code ends: prose written straight
#: after it ("AUTH PW，然后 ping"), or a message ("密码（至少8位）").
_CJK = r"\u3000-\u9fff\uac00-\ud7af\uff00-\uffef"
#: Up to two of redis-cli's flags (``-h db1``, ``--tls``), taken twice by :data:`CLI_SECRET` before an inline ``AUTH``.
_REDIS_FLAGS = r"(?:[ \t]++--?[A-Za-z][\w-]{0,30}+(?:[ \t]++[^\s-]\S{0,200}+)?){0,2}"
#: Up to two rules of an ACL file's ``user`` line before its ``>password`` (``~*``, ``&*``, ``+@all``, ``allkeys``),
#: taken three times.
_ACL_RULES = r"(?:(?:[~&+%-]|reset|all)[^\s>]{0,64}+[ \t]++){0,2}"
#: Up to two of a command's flags (``-b``, ``-C 10``); :data:`CLI_SECRET` takes it twice for up to four, since no group
#: holding a quantifier may repeat more than twice (the shape of catastrophic backtracking, which a test forbids).
_TWO_FLAGS = r"(?:[ \t]++-[A-Za-z]{1,8}+(?:[ \t]++\d{1,3}+)?){0,2}"
CLI_SECRET = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"(?:mysql|mysqldump|mysqladmin|mariadb|obclient)(?:[ \t](?:[^\n\\]|\\\r?\n|\\(?!\r?\n)){0,300}?)?[ \t]-p(?=[^\s-])"
    r"|sshpass(?i:\.exe)?+[ \t]++-p[ \t]*+"
    r"|(?:(?:redis|valkey|keydb|memurai)-cli|REDIS-CLI)(?:[ \t][^\n]{0,200}?)?[ \t](?:-a|--pass)[ \t]++"
    r"|(?i:sentinel[ \t]++(?:auth-pass[ \t]++[^\s\"']{1,64}+|SET[ \t]++[^\s\"']{1,64}+[ \t]++auth-pass))[ \t]++(?![a-z]{1,64}+(?:\s|$))"
    r"|MIGRATE[ \t][^\n]{0,200}?[ \t](?:AUTH|AUTH2[ \t]++[^\s\"']{1,64}+)[ \t]++(?![a-z]{1,64}+(?:\s|$))"
    r"|(?:execute_command|send_command|sendCommand|(?<=redis\.)p?call|(?<=server\.)p?call|(?<=\.)Do)\((?:\s*+ctx\s*+,)?\s*+\[?\s*+"
    r"[\"'](?i:AUTH)[\"']\s*+,\s*+"
    r"(?:[\"'][^\"'\n]{1,64}+[\"']\s*+,\s*+)?(?=[\"'])(?P<call>)"
    r"|(?:curl(?:[ \t](?:[^\r\n]{0,200}+(?<=\\)\r?\n)?[^\n]{0,200}?)?[ \t](?:-u|--user)|(?:(?m:^)|(?<=[;&|(`" + _CJK + r"])"
    r"|(?<=[;&|(`$>] )|(?<=sudo ))[ \t]*+(?:https?|xhs?|python3? -m httpie)"
    r"(?:[ \t](?:[^\r\n;&|" + _CJK + r"]{0,200}+(?<=\\)\r?\n)?[^\n;&|" + _CJK + r"]{0,200}?)?[ \t](?:-a|--auth))(?:[ \t]++|=|(?<=[ \t]-[ua]))[\"']?[^\s:\"']{0,100}+:"
    r"|--[A-Za-z-]{0,30}?(?:password|passwd|token|secret|api-key|requirepass|masterauth)[ \t]++(?!-)"
    r"|-(?:src|dest)?(?:storepass|keypass)[ \t]++|ssh-keygen(?:[ \t][^\n]{0,200}?)?[ \t]-N[ \t]++"  # keytool, ssh-keygen
    r"|set-agent-token(?:[ \t]++-\S{1,200}+){0,2}[ \t]++[a-z_-]{1,40}+[ \t]++"  # consul acl set-agent-token [flags] agent <token>
    r"|(?:(?i:ACL[ \t]++SETUSER)[ \t][^\n]{0,200}?[ \t]|(?m:^)[ \t]*+user[ \t]++[^\s>]{1,64}+[ \t]++(?:on|off)[ \t]++"
    + _ACL_RULES * 3 + r")[\"']?>(?=[^\s\"'])"
    r"|(?m:^)(?:[^\n:#|]{1,200}+(?<=[ \t]))?:[ \t]*+(?:PSK|EAP|XAUTH|RSA[ \t]++(?=[^\s\"']{0,200}?[./])[^\s\"']{1,200}+(?![ \t]++[\"']/))[ \t]++(?=[\"'][^\"'\s]++[\"']|0[sx])"  # ipsec.secrets
    r"|nmcli(?=[^\n]{0,200}?[ \t](?:connect|add|modify|mod|hotspot)[ \t]"
    r"|[ \t]++(?:-{1,2}[a-z]{1,10}+[ \t]++){0,2}(?:c\w{0,9}+[ \t]++[am]|d\w{0,5}+[ \t]++wifi[ \t]++c\w{0,6}+)[ \t])"
    r"(?![^\n]{0,200}?[ \t]-(?:g|f|-fields|-get-values)[ \t])"
    r"(?:[ \t][^\n]{0,200}?)?[ \t](?:password|wifi-sec\.psk|802-11-wireless-security\.psk|802-1x\.(?:password|private-key-password))[ \t]++"
    r"|(?=[HSBDPbhpdaACN])(?:(?:HTTP(?:Basic|Digest|Proxy)|(?:Set)?Basic|Digest)Auth\(|NetworkCredential\(|Credentials\.basic\("
    r"|(?<=:)authorization,[ \t]*+:basic,|(?:(?:basic|http|proxy|digest)_|(?:BASIC|HTTP|PROXY|DIGEST)_)?(?:auth|AUTH|Auth)"
    r"(?:(?<=auth)[ \t]*+=[ \t]*+\(|(?<=basic_auth)(?:\(|[ \t]++(?=[\"'])|(?<=:basic_auth),[ \t]*+(?=[\"']))"
    r"|(?P<kv>[\"']?[ \t]*+(?::|=>|=)[ \t]*+(?P<list>[(\[{])|(?<=\.auth)\()))"
    r"\s*+(?:[bfr]?(?P<u>[\"'`])[^\"'`\n]{0,100}+(?P=u)|[\w.\[\]\"'()]{1,100}+)\s*+,\s*+"
    r"(?:Some\((?:&|String::from\()?|[bfr])?(?=[\"'`])"
    r"(?(kv)(?=.(?![A-Z\d_]{1,200}+[\"'])[^\"'`\n]{0,200}?[^\w\s\"'`.:+/-]|.(?![A-Z\d_]{1,200}+[\"'])[^\"'\n\d]{0,200}+\d))"
    r"|(?P<last>htpasswd(?=[^\n]{0,200}?[ \t]-[A-Za-z]{0,8}b)(?P<nofile>(?=[^\n]{0,200}?[ \t]-[A-Za-z]{0,7}n))?"
    + _TWO_FLAGS * 2 +
    r"(?(nofile)[ \t]++[^\s-]\S{0,200}+|[ \t]++(?:\"[^\"\n]{1,200}+\"|[^\s-]\S{0,200}+)[ \t]++[^\s-]\S{0,200}+)[ \t]++"
    r"|wpa_passphrase[ \t]++(?:\"[^\"\n]{1,64}+\"|'[^'\n]{1,64}+'|[^\s\"']{1,64}+)[ \t]++|rclone[ \t]++obscure[ \t]++"
    r"|(?:(?<=:\d\d>)|(?<=\d\d\d>)|(?<=\d\]>)|(?<=\(master\)>)|(?<=\(replica\)>)|(?<=redis>)|(?<=valkey>)|(?<=\(TX\)>))"
    r"[ \t]*+(?i:(?:HELLO[ \t]++\d[ \t]++)?AUTH)[ \t]++"
    r"(?:[^\s\"']{1,64}+[ \t]++)?"
    r"|(?:(?m:^)[ \t]*+|(?<=[\u3040-\u9fff][ \t])|(?i:CONFIG[ \t]++SET)[ \t]++)(?i:requirepass|masterauth|wpa-psk)[ \t]++"
    r"|(?:(?:redis|valkey|keydb)-cli" + _REDIS_FLAGS * 2 + r"[ \t]++(?i:AUTH)|(?m:^)[ \t]*+iface[ \t][^\n]{0,200}?[ \t]wpa-psk)[ \t]++(?:[^\s\"']{1,64}+[ \t]++)?"
    r"|(?m:^)[ \t]*+(?:>[ \t]*+)?(?:(?:HELLO[ \t]++\d[ \t]++)?AUTH|hello[ \t]++\d[ \t]++auth)[ \t]++"
    r"(?!(?:Bearer|Basic|LOGIN|PLAIN|CRAM-MD5|DIGEST-MD5|XOAUTH2|OAUTHBEARER|GSSAPI|NTLM|SCRAM-[\w-]{1,20}+)\b)"
    r"(?:(?![A-Z]{2,64}+[ \t])[^\s\"']{1,64}+[ \t]++)?(?=[a-z]{0,200}+[^a-z\s]))"
    r")(?P<q>[\"']|(?:(?<=[(,])|(?<=,[ \t]))`)?"
    r"(?(last)(?![a-z]{1,200}+(?:[\"'\s;&|>#)`\\]|$)|[A-Z]{1,200}+(?:[\"'\s;&|>#)`\\]|$)))"
    r"(?P<value>(?(q)(?:(?<=`)[^`\n]++(?=`)|(?=(?:[^\"'\\\n]|\\[^\n])++(?P=q)|" + UNCLOSED_VALUE + r")(?:[^\"'\\\n]|\\[^\n])++)"
    r"|[^\s\"'" + _CJK + r"]++))(?(q)(?P=q)?)"
    r"(?(last)(?=[ \t]*+(?:[\r\n;&|>#)\"'`\\" + _CJK + r"]|\d>|$)|[ \t]++(?i:SETNAME)[ \t]))"
    r"(?(list)(?=[ \t]*+[\])}]))(?(call)(?=\s*+[)\]]))"
)
#: Right after ``echo`` or ``echo -n``/``-e``/``-E`` (the line it writes into a file).
_AFTER_ECHO = r"(?<=echo )|(?<=echo -[neE] )"
#: Lines of the files clients read passwords from: ``.netrc`` (``machine api.example.com login bob password SECRET`` or
#: ``default login …``, on one line or several, at a line's start or after a quote or ``echo`` (``-n``, ``-e`` too); the
#: host holds a ``.`` or is ``localhost`` (or is followed by ``login`` and ``password``), and the password is not
#: lower-case letters alone: "machine db.internal password reset" is prose, nor all capitals: ``password TOKEN`` is a
#: placeholder) and ``.pgpass`` (``host:port:db:user:SECRET`` at a line's start or after ``echo`` (``-n``, ``-e`` too),
#: group ``pgpass``; the host ``localhost``, ``*`` or dotted and the port 4–5 digits or ``*``, which Redis keys, MAC and
#: IPv6 addresses, hex dumps and /etc/passwd lines are not; any host and port in a line ``echo`` or ``printf`` writes
#: into a ``.pgpass`` (``echo db:543:app:bob:SECRET >> ~/.pgpass``); the password not one Capitalised word: ``echo
#: v1.2.3:8080:api:Build:Passed`` is a log line) and ``rsyncd.secrets`` (a line, or a line's end after ``行`` (``就一行`` …) or ``one
#: line`` (not ``镜像：postgres:16-Bookworm``, ``pipeline deploy:ProdEast2``), of a user in lower case, ``:`` and a
#: password alone, of both cases and a digit, not a word and a number nor an address: ``backup:Kq7vLp2Wx99``;
#: ``backup:daily``, ``python:3.11``, ``step:Build2``, ``xmpp:Romeo42@montague.net``, a commit's ``fix:Bug#1234`` stay). Groups:
#: ``q`` (empty), ``value`` the password.
CREDENTIAL_FILE = re.compile(
    r"(?:(?:(?m:^)[ \t]*+|(?<=[\"'])|" + _AFTER_ECHO + r")(?:machine\s++(?:localhost|[\w-]{1,63}+\.[\w.-]{1,190}+"
    r"|[\w-]{1,63}+(?=\s++login\s++\S{1,200}+\s++password\s))|default(?=\s++login\s))"
    r"(?:\s++(?:login|account|port)\s++\S{1,200}+)?(?:\s++(?:login|account|port)\s++\S{1,200}+)?"
    r"(?:\s++(?:login|account|port)\s++\S{1,200}+)?"
    r"\s++password\s++(?![a-z]{1,200}+(?:[\"')\s]|$)|[A-Z_]{1,200}+(?:[\"')\s]|$))"
    r"|(?P<pgpass>(?:(?:(?m:^)[ \t]*+(?:[-*>][ \t]++[\"']?)?|(?:" + _AFTER_ECHO + r")[\"']?)"
    r"(?:localhost|\*|[^\s:#\\\"'.]{1,100}+\.[^\s:\\\"']{1,150}+):(?:\d{4,5}+|\*):"
    r"(?:[^\s:\\]|\\.){1,255}+:(?:[^\s:\\]|\\.){1,255}+:"
    r"|(?<![\w-])(?:(?i:echo)(?:[ \t]++-[neE])?|printf(?:[ \t]++(?:'[^'\n]{0,20}+'|\"[^\"\n]{0,20}+\"))?)[ \t]++[\"']?"
    r"(?:[^\s:#\\\"']{1,100}+:){2}"
    r"(?:[^\s:\\]|\\.){1,255}+:(?:[^\s:\\]|\\.){1,255}+:"
    r"(?=(?:[^\s:\\\"']|\\.)++[\"']?[ \t]*+(?:1?>>?|\|[ \t]*+(?:sudo[ \t]++)?tee(?:[ \t]++-a)?)[ \t]*+\S{0,100}?"
    r"(?:\.pgpass|pgpass\.conf|PGPASSFILE)(?![\w.])))"
    r"(?![a-z-]++(?:[\s\"']|$)|[A-Z][a-z]++(?:[\s\"']|$)))"
    r"|(?:(?m:^)[ \t]*+|(?<=行)[ \t]*+[:：]?[ \t]*+|(?<=\bline ))(?!(?:fix|feat|task|ref|chore|docs|test|perf|build|ci|mailto|sip|xmpp|urn|tel):)[a-z_][a-z0-9_.-]{0,31}+:"
    r"(?=(?=[^\s:]{0,63}?[a-z])(?=[^\s:]{0,63}?[A-Z])(?=[^\s:]{0,63}?\d)"
    r"(?![A-Z][a-z]++\d++[ \t]*+(?:\r?\n|$))[^\s:\"'/@]{6,64}+[ \t]*+(?:\r?\n|$)))"
    r"(?P<q>)(?P<value>(?(pgpass)(?:[^\s:\\\"'/]|\\.)(?:[^\s:\\\"']|\\.)*+|[^\s\"')]++))(?=[ \t]*+(?:[\r\n\"'#)>|]|$)|\s++(?:machine|default|login|account|port|macdef)\b)"
)
#: A value named in markup or a manifest rather than assigned: an element (``<password>…</password>``, Maven's
#: settings.xml), a ``key``/``name`` and ``value`` attribute pair (``<add key="DbPassword" value="…"/>``, Ant's
#: ``<property name="db.password" value="…"/>``) or JSON pair (a Postman variable's ``{"key": "password", "value": "…"}``), a Kubernetes env entry (``- name: DB_PASSWORD`` then ``value: …``), an
#: environment variable's or a setting's default in code (``os.getenv("DB_PASSWORD", "…")``, ``ENV.fetch(…)``,
#: ``getattr(settings, …)``, ``System.getProperty(…)``, Ruby's ``ENV.fetch "…", "…"``, ``settings.get(…)`` (on up to two
#: receivers: ``app.config.get(…)``, ``config["db"].get(…)``, ``get_config().get(…)``), ``getOrDefault(…)``,
#: ``viper.SetDefault(…)``, and after a fallback: ``process.env.DB_PASSWORD || '…'``, ``process?.env?.…``, ``?? "…"``,
#: ``os.environ.get("…") or f"…"`` (a second argument too: ``os.getenv("…", "")``), ``ENV.fetch("…") { "…" }``,
#: ``.unwrap_or("…")``, ``.orElse("…")``, ``cmp.Or(…, "…")``, a ternary's ``else``; Deno, Bun, Vite, Java, C#, Rust, Go
#: and PHP spell the variable their way; a default may be prefixed (``u"…"``, ``rb"…"``) or in backticks, Go's raw
#: string). Any other lookup whose key is a string literal (group ``keyed``: ``System.get_env("DB_PASSWORD", "…")``,
#: ``configuration["DbPassword"] ?? "…"``, ``Config::get('database.password', '…')``, ``nconf.get("db:password") ??
#: "…"``) when the next literal on its line follows a fallback (``,`` ``??`` ``||`` ``?:`` ``or`` ``.orElseGet(()
#: ->``...) after no ``(`` ``;`` ``=`` ``:`` (not a nested call, a statement, a comparison or a dict's next key) and
#: holds a digit or a symbol not last (``"passwordHash"`` is a field's name, ``"Required!"`` a message); a Python
#: ``default="…"`` before ``key="…"`` (group ``rkey``); ``Deno.env.toObject().X``; an attribute or variable named as a
#: credential before a fallback (group ``dotted``: ``config.dbPassword ?? "…"``, ``settings.DB_PASSWORD or "…"``, Helm's
#: and Jinja's ``.Values.db.password | default "…"``). Judged as an assignment to that name
#: (:func:`redact._named_value`): names in :data:`NAMED_NAMES`, values in :data:`NAMED_VALUES`. The lookaheads of the
#: names' first letters (``[cpiBeE$oSgGD]``) leave a position that starts none at once.
NAMED_VALUE = re.compile(
    r"<(?P<tag>[A-Za-z_][\w.:-]{0,60}+)>(?P<element>[^<\n]++)</(?P=tag)>"
    r"|(?i:(?<![\w-])[\"']?(?:key|name)[\"']?)[ \t]*+[=:][ \t]*+(?P<q1>[\"'])(?P<attr>[^\"'\n]{1,100}+)(?P=q1)[ \t]*+,?[ \t]*+"
    r"[\"']?(?i:value)[\"']?[ \t]*+[=:][ \t]*+"
    r"(?P<q2>[\"'])(?P<quoted>(?:\\[^\n]|(?!(?P=q2))[^\\\n])++)(?P=q2)"
    r"|(?<![\w-])name[ \t]*+:[ \t]*+[\"']?(?P<env>[A-Za-z_][\w.-]{0,100}+)[\"']?[ \t]*+(?:\r?\n|,)[ \t]*+value[ \t]*+:[ \t]*+"
    r"(?:\"(?P<dq>(?:[^\"\\\n]|\\[^\n])++)\"|'(?P<sq>(?:[^'\\\n]|\\[^\n]|'')++)'|(?P<bare>[^\s\"']++))"
    r"|(?<![\w.])(?=[A-Za-z_])(?:(?:(?:os\.)?(?:getenv|environ\.get|environ\.setdefault)|getEnv(?:OrDefault)?|ENV\.fetch|config|env"
    r"|(?:System\.getenv\(\)\.|(?:\w{1,40}+(?:\(\)|\[\s*+[\"'][\w.-]{1,40}+[\"']\s*+\])?\.){1,2})(?:getOrDefault|get|getProperty|SetDefault|str))\("
    r"|getattr\(\s*+\w{1,40}+\s*+,|ENV\.fetch[ \t])\s*+(?:key[ \t]*+=[ \t]*+)?(?P<q3>[\"'])"
    r"(?P<default>[A-Za-z_][\w.-]{0,100}+)(?P=q3)\s*+,\s*+(?:default[ \t]*+=[ \t]*+)?[bfru]{0,2}+"
    r"(?:\"(?P<ddq>(?:[^\"\\\n]|\\[^\n])++)\"|(?P<dq6>['`])(?P<dsq>(?:\\[^\n]|(?!(?P=dq6))[^\\\n])++)(?P=dq6))"
    r"|(?<![\w.])(?=[cpiBeE$oSgGD])(?P<cmp>cmp\.Or\(\s*+)?(?:(?:(?:process\??\.|import\.meta\.|Bun\.)?env\??\."
    r"|Deno\.env\.toObject\(\)\.)(?P<js>[A-Za-z_]\w{0,100}+)"
    r"|(?:(?:os\.)?environ|ENV|\$_ENV|\$_SERVER|(?:process|import\.meta|Bun)\.env)\[\s*+(?P<q4>[\"'])(?P<indexed>[A-Za-z_][\w.-]{0,100}+)(?P=q4)\s*+\]"
    r"|(?:(?:os\.|System\.)?(?:[gG]etenv|environ\.get)|getEnv|ENV\.fetch|Deno\.env\.get|Environment\.GetEnvironmentVariable"
    r"|env::var|env)\(\s*+(?P<q5>[\"'])(?P<called>[A-Za-z_][\w.-]{0,100}+)(?P=q5)\s*+(?:,\s*+[^()\n]{0,40}+)?\))(?:\??\.[A-Za-z]{1,20}+\(\))?"
    r"\s*+(?(cmp),|(?:\|\||\?\?|\?:|or\b|\{(?:\s*+\|[^|\n]{0,30}+\|)?|do\b|\)?\.orElse\(|\.unwrap_or(?:_else)?\((?:\s*+\|[^|\n]{0,20}+\|)?"
    r"|if\s[^\n]{1,200}?\selse\b))\s*+(?:[bfr@]|String::from\()?"
    r"(?:\"(?P<fdq>(?:[^\"\\\n]|\\[^\n])++)\"|(?P<fq>['`])(?P<fsq>(?:\\[^\n]|(?!(?P=fq))[^\\\n])++)(?P=fq))"
    r"|(?:(?<![\w\"'`])|(?P<getter>(?<![\w.$:])(?:[\w$]{1,40}+(?:\.|::)){0,2}+(?i:get|env|fetch|config|setting|option)\w{0,30}+"
    r"(?:<[\w, ]{1,40}+>)?\(\s*+))(?P<kq>[\"'])(?P<keyed>[A-Za-z_][\w.:-]{0,100}+)(?P=kq)"
    r"(?:[^\"'`\n;=(:]|\(\)){0,40}?(?:\r?\n[ \t]{0,40}+)?"
    r"(?:(?(getter),|(?!))|\?\?|\|\||\?:|(?<![\w.])or\b|\.(?:orElse(?:Get)?|unwrap_or(?:_else)?|getOrElse)\()"
    r"[ \t]*+(?:\r?\n[ \t]{0,40}+)?(?:(?:fallback|default|defValue|defaultValue)[ \t]*+=[ \t]*+)?"
    r"(?:\(\)[ \t]*+[-=]>|\|\w{0,10}+\|)?[ \t]*+\{?[ \t]*+(?:[bfruBFRU]{1,2}+|[$@])?"
    r"(?=(?:\"\"\"|[\"'`])[^\"'`\n]{0,200}?(?:\d|[^\w\s\"'`.+:-](?![\"'`])))"
    r"(?:\"\"\"(?P<ktq>[^\"\n]{1,200}+)\"\"\"|\"(?P<kdq>(?:[^\"\\\n]|\\[^\n])++)\""
    r"|(?P<kq2>['`])(?P<ksq>(?:\\[^\n]|(?!(?P=kq2))[^\\\n])++)(?P=kq2))"
    r"|(?<![\w$])\.?(?:[A-Za-z_$][\w$]{0,40}+\.){0,2}+(?P<dotted>[A-Za-z_]\w{0,60}+)[ \t]*+(?:\?\?|\|\||\?:|or\b"
    r"|\|[ \t]*+default\b[ \t]*+\(?)[ \t]*+(?:\"(?P<odq>(?:[^\"\\\n]|\\[^\n])++)\"|'(?P<osq>(?:[^'\\\n]|\\[^\n])++)')"
    r"|(?<![\w.])default[ \t]*+=[ \t]*+[bfru]{0,2}+(?:\"(?P<rdq>(?:[^\"\\\n]|\\[^\n])++)\"|'(?P<rsq>(?:[^'\\\n]|\\[^\n])++)')[ \t]*+,\s*+"
    r"key[ \t]*+=[ \t]*+(?P<kq3>[\"'])(?P<rkey>[A-Za-z_][\w.-]{0,100}+)(?P=kq3)"
)
#: :data:`NAMED_VALUE`'s groups holding the name, and the value (the first five are markup's and assignments'; the rest,
#: :data:`DEFAULT_VALUES`, a default or a fallback in code).
NAMED_NAMES = ("tag", "attr", "env", "default", "js", "indexed", "called", "keyed", "dotted", "rkey")
#: The value groups of a default or fallback (a literal after the name, not assigned to it): it must also read as a
#: password by itself (:data:`DEFAULT_SECRET`).
DEFAULT_VALUES = ("ddq", "dsq", "fdq", "fsq", "ktq", "kdq", "ksq", "odq", "osq", "rdq", "rsq")
NAMED_VALUES = ("element", "quoted", "dq", "sq", "bare", *DEFAULT_VALUES)
#: What a default or fallback in code (:data:`DEFAULT_VALUES`) must look like to be
#: taken for a password: 8+ characters without a space or a ``/`` (paths, URLs), not ``host:port``, and both cases or a
#: symbol (``aes-256-gcm``, ``HS256``, ``us-east-1``, ``NOT_CONFIGURED``, ``./keys/dev.pem`` are settings), not a
#: template (``${prefix}-key``, ``{env}-Key1``), one word of letters in any script, optionally ending in ``:`` or ``*``
#: (``'Authorization'``, ``"Password:"``, ``"Contraseña"``: labels), words joined by ``-`` (``X-Auth-Token``,
#: ``__Secure-next-auth.session-token``: a header's or cookie's name), a reference (``env:DB_PASSWORD``,
#: ``keyring:myapp``, ``ENV:API_KEY``, ``%AUTH_TOKEN%``, ``@AUTH_TOKEN``) nor a placeholder (``(anonymous)``,
#: ``API_KEY=***``, ``****``), not a regular expression (``^…``, ``(?=``, ``{8,}``), no CJK text (a message), no letters
#: (one final symbol at most) with a placeholder's word (``YourApiKeyHere``, ``TokenNotSet``, ``Unknown!``), not
#: validation rules (``required|string|min:8``).
DEFAULT_SECRET = re.compile(r"(?![./~^])(?![A-Z]?[^\W\d_A-Z]++[:*]?$)(?!(?:[^\W\d]|\.)*+-(?:[^\W\d]|[.-])*+[:*]?$)"
                            r"(?!(?=[A-Za-z]++[!?.]?$)[A-Za-z]*?(?:Your|Please|Not?|None|Missing|Expired|Required|Unknown|Unset"
                            r"|Placeholder|Here)(?![a-z]))"
                            r"(?!\S*(?:\(\?[=!:<]|\{\d{1,3},\d{0,3}\}|[" + _CJK + r"]))"
                            r"(?![A-Za-z][A-Za-z\d]*+:[A-Za-z_]++$|%\w++%$|@\w++$|\([^()]*+\)$|[A-Z][A-Z\d_]*+=|\*++(?:[A-Z_]++\*++)?$)"
                            r"(?!\S*(?:\$\{|\{\w{1,40}+\}))(?![^/\s]*/)(?![a-z\d_:,.-]*+\|[a-z\d_:,.|-]*+$)(?![\w.-]{1,100}+:\d{1,5}$)(?:(?=[^\sA-Z]*+[A-Z])(?=[^\sa-z]*+[a-z])|(?=[\w.-]*+[^\w.\s-]))\S{8,}")
#: A value that names something instead of being a secret, for the names and labels that are credentials only when
#: their value looks like one (``auth``, ``*_KEY``, ``the private key is``): a path (``~/.ssh/deploy_key``; not one
#: piece of mixed case and digits after ``~``, ``.`` or ``/`` alone: ``password is ~Xk9Pq2Lm7Nv4`` is a password),
#: ``name:number`` (``session:123``), an algorithm or encoding (``RSA-4096``, ``UUIDv4``, ``Argon2id``, ``PKCS#8``,
#: ``base64url``) or an auth scheme (``oauth2``). Joined names (``bearer-token-v2``, ``id_ed25519``) are told piece by
#: piece (:func:`redact._names_something`).
_ALGORITHM = r"[A-Z]{2,}+-?v?\d++"  # RSA-4096, SHA256, UUIDv4
NAME_VALUE = re.compile(
    r"[~./](?!(?=[^\s/.]*?\d)(?=[^\s/.]*?[a-z])(?=[^\s/.]*?[A-Z])[^\s/.]{7,}+$)\S*+|[^/\s]++/\S*+|[A-Za-z_][\w.-]*+:\d++|" + _ALGORITHM +
    r"|(?i:oauth2?|basic|bearer|digest|ntlm|kerberos|negotiate|saml|oidc|jwt|hmac|token|none|required|optional)"
    r"|(?i:argon2(?:id|i|d)?|b?crypt|scrypt|pbkdf2|sha-?\d{1,3}|md5|aes|rsa|ed25519|pkcs#?\d{1,2}|base64|utf-?8)\S*+"
)
#: One piece of a joined name: a word (lower case, Capitalised or upper case), then digits, or digits alone.
NAME_PIECE = re.compile(r"(?:[A-Z]?[a-z]++|[A-Z]++)?\d*+")
#: The narrower form after a CJK label (``私钥是RSA-4096的``), where a password joined by ``-`` is as likely as a
#: name: an algorithm's name only.
CJK_NAME_VALUE = re.compile(_ALGORITHM)
#: Trailing punctuation that ends a sentence or a call, not a password.
VALUE_END = ".,;:!?)]}>'\""
#: Typos of password that people write in its place (``DB_PASWORD=…``, ``passwrod: …``).
TYPED_PASSWORDS = ("pasword", "passwrod", "passowrd")
#: Endings of a name's last word that make it a credential whatever the value (``client_secret``, ``PGPASSWORD``,
#: ``csrftoken``); not "credentials": fetch's ``credentials: 'include'`` is code.
CREDENTIAL_ENDINGS = ("password", "passwd", "passphrase", "secret", "token") + TYPED_PASSWORDS
#: Endings of a name or label after which letters alone can be a password (:func:`redact._passphrase`); so can
#: ``pass`` as its last word (:func:`redact._password_name`).
PASSWORD_ENDINGS = ("password", "passwd", "passphrase", "passcode", "pwd", "psk") + TYPED_PASSWORDS
#: A password of letters alone after such a name or label: 12+ lower-case letters (``correcthorsebatterystaple``), or
#: three or more Capitalised words (``CorrectHorseBatteryStaple``, :data:`CAMEL_WORD`), taken only where no word
#: follows (:data:`CLAUSE_END`; ``the password is stored in vault`` is prose). Shorter words are prose or settings
#: (``password: required``).
PASSPHRASE = re.compile(r"[a-z]{12,}+")
CAMEL_WORD = re.compile(r"[A-Z][a-z]++")
#: Up to this many letters, a lower-case value ending as English adjectives and participles do (:data:`WORD_ENDINGS`)
#: is a word (``password: autogenerated``); longer, it is more often words run together (``purpleelephantdancing``).
WORD_LENGTH = 13
WORD_ENDINGS = ("able", "ible", "ed", "ing", "ion", "ment", "ness", "ent", "ant", "ous", "ful", "less", "ive", "al", "ic",
                "ly", "ary", "ory")
#: Last words of a CamelCase value that make it a type in an annotation (``password: PasswordInputField``), not a
#: passphrase.
TYPE_ENDINGS = ("Field", "Str", "String", "Bytes", "Input", "Type", "Form", "Widget", "Model", "Schema", "Column",
                "Hash", "Hasher", "Validator", "Config", "Settings", "Policy", "Manager", "Provider", "Error")
#: What may follow a passphrase: the end of its text, or anything but a letter of the Latin alphabet after spaces (a
#: clause's punctuation, a line break, a closing quote, an emoji): ``password: x and …`` goes on in prose.
CLAUSE_END = re.compile(r"[ \t]*+(?:[^A-Za-z \t]|\Z)")
#: Last words that make a name a credential which those endings do not cover (``SSHPASS``: what ``sshpass -e`` reads).
CREDENTIAL_WORDS = {"passcode", "psk", "apikey", "accesskey", "secretkey", "privatekey", "mima", "sshpass"}
#: Last words of names that are credentials only when the value looks like one (a digit or a symbol in it): ``auth=true``
#: and ``credentials: 'same-origin'`` are settings, ``auth=dXNlcjpw…`` is not; ``sk``: a cloud's secret key (``SK=…``);
#: ``appkey``: an SDK's app key, sent beside its secret (DingTalk's, Umeng's: ``appkey：…``).
WEAK_CREDENTIAL_WORDS = {"pass", "pwd", "auth", "credential", "credentials", "sk", "appkey"}
#: ``pw`` as a name or its last word after ``_``, ``-`` or ``.`` (``pw: …``, ``DB_PW=…``): a weak credential name;
#: not the last hump of a CamelCase value (``Sup3rS3cretPw``).
PW_NAME = re.compile(r"(?i)(?:^|[_.-])pw$")
#: ``<qualifier>_key`` names that are credentials (``api_key``, ``SECRET_KEY``, ``signingKey``).
KEY_QUALIFIERS = {"api", "access", "secret", "private", "signing", "encryption", "master"}
#: ``<qualifier>Key`` names whose value is a credential when it looks like one (``jwtKey``, ``hmac_key``, an SDK's
#: ``appKey``, Azure API Management's ``Ocp-Apim-Subscription-Key``), not a name a key is stored under (``const jwtKey = "jwt_token"``, ``appKey: 'main'``).
WEAK_KEY_QUALIFIERS = {"jwt", "hmac", "cookie", "webhook", "license", "licence", "session", "app", "subscription"}
#: ``<qualifier>_KEY`` names that are not credentials (an UPPER_SNAKE ``*_KEY`` otherwise is one: ``STRIPE_KEY``).
PLAIN_KEY_QUALIFIERS = {"primary", "foreign", "sort", "partition", "cache", "lookup", "hash", "shard", "row", "range",
                        "unique", "index", "map", "group", "order", "public", "routing", "idempotency", "storage", "dedup"}
#: Words that follow a flag's name in prose about it rather than its value (``use the --password option``), and the
#: credential's own name where docs write its value (``curl -u user:password``).
FLAG_PROSE = frozenset("option options flag flags argument arguments parameter parameters switch instead and or is to"
                       " password passwd pass pwd secret token".split())
#: What follows a number that is a length or a size rather than a value (``8-16位``, ``2048 bit``, ``12个字符``).
SIZE_UNITS = ("位", "个", "個", "字", " 位", " 个", " 個", " 字", "bit", " bit", "-bit", " chars", " characters")
#: Secrets documentation prints as examples, never real ones: Telegram's bot token after its bot's id (BotFather's docs'
#: ``123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11``) and AWS's secret access key (``wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY``;
#: its key id ``AKIAIOSFODNN7EXAMPLE`` is :data:`KEY_FORMATS`' exception). Kept wherever a value or a long token is judged.
DOCUMENTED_EXAMPLES = ("ABC-DEF1234ghIkl-zyx57W2v1u123ew11", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
#: Values that are placeholders, not literals, quoted or not: a documented example (:data:`DOCUMENTED_EXAMPLES`), a constant or a type's name, a variable, a list or dict,
#: an environment variable's name (``"OPENAI_API_KEY"``, not ``"S3CR3T_KEY"``), a scheme joined to a token (``"Bearer "
#: + t``), ``TODO``, ``none``, ``default``, ``changeme`` and the JDK's ``changeit`` (defaults every attacker tries first), a
#: mask (``********``, ``(none)``), CJK text alone (``"请输入密码"``, not ``"张三Abc123!"``), what a shell, a CI system or a template fills in when it runs (``"${{ secrets.DB_PASSWORD }}"``,
#: ``"$(cat pw.txt)"``, ``%SA_PASSWORD%``, ``#{Pw}#``, ``@PW@``, MyBatis' and Octopus' ``#{password}``
#: (``#{password,jdbcType=VARCHAR}``), hiera's ``%{…}``, Terraform's ``${var.db_password}``, ``${VAR:-}`` without a default, ``${VAR:?message}``,
#: Serverless' ``${ssm:…}``; not a template's literal: ``{{ '…' }}``, and with filters ``{{ '…' | trim }}`` when not a path or
#: an environment variable's name), a key's prefix before its docs' ``xxx…`` (``sk-proj-xxx…``) or an ellipsis and a word
#: (``sk-...your key here``), a bind parameter (``:password``, T-SQL's ``@Password``), a YAML tag (``!ENV``), a package's
#: version or range (``"jsonwebtoken": "^9.0.2"``, Cargo's ``jsonwebtoken = "9"``, ``"9.2"``), a secret store's reference (``vault:secret/data/db#password``,
#: ``op://vault/item/password``), a ``your-`` or ``your_`` name of letters (``'your-app-secret'``), a colour (a design
#: token's ``--primary-token: #1677ff``, a theme's ``secret: '#ff4d4f'``).
#: A colour as CSS writes it (``#1677ff``): a placeholder under any name but a password's, which it may well be.
_COLOUR = r"#(?:[0-9A-Fa-f]{3,4}+|[0-9A-Fa-f]{6}|[0-9A-Fa-f]{8})"
COLOUR = re.compile(_COLOUR)
_PLACEHOLDER = (r"None|null|nil|true|false|True|False|undefined|str|bytes|int|bool|float|dict|list|string|number|boolean"
                r"|\$\{\{.*|\$\(.*|%\w+%|#\{\w+\}#|@\w+@|#\{[\w.,= ]{1,100}+(?:\}.*)?|%\{[^{}\n]{1,200}+\}"
                r"|\$\{[\w.]{1,100}+(?::?[-=])?\}?|\$\{\w{1,100}+:?\?[^{}\n]{0,200}+\}?|\$\{(?:ssm|env|file|self|opt|cf|s3|sls)[:(][^{}\s]{0,200}+\}?"
                r"|:[A-Za-z_]\w{0,60}+|@[A-Z][A-Za-z]{0,60}+|![A-Za-z][A-Za-z_]{0,30}+"
                r"|Any|\$\{?(?!(?=[A-Za-z\d]*?[a-z])(?=[A-Za-z\d]*?[A-Z])[A-Za-z\d]*?\d[A-Za-z][A-Za-z\d]*+$)\w+\}?|\$\w+\{[\"']?\w+[\"']?\}?"
                r"|,\s.*|%\(?\w*\)?s|\{(?![A-Za-z0-9+/]{16,}+={0,2}\}$|\{[ \t]*+['\"](?:[^'\"\s]{4,200}+['\"][ \t]*+|(?![A-Z\d_]++['\"])[^'\"\s/]{4,200}+['\"][ \t]*+\|[^{}\n]{0,200}+)\}\}$).*|\[.*|<(?!(?=[^>]*?[a-z])(?=[^>]*?[A-Z])(?=[^>]*?\d)(?=[^>]*?[!#$%&*?@^])[^<>\s]{4,100}+>?$).*|(?:[A-Za-z]{2,8}+[-_]){0,2}(?:x{3,}|X{3,}|\*{3,})|\(\w*\)|[\w-]{0,12}+(?:\.{3}|…)(?:[a-z]{1,20}+)?|(?i:your)[-_][A-Za-z_-]{1,60}+"
                r"|TODO|TBD|FIXME|none|NONE|default|DEFAULT|(?i:change[-_]?(?:me|it))|\d{1,2}+|[\^~]?v?\d{1,4}+\.(?:\d{1,4}+|[x*])(?:\.(?:\d{1,4}+|[x*])){0,2}+(?:-[\w.]{1,40}+)?"
                r"|(?:vault|op|ref\+[a-z]{2,12}+|keyring|ssm|secretsmanager|awssm|gcpsm|azkv):/{0,2}+[\w-]{1,100}+/[\w/#.:@+-]{1,200}+"
                r"|(?![A-Z\d_]{0,60}?\d[A-Z])(?:[A-Z\d_]{0,60}_)?(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PWD|PASSPHRASE)"
                r"|" + _COLOUR + r"|[Bb]earer|[Bb]asic|[Dd]igest|[\u3000-\u303f\u3040-\u9fff\uac00-\ud7af！（），：；？～\s]{2,200}+"
                r"|(?:\d{1,12}+:)?(?:" + "|".join(map(re.escape, DOCUMENTED_EXAMPLES)) + ")")
PLACEHOLDER_VALUE = re.compile(f"^(?:{_PLACEHOLDER})$")
#: Values written bare that are code or placeholders: also an attribute, a call or an index (``settings.db.password``,
#: ``os.environ["X"]``, PHP's ``$_ENV['X']``, JavaScript's optional chain ``req.headers.authorization?.split(…)``, Rust's
#: path ``env::var(…)``). An attribute is names joined by dots: ``Summer.2024!`` is not one. A
#: quoted value is never code (:data:`PLACEHOLDER_VALUE`): ``"Winter.Is.Coming7"``. Nor is Rust's reference (``password:
#: &str``, ``&'static``, ``&mut``, ``&args[1]``, ``&[u8]``), nor CloudFormation's ``!Ref`` and Ansible's ``!vault``, a
#: generic type in an annotation (``token: Option<String>``, ``apiKey: Record<string, string>``), nor a
#: Wi-Fi network's band after its key's label (``WPA2-PSK 2.4GHz``, ``WPA2 key 5GHz-only``).
#: A radio's band or frequency (``2.4GHz``, ``5GHz``, ``868MHz``), alone or joined to another or to what it is said to be
#: (``-only``, ``-band``): joined to any word it is a password's start (``DB_PASSWORD=5GHz-office``).
_BAND = r"\d{1,3}+(?:\.\d{1,3}+)?+(?i:[gmk]hz)"
CODE_VALUE = re.compile(
    f"^(?:{_PLACEHOLDER}"
    r"|(?=\$?[A-Za-z_]\w*(?:[.(\[]|\?\.|::))(?!\$?[\w.]*\.(?![A-Za-z_]))\$?[A-Za-z_](?:[\w.]|\?\.|::)*+(?:[(\[].*)?"  # an attribute, call or index
    r"|&(?!(?:[\w:]*?[a-z\d][A-Z][a-z]?(?=[A-Z\d])){2})(?:'?[A-Za-z_][\w:]*+(?:[<\[].*)?|\[.*)"  # a Rust reference;
    # not where humps of one or two letters come twice between others, as a password's do (&Xk9Pq2Lm7Nv4, not &X509Cert)
    r"|\.{1,2}+/.*|~/.*"  # a relative path (--from-file=password=./pw.txt)
    r"|!(?:Ref|Sub|GetAtt|ImportValue|FindInMap|Join|Select|If|Base64|Split|Equals|Condition|vault)"  # a YAML tag of code
    r"|[A-Z]\w*\[.*"  # a type such as Optional[str]
    r"|[A-Z][A-Za-z]{1,40}+<[A-Za-z_&'(\[][\w:&'\[\](), <>?]{0,200}+"  # a generic type: Option<String>, Record<string,
    r"|" + _BAND + r"(?:[-_/](?:" + _BAND + r"|(?i:only|bands?)))?)$"  # a radio's band (WPA2-PSK 2.4GHz, 5GHz-only, 2.4GHz/5GHz)
)


def line_start(text: str, pos: int, most: int) -> int:
    """Where the line holding ``pos`` starts in ``text``, read at most ``most`` characters back (a longer line's
    ``pos - most``): what a judge reads of a match's line before it, bounded."""
    low = max(pos - most, 0)
    return text.rfind("\n", low, pos) + 1 or low


def replace_group(m: re.Match[str], group: str | int, redacted: str, length: int | None = None) -> str:
    """``m``'s text with ``group`` (its first ``length`` characters) replaced by ``redacted``."""
    start, end = m.span(group)
    end = end if length is None else start + length
    return m.string[m.start() : start] + redacted + m.string[end : m.end()]


def quoted_run(quote: str, stop: str = "") -> str:
    """What a string quoted by ``quote`` holds, to its closing quote however long: possessively, any character but the
    quote, ``\\``, a line break and ``stop``'s, or ``\\`` and the character it escapes (``"Kq7\\"vLp"``). ``quote`` is the
    quote (``"``, ``'``, or ``"'``: either ends the run) or a backreference to the group holding it (``(?P=q)``)."""
    if quote.startswith("(?P="):
        return rf"(?:\\[^\n]|(?!{quote})[^\\\n{stop}])++"
    return rf"(?:[^{quote}\\\n{stop}]|\\[^\n])++"
