"""The descriptor model: one frozen dataclass per descriptor type (SPEC 2.3).

Models are built only from documents that passed their schema, so fields can be
read without re-checking their shape. ``raw`` keeps the document as written,
extension keys included, for the packer to carry through.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def id_key(descriptor_id: str) -> str:
    """The comparison key of an id: UUIDs compare case-insensitively, others verbatim."""
    return descriptor_id.lower() if _UUID.match(descriptor_id) else descriptor_id


@dataclass(frozen=True)
class Source:
    """One kernel source: a ``kernel_source`` or one entry of a ``sources`` map."""

    kind: str
    fields: Mapping[str, Any] = field(compare=False)
    json_path: str = ""

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)


@dataclass(frozen=True)
class Descriptor:
    """Fields every file-backed descriptor has."""

    file: str  # root-relative POSIX path of the file holding it
    json_path: str  # "$" for a file, "$.kernelDescriptors[i]" for an inline UKD
    id: str
    version: str
    name: str
    raw: Mapping[str, Any] = field(compare=False, repr=False)

    @functools.cached_property
    def key(self) -> str:
        return id_key(self.id)

    @functools.cached_property
    def folder(self) -> PurePosixPath:
        """Root-relative folder of the file; relative paths in it start here."""
        return PurePosixPath(self.file).parent


@dataclass(frozen=True)
class Ukd(Descriptor):
    """A kernel variant. Exactly one of ``kernel_source`` and ``sources`` is set."""

    metadata: Mapping[str, Any] = field(compare=False, default_factory=dict)
    priority: int = 0
    arch: tuple[str, ...] | None = None
    kernel_source: Source | None = None
    sources: tuple[tuple[str, Source], ...] = ()  # sorted by launch name
    inline: bool = False

    @property
    def launches(self) -> tuple[tuple[str | None, Source], ...]:
        """(launch name or None, source) for each launch, sorted by name."""
        if self.kernel_source is not None:
            return ((None, self.kernel_source),)
        return tuple((name, src) for name, src in self.sources)

    def where(self) -> str:
        """``file`` or ``file: $.kernelDescriptors[i]`` for messages."""
        return self.file if self.json_path == "$" else f"{self.file}: {self.json_path}"


@dataclass(frozen=True)
class KernelRef:
    """One element of a KDP's ``kernelDescriptors``: inline, or a standalone UKD's id."""

    json_path: str
    inline: Ukd | None = None
    ref: str | None = None


@dataclass(frozen=True)
class Kdp(Descriptor):
    arch: tuple[str, ...] = ()
    matchers: tuple[str, ...] = ()
    engine: str | None = None
    dispatch: str | None = None
    kernels: tuple[KernelRef, ...] = ()


@dataclass(frozen=True)
class Udd(Descriptor):
    dispatch_symbol: str = ""
    launches: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Ued(Descriptor):
    metadata: str = ""  # KMD id
    knobs: tuple[str, ...] = ()
    # role -> (arch or "default" -> UHD ids)
    heuristics: Mapping[str, Mapping[str, tuple[str, ...]]] = field(compare=False,
                                                                    default_factory=dict)


@dataclass(frozen=True)
class KmdField:
    name: str
    type: str
    default: Any = None
    has_default: bool = False


@dataclass(frozen=True)
class Kmd(Descriptor):
    fields: tuple[KmdField, ...] = ()


@dataclass(frozen=True)
class Umd(Descriptor):
    scope: str = ""
    match_symbol: str = ""


@dataclass(frozen=True)
class Uhd(Descriptor):
    adapter: str = ""
    artifact: str | None = None  # file shipped beside the UHD


HEURISTIC_ROLES: tuple[str, ...] = ("sort_kernel_catalog", "predict_engine",
                                    "predict_applicable_kernels")


def _sources(doc: Mapping[str, Any], base: str) -> tuple[tuple[str, Source], ...]:
    entries = doc.get("sources") or {}
    return tuple((name, Source(entries[name]["kind"], entries[name], f"{base}.sources.{name}"))
                 for name in sorted(entries))


def build_ukd(file: str, json_path: str, doc: Mapping[str, Any], inline: bool) -> Ukd:
    """A Ukd from a schema-valid UKD object."""
    ks = doc.get("kernel_source")
    arch = doc.get("arch")
    return Ukd(file=file, json_path=json_path, id=doc["id"], version=doc["version"],
               name=doc["name"], raw=doc, metadata=doc["metadata"], priority=doc["priority"],
               arch=tuple(arch) if arch is not None else None,
               kernel_source=Source(ks["kind"], ks, f"{json_path}.kernel_source") if ks else None,
               sources=_sources(doc, json_path), inline=inline)


def build(dtype: str, file: str, doc: Mapping[str, Any],
          skip_kernels: frozenset[int] = frozenset()) -> Descriptor:
    """The model of a schema-valid document of type ``dtype``; a KDP leaves out the
    kernels at ``skip_kernels`` (ones that failed their own checks)."""
    common: dict[str, Any] = {"file": file, "json_path": "$", "id": doc["id"],
                              "version": doc["version"], "name": doc["name"], "raw": doc}
    if dtype == "ukd":
        return build_ukd(file, "$", doc, inline=False)
    if dtype == "kdp":
        refs = []
        for i, item in enumerate(doc["kernelDescriptors"]):
            path = f"$.kernelDescriptors[{i}]"
            if i in skip_kernels:
                continue
            if isinstance(item, str):
                refs.append(KernelRef(path, ref=item))
            else:
                refs.append(KernelRef(path, inline=build_ukd(file, path, item, inline=True)))
        return Kdp(**common, arch=tuple(doc["arch"]), matchers=tuple(doc["matchers"]),
                   engine=doc["engine"], dispatch=doc["dispatch"], kernels=tuple(refs))
    if dtype == "udd":
        launches = doc.get("launches")
        return Udd(**common, dispatch_symbol=doc["dispatch_symbol"],
                   launches=tuple(launches) if launches is not None else None)
    if dtype == "ued":
        heuristics = {role: {arch: (v,) if isinstance(v, str) else tuple(v)
                             for arch, v in doc[role].items()}
                      for role in HEURISTIC_ROLES if role in doc}
        return Ued(**common, metadata=doc["metadata"], knobs=tuple(doc.get("knobs", ())),
                   heuristics=heuristics)
    if dtype == "kmd":
        fields = tuple(KmdField(f["name"], f["type"], f.get("default_value"),
                                "default_value" in f) for f in doc["fields"])
        return Kmd(**common, fields=fields)
    if dtype == "umd":
        return Umd(**common, scope=doc["scope"], match_symbol=doc["match_symbol"])
    if dtype == "uhd":
        body = doc.get(doc["adapter"], {})
        return Uhd(**common, adapter=doc["adapter"], artifact=body.get("artifact"))
    raise ValueError(f"unknown descriptor type {dtype!r}")
