"""``python -m project_history_recall``: the command line in ``cli.py``."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
