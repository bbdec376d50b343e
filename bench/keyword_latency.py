"""Keyword search latency AND correctness on a large state.db, beside Hermes' built-in search.

Builds (once, cached) a state.db with Hermes' real schema -- 20k sessions / 1M
messages across 10 git repos by default, see ``make_big_statedb.py`` -- and
rebuilds it when its meta file predates the current layout (no ``relic-core``
/ ``fresh-app``). Then, in the same process and on the same file, from the
"current" session of each asked project:

* the biggest project (atlas-api), a middle-sized one, ``relic-core`` (big,
  and OLDER than every other project: all its messages have the lowest ids;
  the user comes back to it today) and ``fresh-app`` (small, recent);

it times

* ours: ``search.search_history(mode="keyword", limit=3)``, i.e. the full tool
  path minus JSON (attribution of every session, scope, FTS, snippets), warm,
  and once more with the project membership recomputed;
* built-in: ``tools.session_search_tool.session_search(query, limit=3)`` with
  a read-write ``SessionDB`` (its read-only mode cannot search); a question
  (which its implicit AND cannot answer verbatim) is given as an OR of its
  content words instead;

for rare, medium, very common ("function", "error") and common ordinary words
("example", "check", "plan", "find"), phrases, a CJK trigram term (数据库迁移),
a 2-character CJK term (问题), verbatim questions, and the asking project's
needle questions, and checks correctness against the ground truth that
``make_big_statedb.py`` recorded in ``<db>.meta.json``:

* answered: ours returned at least one result when the project really has a
  matching message (for a multi-word query: when any content word matches in
  the project's other live searchable sessions). Every false "no matches" is
  listed loudly;
* needle questions: the rank of the needle session in our top 3 (or "miss"),
  and the same for the built-in;
* scope: every result of ours belongs to the asking project's searchable
  sessions (not another project, not archived / delegate, not the asking
  session's own lineage).

Prints a markdown table and a summary (worst p95, target < 100 ms; queries
where ours p50 > built-in p50; answered share per project; needle ranks;
scope violations).

Run: .venv/bin/python bench/keyword_latency.py [--db /tmp/phr-bench/home/state.db] [--reps 20] [--out JSON]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import ROOT, content_units, create_live_table, live_counts, load_plugin, summary_ms  # noqa: E402

# Kept here for bench/concurrency.py (the build records the same list in meta["questions"]["verbatim"]).
QUESTIONS = [
    "how did we fix the websocket error in that function?",
    "what did we decide about idempotency keys for the error handler?",
]
LAYOUT_VERSION = 2  # make_big_statedb.LAYOUT_VERSION this bench needs
REQUIRED_PROJECTS = ("relic-core", "fresh-app")
LIMIT = 3


def _stale(meta_path: Path) -> str | None:
    if not meta_path.exists():
        return "missing"
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError) as exc:
        return f"unreadable meta ({exc})"
    names = {p.get("name") for p in meta.get("projects", [])}
    lacking = [n for n in REQUIRED_PROJECTS if n not in names]
    if lacking or meta.get("layout_version", 1) < LAYOUT_VERSION:
        return f"older layout (layout_version {meta.get('layout_version', 1)}, lacks {lacking or 'nothing'})"
    return None


def ensure_db(db: Path, sessions: int, messages: int) -> dict:
    meta_path = Path(str(db) + ".meta.json")
    reason = _stale(meta_path)
    if reason:
        db.parent.mkdir(parents=True, exist_ok=True)
        # Repos live beside HERMES_HOME, not inside it: repos under HERMES_HOME
        # are never projects (the desktop's rule, which the plugin follows).
        cmd = [sys.executable, str(HERE / "make_big_statedb.py"), "--out", str(db),
               "--projects-root", str(db.parent.parent / "projects"),
               "--sessions", str(sessions), "--messages", str(messages), "--force"]
        print(f"building ({reason}):", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    return json.loads(meta_path.read_text())


def ensure_config(home: Path) -> None:
    """A Hermes-sized config.yaml (Hermes' own defaults), so the per-search settings read is measured."""
    path = home / "config.yaml"
    if not path.exists():
        import yaml
        from hermes_cli.config import DEFAULT_CONFIG

        path.write_text(yaml.safe_dump(DEFAULT_CONFIG, sort_keys=False), encoding="utf-8")


def time_calls(fn, reps: int) -> tuple[list[float], object]:
    out = fn()  # warm-up (page cache, statement cache)
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        out = fn()
        samples.append(time.perf_counter() - start)
    return samples, out


def git_state() -> dict:
    def run(*cmd: str) -> str:
        try:
            return subprocess.run(["git", "--no-optional-locks", "-C", str(ROOT), *cmd],
                                  capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return "?"
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(ROOT.glob("*.py")):  # the plugin's own modules, as on disk now
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    head = run("log", "-1", "--format=%h")
    return {"head": head or "(not a git checkout)", "status_short": run("status", "--short") if head else "",
            "plugin_py_sha256": digest.hexdigest()[:16]}


def pick_projects(meta: dict, names: str | None) -> list[dict]:
    by_name = {p["name"]: p for p in meta["projects"]}
    if names:
        return [by_name[n] for n in names.split(",")]
    biggest = meta["biggest_project"]
    rest = sorted((p for p in meta["projects"] if p["name"] not in (biggest, *REQUIRED_PROJECTS)),
                  key=lambda p: -p.get("messages_bound", 0))
    picks = [by_name[biggest]] + ([rest[len(rest) // 2]] if rest else [])
    return picks + [by_name[n] for n in REQUIRED_PROJECTS if n in by_name]


def base_queries(meta: dict) -> list[tuple[str, str, int | None]]:
    out: list[tuple[str, str, int | None]] = []
    for cls, n in (("rare", 2), ("medium", 2), ("very_common", 2), ("common", 4), ("phrases", 2), ("cjk", 1)):
        for entry in meta["terms"].get(cls, [])[:n]:
            out.append((cls, entry["term"], entry.get("df")))
    out.append(("cjk-short", "问题", None))  # 2 characters: no trigram, a bounded LIKE scan
    out += [("question", q, None) for q in meta.get("questions", {}).get("verbatim", QUESTIONS)]
    return out


def rank_of(results: list[dict], sid: str, *, parent_too: bool = False) -> int | None:
    for i, r in enumerate(results[:LIMIT]):
        if r.get("session_id") == sid or (parent_too and r.get("parent_session_id") == sid):
            return i + 1
    return None


def fmt_rank(rank: int | None, applies: bool) -> str:
    return "-" if not applies else ("miss" if rank is None else str(rank))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, default=Path("/tmp/phr-bench/home/state.db"))
    ap.add_argument("--sessions", type=int, default=20_000)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--projects", help="comma-separated project names (default: biggest, a middle one, "
                                       "relic-core, fresh-app)")
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = ap.parse_args()

    meta = ensure_db(args.db, args.sessions, args.messages)
    home = args.db.parent
    os.environ["HERMES_HOME"] = str(home)
    git = git_state()
    phr = load_plugin()
    from hermes_state import SessionDB
    from tools.session_search_tool import session_search

    ensure_config(home)
    picks = pick_projects(meta, args.projects)
    members = meta["project_sessions"]
    owner: dict[str, str] = {}
    for name, m in members.items():
        for sid in m["searchable"] + m["unsearchable"]:
            owner[sid] = name
    allowed = {name: set(m["searchable"]) - set(m["current_lineage"]) for name, m in members.items()}
    unsearchable = {sid for m in members.values() for sid in m["unsearchable"]}

    plan: list[tuple[dict, list[tuple[str, str, int | None]]]] = []
    for project in picks:
        queries = list(base_queries(meta))
        needle = project.get("needle")
        if needle:
            queries += [("needle", q, None) for q in needle["questions"]]
        plan.append((project, queries))

    # Ground truth: from the meta file; a unit it lacks is counted here the same way (once).
    gt = {p["name"]: dict(p.get("ground_truth", {})) for p in meta["projects"]}
    missing = sorted({u for project, queries in plan for _, q, _ in queries for u in content_units(q)
                      if u[1] not in gt[project["name"]]})
    if missing:
        conn = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
        create_live_table(conn, {n: (m["searchable"], m["current_lineage"]) for n, m in members.items()})
        for kind, text in missing:
            for name, c in live_counts(conn, kind, text).items():
                gt.setdefault(name, {})[text] = c
        conn.close()
        print(f"ground truth counted here for {len(missing)} unit(s) not in the meta file: "
              f"{[t for _, t in missing]}", flush=True)

    db = SessionDB(db_path=args.db)
    print(f"state.db: {meta['counts']['sessions']:,} sessions, {meta['counts']['messages']:,} messages, "
          f"{os.path.getsize(args.db) / 2**30:.2f} GiB; reps={args.reps}; plugin at {git['head']}"
          + (f" + uncommitted: {' '.join(git['status_short'].split())}" if git["status_short"] else " (clean)")
          + "\n", flush=True)

    # Cold: the first search in a fresh process pays for git probes of every distinct cwd.
    cold = subprocess.run(
        [sys.executable, "-c", (
            "import sys, time, os; sys.path.insert(0, %r); os.environ['HERMES_HOME'] = %r\n"
            "from _common import load_plugin; phr = load_plugin(); from pathlib import Path\n"
            "t = time.perf_counter(); phr.search.search_history(home=Path(%r), session_id=%r, query='websocket', mode='keyword')\n"
            "print(round((time.perf_counter() - t) * 1000, 1))") % (str(HERE), str(home), str(home), picks[0]["current_session_id"])],
        capture_output=True, text=True,
    )
    cold_ms = cold.stdout.strip() or f"error: {cold.stderr.strip().splitlines()[-1:]}"
    print(f"cold first search in a new process (git probes of every distinct cwd): {cold_ms} ms\n")

    membership = getattr(phr.workspace, "membership", None)
    invalidate = getattr(membership, "invalidate", None)
    rows = []
    for project, queries in plan:
        name, sid = project["name"], project["current_session_id"]
        needle_sid = (project.get("needle") or {}).get("session_id")
        for cls, query, df in queries:
            units = content_units(query)
            counts = {text: gt[name].get(text, {}).get("others", 0) for _, text in units}
            should = any(v > 0 for v in counts.values())
            error = None

            def ours_call():
                return phr.search.search_history(home=home, session_id=sid, query=query, mode="keyword", limit=LIMIT)
            try:
                ours, answer = time_calls(ours_call, args.reps)
                if invalidate is not None:
                    cold_scope, _ = time_calls(lambda: (invalidate(), ours_call()), max(3, args.reps // 4))
                else:
                    cold_scope = None
            except Exception as exc:  # the plugin is being edited: report, go on
                ours, cold_scope, answer = [float("nan")], None, {"results": [], "success": False}
                error = f"{type(exc).__name__}: {exc}"
            results = answer.get("results") or []
            builtin_query = query
            if cls in ("question", "needle"):
                builtin_query = " OR ".join(text for _, text in units)
            builtin, found = time_calls(
                lambda: session_search(query=builtin_query, limit=LIMIT, db=db, current_session_id=sid), args.reps)
            builtin_results = json.loads(found).get("results") or []
            violations = []
            for r in results:
                rsid = r.get("session_id")
                if rsid in allowed[name]:
                    continue
                where = ("the asking session's own lineage" if rsid in members[name]["current_lineage"]
                         else f"archived/delegate session of {owner.get(rsid)}" if rsid in unsearchable
                         else f"project {owner[rsid]}" if rsid in owner else "Home / loose (no project)")
                violations.append({"session_id": rsid, "message_id": r.get("message_id"), "belongs_to": where})
            answered = bool(results)
            row = {
                "project": name, "project_live_messages": project.get("live_messages_others"),
                "project_messages": project.get("messages_bound"), "class": cls, "query": query,
                "builtin_query": builtin_query, "df": df, "units": [t for _, t in units],
                "project_matches": counts, "should_answer": should, "answered": answered,
                "false_no_matches": should and not answered,
                "answered_without_ground_truth": answered and not should,
                "ours": summary_ms(ours) if error is None else None,
                "ours_scope_recomputed": summary_ms(cold_scope) if cold_scope else None,
                "builtin": summary_ms(builtin),
                "ours_results": len(results), "builtin_results": len(builtin_results),
                "ours_sessions": [r.get("session_id") for r in results],
                "builtin_sessions": [r.get("session_id") for r in builtin_results],
                "builtin_in_project": sum(1 for r in builtin_results
                                          if (r.get("parent_session_id") or r.get("session_id")) in allowed[name]
                                          or r.get("session_id") in allowed[name]),
                "strategy": answer.get("strategy"), "message": answer.get("message"),
                "success": answer.get("success"), "error": error, "scope_violations": violations,
                "needle_session": needle_sid if cls == "needle" else None,
                "needle_rank_ours": rank_of(results, needle_sid) if cls == "needle" else None,
                "needle_rank_builtin": rank_of(builtin_results, needle_sid, parent_too=True) if cls == "needle" else None,
            }
            rows.append(row)
            o = row["ours"] or {"p50_ms": "ERR", "p95_ms": "ERR"}
            flag = "  !!! FALSE 'NO MATCHES'" if row["false_no_matches"] else ""
            flag += f"  !!! {len(violations)} SCOPE VIOLATION(S)" if violations else ""
            flag += f"  !!! ERROR {error}" if error else ""
            needle_txt = (f"  needle ours {fmt_rank(row['needle_rank_ours'], True)} / built-in "
                          f"{fmt_rank(row['needle_rank_builtin'], True)}" if cls == "needle" else "")
            print(f"{name:<14} {cls:<12} {query[:44]:<44} in-project={max(counts.values(), default=0):<7,} "
                  f"ours p50 {o['p50_ms']:>7} p95 {o['p95_ms']:>7} | built-in p50 {row['builtin']['p50_ms']:>8} "
                  f"p95 {row['builtin']['p95_ms']:>8}  [{row['strategy']}, ours {row['ours_results']} / built-in "
                  f"{row['builtin_results']} hits]{needle_txt}{flag}", flush=True)
    db.close()

    def answered_cell(r: dict) -> str:
        if r["error"]:
            return "**ERROR**"
        if r["false_no_matches"]:
            return "**NO: false 'no matches'**"
        if r["answered"]:
            return "yes" if r["should_answer"] else "yes (nothing in ground truth)"
        return "no (none in project)"

    print("\n| project (live msgs) | class | query | df (DB) | in project | ours p50 | ours p95 | ours p50, scope recomputed "
          "| built-in p50 | built-in p95 | ours hits | answered | needle rank ours | needle rank built-in | out of scope | strategy |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        query = r["query"] if r["builtin_query"] == r["query"] else f"{r['query']} (built-in: `{r['builtin_query']}`)"
        inproj = max(r["project_matches"].values(), default=0)
        inproj_txt = f"{inproj:,}" + (" (best word)" if len(r["project_matches"]) > 1 else "")
        o = r["ours"] or {"p50_ms": "ERR", "p95_ms": "ERR"}
        sc = r["ours_scope_recomputed"] or {"p50_ms": "-"}
        print(f"| {r['project']} ({r['project_live_messages']:,}) | {r['class']} | {query} "
              f"| {r['df'] if r['df'] is not None else '-'} | {inproj_txt} | {o['p50_ms']} | {o['p95_ms']} "
              f"| {sc['p50_ms']} | {r['builtin']['p50_ms']} | {r['builtin']['p95_ms']} | {r['ours_results']} "
              f"| {answered_cell(r)} | {fmt_rank(r['needle_rank_ours'], r['class'] == 'needle')} "
              f"| {fmt_rank(r['needle_rank_builtin'], r['class'] == 'needle')} | {len(r['scope_violations']) or ''} "
              f"| {r['strategy']} |")

    timed = [r for r in rows if r["ours"]]
    worst = max(timed, key=lambda r: r["ours"]["p95_ms"]) if timed else None
    slower = [r for r in timed if r["ours"]["p50_ms"] > r["builtin"]["p50_ms"]]
    shares = {}
    for project, _ in plan:
        mine = [r for r in rows if r["project"] == project["name"] and r["should_answer"]]
        shares[project["name"]] = (sum(1 for r in mine if r["answered"]), len(mine))
    false_none = [r for r in rows if r["false_no_matches"]]
    violations = [(r, v) for r in rows for v in r["scope_violations"]]
    errors = [r for r in rows if r["error"]]
    needles = [r for r in rows if r["class"] == "needle"]

    print("\n## Correctness")
    print("answered (ours returned results / the project has a match): "
          + ", ".join(f"{n} {a}/{t} ({a / t * 100:.0f}%)" if t else f"{n} -" for n, (a, t) in shares.items()))
    if false_none:
        print(f"\n!!! {len(false_none)} FALSE 'NO MATCHES' (the project has matching messages, ours returned none):")
        for r in false_none:
            have = ", ".join(f"{k}={v:,}" for k, v in r["project_matches"].items() if v)
            print(f"!!!   {r['project']:<14} {r['class']:<12} {r['query']!r}: project has {have}; "
                  f"ours said {r['message']!r} [{r['strategy']}]")
    else:
        print("no false 'no matches'")
    print("\nneedle ranks (top 3; built-in fed an OR of content words):")
    for r in needles:
        print(f"  {r['project']:<14} {r['query']!r}: ours {fmt_rank(r['needle_rank_ours'], True)}, "
              f"built-in {fmt_rank(r['needle_rank_builtin'], True)}")
    if violations:
        print(f"\n!!! {len(violations)} SCOPE VIOLATION(S) (a result outside the asking project's searchable sessions):")
        for r, v in violations:
            print(f"!!!   {r['project']} {r['query']!r}: session {v['session_id']} (message {v['message_id']}) "
                  f"belongs to {v['belongs_to']}")
    else:
        print("\nscope: every result of ours belongs to the asking project's searchable sessions")
    if errors:
        print(f"\n!!! {len(errors)} query(ies) raised:")
        for r in errors:
            print(f"!!!   {r['project']} {r['query']!r}: {r['error']}")
    unexpected = [r for r in rows if r["answered_without_ground_truth"]]
    if unexpected:
        print(f"\nnote: {len(unexpected)} answer(s) with no FTS-token match in the ground truth (e.g. substring "
              "matches): " + "; ".join(f"{r['project']} {r['query']!r}" for r in unexpected))

    needle_txt = "; ".join(f"{r['project']} ours {fmt_rank(r['needle_rank_ours'], True)} / built-in "
                           f"{fmt_rank(r['needle_rank_builtin'], True)}" for r in needles)
    print(f"\nsummary: ours worst p95: {worst['ours']['p95_ms'] if worst else '-'} ms (target < 100"
          + (f"; {worst['project']} {worst['query']!r}" if worst else "") + f"); "
          f"queries where ours p50 > built-in p50: {len(slower)}"
          + (" (" + "; ".join(f"{r['project']} {r['query']!r}" for r in slower) + ")" if slower else "")
          + "; answered: " + ", ".join(f"{n} {a}/{t}" for n, (a, t) in shares.items())
          + f"; false 'no matches': {len(false_none)}; needle ranks: {needle_txt}; scope violations: {len(violations)}"
          + (f"; errors: {len(errors)}" if errors else ""))
    git_end = git_state()
    print(f"plugin code: {git['head']}" + (f", uncommitted: {' '.join(git['status_short'].split())}"
                                            if git["status_short"] else " (clean)")
          + f"; plugin *.py digest {git['plugin_py_sha256']}"
          + (" (unchanged during the run)" if git_end == git else
             f" -> CHANGED during the run: now {git_end['head']} digest {git_end['plugin_py_sha256']}, "
             f"uncommitted: {' '.join(git_end['status_short'].split())}"))
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    if args.out:
        args.out.write_text(json.dumps({
            "rows": rows, "cold_ms": cold_ms, "meta_counts": meta["counts"], "git": git, "git_end": git_end,
            "summary": {
                "worst_p95_ms": worst["ours"]["p95_ms"] if worst else None,
                "worst_p95_query": [worst["project"], worst["query"]] if worst else None,
                "ours_slower_p50": [[r["project"], r["query"]] for r in slower],
                "answered": {n: {"answered": a, "should": t} for n, (a, t) in shares.items()},
                "false_no_matches": [[r["project"], r["class"], r["query"]] for r in false_none],
                "needle_ranks": [{"project": r["project"], "question": r["query"], "ours": r["needle_rank_ours"],
                                  "builtin": r["needle_rank_builtin"]} for r in needles],
                "scope_violations": len(violations), "errors": len(errors),
            }}, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
