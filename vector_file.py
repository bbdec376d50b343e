"""One model's vectors as files beside embeddings.db that every process maps instead of copying.

embeddings.db's ``chunks`` table stays the truth. Beside it, per model
(``<db>.<digest>.*``, the digest of the model's fingerprint):

* ``.vec``: float32 vectors, one row per chunk, in chunk id order;
* ``.rows``: per row ``[chunk id, message id, session code]`` (int64); a
  message id of ``-1`` marks a row whose chunk is gone (deleted, re-embedded);
* ``.sessions``: the session id of each code, one JSON string per line;
* ``.head``: what is committed (rows, bytes of ``.sessions``, the highest
  chunk id copied, dimensions, which embeddings.db file, the basis),
  replaced atomically;
* ``.lock``: writers take it (``flock``) for every change;
* once the files are large, their principal directions (``vector_basis.py``):
  ``.<token>.basis`` (float32 ``(dims, columns)``, written once) and
  ``.<token>.low`` (float32, each row's coordinates along them, in row order,
  appended with the rows). :meth:`VectorFile.organise` learns a new basis
  under a new token and commits it with the head; the old token's files are
  then deleted.

A writer appends past the committed end, flushes, then replaces ``.head``; a
reader maps only the rows ``.head`` commits, so it never sees a half-written
block. Pages are the operating system's page cache, shared by every Hermes
process that maps them: a process's private memory does not grow with the
index. Marking a row gone is one 8-byte write into a shared mapping, seen at
once by every reader. Learning a basis reads and writes only new files
until its commit, outside the lock: writers are never held up by it.
Anything inconsistent (a file missing or shorter than ``.head`` says, another
embeddings.db, other dimensions) is started over from embeddings.db under the
lock.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import mmap
import os
import re
import secrets
import threading
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import vector_basis

try:
    import fcntl
except ImportError:  # Windows: no flock; one process at a time is what Hermes runs there
    fcntl = None  # type: ignore[assignment]

VERSION = 1
MAX_DIMS = 65_536  # no embedding model has more: a head saying so is damaged
_TOKEN = re.compile(r"[0-9a-f]{16}")  # a basis' token, as secrets.token_hex(8) makes it
#: One appended batch: chunk ids, message ids, session ids, vectors (rows in chunk id order).
Batch = tuple[Sequence[int], Sequence[int], Sequence[str], np.ndarray]


@dataclass(frozen=True)
class Head:
    rows: int = 0
    session_bytes: int = 0
    upto: int = 0  # highest chunk id copied
    dims: int = 0
    db: tuple[Any, ...] | None = None  # (device, inode, token) of the embeddings.db these rows come from
    epoch: str = ""  # new on every start-over: what a reader cached of older files (session names) is void
    basis: str = ""  # token of the basis files ("" = none)
    projected: int = 0  # rows [0, projected) have their coordinates along the basis
    basis_from: int = 0  # rows the basis was learned from

    def restarted_since(self, seen: str, db: tuple[Any, ...] | None, dims: int) -> bool:
        """Whether another process started these files (of the embeddings.db ``db``) over for another size than
        ``dims`` since a process mapped the epoch ``seen``; never when it had mapped none (``""``: its size, just
        learnt, is as new as theirs) or these are no files (an empty head)."""
        return bool(seen and self.epoch) and self.epoch != seen and self.db == db and self.dims != dims


@dataclass(frozen=True)
class View:
    """The committed rows, mapped read-only (no copy): ``vectors`` ``(n, dims)``; ``rows`` ``(n, 3)``; ``names`` by code.

    ``basis`` ``(dims, columns)`` and ``low`` (the coordinates of rows
    ``0..len(low)`` along it, ``(len(low), columns)``) when the files have a
    basis, else ``None``: ``low[i] @ (q @ basis)`` approximates ``vectors[i] @ q``.
    """

    head: Head
    vectors: np.ndarray
    rows: np.ndarray
    names: tuple[str, ...]
    basis: np.ndarray | None = None
    low: np.ndarray | None = None

    @property
    def n(self) -> int:
        return self.head.rows


EMPTY = View(Head(), np.zeros((0, 1), np.float32), np.zeros((0, 3), np.int64), ())


class VectorFileReader:
    """What every process does with the vector files of one model beside one embeddings.db: read the committed
    head and map the rows it commits (see the module docstring). Nothing here writes or takes the lock."""

    def __init__(self, db_path: Path, fingerprint: str) -> None:
        digest = hashlib.sha256(fingerprint.encode("utf-8")).hexdigest()[:16]
        base = Path(db_path).absolute()
        self.prefix = base.with_name(f"{base.name}.{digest}")
        self._paths = {kind: self.prefix.with_name(f"{self.prefix.name}.{kind}") for kind in ("vec", "rows", "sessions", "head", "lock")}
        self._thread_lock = threading.RLock()  # the writer's lock holds it around view()
        self._view: tuple[tuple[Any, ...], View] | None = None
        self._names: list[str] = []
        self._names_read = 0  # bytes of .sessions parsed into _names
        self._names_epoch = ""  # the epoch _names belong to

    def head(self) -> Head:
        """What is committed (an empty head when there is none or it does not read as one: a negative or absurd
        size, a value of the wrong type, nesting too deep to parse). A file of ours is never trusted: an empty
        head makes the next :meth:`append` copy everything again from embeddings.db."""
        try:
            with _own(self._paths["head"], "rb") as f:
                raw = json.loads(f.read().decode("utf-8"))
            if not isinstance(raw, dict) or raw.get("version") != VERSION:
                return Head()
            db = raw.get("db")
            head = Head(int(raw["rows"]), int(raw["session_bytes"]), int(raw["upto"]), int(raw["dims"]),
                        (int(db[0]), int(db[1]), *(str(t) for t in db[2:3])) if db else None, str(raw.get("epoch", "")),
                        str(raw.get("basis", "")), int(raw.get("projected", 0)), int(raw.get("basis_from", 0)))
        except (OSError, ValueError, KeyError, TypeError, IndexError, RecursionError):
            return Head()
        if min(head.rows, head.session_bytes, head.upto, head.dims, head.projected, head.basis_from) < 0 or (
                head.rows and not 0 < head.dims <= MAX_DIMS):
            return Head()
        if head.basis and not (_TOKEN.fullmatch(head.basis) and 0 < head.projected <= head.rows):
            head = dataclasses.replace(head, basis="", projected=0, basis_from=0)  # damaged: as if none (learned again)
        return head

    def view(self, db: tuple[Any, ...] | None) -> View:
        """The committed rows of the embeddings.db ``db`` identifies, mapped (cached until the head changes).

        Empty when nothing is committed for that file, or the files do not
        hold what the head says (the next :meth:`append` starts over).
        """
        head = self.head()
        if head.rows == 0 or head.db != db:
            return EMPTY
        key = (head, _identity(self._paths["vec"]), _identity(self._paths["rows"]),
               _identity(self._basis_path(head.basis, "low")) if head.basis else None)
        with self._thread_lock:
            if self._view is not None and self._view[0] == key:
                return self._view[1]
            try:
                vectors = _map(self._paths["vec"], np.float32, (head.rows, head.dims))
                rows = _map(self._paths["rows"], np.int64, (head.rows, 3))
                names = self._read_names(head)
                _check_codes(rows[:, 2], len(names))
            except (OSError, ValueError):  # damaged: the next append() starts over
                return EMPTY
            basis, low = self._map_basis(head)
            if self.head() != head:  # replaced while mapping: map again on the next call
                return EMPTY
            view = View(head, vectors, rows, tuple(names), basis, low)
            self._view = (key, view)
            return view

    def _basis_path(self, token: str, kind: str) -> Path:
        return self.prefix.with_name(f"{self.prefix.name}.{token}.{kind}")

    def _map_basis(self, head: Head) -> tuple[np.ndarray | None, np.ndarray | None]:
        """``(basis, low)`` of ``head``'s basis, mapped; ``(None, None)`` when there is none or its files do not
        hold what the head says (every search is then one exact pass; the next :meth:`organise` learns one again)."""
        columns = vector_basis.columns(head.dims)
        if not head.basis or not head.projected or not columns:
            return None, None
        try:
            basis_path = self._basis_path(head.basis, "basis")
            if os.path.getsize(basis_path) != head.dims * columns * 4:
                return None, None
            basis = _map(basis_path, np.float32, (head.dims, columns))
            low = _map(self._basis_path(head.basis, "low"), np.float32, (head.projected, columns))
        except (OSError, ValueError):
            return None, None
        return basis, low

    def _read_names(self, head: Head) -> list[str]:
        """The session names ``head`` commits (parsed incrementally within one epoch); raises ``OSError``, ``ValueError``."""
        committed = head.session_bytes
        if head.epoch != self._names_epoch or committed < self._names_read:  # started over
            self._names, self._names_read, self._names_epoch = [], 0, head.epoch
        if committed > self._names_read:
            with _own(self._paths["sessions"], "rb") as f:
                f.seek(self._names_read)
                chunk = f.read(committed - self._names_read)
            if len(chunk) != committed - self._names_read:
                raise ValueError("sessions file shorter than committed")
            self._names.extend(parse_names(chunk))
            self._names_read = committed
        return self._names

    def files(self) -> tuple[tuple[Path, bool], ...]:
        """Every path of these files, each with whether it is written in place (``.head`` is replaced instead;
        the basis is written once)."""
        token = self.head().basis
        extra = ((self._basis_path(token, "low"), True), (self._basis_path(token, "basis"), False)) if token else ()
        return tuple((path, kind != "head") for kind, path in self._paths.items()) + extra


class VectorFile(VectorFileReader):
    """The writer of the vector files: every change under the lock (``flock`` across processes, a thread lock
    within one), committed by replacing ``.head`` once the rows are on disk.

    Methods raise ``OSError`` when the folder refuses the files (the caller
    decides what that means for a search).
    """

    @contextmanager
    def _locked(self) -> Any:
        self.prefix.parent.mkdir(parents=True, exist_ok=True)
        with self._thread_lock, _own(self._paths["lock"], "a+b") as lock:
            if fcntl is not None:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                if fcntl is not None:
                    fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def append(self, db: tuple[Any, ...] | None, dims: int, read_after: Callable[[int], Iterable[Batch]],
               seen: str = "") -> Head:
        """Copy the chunks past the committed ones in: ``read_after(upto)`` yields them from embeddings.db.

        Under the lock: the head is read again (another process may have
        copied them meanwhile), files not matching it, another embeddings.db
        or other ``dims`` start over (but files another process started over
        since the caller mapped the epoch ``seen`` are returned as they are:
        :meth:`Head.restarted_since`; the caller's size is the older one); anything
        past the committed end (a writer that died mid-way) is cut first. Rows get their coordinates
        along the files' basis as they are appended (unless earlier rows lack
        theirs: then :meth:`organise` learns a basis again). Returns the head
        now committed.
        """
        with self._locked():
            head = self.head()
            view = self.view(db)  # mapped only when the files hold what the head commits, names and codes sound
            known = list(view.names) if view.n and view.head == head and head.dims == dims else None
            if head.restarted_since(seen, db, dims):
                return head
            if known is None:
                self._remove_bases(keep="")
                # Start over with new files, never truncated ones: a process still mapping the
                # old rows keeps reading them (truncating a mapped file would crash it with
                # SIGBUS). The empty head of a new epoch comes first, so a copy that fails
                # part way is never read under the old head.
                head = Head(dims=dims, db=db, epoch=secrets.token_hex(8))
                self._write_head(head)
                for kind in ("vec", "rows", "sessions"):
                    self._paths[kind].unlink(missing_ok=True)
                    _own(self._paths[kind], "wb").close()
                known = []
            codes = {name: i for i, name in enumerate(known)}
            rows, session_bytes, upto = head.rows, head.session_bytes, head.upto
            basis = self._basis_to_extend(head)
            projected = head.projected if basis is not None else 0
            with ExitStack() as files:
                vec, meta, names = (files.enter_context(_own(self._paths[kind], "r+b")) for kind in ("vec", "rows", "sessions"))
                low = files.enter_context(_own(self._basis_path(head.basis, "low"), "r+b")) if basis is not None else None
                vec.truncate(rows * dims * 4)
                meta.truncate(rows * 24)
                names.truncate(session_bytes)
                if low is not None and basis is not None:
                    low.truncate(projected * basis.shape[1] * 4)
                    low.seek(0, os.SEEK_END)
                vec.seek(0, os.SEEK_END)
                meta.seek(0, os.SEEK_END)
                names.seek(0, os.SEEK_END)
                for chunk_ids, message_ids, session_ids, vectors in read_after(upto):
                    if not len(chunk_ids):
                        continue
                    new_names = []
                    session_codes = []
                    for sid in session_ids:
                        code = codes.get(sid)
                        if code is None:
                            code = codes[sid] = len(codes)
                            new_names.append(sid)
                        session_codes.append(code)
                    block = np.empty((len(chunk_ids), 3), dtype="<i8")
                    block[:, 0], block[:, 1], block[:, 2] = chunk_ids, message_ids, session_codes
                    vec.write(np.ascontiguousarray(vectors, dtype="<f4").tobytes())
                    meta.write(block.tobytes())
                    if low is not None and basis is not None:
                        _write_coordinates(low, vectors, basis)
                        projected += len(chunk_ids)
                    if new_names:
                        data = "".join(json.dumps(n) + "\n" for n in new_names).encode("utf-8")
                        names.write(data)
                        session_bytes += len(data)
                    rows += len(chunk_ids)
                    upto = max(upto, int(max(chunk_ids)))
                for f in (vec, meta, names) if low is None else (vec, meta, names, low):
                    _durable(f)
            head = Head(rows, session_bytes, upto, dims, db, head.epoch, head.basis, projected, head.basis_from)
            self._write_head(head)
            return head

    def _basis_to_extend(self, head: Head) -> np.ndarray | None:
        """The basis new rows are projected on: ``head``'s, when every committed row has its coordinates and the
        basis files hold what the head says; else ``None`` (new rows get none)."""
        if not head.basis or head.projected != head.rows:
            return None
        basis, _ = self._map_basis(head)
        return None if basis is None else np.array(basis)

    def _remove_bases(self, *, keep: str) -> None:
        """Delete every basis' files but those of the token ``keep`` (readers that map them keep their pages)."""
        for kind in ("low", "basis"):
            for path in self.prefix.parent.glob(f"{self.prefix.name}.*.{kind}"):
                token = path.name[len(self.prefix.name) + 1 : -len(kind) - 1]
                if token != keep and "." not in token:
                    path.unlink(missing_ok=True)

    def organise(self, db: tuple[Any, ...] | None) -> bool:
        """Learn the principal directions of the committed rows (``vector_basis``) when they are many and have
        none yet, or have grown ``RELEARN_GROWTH`` times since; returns whether a new basis was committed.

        The basis and the coordinates of the rows committed now are computed
        and written to new files without the lock (reading the shared
        mapping); then, under the lock, rows committed meanwhile get theirs and
        the head names the new files. Nothing is committed when the files
        started over meanwhile, or another process committed a basis first.
        With nothing to learn, files of no committed basis (left by a process
        that died) are removed. Raises ``OSError`` when the folder refuses the
        files, ``ValueError`` when no vector is finite.
        """
        head = self.head()
        if head.db != db or head.rows < vector_basis.BASIS_FROM_ROWS:
            return False
        view = self.view(db)
        if view.n != head.rows or view.head != head:
            return False
        if view.basis is not None and head.projected == head.rows and head.rows < vector_basis.RELEARN_GROWTH * head.basis_from:
            with self._locked():  # a basis, and not grown much since: only files of no committed basis to remove
                self._remove_bases(keep=self.head().basis)
            return False
        token = secrets.token_hex(8)
        basis = vector_basis.learn(view.vectors)  # ValueError: no finite vectors to learn from
        committed = False
        try:
            with _own(self._basis_path(token, "basis"), "wb") as f:
                f.write(basis.astype("<f4").tobytes())
                _durable(f)
            with _own(self._basis_path(token, "low"), "wb") as f:
                _write_coordinates(f, view.vectors, basis)
                _durable(f)
            with self._locked():
                now = self.head()
                if (now.epoch != head.epoch or now.db != db or now.basis != head.basis or now.rows < view.n
                        or not self._consistent(now)):
                    return False
                try:
                    low = _own(self._basis_path(token, "low"), "r+b")
                except FileNotFoundError:  # removed by another process starting over
                    return False
                with low:
                    if now.rows > view.n:  # appended meanwhile: their coordinates too
                        later = _map(self._paths["vec"], np.float32, (now.rows, now.dims))[view.n :]
                        low.seek(0, os.SEEK_END)
                        _write_coordinates(low, later, basis)
                        _durable(low)
                        del later
                    if os.fstat(low.fileno()).st_size != now.rows * basis.shape[1] * 4 or not self._basis_path(token, "basis").is_file():
                        return False
                new = dataclasses.replace(now, basis=token, projected=now.rows, basis_from=view.n)
                self._write_head(new)
                committed = True
                self._remove_bases(keep=token)
                return True
        finally:
            if not committed:
                for kind in ("low", "basis"):
                    self._basis_path(token, kind).unlink(missing_ok=True)

    def _consistent(self, head: Head) -> bool:
        """Whether the files hold at least what ``head`` commits."""
        try:
            return (os.path.getsize(self._paths["vec"]) >= head.rows * head.dims * 4
                    and os.path.getsize(self._paths["rows"]) >= head.rows * 24
                    and os.path.getsize(self._paths["sessions"]) >= head.session_bytes)
        except OSError:
            return False

    def _write_head(self, head: Head) -> None:
        temp = self._paths["head"].with_name(f"{self._paths['head'].name}.{os.getpid()}.{threading.get_ident()}.tmp")
        payload = {"version": VERSION, "rows": head.rows, "session_bytes": head.session_bytes, "upto": head.upto,
                   "dims": head.dims, "db": list(head.db) if head.db else None, "epoch": head.epoch,
                   "basis": head.basis, "projected": head.projected, "basis_from": head.basis_from}
        temp.unlink(missing_ok=True)  # left by a process that died here, or planted: created anew, never followed
        with _own(temp, "w") as f:
            json.dump(payload, f)
            _durable(f)
        os.replace(temp, self._paths["head"])

    def mark_gone(self, message_ids: Iterable[int], *, keep_chunks: Iterable[int] = (), gone_chunks: Iterable[int] = ()) -> int:
        """Mark rows gone: every row of ``message_ids`` except the chunks in ``keep_chunks``, and the chunks in ``gone_chunks``.

        Readers see it at once (a shared mapping). Returns how many rows were
        marked. Nothing committed: nothing to do.
        """
        messages = np.array(sorted({int(m) for m in message_ids}), dtype=np.int64)
        keep = np.array(sorted({int(c) for c in keep_chunks}), dtype=np.int64)
        gone = np.array(sorted({int(c) for c in gone_chunks}), dtype=np.int64)
        if not len(messages) and not len(gone):
            return 0
        with self._locked():
            head = self.head()
            if head.rows == 0 or not self._consistent(head):
                return 0
            with _own(self._paths["rows"], "r+b") as f, mmap.mmap(f.fileno(), head.rows * 24) as mapped:
                rows = np.frombuffer(mapped, dtype="<i8").reshape(head.rows, 3)
                try:
                    # Chunks by binary search into the rows, which are in chunk id order.
                    hit = _among(rows[:, 1], messages)
                    hit[_chunk_rows(rows[:, 0], keep)] = False
                    hit[_chunk_rows(rows[:, 0], gone)] = True
                    hit &= rows[:, 1] != -1
                    marked = int(np.count_nonzero(hit))
                    if marked:
                        rows[hit, 1] = -1
                        mapped.flush()
                finally:
                    del rows  # the mapping closes only once no array points into it
            return marked


