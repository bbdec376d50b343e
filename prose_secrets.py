"""Secrets written the way people write them rather than in a format, for :mod:`redact`.

A login's password in ``user:password@host`` without a URL's ``//`` or with a ``/`` in it, in a pair after a label
(``creds: admin / …``) or in a command's user and password flags; PINs, codes and TOTP seeds by :mod:`pin_secrets`;
passphrases of words and spaces after a password label; and the items of a list going on after a redacted
password (:func:`listed`, a late step of its own: the steps before it redact the first), and a key's rest after a space
or its halves (``前半段 … 后半段 …``). Each is found by a pattern here (the shared
ones are :mod:`secret_labels`' and :mod:`secret_patterns`') and judged: these shapes are also what ordinary text is made of
(``email:alice2024@example.com``, ``GPIO pin 18``, ``password: see the vault entry``, ``docker run -u 1000:1000 -p
8080:80``), so a value goes only when it reads as a secret. Pure; linear in the length of the text; never raises.
"""

from __future__ import annotations

import re

from . import pin_secrets, prefilter
from . import secret_labels as labels
from . import secret_patterns as patterns

#: A credential's label alone on its line (a Markdown heading's, a bold one's, ``:`` after it) and the value alone on the
#: next, in a code fence (group ``fence``) or not: ``Password:`` then ```` ``` ```` and ``…``, ``**API Key**`` then ``…``.
LABEL_ABOVE = re.compile(
    r"(?im)^[ \t]*+(?:[#>*_-]{1,4}+[ \t]*+)?(?:[a-z0-9 _-]{0,30}?[ _-])?(?:password|passwd|passphrase|pwd|api[ _-]?key"
    r"|secret(?:[ _-]key)?|(?:access[ _-])?token)[ \t]*+[:：]?[ \t]*+\r?\n(?P<fence>[ \t]*+(?:```|~~~)[\w-]{0,20}+[ \t]*+\r?\n)?"
    r"[ \t]*+(?P<value>[^\s`]{6,}+)[ \t]*+(?(fence)\r?\n[ \t]*+(?:```|~~~)|(?=\r?\n|$))"
)
#: A passphrase of words and spaces after a password label and ``:``, ``=``, a verb or a CJK joiner (``password: correct
#: horse battery staple``, ``密码是 correct horse battery staple``, ``Passwort: grüne katze tanzt``; a space alone after a
#: label of another script: ``应用专用密码 abcd efgh ijkl mnop``): a run of Latin
#: letters, digits, spaces, ``'`` and ``-``, which :func:`_passphrase_words` judges. Groups: ``label``,
#: ``value``.
PASSPHRASE_WORDS = re.compile(
    r"(?i)(?=[pmcskwhş密口パ비암п])(?P<label>(?<![A-Za-z0-9])(?:password|passwd|passphrase|passcode|"
    + "|".join(sorted(labels.FOREIGN_PASSWORD_LABELS, key=lambda label: (-len(label), label))) +
    r")|密码短语|密碼短語|密码|密碼|口令|パスワード|パスフレーズ|비밀번호|암호|пароль)"
    r"(?:(?:[ \t]*+(?:=>|->|改成了|改为了|改成|改为|设置成|设为|[:=：是为為は는은を]|(?:is|was|ist|war|est|es|era|é|è|là)(?![A-Za-z]))){1,2}"
    r"|(?<=[\u0400-\u04ff\u3040-\u9fff\uac00-\ud7af])(?=[ \t]))"
    r"[ \t]*+(?P<value>[A-Za-z0-9\u00c0-\u024f][A-Za-z0-9\u00c0-\u024f \t'-]{0,160}+)"
)
#: A login written as a pair after its label and a colon (``creds: admin / Sup3r$ecret9``, ``login: admin/Hx8!kq2Lm``, ``u: admin p: …`` (``, p:``, ``| p:``),
#: ``账号：admin/Sup3r$ecret9``, ``pw for grafana: admin / …``, ``账密 admin/…`` and ``creds root:…`` without a colon (``creds -> root:…`` with an arrow,
#: ``creds for staging -> admin / …``; an account's label and a space before a pair joined by ``/``, group ``bare``: ``测试账号 test01 / …``, whose
#: password must read strongly or as a piece of a key: ``用户名 root / Main2Dev`` stays), a pair joined by ``:`` (``creds: root:…``), ``creds for staging: bob / …``, a role's ``Jenkins 管理员：admin/…``;
#: after a change or a login's verb (group ``verb``: ``我改成了 nacos / …``, ``登录用 admin / …``; a ``/`` without spaces then
#: joins a path's pieces as often: ``改成了 src/MainApp2``, so the value must read strongly); a network and its password (group ``ssid``:
#: ``WiFi：Office-5G / …``, ``wifi: WPA2-PSK, key …``); not a path: ``user: alice/projects/x``): the password
#: goes when it reads as one (:func:`reads_as_password`), a network's by its length (:func:`_password_in`). The password
#: runs to its end, up to CJK text or full-width punctuation, holding two ``:`` at most (a start inside it needs a ``:``,
#: so it is read from three starts at most); one with more is read as before, up to 200 characters.
CREDENTIAL_PAIR = re.compile(
    r"(?i)(?<![A-Za-z0-9_])(?=[claued用账帳帐ア계管超관pw改换換登无無])(?:(?:creds|credentials|login|logins|account|user|username|u|pw|用户名|账号|帳號"
    r"|帐号|账户|帳戶|帐户|アカウント|계정|超级管理员|超級管理員|管理员|管理員|管理者|관리자|(?P<wifi>wifi|wi-fi|wlan|无线网?|無線網?))"
    r"(?:[ \t]++(?:for|on|to)[ \t]++[\w.-]{1,30}+)?[ \t]*+[:：]"
    r"|(?:账密|帳密|(?P<verb>(?:改|换|換)(?:成|为|為)了?|(?:登录|登陆|登入|登錄)用))[ \t]*+[:：]?|creds(?:[ \t]++(?:for|on|to)[ \t]++[\w.-]{1,30}+)?(?=[ \t])(?:[ \t]*+(?:->|=>|→))?"
    r"|(?P<bare>账号|帳號|帐号|账户|帳戶|帐户|用户名|用戶名|アカウント|계정)(?=[ \t]++[A-Za-z0-9_.@-]{1,64}+[ \t]*+/))"
    r"[ \t]*+(?P<ssid>[A-Za-z0-9_.@-]{1,64}+)(?:[ \t]*+(?://?|\|(?![ \t]*+p[ \t]*+[:：]))[ \t]*+|(?(wifi)[ \t]*+,[ \t]*+key[ \t]++|(?::|(?:[ \t]*+[,，;|])?\s++p[ \t]*+[:：][ \t]*+)))"
    r"(?P<value>[^\s/:：\u3000-\u303f\u3400-\u9fff\uff00-\uffef]++(?:[:：][^\s/:：\u3000-\u303f\u3400-\u9fff\uff00-\uffef]++){0,2}+(?![:：])"
    r"|[^\s/]{1,200}+)(?!/)"
)
#: A Wi-Fi network's QR code as text (``WIFI:T:WPA;S:HomeNet;P:…;;``, fields in any order, ``\\`` escaping ``;`` ``,`` ``:``):
#: its ``P:`` field, 5 to 64 characters (WEP's 5 to WPA's 64), which goes unless a placeholder. The field is looked for in
#: the 300 characters after ``WIFI:``, so each start reads a bounded stretch.
WIFI_QR = re.compile(r"(?i)WIFI:[^\n]{0,300}?(?<=[:;])P:(?P<value>(?:\\[^\n]|[^;\\\n]){5,64}+)(?=;)")
#: A login under a label, one field a line (``登录信息：`` then ``admin`` then the password), or a Japanese password
#: (``パス``, which alone is also a path) after a login's id on the same line (``ログインID：admin　パス：…``): the
#: password goes when it reads as one (:func:`reads_as_password`), read to its end (a Japanese one up to the next
#: ``ID:`` or ``名:``, where another start is).
LOGIN_LINES = re.compile(
    r"(?:登录信息|登錄信息|登录账号|登錄帳號|登录方式|账号信息|帳號資訊|ログイン情報)[ \t]*+[:：]?[ \t]*+\r?\n[ \t]*+[\w.@-]{1,64}+[ \t]*+\r?\n"
    r"[ \t]*+(?P<value>\S++)"
    r"|(?:ログインID|ログイン名|ユーザーID|ユーザー名|ユーザ名|ID)[ \t]*+[:：][ \t]*+[\w.@-]{1,64}+[ \t\u3000,，、/]{1,8}+"
    r"パス(?:ワード)?[ \t]*+[:：][ \t]*+(?![~.])(?P<jvalue>(?:(?!(?:ID|名)[:：])[^\s，、/\\])++)(?![/\\])"
)
#: A login after a label naming both its fields (``账号密码：admin …``, ``用户名密码 root …``, ``账号密码分别是 admin 和 …``, ``都是``):
#: the user, what separates the two, then the password, which goes when it reads as one
#: (:func:`reads_as_password`), read to its end or CJK text (a start's first character).
BOTH_FIELDS = re.compile(
    r"(?:账号|帐号|帳號|账户|帳戶|用户名|用戶名|用户|用戶)(?:和|与|與|/|、)?(?:密码|密碼)(?:分别|分別|都)?(?:是|为|為)?[ \t]*+[:：]?[ \t]*+"
    r"[A-Za-z0-9_.@-]{1,64}+(?:[ \t]*+(?://?|\||和|与|與|、|，|,)[ \t]*+|[ \t]++)(?P<value>[^\s/，,、\u3400-\u9fff]++)"
)
#: A login written after a host without a label, as a chat writes it (``服务器：1.2.3.4 root …``, ``1.2.3.4:22 root/…``,
#: ``ssh root@1.2.3.4 …``): an IPv4 address (and port) and a user, or ``ssh`` to a user at a host, then a value that
#: reads as a password (:func:`_host_login`; after a password's label, group ``label``: ``ssh admin@10.0.0.5 password …``,
#: with a digit), to its end (a start needs a space before its value, and it holds none).
HOST_LOGIN = re.compile(
    r"(?:(?<![\w.])\d{1,3}+\.\d{1,3}+\.\d{1,3}+\.\d{1,3}+(?::\d{1,5}+)?[ \t]++[A-Za-z_][\w.-]{0,31}+(?:[ \t]*+/[ \t]*+|[ \t]++)"
    r"|(?<![\w-])ssh[ \t]++(?:-p[ \t]*+\d{1,5}+[ \t]++)?[\w.-]{1,32}+@[\w.-]{1,253}+[ \t]++)"
    r"(?P<label>(?i:password|passwd|pwd|pw|pass)(?=[ \t:：=])[ \t]*+[:：=]?[ \t]*+)?(?P<value>[^\s/，,。]{6,}+)"
)
#: The same after a web address (``后台地址 http://10.0.0.5:8080 admin …``), apart: a pattern starting with a literal is
#: searched for it, not tried at every character (in :data:`HOST_LOGIN` it doubled that pattern's cost).
URL_LOGIN = re.compile(r"http(?<=(?<![\w.])http)s?://[!-~]{1,300}+[ \t]++[A-Za-z_][\w.-]{0,31}+(?:[ \t]*+/[ \t]*+|[ \t]++)"
                       r"(?P<value>[^\s/，,。]{6,}+)")
