"""The CMake API in a superbuild (tests/cmake/): the Python dependency check,
configure-time DVC check, arch names, pull, per-arch pack targets whose rebuilds
follow their inputs, install, shard tests (failing on a missing shard, skipping a
dormant arch), clean. Run on Ninja and on Unix Makefiles; one build per generator,
reconfigured as the tests go."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pack_support import REPO

from ukdpack.authored import dvc
from ukdpack.produce.cache import default_cache_dir

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
        """Configure with the defaults of every test; ``extra`` comes last, so it wins."""
        return _run(["cmake", "-S", str(HERE), "-B", str(self.build), "-G", self.generator,
                     f"-DUKDPACK_CHECKOUT={REPO}", f"-DEXAMPLE_TREE={self.tree}",
                     f"-DPython3_EXECUTABLE={sys.executable}", "-DCMAKE_BUILD_TYPE=Release",
                     "-DUKDPACK_PYTHON=", "-DGPU_TARGETS=gfx90a:xnack-;gfx1030",
                     "-DUKDPACK_ALLOW_UNKNOWN_ARCHES=OFF", "-DUKDPACK_REQUIRE_DVC_OUTPUTS=OFF",
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


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An interpreter without any of the packer's packages: a venv without
    system site packages (and without pip: nothing is installed into it)."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    return venv / "bin" / "python"


@pytest.fixture(scope="module", params=["Ninja", "Unix Makefiles"])
def superbuild(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[Superbuild]:
    yield Superbuild(tmp_path_factory.mktemp(str(request.param).replace(" ", "_")),
                     str(request.param))


def test_missing_python_packages_fail_configure_by_name(superbuild: Superbuild,
                                                         bare_python: Path) -> None:
    """Under add_subdirectory, the first ukd_* call checks UKDPACK_PYTHON against
    pyproject.toml's dependencies, by distribution name, with the pip command."""
    r = superbuild.configure(f"-DUKDPACK_PYTHON={bare_python}", check=False)
    assert r.returncode != 0
    text = " ".join(r.stderr.split())  # CMake wraps long messages
    toml = pytest.importorskip("tomllib")  # stdlib from Python 3.11
    reqs = toml.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "zstandard>=0.21" in reqs  # the list is pyproject's, distribution names
    for req in reqs:
        assert f"'{req}'" in text, (req, text)
    assert f"{bare_python} -m pip install '{reqs[0]}'" in text
    assert "ModuleNotFoundError" not in text and "Traceback" not in text


def test_missing_outputs_warn_then_fail_in_required_mode(superbuild: Superbuild) -> None:
    r = superbuild.configure()
    text = r.stdout + r.stderr
    assert "CMake Warning" in text and "DVC outputs under" in text
    for arch in ("gfx90a", "gfx940", "gfx1030"):
        assert f"dvc pull descriptors/prebuilt/objects/{arch}.dvc" in text
    # The lines keep their punctuation (no CMake list flattening), each command is said
    # once, and the way to fetch is the build's own pull target, not a command that is
    # not on a CMake user's PATH.
    assert "missing; run in" in text and "missingrun in" not in text
    assert "not present; fetch" not in text and "ukdpack dvc-pull" not in text
    fetch = f"Fetch them with: cmake --build {superbuild.build} --target ukd_dvc_example"
    assert " ".join(text.split()).count(fetch) == 1, text  # CMake wraps long lines
    assert "example: DVC outputs present: FALSE" in text
    assert (f"-- ukdpack: ukd_pack_example: shards gfx90a, gfx1030 from {superbuild.tree} "
            f"into {superbuild.shards}/<arch>/") in r.stdout
    assert "-- ukdpack: ukd_pack_prebuilt: shards gfx90a, gfx1100 from" in r.stdout
    r = superbuild.configure("-DUKDPACK_REQUIRE_DVC_OUTPUTS=ON", check=False)
    assert r.returncode != 0
    assert "CMake Error" in r.stderr and "dvc pull descriptors/prebuilt/objects/gfx90a.dvc" in r.stderr


