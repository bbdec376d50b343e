"""The command line (``command_line.py``), however this folder was installed; a Ctrl-C while it loads included.

* ``project-history-recall`` (a pip install's console script) and ``python -m project_history_recall``: run as the
  package.
* ``python <the plugin folder>`` (a drop-in or ``hermes plugins install``, where the folder is
  ``project-history-recall`` and cannot be imported by that name): the folder is loaded as the package
  ``project_history_recall`` first, then run.

The command line's modules take a moment to load (half a second on a busy machine: the redaction patterns compile);
:func:`main` loads them where a Ctrl-C meanwhile ends the command as one during it does (130, one line), not with a
traceback. So this module and the package's ``__init__`` import none of them at import.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path

#: As ``command_line`` says an interrupted command (not imported from there: loading it is what may be interrupted):
#: the line on stderr, and with ``--json`` the failure answer on stdout.
INTERRUPTED_LINE = "project-history-recall: interrupted\n"
INTERRUPTED_ANSWER = {"success": False, "error": "interrupted", "code": "interrupted"}
EXIT_INTERRUPTED = 130


def _wants_json(argv: Sequence[str]) -> bool:
    """Whether ``--json`` (or a prefix of it, or ``—json`` as smart punctuation writes it) is among the flags of ``argv``
    (before ``--``), as ``command_line`` reads it."""
    flags = list(argv)[: list(argv).index("--")] if "--" in argv else list(argv)
    plain = ["--" + a[1:] if a[:1] in ("\u2014", "\u2013") else a for a in flags]
    return any(a.startswith("--j") and "--json".startswith(a) for a in plain)


def _load_folder() -> None:
    """This folder, run by path, loaded as the package ``project_history_recall``."""
    folder = Path(__file__).resolve().parent
    if sys.path and Path(sys.path[0] or ".").resolve() == folder:
        sys.path.pop(0)  # the folder's own modules must not shadow Hermes' (``tools``, ``cli``)
    spec = importlib.util.spec_from_file_location(
        "project_history_recall", folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    assert spec is not None and spec.loader is not None  # a .py file's: always found, with a source file loader
    package = importlib.util.module_from_spec(spec)
    sys.modules["project_history_recall"] = package
    spec.loader.exec_module(package)


def main(argv: Sequence[str] | None = None) -> int:
    """Load the command line and run it on ``argv`` (default: the process's arguments); returns its exit code, 130
    when a Ctrl-C comes while it loads."""
    try:
        if __package__:
            from .command_line import main as run
        else:
            _load_folder()
            from project_history_recall.command_line import main as run
    except KeyboardInterrupt:
        try:
            if _wants_json(sys.argv[1:] if argv is None else argv):
                sys.stdout.write(json.dumps(INTERRUPTED_ANSWER, indent=2) + "\n")
                sys.stdout.flush()
            sys.stderr.write(INTERRUPTED_LINE)
            sys.stderr.flush()
        except (OSError, ValueError):  # stderr closed too
            pass
        return EXIT_INTERRUPTED
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
