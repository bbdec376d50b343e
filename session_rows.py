"""IO shell: the ``sessions`` table of state.db, read-only, and every session's effective workspace.

One scan of ``sessions`` gives every row's own folder, parent and ``/new`` predecessor;
``attribution.effective_workspaces`` resolves inheritance. A single session is resolved by one recursive
query up its chain, whose cost never grows with other sessions'. Every value is an SQL parameter.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import attribution, store
from .records import SessionDetails, SessionInfo

# Delegate children, tool runs and kanban workers' transcripts (0.21) are never project history, as Hermes'
# session_search hides them. The LIKE lets json_valid() parse only the rare candidate rows; the CASE keeps
# json_extract() off text that is not JSON (in a select list SQLite evaluates both sides of an AND).
_DELEGATE = (
    "(COALESCE(s.source, '') IN ('subagent', 'tool', 'kanban') OR "
    "(s.model_config LIKE '%\\_delegate\\_from%' ESCAPE '\\' AND CASE WHEN json_valid(s.model_config) "
    "THEN json_extract(s.model_config, '$._delegate_from') IS NOT NULL ELSE 0 END))"
)


# A session's own folder: ``cwd``; else, for an editor's (ACP) session, its ``model_config``'s ``cwd``; for a cron
# run, its job's ``workdir`` (``store.connect_ro``'s ``phr_cron_folder``); for a CLI session of no parent, the working
# directory its system prompt names (``phr_prompt_folder``). Hermes records ``sessions.cwd`` for a CLI session's
# first row alone: its ACP adapter keeps the editor's folder in ``model_config`` (acp_adapter/session.py), its cron
# scheduler runs a job in the folder ``cron/jobs.json`` names, and a CLI's ``/new`` session, or a compression
# continuation whose first session was deleted (``delete_session`` and ``prune_sessions`` unlink the children), has
# only the prompt Hermes wrote for it (``prompt_builder.build_environment_hints``). ``{prompt}``: the layout's
# (:meth:`layout.Layout.prompt_sql`), read for those rare rows alone. The LIKE lets json_valid() parse only the rare
# candidate rows; the nested CASEs keep json_type() off text that is not JSON.
_FOLDER = (
    "TRIM(CASE WHEN TRIM(COALESCE(s.cwd, '')) != '' THEN s.cwd "
    "WHEN s.source = 'acp' AND s.model_config LIKE '%\"cwd\"%' THEN CASE WHEN json_valid(s.model_config) "
    "THEN CASE WHEN json_type(s.model_config, '$.cwd') = 'text' THEN json_extract(s.model_config, '$.cwd') END END "
    "WHEN s.source = 'cron' THEN phr_cron_folder(s.id) "
    "WHEN s.source = 'cli' AND COALESCE(s.parent_session_id, '') = '' THEN phr_prompt_folder({prompt}) END)"
)


# What attribution reads of a row, then the searchable flags and size. ``{archived}``: the layout's
# (:meth:`layout.Layout.archived_sql`), filled in by :func:`_sql`.
_ROW_COLUMNS = f"""
    s.id, COALESCE(s.parent_session_id, ''), COALESCE({_FOLDER}, ''), TRIM(COALESCE(s.git_repo_root, '')),
    COALESCE(s.source, ''), s.started_at, s.ended_at, COALESCE(s.end_reason, ''),
    {{archived}}, {_DELEGATE}, s.message_count, s.title
"""


def _sql(conn: sqlite3.Connection, template: str) -> str:
    """``template`` (a query over :data:`_ROW_COLUMNS`) for the state.db ``conn`` reads."""
    found = store.layout_of(conn)
    return template.format(archived=found.archived_sql(), prompt=found.prompt_sql())


def _session_row(r: Sequence[Any]) -> attribution.SessionRow:
    return attribution.SessionRow(str(r[0]), r[1] or "", r[2] or "", r[3] or "", r[4] or "", r[5], r[6], r[7] or "")


_CHAIN_SQL = f"""
WITH RECURSIVE up(id, depth) AS (
    SELECT :sid, 0
    UNION ALL
    SELECT s.parent_session_id, up.depth + 1 FROM up JOIN sessions s ON s.id = up.id
    WHERE COALESCE({_FOLDER}, '') = '' AND TRIM(COALESCE(s.git_repo_root, '')) = ''
      AND COALESCE(s.parent_session_id, '') != '' AND up.depth < 100000
)
SELECT {_ROW_COLUMNS} FROM up JOIN sessions s ON s.id = up.id ORDER BY up.depth
"""


_ENDED_BY_NEW_SQL = f"""
SELECT {_ROW_COLUMNS} FROM sessions s
WHERE s.end_reason = 'new_session' AND s.source = ? AND s.ended_at >= ? AND s.ended_at <= ?
"""


# Sessions started in a time window without a folder or parent (read through Hermes' started_at index).
_FRESH_CLI_SQL = f"""
SELECT {_ROW_COLUMNS} FROM sessions s
WHERE s.source = ? AND s.started_at >= ? AND s.started_at <= ? AND COALESCE(s.parent_session_id, '') = ''
  AND TRIM(COALESCE(s.cwd, '')) = '' AND TRIM(COALESCE(s.git_repo_root, '')) = ''
