#!/usr/bin/env python3
"""Recall of project_history_search over several kinds of history, beside plain BM25 and Hermes' built-in.

Usage::

    python bench/recall.py SET_DIR [SET_DIR ...] [--work DIR] [--no-semantic] [--out JSON]

Each ``SET_DIR`` is a data set folder; its kind is read from what it holds:

* ``beam``: numbered chat folders with ``chat.json`` and
  ``probing_questions.json`` (BEAM; the team's ``bench/data/devchats`` has the
  same format). A chat is a project, a batch a session; evidence = message ids.
* ``mem-gallery``: ``*.json`` files with ``multi_session_dialogues`` and
  ``human-annotated QAs``. A file is a project, a session a session, a round
  two messages (user, with its image captions as text, then assistant);
  evidence = the messages of the ``clue`` rounds (questions without a clue
  are skipped). A question about a picture is asked with the picture's
  caption appended, the way messages carry theirs.
* ``devmembench``: ``sessions.json`` + ``questions.json``. All 25 sessions are
  one project; evidence = ``haystackSessionIds`` (no message evidence, so
  ``msg@10`` is not reported for it). With ``--devmembench-layout folders``
  (the default) the project is as a developer would have it: one explicit
  Hermes project (projects.db) with one git repo folder per app, named after
  the sessions' ``metadata.project`` (``ecommerce-api``, ``dashboard-app``), each
  session recorded in its app's folder (a session about ``both`` in the first
  folder, as is the asking session). ``workspace`` is the older build: one git
  repo ``00-workspace``, an auto project, every session there.
* ``memorycode``: ``dialogue_*.json`` (MemoryCode: a mentor and an engineer
  over many sessions, the mentor's coding conventions changing as they go).
  A conversation is a project, a session a session, the mentor's turns user
  messages and the engineer's assistant messages. The set has no questions:
  for each kind of convention a conversation sets (``session_regex``
  categories) "what is our convention for X now?" (X from
  :data:`CONVENTION_SUBJECTS`) and the questions of
  :data:`CONVENTION_QUESTIONS` are asked, and
  the one right session is the *latest* that set it (the earlier ones that
  set it otherwise are the distractors). Evidence is that session only
  (``msg@10`` is not reported).

Data is only read from there: every set is built into its own throwaway
Hermes home (a real ``state.db`` written by Hermes' ``SessionDB``, one git repo
per project) in a temporary folder, or in ``--work DIR`` to reuse it (and its
vector index) on the next run. ``--out`` writes ids, ranks and metrics only.

Per project one "current" session is created last; every question of the
project is asked verbatim from it. Systems, each a ranked list of
``(session, message)``, top 10, on the same state.db:

* ``keyword`` / ``semantic`` / ``hybrid``: ``search.search_history``;
* ``plain-bm25`` (the reference): FTS5 ``bm25()`` over an OR of the
  question's quoted content words (English stop words dropped), the best
  message per session, over the same project's other sessions. For a question
  with Chinese/Japanese/Korean text, the same on ``messages_fts_trigram`` with
  each 3-character window of a CJK run quoted (FTS5's unicode61 tokenizer
  keeps a CJK run as one token, so it finds nothing there);
* ``builtin-verbatim`` / ``builtin-or``: Hermes' ``session_search`` fed the
  question, or the same OR of content words (it searches every project, so
  another project's session is simply a miss).

Metrics over questions with evidence: session R@1/3/5/10, MRR (first evidence
session within the top 10), ``msg@10`` (a returned message of the top 10 is an
evidence message) and latency; per set, per question type, and the macro
average over sets.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shlex
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
from _common import load_plugin, summary_ms  # noqa: E402  (imports no Hermes module)
from stopwords import EN_STOP_WORDS  # noqa: E402

SYSTEMS = ("keyword", "semantic", "hybrid", "plain-bm25", "builtin-verbatim", "builtin-or")
KS = (1, 3, 5, 10)
LIMIT = 10
BUILD_VERSION = 3  # bump when the mapping onto Hermes changes: --work homes are rebuilt
BASE_TS = 1_704_067_200.0  # 2024-01-01T00:00:00Z
MSG_STEP_S = 60.0
SESSION_GAP_S = 86_400.0
CURRENT_MESSAGE = "Let's pick this project up again."

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


def content_words(question: str) -> list[str]:
    """The question's Latin-script content words, lower-cased, in order, de-duplicated."""
    text = _CJK.sub(" ", question.lower().replace("\u2019", "'").replace("\u2018", "'"))
    words: list[str] = []
    for token in _WORD.findall(text):
        token = token.split("'", 1)[0]  # possessive / contraction: "app's" -> "app"
        if not token or token in EN_STOP_WORDS or (len(token) == 1 and not token.isdigit()):
            continue
        if token not in words:
            words.append(token)
    return words


