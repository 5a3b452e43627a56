"""``ukdpack inspect``: engines, packs, kernels with their launches, toc keys, code-object
sizes and signatures, as a table or as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kpack_oracle import Archive
from pack_support import read_json
from shard_support import ARCH, copy_shard, errors, kernel, pack_example, ukdpack


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pack_example(tmp_path_factory, "inspect")[1] / ARCH


def _json(shard: Path) -> dict[str, Any]:
    r = ukdpack("inspect", str(shard), "--json")
    assert r.returncode == 0, r.stderr
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def test_json_lists_engines_packs_kernels_and_launches(shard: Path) -> None:
    doc = _json(shard)
    assert doc["arch"] == ARCH
    assert sorted(e["name"] for e in doc["engines"]) == ["example:attention", "example:attention_bwd",
                                                       "example:prebuilt"]
    attention = next(e for e in doc["engines"] if e["name"] == "example:attention")
    assert attention["metadata"] == "attention_metadata" and attention["knobs"] == ["block"]
    assert sorted(attention["packs"]) == ["scale", "split_kv"]
    packs = {p["name"]: p for p in doc["packs"]}
    assert sorted(packs) == ["bwd_dkdv", "bwd_dq", "bwd_prep", "reduce", "scale", "split_kv",
                            "twostage"]
    split = packs["split_kv"]
    assert split["dispatch_symbol"] == "example_split_kv_dispatch"
    assert split["dispatch_launches"] == ["produce", "consume"]
    (k,) = split["kernels"]
    assert k["name"] == "split_kv.f32" and k["metadata"] == {"dtype": "FLOAT", "split": True}
    assert [ln["name"] for ln in k["launches"]] == ["consume", "produce"]
    packed = kernel(read_json(shard / "attention" / "split_kv.kdp.json"), "split_kv.f32")
    archive = Archive.open(shard / "kpack" / f"kernels_{ARCH}.kpack")
    for ln in k["launches"]:
        recorded = packed["sources"][ln["name"]]
        for field in ("toc_key", "symbol", "sha256", "signature"):
            assert ln[field] == recorded[field]
        assert ln["archive"] == f"kpack/kernels_{ARCH}.kpack"
        assert ln["size"] == len(archive.get(ln["toc_key"], ARCH))
    (scale_f32,) = [k for k in packs["scale"]["kernels"] if k["name"] == "scale.f32"]
    assert [ln["name"] for ln in scale_f32["launches"]] == [None]


def test_json_lists_every_code_object_and_who_uses_it(shard: Path) -> None:
    doc = _json(shard)
    (a,) = doc["archives"]
    assert a["path"] == f"kpack/kernels_{ARCH}.kpack" and a["arches"] == [ARCH]
    assert a["scheme"] == "zstd-per-kernel"
    assert a["bytes"] == (shard / a["path"]).stat().st_size
    entries = {e["toc_key"]: e for e in a["entries"]}
    # two scale objects, split_kv's, the prebuilt reduce object, the slotted engine's one
    assert len(entries) == 5
    shared = next(e for k, e in entries.items() if k.startswith("reduce_"))
    assert sorted(shared["used_by"]) == ["reduce_sum.gfx90a", "twostage.gfx90a/combine",
                                         "twostage.gfx90a/partial"]
    archive = Archive.open(shard / a["path"])
    for key, e in entries.items():
        assert e["size"] == archive.entry(key, ARCH).original_size
        assert e["type"] == "hsaco"


def test_table_names_every_kernel_launch_and_toc_key(shard: Path) -> None:
    r = ukdpack("inspect", str(shard))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith(f"shard {shard}: arch gfx90a, 3 engines, 7 packs, 9 kernels, "
                          "12 launches, 5 code objects (")
    doc = _json(shard)
    for p in doc["packs"]:
        assert f"pack {p['name']} ({p['file']})" in out
        for k in p["kernels"]:
            assert k["name"] in out
            for ln in k["launches"]:
                assert ln["toc_key"] in out and ln["symbol"] in out
    assert "dispatch example_split_kv_dispatch {produce, consume}" in out
    assert "(global_buffer 8@0, global_buffer 8@8, by_value 12@16)" in out  # consume
    assert '{"dtype":"FLOAT","split":true}' in out
    assert "reduce_sum.gfx90a, twostage.gfx90a/combine, twostage.gfx90a/partial" in out


def test_an_unreadable_archive_is_shown_and_fails(shard: Path, tmp_path: Path) -> None:
    copy = copy_shard(shard, tmp_path / ARCH)
    (copy / "kpack" / f"kernels_{ARCH}.kpack").write_bytes(b"KPAK but not really")
    r = ukdpack("inspect", str(copy), "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    (a,) = doc["archives"]
    assert "error" in a and a["path"] == f"kpack/kernels_{ARCH}.kpack"
    assert all(ln["size"] is None for p in doc["packs"] for k in p["kernels"]
               for ln in k["launches"])
    assert [p["file"] for p in doc["problems"]] == [f"kpack/kernels_{ARCH}.kpack"]
    r = ukdpack("inspect", str(copy))
    assert r.returncode == 1
    (line,) = errors(r.stderr)
    assert line.startswith(f"ukdpack: error: kpack/kernels_{ARCH}.kpack: ")
    assert "archive kpack/kernels_gfx90a.kpack: " in r.stdout


def test_bad_input_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    r = ukdpack("inspect", str(tmp_path / "nowhere"))
    assert r.returncode == 2  # a shard that is not there: the command line to fix
    assert "expected a shard folder (OUT_ROOT/<arch>/), found nothing at that path" in r.stderr
    assert "Traceback" not in r.stderr
    assert ukdpack("inspect").returncode == 2
