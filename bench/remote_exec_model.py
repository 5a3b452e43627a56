"""A model of a big pack through remote execution, fed with the costs measured on the
tests' farm (``bench/results/remote_exec_throughput.json``) and the pack's own fixed cost
at 100,000 kernels (``bench/results/scale.json``).

    python bench/remote_exec_model.py [--throughput FILE] [--out FILE]

The formula (bench/README.md, "Model: a 100,000-kernel pack on a farm"):

* compiles ``C = ceil(K / k) * A`` for ``K`` kernels, ``k`` kernels per translation
  unit (one compile per unit and arch), ``A`` arches;
* cold farm: ``T = F + C / X + L`` with throughput
  ``X = min(W / (t_c + o), J / L, 1 / c, S)``: ``W`` workers each busy ``t_c + o`` an
  action, ``J`` actions in flight each taking ``L = u + t_c + o + h_1`` from the
  client's first call to its output read (Little's law), the client's CPU ``c`` an
  action on its one core, and the farm's own bound ``S``;
* warm action cache: ``T = F + C * h`` (every compile an action-cache hit; no worker);
* local, for scale: ``T = F + C * t_c / P`` on ``P`` cores;
* a fresh machine (empty local cache) packing the bench's 1,000-kernel tree (80
  compiles) against a warm farm action cache: ``T = F_1k + C * h`` against its local
  cold pack. With no local record of what a compile reads, the packer follows the
  includes in the source text (no process runs), so naming an action costs next to
  nothing; ``bench/remote_exec_warm.py`` measures the same pack, and its figure is put
  beside the prediction.

Writes ``bench/results/remote_exec_model.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent


@dataclass(frozen=True)
class Costs:
    """Per-action costs, seconds (measured; see ``inputs``)."""

    t_c: float  # one compile of a bench-tree unit, run alone
    o: float  # what the farm adds to each action at one worker (dispatch, fetch, store)
    s_bound: float  # actions/s the whole farm passes (server, database, client) at most
    u: float  # FindMissingBlobs + BatchUpdateBlobs of one action, alone
    h_1: float  # action-cache lookup and output read, alone (the latency of a hit)
    h: float  # the same with 64 in flight, wall per hit (the throughput of hits)
    c_client: float  # the client's CPU per action (one Python process: one core)
    fixed: float  # the pack's own work: walk, validate, pack, check, publish


@dataclass(frozen=True)
class Pack:
    """What is packed and where."""

    kernels: int
    arches: int
    kernels_per_unit: int
    workers: int
    in_flight: int

    @property
    def compiles(self) -> int:
        """One compile per translation unit and arch."""
        return math.ceil(self.kernels / self.kernels_per_unit) * self.arches


def latency(c: Costs) -> float:
    """One action from the client's first call to its output read, farm idle."""
    return c.u + c.t_c + c.o + c.h_1


def cold(c: Costs, p: Pack) -> dict[str, Any]:
    """A cold farm (nothing in its action cache): the time and the bound that sets it."""
    bounds = {"workers": p.workers / (c.t_c + c.o),
              "client_in_flight": p.in_flight / latency(c),
              "client_cpu": 1 / c.c_client,
              "farm": c.s_bound}
    bound = min(bounds, key=lambda k: bounds[k])
    throughput = bounds[bound]
    return {"seconds": round(c.fixed + p.compiles / throughput + latency(c), 1),
            "actions_per_s": round(throughput, 1), "bound": bound,
            "bounds_actions_per_s": {k: round(v, 1) for k, v in bounds.items()
                                     if math.isfinite(v)}}


def warm(c: Costs, p: Pack) -> float:
    """Every compile an action-cache hit: the time."""
    return round(c.fixed + p.compiles * c.h, 1)


def local(c: Costs, p: Pack, cores: int) -> float:
    """The same compiles on one machine of ``cores`` cores, no farm."""
    return round(c.fixed + p.compiles * c.t_c / cores, 1)


def farm_bound(four: dict[str, Any]) -> float:
    """Actions/s the farm passes at most: what 4 workers passed of trivial actions, or
    less, what the server's CPU per compile action allows on one core (BuildGrid's
    server is one Python process; a compile action costs it more than a trivial one:
    bigger blobs)."""
    return round(min(four["trivial"]["farm_actions_per_s"],
                     1 / four["compile"]["cpu_per_action_s"]["server"]), 2)


def inputs(throughput: dict[str, Any], scale: dict[str, Any], arches: int) -> Costs:
    """The model's costs from the measured figures."""
    one, four = throughput["by_workers"]["1"], throughput["by_workers"]["4"]
    up = one["upload"]
    s100 = scale["scale"]["100k"]
    # Validation runs once per pack; the rest (plan, produce, pack, runtime check,
    # publish) once per arch; the scale tree packs one arch.
    fixed = s100["validate_s"] + arches * (s100["warm_pack_s"] - s100["validate_s"])
    # A compile's CPU time (hipcc and its children, as the workers waited for them):
    # what it takes on a core of its own; the wall time on this shared machine is more.
    return Costs(t_c=one["compile"]["cpu_per_action_s"]["workers"],
                 o=max(one["trivial"]["overhead_per_action_s"], 0.0),
                 s_bound=farm_bound(four),
                 u=round(up["find_missing_median_s"] + up["batch_update_median_s"], 4),
                 h_1=one["action_cache_hit"]["latency_median_s"],
                 h=min(f["action_cache_hit"]["wall_per_hit_s"]
                       for f in throughput["by_workers"].values()),
                 c_client=four["compile"]["cpu_per_action_s"]["client"],
                 fixed=round(fixed, 2))


