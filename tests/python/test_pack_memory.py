"""What keeps a pack's memory down (bench/README.md, "Pack peak memory"): the tree's
models hold each kernel's document as its text until a pack makes that kernel's file,
and the runtime's set of the authored tree is freed once the rules and plans are done
with it, with the answers the shards need kept."""

from __future__ import annotations

from pathlib import Path

from pack_support import copy_example

from ukdpack.authored.load import load_tree
from ukdpack.authored.model import LazyDocument, read_document
from ukdpack.digest import canonical_json
from ukdpack.shard import packed


def test_a_kernels_document_is_read_only_when_asked_and_reads_as_the_runtime_read_it(
        tmp_path: Path) -> None:
    """The models read no kernel's document (``raw``): a pack reads those of the packs it
    makes, one file at a time, and keeps none. Read, a document is the runtime's own
    reading of it (comments stepped over), and a source's fields are its entry there."""
    root = copy_example(tmp_path / "tree")
    kdp = next(root.rglob("*.kdp.json"))
    kdp.write_text("// a comment the runtime steps over\n" + kdp.read_text())
    tree = load_tree(root)
    eager = {(k["file"], k["path"]): k["raw"] for p in tree.dset.packs for k in p["kernels"]}
    docs = [m.ukd.raw for m in tree.members]
    assert docs and all(isinstance(d, LazyDocument) for d in docs)
    assert all(d._value is None for d in docs)  # modelling read none
    multi = 0
    for m in tree.members:
        whole = read_document(m.ukd.raw)
        assert whole == eager[(m.ukd.file, m.ukd.json_path)]
        held = whole[m.ukd.launches_key]
        for name, src in m.ukd.launches:
            assert src.fields == (held if name is None else held[name])
            multi += name is not None
    assert multi  # the example has kernels of several launches
    assert all(d._value is None for d in docs)  # read for one use: nothing kept
    # The encoders take a document as the dict it stands for.
    first = docs[0]
    assert canonical_json(first) == canonical_json(first.read())
    assert packed.compact(first) == packed.compact(first.read())
    assert dict(first) == first.read() and first._value is not None  # kept once looked into


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
