"""Shared helpers for the benchmarks: import the plugin under its fixed name; large-DB ground truth."""

from __future__ import annotations

import importlib
import importlib.util
import re
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def load_plugin() -> Any:
    """This checkout as the package ``project_history_recall`` (never by folder name), with the modules Hermes' loader
    loads (``register``'s: the tools, the commands and all they import), so that ``phr.search``, ``phr.state`` and
    the like are there: the package's ``__init__`` imports none of them."""
    module = sys.modules.get("project_history_recall")
    if module is None:
        spec = importlib.util.spec_from_file_location(
            "project_history_recall", ROOT / "__init__.py", submodule_search_locations=[str(ROOT)]
        )
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules["project_history_recall"] = module
        spec.loader.exec_module(module)
    for name in ("commands", "handlers"):
        importlib.import_module(f"project_history_recall.{name}")
    return module


def semantic_entry(phr: Any) -> SimpleNamespace:
    """The semantic side's entry points of the loaded checkout: ``record_consent``, ``open_vectors``, ``warm_up``,
    ``index_projects``. Since 236ab0d they live in gate, warm_up and indexing; before, in one ``semantic`` module
    (a bench run with ``--code`` on an older checkout, for a before/after, reaches them there)."""
    try:
        gate = importlib.import_module(f"{phr.__name__}.gate")
    except ModuleNotFoundError:
        old = importlib.import_module(f"{phr.__name__}.semantic")
        return SimpleNamespace(record_consent=old.record_consent, open_vectors=old.open_vectors,
                               warm_up=old.warm_up, index_projects=old.index_projects)
    warm_up = importlib.import_module(f"{phr.__name__}.warm_up")
    indexing = importlib.import_module(f"{phr.__name__}.indexing")
    return SimpleNamespace(record_consent=gate.record_consent, open_vectors=gate.open_vectors,
                           warm_up=warm_up.warm_up, index_projects=indexing.index_projects)


def smaps_rollup() -> dict[str, int]:
    """This process's ``/proc/self/smaps_rollup`` in kB (``Rss``, ``Pss``, ``Private_Dirty``, ``Anonymous``...)."""
    out = {}
    with open("/proc/self/smaps_rollup", encoding="ascii") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[-1] == "kB":
                out[parts[0].rstrip(":")] = int(parts[1])
    return out


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (``pct`` in 0..100) of a non-empty list."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


def summary_ms(samples: list[float]) -> dict[str, float]:
    """p50 / p95 / mean in milliseconds of samples given in seconds."""
    return {
        "p50_ms": round(percentile(samples, 50) * 1000, 2),
        "p95_ms": round(percentile(samples, 95) * 1000, 2),
        "mean_ms": round(statistics.fmean(samples) * 1000, 2),
    }


# ---------------------------------------------------------------------------
# Ground truth for the large-DB benchmark (make_big_statedb.py writes it into
# <db>.meta.json, keyword_latency.py reads it; both count the same way).
# Independent of the plugin's own query parsing on purpose.
# ---------------------------------------------------------------------------

GT_STOP_WORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being below
between both but by can cannot could did do does doing down during each else every few for from further
get got had has have having he her here hers him his how i if in into is it its itself just let me more
most my no nor not now of off on once only or other our ours out over own please same she should so some
such than that the their theirs them then there these they this those through to too under until up us
very was we were what when where whether which while who whom whose why will with within without would
yes yet you your yours ok okay hi hello hey thanks thank sure really maybe
""".split())

_GT_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_GT_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


def content_units(text: str) -> list[tuple[str, str]]:
    """The content units of a query as ``(kind, text)``, in order, de-duplicated.

    ``word``: an FTS5 unicode61 token (lower-cased; stop words and 1-character
    tokens dropped, digits kept only when longer than 1 character); ``cjk``: a
    run of CJK characters (trigram index when 3+ characters, else substring).
    """
    out: list[tuple[str, str]] = []
    for run in _GT_CJK.findall(text):
        if ("cjk", run) not in out:
            out.append(("cjk", run))
    for tok in _GT_TOKEN.findall(_GT_CJK.sub(" ", text)):
        tok = tok.lower()
        if len(tok) < 2 or tok in GT_STOP_WORDS or ("word", tok) in out:
            continue
        out.append(("word", tok))
    return out


def gt_match(kind: str, text: str) -> tuple[str, str]:
    """``(index, MATCH expression)`` for a unit; index ``like`` = substring scan."""
    if kind == "cjk":
        return ("messages_fts_trigram", '"' + text + '"') if len(text) >= 3 else ("like", text)
    return "messages_fts", '"' + text.replace('"', '""') + '"'  # word or phrase


GT_LIVE_SQL = "(m.active = 1 OR m.compacted = 1) AND m.role IN ('user', 'assistant', 'tool')"
GT_DEFINITION = (
    "messages with role user/assistant/tool and (active = 1 OR compacted = 1), in the project's "
    "searchable sessions (not archived, not delegate/subagent), containing the unit as an FTS5 "
    "token/phrase (messages_fts), a trigram phrase (messages_fts_trigram, CJK of 3+ chars) or a "
    "substring of content || tool_name || tool_calls (CJK of 1-2 chars); 'others' leaves out the "
    "project's current (asking) session lineage, as the search does")


def create_live_table(conn, members: dict[str, tuple[list[str], list[str]]]) -> None:
    """TEMP ``gt_live(id, project, is_current)`` from ``{project: (searchable ids, current lineage)}``."""
    conn.execute("DROP TABLE IF EXISTS temp.gt_live")
    conn.execute("CREATE TEMP TABLE gt_live (id TEXT PRIMARY KEY, project TEXT, is_current INTEGER) WITHOUT ROWID")
    rows = []
    for name, (ids, current) in members.items():
        cur = set(current)
        rows += [(sid, name, int(sid in cur)) for sid in ids]
    conn.executemany("INSERT OR IGNORE INTO temp.gt_live VALUES (?,?,?)", rows)


def live_counts(conn, kind: str, text: str) -> dict[str, dict[str, int]]:
    """``{project: {"live": n, "others": n}}`` for one unit (needs :func:`create_live_table`)."""
    index, match = gt_match(kind, text)
    if index == "like":
        sql = (f"SELECT p.project, p.is_current, count(*) FROM messages m JOIN temp.gt_live p ON p.id = m.session_id "
               f"WHERE {GT_LIVE_SQL} AND instr(COALESCE(m.content, '') || ' ' || COALESCE(m.tool_name, '') || ' ' "
               f"|| COALESCE(m.tool_calls, ''), ?) > 0 GROUP BY 1, 2")
    else:
        sql = (f"SELECT p.project, p.is_current, count(*) FROM {index} f JOIN messages m ON m.id = f.rowid "
               f"JOIN temp.gt_live p ON p.id = m.session_id WHERE {index} MATCH ? AND {GT_LIVE_SQL} GROUP BY 1, 2")
    out: dict[str, dict[str, int]] = {}
    for name in {r[0] for r in conn.execute("SELECT DISTINCT project FROM temp.gt_live")}:
        out[name] = {"live": 0, "others": 0}
    for name, is_current, n in conn.execute(sql, (match,)):
        out[name]["live"] += n
        if not is_current:
            out[name]["others"] += n
    return out
