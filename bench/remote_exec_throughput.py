"""Remote execution with many actions in flight: per-action overhead, throughput with
1, 2 and 4 workers, action-cache hits and uploads, on the tests' farm (a real BuildGrid
0.4.4 with PostgreSQL and N workers, ``tests/python/remote_exec_servers.py``) on loopback.

    python bench/remote_exec_throughput.py [--workers 1 2 4] [--trivial 128]
        [--compiles 64] [--rounds 2] [--compile-rounds 1] [--in-flight 64]
    [--poll 0.05] [--threads 160] [--out FILE]

The client is asynchronous (grpc.aio) and keeps ``--in-flight`` actions going, each as
a pack would send it: FindMissingBlobs of its blobs, BatchUpdateBlobs of the missing
ones, GetActionResult (a miss), Execute streamed to done, BatchReadBlobs of its output.
Two kinds of action, each new (nothing cached, nothing deduplicated):

* ``trivial``: ``/bin/cp in.txt out.txt`` of a 1 KiB input: what the farm costs;
* ``compile``: the packer's ``hipcc --genco`` (gfx90a) of one translation unit of the
  bench's hip trees (``make_tree.hip_unit``: 25 kernels and a produce/consume pair).

Overhead, per action: ``(W_farm - W_local) / M``, where ``W_farm`` is the wall time of
``M`` actions through the farm (the client pipeline above, ``--in-flight`` at a time)
and ``W_local`` the wall time of the same ``M`` commands run here from prepared folders,
``N`` at a time, ``N`` being the number of workers (the farm runs one action per worker
at a time, so both sides run the commands equally parallel). Each side runs in every
round, in alternating order, so a busy machine moves both. Writes
``bench/results/remote_exec_throughput.json`` (seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO / "tests" / "python"))
sys.path.insert(0, str(BENCH))
from hip_objects import hip_env  # noqa: E402
from make_tree import ENTRIES_PER_UNIT, hip_unit  # noqa: E402
from remote_exec_servers import Farm, digest, farm, genco_argv  # noqa: E402

from ukdpack.remote.protos.build.bazel.remote.execution.v2 import (  # noqa: E402
    remote_execution_pb2 as re_pb2,
)
from ukdpack.remote.protos.build.bazel.remote.execution.v2 import (  # noqa: E402
    remote_execution_pb2_grpc as re_grpc,
)

OK = 0


@dataclass(frozen=True)
class Job:
    """One action, ready to send: its digest, every blob it needs and the local form."""

    kind: str  # "trivial" or "compile"
    argv: tuple[str, ...]
    inputs: dict[str, bytes]
    output: str
    env: dict[str, str]
    action: re_pb2.Digest
    blobs: dict[str, tuple[re_pb2.Digest, bytes]]  # hash -> (digest, bytes)


def make_job(kind: str, argv: list[str], inputs: dict[str, bytes], output: str,
             env: dict[str, str], properties: dict[str, str]) -> Job:
    """The Command, input root and Action of one command, as the packer builds them."""
    root = re_pb2.Directory(files=[re_pb2.FileNode(name=n, digest=digest(b))
                                   for n, b in sorted(inputs.items())])
    command = re_pb2.Command(
        arguments=argv, output_paths=[output],
        environment_variables=[re_pb2.Command.EnvironmentVariable(name=k, value=v)
                               for k, v in sorted(env.items())],
        platform=re_pb2.Platform(properties=[
            re_pb2.Platform.Property(name=k, value=v) for k, v in sorted(properties.items())]))
    command_bytes, root_bytes = command.SerializeToString(), root.SerializeToString()
    action = re_pb2.Action(command_digest=digest(command_bytes),
                           input_root_digest=digest(root_bytes))
    action_bytes = action.SerializeToString()
    blobs = {d.hash: (d, b) for b in [*inputs.values(), root_bytes, command_bytes,
                                      action_bytes] for d in [digest(b)]}
    return Job(kind, tuple(argv), inputs, output, env, digest(action_bytes), blobs)


def jobs(kind: str, count: int, remote: Farm, tag: str) -> list[Job]:
    """``count`` new actions of ``kind``; ``tag`` keeps them apart from every other batch."""
    out = []
    for i in range(count):
        if kind == "trivial":
            data = (f"{tag} {i} ".encode() * 128)[:1024]
            out.append(make_job(kind, ["/bin/cp", "in.txt", "out.txt"], {"in.txt": data},
                                "out.txt", {}, dict(remote.properties)))
        else:
            # A unit number no other batch uses: every compile is new to the farm.
            unit = uuid.uuid4().int % 10**9
            source = hip_unit(unit, ENTRIES_PER_UNIT).encode()
            out.append(make_job(kind, genco_argv("unit.hip", "unit.co"), {"unit.hip": source},
                                "unit.co", {"HIP_PLATFORM": "amd"}, dict(remote.properties)))
    return out


@dataclass
class Stubs:
    """The REAPI services of one asynchronous channel."""

    channel: grpc.aio.Channel
    cas: re_grpc.ContentAddressableStorageStub = field(init=False)
    ac: re_grpc.ActionCacheStub = field(init=False)
    execution: re_grpc.ExecutionStub = field(init=False)

    def __post_init__(self) -> None:
        self.cas = re_grpc.ContentAddressableStorageStub(self.channel)
        self.ac = re_grpc.ActionCacheStub(self.channel)
        self.execution = re_grpc.ExecutionStub(self.channel)


PHASES = ("find_missing", "upload", "ac_lookup", "execute", "download")


async def through_farm(stubs: Stubs, job: Job, gate: asyncio.Semaphore,
                       record: dict[str, list[float]]) -> None:
    """One action the way a pack sends it; each phase's time into ``record``."""
    async with gate:
        t = [time.perf_counter()]
        missing = await stubs.cas.FindMissingBlobs(re_pb2.FindMissingBlobsRequest(
            blob_digests=[d for d, _ in job.blobs.values()]))
        t.append(time.perf_counter())
        if missing.missing_blob_digests:
            reply = await stubs.cas.BatchUpdateBlobs(re_pb2.BatchUpdateBlobsRequest(requests=[
                re_pb2.BatchUpdateBlobsRequest.Request(digest=d, data=job.blobs[d.hash][1])
                for d in missing.missing_blob_digests]))
            if any(r.status.code != OK for r in reply.responses):
                raise SystemExit(f"upload refused: {reply}")
        t.append(time.perf_counter())
        try:
            await stubs.ac.GetActionResult(re_pb2.GetActionResultRequest(action_digest=job.action))
            raise SystemExit(f"a new {job.kind} action was in the action cache")
        except grpc.aio.AioRpcError as e:
            if e.code() != grpc.StatusCode.NOT_FOUND:
                raise
        t.append(time.perf_counter())
        response = None
        async for op in stubs.execution.Execute(re_pb2.ExecuteRequest(action_digest=job.action)):
            if op.done:
                response = re_pb2.ExecuteResponse()
                op.response.Unpack(response)
                break
        t.append(time.perf_counter())
        if (response is None or response.status.code != OK or response.result.exit_code != 0
                or len(response.result.output_files) != 1):
            raise SystemExit(f"a {job.kind} action failed: {response}")
        out = await stubs.cas.BatchReadBlobs(re_pb2.BatchReadBlobsRequest(
            digests=[response.result.output_files[0].digest]))
        if out.responses[0].status.code != OK or not out.responses[0].data:
            raise SystemExit(f"cannot read the output of a {job.kind} action: {out}")
        t.append(time.perf_counter())
        for name, a, b in zip(PHASES, t[:-1], t[1:], strict=True):
            record[name].append(b - a)
        record["latency"].append(t[-1] - t[0])


