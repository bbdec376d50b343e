"""State.db files of Hermes 0.21 (schema 30), built from the schema's DDL facts, for tests on this 0.19 host.

Hermes 0.21 needs Python 3.14 and cannot run here; its schema can. The DDL
below is transcribed from NousResearch/hermes-agent (0.21.3 line:
``hermes_state_common.py``, ``hermes_state_fts.py``; f-string parts expanded),
and :class:`Schema30` writes rows the way Hermes' SQL does (its triggers keep
the full-text indexes), in the three states users' files are in:

* ``fresh``: created by 0.21 (the three-column index over a view, tool rows
  indexed up to 8,192 characters, no tool rows in the trigram index);
* ``migrated``: a 0.19 file opened by 0.21 and not optimised yet (schema 30,
  0.19's one-column inline index and triggers);
* ``backfill``: half-way through ``hermes sessions optimize-storage``'s chunked
  rebuild (``fts_rebuild_high_water`` / ``fts_rebuild_progress``: the rows in
  between are not indexed yet; rows written since are).

With ``cjk=True`` the file also declares ``messages_fts_cjk`` with the
``cjk_unicode61`` tokenizer, which this process cannot load (a writer without
the extension dropped its triggers and marked it ``fts_cjk_stale``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

FTS_TOOL_CONTENT_PREFIX_CHARS = 8192

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS system_prompts (hash TEXT PRIMARY KEY, prompt TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    created_source TEXT,
    user_id TEXT,
    session_key TEXT,
    chat_id TEXT,
    chat_type TEXT,
    thread_id TEXT,
    display_name TEXT,
    origin_json TEXT,
    expiry_finalized INTEGER DEFAULT 0,
    model TEXT,
    model_config TEXT,
    system_prompt TEXT,
    system_prompt_hash TEXT,
    parent_session_id TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT,
    message_count INTEGER DEFAULT 0,
    tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0,
    output_tokens INTEGER DEFAULT 0,
    cache_read_tokens INTEGER DEFAULT 0,
    cache_write_tokens INTEGER DEFAULT 0,
    reasoning_tokens INTEGER DEFAULT 0,
    cwd TEXT,
    git_branch TEXT,
    git_repo_root TEXT,
    git_metadata_generation INTEGER NOT NULL DEFAULT 0,
    billing_provider TEXT,
    billing_base_url TEXT,
    billing_mode TEXT,
    estimated_cost_usd REAL,
    actual_cost_usd REAL,
    cost_status TEXT,
    cost_source TEXT,
    pricing_version TEXT,
    title TEXT,
    title_source TEXT,
    last_activity_at REAL,
    last_activity_description TEXT,
    last_activity_provenance TEXT,
    api_call_count INTEGER DEFAULT 0,
    handoff_state TEXT,
    handoff_platform TEXT,
    handoff_error TEXT,
    compression_failure_cooldown_until REAL,
    compression_failure_error TEXT,
    compression_fallback_streak INTEGER NOT NULL DEFAULT 0,
    compression_ineffective_count INTEGER NOT NULL DEFAULT 0,
    compression_recovery_deadline REAL,
    compression_overload_streak INTEGER NOT NULL DEFAULT 0,
    profile_name TEXT,
    transport_profile TEXT,
    rewind_count INTEGER NOT NULL DEFAULT 0,
    archived INTEGER NOT NULL DEFAULT 0,
    pinned INTEGER NOT NULL DEFAULT 0,
    hidden INTEGER NOT NULL DEFAULT 0,
    last_read_at REAL,
    tool_names TEXT,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id),
    FOREIGN KEY (system_prompt_hash) REFERENCES system_prompts(hash)
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    tool_call_id TEXT,
    tool_calls TEXT,
    tool_name TEXT,
    effect_disposition TEXT,
    timestamp REAL NOT NULL,
    token_count INTEGER,
    finish_reason TEXT,
    reasoning TEXT,
    reasoning_content TEXT,
    reasoning_details TEXT,
    codex_reasoning_items TEXT,
    codex_message_items TEXT,
    platform_message_id TEXT,
    observed INTEGER DEFAULT 0,
    _compressed_summary INTEGER NOT NULL DEFAULT 0,
    active INTEGER NOT NULL DEFAULT 1,
    compacted INTEGER NOT NULL DEFAULT 0,
    api_content TEXT,
    display_kind TEXT,
    display_metadata TEXT,
    display_identity BLOB,
    display_order INTEGER
);
CREATE TABLE IF NOT EXISTS state_meta (key TEXT PRIMARY KEY, value TEXT);
CREATE INDEX IF NOT EXISTS idx_sessions_source ON sessions(source);
CREATE INDEX IF NOT EXISTS idx_sessions_source_id ON sessions(source, id);
CREATE INDEX IF NOT EXISTS idx_sessions_parent ON sessions(parent_session_id);
CREATE INDEX IF NOT EXISTS idx_sessions_started ON sessions(started_at DESC);
CREATE INDEX IF NOT EXISTS idx_messages_session ON messages(session_id, timestamp);
CREATE INDEX IF NOT EXISTS idx_messages_session_id ON messages(session_id, id);
CREATE INDEX IF NOT EXISTS idx_messages_assistant_calls_by_session
    ON messages(session_id) WHERE role = 'assistant' AND tool_calls IS NOT NULL;
"""

