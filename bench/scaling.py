"""Cost at n and at 4n along every dimension real data grows along, beside Hermes' built-in session_search.

Each dimension is built twice, at a size n and at 4n, each into a throwaway
HERMES_HOME (deleted at the end) with Hermes' own ``SessionDB`` and real
``git`` repos; then each call is timed ``--reps`` times at both sizes in turns
(n, 4n, then 4n, n...: the machine's load moves both alike), in this process
(median, ms). The ratio cost(4n) / cost(n) is about 4 for work linear in n,
about 1 for a constant cost and about 16 for a square. Hermes' built-in
``tools.session_search_tool.session_search`` is called as the other benches
call it (a read-write ``SessionDB`` on the same state.db, the same question,
``limit=3``, ``current_session_id`` = the asking session); it keeps no caches,
so its "first" and "later" rows time the same call; a call of it slower than
3 s is timed once ("1 run"). "n/a": the built-in has nothing that does this.

1. ``chain``: a Telegram chat compressed n times (a chain of sessions with no
   folder, each the continuation of the one before, the parent ended
   ``compression``; the newest sessions of state.db) beside a repo project: a
   search in the repo (the process's first, with the plugin's caches and
   Hermes' git-root cache dropped, and a later one), and a search from the
   chat's newest session (Home: no project, after reading its lineage);
2. ``width``: a conversation X of a repo with n ``/branch`` children
   (``parent_session_id`` = X, no folder, X ended ``branched``): a search from
   X (its branches are conversations of their own, searched but for what they
   copied of X) and ``project_history_read`` of a branch from X (the built-in:
   its read shape);
3. ``nested``: a conversation branched n deep (each ``/branch`` from the one before, copying all it said, then
   deciding on its own): a search from another session for the turn every branch copied (one result, the first
   session's; what a branch copied climbs fork by fork). The question matches 2n rows; the branches' decisions,
   copied n²/2 times in all, it does not; a second search matches them (it reads what state.db holds, a square of n);
   ``project``: n sessions of one repo; a search from one of them;
4. ``profile``: a repo of 20 sessions among n sessions of four other repos
   (written after it, all speaking of the same things);
5. ``matches``: a tool output of n lines ``FAILED test_i: timeout error``;
   keyword search ``timeout error``;
6. ``length``: one message of n KB of developer words; keyword search. And
   ``redact.redact_secrets`` (what is sent to a remote embedder) on n KB of
   (a) words, (b) a run of letters and dots ``a.b.c...``, (c) CJK text with
   ASCII words run into it, (d) one base64-like run with no space;
7. ``projects``: n repos of 3 sessions each; a search from one;
8. ``age``: a repo's 24 sessions spread over n days, two sessions of other
   repos every day, their messages written in turns with the repo's (so the
   repo's rows are spread over state.db), the asking session today;
9. ``echoes``: a decision, and one session of n rounds of a recall of it (the
   tool call, its answer, a 20 KB log, a reply repeating the decision): a
   keyword search must put the decision above that session (the check for earlier recalls);
10. ``glued``: n messages of another repo with ``用Redis缓存`` (an English word
   written straight into Chinese) and ``redistribute``; keyword search
   ``redis`` finds the repo's decision written the same way (the look-up of
   words inside CJK text, bounded by fixed budgets).
11. ``logs``: one session of n matching 100 KB progress-bar logs (``logs``'s docstring).
12. ``builds``: n sessions of three 50 KB build logs full of ``unused variable``;
   keyword search ``unused variable`` (long candidates scored in their ends).
13. ``context``: a conversation compressed n times (five matching answers a
   session), asked from its continuation with 10n live turns: the past's
   candidates are looked up among the live turns (the copies check).
14. ``filtered``: one long-lived session of n matches, all before the search's
   ``since``, and one match after it: every candidate fails the date check.
15. ``tick``: one session of n rows written at one time (one timestamp), compacted
   in place carrying the last two forward; ``carried``: the same carrying every
   row forward (n live copies after the last message shown): a search, the
   recent list, a read around the last message, the index command's text reads.
16. ``picks``: n sessions of one repo, three turns each holding the query's word, where each session's messages lie
   read first (as a conversation's warm-up does): the index ranks the 3n matches and the pick looks them up only as
   far as it keeps (``fts._Ordered``: its 600 candidates among the first 1,024).

Our search is ``search.search_history(mode="keyword", limit=3)``: the tool's
path minus JSON. Every answer is checked (the expected sessions, nothing of
another project or of the asking lineage); a wrong answer is listed, and the
exit code is 1.

Usage::

    .venv/bin/python bench/scaling.py                      # every dimension, --reps 9
    .venv/bin/python bench/scaling.py --only chain,width --reps 5 --scale 0.5 --json /tmp/scaling.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import shutil
import sqlite3
import statistics
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import ROOT, load_plugin  # noqa: E402

QUERY = "websocket reconnect"
T0 = 1_700_000_000.0
DAY = 86_400.0
TOPICS = ["the websocket reconnect storm after deploy", "ledger rounding in invoices", "backoff with jitter for the queue",
          "schema migration of the orders table", "cache eviction under load"]
WORDS = ("websocket reconnect backoff jitter migration column backfill cache eviction token refresh pipeline wheel "
         "build deploy rollback schema index query latency timeout retry queue worker handler config flag feature "
         "branch merge review test fixture mock coverage lint").split()
CJK = "数据库迁移方案连接池耗尽重试策略缓存失效部署回滚接口超时"


def _git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@example.invalid", "GIT_CONFIG_GLOBAL": "/dev/null"}
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, env=env)


class Home:
    """A throwaway Hermes profile: state.db written by Hermes' ``SessionDB``, repos beside it (never inside)."""

    def __init__(self, root: Path) -> None:
        from hermes_state import SessionDB

        self.root, self.home, self.work = root, root / "home", root / "work"
        self.home.mkdir(parents=True)
        self.work.mkdir()
        self.activate()
        self.db = SessionDB(db_path=self.home / "state.db")
        self.ts = T0

    def activate(self) -> None:
        os.environ["HERMES_HOME"] = str(self.home)

    def repo(self, name: str) -> Path:
        path = self.work / name
        path.mkdir()
        _git(path, "init", "-q", "-b", "main")
        (path / "README").write_text(name)
        _git(path, "add", "README")
        _git(path, "commit", "-q", "-m", "init")
        return path.resolve()

    def session(self, sid: str, cwd: Path | None = None, *, source: str = "cli", parent: str | None = None,
                messages: Iterator[tuple[str, str]] | list[tuple[str, str]] = (), **kw: Any) -> str:
        """A session as Hermes records it: the plain CLI's cwd only; no cwd for gateway chats and continuations."""
        if cwd is not None:
            kw["cwd"] = str(cwd)
        if parent:
            kw["parent_session_id"] = parent
        self.db.create_session(sid, source, **kw)
        for role, text in messages:
            self.say(sid, role, text)
        return sid

    def say(self, sid: str, role: str, text: str, *, at: float | None = None, **kw: Any) -> int:
        self.ts = at if at is not None else self.ts + 1
        return int(self.db.append_message(sid, role, text, timestamp=self.ts, **kw))

    def close(self) -> None:
        self.db.close()


