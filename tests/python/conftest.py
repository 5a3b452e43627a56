"""Session fixtures: real code objects compiled once per run (cached across runs)."""

from __future__ import annotations

import pytest
from hip_objects import ARCHES, DATA, CompileJob, compile_many

SIGNATURES = DATA / "signatures.hip"


@pytest.fixture(scope="session")
def signature_objects() -> dict[str, bytes]:
    """hipcc output of data/signatures.hip: one per arch of ARCHES, plus ``names``
    (gfx90a with -fhip-kernel-arg-name) and ``xnack`` (gfx90a:xnack+)."""
    jobs = {a: CompileJob(SIGNATURES, a) for a in ARCHES}
    jobs["names"] = CompileJob(SIGNATURES, "gfx90a", flags=("-fhip-kernel-arg-name",))
    jobs["xnack"] = CompileJob(SIGNATURES, "gfx90a:xnack+")
    paths = compile_many(jobs.values())
    return {name: p.read_bytes() for name, p in zip(jobs, paths, strict=True)}
