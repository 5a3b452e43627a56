"""ukdpack: pack authored GPU kernel descriptor trees into per-architecture shards.

The Python side walks, validates and packs; the C++ runtime (``ukdpack._runtime``)
answers every question the runtime also answers, so pack-time checks run the
exact logic that loads the shards.
"""



def _portions(path: list[str]) -> list[str]:
    """``path`` and each other ``ukdpack`` folder on ``sys.path``, in its order.

    A superbuild puts the source python/ folder and the build tree's python/ folder
    (holding _runtime) on PYTHONPATH; this joins them into one package, as
    ``pkgutil.extend_path`` would (which imports typing and more: milliseconds of every
    command's start)."""
    import os
    import sys

    out = list(path)
    for entry in sys.path:
        if isinstance(entry, str):
            portion = os.path.join(entry or os.curdir, "ukdpack")
            if portion not in out and os.path.isdir(portion):
                out.append(portion)
    return out


__path__ = _portions(__path__)
del _portions

__version__ = "0.1.0"
