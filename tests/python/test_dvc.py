"""DVC outputs: presence and content checks on a real DVC repository with
the example's committed local remote, pulls through DVC itself, and what validate
and pack say about objects that were not pulled."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pack_support import dvc_workspace, run_pack

from ukdpack.authored import dvc


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The example as a fresh clone has it: sidecars and remote, no objects."""
    return dvc_workspace(tmp_path)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ukdpack", *args], capture_output=True,
                          text=True, check=False)


def test_status_pull_and_verify(workspace: Path) -> None:
    root = workspace / "descriptors"
    st = dvc.status(root)
    assert st.repo == workspace.resolve()
    assert sorted(s.output.path.name for s in st.missing) == ["gfx10-3-generic", "gfx1030",
                                                               "gfx90a", "gfx940"]
    lines = dvc.describe_missing(st)
    assert any("prebuilt/objects/gfx90a: missing; run in" in ln and
               "dvc pull descriptors/prebuilt/objects/gfx90a.dvc" in ln for ln in lines)

    r = _cli("dvc-status", str(root), "--require")
    assert r.returncode == 1 and "4 of 4 DVC outputs not present" in r.stdout
    assert _cli("dvc-status", str(root)).returncode == 0  # a report, not a gate

    r = _cli("dvc-pull", str(root))
    assert r.returncode == 0, r.stderr
    assert "ran in" in r.stdout
    assert dvc.status(root, verify=True).ok

    obj = root / "prebuilt" / "objects" / "gfx90a" / "reduce.hsaco"
    obj.write_bytes(obj.read_bytes() + b"\0")
    (state,) = [s for s in dvc.status(root, verify=True).outputs if s.output.path.name == "gfx90a"]
    assert state.state == "modified" and "the sidecar records" in state.detail
    assert dvc.status(root).ok  # presence alone does not hash

    obj.unlink()
    (state,) = [s for s in dvc.status(root).outputs if s.output.path.name == "gfx90a"]
    assert state.state == "empty"


def test_incomplete_folder_and_json(workspace: Path) -> None:
    root = workspace / "descriptors"
    sidecar = root / "prebuilt" / "objects" / "gfx90a.dvc"
    sidecar.write_text(sidecar.read_text().replace("nfiles: 1", "nfiles: 2"))
    folder = root / "prebuilt" / "objects" / "gfx90a"
    folder.mkdir(parents=True)
    (folder / "one.hsaco").write_bytes(b"x")
    doc = json.loads(_cli("dvc-status", str(root), "--json").stdout)
    by_name = {Path(o["path"]).name: o for o in doc["outputs"]}
    assert by_name["gfx90a"]["state"] == "incomplete"
    assert by_name["gfx90a"]["detail"] == "holds 1 of 2 files"
    assert doc["missing"] == 4
    assert doc["pull"] == ["dvc pull descriptors/prebuilt/objects/gfx10-3-generic.dvc "
                           "descriptors/prebuilt/objects/gfx1030.dvc "
                           "descriptors/prebuilt/objects/gfx90a.dvc "
                           "descriptors/prebuilt/objects/gfx940.dvc"]


def test_outputs_are_grouped_by_their_remote(workspace: Path) -> None:
    root = workspace / "descriptors"
    sidecar = root / "prebuilt" / "objects" / "gfx940.dvc"
    sidecar.write_text(sidecar.read_text().replace("  path: gfx940", "  path: gfx940\n  remote: other"))
    groups = dvc.pull_groups(dvc.status(root))
    assert groups == {None: ["descriptors/prebuilt/objects/gfx10-3-generic.dvc",
                             "descriptors/prebuilt/objects/gfx1030.dvc",
                             "descriptors/prebuilt/objects/gfx90a.dvc"],
                      "other": ["descriptors/prebuilt/objects/gfx940.dvc"]}


def test_broken_sidecar_is_named(workspace: Path) -> None:
    root = workspace / "descriptors"
    (root / "prebuilt" / "objects" / "gfx90a.dvc").write_text("outs: [unclosed")
    r = _cli("dvc-status", str(root))
    assert r.returncode == 1
    assert "prebuilt/objects/gfx90a.dvc: cannot read DVC sidecar" in r.stderr
    assert "Traceback" not in r.stderr


def test_validate_warns_and_pack_fails_only_the_arches_missing_objects(workspace: Path,
                                                                      tmp_path: Path) -> None:
    root = workspace / "descriptors"
    r = _cli("validate", str(root))
    assert r.returncode == 0
    assert ("ukdpack: warning: prebuilt/reduce.kdp.json: $.kernelDescriptors[0].kernel_source"
            ".file: prebuilt object 'objects/gfx90a/reduce.hsaco' is not there: it is a DVC "
            "output of prebuilt/objects/gfx90a.dvc that is not pulled") in r.stderr
    subprocess.run([sys.executable, "-m", "dvc", "pull", "-q",
                    "descriptors/prebuilt/objects/gfx90a.dvc"], cwd=workspace, check=True)
    r = run_pack(root, tmp_path / "out", ["gfx90a", "gfx1030"], cache=tmp_path / "cache")
    assert r.returncode == 1
    assert "failed: gfx1030 (1 of 2 arches)" in r.stderr
    assert "dvc pull descriptors/prebuilt/objects/gfx1030.dvc" in r.stderr
    assert (tmp_path / "out" / "gfx90a" / "prebuilt" / "reduce.kdp.json").is_file()
    assert not (tmp_path / "out" / "gfx1030").exists()
