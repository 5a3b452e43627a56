"""What the packer knows of each kernel-source kind, in one table.

The runtime's own table (``_runtime.source_kinds()``: which field names a file,
whether a kind may be a launch of a ``sources`` map, its archive entry type,
whether an authored tree may name it) is the reader's knowledge; this table adds
what only the packer needs: the authored fields, the identity that makes a toc
key, how the launch's symbol is found, the producer, and the fields a generator
launch may override. Adding a kind touches the C++ table, this table and its
producer only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ukdpack import _runtime

#: How a kind's code object comes to be.
Producer = Literal["compile", "prebuilt", "builder", "none", "packed"]


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


@dataclass(frozen=True)
class Kind:
    """One kernel-source kind."""

    name: str
    fields: tuple[str, ...]  # authored fields besides ``kind``
    required: tuple[str, ...]  # of those, the ones a source must have
    producer: Producer
    #: What determines the code object (a toc key digests it); None: no object.
    identity: Identity | None = None
    #: The field naming the launch's symbol; None: read from the object (builder).
    symbol_field: str | None = None
    #: The field whose base name stems the toc key (else ``function``).
    stem_field: str = "function"
    #: The fields a generated launch may override (empty: it cannot be a launch).
    launch_overrides: tuple[str, ...] = ()
    #: The compiler kind the producer runs (``hip``: hipcc, ``cuda``: nvcc).
    compiler: str | None = None

    @property
    def file_field(self) -> str | None:
        """The field naming a file relative to the descriptor's folder (the runtime's)."""
        field_name: str | None = RUNTIME[self.name]["file_field"]
        return field_name

    @property
    def entry_type(self) -> str:
        """The archive entry type of its code objects."""
        return RUNTIME[self.name]["entry_type"] or "hsaco"

    @property
    def has_object(self) -> bool:
        return self.identity is not None


RUNTIME: dict[str, dict[str, Any]] = {k["name"]: k for k in _runtime.source_kinds()}

KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("hip", ("source", "entry", "build"), ("source", "entry"), "compile",
         _compiled_identity, "entry", "source", ("source", "entry", "build"), "hip"),
    Kind("cuda", ("source", "entry", "build"), ("source", "entry"), "compile",
         _compiled_identity, "entry", "source", ("source", "entry", "build"), "cuda"),
    Kind("hsaco", ("file", "symbol"), ("file", "symbol"), "prebuilt",
         _prebuilt_identity, "symbol", "file", ("file", "symbol")),
    # ``entry`` picks each launch's kernel out of one multi-kernel object.
    Kind("builder", ("module", "function", "spec", "entry", "role"),
         ("module", "function"), "builder", _builder_identity, None, "function",
         ("module", "function", "spec", "role", "entry")),
    Kind("embedded_source", ("source_file", "entry_point"), ("source_file", "entry_point"),
         "none"),
    Kind("kpack", ("library", "toc_key", "symbol", "sha256", "signature"),
         ("library", "toc_key", "symbol", "sha256", "signature"), "packed"),
)}

if set(KINDS) != set(RUNTIME):  # pragma: no cover - a kind added on one side only
    raise ImportError(f"kinds table {sorted(KINDS)} differs from the runtime's {sorted(RUNTIME)}")

#: Kinds an authored tree may name, in the table's order.
AUTHORED: tuple[str, ...] = tuple(n for n in KINDS if RUNTIME[n]["authored"])
#: Kinds whose sources produce a code object.
COMPILED: tuple[str, ...] = tuple(n for n, k in KINDS.items() if k.has_object)


def kind(name: str) -> Kind:
    """The row of ``name``; KeyError for a kind no table knows (the reader refused it)."""
    return KINDS[name]


def launch_sources(ukd: Mapping[str, Any]) -> list[tuple[str | None, Mapping[str, Any]]]:
    """(launch name or None, source) of each launch of a UKD document the packer builds
    (the generator) or rewrites (migrate, whose legacy forms the runtime refuses), sorted
    by name; a source that is not an object is left to the caller. Descriptors the runtime
    reads are never read this way: its launch helpers give their launches."""
    return [(name, src) for name, _, src in _runtime.document_launches(ukd)]
