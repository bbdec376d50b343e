"""Slash commands for the person at the Hermes prompt, and the two hooks.

The commands are :data:`COMMANDS` (``/history`` itself is a Hermes built-in,
so plugins cannot register it).

Hermes calls a plugin command with the text after it and nothing else. Where
the live conversation can be told (the interactive terminal CLI after its
first message: ``ctx.dispatch_tool`` passes the CLI's agent; the terminal UI's
or desktop's backend, for the conversation that sent the command,
:func:`_served_conversation`), the commands run the agent's tools for it, so
its project is the conversation's and the conversation itself is left out of
what is searched. Elsewhere (a CLI before its first message) they are scoped
by Hermes' working directory and say so; in the messaging gateway, whose folder is no
chat's project, they answer nothing of it. Every command answers readable text and never raises. Their arguments
follow ``command_args.py``'s grammar.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import sys
import time
import types
from collections.abc import Callable, Mapping
from typing import Any

from . import command_args, errors, handlers, indexing, move, paths, render, session_rows, status, store, warm_up
from .command_args import ArgumentError, Grammar

INDEX_COMMAND_SECONDS = 60.0
HISTORY_COMMAND_LIMIT = 5
HISTORY_ABOUT = (
    "  -- search the past sessions of this project (keywords, \"quoted phrases\", identifiers or a question). "
    "/history-help for more."
)

Dispatch = Callable[..., Any]


def _command_cwd() -> str:
    """The folder commands are scoped by when no conversation is named: Hermes' working directory ("" if deleted)."""
    try:
        return os.getcwd()
    except OSError:
        return ""


def _refused(grammar: Grammar, exc: ArgumentError) -> str:
    """What a command answers to arguments it cannot use: the reason, naming what was not understood, then the usage."""
    return f"{grammar.command}: {exc}\n{grammar.usage()}"


