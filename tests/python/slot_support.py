"""A small valid slotted tree (UED 1.1 ``slots``, KDP 1.1 ``slot``) for the packer and
shard-tool tests: engine ``t:slotted`` runs slots prep, main and reduce in that order;
main has two candidates in two KDPs (several KDPs may fill one slot) and the knob
``main.block``. Every kernel is one entry of one HIP file: one compile per arch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pack_support import write_json

SLOTS = ("prep", "main", "reduce")
#: KDP file stem -> (slot, kernel names)
PACKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "prep": ("prep", ("prep_k",)),
    "main": ("main", ("main_fast",)),
    "main_alt": ("main", ("main_safe",)),
    "reduce": ("reduce", ("reduce_k",)),
}
HIP = """#include <hip/hip_runtime.h>
extern "C" __global__ void prep_k(float* p) { p[0] = 1.0f; }
extern "C" __global__ void main_fast(float* p) { p[0] += 2.0f; }
extern "C" __global__ void main_safe(float* p) { p[0] += 2.0f; }
extern "C" __global__ void reduce_k(float* p) { p[0] *= 3.0f; }
"""


def slot_doc(name: str, **more: Any) -> dict[str, Any]:
    return {"name": name, **more}


def ued_doc(slots: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"id": "sued", "version": "1.1", "name": "t:slotted", "metadata": "skmd",
            "revision": "1.0", "slots": slots if slots is not None else
            [slot_doc("prep"), slot_doc("main", knobs=["block"]), slot_doc("reduce")]}


def kdp_doc(stem: str, slot: str | None, kernels: tuple[str, ...],
            arch: str = "gfx90a") -> dict[str, Any]:
    doc: dict[str, Any] = {"id": f"kdp-{stem}", "version": "1.1", "name": stem,
                           "arch": [arch], "matchers": [], "engine": "sued", "dispatch": "sudd"}
    if slot is not None:
        doc["slot"] = slot
    doc["kernelDescriptors"] = [{
        "id": f"k-{k}", "version": "1.0", "name": k, "priority": 10 - i,
        "metadata": {"op": k, "block": 64},
        "kernel_source": {"kind": "hip", "source": "k.hip", "entry": k, "build": {}}}
        for i, k in enumerate(kernels)]
    return doc


def write_slotted_tree(root: Path, arch: str = "gfx90a") -> Path:
    """The slotted tree under ``root``; returns ``root``."""
    write_json(root / "s.kmd.json", {"id": "skmd", "version": "1.0", "name": "smd",
                                      "revision": "1.0", "fields": [
        {"name": "op", "type": "string"}, {"name": "block", "type": "int", "default_value": 64}]})
    write_json(root / "s.ued.json", ued_doc())
    write_json(root / "s.udd.json", {"id": "sudd", "version": "1.0", "name": "sd",
                                      "dispatch_symbol": "slotted_sym"})
    (root / "k.hip").write_text(HIP)
    for stem, (slot, kernels) in PACKS.items():
        write_json(root / f"{stem}.kdp.json", kdp_doc(stem, slot, kernels, arch))
    return root