#: A user and a strong password joined by ``/`` alone (``交接一下：jenkins admin/…，gitlab root/…``, ``zhangsan / …``,
#: ``root@10.0.0.5 / …``), found from its ``/`` (searched for, as :data:`URL_LOGIN`'s literal is, not tried at every word);
#: :func:`_user_slash` reads the user before it and judges the value.
USER_SLASH = re.compile(r"/[ \t]*+(?P<value>[^\s/，,。]{6,}+)")
#: The user before a :data:`USER_SLASH`: a lower-case name, at a host or a mail address's (``root@10.0.0.5 / …``,
#: ``bob@example.com / …``), not a path's or an address's piece nor a git branch's prefix (``feature/Fix#123Bug``).
SLASH_USER = re.compile(r"(?<![\w./:@-])(?!(?:feature|feat|fix|bugfix|hotfix|release|origin|upstream|refs|heads|tags|remotes)[ \t]*+$)"
                        r"[a-z][a-z0-9_.-]{0,31}+(?:@[A-Za-z0-9][\w.-]{0,99}+)?[ \t]*+$")
#: A user and password given as flags of a command (``mongo -u admin -p 'Sup3r$ecret9'``, ``smbclient -U
#: bob%Sup3rS3cretPw`` or ``'CORP\\bob%…'``, ``lftp -u bob,Sup3rS3cretPw``, ``az login -u http://app -p …``); the password goes when it reads as one (``docker run -u
#: 1000:1000 -p 8080:80`` and ``mysql -u root -p shop`` keep theirs). Groups: ``q`` the quote, ``value``.
USER_PASS_FLAGS = re.compile(
    r"(?<![A-Za-z0-9_-])(?:-u|-U|--user|--username)(?:[ \t]++|=)[\"']?(?:[A-Za-z0-9_.@:/-]{1,64}+[\"']?[ \t]++"
    r"(?:-p(?:[ \t]++)?|--pass(?:word)?(?:[ \t]++|=))(?![/~.$])|(?:[\w.-]{1,30}+\\{1,2}+)?[A-Za-z0-9_.@-]{1,64}+[%,])"
    r"(?P<q>[\"']?)(?P<value>[^\s\"']++)(?P=q)"
)
#: A credential's environment name in prose, then a verb and the value (``POSTGRES_PASSWORD is …``, ``DB_PASSWORD 是
#: …``, ``REDIS_PASSWORD 改成了 …``, ``requirepass 设置的是 …``, ``I set POSTGRES_PASSWORD to …``, ``把 DB_PASSWORD 设成 …``,
#: ``OPENAI_API_KEY 设置成了 …``, ``requirepass 我设成 … 了``: who set it and 已经, 刚 before the verb): the name in capitals ending in a credential's word (``_KEY`` after ``API``,
#: ``SECRET``... only: a ``CACHE_KEY`` is a name) or a configuration's in lower case (``requirepass``, ``masterauth``,
#: ``tenant_access_token``), which the labels of :data:`secret_labels.LABELLED`, words of their
#: own, do not read, and assignments want a sign. Group ``value``; it must read as a password with a digit.
NAMED_IN_PROSE = re.compile(
    r"(?<![\w-])(?:[A-Z][A-Z0-9_]{0,60}?(?:PASSWORD|PASSWD|PASS|PWD|SECRET|TOKEN|(?:API|ACCESS|SECRET|PRIVATE|MASTER)_KEY)"
    r"|[a-z][a-z0-9_]{0,40}?(?:pass|password|passwd|pwd|secret|token|auth)|[a-z][a-z0-9]{0,40}?(?:Pass|Password|Passwd|Pwd|Secret|Token))"
    r"(?![\w-])[ \t]*+(?:(?<=[ \t])(?:is|was|is now|is still|should be|(?:is |was )?set to|to)[ \t]++|(?:我们|我們|我|已经|已經|刚|剛){0,2}+[ \t]*+"
    r"(?:是|为|為|设置成了?|设置为了?|设成了?|設成了?|改成了?|改为了?|换成了?"
    r"|(?:设置|設置|配置|配|设|設|填|写|寫)的(?:是|为|為)?|を(?=[ \t]*+[!-~]{6,}+[ \t]*+に(?:設定|変更|し|す)))[ \t]*+)"
    r"[`'\"“「]?(?P<value>[!-~]{6,}+)"
)
#: A login and its password in prose (``log in with bob and …``, ``login with admin / …``, ``try logging in with bob / …``, ``creds are admin / …`` or ``admin:…``, ``log
#: in as admin (…)``, ``use admin/… to log in``: group ``use``, before a login's ``/``). Group ``value``; it must read as a password
#: with a digit, after ``use`` strongly (``use src/Config2Dev`` is a path).
LOGIN_IN_PROSE = re.compile(
    r"(?i)(?<![\w-])(?:(?:log(?:ging)?[ \t]?in|sign(?:ing)?[ \t]?in|ssh|connect)[ \t]++(?:as|with)|(?:creds|credentials|login)[ \t]++(?:are|is|with)"
    r"|(?P<use>use)(?=[ \t]++[\w.@-]{1,64}+[ \t]*+/))"
    r"[ \t]++[\w.@-]{1,64}+(?:[ \t]*+/[ \t]*+|[ \t]++(?:and|with)[ \t]++|[ \t]++\(|:)[`'\"“「]?(?P<value>[!-~]{6,}+)"
)
#: A password given with a login in prose, after ``with``, ``using``, ``use`` or ``and`` and its label without a verb (``log in
#: as bob with password …``, ``ssh as root using password …``, ``use password "…" for the admin account``). Group ``value``; it must read as a password with a digit
#: (``with password authentication`` stays).
PASSWORD_WITH = re.compile(
    r"(?i)(?<![\w-])(?:with|using|and|use)[ \t]++(?:the[ \t]++)?(?:password|passwd|pw)[ \t]++[`'\"“「]?(?P<value>[!-~]{6,}+)")