def or_query(question: str) -> str:
    """The question's content words joined with `` OR `` (the question itself if none): what the built-in is fed."""
    words = content_words(question)
    return " OR ".join(words) if words else question


def reference_match(question: str) -> tuple[str, str]:
    """``(fts table, MATCH expression)`` of the plain reference for ``question``."""
    words = content_words(question)
    runs = _CJK.findall(question)
    if runs:
        grams = [run[i : i + 3] for run in runs for i in range(max(len(run) - 2, 0))]
        pieces = list(dict.fromkeys(grams + [w for w in words if len(w) >= 3]))
        return "messages_fts_trigram", " OR ".join('"' + p.replace('"', '""') + '"' for p in pieces)
    return "messages_fts", " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


# ---------------------------------------------------------------------------
# Sets: one neutral shape for every format
# ---------------------------------------------------------------------------


@dataclass
class SetMessage:
    key: str  # unique within the set
    role: str
    content: str


@dataclass
class SetSession:
    key: str
    started: float | None  # Unix time when the data set dates it
    messages: list[SetMessage]
    folder: str = ""  # the project folder it was recorded in (a project with ``folders``); "" for the project's one repo


@dataclass
class SetProject:
    key: str
    sessions: list[SetSession]
    folders: tuple[str, ...] = ()  # when set: an explicit project (projects.db) of these git repo folders, first primary


@dataclass
class SetQuestion:
    project: str
    qtype: str
    text: str
    evidence_messages: set[str]  # message keys (may be empty: session-level evidence only)
    evidence_sessions: set[str]  # session keys


@dataclass
class DataSet:
    name: str
    kind: str
    path: Path
    projects: list[SetProject]
    questions: list[SetQuestion]
    message_evidence: bool
    skipped: int = 0  # questions without evidence
    layout: str = ""  # how the set maps onto Hermes when it has a choice (part of the home's fingerprint)


def _date_ts(text: Any) -> float | None:
    try:
        return time.mktime(time.strptime(str(text)[:10], "%Y-%m-%d")) + 9 * 3600
    except (ValueError, OverflowError):
        return None


def _flatten_ids(obj: Any) -> list[int]:
    out: list[int] = []

    def walk(o: Any) -> None:
        if isinstance(o, bool):
            return
        if isinstance(o, int):
            if o not in out:
                out.append(o)
        elif isinstance(o, (list, tuple)):
            for e in o:
                walk(e)
        elif isinstance(o, dict):
            for e in o.values():
                walk(e)

    walk(obj)
    return out


def load_beam(path: Path) -> DataSet:
    folders = sorted(
        (p for p in path.iterdir() if p.is_dir() and p.name.isdigit() and (p / "chat.json").is_file()), key=lambda p: int(p.name)
    )
    projects, questions, skipped = [], [], 0
    for folder in folders:
        pkey = f"chat{int(folder.name):02d}"
        sessions, session_of = [], {}
        for index, batch in enumerate(json.loads((folder / "chat.json").read_text(encoding="utf-8"))):
            skey = f"{pkey}-b{int(batch.get('batch_number') or index + 1)}"
            msgs = []
            for turn in batch.get("turns") or []:
                for msg in turn:
                    mkey = f"{pkey}:{int(msg['id'])}"
                    msgs.append(SetMessage(mkey, msg["role"], msg.get("content") or ""))
                    session_of[mkey] = skey
            sessions.append(SetSession(skey, None, msgs))
        projects.append(SetProject(pkey, sessions))
        data = json.loads((folder / "probing_questions.json").read_text(encoding="utf-8"))
        for qtype, items in data.items():
            for item in items or []:
                keys = {f"{pkey}:{i}" for i in _flatten_ids(item.get("source_chat_ids"))} & session_of.keys()
                if not keys:
                    skipped += 1
                    continue
                questions.append(SetQuestion(pkey, qtype, str(item.get("question") or ""), keys, {session_of[k] for k in keys}))
    return DataSet(path.name, "beam", path, projects, questions, True, skipped)