"""


def _chain_rows(conn: sqlite3.Connection, session_id: str, rows: dict[str, attribution.SessionRow]) -> list[Any]:
    """Rows of ``session_id`` and its ancestors up to the first with a folder (one recursive query)."""
    found = conn.execute(_sql(conn, _CHAIN_SQL), {"sid": session_id}).fetchall()
    for r in found:
        rows.setdefault(str(r[0]), _session_row(r))
    return found


def resolve_workspace(
    conn: sqlite3.Connection, session_id: str, known: Mapping[str, attribution.Workspace | None] | None = None, *,
    hops: int = 20,
) -> tuple[Any, attribution.Workspace | None]:
    """One session's ``(row or None, workspace or None)``, reading only its chain.

    A ``/new`` session's predecessor is looked up by time; ``known`` (the membership cache's resolved
    workspaces, ``None`` for none) ends a walk.
    """
    rows: dict[str, attribution.SessionRow] = {}
    chain = _chain_rows(conn, session_id, rows)
    if not chain:
        return None, None
    first = chain[0]
    for _ in range(hops):
        top = rows[str(chain[-1][0])]
        if top.cwd or top.root or top.parent or top.source != "cli" or top.started_at is None:
            break
        if known is not None and top.id in known:
            break
        # The sessions /new ended shortly before, and the /new sessions that may have taken them first (two
        # windows back: a taker's own choice looks one window further).
        window = 2 * attribution.NEW_SESSION_WINDOW_S
        low, high = top.started_at - window, top.started_at
        for r in [*conn.execute(_sql(conn, _ENDED_BY_NEW_SQL), (top.source, low, high)),
                  *conn.execute(_sql(conn, _FRESH_CLI_SQL), (top.source, low, high))]:
            rows.setdefault(str(r[0]), _session_row(r))
        previous = attribution.new_session_predecessors(rows.values()).get(top.id)
        if previous is None or previous in {str(r[0]) for r in chain}:
            break
        chain = _chain_rows(conn, previous, rows)
        if not chain:
            break
    # Sessions already resolved end a walk; their rows still count for /new matching.
    return first, attribution.effective_workspaces(rows, known=known).get(session_id)


def _info(row: Sequence[Any], ws: attribution.Workspace | None) -> SessionInfo:
    return SessionInfo(
        str(row[0]), ws.cwd if ws else None, ws.root if ws else None, bool(row[9]), bool(row[8]), row[11], row[5],
        int(row[10] or 0), ws.basis if ws else "", ws.via if ws else None, row[4] or "",
    )


_ONE_ROW_SQL = f"SELECT {_ROW_COLUMNS} FROM sessions s WHERE s.id = ?"


def session_info(
    conn: sqlite3.Connection, session_id: str, *, known: Mapping[str, attribution.Workspace | None] | None = None
) -> SessionInfo | None:
    """One session with its effective workspace (from ``known`` when it holds it, else
    :func:`resolve_workspace`); ``None`` when unknown."""
    if known is not None and session_id in known:
        row = conn.execute(_sql(conn, _ONE_ROW_SQL), (session_id,)).fetchone()
        return None if row is None else _info(row, known[session_id])
    row, ws = resolve_workspace(conn, session_id, known)
    return None if row is None else _info(row, ws)


# Of the sessions ``?`` (a JSON array), what another process may have changed since the census read them: the folder
# the row records itself, its git root, and whether it is searchable (``{archived}``: the layout's); then what an
# answer shows of it (:class:`SessionDetails`).
_RECORDED_SQL = f"""
SELECT s.id, TRIM(COALESCE(s.cwd, '')), TRIM(COALESCE(s.git_repo_root, '')),
       NOT COALESCE({{archived}}, 0) AND NOT COALESCE({_DELEGATE}, 0), s.title, s.started_at, s.source
