"""The runtime's verdict on shards: the committed ``multi_launch_mismatch`` fixture,
a packer-built ``multi_launch`` shard, and the pack-time runtime check."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pack_support import REPO, copy_example, read_json, run_pack, write_json

from ukdpack import _runtime

FIXTURES = REPO / "tests" / "fixtures"


def _validate_exe() -> str:
    return str(Path(sys.executable).parent / "ukdpack-validate")


def test_mismatch_fixture_round_trip_through_the_validator() -> None:
    """The validator loads the engine, drops the odd kernel only, and fails naming both sets."""
    shard = FIXTURES / "multi_launch_mismatch"
    r = subprocess.run([_validate_exe(), str(shard)], capture_output=True, text=True, check=False)
    assert r.returncode == 1
    assert ("dropping kernel 'scale.f32' (id 29f00a30-4246-57a5-9889-af778425f9c3) of pack 'split_kv' "
            "(attention/split_kv.kdp.json): "
            "dispatch symbol 'example_split_kv_dispatch' declares launches {consume, produce}, "
            "the kernel has {}") in r.stderr
    doc = json.loads(subprocess.run([_validate_exe(), "--json", str(shard)], capture_output=True,
                                    text=True, check=False).stdout)
    assert doc["ok"] is False
    assert doc["engines"] == ["example:attention"]
    assert [d["name"] for d in doc["dropped"]] == ["scale.f32"]
    assert doc["kept"] == 2


def test_mismatch_fixture_through_the_extension() -> None:
    dset = _runtime.load_shard(str(FIXTURES / "multi_launch_mismatch"))
    sm = _runtime.StateManager(dset, handlers=_runtime.stub_handlers(dset), arch="gfx90a")
    assert [d["name"] for d in sm.dropped()] == ["scale.f32"]
    assert sorted(k["name"] for k in sm.kept()) == ["scale.f16", "split_kv.f32"]
    (line,) = sm.log()
    assert "{consume, produce}" in line and "the kernel has {}" in line


@pytest.fixture(scope="module")
def multi_launch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``multi_launch`` shard: the example tree packed by ukdpack for gfx90a."""
    base = tmp_path_factory.mktemp("multi_launch")
    r = run_pack(copy_example(base / "tree"), base / "out", ["gfx90a"], cache=base / "cache")
    assert r.returncode == 0, r.stderr
    return base / "out" / "gfx90a"


def test_two_launches_load_from_one_shared_object(multi_launch: Path) -> None:
    dset = _runtime.load_shard(str(multi_launch))
    handlers = {**_runtime.stub_handlers(dset),
                "example_split_kv_dispatch": ["produce", "consume"], "example_scale_dispatch": []}
    sm = _runtime.StateManager(dset, handlers=handlers, arch="gfx90a")
    assert sm.dropped() == []
    (split,) = [k for k in sm.kept() if k["name"] == "split_kv.f32"]
    assert split["launches"] == ["consume", "produce"]
    produce = sm.load_launch_code(split["kernel_id"], "produce", "gfx90a")
    consume = sm.load_launch_code(split["kernel_id"], "consume", "gfx90a")
    assert produce == consume
    assert _runtime.code_object_has_kernel(produce, "split_kv_produce")
    assert _runtime.code_object_has_kernel(consume, "split_kv_consume")
    kernel = dset.kernel(split["kernel_id"])
    assert kernel is not None
    produce, consume = (kernel["view"].launch(n).source for n in ("produce", "consume"))
    assert produce.toc_key == consume.toc_key
    assert produce.symbol != consume.symbol