def load_mem_gallery(path: Path) -> DataSet:
    projects, questions, skipped = [], [], 0
    for file in sorted(path.glob("*.json")):
        data = json.loads(file.read_text(encoding="utf-8"))
        pkey = file.stem
        sessions, session_of = [], {}
        for sess in data.get("multi_session_dialogues") or []:
            skey = f"{pkey}-{sess['session_id']}"
            msgs = []
            for rnd in sess.get("dialogues") or []:
                rid = str(rnd["round"])
                captions = [c for c in (rnd.get("image_caption") or []) if isinstance(c, str) and c.strip()]
                user = (rnd.get("user") or "") + "".join(f"\n[image: {c}]" for c in captions)
                msgs.append(SetMessage(f"{pkey}:{rid}:u", "user", user))
                msgs.append(SetMessage(f"{pkey}:{rid}:a", "assistant", rnd.get("assistant") or ""))
                session_of[f"{pkey}:{rid}:u"] = session_of[f"{pkey}:{rid}:a"] = skey
            sessions.append(SetSession(skey, _date_ts(sess.get("date")), msgs))
        projects.append(SetProject(pkey, sessions))
        for qa in data.get("human-annotated QAs") or []:
            keys = {f"{pkey}:{c}:{side}" for c in qa.get("clue") or [] for side in "ua"} & session_of.keys()
            if not keys:
                skipped += 1
                continue
            # A question about a picture carries the picture as its caption, as messages do.
            caption = qa.get("image_caption")
            captions = [caption] if isinstance(caption, str) else [c for c in caption or [] if isinstance(c, str)]
            text = str(qa.get("question") or "") + "".join(f"\n[image: {c}]" for c in captions if c.strip())
            questions.append(SetQuestion(pkey, str(qa.get("point") or "?"), text, keys, {session_of[k] for k in keys}))
    return DataSet(path.name, "mem-gallery", path, projects, questions, True, skipped)


DEVMEMBENCH_LAYOUTS = ("folders", "workspace")


def load_devmembench(path: Path, layout: str = "folders") -> DataSet:
    sessions = []
    apps: list[str] = []
    slug = re.compile(r"[^A-Za-z0-9._-]+")
    for sess in json.loads((path / "sessions.json").read_text(encoding="utf-8")):
        skey = str(sess["sessionId"])
        msgs = [SetMessage(f"{skey}:{i}", m["role"], m.get("content") or "") for i, m in enumerate(sess.get("messages") or [])]
        meta = sess.get("metadata") or {}
        app = slug.sub("-", str(meta.get("project") or "")).strip("-")
        if app and app != "both" and app not in apps:
            apps.append(app)
        sessions.append(SetSession(skey, _date_ts(meta.get("date")), msgs, app if app != "both" else ""))
    if layout == "folders" and apps:
        for sess in sessions:
            sess.folder = sess.folder or apps[0]  # "both" (or none): the first app's folder
        project = SetProject("workspace", sessions, tuple(apps))
    else:
        for sess in sessions:
            sess.folder = ""
        project, layout = SetProject("workspace", sessions), "workspace"
    known = {s.key for s in sessions}
    questions, skipped = [], 0
    for q in json.loads((path / "questions.json").read_text(encoding="utf-8")):
        evidence = set(map(str, q.get("haystackSessionIds") or [])) & known
        if not evidence:
            skipped += 1
            continue
        questions.append(SetQuestion("workspace", str(q.get("questionType") or "?"), str(q.get("question") or ""), set(), evidence))
    return DataSet(path.name, "devmembench", path, [project], questions, False, skipped,
                   "" if layout == "workspace" else layout)


#: How a developer asks their agent about a convention, per MemoryCode ``session_regex`` category.
CONVENTION_QUESTIONS: dict[str, tuple[str, ...]] = {
    "method": ("what's our naming convention for methods now?", "how should I name methods these days?",
               "what prefix or suffix do method names get now?"),
    "function": ("what's our naming convention for functions now?", "how do we name functions at the moment?",
                 "what should function names start or end with now?"),
    "function argument": ("how should function arguments be named now?", "what's our convention for argument names?",
                          "what prefix or suffix do we put on function parameters now?"),
    "variable": ("what's our naming convention for variables now?", "how should I name variables these days?",
                 "what do variable names need to start or end with now?"),
    "attribute": ("how do we name attributes now?", "what's the naming rule for class attributes?",
                  "what prefix or suffix do attribute names get now?"),
    "class": ("how should class names look now?", "what's our convention for naming classes?",
              "is there a rule for class names these days?"),
    "method decorator": ("which decorator do we put on methods now?", "what decorator should every method have?",
                         "do methods need a particular decorator now?"),
    "function decorator": ("which decorator do we put on functions now?", "what decorator should every function have?",
                           "do functions need a particular decorator now?"),
    "class decorator": ("which decorator do we put on classes now?", "what decorator should every class have?",
                        "do classes need a particular decorator these days?"),
    "import": ("what do we import in every file now?", "which module should I always import?",
               "is there a module we import even when it's unused?"),
    "function try": ("should functions have try statements?", "what's our rule on try blocks in functions?",
                     "do we still wrap function bodies in try/except?"),
    "method try": ("should methods have try statements?", "what's our rule on try blocks in methods?",
                   "do we still wrap method bodies in try/except?"),
    "function assert": ("should functions include assert statements?", "what's our rule on asserts in functions?",
                        "do we check inputs with assertions in functions now?"),
    "method assert": ("should methods include assert statements?", "what's our rule on asserts in methods?",
                      "do we check inputs with assertions in methods now?"),
    "function annotation": ("do we annotate functions?", "what's our rule on type annotations for functions?",
                            "should function signatures have type hints now?"),
    "method annotation": ("do we annotate methods?", "what's our rule on type annotations for methods?",
                          "should method signatures have type hints now?"),
    "function docstring": ("do functions need docstrings?", "what's our docstring rule for functions?",
                           "should I document functions with docstrings now?"),
    "method docstring": ("do methods need docstrings?", "what's our docstring rule for methods?",
                         "should I document methods with docstrings now?"),
    "comment": ("what's our rule about code comments?", "do we have to comment our code now?",
                "how much should I comment my code these days?"),
}


