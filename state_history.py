"""Whether state.db still holds the history the embeddings index was built on (pure).

Everything the index keeps about state.db is keyed by message id (vectors, "complete up to" marks,
watermarks). Hermes hands each id out once (AUTOINCREMENT), but a state.db put back from an older copy
(``/snapshot restore``, ``hermes import``, a backup) hands out the lost ids again, to other messages. No answer
shows it (every hit is checked against state.db: :mod:`vector_leg`), but those messages would never be embedded.

So the index keeps a *history*: state.db's id counter when it last wrote, and the ``(id, timestamp)`` of the
message at or below each of the ``DENSE`` newest ids, then at or below ``counter - (SPACING**k - 1)``. Every
write of the index checks the stored history and stores the current one, under the index's write lock.
State.db has parted from it when its counter is lower or a point has another timestamp; what the index knows
above the highest point below which every point still matches is dropped. A point deleted since (an
``/undo``) proves neither; it only lowers that bound once they have parted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: How many of the newest ids are each a point (a restore that loses few messages hands these out again)
DENSE = 8
#: How much farther apart each point below those is than the one above it
SPACING = 4
#: The most points spaced so: 4**15 ids below the counter reaches past a billion messages
MAX_POINTS = 16


@dataclass(frozen=True)
class History:
    """state.db's message id counter when the index last wrote, and ``(id, timestamp)`` points at or below it."""

    counter: int
    points: tuple[tuple[int, float], ...]


def targets(counter: int) -> list[int]:
    """The ids to take points at for ``counter``: the ``DENSE`` newest, then ``counter - (SPACING**k - 1)`` below
    them; highest first, none below 1."""
    out = [counter - j for j in range(DENSE) if counter - j >= 1]
    for k in range(MAX_POINTS):
        target = counter - (SPACING**k - 1)
        if target < 1:
            break
        if target < counter - DENSE + 1:
            out.append(target)
    return out


def encode(history: History) -> str:
    """``history`` as the JSON text stored in embeddings.db's ``meta``."""
    return json.dumps({"counter": history.counter, "points": [list(p) for p in history.points]})


def decode(text: Any) -> History | None:
    """The history stored as ``text``; ``None`` when there is none or it does not read as one (then the next
    write replaces it)."""
    if not isinstance(text, str):
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or type(data.get("counter")) is not int or not isinstance(data.get("points"), list):
        return None
    points = data["points"]
    if not all(isinstance(p, list) and len(p) == 2 and type(p[0]) is int and type(p[1]) in (int, float) for p in points):
        return None
    return History(data["counter"], tuple((p[0], float(p[1])) for p in points))


def parted_at(known: History, counter: int, found: Mapping[int, float]) -> int | None:
    """``None`` while state.db still holds the history ``known``: its ``counter`` is not lower and every point
    in ``found`` (``{id: timestamp}`` of those still there) has its timestamp. Otherwise the highest point at
    most ``counter`` up to which every point is still there with its timestamp (0 when none)."""
    if counter >= known.counter and all(found[i] == stamp for i, stamp in known.points if i in found):
        return None
    same = 0
    for i, stamp in sorted(known.points):
        if i > counter or found.get(i) != stamp:
            break
        same = i
    return same


def of(counter: int, points: Sequence[tuple[int, float]]) -> History:
    """The history to store for state.db's ``counter`` and the ``points`` read at :func:`targets` (highest first, distinct)."""
    seen: dict[int, float] = {}
    for i, stamp in points:
        seen.setdefault(int(i), float(stamp))
    return History(int(counter), tuple(sorted(seen.items(), reverse=True)))
