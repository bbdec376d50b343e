"""Every search bounded, every secret caught: the hostile review's cases, each guarded by counting work.

A cost that must grow with what a search reads, never with its square, is
measured at n and at 4n by counting the work done (lines of the plugin
executed, SQLite VM steps, look-ups: ``tests/work.py``), never by timing: the
ratio is about 4 for linear code and about 16 for quadratic code, on any
machine. bench/scaling.py times the same dimensions beside Hermes' built-in.
"""

from __future__ import annotations

import functools
import importlib
import random
import re
import string
import unicodedata
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import World, result_sessions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from work import linear, measure, plugin_dir


def plugin(name: str) -> Any:
    return importlib.import_module(f"hermes_plugins.project_history_recall.{name}")


# -- compression chains ---------------------------------------------------------------


def gateway_chain(world: World, prefix: str, start: int, stop: int) -> None:
    """Sessions ``prefix<start>`` .. ``prefix<stop - 1>`` of a Telegram chat compressed again and again: no folder,
    each the continuation of the one before (the first one has no parent)."""
    for i in range(start, stop):
        parent = f"{prefix}{i - 1}" if i else None
        if parent:
            world.db.end_session(parent, "compression")
        world.session(f"{prefix}{i}", None, source="telegram", parent=parent, messages=[("user", f"turn {i} about lunch")])


class CountingRows(Mapping[str, Any]):
    """A mapping that counts every look-up (the walk's unit of work)."""

    def __init__(self, rows: dict[str, Any]) -> None:
        self.rows, self.lookups = rows, 0

    def __getitem__(self, key: str) -> Any:
        self.lookups += 1
        return self.rows[key]

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        self.lookups += 1
        return self.rows.get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)


def chain_rows(n: int) -> CountingRows:
    from project_history_recall import attribution

    rows = {f"c{i}": attribution.SessionRow(f"c{i}", f"c{i - 1}" if i else "", source="telegram") for i in range(n)}
    return CountingRows(rows)


def test_a_chain_without_a_folder_is_walked_once():
    """Resolving every session of a chain with no folder anywhere (a gateway chat) walks each session once: before,
    each session walked the whole chain above it again (n^2 look-ups)."""
    from project_history_recall import attribution

    small, large = chain_rows(200), chain_rows(800)
    assert attribution.effective_workspaces(small) == {} == attribution.effective_workspaces(large)
    assert linear(small.lookups, large.lookups), (small.lookups, large.lookups)


