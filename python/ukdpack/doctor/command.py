"""The ``ukdpack doctor`` subcommand: one line per check, or a JSON report.

Exit 0 when everything a pack needs is there (the checks marked required: the
extension, hipcc, a writable compile cache, and DVC when the root's DVC outputs are
not all present), 1 otherwise. Optional tools that are missing are noted, never
fatal.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ukdpack.doctor.checks import Check
    from ukdpack.errors import Problem

FORMAT_VERSION = 1


def problems(checks: Sequence[Check]) -> list[Problem]:
    """One problem per check that is not ok: an error when a pack needs it, else a note."""
    from ukdpack.errors import Problem

    out = []
    for c in checks:
        if c.ok:
            continue
        hint = f"; {c.hint}" if c.hint else ""
        out.append(Problem(c.path or "", "", f"{c.name}: {c.summary}{hint}",
                           "error" if c.required else "note",
                           f"DOCTOR_{c.name.upper()}_{c.status.upper()}"))
    return out


def line(c: Check) -> str:
    """``ok       hipcc      /usr/bin/hipcc: HIP 5.2 ...`` or ``missing  ... — how``."""
    optional = "" if c.required else " (optional)"
    text = f"{c.status:<8} {c.name + optional:<19} {c.summary}"
    return text if c.ok or not c.hint else f"{text} — {c.hint}"


def report(checks: Sequence[Check]) -> dict[str, Any]:
    """The ``--json`` report."""
    return {"format_version": FORMAT_VERSION, "ok": all(c.ok for c in checks if c.required),
            "problems": [p.as_dict() for p in problems(checks)],
            "checks": [c.as_dict() for c in checks]}


def cmd_doctor(args: argparse.Namespace) -> int:
    """Run every check; print the lines (or the report); exit 0 when a pack can run."""
    from ukdpack import __version__
    from ukdpack.doctor.checks import run_checks
    from ukdpack.errors import UsageError

    root = Path(args.source_root)
    if not root.is_dir():
        raise UsageError(f"--source-root {root}: expected a folder (a descriptor root)")
    checks = run_checks(root, args.hipcc, args.nvcc,
                        Path(args.cache_dir) if args.cache_dir else None)
    ok = all(c.ok for c in checks if c.required)
    if args.json:
        print(json.dumps(report(checks), indent=2))
        return 0 if ok else 1
    print(f"ukdpack {__version__}, Python {sys.version.split()[0]} ({sys.executable})")
    for c in checks:
        print(line(c))
    lacking = [c.name for c in checks if c.required and not c.ok]
    optional = [c.name for c in checks if not c.required and not c.ok]
    also = f" ({len(optional)} optional missing: {', '.join(optional)})" if optional else ""
    if lacking:
        print(f"ukdpack: doctor: a pack needs what is missing: {', '.join(lacking)}{also}")
        return 1
    print(f"ukdpack: doctor: everything a pack needs is here{also}")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``doctor`` on the ``ukdpack`` command's subparsers."""
    p = sub.add_parser("doctor", help="which compilers, DVC remotes and cache a pack would use, "
                                      "and how to get what is missing")
    p.add_argument("--source-root", default=".", metavar="R",
                   help="the descriptor root whose DVC outputs and remotes to check (default .)")
    p.add_argument("--hipcc", metavar="PATH", help="HIP compiler (else $UKDPACK_HIPCC, PATH)")
    p.add_argument("--nvcc", metavar="PATH", help="CUDA compiler (else $UKDPACK_NVCC, PATH)")
    p.add_argument("--cache-dir", metavar="D", help="compile cache (default: as pack)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=cmd_doctor)