#: What each category governs, in a developer's words: the first question of each is "what is our convention for ... now?".
CONVENTION_SUBJECTS: dict[str, str] = {
    "method": "method names", "function": "function names", "function argument": "function argument names",
    "variable": "variable names", "attribute": "attribute names", "class": "class names",
    "method decorator": "decorators on methods", "function decorator": "decorators on functions",
    "class decorator": "class decorators", "import": "imports", "function try": "try statements in functions",
    "method try": "try statements in methods", "function assert": "assert statements in functions",
    "method assert": "assert statements in methods", "function annotation": "annotations on functions",
    "method annotation": "annotations on methods", "function docstring": "docstrings in functions",
    "method docstring": "docstrings in methods", "comment": "comments",
}


def _memorycode_turns(text: str, mentor: str, mentee: str) -> list[tuple[str, str]]:
    """``(role, words)`` of a session's text: paragraphs ``Name: words``; a paragraph without a name continues the turn."""
    turns: list[tuple[str, str]] = []
    for para in (p.strip() for p in re.split(r"\n\s*\n", text.strip())):
        if not para:
            continue
        for name, role in ((mentor, "user"), (mentee, "assistant")):
            if para.startswith(name + ":"):
                turns.append((role, para[len(name) + 1 :].strip()))
                break
        else:
            if turns:
                turns[-1] = (turns[-1][0], turns[-1][1] + "\n\n" + para)
            else:
                turns.append(("user", para))
    return turns


def load_memorycode(path: Path) -> DataSet:
    projects, questions, skipped = [], [], 0
    for file in sorted(path.glob("dialogue_*.json"), key=lambda p: int(re.sub(r"\D", "", p.stem) or 0)):
        data = json.loads(file.read_text(encoding="utf-8"))
        pkey = file.stem.replace("dialogue_", "mc")
        ctx = data.get("context") or {}
        mentor, mentee = str(ctx.get("mentor") or ""), str(ctx.get("mentee") or "")
        sessions: list[SetSession] = []
        latest: dict[str, str] = {}  # category -> the last session setting it
        for s_index, sess in enumerate(data.get("sessions") or []):
            skey = f"{pkey}-s{s_index:02d}"
            turns = _memorycode_turns(str(sess.get("text") or ""), mentor, mentee)
            sessions.append(SetSession(skey, None, [SetMessage(f"{skey}:{i}", role, words) for i, (role, words) in enumerate(turns)]))
            for category, _pattern in sess.get("session_regex") or []:
                latest[str(category)] = skey
        projects.append(SetProject(pkey, sessions))
        for category, skey in sorted(latest.items()):
            phrasings = CONVENTION_QUESTIONS.get(category)
            if not phrasings:
                skipped += 1
                continue
            for text in (f"what is our convention for {CONVENTION_SUBJECTS[category]} now?", *phrasings):
                questions.append(SetQuestion(pkey, category, text, set(), {skey}))
    return DataSet(path.name, "memorycode", path, projects, questions, False, skipped)


def load_set(path: Path, devmembench_layout: str = "folders") -> DataSet:
    if (path / "sessions.json").is_file() and (path / "questions.json").is_file():
        return load_devmembench(path, devmembench_layout)
    if any(path.glob("dialogue_*.json")):
        return load_memorycode(path)
    if any(p.is_dir() and p.name.isdigit() and (p / "chat.json").is_file() for p in path.iterdir()):
        return load_beam(path)
    for file in path.glob("*.json"):
        try:
            head = json.loads(file.read_text(encoding="utf-8"))
        except ValueError:
            continue
        if isinstance(head, dict) and "multi_session_dialogues" in head:
            return load_mem_gallery(path)
    raise SystemExit(f"{path}: not a data set this bench knows (beam, mem-gallery, devmembench, memorycode)")


