"""ukdpack: pack authored GPU kernel descriptor trees into per-architecture shards.

The Python side walks, validates and packs; the C++ runtime (``ukdpack._runtime``)
answers every question the runtime also answers, so pack-time checks run the
exact logic that loads the shards.
"""

from pkgutil import extend_path

# A superbuild puts the source python/ folder and the build tree's python/
# folder (holding _runtime) on PYTHONPATH; this joins them into one package.
__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"
