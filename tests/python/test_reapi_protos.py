"""The vendored REAPI protos: the committed modules are what scripts/gen_reapi_protos.py
makes of the .proto files, and they import as one package, never as top-level
``google.*``/``build.*`` modules that another library's copies would collide with."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TREES = {REPO / "python" / "ukdpack" / "remote" / "protos": "ukdpack.remote.protos",
         REPO / "tests" / "remote_exec" / "bots_protos": "bots_protos"}


def test_the_generated_modules_match_the_protos() -> None:
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_reapi_protos.py"),
                           "--check"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_bytecode_beside_the_modules_is_no_generated_module() -> None:
    # Importing the modules (the remote-execution tests' workers do) leaves
    # __pycache__/*_pb2*.pyc in the tree when Python writes bytecode, its default: a
    # second run of the tests must still find the committed modules current.
    cache = REPO / "tests" / "remote_exec" / "bots_protos" / "google" / "api" / "__pycache__"
    made = not cache.exists()
    stray = cache / "ukdpack_test_stray_pb2.cpython-311.pyc"
    cache.mkdir(exist_ok=True)
    try:
        stray.write_bytes(b"bytecode")
        test_the_generated_modules_match_the_protos()
    finally:
        stray.unlink(missing_ok=True)
        if made:
            cache.rmdir()


def test_every_module_imports_within_its_package() -> None:
    modules = [f"{prefix}.{'.'.join(p.relative_to(tree).with_suffix('').parts)}"
               for tree, prefix in TREES.items() for p in sorted(tree.rglob("*_pb2*.py"))]
    assert len(modules) == 2 * 13  # _pb2 and _pb2_grpc of each of the 13 .proto files
    probe = f"""
import sys
sys.path[:0] = [{str(REPO / 'python')!r}, {str(REPO / 'tests' / 'remote_exec')!r}]  # the source's
import importlib, json
for m in {modules!r}:
    importlib.import_module(m)
from ukdpack.remote.protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as r
print(r.DESCRIPTOR.services_by_name["Execution"].full_name)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("build", "bots_protos")
             or m.startswith("google.")
                        and not m.startswith(("google.protobuf", "google._upb")))))  # protobuf's
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=False, cwd=REPO)
    assert done.returncode == 0, done.stderr
    service, loaded = done.stdout.splitlines()
    assert service == "build.bazel.remote.execution.v2.Execution"
    assert all(m.startswith("bots_protos") for m in json.loads(loaded)), loaded