def fingerprint(path: Path, layout: str = "") -> str:
    """Names, sizes and modification times of a set's files, with the builder's version (and the layout, if any)."""
    h = hashlib.sha256(str(BUILD_VERSION).encode() + (f":{layout}".encode() if layout else b""))
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        st = file.stat()
        h.update(f"{file.relative_to(path)}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------------------
# Building a Hermes home
# ---------------------------------------------------------------------------


def git_init(repo: Path) -> None:
    repo.mkdir(parents=True, exist_ok=True)
    (repo / "README.md").write_text(f"# {repo.name}\n", encoding="utf-8")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    ident = ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q", "-b", "main"], ["add", "README.md"], [*ident, "commit", "-q", "-m", "init"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


@dataclass
class Built:
    home: Path
    db_id: dict[str, int]  # message key -> messages.id
    sid: dict[str, str]  # session key -> sessions.id
    current: dict[str, str]  # project key -> current session id
    scope: dict[str, list[str]]  # project key -> its other sessions' ids


def build_home(ds: DataSet, root: Path) -> Built:
    """A Hermes home for ``ds`` under ``root`` (reused when ``root/built.json`` matches the set)."""
    manifest = root / "built.json"
    stamp = fingerprint(ds.path, ds.layout)
    if manifest.is_file():
        saved = json.loads(manifest.read_text(encoding="utf-8"))
        if saved.get("fingerprint") == stamp:
            return Built(root / "home", saved["db_id"], saved["sid"], saved["current"], saved["scope"])
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    home, repos = root / "home", root / "repos"  # repos outside HERMES_HOME: a repo there is never a project
    home.mkdir(parents=True)
    from hermes_state import SessionDB

    db = SessionDB(db_path=home / "state.db")
    db_id: dict[str, int] = {}
    sid: dict[str, str] = {}
    current: dict[str, str] = {}
    scope: dict[str, list[str]] = {}
    started: dict[str, float] = {}
    ts = BASE_TS
    slug = re.compile(r"[^A-Za-z0-9]+")
    repo_of: dict[str, Path] = {}
    folders_of: dict[str, dict[str, Path]] = {}
    for p_index, project in enumerate(ds.projects):
        repo = repos / f"{p_index:02d}-{slug.sub('-', project.key).strip('-')[:40].lower()}"
        if project.folders:  # an explicit project: one repo per folder, named as the set names it
            folders_of[project.key] = {name: repo / name for name in project.folders}
            for folder in folders_of[project.key].values():
                git_init(folder)
            repo = folders_of[project.key][project.folders[0]]
            from hermes_cli import projects_db

            with projects_db.connect_closing(home / "projects.db") as pconn:
                projects_db.create_project(pconn, name=project.key, folders=[str(f) for f in folders_of[project.key].values()],
                                           primary_path=str(repo))
        else:
            git_init(repo)
        repo_of[project.key] = repo
        scope[project.key] = []
        for s_index, sess in enumerate(project.sessions):
            session_id = f"{ds.kind[:4]}-p{p_index:02d}-s{s_index:03d}"
            cwd = folders_of[project.key][sess.folder] if sess.folder else repo
            db.create_session(session_id, "cli", cwd=str(cwd))
            sid[sess.key] = session_id
            scope[project.key].append(session_id)
            ts = max(ts + SESSION_GAP_S, sess.started or 0.0)
            started[session_id] = ts
            for msg in sess.messages:
                ts += MSG_STEP_S
                db_id[msg.key] = db.append_message(session_id, msg.role, msg.content, timestamp=ts)
    for p_index, project in enumerate(ds.projects):  # the asking sessions come after every history
        ts += SESSION_GAP_S
        session_id = f"{ds.kind[:4]}-p{p_index:02d}-current"
        db.create_session(session_id, "cli", cwd=str(repo_of[project.key]))
        started[session_id] = ts
        db.append_message(session_id, "user", CURRENT_MESSAGE, timestamp=ts + 1)
        current[project.key] = session_id
    db.close()
    # create_session stamps started_at with the wall clock: align it with the message timeline.
    conn = sqlite3.connect(home / "state.db")
    try:
        conn.executemany("UPDATE sessions SET started_at = ? WHERE id = ?", [(t, s) for s, t in started.items()])
        conn.commit()
    finally:
        conn.close()
    manifest.write_text(json.dumps({"fingerprint": stamp, "db_id": db_id, "sid": sid, "current": current, "scope": scope}),
                        encoding="utf-8")
    return Built(home, db_id, sid, current, scope)


# ---------------------------------------------------------------------------
# Systems
# ---------------------------------------------------------------------------

Ranked = list[tuple[str, "int | None"]]


def plain_reference(conn: sqlite3.Connection, question: str, scope_ids: list[str]) -> Ranked:
    """The plain BM25 reference: best message per session, sessions by their best message."""
    table, match = reference_match(question)
    if not match:
        return []
    sql = f"""
        SELECT m.session_id, m.id FROM {table} JOIN messages m ON m.id = {table}.rowid
        WHERE {table} MATCH ? AND (m.active = 1 OR m.compacted = 1)
          AND m.session_id IN (SELECT value FROM json_each(?))
        ORDER BY bm25({table}), m.id
    """
    out: Ranked = []
    seen: set[str] = set()
    for session_id, message_id in conn.execute(sql, (match, json.dumps(scope_ids))):
        if session_id not in seen:
            seen.add(session_id)
            out.append((session_id, int(message_id)))
            if len(out) >= LIMIT:
                break
    return out


@dataclass
class Question:
    q: SetQuestion
    current: str
    scope: list[str]
    evidence_ids: set[int]
    evidence_sids: set[str]
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)


