#!/usr/bin/env python3
"""Recall of the plugin's keyword / semantic / hybrid search vs Hermes' built-in ``session_search``.

Usage::

    python bench/recall_beam.py BEAM_DIR [--out JSON] [--limit-chats N] [--show-misses N]

``BEAM_DIR`` is a BEAM tier folder (e.g. the 100K dev set): numbered chat
folders, each with ``chat.json`` and ``probing_questions.json``. The data is
only read from there; everything built from it (a Hermes home with its
``state.db``, one git repo per chat) lives in a temporary directory that is
deleted at the end. The ``--out`` JSON carries ids, ranks and metrics only,
never BEAM text.

Mapping onto Hermes (one run, one ``state.db`` shared by every system):

* each chat is one project: a real folder, ``git init -b main`` + one commit,
  so attribution puts its sessions in an auto project keyed by the repo root;
* each batch of ``chat.json`` is one CLI session (``cwd`` = the repo), each
  message one ``messages`` row (content as is, increasing timestamps);
* per chat, one extra "current" session in the same repo with one user
  message; every question of the chat is asked from it;
* a question's evidence is the set of message ids found in
  ``source_chat_ids`` (a list or a dict of lists); questions without any are
  skipped. Evidence sessions are the sessions holding an evidence message.

Systems, each giving a ranked list of ``(session_id, message_id)``:

* ``ours-keyword``: ``search.search_history(mode="keyword", limit=10)``,
  the question verbatim (scoped to the chat's project);
* ``builtin-verbatim``: Hermes' ``session_search(query=question, limit=10)``
  (global; a session of another chat is simply a miss), message id =
  ``match_message_id``;
* ``builtin-or``: the built-in fed the question's content words joined with
  `` OR `` (English stop words dropped), as an expert user would type it.

Metrics over questions with evidence: session recall@1/3/5/10, MRR (first
evidence session within the top 10), ``msg@10`` (some returned strongest
message within the top 10 is an evidence message) and latency. As a
diagnostic, ``msg_pm1@10`` also accepts a returned message that directly
precedes or follows an evidence message in the same session (typically the
assistant reply to an evidence user turn).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
from _common import load_plugin, summary_ms  # noqa: E402  (imports no Hermes module)

SYSTEMS = ("ours-keyword", "ours-semantic", "ours-hybrid", "builtin-verbatim", "builtin-or")
KS = (1, 3, 5, 10)
LIMIT = 10
BASE_TS = 1_704_067_200.0  # 2024-01-01T00:00:00Z
MSG_STEP_S = 60.0
BATCH_GAP_S = 86_400.0
CURRENT_MESSAGE = "Let's pick this project up again."

# A conventional English stop-word list (NLTK-style plus question fillers):
# what a person drops when turning a question into an OR of keywords.
EN_STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been before being below
    between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each
    few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself
    him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most
    mustn't my myself no nor not of off on once only or other ought our ours ourselves out over own same shan't
    she she'd she'll she's should shouldn't so some such than that that's the their theirs them themselves then
    there there's these they they'd they'll they're they've this those through to too under until up very was
    wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while who who's
    whom why why's will with won't would wouldn't you you'd you'll you're you've your yours yourself yourselves
    also just may might must shall would could can get got us via yes yet
    """.split()
)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def or_query(question: str) -> str:
    """The question's content words joined with `` OR `` (verbatim question if none)."""
    text = question.lower().replace("\u2019", "'").replace("\u2018", "'")
    words: list[str] = []
    for token in _WORD.findall(text):
        if token in EN_STOP_WORDS:
            continue
        token = token.split("'", 1)[0]  # possessive / leftover contraction: "app's" -> "app"
        if not token or token in EN_STOP_WORDS or (len(token) == 1 and not token.isdigit()):
            continue
        if token not in words:
            words.append(token)
    return " OR ".join(words) if words else question


def flatten_ids(obj: Any) -> list[int]:
    """Every int in a (nested) list / dict of ids, in order, de-duplicated."""
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


# ---------------------------------------------------------------------------
# Building the Hermes home
# ---------------------------------------------------------------------------


