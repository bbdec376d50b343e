"""Command line: ``project-history-recall`` (pip), or the plugin folder run by Python (``__main__.py``).

For use outside a chat, against a Hermes profile (``$HERMES_HOME``, or ``--hermes-home``): ``search``,
``recent``, ``projects``, ``index`` and ``status``, their flags in :func:`build_parser`. ``search`` and
``recent`` are scoped by the project of a folder (``--cwd``, default the current directory), every
session of it included. Text output uses the same renderer as the slash commands (``render.py``);
``--json`` prints the raw answer.

Exit codes: 0 success, 1 a failure answer (no state.db, an unreadable database, the provider failing...),
2 a usage error (a flag or value not understood, a flag given twice, checked by ``command_args.py`` in the slash
commands' words; a cursor of another search), 130 interrupted (Ctrl-C), 141 the output's reader gone (``| head``), as
a shell reports a command those signals end. Failures print one line on stderr (with ``--json``, the failure
answer on stdout too, a usage error's included), never a traceback. Warnings logged meanwhile are said once: not
when the answer says the same (:func:`errors.said_as`), else after it as labelled lines on stderr (with ``--json``,
in the answer's ``warnings``). Hermes' data is only read; the plugin's data folder is written
by ``index`` and, after consent, by a hybrid or semantic ``search``, which first embeds what is new for a
moment (with the ``openai`` provider, sending those messages to the configured endpoint).
"""

from __future__ import annotations

import argparse
import difflib
import errno
import json
import logging
import os
import re
import sqlite3
import stat
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TextIO

from . import browse, command_args, errors, indexing, paths, render, search, status

# Not ``cli.py``: Hermes has a top-level module named ``cli`` (imported by
# ``hermes_cli.main`` and the gateway), which a checkout on ``sys.path`` would shadow.

PROG = "project-history-recall"
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports a command SIGINT ended
EXIT_PIPE = 141  # the reader of the output went away (``| head``), as a shell reports a command SIGPIPE ended


