"""A test builder: writes HIP from its spec and compiles it with hipcc.

``spec``: ``{"kernels": {name: value}}`` -> one kernel per entry that stores
``value`` (a float) into ``out[0]``.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any


def build(spec: dict[str, Any], *, arch: str) -> bytes:
    lines = ["#include <hip/hip_runtime.h>"]
    for name, value in sorted(spec["kernels"].items()):
        lines.append(f'extern "C" __global__ void {name}(float* out) {{ out[0] = {float(value)}f; }}')
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "gen.hip", Path(tmp) / "gen.hsaco"
        src.write_text("\n".join(lines) + "\n")
        env = dict(os.environ, HIP_PLATFORM="amd")
        subprocess.run([os.environ.get("UKDPACK_HIPCC", "hipcc"), "--genco",
                        f"--offload-arch={arch}", "-O3", "-fuse-cuid=none", str(src),
                        "-o", str(out)], check=True, capture_output=True, env=env)
        return out.read_bytes()


def broken(spec: dict[str, Any], *, arch: str) -> bytes:
    raise RuntimeError(f"no kernel for {arch}")


def not_bytes(spec: dict[str, Any], *, arch: str) -> str:
    return "text"


def wrong_signature(spec: dict[str, Any], arch: str) -> bytes:
    return b""
