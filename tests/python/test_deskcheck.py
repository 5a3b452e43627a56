"""``ukdpack desk-check``: the whole-set rules over a packed shard, toc keys
judged by sha256, archive membership, unclaimed entries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pack_support import read_json
from shard_support import (
    ARCH,
    copy_shard,
    edit,
    errors,
    kernel,
    pack_example,
    rewrite_archive,
    ukdpack,
)

from ukdpack.authored.model import id_key
from ukdpack.errors import Problem
from ukdpack.shard import archive as kpack
from ukdpack.tools.deskcheck import desk_check
from ukdpack.tools.shard import load_shard


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pack_example(tmp_path_factory, "deskcheck")[1] / ARCH


@pytest.fixture()
def copy(shard: Path, tmp_path: Path) -> Path:
    return copy_shard(shard, tmp_path / ARCH)


def _key(shard: Path, kdp: str, name: str, launch: str | None = None) -> str:
    k = kernel(read_json(shard / kdp), name)
    src = k["kernel_source"] if launch is None else k["sources"][launch]
    return str(src["toc_key"])


def test_a_fresh_shard_passes(shard: Path) -> None:
    r = ukdpack("desk-check", str(shard))
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""  # nothing unclaimed, nothing noted
    assert "desk-check passed: 7 packs, 9 kernels, 12 launches" in r.stdout


def test_single_launch_kernel_reusing_a_multi_launch_toc_key(copy: Path) -> None:
    """scale.f32 names split_kv's toc key (its object shared by produce and consume) with
    its own digest: two kernels, one key, two code objects."""
    split_key = _key(copy, "attention/split_kv.kdp.json", "split_kv.f32", "consume")
    edit(copy / "attention" / "scale.kdp.json",
         lambda d: kernel(d, "scale.f32")["kernel_source"].update(toc_key=split_key))
    r = ukdpack("desk-check", str(copy))
    assert r.returncode == 1
    # The whole-set rule names the shared key; the runtime, loading scale.f32, finds its
    # digest differs from the entry's.
    runtime, line = errors(r.stderr)
    assert "attention/scale.kdp.json: $.kernelDescriptors[0].kernel_source" in runtime
    assert "DIGEST_MISMATCH" in runtime
    assert line.startswith(
        "ukdpack: error: attention/split_kv.kdp.json: $.kernelDescriptors[0].sources.consume."
        f"toc_key: kernel 'split_kv.f32' (id d168fb16-29a6-564c-b73f-f659c7cd8e72) launch 'consume' names toc key '{split_key}' "
        "(kpack/kernels_gfx90a.kpack) with sha256 ")
    assert ("but kernel 'scale.f32' (id 29f00a30-4246-57a5-9889-af778425f9c3, single launch) (attention/scale.kdp.json: "
            "$.kernelDescriptors[0]) names it with sha256 ") in line
    assert line.endswith("two kernels share a toc key only when they share the code object "
                         "(one sha256)")
    # scale.f32's own entry is now named by no launch.
    (note,) = errors(r.stderr, "note")
    assert note.startswith("ukdpack: note: kpack/kernels_gfx90a.kpack: entry 'scale_")
    assert "is claimed by no launch" in note


def test_any_launch_of_a_multi_launch_kernel_counts(copy: Path) -> None:
    """The second launch (by name) of twostage reuses scale.f16's key: found although
    twostage's first launch is fine."""
    f16_key = _key(copy, "attention/scale.kdp.json", "scale.f16")
    edit(copy / "prebuilt" / "twostage.kdp.json",
         lambda d: kernel(d, "twostage.gfx90a")["sources"]["partial"].update(toc_key=f16_key))
    # The whole-set rule names the shared key; the runtime, loading partial's code, finds
    # the entry's digest is scale.f16's (as ukdpack-validate says both).
    runtime, problem = [p for p in desk_check(copy).problems if p.severity == "error"]
    assert problem.file == "prebuilt/twostage.kdp.json"
    assert problem.path == "$.kernelDescriptors[0].sources.partial.toc_key"
    assert "kernel 'twostage.gfx90a' (id 57790d2d-dc56-5ef3-916f-c177c3c37db9) launch 'partial' names toc key" in problem.message
    assert "but kernel 'scale.f16' (id 9a038e0d-7fc8-5a7a-b054-7ec86dbc56fc, single launch)" in problem.message
    assert (runtime.code, runtime.path) == ("DIGEST_MISMATCH",
                                            "$.kernelDescriptors[0].sources.partial.sha256")