def test_a_long_compression_chain_elsewhere_costs_no_search_anything(world: World, monkeypatch):
    """A Telegram chat compressed n times lives in the same profile. A search in a repo (the process's first, and
    every later one) costs about the same whether the chain holds n or 4n sessions: the census reads each session
    once, and the sessions re-read on every search take their parent's answer (none) without walking the chain."""
    repo = world.repo("app")
    world.session("a1", repo, messages=[("user", "the websocket reconnect uses backoff")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    folders, store, state = [plugin_dir()], plugin("store"), plugin("state")

    def search() -> dict:
        return world.search("cur", "websocket reconnect", mode="keyword")

    def costs() -> tuple[int, int]:
        state.reset()  # a new process: the first search reads every session
        first, census = measure(folders, monkeypatch, search, store)
        later, again = measure(folders, monkeypatch, search, store)
        assert result_sessions(first) == ["a1"] == result_sessions(later)
        return census.total, again.total

    gateway_chain(world, "tg", 0, 40)
    first_small, later_small = costs()
    gateway_chain(world, "tg", 40, 160)
    first_large, later_large = costs()
    assert linear(first_small, first_large), (first_small, first_large)
    assert linear(later_small, later_large, bound=1.5), (later_small, later_large)


def test_a_first_search_costs_each_project_and_each_folder_once(world: World, monkeypatch):
    """The census of a process's first search attributes every folder: with n explicit projects (a session in each)
    and n repos, each beside a session whose scratch folder was deleted since (no stored root: it is looked for in
    the repos' worktrees), the first search costs about 4 times as much at 4n. It cost 16 times: each folder was
    matched against every project's folders, and each deleted one listed every repo's worktrees."""
    shutil = importlib.import_module("shutil")
    folders, store, state = [plugin_dir()], plugin("store"), plugin("state")
    home = world.repo("home")
    world.session("a1", home, messages=[("user", "the websocket reconnect uses backoff")])
    world.session("cur", home, style="cli", messages=[("user", "hi")])

    def grow(start: int, stop: int) -> None:
        for i in range(start, stop):
            world.project(f"p{i}", [world.folder(f"p{i}/src")])
            world.session(f"p{i}", world.work / f"p{i}/src", style="cli", messages=[("user", "a")])
            world.session(f"r{i}", world.repo(f"r{i}"), messages=[("user", "b")])
            world.session(f"g{i}", world.folder(f"scratch/{i}"), style="cli", messages=[("user", "c")])
        shutil.rmtree(world.work / "scratch")

    def first_search() -> int:
        state.reset()  # a new process: the first search reads every session
        answer, census = measure(folders, monkeypatch, lambda: world.search("cur", "websocket", mode="keyword"), store)
        assert result_sessions(answer) == ["a1"], answer
        return census.total

    grow(0, 12)
    small = first_search()
    grow(12, 48)
    large = first_search()
    assert linear(small, large), (small, large)


def test_a_later_search_attributes_no_folder_the_census_attributed(world: World, monkeypatch):
    """The census and the re-read of the newest sessions on every later search ask the attributor for the same
    folders: they are its cache's, whatever says "no stored root" (``None`` in the census, ``""`` in the re-read).
    A miss attributed each of the newest sessions again on every search."""
    repo = world.repo("app")
    for i in range(6):
        world.session(f"s{i}", world.folder(f"app/w{i}"), style="cli", messages=[("user", "the websocket plan")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    world.search("cur", "websocket", mode="keyword")
    attribution, asked = plugin("attribution"), []
    real = attribution.resolve_project
    monkeypatch.setattr(attribution, "resolve_project", lambda *a, **k: asked.append(a[0]) or real(*a, **k))
    assert set(result_sessions(world.search("cur", "websocket", mode="keyword", limit=10))) == {f"s{i}" for i in range(6)}
    assert asked == []


def test_a_search_from_the_end_of_a_long_chain_reads_the_chain_once(world: World, monkeypatch):
    """Asking from the newest session of a chain (the chat itself) reads its lineage, which is what the search
    excludes: linear in the chain, never its square."""
    gateway_chain(world, "tg", 0, 30)
    folders, store = [plugin_dir()], plugin("store")
    world.search("tg29", "lunch", mode="keyword")
    _, small = measure(folders, monkeypatch, lambda: world.search("tg29", "lunch", mode="keyword"), store)
    gateway_chain(world, "tg", 30, 120)
    world.search("tg119", "lunch", mode="keyword")
    answer, large = measure(folders, monkeypatch, lambda: world.search("tg119", "lunch", mode="keyword"), store)
    assert answer["project"]["kind"] == "home"
    assert linear(small.total, large.total), (small.total, large.total)


def reset_chain(world: World, app: Path, start: int, stop: int) -> None:
    """Sessions ``r<start>`` .. ``r<stop - 1>`` of one Telegram chat reset again and again (its idle and daily expiry,
    /reset): each the parent of the next, marked ``_reset_from`` (every other one) or, as before the marker, ended at
    a reset under the same routing key. Only the first has a folder: ``app``."""
    for i in range(start, stop):
        parent = f"r{i - 1}" if i else None
        kwargs: dict[str, Any] = {"cwd": str(app)} if not i else {"parent_session_id": parent}
        if parent:
            world.db.end_session(parent, "idle")
            if i % 2:
                kwargs["model_config"] = {"_reset_from": parent}
        world.db.create_session(f"r{i}", "telegram", session_key="tg:1", **kwargs)
        world.say(f"r{i}", "user", f"reset {i}: lunch at noon")


def test_a_search_from_the_end_of_a_long_reset_chain_reads_the_chain_once(world: World, monkeypatch):
    """A chat reset n times is n conversations: asking from the newest leaves out only itself, and finds the others.
    The walk of what it leaves out stops at the first reset link, and the census reads each session once: a search
    (the process's first, then a later one) costs about as much at 4n as at n, times 4 at most."""
    folders, store, state = [plugin_dir()], plugin("store"), plugin("state")
    app, costs = world.repo("app"), []
    for start, stop in ((0, 30), (30, 120)):
        reset_chain(world, app, start, stop)
        state.reset()  # a new process
        newest = f"r{stop - 1}"
        first, census = measure(folders, monkeypatch, lambda newest=newest: world.search(newest, "lunch", mode="keyword"), store)
        later, again = measure(folders, monkeypatch, lambda newest=newest: world.search(newest, "lunch", mode="keyword"), store)
        assert first["project"]["root"] == str(app), first
        assert f"r{stop - 2}" in result_sessions(later) and newest not in result_sessions(later), later
        costs.append((census.total, again.total))
    (first_small, later_small), (first_large, later_large) = costs
    assert linear(first_small, first_large), costs
    assert linear(later_small, later_large), costs


def test_a_search_from_the_end_of_a_long_compression_chain_reads_the_chain_once(world: World, monkeypatch):
    """A conversation compressed n times, every session of it holding the query's word: from its newest session the
    search reads what the compressions summarised away (every earlier session) and answers with one result for the
    conversation. A search (the process's first, then a later one) costs about as much at 4n as at n, times 4 at
    most."""
    folders, store, state = [plugin_dir()], plugin("store"), plugin("state")
    app, costs = world.repo("app"), []
    world.session("c0", app, style="cli", messages=[("user", "chain 0: lunch at noon")])
    world.session("other", app, style="cli", messages=[("user", "lunch at one, elsewhere")])
    for start, stop in ((1, 30), (30, 120)):
        for i in range(start, stop):
            world.continuation(f"c{i - 1}", f"c{i}", messages=[("user", f"chain {i}: lunch at noon")])
        state.reset()  # a new process
        newest = f"c{stop - 1}"
        first, census = measure(folders, monkeypatch, lambda newest=newest: world.search(newest, "lunch", mode="keyword"), store)
        later, again = measure(folders, monkeypatch, lambda newest=newest: world.search(newest, "lunch", mode="keyword"), store)
        found = result_sessions(later)
        assert len(found) == 2 and "other" in found and newest not in found, later
        costs.append((census.total, again.total))
    (first_small, later_small), (first_large, later_large) = costs
    assert linear(first_small, first_large), costs
    assert linear(later_small, later_large), costs


# -- snippets of messages with thousands of matches -------------------------------------


def test_the_snippet_window_is_the_one_a_full_comparison_picks():
    """The window holding the most distinct query units, found in one pass, is the one comparing every match with
    every other found (the first of the best)."""
    from project_history_recall import snippet

    rng = random.Random(7)
    for _ in range(500):
        starts = sorted(rng.sample(range(0, 400, 3), rng.randint(1, 40)))
        matches = [(s, s + rng.randint(1, 3), rng.randint(0, 4)) for s in starts]
        width = rng.choice([1, 5, 20, 80, 280])
        brute = max(((len({u for s, e, u in matches if s >= start and e <= start + width}), -start) for start, _, _ in matches))
        assert snippet.best_window(matches, width) == -brute[1]


def test_a_snippet_costs_what_its_matches_cost(monkeypatch):
    """A build log of n lines 'FAILED test_x: timeout error': the snippet's work grows with n, not n^2."""
    from project_history_recall import query, snippet

    units = query.parse_query("timeout error").units
    folders = [Path(snippet.__file__).parent]

    def log(lines: int) -> str:
        return "\n".join(f"FAILED test_{i}: timeout error" for i in range(lines))

    small_text, large_text = log(300), log(1200)
    out, small = measure(folders, monkeypatch, lambda: snippet.make_snippet(small_text, units))
    assert ">>>timeout<<< >>>error<<<" in out
    _, large = measure(folders, monkeypatch, lambda: snippet.make_snippet(large_text, units))
    assert linear(small.lines, large.lines), (small.lines, large.lines)


def test_a_search_of_a_long_tool_log_costs_what_the_log_costs(world: World, monkeypatch):
    """A keyword search whose best message is a tool output with n matching lines (98.6 KB of them took 3-7 s)."""
    folders, store = [plugin_dir()], plugin("store")

    def run(lines: int) -> Any:
        sid, repo = f"log{lines}", world.repo(f"ci{lines}")
        world.session(sid, repo, messages=[("user", "run the tests")])
        world.say(sid, "tool", "\n".join(f"FAILED test_{i}: timeout error" for i in range(lines)), tool_name="terminal")
        world.session(f"cur{lines}", repo, style="cli", messages=[("user", "hi")])
        world.search(f"cur{lines}", "timeout error", mode="keyword")
        return measure(folders, monkeypatch, lambda: world.search(f"cur{lines}", "timeout error", mode="keyword", limit=1), store)

    (small_answer, small), (large_answer, large) = run(400), run(1600)
    assert result_sessions(small_answer) == ["log400"] and result_sessions(large_answer) == ["log1600"]
    assert ">>>timeout<<<" in large_answer["results"][0]["snippet"]
    assert linear(small.total, large.total), (small.total, large.total)


# -- secrets before a remote embedder ------------------------------------------------------

_B62 = string.ascii_letters + string.digits


def _random(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


_UPPER = string.ascii_uppercase + string.digits
#: Key formats: kind -> (prefix, alphabet, length of the random part, suffix)
_KEYS = {
    "aws": ("AKIA", _UPPER, 16, ""), "github": ("ghp_", _B62, 36, ""), "github_pat": ("github_pat_", _B62 + "_", 60, ""),
    "gitlab": ("glpat-", _B62, 20, ""), "openai": ("sk-proj-", _B62, 40, "7"), "anthropic": ("sk-ant-api03-", _B62, 40, ""),
    "stripe": ("sk_live_", _B62, 24, ""), "google": ("AIza", _B62 + "_-", 35, ""), "huggingface": ("hf_", _B62, 34, ""),
    "slack_token": ("xoxb-123456789012-", _B62, 24, ""),
}


def secret_of(kind: str, rng: random.Random) -> tuple[str, str]:
    """``(the text as written, the secret part that must never be sent)`` of one kind of secret."""
    password = _random(rng, _B62, 2) + rng.choice("!@#%^&*") + _random(rng, _B62, rng.randint(7, 14)) + rng.choice(string.digits)
    if kind in _KEYS:
        prefix, alphabet, length, suffix = _KEYS[kind]
        key = prefix + _random(rng, alphabet, length) + suffix
        return key, key
    if kind == "slack_webhook":
        path = f"T{_random(rng, _UPPER, 8)}/B{_random(rng, _UPPER, 10)}/{_random(rng, _B62, 24)}"
        return f"https://hooks.slack.com/services/{path}", path
    if kind == "jwt":
        token = "eyJ" + _random(rng, _B62, 20) + ".eyJ" + _random(rng, _B62, 40) + "." + _random(rng, _B62 + "_-", 43)
        return token, token
    if kind == "bearer":
        token = _random(rng, _B62, 30) + "9"
        return f"Authorization: Bearer {token}", token
    if kind == "pem":
        body = _random(rng, _B62 + "+/", 64)
        return f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----", body
    if kind == "url_password":
        scheme = rng.choice(["postgres", "mysql", "redis", "amqp", "https", "mongodb+srv"])
        return f"{scheme}://app:{password}@10.0.0.5:5432/prod", password
    if kind == "assignment":
        name = rng.choice(["DB_PASSWORD", "api_key", "apiKey", "client_secret", "token", "SECRET_KEY"])
        return f"{name}={password}", password
    if kind == "label":
        label = rng.choice(["密码", "口令", "密钥", "令牌", "パスワード", "пароль", "비밀번호", "Password", "passwd"])
        joiner = rng.choice(["是", "为", "：", ": ", "は", " = ", "是：", " is "]) if not label.isascii() else rng.choice(
            ["是", "：", " is ", ": ", "="])
        return f"{label}{joiner}{password}", password
    raise ValueError(kind)


SECRET_KINDS = ("aws", "github", "github_pat", "gitlab", "openai", "anthropic", "stripe", "google", "huggingface",
                "slack_token", "slack_webhook", "jwt", "bearer", "pem", "url_password", "assignment", "label")

#: Prose around a secret, in the scripts our users write.
SCRIPTS = {
    "zh": "我们把配置放在这里已经部署好了请不要提交到仓库里谢谢",
    "ja": "設定ファイルに書いておきましたのでデプロイの前に確認してください",
    "ko": "설정 파일에 넣어 두었으니 배포 전에 확인해 주세요",
    "ru": "я положил это в конфиг перед выкладкой проверь пожалуйста",
    "en": "I put it in the config before the deploy please check it",
}


def embedded_text(kind: str, script: str, spaced: bool, rng: random.Random) -> tuple[str, str]:
    """A message with one secret written into prose of ``script``, with or without spaces around it. Without
    spaces, in English it touches punctuation (a key glued inside an English word is one word); in the other
    scripts it touches their letters."""
    written, secret = secret_of(kind, rng)
    prose = SCRIPTS[script]
    if script == "en":
        words = prose.split(" ")
        cut = rng.randint(0, len(words))
        before, after = " ".join(words[:cut]), " ".join(words[cut:])
        if not spaced:
            left, right = rng.choice(["(", "[", "\"", "'", "<", "`", ":", "="]), rng.choice([")", "]", "\"", "'", ">", "`", ",", "."])
            return f"{before} {left}{written}{right} {after}", secret
    else:
        cut = rng.randint(0, len(prose))
        before, after = prose[:cut], prose[cut:]
    if spaced:
        return f"{before} {written} {after}", secret
    return f"{before}{written}{after}", secret


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(SECRET_KINDS), script=st.sampled_from(sorted(SCRIPTS)), spaced=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_no_secret_reaches_a_remote_embedder(embedder, kind, script, spaced, seed):
    """Any secret the module knows, written into Chinese, Japanese, Korean, Russian or English text with or without
    spaces around it, never reaches an OpenAI-compatible endpoint (a loopback server that keeps what it got)."""
    text, secret = embedded_text(kind, script, spaced, random.Random(seed))
    provider, server = embedder
    server.requests.clear()
    provider.embed([text])
    sent = [t for r in server.requests for t in r["body"]["input"]]
    assert sent and all(secret not in t for t in sent), (text, sent)


@pytest.fixture(scope="module")
def embedder() -> Iterator[tuple[Any, Any]]:
    from fakes import FakeEmbeddings

    from project_history_recall import embeddings

    server = FakeEmbeddings()
    try:
        yield embeddings.OpenAIProvider(model="m", base_url=server.base_url, api_key="k"), server
    finally:
        server.close()


@pytest.mark.parametrize("text,kept", [
    ("访问密钥是AKIA4QZJ7TWRMT5Y9CKV请妥善保管", "访问密钥是请妥善保管"),
    ("连接串postgres://app:q7RkZ2xP@10.0.0.5:5432/prod已经配置", "连接串postgres://@10.0.0.5:5432/prod已经配置"),
    ("登录密码是hGzPp1nMic1x，别外传", "登录密码是，别外传"),
    ("口令为Tr0ub4dor&3。", "口令为。"),
    ("パスワードはhunter22です", "パスワードはです"),
    ("비밀번호는 hunter22입니다", "비밀번호는 입니다"),
    ("пароль: qwerty123, не забудь", "пароль: , не забудь"),
    ("the password is hunter2! do not share", "the password is ! do not share"),
    ("通知发到 https://hooks.slack.com/services/T0123ABCD/B0456EFGH/abcdefghijklmnopqrstuvwx 了",
     "通知发到 https://hooks.slack.com/services/ 了"),
])
def test_secrets_written_into_other_scripts_are_redacted(text, kept):
    from project_history_recall import redact

    out = redact.redact_secrets(text)
    assert out.replace("[redacted]", "") == kept, out


@pytest.mark.parametrize("text", [
    "密码是多少？我忘了",
    "the password is in the vault; ask Ann",
    "口令：见保险箱",
    "пароль от почты лежит в сейфе",
])
def test_labels_without_a_secret_are_left_alone(text):
    from project_history_recall import redact

    assert redact.redact_secrets(text) == text


def test_a_long_run_of_letters_and_dots_is_read_once():
    """120 KB of ``a.b.c...`` (the URL-password pattern restarted at every dot: 19 s) and a key at its end."""
    from project_history_recall import redact

    text = ".".join("ab" for _ in range(40_000)) + " 密码是hGzPp1nM7x"
    out = redact.redact_secrets(text)
    assert out.endswith("密码是[redacted]") and out.startswith("ab.ab.")

def _step_costs(text: str) -> list[float]:
    """The CPU time (of this thread) each step of :func:`redact.redaction_steps` takes on ``text``, in order."""
    import time

    from project_history_recall import redact

    costs, steps = [], redact.redaction_steps(text)
    while True:
        start = time.thread_time()
        if next(steps, None) is None:
            return costs
        costs.append(time.thread_time() - start)


def _steps_above(unit: str, n: int, ratio: float, floor: float = 0.002) -> list[tuple[int, float, float]]:
    """``(step, cost at n, cost at 4n)`` of each redaction step whose cost on ``4n`` characters of ``unit`` repeated is
    above ``ratio`` times its cost on ``n`` (or on ``floor`` seconds, when more). The step's cost at 4n is its
    least over up to three measures, taken again only while a step is above."""
    def text(size: int) -> str:
        return (unit * (size // len(unit) + 1))[:size]

    large = _step_costs(text(4 * n))
    if all(big <= ratio * floor for big in large):
        return []  # under the floor at 4n: above at neither size, whatever n costs
    small = _step_costs(text(n))
    for _ in range(2):
        if all(big <= ratio * max(little, floor) for little, big in zip(small, large, strict=True)):
            break
        large = [min(a, b) for a, b in zip(large, _step_costs(text(4 * n)), strict=True)]
    return [(i, little, big) for i, (little, big) in enumerate(zip(small, large, strict=True)) if big > ratio * max(little, floor)]


@pytest.mark.parametrize("unit", [".sk-", ".AKIA", "~ghp_", ".eyJa", "1Q~_", "hf_/", ".xoxb-", "~glpat-", ".sk-proj-", "sk-\\n",
                                  "seed: ", "_mnemonic=", "x_token ", "key是", "\u0430a", "p\u0430ss ", "password: abcdefghijklmn ",
                                  "seed: 1. abandon ", "wallet words: ", "key是：是：", "\\r\\n", "token abcdef-",
                                  "abandon ", "abandon ability ", "abandonx ", "<b>abandon</b> ", "| 1 | abandon ",
                                  "**Password:** ", "<b>", "| Password ", "token for prod ", "token（新）", "key的值是",
                                  "token =>\n", "password: Abcdefghijklmn '", "a:", "a:b@", "x:Sup3r$x@", "PIN: ", "pin is 1234 ", "htpasswd -b ", "AUTH ", "AUTH a ",
                                  "machine a.b login ", "a:1:b:c:", "auth=('a', ", "nmcli password ", 'getenv("A_KEY", ', "ACL SETUSER a >",
                                  "CONFIG SET requirepass ", "process.env.A_KEY || ", "ENV['A_KEY'] ", ": PSK ",
                                  "PIN: 1234, ", "recovery codes:\n  - ", "mfa: ", "password: word ", "密码是 ab ", "\n[12:00:01] ",
                                  "sk-proj-abcdefgh\n[1] ", "\napp-1 | ", "creds: a/", "-u a -p ", "-u a%", "//a:b/", "//a:/",
                                  "参数timeout:30，重试retry:3。", "設定はport:8080です、", "a{color:red;margin:0}.b{padding:1px}",
                                  "!a:", "ts:1712345,lvl:info,", "密码改成了 ab ", "password => ab ", "sqlplus a/b ",
                                  "sqlplus a/bc@", "auth:\n  ", "<password>", "<a>b</a", 'key="a" value="',
                                  "- name: A\n  value: ", "IDENTIFIED BY '", "PASSWORD 'a", "sqlplus a/", "sqlplus -s a/b",
                                  "password for the db: ", "password => ", "pw is ", "-storepass ", "ssh-keygen -N ",
                                  "hvs.", "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.", "密码我改成了", "パスワードを", "x.y.", "a\ufe0f",
                                  'Deno.env.get("A") ?? ', "import.meta.env.A || ", "env.A || `", "process.env['A'] || ",
                                  "process.env.A?.trim() || ", 'os.getenv(key="A", ', 'a.get("A_KEY", ', 'System.getenv().getOrDefault("A", ',
                                  'viper.SetDefault("a.password", ', 'cmp.Or(os.Getenv("A"), ', 'env::var("A").unwrap_or_else(|| ',
                                  "os.environ['A'] if x else ", "ENV.fetch('A') { |", "ENV.fetch('A') do ", "auth=(f(), ", "(b'a', b",
                                  'SetBasicAuth("a", ', ".basic_auth(a, Some(", "basic_auth 'a', ", ".auth('a', ", "auth => ['a', ",
                                  "redis-cli --pass ", "redis-cli a AUTH a ", "sentinel auth-pass a ", "MIGRATE AUTH2 a ", "HELLO 3 AUTH a ",
                                  "execute_command('AUTH', 'a', ", "\nuser a on >", "ACL SETUSER a '>", "\niface wpa-psk a ", "nmcli c m password ",
                                  '\n: RSA a "', "echo machine a login b password ", "\nmachine a login ", "echo a.b:1234:c:d:",
                                  'htpasswd -b "a b" ', "${", "auth=(a,",
                                  'getenv("A")).orElse(', 'env::var("A").unwrap_or_else(|_| String::from(', "?? @", "$_ENV['A'] ?? ",
                                  "auth: ['a', 'b", "redis-cli -a b ", "redis-cli -a AUTH ", 'a.get("A_KEY", "a-', 'a.get("A_KEY", "a.', 'a.get("A_KEY", `', 'a.get("A_KEY", rb`',
                                  ': RSA a.b "', 'a.b.get("A_KEY", ', 'a["b"].get("A_KEY", ', 'a().get("A_KEY", ',
                                  'os.getenv("A_KEY", b) or ', "process?.env?.A ?? ", "auth = ['a', ", "AUTH = ('a', ",
                                  "BASIC_AUTH = ('a', ", "SENTINEL SET a auth-pass ", "HELLO 3 AUTH a b SETNAME ",
                                  'getattr(a, "A_KEY", ', 'System.getProperty("a.password", ', 'ENV.fetch "A_KEY", ', "hello 3 auth a ",
                                  "hello 3 auth a b setname ", "echo -n a.b:1234:c:d:", "echo -e machine a login ",
                                  '"A_KEY", ', '"A_KEY") || "', '"A_KEY", """', '"A_KEY")).orElseGet(() -> ', '"A_KEY" abc ',
                                  "'db:password') ?? $'", 'default="a", key=', "Deno.env.toObject().A ?? ", "http -a ", "http a ",
                                  "https --auth a:", "echo a:1:b:c:d ", "printf '%s' a:1:b:c:", "echo a:1:b:c:d:e >",
                                  "\nuser a on ~* &* +@all ", "> AUTH a ", "redis> AUTH ", '.call("AUTH", ', 'sendCommand(["AUTH", ',
                                  'Credentials.basic("a", ', 'NetworkCredential("a", ', ":basic_auth, 'a', ",
                                  ":authorization, :basic, 'a', ", "nmcli --a d wifi c ", "auth = { 'a', ", ".auth(`a`, `", "AUTH a 然",
                                  'a.b.getX("A_KEY",\n', 'a.getX<T, U>(', '"A_KEY"\n    ?? ', '"A_KEY", fallback=', '"A_KEY").orElseGet(() => ',
                                  'redis.pcall("AUTH", ', 'c.Do(ctx, "AUTH", ', "; http -a a:", "> AUTH 命令",
                                  "valkey-cli -a ", "valkey> AUTH ", "(TX)> AUTH ", "; xh -a a:",
                                  "echo a:1:b:c:d | tee ", 'printf "%s" a:1:b:c:', "a.b.c_password ?? ",
                                  "a.password | default ", "a.b.", 'x.token or "a1',
                                  # code_secrets: each alternative's prefix, separators, CJK after a bare value
                                  'default "a" ', 'default "a" .', "coalesce(a.b, ", "coalesce .a ", 'lookup(a, "b", ',
                                  ".a.b // ", '.["a"] // ', "$ENV{A} // ", "$ENV{A} ||= ", "a.b ??= ", '$Env:A ??= "', 'a//"',
                                  "A ?= ", 'a := "', "\nA ?= b", "\nA ?= 密", "a-a", "a: str = ", "a: ", "a: b = Field(",
                                  'Field("a"', "Field(default=", "a: b, c | d = ", "(or (env :a) ", "(env :a ", "(get-in a [",
                                  "if ($env:A) { ", "if (-not $env:A) { ", '(or (System/getenv "A") \n', "fetch(:a, ", "x[:a] || ",
                                  "get(a, b, :", "dig(:a, :b, :c", 'a.auth("', 'cmd("AUTH").arg("a")', "\nauth:\n  - a\n  - ",
                                  "\nauth: [a, ", "\nbasic_auth:\n", "ACL SETUSER a ", "\nuser a on ", "ACL SETUSER a >abcd ",
                                  "cat > .pgpass <<EOF\n", "a:1:b:c:d\n", "cat > ~/.pgpass <<EOF\na:1:b:c:Abc1!\n", "http \\\n",
                                  "curl \\\n", "先http -a", "http -ab", "curl -ua",
                                  # the review's fixes: Make's :=, glued and continued logins, calls over lines, .Auth(
                                  "\nA := b", "\na := b", "\nA ::= ", "curl -ua:b", "curl -H a \\\n -H b ", "http -v \\\n -v ",
                                  "coalesce(\n", 'lookup(a, "b",\n', 'default "a"\n', "Field(\n", 'a.Auth("', 'a.auth("a@b.',
                                  "If (-Not $env:A) { ", "\nauth: [session, ", "\nauth:\n  - Kerberos\n  - ",
                                  # literals in wrappers
                                  "a_key = []byte(", "a_key := []byte(", "a: SecretStr = SecretStr(", "key=SecretStr(b",
                                  # command_secrets: each command's name and the runs after it
                                  "echo a", "echo -n ", "printf '%s' ", "echo a | b", "| docker ", "secret create a - <<< ",
                                  "zip ", "zip -P ", "7z ", "7z -p", "sqlcmd -P a", "gh secret set A ", "gh secret set A -b ",
                                  "\nENV A ", "ENV A ", "aws configure set ", "aws configure set a.b.", "aws configure set a ",
                                  "sqlcmd \\\n", "zip -", "| sudo -S", "| chpasswd", "--password-stdin <<< ", "echo a | a", "secret create a -",
                                  "gh secret set A <<< ", "[]byte( ", "SecretStr( ",
                                  # output_secrets: op's, kubectl's go-template, sops' and wrangler's commands over a value
                                  "op item get a --fields a\n", "kubectl a go-template='{{.data.a\n", "sops a --extract '[\"a\"]'\n",
                                  "sops a --extract '[\"a", "wrangler secret put a\n? Enter a secret value: ", "npx wrangler secret put a\n", "kubectl --template={{", "vercel env add a\n? What's the value of a? ",
                                  "kubectl a {.data.a}\n", "heroku config:get a\n", "az keyvault secret show --name a\n", "aws ssm get-parameter --name /",
                                  "aws ssm get-parameter --name a/a\n", "lpass show --password\n", "keyring get a a\n", "a | jq .a\n", "jq .a.a.", "yq .a a\n", "PS> $env:a\n", "type a\\a_token\n", "git config a.a\n", "net user a a", "useradd -p a", "dsmod user a -pwd a", "mkpasswd -a a -a a a", "\na_pass --a", 'flag.String("a", ', 'Flags().StringP("a", "a", "a', 'flag.StringVar(&a, "a_password", "a\\"', '(setq a "a', '(defvar *a* "a\\"', '(define *a', 'stubEnv("a_key", "a', 'assign("a", ', "\nHeader set a a", "\nRequestHeader always merge a \"a\\\"", "kubeadm token create\n", "kubectl create token a\n", "tskey-a-", ".tskey-aaa-aaaaaa-",
                                  "npm config get //a:a\n", "pulumi config get a\n", "terraform output a\n",
                                  "\nuserPassword: {a}aaaaaaaa", "\nrootpw {a}",
                                  "echo a | wrangler secret put a", "vercel env add a_key <<< ", "vercel env add a_key a <<< a",
                                  "echo 'a", "echo 'a | base64", "echo -n aaaaaa",
                                  "parolă: ", "κωδικός πρόσβασης: ", "пасс: a", "p/w: ", "p/w:a", "pass phrase: ", "pass phrase: a!",
                                  "authorization: token a#", "authorization: a!", "authorization: basic !", "Authorization=a@",
                                  "password [", "password []: a", "token (a a a a a a a a): ", "secret access key", "secret access key again: a1",
                                  "--passphrase a", "rar -hp", "rar a -hpa", "cargo login a", "poetry config pypi-token.a a",
                                  "jenkins-cli -auth a:", "--passwd-on-stdin <<< a",
                                  ',"a', ",'a1!A", ",\"a\\\"", "('a\\'b", ",'aaaaaaaa", "(\"Aa1!aaaaa",
                                  "a[:a] = ", 'a[:a_password] = "a', "a[:a]=a[:a]=",
                                  "sk-aaaaaaaaaaaaaaaaaaaa1\nAAAA1AAAA ", "sk-a\nA1 ",
                                  "geslo: ", "parola este a", "paroolparool: ", "رمز عبور: ", "κωδικός είναι ", "lösenordet är a!",
                                  # ENV's words, a quoted 7z flag, Rust's references, a Go raw string
                                  "\nENV A_PASSWORD a ", "\nenv A a1! ", "7z '-p", '7z "-pa', "a: &'a ", "a: &str = ", "a = []byte(`",
                                  # joiners, labels and quotes of LABELLED
                                  "密码也是 ", "密码已经重置为了 ", "a密码用 ", "授权码是", "密码【", "password should be ",
                                  "password was changed to ", "password to a", "password for a-b ", '"密码":"', "‘password’: ‘",
                                  # calls, setters, JSON pairs, subscripts, =>, commands' password flags, shells' set
                                  'set("a_key", ', 'setPassword("', 'put("a", "', '"name": "A_KEY", "value": "', '"a.password": {"value": "',
                                  'a_key"] = ', "'password' => '", "gpg --passphrase ", "openssl -k ", "openssl passwd -1 ",
                                  "ldapsearch -w ", "net use /user:a ", "mc alias set a b c ", "etcdctl --user a:", "set -gx A_KEY ",
                                  "setx /M A_KEY ", "ConvertTo-SecureString ", "new PDO(a, 'b', ", "mysqli_connect('a', 'b', ",
                                  ".login('a', ", "jwt.sign(a, ", "IDENTIFIED WITH a BY '", "jdbc:oracle:thin:a/", "password: |\n ",
                                  "password: &a ", "sk-aaaa", "0123456789abcdef0123456789abcdef-us", "open.feishu.cn/open-apis/bot/v2/hook/",
                                  "密码被重新设置为 ", "password has been changed to ", ".login(a, ", "jwt.sign({ a, ", "set(\n ",
                                  'variable "a" {', 'variable "a" { default = ', "\na_password 'a' ", "a_key = b'", "a:b@tcp(",
                                  "npm config set //a:", '"value": "a", "name": "', '"Name": "/a", "Type": "a", "Value": "',
                                  # tables: a header's cells, its delimiter row, rows of its width, a row's first cell
                                  "| a | password ", "| password |\n|-|\n", "| a | password |\n|---|---|\n| b | Abc1! |\n",
                                  "a,password\n", "a,password\nb,Abc1!x\n", "a\tpassword\n", "\n| password | a ", "| password | a |\n",
                                  # labels naming both fields, browser tests' password fields, quoted cookie headers, templates
                                  "账号密码 a ", "账号密码：a 和 ", "('#password').", "('#password').val('", ".fill('#password', '",
                                  "('password').send_keys(\"", "'Cookie': '", '"cookie": "a=b; ', "#{a}", "${a:?", "${ssm:",
                                  # argv lists, generated passwords, joiners, digests and ids before a long token
                                  '"--password", "', '["mysql", "a", ', '"mysql", "-p', "temporary password is generated for a: ",
                                  "Password for the [a] user (", "密码给你 ", "token值是", "SHA256:", "chatcmpl-",
                                  # strong literals in code; tables' pairs, quotes and emoji
                                  "('Ab1!cdef', ", " = 'Ab1!cdef'", "('", "| a | password | Ab1!x ", "> |-|-|\n", "| 🔑 password ",
                                  "| Password (a) | Ab1!x |\n|-|-|\n", "1.2.3.4 a ", "1.2.3.4:22 a/", "ssh a@b ", "1.1.1.1.1.",
                                  # cookies outside a header, mail logins, options' defaults, macros, markup, tools' flags,
                                  # a fenced value, Authorization without a colon, public labels
                                  '"sessionid": "', "'a', 'b1", 'Cookie{Name: "a", Value: "', "\na\tTRUE\t/\tTRUE\t1\t",
                                  "\na\tb1\t.c.d\t", "curl -b ", "curl a -b 'a=", '<key>a</key><string>', "<a b>", "<a><![CDATA[",
                                  'smtp.PlainAuth("", "a", ', 'NewDialer("a", 1, "b", ', 'yagmail.SMTP("a", ', 'add_argument("--a" ',
                                  "get('a', 'b' ", "\n#define A ", "plink -pw ", "curl -U a:", "skopeo --creds a:", "net user a ",
                                  "schtasks /rp ", " -Password ", "password is:\n```\n", "Authorization Basic a1",
                                  "authorization to bearer ", "PublicKey = ", "request_id: ", "data:image/a;base64,",
                                  # emoji and ellipsis joiners, <code> values, HTML cells, SQL's bare values, path keys
                                  "密码👉", "密码……", "password: <code>a", "<td>password</td><td>", "<dt>a</dt> <dd><code>",
                                  "IDENTIFIED BY ", 'IDENTIFIED BY "a', "SET PASSWORD FROM 'a' TO ",
                                  "maker.ifttt.com/trigger/a/with/key/", "api.day.app/",
                                  # YAML argv, a name's stage, escaped and triple quotes, config lines, labels above, hooks
                                  "- redis-cli\n", "- redis-cli\n- a\n", "- --password\n", "- -a\n", "password_2", "a_key_old",
                                  'password="a\\"', 'password = """', "password:\n----\n", "password a\n", "a = a1!x\n",
                                  "password\n", "password:\n```\n", "//a/hooks/", "//a.a.a", "//a/hooks/a1",
                                  # printed values, MONITOR lines, a bare Authorization, HAProxy logins, lists after a value
                                  "printenv A_KEY\n", "$ echo $A_PASSWORD\n", "cat a/password\n", "cat a/", "{.data.a} | base64 -d\n",
                                  ".data.a", '] "AUTH" ', '1714550400.1 [0 a] "AUTH" "a', "1714550400.1 [0 ", "Authorization Bearer a1",
                                  "authorizationauthorization ", "stats auth a:", "PASSWORD a = ", "[redacted]、", "[redacted]、Ab1!cdef",
                                  "密码是 Ab1!cdef、Ab1!cdef", "Name : A_KEY\nValue : ", "Name : ", ') "requirepass"\n1) "', '"requirepass"', "\nproxy_set_header a ", "\nproxy_set_header a \"Bearer ", "A_PASSWORD is ", "AAAAAAAAAA_", "A_TOKEN 是 Ab1!",
                                  # Japanese token labels, AUTH's login, HAR cookies, logins in prose
                                  "APIトークンは ", "シークレットキー：", "A_AUTH=a/", '"name": "sess", "value": "a1',
                                  "with password ", "with password Ab1!", "creds for a: b / ", "creds for creds for ",
                                  # CJK, Japanese and Korean labels, circled digits, login lines, licence codes
                                  "mima=", "密码改了，新的是 ", "password 我记得 is ", "シークレット：", "ID：a パス：", "ID：a\u3000",
                                  "시크릿 키: ", "비밀 번호: ", "登录信息：\na\n", "激活码：", "激活码：A1B2C-", "a⑦", "⑦a",
                                  # commands: stdin readers, setters, sed, heredocs, quoted logins
                                  "pulumi config set --secret ", "pulumi config set --secret a ", "| a --data-file=- ", "| redis-cli --askpass ",
                                  "| smbpasswd -a ", "dotnet user-secrets set a ", "rclone config create a ", "rclone config create a_key ",
                                  "tccli configure set a ", "chpasswd <<EOF\na:", "chpasswd ", 'sqlplus "a/', "sed -i 's/a/", "sed s/a/b/c/",
                                  "sed s/CHANGE_ME/", "sed s/a/requirepass ", '\nset password "', "sshpass.exe -p ",
                                  # code and config: setters, Kotlin pairs, concatenated and escaped pairs, inline logins, data:
                                  '.apiKey("', '.apiKey("a', '"a" to "', '"a" to "Bearer ', '?password=" + "', '<property name="a"><value>',
                                  "&quot;a&quot;:&quot;", "&quot;a&quot;:&quot;b", "%22a%22%3A%22", "%22a%22%3A%22b", "a%3D", "%26a%3Db",
                                  "<auth-user-pass>\na\n", "[a]:1 a:", "data:\n  a: ", "data:\n", "  a: YWJjZA==\n", "sk.eyJaaaaaaaaa.",
                                  "password: 'a''", "password: $aB1c", "password: <aB1!", 'token = {"',
                                  # logs, cookies, signed headers, Secrets' literals, logins in prose, base64 logins
                                  "(password ", "(password a", "pwd[", "pwd[a", "&ak=a#", "Cookie: a=b; ", "Cookie: a=Ab1!cd; ",
                                  "Authorization: AWS AAAAAAAAAAAAAAAA:", "Authorization: a, Signature=", "Authorization: ",
                                  "kubectl create secret a ", "kubectl create secret a --from-literal=a=", "--from-literal=\"a=",
                                  "log in with a and ", "log in as a (", "creds are a / ", "管理员：a/", "YWJjZGVmZ2hpamts", "YWJj", "VersionId: ",
                                  # red30: halves, a key's rest, creds a:b, config names, seed phrases in Han, JWK, byte
                                  # arrays, Composer, plan changes, Maven, DER hex, non-ASCII values
                                  "前半段 ", "后半段 aB1", "[redacted] ", "[redacted] aB1", "creds a:", "requirepass 设置的是 ", "a_token 是 ",
                                  "的 ", "的　", '{"kty":"a","k":"', '{"kty":', "[1,", "1,", '"github-oauth":{', '"gitlab-token": {"a": "',
                                  '~ a = "b" -> "', "<password>{", "30 82 01 02 02 01 00 02 ", "02 01 00 ", "3082", "密码：é", "密码：Пa1 ",
                                  "，备用 ", "token 用这个 ",
                                  "‘a’", "‘a’:", ": ‘a", "‑", "docker exec a ", "$ docker exec a printenv ", "kubectl exec a -- ",
                                  "argocd admin initial-password ", "| passwd a", "| passwd ", 'expect "password:"; ', 'send "',
                                  '<entry key="a">', "ParameterKey=a,ParameterValue=", "trojan://a", '"a" "', "a1!a1!a 是", "用 a1!a1!a ",
                                  "a.atlasv1.", "A += ", "a: A := ", "里 A ?= ", "`A ?= ", "助记词：的",
                                  "助记词：的的的的的的的的的的的的的的的的的的的的的的的的的 ",
                                  ";password=", ";Pwd={", ";AccountKey=a ", ";password=a", " 备用 ", "[redacted] 备用：aB1!aB1!a", "里 requirepass ",
                                  # red31: purposes of three words, env names set to, session ids, SESSDATA, XML-RPC, nginx
                                  # maps, WebSocket paths
                                  "password for the a b ", "password for a b c ", "A_PASSWORD to ", "A_PASSWORD 设成 ",
                                  '"session_id": "', '"session_id": "aB1cD2eF3gH4iJ5k', "a1b2c3d4,1234567890,", "a1b2c3d4%2C",
                                  "<name>a</name><value>", "<name>password</name>\n", "map $a_token $b {", "map $a_token $b {\n a1B2c3D4e5 ",
                                  "wss://a/", "wss://a/aB1cD2eF3gH4iJ5k", "ws://",
                                  # red31: bracketed log fields, Clojure literals, Baidu clients, coalesce, jq brackets
                                  "password=[", "password=[aB1cD2eF3 ", ':password "', '(def a-password "', ':a "a" ',
                                  "AipOcr(", 'AipOcr("aB1cD2eF3gH4iJ5kL6", ', "coalesce .a ", 'coalesce .a .b "',
                                  '.a["b"]', '."', ".'", '.["password"] // "', "a?.b", "a::b",
                                  # red31: ngrok and influx, key 设成了, a login after an address, use password, pw for,
                                  # R's <-, echo into base64
                                  "ngrok authtoken ", "influx -t ", "ngrok --authtoken ", "key 设成了 ", "1.2.3.4 a/",
                                  "1.2.3.4:1 a/aB1cD2 ", "use password ", "pw for a: b / ", 'password <- "', "password <- ",
                                  "echo -n a1B2c3D4 | base64", "echo a | ",
                                  # red31: a key later on its label's line, creds joined by ':'
                                  "key ", "key aB1cD2eF3gH4iJ5kL6 ", "token a", "密钥 a1", "creds are a:",
                                  # red31: an INSERT's rows
                                  "INSERT INTO a (token) VALUES (", "INSERT INTO a (b, token) VALUES ('a', 'aB1cD2eF3g'), ",
                                  "('aB1cD2eF3g'), ", "INSERT INTO a (token) VALUES (((((",
                                  # red31: a login before its verb, 还是原来那个
                                  "a/", "a/aB1cD2eF3 ", "用 a 和 ", "a/aB1cD2eF3 登录", "密码还是原来那个 ",
                                  # red31: a concatenation's next string
                                  '[redacted]" + "', '[redacted]" + "aB1cD2eF3" + "', '"[redacted]" \\\n "',
                                  # red31: Vault's s. tokens
                                  "s.", " s.aB1", "s.aB1cD2eF3gH4iJ5kL6mN7o",
                                  # red31: a key's wrapped rest that is the next line's name
                                  "sk-proj-aB1cD2eF3\nA=", "AKIAAAAAAAAAAAAAAAAA\nA:",
                                  # red31: an object's "value"
                                  '"a_password": {', '"a": {"b": 1, ', '"value": "a"',
                                  # red31: a parenthesised string
                                  "a = (", 'a_key = ( "', "password = (\n", '("[redacted]"', "a: b = (",
                                  # red32: a network's pair, a verb's pair, a web address and a login, rsyncd's line,
                                  # Consul's agent token, a YAML list's items, use a/, a label before its value
                                  "WiFi：a / ", "wifi: a-5G / aB1cD2eF3 ", "改成了 a / ", "登录用 a/", "http://a a ",
                                  "http://a a aB1cD2eF3 ", "a:aB1cD2eF3\n", "a:", "set-agent-token -a ", "password:\n  - ",
                                  "\n  - aB1cD2eF3", "use a/", "şifre a1 ", "mật khẩu mới là ", "lautet ",
                                  "密码 abcd ", "logging in with a / ", "user a password aB1cD2eF3 ", "user a ", " a/",
                                  " a / aB1#cD2eF3", "password's ", "账号密码都是 a/", '"key": "a", ', '"name": "a_password", "value": ',
                                  "mc admin user add a ",
                                  # red33: pass as a label, a change's from, u: … p:, a label's comma, a quoted purpose, a
                                  # bracketed value, a dot leader, a cipher's call, a tokens block, an rsyncd line in prose
                                  "pass for a is ", "password from a ", "u: a p: ", "密码，a 的", " for key 'a' ", "password (aB1cD2eF3 ",
                                  "password..", "AES.new(", "tokens {\n", ' for key "a" ', "var key = []byte(", "hmac.new(key=", "pass for my a b ", "password: (", "password [ ", "u: a, p: ", '"acl": {"tokens": ', "{ tokens ", "password ... ", "行：a:aB1cD2eF3",
                                  # red34: a password in or at a place
                                  "password in the a b ", "password at a ",
                                  # red34: pass after a login's user
                                  "user a, pass ", "user a pass aB1#", "username `a` / pass ",
                                  # red34: a domain's user, Rails' secret_key_base
                                  "-U a\\", "-U a\\a%", "secret_key_base: ",
                                  # red35: a spaced dot leader, a WPA key, a TOTP secret, a generator's passphrase, a change's line break
                                  "password . . ", ". ", "WPA2 key ", "TOTP secret ", "the password is Ab-Cd-Ef-1-", "password from\n", "パスワードは ab ", "${a.", "-u a:/", "password from aB1#cD2eF3\nto ",
                                  # red36: MySQL's hash, Airtable's token
                                  "*2470C0C0", "*", "patAbCdEf12345678.", "パスワード変更しました → ", "密码已更新了：",
                                  "を変更しました", "token=>", "token=>a", "secrets.a_token => ",
                                  "MFA seed: ", "2fa seed ", "TOTP secret ab2d ", "seed ABCD ", "mfa 2fa ", "wpa2 psk ", "wpa-", "助记词：abandon ", "seed phrase: ", "ETag: ", 'etag", "value": "\\"',
                                  "-----BEGIN CERTIFICATE-----", "-----END PUBLIC KEY-----a", "$ANSIBLE_VAULT;\n",
                                  "consul kv put a/", "etcdctl -a put ", "consul kv put a password ",
                                  "password, new one ", ", new one is ", "rclone obscure ", "密码在这", "//a:@", "etcdctl -a b ", "seed is ", "seed 是 A",
                                  # red37: MySQL's hash in lower case
                                  "password *2470c0c06dee42fd1618bb99005adca2ec9d1e19 ", "| *2470c0c06dee42fd1618bb99005adca2ec9d1e19", "*a",
                                  # red37: checksum tools' lines, a digest's name before it
                                  "d41d8cd98f00b204e9800998ecf8427e  a\n", "md5 (a) = d41d8cd98f00b204e9800998ecf8427e ", "MD5 (",
                                  "md5 of a is d41d8cd98f00b204e9800998ecf8427e", "d41d8cd98f00b204e9800998ecf8427e ", "ETag is ",
                                  # rev27: a password named before the digest's name
                                  "pwd md5 d41d8cd98f00b204e9800998ecf8427e ",
                                  # red37: cloud key ids
                                  "AKIDa", "LTAIa", "LTAI0123456789ab", "--password-file=<(echo ", "--pass <(", "--a-b-c-d-e-f-g-h", "--passpasspass", "--pin 1234 ", "--a-pin ", "-a-a-a-a-pin 1234 ",
                                  # red39: values to their end, open and escaped quotes, a generator's output
                                  'password: "a', "password = 'a\\'", 'DB_PASSWORD="a', 'DB_PASSWORD="a1b2c3d4\n', "password=a", "密码：a",
                                  "IDENTIFIED BY 'a\\'", "$ pwgen\n", "$ pwgen a1B2c3D4e5 ", ">>> secrets.token_hex(\n", "openssl rand -hex ",
                                  "FTP(a, ", "FTP('a,", "a.simple_bind_s(", "a.create_user(a, ", "signInWithEmailAndPassword(a, ",
                                  "CURLOPT_USERPWD, 'a:", "bcrypt.compare('", ".bcrypt.hash('", "crypt('a", "Header.Add('a', ",
                                  "curl -u :", "composer config -g http-basic.a b ", "bundle config a.b c:", "smbclient //a/b ",
                                  "echo a | kinit ", "git config a.smtppass ", "sshpass -p 'a\\'", "mysql -pa", '密码是"a\\"', "password is 'a\\'",
                                  'getenv("A_KEY", "a\\"', "default='a\\'", "gpg --passphrase 'a\\'", "echo a", "ENV A_PASSWORD a",
                                  # red40: markup's values to their end
                                  "<a>a", "<a a>a", "<a><![CDATA[a", "<key>a</key><string>a", 'key="a" value="a\\"', 'name: a,value: "a\\"', "name: a,value: 'a''", "name: a,value: a",
                                  "$ printenv a\n", "Name: a\nValue: ", '1) "requirepass"\n2) "a', 'generated for a: a ', '] "AUTH" "a',
                                  "(password a", "password=[a", "authorization bearer a1", "authorization: a, signature=a1b2c3d4",
                                  "\nproxy_set_header a \"a\\\"", "\nadd_header a a", "\nadd_header a \"a\\'", "sshpass -p 'a", "sshpass -p 'aaaa", "--password 'aaaa", "--passphrase 'a", "--passphrase \"aaaa", "Auth('a', `a",
                                  ";pwd={", ";pwd={a}}", ";pwd={a;", '<property name="a"><value>a', '<entry key="a">a', "ParameterKey=a,ParameterValue=a",
                                  "<name>a</name><value>a", "<auth-user-pass>\na\na", "\n[a]:1 a:a", '\n~ a = "a\\" -> "a\\"', '"a": {"value": "a\\"',
                                  '\n"a" "aaaaaaa"', ".a_key('a\\'", '?a_token=" + "a\\"', "&quot;a&quot;:&quot;a", "%22a%22%3A%22a", "a%3Da%3D", "%26a%3Da",
                                  "'a_session': 'aaaaaaaaaaaaaaaa", 'Cookie{Name: "a", Value: "a\\"', '"name": "a", "value": "aaaaaaaaaaaaaaaa',
                                  "a\taaaa", "a\tTRUE\ta\tTRUE\t0\ta\taaaa", "aaaa\taaaa\t.a.a\t/",
                                  "A := a", '"name": "A", "value": "a\\"', '"value": "a\\", "name": "A"', '(or (env :a) "a\\"', 'cmd("AUTH").arg("a\\"',
                                  "auth:\n - a\n - a", "auth: [a, a", "'aaaa' | password_hash", "crypt('aaaa", 'generate_password_hash("aaaa',
                                  "#a:", "a:!", "!a:a", "a:a@a!", "//a:a/", "//a:/", '\n: PSK "a', '\n: PSK "a"',
                                  "\npassword\naaaaaa", "-u a -p 'a", "-U a%a", "A_TOKEN是a", "log in as a / a!", "with password a", '"a" + "aaaaaa', "/a!", "\nlocalhost:1234:a:a:a", "\nlocalhost:1234:a:a:a\\:", "echo a:b:c:d:a", "--from-literal=a=a", '--from-literal="a=a', "--from-literal=a='a\\'", 'expect "password"; send "a', "IDENTIFIED BY a", "jdbc:oracle:thin:a/", "sqlplus a/a", ':a "a\\"', '(def a "a', 'a = ("a\\"', 'coalesce .a "a\\"', '.a[0] // "a\\"', "<td>password</td><td>a", "<th>a</th><td>a b", "pass:", "pass:a!", "!pass:a#1", "pass is a!", '"--password", "a\\"', '"-p", "', '"mysql", "-pa',
                                  # red41: a label, a clause in Chinese and ： before a value; a password struck through
                                  "密码改了：a", "token，存：a1B2c3D4e5!", "pwd 改 → ", "password:~~a~~ ", "~~a~~", "密码：~~a",
                                  # red41: Java EE's env-entry, .NET's setting, an env entry value first
                                  "<env-entry-name>a</env-entry-name><env-entry-value>a", "<param-name>a</param-name><description>a</description><param-value>a", '<setting name="a" a="b"><value>a', "\n- value: a\n name: a",
                                  '\n- value: "a\\"', "\n- value: 'a''",
                                  # red41: a query's # run, a short query name's value
                                  "&a=a#a#", "&password=a#", "?sid=", "&jwt=a",
                                  # red41: logins in a chat to their end
                                  "u:a:", ",u:a:", "creds: a / a", "ID:a,パス:", "ID:a,パス:a", "账号密码a和", "1.2.3.4 a ", "ssh a@b ", "a 是密码", "密码", "a/a ", "a/aaaaaa 登录",
                                  # red41: Kotlin's pair, a proxy's link, a map's entry, a session id to their end
                                  '"a" to "a\\"', "trojan://a", "map $a_key $a {\n a", "\n aaaaaaaaa ", '"session_id": "a',
                                  # red41: a comment's * around a label
                                  "/* password: ", "* a *",
                                  # red41: a change's old password and a list's items to their end
                                  "pwdfrom", "password from a", "pwd a", "pwd from aaaa to ", "[redacted], a", "[redacted] and a[redacted] and ",
                                  # red41: struck through in HTML or one ~, after a change's verb
                                  "password: <del>a", "password:<s>a</s>", "pwd~a~", "密码改为：~", "token 过 a", "비밀번호는 이 a",
                                  # red41: MySQL's SET PASSWORD FOR
                                  "SET PASSWORD FOR a", "SET PASSWORD FOR a = PASSWORD('a", "SET PASSWORD ",
                                  # red41: a call setting a cookie
                                  "cookie('a', 'a\\'", "setcookie(", "cookies.set('a', '",
                                  # red41: a table's pass beside a user's
                                  "user,pass\n", "a,a1!\n",
                                  # red41: an English clause before a value, a value before an English label
                                  "password a: ", "password a:a", "a is the password ", "a is the password a ",
                                  # red41: a tool's setting element, a parameter's Name and Value
                                  '<arg key="a">a', "<Name>a</Name><Value>a", "{value: a", "{value: a, name: a", "WIFI:;P:a", "WIFI:P:", "creds -> a:", "creds → ",
                                  # red31c: an assignment's value in a shell's default, a query's pair, after a redacted pair
                                  "${a_pw:-", "a_pw=${a:-a", "?a_pw=a&", "pw: a/[redacted]",
                                  # red31c: prose's who-set-it, an account's label and a space, creds for a place, 私钥, a question, a value before its label
                                  "requirepass 我们已经", "A_TOKEN 我设成a", "账号 a/", "账号 a / a", "creds for a ", "creds for a -> a", "私钥内容：a", "密码是？是 a",
                                  "password? a", "password?", "aaaaaa as the password ", "aaaaaa (the token", "aaaaaa 设成 token", "aaaaaa 设成", "login with a and a",
                                  "ssh a@a password ", "1.1.1.1 a pw:", "\nPASS ", "\nPASS a", "--- PASS: a1B", "code for 2fa is ", "code for 2fa backup: a1B2c3D4e5 ",
                                  "aaaaaa, the password", "aaaaaa - password ", "aaaaaa (password", "a 作为 API key", "login as a with a", "帐号 a / a", "密码是啥？a",
                                  "creds: a | a", "creds: a // ", "账号密码：a | a", "アカウント a / a", "a@a / aaaaaa", "/aaaaaa", "pw? it's a", "aaaaaa is the secret",
                                  "aaaaaa をパスワードに", "A_KEY を aaaaaa に", "A_KEY を", "aaaaaa works as ", "aaaaaa should work as the token ", "aaaaaa 是 token", "a_a_session=", "sessionid=aaaaaaaaaaaaaaa1", "a=a", "user  pass\n", "a  password\na  a1\n", "a  a  ", "secrets:\n", "secrets:\n a: a\n", " a: 'a'  #\n", "<tr><th>password</th></tr>", "<tr><td>a1B2c3D4e5</td>", "<th>", "<tr ", ".changeUserPassword('a', 'a", "sp_addlogin 'a',", "aaaaaa (it's the db ", "admin/a1B2c3D4e5 ", "aToken 配的 a", "aaSecret"])
def test_a_run_of_key_prefixes_is_read_once(unit):
    """A run of a key's prefix joined by a character its body takes (``.sk-.sk-...``), or of a label, a look-alike
    letter or a passphrase: each would start a match that reads to the run's end (the wrapped-key pattern did: 25 ->
    100 KB took 97 -> 1,546 ms). The regex engine's steps cannot be counted from Python, so each step of redaction
    is timed on its own at n and 4n (2 K and 8 K characters): about 4 times as much when linear, 16 when quadratic.
    A step's cost is not hidden beside the others' (the whole redaction is 30 steps), so 2 K characters show it; a
    pattern as quadratic as that one costs 16 times as much at 4n. A step is above when it costs 8 times as much
    and over 4 ms at 8 K: for a quadratic step as sensitive as 16 ms at 16 K was (a quarter of the cost at half the
    length), at half the CPU a unit (a step as quadratic as that pattern: 2.7 -> 41 ms)."""
    assert _steps_above(unit, 2_000, ratio=8, floor=0.0005) == []


def test_the_label_pass_is_skipped_where_no_label_is():
    """:data:`secret_labels.LABELLED` runs only on a text holding one of its labels (:mod:`prefilter`): past 128 labels'
    strings the gate reads none and the pass runs on every text (this round's languages took it to 159: 20 times the
    cost on a text of code without a label)."""
    from project_history_recall import prefilter, secret_labels

    assert prefilter.required(secret_labels.LABELLED) is not None
    assert not prefilter.may_match(secret_labels.LABELLED, ".login(a, " * 400)


def test_a_long_default_is_judged_in_linear_time():
    """A default's value runs to its end however long, and is then judged (:data:`secret_patterns.DEFAULT_SECRET`),
    whose look-ahead for both cases (``\\S*[a-z]\\S*[A-Z]``) backtracked over the value once per letter: a default of
    8 K characters of ``a1`` took 0.2 s, 4 times as long 16 times that. Now each look-ahead reads the value once."""
    def cost(size: int) -> float:
        text = 'os.getenv("A_KEY", "' + "a1" * (size // 2) + '")'
        return min(sum(_step_costs(text)) for _ in range(2))

    small, large = cost(8_000), cost(32_000)
    assert large <= 8 * max(small, 0.002), (small, large)


def test_a_wide_table_row_is_rebuilt_once():
    """A CSV header of w password columns over a row of w passwords: each cell of the row is redacted, and the row was
    rebuilt once per cell (36,000 columns: 0.33 s, 72,000: 1.30 s). Now built once: 4 times the width, about 4 times
    the work."""
    import time

    from project_history_recall import table_secrets

    def cost(width: int) -> float:
        text = ",".join(["db_pw"] * width) + "\n" + ",".join(["Ab1!xyz"] * width) + "\n"
        best = float("inf")
        for _ in range(2):
            start = time.thread_time()
            out = table_secrets.redact(text, "[redacted]")
            best = min(best, time.thread_time() - start)
        assert out.count("[redacted]") == width
        return best

    small, large = cost(4_000), cost(16_000)
    assert large <= 8 * max(small, 0.002), (small, large)


def test_a_password_check_reads_what_follows_the_value_in_place():
    """Whether a letters-only value after a password label ends its clause was read from a copy of the rest of the
    text: lines of ``password: abc`` cost n² in copying (100 K / 400 K / 1.6 M characters: 110 / 553 / 3,867 ms).
    A copy is cheap next to a pattern's reading, so it shows only in long texts: with the copies, the assignment step
    costs 15 times as much at 1.6 M characters as at 400 K; without, every step 4 to 6 times."""
    assert _steps_above("password: abc\n", 400_000, ratio=8) == []


# -- secrets the hostile review found sent: shapes, wrapping, escapes, invisible characters --------------------

GIT_ID = "3f786850e387550fdab836ed7e6dc881de23001b"
PASSWORD = "Sup3rS3cretPw"
SEED_WORDS = "abandon ability able about above absent absorb abstract absurd abuse access accident"
#: (text as written, the secret in it). Every 8-character piece of the secret must be gone.
LEAKED_SHAPES = [
    ("psql --password=Sup3rS3cretPw", PASSWORD), ("docker login --password Sup3rS3cretPw --username bob", PASSWORD),
    ("PGPASSWORD=Sup3rS3cretPw psql -h db", PASSWORD), ("MYSQL_PWD=Sup3rS3cretPw", PASSWORD), ("DB_PASS=Sup3rS3cretPw", PASSWORD),
    ("PASS=Sup3rS3cretPw", PASSWORD), ("STRIPE_KEY=Sup3rS3cretPw", PASSWORD), ("auth=Sup3rS3cretPw", PASSWORD),
    ("credentials=Sup3rS3cretPw", PASSWORD), ("mysql -u root -pSup3rS3cretPw shop", PASSWORD),
    ("curl -u user:Sup3rS3cretPw https://x", PASSWORD), ("sshpass -p 'Sup3rS3cretPw' ssh root@host", PASSWORD),
    ("gh auth login --with-token Zx9qLm2Nw8Pv3Rt5", "Zx9qLm2Nw8Pv3Rt5"),
    *[(f"PASSWORD=Sup3r{c}S3cretPw99", "S3cretPw99") for c in ",;'`)]}>€"],
    ('PASSWORD="it\'s-S3cretPw99"', "S3cretPw99"),
    ("PASSWORD＝Sup3rS3cretPw", PASSWORD), ("密码＝Sup3rS3cretPw", PASSWORD),
    ("token是Sup3rS3cretPw", PASSWORD), ("API key是Sup3rS3cretPw", PASSWORD), ("私钥是Zx9qLm2Nw8Pv3Rt5", "Zx9qLm2Nw8Pv3Rt5"),
    ("秘密：Sup3rS3cretPw", PASSWORD), ("密匙是Zx9qLm2Nw8Pv3Rt5", "Zx9qLm2Nw8Pv3Rt5"), ("密码设置成Sup3rS3cretPw了", PASSWORD),
    ("密码改为Sup3rS3cretPw", PASSWORD), ("the api key is Zx9qLm2Nw8Pv3Rt5", "Zx9qLm2Nw8Pv3Rt5"),
    ("my token is Zx9qLm2Nw8Pv3Rt5", "Zx9qLm2Nw8Pv3Rt5"), ("the secret is Sup3rS3cretPw", PASSWORD),
    ("APIキーはZx9qLm2Nw8Pv3Rt5です", "Zx9qLm2Nw8Pv3Rt5"), ("API 키는 Zx9qLm2Nw8Pv3Rt5입니다", "Zx9qLm2Nw8Pv3Rt5"),
    ("Das Passwort ist Sup3rS3cretPw", PASSWORD), ("le mot de passe est Sup3rS3cretPw", PASSWORD),
    ("la contraseña es Sup3rS3cretPw", PASSWORD),
    ("key sk-proj-T3BlbkFJ4x9Q\u200bm2Lw7Vn5Rk8Pz1Yc6Hd0aB here", "m2Lw7Vn5Rk8Pz1Yc6Hd0aB"),
    ("AKIA\u200bZ7X3C9V5B1N8M2Q4", "Z7X3C9V5B1N8M2Q4"), ("pass\u200bword=Sup3rS3cretPw", PASSWORD),
    ("key sk-proj-T3Blbk\u00adFJ4x9Qm2Lw7Vn5Rk8Pz1Yc6Hd0aB", "FJ4x9Qm2Lw7Vn5Rk8Pz1Yc6Hd0aB"),
    ("sk-proj-T3BlbkF\u0301J4x9Qm2Lw7Vn5Rk8Pz1Yc6Hd0aB", "J4x9Qm2Lw7Vn5Rk8Pz1Yc6Hd0aB"),
    ("key ｓｋ－ｐｒｏｊ－Ｔ３ＢｌｂｋＦＪ４ｘ９Ｑｍ２Ｌｗ７Ｖｎ５Ｒｋ８Ｐｚ１Ｙｃ６Ｈｄ０ａＢ", "ｍ２Ｌｗ７Ｖｎ５Ｒｋ８"),
    (unicodedata.normalize("NFD", "비밀번호는 Sup3rS3cretPw"), PASSWORD),
    ("key sk-proj-T3BlbkFJ4x9Qm2Lw7\nVn5Rk8Pz1Yc6Hd0aB", "Vn5Rk8Pz1Yc6Hd0aB"), ("token ghp_Z8x7C6v5\nB4n3M2a1S9d8F7g6H5j4K3l2P1o0", "B4n3M2a1S9d8"),
    ('"{\\"password\\": \\"Sup3rS3cretPw\\"}"', PASSWORD), ('"DB_PASSWORD=\\"Sup3rS3cretPw\\""', PASSWORD),
    ('{"body": "{\\"token\\":\\"Sup3rS3cretPw\\"}"}', PASSWORD), ('"\\u5bc6\\u7801\\u662fhGzPp1nMic1x"', "hGzPp1nMic1x"),
    ("https://maps.googleapis.com/maps/api?key=Zx9qLm2Nw8Pv3Rt", "Zx9qLm2Nw8Pv3Rt"),
    ("https://b.s3.amazonaws.com/f?X-Amz-Signature=abcdef0123456789&X-Amz-Credential=AKIAZ7X3C9V5B1N8M2Q4", "abcdef0123456789"),
    ("https://acct.blob.core.windows.net/c?sv=2020-08-04&sig=AbCdEf%2BgHiJkLmNoP%3D", "AbCdEf%2BgHiJkLmNoP"),
    ("Cookie: theme=dark; sessionid=Zx9qLm2Nw8Pv3Rt5Ys1Ub", "Zx9qLm2Nw8Pv3Rt5"),
    ("mysql://root:p@ss:w0rd!@localhost/db", "ss:w0rd!"),
    ("AZURE_CLIENT_SECRET value abc8Q~Zx9qLm2Nw8Pv3Rt5Ys1Ub6Vc4W.d0Xe2Yf_", "Zx9qLm2Nw8Pv3Rt5"),
    ("xapp-1-A0123456789-1234567890123-abcdef0123456789abcdef0123456789", "abcdef0123456789"),
    ("glrt-AbCdEfGhIjKlMnOpQrSt", "AbCdEfGhIjKlMnOp"),
    ('{"auths":{"https://index.docker.io/v1/":{"auth":"dXNlcjpTdXAzclMzY3JldFB3"}}}', "dXNlcjpTdXAzclMz"),
    (f"GITHUB_TOKEN {GIT_ID}", GIT_ID), (f"secret key {'9f86d081884c7d65' * 4}", "9f86d081884c7d65"),
    ("heroku api key 0c4f8e2a-3b1d-4e6f-9a8b-7c6d5e4f3a2b", "0c4f8e2a-3b1d-4e6f"),
    ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnop"),
    ("PASS=correct-horse-9!", "correct-horse-9"), ("the api key is x9-Qm2L-w7Vn", "x9-Qm2L-w7Vn"),
    ("token是abC9-xY7q-Zz12", "abC9-xY7q-Zz12"),
    ("vercel token AbCdEfGhIjKlMnOpQr12 for the preview", "AbCdEfGhIjKlMnOp"), ("key Zx9qLm2Nw8Pv3Rt5Ys1Ub6Vc4W", "Zx9qLm2Nw8Pv3Rt5"),
    ("https://acme.webhook.office.com/webhookb2/0c4f8e2a-3b1d-4e6f-9a8b-7c6d5e4f3a2b@0c4f8e2a/IncomingWebhook/"
     "abcdef0123456789abcdef0123456789/0c4f8e2a", "abcdef0123456789"),
    ("ID_AKIAZ7X3C9V5B1N8M2Q4", "Z7X3C9V5B1N8M2Q4"), ("idAKIAZ7X3C9V5B1N8M2Q4", "Z7X3C9V5B1N8M2Q4"),
    ("A3TAZ7X3C9V5B1N8M2Q4", "Z7X3C9V5B1N8M2Q4"), ("sk-abcdefghijklmnopqrstuvwxyzABCDEFGHIJ", "ijklmnopqrstuvwx"),
    ("eyJhbGciOiJub25lIn0.eyJzdWIiOiIxMjM0NTY3ODkwIn0.", "eyJzdWIiOiIxMjM0"),
    ("https：//bob:Sup3rS3cretPw@github.com", PASSWORD), ("//bob:Sup3rS3cretPw@github.com", PASSWORD),
    ("contraseña=Sup3rS3cretPw", PASSWORD), (unicodedata.normalize("NFD", "contraseña: Sup3rS3cretPw"), PASSWORD),
    # a key run into CJK text, without a label or after one joined by 是
    ("这个是Zx9qLm2Nw8Pv3Rt5Ys1Ub6Vc4Wd0Xe2别外传", "Zx9qLm2Nw8Pv3Rt5Ys1Ub6Vc4Wd0Xe2"),
    ("我的key是AbCdEfGhIjKlMnOpQr12别外传", "AbCdEfGhIjKlMnOpQr12"), (f"GITHUB_TOKEN是{GIT_ID}", GIT_ID),
    ("GITHUB_TOKEN AbCdEfGhIjKlMnOpQr12", "AbCdEfGhIjKlMnOpQr12"),
    ("token abcdefghij0123456789klmnopqrst", "abcdefghij0123456789klmnopqrst"),
    # an OpenAI key cut short by a log, or split by a shell's escaped line break or a JSON string's \n
    ("using sk-proj-T3BlbkFJ4x9Q… (cut)", "T3BlbkFJ4x9Q"),
    ('"sk-proj-T3BlbkFJ4x9Q\\\nm2Lw7Vn5Rk8Pz1Yc6Hd0aB"', "m2Lw7Vn5Rk8Pz1Yc6Hd0aB"),
    ('{"k": "sk-proj-T3BlbkFJ4x9Q\\nm2Lw7Vn5Rk8Pz1Yc6Hd0aB"}', "m2Lw7Vn5Rk8Pz1Yc6Hd0aB"),
    (f"seed phrase: {SEED_WORDS}", SEED_WORDS), (f"助记词：{SEED_WORDS}别外传", SEED_WORDS),
    (f'MNEMONIC="{SEED_WORDS} account accuse achieve acid acoustic acquire across act action actor actress actual"',
     "actor actress actual"),
    (f'{{"type": "service_account", "private_key_id": "{GIT_ID}"}}', GIT_ID),
    ("p\u0430ssword=Sup3rS3cretPw", PASSWORD), ("\u03a1ASSW\u041eRD: Sup3rS3cretPw", PASSWORD),
    ("  password: correcthorsebatterystaple", "correcthorsebatterystaple"), ("my password is correcthorse, lol", "correcthorse"),
    # seed phrases in the shapes wallets and people write them: any case, listed, numbered, after other joiners
    (f"Seed phrase: {SEED_WORDS.capitalize()}", SEED_WORDS[8:]), (f"SEED PHRASE: {SEED_WORDS.upper()}", SEED_WORDS.upper()),
    ("seed phrase: " + ", ".join(SEED_WORDS.split()), "absorb, abstract"),
    ("recovery phrase:\n" + "\n".join(f"{i}. {w}" for i, w in enumerate(SEED_WORDS.split(), 1)), "abstract"),
    ("recovery phrase: " + " ".join(f"{i}) {w}" for i, w in enumerate(SEED_WORDS.split(), 1)), "abstract"),
    ("mnemonic = " + str(SEED_WORDS.split()).replace("'", '"'), '"abstract"'), (f"my seed phrase was: {SEED_WORDS}", SEED_WORDS),
    (f"my recovery phrase {SEED_WORDS}", SEED_WORDS), (f"Secret Recovery Phrase - {SEED_WORDS}", SEED_WORDS),
    (f"wallet words: {SEED_WORDS}", SEED_WORDS), (f"seed phrase: {SEED_WORDS.replace('absorb', 'absorv')}", "abstract absurd"),
    # passphrases of words run together, long or Capitalised, however their clause ends
    ("password: CorrectHorseBatteryStaple", "CorrectHorseBatteryStaple"), ("password: purpleelephantdancing", "purpleelephantdancing"),
    ("my password is horsebatterystaplefriendly.", "horsebatterystaplefriendly"),
    ("password: correcthorsebatterystaple — keep it", "correcthorsebatterystaple"),
    ("password: correcthorsebatterystaple: done", "correcthorsebatterystaple"),
    # two joiners after a label, a JSON-escaped CRLF inside a key, groups of one case joined by -, look-alike letters
    ("我的key是：AbCdEfGhIjKlMnOpQr12别外传", "AbCdEfGhIjKlMnOpQr12"), (f"GITHUB_TOKEN是：{GIT_ID}", GIT_ID),
    ("token就是AbCdEfGhIjKlMnOpQr12", "AbCdEfGhIjKlMnOpQr12"), ("ACCESS_KEY AbCdEfGhIjKlMnOpQr12", "AbCdEfGhIjKlMnOpQr12"),
    ('{"k": "sk-proj-T3BlbkFJ4x9Q\\r\\nm2Lw7Vn5Rk8Pz1Yc6Hd0aB"}', "m2Lw7Vn5Rk8Pz1Yc6Hd0aB"),
    ("token abcdefghij-0123456789-klmnopqrst", "abcdefghij-0123456789-klmnopqrst"),
    ("api_\u03baey: Zx9qLm2Nw8Pv3Rt5", "Zx9qLm2Nw8Pv3Rt5"),
    # seed phrases in any format, with a label the old rule did not know or none
    (f"**Seed phrase:** {SEED_WORDS}", SEED_WORDS), (f"Seed phrase: `{SEED_WORDS}`", SEED_WORDS),
    (f"Seed phrase (12 words): {SEED_WORDS}", SEED_WORDS), (f'MNEMONIC: str = "{SEED_WORDS}"', SEED_WORDS),
    (f'walletMnemonic: "{SEED_WORDS}"', SEED_WORDS), (f'const mySeedPhrase = "{SEED_WORDS}";', SEED_WORDS),
    ("seed phrase:\n" + "\n".join("• " + w for w in SEED_WORDS.split()), "abstract"),
    ("seed phrase:\n" + "\n".join("* " + w for w in SEED_WORDS.split()), "abstract"),
    ("seed phrase: " + " ".join(f"#{i} {w}" for i, w in enumerate(SEED_WORDS.split(), 1)), "abstract"),
    ("| # | word |\n" + "\n".join(f"| {i} | {w} |" for i, w in enumerate(SEED_WORDS.split(), 1)), "abstract"),
    (f"<p>Seed phrase:</p><p>{SEED_WORDS}</p>", SEED_WORDS), ("<ol><li>" + "</li><li>".join(SEED_WORDS.split()) + "</li></ol>", "abstract"),
    *[(f"seed phrase: {SEED_WORDS.replace(' ', sep)}", SEED_WORDS.replace(" ", sep)) for sep in ("/", "·", "_", "、")],
    (f"my recovery phrase for metamask is: {SEED_WORDS}", SEED_WORDS), (f"my seed phrase is the following: {SEED_WORDS}", SEED_WORDS),
    (f"secret phrase: {SEED_WORDS}", SEED_WORDS), (f"mnemonics: {SEED_WORDS}", SEED_WORDS), (f"The 12 words: {SEED_WORDS}", SEED_WORDS),
    (f"{SEED_WORDS} <- that's my seed phrase", SEED_WORDS), (SEED_WORDS, SEED_WORDS),
    (f"{SEED_WORDS} abandonx abilityy ablee account accuse achieve acid acoustic acquire across act action",
     "acquire across act action"), (f"{SEED_WORDS} abandonx abilityy ablee {SEED_WORDS[:60]}", SEED_WORDS[:60]),
    ("abandonn abilityy " + SEED_WORDS.split(" ", 2)[2], SEED_WORDS.split(" ", 2)[2]),
    (SEED_WORDS.replace("accident", "accidentt"), "accidentt"),
    # a label set off by Markdown or HTML, and more ways to join a key to its label
    *[(f"{label} Sup3r$ecret!9", "Sup3r$ecret!9") for label in (
        "**Password:**", "- **Password**:", "*Password:*", "__Password:__", "**DB_PASSWORD:**", "`DB_PASSWORD`:",
        "**密码**：", "<b>Password:</b>")],
    ("| Password | Sup3r$ecret!9 |", "Sup3r$ecret!9"), ("**Token:** Zx9qLm2NpR4tVb7Kc3Wd", "Zx9qLm2NpR4tVb7Kc3Wd"),
    ("**Secret:** Zx9qLm2NpR4tVb7Kc3Wd", "Zx9qLm2NpR4tVb7Kc3Wd"),
    *[(f"{label}Zx9qLm2NpR4tVb7Kc3Wd", "Zx9qLm2NpR4tVb7Kc3Wd") for label in (
        "token `", "token => ", "token -> ", "access key id: ", "key的值是", "key值为", "キー：", "API key for prod: ",
        "token（新）：", "token\n", "Key - ")],
    # a passphrase in capitals or Capitalised, after pwd, pass, passcode, PassPhrase, before a quote or an emoji
    ("password: Correcthorsebatterystaple", "orrecthorsebatterystaple"),
    ("PASSWORD: CORRECTHORSEBATTERYSTAPLE", "CORRECTHORSEBATTERYSTAPLE"),
    *[(f"{label}: correcthorsebatterystaple", "correcthorsebatterystaple") for label in ("pwd", "pass", "passcode", "PassPhrase")],
    ("'password: correcthorsebatterystaple'", "correcthorsebatterystaple"),
    ("password: correcthorsebatterystaple 🙂", "correcthorsebatterystaple"),
]


def test_the_seed_phrase_word_list_is_read_from_beside_the_module():
    """The BIP-39 list seed phrases are checked against is a data file of the package: without it, every word of 3 to
    8 letters counts, and prose is taken for a phrase."""
    from project_history_recall import seed_phrases

    words, _ = seed_phrases.words()
    assert len(words) == 2048 and {"abandon", "zoo"} <= words


def leaked(secret: str, out: str, n: int = 8) -> list[str]:
    """The ``n``-character pieces of ``secret`` still in ``out``."""
    return [secret[i : i + n] for i in range(len(secret) - n + 1) if secret[i : i + n] in out]


@pytest.mark.parametrize("text,secret", LEAKED_SHAPES)
def test_no_piece_of_a_secret_is_sent(text, secret):
    """Names, flags, labels, joiners, symbols inside values, escaped quotes, URL parameters, formats, invisible and
    full-width characters and line breaks that let a secret through whole or in part."""
    from project_history_recall import embeddings

    out = embeddings.OpenAIProvider.outbound_text(text)
    assert "[redacted]" in out and not leaked(secret, out), out


@pytest.mark.parametrize("text", [
    f"We reverted {GIT_ID} and https://github.com/org/repo/blob/{GIT_ID}/src/main.py is the file",
    "pip install numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    "s3://bucket/uploads/2024/03/11/a8f3k2m9x7q1w4e6r5t0y2u8i3o9p1s7.png",
    "/nix/store/b6gvzjyb2pg0kjfwrjmg1vfhh54ad73z-python3-3.11.6/bin/python3",
    "arn:aws:iam::123456789012:role/service-role/MyLambdaRole-1A2B3C4D5E6F",
    "https://chatgpt.com/share/67a1b2c3-d4e5-8f90-a1b2-c3d4e5f60718 and uuid 123e4567-e89b-12d3-a456-426614174000 in prose",
    "https://www.youtube.com/watch?v=dQw4w9WgXcQ&t=42 and https://example.com/search?q=websocket+reconnect",
    "max_tokens: 4096, temperature: 0.2, auth: true, credentials: 'same-origin', PWD=/home/bob/project",
    "PRIMARY_KEY=id, SORT_KEY=created_at; Set-Cookie: theme=dark; Path=/",
    "primary key idx_users_email_unique_lower, the token refresh_access_token_handler, key ORDERS_BY_CUSTOMER_2024",
    "auth: oauth2, \"auth\": \"bearer-token-v2\", S3_KEY=uploads/2024/03/file.png DEPLOY_KEY=~/.ssh/deploy_key",
    "ROUTE_KEY: /api/v1/users REDIS_KEY=session:123 ENV_KEY=production-2",
    "the secret key is SECRET_KEY in settings.py. The private key is id_ed25519; the access key is AKIA-style",
    "私钥是RSA-4096的，token是UUIDv4格式",
    "数据库迁移方案：先加列，再回填。密码是多少？token是什么意思？",
    "the secret is in the vault; my token is expired; Das Passwort ist geheim",
    "docker run -u 1000:1000 -p 8080:80 app && mysql -u root -p shop",
    "headers: 👨‍👩‍👧 family emoji, ＡＢＣ full-width letters, and a soft\u00adhyphen",
    # near misses of a key in CJK text and of a random value after a label
    "commit 3f78685 and cache key 3f78685; sort_key 20240311094200123456, partition_key user1234abcd",
    "token refresh_access_token_handler_v2, key v2_20240311_add_currency_column, token gpt4turbo2024preview",
    "这个产品叫ChatGPT4o，我们用的是Claude3Opus20240229模型，消息msg_01XFDUDYJgAACzvnptvVoYEL失败了",
    "ksuid 0ujtsYcgvSTl8PAuAdqWYSMnLOv, nanoid V1StGXR8_Z5jdHi6B-myT, key 123e4567-e89b-12d3-a456-426614174000",
    "文件在/home/bob/projects/AbCdEfGh1234IjKlMnOp5678下面，sk-ant-design 和 sk-proj-settings 不是密钥",
    # near misses of a seed phrase and of a passphrase
    "the mnemonic: every good boy deserves fudge; seed: 42; RANDOM_SEED=1234",
    "seed phrase: write it down on paper and keep it in a safe place, never online",
    "password: required, password: autogenerated, password: alphanumeric, password: SecretStr",
    "Your password is incorrect. The password is unrecoverable. The password is stored in vault",
    "Пароль от Dockerа лежит в сейфе",
    "seed is used when the random module builds each test case for the suite that runs",
    "recovery phrase is shown once when you create the wallet and never again after that point",
    "seed: the tests fix the seed so that every run gets the same data set back; mnemonic: mov copies a register",
    "password: PasswordInputField, def login(password: ConfirmPasswordField), password: unrecoverable",
    # near misses of a CamelCase name of 28 to 31 characters and of a one-case value after key or token
    "调用GetUserProfileByAccountIdV2Ok接口, 在 Base64EncodeUTF8StringToBytes 里, S3BucketPolicyForCDNv2Origin",
    "cache key userprofile20240311v2region7x, primary key pk20231104orderitems01abc, S3 object key 2024q3reports4region7summary9",
    "signing key 20240311-rotation-policy-annual, token release-20240311-abcdef-candidate",
    # near misses of a seed phrase without a label: English prose of common words, plurals, lists, code repeating names
    "Just make sure you have enough space, then you can install it again and it will work the same way as before",
    "Patch 7.4.1121 Problem: test_expand leaves files behind. Solution: Edit another file before the next test runs",
    "Use the arrow keys to move around and place the text where you want; enter the same key again to confirm it",
    "return year, month, day, hour, minute, second, year, month, day, hour, minute, second",
    "apple banana cherry grape lemon mango orange peach pear plum berry melon",
    "north south east west, left right up down, inside outside above below",
    "seed:\n- account\n- action\n- address\n- admin\n- alert\n- alias\n- audit\n- badge\n- banner\n- batch\n- brand\n- bridge",
    # near misses of a marked label, a joined key and a passphrase
    "**Note:** the password is in the vault. **Password:** see the vault. **Token:** expires after one hour",
    "| Password | Description |\n|---|---|\n| `DB_PASSWORD`: set in .env | <b>Password:</b> required |",
    "token -> lexer -> parser -> evaluator; key => value pairs in the hash map keep their insertion order",
    "API key for prod: see 1Password; the access key id: AKIA-style ids are public",
    "PassPhrase: PassphraseInputField, pass: required, PASSWORD: REQUIRED, 'password: required', bypass: enabledforadmins.",
    "password: Autogenerated, password: correcthorsebatterystaple and the user is admin",
    # review 36: a git id in bold or in capitals, a patch's name near pat
    "**9FCEB02D0AE598E95DC970B74767F19372D61AF8** is the release; *9fceb02d0ae598e95dc970b74767f19372d61af8* too",
    "9FCEB02D0AE598E95DC970B74767F19372D61AF8 *.py", "patch applied: pat_v2_migration.sql, base appAbCdEf12345678",
    # review 36: an ETag's MD5 in a header, boto3's output and a HAR file
    'ETag: "5d41402abc4b2a76b9719d911017c592"', 'If-None-Match: W/"5d41402abc4b2a76b9719d911017c592"',
    '{"name": "etag", "value": "\\"33a64df551425fcc55e4d42a148795d9\\""}', '"ETag": "\\"d41d8cd98f00b204e9800998ecf8427e\\""',
    # review 36: a certificate, a public key, a PGP signature and Ansible Vault's ciphertext are public or encrypted
    "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl9gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJzq8ZvT3mK9pL2xR7wN4bY6cJ1hF5gD0\n"
    "-----END CERTIFICATE-----",
    "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBGX1abcBEADKq7vLp2Wx9Zt3mN8bV5cX2zQ4rT6yU1iO9pA3sD5fG7hJ2kL4\n=Ab12\n-----END PGP PUBLIC KEY BLOCK-----",
    "-----BEGIN PGP SIGNATURE-----\n\niQEzBAEBCAAdFiEEq7vLp2Wx9Zt3mN8bV5cX2zQ4rT6yU1iO9pA3sD5fG7hJ2kL4\n-----END PGP SIGNATURE-----",
    "$ANSIBLE_VAULT;1.1;AES256\n62313365396662343061393464336163383764373764613633653634306231386433626436623361\n"
    "6134333665353966363534333632666535333761666131620a663537646436643839616531643561",
    # review 36: a command's flag after a name ending in a credential's word (db-password --data-file=-)
    "gcloud secrets versions add db-password --data-file=-", "gcloud secrets create api-token --replication-policy=automatic",
    # review 36: a JWT's header alone is public
    'the JWT header eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9 decodes to {"alg":"HS256","typ":"JWT"}',
    "header eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9 and eyJraWQiOiJrZXktMjAyNCIsImFsZyI6IkVTMjU2In0",
    # review 36: a package's version after a name ending in token (Cargo, Poetry, package.json)
    '[dependencies]\njsonwebtoken = "9"\nargon2 = "0.5"', 'jsonwebtoken = "9.2"', '"jsonwebtoken": "9.0.2"',
    'python-jose = "3.3.0"\nitsdangerous-token = "v2.1.0-beta"',
    # review 36: changeme and the JDK's changeit, defaults every attacker tries first
    "SECRET_KEY=changeme", "DB_PASSWORD=changeme", 'password = "change-me"', "mysql -uroot -pchangeme", "password: CHANGE_ME",
    "CREATE USER app IDENTIFIED BY 'changeme';", "keytool -list -keystore cacerts -storepass changeit",
])
def test_ordinary_developer_text_is_sent_unchanged(text):
    """Git ids, UUIDs, paths, wheel names, URLs without credentials, settings and prose keep every character:
    nothing is judged a secret, so even the invisible and full-width characters stay as written."""
    from project_history_recall import embeddings

    assert embeddings.OpenAIProvider.outbound_text(text) == text


_ZW = "\u200b\u200c\u200d\u2060\ufeff\u00ad"
#: Secret formats for the property: kind -> (make it, shortest first part a line break may leave).
_FORMATS = {
    **{kind: (lambda rng, k=kind: _KEYS[k][0] + _random(rng, _KEYS[k][1], _KEYS[k][2]) + _KEYS[k][3], len(_KEYS[kind][0]))
       for kind in _KEYS},
    "xapp": (lambda rng: "xapp-1-A" + _random(rng, _UPPER, 10) + "-" + _random(rng, string.digits, 13) + "-"
             + _random(rng, "0123456789abcdef", 64), 5),
    "glrt": (lambda rng: "glrt-" + _random(rng, _B62, 20), 5),
    "azure": (lambda rng: _random(rng, _B62, 3) + "8Q~" + _random(rng, _B62 + "~._-", 34), 37),
    "jwt": (lambda rng: "eyJ" + _random(rng, _B62, 20) + ".eyJ" + _random(rng, _B62, 40) + "." + _random(rng, _B62, 43), 3),
}


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(sorted(_FORMATS) + ["assignment", "label"]), script=st.sampled_from(["zh", "en"]),
       damage=st.sampled_from(["none", "newline", "invisible"]), seed=st.integers(0, 2**32 - 1))
def test_a_secret_cut_by_a_line_break_or_an_invisible_character_is_never_sent(kind, script, damage, seed):
    """A secret of each format, at a random place in Chinese or English prose, whole, wrapped by a line break inside
    it (a terminal's wrap), or with a zero-width character inside it: no 8 characters of it are sent."""
    from project_history_recall import embeddings

    rng = random.Random(seed)
    if kind in _FORMATS:
        make, shortest = _FORMATS[kind]
        secret = written = make(rng)
    else:
        secret = _random(rng, _B62, 6) + rng.choice("!@#%,;)") + _random(rng, _B62, 8) + rng.choice(string.digits)
        written = rng.choice(["DB_PASSWORD=", "PGPASSWORD=", "--password=", "api_key: ", "密码是", "token是"]) + secret
        shortest = len(written)
    if damage == "newline" and shortest < len(secret):
        cut = len(written) - len(secret) + rng.randint(shortest, len(secret) - 1)
        written = written[:cut] + "\n" + written[cut:]
    elif damage == "invisible":
        cut = len(written) - len(secret) + rng.randint(1, len(secret) - 1)
        written = written[:cut] + rng.choice(_ZW) + written[cut:]
    prose = SCRIPTS[script]
    at = rng.randint(0, len(prose))
    glue = "" if script == "zh" else " "
    text = f"{prose[:at]}{glue}{written}{glue}{prose[at:]}"
    out = embeddings.OpenAIProvider.outbound_text(text)
    assert not leaked(secret, out), (text, out)


def test_the_secret_patterns_cannot_backtrack_catastrophically():
    """No quantifier of more than two repeats holds another quantifier (the shape of exponential and polynomial
    backtracking), in any pattern redaction uses; each is tried once per run of its characters (see the module)."""
    import re._parser as sre  # the standard library's own parse tree of a pattern

    from project_history_recall import (
        code_secrets,
        command_secrets,
        config_secrets,
        cookie_secrets,
        folding,
        literal_secrets,
        output_secrets,
        pin_secrets,
        prose_secrets,
        random_tokens,
        secret_labels,
        secret_patterns,
        seed_phrases,
        sql_secrets,
        table_secrets,
    )

    repeats = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)

    def nested(items, inside_many: bool) -> list[str]:
        found = []
        for op, arg in items:
            if op in repeats:
                low, high, sub = arg
                if inside_many and high > 1:
                    found.append(f"{op} {low},{high}")
                found += nested(sub, inside_many or high > 2)
            elif op is sre.SUBPATTERN:
                found += nested(arg[-1], inside_many)
            elif op is sre.BRANCH:
                for branch in arg[1]:
                    found += nested(branch, inside_many)
            elif op in (sre.ASSERT, sre.ASSERT_NOT):
                found += nested(arg[1], inside_many)
        return found

    compiled = {f"{module.__name__}.{name}": value
                for module in (secret_patterns, secret_labels, code_secrets, command_secrets, config_secrets, cookie_secrets, folding,
                               literal_secrets, output_secrets, pin_secrets, prose_secrets, random_tokens, seed_phrases, sql_secrets, table_secrets)
                for name, value in vars(module).items() if isinstance(value, re.Pattern)}
    assert len(compiled) >= 25
    for name, pattern in compiled.items():
        assert nested(sre.parse(pattern.pattern, pattern.flags), False) == [], name


# -- reading through the lineage ---------------------------------------------------------


def test_a_branch_moved_to_another_project_is_not_readable_from_its_siblings(world: World):
    """X in P; /branch makes B and B2 (children of X); B is moved to Q and then discusses a Q secret. From X or
    B2, reading B answers not_in_project, as the search never finds it; B2 stays readable from X."""
    p, q = world.folder("p"), world.folder("q")
    world.project("P", [p])
    world.project("Q", [q])
    world.session("X", p, style="cli", messages=[("user", "plan the P release")])
    world.db.end_session("X", "branched")
    world.session("B", None, parent="X", messages=[("user", "a side path")])
    world.session("B2", None, parent="X", messages=[("user", "another side path")])
    moved = world.move("B", "Q")
    assert moved["success"] is True and moved["project"]["name"] == "Q", moved
    world.say("B", "user", "the Q vault secret is swordfish-42")
    for asker in ("X", "B2"):
        answer = world.call("project_history_read", {"session_id": "B"}, asker)
        assert answer["success"] is False and answer["code"] == "not_in_project", (asker, answer)
        assert "swordfish" not in str(answer)
    sibling = world.call("project_history_read", {"session_id": "B2"}, "X")
    assert sibling["success"] is True and sibling["messages"][0]["text"] == "another side path"
    own = world.call("project_history_read", {"session_id": "B"}, "B")
    assert own["success"] is True, "a session reads itself"


# -- decomposed input ------------------------------------------------------------------


def test_a_query_typed_in_decomposed_unicode_finds_what_the_composed_one_finds(world: World):
    """``naïve`` typed as ``nai`` + U+0308 (macOS input, some IMEs), ``dữ liệu`` in NFD: the same sessions as NFC."""
    repo = world.repo("ml")
    world.session("bayes", repo, messages=[("user", "we switched to the naïve Bayes baseline")])
    world.session("data", repo, messages=[("user", "lớp dữ liệu mới cho báo cáo")])
    world.session("other", repo, messages=[("user", "dư luận về lịch họp")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    for query, expected in (("naïve", ["bayes"]), ("dữ liệu", ["data"])):
        composed = result_sessions(world.search("cur", unicodedata.normalize("NFC", query), mode="keyword"))
        decomposed = result_sessions(world.search("cur", unicodedata.normalize("NFD", query), mode="keyword"))
        assert composed == decomposed == expected, (query, composed, decomposed)



def test_kana_and_hangul_stored_decomposed_are_found_as_typed(world: World):
    """macOS keeps file names decomposed (NFD): ``ls`` output and paths from Finder hold データ and 회의록 as kana plus a
    combining dakuten and as Hangul jamo, which no index folds into the composed form a query is typed in: they were
    "no matching messages", even pasted exactly (the hostile review's t_nfd_cjk.py). Both forms are looked for."""
    nfd = functools.partial(unicodedata.normalize, "NFD")
    repo = world.repo("docs")
    world.session("ls", repo, messages=[("user", "list my desktop"),
                                        ("tool", nfd("$ ls ~/Desktop\n請求書_データベース設計.pdf\n회의록_최종.hwp\n"))])
    world.session("typed", repo, messages=[("user", "データベース設計はまだ"), ("assistant", "회의록 정리 완료")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    for query in ("データベース", "회의록", nfd("회의록_최종.hwp")):
        for mode in ("keyword", "hybrid"):
            answer = world.search("cur", query, mode=mode)
            assert sorted(result_sessions(answer)) == ["ls", "typed"], (query, mode, answer)


def test_a_question_typed_in_full_width_finds_both_forms(world: World):
    """A Chinese input method in full-width mode writes ``ｒｅｄｉｓ ８０８０`` for ``redis 8080``: FTS5 does not fold it,
    and it matched only text written so (first review of session 20). Both forms are looked for: reading it as ASCII
    alone lost text stored in full width, pasted exactly (the second review's t_fullwidth2.py)."""
    repo = world.repo("cache")
    world.session("port", repo, messages=[("assistant", "redis 缓存端口改成 8080 了, key prefix sess_v2")])
    world.session("wide", repo, messages=[("user", "restart ｒｅｄｉｓ on port ８０８０, file ｒｅｐｏｒｔ＿２０２４．ｃｓｖ")])
    world.session("cur", repo, style="cli", messages=[("user", "hi")])
    for query, expected in (("ｒｅｄｉｓ 端口", ["port", "wide"]), ("８０８０", ["port", "wide"]), ("ＳＥＳＳ＿Ｖ２", ["port"]),
                            ("ｒｅｐｏｒｔ＿２０２４．ｃｓｖ", ["wide"]), ("redis", ["port"])):
        assert sorted(result_sessions(world.search("cur", query, mode="keyword"))) == expected, query

# -- earlier recalls among many hits ------------------------------------------------------

RECALL_CALL = [{"id": "c1", "type": "function", "function": {"name": "project_history_search", "arguments": "{}"}}]


def test_a_run_of_earlier_questions_costs_a_search_what_it_reads(world: World, monkeypatch):
    """50 sessions about pelicans, then n sessions that each began with a question about one, answered by a recall:
    each is an earlier question, and weighing one down brings the next within a page's reach. Checking one more
    session per round ranked every hit n times (x10.8 the work for 4n); widening the check geometrically keeps
    it linear, and the page is the same."""
    folders, store = [plugin_dir()], plugin("store")

    def run(n: int) -> tuple[Any, Any]:
        repo = world.repo(f"birds{n}")
        for i in range(50):
            world.session(f"top{n}_{i:02d}", repo, messages=[("user", "pelican pelican pelican nesting")])
        for i in range(n):
            sid = world.session(f"asked{n}_{i:03d}", repo, messages=[("user", f"where did the pelican go {i}")])
            world.say(sid, "assistant", "", tool_calls=RECALL_CALL)
        world.session(f"cur{n}", repo, style="cli", messages=[("user", "hi")])
        world.search(f"cur{n}", "pelican", mode="keyword")
        return measure(folders, monkeypatch, lambda: world.search(f"cur{n}", "pelican", mode="keyword"), store)

    (small_answer, small), (large_answer, large) = run(100), run(400)
    for n, answer in ((100, small_answer), (400, large_answer)):
        found = result_sessions(answer)
        assert found and all(sid.startswith(f"top{n}_") for sid in found), found
    assert linear(small.total, large.total), (small, large)


def test_a_session_of_many_replies_costs_its_echo_check_what_it_reads(world: World, monkeypatch):
    """One session with n assistant replies holding a two-character CJK word (the substring path, up to 600 hits of
    one session): whether each reply echoes a recall answered before it is found in the 32 rows before each reply
    (filtering a window of the whole session once per reply: x11 the work for 4n)."""
    folders, store = [plugin_dir()], plugin("store")

    def run(n: int) -> tuple[Any, Any]:
        repo = world.repo(f"chat{n}")
        world.session(f"long{n}", repo, messages=[("user", "start")])
        for i in range(n):
            world.say(f"long{n}", "assistant", f"reply {i} about the 问题 we discussed")
        world.session(f"cur{n}", repo, style="cli", messages=[("user", "hi")])
        world.search(f"cur{n}", "问题", mode="keyword")
        return measure(folders, monkeypatch, lambda: world.search(f"cur{n}", "问题", mode="keyword"), store)

    (small_answer, small), (large_answer, large) = run(150), run(600)
    assert result_sessions(small_answer) == ["long150"] and result_sessions(large_answer) == ["long600"]
    assert linear(small.total, large.total), (small, large)
