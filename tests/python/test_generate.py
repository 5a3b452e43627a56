"""``ukdpack generate``: a YAML engine description expanded into an authored tree; the
committed example reproduced byte for byte; every refusal named by its YAML path."""

from __future__ import annotations

import copy
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pack_support import EXAMPLE, read_json
from shard_support import errors, ukdpack

from ukdpack.generate.expand import ID_BASE, generate

CONFIG = EXAMPLE / "generated.yaml"
TREE = EXAMPLE / "generated"


def _json_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.json"))}


def _fresh_out(tmp_path: Path) -> tuple[Path, Path]:
    """The example's config and an out folder beside it, as in the repository (generated
    files name their config relative to the out folder), with the example's hand-written
    HIP sources and no descriptors."""
    config = tmp_path / CONFIG.name
    shutil.copyfile(CONFIG, config)
    out = tmp_path / TREE.name
    shutil.copytree(TREE / "kernels", out / "kernels")
    return config, out


def test_generate_reproduces_the_hand_written_example_tree(tmp_path: Path) -> None:
    config, out = _fresh_out(tmp_path)
    r = ukdpack("generate", str(config), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert f"ukdpack: {out}: 7 descriptors (6 kernels in 2 packs) from {config}: 7 written, " \
           "0 unchanged, 0 removed" in r.stdout
    assert f"ukdpack: {out}: valid: 7 descriptors, 2 packs, 6 kernels" in r.stdout
    expected = _json_files(TREE)
    assert sorted(expected) == ["axpy.kdp.json", "axpy_dispatch.udd.json",
                                "generated.ued.json", "generated_graph_match.umd.json",
                                "generated_metadata.kmd.json", "norm.kdp.json",
                                "norm_dispatch.udd.json"]
    assert _json_files(out) == expected  # byte for byte
    assert sorted(p.name for p in out.iterdir()) == sorted([*expected, "kernels"])


def test_the_committed_tree_is_up_to_date_and_check_finds_edits(tmp_path: Path) -> None:
    r = ukdpack("generate", str(CONFIG), "--out", str(TREE), "--check")
    assert r.returncode == 0, r.stderr
    assert "up to date" in r.stdout
    config = tmp_path / CONFIG.name
    shutil.copyfile(CONFIG, config)
    out = tmp_path / TREE.name
    shutil.copytree(TREE, out)
    (out / "norm.kdp.json").write_text((out / "norm.kdp.json").read_text().replace(
        '"priority": 0', '"priority": 1', 1))
    (out / "norm_dispatch.udd.json").unlink()
    r = ukdpack("generate", str(config), "--out", str(out), "--check")
    assert r.returncode == 1
    assert errors(r.stderr) == [
        f"ukdpack: error: {out}/norm.kdp.json: differs from what generated.yaml generates",
        f"ukdpack: error: {out}/norm_dispatch.udd.json: differs from what generated.yaml "
        "generates"]
    assert (out / "norm.kdp.json").read_text().count('"priority": 1') == 1  # nothing written


def test_a_second_run_writes_nothing_and_stale_outputs_go(tmp_path: Path) -> None:
    config, out = _fresh_out(tmp_path)
    assert ukdpack("generate", str(config), "--out", str(out)).returncode == 0
    stamps = {p.name: p.stat().st_mtime_ns for p in out.glob("*.json")}
    r = ukdpack("generate", str(config), "--out", str(out))
    assert "0 written, 7 unchanged, 0 removed" in r.stdout
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.json")} == stamps
    # The config drops the norm pack: its file, written by this config, goes; a hand-written
    # descriptor beside it stays.
    doc = yaml.safe_load(CONFIG.read_text())
    doc["packs"] = [p for p in doc["packs"] if p["name"] != "norm"]
    doc["variants"] = [v for v in doc["variants"] if v["pack"] != "norm"]
    smaller = config
    smaller.write_text(yaml.safe_dump(doc, sort_keys=False))
    (out / "mine.udd.json").write_text('{"id": "mine", "version": "1.0", "name": "mine", '
                                       '"dispatch_symbol": "mine"}\n')
    r = ukdpack("generate", str(smaller), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert f"ukdpack: removed {out}/norm.kdp.json: generated.yaml no longer generates it" \
        in r.stdout
    assert "0 written, 6 unchanged, 1 removed" in r.stdout
    assert not (out / "norm.kdp.json").exists()
    assert (out / "mine.udd.json").exists() and (out / "norm_dispatch.udd.json").exists()


def test_output_does_not_depend_on_yaml_key_order(tmp_path: Path) -> None:
    doc = yaml.safe_load(CONFIG.read_text())

    def reversed_keys(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: reversed_keys(value[k]) for k in reversed(list(value))}
        if isinstance(value, list):
            return [reversed_keys(v) for v in value]
        return value

    # Every mapping reversed, but not the orders that mean something: lists, and the
    # parameter grid (its key order is the order variants are made in).
    flipped = reversed_keys(doc)
    for v, original in zip(flipped["variants"], doc["variants"], strict=True):
        if isinstance(original.get("params"), dict):
            v["params"] = original["params"]
    assert list(flipped["variants"][2]["launches"]) == ["finish", "partial"]
    config = tmp_path / "generated.yaml"
    config.write_text(yaml.safe_dump(flipped, sort_keys=False))
    assert generate(config).files == generate(CONFIG).files


def test_ids_are_uuid5_of_the_namespace_type_and_name() -> None:
    ns = uuid.uuid5(uuid.NAMESPACE_URL, ID_BASE + "example.generated")
    kdp = read_json(TREE / "norm.kdp.json")
    assert kdp["id"] == str(uuid.uuid5(ns, "kdp/norm"))
    assert kdp["kernelDescriptors"][0]["id"] == str(uuid.uuid5(ns, "ukd/norm/norm.b128"))
    assert kdp["dispatch"] == read_json(TREE / "norm_dispatch.udd.json")["id"] == \
        str(uuid.uuid5(ns, "udd/norm_dispatch"))
    assert read_json(TREE / "generated.ued.json")["metadata"] == \
        str(uuid.uuid5(ns, "kmd/generated_metadata"))


# --------------------------------------------------------------------------- small configs

BASE: dict[str, Any] = {
    "version": 1,
    "namespace": "test.generate",
    "kmd": {"name": "meta", "fields": [{"name": "op", "type": "string"}]},
    "engine": {"name": "test:engine"},
    "dispatches": [{"name": "single", "dispatch_symbol": "sym_single"},
                   {"name": "multi", "dispatch_symbol": "sym_multi",
                    "launches": ["produce", "consume"]}],
    "packs": [{"name": "one", "dispatch": "single"},
              {"name": "two", "dispatch": "multi", "arch": ["gfx90a", "gfx940"]}],
    "variants": [
        {"pack": "one", "name": "k.{v}", "params": {"v": [1, 2]}, "metadata": {"op": "k{v}"},
         "kind": "hip", "source": "k.hip", "entry": "k", "build": {"defines": {"V": "{v}"}}},
        {"pack": "two", "name": "m", "metadata": {"op": "m"}, "kind": "hip",
         "source": "m.hip", "launches": {"produce": {"entry": "p"},
                                         "consume": {"entry": "c"}}},
    ],
}


def _slotted(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (BASE) made slotted: slots first and second (knob second.op), pack one in
    first, pack two in second."""
    doc["engine"]["slots"] = [{"name": "first"}, {"name": "second", "knobs": ["op"]}]
    doc["packs"][0]["slot"] = "first"
    doc["packs"][1]["slot"] = "second"
    return doc


def _run(tmp_path: Path, doc: Any, *extra: str) -> tuple[Any, Path]:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    for name in ("k.hip", "m.hip"):
        (out / name).write_text("// a source\n")
    config = tmp_path / "config.yaml"
    config.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return ukdpack("generate", str(config), "--out", str(out), *extra), out


def test_a_small_config_expands_params_and_launches(tmp_path: Path) -> None:
    r, out = _run(tmp_path, BASE)
    assert r.returncode == 0, r.stdout + r.stderr
    one = read_json(out / "one.kdp.json")
    assert [k["name"] for k in one["kernelDescriptors"]] == ["k.1", "k.2"]
    k2 = one["kernelDescriptors"][1]
    assert k2["version"] == "1.0" and k2["priority"] == 0
    assert k2["metadata"] == {"op": "k2"}  # inside a string: text
    assert k2["kernel_source"] == {"kind": "hip", "source": "k.hip", "entry": "k",
                                   "build": {"defines": {"V": 2}}}  # alone: the integer
    (m,) = read_json(out / "two.kdp.json")["kernelDescriptors"]
    assert m["version"] == "1.1" and "arch" not in m
    assert list(m["sources"]) == ["consume", "produce"]  # by launch name
    assert m["sources"]["produce"] == {"kind": "hip", "source": "m.hip", "entry": "p",
                                       "build": {}}
    assert read_json(out / "multi.udd.json")["version"] == "1.1"
    assert read_json(out / "single.udd.json")["version"] == "1.0"
    assert (out / "config.yaml").exists() is False


def _ids(out: Path) -> dict[str, str]:
    """Every id of a generated folder, by file and kernel name."""
    ids = {}
    for f in sorted(out.glob("*.json")):
        doc = read_json(f)
        ids[f.name] = doc["id"]
        ids.update({f"{f.name}/{k['name']}": k["id"] for k in doc.get("kernelDescriptors", [])})
    return ids


def test_a_slotted_engine_keeps_its_ids_when_a_slot_and_a_kernel_are_added(
        tmp_path: Path) -> None:
    doc = _slotted(copy.deepcopy(BASE))
    r, out = _run(tmp_path, doc)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "valid: " in r.stdout  # the generated slotted tree validates
    ued = read_json(out / "engine.ued.json")
    assert ued["version"] == "1.1" and "knobs" not in ued
    assert ued["slots"] == [{"name": "first"}, {"name": "second", "knobs": ["op"]}]
    one, two = read_json(out / "one.kdp.json"), read_json(out / "two.kdp.json")
    assert (one["version"], one["slot"], two["slot"]) == ("1.1", "first", "second")
    text = (out / "one.kdp.json").read_text()
    assert text.index('"dispatch"') < text.index('"slot"') < text.index('"kernelDescriptors"')
    before = _ids(out)
    # A slot before the others, its pack and kernel; a kernel more in slot first.
    doc["engine"]["slots"].insert(0, {"name": "zeroth"})
    doc["packs"].append({"name": "zero", "dispatch": "single", "slot": "zeroth"})
    doc["variants"].append({"pack": "zero", "name": "z", "metadata": {"op": "z"},
                            "kind": "hip", "source": "k.hip", "entry": "z"})
    doc["variants"][0]["params"]["v"].append(3)
    r, out = _run(tmp_path, doc)
    assert r.returncode == 0, r.stdout + r.stderr
    after = _ids(out)
    assert {k: after[k] for k in before} == before
    assert sorted(set(after) - set(before)) == ["one.kdp.json/k.3", "zero.kdp.json",
                                                 "zero.kdp.json/z"]
    assert [s["name"] for s in read_json(out / "engine.ued.json")["slots"]] == [
        "zeroth", "first", "second"]


def test_a_slot_s_heuristics_pass_through_in_the_slot_key_order(tmp_path: Path) -> None:
    doc = _slotted(copy.deepcopy(BASE))
    doc["engine"]["slots"][1] = {"sort_kernel_catalog": {"default": "a-uhd-id"},
                                 "knobs": ["op"], "name": "second"}
    r, out = _run(tmp_path, doc, "--no-validate")  # the UHD is written by hand elsewhere
    assert r.returncode == 0, r.stdout + r.stderr
    text = (out / "engine.ued.json").read_text()
    second = text[text.index('"second"') - 40:]
    assert second.index('"name"') < second.index('"knobs"') < second.index(
        '"sort_kernel_catalog"')
    assert read_json(out / "engine.ued.json")["slots"][1]["sort_kernel_catalog"] == {
        "default": "a-uhd-id"}


def test_builder_launches_take_role_and_hsaco_sets_expand_per_arch(tmp_path: Path) -> None:
    doc = copy.deepcopy(BASE)
    doc["dispatches"].append({"name": "hs", "dispatch_symbol": "sym_hs"})
    doc["packs"].append({"name": "three", "dispatch": "hs", "arch": ["gfx90a", "gfx940"]})
    doc["variants"][1] = {
        "pack": "two", "name": "b", "metadata": {"op": "b"}, "kind": "builder",
        "module": "hipgen", "function": "build", "spec": {"n": 1},
        "launches": {"produce": {"entry": "p", "role": "producer"},
                     "consume": {"entry": "c", "role": "consumer", "spec": {"n": 2}}}}
    doc["variants"].append({
        "pack": "three", "name": "h.{arch}", "arches": ["gfx90a", "gfx940"],
        "metadata": {"op": "h"}, "kind": "hsaco", "file": "objects/{arch}/h.hsaco",
        "symbol": "h"})
    out = tmp_path / "out"
    for arch in ("gfx90a", "gfx940"):
        (out / "objects" / arch).mkdir(parents=True)
        (out / "objects" / arch / "h.hsaco").write_bytes(b"")
    r, out = _run(tmp_path, doc)
    assert r.returncode == 0, r.stdout + r.stderr
    (b,) = read_json(out / "two.kdp.json")["kernelDescriptors"]
    assert b["sources"]["consume"] == {"kind": "builder", "module": "hipgen",
                                       "function": "build", "spec": {"n": 2}, "entry": "c",
                                       "role": "consumer"}
    assert b["sources"]["produce"]["spec"] == {"n": 1}
    h = read_json(out / "three.kdp.json")["kernelDescriptors"]
    assert [(k["name"], k["arch"], k["kernel_source"]["file"]) for k in h] == [
        ("h.gfx90a", ["gfx90a"], "objects/gfx90a/h.hsaco"),
        ("h.gfx940", ["gfx940"], "objects/gfx940/h.hsaco")]


def _variant(doc: dict[str, Any], i: int) -> dict[str, Any]:
    found: dict[str, Any] = doc["variants"][i]
    return found


def _hsaco_set(name: str, **extra: Any) -> dict[str, Any]:
    return {"pack": "two", "name": name, "arches": ["gfx90a"], "metadata": {"op": name},
            "kind": "hsaco", "file": "h.hsaco", "symbol": "h", **extra}


Mutation = Callable[[dict[str, Any]], None]
REFUSALS: list[tuple[str, Mutation, str, str]] = [
    ("role-on-hip-launch",
     lambda d: _variant(d, 1)["launches"]["consume"].update(role="consumer"),
     "$.variants[1].launches.consume.role",
     "'role' is a builder-only field; a hip source takes no role"),
    ("role-on-hsaco-launch",
     lambda d: d["variants"].append(_hsaco_set("h", symbol=None, launches={
         "produce": {"symbol": "p"}, "consume": {"symbol": "c", "role": "x"}})),
     "$.variants[2].launches.consume.role",
     "'role' is a builder-only field; a hsaco source takes no role"),
    ("role-on-a-hip-set", lambda d: _variant(d, 0).update(role="r"), "$.variants[0].role",
     "'role' is a builder-only field; a hip source takes no role"),
    ("empty-override", lambda d: _variant(d, 1)["launches"].update(consume={}),
     "$.variants[1].launches.consume", "launch 'consume' overrides nothing"),
    ("null-override", lambda d: _variant(d, 1)["launches"].update(consume=None),
     "$.variants[1].launches.consume", "launch 'consume' overrides nothing"),
    ("embedded-source-with-launches",
     lambda d: d["variants"].append({
         "pack": "two", "name": "e", "metadata": {"op": "e"}, "kind": "embedded_source",
         "source_file": "e.cl", "entry_point": "e",
         "launches": {"produce": {"entry_point": "p"}, "consume": {"entry_point": "c"}}}),
     "$.variants[2].kind", "a sources launch cannot be embedded_source (it has no code "
                           "object)"),
    ("embedded-source-path-leaving-its-folder",
     lambda d: d["variants"].append({
         "pack": "two", "name": "e", "metadata": {"op": "e"}, "kind": "embedded_source",
         "source_file": "../{v}.cl", "entry_point": "e", "params": {"v": ["e"]}}),
     "$.variants[2].source_file", "expected a relative path without '..' segments (it is an "
                                  "identity key), found '../e.cl'"),
    ("same-hip-kernel-whatever-the-sources-key-order",
     lambda d: d["variants"].append({
         **copy.deepcopy(_variant(d, 1)), "name": "m2", "metadata": {"op": "m2"},
         "launches": {"consume": {"entry": "c"}, "produce": {"entry": "p"}}}),
     "$.variants[2]", "kernel 'm2' would be the same kernel as 'm' of $.variants[1]: hip "
                      "launches are keyed by source, entry and build"),
    ("same-hip-kernel-through-a-normalized-path-and-a-typed-parameter",
     lambda d: d["variants"].append({
         "pack": "one", "name": "again", "metadata": {"op": "again"}, "kind": "hip",
         "source": "./k.hip", "entry": "k", "build": {"defines": {"V": 2}}}),
     "$.variants[2]", "kernel 'again' would be the same kernel as 'k.2' of $.variants[0]"),
    ("same-hsaco-kernel",
     lambda d: d["variants"].extend([_hsaco_set("h1"), _hsaco_set("h2")]),
     "$.variants[3]", "kernel 'h2' would be the same kernel as 'h1' of $.variants[2]: hsaco "
                      "launches are keyed by file and symbol, and both have h.hsaco h"),
    ("override-of-another-kinds-field",
     lambda d: _variant(d, 1)["launches"]["consume"].update(file="x.hsaco"),
     "$.variants[1].launches.consume.file",
     "a launch inherits its kernel source's kind ('hip') and may override only source, "
     "entry, build; found 'file'"),
    ("kind-in-a-launch",
     lambda d: _variant(d, 1)["launches"]["consume"].update(kind="hsaco"),
     "$.variants[1].launches.consume.kind", "may override only source, entry, build; found "
                                            "'kind'"),
    ("a-launch-without-entry",
     lambda d: _variant(d, 1)["launches"].update(consume={"build": {"flags": ["-O2"]}}),
     "$.variants[1].launches.consume", "launch 'consume' has no 'entry': set it on the "
                                       "variant set or on this launch"),
    ("one-launch", lambda d: _variant(d, 1).update(launches={"produce": {"entry": "p"}}),
     "$.variants[1].launches", "expected at least two launches"),
    ("bad-launch-name", lambda d: _variant(d, 1)["launches"].update(_x={"entry": "x"}),
     "$.variants[1].launches._x", "expected a launch name matching [A-Za-z][A-Za-z0-9_]*"),
    ("unknown-parameter", lambda d: _variant(d, 0).update(name="k.{w}"),
     "$.variants[0].name", "'k.{w}' names parameter 'w', which this variant set does not "
                           "have; its parameters: v"),
    ("unmatched-brace", lambda d: _variant(d, 0).update(entry="k{"),
     "$.variants[0].entry", "'k{' has an unmatched '{'; write '{{' for a literal one"),
    ("names-that-repeat", lambda d: _variant(d, 0).update(name="k"),
     "$.variants[0].name", "kernel name 'k' is produced twice in pack 'one'"),
    ("unknown-pack", lambda d: _variant(d, 0).update(pack="three"),
     "$.variants[0].pack", "'three' names no pack of $.packs; expected one of one, two"),
    ("unknown-dispatch", lambda d: d["packs"][0].update(dispatch="nope"),
     "$.packs[0].dispatch", "'nope' names no dispatch of $.dispatches"),
    ("hsaco-without-arches", lambda d: d["variants"].append(
        {k: v for k, v in _hsaco_set("h").items() if k != "arches"}),
     "$.variants[2]", "an hsaco kernel must name a non-empty arch"),
    ("arch-outside-the-pack", lambda d: _variant(d, 1).update(arches=["gfx1030"]),
     "$.variants[1].arches[0]", "arch 'gfx1030' is not an arch of pack 'two' [gfx90a, "
                                "gfx940]"),
    ("kmd-schema", lambda d: d["kmd"]["fields"][0].update(type="str"),
     "$.kmd.fields[0].type", "expected one of"),
    ("udd-schema", lambda d: d["dispatches"][1].update(launches=["produce", "_x"]),
     "$.dispatches[1].launches[1]", ""),
    ("id-in-the-config", lambda d: d["engine"].update(id="x"), "$.engine.id",
     "'id' is written by generate; leave it out of the config"),
    ("unknown-top-level-key", lambda d: d.update(extra=1), "$.extra",
     "unknown key 'extra' in a generate config"),
    ("unknown-variant-key", lambda d: _variant(d, 0).update(symbol="s"), "$.variants[0].symbol",
     "unknown key 'symbol' in a variant set of kind hip"),
    ("config-version", lambda d: d.update(version=2), "$.version",
     "expected config version 1, found integer 2"),
    ("knob-not-a-field", lambda d: d["engine"].update(knobs=["nope"]), "$.engine.knobs[0]",
     "knob 'nope' is no field of the KMD"),
    ("unused-pack", lambda d: d["packs"].append({"name": "three", "dispatch": None}),
     "$.packs[2]", "pack 'three' has no kernels: no variant set names it"),
    ("kpack-kind", lambda d: _variant(d, 0).update(kind="kpack"), "$.variants[0].kind",
     "kind 'kpack' is the packed form written by the packer"),
    ("slot-unknown", lambda d: _slotted(d)["packs"][0].update(slot="nope"), "$.packs[0].slot",
     "'nope' names no slot of $.engine.slots; expected one of first, second"),
    ("slot-on-an-unslotted-engine", lambda d: d["packs"][0].update(slot="first"),
     "$.packs[0].slot", "names no slot of $.engine.slots; expected one of (none"),
    ("slot-missing", lambda d: _slotted(d)["packs"][1].pop("slot"), "$.packs[1]",
     "pack 'two' names no slot, but the engine has slots"),
    ("slot-knob-not-a-field", lambda d: _slotted(d)["engine"]["slots"][1].update(
        knobs=["nope"]), "$.engine.slots[1].knobs[0]", "knob 'nope' is no field of the KMD"),
    ("slot-bad-name", lambda d: _slotted(d)["engine"]["slots"][0].update(name="First"),
     "$.engine.slots[0].name", "expected a slot name"),
    ("slotted-engine-knobs", lambda d: _slotted(d)["engine"].update(knobs=["op"]),
     "$.engine.knobs", "a slotted engine has no engine-level 'knobs'"),
]


@pytest.mark.parametrize("mutate,path,fragment", [r[1:] for r in REFUSALS],
                         ids=[r[0] for r in REFUSALS])
def test_refusals_name_the_yaml_path(tmp_path: Path, mutate: Mutation, path: str,
                                     fragment: str) -> None:
    doc = copy.deepcopy(BASE)
    mutate(doc)
    r, out = _run(tmp_path, doc)
    assert r.returncode == 1, r.stdout
    assert "Traceback" not in r.stderr
    prefix = f"ukdpack: error: config.yaml: {path}: "
    assert any(ln.startswith(prefix) and fragment in ln for ln in errors(r.stderr)), r.stderr
    assert not list(out.glob("*.json")), "a refused config wrote descriptors"


def test_several_problems_are_reported_in_one_run(tmp_path: Path) -> None:
    doc = copy.deepcopy(BASE)
    # Problems of the config itself; what the runtime judges of the kernels it makes
    # (a role on a hip launch) is found once the config reads.
    _variant(doc, 1)["launches"]["consume"].update(file="x.hsaco")
    _variant(doc, 1)["launches"]["produce"] = {}
    doc["packs"][0]["dispatch"] = "nope"
    r, _ = _run(tmp_path, doc)
    assert r.returncode == 1
    assert len(errors(r.stderr)) == 3, r.stderr


@pytest.mark.parametrize("text,fragment", [
    ("version: 1\nversion: 1\n", "config.yaml: line 2, column 1: key 'version' appears twice "
                                 "in one mapping (first on line 1)"),
    ("version: [1\n", "config.yaml: line 2, column 1: not valid YAML"),
    ("- 1\n", "config.yaml: $: expected a generate config (a mapping), found a list"),
    ("version: 1\n1: x\n", "config.yaml: line 2, column 1: expected a string key, found "
                           "integer 1"),
])
def test_bad_yaml(tmp_path: Path, text: str, fragment: str) -> None:
    r, _ = _run(tmp_path, text)
    assert r.returncode == 1
    assert fragment in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_usage_and_missing_files(tmp_path: Path) -> None:
    assert ukdpack("generate", str(CONFIG)).returncode == 2  # --out is required
    r = ukdpack("generate", str(tmp_path / "none.yaml"), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "expected a generate config file (YAML), found nothing" \
        in r.stderr
    # A tree that does not validate: the sources the config names are not there.
    r = ukdpack("generate", str(CONFIG), "--out", str(tmp_path / "o"))
    assert r.returncode == 1
    assert "source 'kernels/axpy.hip' not found" in r.stderr
    r = ukdpack("generate", str(CONFIG), "--out", str(tmp_path / "p"), "--no-validate")
    assert r.returncode == 0, r.stderr