@dataclass
class Chat:
    number: int
    repo: Path
    current_sid: str
    # chat message id -> state.db message id / session id / batch number / content
    db_id: dict[int, int] = field(default_factory=dict)
    session_of: dict[int, str] = field(default_factory=dict)
    batch_of: dict[int, int] = field(default_factory=dict)
    content: dict[int, str] = field(default_factory=dict)
    sessions: list[str] = field(default_factory=list)


def chat_folders(beam_dir: Path) -> list[Path]:
    folders = [p for p in beam_dir.iterdir() if p.is_dir() and p.name.isdigit() and (p / "chat.json").is_file()]
    return sorted(folders, key=lambda p: int(p.name))


def git_init(repo: Path) -> None:
    repo.mkdir(parents=True)
    (repo / "README.md").write_text(f"# {repo.name}\n", encoding="utf-8")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    ident = ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q", "-b", "main"], ["add", "README.md"], [*ident, "commit", "-q", "-m", "init"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def build_home(db: Any, db_path: Path, repos_root: Path, folders: list[Path]) -> list[Chat]:
    """Fill ``db`` with one project (git repo) per chat; returns the chats' id maps."""
    chats: list[Chat] = []
    ts = BASE_TS
    started: dict[str, float] = {}
    for folder in folders:
        number = int(folder.name)
        repo = repos_root / f"beam-chat-{number:02d}"
        git_init(repo)
        chat = Chat(number=number, repo=repo, current_sid=f"beam-c{number:02d}-current")
        batches = json.loads((folder / "chat.json").read_text(encoding="utf-8"))
        for index, batch in enumerate(batches):
            batch_no = int(batch.get("batch_number") or index + 1)
            sid = f"beam-c{number:02d}-b{batch_no}"
            db.create_session(sid, "cli", cwd=str(repo))
            chat.sessions.append(sid)
            ts += BATCH_GAP_S
            started[sid] = ts
            for turn in batch.get("turns") or []:
                for msg in turn:
                    ts += MSG_STEP_S
                    mid = int(msg["id"])
                    content = msg.get("content") or ""
                    chat.db_id[mid] = db.append_message(sid, msg["role"], content, timestamp=ts)
                    chat.session_of[mid] = sid
                    chat.batch_of[mid] = batch_no
                    chat.content[mid] = content
        chats.append(chat)
    # The "current" sessions come last, after every chat's history.
    for chat in chats:
        ts += BATCH_GAP_S
        db.create_session(chat.current_sid, "cli", cwd=str(chat.repo))
        started[chat.current_sid] = ts
        db.append_message(chat.current_sid, "user", CURRENT_MESSAGE, timestamp=ts + 1)
    # create_session stamps started_at with the wall clock; align it with the
    # synthetic message timeline (cosmetic: neither system ranks by it).
    conn = sqlite3.connect(db_path)
    try:
        conn.executemany("UPDATE sessions SET started_at = ? WHERE id = ?", [(t, s) for s, t in started.items()])
        conn.commit()
    finally:
        conn.close()
    return chats


# ---------------------------------------------------------------------------
# Questions and scoring
# ---------------------------------------------------------------------------


@dataclass
class Question:
    chat: Chat
    qtype: str
    index: int
    text: str
    evidence_chat_ids: list[int]
    evidence_db_ids: set[int]
    evidence_sessions: set[str]
    evidence_pairs: set[tuple[str, int]]  # (session id, state.db message id)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)


def load_questions(folder: Path, chat: Chat) -> tuple[list[Question], int, int]:
    """Questions with evidence; also ``(skipped without evidence, unknown evidence ids)``."""
    data = json.loads((folder / "probing_questions.json").read_text(encoding="utf-8"))
    out: list[Question] = []
    skipped = unknown = 0
    for qtype, items in data.items():
        for index, item in enumerate(items or []):
            ids = flatten_ids(item.get("source_chat_ids"))
            known = [i for i in ids if i in chat.db_id]
            unknown += len(ids) - len(known)
            if not known:
                skipped += 1
                continue
            out.append(
                Question(
                    chat=chat,
                    qtype=qtype,
                    index=index,
                    text=str(item.get("question") or ""),
                    evidence_chat_ids=known,
                    evidence_db_ids={chat.db_id[i] for i in known},
                    evidence_sessions={chat.session_of[i] for i in known},
                    evidence_pairs={(chat.session_of[i], chat.db_id[i]) for i in known},
                )
            )
    return out, skipped, unknown


