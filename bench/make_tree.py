"""Synthetic authored trees of any size, for the benchmarks.

``N`` kernels over ``K`` engines, a mix of single- and multi-launch kernels; hip
kernels over ``D`` distinct translation units (each unit exports several entry
points, so many kernels share one compile); prebuilt hsaco kernels over real
objects compiled by hipcc: each object holds a global data table of about
``--object-kib`` KiB, and each copy gets its table refilled with random words (a
valid object still, only its data differs) so the archive can neither deduplicate
nor compress them trivially.

    python bench/make_tree.py OUT --kernels 1000 --engines 4 --units 40 --arches gfx90a gfx940
    python bench/make_tree.py OUT --prebuilt 2000 --object-kib 100 --arches gfx90a
    python bench/make_tree.py OUT --scale 100000 --arches gfx90a

``--scale N`` makes the scale figures' tree (``make_scale_tree``): ``N`` kernels, every
other one a prebuilt hsaco kernel over its own varied copy of a small object (4 KiB
table) and the rest ``embedded_source`` kernels, 100 kernels per KDP over 8 engines.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ENTRIES_PER_UNIT = 25  # entry points each translation unit exports
MULTI_EVERY = 5  # every 5th hip kernel is a two-launch kernel


def _id(*parts: object) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "https://ukdpack.dev/bench/" + "/".join(map(str, parts))))


def _write(path: Path, doc: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")


def hip_unit(unit: int, entries: int) -> str:
    """One translation unit: ``entries`` distinct kernels (distinct constants, so every
    unit compiles to its own object) and the produce/consume pair multi-launch kernels use."""
    lines = ["#include <hip/hip_runtime.h>", "#ifndef SCALE", "#define SCALE 1", "#endif"]
    for e in range(entries):
        lines.append(f'extern "C" __global__ void k{e}(const float* in, float* out, unsigned n) '
                     f"{{ unsigned i = blockIdx.x * blockDim.x + threadIdx.x; "
                     f"if (i < n) out[i] = in[i] * {unit + 1}.{e:02d}f * SCALE; }}")
    lines.append('extern "C" __global__ void produce(const float* in, float* ws, unsigned n) '
                 f"{{ unsigned i = threadIdx.x; if (i < n) ws[i] = in[i] + {unit}.5f; }}")
    lines.append('extern "C" __global__ void consume(const float* ws, float* out, unsigned n) '
                 "{ unsigned i = threadIdx.x; if (i < n) out[i] = ws[n - 1 - i]; }")
    return "\n".join(lines) + "\n"


def _engine(root: Path, e: int, arches: list[str]) -> None:
    folder = root / f"engine{e}"
    _write(folder / "md.kmd.json", {"id": _id("kmd", e), "version": "1.0", "name": f"md{e}",
                                    "fields": [{"name": "variant", "type": "int"},
                                               {"name": "dtype", "type": "string",
                                                "default_value": "FLOAT"}]})
    _write(folder / "engine.ued.json", {"id": _id("ued", e), "version": "1.0",
                                        "name": f"bench:engine{e}", "metadata": _id("kmd", e)})
    _write(folder / "single.udd.json", {"id": _id("udd", e, "single"), "version": "1.0",
                                        "name": f"single{e}", "dispatch_symbol": f"single{e}"})
    _write(folder / "multi.udd.json", {"id": _id("udd", e, "multi"), "version": "1.1",
                                       "name": f"multi{e}", "dispatch_symbol": f"multi{e}",
                                       "launches": ["produce", "consume"]})


def _kdp(pid: str, name: str, e: int, kind: str, kernels: list[object],
         arches: list[str]) -> dict[str, object]:
    return {"id": pid, "version": "1.0", "name": name, "arch": arches, "matchers": [],
            "engine": _id("ued", e), "dispatch": _id("udd", e, kind), "kernelDescriptors": kernels}


def make_hip_tree(root: Path, kernels: int, engines: int, units: int, arches: list[str],
                  per_pack: int = 50) -> None:
    """``kernels`` hip kernels (every ``MULTI_EVERY``-th a produce/consume pair) over
    ``units`` translation units, spread over ``engines`` engines."""
    for u in range(units):
        path = root / "src" / f"unit{u:03d}.hip"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(hip_unit(u, ENTRIES_PER_UNIT))
    for e in range(engines):
        _engine(root, e, arches)
    packs: dict[tuple[int, str], list[object]] = {}
    for k in range(kernels):
        e, u = k % engines, (k // engines) % units
        src = f"../src/unit{u:03d}.hip"
        if k % MULTI_EVERY == 0:
            ukd: dict[str, object] = {
                "id": _id("ukd", k), "version": "1.1", "name": f"multi{k}", "priority": 0,
                "metadata": {"variant": k},
                "sources": {"produce": {"kind": "hip", "source": src, "entry": "produce", "build": {}},
                            "consume": {"kind": "hip", "source": src, "entry": "consume", "build": {}}}}
            packs.setdefault((e, "multi"), []).append(ukd)
        else:
            ukd = {"id": _id("ukd", k), "version": "1.0", "name": f"single{k}", "priority": k % 7,
                   "metadata": {"variant": k},
                   "kernel_source": {"kind": "hip", "source": src,
                                     "entry": f"k{k % ENTRIES_PER_UNIT}", "build": {}}}
            packs.setdefault((e, "single"), []).append(ukd)
    for (e, kind), items in sorted(packs.items()):
        for start in range(0, len(items), per_pack):
            chunk = items[start:start + per_pack]
            n = start // per_pack
            _write(root / f"engine{e}" / f"{kind}{n:03d}.kdp.json",
                   _kdp(_id("kdp", e, kind, n), f"{kind}{e}.{n}", e, kind, chunk, arches))


def _big_unit(v: int, table_words: int) -> str:
    """A kernel that reads a ``table_words``-word global table: the table lives in the
    object's data, so objects are as large as the table and every copy can vary it."""
    rng = random.Random(v)
    words = [rng.getrandbits(32) for _ in range(table_words)]
    rows = ",\n".join(", ".join(f"0x{w:08x}u" for w in words[i:i + 12])
                      for i in range(0, len(words), 12))
    return ("#include <hip/hip_runtime.h>\n"
            f"__device__ unsigned table[{table_words}] = {{\n{rows}\n}};\n"
            'extern "C" __global__ void big(const float* in, float* out, unsigned n) {\n'
            "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"  out[i % n] = in[i % n] * float(table[(i * 2654435761u) % {table_words}u]);\n"
            "}\n")


