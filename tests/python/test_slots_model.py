"""Kernel slots in the typed model and the packer: UED 1.1 ``slots``, KDP 1.1 ``slot``
and UHD 1.1 ``slot`` read through frozen models; ``pack`` keeps each of them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pack_support import read_json, run_pack, write_json
from slot_support import PACKS, SLOTS, kdp_doc, slot_doc, ued_doc, write_slotted_tree

from ukdpack.authored.load import load_tree
from ukdpack.authored.model import Kdp, Ued, Uhd

ARCH = "gfx90a"


# -- the model ------------------------------------------------------------------------

def test_the_model_reads_slots_in_order_with_their_knobs_and_packs(tmp_path: Path) -> None:
    tree = load_tree(write_slotted_tree(tmp_path / "t"))
    assert [p for p in tree.problems if p.severity == "error"] == []
    (ued,) = tree.of_type(Ued)
    assert ued.slotted and [s.name for s in ued.slots] == list(SLOTS)
    main = ued.slot("main")
    assert main is not None and main.knobs == ("block",) and main.knob_ids == ("main.block",)
    assert main.json_path == "$.slots[1]" and ued.slot("nope") is None
    assert {k.name: k.slot for k in tree.of_type(Kdp)} == {s: PACKS[s][0] for s in PACKS}
    catalogs = tree.slot_catalogs(ued)
    assert [(c.index, c.slot.name, [k.name for k in c.kdps], [m.ukd.name for m in c.members])
            for c in catalogs] == [(0, "prep", ["prep"], ["prep_k"]),
                                   (1, "main", ["main", "main_alt"], ["main_fast", "main_safe"]),
                                   (2, "reduce", ["reduce"], ["reduce_k"])]


def test_the_model_reads_a_slot_s_heuristics_and_a_uhd_s_slot(tmp_path: Path) -> None:
    root = write_slotted_tree(tmp_path / "t")
    write_json(root / "r.uhd.json", {
        "id": "suhd", "version": "1.1", "name": "main_rank", "adapter": "static_order",
        "static_order": {}, "slot": "main",
        "trained_against": {"ued": {"id": "sued", "revision": "1.0", "slot": "main"},
                            "kmd": {"id": "skmd", "revision": "1.0"}, "umd": []}})
    write_json(root / "s.ued.json", ued_doc([
        slot_doc("prep"), slot_doc("main", sort_kernel_catalog={"default": "suhd"}),
        slot_doc("reduce")]))
    tree = load_tree(root)
    assert [p.line() for p in tree.problems if p.severity == "error"] == []
    (ued,) = tree.of_type(Ued)
    main = ued.slot("main")
    assert main is not None and main.heuristics == {"sort_kernel_catalog": {"default": ("suhd",)}}
    assert ued.heuristics == {} and ued.knobs == ()
    (uhd,) = tree.of_type(Uhd)
    assert uhd.slot == "main"


def test_an_unslotted_engine_has_no_slots(tmp_path: Path) -> None:
    root = write_slotted_tree(tmp_path / "t")
    write_json(root / "s.ued.json", {k: v for k, v in ued_doc().items() if k != "slots"})
    for stem, (_, kernels) in PACKS.items():
        write_json(root / f"{stem}.kdp.json", kdp_doc(stem, None, kernels))
    tree = load_tree(root)
    (ued,) = tree.of_type(Ued)
    assert not ued.slotted and tree.slot_catalogs(ued) == []
    assert all(k.slot is None for k in tree.of_type(Kdp))


# -- pack -------------------------------------------------------------------------------

def test_pack_keeps_each_kdp_s_slot_and_the_engine_s_slots(tmp_path: Path) -> None:
    tree = write_slotted_tree(tmp_path / "tree")
    r = run_pack(tree, tmp_path / "out", [ARCH], cache=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    shard = tmp_path / "out" / ARCH
    for stem, (slot, _) in PACKS.items():
        packed = read_json(shard / f"{stem}.kdp.json")
        assert packed["version"] == "1.1" and packed["slot"] == slot
    assert read_json(shard / "s.ued.json") == read_json(tree / "s.ued.json")
    # The runtime's validator loads the shard (the slots as the runtime reads them).
    exe = Path(sys.executable).parent / "ukdpack-validate"
    c = subprocess.run([str(exe), str(shard)], capture_output=True, text=True, check=False)
    assert c.returncode == 0, c.stdout + c.stderr
