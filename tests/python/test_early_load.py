"""The tree load ``ukdpack pack`` starts before importing the packer: taken only by the
load that asks for exactly it, once, and never by a later command of the process."""

from __future__ import annotations

from pathlib import Path

from pack_support import copy_example, read_json, write_json

from ukdpack import cli
from ukdpack.authored import early
from ukdpack.authored.load import load_tree


def test_the_started_load_is_taken_by_the_same_load_only(tmp_path: Path) -> None:
    tree = copy_example(tmp_path / "tree")
    early.start(str(tree), [], True, ["gfx90a"])
    assert early.take(str(tree), [], True, ["gfx1030"]) is None  # another load: not it
    assert early.take(str(tree), [], True, ["gfx90a"]) is None  # and it is gone
    early.start(str(tree), [], True, ["gfx90a"])
    dset = early.take(str(tree), [], True, ["gfx90a"])
    assert dset is not None and dset.ok
    assert early.take(str(tree), [], True, ["gfx90a"]) is None  # taken once


def test_load_tree_takes_the_started_load(tmp_path: Path) -> None:
    tree = copy_example(tmp_path / "tree")
    early.start(str(tree), [], True, ["gfx90a"])
    started = early._started
    assert started is not None
    started.thread.join()
    loaded = load_tree(tree, arches=["gfx90a"])
    assert loaded.dset is started.dset
    assert early._started is None


def test_a_load_left_by_a_failed_pack_is_not_taken_later(tmp_path: Path) -> None:
    """A pack refused after its load started (a bad --arch) leaves nothing behind for the
    next command of the process, which reads the tree as it is then."""
    tree = copy_example(tmp_path / "tree")
    out = tmp_path / "out"
    assert cli.main(["pack", "--source-root", str(tree), "--out-root", str(out),
                     "--arch", "not-an-arch", "--plain"]) == 2
    assert early._started is None
    kdp = tree / "attention" / "scale.kdp.json"
    doc = read_json(kdp)
    doc["kernelDescriptors"] = doc["kernelDescriptors"][:1]
    write_json(kdp, doc)
    loaded = load_tree(tree, arches=["gfx90a"])
    names = {m.ukd.name for m in loaded.members if m.ukd.file == "attention/scale.kdp.json"}
    assert len(names) == 1
