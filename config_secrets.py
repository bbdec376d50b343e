"""Credentials in configuration and encoded bodies that the assignment patterns do not read, for :mod:`redact`.

A builder's or a fluent setter's call (``.apiKey("…")``), Kotlin's ``"Authorization" to "Bearer …"``, a JDBC URL whose
password is concatenated (``"…&password=" + "…"``), Spring's ``<property name="password"><value>…</value>`` (.NET's
``<setting name="Password" …><value>…</value>``), a Java EE ``<env-entry>`` or a servlet's ``<param-name>``, a Kubernetes env entry written value first, JSON
escaped for HTML (``&quot;password&quot;:&quot;…&quot;``) or for a URL (``%22password%22%3A%22…%22``), a form body
encoded in a URL (``password%3D…``), OpenVPN's inline ``<auth-user-pass>``, a line of postfix's ``sasl_passwd``
(``[smtp.host]:587 user@host:…``), the base64 values under a Kubernetes Secret's ``data:`` and a Basic credential's
base64 ``user:password`` pasted without its header; key material written as JSON: a private JWK's members
(``"k"``, ``"d"``, ``"p"``...), a Solana keypair's 64 bytes (``id.json``), Composer's ``github-oauth`` and
``gitlab-token`` tokens by host; a Java XML properties ``<entry>``, CloudFormation's ``ParameterKey``/``ParameterValue``,
a connection string's password or key after ``;`` (spaces or ODBC's braces in it), a proxy's share link (``trojan://…@``) and a line of PgBouncer's ``userlist.txt``. A named value is judged
as an assignment of it to its name would be (the ``judge`` :mod:`redact` passes); an unnamed one must read as a
password (:func:`prose_secrets.reads_as_password`). Pure; linear in the length of the text (each pattern starts at a
literal and reads a value after it to its end, each value from one start); never raises.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
from collections.abc import Callable
from urllib.parse import unquote

from . import prefilter, prose_secrets, random_tokens
from .code_secrets import Judge
from .secret_patterns import replace_group

#: A credential's word at the end of a name, looked ahead at before a name is read.
_CREDENTIAL_END = r"(?i:pass|password|passwd|pwd|secret|token|key|auth)"
#: A fluent setter or a builder's method named for a credential and given one string that reads as a password
#: (``.apiKey("…")``, ``.clientSecret('…')``; not a test's fixture: ``user.set_password('testpassword')``). Groups ``name``, ``value``.
SETTER_CALL = re.compile(
    r"\.(?P<name>[A-Za-z_]\w{0,60}?" + _CREDENTIAL_END + r")\([ \t]*+(?P<q>[\"'])(?P<value>(?:\\[^\n]|(?!(?P=q))[^\\\n])++)(?P=q)[ \t]*+\)"
)
#: Kotlin's pair of a header and its value (``"Authorization" to "Bearer …"``, ``"X-Api-Key" to "…"``), to its closing
#: quote past ``\\`` and its next character. Groups ``name``, ``value`` (after the scheme).
KOTLIN_PAIR = re.compile(
    r"\"(?P<name>[\w.-]{1,60}+)\"[ \t]++to[ \t]++\"(?:(?P<scheme>(?i:bearer|basic|token))[ \t]++)?(?P<value>(?:[^\"\\\n]|\\[^\n])++)\""
)
#: A URL's credential parameter whose value is concatenated after it (``"jdbc:mysql://…?password=" + "…"``). Groups
#: ``name``, ``value``.
CONCATENATED = re.compile(
    r"[?&;](?P<name>[\w.-]{0,60}?(?i:password|passwd|pwd|secret|token))=[\"'][ \t]*+\+[ \t]*+[\"'](?P<value>(?:[^\"'\\\n]|\\[^\n])++)[\"']"
)
#: Spring's bean property with its value as an element (``<property name="password"><value>…</value></property>``), and
#: .NET's setting (``<setting name="Password" serializeAs="String">`` then ``<value>…</value>``, up to two attributes after the name).
SPRING_VALUE = re.compile(
    r"<(?:property|setting)[ \t]++name=\"(?P<name>[^\"<>\n]{1,100}+)\"(?:[ \t]++[\w:.-]{1,40}+=\"[^\"<>\n]{0,100}+\"){0,2}[ \t]*+>"
    r"\s{0,40}+<value>(?P<value>[^<>\n]++)</value>"
)
#: A Java EE ``<env-entry>``, a servlet's ``<context-param>`` or ``<init-param>``: its name's element, then its value's (an
#: entry's type or a description between): ``<env-entry-name>db/password</env-entry-name>`` ... ``<env-entry-value>…``,
#: ``<param-name>db.password</param-name><param-value>…``; judged as assigned to the name's last piece.
PARAM_ELEMENTS = re.compile(r"<(?P<kind>env-entry|param)-name>[ \t]*+(?P<name>[^<>\s]{1,100}+)[ \t]*+</(?P=kind)-name>\s{0,200}+"
                            r"(?:<(?P<between>env-entry-type|description)>[^<>\n]{0,200}+</(?P=between)>\s{0,200}+)?"
                            r"<(?P=kind)-value>(?P<value>[^<>\n]++)</(?P=kind)-value>")
#: A Kubernetes env entry written value first (``- value: …`` then ``name: DB_PASSWORD`` on the next line, or in flow
#: style: ``{value: …, name: DB_PASSWORD}``, group ``flow``): the value, quoted (past ``\\`` and its next character, YAML's
#: ``''``) or bare to its run's end (in flow style to a ``,`` or ``}``), is judged as assigned to the name. Groups ``dq``,
#: ``sq``, ``bare``, ``name``.
VALUE_THEN_NAME = re.compile(
    r"(?:(?m:^)[ \t]*+-[ \t]++|(?P<flow>\{)[ \t]*+)value[ \t]*+:[ \t]*+"
    r"(?:\"(?P<dq>(?:[^\"\\\n]|\\[^\n])++)\"|'(?P<sq>(?:[^'\\\n]|\\[^\n]|'')++)'|(?P<bare>[^\s\"'#,}](?(flow)[^\s,}]*+|\S*+)))"
    r"[ \t]*+(?(flow),[ \t]*+|\r?\n[ \t]*+)name[ \t]*+:[ \t]*+[\"']?(?P<name>[A-Za-z_][\w.-]{0,100}+)[\"']?[ \t]*+(?(flow)(?=[,}])|(?=\r?\n|$))"
)
#: A JSON pair escaped for HTML: ``&quot;name&quot;:&quot;value&quot;``.
HTML_JSON = re.compile(
    r"&quot;(?P<name>[\w.-]{1,60}+)&quot;[ \t]*+:[ \t]*+&quot;(?P<value>(?:(?!&quot;)[^\n<>])++)&quot;"
)
#: A JSON pair escaped for a URL: ``%22name%22%3A%22value%22`` (spaces as ``+`` or ``%20`` around the colon).
URL_JSON = re.compile(
    r"(?i)%22(?P<name>[\w.-]{1,60}+)%22(?:%20|\+){0,4}+%3A(?:%20|\+){0,4}+%22(?P<value>(?:(?!%22)[^\s&\"'<>])++)%22"
)
#: A query parameter named for a session, a ticket, a JWT or a signature (``?jwt=…``, ``&sid=…``, ``?ticket=ST-…``,
#: ``&sign=…``), which name ids and flags as often (``?ticket=12345``, ``&sign=1``, ``?sid=home``), to the next ``&``, ``#``,
#: quote or space: :func:`_query_token` judges the value. Group ``value``.
QUERY_TOKEN = re.compile(r"(?i)(?<=[?&;])(?:jwt|sid|sessid|phpsessid|ticket|sign)=(?P<value>[^&#\s\"'<>]++)")
#: A form's pair escaped inside a URL or a log's field: ``name%3Dvalue``, up to the next ``%26`` (``&``).
URL_FORM = re.compile(r"(?i)(?:(?<=%26)|(?<![\w%.-]))(?P<name>[A-Za-z_][\w.-]{0,60}+)%3D(?P<value>(?:(?!%26)[^\s&\"'<>])++)")
#: OpenVPN's inline login: ``<auth-user-pass>``, the user, then the password, each on its line.
OPENVPN_LOGIN = re.compile(
    r"<auth-user-pass>[ \t]*+\r?\n[ \t]*+[^\s<]{1,100}+[ \t]*+\r?\n[ \t]*+(?P<value>[^\s<]++)[ \t]*+\r?\n[ \t]*+</auth-user-pass>"
)
#: A line of postfix's ``sasl_passwd``: a relay (``[smtp.qq.com]:587``), then ``user:password``.
SASL_PASSWD = re.compile(
    r"(?m:^)[ \t]*+\[[\w.-]{1,253}+\](?::\d{1,5}+)?[ \t]++[^\s:]{1,100}+:(?P<value>\S++)[ \t]*+\r?(?m:$)"
)
#: A base64 token without a label (``Ym9iOlRxNyF2Um0yWHM=``), which :func:`_base64_login` decodes: a ``user:password`` whose
#: password reads as one whatever surrounds it.
BASE64_TOKEN = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/]{12,200}+={0,2}(?![A-Za-z0-9+/=_-])")
#: A login as Basic auth encodes it.
LOGIN = re.compile(r"[\w.@-]{1,64}+:(?P<pw>\S{6,100}+)")
#: A Kubernetes Secret's ``data:`` (or an indented one) and the lines under it: ``name: <base64>``.
DATA_BLOCK = re.compile(r"(?m:^)(?P<indent>[ \t]*+)data:[ \t]*+\r?\n")
DATA_LINE = re.compile(r"(?P<indent>[ \t]++)[\w.-]{1,253}+:[ \t]*+(?P<value>[A-Za-z0-9+/]{8,}+={0,2})[ \t]*+(?:\r?\n|$)")
#: A YAML mapping named for credentials (``secrets:``, ``credentials:``, ``passwords:``, ``tokens:``, ``api_keys:``) and one
#: entry of it a line, indented below it (``db: …``), a value without spaces, quoted or not, a comment after it.
SECRETS_BLOCK = re.compile(r"(?im:^)(?P<indent>[ \t]*+)(?:secrets|credentials|passwords|tokens|api[_-]?keys):[ \t]*+\r?\n")
SECRETS_LINE = re.compile(r"(?P<indent>[ \t]++)[\w.-]{1,253}+:[ \t]*+[\"']?(?P<value>[^\s\"']++)[\"']?[ \t]*+(?:#[^\r\n]*+)?(?:\r?\n|$)")
#: An object without objects inside (a JWK, Composer's tokens by host): from a ``{`` to the next ``}``, read once.
FLAT_OBJECT = re.compile(r"\{[^{}]{0,8000}+\}")
#: A JWK's private members (``"k"`` of a symmetric key; ``"d"``, ``"p"``, ``"q"``, ``"dp"``, ``"dq"``, ``"qi"`` of an RSA or EC
#: one), redacted in an object that names its ``"kty"``: bare, those names are any JSON's. Group ``value``.
JWK_PRIVATE = re.compile(r"[\"'](?:k|d|p|q|dp|dq|qi)[\"'][ \t\r\n]*+:[ \t\r\n]*+[\"'](?P<value>[A-Za-z0-9_-]{8,}+={0,2})[\"']")
#: Composer's tokens by host (``auth.json``, ``COMPOSER_AUTH``): ``"github-oauth": {"github.com": "…"}``; a GitHub
#: token of 40 hex digits would read as a git id anywhere else; and Consul's ACL tokens by role, in HCL (``tokens {`` then
#: ``agent = "<uuid>"``, on one line too: ``acl { tokens { … } }``; in JSON under ``"acl"``; a UUID anywhere else is an id;
#: not a tokenizer's or a theme's ``tokens = {…}``). Group ``body``,
#: whose quoted values after ``:`` or ``=`` go (not a variable's ``${…}``).
COMPOSER_TOKENS = re.compile(r"(?:[\"'](?:github-oauth|gitlab-oauth|gitlab-token|bearer)[\"'][ \t\r\n]*+:|(?:(?m:^)|(?<=\{))[ \t]*+tokens(?=[ \t]*+\{)"
                             r"|\"acl\"[ \t\r\n]*+:[ \t\r\n]*+\{[^{}]{0,400}?\"tokens\"[ \t\r\n]*+:)"
                             r"[ \t\r\n]*+(?P<body>\{[^{}]{0,4000}+\})")
HOST_TOKEN = re.compile(r"[:=][ \t\r\n]*+[\"'](?!\$\{)(?P<value>[^\"'\s]{8,}+)[\"']")
#: A change in a Terraform plan (``~ secret_string = "old" -> "new"``): both values are judged as assigned to the name.
PLAN_CHANGE = re.compile(r"(?m:^)[ \t]*+[~+-][ \t]++(?P<name>[\w.-]{1,100}+)[ \t]++=[ \t]++\"(?P<old>(?:[^\"\\\n]|\\[^\n])*+)\"[ \t]++->"
                         r"[ \t]++\"(?P<value>(?:[^\"\\\n]|\\[^\n])++)\"")
#: A Java properties file in XML (``<entry key="jdbc.password">…</entry>``), a tool's setting of its kind (``<arg
#: key="password">…</arg>``, ``<option name=…>``, ``<param>``, ``<var>``, ``<field>``, ``<prop>``) and CloudFormation's
#: parameters (``ParameterKey=DBPassword,ParameterValue=…``, in JSON too): the value is judged as assigned to the key.
ENTRY_VALUE = re.compile(r"<(?P<tag>entry|arg|option|param|var|variable|field|prop)[ \t]++(?:key|name)=\"(?P<name>[^\"<>\n]{1,100}+)\"[ \t]*+>"
                         r"(?P<value>[^<>\n]++)</(?P=tag)>"
                         r"|ParameterKey(?:=|\"[ \t]*+:[ \t]*+\")(?P<pname>[\w.-]{1,100}+)\"?[ \t]*+,[ \t]*+\"?ParameterValue"
                         r"(?:=|\"[ \t]*+:[ \t]*+\")(?P<pvalue>[^\s,\"]++)")
#: A connection string's password or key after a ``;`` (SQL Server's, ODBC's, Azure Storage's and Cosmos DB's): to the next
#: ``;`` (spaces in it too: ``Password=Hz 2024 abc!;``) or in ODBC's braces (``Pwd={…;…}``, ``}}`` a brace in them, each ``{`` another's start, so not in them), however
#: long (a bound would send its rest). Group ``value``.
CONNECTION_SECRET = re.compile(r"(?i)(?<=;)[ \t]*+(?:password|pwd|accountkey|sharedaccesskey)[ \t]*+=[ \t]*+"
                               r"(?P<value>\{(?:[^{}\n]|\}\})++\}|[^;{\s\"'][^;\n\"']*+)(?=;|$|[\"'])")
#: A proxy's share link, whose user is its password (``trojan://…@host:443``, ``hysteria2://…@``, ``tuic://uuid:…@``), to its ``@``.
PROXY_LINK = re.compile(r"(?i)(?<![\w+.-])(?:trojan|hysteria2|hy2|tuic|anytls)://(?P<value>[^@/\s]{6,}+)@")
#: A line of PgBouncer's ``userlist.txt``: a quoted user, then a quoted password without ``/`` (``"GET" "/api"`` is a
#: log's) or its md5/SCRAM hash.
USERLIST_LINE = re.compile(r"(?m:^)[ \t]*+\"[\w.@-]{1,64}+\"[ \t]++\"(?P<value>[^\"\n]{6,}+)\"[ \t]*+\r?(?m:$)")
#: A JSON array of numbers (a Solana keypair's ``id.json`` is 64 of 0 to 255): :func:`_key_bytes` counts them.
BYTE_ARRAY = re.compile(r"\[[\d,\s]{127,4000}+\]")
#: A quoted session id under its name (``"session_id": "…"``, ``sessionId: '…'``, ``session-id=…``): an API's or a
#: framework's session, a secret when it reads as random (:func:`_session_secret`); a UUID or a dated id is a
#: conversation's or a request's and stays. Group ``value``.
SESSION_ID = re.compile(r"(?i)(?<![A-Za-z0-9])session[_-]?id[\"']?[ \t]*+[:=][ \t]*+[\"'](?P<value>[A-Za-z0-9%._:+/=-]{16,}+)[\"']")
#: An XML-RPC struct's member (``<member><name>password</name><value><string>…</string></value></member>``), and a
#: parameter's ``<Name>`` and ``<Value>`` in capitals (AWS' and SOAP's ``<Parameter>``): the value is judged as assigned
#: to the name. Group ``name``, ``value``.
XMLRPC_MEMBER = re.compile(r"<(?i:name)>[ \t]*+(?P<name>[\w.-]{1,100}+)[ \t]*+</(?i:name)>\s{0,40}+<(?i:value)>[ \t]*+(?:<(?:string|base64)>)?"
                           r"(?P<value>[^<>\n]++)(?:</(?:string|base64)>)?[ \t]*+</(?i:value)>")
#: nginx's ``map $http_x_api_key $client { "…" mobile; }`` over a credential's variable (a header, a query argument or
#: a cookie named as one): each source value of the block is a key a client sends. Groups ``var``, ``body`` (to the
#: block's ``}``, read once).
NGINX_MAP = re.compile(r"(?<![\w-])map[ \t]++\$(?P<var>\w{1,100}+)[ \t]++\$\w{1,100}+[ \t]*+\{(?P<body>[^{}]{0,8000}+)\}")
#: A line of a map's block: its source value, quoted or bare (``default``, ``hostnames``, a regex ``~…`` and ``''`` are
#: nginx's own). Group ``value`` (after an ``Authorization`` scheme, if one).
MAP_ENTRY = re.compile(r"(?m:^)[ \t]*+(?P<q>[\"']?)(?:(?i:bearer|basic|token)[ \t]++)?(?P<value>[^\s\"';{}~][^\s\"';{}]{7,}+)(?P=q)[ \t]++[^\s;]")
#: A credential's name in a map's variable (``$http_x_api_key``, ``$arg_token``, ``$cookie_admin_token``, ``$http_authorization``).
MAP_CREDENTIAL = re.compile(r"(?i)(?:key|token|secret|auth|authorization|password|passwd|sign|signature|apikey)$")
#: An object under a credential's name holding its ``"value"``, after other members too (``terraform output -json``'s
#: ``"db_password": {"sensitive": true, "type": "string", "value": "…"}``, Spring's actuator: ``"spring.datasource.password":
#: {"value": "…"``): the value is judged as assigned to the name. Groups ``name``, ``value``.
OBJECT_VALUE = re.compile(r"\"(?P<name>[\w.-]{1,100}+)\"\s*+:\s*+\{(?=[^{}]{0,400}?\"value\")[^{}]{0,400}?\"value\"\s*+:\s*+\"(?P<value>(?:[^\"\\\n]|\\[^\n])++)\"")
#: A WebSocket URL (``wss://host/ws/v1/…``), whose path segments :func:`_ws_path` judges: a stream's token in the path.
WS_URL = re.compile(r"(?<![\w.+-])wss?://[^\s/\"'<>`]{1,253}+(?P<path>/[^\s\"'<>`?#]{0,2000}+)")


def redact(text: str, redacted: str, judge: Judge) -> str:
    """``text`` with those credentials replaced by ``redacted``, the rest as it was."""
    text = prefilter.sub(SETTER_CALL, lambda m: _named(m, redacted, judge) if prose_secrets.reads_as_password(m["value"]) else m.group(), text)
    if " to " in text:
        text = KOTLIN_PAIR.sub(lambda m: _kotlin(m, redacted, judge), text)
    for pattern in (CONCATENATED, SPRING_VALUE, OBJECT_VALUE, XMLRPC_MEMBER):
        text = prefilter.sub(pattern, lambda m: _named(m, redacted, judge), text)
    text = prefilter.sub(ENTRY_VALUE, lambda m: _entry(m, redacted, judge), text)
    text = prefilter.sub(PARAM_ELEMENTS, lambda m: replace_group(m, "value", redacted)
                         if judge(m["name"].rpartition("/")[2], m["value"], False) else m.group(), text)
    text = prefilter.sub(VALUE_THEN_NAME, lambda m: _value_then_name(m, redacted, judge), text)
    text = prefilter.sub(CONNECTION_SECRET, lambda m: replace_group(m, "value", redacted)
                         if _connection_secret(m.group("value"), redacted) else m.group(), text)
    text = prefilter.sub(PROXY_LINK, lambda m: replace_group(m, "value", redacted), text)
    if '" "' in text:
        text = USERLIST_LINE.sub(lambda m: replace_group(m, "value", redacted) if (prose_secrets.reads_as_password(m["value"]) and "/" not in m["value"])
                                 or m.group("value").startswith(("md5", "SCRAM-SHA-256$")) else m.group(), text)
    text = prefilter.sub(OPENVPN_LOGIN, lambda m: replace_group(m, "value", redacted), text)
    text = prefilter.sub(HTML_JSON, lambda m: _named(m, redacted, judge, html.unescape), text)
    text = prefilter.sub(URL_JSON, lambda m: _named(m, redacted, judge, unquote), text)
    text = prefilter.sub(QUERY_TOKEN, lambda m: replace_group(m, "value", redacted) if _query_token(m["value"]) else m.group(), text)
    text = prefilter.sub(URL_FORM, lambda m: _named(m, redacted, judge, unquote, bare=True), text)
    text = prefilter.sub(SASL_PASSWD, lambda m: _sasl(m, redacted), text)
    text = prefilter.sub(BYTE_ARRAY, lambda m: redacted if _key_bytes(m.group()) else m.group(), text)
    text = prefilter.sub(PLAN_CHANGE, lambda m: _plan_change(m, redacted, judge), text)
    text = prefilter.sub(FLAT_OBJECT, lambda m: _jwk(m.group(), redacted), text)
    text = prefilter.sub(COMPOSER_TOKENS, lambda m: m.group()[: m.start("body") - m.start()]
                         + HOST_TOKEN.sub(lambda t: replace_group(t, "value", redacted), m.group("body")), text)
    if "data:" in text:
        text = _block_values(text, redacted, DATA_BLOCK, DATA_LINE, _decodes_to_text)
    text = _block_values(text, redacted, SECRETS_BLOCK, SECRETS_LINE, prose_secrets.reads_as_key)
    text = prefilter.sub(SESSION_ID, lambda m: replace_group(m, "value", redacted) if _session_secret(m.group("value"))
                         else m.group(), text)
    text = prefilter.sub(NGINX_MAP, lambda m: _nginx_map(m, redacted), text)
    text = prefilter.sub(WS_URL, lambda m: _ws_path(m, redacted), text)
    return BASE64_TOKEN.sub(lambda m: redacted if _base64_login(m.group()) else m.group(), text)


def _named(m: re.Match[str], redacted: str, judge: Judge, decode: Callable[[str], str] | None = None,
           bare: bool = False) -> str:
    """A match of a name and a value, its value redacted when an assignment of it (decoded) to the name would be."""
    value = m.group("value")
    plain = decode(value) if decode else value
    if not judge(m.group("name"), plain, bare):
        return m.group()
    return replace_group(m, "value", redacted)


def _kotlin(m: re.Match[str], redacted: str, judge: Judge) -> str:
    """A :data:`KOTLIN_PAIR`, its value redacted: after ``Authorization``'s scheme when it reads as a credential (a digit,
    8+ characters), else as an assignment to the header's name would be."""
    value = m.group("value")
    if m.group("name").lower().endswith("authorization"):
        secret = m.group("scheme") is not None and len(value) >= 8 and re.search(r"\d", value) is not None
    else:
        secret = judge(m.group("name"), value, False)
    return replace_group(m, "value", redacted) if secret else m.group()


