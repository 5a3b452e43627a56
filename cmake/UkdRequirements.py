"""Writes the packer's Python requirements: ``pyproject.toml``'s ``[project]
dependencies``, one a line.

Run by ukdpack's configure as ``<python> UkdRequirements.py <pyproject.toml> <out>``
with the interpreter the extension is built for, so CMake keeps no TOML reader of its
own. The file is installed beside the package config, where ``UkdCheckPython.py``
reads it. Standard library only from Python 3.11 (``tomllib``); before that, the
``tomli`` that scikit-build-core or pip brings.
"""

from __future__ import annotations

import sys
from typing import Any


def _toml() -> Any:
    try:
        import tomllib
        return tomllib
    except ImportError:
        pass
    try:
        import tomli
        return tomli
    except ImportError:
        from pip._vendor import tomli  # pip has vendored tomli since 21.2
        return tomli


def main() -> int:
    pyproject, out = sys.argv[1], sys.argv[2]
    with open(pyproject, "rb") as f:
        deps = _toml().load(f)["project"]["dependencies"]
    with open(out, "w", encoding="utf-8") as f:
        f.write("".join(f"{d}\n" for d in deps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
