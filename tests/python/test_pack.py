"""``ukdpack pack`` on real trees: shards, sharing, caching, failures, determinism."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from kpack_oracle import Archive
from pack_support import (
    compiles,
    copy_example,
    counting_compiler,
    read_json,
    run_pack,
    shard_files,
    write_json,
)

from ukdpack import _runtime
from ukdpack.produce import codeobject
from ukdpack.shard import provenance

ARCHES = ("gfx90a", "gfx940", "gfx1030")


@pytest.fixture(scope="module")
def example_pack(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The example tree packed once for the three arches: (tree, out, cache)."""
    base = tmp_path_factory.mktemp("example")
    tree = copy_example(base / "tree")
    r = run_pack(tree, base / "out", ARCHES, cache=base / "cache")
    assert r.returncode == 0, r.stderr
    return tree, base / "out", base / "cache"


def _kernels(shard: Path, kdp: str) -> list[dict[str, Any]]:
    kernels: list[dict[str, Any]] = read_json(shard / "attention" / kdp)["kernelDescriptors"]
    return kernels


def test_three_shards_with_shared_multi_launch_object(example_pack: tuple[Path, Path, Path]
                                                      ) -> None:
    _, out, _ = example_pack
    for arch in ARCHES:
        shard = out / arch
        archive = Archive.open(shard / "kpack" / f"kernels_{arch}.kpack")
        # gfx1030 also ships prebuilt/'s gfx10-3-generic object, filed under its target.
        assert archive.arches == (["gfx10-3-generic", arch] if arch == "gfx1030" else [arch])
        (split,) = _kernels(shard, "split_kv.kdp.json")
        produce, consume = split["sources"]["produce"], split["sources"]["consume"]
        assert list(produce) == ["kind", "library", "toc_key", "symbol", "sha256", "signature"]
        assert produce["toc_key"] == consume["toc_key"]
        assert produce["sha256"] == consume["sha256"]
        assert (produce["symbol"], consume["symbol"]) == ("split_kv_produce", "split_kv_consume")
        assert produce["signature"] != consume["signature"]
        blob = archive.get(produce["toc_key"], arch)
        assert codeobject.read_signature(blob, "split_kv_produce") == produce["signature"]
        assert codeobject.read_signature(blob, "split_kv_consume") == consume["signature"]
        assert codeobject.target_arch(blob) == arch
        assert read_json(shard / "attention" / "split_kv.kdp.json")["arch"] == [arch]


def test_every_sha256_is_the_digest_of_its_archive_entry(example_pack: tuple[Path, Path, Path]
                                                         ) -> None:
    _, out, _ = example_pack
    for arch in ARCHES:
        shard = out / arch
        py = Archive.open(shard / "kpack" / f"kernels_{arch}.kpack")
        cpp = _runtime.KpackArchive(str(shard / "kpack" / f"kernels_{arch}.kpack"))
        seen = 0
        for kdp in sorted(shard.rglob("*.kdp.json")):
            for k in read_json(kdp)["kernelDescriptors"]:
                entries = [k["kernel_source"]] if "kernel_source" in k else list(k["sources"].values())
                for e in entries:
                    assert e["library"] == f"../kpack/kernels_{arch}.kpack"
                    (target,) = [t for t in py.arches if (e["toc_key"], t) in py]
                    data = py.get(e["toc_key"], target)
                    assert hashlib.sha256(data).hexdigest() == e["sha256"]
                    assert cpp.get(e["toc_key"], target) == data
                    seen += 1
        # attention: 4 launches; prebuilt: reduce_sum + twostage (+ the gfx10-3-generic
        # scale kernel on gfx1030, filed under its generic target); attention_bwd (the
        # slotted engine): prep, two dkdv candidates, dq's two launches
        assert seen == 4 + 3 + (arch == "gfx1030") + 5


def test_shard_layout_and_generics(example_pack: tuple[Path, Path, Path]) -> None:
    _, out, _ = example_pack
    files = set(shard_files(out / "gfx90a"))
    assert files == {
        "kpack/kernels_gfx90a.kpack", "index.ukdx",
        "attention/scale.kdp.json", "attention/scale.kdp.provenance.json.gz",
        "attention/split_kv.kdp.json", "attention/split_kv.kdp.provenance.json.gz",
        "attention/attention.kmd.json", "attention/attention.ued.json",
        "attention/attention.umd.json", "attention/scale.udd.json", "attention/split_kv.udd.json",
        "attention/heuristics/ranking.uhd.json", "attention/heuristics/ranking.model",
        "prebuilt/reduce.kdp.json", "prebuilt/reduce.kdp.provenance.json.gz",
        "prebuilt/twostage.kdp.json", "prebuilt/twostage.kdp.provenance.json.gz",
        "prebuilt/prebuilt.kmd.json", "prebuilt/prebuilt.ued.json",
        "prebuilt/reduce.udd.json", "prebuilt/twostage.udd.json",
        "attention_bwd/attention_bwd.ued.json", "attention_bwd/dkdv_order.uhd.json",
        "attention_bwd/bwd_prep.kdp.json", "attention_bwd/bwd_prep.kdp.provenance.json.gz",
        "attention_bwd/bwd_dkdv.kdp.json", "attention_bwd/bwd_dkdv.kdp.provenance.json.gz",
        "attention_bwd/bwd_dq.kdp.json", "attention_bwd/bwd_dq.kdp.provenance.json.gz",
        "attention_bwd/bwd_prep_dispatch.udd.json", "attention_bwd/bwd_dkdv_dispatch.udd.json",
        "attention_bwd/bwd_dq_dispatch.udd.json",
    }
    text = (out / "gfx90a" / "attention" / "split_kv.kdp.json").read_text()
    assert "//" not in text and "\n " not in text  # compact, comments gone
    doc = json.loads(text)
    assert list(doc)[-1] == "kernelDescriptors"
    assert "provenance" not in doc["kernelDescriptors"][0]


