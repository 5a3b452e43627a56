"""A user's first hour (the rough edges a new user met): arch typos refused at once with
a suggestion, counts in the singular where there is one, a mistyped command or flag
answered by the command it was meant for, ``--cmakedir`` in the help, progress lines
that fit an 80-column terminal, and tests that skip (or, under CI, fail) naming what a
plain Debian cannot install."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pack_support import write_engine, write_json

from ukdpack.progress import Reporter
from ukdpack.words import count, plural_of


def _ukdpack(*args: str | Path, cwd: Path | None = None,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ukdpack", *map(str, args)],
                          capture_output=True, text=True, check=False, cwd=cwd,
                          env=env or dict(os.environ, HIP_PLATFORM="amd"))


def _one_kernel_tree(root: Path) -> Path:
    write_engine(root)
    (root / "k.hip").write_text('#include <hip/hip_runtime.h>\n'
                                'extern "C" __global__ void first(float* p) { p[0] = 1.0f; }\n')
    write_json(root / "a.kdp.json", {
        "id": "kdp", "version": "1.0", "name": "a", "arch": ["gfx90a"], "matchers": [],
        "engine": "ued", "dispatch": "udd", "kernelDescriptors": [{
            "id": "k", "version": "1.0", "name": "k", "priority": 0, "metadata": {"v": 1},
            "kernel_source": {"kind": "hip", "source": "k.hip", "entry": "first",
                              "build": {}}}]})
    return root


# ------------------------------------------------------------------ arch names
@pytest.mark.parametrize("typo,near", [("gfx103", "gfx1030"), ("gfx1300", "gfx1100"),
                                       ("gfx90b", "gfx90"), ("gfx9999", None)])
def test_an_arch_typo_of_the_right_shape_is_a_usage_error_at_once(
        tmp_path: Path, typo: str, near: str | None) -> None:
    """Refused before anything is compiled or written (exit 2), with a suggestion when one
    is near; not "dormant: no kernels for gfx103" after the whole pack."""
    root = _one_kernel_tree(tmp_path / "t")
    out = tmp_path / "out"
    r = _ukdpack("pack", "--source-root", root, "--out-root", out, "--arch", f"gfx90a,{typo}",
                 "--cache-dir", tmp_path / "cache")
    assert r.returncode == 2, r.stderr
    assert f"--arch {typo}: unknown GPU arch" in r.stderr
    assert "--allow-unknown-arch" in r.stderr
    if near:
        assert f"did you mean {near}" in r.stderr
    assert "Traceback" not in r.stderr and "dormant" not in r.stderr
    assert not out.exists()


def test_the_opt_in_packs_for_an_arch_nobody_knows(tmp_path: Path) -> None:
    """--allow-unknown-arch: the arch passes ukdpack; what the compiler makes of it
    decides (here: no kernel names it, so it is dormant)."""
    root = _one_kernel_tree(tmp_path / "t")
    r = _ukdpack("pack", "--source-root", root, "--out-root", tmp_path / "out", "--arch",
                 "gfx1300", "--allow-unknown-arch", "--cache-dir", tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    assert "dormant: no kernels for gfx1300" in r.stderr


def test_an_arch_the_compiler_lists_but_the_table_lacks_is_accepted(tmp_path: Path) -> None:
    """"plus the arches the chosen compiler reports": a compiler (a wrapper around the
    real hipcc that adds one processor to its listing) that knows gfx1999."""
    real = subprocess.run(["sh", "-c", "command -v hipcc"], capture_output=True, text=True,
                          check=True).stdout.strip()
    wrapper = tmp_path / "newer-hipcc"
    wrapper.write_text(f'#!/bin/sh\nfor a; do [ "$a" = --print-supported-cpus ] && '
                       f'{{ "{real}" "$@"; echo "	gfx1999"; exit; }}; done\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    root = _one_kernel_tree(tmp_path / "t")
    r = _ukdpack("pack", "--source-root", root, "--out-root", tmp_path / "out", "--arch",
                 "gfx1999", "--hipcc", wrapper, "--cache-dir", tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    assert "dormant: no kernels for gfx1999" in r.stderr
    r = _ukdpack("pack", "--source-root", root, "--out-root", tmp_path / "out", "--arch",
                 "gfx1998", "--hipcc", wrapper, "--cache-dir", tmp_path / "cache")
    assert r.returncode == 2 and "the compiler does not list it either" in r.stderr


# ------------------------------------------------------------------ words
def test_counts_are_singular_for_one() -> None:
    assert count(1, "kernel") == "1 kernel" and count(2, "kernel") == "2 kernels"
    assert count(1, "launch") == "1 launch" and count(0, "launch") == "0 launches"
    assert count(3, "arch") == "3 arches" and count(1, "entry") == "1 entry"
    assert count(2, "code object") == "2 code objects" and plural_of("entry") == "entries"
    assert count(12345, "archive byte") == "12,345 archive bytes"


def test_validate_says_one_pack_one_kernel(tmp_path: Path) -> None:
    root = _one_kernel_tree(tmp_path / "t")
    r = _ukdpack("validate", root)
    assert r.returncode == 0, r.stderr
    assert "1 pack, 1 kernel" in r.stdout, r.stdout
    assert "1 packs" not in r.stdout and "1 kernels" not in r.stdout


# ------------------------------------------------------------------ command line
def test_a_mistyped_command_gets_a_suggestion() -> None:
    r = _ukdpack("valdate", ".")
    assert r.returncode == 2
    assert "unknown command 'valdate'; did you mean 'validate'?" in r.stderr
    r = _ukdpack("cache", "stast")
    assert r.returncode == 2 and "did you mean 'stats'?" in r.stderr


def test_an_unknown_flag_gets_its_own_commands_usage(tmp_path: Path) -> None:
    r = _ukdpack("validate", tmp_path, "--jsn")
    assert r.returncode == 2
    assert r.stderr.startswith("usage: ukdpack validate "), r.stderr
    assert "unrecognized arguments: --jsn" in r.stderr
    r = _ukdpack("cache", "stats", "--bogus")
    assert r.returncode == 2 and r.stderr.startswith("usage: ukdpack cache stats "), r.stderr


def test_cmakedir_is_in_the_help_and_works_through_the_console_script() -> None:
    r = _ukdpack("--help")
    assert "--cmakedir" in r.stdout
    script = Path(sys.executable).parent / "ukdpack"
    a = subprocess.run([str(script), "--cmakedir"], capture_output=True, text=True, check=False)
    b = _ukdpack("--cmakedir")
    assert a.returncode == b.returncode == 0, (a.stderr, b.stderr)
    assert a.stdout == b.stdout and Path(a.stdout.strip()).is_dir()


# ------------------------------------------------------------------ progress
def test_the_live_progress_line_fits_an_80_column_terminal() -> None:
    from rich.console import Console

    reporter = Reporter("mylib/gfx90a", stream=io.StringIO(), live=True)
    reporter.batch_started(240, "compiling")
    reporter.job_done("attention/decode/split_kv_partial_reduce_f16_d128.hip [gfx90a] "
                      "-DBLOCK=256 -DHEADS=64", 1.0, "compiled")
    progress = reporter._progress
    assert progress is not None
    try:
        console = Console(file=io.StringIO(), width=80, force_terminal=False)
        with console.capture() as cap:
            console.print(progress.make_tasks_table(progress.tasks))
        lines = cap.get().rstrip("\n").splitlines()
    finally:
        reporter.batch_finished("done")
    assert len(lines) == 1, lines
    assert len(lines[0]) <= 80
    assert "1/240" in lines[0] and "ukdpack[mylib/gfx90a]: compiling" in lines[0]
    assert lines[0].rstrip().endswith("…")


# ------------------------------------------------------------------ the machine
def test_a_missing_tool_skips_on_a_users_machine_and_fails_under_ci(tmp_path: Path) -> None:
    """machine.need: a skip naming what is missing, or under CI=true a failure."""
    test = tmp_path / "test_needs.py"
    test.write_text("from machine import need\n"
                    "def test_it():\n"
                    "    need(None, 'the frobnicator (not in Debian)')\n")
    here = Path(__file__).parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(here), os.environ.get(
        "PYTHONPATH", "")]))
    env.pop("CI", None)
    argv = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(test)]
    user = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path,
                          check=False)
    assert user.returncode == 0, user.stdout
    assert "1 skipped" in user.stdout and "missing the frobnicator" in user.stdout
    ci = subprocess.run(argv, capture_output=True, text=True, env=dict(env, CI="true"),
                        cwd=tmp_path, check=False)
    assert ci.returncode == 1 and "1 failed" in ci.stdout
    assert "CI needs the frobnicator" in ci.stdout


def test_no_test_asserts_a_tool_setup_cannot_install() -> None:
    """Tests name such tools through machine.need (nvcc, another Python, mount
    namespaces), never with a bare assert that fails on a user's plain Debian."""
    here = Path(__file__).parent
    for path in here.glob("test_*.py"):
        if path.name == Path(__file__).name:
            continue
        text = path.read_text()
        assert 'assert shutil.which("nvcc")' not in text, path
        assert "= _other_python()" not in text, path


