"""Where the CMake package config shipped with this copy of ukdpack lies.

Read by ``python -m ukdpack --cmakedir`` before anything else is imported, so it
must stay free of the extension and of third-party modules.
"""

from __future__ import annotations

import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# A wheel (pip install) carries the config inside the package, beside the headers and
# the runtime library, so it moves with site-packages.
WHEEL_CMAKE_DIR = PACKAGE_DIR / "share" / "cmake" / "ukdpack"
# A `cmake --install` prefix keeps the config in <libdir>/cmake/ukdpack; the installed
# package names that folder, relative to itself, in this file.
PREFIX_POINTER = PACKAGE_DIR / "cmake_dir.txt"
CONFIG_FILE = "ukdpackConfig.cmake"


def cmake_dir() -> Path | None:
    """The folder holding ``ukdpackConfig.cmake`` for this copy of ukdpack, or None
    for a source checkout (used through ``add_subdirectory``)."""
    candidates = [WHEEL_CMAKE_DIR]
    if PREFIX_POINTER.is_file():
        candidates.append(PACKAGE_DIR / PREFIX_POINTER.read_text(encoding="utf-8").strip())
    for folder in candidates:
        if (folder / CONFIG_FILE).is_file():
            return folder.resolve()
    return None


def print_cmake_dir() -> int:
    """``--cmakedir``: print the folder for ``-Dukdpack_DIR=``; 1 when there is none."""
    folder = cmake_dir()
    if folder is None:
        print(f"ukdpack: error: {PACKAGE_DIR}: this copy of ukdpack ships no CMake package "
              f"(expected {WHEEL_CMAKE_DIR / CONFIG_FILE}); a source checkout is used with "
              "add_subdirectory, or install ukdpack with pip or cmake --install",
              file=sys.stderr)
        return 1
    print(folder)
    return 0