DEFERRED_INDEX_SQL = """
CREATE INDEX IF NOT EXISTS idx_messages_session_active ON messages(session_id, active, timestamp);
CREATE INDEX IF NOT EXISTS idx_messages_display_page
    ON messages(session_id, display_order, active DESC, id DESC) WHERE active = 1 OR compacted = 1;
CREATE INDEX IF NOT EXISTS idx_messages_display_backfill
    ON messages(session_id) WHERE (display_order IS NULL OR display_identity IS NULL) AND (active = 1 OR compacted = 1);
CREATE INDEX IF NOT EXISTS idx_messages_display_identity
    ON messages(session_id, display_identity, display_order)
    WHERE display_identity IS NOT NULL AND (active = 1 OR compacted = 1);
CREATE TRIGGER IF NOT EXISTS messages_display_order_insert
AFTER INSERT ON messages WHEN new.display_order IS NULL
BEGIN
    UPDATE messages SET display_order = COALESCE((
        SELECT display_order FROM messages
        WHERE session_id = new.session_id AND id <> new.id
          AND (active = 1 OR compacted = 1)
          AND display_identity = new.display_identity AND display_order IS NOT NULL
        ORDER BY display_order LIMIT 1
    ), new.id) WHERE id = new.id;
END;
CREATE INDEX IF NOT EXISTS idx_messages_active_null ON messages(active) WHERE active IS NULL;
CREATE INDEX IF NOT EXISTS idx_sessions_session_key ON sessions(session_key, started_at DESC);
CREATE INDEX IF NOT EXISTS idx_sessions_system_prompt_hash ON sessions(system_prompt_hash);
CREATE INDEX IF NOT EXISTS idx_sessions_tool_names ON sessions(tool_names);
CREATE INDEX IF NOT EXISTS idx_sessions_effective_activity
    ON sessions(COALESCE(last_activity_at, started_at) DESC, started_at DESC);
"""

_NEW = "CASE WHEN new.role = 'tool' THEN substr(COALESCE(new.content, ''), 1, 8192) ELSE new.content END"
_OLD = "CASE WHEN old.role = 'tool' THEN substr(COALESCE(old.content, ''), 1, 8192) ELSE old.content END"
_GATE_NEW = ("(new.id > COALESCE((SELECT CAST(value AS INTEGER) FROM state_meta WHERE key = 'fts_rebuild_high_water'), -1)"
             " OR new.id <= COALESCE((SELECT CAST(value AS INTEGER) FROM state_meta WHERE key = 'fts_rebuild_progress'), -1))")