def score(ranked: Ranked, q: Question) -> dict[str, Any]:
    rank = next((i + 1 for i, (sid, _) in enumerate(ranked[:LIMIT]) if sid in q.evidence_sids), None)
    msg_hit = any(mid is not None and mid in q.evidence_ids for _, mid in ranked[:LIMIT])
    return {"rank": rank, "msg_hit": msg_hit}


def aggregate(questions: list[Question], system: str) -> dict[str, Any]:
    runs = [q.runs[system] for q in questions if system in q.runs]
    n = len(runs)
    if not n:
        return {"n": 0}
    out: dict[str, Any] = {"n": n}
    for k in KS:
        out[f"R@{k}"] = round(sum(1 for r in runs if r["rank"] and r["rank"] <= k) / n, 4)
    out["MRR"] = round(sum(1 / r["rank"] for r in runs if r["rank"]) / n, 4)
    out["msg@10"] = round(sum(1 for r in runs if r["msg_hit"]) / n, 4)
    out["errors"] = sum(1 for r in runs if r.get("error"))
    out["empty"] = sum(1 for r in runs if not r["results"] and not r.get("error"))
    out.update(summary_ms([r["latency_s"] for r in runs]))
    return out


def index_with_local_model(phr: Any, home: Path, name: str) -> dict[str, Any]:
    """Configure the local model in ``home``, consent for every project, and index them all; the index report.

    Exits the benchmark when indexing fails or leaves messages out.
    """
    (home / "config.yaml").write_text(
        "plugins:\n  entries:\n    project-history-recall:\n      embedding:\n        provider: local\n", encoding="utf-8"
    )
    phr.paths.plugin_data_dir(home).mkdir(parents=True, exist_ok=True)
    phr.gate.record_consent(home=home, session_id="", decision="allow", projects="all")
    report = phr.indexing.index_projects(home=home)
    if not report.get("success") or report.get("remaining"):
        raise SystemExit(f"[{name}] indexing failed: {report}")
    return report


