"""Code objects and their signatures.

A code object is a bare AMDGPU ELF, a clang offload bundle holding exactly one
amdgcn entry, or an NVIDIA cubin. For AMDGPU objects kernel names, the target and
argument signatures come from the metadata note (owner ``AMDGPU``, type 32, a
msgpack document); for cubins from the ``.nv.info.<kernel>`` sections (their
``EIATTR_KPARAM_INFO`` records) and the ELF header's SM number.

Format dispatch goes through ``_READERS`` keyed by the ELF machine.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import msgpack  # type: ignore[import-untyped]

from ukdpack import _runtime
from ukdpack.errors import UkdError

ELF_MAGIC = b"\x7fELF"
BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
COMPRESSED_BUNDLE_MAGIC = b"CCOB"
EM_AMDGPU = 224
EM_CUDA = 190
NT_AMDGPU_METADATA = 32
SHT_NOTE = 7
# .nv.info records: u8 format, u8 attribute, then a 2-byte value field (unused, a byte
# or a u16 by format; records stay 4-byte aligned), or for EIFMT_SVAL a u16 size and
# that many bytes. EIATTR_KPARAM_INFO describes one kernel parameter.
_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 1, 2, 3, 4
_EIATTR_KPARAM_INFO = 0x17
_NOT_AN_OBJECT = ("not a code object: expected an AMDGPU ELF, a clang offload bundle or an "
                  "NVIDIA cubin, found")


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


@dataclass(frozen=True)
class _Section:
    name: str
    type: int
    image: bytes = field(repr=False)
    offset: int = 0
    size: int = 0

    @property
    def data(self) -> bytes:
        """The section's bytes, copied only when a reader asks: most sections (code, a
        prebuilt object's data tables) are never read."""
        return self.image[self.offset:self.offset + self.size]


@dataclass(frozen=True)
class _Elf:
    """The parts of an ELF64 little-endian image the readers need: the header's machine
    and flags, and every section with its name and bytes (each bounds-checked)."""

    machine: int
    flags: int
    sections: tuple[_Section, ...]


def _read_elf(image: bytes) -> _Elf:
    # A few struct reads instead of a general ELF library: this runs once per code
    # object of a tree, and a full parser dominated prebuilt packs (bench/README.md).
    if len(image) < 64:
        raise CodeObjectError(f"malformed ELF: {len(image)} bytes cannot hold an ELF64 header")
    if image[4] != 2 or image[5] != 1:
        raise CodeObjectError("malformed ELF: expected a 64-bit little-endian ELF "
                              f"(class {image[4]}, data {image[5]})")
    machine, = struct.unpack_from("<H", image, 18)
    shoff, = struct.unpack_from("<Q", image, 40)
    flags, = struct.unpack_from("<I", image, 48)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", image, 58)
    if shnum and shentsize < 64:
        raise CodeObjectError(f"malformed ELF: section headers of {shentsize} bytes, expected 64")
    if shoff > len(image) or shnum * shentsize > len(image) - shoff:
        raise CodeObjectError(f"malformed ELF: {shnum} section headers at byte {shoff} run "
                              f"past the end ({len(image)} bytes)")
    headers = []
    for i in range(shnum):
        name, typ, _, _, offset, size = struct.unpack_from("<IIQQQQ", image, shoff + i * shentsize)
        if typ != 8 and (offset > len(image) or size > len(image) - offset):  # 8: SHT_NOBITS
            raise CodeObjectError(f"malformed ELF: section {i} at {offset}+{size} lies outside "
                                  f"the {len(image)}-byte image")
        headers.append((name, typ, offset, size if typ != 8 else 0))
    if shnum and shstrndx >= shnum:
        raise CodeObjectError(f"malformed ELF: section name table {shstrndx} of {shnum} sections")
    names = b""
    if shnum:
        _, _, names_at, names_size = headers[shstrndx]
        names = image[names_at:names_at + names_size]

    def name_of(at: int) -> str:
        end = names.find(b"\0", at)
        if at >= len(names) or end < 0:
            raise CodeObjectError(f"malformed ELF: section name at {at} lies outside its table")
        return names[at:end].decode("utf-8", "replace")

    return _Elf(machine, flags, tuple(_Section(name_of(n), t, image, o, z)
                                      for n, t, o, z in headers))


def _notes(section: _Section) -> list[tuple[bytes, int, bytes]]:
    """(owner, type, descriptor) of every note of an SHT_NOTE section (4-byte aligned)."""
    out, data, i = [], section.data, 0
    while i + 12 <= len(data):
        namesz, descsz, typ = struct.unpack_from("<III", data, i)
        name_at = i + 12
        desc_at = name_at + (namesz + 3) // 4 * 4
        end = desc_at + (descsz + 3) // 4 * 4
        if desc_at + descsz > len(data):
            raise CodeObjectError(f"malformed ELF: a note of {section.name} runs past its section")
        out.append((data[name_at:name_at + namesz].rstrip(b"\0"), typ,
                    data[desc_at:desc_at + descsz]))
        i = end
    return out


