"""The tools the agent calls: their schemas, argument checks and handlers (not named tools.py: that is Hermes' package).

Five tools (:data:`TOOLS`) in the plugin toolset ``project_history_recall``.
The schemas are sent with every model request of every conversation, so
their words are few (the full reference: ``docs/tools.md``).

Handlers validate arguments, call one service, and turn every failure into
the failure table's JSON: ``{"success": false, "error", "code"}``, never a
traceback (this is the one place errors are translated for the agent).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any

from . import browse, errors, gate, move, paths, render, search
from .filters import SEARCH_ROLES, Filters, make_filters

logger = logging.getLogger(__name__)

TOOLSET = "project_history_recall"
SEARCH_TOOL = "project_history_search"
READ_TOOL = "project_history_read"
RECENT_TOOL = "project_history_recent"
MOVE_TOOL = "project_session_move"
CONSENT_TOOL = "project_history_semantic_consent"

_TEXT = {"type": "string"}
_INT = {"type": "integer"}

SEARCH_SCHEMA: dict[str, Any] = {
    "name": SEARCH_TOOL,
    "description": (
        "Search THIS project's earlier sessions for what was decided or done; pass keywords or the user's question "
        f"as is. Hits give session_id, message_id for {READ_TOOL}; no topic (where did we leave off?): {RECENT_TOOL}. "
        "since/until: YYYY-MM-DD or 7d; more: cursor=next_cursor. semantic_status consent_required: tell the user "
        f"semantic_note; call {CONSENT_TOOL} only if they agree."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "query": _TEXT,
            "mode": {"type": "string", "enum": list(search.MODES)},
            "limit": _INT,
            "since": _TEXT,
            "until": _TEXT,
            "role": {"type": "string", "enum": list(SEARCH_ROLES)},
            "cursor": _TEXT,
        },
        "required": ["query"],
    },
}

READ_SCHEMA: dict[str, Any] = {
    "name": READ_TOOL,
    "description": (f"Messages around a hit (this project only; before/after up to {browse.MAX_AROUND}). query: the "
                    "search's, to show the part of a long hit that matched; offset: a long hit's part from that character"),
    "parameters": {
        "type": "object",
        "properties": {"session_id": _TEXT, "message_id": _INT, "before": _INT, "after": _INT, "query": _TEXT,
                       "offset": _INT},
        "required": ["session_id"],
    },
}

RECENT_SCHEMA: dict[str, Any] = {
    "name": RECENT_TOOL,
    "description": "This project's latest sessions, newest first (title, first ask, last answer); args as the search's.",
    "parameters": {
        "type": "object",
        "properties": {"limit": _INT, "since": _TEXT, "until": _TEXT, "cursor": _TEXT},
    },
}

MOVE_SCHEMA: dict[str, Any] = {
    "name": MOVE_TOOL,
    "description": "Move this conversation to another project, on the user's word.",
    "parameters": {
        "type": "object",
        "properties": {"project_id": {"type": "string", "description": "id, slug, name, or a git repo's absolute path; '' = none"}},
        "required": ["project_id"],
    },
}

CONSENT_SCHEMA: dict[str, Any] = {
    "name": CONSENT_TOOL,
    "description": "Save the user's answer on semantic search, once given.",
    "parameters": {
        "type": "object",
        "properties": {
            "decision": {"type": "string", "enum": ["allow", "decline"]},
            "projects": {"type": "string", "enum": ["this", "all"]},
        },
        "required": ["decision"],
    },
}


class BadArgument(ValueError):
    """An argument the model must fix; reported with code ``bad_argument``."""


def _json(payload: dict[str, Any]) -> str:
    """Readable JSON (CJK kept as is); escaped instead if it holds lone surrogates."""
    text = json.dumps(payload, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(payload)
    return text


def _error(message: str, code: str, **extra: Any) -> str:
    return _json({"success": False, "error": message, "code": code, **extra})


def _object(args: Any) -> Mapping[str, Any]:
    if not isinstance(args, Mapping):
        raise BadArgument(f"arguments must be an object, got {type(args).__name__}")
    return args


def _text_arg(args: Mapping[str, Any], name: str, *, required: bool) -> str | None:
    value = args.get(name)
    if value is None:
        if required:
            raise BadArgument(f"'{name}' is required")
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise BadArgument(f"'{name}' must be a string, got {type(value).__name__}")
    return str(value)


def _int_arg(args: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    """An integer argument clamped to ``low..high`` (a numeric string is accepted)."""
    raw = args.get(name)
    if raw is None or raw == "":
        return default
    if isinstance(raw, bool):
        raise BadArgument(f"'{name}' must be an integer")
    try:
        value = int(float(raw))
    except (TypeError, ValueError, OverflowError):
        raise BadArgument(f"'{name}' must be an integer, got {errors.echo(repr(raw))}") from None
    return max(low, min(high, value))


def _filters(args: Mapping[str, Any], *, role: bool) -> Filters:
    try:
        return make_filters(
            since=_text_arg(args, "since", required=False) or None,
            until=_text_arg(args, "until", required=False) or None,
            role=(_text_arg(args, "role", required=False) or None) if role else None,
        )
    except ValueError as exc:
        raise BadArgument(str(exc)) from None


def _cursor(args: Mapping[str, Any]) -> str | None:
    return (_text_arg(args, "cursor", required=False) or "").strip() or None


def parse_search_args(args: Any) -> dict[str, Any]:
    """Validated search arguments from raw tool arguments, as :func:`search.search_history` takes them (``query``,
    ``mode``, ``limit``, ``filters``, ``cursor``); raises :class:`BadArgument`.

    ``mode`` defaults to ``hybrid`` (case-insensitive); ``limit`` is clamped to
    1 to ``search.MAX_LIMIT``; ``cursor`` is passed through (the search checks it
    belongs to the same search).
    """
    args = _object(args)
    query = _text_arg(args, "query", required=True) or ""
    if not query.strip():
        raise BadArgument("'query' is empty: pass the words or question to search for")
    mode = (_text_arg(args, "mode", required=False) or "hybrid").strip().lower()
    if mode not in search.MODES:
        raise BadArgument(f"'mode' must be one of {', '.join(search.MODES)}, got {errors.echo(repr(mode))}")
    limit = _int_arg(args, "limit", search.DEFAULT_LIMIT, 1, search.MAX_LIMIT)
    return {"query": query, "mode": mode, "limit": limit, "filters": _filters(args, role=True), "cursor": _cursor(args)}


def _session_id(kwargs: Mapping[str, Any]) -> str:
    """The caller's session id, stripped; ``""`` when none was passed.

    Raises :class:`errors.SessionNotFound` for an id that is not valid UTF-8
    (lone surrogates): no session has it, and binding it as a parameter would
    raise ``UnicodeEncodeError``.
    """
    value = kwargs.get("session_id")
    if not isinstance(value, str):
        return ""
    value = value.strip()
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise errors.SessionNotFound(f"session not found in state.db: {errors.echo(value)}") from None
    return value


_NO_SESSION = (
    "no current session id was passed to this tool (some callers, such as execute_code or "
    "plugin dispatch, do not pass one); call it from the conversation itself"
)


def _asker(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Whose project a call looks in: ``{cwd}`` for a slash command Hermes names no conversation for (the folder
    it passes as :data:`IN_FOLDER`), else ``{session_id}`` (see :func:`_current_session`)."""
    folder = kwargs.get(IN_FOLDER) if kwargs.get(FROM_COMMAND) else None
    return {"cwd": folder} if isinstance(folder, str) and folder else {"session_id": _current_session(kwargs)}