def run_compile(argv: list[str], cwd: str | None = None) -> None:
    """One compile run directly, as the pack runs its own: with a temporary folder of its
    own (``TMPDIR``) removed after it. The HIP toolchain leaves a folder per compile in
    ``TMPDIR``, which would otherwise pile up in /tmp, thousands a full bench run."""
    with tempfile.TemporaryDirectory(prefix="ukdpack-bench-cc-") as folder:
        subprocess.run(argv, check=True, capture_output=True, cwd=cwd,
                       env=dict(os.environ, HIP_PLATFORM="amd", TMPDIR=folder))


def compile_objects(folder: Path, distinct: int, arch: str, jobs: int,
                    object_kib: int = 100) -> list[Path]:
    """``distinct`` real objects compiled by hipcc for ``arch``, each holding a table of
    about ``object_kib`` KiB (cached in ``folder``)."""
    folder.mkdir(parents=True, exist_ok=True)
    words = object_kib * 256

    def one(v: int) -> Path:
        out = folder / f"big{v:03d}.{object_kib}k.{arch}.hsaco"
        if not out.is_file():
            src = folder / f"big{v:03d}.{object_kib}k.hip"
            src.write_text(_big_unit(v, words))
            tmp = out.with_suffix(".tmp")
            run_compile(["hipcc", "--genco", f"--offload-arch={arch}", "-O3",
                         "-fuse-cuid=none", str(src), "-o", str(tmp)])
            tmp.replace(out)
        return out

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, range(distinct)))


def table_span(data: bytes) -> tuple[int, int]:
    """File offset and size of the object's ``table``, from its symbol table (``data`` may
    be hipcc's offload bundle around the ELF image)."""
    from elftools.elf.elffile import ELFFile

    from ukdpack.produce.codeobject import elf_image

    image = elf_image(data)
    base = data.index(image)
    elf = ELFFile(io.BytesIO(image))
    symtab = elf.get_section_by_name(".symtab")
    for sym in symtab.iter_symbols() if symtab is not None else []:
        if sym.name == "table":
            section = elf.get_section(sym["st_shndx"])
            return (base + section["sh_offset"] + sym["st_value"] - section["sh_addr"],
                    sym["st_size"])
    raise SystemExit("bench object without a 'table' symbol: remove bench/.work/*/objects")


def vary_object(data: bytes, span: tuple[int, int], rng: random.Random) -> bytes:
    """A copy of a compiled object with its table refilled with fresh random words: the
    same valid code object (only data changed), but no two copies share those bytes."""
    start, size = span
    return data[:start] + rng.randbytes(size) + data[start + size:]


