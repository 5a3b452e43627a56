"""The compile cache's file-digest manifest (``v1/file-digests.json``): a later pack
reuses the digest of a file whose stat is unchanged instead of reading it, and never
takes a changed file for an unchanged one: any differing field, a change too close to
when the digest was taken (racily clean), or a damaged manifest makes it read the file."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from ukdpack.files import write_atomic
from ukdpack.produce import cache as cache_mod
from ukdpack.produce.cache import CompileCache, FileDigests, trusted


def _write(path: Path, data: bytes) -> bool:
    write_atomic(path, data)
    return True


class Reads:
    """Counts the files FileDigests reads (hashlib.file_digest calls), by name."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.names: list[str] = []
        real = hashlib.file_digest

        def counting(f: Any, digest: str) -> Any:
            self.names.append(os.path.basename(f.name))
            return real(f, digest)

        monkeypatch.setattr(cache_mod.hashlib, "file_digest", counting)


def _old(path: Path, data: bytes) -> None:
    """Write ``path`` and date it an hour back (its ctime stays now)."""
    path.write_bytes(data)
    past = path.stat().st_mtime_ns - 3600 * 10**9
    os.utime(path, ns=(past, past))


def test_unchanged_file_is_not_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    # No racy window here: the file was written before the digest was taken.
    monkeypatch.setattr(cache_mod, "RACY_NS", 0)
    manifest, header = tmp_path / "file-digests.json", tmp_path / "a.h"
    _old(header, b"int a;\n")
    first = FileDigests(manifest)
    assert first.digest(str(header)) == hashlib.sha256(b"int a;\n").hexdigest()
    first.save(_write)
    reads = Reads(monkeypatch)
    again = FileDigests(manifest)
    assert again.digest(str(header), recheck=False) == hashlib.sha256(b"int a;\n").hexdigest()
    assert reads.names == []


def test_same_size_rewrite_with_the_old_mtime_is_read(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_mod, "RACY_NS", 0)
    manifest, header = tmp_path / "file-digests.json", tmp_path / "a.h"
    _old(header, b"int a;\n")
    first = FileDigests(manifest)
    first.digest(str(header))
    first.save(_write)
    mtime = header.stat().st_mtime_ns
    header.write_bytes(b"int b;\n")  # same size, and the mtime put back
    os.utime(header, ns=(mtime, mtime))
    assert FileDigests(manifest).digest(str(header)) == hashlib.sha256(b"int b;\n").hexdigest()


def test_file_changed_just_before_its_digest_is_read_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Racily clean: written moments before its digest was taken, the file could be
    # rewritten within the timestamp granularity without its stat changing.
    manifest, header = tmp_path / "file-digests.json", tmp_path / "a.h"
    header.write_bytes(b"int a;\n")
    first = FileDigests(manifest)
    first.digest(str(header))
    first.save(_write)
    reads = Reads(monkeypatch)
    assert FileDigests(manifest).digest(str(header)) == hashlib.sha256(b"int a;\n").hexdigest()
    assert reads.names == ["a.h"]


def test_trust_needs_every_field_and_an_old_change() -> None:
    stamp = (7, 10 * 10**9, 10 * 10**9, 42, 1)
    late = 20 * 10**9
    assert trusted(stamp, late, stamp)
    for i in range(5):
        other = list(stamp)
        other[i] += 1
        assert not trusted(stamp, late, tuple(other))  # type: ignore[arg-type]
    # Changed (mtime or ctime) within RACY_NS before the digest was taken.
    assert not trusted(stamp, 10 * 10**9 + cache_mod.RACY_NS - 1, stamp)
    assert not trusted((7, 1, 10 * 10**9, 42, 1), 11 * 10**9, (7, 1, 10 * 10**9, 42, 1))


@pytest.mark.parametrize("damage", ["truncated", "altered digest", "altered entry", "not json"])
def test_damaged_manifest_is_ignored_and_rewritten(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   damage: str) -> None:
    monkeypatch.setattr(cache_mod, "RACY_NS", 0)
    cache = CompileCache(tmp_path / "cache")
    header = tmp_path / "a.h"
    _old(header, b"int a;\n")
    cache.digests.digest(str(header))
    cache.save_digests()
    manifest = tmp_path / "cache" / "v1" / "file-digests.json"
    good = manifest.read_bytes()
    doc = json.loads(good)
    if damage == "truncated":
        manifest.write_bytes(good[: len(good) // 2])
    elif damage == "not json":
        manifest.write_bytes(b"\x00\xff")
    else:
        if damage == "altered digest":
            doc["digest"] = "0" * 64
        else:  # a forged digest for the file: the binding digest no longer holds
            doc["entries"][str(header)][6] = "0" * 64
        manifest.write_text(json.dumps(doc))
    reads = Reads(monkeypatch)
    again = CompileCache(tmp_path / "cache")
    assert again.digests.digest(str(header)) == hashlib.sha256(b"int a;\n").hexdigest()
    assert reads.names == ["a.h"]
    again.save_digests()  # whole again: the next pack trusts it
    reads.names.clear()
    third = CompileCache(tmp_path / "cache")
    assert third.digests.digest(str(header)) == hashlib.sha256(b"int a;\n").hexdigest()
    assert reads.names == []


def test_manifest_is_written_only_when_something_new_was_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_mod, "RACY_NS", 0)
    cache = CompileCache(tmp_path / "cache")
    header = tmp_path / "a.h"
    _old(header, b"int a;\n")
    cache.digests.digest(str(header))
    cache.save_digests()
    manifest = tmp_path / "cache" / "v1" / "file-digests.json"
    before = manifest.stat().st_ino
    warm = CompileCache(tmp_path / "cache")
    warm.digests.digest(str(header))
    warm.save_digests()
    assert manifest.stat().st_ino == before  # not replaced: nothing new