def run_set(ds: DataSet, root: Path, phr: Any, systems: list[str], semantic: bool) -> list[Question]:
    t0 = time.perf_counter()
    built = build_home(ds, root)
    home = built.home
    os.environ["HERMES_HOME"] = str(home)
    n_messages = sum(len(s.messages) for p in ds.projects for s in p.sessions)
    n_sessions = sum(len(p.sessions) for p in ds.projects)
    print(f"[{ds.name}] {ds.kind}: {len(ds.projects)} projects / {n_sessions} sessions / {n_messages} messages, "
          f"{len(ds.questions)} questions with evidence ({ds.skipped} without); home ready in {time.perf_counter() - t0:.1f}s",
          flush=True)
    from hermes_state import SessionDB
    from tools.session_search_tool import session_search

    if semantic:
        t_index = time.perf_counter()
        report = index_with_local_model(phr, home, ds.name)
        print(f"[{ds.name}] index ready: {report.get('indexed')} messages ({time.perf_counter() - t_index:.1f}s)", flush=True)
    db = SessionDB(db_path=home / "state.db")
    conn = sqlite3.connect((home / "state.db").as_uri() + "?mode=ro", uri=True)

    def ours(mode: str) -> Callable[[Question], Ranked]:
        def run(q: Question) -> Ranked:
            res = phr.search.search_history(home=home, session_id=q.current, query=q.q.text, mode=mode, limit=LIMIT)
            if not res.get("success", True):
                raise RuntimeError(res.get("error"))
            if mode != "keyword" and res.get("semantic_status") != "ready":
                raise RuntimeError(f"semantic_status {res.get('semantic_status')}: {res.get('semantic_note')}")
            return [(r["session_id"], r.get("message_id")) for r in res.get("results") or []]
        return run

    def builtin(or_words: bool) -> Callable[[Question], Ranked]:
        def run(q: Question) -> Ranked:
            query = or_query(q.q.text) if or_words else q.q.text
            res = json.loads(session_search(query=query, limit=LIMIT, db=db, current_session_id=q.current))
            if not res.get("success", True):
                raise RuntimeError(res.get("error") or "session_search failed")
            return [(r["session_id"], r.get("match_message_id")) for r in res.get("results") or []]
        return run

    runners: dict[str, Callable[[Question], Ranked]] = {
        "keyword": ours("keyword"),
        "semantic": ours("semantic"),
        "hybrid": ours("hybrid"),
        "plain-bm25": lambda q: plain_reference(conn, q.q.text, q.scope),
        "builtin-verbatim": builtin(False),
        "builtin-or": builtin(True),
    }
    questions = [
        Question(
            q,
            built.current[q.project],
            built.scope[q.project],
            {built.db_id[k] for k in q.evidence_messages},
            {built.sid[k] for k in q.evidence_sessions},
        )
        for q in ds.questions
    ]
    errors: dict[str, list[str]] = defaultdict(list)
    for q in questions:
        for system in systems:
            started = time.perf_counter()
            error = None
            try:
                ranked = runners[system](q)
            except Exception as exc:  # counted as an empty answer, and reported
                ranked, error = [], f"{type(exc).__name__}: {exc}"
                errors[system].append(error)
            run = {"results": ranked, "latency_s": time.perf_counter() - started, **score(ranked, q)}
            if error:
                run["error"] = error
            q.runs[system] = run
    for system, samples in errors.items():
        print(f"[{ds.name}] {system}: {len(samples)} errors, e.g. {samples[0]}", flush=True)
    conn.close()
    db.close()
    return questions


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------


def print_table(title: str, rows: dict[str, dict[str, Any]], systems: list[str], message_evidence: bool) -> None:
    print()
    print(f"**{title}**")
    print()
    cols = ["R@1", "R@3", "R@5", "R@10", "MRR"] + (["msg@10"] if message_evidence else []) + ["p50_ms", "p95_ms"]
    print("| system | " + " | ".join(c.replace("_ms", " ms") for c in cols) + " |")
    print("|---|" + "---|" * len(cols))
    for system in systems:
        s = rows.get(system) or {}
        if not s.get("n"):
            continue
        cells = [f"{s[c]:.1f}" if c.endswith("_ms") else f"{s[c]:.3f}" for c in cols]
        print(f"| {system} | " + " | ".join(cells) + " |")