def test_pack_refuses_a_shard_the_runtime_would_drop(tmp_path: Path) -> None:
    tree = copy_example(tmp_path / "tree")
    manifest = tmp_path / "handlers.json"
    write_json(manifest, {"example_split_kv_dispatch": ["produce"], "example_scale_dispatch": []})
    out = tmp_path / "out"
    (out / "gfx90a").mkdir(parents=True)  # a stale shard
    r = run_pack(tree, out, ["gfx90a"], "--handlers", str(manifest), cache=tmp_path / "cache")
    assert r.returncode == 1
    assert ("attention/split_kv.kdp.json: $.kernelDescriptors[0]: the runtime drops kernel "
            "'split_kv.f32' (id d168fb16-29a6-564c-b73f-f659c7cd8e72): dispatch symbol 'example_split_kv_dispatch' declares launches "
            "{produce}, the kernel has {consume, produce}") in r.stderr
    # The launches it is held against come from the manifest: the message points there.
    # write_json indents one entry a line, the first on line 2.
    assert (f"(the handler manifest {manifest}:2 declares them; change the kernel's launches "
            "or that entry)") in r.stderr
    assert "failed: gfx90a" in r.stderr
    assert not (out / "gfx90a").exists()
    assert not (out / ".gfx90a.staging").exists()

    # A complete manifest: every dispatch symbol the shard uses.
    write_json(manifest, {"example_split_kv_dispatch": ["consume", "produce"],
                          "example_scale_dispatch": [], "example_reduce_dispatch": [],
                          "example_twostage_dispatch": ["partial", "combine"],
                          "example_bwd_prep_dispatch": [], "example_bwd_dkdv_dispatch": [],
                          "example_bwd_dq_dispatch": ["partial", "reduce"]})
    r = run_pack(tree, out, ["gfx90a"], "--handlers", str(manifest), cache=tmp_path / "cache")
    assert r.returncode == 0, r.stderr


