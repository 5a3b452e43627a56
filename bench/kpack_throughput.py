"""kpack archive throughput next to its raw bounds, on real code objects.

What it does, in one process:

1. Compiles bench/kernels/throughput.hip with hipcc for gfx90a, gfx940 and gfx1030
   under 12 define sets (UNROLL, ROUNDS, VARIANT change the generated code), so
   36 distinct real code objects (cached in build/bench-objects/).
2. Grows them to >= 200 MiB of payloads without making them trivially
   compressible: payload i is the bare ELFs of 1..12 distinct objects picked by a
   seeded RNG, in a shuffled order, each followed by a 64-byte tag derived from
   sha256(i, position). Every payload is therefore distinct. Each archive entry is
   an independent zstd frame (no dictionary, window of one payload), so what a
   frame sees is real object bytes and the ratio stays that of real objects;
   repeated content across payloads cannot help compression.
3. Measures, best of REPEATS: raw zstd-3 (serial, and in a thread pool of
   all CPUs), sha256, archive write (ArchiveWriter.add compressing serially, and
   with frames precompressed in a thread pool as the packer does; write() includes
   its fsync and rename), and archive read (the tests' Python oracle reader,
   tests/python/kpack_oracle.py; the C++ reader through ukdpack._runtime when built,
   the one the package uses) of every entry.
4. Prints the figures and the ratio of archive write time to the raw zstd bound,
   and writes them to bench/results/kpack_throughput.json.

MiB/s figures are over the uncompressed payload bytes.
Run: PYTHONPATH=python:build/<dir>/python .venv/bin/python bench/kpack_throughput.py
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import zstandard

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))

from hip_objects import CompileJob, compile_many  # noqa: E402
from kpack_oracle import Archive  # noqa: E402

from ukdpack import codeobject  # noqa: E402
from ukdpack.shard.archive import ArchiveWriter, compress_frame  # noqa: E402

SOURCE = REPO / "bench" / "kernels" / "throughput.hip"
ARCHES = ("gfx90a", "gfx940", "gfx1030")
DEFINE_SETS = [{"UNROLL": u, "ROUNDS": r, "VARIANT": v}
               for u, r, v in [(8, 8, 1), (8, 24, 2), (12, 16, 3), (16, 8, 1), (16, 24, 2),
                               (20, 12, 3), (24, 8, 1), (24, 20, 2), (28, 16, 3), (32, 8, 1),
                               (32, 24, 2), (40, 12, 3)]]
TARGET_BYTES = 200 << 20
REPEATS = 3
MiB = float(1 << 20)


def compile_objects() -> list[bytes]:
    jobs = [CompileJob(SOURCE, arch, defines=d) for arch in ARCHES for d in DEFINE_SETS]
    paths = compile_many(jobs, out_dir=REPO / "build" / "bench-objects")
    return [codeobject.elf_image(p.read_bytes()) for p in paths]


def make_payloads(objects: list[bytes], target: int, seed: int = 20240601) -> list[bytes]:
    rng = random.Random(seed)
    payloads: list[bytes] = []
    total = 0
    while total < target:
        i = len(payloads)
        picked = rng.sample(objects, rng.randint(1, 12))
        parts = []
        for pos, obj in enumerate(picked):
            tag = hashlib.sha256(f"{i}:{pos}".encode()).digest() * 2  # 64 unique bytes
            parts += [obj, tag]
        payload = b"".join(parts)
        payloads.append(payload)
        total += len(payload)
    return payloads


def best(fn: Callable[[], Any], repeats: int = REPEATS) -> tuple[float, Any]:
    """The fastest of ``repeats`` runs, and the last result."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target-mib", type=int, default=TARGET_BYTES >> 20)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" /
                        "kpack_throughput.json")
    args = parser.parse_args()

    t0 = time.perf_counter()
    objects = compile_objects()
    compile_s = time.perf_counter() - t0
    assert len(set(objects)) == len(objects), "every compile must give a distinct object"
    payloads = make_payloads(objects, args.target_mib << 20)
    total = sum(len(p) for p in payloads)
    workers = max(1, len(os.sched_getaffinity(0)))
    keys = [f"payload_{i:012x}" for i in range(len(payloads))]

    def zstd_serial() -> int:
        comp = zstandard.ZstdCompressor(level=3)
        return sum(len(comp.compress(p)) for p in payloads)

    def zstd_threaded() -> list[bytes]:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(compress_frame, payloads))

    def sha() -> list[str]:
        return [hashlib.sha256(p).hexdigest() for p in payloads]

    folder = Path(tempfile.mkdtemp(prefix="kpack-bench-"))
    path = folder / "bench_gfx90a.kpack"

    def write_serial() -> int:
        w = ArchiveWriter("bench", ["gfx90a"])
        for k, p in zip(keys, payloads, strict=True):
            w.add(k, "gfx90a", p)
        w.write(path)
        return path.stat().st_size

    def write_threaded() -> int:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            frames = list(pool.map(compress_frame, payloads))
        w = ArchiveWriter("bench", ["gfx90a"])
        for k, p, f in zip(keys, payloads, frames, strict=True):
            w.add(k, "gfx90a", p, frame=f)
        w.write(path)
        return path.stat().st_size

    def read_python() -> int:
        with Archive.open(path) as a:
            return sum(len(a.get(k, "gfx90a")) for k in keys)

    results: dict[str, dict[str, float]] = {}

    def record(name: str, seconds: float) -> None:
        results[name] = {"seconds": round(seconds, 4), "mib_per_s": round(total / MiB / seconds, 1)}

    s, compressed = best(zstd_serial)
    record("raw_zstd3_serial", s)
    s, _ = best(zstd_threaded)
    record("raw_zstd3_threaded", s)
    s, _ = best(sha)
    record("sha256", s)
    s, archive_bytes = best(write_serial)
    record("archive_write_serial", s)
    s, _ = best(write_threaded)
    record("archive_write_threaded", s)
    s, n = best(read_python)
    assert n == total
    record("archive_read_python", s)
    try:
        from ukdpack import _runtime
        cpp_archive = getattr(_runtime, "KpackArchive", None)
    except ImportError:
        cpp_archive = None
    if cpp_archive is not None:
        def read_cpp() -> int:
            a = cpp_archive(str(path))
            return sum(len(a.get(k, "gfx90a")) for k in keys)
        s, n = best(read_cpp)
        assert n == total
        record("archive_read_cpp", s)
    # Everything read back is what went in.
    with Archive.open(path) as a:
        assert all(a.get(k, "gfx90a") == p for k, p in zip(keys, payloads, strict=True))
    path.unlink()
    folder.rmdir()

    ratios = {
        "write_serial_over_raw_zstd3_serial":
            round(results["archive_write_serial"]["seconds"] /
                  results["raw_zstd3_serial"]["seconds"], 3),
        "write_threaded_over_raw_zstd3_threaded":
            round(results["archive_write_threaded"]["seconds"] /
                  results["raw_zstd3_threaded"]["seconds"], 3),
    }
    report = {
        "machine": {"cpus": workers, "python": platform.python_version(),
                    "zstandard": zstandard.__version__,
                    "libzstd": zstandard.ZSTD_VERSION, "platform": platform.platform()},
        "inputs": {
            "compiled_objects": len(objects), "arches": list(ARCHES),
            "define_sets": len(DEFINE_SETS),
            "compiled_bytes": sum(len(o) for o in objects),
            "payloads": len(payloads), "payload_bytes": total,
            "payload_mib": round(total / MiB, 1),
            "method": "each payload: 1..12 distinct compiled bare ELFs (seeded RNG), shuffled, "
                      "each followed by a unique 64-byte sha256 tag; one zstd frame per payload",
            "compile_seconds": round(compile_s, 1), "repeats": REPEATS,
        },
        "archive_bytes": archive_bytes,
        "zstd3_compression_ratio": round(total / compressed, 2),
        "results": results,
        "ratios": ratios,
    }
    for name, r in results.items():
        print(f"{name:26s} {r['mib_per_s']:9.1f} MiB/s  ({r['seconds']:.3f} s)")
    print(f"payloads: {len(payloads)} entries, {total / MiB:.1f} MiB from {len(objects)} "
          f"compiled objects; zstd-3 ratio {report['zstd3_compression_ratio']}")
    for name, value in ratios.items():
        print(f"{name}: {value}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
