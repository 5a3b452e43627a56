"""Helpers shared by the shard-tool tests (inspect, verify, desk-check, diff): the
example tree packed once per module, and ways to damage a copy of a shard."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from kpack_oracle import Archive
from pack_support import REPO, copy_example, run_pack

from ukdpack import _runtime
from ukdpack.shard import archive as kpack
from ukdpack.shard import provenance

ARCH = "gfx90a"
ARCHIVE_FOLDER = _runtime.ARCHIVE_FOLDER
INDEX_FILE = _runtime.SHARD_INDEX_FILE


def pack_example(tmp_path_factory: pytest.TempPathFactory, name: str,
                 arches: Sequence[str] = (ARCH,), *extra: str) -> tuple[Path, Path]:
    """The example tree copied and packed: (tree, out root). The compile cache is shared
    by every module of the session (it is content-addressed), so each compile runs once.
    ``extra`` goes to pack (``--exclude-folder X``)."""
    base = tmp_path_factory.mktemp(name)
    cache = tmp_path_factory.getbasetemp() / "shard-tools-cache"
    tree = copy_example(base / "tree")
    r = run_pack(tree, base / "out", arches, *extra, cache=cache)
    assert r.returncode == 0, r.stderr
    return tree, base / "out"


def copy_shard(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def read(path: Path) -> Any:
    return json.loads(path.read_text())


def write(path: Path, doc: Any) -> None:
    """Written compact, as the packer writes shard descriptors."""
    path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")


def edit(path: Path, change: Callable[[Any], None], *, reseal: bool = True,
         keep_index: bool = False) -> None:
    """Change a shard descriptor. With ``reseal`` its provenance sidecar is rebound to the
    kernels as they are now, as a packer writing them would have bound it, so a test of
    another check meets only the damage it made; without, the sidecar still binds the
    kernels as packed. The shard's index (which the edit makes stale, a finding of
    ukdpack-validate's own) goes too, unless ``keep_index``."""
    doc = read(path)
    change(doc)
    write(path, doc)
    if reseal:
        reseal_sidecar(path)
    if not keep_index:
        for folder in path.parents:
            if (folder / ARCHIVE_FOLDER).is_dir():
                (folder / INDEX_FILE).unlink(missing_ok=True)
                break


def reseal_sidecar(path: Path) -> None:
    """Rebind the sidecar beside the shard descriptor ``path``: each entry of a kernel the
    file holds gets that kernel's binding digest; entries of kernels it no longer holds go."""
    side = Path(provenance.sidecar_name(str(path)))
    if not side.is_file():
        return
    doc = json.loads(gzip.decompress(side.read_bytes()))
    descriptor = read(path)
    kernels = descriptor.get("kernelDescriptors", [descriptor])
    now = {k["id"]: k for k in kernels if isinstance(k, dict) and "id" in k}
    entries = {i: dict(e, sha256=provenance.binding(now[i]))
               for i, e in doc["entries"].items() if i in now}
    side.write_bytes(provenance.sidecar_bytes(doc["kdp_id"], entries))


def kernel(doc: Any, name: str) -> dict[str, Any]:
    """The kernel object named ``name`` in a KDP document."""
    found: dict[str, Any] = next(k for k in doc["kernelDescriptors"] if k["name"] == name)
    return found


def rewrite_archive(shard: Path, drop: Sequence[str] = (),
                    add: dict[str, bytes] | None = None) -> None:
    """Rebuild the shard's archive without the toc keys ``drop`` and with extra entries."""
    path = shard / "kpack" / f"kernels_{ARCH}.kpack"
    old = Archive.open(path)
    writer = kpack.ArchiveWriter(old.group, [ARCH])
    for key, arch in old:
        if key not in drop:
            writer.add(key, arch, old.get(key, arch))
    for key, data in (add or {}).items():
        writer.add(key, ARCH, data)
    old.close()
    writer.write(path)


def ukdpack(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """``python -m ukdpack ...`` as a person or CTest runs it."""
    env = dict(os.environ, HIP_PLATFORM="amd")
    return subprocess.run([sys.executable, "-m", "ukdpack", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, check=False)


def errors(stderr: str, severity: str = "error") -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith(f"ukdpack: {severity}: ")]
