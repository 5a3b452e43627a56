"""Code objects and signatures on real hipcc output, Python and C++ readers."""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import Any

import msgpack
import pytest
from elftools.elf.elffile import ELFFile
from hip_objects import ARCHES

from ukdpack import _runtime
from ukdpack.produce import codeobject
from ukdpack.produce.codeobject import CodeObjectError

OBJECTS = Path(__file__).resolve().parents[1] / "data" / "objects"
KERNELS = ["_Z11sig_mangledtPf", "sig_empty", "sig_hidden", "sig_pointers", "sig_scalars",
           "sig_struct"]


def _arg(kind: str, size: int, offset: int) -> dict[str, Any]:
    return {"kind": kind, "size": size, "offset": offset}


PTR = "global_buffer"
VAL = "by_value"
# Written from each kernel's parameter list in data/signatures.hip (kernarg ABI:
# natural alignment, pointers 8 bytes, the struct 16 bytes aligned to 8).
EXPECTED: dict[str, list[dict[str, Any]]] = {
    "sig_pointers": [_arg(PTR, 8, 0), _arg(PTR, 8, 8), _arg(PTR, 8, 16)],
    "sig_scalars": [_arg(VAL, 1, 0), _arg(VAL, 2, 2), _arg(VAL, 4, 4), _arg(VAL, 8, 8),
                    _arg(VAL, 8, 16), _arg(PTR, 8, 24)],
    "sig_struct": [_arg(VAL, 16, 0), _arg(PTR, 8, 16)],
    "sig_empty": [],
    "sig_hidden": [_arg(VAL, 4, 0), _arg(PTR, 8, 8)],
    "_Z11sig_mangledtPf": [_arg(VAL, 2, 0), _arg(PTR, 8, 8)],
}
NAMES = {"sig_pointers": ["a", "b", "c"], "sig_scalars": ["c", "s", "i", "l", "d", "out"],
         "sig_struct": ["p", "out"], "sig_empty": [], "sig_hidden": ["n", "out"],
         "_Z11sig_mangledtPf": ["n", "out"]}


def _raw_args(data: bytes, kernel: str) -> list[dict[str, Any]]:
    """The kernel's .args straight from the note, hidden ones included."""
    elf = ELFFile(io.BytesIO(codeobject.elf_image(data)))
    for section in elf.iter_sections():
        if section["sh_type"] == "SHT_NOTE":
            for note in section.iter_notes():
                if note["n_name"] == "AMDGPU":
                    doc = msgpack.unpackb(note["n_desc"])
                    for k in doc["amdhsa.kernels"]:
                        if k[".name"] == kernel:
                            return list(k.get(".args", []))
    raise AssertionError(f"no {kernel} in the metadata")


def _bundle(entries: list[tuple[str, bytes]]) -> bytes:
    """A clang offload bundle laid out as clang writes one."""
    header = b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", len(entries))
    size = len(header) + sum(24 + len(t) for t, _ in entries)
    table, blobs, pos = b"", b"", size
    for triple, blob in entries:
        table += struct.pack("<QQQ", pos, len(blob), len(triple)) + triple.encode()
        blobs += blob
        pos += len(blob)
    return header + table + blobs


# ---------------------------------------------------------------------------
# Signatures, per arch


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("kernel", sorted(EXPECTED))
def test_signature_matches_parameter_list(signature_objects: dict[str, bytes], arch: str,
                                          kernel: str) -> None:
    sig = codeobject.read_signature(signature_objects[arch], kernel)
    assert sig == EXPECTED[kernel]
    assert all(list(a) == ["kind", "size", "offset"] for a in sig)  # key order, no name


def test_hidden_arguments_are_dropped(signature_objects: dict[str, bytes]) -> None:
    raw = _raw_args(signature_objects["gfx90a"], "sig_hidden")
    hidden = [a for a in raw if a[".value_kind"].startswith("hidden_")]
    assert hidden, "the fixture kernel must carry hidden arguments for this test to mean anything"
    assert len(codeobject.read_signature(signature_objects["gfx90a"], "sig_hidden")) == \
        len(raw) - len(hidden) == 2


