"""The ``ukdpack`` command line (SPEC 10).

Errors print as ``ukdpack: error: <file>: <json path>: <message>``, one line
each, then exit 1; usage errors exit 2; bad input never prints a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from ukdpack import __version__
from ukdpack.errors import UkdError

Handler = Callable[[argparse.Namespace], int]


def _print_problem_lines(lines: Sequence[str]) -> None:
    for line in lines:
        print(line, file=sys.stderr)


def cmd_validate(args: argparse.Namespace) -> int:
    from ukdpack.validate import validate

    result = validate(Path(args.root), args.exclude_folder)
    if args.json:
        print(json.dumps({
            "root": args.root,
            "valid": result.valid,
            "problems": [p.as_dict() for p in result.problems],
            "skipped": [{"path": s.rel, "why": s.why} for s in result.tree.skipped],
        }, indent=2))
        return 0 if result.valid else 1
    _print_problem_lines([s.line() for s in result.tree.skipped])
    _print_problem_lines([p.line() for p in result.problems])
    print(f"ukdpack: {args.root}: {result.summary()}")
    return 0 if result.valid else 1


def cmd_pack(args: argparse.Namespace) -> int:
    from ukdpack.pack import PackOptions, default_jobs, normalize_arches, pack
    from ukdpack.progress import Reporter

    reporter = Reporter(args.label, live=False if args.plain else None)
    opts = PackOptions(
        source_root=Path(args.source_root), out_root=Path(args.out_root),
        arches=tuple(normalize_arches(args.arch)), group=args.group,
        jobs=args.jobs or default_jobs(), hipcc=args.hipcc,
        handlers=Path(args.handlers) if args.handlers else None,
        cache_dir=Path(args.cache_dir) if args.cache_dir else None,
        depfile=Path(args.depfile) if args.depfile else None,
        depfile_target=args.depfile_target, exclude_folders=tuple(args.exclude_folder),
        required=args.required, lock_timeout=args.lock_timeout)
    report = pack(opts, reporter)
    if report.failed:
        reporter.info(f"failed: {', '.join(report.failed)} ({len(report.failed)} of "
                      f"{len(opts.arches)} arch{'es' if len(opts.arches) != 1 else ''})")
    elif not report.ok:
        reporter.info("failed: the tree breaks the rules above; nothing was packed")
    return 0 if report.ok else 1


def cmd_dvc_status(args: argparse.Namespace) -> int:
    from ukdpack import dvc

    root = Path(args.root)
    if not root.is_dir():
        raise UkdError(f"{root}: expected a descriptor root folder")
    st = dvc.status(root, verify=args.verify)
    if args.outputs:
        for s in st.outputs:
            print(s.output.path)
        return 0
    if args.json:
        print(json.dumps({
            "root": str(root), "repo": str(st.repo) if st.repo else None,
            "outputs": [{"sidecar": str(s.output.sidecar), "path": str(s.output.path),
                         "state": s.state, "detail": s.detail, "remote": s.output.remote}
                        for s in st.outputs],
            "missing": len(st.missing),
            "pull": [dvc.pull_command(r, sc) for r, sc in dvc.pull_groups(st).items()],
            "problems": [p.as_dict() for p in st.problems],
        }, indent=2))
    else:
        _print_problem_lines([p.line() for p in st.problems])
        for line in dvc.describe_missing(st):
            print(f"  {line}")
        n, m = len(st.outputs), len(st.missing)
        if not n:
            print(f"ukdpack: {root}: no DVC outputs")
        elif m:
            print(f"ukdpack: {root}: {m} of {n} DVC outputs not present; fetch them with: "
                  f"ukdpack dvc-pull {root}")
        else:
            print(f"ukdpack: {root}: {n} DVC outputs present"
                  + (" and verified" if args.verify else ""))
    failed = bool(st.problems) or (args.require and bool(st.missing))
    return 1 if failed else 0


def cmd_dvc_pull(args: argparse.Namespace) -> int:
    from ukdpack import dvc

    root = Path(args.root)
    st = dvc.status(root)
    if st.problems:
        raise UkdError(st.problems)
    if st.missing and st.repo is None:
        raise UkdError(f"{root}: its DVC sidecars lie in no DVC repository (no .dvc folder "
                       "above them)")
    rc, ran = dvc.pull(root, args.remote)
    for cmd in ran:
        print(f"ukdpack: ran in {st.repo}: {cmd}")
    if not ran:
        print(f"ukdpack: {root}: every DVC output is present; nothing to pull")
    if rc != 0:
        print(f"ukdpack: error: dvc pull failed (exit {rc})", file=sys.stderr)
        return 1
    left = dvc.status(root).missing
    if left:
        _print_problem_lines([f"ukdpack: error: still missing: {ln}"
                              for ln in dvc.describe_missing(dvc.status(root))])
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ukdpack",
        description="Validate, pack and inspect GPU kernel descriptor trees.")
    parser.add_argument("--version", action="version", version=f"ukdpack {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("validate", help="check every authored-tree rule, without compiling")
    p.add_argument("root", help="descriptor root folder")
    p.add_argument("--exclude-folder", action="append", default=[], metavar="NAME",
                   help="leave out folders with this name (repeatable)")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.set_defaults(handler=cmd_validate)

    p = sub.add_parser("pack", help="pack one shard per arch from an authored tree")
    p.add_argument("--source-root", required=True, metavar="R", help="authored descriptor root")
    p.add_argument("--out-root", required=True, metavar="O", help="where OUT/<arch>/ shards go")
    p.add_argument("--arch", action="append", required=True, metavar="A",
                   help="target arch (repeatable; feature suffixes are stripped)")
    p.add_argument("--group", default="kernels", metavar="G",
                   help="archive group name: kpack/<group>_<arch>.kpack (default: kernels)")
    p.add_argument("--jobs", type=int, default=0, metavar="N",
                   help="parallel compiles (default: the CPUs this process may use)")
    p.add_argument("--hipcc", metavar="PATH", help="HIP compiler (else $UKDPACK_HIPCC, PATH)")
    p.add_argument("--handlers", metavar="F",
                   help="handler manifest {dispatch_symbol: [launch names]} for the runtime check")
    p.add_argument("--cache-dir", metavar="D", help="compile cache (default: ~/.cache/ukdpack)")
    p.add_argument("--depfile", metavar="F", help="write a Makefile-style depfile of every file read")
    p.add_argument("--depfile-target", metavar="T",
                   help="the target named in the depfile (default: the out root)")
    p.add_argument("--exclude-folder", action="append", default=[], metavar="X",
                   help="leave out folders with this name (repeatable)")
    p.add_argument("--label", metavar="L", help="prefix progress lines with this label")
    p.add_argument("--required", action="store_true",
                   help="a root with no kernels for any arch is an error, not dormant")
    p.add_argument("--plain", action="store_true", help="plain lines even on a terminal")
    p.add_argument("--lock-timeout", type=float, default=600.0, metavar="S",
                   help="seconds to wait for another pack of the same shard (default 600)")
    p.set_defaults(handler=cmd_pack)

    p = sub.add_parser("dvc-status", help="which DVC outputs under a root are present")
    p.add_argument("root", help="descriptor root folder")
    p.add_argument("--json", action="store_true", help="print the status as JSON")
    p.add_argument("--verify", action="store_true",
                   help="also compare content hashes as DVC computes them")
    p.add_argument("--require", action="store_true", help="exit 1 when any output is missing")
    p.add_argument("--outputs", action="store_true", help="print every output path, one a line")
    p.set_defaults(handler=cmd_dvc_status)

    p = sub.add_parser("dvc-pull", help="fetch the missing DVC outputs under a root with DVC")
    p.add_argument("root", help="descriptor root folder")
    p.add_argument("--remote", metavar="NAME", help="remote for outputs that name none")
    p.set_defaults(handler=cmd_dvc_pull)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ukdpack`` console script and ``python -m ukdpack``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except UkdError as e:
        _print_problem_lines([p.line() for p in e.problems])
        return 1
    except KeyboardInterrupt:
        print("ukdpack: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # an internal failure, never bad input: say so in one line
        if os.environ.get("UKDPACK_DEBUG"):
            raise
        print(f"ukdpack: internal error: {type(e).__name__}: {e} (set UKDPACK_DEBUG=1 for a "
              "traceback, and please report it)", file=sys.stderr)
        return 2
