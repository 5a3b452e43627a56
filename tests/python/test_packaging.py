"""Packaging: the pip-installed ukdpack (the .venv install of scripts/setup.sh is a
regular, non-editable pip install) carries a CMake package found through
`python -m ukdpack --cmakedir`; `cmake --install` gives a prefix with bin/ukdpack;
the distribution's metadata names its license and URLs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

from machine import need_other_python
from pack_support import REPO, copy_example

CONSUMER = REPO / "tests" / "cmake" / "consumer"
SITE = Path(sysconfig.get_paths()["platlib"])  # where pip installed ukdpack


def _env() -> dict[str, str]:
    """A user's shell: no PYTHONPATH onto the checkout, the venv not on PATH."""
    env = dict(os.environ, HIP_PLATFORM="amd")
    env.pop("PYTHONPATH", None)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != bindir)
    return env


def _run(args: list[str], cwd: Path, check: bool = True, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env or _env(),
                       check=False)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def _cmakedir(cwd: Path) -> Path:
    r = _run([sys.executable, "-m", "ukdpack", "--cmakedir"], cwd=cwd)
    return Path(r.stdout.strip())


def _cache(build: Path, name: str) -> str:
    for line in (build / "CMakeCache.txt").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return line.split("=", 1)[1]
    raise AssertionError(f"{name} not in {build}/CMakeCache.txt")


def test_cmakedir_names_the_package_config_inside_the_installed_wheel(tmp_path: Path) -> None:
    folder = _cmakedir(tmp_path)
    assert folder == (SITE / "ukdpack" / "share" / "cmake" / "ukdpack").resolve()
    for name in ("ukdpackConfig.cmake", "ukdpackConfigVersion.cmake", "ukdpackTargets.cmake",
                 "UkdPackaging.cmake", "UkdShardTest.cmake", "UkdRequireShards.cmake"):
        assert (folder / name).is_file(), name
    pkg = SITE / "ukdpack"
    assert (pkg / "include" / "ukdpack" / "load" / "loader.hpp").is_file()
    assert (folder / "targets.def").is_file()  # the one target table CMake reads
    assert (pkg / "lib" / "libukdpack_runtime.a").is_file()
    assert os.access(pkg / "bin" / "ukdpack-validate", os.X_OK)
    # No absolute path of the build machine in the installed config files.
    for f in folder.glob("*.cmake"):
        text = f.read_text()
        assert str(REPO) not in text, f
        assert str(SITE) not in text, f


def test_cmakedir_loads_neither_the_cli_nor_the_extension(tmp_path: Path) -> None:
    """`python -S` sees no site-packages: only the copied package with no extension,
    so --cmakedir must not import the command line (rich, jsonschema) or _runtime."""
    copy = tmp_path / "site" / "ukdpack"
    shutil.copytree(SITE / "ukdpack", copy, ignore=shutil.ignore_patterns("_runtime*.so"))
    env = dict(_env(), PYTHONPATH=str(tmp_path / "site"))
    r = _run([sys.executable, "-S", "-m", "ukdpack", "--cmakedir"], cwd=tmp_path, env=env)
    assert Path(r.stdout.strip()) == (copy / "share" / "cmake" / "ukdpack").resolve()
    # The source checkout ships no CMake package: one line, exit 1.
    env = dict(_env(), PYTHONPATH=str(REPO / "python"))
    r = _run([sys.executable, "-S", "-m", "ukdpack", "--cmakedir"], cwd=tmp_path, env=env,
             check=False)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "ships no CMake package" in r.stderr
    assert "Traceback" not in r.stderr


