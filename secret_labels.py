"""The labels a credential is written after in prose, in the languages users write, and what joins a label to its value.

Pure data, compiled once at import, for :mod:`redact` (:data:`LABELLED`, :data:`LABELLED_DIGEST`, :data:`LABELLED_KEY`,
judged by ``redact._labelled`` and :mod:`random_tokens`) and the modules that read a label their own way
(:mod:`prose_secrets`, :mod:`table_secrets`, :mod:`folding`). The rules of :mod:`secret_patterns` hold here too: each
pattern starts only at the start of a run of its characters, no quantifier is nested in another over the same
characters, and quantifiers followed by a character their class excludes are possessive, so each pattern is linear in
the length of the text. The credential words are :mod:`secret_patterns`'; this module imports nothing else of the plugin.
"""

from __future__ import annotations

import re

from .secret_patterns import CREDENTIAL_PART

#: Credential labels in other scripts than Latin (longer ones first; Thai's, Arabic's, Hebrew's, Hindi's, Persian's,
#: Bengali's and Tamil's words for password last). Every label is a string :mod:`prefilter` looks for before :data:`LABELLED` is
#: run, and past 128 of them it looks for none (a test keeps the gate): words are added for the languages users write.
_SCRIPT_LABELS = ("密码短语|密碼短語|密码|密碼|口令|密钥|密鑰|秘钥|密匙|私钥|私鑰|秘密鍵|秘密|令牌|授权码|授權碼|安全码|安全碼|凭证|憑證|凭据|憑據"
                  "|账密|帳密|金鑰|金钥|權杖|权杖|パスワード|パスフレーズ|暗証番号|暗号鍵|認証キー|비밀 ?번호|패스워드|비번|암호|인증키|시크릿 ?키|비밀 ?키"
                  "|пароль|паролем|пароля|รหัสผ่าน|كلمة المرور|كلمة السر|كلمة مرور|סיסמה|סיסמא|पासवर्ड"
                  "|رمز عبور|گذرواژه|পাসওয়ার্ড|கடவுச்சொல்")
#: Credential labels of other languages written in Latin letters or Cyrillic (French, Spanish, Portuguese, German,
#: Dutch, Italian, Polish, Turkish, Vietnamese, Indonesian, Malay, Swedish, Norwegian, Danish, Finnish, Czech, Hungarian,
#: Catalan, Romanian, Turkish's and the Baltic ``parol``, Greek, Slovene, Croatian, Serbian, Lithuanian, Bulgarian, Belarusian,
#: Russian (``пасс`` too, not ``пассажир``), Japanese and Korean katakana/hangul words for
#: password, key and token: ``APIトークン``, ``シークレットキー``), after which ``:`` joins a value as a verb does: no
#: assignment names them.
_FOREIGN_LABELS = (r"mot de passe|contraseña|contrasena|senha|palavra-passe|passwort|kennwort|wachtwoord|hasło|haslo|şifre(?:m|niz|si)?"
                   r"|sifre(?:m|niz|si)?|κωδικ[οό]ς?(?: πρ[οό]σβασης)?|пасс(?![а-яё])"
                   r"|(?:paro{1,2}l(?:a d'ordine|[aeă])?|geslo|lozinka|šifra|sifra|slaptažodis|лозинка|парола|гасло)(?!\w)"
                   r"|mật khẩu|mat khau|kata sandi|kata laluan|l[öo]senord(?:et)?|passord(?:et)?|adgangskoden?|salasana|heslo|jelszó|jelszo|contrasenya|clé(?: d'api| api)?|cle api|jeton"
                   r"|clave(?: de api| api)?|chave(?: de api| api)?|schlüssel|api-schlüssel|sleutel|токен|ключ(?: api)?|api[ -]ключ"
                   r"|(?:api ?|アクセス|シークレット)?トークン|(?:アクセス|シークレット)キー|(?:クライアント|アプリ)?シークレット|토큰")
FOREIGN_LABEL = re.compile("(?i)" + _FOREIGN_LABELS)
#: The labels of :data:`_FOREIGN_LABELS` for a password (after which a value of letters and spaces can be a passphrase).
FOREIGN_PASSWORD_LABELS = {"mot de passe", "contraseña", "contrasena", "senha", "palavra-passe", "passwort", "kennwort",
                           "wachtwoord", "hasło", "haslo", "şifre", "sifre", "parola d'ordine", "mật khẩu", "mat khau",
                           "kata sandi", "kata laluan", "lösenord", "losenord", "passord", "adgangskode", "lösenordet",
                           "losenordet", "passordet", "adgangskoden", "salasana", "heslo", "jelszó",
                           "jelszo", "contrasenya", "şifrem", "sifrem", "şifreniz", "sifreniz", "şifresi", "sifresi",
                           "parolă", "parola", "parole", "parool", "parol", "geslo", "lozinka", "šifra", "sifra", "slaptažodis",
                           "лозинка", "парола", "гасло", "пасс",
                           *(f"κωδικ{o}{s}{p}" for o in "οό" for s in ("", "ς") for p in ("", " πρόσβασης", " προσβασης"))}
