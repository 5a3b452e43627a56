"""The pack-time runtime check: before a shard is published, the C++
runtime loads it exactly as it would at run time and builds a state manager.

Handlers come from the handler manifest (``--handlers FILE``, a JSON map
``{dispatch_symbol: [launch names]}`` generated from the consuming library's native
code) alone when one is given: it stands for the library, so a dispatch symbol the
shard uses and the manifest lacks fails the arch, named once with the manifest (at run
time the library would have no handler for it and the runtime would drop its packs).
Symbols the manifest declares and the shard does not use are fine: a library declares
every handler it has, and one arch's shard may use a few. Without a manifest, handlers
come from the UDD's ``launches``, else the stub rule of ``ukdpack-validate`` (the launch
set of the first kernel of the first pack naming the symbol), both through the
runtime's own ``stub_handlers``. Any kernel the state manager drops, and any launch
whose code fails the integrity checks, fails the arch with the runtime's own message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ukdpack import _runtime
from ukdpack._runtime import Code
from ukdpack.errors import Problem, Severity, UkdError, from_runtime


@dataclass(frozen=True)
class HandlerManifest:
    """A handler manifest as read: where it came from (for messages) and its handlers."""

    path: Path
    handlers: Mapping[str, list[str]]
    #: The line of each dispatch symbol's key in the file, for messages that point there.
    lines: Mapping[str, int] = field(default_factory=dict)

    def where(self, symbol: str) -> str:
        """``FILE:LINE`` of ``symbol``'s entry (``FILE`` alone when not found)."""
        line = self.lines.get(symbol)
        return f"{self.path}:{line}" if line else str(self.path)


def load_handler_manifest(path: Path) -> HandlerManifest:
    """``{dispatch_symbol: [launch names]}`` from ``path``; UkdError naming what is wrong
    (the runtime's reader refuses a FIFO or device unread)."""
    # Read as descriptors are: the runtime's reader, its limits and its wording.
    doc, where, why = _runtime.read_json_file(str(path))
    if why is not None:
        raise UkdError(Problem(str(path), where or "", why))
    problems = []
    if not isinstance(doc, dict):
        problems.append(Problem(str(path), "$", "expected an object {dispatch_symbol: [launch "
                                                "names]}, found " + type(doc).__name__))
        doc = {}
    out: dict[str, list[str]] = {}
    for symbol, names in doc.items():
        where = f"$[{json.dumps(symbol)}]"
        if not isinstance(names, list) or not all(
                isinstance(n, str) and _runtime.is_launch_name(n) for n in names):
            problems.append(Problem(str(path), where, "expected a list of launch names "
                                    "([] for a single-launch handler)"))
            continue
        out[symbol] = list(names)
    if problems:
        raise UkdError(problems)
    return HandlerManifest(path, out, _key_lines(path, out))


