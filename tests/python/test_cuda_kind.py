"""The ``cuda`` kernel-source kind on a machine without a GPU: nvcc compiles cubins,
the packer stores them as ``cubin`` entries, signatures come from the cubin's
parameter records, and the host-side runtime checks hold (issue "Device
end to end"). Execution itself is in tests/device/."""

from __future__ import annotations

from pathlib import Path

import pytest
from kpack_oracle import Archive
from machine import need_nvcc
from pack_support import REPO, read_json, run_pack

from ukdpack import _runtime
from ukdpack.produce import codeobject

TREE = REPO / "tests" / "device" / "tree"
PTR, U32, F32 = ({"kind": "by_value", "size": 8},
                 {"kind": "by_value", "size": 4}, {"kind": "by_value", "size": 4})


def _args(*parts: tuple[dict[str, object], int]) -> list[dict[str, object]]:
    return [{**kind, "offset": offset} for kind, offset in parts]


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need_nvcc()
    base = tmp_path_factory.mktemp("cuda")
    r = run_pack(TREE, base / "out", ["sm_90"], cache=base / "cache")
    assert r.returncode == 0, r.stderr
    return base / "out" / "sm_90"


def test_cubins_are_packed_with_their_signatures(shard: Path) -> None:
    (split,) = read_json(shard / "split.kdp.json")["kernelDescriptors"]
    produce, consume = split["sources"]["produce"], split["sources"]["consume"]
    assert produce["toc_key"] == consume["toc_key"] and produce["sha256"] == consume["sha256"]
    # (const float* in, float* ws, unsigned n, float scale)
    assert produce["signature"] == _args((PTR, 0), (PTR, 8), (U32, 16), (F32, 20))
    # (const float* ws, float* out, unsigned n, Affine p) with a 12-byte struct by value
    assert consume["signature"] == _args((PTR, 0), (PTR, 8), (U32, 16),
                                         ({"kind": "by_value", "size": 12}, 20))
    (scale,) = read_json(shard / "scale.kdp.json")["kernelDescriptors"]
    assert scale["kernel_source"]["signature"] == _args((PTR, 0), (PTR, 8), (U32, 16), (F32, 20))
    archive = Archive.open(shard / "kpack" / "kernels_sm_90.kpack")
    assert archive.entry(produce["toc_key"], "sm_90").type == "cubin"
    blob = archive.get(produce["toc_key"], "sm_90")
    assert codeobject.target_arch(blob) == "sm_90"
    assert codeobject.kernels(blob) == ["split_consume", "split_produce"]
    assert _runtime.code_object_has_kernel(blob, "split_consume")


def test_host_side_runtime_checks(shard: Path) -> None:
    dset = _runtime.load_shard(str(shard))
    handlers = {"device_split_dispatch": ["produce", "consume"], "device_scale_dispatch": [],
                "device_slot_prep_dispatch": [], "device_slot_main_dispatch": [],
                "device_slot_finish_dispatch": ["shift", "store"]}
    sm = _runtime.StateManager(dset, handlers=handlers, arch="sm_90")
    assert sm.dropped() == []
    # The slotted engine's default picks, planned on the host (the GPU run is tests/device).
    (engine,) = sm.slotted_engines()
    picks = sm.slot_program(engine["id"], {}).picks
    assert [(p["slot"], p["name"]) for p in picks] == [
        ("prep", "slot_prep.f32"), ("main", "slot_main.reverse"), ("finish", "slot_finish.f32")]
    (split,) = [k for k in sm.kept() if k["name"] == "split.f32"]
    assert sm.load_launch_code(split["kernel_id"], "produce", "sm_90") == \
        sm.load_launch_code(split["kernel_id"], "consume", "sm_90")
    fewer = _runtime.StateManager(dset, handlers={**handlers, "device_split_dispatch": ["produce"]},
                                  arch="sm_90")
    assert [d["name"] for d in fewer.dropped()] == ["split.f32"]
    (line,) = fewer.log()
    assert "declares launches {produce}, the kernel has {consume, produce}" in line


def test_cuda_backend_says_why_it_cannot_load() -> None:
    try:
        backend = _runtime.CudaBackend()
    except _runtime.DeviceError as e:
        assert "libcuda.so.1" in str(e)
    else:  # a machine with an NVIDIA driver
        assert backend.arch().startswith("sm_")


def test_missing_nvcc_is_one_clear_error(tmp_path: Path) -> None:
    r = run_pack(TREE, tmp_path / "out", ["sm_90"], "--nvcc", str(tmp_path / "no-nvcc"),
                 cache=tmp_path / "cache")
    assert r.returncode == 1
    assert "no cuda compiler found" in r.stderr and "install the CUDA toolkit" in r.stderr
    assert "Traceback" not in r.stderr


def test_damaged_cubins_are_refused_by_name() -> None:
    """Every truncation of a committed cubin is refused with a CodeObjectError (or, where
    the cut leaves the parameter records whole, still reads); nothing else escapes."""
    cubins = sorted((REPO / "tests" / "data" / "objects").glob("*.cubin"))
    assert cubins
    data = cubins[0].read_bytes()
    assert codeobject.kernels(data)
    refused = 0
    for cut in range(0, len(data), max(1, len(data) // 97)):
        try:
            codeobject.kernels(data[:cut])
        except codeobject.CodeObjectError:
            refused += 1
    assert refused > 90
