"""``ukdpack validate`` as a user meets it: exit codes, lines, JSON, no tracebacks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ukdpack.cli import main

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "corpus"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ukdpack", *args], capture_output=True,
                          text=True, cwd=REPO, check=False)


def test_example_tree_validates() -> None:
    r = _run("validate", "descriptors")
    assert r.returncode == 0, r.stderr
    assert "valid:" in r.stdout and r.stderr == ""


def test_invalid_tree_exits_1_with_one_line_per_problem() -> None:
    r = _run("validate", str(CORPUS / "many_problems" / "tree"))
    assert r.returncode == 1
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("ukdpack: error: ")]
    assert len(errors) == 5
    assert "Traceback" not in r.stderr


def test_usage_error_exits_2() -> None:
    assert _run("validate").returncode == 2
    assert _run("frobnicate").returncode == 2


def test_missing_root_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    r = _run("validate", str(tmp_path / "nowhere"))
    assert r.returncode == 2  # a root that is not there: the command line to fix
    assert "expected a descriptor root folder, found nothing" in r.stderr
    assert "Traceback" not in r.stderr


def test_json_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", str(CORPUS / "sets_two_kdps_one_udd" / "tree"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["ok"] is False and doc["format_version"] == 1
    (problem,) = [p for p in doc["problems"] if p["severity"] == "error"]
    assert problem["file"] == "a.kdp.json"
    assert problem["path"] == "$.kernelDescriptors"
    assert "dispatch symbol 'sym_one'" in problem["message"]


def test_garbage_bytes_never_traceback(tmp_path: Path) -> None:
    shutil.copytree(CORPUS / "ok_minimal" / "tree", tmp_path / "t")
    (tmp_path / "t" / "junk.kdp.json").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "t" / "deep.udd.json").write_text("[" * 100000)
    (tmp_path / "t" / "nan.umd.json").write_text('{"id": NaN}')
    r = _run("validate", str(tmp_path / "t"))
    assert r.returncode == 1
    assert "junk.kdp.json: not UTF-8 text" in r.stderr
    assert "deep.udd.json: $[0][0]" in r.stderr
    assert "nested deeper than 128 levels of objects and arrays" in r.stderr
    assert "nan.umd.json: not valid JSON: syntax error while parsing value - invalid literal" \
        in r.stderr
    assert "Traceback" not in r.stderr


def test_walk_order_is_sorted_whatever_the_creation_order(tmp_path: Path) -> None:
    """Two copies made in opposite orders report their problems identically."""
    src = CORPUS / "many_problems" / "tree"
    outputs = []
    for name, order in (("a", sorted), ("b", lambda xs: sorted(xs, reverse=True))):
        dst = tmp_path / name
        dst.mkdir()
        for f in order(os.listdir(src)):
            shutil.copy(src / f, dst / f)
        r = _run("validate", str(dst))
        outputs.append(r.stderr)
    assert outputs[0] == outputs[1]


def test_symlinked_folder_is_not_followed_and_said(tmp_path: Path) -> None:
    shutil.copytree(CORPUS / "ok_minimal" / "tree", tmp_path / "t")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.udd.json").write_text("{broken")
    (tmp_path / "t" / "linked").symlink_to(tmp_path / "elsewhere")
    r = _run("validate", str(tmp_path / "t"))
    assert r.returncode == 0, r.stderr
    assert "skipping linked: symbolic link to a folder (not followed)" in r.stderr
