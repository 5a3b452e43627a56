"""``python -m ukdpack``: the command line; ``--cmakedir`` is answered first, without
loading the command line or the extension (CMake configures run it), and under
``UKDPACK_RESIDENT=1`` a ``pack`` is handed to the resident server (``ukdpack.resident``)
before the command line is loaded. A ``pack`` run here starts the compiles of the sources
edited since the last run of the same command first (``ukdpack.produce.early_compiles``), while
the rest loads."""

import os
import sys


def _run() -> int:
    if sys.argv[1:] == ["--cmakedir"]:
        from ukdpack.cmake_package import print_cmake_dir

        return print_cmake_dir()
    from ukdpack.resident import place

    if sys.argv[1:2] == ["pack"] and place.enabled():
        from ukdpack.resident.client import delegate

        code = delegate(sys.argv[1:])
        if code is not None:
            return code
    if sys.argv[1:2] != ["pack"]:
        from ukdpack.cli import main

        return main()
    from ukdpack.produce import early_compiles

    early_compiles.start(sys.argv[1:])
    try:
        from ukdpack.cli import main

        return main()
    finally:
        early_compiles.discard()  # any the pack did not take (a usage error, a failed tree)


def _exit(code: int) -> None:
    """End the process once its output is out, skipping the interpreter's teardown (the
    freeing of every object a pack made, about 10 ms of each build step; mypy ends so
    too): every command has finished its work, joined its threads and closed its files
    by the time main returns."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away, a closed stream
            code = code or 1
    os._exit(code)


def console() -> None:
    """The ``ukdpack`` console script: as ``python -m ukdpack``."""
    _exit(_run())


if __name__ == "__main__":
    _exit(_run())
