"""The CMake API in a superbuild (tests/cmake/): configure-time DVC check, pull,
per-arch pack targets whose rebuilds follow their inputs, install, shard tests.
Run on Ninja and on Unix Makefiles."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pack_support import REPO

from ukdpack.produce import dvc

HERE = REPO / "tests" / "cmake"
ARCHES = ("gfx90a", "gfx1030")


def _run(args: list[str], cwd: Path | None = None, check: bool = True
         ) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HIP_PLATFORM="amd")
    if args[0] in ("cmake", "ctest"):
        env.pop("PYTHONPATH", None)  # the superbuild sets its own
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env, check=False)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def _make_workspace(base: Path) -> Path:
    """A checkout of the example as a fresh clone has it: descriptors, DVC config and
    the local remote, prebuilt objects not pulled."""
    ws = base / "ws"
    shutil.copytree(REPO / "descriptors", ws / "descriptors", symlinks=True)
    shutil.copytree(REPO / ".dvc", ws / ".dvc",
                    ignore=shutil.ignore_patterns("tmp", "cache", "config.local"))
    shutil.copytree(REPO / "dvc-remote", ws / "dvc-remote")
    for out in dvc.tracked_outputs(ws / "descriptors"):
        shutil.rmtree(out.path, ignore_errors=True)
    _run(["git", "init", "-q"], cwd=ws)
    return ws


class Superbuild:
    def __init__(self, base: Path, generator: str) -> None:
        self.ws = _make_workspace(base)
        self.tree = self.ws / "descriptors"
        self.build = base / "build"
        self.generator = generator
        self.shards = self.build / "shards"

    def configure(self, *extra: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return _run(["cmake", "-S", str(HERE), "-B", str(self.build), "-G", self.generator,
                     f"-DUKDPACK_CHECKOUT={REPO}", f"-DEXAMPLE_TREE={self.tree}",
                     f"-DPython3_EXECUTABLE={sys.executable}", "-DCMAKE_BUILD_TYPE=Release",
                     *extra], check=check)

    def build_all(self, check: bool = True) -> subprocess.CompletedProcess[str]:
        return _run(["cmake", "--build", str(self.build), "-j2"], check=check)

    def stamps(self) -> dict[str, dict[str, int]]:
        """mtime of every shard file, per arch: what a repack rewrites."""
        out: dict[str, dict[str, int]] = {}
        for arch in ARCHES:
            shard = self.shards / arch
            out[arch] = {str(p.relative_to(shard)): p.stat().st_mtime_ns
                         for p in shard.rglob("*") if p.is_file()}
        return out

    def repacked(self, before: dict[str, dict[str, int]]) -> set[str]:
        after = self.stamps()
        return {a for a in ARCHES if after[a] != before[a]}


@pytest.fixture(scope="module", params=["Ninja", "Unix Makefiles"])
def superbuild(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[Superbuild]:
    yield Superbuild(tmp_path_factory.mktemp(str(request.param).replace(" ", "_")),
                     str(request.param))


def test_missing_outputs_warn_then_fail_in_required_mode(superbuild: Superbuild) -> None:
    r = superbuild.configure()
    text = r.stdout + r.stderr
    assert "CMake Warning" in text and "DVC outputs under" in text
    for arch in ("gfx90a", "gfx940", "gfx1030"):
        assert f"dvc pull descriptors/prebuilt/objects/{arch}.dvc" in text
    assert "example: DVC outputs present: FALSE" in text
    assert "'not_an_arch' is no GPU arch" in text
    r = superbuild.configure("-DUKDPACK_REQUIRE_DVC_OUTPUTS=ON", check=False)
    assert r.returncode != 0
    assert "CMake Error" in r.stderr and "dvc pull descriptors/prebuilt/objects/gfx90a.dvc" in r.stderr


def test_pull_then_a_clean_configure(superbuild: Superbuild) -> None:
    r = _run([sys.executable, "-m", "ukdpack", "dvc-pull", str(superbuild.tree)])
    assert "dvc pull" in r.stdout
    r = superbuild.configure("-DUKDPACK_REQUIRE_DVC_OUTPUTS=ON")
    text = r.stdout + r.stderr
    assert "DVC outputs under" not in text
    assert "example: DVC outputs present: TRUE" in text


def test_build_packs_each_arch_and_noop_runs_nothing(superbuild: Superbuild) -> None:
    superbuild.build_all()
    for arch in ARCHES:
        assert (superbuild.shards / arch / "kpack" / f"example_{arch}.kpack").is_file()
    assert not (superbuild.shards / "gfx940").exists()
    before = superbuild.stamps()
    r = superbuild.build_all()
    assert superbuild.repacked(before) == set()
    assert "packing example" not in r.stdout


def test_edits_repack_only_the_shards_that_read_them(superbuild: Superbuild) -> None:
    sb, tree = superbuild, superbuild.tree

    def edit(path: Path, text: str) -> set[str]:
        before = sb.stamps()
        path.write_text(path.read_text() + text)
        sb.build_all()
        return sb.repacked(before)

    assert edit(tree / "attention" / "scale.kdp.json", "\n// edited\n") == set(ARCHES)
    assert edit(tree / "attention" / "kernels" / "common.h", "\n// touched\n") == set(ARCHES)
    assert edit(tree / "attention" / "kernels" / "split_kv.hip", "\n// touched\n") == set(ARCHES)
    # An unrelated file in the root changes nothing.
    before = sb.stamps()
    (tree / "NOTES.txt").write_text("not an input\n")
    sb.build_all()
    assert sb.repacked(before) == set()
    # A prebuilt object of one arch repacks that arch only.
    obj = tree / "prebuilt" / "objects" / "gfx90a" / "reduce.hsaco"
    before = sb.stamps()
    _run(["hipcc", "--genco", "--offload-arch=gfx90a", "-O3", "-fuse-cuid=none", "-DBLOCK=128",
          str(tree / "prebuilt" / "src" / "reduce.hip"), "-o", str(obj)])
    sb.build_all()
    assert sb.repacked(before) == {"gfx90a"}


def test_adding_and_removing_a_descriptor_repacks(superbuild: Superbuild) -> None:
    sb = superbuild
    extra = sb.tree / "attention" / "spare.udd.json"
    before = sb.stamps()
    extra.write_text('{"id": "spare-udd", "version": "1.0", "name": "spare", '
                     '"dispatch_symbol": "spare"}\n')
    sb.build_all()
    assert sb.repacked(before) == set(ARCHES)
    before = sb.stamps()
    extra.unlink()
    sb.build_all()
    assert sb.repacked(before) == set(ARCHES)


def test_shard_tests_and_install_without_stamps(superbuild: Superbuild) -> None:
    r = _run(["ctest", "--test-dir", str(superbuild.build), "-L", "ukdpack", "--output-on-failure"])
    assert "100% tests passed" in r.stdout
    for arch in ARCHES:
        for check in ("validate", "verify", "desk-check"):
            assert f"ukdpack.example.{arch}.{check} " in r.stdout, r.stdout
    assert r.stdout.count(" Test #") == 2 * 3  # 3 checks per built arch, no others
    prefix = superbuild.build.parent / "prefix"
    _run(["cmake", "--install", str(superbuild.build), "--prefix", str(prefix)])
    shards = prefix / "share" / "example" / "shards"
    assert sorted(p.name for p in shards.iterdir()) == sorted(ARCHES)
    installed = [p for p in shards.rglob("*")]
    assert installed
    for p in installed:
        assert not p.name.startswith("."), p  # no lock, staging or hidden files
        assert not p.name.endswith((".stamp", ".d")), p
    assert (shards / "gfx90a" / "kpack" / "example_gfx90a.kpack").is_file()
    files = {str(p.relative_to(shards / "gfx90a")) for p in (shards / "gfx90a").rglob("*")
             if p.is_file()}
    built = {str(p.relative_to(superbuild.shards / "gfx90a"))
             for p in (superbuild.shards / "gfx90a").rglob("*") if p.is_file()}
    assert files == built


def test_installed_copy_works_through_find_package(installed_prefix: Path,
                                                  tmp_path: Path) -> None:
    """A plain install of ukdpack, then a consumer with find_package(ukdpack CONFIG)
    that links ukdpack::runtime and packs with the CMake API."""
    prefix = installed_prefix
    assert (prefix / "lib" / "cmake" / "ukdpack" / "ukdpackConfig.cmake").is_file()
    assert (prefix / "bin" / "ukdpack-validate").is_file()
    tree = _make_workspace(tmp_path) / "descriptors"
    _run([sys.executable, "-m", "ukdpack", "dvc-pull", str(tree)])
    consumer = tmp_path / "consumer"
    _run(["cmake", "-S", str(HERE / "consumer"), "-B", str(consumer), "-G", "Ninja",
          f"-DCMAKE_PREFIX_PATH={prefix}", f"-DEXAMPLE_TREE={tree}"])
    _run(["cmake", "--build", str(consumer), "-j2"])
    assert (consumer / "shards" / "gfx90a" / "kpack" / "demo_gfx90a.kpack").is_file()
    r = _run(["ctest", "--test-dir", str(consumer), "--output-on-failure"])
    assert "100% tests passed" in r.stdout and "consumer.load" in r.stdout