def chat(i: int, turns: int = 4) -> list[tuple[str, str]]:
    return [("user" if j % 2 == 0 else "assistant", f"session {i} turn {j}: {TOPICS[(i + j) % len(TOPICS)]}")
            for j in range(turns)]


# -- calls --------------------------------------------------------------------------------------------------------


@dataclass
class Call:
    """One timed call of ours and, where it has one, the built-in's, with a check of our answer."""

    label: str
    ours: Callable[[], Any]
    builtin: Callable[[], Any] | None = None
    check: Callable[[Any], str | None] = lambda answer: None  # what is wrong, or None
    cold: bool = False  # the plugin's caches (and Hermes' git roots) dropped before each call of ours


@dataclass(frozen=True)
class Dimension:
    key: str
    title: str
    n: int
    unit: str
    build: Callable[[Bench, int], list[Call]]  # a new profile of that size; the calls to time in it


class Bench:
    def __init__(self, phr: Any, tmp: Path) -> None:
        self.phr, self.tmp = phr, tmp
        self.homes: list[Home] = []

    def new_home(self, name: str) -> Home:
        home = Home(self.tmp / f"{len(self.homes):02d}-{name}")
        self.homes.append(home)
        return home

    def close(self) -> None:
        for home in self.homes:
            home.close()
        self.homes.clear()

    def drop_caches(self) -> None:
        """As in a new process: every cache of the plugin, and the git roots Hermes' probe keeps."""
        from tui_gateway import git_probe

        self.phr.state.reset()
        git_probe.invalidate()

    # What the calls are.
    def search(self, h: Home, sid: str, query: str = QUERY) -> Callable[[], dict[str, Any]]:
        return lambda: self.phr.search.search_history(home=h.home, session_id=sid, query=query, mode="keyword", limit=3)

    def builtin(self, h: Home, sid: str, query: str = QUERY) -> Callable[[], dict[str, Any]]:
        from tools.session_search_tool import session_search

        return lambda: json.loads(session_search(query=query, limit=3, db=h.db, current_session_id=sid))

    def read(self, h: Home, asker: str, target: str) -> Callable[[], dict[str, Any]]:
        return lambda: self.phr.browse.read_around(home=h.home, session_id=asker, target_session=target, message_id=None)

    def builtin_read(self, h: Home, asker: str, target: str) -> Callable[[], dict[str, Any]]:
        from tools.session_search_tool import session_search

        return lambda: json.loads(session_search(session_id=target, db=h.db, current_session_id=asker))


def found_in(allowed: Callable[[str], bool], *, at_least: int = 1, kind: str | None = None) -> Callable[[Any], str | None]:
    """A check: at least ``at_least`` results, every one in a session ``allowed`` (and the project of ``kind``)."""
    def check(answer: dict[str, Any]) -> str | None:
        if not answer.get("success"):
            return f"failed: {answer}"
        sessions = [r["session_id"] for r in answer.get("results", [])]
        if kind and answer["project"]["kind"] != kind:
            return f"project {answer['project']}"
        if len(sessions) < at_least:
            return f"{len(sessions)} result(s): {answer.get('message')}"
        wrong = [s for s in sessions if not allowed(s)]
        return f"out of scope: {wrong}" if wrong else None
    return check


# -- the dimensions: each builds a profile of a size and names the calls to time in it ----------------------------


def chain(b: Bench, size: int) -> list[Call]:
    h = b.new_home(f"chain{size}")
    repo = h.repo("app")
    for i in range(12):
        h.session(f"a{i}", repo, messages=chat(i))
    h.session("cur", repo, messages=[("user", "what did we decide before?")])
    for i in range(size):  # after the repo's sessions: the chat's are the newest of state.db
        parent = f"tg{i - 1}" if i else None
        if parent:
            h.db.end_session(parent, "compression")
        h.session(f"tg{i}", None, source="telegram", parent=parent, chat_id="42",
                  messages=[("user", f"turn {i} about lunch"), ("assistant", "the usual place at noon")])
    tail, in_repo = f"tg{size - 1}", found_in(lambda s: s.startswith("a"))

    def is_home(answer: dict[str, Any]) -> str | None:
        return None if answer.get("success") and answer["project"]["kind"] == "home" else f"not Home: {answer}"
    return [Call("search in the repo, first", b.search(h, "cur"), b.builtin(h, "cur"), in_repo, cold=True),
            Call("search in the repo, later", b.search(h, "cur"), b.builtin(h, "cur"), in_repo),
            Call("search from the chat's newest session", b.search(h, tail, "lunch"), b.builtin(h, tail, "lunch"),
                 is_home)]


