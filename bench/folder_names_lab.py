#!/usr/bin/env python3
"""``bench/recall.py`` with the vector leg's query built another way than ``query.vector_queries`` builds it.

Usage::

    python bench/folder_names_lab.py VARIANT [recall.py arguments ...]

Variants (the keyword leg and plain-bm25 are untouched: only semantic and hybrid can move):

* ``shipped``: this checkout unchanged (a check: reproduces ``recall.py``);
* ``whole``: every question embedded as it is, folder names and all (the vector leg before
  ``vector_queries``);
* ``every``: the folder names left out of half of the vector also when the question names
  every folder of the project (``vector_queries`` leaves such a question whole).

After the run, prints per set how many questions had their folder names left out, and which.
"""

from __future__ import annotations

import importlib
import sys
from collections import Counter
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import recall  # noqa: E402
from _common import load_plugin  # noqa: E402

VARIANTS = ("shipped", "whole", "every")
FIRED: Counter[str] = Counter()  # the text left out of half of the vector -> questions


def install(phr: Any, variant: str) -> None:
    """Replace the vector leg's ``vector_queries`` by the variant's, counting what it leaves out."""
    leg = importlib.import_module(f"{phr.__name__}.vector_leg")
    shipped = leg.vector_queries

    def vector_queries(text: str, folders: frozenset[str]) -> tuple[str, ...]:
        if variant == "whole":
            return (text,)
        # One folder fewer than named makes "some but not all": the shipped rule, minus its all-named test.
        made = shipped(text, folders | {"\x00"} if variant == "every" else folders)
        if len(made) > 1:
            FIRED[" ".join(sorted(set(text.split()) - set(made[1].split())))] += 1
        return made

    leg.vector_queries = vector_queries


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in VARIANTS:
        raise SystemExit(__doc__)
    variant = sys.argv[1]
    install(load_plugin(), variant)
    code = recall.main(sys.argv[2:])
    print()
    print(f"variant {variant}: the words left out of half of the vector (searches): {dict(FIRED.most_common())}")
    return code


if __name__ == "__main__":
    sys.exit(main())
