"""Passwords given to commands in ways :data:`secret_patterns.CLI_SECRET` does not read, for :mod:`redact`.

A password piped into a command that reads it from standard input (``echo "…" | docker login -u bob
--password-stdin``, ``printf '%s' "…" | helm registry login …``, ``echo "…" | docker secret create db -``, and
``docker secret create db - <<< "…"``) or echoed into a password file's process substitution (``--password-file=<(echo …)``); a value piped into ``base64``; the ``-P …`` of archivers and SQL Server's tools (``zip``, ``unzip``,
``sqlcmd``, ``bcp``) and 7-Zip's glued ``-p…``; GitHub CLI's ``gh secret set NAME --body …``; HAProxy's ``stats auth
USER:…`` and ``insecure-password …``; and, under a credential's name, nginx's ``proxy_set_header NAME …;``, a Dockerfile's ``ENV NAME value`` (the form without ``=``), ``aws configure set NAME value``, rclone's and
tccli's pairs, a key-value store's key (``consul kv put …/password …``), expect's ``set NAME "value"`` and its ``send "…"`` after a password prompt, and a
Secret's ``--from-literal=NAME=…``; chpasswd's here-document and sed's replacement of a password; and a config
file's or a listing's line of a credential's name and its value alone (``password Hz@2024abc`` in msmtp's or nslcd's
file, ``bindpw = …``, PowerShell's ``DB_PASSWORD      …``).

A value given where a password goes must read as one (:func:`prose_secrets.reads_as_password`: not a variable such
as ``$CR_PAT``, a placeholder or a word); a named value is judged as an assignment to its name would be (the
``judge`` :mod:`redact` passes). Pure; linear in the length of the text (each pattern starts at a command's or
keyword's name and reads a value after it to its end, each value from one start); never raises.
"""

from __future__ import annotations

import re

from . import prefilter, prose_secrets
from .code_secrets import Judge
from .secret_patterns import UNCLOSED_VALUE, quoted_run, replace_group


def _value(n: str = "") -> str:
    """A value on one line, to its end however long: quoted (group ``<n>q`` its quote, ``<n>value`` what it holds, past
    an escaped quote: ``'Kq7\\'vLp'``, or to its line's end when the quote never closes:
    :data:`secret_patterns.UNCLOSED_VALUE`) or bare (``<n>bare``)."""
    run = quoted_run("\"'")
    return (rf"(?:(?P<{n}q>[\"'])(?=(?:{run})(?P={n}q)|{UNCLOSED_VALUE})(?P<{n}value>{run})(?P={n}q)?"
            rf"|(?P<{n}bare>[^\s\"'|;&<>()$`][^\s|;&<>()`]*+))")


_VALUE = _value()
#: Up to 300 characters of one command, a line continued with ``\`` included.
_SAME_COMMAND = r"(?:[^\n|;&\\]|\\\r?\n|\\(?!\r?\n)){0,300}?"
#: Commands that read a password from their input: ``--password-stdin`` (docker, podman, helm, skopeo, cosign…),
#: ``secret create [flags] NAME -``, ``gh secret set NAME`` (without ``--body``), ``sudo -S``, ``passwd --stdin``,
#: ``passwd [user]`` at a command's end (``printf '…\\n…\\n' | passwd bob``), ``chpasswd``, gpg's ``--passphrase-fd 0``, ``gh auth login --with-token``, ``vncpasswd -f``, ``smbpasswd -s`` and
#: ``htpasswd -i``, vault's ``password=-``, gcloud's ``--data-file=-`` (``gcloud secrets versions add``), ``redis-cli --askpass`` and
#: Kerberos' ``kinit``, openconnect's ``--passwd-on-stdin``, Cloudflare's ``wrangler secret put NAME`` and, under a credential's name, ``vercel env add NAME
#: [environment]`` (its other variables are settings: ``API_URL``).
_READS_INPUT = (r"(?:--password-stdin|--with-token|[ \t]secret[ \t]++create[ \t][^\n|;&<]{0,200}?[ \t]-(?=[ \t]*+(?:<<<|\r?\n|$))"
                r"|(?<![\w-])gh[ \t]++secret[ \t]++set[ \t]++[A-Za-z_]\w{0,100}+(?=[ \t]*+(?:<<<|\r?\n|$))"
                r"|(?<![\w-])sudo[ \t]++-[A-Za-z]{0,4}S|(?<![\w-])passwd(?:[ \t]++--stdin|(?:[ \t]++[a-z_][\w.-]{0,31}+)?(?=[ \t]*+(?:$|[\r\n;&])))|(?<![\w-])chpasswd|--passphrase-fd[ \t=]++0"
                r"|(?<![\w-])(?:vncpasswd[ \t]++-f|smbpasswd(?:[ \t]++-[A-Za-z]{1,4}+){0,2}[ \t]++-[A-Za-z]{0,4}s|htpasswd[ \t]++-[A-Za-z]{0,4}i)"
                r"|--data-file[ \t=]++-|[ \t]password=-|--askpass|--passwd-on-stdin|(?<![\w-])kinit"
                r"|(?<![\w-])wrangler[ \t]++secret[ \t]++put[ \t]++[A-Za-z_][\w-]{0,100}+|(?<![\w-])vercel[ \t]++env[ \t]++add[ \t]++"
                r"[A-Za-z_]\w{0,60}?(?i:pass|secret|token|key|pwd|auth|cred)\w{0,60}+(?:[ \t]++(?:production|preview|development))?)(?![\w-])")