def compressed(b: Bench, size: int) -> list[Call]:
    """A conversation in the repo compressed n times, every session of it matching: from its newest session the search
    reads the compressed past (every earlier session) and groups it into one result of the conversation."""
    h = b.new_home(f"compressed{size}")
    repo = h.repo("app")
    for i in range(12):
        h.session(f"a{i}", repo, messages=chat(i))
    h.session("c0", repo, messages=[("user", "turn 0 about lunch"), ("assistant", "the usual place at noon")])
    for i in range(1, size):
        h.db.end_session(f"c{i - 1}", "compression")
        h.session(f"c{i}", None, parent=f"c{i - 1}",
                  messages=[("user", f"turn {i} about lunch"), ("assistant", "the usual place at noon")])
    tail = f"c{size - 1}"

    def one_of_the_conversation(answer: dict[str, Any]) -> str | None:
        found = found_in(lambda s: s.startswith("c") and s != tail)(answer)
        return found or (None if len(answer["results"]) == 1 else f"not one result: {answer['results']}")
    return [Call("search from the conversation's newest session", b.search(h, tail, "lunch"), b.builtin(h, tail, "lunch"),
                 one_of_the_conversation)]


def width(b: Bench, size: int) -> list[Call]:
    h = b.new_home(f"width{size}")
    repo = h.repo("app")
    for i in range(12):
        h.session(f"o{i}", repo, messages=chat(i))
    h.session("X", repo, messages=[("user", "plan the websocket reconnect rework"), ("assistant", "three options")])
    h.db.end_session("X", "branched")
    for i in range(size):
        h.session(f"br{i}", None, parent="X",
                  messages=[("user", f"option {i}: websocket reconnect with a queue"), ("assistant", "drafted")])
    target, others = f"br{size - 1}", found_in(lambda s: s.startswith(("o", "br")))

    def read_ok(answer: dict[str, Any]) -> str | None:
        good = answer.get("success") and answer["messages"] and "option" in answer["messages"][0]["text"]
        return None if good else f"read: {answer}"
    return [Call("search from X, first", b.search(h, "X"), b.builtin(h, "X"), others, cold=True),
            Call("search from X, later", b.search(h, "X"), b.builtin(h, "X"), others),
            Call("project_history_read of a branch from X", b.read(h, "X", target), b.builtin_read(h, "X", target),
                 read_ok)]


def nested(b: Bench, size: int) -> list[Call]:
    """A conversation branched n times over, each ``/branch`` from the one before, each copying all that branch said
    and deciding on its own: a search from another session keys every hit to its conversation (what a branch copied
    climbs fork by fork to the conversation that said it) and shows the copied turn once, as the first session's."""
    h = b.new_home(f"nested{size}")
    repo = h.repo("app")
    for i in range(12):
        h.session(f"a{i}", repo, messages=chat(i))
    said = [("user", "which lunch place for the offsite"), ("assistant", "the usual place at noon")]
    h.session("B0", repo, messages=said)
    for i in range(1, size):
        h.db.end_session(f"B{i - 1}", "branched")
        h.session(f"B{i}", None, parent=f"B{i - 1}", model_config={"_branched_from": f"B{i - 1}"}, messages=said)
        h.say(f"B{i}", "assistant", f"lunch option {i}: the noodle bar on pier {i}")
        said = [*said, ("assistant", f"lunch option {i}: the noodle bar on pier {i}")]
    h.session("cur", repo, messages=[("user", "hi")])

    def copied_once(answer: dict[str, Any]) -> str | None:
        sessions = [r["session_id"] for r in answer.get("results", [])]
        wrong = found_in(lambda s: s.startswith(("a", "B")))(answer)
        return wrong or (None if sessions[:1] == ["B0"] else f"the copied turn not B0's: {sessions}")
    return [Call("search for the turn every branch copied", b.search(h, "cur", "usual place offsite"),
                 b.builtin(h, "cur", "usual place offsite"), copied_once),
            Call("search for the branches' decisions (n²/2 copies)", b.search(h, "cur", "noodle bar pier"),
                 b.builtin(h, "cur", "noodle bar pier"), found_in(lambda s: s.startswith("B"), at_least=3))]


def project_sessions(b: Bench, size: int) -> list[Call]:
    h = b.new_home(f"project{size}")
    repo = h.repo("app")
    for i in range(size):
        h.session(f"s{i}", repo, messages=chat(i))
    asker = f"s{size - 1}"
    ok = found_in(lambda s: s.startswith("s") and s != asker, at_least=3)
    return [Call("search, first", b.search(h, asker), b.builtin(h, asker), ok, cold=True),
            Call("search, later", b.search(h, asker), b.builtin(h, asker), ok)]


def profile_sessions(b: Bench, size: int) -> list[Call]:
    h = b.new_home(f"profile{size}")
    repo = h.repo("app")
    others = [h.repo(f"other{k}") for k in range(4)]
    for i in range(20):
        h.session(f"a{i}", repo, messages=chat(i))
    h.session("cur", repo, messages=[("user", "what did we decide before?")])
    for i in range(size):
        h.session(f"z{i}", others[i % len(others)], messages=chat(i, 3))
    ok = found_in(lambda s: s.startswith("a"), at_least=3)
    return [Call("search, first", b.search(h, "cur"), b.builtin(h, "cur"), ok, cold=True),
            Call("search, later", b.search(h, "cur"), b.builtin(h, "cur"), ok)]


