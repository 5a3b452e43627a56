"""The descriptor model: one frozen dataclass per descriptor type.

Models are built from what the C++ runtime loaded (``_runtime.DescriptorSet``),
so every field has been checked by the runtime's own reader. ``raw`` keeps the
document as written, extension keys included, for the packer to carry through; a
kernel's is read from its text when first asked (``LazyDocument``): a pack converts
the documents of the packs it makes, not of every kernel it models.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from ukdpack import _runtime
from ukdpack.authored.kinds import kind

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def id_key(descriptor_id: str) -> str:
    """The comparison key of an id: UUIDs compare case-insensitively, others verbatim."""
    if len(descriptor_id) != 36:  # the common case of a short id: no regex
        return descriptor_id
    return descriptor_id.lower() if _UUID.match(descriptor_id) else descriptor_id


def _plain(path: str) -> bool:
    """A relative path with no empty, '.' or '..' component: one ``normpath`` leaves as
    it is."""
    return (path != "" and path[0] != "/" and path[-1] != "/" and "//" not in path
            and "/./" not in f"/{path}/" and "/../" not in f"/{path}/")


def joined(descriptor_file: str, name: str) -> str:
    """Root-relative path of ``name`` written in ``descriptor_file`` (relative to that
    file's folder). A plain join: the runtime checked it stays inside the root."""
    if _plain(name) and _plain(descriptor_file):  # the common case: nothing to normalize
        folder = descriptor_file.rpartition("/")[0]
        return f"{folder}/{name}" if folder else name
    return _normalized_join(descriptor_file, name)


@functools.lru_cache(maxsize=65536)
def _normalized_join(descriptor_file: str, name: str) -> str:
    # Many kernels of a tree name the same few files: each pair is joined once.
    return posixpath.normpath(posixpath.join(posixpath.dirname(descriptor_file), name))


class ReadOnce(Mapping[str, Any]):
    """A mapping whose ``dict`` is read from the runtime when first looked into
    (``_load``), then kept (``plain``)."""

    __slots__ = ("_value",)

    def __init__(self) -> None:
        self._value: dict[str, Any] | None = None

    def _load(self) -> dict[str, Any]:
        raise NotImplementedError

    def plain(self) -> dict[str, Any]:
        """The ``dict``, read now if not yet, and kept."""
        if self._value is None:
            self._value = self._load()
        return self._value

    def __getitem__(self, key: str) -> Any:
        return self.plain()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.plain())

    def __len__(self) -> int:
        return len(self.plain())


class LazyDocument(ReadOnce):
    """A kernel's document (``Ukd.raw``) as the runtime read it: its text (its file's,
    kept alive by this), turned into Python objects when read. ``read`` reads it anew
    for one use and keeps nothing (a pack writing a kernel's packed form); the mapping
    methods and ``plain`` read it once and keep the ``dict`` (the tools, which look at a
    document field by field)."""

    __slots__ = ("_document",)

    def __init__(self, document: _runtime.Document) -> None:
        super().__init__()
        self._document = document

    def _load(self) -> dict[str, Any]:
        return self._document.value()

    def read(self) -> dict[str, Any]:
        """The document as a ``dict``: the kept one, else read now and not kept."""
        return self._value if self._value is not None else self._load()

    def __repr__(self) -> str:
        return repr(self.plain())


