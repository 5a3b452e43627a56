"""A device compile's command line: the part that keys the cache (``key_argv``) and the
whole of it (``rerun_argv``). Plain strings and the built-in modules only: the early
start (early_compiles.py) forms command lines before the packer is imported.

Flags are pinned so the object depends only on the inputs (hip: ``-fuse-cuid=none`` and
the root's absolute path mapped away), with ``-O3`` unless the build's own flags say
otherwise (they come later on the command line and win).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

#: How a plain clang driver (``--hipcc clang++-19``) makes one device code object, as
#: hipcc's ``--genco`` does: no host side, no offload bundle, no ROCm device libraries
#: (a kernel uses compiler builtins), code object v6 (the one generic targets need).
CLANG_DEVICE_FLAGS = ("-x", "hip", "--cuda-device-only", "--no-gpu-bundle-output",
                      "-nogpulib", "-mcode-object-version=6")


def _define(name: str, value: Any) -> str:
    if isinstance(value, bool):
        value = int(value)
    return f"-D{name}={value}"


def pinned(kind: str, arch: str, driver: str = "") -> list[str]:
    """The flags every compile of ``kind`` for ``arch`` starts with."""
    if kind == "cuda":
        return ["-cubin", f"-arch={arch}", "-O3"]
    if driver == "clang":
        return ["-c", *CLANG_DEVICE_FLAGS, f"--offload-arch={arch}", "-O3", "-fuse-cuid=none"]
    return ["--genco", f"--offload-arch={arch}", "-O3", "-fuse-cuid=none"]


def key_argv(kind: str, build: Mapping[str, Any], arch: str, driver: str = "") -> list[str]:
    """What of the command line determines the object, without any path in it.
    ``arch`` is the compile's target ID (an arch, a generic family, ``gfx90a:xnack+``)."""
    defines = [_define(k, v) for k, v in sorted((build.get("defines") or {}).items())]
    flags: Sequence[str] = build.get("flags") or []
    return [*pinned(kind, arch, driver), *defines, *flags]


def rerun_argv(program: str, kind: str, driver: str, keyed: Sequence[str], source: str,
               output: str, depfile: str, root: str) -> list[str]:
    """The compile by ``program`` (a compiler of ``kind`` and ``driver``) whose path-free
    part is ``keyed`` (what key_argv gave)."""
    argv = [program, *keyed]
    if kind == "hip":
        argv.insert(len(pinned("hip", "", driver)) + 1, f"-ffile-prefix-map={root}=.")
    return [*argv, "-MD", "-MF", depfile, "-o", output, source]
