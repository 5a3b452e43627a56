"""``pack --remote-exec`` against a real BuildGrid farm on loopback (PostgreSQL, BuildGrid,
two Bots-API workers running the real hipcc; tests/python/remote_exec_servers.py): shards
byte-identical to a local pack's, a fresh machine with a warm farm compiles nothing
here, a worker's compile error reads as a local one, a farm killed mid-pack costs one
warning and local compiles, a poisoned action result is refused, and no credential is
ever printed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from google.protobuf.message import DecodeError
from pack_support import REPO, compiles, run_pack, shard_files
from remote_exec_servers import TOOLCHAIN_KEY, Farm, digest, farm
from remote_servers import free_port, nginx

from ukdpack.produce import compiler
from ukdpack.remote.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2 as re_pb2,
)
from ukdpack.remote.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2_grpc as re_grpc,
)

ARCHES = ("gfx90a", "gfx1030")
MINIMAL = REPO / "tests" / "corpus" / "ok_minimal" / "tree"
SECRET = "s3cr3t-Pa55word"
TOKEN = "t0ken-Xyzzy-123"
KEY = "k3y-Plugh-456"  # a farm's API key header (BuildBuddy's x-buildbuddy-api-key)
PROPERTY = ("--remote-exec-property", "OSFamily=linux")


def _tree(dst: Path, broken: bool = False) -> Path:
    """ok_minimal with a header, and a second unit two folders down that includes it
    (its action's working directory is that folder)."""
    shutil.copytree(MINIMAL, dst)
    (dst / "k.h").write_text("#define VALUE 1.0f\n")
    (dst / "k.hip").write_text('#include "k.h"\n' + (dst / "k.hip").read_text()
                               .replace("1.0f", "VALUE"))
    deep = dst / "sub" / "deep"
    deep.mkdir(parents=True)
    body = "p[0] = VALUE + 2.0f;" if not broken else "p[0] = VALUE + undeclared_name;"
    (deep / "k2.hip").write_text('#include "../../k.h"\n'
                                 f'extern "C" __global__ void kc(float* p) {{ {body} }}\n')
    doc = json.loads((dst / "a.kdp.json").read_text())
    doc["kernelDescriptors"].append({
        "id": "ukd-a2", "version": "1.0", "name": "a2", "priority": 0,
        "metadata": {"dtype": "FLOAT", "block": 128},
        "kernel_source": {"kind": "hip", "source": "sub/deep/k2.hip", "entry": "kc",
                          "build": {}}})
    (dst / "a.kdp.json").write_text(json.dumps(doc, indent=2))
    return dst


def _hipcc(folder: Path) -> tuple[Path, Path]:
    """A hipcc wrapper that logs the compiles (``--genco``) it runs on this machine only:
    the workers run it too (it is the toolchain their property names), without
    $UKDPACK_TEST_LOCAL_COMPILES."""
    log = folder / "local-compiles.log"
    real = shutil.which("hipcc")
    assert real, "hipcc is installed by scripts/setup.sh"
    wrapper = folder / "hipcc"
    wrapper.write_text('#!/bin/sh\ncase " $* " in *" --genco "*) '
                       '[ -n "$UKDPACK_TEST_LOCAL_COMPILES" ] && '
                       'echo "$*" >> "$UKDPACK_TEST_LOCAL_COMPILES";; esac\n'
                       f'exec "{real}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return wrapper, log


@dataclass(frozen=True)
class Setup:
    farm: Farm
    hipcc: Path
    log: Path
    local: dict[str, dict[str, bytes]]  # the shards a local pack (no farm) made
    base: Path


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    base = tmp_path_factory.mktemp("rx")
    hipcc, log = _hipcc(base)
    # The workers offer exactly the toolchain the packer fingerprints.
    identity = compiler.identify("hip", str(hipcc), None).identity
    for remote in farm(base / "farm", workers=2,
                       properties={"OSFamily": "linux", TOOLCHAIN_KEY: identity}):
        tree = _tree(base / "local-tree")
        r = run_pack(tree, base / "local-out", ARCHES, "--hipcc", str(hipcc),
                     cache=base / "local-cache")
        assert r.returncode == 0, r.stderr
        yield Setup(remote, hipcc, log, {a: shard_files(base / "local-out" / a)
                                         for a in ARCHES}, base)


@dataclass(frozen=True)
class Packed:
    rc: int
    out: str
    err: str
    local_compiles: int


def _pack(s: Setup, tree: Path, out: Path, cache: Path, *extra: str,
          env: dict[str, str] | None = None) -> Packed:
    before = len(compiles(s.log))
    r = run_pack(tree, out, ARCHES, "--hipcc", str(s.hipcc), *extra, cache=cache,
                 env={"UKDPACK_TEST_LOCAL_COMPILES": str(s.log), **(env or {})})
    return Packed(r.returncode, r.stdout, r.stderr, len(compiles(s.log)) - before)


def _worker_runs(remote: Farm) -> int:
    return sum(p.read_text().count(": exit ") for p in remote.logs
               if p.name.startswith("worker"))


def _left_by_compiles() -> set[str]:
    """What hipcc left in the workers' temporary folder (they run with the suite's
    TMPDIR): a folder named for its source's stem per compile, unless the action gives
    the compile a temporary folder of its own."""
    return {p.name for p in Path(os.environ["TMPDIR"]).iterdir()
            if p.name.startswith(("k-", "k2-"))}


def _warnings(text: str) -> list[str]:
    return [line for line in text.splitlines() if "warning" in line]


def test_a_farm_packs_byte_identical_shards_and_a_fresh_machine_compiles_nothing(
        setup: Setup, tmp_path: Path) -> None:
    # Machine A: a cold farm runs every compile (none here).
    tree = _tree(tmp_path / "a")
    runs = _worker_runs(setup.farm)
    left = _left_by_compiles()
    a = _pack(setup, tree, tmp_path / "out-a", tmp_path / "cache-a",
              "--remote-exec", setup.farm.url, *PROPERTY, "--json")
    assert a.rc == 0, a.err + setup.farm.log_tails()
    assert a.local_compiles == 0, a.err
    assert _worker_runs(setup.farm) == runs + 4
    # The workers' compiles kept their temporary files to their own input roots.
    assert _left_by_compiles() == left
    doc = json.loads(a.out)["remote_exec"]
    assert (doc["executed"], doc["cache_hits"], doc["local"], doc["refused"]) == \
        (4, 0, 0, 0), doc
    assert "remote execution grpc://" in a.err and "4 executed" in a.err
    assert not _warnings(a.err), a.err
    for arch in ARCHES:
        assert shard_files(tmp_path / "out-a" / arch) == setup.local[arch], arch

    # Machine B: an empty local cache, a warm farm: every object from its action cache,
    # no compile here and none on the workers.
    tree_b = _tree(tmp_path / "b")
    runs = _worker_runs(setup.farm)
    b = _pack(setup, tree_b, tmp_path / "out-b", tmp_path / "cache-b",
              "--remote-exec", setup.farm.url, *PROPERTY, "--json")
    assert b.rc == 0, b.err
    assert b.local_compiles == 0, b.err
    assert _worker_runs(setup.farm) == runs
    doc = json.loads(b.out)["remote_exec"]
    assert (doc["executed"], doc["cache_hits"], doc["local"]) == (0, 4, 0), doc
    for arch in ARCHES:
        assert shard_files(tmp_path / "out-b" / arch) == setup.local[arch], arch

    # What came from the farm filled B's local cache: no farm, no compile.
    again = _pack(setup, tree_b, tmp_path / "out-b2", tmp_path / "cache-b")
    assert (again.rc, again.local_compiles) == (0, 0), again.err


def test_a_compile_error_on_a_worker_reads_as_a_local_one(setup: Setup,
                                                          tmp_path: Path) -> None:
    tree = _tree(tmp_path / "t", broken=True)
    local = _pack(setup, tree, tmp_path / "out-l", tmp_path / "cache-l")
    remote = _pack(setup, tree, tmp_path / "out-r", tmp_path / "cache-r",
                   "--remote-exec", setup.farm.url, *PROPERTY)
    assert local.rc == remote.rc == 1
    assert local.local_compiles > 0 and remote.local_compiles == 0, remote.err

    def errors(text: str) -> list[str]:
        return [ln for ln in text.splitlines()
                if "error" in ln or "undeclared_name" in ln or ln.startswith("  ")]

    assert "use of undeclared identifier 'undeclared_name'" in remote.err
    assert str(tree / "sub" / "deep" / "k2.hip") in remote.err  # spelled as here
    assert errors(remote.err) == errors(local.err), remote.err


def test_an_include_the_source_text_hides_is_found_by_the_preprocessor(
        setup: Setup, tmp_path: Path) -> None:
    # The includes followed in the text miss a macro-named one: the first action fails on
    # the worker, the local preprocessor's scan finds the header, the second succeeds.
    tree = _tree(tmp_path / "t")
    k2 = tree / "sub" / "deep" / "k2.hip"
    k2.write_text(k2.read_text().replace('#include "../../k.h"',
                                         '#define HEADER "../../k.h"\n#include HEADER'))
    local = _pack(setup, tree, tmp_path / "out-l", tmp_path / "cache-l")
    remote = _pack(setup, tree, tmp_path / "out-r", tmp_path / "cache-r",
                   "--remote-exec", setup.farm.url, *PROPERTY)
    assert local.rc == remote.rc == 0, remote.err
    assert remote.local_compiles == 0, remote.err
    for arch in ARCHES:
        assert shard_files(tmp_path / "out-r" / arch) == shard_files(tmp_path / "out-l" / arch)


def test_a_farm_that_is_down_costs_one_warning_or_fails_under_require(
        setup: Setup, tmp_path: Path) -> None:
    down = f"grpc://robot:{SECRET}@127.0.0.1:{free_port()}"
    env = {"UKDPACK_REMOTE_EXEC_TOKEN": TOKEN}
    tree = _tree(tmp_path / "t")
    auto = _pack(setup, tree, tmp_path / "out", tmp_path / "cache", "--remote-exec", down,
                 env=env)
    assert auto.rc == 0, auto.err
    assert auto.local_compiles == 4
    [warning] = _warnings(auto.err)
    assert "remote execution grpc://***@127.0.0.1:" in warning
    assert "UNAVAILABLE" in warning and "compiling here" in warning
    for arch in ARCHES:
        assert shard_files(tmp_path / "out" / arch) == setup.local[arch]

    req = _pack(setup, tree, tmp_path / "out2", tmp_path / "cache2", "--remote-exec", down,
                "--remote-exec-mode", "require", env=env)
    assert req.rc == 1
    assert req.local_compiles == 0
    assert "ukdpack: error: remote execution grpc://***@127.0.0.1:" in req.err, req.err
    assert "require" in req.err and "Traceback" not in req.err
    assert not (tmp_path / "out2" / "gfx90a").exists()
    for text in (auto.out, auto.err, req.out, req.err):
        assert SECRET not in text and TOKEN not in text and "robot" not in text


def test_credentials_are_sent_but_never_printed(setup: Setup, tmp_path: Path) -> None:
    host = setup.farm.url.removeprefix("grpc://")
    url = f"grpc://robot:{SECRET}@{host}"
    tree = _tree(tmp_path / "t")
    ok = _pack(setup, tree, tmp_path / "out", tmp_path / "cache", "--remote-exec", url,
               *PROPERTY, "--json", env={"UKDPACK_REMOTE_EXEC_TOKEN": TOKEN,
                                         "UKDPACK_REMOTE_EXEC_HEADERS": f"x-api-key={KEY}"})
    assert ok.rc == 0, ok.err
    assert json.loads(ok.out)["remote_exec"]["url"] == f"grpc://***@{host}"
    header = _pack(setup, tree, tmp_path / "out", tmp_path / "cache", "--remote-exec", url,
                   env={"UKDPACK_REMOTE_EXEC_HEADERS": f"x api key={KEY}"})
    assert header.rc == 2 and "UKDPACK_REMOTE_EXEC_HEADERS, line 1" in header.err
    bad = _pack(setup, tree, tmp_path / "out", tmp_path / "cache", "--remote-exec",
                f"grpx://robot:{SECRET}@{host}")
    assert bad.rc == 2 and "grpx://***@" in bad.err
    prop = _pack(setup, tree, tmp_path / "out", tmp_path / "cache", "--remote-exec", url,
                 "--remote-exec-property", "ukdpack-toolchain=x")
    assert prop.rc == 2 and "fingerprint" in prop.err
    for text in (ok.out, ok.err, bad.out, bad.err, prop.out, prop.err, header.out, header.err):
        assert SECRET not in text and TOKEN not in text and "robot" not in text
        assert KEY not in text


def test_a_farm_result_fills_the_team_cache_in_front_of_it(setup: Setup,
                                                           tmp_path: Path) -> None:
    for team in nginx(tmp_path / "nginx"):
        first = _pack(setup, _tree(tmp_path / "a"), tmp_path / "out-a", tmp_path / "cache-a",
                      "--remote-exec", setup.farm.url, *PROPERTY, "--remote-cache", team.url,
                      "--json")
        assert first.rc == 0, first.err
        doc = json.loads(first.out)
        assert doc["remote_cache"]["misses"] == 4 and doc["remote_cache"]["uploads"] == 4, doc
        assert doc["remote_exec"]["executed"] + doc["remote_exec"]["cache_hits"] == 4, doc
        assert first.local_compiles == 0
        # The team cache answers now: no farm asked, no compile here.
        second = _pack(setup, _tree(tmp_path / "b"), tmp_path / "out-b", tmp_path / "cache-b",
                       "--remote-cache", team.url, "--json")
        assert second.rc == 0, second.err
        assert json.loads(second.out)["remote_cache"]["remote_hits"] == 4
        assert second.local_compiles == 0
        for arch in ARCHES:
            assert shard_files(tmp_path / "out-b" / arch) == setup.local[arch]


def test_ctrl_c_cancels_the_actions_in_flight(setup: Setup, tmp_path: Path) -> None:
    # No worker offers this OSFamily: the actions wait in the farm's queue until cancelled.
    # (A key the server does not match on is refused at once: FAILED_PRECONDITION.)
    tree = _tree(tmp_path / "t")
    (tree / "k.h").write_text("#define VALUE 7.0f\n")  # not in the farm's action cache
    args = [sys.executable, "-m", "ukdpack", "pack", "--source-root", str(tree),
            "--out-root", str(tmp_path / "out"), "--plain", "--cache-dir",
            str(tmp_path / "cache"), "--hipcc", str(setup.hipcc), "--arch", "gfx90a",
            "--remote-exec", setup.farm.url, "--remote-exec-property", "OSFamily=nowhere"]
    env = dict(os.environ, HIP_PLATFORM="amd", UKDPACK_TEST_LOCAL_COMPILES=str(setup.log))
    cas = setup.farm.logs[1].parent / "cas"

    def stored() -> int:
        return sum(1 for p in cas.rglob("*") if p.is_file())

    blobs = stored()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None and stored() == blobs:
        time.sleep(0.05)  # until the actions' blobs are uploaded
    time.sleep(1.0)  # and Execute called
    assert proc.poll() is None, proc.communicate()
    before = len(compiles(setup.log))
    proc.send_signal(signal.SIGINT)
    started = time.monotonic()
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - started < 10, err
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert len(compiles(setup.log)) == before  # nothing compiled here instead
    assert not (tmp_path / "out" / "gfx90a").exists()


def _server_pid(remote: Farm) -> int:
    """The pid of the farm's BuildGrid server (its config file is this farm's own)."""
    config = str(remote.logs[1].parent / "bgd.yml")
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if config.encode() in argv and any(a.endswith(b"bgd") for a in argv):
                return int(entry.name)
    raise AssertionError("the farm's server is not running")


def test_a_farm_killed_mid_pack_costs_one_warning_and_nothing_else(
        setup: Setup, tmp_path: Path) -> None:
    identity = compiler.identify("hip", str(setup.hipcc), None).identity
    tree = _tree(tmp_path / "t")
    for remote in farm(tmp_path / "farm", workers=1,
                       properties={"OSFamily": "linux", TOOLCHAIN_KEY: identity}):
        env = dict(os.environ, HIP_PLATFORM="amd",
                   UKDPACK_TEST_LOCAL_COMPILES=str(setup.log))
        before = len(compiles(setup.log))
        args = [sys.executable, "-m", "ukdpack", "pack", "--source-root", str(tree),
                "--out-root", str(tmp_path / "out"), "--plain", "--jobs", "2",
                "--cache-dir", str(tmp_path / "cache"), "--hipcc", str(setup.hipcc),
                "--remote-exec", remote.url, *PROPERTY]
        for a in ARCHES:
            args += ["--arch", a]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)
        deadline = time.monotonic() + 60
        while _worker_runs(remote) < 1 and time.monotonic() < deadline \
                and proc.poll() is None:
            time.sleep(0.05)
        assert _worker_runs(remote) >= 1, remote.log_tails()
        os.kill(_server_pid(remote), signal.SIGKILL)  # the rest is in flight or queued
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    warnings = _warnings(err)
    assert len(warnings) == 1 and "remote execution grpc://" in warnings[0], err
    assert "Traceback" not in err
    assert len(compiles(setup.log)) - before >= 1  # the rest compiled here
    for arch in ARCHES:
        assert shard_files(tmp_path / "out" / arch) == setup.local[arch]


def _actions(cas: Path, tree: Path) -> dict[tuple[str, str], re_pb2.Digest]:
    """The compile actions in the farm's content store of the files of ``tree``, by
    (source, arch)."""
    blobs = {}
    for p in cas.rglob("*"):
        if p.is_file():
            data = p.read_bytes()
            blobs[digest(data).hash] = data

    def files(d: re_pb2.Digest, prefix: str = "") -> dict[str, bytes] | None:
        raw = blobs.get(d.hash)
        if raw is None:
            return None
        found: dict[str, bytes] = {}
        directory = re_pb2.Directory.FromString(raw)
        for f in directory.files:
            if f.digest.hash not in blobs:
                return None
            found[prefix + f.name] = blobs[f.digest.hash]
        for sub in directory.directories:
            below = files(sub.digest, f"{prefix}{sub.name}/")
            if below is None:
                return None
            found.update(below)
        return found

    found = {}
    for data in blobs.values():
        try:
            action = re_pb2.Action.FromString(data)
            command = re_pb2.Command.FromString(blobs.get(action.command_digest.hash, b""))
            inputs = files(action.input_root_digest) if action.input_root_digest.hash else None
        except DecodeError:  # most blobs are no Action
            continue
        args = list(command.arguments)
        if "--genco" not in args or not inputs or any(
                not (tree / p).is_file() or (tree / p).read_bytes() != b
                for p, b in inputs.items()):
            continue
        arch = next(a.split("=")[1] for a in args if a.startswith("--offload-arch="))
        found[(os.path.basename(args[-1]), arch)] = digest(data)
    return found


def test_a_poisoned_action_result_is_refused(setup: Setup, tmp_path: Path) -> None:
    # A warm farm (the first test ran these actions; run them again if alone).
    tree = _tree(tmp_path / "seed")
    seed = _pack(setup, tree, tmp_path / "out-s", tmp_path / "cache-s",
                 "--remote-exec", setup.farm.url, *PROPERTY)
    assert seed.rc == 0, seed.err
    actions = _actions(setup.farm.logs[1].parent / "cas", tree)
    assert len(actions) == 4, actions
    channel = grpc.insecure_channel(setup.farm.address)
    ac = re_grpc.ActionCacheStub(channel)
    cas = re_grpc.ContentAddressableStorageStub(channel)

    def result(key: tuple[str, str]) -> re_pb2.ActionResult:
        return ac.GetActionResult(re_pb2.GetActionResultRequest(action_digest=actions[key]))

    # k.hip for gfx90a answered with its gfx1030 object: bytes true to their digest, the
    # wrong target.
    wrong_target = result(("k.hip", "gfx90a"))
    other = result(("k.hip", "gfx1030"))
    obj = next(f for f in wrong_target.output_files if f.path.endswith(".o"))
    obj.digest.CopyFrom(next(f.digest for f in other.output_files if f.path.endswith(".o")))
    # k2.hip for gfx90a answered with an object whose bytes are not its digest's.
    fake = b"\x7fELF not the object" * 10
    cas.BatchUpdateBlobs(re_pb2.BatchUpdateBlobsRequest(requests=[
        re_pb2.BatchUpdateBlobsRequest.Request(digest=digest(fake), data=fake)]))
    stored = next(p for p in (setup.farm.logs[1].parent / "cas").rglob("*")
                  if p.is_file() and p.read_bytes() == fake)
    stored.write_bytes(b"\x7fELF poisoned bytes!" * 10)  # same size, other bytes
    wrong_digest = result(("k2.hip", "gfx90a"))
    obj2 = next(f for f in wrong_digest.output_files if f.path.endswith(".o"))
    obj2.digest.CopyFrom(digest(fake))
    for key, res in ((("k.hip", "gfx90a"), wrong_target), (("k2.hip", "gfx90a"), wrong_digest)):
        ac.UpdateActionResult(re_pb2.UpdateActionResultRequest(action_digest=actions[key],
                                                               action_result=res))
    channel.close()

    fresh = _pack(setup, _tree(tmp_path / "fresh"), tmp_path / "out", tmp_path / "cache",
                  "--remote-exec", setup.farm.url, *PROPERTY, "--json")
    assert fresh.rc == 0, fresh.err
    doc = json.loads(fresh.out)["remote_exec"]
    assert doc["refused"] == 2 and doc["local"] == 2, doc
    assert fresh.local_compiles == 2  # the two refused, compiled here
    [warning] = _warnings(fresh.err)
    assert "refused" in warning and ("gfx1030" in warning or "hash" in warning), warning
    for arch in ARCHES:
        assert shard_files(tmp_path / "out" / arch) == setup.local[arch], arch
