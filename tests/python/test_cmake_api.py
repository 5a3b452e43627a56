"""UkdPackaging.cmake's argument checking, arch handling and Python requirement
list, in CMake script mode (no configure, no build): every function refuses unknown
and missing arguments, the CMake arch pattern agrees with the runtime's isArchName,
the requirement list is pyproject.toml's, and docs/cmake.md's reference is the
module's comment blocks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pack_support import REPO

from ukdpack import _runtime

MODULE = REPO / "cmake" / "UkdPackaging.cmake"


def _script(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "t.cmake"
    script.write_text(f'include("{MODULE}")\n{body}\n')
    return subprocess.run(["cmake", "-P", str(script)], capture_output=True, text=True,
                          check=False)


@pytest.mark.parametrize("call,fragment", [
    ("ukd_check_dvc_outputs(ROOT x BOGUS)", "ukd_check_dvc_outputs: unknown arguments: BOGUS"),
    ("ukd_check_dvc_outputs(REQUIRE)", "ukd_check_dvc_outputs: ROOT is required"),
    ("ukd_check_dvc_outputs(ROOT)", "ukd_check_dvc_outputs: missing values for: ROOT"),
    ("ukd_add_dvc_pull_target(ROOT x)", "ukd_add_dvc_pull_target: NAME is required"),
    ("ukd_add_dvc_pull_target(NAME n ROOT x REMOTE)", "missing values for: REMOTE"),
    ("ukd_add_pack_target(NAME n SOURCE_ROOT s)", "ukd_add_pack_target: OUT_ROOT is required"),
    ("ukd_add_pack_target(NAME n SOURCE_ROOT s OUT_ROOT o ARCH gfx90a)",
     "ukd_add_pack_target: unknown arguments: ARCH;gfx90a"),
    ("ukd_add_pack_target(NAME n SOURCE_ROOT s OUT_ROOT o HIPCC)",
     "ukd_add_pack_target: missing values for: HIPCC"),
    ("ukd_add_pack_target(NAME n SOURCE_ROOT s OUT_ROOT o CACHE_DIR)",
     "ukd_add_pack_target: missing values for: CACHE_DIR"),
    ("ukd_add_shard_tests(NAME n)", "ukd_add_shard_tests: unknown arguments: NAME;n"),
    ("ukd_add_shard_tests(PACK_NAME nope)", "ukd_add_shard_tests: no pack target named 'nope'"),
])
def test_functions_refuse_bad_arguments(tmp_path: Path, call: str, fragment: str) -> None:
    r = _script(tmp_path, call)
    assert r.returncode != 0
    assert fragment in r.stderr


NAMES = ["gfx90a", "gfx90a:xnack-", "gfx940", "gfx942:sramecc+:xnack-", "gfx1030", "gfx1100",
         "gfx11-generic", "gfx9-4-generic", "gfx10-3-generic", "gfx900", "gfx90c", "sm_90",
         "sm_90a", "sm_100", "sm_8", "gfx", "x86_64", "gfx1030x", "gfxabc", "sm90", "gfx-generic",
         "GFX90A", "gfx90a-generic", "sm_1000", "gfx11000", "gfx10300a", "gfx90a0", "gfx1030f",
         "gfx9-4-", "gfx9--generic", "sm_90ab", "sm_9a"]


def test_cmake_arch_pattern_agrees_with_the_runtime(tmp_path: Path) -> None:
    body = "\n".join(
        f'_ukd_normalize_arches(out ON "{n}")\nmessage(STATUS "{n}=[${{out}}]")' for n in NAMES)
    r = _script(tmp_path, body)
    assert r.returncode == 0, r.stderr
    for name in NAMES:
        bare = _runtime.bare_arch(name)
        want = bare if _runtime.is_arch_name(bare) else ""
        assert f"-- {name}=[{want}]" in r.stdout, (name, r.stdout)
        if not want:
            assert f"'{name}' is no GPU arch" in r.stderr


def test_duplicates_are_dropped_and_order_kept(tmp_path: Path) -> None:
    r = _script(tmp_path, '_ukd_normalize_arches(out OFF gfx1030 gfx90a:xnack- gfx90a gfx1030)\n'
                          'message(STATUS "[${out}]")')
    assert "-- [gfx1030;gfx90a]" in r.stdout


def test_a_name_that_is_no_arch_is_fatal_unless_allowed(tmp_path: Path) -> None:
    r = _script(tmp_path, '_ukd_normalize_arches(out OFF gfx90a gfx90z)\nmessage(STATUS "[${out}]")')
    assert r.returncode != 0
    assert "CMake Error" in r.stderr and "'gfx90z' is no GPU arch" in r.stderr
    assert "UKDPACK_ALLOW_UNKNOWN_ARCHES" in r.stderr
    r = _script(tmp_path, '_ukd_normalize_arches(out ON gfx90a gfx90z)\nmessage(STATUS "[${out}]")')
    assert r.returncode == 0 and "-- [gfx90a]" in r.stdout
    assert "CMake Warning" in r.stderr and "'gfx90z' is no GPU arch" in r.stderr


def test_cmake_reads_the_runtimes_target_table(tmp_path: Path) -> None:
    """One target table (targets.def): CMake's list is the runtime's, and its "did you
    mean" names what the runtime's nearest_targets does."""
    typos = ["gfx103", "gfx1300", "gfx9999", "gfx90b", "sm_91", "gfx11-generc"]
    body = '_ukd_known_targets(k)\nmessage(STATUS "known=[${k}]")\n' + "\n".join(
        f'_ukd_did_you_mean(h "{t}")\nmessage(STATUS "{t}=[${{h}}]")' for t in typos)
    r = _script(tmp_path, body)
    assert r.returncode == 0, r.stderr
    assert f"-- known=[{';'.join(_runtime.known_targets())}]" in r.stdout
    assert {"gfx90a", "gfx1030", "gfx11-generic", "sm_90"} <= set(_runtime.known_targets())
    for t in typos:
        near = _runtime.nearest_targets(t)
        want = ("" if not near else f"; did you mean {near[0]}?" if len(near) == 1 else
                f"; did you mean {', '.join(near[:-1])} or {near[-1]}?")
        assert f"-- {t}=[{want}]" in r.stdout, (t, want, r.stdout)
    assert "gfx1030" in _runtime.nearest_targets("gfx103")
    assert _runtime.nearest_targets("gfx9999") == [] or "gfx9999" not in _runtime.known_targets()


