"""Every kernel-source kind through the packer, multi-launch maps, and refusals
that must leave no shard behind."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from kpack_oracle import Archive
from pack_support import OBJECTS, read_json, run_pack, shard_files, write_json

from ukdpack.produce import codeobject

HIP = """#include <hip/hip_runtime.h>
extern "C" __global__ void first(float* p, int n) { if (n) p[0] = 1.0f; }
extern "C" __global__ void second(const float* q, float* p) { p[0] = q[0] * 2.0f; }
"""


def _engine(root: Path, launches: list[str] | None = None) -> None:
    write_json(root / "e.kmd.json", {"id": "kmd", "version": "1.0", "name": "md",
                                     "fields": [{"name": "v", "type": "int"}]})
    write_json(root / "e.ued.json", {"id": "ued", "version": "1.0", "name": "t:e",
                                     "metadata": "kmd"})
    udd: dict[str, Any] = {"id": "udd", "version": "1.0", "name": "d", "dispatch_symbol": "sym"}
    if launches:
        udd.update(version="1.1", launches=launches)
    write_json(root / "d.udd.json", udd)


def _kdp(root: Path, rel: str, kernels: list[Any], arch: list[str] | None = None) -> None:
    write_json(root / rel, {"id": "kdp-" + rel, "version": "1.0", "name": rel,
                            "arch": arch or [], "matchers": [], "engine": "ued",
                            "dispatch": "udd", "kernelDescriptors": kernels})


def _ukd(i: str, v: int, source: dict[str, Any] | None = None,
         sources: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"id": i, "version": "1.1" if sources else "1.0", "name": i,
                         "priority": 0, "metadata": {"v": v}}
    if sources:
        d["sources"] = sources
    else:
        d["kernel_source"] = source
    d.update(kw)
    return d


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


def _pack(root: Path, out: Path, cache: Path, arches: tuple[str, ...] = ("gfx90a",),
          *extra: str) -> Any:
    return run_pack(root, out, arches, *extra, cache=cache)


def test_hsaco_single_and_multi_launch_maps(tmp_path: Path, cache: Path) -> None:
    root = tmp_path / "t"
    _engine(root)
    objs = root / "prebuilt" / "gfx90a"
    objs.mkdir(parents=True)
    shutil.copy(OBJECTS / "split_kv.gfx90a.bundle.hsaco", objs / "split_kv.hsaco")
    _kdp(root, "p/pre.kdp.json", [
        _ukd("multi", 1, sources={
            "produce": {"kind": "hsaco", "file": "../prebuilt/gfx90a/split_kv.hsaco",
                        "symbol": "split_kv_produce"},
            "consume": {"kind": "hsaco", "file": "../prebuilt/gfx90a/split_kv.hsaco",
                        "symbol": "split_kv_consume"}}, arch=["gfx90a"])])
    r = _pack(root, tmp_path / "out", cache)
    assert r.returncode == 0, r.stderr
    shard = tmp_path / "out" / "gfx90a"
    (k,) = read_json(shard / "p" / "pre.kdp.json")["kernelDescriptors"]
    p, c = k["sources"]["produce"], k["sources"]["consume"]
    assert p["toc_key"] == c["toc_key"] and p["toc_key"].startswith("split_kv_")
    assert p["library"] == "../kpack/kernels_gfx90a.kpack"
    blob = Archive.open(shard / "kpack" / "kernels_gfx90a.kpack").get(p["toc_key"], "gfx90a")
    # The bundle was unwrapped: the archive holds the bare ELF.
    assert blob == (OBJECTS / "split_kv.gfx90a.hsaco").read_bytes()
    assert k["arch"] == ["gfx90a"]


def test_hsaco_for_another_arch_fails_that_arch(tmp_path: Path, cache: Path) -> None:
    root = tmp_path / "t"
    _engine(root)
    shutil.copy(OBJECTS / "split_kv.gfx1030.hsaco", root / "k.hsaco")
    _kdp(root, "a.kdp.json", [_ukd("k", 1, {"kind": "hsaco", "file": "k.hsaco",
                                            "symbol": "split_kv_unused"}, arch=["gfx90a"])])
    r = _pack(root, tmp_path / "out", cache)
    assert r.returncode == 1
    assert "prebuilt object k.hsaco targets gfx1030, not gfx90a" in r.stderr
    assert not (tmp_path / "out" / "gfx90a").exists()


def test_missing_symbol_names_what_the_object_holds(tmp_path: Path, cache: Path) -> None:
    root = tmp_path / "t"
    _engine(root)
    shutil.copy(OBJECTS / "split_kv.gfx90a.hsaco", root / "k.hsaco")
    _kdp(root, "a.kdp.json", [_ukd("k", 1, {"kind": "hsaco", "file": "k.hsaco",
                                            "symbol": "nope"}, arch=["gfx90a"])])
    r = _pack(root, tmp_path / "out", cache)
    assert r.returncode == 1
    assert ("symbol 'nope' is not a kernel of k.hsaco for gfx90a; it holds split_kv_consume, "
            "split_kv_produce, split_kv_unused") in r.stderr


def test_not_a_code_object_is_refused_by_name(tmp_path: Path, cache: Path) -> None:
    root = tmp_path / "t"
    _engine(root)
    (root / "k.hsaco").write_text("these are not the bytes of a code object\n")
    _kdp(root, "a.kdp.json", [_ukd("k", 1, {"kind": "hsaco", "file": "k.hsaco",
                                            "symbol": "x"}, arch=["gfx90a"])])
    r = _pack(root, tmp_path / "out", cache)
    assert r.returncode == 1
    assert "prebuilt object k.hsaco is not a usable code object" in r.stderr
    assert "Traceback" not in r.stderr


def test_hip_multi_launch_map_and_a_nested_folder(tmp_path: Path, cache: Path) -> None:
    root = tmp_path / "t"
    _engine(root, launches=["first", "second"])
    (root / "deep" / "er").mkdir(parents=True)
    (root / "deep" / "er" / "k.hip").write_text(HIP)
    _kdp(root, "deep/er/x.kdp.json", [_ukd("m", 1, sources={
        "second": {"kind": "hip", "source": "k.hip", "entry": "second", "build": {}},
        "first": {"kind": "hip", "source": "k.hip", "entry": "first", "build": {}}})])
    r = _pack(root, tmp_path / "out", cache)
    assert r.returncode == 0, r.stderr
    (k,) = read_json(tmp_path / "out" / "gfx90a" / "deep" / "er" / "x.kdp.json")["kernelDescriptors"]
    assert list(k["sources"]) == ["first", "second"]  # launch-name order
    assert k["sources"]["first"]["library"] == "../../kpack/kernels_gfx90a.kpack"
    assert k["sources"]["first"]["signature"] == [
        {"kind": "global_buffer", "size": 8, "offset": 0, "name": "p"},
        {"kind": "by_value", "size": 4, "offset": 8, "name": "n"}] or \
        [a["kind"] for a in k["sources"]["first"]["signature"]] == ["global_buffer", "by_value"]


def test_key_order_of_sources_carries_no_meaning(tmp_path: Path, cache: Path) -> None:
    outs = []
    for name, order in (("a", ["first", "second"]), ("b", ["second", "first"])):
        root = tmp_path / name
        _engine(root)
        (root / "k.hip").write_text(HIP)
        _kdp(root, "x.kdp.json", [_ukd("m", 1, sources={
            n: {"kind": "hip", "source": "k.hip", "entry": n, "build": {}} for n in order})])
        r = _pack(root, tmp_path / f"out-{name}", cache)
        assert r.returncode == 0, r.stderr
        outs.append(shard_files(tmp_path / f"out-{name}" / "gfx90a"))
    assert outs[0] == outs[1]


def test_embedded_source_and_builder_kernels(tmp_path: Path, cache: Path) -> None:
    root = tmp_path / "t"
    _engine(root)
    _kdp(root, "b.kdp.json", [
        _ukd("gen", 1, {"kind": "builder", "module": "hipgen", "function": "build",
                        "spec": {"kernels": {"only": 3}}}),
        _ukd("gen2", 2, sources={
            "produce": {"kind": "builder", "module": "hipgen", "function": "build",
                        "spec": {"kernels": {"p": 1, "c": 2}}, "entry": "p", "role": "writer"},
            "consume": {"kind": "builder", "module": "hipgen", "function": "build",
                        "spec": {"kernels": {"p": 1, "c": 2}}, "entry": "c"}}),
    ])
    write_json(root / "n.udd.json", {"id": "udd2", "version": "1.0", "name": "n",
                                     "dispatch_symbol": "native"})
    write_json(root / "n.kdp.json", {"id": "kdp-n", "version": "1.0", "name": "n", "arch": [],
                                     "matchers": [], "engine": None, "dispatch": "udd2",
                                     "kernelDescriptors": [_ukd("emb", 1, {
                                         "kind": "embedded_source", "source_file": "src/x.cpp",
                                         "entry_point": "run"})]})
    # gen and gen2 differ in launch sets under one symbol: give gen2 its own UDD.
    write_json(root / "m.udd.json", {"id": "udd3", "version": "1.0", "name": "m",
                                     "dispatch_symbol": "multi"})
    doc = read_json(root / "b.kdp.json")
    gen2 = doc["kernelDescriptors"].pop()
    write_json(root / "b.kdp.json", doc)
    _kdp(root, "m.kdp.json", [gen2])
    doc = read_json(root / "m.kdp.json")
    doc["dispatch"] = "udd3"
    write_json(root / "m.kdp.json", doc)
    r = _pack(root, tmp_path / "out", cache)
    assert r.returncode == 0, r.stderr
    shard = tmp_path / "out" / "gfx90a"
    (emb,) = read_json(shard / "n.kdp.json")["kernelDescriptors"]
    assert emb["kernel_source"] == {"kind": "embedded_source", "source_file": "src/x.cpp",
                                    "entry_point": "run"}
    (gen,) = read_json(shard / "b.kdp.json")["kernelDescriptors"]
    assert gen["kernel_source"]["symbol"] == "only"
    (multi,) = read_json(shard / "m.kdp.json")["kernelDescriptors"]
    assert multi["sources"]["produce"]["symbol"] == "p"
    assert multi["sources"]["consume"]["symbol"] == "c"
    assert multi["sources"]["produce"]["toc_key"] == multi["sources"]["consume"]["toc_key"]
    archive = Archive.open(shard / "kpack" / "kernels_gfx90a.kpack")
    assert codeobject.kernels(archive.get(multi["sources"]["produce"]["toc_key"], "gfx90a")) \
        == ["c", "p"]


@pytest.mark.parametrize("function,fragment", [
    ("broken", "builder hipgen:broken failed for gfx90a: RuntimeError: no kernel for gfx90a"),
    ("not_bytes", "builder hipgen:not_bytes returned str, expected the code object's bytes"),
    ("wrong_signature", "builder hipgen:wrong_signature must take (spec, *, arch), found (spec, arch)"),
    ("missing", "module hipgen has no function 'missing'"),
])
def test_builder_refusals(tmp_path: Path, cache: Path, function: str, fragment: str) -> None:
    root = tmp_path / "t"
    _engine(root)
    _kdp(root, "b.kdp.json", [_ukd("gen", 1, {"kind": "builder", "module": "hipgen",
                                              "function": function, "spec": {}})])
    r = _pack(root, tmp_path / "out", cache)
    assert r.returncode == 1
    assert fragment in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "out" / "gfx90a").exists()


def test_builder_object_with_several_kernels_needs_entry(tmp_path: Path, cache: Path) -> None:
    root = tmp_path / "t"
    _engine(root)
    _kdp(root, "b.kdp.json", [_ukd("gen", 1, {"kind": "builder", "module": "hipgen",
                                              "function": "build",
                                              "spec": {"kernels": {"a": 1, "b": 2}}})])
    r = _pack(root, tmp_path / "out", cache)
    assert r.returncode == 1
    assert "holds kernels a, b; name the one to launch with 'entry'" in r.stderr


@pytest.mark.parametrize("case", [
    "multi_one_launch", "multi_underscore_name", "multi_mixed_kinds", "multi_embedded_launch",
    "multi_role_on_hip", "multi_role_on_hsaco", "multi_hsaco_needs_arch", "src_authored_kpack",
    "sets_differ_in_kdp", "md_duplicate",
])
def test_refused_tree_packs_nothing_and_removes_stale_shards(tmp_path: Path, cache: Path,
                                                             case: str) -> None:
    corpus = Path(__file__).resolve().parents[1] / "corpus" / case
    expect = read_json(corpus / "expect.json")
    out = tmp_path / "out"
    (out / "gfx90a" / "old").mkdir(parents=True)
    (out / "gfx90a" / "old" / "x.kdp.json").write_text("{}")
    r = _pack(corpus / "tree", out, cache)
    assert r.returncode == 1
    said = r.stderr.replace(" on gfx90a", "")  # pack names the shard it checked
    for fragment in expect["fragments"]:
        assert fragment in said
    assert "nothing was packed" in r.stderr
    assert not (out / "gfx90a").exists()
    assert [p.name for p in out.iterdir()] == []  # no lock file either


def test_dormant_root_and_required(tmp_path: Path, cache: Path) -> None:
    root = tmp_path / "t"
    _engine(root)
    (root / "k.hip").write_text(HIP)
    _kdp(root, "a.kdp.json", [_ukd("k", 1, {"kind": "hip", "source": "k.hip", "entry": "first",
                                            "build": {}})], arch=["gfx1030"])
    depfile = tmp_path / "pack.d"
    r = _pack(root, tmp_path / "out", cache, ("gfx90a", "gfx940"), "--depfile", str(depfile))
    assert r.returncode == 0, r.stderr
    assert "dormant: no kernels for gfx90a, gfx940" in r.stderr
    # What decides dormancy is a dependency: an edit giving gfx90a kernels repacks it.
    assert str(root / "a.kdp.json") in depfile.read_text()
    assert not (tmp_path / "out" / "gfx90a").exists()
    # Recorded per arch, so a build's shard tests can tell dormancy from a failed pack.
    for arch in ("gfx90a", "gfx940"):
        assert "dormant: no kernels for gfx90a, gfx940" in \
            (tmp_path / "out" / f".{arch}.dormant").read_text()
    # The dormancy markers are all a dormant pack leaves: no lock file.
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".gfx90a.dormant",
                                                                   ".gfx940.dormant"]
    r = _pack(root, tmp_path / "out", cache, ("gfx90a",), "--required")
    assert r.returncode == 1
    assert "no kernels for gfx90a, and the root is required" in r.stderr
    assert not (tmp_path / "out" / ".gfx90a.dormant").exists()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".gfx940.dormant"]


def test_arch_without_kernels_gets_no_shard_and_a_note(tmp_path: Path, cache: Path) -> None:
    root = tmp_path / "t"
    _engine(root)
    (root / "k.hip").write_text(HIP)
    _kdp(root, "a.kdp.json", [_ukd("k", 1, {"kind": "hip", "source": "k.hip", "entry": "first",
                                            "build": {}})], arch=["gfx90a"])
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / ".gfx90a.dormant").write_text("left by an earlier pack\n")
    r = _pack(root, tmp_path / "out", cache, ("gfx90a", "gfx940"))
    assert r.returncode == 0, r.stderr
    assert "gfx940: no kernels for this arch; no shard" in r.stderr
    assert (tmp_path / "out" / "gfx90a").is_dir()
    assert not (tmp_path / "out" / "gfx940").exists()
    assert "no kernels for gfx940" in (tmp_path / "out" / ".gfx940.dormant").read_text()
    assert not (tmp_path / "out" / ".gfx90a.dormant").exists()  # a shard was published


def test_standalone_ukd_is_packed_beside_its_own_sidecar(tmp_path: Path, cache: Path) -> None:
    root = tmp_path / "t"
    _engine(root)
    (root / "src").mkdir()
    (root / "src" / "k.hip").write_text(HIP)
    write_json(root / "ukds" / "one.ukd.json", _ukd("solo", 1, {
        "kind": "hip", "source": "../src/k.hip", "entry": "first", "build": {}},
        provenance={"by": "hand"}))
    _kdp(root, "a.kdp.json", ["solo"])
    r = _pack(root, tmp_path / "out", cache)
    assert r.returncode == 0, r.stderr
    shard = tmp_path / "out" / "gfx90a"
    assert read_json(shard / "a.kdp.json")["kernelDescriptors"] == ["solo"]
    solo = read_json(shard / "ukds" / "one.ukd.json")
    assert solo["kernel_source"]["library"] == "../kpack/kernels_gfx90a.kpack"
    assert "provenance" not in solo
    assert (shard / "ukds" / "one.ukd.provenance.json.gz").is_file()