_GATE_OLD = _GATE_NEW.replace("new.", "old.")

FTS_SQL = f"""
CREATE VIEW IF NOT EXISTS messages_fts_src AS
    SELECT id,
           CASE WHEN role = 'tool'
                THEN substr(COALESCE(content, ''), 1, 8192)
                ELSE content END AS content,
           tool_name, tool_calls
    FROM messages;
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    content, tool_name, tool_calls, content='messages_fts_src', content_rowid='id');
CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages
WHEN {_GATE_NEW}
BEGIN
    INSERT INTO messages_fts(rowid, content, tool_name, tool_calls) VALUES (new.id, {_NEW}, new.tool_name, new.tool_calls);
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_delete AFTER DELETE ON messages
WHEN {_GATE_OLD}
BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, tool_name, tool_calls)
    VALUES ('delete', old.id, {_OLD}, old.tool_name, old.tool_calls);
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_update
AFTER UPDATE OF content, tool_name, tool_calls, role ON messages
WHEN (old.content IS NOT new.content OR old.tool_name IS NOT new.tool_name
    OR old.tool_calls IS NOT new.tool_calls OR old.role IS NOT new.role) AND {_GATE_OLD}
BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, tool_name, tool_calls)
    VALUES ('delete', old.id, {_OLD}, old.tool_name, old.tool_calls);
    INSERT INTO messages_fts(rowid, content, tool_name, tool_calls) VALUES (new.id, {_NEW}, new.tool_name, new.tool_calls);
END;
"""

def _trigram_session_sql(alias: str = "") -> str:
    q = f"{alias}." if alias else ""
    return (f"{q}source NOT IN ('cron', 'subagent') AND json_extract((CASE WHEN json_valid({q}model_config) "
            f"THEN {q}model_config ELSE json_object() END), '$._delegate_from') IS NULL")

_TS = _trigram_session_sql()
FTS_TRIGRAM_SQL = f"""
CREATE VIEW IF NOT EXISTS messages_fts_trigram_src AS
    SELECT m.id, m.role, m.content, m.tool_name
    FROM messages AS m
    JOIN sessions AS s ON s.id = m.session_id
    WHERE m.role <> 'tool' AND {_trigram_session_sql('s')};
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts_trigram USING fts5(
    content, tool_name, content='messages_fts_trigram_src', content_rowid='id', tokenize='trigram');
CREATE TRIGGER IF NOT EXISTS messages_fts_trigram_insert AFTER INSERT ON messages
WHEN new.role <> 'tool' AND EXISTS (SELECT 1 FROM sessions WHERE id = new.session_id AND {_TS}) AND {_GATE_NEW}
BEGIN
    INSERT INTO messages_fts_trigram(rowid, content, tool_name) VALUES (new.id, new.content, new.tool_name);
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_trigram_delete AFTER DELETE ON messages
WHEN old.role <> 'tool' AND EXISTS (SELECT 1 FROM sessions WHERE id = old.session_id AND {_TS}) AND {_GATE_OLD}
BEGIN
    INSERT INTO messages_fts_trigram(messages_fts_trigram, rowid, content, tool_name)
    VALUES ('delete', old.id, old.content, old.tool_name);
END;
"""

