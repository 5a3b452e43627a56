"""The REAPI client's protocol edges against a scripted in-process gRPC server (what a
real farm does only by accident): an Execute stream dropped before the operation is
done is resumed with WaitExecution; a blob whose bytes are not its digest's is refused;
a server that keeps refusing costs a bounded number of tries and a few seconds; an
action-cache hit whose object was evicted runs the action."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field

import grpc
import pytest
from google.protobuf import any_pb2
from remote_servers import free_port

from ukdpack.remote.action import ActionSpec, digest_of
from ukdpack.remote.client import Executor, PoisonedResult, Policy, RemoteExecFault
from ukdpack.remote.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2 as re_pb2,
)
from ukdpack.remote.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2_grpc as re_grpc,
)
from ukdpack.remote.protos.google.longrunning import operations_pb2
from ukdpack.remote.protos.google.rpc import status_pb2
from ukdpack.remote.url import parse_url

OBJECT = b"\x7fELF the object"


@dataclass
class Script:
    """What the server does: ``drop`` Execute streams end UNAVAILABLE after one
    not-done operation; ``serve``: the bytes it gives for the object."""

    drop: int = 1
    refuse_all: bool = False
    serve: bytes = OBJECT
    cached: bool = False  # the action cache holds a result, whose object was evicted
    calls: list[str] = field(default_factory=list)
    metadata: list[dict[str, str]] = field(default_factory=list)  # each Execute call's


def _done(name: str) -> operations_pb2.Operation:
    result = re_pb2.ActionResult(exit_code=0, output_files=[
        re_pb2.OutputFile(path="out.o", digest=digest_of(OBJECT))])
    packed = any_pb2.Any()
    packed.Pack(re_pb2.ExecuteResponse(result=result))
    return operations_pb2.Operation(name=name, done=True, response=packed)


class Execution(re_grpc.ExecutionServicer):
    def __init__(self, script: Script) -> None:
        self.script = script

    def Execute(self, request: re_pb2.ExecuteRequest, context: grpc.ServicerContext
                ) -> Iterator[operations_pb2.Operation]:
        self.script.calls.append("Execute")
        self.script.metadata.append({k: str(v) for k, v in context.invocation_metadata()})
        if self.script.refuse_all:
            context.abort(grpc.StatusCode.UNAVAILABLE, "shedding load")
        yield operations_pb2.Operation(name="op-1", done=False)
        if self.script.drop > 0:
            self.script.drop -= 1
            context.abort(grpc.StatusCode.UNAVAILABLE, "stream dropped")
        yield _done("op-1")

    def WaitExecution(self, request: re_pb2.WaitExecutionRequest,
                      context: grpc.ServicerContext) -> Iterator[operations_pb2.Operation]:
        self.script.calls.append(f"WaitExecution {request.name}")
        yield _done(request.name)


class Cache(re_grpc.ActionCacheServicer):
    def __init__(self, script: Script) -> None:
        self.script = script

    def GetActionResult(self, request: re_pb2.GetActionResultRequest,
                        context: grpc.ServicerContext) -> re_pb2.ActionResult:
        if not self.script.cached:
            context.abort(grpc.StatusCode.NOT_FOUND, "no entry")
        response = re_pb2.ExecuteResponse()
        _done("cached").response.Unpack(response)
        return response.result


class Cas(re_grpc.ContentAddressableStorageServicer):
    def __init__(self, script: Script) -> None:
        self.script = script

    def FindMissingBlobs(self, request: re_pb2.FindMissingBlobsRequest,
                         context: grpc.ServicerContext) -> re_pb2.FindMissingBlobsResponse:
        return re_pb2.FindMissingBlobsResponse()

    def BatchReadBlobs(self, request: re_pb2.BatchReadBlobsRequest,
                       context: grpc.ServicerContext) -> re_pb2.BatchReadBlobsResponse:
        if self.script.cached:  # evicted once, then stored again by the execution
            self.script.cached = False
            return re_pb2.BatchReadBlobsResponse(responses=[
                re_pb2.BatchReadBlobsResponse.Response(
                    digest=d, status=status_pb2.Status(code=grpc.StatusCode.NOT_FOUND.value[0]))
                for d in request.digests])
        return re_pb2.BatchReadBlobsResponse(responses=[
            re_pb2.BatchReadBlobsResponse.Response(digest=d, data=self.script.serve)
            for d in request.digests])


@pytest.fixture
def server() -> Iterator[tuple[Script, str]]:
    script = Script()
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    re_grpc.add_ExecutionServicer_to_server(Execution(script), srv)
    re_grpc.add_ActionCacheServicer_to_server(Cache(script), srv)
    re_grpc.add_ContentAddressableStorageServicer_to_server(Cas(script), srv)
    port = free_port()
    srv.add_insecure_port(f"127.0.0.1:{port}")
    srv.start()
    yield script, f"grpc://127.0.0.1:{port}"
    srv.stop(None)


SPEC = ActionSpec(("cc", "a.c"), {"a.c": b"int x;"}, ("out.o",), timeout=10)


def _executor(url: str) -> Executor:
    ex = Executor(parse_url(url), jobs=4, policy=Policy(call=5, backoff=0.05))
    ex.start()  # GetCapabilities is UNIMPLEMENTED here: defaults
    return ex


def test_a_dropped_execute_stream_is_resumed_with_wait_execution(
        server: tuple[Script, str]) -> None:
    script, url = server
    ex = _executor(url)
    try:
        result = ex.run(SPEC)
    finally:
        ex.close()
    assert result.outputs == {"out.o": OBJECT} and result.exit_code == 0
    assert script.calls == ["Execute", "WaitExecution op-1"]
    assert ex.counts.retries == 1 and ex.counts.executed == 1


def test_bytes_that_are_not_their_digests_are_refused(server: tuple[Script, str]) -> None:
    script, url = server
    script.drop, script.serve = 0, b"\x7fELF other bytes"
    ex = _executor(url)
    try:
        with pytest.raises(PoisonedResult, match="do not hash"):
            ex.run(SPEC)
    finally:
        ex.close()


def test_a_server_that_keeps_refusing_costs_bounded_tries(server: tuple[Script, str]) -> None:
    script, url = server
    script.refuse_all = True
    ex = _executor(url)
    started = time.monotonic()
    try:
        with pytest.raises(RemoteExecFault, match="Execute: UNAVAILABLE"):
            ex.run(SPEC)
    finally:
        ex.close()
    assert script.calls == ["Execute"] * (1 + Policy().stream_retries)
    assert time.monotonic() - started < 5


def test_a_cached_result_whose_object_was_evicted_runs_the_action(
        server: tuple[Script, str]) -> None:
    script, url = server
    script.drop, script.cached = 0, True
    ex = _executor(url)
    try:
        result = ex.run(SPEC)
    finally:
        ex.close()
    assert result.outputs == {"out.o": OBJECT} and not result.cached
    assert script.calls == ["Execute"]


def test_the_environments_headers_reach_the_farm_with_every_call(
        server: tuple[Script, str], monkeypatch: pytest.MonkeyPatch) -> None:
    script, url = server
    script.drop = 0
    monkeypatch.setenv("UKDPACK_REMOTE_EXEC_HEADERS", "X-BuildBuddy-API-Key=Bb-Key-7788")
    monkeypatch.setenv("UKDPACK_REMOTE_EXEC_TOKEN", "Tok-123456")
    ex = _executor(url)
    try:
        ex.run(SPEC)
    finally:
        ex.close()
    [sent] = script.metadata
    assert sent["x-buildbuddy-api-key"] == "Bb-Key-7788"
    assert sent["authorization"] == "Bearer Tok-123456"
