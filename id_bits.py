"""A set of message ids as a bitmap: bit ``i`` (little-endian within each byte) is set when id ``i`` is in it.

Pure: numpy arrays in, numpy arrays out, nothing read or written. The index uses one to remember the
state.db messages it never needs to read again (:meth:`vector_index.VectorIndex.never_indexed`): a
million ids fit in 125 KB, and asking about every id of a large project is one vectorised lookup.
Ids are non-negative (Hermes' message ids start at 1); a bitmap is a 1-d ``uint8`` array, the empty
one holding nothing.
"""

from __future__ import annotations

import numpy as np

EMPTY = np.zeros(0, dtype=np.uint8)


def members(bits: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """A boolean array, one value per id of ``ids`` (int64, any order): whether ``bits`` holds it."""
    byte = ids >> 3
    inside = (ids >= 0) & (byte < len(bits))
    out = np.zeros(len(ids), dtype=bool)
    out[inside] = ((bits[byte[inside]] >> (ids[inside] & 7).astype(np.uint8)) & 1).astype(bool)
    return out


def with_ids(bits: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """A new bitmap holding what ``bits`` holds and every id of ``ids`` (int64, non-negative); grown as needed."""
    if not len(ids):
        return bits.copy()
    flags = np.zeros(max(len(bits), int(ids.max()) // 8 + 1) * 8, dtype=bool)
    flags[ids] = True
    return union(np.packbits(flags, bitorder="little"), bits)


def union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A new bitmap holding every id of either."""
    if len(a) < len(b):
        a, b = b, a
    out = a.copy()
    out[: len(b)] |= b
    return out


def count(bits: np.ndarray) -> int:
    """How many ids ``bits`` holds."""
    return int(np.unpackbits(bits).sum()) if len(bits) else 0


def sample(bits: np.ndarray, k: int) -> list[int]:
    """Up to ``k`` ids of ``bits``, spread evenly over them in ascending order, the highest always among them
    (``[]`` when it holds none): what a check of the set against its source reads."""
    held = np.flatnonzero(np.unpackbits(bits, bitorder="little")) if len(bits) else np.zeros(0, dtype=np.int64)
    if not len(held):
        return []
    picks = np.unique(np.linspace(0, len(held) - 1, num=min(k, len(held))).round().astype(np.int64))
    return [int(i) for i in held[picks]]
