"""The layering holds: every plugin module imports only modules below it, and each is short enough to read.

Read from the code itself (``ast``), lazy imports inside functions included.
Imports under ``if TYPE_CHECKING:`` are for annotations only and never run,
so they are not counted. A new module must be placed in :data:`LAYERS`
first: the test fails on a module it does not know.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Top to bottom. A module may import only modules of a later (lower) layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__", "__main__"),  # entry points wired by Hermes or Python
    ("commands", "command_line"),  # people: slash commands, the shell
    ("handlers",),  # the agent: tool schemas and handlers (errors translated here)
    ("status", "command_args"),  # reports for people; the commands' argument grammar
    ("search", "browse"),  # services: one search, reading around and listing
    ("indexing", "vector_leg"),  # the index command; the vector leg of a search (and what state.db confirms of it)
    ("warm_up", "index_check"),  # loading ahead of a first search; what a scope's index lacks
    ("gate",),  # whether semantic search may run, and the user's answer to it
    ("lexical", "move"),  # the keyword leg; the move (the only write to Hermes data)
    ("substring",),  # a scope's messages by substring, where Hermes' FTS indexes do not reach
    ("fts", "vector_index"),  # Hermes' FTS indexes; the private vector index
    ("vector_view",),  # this process's map of the shared vector files
    ("vector_scores", "vector_store"),  # scoring a scope over the mapped vectors; one model's rows in embeddings.db
    ("workspace",),  # projects of folders and sessions, the search scope
    ("session_rows", "conversations", "index_file", "vector_file", "consent"),  # sessions and their workspaces; which make one conversation; embeddings.db's file; the shared vector files; consent.json
    ("session_walk", "index_reads"),  # a session's messages in Hermes' order from where a read starts; what the vector index should hold, by id
    ("store",),  # connections, projects.db, messages
    ("ticks",),  # the copies of one message told apart a clock tick at a time, where a tick holds many rows
    ("embeddings", "settings", "vector_basis", "layout", "folders"),  # providers and vector helpers; settings and the API key; the vectors' principal directions; a state.db's schema facts; git's and the file system's view of a folder
    ("model_cache",),  # the local model's ready-parsed copy, mapped read-only
    ("config_schema",),  # pure: the settings' schema and what consent is about
    ("recency",),  # pure: the current decision first
    ("redact", "pages", "ranking", "snippet", "state_history"),  # pure: redaction, cursors, BM25 and fusion, snippets, state.db histories
    ("command_secrets", "output_secrets", "config_secrets"),  # pure: passwords given to commands (piped in, -P, gh secret set, ENV NAME value); credentials as tools print them; in configuration and encoded bodies, for redaction
    ("code_secrets", "literal_secrets", "table_secrets", "sql_secrets"),  # pure: credentials given as defaults, fallbacks and logins in code; literals in Clojure, SDK clients, Helm and jq; a table's credential column; SQL passwords and Oracle logins
    ("seed_phrases", "prose_secrets", "folding", "cookie_secrets", "random_tokens"),  # pure but for its word list: seed phrases; pure: secrets written as prose, what text is read as, session cookies outside a header, whether a token reads as random, for redaction
    ("secret_labels", "pin_secrets"),  # pure: the labels a credential is written after in prose, and what joins one to its value; PINs, codes and TOTP seeds after their labels
    ("secret_patterns",),  # pure: the shapes of secrets redaction looks for
    ("prefilter",),  # pure: whether a redaction pattern can match a text, by the strings each match contains
    ("answers", "render"),  # pure: what every answer shares, text for people
    ("records",),  # pure: the records every layer passes on (a message, a session, a scope)
    ("query", "attribution", "filters", "paths", "echo"),  # pure core; echoes of recalls
    ("stored_text",),  # pure: a row's content and role as written or asked
    ("errors",),  # pure: the failures, and how much of a value a message repeats
    ("unicode61",),  # pure: FTS5's tokenizer, asked of SQLite in memory
    ("state",),  # the data of every process cache (imports nothing)
)
#: The layers that read no file, open no database file and start no thread.
PURE = LAYERS[-16:]
RANK = {name: depth for depth, layer in enumerate(LAYERS) for name in layer}
MODULES = sorted(p.stem for p in ROOT.glob("*.py"))


def plugin_imports(path: Path) -> set[str]:
    """The plugin modules ``path`` imports (``from . import x``, ``from .x import y``), TYPE_CHECKING blocks left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            typing_only.update(id(sub) for sub in ast.walk(node))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and id(node) not in typing_only:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
    return found


def test_every_module_has_a_layer():
    assert sorted(set(MODULES) - set(RANK)) == [], "place each new module in LAYERS"
    assert sorted(set(RANK) - set(MODULES)) == [], "LAYERS names a module that is gone"


@pytest.mark.parametrize("module", MODULES)
def test_no_import_runs_up_or_sideways(module):
    upward = sorted(m for m in plugin_imports(ROOT / f"{module}.py") if RANK.get(m, -1) <= RANK[module])
    assert upward == [], f"{module} (layer {RANK[module]}) imports {upward}: only lower layers may be imported"


def test_the_pure_core_imports_nothing_with_side_effects():
    """The bottom layer reads no file, opens no database, starts no thread on import: it imports no IO module."""
    pure = {m for layer in PURE for m in layer}
    assert "redact" in pure and "config_schema" in pure
    for module in sorted(pure):
        assert plugin_imports(ROOT / f"{module}.py") <= pure, module


def test_every_module_reads_in_one_sitting():
    """No module over 600 lines and no class over about 300: a module does one job, and a reader can hold it."""
    too_long = []
    for path in sorted(ROOT.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > 600:
            too_long.append(f"{path.name}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and (node.end_lineno or 0) - node.lineno >= 300:
                too_long.append(f"{path.name}: class {node.name}, {(node.end_lineno or 0) - node.lineno + 1} lines")
    assert not too_long, too_long


def test_the_map_names_every_module():
    """docs/architecture.md is the next engineer's map: every module of the plugin is in it, by its name in backticks
    (six had been left out of it)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = sorted(p.stem for p in ROOT.glob("*.py") if f"`{p.stem}`" not in text)
    assert missing == [], missing