class _Refused(Exception):
    """argparse refusing the arguments (its ``error``): raised rather than exiting, so that with ``--json`` the
    failure answer is printed too. ``parser``: the (sub)command's parser, for its usage line."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser


class _Parser(argparse.ArgumentParser):
    """An argument parser whose refusals are :class:`_Refused` (its subcommands' parsers are of this class too), and
    which reads no flag from its first letters (``--mo``), as a slash command does not."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise _Refused(self, message)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (``--hermes-home`` is accepted before or after the subcommand)."""
    common = _Parser(add_help=False)
    common.add_argument("--hermes-home", default=argparse.SUPPRESS,
                        help="the Hermes profile folder (default: $HERMES_HOME, else ~/.hermes)")
    parser = _Parser(
        prog=PROG, parents=[common],
        description="Search a Hermes profile's past conversations by project, outside a chat. "
        "Exit codes: 0 success, 1 failure, 2 usage error, 130 interrupted (Ctrl-C), 141 output closed (| head).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {status.plugin_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{search,recent,projects,index,status}")

    find = sub.add_parser("search", parents=[common], help="search the past sessions of a folder's project")
    find.add_argument("query", nargs="+", help="keywords, \"quoted phrases\", identifiers or a question")
    find.add_argument("--cwd", type=Path, default=None, action=command_args.Once, help="the folder whose project is searched (default: the current directory)")
    # the flags of /history-search, checked the same way
    command_args.add_flags(find, command_args.SEARCH.flags, {"--limit": search.DEFAULT_LIMIT})
    find.add_argument("--cursor", action=command_args.Once, help="next_cursor of a previous --json answer: the next page")
    find.add_argument("--json", action="store_true", help="print the raw JSON answer")

    latest = sub.add_parser("recent", parents=[common], help="a folder's project's latest sessions, newest first")
    latest.add_argument("--cwd", type=Path, default=None, action=command_args.Once, help="the folder whose project is listed (default: the current directory)")
    command_args.add_flags(latest, command_args.RECENT.flags, {"--limit": browse.RECENT_DEFAULT})
    latest.add_argument("--cursor", action=command_args.Once, help="next_cursor of a previous --json answer: the next page")
    latest.add_argument("--json", action="store_true", help="print the raw JSON answer")

    listing = sub.add_parser("projects", parents=[common], help="projects and how many sessions each holds")
    listing.add_argument("--json", action="store_true", help="print JSON")

    index = sub.add_parser("index", parents=[common], help="embed the consented projects' messages (progress bar on stderr)")
    index.add_argument("--json", action="store_true", help="print the raw JSON answer")

    report = sub.add_parser("status", parents=[common], help="what the plugin finds in this Hermes profile")
    report.add_argument("--json", action="store_true", help="print JSON")
    parser.subcommands = sub.choices  # type: ignore[attr-defined]  # for usage lines of our own errors
    return parser


#: Surrogate escapes: the bytes of an argument or a file name the locale's encoding could not read.
_ESCAPED_BYTES = re.compile("([\udc80-\udcff]+)")


def _received(run: str) -> bytes:
    """A run of escaped bytes as they came where they read as UTF-8 text a terminal may show (a name in Chinese), else
    escaped (``\\udc9b``: a byte that is no UTF-8 here, and a lone 0x9b is a control to an 8-bit terminal)."""
    raw = run.encode("utf-8", "surrogateescape")
    try:
        shown = raw.decode("utf-8")
    except UnicodeDecodeError:
        shown = ""
    return raw if shown and render.for_terminal(shown) == shown else run.encode("ascii", "backslashreplace")


def _emit(text: str, stream: TextIO) -> None:
    """Write a line. Where the stream's encoding cannot hold a character: bytes the process received that the locale
    could not read (a folder's name under ``LC_ALL=C``, kept as surrogate escapes) are written as they came
    (:func:`_received`), as Python's stdout writes them there and stderr would not (``\\udce5``); anything else is
    escaped (``\\u4ed3``)."""
    line = text + "\n"
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        line.encode(encoding)
    except UnicodeEncodeError:
        pass
    else:
        stream.write(line)
        return
    pieces = _ESCAPED_BYTES.split(line)  # odd places: runs of escaped bytes
    data = b"".join(_received(p) if i % 2 else p.encode(encoding, "backslashreplace") for i, p in enumerate(pieces))
    buffer = getattr(stream, "buffer", None)
    if buffer is None:  # a text stream only (a test's StringIO): the bytes as escapes
        stream.write(data.decode(encoding, "backslashreplace"))
        return
    stream.flush()
    buffer.write(data)
    buffer.flush()


def _say(text: str, stream: TextIO) -> None:
    """Write text meant for people: control characters escaped (``render.for_terminal``), as the slash commands do."""
    _emit(render.for_terminal(text), stream)


#: DEL, the C1 controls and the bidi controls as JSON escapes (``\\u009b``, ``\\u202e``): a terminal reads ``\\x9b`` as
#: ESC ``[``, and lays a line out in another order after a bidi override (``render.for_terminal``). Lone surrogates
#: too (``\\udce9``: a byte of a name the locale could not read): written as bytes (:func:`_emit`), they would make the
#: answer no UTF-8 a program can read.
_JSON_ESCAPES = {c: f"\\u{c:04x}" for c in (*range(0x7F, 0xA0), *render.BIDI_CONTROLS, *range(0xD800, 0xE000))}


def _as_json(payload: Any) -> str:
    """``payload`` as JSON, its text as it is but for DEL and the C1 controls, escaped as JSON escapes C0's, so that
    history cannot move the cursor or clear the screen through them either, and lone surrogates, so that it is text in
    any encoding; a program reading the JSON gets the same values."""
    return json.dumps(payload, indent=2, ensure_ascii=False, default=str).translate(_JSON_ESCAPES)


#: The errors that say a path names nothing (as ``Path.exists`` reads them on Python 3.11-3.13; 3.14's reads every
#: ``OSError`` so, a name too long for the file system too).
_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)


def _profile_folder(given: str) -> Path:
    """The folder ``--hermes-home`` names; raises :class:`command_args.ArgumentError` for one that cannot be a profile:
    empty (an unset shell variable: it read as the current folder), a ``~user`` of no user, a file (state.db itself)."""
    if not given.strip():
        raise command_args.ArgumentError("--hermes-home is empty: give the Hermes profile folder (the one that holds "
                                         "state.db), or leave the flag out for $HERMES_HOME or ~/.hermes")
    try:
        home = Path(given).expanduser()
        is_file = not stat.S_ISDIR(home.stat().st_mode)
    except RuntimeError:  # ~user of no user (pathlib: "Could not determine home directory")
        raise command_args.ArgumentError(f"--hermes-home: {errors.echo(given)}: no such user's home folder") from None
    except OSError as exc:
        if exc.errno not in _ABSENT:  # a name too long for the file system, a folder on the way that cannot be searched
            raise command_args.ArgumentError(f"--hermes-home: {errors.echo(given)}: {exc.strerror or exc}") from None
        is_file = False
    if is_file:
        raise command_args.ArgumentError(f"--hermes-home is a file, not a folder: {errors.echo(home)} (the profile "
                                         f"folder is the one that holds state.db: {errors.echo(home.parent)}?)")
    return home


