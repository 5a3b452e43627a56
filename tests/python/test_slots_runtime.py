"""Slotted engines through the extension: the state manager's slot catalogs, slot
programs with default and chosen picks, Python rankers, and the refusals that need no
device (a DeviceSlotProgram itself runs in tests/device)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ukdpack import _runtime

SLOTS = ("prep", "main", "finish")
VALIDATE = Path(sys.executable).parent / "ukdpack-validate"


def _write(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))


def _kernel(kid: str, name: str, priority: int = 0) -> dict[str, Any]:
    return {"id": kid, "version": "1.0", "name": name, "priority": priority,
            "metadata": {"dtype": name},
            "kernel_source": {"kind": "hip", "source": "k.hip", "entry": name, "build": {}}}


def _tree(root: Path, finish_arch: list[str] | None = None) -> Path:
    """An authored tree: engine 'test:slotted' with slots prep (p1, p2), main (m1, m2;
    a native ranker 'rank_main' and applicability check 'fit_main') and finish (f1, built for `finish_arch`), beside an
    unslotted engine's pack (a1)."""
    _write(root / "eng.kmd.json", {"id": "kmd-1", "version": "1.0", "name": "md", "fields": [
        {"name": "dtype", "type": "string"}]})
    _write(root / "eng.umd.json", {"id": "umd-1", "version": "1.0", "name": "m", "scope": "graph",
                                   "match_symbol": "eng_match"})
    _write(root / "one.udd.json", {"id": "udd-1", "version": "1.0", "name": "one",
                                   "dispatch_symbol": "sym_one"})
    for folder in (root, root / "s"):  # a source is found beside its KDP
        folder.mkdir(exist_ok=True)
        (folder / "k.hip").write_text('extern "C" __global__ void k() {}\n')
    _write(root / "plain.ued.json", {"id": "ued-1", "version": "1.0", "name": "test:plain",
                                     "metadata": "kmd-1"})
    slots: list[dict[str, Any]] = [{"name": s} for s in SLOTS]
    slots[1]["sort_kernel_catalog"] = {"default": "uhd-rank"}
    slots[1]["predict_applicable_kernels"] = {"default": "uhd-fit"}
    _write(root / "s" / "eng.ued.json", {"id": "ued-s", "version": "1.1", "name": "test:slotted",
                                         "metadata": "kmd-1", "slots": slots})
    for name in ("rank", "fit"):
        _write(root / "s" / f"{name}.uhd.json", {
            "id": f"uhd-{name}", "version": "1.1", "name": name, "adapter": "native",
            "objective": "max", "native": {"symbol": f"{name}_main"}, "slot": "main"})
    members = {"prep": [_kernel("ukd-p1", "p1", 1), _kernel("ukd-p2", "p2", 5)],
               "main": [_kernel("ukd-m1", "m1"), _kernel("ukd-m2", "m2")],
               "finish": [_kernel("ukd-f1", "f1")]}
    for slot, kernels in members.items():
        _write(root / "s" / f"{slot}.kdp.json", {
            "id": f"kdp-{slot}", "version": "1.1", "name": slot, "slot": slot,
            "arch": (finish_arch or []) if slot == "finish" else [], "matchers": ["umd-1"],
            "engine": "ued-s", "dispatch": "udd-1", "kernelDescriptors": kernels})
    _write(root / "a.kdp.json", {
        "id": "kdp-a", "version": "1.0", "name": "a", "arch": [], "matchers": ["umd-1"],
        "engine": "ued-1", "dispatch": "udd-1", "kernelDescriptors": [_kernel("ukd-a1", "a1")]})
    return root


@pytest.fixture
def dset(tmp_path: Path) -> _runtime.DescriptorSet:
    loaded = _runtime.load_shard(str(_tree(tmp_path)), authored=True)
    assert loaded.ok, loaded.diagnostics
    return loaded


def _picks(program: _runtime.SlotProgram) -> list[tuple[str, str, bool]]:
    return [(p["slot"], p["name"], p["chosen"]) for p in program.picks]


