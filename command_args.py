"""The argument grammar of the slash commands, shared with the command line where they overlap.

One table of flags: the slash commands parse their text with the ``*_args``
functions below; the command line gives argparse the same flags
(:func:`add_flags`) and checks their values with the same
:func:`check_value` and :func:`dates`, so both refuse in the same words.

A slash command's text (Hermes passes a command only what follows it):

* words are separated by spaces; a part in double quotes is one word
  (``"Team Notes"``), and a search query keeps its quotes (they mark a phrase);
  a quote not closed is refused (it would take the flags after it into the query);
* ``--flag VALUE`` or ``--flag=VALUE`` anywhere among the words; a switch
  (``--home``) takes no value; an em or en dash before a flag's name is read as
  ``--`` (``—mode``, as smart punctuation writes ``--mode``);
* ``--`` ends the flags: what follows is words, even when it starts with ``--``;
* anything else that starts with ``--``, a flag given twice, a value a flag
  does not take, a word too many: refused with :class:`ArgumentError`, whose
  message names it (the caller adds the usage line).

Pure: the limits are the services' constants. Raises only :class:`ArgumentError`.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import browse, errors, search
from .filters import SEARCH_ROLES, Filters, make_filters


class ArgumentError(ValueError):
    """Arguments a command cannot use; the message names the word or flag, and why."""


@dataclass(frozen=True)
class Flag:
    """One flag: a whole number from ``low`` to ``high``, one of ``choices``, free text, or a switch (no ``metavar``)."""

    name: str
    metavar: str = ""
    help: str = ""
    low: int | None = None
    high: int | None = None
    choices: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The name as an argument key: ``--max-chars`` is ``max_chars``."""
        return self.name[2:].replace("-", "_")

    def usage(self) -> str:
        return f"[{self.name}{' ' + self.metavar if self.metavar else ''}]"


WHEN_HELP = "YYYY-MM-DD, an ISO date-time, or an age (12h, 7d, 2w)"
MODE = Flag("--mode", "M", "hybrid (default), keyword or semantic", choices=search.MODES)
SEARCH_LIMIT = Flag("--limit", "N", f"sessions to show, 1 to {search.MAX_LIMIT}", 1, search.MAX_LIMIT)
SINCE = Flag("--since", "WHEN", f"only messages from then on: {WHEN_HELP}")
UNTIL = Flag("--until", "WHEN", "only messages before then (a YYYY-MM-DD day is included whole)")
ROLE = Flag("--role", "ROLE", f"only messages of this role: {', '.join(SEARCH_ROLES)}", choices=SEARCH_ROLES)
RECENT_LIMIT = Flag("--limit", "N", f"sessions to show, 1 to {browse.RECENT_MAX}", 1, browse.RECENT_MAX)
RECENT_SINCE = Flag("--since", "WHEN", "only sessions active from then on (same forms as search)")
RECENT_UNTIL = Flag("--until", "WHEN", "only sessions started before then")
BEFORE = Flag("--before", "N", f"messages before the hit, 0 to {browse.MAX_AROUND}", 0, browse.MAX_AROUND)
AFTER = Flag("--after", "N", f"messages after the hit, 0 to {browse.MAX_AROUND}", 0, browse.MAX_AROUND)
MAX_CHARS = Flag("--max-chars", "N", f"a character budget, {browse.MIN_CHARS} to {browse.MAX_CHARS}",
                 browse.MIN_CHARS, browse.MAX_CHARS)
OFFSET = Flag("--offset", "N", "show a long hit from this character on (a part's start or end)", 0, 10**9)
READ_QUERY = Flag("--query", "WORDS", "the search's words: show the part of a long hit that matched (quote several)")
HOME = Flag("--home", "", "out of any project (Home)")


@dataclass(frozen=True)
class Grammar:
    """One slash command: the words it takes (as the usage line writes them) and its flags."""

    command: str
    words: str
    flags: tuple[Flag, ...]

    def usage(self) -> str:
        parts = [self.command, self.words, *(f.usage() for f in self.flags)]
        return "usage: " + " ".join(p for p in parts if p)


SEARCH = Grammar("/history-search", "<query>", (MODE, SEARCH_LIMIT, SINCE, UNTIL, ROLE))
RECENT = Grammar("/history-recent", "[N]", (RECENT_LIMIT, RECENT_SINCE, RECENT_UNTIL))
READ = Grammar("/history-read", "<session id> [message id]", (BEFORE, AFTER, MAX_CHARS, READ_QUERY, OFFSET))
MOVE = Grammar("/history-move", "<project name, id or slug | folder>", (HOME,))
INDEX = Grammar("/history-index", "", ())