def test_kernels_sharing_one_object_pass(copy: Path) -> None:
    """reduce_sum and both launches of twostage read one prebuilt object: one key, one
    digest. A second kernel naming that key and digest is sharing, not a clash."""
    def share(doc: Any) -> None:
        source = kernel(doc, "twostage.gfx90a")["sources"]["partial"]
        kernel(doc, "twostage.gfx90a")["sources"]["combine"].update(
            toc_key=source["toc_key"], sha256=source["sha256"])

    edit(copy / "prebuilt" / "twostage.kdp.json", share)
    reduce_doc = read_json(copy / "prebuilt" / "reduce.kdp.json")
    twostage = read_json(copy / "prebuilt" / "twostage.kdp.json")
    assert kernel(reduce_doc, "reduce_sum.gfx90a")["kernel_source"]["toc_key"] == \
        kernel(twostage, "twostage.gfx90a")["sources"]["partial"]["toc_key"]
    assert desk_check(copy).ok


def test_launches_of_one_kernel_naming_one_key_with_two_digests(copy: Path) -> None:
    edit(copy / "attention" / "split_kv.kdp.json",
         lambda d: kernel(d, "split_kv.f32")["sources"]["produce"].update(sha256="a" * 64))
    # The rule says the launches disagree; the runtime, which digest the entry has.
    problem, runtime = [p for p in desk_check(copy).problems if p.severity == "error"]
    assert problem.path == runtime.path == "$.kernelDescriptors[0].sources.produce.sha256"
    assert ("kernel 'split_kv.f32' (id d168fb16-29a6-564c-b73f-f659c7cd8e72) launch 'produce' names toc key 'split_kv_" in problem.message
            and "and launch 'consume' of the same kernel names it with sha256 "
            in problem.message and "one toc key holds one code object" in problem.message)
    assert runtime.code == "DIGEST_MISMATCH"
    assert f", the descriptor says {'a' * 64}; the archive does not hold" in runtime.message