def rrf_fuser(phr: Any) -> Callable[..., list[Any]]:
    """A stand-in for ``search.fuse``: Reciprocal Rank Fusion (k=60) of both legs' session rankings.

    Bench-only, to compare against the plugin's fusion of standardised
    scores on the same candidates. A session shows its keyword message when
    it has one, as in the plugin.
    """
    ranking = phr.ranking

    def fuse(keyword: Any, semantic: Any, limit: int) -> list[Any]:
        kw = [r.hit for r in keyword.sessions]
        sem = [r.hit for r in ranking.rank_sessions(semantic)]
        best = {h.session_id: h for h in sem}
        best.update({h.session_id: h for h in kw})
        in_kw, in_sem = {h.session_id for h in kw}, {h.session_id for h in sem}
        score: dict[str, float] = defaultdict(float)
        for ranked in (kw, sem):
            for rank, hit in enumerate(ranked, start=1):
                score[hit.session_id] += 1.0 / (60 + rank)
        order = sorted(score, key=lambda sid: (-score[sid], sid))
        return [ranking.found(best[sid], "both" if sid in in_kw and sid in in_sem else ("keyword" if sid in in_kw else "semantic"))
                for sid in order][:limit]

    return fuse


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="+", type=Path, help="data set folders (beam, mem-gallery, devmembench or memorycode format)")
    ap.add_argument("--work", type=Path, help="keep the built Hermes homes (and vector indexes) here and reuse them")
    ap.add_argument("--no-semantic", action="store_true", help="skip semantic and hybrid (no embedding)")
    ap.add_argument("--systems", help=f"comma-separated subset of {','.join(SYSTEMS)}")
    ap.add_argument("--by-type", action="store_true", help="also print MRR by question type")
    ap.add_argument("--out", type=Path, help="write metrics JSON here (ids and ranks only, no set text)")
    ap.add_argument("--fusion", choices=("scores", "rrf"), default="scores",
                    help="hybrid's fusion: the plugin's standardised scores, or (to compare) Reciprocal Rank Fusion, "
                         "k=60, of the same two legs' session rankings")
    ap.add_argument("--devmembench-layout", choices=DEVMEMBENCH_LAYOUTS, default="folders",
                    help="devmembench as one explicit project of one folder per app (folders, the default), "
                         "or one auto project of one repo (workspace, the build before 2026-12-05)")
    args = ap.parse_args(argv)
    command = shlex.join([sys.executable, *(sys.argv if argv is None else [__file__, *argv])])
    systems = list(SYSTEMS) if not args.systems else [s for s in args.systems.split(",") if s]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        ap.error(f"unknown systems: {unknown}")
    if args.no_semantic:
        systems = [s for s in systems if s not in ("semantic", "hybrid")]
    semantic = any(s in ("semantic", "hybrid") for s in systems)
    datasets = [load_set(p.resolve(), args.devmembench_layout) for p in args.sets]
    names = [d.name for d in datasets]
    if len(set(names)) != len(names):
        ap.error("two sets share a folder name")

    started = time.perf_counter()
    tmp = None
    if args.work is None:
        tmp = tempfile.TemporaryDirectory(prefix="phr-recall-")
        work = Path(tmp.name)
    else:
        work = args.work.resolve()
        work.mkdir(parents=True, exist_ok=True)
    phr = load_plugin()
    if semantic:
        phr.vector_leg.INDEX_BUDGET_S = 3600.0
    if args.fusion == "rrf":
        phr.search.fuse = rrf_fuser(phr)
    results: dict[str, list[Question]] = {}
    try:
        for ds in datasets:
            results[ds.name] = run_set(ds, work / ds.name, phr, systems, semantic)
    finally:
        if tmp is not None:
            tmp.cleanup()

    summary = {ds.name: {s: aggregate(results[ds.name], s) for s in systems} for ds in datasets}
    for ds in datasets:
        print_table(f"{ds.name} ({ds.kind}, {len(results[ds.name])} questions)", summary[ds.name], systems, ds.message_evidence)
    macro: dict[str, dict[str, Any]] = {}
    for s in systems:
        rows = [summary[d.name][s] for d in datasets if summary[d.name][s].get("n")]
        if rows:
            macro[s] = {"n": sum(r["n"] for r in rows)}
            for key in ("R@1", "R@3", "R@5", "R@10", "MRR", "p50_ms", "p95_ms"):
                macro[s][key] = round(statistics.fmean(r[key] for r in rows), 4)
            msg = [summary[d.name][s]["msg@10"] for d in datasets if d.message_evidence and summary[d.name][s].get("n")]
            if msg:
                macro[s]["msg@10"] = round(statistics.fmean(msg), 4)
    if len(datasets) > 1:
        print_table(f"macro average over {len(datasets)} sets", macro, systems, any(d.message_evidence for d in datasets))
    per_type: dict[str, dict[str, dict[str, Any]]] = {}
    for ds in datasets:
        by_type: dict[str, list[Question]] = defaultdict(list)
        for q in results[ds.name]:
            by_type[q.q.qtype].append(q)
        per_type[ds.name] = {t: {s: aggregate(qs, s) for s in systems} for t, qs in sorted(by_type.items())}
        if args.by_type:
            print()
            print(f"{ds.name}: MRR by question type")
            print()
            print("| type | n | " + " | ".join(systems) + " |")
            print("|---|---|" + "---|" * len(systems))
            for t, row in per_type[ds.name].items():
                print(f"| {t} | {row[systems[0]]['n']} | " + " | ".join(f"{row[s]['MRR']:.3f}" for s in systems) + " |")
    print()
    print(f"runtime: {time.perf_counter() - started:.1f}s")
    print(f"command: {command}")
    if args.out:
        report = {
            "command": command,
            "python": platform.python_version(),
            "hermes_agent": _hermes_version(),
            "summary": summary,
            "macro": macro,
            "per_type": per_type,
            "per_question": {
                name: [
                    {
                        "type": q.q.qtype,
                        "project": q.q.project,
                        "evidence_sessions": sorted(q.evidence_sids),
                        **{s: {"rank": q.runs[s]["rank"], "msg_hit": q.runs[s]["msg_hit"],
                               "sessions": [sid for sid, _ in q.runs[s]["results"]]} for s in systems},
                    }
                    for q in qs
                ]
                for name, qs in results.items()
            },
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


def _hermes_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("hermes-agent")
    except Exception:  # noqa: BLE001 (only a label in the report)
        return None


if __name__ == "__main__":
    sys.exit(main())