FROM sessions s WHERE s.id IN (SELECT value FROM json_each(?))
"""


def recorded(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, tuple[str, str, bool, SessionDetails]]:
    """``{id: (the folder its row records, its git root, whether it is searchable, what an answer shows of it)}`` for
    the sessions of ``ids`` that exist ("" for none; searchable: not archived, not a delegate's, a tool's or a kanban
    worker's run). No folder is read from the system prompt here, as the census does for a row without one: a short
    read a session."""
    return {str(r[0]): (r[1], r[2], bool(r[3]), SessionDetails(r[4], r[5], r[6] or ""))
            for r in conn.execute(_sql(conn, _RECORDED_SQL), (json.dumps(list(ids)),))}


_ALL_ROWS_SQL = f"SELECT {_ROW_COLUMNS} FROM sessions s"
_ROWS_AFTER_SQL = f"SELECT {_ROW_COLUMNS} FROM sessions s WHERE s.rowid > ? ORDER BY s.rowid"


def rows_after(conn: sqlite3.Connection, rowid: int) -> list[Any]:
    """Rows of the sessions after ``rowid``, in rowid order (parents before children), as :func:`scan_sessions`
    reads them: what :func:`_session_row` takes, then archived on purpose, delegate, message count, title."""
    return conn.execute(_sql(conn, _ROWS_AFTER_SQL), (rowid,)).fetchall()


def db_fingerprint(conn: sqlite3.Connection, path: str) -> tuple[Any, ...]:
    """Tells one state.db file from another at the same path: the file's identity and its oldest session
    (a replacement may reuse the inode). Caches keyed by path compare it before they trust what they hold."""
    try:
        st = os.stat(path)
        identity: tuple[Any, ...] = (st.st_dev, st.st_ino)
    except OSError:
        identity = (0, 0)
    first = conn.execute("SELECT id, started_at FROM sessions ORDER BY rowid LIMIT 1").fetchone()
    return (*identity, *(first or ("", 0.0)))


@dataclass(frozen=True)
class SessionScan:
    """One pass over ``sessions``: every session's effective workspace (``None``: it has none), and which sessions
    are searchable."""

    workspaces: dict[str, attribution.Workspace | None]
    searchable: dict[str, int]  # searchable session -> message_count (archived, delegate and tool runs left out)

    def groups(self) -> dict[tuple[str | None, str | None], list[tuple[str, int]]]:
        """Searchable sessions with a workspace, grouped by ``(cwd, stored root)``: ``[(session id, message_count)]``.

        Folders that still exist come first: they reveal the repos a deleted worktree's folder traces to.
        """
        out: dict[tuple[str | None, str | None], list[tuple[str, int]]] = {}
        for sid, count in self.searchable.items():
            ws = self.workspaces.get(sid)
            if ws is not None:
                out.setdefault((ws.cwd, ws.root), []).append((sid, count))
        return dict(sorted(out.items(), key=lambda item: not (item[0][0] and os.path.isdir(item[0][0]))))


def scan_sessions(conn: sqlite3.Connection) -> SessionScan:
    """Read every session row once and resolve every workspace (``/new`` sessions included)."""
    rows: dict[str, attribution.SessionRow] = {}
    searchable: dict[str, int] = {}
    for r in conn.execute(_sql(conn, _ALL_ROWS_SQL)):
        row = _session_row(r)
        rows[row.id] = row
        if not r[8] and not r[9]:
            searchable[row.id] = int(r[10] or 0)
    found = attribution.effective_workspaces(rows)
    return SessionScan({sid: found.get(sid) for sid in rows}, searchable)


def session_details(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, SessionDetails]:
    """``{id: SessionDetails}`` for the sessions of ``ids`` that exist."""
    sql = "SELECT id, title, started_at, source FROM sessions WHERE id IN (SELECT value FROM json_each(?))"
    return {r[0]: SessionDetails(r[1], r[2], r[3] or "") for r in conn.execute(sql, (json.dumps(list(ids)),))}


def active_between(conn: sqlite3.Connection, ids: Sequence[str], since: float | None, until: float | None) -> set[str]:
    """Those of the sessions ``ids`` with a message in ``[since, until)`` as far as their first and last messages'
    times tell (a superset: the messages are still checked): two seeks of Hermes' (session_id, timestamp) index a
    session, no message read. For a search whose dates leave out most sessions, so that the vector leg's best sessions
    are picked among those that can pass."""
    sql = """
        SELECT s.value FROM json_each(:ids) s
        WHERE (:since IS NULL OR (SELECT max(m.timestamp) FROM messages m WHERE m.session_id = s.value) >= :since)
          AND (:until IS NULL OR (SELECT min(m.timestamp) FROM messages m WHERE m.session_id = s.value) < :until)
    """
    return {str(r[0]) for r in conn.execute(sql, {"ids": json.dumps(list(ids)), "since": since, "until": until})}