def test_toc_keys_missing_from_the_archive_and_unclaimed_entries(copy: Path) -> None:
    f32_key = _key(copy, "attention/scale.kdp.json", "scale.f32")
    rewrite_archive(copy, drop=[f32_key], add={"spare_000000000000": b"not even an object"})
    edit(copy / "attention" / "scale.kdp.json",
         lambda d: kernel(d, "scale.f16")["kernel_source"].update(library="../../away.kpack"))
    r = ukdpack("desk-check", str(copy), "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    got = {(p["severity"], p["file"], p["path"], p["message"]) for p in doc["problems"]}
    # The runtime's findings, in its words: desk-check judges no toc key itself.
    assert ("error", "attention/scale.kdp.json", "$.kernelDescriptors[0].kernel_source.toc_key",
            "TOC_MISSING: kernel 'scale.f32' (id 29f00a30-4246-57a5-9889-af778425f9c3, single "
            "launch): archive '../kpack/kernels_gfx90a.kpack' (kpack/kernels_gfx90a.kpack in the "
            f"shard) has no entry for toc key '{f32_key}' and arch gfx90a (it holds arches "
            "gfx90a): it holds no entry of that key") in got
    assert ("error", "attention/scale.kdp.json", "$.kernelDescriptors[1].kernel_source.library",
            "LIBRARY_ESCAPES: kernel 'scale.f16' (id 9a038e0d-7fc8-5a7a-b054-7ec86dbc56fc, single "
            f"launch): library '../../away.kpack' leaves the shard root {copy}") in got
    assert ("note", "kpack/kernels_gfx90a.kpack", None,  # a whole file: no JSON path
            "entry 'spare_000000000000' for gfx90a is claimed by no launch; it ships for "
            "nothing") in got
    assert len(got) == 4  # and scale.f16's own entry, which no launch names any more


def test_an_unclaimed_entry_alone_is_a_note(copy: Path) -> None:
    rewrite_archive(copy, add={"spare_000000000000": b"x"})
    r = ukdpack("desk-check", str(copy))
    assert r.returncode == 0, r.stderr
    assert errors(r.stderr) == []
    assert errors(r.stderr, "note") == [
        "ukdpack: note: kpack/kernels_gfx90a.kpack: entry 'spare_000000000000' for gfx90a is "
        "claimed by no launch; it ships for nothing"]
    # A second archive no launch names at all.
    other = kpack.ArchiveWriter("other", [ARCH])
    other.add("x_000000000000", ARCH, b"x")
    other.write(copy / "kpack" / "other_gfx90a.kpack")
    assert ("ukdpack: note: kpack/other_gfx90a.kpack: no launch of the shard names this "
            "archive; it ships for nothing") in ukdpack("desk-check", str(copy)).stderr


def test_launch_sets_and_metadata_rules_apply_to_the_shard(copy: Path) -> None:
    """Rules 4.3 and 4.5, as validate applies them to an authored root."""
    edit(copy / "attention" / "split_kv.udd.json", lambda d: d.update(launches=["produce",
                                                                               "finish"]))
    edit(copy / "attention" / "scale.kdp.json",
         lambda d: kernel(d, "scale.f16").update(metadata={"dtype": "FLOAT"}))
    r = ukdpack("desk-check", str(copy))
    assert r.returncode == 1
    lines = errors(r.stderr)
    assert any("attention/split_kv.kdp.json: $.kernelDescriptors: dispatch symbol "
               "'example_split_kv_dispatch' runs launches {finish, produce}" in ln
               for ln in lines), r.stderr
    assert any("attention/scale.kdp.json: $.kernelDescriptors[1].metadata: completed metadata "
               in ln and "equals that of kernel 'scale.f32' (id 29f00a30-4246-57a5-9889-af778425f9c3)" in ln for ln in lines), r.stderr
    assert len(lines) == 2


def test_authored_sources_in_a_shard_and_bad_input(copy: Path, tmp_path: Path) -> None:
    edit(copy / "attention" / "scale.kdp.json",
         lambda d: kernel(d, "scale.f32").update(kernel_source={
             "kind": "hip", "source": "k.hip", "entry": "e", "build": {}}))
    lines = errors(ukdpack("desk-check", str(copy)).stderr)
    assert any("$.kernelDescriptors[0].kernel_source.kind: kernel 'scale.f32' (id 29f00a30-4246-57a5-9889-af778425f9c3, single launch): "
               "kind 'hip' in a packed shard; the packer writes every code object as kind "
               "'kpack'" in ln for ln in lines), lines
    r = ukdpack("desk-check", str(tmp_path / "nowhere"))
    assert r.returncode == 2 and "expected a shard folder" in r.stderr
    assert "Traceback" not in r.stderr
    assert ukdpack("desk-check").returncode == 2


def test_findings_are_keyed_by_kernel_and_launch(copy: Path) -> None:
    """The runtime's findings come keyed by kernel id and launch name; a tool's or a rule's
    problem is keyed by the launch whose source holds it (the runtime says which), and the
    runtime's finding joins unless one about the same launch, or with its code about what
    holds the launch, stands."""
    split_file = "attention/split_kv.kdp.json"
    edit(copy / split_file,
         lambda d: kernel(d, "split_kv.f32")["sources"]["produce"].update(sha256="a" * 64))
    shard = load_shard(copy)
    split = id_key(str(kernel(read_json(copy / split_file), "split_kv.f32")["id"]))
    at = "$.kernelDescriptors[0]"

    def problem(path: str, code: str = "", file: str = split_file) -> Problem:
        return Problem(file, path, "a tool's own line", code=code)

    assert shard.subject(problem(f"{at}.sources.produce.sha256")) == ("launch", split, "produce")
    assert shard.subject(problem(f"{at}.sources.consume")) == ("launch", split, "consume")
    assert shard.subject(problem(at)) == ("kernel", split, None)
    assert shard.subject(problem(f"{at}.arch")) == ("at", split_file, f"{at}.arch")
    (found,) = shard.runtime_findings
    assert (found.kernel, found.launch, found.problem.code) == (split, "produce",
                                                                 "DIGEST_MISMATCH")
    runtime = found.problem
    assert shard.with_runtime([]) == [runtime]
    # About the same launch, a line without a code (a tool's wording of a refusal it asked
    # the runtime for) stands alone; about its sibling: both.
    assert shard.with_runtime([problem(f"{at}.sources.produce.symbol")]) == [
        problem(f"{at}.sources.produce.symbol")]
    # A rule's line about the same launch tells the finding with its code only: another
    # rule's verdict (the key named with two digests) stands beside the runtime's.
    rule = problem(f"{at}.sources.produce.sha256", "TOC_KEY_SHARED")
    assert shard.with_runtime([rule]) == [rule, runtime]
    same = problem(f"{at}.sources.produce.sha256", "DIGEST_MISMATCH")
    assert shard.with_runtime([same]) == [same]
    # A tool's own lines restate no finding (the tools recompute none): they tell nothing.
    own = problem(f"{at}.sources.produce.symbol")
    assert shard.with_runtime([], [own]) == [own, runtime]
    sibling = problem(f"{at}.sources.consume.symbol")
    assert shard.with_runtime([sibling]) == [sibling, runtime]
    assert shard.with_runtime([Problem(split_file, f"{at}.sources.produce", "n", "note")]) == [
        Problem(split_file, f"{at}.sources.produce", "n", "note"), runtime]  # notes tell nothing
    # The same code about the kernel, its pack's kernel list or the file tells it; about
    # another kernel, or another code, does not.
    for holder in (at, "$.kernelDescriptors", "$", f"{at}.sources"):
        assert shard.with_runtime([problem(holder, "DIGEST_MISMATCH")]) == [
            problem(holder, "DIGEST_MISMATCH")], holder
    for other in (problem("$.kernelDescriptors[1]", "DIGEST_MISMATCH"),
                  problem(at, "TOC_MISSING"),
                  problem("$", "DIGEST_MISMATCH", "attention/scale.kdp.json")):
        assert shard.with_runtime([other]) == [other, runtime], other


def test_without_an_arch_every_launch_is_loaded_for_each_arch_its_kernel_names(
        shard: Path, tmp_path: Path) -> None:
    """A folder not named for an arch whose packs name two: no state manager runs, yet
    the runtime loads each launch for each arch its kernel names, and says which arches
    the archive holds the key for."""
    copy = copy_shard(shard, tmp_path / "unnamed")
    edit(copy / "attention" / "scale.kdp.json", lambda d: d.update(arch=["gfx90a", "gfx940"]))
    f32_key = _key(copy, "attention/scale.kdp.json", "scale.f32")
    r = ukdpack("desk-check", str(copy), "--json")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["arch"] is None
    found = [(p["code"], p["path"], p["message"]) for p in doc["problems"]
             if p["severity"] == "error"]
    assert len(found) == 2, found  # scale.f32 and scale.f16, for gfx940 only
    assert ("TOC_MISSING", "$.kernelDescriptors[0].kernel_source.toc_key",
            "TOC_MISSING: kernel 'scale.f32' (id 29f00a30-4246-57a5-9889-af778425f9c3, single "
            "launch): archive '../kpack/kernels_gfx90a.kpack' (kpack/kernels_gfx90a.kpack in the "
            f"shard) has no entry for toc key '{f32_key}' and arch gfx940 (it holds arches "
            "gfx90a): for that key it holds arches gfx90a") in found


def test_a_dropped_kernels_launches_are_loaded_too(copy: Path) -> None:
    """The state manager drops split_kv (its dispatch now runs other launches) and so
    loads none of its code; its launches whose entry (one module: one toc key) left the
    archive are still found, by the runtime's own load of each launch."""
    edit(copy / "attention" / "split_kv.udd.json", lambda d: d.update(launches=["produce",
                                                                               "finish"]))
    consume_key = _key(copy, "attention/split_kv.kdp.json", "split_kv.f32", "consume")
    rewrite_archive(copy, drop=[consume_key])
    shard = load_shard(copy)
    assert any(f.whole_kernel for f in shard.runtime_findings)
    assert not any(f.problem.code == "TOC_MISSING" for f in shard.runtime_findings)
    missing = [p for p in desk_check(copy).problems if p.code == "TOC_MISSING"]
    assert [p.path for p in missing] == [f"$.kernelDescriptors[0].sources.{name}.toc_key"
                                         for name in ("consume", "produce")]
    assert all(f"has no entry for toc key '{consume_key}' and arch gfx90a" in p.message
               for p in missing)