def test_names_appear_only_when_the_compiler_records_them(
        signature_objects: dict[str, bytes]) -> None:
    named = signature_objects["names"]
    for kernel, expected in EXPECTED.items():
        sig = codeobject.read_signature(named, kernel)
        assert [a["name"] for a in sig] == NAMES[kernel]
        assert [{k: a[k] for k in ("kind", "size", "offset")} for a in sig] == expected
        assert all(list(a) == ["kind", "size", "offset", "name"] for a in sig)


def test_missing_symbol_lists_what_the_object_holds(signature_objects: dict[str, bytes]) -> None:
    with pytest.raises(CodeObjectError) as err:
        codeobject.read_signature(signature_objects["gfx1030"], "sig_mangled")
    msg = str(err.value)
    assert "'sig_mangled'" in msg
    assert ", ".join(KERNELS) in msg


# ---------------------------------------------------------------------------
# Kernels, targets, bundles


@pytest.mark.parametrize("arch", ARCHES)
def test_kernels_target_and_arch(signature_objects: dict[str, bytes], arch: str) -> None:
    data = signature_objects[arch]
    assert codeobject.kernels(data) == KERNELS
    assert codeobject.target(data) == f"amdgcn-amd-amdhsa--{arch}"
    assert codeobject.target_arch(data) == arch


def test_feature_suffix_is_stripped_from_the_arch(signature_objects: dict[str, bytes]) -> None:
    data = signature_objects["xnack"]
    assert codeobject.target(data) == "amdgcn-amd-amdhsa--gfx90a:xnack+"
    assert codeobject.target_arch(data) == "gfx90a"


@pytest.mark.parametrize("arch", ARCHES)
def test_python_and_cpp_agree_on_kernels(signature_objects: dict[str, bytes], arch: str) -> None:
    data = signature_objects[arch]
    image = codeobject.elf_image(data)
    # The device function helper is a defined function symbol too, but no kernel.
    assert _runtime.code_object_kernels(data) == _runtime.code_object_kernels(image) == KERNELS
    assert _runtime.code_object_has_kernel(data, "sig_empty")
    assert not _runtime.code_object_has_kernel(data, "sig_empty.kd")
    assert not _runtime.code_object_has_kernel(data, "sig_mangled")


@pytest.mark.parametrize("arch", ["gfx90a", "gfx1030"])
def test_committed_bundle_unwraps_to_the_committed_elf(arch: str) -> None:
    bundle = (OBJECTS / f"split_kv.{arch}.bundle.hsaco").read_bytes()
    bare = (OBJECTS / f"split_kv.{arch}.hsaco").read_bytes()
    assert bundle.startswith(b"__CLANG_OFFLOAD_BUNDLE__")
    assert codeobject.elf_image(bundle) == bare
    assert codeobject.elf_image(bare) is bare
    expected = ["split_kv_consume", "split_kv_produce", "split_kv_unused"]
    for data in (bundle, bare):
        assert codeobject.kernels(data) == expected
        assert _runtime.code_object_kernels(data) == expected
        assert codeobject.target_arch(data) == arch


def test_hipcc_genco_output_is_a_bundle(signature_objects: dict[str, bytes]) -> None:
    data = signature_objects["gfx940"]
    assert data.startswith(b"__CLANG_OFFLOAD_BUNDLE__")
    assert codeobject.elf_image(data).startswith(b"\x7fELF")


def test_bundle_without_amdgcn_entry_is_refused() -> None:
    data = _bundle([("host-x86_64-unknown-linux", b"")])
    with pytest.raises(CodeObjectError, match=r"no amdgcn entry.*host-x86_64-unknown-linux"):
        codeobject.elf_image(data)
    with pytest.raises(ValueError, match="no amdgcn entry"):
        _runtime.code_object_kernels(data)


