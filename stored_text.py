"""A message's content as the person wrote or asked it, from the forms Hermes stores it in (:func:`text_of`). Pure.

A multimodal message is stored as :data:`JSON_PREFIX` and its JSON parts: its text parts are what was written. A user
row starting with :data:`NOTE_PREFIX` is Hermes' own note to the model (``[System: Your previous response was truncated
by the output length limit. Continue exactly where you left off…]``, the network-error and tool-call ones, 0.21's
model switch), which Hermes 0.21 never shows as the person's words in any transcript: it is no history here; so are
its other user-role scaffolding (:data:`NOTE_PREFIXES`: the task list it carries over a compression, its request for
a final answer at the iteration limit), as Hermes' ``_is_real_user_message`` tells them. A compaction summary (a row
of either role starting with one of :data:`SUMMARY_PREFIXES`, or the first message after it with the summary merged
in) is Hermes' handoff to the next context window: an LLM digest of a conversation whose messages are searched where
they were written, so it would match every question about it, and Hermes' own search leaves it out. A
``/skill`` turn (``/deploy-check run it on staging``) is stored with the skill's whole body in it: Hermes'
``agent/skill_commands.py`` sends the model an activation note, the skill's text and the person's instruction, and
state.db keeps that message. Searched as it is, every session that ran a skill matches the words of its body, and
shows them as what the person said. Hermes itself reads such a turn back as ``/name instruction`` (its memory
providers by ``extract_user_instruction_from_skill_message``, whose markers it keeps byte-identical to the builders;
0.21's transcripts as ``/skill args``): so does every reader here.
"""

from __future__ import annotations

import json
from typing import Any

#: How Hermes stores a multimodal message: this prefix, then its JSON parts.
JSON_PREFIX = "\x00json:"
#: How Hermes' notes to the model that it stores as user rows start (its transcripts leave out a user row so starting).
NOTE_PREFIX = "[System:"
NOTE_PREFIXES = (
    NOTE_PREFIX,
    "[Your active task list was preserved across context compression]",  # tools/todo_tool.py
    "You've reached the maximum number of tool-calling iterations allowed. ",  # agent/chat_completion_helpers.py
)
#: How a compaction summary starts (agent/context_compressor.py: ``SUMMARY_PREFIX``, the legacy one, and the header of
#: the message it is merged into when a row of its own would break the roles' alternation).
SUMMARY_PREFIXES = (
    "[CONTEXT COMPACTION",
    "[CONTEXT SUMMARY]:",
    "[PRIOR CONTEXT \u2014 for reference only; not a new message]",
)
#: How every skill turn starts: ``[IMPORTANT: The user has invoked the "name" skill, …`` (a bundle's: ``"name"
#: skill bundle, …``; stacked skills': ``"a b" stacked skill bundle, …``).
SKILL_PREFIX = '[IMPORTANT: The user has invoked the "'


def _starts(prefixes: tuple[str, ...]) -> str:
    return " OR ".join(f"substr(m.content, 1, {len(p)}) = '{p.replace(chr(39), chr(39) * 2)}'" for p in prefixes)


#: The SQL conditions (``messages`` as ``m``) that a row is such a note or summary, or such a turn, the role tested
#: first so that only a user or assistant row's content is read.
NOTE_ROW_SQL = (f"((m.role = 'user' AND ({_starts(NOTE_PREFIXES)}))"
                f" OR (m.role IN ('user', 'assistant') AND ({_starts(SUMMARY_PREFIXES)})))")
SKILL_ROW_SQL = f"(m.role = 'user' AND substr(m.content, 1, {len(SKILL_PREFIX)}) = '{SKILL_PREFIX}')"
#: How Hermes' notices of background work start: a background process's exit or watch match, with its output, or
#: its watch given up (tools/process_registry.py ``format_process_notification``), and an async delegation's result,
#: with the subagent's summary (``[ASYNC DELEGATION COMPLETE``, ``BATCH COMPLETE``, ``TASK FAILED``). Hermes stores
#: them as user rows, since they wake the agent; the person wrote none of them (``_is_real_user_message``). Hermes
#: 0.21 also types the user rows it writes itself by ``display_kind`` (:data:`HOST_KINDS`). Such rows are the work's
#: output or Hermes' own, so every reader here takes them for tool output (:func:`role_of`): shown as ``tool``,
#: found by ``role: tool``, not by ``role: user``.
NOTICE_PREFIXES = ("[IMPORTANT: Background process ", "[IMPORTANT: Watch patterns disabled for process ",
                   "[ASYNC DELEGATION ")
#: The ``display_kind`` of the user rows Hermes writes itself, each named (the kinds its own previews leave out,
#: and its notices): a kind not named here is taken for the person's (``steer``, the words sent mid-turn;
#: ``participant_directed``, a message to another agent of the session; a new kind), so that no word the person
#: wrote is ever shown as tool output.
HOST_KINDS = ("process_complete", "async_delegation_complete", "model_switch", "personality_switch", "auto_continue",
              "internal_notification")
NOTICE_ROW_SQL = f"(m.role = 'user' AND ({_starts(NOTICE_PREFIXES)}))"
#: The same on a state.db with ``display_kind`` (0.21); never NULL, so that ``NOT`` of it keeps a row without a kind.
KIND_NOTICE_ROW_SQL = (f"(m.role = 'user' AND (COALESCE(m.display_kind, '') IN ({', '.join(repr(k) for k in HOST_KINDS)})"
                       f" OR {_starts(NOTICE_PREFIXES)}))")


