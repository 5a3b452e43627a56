"""UkdPackaging.cmake's argument checking, arch handling and Python requirement
list, in CMake script mode (no configure, no build): every function refuses unknown
and missing arguments, the CMake arch pattern agrees with the runtime's isArchName,
the requirement list is pyproject.toml's, and docs/cmake.md's reference is the
module's comment blocks. Then one small project configured (no build): lists reach
commands as lists, and a reconfigure does not rerun the interpreter check."""

from __future__ import annotations

import json
import shlex
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
    ("ukd_add_pack_target(NAME n SOURCE_ROOT s OUT_ROOT o REMOTE_EXEC)",
     "ukd_add_pack_target: missing values for: REMOTE_EXEC"),
    ("ukd_add_pack_target(NAME n SOURCE_ROOT . OUT_ROOT o ARCHES gfx90a "
     "REMOTE_EXEC http://farm:1)", "REMOTE_EXEC 'http://farm:1' is"),
    ("ukd_add_pack_target(NAME n SOURCE_ROOT . OUT_ROOT o ARCHES gfx90a "
     "REMOTE_EXEC grcp://me:Pa55@farm:1)", "REMOTE_EXEC 'grcp://***@farm:1' is"),
    ("ukd_add_shard_tests(NAME n)", "ukd_add_shard_tests: unknown arguments: NAME;n"),
    ("ukd_add_shard_tests(PACK_NAME nope)", "ukd_add_shard_tests: no pack target named 'nope'"),
])
def test_functions_refuse_bad_arguments(tmp_path: Path, call: str, fragment: str) -> None:
    r = _script(tmp_path, call)
    assert r.returncode != 0
    assert fragment in r.stderr
    assert "Pa55" not in r.stderr  # a credential in a URL is never printed


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
    r = subprocess.run([sys.executable, str(REPO / "cmake" / "UkdRequirements.py"),
                        str(pyproject), str(out)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    return out.read_text().splitlines()


def test_the_requirement_list_is_pyprojects(tmp_path: Path) -> None:
    """What configure wrote into the development build is pyproject.toml's list."""
    pyproject = REPO / "pyproject.toml"
    toml = pytest.importorskip("tomllib")  # stdlib from Python 3.11
    want = toml.loads(pyproject.read_text())["project"]["dependencies"]
    assert _requirements(tmp_path, pyproject) == want
    built = REPO / "build" / "py" / "ukdpack-python-requirements.txt"
    assert built.read_text().splitlines() == want


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


# -- a configured project: lists as lists, the cached interpreter check ---------------

LISTS_PROJECT = """cmake_minimum_required(VERSION 3.20)
project(lists NONE)
set(_UKDPACK_DEFAULT_PYTHON [==[{python}]==])
set(UKDPACK_PYTHONPATH [==[{pythonpath}]==])
set(UKDPACK_PYTHON_REQUIREMENTS_FILE [==[{requirements}]==])
set(UKDPACK_VALIDATE [==[{validate}]==])
include([==[{module}]==])
ukd_add_dvc_pull_target(NAME t ROOT [==[{root}]==])
ukd_add_pack_target(NAME t SOURCE_ROOT [==[{root}]==] OUT_ROOT out ARCHES gfx90a gfx1030
                    REQUIRED EXCLUDE_FOLDERS [==[skip me|x]==]
                    REMOTE_EXEC [==[grpc://farm.example:8980/main]==])
enable_testing()
ukd_add_shard_tests(PACK_NAME t)
"""


class Lists:
    """A project calling the CMake API on a root whose path holds spaces, a DVC output
    and an excluded folder whose names hold a space and a '|', and a PYTHONPATH folder
    holding a space; configured with Ninja (which takes no '|' in a file it tracks, so
    the root has none). The interpreter is a wrapper that logs each run, so the test
    sees what configure ran."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "the root"
        self.root.mkdir()
        # A DVC output whose path holds a space and a '|' (not pulled).
        (self.root / "objs.dvc").write_text(
            "outs:\n- md5: d41d8cd98f00b204e9800998ecf8427e\n  size: 0\n  path: 'an obj|1.bin'\n")
        (base / ".dvc").mkdir()
        self.log = base / "python.log"
        self.python = base / "python"
        self.python.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{self.log}"\n'
                               f'exec "{sys.executable}" "$@"\n')
        self.python.chmod(0o755)
        self.requirements = base / "requirements.txt"
        self.requirements.write_text("pyyaml>=6\n")
        self.extra_path = base / "a python folder"
        self.extra_path.mkdir()
        site = Path(_runtime.__file__).resolve().parents[1]
        (base / "src").mkdir()
        (base / "src" / "CMakeLists.txt").write_text(LISTS_PROJECT.format(
            python=self.python, pythonpath=f"{site};{self.extra_path}",
            requirements=self.requirements, validate="/bin/true", module=MODULE, root=self.root))
        self.build = base / "build"

    def configure(self) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(["cmake", "-S", str(self.base / "src"), "-B", str(self.build),
                            "-G", "Ninja"], capture_output=True, text=True, check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        return r

    def checks_run(self) -> int:
        """How many times the Python dependency check ran."""
        return self.log.read_text().count("UkdCheckPython.py") if self.log.exists() else 0

    def commands(self, target: str) -> list[list[str]]:
        r = subprocess.run(["ninja", "-C", str(self.build), "-t", "commands", target],
                           capture_output=True, text=True, check=True)
        return [shlex.split(part) for line in r.stdout.splitlines()
                for part in line.split(" && ")]


@pytest.fixture
def lists(tmp_path: Path) -> Lists:
    project = Lists(tmp_path)
    project.configure()
    return project


def _after_dashes(argv: list[str]) -> list[str]:
    return argv[argv.index("--") + 1:]


def test_a_reconfigure_does_not_rerun_the_python_check(lists: Lists) -> None:
    assert lists.checks_run() == 1
    r = lists.configure()
    assert lists.checks_run() == 1
    assert "has the packer's Python dependencies" not in r.stdout
    # Another requirement list is checked again.
    lists.requirements.write_text("pyyaml>=6\nmsgpack>=1.0\n")
    r = lists.configure()
    assert lists.checks_run() == 2
    assert f"ukdpack: {lists.python} has the packer's Python dependencies" in r.stdout


def test_the_resident_packer_reaches_every_pack_command(lists: Lists) -> None:
    """-DUKDPACK_RESIDENT=ON sets UKDPACK_RESIDENT=1 in each arch's pack command (off by
    default: test_lists_travel_as_lists finds PYTHONPATH alone there)."""
    r = subprocess.run(["cmake", "-DUKDPACK_RESIDENT=ON", str(lists.build)],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    for arch in ("gfx90a", "gfx1030"):
        pack = next(c for c in lists.commands(f"ukd_pack_t_{arch}") if "pack" in c)
        env = pack[pack.index("env") + 1:pack.index(str(lists.python))]
        assert env[-1] == "UKDPACK_RESIDENT=1", env


def test_lists_travel_as_lists(lists: Lists) -> None:
    """Items with spaces and '|' reach the packer, the shard tests and the helper
    scripts as one argument each (joined by '|' and split again, as before, 'skip me|x'
    became two); PYTHONPATH is a path list of the given folders."""
    root, out = str(lists.root), str(lists.build / "out")
    pack = next(c for c in lists.commands("ukd_pack_t_gfx90a") if "pack" in c)
    assert pack[pack.index("--source-root") + 1] == root
    env = pack[pack.index("env") + 1:pack.index(str(lists.python))]
    site = str(Path(_runtime.__file__).resolve().parents[1])
    assert env == ["--modify", f"PYTHONPATH=set:{site}",
                   "--modify", f"PYTHONPATH=path_list_append:{lists.extra_path}"]
    assert pack[pack.index("--exclude-folder") + 1] == "skip me|x"
    assert pack[pack.index("--remote-exec") + 1] == "grpc://farm.example:8980/main"
    # REQUIRED judges every arch, not the first alone.
    required = next(c for c in lists.commands("ukd_pack_t") if "UkdRequireShards.cmake" in " ".join(c))
    assert _after_dashes(required) == ["gfx90a", "gfx1030"]
    (lists.build / "out" / "gfx1030").mkdir(parents=True)
    assert subprocess.run(required, capture_output=True, check=False).returncode == 0
    # The shard tests' command lines.
    shown = subprocess.run(["ctest", "--test-dir", str(lists.build), "--show-only=json-v1"],
                           capture_output=True, text=True, check=True)
    tests = {t["name"]: _after_dashes(t["command"]) for t in json.loads(shown.stdout)["tests"]}
    verify = tests["ukdpack.t.gfx90a.verify"]
    assert verify[verify.index("verify") + 1:] == [
        f"{out}/gfx90a", "--source-root", root, "--arch", "gfx90a",
        "--exclude-folder", "skip me|x"]
    assert tests["ukdpack.t.gfx1030.validate"] == ["/bin/true", f"{out}/gfx1030"]
    # The pull step's outputs reach its depfile whole.
    stamp = next(c for c in lists.commands("ukd_dvc_t") if "UkdDvcStamp.cmake" in " ".join(c))
    assert _after_dashes(stamp) == [str(lists.root / "an obj|1.bin")]
    subprocess.run(stamp, check=True)
    depfile = next((lists.build / "ukdpack").glob("t.dvc-pull.d")).read_text()
    assert str(lists.root / "an obj|1.bin").replace(" ", "\\ ") in depfile.splitlines()[1]