def test_bundle_with_several_amdgcn_entries_is_refused() -> None:
    a = (OBJECTS / "split_kv.gfx90a.hsaco").read_bytes()
    b = (OBJECTS / "split_kv.gfx1030.hsaco").read_bytes()
    data = _bundle([("host-x86_64-unknown-linux", b""),
                    ("hipv4-amdgcn-amd-amdhsa--gfx90a", a),
                    ("hipv4-amdgcn-amd-amdhsa--gfx1030", b)])
    pattern = r"several amdgcn entries.*gfx90a.*gfx1030"
    with pytest.raises(CodeObjectError, match=pattern):
        codeobject.kernels(data)
    with pytest.raises(ValueError, match=pattern):
        _runtime.code_object_kernels(data)


def test_handmade_bundle_is_read_like_hipccs() -> None:
    bare = (OBJECTS / "split_kv.gfx90a.hsaco").read_bytes()
    data = _bundle([("host-x86_64-unknown-linux", b""), ("hip-amdgcn-amd-amdhsa--gfx90a", bare)])
    assert codeobject.elf_image(data) == bare
    assert _runtime.code_object_kernels(data) == codeobject.kernels(data)


# ---------------------------------------------------------------------------
# Bad input: refused by name, never a crash or another exception


@pytest.mark.parametrize("data, found", [
    (b"", "an empty file"),
    (b"hello, world", "12 bytes starting with 68 65 6c 6c 6f 2c 20 77"),
    (b"CCOB\x01\x00\x02\x00" + b"\0" * 40, "compressed offload bundle"),
])
def test_non_objects_are_refused_by_name(data: bytes, found: str) -> None:
    prefix = ("not a code object: expected an AMDGPU ELF, a clang offload bundle or an "
              "NVIDIA cubin, found ")
    with pytest.raises(CodeObjectError) as err:
        codeobject.kernels(data)
    assert str(err.value).startswith(prefix) and found in str(err.value)
    with pytest.raises(ValueError) as cerr:
        _runtime.code_object_kernels(data)
    assert prefix in str(cerr.value) and found in str(cerr.value)


def test_elf_for_another_machine_is_refused() -> None:
    bare = bytearray((OBJECTS / "split_kv.gfx90a.hsaco").read_bytes())
    bare[18:20] = struct.pack("<H", 62)  # EM_X86_64
    with pytest.raises(CodeObjectError, match=r"not a code object.*machine"):
        codeobject.kernels(bytes(bare))
    with pytest.raises(ValueError, match=r"not a code object.*machine 62"):
        _runtime.code_object_kernels(bytes(bare))


def test_object_without_metadata_note_is_refused() -> None:
    bare = bytearray((OBJECTS / "split_kv.gfx90a.hsaco").read_bytes())
    pos = bare.find(b"AMDGPU\0")
    bare[pos:pos + 6] = b"XMDGPU"  # the note's owner no longer matches
    with pytest.raises(CodeObjectError, match="no metadata note"):
        codeobject.kernels(bytes(bare))


def test_truncated_bundle_is_refused() -> None:
    data = (OBJECTS / "split_kv.gfx90a.bundle.hsaco").read_bytes()
    for cut in (24, 30, 40, 60, 100, 200, len(data) - 1):
        with pytest.raises(CodeObjectError):
            codeobject.elf_image(data[:cut])
        with pytest.raises(ValueError):
            _runtime.code_object_kernels(data[:cut])


def _outcome(fn: Any, data: bytes) -> object:
    try:
        return fn(data)
    except (CodeObjectError, ValueError) as e:  # the package's refusal, or the extension's
        assert str(e), "every refusal carries a message"
        return "error"


def test_every_truncation_and_byte_flip_is_handled() -> None:
    # Every prefix and a byte flip every 7 bytes of a real object: both readers
    # either answer or refuse with a message; nothing else escapes.
    bare = (OBJECTS / "split_kv.gfx1030.hsaco").read_bytes()
    cases = [bare[:n] for n in range(len(bare))]
    for i in range(0, len(bare), 7):
        flipped = bytearray(bare)
        flipped[i] ^= 0xFF
        cases.append(bytes(flipped))
    refused = 0
    for data in cases:
        py = _outcome(codeobject.kernels, data)
        _outcome(_runtime.code_object_kernels, data)
        refused += py == "error"
    assert refused > len(bare) // 2  # truncations cut the section headers off