#: A password written before its label (``用 … 这个密码登录``, ``… 是新密码``, ``… is the password``, ``use … as the password``, ``try …
#: as the API key``, ``… (the password)``: group ``en``; ``把 … 设成 API key``: group ``key``): group ``value``, which must read as a
#: password with a digit (:func:`_named_in_prose`), before an English label that ends its noun (not ``the password manager``)
#: or after a setting's verb strongly or as a piece of a key.
VALUE_BEFORE_LABEL = re.compile(r"(?<![!-~])(?P<value>[!-~]{6,}+)(?:[ \t]*+(?:这个|這個|作为|作為|当作|當作|就是|是)"
                                r"(?:新的?|我的|管理员的?|管理員的?|登录|登錄)?(?:密码|密碼|口令)"
                                r"|(?P<key>[ \t]*+(?:设成|设为|設成|設為|设置成|设置为|設置成|當成|当成|作为|作為|当作|當作|就是|是)[ \t]*+(?:新的?|我的)?[ \t]*+"
                                r"(?:密码|密碼|口令|密钥|密鑰|令牌|(?i:api[ _-]?key|token|password|secret)(?![A-Za-z]))"
                                r"|[ \t]*+を[ \t]*+(?:パスワード|APIキー|トークン|API[ \t]?キー)に)"
                                r"|(?P<en>(?:[ \t]++(?i:is|was|as|(?:works?|worked|should[ \t]++work)[ \t]++as)[ \t]++|[ \t]*+\([ \t]*+(?i:(?:it'?s|it[ \t]++is)[ \t]++)?|(?<=,)[ \t]++|[ \t]++[-–—][ \t]++)(?i:(?:the|my|our|your)[ \t]++)?"
                                r"(?i:(?:new|old|current|admin|root|wifi|db|database|vpn|ssh|server|prod|staging)[ \t]++)?"
                                r"(?i:password|passphrase|api[ _-]?key|token|secret)(?![A-Za-z])(?![ \t]++(?!(?i:for|to|of|on|in|at)(?![A-Za-z]))[A-Za-z])))")