#: The labels of :data:`_SCRIPT_LABELS` for a password, in Chinese, Japanese and Korean (a key's or a token's, 密钥 令牌,
#: may name a colour: a theme's).
CJK_PASSWORD_LABELS = frozenset(("密码", "密碼", "口令", "パスワード", "暗証番号", "비밀번호", "암호"))
#: A credential word in a label set off by marks (:data:`folding.MARKED_LABEL`).
MARKED_CREDENTIAL = re.compile(r"(?i)" + CREDENTIAL_PART.pattern + "|" + _SCRIPT_LABELS + "|キー|키|(?<![A-Za-z])sk(?![A-Za-z])")
#: What joins a CJK or Japanese label to its value: a verb (``是``, ``为``, ``设置成``, ``は``...), after an adverb too (``也是``,
#: ``默认是``, ``都是``), ``还是原来那个`` (``没变，还是``), ``都一样``, ``改成``/``重置为``/``换成`` (``已``, ``了``), a change alone
#: before an arrow or a colon (``已更新：``, ``已生成：``, ``変更しました →``), a change then the value's verb (``我刚改了，是``, ``改了，新的是``), ``设置的是``, ``我设的``, ``用(的)``, ``用这个``, ``如下``, ``分别是``, ``依次是``, ``发你``, ``我贴一下``, ``在这``,
#: Korean's object marker (``비밀번호를 … 로 바꿨어요``).
_CJK_JOINS = (r"(?:[也就还還都又仍均]|应该|應該|默认|默認|一律|统一|統一|现在|現在|当前|當前|初始|依然|仍然|分别|分別|依次)?(?:是|为|為)"
              r"|(?:(?:没变|没改|沒變|沒改)[，,]?[ \t]*+)?(?:还是|還是|仍是|还用|還用)(?:原来|原來|之前|以前|上次)?(?:的|那个|那個)?"
              r"|(?:都|也|全都)(?:一样|一樣)[，,]?"
              r"|(?:已经?|已經)?[被又]?(?:重新)?(?:设置|設置|设|設|改|修改|重置|更新|换|換)(?:成|为|為)了?|(?:设置|設置|配置|设|設)的(?:是|为|為)?|は|が|を|는|은|를|을|가|이|我|用(?:的|这个|這個)?|如下"
              r"|的?值(?:是|为|為)|我?(?:发|發|贴|貼)(?:给|給)?(?:你|一下|下|这|這)?了?|给你|給你|我?(?:记得|記得)|放?在(?:这|這|此)(?:里|裡|儿|兒)?了?"
              r"|(?:刚刚?|剛剛?|刚才|剛才)?(?:已经?|已經)?(?:改|换|換|更新|重置)了?[，,][ \t]*+(?:新的?|现在的?|現在的?)?(?:是|为|為)"
              r"|(?:已经?|已經)?(?:变更|變更|更新|重置|修改|生成|创建|創建|分配)(?:好|完)?了?|を?(?:変更|更新|リセット|再設定)(?:しました|した|済み?)?")
