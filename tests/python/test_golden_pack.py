"""The example tree packs byte for byte as it did before kernel slots: the sha256 of
every file of each shard, pinned in golden/example_pack.json (written from the packer
as it was before slots landed). The example's slotted engine (``attention_bwd/``, added
with slots) is left out of these packs with ``--exclude-folder``: what is pinned is that
everything that was there before packs as it did.

An unslotted engine must pack exactly as before whatever slots add to the packer and
the runtime. The pack's output holds no path of the machine and no time (provenance
sidecars are gzip with mtime 0, archives and descriptors are built from content
only), so the hashes are the same on any machine with the same compilers. The quick
test packs gfx90a (the shard-tool tests pack it too: the shared compile cache makes
it cheap); the heavy one packs the other arches of the example (gfx940, gfx1030 and
gfx908, for the generated engine).

After an intended change of the packed output, rewrite the golden file with
``python tests/python/test_golden_pack.py OUT_ROOT`` over a fresh pack of every arch
of GOLDEN, and say why in the commit.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
from shard_support import ARCH, pack_example

GOLDEN = Path(__file__).resolve().parent / "golden" / "example_pack.json"
OTHER_ARCHES = ("gfx940", "gfx1030", "gfx908")
SLOTTED = ("--exclude-folder", "attention_bwd")


def shard_digests(shard: Path) -> dict[str, str]:
    """sha256 of every file of a shard, by root-relative POSIX path."""
    return {p.relative_to(shard).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(shard.rglob("*")) if p.is_file()}


def _golden() -> dict[str, dict[str, str]]:
    doc: dict[str, dict[str, str]] = json.loads(GOLDEN.read_text())
    return doc


def _check(out: Path, arches: tuple[str, ...]) -> None:
    golden = _golden()
    assert sorted(p.name for p in out.iterdir()) == sorted(arches)
    for arch in arches:
        got, want = shard_digests(out / arch), golden[arch]
        assert sorted(got) == sorted(want), f"{arch}: the shard's files differ"
        changed = sorted(f for f in want if got[f] != want[f])
        assert changed == [], f"{arch}: these files changed: {changed}"


def test_the_golden_file_covers_every_engine_of_the_example() -> None:
    golden = _golden()
    assert sorted(golden) == sorted((ARCH, *OTHER_ARCHES))
    files = {f for shard in golden.values() for f in shard}
    assert {"attention/attention.ued.json", "prebuilt/prebuilt.ued.json",
            "generated/generated.ued.json"} <= files
    assert all(any(f.startswith("kpack/") for f in shard) for shard in golden.values())


def test_the_example_packs_byte_for_byte_as_before(tmp_path_factory: pytest.TempPathFactory
                                                     ) -> None:
    _check(pack_example(tmp_path_factory, "golden", (ARCH,), *SLOTTED)[1], (ARCH,))


def test_the_example_packs_byte_for_byte_as_before_on_every_other_arch(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    _check(pack_example(tmp_path_factory, "golden-all", OTHER_ARCHES, *SLOTTED)[1], OTHER_ARCHES)


def test_a_changed_byte_is_found(tmp_path: Path) -> None:
    """The comparison looks at content, not at names or sizes alone."""
    shard = tmp_path / ARCH
    shard.mkdir()
    (shard / "a.kdp.json").write_text("{}\n")
    before = shard_digests(shard)
    (shard / "a.kdp.json").write_text("[]\n")
    assert shard_digests(shard) != before


if __name__ == "__main__":
    out_root = Path(sys.argv[1])
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps({a.name: shard_digests(a) for a in sorted(out_root.iterdir())},
                                 indent=1, sort_keys=True) + "\n")
