"""Kernel slots in the shard tools: ``inspect``, ``verify`` and ``diff`` show each slot of a
slotted engine with its kernels, as text and as ``--json``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pack_support import read_json, run_pack, write_json
from shard_support import ukdpack
from slot_support import PACKS, kdp_doc, slot_doc, ued_doc, write_slotted_tree

ARCH = "gfx90a"


def _pack(tree: Path, out: Path, cache: Path) -> Path:
    r = run_pack(tree, out, [ARCH], cache=cache)
    assert r.returncode == 0, r.stderr
    return out / ARCH


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("slots-cache")


@pytest.fixture(scope="module")
def slotted(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> tuple[Path, Path]:
    """The slotted tree and its gfx90a shard."""
    base = tmp_path_factory.mktemp("slotted")
    tree = write_slotted_tree(base / "tree")
    return tree, _pack(tree, base / "out", cache)


def _json(*args: str) -> dict[str, Any]:
    r = ukdpack(*args, "--json")
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


# -- inspect ----------------------------------------------------------------------------

def test_inspect_json_lists_each_slot_in_order_with_its_kernels(
        slotted: tuple[Path, Path]) -> None:
    doc = _json("inspect", str(slotted[1]))
    (engine,) = doc["engines"]
    assert [(s["name"], s["knobs"], s["packs"], [k["name"] for k in s["kernels"]])
            for s in engine["slots"]] == [
        ("prep", [], ["prep"], ["prep_k"]),
        ("main", ["main.block"], ["main", "main_alt"], ["main_fast", "main_safe"]),
        ("reduce", [], ["reduce"], ["reduce_k"])]
    assert engine["slots"][1]["kernels"][1] == {"id": "k-main_safe", "name": "main_safe",
                                                "pack": "main_alt"}
    assert {p["name"]: p["slot"] for p in doc["packs"]} == {s: PACKS[s][0] for s in PACKS}


def test_inspect_table_shows_the_slots_of_a_slotted_engine(slotted: tuple[Path, Path]) -> None:
    r = ukdpack("inspect", str(slotted[1]))
    assert r.returncode == 0, r.stderr
    assert "slots of engine t:slotted, in run order" in r.stdout
    rows = [[c.strip() for c in ln.split("|")[1:-1]] for ln in r.stdout.splitlines()
            if ln.startswith("| ") and ln.split("|")[1].strip().isdigit()]
    assert rows == [["1", "prep", "", "prep", "prep_k"],
                    ["2", "main", "main.block", "main, main_alt", "main_fast, main_safe"],
                    ["3", "reduce", "", "reduce", "reduce_k"]]
    assert "pack main_alt (main_alt.kdp.json): engine t:slotted, slot main, dispatch" in r.stdout


# -- verify -----------------------------------------------------------------------------

def test_verify_shows_each_slot_s_kernels(slotted: tuple[Path, Path]) -> None:
    tree, shard = slotted
    r = ukdpack("verify", str(shard), "--source-root", str(tree))
    assert r.returncode == 0, r.stderr
    assert (f"ukdpack: {shard}: engine 't:slotted' slot 1 'prep': prep_k\n"
            f"ukdpack: {shard}: engine 't:slotted' slot 2 'main': main_fast, main_safe\n"
            f"ukdpack: {shard}: engine 't:slotted' slot 3 'reduce': reduce_k\n") in r.stdout
    doc = _json("verify", str(shard), "--source-root", str(tree))
    assert doc["ok"] is True
    assert [(s["position"], s["slot"], [k["name"] for k in s["kernels"]])
            for s in doc["slots"]] == [(1, "prep", ["prep_k"]),
                                       (2, "main", ["main_fast", "main_safe"]),
                                       (3, "reduce", ["reduce_k"])]


def test_verify_finds_a_pack_in_another_slot_than_the_root_s(
        slotted: tuple[Path, Path], tmp_path: Path) -> None:
    tree, shard = slotted
    root = tmp_path / "root"
    shutil.copytree(tree, root)
    doc = read_json(root / "main_alt.kdp.json")
    doc["slot"] = "reduce"
    write_json(root / "main_alt.kdp.json", doc)
    r = ukdpack("verify", str(shard), "--source-root", str(root))
    assert r.returncode == 1
    assert "main_alt.kdp.json" in r.stderr and "slot" in r.stderr


# -- diff -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def changed(tmp_path_factory: pytest.TempPathFactory, slotted: tuple[Path, Path],
            cache: Path) -> Path:
    """A shard of the tree with slot reduce renamed combine, a slot post added at the end
    (its own pack), and pack main_alt moved to slot prep."""
    base = tmp_path_factory.mktemp("changed")
    tree = shutil.copytree(slotted[0], base / "tree")
    write_json(tree / "s.ued.json", ued_doc([
        slot_doc("prep"), slot_doc("main", knobs=["block"]), slot_doc("combine"),
        slot_doc("post")]))
    write_json(tree / "reduce.kdp.json", kdp_doc("reduce", "combine", ("reduce_k",)))
    write_json(tree / "main_alt.kdp.json", kdp_doc("main_alt", "prep", ("main_safe",)))
    post = kdp_doc("post", "post", ("reduce_k",))
    post["kernelDescriptors"][0].update(id="k-post", name="post_k",
                                        metadata={"op": "post", "block": 64})
    post["kernelDescriptors"][0]["kernel_source"]["build"] = {"defines": {"POST": 1}}
    write_json(tree / "post.kdp.json", post)
    return _pack(tree, base / "out", cache)


@pytest.fixture(scope="module")
def reordered(tmp_path_factory: pytest.TempPathFactory, slotted: tuple[Path, Path],
              cache: Path) -> Path:
    """A shard of the tree with slot reduce (and its pack) removed and main run first."""
    base = tmp_path_factory.mktemp("reordered")
    tree = shutil.copytree(slotted[0], base / "tree")
    write_json(tree / "s.ued.json", ued_doc([slot_doc("main", knobs=["block"]),
                                             slot_doc("prep")]))
    (tree / "reduce.kdp.json").unlink()
    return _pack(tree, base / "out", cache)


def _slot_diff(a: Path, b: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """The lines of ``diff A B`` (which finds a difference: exit 1) and its ``--json``
    slot changes."""
    r = ukdpack("diff", str(a), str(b))
    assert r.returncode == 1, r.stderr
    return r.stdout.splitlines(), _json("diff", str(a), str(b))["slots"]


def test_diff_reports_a_slot_renamed_added_and_a_pack_moved(
        slotted: tuple[Path, Path], changed: Path) -> None:
    lines, slots = _slot_diff(slotted[1], changed)
    assert "renamed slot 'reduce' of engine 't:slotted' to 'combine'" in lines
    assert "added slot 'post' to engine 't:slotted' (position 4)" in lines
    assert "moved pack 'main_alt' of engine 't:slotted' from slot 'main' to slot 'prep'" in lines
    # A pack in a renamed slot did not move; the kept slots keep their order.
    assert not any("pack 'reduce'" in ln or "reordered" in ln for ln in lines)
    assert sorted((s["change"], s["slot"], s["pack"], s["a"], s["b"]) for s in slots) == [
        ("added", "post", None, None, 4), ("moved", "prep", "main_alt", "main", "prep"),
        ("renamed", "combine", None, "reduce", "combine")]


def test_diff_reports_a_slot_removed_and_the_slots_reordered(
        slotted: tuple[Path, Path], reordered: Path) -> None:
    lines, slots = _slot_diff(slotted[1], reordered)
    assert "removed slot 'reduce' from engine 't:slotted' (was at position 3)" in lines
    assert "reordered the slots of engine 't:slotted': prep, main, reduce -> main, prep" in lines
    assert [s["change"] for s in slots] == ["removed", "reordered"]


def test_diff_of_a_slotted_shard_with_itself_is_equal(slotted: tuple[Path, Path]) -> None:
    doc = _json("diff", str(slotted[1]), str(slotted[1]))
    assert doc["ok"] is True and doc["slots"] == []
