"""Compiling HIP test sources into real code objects, cached for the run and after.

Objects land in ``build/test-objects/`` (or ``$UKDPACK_TEST_OBJECTS``) under a name
keyed by a hash of the source, the headers beside it, the arch, the defines, the
flags and ``hipcc --version``, so a rerun reuses them and any change recompiles.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
ARCHES = ("gfx90a", "gfx940", "gfx1030")
# Pinned so the bytes depend only on the inputs.
BASE_FLAGS = ("-O3", "-fuse-cuid=none")


def cache_dir() -> Path:
    """Where compiled test objects are kept between runs."""
    return Path(os.environ.get("UKDPACK_TEST_OBJECTS", REPO / "build" / "test-objects"))


def hipcc() -> str:
    """The hipcc to use: ``$UKDPACK_HIPCC``, else the one on PATH."""
    found = os.environ.get("UKDPACK_HIPCC") or shutil.which("hipcc")
    if not found:
        raise RuntimeError("hipcc not found: install it (Debian: apt-get install hipcc) "
                           "or set UKDPACK_HIPCC")
    return found


def hip_env() -> dict[str, str]:
    # An NVIDIA toolchain is installed too; without this hipcc would pick nvcc.
    return dict(os.environ, HIP_PLATFORM="amd")


@cache
def hipcc_identity(compiler: str) -> str:
    """``hipcc --version`` for the AMD platform: part of every cache key."""
    done = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                          env=hip_env(), check=False)
    # rocm_agent_enumerator may complain on stderr on a machine without a GPU.
    return done.stdout


@dataclass(frozen=True)
class CompileJob:
    """One ``hipcc --genco`` of ``source`` for ``arch``."""

    source: Path
    arch: str
    defines: Mapping[str, str | int] = field(default_factory=dict)
    flags: Sequence[str] = ()

    def command(self, compiler: str, out: Path) -> list[str]:
        defs = [f"-D{k}={v}" for k, v in sorted(self.defines.items())]
        return [compiler, "--genco", f"--offload-arch={self.arch}", *BASE_FLAGS, *defs,
                *self.flags, str(self.source), "-o", str(out)]

    def key(self, compiler: str) -> str:
        folder = self.source.parent
        headers = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                   for p in sorted(folder.iterdir()) if p.suffix in (".h", ".hpp")}
        ident = {"source": hashlib.sha256(self.source.read_bytes()).hexdigest(),
                 "headers": headers, "arch": self.arch,
                 "defines": {k: str(v) for k, v in sorted(self.defines.items())},
                 "flags": list(self.flags), "base": list(BASE_FLAGS),
                 "hipcc": hipcc_identity(compiler)}
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:20]


def compile_hip(job: CompileJob, out_dir: Path | None = None) -> Path:
    """Compiles ``job`` unless a cached object with its key exists; returns the object."""
    compiler = hipcc()
    folder = out_dir or cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{job.source.stem}.{job.arch.replace(':', '_')}.{job.key(compiler)}.hsaco"
    if out.is_file():
        return out
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    done = subprocess.run(job.command(compiler, tmp), capture_output=True, text=True,
                          env=hip_env(), check=False)
    if done.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"hipcc failed for {job.source.name} ({job.arch}):\n{done.stderr}")
    os.replace(tmp, out)  # atomic: concurrent runs never see half an object
    return out


def compile_many(jobs: Iterable[CompileJob], out_dir: Path | None = None,
                 workers: int | None = None) -> list[Path]:
    """Compiles jobs in parallel (hipcc is a subprocess); results in job order."""
    job_list = list(jobs)
    n = workers or max(1, len(os.sched_getaffinity(0)))
    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(lambda j: compile_hip(j, out_dir), job_list))


def compile_per_arch(source: Path, arches: Sequence[str] = ARCHES,
                     flags: Sequence[str] = ()) -> dict[str, bytes]:
    """The bytes hipcc gives for ``source`` on each arch."""
    paths = compile_many(CompileJob(source, a, flags=tuple(flags)) for a in arches)
    return {a: p.read_bytes() for a, p in zip(arches, paths, strict=True)}