def score(ranked: list[tuple[str, int | None]], q: Question) -> dict[str, Any]:
    rank = next((i + 1 for i, (sid, _) in enumerate(ranked[:LIMIT]) if sid in q.evidence_sessions), None)
    msg_hit = any(mid is not None and mid in q.evidence_db_ids for _, mid in ranked[:LIMIT])
    # Diagnostic: the returned message is an evidence message or its direct
    # neighbour in the same session (typically the reply to an evidence turn).
    near_hit = any(
        mid is not None and any((sid, mid + d) in q.evidence_pairs for d in (-1, 0, 1)) for sid, mid in ranked[:LIMIT]
    )
    return {"rank": rank, "msg_hit": msg_hit, "near_hit": near_hit}


def aggregate(questions: list[Question], system: str) -> dict[str, Any]:
    n = len(questions)
    if not n:
        return {"n": 0}
    runs = [q.runs[system] for q in questions]
    out: dict[str, Any] = {"n": n}
    for k in KS:
        out[f"R@{k}"] = round(sum(1 for r in runs if r["rank"] and r["rank"] <= k) / n, 4)
    out["MRR"] = round(sum(1 / r["rank"] for r in runs if r["rank"]) / n, 4)
    out["msg@10"] = round(sum(1 for r in runs if r["msg_hit"]) / n, 4)
    out["msg_pm1@10"] = round(sum(1 for r in runs if r["near_hit"]) / n, 4)
    out["errors"] = sum(1 for r in runs if r.get("error"))
    out["empty"] = sum(1 for r in runs if not r["results"] and not r.get("error"))
    out.update(summary_ms([r["latency_s"] for r in runs]))
    return out


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("beam_dir", type=Path, help="BEAM tier folder (numbered chat folders)")
    ap.add_argument("--out", type=Path, help="write the metrics JSON here (ids and ranks only, no BEAM text)")
    ap.add_argument("--limit-chats", type=int, default=None, help="use only the first N chats")
    ap.add_argument("--show-misses", type=int, default=8, help="print N ours-keyword misses (default 8, 0 = none)")
    ap.add_argument("--no-semantic", action="store_true", help="skip ours-semantic / ours-hybrid (no embedding)")
    args = ap.parse_args(argv)
    command = shlex.join([sys.executable, *(sys.argv if argv is None else [__file__, *argv])])

    beam_dir = args.beam_dir.resolve()
    folders = chat_folders(beam_dir)
    if args.limit_chats is not None:
        folders = folders[: max(args.limit_chats, 0)]
    if not folders:
        print(f"no chat folders under {beam_dir}", file=sys.stderr)
        return 2

    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="recall-beam-") as tmp:
        tmp_path = Path(tmp).resolve()
        home = tmp_path / "hermes-home"
        home.mkdir()
        repos_root = tmp_path / "repos"  # outside HERMES_HOME: a repo there is never an auto project
        repos_root.mkdir()
        os.environ["HERMES_HOME"] = str(home)

        from hermes_state import SessionDB
        from tools.session_search_tool import session_search

        phr = load_plugin()

        db_path = home / "state.db"
        db = SessionDB(db_path=db_path)
        chats = build_home(db, db_path, repos_root, folders)
        t_built = time.perf_counter()

        questions: list[Question] = []
        skipped = unknown = 0
        for folder, chat in zip(folders, chats):
            qs, s, u = load_questions(folder, chat)
            questions.extend(qs)
            skipped += s
            unknown += u
        n_messages = sum(len(c.db_id) for c in chats)
        print(
            f"built {len(chats)} chats / {sum(len(c.sessions) for c in chats)} sessions / {n_messages} messages "
            f"in {t_built - t_start:.1f}s; {len(questions)} questions with evidence "
            f"({skipped} without, {unknown} unknown evidence ids)",
            flush=True,
        )

        systems = [s for s in SYSTEMS if not (args.no_semantic and s in ("ours-semantic", "ours-hybrid"))]
        if not args.no_semantic:
            # The user consented to the local model for every project; index
            # everything up front (a tool call would index in 1.5 s slices).
            (home / "config.yaml").write_text(
                "plugins:\n  entries:\n    project-history-recall:\n      embedding:\n        provider: local\n"
            )
            (phr.store.plugin_data_dir(home)).mkdir(parents=True, exist_ok=True)
            phr.search.record_consent(home=home, session_id="", decision="allow", projects="all")
            phr.search.INDEX_BUDGET_S, phr.search.INDEX_BATCH = 3600.0, 10**7
            t_index = time.perf_counter()
            for chat in chats:
                status = phr.search.search_history(home=home, session_id=chat.current_sid, query="index", mode="semantic")
                assert status["semantic_status"] == "ready", status
            print(f"indexed {n_messages} messages with the local model in {time.perf_counter() - t_index:.1f}s", flush=True)

        def run_ours(q: Question, mode: str = "keyword") -> list[tuple[str, int | None]]:
            res = phr.search.search_history(
                home=home, session_id=q.chat.current_sid, query=q.text, mode=mode, limit=LIMIT
            )
            if mode != "keyword" and res.get("semantic_status") != "ready":
                raise RuntimeError(f"semantic_status {res.get('semantic_status')}: {res.get('semantic_note')}")
            return [(r["session_id"], r.get("message_id")) for r in res.get("results") or []]

        def run_builtin(query: str, q: Question) -> list[tuple[str, int | None]]:
            res = json.loads(session_search(query=query, limit=LIMIT, db=db, current_session_id=q.chat.current_sid))
            if not res.get("success", True):
                raise RuntimeError(res.get("error") or "session_search failed")
            return [(r["session_id"], r.get("match_message_id")) for r in res.get("results") or []]

        runners = {
            "ours-keyword": lambda q: run_ours(q),
            "ours-semantic": lambda q: run_ours(q, "semantic"),
            "ours-hybrid": lambda q: run_ours(q, "hybrid"),
            "builtin-verbatim": lambda q: run_builtin(q.text, q),
            "builtin-or": lambda q: run_builtin(or_query(q.text), q),
        }
        error_samples: dict[str, list[str]] = defaultdict(list)
        runners = {k: v for k, v in runners.items() if k in systems}
        for q in questions:
            for system, runner in runners.items():
                t0 = time.perf_counter()
                error = None
                try:
                    ranked = runner(q)
                except Exception as exc:  # report, don't hide: counted as an empty result
                    ranked, error = [], f"{type(exc).__name__}: {exc}"
                    if len(error_samples[system]) < 3:
                        error_samples[system].append(error)
                elapsed = time.perf_counter() - t0
                run = {"results": ranked, "latency_s": elapsed, **score(ranked, q)}
                if error:
                    run["error"] = error
                q.runs[system] = run
        t_done = time.perf_counter()

        # ------------------------------------------------------------------
        # Report
        # ------------------------------------------------------------------
        summary = {system: aggregate(questions, system) for system in systems}
        print()
        print("| system | R@1 | R@3 | R@5 | R@10 | MRR | msg@10 | p50 ms |")
        print("|---|---|---|---|---|---|---|---|")
        for system in systems:
            s = summary[system]
            print(
                f"| {system} | {s['R@1']:.3f} | {s['R@3']:.3f} | {s['R@5']:.3f} | {s['R@10']:.3f} "
                f"| {s['MRR']:.3f} | {s['msg@10']:.3f} | {s['p50_ms']:.1f} |"
            )
        print()
        for system in systems:
            s = summary[system]
            extra = f"  e.g. {error_samples[system][0]}" if error_samples[system] else ""
            print(
                f"{system}: msg±1@10 {s['msg_pm1@10']:.3f} (evidence or its neighbour), {s['empty']} empty result "
                f"lists, {s['errors']} errors, p95 {s['p95_ms']:.1f} ms{extra}"
            )

        by_type: dict[str, list[Question]] = defaultdict(list)
        for q in questions:
            by_type[q.qtype].append(q)
        per_type = {t: {system: aggregate(qs, system) for system in systems} for t, qs in sorted(by_type.items())}
        print()
        print("MRR (msg@10) by question type:")
        print()
        print("| type | n | " + " | ".join(systems) + " |")
        print("|---|---|" + "---|" * len(systems))
        for t, row in per_type.items():
            cells = " | ".join(f"{row[s]['MRR']:.3f} ({row[s]['msg@10']:.2f})" for s in systems)
            print(f"| {t} | {row[systems[0]]['n']} | {cells} |")

        if args.show_misses > 0:
            print_misses(questions, args.show_misses)

        runtime = time.perf_counter() - t_start
        print()
        print(f"runtime: {runtime:.1f}s (build {t_built - t_start:.1f}s, queries {t_done - t_built:.1f}s)")
        print(f"command: {command}")

        if args.out:
            report = {
                "command": command,
                "beam_dir": str(beam_dir),
                "chats": [c.number for c in chats],
                "sessions": sum(len(c.sessions) for c in chats),
                "messages": n_messages,
                "questions": len(questions),
                "questions_without_evidence": skipped,
                "unknown_evidence_ids": unknown,
                "limit": LIMIT,
                "python": platform.python_version(),
                "hermes_agent": _hermes_version(),
                "runtime_s": round(runtime, 2),
                "summary": summary,
                "per_type": per_type,
                # Ids and ranks only: no question or message text leaves BEAM_DIR.
                "per_question": [
                    {
                        "chat": q.chat.number,
                        "type": q.qtype,
                        "index": q.index,
                        "evidence_chat_ids": q.evidence_chat_ids,
                        "evidence_sessions": sorted(q.evidence_sessions),
                        **{
                            system: {
                                "rank": q.runs[system]["rank"],
                                "msg_hit": q.runs[system]["msg_hit"],
                                "near_hit": q.runs[system]["near_hit"],
                                "latency_ms": round(q.runs[system]["latency_s"] * 1000, 2),
                                "sessions": [sid for sid, _ in q.runs[system]["results"]],
                                **({"error": q.runs[system]["error"]} if "error" in q.runs[system] else {}),
                            }
                            for system in systems
                        },
                    }
                    for q in questions
                ],
            }
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
            print(f"wrote {args.out}")
        db.close()
    return 0


