"""A remote-execution worker for the tests: a stand-in for a build farm's own workers
(buildbox-worker with buildbox-run, or Buildbarn's bb_worker and bb_runner), which
neither Debian nor PyPI ships.

It speaks the Remote Workers Bots API (google.devtools.remoteworkers.v1test2) to a
BuildGrid server: opens a bot session whose one device carries the platform properties
it is given (``--property OSFamily=linux --property ukdpack-toolchain=<fingerprint>``;
the server hands it only actions asking for those), and for each lease: reads the Action
and its Command from the content store, lays the input root out in a temporary folder,
runs the command's argv there (in its working directory, with its environment over the
worker's own, bounded by the action's timeout), uploads the outputs it names and
stdout/stderr, and completes the lease with the ActionResult. One lease at a time, as
one buildbox-worker with one runner slot.

Run: ``python worker.py --server 127.0.0.1:PORT --bot-id w1 [--instance NAME]
[--property K=V ...]``; it logs one line per lease to stderr and stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
from google.protobuf import any_pb2

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bots_protos.google.devtools.remoteworkers.v1test2 import (
    bots_pb2,
    bots_pb2_grpc,
    worker_pb2,
)

from ukdpack.remote.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2 as re_pb2,
)
from ukdpack.remote.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2_grpc as re_grpc,
)
from ukdpack.remote.protos.google.bytestream import (
    bytestream_pb2,
    bytestream_pb2_grpc,
)
from ukdpack.remote.protos.google.rpc import status_pb2

#: Blobs at most this big go through the batch calls, bigger ones through ByteStream
#: (BuildGrid's default gRPC message limit is 4 MiB).
BATCH_LIMIT = 2 * 1024 * 1024
CHUNK = 1024 * 1024
#: google.rpc.Code values the worker reports.
OK, INVALID_ARGUMENT, DEADLINE_EXCEEDED = 0, 3, 4


def digest_of(data: bytes) -> re_pb2.Digest:
    """The REAPI digest (sha256, size) of ``data``."""
    return re_pb2.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


class Cas:
    """The server's content store, as a worker reads and fills it."""

    def __init__(self, channel: grpc.Channel, instance: str) -> None:
        self.instance = instance
        self.cas = re_grpc.ContentAddressableStorageStub(channel)
        self.bytestream = bytestream_pb2_grpc.ByteStreamStub(channel)

    def read(self, digest: re_pb2.Digest) -> bytes:
        """The blob of ``digest``, checked against it."""
        if digest.size_bytes == 0:
            return b""
        if digest.size_bytes <= BATCH_LIMIT:
            reply = self.cas.BatchReadBlobs(re_pb2.BatchReadBlobsRequest(
                instance_name=self.instance, digests=[digest]))
            found = reply.responses[0]
            if found.status.code != OK:
                raise RuntimeError(f"cannot read {digest.hash}: {found.status.message}")
            data = found.data
        else:
            name = f"{self.instance}/blobs/{digest.hash}/{digest.size_bytes}".lstrip("/")
            data = b"".join(r.data for r in self.bytestream.Read(
                bytestream_pb2.ReadRequest(resource_name=name)))
        if digest_of(data) != digest:
            raise RuntimeError(f"the store gave other bytes for {digest.hash}")
        return data

    def write(self, blobs: list[bytes]) -> None:
        """Stores every blob (small ones batched)."""
        small = [b for b in blobs if len(b) <= BATCH_LIMIT]
        for big in (b for b in blobs if len(b) > BATCH_LIMIT):
            d = digest_of(big)
            name = (f"{self.instance}/uploads/{uuid.uuid4()}/blobs/{d.hash}/{d.size_bytes}"
                    .lstrip("/"))

            def chunks(data: bytes = big, name: str = name) -> Iterator[bytestream_pb2.WriteRequest]:
                for off in range(0, len(data), CHUNK):
                    yield bytestream_pb2.WriteRequest(
                        resource_name=name if off == 0 else "", write_offset=off,
                        data=data[off:off + CHUNK], finish_write=off + CHUNK >= len(data))

            self.bytestream.Write(chunks())
        batch: list[re_pb2.BatchUpdateBlobsRequest.Request] = []
        size = 0
        for b in [*small, None]:
            if b is None or size + len(b) > BATCH_LIMIT:
                if batch:
                    reply = self.cas.BatchUpdateBlobs(re_pb2.BatchUpdateBlobsRequest(
                        instance_name=self.instance, requests=batch))
                    bad = [r for r in reply.responses if r.status.code != OK]
                    if bad:
                        raise RuntimeError(f"cannot store {bad[0].digest.hash}: "
                                           f"{bad[0].status.message}")
                batch, size = [], 0
            if b is not None:
                batch.append(re_pb2.BatchUpdateBlobsRequest.Request(digest=digest_of(b), data=b))
                size += len(b)

    def fetch_tree(self, digest: re_pb2.Digest, path: Path) -> None:
        """Lays the Directory of ``digest`` out under ``path``."""
        path.mkdir(parents=True, exist_ok=True)
        directory = re_pb2.Directory.FromString(self.read(digest))
        for f in directory.files:
            (path / f.name).write_bytes(self.read(f.digest))
            (path / f.name).chmod(0o755 if f.is_executable else 0o644)
        for link in directory.symlinks:
            (path / link.name).symlink_to(link.target)
        for sub in directory.directories:
            self.fetch_tree(sub.digest, path / sub.name)


