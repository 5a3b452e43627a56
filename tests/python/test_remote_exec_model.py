"""The remote-execution model's formula (bench/remote_exec_model.py, bench/README.md
"Model: a 100,000-kernel pack on a farm"): compiles counted per unit and arch, the cold
farm's throughput set by the smallest of its three bounds, the warm action cache
needing no worker."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from remote_exec_model import Costs, Pack, cold, fresh_machine_1k, latency, local, warm

COSTS = Costs(t_c=1.5, o=0.1, s_bound=50.0, u=0.01, h_1=0.02, h=0.002, c_client=0.001,
              fixed=40.0)


def test_compiles_are_units_times_arches() -> None:
    assert Pack(100_000, 4, 25, 100, 200).compiles == 16_000
    assert Pack(100_000, 4, 1, 100, 200).compiles == 400_000
    assert Pack(1_000, 2, 25, 1, 1).compiles == 80
    assert Pack(1_001, 2, 25, 1, 1).compiles == 82  # a part-filled unit still compiles


def test_cold_farm_takes_the_smallest_bound() -> None:
    # 10 workers pass 10 / 1.6 = 6.25 actions/s: below the farm's 50 and the client's
    few = cold(COSTS, Pack(100_000, 4, 25, workers=10, in_flight=64))
    assert few["bound"] == "workers"
    assert few["actions_per_s"] == pytest.approx(6.2, abs=0.1)
    assert few["seconds"] == pytest.approx(40.0 + 16_000 / 6.25 + latency(COSTS), abs=0.1)
    # 1,000 workers would pass 625/s: the farm's 50/s sets the pace
    many = cold(COSTS, Pack(100_000, 4, 25, workers=1_000, in_flight=2_000))
    assert many["bound"] == "farm"
    assert many["seconds"] == pytest.approx(40.0 + 16_000 / 50 + latency(COSTS), abs=0.1)
    # 8 in flight, each 1.63 s end to end: at most 4.9 actions/s whatever the farm
    narrow = cold(COSTS, Pack(100_000, 4, 25, workers=1_000, in_flight=8))
    assert narrow["bound"] == "client_in_flight"
    assert narrow["actions_per_s"] == pytest.approx(8 / latency(COSTS), abs=0.1)
    # a farm without bound and 10,000 workers: the client's one core (1 ms an action)
    wide = cold(replace(COSTS, s_bound=math.inf), Pack(100_000, 4, 25, 10_000, 100_000))
    assert wide["bound"] == "client_cpu"
    assert wide["actions_per_s"] == pytest.approx(1_000)


def test_warm_action_cache_needs_no_worker_and_local_uses_the_cores() -> None:
    assert warm(COSTS, Pack(100_000, 4, 25, 100, 200)) == pytest.approx(40 + 16_000 * 0.002)
    assert warm(COSTS, Pack(100_000, 4, 25, 100, 200)) == warm(COSTS, Pack(100_000, 4, 25,
                                                                           1_000, 2_000))
    assert local(COSTS, Pack(100_000, 4, 25, 1, 1), 2) == pytest.approx(40 + 16_000 * 1.5 / 2)


def test_fresh_machine_pays_its_own_work_and_a_hit_per_compile() -> None:
    cache = {"raw": {"units": 40, "arches": ["gfx90a", "gfx940"], "cold_pack_s": 50.0,
                     "warm_remote_pack_s": 3.0}}
    got = fresh_machine_1k(COSTS, cache)
    assert got["compiles"] == 80
    assert got["seconds"] == pytest.approx(3.0 + 80 * 0.002)
    assert got["ratio"] == pytest.approx(got["seconds"] / 50.0, abs=0.001)
    assert "measured" not in got
    warm_run = {"date": "d", "commit": "c", "loadavg_start": [1.0, 1.0, 1.0],
                "raw": {"local_cold_pack_s": 60.0, "fresh_machine_warm_farm_pack_s": 3.0,
                        "ratio": 0.05}}
    assert fresh_machine_1k(COSTS, cache, warm_run)["measured"]["ratio"] == 0.05
