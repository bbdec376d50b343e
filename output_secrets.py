"""Credentials as tools print them, for :mod:`redact`: output has no name beside its value, or one no assignment reads.

A value on the line under the command that printed it: ``printenv NAME`` (in a container too: ``docker exec app printenv
NAME``), ``echo $NAME`` (``${NAME}``, ``%NAME%``,
``$env:NAME``, alone at PowerShell's prompt too) and ``cat`` (``type``, ``more``, ``less``, ``head``, ``Get-Content``) of a file
named for a password or token (Jenkins' ``initialAdminPassword``) after a shell's prompt or none, ``kubectl … {.data.NAME}`` (``| base64 -d`` or not) and ``-o go-template='{{.data.NAME | base64decode}}'``
(``oc`` too), ``op item get … --fields NAME``, ``sops -d --extract '[…]["NAME"]'``, ``wrangler secret put NAME`` (the
value after its prompt, ``? Enter a secret value: …``), ``vercel env add NAME`` (``? What's the value of NAME? …``) and
PowerShell's ``Name : NAME`` above
``Value : …``, ``terraform output [-raw] NAME``, ``pulumi config get NAME`` (``stack output``), ``git config [--get] ….NAME``,
``npm config get [//registry/:]NAME``, ``argocd admin initial-password``, ``vault kv get -field=NAME …``, ``gcloud secrets versions access …
--secret=NAME``, and secret managers' ``doppler secrets get NAME``, ``op read op://…/NAME``, ``pass show …`` (``gopass``), ``bw get password …``,
``security find-generic-password … -w``, ``aws secretsmanager get-secret-value … --output text``, ``secret-tool lookup …``,
``keyring get SERVICE USER`` and ``lpass show --password …`` (a password's or a secret's name), ``heroku config:get NAME``,
``az keyvault secret show --name NAME``, ``aws ssm get-parameter --name …/NAME``, ``infisical secrets get NAME``, ``dotenvx get
NAME``, ``chamber read SERVICE NAME``, ``kubectl view-secret SECRET NAME``, ``kubeadm token create`` (``k3s``,
``kubectl create token``) and ``jq``'s or ``yq``'s ``….NAME`` (after a pipe too); the NAME is judged as an assignment of the value to it would be (``printenv PATH`` then a path stays).
Passwords a server makes and prints (MySQL's temporary one, Elasticsearch's, Jenkins' and Spring Security's generated
ones). Redis ``MONITOR`` lines, which quote each word of a command (``"AUTH" "…"``, ``"AUTH" "user" "…"``, ``"CONFIG"
"SET" "requirepass" "…"``), and redis-cli's reply to ``CONFIG GET requirepass``. And ``Authorization`` written
without its colon, as logs and chat retype a header (``Authorization Bearer …``): a value of 8+ printable ASCII
characters with a digit, not a placeholder in angle brackets; and the signature of an ``Authorization`` signed with a
key (AWS's SigV2 and SigV4, other HMAC schemes). A crypt hash on an htpasswd or shadow line, and an LDAP password's
hash in LDIF or slapd's files (``userPassword: {SSHA}…``). A log's password in
brackets after its word (``(password …)``, ``pwd[…]``) or after its field's ``=`` (``password=[…]``). A private key's DER dumped as hex (``xxd -p``, ``openssl
asn1parse`` or a debugger: ``30 82 04 a4 02 01 00 …``, ``308204a4020100…``). A generator's output under the command
that made it (``pwgen``, ``openssl rand -base64 12``, ``secrets.token_urlsafe(16)`` in a REPL).

Pure; linear in the length of the text (each pattern starts at a command's, a notice's or a header's words and reads
the line after them, a value to its end once); never raises.
"""

from __future__ import annotations

import re

from . import prefilter, prose_secrets
from .code_secrets import Judge
from .secret_patterns import VALUE_END, quoted_run, replace_group

