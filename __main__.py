"""``python -m project_history_recall``: the command line in ``command_line.py``."""

from __future__ import annotations

import sys

from .command_line import main

if __name__ == "__main__":
    sys.exit(main())
