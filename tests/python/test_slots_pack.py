"""``ukdpack pack`` and slots: an arch where a slot of an engine is empty fails alone,
naming engine, slot and arch; the other arches publish their shards."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from kpack_oracle import Archive
from pack_support import REPO, run_pack

from ukdpack import _runtime

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
    # gfx90a's runtime check and publishing ran on a thread beside gfx940's assembly
    # (docs/packing.md, "Arches overlap"): no staging or lock is left, and every line
    # is told in arch order, as when the arches ran one after the other.
    assert not (out / ".gfx90a.staging").exists()
    assert not (out / ".gfx90a.lock").exists() and not (out / ".gfx940.lock").exists()
    lines = r.stderr.splitlines()
    told = [next(i for i, line in enumerate(lines) if want in line) for want in (
        "the runtime drops kernel 'dkdv.f32'", "gfx90a: failed; no shard",
        f"-> {out / 'gfx940'}", "failed: gfx90a (1 of 2 arches)")]
    assert told == sorted(told), r.stderr
    assert (out / "gfx940" / "attn.ued.json").is_file()  # every slot has a kernel there
    assert "nothing was packed" not in r.stderr


CLANG = shutil.which("clang++-19")  # installed by scripts/setup.sh: never a skip
GENERIC = Path(__file__).resolve().parent / "data" / "generic_scale.hip"


def _write(path: Path, doc: dict[str, Any]) -> None:
    path.write_text(json.dumps(doc, indent=2) + "\n")


def _generic_slotted_tree(root: Path) -> Path:
    """Engine 'test:generic' with slots one (a single launch) and two (launches x, y),
    every launch built once per generic family from a builtins-only source."""
    root.mkdir(parents=True)
    shutil.copy(GENERIC, root / "k.hip")
    _write(root / "e.kmd.json", {"id": "kmd", "version": "1.0", "name": "md",
                                 "fields": [{"name": "step", "type": "string"}]})
    _write(root / "e.ued.json", {"id": "ued", "version": "1.1", "name": "test:generic",
                                 "metadata": "kmd", "slots": [{"name": "one"}, {"name": "two"}]})
    _write(root / "one.udd.json", {"id": "udd-one", "version": "1.0", "name": "one",
                                   "dispatch_symbol": "sym_one"})
    _write(root / "two.udd.json", {"id": "udd-two", "version": "1.1", "name": "two",
                                   "dispatch_symbol": "sym_two", "launches": ["x", "y"]})
    src = {"kind": "hip", "source": "k.hip", "entry": "scale_generic", "build": {"generic": True}}
    for slot, kernel in (("one", {"version": "1.0", "kernel_source": src}),
                         ("two", {"version": "1.1", "sources": {"x": src, "y": src}})):
        _write(root / f"{slot}.kdp.json", {
            "id": f"kdp-{slot}", "version": "1.1", "name": slot, "arch": [], "matchers": [],
            "engine": "ued", "dispatch": f"udd-{slot}", "slot": slot,
            "kernelDescriptors": [{"id": f"ukd-{slot}", "name": f"k.{slot}", "priority": 0,
                                   "metadata": {"step": slot}, **kernel}]})
    return root


def test_a_slotted_engine_of_generic_objects_packs_loads_and_picks(tmp_path: Path) -> None:
    """Built once for gfx10-3-generic (clang-19), the engine's objects ship in the shards
    of two members; a slot program's picks, a multi-launch one among them, pass the
    runtime's integrity checks for the member's arch."""
    assert CLANG is not None, "clang++-19 (scripts/setup.sh installs it)"
    tree = _generic_slotted_tree(tmp_path / "tree")
    out = tmp_path / "out"
    r = run_pack(tree, out, ["gfx1030", "gfx1031", "gfx90a"], "--hipcc", CLANG, "--json",
                 cache=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["compiled"] == 2  # the family once, gfx90a (in none) once
    for arch in ("gfx1030", "gfx1031"):
        shard = out / arch
        assert {t for _, t in Archive.open(shard / "kpack" / f"kernels_{arch}.kpack")} == {
            "gfx10-3-generic"}
        sm = _runtime.StateManager(_runtime.load_shard(str(shard)),
                                   handlers={"sym_one": [], "sym_two": ["x", "y"]}, arch=arch)
        assert sm.dropped() == []
        (engine,) = sm.slotted_engines()
        picks = sm.slot_program(engine["id"], {}).picks
        assert [(p["slot"], p["name"]) for p in picks] == [("one", "k.one"), ("two", "k.two")]
        code = sm.load_launch_code(picks[0]["kernel_id"], None, arch)
        assert code == sm.load_launch_code(picks[1]["kernel_id"], "x", arch)
        assert code == sm.load_launch_code(picks[1]["kernel_id"], "y", arch)