def fresh_machine_1k(c: Costs, remote_cache: dict[str, Any],
                     measured: dict[str, Any] | None = None) -> dict[str, Any]:
    """The 1,000-kernel tree (40 units, 2 arches) packed by a fresh machine against a
    warm farm action cache, against its local cold pack (bench/results/remote_cache.json:
    its warm pack from the team cache, 80 fetches included, stands in for the pack's own
    work, so this errs high), and beside it what ``bench/remote_exec_warm.py`` measured
    (``measured``: its result file), when there is one."""
    raw = remote_cache["raw"]
    compiles = raw["units"] * len(raw["arches"])
    fixed = raw["warm_remote_pack_s"]
    seconds = fixed + compiles * c.h
    doc: dict[str, Any] = {"compiles": compiles, "fixed_s": fixed, "seconds": round(seconds, 2),
                           "cold_pack_s": raw["cold_pack_s"],
                           "ratio": round(seconds / raw["cold_pack_s"], 3), "goal": "<= 0.1"}
    if measured is not None:
        got = measured["raw"]
        doc["measured"] = {"date": measured["date"], "commit": measured["commit"],
                           "local_cold_pack_s": got["local_cold_pack_s"],
                           "fresh_machine_warm_farm_pack_s": got["fresh_machine_warm_farm_pack_s"],
                           "ratio": round(got["ratio"], 3),
                           "loadavg_start": measured["loadavg_start"]}
    return doc


def main() -> int:
    """Read the measured figures, predict, write the predictions."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--throughput", type=Path,
                        default=BENCH / "results" / "remote_exec_throughput.json")
    parser.add_argument("--scale", type=Path, default=BENCH / "results" / "scale.json")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "remote_exec_model.json")
    parser.add_argument("--warm", type=Path,
                        default=BENCH / "results" / "remote_exec_warm.json",
                        help="bench/remote_exec_warm.py's result, put beside the prediction")
    args = parser.parse_args()
    measured = json.loads(args.throughput.read_text())
    costs = inputs(measured, json.loads(args.scale.read_text()), arches=4)
    unbound = replace(costs, s_bound=math.inf)
    four = measured["by_workers"]["4"]["trivial"]
    predictions = []
    # k = 25: the bench's hip trees (bench/make_tree.py, 25 entry points a unit);
    # k = 1: a unit per kernel, as libraries that compile each kernel alone do.
    for k in (25, 1):
        for workers in (100, 1000):
            for in_flight in (2 * workers, 64):
                p = Pack(kernels=100_000, arches=4, kernels_per_unit=k, workers=workers,
                         in_flight=in_flight)
                predictions.append({**asdict(p), "compiles": p.compiles,
                                    "cold_farm": cold(costs, p),
                                    # the same with the server scaled out of the way
                                    "cold_farm_server_unbound": cold(unbound, p),
                                    "warm_action_cache_s": warm(costs, p),
                                    "local_2_cores_s": local(costs, p, 2),
                                    "local_64_cores_s": local(costs, p, 64)})
    doc = {
        "measured": {"throughput": measured["command"],
                     "date": measured["date"], "load_average_start":
                     measured["load_average_start"], "load_average_end":
                     measured["load_average_end"]},
        "inputs_s": asdict(costs),
        # CPU seconds per action of each part of the farm (4 workers, trivial actions):
        # BuildGrid 0.4.4 is Python, one process runs on about one core's worth of CPU
        "farm_cpu_per_action_s": four["cpu_per_action_s"],
        "one_server_process_actions_per_s": {
            kind: round(1 / measured["by_workers"]["4"][kind]["cpu_per_action_s"]["server"], 1)
            for kind in ("trivial", "compile")},
        "latency_s": round(latency(costs), 3),
        "predictions": predictions,
        "fresh_machine_1k_tree": fresh_machine_1k(
            costs, json.loads((BENCH / "results" / "remote_cache.json").read_text()),
            json.loads(args.warm.read_text()) if args.warm.is_file() else None),
        "load_average_at_model": [round(x, 2) for x in os.getloadavg()],
    }
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"1,000-kernel tree, fresh machine, warm farm: {doc['fresh_machine_1k_tree']}")
    for row in predictions:
        cold_s, free = row["cold_farm"], row["cold_farm_server_unbound"]
        print(f"k={row['kernels_per_unit']:2} C={row['compiles']:6} W={row['workers']:4} "
              f"J={row['in_flight']:4}: cold {cold_s['seconds']:8.1f} s ({cold_s['bound']}), "
              f"server unbound {free['seconds']:7.1f} s ({free['bound']}), "
              f"warm AC {row['warm_action_cache_s']:6.1f} s, "
              f"local 2 cores {row['local_2_cores_s']:9.1f} s, 64 cores "
              f"{row['local_64_cores_s']:7.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