def matches(b: Bench, size: int) -> list[Call]:
    h = b.new_home(f"matches{size}")
    repo = h.repo("ci")
    for i in range(6):
        h.session(f"a{i}", repo, messages=chat(i))
    h.session("log", repo, messages=[("user", "run the tests")])
    h.say("log", "tool", "\n".join(f"FAILED test_{i}: timeout error" for i in range(size)), tool_name="terminal")
    h.session("cur", repo, messages=[("user", "hi")])

    def ok(answer: dict[str, Any]) -> str | None:
        wrong = found_in(lambda s: s == "log")(answer)
        return wrong or (None if ">>>timeout<<<" in answer["results"][0]["snippet"] else f"snippet: {answer['results'][0]}")
    return [Call("keyword search 'timeout error'", b.search(h, "cur", "timeout error"),
                 b.builtin(h, "cur", "timeout error"), ok)]


def logs(b: Bench, size: int) -> list[Call]:
    """A session of ``size`` tool logs of 100 KB, each a progress bar with the query's word in it, in a profile without
    CJK text: a search keeps the session's best three logs, and reads the others past their first columns not at all
    (``fts._first_passing``), nor the whole list of the bar's trigram (``fts.holds_cjk``, asked again only of newer
    messages). Keyword search ``pelican`` from another session of the repo: three of the sessions holding it."""
    h = b.new_home(f"logs{size}")
    repo = h.repo("ci")
    for i in range(5):
        h.session(f"a{i}", repo, messages=[("user", f"the pelican plan, part {i}")])
    h.session("bars", repo, messages=[("user", "run the pelican build")])
    for i in range(size):
        h.say("bars", "tool", f"log {i}: pelican seen " + "\u2501" * 100_000, tool_name="terminal")
    h.session("cur", repo, messages=[("user", "hi")])
    expected = {"bars", *(f"a{i}" for i in range(5))}

    def ok(answer: dict[str, Any]) -> str | None:
        got = {r["session_id"] for r in answer["results"]}
        return None if len(got) == 3 and got <= expected else f"sessions: {sorted(got)}"
    return [Call("keyword search 'pelican'", b.search(h, "cur", "pelican"),
                 b.builtin(h, "cur", "pelican"), ok)]