#: ``echo``/``printf`` (up to two flags or a ``'%s'`` format) of a value piped (through up to 300 characters of other
#: commands) into one that reads a password from its input, or written to a file named for one (``> ~/.vault_pass.txt``,
#: ``> .secrets/api_token``), and such a command given a ``<<<`` string.
STDIN_SECRET = re.compile(
    r"(?<![\w-])(?:echo|printf)(?:[ \t]++(?:-[neE]{1,3}+|([\"'])%s(?:\\n)?\1)){0,2}[ \t]++" + _VALUE
    + r"(?:[ \t]*+>>?[ \t]*+(?:[^\s;&|<>]{0,200}?/)?[\w.-]{0,40}?(?i:pass|token|secret)[\w.-]{0,40}+(?=[ \t]*+(?:[\n;&|]|$))"
    + r"|[ \t]*+\|[^\n;&]{1,300}?" + _READS_INPUT + ")"
    + r"|" + _READS_INPUT + r"[^\n|;&<]{0,200}?<<<[ \t]*+" + _value("h")
)
#: ``echo``/``printf`` (up to two flags or a ``'%s'`` format) of a value in a process substitution given to a flag that
#: reads a password, a token, a secret or a key from a file (``rsync --password-file=<(echo …)``, ``--passphrase-file
#: <(printf '%s' …)``): the shell writes the value into that file.
PROCESS_SECRET = re.compile(
    r"(?<![\w-])--?[\w-]{0,30}?(?i:pass|secret|token|key|cred)[\w-]{0,30}+(?:=|[ \t]++)<\([ \t]*+(?:echo|printf)"
    r"(?:[ \t]++(?:-[neE]{1,3}+|([\"'])%s(?:\\n)?\1)){0,2}[ \t]++" + _VALUE + r"[ \t]*+\)"
)
#: ``echo``/``printf`` of a value piped into ``base64`` to encode it (a Secret's value made by hand: ``echo -n "…" |
#: base64``; ``base64 -d`` decodes; its quote left open too: ``echo '… | base64``): the value goes when it reads as a
#: password (``"hello world"``, ``"admin"`` stay).
BASE64_INPUT = re.compile(
    r"(?<![\w-])(?:echo|printf)(?:[ \t]++-[neE]{1,3}+)?[ \t]++(?P<q>[\"']?)(?P<value>[^\s\"'|;&<>()`]{6,}+)(?P=q)?[ \t]*+\|[ \t]*+base64"
    r"(?:[ \t]++-w[ \t]*+0)?(?=[ \t]*+(?:$|[\r\n;&|)]))"
)
#: ``-P password`` of ``zip``, ``unzip``, ``zipcloak``, ``sqlcmd`` and ``bcp`` (a path or ``.exe`` before, any case, ``-P``
#: glued to its value or after other flags: ``zip -rP``), and 7-Zip's ``-ppassword`` (``7z``, ``7za``, ``7zr``,
#: ``7zz``; the flag quoted too, ``"-p…"``), in the same command.
ARCHIVE_OR_SQL = re.compile(
    r"(?<![\w.-])(?:(?i:zip|unzip|zipcloak|sqlcmd|bcp)(?i:\.exe)?+(?=[ \t])" + _SAME_COMMAND + r"[ \t]-[a-zA-Z]{0,4}P[ \t]*+"
    r"|7z[arz]?(?i:\.exe)?+(?=[ \t])" + _SAME_COMMAND + r"[ \t](?P<fq>[\"']?)-p)" + _VALUE
)
#: A password given to a command by the flag or the place that command takes it at, in the same command: any
#: command's ``--passphrase`` (gpg's, iwctl's), openssl's ``-k``, ``-pass pass:`` and ``passwd [-1|-5|-6|-apr1]``, the LDAP tools' ``-w``,
#: FreeRDP's ``/p:``, influx's ``-password``, x11vnc's ``-passwd`` and ``-storepasswd``, openGauss' ``gsql -W``, ``mysqladmin … password``,
#: ``rabbitmqctl add_user|change_password USER``, ``mc alias set ALIAS URL USER``, ``mc admin user add ALIAS USER``, ``poetry config http-basic.NAME
#: USER`` (``pypi-token.NAME``), ``cargo login``, ``composer config [-g] http-basic.HOST USER``, ``bundle config [set] [--global] HOST USER:``, ``smbclient … //HOST/SHARE``
#: (its password after the share), ``net use [Z:] SHARE … /user:USER`` (or before ``/user:``), ``etcdctl --user USER:``, PowerShell's
#: ``ConvertTo-SecureString`` and ``-Password``/``-SecretKey`` (``-AccountPassword`` too), PuTTY's ``-pw``,
#: ipmitool's and mosquitto's ``-P``, rar's and unrar's ``-p`` (``-hp``), curl's ``--proxy-user USER:`` (``-U``), jenkins-cli's ``-auth USER:``, skopeo's ``--creds
#: USER:``, a secret store's value (``az keyvault secret set … --value``, ``aws ssm put-parameter … --value``,
#: ``aws secretsmanager … --secret-string``), ``net user USER …`` (before ``/add`` or alone), ``schtasks … /rp``, ``useradd``'s and ``usermod``'s ``-p``, ``dsadd``'s and
#: ``dsmod``'s ``-pwd``, ``mkpasswd [flags] …``, neo4j's and Grafana's
#: initial and reset passwords, ``pulumi config set --secret NAME …`` and ``dotnet user-secrets set NAME …``, ngrok's
#: ``config add-authtoken …`` (``authtoken …``, ``--authtoken …``) and influx's ``-t …``; not a flag in its place (``/persistent:no``, ``--api=s3v4``).
PASSWORD_FLAG = re.compile(
    r"(?<![\w.-])(?:--passphrase(?:[ \t]++|=)"
    r"|openssl(?=[ \t])" + _SAME_COMMAND + r"[ \t](?:-k[ \t]++|-pass(?:in|out)?[ \t]++pass:|passwd(?:[ \t]++-(?:1|5|6|apr1))?[ \t]++)"
    r"|ldap(?:search|add|modify|delete|whoami|passwd|compare|modrdn|exop)(?=[ \t])" + _SAME_COMMAND + r"[ \t]-w[ \t]++"
    r"|(?:xfreerdp|wlfreerdp|sdl-freerdp)(?=[ \t])" + _SAME_COMMAND + r"[ \t]/p:"
    r"|(?:influx|x11vnc|gsql|mysqladmin)(?=[ \t])" + _SAME_COMMAND + r"[ \t](?:-password|-passwd|-storepasswd|-W|password)[ \t]++"
    r"|rabbitmqctl[ \t]++(?:add_user|change_password)[ \t]++\S{1,100}+[ \t]++"
    r"|ngrok[ \t]++(?:config[ \t]++add-authtoken|authtoken)[ \t]++|(?:ngrok|influx)(?=[ \t])" + _SAME_COMMAND + r"[ \t](?:--authtoken|-t|--token)(?:[ \t]++|=)"
    r"|mc[ \t]++(?:alias[ \t]++set[ \t]++\S{1,100}+[ \t]++\S{1,300}+|admin[ \t]++user[ \t]++add[ \t]++\S{1,100}+)[ \t]++\S{1,100}+[ \t]++"
    r"|poetry[ \t]++config[ \t]++(?:http-basic\.\S{1,100}+[ \t]++\S{1,100}+|pypi-token\.\S{1,100}+)[ \t]++|cargo[ \t]++login[ \t]++"
    r"|composer[ \t]++config(?:[ \t]++-[\w-]{1,20}+){0,2}[ \t]++http-basic\.\S{1,100}+[ \t]++\S{1,100}+[ \t]++"
    r"|bundle[ \t]++config(?:[ \t]++set)?(?:[ \t]++--(?:global|local))?[ \t]++[\w-]{1,63}+\.[\w.-]{1,200}+[ \t]++(?P<bq>[\"']?)[^\s:\"']{1,100}+:"
    r"|smbclient(?=[ \t])" + _SAME_COMMAND + r"[ \t]//[^\s/]{1,200}+/[^\s/]{1,200}+[ \t]++"
    r"|net[ \t]++use(?:[ \t]++(?:[A-Za-z]:|\*))?[ \t]++\\\\\S{1,300}+[ \t]++(?=[^\s/]\S{0,199}+[ \t]++/user:)"
    r"|net[ \t]++use(?=[ \t])" + _SAME_COMMAND + r"[ \t]/user:\S{1,100}+[ \t]++"
    r"|etcdctl(?=[ \t])" + _SAME_COMMAND + r"[ \t]--user(?:[ \t]++|=)(?P<fq>[\"']?)[^\s:\"']{1,100}+:"
    r"|(?i:ConvertTo-SecureString)(?:[ \t]++-String)?[ \t]++"
    r"|(?:plink|pscp|psftp)(?i:\.exe)?+(?=[ \t])" + _SAME_COMMAND + r"[ \t]-pw[ \t]++"
    r"|(?:ipmitool|mosquitto_(?:pub|sub|rr))(?=[ \t])" + _SAME_COMMAND + r"[ \t]-P[ \t]++|(?:un)?rar(?=[ \t])" + _SAME_COMMAND + r"[ \t]-h?p"
    r"|(?:curl(?=[ \t])" + _SAME_COMMAND + r"[ \t](?:--proxy-user|-U)|jenkins-cli(?:\.jar)?+(?=[ \t])" + _SAME_COMMAND + r"[ \t]-auth|skopeo(?=[ \t])" + _SAME_COMMAND + r"[ \t]--(?:src-|dest-)?creds)"
    r"(?:[ \t]++|=)(?P<uq>[\"']?)[^\s:\"']{1,100}+:"
    r"|(?:az[ \t]++keyvault[ \t]++secret[ \t]++set|aws[ \t]++ssm[ \t]++put-parameter)(?=[ \t])" + _SAME_COMMAND
    + r"[ \t]--value(?:[ \t]++|=)|aws[ \t]++secretsmanager(?=[ \t])" + _SAME_COMMAND + r"[ \t]--secret-string(?:[ \t]++|=)"
    r"|net[ \t]++user[ \t]++[^\s/]{1,100}+[ \t]++(?=[^\s/*]\S{0,199}+(?:[ \t]++/|[ \t]*+(?:$|[\r\n;&|])))|schtasks(?=[ \t])" + _SAME_COMMAND + r"[ \t]/rp[ \t]++"
    r"|(?:useradd|usermod)(?=[ \t])" + _SAME_COMMAND + r"[ \t]-p[ \t]++|ds(?:mod|add)[ \t]++user(?=[ \t])" + _SAME_COMMAND + r"[ \t]-pwd[ \t]++"
    r"|mkpasswd(?:[ \t]++-[\w-]{1,20}+(?:[ \t]++[^\s-]\S{0,40}+)?){0,2}[ \t]++(?=[^\s-])"
    r"|(?:neo4j-admin[ \t]++(?:dbms[ \t]++)?set-initial-password|grafana-cli[ \t]++admin[ \t]++reset-admin-password)[ \t]++"
    r"|pulumi[ \t]++config[ \t]++set[ \t]++(?:--(?:secret|path)[ \t]++){1,2}+[^\s-]\S{0,200}+[ \t]++"
    r"|dotnet[ \t]++user-secrets[ \t]++set[ \t]++(?:\"[^\"\n]{1,200}+\"|[^\s\"]{1,200}+)[ \t]++"
    r"|(?<=[ \t])-[A-Za-z]{0,30}?(?:Password|SecretKey)[ \t]++)(?![-/])" + _VALUE
)
_ARGV_FLAG = r"--?[A-Za-z-]{0,30}?(?:password|passwd|requirepass|masterauth|passphrase|token|secret|api-key)"
#: A command written as a list of its words (a compose or Kubernetes ``command:``/``args:``, ``subprocess.run([…])``,
#: a Dockerfile's ``CMD [...]``): a password flag's value as the next element (``"--requirepass", "…"``, ``"--password",
#: "…"``, the next element on the next line too), or MySQL's ``"-p…"`` glued, after ``"mysql"``, ``"mysqladmin"`` or
#: ``"mysqldump"`` in the same list; and as a YAML list, one word a line (``- --password`` then ``- …``, or ``- -a``
#: then ``- …`` within 600 characters after ``- redis-cli``), the value the whole next item. Not a path (``"--token",
#: "/var/run/secrets/token"``) nor a flag.
ARGV_SECRET = re.compile(
    r"[\"']" + _ARGV_FLAG + r"[\"'][ \t]*+,\s{0,40}+(?P<q>[\"'])(?![~.]?/)(?P<value>" + quoted_run("(?P=q)") + r")(?P=q)"
    r"|[\"'](?:mysql|mysqladmin|mysqldump|mariadb)[\"'][^\]\n]{0,200}?,[ \t]*+(?P<fq>[\"'])-p(?P<bare>[^\"'\s]++)(?P=fq)"
    r"|(?m:^)[ \t]*+-[ \t]++(?:(?P<yq>[\"']?)" + _ARGV_FLAG + r"(?P=yq)|[\"']?redis-cli[\"']?"
    r"[\s\S]{0,600}?\n[ \t]*+-[ \t]++(?P<aq>[\"']?)-a(?P=aq))"
    r"[ \t]*+\r?\n[ \t]*+-[ \t]++(?![\"']?(?:[~.]?/|-))" + _value("h") + r"[ \t]*+(?=\r?\n|$)"
)
#: HAProxy's ``stats auth USER:…`` and a userlist's ``user NAME insecure-password …``, at a line's start. HAProxy reads
#: variables only in double quotes (``"${STATS_PASS}"``), so a ``$`` inside a bare value is the password's own.
HAPROXY_LOGIN = re.compile(
    r"(?m:^)[ \t]*+(?:stats[ \t]++auth[ \t]++[^\s:\"]{1,100}+:|user[ \t]++\S{1,100}+[ \t]++insecure-password[ \t]++)"
    r"(?P<bare>[^\s\"'$#]\S{0,199}+)"
)
#: nginx's header and parameter directives (``proxy_set_header X-Api-Key "…";``, ``add_header``, ``grpc_set_header``,
#: ``fastcgi_param DB_PASSWORD …;``, ``uwsgi_param``, ``scgi_param``), and Apache's (``RequestHeader set X-Api-Key "…"``,
#: ``Header [always] set|add|append|merge …``): the name, and the value (after ``Bearer``, ``Token`` or ``Basic`` too),
#: quoted or bare, before nginx's ``;`` or Apache's line end. A ``$`` starts one of nginx's variables.
NGINX_HEADER = re.compile(
    r"(?m:^)[ \t]*+(?:proxy_set_header|add_header|grpc_set_header|fastcgi_param|uwsgi_param|scgi_param"
    r"|(?:Request)?Header[ \t]++(?:always[ \t]++)?(?:set|add|append|merge|setifempty)(?P<apache>))[ \t]++"
    r"(?P<name>[\w-]{1,60}+)[ \t]++(?:(?P<q>[\"'])(?:(?i:bearer|token|basic)[ \t]++)?(?P<value>" + quoted_run("(?P=q)", "$") + r")(?P=q)"
    r"|(?P<bare>[^\s\"';$][^\s;]*+))[ \t]*+(?(apache)(?=\r?\n|$)|;)"
)
#: GitHub CLI's ``gh secret set … -b value`` / ``--body value`` (``--body=value``), in any order.
GH_SECRET = re.compile(r"(?<![\w-])gh[ \t]++secret[ \t]++set(?=[ \t])" + _SAME_COMMAND + r"[ \t](?:-b[ \t]*+|--body(?:[ \t]++|=))" + _VALUE)
#: A Dockerfile's ``ENV NAME value`` at a line's start (any case; the old form, whose value runs to the line's end),
#: ``aws configure set [section.]NAME value``, the shells' ``set -gx NAME value`` (fish), ``setenv`` (csh), ``setx [/M]``
#: (Windows), ``launchctl setenv``, ``npm config set [//registry/:]NAME value``, ``git config [--global] SECTION.NAME value``
#: (``sendemail.smtpPass``), ``pip config set SECTION.NAME value`` and Tcl's (expect's) ``set NAME "value"``
#: at a line's start, quoted, and a key-value store's or a secrets manager's key, its last part after ``/`` (``consul kv put
#: secret/db/password value``, ``etcdctl put /app/db/password value``, ``doppler secrets set NAME value``, ``netlify env:set NAME
#: value``; not consul's ``@file``). Group ``name``; an ``ENV`` value of
#: several unquoted words is group ``words`` (``ENV DB_PASSWORD Sup3r S3cret``; ``ENV PASSWORD must be set`` is prose,
#: :func:`_named` tells them apart).
NAMED_SETTING = re.compile(
    r"(?:(?m:^)[ \t]*+(?P<env>(?i:ENV))[ \t]++|(?<![\w-])aws[ \t]++configure[ \t]++set(?:[ \t]++--profile[ \t]++\S{1,100}+)?[ \t]++"
    r"(?:[\w-]{1,60}+\.){0,2}|(?<![\w-])(?:set[ \t]++-[gUxl]{1,3}+|setenv|setx(?:[ \t]++/[Mm])?|launchctl[ \t]++setenv)[ \t]++"
    r"|(?<![\w-])(?:npm|pnpm|yarn)[ \t]++config[ \t]++set[ \t]++(?://[^\s:]{1,200}+:)?"
    r"|(?<![\w-])(?:git[ \t]++config(?:[ \t]++--(?:global|local|system|add|replace-all))?|pip3?[ \t]++config[ \t]++set)[ \t]++"
    r"(?:[\w-]{1,60}+\.){1,2}"
    r"|(?m:^)[ \t]*+set[ \t]++(?=[A-Za-z_][\w-]{0,100}+[ \t]++[\"'])|(?<![\w-])(?:consul[ \t]++kv[ \t]++put|etcdctl(?:[ \t]++-\S{1,100}+(?:[ \t]++[^\s-]\S{0,100}+)?){0,2}[ \t]++put"
    r"|doppler[ \t]++secrets[ \t]++set|netlify[ \t]++env:set)[ \t]++(?:\S{0,200}?/)?(?P<kv>))(?P<name>[A-Za-z_][\w-]{0,100}+)[ \t]++(?(kv)(?!@))"
    r"(?:" + _VALUE + r"(?(env)(?=[ \t]*+(?:\r?\n|$)))|(?(env)(?P<words>[^\s\"'][^\n]{0,199}?)(?=[ \t]*+(?:\r?\n|$))|(?!)))"
)
#: A cloud tool's configuration given as pairs on its command line (``rclone config create NAME TYPE … secret_access_key
#: …``, ``tccli configure set secretId … secretKey …``): the first pair whose name ends in a credential's word, judged
#: as an assignment to its name.
CONFIG_PAIRS = re.compile(
    r"(?<![\w-])(?:rclone[ \t]++config[ \t]++(?:create|update)|tccli[ \t]++configure[ \t]++set)(?=[ \t])" + _SAME_COMMAND
    + r"[ \t](?P<name>[A-Za-z_][\w-]{0,60}?(?i:secret|password|pass|token|key))(?:[ \t]++|=)" + _VALUE
)
#: A setting's name that is a service's word glued to ``pass`` (``smtppass``, ``smtpPass``, ``imappass``, ``ldappass``).
_GLUED_PASS = re.compile(r"(?i)(?:smtp|imap|pop3?|mail|db|ldap|ftp|proxy|admin|root|bind|sasl)pass")
#: ``kubectl create secret`` (``oc`` too), to the command's end (a line continued with ``\`` included), whose
#: ``--from-literal=NAME=VALUE`` :data:`FROM_LITERAL` reads.
SECRET_COMMAND = re.compile(r"(?<![\w-])(?:kubectl|oc)[ \t]++create[ \t]++secret(?=[ \t])(?:[^\n|;&\\]|\\\r?\n|\\(?!\r?\n)){0,2000}+")
#: One ``--from-literal=NAME=VALUE`` of a Secret (any NAME: ``DSN=…``), the whole pair quoted or the value alone.
FROM_LITERAL = re.compile(
    r"--from-literal(?:=|[ \t]++)(?P<lq>[\"'])?(?P<name>[\w.-]{1,100}+)=(?:(?(lq)(?P<lvalue>[^\"'\n]++)(?P=lq)|(?!))"
    r"|(?P<q>[\"'])(?P<value>" + quoted_run("\"'") + r")(?P=q)|(?P<bare>[^\s\"']\S*+))"
)
#: chpasswd's lines in a here-document (``chpasswd <<EOF`` then ``bob:…``): the first line's password.
CHPASSWD_HEREDOC = re.compile(
    r"(?<![\w-])chpasswd[^\n]{0,100}?<<-?[ \t]*+[\"']?\w{1,20}+[\"']?[ \t]*+\r?\n[ \t]*+[\w.-]{1,64}+:(?P<bare>[^\s:]{1,200}+)"
)
#: sed's replacement that writes a password into a file: a credential's directive and its value (``s/^requirepass
#: .*/requirepass …/``, ``s/password=.*/password=…/``) or a placeholder replaced by a value (``s/CHANGE_ME/…/g``). The
#: value runs to the next delimiter; it goes when it reads as a password.
SED_SECRET = re.compile(
    r"(?<![\w-])sed[ \t][^\n]{0,200}?(?<![\w-])s(?P<d>[/|#,@:!])(?:[^\n]{0,300}?(?P=d)(?P<name>[A-Za-z_][\w.-]{0,60}+)"
    r"(?:[ \t]*+[=:][ \t]*+|[ \t]++)|[A-Z_]{0,30}?(?:CHANGE_?ME|PASSWORD|SECRET|TOKEN|PLACEHOLDER)[A-Z_]{0,30}+(?P=d))"
    r"(?P<bare>(?:(?!(?P=d))[^\s\"'\\]){1,200}+)(?P=d)"
)
#: Names whose value a sed replacement writes is a password (:data:`SED_SECRET`).
_SED_NAMES = re.compile(r"(?i).{0,60}(?:pass|password|passwd|pwd|secret|token|key|requirepass|masterauth|auth)")
#: A line of a name and a value alone, ``=`` or spaces between (a config file's ``password …``, ``bindpw = …``, a listing's
#: ``DB_PASSWORD      …``): no brackets or quotes in the value (a column's type: ``password VARCHAR(255)``), no ``?``
#: after it (``token Int64?``), not a path nor a command's flag (``mkpasswd --method=sha-512``); ``pass`` and ``passwd`` are
#: commands given a user's name (:func:`_line`).
CONFIG_LINE = re.compile(
    r"(?m:^)[ \t]*+(?P<name>[A-Za-z_][\w.-]{0,60}+)(?:[ \t]++|[ \t]*+=[ \t]*+)(?![~/$%]|\./|--)"
    r"(?P<bare>[^\s()\[\]{}<>\"'`]{6,200}+)(?<!\?)[ \t]*+\r?(?m:$)"
)
#: Names of LDAP clients' and servers' bind passwords (nslcd's ``bindpw``, slapd's ``rootpw``, sssd's ``…_authtok``).
_BIND_NAMES = ("bindpw", "rootpw", "authtok")
#: A value a shell, a CI system or a template fills in when the command runs, not a written one: ``$(…)``, ``${…}``,
#: ``$VAR``, ``${{ … }}``, ``%VAR%``, ``$env:VAR``, ``#{VAR}#``, ``@VAR@``. In single quotes only the templates' forms.
_FILLED_IN = re.compile(r"\$[({\w]|%\w+%|#\{|@\w+@|\{\{")
_TEMPLATED = re.compile(r"%\w+%|#\{|@\w+@|\{\{|\$\{\{")
#: expect's ``send "…"`` answering a password prompt (``expect "password:"; send "…\\r"``, on the next line or in braces).
EXPECT_SEND = re.compile(
    r"(?<![\w-])expect[ \t]++(?:-[a-z]{1,5}+[ \t]++)?[\"{]?[^\"{}\n]{0,60}?(?i:assword|assphrase|passcode)[^\"{}\n]{0,20}+[\"}]?"
    r"[ \t]*+[;{]?[ \t\r\n]{0,40}+\{?[ \t\r\n]{0,40}+send[ \t]++(?:--[ \t]++)?(?P<q>\")(?P<value>[^\"\\\n]++)")


