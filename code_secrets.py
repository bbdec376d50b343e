"""Credentials written as defaults, fallbacks and logins in code and configuration, for :mod:`redact`.

The shapes :data:`secret_patterns.NAMED_VALUE` and the command-line patterns do not read: a Helm default given before
its value (``default "…" .Values.db.password``), a jq or Perl fallback (``.db.password // "…"``, ``$ENV{DB_PASSWORD}
// '…'``), Terraform's ``coalesce(var.db_password, "…")``, Make's ``DB_PASSWORD ?= …``, Go's ``dbPassword := "…"``, a
typed attribute's default (``db_password: str = Field("…", env="DB_PASSWORD")``), Clojure's ``(or (System/getenv
"DB_PASSWORD") "…")``, PowerShell's ``if (-not $env:DB_PASSWORD) { $p = "…" }``, Ruby's and Elixir's symbols
(``config.fetch(:db_password, "…")``), a redis client's ``auth("…")``, redis ACL rules in any order and number,
``.pgpass`` lines written by a heredoc, a login given as a YAML list under ``auth:``, and a literal a password
hashing function is given (``'…' | password_hash('sha512')``).

Each is found by a pattern here and judged by what the name and the value read as: a name is a credential's when an
assignment to it would be (the ``judge`` :mod:`redact` passes, its ``_assigned_secret``); a default or fallback must
also read as a password by itself (:data:`secret_patterns.DEFAULT_SECRET`: not ``changeme``, ``us-east-1``, ``${X}``,
``<password>``, a regular expression or CJK text); a login's password as
:func:`prose_secrets.reads_as_password` says. Pure; linear in the length of the text (each pattern starts at the start
of a run of its characters and repeats no group holding a quantifier more than twice); never raises.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from . import prefilter, prose_secrets, random_tokens
from . import secret_patterns as patterns
from .secret_patterns import quoted_run, replace_group

#: ``judge(name, value, bare)``: whether ``value`` (``bare``: unquoted) assigned to ``name`` is a literal credential.
Judge = Callable[[str, str, bool], bool]


def _quoted(n: str = "") -> str:
    """A quoted literal (``"…"``, ``'…'`` or a backtick string) on one line, to its closing quote however long and past
    an escaped one (``"Kq7\\"vLp"``): group ``q<n>`` its quote, ``value<n>`` what it holds (a pattern with two of them
    numbers the second)."""
    run = quoted_run(f"(?P=q{n})")
    return rf"(?P<q{n}>[\"'`])(?P<value{n}>{run})(?P=q{n})"


_VALUE = _quoted()
#: A name, a dotted path (``.Values.db.password``, ``var.db_password``) or a PHP/Perl variable: its last part names it.
_REF = r"\$?\.?[A-Za-z_][\w.]{0,200}+"

#: A default given before or after what it is the default of, in templates and Terraform: Helm's ``default "…"
#: .Values.db.password``, ``coalesce .Values.db.password "…"``, Terraform's ``coalesce(var.db_password, "…")``,
#: ``try(var.db_password, "…")`` and ``lookup(var.secrets, "db_password", "…")`` (group ``key``), a call's arguments on
#: lines of their own as formatters write them. Group ``ref`` names it.
TEMPLATE_DEFAULT = re.compile(
    r"(?<![\w.-])(?:default[ \t]++" + _VALUE + r"\s++\(?[ \t]*+(?P<ref>" + _REF + r")"
    r"|(?:coalesce|try|lookup)(?:[ \t]++|[ \t]*+\(\s*+)(?P<ref2>" + _REF + r")[ \t]*+,?\s*+"
    r"(?:(?P<kq>[\"'])(?P<key>[A-Za-z_][\w.:-]{0,100}+)(?P=kq)[ \t]*+,\s*+)?"
    + _quoted("2") + ")"
)
#: A fallback after a path or a variable: jq's ``.db.password // "…"`` (``.["db_password"]`` too; the path starts a
#: run, so ``a.password // "…"``, JavaScript and a comment, is not one), Perl's ``$ENV{DB_PASSWORD} // '…'`` (``||``,
#: ``//=``, ``||=``), and an assignment only when unset anywhere (``$Env:DB_PASSWORD ??= "…"``, ``this.password ||=
#: "…"``). Groups ``path``, ``bkey``, ``pkey``, ``aname`` name it.
FALLBACK = re.compile(
    r"(?:(?<![\w\])$.])(?:(?P<path>\.[A-Za-z_][\w.]{0,200}+)|\.\[[ \t]*+\"(?P<bkey>[\w.-]{1,100}+)\"[ \t]*+\])[ \t]*+//"
    r"|(?<![\w$])\$ENV\{[ \t]*+(?P<pq>[\"']?)(?P<pkey>[A-Za-z_]\w{0,100}+)(?P=pq)[ \t]*+\}[ \t]*+(?://|\|\|)=?"
    r"|(?<![\w$.:])[$@]?(?:[\w$]{1,40}+[.:]){0,2}+(?P<aname>[A-Za-z_]\w{0,60}+)[ \t]*+(?:\?\?|\|\||//)=)[ \t]*+" + _VALUE
)
#: Make's conditional, appending and immediate assignments at a line's start (``DB_PASSWORD ?= …``, ``+=``, ``:=``,
#: ``::=``, ``:::=``, after ``export`` or ``override`` or a target's ``run:``; in backticks or after CJK prose too); a bare value to the end of its line or a comment), and Go's ``dbPassword := "…"``
#: anywhere (quoted only, ``[]byte("…")`` too). A bare value after ``:=`` is Make's only when the name has no lower-case
#: letter, as Make's variables are written: Go's ``password := input`` and Delphi's ``FPassword := AValue;`` are code
#: (:func:`_assign_op`).
#: Groups ``name``, ``op``, ``value`` or ``bare``.
ASSIGN_OP = re.compile(
    r"(?:(?P<line>(?m:^)[ \t]*+(?:[\w.%/-]{1,100}+:[ \t]++)?|(?<=`)|(?<=[" + patterns._CJK + r"][ \t]))(?:(?:export|override)[ \t]++)?"
    r"|(?<![\w.$-]))(?P<name>[A-Za-z_][\w.-]{0,100}+)[ \t]*+"
    r"(?P<op>\?|:{1,3}+|\+)=[ \t]*+(?:(?:\[\]byte\([ \t]*+)?+" + _VALUE + r"|(?(line)(?P<bare>[^\s\"'`$" + patterns._CJK + r"][^\s\"'`" + patterns._CJK + r"]*+)"
    r"(?=[ \t]*+(?:#|`|\r?\n|[" + patterns._CJK + r"]|$))|(?!)))"
)
#: A type in an annotation: a name (``str``, ``Optional[str]``, ``Map<String,``), up to two more after ``,`` or ``|``
#: (``str | None``, ``dict[str, str]``), a Rust reference's (``&str``, ``&'static str``); not words and spaces
#: (``Password: <input type="password">`` is HTML).
_TYPE = r"(?:&(?:'\w{1,20}+[ \t]++)?(?:mut[ \t]++)?)?[\w.\[\]<>?]{1,60}+(?:[ \t]*+[,|][ \t]*+[\w.\[\]<>?]{1,60}+){0,2}[ \t]*+"
#: A typed attribute's or parameter's default (``db_password: str = "…"``, TypeScript's ``password: string = "…"``,
#: Kotlin's ``val dbPassword: String = "…"``), also through pydantic's or a dataclass's field (``Field("…",
#: env="DB_PASSWORD")``, ``Field(default="…", alias="db_password")``, ``field(default="…")``,
#: ``default_factory=lambda: "…"``), whose ``env``/``alias`` (group ``rest``) names it too; the literal may be wrapped
#: (``api_key: SecretStr = SecretStr("…")``, :data:`secret_patterns.LITERAL_WRAPPER`). Rust's ``const API_TOKEN: &str =
#: "…"``. Groups ``attr``, ``field``.
TYPED_DEFAULT = re.compile(
    r"(?=[A-Za-z_])(?:(?<![\w.$])(?P<attr>[A-Za-z_]\w{0,100}+)[ \t]*+\??:[ \t]*+" + _TYPE + r"=(?![=>])[ \t]*+)?"
    r"(?:(?P<field>(?<![\w.])(?:pydantic\.|dataclasses\.)?(?:Field|field|attr\.ib|attrs\.field)\(\s*+"
    r"(?:default[ \t]*+=[ \t]*+|default_factory[ \t]*+=[ \t]*+lambda[ \t]*+:[ \t]*+)?)|(?(attr)|(?!)))"
    r"(?:" + patterns.LITERAL_WRAPPER + r"\s*+)?+[bfru]{0,2}+" + _VALUE + r"(?(field)(?P<rest>[^()\n]{0,200}+))"
)
#: A call that sets what it is given, given a credential's name and then a literal (``os.Setenv("DB_PASSWORD", "…")``,
#: ``define('DB_PASSWORD', '…')``, ``props.setProperty("mail.smtp.password", "…")``, ``headers.set('X-Api-Key', '…')``,
#: ``[Environment]::SetEnvironmentVariable("DB_PASSWORD", "…", "User")``, ``map.put``, Go's ``Header.Add``, vitest's
#: ``vi.stubEnv("API_KEY", "…")``, R's ``assign("password", "…")``; not ``log.info("secret", …)``,
#: ``mask("api_key", …)``, ``Compare("Password", …)``), or a setter the literal
#: alone (``dataSource.setPassword("…")``, ``withApiKey("…")``): redacted when the literal reads as a password by itself
#: (:data:`secret_patterns.DEFAULT_SECRET`, or 40+ characters with few spaces: WordPress' salts), as a call's
#: literal is as often a label or a message (``t("password", "Password:")``, ``form.set("password", "Enter your
#: password")``). Groups ``cname``/``sname``.
KEYED_CALL = re.compile(
    r"(?<![\w$])(?:[Ss]et(?:env|_var|Property|RequestProperty|Header|EnvironmentVariable|Item|[Dd]efault|Value|Option)?"
    r"|putenv|put|define|[aA]dd|append|header|store|stubEnv|assign)\(\s*+(?P<cq>[\"'])(?P<cname>[A-Za-z_][\w.:/-]{0,100}+)(?P=cq)[ \t]*+,\s*+"
    + _quoted("6") + r"(?![ \t]*+[.+\[])"
    r"|(?<![\w$])(?:set|with)(?P<sname>(?:Api|Access|Secret|Private|Auth|Client|Db|Database|Admin|Root)?(?:Password|Passwd"
    r"|Passphrase)|(?:Auth|Access|Api|Bearer)Token|ClientSecret|(?:Api|Access|Secret|Private|Auth|Signing|Encryption)Key)"
    r"\(\s*+" + _quoted("7") + r"\s*+\)"
)
#: A call's argument before a password: a string (a distinguished name holds commas) or code without commas.
_ARG = r"(?:[\"'][^\"'\n]{0,200}+[\"']|[^,()\"'\n]{1,200}+)"
#: A password given by its place in a call: a database connection's (``new PDO(dsn, 'root', '…')``,
#: ``mysqli_connect('host', 'root', '…')``, ``mysql.connector.connect(…)``, ``pymysql.connect(…)``,
#: ``DriverManager.getConnection(url, "root", "…")``), a login's (smtplib's, ftplib's ``server.login('bob@qq.com',
#: '…')``, ``ftplib.FTP(host, user, '…')``, LDAP's ``simple_bind_s(dn, '…')``, Firebase's ``signInWithEmailAndPassword([auth,]
#: email, '…')``, Django's ``create_user``/``create_superuser(name, email, '…')``, the credentials of pika
#: (``PlainCredentials(user, '…')``), Apache's HttpClient, Spring's token and Java's ``PasswordAuthentication(user,
#: "…".toCharArray())``, PHP's ``curl_setopt($ch, CURLOPT_USERPWD, "user:…")`` (group ``userpwd``: the part after ``:``))
#: and a JWT library's secret (``jwt.sign(payload, '…')``, ``jwt.encode(…)``, ``verify``, ``decode``). Judged as
#: an assignment to a password or a secret; and a form's password field filled in a browser test (group ``form``:
#: Selenium's ``find_element(By.ID, "password").send_keys("…")``, Playwright's ``page.fill("#password", "…")`` and
#: ``getByLabel('Password').fill('…')``, Cypress' ``cy.get('#pwd').type('…')``, jQuery's ``.val('…')``, ``.value = '…'``), when the literal reads as a password.
POSITIONAL = re.compile(
    r"(?:(?<![\w$])(?:new[ \t]++PDO\(|DriverManager\.getConnection\()\s*+[^,()\n]{1,300}+,\s*+[\"'][^\"'\n]{1,100}+[\"'][ \t]*+,"
    r"|(?<![\w$.])(?:mysqli_connect|new[ \t]++mysqli|(?:mysql\.connector|pymysql|MySQLdb)\.connect)\(\s*+(?:[\"'][^\"'\n]{1,300}+[\"']"
    r"[ \t]*+,\s*+){2}|(?<=[\w)])\.login\(\s*+(?P<login>[^,()\n]{1,300}+),"
    r"|(?P<jwt>(?<![\w$.])jwt\.(?:sign|encode|verify|decode)\()\s*+(?:\{[^{}\n]{0,200}+\}|[^,()\n]{1,200}+),"
    r"|(?:(?<![\w$])(?:FTP(?:_TLS)?\(\s*+" + _ARG + r",\s*+|(?:signIn|createUser)WithEmailAndPassword\(\s*+(?:" + _ARG + r",\s*+)?"
    r"|PlainCredentials\(|UsernamePassword(?:Credentials|AuthenticationToken)\(|PasswordAuthentication\()"
    r"|(?<=[\w)])\.(?:create_(?:super)?user\(\s*+" + _ARG + r",\s*+|(?:simple_bind_s|simple_bind|bind_s)\())\s*+" + _ARG + r","
    r"|(?P<userpwd>CURLOPT_(?:PROXY)?USERPWD)[ \t]*+,"
    r"|(?P<form>[\"'][#.]?[\w\[\]=@-]{0,40}?(?i:passw(?:or)?d|pwd|pass)[\w\]-]{0,40}+[\"'][ \t]*+\)\s*+\.(?:(?:send_?[kK]eys|fill|type"
    r"|setValue|input|val|pressSequentially|press_sequentially)\(|value[ \t]*+=[ \t]*+)|(?<=\.)(?:fill|type)\(\s*+[\"'][#.]?[\w\[\]=@-]{0,40}?"
    r"(?i:passw(?:or)?d|pwd|pass)[\w\]-]{0,40}+[\"'][ \t]*+,))\s*+[bf]?" + _quoted("10")
)
#: Terraform's variable declared with a default (``variable "db_password" {`` then ``default = "…"`` within its block),
#: and a setting written as a name, a space and a quoted literal alone on its line, as Gradle's and Ruby's DSLs write
#: them (``storePassword 'PW'``, ``keyPassword "PW"``). Groups ``hname`` (a default), ``dname``.
DSL_SETTING = re.compile(
    r"(?<![\w-])variable[ \t]++\"(?P<hname>[A-Za-z_][\w-]{0,100}+)\"[ \t]*+\{[^{}]{0,300}?(?<![\w-])default[ \t]*+=[ \t]*+"
    + _quoted("11") + r"|(?m:^)[ \t]*+(?P<dname>[A-Za-z_]\w{0,60}+)[ \t]++" + _quoted("12") + r"[ \t]*+(?=\r?\n|$)"
)
#: A variable given as a name and a value in JSON (an ECS task's or ``kubectl -o json``'s environment: ``{"name":
#: "DB_PASSWORD", "value": "…"}``, the value first too; SSM's ``"Name": "/prod/db/password", "Type": "SecureString",
#: "Value": "…"``); a setting's value under its name is :data:`config_secrets.OBJECT_VALUE`'s. Groups ``ename``/``vname``.
NAME_VALUE_JSON = re.compile(
    r"(?<![\w-])\"(?i:name)\"[ \t]*+:[ \t]*+\"(?P<ename>[A-Za-z_/][\w./-]{0,100}+)\"[ \t]*+,\s*+"
    r"(?:\"(?i:type)\"[ \t]*+:[ \t]*+\"\w{1,40}+\"[ \t]*+,\s*+)?\"(?i:value)\"[ \t]*+:[ \t]*+\"(?P<value8>" + quoted_run('"') + r")\""
    r"|(?<![\w-])\"(?i:value)\"[ \t]*+:[ \t]*+\"(?P<value13>" + quoted_run('"') + r")\"[ \t]*+,\s*+\"(?i:name)\"[ \t]*+:[ \t]*+"
    r"\"(?P<vname>[A-Za-z_/][\w./-]{0,100}+)\""
)
#: A mail client's login given by place: Go's ``smtp.PlainAuth("", user, "…", host)``, gomail's ``NewDialer(host,
#: port, user, "…")``, yagmail's ``SMTP(user, "…")``, Ruby's ``Net::SMTP.start(host, port, helo, user, "…")``. The
#: password goes when it reads as one or is a provider's app password (16 lower-case letters: Gmail's, QQ Mail's
#: 授权码): :func:`_mail_login`. Group ``value14``.
MAIL_LOGIN = re.compile(
    r"(?:(?<![\w$])(?:smtp\.PlainAuth\(\s*+\"[^\"\n]{0,100}+\"|NewDialer\(\s*+\"[^\"\n]{1,200}+\"[ \t]*+,[ \t]*+\d{1,5}+"
    r"|Net::SMTP\.start\(\s*+[\"'][^\"'\n]{1,200}+[\"'][ \t]*+,[ \t]*+\d{1,5}+[ \t]*+,[ \t]*+[\"'][^\"'\n]{0,200}+[\"'])"
    r"[ \t]*+,\s*+[\"'][^\"'\n]{1,200}+[\"'][ \t]*+,\s*+(?=[\"'])|(?<![\w$])yagmail\.SMTP\(\s*+(?:user[ \t]*+=[ \t]*+)?"
    r"[\"'][^\"'\n]{1,200}+[\"'][ \t]*+,\s*+(?:password[ \t]*+=[ \t]*+)?(?=[\"']))"
    + _quoted("14")
)
#: A command-line option's default under a credential's name: argparse's ``add_argument("--password",
#: default="…")``, click's ``@click.option("--api-key", default="…")``, optparse's ``add_option``, typer's
#: ``Option``; configparser's ``get("db", "password", fallback="…")``; and Go's ``flag.String("password", "…", …)``
#: (``StringVar(&p, …)``, pflag's and cobra's ``Flags().StringP("password", "p", "…", …)``, group ``gname``). Judged as a
#: default is (:func:`_default`). Groups ``oname``, ``value15``.
OPTION_DEFAULT = re.compile(
    r"(?:(?<![\w$])(?:(?:add_argument|add_option|option|Option)\(\s*+(?:[\"']-\w[\"'][ \t]*+,\s*+)?[\"']-{1,2}+"
    r"|get(?:int)?\(\s*+[\"'][\w.-]{1,100}+[\"'][ \t]*+,\s*+[\"'])(?P<oname>[A-Za-z][\w-]{0,60}+)[\"']"
    r"[^()\n]{0,200}?(?<![\w])(?:default|fallback)[ \t]*+=[ \t]*+"
    r"|(?<![\w$])(?:flag|pflag|Flags\(\))\.String(?:Var)?(?P<short>P)?\(\s*+(?:&[\w.]{1,100}+[ \t]*+,\s*+)?\"(?P<gname>[A-Za-z][\w-]{0,60}+)\""
    r"[ \t]*+,\s*+(?(short)\"\w\"[ \t]*+,\s*+))" + _quoted("15")
)
#: A C or C++ macro defined as a literal (``#define WIFI_PASSWORD "…"``, ``#define API_KEY "…"``): judged as an
#: assignment to its name. Groups ``mname``, ``value16``.
C_DEFINE = re.compile(r"(?m:^)[ \t]*+#[ \t]*+define[ \t]++(?P<mname>[A-Za-z_]\w{0,100}+)[ \t]++" + _quoted("16"))
#: A value named by the markup around it: a property list's ``<key>password</key>`` then ``<string>…</string>``, an
#: element with attributes (``<wsse:Password Type="PasswordText">…</wsse:Password>``, named by its local name) or named
#: by its ``name`` attribute (``<property name="hibernate.connection.password">…</property>``), a ``CDATA`` section in
#: an element (``<password><![CDATA[…]]></password>``). Judged as an assignment to that name. Groups ``kname``,
#: ``tag``, ``attrs``, ``value17``/``value18``.
MARKUP_VALUE = re.compile(
    r"<key>(?P<kname>[A-Za-z_][\w.:-]{0,100}+)</key>\s*+<string>(?P<value17>[^<\n]++)</string>"
    r"|<(?P<tag>[A-Za-z_][\w.:-]{0,60}+)(?P<attrs>[ \t][^<>\n]{0,300}+)?>(?(attrs)|<!\[CDATA\[)"
    r"(?P<value18>[^<\]\n]++)(?(attrs)|\]\]>)</(?P=tag)>"
)
#: The names a field's ``env``/``alias`` gives it.
FIELD_NAME = re.compile(r"(?<![\w.])(?:env|alias|validation_alias|serialization_alias)[ \t]*+=[ \t]*+[\"']([\w.-]{1,100}+)[\"']")
#: Lisp's and the shell's of Clojure and PowerShell: ``(or (System/getenv "DB_PASSWORD") "…")``, ``(or (env
#: :db-password) "…")``, ``(env :db-password "…")``, ``(get env :db-password "…")``, ``(:db-password env "…")``,
#: ``(get-in config [:db :password] "…")``; ``if (-not $env:DB_PASSWORD) { $p = "…" }`` (``!``) and ``if
#: ($env:DB_PASSWORD) { … } else { "…" }``. Groups ``c1``-``c5``, ``path``, ``ps`` name it.
LISP_AND_SHELL = re.compile(
    r"\((?:or[ \t]++\((?:System/getenv|env)[ \t]++(?:\"(?P<c1>[A-Za-z_][\w.-]{0,100}+)\"|:(?P<c2>[A-Za-z_][\w.-]{0,100}+))"
    r"[ \t]*+\)|env[ \t]++:(?P<c3>[A-Za-z_][\w.-]{0,100}+)|get[ \t]++[\w.-]{1,60}+[ \t]++:(?P<c4>[A-Za-z_][\w.-]{0,100}+)"
    r"|:(?P<c5>[A-Za-z_][\w.-]{0,100}+)[ \t]++[\w.-]{1,60}+|get-in[ \t]++[\w.-]{1,60}+[ \t]++(?P<path>\[[^\]\n]{1,100}+\]))"
    r"\s*+\"(?P<value>" + quoted_run('"') + r")\""
    r"|(?i:if)[ \t]*+\([ \t]*+(?P<neg>-(?i:not)[ \t]++|![ \t]*+)?\$(?i:env):(?P<ps>[A-Za-z_]\w{0,100}+)[ \t]*+\)\s*+\{\s*+"
    r"(?(neg)(?:\$[\w:]{1,100}+[ \t]*+=[ \t]*+)?|[^{}\n]{0,200}+\}\s*+(?i:else)\s*+\{\s*+)"
    + _quoted("3")
)
#: A symbol as a setting's key, in Ruby and Elixir: ``config.fetch(:db_password, "…")``, ``ENV.fetch(:api_key) {
#: "…" }``, ``settings[:password] || "…"`` (``||=``, ``or``), ``credentials.dig(:db, :password) || "…"``,
#: ``Application.get_env(:app, :db_password, "…")``, ``Keyword.get(opts, :password, "…")``, without parentheses too
#: (``config.fetch :db_password, "…"``), and a symbol's subscript assigned a literal (``config[:password] = "…"``). Group
#: ``name``.
SYMBOL_KEY = re.compile(
    r"(?:(?<=[\w\])])\[|(?<![\w:])(?i:fetch|dig|get|get_env|fetch_env|config|setting|settings|option|options)(?:\(|[ \t]++(?=:)))"
    r"[ \t]*+(?:(?::\w{1,60}+|\w{1,60}+)[ \t]*+,[ \t]*+){0,2}:(?P<name>[A-Za-z_]\w{0,100}+)[ \t]*+"
    r"(?:,[ \t]*+|\)[ \t]*+(?:\{|do)[ \t]*+(?:\|\w{0,10}+\|[ \t]*+)?|[\])][ \t]*+(?:\|\||or|\?\?)=?[ \t]*+|\][ \t]*+=(?![=~>])[ \t]*+)" + _VALUE
)
#: A redis client's password: ``jedis.auth("…")``, ``client.auth("…", callback)``, Go's and C#'s ``.Auth("…")`` (the only string argument; two are a
#: basic-auth call, :data:`secret_patterns.CLI_SECRET`'s), Rust's ``redis::cmd("AUTH").arg("…")`` (the last ``.arg``;
#: a user's before it).
CLIENT_AUTH = re.compile(
    r"(?:(?<=[\w)])\.[aA]uth\([ \t]*+" + _VALUE + r"[ \t]*+(?:\)|,(?![ \t]*+[\"'`]))"
    r"|(?<![\w.])(?:redis::)?cmd\([ \t]*+\"(?i:AUTH)\"[ \t]*+\)(?:\.arg\([ \t]*+&?\"[^\"\n]{1,64}+\"[ \t]*+\))?"
    r"\.arg\([ \t]*+&?\"(?P<value2>" + quoted_run('"') + r")\"[ \t]*+\)(?!\.arg\())"
)
#: A line of redis ACL rules: ``ACL SETUSER bob …`` anywhere, an ACL file's ``user bob …`` at a line's start. Its
#: ``>password`` and ``<password>`` rules (adding or removing one) are judged by :func:`_acl_rules`. Group ``acl``.
ACL_LINE = re.compile(
    r"(?:(?P<acl>(?<![\w-])(?i:ACL)[ \t]++(?i:SETUSER))|(?m:^)[ \t]*+user)[ \t]++[^\s>]{1,64}+(?P<rules>[ \t][^\n]{0,2000}+)")
#: A rule of an ACL line: a flag word, or a rule starting with its sign (``~*``, ``+@all``, ``&*``, ``%R~*``, ``>…``).
ACL_RULE = re.compile(r"(?i)on|off|nopass|resetpass|reset|resetkeys|resetchannels|allkeys|allcommands|allchannels|nocommands"
                      r"|sanitize-payload|skip-sanitize-payload|clearselectors|[~%&+\-@#<>(]\S*+")
#: A heredoc written into a ``.pgpass`` (``cat > ~/.pgpass <<EOF``, ``cat <<'EOF' >> ~/.pgpass``, ``tee ~/.pgpass
#: <<EOF``, ``pgpass.conf``, ``$PGPASSFILE``): its lines up to the tag are ``host:port:db:user:password``. Group ``tag``.
PGPASS_HEREDOC = re.compile(
    r"(?<![\w-])(?:cat|tee)(?=[^\n]{0,200}?(?:\.pgpass|pgpass\.conf|PGPASSFILE)(?![\w.]))[^\n<]{0,200}+<<-?[ \t]*+"
    r"([\"']?)(?P<tag>\w{1,20}+)\1[^\n]{0,200}+\n")
#: A login given as a list of two under an ``auth`` key (``basic_auth``, ``http-auth``, ``"auth"``, comments after
#: either line): in YAML's block style
#: (``auth:`` then ``- bob`` and ``- …``, no third item) or flow style unquoted (``auth: [bob, …]``; quoted ones are
#: :data:`secret_patterns.CLI_SECRET`'s). Groups ``user4``/``user5``, ``q4``/``value4`` or ``value5``.
AUTH_LIST = re.compile(
    r"(?m:^)[ \t]*+(?:-[ \t]++)?[\"']?[\w-]{0,40}+(?<=[aA][uU][tT][hH])[\"']?[ \t]*+[:：][ \t]*+"
    r"(?:(?:#[^\n]{0,200}+)?\r?\n[ \t]*+-[ \t]++(?P<user4>[^\s#][^\n]{0,100}+)\r?\n[ \t]*+-[ \t]++(?P<q4>[\"']?)(?P<value4>[^\s\"'#][^\s\"']*+)(?P=q4)"
    r"[ \t]*+(?:#[^\n]{0,200}+)?(?=\r?\n|$)(?!\r?\n[ \t]*+-[ \t])"
    r"|\[[ \t]*+(?P<user5>[^\s,\[\]\"']{1,100}+)[ \t]*+,[ \t]*+(?P<value5>[^\s,\[\]\"']++)[ \t]*+\])"
)
#: Ways to log in and providers of identities: a list naming one (``auth: [session, OAuth2]``, ``- Kerberos`` then ``-
#: NTLMv2``) is of methods, not a login, when its second item is one: up to three of their names and versions run
#: together (``NTLMv2``, ``HmacSHA256``, ``GoogleOAuth2``, ``Okta2FA``); ``Okta2024!`` is a password.
_METHODS = ("oauth|oidc|openid|saml|ldap|kerberos|ntlm|hmac|sha|jwt|bearer|basic|digest|session|cookie|apikey|api-key"
            "|api_key|token|sso|mfa|2fa|totp|otp|google|github|gitlab|okta|azure|microsoft|facebook|apple|auth0|keycloak"
            "|webauthn|none|anonymous")
METHOD = re.compile(rf"(?i)(?:{_METHODS})(?:[-_.]?(?:{_METHODS}|v?\d{{1,3}}+(?:\.\d{{1,3}}+)?)){{0,2}}+|v\d{{1,3}}+(?:[-_.]?(?:alpha|beta|rc)\d{{0,2}})?")
#: A user's name or an e-mail address: ``cy.auth("admin@example.com")`` logs a test user in, it gives no password. A
#: local part with a digit is taken for a password (``auth("pa55w0rd@redis.io")``: Jedis' one argument is one).
EMAIL = re.compile(r"[A-Za-z_.+-]{1,64}+@[A-Za-z0-9-][A-Za-z0-9.-]{0,253}\.[A-Za-z]{2,24}+")
#: The most lines of a heredoc read for ``.pgpass`` lines.
_HEREDOC_LINES = 50


#: A literal that reads as a password by itself wherever code gives it (``ssh.connect('10.0.0.5', 22, 'root', '…')``,
#: ``hmac.new(b"…", …)``, ``WiFi.begin("ssid", "…")``, ``{"mm": "…"}``, ``["sshpass", "-p", "…"]``, ``aesKey =
#: "…"``): quoted after ``(`` ``,`` ``:`` ``[`` or `` =`` (not an attribute's ``value="…"``), 8 or more characters without spaces, brackets, quotes
#: (but an escaped one: ``"Kq7\\"vLp"``) or backticks (reStructuredText's ``:class:`~a.B1``` is a role), to its end however long (a bound
#: sent a longer one whole), which :func:`_strong` judges.
STRONG_LITERAL = re.compile(r"(?:(?<=[(,:\[])|(?<=\s=)|(?<=\(key=))[ \t]*+(?:[bfru]|&)?(?P<q>[\"'])(?P<value>(?:[^\"'`\s()\[\]{}<>\\]|\\[\"']){8,}+)(?P=q)")
#: A cipher's or an HMAC's key right before a :data:`STRONG_LITERAL` (``AES.new(b"…")``, ``aes.NewCipher([]byte("…"))``,
#: ``hmac.new(b"…")``, ``algorithms.AES(b"…")``, ``hmac.New(sha256.New, []byte("…"))``, ``createHmac('sha256', '…')``, ``createCipheriv(…, '…', iv)``, ``new SecretKeySpec("…".getBytes(),
#: …)``, Go's ``key := []byte("…")``): its key when it reads as a secret (:data:`secret_patterns.DEFAULT_SECRET`), not words.
CIPHER_CALL = re.compile(r"(?:(?:AES|DES3?|Blowfish|HMAC|hmac)\.new\((?:key=)?|NewCipher\(|algorithms\.AES\(|(?:hmac\.New|create(?:Hmac|Cipheriv|Decipheriv))\([^,()\n]{1,40}+,"
                         r"|SecretKeySpec\(|(?<![\w.])key := |(?<![\w.])var key = (?=\[\]byte\())(?:\[\]byte\()?$")

#: A literal given to what hashes a password: Ansible's and Jinja's ``'…' | password_hash('sha512')``, Python's
#: ``generate_password_hash("…")``, ``make_password("…")``, ``bcrypt.hashpw(b"…", …)``, ``crypt.crypt("…", …)``,
#: ``PasswordHasher().hash("…")``, ``bcrypt.hash("…")`` (passlib's ``passlib.hash.bcrypt.hash``), ``bcrypt.compare("…", hash)``
#: (``checkpw``, ``hashSync``, ``compareSync``), pgcrypto's ``crypt('…', gen_salt('bf'))``: it is the password in clear, judged as one assigned to
#: ``password`` (a variable or a placeholder stays).
HASHED_LITERAL = re.compile(
    r"(?P<q>[\"'])(?P<value>[^\"'\n{}]{4,}+)(?P=q)[ \t]*+\|[ \t]*+password_hash\b"
    r"|(?:(?<![\w.])(?:generate_password_hash|make_password|hashpw|crypt(?=\(\s*+'[^'\n]{4,}+'\s*+,)|(?:bcrypt|argon2|PasswordHasher\(\)|ph|crypt)"
    r"\.(?:hash|crypt|hashpw|checkpw|hashSync|compare|compareSync))|(?<=\.)bcrypt\.hash)"
    r"\(\s*+[bru]?(?P<q2>[\"'])(?P<value2>[^\"'\n]{4,}+)(?P=q2)"
)


def _strong(m: re.Match[str]) -> bool:
    """Whether a :data:`STRONG_LITERAL` is a cipher's key that reads as a secret (:data:`CIPHER_CALL`) or reads as a
    password whatever it is given to (:func:`prose_secrets.reads_strongly`), not a path
    or a URL (``Microsoft.Web/sites@2022-03-01``, ``src/main.py#L42``), an object's or a version's reference
    (``User@5e9f23b4``, ``Main$1``, ``login@v1``), an address, a format, a variable, a selector, a flag or settings
    (``%Y-%m-%dT%H``, ``$Home1!``, ``#Main2!``, ``--Opt1!``, ``server=db;pwd=…``: its password is judged by its name),
    a style with a colour (``border:#FF0000``)."""
    value = m.group("value")
    if CIPHER_CALL.search(m.string, max(m.start() - 60, 0), m.start()) and patterns.DEFAULT_SECRET.fullmatch(value) and ":" not in value and not random_tokens.camel_words(value):
        return True
    return (not value.startswith(("%", "$", "#", "-", "@")) and "/" not in value and re.search(r"[A-Za-z_]=", value) is None
            and re.search(r"\.\w++@[0-9a-f]{6,8}+$|\$\d++$|@v\d", value) is None
            and re.search(r"#[0-9A-Fa-f]{3,8}+(?![0-9A-Za-z])", value) is None
            and re.fullmatch(r"[^@]+@[^@]+\.[A-Za-z]{2,}", value) is None and prose_secrets.reads_strongly(value))


def redact(text: str, redacted: str, judge: Judge) -> str:
    """``text`` with those credentials replaced by ``redacted``, the rest as it was."""
    for pattern in (TEMPLATE_DEFAULT, FALLBACK, OPTION_DEFAULT, LISP_AND_SHELL, SYMBOL_KEY):
        text = prefilter.sub(pattern, lambda m: _default(m, judge, redacted), text)
    text = prefilter.sub(ASSIGN_OP, lambda m: _assign_op(m, judge, redacted), text)
    text = prefilter.sub(TYPED_DEFAULT, lambda m: _typed_default(m, judge, redacted), text)
    text = prefilter.sub(KEYED_CALL, lambda m: _keyed_call(m, judge, redacted), text)
    text = prefilter.sub(NAME_VALUE_JSON, lambda m: _json_value(m, judge, redacted), text)
    text = prefilter.sub(POSITIONAL, lambda m: _positional(m, judge, redacted), text)
    text = prefilter.sub(DSL_SETTING, lambda m: _dsl_setting(m, judge, redacted), text)
    text = prefilter.sub(MAIL_LOGIN, lambda m: _mail_login(m, redacted), text)
    text = prefilter.sub(C_DEFINE, lambda m: _named_literal(m, judge, redacted), text)
    text = prefilter.sub(MARKUP_VALUE, lambda m: _markup(m, judge, redacted), text)
    text = prefilter.sub(CLIENT_AUTH, lambda m: _login(m, redacted, default=True), text)
    text = prefilter.sub(AUTH_LIST, lambda m: _login(m, redacted, default=False), text)
    text = prefilter.sub(ACL_LINE, lambda m: _acl_rules(m, redacted), text)
    text = prefilter.sub(HASHED_LITERAL, lambda m: _hashed(m, judge, redacted), text)
    text = prefilter.sub(STRONG_LITERAL, lambda m: replace_group(m, "value", redacted) if _strong(m) else m.group(), text)
    return _pgpass_heredocs(text, redacted)


def _hashed(m: re.Match[str], judge: Judge, redacted: str) -> str:
    """A :data:`HASHED_LITERAL` match, the literal redacted when it reads as a password assigned to ``password``."""
    group = _value_group(m)
    return replace_group(m, group, redacted) if judge("password", m.group(group), False) else m.group()


def _value_group(m: re.Match[str]) -> str:
    """The name of ``m``'s value group that matched (``value``, ``value2``...: one per match, as each pattern's are in
    alternatives of one another)."""
    return next(g for g in m.re.groupindex if g.startswith("value") and m.group(g) is not None)


def _name(m: re.Match[str]) -> str:
    """The name a default is of: a key, or a path's or a Clojure keyword path's last part."""
    for group in ("key", "bkey", "pkey", "aname", "c1", "c2", "c3", "c4", "c5", "ps", "name", "cname", "sname", "ename",
                  "vname", "hname", "dname", "oname", "gname", "mname", "kname", "ref", "ref2", "path"):
        if group in m.re.groupindex and m.group(group):
            name = m.group(group)
            if group in ("ename", "vname"):
                return name.rstrip("/").rsplit("/", 1)[-1]  # a parameter's path: its last part
            return re.split(r"[.:\[\]\s]+", name.strip("[]. "))[-1] if group in ("ref", "ref2", "path") else name
    return ""


def _default(m: re.Match[str], judge: Judge, redacted: str) -> str:
    """A default's or fallback's match with its value redacted when its name is a credential's and it reads as a
    password by itself (:data:`secret_patterns.DEFAULT_SECRET`)."""
    group = _value_group(m)
    value = m.group(group)
    if not patterns.DEFAULT_SECRET.fullmatch(value) or not judge(_name(m), value, False):
        return m.group()
    return replace_group(m, group, redacted)


def _assign_op(m: re.Match[str], judge: Judge, redacted: str) -> str:
    """An :data:`ASSIGN_OP` match with its value redacted as an assignment's would be (``DB_PASSWORD=…``)."""
    group = "bare" if m.group("bare") is not None else "value"
    value = m.group(group)
    if (group == "bare" and m.group("op") != "?" and re.search("[a-z]", m.group("name"))
            and re.fullmatch(r"[A-Za-z_][\w.]*+;?", value)):
        return m.group()  # Go's or Pascal's code (a Make variable is named in capitals): a name, not a literal
    if group == "bare":
        value = value.rstrip(patterns.VALUE_END + "\\")
    if not value or not judge(m.group("name"), value, group == "bare"):
        return m.group()
    return replace_group(m, group, redacted, len(value))


def _keyed_call(m: re.Match[str], judge: Judge, redacted: str) -> str:
    """A :data:`KEYED_CALL` match with its literal redacted when it reads as a password by itself and an assignment of
    it to the name would be."""
    value = m.group(_value_group(m))
    salt = len(value) >= 40 and value.count(" ") <= 3 and "/" not in value
    if (patterns.DEFAULT_SECRET.fullmatch(value) or salt) and not METHOD.fullmatch(value):
        return _named_literal(m, judge, redacted)
    return m.group()


def _named_literal(m: re.Match[str], judge: Judge, redacted: str) -> str:
    """``m`` with its literal redacted when an assignment of it to its name (:func:`_name`) would be."""
    group = _value_group(m)
    return replace_group(m, group, redacted) if judge(_name(m), m.group(group), False) else m.group()


def _dsl_setting(m: re.Match[str], judge: Judge, redacted: str) -> str:
    """A :data:`DSL_SETTING` match with its literal redacted as a default is (:func:`_default`), when it is not a
    template (``"${System.getenv('TOKEN')}"``, ``"#{ENV['PW']}"``) nor a path (``'C:\\keys\\id_rsa'``): a line of a name
    and a literal is as often a command and its argument (``pass "work/github"``, Chef's ``encrypted_data_bag_secret
    '/etc/chef/…'``)."""
    if re.search(r"[$\\]|[#%]\{|\{\{", m.group(_value_group(m))):
        return m.group()
    return _default(m, judge, redacted)


def _json_value(m: re.Match[str], judge: Judge, redacted: str) -> str:
    """A :data:`NAME_VALUE_JSON` match with its value redacted when an assignment of it to its name would be and it is
    not a word or a mask: a header's ``{"name": "X-CSRF-Token", "value": "Fetch"}`` and ``"******"`` stay."""
    if re.fullmatch(r"[A-Za-z]++|\*++", m.group(_value_group(m))):
        return m.group()
    return _named_literal(m, judge, redacted)


def _positional(m: re.Match[str], judge: Judge, redacted: str) -> str:
    """A :data:`POSITIONAL` match with its literal redacted as an assignment to a secret (a JWT library's, which must
    also read as a password by itself: not ``'RS256'``, ``'utf-8'``, a public key or a URL) or a password would be (not
    a selector, ``'#password'``, nor a word or a short one: ``'N/A'``, ``'sa'``, ``'Password'``; after a login's user
    held in a variable, only one that reads as a password: ``driver.login(page, "Sign in")``, ``app.login(user,
    "/dashboard")`` stay)."""
    value = m.group("value10")
    if m.group("userpwd"):
        user, colon, password = value.partition(":")
        if not colon or not judge("password", password, False):
            return m.group()
        start = m.start("value10") + len(user) + 1 - m.start()
        return m.group()[:start] + redacted + m.group()[start + len(password) :]
    if m.group("jwt"):
        plain = patterns.DEFAULT_SECRET.fullmatch(value) is not None and not value.startswith("-----")
    elif m.group("form"):
        plain = prose_secrets.reads_as_password(value)
    elif m.group("login") and m.group("login")[0] not in "\"'":  # a variable's user: the literal may be anything
        plain = prose_secrets.reads_as_password(value) and re.search(r"[\s/]|^anonymous|\w#\w", value) is None
    else:
        plain = len(value) >= 6 and not value.startswith("#") and not re.fullmatch("[A-Za-z]{1,8}", value)
    secret = plain and judge("secret" if m.group("jwt") else "password", value, False)
    return replace_group(m, "value10", redacted) if secret else m.group()


def _mail_login(m: re.Match[str], redacted: str) -> str:
    """A :data:`MAIL_LOGIN` match with its password redacted when it reads as one or as an app password."""
    value = m.group("value14")
    if prose_secrets.reads_as_password(value) or re.fullmatch(r"[a-z]{16}|(?:[a-z]{4} ){3}[a-z]{4}", value):
        return replace_group(m, "value14", redacted)
    return m.group()


def _markup(m: re.Match[str], judge: Judge, redacted: str) -> str:
    """A :data:`MARKUP_VALUE` match with its value redacted when an assignment of it to the name the markup gives would
    be: a ``<key>``'s, the ``name`` attribute's, else the tag's local name (``wsse:Password`` is ``Password``)."""
    group = _value_group(m)
    attr = re.search(r"(?<![\w-])name[ \t]*+=[ \t]*+[\"']([^\"'\n]{1,100}+)[\"']", m.group("attrs") or "")
    name = m.group("kname") or (attr.group(1) if attr else m.group("tag").rpartition(":")[2])
    value = m.group(group).strip()
    return replace_group(m, group, redacted) if value and judge(name, value, False) else m.group()


def _typed_default(m: re.Match[str], judge: Judge, redacted: str) -> str:
    """A :data:`TYPED_DEFAULT` match with its value redacted: a typed attribute's as its assignment's would be; a
    field's default when it also reads as a password and the attribute or its ``env``/``alias`` names a credential."""
    value = m.group("value")
    if m.group("field") is None:
        return replace_group(m, "value", redacted) if judge(m.group("attr"), value, False) else m.group()
    names = ([m.group("attr")] if m.group("attr") else []) + FIELD_NAME.findall(m.group("rest") or "")
    if not patterns.DEFAULT_SECRET.fullmatch(value) or not any(judge(name, value, False) for name in names):
        return m.group()
    return replace_group(m, "value", redacted)


def _login(m: re.Match[str], redacted: str, default: bool) -> str:
    """A client's ``auth`` or an ``auth`` list's match with its password redacted when it reads as one
    (:func:`prose_secrets.reads_as_password`); a client's (``default``) also as a default must
    (:data:`secret_patterns.DEFAULT_SECRET`) and not as an e-mail address: ``auth("user:42:profile")``,
    ``auth("google")``, ``cy.auth("admin@example.com")`` stay. A list whose second item is a way to log in
    (:data:`METHOD`) is of methods."""
    group = _value_group(m)
    value = m.group(group)
    if not prose_secrets.reads_as_password(value) or (default and not patterns.DEFAULT_SECRET.fullmatch(value)):
        return m.group()
    if default and EMAIL.fullmatch(value):
        return m.group()  # a test user's address (Cypress' cy.auth), not a password
    if not default and METHOD.fullmatch(value):
        return m.group()  # a list of ways to log in (auth: [session, OAuth2], - Kerberos - NTLMv2)
    return replace_group(m, group, redacted)


def _acl_rules(m: re.Match[str], redacted: str) -> str:
    """An :data:`ACL_LINE` with the passwords of its ``>…`` and ``<…`` rules redacted. An ACL file's line must be rules
    alone (``user bob on the server >Works`` is prose); ``ACL SETUSER``'s rules run to the first word that is not one.
    A variable (``>$PW``) and a rule without a letter or a digit (``<-----``, an arrow) stay."""
    rules = m.group("rules")
    out, at = [], 0
    for token in re.finditer(r"\S++", rules):
        word = token.group().strip("\"'")
        if not ACL_RULE.fullmatch(word):
            if m.group("acl"):
                break
            return m.group()
        password = word[1:]
        if word[:1] in "<>" and len(password) >= 4 and not password.startswith(("$", redacted[:-1])) \
                and re.search(r"[^\W_]", password) \
                and not patterns.PLACEHOLDER_VALUE.match(password) and not password.endswith(">"):
            start = token.start() + token.group().index(word) + 1
            out += [rules[at:start], redacted]
            at = start + len(password)
    if not out:
        return m.group()
    return m.string[m.start() : m.start("rules")] + "".join(out) + rules[at:]


def _pgpass_heredocs(text: str, redacted: str) -> str:
    """``text`` with the passwords of the ``.pgpass`` lines a :data:`PGPASS_HEREDOC` writes redacted (up to its tag or
    :data:`_HEREDOC_LINES` lines); not a variable (``$PGPASSWORD``), lower-case letters alone (``password``, the
    format's own words), one Capitalised word or a placeholder (``<password>``, ``{{pg_password}}``, ``%(password)s``)."""
    out, done, read = [], 0, 0  # read: where the last heredoc's lines were read to (a command inside a body is text)
    for m in PGPASS_HEREDOC.finditer(text):
        if m.start() < max(done, read):
            continue
        at = m.end()
        for _ in range(_HEREDOC_LINES):
            end = text.find("\n", at)
            end = len(text) if end < 0 else end
            line = text[at:end].rstrip("\r")
            if line.strip() == m.group("tag"):
                break
            fields = re.split(r"(?<!\\):", line.strip())
            value = fields[-1]
            if (len(fields) == 5 and all(fields) and not re.search(r"\s", line.strip()) and len(value) >= 4
                    and not value.startswith("$") and not re.fullmatch(r"[a-z-]++|[A-Z][a-z]++", value)
                    and not patterns.PLACEHOLDER_VALUE.match(value)):
                start = at + line.index(line.strip()) + len(line.strip()) - len(value)
                out += [text[done:start], redacted]
                done = start + len(value)
            at = end + 1
            if at > len(text):
                break
        read = at
    return "".join(out) + text[done:] if out else text