@contextmanager
def _profile(home: Path | None) -> Iterator[Path]:
    """The profile folder, exported as ``HERMES_HOME`` for Hermes' own helpers while the command runs."""
    if home is None:
        yield paths.hermes_home()
        return
    previous = os.environ.get("HERMES_HOME")
    os.environ["HERMES_HOME"] = str(home)
    try:
        yield home
    finally:
        if previous is None:
            os.environ.pop("HERMES_HOME", None)
        else:
            os.environ["HERMES_HOME"] = previous


class _Progress:
    """``index``'s progress on ``stream``: on a terminal one line redrawn in place, cut to the terminal's width so that
    it never wraps (a narrow window filled with copies of it); elsewhere (a log file, a pipe) a plain line every
    :data:`PLAIN_EVERY_S` seconds and the last one, rather than thousands of ``\\r`` redraws."""

    PLAIN_EVERY_S = 10.0

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.started = self.shown = time.monotonic()
        self.drawn = False
        try:
            self.tty = bool(stream.isatty())
        except (AttributeError, ValueError, OSError):
            self.tty = False

    def _columns(self) -> int:
        try:
            return os.get_terminal_size(self.stream.fileno()).columns
        except (AttributeError, ValueError, OSError):  # not a real file: $COLUMNS, else 80
            value = os.environ.get("COLUMNS", "")
            return int(value) if value.isdigit() and int(value) > 0 else 80

    def __call__(self, done: int, total: int) -> None:
        rate = done / max(time.monotonic() - self.started, 1e-6)
        text = f"{done}/{total} messages  {rate:.0f}/s"
        if not self.tty:
            if done >= total or time.monotonic() - self.shown >= self.PLAIN_EVERY_S:
                self.stream.write(text + "\n")
                self.stream.flush()
                self.shown = time.monotonic()
            return
        room = self._columns() - 1  # the last column would wrap on some terminals
        width = min(30, room - len(text) - 3)
        if width >= 5:
            filled = int(width * done / total) if total else width
            text = f"[{'#' * filled}{'.' * (width - filled)}] {text}"
        self.stream.write("\r" + text[:room].ljust(room))
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        """End the line the bar was drawn on (nothing when none was)."""
        if self.drawn:
            self.stream.write("\n")
            self.drawn = False


def _folder(args: argparse.Namespace) -> str:
    folder = args.cwd if args.cwd is not None else Path.cwd()
    try:
        is_dir = folder.expanduser().is_dir()
    except (OSError, RuntimeError):  # a name too long for the file system, a ~user of no user
        is_dir = False
    if not is_dir:
        raise command_args.ArgumentError(f"--cwd is not a folder: {errors.echo(folder)}")
    try:
        str(folder).encode("utf-8")
    except UnicodeEncodeError:  # bytes the file system encoding did not read: no folder Hermes records is named so
        encoding = sys.getfilesystemencoding()
        shown = os.fsencode(folder).decode("utf-8", "replace")
        raise command_args.ArgumentError(
            f"{'--cwd' if args.cwd is not None else 'the current folder'} {errors.echo(shown)}: its name is not text "
            f"in {encoding}, the encoding this process reads file names in, so it matches no folder Hermes records"
            + ("" if encoding == "utf-8" else " (a locale such as LC_ALL=C, with PYTHONUTF8=0): run it with "
               "PYTHONUTF8=1 or a UTF-8 locale (LC_ALL=C.UTF-8)")) from None
    return status.folder_of(folder)


#: How the text output names its next page: the same command with this cursor.
NEXT_PAGE = "add --cursor {cursor} for the next page"


def _flag(flag: command_args.Flag, raw: str | None, default: Any) -> Any:
    """A flag's value checked as the slash commands check it, ``default`` when not given."""
    return default if raw is None else command_args.check_value(flag, raw)


