"""What a state.db holds: the facts of Hermes' schema line that every reader of it needs, read from the file.

Two Hermes lines write state.db: 0.19 (PyPI, schema 22) and 0.21 (Hermes' installer, schema 30), told apart
by what the database holds, never by a version string (a 0.19 file opened by 0.21 says 30 and keeps 0.19's
index until ``hermes sessions optimize-storage`` rebuilds it):

* copies of one message (every layout): in-place compaction before hermes-agent #99545 archived the head and tail it
  carried forward beside their live copies; Hermes' transcript shows each message once, where it was first said
  (:data:`_ALIKE`);
* ``messages.display_kind`` / ``display_metadata`` (0.21): rows a person never saw (compaction scaffolding,
  turns marked ``model_only``) are left out of everything shown;
* ``sessions.hidden`` (0.21): sessions hidden from Hermes' own listing;
* ``sessions.auto_archived`` (schema 31): a session Hermes' idle sweep archived, not a person (Hermes itself
  un-archives it when the chat is resumed): still the project's history, unlike one archived on purpose;
* the full-text index: 0.19's one inline column or 0.21's three columns over a view. 0.21 indexes only the first
  8,192 characters of a tool row, in its view and in the inline table's triggers when it writes them again (a 0.19
  file upgraded by a later Hermes: rows past its high-water mark): :attr:`Layout.tool_prefix`, read from the view's
  and the insert trigger's SQL;
* ``state_meta``: a chunked rebuild in progress, or an index Hermes found damaged (``fts_stale``);
* an index on ``messages(session_id, id)`` (0.21 creates it, also in a 0.19 file): a session's rows can be
  walked by id from any message (``session_walk``).

Each difference is decided here (:func:`read`, once per connection through ``store.layout_of``) and spelled
as SQL here (:meth:`Layout.visible_sql`). Read-only; raises only ``sqlite3`` errors.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

#: Rows Hermes never shows as a conversation's content: rewound ones (``active = 0`` and not archived by a
#: compaction). Every layout.
_LIVE = "(m.active = 1 OR m.compacted = 1)"
#: Rows a person never saw (0.21): scaffolding, and turns kept for the model only: a ``model_only`` that is not
#: absent, null, false or 0, as Hermes' display SQL reads it (the text ``"false"`` too). The LIKE lets JSON be parsed
#: only for the rare rows that mention the key; the CASE keeps json_extract() off text that is not JSON (SQLite
#: may evaluate both sides of an AND).
_SHOWN = ("COALESCE(m.display_kind, '') <> 'hidden' AND NOT (m.display_metadata LIKE '%model\\_only%' ESCAPE '\\'"
          " AND CASE WHEN json_valid(m.display_metadata)"
          " THEN COALESCE(json_extract(m.display_metadata, '$.model_only'), 0) <> 0 ELSE 0 END)")


#: Rows of one message: rows of a session alike in role, content, timestamp and tool columns are one message to
#: Hermes' transcript, which shows it once, as its live row, else its newest, where its first row lies
#: (hermes-agent ``hermes_state_messages``: ``_display_dedupe_key``, ``_dedupe_display_generations``,
#: ``_display_rows_from_conn``, at 01e8a2d0). Compaction before hermes-agent #99545 (#86366) archived every live row
#: (``compacted = 1``) and inserted copies of the head and tail it carried forward, one more copy a compaction. A
#: copy keeps its timestamp, so the rows alike are found by one seek of Hermes' (session_id, timestamp) index (every
#: layout has it) and compared there; ``{other}`` is the rest of what Hermes shows, said of ``d``.
_ALIKE = ("d.session_id = m.session_id AND d.timestamp = m.timestamp AND d.role IS m.role"
          " AND d.tool_call_id IS m.tool_call_id AND d.tool_name IS m.tool_name AND d.tool_calls IS m.tool_calls"
          " AND d.content IS m.content AND {other}")
#: The row of its message Hermes shows (the live one, else the newest). Only archived rows are asked: a live row
#: passes, as two live rows alike (a rarer fault, hermes-agent #96929) are not told apart here: asking would read
#: every live row's timestamp, which lies past a long tool log's content, in its overflow pages, for every search.
#: A newer row alike is sought from ``m`` on (the seek's rowid range: the next copy, at once); an older live one
#: only for the newest archived row, so n copies of one message cost n seeks, not n x n rows.
_ONE_COPY = ("(m.active IS 1 OR (NOT EXISTS (SELECT 1 FROM messages d WHERE {alike} AND d.id > m.id)"
             " AND NOT EXISTS (SELECT 1 FROM messages d WHERE {alike} AND d.active IS 1 AND d.id < m.id)))")
#: Rows of one clock tick above which its archived rows are told apart by grouping the tick once (:data:`_GROUPED`: by
#: the statement that reads them, :meth:`Layout.visible_among_sql`, or once a connection, ``ticks.Ticks``) rather than
#: each compared with the others (T x T for a tick of T rows read whole); a smaller tick's are asked row by row.
LARGE_TICK = 8
#: Row ``m``'s clock tick holds more than :data:`LARGE_TICK` rows: its row after that many is there, at most that many
#: + 1 read, from Hermes' (session_id, timestamp) index alone.
_LARGE = ("EXISTS (SELECT 1 FROM messages o WHERE o.session_id = m.session_id AND o.timestamp = m.timestamp"
          f" LIMIT 1 OFFSET {LARGE_TICK})")
#: Of row ``m`` (by id, the parameter): its session and time, whether its tick is large (:data:`_LARGE`), and, when it
#: is not, the row of its message Hermes shows when ``m`` is the first row of it (where Hermes shows the message), else
#: NULL: what a walk of a session, which reads only the rows it passes, keeps.
_SHOWN_HERE = ("SELECT m.session_id, m.timestamp, {large}, CASE WHEN {large} THEN NULL"
               " WHEN (SELECT min(d.id) FROM messages d WHERE {alike}) = m.id THEN (SELECT d.id FROM messages d"
               " WHERE {alike} ORDER BY d.active IS 1 DESC, d.id DESC LIMIT 1) END FROM messages m WHERE m.id = ?")
#: Of row ``m`` (by id): its session and time, whether its tick is large, and, when it is not, the id of the first row
#: of its message.
_FIRST_ROW = ("SELECT m.session_id, m.timestamp, {large}, CASE WHEN {large} THEN NULL ELSE"
              " (SELECT min(d.id) FROM messages d WHERE {alike}) END FROM messages m WHERE m.id = ?")
#: The rows of the clock ticks ``{ticks}`` (``messages d`` and what names the ticks) that :meth:`Layout.rows_sql`
#: keeps, grouped by what makes rows alike (``{by}``: the session and time first when the ticks are many), once (a
#: window): ``(id, the first row of its message, the row Hermes shows of it)``.
_GROUPED = ("SELECT d.id, min(d.id) OVER w, first_value(d.id) OVER (w ORDER BY d.active IS 1 DESC, d.id DESC) AS shown"
            " FROM {ticks} AND {kept_d} WINDOW w AS (PARTITION BY {by}d.role, d.tool_call_id, d.tool_name, d.tool_calls,"
            " d.content)")


def _of(condition: str, alias: str) -> str:
    """``condition`` (on ``messages`` as ``m``) said of the alias ``alias``."""
    return re.sub(r"\bm\.", f"{alias}.", condition)


@dataclass(frozen=True)
class Layout:
    """One state.db's schema facts (see the module docstring)."""

    display: bool = False  # messages has display_kind and display_metadata (0.21, which has optimize-storage)
    hidden_sessions: bool = False  # sessions has hidden
    auto_archived: bool = False  # sessions has auto_archived (schema 31)
    tool_prefix: bool = False  # the words index holds only the first characters of a tool row
    trigram: bool = True  # state.db has the trigram index (messages_fts_trigram)
    trigram_tools: bool = True  # whether the trigram index holds tool rows (and cron, delegate sessions)
    rebuild: tuple[int, int] | None = None  # (progress, high water) of a chunked rebuild: ids in between not indexed
    stale: bool = False  # Hermes found the index damaged and searches by substring until it rebuilds it
    ids_by_session: bool = False  # messages has an index on (session_id, id)
    prompt_store: bool = False  # sessions may keep their system prompt in system_prompts, by hash (0.21)

    def rows_sql(self) -> str:
        """The SQL condition (on ``messages`` as ``m``) that keeps the rows of the messages Hermes shows a person,
        copies of one message included (:meth:`shown_here_sql` tells them apart); reads no row's content."""
        return f"{_LIVE} AND {_SHOWN}" if self.display else _LIVE

    def visible_sql(self) -> str:
        """The SQL condition (on ``messages`` as ``m``) that keeps what Hermes shows a person: each message once,
        as the row Hermes shows of it."""
        return f"{self.rows_sql()} AND {_ONE_COPY.format(alike=self._alike())}"

    def visible_among_sql(self, ids: str) -> str:
        """:meth:`visible_sql` for one statement that reads many rows, all among those the SQL subquery ``ids`` names:
        the archived rows of a large clock tick (:data:`LARGE_TICK`) told apart by one window over their ticks, in the
        statement (:data:`_GROUPED`), the others row by row."""
        ticks = (f"(SELECT DISTINCT a.session_id AS s, a.timestamp AS ts FROM ({self.large_archived_sql(ids)}) a) k,"
                 " messages d WHERE d.session_id = k.s AND d.timestamp = k.ts")
        grouped = _GROUPED.format(ticks=ticks, kept_d=_of(self.rows_sql(), "d"), by="d.session_id, d.timestamp, ")
        return self.visible_told_sql(_LARGE, f"SELECT shown FROM ({grouped})")

    def shown_here_sql(self) -> str:
        """SQL of one parameter, the id of a row :meth:`rows_sql` keeps: ``(session, timestamp, large, shown)``:
        whether the row's clock tick holds more than :data:`LARGE_TICK` rows (then ``shown`` is NULL: ask
        :meth:`tick_sql`), else the id of the row of its message Hermes shows when the row is where Hermes shows
        the message (its first), else NULL."""
        return _SHOWN_HERE.format(alike=self._alike(), large=_LARGE)

    def first_row_sql(self) -> str:
        """SQL of one parameter, a row's id: ``(session, timestamp, large, first)``: as :meth:`shown_here_sql`, with
        the id of the first row of its message (NULL in a large tick)."""
        return _FIRST_ROW.format(alike=self._alike(), large=_LARGE)

    def tick_sql(self) -> str:
        """SQL of two parameters, a session and a timestamp: ``(id, first, shown)`` of each row of that clock tick
        :meth:`rows_sql` keeps: the first row of its message, and the row of it Hermes shows. One sort of the tick."""
        return _GROUPED.format(ticks="messages d WHERE d.session_id = ? AND d.timestamp = ?", kept_d=_of(self.rows_sql(), "d"), by="")

    def large_archived_sql(self, ids: str = "SELECT value FROM json_each(?)") -> str:
        """``(id, session, timestamp)`` of those of the rows the SQL subquery ``ids`` names (by default one parameter,
        JSON of message ids) that :meth:`rows_sql` keeps, are not live, and lie in a clock tick of more than
        :data:`LARGE_TICK` rows."""
        return (f"SELECT t.id, t.session_id, t.timestamp FROM messages t WHERE t.id IN ({ids}) AND t.active IS NOT 1"
                f" AND {_of(self.rows_sql(), 't')} AND {_of(_LARGE, 't')}")

    def visible_told_sql(self, told: str = "m.id IN (SELECT value FROM json_each(?))",
                         shown: str = "SELECT value FROM json_each(?)") -> str:
        """:meth:`visible_sql` where the archived rows for which the SQL condition ``told`` holds were grouped with their
        clock tick (:data:`_GROUPED`): shown when among the ids of the subquery ``shown``; the others asked row by row.
        By default two parameters, JSON lists of ids: the rows ``ticks.Ticks.told`` told apart, and those of them Hermes
        shows."""
        return (f"{self.rows_sql()} AND (m.active IS 1 OR CASE WHEN {told} THEN m.id IN ({shown})"
                f" ELSE {_ONE_COPY.format(alike=self._alike())} END)")

    def _alike(self) -> str:
        return _ALIKE.format(other=_of(self.rows_sql(), "d"))

    def archived_sql(self) -> str:
        """The SQL value (on ``sessions`` as ``s``) that is true for a session archived on purpose, which is left
        out of every scope; one Hermes' idle sweep archived is not."""
        return "(s.archived AND NOT s.auto_archived)" if self.auto_archived else "s.archived"

    def prompt_sql(self) -> str:
        """The SQL value (on ``sessions`` as ``s``) of the session's system prompt as Hermes stored it (NULL: none)."""
        if self.prompt_store:
            return ("COALESCE(s.system_prompt, (SELECT p.prompt FROM system_prompts p "
                    "WHERE p.hash = s.system_prompt_hash))")
        return "s.system_prompt"


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(r[1]) for r in conn.execute("SELECT * FROM pragma_table_info(?)", (table,))}