def _directory(path: Path, blobs: list[bytes],
               children: list[re_pb2.Directory]) -> re_pb2.Directory:
    """The Directory message of ``path`` (files' bytes into ``blobs``, sub-directories
    into ``children``)."""
    out = re_pb2.Directory()
    for entry in sorted(path.iterdir()):
        if entry.is_symlink():
            out.symlinks.add(name=entry.name, target=os.readlink(entry))
        elif entry.is_dir():
            sub = _directory(entry, blobs, children)
            children.append(sub)
            out.directories.add(name=entry.name, digest=digest_of(sub.SerializeToString()))
        else:
            data = entry.read_bytes()
            blobs.append(data)
            out.files.add(name=entry.name, digest=digest_of(data),
                          is_executable=os.access(entry, os.X_OK))
    return out


def run_action(cas: Cas, action: re_pb2.Action, log: str) -> tuple[re_pb2.ActionResult, int, str]:
    """Runs one action: its result, a google.rpc code and a message for the lease."""
    command = re_pb2.Command.FromString(cas.read(action.command_digest))
    result = re_pb2.ActionResult()
    with tempfile.TemporaryDirectory(prefix="ukdpack-worker-") as tmp:
        root = Path(tmp) / "root"
        cas.fetch_tree(action.input_root_digest, root)
        outputs = list(command.output_paths) or [*command.output_files,
                                                 *command.output_directories]
        cwd = root / command.working_directory
        for out in outputs:  # REAPI: the worker makes the outputs' parent folders
            (cwd / out).parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update({v.name: v.value for v in command.environment_variables})
        timeout = action.timeout.ToTimedelta().total_seconds() or None
        start = time.monotonic()
        try:
            done = subprocess.run(list(command.arguments), cwd=cwd, env=env,
                                  capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as e:
            return result, DEADLINE_EXCEEDED, f"timed out after {e.timeout} s"
        except OSError as e:
            return result, INVALID_ARGUMENT, f"cannot run {command.arguments[0]!r}: {e}"
        blobs = [done.stdout, done.stderr]
        for out in outputs:
            found = cwd / out
            if found.is_file() and not found.is_symlink():
                data = found.read_bytes()
                blobs.append(data)
                result.output_files.add(path=out, digest=digest_of(data),
                                        is_executable=os.access(found, os.X_OK))
            elif found.is_dir():
                children: list[re_pb2.Directory] = []
                tree = re_pb2.Tree(root=_directory(found, blobs, children), children=children)
                data = tree.SerializeToString()
                blobs += [data, *(c.SerializeToString() for c in children)]
                result.output_directories.add(path=out, tree_digest=digest_of(data))
        result.exit_code = done.returncode
        result.stdout_digest.CopyFrom(digest_of(done.stdout))
        result.stderr_digest.CopyFrom(digest_of(done.stderr))
        cas.write(blobs)
        print(f"{log}: exit {done.returncode} in {time.monotonic() - start:.3f} s: "
              f"{list(command.arguments)}", file=sys.stderr, flush=True)
    return result, OK, ""


def main() -> int:
    """Serve leases until SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True, help="HOST:PORT of the Bots service")
    parser.add_argument("--instance", default="")
    parser.add_argument("--bot-id", required=True)
    parser.add_argument("--property", action="append", default=[], metavar="K=V")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    channel = grpc.insecure_channel(args.server)
    bots = bots_pb2_grpc.BotsStub(channel)
    cas = Cas(channel, args.instance)
    props = [worker_pb2.Device.Property(key=k, value=v)
             for k, v in (p.split("=", 1) for p in args.property)]
    request = bots_pb2.CreateBotSessionRequest(
        parent=args.instance, bot_session=bots_pb2.BotSession(
            bot_id=args.bot_id, status=bots_pb2.OK,
            worker=worker_pb2.Worker(devices=[worker_pb2.Device(
                handle=args.bot_id, properties=props)])))
    # BuildGrid long-polls for work for 80% of a call's deadline, unless that is under
    # its network timeout (3 s): a deadline of 3.5 s registers the bot at once. Retried
    # for a while, as a busy server may answer late.
    give_up = time.monotonic() + 30
    while True:
        try:
            session = bots.CreateBotSession(request, wait_for_ready=True, timeout=3.5)
            break
        except grpc.RpcError as e:
            if time.monotonic() > give_up or e.code() not in (
                    grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
                raise
    print(f"{args.bot_id}: session {session.name}", file=sys.stderr, flush=True)
    while True:
        for lease in session.leases:
            if lease.state not in (bots_pb2.LeaseState.PENDING, bots_pb2.LeaseState.ACTIVE):
                continue
            # BuildGrid 0.4 sends the Action itself; the API also allows its Digest.
            action = re_pb2.Action()
            if lease.payload.Is(re_pb2.Action.DESCRIPTOR):
                lease.payload.Unpack(action)
            else:
                digest = re_pb2.Digest()
                lease.payload.Unpack(digest)
                action.ParseFromString(cas.read(digest))
            try:
                result, code, message = run_action(cas, action, f"{args.bot_id} {lease.id}")
            except (grpc.RpcError, RuntimeError, OSError) as e:
                result, code, message = re_pb2.ActionResult(), INVALID_ARGUMENT, str(e)
                print(f"{args.bot_id} {lease.id}: failed: {e}", file=sys.stderr, flush=True)
            packed = any_pb2.Any()
            packed.Pack(result)
            lease.result.CopyFrom(packed)
            lease.status.CopyFrom(status_pb2.Status(code=code, message=message))
            lease.state = bots_pb2.LeaseState.COMPLETED
        session = bots.UpdateBotSession(bots_pb2.UpdateBotSessionRequest(
            name=session.name, bot_session=session), timeout=60)


if __name__ == "__main__":
    sys.exit(main())