_NAME = r"[A-Za-z_][\w-]{0,100}+"
#: A shell's prompt before a command (``$``, ``#``, ``>``, ``%``, ``C:\…>``, ``PS …>``, ``user@host:~$``), or none.
_PROMPT = r"(?:(?:[\w.@-]{1,64}+:[^\s$#>]{0,200}+)?[$#>%][ \t]*+|[A-Za-z]:\\[^\n>]{0,200}+>[ \t]*+|PS(?:[ \t][^\n>]{0,200}+)?>[ \t]*+)?"
#: A command that prints one variable or one credential's file, then the value alone on the next line.
PRINTED_VALUE = re.compile(
    r"(?m:^)[ \t]*+" + _PROMPT + r"(?:(?:(?:docker|podman)[ \t]++exec|kubectl[ \t]++exec[ \t][^\n]{0,200}?--)[ \t][^\n]{0,200}?)?"
    r"(?:printenv[ \t]++(?P<pname>" + _NAME + r")|echo[ \t]++(?:\"?\$\{?(?P<ename>" + _NAME
    + r")\}?\"?|%(?P<wname>" + _NAME + r")%|\$env:(?P<sname>" + _NAME + r"))|\$env:(?P<psname>" + _NAME + r")"
    r"|(?:terraform|tofu)[ \t]++output[ \t]++(?:-raw[ \t]++)?(?P<tname>" + _NAME + r")|pulumi[ \t]++(?:config[ \t]++get|stack[ \t]++output)[ \t]++(?P<puname>"
    + _NAME + r")[^\n]{0,300}+|git[ \t]++config(?:[ \t]++--[\w-]{1,20}+){0,2}[ \t]++(?:[\w-]{1,60}+\.){1,2}(?P<gcname>" + _NAME + r")"
    r"|(?:npm|pnpm|yarn)[ \t]++config[ \t]++get[ \t]++(?://[^\s:]{1,200}+:)?(?P<npname>" + _NAME + r")|vault[ \t]++(?:kv[ \t]++get|read)[ \t]"
    r"[^\n]{0,200}?-field=(?P<vname>" + _NAME + r")[^\n]{0,300}+|gcloud[ \t][^\n]{0,200}?secrets[ \t]++versions[ \t]++access"
    r"[^\n]{0,200}?--secret[= ](?P<gname>" + _NAME + r")[^\n]{0,300}+|argocd[ \t]++admin[ \t]++(?P<aname>initial-password)[^\n]{0,300}+"
    r"|doppler[ \t]++secrets[ \t]++get[ \t]++(?P<dname>" + _NAME + r")[^\n]{0,300}+|op[ \t]++read[ \t]++[\"']?op://[^\s\"']{0,300}?/(?P<oname>"
    + _NAME + r")[\"']?|(?:go)?(?P<xname>pass)[ \t]++show[ \t]++(?:-[oO][ \t]++)?\S{1,300}+|bw[ \t]++get[ \t]++(?P<bname>password)[ \t]++\S{1,300}+"
    r"|security[ \t]++find-(?:generic|internet)-(?P<yname>password)[ \t][^\n]{0,300}?[ \t]-w(?![^\s])[^\n]{0,300}+"
    r"|aws[ \t]++(?P<mname>secret)smanager[ \t]++get-secret-value[ \t][^\n]{0,300}?--output[ \t=]++text[^\n]{0,300}+"
    r"|(?:cat|type|more|less|head(?:[ \t]++-n?[ \t]*+\d{1,3}+)?|Get-Content|gc)[ \t]++(?:\S{0,300}?[/\\])?"
    r"(?P<fname>initialAdminPassword|initial_root_password|[\w.-]{0,40}?(?:password|token|secret))"
    r"(?:\.txt)?|(?:sudo[ \t]++)?(?:[\w./-]{0,40}?kubectl|oc)[ \t][^\n|]{0,300}?\{?\.data\.(?P<kname>[\w-]{1,100}+)\}?['\"]?(?:[ \t]*+\|[ \t]*+base64[ \t]++(?:-d|--decode|-D)(?:[ \t]*+;[ \t]*+echo)?)?"
    r"|(?:sudo[ \t]++)?(?:[\w./-]{0,40}?kubectl|oc)[ \t][^\n]{0,300}?template[= ]['\"]?\{\{[ \t]*+(?:\.data\.|index[ \t]++\.data[ \t]++\\?\")"
    r"(?P<ganame>[\w.-]{1,100}+)[^\n]{0,300}+|op[ \t]++item[ \t]++get[ \t][^\n]{0,200}?--fields?[ \t=]++(?:label=)?(?P<iname>" + _NAME + r")[^\n]{0,300}+"
    r"|heroku[ \t]++config:get[ \t]++(?P<hname>" + _NAME + r")[^\n]{0,300}+|(?:infisical[ \t]++secrets|dotenvx)[ \t]++get[ \t]++(?P<nname>"
    + _NAME + r")[^\n]{0,300}+|chamber[ \t]++read[ \t]++\S{1,100}+[ \t]++(?P<chname>" + _NAME + r")[^\n]{0,300}+"
    r"|az[ \t]++keyvault[ \t]++secret[ \t]++show[ \t][^\n]{0,200}?(?:--name|-n)[ \t=]++(?P<zname>" + _NAME + r")[^\n]{0,300}+"
    r"|aws[ \t]++ssm[ \t]++get-parameter[ \t][^\n]{0,200}?--name[ \t=]++[\"']?(?:[^\s\"']{0,300}?/)?(?P<pmname>" + _NAME + r")[\"']?(?![^\s])[^\n]{0,300}+"
    r"|lpass[ \t]++show[ \t][^\n]{0,100}?--(?P<lpname>password)[^\n]{0,300}+|(?P<stname>secret)-tool[ \t]++lookup[ \t][^\n]{0,300}+"
    r"|(?:python3?[ \t]++-m[ \t]++)?keyring[ \t]++get[ \t]++\S{1,100}+[ \t]++\S{1,100}+(?P<krname>)"
    r"|(?:kubeadm|k3s|rke2)[ \t]++(?P<bsname>token)[ \t]++create(?:[ \t][^\n]{0,300}+)?|kubectl[ \t]++create[ \t]++(?P<ksname>token)[ \t][^\n]{0,300}+"
    r"|kubectl[ \t]++view-secret[ \t]++\S{1,100}+[ \t]++(?P<kvname>" + _NAME + r")[^\n]{0,300}+"
    r"|(?:[^\n|]{1,300}+\|[ \t]*+)?(?:jq|yq)[ \t][^\n|]{0,200}?\.(?P<jqname>" + _NAME + r")['\"]?(?:[ \t]++[^\s|]{1,300}+)?"
    r"|sops[ \t][^\n]{0,200}?--extract[ \t=]++(?P<xq>['\"])[^\n]{0,300}?\[[\"'](?P<uname>" + _NAME + r")[\"']\](?P=xq)[^\n]{0,300}+"
    r"|(?:(?:npx|bunx|pnpm(?:[ \t]++(?:exec|dlx))?|yarn)[ \t]++)?(?:wrangler[ \t]++secret[ \t]++put[ \t]++(?P<rname>" + _NAME + r")"
    r"|vercel[ \t]++env[ \t]++add[ \t]++(?P<cname>" + _NAME + r"))[^\n]{0,300}+)[ \t]*+\r?\n[ \t]*+"
    r"(?(rname)(?:[?✔✓][ \t]++)?(?:Enter a secret value:?[ \t]*+(?:›[ \t]*+)?)?"
    r"|(?(cname)(?:[?✔✓][ \t]++)?(?:What['’]s the value of [\w-]{1,100}+\?[ \t]*+)?))(?P<value>[^\s$]\S*+)[ \t]*+(?=\r?\n|$)"
)
#: A generator's output on the line under the command that made it: ``pwgen``, ``apg``, ``makepasswd``, ``openssl rand
#: -base64|-hex N``, ``gpg --gen-random``, ``rails secret``, and Python's ``secrets.token_urlsafe|token_hex|token_bytes(…)``
#: or ``Fernet.generate_key()`` in a shell (``python -c …``) or a REPL (``>>>``, IPython's ``In [1]:`` and ``Out[1]:``,
#: the value in quotes as a REPL shows a string, ``b'…'`` too). Group ``value`` is the rest of that line: its words
#: go when each reads as random (:func:`_generated`): ``pwgen`` prints a grid of them, prose stays.
GENERATED_OUTPUT = re.compile(
    r"(?m:^)[ \t]*+(?:>>>[ \t]++|In[ \t]\[\d{1,5}+\]:[ \t]*+|" + _PROMPT + r")[^\n]{0,200}?"
    r"(?:(?<![\w-])(?:pwgen|apg|makepasswd)(?![\w-])|openssl[ \t]++rand[ \t][^\n]{0,100}?-(?:base64|hex)|gpg[ \t][^\n]{0,100}?--gen-random"
    r"|(?:rails|rake)[ \t]++secret(?![\w-])|secrets\.token_(?:urlsafe|hex|bytes)\(|Fernet\.generate_key\(\))[^\n]{0,300}+"
    r"\r?\n[ \t]*+(?:Out[ \t]?\[\d{1,5}+\]:[ \t]*+)?(?P<value>[^\s][^\n]{0,1000}+)"
)
#: PowerShell's ``Format-List`` of a variable (``Get-ChildItem Env:DB_PASSWORD | Format-List``): ``Name  : NAME`` then
#: ``Value : …``.
FORMAT_LIST = re.compile(
    r"(?m:^)Name[ \t]*+:[ \t]*+(?P<lname>" + _NAME + r")[ \t]*+\r?\nValue[ \t]*+:[ \t]*+(?P<value>\S++)[ \t]*+(?=\r?\n|$)"
)
#: redis-cli's answer to ``CONFIG GET requirepass`` (``masterauth``): ``1) "requirepass"`` then ``2) "…"``.
CONFIG_REPLY = re.compile(
    r"(?<=\) )\"(?:requirepass|masterauth)\"[ \t]*+\r?\n[ \t]*+\d{1,3}+\)[ \t]++"
    r"\"(?P<value>" + quoted_run('"') + r")\""
)
#: A password a server makes and prints: MySQL's ``A temporary password is generated for root@localhost: …``,
#: Elasticsearch's ``Password for the elastic user (…):`` with the password on the next line, ``PASSWORD elastic = …``
#: (elasticsearch-setup-passwords; random, so with a digit: ``PASSWORD RESET = done`` is a log's) and its reset tool's
#: ``New value: …``. (Elasticsearch's ``The generated password for the elastic built-in superuser is: …`` is a label's,
#: Jenkins' 32 hex digits a random token's, Spring Security's ``Using generated security password: <uuid>`` a labelled
#: digest's.)
GENERATED_SECRET = re.compile(
    r"(?:temporary password is generated for [^\s:]{1,100}+:[ \t]++|Password for the \[?\w{1,30}+\]? user"
    r"(?: \([^\n]{0,200}?\))?:[ \t]*+\r?\n[ \t]*+|user successfully reset\.[ \t]*+\r?\nNew value:[ \t]*+"
    r"|(?m:^)PASSWORD[ \t]++[\w-]{1,30}+[ \t]++=[ \t]++(?=\S{0,199}\d))(?P<value>\S++)"
)
#: The command of a Redis ``MONITOR`` line (``1714550400.123456 [0 10.0.0.7:53412] "AUTH" …``) that holds a password,
#: its last word; read from the ``]`` before it (a literal a search skips to), the line's head checked after
#: (:data:`MONITOR_HEAD`).
MONITOR_AUTH = re.compile(
    r"\][ \t]++(?:\"(?i:auth)\"(?:[ \t]++\"" + quoted_run('"') + r"\")?"
    r"|\"(?i:config)\"[ \t]++\"(?i:set)\"[ \t]++\"(?i:requirepass|masterauth)\")"
    r"[ \t]++\"(?P<value>" + quoted_run('"') + r")\"[ \t]*+(?=\r?\n|$)"
)
#: A ``MONITOR`` line's time, database and client, up to the ``]`` that :data:`MONITOR_AUTH` starts at.
MONITOR_HEAD = re.compile(r"(?<!\d)\d{9,11}+\.\d{1,6}+[ \t]++\[\d{1,5}+[ \t]++[^\]\n]{1,200}+\Z")
#: ``Authorization`` (``Proxy-Authorization``) and its scheme with no colon between, then the credential. The word
#: comes first, so a search skips to it.
BARE_AUTHORIZATION = re.compile(
    r"(?i:authorization)(?<!\w(?i:authorization))[ \t]++(?i:bearer|token|basic)[ \t]++"
    r"(?P<value>(?=[^\s<]{0,199}\d)[!-;=?-~]{8,}+)"
)