def _ids_by_session(conn: sqlite3.Connection) -> bool:
    """Whether an index of ``messages`` (not a partial one) starts with (session_id, id)."""
    for name, partial in conn.execute("SELECT name, partial FROM pragma_index_list('messages')"):
        columns = [str(r[0]) for r in conn.execute("SELECT name FROM pragma_index_info(?) ORDER BY seqno", (name,))]
        if not partial and columns[:2] == ["session_id", "id"]:
            return True
    return False


def read(conn: sqlite3.Connection) -> Layout:
    """The :class:`Layout` of the state.db ``conn`` reads. Raises ``sqlite3`` errors."""
    schema = {str(name): str(sql or "") for name, sql in conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE name IN ('messages_fts_src', 'messages_fts_insert',"
        " 'messages_fts_trigram', 'state_meta', 'system_prompts')")}
    meta: dict[str, str] = {}
    if "state_meta" in schema:
        meta = {str(k): str(v) for k, v in conn.execute(
            "SELECT key, value FROM state_meta WHERE key IN ('fts_rebuild_high_water', 'fts_rebuild_progress', 'fts_stale')")}
    rebuild = None
    try:
        high, done = int(meta.get("fts_rebuild_high_water", 0)), int(meta.get("fts_rebuild_progress", 0))
    except ValueError:
        high, done = 0, 0
    if high > 0 and done < high:
        rebuild = (done, high)
    messages, sessions = _columns(conn, "messages"), _columns(conn, "sessions")
    return Layout(
        display={"display_kind", "display_metadata"} <= messages,
        hidden_sessions="hidden" in sessions,
        auto_archived="auto_archived" in sessions,
        tool_prefix="substr(" in (schema.get("messages_fts_src", "") + schema.get("messages_fts_insert", "")).lower(),
        trigram="messages_fts_trigram" in schema,
        trigram_tools="messages_fts_trigram_src" not in schema.get("messages_fts_trigram", ""),
        rebuild=rebuild,
        stale="fts_stale" in meta,
        ids_by_session=_ids_by_session(conn),
        prompt_store="system_prompts" in schema and "system_prompt_hash" in sessions,
    )
