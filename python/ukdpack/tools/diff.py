"""``ukdpack diff A B``: kernels and launches added, removed and changed between two
packed shards, and the other descriptors that differ.

Kernels are matched by id (UUIDs case-insensitively, as everywhere), launches by
name, never by position: reordering ``sources`` keys changes nothing. A kernel
changes when any field it ships with changes (name, priority, metadata, arch, its
pack...) or any launch is added, removed or changed (kind, toc key, symbol,
sha256, signature, library).

A slotted engine's slots are compared by name: a slot added, removed, renamed (a slot
of A missing from B and one of B missing from A filled by the same packs), the slots
reordered, and a pack moved from one slot to another (through a rename, not moved).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ukdpack.authored.load import Member
from ukdpack.authored.model import Descriptor, Ued, Ukd
from ukdpack.errors import Problem, errors_only
from ukdpack.reports import problem_doc, report
from ukdpack.tools.shard import Shard, ShardLaunch, describe_signature, load_shard
from ukdpack.words import count

Status = Literal["added", "removed", "changed"]
SlotChange = Literal["added", "removed", "renamed", "reordered", "moved"]
#: Launch fields compared, in the order changes are listed.
LAUNCH_FIELDS = ("kind", "toc_key", "symbol", "sha256", "signature", "library")
_TYPE_NAMES = {"Kdp": "KDP", "Ukd": "UKD", "Udd": "UDD", "Ued": "UED", "Kmd": "KMD",
               "Umd": "UMD", "Uhd": "UHD"}


def _show(field: str, value: Any) -> str:
    if value is None:
        return "absent"
    if field == "signature" and isinstance(value, list):
        return describe_signature(value)
    if isinstance(value, str):
        return f"'{value}'"
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class Change:
    """One field that differs: its value in A and in B (None: absent)."""

    field: str
    a: Any
    b: Any

    def line(self) -> str:
        return f"{self.field}: {_show(self.field, self.a)} -> {_show(self.field, self.b)}"

    def as_dict(self) -> dict[str, Any]:
        return {"field": self.field, "a": self.a, "b": self.b}


@dataclass(frozen=True)
class LaunchDiff:
    name: str | None  # None: the one launch of a single-launch kernel
    status: Status
    changes: tuple[Change, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status,
                "changes": [c.as_dict() for c in self.changes]}


@dataclass(frozen=True)
class KernelDiff:
    id: str
    name: str
    pack: str  # the pack's name (in B, else in A)
    file: str
    path: str
    status: Status
    changes: tuple[Change, ...] = ()
    launches: tuple[LaunchDiff, ...] = ()

    def lines(self) -> list[str]:
        where = f"{self.file}: {self.path}" if self.path != "$" else self.file
        head = f"{self.status} kernel '{self.name}' ({self.id}) in pack '{self.pack}' ({where})"
        out = [head]
        out += [f"  {c.line()}" for c in self.changes]
        for ln in self.launches:
            label = "launch (single)" if ln.name is None else f"launch '{ln.name}'"
            if ln.status != "changed":
                out.append(f"  {label}: {ln.status}")
            out += [f"  {label}: {c.line()}" for c in ln.changes]
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "pack": self.pack, "file": self.file,
                "path": self.path, "status": self.status,
                "changes": [c.as_dict() for c in self.changes],
                "launches": [ln.as_dict() for ln in self.launches]}


@dataclass(frozen=True)
class DescriptorDiff:
    """A pack or generic descriptor (not a kernel) added, removed or changed."""

    id: str
    type: str
    name: str
    file: str
    status: Status
    fields: tuple[str, ...] = ()

    def line(self) -> str:
        fields = f": {', '.join(self.fields)}" if self.fields else ""
        return f"{self.status} {self.type} '{self.name}' ({self.file}){fields}"

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "name": self.name, "file": self.file,
                "status": self.status, "fields": list(self.fields)}


@dataclass(frozen=True)
class SlotDiff:
    """A change of a slotted engine's slots: ``a`` and ``b`` are the slot's position
    (added, removed), its names (renamed), the slot order (reordered) or the pack's
    slots (moved) in A and in B."""

    engine: str
    change: SlotChange
    slot: str | None  # the slot's name (in B, else in A); None for reordered
    a: Any = None
    b: Any = None
    pack: str | None = None  # the pack that moved

    def line(self) -> str:
        e = f"engine '{self.engine}'"
        if self.change == "added":
            return f"added slot '{self.slot}' to {e} (position {self.b})"
        if self.change == "removed":
            return f"removed slot '{self.slot}' from {e} (was at position {self.a})"
        if self.change == "renamed":
            return f"renamed slot '{self.a}' of {e} to '{self.b}'"
        if self.change == "reordered":
            return f"reordered the slots of {e}: {', '.join(self.a)} -> {', '.join(self.b)}"
        return f"moved pack '{self.pack}' of {e} from slot '{self.a}' to slot '{self.b}'"

    def as_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "change": self.change, "slot": self.slot,
                "pack": self.pack, "a": self.a, "b": self.b}


@dataclass(frozen=True)
class ShardDiff:
    a: Shard
    b: Shard
    kernels: tuple[KernelDiff, ...]
    descriptors: tuple[DescriptorDiff, ...]
    problems: tuple[Problem, ...]
    slots: tuple[SlotDiff, ...] = ()

    def count(self, status: Status) -> int:
        return sum(1 for k in self.kernels if k.status == status)

    @property
    def launches_changed(self) -> int:
        """Launches added, removed or changed within the kernels both shards hold."""
        return sum(len(k.launches) for k in self.kernels if k.status == "changed")

    @property
    def equal(self) -> bool:
        return not self.kernels and not self.descriptors and not self.slots

    def summary(self) -> str:
        return (f"{count(self.count('added'), 'kernel')} added, {self.count('removed')} removed, "
                f"{self.count('changed')} changed ({count(self.launches_changed, 'launch')} "
                "changed)")

    def lines(self) -> list[str]:
        out = [ln for k in self.kernels for ln in k.lines()]
        out += [s.line() for s in self.slots]
        out += [d.line() for d in self.descriptors]
        return out

    @property
    def ok(self) -> bool:
        """Equal, and both shards read without an error: the exit status 0."""
        return self.equal and not errors_only(self.problems)

    def as_report(self) -> dict[str, Any]:
        """The ``--json`` report (docs/cli.md): each problem also names its ``shard``,
        ``a`` or ``b``."""
        doc = report(self.ok, (), {
            "a": str(self.a.root), "b": str(self.b.root), "summary": self.summary(),
            "kernels": {s: [k.as_dict() for k in self.kernels if k.status == s]
                        for s in ("added", "removed", "changed")},
            "launches_changed": self.launches_changed,
            "slots": [s.as_dict() for s in self.slots],
            "descriptors": [d.as_dict() for d in self.descriptors]})
        doc["problems"] = [{**problem_doc(p), "shard": "a" if i < len(self.a.problems) else "b"}
                           for i, p in enumerate(self.problems)]
        return doc


def _launch_fields(ln: ShardLaunch) -> dict[str, Any]:
    if not ln.packed:  # embedded_source: the authored source is all there is
        return {"kind": ln.source.kind, "source": dict(ln.source.fields)}
    return {f: ln.source.get(f) for f in LAUNCH_FIELDS}


def _changes(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[Change, ...]:
    ordered = [*a, *(k for k in b if k not in a)]
    return tuple(Change(k, a.get(k), b.get(k)) for k in ordered if a.get(k) != b.get(k))


def _kernel_fields(m: Member) -> dict[str, Any]:
    """What a kernel ships with, launches aside; its pack by name."""
    out = {k: v for k, v in m.ukd.raw.items() if k != m.ukd.launches_key}
    out["pack"] = m.kdp.name
    return out


def _kernel(a: Member | None, b: Member | None, sa: Shard, sb: Shard) -> KernelDiff | None:
    m = b or a
    assert m is not None
    status: Status = "added" if a is None else "removed" if b is None else "changed"
    base: dict[str, Any] = {"id": m.ukd.id, "name": m.ukd.name, "pack": m.kdp.name, "file": m.ukd.file,
            "path": m.ukd.json_path}
    if a is None or b is None:
        return KernelDiff(**base, status=status)
    changes = _changes(_kernel_fields(a), _kernel_fields(b))
    la, lb = sa.launches_of(a.ukd), sb.launches_of(b.ukd)
    launches: list[LaunchDiff] = []
    for name in sorted(set(la) | set(lb), key=lambda n: n or ""):
        if name not in lb:
            launches.append(LaunchDiff(name, "removed"))
        elif name not in la:
            launches.append(LaunchDiff(name, "added"))
        elif found := _changes(_launch_fields(la[name]), _launch_fields(lb[name])):
            launches.append(LaunchDiff(name, "changed", found))
    if not changes and not launches:
        return None
    return KernelDiff(**base, status=status, changes=changes, launches=tuple(launches))


def _others(sa: Shard, sb: Shard) -> list[DescriptorDiff]:
    def index(s: Shard) -> dict[str, Descriptor]:
        return {d.key: d for d in s.tree.descriptors if not isinstance(d, Ukd)}

    da, db = index(sa), index(sb)
    out = []
    for key in [*da, *(k for k in db if k not in da)]:
        a, b = da.get(key), db.get(key)
        d = b or a
        assert d is not None
        kind = _TYPE_NAMES[type(d).__name__]
        if a is None or b is None:
            out.append(DescriptorDiff(d.id, kind, d.name, d.file,
                                      "added" if a is None else "removed"))
            continue
        # A pack's kernels are compared kernel by kernel, above.
        ra = {k: v for k, v in a.raw.items() if k != "kernelDescriptors"}
        rb = {k: v for k, v in b.raw.items() if k != "kernelDescriptors"}
        fields = [c.field for c in _changes(ra, rb)]
        if a.file != b.file:
            fields.append("file")
        if fields:
            out.append(DescriptorDiff(d.id, kind, d.name, d.file, "changed", tuple(fields)))
    return out


def _engine_slots(ued_a: Ued, ued_b: Ued, sa: Shard, sb: Shard) -> list[SlotDiff]:
    """How the slots of one engine differ from A to B."""
    name = ued_b.name
    ca, cb = sa.tree.slot_catalogs(ued_a), sb.tree.slot_catalogs(ued_b)
    names_a, names_b = [c.slot.name for c in ca], [c.slot.name for c in cb]
    # A slot of A -> its name in B: kept by name, else renamed (the same packs fill it).
    to_b = {n: n for n in names_a if n in names_b}
    packs_b = {c.slot.name: {k.key for k in c.kdps} for c in cb if c.slot.name not in to_b}
    out: list[SlotDiff] = []
    for c in ca:
        if c.slot.name in to_b:
            continue
        packs = {k.key for k in c.kdps}
        twin = next((n for n, p in packs_b.items() if packs and p == packs
                     and n not in to_b.values()), None)
        if twin is not None:
            to_b[c.slot.name] = twin
            out.append(SlotDiff(name, "renamed", twin, c.slot.name, twin))
    out += [SlotDiff(name, "removed", c.slot.name, a=c.index + 1) for c in ca
            if c.slot.name not in to_b]
    out += [SlotDiff(name, "added", c.slot.name, b=c.index + 1) for c in cb
            if c.slot.name not in to_b.values()]
    kept_a = [to_b[n] for n in names_a if n in to_b]
    if kept_a != [n for n in names_b if n in kept_a]:
        out.append(SlotDiff(name, "reordered", None, names_a, names_b))
    slot_b = {k.key: c.slot.name for c in cb for k in c.kdps}
    for c in ca:
        for k in c.kdps:
            now = slot_b.get(k.key)
            if now is not None and now != to_b.get(c.slot.name):
                out.append(SlotDiff(name, "moved", now, c.slot.name, now, pack=k.name))
    return out


def _slots(sa: Shard, sb: Shard) -> list[SlotDiff]:
    """The slot changes of every engine both shards hold."""
    engines_b = {u.key: u for u in sb.tree.of_type(Ued)}
    return [d for ua in sa.tree.of_type(Ued) if (ub := engines_b.get(ua.key)) is not None
            for d in _engine_slots(ua, ub, sa, sb)]


def diff(path_a: Path, path_b: Path) -> ShardDiff:
    """What changed from the shard at ``path_a`` to the one at ``path_b``."""
    sa, sb = load_shard(path_a), load_shard(path_b)
    ma = {m.ukd.key: m for m in sa.tree.members}
    mb = {m.ukd.key: m for m in sb.tree.members}
    kernels = []
    for key in [*ma, *(k for k in mb if k not in ma)]:
        found = _kernel(ma.get(key), mb.get(key), sa, sb)
        if found is not None:
            kernels.append(found)
    return ShardDiff(sa, sb, tuple(kernels), tuple(_others(sa, sb)),
                     sa.problems + sb.problems, tuple(_slots(sa, sb)))