#: A password changed from one value to another (``changed the password from … to …``, ``密码从 … 改成了 …``, ``changed
#: password … to …``): group ``value``, the old one, bare or quoted, which must read strongly (:func:`reads_strongly`;
#: not ``from MySQL57 to Postgres16``, ``从 Rule2024a 换成 …``); :func:`listed` takes the new one after it. One of up to 64
#: characters is read from each ``from`` within 40 of its label; a longer one is read to its end, or to a label in it (where
#: another start is: read from each, a long run of ``pwdfrom`` would cost its square).
CHANGE_LABEL = r"(?i)(?:password|passwd|pwd|密码|密碼|口令)"
CHANGED_FROM = re.compile(CHANGE_LABEL + r"(?:[^\n]{0,40}?(?:from|从|從|由)[ \t]*+(?:\r?\n[ \t]*+)?|[ \t]++)[\"'`「]?"
                          r"(?P<value>[!#-&(-_a-~]{6,64}+|[!#-&(-_a-~](?:(?!pwd|passw)[!#-&(-_a-~]){64,}+)"
                          r"(?=[\"'`」]?(?:(?:[ \t]++|[ \t]*+\r?\n[ \t]*+)(?:to|->|→)|[ \t]*+(?:改|换|換)(?:成|为|為)))")
#: ``pass`` as a password's label (``the root pass is …``, ``pass for the vpn is …``, ``pass for wifi: …``, after a login's user ``user bob, pass …``), which
#: :data:`secret_labels.LABELLED` leaves to code (Python's ``pass``): the value must read strongly (:func:`reads_strongly`), not a cost's ``O(n^2)``.
#: The value runs to its end however long, up to a ``pass:`` (the only start a run without spaces can hold, so it is read once).
PASS_LABEL = re.compile(r"(?i)(?:(?<![\w-])(?P<user>user(?:name)?|login)[ \t]*+[:：=]?[ \t]*+[`'\"]?[\w.@-]{1,64}+[`'\"]?[ \t]*+[,，/]?[ \t]*+)?"
                        r"(?<![\w-])pass(?:[ \t]++for[ \t]++(?:the[ \t]++|my[ \t]++|our[ \t]++)?[\w.-]{1,30}+(?:[ \t]++[\w-]{1,30}+){0,2})?"
                        r"(?:[ \t]++(?:is|was)[ \t]++|[ \t]*+[:：][ \t]*+|(?(user)[ \t]++|(?!)))(?P<value>(?:(?!pass[:：])[^\s，。()]){6,}+)")
#: FTP's and POP3's ``PASS`` at a line's start, in capitals, then the password (``USER bob`` then ``PASS …``), which goes when it
#: reads strongly or as a piece of a key (:func:`_after_clause`; a test runner's ``PASS src/app.test.js``, ``PASS TestLogin2`` stay).
PASS_COMMAND = re.compile(r"(?m)^[ \t]*+PASS[ \t]++(?P<value>\S++)")
#: A label, then a clause in Chinese, Japanese or Korean saying what was done with the value, then ``：``, an arrow or a space,
#: then the value (``登录密码我放在备注里了：…``, ``pwd 改了 → …``, ``这个是 token，帮我存一下：…``, ``密码我记在这里了 …``,
#: ``パスワードはこれです：…``, ``パスは … です``, ``비번 바꿨어 → …``, ``私钥内容如下：…``, a question's ``密码是多少？是 … 吗``): group ``value``, which goes when it reads strongly or as a piece of a key
#: (:func:`_after_clause`; ``密码生成规则：Rule2024a``, ``密码管理器的版本：v2.3.1-RC1`` stay); or an English clause of up to 60
#: letters and spaces, then ``:`` (``the wifi password is taped under the router: …``; group ``en``, value ``evalue``, which
#: must read strongly), or ``?`` and a space (``what's the password? …``; group ``ask``, value ``evalue``, which reads strongly or
#: as a piece of a key). The clause holds CJK characters or letters and spaces alone, so a value, without spaces, holds no
#: start but at its end.
CLAUSE_LABEL = re.compile(r"(?=[ptsaPTSA密口令秘私パ비암])(?:(?<![A-Za-z0-9_])(?i:password|passwd|pwd|passphrase|token|secret|api[ _-]?key)"
                          r"|密码|密碼|口令|令牌|密钥|密鑰|秘钥|私钥|私鑰|パスワード|パス|비밀번호|비번|암호)[ \t]*+[，,]?[ \t]*+[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]"
                          r"[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af，、？ \t]{0,23}+(?:(?:[：:]|→|->|=>)[ \t]*+|(?<=[ \t？]))[\"'`“「]?(?P<value>[!-~]{6,}+)"
                          r"|(?<![A-Za-z0-9_])(?i:password|passwd|passphrase|pwd|pw)(?:[ \t]++(?P<en>[A-Za-z' \t]{1,60}+)[:：]"
                          r"|(?P<ask>\?)[ \t]++(?:(?i:it'?s|it[ \t]++is|here)[ \t]++)?)[ \t]*+[\"'`“]?"
                          r"(?P<evalue>[!-~]{6,}+)")