def role_of(role: str, content: Any, display_kind: Any = None) -> str:
    """The role a row is read as: ``tool`` for Hermes' notice of background work or other user row of its own
    (:data:`NOTICE_PREFIXES`, a ``display_kind`` of :data:`HOST_KINDS`), else its own."""
    if role != "user":
        return role
    if display_kind in HOST_KINDS or (isinstance(content, str) and content.startswith(NOTICE_PREFIXES)):
        return "tool"
    return role


def stored_roles(roles: tuple[str, ...]) -> tuple[str, ...]:
    """The roles rows read as one of ``roles`` (:func:`role_of`) are stored with: a row read as ``tool`` may be a user
    row of Hermes' own."""
    return (*roles, "user") if "tool" in roles and "user" not in roles else roles


def roles_sql(roles: tuple[str, ...], *, display: bool = False) -> tuple[str, list[str]]:
    """``(clause, params)``: the row (``messages`` as ``m``) is read as one of ``roles`` (:func:`role_of`);
    ``display``: the state.db has ``display_kind``."""
    clause, params = "m.role IN ({})".format(", ".join("?" * len(roles))), list(roles)
    notice = KIND_NOTICE_ROW_SQL if display else NOTICE_ROW_SQL
    if "user" in roles and "tool" not in roles:
        clause = f"({clause} AND NOT {notice})"
    elif "tool" in roles and "user" not in roles:
        clause = f"({clause} OR {notice})"
    return clause, params


_SINGLE_MARKER = "The full skill content is loaded below.]"
_SINGLE_INSTRUCTION = "The user has provided the following instruction alongside the skill invocation: "
_RUNTIME_NOTE = "\n\n[Runtime note:"
_BUNDLE_MARKER = " skill bundle,"
_BUNDLE_INSTRUCTION = "\nUser instruction: "
_BUNDLE_FIRST_SKILL = "\n\n[Loaded as part of the "
#: Where a single skill's body ends when Hermes knows its folder: the instruction comes after it.
_SKILL_DIRECTORY = "\n[Skill directory: "


def as_asked(text: str) -> str:
    """``text`` as the person typed it: a skill turn as ``/name instruction`` (``/name`` alone when it carries no
    instruction), any other text as it is. Linear in the length of ``text``."""
    if not text.startswith(SKILL_PREFIX):
        return text
    end = text.find('"', len(SKILL_PREFIX))
    if end < 0:
        return text
    name = text[len(SKILL_PREFIX) : end]
    stacked = text.startswith(" stacked" + _BUNDLE_MARKER, end + 1)
    if stacked or text.startswith(_BUNDLE_MARKER, end + 1):
        # A bundle's instruction comes in its header, before the skills it loads (whose bodies may hold the marker).
        first = text.find(_BUNDLE_FIRST_SKILL)
        start = text.find(_BUNDLE_INSTRUCTION, 0, first if first >= 0 else len(text))
        stop = first if start >= 0 else -1
        marker = _BUNDLE_INSTRUCTION
    elif _SINGLE_MARKER in text:
        # A single skill's comes after its body and its folder's note (the body may quote the marker): the last one,
        # after the folder's note when there is one.
        start = text.rfind(_SINGLE_INSTRUCTION, max(text.rfind(_SKILL_DIRECTORY), 0))
        stop = text.find(_RUNTIME_NOTE, start) if start >= 0 else -1
        marker = _SINGLE_INSTRUCTION
    else:
        return text
    instruction = text[start + len(marker) : stop if stop >= 0 else len(text)].strip() if start >= 0 else ""
    names = " ".join("/" + part.lstrip("/") for part in name.split()) if stacked else "/" + name.lstrip("/")
    return f"{names} {instruction}".strip()


#: How Hermes wraps a mid-turn /steer (agent/prompt_builder.py ``format_steer_marker``: ``\n\n`` + an opening marker
#: telling the model the words are the user's, whose wording changed between releases, ``\n``, the words, ``\n`` +
#: the closing marker). The markers are Hermes' words for the model; the person sent what lies between.
STEER_OPEN = "[OUT-OF-BAND USER MESSAGE"
STEER_CLOSE = "[/OUT-OF-BAND USER MESSAGE]"


def _steered(text: str) -> str:
    """The words of a steer wrapped in Hermes' markers (:data:`STEER_OPEN`); other text as it is."""
    body = text.lstrip()
    if not body.startswith(STEER_OPEN):
        return text
    end = body.find("]\n")
    if end < 0:
        return text
    words = body[end + 2 :].rstrip()
    return (words[: -len(STEER_CLOSE)] if words.endswith(STEER_CLOSE) else words).strip()


def text_of(content: Any, role: str = "") -> str:
    """A row's ``content`` as text: ``""`` for Hermes' note to the model (a ``user`` row starting with one of
    :data:`NOTE_PREFIXES`) and a compaction summary (a ``user`` or ``assistant`` row starting with one of
    :data:`SUMMARY_PREFIXES`, its text parts too when multimodal), a multimodal row's text parts joined by spaces (its
    JSON as it is when it does not read as JSON or is not a list), a skill turn :func:`as_asked`, a user row's steer
    as its words, other text as it is; ``None`` as ``""``."""
    text = content if isinstance(content, str) else ("" if content is None else str(content))
    if role == "user" and text.startswith(NOTE_PREFIXES):
        return ""
    if text.startswith(JSON_PREFIX):
        text = _flatten_parts(text[len(JSON_PREFIX) :])
    if role in ("user", "assistant") and text.startswith(SUMMARY_PREFIXES):
        return ""
    return as_asked(_steered(text) if role == "user" else text)


def _flatten_parts(raw: str) -> str:
    try:
        parts = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser (SQLite's json_valid() says 0 too)
        return raw
    if isinstance(parts, list):
        texts = [p.get("text", "") for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return " ".join(t for t in texts if t)
    return raw
