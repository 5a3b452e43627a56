"""``ukdpack verify``: a packed shard against what its source root says it must hold."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pack_support import copy_example, read_json, run_pack, write_json
from shard_support import (
    ARCH,
    copy_shard,
    edit,
    errors,
    kernel,
    pack_example,
    rewrite_archive,
    ukdpack,
)

from ukdpack.tools.verify import verify


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The example tree and its shard for gfx90a (hip and prebuilt kernels)."""
    return pack_example(tmp_path_factory, "verify", (ARCH,))


def _shard(packed: tuple[Path, Path], tmp_path: Path, arch: str = ARCH) -> Path:
    return copy_shard(packed[1] / arch, tmp_path / arch)


def _verifies(tree: Path, shard: Path, arch: str, kernels: int, launches: int) -> None:
    r = ukdpack("verify", str(shard), "--source-root", str(tree))
    assert r.returncode == 0, r.stderr
    assert errors(r.stderr) == []
    assert f"verified against {tree}: {kernels} kernels, {launches} launches for {arch}" in r.stdout


def test_a_fresh_shard_verifies(packed: tuple[Path, Path]) -> None:
    tree, out = packed
    _verifies(tree, out / ARCH, ARCH, 9, 12)


def test_a_fresh_shard_of_the_generated_engine_verifies(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """gfx908's shard: hip kernels only, the generated engine among them."""
    tree, out = pack_example(tmp_path_factory, "verify-gfx908", ("gfx908",))
    _verifies(tree, out / "gfx908", "gfx908", 12, 16)


def test_missing_entry_tampered_digest_and_changed_signature_all_reported(
        packed: tuple[Path, Path], tmp_path: Path) -> None:
    tree, _ = packed
    shard = _shard(packed, tmp_path)
    scale = read_json(shard / "attention" / "scale.kdp.json")
    f16_key = kernel(scale, "scale.f16")["kernel_source"]["toc_key"]
    rewrite_archive(shard, drop=[f16_key])  # scale.f16's object is gone from the archive

    def tamper_digest(doc: Any) -> None:
        kernel(doc, "split_kv.f32")["sources"]["produce"]["sha256"] = "0" * 64

    def change_signature(doc: Any) -> None:
        kernel(doc, "twostage.gfx90a")["sources"]["combine"]["signature"][3]["size"] = 4

    edit(shard / "attention" / "split_kv.kdp.json", tamper_digest)
    edit(shard / "prebuilt" / "twostage.kdp.json", change_signature)
    r = ukdpack("verify", str(shard), "--source-root", str(tree))
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    lines = errors(r.stderr)
    # The runtime's own rule sees the tampered digest first: one toc key, two digests;
    # verify's signature check; then the runtime's findings loading the code, in its words
    # (verify recomputes none of them: no digest, no archive membership).
    assert len(lines) == 4, r.stderr
    shared, signature, missing, digest = lines
    assert shared.startswith("ukdpack: error: attention/split_kv.kdp.json: "
                             "$.kernelDescriptors[0].sources.produce.sha256: kernel "
                             "'split_kv.f32' (id d168fb16-29a6-564c-b73f-f659c7cd8e72) launch "
                             "'produce' names toc key ")
    assert "and launch 'consume' of the same kernel names it with sha256" in shared
    assert missing == ("ukdpack: error: attention/scale.kdp.json: "
                       "$.kernelDescriptors[1].kernel_source.toc_key: TOC_MISSING: kernel "
                       "'scale.f16' (id 9a038e0d-7fc8-5a7a-b054-7ec86dbc56fc, single launch): "
                       "archive '../kpack/kernels_gfx90a.kpack' (kpack/kernels_gfx90a.kpack in "
                       f"the shard) has no entry for toc key '{f16_key}' and arch gfx90a (it "
                       "holds arches gfx90a): it holds no entry of that key")
    split = kernel(read_json(shard / "attention" / "split_kv.kdp.json"), "split_kv.f32")
    consume = split["sources"]["consume"]
    assert digest == ("ukdpack: error: attention/split_kv.kdp.json: "
                      "$.kernelDescriptors[0].sources.produce.sha256: DIGEST_MISMATCH: kernel "
                      "'split_kv.f32' (id d168fb16-29a6-564c-b73f-f659c7cd8e72) launch "
                      "'produce': the code object for gfx90a (toc key "
                      f"'{consume['toc_key']}' in ../kpack/kernels_gfx90a.kpack) has sha256 "
                      f"{consume['sha256']}, the descriptor says {'0' * 64}; the archive does "
                      "not hold what this kernel was packed with")
    assert signature.startswith("ukdpack: error: prebuilt/twostage.kdp.json: "
                                "$.kernelDescriptors[0].sources.combine.signature: kernel "
                                "'twostage.gfx90a' (id 57790d2d-dc56-5ef3-916f-c177c3c37db9) launch "
                                "'combine': signature (")
    assert "by_value 4@24) differs from the one read from the code object for " \
           "'twostage_combine', (" in signature
    assert "does not match" in r.stdout and "4 errors" in r.stdout


def test_launches_compare_by_name_not_position(packed: tuple[Path, Path],
                                               tmp_path: Path) -> None:
    """Reordered sources keys, in the shard and in the root, change nothing."""
    tree, _ = packed
    shard = _shard(packed, tmp_path)

    def reverse(doc: Any) -> None:
        k = kernel(doc, "split_kv.f32")
        k["sources"] = dict(reversed(list(k["sources"].items())))

    edit(shard / "attention" / "split_kv.kdp.json", reverse)
    assert list(kernel(read_json(shard / "attention" / "split_kv.kdp.json"),
                       "split_kv.f32")["sources"]) == ["produce", "consume"]
    root = tmp_path / "root"
    shutil.copytree(tree, root)
    authored = root / "prebuilt" / "twostage.kdp.json"
    doc = read_json(authored)
    for k in doc["kernelDescriptors"]:
        k["sources"] = dict(reversed(list(k["sources"].items())))
    write_json(authored, doc)
    r = ukdpack("verify", str(shard), "--source-root", str(root))
    assert r.returncode == 0, r.stderr


def test_launches_swapped_between_names_are_caught(packed: tuple[Path, Path],
                                                   tmp_path: Path) -> None:
    """The same two entries under each other's names: every value is still there, but
    each launch now runs the other's symbol."""
    tree, _ = packed
    shard = _shard(packed, tmp_path)

    def swap(doc: Any) -> None:
        s = kernel(doc, "split_kv.f32")["sources"]
        s["produce"], s["consume"] = s["consume"], s["produce"]

    edit(shard / "attention" / "split_kv.kdp.json", swap)
    r = ukdpack("verify", str(shard), "--source-root", str(tree))
    assert r.returncode == 1
    lines = errors(r.stderr)
    assert any(".sources.produce.symbol: kernel 'split_kv.f32' (id d168fb16-29a6-564c-b73f-f659c7cd8e72) launch 'produce': symbol is "
               "'split_kv_consume' in the shard, 'split_kv_produce' in the root" in ln
               for ln in lines), r.stderr
    assert any(".sources.consume.symbol: kernel 'split_kv.f32' (id d168fb16-29a6-564c-b73f-f659c7cd8e72) launch 'consume': symbol is "
               "'split_kv_produce' in the shard, 'split_kv_consume' in the root" in ln
               for ln in lines), r.stderr


def test_prebuilt_objects_compare_byte_for_byte(packed: tuple[Path, Path],
                                                tmp_path: Path) -> None:
    """A root whose prebuilt object changed after packing: the shard no longer holds it."""
    tree, out = packed
    root = tmp_path / "root"
    shutil.copytree(tree, root)
    obj = root / "prebuilt" / "objects" / ARCH / "reduce.hsaco"
    data = bytearray(obj.read_bytes())
    data[-1] ^= 0xFF  # the tail of the ELF (section headers' padding or names): still an object
    obj.unlink()  # DVC links objects from its cache: replace the file, do not write through
    obj.write_bytes(bytes(data))
    r = ukdpack("verify", str(out / ARCH), "--source-root", str(root))
    assert r.returncode == 1
    lines = errors(r.stderr)
    # reduce_sum and both launches of twostage read that object.
    assert len([ln for ln in lines if "differs from the root's prebuilt object "
                "prebuilt/objects/gfx90a/reduce.hsaco" in ln]) == 3, r.stderr
    assert any("kernel 'twostage.gfx90a' (id 57790d2d-dc56-5ef3-916f-c177c3c37db9) launch 'partial'" in ln for ln in lines)


def test_kernels_missing_extra_moved_or_changed(packed: tuple[Path, Path],
                                                tmp_path: Path) -> None:
    tree, _ = packed
    shard = _shard(packed, tmp_path)

    def drop_and_change(doc: Any) -> None:
        doc["kernelDescriptors"] = [k for k in doc["kernelDescriptors"]
                                    if k["name"] != "scale.f32"]
        kernel(doc, "scale.f16")["priority"] = 99

    edit(shard / "attention" / "scale.kdp.json", drop_and_change)

    def wrong_arch(doc: Any) -> None:
        kernel(doc, "reduce_sum.gfx90a")["arch"] = ["gfx940"]

    edit(shard / "prebuilt" / "reduce.kdp.json", wrong_arch)

    def other_metadata(doc: Any) -> None:
        kernel(doc, "twostage.gfx90a")["metadata"] = {"op": "max"}

    edit(shard / "prebuilt" / "twostage.kdp.json", other_metadata)

    def rename_launch(doc: Any) -> None:
        sources = kernel(doc, "split_kv.f32")["sources"]
        sources["finish"] = sources.pop("consume")

    edit(shard / "attention" / "split_kv.kdp.json", rename_launch)
    r = ukdpack("verify", str(shard), "--source-root", str(tree), "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and doc["arch"] == ARCH
    found = {(p["file"], p["path"], p["message"]) for p in doc["problems"]
             if p["severity"] == "error"}
    assert ("attention/scale.kdp.json", "$.kernelDescriptors",
            "kernel 'scale.f32' (29f00a30-4246-57a5-9889-af778425f9c3, attention/scale.kdp.json: "
            "$.kernelDescriptors[0] in the root) is not in the shard; the root puts it in the "
            "gfx90a shard") in found
    assert ("attention/scale.kdp.json", "$.kernelDescriptors[0].priority",
            "kernel 'scale.f16' (id 9a038e0d-7fc8-5a7a-b054-7ec86dbc56fc): priority is 99 in the shard, 5 in the root") in found
    # The runtime refuses a kernel whose arch leaves its pack's: verify says so with the
    # runtime's words (and does not report the kernel missing on top).
    assert ("prebuilt/reduce.kdp.json", "$.kernelDescriptors[0].arch",
            "arch 'gfx940' not in its KDP's arch [gfx90a] (prebuilt/reduce.kdp.json); a "
            "kernel's arch is a subset of its pack's") in found
    assert ("prebuilt/twostage.kdp.json", "$.kernelDescriptors[0].metadata",
            "kernel 'twostage.gfx90a' (id 57790d2d-dc56-5ef3-916f-c177c3c37db9): metadata is {\"op\":\"max\"} in the shard, "
            "{\"op\":\"sum_squares\"} in the root") in found
    assert ("attention/split_kv.kdp.json", "$.kernelDescriptors[0].sources",
            "kernel 'split_kv.f32' (id d168fb16-29a6-564c-b73f-f659c7cd8e72) launch 'consume' is missing from the shard; the root's "
            "kernel has launches {consume, produce}") in found
    assert ("attention/split_kv.kdp.json", "$.kernelDescriptors[0].sources.finish",
            "kernel 'split_kv.f32' (id d168fb16-29a6-564c-b73f-f659c7cd8e72) launch 'finish' is in the shard, but the root's kernel has "
            "launches {consume, produce}") in found
    assert len(found) == 7, found


def test_excluded_folders_and_the_arch_of_the_packs(packed: tuple[Path, Path],
                                                    tmp_path: Path) -> None:
    tree, out = packed
    # The root without prebuilt/ says the shard must not hold its kernels.
    r = ukdpack("verify", str(out / ARCH), "--source-root", str(tree),
                "--exclude-folder", "prebuilt")
    assert r.returncode == 1
    lines = errors(r.stderr)
    assert any("prebuilt/reduce.kdp.json: $.kernelDescriptors[0]: kernel 'reduce_sum.gfx90a' "
               "(11f56662-04c9-5b01-991e-71b4342e43e8) is in the shard, but the root does not "
               "put it in the gfx90a shard" in ln for ln in lines), r.stderr
    assert any("prebuilt/prebuilt.ued.json: $: UED 'example:prebuilt'" in ln for ln in lines)
    # A shard folder not named for its arch: told by --arch, or by its packs.
    shard = copy_shard(out / ARCH, tmp_path / "renamed")
    assert verify(shard, tree).shard.arch == ARCH
    edit(shard / "attention" / "scale.kdp.json", lambda d: d.update(arch=["gfx940"]))
    result = verify(shard, tree, arch="gfx90a:xnack-")
    assert [(p.file, p.path, p.message) for p in result.problems] == [
        ("attention/scale.kdp.json", "$.arch",
         "pack 'scale': arch is [\"gfx940\"] in the shard, [\"gfx90a\"] in the root")]


def test_a_root_that_breaks_the_rules_is_refused(packed: tuple[Path, Path],
                                                 tmp_path: Path) -> None:
    _, out = packed
    root = tmp_path / "root"
    write_json(root / "a.udd.json", {"id": "u", "version": "1.0", "name": "u"})
    r = ukdpack("verify", str(out / ARCH), "--source-root", str(root))
    assert r.returncode == 1
    assert f"ukdpack: error: {root}/a.udd.json: $: missing required field " \
           "'dispatch_symbol'" in r.stderr
    assert "the source root breaks the rules above" in r.stderr
    r = ukdpack("verify", str(tmp_path / "nowhere"), "--source-root", str(root))
    assert r.returncode == 2 and "expected a shard folder" in r.stderr
    assert "Traceback" not in r.stderr
    assert ukdpack("verify", str(out / ARCH)).returncode == 2  # --source-root is required


# ---------------------------------------------------------------------------
# Provenance sidecars: there, readable, one entry per kernel, bound to it

SPLIT_SIDECAR = "attention/split_kv.kdp.provenance.json.gz"
SCALE_SIDECAR = "attention/scale.kdp.provenance.json.gz"


def _sidecar(shard: Path, rel: str) -> Any:
    return json.loads(gzip.decompress((shard / rel).read_bytes()))


def _write_sidecar(shard: Path, rel: str, doc: Any) -> None:
    """Hand-made, to test refusal: compact key-sorted JSON in gzip, as the packer writes."""
    text = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    (shard / rel).write_bytes(gzip.compress(text, mtime=0))


def _verify_errors(shard: Path, tree: Path) -> list[str]:
    r = ukdpack("verify", str(shard), "--source-root", str(tree))
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    return errors(r.stderr)


def test_a_sidecar_bound_to_another_kernel_is_reported(packed: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    tree, _ = packed
    shard = _shard(packed, tmp_path)
    doc = _sidecar(shard, SPLIT_SIDECAR)
    (kid,) = doc["entries"]
    good = doc["entries"][kid]["sha256"]
    doc["entries"][kid]["sha256"] = "0" * 64
    _write_sidecar(shard, SPLIT_SIDECAR, doc)
    assert _verify_errors(shard, tree) == [
        f"ukdpack: error: {SPLIT_SIDECAR}: $.entries[\"{kid}\"].sha256: kernel 'split_kv.f32' (id d168fb16-29a6-564c-b73f-f659c7cd8e72): "
        f"binding digest {'0' * 64} differs from {good}, the digest of the packed kernel "
        "(attention/split_kv.kdp.json: $.kernelDescriptors[0]); the entry was written for "
        "another version of it"]


def test_a_kernel_edited_after_packing_no_longer_binds_its_entry(
        packed: tuple[Path, Path], tmp_path: Path) -> None:
    """The entry was written for the kernel as packed: an edit of the shard's kernel (here
    one the root has too) breaks the binding, besides the field it changed."""
    tree, _ = packed
    shard = _shard(packed, tmp_path)
    kid = kernel(read_json(shard / "attention" / "scale.kdp.json"), "scale.f16")["id"]
    edit(shard / "attention" / "scale.kdp.json",
         lambda d: kernel(d, "scale.f16").update(priority=99), reseal=False)
    lines = _verify_errors(shard, tree)
    assert len(lines) == 2, lines
    assert lines[0] == ("ukdpack: error: attention/scale.kdp.json: $.kernelDescriptors[1]."
                        "priority: kernel 'scale.f16' (id 9a038e0d-7fc8-5a7a-b054-7ec86dbc56fc): priority is 99 in the shard, 5 in the root")
    assert lines[1].startswith(f"ukdpack: error: {SCALE_SIDECAR}: $.entries[\"{kid}\"].sha256: "
                               "kernel 'scale.f16' (id 9a038e0d-7fc8-5a7a-b054-7ec86dbc56fc): binding digest ")
    # Resealed (as a packer writing the edited kernel would), only the field differs.
    edit(shard / "attention" / "scale.kdp.json", lambda d: None)
    assert _verify_errors(shard, tree) == lines[:1]


@pytest.mark.parametrize("damage, found", [
    ("missing", "provenance sidecar missing: prebuilt/reduce.kdp.json holds packed kernels "
                "('reduce_sum.gfx90a') whose provenance the packer writes to "
                "prebuilt/reduce.kdp.provenance.json.gz; found nothing there"),
    ("plain-json", "expected gzip (a provenance sidecar), found bytes that are not: "),
    ("truncated", "expected gzip (a provenance sidecar), found bytes that are not: "),
    ("gzip-of-text", "expected JSON inside the gzip, found text that is not: "),
    ("gzip-of-array", "$: expected an object {version, kdp_id, entries}, found [1,2]"),
])
def test_a_missing_or_garbage_sidecar_is_one_error(packed: tuple[Path, Path], tmp_path: Path,
                                                   damage: str, found: str) -> None:
    tree, _ = packed
    shard = _shard(packed, tmp_path)
    rel = "prebuilt/reduce.kdp.provenance.json.gz"
    path = shard / rel
    if damage == "missing":
        path.unlink()
    elif damage == "plain-json":
        path.write_bytes(gzip.decompress(path.read_bytes()))
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:-12])
    elif damage == "gzip-of-text":
        path.write_bytes(gzip.compress(b"\xff not json"))
    else:
        path.write_bytes(gzip.compress(b"[1,2]"))
    (line,) = _verify_errors(shard, tree)
    assert line.startswith(f"ukdpack: error: {rel}: {found}"), line


def test_sidecar_entries_are_the_kernels_of_their_file(packed: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    """An entry missing for a kernel, an entry for no kernel, a wrong pack id and version:
    one line each."""
    tree, _ = packed
    shard = _shard(packed, tmp_path)
    scale = read_json(shard / "attention" / "scale.kdp.json")
    f16 = kernel(scale, "scale.f16")["id"]
    doc = _sidecar(shard, SCALE_SIDECAR)
    stray = "00000000-0000-5000-8000-000000000000"
    doc["entries"][stray] = doc["entries"].pop(f16)
    doc["kdp_id"] = "another-pack"
    doc["version"] = "2.0"
    _write_sidecar(shard, SCALE_SIDECAR, doc)
    assert sorted(_verify_errors(shard, tree)) == sorted([
        f"ukdpack: error: {SCALE_SIDECAR}: $.version: expected \"1.0\", found \"2.0\"",
        f"ukdpack: error: {SCALE_SIDECAR}: $.kdp_id: expected \"{scale['id']}\" (pack 'scale', "
        "attention/scale.kdp.json), found \"another-pack\"",
        f"ukdpack: error: {SCALE_SIDECAR}: $.entries: no entry for kernel 'scale.f16' ({f16}, "
        "attention/scale.kdp.json: $.kernelDescriptors[1]); the packer writes one for every "
        "packed kernel",
        f"ukdpack: error: {SCALE_SIDECAR}: $.entries[\"{stray}\"]: entry for '{stray}', which "
        "is no kernel of attention/scale.kdp.json"])


def test_a_standalone_kernel_has_its_own_sidecar(tmp_path: Path,
                                                 tmp_path_factory: pytest.TempPathFactory
                                                 ) -> None:
    """A kernel in its own UKD file has its sidecar beside that file, naming its pack:
    the example with scale.f16 moved out of its KDP, packed and verified, then that
    sidecar removed."""
    tree = copy_example(tmp_path / "tree")
    kdp_file = tree / "attention" / "scale.kdp.json"
    doc = read_json(kdp_file)
    f16 = doc["kernelDescriptors"].pop(1)
    f16["kernel_source"]["source"] = "../kernels/scale.hip"
    write_json(tree / "attention" / "solo" / "f16.ukd.json", f16)
    doc["kernelDescriptors"].append(f16["id"])
    write_json(kdp_file, doc)
    cache = tmp_path_factory.getbasetemp() / "shard-tools-cache"
    assert run_pack(tree, tmp_path / "out", [ARCH], cache=cache).returncode == 0
    shard = tmp_path / "out" / ARCH
    rel = "attention/solo/f16.ukd.provenance.json.gz"
    assert _sidecar(shard, rel)["kdp_id"] == doc["id"]
    r = ukdpack("verify", str(shard), "--source-root", str(tree))
    assert r.returncode == 0, r.stderr
    (shard / rel).unlink()
    assert _verify_errors(shard, tree) == [
        f"ukdpack: error: {rel}: provenance sidecar missing: attention/solo/f16.ukd.json holds "
        f"packed kernels ('scale.f16') whose provenance the packer writes to {rel}; found "
        "nothing there"]