#: A line of htpasswd's or shadow's file, as ``htpasswd -nb`` and ``getent shadow`` print it: at a line's start a user's
#: name, ``:``, then a crypt hash (``$apr1$``, ``$2y$``, ``$1$`` ``$5$`` ``$6$``, yescrypt's ``$y$``, ``{SHA}``), which
#: is the password once cracked; the line ends after it or shadow's fields (``:19000:0:99999:7:::``) follow. A hash in a
#: quoted field (``"password_hash": "$2b$…"``, a fixture's) is code's, not a credential file's line, and stays.
HASH_LINE = re.compile(
    r"(?m:^)[ \t]*+[A-Za-z_][\w.@-]{0,63}+:(?P<value>\$(?:apr1|2[abxy]|[156]|y|gy|7|sha1|md5)\$[./\w$=,+-]{16,300}+"
    r"|\{SHA\}[A-Za-z0-9+/]{27}=)(?=:[\w:]{0,100}+[ \t]*+(?:\r?\n|$)|[ \t]*+(?:\r?\n|$))"
)
#: An LDAP password's hash as LDIF and slapd write it (``userPassword: {SSHA}…``, ``olcRootPW: {CRYPT}$6$…``, slapd.conf's
#: ``rootpw {SSHA}…``): a scheme in braces and 8+ characters after it, which are the password once cracked (an
#: assignment takes a value in braces for a dict).
LDAP_HASH = re.compile(
    r"(?m:^)[ \t]*+(?i:userPassword|olcRootPW|rootpw)(?:[ \t]*+:|[ \t]++)[ \t]*+(?P<value>\{[A-Za-z0-9-]{2,20}+\}\S{8,}+)"
)