def check_value(flag: Flag, raw: str) -> int | str:
    """``flag``'s value from the text ``raw``: an ``int`` for a number, the lower-cased choice, else the text stripped.

    Raises :class:`ArgumentError` naming the flag and (cut, see :func:`errors.echo`) the value.
    """
    text = raw.strip()
    if flag.low is not None and flag.high is not None:
        if not re.fullmatch(r"\+?[0-9]{1,9}", text) or not flag.low <= int(text) <= flag.high:
            raise ArgumentError(f"{flag.name} must be a whole number from {flag.low} to {flag.high}, "
                                f"got {errors.echo(repr(raw))}")
        return int(text)
    if flag.choices:
        if text.lower() not in flag.choices:
            raise ArgumentError(f"{flag.name} must be one of {', '.join(flag.choices)}, got {errors.echo(repr(raw))}")
        return text.lower()
    if not text:
        raise ArgumentError(f"{flag.name} needs a value ({flag.metavar})")
    return text


def dates(since: str | None, until: str | None, role: str | None = None) -> Filters:
    """The filters of ``--since`` / ``--until`` / ``--role``; raises :class:`ArgumentError` (a date that cannot be read,
    an age too large, ``since`` not before ``until``)."""
    try:
        return make_filters(since=since or None, until=until or None, role=role or None)
    except ValueError as exc:
        raise ArgumentError(str(exc)) from None