def test_an_unknown_gpu_target_fails_configure_unless_allowed(superbuild: Superbuild) -> None:
    r = superbuild.configure("-DGPU_TARGETS=gfx90a;not_an_arch", check=False)
    assert r.returncode != 0
    assert "CMake Error" in r.stderr and "'not_an_arch' is no GPU arch" in r.stderr
    r = superbuild.configure("-DGPU_TARGETS=gfx90a;not_an_arch", "-DUKDPACK_ALLOW_UNKNOWN_ARCHES=ON")
    assert "CMake Warning" in r.stderr and "'not_an_arch' is no GPU arch" in r.stderr
    assert "-- ukdpack: ukd_pack_example: shards gfx90a from" in r.stdout


def test_a_typo_of_the_right_shape_fails_configure_with_a_suggestion(
        superbuild: Superbuild) -> None:
    """gfx103 has an arch's shape but is in no target table: configure fails at once,
    not the pack later ("dormant: no kernels for gfx103")."""
    r = superbuild.configure("-DGPU_TARGETS=gfx90a;gfx103", check=False)
    text = " ".join(r.stderr.split())
    assert r.returncode != 0 and "CMake Error" in text
    assert "'gfx103' is an unknown GPU arch" in text and "did you mean gfx1030" in text, text
    r = superbuild.configure("-DGPU_TARGETS=gfx90a;gfx1300", "-DUKDPACK_ALLOW_UNKNOWN_ARCHES=ON")
    assert "'gfx1300' is not in ukdpack's target table" in " ".join(r.stderr.split())
    assert "-- ukdpack: ukd_pack_example: shards gfx90a, gfx1300 from" in r.stdout
    r = superbuild.configure("-DGPU_TARGETS=gfx90a:xnack-;gfx1030", "-DUKDPACK_ALLOW_UNKNOWN_ARCHES=OFF")


def test_pull_then_a_clean_configure(superbuild: Superbuild) -> None:
    r = _run([sys.executable, "-m", "ukdpack", "dvc-pull", str(superbuild.tree)])
    assert "dvc pull" in r.stdout
    hipcc = shutil.which("hipcc")
    assert hipcc
    r = superbuild.configure("-DUKDPACK_REQUIRE_DVC_OUTPUTS=ON", "-DUKDPACK_PACK_JOBS=4",
                             f"-DUKDPACK_HIPCC={hipcc}", f"-DUKDPACK_CACHE_DIR={default_cache_dir()}")
    text = r.stdout + r.stderr
    assert "DVC outputs under" not in text
    assert "example: DVC outputs present: TRUE" in text
    if superbuild.generator == "Ninja":
        # Two arches at most at once (the most any pack target has), 4 / 2 compiles each.
        rules = (superbuild.build / "CMakeFiles" / "rules.ninja").read_text()
        assert "pool ukdpack_pack\n  depth = 2\n" in rules
        ninja = (superbuild.build / "build.ninja").read_text()
        packs = [b for b in ninja.split("\n\n") if " pack --source-root " in b]
        assert len(packs) == 4  # example: gfx90a, gfx1030; prebuilt: gfx90a, gfx1100
        for block in packs:
            assert "pool = ukdpack_pack" in block
            assert "--jobs 2 " in block and f"--hipcc {hipcc} " in block
            assert f"--cache-dir {default_cache_dir()} " in block