def _current_session(kwargs: Mapping[str, Any]) -> str:
    """The asking conversation: the agent loop's ``session_id``, or the live CLI's for a slash command.

    ``PluginContext.dispatch_tool`` (Hermes 0.19) passes ``parent_agent``, the
    interactive CLI's ``AIAgent``, only in a CLI (``HermesCLI.run`` sets the
    reference) after its first message; its ``session_id`` follows ``/new``,
    ``/resume`` and compression. Raises :class:`errors.NoSession` when neither names one.
    """
    session_id = _session_id(kwargs)
    if not session_id and kwargs.get(FROM_COMMAND):
        value = getattr(kwargs.get("parent_agent"), "session_id", None)
        session_id = value.strip() if isinstance(value, str) else ""
    if not session_id:
        raise errors.NoSession(NO_SESSION_COMMAND if kwargs.get(FROM_COMMAND) else _NO_SESSION)
    return session_id


#: The keyword the slash commands pass through ``ctx.dispatch_tool``: only then
#: is the session taken from ``parent_agent`` (the agent loop passes ``session_id``).
FROM_COMMAND = "phr_slash_command"
#: With :data:`FROM_COMMAND`, where Hermes names no conversation: the folder the command is scoped by.
IN_FOLDER = "phr_in_folder"