#: A log's password in brackets after its word (``(password Kq7#vLp2Wx)``, ``pwd[Kq7#vLp2Wx]``, ``password=(…)``):
#: the value goes when it reads as a password and holds a symbol (``password[i+1]``, ``token[idx2]`` are indexes).
BRACKETED = re.compile(
    r"(?i)(?:\((?:password|passwd|pwd|pass)[ \t:=]++(?P<pvalue>[^\s()]++)\)"
    r"|(?<![\w-])(?:password|passwd|pwd|passphrase)\[(?P<value>[^\[\]\s\"']++)\])"
)
#: A log's field of a credential's name with its value in brackets (``password=[Kq7#vLp2Wx]``, ``token: [Zx9q…]``), as
#: loggers wrap each field: judged as an assignment of it to the name would be, 8+ characters with a letter and a digit (``password=[]``,
#: ``[REDACTED]``, ``[None]`` stay; a list of calls, ``password=[DataRequired()]``, has parentheses).
ASSIGNED_BRACKETS = re.compile(
    r"(?i)(?<![\w-])(?P<name>[\w.-]{0,60}?(?:password|passwd|pwd|passphrase|secret|token|api[_-]?key|access[_-]?key))[ \t]*+[=:][ \t]*+"
    r"\[(?P<value>[^\[\]\s\"',(){}]{4,}+)\]"
)
#: An ``Authorization`` header signed with a key (AWS's ``AWS ACCESSKEY:signature`` (SigV2), ``AWS4-HMAC-SHA256 …,
#: Signature=…`` and other schemes' ``Signature=``): the signature.
SIGNED_AUTHORIZATION = re.compile(
    r"(?i:authorization)[\"']?[ \t]*+[:=][ \t]*+[\"']?(?:AWS[ \t]++[A-Z0-9]{16,128}+:(?P<value>[A-Za-z0-9+/=]{20,100}+)"
    r"|[^\n]{0,300}?[ ,](?i:signature)=(?P<svalue>[^\s,\"']{8,}+))"
)

