"""The real `ukdpack-validate --json` on small trees: ukdpack's report fields and
upstream hipDNN's beside them (success, expected_engines_missing, engine verdicts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from pack_support import write_json

VALIDATE = Path(sys.executable).parent / "ukdpack-validate"


def _kernel(kid: str, name: str, dtype: str = "FLOAT") -> dict[str, Any]:
    source = {"kind": "hip", "source": "k.hip", "entry": name + "_entry", "build": {}}
    return {"id": kid, "version": "1.0", "name": name, "priority": 0,
            "metadata": {"dtype": dtype}, "kernel_source": source}


def _pack(pid: str, kernels: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": pid, "version": "1.0", "name": pid, "arch": [], "matchers": ["umd-1"],
            "engine": "ued-1", "dispatch": "udd-1", "kernelDescriptors": kernels}


def _tree(root: Path, *packs: dict[str, Any], udd_version: str = "1.0") -> Path:
    write_json(root / "eng.kmd.json", {
        "id": "kmd-1", "version": "1.0", "name": "eng_md",
        "fields": [{"name": "dtype", "type": "string"},
                   {"name": "block", "type": "int", "default_value": 256}]})
    write_json(root / "eng.ued.json",
               {"id": "ued-1", "version": "1.0", "name": "test:eng", "metadata": "kmd-1"})
    write_json(root / "eng.umd.json", {"id": "umd-1", "version": "1.0", "name": "eng_match",
                                       "scope": "graph", "match_symbol": "eng_match"})
    write_json(root / "one.udd.json", {"id": "udd-1", "version": udd_version,
                                       "name": "udd-1_name", "dispatch_symbol": "sym_one"})
    (root / "k.hip").write_text('extern "C" __global__ void k() {}\n')
    for p in packs:
        write_json(root / f"{p['id']}.kdp.json", p)
    return root


def _validate(root: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run([str(VALIDATE), str(root), "--json", *extra],
                          capture_output=True, text=True, check=False, timeout=120)
    return done.returncode, json.loads(done.stdout)


def test_ok_tree(tmp_path: Path) -> None:
    rc, doc = _validate(_tree(tmp_path, _pack("kdp-a", [_kernel("ukd-a1", "a1")])),
                        "--expect-engine", "test:eng")
    assert rc == 0
    assert doc["format_version"] == 2
    assert doc["success"] is True and doc["ok"] is True
    assert doc["engines"] == ["test:eng"]
    assert doc["expected_engines_missing"] == []
    assert doc["model_checks"] == []
    assert doc["packs_dropped"] == 0 and doc["engines_dropped"] == 0
    assert doc["engine_verdicts"] == [{"engine": "test:eng", "id": "ued-1", "success": True,
                                       "dropped": False, "reason": "", "colliding_kernels": []}]


def test_expected_engine_missing(tmp_path: Path) -> None:
    rc, doc = _validate(_tree(tmp_path, _pack("kdp-a", [_kernel("ukd-a1", "a1")])),
                        "--expect-engine", "other:eng")
    assert rc == 1
    assert doc["success"] is False
    assert doc["expected_engines_missing"] == ["other:eng"]
    assert doc["engines"] == ["test:eng"]


def test_colliding_metadata_drops_the_engine_naming_both_kernels(tmp_path: Path) -> None:
    root = _tree(tmp_path, _pack("kdp-a", [_kernel("ukd-a1", "a1")]),
                 _pack("kdp-b", [_kernel("ukd-b1", "b1")]))
    rc, doc = _validate(root, "--expect-engine", "test:eng")
    assert rc == 1
    assert doc["success"] is False
    assert doc["engines"] == []
    assert doc["expected_engines_missing"] == ["test:eng"]
    assert doc["engines_dropped"] == 1 and doc["packs_dropped"] == 0
    [verdict] = doc["engine_verdicts"]
    assert verdict["dropped"] is True and verdict["success"] is False
    assert verdict["colliding_kernels"] == [["ukd-a1", "ukd-b1"]]
    [collision] = [d for d in doc["diagnostics"] if d["code"] == "METADATA_NOT_UNIQUE"]
    # Both kernels by name and id, as upstream's validator names them (scripts grep for the id).
    assert "of kernel 'b1' (id ukd-b1) equals that of kernel 'a1' (id ukd-a1)" in collision["message"]
    # The counters agree with the verdicts: the only engine is dropped, so no kernel is kept.
    assert doc["kept"] == 0
    assert "(0 kept," in doc["summary"]


def test_expect_engine_repeats_and_names_each_missing_one(tmp_path: Path) -> None:
    root = _tree(tmp_path, _pack("kdp-a", [_kernel("ukd-a1", "a1")]))
    rc, doc = _validate(root, "--expect-engine", "test:eng", "--expect-engine=ued-1")
    assert rc == 0 and doc["expected_engines_missing"] == []
    rc, doc = _validate(root, "--expect-engine", "test:eng", "--expect-engine", "x:one",
                        "--expect-engine", "x:two")
    assert rc == 1
    assert doc["expected_engines_missing"] == ["x:one", "x:two"]
    missing = [d["message"] for d in doc["diagnostics"] if d["code"] == "ENGINE_MISSING"]
    assert [m.split("'")[1] for m in missing] == ["x:one", "x:two"]
    done = subprocess.run([str(VALIDATE), str(root), "--expect-engine", ""], capture_output=True,
                          text=True, check=False, timeout=60)
    assert done.returncode == 2 and "--expect-engine needs an engine name" in done.stderr


def test_dropped_pack_is_counted_as_a_pack_not_an_engine(tmp_path: Path) -> None:
    root = _tree(tmp_path, _pack("kdp-a", [_kernel("ukd-a1", "a1")]), udd_version="1.2")
    rc, doc = _validate(root)
    assert rc == 1
    assert doc["packs_dropped"] == 1
    assert doc["engines_dropped"] == 0
    assert [v["dropped"] for v in doc["engine_verdicts"]] == [False]