_CJK_GATE = lambda p: _GATE_NEW.replace("new.", p + ".").replace("fts_rebuild_", "fts_cjk_rebuild_")
FTS_CJK_TABLE_SQL = """
CREATE VIEW IF NOT EXISTS messages_fts_cjk_src AS
    SELECT id, role, content, tool_name, tool_calls FROM messages WHERE role <> 'tool';
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts_cjk USING fts5(
    content, tool_name, tool_calls, content='messages_fts_cjk_src', content_rowid='id', tokenize='TOKENIZER');
"""
FTS_CJK_TRIGGER_SQL = f"""
CREATE TRIGGER IF NOT EXISTS messages_fts_cjk_insert AFTER INSERT ON messages
WHEN new.role <> 'tool' AND {_CJK_GATE('new')}
BEGIN
    INSERT INTO messages_fts_cjk(rowid, content, tool_name, tool_calls) VALUES (new.id, new.content, new.tool_name, new.tool_calls);
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_cjk_delete AFTER DELETE ON messages
WHEN old.role <> 'tool' AND {_CJK_GATE('old')}
BEGIN
    INSERT INTO messages_fts_cjk(messages_fts_cjk, rowid, content, tool_name, tool_calls)
    VALUES ('delete', old.id, old.content, old.tool_name, old.tool_calls);
END;
"""

# v22 / legacy inline layout as 0.21.3 keeps it for un-optimized DBs (LEGACY_FTS_SQL / LEGACY_FTS_TRIGRAM_SQL);
# a DB migrated from 0.19 keeps 0.19's own insert triggers (full content, no 8192 cut) until optimize-storage.
LEGACY_FTS_SQL_019 = """
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(content);
CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id,
        COALESCE(new.content, '') || ' ' || COALESCE(new.tool_name, '') || ' ' || COALESCE(new.tool_calls, ''));
END;
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts_trigram USING fts5(content, tokenize='trigram');
CREATE TRIGGER IF NOT EXISTS messages_fts_trigram_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts_trigram(rowid, content) VALUES (new.id,
        COALESCE(new.content, '') || ' ' || COALESCE(new.tool_name, '') || ' ' || COALESCE(new.tool_calls, ''));
END;
"""


#: Schema 31 (upstream main after 0.21.5; the SCHEMA_SQL extracted from NousResearch/hermes-agent@46d7718a, and
#: the uid trigger and index as its DEFERRED_INDEX_SQL describes them): a session's ``auto_archived`` (set by the
#: idle sweep on the rows it archives, cleared by a deliberate archive) and a stable ``message_uid`` for each message.
#: Added to a schema-30 file the way Hermes' migration adds columns.
SCHEMA31_SQL = """
ALTER TABLE sessions ADD COLUMN auto_archived INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN message_uid TEXT;
ALTER TABLE messages ADD COLUMN absorbed_message_uids TEXT;
ALTER TABLE messages ADD COLUMN tool_call_uids TEXT;
ALTER TABLE messages ADD COLUMN tool_call_uid TEXT;
CREATE TRIGGER IF NOT EXISTS messages_message_uid_insert AFTER INSERT ON messages WHEN new.message_uid IS NULL
BEGIN
    UPDATE messages SET message_uid = lower(hex(randomblob(16))) WHERE id = new.id;
END;
CREATE INDEX IF NOT EXISTS idx_messages_session_uid ON messages(session_id, message_uid) WHERE active = 1;
"""

#: The inline layout's triggers as later Hermes lines write them again (LEGACY_FTS_SQL; e.g. when its index is
#: recovered): a tool row above ``fts_tool_full_content_high_water`` is indexed in its first 8,192 characters.
_CUT_NEW = ("CASE WHEN new.role = 'tool' AND new.id > COALESCE((SELECT CAST(value AS INTEGER) FROM state_meta"
            " WHERE key = 'fts_tool_full_content_high_water'), -1)"
            f" THEN substr(COALESCE(new.content, ''), 1, {FTS_TOOL_CONTENT_PREFIX_CHARS}) ELSE new.content END")
LEGACY_FTS_SQL_CUT = LEGACY_FTS_SQL_019.replace("COALESCE(new.content, '')", f"COALESCE({_CUT_NEW}, '')")

VARIANTS = ("fresh", "migrated", "backfill")
#: ``migrated`` with its triggers as a later Hermes writes them again: the same inline tables, tool rows cut
UPGRADED = "upgraded"