#: A private key's DER in hex, bytes spaced, joined by ``:`` or not: a SEQUENCE (its length in one, two or three
#: bytes), then version 0 or 1 (``02 01 00``: PKCS#1 and PKCS#8; ``02 01 01``: an EC key) and what follows a private
#: key's version (an INTEGER, an algorithm's SEQUENCE, an OCTET STRING), and at least 8 more bytes. A certificate or a
#: public key starts with a SEQUENCE in a SEQUENCE. The whole run of hex goes (to the end of a dump wrapped on lines).
DER_PRIVATE_KEY = re.compile(
    r"(?i)(?<![0-9a-f])30(?P<sep>[ :]?)(?:8[12](?P=sep)[0-9a-f][0-9a-f](?P=sep)|8[12](?P=sep))?[0-9a-f][0-9a-f]"
    r"(?P=sep)02(?P=sep)01(?P=sep)0[01](?P=sep)(?:02|30|04)(?:(?:(?P=sep)|\r?\n)[0-9a-f][0-9a-f]){8,}+")


def redact(text: str, redacted: str, judge: Judge) -> str:
    """``text`` with those credentials replaced by ``redacted``, the rest as it was."""
    text = prefilter.sub(PRINTED_VALUE, lambda m: _printed(m, redacted, judge), text)
    text = prefilter.sub(DER_PRIVATE_KEY, redacted, text)
    text = prefilter.sub(GENERATED_OUTPUT, lambda m: _generated(m, redacted), text)
    text = prefilter.sub(FORMAT_LIST, lambda m: _printed(m, redacted, judge), text)
    text = prefilter.sub(CONFIG_REPLY, lambda m: replace_group(m, "value", redacted), text)
    text = prefilter.sub(GENERATED_SECRET, lambda m: replace_group(m, "value", redacted), text)
    text = prefilter.sub(MONITOR_AUTH, lambda m: _monitored(m, redacted), text)
    text = prefilter.sub(HASH_LINE, lambda m: replace_group(m, "value", redacted), text)
    text = prefilter.sub(LDAP_HASH, lambda m: replace_group(m, "value", redacted), text)
    text = prefilter.sub(BRACKETED, lambda m: _bracketed(m, redacted), text)
    text = prefilter.sub(ASSIGNED_BRACKETS, lambda m: replace_group(m, "value", redacted) if _bracketed_field(m.group("value"))
                                 and judge(m.group("name"), m.group("value"), True) else m.group(), text)
    text = prefilter.sub(SIGNED_AUTHORIZATION, lambda m: replace_group(m, "value" if m.group("value") else "svalue", redacted), text)
    return prefilter.sub(BARE_AUTHORIZATION, lambda m: _bare_authorization(m, redacted), text)


