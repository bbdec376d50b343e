"""Secrets people write as prose rather than in a format: ``user:password@host`` without ``//``, PINs and codes
after a label, passphrases of words, labels in other languages, keys wrapped by a logger (:mod:`prose_secrets` and the
patterns beside it). Every shape of :data:`SENT_BEFORE` reached a remote embedder before; :data:`NEAR_MISSES` is the
ordinary text those shapes resemble, which must be sent unchanged."""

from __future__ import annotations

import unicodedata

import pytest

#: (text as written, the secret in it): no piece of the secret as long as 8 characters, or as the secret if shorter,
#: may be sent.
SENT_BEFORE = [
    # a key wrapped by a logger: the next line starts with a timestamp, a bracketed field, a container's name
    ('[12:00:01] using key sk-proj-T3BlbkFJ4x9Qm2Lw7\n[12:00:01] Vn5Rk8Pz1Yc6Hd0aB', 'Vn5Rk8Pz1Yc6Hd0aB'),
    ('2024-03-11 12:00:01,123 INFO token ghp_Z8x7C6v5B4n3M2a1S9\n2024-03-11 12:00:01,124 INFO d8F7g6H5j4K3l2P1o0',
     'd8F7g6H5j4K3l2P1o0'),
    ('12:00:01 key sk-proj-T3BlbkFJ4x9Qm2Lw7\n12:00:01 Vn5Rk8Pz1Yc6Hd0aB', 'Vn5Rk8Pz1Yc6Hd0aB'),
    ('2024-03-11T12:00:01.123Z key sk-proj-T3BlbkFJ4x9Qm2Lw7\n2024-03-11T12:00:01.124Z Vn5Rk8Pz1Yc6Hd0aB', 'Vn5Rk8Pz1Yc6Hd0aB'),
    ('[2024-03-11 12:00:01] [INFO] key sk-proj-T3BlbkFJ4x9Qm2Lw7\n[2024-03-11 12:00:01] [INFO] Vn5Rk8Pz1Yc6Hd0aB',
     'Vn5Rk8Pz1Yc6Hd0aB'),
    ('app-1  | using key sk-proj-T3BlbkFJ4x9Qm2Lw7\napp-1  | Vn5Rk8Pz1Yc6Hd0aB', 'Vn5Rk8Pz1Yc6Hd0aB'),
    ('[12:00:01] token ghp_Z8x7C6v5B4n3\n[12:00:01] M2a1S9d8F7g6H5j4K3l2P1o0', 'M2a1S9d8F7g6H5j4K3l2P1o0'),
    # user:password@host without //
    ('psql -h db admin:Sup3r$ecret9@db.internal', 'Sup3r$ecret9'), ('bob:Sup3rS3cretPw@github.com', 'Sup3rS3cretPw'),
    ('connect with app:p@ss:W0rd!@10.0.0.5', 'ss:W0rd!'), ('me: can you ssh in? root:Tr0ub4dor&3@10.0.0.12', 'Tr0ub4dor&3'),
    ('DB_URL=admin:Sup3r$ecret9@db.internal:5432/app', 'Sup3r$ecret9'),
    ('"connection": "admin:Sup3r$ecret9@db:5432"', 'Sup3r$ecret9'),
    ('rsync -e ssh backup:Hx8!kq2Lm@nas.local::share /mnt', 'Hx8!kq2Lm'),
    ('连接 admin:Sup3r$ecret9@db.internal 就行', 'Sup3r$ecret9'), ('redis-cli -u default:Hx8!kq2Lm@cache:6379', 'Hx8!kq2Lm'),
    ('postgres://u:ab/cd12345XYZ@h/db', 'ab/cd12345XYZ'), ('mongodb://admin:Pa/ss!w0rd@db:27017', 'Pa/ss!w0rd'),
    # PINs, one-time and recovery codes after a label, in prose, .env, YAML and JSON
    ('PIN: 4821', '4821'), ('pin is 482193', '482193'), ('PIN码：4821', '4821'), ('passcode 9921', '9921'),
    ('OTP: 482913', '482913'), ('recovery code: 4f8a-99c2-1b3e-77d0', '4f8a-99c2'), ('PIN=84736251', '84736251'),
    ("my pin is 4821, don't tell", '4821'), ('verification code 553201', '553201'), ('验证码：553201', '553201'),
    ('2FA backup codes: 8f3k-2m9x, 7q1w-4e6r', '8f3k-2m9x'), ('alice> pin for the door is 7391', '7391'),
    ('alice> the door pin is 7391', '7391'), ('OTP 482913 (valid 5 min)', '482913'),
    ('Your verification code is 553201.', '553201'), ('您的验证码为553201，5分钟内有效', '553201'), ('認証コード: 553201', '553201'),
    ('인증번호 [553201]을 입력하세요', '553201'), ('код подтверждения: 553201', '553201'), ('2FA: 482913', '482913'),
    ('The door code is 4821#', '4821'), ('ADMIN_PIN=4821', '4821'), ('SIM_PIN: 0000', '0000'),
    ('BACKUP_CODES=4f8a-99c2,1b3e-77d0', '1b3e-77d0'), ("  pin: '4821'", '4821'),
    ('recovery_codes:\n  - 4f8a-99c2\n  - 1b3e-77d0', '1b3e-77d0'),
    ('mfa:\n  backup_codes: [12345678, 23456789]', '23456789'), ('{"pin": "4821"}', '4821'), ('{"otp": 482913}', '482913'),
    ('{"body": "{\\"pin\\": \\"4821\\"}"}', '4821'), ('我的银行卡PIN码是482193，别告诉别人', '482193'), ('取件码：8841，记得去拿', '8841'),
    ('Recovery key: 1234-5678-9012-3456', '5678-9012'),
    ('BitLocker recovery key: 123456-234567-345678-456789-567890-678901-789012-890123', '345678-456789'),
    # passphrases of words and spaces after a password label
    ('password: correct horse battery staple', 'horse battery'), ('密码是 correct horse battery staple', 'horse battery'),
    ('my password is correct horse battery staple.', 'horse battery'),
    ('SMTP_PASSWORD=correct horse battery staple', 'horse battery'),
    ('  passphrase: correct horse battery staple', 'horse battery'),
    ('wifi密码：correct horse battery staple', 'horse battery'), ('密码是correct horse battery staple，别外传', 'horse battery'),
    ('비밀번호는 correct horse battery staple입니다', 'horse battery'), ('パスワードは correct horse battery staple です', 'horse battery'),
    (unicodedata.normalize("NFD", 'mật khẩu: correct horse battery staple'), 'horse battery'),
    ('ｐａｓｓｗｏｒｄ： correct horse battery staple', 'horse battery'), ('app password: abcd efgh ijkl mnop', 'efgh ijkl'),
    ('the passphrase is purple monkey dishwasher', 'monkey dishwasher'),
    ('Passwort: grüne katze tanzt leise', 'katze tanzt'),
    ('la contraseña es caballo correcto bateria grapa', 'correcto bateria'),
    # labels of other languages, with a colon or a verb
    ('mot de passe : Sup3rS3cretPw', 'Sup3rS3cretPw'), ('Passwort: Sup3rS3cretPw', 'Sup3rS3cretPw'),
    ('senha: Sup3rS3cretPw', 'Sup3rS3cretPw'), ('wachtwoord: Sup3rS3cretPw', 'Sup3rS3cretPw'),
    ('mật khẩu: Sup3rS3cretPw', 'Sup3rS3cretPw'), ('mật khẩu là Sup3rS3cretPw', 'Sup3rS3cretPw'),
    ('a senha é Sup3rS3cretPw', 'Sup3rS3cretPw'), ('het wachtwoord is Sup3rS3cretPw', 'Sup3rS3cretPw'),
    ('la password è Sup3rS3cretPw', 'Sup3rS3cretPw'), ('hasło: Sup3rS3cretPw', 'Sup3rS3cretPw'),
    ('şifre: Sup3rS3cretPw', 'Sup3rS3cretPw'), ('clave: Sup3rS3cretPw', 'Sup3rS3cretPw'),
    ('la clé API est Zx9qLm2Nw8Pv3Rt5', 'Zx9qLm2Nw8Pv3Rt5'), ('jeton : Zx9qLm2Nw8Pv3Rt5', 'Zx9qLm2Nw8Pv3Rt5'),
    ('токен: Zx9qLm2Nw8Pv3Rt5', 'Zx9qLm2Nw8Pv3Rt5'), ('ключ API: Zx9qLm2Nw8Pv3Rt5', 'Zx9qLm2Nw8Pv3Rt5'),
    ('トークン：Zx9qLm2Nw8Pv3Rt5', 'Zx9qLm2Nw8Pv3Rt5'), ('토큰: Zx9qLm2Nw8Pv3Rt5', 'Zx9qLm2Nw8Pv3Rt5'),
    ('chave de API: Zx9qLm2Nw8Pv3Rt5', 'Zx9qLm2Nw8Pv3Rt5'), ('Schlüssel: Zx9qLm2Nw8Pv3Rt5', 'Zx9qLm2Nw8Pv3Rt5'),
    # a login as a pair, as command flags, after pw
    ('ssh root@10.0.0.5 (pw: Tr0ub4dor&3)', 'Tr0ub4dor&3'), ('creds: admin / Sup3r$ecret9', 'Sup3r$ecret9'),
    ('DB_PW=Sup3r$ecret9', 'Sup3r$ecret9'), ("mongo --host db -u admin -p 'Sup3r$ecret9'", 'Sup3r$ecret9'),
    ('smbclient //nas/share -U bob%Sup3rS3cretPw', 'Sup3rS3cretPw'),
    ('lftp -u bob,Sup3rS3cretPw ftp.example.com', 'Sup3rS3cretPw'),
    # a YAML parent key above its child, values with a dot, Vault and Discord tokens
    ('auth:\n  password: Vx7#qLm2!pRt', 'Vx7#qLm2!pRt'), ('token:\n  secret: Kq83mZpwLx72Tn', 'Kq83mZpwLx72Tn'),
    ('postgresql:\n  auth:\n    postgresPassword: Kq83mZpwLx72Tn', 'Kq83mZpwLx72Tn'),
    ('DB_PASSWORD="Summer.2024!"', 'Summer.2024'), ('DB_PASSWORD=Summer.2024!', 'Summer.2024'),
    ("password = 'Tr0ub4dor.&3'", 'Tr0ub4dor.&3'), ('{"password": "Winter.Is.Coming7"}', 'Winter.Is.Coming7'),
    ('export VAULT_TOKEN=hvs.CAESIJx9qLm2NpR7tY4vB8kW3', 'CAESIJx9qLm2NpR7tY4vB8kW3'),
    ('X-Vault-Token: hvs.CAESIJx9qLm2NpR7tY4vB8kW3', 'CAESIJx9qLm2NpR7tY4vB8kW3'),
    ('DISCORD_TOKEN=MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs', 'ZnCjm1XVW7vRze4b7Cq4se7kKWs'),
    ('client.login("MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs")', 'MTk4NjIyNDgzNDcxOTI1MjQ4'),
    # SQL, a label and what it is for, arrows, markup and manifests, connection strings, command lines
    ("CREATE USER 'app'@'%' IDENTIFIED BY 'Vx7#qLm2!pRt';", 'Vx7#qLm2!pRt'),
    ("ALTER USER postgres WITH PASSWORD 'Kq83mZpwLx72Tn';", 'Kq83mZpwLx72Tn'),
    ("CREATE ROLE app LOGIN PASSWORD 'Vx7#qLm2!pRt';", 'Vx7#qLm2!pRt'),
    *[(f'{label} Vx7#qLm2!pRt', 'Vx7#qLm2!pRt') for label in (
        'password for the db:', 'Password for staging:', 'Passwort für die DB:', 'пароль от базы:', 'password =>',
        'password ->', 'password -', 'pw is')],
    ('<server><id>nexus</id><username>deploy</username><password>Vx7#qLm2!pRt</password></server>', 'Vx7#qLm2!pRt'),
    ('<add key="DbPassword" value="Kq83mZpwLx72Tn" />', 'Kq83mZpwLx72Tn'),
    ('<property name="db.password" value="Kq83mZpwLx72Tn"/>', 'Kq83mZpwLx72Tn'),
    ('env:\n- name: DATABASE_PASSWORD\n  value: Vx7#qLm2!pRt', 'Vx7#qLm2!pRt'),
    ('Server=db;Database=app;Uid=sa;Pwd=Vx7#qLm2!pRt;', 'Vx7#qLm2!pRt'), ('{"pwd": "Vx7#qLm2!pRt"}', 'Vx7#qLm2!pRt'),
    ('sqlplus scott/Kq83mZpwLx72Tn@//db:1521/ORCL', 'Kq83mZpwLx72Tn'), ('CONNECT system/Vx7#qLm2!pRt@XE', 'Vx7#qLm2!pRt'),
    ('keytool -list -keystore ks.jks -storepass Kq83mZpwLx72Tn', 'Kq83mZpwLx72Tn'),
    ('keytool -genkeypair -alias a -keypass Kq83mZpwLx72Tn', 'Kq83mZpwLx72Tn'),
    ('ssh-keygen -t ed25519 -N "Vx7#qLm2!pRt" -f key', 'Vx7#qLm2!pRt'),
    # CJK joiners and labels, invisible characters
    ('数据库密码我改成了Kq83mZpwLx72Tn', 'Kq83mZpwLx72Tn'), ('パスワードをKq83mZpwLx72Tnに変更しました', 'Kq83mZpwLx72Tn'),
    ('秘密鍵: Zx9qLm2NpR7tY4vB8kW3', 'Zx9qLm2NpR7tY4vB8kW3'), ('비번: Vx7#qLm2!pRt', 'Vx7#qLm2!pRt'),
    ('비번은 Kq83mZpwLx72Tn 이야', 'Kq83mZpwLx72Tn'), ('sk-proj-T3Blbk\ufe0fFJ4x9Qm2Lw7Vn5Rk8Pz1', 'FJ4x9Qm2Lw7Vn5Rk8Pz1'),
    *[(f'pass{filler}word=Kq83mZpwLx72Tn', 'Kq83mZpwLx72Tn') for filler in '\u115f\u1160\u3164\uffa0\ufe0e'],
    # a passphrase after the joiners a labelled value takes; Oracle's tools logging in without a database
    ('密码改成了 correct horse battery staple', 'horse battery'), ('パスワードを correct horse battery staple に変更', 'horse battery'),
    ('password => correct horse battery staple', 'horse battery'), ('sqlplus scott/Xk9mQ2vLp7', 'Xk9mQ2vLp7'),
    ('sqlplus -s scott/Xk9mQ2vLp7 as sysdba', 'Xk9mQ2vLp7'),
    # the files clients read passwords from, call arguments, and commands that take one as their last word
    ('machine api.github.com login bob password Sup3rS3cretPw', 'Sup3rS3cretPw'),
    ('machine api.github.com\n  login bob\n  password Sup3rS3cretPw\n', 'Sup3rS3cretPw'),
    ('db.example.com:5432:shop:bob:Sup3rS3cretPw', 'Sup3rS3cretPw'), ('cat ~/.pgpass\nlocalhost:*:*:postgres:Sup3rS3cretPw\n', 'Sup3rS3cretPw'),
    ('network={\n  ssid="HomeNet"\n  psk="Sup3rS3cretPw"\n}', 'Sup3rS3cretPw'), ('wpa_passphrase "Home Net" Sup3rS3cretPw', 'Sup3rS3cretPw'),
    ('nmcli dev wifi connect HomeNet password Sup3rS3cretPw', 'Sup3rS3cretPw'),
    ('nmcli con modify home wifi-sec.psk Sup3rS3cretPw', 'Sup3rS3cretPw'),
    ('htpasswd -b /etc/nginx/.htpasswd bob Sup3rS3cretPw', 'Sup3rS3cretPw'), ("htpasswd -nbB bob 'Sup3rS3cretPw'", 'Sup3rS3cretPw'),
    ('127.0.0.1:6379> AUTH Sup3rS3cretPw\nOK', 'Sup3rS3cretPw'), ('AUTH default Sup3rS3cretPw', 'Sup3rS3cretPw'),
    ("requests.get(url, auth=HTTPBasicAuth('bob', 'Sup3rS3cretPw'))", 'Sup3rS3cretPw'),
    ('requests.get(url, auth=("bob", "Sup3rS3cretPw"))', 'Sup3rS3cretPw'),
    ('DB_PASSWORD = os.getenv("DB_PASSWORD", "Sup3rS3cretPw")', 'Sup3rS3cretPw'),
    ("token = os.environ.get('API_TOKEN', 'Zx9qLm2Nw8Pv3Rt5')", 'Zx9qLm2Nw8Pv3Rt5'),
    ('ENV.fetch("API_SECRET", "Sup3rS3cretPw")', 'Sup3rS3cretPw'),
    ("es = Elasticsearch(hosts, basic_auth=('elastic', 'Sup3rS3cretPw'))", 'Sup3rS3cretPw'),
    ("auth = HTTPBasicAuth(\n    USER,\n    'Sup3rS3cretPw',\n)", 'Sup3rS3cretPw'),
    ('os.getenv("DB_PASSWORD", default="Sup3rS3cretPw")', 'Sup3rS3cretPw'), ('config("DB_PASSWORD", default="Sup3rS3cretPw")', 'Sup3rS3cretPw'),
    ('htpasswd -nbB admin Sup3rS3cretPw > .htpasswd', 'Sup3rS3cretPw'), ('htpasswd -bBC 10 .htpasswd bob Sup3rS3cretPw', 'Sup3rS3cretPw'),
    ("echo 'localhost:5432:db:bob:Sup3rS3cretPw' >> ~/.pgpass", 'Sup3rS3cretPw'), ('default login anonymous password Sup3rS3cretPw', 'Sup3rS3cretPw'),
    ('AUTH Sup3rS3cretPw   # from vault', 'Sup3rS3cretPw'), ('nmcli con modify home wifi-sec.psk "my wifi Sup3rS3cretPw"', 'Sup3rS3cretPw'),
    ('# redis.conf\nrequirepass Sup3rS3cretPw\nmasterauth Sup3rS3cretPw\n', 'Sup3rS3cretPw'),
    ("127.0.0.1:6379> CONFIG SET requirepass 'Sup3rS3cretPw'", 'Sup3rS3cretPw'),
    ('ACL SETUSER alice on resetpass >Sup3rS3cretPw ~cached:* +get', 'Sup3rS3cretPw'),
    ("const pw = process.env.DB_PASSWORD || 'Sup3rS3cretPw';", 'Sup3rS3cretPw'),
    ('const pw = process.env.DB_PASSWORD ?? "Sup3rS3cretPw";', 'Sup3rS3cretPw'), ("ENV['DB_PASSWORD'] || 'Sup3rS3cretPw'", 'Sup3rS3cretPw'),
    ('os.environ.get("DB_PASSWORD") or "Sup3rS3cretPw"', 'Sup3rS3cretPw'), ("getenv('DB_PASSWORD') ?: 'Sup3rS3cretPw'", 'Sup3rS3cretPw'),
    ("ENV.fetch('DB_PASSWORD') { 'Sup3rS3cretPw' }", 'Sup3rS3cretPw'), ('os.environ.setdefault("DB_PASSWORD", "Sup3rS3cretPw")', 'Sup3rS3cretPw'),
    ('nmcli con mod eap 802-1x.password Sup3rS3cretPw', 'Sup3rS3cretPw'), ('127.0.0.1:6379> auth Sup3rS3cretPw\nOK', 'Sup3rS3cretPw'),
    ('redis-cluster:7000(master)> AUTH Sup3rS3cretPw', 'Sup3rS3cretPw'), ('%any : PSK "Sup3rS3cretPw"', 'Sup3rS3cretPw'),
    ('command: redis-server --requirepass Sup3rS3cretPw', 'Sup3rS3cretPw'), ('    wpa-psk Sup3rS3cretPw', 'Sup3rS3cretPw'),
    ('%any %any : PSK 0sUzNjcjN0IXg5aGVsbG8=', 'UzNjcjN0IXg5aGVsbG8'),
    # defaults of environment variables in other languages, basic auth written otherwise, redis and files' other shapes
    *[(text.replace('PW', 'Sup3rS3cretPw'), 'Sup3rS3cretPw') for text in (
        "process.env.DB_PASSWORD || `PW`", "process.env['DB_PASSWORD'] || 'PW'", "import.meta.env.VITE_API_KEY || 'PW'",
        'Deno.env.get("DB_PASSWORD") ?? "PW"', "Bun.env.DB_PASSWORD || 'PW'", "process.env.DB_PASSWORD?.trim() || 'PW'",
        'os.environ.get("DB_PASSWORD") or f"PW"', 'os.getenv(key="DB_PASSWORD", default="PW")', 'settings.get("DB_PASSWORD", "PW")',
        'os.environ["DB_PASSWORD"] if "DB_PASSWORD" in os.environ else "PW"', "env('DB_PASSWORD') ?: 'PW'",
        'ENV.fetch("DB_PASSWORD") { |_k| "PW" }', 'ENV.fetch("DB_PASSWORD") do "PW" end', 'cmp.Or(os.Getenv("DB_PASSWORD"), "PW")',
        'viper.SetDefault("db.password", "PW")', 'getEnvOrDefault("DB_PASSWORD", "PW")', 'System.getenv("DB_PASSWORD") ?: "PW"',
        'System.getenv().getOrDefault("DB_PASSWORD", "PW")', 'Environment.GetEnvironmentVariable("DB_PASSWORD") ?? "PW"',
        'let db = env::var("DB_PASSWORD").unwrap_or("PW".to_string());', 'req.SetBasicAuth("bob", "PW")',
        'req.basic_auth("bob", Some("PW"))', "basic_auth 'bob', 'PW'", "request.auth('bob', 'PW')", 'auth: ["bob", "PW"]',
        "'auth' => ['bob', 'PW']", 'auth=(get_user(), "PW")', 'auth=(f"{user}", "PW")', "auth = (b'bob', b'PW')",
        'redis-cli --pass PW ping', 'redis-cli -h db1 AUTH PW', 'HELLO 3 AUTH default PW', "ACL SETUSER bob on '>PW' ~* +@all",
        'user bob on >PW ~* +@all', 'sentinel auth-pass mymaster PW', 'MIGRATE db2 6379 "" 0 5000 AUTH2 bob PW KEYS a b',
        'r.execute_command("AUTH", "PW")', 'machine myserver login bob password PW', 'nmcli c m home wifi-sec.psk PW',
        'echo machine api.example.com login bob password PW >> ~/.netrc', 'echo localhost:5432:mydb:bob:PW >> ~/.pgpass',
        'nmcli d wifi c MySSID password PW', 'iface wlan0 inet dhcp wpa-psk PW', 'htpasswd -b -c "/etc/my sites/.htpasswd" bob PW',
        ': RSA server.key "PW"', 'Bun.env["API_TOKEN"] || "PW"', 'Optional.ofNullable(System.getenv("DB_PASSWORD")).orElse("PW")',
        'env::var("DB_PASSWORD").unwrap_or_else(|_| String::from("PW"))', 'Environment.GetEnvironmentVariable("DB_PASSWORD") ?? @"PW"',
        'DB_PASSWORD = env.str("DB_PASSWORD", default="PW")', 'os.getenv("DB_PASSWORD", u"PW")', 'os.getenv("DB_PASSWORD", rb"PW")',
        'viper.SetDefault("db.password", `PW`)', 'getEnv("DB_PASSWORD", `PW`)',
        # a setting read through a dotted, indexed or called receiver; a second argument before a fallback; optional
        # chaining; a login as a list or a tuple; redis's HELLO with a name after it and SENTINEL in capitals
        'app.config.get("DB_PASSWORD", "PW")', 'self.settings.get("db_password", "PW")', 'config["db"].get("password", "PW")',
        'get_config().get("password", "PW")', 'os.environ.get("DB_PASSWORD", None) or "PW"',
        'os.getenv("DB_PASSWORD", "").strip() or "PW"', 'process?.env?.DB_PASSWORD ?? "PW"',
        'Environment.GetEnvironmentVariable("DB_PASSWORD", EnvironmentVariableTarget.User) ?? "PW"',
        'auth = ["bob", "PW!"]', 'AUTH = ("bob", "PW!")', 'BASIC_AUTH = ("bob", "PW!")',
        'HELLO 3 AUTH default PW SETNAME myclient', 'SENTINEL auth-pass mymaster PW', 'SENTINEL SET mymaster auth-pass PW',
        # a default through getattr, a Java property or Ruby without parentheses; redis's HELLO in lower case; echo's flags
        'getattr(settings, "DB_PASSWORD", "PW")', 'System.getProperty("db.password", "PW")', 'ENV.fetch "DB_PASSWORD", "PW"',
        'hello 3 auth default PW', 'hello 3 auth default PW setname myclient', 'echo -n "db.example.com:5432:app:bob:PW" > ~/.pgpass',
        'echo -e machine api.example.com login bob password PW >> ~/.netrc',
        # basic auth in httpie, C#, OkHttp, Faraday, a Go raw string, JS backticks, Rust's owned strings, a Lua table
        'http -a bob:PW https://api.example.com', 'https --auth bob:PW api.example.com', 'new NetworkCredential("bob", "PW")',
        'Credentials.basic("bob", "PW")', "f.request :basic_auth, 'bob', 'PW'", "conn.request :authorization, :basic, 'bob', 'PW'",
        'req.SetBasicAuth("bob", `PW`)', '.auth(`bob`, `PW`)', 'c.basic_auth("bob", Some(String::from("PW")))',
        'c.basic_auth("bob", Some(&"PW".to_string()))', 'auth = { "bob", "PW" }',
        # a credential-named key's default or fallback in any language, Python's literals and keyword order
        'System.get_env("DB_PASSWORD", "PW")', 'System.get_env("DB_PASSWORD") || "PW"',
        'ProcessInfo.processInfo.environment["DB_PASSWORD"] ?? "PW"', "Platform.environment['DB_PASSWORD'] ?? 'PW'",
        'configuration["DbPassword"] ?? "PW"', 'config.GetValue<string>("DbPassword", "PW")', "Env::get('DB_PASSWORD', 'PW')",
        "Config::get('database.password', 'PW')", 'GetEnv("DB_PASSWORD", "PW")', 'envOr("DB_PASSWORD", "PW")',
        'utils.GetEnvOrDefault("DB_PASSWORD", "PW")', 'sys.env.getOrElse("DB_PASSWORD", "PW")',
        'Objects.requireNonNullElse(System.getenv("DB_PASSWORD"), "PW")',
        'Optional.ofNullable(System.getenv("DB_PASSWORD")).orElseGet(() -> "PW")',
        'System.getenv("DB_PASSWORD")?.ifBlank { null } ?: "PW"', 'ENV["DB_PASSWORD"].presence || "PW"',
        'config.get("db.password") || "PW"', 'nconf.get("db:password") ?? "PW"', 'os.getenv("DB_PASSWORD", F"PW")',
        'os.getenv("DB_PASSWORD", """PW""")', 'os.getenv(default="PW", key="DB_PASSWORD")', 'Deno.env.toObject().DB_PASSWORD ?? "PW"',
        'env::var("DB_PASSWORD").unwrap_or_else(|_| { "PW".into() })', 'Environment.GetEnvironmentVariable("DB_PASSWORD") ?? $"PW"',
        'System.getenv("DB_PASSWORD") ?: """PW"""',
        # split by a formatter (one line break before or after the fallback), a keyword fallback, a JS closure
        "Config::get(\n    'database.password',\n    'PW'\n)", 'configuration["DbPassword"]\n    ?? "PW"',
        'config.get("db.password", fallback="PW")', 'Optional.ofNullable(System.getenv("DB_PASSWORD")).orElseGet(() => "PW")',
        # redis's prompts, a client's call, an ACL file's rules, redis-cli in capitals or before CJK prose; .pgpass lines
        # written by echo or printf with any host and port; nmcli's flags
        'redis> AUTH PW', '> HELLO 3 AUTH default PW', 'redis.call("AUTH", "PW")', 'client.sendCommand(["AUTH", "PW"])',
        'redis.pcall("AUTH", "PW")', 'conn.Do("AUTH", "PW")', 'rdb.Do(ctx, "AUTH", "PW")', 'redis> AUTH PW，然后 PING',
        'valkey-cli -a PW ping', 'keydb-cli -a PW ping', 'valkey> AUTH PW', '127.0.0.1:6379(TX)> AUTH PW',
        'xh -a bob:PW example.org', 'python -m httpie -a bob:PW example.org',
        'echo "db:5432:app:bob:PW" | tee -a ~/.pgpass', 'echo db:5432:app:bob:PW | sudo tee -a /root/.pgpass',
        'printf "%s\\n" "db:5432:app:bob:PW" >> ~/.pgpass', 'echo "db:5432:app:bob:PW" > "${PGPASSFILE}"',
        'echo db:5432:app:bob:PW > %APPDATA%\\postgresql\\pgpass.conf', 'ECHO db:5432:app:bob:PW >> ~/.pgpass',
        'const pw = config.dbPassword ?? "PW";', 'settings.DB_PASSWORD or "PW"', '{{ .Values.db.password | default "PW" }}',
        "{{ db_password | default('PW') }}",
        'user alice on ~* &* +@all >PW', 'REDIS-CLI -a PW', '先 redis-cli -h cache AUTH PW 然后 ping',
        'echo localhost:543:app:bob:PW >> ~/.pgpass', 'echo db:5432:app:bob:PW >> ~/.pgpass',
        "printf '%s\\n' 'db.example.com:5432:app:bob:PW' >> ~/.pgpass", 'nmcli --ask d wifi c MyNet password PW')],
]

