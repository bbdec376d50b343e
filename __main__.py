"""The command line (``command_line.py``), however this folder was installed.

* ``python -m project_history_recall`` (a pip install): run as the package.
* ``python <the plugin folder>`` (a drop-in or ``hermes plugins install``,
  where the folder is ``project-history-recall`` and cannot be imported by
  that name): the folder is loaded as the package ``project_history_recall``
  first, then run.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _run_folder() -> int:
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
    from project_history_recall.command_line import main

    return main()


if __package__:  # imported or run as the package (``python -m``, ``from project_history_recall.__main__ import main``)
    from .command_line import main

    if __name__ == "__main__":
        sys.exit(main())
elif __name__ == "__main__":
    sys.exit(_run_folder())
