"""Generic targets and target IDs with features, with objects a real clang-19 builds:
prebuilt generic objects shared by the shards of the family's members, hip kernels
compiled once for their generic family, feature variants in one shard and the
runtime's pick among them for a device target ID."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kpack_oracle import Archive
from pack_support import read_json, run_pack, write_engine, write_json

from ukdpack import _runtime
from ukdpack.produce import codeobject

DATA = Path(__file__).resolve().parent / "data"
SOURCE = DATA / "generic_scale.hip"
SYMBOL = "scale_generic"
VALIDATE = Path(sys.executable).parent / "ukdpack-validate"
CLANG = shutil.which("clang++-19")

# Installed by scripts/setup.sh (clang-19, lld-19): a machine without it fails, never skips.
assert CLANG is not None, "clang++-19 missing: run scripts/setup.sh"


def clang_object(target: str, out: Path) -> bytes:
    """The device code object clang-19 builds of SOURCE for ``target``."""
    assert CLANG is not None
    subprocess.run([CLANG, "-c", "-x", "hip", "--cuda-device-only", "--no-gpu-bundle-output",
                    "-nogpulib", "-mcode-object-version=6", f"--offload-arch={target}", "-O3",
                    str(SOURCE), "-o", str(out)], check=True, capture_output=True)
    return out.read_bytes()


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("clang19")
    return {t: clang_object(t, folder / f"{t.replace(':', '_')}.o")
            for t in ("gfx11-generic", "gfx90a", "gfx90a:xnack+", "gfx90a:xnack-")}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


def _engine(root: Path) -> None:
    write_engine(root)


def _tree(root: Path, kernels: list[dict[str, Any]]) -> Path:
    _engine(root)
    write_json(root / "k.kdp.json", {"id": "kdp", "version": "1.0", "name": "k", "arch": [],
                                     "matchers": [], "engine": "ued", "dispatch": "udd",
                                     "kernelDescriptors": kernels})
    return root


def _ukd(i: str, v: int, source: dict[str, Any], arch: list[str] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"id": i, "version": "1.0", "name": i, "priority": 0,
                         "metadata": {"v": v}, "kernel_source": source}
    if arch is not None:
        d["arch"] = arch
    return d


def _kernels(shard: Path) -> dict[str, dict[str, Any]]:
    return {k["id"]: k for k in read_json(shard / "k.kdp.json")["kernelDescriptors"]}


def _validate(shard: Path, root: Path | None = None) -> None:
    """ukdpack-validate, desk-check, inspect (every entry claimed) and, given the root,
    verify accept the shard."""
    r = subprocess.run([str(VALIDATE), str(shard)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    tools = [["desk-check", str(shard)], ["inspect", str(shard), "--json"]]
    if root is not None:
        tools.append(["verify", str(shard), "--source-root", str(root)])
    for argv in tools:
        r = subprocess.run([sys.executable, "-m", "ukdpack", *argv], capture_output=True,
                           text=True, check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "claimed by no launch" not in r.stderr
        if argv[0] == "inspect":
            entries = [e for a in json.loads(r.stdout)["archives"] for e in a["entries"]]
            assert entries and all(e["used_by"] for e in entries), entries


def _archive(shard: Path) -> Archive:
    return Archive.open(shard / "kpack" / f"kernels_{shard.name}.kpack")


def test_prebuilt_generic_object_packs_into_its_members_shards_only(
        tmp_path: Path, objects: dict[str, bytes], cache: Path) -> None:
    root = tmp_path / "t"
    (root / "obj").mkdir(parents=True)
    (root / "obj" / "generic.hsaco").write_bytes(objects["gfx11-generic"])
    (root / "obj" / "own.hsaco").write_bytes(objects["gfx90a"])
    _tree(root, [
        _ukd("gen", 1, {"kind": "hsaco", "file": "obj/generic.hsaco", "symbol": SYMBOL},
             ["gfx11-generic"]),
        _ukd("own", 2, {"kind": "hsaco", "file": "obj/own.hsaco", "symbol": SYMBOL},
             ["gfx90a"])])
    out = tmp_path / "out"
    r = run_pack(root, out, ["gfx1100", "gfx1101", "gfx90a"], cache=cache)
    assert r.returncode == 0, r.stderr
    digest = hashlib.sha256(objects["gfx11-generic"]).hexdigest()
    for arch in ("gfx1100", "gfx1101"):
        shard = out / arch
        gen = _kernels(shard)["gen"]
        assert gen["arch"] == [arch]  # narrowed to the member
        assert gen["kernel_source"]["sha256"] == digest
        # The entry is filed under the object's real target, not the shard's arch.
        archive = _archive(shard)
        assert set(archive) == {(gen["kernel_source"]["toc_key"], "gfx11-generic")}
        assert (archive.family, archive.arches) == (arch, ["gfx11-generic"])
        assert archive.get(gen["kernel_source"]["toc_key"], "gfx11-generic") == \
            objects["gfx11-generic"]
        _validate(shard, root)
        dset = _runtime.load_shard(str(shard))
        assert _runtime.load_launch_code(dset, "gen", None, arch) == objects["gfx11-generic"]
    assert set(_kernels(out / "gfx90a")) == {"own"}
    _validate(out / "gfx90a")


def test_prebuilt_generic_object_for_an_arch_outside_its_family_fails_that_arch(
        tmp_path: Path, objects: dict[str, bytes], cache: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    (root / "a.hsaco").write_bytes(objects["gfx11-generic"])
    _tree(root, [_ukd("gen", 1, {"kind": "hsaco", "file": "a.hsaco", "symbol": SYMBOL},
                      ["gfx90a"])])
    r = run_pack(root, tmp_path / "out", ["gfx90a"], cache=cache)
    assert r.returncode == 1
    assert "prebuilt object a.hsaco targets gfx11-generic, not gfx90a" in r.stderr
    assert not (tmp_path / "out" / "gfx90a").exists()


def _hip_tree(root: Path, build: dict[str, Any] | None = None,
              arch: list[str] | None = None) -> Path:
    root.mkdir(parents=True)
    shutil.copy(SOURCE, root / "k.hip")
    source = {"kind": "hip", "source": "k.hip", "entry": SYMBOL, "build": build or {}}
    return _tree(root, [_ukd("hipk", 1, source, arch)])


def _clang_pack(root: Path, out: Path, arches: list[str], cache: Path,
                *extra: str) -> subprocess.CompletedProcess[str]:
    assert CLANG is not None
    return run_pack(root, out, arches, "--hipcc", CLANG, "--json", *extra, cache=cache)


def test_hip_kernel_compiled_once_for_its_generic_family(tmp_path: Path, cache: Path) -> None:
    root = _hip_tree(tmp_path / "t", {"generic": True}, ["gfx11-generic"])
    out = tmp_path / "out"
    r = _clang_pack(root, out, ["gfx1100", "gfx1101", "gfx90a"], tmp_path / "own-cache")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["compiled"] == 1  # one object for both members
    digests = set()
    for arch in ("gfx1100", "gfx1101"):
        src = _kernels(out / arch)["hipk"]["kernel_source"]
        archive = _archive(out / arch)
        assert set(archive) == {(src["toc_key"], "gfx11-generic")}
        blob = archive.get(src["toc_key"], "gfx11-generic")
        assert codeobject.target_id(blob) == "gfx11-generic"
        digests.add(src["sha256"])
        _validate(out / arch, root)
    assert len(digests) == 1
    assert not (out / "gfx90a").exists()  # the kernel is not for gfx90a: no shard


def test_generic_build_on_an_arch_in_no_family_builds_for_the_arch(tmp_path: Path,
                                                                     cache: Path) -> None:
    root = _hip_tree(tmp_path / "t", {"generic": True})
    out = tmp_path / "out"
    r = _clang_pack(root, out, ["gfx90a", "gfx1030"], cache)
    assert r.returncode == 0, r.stderr
    for arch, target in (("gfx90a", "gfx90a"), ("gfx1030", "gfx10-3-generic")):
        (pair,) = set(_archive(out / arch))
        assert pair[1] == target


def test_a_target_the_compiler_cannot_build_fails_that_arch(tmp_path: Path, cache: Path) -> None:
    root = _hip_tree(tmp_path / "t")
    r = _clang_pack(root, tmp_path / "out", ["gfx950", "gfx1100"], cache)
    assert r.returncode == 1
    assert "invalid target ID 'gfx950'" in r.stderr
    assert (tmp_path / "out" / "gfx1100").is_dir() and not (tmp_path / "out" / "gfx950").exists()


def test_feature_variants_share_one_shard_and_the_runtime_picks_by_target_id(
        tmp_path: Path, cache: Path) -> None:
    root = _hip_tree(tmp_path / "t")
    out = tmp_path / "out"
    r = _clang_pack(root, out, ["gfx90a:xnack+", "gfx90a:xnack-", "gfx90a"], cache)
    assert r.returncode == 0, r.stderr
    shard = out / "gfx90a"
    src = _kernels(shard)["hipk"]["kernel_source"]
    archive = _archive(shard)
    by_target = {t: archive.get(src["toc_key"], t)
                 for t in ("gfx90a", "gfx90a:xnack+", "gfx90a:xnack-")}
    assert set(archive) == {(src["toc_key"], t) for t in by_target}
    assert {t: codeobject.target_id(b) for t, b in by_target.items()} == {
        t: t for t in by_target}
    assert src["targets"] == {t: hashlib.sha256(b).hexdigest() for t, b in by_target.items()}
    assert src["sha256"] == src["targets"]["gfx90a"]  # the default: the most general one
    _validate(shard, root)
    dset = _runtime.load_shard(str(shard))
    for device, want in (("gfx90a:sramecc+:xnack+", "gfx90a:xnack+"),
                         ("gfx90a:xnack-", "gfx90a:xnack-"),
                         ("gfx90a", "gfx90a"),  # its xnack unknown: only "any" runs
                         ("gfx90a:sramecc-", "gfx90a")):
        assert _runtime.load_launch_code(dset, "hipk", None, device) == by_target[want], device


def test_without_an_any_variant_a_device_of_unknown_setting_is_refused(
        tmp_path: Path, cache: Path) -> None:
    root = _hip_tree(tmp_path / "t")
    out = tmp_path / "out"
    r = _clang_pack(root, out, ["gfx90a:xnack+", "gfx90a:xnack-"], cache)
    assert r.returncode == 0, r.stderr
    dset = _runtime.load_shard(str(out / "gfx90a"))
    plus = _runtime.load_launch_code(dset, "hipk", None, "gfx90a:xnack+")
    assert codeobject.target_id(plus) == "gfx90a:xnack+"
    with pytest.raises(_runtime.RuntimeCheckError) as err:
        _runtime.load_launch_code(dset, "hipk", None, "gfx90a")
    assert err.value.code == "TARGET_MISMATCH"  # type: ignore[attr-defined]
    assert ("runs on the device's target gfx90a: the archive holds it for gfx90a:xnack+, "
            "gfx90a:xnack-") in str(err.value)


def test_a_generic_kernel_arch_fits_a_pack_of_its_members(tmp_path: Path,
                                                          objects: dict[str, bytes]) -> None:
    """A kernel naming gfx11-generic is a subset of a pack serving gfx1101; naming it in
    a pack serving only gfx90a is not."""
    root = tmp_path / "t"
    root.mkdir()
    (root / "a.hsaco").write_bytes(objects["gfx11-generic"])
    source = {"kind": "hsaco", "file": "a.hsaco", "symbol": SYMBOL}
    _tree(root, [_ukd("gen", 1, source, ["gfx11-generic"])])
    for pack_arch, ok in ((["gfx1101"], True), (["gfx90a"], False)):
        doc = read_json(root / "k.kdp.json")
        doc["arch"] = pack_arch
        write_json(root / "k.kdp.json", doc)
        dset = _runtime.load_shard(str(root), authored=True)
        errors = [d["message"] for d in dset.diagnostics if d["severity"] == "error"]
        assert (errors == []) == ok, errors
        if not ok:
            assert any("arch 'gfx11-generic' not in its KDP's arch [gfx90a]" in e for e in errors)


def test_one_feature_variant_alone_packs_and_loads_for_its_setting(tmp_path: Path,
                                                                  cache: Path) -> None:
    root = _hip_tree(tmp_path / "t")
    out = tmp_path / "out"
    r = _clang_pack(root, out, ["gfx90a:xnack+"], cache)
    assert r.returncode == 0, r.stderr
    src = _kernels(out / "gfx90a")["hipk"]["kernel_source"]
    assert list(src["targets"]) == ["gfx90a:xnack+"]
    _validate(out / "gfx90a", root)
    dset = _runtime.load_shard(str(out / "gfx90a"))
    blob = _runtime.load_launch_code(dset, "hipk", None, "gfx90a:sramecc-:xnack+")
    assert codeobject.target_id(blob) == "gfx90a:xnack+"
    with pytest.raises(_runtime.RuntimeCheckError, match="TARGET_MISMATCH"):
        _runtime.load_launch_code(dset, "hipk", None, "gfx90a:xnack-")


def test_cmake_gives_each_arch_its_target_ids(tmp_path: Path) -> None:
    """GPU_TARGETS entries with features reach their arch's pack command (one command per
    bare arch); an arch named only bare is packed bare."""
    repo = Path(__file__).resolve().parents[2]
    project = tmp_path / "p"
    shutil.copytree(repo / "tests" / "corpus" / "ok_minimal" / "tree", project / "tree")
    (project / "CMakeLists.txt").write_text("""cmake_minimum_required(VERSION 3.20)
