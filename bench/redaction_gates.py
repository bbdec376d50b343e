"""Redaction with and without the gates of ``prefilter``: the CPU each takes, and every text they redact apart.

Texts: every distinct string of 20 characters or more in the JSON files under the given folders (the eval sets'
chats), and, with ``--code DIR``, the source and documentation files under DIR (a venv's site-packages) up to
``--code-mb`` megabytes. Each text is redacted with the gates, then without them (``prefilter.may_match`` always
true), in this process. A text redacted apart is printed and counted; the answer must be 0.

Run:
  .venv/bin/python bench/redaction_gates.py <eval>/beam-100k <eval>/mem-gallery <eval>/devmembench \\
      <eval>/memorycode-dev bench/data/devchats --code .venv/lib --code-mb 12
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _common  # noqa: E402

_SUFFIXES = (".py", ".pyi", ".md", ".rst", ".txt", ".cfg", ".toml", ".ini", ".yaml", ".yml", ".json")


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value] if len(value) >= 20 else []
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [s for item in items for s in _strings(item)]


def prose(folders: list[str]) -> list[str]:
    found: dict[str, None] = {}
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.json")):
            found.update(dict.fromkeys(_strings(json.loads(path.read_text(encoding="utf-8")))))
    return list(found)


def code(folder: str, limit: int) -> list[str]:
    out, size = [], 0
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            if size >= limit or not name.endswith(_SUFFIXES):
                continue
            try:
                text = (Path(root) / name).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if 0 < len(text) <= 400_000:
                out.append(text)
                size += len(text)
    return out


def compare(texts: list[str], redact: object, prefilter: object) -> tuple[float, float, int]:
    """``(CPU seconds with gates, without, texts redacted apart)``."""
    gated = prefilter.may_match  # type: ignore[attr-defined]
    with_gates = without = 0.0
    apart = 0
    for text in texts:
        prefilter.may_match = gated  # type: ignore[attr-defined]
        start = time.process_time()
        a = redact.redact_secrets(text)  # type: ignore[attr-defined]
        middle = time.process_time()
        prefilter.may_match = lambda pattern, text: True  # type: ignore[attr-defined]
        b = redact.redact_secrets(text)  # type: ignore[attr-defined]
        with_gates, without = with_gates + middle - start, without + time.process_time() - middle
        if a != b:
            apart += 1
            print("APART", repr(text[:200]), flush=True)
    prefilter.may_match = gated  # type: ignore[attr-defined]
    return with_gates, without, apart


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", help="folders of JSON chats (the eval sets)")
    parser.add_argument("--code", help="a folder of source files (site-packages)")
    parser.add_argument("--code-mb", type=float, default=12.0)
    args = parser.parse_args()
    phr = _common.load_plugin()
    redact, prefilter = (importlib.import_module(f"{phr.__name__}.{m}") for m in ("redact", "prefilter"))
    sets = [("prose", prose(args.folders))]
    if args.code:
        sets.append(("code", code(args.code, int(args.code_mb * 1e6))))
    for name, texts in sets:
        on, off, apart = compare(texts, redact, prefilter)
        mb = sum(map(len, texts)) / 1e6
        print(f"{name}: {len(texts)} texts, {mb:.1f} MB: without gates {off:.1f} s of CPU, with {on:.1f} s; "
              f"redacted apart: {apart}", flush=True)


if __name__ == "__main__":
    main()