def _search(args: argparse.Namespace, home: Path) -> tuple[dict[str, Any], str]:
    query = " ".join(args.query)
    if not query.strip():
        raise command_args.ArgumentError("the query is empty: pass the words or question to search for")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError:  # bytes neither the locale's encoding nor UTF-8 read (_as_typed): no words to look for
        try:
            shown = repr(os.fsencode(query))
        except UnicodeError:
            shown = ascii(query)
        raise command_args.ArgumentError(f"the query is not text: it holds bytes that are not UTF-8 (nor "
                                         f"{sys.getfilesystemencoding()}, this locale's encoding): {errors.echo(shown)}"
                                         ) from None
    mode = _flag(command_args.MODE, args.mode, "hybrid")
    limit = _flag(command_args.SEARCH_LIMIT, args.limit, search.DEFAULT_LIMIT)
    role = _flag(command_args.ROLE, args.role, None)
    filters = command_args.dates(args.since, args.until, role)
    cwd = _folder(args)
    answer = search.search_history(
        home=home, query=query, mode=mode, limit=limit, cwd=cwd, filters=filters, cursor=args.cursor
    )
    return answer, _outside(answer, render.render_search(answer, cwd=cwd, next_page=NEXT_PAGE))


def _recent(args: argparse.Namespace, home: Path) -> tuple[dict[str, Any], str]:
    limit = _flag(command_args.RECENT_LIMIT, args.limit, browse.RECENT_DEFAULT)
    filters = command_args.dates(args.since, args.until)
    cwd = _folder(args)
    answer = browse.recent_sessions(home=home, cwd=cwd, limit=limit, filters=filters, cursor=args.cursor)
    return answer, _outside(answer, render.render_recent(answer, cwd=cwd, next_page=NEXT_PAGE))


#: What a folder in no project can do instead (the command line's: a slash command's folder is Hermes').
OUTSIDE = (f"(--cwd DIR looks in the project of another folder; `{PROG} projects` lists the projects, their folders "
           "and sessions)")


def _outside(answer: dict[str, Any], text: str) -> str:
    """``text``, and :data:`OUTSIDE` after it when the folder is in no project."""
    home = answer.get("success") and (answer.get("project") or {}).get("kind") == "home"
    return f"{text}\n{OUTSIDE}" if home else text


def _projects(args: argparse.Namespace, home: Path) -> tuple[dict[str, Any], str]:
    answer = status.list_projects(home=home)
    return answer, render.render_projects(answer)


def _index(args: argparse.Namespace, home: Path) -> tuple[dict[str, Any], str]:
    progress = _Progress(sys.stderr)
    try:
        answer = indexing.index_projects(home=home, progress=progress)
    except KeyboardInterrupt:  # each batch is stored whole as it is embedded
        raise KeyboardInterrupt("the messages embedded so far are kept; index again goes on from there") from None
    finally:
        progress.close()
    return answer, render.render_index_run(answer)  # no deadline here: nothing remains to run again for


def _status(args: argparse.Namespace, home: Path) -> tuple[dict[str, Any], str]:
    answer = status.profile_status(home=home)
    return answer, render.render_status(answer)


class _Warnings(logging.Handler):
    """The warnings logged while a command runs (any logger's, ``WARNING`` and above), kept to be said beside its
    answer: without a handler, Python's last resort prints each one bare on stderr, as often as it is logged, and
    repeats what the answer's notes say."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def unsaid(self, answer: Any) -> list[str]:
        """The warnings' messages, each once and on one line (a YAML error's spans several), but for those whose words
        (:func:`errors.said_as`) ``answer`` holds."""
        held = list(_texts(answer))
        unsaid: dict[str, None] = {}
        for record in self.records:
            words = getattr(record, errors.SAID_AS, "")
            if words and any(words in text for text in held):
                continue
            try:
                message = record.getMessage()
            except (TypeError, ValueError):  # arguments that do not fit the message: said as logged
                message = str(record.msg)
            unsaid[" ".join(message.split())] = None
        return list(unsaid)


def _texts(value: Any) -> Iterator[str]:
    """Every string an answer holds, its nested lists and objects' included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _texts(item)


@contextmanager
def _warnings_kept() -> Iterator[_Warnings]:
    """A :class:`_Warnings` on the root logger while the block runs."""
    kept = _Warnings()
    root = logging.getLogger()
    root.addHandler(kept)
    try:
        yield kept
    finally:
        root.removeHandler(kept)


COMMANDS = {"search": _search, "recent": _recent, "projects": _projects, "index": _index, "status": _status}