def test_provenance_sidecar(example_pack: tuple[Path, Path, Path]) -> None:
    _, out, _ = example_pack
    raw = (out / "gfx90a" / "attention" / "split_kv.kdp.provenance.json.gz").read_bytes()
    assert raw[4:8] == b"\0\0\0\0"  # gzip mtime 0
    side = json.loads(gzip.decompress(raw))
    assert side["version"] == "1.0"
    (ukd,) = _kernels(out / "gfx90a", "split_kv.kdp.json")
    assert side["kdp_id"] == json.loads((out / "gfx90a" / "attention" / "split_kv.kdp.json")
                                        .read_text())["id"]
    entry = side["entries"][ukd["id"]]
    assert entry["sha256"] == provenance.binding(ukd)  # bound to exactly this packed UKD
    prov = entry["provenance"]
    assert prov["origin_kind"] == "hip"
    assert set(prov["sources"]) == {"produce", "consume"}
    assert prov["sources"]["produce"]["source"] == "attention/kernels/split_kv.hip"
    assert prov["authored"]["author"] == "example"
    assert "clang" in prov["compiler"]["version"]
    tampered = dict(ukd, priority=99)
    assert provenance.binding(tampered) != entry["sha256"]
    assert gzip.decompress(raw) == json.dumps(side, sort_keys=True, separators=(",", ":"),
                                              ensure_ascii=False).encode()  # compact, sorted