TICK = os.sysconf("SC_CLK_TCK")


def farm_cpu() -> dict[str, float]:
    """CPU seconds so far of the farm's processes (this process's descendants), by role:
    ``server`` (bgd), ``database`` (postgres and its backends), ``workers`` (with the
    commands they ran and waited for), and ``client`` (this process)."""
    procs: dict[int, tuple[int, str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        # ppid, then utime, stime, cutime, cstime (fields 4 and 14-17 of proc(5))
        procs[int(entry.name)] = (int(fields[1]), cmdline,
                                  sum(int(f) for f in fields[11:15]) / TICK)
    me = os.getpid()
    roles = {"server": 0.0, "database": 0.0, "workers": 0.0}
    for pid, (ppid, _cmdline, cpu) in procs.items():
        chain, up = [pid], ppid
        while up in procs and up != me and len(chain) < 16:
            chain.append(up)
            up = procs[up][0]
        if up != me:
            continue
        top = procs[chain[-1]][1]  # the process the fixture started
        role = ("server" if "bgd" in top else "database" if "postgres" in top
                else "workers" if "worker.py" in top else None)
        if role is not None and (role != "workers" or pid == chain[-1]):
            roles[role] += cpu  # a worker's commands count through its cutime
    usage = resource.getrusage(resource.RUSAGE_SELF)
    roles["client"] = usage.ru_utime + usage.ru_stime
    return roles


async def farm_batch(address: str, batch: list[Job], in_flight: int) -> dict[str, Any]:
    """``batch`` through the farm, ``in_flight`` at a time: wall time, phase times and
    the CPU time each part of the farm spent."""
    record: dict[str, list[float]] = {p: [] for p in (*PHASES, "latency")}
    async with grpc.aio.insecure_channel(address) as channel:
        stubs = Stubs(channel)
        gate = asyncio.Semaphore(in_flight)
        before = farm_cpu()
        start = time.perf_counter()
        await asyncio.gather(*(through_farm(stubs, j, gate, record) for j in batch))
        wall = time.perf_counter() - start
        after = farm_cpu()
    return {"wall_s": wall, "phases": record,
            "cpu_s": {k: after[k] - before[k] for k in after}}


async def local_batch(batch: list[Job], folder: Path, parallel: int) -> float:
    """The same commands run here, ``parallel`` at a time, from folders laid out before the
    clock starts: the wall time."""
    dirs = []
    for i, job in enumerate(batch):
        d = folder / f"{job.kind}{i}"
        d.mkdir(parents=True)
        for name, data in job.inputs.items():
            (d / name).write_bytes(data)
        dirs.append(d)
    env = hip_env()
    gate = asyncio.Semaphore(parallel)

    async def one(job: Job, cwd: Path) -> None:
        async with gate:
            # A session of its own, as each worker (and so its commands) has one: with
            # the kernel's autogroup scheduling a busy machine shares the CPU between
            # sessions, and N compiles in this process's one session got a third of what
            # N workers' compiles got.
            proc = await asyncio.create_subprocess_exec(
                *job.argv, cwd=cwd, env={**env, **job.env}, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, start_new_session=True)
            _, err = await proc.communicate()
            if proc.returncode != 0 or not (cwd / job.output).is_file():
                raise SystemExit(f"local {job.kind} failed: {err.decode(errors='replace')}")

    start = time.perf_counter()
    await asyncio.gather(*(one(j, d) for j, d in zip(batch, dirs, strict=True)))
    return time.perf_counter() - start


async def ac_hits(address: str, batch: list[Job], in_flight: int) -> dict[str, float]:
    """GetActionResult of actions already done: one at a time (latency) and all of them
    ``in_flight`` at a time (wall per hit), each followed by reading the output."""
    async with grpc.aio.insecure_channel(address) as channel:
        stubs = Stubs(channel)

        async def hit(job: Job) -> None:
            result = await stubs.ac.GetActionResult(
                re_pb2.GetActionResultRequest(action_digest=job.action))
            await stubs.cas.BatchReadBlobs(re_pb2.BatchReadBlobsRequest(
                digests=[result.output_files[0].digest]))

        one_by_one = []
        for job in batch[:20]:
            start = time.perf_counter()
            await hit(job)
            one_by_one.append(time.perf_counter() - start)
        gate = asyncio.Semaphore(in_flight)

        async def gated(job: Job) -> None:
            async with gate:
                await hit(job)

        start = time.perf_counter()
        await asyncio.gather(*(gated(j) for j in batch))
        wall = time.perf_counter() - start
    return {"latency_median_s": statistics.median(one_by_one),
            "wall_per_hit_s": wall / len(batch), "hits_per_s": len(batch) / wall,
            "count": len(batch)}


async def uploads(address: str, batch: list[Job]) -> dict[str, float]:
    """FindMissingBlobs and BatchUpdateBlobs of new compile actions, one at a time, and
    of the whole batch in one call each (what a pack can do for a group of actions)."""
    async with grpc.aio.insecure_channel(address) as channel:
        stubs = Stubs(channel)
        half = len(batch) // 2
        find, update, sizes = [], [], []
        for job in batch[:half]:
            digests = [d for d, _ in job.blobs.values()]
            start = time.perf_counter()
            await stubs.cas.FindMissingBlobs(re_pb2.FindMissingBlobsRequest(blob_digests=digests))
            find.append(time.perf_counter() - start)
            start = time.perf_counter()
            await stubs.cas.BatchUpdateBlobs(re_pb2.BatchUpdateBlobsRequest(requests=[
                re_pb2.BatchUpdateBlobsRequest.Request(digest=d, data=b)
                for d, b in job.blobs.values()]))
            update.append(time.perf_counter() - start)
            sizes.append(sum(len(b) for _, b in job.blobs.values()))
        rest = [x for job in batch[half:] for x in job.blobs.values()]
        start = time.perf_counter()
        await stubs.cas.FindMissingBlobs(re_pb2.FindMissingBlobsRequest(
            blob_digests=[d for d, _ in rest]))
        find_all = time.perf_counter() - start
        start = time.perf_counter()
        await stubs.cas.BatchUpdateBlobs(re_pb2.BatchUpdateBlobsRequest(requests=[
            re_pb2.BatchUpdateBlobsRequest.Request(digest=d, data=b) for d, b in rest]))
        update_all = time.perf_counter() - start
    return {"find_missing_median_s": statistics.median(find),
            "batch_update_median_s": statistics.median(update),
            "bytes_per_action": statistics.median(sizes),
            "blobs_per_action": len(batch[0].blobs),
            f"find_missing_{len(batch) - half}_actions_one_call_s": find_all,
            f"batch_update_{len(batch) - half}_actions_one_call_s": update_all}


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 4) if values else 0.0


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def measure(workers: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Every figure for one farm of ``workers`` workers."""
    farm_run: Iterator[Farm] = farm(tmp / f"farm{workers}-{args.poll}", workers=workers,
                                    poll=args.poll, threads=args.threads)
    remote = next(farm_run)
    try:
        run = uuid.uuid4().hex[:8]
        asyncio.run(farm_batch(remote.address, jobs("trivial", 8, remote, f"warm{run}"),
                               args.in_flight))
        sides: dict[str, dict[str, list[Any]]] = {
            k: {"farm_s": [], "local_s": [], "phases": [], "load": [], "cpu": []}
            for k in ("trivial", "compile")}
        done_compiles: list[Job] = []
        for r in range(args.rounds):
            for kind, count in (("trivial", args.trivial), ("compile", args.compiles)):
                if count == 0 or (kind == "compile" and r >= args.compile_rounds):
                    continue
                batch = jobs(kind, count, remote, f"{run}-{workers}-{r}")
                side = sides[kind]
                order = ("farm", "local") if r % 2 == 0 else ("local", "farm")
                for where in order:
                    side["load"].append(os.getloadavg()[0])
                    if where == "farm":
                        got = asyncio.run(farm_batch(remote.address, batch, args.in_flight))
                        side["farm_s"].append(got["wall_s"])
                        side["phases"].append(got["phases"])
                        side["cpu"].append(got["cpu_s"])
                    else:
                        side["local_s"].append(asyncio.run(local_batch(
                            batch, tmp / f"local{workers}-{r}-{kind}", workers)))
                    print(f"  {workers} workers, round {r}, {kind} x{count} {where}: "
                          f"{(side[where + '_s'][-1]):.2f} s, load {_load()}", flush=True)
                if kind == "compile":
                    done_compiles = batch
        figures: dict[str, Any] = {}
        for kind, side in sides.items():
            if not side["farm_s"]:
                continue
            count = args.trivial if kind == "trivial" else args.compiles
            farm_s, local_s = min(side["farm_s"]), min(side["local_s"])
            phases = {p: [x for rec in side["phases"] for x in rec[p]]
                      for p in (*PHASES, "latency")}
            figures[kind] = {
                "actions": count,
                "farm_wall_s": [round(x, 3) for x in side["farm_s"]],
                "local_wall_s": [round(x, 3) for x in side["local_s"]],
                "farm_per_action_s": round(farm_s / count, 4),
                "local_per_action_s": round(local_s / count, 4),
                "overhead_per_action_s": round((farm_s - local_s) / count, 4),
                "farm_actions_per_s": round(count / farm_s, 2),
                "local_actions_per_s": round(count / local_s, 2),
                "phase_median_s": {p: _median(v) for p, v in phases.items()},
                # CPU seconds per action of each part, over every farm batch
                "cpu_per_action_s": {
                    k: round(sum(c[k] for c in side["cpu"]) / (count * len(side["cpu"])), 4)
                    for k in side["cpu"][0]},
                "load_average_1min": [round(x, 2) for x in side["load"]],
            }
        if done_compiles:
            figures["action_cache_hit"] = {k: round(v, 4) if isinstance(v, float) else v
                                           for k, v in asyncio.run(ac_hits(
                                               remote.address, done_compiles,
                                               args.in_flight)).items()}
            fresh = jobs("compile", 40, remote, f"{run}-upload")
            figures["upload"] = {k: round(v, 4) if isinstance(v, float) else v
                                 for k, v in asyncio.run(uploads(remote.address,
                                                                 fresh)).items()}
        return figures
    finally:
        farm_run.close()


def main() -> int:
    """Start a farm per worker count, measure, write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--trivial", type=int, default=128, help="trivial actions per batch")
    parser.add_argument("--compiles", type=int, default=64, help="compiles per batch")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--compile-rounds", type=int, default=1)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--poll", type=float, default=0.05,
                        help="the scheduler's polling, s (BuildGrid's default: 1)")
    parser.add_argument("--threads", type=int, default=160,
                        help="the server's gRPC thread pool (BuildGrid's default: 5 a core)")
    parser.add_argument("--out", type=Path,
                        default=BENCH / "results" / "remote_exec_throughput.json")
    args = parser.parse_args()
    start_load = _load()
    by_workers: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ukdpack-bench-") as tmp:
        for n in args.workers:
            print(f"{n} workers:", flush=True)
            by_workers[str(n)] = measure(n, args, Path(tmp))
    doc = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                 capture_output=True, text=True, check=False).stdout.strip(),
        "command": " ".join(["python", "bench/remote_exec_throughput.py", *sys.argv[1:]]),
        "cores": os.cpu_count(),
        "sched_autogroup": Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip(),
        "load_average_start": start_load,
        "load_average_end": _load(),
        "server": "BuildGrid 0.4.4, PostgreSQL 15, N workers (tests/remote_exec/worker.py)",
        "in_flight": args.in_flight,
        "scheduler_poll_s": args.poll,
        "server_threads": args.threads,
        "overhead_definition": "(W_farm - W_local) / M: W_farm the wall time of M new "
                               "actions through the farm, in_flight at a time (upload, "
                               "AC miss, Execute, output read); W_local the same M commands "
                               "run locally, N at a time (N workers)",
        "by_workers": by_workers,
    }
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({n: {k: v.get("overhead_per_action_s", v) for k, v in f.items()}
                      for n, f in by_workers.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