def test_slotted_engines_lists_each_slots_catalog(dset: _runtime.DescriptorSet) -> None:
    sm = _runtime.StateManager(dset, handlers={"sym_one": []}, arch="gfx90a")
    (engine,) = sm.slotted_engines()
    assert engine["id"] == "ued-s" and engine["name"] == "test:slotted"
    assert engine["dropped_reason"] is None
    assert [s["name"] for s in engine["slots"]] == list(SLOTS)
    prep, main, finish = engine["slots"]
    assert prep["kept"] == ["ukd-p2", "ukd-p1"]  # priority first
    assert prep["ranker"] == "priority" and prep["rank_heuristic"] is None
    assert main["ranker"] == "native" and main["rank_heuristic"] == "uhd-rank"
    assert finish["kept"] == ["ukd-f1"] and finish["dropped"] == []
    # select() never hands out a slotted kernel.
    picked = sm.select({"n": 1})
    assert picked is not None and picked["kernel_id"] == "ukd-a1"


def test_slot_program_default_and_chosen_picks(dset: _runtime.DescriptorSet) -> None:
    sm = _runtime.StateManager(dset, handlers={"sym_one": []})
    program = sm.slot_program("ued-s", {"n": 1})
    assert program.engine_name == "test:slotted"
    assert _picks(program) == [("prep", "p2", False), ("main", "m1", False), ("finish", "f1", False)]
    chosen = sm.slot_program("test:slotted", {"n": 1}, picks={"prep": "ukd-p1", "main": "ukd-m2"})
    assert _picks(chosen) == [("prep", "p1", True), ("main", "m2", True), ("finish", "f1", False)]
    assert chosen.picks[0]["kernel_id"] == "ukd-p1"


@pytest.mark.parametrize(("picks", "code", "fragment"), [
    ({"prep": "ukd-m1"}, "SLOT_PICK",
     "kernel 'ukd-m1' cannot run in slot 'prep' of engine 'test:slotted': kernel 'm1' (id ukd-m1) is a "
     "kernel of slot 'main', not of slot 'prep'"),
    ({"reduce": "ukd-m1"}, "SLOT_UNKNOWN", "which engine 'test:slotted' does not have"),
    ({"main": "ukd-a1"}, "SLOT_PICK", "no kernel of the engine on this arch has that id"),
])
def test_chosen_picks_are_checked(dset: _runtime.DescriptorSet, picks: dict[str, str], code: str,
                                  fragment: str) -> None:
    sm = _runtime.StateManager(dset, handlers={"sym_one": []})
    with pytest.raises(_runtime.RuntimeCheckError) as caught:
        sm.slot_program("ued-s", None, picks=picks)
    assert caught.value.code == code
    assert fragment in str(caught.value)


def test_engine_refusals(dset: _runtime.DescriptorSet) -> None:
    sm = _runtime.StateManager(dset, handlers={"sym_one": []})
    for engine, code in (("ued-nope", "ENGINE_UNKNOWN"), ("ued-1", "ENGINE_NOT_SLOTTED")):
        with pytest.raises(_runtime.RuntimeCheckError) as caught:
            sm.slot_program(engine)
        assert caught.value.code == code


def test_python_ranker_and_applicability(dset: _runtime.DescriptorSet) -> None:
    seen: list[tuple[list[str], Any]] = []

    def rank(kernels: list[dict[str, Any]], problem: Any) -> list[int]:
        seen.append(([k["name"] for k in kernels], problem))
        return [1] if problem["prefer_m2"] else []

    marker = object()
    sm = _runtime.StateManager(dset, handlers={"sym_one": []}, heuristics={"rank_main": rank})
    assert _picks(sm.slot_program("ued-s", {"prefer_m2": True}))[1] == ("main", "m2", False)
    assert _picks(sm.slot_program("ued-s", {"prefer_m2": False}))[1] == ("main", "m1", False)
    assert seen[0] == (["m1", "m2"], {"prefer_m2": True})

    class Fit:
        def applicable(self, kernel: dict[str, Any], problem: Any) -> bool:
            assert problem is marker  # the very object given, not a JSON copy
            return bool(kernel["name"] != "m1")

    fitted = _runtime.StateManager(dset, handlers={"sym_one": []}, heuristics={"fit_main": Fit()})
    assert _picks(fitted.slot_program("ued-s", marker))[1] == ("main", "m2", False)
    with pytest.raises(_runtime.RuntimeCheckError, match="rules it out"):
        fitted.slot_program("ued-s", marker, picks={"main": "ukd-m1"})

    def broken(kernels: list[dict[str, Any]], problem: Any) -> list[int]:
        raise KeyError("no model")

    failing = _runtime.StateManager(dset, handlers={"sym_one": []}, heuristics={"rank_main": broken})
    with pytest.raises(_runtime.RuntimeCheckError) as caught:
        failing.slot_program("ued-s", {})
    assert caught.value.code == "HEURISTIC_FAILED"
    assert isinstance(caught.value.__cause__, KeyError)
    bad = _runtime.StateManager(dset, handlers={"sym_one": []}, heuristics={"rank_main": lambda k, p: [5]})
    with pytest.raises(_runtime.RuntimeCheckError, match="index 5 is out of range"):
        bad.slot_program("ued-s", {})
    with pytest.raises(TypeError, match="heuristics\\['rank_main'\\]"):
        _runtime.StateManager(dset, heuristics={"rank_main": 3})