def _answer(name: str, body: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``body()`` with the tool handlers' failure translation (a ``success: false`` dict, never raises)."""
    return json.loads(handlers.guarded(name, body))


def _in_gateway() -> bool:
    """Whether this is Hermes' messaging gateway (``gateway/run.py`` marks its process so): a chat's commands come
    with no conversation, and the process's working folder is wherever the gateway was started, not the chat's."""
    return os.environ.get("_HERMES_GATEWAY") == "1"


#: What a folder-scoped command answers in the messaging gateway.
IN_A_CHAT = ("in a chat, Hermes does not tell plugin commands which conversation they come from, and the gateway's "
             "folder is not the chat's project, so this command answers nothing here. Ask the agent instead (\"search "
             "our history for ...\"): it searches this conversation's project, when the conversation has one.")


def _backend_session() -> tuple[bool, str]:
    """Whether Hermes' terminal UI backend runs this command (a frame of ``tui_gateway``'s on the stack: its
    ``slash.exec`` or ``command.dispatch`` calls a plugin command in the RPC's own thread), and the conversation it
    runs it for when that frame holds it (its ``session``, the asking one's record; ``""`` when it holds none)."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        if str(frame.f_globals.get("__name__") or "").startswith("tui_gateway."):
            session = frame.f_locals.get("session")
            return True, str(session.get("session_key") or "").strip() if isinstance(session, dict) else ""
        frame = frame.f_back
    return False, ""


def _served_conversation() -> str:
    """The conversation Hermes' terminal UI or desktop runs this command for, ``""`` when it cannot be told or state.db
    does not hold it.

    Their backend (``tui_gateway.server``) runs a plugin command in its own process, in its own working folder, with
    no CLI reference for ``dispatch_tool`` to pass: the conversation is the one whose request runs it (the backend's
    frame on the stack, :func:`_backend_session`), else the one the backend serves when it serves one. A command the
    backend does not run finds none, though the process hosts a backend: the messaging gateway, which hosts the
    dashboard's chat, runs a chat's commands itself. A profile whose plugins the backend did not load runs
    commands in a worker of the conversation's own (``python -m tui_gateway.slash_worker --session-key ID``),
    which exports its session id as ``HERMES_SESSION_KEY``.
    """
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    backend, asking = _backend_session()
    if getattr(spec, "name", "") == "tui_gateway.slash_worker":
        keys = {os.environ.get("HERMES_SESSION_KEY", "").strip()}
    elif asking:
        keys = {asking}
    elif backend:
        served = getattr(sys.modules.get("tui_gateway.server"), "_sessions", None)
        keys = {str(s.get("session_key") or "") for s in list(served.values()) if isinstance(s, dict)} \
            if isinstance(served, dict) else set()
    else:
        keys = set()
    key = keys.pop() if len(keys) == 1 else ""
    if not key:
        return ""
    try:
        conn = store.open_state_db(paths.hermes_home())
    except errors.StoreError:
        return ""
    try:
        return key if session_rows.session_info(conn, key) is not None else ""
    except sqlite3.DatabaseError:
        return ""
    finally:
        conn.close()


def _for_conversation(dispatch: Dispatch, tool: str, args: dict[str, Any]) -> dict[str, Any] | None:
    """The tool's answer for the live conversation (the CLI's agent, or the conversation a slash worker serves), or
    ``None`` when Hermes does not name one here."""
    try:
        raw = dispatch(tool, args, **{handlers.FROM_COMMAND: True})
        answer = json.loads(raw) if isinstance(raw, str) else dict(raw)
    except (TypeError, ValueError):
        return None
    if not answer.get("success") and answer.get("code") == "no_session":
        served = _served_conversation()
        if not served:
            return None
        handler = next(h for t, _, h, _ in handlers.TOOLS if t == tool)
        answer = json.loads(handler(args, **{handlers.FROM_COMMAND: True, "session_id": served}))
    return answer


def _scoped(dispatch: Dispatch, name: str, tool: str, args: dict[str, Any],
            render_answer: Callable[[Mapping[str, Any], str | None], str]) -> str:
    """The tool's answer for the live conversation, else for Hermes' working directory (said in its first line);
    in the messaging gateway, :data:`IN_A_CHAT`."""
    answer = _for_conversation(dispatch, tool, args)
    cwd = None
    if answer is None:
        if _in_gateway():
            return f"{name}: {IN_A_CHAT}"
        cwd = _command_cwd()
        if not cwd:
            return f"{name}: Hermes' working directory no longer exists; cd somewhere and retry"
        handler = next(h for t, _, h, _ in handlers.TOOLS if t == tool)
        answer = json.loads(handler(args, **{handlers.FROM_COMMAND: True, handlers.IN_FOLDER: cwd}))
    return render_answer(answer, cwd)


def _tool_command(tool: str, grammar: Grammar, parse_args: Callable[[str], dict[str, Any]],
                  render_answer: Callable[[Mapping[str, Any], str | None], str], *, empty: str | None = None,
                  ) -> Callable[[Dispatch], Callable[[str], str]]:
    """A factory of the slash command that answers with ``tool`` (:func:`_scoped`), its arguments parsed by
    ``parse_args`` (refused with ``grammar``'s usage); ``empty`` answers a command given no arguments at all
    (``None``: they are optional and parsed)."""
    name = grammar.command.lstrip("/").replace("-", " ")

    def make(dispatch: Dispatch) -> Callable[[str], str]:
        def command(raw_args: str = "") -> str:
            if empty is not None and not (raw_args or "").strip():
                return empty
            try:
                args = parse_args(raw_args)
            except ArgumentError as exc:
                return _refused(grammar, exc)
            return _scoped(dispatch, name, tool, args, render_answer)

        return command

    return make


#: ``/history-search <query> [flags]``: the conversation's project (itself left out), else the working folder's.
make_search_command = _tool_command(
    handlers.SEARCH_TOOL, command_args.SEARCH,
    lambda raw: command_args.search_args(raw, default_limit=HISTORY_COMMAND_LIMIT),
    lambda answer, cwd: render.render_search(answer, cwd=cwd), empty=command_args.SEARCH.usage() + "\n" + HISTORY_ABOUT)
#: ``/history-recent [N] [flags]``: the project's latest sessions, newest first.
make_recent_command = _tool_command(handlers.RECENT_TOOL, command_args.RECENT, command_args.recent_args,
                                    lambda answer, cwd: render.render_recent(answer, cwd=cwd))
#: ``/history-read <session> [message] [--before N] [--after N] [--max-chars N]``: the messages around a hit.
make_read_command = _tool_command(handlers.READ_TOOL, command_args.READ, command_args.read_args,
                                  lambda answer, _: render.render_read(answer), empty=command_args.READ.usage())


def command_index(raw_args: str = "") -> str:
    """``/history-index``: embed consented projects for up to a minute, then this folder's project's index status.

    The folder is Hermes' working directory. Takes no arguments.
    """
    try:
        command_args.no_args(command_args.INDEX, raw_args)
    except ArgumentError as exc:
        return _refused(command_args.INDEX, exc)
    answer = _answer("/history-index", lambda: indexing.index_projects(
        home=paths.hermes_home(), deadline=time.monotonic() + INDEX_COMMAND_SECONDS))
    first = render.render_index_run(answer)
    cwd = "" if _in_gateway() else _command_cwd()  # the gateway's folder is not a chat's project
    if not cwd or answer.get("code") in ("no_db", "db_unreadable"):
        return first
    report = _answer("/history-index", lambda: status.index_status(home=paths.hermes_home(), cwd=cwd))
    said = str(answer.get("error") or answer.get("message") or "")
    return first + "\n" + render.render_index_status(report, said=said)


def _move_target(token: str) -> str:
    """A folder written from Hermes' working directory (``.``, ``./app``, ``../app``) made absolute; else ``token``."""
    if token in (".", "..") or token.startswith(("./", "../")):
        cwd = _command_cwd()
        return os.path.normpath(os.path.join(cwd, token)) if cwd else token
    return token


def make_move_command(dispatch: Dispatch) -> Callable[[str], str]:
    """``/history-move <project | folder>`` (or ``--home``) over ``dispatch`` (``ctx.dispatch_tool``).

    The move is the ``project_session_move`` tool, called through ``dispatch``
    so that the interactive CLI's agent (and the live session id) comes along;
    where Hermes names no conversation, the answer says to ask the agent. The
    target is checked first either way.
    """

    def command_move(raw_args: str = "") -> str:
        try:
            given = command_args.move_args(raw_args)
        except ArgumentError as exc:
            return _refused(command_args.MOVE, exc) + "\n" + _move_choices()
        if given is None:
            return command_args.MOVE.usage() + "\n" + _move_choices()
        token = _move_target(given)
        checked = _answer("/history-move", lambda: _check_target(token))
        if not checked.get("success"):  # the error says what a target is: only the targets follow
            close = _close_targets(token) if checked.get("code") == "project_not_found" else ""
            return f"history move: {checked.get('error')}\n{close}{_move_choices(say_missing_db=False)}"
        label = checked["label"]
        answer = _for_conversation(dispatch, handlers.MOVE_TOOL, {"project_id": token})
        if answer is None:
            answer = {"success": False, "code": "no_session", "error": handlers.NO_SESSION_COMMAND}
        if answer.get("success"):
            here, project = _command_cwd(), answer.get("project") or {}
            after = ("it is in no project now, so its searches find nothing" if project.get("kind") == "home"
                     else "its searches look in that project now")
            lines = [f"Moved this conversation to {_target_label(project, str(answer.get('cwd')))}: Hermes records "
                     f"its folder as {answer.get('cwd')}, and {after}.",
                     f"This terminal stays in {here or 'its folder'} (commands the agent runs still start there); "
                     "resuming the conversation later (/resume, hermes --resume) starts in the new folder.",
                     f"Sessions updated: {', '.join(answer.get('sessions_updated') or [])}"]
            left = answer.get("moved_from")  # the project it left: what moves it back
            if isinstance(left, Mapping):
                lines.append(f"It was in {render.project_label(left)}; to move it back: {_move_back(left)}")
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


def _move_back(project: Mapping[str, Any]) -> str:
    """The command that moves a conversation into ``project`` (a search answer's shape) again."""
    if project.get("kind") == "explicit":
        return f"/history-move {project.get('id')}"
    if project.get("kind") == "auto":
        return f"/history-move {project.get('root') or project.get('key')}"
    return "/history-move --home"


def _target_label(project: Mapping[str, Any], folder: str) -> str:
    """``project Payments (/src/pay)``, ``git repo alpha (/src/alpha)`` or ``Home``."""
    if project.get("kind") == "explicit":
        return f"project {project.get('name')} ({folder})"
    if project.get("kind") == "auto":
        return f"git repo {project.get('name')} ({folder})"
    return "Home"


def _check_target(token: str) -> dict[str, Any]:
    target = move.resolve_move_target(paths.hermes_home(), token)
    return {"success": True, "label": _target_label(target.project.to_json(), target.folder)}


def _close_targets(token: str) -> str:
    """``Did you mean …?`` with the command for each of :func:`move.close_targets`, then a newline; ``""`` when
    none is close."""
    shown = [f"{what} (/history-move {given})" for what, given in move.close_targets(paths.hermes_home(), token)]
    return f"Did you mean {' or '.join(shown)}?\n" if shown else ""


def _move_choices(*, say_missing_db: bool = True) -> str:
    """The targets this profile offers: its active projects, the git repos that hold sessions, and Home."""
    home = paths.hermes_home()
    listing = store.projects_as_known(home)  # choices: a transient error said, not failed
    lines = []
    names = [f"{p.name} ({p.slug or p.id})" for p in listing.projects if not p.archived]
    if names:
        lines.append("Projects: " + "; ".join(names))
    elif not listing.available and say_missing_db:
        lines.append(listing.note or "This profile has no projects.db (`hermes project create` makes one).")
    repos = [f"{r.root}" for r in move.known_repos(home)]
    if repos:
        lines.append("Git repos with sessions (move by folder): " + "; ".join(repos))
    lines.append("Or --home: out of any project.")
    return "\n".join(lines)


def command_help(raw_args: str = "") -> str:
    """``/history-help``: version, commands, tools, command line, limits, why semantic search cannot run (if so),
    and which copy Hermes loads when two are installed. Takes no arguments (any are named and ignored)."""
    home = paths.hermes_home()
    config = status.semantic_config(home)
    blocked = config["note"] if config["status"] == "unavailable" else None
    text = render.render_help(status.plugin_version(), command_line=status.command_line_hint(), semantic=blocked,
                              install=status.install_copies(home)["note"])
    given = (raw_args or "").strip()
    if given:
        text = f"/history-help takes no arguments (ignored: {errors.echo(given)})\n\n{text}"
    return text


def on_session_start(session_id: str = "", **_: Any) -> None:
    """Hook ``on_session_start``: load the vector leg in the background (:func:`warm_up.warm_up`); never raises."""
    warm_up.warm_up(paths.hermes_home(), session_id=session_id or "")


def on_turn(session_id: str = "", **_: Any) -> None:
    """Hook ``pre_llm_call``: the same warm-up for a resumed conversation (no start hook fires), once per process.

    Returns ``None``: Hermes would inject a returned value into the turn.
    """
    warm_up.warm_up(paths.hermes_home(), first_only=True, session_id=session_id or "")


def _for_terminal(make: Callable[[Dispatch], Callable[[str], str]]) -> Callable[[Dispatch], Callable[[str], str]]:
    """The factory ``make`` whose command answers with its control characters escaped (``render.for_terminal``): an
    answer shows stored history and echoes what was typed, and Hermes prints it to the terminal as it is."""

    def made(dispatch: Dispatch) -> Callable[[str], str]:
        command = make(dispatch)

        @functools.wraps(command)
        def shown(raw_args: str = "") -> str:
            return render.for_terminal(command(raw_args))

        return shown

    return made


#: (name, factory of the handler given ``ctx.dispatch_tool``, description, argument hint)
COMMANDS: tuple[tuple[str, Callable[[Dispatch], Callable[[str], str]], str, str | None], ...] = tuple(
    (name, _for_terminal(make), description, hint) for name, make, description, hint in (
        ("history-search", make_search_command, "Search the past sessions of this project",
         "<query> [--mode M] [--limit N]"),
        ("history-recent", make_recent_command, "This project's latest sessions, newest first", "[N]"),
        ("history-read", make_read_command, "Read the messages around a search hit", "<session> [message] [--before N]"),
        ("history-index", lambda _dispatch: command_index,
         "Embed the past messages of projects you consented to, and show this project's index status", None),
        ("history-move", make_move_command, "Move this conversation to a project or a git repo's folder",
         "<project | folder>"),
        ("history-help", lambda _dispatch: command_help,
         "project-history-recall: commands, tools, command line and limits", None),
    )
)
