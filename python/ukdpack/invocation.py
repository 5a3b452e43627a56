"""How this process was started, so commands printed back to the user run as typed:
``ukdpack`` when that is what PATH finds, else the full path of the console script,
else ``<python> -m ukdpack``."""

from __future__ import annotations

import os
import shlex
import shutil
import sys


def ukdpack_command() -> str:
    """The command that runs ukdpack again, quoted for a POSIX shell."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) in ("__main__.py", "-m", "-c", ""):
        return f"{shlex.quote(sys.executable)} -m ukdpack"
    return _as_typed(os.path.abspath(argv0), "ukdpack")


def validator_command() -> str:
    """The command that runs ``ukdpack-validate`` (installed beside the interpreter or
    the console script), quoted for a POSIX shell."""
    argv0 = sys.argv[0] if sys.argv else ""
    for folder in (os.path.dirname(os.path.abspath(argv0)) if argv0 else "",
                   os.path.dirname(sys.executable)):
        candidate = os.path.join(folder, "ukdpack-validate")
        if folder and os.access(candidate, os.X_OK):
            return _as_typed(candidate, "ukdpack-validate")
    return "ukdpack-validate"


def _as_typed(path: str, name: str) -> str:
    on_path = shutil.which(name)
    if on_path is not None and os.path.realpath(on_path) == os.path.realpath(path):
        return name
    return shlex.quote(path)