def redact(text: str, redacted: str, judge: Judge) -> str:
    """``text`` with those passwords replaced by ``redacted``, the rest as it was."""
    for pattern in (STDIN_SECRET, PROCESS_SECRET, ARCHIVE_OR_SQL, PASSWORD_FLAG, GH_SECRET, ARGV_SECRET, CHPASSWD_HEREDOC, EXPECT_SEND):
        text = prefilter.sub(pattern, lambda m: _password(m, redacted), text)
    text = prefilter.sub(HAPROXY_LOGIN, lambda m: _haproxy(m, redacted), text)
    text = prefilter.sub(BASE64_INPUT, lambda m: replace_group(m, "value", redacted) if prose_secrets.reads_as_password(m.group("value"))
                            and not m.group("value").startswith("$") else m.group(), text)
    text = prefilter.sub(NGINX_HEADER, lambda m: _nginx(m, redacted, judge), text)
    text = prefilter.sub(NAMED_SETTING, lambda m: _named(m, redacted, judge), text)
    text = prefilter.sub(CONFIG_PAIRS, lambda m: _named(m, redacted, judge), text)
    text = prefilter.sub(SECRET_COMMAND, lambda c: prefilter.sub(FROM_LITERAL, lambda m: _literal(m, redacted, judge), c.group()), text)
    text = prefilter.sub(SED_SECRET, lambda m: _sed(m, redacted), text)
    return prefilter.sub(CONFIG_LINE, lambda m: _line(m, redacted, judge), text)


