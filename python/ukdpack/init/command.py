"""The ``ukdpack init`` subcommand: its arguments and what it prints."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from ukdpack.errors import escape_controls, has_controls, quote_name
from ukdpack.init import DEFAULT_NAME


def _shell_word(text: str) -> str:
    """``text`` as one shell word on one line: shlex's quoting, or, for a name holding a
    control character (a newline), bash's ``$'...'`` form with it escaped."""
    if not has_controls(text):
        return shlex.quote(text)
    return "$'" + escape_controls(text.replace("\\", "\\\\").replace("'", "\\'")) + "'"


def cmd_init(args: argparse.Namespace) -> int:
    """Write the starter tree, then print the commands that validate and pack it."""
    from ukdpack.errors import UsageError
    from ukdpack.init.scaffold import write
    from ukdpack.invocation import ukdpack_command, validator_command

    if args.dir == "":
        raise UsageError("DIR '': expected a folder to create (an unset variable?); "
                         "nothing was written")
    made = write(Path(args.dir), args.name, args.slots)
    root = _shell_word(args.dir)
    handlers = _shell_word(str(made.handlers))
    if args.slots:
        what = ("three slots run in order: prep (scale), reduce (twostage, two launches: "
                "partial, combine) and finish (two candidates, knob finish.block)")
    else:
        what = ("a single-launch kernel (scale) and a two-launch kernel (twostage: partial, "
                "combine) from one translation unit")
    print(f"ukdpack: wrote {quote_name(args.dir)}: engine '{made.engine_name}', {len(made.files)} files: "
          f"{what}, and the handler manifest handlers.json")
    # As they run from here: the command this was run with, not a bare name PATH lacks.
    me, validator = ukdpack_command(), validator_command()
    print("next:\n"
          f"  {me} validate {root}\n"
          f"  {me} pack --source-root {root} --out-root out --arch gfx90a "
          f"--handlers {handlers}\n"
          f"  {validator} out/gfx90a\n"
          f"  {me} inspect out/gfx90a\n"
          f"({me} doctor says what is missing when a compiler or DVC is not found)")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``init`` on the ``ukdpack`` command's subparsers."""
    p = sub.add_parser("init", help="write a small descriptor tree that validates and packs "
                                    "as written")
    p.add_argument("dir", metavar="DIR", help="the folder to create (new or empty)")
    p.add_argument("--name", default=DEFAULT_NAME, metavar="NS:LOCAL",
                   help=f"the engine name, 'namespace:local' (default {DEFAULT_NAME}); "
                        "dispatch and match symbols are made from it")
    p.add_argument("--slots", action="store_true",
                   help="start a slotted engine: three slots run in order (prep, reduce, "
                        "finish), each picking its kernel from its own packs")
    p.set_defaults(handler=cmd_init)