def test_find_package_against_the_pip_install_builds_links_and_packs(tmp_path: Path) -> None:
    """tests/cmake/consumer against `-Dukdpack_DIR=$(python -m ukdpack --cmakedir)`:
    links ukdpack::runtime, packs with ukd_add_pack_target through the installed packer
    (the interpreter that owns the wheel), and its shard tests pass."""
    tree = copy_example(tmp_path / "descriptors")
    build = tmp_path / "build"
    _run(["cmake", "-S", str(CONSUMER), "-B", str(build), "-G", "Ninja",
          "-DCMAKE_BUILD_TYPE=Release", f"-Dukdpack_DIR={_cmakedir(tmp_path)}",
          f"-DEXAMPLE_TREE={tree}"], cwd=tmp_path)
    # Found beside site-packages, though neither PATH nor the command line named it.
    assert Path(_cache(build, "UKDPACK_PYTHON")).parent == Path(sys.executable).parent
    rules = (build / "build.ninja").read_text()
    assert f"--modify PYTHONPATH=set:{SITE} " in rules
    assert str(REPO / "python") not in rules
    _run(["cmake", "--build", str(build), "-j2"], cwd=tmp_path)
    assert (build / "shards" / "gfx90a" / "kpack" / "demo_gfx90a.kpack").is_file()
    r = _run(["ctest", "--test-dir", str(build), "--output-on-failure"], cwd=tmp_path)
    assert "100% tests passed" in r.stdout
    for test in ("consumer.load", "ukdpack.demo.gfx90a.validate", "ukdpack.demo.gfx90a.verify",
                 "ukdpack.demo.gfx90a.desk-check"):
        assert f" {test} " in r.stdout, r.stdout


def test_the_wheel_config_is_relocatable(tmp_path: Path) -> None:
    """The config, the imported targets and the packer's path follow the package when
    site-packages moves: nothing absolute is baked in. Found through CMAKE_PREFIX_PATH
    on site-packages (<prefix>/<name>*/share/cmake/<name>*/)."""
    site = tmp_path / "moved" / "site-packages"
    shutil.copytree(SITE / "ukdpack", site / "ukdpack")
    project = tmp_path / "probe"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(probe LANGUAGES CXX)\n"
        "find_package(ukdpack CONFIG REQUIRED)\n"
        "get_target_property(lib ukdpack::runtime IMPORTED_LOCATION_RELEASE)\n"
        "get_target_property(inc ukdpack::runtime INTERFACE_INCLUDE_DIRECTORIES)\n"
        "get_target_property(exe ukdpack::validate IMPORTED_LOCATION_RELEASE)\n"
        'message(STATUS "probe|${lib}|${inc}|${exe}|${UKDPACK_PYTHONPATH}|")\n')
    r = _run(["cmake", "-S", str(project), "-B", str(tmp_path / "b"), "-G", "Ninja",
              f"-DCMAKE_PREFIX_PATH={site}",
              f"-DUKDPACK_PYTHON={sys.executable}"], cwd=tmp_path)
    line = next(x for x in r.stdout.splitlines() if "probe|" in x)
    lib, inc, exe, pythonpath = line.split("|")[1:5]
    assert Path(lib) == site / "ukdpack" / "lib" / "libukdpack_runtime.a"
    assert Path(inc) == site / "ukdpack" / "include"
    assert Path(exe) == site / "ukdpack" / "bin" / "ukdpack-validate"
    assert Path(pythonpath) == site


def test_a_reconfigure_does_not_rerun_the_wheel_check(tmp_path: Path) -> None:
    """The config's check that the interpreter runs the installed ukdpack is cached: a
    reconfigure runs no interpreter for it (the interpreter here logs each run)."""
    log = tmp_path / "python.log"
    python = tmp_path / "python3"
    python.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    project = tmp_path / "probe"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(probe LANGUAGES CXX)\n"
        "find_package(ukdpack CONFIG REQUIRED)\n")
    for _ in range(2):
        _run(["cmake", "-S", str(project), "-B", str(tmp_path / "b"), "-G", "Ninja",
              f"-Dukdpack_DIR={_cmakedir(tmp_path)}", f"-DUKDPACK_PYTHON={python}"], cwd=tmp_path)
    assert log.read_text().count("import os, ukdpack._runtime") == 1


