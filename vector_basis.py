"""The principal directions of a model's vectors, for a cheap first pass over a large scope.

Most of a text embedding's dot products are carried by a few directions: along the ``columns(dims)`` that
carry the most (the top eigenvectors of the vectors' second moment), ``(basis.T @ q) @ (basis.T @ x)`` is
close to ``q @ x`` for ``COLUMNS_SHARE`` of the bytes read. A large scope is scored that way first, and only
its best ``KEEP_SHARE`` of rows exactly (:func:`vector_scores.two_pass`). Pure numpy over arrays the caller
passes (opens no file); deterministic for a given input.
"""

from __future__ import annotations

import numpy as np

#: Rows before the vector files get a basis at all.
BASIS_FROM_ROWS = 50_000
#: A scope is scored in two passes from this many rows of its own (fewer: one exact pass is cheap).
TWO_PASS_FROM_ROWS = 50_000
#: Share of a scope's rows the first pass keeps for the exact one (at least ``KEEP_AT_LEAST``).
KEEP_SHARE = 0.02
KEEP_AT_LEAST = 4_096
#: Learn the basis again once the files hold this many times the rows it was learned from.
RELEARN_GROWTH = 4
SAMPLE = 16_384  # rows the basis is learned from, at most (spread over the whole file)
BLOCK = 16_384  # rows projected per product (bounds the transient copy)


COLUMNS_SHARE = 0.375  # directions kept, as a share of the dimensions (192 of 512)


def columns(dims: int) -> int:
    """How many directions the first pass uses for vectors of ``dims``: ``COLUMNS_SHARE`` of them."""
    return int(dims * COLUMNS_SHARE)


def learn(vectors: np.ndarray, *, seed: int = 0) -> np.ndarray:
    """The ``columns(dims)`` directions of ``vectors`` (rows; may be mapped) carrying the most of their dot products,
    as a ``(dims, columns)`` float32 matrix with orthonormal columns.

    Learned from at most ``SAMPLE`` rows spread over the file, not centred (dot products count the mean too),
    rows that are not finite left out. Raises ``ValueError`` when there are no finite rows or too few dimensions.
    """
    rows, dims = vectors.shape
    if not rows or not columns(dims):
        raise ValueError("no vectors, or too few dimensions, to learn a basis from")
    rng = np.random.default_rng(seed)
    take = np.sort(rng.choice(rows, size=min(rows, SAMPLE), replace=False))
    sample = np.asarray(vectors[take], dtype=np.float32)  # SAMPLE x dims float32, once
    sample = sample[np.isfinite(sample).all(axis=1)]  # a NaN from an endpoint would void every direction
    if not len(sample):
        raise ValueError("no finite vectors to learn a basis from")
    values, directions = np.linalg.eigh((sample.T @ sample).astype(np.float64) / len(sample))
    return np.ascontiguousarray(directions[:, np.argsort(values)[::-1][: columns(dims)]], dtype=np.float32)


def project(vectors: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """Each row's coordinates along ``basis``, ``(rows, columns)`` little-endian float32; ``BLOCK`` rows at a time
    (callers pass at most a block or so: the answer is held in memory)."""
    out = np.empty((len(vectors), basis.shape[1]), dtype="<f4")
    for start in range(0, len(vectors), BLOCK):
        out[start : start + BLOCK] = np.asarray(vectors[start : start + BLOCK], dtype=np.float32) @ basis
    return out


def kept(rows: int) -> int:
    """How many of a scope's ``rows`` the first pass keeps for the exact one."""
    return min(rows, max(KEEP_AT_LEAST, int(KEEP_SHARE * rows)))