def _value_then_name(m: re.Match[str], redacted: str, judge: Judge) -> str:
    """A :data:`VALUE_THEN_NAME` match, its value redacted when an assignment of it to the name would be."""
    group = next(g for g in ("dq", "sq", "bare") if m.group(g) is not None)
    return replace_group(m, group, redacted) if judge(m["name"], m[group], group == "bare") else m.group()


def _query_token(value: str) -> bool:
    """Whether a :data:`QUERY_TOKEN` value is a credential: 12+ characters, not digits alone, reading as random as a
    key after its label does (:func:`random_tokens.random_after_label`; ``ST-12345`` and ``home-page-v2`` do not)."""
    return len(value) >= 12 and not value.isdigit() and random_tokens.random_after_label(value, True)


def _sasl(m: re.Match[str], redacted: str) -> str:
    """A :data:`SASL_PASSWD` line, its password redacted when it reads as one or is a mail service's app password (16
    lower-case letters)."""
    value = m.group("value")
    if prose_secrets.reads_as_password(value) or re.fullmatch("[a-z]{16}", value):
        return replace_group(m, "value", redacted)
    return m.group()


def _block_values(text: str, redacted: str, block_pattern: re.Pattern[str], line_pattern: re.Pattern[str],
                  secret: Callable[[str], bool]) -> str:
    """``text`` with the values of the lines under each block redacted where ``secret`` says: the base64 values under a
    ``data:`` (a Kubernetes Secret's) when they decode to text (a password, a login, a PEM key; ordinary YAML's words
    under a ``data:`` do not decode so), those under ``secrets:``... when they read strongly or as a piece of a key
    (``db: Kq7vLp2WxR9t``; ``backend: vault``, ``path: kv/data/app2`` stay). Each line is read once."""
    out, done = [], 0
    for block in block_pattern.finditer(text):  # after the lines of the one before it: a block's line is none of them
        pos = block.end()
        while (line := line_pattern.match(text, pos)) is not None and len(line.group("indent")) > len(block.group("indent")):
            if secret(line.group("value")):
                out += [text[done : line.start("value")], redacted]
                done = line.end("value")
            pos = line.end()
    return "".join(out) + text[done:] if out else text