def _key_lines(path: Path, symbols: Mapping[str, object]) -> dict[str, int]:
    """The line of each symbol's key (``"symbol":``) in the manifest's text."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    lines = {}
    for symbol in symbols:
        m = re.search(re.escape(json.dumps(symbol, ensure_ascii=False)) + r"\s*:", text)
        if m:
            lines[symbol] = text.count("\n", 0, m.start()) + 1
    return lines


def check_shard(shard: Path, arch: str, manifest: HandlerManifest | None,
                threads: int = 0, archives: _runtime.ArchiveCache | None = None,
                use_index: bool = True) -> list[Problem]:
    """Every problem the runtime finds in the shard at ``shard`` for ``arch``; launch
    code is loaded through ``archives`` when given (whose entries may be checked
    already: ``ArchiveCache.check_entries``); ``use_index`` False: the descriptors are
    loaded from their JSON even where the shard has an index."""
    dset = _runtime.load_shard(str(shard), use_index=use_index)
    return set_problems(dset, arch, manifest, threads, archives)


def set_problems(dset: _runtime.DescriptorSet, arch: str, manifest: HandlerManifest | None,
                 threads: int = 0, archives: _runtime.ArchiveCache | None = None
                 ) -> list[Problem]:
    """``check_shard`` of a shard already loaded: ``dset``'s diagnostics (notes left out)
    and its ``launch_problems``."""
    problems = [from_runtime(d) for d in dset.diagnostics if d["severity"] != "note"]
    return problems + launch_problems(dset, arch, manifest, threads, archives)


@dataclass(frozen=True)
class RuntimeFinding:
    """One finding of the runtime's state manager, keyed by what it is about: one launch
    of a kernel (``kernel`` its id, ``launch`` its name, None for a single launch), a
    kernel as a whole (``whole_kernel``: a drop), or neither (``kernel`` None: a dispatch
    symbol the handler manifest lacks)."""

    problem: Problem
    kernel: str | None = None
    launch: str | None = None
    whole_kernel: bool = False


def launch_problems(dset: _runtime.DescriptorSet, arch: str,
                    manifest: HandlerManifest | None, threads: int = 0,
                    archives: _runtime.ArchiveCache | None = None) -> list[Problem]:
    """What a state manager over a loaded set finds for ``arch``: every kernel it drops
    (with a manifest: each dispatch symbol the manifest lacks, once), and every launch
    whose code fails the integrity checks (archive, digest, symbol), checked on
    ``threads`` threads (0: one per core), through ``archives`` when given."""
    return [f.problem for f in launch_findings(dset, arch, manifest, threads, archives)]


def launch_findings(dset: _runtime.DescriptorSet, arch: str,
                    manifest: HandlerManifest | None, threads: int = 0,
                    archives: _runtime.ArchiveCache | None = None) -> list[RuntimeFinding]:
    """``launch_problems``, each keyed by the kernel id and launch name it is about."""
    problems: list[RuntimeFinding] = []
    handlers = dict(manifest.handlers) if manifest else _runtime.stub_handlers(dset)
    sm = _runtime.StateManager(dset, handlers=handlers, arch=arch, archives=archives)
    dropped = sm.dropped()
    if manifest:
        problems += [RuntimeFinding(p) for p in _unhandled(dset, manifest, dropped)]
    for d in dropped:
        if manifest and d["code"] == Code.DISPATCH_UNKNOWN:
            continue  # said once per symbol above
        # A pack without a dispatch is served by nothing native by its author's choice:
        # the runtime keeps its kernels out of selection and says so, as a warning.
        severity: Severity = "warning" if d["code"] == Code.NO_DISPATCH else "error"
        reason = d["reason"]
        if manifest and d["code"] == Code.LAUNCH_SET_MISMATCH:
            # The launches the kernel is held against come from the manifest: say where.
            reason += (f" (the handler manifest {manifest.where(d['dispatch_symbol'])} "
                       "declares them; change the kernel's launches or that entry)")
        problems.append(RuntimeFinding(
            Problem(d.get("file", ""), d.get("path", ""),
                    f"the runtime drops kernel '{d['name']}' (id {d['kernel_id']}): {reason}",
                    severity, d["code"]),
            d["kernel_id"], whole_kernel=True))
    # Every launch of a kept kernel but embedded_source ones (no code object), without
    # building kept()'s dicts.
    launches = sm.packed_launches()
    # Every launch is decompressed and hashed as the runtime will load it, over all
    # cores (one call, the GIL released). Past the decompression budget, which launches
    # fail would depend on the threads' order: then the check runs again in order (in a
    # cache of its own: entries checked ahead spent the budget in their own order).
    found = sm.check_launch_codes(launches, arch, threads)
    if any(f is not None and f.get("code") == Code.DECOMPRESS_BUDGET for f in found):
        again = _runtime.StateManager(dset, handlers=handlers, arch=arch)
        found = again.check_launch_codes(launches, arch, 1)
    # One result per launch asked, in order: each finding keyed by the launch it is about.
    for (kernel_id, launch), failed in zip(launches, found, strict=True):
        if failed is not None:
            problems.append(launch_finding(failed, kernel_id, launch))
    return problems


def launch_finding(failed: Mapping[str, str], kernel_id: str, launch: str | None
                   ) -> RuntimeFinding:
    """The finding of one launch whose code the runtime refused to load (its diagnostic,
    as ``check_launch_codes`` gives it or ``RuntimeCheckError.diagnostic`` carries it),
    worded with its code first."""
    code = failed.get("code", "")
    return RuntimeFinding(Problem(failed.get("file", ""), failed.get("path", ""),
                                  f"{code}: {failed.get('message', '')}", code=code),
                          kernel_id, launch)


def _unhandled(dset: _runtime.DescriptorSet, manifest: HandlerManifest,
               dropped: list[dict[str, Any]]) -> list[Problem]:
    """One problem per dispatch symbol the shard uses and the manifest lacks, at the
    UDD naming it: the runtime's DISPATCH_UNKNOWN drops, gathered by symbol."""
    packs: dict[str, dict[str, int]] = {}  # symbol -> pack name -> kernels dropped
    for d in dropped:
        if d["code"] == Code.DISPATCH_UNKNOWN:
            by_pack = packs.setdefault(d["dispatch_symbol"], {})
            by_pack[d["pack_name"]] = by_pack.get(d["pack_name"], 0) + 1
    udd_file = {u["dispatch_symbol"]: u["file"] for u in dset.dispatches}
    launches = _runtime.stub_handlers(dset)  # what the shard's kernels launch, for the fix
    problems = []
    for symbol, by_pack in sorted(packs.items()):
        plural = "s" if len(by_pack) != 1 else ""
        names = ", ".join(f"'{name}' ({n} kernel{'s' if n != 1 else ''})"
                          for name, n in sorted(by_pack.items()))
        entry = f"{json.dumps(symbol)}: {json.dumps(launches.get(symbol, []))}"
        problems.append(Problem(
            udd_file.get(symbol, ""), "$.dispatch_symbol",
            f"dispatch symbol '{symbol}' is not in the handler manifest {manifest.path}, so "
            f"the runtime would drop pack{plural} {names} at run time: add {entry} to "
            f"{manifest.path.name} if the library handles it, else leave the pack{plural} "
            "out of the tree", code=Code.DISPATCH_UNKNOWN))
    return problems