def make_prebuilt_tree(root: Path, count: int, arch: str, objects: list[Path],
                       engines: int = 4, per_pack: int = 100, seed: int = 7) -> int:
    """``count`` single-launch hsaco kernels, each over its own varied copy of one of
    ``objects`` (see ``vary_object``). Returns the bytes written."""
    rng = random.Random(seed)
    total = 0
    for e in range(engines):
        _engine(root, e, [arch])
    packs: dict[int, list[object]] = {}
    bases = [(data, table_span(data)) for data in (o.read_bytes() for o in objects)]
    for k in range(count):
        e = k % engines
        data = vary_object(*bases[k % len(bases)], rng)
        rel = f"objects/{k // 1000:02d}/obj{k:05d}.hsaco"
        path = root / f"engine{e}" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        total += len(data)
        packs.setdefault(e, []).append({
            "id": _id("pre", k), "version": "1.0", "name": f"pre{k}", "priority": 0,
            "metadata": {"variant": k}, "arch": [arch],
            "kernel_source": {"kind": "hsaco", "file": rel, "symbol": "big"}})
    for e, items in sorted(packs.items()):
        for start in range(0, len(items), per_pack):
            n = start // per_pack
            _write(root / f"engine{e}" / f"pre{n:03d}.kdp.json",
                   _kdp(_id("kdp", e, "pre", n), f"pre{e}.{n}", e, "single",
                        items[start:start + per_pack], [arch]))
    return total


SCALE_PER_PACK = 100  # kernels per KDP in the scale tree
SCALE_ENGINES = 8
SCALE_OBJECT_KIB = 4  # small objects: 50,000 of them stay about 0.5 GB
SCALE_DISTINCT_OBJECTS = 8


def make_scale_tree(root: Path, count: int, arch: str, objects: list[Path],
                    engines: int = SCALE_ENGINES, per_pack: int = SCALE_PER_PACK,
                    seed: int = 11) -> dict[str, int]:
    """``count`` single-launch kernels over ``engines`` engines, ``per_pack`` to a KDP:
    even ones prebuilt hsaco kernels (each over its own varied copy of one of
    ``objects``, see ``vary_object``), odd ones ``embedded_source`` kernels (no code
    object: shipped as authored). Returns the kernel counts and the object bytes."""
    rng = random.Random(seed)
    for e in range(engines):
        _engine(root, e, [arch])
    bases = [(data, table_span(data)) for data in (o.read_bytes() for o in objects)]
    packs: dict[int, list[object]] = {}
    total = prebuilt = 0
    for k in range(count):
        e = k % engines
        if k % 2 == 0:
            data = vary_object(*bases[(k // 2) % len(bases)], rng)
            rel = f"objects/{k // 2000:03d}/obj{k:06d}.hsaco"
            path = root / f"engine{e}" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            total += len(data)
            prebuilt += 1
            source: dict[str, object] = {"kind": "hsaco", "file": rel, "symbol": "big"}
        else:
            source = {"kind": "embedded_source", "source_file": f"rtc/k{k % 997}.cpp",
                      "entry_point": f"k{k}"}
        packs.setdefault(e, []).append({
            "id": _id("scale", k), "version": "1.0", "name": f"s{k}", "priority": k % 7,
            "metadata": {"variant": k}, "arch": [arch], "kernel_source": source})
    for e, items in sorted(packs.items()):
        for start in range(0, len(items), per_pack):
            n = start // per_pack
            _write(root / f"engine{e}" / f"scale{n:04d}.kdp.json",
                   _kdp(_id("kdp", e, "scale", n), f"scale{e}.{n}", e, "single",
                        items[start:start + per_pack], [arch]))
    return {"kernels": count, "prebuilt": prebuilt, "embedded": count - prebuilt,
            "kdps": sum(-(-len(v) // per_pack) for v in packs.values()), "object_bytes": total}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("out", type=Path)
    p.add_argument("--kernels", type=int, default=0, help="hip kernels")
    p.add_argument("--engines", type=int, default=4)
    p.add_argument("--units", type=int, default=40, help="distinct translation units")
    p.add_argument("--prebuilt", type=int, default=0, help="prebuilt hsaco kernels")
    p.add_argument("--object-kib", type=int, default=100)
    p.add_argument("--distinct-objects", type=int, default=24)
    p.add_argument("--scale", type=int, default=0,
                   help="scale tree: half prebuilt, half embedded_source kernels")
    p.add_argument("--arches", nargs="+", default=["gfx90a"])
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = p.parse_args(argv)
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    if args.kernels:
        make_hip_tree(args.out, args.kernels, args.engines, args.units, args.arches)
    if args.prebuilt:
        objs = compile_objects(args.out.parent / ".objects", args.distinct_objects,
                               args.arches[0], args.jobs, args.object_kib)
        size = make_prebuilt_tree(args.out, args.prebuilt, args.arches[0], objs, args.engines)
        print(f"{args.prebuilt} prebuilt kernels, {size / 2**20:.1f} MiB of objects",
              file=sys.stderr)
    if args.scale:
        objs = compile_objects(args.out.parent / ".objects", SCALE_DISTINCT_OBJECTS,
                               args.arches[0], args.jobs, SCALE_OBJECT_KIB)
        made = make_scale_tree(args.out, args.scale, args.arches[0], objs)
        print(f"scale tree: {made}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
