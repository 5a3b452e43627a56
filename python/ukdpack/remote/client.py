"""A REAPI client that keeps many actions in flight: an asyncio loop on a thread of its
own drives ``grpc.aio`` calls; callers on any thread ``submit`` an action and wait on the
future, or ``run`` it.

Per action: ActionCache lookup; FindMissingBlobs, then BatchUpdateBlobs for what is
missing (ByteStream Write for a blob above the batch limit); Execute, streamed, with
WaitExecution when the stream drops before the operation is done; the outputs, stdout
and stderr fetched (BatchReadBlobs, ByteStream Read above the limit) and each re-hashed
against its digest. Deadlines and retries (``Policy``) are bounded: a server that does
not answer costs at most a few seconds before ``RemoteExecFault`` says why.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
import grpc.aio

from ukdpack.remote.action import ActionSpec, BuiltAction, build_action, digest_of
from ukdpack.remote.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2 as re_pb2,
)
from ukdpack.remote.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2_grpc as re_grpc,
)
from ukdpack.remote.protos.google.bytestream import bytestream_pb2, bytestream_pb2_grpc
from ukdpack.remote.url import ServiceUrl, exec_headers

#: Actions in flight by default: a farm's size, not this machine's cores.
DEFAULT_JOBS = 64
#: gRPC's default message limit is 4 MiB: batches stay under it, with room for framing.
BATCH_LIMIT = 3 << 20
CHUNK = 1 << 20  # ByteStream chunk size
#: Codes worth another try: the server restarting, shedding load, or a dropped connection.
RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED,
                       grpc.StatusCode.ABORTED})

T = TypeVar("T")


@dataclass(frozen=True)
class Policy:
    """Deadlines (seconds) and retries; docs/packing.md ("Remote execution") lists them."""

    connect: float = 5.0  # first contact (GetCapabilities)
    call: float = 30.0  # one content-store or action-cache call
    retries: int = 2  # further tries of a call failing with a RETRYABLE code
    backoff: float = 0.2  # seconds before the first retry, doubled each time
    execute_margin: float = 60.0  # Execute's deadline is the action's timeout plus this
    stream_retries: int = 3  # WaitExecution calls after a dropped Execute stream


class RemoteExecFault(Exception):
    """The service cannot be used (down, refusing, an answer that makes no sense); the
    message names no credential."""


class PoisonedResult(RemoteExecFault):
    """An answer whose bytes do not hash to the digest it names."""


@dataclass(frozen=True)
class ExecResult:
    """What an action gave: its exit code, stdout, stderr and output files (path ->
    bytes, each checked against its digest); ``cached``: from the action cache."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    outputs: Mapping[str, bytes]
    cached: bool
    action_digest: str  # sha256 of the Action (its action-cache key)
    uploaded: int = 0  # bytes this action uploaded


@dataclass
class _Counts:
    uploaded_bytes: int = 0
    executed: int = 0
    cache_hits: int = 0
    retries: int = 0


