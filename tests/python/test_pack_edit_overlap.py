"""An edit's repack overlaps its compiles (docs/packing.md, "An edit's compiles start
first"): a compile the cache holds no record of goes to the compile pool before any
other job is looked up, and while it runs the packs whose objects are all made are
keyed and made (or taken from the previous shard); what is published is byte for byte
a pack from scratch."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from pack_support import shard_files, slow_compiler, write_engine, write_json

from ukdpack.produce import cache as cache_module
from ukdpack.produce import compiler
from ukdpack.progress import Reporter
from ukdpack.shard import pack

ARCH = "gfx90a"
SOURCE = """#include <hip/hip_runtime.h>
#ifndef SCALE
#define SCALE 1
#endif
extern "C" __global__ void k(const float* in, float* out, unsigned n)
{ unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = in[i] * SCALE; }
"""


def _tree(root: Path, scales: tuple[int, ...]) -> Path:
    """One pack per scale, each one kernel of the same source built with that SCALE."""
    write_engine(root)
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "src" / "k.hip").write_text(SOURCE)
    for i, scale in enumerate(scales):
        ukd = {"id": f"k{i}", "version": "1.0", "name": f"k{i}", "priority": 0,
               "metadata": {"v": i}, "arch": [ARCH],
               "kernel_source": {"kind": "hip", "source": "../src/k.hip", "entry": "k",
                                 "build": {"defines": {"SCALE": scale}}}}
        write_json(root / f"p{i}" / "p.kdp.json",
                   {"id": f"kdp{i}", "version": "1.0", "name": f"p{i}", "arch": [ARCH],
                    "matchers": [], "engine": "ued", "dispatch": "udd",
                    "kernelDescriptors": [ukd]})
    return root


def _pack(root: Path, out: Path, cache: Path, hipcc: Path) -> pack.PackReport:
    opts = pack.PackOptions(source_root=root, out_root=out, arches=(ARCH,), jobs=2,
                            hipcc=str(hipcc), cache_dir=cache)
    report = pack.pack(opts, Reporter(stream=io.StringIO(), live=False))
    assert report.ok, report
    return report


@pytest.fixture
def spied(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """What the pack did, in order: each cache lookup, each compile's start and end, and
    each arch's packs made beside the compiles (``premake``)."""
    events: list[tuple[Any, ...]] = []
    lookup, run_compile = cache_module.CompileCache.lookup, compiler.run_compile
    premake = pack._Assembler.premake

    def spy_lookup(self: cache_module.CompileCache, key: str, root: Path) -> Any:
        events.append(("lookup", key))
        return lookup(self, key, root)

    def spy_compile(*args: Any, **kwargs: Any) -> Any:
        events.append(("compile<",))
        try:
            return run_compile(*args, **kwargs)
        finally:
            events.append(("compile>",))

    def spy_premake(self: pack._Assembler) -> Any:
        made = premake(self)
        events.append(("premake", self.arch, sorted(made.parts) if made else None))
        return made

    monkeypatch.setattr(cache_module.CompileCache, "lookup", spy_lookup)
    monkeypatch.setattr(compiler, "run_compile", spy_compile)
    monkeypatch.setattr(pack._Assembler, "premake", spy_premake)
    monkeypatch.setenv("HIP_PLATFORM", "amd")
    return events


def test_an_edit_compiles_unlooked_and_makes_the_other_packs_beside_it(
        tmp_path: Path, spied: list[tuple[Any, ...]]) -> None:
    hipcc, cache, out = slow_compiler(tmp_path, 1), tmp_path / "cache", tmp_path / "out"
    root = _tree(tmp_path / "t", (2, 3, 4))
    _pack(root, out, cache, hipcc)
    spied.clear()

    _tree(root, (2, 5, 4))  # pack p1 edited: one compile, the other two from the cache
    report = _pack(root, out, cache, hipcc)
    assert report.compiles == 1
    # The edit's compile had no cache record: it was never looked up, only compiled.
    assert [e[0] for e in spied].count("lookup") == 2
    assert [e[0] for e in spied].count("compile<") == 1
    # Beside the compile, the two unchanged packs were made; after it, only p1.
    premade = [e for e in spied if e[0] == "premake"]
    assert premade == [("premake", ARCH, ["kdp0", "kdp2"])]
    assert spied.index(premade[0]) < spied.index(("compile>",))

    cold = tmp_path / "cold"
    _pack(root, cold, cache, hipcc)  # a fresh out root: nothing reused
    assert shard_files(out / ARCH) == shard_files(cold / ARCH)