#: A password struck through then its new one (``password: ~~OldPass1!~~ Kq7#…``, ``~…~``, ``<del>…</del>``, ``<s>``, ``<strike>``,
#: ``密码改为：~~…~~ → …``): groups ``old`` and ``value``, each of which goes when it reads as a password (:func:`_struck`). The
#: old value holds no space (``~10 chars~`` is about ten), ``~`` or ``<``, so a start is read once.
STRUCK = re.compile(r"(?i)(?=[pts密口])(?:(?<![A-Za-z0-9_])(?:password|passwd|pwd|passphrase|token|secret)|密码|密碼|口令)"
                    r"[ \t]*+(?:(?:改|换|換|更新|设|設)(?:成|为|為|了)?)?[ \t]*+[:：=]?[ \t]*+"
                    r"(?:~~?|<(?P<tag>del|s|strike)>)(?P<old>[^~<\s]++)(?(tag)</(?P=tag)>|~~?)"
                    r"[ \t]*+(?:(?:→|->|=>)[ \t]*+)?[`'\"“「]?(?P<value>[^\s~`'\"”」<]++)")
#: A login written as its user and password before the verb that uses them (``admin/… 登录后台``, ``用 root 和 … 登不上``,
#: ``bob / … login``): group ``value``, which must read as a password with a digit (:func:`_named_in_prose`; a path's
#: ``src/main2.py 登录`` does not), the verb not naming a thing (``api/v1Login 登录接口``, ``login page``).
LOGIN_BEFORE_VERB = re.compile(
    r"(?<![!-~])(?:用[ \t]*+)?[\w.@-]{1,64}+[ \t]*+(?:/|和|、)[ \t]*+(?P<value>[!-.0-~]{6,}+)[ \t]*+"
    r"(?:登录|登陆|登入|登不上|登不进|登上|登进|能登|可以登|连不上|(?i:log[ \t]?in|sign[ \t]?in)(?![A-Za-z]))"
    r"(?![ \t]*+(?:接口|页面|頁面|页|界面|模块|模塊|功能|按钮|按鈕|逻辑|邏輯|流程|(?i:api|page|flow|button|form|endpoint|route)))"
)
#: A key given in two pieces (``密钥前半段 … 后半段 …``, ``first half: …``): each piece, which goes when it reads as a
#: piece of a key (:func:`key_piece`). Group ``value``.
KEY_HALF = re.compile(r"(?i)(?:前半段|前半部分|前一半|后半段|後半段|后半部分|後半部分|后一半|後一半|(?:first|second|other)[ \t]half(?:[ \t]is)?)"
                      r"[ \t]*+[:：是为為]?[ \t]*+(?P<value>[A-Za-z0-9_+/=-]{8,100}+)")
#: The rest of a key cut by a space after its redacted start (``sk-proj-… Rt6Yb8Zc3Vw5…``). Group ``value``.
KEY_REST = re.compile(r"[ \t](?P<value>[A-Za-z0-9_-]{12,100}+)(?![^\s,.;:!?，。；：)）\"'`])")
#: The next string after a redacted one in a concatenation (``"[redacted]" + "…"``) or a Python implicit one on the next
#: line (``"[redacted]" \`` then ``"…"``): the rest of a key or a password. Group ``value``.
STRING_REST = re.compile(r"[\"'`][ \t]*+(?:\+|\.\.|\|\|)?[ \t]*+(?:\\?\r?\n[ \t]*+)?(?P<q>[\"'`])(?P<value>[^\"'`\s\\]{6,}+)(?P=q)")
#: Words of prose and documentation that a passphrase is not made of (``password: see the vault entry``, ``reset
#: password: click the link``, ``password: hashed with bcrypt``): function words, and what a text says of a password
#: (its rules too, in the languages of :data:`secret_labels.FOREIGN_PASSWORD_LABELS`: ``contraseña: al menos 8 caracteres``).
PROSE_WORDS = frozenset("""
a an the and or but nor not no yes is are was were be been being am do does did done have has had will would shall
should can could may might must to of in on at by for from with without within into onto over under via per as than
then that this these those there here it its they them their you your yours we our us he she his her i me my mine who
which what when where why how all any each every some none same other such only just also too very more most less
see ask check use using used set get got click enter type press open go find look refer read stored saved kept sent
hashed encrypted required optional changed reset expired expires unchanged empty blank hidden masked redacted unknown
default below above following later now yet still again once never always same new old current value field string
password passwords passphrase token key secret user users account login characters chars length min max least
le la les de du des un une et ou voir dans est sur pour avec pas ne el los las del en y o ver es con para por no se
der die das den dem ein eine und oder im mit siehe ist nicht kein keine os as do da dos em na e com het een zie met
il lo gli di che per non nel sul
menos mínimo minimo máximo maximo caracteres carácteres moins caractères minimum maximum najmniej znaków znaki mindestens
zeichen minst tecken mindst tegn vähintään merkkiä alespoň znaků legalább karakter almenys caràcters
""".split())


def redact(text: str, redacted: str) -> str:
    """``text`` with those secrets replaced by ``redacted``, the rest as it was."""
    text = prefilter.sub(patterns.BARE_USERINFO, lambda m: _bare_userinfo(m, redacted), text)
    text = prefilter.sub(patterns.SLASHED_USERINFO, lambda m: _slashed_userinfo(m, redacted), text)
    text = prefilter.sub(WIFI_QR, lambda m: m.group() if patterns.PLACEHOLDER_VALUE.match(m["value"]) else patterns.replace_group(m, "value", redacted), text)
    for pattern in (CREDENTIAL_PAIR, BOTH_FIELDS, LOGIN_LINES):
        text = prefilter.sub(pattern, lambda m: _password_in(m, redacted), text)
    for pattern in (HOST_LOGIN, URL_LOGIN):
        text = prefilter.sub(pattern, lambda m: patterns.replace_group(m, "value", redacted, n) if (n := _host_login(m)) else m.group(), text)
    text = prefilter.sub(USER_SLASH, lambda m: patterns.replace_group(m, "value", redacted) if _user_slash(m) else m.group(), text)
    text = prefilter.sub(USER_PASS_FLAGS, lambda m: _password_in(m, redacted), text)
    for pattern in (NAMED_IN_PROSE, PASSWORD_WITH, VALUE_BEFORE_LABEL, LOGIN_IN_PROSE, LOGIN_BEFORE_VERB):
        text = prefilter.sub(pattern, lambda m: _named_in_prose(m, redacted), text)
    text = prefilter.sub(STRUCK, lambda m: _struck(m, redacted), text)  # first: a clause's value may be struck through
    text = prefilter.sub(CLAUSE_LABEL, lambda m: _after_clause(m, redacted), text)
    for pattern in (CHANGED_FROM, PASS_LABEL):
        text = prefilter.sub(pattern, lambda m: patterns.replace_group(m, "value", redacted) if reads_strongly(m.group("value")) else m.group(), text)
    text = prefilter.sub(PASS_COMMAND, lambda m: _after_clause(m, redacted), text)
    text = pin_secrets.redact(text, redacted, key_piece)
    text = prefilter.sub(KEY_HALF, lambda m: patterns.replace_group(m, "value", redacted) if key_piece(m.group("value")) else m.group(), text)
    text = prefilter.sub(LABEL_ABOVE, lambda m: _label_above(m, redacted), text)
    return prefilter.sub(PASSPHRASE_WORDS, lambda m: _passphrase_words(m, redacted), text)