class Once(argparse.Action):
    """An argparse flag that takes one value once: given twice, refused as the slash commands refuse it."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if getattr(namespace, self.dest, None) is not None:
            raise argparse.ArgumentError(None, f"{self.option_strings[0]} is given twice")
        setattr(namespace, self.dest, values)


def add_flags(parser: argparse.ArgumentParser, flags: tuple[Flag, ...], defaults: dict[str, Any]) -> None:
    """Give argparse ``flags`` as text (their values are checked by :func:`check_value`, in the grammar's words),
    each taken once (:class:`Once`).

    Every flag given takes a value (the grammars the command line shares, search's and recent's, have no switch).
    ``defaults``: what the caller uses when a flag is not given, by name, for the help text only.
    """
    for flag in flags:
        default = defaults.get(flag.name)
        text = flag.help + (f" (default {default})" if default is not None else "")
        parser.add_argument(flag.name, metavar=flag.metavar, help=text, default=None, action=Once)


# -- the slash text ----------------------------------------------------------

#: A word: a run of double-quoted parts and other non-space characters (an unclosed quote is refused first).
_WORD = re.compile(r'(?:"[^"]*"|[^\s"]+)+')
#: A straight-quoted part (kept as it is, curly quotes inside it too), or a pair of curly double quotes (smart
#: punctuation's, or a Chinese input method's), read as straight ones.
_CURLY = re.compile("\"[^\"]*\"|\u201c([^\u201c\u201d\"]*)\u201d")
#: A flag written with an em or en dash (or two) for ``--``, as smart punctuation turns ``--mode`` into ``—mode``.
_SMART_FLAG = re.compile(r"[\u2013\u2014]{1,2}([a-z][a-z-]*)(=.*)?", re.DOTALL)


def _unquoted(word: str) -> str:
    return word.replace('"', "")


def plain_dashes(token: str, names: Iterable[str]) -> str:
    """``token`` with the em or en dash before a flag name read as ``--`` (``—mode`` is ``--mode``) when ``--name``
    is one of ``names``; any other token as it is."""
    found = _SMART_FLAG.fullmatch(token)
    if found is None or f"--{found.group(1)}" not in names:
        return token
    return f"--{found.group(1)}{found.group(2) or ''}"


def _words(text: str) -> list[str]:
    """The words of a slash command's ``text``; raises :class:`ArgumentError` for an unclosed double quote, which
    would take every word and flag after it into one word. A pair of curly quotes is a pair of quotes (a lone curly
    quote is a character of the word it is in)."""
    text = _CURLY.sub(lambda m: m.group() if m.group(1) is None else f'"{m.group(1)}"', text)
    if text.count('"') % 2:
        rest = text[text.rindex('"'):]
        raise ArgumentError(f"a quote is not closed: {errors.echo(rest)} (a \"quoted phrase\" needs both quotes)")
    return _WORD.findall(text)


def parse(grammar: Grammar, text: str) -> tuple[list[str], dict[str, Any]]:
    """Split a slash command's ``text`` into ``(words, values)``: the words as typed (quotes kept) and the flags'
    checked values by key (a switch: ``True``); raises :class:`ArgumentError`."""
    by_name = {f.name: f for f in grammar.flags}
    tokens = _words(text or "")
    words: list[str] = []
    values: dict[str, Any] = {}
    i = 0
    flags_over = False
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not flags_over:
            token = plain_dashes(token, by_name)
        if flags_over or not token.startswith("--"):
            words.append(token)
            continue
        if token == "--":
            flags_over = True
            continue
        name, eq, inline = token.partition("=")
        flag = by_name.get(name)
        if flag is None:
            raise ArgumentError(f"unknown flag {errors.echo(name)}: {_takes(grammar)}")
        if flag.key in values:
            raise ArgumentError(f"{flag.name} is given twice")
        if not flag.metavar:
            if eq:
                raise ArgumentError(f"{flag.name} takes no value, got {errors.echo(repr(inline))}")
            values[flag.key] = True
            continue
        if eq:
            raw = inline
        elif i < len(tokens):
            raw = tokens[i]
            i += 1
        else:
            raise ArgumentError(f"{flag.name} needs a value ({flag.metavar})")
        values[flag.key] = check_value(flag, _unquoted(raw))
    return words, values


def _takes(grammar: Grammar) -> str:
    if not grammar.flags:
        return f"{grammar.command} takes no flags"
    names = [f.name for f in grammar.flags]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return f"{grammar.command} takes {listed} (put -- before words that start with --)"


def search_args(text: str, *, default_limit: int) -> dict[str, Any]:
    """``/history-search``: the search tool's arguments, the query every word (quotes kept); raises :class:`ArgumentError`."""
    words, v = parse(SEARCH, text)
    query = " ".join(words).strip()
    if not query:
        raise ArgumentError("the query is empty: give the words or question to search for")
    dates(v.get("since"), v.get("until"), v.get("role"))  # refused here, with the usage
    return {"query": query, "limit": default_limit, **v}


def recent_args(text: str) -> dict[str, Any]:
    """``/history-recent [N]``: the recent tool's arguments, N ``--limit`` written short; raises :class:`ArgumentError`."""
    words, v = parse(RECENT, text)
    if len(words) > 1:
        raise ArgumentError(f"unexpected word {errors.echo(repr(words[1]))}: {RECENT.command} takes at most one "
                            "word, N (the number of sessions)")
    if words:
        if "limit" in v:
            raise ArgumentError(f"the number of sessions is given twice ({errors.echo(words[0])} and --limit)")
        try:
            v["limit"] = check_value(RECENT_LIMIT, _unquoted(words[0]))
        except ArgumentError:
            raise ArgumentError(f"unexpected word {errors.echo(repr(words[0]))}: N, the number of sessions, "
                                f"must be a whole number from 1 to {browse.RECENT_MAX}") from None
    dates(v.get("since"), v.get("until"))
    return v


def read_args(text: str) -> dict[str, Any]:
    """``/history-read``: ``{session_id, message_id?, before?, after?, max_chars?, query?, offset?}``; raises :class:`ArgumentError`."""
    typed, values = parse(READ, text)
    words = [_unquoted(w) for w in typed]
    if not words or not words[0].strip():
        raise ArgumentError("the session id is missing: give a search result's session id (or its @session: link)")
    if len(words) > 2:
        raise ArgumentError(f"unexpected word {errors.echo(repr(words[2]))}: {READ.command} takes a session id and "
                            "at most one message id")
    args: dict[str, Any] = {"session_id": words[0].removeprefix("@session:"), **values}
    if len(words) == 2:
        if not re.fullmatch(r"[0-9]{1,18}", words[1]) or int(words[1]) < 1:
            raise ArgumentError(f"the message id must be a whole number of 1 or more (a search result's message id), "
                                f"got {errors.echo(repr(words[1]))}")
        args["message_id"] = int(words[1])
    return args


def move_args(text: str) -> str | None:
    """``/history-move``: the target as typed (quotes dropped), ``""`` for ``--home``, ``None`` for nothing at all.

    Raises :class:`ArgumentError` for ``--home`` with a target.
    """
    words, values = parse(MOVE, text)
    target = " ".join(_unquoted(w) for w in words).strip()
    if values.get("home"):
        if target:
            raise ArgumentError(f"--home takes no target, got {errors.echo(repr(target))}: {MOVE.command} --home moves "
                                f"out of any project, {MOVE.command} {errors.echo(target)} moves to that target")
        return ""
    return target or None


def no_args(grammar: Grammar, text: str) -> None:
    """A command that takes nothing: raises :class:`ArgumentError` naming the first word or flag given."""
    words, _ = parse(grammar, text)
    if words:
        raise ArgumentError(f"unexpected word {errors.echo(repr(words[0]))}: {grammar.command} takes no arguments")
