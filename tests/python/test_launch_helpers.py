"""The launch helpers, reached from Python through the extension."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ukdpack import _runtime


def _multi(order: tuple[str, ...] = ("produce", "consume")) -> dict[str, Any]:
    return {"id": "k", "version": "1.1", "name": "m", "priority": 0, "metadata": {},
            "sources": {name: {"kind": "hip", "source": "s.hip", "entry": f"e_{name}", "build": {}}
                        for name in order}}


def _single() -> dict[str, Any]:
    return {"id": "k", "version": "1.0", "name": "s", "priority": 0, "metadata": {},
            "kernel_source": {"kind": "hsaco", "file": "a.hsaco", "symbol": "f"}, "arch": ["gfx90a"]}


def test_launch_names_sorted_whatever_the_key_order() -> None:
    assert _runtime.launch_names_of(_multi(("produce", "consume"))) == ["consume", "produce"]
    assert _runtime.launch_names_of(_multi(("consume", "produce"))) == ["consume", "produce"]


def test_single_launch_kernel_has_empty_launch_set() -> None:
    assert _runtime.launch_names_of(_single()) == []


def test_accepts_json_text_with_comments() -> None:
    text = "// a kernel\n" + json.dumps(_multi())
    assert _runtime.launch_names_of(text) == ["consume", "produce"]


def test_single_launch_source() -> None:
    assert _runtime.single_launch_source(_single()) == _single()["kernel_source"]
    assert _runtime.single_launch_source(_multi()) is None


def test_all_launch_sources_asks_every_launch() -> None:
    seen: list[str] = []

    def is_hip(src: dict[str, Any]) -> bool:
        seen.append(src["entry"])
        return bool(src["kind"] == "hip")

    assert _runtime.all_launch_sources(_multi(), is_hip)
    assert sorted(seen) == ["e_consume", "e_produce"]
    assert not _runtime.all_launch_sources(_multi(), lambda s: s["entry"] == "e_produce")
    assert _runtime.all_launch_sources(_single(), lambda s: s["kind"] == "hsaco")
    assert not _runtime.all_launch_sources(_single(), lambda s: s["kind"] == "hip")


def test_malformed_kernel_raises_with_paths() -> None:
    bad = _multi()
    bad["sources"]["_x"] = bad["sources"]["produce"]
    with pytest.raises(ValueError, match=r"\$\.sources\._x: expected a launch name"):
        _runtime.launch_names_of(bad)
    with pytest.raises(ValueError, match="not valid JSON"):
        _runtime.launch_names_of("{nope")


def test_check_kernel_reports_rules_beyond_the_schema() -> None:
    mixed = _multi()
    mixed["sources"]["consume"] = {"kind": "hsaco", "file": "a.hsaco", "symbol": "c"}
    found = _runtime.check_kernel(mixed, "x.kdp.json", "$.kernelDescriptors[2]")
    messages = {(d["path"], d["message"]) for d in found}
    assert ("$.kernelDescriptors[2].sources",
            "all launches of a sources map take one kind, found hip {produce}, hsaco {consume}"
            ) in messages
    assert all(d["file"] == "x.kdp.json" and d["severity"] == "error" for d in found)
    assert _runtime.check_kernel(_multi()) == []


def test_arch_helpers() -> None:
    assert _runtime.bare_arch("gfx90a:sramecc+:xnack-") == "gfx90a"
    assert _runtime.is_arch_name("gfx1030") and not _runtime.is_arch_name("amd64")
    assert _runtime.target_runs_on("gfx11-generic", "gfx1100")
    assert not _runtime.target_runs_on("gfx1030", "gfx1100")
