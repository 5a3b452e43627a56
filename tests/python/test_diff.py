"""``ukdpack diff``: kernels and launches added, removed and changed between shards."""

from __future__ import annotations

import copy as copying
import json
from pathlib import Path
from typing import Any

import pytest
from shard_support import ARCH, copy_shard, edit, kernel, pack_example, ukdpack

from ukdpack.tools.diff import diff


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pack_example(tmp_path_factory, "diff")[1] / ARCH


@pytest.fixture()
def other(shard: Path, tmp_path: Path) -> Path:
    return copy_shard(shard, tmp_path / ARCH)


def test_equal_shards(shard: Path, other: Path) -> None:
    r = ukdpack("diff", str(shard), str(other))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "0 kernels added, 0 removed, 0 changed (0 launches changed)\n"


def test_one_kernel_removed_and_one_launch_symbol_changed(shard: Path, other: Path) -> None:
    edit(other / "attention" / "scale.kdp.json", lambda d: d.update(
        kernelDescriptors=[k for k in d["kernelDescriptors"] if k["name"] != "scale.f16"]))
    edit(other / "attention" / "split_kv.kdp.json",
         lambda d: kernel(d, "split_kv.f32")["sources"]["produce"].update(
             symbol="split_kv_unused"))
    r = ukdpack("diff", str(shard), str(other))
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert lines[-1] == "0 kernels added, 1 removed, 1 changed (1 launch changed)"
    assert ("changed kernel 'split_kv.f32' (d168fb16-29a6-564c-b73f-f659c7cd8e72) in pack "
            "'split_kv' (attention/split_kv.kdp.json: $.kernelDescriptors[0])") in lines
    assert "  launch 'produce': symbol: 'split_kv_produce' -> 'split_kv_unused'" in lines
    assert ("removed kernel 'scale.f16' (9a038e0d-7fc8-5a7a-b054-7ec86dbc56fc) in pack "
            "'scale' (attention/scale.kdp.json: $.kernelDescriptors[1])") in lines
    assert not any("consume" in ln for ln in lines)
    # The other way round, the kernel is added.
    r = ukdpack("diff", str(other), str(shard), "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and "equal" not in doc
    assert doc["summary"] == "1 kernel added, 0 removed, 1 changed (1 launch changed)"
    assert [k["name"] for k in doc["kernels"]["added"]] == ["scale.f16"]
    assert doc["kernels"]["removed"] == []
    (changed,) = doc["kernels"]["changed"]
    assert changed["name"] == "split_kv.f32" and changed["changes"] == []
    assert changed["launches"] == [{"name": "produce", "status": "changed", "changes": [
        {"field": "symbol", "a": "split_kv_unused", "b": "split_kv_produce"}]}]


def test_reordered_sources_keys_are_no_change(shard: Path, other: Path) -> None:
    def reverse(doc: Any) -> None:
        for k in doc["kernelDescriptors"]:
            k["sources"] = dict(reversed(list(k["sources"].items())))

    edit(other / "prebuilt" / "twostage.kdp.json", reverse)
    assert diff(shard, other).equal
    assert ukdpack("diff", str(shard), str(other)).returncode == 0


def test_fields_launches_and_other_descriptors(shard: Path, other: Path) -> None:
    def change(doc: Any) -> None:
        k = kernel(doc, "twostage.gfx90a")
        k["priority"] = 3
        k["metadata"] = {"op": "sum_cubes"}
        k["sources"]["combine"]["sha256"] = "b" * 64
        k["sources"]["combine"]["signature"] = []
        k["sources"]["extra"] = copying.deepcopy(k["sources"]["partial"])
        added = copying.deepcopy(k)
        added.update(id="new-kernel", name="twostage.copy", metadata={"op": "copy"})
        doc["kernelDescriptors"].append(added)

    edit(other / "prebuilt" / "twostage.kdp.json", change)
    edit(other / "prebuilt" / "twostage.udd.json",
         lambda d: d.update(dispatch_symbol="renamed_dispatch"))
    result = diff(shard, other)
    assert result.summary() == "1 kernel added, 0 removed, 1 changed (2 launches changed)"
    (changed,) = [k for k in result.kernels if k.status == "changed"]
    assert [(c.field, c.a, c.b) for c in changed.changes] == [
        ("metadata", {"op": "sum_squares"}, {"op": "sum_cubes"}), ("priority", 0, 3)]
    launches = {ln.name: ln for ln in changed.launches}
    assert sorted(launches) == ["combine", "extra"]
    assert launches["extra"].status == "added"
    assert [c.field for c in launches["combine"].changes] == ["sha256", "signature"]
    (udd,) = result.descriptors
    assert (udd.type, udd.name, udd.status, udd.fields) == (
        "UDD", "twostage_dispatch", "changed", ("dispatch_symbol",))
    r = ukdpack("diff", str(shard), str(other))
    assert r.returncode == 1
    assert "  launch 'extra': added" in r.stdout.splitlines()
    assert "  launch 'combine': signature: (global_buffer 8@0, global_buffer 8@8, by_value " \
           "4@16, by_value 8@24) -> ()" in r.stdout.splitlines()
    assert "changed UDD 'twostage_dispatch' (prebuilt/twostage.udd.json): dispatch_symbol" \
        in r.stdout.splitlines()


def test_only_another_descriptor_differs(shard: Path, other: Path) -> None:
    edit(other / "attention" / "attention.umd.json", lambda d: d.update(match_symbol="m2"))
    r = ukdpack("diff", str(shard), str(other))
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        "changed UMD 'attention_graph_match' (attention/attention.umd.json): match_symbol",
        "0 kernels added, 0 removed, 0 changed (0 launches changed)"]


def test_bad_input(shard: Path, tmp_path: Path) -> None:
    r = ukdpack("diff", str(shard), str(tmp_path / "nowhere"))
    assert r.returncode == 2 and "expected a shard folder" in r.stderr
    assert "Traceback" not in r.stderr
    assert ukdpack("diff", str(shard)).returncode == 2
