"""Code objects and their signatures, as the runtime reads them.

A code object is a bare AMDGPU ELF, a clang offload bundle holding exactly one
amdgcn entry, or an NVIDIA cubin. The runtime's reader (``cpp/src/archive/codeobject.cpp``,
the one ELF and metadata reader) finds its kernels, target and argument signatures:
for AMDGPU objects from the metadata note (owner ``AMDGPU``, type 32, a msgpack
document), for cubins from the ``.nv.info.<kernel>`` sections and the ELF header's
SM number. This module gives the packer its answers as frozen, cacheable values.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ukdpack import _runtime
from ukdpack.errors import UkdError


class CodeObjectError(UkdError):
    """Bytes that are no code object, or a code object without what was asked for."""

    code = _runtime.Code.CODE_OBJECT


@dataclass(frozen=True)
class Arg:
    """One explicit kernel argument as the metadata records it."""

    kind: str
    size: int
    offset: int
    name: str | None


@dataclass(frozen=True)
class Metadata:
    """What ukdpack reads from a code object's metadata; immutable so it can be cached."""

    target: str | None
    kernels: tuple[tuple[str, tuple[Arg, ...]], ...]


def _metadata(read: _runtime.MetadataRow) -> Metadata:
    target, kernels = read
    return Metadata(target, tuple((name, tuple(Arg(*a) for a in args)) for name, args in kernels))


def elf_image(data: bytes) -> bytes:
    """The ELF of a code object: all of ``data``, or the one amdgcn entry of a bundle. The
    runtime's reader decides (one unwrapping of offload bundles, in C++)."""
    try:
        offset, size = _runtime.code_object_elf_span(data)
    except ValueError as e:
        raise CodeObjectError(str(e)) from None
    return data if offset == 0 and size == len(data) else data[offset:offset + size]


def check_target(data: bytes, arch: str = "") -> None:
    """Refuse an AMDGPU object whose ELF header (e_flags) and metadata note name different
    processors, or (with ``arch``) that does not run on ``arch``: the runtime's one check,
    which the loader applies to every archive entry too."""
    try:
        _runtime.check_code_object_target(data, arch)
    except ValueError as e:
        raise CodeObjectError(str(e)) from None


@lru_cache(maxsize=256)
def note_metadata(desc: bytes) -> Metadata:
    """The metadata an AMDGPU metadata note's descriptor (a msgpack document) holds.
    Cached by the note: copies of one object differ in their data, not their notes."""
    try:
        return _metadata(_runtime.amdgpu_note_metadata(desc))
    except ValueError as e:
        raise CodeObjectError(str(e)) from None


@lru_cache(maxsize=64)
def metadata(data: bytes) -> Metadata:
    """The parsed metadata of a code object (cached: the packer asks several questions)."""
    try:
        return _metadata(_runtime.code_object_metadata(data))
    except ValueError as e:
        raise CodeObjectError(str(e)) from None
def kernels(data: bytes) -> list[str]:
    """Sorted names of the kernels the code object's metadata lists."""
    return kernels_of(metadata(data))


def kernels_of(meta: Metadata) -> list[str]:
    """Sorted names of the kernels ``meta`` lists."""
    return sorted(name for name, _ in meta.kernels)


def target(data: bytes) -> str:
    """The ``amdhsa.target`` string, e.g. ``amdgcn-amd-amdhsa--gfx90a:xnack-``."""
    return _target_of(metadata(data))


def _target_of(meta: Metadata) -> str:
    if meta.target is None:
        raise CodeObjectError("AMDGPU metadata has no amdhsa.target")
    return meta.target


def target_arch(data: bytes) -> str:
    """The processor the object is built for, bare (``gfx90a``), feature suffixes stripped."""
    return target_arch_of(metadata(data))


def target_arch_of(meta: Metadata) -> str:
    """``target_arch`` of an object whose metadata is ``meta``."""
    full = _target_of(meta)
    processor = full.rpartition("--")[2] if "--" in full else full.rpartition("-")[2]
    if not processor:
        raise CodeObjectError(f"amdhsa.target {full!r} names no processor")
    return str(_runtime.bare_arch(processor))


def target_id(data: bytes) -> str:
    """The target ID the object is built for, features in name order (``gfx90a:xnack+``,
    ``gfx11-generic``); an object that leaves a feature "any" names none of it."""
    return target_id_of(metadata(data))


def target_id_of(meta: Metadata) -> str:
    """``target_id`` of an object whose metadata is ``meta``."""
    full = _target_of(meta)
    named = full.rpartition("--")[2] if "--" in full else full.rpartition("-")[2]
    canonical = _runtime.canonical_target_id(named)
    if canonical is None:
        raise CodeObjectError(f"amdhsa.target {full!r} names no target ID: "
                              f"{_runtime.target_id_problem(named)}")
    return str(canonical)


def read_signature(data: bytes, symbol: str) -> list[dict[str, Any]]:
    """The explicit arguments of kernel ``symbol``: ``{kind, size, offset[, name]}`` in order."""
    return signature_of(metadata(data), symbol)


def signature_of(meta: Metadata, symbol: str) -> list[dict[str, Any]]:
    """``read_signature`` of an object whose metadata is ``meta``."""
    for name, args in meta.kernels:
        if name == symbol:
            out: list[dict[str, Any]] = []
            for a in args:
                entry: dict[str, Any] = {"kind": a.kind, "size": a.size, "offset": a.offset}
                if a.name is not None:
                    entry["name"] = a.name
                out.append(entry)
            return out
    held = ", ".join(kernels_of(meta)) or "no kernels"
    raise CodeObjectError(f"code object has no kernel {symbol!r}; it holds: {held}")
