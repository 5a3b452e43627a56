"""The pack-time runtime check (SPEC 9.3): before a shard is published, the C++
runtime loads it exactly as it would at run time and builds a state manager.

Handlers come from, in order: the handler manifest (``--handlers FILE``, a JSON
map ``{dispatch_symbol: [launch names]}`` generated from the consuming library's
native code), else the UDD's ``launches``, else the stub rule of
``ukdpack-validate`` (the launch set of the first kernel of the first pack naming
the symbol) — the latter two through the runtime's own ``stub_handlers``. Any
kernel the state manager drops, and any launch whose code fails the integrity
checks, fails the arch with the runtime's own message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from ukdpack import _runtime
from ukdpack.errors import Problem, Severity, UkdError, from_runtime


def load_handler_manifest(path: Path) -> dict[str, list[str]]:
    """``{dispatch_symbol: [launch names]}`` from ``path``; UkdError naming what is wrong."""
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
    return out


def check_shard(shard: Path, arch: str, manifest: Mapping[str, list[str]] | None
                ) -> list[Problem]:
    """Every problem the runtime finds in the shard at ``shard`` for ``arch``."""
    dset = _runtime.load_shard(str(shard))
    problems = [from_runtime(d) for d in dset.diagnostics if d["severity"] != "note"]
    return problems + launch_problems(dset, arch, manifest)


def launch_problems(dset: _runtime.DescriptorSet, arch: str,
                    manifest: Mapping[str, list[str]] | None) -> list[Problem]:
    """What a state manager over a loaded set finds for ``arch``: every kernel it drops,
    and every launch whose code fails the integrity checks (archive, digest, symbol)."""
    problems: list[Problem] = []
    handlers = dict(_runtime.stub_handlers(dset))
    if manifest:
        handlers.update(manifest)
    sm = _runtime.StateManager(dset, handlers=handlers, arch=arch)
    for d in sm.dropped():
        # A pack without a dispatch is served by nothing native by its author's choice:
        # the runtime keeps its kernels out of selection and says so, as a warning.
        severity: Severity = "warning" if d["code"] == "NO_DISPATCH" else "error"
        problems.append(Problem(d.get("file", ""), d.get("path", ""),
                                f"the runtime drops kernel '{d['name']}': {d['reason']}",
                                severity, d["code"]))
    for k in sm.kept():
        if not k["packed"]:
            continue  # an embedded_source kernel ships no code object
        for launch in k["launches"] or [None]:
            try:
                sm.load_launch_code(k["kernel_id"], launch, arch)
            except _runtime.RuntimeCheckError as e:
                d = e.diagnostic
                problems.append(Problem(d.get("file", ""), d.get("path", ""),
                                        f"{d.get('code', '')}: {d.get('message', '')}",
                                        code=d.get("code", "")))
    return problems
