#!/usr/bin/env python3
"""Generates the Python modules of the vendored REAPI protos (grpcio-tools' protoc).

Two trees, each holding the official .proto files and, next to them, what this script
makes of them (``*_pb2.py``, ``*_pb2.pyi``, ``*_pb2_grpc.py``):

* ``python/ukdpack/remote/protos``: the Remote Execution API v2 (bazelbuild/remote-apis)
  and the googleapis files it imports, plus ByteStream; imported as
  ``ukdpack.remote.protos.<proto path>``.
* ``tests/remote_exec/bots_protos``: the Remote Workers Bots API (googleapis
  ``google/devtools/remoteworkers/v1test2``), which only the tests' workers speak;
  imported as ``bots_protos.<proto path>`` with ``tests/remote_exec`` on ``sys.path``.

The generated modules are committed with this script rather than generated at install
time: the packer's build then needs no protoc, and a change to them shows up in review.
protoc writes absolute imports (``from google.rpc import status_pb2``) that would
collide with other ``google`` packages; each one naming a vendored file is rewritten to
its tree's package. ``google/protobuf`` (the well-known types) stays the protobuf
runtime's own.

Run with a Python that has grpcio-tools, the version the ``test`` extra of
pyproject.toml pins: its protoc writes its version into every module (and decides the
protobuf runtime the modules need, see the ``remote`` extra), so another version makes
other bytes.
``python scripts/gen_reapi_protos.py`` regenerates, ``--check`` exits 1 when the
committed modules differ from what it would write.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: (tree, Python package prefix of its modules)
TREES = (
    (ROOT / "python" / "ukdpack" / "remote" / "protos", "ukdpack.remote.protos"),
    (ROOT / "tests" / "remote_exec" / "bots_protos", "bots_protos"),
)
_IMPORT = re.compile(r"^(\s*)from ([\w.]+) import (\w+?_pb2)(_grpc)?\b", re.MULTILINE)


def _protos(tree: Path) -> list[Path]:
    return sorted(p.relative_to(tree) for p in tree.rglob("*.proto"))


def _generate(out: Path) -> None:
    """Every tree's modules into ``out/<tree index>/``."""
    import grpc_tools
    from grpc_tools import protoc  # type: ignore[import-untyped]

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    includes = [f"-I{tree}" for tree, _ in TREES] + [f"-I{well_known}"]
    owner = {str(p.with_suffix("")).replace("/", "."): prefix
             for tree, prefix in TREES for p in _protos(tree)}
    for i, (tree, _) in enumerate(TREES):
        dest = out / str(i)
        dest.mkdir(parents=True)
        args = ["protoc", *includes, f"--python_out={dest}", f"--pyi_out={dest}",
                f"--grpc_python_out={dest}", *map(str, _protos(tree))]
        if protoc.main(args) != 0:
            sys.exit(f"protoc failed on {tree}")

        def rewrite(m: re.Match[str]) -> str:
            module = f"{m.group(2)}.{m.group(3).removesuffix('_pb2')}"
            prefix = owner.get(module)
            if prefix is None:  # google.protobuf: the runtime's
                return m.group(0)
            return f"{m.group(1)}from {prefix}.{m.group(2)} import {m.group(3)}{m.group(4) or ''}"

        for f in dest.rglob("*.py*"):
            text = f.read_text(encoding="utf-8")
            f.write_text(_IMPORT.sub(rewrite, text), encoding="utf-8")
        # The modules to commit are the generated ones only: protoc makes no folders'
        # __init__.py, so every folder below the tree is a namespace package.


def _generated(tree: Path) -> dict[Path, bytes]:
    # Only .py and .pyi: importing the modules leaves __pycache__/*_pb2*.pyc beside them,
    # which are no generated module (and must not make a second test run fail).
    return {p.relative_to(tree): p.read_bytes() for p in sorted(tree.rglob("*_pb2*.py*"))
            if p.suffix in (".py", ".pyi")}


def main() -> int:
    """Regenerate (or, with ``--check``, compare) every tree's modules."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the committed modules are not what protoc makes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        _generate(Path(tmp))
        stale = []
        for i, (tree, _) in enumerate(TREES):
            fresh = _generated(Path(tmp) / str(i))
            if args.check:
                if fresh != _generated(tree):
                    stale.append(tree)
                continue
            for old in _generated(tree):
                (tree / old).unlink()
            for rel, data in fresh.items():
                (tree / rel).parent.mkdir(parents=True, exist_ok=True)
                (tree / rel).write_bytes(data)
        for tree in stale:
            print(f"{tree.relative_to(ROOT)}: the generated modules are stale; "
                  f"run scripts/gen_reapi_protos.py (with grpcio-tools "
                  f"{version('grpcio-tools')}; the test extra pins the version that made "
                  f"them)", file=sys.stderr)
        return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
