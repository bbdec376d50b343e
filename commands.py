"""Slash commands for the person at the Hermes prompt, and the two hooks.

``/history-search``, ``/history-recent``, ``/history-read``,
``/history-index``, ``/history-move`` and ``/history-help`` (``/history``
itself is a Hermes built-in, so plugins cannot register it).

Hermes calls a plugin command with the text after it and nothing else. Where
Hermes names the live conversation (the interactive terminal CLI after its
first message: ``ctx.dispatch_tool`` passes the CLI's agent), the commands
run the agent's tools for it, so its project is the conversation's and the
conversation itself is left out of what is searched. Elsewhere (the gateway,
the desktop, a CLI before its first message) they are scoped by Hermes'
working directory and say so. Every command answers readable text and never
raises.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Callable, Mapping
from typing import Any

from . import browse, handlers, indexing, move, paths, render, search, status, store, warm_up

INDEX_COMMAND_SECONDS = 60.0
HISTORY_COMMAND_LIMIT = 5
HISTORY_USAGE = (
    "usage: /history-search <query>  -- search the past sessions of this project "
    "(keywords, \"quoted phrases\", identifiers or a question). /history-help for more."
)
READ_USAGE = "usage: /history-read <session id> [message id] [--before N] [--after N] [--max-chars N]"
MOVE_USAGE = "usage: /history-move <project id, slug or name>   (/history-move --home: out of any project)"

Dispatch = Callable[..., Any]


def _command_cwd() -> str:
    """The folder commands are scoped by when no conversation is named: Hermes' working directory ("" if deleted)."""
    try:
        return os.getcwd()
    except OSError:
        return ""


