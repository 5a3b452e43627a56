"""What keeps a pack's memory down (bench/README.md, "Pack peak memory"): the tree's
models share what the runtime gives once, and the runtime's set of the authored tree is
freed once the rules and plans are done with it, with the answers the shards need kept."""

from __future__ import annotations

from pathlib import Path

from pack_support import copy_example

from ukdpack.authored.load import load_tree


def test_a_sources_fields_are_the_object_its_document_holds(tmp_path: Path) -> None:
    tree = load_tree(copy_example(tmp_path / "tree"))
    multi = 0
    for m in tree.members:
        held = m.ukd.raw[m.ukd.launches_key]
        for name, src in m.ukd.launches:
            assert src.fields is (held if name is None else held[name])
            multi += name is not None
    assert multi  # the example has kernels of several launches


def test_document_keys_are_one_string_each(tmp_path: Path) -> None:
    tree = load_tree(copy_example(tmp_path / "tree"))
    first, second = tree.members[0].ukd.raw, tree.members[1].ukd.raw
    assert next(k for k in first if k == "id") is next(k for k in second if k == "id")


def test_releasing_the_set_keeps_what_each_shard_ships(tmp_path: Path) -> None:
    tree = load_tree(copy_example(tmp_path / "tree"), arches=["gfx90a", "gfx1030"])
    before = {a: (tree.shipped(a), tree.members_on(a)) for a in ("gfx90a", "gfx1030")}
    assert any(before["gfx90a"][1])
    tree.release_set(["gfx90a", "gfx1030"])
    assert tree.dset is None
    assert {a: (tree.shipped(a), tree.members_on(a)) for a in before} == before
