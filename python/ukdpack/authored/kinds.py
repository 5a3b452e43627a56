"""What the packer knows of each kernel-source kind, in one table.

The table is the runtime's (``_runtime.source_kinds()``, ``sourceKinds()`` in
cpp/src/model/descriptors.cpp): each kind's fields and which are required, the field
that names a file, whether it may be a launch of a ``sources`` map, its archive
entry type, its producer, whether it is the packed form, and which field names
the launch's symbol. This module only adds what the packer derives from a
producer: the identity that makes a toc key. Adding a kind touches the C++ table
and its producer only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ukdpack import _runtime

#: How a kind's code object comes to be.
Producer = Literal["compile", "prebuilt", "module", "none", "packed"]
#: How the reader reads a field.
FieldType = Literal["string", "relative_path", "object", "build", "sha256", "signature",
                    "target_digests"]


def normalized_build(build: Mapping[str, Any] | None) -> dict[str, Any]:
    """``{}`` and ``{"defines": {}, "flags": []}`` are the same compile."""
    build = build or {}
    out: dict[str, Any] = {"defines": dict(sorted((build.get("defines") or {}).items())),
                           "flags": list(build.get("flags") or [])}
    if build.get("generic") is True:  # only when asked: other builds keep their toc keys
        out["generic"] = True
    return out


def _compiled_identity(kind: str, fields: Mapping[str, Any], rel: str | None) -> dict[str, Any]:
    return {"kind": kind, "source": rel, "build": normalized_build(fields.get("build"))}


def _prebuilt_identity(kind: str, fields: Mapping[str, Any], rel: str | None) -> dict[str, Any]:
    return {"kind": kind, "file": rel}


def _builder_identity(kind: str, fields: Mapping[str, Any], rel: str | None) -> dict[str, Any]:
    return {"kind": kind, "module": fields["module"], "function": fields["function"],
            "spec": fields["spec"]}


Identity = Callable[[str, Mapping[str, Any], "str | None"], dict[str, Any]]

#: What determines the code object of each producer's kinds (a toc key digests it).
_IDENTITY: dict[str, Identity] = {"compile": _compiled_identity, "prebuilt": _prebuilt_identity,
                                  "module": _builder_identity}


@dataclass(frozen=True)
class Field:
    """One field of a kind, as the reader reads it."""

    name: str
    type: FieldType
    required: bool


@dataclass(frozen=True)
class Kind:
    """One kernel-source kind: a row of the runtime's table."""

    name: str
    field_rows: tuple[Field, ...]  # in the reader's order, ``kind`` aside
    #: The field naming a file relative to the descriptor's folder; None: no file.
    file_field: str | None
    #: How messages call that file ("source", "prebuilt object").
    file_what: str
    #: May be a launch of a ``sources`` map.
    launchable: bool
    #: The archive entry type of its code objects; None: it has none of its own.
    runtime_entry_type: str | None
    #: An authored tree may name it (the packed form is the packer's).
    authored: bool
    producer: Producer
    #: The packed form: an archive member named by library, toc key and digest.
    packed: bool
    #: The field naming the launch's symbol; None: read from the object (builder).
    symbol_field: str | None
    #: The field whose base name stems the toc key.
    stem_field: str
    #: The compiler a ``compile`` producer runs (``hip``: hipcc, ``cuda``: nvcc).
    compiler: str | None

    @property
    def fields(self) -> tuple[str, ...]:
        """Names of its fields besides ``kind``, in the reader's order."""
        return tuple(f.name for f in self.field_rows)

    @property
    def required(self) -> tuple[str, ...]:
        """The fields a source of this kind must have."""
        return tuple(f.name for f in self.field_rows if f.required)

    @property
    def identity(self) -> Identity | None:
        """What determines the code object (a toc key digests it); None: no object."""
        return _IDENTITY.get(self.producer)

    @property
    def has_object(self) -> bool:
        """Whether its sources produce a code object."""
        return self.identity is not None

    @property
    def entry_type(self) -> str:
        """The archive entry type of its code objects (hsaco for a builder's too)."""
        return self.runtime_entry_type or "hsaco"


def _row(r: _runtime.SourceKindRow) -> Kind:
    return Kind(r["name"], tuple(Field(f["name"], f["type"], f["required"]) for f in r["fields"]),
                r["file_field"], r["file_what"], r["launchable"], r["entry_type"], r["authored"],
                r["producer"], r["packed"], r["symbol_field"], r["stem_field"], r["compiler"])


KINDS: dict[str, Kind] = {k.name: k for k in map(_row, _runtime.source_kinds())}

#: Kinds an authored tree may name, in the table's order.
AUTHORED: tuple[str, ...] = tuple(n for n, k in KINDS.items() if k.authored)
#: Kinds whose sources produce a code object.
COMPILED: tuple[str, ...] = tuple(n for n, k in KINDS.items() if k.has_object)
#: The packed form's kind (what the packer writes every code object as).
PACKED: str = next(n for n, k in KINDS.items() if k.packed)


def of_producer(producer: Producer) -> tuple[str, ...]:
    """The kinds ``producer`` makes the code objects of, in the table's order."""
    return tuple(n for n, k in KINDS.items() if k.producer == producer)


def kind(name: str) -> Kind:
    """The row of ``name``; KeyError for a kind no table knows (the reader refused it)."""
    return KINDS[name]


def launch_sources(ukd: Mapping[str, Any]) -> list[tuple[str | None, Mapping[str, Any]]]:
    """(launch name or None, source) of each launch of a UKD document the packer builds
    (the generator) or rewrites (migrate, whose legacy forms the runtime refuses), sorted
    by name; a source that is not an object is left to the caller. Descriptors the runtime
    reads are never read this way: its launch helpers give their launches."""
    return [(name, src) for name, _, src in _runtime.document_launches(ukd)]