def _plan_change(m: re.Match[str], redacted: str, judge: Judge) -> str:
    """A :data:`PLAN_CHANGE`, each of its two values redacted when an assignment of it to the name would be, or, the name
    holding a credential's word (``secret_string``), when it reads as a password."""
    pieces, done = [], m.start()
    named = re.search(_CREDENTIAL_END, m.group("name")) is not None
    for group in ("old", "value"):
        value = m.group(group)
        if value and (judge(m.group("name"), value, False) or (named and prose_secrets.reads_as_password(value))):
            pieces += [m.string[done : m.start(group)], redacted]
            done = m.end(group)
    return "".join(pieces) + m.string[done : m.end()]


def _connection_secret(value: str, redacted: str) -> bool:
    """Whether a :data:`CONNECTION_SECRET` value is written out: 4+ characters with a digit or a symbol, not a placeholder
    (``{0}``, ``{password}``, ``$PW``, ``%PW%``, ``***``) nor already redacted."""
    return (len(value) >= 4 and re.search(r"[\d!-/:-@\[-`{-~]", value.strip("{}")) is not None and not value.startswith(redacted[:-1])
            and re.fullmatch(r"\{\w{0,40}+\}|\$\{?\w{1,60}+\}?|%\w{1,60}+%|\*++|<[^<>]{1,60}+>", value) is None)