def plain(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """``doc`` as the ``dict`` it stands for where it is a ``LazyDocument`` (kept)."""
    return doc.plain() if isinstance(doc, LazyDocument) else doc


def read_document(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """``doc`` as a ``dict`` for one use: a ``LazyDocument`` read anew and not kept."""
    return doc.read() if isinstance(doc, LazyDocument) else doc


@dataclass(frozen=True)
class Source:
    """One kernel source: a launch's, as the runtime's ``Source`` view gives it."""

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
    """A kernel variant. Exactly one of ``kernel_source`` (a single launch) and
    ``sources`` (named launches) is set."""

    metadata: Mapping[str, Any] = field(compare=False, default_factory=dict)
    priority: int = 0
    arch: tuple[str, ...] | None = None
    kernel_source: Source | None = None
    sources: tuple[tuple[str, Source], ...] = ()  # sorted by launch name
    inline: bool = False
    #: The key of the UKD holding its launches, and that key's JSON path (the runtime's
    #: ``Kernel.launches_key`` and ``launches_path``): what the packer rewrites.
    launches_key: str = ""
    launches_path: str = ""
    #: The sha256 of the bytes ``raw`` was read from ("" when unknown): what a pack's
    #: files are keyed by in its stead (``shard/reuse.py``).
    raw_sha256: str = field(compare=False, default="")

    @property
    def launch_names(self) -> list[str]:
        """The launch names, sorted: empty for a single-launch kernel. Not cached: a cached
        value grew each kernel's instance dict (about 1 KiB a kernel with the set)."""
        return sorted(name for name, _ in self.sources)

    def file_of(self, src: Source) -> str | None:
        """Root-relative path of the file ``src`` names (None for kinds without one). The
        runtime has checked that it stays inside the root, so this is a plain join."""
        field_name = kind(src.kind).file_field
        if field_name is None:
            return None
        return joined(self.file, str(src.fields[field_name]))

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
    #: KDP 1.1: the slot of its (slotted) engine whose catalog its kernels join.
    slot: str | None = None


@dataclass(frozen=True)
class Udd(Descriptor):
    dispatch_symbol: str = ""
    launches: tuple[str, ...] | None = None


#: role -> (arch or "default" -> UHD ids): a UED's (or a slot's) heuristic role maps.
RoleMaps = Mapping[str, Mapping[str, tuple[str, ...]]]


@dataclass(frozen=True)
class Slot:
    """One slot of a slotted engine (UED 1.1 ``slots``), as the runtime parsed it: a
    position in the engine's run order whose kernel is picked from its own catalog."""

    name: str
    json_path: str  # "$.slots[i]" in the UED
    knobs: tuple[str, ...] = ()  # KMD field names
    knob_ids: tuple[str, ...] = ()  # "<slot>.<field>", the runtime's spelling
    heuristics: RoleMaps = field(compare=False, default_factory=dict)


@dataclass(frozen=True)
class Ued(Descriptor):
    metadata: str = ""  # KMD id
    knobs: tuple[str, ...] = ()
    heuristics: RoleMaps = field(compare=False, default_factory=dict)
    #: UED 1.1: the slots in run order; empty for an unslotted engine.
    slots: tuple[Slot, ...] = ()

    @property
    def slotted(self) -> bool:
        return bool(self.slots)

    def slot(self, name: str | None) -> Slot | None:
        """The slot named ``name``, or None."""
        return next((s for s in self.slots if s.name == name), None)


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
    artifact: str | None = None  # file shipped beside the UHD (tree_data, table)
    library: str | None = None   # custom_library's library, shipped the same way
    slot: str | None = None      # UHD 1.1: the slot of a slotted engine it serves

    @property
    def shipped(self) -> str | None:
        """The file shipped beside the UHD, as written: its artifact or its library."""
        return self.artifact if self.artifact is not None else self.library

    @property
    def shipped_path(self) -> str:
        """JSON path of that field, for messages."""
        return f"$.{self.adapter}.{'artifact' if self.artifact is not None else 'library'}"

    @property
    def artifact_file(self) -> str | None:
        """Root-relative path of the shipped file (the runtime checked it stays inside)."""
        return None if self.shipped is None else joined(self.file, self.shipped)


#: The generic descriptor types (everything but KDP and UKD).
GENERIC_TYPES = (Udd, Ued, Kmd, Umd, Uhd)

HEURISTIC_ROLES: tuple[str, ...] = ("sort_kernel_catalog", "predict_engine",
                                    "predict_applicable_kernels")

# The builders below take the runtime's typed view of a loaded descriptor (the
# dicts of ``_runtime.DescriptorSet``): nothing here reads descriptor JSON.


def ukd_from_runtime(k: Mapping[str, Any], inline: bool) -> Ukd:
    """A Ukd from a kernel the runtime loaded; its launches come from the runtime's
    ``Kernel`` view (the launch helpers), never from the document's keys."""
    view: _runtime.Kernel = k["view"]
    raw = k["raw"]
    if isinstance(raw, dict):  # a value built in memory: the sources share its objects
        held = raw.get(view.launches_key)
    else:  # read from text: read when a pack is made of it, not here
        raw, held = LazyDocument(raw), None
    # The single source in one call: most kernels have one, and a tree has thousands.
    one = view.single_launch_source
    single = _source(one, held) if one is not None else None
    sources = () if one is not None else tuple(
        (str(ln.name), _source(ln.source, held.get(ln.name) if isinstance(held, dict) else None))
        for ln in view.launches)
    arch = k["arch"]
    return Ukd(file=str(k["file"]), json_path=str(k["path"]), id=k["id"], version=k["version"],
               name=k["name"], raw=raw, metadata=k["metadata"], priority=k["priority"],
               arch=tuple(arch) if arch is not None else None, kernel_source=single,
               sources=sources, inline=inline, launches_key=view.launches_key,
               launches_path=view.launches_path, raw_sha256=k.get("raw_sha256") or "")


def _source(src: _runtime.Source, authored: Any) -> Source:
    """A source's model. Its fields are the object the UKD's ``raw`` holds there where
    that is a ``dict`` (the runtime reads a source's fields from that very object):
    shared, not converted a second time; else the runtime's own conversion of them."""
    fields = authored if isinstance(authored, dict) else src.fields
    return Source(src.kind, fields, src.json_path)


def _common(d: Mapping[str, Any]) -> dict[str, Any]:
    return {"file": d["file"], "json_path": "$", "id": d["id"], "version": d["version"],
            "name": d["name"], "raw": d["raw"]}


def kdp_from_runtime(p: Mapping[str, Any]) -> tuple[Kdp, list[Ukd]]:
    """A Kdp from a pack the runtime loaded, and the standalone UKDs it holds."""
    refs: list[KernelRef] = []
    standalone: list[Ukd] = []
    for k in p["kernels"]:
        if k["ref"] is None:
            refs.append(KernelRef(str(k["path"]), inline=ukd_from_runtime(k, inline=True)))
        else:
            ukd = ukd_from_runtime(k, inline=False)
            standalone.append(ukd)
            refs.append(KernelRef(str(k["ref_path"]), ref=str(k["ref"])))
    kdp = Kdp(**_common(p), arch=tuple(p["arch"]), matchers=tuple(p["matchers"]),
              engine=p["engine"], dispatch=p["dispatch"], kernels=tuple(refs), slot=p["slot"])
    return kdp, standalone


def generics_from_runtime(dset: Any) -> list[Descriptor]:
    """The generic descriptors (UDD, UED, KMD, UMD, UHD) of a loaded set."""
    out: list[Descriptor] = []
    for d in dset.dispatches:
        launches = d["launches"]
        out.append(Udd(**_common(d), dispatch_symbol=d["dispatch_symbol"],
                       launches=tuple(launches) if launches is not None else None))
    for e in dset.engines:
        slots = tuple(Slot(s["name"], s["json_path"], tuple(s["knobs"]), tuple(s["knob_ids"]),
                           _role_maps(s["heuristics"])) for s in e["slots"])
        out.append(Ued(**_common(e), metadata=e["metadata"], knobs=tuple(e["knobs"]),
                       heuristics=_role_maps(e["heuristics"]), slots=slots))
    for m in dset.metadata_schemas:
        fields = tuple(KmdField(f["name"], f["type"], f.get("default_value"),
                                "default_value" in f) for f in m["fields"])
        out.append(Kmd(**_common(m), fields=fields))
    for u in dset.matchers:
        out.append(Umd(**_common(u), scope=u["scope"], match_symbol=u["match_symbol"]))
    for h in dset.heuristics:
        out.append(Uhd(**_common(h), adapter=h["adapter"], artifact=h["artifact"],
                       library=h["library"], slot=h["slot"]))
    return out


def _role_maps(roles: Mapping[str, Mapping[str, Any]]) -> RoleMaps:
    return {role: {arch: tuple(ids) for arch, ids in table.items()}
            for role, table in roles.items()}
