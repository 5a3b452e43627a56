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