def _printed(m: re.Match[str], redacted: str, judge: Judge) -> str:
    """A :data:`PRINTED_VALUE` match, its value redacted when an assignment of it to the printed name would be."""
    groups = m.re.groupindex  # each command's printed name is a group whose name ends in name
    if "krname" in groups and m.group("krname") is not None:
        name = "password"  # keyring get SERVICE USER prints that user's password
    else:
        name = next(m.group(g) for g in groups if g.endswith("name") and m.group(g))
    value = m.group("value")
    if not judge(name, value, True):
        return m.group()
    return replace_group(m, "value", redacted)


def _generated(m: re.Match[str], redacted: str) -> str:
    """A :data:`GENERATED_OUTPUT` match, the line under the command redacted when each of its words, out of a REPL's
    quotes, reads as random: 8+ characters with a digit, or with both cases, or of base64's signs (``pwgen`` without
    digits prints ``ahVoeNgquohie``; a line of prose or an error does not read so)."""
    value = m.group("value").rstrip()
    words = re.sub(r"^b?(['\"])(.*)\1$", r"\2", value).split()
    if not words or not all(len(w) >= 8 and re.fullmatch(r"[A-Za-z0-9+/=_-]++", w) and (re.search(r"\d", w) or (
            w != w.lower() and w != w.upper())) for w in words):
        return m.group()
    return replace_group(m, "value", redacted, len(value))


def _bracketed(m: re.Match[str], redacted: str) -> str:
    """A :data:`BRACKETED` match, its value redacted when it reads as a password with a symbol in it."""
    group = "value" if m.group("value") is not None else "pvalue"
    value = m.group(group)
    if prose_secrets.reads_as_password(value) and re.search(r"[!@#$%^&*?~]", value):
        return replace_group(m, group, redacted)
    return m.group()


def _bracketed_field(value: str) -> bool:
    """Whether an :data:`ASSIGNED_BRACKETS` value is written out: 8+ characters with a letter and a digit (``[1234]`` is
    an index or an id, ``[AKIA-style]`` a word)."""
    return len(value) >= 8 and re.search(r"\d", value) is not None and re.search(r"[A-Za-z]", value) is not None


def _bare_authorization(m: re.Match[str], redacted: str) -> str:
    """A :data:`BARE_AUTHORIZATION` match, its value redacted when it reads as a credential, trailing punctuation kept."""
    value = m.group("value").rstrip(VALUE_END)
    if not prose_secrets.reads_as_password(value):
        return m.group()
    return replace_group(m, "value", redacted, len(value))


def _monitored(m: re.Match[str], redacted: str) -> str:
    """A :data:`MONITOR_AUTH` match, its password redacted when a ``MONITOR`` line's head comes right before it."""
    if MONITOR_HEAD.search(m.string, max(0, m.start() - 240), m.start()) is None:
        return m.group()
    return replace_group(m, "value", redacted)
