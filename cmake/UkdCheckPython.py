"""Which of ukdpack's Python requirements the running interpreter lacks.

Run by UkdPackaging.cmake at configure time as ``<python> UkdCheckPython.py <file>``,
where <file> holds one requirement of ``pyproject.toml``'s ``[project] dependencies``
a line. Installed distributions are looked up by name (importlib.metadata), so no
import-name mapping is needed. Prints each missing requirement, one a line; exit 0.
Standard library only: it runs before anything is known to be installed.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys

_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _applies(marker: str) -> bool:
    """Whether an environment marker holds here; without `packaging` to judge it, assume
    it does (a false alarm names a package pip then skips)."""
    try:
        from packaging.markers import Marker
    except ImportError:
        return True
    return bool(Marker(marker).evaluate())


def missing(requirements: list[str]) -> list[str]:
    """The requirements whose distribution is not installed for this interpreter."""
    out = []
    for req in requirements:
        spec, _, marker = req.partition(";")
        m = _NAME.match(spec)
        if m is None or (marker.strip() and not _applies(marker.strip())):
            continue
        try:
            importlib.metadata.version(m.group(1))
        except importlib.metadata.PackageNotFoundError:
            out.append(req.strip())
    return out


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as f:
        reqs = [ln.strip() for ln in f if ln.strip()]
    for req in missing(reqs):
        print(req)
    return 0


if __name__ == "__main__":
    sys.exit(main())
