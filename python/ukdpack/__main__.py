"""``python -m ukdpack``: the command line; ``--cmakedir`` is answered first, without
loading the command line or the extension (CMake configures run it)."""

import sys


def _run() -> int:
    if sys.argv[1:] == ["--cmakedir"]:
        from ukdpack.cmake_package import print_cmake_dir

        return print_cmake_dir()
    from ukdpack.cli import main

    return main()


raise SystemExit(_run())