def _value_group(m: re.Match[str]) -> str:
    """The name of ``m``'s value group that matched."""
    return next(g for g in ("value", "bare", "hvalue", "hbare", "words") if g in m.re.groupindex and m.group(g) is not None)


def _written(m: re.Match[str], group: str) -> bool:
    """Whether ``m``'s value is written out, not filled in when the command runs (:data:`_FILLED_IN`)."""
    quote = m.group(group.replace("value", "q")) if group.endswith("value") else ""
    return (_TEMPLATED if quote == "'" else _FILLED_IN).search(m.group(group)) is None


def _password(m: re.Match[str], redacted: str) -> str:
    """A match given where a password goes, its value redacted when it is written out and reads as one."""
    group = _value_group(m)
    value = m.group(group)
    quote = next((m.group(g) for g in ("fq", "uq", "bq") if g in m.re.groupindex and m.group(g)), "")
    if quote and value.endswith(quote):
        value = value[:-1]  # "-p…", "user:…": the flag's or the login's closing quote
    if _written(m, group) and prose_secrets.reads_as_password(value):
        return replace_group(m, group, redacted, len(value))
    return m.group()


def _named(m: re.Match[str], redacted: str, judge: Judge) -> str:
    """A :data:`NAMED_SETTING` match, its value redacted when it is written out and an assignment of it to its name
    would be; a value of several words (group ``words``) whole, when one of them reads as a password."""
    group, name = _value_group(m), m.group("name")
    if _GLUED_PASS.fullmatch(name):
        name = "password"  # git's sendemail.smtppass: one word to the judge, a password's name
    if not _written(m, group):
        return m.group()
    if group == "words":  # prose after ENV (``ENV PASSWORD is required, e.g. in CI!``) unless a word is plainly one
        words = (w.strip(".,;:!?()[]{}'\"") for w in m.group(group).split())
        secret = any(prose_secrets.reads_as_password(w) and re.search(r"\d", w) and not re.search(r"[/~]", w)
                     and judge(name, w, True) for w in words)
    else:
        secret = judge(name, m.group(group), group == "bare")
    return replace_group(m, group, redacted) if secret else m.group()