#: A word of a relative clause between a label and its verb (``the password you need is``, ``the password that works
#: is``, ``the password we use on staging is``): not the verb itself.
_CLAUSE_WORD = r"[ \t]++(?!(?:is|was)(?![\w'’-]))[\w'’-]{1,20}+"
#: The verbs that join a Latin label to its value (``password is``, ``das Passwort lautet``, ``le mot de passe c'est``,
#: ``parola este``, ``κωδικός είναι``, ``lösenordet är``, ``passordet er``, ``kata sandi adalah``).
_VERBS = r"is|was|ist|war|lautet|est|c'est|c’est|es|era|é|è|là|este|είναι|är|er|adalah"
#: A password or key written after a label in prose, in the languages users write (``密码是hGzPp1nM``, ``APIキーは…``,
#: ``пароль: …``, ``the api key is …``, ``mot de passe est …``): the label, what joins it to the value (``是``, ``设置成``,
#: ``は``, ``is``, ``is still``..., a pointing, key or lock emoji: ``密码 👉 …``, ``密码🔑：…``, ``密码……``), and a quoted string (``《…》``
#: too), HTML's ``<code>…</code>`` (``<kbd>``, ``<samp>``; a word without spaces in ``<b>``,
#: ``<strong>``, ``<em>``, ``<mark>`` or ``<span>``: ``Your password is <b>…</b>``, not ``<b>at least 8 characters</b>``; group ``coded``) or a run of printable ASCII and Latin, Greek or Cyrillic letters (``Café2024!``; it ends where the text goes back to
#: its own script; on the line after a code fence's too: ``The password is:`` then the value in a fenced block), each to its
#: real end however long (a bound would send the rest: ``密码：`` and 230 characters), after what the
#: value is for, if said, in up to three words (``password for the db:``, ``for noreply@corp.com is``, ``the password for the staging box is …``, ``Passwort für die DB:``, ``contraseña del wifi:``, ``senha do wifi:``, what not to do with it: ``password do not share:``, ``пароль от базы:``, an aside before a colon:
#: ``token (staging):``, ``密码（测试环境）：``, ``passphrase (empty for no passphrase):``, a prompt's default in brackets: ``Password []:``,
#: ``AWS Secret Access Key [None]:``, a clause's ``password, new one is``) or an adjective written after the label (``contraseña nueva es``, ``mật khẩu mới là``,
#: ``mật khẩu wifi:``, ``passphrase again:``), joined by the verbs of the languages (``das Passwort lautet``, ``le mot de passe c'est``). Longer labels come
#: first (``secret key`` and ``secret access key`` before ``secret``); a ``max token`` is a count. What a Latin label needs is
#: :func:`redact._labelled`'s.
LABELLED = re.compile(
    r"(?i)((?:" + _SCRIPT_LABELS + r")|(?<![A-Za-z0-9_])(?:APIキー|API ?키"
    r"|password|pasword|passwrod|passowrd|passwd|passphrase|pass phrase|passcode|pwd|pw|p/w|sk|" + _FOREIGN_LABELS +
    r"|(?:api|access|secret|private|wpa[23]?)[ _-]?key|(?:wpa[23]?[ _-]?)?psk|secret(?:[ _-]access[ _-]key)?|(?<!max )(?<!min )token))"
    r"((?P<purpose>[ \t]++(?:for|of|on|in|at|to|für|von|zur|zum|pour|de|du|des|del|della|do|da|dos|das|para|per|voor|dla|от|для|к)[ \t]++"
    r"(?:(?:the|my|our|your|this|die|der|das|den|dem|le|la|les|el|los|las|o|a|il|lo|de)[ \t]++)?(?:[\w.@-]{1,64}+|'[^'\n]{1,100}+'|\"[^\"\n]{1,100}+\")"
    r"(?:[ \t]++(?!(?:is|was|are|be|to|should|will|must|now|ist|war|lautet|est|es|era)(?![\w.-]))(?:[\w-]{1,30}+|'[^'\n]{1,100}+'|\"[^\"\n]{1,100}+\")){0,2}(?=[\s:：=\"”(（])"
    r"|[ \t]++(?:that|you|we|i|they)" + _CLAUSE_WORD + r"(?:" + _CLAUSE_WORD + r")?(?:" + _CLAUSE_WORD + r")?"
    r"(?=[ \t]++(?:is|was)(?![\w'’-])|[ \t]*+[:：])"
    r"|[ \t]*+(?:[(（][^()（）\n:=,，]{1,40}+[)）]|\[[^\[\]\n:=]{0,40}+\])(?=[ \t]*+[:：])|[,，][ \t]*+(?:the[ \t]++)?new[ \t]++one(?=[ \t]++(?:is|was)[ \t]|[ \t]*+:)"
    r"|[ \t]++(?:nueva|nuevo|nova|novo|nuova|nuovo|mới|actual|wifi|again)(?![\w-])"
    r"|[，,][ \t]*+[^\s，,。的]{1,20}+[ \t]*+的(?=[是为為]))?"
    r"[\"”】\]]?\s*+(?:(?:" + _CJK_JOINS + r"|:|：|=>|->|=|→|⇒|(?:(?:should|will|must|would|can)(?: now)? be|now(?: set to)?|(?:(?:has|have) been )?(?:changed|set|reset|updated) to|to"
    r"|" + _VERBS + r"|['’]s|still|currently)(?!\w)|—|-|…{1,2}+|\.{3,}+|(?:\.[ \t]){3,}+|[👉👇➡➜➔⬇🔑🔐🔒🗝]\ufe0f?)\s*+){0,2}"
    r"(?:```[\w+-]{0,20}+[ \t]*+\r?\n[ \t]*+)?)"
    r"(?:([\"'“「『【《`])((?:[^\"'“”「」『』【】《》`\\\n]|\\[^\n])++)[\"'”」』】》`]|[(（\[][ \t]?+(?P<paren>[^()（）\[\]\s]{4,}+)[ \t]?+[)）\]]|(?!<(?:code|kbd|samp|b|strong|em|mark|span)>)([!-~\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff]{4,}+)"
    r"|<(?P<tag>code|kbd|samp|(?:b|strong|em|mark|span)(?=>[^<>\s]++</))>(?P<coded>[^<>\n]++)</(?P=tag)>)"
)
#: The verbs a Latin label needs before its value (``password is``, ``password's``, ``Passwort ist``, ``mot de passe est``).
LATIN_VERBS = re.compile(r"(?:\b(?:be|now|to|" + _VERBS + r")|['’]s)(?!\w)")
#: What joins a label to the value right after it (``token: x``, ``"key": "x"``, ``key是x``, ``key是：x``,
#: ``key的值是x``, ``key 设成了 x``, ``token => x``, ``token `x` ``): what it is for (``API key for prod:``, ``token（新）：``), quotes
#: and backticks, up to two signs, arrows or CJK joiners, spaces and one line break.
_LABEL_JOIN = (r"(?:[ \t]++(?:for|of|in|on)[ \t]++[A-Za-z0-9_.-]{1,30}+|[ \t]*+[(（][^()（）\n]{1,20}+[)）])?"
               r"[\"'`]?[ \t]*+(?:\r?\n[ \t]*+)?(?:(?:就是|的?值[是为為]|(?:设|設|改|换|換)成了?|=>|->|[:=：是为為は—-])[ \t]*+(?:\r?\n[ \t]*+)?){0,2}[\"'`]?")
