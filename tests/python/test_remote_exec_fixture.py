"""The remote-execution test farm itself (tests/python/remote_exec_servers.py): a real
BuildGrid with PostgreSQL and two Bots-API workers on loopback runs REAPI actions, a
hipcc device-only compile among them, and answers a repeat from its action cache."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from hip_objects import hip_env
from remote_exec_servers import Farm, ReapiClient, farm, genco_argv, toolchain

from ukdpack.produce.codeobject import target_arch

KERNEL = b"""\
#include <hip/hip_runtime.h>
extern "C" __global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
"""


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    yield from farm(tmp_path_factory.mktemp("farm"), workers=2)


@pytest.fixture
def client(remote: Farm) -> Iterator[ReapiClient]:
    c = ReapiClient(remote)
    yield c
    c.channel.close()


def worker_runs(remote: Farm) -> int:
    """Actions the workers ran so far (one log line each)."""
    return sum(p.read_text().count(": exit ") for p in remote.logs if p.name.startswith("worker"))


def test_a_worker_runs_an_action_in_its_input_root(client: ReapiClient) -> None:
    argv = ["/bin/sh", "-c", "mkdir -p out && tr a-z A-Z < in.txt > out/up.txt; "
            "echo to-stdout; echo \"$GREETING\" >&2; exit 3"]
    action = client.action(argv, {"in.txt": b"hello farm\n"}, ["out/up.txt"],
                           env={"GREETING": "from the command's env"}, cache=False)
    response = client.execute(action)
    assert response.status.code == 0, response.status
    result = response.result
    assert result.exit_code == 3
    assert client.read(result.stdout_digest) == b"to-stdout\n"
    assert client.read(result.stderr_digest) == b"from the command's env\n"
    assert [f.path for f in result.output_files] == ["out/up.txt"]
    assert client.read(result.output_files[0].digest) == b"HELLO FARM\n"
    assert not response.cached_result


def test_a_hip_compile_comes_back_byte_identical_and_then_from_the_action_cache(
        client: ReapiClient, remote: Farm, tmp_path: Path) -> None:
    argv = genco_argv("kernel.hip", "kernel.co")
    (tmp_path / "kernel.hip").write_bytes(KERNEL)
    subprocess.run(argv, cwd=tmp_path, env=hip_env(), check=True, capture_output=True)
    local = (tmp_path / "kernel.co").read_bytes()

    action = client.action(argv, {"kernel.hip": KERNEL}, ["kernel.co"],
                           env={"HIP_PLATFORM": "amd"}, toolchain_value=toolchain())
    runs = worker_runs(remote)
    first = client.execute(action)
    assert first.status.code == 0 and first.result.exit_code == 0, \
        (first, client.read(first.result.stderr_digest))
    assert not first.cached_result
    [out] = first.result.output_files
    assert out.path == "kernel.co"
    remote_bytes = client.read(out.digest)
    assert target_arch(remote_bytes) == "gfx90a"  # a code object (hipcc: in a bundle)
    assert remote_bytes == local, "the worker's object differs from the local compile's"
    assert worker_runs(remote) == runs + 1

    again = client.execute(action)
    assert again.cached_result
    assert again.result.output_files[0].digest == out.digest
    assert worker_runs(remote) == runs + 1, "the repeat ran on a worker"


def test_a_failed_compile_returns_the_compilers_exit_code_and_stderr(
        client: ReapiClient, tmp_path: Path) -> None:
    broken = KERNEL.replace(b"x[i] *= a;", b"x[i] *= undeclared_name;")
    argv = genco_argv("kernel.hip", "kernel.co")
    (tmp_path / "kernel.hip").write_bytes(broken)
    local = subprocess.run(argv, cwd=tmp_path, env=hip_env(), check=False,
                           capture_output=True)
    assert local.returncode != 0 and b"undeclared_name" in local.stderr

    action = client.action(argv, {"kernel.hip": broken}, ["kernel.co"],
                           env={"HIP_PLATFORM": "amd"}, toolchain_value=toolchain(),
                           cache=False)
    response = client.execute(action)
    assert response.status.code == 0, response.status
    assert response.result.exit_code == local.returncode
    assert client.read(response.result.stderr_digest) == local.stderr
    assert not response.result.output_files


def test_an_action_for_another_toolchain_reaches_no_worker(client: ReapiClient,
                                                           remote: Farm) -> None:
    runs = worker_runs(remote)
    action = client.action(["/bin/true"], {}, [], toolchain_value="another-compiler",
                           cache=False)
    with pytest.raises(grpc.RpcError) as caught:
        client.execute(action, timeout=1.0)
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert worker_runs(remote) == runs