def _entry(m: re.Match[str], redacted: str, judge: Judge) -> str:
    """An :data:`ENTRY_VALUE` match, its value redacted when an assignment of it to the key would be."""
    name, group = ("name", "value") if m.group("name") else ("pname", "pvalue")
    value = m.group(group)
    if not judge(m.group(name), value, False):
        return m.group()
    return replace_group(m, group, redacted)


def _key_bytes(array: str) -> bool:
    """Whether a :data:`BYTE_ARRAY` holds 64 numbers of 0 to 255: a Solana keypair (the secret key and the public one)."""
    numbers = array.strip("[]").split(",")
    return len(numbers) == 64 and all(n.strip().isdigit() and int(n) <= 255 for n in numbers)


def _jwk(obj: str, redacted: str) -> str:
    """A :data:`FLAT_OBJECT`, its :data:`JWK_PRIVATE` members redacted when it names a ``"kty"`` (a JWK)."""
    if re.search(r"[\"']kty[\"']", obj) is None:
        return obj
    return JWK_PRIVATE.sub(lambda m: replace_group(m, "value", redacted), obj)


def _base64_login(token: str) -> bool:
    """Whether ``token`` is base64 of ``user:password`` whose password reads as one whatever surrounds it
    (:func:`prose_secrets.reads_strongly`): a Basic credential pasted without its header."""
    login = LOGIN.fullmatch(_decoded(token, "ascii") or "")
    return login is not None and prose_secrets.reads_strongly(login["pw"])