#: One item of a list in prose after what joins it (and the quote closing the item before): ``、`` ``，`` ``,`` ``；``
#: ``;``, ``和`` ``及`` ``与`` ``或`` ``还是``, a password's change's ``改成`` ``to`` (group ``to``; a key's ``… to Server01Prod`` is no list) (then a spare's or a new one's word: ``，备用 …``, ``，新的是 …``; after a space too: `` 备用 …``) (an alternative: ``是 A 还是 B 来着``) ``→`` (spaces around or none), ``and`` ``or`` ``->`` ``=>`` (spaces around: a change,
#: ``"old" -> "new"`` in a plan), a YAML list's next item (a line break and ``- ``); then the item, quoted or bare
#: printable ASCII without ``,`` ``;``, to its end (no joiner is in it, so an item is read once).
_SPARE = r"(?:备用|備用|备份|備份|另一个|另一個|第二个|第二個|新的?|旧的?|舊的?)[ \t]*+[:：是为為]?[ \t]*+"
LIST_ITEM = re.compile(r"[\"'`”」]?(?:[ \t]*+(?:[、，,；;和及与與或→]|还是|還是|(?P<to>(?:改|换|換)(?:成|为|為)了?))[ \t]*+(?:" + _SPARE + r")?|[ \t]++" + _SPARE
                       + r"|(?:[ \t]++|[ \t]*+\r?\n[ \t]*+(?=to[ \t]))(?:and|or|(?P<to2>to)|->|=>)[ \t]++|[ \t]*+\r?\n[ \t]*+-[ \t]++)[\"'`“「]?(?P<value>[!-+\--:<-~]{4,}+)")
#: What ends a list's item: the text's or a line's end, punctuation, CJK text or the next item (not a Latin word: a
#: clause goes on, ``…, Alice2024 is the user``).
LIST_ITEM_END = re.compile(r"[ \t]*+(?:$|[^ \tA-Za-z0-9]|(?:and|or)[ \t])")


def listed(text: str, redacted: str) -> str:
    """``text`` with a key's rest after a redacted start (after a space, or in the next string of a concatenation:
    ``"[redacted]" + "…"``, Python's ``"[redacted]" \\`` then ``"…"``) and the items of a list that goes on after a
    redacted value (``密码分别是 […]、…、…``, ``passwords: […], …``, ``密码是 […] 和 …``) redacted in turn, up to eight, while each reads as a password of 8+ characters with a
    digit and is not a path, an assignment or a port (:func:`reads_as_password`): lists of passwords are written so, of
    ports, versions and names (``Redis6``) not. Each item is read once, right after the one before it."""
    pieces: list[str] = []
    done = start = 0
    while (start := text.find(redacted, start)) >= 0:
        start += len(redacted)
        if (rest := KEY_REST.match(text, start)) is not None and key_piece(rest.group("value")):
            pieces += [text[done : rest.start("value")], redacted]
            done = start = rest.end("value")
            continue
        if (rest := STRING_REST.match(text, start)) is not None and (key_piece(rest.group("value")) or reads_strongly(rest.group("value"))):
            pieces += [text[done : rest.start("value")], redacted]
            done = start = rest.end("value")
            continue
        after = start  # a change's new value only right after its old one, a password's
        for _ in range(8):
            m = LIST_ITEM.match(text, start)
            if m is None or ((m["to"] or m["to2"]) and (start != after or not re.search(CHANGE_LABEL, text[max(after - 80, 0) : after]))):
                break
            value = m.group("value").rstrip(patterns.VALUE_END + "”」")
            if len(value) < 8 or not reads_as_password(value) or not re.search(r"\d", value):
                break
            if re.search(r"[/=:]|^[~.$%]", value):
                break
            if LIST_ITEM_END.match(text, m.end()) is None:
                break
            pieces += [text[done : m.start("value")], redacted]
            done = start = m.start("value") + _with_bangs(m.group("value"), value)
    return "".join(pieces) + text[done:] if pieces else text


def key_piece(value: str) -> bool:
    """Whether ``value`` reads as a piece of a key: letters of both cases and a digit, and no word of a name in it (a
    capital and three lower-case letters, or four: ``Qm4Zr8Wt``, not ``GetUser2``)."""
    return (re.search("[a-z]", value) is not None and re.search("[A-Z]", value) is not None and re.search(r"\d", value) is not None
            and re.search("[a-z]{4}|[A-Z][a-z]{3}", value) is None)


def reads_as_password(value: str) -> bool:
    """Whether ``value`` is written out (not a variable or a placeholder such as ``$PASS``, nor already redacted: a
    list's ``[…]`` to :data:`secret_patterns.CODE_VALUE`) and reads as a password: 6+ characters with a letter and a
    symbol (``Sup3r$ecret9``) or letters of both cases and a digit (``Sup3rS3cretPw``). ``alice2024``, ``8080:80`` and
    ``shop`` do not."""
    if len(value) < 6 or patterns.CODE_VALUE.match(value):
        return False
    lower, upper, digit = (any(map(test, value)) for test in (str.islower, str.isupper, str.isdigit))
    return (lower or upper) and (patterns.PASSWORD_SYMBOL.search(value) is not None or (lower and upper and digit))