def _answer(name: str, body: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``body()`` with the tool handlers' failure translation (a ``success: false`` dict, never raises)."""
    return json.loads(handlers.guarded(name, body))


def _for_conversation(dispatch: Dispatch, tool: str, args: dict[str, Any]) -> dict[str, Any] | None:
    """The tool's answer for the live conversation, or ``None`` when Hermes does not name one here."""
    try:
        raw = dispatch(tool, args, **{handlers.FROM_COMMAND: True})
        answer = json.loads(raw) if isinstance(raw, str) else dict(raw)
    except (TypeError, ValueError):
        return None
    if not answer.get("success") and answer.get("code") == "no_session":
        return None
    return answer


def make_search_command(dispatch: Dispatch) -> Callable[[str], str]:
    """``/history-search <query>``: the conversation's project (itself left out), else the working folder's."""

    def command_search(raw_args: str = "") -> str:
        query = (raw_args or "").strip()
        if not query:
            return HISTORY_USAGE
        args = {"query": query, "mode": "hybrid", "limit": HISTORY_COMMAND_LIMIT}
        answer = _for_conversation(dispatch, handlers.SEARCH_TOOL, args)
        if answer is not None:
            return render.render_search(answer, cwd=None)
        cwd = _command_cwd()
        if not cwd:
            return "history search: Hermes' working directory no longer exists; cd somewhere and retry"
        answer = _answer("/history-search", lambda: search.search_history(
            home=paths.hermes_home(), query=query, mode="hybrid", limit=HISTORY_COMMAND_LIMIT, cwd=cwd))
        return render.render_search(answer, cwd=cwd)

    return command_search


def make_recent_command(dispatch: Dispatch) -> Callable[[str], str]:
    """``/history-recent [N]``: the project's latest sessions, newest first."""

    def command_recent(raw_args: str = "") -> str:
        text = (raw_args or "").strip()
        limit = int(text) if text.isdigit() else browse.RECENT_DEFAULT
        answer = _for_conversation(dispatch, handlers.RECENT_TOOL, {"limit": limit})
        if answer is not None:
            return render.render_recent(answer, cwd=None)
        cwd = _command_cwd()
        if not cwd:
            return "history recent: Hermes' working directory no longer exists; cd somewhere and retry"
        answer = _answer("/history-recent", lambda: browse.recent_sessions(home=paths.hermes_home(), cwd=cwd, limit=limit))
        return render.render_recent(answer, cwd=cwd)

    return command_recent


def _read_args(raw_args: str) -> dict[str, Any] | str:
    """``{session_id, message_id?, before?, after?, max_chars?}`` from the command's text, or the usage line."""
    try:
        words = shlex.split(raw_args or "")
    except ValueError:
        return READ_USAGE
    args: dict[str, Any] = {}
    rest: list[str] = []
    i = 0
    while i < len(words):
        if words[i] in ("--before", "--after", "--max-chars") and i + 1 < len(words) and words[i + 1].isdigit():
            args[words[i][2:].replace("-", "_")] = int(words[i + 1])
            i += 2
            continue
        rest.append(words[i])
        i += 1
    if not rest or len(rest) > 2 or (len(rest) == 2 and not rest[1].isdigit()):
        return READ_USAGE
    args["session_id"] = rest[0]
    if len(rest) == 2:
        args["message_id"] = int(rest[1])
    return args


def make_read_command(dispatch: Dispatch) -> Callable[[str], str]:
    """``/history-read <session> [message] [--before N] [--after N] [--max-chars N]``: the messages around a hit."""

    def command_read(raw_args: str = "") -> str:
        args = _read_args(raw_args)
        if isinstance(args, str):
            return args
        answer = _for_conversation(dispatch, handlers.READ_TOOL, args)
        if answer is None:
            cwd = _command_cwd()
            if not cwd:
                return "history read: Hermes' working directory no longer exists; cd somewhere and retry"
            answer = _answer("/history-read", lambda: browse.read_around(
                home=paths.hermes_home(), cwd=cwd, target_session=str(args["session_id"]).removeprefix("@session:"),
                message_id=args.get("message_id"), before=int(args.get("before", browse.DEFAULT_AROUND)),
                after=int(args.get("after", browse.DEFAULT_AROUND)),
                max_chars=int(args.get("max_chars", browse.DEFAULT_CHARS)),
            ))
        return render.render_read(answer)

    return command_read


def command_index(raw_args: str = "") -> str:
    """``/history-index``: embed consented projects for up to a minute, then this folder's project's index status.

    Indexing works on every consented project of the profile; the status that
    follows is the project of Hermes' working directory.
    """
    answer = _answer("/history-index", lambda: indexing.index_projects(
        home=paths.hermes_home(), deadline=time.monotonic() + INDEX_COMMAND_SECONDS))
    first = render.render_index_run(answer)
    cwd = _command_cwd()
    if not cwd or answer.get("code") in ("no_db", "db_unreadable"):
        return first
    report = _answer("/history-index", lambda: status.index_status(home=paths.hermes_home(), cwd=cwd))
    return first + "\n" + render.render_index_status(report)


def make_move_command(dispatch: Dispatch) -> Callable[[str], str]:
    """``/history-move <project>`` over ``dispatch`` (``ctx.dispatch_tool``).

    The move itself is the ``project_session_move`` tool, called through
    Hermes' ``dispatch_tool`` so that the interactive CLI's agent (and with it
    the live session id) comes along. Where Hermes does not name the
    conversation (gateway, desktop, before the first message), the answer
    explains how to move instead: ask the agent. The target is checked first
    either way.
    """

    def command_move(raw_args: str = "") -> str:
        token = (raw_args or "").strip()
        if not token:
            return MOVE_USAGE + "\n" + _project_choices()
        if token == "--home":
            token = ""
        checked = _answer("/history-move", lambda: _check_target(token))
        if not checked.get("success"):
            return f"history move: {checked.get('error')}\n{_project_choices()}"
        label = checked["label"]
        try:
            raw = dispatch(handlers.MOVE_TOOL, {"project_id": token}, **{handlers.FROM_COMMAND: True})
            answer = json.loads(raw) if isinstance(raw, str) else dict(raw)
        except (TypeError, ValueError) as exc:
            return f"history move: unexpected answer from Hermes' tool dispatch: {exc}"
        if answer.get("success"):
            lines = [f"Moved this conversation to {label}; its working directory is now {answer.get('cwd')}.",
                     f"Sessions updated: {', '.join(answer.get('sessions_updated') or [])}"]
            lines += [f"Warning: {w}" for w in answer.get("warnings") or []]
            return "\n".join(lines)
        if answer.get("code") == "no_session":
            ask = "to Home (out of any project)" if not token else f"to {label}"
            return (
                f"history move: {answer.get('error')}.\n"
                f"To move it, ask the agent in this conversation, e.g. \"move this conversation {ask}\": "
                f"it calls the {handlers.MOVE_TOOL} tool with its own session id. The target {label} exists."
            )
        return f"history move: {answer.get('error') or answer}"

    return command_move


def _check_target(token: str) -> dict[str, Any]:
    target, folder = move.resolve_move_target(paths.hermes_home(), token)
    label = "Home" if target is None else f"project {target.name} ({folder})"
    return {"success": True, "label": label}


def _project_choices() -> str:
    """One line naming the profile's active explicit projects (or saying there are none)."""
    listing = store.load_projects(paths.hermes_home())
    names = [f"{p.name} ({p.slug or p.id})" for p in listing.projects if not p.archived]
    if not names:
        return "No projects in projects.db (create one with `hermes project create`)."
    return "Projects: " + "; ".join(names)


def command_help(raw_args: str = "") -> str:
    """``/history-help``: version, commands, tools, command line, limits, and why semantic search cannot run (if so)."""
    config = status.semantic_config(paths.hermes_home())
    blocked = config.note if config.status == "unavailable" else None
    return render.render_help(status.plugin_version(), command_line=status.command_line_hint(), semantic=blocked)


def on_session_start(session_id: str = "", **_: Any) -> None:
    """Hook ``on_session_start``: load the vector leg in the background (returns at once).

    Only after consent, and never embedding or sending anything: see
    :func:`warm_up.warm_up`. Never raises.
    """
    warm_up.warm_up(paths.hermes_home(), session_id=session_id or "")


def on_turn(session_id: str = "", **_: Any) -> None:
    """Hook ``pre_llm_call``: the same warm-up for a resumed conversation (no start hook fires), once per process.

    Returns ``None``: Hermes would inject a returned value into the turn.
    """
    warm_up.warm_up(paths.hermes_home(), first_only=True, session_id=session_id or "")


#: (name, factory taking ``ctx.dispatch_tool`` or a plain handler, description, argument hint)
COMMANDS: tuple[tuple[str, Any, str, str | None], ...] = (
    ("history-search", make_search_command, "Search the past sessions of this project", "<query>"),
    ("history-recent", make_recent_command, "This project's latest sessions, newest first", "[N]"),
    ("history-read", make_read_command, "Read the messages around a search hit", "<session> [message]"),
    ("history-index", command_index,
     "Embed the past messages of projects you consented to, and show this project's index status", None),
    ("history-move", make_move_command, "Move this conversation to another project", "<project>"),
    ("history-help", command_help, "project-history-recall: commands, tools, command line and limits", None),
)

#: The factories among COMMANDS: they are given Hermes' ``ctx.dispatch_tool``.
FACTORIES = (make_search_command, make_recent_command, make_read_command, make_move_command)


def handlers_for(dispatch: Dispatch) -> Mapping[str, Callable[[str], str]]:
    """Every command's handler, the factories bound to ``dispatch``."""
    return {name: (make(dispatch) if make in FACTORIES else make) for name, make, _, _ in COMMANDS}
