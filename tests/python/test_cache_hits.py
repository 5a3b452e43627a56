"""The record of a pack's cache hits (``v1/hits/``): a warm repack answers each lookup
from it without reading the manifest, and answers what reading the manifest would: a
manifest replaced since, a changed input, a missing object or a damaged record all fall
back to the manifest (or to a miss)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ukdpack.produce import cache as cache_mod
from ukdpack.produce import hits
from ukdpack.produce.cache import CompileCache

KEY = "a" * 64


class Case:
    """A source root with a source and a header outside it, and a cache folder."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path / "tree"
        self.root.mkdir()
        self.source = self.root / "k.hip"
        self.source.write_text("#include \"h.h\"\n")
        self.header = tmp_path / "include" / "h.h"
        self.header.parent.mkdir()
        self.header.write_text("int h;\n")
        self.folder = tmp_path / "cache"
        self.deps = [str(self.source), str(self.header)]

    def cache(self) -> CompileCache:
        """A fresh cache as one pack opens it, with the record of its hits."""
        cache = CompileCache(self.folder)
        cache.hits = hits.HitsRecord(hits.record_path(cache.folder, self.root,
                                                      self.root.parent / "out", "", ["gfx90a"]))
        return cache

    def pack(self) -> tuple[Any, list[str]]:
        """A lookup of KEY as a pack makes it, the record then saved: the hit and the
        manifests it read."""
        cache = self.cache()
        read: list[str] = []
        real = cache._manifest_read

        def counting(base_key: str) -> Any:
            read.append(base_key)
            return real(base_key)

        cache._manifest_read = counting  # type: ignore[method-assign]
        hit = cache.lookup(KEY, self.root)
        cache.save_hits()
        return hit, read


@pytest.fixture
def case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Case:
    # No racy window: nothing here is rewritten within the timestamp granularity.
    monkeypatch.setattr(cache_mod, "RACY_NS", 0)
    return Case(tmp_path)


def _store(case: Case, data: bytes) -> str:
    cache = case.cache()
    cache.store(KEY, case.root, case.deps, data)
    sha = cache.put_object(data)
    assert sha is not None
    return sha


def test_a_warm_repack_reads_no_manifest_and_gets_the_same_hit(
        case: Case, signature_objects: dict[str, bytes]) -> None:
    sha = _store(case, signature_objects["gfx90a"])
    first, read = case.pack()
    assert first is not None and first.sha256 == sha and read == [KEY]
    again, read = case.pack()
    assert read == []  # answered from the record
    assert again is not None and (again.data, again.sha256) == (first.data, first.sha256)
    assert sorted(again.deps) == sorted(first.deps) == sorted(case.deps)


def test_a_manifest_replaced_since_is_read_and_its_newest_entry_answers(
        case: Case, signature_objects: dict[str, bytes]) -> None:
    _store(case, signature_objects["gfx90a"])
    case.pack()
    # The same inputs compiled again to another object (a newer compiler flag, say):
    # the manifest is rewritten, and the newest entry wins, as it does without a record.
    newer = _store(case, signature_objects["names"])
    hit, read = case.pack()
    assert read == [KEY] and hit is not None and hit.sha256 == newer
    hit, read = case.pack()
    assert read == [] and hit is not None and hit.sha256 == newer


@pytest.mark.parametrize("changed", ["source", "header"])
def test_a_changed_input_is_a_miss(case: Case, changed: str,
                                   signature_objects: dict[str, bytes]) -> None:
    _store(case, signature_objects["gfx90a"])
    case.pack()
    path = case.source if changed == "source" else case.header
    path.write_text(path.read_text() + "// edited\n")
    hit, _ = case.pack()
    assert hit is None


def test_a_missing_object_is_a_miss(case: Case, signature_objects: dict[str, bytes]) -> None:
    sha = _store(case, signature_objects["gfx90a"])
    case.pack()
    os.unlink(case.cache()._object_path(sha))
    hit, _ = case.pack()
    assert hit is None


@pytest.mark.parametrize("damage", ["byte", "truncated", "not json", "other format"])
def test_a_damaged_record_is_ignored_and_rewritten(
        case: Case, damage: str, signature_objects: dict[str, bytes]) -> None:
    _store(case, signature_objects["gfx90a"])
    case.pack()
    record = case.cache().hits
    assert record is not None
    good = record.path.read_bytes()
    at = good.index(b'"hits":') + 20  # inside the first hit: the manifest's stamp
    bad = {"byte": good[:at] + bytes([good[at] ^ 1]) + good[at + 1:],
           "truncated": good[:len(good) // 2], "not json": b"\xff" * 40,
           "other format": good.replace(hits.HITS_FORMAT.encode(), b"ukdpack-hits-0")}[damage]
    record.path.write_bytes(bad)
    hit, read = case.pack()
    assert hit is not None and read == [KEY]  # read from the manifest, as without a record
    hit, read = case.pack()  # and the record was written again
    assert hit is not None and read == []


def test_each_command_line_has_a_record_of_its_own(tmp_path: Path) -> None:
    """The per-arch packs of a build keep records apart, so neither overwrites the other's."""
    names = {hits.record_path(tmp_path, Path("/t"), Path("/o"), "", [a])
             for a in ("gfx90a", "gfx942")}
    names.add(hits.record_path(tmp_path, Path("/t"), Path("/o"), "g", ["gfx90a"]))
    names.add(hits.record_path(tmp_path, Path("/t"), Path("/o2"), "", ["gfx90a"]))
    assert len(names) == 4


def test_cache_verify_removes_the_records_so_a_forged_one_cannot_outlive_it(
        case: Case, signature_objects: dict[str, bytes]) -> None:
    """A record is checked against no compile: one resealed to name another valid object
    would answer packs while verify passes every manifest. Verify removes the records."""
    sha = _store(case, signature_objects["gfx90a"])
    case.pack()
    other = case.cache().put_object(signature_objects["names"])
    assert other is not None and other != sha
    # Forged: the hit names the other object, and the record is sealed again.
    cache = case.cache()
    record = cache.hits
    assert record is not None
    found = record.remembered(KEY)
    assert found is not None
    record.keep(KEY, hits.Remembered(found.manifest, found.read_ns, other, found.shared,
                                     found.own))
    cache.save_hits()
    hit, read = case.pack()
    assert hit is not None and hit.sha256 == other and read == []  # trusted, as sealed
    cache_mod.verify(case.cache())
    assert not list(record.path.parent.iterdir())
    hit, read = case.pack()
    assert hit is not None and hit.sha256 == sha and read == [KEY]


def test_a_fifo_in_the_records_place_is_not_waited_on(
        case: Case, signature_objects: dict[str, bytes]) -> None:
    _store(case, signature_objects["gfx90a"])
    case.pack()
    record = case.cache().hits
    assert record is not None
    record.path.unlink()
    os.mkfifo(record.path)
    hit, read = case.pack()  # would hang on the FIFO's open or read
    assert hit is not None and read == [KEY]