NO_SESSION_COMMAND = (
    "this slash command cannot tell which conversation is yours here: Hermes passes plugin commands "
    "only the text after the command, and names the live conversation only in the interactive "
    "terminal CLI after its first message and in the terminal UI"
)


def guarded(tool: str, body: Callable[[], dict[str, Any]]) -> str:
    """Run ``body`` and always answer JSON with ``success`` (the failure table's translation)."""
    try:
        return _json(body())
    except BadArgument as exc:
        return _error(str(exc), "bad_argument")
    except errors.StoreError as exc:
        return _error(str(exc), exc.code, **{k: v for k, v in exc.details.items() if k != "path"})
    except sqlite3.DatabaseError as exc:
        logger.warning("%s: database error: %s", tool, exc)
        return _error(f"session database error: {exc}", "db_error", temporary=errors.temporary(exc))
    except Exception as exc:  # the tool boundary: never a traceback to the model
        logger.exception("%s failed", tool)
        return _error(f"internal error in {tool}: {type(exc).__name__}", "internal_error")


def handle_search(args: Any, **kwargs: Any) -> str:
    """Tool handler for ``project_history_search`` (JSON string, never raises)."""

    def body() -> dict[str, Any]:
        return search.search_history(home=paths.hermes_home(), **_asker(kwargs), **parse_search_args(args))

    return guarded(SEARCH_TOOL, body)


def handle_read(args: Any, **kwargs: Any) -> str:
    """Tool handler for ``project_history_read`` (JSON string, never raises)."""

    def body() -> dict[str, Any]:
        given = _object(args)
        target = (_text_arg(given, "session_id", required=True) or "").strip().removeprefix("@session:")
        if not target:
            raise BadArgument("'session_id' is empty: pass the session_id of a search result")
        message = _int_arg(given, "message_id", 0, -(2**63), 2**63 - 1)  # 0 when none is given
        if message < 1 and given.get("message_id") not in (None, ""):
            raise BadArgument(f"'message_id' must be a message_id from a search result (1 or more), got {errors.echo(repr(given['message_id']))}")
        return browse.read_around(
            home=paths.hermes_home(), **_asker(kwargs), target_session=target, message_id=message or None,
            before=_int_arg(given, "before", browse.DEFAULT_AROUND, 0, browse.MAX_AROUND),
            after=_int_arg(given, "after", browse.DEFAULT_AROUND, 0, browse.MAX_AROUND),
            max_chars=_int_arg(given, "max_chars", browse.DEFAULT_CHARS, browse.MIN_CHARS, browse.MAX_CHARS),
            query=_text_arg(given, "query", required=False) or "",
            offset=_int_arg(given, "offset", 0, 0, 2**63 - 1) if given.get("offset") not in (None, "") else None,
        )

    return guarded(READ_TOOL, body)


