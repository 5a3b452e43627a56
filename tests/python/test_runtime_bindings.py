"""The C++ loader, state manager, integrity checks, selector revision and plan
capture, reached from Python through ``ukdpack._runtime``."""

from __future__ import annotations

import gc
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from ukdpack import _runtime
from ukdpack.shard.archive import ArchiveWriter

OBJECTS = Path(__file__).resolve().parents[1] / "data" / "objects"
TOC_KEY = "split_kv_0123456789ab"
LIBRARY = "../kpack/kernels_gfx90a.kpack"


def _signature(named: bool = True) -> list[dict[str, Any]]:
    sig: list[dict[str, Any]] = [
        {"kind": "global_buffer", "size": 8, "offset": 8 * i} for i in range(3)]
    if named:
        for arg, name in zip(sig, ("q", "k", "workspace"), strict=True):
            arg["name"] = name
    sig.append({"kind": "by_value", "size": 12, "offset": 24})
    return sig


def _packed(symbol: str, sha: str) -> dict[str, Any]:
    return {"kind": "kpack", "library": LIBRARY, "toc_key": TOC_KEY, "symbol": symbol,
            "sha256": sha, "signature": _signature()}


def _write(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))


class Shard:
    """A packed gfx90a shard: the real split_kv object in kpack/, a two-launch
    kernel and a single-launch one in ops/, generics at the top."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.object = (OBJECTS / "split_kv.gfx90a.hsaco").read_bytes()
        self.sha = hashlib.sha256(self.object).hexdigest()
        writer = ArchiveWriter("kernels", ["gfx90a"])
        writer.add(TOC_KEY, "gfx90a", self.object)
        writer.write(root / "kpack" / "kernels_gfx90a.kpack")
        _write(root / "eng.kmd.json", {"id": "kmd-1", "version": "1.0", "name": "eng_md", "fields": [
            {"name": "dtype", "type": "string"}, {"name": "block", "type": "int", "default_value": 256}]})
        _write(root / "eng.ued.json", {"id": "ued-1", "version": "1.0", "name": "test:eng",
                                       "metadata": "kmd-1"})
        _write(root / "eng.umd.json", {"id": "umd-1", "version": "1.0", "name": "m", "scope": "graph",
                                       "match_symbol": "eng_match"})
        _write(root / "split.udd.json", {"id": "udd-1", "version": "1.0", "name": "split",
                                         "dispatch_symbol": "example_split_kv_dispatch"})
        _write(root / "one.udd.json", {"id": "udd-2", "version": "1.0", "name": "one",
                                       "dispatch_symbol": "example_single_dispatch"})
        self.multi: dict[str, Any] = {
            "id": "ukd-split", "version": "1.1", "name": "split.f32", "priority": 0,
            "metadata": {"dtype": "FLOAT"}, "arch": ["gfx90a"],
            "sources": {"produce": _packed("split_kv_produce", self.sha),
                        "consume": _packed("split_kv_consume", self.sha)}}
        self.single: dict[str, Any] = {
            "id": "ukd-one", "version": "1.0", "name": "unused.f32", "priority": 0,
            "metadata": {"dtype": "HALF"}, "arch": ["gfx90a"],
            "kernel_source": _packed("split_kv_unused", self.sha)}
        self.write_kernels()

    def write_kernels(self) -> None:
        for name, pack_id, udd, kernels in (("split", "kdp-split", "udd-1", [self.multi]),
                                            ("one", "kdp-one", "udd-2", [self.single])):
            _write(self.root / "ops" / f"{name}.kdp.json", {
                "id": pack_id, "version": "1.0", "name": name, "arch": ["gfx90a"],
                "matchers": ["umd-1"], "engine": "ued-1", "dispatch": udd,
                "kernelDescriptors": kernels})

    def load(self, **kwargs: Any) -> Any:
        dset = _runtime.load_shard(str(self.root), **kwargs)
        assert [d for d in dset.diagnostics if d["severity"] == "error"] == []
        return dset


HANDLERS = {"example_split_kv_dispatch": ["produce", "consume"], "example_single_dispatch": []}


@pytest.fixture
def shard(tmp_path: Path) -> Shard:
    return Shard(tmp_path / "gfx90a")


def test_load_shard_exposes_packs_kernels_and_launches(shard: Shard) -> None:
    dset = shard.load()
    packs = {p["id"]: p for p in dset.packs}
    assert set(packs) == {"kdp-split", "kdp-one"}
    split = packs["kdp-split"]
    assert split["file"] == "ops/split.kdp.json"
    assert split["dispatch_symbol"] == "example_split_kv_dispatch"
    assert split["engine"] == "ued-1" and split["engine_name"] == "test:eng"
    assert split["arch"] == ["gfx90a"]
    (kernel,) = split["kernels"]
    assert kernel["id"] == "ukd-split" and kernel["version"] == "1.1"
    assert kernel["launches"] == ["consume", "produce"]
    assert kernel["path"] == "$.kernelDescriptors[0]"
    assert kernel["completed_metadata"] == {"dtype": "FLOAT", "block": 256}
    assert packs["kdp-one"]["kernels"][0]["launches"] == []
    assert dset.kernel("UKD-404") is None


def test_kernel_views_read_launches_through_the_launch_helpers(shard: Shard) -> None:
    dset = shard.load()
    multi = dset.kernel("ukd-split")["view"]
    assert isinstance(multi, _runtime.Kernel)
    assert (multi.id, multi.file, multi.json_path) == ("ukd-split", "ops/split.kdp.json",
                                                      "$.kernelDescriptors[0]")
    assert multi.launch_names == ["consume", "produce"]  # sorted, whatever the key order
    assert multi.single_launch_source is None
    assert [ln.name for ln in multi.launches] == ["consume", "produce"]
    produce = multi.launch("produce")
    assert produce is not None and multi.launch("nope") is None and multi.launch() is None
    assert dset.kernel("ukd-split")["view"] == multi  # views of one kernel are equal
    assert len({multi, dset.kernel("ukd-split")["view"], dset.kernel("ukd-one")["view"]}) == 2
    assert produce.json_path == "$.kernelDescriptors[0].sources.produce"
    assert produce.label == "kernel 'split.f32' (id ukd-split) launch 'produce'"
    src = produce.source
    assert isinstance(src, _runtime.Source)
    assert (src.kind, src.symbol, src.toc_key, src.library) == (
        "kpack", "split_kv_produce", TOC_KEY, LIBRARY)
    assert src.sha256 == shard.sha and src.targets == {} and src.file is None
    assert src.fields == shard.multi["sources"]["produce"]
    assert src.json_path == produce.json_path
    assert (multi.launches_key, multi.launches_path) == ("sources", "$.kernelDescriptors[0].sources")
    assert multi.packed and multi.kinds == ["kpack"]
    seen: list[str] = []
    assert multi.all_launch_sources(lambda s: seen.append(s.json_path) is None)
    assert sorted(seen) == ["$.kernelDescriptors[0].sources.consume",
                            "$.kernelDescriptors[0].sources.produce"]
    assert not multi.all_launch_sources(lambda s: s.symbol == "split_kv_produce")

    single = dset.kernel("ukd-one")["view"]
    assert single.launch_names == []
    (only,) = single.launches
    assert only.name is None and only.label == "kernel 'unused.f32' (id ukd-one, single launch)"
    assert single.launch() == only and single.launch() != multi.launch("consume")
    one = single.single_launch_source
    assert one is not None and one.symbol == "split_kv_unused"
    assert one.json_path == only.json_path == "$.kernelDescriptors[0].kernel_source"
    assert (single.launches_key, single.launches_path) == (
        "kernel_source", "$.kernelDescriptors[0].kernel_source")


def test_kernel_views_outlive_their_set(shard: Shard) -> None:
    """A view keeps the loaded set alive: dropping every other reference reads no freed
    memory."""
    view = shard.load().kernel("ukd-split")["view"]
    launch = view.launch("consume")
    del view
    gc.collect()
    assert launch.source.symbol == "split_kv_consume"


def test_launch_at_keys_a_finding_by_kernel_and_launch(shard: Shard) -> None:
    dset = shard.load()
    at = dset.launch_at
    assert at("ops/split.kdp.json", "$.kernelDescriptors[0].sources.produce") == ("ukd-split", "produce")
    assert at("ops/split.kdp.json", "$.kernelDescriptors[0].sources.produce.sha256") == (
        "ukd-split", "produce")
    assert at("ops/one.kdp.json", "$.kernelDescriptors[0].kernel_source.toc_key") == ("ukd-one", None)
    assert at("ops/split.kdp.json", "$.kernelDescriptors[0]") is None  # the kernel, no launch
    assert at("ops/split.kdp.json", "$.kernelDescriptors[0].sources.producer") is None
    assert at("ops/one.kdp.json", "$.kernelDescriptors[0].sources.produce") is None  # other file


def test_model_packs_are_packs_less_the_derived_views(shard: Shard) -> None:
    """The packer's models read model_packs(): the same packs and values, without the views
    they never read, each kernel's ``raw`` a Document (its value() the dict ``packs``
    gives, a new one each time), and with each kernel's ``raw_sha256``: the sha256 of the
    bytes its ``raw`` was read from."""
    dset = shard.load()
    full, lean = dset.packs, dset.model_packs()
    assert [p["id"] for p in lean] == [p["id"] for p in full]
    for f, m in zip(full, lean, strict=True):
        assert {k: v for k, v in f.items() if k != "kernels"} == {
            **{k: v for k, v in m.items() if k != "kernels"},
            **{k: f[k] for k in ("root", "engine_name", "dispatch_symbol")}}
        for fk, mk in zip(f["kernels"], m["kernels"], strict=True):
            dropped = {"arches", "launches", "packed", "kinds", "completed_metadata", "base_dir",
                       "root"}
            assert set(mk) == set(fk) - dropped | {"raw_sha256"}
            assert all(mk[k] == fk[k] for k in mk if k not in ("raw_sha256", "raw"))
            assert isinstance(mk["raw"], _runtime.Document)
            assert mk["raw"].value() == fk["raw"]
            assert mk["raw"].value() is not mk["raw"].value()
            assert len(mk["raw_sha256"]) == 64  # test_pack_reuse checks it is of its bytes
    kernels = [k["raw_sha256"] for p in lean for k in p["kernels"]]
    assert len(set(kernels)) == len(kernels)


def test_older_ukd_reader_skips_newer_kernels(shard: Shard) -> None:
    dset = _runtime.load_shard(str(shard.root), max_ukd_version="1.0")
    assert [p["id"] for p in dset.packs] == ["kdp-one"]
    codes = [(d["severity"], d["code"]) for d in dset.diagnostics]
    assert ("warning", "VERSION_SKIPPED") in codes
    assert ("warning", "PACK_DROPPED") in codes
    skipped = next(d for d in dset.diagnostics if d["code"] == "VERSION_SKIPPED")
    assert skipped["file"] == "ops/split.kdp.json"
    assert "UKD version 1.1" in skipped["message"] and "UKD 1.0" in skipped["message"]
    with pytest.raises(ValueError, match="max_ukd_version"):
        _runtime.load_shard(str(shard.root), max_ukd_version="one")


def test_bad_descriptors_are_diagnostics_not_exceptions(tmp_path: Path) -> None:
    (tmp_path / "one.udd.json").write_text(
        '{"id": "u", "version": "1.0", "name": "a", "name": "b", "dispatch_symbol": "s"}')
    (tmp_path / "two.udd.json").write_text(
        '{"id": "v", "version": "1.0", "name": "a", "dispatch_symbol": "s", "bogus": 1}')
    dset = _runtime.load_shard(str(tmp_path))
    by_file = {d["file"]: d for d in dset.diagnostics}
    assert by_file["one.udd.json"]["message"] == "duplicate key 'name' in one object"
    assert by_file["two.udd.json"]["path"] == "$.bogus"
    assert by_file["two.udd.json"]["message"] == \
        "unknown key 'bogus'; extension keys start with 'x-' or '_'"
    assert dset.dispatches == [] and not dset.ok


def test_state_manager_drops_kernels_whose_launch_set_differs(shard: Shard) -> None:
    dset = shard.load()
    fewer = _runtime.StateManager(dset, handlers={**HANDLERS, "example_split_kv_dispatch": ["produce"]},
                                  arch="gfx90a")
    assert [k["kernel_id"] for k in fewer.kept()] == ["ukd-one"]
    (dropped,) = fewer.dropped()
    assert dropped["kernel_id"] == "ukd-split" and dropped["code"] == "LAUNCH_SET_MISMATCH"
    assert fewer.log() == [
        "dropping kernel 'split.f32' (id ukd-split) of pack 'split' (ops/split.kdp.json): dispatch symbol "
        "'example_split_kv_dispatch' declares launches {produce}, the kernel has {consume, produce}"]

    agreeing = _runtime.StateManager(dset, handlers=HANDLERS, arch="gfx90a")
    assert agreeing.dropped() == []
    kept = {k["kernel_id"]: k for k in agreeing.kept()}
    assert kept["ukd-split"]["launches"] == ["consume", "produce"]
    assert kept["ukd-split"]["handler_launches"] == ["produce", "consume"]
    assert kept["ukd-split"]["packed"] is True and kept["ukd-split"]["kinds"] == ["kpack"]
    assert agreeing.execution_plan("ukd-split")["launches"] == ["produce", "consume"]
    # The launches with code, as the runtime check asks for them: kept() order, names sorted.
    assert agreeing.packed_launches() == [
        (k["kernel_id"], launch) for k in agreeing.kept() if k["packed"]
        for launch in k["launches"] or [None]]
    assert sorted(agreeing.packed_launches(), key=str) == [
        ("ukd-one", None), ("ukd-split", "consume"), ("ukd-split", "produce")]

    # No handler for a symbol: that pack is dropped, the other stays.
    partial = _runtime.StateManager(dset, handlers={"example_single_dispatch": []})
    assert [d["code"] for d in partial.dropped()] == ["DISPATCH_UNKNOWN"]
    # Another arch filters everything out, and that is no drop.
    other = _runtime.StateManager(dset, handlers=HANDLERS, arch="gfx1030")
    assert other.kept() == [] and other.dropped() == [] and len(other.filtered()) == 2


def test_load_launch_code_returns_the_verified_bytes(shard: Shard) -> None:
    dset = shard.load()
    sm = _runtime.StateManager(dset, handlers=HANDLERS, arch="gfx90a")
    assert sm.load_launch_code("ukd-split", "produce", "gfx90a") == shard.object
    assert sm.load_launch_code("ukd-split", "consume") == shard.object
    assert sm.load_launch_code("ukd-one", None) == shard.object
    assert _runtime.load_launch_code(dset, "ukd-one", None, "gfx90a") == shard.object
    with pytest.raises(_runtime.RuntimeCheckError, match=r"^NO_SUCH_LAUNCH: "):
        sm.load_launch_code("ukd-split", None)


def test_digest_mismatch_raises_naming_kernel_and_launch(shard: Shard) -> None:
    shard.multi["sources"]["consume"]["sha256"] = "0" * 64
    shard.write_kernels()
    sm = _runtime.StateManager(shard.load(), handlers=HANDLERS, arch="gfx90a")
    with pytest.raises(_runtime.RuntimeCheckError) as err:
        sm.load_launch_code("ukd-split", "consume")
    assert isinstance(err.value, ValueError)
    assert str(err.value).startswith("DIGEST_MISMATCH: ops/split.kdp.json: ")
    assert "kernel 'split.f32' (id ukd-split) launch 'consume'" in str(err.value)
    assert err.value.code == "DIGEST_MISMATCH"  # type: ignore[attr-defined]
    assert err.value.diagnostic["path"] == "$.kernelDescriptors[0].sources.consume.sha256"  # type: ignore[attr-defined]
    assert sm.load_launch_code("ukd-split", "produce") == shard.object


def test_handler_objects_declare_launches_and_signatures(shard: Shard) -> None:
    class SplitHandler:
        def __init__(self, by_value_size: int) -> None:
            self.size = by_value_size

        def launch_names(self) -> list[str]:
            return ["produce", "consume"]

        def expected_signature(self, launch: str | None) -> list[dict[str, Any]] | None:
            if launch != "produce":
                return None
            sig = _signature(named=False)  # names compare only when both sides have one
            sig[3]["size"] = self.size
            return sig

    dset = shard.load()
    good = _runtime.StateManager(dset, handlers={**HANDLERS, "example_split_kv_dispatch": SplitHandler(12)})
    assert good.load_launch_code("ukd-split", "produce", "gfx90a") == shard.object
    bad = _runtime.StateManager(dset, handlers={**HANDLERS, "example_split_kv_dispatch": SplitHandler(16)})
    with pytest.raises(_runtime.RuntimeCheckError, match=r"^SIGNATURE_MISMATCH: .*argument 3"):
        bad.load_launch_code("ukd-split", "produce", "gfx90a")
    assert bad.load_launch_code("ukd-split", "consume", "gfx90a") == shard.object
    with pytest.raises(ValueError, match="launch name"):
        _runtime.StateManager(dset, handlers={"example_split_kv_dispatch": ["_bad"]})


def test_selector_revision_follows_each_launch(shard: Shard) -> None:
    before = _runtime.selector_revision(shard.load(), "kdp-split")
    assert len(before) == 64
    assert _runtime.selector_revision(shard.load(), "kdp-split") == before
    shard.multi["sources"]["produce"]["symbol"] = "split_kv_unused"
    shard.write_kernels()
    after = _runtime.selector_revision(shard.load(), "kdp-split")
    assert after != before
    doc = _runtime.selector_revision_document(shard.load(), "kdp-split")
    assert [launch["name"] for launch in doc["kernels"][0]["launches"]] == ["consume", "produce"]
    with pytest.raises(_runtime.RuntimeCheckError, match="PACK_UNKNOWN"):
        _runtime.selector_revision(shard.load(), "kdp-404")


def test_stub_handlers_follow_the_validate_rule(shard: Shard) -> None:
    assert _runtime.stub_handlers(shard.load()) == {
        "example_split_kv_dispatch": ["consume", "produce"], "example_single_dispatch": []}
    udd = json.loads((shard.root / "split.udd.json").read_text())
    udd.update(version="1.1", launches=["produce", "consume"])
    _write(shard.root / "split.udd.json", udd)
    assert _runtime.stub_handlers(shard.load())["example_split_kv_dispatch"] == ["produce", "consume"]


def test_capture_plan(shard: Shard) -> None:
    dset = shard.load()
    assert _runtime.capture_plan(dset, "ukd-one") == {
        "kernel_id": "ukd-one", "kernel_name": "unused.f32", "toc_key": TOC_KEY,
        "symbol": "split_kv_unused", "library": LIBRARY, "sha256": shard.sha}
    with pytest.raises(_runtime.RuntimeCheckError) as err:
        _runtime.capture_plan(dset, "ukd-split")
    assert err.value.code == "PLAN_MULTI_LAUNCH"  # type: ignore[attr-defined]
    assert "the kernel has several launches {consume, produce}" in str(err.value)


def test_validate_roots_verifies_every_launch(shard: Shard) -> None:
    verdict = _runtime.validate_roots([str(shard.root)], expect_engine="test:eng")
    assert verdict["ok"], verdict["diagnostics"]
    assert verdict["launches_verified"] == 3
    two = _runtime.validate_roots([str(shard.root)], expect_engine=["test:eng", "x:other"])
    assert two["expected_engines_missing"] == ["x:other"]
    (shard.root / "linked").symlink_to(shard.root / "kpack")
    shard.multi["sources"]["produce"]["library"] = "../linked/kernels_gfx90a.kpack"
    shard.write_kernels()
    verdict = _runtime.validate_roots([str(shard.root)])
    assert not verdict["ok"]
    assert [d["code"] for d in verdict["diagnostics"] if d["severity"] == "error"] == ["LIBRARY_SYMLINK"]


def test_packer_runtime_check_uses_these_bindings(shard: Shard) -> None:
    from ukdpack.shard.runtime_check import check_shard

    assert [p for p in check_shard(shard.root, "gfx90a", None) if p.severity == "error"] == []
    shard.single["kernel_source"]["sha256"] = "f" * 64
    shard.write_kernels()
    problems = [str(p) for p in check_shard(shard.root, "gfx90a", None) if p.severity == "error"]
    assert len(problems) == 1 and "DIGEST_MISMATCH" in problems[0], problems


CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def test_trained_against_revisions_are_compared_with_the_descriptors_they_name() -> None:
    """A stale revision is a warning naming both sides; matching revisions say nothing."""
    def stale(case: str) -> list[str]:
        dset = _runtime.load_shard(str(CORPUS / case / "tree"), authored=True)
        assert not [d for d in dset.diagnostics if d["severity"] == "error"], dset.diagnostics
        return sorted(f"{d['file']}: {d['message']}" for d in dset.diagnostics
                      if d["code"] == "TRAINED_AGAINST_STALE")
    assert stale("ok_uhd_ued_parity") == []
    assert stale("ok_uhd_trained_against_stale") == [
        f"{f}.uhd.json: UHD '{f}' was trained against UED 'ued-1' revision 1.0, but eng.ued.json "
        "has revision 1.2; retrain the model against revision 1.2 (or correct trained_against)"
        for f in ("t", "tb")]