_OPEN_FLAGS = {"rb": os.O_RDONLY, "r+b": os.O_RDWR, "a+b": os.O_RDWR | os.O_CREAT | os.O_APPEND,
               "wb": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "w": os.O_WRONLY | os.O_CREAT | os.O_EXCL}


def _own(path: Path, mode: str) -> Any:
    """Open a file of ours, never through a symbolic link planted at its path (``OSError`` then: ``ELOOP``), so that
    no write of ours lands in a file outside the data folder. ``w`` (text) creates a new file only."""
    flags = _OPEN_FLAGS[mode] | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o666)
    try:
        return os.fdopen(fd, mode) if "b" in mode else os.fdopen(fd, mode, encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def _durable(f: Any) -> None:
    """Flush ``f`` to the disk (what a head later commits must survive a crash)."""
    f.flush()
    os.fsync(f.fileno())


def _write_coordinates(f: Any, vectors: np.ndarray, basis: np.ndarray) -> None:
    """Append the coordinates of ``vectors`` (rows; may be mapped) along ``basis`` to ``f``, a block at a time
    (no copy of the whole file in memory)."""
    for start in range(0, len(vectors), vector_basis.BLOCK):
        f.write(vector_basis.project(vectors[start : start + vector_basis.BLOCK], basis).tobytes())


def _among(values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """``values`` that are in ``wanted`` as a boolean mask: one sorting pass where numpy offers it (1.24 and later;
    its default for a few ids compares every value once per id)."""
    if not len(wanted):
        return np.zeros(len(values), dtype=bool)
    return np.isin(values, wanted, **_ISIN_BY_SORTING)


_ISIN_BY_SORTING: dict[str, Any] = {"kind": "sort"} if "kind" in inspect.signature(np.isin).parameters else {}


def _chunk_rows(chunk_ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The rows holding the chunks ``wanted`` (``chunk_ids`` ascending, as rows are appended); absent ones are left out."""
    if not len(wanted) or not len(chunk_ids):
        return np.zeros(0, dtype=np.int64)
    at = np.minimum(np.searchsorted(chunk_ids, wanted), len(chunk_ids) - 1)
    return at[chunk_ids[at] == wanted]


def parse_names(data: bytes) -> list[str]:
    """Session ids, one JSON string per line; raises ``ValueError`` on anything else (damage)."""
    text = data.decode("utf-8")
    # Lines end at "\n" only: the writer escapes every other line break inside a name, so a raw one is
    # damage, refused by the parse below (splitlines would cut there, and could merge two values into one).
    lines = text.removesuffix("\n").split("\n") if text else []
    # One parse of them all (far cheaper than one a line); a line holding more than one value, or none,
    # shows as a count that differs from the lines', or fails the parse.
    try:
        names = json.loads("[" + ",".join(lines) + "]") if lines else []
    except RecursionError:  # brackets nested past what the parser takes: damage too
        raise ValueError("sessions file nested too deep") from None
    if len(names) != len(lines) or not all(isinstance(n, str) for n in names):
        raise ValueError("a session name that is not one string")
    return names


def _check_codes(codes: np.ndarray, names: int) -> None:
    """Raises ``ValueError`` when a row's session code is not one of ``names`` codes (damage)."""
    if len(codes) and (int(codes.max()) >= names or int(codes.min()) < 0):
        raise ValueError("a row names a session code the sessions file does not hold")


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino, info.st_size


def _map(path: Path, dtype: Any, shape: tuple[int, int]) -> np.ndarray:
    """``shape`` rows of ``path`` mapped read-only (shared pages, no copy); raises ``ValueError`` when the file is shorter.

    A plain array over the mapping (which it keeps open): slicing a ``np.memmap`` runs Python code for every
    slice taken, and a search takes dozens.
    """
    if path.is_symlink():  # not a file of ours: never mapped (the writer refuses it too)
        raise ValueError(f"{path} is a symbolic link")
    return np.asarray(np.memmap(path, dtype=np.dtype(dtype).newbyteorder("<"), mode="r", shape=shape))
