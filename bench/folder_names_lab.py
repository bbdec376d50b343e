#!/usr/bin/env python3
"""``bench/recall.py`` with the vector leg's query vector built another way (issue 30 lab, nothing shipped).

Usage::

    python bench/folder_names_lab.py VARIANT [recall.py arguments ...]

Variants (the keyword leg and plain-bm25 are untouched: only semantic and hybrid can move):

* ``base``: this checkout unchanged (a check: reproduces ``recall.py``);
* ``meanfolder``: where the question names a folder of its scope's project (a word or
  identifier, ``ecommerce-api``, equal case-insensitively, ``_`` read as ``-``, to the
  last segment of one of the explicit project's folders or its primary path, or of an
  auto project's git root), the query vector is the normalised mean of the question's
  vector and the vector of the question without those names. A folder's name says
  where to look, not what is asked; elsewhere the question is embedded as it is;
* ``meanfolder-part``: as ``meanfolder``, only when the question names some of the
  project's folders and not all of them (naming every folder narrows nothing);
* ``meanfound``: the earlier lab's variant A (``/tmp/c30_lab.py``) for comparison:
  the same mean, dropping every identifier (words joined by ``. _ - / : @ # +``) that
  an FTS5 phrase finds in the scope.

After the run, prints per set how many questions the variant rewrote and which names it dropped.
"""

from __future__ import annotations

import importlib
import json
import re
import sqlite3
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import recall  # noqa: E402
from _common import load_plugin  # noqa: E402

_TOKEN = re.compile(r"[^\W_]+(?:[._\-/:@#+][^\W_]+)*[+#]*")  # a word, or words joined into an identifier
_IDENT = re.compile(r"[^\W_]+(?:[._\-/:@#+][^\W_]+)+[+#]*")
_MARK = "\x00Q"

CONTEXT: dict[str, Any] = {"variant": "base", "drop": set(), "home": None}
FIRED: dict[str, Counter[str]] = defaultdict(Counter)  # home -> dropped name -> questions
ASKED: Counter[str] = Counter()


def _norm(name: str) -> str:
    return name.casefold().replace("_", "-")


def folder_names(phr: Any, home: Path, project: Any) -> set[str]:
    """Last segments of the scope project's folders (explicit: projects.db's folders and primary path; auto: the root)."""
    paths: list[str] = []
    if project.kind == "explicit":
        store = importlib.import_module(f"{phr.__name__}.store")
        for record in store.load_projects(home).projects:
            if record.id == project.id:
                paths = [f.path for f in record.folders] + ([record.primary_path] if record.primary_path else [])
    elif project.kind == "auto":
        paths = [project.root]
    attribution = importlib.import_module(f"{phr.__name__}.attribution")
    return {_norm(seg[-1]) for seg in (attribution.path_segments(p) for p in paths if p) if seg}


def found_identifiers(home: Path, scope: Any, query: str) -> set[str]:
    """Identifiers of ``query`` an FTS5 phrase finds in the scope's messages (the earlier lab's rule)."""
    out = set()
    conn = sqlite3.connect((home / "state.db").as_uri() + "?mode=ro", uri=True)
    try:
        for ident in {m.group() for m in _IDENT.finditer(query)}:
            expr = '"' + " ".join(re.findall(r"[^\W_]+", ident)) + '"'
            row = conn.execute("SELECT 1 FROM messages_fts f JOIN messages m ON m.id = f.rowid WHERE messages_fts MATCH ? "
                               "AND m.session_id IN (SELECT value FROM json_each(?)) LIMIT 1",
                               (expr, json.dumps(list(scope.session_ids)))).fetchone()
            if row:
                out.add(ident)
    finally:
        conn.close()
    return out


def install(phr: Any, variant: str) -> None:
    if variant == "base":
        return
    import numpy as np

    embeddings = importlib.import_module(f"{phr.__name__}.embeddings")
    vector_leg = importlib.import_module(f"{phr.__name__}.vector_leg")
    original_embed = embeddings.LocalProvider.embed
    original_leg = vector_leg.semantic_leg

    def without(text: str) -> str:
        folders = variant.startswith("meanfolder")
        pattern = _TOKEN if folders else _IDENT
        key = _norm if folders else (lambda s: s)
        return pattern.sub(lambda m: " " if key(m.group()) in CONTEXT["drop"] else m.group(), text)

    def embed(self: Any, texts: Any) -> Any:
        if len(texts) == 1 and texts[0].startswith(_MARK):
            text = texts[0][len(_MARK):]
            rest = without(text)
            if rest == text or not rest.strip():
                return original_embed(self, [text])
            FIRED[str(CONTEXT["home"])].update({m.group() for m in _TOKEN.finditer(text)} - {m.group() for m in _TOKEN.finditer(rest)})
            both = original_embed(self, [text]) + original_embed(self, [rest])
            return both / np.linalg.norm(both, axis=1, keepdims=True)
        return original_embed(self, texts)

    def semantic_leg(conn: Any, home: Path, scope: Any, query: str, settings: Any, *, index: bool) -> Any:
        if index and not query.startswith(_MARK):
            CONTEXT["home"] = home
            ASKED[str(home)] += 1
            if variant.startswith("meanfolder"):
                names = folder_names(phr, home, scope.project)
                named = {_norm(m.group()) for m in _TOKEN.finditer(query)} & names
                CONTEXT["drop"] = set() if variant == "meanfolder-part" and named == names else names
            else:
                CONTEXT["drop"] = found_identifiers(home, scope, query)
            query = _MARK + query
        return original_leg(conn, home, scope, query, settings, index=index)

    embeddings.LocalProvider.embed = embed
    vector_leg.semantic_leg = semantic_leg


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in ("base", "meanfolder", "meanfolder-part", "meanfound"):
        raise SystemExit(__doc__)
    variant = sys.argv[1]
    phr = load_plugin()
    install(phr, variant)
    code = recall.main(sys.argv[2:])
    print()
    print(f"variant {variant}: vector-leg searches per home, and the names dropped (questions)")
    for home, n in ASKED.items():
        fired = FIRED.get(home, Counter())
        print(f"  {home}: {n} searches; dropped {dict(fired.most_common())}")
    return code


if __name__ == "__main__":
    sys.exit(main())