@dataclass
class Executor:
    """Actions on the service at ``url``, at most ``jobs`` at a time; ``start`` first."""

    url: ServiceUrl
    jobs: int = DEFAULT_JOBS
    policy: Policy = field(default_factory=Policy)
    counts: _Counts = field(default_factory=_Counts)

    def __post_init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="ukdpack-remote-exec")
        self._thread.start()
        self._metadata = self.url.metadata() + exec_headers()
        self._channel: grpc.aio.Channel | None = None
        self._tasks: set[concurrent.futures.Future[Any]] = set()
        self._lock = threading.Lock()
        self._batch_limit = BATCH_LIMIT

    # ------------------------------------------------------------ life
    def _go(self, coro: Awaitable[T]) -> concurrent.futures.Future[T]:
        async def wrapped() -> T:
            return await coro
        future = asyncio.run_coroutine_threadsafe(wrapped(), self._loop)
        with self._lock:
            self._tasks.add(future)
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._tasks.discard(future)

    def start(self) -> None:
        """Open the channel and ask the server what it can do; RemoteExecFault when it
        cannot be reached or refuses within ``policy.connect`` seconds."""
        self._go(self._start()).result()

    async def _start(self) -> None:
        options = [("grpc.max_receive_message_length", 64 << 20),
                   ("grpc.max_send_message_length", 64 << 20),
                   ("grpc.enable_retries", 0)]
        if self.url.secure:
            self._channel = grpc.aio.secure_channel(self.url.target,
                                                    grpc.ssl_channel_credentials(), options)
        else:
            self._channel = grpc.aio.insecure_channel(self.url.target, options)
        self._sem = asyncio.Semaphore(max(1, self.jobs))
        self._cas = re_grpc.ContentAddressableStorageStub(self._channel)  # type: ignore[no-untyped-call]
        self._ac = re_grpc.ActionCacheStub(self._channel)  # type: ignore[no-untyped-call]
        self._exec = re_grpc.ExecutionStub(self._channel)  # type: ignore[no-untyped-call]
        self._bs = bytestream_pb2_grpc.ByteStreamStub(self._channel)  # type: ignore[no-untyped-call]
        caps = re_grpc.CapabilitiesStub(self._channel)  # type: ignore[no-untyped-call]
        try:
            found = await caps.GetCapabilities(
                re_pb2.GetCapabilitiesRequest(instance_name=self.url.instance),
                timeout=self.policy.connect, metadata=self._metadata)
        except grpc.aio.AioRpcError as e:
            if e.code() != grpc.StatusCode.UNIMPLEMENTED:  # a server without it still works
                raise _fault("GetCapabilities", e) from None
            return
        limit = found.cache_capabilities.max_batch_total_size_bytes
        if limit > 0:
            self._batch_limit = min(BATCH_LIMIT, max(limit - (64 << 10), 1 << 16))

    def submit(self, spec: ActionSpec) -> concurrent.futures.Future[ExecResult]:
        """Run ``spec`` on the farm; the future's result, or RemoteExecFault (its subclass
        PoisonedResult for bytes that fail their digest), or CancelledError."""
        return self._go(self._run(spec))

    def run(self, spec: ActionSpec) -> ExecResult:
        """``submit(spec).result()``."""
        return self.submit(spec).result()

    def cancel(self) -> None:
        """Cancel every action in flight (Ctrl-C): their futures raise CancelledError."""
        with self._lock:
            pending = list(self._tasks)
        for f in pending:
            f.cancel()

    def close(self) -> None:
        """Cancel what is in flight, close the channel, stop the loop's thread."""
        self.cancel()
        if self._channel is not None:
            channel = self._channel
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(channel.close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    # ------------------------------------------------------------ one action
    async def _run(self, spec: ActionSpec) -> ExecResult:
        async with self._sem:
            built = build_action(spec)
            found = await self._cached(built)
            if found is not None:
                self.counts.cache_hits += 1
                return found
            uploaded = await self._upload(built)
            self.counts.uploaded_bytes += uploaded
            response = await self._execute(built.digest, spec.timeout)
            if response.status.code != 0:
                raise RemoteExecFault(f"Execute: the server answered code "
                                      f"{response.status.code}: {response.status.message}")
            self.counts.executed += 1
            try:
                result = await self._result(response.result, spec.outputs, False,
                                            built.digest.hash)
            except _NotFound:
                raise RemoteExecFault("the action's outputs are not in the store it "
                                      "answered from") from None
            return ExecResult(result.exit_code, result.stdout, result.stderr, result.outputs,
                              response.cached_result, built.digest.hash, uploaded)

    async def _cached(self, built: BuiltAction) -> ExecResult | None:
        """The action cache's result of a successful run, else None (a cached failure is
        run again: a flaky farm's failure is not kept)."""
        request = re_pb2.GetActionResultRequest(instance_name=self.url.instance,
                                                action_digest=built.digest,
                                                inline_stdout=True, inline_stderr=True)
        try:
            found = await self._call("GetActionResult", self._ac.GetActionResult, request)
        except _NotFound:
            return None
        if found.exit_code != 0:
            return None
        spec_outputs = [f.path for f in found.output_files]
        try:
            return await self._result(found, spec_outputs, True, built.digest.hash)
        except _NotFound:  # an output evicted from the store: the action runs again
            return None

    async def _result(self, result: re_pb2.ActionResult, wanted: Sequence[str], cached: bool,
                      action: str) -> ExecResult:
        """The result's stdout, stderr and wanted outputs, each checked by its digest."""
        files = {f.path: f for f in result.output_files}
        fetch = [files[p].digest for p in wanted if p in files and not files[p].contents]
        for name in ("stdout", "stderr"):
            raw = getattr(result, f"{name}_raw")
            d = getattr(result, f"{name}_digest")
            if not raw and d.size_bytes:
                fetch.append(d)
        got = await self._read(fetch)

        def take(d: re_pb2.Digest, inline: bytes) -> bytes:
            data = inline if inline or not d.size_bytes else got[d.hash]
            if d.hash and (hashlib.sha256(data).hexdigest() != d.hash
                           or len(data) != d.size_bytes):
                raise PoisonedResult(f"the bytes given for {d.hash[:16]} do not hash to it")
            return data

        outputs = {p: take(files[p].digest, files[p].contents) for p in wanted if p in files}
        return ExecResult(result.exit_code, take(result.stdout_digest, result.stdout_raw),
                          take(result.stderr_digest, result.stderr_raw), outputs, cached,
                          action)

    # ------------------------------------------------------------ content store
    async def _upload(self, built: BuiltAction) -> int:
        """Store what the server lacks of the action's blobs; the bytes sent."""
        digests = [digest_of(b) for b in built.blobs.values()]
        missing = await self._call("FindMissingBlobs", self._cas.FindMissingBlobs,
                                   re_pb2.FindMissingBlobsRequest(
                                       instance_name=self.url.instance, blob_digests=digests))
        wanted = [built.blobs[d.hash] for d in missing.missing_blob_digests
                  if d.hash in built.blobs]
        sent = 0
        batch: list[re_pb2.BatchUpdateBlobsRequest.Request] = []
        size = 0
        for blob in [*wanted, None]:
            if blob is not None and len(blob) > self._batch_limit:
                await self._write(blob)
                sent += len(blob)
                continue
            if blob is None or size + len(blob) > self._batch_limit:
                if batch:
                    reply = await self._call("BatchUpdateBlobs", self._cas.BatchUpdateBlobs,
                                             re_pb2.BatchUpdateBlobsRequest(
                                                 instance_name=self.url.instance,
                                                 requests=batch))
                    bad = [r for r in reply.responses if r.status.code != 0]
                    if bad:
                        raise RemoteExecFault(f"BatchUpdateBlobs: the server refused a blob: "
                                              f"{bad[0].status.message}")
                batch, size = [], 0
            if blob is not None:
                batch.append(re_pb2.BatchUpdateBlobsRequest.Request(digest=digest_of(blob),
                                                                   data=blob))
                size += len(blob)
                sent += len(blob)
        return sent

    def _resource(self, d: re_pb2.Digest, upload: bool) -> str:
        head = f"{self.url.instance}/" if self.url.instance else ""
        middle = f"uploads/{uuid.uuid4()}/" if upload else ""
        return f"{head}{middle}blobs/{d.hash}/{d.size_bytes}"

    async def _write(self, blob: bytes) -> None:
        name = self._resource(digest_of(blob), True)

        async def chunks() -> AsyncIterator[bytestream_pb2.WriteRequest]:
            for off in range(0, len(blob), CHUNK):
                yield bytestream_pb2.WriteRequest(
                    resource_name=name if off == 0 else "", write_offset=off,
                    data=blob[off:off + CHUNK], finish_write=off + CHUNK >= len(blob))

        async def once() -> bytestream_pb2.WriteResponse:
            reply: bytestream_pb2.WriteResponse = await self._bs.Write(
                chunks(), timeout=self.policy.call, metadata=self._metadata)
            return reply

        await self._retrying("ByteStream.Write", once)

    async def _read(self, digests: Sequence[re_pb2.Digest]) -> dict[str, bytes]:
        """The blobs of ``digests`` by hash (not yet checked)."""
        got: dict[str, bytes] = {}
        small = [d for d in {d.hash: d for d in digests}.values() if d.size_bytes]
        for d in [d for d in small if d.size_bytes > self._batch_limit]:
            got[d.hash] = await self._read_stream(d)
        batch: list[re_pb2.Digest] = []
        size = 0
        pending: list[re_pb2.Digest | None] = [d for d in small
                                                if d.size_bytes <= self._batch_limit]
        for item in [*pending, None]:
            if item is None or size + item.size_bytes > self._batch_limit:
                if batch:
                    reply = await self._call("BatchReadBlobs", self._cas.BatchReadBlobs,
                                             re_pb2.BatchReadBlobsRequest(
                                                 instance_name=self.url.instance,
                                                 digests=batch))
                    for r in reply.responses:
                        if r.status.code == grpc.StatusCode.NOT_FOUND.value[0]:
                            raise _NotFound()
                        if r.status.code != 0:
                            raise RemoteExecFault(f"BatchReadBlobs: {r.digest.hash[:16]} "
                                                  f"missing: {r.status.message}")
                        got[r.digest.hash] = bytes(r.data)
                batch, size = [], 0
            if item is not None:
                batch.append(item)
                size += item.size_bytes
        missing = [d.hash[:16] for d in small if d.hash not in got]
        if missing:
            raise RemoteExecFault(f"BatchReadBlobs: the server did not return {missing[0]}")
        return got

    async def _read_stream(self, d: re_pb2.Digest) -> bytes:
        async def once() -> bytes:
            parts = []
            try:
                async for r in self._bs.Read(bytestream_pb2.ReadRequest(
                        resource_name=self._resource(d, False)), timeout=self.policy.call,
                        metadata=self._metadata):
                    parts.append(r.data)
            except grpc.aio.AioRpcError as e:
                if e.code() == grpc.StatusCode.NOT_FOUND:
                    raise _NotFound() from None
                raise
            return b"".join(parts)
        return await self._retrying("ByteStream.Read", once)

    # ------------------------------------------------------------ execution
    async def _execute(self, action: re_pb2.Digest, timeout: float | None
                       ) -> re_pb2.ExecuteResponse:
        """Execute streamed to the operation's end; WaitExecution on a dropped stream."""
        deadline = (timeout or 3600.0) + self.policy.execute_margin
        name = ""
        tries = 0
        while True:
            if name:
                call = self._exec.WaitExecution(re_pb2.WaitExecutionRequest(name=name),
                                                timeout=deadline, metadata=self._metadata)
            else:
                call = self._exec.Execute(re_pb2.ExecuteRequest(
                    instance_name=self.url.instance, action_digest=action,
                    skip_cache_lookup=True), timeout=deadline, metadata=self._metadata)
            try:
                async for op in call:
                    name = op.name or name
                    if op.done:
                        if op.WhichOneof("result") == "error":
                            raise RemoteExecFault(f"Execute: {op.error.message or 'failed'} "
                                                  f"(code {op.error.code})")
                        response = re_pb2.ExecuteResponse()
                        if not op.response.Unpack(response):
                            raise RemoteExecFault("Execute: the operation's response is no "
                                                  "ExecuteResponse")
                        return response
            except grpc.aio.AioRpcError as e:
                if e.code() not in RETRYABLE or tries >= self.policy.stream_retries:
                    raise _fault("Execute", e) from None
            tries += 1  # the stream ended or dropped before the operation was done
            if tries > self.policy.stream_retries:
                raise RemoteExecFault("Execute: the stream ended before the action was done")
            self.counts.retries += 1
            await asyncio.sleep(self.policy.backoff * 2 ** (tries - 1))

    # ------------------------------------------------------------ calls
    async def _call(self, what: str, method: Callable[..., Any], request: Any) -> Any:
        async def once() -> Any:
            try:
                return await method(request, timeout=self.policy.call,
                                    metadata=self._metadata)
            except grpc.aio.AioRpcError as e:
                if e.code() == grpc.StatusCode.NOT_FOUND:
                    raise _NotFound() from None
                raise
        return await self._retrying(what, once)

    async def _retrying(self, what: str, once: Callable[[], Awaitable[T]]) -> T:
        """``once()``, tried again (at most ``policy.retries`` times, backing off) while it
        fails with a RETRYABLE code; else RemoteExecFault."""
        for attempt in range(self.policy.retries + 1):
            try:
                return await once()
            except grpc.aio.AioRpcError as e:
                if e.code() not in RETRYABLE or attempt == self.policy.retries:
                    raise _fault(what, e) from None
                self.counts.retries += 1
                await asyncio.sleep(self.policy.backoff * 2 ** attempt)
        raise AssertionError("unreachable")


class _NotFound(Exception):
    pass


def _fault(what: str, e: grpc.aio.AioRpcError) -> RemoteExecFault:
    """A fault naming the call and the gRPC status (never the metadata)."""
    details = (e.details() or "").splitlines()[0] if e.details() else ""
    return RemoteExecFault(f"{what}: {e.code().name}" + (f" ({details[:200]})" if details
                                                          else ""))