def _failure(error: str, code: str, **extra: Any) -> dict[str, Any]:
    return {"success": False, "error": error, "code": code, **extra}


#: The flags an em or en dash may stand for (``—mode``, as smart punctuation writes ``--mode``): the slash commands'.
_FLAG_NAMES = frozenset({f.name for g in (command_args.SEARCH, command_args.RECENT) for f in g.flags}
                        | {"--cwd", "--cursor", "--json", "--hermes-home", "--help", "--version"})


def _plain(argv: Sequence[str]) -> list[str]:
    """``argv`` with a flag written with an em or en dash read as ``--`` (``command_args.plain_dashes``), up to ``--``."""
    cut = list(argv).index("--") if "--" in argv else len(argv)
    return [command_args.plain_dashes(a, _FLAG_NAMES) for a in argv[:cut]] + list(argv[cut:])


#: The flags whose values name files: given to the file system as the process received them.
_PATH_FLAGS = ("--cwd", "--hermes-home")


def _as_typed(arg: str) -> str:
    """An argument as typed: where the locale's encoding is not UTF-8 (``LC_ALL=C``, with ``PYTHONUTF8=0`` keeping
    Python to it), Python reads the bytes of a UTF-8 word (数据库) as surrogate escapes, and they are read as UTF-8
    again; bytes that are not UTF-8 either are kept as they came."""
    try:
        arg.encode("utf-8")
        return arg
    except UnicodeEncodeError:  # surrogate escapes: bytes the locale's encoding did not read
        pass
    try:
        return os.fsencode(arg).decode("utf-8")
    except UnicodeError:  # not UTF-8 either (or a lone surrogate that escapes no byte)
        return arg


def _typed(argv: Sequence[str]) -> list[str]:
    """The process's arguments as typed (:func:`_as_typed`) with dashes made plain (:func:`_plain`), but for the
    values of :data:`_PATH_FLAGS`: a folder's name is passed to the file system in the form the process received it,
    which is the one the file system takes whatever the locale."""
    plain = _plain([_as_typed(a) for a in argv])
    cut = plain.index("--") if "--" in plain else len(plain)
    for i in range(cut):
        name, eq, _ = plain[i].partition("=")
        if eq and name in _PATH_FLAGS:
            plain[i] = f"{name}={argv[i].partition('=')[2]}"
        elif plain[i] in _PATH_FLAGS and i + 1 < len(argv):
            plain[i + 1] = argv[i + 1]
    return plain


def _wants_json(argv: Sequence[str]) -> bool:
    """Whether ``--json`` (or a prefix argparse takes for it) is among the flags of arguments argparse refused."""
    flags = list(argv)[:list(argv).index("--")] if "--" in argv else list(argv)
    return any(a.startswith("--j") and "--json".startswith(a) for a in flags)


def _dashed_query(parser: argparse.ArgumentParser, given: Sequence[str], query: Sequence[str] = ()) -> str:
    """For ``search``, what to do about words that start with ``-`` and are no flag of it: one close to a flag's name
    (``--mo``, ``--limt``) is named with that flag; the others (``--force-with-lease``, ``-x``) are read as flags, so
    the query (``query``, what argparse took of it) goes after ``--``."""
    if not parser.prog.endswith(" search"):
        return ""
    known = _FLAG_NAMES | {"-h"}
    cut = list(given).index("--") if "--" in given else len(given)
    dashed = [a for a in given[:cut] if a.startswith("-") and len(a) > 1 and a.partition("=")[0] not in known]
    notes, rest = [], []
    for word in dashed:
        name = word.partition("=")[0]
        close = [f for f in sorted(known) if len(name) > 2 and f.startswith(name)] or \
            difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
        if close:
            notes.append(f"{errors.echo(name)}: did you mean {close[0]}?")
        else:
            rest.append(word)
    words = [a for a in given[:cut] if a in rest or a in query]
    if rest:
        notes.append(f"{errors.echo(' '.join(rest))}: read as a flag; a query with words that start with - goes after "
                     f"--, as in: {PROG} search -- {errors.echo(' '.join(words))}")
    return f" ({'; '.join(notes)})" if notes else ""