#: The symbols a password mixes in (not those of paths, versions, base64, names, globs or formats: ``/ . - _ + = : ~ * %``).
STRONG_SYMBOLS = frozenset("!@#$^&?")


def _label_above(m: re.Match[str], redacted: str) -> str:
    """A :data:`LABEL_ABOVE` match with its value redacted: in a fence when it reads as a password with a digit and is
    not a path or a command's (``./reset.sh``), else only when it reads strongly (:func:`reads_strongly`)."""
    value = m.group("value")
    if m.group("fence"):
        secret = reads_as_password(value) and re.search(r"\d", value) and not re.match(r"[~./$%]", value)
    else:
        secret = reads_strongly(value) and not value.startswith(redacted[:-1])
    return patterns.replace_group(m, "value", redacted) if secret else m.group()


def reads_strongly(value: str) -> bool:
    """Whether ``value`` reads as a password whatever surrounds it: lower- and upper-case letters, a digit and one of
    :data:`STRONG_SYMBOLS` (``Kq7#vLp2Wx``; not ``v1.2.3-Beta``, ``Running``, ``/api``)."""
    return (any(c.islower() for c in value) and any(c.isupper() for c in value) and any(c.isdigit() for c in value)
            and not STRONG_SYMBOLS.isdisjoint(value))


#: Words of a form's labels, hints and errors (``Incorrect password. Try again.``, ``Password (8+ chars, 1 symbol)``),
#: which :func:`reads_as_sentence` counts with :data:`PROSE_WORDS` (a passphrase may hold them: that judge does not).
MESSAGE_WORDS = frozenset("""
incorrect invalid wrong try please forgot forgotten confirm symbol symbols digit digits letter letters number numbers
sign log match mismatch must contain least required enter
""".split())


def reads_as_sentence(value: str) -> bool:
    """Whether a quoted ``value`` is a sentence, as a UI string or a message is: three or more words, the first
    Capitalised, most of them :data:`PROSE_WORDS` or :data:`MESSAGE_WORDS` (``Enter your password``, ``Your session has
    expired. Please sign in again.``)."""
    words = value.split()
    prose = sum(w.strip(".,!?:;()…").lower() in PROSE_WORDS | MESSAGE_WORDS for w in words)
    return len(words) >= 3 and value[:1].isupper() and 2 * prose > len(words)


def _bare_userinfo(m: re.Match[str], redacted: str) -> str:
    """A :data:`secret_patterns.BARE_USERINFO` match with its password redacted when it reads as one, after a user
    that is not an address's label (``email:``, ``mailto:``); in a Go MySQL DSN (``root:…@tcp(host)``, ``@unix(``),
    whatever it reads as but a placeholder (``user:password@tcp(…)``, ``{{.Password}}``, ``%[2]s``, ``host:3306``)."""
    password = m.group("password")
    if m.string.startswith(("tcp(", "unix("), m.end()):  # not a placeholder, a template, a mask or a port
        secret = (len(password) >= 4 and not password.startswith(("$", "%", redacted[:-1])) and not password.isdigit()
                  and not patterns.PLACEHOLDER_VALUE.match(password)
                  and not re.fullmatch(r"(?i)(?:your[_-]?)?(?:password|passwd|pass|pwd|secret|port)|\**+redacted\**+|\*++|x++",
                                       password) and re.search("[\"'+]", password) is None)
    else:
        secret = m.group("user").lower() not in patterns.ADDRESS_LABELS and reads_as_password(password)
    return f"{m.group('user')}:{redacted}@" if secret else m.group()


def _slashed_userinfo(m: re.Match[str], redacted: str) -> str:
    """A :data:`secret_patterns.SLASHED_USERINFO` match with its password redacted when, its ``/`` aside, it reads as
    one and does not start with a port (``https://host:8443/api/Items2Get@x`` is a host, a port and a path)."""
    password = m.group("password")
    if password.partition("/")[0].isdigit() or not reads_as_password(password.replace("/", "")):
        return m.group()
    return m.string[m.start() : m.start("password")] + redacted + "@"


def _password_in(m: re.Match[str], redacted: str) -> str:
    """A :data:`CREDENTIAL_PAIR`, :data:`BOTH_FIELDS`, :data:`LOGIN_LINES` or :data:`USER_PASS_FLAGS` match with its ``value``
    redacted when it reads as a password (trailing punctuation of a sentence stays): after a verb and a bare ``/``
    (``改成了 src/MainApp2``) strongly; a network's when it has WPA's 8+ characters (``88888888`` too), not letters alone
    nor the network's other band (``Office-5G / Office-2.4G``)."""
    group = "value" if m.group("value") is not None else "jvalue"
    value = m.group(group).rstrip(patterns.VALUE_END)
    pair = m.re is CREDENTIAL_PAIR
    if pair and m.group("wifi"):
        secret = (len(value) >= 8 and not value.isalpha() and value[:4].lower() != m.group("ssid")[:4].lower()
                  and not value.startswith(redacted[:-1]))  # read without its ], [redacted] is no letters alone
    else:
        bare = pair and m.group("verb") and m.string[m.end("ssid") : m.start("value")] == "/"
        secret = reads_as_password(value) and (not bare or reads_strongly(value)) and (not pair or not m["bare"] or reads_as_key(value))
    return patterns.replace_group(m, group, redacted, _with_bangs(m.group(group), value)) if secret else m.group()


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
    verb = labels.LATIN_VERBS.search(m.string, m.end("label"), m.start("value")) is not None
    fewest = 4 if verb and m.group("label").lower() != "passphrase" else 3
    if (not fewest <= len(words) <= 8 or len(words) - len(letters) > 1 or (after.isalpha() and after < "\u0250")
            or not all(w.isalpha() for w in letters)
            or not (all(w.islower() for w in letters) or all(w.istitle() for w in letters))
            or any(w.lower() in PROSE_WORDS for w in words)):
        return m.group()
    return m.string[m.start() : m.start("value")] + redacted + m.string[end : m.end()]