project(target_ids CXX)
find_package(ukdpack CONFIG REQUIRED)
set(GPU_TARGETS "gfx90a:xnack+;gfx1030;gfx90a:xnack-")
ukd_add_pack_target(NAME k SOURCE_ROOT tree OUT_ROOT shards)
""")
    cmakedir = subprocess.run([sys.executable, "-m", "ukdpack", "--cmakedir"],
                              capture_output=True, text=True, check=True).stdout.strip()
    build = tmp_path / "b"
    r = subprocess.run(["cmake", "-S", str(project), "-B", str(build), "-G", "Ninja",
                        f"-Dukdpack_DIR={cmakedir}"],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    commands = [line for line in (build / "build.ninja").read_text().splitlines()
                if " pack " in line and "--source-root" in line]
    by_label = {("gfx90a" if "k/gfx90a" in c else "gfx1030"): c for c in commands}
    assert len(commands) == 2 and set(by_label) == {"gfx90a", "gfx1030"}, commands
    assert "--arch gfx90a:xnack+ --arch gfx90a:xnack-" in by_label["gfx90a"]
    assert "--arch gfx1030 " in by_label["gfx1030"] and ":xnack" not in by_label["gfx1030"]


def test_recorded_target_digests_are_read_and_checked(tmp_path: Path, cache: Path) -> None:
    root = _hip_tree(tmp_path / "t")
    out = tmp_path / "out"
    r = _clang_pack(root, out, ["gfx90a:xnack+", "gfx90a:xnack-"], cache)
    assert r.returncode == 0, r.stderr
    kdp = out / "gfx90a" / "k.kdp.json"
    doc = read_json(kdp)
    targets = doc["kernelDescriptors"][0]["kernel_source"]["targets"]
    # A digest that is not the entry's: refused when that variant is loaded, at its path.
    targets["gfx90a:xnack-"] = "0" * 64
    write_json(kdp, doc)
    dset = _runtime.load_shard(str(out / "gfx90a"))
    assert _runtime.load_launch_code(dset, "hipk", None, "gfx90a:xnack+")
    with pytest.raises(_runtime.RuntimeCheckError) as err:
        _runtime.load_launch_code(dset, "hipk", None, "gfx90a:xnack-")
    assert err.value.code == "DIGEST_MISMATCH"  # type: ignore[attr-defined]
    assert err.value.diagnostic["path"] == (  # type: ignore[attr-defined]
        '$.kernelDescriptors[0].kernel_source.targets["gfx90a:xnack-"]')
    r = subprocess.run([str(VALIDATE), str(out / "gfx90a")], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 1
    assert ('k.kdp.json: $.kernelDescriptors[0].kernel_source.targets["gfx90a:xnack-"]: '
            "kernel 'hipk' (id hipk, single launch): the code object for gfx90a:xnack-") in r.stderr
    # A key that is no target ID is refused when the shard is read.
    targets["gfx90a:xnack"] = targets.pop("gfx90a:xnack-")
    write_json(kdp, doc)
    dset = _runtime.load_shard(str(out / "gfx90a"))
    assert any("expected a target ID such as gfx90a:xnack+, found 'gfx90a:xnack'" in d["message"]
               for d in dset.diagnostics if d["severity"] == "error")