def _decodes_to_text(value: str) -> bool:
    """Whether ``value`` is base64 of 4+ characters of printable text."""
    plain = _decoded(value, "utf-8") or ""
    return len(plain) >= 4 and all(c.isprintable() or c in "\r\n\t" for c in plain)


def _decoded(value: str, encoding: str) -> str | None:
    """``value`` decoded from strict base64 as text in ``encoding``; ``None`` when it is not that."""
    if len(value) % 4:
        return None
    try:
        return base64.b64decode(value, validate=True).decode(encoding)
    except (binascii.Error, ValueError):
        return None


def _session_secret(value: str) -> bool:
    """Whether a :data:`SESSION_ID` value is a session's secret: not a UUID (a conversation's id), and, past a signed
    cookie's ``s:`` and a prefix joined by ``_``, random as a key is (:func:`random_tokens.random_after_label`) whole or
    in a piece of 12+ between ``.`` ``:`` ``%`` ``_`` ``-`` (``s%3A<id>.<signature>``); a dated id's pieces are short
    (``20250311_120001_a8f3k2``)."""
    if re.search(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}", value):
        return False
    pieces = [p for p in re.split(r"%3A|%2E|[.:%_-]", value, flags=re.IGNORECASE) if len(p) >= 12]
    return random_tokens.looks_random(value) or any(random_tokens.random_after_label(p, False) for p in pieces)