def test_build_packs_each_arch_and_noop_runs_nothing(superbuild: Superbuild) -> None:
    superbuild.build_all()
    for arch in ARCHES:
        assert (superbuild.shards / arch / "kpack" / f"example_{arch}.kpack").is_file()
    assert not (superbuild.shards / "gfx940").exists()
    prebuilt = superbuild.build / "prebuilt-shards"
    assert (prebuilt / "gfx90a" / "kpack" / "prebuilt_gfx90a.kpack").is_file()
    assert not (prebuilt / "gfx1100").exists()
    assert "no kernels for gfx1100" in (prebuilt / ".gfx1100.dormant").read_text()
    assert not (prebuilt / ".gfx90a.dormant").exists()
    before = superbuild.stamps()
    r = superbuild.build_all()
    assert superbuild.repacked(before) == set()
    assert "packing example" not in r.stdout and "dvc pull for" not in r.stdout


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
    # 3 checks per arch of the two packs ("Test  #1:" .. "Test #12:")
    assert len(re.findall(r" Test +#\d+: ", r.stdout)) == 4 * 3, r.stdout
    # The dormant arch's tests are skipped, the others ran.
    for check in ("validate", "verify", "desk-check"):
        assert f"ukdpack.prebuilt.gfx1100.{check} (Skipped)" in r.stdout, r.stdout
        assert f"ukdpack.prebuilt.gfx90a.{check} (Skipped)" not in r.stdout
    assert r.stdout.count("(Skipped)") == 3
    prefix = superbuild.build.parent / "prefix"
    _run(["cmake", "--install", str(superbuild.build), "--prefix", str(prefix),
          "--component", "ukdpack_example"])
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


def test_a_missing_shard_fails_its_tests(superbuild: Superbuild) -> None:
    """A shard that is gone with no dormancy recorded (a failed or refused pack removed
    it) fails its tests rather than skipping them."""
    shutil.rmtree(superbuild.shards / "gfx1030")
    r = _run(["ctest", "--test-dir", str(superbuild.build), "-L", "ukdpack-example",
              "--output-on-failure"], check=False)
    assert r.returncode != 0
    assert "50% tests passed, 3 tests failed out of 6" in r.stdout, r.stdout
    for check in ("validate", "verify", "desk-check"):
        assert f"ukdpack.example.gfx1030.{check} (Failed)" in r.stdout, r.stdout
    assert "(Skipped)" not in r.stdout
    assert f"the shard {superbuild.shards / 'gfx1030'} is missing" in " ".join(r.stdout.split())
    # The next build packs that arch again, and only that one.
    before = superbuild.stamps()["gfx90a"]
    superbuild.build_all()
    assert (superbuild.shards / "gfx1030" / "kpack" / "example_gfx1030.kpack").is_file()
    assert superbuild.stamps()["gfx90a"] == before


def test_pull_step_reruns_for_a_missing_output_and_clean_spares_it(superbuild: Superbuild
                                                                    ) -> None:
    """The pull step runs again when a DVC output is deleted, and not otherwise;
    `clean` removes the shards and leaves the pulled objects in the source tree."""
    sb = superbuild
    outputs = [o.path for o in dvc.tracked_outputs(sb.tree)]
    assert len(outputs) == len(list(sb.tree.rglob("*.dvc"))) >= 3
    shutil.rmtree(outputs[0])
    r = _run(["cmake", "--build", str(sb.build), "--target", "ukd_dvc_example"])
    assert "dvc pull for" in r.stdout
    assert outputs[0].is_dir() and any(outputs[0].iterdir())
    r = _run(["cmake", "--build", str(sb.build), "--target", "ukd_dvc_example"])
    assert "dvc pull for" not in r.stdout
    objects = {p: p.read_bytes() for o in outputs for p in o.rglob("*") if p.is_file()}
    assert len(objects) >= len(outputs)  # every output holds its files
    _run(["cmake", "--build", str(sb.build), "--target", "clean"])
    assert {p: p.read_bytes() for p in objects if p.is_file()} == objects
    prebuilt = sb.build / "prebuilt-shards"
    for gone in (sb.shards / "gfx90a", prebuilt / "gfx90a", prebuilt / ".gfx1100.dormant",
                 prebuilt / ".gfx90a.lock"):
        assert not gone.exists(), gone
    assert not list((sb.build / "ukdpack").glob("*.stamp"))


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