def _field(obj: dict[Any, Any], key: str, typ: type, where: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        raise CodeObjectError(
            f"bad AMDGPU metadata: {where} field {key!r} should be {typ.__name__}, "
            f"found {type(value).__name__}")
    return value


def _parse_amdgpu_document(doc: Any) -> Metadata:
    if not isinstance(doc, dict):
        raise CodeObjectError("bad AMDGPU metadata: the document is not a map")
    target = doc.get("amdhsa.target")
    if target is not None and not isinstance(target, str):
        raise CodeObjectError("bad AMDGPU metadata: amdhsa.target is not a string")
    raw_kernels = doc.get("amdhsa.kernels", [])
    if not isinstance(raw_kernels, list):
        raise CodeObjectError("bad AMDGPU metadata: amdhsa.kernels is not a list")
    kernels: list[tuple[str, tuple[Arg, ...]]] = []
    for i, k in enumerate(raw_kernels):
        if not isinstance(k, dict):
            raise CodeObjectError(f"bad AMDGPU metadata: amdhsa.kernels[{i}] is not a map")
        name = _field(k, ".name", str, f"amdhsa.kernels[{i}]")
        raw_args = k.get(".args", [])
        if not isinstance(raw_args, list):
            raise CodeObjectError(f"bad AMDGPU metadata: kernel {name!r}: .args is not a list")
        args: list[Arg] = []
        for j, a in enumerate(raw_args):
            where = f"kernel {name!r} .args[{j}]"
            if not isinstance(a, dict):
                raise CodeObjectError(f"bad AMDGPU metadata: {where} is not a map")
            kind = _field(a, ".value_kind", str, where)
            if kind.startswith("hidden_"):
                continue
            arg_name = a.get(".name")
            args.append(Arg(kind, _field(a, ".size", int, where), _field(a, ".offset", int, where),
                            arg_name if isinstance(arg_name, str) else None))
        kernels.append((name, tuple(args)))
    return Metadata(target, tuple(kernels))


@lru_cache(maxsize=256)
def note_metadata(desc: bytes) -> Metadata:
    """The metadata an AMDGPU metadata note's descriptor (a msgpack document) holds.
    Cached by the note: copies of one object differ in their data, not their notes."""
    try:
        doc = msgpack.unpackb(desc, raw=False, strict_map_key=False)
    except (ValueError, TypeError, OverflowError, msgpack.UnpackException) as e:
        # unhashable map keys surface as TypeError
        raise CodeObjectError(f"bad AMDGPU metadata: not a msgpack document ({e})") from e
    return _parse_amdgpu_document(doc)


def _amdgpu_metadata(elf: _Elf) -> Metadata:
    for section in elf.sections:
        if section.type != SHT_NOTE:
            continue
        for owner, typ, desc in _notes(section):
            if owner != b"AMDGPU" or typ != NT_AMDGPU_METADATA:
                continue
            return note_metadata(desc)
    raise CodeObjectError(
        "AMDGPU ELF has no metadata note (owner AMDGPU, type 32); code object v2 "
        "and older are not supported: rebuild with a current compiler")


def _kparams(section_name: str, data: bytes) -> tuple[Arg, ...]:
    """The parameters an ``.nv.info.<kernel>`` section records, in ordinal order. CUDA
    passes every parameter by value (a pointer is an 8-byte value), so each is a
    ``by_value`` argument; the records carry no names."""
    params: list[tuple[int, Arg]] = []
    i = 0
    while i < len(data):
        if i + 2 > len(data):
            raise CodeObjectError(f"malformed cubin: {section_name} ends inside a record")
        fmt, attr = data[i], data[i + 1]
        if fmt in (_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL):
            i += 4
            continue
        if fmt != _EIFMT_SVAL or i + 4 > len(data):
            raise CodeObjectError(f"malformed cubin: {section_name} holds a record of "
                                  f"unknown format {fmt} at byte {i}")
        (size,) = struct.unpack_from("<H", data, i + 2)
        payload = data[i + 4:i + 4 + size]
        if len(payload) != size:
            raise CodeObjectError(f"malformed cubin: a record of {section_name} runs past "
                                  "its section")
        i += 4 + size
        if attr == _EIATTR_KPARAM_INFO:
            if size < 12:
                raise CodeObjectError(f"malformed cubin: a parameter record of "
                                      f"{section_name} holds {size} bytes, expected 12")
            _, ordinal, offset, flags = struct.unpack_from("<IHHI", payload)
            params.append((ordinal, Arg("by_value", (flags >> 18) & 0x3FFF, offset, None)))
    params.sort(key=lambda p: p[0])
    if [o for o, _ in params] != list(range(len(params))):
        raise CodeObjectError(f"malformed cubin: {section_name} does not number its "
                              "parameters 0..n-1")
    return tuple(a for _, a in params)


def _cuda_metadata(elf: _Elf) -> Metadata:
    """Kernels and signatures of a cubin; the target is ``nvptx64-nvidia-cuda--sm_<NN>``,
    the SM number taken from bits 8-15 of the ELF header's flags."""
    sm = (elf.flags >> 8) & 0xFF
    kernels: dict[str, tuple[Arg, ...]] = {}
    for section in elf.sections:
        if section.name.startswith(".nv.info."):
            kernels[section.name[len(".nv.info."):]] = _kparams(section.name, section.data)
        elif section.name.startswith(".text."):
            kernels.setdefault(section.name[len(".text."):], ())
    return Metadata(f"nvptx64-nvidia-cuda--sm_{sm}", tuple(sorted(kernels.items())))


# ELF machine -> metadata reader.
_READERS: dict[int, Callable[[_Elf], Metadata]] = {EM_AMDGPU: _amdgpu_metadata,
                                                   EM_CUDA: _cuda_metadata}


@lru_cache(maxsize=64)
def metadata(data: bytes) -> Metadata:
    """The parsed metadata of a code object (cached: the packer asks several questions)."""
    elf = _read_elf(elf_image(data))
    reader = _READERS.get(elf.machine)
    if reader is None:
        raise CodeObjectError(f"{_NOT_AN_OBJECT} an ELF for machine {elf.machine}")
    return reader(elf)



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
