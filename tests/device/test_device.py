"""Device end to end: a packed multi-launch CUDA kernel (and a single-launch one) loaded
from its shard, selected through the state manager with a test-only matcher, planned
and executed on a real GPU, launch after launch over one workspace.

Run with ``scripts/test.sh --device`` on a machine with an NVIDIA GPU and driver (and
nvcc, to pack the tree). No GPU is a failure here, never a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ukdpack import _runtime

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TREE = HERE / "tree"
N = 4096
IN = [float(i % 97) for i in range(N)]
SCALE, A, B, TAG = 2.0, 0.5, 3.0, 7
NAN = b"\xff\xff\xff\x7f"  # a quiet NaN: what a launch that did not run leaves behind


def f32s(values: list[float]) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def floats(data: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(data) // 4}f", data))


def expected_split() -> list[float]:
    """Every value is exact in float32: produce then consume, over one workspace."""
    ws = [IN[i] * SCALE + i for i in range(N)]
    return [ws[N - 1 - i] * A + B + TAG for i in range(N)]


@pytest.fixture(scope="module")
def backend() -> _runtime.DeviceBackend:
    try:
        return _runtime.CudaBackend()
    except _runtime.DeviceError as e:
        pytest.fail(f"the device tests need an NVIDIA GPU and driver: {e}")


@pytest.fixture(scope="module")
def shard(backend: _runtime.DeviceBackend, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The device tree packed by ukdpack, with nvcc, for this GPU's arch."""
    base = tmp_path_factory.mktemp("device")
    tree = base / "tree"
    shutil.copytree(TREE, tree)
    arch = backend.arch()
    for kdp in tree.glob("*.kdp.json"):
        doc = json.loads(kdp.read_text())
        doc["arch"] = [arch]
        kdp.write_text(json.dumps(doc, indent=2) + "\n")
    r = subprocess.run([sys.executable, "-m", "ukdpack", "pack", "--source-root", str(tree),
                        "--out-root", str(base / "out"), "--arch", arch, "--plain",
                        "--cache-dir", str(base / "cache")], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 0, r.stderr
    return base / "out" / arch


class SplitHandler:
    """The split kernel's dispatch handler: produce, then consume, over one workspace."""

    def __init__(self, order: tuple[str, ...] = ("produce", "consume"),
                 consume_workspace: _runtime.DeviceBuffer | None = None) -> None:
        self.order = order
        self.consume_workspace = consume_workspace

    def launch_names(self) -> list[str]:
        return list(self.order)

    def workspace_size(self, kernel: dict[str, Any]) -> int:
        return N * 4

    def launch(self, name: str | None, workspace: _runtime.DeviceBuffer,
               args: dict[str, _runtime.DeviceBuffer]) -> tuple[Any, ...]:
        grid, block = ((N + 255) // 256, 1, 1), (256, 1, 1)
        n = struct.pack("<I", N)
        if name == "produce":
            return grid, block, 0, [args["in"], workspace, n, struct.pack("<f", SCALE)]
        ws = self.consume_workspace or workspace
        return grid, block, 0, [ws, args["out"], n, struct.pack("<ffI", A, B, TAG)]


class ScaleHandler:
    def launch_names(self) -> list[str]:
        return []

    def launch(self, name: str | None, workspace: _runtime.DeviceBuffer,
               args: dict[str, _runtime.DeviceBuffer]) -> tuple[Any, ...]:
        return (((N + 255) // 256, 1, 1), (256, 1, 1), 0,
                [args["in"], args["out"], struct.pack("<I", N), struct.pack("<f", 1.5)])


def _manager(shard: Path, split: SplitHandler | None = None) -> _runtime.StateManager:
    dset = _runtime.load_shard(str(shard))
    # The packer wrote the shard's index: the kernels run here were read through it.
    assert dset.from_index, dset.index_reason
    return _runtime.StateManager(
        dset, handlers={"device_split_dispatch": split or SplitHandler(),
                        "device_scale_dispatch": ScaleHandler(), **_slot_handlers()},
        matchers={"device_test_match": lambda kernel, problem:
                  kernel["metadata"]["op"] == problem["op"]},
        arch=dset.packs[0]["arch"][0])


def _buffers(backend: _runtime.DeviceBackend) -> dict[str, _runtime.DeviceBuffer]:
    inp, out = backend.alloc(N * 4), backend.alloc(N * 4)
    inp.upload(f32s(IN))
    out.upload(NAN * N)
    return {"in": inp, "out": out}


def _run_split(backend: _runtime.DeviceBackend, sm: _runtime.StateManager,
               workspace: _runtime.DeviceBuffer | None = None) -> list[float]:
    chosen = sm.select({"op": "split"})
    assert chosen is not None and chosen["name"] == "split.f32"
    plan = sm.plan(chosen["kernel_id"], backend)
    bufs = _buffers(backend)
    plan.run(bufs, workspace)
    return floats(bufs["out"].download())


def test_multi_launch_kernel_selected_planned_and_run(backend: _runtime.DeviceBackend,
                                                      shard: Path) -> None:
    sm = _manager(shard)
    assert sm.dropped() == []
    chosen = sm.select({"op": "split"})
    assert chosen is not None
    plan = sm.plan(chosen["kernel_id"], backend)
    assert plan.launches == ["produce", "consume"]
    assert plan.symbols == ["split_produce", "split_consume"]
    assert plan.module_count == 1  # both launches share one code object
    assert plan.workspace_size == N * 4
    workspace = backend.alloc(N * 4)
    workspace.upload(NAN * N)
    assert _run_split(backend, sm, workspace) == expected_split()
    assert _run_split(backend, sm) == expected_split()  # the plan's own workspace


def test_output_needs_both_launches_in_order_over_one_workspace(
        backend: _runtime.DeviceBackend, shard: Path) -> None:
    want = expected_split()
    reversed_order = _manager(shard, SplitHandler(order=("consume", "produce")))
    workspace = backend.alloc(N * 4)
    workspace.upload(NAN * N)
    assert _run_split(backend, reversed_order, workspace) != want
    other = backend.alloc(N * 4)
    other.upload(NAN * N)
    elsewhere = _manager(shard, SplitHandler(consume_workspace=other))
    assert _run_split(backend, elsewhere) != want


def test_single_launch_kernel(backend: _runtime.DeviceBackend, shard: Path) -> None:
    sm = _manager(shard)
    chosen = sm.select({"op": "scale"})
    assert chosen is not None and chosen["name"] == "scale.f32"
    plan = sm.plan(chosen["kernel_id"], backend)
    assert len(plan.launches) == 1 and plan.module_count == 1
    bufs = _buffers(backend)
    plan.run(bufs)
    assert floats(bufs["out"].download()) == [x * 1.5 for x in IN]


def test_handler_declaring_fewer_launches_drops_the_kernel(shard: Path) -> None:
    class Fewer(SplitHandler):
        def launch_names(self) -> list[str]:
            return ["produce"]

    sm = _manager(shard, Fewer())
    assert [d["name"] for d in sm.dropped()] == ["split.f32"]
    (line,) = sm.log()
    assert "declares launches {produce}, the kernel has {consume, produce}" in line
    assert sm.select({"op": "split"}) is None


def _overhead_tool() -> Path | None:
    for candidate in (os.environ.get("UKDPACK_PLAN_OVERHEAD"),
                      REPO / "build" / "py" / "bin" / "ukdpack_plan_overhead"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def _overhead_figure(tmp_path: Path, layout: dict[str, Any], *args: str) -> dict[str, Any]:
    """ukdpack_plan_overhead over `layout` with `args` (--shard, --kernel or --engine):
    its JSON line."""
    tool = _overhead_tool()
    assert tool is not None, "build ukdpack_plan_overhead (UKDPACK_BUILD_TESTS=ON)"
    (tmp_path / "layout.json").write_text(json.dumps(layout))
    r = subprocess.run([str(tool), *args, "--layout", str(tmp_path / "layout.json"),
                        "--iterations", "1000"], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    figure: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    return figure


def _record(name: str, what: str, goal: float, figure: dict[str, Any]) -> None:
    """Prints the figure and writes it to the device results folder as NAME.json."""
    print(f"{what}: {figure['plan_median_us']:.1f} us, raw {figure['raw_median_us']:.1f} us"
          f" -> {figure['ratio']:.3f} (goal <= {goal:.2f})")
    results = Path(os.environ.get("UKDPACK_DEVICE_RESULTS", REPO / "tests" / "device"))
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{name}.json").write_text(json.dumps(figure, indent=2) + "\n")


def test_plan_overhead_figure(backend: _runtime.DeviceBackend, shard: Path,
                              tmp_path: Path) -> None:
    """The plan's overhead over two raw driver launches of the same kernels (median of
    1,000 runs each): a figure, recorded, not a pass/fail threshold."""
    dset = _runtime.load_shard(str(shard))
    (split,) = [k for p in dset.packs for k in p["kernels"] if k["name"] == "split.f32"]
    grid, block = [(N + 255) // 256], [256]
    layout = {"workspace_bytes": N * 4,
              "buffers": {"in": {"size": N * 4, "f32": IN}, "out": N * 4},
              "launches": [
                  {"name": "produce", "grid": grid, "block": block, "shared": 0,
                   "params": [{"buffer": "in"}, "workspace", {"u32": N}, {"f32": SCALE}]},
                  {"name": "consume", "grid": grid, "block": block, "shared": 0,
                   "params": ["workspace", {"buffer": "out"}, {"u32": N},
                              {"struct": [{"f32": A}, {"f32": B}, {"u32": TAG}]}]}],
              "read": ["out"]}
    figure = _overhead_figure(tmp_path, layout, "--shard", str(shard), "--kernel", split["id"])
    assert floats(bytes.fromhex(figure["outputs"]["out"])) == expected_split()
    _record("plan_overhead", "plan overhead: plan", 1.10, figure)


# --------------------------------------------------------------------------- slots
# The slotted engine "test:slots" (tree/slots.ued.json): prep, main (two candidates,
# "reverse" ranked first), finish (two launches), over one workspace of 2N floats.
TAG_SLOTS = 5


def expected_slots(main: str = "reverse") -> list[float]:
    """Every value is exact in float32; each step reads what the one before wrote."""
    first = [IN[i] * 2 + i for i in range(N)]
    if main == "reverse":
        second = [first[N - 1 - i] * 0.5 + 3 for i in range(N)]
    else:
        second = [first[i] * 0.25 + 1 for i in range(N)]
    first = [second[i] + TAG_SLOTS for i in range(N)]
    return [first[N - 1 - i] * 2 for i in range(N)]


class SlotHandler:
    """One handler per slot's dispatch symbol; `need` is the workspace it asks for."""

    def __init__(self, launches: dict[str, Any], need: int) -> None:
        self.launches = launches
        self.need = need

    def launch_names(self) -> list[str]:
        return [name for name in self.launches if name]

    def workspace_size(self, kernel: dict[str, Any]) -> int:
        return self.need

    def launch(self, name: str | None, workspace: _runtime.DeviceBuffer,
               args: dict[str, _runtime.DeviceBuffer]) -> tuple[Any, ...]:
        grid, block = ((N + 255) // 256, 1, 1), (256, 1, 1)
        return grid, block, 0, self.launches[name or ""](workspace, args)


def _slot_handlers() -> dict[str, Any]:
    n = struct.pack("<I", N)
    return {
        # prep asks for the half it writes; the program gives every slot the largest need.
        "device_slot_prep_dispatch": SlotHandler(
            {"": lambda ws, a: [a["in"], ws, n]}, N * 4),
        "device_slot_main_dispatch": SlotHandler({"": lambda ws, a: [ws, n]}, 2 * N * 4),
        "device_slot_finish_dispatch": SlotHandler(
            {"shift": lambda ws, a: [ws, n, struct.pack("<I", TAG_SLOTS)],
             "store": lambda ws, a: [ws, a["out"], n]}, 2 * N * 4),
    }


def _slots_engine(sm: _runtime.StateManager) -> dict[str, Any]:
    (engine,) = [e for e in sm.slotted_engines() if e["name"] == "test:slots"]
    return engine


def _kernel_id(shard: Path, name: str) -> str:
    dset = _runtime.load_shard(str(shard))
    (kid,) = [k["id"] for p in dset.packs for k in p["kernels"] if k["name"] == name]
    return str(kid)


def test_slotted_engine_default_picks_run_in_slot_order(backend: _runtime.DeviceBackend,
                                                        shard: Path) -> None:
    sm = _manager(shard)
    engine = _slots_engine(sm)
    assert [s["name"] for s in engine["slots"]] == ["prep", "main", "finish"]
    assert [len(s["kept"]) for s in engine["slots"]] == [1, 2, 1]
    program = sm.slot_program(engine["id"], {})
    assert [p["slot"] for p in program.picks] == ["prep", "main", "finish"]
    assert [p["name"] for p in program.picks] == ["slot_prep.f32", "slot_main.reverse",
                                                   "slot_finish.f32"]
    device = sm.plan_slots(program, backend)
    assert device.workspace_size == 2 * N * 4  # the largest need of the picks
    workspace = backend.alloc(2 * N * 4)
    workspace.upload(NAN * (2 * N))
    bufs = _buffers(backend)
    device.run(bufs, workspace)
    assert floats(bufs["out"].download()) == expected_slots("reverse")
    bufs = _buffers(backend)
    device.run(bufs)  # the program's own workspace
    assert floats(bufs["out"].download()) == expected_slots("reverse")


def test_slotted_engine_chosen_pick(backend: _runtime.DeviceBackend, shard: Path) -> None:
    sm = _manager(shard)
    engine = _slots_engine(sm)
    forward = _kernel_id(shard, "slot_main.forward")
    program = sm.slot_program(engine["id"], {}, picks={"main": forward})
    assert [p["name"] for p in program.picks] == ["slot_prep.f32", "slot_main.forward",
                                                   "slot_finish.f32"]
    bufs = _buffers(backend)
    sm.plan_slots(program, backend).run(bufs)
    assert floats(bufs["out"].download()) == expected_slots("forward")
    assert expected_slots("forward") != expected_slots("reverse")


def test_pick_from_another_slot_is_refused_before_anything_launches(
        backend: _runtime.DeviceBackend, shard: Path) -> None:
    sm = _manager(shard)
    engine = _slots_engine(sm)
    prep = _kernel_id(shard, "slot_prep.f32")
    bufs = _buffers(backend)
    with pytest.raises(Exception) as refused:
        sm.plan_slots(sm.slot_program(engine["id"], {}, picks={"main": prep}), backend).run(bufs)
    assert "SLOT_PICK" in str(refused.value) and "'prep'" in str(refused.value)
    assert bufs["out"].download() == NAN * N  # nothing ran


def test_slot_program_overhead_figure(backend: _runtime.DeviceBackend, shard: Path,
                                      tmp_path: Path) -> None:
    """The device slot program's overhead over the same four functions launched raw in
    slot order with one synchronize (median of 1,000 runs each; goal <= 1.05): a figure,
    recorded, not a pass/fail threshold."""
    sm = _manager(shard)
    engine = _slots_engine(sm)
    grid, block = [(N + 255) // 256], [256]

    def handler(need: int, launches: list[tuple[str, list[Any]]]) -> dict[str, Any]:
        return {"workspace_bytes": need,
                "launches": [{"name": name, "grid": grid, "block": block, "shared": 0,
                              "params": params} for name, params in launches]}

    layout = {"buffers": {"in": {"size": N * 4, "f32": IN}, "out": N * 4},
              "handlers": {
                  "device_slot_prep_dispatch": handler(
                      N * 4, [("", [{"buffer": "in"}, "workspace", {"u32": N}])]),
                  "device_slot_main_dispatch": handler(2 * N * 4, [("", ["workspace", {"u32": N}])]),
                  "device_slot_finish_dispatch": handler(
                      2 * N * 4, [("shift", ["workspace", {"u32": N}, {"u32": TAG_SLOTS}]),
                                  ("store", ["workspace", {"buffer": "out"}, {"u32": N}])])},
              "read": ["out"]}
    figure = _overhead_figure(tmp_path, layout, "--shard", str(shard), "--engine", engine["id"])
    assert [s["slot"] for s in figure["slots"]] == ["prep", "main", "finish"]
    assert figure["launch_count"] == 4 and figure["workspace_bytes"] == 2 * N * 4
    assert floats(bytes.fromhex(figure["outputs"]["out"])) == expected_slots("reverse")
    _record("slot_overhead", "slot program overhead: program", 1.05, figure)