def test_slot_empty_on_an_arch_drops_the_engine(tmp_path: Path) -> None:
    dset = _runtime.load_shard(str(_tree(tmp_path, finish_arch=["gfx942"])), authored=True)
    sm = _runtime.StateManager(dset, handlers={"sym_one": []}, arch="gfx90a")
    (engine,) = sm.slotted_engines()
    assert engine["dropped_reason"] == (
        "engine 'test:slotted' is dropped for gfx90a: its slot 'finish' holds no kept kernel for "
        "gfx90a (none of its kernels runs on gfx90a), and every slot must run")
    assert {d["code"] for d in sm.dropped()} == {"SLOT_EMPTY"}
    assert len(sm.dropped()) == 4
    assert engine["slots"][0]["dropped"][0]["code"] == "SLOT_EMPTY"
    assert any(d["code"] == "SLOT_EMPTY" and d["severity"] == "error" for d in sm.diagnostics())
    with pytest.raises(_runtime.RuntimeCheckError) as caught:
        sm.slot_program("ued-s")
    assert caught.value.code == "SLOT_EMPTY"
    ok = _runtime.StateManager(dset, handlers={"sym_one": []}, arch="gfx942")
    assert ok.slotted_engines()[0]["dropped_reason"] is None


def test_saved_plans_and_revisions_of_slotted_packs(dset: _runtime.DescriptorSet) -> None:
    with pytest.raises(_runtime.RuntimeCheckError) as caught:
        _runtime.capture_plan(dset, "ukd-p1")
    assert caught.value.code == "PLAN_SLOTTED"
    doc = _runtime.selector_revision_document(dset, "kdp-main")
    assert doc["slot"] == "main" and doc["engine"]["slots"] == list(SLOTS)
    assert "slot" not in _runtime.selector_revision_document(dset, "kdp-a")


def test_validate_reports_slots_per_arch(tmp_path: Path) -> None:
    root = _tree(tmp_path, finish_arch=["gfx942"])
    plain = json.loads((root / "a.kdp.json").read_text())
    plain["arch"] = ["gfx90a"]  # the tree names gfx90a too: a pass where slot finish is empty
    _write(root / "a.kdp.json", plain)
    report = _runtime.validate_roots([str(root)])
    by_arch = {e["arch"]: e for e in report["slotted_engines"]}
    assert set(by_arch) == {"gfx90a", "gfx942"}
    finish = by_arch["gfx942"]["slots"][2]
    assert finish == {"name": "finish", "kernels": ["ukd-f1"], "kept": ["ukd-f1"], "dropped": [],
                      "ranker": "priority"}
    assert by_arch["gfx942"]["dropped_reason"] is None
    dropped = by_arch["gfx90a"]
    assert "its slot 'finish' holds no kept kernel for gfx90a" in dropped["dropped_reason"]
    assert dropped["slots"][0]["kernels"] == ["ukd-p1", "ukd-p2"]
    assert dropped["slots"][0]["kept"] == []
    assert {d["code"] for d in dropped["slots"][0]["dropped"]} == {"SLOT_EMPTY"}
    assert dropped["slots"][1]["ranker"] == "native"
    assert not report["ok"]
    (verdict,) = [v for v in report["engine_verdicts"] if v["engine"] == "test:slotted"]
    assert verdict["dropped"] and "slot 'finish'" in verdict["reason"]
    # The text output: one line per slot, before the summary.
    text = subprocess.run([str(VALIDATE), str(root)], capture_output=True, text=True, check=False)
    assert text.returncode == 1
    lines = text.stdout.splitlines()
    assert ("ukdpack-validate: slot 'finish' of engine 'test:slotted' on gfx942: 1 kernel, 1 kept, "
            "0 dropped, ranker priority") in lines
    assert ("ukdpack-validate: slot 'main' of engine 'test:slotted' on gfx90a: 2 kernels, 0 kept, "
            "2 dropped, ranker native (engine dropped)") in lines
    assert lines[-1].startswith("ukdpack-validate: failed")