#: Ordinary text near those shapes: addresses, a URL's port and path before an ``@``, image digests and scales, board pins, status and error codes, prose
#: after a password label, log lines, command flags that are not a login.
NEAR_MISSES = [
    'password => see the docs', '密码改成了 see the vault entry', 'sqlplus / as sysdba', 'connect github/copilot now',
    'exp user/file.dmp',
    'https://host:8080/path@v2', 'https://a.b:8443/api/Items2Get@x', 'https://registry.npmjs.org:443/@types/node',
    'email:alice2024@example.com', 'user:alice@example.com', 'contact: bob.smith@example.org',
    'mailto:Bob.Smith99@Example.com',
    'docker pull nginx:1.25@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    '12:00:00@node1 started', 'C:\\Users\\Bob@Work', 'git@github.com:org/repo.git', 'scp file alice@host:/tmp',
    '$USER:$PASS@host', '{user}:{password}@{host}', 'npm i lodash@4.17.21', 'see @alice:matrix.org', 'PIN 13 is the LED',
    'GPIO pin 18', 'pinned 1234 packages', 'the PIN field takes 4 digits', 'OTP is enabled', 'error code 1234', 'code: 200',
    'passcode screen', 'status code 404', 'verification code expired', 'password: see the vault entry',
    'the password field is required', 'reset password: click the link', 'password: must be at least eight characters long',
    'password: hashed with bcrypt', 'password: not set yet', 'Passwort: siehe Tresor', 'mot de passe : voir le coffre',
    'contraseña: la de siempre', 'пароль: в сейфе', 'パスワード：忘れた', '비밀번호: 금고에 있음', 'password: never expires',
    'the key is in the drawer', 'PIN码是多少？', '验证码已发送', '[12:00:01] starting server\n[12:00:02] ready', 'Passwort ist geheim',
    'Die Passwortlänge: 12', 'senha: obrigatória', 'clave primaria: id', 'GPIO_PIN=18', 'LED_PIN: 13', 'pin: 3',
    'the PIN is required', 'PIN码是多少', '验证码发送失败，请重试', 'verification code: expired', '2FA: enabled',
    'OTP: see the authenticator app', 'recovery codes: download them from settings', 'backup codes: ten of them',
    'password: Keyring backend name', 'password: Plain text password', 'pwd: current working directory',
    'machine learning login page password reset', 'the machine localhost login fails', 'AUTH failed for user bob',
    'nmcli connection show', 'htpasswd -c .htpasswd bob', 'HTTPBasicAuth(user, pw)', 'os.getenv("DB_HOST", "localhost")',
    'os.getenv("DB_PASSWORD", "")', 'the psk is rotated monthly', 'psk: PSK_FROM_ENV', '12:30:45:67:89', 'a:1:b:c',
    '                    ec:61:f1:71:33:8b:86:83:2f:ee:78:d5:04:06:5a:', '00:11:22:33:44:55', 'daemon:*:20228:0:99999:7:::',
    '2001:4860:4860:0000:0000:0000:0000:8888', 'id:1:name:alice:active', 'bob:1000:1000:Bob:/home/bob',
    'On machine build.example.com password authentication is disabled', 'nmcli -g wifi-sec.psk connection show HomeNet',
    'Use nmcli to set the password interactively', 'htpasswd -b is insecure', "don't use htpasswd -b in scripts",
    'AUTH LOGIN', 'AUTH required', '<td>AUTH method</td>', 'client -> AUTH service',
    'requirepass is commented out by default', 'set requirepass in redis.conf', 'ACL SETUSER bob on >$PW',
    "const port = process.env.PORT || '3000';", "process.env.NODE_ENV ?? 'development'", "os.environ.get('HOME') or '/tmp'",
    "ENV['RAILS_ENV'] || 'development'", "os.environ.get('DB_PASSWORD') or ''", 'key: PSK is a pre-shared key',
    "process.env.PRIVATE_KEY || './keys/dev.pem'", "process.env.NEXTAUTH_SECRET || 'http://localhost:3000'",
    "process.env.ENCRYPTION_KEY || 'aes-256-gcm'", 'process.env.JWT_SECRET || "HS256"', "process.env.PW || 'localhost:5432'",
    'config("AUTH_TOKEN", default="NOT_CONFIGURED")', "process.env.AWS_SECRET || 'prod/app/db'", 'skip_auth=["health", "metrics"]',
    'r.get("user:1234:cart:items:count")', 'user:1234:session:web:active', 'app/models.py:1042:12:W0612:unused-variable',
    'AUTH FAILED', 'AUTH SUCCESS alice@example.com', 'irb(main):002:0> auth status', 'iex(3)> auth check',
    'machine db.internal password reset', '"hint": "default password reset"', 'Run htpasswd -b users.txt alice instead',
    'wpa_passphrase YourSSID yourpassphrase', 'Authentication method: PSK "pre-shared key"', 'Supported: XAUTH "hybrid" and PSK',
    'nmcli dev wifi connect X password "$(cat /run/wifi-pass)"', 'ACL SETUSER worker on >$(cat /run/secrets/redis) ~*',
    'password: min eight chars', 'password: same as staging', 'password: ask Ann on Slack', 'password: check the wiki page',
    'contact:alice.smith2024@example.com', 'from:Bob.Smith99@Example.com', 'ref:Plot3D@2x', 'time 10:30@home',
    'scp backup.tar admin@10.0.0.5:/srv', 'cd C:\\Users\\Bob@Work', 'the code is 4821 lines long', 'status code 4040',
    'error code: 10054', 'order #48213 shipped', 'pin 13 to the board', '[12:00:01] starting\n[12:00:02] ready',
    'app-1  | started\napp-1  | ready', '密码：见保险箱', 'password field: string, required, eight characters min',
    'def check(password: str, pin: int = 1234):', 'PASSWORD_MIN_LENGTH=12', 'the passphrase is long and random',
    'password: use a strong one',
    # shell variables and paths after a password flag, URIs and commit tags, prose and settings after labels
    'gcloud sql connect db --user=postgres --password=$DB_PASSWORD', 'mysqladmin --user=root --password=${MYSQL_ROOT_PASSWORD} ping',
    'rabbitmqctl add_user -u admin -p /vhost', 'java -jar app.jar -u admin -p ./config.yml', 'tar -czf a.tgz -u root -p ~/backup',
    'xmpp:Romeo42@montague.net', 'sip:Alice99!@atlanta.com', 'urn:Xcode15@apple', 'fix:Bug#1234@hotfix',
    'feat:AddLogin2FA@main', 'task:Deploy#42@prod', 'The password was rotated last week.',
    'my password is definitely wrong somehow', '2fa: totp-sha1', 'mfa: totp-sha256-30s', 'verification code: ERR-404-timeout',
    'door code: 1st-floor-left', 'access code: ABC-123 ticket',
    # near misses of the patterns above: code and placeholders, names that are no credential, empty or variable values
    'password = settings.db.password', 'password = os.environ["DB_PASSWORD"]', '{"password": "string"}',
    'auth:\n  type: basic', '<username>deploy</username><id>nexus2024!</id>', '<add key="Theme" value="Dark2024!" />',
    '- name: LOG_LEVEL\n  value: Debug2024!', 'ssh-keygen -t ed25519 -N "" -f key', 'keytool -list -storepass:env KS_PASS',
    'uses: actions/checkout@v4 and myorg/DeployAction2@v1', 'password for the db: see the vault', 'password for staging: required',
    'the password for root is in 1Password', 'password -> hash -> compare', 'パスワードを入力してください', '비번 까먹었어',
    # near misses of the shapes above: settings as defaults, template strings, no literal password, placeholders
    'os.getenv("DEBUG", "false")', 'viper.SetDefault("port", 8080)', 'viper.SetDefault("log.level", "InfoLevel")',
    'settings.get("DB_HOST", "localhost")', 'config.get("db", "password")', 'Deno.env.get("HOME") ?? "/tmp"',
    'import.meta.env.VITE_API_URL || "http://localhost:3000"', 'cmp.Or(os.Getenv("PORT"), "8080")',
    'Environment.GetEnvironmentVariable("ASPNETCORE_ENVIRONMENT") ?? "Development"', 'env::var("RUST_LOG").unwrap_or("info".into())',
    "process.env.JWT_SECRET || `${prefix}-secret`", 'os.environ.get("API_TOKEN") or f"{prefix}-Token1"',
    'auth=(user, password)', 'session.auth = (username, getpass())', 'req.SetBasicAuth(user, pass)', 'auth = [authenticate, "requireAdmin"]',
    '"auth": (\n    "cli.subcommands.auth",\n    "build_auth_parser",\n)', 'exempt_auth = ("GET", "HEAD", "OPTIONS")',
    'redis-cli AUTH $REDIS_PASSWORD', 'redis-cli -h host auth mypassword', 'sentinel auth-pass mymaster <password>',
    'MIGRATE host 6379 "" 0 5000 AUTH2 username password KEYS a b', 'user default on nopass ~* +@all', 'user alice on >$PW ~* +@all',
    'iface wlan0 inet dhcp wpa-psk $PSK', 'nmcli -s c s home | grep wifi-sec.psk',
    "const tokenHeader = process.env.TOKEN || 'Authorization';", "$pass = $_ENV['DB_PASSWORD'] ?? 'root';", 'AUTH Bearer',
    'Use nmcli to set a password interactively', 'user bob on the server >Works',
    # near misses of the newest shapes: lists of labels, roles and schemes, labels and header names as defaults,
    # references and placeholders, prose around redis-cli, ipsec key types, placeholders after echo
    "const menu = { auth: ['Login', 'Logout'] };", "'auth' => ['ROLE_USER', 'ROLE_ADMIN'],", 'auth: ["Bearer", "ApiKey"]',
    '"auth": ["HS256", "RS256"],', "http_auth: ['Realm', 'Protected-Area']", 'labels.get("password", "Password:")',
    'labels.get("password", "Passwort:")', 'strings.get("password", "Contraseña")', 'props.getOrDefault("password", "Password:")',
    'settings.get("csrf_token", "X-CSRFToken")', 'viper.SetDefault("auth.token", "X-Auth-Token")',
    'settings.get("session_token", "__Secure-next-auth.session-token")', '在 redis-cli 里先执行 AUTH 再说，密码见 Vault。',
    'Once connected with redis-cli you may need to AUTH with Redis6.', 'execute_command("AUTH", "default", os.environ["REDIS_PW"])',
    'config.get("password", "env:DB_PASSWORD")', 'config.get("db_password", "keyring:myapp")', 'settings.get("auth_token", "%AUTH_TOKEN%")',
    'settings.get("auth_token", "@AUTH_TOKEN")', 'Key type : RSA 2048 "server-cert"', 'Signature : RSA SHA256 "CN=Example-CA"',
    'echo machine github login USERNAME password TOKEN >> ~/.netrc', 'os.environ.get("GITHUB_TOKEN") if in_ci else "(anonymous)"',
    'os.environ.get("API_KEY") if debug else "API_KEY=***"', 'echo v1.2.3:8080:api:Build:Passed',
    ': RSA server.key "/etc/ipsec.d/private/key.pem"',
    # near misses of those: settings, lists of scopes and roles, a list left open, HELLO without AUTH, a placeholder
    'app.config.get("DEBUG", "False")', 'app.config.get("SECRET_KEY", "dev")', 'current_app.config.get("AUTH_TYPE", "basic")',
    'os.environ.get("DB_PASSWORD", None) or "changeme"', 'process?.env?.API_URL ?? "http://localhost:3000"',
    'auth = ["read", "write"]', 'AUTH = ("GET", "HEAD")', 'auth = ["api:read", "api:write"]',
    'HELLO 3 SETNAME myclient', 'SENTINEL SET mymaster auth-pass <password>',
    # near misses of those: settings and paths as defaults, HELLO without AUTH, prose before it, echo of a log line
    'getattr(settings, "DEBUG", "False")', 'getattr(settings, "AUTH_USER_MODEL", "auth.User")', 'System.getProperty("user.home", "/tmp")',
    'ENV.fetch "DB_PASSWORD", nil', 'hello 3 setname myclient', 'hello 3 auth default mypassword', 'say hello 3 auth default Sup3r!Pw9',
    'echo -n "v1.2.3:8080:api:Build:Passed"',
    # near misses of the newest shapes: names and messages after a credential key, placeholders and variables as its
    # fallback, a comparison, prose about httpie, redis replies and other commands, echo of a lint line or a variable
    'fields = ["password", "passwordHash"]', '[Compare("Password", "ConfirmPassword")]', "__('Password', 'my-plugin')",
    'raise ValidationError("password", "Required!")', 'i18n.t("auth.password", "Mot de passe")', 't("password", "Passwort:")',
    "Config::get('database.password', 'changeme')", 'Env::get("DB_PASSWORD", "${DB_PASSWORD}")',
    "Env::get('DB_PASSWORD', 'CHANGE_ME')", 'Env::get("DB_PASSWORD", "<password>")', 'configuration["DbPassword"] ?? defaultPassword',
    "SELECT * FROM t WHERE k = 'password' or v = 'Abc!defg9'", 'auth = { "Login", "Logout" }',
    'use http -a to pass credentials', 'http -a $USER:$PASS example.org', '> AUTH failed', '> AUTH is required before any command',
    'redis.call("AUTH", password)', 'redis.call("GET", "key:1")', 'user alice on ~* &* +@all >$REDIS_PW',
    'echo app/models.py:123:4:E501:line-too-long', 'echo db:5432:app:bob:$PGPASSWORD >> ~/.pgpass',
    # near misses of a credential key's fallback (a hostile review's): a literal after a key that is no lookup's
    # (a test, a validation rule, a message key, a log call, a tuple, a list), other clients' .call, prose about
    # httpie and Redis-CLI, a redis reply in Chinese
    'new SecretKeySpec("secret".getBytes(), "HmacSHA256");', 'ModelState.AddModelError("Password", "Error.Password.Min8");',
    'add_rule("password", r"^(?=.*[A-Z])(?=.*\\d).{8,}$")', 'log.info("secret", "rotated=%s", rotated)',
    'AUTH_TYPES = [("token", "OAuth2Token"), ("basic", "BasicAuth")]', 'METHODS = ["password", "OAuth2.0", "WebAuthn"]',
    '("password", "required|min:8|confirmed")', '("token", "user:42:profile")', 'masked = mask("api_key", "sk-****1234")',
    'api.call("auth", "logout");', 'socket.call("AUTH", "signIn");', 'cd /srv/http && rsync -a deploy@web1:/srv/app/ ./app/',
    'Redis-CLI with -a flag is insecure', '> AUTH 命令用于验证密码',
    'echo a:b:c:d:e | tee log.txt', 'echo $PGHOST:5432:app:bob:$PGPASSWORD | tee -a ~/.pgpass',
    'const pw = form.password || "********";', 'const re = rules.password || "^(?=.*\\d).{8,}$";',
    'self.api_key = kwargs.api_key or "ENV:OPENAI_API_KEY"', 'const field = t.password ?? "密码（至少8位）";',
    '{{ .Values.db.passwordKey | default "db-password" }}', 'const secret = env.JWT_SECRET ?? "dev-secret-change-me";',
]


def pieces(secret: str) -> list[str]:
    """Every piece of ``secret`` of 8 characters, or ``secret`` itself when shorter."""
    n = min(8, len(secret))
    return [secret[i : i + n] for i in range(len(secret) - n + 1)]


@pytest.mark.parametrize("text,secret", SENT_BEFORE)
def test_no_piece_of_a_secret_written_as_prose_is_sent(text, secret):
    """Each shape sent a secret whole before: found now, in the message path's form of the text."""
    from project_history_recall import embeddings

    out = embeddings.OpenAIProvider.outbound_text(text)
    assert "[redacted]" in out and not [p for p in pieces(secret) if p in out], out


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_text_near_a_secret_written_as_prose_is_sent_unchanged(text):
    """An address, a digest, a board's pin, a status code, prose after a password label keep every character."""
    from project_history_recall import embeddings

    assert embeddings.OpenAIProvider.outbound_text(text) == text
