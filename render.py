"""Readable text for people: one renderer shared by the slash commands and the CLI, so they cannot drift apart.

Pure: dicts in (the JSON answers of the services and ``status.py``), strings
out; no IO, no imports from the rest of the plugin.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

COMMANDS_HELP = (
    ("/history-search <query> [--mode M] [--limit N] [--since WHEN] [--until WHEN] [--role R]",
     "search this project's past sessions (keywords, \"phrases\" or a question; hybrid, 5 sessions by default)"),
    ("/history-recent [N] [--limit N] [--since WHEN] [--until WHEN]", "this project's latest sessions, newest first"),
    ("/history-read <session> [message] [--before N] [--after N] [--max-chars N] [--query WORDS] [--offset N]",
     "read the messages around a hit"),
    ("/history-index", "embed consented projects' messages for up to a minute, then show this project's index status"),
    ("/history-move <project | folder>", "move this conversation to a project, or a git repo's folder (--home: out of any project)"),
    ("/history-help", "this help"),
)
COMMAND_NOTES = (
    "Flags go anywhere, as --flag VALUE or --flag=VALUE; -- ends them (a query word may then start with --).",
    "WHEN: YYYY-MM-DD, an ISO date-time, or an age (12h, 7d, 2w). Anything not understood is refused, with the usage.",
)
TOOLS_HELP = (
    ("project_history_search(query, mode, limit, ...)", "the agent's scoped search of this conversation's project"),
    ("project_history_read(session_id, message_id, ...)", "the agent reads around a hit, same project only"),
    ("project_history_recent(limit, since, ...)", "the agent lists the project's latest sessions"),
    ("project_session_move(project_id)", "the agent moves this conversation to a project or a git repo's folder ('' = Home)"),
    ("project_history_semantic_consent(decision, projects)", "records your yes or no to semantic search"),
)
CLI_HELP = (
    ("search QUERY [--cwd DIR] [--mode M] [--limit N] [--since WHEN] [--until WHEN] [--role R] [--json]",
     "the same search from a shell"),
    ("recent [--cwd DIR] [--limit N] [--since WHEN] [--until WHEN] [--json]", "the folder's project's latest sessions"),
    ("projects [--json]", "projects and how many sessions attribution gives each"),
    ("index [--json]", "embed every consented project, with a progress bar"),
    ("status [--json]", "state.db, projects.db, semantic settings, consent, index size and the installed copies"),
)


#: The bidi controls, shown as ``\\u202e``: not ``\\x`` escapes (more than two hex digits).
BIDI_CONTROLS = frozenset({*range(0x202A, 0x202F), *range(0x2066, 0x206A)})
#: The control characters a terminal acts on (C0 but newline and tab, DEL, C1): ESC opens a title, clipboard (OSC 52)
#: or screen-clearing sequence, BEL ends one, CR writes over the line, C1's CSI opens one without ESC. And the bidi
#: embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069), with which a line a terminal lays out right to
#: left shows its text in another order than it is (a link, a command to copy: "Trojan Source", CVE-2021-42574).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + "".join(map(chr, sorted(BIDI_CONTROLS))) + "]")


def for_terminal(text: str) -> str:
    """``text`` as a terminal may print it: every control character but newline and tab shown as ``\\x1b`` and the
    like (a CR of a CRLF line end dropped), and a bidi control as ``\\u202e``, so stored history (a coloured log, a
    fetched page) cannot set the title, write the clipboard, clear the screen or show a line in another order. For every text meant for people (the slash commands' answers, the
    command line's text and error lines); JSON escapes them itself."""
    return _CONTROL.sub(_escaped, text.replace("\r\n", "\n"))


def _escaped(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\u{code:04x}" if code in BIDI_CONTROLS else f"\\x{code:02x}"


CONSENT_FOR_HUMANS = (
    "(You are the user: to allow it, tell the agent in a conversation of this project; it records your "
    "answer with project_history_semantic_consent.)"
)


#: How a slash command's page reaches the next one: it takes no cursor (the command line's ``--cursor`` does).
NEXT_PAGE = "narrow it with --since / --until (--limit shows up to 10), or ask the agent, who can page on"


def one_line(text: object) -> str:
    """``text`` on one line, its runs of blank space (newlines too) one space: a listing's entry stays one entry (a
    message's own "2. another" line read as the list's second)."""
    return " ".join(str(text).split())


def project_label(project: Mapping[str, Any]) -> str:
    """``Payments (project p_abc)``, ``myrepo (git repo /src/myrepo)`` or ``no project (Home)``."""
    kind = project.get("kind")
    if kind == "explicit":
        return f"{project.get('name') or project.get('id')} (project {project.get('id')})"
    if kind == "auto":
        return f"{project.get('name')} (git repo {project.get('root') or project.get('key')})"
    return "no project (Home)"


def scope_line(cwd: str | None, project: Mapping[str, Any]) -> str:
    """The line every scoped output starts with: the conversation, or the folder, that decided the scope."""
    if cwd is None:
        return f"Scoped to this conversation's project: {project_label(project)} (this conversation left out)"
    return f"Scoped to the project of {cwd}: {project_label(project)}"


def error_text(prefix: str, answer: Mapping[str, Any]) -> str:
    """``prefix: error`` for a failure answer (``{success: false, error, code}``)."""
    return f"{prefix}: {answer.get('error') or 'failed'}"


def _filters_text(filters: Mapping[str, Any]) -> str:
    """``only messages since 2026-09-01T00:00:00+08:00, of role user`` for an answer's ``filters``."""
    parts = [f"{name} {filters[name]}" for name in ("since", "until") if filters.get(name)]
    if filters.get("role"):
        parts.append(f"of role {filters['role']}")
    return "only messages " + ", ".join(parts)


def _more(answer: Mapping[str, Any], next_page: str, what: str) -> list[str]:
    """The line that says a page has a next one (``next_cursor``), and how to reach it (``next_page``, its
    ``{cursor}`` filled in); none on the last page."""
    cursor = answer.get("next_cursor")
    return [f"More {what} than these: {next_page.format(cursor=cursor)}"] if cursor else []


def render_search(answer: Mapping[str, Any], *, cwd: str | None, next_page: str = NEXT_PAGE) -> str:
    """A search answer as numbered sessions (title, when, source, snippet, link) and the notices; a failure
    answer as one ``history search: <error>`` line. Every fact of the answer a person acts on is said: the filters,
    a degraded keyword leg (``keyword_note``), the order of a "now" question, and a next page (``next_page``: how to
    reach it, ``{cursor}`` its cursor)."""
    if not answer.get("success"):
        return error_text("history search", answer)
    lines = [scope_line(cwd, answer.get("project") or {})]
    if answer.get("project_note"):
        lines.append(f"Note: {answer['project_note']}")
    status = answer.get("semantic_status")
    filters = f"; {_filters_text(answer['filters'])}" if answer.get("filters") else ""
    lines.append(f"{answer.get('sessions_in_scope', 0)} session(s) in this project; mode {answer.get('mode')}; "
                 f"semantic search: {status}{filters}")
    results = answer.get("results") or []
    if answer.get("query_truncated"):
        lines.append("(the query was cut to its first 2,000 characters)")
    if answer.get("projects_note"):
        lines.append(f"Note: {answer['projects_note']}")
    if answer.get("keyword_note"):
        lines.append(f"Keyword search: {answer['keyword_note']}")
    if answer.get("order_note"):
        lines.append(f"Order: {answer['order_note']}")
    lines.append("")
    if not results:
        lines.append(str(answer.get("message") or "No matching messages."))
    for number, hit in enumerate(results, start=1):
        title = one_line(hit.get("title") or "(untitled session)")
        when = hit.get("when") or "unknown time"
        lines.append(f"{number}. {title}  [{when}, {hit.get('score_source')}]")
        lines.append(f"   {hit.get('snippet')}")
        lines.append(f"   {hit.get('link')}  (message {hit.get('message_id')})")
    lines += _more(answer, next_page, "sessions match")
    if answer.get("semantic_note") and status != "ready":
        lines.extend(["", f"Semantic search ({status}): {answer['semantic_note']}"])
        if status == "consent_required":
            lines.append(CONSENT_FOR_HUMANS)
    if answer.get("notice"):
        lines.extend(["", str(answer["notice"])])
    return "\n".join(lines)


def render_recent(answer: Mapping[str, Any], *, cwd: str | None, next_page: str = NEXT_PAGE) -> str:
    """The project's latest conversations (``browse.recent_sessions``), numbered, newest first; how many there are,
    and a next page (``next_page``, as :func:`render_search`'s)."""
    if not answer.get("success"):
        return error_text("history recent", answer)
    lines = [scope_line(cwd, answer.get("project") or {})]
    if "conversations_in_scope" in answer and (answer.get("project") or {}).get("kind") != "home":
        lines.append(f"{answer['conversations_in_scope']} conversation(s) in this list, newest first")
    lines.append("")
    sessions = answer.get("sessions") or []
    if not sessions:
        lines.append(str(answer.get("message") or "No sessions."))
    for number, row in enumerate(sessions, start=1):
        title = one_line(row.get("title") or "(untitled session)")
        parts = f" in {row['sessions']} sessions (compressed)" if (row.get("sessions") or 1) > 1 else ""
        lines.append(f"{number}. {title}  [{row.get('last_active') or row.get('started') or 'unknown time'}, "
                     f"{row.get('messages')} message(s){parts}, {row.get('source')}]")
        if row.get("first_user"):
            lines.append(f"   asked: {one_line(row['first_user'])}")
        if row.get("last_assistant"):
            lines.append(f"   last answer: {one_line(row['last_assistant'])}")
        lines.append(f"   {row.get('link')}")
    lines += _more(answer, next_page, "conversations")
    if answer.get("notice"):
        lines.extend(["", str(answer["notice"])])
    return "\n".join(lines)


def render_read(answer: Mapping[str, Any]) -> str:
    """Messages around a hit (``browse.read_around``), one block each, the hit marked."""
    if not answer.get("success"):
        return error_text("history read", answer)
    title = answer.get("title") or "(untitled session)"
    lines = [f"{title}  {answer.get('link')}  [{project_label(answer.get('project') or {})}]", ""]
    for message in answer.get("messages") or []:
        mark = " <== the hit" if message.get("message_id") == answer.get("anchor") else ""
        part = message.get("part") or {}
        shown = f", characters {part['start']}-{part['end']} of {part['length']}" if part else ""
        lines.append(f"--- {message.get('role')} (message {message.get('message_id')}, {message.get('when') or 'unknown time'}"
                     f"{shown}){mark}")
        lines.append(f"(left out: {message['left_out']})" if message.get("left_out") else str(message.get("text") or ""))
    if answer.get("truncated"):
        lines.extend(["", "(cut to the character budget; ask for fewer messages or a larger --max-chars)"])
    hit: Mapping[str, Any] = next((m for m in answer.get("messages") or [] if m.get("message_id") == answer.get("anchor")), {})
    part = hit.get("part") or {}
    if part and part.get("end", 0) < part.get("length", 0):  # the part a long hit shows, and how to read on
        lines.append(f"(the hit goes on: --offset {part['end']} shows it from character {part['end']} of {part['length']})")
    if answer.get("stopped"):
        lines.append(f"(stopped: {answer['stopped']})")
    if answer.get("notice"):
        lines.extend(["", str(answer["notice"])])
    return "\n".join(lines)


def render_index_run(answer: Mapping[str, Any]) -> str:
    """What one indexing run did: the first line of ``/history-index``, and the command line's ``index``."""
    if not answer.get("success"):
        return f"history index: {answer.get('error')}"
    if answer.get("message"):  # nothing to run: the gate's note, which speaks to the agent; a person is told too
        human = f"\n{CONSENT_FOR_HUMANS}" if answer.get("semantic_status") == "consent_required" else ""
        return f"history index: {answer['semantic_status']}: {answer['message']}{human}"
    more = " Run /history-index again to continue." if answer.get("remaining") else ""
    note = f"\nhistory index: note: {answer['note']}" if answer.get("note") else ""  # the index rebuilt, vectors dropped
    return (
        f"history index: {answer['indexed']} of {answer['total']} messages indexed in {answer['projects']} "
        f"project(s) ({answer['seconds']} s); semantic search is {answer['semantic_status']}.{more}{note}"
    )


def render_index_status(report: Mapping[str, Any], *, said: str = "") -> str:
    """The index progress of one folder's project (see ``status.index_status``).

    ``said``: a note the lines above already show (the index run's): not repeated, nor is the same note twice.
    """
    if not report.get("success"):
        return error_text("history index status", report)
    lines = [scope_line(str(report.get("cwd")), report.get("project") or {})]
    semantic = report.get("semantic") or {}
    if (report.get("project") or {}).get("kind") == "home":
        lines.append("Nothing to index: this folder is in no git repo and no project folder.")
    else:
        lines.append(
            f"Index: {report.get('indexed')} of {report.get('indexable')} message(s) embedded, {report.get('pending')} pending, "
            f"in {report.get('sessions')} session(s); semantic search here: {report.get('semantic_status')}"
        )
    lines.append(f"Model: {_model_text(semantic)}")
    consent = _consent_text(semantic)
    if said and semantic.get("note") == said:
        consent = f"{semantic.get('status')} (see above)"
    lines.append(f"Consent: {consent}")
    note = report.get("semantic_note")
    if note and note not in (said, semantic.get("note")):
        lines.append(f"Note: {note}")
    return "\n".join(lines)


def _model_text(semantic: Mapping[str, Any]) -> str:
    if semantic.get("provider") == "none":
        return "none (embedding.provider: none)"
    if not semantic.get("model"):  # a provider that cannot be used (see the note)
        return f"none usable (embedding.provider: {semantic.get('provider')})"
    where = "on this machine" if semantic.get("provider") == "local" else f"at {semantic.get('endpoint')}"
    return f"{semantic.get('model')} ({semantic.get('provider')}, {where})"


def _consent_text(semantic: Mapping[str, Any]) -> str:
    consent = semantic.get("consent") or {}
    status = semantic.get("status")
    if status == "allowed":
        projects = consent.get("projects") or []
        which = "every project" if "*" in projects else ", ".join(str(p) for p in projects)
        return f"given {consent.get('confirmed_at')} for {which}"
    return f"{status}: {semantic.get('note')}"


def render_status(report: Mapping[str, Any]) -> str:
    """A profile report (see ``status.profile_status``)."""
    lines = [f"project-history-recall {report.get('version')}", f"Hermes profile: {report.get('hermes_home')}"
             + ("" if report.get("home_exists") else "  (NOT A FOLDER)" if report.get("profile_problem") == "not_a_folder"
                else "  (NOT FOUND)")]
    state = report.get("state_db") or {}
    if state.get("error"):
        lines.append(f"state.db: {state.get('path')}: {state['error']}")
    elif not state.get("found"):
        lines.append(f"state.db: not found at {state.get('path')} (Hermes has not recorded a session in this profile)")
    else:
        lines.append(f"state.db: {state.get('path')}: {state.get('sessions')} session(s), {state.get('messages')} message(s)")
    projects = report.get("projects_db") or {}
    if not projects.get("found"):
        lines.append(f"projects.db: not found at {projects.get('path')} (git repos are the projects)")
    elif projects.get("note"):
        lines.append(f"projects.db: {projects.get('path')}: {projects['note']}")
    else:
        lines.append(f"projects.db: {projects.get('path')}: {projects.get('projects')} project(s), {projects.get('archived')} archived")
    semantic = report.get("semantic") or {}
    lines.append(f"Semantic search: {semantic.get('status')}; model {_model_text(semantic)}")
    lines.append(f"Consent: {_consent_text(semantic)}")
    install = report.get("install") or {}
    if install.get("loaded"):
        lines.append(f"Plugin loaded by Hermes from: {install['loaded']}")
    if install.get("note"):
        lines.append(f"  Note: {install['note']}")
    index = report.get("index") or {}
    if index.get("error"):  # before "found": a folder at the file's path is not "none yet"
        lines.append(f"Index: {index.get('path')}: {index['error']}")
    elif not index.get("found"):
        lines.append(f"Index: none yet ({index.get('path')})")
    else:
        lines.append(
            f"Index: {index.get('path')}: {index.get('bytes')} bytes, {index.get('chunks')} chunk(s), "
            f"{index.get('messages_indexed')} message(s) embedded with the configured model"
        )
        if index.get("damaged_vectors"):
            lines.append(f"  {index['damaged_vectors']} vector(s) of the wrong size: the next semantic search or the "
                         "index command drops them and embeds their messages again")
    return "\n".join(lines)


def render_projects(listing: Mapping[str, Any]) -> str:
    """Projects with their session counts (see ``status.list_projects``)."""
    if not listing.get("success"):
        return error_text("history projects", listing)
    lines = []
    for row in listing.get("projects") or []:
        flag = "  [archived]" if row.get("archived") else ""
        lines.append(f"{project_label(row)}{flag}: {row.get('sessions')} session(s), {row.get('messages')} message(s)")
        folders = row.get("folders") or ([row["root"]] if row.get("root") else [])
        if folders:
            lines.append(f"    folders: {', '.join(folders)}")
    if not (listing.get("projects_db") or {}).get("found"):
        lines.append("(no projects.db: only git repos and Home)")
    if listing.get("projects_note"):
        lines.append(f"Note: {listing['projects_note']}")
    return "\n".join(lines)


def render_help(version: str, *, command_line: str, semantic: str | None, install: str) -> str:
    """Usage of the slash commands, the tools and the command line, and the main limits.

    ``command_line``: how to start the command line here (``status.command_line_hint``).
    ``semantic``: why semantic search cannot run here and how to fix it, shown first.
    ``install``: which of two installed copies Hermes loads, and what to do (see ``status.install_copies``).
    """
    width = max(len(c) for c, _ in TOOLS_HELP)
    lines = [f"project-history-recall {version}: search this project's past conversations", ""]
    if install:
        lines += [f"Installed twice: {install}", ""]
    if semantic:
        lines += [f"Semantic search cannot run here: {semantic}", ""]
    lines += ["Slash commands:"]
    lines += [f"  {c}\n      {d}" for c, d in COMMANDS_HELP]
    lines += [f"  {n}" for n in COMMAND_NOTES]
    lines += ["", "Agent tools (ask the agent in plain words):"]
    lines += [f"  {c.ljust(width)}  {d}" for c, d in TOOLS_HELP]
    lines += ["", f"Command line (outside a chat): {command_line} COMMAND"]
    lines += [f"  {c}\n      {d}" for c, d in CLI_HELP]
    lines += [
        "",
        "Limits:",
        "  * In the terminal CLI after your first message, the terminal UI and the desktop, the commands act on this",
        "    conversation (it is left out of searches, and /history-move moves it). In a CLI before its first message",
        "    Hermes names no conversation: they use the project of Hermes' working directory, and /history-move says",
        "    how to ask the agent instead; in a gateway chat they answer nothing: ask the agent there. After a move",
        "    this terminal stays in its folder; resuming the conversation later (/resume, hermes --resume) starts in",
        "    the new one.",
        "  * Keyword search misses paraphrases until semantic search is consented and the project indexed.",
        "  * Results are past conversations: historical data, not instructions.",
    ]
    return "\n".join(lines)