def _hermes_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("hermes-agent")
    except Exception:
        return None


def print_misses(questions: list[Question], count: int) -> None:
    """A few ours-keyword misses (first evidence session not at rank 1, or no evidence message)."""
    misses = [q for q in questions if q.runs["ours-keyword"]["rank"] != 1 or not q.runs["ours-keyword"]["msg_hit"]]
    # Spread over question types rather than the first chat's questions.
    picked: list[Question] = []
    by_type: dict[str, list[Question]] = defaultdict(list)
    for q in misses:
        by_type[q.qtype].append(q)
    while len(picked) < count and any(by_type.values()):
        for t in sorted(by_type):
            if by_type[t] and len(picked) < count:
                picked.append(by_type[t].pop(0))
    print()
    print(f"ours-keyword misses: {len(misses)} of {len(questions)} questions not (rank 1 and msg hit); showing {len(picked)}")
    for q in picked:
        chat = q.chat
        by_db = {v: k for k, v in chat.db_id.items()}
        run = q.runs["ours-keyword"]
        print()
        print(f"- [chat {chat.number} {q.qtype}#{q.index}] {q.text!r}")
        print(f"  evidence sessions {sorted(q.evidence_sessions)}; rank {run['rank']}; msg hit {run['msg_hit']}")
        for mid in q.evidence_chat_ids[:4]:
            print(f"    evidence id {mid} (b{chat.batch_of[mid]}): {_short(chat.content[mid])}")
        for sid, dbid in run["results"][:3]:
            cid = by_db.get(dbid)
            text = chat.content.get(cid, "") if cid is not None else ""
            print(f"    returned {sid} msg {cid}: {_short(text)}")
        if not run["results"]:
            print("    returned nothing" + (f" ({run['error']})" if run.get("error") else ""))


def _short(text: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    return flat[:width] + ("..." if len(flat) > width else "")


if __name__ == "__main__":
    sys.exit(main())
