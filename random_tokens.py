"""Whether a token reads as random, a key, rather than a word, a name, a path, an id or a digest, for :mod:`redact`.

:func:`long_token` judges a run of 28+ base64 characters found anywhere (:data:`LONG_TOKEN`), :func:`labelled_key` a
value right after a key or token label (:data:`secret_labels.LABELLED_KEY`), :func:`key_nearby` one later on the label's line; both by :func:`looks_random`: Shannon
entropy, the runs of one character class, hex and UUID shapes, and what is written right before the token (a public
key's or a request id's label, a digest's tag); :func:`redact` judges every long token outside a public block.
Pure; linear in the length of the text; never raises. Imports :mod:`prefilter` and, of :mod:`secret_patterns`, its documented examples and :func:`secret_patterns.line_start`.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from . import prefilter
from .secret_patterns import DOCUMENTED_EXAMPLES, line_start, replace_group

#: A run of 28+ base64 characters, judged by :func:`long_token`. One of 28 to 31 is judged only when letters and
#: digits alone: ids that long have a prefix joined by ``_`` or ``-`` (``msg_01XFDUDYJgAACzvnptvVoYEL``) or are
#: shorter (a KSUID is 27, a nanoid 21); and kept when :data:`CAMEL_HUMP` words cover half of it
#: (``GetUserProfileByAccountIdV2Ok``).
LONG_TOKEN = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/=_-]{28,}+")
#: Ids an API gives its replies, requests and calls (OpenAI's ``chatcmpl-``, ``resp_``, ``call_``; Anthropic's
#: ``msg_``, ``toolu_``; Stripe's ``req_``): long and random, and public; so are Bitcoin's addresses, age's public keys
#: and a certificate or a public key in base64 (a kubeconfig's ``certificate-authority-data``), an SSH public key's
#: blob (its type's name encoded first: ``AAAAC3NzaC1lZDI1NTE5…`` in ``authorized_keys``; a private key's starts otherwise), a
#: JWT's header alone (``{"alg":``, ``{"typ":``, ``{"kid":`` encoded: a whole JWT is a key format, its signature never kept).
PUBLIC_ID_PREFIXES = ("chatcmpl-", "resp_", "req_", "msg_", "call_", "toolu_", "run_", "thread_", "asst_", "batch_", "evt_",
                      "bc1q", "bc1p", "age1", "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t", "LS0tLS1CRUdJTiBQVUJMSUMgS0VZLS0tLS0",
                      "AAAAB3NzaC1yc2E", "AAAAC3NzaC1lZDI1NTE5", "AAAAE2VjZHNhLXNoYTItbmlzdHA", "AAAAB3NzaC1kc3M",
                      "AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29t", "AAAAInNrLWVjZHNhLXNoYTItbmlzdHAyNTZAb3BlbnNzaC5jb20",
                      "eyJhbGciOi", "eyJ0eXAiOi", "eyJraWQiOi")
#: What names a public value written right before it: a public or host key, a request's, trace's or event's id, a
#: checksum, a wallet's address, an S3 object's version, an OAuth PKCE challenge (a digest of its verifier, sent in the
#: authorization URL: ``code_challenge=…``) (``PublicKey = …``, ``x-amz-id-2: …``, ``VersionId: …``,
#: ``traceparent: 00-…``, ``收款地址 …``, ``ipfs://…``), an image, a font or a source map in a data URI, an ``ETag`` (an MD5 or
#: a hash of the content: ``ETag: W/"…"``, ``the ETag is "…"``, boto3's ``"ETag": "\"…\""``, a HAR header's ``"name": "etag", "value": "\"…\""``).
PUBLIC_LABEL = re.compile(r"(?i)(?:(?:public|host)[ _-]?key|(?:request|trace|event|span|version)[ _-]?id|x-amz-id-2|traceparent"
                          r"|content[ _-]?hash|checksum|fingerprint|address|地址|code[ _-]?challenge)[\"']?[ \t]*+[:=：]?[ \t]*+[\"']?$|ipfs:$"
                          r"|(?:e-?tag|if-(?:none-)?match|content-md5)[\"']?(?:[ \t]*+[:=：]|[ \t]++is|,[ \t]*+[\"']value[\"'][ \t]*+:)[ \t]*+[\"']?(?:W/)?(?:\\?[\"'])?$"
                          r"|data:(?:(?:image|font|audio|video)/[\w.+-]{1,40}+|application/json);base64,$")
#: What names a digest written after it (``SHA256:`` of an SSH fingerprint, SRI's ``sha384-``, ``sha256=``, go.sum's `` h1:``).
DIGEST_TAGS = (*(f"{name}{sep}" for name in ("sha1", "sha256", "sha384", "sha512", "md5") for sep in ":-="), " h1:")
#: The lengths of a hex digest that :func:`looks_random` takes for a key's (many services issue 32-hex keys): MD5's 32,
#: SHA-224's 56, SHA-384's 96, SHA-512's 128 (SHA-1's 40 and SHA-256's 64 are kept anywhere). :func:`digest_listed` keeps
#: one a checksum tool wrote or a digest's name introduces.
DIGEST_LENGTHS = (32, 56, 96, 128)
#: What md5sum and the sha*sum tools write after a digest at a line's start: two spaces (`` *`` in binary mode) and the
#: file's name to the line's end (``d41d8cd98f00b204e9800998ecf8427e  file.txt``), group ``name``. A note (``# prod key``,
#: ``(staging)``) or a table's next columns (``prod  2024-06-01``) is no file's name.
SUM_AFTER = re.compile(r" [ *](?P<name>[^\s*#(]\S{0,4095}+)[ \t]*+(?:\r?\n|\Z)")
#: A checksum tool's name (``md5sum``, ``sha512sum``, ``shasum``, ``b2sum``, a ``SHA256SUMS`` file): where it is written
#: above a :data:`SUM_AFTER` line, a file's name of any shape follows the digest (``$ md5sum LICENSE``).
SUM_TOOL = re.compile(r"(?i)(?<![\w-])(?:md5|sha(?:1|224|256|384|512)?|b2)sums?(?![\w-])")
#: What names a digest right before it on its line: BSD's and openssl's ``MD5 (file) = ``, ``SHA512(file)= ``; a
#: digest's name and a joiner (``md5sum: ``, ``MD5 checksum = ``, ``the md5 of the upload is ``, ``sha512 "``).
DIGEST_BEFORE = re.compile(
    r"(?i)(?<![\w-])(?:md5|sha-?(?:1|224|256|384|512)|sha3-(?:224|256|384|512)|blake2[bs]p?|ripemd-?160|rmd160)"
    r"(?:[ \t]?+\([^()\n]{1,255}+\)[ \t]?+=|(?:sum)?(?:[ \t]++(?:checksum|digest|hash|sum))?"
    r"(?:[ \t]++(?:of|for)[ \t]++(?:the[ \t]++)?[^\s:=]{1,60}+)?[\"']?[ \t]*+(?:[:=：]|is|was)?)[ \t]*+[\"'(]?$")
#: What a line names before a digest's name (:data:`DIGEST_BEFORE`) when the digest is a credential's: a password's
#: unsalted hash (``admin password md5: <hex>``: where the hash is what is compared, it logs in, and a common password's
#: is looked up at once) or a secret's.
CREDENTIAL_BEFORE = re.compile(r"(?i)passw|pwd|passphrase|passcode|secret|token|(?:api|access|private)[ _-]?key|credential"
                               r"|密码|密碼|口令|密钥|密鑰|秘钥|パスワード|비밀번호")
#: A name whose value is a revision's or an object's id (``GITHUB_SHA``, ``GIT_COMMIT``, ``build_uuid``), not a key's.
ID_NAME = re.compile(r"(?i)(?:^|[_-])(?:sha|commit|rev|revision|ref|hash|digest|id|uuid|checksum|etag)$")
#: A path segment that is a word (``src``, ``blob``, ``service-role``): a token holding one is a path or a URL.
PATH_WORD = re.compile(r"^[a-z]{3}[a-z_-]*+$")
#: A word of a CamelCase or camelCase name: a capital and 3+ lower-case letters, or 4+ lower-case letters opening it.
#: :func:`camel_words` counts one only when its lower-case letters hold a vowel and a consonant: random keys
#: have few such runs (``Zx9qLm2N``), names are made of them.
CAMEL_HUMP = re.compile(r"^[a-z]{4,}+|[A-Z][a-z]{3,}+")
#: A key of 16 to 27 letters and digits later on a line that names a key, token or secret, within 60 characters of the
#: word (``帮我测试下这个 key 能不能用 Xk9P…``, ``can you check if this key works: Xk9P…``, ``Token created: Xk9P…``), which
#: :func:`key_nearby` redacts when it mixes both cases as a random key does. Group ``value``.
KEY_NEARBY = re.compile(
    r"(?i)(?<![A-Za-z0-9_])(?:api[ _-]?key|key|token|secret|密钥|秘钥|令牌)(?![A-Za-z0-9_])[^\n]{1,60}?"
    r"(?<![A-Za-z0-9_+/=.-])(?P<value>[A-Za-z0-9]{16,27}+)(?![A-Za-z0-9_+/=.@-])"
)
#: What a public block holds is public or encrypted, and no token in it is judged (:func:`redact`): a certificate's, a
#: public key's or a PGP signature's body, from its ``-----BEGIN …-----`` to the ``-----END …-----`` of its kind (no ``-``
#: between), and Ansible Vault's ciphertext (``$ANSIBLE_VAULT;1.1;AES256`` then lines of hex).
PUBLIC_BLOCK = re.compile(r"-----BEGIN (?P<kind>CERTIFICATE(?: REQUEST)?|X509 CRL|(?:RSA )?PUBLIC KEY|PGP (?:PUBLIC KEY BLOCK|SIGNATURE))"
                          r"-----[^-]*+-----END (?P=kind)-----|\$ANSIBLE_VAULT;[^\n]{0,200}+\n[0-9a-f\s]++")
HEX = re.compile(r"^[0-9a-fA-F]+$")
UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def _entropy(token: str) -> float:
    counts = Counter(token)
    return -sum(c / len(token) * math.log2(c / len(token)) for c in counts.values())


def _class_runs(token: str) -> float:
    """The mean length of runs of one character class (lower, upper, digit) in ``token``'s pieces between separators.

    Short in random base64; long in identifiers and paths, which are made of words (``AbstractSingletonProxy``).
    """
    runs = letters = 0
    for piece in re.split(r"[/+=_-]+", token):
        if piece:
            runs += len(re.findall(r"[a-z]+|[A-Z]+|[0-9]+", piece))
            letters += len(piece)
    return letters / max(runs, 1)


def _class_counts(token: str) -> tuple[int, int, int]:
    """How many lower-case letters, upper-case letters and digits ``token`` holds."""
    lower, upper, digits = (len(re.findall(pattern, token)) for pattern in ("[a-z]", "[A-Z]", "[0-9]"))
    return lower, upper, digits


def looks_random(token: str) -> bool:
    """Whether a long token (28+ characters) reads as a key rather than a word, a path or a digest.

    Hex of 40 or 64 digits (git object ids, SHA-256 digests), ``0x`` and 40 (an Ethereum address) and UUIDs are kept; other hex is taken for a key
    (many services issue 32-hex keys; an MD5 checksum goes with them, unless :func:`digest_listed` says it is one). Otherwise a token needs high Shannon
    entropy and short class runs (:func:`_class_runs`), with either all three classes or one case of letters
    with a good share of digits and a piece of 16+ characters between ``-`` and ``_`` (a migration's
    ``20240311_0942_add_currency`` and a wheel's ``4-cp311-cp311-manylinux_2_17_x86_64`` are short words).
    A heuristic: a few random keys read as words and are kept, one-case ones more often.
    """
    stripped = token.strip("=")
    if len(stripped) == 42 and stripped[:2] in ("0x", "0X") and HEX.match(stripped[2:]):
        return False  # an Ethereum address (20 bytes, public); a private key is 32 bytes, as a transaction's hash is
    if HEX.match(stripped):
        return len(stripped) not in (40, 64)
    if UUID.match(token):
        return False
    lower, upper, digits = _class_counts(token)
    if lower and upper and digits:
        return _entropy(token) > 4.0 and _class_runs(token) < 2.4
    return (bool(digits) and (lower == 0) != (upper == 0) and digits >= 0.15 * len(token) and _entropy(token) > 3.6
            and _class_runs(token) < 3.2 and max(len(piece) for piece in re.split(r"[/+=_-]+", token)) >= 16)


def digest_listed(m: re.Match[str]) -> bool:
    """Whether a hex token ``m`` of :data:`DIGEST_LENGTHS` is a checksum: at its line's start with a checksum tool's
    file name after it (:data:`SUM_AFTER`: one with a dot or a folder, ``-``, or any where the tool's name,
    :data:`SUM_TOOL`, is written in the 300 characters before), or after a digest's name on its line, in up to 300
    characters (:data:`DIGEST_BEFORE`), that no password's or secret's name comes before (:data:`CREDENTIAL_BEFORE`)."""
    text, start = m.string, m.start()
    line = line_start(text, start, 300)
    after = SUM_AFTER.match(text, m.end()) if not text[line:start].strip(" \t") else None
    if after is not None and (after["name"] == "-" or re.search("[./]", after["name"]) is not None
                              or SUM_TOOL.search(text, max(start - 300, 0), start) is not None):
        return True  # a file's name (a dot or a folder in it), md5sum's standard input, or any after the tool's name
    named = DIGEST_BEFORE.search(text, line, start)
    return named is not None and CREDENTIAL_BEFORE.search(text, line, named.start()) is None


def random_after_label(token: str, one_case: bool) -> bool:
    """Whether a value right after a key or token label reads as a key: :func:`looks_random`, or, when ``one_case``,
    one run of 24+ letters of one case and digits (also in groups of one length, 6 or more, joined by ``-``:
    ``abcdefghij-0123456789-klmnopqrst``), not hex, with the digits and entropy :func:`looks_random` asks of one case.
    The label stands in for the class runs: a run without ``_`` is not an identifier made of words, and words joined
    by ``-`` have lengths of their own (``20240311-rotation-policy-annual``). One of 12 to 27 letters and digits, too
    short for entropy to tell, is a key when it mixes both cases and 2+ digits, changes class at most every other
    character and holds no word (:data:`CAMEL_HUMP`): ``Xk9Pq2Lm7Nv4Rt``, not ``ProdApiKey2024``."""
    if token in DOCUMENTED_EXAMPLES:
        return False
    if looks_random(token):
        return True
    lower, upper, digits = _class_counts(token)
    if (12 <= len(token) < 28 and token.isalnum() and lower and upper and digits >= 2 and _class_runs(token) < 2.0
            and not CAMEL_HUMP.search(token)):
        return True
    lengths = {len(piece) for piece in token.split("-")}
    run = token.replace("-", "") if len(lengths) == 1 and min(lengths) >= 6 else token
    lower, upper, digits = _class_counts(run)
    return (one_case and len(run) >= 24 and run.isalnum() and (lower == 0) != (upper == 0) and digits >= 0.15 * len(run)
            and not HEX.match(run) and _entropy(run) > 3.6)


def labelled_key(m: re.Match[str], redacted: str) -> str:
    """A :data:`secret_labels.LABELLED_KEY` match with its value redacted when it reads as random. After a bare
    ``key`` and a space, only a mixed-case value can be: a one-case one is a cache, object or primary key's name
    (``cache key userprofile20240311v2region7x``), or a key's id in hex (``gpg: key 3AA5C34371567BD2: public key``)."""
    one_case = m.group("label").lower() != "key" or re.search("[:=：是为為は]", m.group("join")) is not None
    value = m.group("value")
    mixed = one_case or (re.search("[a-z]", value) is not None and re.search("[A-Z]", value) is not None)
    return m.group("head") + redacted if mixed and random_after_label(value, one_case) else m.group()


def key_nearby(m: re.Match[str], redacted: str) -> str:
    """A :data:`KEY_NEARBY` match with its value redacted when it reads as a random key of both cases (as
    :func:`random_after_label` reads one of 12 to 27: 2+ digits, the class changing at most every other character, no
    word): a one-case run is an id, a hash or a name (``a8f3k2m9x7q1w4e6r5t0``, ``release20240311``), CamelCase a name
    (``GetUserProfileByAccountIdV2``)."""
    value = m.group("value")
    lower, upper, digits = _class_counts(value)
    if not (lower and upper and digits >= 2 and _class_runs(value) < 2.0) or CAMEL_HUMP.search(value) or camel_words(value):
        return m.group()
    if len(value) == 27 and value[0] in "0123":
        return m.group()  # a KSUID (27 base62 characters, a timestamp first): an id
    return replace_group(m, "value", redacted)


_VOWELS = frozenset("aeiouy")


def camel_words(token: str) -> bool:
    """Whether :data:`CAMEL_HUMP` words, each holding a vowel and a consonant, cover half of ``token``
    or more: a CamelCase name (``S3BucketPolicyForCDNv2Origin``), not a key."""
    covered = 0
    for word in CAMEL_HUMP.findall(token):
        letters = set(word.lower())
        covered += len(word) if letters & _VOWELS and letters - _VOWELS else 0
    return 2 * covered >= len(token)


def redact(text: str, redacted: str) -> str:
    """``text`` with each :data:`LONG_TOKEN` that reads as random redacted (:func:`long_token`), but inside a
    :data:`PUBLIC_BLOCK`: the text between blocks is judged piece by piece, each block kept as it is."""
    pieces, done = [], 0
    for block in prefilter.finditer(PUBLIC_BLOCK, text):
        pieces += [LONG_TOKEN.sub(lambda m: long_token(m, redacted), text[done : block.start()]), block.group()]
        done = block.end()
    return "".join(pieces) + LONG_TOKEN.sub(lambda m: long_token(m, redacted), text[done:])


def long_token(m: re.Match[str], redacted: str) -> str:
    """A :data:`LONG_TOKEN` match with what reads as random redacted.

    A token of 28 to 31 characters is judged only when letters of both cases and digits alone, and kept when it is a
    CamelCase name (:func:`camel_words`). A token holding a
    ``/``-segment that is a word (``src``, ``blob``) is a path or a URL: only its mixed-case segments of 32+ can go
    (a document's id, a key); one-case segments are digests and names (nix store hashes, S3 object names, git ids).
    ``NAME=value`` run together is kept when ``NAME`` is a public value's label (``trace_id=…``) or an id's (:data:`ID_NAME`)
    and the value is a git id, a digest or a UUID (``GITHUB_SHA=9fceb02…``); a token holding a documented example is kept
    (``…/bot123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11/getMe``).
    """
    token = m.group(0)
    name, _, value = token.partition("=")
    if value.strip("=") and re.fullmatch(r"[A-Za-z_][\w-]{0,60}+", name) and (PUBLIC_LABEL.match(name + "=") or (
            ID_NAME.search(name) and not looks_random(value) and (HEX.match(value) or UUID.match(value)))):
        return token
    if (any(example in token for example in DOCUMENTED_EXAMPLES) or token.startswith(PUBLIC_ID_PREFIXES) or token[:7].lower().startswith(DIGEST_TAGS)
            or m.string[max(0, m.start() - 7) : m.start()].lower().endswith(DIGEST_TAGS)
            or PUBLIC_LABEL.search(m.string, max(0, m.start() - 40), m.start())):
        return token  # a documented example, an API's id of a reply or a request, a digest (SSH's SHA256: fingerprint), a public key or address
    if len(token) < 32 and (not (token.isalnum() and all(_class_counts(token))) or camel_words(token)):
        return token
    if len(token) in DIGEST_LENGTHS and HEX.match(token) and digest_listed(m):
        return token  # a checksum tool's line (md5sum, sha512sum, BSD's MD5 (…) = …) or a digest named so
    segments = token.split("/")
    if len(segments) == 1 or not any(PATH_WORD.match(s) for s in segments):
        return redacted if looks_random(token) else token
    return "/".join(redacted if len(s) >= 32 and re.search("[a-z]", s) and re.search("[A-Z]", s) and looks_random(s) else s
                    for s in segments)