def test_a_pack_failing_its_edit_leaves_no_shard_after_making_the_others(
        tmp_path: Path, spied: list[tuple[Any, ...]]) -> None:
    hipcc, cache, out = slow_compiler(tmp_path, 1), tmp_path / "cache", tmp_path / "out"
    root = _tree(tmp_path / "t", (2, 3))
    _pack(root, out, cache, hipcc)
    (root / "src" / "broken.hip").write_text(SOURCE + "\nthis does not compile;\n")
    doc_path = root / "p1" / "p.kdp.json"
    doc_path.write_text(doc_path.read_text().replace("../src/k.hip", "../src/broken.hip"))
    spied.clear()

    opts = pack.PackOptions(source_root=root, out_root=out, arches=(ARCH,), jobs=2,
                            hipcc=str(hipcc), cache_dir=cache)
    report = pack.pack(opts, Reporter(stream=io.StringIO(), live=False))
    assert not report.ok and report.failed == [ARCH]
    assert [e for e in spied if e[0] == "premake"] == [("premake", ARCH, ["kdp0"])]
    # The failed arch leaves nothing: no shard, no staging, no lock.
    assert sorted(os.listdir(out)) == []


def test_an_arch_whose_objects_are_made_is_published_while_another_compiles(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An arch whose compiles end first is made and published then, not after the other
    arch's compiles: its shard is in place while the slow arch still compiles."""
    from pack_support import _hipcc_wrapper

    monkeypatch.setenv("HIP_PLATFORM", "amd")
    slow, quick = "gfx940", ARCH
    hipcc = _hipcc_wrapper(tmp_path, f'case " $* " in *--offload-arch={slow}*) sleep 3;; esac')
    root = _tree(tmp_path / "t", (2, 3))
    for i in range(2):  # each kernel for both arches
        doc = json.loads((root / f"p{i}" / "p.kdp.json").read_text())
        doc["arch"] = doc["kernelDescriptors"][0]["arch"] = [quick, slow]
        write_json(root / f"p{i}" / "p.kdp.json", doc)
    events: list[tuple[str, str, float]] = []
    run_compile, publish_shard = compiler.run_compile, pack.publish.publish

    def spy_compile(argv: list[str], *args: Any, **kwargs: Any) -> Any:
        try:
            return run_compile(argv, *args, **kwargs)
        finally:
            arch = quick if f"--offload-arch={quick}" in argv else slow
            events.append(("compiled", arch, time.monotonic()))

    def spy_publish(*args: Any, **kwargs: Any) -> Any:
        try:
            return publish_shard(*args, **kwargs)
        finally:
            arch = quick if any(str(a).endswith(quick) for a in args) else slow
            events.append(("published", arch, time.monotonic()))

    monkeypatch.setattr(compiler, "run_compile", spy_compile)
    monkeypatch.setattr(pack.publish, "publish", spy_publish)
    out = tmp_path / "out"
    opts = pack.PackOptions(source_root=root, out_root=out, arches=(quick, slow), jobs=2,
                            hipcc=str(hipcc), cache_dir=tmp_path / "cache")
    stream = io.StringIO()
    report = pack.pack(opts, Reporter(stream=stream, live=False))
    assert report.ok, stream.getvalue()
    at = {(what, arch): t for what, arch, t in events}
    assert at[("published", quick)] < at[("compiled", slow)]
    assert at[("compiled", slow)] < at[("published", slow)]
    # Told in the arches' order, each once.
    told = [line for line in stream.getvalue().splitlines() if " -> " in line]
    assert [line.split(":")[1].strip() for line in told] == [quick, slow], told

    cold = tmp_path / "cold"
    # One job: the arches made one after the other, after every compile.
    plain = pack.PackOptions(source_root=root, out_root=cold, arches=(quick, slow), jobs=1,
                             hipcc=str(hipcc), cache_dir=tmp_path / "cold-cache")
    assert pack.pack(plain, Reporter(stream=io.StringIO(), live=False)).ok
    for arch in (quick, slow):
        assert shard_files(out / arch) == shard_files(cold / arch)
