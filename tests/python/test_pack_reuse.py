"""A repack takes the previous shard's unchanged files (docs/packing.md, "Repacking"):
what it publishes is byte for byte a pack from scratch, a file is reused only when its
content is the one recorded for the same inputs, and a shard damaged by hand is packed
anew, never reused."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from pack_support import OBJECTS, run_pack, shard_files, write_engine, write_json

from ukdpack import _runtime, cli
from ukdpack.shard import reuse

ARCH = "gfx90a"


def _ukd(i: str, v: int, obj: str, symbol: str = "split_kv_produce") -> dict[str, Any]:
    return {"id": i, "version": "1.0", "name": i, "priority": 0, "metadata": {"v": v},
            "arch": [ARCH], "kernel_source": {"kind": "hsaco", "file": obj, "symbol": symbol}}


def _kdp(root: Path, rel: str, kernels: list[Any]) -> None:
    write_json(root / rel, {"id": "kdp-" + rel, "version": "1.0", "name": rel, "arch": [ARCH],
                            "matchers": [], "engine": "ued", "dispatch": "udd",
                            "kernelDescriptors": kernels})


def _tree(root: Path) -> Path:
    """Three packs over two prebuilt objects: inline kernels (one pack of two), and a
    pack naming a standalone UKD file."""
    write_engine(root)
    (root / "o").mkdir(parents=True)
    shutil.copy(OBJECTS / "split_kv.gfx90a.hsaco", root / "o" / "one.hsaco")
    shutil.copy(OBJECTS / "split_kv.gfx90a.bundle.hsaco", root / "o" / "two.hsaco")
    _kdp(root, "a.kdp.json", [_ukd("ka", 1, "o/one.hsaco")])
    _kdp(root, "b/b.kdp.json", [_ukd("kb1", 2, "../o/one.hsaco", "split_kv_consume"),
                                _ukd("kb2", 3, "../o/two.hsaco")])
    _kdp(root, "c.kdp.json", ["ku"])
    write_json(root / "u.ukd.json", _ukd("ku", 4, "o/two.hsaco", "split_kv_consume"))
    return root


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


def _pack(root: Path, out: Path, cache: Path) -> None:
    r = run_pack(root, out, (ARCH,), cache=cache)
    assert r.returncode == 0, r.stderr


def _inodes(shard: Path) -> dict[str, int]:
    return {str(p.relative_to(shard)): p.stat().st_ino for p in shard.rglob("*") if p.is_file()}


def _edit_metadata(path: Path, v: int) -> None:
    doc = json.loads(path.read_text())
    doc["kernelDescriptors"][0]["metadata"]["v"] = v
    write_json(path, doc)


def _cold(root: Path, tmp_path: Path, cache: Path) -> dict[str, bytes]:
    """The shard a pack from scratch publishes (a fresh out root: nothing to reuse)."""
    out = tmp_path / "cold"
    shutil.rmtree(out, ignore_errors=True)
    _pack(root, out, cache)
    return shard_files(out / ARCH)


def test_an_edits_repack_is_a_cold_pack_byte_for_byte_and_reuses_the_rest(
        tmp_path: Path, cache: Path) -> None:
    root, out = _tree(tmp_path / "t"), tmp_path / "out"
    _pack(root, out, cache)
    before = _inodes(out / ARCH)
    _edit_metadata(root / "a.kdp.json", 7)
    _pack(root, out, cache)
    assert shard_files(out / ARCH) == _cold(root, tmp_path, cache)
    after = _inodes(out / ARCH)
    changed = sorted(rel for rel in after if after[rel] != before.get(rel))
    # The edited pack's file and sidecar are new (and the archive and the shard's index,
    # written every pack); every other file is the previous shard's, linked: the other
    # packs, the standalone UKD and its sidecar, the generic descriptors.
    assert changed == ["a.kdp.json", "a.kdp.provenance.json.gz", "index.ukdx",
                       f"kpack/kernels_{ARCH}.kpack"]
    assert {"b/b.kdp.json", "c.kdp.json", "u.ukd.json", "u.ukd.provenance.json.gz",
            "d.udd.json"} <= set(after)


def test_a_tampered_previous_shard_is_never_reused(tmp_path: Path, cache: Path) -> None:
    root, out = _tree(tmp_path / "t"), tmp_path / "out"
    _pack(root, out, cache)
    shard = out / ARCH
    # Same length, same mtime: only the content tells.
    for rel, old, new in [("b/b.kdp.json", b'"v":2', b'"v":9'),
                          ("u.ukd.json", b'"v":4', b'"v":8'),
                          ("d.udd.json", b'"sym"', b'"sYm"')]:
        path = shard / rel
        st = path.stat()
        data = path.read_bytes()
        assert old in data
        path.write_bytes(data.replace(old, new))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    # A file swapped for a link to a copy of itself is not taken either.
    sidecar = shard / "b" / "b.kdp.provenance.json.gz"
    shutil.copy(sidecar, tmp_path / "elsewhere.gz")
    sidecar.unlink()
    sidecar.symlink_to(tmp_path / "elsewhere.gz")
    # A file with a second name outside the shard is not linked into the new one (it
    # could change through that name), nor is one reached through a linked folder.
    os.link(shard / "c.kdp.json", tmp_path / "outside.json")
    shutil.copytree(shard / "b", tmp_path / "b-copy", symlinks=True)
    shutil.rmtree(shard / "b")
    (shard / "b").symlink_to(tmp_path / "b-copy")
    _edit_metadata(root / "a.kdp.json", 5)
    _pack(root, out, cache)
    assert shard_files(shard) == _cold(root, tmp_path, cache)
    assert not sidecar.is_symlink() and not (shard / "b").is_symlink()
    assert (shard / "c.kdp.json").stat().st_ino != (tmp_path / "outside.json").stat().st_ino
    for rel in ("b.kdp.json", "b.kdp.provenance.json.gz"):
        assert (shard / "b" / rel).stat().st_ino != (tmp_path / "b-copy" / rel).stat().st_ino


def test_a_damaged_record_costs_only_the_reuse(tmp_path: Path, cache: Path) -> None:
    root, out = _tree(tmp_path / "t"), tmp_path / "out"
    _pack(root, out, cache)
    records = list((cache / "v1" / reuse.RECORD_FOLDER).glob("*.json"))
    assert records
    for path in records:
        path.write_text('{"format": "' + reuse.PARTS_FORMAT + '", "parts": {"x": 1}}')
    before = _inodes(out / ARCH)
    _pack(root, out, cache)
    assert shard_files(out / ARCH) == _cold(root, tmp_path, cache)
    # Nothing was taken from a record that says nothing, yet files holding the very
    # bytes made anew are linked all the same.
    assert _inodes(out / ARCH)["b/b.kdp.json"] == before["b/b.kdp.json"]



def _record_of(cache: Path, out: Path) -> reuse.RecordFile:
    """The record of the shard in ``out``, which names the sha256 of its index."""
    record = reuse.read_record(reuse.record_path(cache / "v1", out, "kernels", ARCH))
    index = out / ARCH / _runtime.SHARD_INDEX_FILE
    assert record.index == hashlib.sha256(index.read_bytes()).hexdigest()
    return record


def test_a_repack_reads_back_only_the_edited_packs_kernels(
        tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The index's confirmation reads each kernel back through the index written. A
    repack's draft is told the files it took from the previous shard, whose index the
    record says this code confirmed: their kernels were read back then and are not
    again; the edited pack's are, and a previous index that is not the one recorded
    vouches for nothing. The shard is a cold pack's byte for byte either way."""
    root, out = _tree(tmp_path / "t"), tmp_path / "out"
    _pack(root, out, cache)
    assert _record_of(cache, out).parts
    drafts: list[_runtime.ShardIndexDraft] = []
    real = _runtime.shard_index_draft

    def draft(*args: Any) -> tuple[_runtime.ShardIndexDraft | None, str]:
        made = real(*args)
        assert made[0] is not None
        drafts.append(made[0])
        return made

    monkeypatch.setattr(_runtime, "shard_index_draft", draft)
    argv = ["pack", "--source-root", str(root), "--out-root", str(out), "--cache-dir",
            str(cache), "--arch", ARCH, "--plain", "--jobs", "2"]
    _edit_metadata(root / "a.kdp.json", 11)
    assert cli.main(argv) == 0
    # c.kdp.json names a standalone UKD only: nothing inline to read back.
    assert drafts[-1].unchanged == ["b/b.kdp.json", "c.kdp.json"]
    assert shard_files(out / ARCH) == _cold(root, tmp_path, cache)
    _record_of(cache, out)  # the record names the index just published
    # The previous index replaced by another that reads (a cold pack's of other
    # content): not the one the record names, so every kernel is read back.
    _edit_metadata(root / "b/b.kdp.json", 12)
    _cold(root, tmp_path, cache)
    shutil.copy(tmp_path / "cold" / ARCH / _runtime.SHARD_INDEX_FILE,
                out / ARCH / _runtime.SHARD_INDEX_FILE)
    _edit_metadata(root / "a.kdp.json", 13)
    assert cli.main(argv) == 0
    assert drafts[-1].unchanged == []
    assert shard_files(out / ARCH) == _cold(root, tmp_path, cache)