def _host_login(m: re.Match[str]) -> int:
    """How much of a :data:`HOST_LOGIN` or :data:`URL_LOGIN` value is a password (0: none; the punctuation after it
    stays, a ``!`` goes: :func:`_with_bangs`), which it is when it reads strongly (:func:`reads_strongly`: not a command, a version,
    a status or a path), or reads as one with a digit when joined to its user by ``/`` (``10.0.0.3:3306 root/Kq7vLp2Wx99``,
    a login's pair) or after a password's label (``ssh admin@10.0.0.5 password …``), or, last in its clause after a web address, reads as a piece of a key (:func:`key_piece`:
    ``http://10.0.0.5:8080 admin Kq7vLp2Wx99``; not words and a number: ``see http://x.io and Python3``)."""
    value = m.group("value").rstrip(patterns.VALUE_END)
    if not reads_strongly(value) and reads_strongly(m.group("value")):
        return len(m.group("value"))  # its symbol is what it ends in (Kq7vLp2Wx9?): the password's
    if reads_strongly(value):
        secret = True
    elif m.re is HOST_LOGIN and m["label"] or m.string[m.start() : m.start("value")].rstrip(" \t").endswith("/"):
        secret = reads_as_password(value) and re.search(r"\d", value) is not None
    else:
        secret = m.re is URL_LOGIN and key_piece(value) and LIST_ITEM_END.match(m.string, m.start("value") + len(value)) is not None
    return _with_bangs(m.group("value"), value) if secret else 0


def _with_bangs(written: str, value: str) -> int:
    """How much of ``written`` (``value`` and the punctuation after it) is redacted: ``value``, and the ``!`` right after
    it when it reads as a password, whose last characters they are as often as a sentence's (as :mod:`redact` does)."""
    after = written[len(value) :]
    return len(value) + (len(after) - len(after.lstrip("!")) if reads_as_password(value) else 0)


def reads_as_key(value: str) -> bool:
    """Whether ``value`` reads strongly (:func:`reads_strongly`) or as a piece of a key of 8+ letters, digits, ``_`` and
    ``-`` (:func:`key_piece`: ``Kq7vLp2Wx99``; not ``v2.3.1-RC1``, ``Rule2024a``)."""
    return reads_strongly(value) or (re.fullmatch(r"[A-Za-z0-9_-]{8,}+", value) is not None and key_piece(value))


def _after_clause(m: re.Match[str], redacted: str) -> str:
    """A :data:`CLAUSE_LABEL` or :data:`PASS_COMMAND` match, its value redacted (and a ``!`` after it: :func:`_with_bangs`) when it reads
    strongly or, after a CJK clause, as a piece of a key (:func:`key_piece`, 8+ letters, digits, ``_`` and ``-``): the
    clause may say what the value is like (``密码生成规则：Rule2024a``, ``密码管理器的版本：v2.3.1-RC1``)."""
    group = "value" if m["value"] else "evalue"
    value = m[group].rstrip(patterns.VALUE_END)
    secret = reads_strongly(value) if m.re is CLAUSE_LABEL and m["en"] else reads_as_key(value)
    return patterns.replace_group(m, group, redacted, _with_bangs(m[group], value)) if secret else m.group()


def _struck(m: re.Match[str], redacted: str) -> str:
    """A :data:`STRUCK` match, its old and new values redacted where each reads as a password (and a ``!`` after it:
    :func:`_with_bangs`)."""
    old, value = m["old"].strip(), m["value"].rstrip(patterns.VALUE_END)
    pieces: list[str] = []
    done = m.start()
    for group, text in (("old", old), ("value", value)):
        if reads_as_password(text):
            start = m.start(group) + m[group].index(text)
            pieces += [m.string[done:start], redacted]
            done = start + _with_bangs(m.string[start : m.end(group)], text)
    return "".join(pieces) + m.string[done : m.end()] if pieces else m.group()


def _user_slash(m: re.Match[str]) -> bool:
    """Whether a :data:`USER_SLASH` value is a password: a :data:`SLASH_USER` before it, and the value reads strongly (after
    a user at a host, ``root@10.0.0.5 / …``, or one of :data:`LOGIN_NAMES`, ``admin / …``, as a piece of a key too) and names no file or ref (``api/v1Login``,
    ``src/main.py#L42``, ``myorg/Action2@v1``)."""
    value = m.group("value")
    if re.search(r"\.|@v\d", value) is not None or (user := SLASH_USER.search(m.string, max(m.start() - 40, 0), m.start())) is None:
        return False
    return reads_strongly(value) or (("@" in user.group() or user.group().strip() in LOGIN_NAMES) and reads_as_key(value))


#: The users a login is most often written with, before whose ``/`` a piece of a key is its password (``admin/Kq7vLp2WxR9t``).
LOGIN_NAMES = frozenset({"admin", "root", "administrator", "sa", "postgres", "ubuntu", "ec2-user", "test", "guest", "user"})


def _named_in_prose(m: re.Match[str], redacted: str) -> str:
    """A :data:`NAMED_IN_PROSE`, :data:`PASSWORD_WITH`, :data:`VALUE_BEFORE_LABEL`, :data:`LOGIN_IN_PROSE` or :data:`LOGIN_BEFORE_VERB` match, its value redacted (closing
    punctuation kept) when it reads as a password with a digit (``POSTGRES_PASSWORD is required`` stays), or, after
    ``with password``, with both cases and a symbol (``with password Tq!vRmXs``; ``with password authentication`` stays)."""
    value = m.group("value").rstrip(patterns.VALUE_END + "`”」")
    strong = (m.re is PASSWORD_WITH and any(map(str.islower, value)) and any(map(str.isupper, value))
              and not STRONG_SYMBOLS.isdisjoint(value))
    if not (reads_as_password(value) and (re.search(r"\d", value) or strong)) or (m.re is VALUE_BEFORE_LABEL and (m["en"] or m["key"]) and not reads_as_key(value)):
        return m.group()
    # ``log in with Keycloak and OAuth2.1``, ``connect with grpc and HTTP/2``, ``use src/Config2Dev``: after "and", "with" or
    # "use", a name reads as a product's, a protocol's or a path's unless it reads strongly or as a piece of a key.
    if m.re is LOGIN_IN_PROSE and not reads_as_key(value) and (
            m.group("use") or re.search(r"[ \t](?:and|with)[ \t]", m.string[m.start() : m.start("value")])):
        return m.group()
    return patterns.replace_group(m, "value", redacted, _with_bangs(m.group("value"), value))