def _line(m: re.Match[str], redacted: str, judge: Judge) -> str:
    """A :data:`CONFIG_LINE` match, its value redacted when written out and, after a credential's name, it reads as a
    password with a digit in it, or, after a password's, is 16 lower-case letters (a mail service's app password)."""
    name, value = m.group("name"), m.group("bare")
    if name.lower() in ("pass", "passwd") or not _written(m, "bare"):
        return m.group()
    if name.lower() in ("password", "smtp_password") and re.fullmatch("[a-z]{16}", value):
        return replace_group(m, "bare", redacted)
    bind = name.lower().endswith(_BIND_NAMES)
    secret = prose_secrets.reads_as_password(value) and re.search(r"\d", value) and (bind or judge(name, value, True))
    return replace_group(m, "bare", redacted) if secret else m.group()


def _literal(m: re.Match[str], redacted: str, judge: Judge) -> str:
    """A :data:`FROM_LITERAL` pair, its value redacted when an assignment of it to its name would be or, whatever the
    name (``DSN``), when it reads as a password."""
    group = next(g for g in ("lvalue", "value", "bare") if m.group(g) is not None)
    value = m.group(group)
    if not _written(m, group):
        return m.group()
    if judge(m.group("name"), value, group == "bare") or prose_secrets.reads_as_password(value):
        return replace_group(m, group, redacted)
    return m.group()