def test_runtime_check_falls_back_to_the_stub_rule(tmp_path: Path) -> None:
    """Without a manifest or UDD launches, the first kernel of the first pack decides."""
    tree = copy_example(tmp_path / "tree")
    udd = tree / "attention" / "split_kv.udd.json"
    doc = read_json(udd)
    doc["version"] = "1.0"
    del doc["launches"]
    write_json(udd, doc)
    r = run_pack(tree, tmp_path / "out", ["gfx90a"], cache=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    dset = _runtime.load_shard(str(tmp_path / "out" / "gfx90a"))
    assert _runtime.stub_handlers(dset)["example_split_kv_dispatch"] == ["consume", "produce"]


@pytest.mark.parametrize("content,fragment", [
    ("[1]", "handlers.json: $: expected an object {dispatch_symbol: [launch names]}"),
    ('{"sym": "produce"}', 'handlers.json: $["sym"]: expected a list of launch names'),
    ('{"sym": ["_x"]}', 'handlers.json: $["sym"]: expected a list of launch names'),
    ("{nope", "handlers.json: not valid JSON"),
])
def test_malformed_handler_manifest_is_named(tmp_path: Path, content: str, fragment: str) -> None:
    manifest = tmp_path / "handlers.json"
    manifest.write_text(content)
    r = run_pack(copy_example(tmp_path / "tree"), tmp_path / "out", ["gfx90a"],
                 "--handlers", str(manifest), cache=tmp_path / "cache")
    assert r.returncode == 1
    assert fragment in r.stderr
    assert "Traceback" not in r.stderr


class _Handler:
    """A dispatch handler given from Python: the parallel check calls it from threads of
    its own (it takes the GIL); ``fail`` makes expected_signature raise."""

    def __init__(self, launches: list[str], fail: bool = False) -> None:
        self.launches, self.fail = launches, fail

    def launch_names(self) -> list[str]:
        return self.launches

    def expected_signature(self, launch: str | None) -> None:
        if self.fail:
            raise RuntimeError(f"handler failed for {launch}")
        return None


def _damaged_copy(shard: Path, dest: Path) -> Path:
    """The shard with a byte of its archive's data flipped: one entry fails its check."""
    import shutil

    copy = Path(shutil.copytree(shard, dest))
    (archive,) = (copy / "kpack").glob("*.kpack")
    data = bytearray(archive.read_bytes())
    data[len(data) // 3] ^= 0xFF
    archive.write_bytes(bytes(data))
    return copy


def test_parallel_check_finds_what_a_loop_finds(multi_launch: Path, tmp_path: Path) -> None:
    for shard in (multi_launch, _damaged_copy(multi_launch, tmp_path / "damaged")):
        dset = _runtime.load_shard(str(shard))
        handlers = {**_runtime.stub_handlers(dset),
                    "example_split_kv_dispatch": _Handler(["produce", "consume"])}
        sm = _runtime.StateManager(dset, handlers=handlers, arch="gfx90a")
        launches = [(k["kernel_id"], launch) for k in sm.kept()
                    for launch in k["launches"] or [None]]
        looped = []
        for kernel_id, launch in launches:
            try:
                _runtime.StateManager(dset, handlers=handlers, arch="gfx90a").load_launch_code(
                    kernel_id, launch)
                looped.append(None)
            except _runtime.RuntimeCheckError as e:
                looped.append(e.diagnostic)
        for threads in (1, 3):
            fresh = _runtime.StateManager(dset, handlers=handlers, arch="gfx90a")
            assert fresh.check_launch_codes(launches, "gfx90a", threads) == looped
        if shard != multi_launch:
            assert any(d is not None for d in looped)


def test_parallel_check_raises_a_handlers_exception(multi_launch: Path) -> None:
    dset = _runtime.load_shard(str(multi_launch))
    handlers = {**_runtime.stub_handlers(dset),
                "example_split_kv_dispatch": _Handler(["produce", "consume"], fail=True)}
    sm = _runtime.StateManager(dset, handlers=handlers, arch="gfx90a")
    launches = [(k["kernel_id"], launch) for k in sm.kept() for launch in k["launches"] or [None]]
    with pytest.raises(RuntimeError, match="handler failed for"):
        sm.check_launch_codes(launches, "gfx90a", 3)


def _checked_ahead(shard: Path, threads: int) -> _runtime.ArchiveCache:
    """An ArchiveCache that has checked every entry of the shard's archives, as a pack
    does while it writes the descriptors."""
    archives = _runtime.ArchiveCache()
    for archive in sorted((shard / "kpack").glob("*.kpack")):
        archives.check_entries(str(archive), threads)
    return archives


def _break(shard: Path, damage: str) -> None:
    """One launch of scale.f32 no longer matches its archive entry (or the archive a byte)."""
    from shard_support import edit, kernel

    def change(doc: dict[str, object]) -> None:
        src = kernel(doc, "scale.f32")["kernel_source"]
        if damage == "digest":
            src["sha256"] = "0" * 64
        elif damage == "symbol":
            src["symbol"] = "no_such_kernel"

    if damage == "archive byte":
        _damaged_copy(shard, shard.parent / "flipped")
        shutil.rmtree(shard)
        (shard.parent / "flipped").rename(shard)
    elif damage != "none":
        edit(shard / "attention" / "scale.kdp.json", change)


@pytest.mark.parametrize("damage", ["none", "digest", "symbol", "archive byte"])
def test_entries_checked_ahead_give_the_plain_checks_verdict(
        multi_launch: Path, tmp_path: Path, damage: str) -> None:
    """A check through entries checked ahead (the pack's) finds what the plain check finds,
    in the same words, and decompresses nothing again."""
    shard = Path(shutil.copytree(multi_launch, tmp_path / "shard"))
    _break(shard, damage)
    dset = _runtime.load_shard(str(shard))
    handlers = {**_runtime.stub_handlers(dset),
                "example_split_kv_dispatch": _Handler(["produce", "consume"])}
    sm = _runtime.StateManager(dset, handlers=handlers, arch="gfx90a")
    launches = sm.packed_launches()
    plain = sm.check_launch_codes(launches, "gfx90a", 2)
    assert (damage == "none") == all(d is None for d in plain), plain
    if damage in ("digest", "symbol"):
        codes = {d["code"] for d in plain if d is not None}
        assert codes == {"DIGEST_MISMATCH" if damage == "digest" else "SYMBOL_MISSING"}
    for threads in (1, 3):
        archives = _checked_ahead(shard, threads)
        spent = archives.decompressed_bytes
        assert spent > 0
        ahead = _runtime.StateManager(dset, handlers=handlers, arch="gfx90a",
                                      archives=archives)
        assert ahead.check_launch_codes(launches, "gfx90a", 2) == plain
        if damage != "archive byte":  # an entry that cannot be read is read again
            assert archives.decompressed_bytes == spent


def test_pack_time_check_refuses_what_the_runtime_refuses(multi_launch: Path,
                                                          tmp_path: Path) -> None:
    """check_shard with entries checked ahead and without: one verdict."""
    from ukdpack.shard.runtime_check import check_shard

    shard = Path(shutil.copytree(multi_launch, tmp_path / "shard"))
    _break(shard, "digest")
    plain = check_shard(shard, "gfx90a", None, 2)
    assert plain and {p.code for p in plain} == {"DIGEST_MISMATCH"}
    assert check_shard(shard, "gfx90a", None, 2, _checked_ahead(shard, 2)) == plain