def _nginx_map(m: re.Match[str], redacted: str) -> str:
    """A :data:`NGINX_MAP` block, each source value redacted when the map reads a credential's variable and the value
    holds a digit or both cases (``default``, ``hostnames``, ``"web"`` stay)."""
    if MAP_CREDENTIAL.search(m.group("var")) is None:
        return m.group()

    def entry(e: re.Match[str]) -> str:
        value = e.group("value")
        if not (re.search(r"\d", value) or (value.lower() != value and value.upper() != value)):
            return e.group()
        return replace_group(e, "value", redacted)

    body = MAP_ENTRY.sub(entry, m.group("body"))
    return m.string[m.start() : m.start("body")] + body + m.string[m.end("body") : m.end()]


def _ws_path(m: re.Match[str], redacted: str) -> str:
    """A :data:`WS_URL`, each segment of its path redacted that reads as a key (:func:`random_tokens.random_after_label`:
    ``/ws/v1/Xk9Pq2Lm7Nv4Rt6Yb8Zc``; ``/ws/btcusdt@trade``, ``/socket.io/`` stay)."""
    path = m.group("path")
    segments = path.split("/")
    judged = [redacted if re.fullmatch(r"[A-Za-z0-9_-]{12,200}+", s) and random_tokens.random_after_label(s, False) else s
              for s in segments]
    if judged == segments:
        return m.group()
    return m.string[m.start() : m.start("path")] + "/".join(judged)