#: A git-id-shaped value (40 or 64 hex digits, a UUID) right after a credential label (``GITHUB_TOKEN 3f78…``,
#: ``heroku api key 0c4f8e2a-…``, a service account's ``private_key_id``, Rails' ``secret_key_base:``): old GitHub tokens and Heroku keys have those
#: shapes, Consul's and Nomad's ACL tokens a UUID (``SecretID:``, ``Secret ID =``; an ``AccessorID`` names one). Bare ones
#: are git ids and are kept. Group 1 is the label and what joins it, group 2 the value.
LABELLED_DIGEST = re.compile(
    r"(?i)(?<![A-Za-z0-9_])((?:[A-Za-z0-9]++[ _-])?"
    r"(?:token|secret(?:[ _-]?id)?|passw(?:or)?d|(?:api|access|secret|private|auth)[ _-]?key(?:_base)?|private[ _-]?key[ _-]?id)"
    + _LABEL_JOIN + r")([0-9a-f]{64}|[0-9a-f]{40}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?![A-Za-z0-9_-])"
)
#: A key-shaped value (12+ letters, digits, ``_`` and ``-``) right after a key, token or secret label, or a name ending
#: in token, secret or a credential's ``<qualifier> key``, without a verb (``vercel token AbCdEf…12``, ``GITHUB_TOKEN
#: AbCdEf…12``, ``ACCESS_KEY AbCd…``, ``key是Zx9qLm2N…``): redacted when it reads as random
#: (:func:`random_tokens.random_after_label`), so ``primary key idx_users_email`` stays. ``sort_key``, ``partition_key``...
#: are columns, not labels. Groups: ``head`` (the label and what joins it), ``label``, ``join``, ``value``.
LABELLED_KEY = re.compile(
    r"(?i)(?<![A-Za-z0-9_])(?P<head>(?P<label>(?:[A-Za-z0-9]++[_-])?(?:token|secret|(?:api|access|secret|private|signing"
    r"|encryption|master)[ _-]?key(?:[ _-]?id)?)|key|キー)(?P<join>" + _LABEL_JOIN + r"))(?P<value>[A-Za-z0-9_-]{12,200}+)(?![A-Za-z0-9_-])"
)
#: Labels as often followed by what a credential is as by its value (``授权码是 authorization_code 模式``, ``安全码是 TOTP
#: 生成的``, ``凭证用 ~/.aws/credentials``): :func:`redact._labelled` takes only a value that plainly reads as a
#: password after them (or a mail server's 授权码, 16 lower-case letters).
NAMING_LABELS = {"授权码", "授權碼", "安全码", "安全碼", "凭证", "憑證", "凭据", "憑據", "账密", "帳密"}
#: A joiner after which a label's value is taken as :func:`redact._labelled` always took it (``是``, ``:``, ``is``,
#: ``设置成``...); after the others (``也是``, ``默认是``, ``换成``, ``用``, ``如下``, ``→``, ``should be``, ``is now``, ``to``,
#: ``'s``) the value must plainly read as a password: they as often precede what the credential is (``密码也是 bcrypt 哈希的``,
#: ``Set max token to 4096``, ``a token's ``exp`` claim``).
PLAIN_JOIN = re.compile(r"(?i)是|为|為|は|が|を|는|은|가|이|我|:|：|=>|->|=|设置成|设置为|設置成|設置為|改成了|改为了|改为|改成|改為"
                        r"|设为|設為|—|-|를|을|\b(?:" + _VERBS + r")\b")
