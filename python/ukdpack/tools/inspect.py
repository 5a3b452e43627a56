"""``ukdpack inspect SHARD``: what a packed shard holds, for people (a table) and
machines (``--json``).

Engines (a slotted engine's slots in run order, each with its knobs, packs and
kernels), packs, kernels with their launches (toc key, symbol, sha256, signature)
and the code objects of the archives with their sizes, as the shard's descriptors
and the runtime's kpack reader say.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ukdpack import jsonpath
from ukdpack.authored.load import SlotCatalog
from ukdpack.authored.model import Kdp, Kmd, Udd, Ued
from ukdpack.errors import Problem, errors_only
from ukdpack.reports import print_report, report
from ukdpack.tools.shard import LIBRARY, Shard, ShardLaunch, describe_signature, load_shard
from ukdpack.words import count

#: Width of the table when stdout is no terminal (a log, a pipe): wide enough that
#: toc keys and signatures are not wrapped mid-word.
PLAIN_WIDTH = 200


@dataclass(frozen=True)
class Inspection:
    """What a shard holds, as one JSON-ready document, and the problems reading it."""

    shard: Shard
    doc: Mapping[str, Any]
    problems: tuple[Problem, ...]


def _launch(shard: Shard, ln: ShardLaunch) -> dict[str, Any]:
    out: dict[str, Any] = {"name": ln.name, "kind": ln.source.kind}
    if not ln.packed:
        out["source"] = dict(ln.source.fields)
        return out
    opened = shard.archive_of(ln)
    size = None
    if opened.archive is not None:
        for arch in (t for a in shard.arches_of(ln.member)
                     for t in shard.entry_targets(ln, opened.archive, a)):
            entry = opened.archive.entry(ln.toc_key, arch)
            if entry is not None:
                size = int(entry["original_size"])
    out.update({"archive": opened.rel, "toc_key": ln.toc_key, "symbol": ln.symbol,
                "sha256": ln.sha256, "size": size, "signature": ln.signature})
    return out


def _pack(shard: Shard, kdp: Kdp) -> dict[str, Any]:
    t = shard.tree
    ued, udd = t.ued_of(kdp), t.udd_of(kdp)
    kernels = []
    for m in t.members:
        if m.kdp.key != kdp.key:
            continue
        kernels.append({
            "id": m.ukd.id, "name": m.ukd.name, "file": m.ukd.file, "path": m.ukd.json_path,
            "version": m.ukd.version, "priority": m.ukd.priority,
            "arch": list(m.ukd.arch) if m.ukd.arch is not None else None,
            "metadata": dict(m.ukd.metadata),
            "launches": [_launch(shard, shard.launches_of(m.ukd)[name])
                         for name, _ in m.ukd.launches]})
    return {"id": kdp.id, "name": kdp.name, "file": kdp.file, "arch": list(kdp.arch),
            "engine": ued.name if ued else kdp.engine, "slot": kdp.slot,
            "dispatch_symbol": udd.dispatch_symbol if udd else None,
            "dispatch_launches": list(udd.launches) if udd and udd.launches is not None
            else None,
            "kernels": kernels}


def _slot(c: SlotCatalog) -> dict[str, Any]:
    """A slot of a slotted engine: its knob ids, the packs filling it and their kernels."""
    return {"name": c.slot.name, "knobs": list(c.slot.knob_ids),
            "packs": [k.name for k in c.kdps],
            "kernels": [{"id": m.ukd.id, "name": m.ukd.name, "pack": m.kdp.name}
                        for m in c.members]}


def _archives(shard: Shard) -> tuple[list[dict[str, Any]], list[Problem]]:
    """Every archive with its entries and users, and the problems: a library the runtime
    refuses, at each launch naming it; an archive that cannot be read, once."""
    users: dict[tuple[str, str, str], list[str]] = {}
    named: set[str] = set()
    refused: dict[str, str] = {}  # a library the runtime refuses -> why
    problems: list[Problem] = []
    for ln in shard.launches:
        if not ln.packed:
            continue
        rel, why = shard.locate_archive(ln)
        if rel is None:
            library = str(ln.source.get(LIBRARY, ""))
            problems.append(Problem(ln.ukd.file, jsonpath.key(ln.json_path, LIBRARY),
                                    f"{ln.label()}: {why}"))
            refused.setdefault(library, f"{ln.label()}: {why}")
            continue
        named.add(rel)
        archive = shard.open_archive(rel).archive
        if archive is None:
            continue
        for arch in (t for a in shard.arches_of(ln.member)
                     for t in shard.entry_targets(ln, archive, a)):
            label = ln.ukd.name + (f"/{ln.name}" if ln.name else "")
            users.setdefault((rel, ln.toc_key, arch), []).append(label)
    out: list[dict[str, Any]] = []
    for rel in sorted(set(shard.archive_files()) | named):
        opened = shard.open_archive(rel)
        a = opened.archive
        if a is None:
            out.append({"path": rel, "error": opened.error})
            problems.append(Problem(rel, "", str(opened.error)))
            continue
        entries = []
        for key, arch in opened.entries():
            entry = a.entry(key, arch)
            assert entry is not None
            entries.append({"toc_key": key, "arch": arch, "type": entry["type"],
                            "size": int(entry["original_size"]),
                            "used_by": users.get((rel, key, arch), [])})
        out.append({"path": rel, "group": a.group(), "arches": a.arches(), "scheme": a.scheme(),
                    "bytes": (shard.root / rel).stat().st_size, "entries": entries})
    listed = {o["path"] for o in out}
    out += [{"path": lib, "error": why} for lib, why in sorted(refused.items())
            if lib not in listed]
    return out, problems


def inspect(shard_path: Path, arch: str | None = None) -> Inspection:
    """Read the shard at ``shard_path`` into an inspection document."""
    shard = load_shard(shard_path, arch)
    t = shard.tree
    kdps = shard.kdps()
    engines = []
    for ued in t.of_type(Ued):
        kmd = t.kmd_of(ued)
        engines.append({"id": ued.id, "name": ued.name, "file": ued.file,
                        "metadata": kmd.name if isinstance(kmd, Kmd) else ued.metadata,
                        "knobs": list(ued.knobs),
                        "packs": [k.name for k in kdps if t.ued_of(k) is ued],
                        "slots": [_slot(c) for c in t.slot_catalogs(ued)]})
    archives, found = _archives(shard)
    problems = shard.with_runtime(list(shard.problems) + found)
    doc = {
        "shard": str(shard_path), "arch": shard.arch,
        "engines": engines,
        "dispatches": [{"id": u.id, "name": u.name, "file": u.file,
                        "dispatch_symbol": u.dispatch_symbol,
                        "launches": list(u.launches) if u.launches is not None else None}
                       for u in t.of_type(Udd)],
        "packs": [_pack(shard, k) for k in kdps],
        "archives": archives,
        "problems": [p.as_dict() for p in problems],
    }
    return Inspection(shard, doc, tuple(problems))


def _size(n: Any) -> str:
    return f"{n:,}" if isinstance(n, int) else "-"


def print_json(ins: Inspection, out: TextIO) -> None:
    """The ``--json`` report (docs/cli.md): the inspection document, ``ok`` when the
    shard read without an error."""
    fields = {k: v for k, v in ins.doc.items() if k != "problems"}
    print_report(report(not errors_only(ins.problems), ins.problems, fields), out)


def print_tables(ins: Inspection, out: TextIO) -> None:
    """The inspection as tables (box-drawn on a terminal, ASCII elsewhere): engines, then each pack's kernels and launches,
    then the archives."""
    from rich import box
    from rich.console import Console
    from rich.table import Table as RichTable
    from rich.text import Text

    # Off a terminal (a pipe, a log, CI) tables are plain ASCII with no colour codes, so
    # they read the same in any viewer and grep finds their cells.
    tty = out.isatty()

    def new_table(title: str) -> RichTable:
        return RichTable(title=Text(title), title_justify="left",
                         box=box.HEAVY_HEAD if tty else box.ASCII)

    def row(table: RichTable, *cells: str) -> None:
        # Text cells: a metadata value such as [1] must not be read as rich markup.
        table.add_row(*(Text(c) for c in cells))

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            """A reader that went away ends the command as any closed pipe does
            (``cli.main``: quietly, status 141), not with rich's own exit 1."""
            raise BrokenPipeError

    console = _Console(file=out, width=None if tty else PLAIN_WIDTH, highlight=False,
                       emoji=False, no_color=not tty, force_terminal=tty)
    doc = ins.doc
    packs: list[dict[str, Any]] = doc["packs"]
    kernels = [k for p in packs for k in p["kernels"]]
    launches = sum(len(k["launches"]) for k in kernels)
    objects = sum(len(a.get("entries", [])) for a in doc["archives"])
    archive_bytes = sum(a.get("bytes", 0) for a in doc["archives"])
    console.print(f"shard {doc['shard']}: arch {doc['arch'] or '(unknown)'}, "
                  f"{count(len(doc['engines']), 'engine')}, {count(len(packs), 'pack')}, "
                  f"{count(len(kernels), 'kernel')}, {count(launches, 'launch')}, "
                  f"{count(objects, 'code object')} ({count(archive_bytes, 'archive byte')})",
                  markup=False)

    engines = new_table("engines")
    for col in ("engine", "metadata (KMD)", "knobs", "packs", "file"):
        engines.add_column(col)
    for e in doc["engines"]:
        row(engines, e["name"], str(e["metadata"]), ", ".join(e["knobs"]),
                        ", ".join(e["packs"]), e["file"])
    console.print(engines)

    for e in doc["engines"]:
        if not e["slots"]:
            continue
        slots = new_table(f"slots of engine {e['name']}, in run order")
        for col in ("#", "slot", "knobs", "packs", "kernels"):
            slots.add_column(col, justify="right" if col == "#" else "left")
        for i, sl in enumerate(e["slots"], 1):
            row(slots, str(i), sl["name"], ", ".join(sl["knobs"]), ", ".join(sl["packs"]),
                ", ".join(k["name"] for k in sl["kernels"]) or "(none)")
        console.print(slots)

    for p in packs:
        dispatch = p["dispatch_symbol"] or "(no dispatch)"
        if p["dispatch_launches"] is not None:
            dispatch += " {" + ", ".join(p["dispatch_launches"]) + "}"
        slot = f", slot {p['slot']}" if p["slot"] is not None else ""
        table = new_table(f"pack {p['name']} ({p['file']}): engine {p['engine'] or '-'}{slot}, "
                          f"dispatch {dispatch}")
        for col in ("kernel", "prio", "metadata", "launch", "toc key", "symbol", "bytes",
                    "signature"):
            table.add_column(col, justify="right" if col in ("prio", "bytes") else "left")
        for k in p["kernels"]:
            meta = json.dumps(k["metadata"], separators=(",", ":"), sort_keys=True)
            for i, ln in enumerate(k["launches"]):
                first = i == 0
                row(table, k["name"] if first else "", str(k["priority"]) if first else "",
                              meta if first else "", ln["name"] or "-",
                              ln.get("toc_key", f"({ln['kind']})"), ln.get("symbol", "-"),
                              _size(ln.get("size")),
                              describe_signature(ln["signature"]) if "signature" in ln else "-")
        console.print(table)

    for a in doc["archives"]:
        if "error" in a:
            console.print(f"archive {a['path']}: {a['error']}", markup=False)
            continue
        table = new_table(f"archive {a['path']}: group {a['group']}, {a['scheme']}, "
                          f"{a['bytes']:,} bytes")
        for col in ("toc key", "arch", "type", "bytes", "used by"):
            table.add_column(col, justify="right" if col == "bytes" else "left")
        for e in a["entries"]:
            row(table, e["toc_key"], e["arch"], e["type"], _size(e["size"]),
                          ", ".join(e["used_by"]) or "(unclaimed)")
        console.print(table)