# ------------------------------------------------------------------ setup.sh
def test_setup_names_every_debian_package_a_minbase_machine_lacks() -> None:
    """A debootstrap minbase Debian 12 has no venv module, no Python headers, no C++
    compiler, no make and no system CMake: setup.sh installs each by name (apt without
    recommends installs nothing else), and upgrades Debian's venv pip (23.0, no -C)
    before it passes -C."""
    setup = (Path(__file__).resolve().parents[2] / "scripts" / "setup.sh").read_text()
    listed = setup[setup.index("packages=("):setup.index("\n)\n")]
    names = {w for line in listed.splitlines() for w in line.split("#")[0].split()}
    for pkg in ("python3-venv", "python3-dev", "g++", "make", "cmake", "hipcc", "clang-19",
                "lld-19", "ninja-build", "nginx-light", "redis-server", "util-linux"):
        assert pkg in names, pkg
    assert setup.index("--upgrade pip") < setup.index("-C build-dir")
    # It says what it is doing during the long build, with the expected duration.
    assert "minutes" in setup and "[done/total]" in setup


def test_setup_shows_the_builds_progress(tmp_path: Path) -> None:
    """The build's [n/N] lines reach the user while pip runs (pip -q would hide them)."""
    setup = (Path(__file__).resolve().parents[2] / "scripts" / "setup.sh").read_text()
    body = setup[setup.index("build_install() {"):setup.index("\n}\n", setup.index(
        "build_install() {")) + 3]
    fake = tmp_path / ".venv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\necho 'Building wheel'\necho '[0/2] Re-checking globbed "
                    "directories...'\necho '  [1/3] Building CXX object "
                    "CMakeFiles/x.dir/cpp/src/load/loader.cpp.o'\necho '[3/3] Linking CXX shared "
                    "module _runtime.so'\n")
    fake.chmod(0o755)
    script = tmp_path / "s.sh"
    script.write_text("set -euo pipefail\nsay() { printf 'setup: %s\\n' \"$*\"; }\n"
                      "log=build.log\n" + body + "build_install x\n")
    r = subprocess.run(["bash", str(script)], capture_output=True, text=True, cwd=tmp_path,
                       check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["setup:   [1/3] loader.cpp.o", "setup:   [3/3] _runtime.so"]