class Schema30:
    """A schema-30 state.db at ``path`` in one of :data:`VARIANTS` or :data:`UPGRADED`, written like Hermes 0.21 writes it."""

    def __init__(self, path: Path, variant: str, *, cjk: bool = False, schema: int = 30) -> None:
        self.path, self.variant = Path(path), variant
        self._clock = 1_700_000_000.0
        with self.connect() as conn:
            self._create(conn, variant, cjk, schema)
        self._rebuild_started = False

    def _create(self, conn: sqlite3.Connection, variant: str, cjk: bool, schema: int) -> None:
        conn.executescript(SCHEMA_SQL + DEFERRED_INDEX_SQL + (SCHEMA31_SQL if schema == 31 else ""))
        conn.execute("INSERT INTO schema_version (version) VALUES (?)", (schema,))
        self._schema31 = schema == 31
        if variant in ("migrated", "upgraded"):
            conn.executescript(LEGACY_FTS_SQL_019 if variant == "migrated" else LEGACY_FTS_SQL_CUT)
            conn.execute("INSERT INTO state_meta (key, value) VALUES ('fts_optimize_available', '1')")
        else:
            conn.executescript(FTS_SQL + FTS_TRIGRAM_SQL)
            if variant == "fresh":
                conn.execute("INSERT INTO state_meta (key, value) VALUES ('fts_storage_version', '3')")
        if cjk:
            conn.execute("PRAGMA writable_schema = ON")
            for name, sql in (
                ("messages_fts_cjk_src", "CREATE VIEW messages_fts_cjk_src AS SELECT id, role, content, tool_name, tool_calls "
                                         "FROM messages WHERE role <> 'tool'"),
                ("messages_fts_cjk", "CREATE VIRTUAL TABLE messages_fts_cjk USING fts5(content, tool_name, tool_calls, "
                                     "content='messages_fts_cjk_src', content_rowid='id', tokenize='cjk_unicode61')"),
            ):
                kind = "view" if name.endswith("_src") else "table"
                conn.execute("INSERT INTO sqlite_master (type, name, tbl_name, rootpage, sql) VALUES (?, ?, ?, 0, ?)",
                             (kind, name, name, sql))
            conn.execute("PRAGMA writable_schema = OFF")
            conn.execute("INSERT INTO state_meta (key, value) VALUES ('fts_cjk_stale', '1')")

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A connection in autocommit, closed at the end of the block (one left to the garbage collector held the
        WAL open for as long as it lived: whether the plugin's readers found a live WAL index then depended on
        when the collector ran)."""
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            yield conn
        finally:
            conn.close()

    def session(self, sid: str, cwd: Path | str | None = None, *, source: str = "cli", parent: str | None = None,
                git_repo_root: Path | str | None = None, hidden: bool = False, model_config: dict[str, Any] | None = None,
                messages: list[tuple[str, str]] | None = None) -> str:
        self._clock += 10
        with self.connect() as conn:
            conn.execute(
                "INSERT INTO sessions (id, source, started_at, cwd, git_repo_root, parent_session_id, hidden, model_config)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (sid, source, self._clock, str(cwd) if cwd else None, str(git_repo_root) if git_repo_root else None, parent,
                 int(hidden), json.dumps(model_config) if model_config else None))
        for role, content in messages or ():
            self.say(sid, role, content)
        return sid

    def say(self, sid: str, role: str, content: str | None, *, tool_name: str | None = None, tool_calls: Any = None,
            display_kind: str | None = None, display_metadata: dict[str, Any] | None = None) -> int:
        self._clock += 1
        with self.connect() as conn:
            cursor = conn.execute(
                "INSERT INTO messages (session_id, role, content, tool_name, tool_calls, timestamp, display_kind, display_metadata)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (sid, role, content, tool_name, json.dumps(tool_calls) if tool_calls is not None else None, self._clock,
                 display_kind, json.dumps(display_metadata) if display_metadata is not None else None))
            conn.execute("UPDATE sessions SET message_count = message_count + 1 WHERE id = ?", (sid,))
            return int(cursor.lastrowid or 0)

    def compact(self, sid: str, summary: str, keep: int, head: int = 0) -> list[int]:
        """An in-place compaction as Hermes wrote it before hermes-agent #99545 (``archive_and_compact``): every live
        row archived (``active = 0, compacted = 1``), then copies of the first ``head`` live rows, the summary and
        copies of the last ``keep`` inserted as live rows, each copy with its original's columns and timestamp.
        Returns the tail copies' ids."""
        columns = "session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, display_kind, display_metadata"

        def copy(conn: sqlite3.Connection, mids: list[int]) -> list[int]:
            return [int(conn.execute(f"INSERT INTO messages ({columns}) SELECT {columns} FROM messages WHERE id = ?",
                                     (mid,)).lastrowid or 0) for mid in mids]

        with self.connect() as conn:
            live = [r[0] for r in conn.execute("SELECT id FROM messages WHERE session_id = ? AND active = 1 ORDER BY id", (sid,))]
            conn.execute("UPDATE messages SET active = 0, compacted = 1 WHERE session_id = ? AND active = 1", (sid,))
            copy(conn, live[:head])
        self.say(sid, "user", summary)
        with self.connect() as conn:
            return copy(conn, live[-keep:])

    def archive(self, sid: str, *, by_sweep: bool = False) -> None:
        """Archive ``sid`` as a person does (``set_session_archived``: ``auto_archived`` cleared) or, with
        ``by_sweep``, as the idle sweep does (``_auto_archive_lineage``: ``auto_archived`` set; schema 31)."""
        with self.connect() as conn:
            conn.execute("UPDATE sessions SET archived = 1" + (", auto_archived = ?" if self._schema31 else "")
                         + " WHERE id = ?", (int(by_sweep), sid) if self._schema31 else (sid,))

    def start_rebuild(self) -> None:
        """What ``optimize-storage`` does first on a ``backfill`` file: the index emptied, every row there is now
        above the progress mark and at or below the high-water mark (not indexed)."""
        assert self.variant == "backfill"
        with self.connect() as conn:
            (top,) = conn.execute("SELECT COALESCE(max(id), 0) FROM messages").fetchone()
            conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('delete-all')")
            conn.execute("INSERT INTO messages_fts_trigram(messages_fts_trigram) VALUES ('delete-all')")
            conn.executemany("INSERT OR REPLACE INTO state_meta (key, value) VALUES (?, ?)",
                             [("fts_rebuild_high_water", str(top)), ("fts_rebuild_progress", "0")])
        self._rebuild_started = True

    def backfill(self, upto: int) -> None:
        """One chunk of the rebuild: rows up to ``upto`` indexed, the progress mark moved there."""
        with self.connect() as conn:
            (done,) = conn.execute("SELECT CAST(value AS INTEGER) FROM state_meta WHERE key = 'fts_rebuild_progress'").fetchone()
            conn.execute(
                "INSERT INTO messages_fts(rowid, content, tool_name, tool_calls) SELECT id, CASE WHEN role = 'tool' THEN "
                f"substr(COALESCE(content, ''), 1, {FTS_TOOL_CONTENT_PREFIX_CHARS}) ELSE content END, tool_name, tool_calls"
                " FROM messages WHERE id > ? AND id <= ?", (done, upto))
            conn.execute(
                "INSERT INTO messages_fts_trigram(rowid, content, tool_name) SELECT m.id, m.content, m.tool_name FROM messages m"
                f" JOIN sessions s ON s.id = m.session_id WHERE m.id > ? AND m.id <= ? AND m.role <> 'tool' AND {_trigram_session_sql('s')}",
                (done, upto))
            conn.execute("UPDATE state_meta SET value = ? WHERE key = 'fts_rebuild_progress'", (str(upto),))
