"""The remote-execution test farm itself (tests/python/remote_exec_servers.py): a real
BuildGrid with PostgreSQL and two Bots-API workers on loopback runs REAPI actions, a
hipcc device-only compile among them, and answers a repeat from its action cache."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from hip_objects import hip_env, hipcc, hipcc_identity
from remote_exec_servers import TOOLCHAIN_KEY, Farm, farm

from ukdpack.produce.codeobject import target_arch
from ukdpack.remote.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2 as re_pb2,
)
from ukdpack.remote.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2_grpc as re_grpc,
)

KERNEL = b"""\
#include <hip/hip_runtime.h>
extern "C" __global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
"""


def toolchain() -> str:
    """What the workers and actions name as the compiler (the tests' stand-in for the
    compile cache's fingerprint)."""
    return hashlib.sha256(hipcc_identity(hipcc()).encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    yield from farm(tmp_path_factory.mktemp("farm"), workers=2,
                    properties={"OSFamily": "linux", TOOLCHAIN_KEY: toolchain()})


def digest(data: bytes) -> re_pb2.Digest:
    return re_pb2.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


class Client:
    """The few REAPI calls a test makes, on one channel."""

    def __init__(self, remote: Farm) -> None:
        self.remote = remote
        self.channel = grpc.insecure_channel(remote.address)
        self.cas = re_grpc.ContentAddressableStorageStub(self.channel)
        self.execution = re_grpc.ExecutionStub(self.channel)

    def action(self, argv: list[str], inputs: dict[str, bytes], outputs: list[str],
               env: dict[str, str] | None = None, toolchain_value: str | None = None,
               cache: bool = True) -> re_pb2.Digest:
        """Stores an action (its command, a flat input root of ``inputs``) and its
        blobs; its digest."""
        props = dict(self.remote.properties)
        if toolchain_value is not None:
            props[TOOLCHAIN_KEY] = toolchain_value
        root = re_pb2.Directory(files=[re_pb2.FileNode(name=n, digest=digest(b))
                                       for n, b in sorted(inputs.items())])
        command = re_pb2.Command(
            arguments=argv, output_paths=sorted(outputs),
            environment_variables=[re_pb2.Command.EnvironmentVariable(name=k, value=v)
                                   for k, v in sorted((env or {}).items())],
            platform=re_pb2.Platform(properties=[
                re_pb2.Platform.Property(name=k, value=v) for k, v in sorted(props.items())]))
        blobs = [*inputs.values(), root.SerializeToString(), command.SerializeToString()]
        action = re_pb2.Action(command_digest=digest(blobs[-1]),
                               input_root_digest=digest(blobs[-2]), do_not_cache=not cache)
        blobs.append(action.SerializeToString())
        self.cas.BatchUpdateBlobs(re_pb2.BatchUpdateBlobsRequest(requests=[
            re_pb2.BatchUpdateBlobsRequest.Request(digest=digest(b), data=b) for b in blobs]))
        return digest(blobs[-1])

    def execute(self, action: re_pb2.Digest, timeout: float = 60) -> re_pb2.ExecuteResponse:
        """Execute, streamed to the end."""
        for op in self.execution.Execute(re_pb2.ExecuteRequest(action_digest=action),
                                         timeout=timeout):
            if op.done:
                assert op.WhichOneof("result") == "response", op
                response = re_pb2.ExecuteResponse()
                op.response.Unpack(response)
                return response
        raise AssertionError(f"the Execute stream ended before the action was done\n"
                             f"{self.remote.log_tails()}")

    def read(self, d: re_pb2.Digest) -> bytes:
        reply = self.cas.BatchReadBlobs(re_pb2.BatchReadBlobsRequest(digests=[d]))
        return bytes(reply.responses[0].data)


@pytest.fixture
def client(remote: Farm) -> Iterator[Client]:
    c = Client(remote)
    yield c
    c.channel.close()


def worker_runs(remote: Farm) -> int:
    """Actions the workers ran so far (one log line each)."""
    return sum(p.read_text().count(": exit ") for p in remote.logs if p.name.startswith("worker"))


def test_a_worker_runs_an_action_in_its_input_root(client: Client) -> None:
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
        client: Client, remote: Farm, tmp_path: Path) -> None:
    # The packer's device-only hipcc command line (produce/compiler.py), relative to
    # the input root.
    argv = [hipcc(), "--genco", "--offload-arch=gfx90a", "-O3", "-fuse-cuid=none",
            "kernel.hip", "-o", "kernel.co"]
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


def test_an_action_for_another_toolchain_reaches_no_worker(client: Client,
                                                           remote: Farm) -> None:
    runs = worker_runs(remote)
    action = client.action(["/bin/true"], {}, [], toolchain_value="another-compiler",
                           cache=False)
    with pytest.raises(grpc.RpcError) as caught:
        client.execute(action, timeout=1.0)
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert worker_runs(remote) == runs
