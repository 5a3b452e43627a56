"""The C++ consumer example (examples/cpp-consumer, docs/cpp-consumer.md) builds and runs
against an installed ukdpack (find_package) and against this checkout
(add_subdirectory), on the shard its CMake project packs from its kernels/ tree; the
guide shows the program as it is."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pack_support import REPO

from ukdpack import _runtime

EXAMPLE = REPO / "examples" / "cpp-consumer"
GUIDE = REPO / "docs" / "cpp-consumer.md"


def _run(args: list[str], cwd: Path | None = None, check: bool = True
         ) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HIP_PLATFORM="amd")
    env.pop("PYTHONPATH", None)  # the build sets its own
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env, check=False)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def _build(build: Path, *defines: str) -> None:
    launcher = ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"] if shutil.which("ccache") else []
    _run(["cmake", "-S", str(EXAMPLE), "-B", str(build), "-G", "Ninja",
          "-DCMAKE_BUILD_TYPE=Release", f"-DPython3_EXECUTABLE={sys.executable}", *launcher,
          *defines])
    _run(["cmake", "--build", str(build), "-j2"])


def _check_runs(build: Path) -> None:
    """The program on the packed shard: every step's line; on the out root: one line."""
    shard = build / "shards" / "gfx90a"
    assert (shard / "kpack" / "example_gfx90a.kpack").is_file()
    program = build / "cpp_consumer"
    r = _run([str(program), str(shard)])
    lines = r.stdout.splitlines()
    expected = [
        rf"loaded {re.escape(str(shard))}: 2 packs, 2 kernels",
        r"state manager for gfx90a: 2 kernels kept, 0 dropped",
        r"no GPU: .+; the plans are not run",
        r'\{"dtype":"FLOAT","op":"scale"\}: kernel scale\.f32 \(pack scale, dispatch '
        r"example_kernels_scale_dispatch\), 1 launch, workspace 0 bytes",
        r"  launch \(single\): symbol scale_f32, \d+ bytes of verified code",
        r'\{"dtype":"FLOAT","op":"sum"\}: kernel twostage\.f32 \(pack twostage, dispatch '
        r"example_kernels_twostage_dispatch\), 2 launches, workspace 1024 bytes",
        r"  launch partial: symbol twostage_partial, \d+ bytes of verified code",
        r"  launch combine: symbol twostage_combine, \d+ bytes of verified code",
        r'\{"dtype":"FLOAT","op":"softmax"\}: no kernel',
    ]
    assert len(lines) == len(expected), r.stdout
    for line, pattern in zip(lines, expected, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)
    # The verified code is the archived object: as long as the runtime reads it.
    sizes = [int(m) for m in re.findall(r"(\d+) bytes of verified code", r.stdout)]
    dset = _runtime.load_shard(str(shard))
    assert not [d for d in dset.diagnostics if d["severity"] == "error"]
    assert sizes[1] == sizes[2] > 0  # both launches: one translation unit, one object

    r = _run([str(program), str(build / "shards"), "gfx90a"], check=False)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.splitlines() == [
        f"error: {build / 'shards'}: holds no shard: its descriptors lie in the shard folder "
        f"gfx90a below it (it is an out root; a shard is OUT_ROOT/<arch>/); did you mean "
        f"{build / 'shards' / 'gfx90a'}?"]
    r = _run(["ctest", "--test-dir", str(build), "--output-on-failure"])
    assert "100% tests passed" in r.stdout and "cpp_consumer.gfx90a" in r.stdout, r.stdout


def test_the_example_runs_against_the_installed_package(installed_prefix: Path,
                                                        tmp_path: Path) -> None:
    _build(tmp_path / "build", f"-DCMAKE_PREFIX_PATH={installed_prefix}")
    _check_runs(tmp_path / "build")


def test_the_example_runs_against_add_subdirectory(tmp_path: Path) -> None:
    _build(tmp_path / "build", f"-DUKDPACK_SOURCE_DIR={REPO}", "-DUKDPACK_PYTHON=")
    _check_runs(tmp_path / "build")


def test_the_guide_shows_the_program_as_it_is() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    blocks = re.findall(r"^```cpp\n(.*?)^```$", text, re.M | re.S)
    assert (EXAMPLE / "main.cpp").read_text(encoding="utf-8") in blocks


@pytest.mark.parametrize("doc", ["README.md", "docs/first-steps.md"])
def test_the_guide_is_linked(doc: str) -> None:
    assert "cpp-consumer.md" in (REPO / doc).read_text(encoding="utf-8")