def test_copy_in_another_folder_packs_byte_identical(example_pack: tuple[Path, Path, Path],
                                                     tmp_path: Path) -> None:
    """Same inputs, another folder, files created in reverse order, a cold cache."""
    tree, out, _ = example_pack
    other = tmp_path / "deeper" / "checkout"
    for src in sorted(tree.rglob("*"), reverse=True):
        dst = other / src.relative_to(tree)
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    r = run_pack(other, tmp_path / "out", ARCHES, cache=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    for arch in ARCHES:
        assert shard_files(tmp_path / "out" / arch) == shard_files(out / arch)


def test_prebuilt_records_spool_without_a_trace(tmp_path: Path) -> None:
    """Prebuilt objects' frames go through an unnamed spool file in the out root. Packed
    alone, an arch's spool holds its archive's records alone and becomes its archive;
    packed with another arch, the records interleave and the archive copies them. The
    shard is the same either way, and the out root holds nothing the pack did not
    publish."""
    tree = tmp_path / "tree"
    shutil.copytree(copy_example(tmp_path / "example") / "prebuilt", tree)
    alone, both = tmp_path / "alone", tmp_path / "both"
    r = run_pack(tree, alone, ["gfx90a"], cache=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    r = run_pack(tree, both, ["gfx90a", "gfx940"], cache=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    assert shard_files(alone / "gfx90a") == shard_files(both / "gfx90a")
    assert Archive.open(alone / "gfx90a" / "kpack" / "kernels_gfx90a.kpack").arches == ["gfx90a"]
    assert sorted(p.name for p in alone.iterdir()) == ["gfx90a"]  # no lock file left
    listing = sorted(str(p.relative_to(alone)) for p in alone.rglob("*"))
    r = run_pack(tree, alone, ["gfx90a"], cache=tmp_path / "cache")  # into its own shard
    assert r.returncode == 0, r.stderr
    assert sorted(str(p.relative_to(alone)) for p in alone.rglob("*")) == listing


def test_warm_cache_runs_no_compiler_and_one_edit_one_compile(tmp_path: Path) -> None:
    tree = copy_example(tmp_path / "tree")
    hipcc, log = counting_compiler(tmp_path)
    cache = tmp_path / "cache"
    args = ("--hipcc", str(hipcc))
    r = run_pack(tree, tmp_path / "out", ARCHES, *args, cache=cache)
    assert r.returncode == 0, r.stderr
    # 4 distinct (source, build) x 3 arches: scale at two BLOCKs, split_kv, attention_bwd
    assert len(compiles(log)) == 12
    first = {a: shard_files(tmp_path / "out" / a) for a in ARCHES}

    r = run_pack(tree, tmp_path / "out", ARCHES, *args, cache=cache)
    assert r.returncode == 0, r.stderr
    assert len(compiles(log)) == 12, "a warm repack ran the compiler"
    assert {a: shard_files(tmp_path / "out" / a) for a in ARCHES} == first

    kdp = tree / "attention" / "scale.kdp.json"
    doc = read_json(kdp)
    doc["kernelDescriptors"][1]["kernel_source"]["build"]["defines"]["BLOCK"] = 64
    write_json(kdp, doc)
    r = run_pack(tree, tmp_path / "out", ARCHES, *args, cache=cache)
    assert r.returncode == 0, r.stderr
    new = compiles(log)[12:]
    assert len(new) == 3 and all("-DBLOCK=64" in c for c in new)

    # An included header changes: every compile that read it runs again.
    header = tree / "attention" / "kernels" / "common.h"
    header.write_text(header.read_text() + "\n// touched\n")
    r = run_pack(tree, tmp_path / "out", ARCHES, *args, cache=cache)
    assert r.returncode == 0, r.stderr
    assert len(compiles(log)) == 15 + 12  # attention_bwd.hip includes it too


def test_damaged_cache_entry_is_rebuilt_not_packed(tmp_path: Path) -> None:
    tree = copy_example(tmp_path / "tree")
    hipcc, log = counting_compiler(tmp_path)
    cache = tmp_path / "cache"
    assert run_pack(tree, tmp_path / "a", ["gfx90a"], "--hipcc", str(hipcc), cache=cache
                    ).returncode == 0
    good = shard_files(tmp_path / "a" / "gfx90a")
    objects = sorted((cache / "v1" / "objects").rglob("*"))
    victims = [p for p in objects if p.is_file()]
    assert len(victims) == 4
    victims[0].write_bytes(victims[0].read_bytes()[:-100])  # truncated
    data = bytearray(victims[1].read_bytes())
    data[len(data) // 2] ^= 0xFF  # altered
    victims[1].write_bytes(bytes(data))
    r = run_pack(tree, tmp_path / "b", ["gfx90a"], "--hipcc", str(hipcc), cache=cache)
    assert r.returncode == 0, r.stderr
    assert len(compiles(log)) == 4 + 2
    assert shard_files(tmp_path / "b" / "gfx90a") == good


def test_arch_the_compiler_cannot_build_fails_alone(tmp_path: Path,
                                                    example_pack: tuple[Path, Path, Path]) -> None:
    tree, _, cache = example_pack
    out = tmp_path / "out"
    (out / "gfx1100" / "stale").mkdir(parents=True)
    r = run_pack(tree, out, ["gfx90a", "gfx1100", "gfx940"], cache=cache)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert "failed: gfx1100 (1 of 3 arches)" in r.stderr
    assert "cannot find ROCm device library for gfx1100" in r.stderr
    assert "compiling attention/kernels/split_kv.hip for gfx1100 failed" in r.stderr
    assert (out / "gfx90a" / "kpack" / "kernels_gfx90a.kpack").is_file()
    assert (out / "gfx940" / "kpack" / "kernels_gfx940.kpack").is_file()
    assert not (out / "gfx1100").exists()
    assert not [p for p in out.iterdir() if p.name.endswith((".staging", ".old"))]


def test_missing_compiler_is_one_clear_error(tmp_path: Path) -> None:
    tree = copy_example(tmp_path / "tree")
    r = run_pack(tree, tmp_path / "out", ["gfx90a"], "--hipcc", str(tmp_path / "no-hipcc"),
                 cache=tmp_path / "cache")
    assert r.returncode == 1
    assert "no hip compiler found" in r.stderr
    assert "apt-get install hipcc" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "out" / "gfx90a").exists()


def test_depfile_lists_descriptors_sources_and_headers(tmp_path: Path,
                                                       example_pack: tuple[Path, Path, Path]
                                                       ) -> None:
    tree, _, cache = example_pack
    dep = tmp_path / "pack.d"
    r = run_pack(tree, tmp_path / "out", ["gfx90a"], "--depfile", str(dep),
                 "--depfile-target", "stamp", cache=cache)
    assert r.returncode == 0, r.stderr
    text = dep.read_text()
    assert text.startswith("stamp:")
    for rel in ("attention/scale.kdp.json", "attention/attention.kmd.json",
                "attention/kernels/split_kv.hip", "attention/kernels/common.h",
                "attention/heuristics/ranking.model"):
        assert str(tree / rel) in text, rel


def test_arch_arguments_are_normalized(tmp_path: Path,
                                       example_pack: tuple[Path, Path, Path]) -> None:
    tree, _, cache = example_pack
    r = run_pack(tree, tmp_path / "out", ["gfx90a:xnack-", "gfx90a", "gfx90a:sramecc+"],
                 cache=cache)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")) \
        == ["gfx90a"]
    r = run_pack(tree, tmp_path / "out", ["x86_64"], cache=cache)
    assert r.returncode == 2 and "expected a GPU arch" in r.stderr


def test_out_root_inside_source_root_is_refused(tmp_path: Path) -> None:
    tree = copy_example(tmp_path / "tree")
    r = run_pack(tree, tree / "out", ["gfx90a"], cache=tmp_path / "cache")
    assert r.returncode == 2 and "lies inside --source-root" in r.stderr
