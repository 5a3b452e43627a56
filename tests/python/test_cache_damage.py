"""Every kind of compile-cache record, truncated or altered, is caught and rebuilt: the
pack still succeeds, its shard is byte-identical, and the record is whole again."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from pack_support import SLOTTED, compiles, copy_example, counting_compiler, run_pack, shard_files
from reliability_support import ARCH

#: kind of record -> (its folder under v1/, how many records a warm gfx90a pack leaves,
#: compiles a repack runs once every record of the kind is damaged)
KINDS = {
    "objects": ("objects", 3, 3),  # the 3 compiled objects (the prebuilt one is not cached)
    "manifests": ("manifests", 3, 3),  # lost manifests: the compiles run again
    "info": ("info", 3, 0),  # re-read from the objects, no compile (prebuilt: not cached)
    "compilers": ("compilers", 1, 0),  # hipcc --version runs again, no compile
}


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _alter(data: bytes) -> bytes:
    """One character changed near the middle, to another of its class, so JSON records
    stay valid JSON and must be caught by their digest, not the parser."""
    out = bytearray(data)
    for i in sorted(range(len(out)), key=lambda i: abs(i - len(out) // 2)):
        c = chr(out[i])
        if c.isdigit() or c in "abcdefABCDEF":
            out[i] = ord("1" if c == "0" else "0") if c.isdigit() else ord("a" if c != "a" else "b")
            return bytes(out)
    out[len(out) // 2] ^= 0xFF
    return bytes(out)


DAMAGE: dict[str, Callable[[bytes], bytes]] = {"truncated": _truncate, "altered": _alter}


@dataclass(frozen=True)
class Warm:
    tree: Path
    cache: Path  # warm, kept pristine: each test damages a copy
    good: dict[str, bytes]  # the shard it packs
    args: tuple[str, ...]  # pack arguments: one job, the counting compiler
    log: Path  # the compiles that compiler ran


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Warm:
    base = tmp_path_factory.mktemp("cache-damage")
    # The example as before slots: these tests count its three compiled objects.
    tree, cache = copy_example(base / "tree", SLOTTED), base / "cache"
    hipcc, log = counting_compiler(base)
    args = ("--jobs", "1", "--hipcc", str(hipcc))
    r = run_pack(tree, base / "out", [ARCH], *args, cache=cache)
    assert r.returncode == 0, r.stderr
    return Warm(tree, cache, shard_files(base / "out" / ARCH), args, log)


def _records(cache: Path, folder: str) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted((cache / "v1" / folder).rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_damaged_record_is_rebuilt(warm: Warm, tmp_path: Path, kind: str, damage: str) -> None:
    folder, count, recompiles = KINDS[kind]
    cache = shutil.copytree(warm.cache, tmp_path / "cache")
    warm.log.unlink(missing_ok=True)
    before = _records(cache, folder)
    assert len(before) == count, sorted(before)
    for path, data in before.items():
        damaged = DAMAGE[damage](data)
        assert damaged != data
        path.write_bytes(damaged)

    r = run_pack(warm.tree, tmp_path / "out", [ARCH], *warm.args, cache=cache)
    assert r.returncode == 0, r.stderr
    assert shard_files(tmp_path / "out" / ARCH) == warm.good
    assert len(compiles(warm.log)) == recompiles
    # Each damaged record was replaced by the one an undamaged pack writes.
    after = _records(cache, folder)
    assert after == before, [str(p) for p in after if after[p] != before.get(p)]
    if kind != "objects":
        for data in after.values():
            json.loads(data)
