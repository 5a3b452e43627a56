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
    assert any(d["code"] == "METADATA_NOT_UNIQUE" for d in doc["diagnostics"])


def test_dropped_pack_is_counted_as_a_pack_not_an_engine(tmp_path: Path) -> None:
    root = _tree(tmp_path, _pack("kdp-a", [_kernel("ukd-a1", "a1")]), udd_version="1.2")
    rc, doc = _validate(root)
    assert rc == 1
    assert doc["packs_dropped"] == 1
    assert doc["engines_dropped"] == 0
    assert [v["dropped"] for v in doc["engine_verdicts"]] == [False]