def test_an_interpreter_that_cannot_run_the_wheel_stops_configure(tmp_path: Path) -> None:
    other = need_other_python()
    project = tmp_path / "probe"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(probe LANGUAGES CXX)\n"
        "find_package(ukdpack CONFIG REQUIRED)\n")
    r = _run(["cmake", "-S", str(project), "-B", str(tmp_path / "b"), "-G", "Ninja",
              f"-Dukdpack_DIR={_cmakedir(tmp_path)}", f"-DUKDPACK_PYTHON={other}"],
             cwd=tmp_path, check=False)
    assert r.returncode != 0
    text = " ".join(r.stderr.split())  # CMake wraps the message
    assert f"the interpreter '{other}' cannot run the ukdpack installed in {SITE}" in text
    assert "(ModuleNotFoundError: No module named 'ukdpack._runtime')" in text
    assert "Traceback" not in text
    assert "configure with -DUKDPACK_PYTHON=" in text


def test_cmake_install_gives_a_relocatable_bin_ukdpack(installed_prefix: Path,
                                                       tmp_path: Path) -> None:
    exe = installed_prefix / "bin" / "ukdpack"
    assert os.access(exe, os.X_OK)
    r = _run([str(exe), "--version"], cwd=tmp_path)
    assert r.stdout.strip() == f"ukdpack {metadata.version('ukdpack')}"
    # It runs the prefix's package, not the venv's: --cmakedir names the prefix's config.
    r = _run([str(exe), "--cmakedir"], cwd=tmp_path)
    assert Path(r.stdout.strip()) == (installed_prefix / "lib" / "cmake" / "ukdpack").resolve()
    # A moved prefix still works (paths relative to the launcher).
    moved = tmp_path / "moved"
    shutil.copytree(installed_prefix, moved, symlinks=True)
    r = _run([str(moved / "bin" / "ukdpack"), "--cmakedir"], cwd=tmp_path)
    assert Path(r.stdout.strip()) == (moved / "lib" / "cmake" / "ukdpack").resolve()
    _run([str(moved / "bin" / "ukdpack"), "validate", str(REPO / "descriptors")], cwd=tmp_path)


def test_installed_metadata_names_license_and_urls() -> None:
    dist = metadata.distribution("ukdpack")
    meta = dist.metadata
    assert meta["License-Expression"] == "MIT"
    assert "LICENSE" in meta.get_all("License-File", [])
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL", []))
    assert set(urls) == {"Homepage", "Documentation", "Issues"}
    assert all(u.startswith("https://github.com/ukdpack/ukdpack") for u in urls.values())
    shipped = [f for f in dist.files or [] if f.name == "LICENSE"]
    assert shipped, "the wheel carries no LICENSE"
    text = Path(str(shipped[0].locate())).read_text()
    assert text == (REPO / "LICENSE").read_text()
    assert "MIT License" in text and "the ukdpack authors" in text


def test_a_plain_pip_install_builds_outside_the_development_build() -> None:
    """A full wheel build is too slow to run here: the pyproject settings, read by
    scikit-build-core itself, give no build-dir (so it builds in a temporary folder),
    while scripts/setup.sh still names build/py for the development build."""
    from scikit_build_core.settings.skbuild_read_settings import SettingsReader

    plain = SettingsReader.from_file(REPO / "pyproject.toml", {}, state="wheel").settings
    assert plain.build_dir == ""
    dev = SettingsReader.from_file(REPO / "pyproject.toml", {"build-dir": "build/py"},
                                   state="wheel").settings
    assert dev.build_dir == "build/py"
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert "build_defines=(-C build-dir=build/py -C cmake.define.UKDPACK_BUILD_TESTS=ON" in setup
    assert setup.count('build_install --no-build-isolation') == 2
    assert setup.count('"${build_defines[@]}"') == 2