def test_an_unknown_arch_of_the_right_shape_is_fatal_unless_allowed(tmp_path: Path) -> None:
    r = _script(tmp_path, '_ukd_normalize_arches(out OFF gfx90a gfx103)')
    assert r.returncode != 0
    text = " ".join(r.stderr.split())
    assert "'gfx103' is an unknown GPU arch" in text and "did you mean gfx1030" in text
    r = _script(tmp_path, '_ukd_normalize_arches(out ON gfx90a gfx103)\nmessage(STATUS "[${out}]")')
    assert r.returncode == 0 and "-- [gfx90a;gfx103]" in r.stdout
    assert "not in ukdpack's target table" in " ".join(r.stderr.split())


def _requirements(tmp_path: Path, pyproject: Path) -> list[str]:
    out = tmp_path / "req.txt"
    r = _script(tmp_path, f'_ukd_write_python_requirements("{pyproject}" "{out}")')
    assert r.returncode == 0, r.stderr
    return out.read_text().splitlines()


def test_the_requirement_list_is_pyprojects(tmp_path: Path) -> None:
    pyproject = REPO / "pyproject.toml"
    toml = pytest.importorskip("tomllib")  # stdlib from Python 3.11
    want = toml.loads(pyproject.read_text())["project"]["dependencies"]
    assert _requirements(tmp_path, pyproject) == want


def test_the_requirement_reader_takes_markers_comments_and_literal_strings(tmp_path: Path
                                                                          ) -> None:
    text = ('[build-system]\nrequires = ["x"]\n\n[project]\nname = "p"\n'
            'dependencies = [ "a[extra]>=1", # a comment, "not-this"\n'
            '  \'b; python_version < "3.11"\',\n  "c"]\n\n[tool.x]\ndependencies = ["d"]\n')
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(text)
    want = pytest.importorskip("tomllib").loads(text)["project"]["dependencies"]
    assert _requirements(tmp_path, pyproject) == want == [
        "a[extra]>=1", 'b; python_version < "3.11"', "c"]


def test_the_check_names_distributions_not_installed(tmp_path: Path) -> None:
    reqs = tmp_path / "req.txt"
    # Installed here (the test extras): pyyaml's distribution name differs from its
    # module name. A marker that does not hold skips its requirement.
    reqs.write_text("pyyaml>=6\nno-such-dist-ukdpack>=1\n"
                    'other-missing-ukdpack; python_version < "3"\n')
    r = subprocess.run([sys.executable, str(REPO / "cmake" / "UkdCheckPython.py"), str(reqs)],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["no-such-dist-ukdpack>=1"]


def test_the_docs_reference_matches_the_comment_blocks() -> None:
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "cmake_docs.py"), "--check"],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    doc = (REPO / "docs" / "cmake.md").read_text()
    for fn in ("ukd_check_dvc_outputs", "ukd_add_dvc_pull_target", "ukd_add_pack_target",
               "ukd_add_shard_tests"):
        assert f"### `{fn}`" in doc
    assert "UKDPACK_PACK_JOBS" in doc and "ALLOW_UNKNOWN_ARCHES" in doc