def test_a_repack_reads_the_documents_of_the_edited_pack_alone(
        tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel's document is read when its pack's files are made: a pack from scratch
    reads every kernel's, a repack after one pack's edit that pack's alone (the others'
    files are the previous shard's, keyed by the bytes each kernel was read from)."""
    from ukdpack.authored.model import LazyDocument

    root, out = _tree(tmp_path / "t"), tmp_path / "out"
    read: list[str] = []
    real = LazyDocument.read

    def reading(doc: LazyDocument) -> dict[str, Any]:
        value = real(doc)
        read.append(str(value["id"]))
        return value

    monkeypatch.setattr(LazyDocument, "read", reading)
    argv = ["pack", "--source-root", str(root), "--out-root", str(out), "--cache-dir",
            str(cache), "--arch", ARCH, "--plain"]
    assert cli.main(argv) == 0
    assert sorted(read) == ["ka", "kb1", "kb2", "ku"]
    read.clear()
    _edit_metadata(root / "b/b.kdp.json", 9)
    assert cli.main(argv) == 0
    assert sorted(read) == ["kb1", "kb2"]
    assert shard_files(out / ARCH) == _cold(root, tmp_path, cache)


def test_a_kernels_part_of_the_key_is_the_bytes_it_was_read_from(tmp_path: Path,
                                                                 cache: Path) -> None:
    """A UKD is keyed by the sha256 of the bytes the runtime read it from (inline or in
    a file of its own, comments stepped over as the runtime steps over them): an edit of
    either is packed anew, never taken from the previous shard."""
    from ukdpack.authored.load import load_tree

    root, out = _tree(tmp_path / "t"), tmp_path / "out"
    text = (root / "b/b.kdp.json").read_text()
    (root / "b/b.kdp.json").write_text("// two kernels\n" + text)
    ukds = {m.ukd.id: m.ukd for m in load_tree(root).members}
    standalone = (root / "u.ukd.json").read_bytes().strip()
    assert ukds["ku"].raw_sha256 == hashlib.sha256(standalone).hexdigest()
    assert reuse.raw_digest(ukds["ku"]) == "text:" + ukds["ku"].raw_sha256
    assert len({u.raw_sha256 for u in ukds.values()}) == len(ukds) == 4
    _pack(root, out, cache)
    doc = json.loads(text)
    doc["kernelDescriptors"][1]["metadata"]["v"] = 30
    (root / "b/b.kdp.json").write_text("// two kernels\n" + json.dumps(doc, indent=1))
    write_json(root / "u.ukd.json", _ukd("ku", 40, "o/two.hsaco", "split_kv_consume"))
    _pack(root, out, cache)
    assert shard_files(out / ARCH) == _cold(root, tmp_path, cache)


def test_a_parts_key_follows_the_value_alone() -> None:
    # Each different value keys apart (types, key order: the packed form keeps it), and
    # an equal value keys alike however it was built: which of its parts are one object
    # (a pickler's memo would tell) changes nothing, so a record is found again.
    values: list[Any] = [[1], [True], [1.0], ["1"], [None], [[1]], [{"a": 1, "b": 2}],
                         [{"b": 2, "a": 1}], [{"a": [1]}], ["é"], ["\ud800"]]
    assert len({reuse.digest_value(v) for v in values}) == len(values)
    shared = {"x": [1, 2]}
    assert reuse.digest_value([shared, shared]) == reuse.digest_value([{"x": [1, 2]},
                                                                        {"x": [1, 2]}])
    same = [json.loads('{"s": "' + "k" * 40 + '"}') for _ in range(2)]
    assert reuse.digest_value(same) == reuse.digest_value([same[0], same[0]])
    assert reuse.part_key(["gfx90a", shared]) == reuse.part_key(["gfx90a", {"x": [1, 2]}])
    assert reuse.part_key(["gfx90a"]) != reuse.part_key(["gfx940"])


def test_the_parts_keys_follow_the_extension(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A part's key covers the extension as well as the modules: it reads the descriptors
    and makes the launches and toc keys a part is made of, so another build of it (a C++
    fix, the same Python) makes every part anew."""
    from ukdpack import _runtime

    built = _runtime.__file__
    assert built is not None
    reuse.forget_code_identity()
    try:
        before = reuse.code_identity()
        other = tmp_path / Path(built).name
        other.write_bytes(Path(built).read_bytes() + b"\0")
        monkeypatch.setattr(_runtime, "__file__", str(other))
        reuse.forget_code_identity()
        assert reuse.code_identity() != before
        monkeypatch.setattr(_runtime, "__file__", built)
        reuse.forget_code_identity()
        assert reuse.code_identity() == before
    finally:
        reuse.forget_code_identity()


def test_the_code_identity_takes_each_module_digest_the_cache_recorded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the compile cache's digests the packer's identity is the same value, and
    once they are recorded a pack reads none of its own modules again to make it."""
    from ukdpack.produce.cache import FileDigests

    manifest = tmp_path / "file-digests.json"
    reuse.forget_code_identity()
    try:
        plain = reuse.code_identity()
        reuse.forget_code_identity()
        first = FileDigests(manifest)
        assert reuse.code_identity(first) == plain
        first.save(lambda path, data: path.write_bytes(data) is not None)
        reuse.forget_code_identity()

        def refuse(*_args: object, **_kwargs: object) -> None:
            raise AssertionError("a module read again")

        monkeypatch.setattr(reuse, "open", refuse, raising=False)
        assert reuse.code_identity(FileDigests(manifest)) == plain
    finally:
        reuse.forget_code_identity()