def handle_recent(args: Any, **kwargs: Any) -> str:
    """Tool handler for ``project_history_recent`` (JSON string, never raises)."""

    def body() -> dict[str, Any]:
        given = _object(args if args is not None else {})
        return browse.recent_sessions(
            home=paths.hermes_home(), **_asker(kwargs),
            limit=_int_arg(given, "limit", browse.RECENT_DEFAULT, 1, browse.RECENT_MAX),
            filters=_filters(given, role=False), cursor=_cursor(given),
        )

    return guarded(RECENT_TOOL, body)


def handle_move(args: Any, **kwargs: Any) -> str:
    """Tool handler for ``project_session_move`` (JSON string, never raises)."""

    def body() -> dict[str, Any]:
        token = _text_arg(_object(args), "project_id", required=True) or ""
        if token and not token.strip():  # Home is "" (documented); spaces alone are a target lost on the way
            raise BadArgument("'project_id' is blank: pass a project's id, slug or name, or a folder; '' (empty) "
                              "moves to Home")
        outcome = move.move_session(paths.hermes_home(), _current_session(kwargs), token)
        _follow_in_desktop(kwargs.get("task_id"), outcome)
        answer: dict[str, Any] = {
            "success": True,
            "project": outcome.project.to_json(),
            "cwd": outcome.cwd,
            "message": f"Moved to {render.project_label(outcome.project.to_json())}, cwd now {outcome.cwd}",
            "git_branch": outcome.git_branch or None,
            "git_repo_root": outcome.git_repo_root or None,
            "sessions_updated": list(outcome.session_ids),
            "moved_from": outcome.left.to_json(),
        }
        if outcome.warnings:
            answer["warnings"] = list(outcome.warnings)
        return answer

    return guarded(MOVE_TOOL, body)


def handle_consent(args: Any, **kwargs: Any) -> str:
    """Tool handler for ``project_history_semantic_consent`` (JSON string, never raises)."""

    def body() -> dict[str, Any]:
        given = _object(args)
        decision = (_text_arg(given, "decision", required=True) or "").strip().lower()
        if decision not in ("allow", "decline"):
            raise BadArgument("'decision' must be 'allow' or 'decline'")
        projects = (_text_arg(given, "projects", required=False) or "this").strip().lower()
        if projects not in ("this", "all"):
            raise BadArgument("'projects' must be 'this' or 'all'")
        session_id = _session_id(kwargs)
        if not session_id and not (decision == "decline" or projects == "all"):
            raise errors.NoSession(_NO_SESSION)
        return gate.record_consent(home=paths.hermes_home(), session_id=session_id, decision=decision, projects=projects)

    return guarded(CONSENT_TOOL, body)


def _follow_in_desktop(task_id: Any, outcome: move.MoveOutcome) -> None:
    """Let the desktop/TUI re-anchor its live session, as ``project_switch`` does; elsewhere (no GUI callback
    in ``tools.project_tools``) nothing happens."""
    try:
        from tools import project_tools
    except ImportError:
        return
    callback = getattr(project_tools, "_workspace_callback", None)
    if callable(callback) and isinstance(task_id, str) and task_id:
        name = outcome.project.name or "Home"
        try:
            callback(task_id, outcome.cwd, name)
        except Exception:  # a GUI callback must not fail the move that already happened
            logger.warning("desktop workspace callback failed", exc_info=True)


def check_available() -> bool:
    """The tools are offered when the profile's HERMES_HOME exists."""
    return paths.hermes_home().exists()


#: (name, schema, handler, emoji) of every tool, in the order they are registered.
TOOLS: tuple[tuple[str, dict[str, Any], Callable[..., str], str], ...] = (
    (SEARCH_TOOL, SEARCH_SCHEMA, handle_search, "🔎"),
    (READ_TOOL, READ_SCHEMA, handle_read, "📖"),
    (RECENT_TOOL, RECENT_SCHEMA, handle_recent, "🕘"),
    (MOVE_TOOL, MOVE_SCHEMA, handle_move, "📁"),
    (CONSENT_TOOL, CONSENT_SCHEMA, handle_consent, "🔐"),
)
