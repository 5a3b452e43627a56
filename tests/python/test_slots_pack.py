"""``ukdpack pack`` and slots: an arch where a slot of an engine is empty fails alone,
naming engine, slot and arch; the other arches publish their shards."""

from __future__ import annotations

import shutil
from pathlib import Path

from pack_support import REPO, run_pack

EMPTY = REPO / "tests" / "corpus" / "slot_empty" / "tree"


def test_an_empty_slot_fails_only_the_arch_it_is_empty_on(tmp_path: Path) -> None:
    tree = shutil.copytree(EMPTY, tmp_path / "tree")
    for f in tree.glob("*.json"):  # the case names gfx942, which Debian's hipcc cannot build
        f.write_text(f.read_text().replace("gfx942", "gfx940"))
    out = tmp_path / "out"
    (out / "gfx90a").mkdir(parents=True)
    (out / "gfx90a" / "stale.kdp.json").write_text("{}")  # a shard of an earlier pack
    r = run_pack(tree, out, ["gfx90a", "gfx940"], cache=tmp_path / "cache")
    assert r.returncode == 1, r.stderr
    assert ("engine 'test:attn_bwd' ships for gfx90a (its slot 'prep' has kernels there), but "
            "slot 'dq' holds no kernel for gfx90a") in r.stderr
    assert "gfx90a: failed; no shard" in r.stderr
    assert "failed: gfx90a (1 of 2 arches)" in r.stderr
    assert not (out / "gfx90a").exists()  # no stale shard either
    assert (out / "gfx940" / "attn.ued.json").is_file()  # every slot has a kernel there
    assert "nothing was packed" not in r.stderr