def _refuse(parser: argparse.ArgumentParser, message: str, *, as_json: bool) -> int:
    """A usage error: the usage line and ``<prog>: error: message`` on stderr, and with ``--json`` the failure answer
    (``bad_argument``) on stdout. Returns :data:`EXIT_USAGE`."""
    parser.print_usage(sys.stderr)
    if as_json:
        _emit(_as_json(_failure(message, "bad_argument")), sys.stdout)
    _say(f"{parser.prog}: error: {message}", sys.stderr)
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (0 ok, 1 failure, 2 usage, 130 interrupted, 141 output pipe closed).
    Never raises."""
    given = _typed(sys.argv[1:]) if argv is None else _plain(argv)
    try:
        code = _run(given)
        sys.stdout.flush()  # a reader gone (``| head``) shows here, not as a traceback at exit
        return code
    except BrokenPipeError:
        _silence()
        return EXIT_PIPE
    except KeyboardInterrupt as exc:  # Ctrl-C: one line, no traceback, the shell's code for SIGINT
        try:
            if _wants_json(given):
                _emit(_as_json(_failure("interrupted" + (f": {exc}" if str(exc) else ""), "interrupted")), sys.stdout)
                sys.stdout.flush()
            sys.stderr.write(f"{PROG}: interrupted{': ' + str(exc) if str(exc) else ''}\n")
            sys.stderr.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass
        return EXIT_INTERRUPTED


def _silence() -> None:
    """Point stdout and stderr at /dev/null after a reader of them went away, so that the flush at exit is quiet."""
    for stream in (sys.stdout, sys.stderr):
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # not a real file (a test's capture): nothing is flushed at exit
            pass


def _run(given: list[str]) -> int:
    """:func:`main` of the arguments ``given`` (dashes made plain), but for a closed output pipe and Ctrl-C, which
    it lets through."""
    parser = build_parser()
    try:
        args, extras = parser.parse_known_args(given)
    except _Refused as exc:  # an unknown command, a flag twice or without its value, no query
        return _refuse(exc.parser, str(exc) + _dashed_query(exc.parser, given), as_json=_wants_json(given))
    except SystemExit as exc:  # argparse: --help / --version exit 0
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    as_json = bool(getattr(args, "json", False))
    command_parser = parser.subcommands[args.command]  # type: ignore[attr-defined]
    if extras:  # refused with the command's usage, not the program's
        return _refuse(command_parser, f"unrecognized arguments: {' '.join(extras)}"
                       + _dashed_query(command_parser, given, [*getattr(args, "query", ()), *extras]),
                       as_json=as_json or _wants_json(given))
    try:
        folder = _profile_folder(args.hermes_home) if hasattr(args, "hermes_home") else None
    except command_args.ArgumentError as exc:
        return _refuse(command_parser, str(exc), as_json=as_json)
    error_line = ""
    with _profile(folder) as home, _warnings_kept() as logged:
        try:
            answer, text = COMMANDS[args.command](args, home)
        except command_args.ArgumentError as exc:  # what argparse accepted but the command cannot use
            return _refuse(command_parser, str(exc), as_json=as_json)
        except errors.StoreError as exc:
            if exc.code == "bad_argument":  # a cursor that is not this search's: a usage error, as README says
                return _refuse(command_parser, str(exc), as_json=as_json)
            where = exc.details.get("path")
            answer, text = _failure(str(exc), exc.code, **({"path": where} if where else {})), ""
            hint = " (set --hermes-home or $HERMES_HOME to the Hermes profile folder)" if isinstance(exc, errors.NoStateDB) else ""
            error_line = f"{PROG} {args.command}: {exc}{': ' + where if where else ''}{hint}"
        except sqlite3.DatabaseError as exc:
            answer, text = _failure(f"database error: {exc}", "db_error"), ""
        except Exception as exc:  # the process boundary: one line, never a traceback
            answer, text = _failure(f"internal error: {type(exc).__name__}: {exc}", "internal_error"), ""
    ok = bool(answer.get("success"))
    warnings = logged.unsaid(answer)  # each problem once: what the answer says is not said again
    if as_json:
        if warnings:
            answer = {**answer, "warnings": [*answer.get("warnings", ()), *warnings]}
        _emit(_as_json(answer), sys.stdout)
    elif text and (ok or args.command == "status"):  # a failed status still shows what was found
        _say(text, sys.stdout)
    sys.stdout.flush()  # before the lines on stderr, where both go to one terminal or file
    if not as_json:
        for warning in warnings:
            _say(f"{PROG} {args.command}: warning: {warning}", sys.stderr)
    if not ok:
        _say(error_line or f"{PROG} {args.command}: {answer.get('error') or 'failed'}", sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