def _sed(m: re.Match[str], redacted: str) -> str:
    """A :data:`SED_SECRET` match, its value redacted when it reads as a password after a credential's directive or a
    placeholder."""
    name = m.group("name")
    if name is not None and not _SED_NAMES.fullmatch(name):
        return m.group()
    return _password(m, redacted)


def _haproxy(m: re.Match[str], redacted: str) -> str:
    """A :data:`HAPROXY_LOGIN` match, its password redacted when it reads as one."""
    secret = prose_secrets.reads_as_password(m.group("bare"))
    return replace_group(m, "bare", redacted) if secret else m.group()


def _nginx(m: re.Match[str], redacted: str, judge: Judge) -> str:
    """A :data:`NGINX_HEADER` match, its value redacted when an assignment of it to the header's or parameter's name
    would be, or, after ``Authorization``, when it reads as a password; not Apache's variable."""
    group = "value" if m.group("value") is not None else "bare"
    name, value = m.group("name"), m.group(group)
    if "%{" in value:
        return m.group()  # Apache's variable (%{API_KEY}e), filled in when a request comes
    if name.lower().endswith("authorization"):
        secret = prose_secrets.reads_as_password(value)
    else:
        secret = judge(name, value, group == "bare")
    return replace_group(m, group, redacted) if secret else m.group()