def builds(b: Bench, size: int) -> list[Call]:
    """``size`` sessions, each with three 50 KB build logs (Hermes' default cap on a terminal's output) full of the
    query's words: the candidates are the logs of 200 sessions at most, each scored in its ends
    (``ranking.SAMPLED_OVER``). Keyword search ``unused variable`` from another session of the repo."""
    h = b.new_home(f"builds{size}")
    repo = h.repo("ci")
    line = "src/module_{i}.c:42: warning: unused variable 'tmp' [-Wunused-variable]\n"
    log = "".join(line.format(i=i) for i in range(50 * 1024 // len(line)))
    for i in range(size):
        h.session(f"b{i}", repo, messages=[("user", "build it")])
        for k in range(3):
            h.say(f"b{i}", "tool", log + f" run {k}", tool_name="terminal")
    h.session("cur", repo, messages=[("user", "hi")])
    return [Call("keyword search 'unused variable'", b.search(h, "cur", "unused variable"),
                 b.builtin(h, "cur", "unused variable"), found_in(lambda s: s.startswith("b"), at_least=3))]


def words_text(kb: int, rng: random.Random) -> str:
    out, size = [], 0
    while size < kb * 1024:
        word = rng.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


def redaction_texts(kb: int) -> dict[str, str]:
    """``kb`` KB (UTF-8) of each kind of text the redaction meets."""
    rng, size = random.Random(kb), kb * 1024
    letters = ".".join(string.ascii_lowercase[i % 26] for i in range(size // 2))
    cjk, parts = [], 0
    while parts < size:  # Chinese with English words written straight into it, no spaces
        piece = CJK[rng.randrange(len(CJK) - 4):][:rng.randint(2, 6)] + rng.choice(WORDS)
        cjk.append(piece)
        parts += len(piece.encode())
    b64 = "".join(rng.choice(string.ascii_letters + string.digits + "+/") for _ in range(size))
    return {"(a) words": words_text(kb, rng), "(b) letters and dots a.b.c...": letters,
            "(c) CJK with ASCII words run in": "".join(cjk), "(d) base64-like, one run": b64}


def length(b: Bench, size: int) -> list[Call]:
    h = b.new_home(f"length{size}")
    repo = h.repo("notes")
    for i in range(6):
        h.session(f"a{i}", repo, messages=chat(i))
    h.session("long", repo, messages=[("user", "paste the whole design doc")])
    h.say("long", "assistant", words_text(size, random.Random(size)))
    h.session("cur", repo, messages=[("user", "hi")])
    query, redact = "timeout retry", b.phr.redact.redact_secrets
    calls = [Call(f"keyword search '{query}'", b.search(h, "cur", query), b.builtin(h, "cur", query),
                  found_in(lambda s: s == "long"))]
    for label, text in redaction_texts(size).items():
        calls.append(Call(f"redact_secrets {label}", (lambda t=text: redact(t)),
                          check=lambda out: None if isinstance(out, str) and out else "empty"))
    return calls


def projects(b: Bench, size: int) -> list[Call]:
    h = b.new_home(f"projects{size}")
    for k in range(size):
        repo = h.repo(f"repo{k:03d}")
        for i in range(3):
            h.session(f"p{k:03d}s{i}", repo, messages=chat(k + i, 3))
    ok = found_in(lambda s: s.startswith("p000s") and s != "p000s2", at_least=1)
    return [Call("search, first", b.search(h, "p000s2"), b.builtin(h, "p000s2"), ok, cold=True),
            Call("search, later", b.search(h, "p000s2"), b.builtin(h, "p000s2"), ok)]


def explicit(b: Bench, size: int) -> list[Call]:
    """n explicit projects in projects.db, a session in each one's folder, and n plain CLI sessions in scratch folders
    deleted since (no stored root): what the first search's census attributes, each folder once."""
    import shutil

    from hermes_cli import projects_db

    h = b.new_home(f"explicit{size}")
    with projects_db.connect_closing(h.home / "projects.db") as conn:
        for k in range(size):
            folder = h.work / f"proj{k:03d}"
            folder.mkdir()
            projects_db.create_project(conn, name=f"proj{k:03d}", folders=[str(folder)], primary_path=str(folder))
            h.session(f"e{k:03d}s0", folder, messages=chat(k, 3))
            h.session(f"e{k:03d}s1", folder, messages=chat(k + 1, 3))
            scratch = h.work / "scratch" / f"t{k:03d}"
            scratch.mkdir(parents=True)
            h.session(f"g{k:03d}", scratch, messages=chat(k + 2, 3))
    shutil.rmtree(h.work / "scratch")
    ok = found_in(lambda s: s == "e000s0", kind="explicit")
    return [Call("search, first", b.search(h, "e000s1"), b.builtin(h, "e000s1"), ok, cold=True),
            Call("search, later", b.search(h, "e000s1"), b.builtin(h, "e000s1"), ok)]


def age(b: Bench, days: int, kept: int = 24) -> list[Call]:
    h = b.new_home(f"age{days}")
    repo, others = h.repo("app"), [h.repo(f"other{k}") for k in range(3)]
    start = T0 - days * DAY
    mine = {d * days // kept: f"a{d}" for d in range(kept)}  # the repo's sessions, on 24 days spread evenly
    made: list[str] = []
    for day in range(days):
        at = start + day * DAY
        talks = [(f"d{day}o{k}", others[(day + k) % 3], chat(day + k)) for k in range(2)]
        if day in mine:
            talks.append((mine[day], repo, chat(day)))
        for sid, cwd, _ in talks:
            h.session(sid, cwd)
            made.append(sid)
        for turn in range(4):  # the day's conversations written in turns: their rows interleave
            for sid, _, lines in talks:
                h.say(sid, *lines[turn], at=at + turn * 60 + len(sid))
    h.db._execute_write(lambda c: c.executemany(  # Hermes stamps a new session "now": give each its day
        "UPDATE sessions SET started_at = (SELECT min(timestamp) FROM messages WHERE session_id = ?) WHERE id = ?",
        [(sid, sid) for sid in made]))
    h.session("cur", repo, messages=[("user", "what did we decide before?")])
    ok = found_in(lambda s: s in mine.values(), at_least=3)
    return [Call("search, first", b.search(h, "cur"), b.builtin(h, "cur"), ok, cold=True),
            Call("search, later", b.search(h, "cur"), b.builtin(h, "cur"), ok)]


ECHO_DECISION = "Decision: the websocket client reconnects with exponential backoff and full jitter, capped at 30 s."


def echoes(b: Bench, size: int) -> list[Call]:
    """A decision, and a long session of n rounds: the user asks again, the agent calls project_history_search, its
    answer quotes the decision, a 20 KB terminal log follows, and the reply repeats the decision in its own words
    (an echo the search must rank below the decision). Keyword search ``websocket backoff jitter``: the decision above
    the long session."""
    h = b.new_home(f"echoes{size}")
    repo = h.repo("payments")
    h.session("decision", repo, messages=[("user", "how should the websocket client reconnect?"), ("assistant", ECHO_DECISION)])
    h.session("long", repo)
    snippet = ECHO_DECISION.replace("websocket", ">>>websocket<<<")
    log = "\n".join(f"retry {k}: websocket reconnect attempt, backoff {k % 30} s" for k in range(400))[:20_000]
    for i in range(size):
        h.say("long", "user", f"round {i}: remind me how the websocket client reconnects")
        call = {"id": f"c{i}", "type": "function", "function": {"name": "project_history_search",
                                                               "arguments": json.dumps({"query": "websocket reconnect"})}}
        h.say("long", "assistant", "", tool_calls=[call])
        h.say("long", "tool", json.dumps({"success": True, "results": [{"session_id": "decision", "snippet": snippet}]}),
              tool_name="project_history_search", tool_call_id=f"c{i}")
        h.say("long", "tool", log, tool_name="terminal")
        h.say("long", "assistant", "As found: the websocket client reconnects with exponential backoff and full jitter, "
                                   "capped at 30 s. Websocket backoff websocket jitter.")
    h.session("cur", repo, messages=[("user", "let's go on")])

    def ok(answer: dict[str, Any]) -> str | None:
        wrong = found_in(lambda s: s != "cur")(answer)
        order = [r["session_id"] for r in answer.get("results", [])]
        return wrong or (None if order[:1] == ["decision"] else f"order: {order}")
    query = "websocket backoff jitter"
    return [Call("search, first", b.search(h, "cur", query), b.builtin(h, "cur", query), ok, cold=True),
            Call("search, later", b.search(h, "cur", query), b.builtin(h, "cur", query), ok)]


def glued(b: Bench, size: int) -> list[Call]:
    """An English word written straight into Chinese (``用Redis缓存``) in n messages of another project, beside words
    that hold it (``redistribute``): the look-up of ``redis`` inside CJK text counts its trigrams' rows and the rows
    holding it (bounded by ``lexical.GLUED_BOUND`` and ``RANK_BUDGET``), then reads the project's messages holding it.
    Keyword search ``redis``: the repo's decision written the same way is found (and nothing else of the repo)."""
    h = b.new_home(f"glued{size}")
    repo, other = h.repo("app"), h.repo("other")
    for i in range(12):
        h.session(f"a{i}", repo, messages=chat(i))
    h.session("zh", repo, messages=[("user", "会话用什么缓存？"), ("assistant", "决定用Redis缓存会话")])
    for k in range(0, size, 50):
        h.session(f"o{k}", other, messages=[("assistant", f"第{i}次用Redis缓存，redistribute the load")
                                            for i in range(k, min(k + 50, size))])
    h.session("cur", repo, messages=[("user", "hi")])

    def ok(answer: dict[str, Any]) -> str | None:
        wrong = found_in(lambda s: s == "zh")(answer)
        return wrong or (None if "glued" in answer["strategy"] else f"strategy: {answer['strategy']}")
    return [Call("search 'redis', first", b.search(h, "cur", "redis"), b.builtin(h, "cur", "redis"), ok, cold=True),
            Call("search 'redis', later", b.search(h, "cur", "redis"), b.builtin(h, "cur", "redis"), ok)]


def context(b: Bench, size: int) -> list[Call]:
    """A conversation compressed n times, five matching answers in each session, asked from its continuation whose
    live context is 10n turns that match nothing: each candidate of the past is looked up among the live turns."""
    h = b.new_home(f"context{size}")
    repo = h.repo("app")
    for i in range(12):
        h.session(f"a{i}", repo, messages=chat(i))
    for i in range(size):
        if i:
            h.db.end_session(f"p{i - 1}", "compression")
        h.session(f"p{i}", None if i else repo, parent=f"p{i - 1}" if i else None,
                  messages=[("assistant", f"the usual place for lunch, note {i}.{j}") for j in range(5)])
    h.db.end_session(f"p{size - 1}", "compression")
    h.session("cur", None, parent=f"p{size - 1}",
              messages=[("user" if j % 2 == 0 else "assistant", f"live turn {j} on the deploy pipeline") for j in range(10 * size)])
    return [Call("search from a long live context", b.search(h, "cur", "lunch"), b.builtin(h, "cur", "lunch"),
                 found_in(lambda s: s.startswith("p")))]


def filtered(b: Bench, size: int) -> list[Call]:
    """One long-lived CLI session of n matching messages, all before the search's ``since``, and one later match: each
    of the n fails the date check, which is read after the index's candidates are picked. (Hermes' built-in has no
    date filter.)"""
    h = b.new_home(f"filtered{size}")
    repo = h.repo("app")
    for i in range(12):
        h.session(f"a{i}", repo, messages=chat(i))
    h.session("long", repo, messages=[("assistant", f"lunch: rolled the canary to shard {i % 97}") for i in range(size)])
    since = datetime.fromtimestamp(h.ts + 100, UTC).isoformat()
    h.ts += 200
    h.session("late", repo, messages=[("assistant", "lunch moved to the canteen")])
    h.session("cur", repo, messages=[("user", "hi")])
    window = importlib.import_module(f"{b.phr.__name__}.filters").make_filters(since=since)
    ours = lambda: b.phr.search.search_history(home=h.home, session_id="cur", query="lunch canary", mode="keyword",  # noqa: E731
                                               limit=3, filters=window)
    return [Call("search with since after n matches", ours, None, found_in(lambda s: s == "late"))]


def _imported(b: Bench, name: str, size: int, text: str) -> tuple[Any, Any, list[int]]:
    """A home ``name`` whose repo holds 12 ordinary sessions and ``import``: ``size`` rows ``text <i>`` written at one
    time, user and assistant in turn. Returns ``(home, repo, the import's message ids)``."""
    h = b.new_home(name)
    repo = h.repo("app")
    for i in range(12):
        h.session(f"a{i}", repo, messages=chat(i))
    h.session("import", repo)
    at = h.ts + 1
    return h, repo, [h.say("import", ("user", "assistant")[i % 2], f"{text} {i}", at=at) for i in range(size)]


def tick(b: Bench, size: int) -> list[Call]:
    """A session of n rows written at one time (an import, an old gateway turn: one timestamp), then compacted in
    place as Hermes did before #99545 (every row archived, the last two carried forward as live copies): whether an
    archived row is the copy Hermes shows is told a tick at a time, not by a walk of the tick for each row."""
    h, repo, ids = _imported(b, f"tick{size}", size, "备忘 lunch note")
    with sqlite3.connect(h.home / "state.db") as conn:  # the compaction's own writes, as archive_and_compact made them
        conn.execute("UPDATE messages SET active = 0, compacted = 1 WHERE session_id = 'import'")
        conn.execute("INSERT INTO messages (session_id, role, content, timestamp) SELECT session_id, role, content,"
                     " timestamp FROM messages WHERE id IN (?, ?) ORDER BY id", ids[-2:])
    conn.close()
    h.session("cur", repo, messages=[("user", "hi")])

    def listed(answer: dict[str, Any]) -> str | None:
        names = [s["session_id"] for s in answer.get("sessions", [])]
        return None if answer.get("success") and "import" in names else f"not listed: {names}"

    recent = lambda: b.phr.browse.recent_sessions(home=h.home, session_id="cur")  # noqa: E731
    return [Call("search of a two-character CJK word (a substring read)", b.search(h, "cur", "备忘"),
                 b.builtin(h, "cur", "备忘"), found_in(lambda s: s == "import")),
            Call("recent list", recent, None, listed)]


def carried(b: Bench, size: int) -> list[Call]:
    """The ``tick`` session compacted carrying every row forward (each archived, a live copy of it written after them
    all, at its time): the index's candidates checked a batch at a time, the recent list's previews (its last
    assistant message lies n live copies before the session's last row), a read around its last message, and the
    index command's reads of its texts (``index_check.read_texts``, ``indexing.BATCH`` ids a page)."""
    h, repo, ids = _imported(b, f"carried{size}", size, "lunch note")
    with sqlite3.connect(h.home / "state.db") as conn:  # the compaction's own writes, as archive_and_compact made them
        conn.execute("UPDATE messages SET active = 0, compacted = 1 WHERE session_id = 'import'")
        conn.execute("INSERT INTO messages (session_id, role, content, timestamp) SELECT session_id, role, content,"
                     " timestamp FROM messages WHERE session_id = 'import' ORDER BY id")
        every = [int(r[0]) for r in conn.execute("SELECT id FROM messages WHERE session_id = 'import' ORDER BY id")]
    conn.close()
    h.session("cur", repo, messages=[("user", "hi")])
    last = f"lunch note {size - 1 if size % 2 == 0 else size - 2}"  # the last assistant row (odd rows)

    def previews(answer: dict[str, Any]) -> str | None:
        shown = [(s["session_id"], s["last_assistant"]) for s in answer.get("sessions", []) if s["session_id"] == "import"]
        return None if shown == [("import", last)] else f"previews: {shown}, not {last!r}"

    def window(answer: dict[str, Any]) -> str | None:
        texts = [m["text"] for m in answer.get("messages", [])]
        return None if texts[-1:] == [f"lunch note {size - 1}"] and "stopped" not in answer else f"window: {texts[-3:]}"

    def texts() -> list[Any]:
        conn = b.phr.store.connect_ro(h.home / "state.db")
        try:
            return list(b.phr.index_check.read_texts(conn, every, [], page=b.phr.indexing.BATCH))
        finally:
            conn.close()

    recent = lambda: b.phr.browse.recent_sessions(home=h.home, session_id="cur")  # noqa: E731
    read = lambda: b.phr.browse.read_around(home=h.home, session_id="cur", target_session="import",  # noqa: E731
                                            message_id=every[-1])
    return [Call("search of a word in every row", b.search(h, "cur", "lunch note"), b.builtin(h, "cur", "lunch note"),
                 found_in(lambda s: s == "import")),
            Call("recent list", recent, None, previews),
            Call("read around the last message", read, None, window),
            Call("index command's text reads", texts, None,
                 lambda got: None if len(got) == len(ids) else f"{len(got)} texts, not {len(ids)}")]


def picks(b: Bench, size: int) -> list[Call]:
    """``size`` sessions of one repo, three matching turns each; the search reads, as a conversation's warm-up does
    before it, where each session's messages lie (``lexical.ranges``: the index's id filter; cached after the first)."""
    h = b.new_home(f"picks{size}")
    repo = h.repo("app")
    for i in range(size):
        h.session(f"p{i}", repo, messages=[("user", f"the pelican plan {i}"), ("assistant", f"pelican step {i} done"),
                                           ("user", f"and the pelican test {i}")])
    h.session("cur", repo, messages=[("user", "hi")])
    search = b.search(h, "cur", "pelican")

    def warmed() -> dict[str, Any]:
        conn = b.phr.store.connect_ro(h.home / "state.db")
        try:
            b.phr.lexical.ranges.read(conn, b.phr.paths.state_db_key(h.home))
        finally:
            conn.close()
        return search()
    return [Call("keyword search 'pelican', the filter read", warmed, b.builtin(h, "cur", "pelican"),
                 found_in(lambda s: s.startswith("p"), at_least=3))]


DIMENSIONS = {d.key: d for d in (
    Dimension("chain", "chain depth (a Telegram chat compressed n times)", 200, "sessions", chain),
    Dimension("compressed", "a conversation's compressed past (a repo's chat compressed n times, all matching)", 200,
              "sessions", compressed),
    Dimension("width", "lineage width (n /branch children of one conversation)", 50, "branches", width),
    Dimension("nested", "nested branches (a /branch of a /branch... n deep, each copying all before it)", 25,
              "branches", nested),
    Dimension("project", "sessions per project", 100, "sessions", project_sessions),
    Dimension("profile", "sessions per profile (20 of the project among n of other projects)", 200, "sessions",
              profile_sessions),
    Dimension("matches", "matches per message (a tool output of n matching lines)", 500, "lines", matches),
    Dimension("length", "message length (one message of n KB)", 25, "KB", length),
    Dimension("projects", "number of projects (n repos of 3 sessions)", 15, "repos", projects),
    Dimension("explicit", "explicit projects (n in projects.db, and n sessions in folders deleted since)", 100,
              "projects", explicit),
    Dimension("age", "history age (24 sessions over n days, other projects interleaved)", 30, "days", age),
    Dimension("echoes", "echoes of earlier recalls (a session of n rounds of recall, 20 KB log, quoting reply)", 50,
              "rounds", echoes),
    Dimension("glued", "a word run into CJK text (n messages of another project holding it)", 2000, "messages", glued),
    Dimension("logs", "matching tool logs of one session (n logs of 100 KB, progress bars, no CJK text)", 24, "logs",
              logs),
    Dimension("builds", "sessions of matching build logs (n sessions of three 50 KB logs)", 50, "sessions", builds),
    Dimension("context", "the asking session's live context (n compressed sessions, 10n live turns)", 50, "sessions",
              context),
    Dimension("filtered", "matches a date filter leaves out (one session of n matches before since)", 2000, "messages",
              filtered),
    Dimension("tick", "rows of one clock tick compacted in place (one session of n rows written at one time)", 1000,
              "rows", tick),
    Dimension("picks", "matches of one word the index ranks (n sessions, three matching turns each)", 200, "sessions",
              picks),
    Dimension("carried", "rows of one clock tick compacted in place, every row carried forward as a live copy", 1000,
              "rows", carried),
)}


# -- timing ----------------------------------------------------------------------------------------------------------


BUILTIN_BUDGET_S = 3.0  # a built-in call slower than this is timed once (its first call kept as the sample)


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def time_pair(b: Bench, small: Call, large: Call, reps: int) -> dict[str, Any]:
    """One call at n and at 4n, timed in turns (n then 4n, then 4n then n...) so that the machine's load moves
    both alike: ours, then the built-in's. Medians in ms, the built-in's timed calls (fewer where ``reps`` of
    them would take more than ``BUILTIN_BUDGET_S``: its walk of a long chain), what was wrong with our answers."""
    problems = [p for p in (small.check(small.ours()), large.check(large.ours())) if p]  # untimed first calls
    ours: list[list[float]] = [[], []]
    builtin: list[list[float]] = [[], []]
    builtin_reps = [0, 0]
    if small.builtin is not None and large.builtin is not None:
        for i, call in enumerate((small, large)):
            first, _ = _timed(call.builtin)  # type: ignore[arg-type]
            builtin_reps[i] = reps if first * reps <= BUILTIN_BUDGET_S else int(BUILTIN_BUDGET_S / first)
            if not builtin_reps[i]:
                builtin[i].append(first)
    for rep in range(reps):
        order = (0, 1) if rep % 2 == 0 else (1, 0)
        for i in order:
            call = (small, large)[i]
            if call.cold:
                b.drop_caches()
            seconds, answer = _timed(call.ours)
            ours[i].append(seconds)
            problem = call.check(answer)
            if problem and problem not in problems:
                problems.append(problem)
        for i in order:
            call = (small, large)[i]
            if rep < builtin_reps[i]:
                builtin[i].append(_timed(call.builtin)[0])  # type: ignore[arg-type]
    med = [round(statistics.median(x) * 1000, 2) for x in ours]
    out: dict[str, Any] = {"call": small.label, "ours_ms": med, "ours_ratio": round(med[1] / med[0], 2),
                           "builtin_ms": None, "builtin_ratio": None, "builtin_reps": [len(x) for x in builtin],
                           "problems": problems}
    if builtin[0] and builtin[1]:
        bmed = [round(statistics.median(x) * 1000, 2) for x in builtin]
        out.update(builtin_ms=bmed, builtin_ratio=round(bmed[1] / bmed[0], 2))
    return out


def run_dimension(b: Bench, dim: Dimension, n: int, reps: int) -> dict[str, Any]:
    """Both profiles built (n and 4n), then every call timed at both sizes in turns."""
    calls = []
    for size in (n, 4 * n):
        seconds, built = _timed(lambda: dim.build(b, size))
        calls.append(built)
        print(f"  {dim.key} {size} {dim.unit}: built in {seconds:.1f} s", file=sys.stderr, flush=True)
    b.drop_caches()
    rows = []
    try:
        for small, large in zip(*calls, strict=True):
            assert small.label == large.label
            rows.append(time_pair(b, small, large, reps))
    finally:
        b.close()
    problems = [f"{dim.key} {row['call']}: {p}" for row in rows for p in row.pop("problems")]
    return {"dimension": dim.key, "title": dim.title, "n": n, "unit": dim.unit, "rows": rows, "problems": problems}


def head() -> str:
    try:
        out = subprocess.run(["git", "--no-optional-locks", "-C", str(ROOT), "log", "-1", "--format=%h"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "--no-optional-locks", "-C", str(ROOT), "status", "--short", "--", ":(glob)*.py"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"
    return (out or "?") + (" + uncommitted" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=9, help="timed calls per cell, the median kept (default 9)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every n by this (default 1)")
    parser.add_argument("--only", help=f"comma-separated dimensions (of {','.join(DIMENSIONS)})")
    parser.add_argument("--json", type=Path, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    keys = args.only.split(",") if args.only else list(DIMENSIONS)
    unknown = [k for k in keys if k not in DIMENSIONS]
    if unknown:
        parser.error(f"unknown dimension(s): {unknown}")

    tmp = Path(tempfile.mkdtemp(prefix="phr-scaling-"))
    os.environ["HERMES_HOME"] = str(tmp / "boot")  # before Hermes is imported: nothing touches ~/.hermes
    (tmp / "boot").mkdir()
    phr = load_plugin()
    load_start, started = os.getloadavg(), time.perf_counter()
    results = []
    try:
        bench = Bench(phr, tmp)
        for key in keys:
            dim = DIMENSIONS[key]
            results.append(run_dimension(bench, dim, max(1, round(dim.n * args.scale)), args.reps))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load_end, seconds = os.getloadavg(), time.perf_counter() - started

    print(f"\ncost at n and 4n, median of {args.reps} ms; plugin {head()}; load average {load_start[0]:.2f} at the "
          f"start, {load_end[0]:.2f} at the end; {seconds:.0f} s\n")
    print("| dimension | call | n | ours at n | ours at 4n | ratio | built-in at n | built-in at 4n | built-in ratio |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        for i, row in enumerate(r["rows"]):
            ours, built, runs = row["ours_ms"], row["builtin_ms"], row["builtin_reps"]
            flag = " **>5**" if row["ours_ratio"] > 5 else ""
            few = [f" ({k} run{'s' if k > 1 else ''})" if k < args.reps else "" for k in runs]
            print(f"| {r['dimension'] if i == 0 else ''} | {row['call']} | {r['n'] if i == 0 else ''} "
                  f"{r['unit'] if i == 0 else ''} | {ours[0]:.2f} | {ours[1]:.2f} | {row['ours_ratio']:.2f}{flag} | "
                  + ("n/a | n/a | n/a |" if built is None else
                     f"{built[0]:.2f}{few[0]} | {built[1]:.2f}{few[1]} | {row['builtin_ratio']:.2f} |"))
    problems = [p for r in results for p in r["problems"]]
    for p in problems:
        print(f"!!! wrong answer: {p}")
    above = [(r["dimension"], row["call"], row["ours_ratio"]) for r in results for row in r["rows"] if row["ours_ratio"] > 5]
    print(f"\nratios of ours above 5: {above or 'none'}")
    command = " ".join([".venv/bin/python", "bench/scaling.py", *(argv if argv is not None else sys.argv[1:])])
    print(f"command: {command}")
    if args.json:
        args.json.write_text(json.dumps({"reps": args.reps, "scale": args.scale, "plugin": head(),
                                         "load_average": [load_start, load_end], "seconds": round(seconds, 1),
                                         "dimensions": results, "problems": problems, "command": command}, indent=2))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
