"""Everything the plugin keeps for the life of a Hermes process, listed in one place.

Each Hermes CLI window, the gateway and every cron run is its own process;
what is kept here lives as long as that process and never on disk.
:data:`DECLARED` names every cache, what it holds and what makes it stale;
the modules that fill them own the logic, this module only owns the data
(it imports nothing of the plugin: the bottom layer). :func:`reset` empties
everything (tests).

Keys are compared exactly (by value), never by ``hash()``: a collision must
never serve one project's scope to another.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

#: name -> (what it holds, what makes it stale)
DECLARED: dict[str, tuple[str, str]] = {
    "settings": ("config.yaml parsed into settings, cron/jobs.json into the jobs' folders, per file",
                 "the file's size, mtime, ctime or inode changes"),
    "git_roots": ("folder -> main repo root, as git answered", "never for a root found; an empty answer after 30 s"),
    "attributors": (
        "per profile and list of projects: workspace -> project",
        "the list of projects changes; each workspace's answer after 60 s",
    ),
    "membership": (
        "per state.db: every session's workspace and project, the searchable ones by project (each project's also sorted, "
        "until a session joins or leaves it)",
        "sessions deleted, the projects or the cron jobs' folders changed, a move by this process, the file replaced, "
        "or 5 minutes; "
        "after 60 s it is read again in the background (new and the 64 newest sessions are re-read on every search)",
    ),
    "membership_reloads": ("per state.db: the thread reading every session again in the background", "it ends"),
    "term_counts": ("per state.db and FTS index: term -> rows holding it; whether the trigram index holds CJK",
                    "10 minutes; a term in no row is never kept; a no-CJK answer holds for its file and history only"),
    "session_ranges": (
        "per state.db: session -> lowest and highest message id, of the sessions searched (every one after the warm-up)",
        "the file replaced or restored in place (newer messages are read past a watermark)",
    ),
    "scope_filters": (
        "per state.db: the last four scopes' message id filters, built from the session ranges (one byte per id)",
        "the file replaced, the scope's sessions change, or state.db grows by 20,000 ids",
    ),
    "semantic_complete": (
        "per vector index and asking scope (a project's sessions less the asking conversation): fully indexed up to "
        "a message id; the 64 most recently used kept",
        "another scope (its own entry), a repair here (the index's generation) or anywhere (the marks' stamp), "
        "state.db put back from an older copy",
    ),
    "semantic_lacking": (
        "per vector index and asking scope, while its index is partial: the message ids it lacks up to a state.db id "
        "and an index chunk id, how many it should hold, and those too long for a search (left out of its searches); "
        "what is newer is read; the 8 most recently used kept",
        "a message deleted or rewound below its state.db id is listed until its text is read (only what the index "
        "should hold is read: the others leave the record) or 10 minutes pass (a full check); a repair (the index's "
        "generation or the marks' stamp) or the scope complete voids it",
    ),
    "vector_indexes": (
        "per embeddings.db path: the open index and the vectors it loaded",
        "the file replaced or deleted (device and inode), found damaged, or another model configured",
    ),
    "index_problems": (
        "per embeddings.db path: a permanent problem (read-only, a newer schema, a folder at the path)",
        "the file's or its folder's status (stat) changes",
    ),
    "warm_up": (
        "the background threads loading the vector leg (the warm-up, a first search's preparation, the model's load)"
        " and the profiles whose first search prepared it",
        "a thread ends (one of each runs at a time); the profiles for the life of the process",
    ),
    "unicode61": (
        "character -> what FTS5's unicode61 tokenizer makes of it, asked of this process's SQLite",
        "never: it depends only on the SQLite library loaded",
    ),
}


@dataclass
class Cache:
    """A process-wide mapping and its lock (what it holds and what makes it stale: :data:`DECLARED`)."""

    name: str
    data: dict[Any, Any] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    on_reset: Callable[[dict[Any, Any]], None] | None = None

    def clear(self) -> None:
        with self.lock:
            if self.on_reset is not None:
                self.on_reset(self.data)
            self.data.clear()


_CACHES: dict[str, Cache] = {}


def cache(name: str, *, on_reset: Callable[[dict[Any, Any]], None] | None = None) -> Cache:
    """The declared cache ``name`` (created on first use). Raises ``KeyError`` for a name not in :data:`DECLARED`.

    ``on_reset``, given by the cache's one owner where it first asks for it, is called with the data
    before :func:`reset` empties it (to close what it holds).
    """
    if name not in DECLARED:
        raise KeyError(name)
    found = _CACHES.get(name)
    if found is None:
        found = _CACHES[name] = Cache(name, on_reset=on_reset)
    return found


def caches() -> Iterator[Cache]:
    """Every cache created so far."""
    return iter(list(_CACHES.values()))


def reset() -> None:
    """Forget everything this process keeps (tests; harmless at any time)."""
    for entry in caches():
        entry.clear()
