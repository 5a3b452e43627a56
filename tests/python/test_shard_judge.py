"""The shard tools refuse exactly what the runtime refuses: a ``library`` reached through
a symbolic link (even one that stays inside the shard), and a folder that holds no
shard (an empty folder, the out root instead of ``OUT_ROOT/<arch>/``), with the
runtime's own words."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from shard_support import ARCH, copy_shard, edit, errors, kernel, pack_example, ukdpack

from ukdpack import _runtime

SCALE = "attention/scale.kdp.json"
#: Every packed launch of the example's gfx90a shard, as the runtime names them.
LAUNCHES = {
    (SCALE, "$.kernelDescriptors[0].kernel_source.library", "kernel 'scale.f32' (id 29f00a30-4246-57a5-9889-af778425f9c3, single launch)"),
    (SCALE, "$.kernelDescriptors[1].kernel_source.library", "kernel 'scale.f16' (id 9a038e0d-7fc8-5a7a-b054-7ec86dbc56fc, single launch)"),
    ("attention/split_kv.kdp.json", "$.kernelDescriptors[0].sources.consume.library",
     "kernel 'split_kv.f32' (id d168fb16-29a6-564c-b73f-f659c7cd8e72) launch 'consume'"),
    ("attention/split_kv.kdp.json", "$.kernelDescriptors[0].sources.produce.library",
     "kernel 'split_kv.f32' (id d168fb16-29a6-564c-b73f-f659c7cd8e72) launch 'produce'"),
    ("prebuilt/reduce.kdp.json", "$.kernelDescriptors[0].kernel_source.library",
     "kernel 'reduce_sum.gfx90a' (id 11f56662-04c9-5b01-991e-71b4342e43e8, single launch)"),
    ("prebuilt/twostage.kdp.json", "$.kernelDescriptors[0].sources.combine.library",
     "kernel 'twostage.gfx90a' (id 57790d2d-dc56-5ef3-916f-c177c3c37db9) launch 'combine'"),
    ("prebuilt/twostage.kdp.json", "$.kernelDescriptors[0].sources.partial.library",
     "kernel 'twostage.gfx90a' (id 57790d2d-dc56-5ef3-916f-c177c3c37db9) launch 'partial'"),
    # The slotted engine's kernels are judged as every other kernel is.
    ("attention_bwd/bwd_prep.kdp.json", "$.kernelDescriptors[0].kernel_source.library",
     "kernel 'bwd_prep.f32' (id 18051aa9-c892-56f2-9fec-94d7b7f0b158, single launch)"),
    ("attention_bwd/bwd_dkdv.kdp.json", "$.kernelDescriptors[0].kernel_source.library",
     "kernel 'bwd_dkdv.b256' (id aec7954c-7d20-5d4a-92bc-e502a3e1ec2d, single launch)"),
    ("attention_bwd/bwd_dkdv.kdp.json", "$.kernelDescriptors[1].kernel_source.library",
     "kernel 'bwd_dkdv.b128' (id 714802c2-1a6c-5eaf-93c3-f99ba7377a26, single launch)"),
    ("attention_bwd/bwd_dq.kdp.json", "$.kernelDescriptors[0].sources.partial.library",
     "kernel 'bwd_dq.f32' (id 52e8bf53-867b-5ae4-b7cb-4936b0e5309f) launch 'partial'"),
    ("attention_bwd/bwd_dq.kdp.json", "$.kernelDescriptors[0].sources.reduce.library",
     "kernel 'bwd_dq.f32' (id 52e8bf53-867b-5ae4-b7cb-4936b0e5309f) launch 'reduce'"),
}

Found = set[tuple[str, str, str]]


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The example tree and its out root holding the gfx90a shard."""
    return pack_example(tmp_path_factory, "judge")


@pytest.fixture()
def copy(packed: tuple[Path, Path], tmp_path: Path) -> Path:
    return copy_shard(packed[1] / ARCH, tmp_path / ARCH)


def _runtime_refusals(shard: Path) -> Found:
    """(file, JSON path, message) of every error the runtime's validator reports."""
    verdict = _runtime.validate_roots([str(shard)])
    assert not verdict["ok"]
    return {(d["file"], d["path"], d["message"]) for d in verdict["diagnostics"]
            if d["severity"] == "error"}


def _tool_refusals(tool: str, shard: Path, tree: Path) -> Found:
    """(file, JSON path, message) of every error ``tool --json`` reports; it exits 1. A
    finding of the runtime's launch check leads its message with its code, which the
    validator gives apart: the words after it are the runtime's."""
    extra = ["--source-root", str(tree)] if tool == "verify" else []
    r = ukdpack(tool, str(shard), *extra, "--json")
    assert r.returncode == 1, (tool, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    return {(p["file"], p["path"], p["message"].removeprefix(f"{p['code']}: "))
            for p in json.loads(r.stdout)["problems"] if p["severity"] == "error"}


@pytest.mark.parametrize("tool", ["desk-check", "verify", "inspect"])
def test_a_linked_archive_folder_is_refused_as_the_runtime_refuses_it(
        packed: tuple[Path, Path], copy: Path, tool: str) -> None:
    """kpack/ is a link to a folder inside the shard: nothing leaves the shard, yet the
    runtime follows no link in it, so every packed launch is refused, by every tool."""
    (copy / "kpack").rename(copy / "archives")
    (copy / "kpack").symlink_to("archives", target_is_directory=True)
    runtime = _runtime_refusals(copy)
    assert runtime == {(file, path, f"{who}: library '../kpack/kernels_gfx90a.kpack' goes "
                        "through the symbolic link 'kpack'; the runtime follows no link "
                        "inside a shard") for file, path, who in LAUNCHES}
    assert _tool_refusals(tool, copy, packed[0]) == runtime


@pytest.mark.parametrize("how", ["folder-link", "archive-link"])
@pytest.mark.parametrize("tool", ["desk-check", "verify", "inspect"])
def test_a_library_through_a_link_is_refused_as_the_runtime_refuses_it(
        packed: tuple[Path, Path], copy: Path, tool: str, how: str) -> None:
    """One launch names the shard's own archive through a link (a linked folder, or a
    linked archive file): only that launch is refused, in the runtime's words."""
    if how == "folder-link":
        (copy / "attention" / "lib").symlink_to("../kpack", target_is_directory=True)
        library, hop = "lib/kernels_gfx90a.kpack", "attention/lib"
    else:
        (copy / "kpack" / "alias.kpack").symlink_to(f"kernels_{ARCH}.kpack")
        library, hop = "../kpack/alias.kpack", "kpack/alias.kpack"
    edit(copy / SCALE, lambda d: kernel(d, "scale.f16")["kernel_source"].update(library=library))
    expected = {(SCALE, "$.kernelDescriptors[1].kernel_source.library",
                 f"kernel 'scale.f16' (id 9a038e0d-7fc8-5a7a-b054-7ec86dbc56fc, single launch): library '{library}' goes through the "
                 f"symbolic link '{hop}'; the runtime follows no link inside a shard")}
    assert _runtime_refusals(copy) == expected
    assert _tool_refusals(tool, copy, packed[0]) == expected


def _validate(folder: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "ukdpack-validate"
    return subprocess.run([str(exe), str(folder)], capture_output=True, text=True,
                          check=False, timeout=120, env=dict(os.environ, HIP_PLATFORM="amd"))


def _wrong_folder_lines(tool: str, folder: Path, packed: tuple[Path, Path]
                        ) -> tuple[int, list[str]]:
    """Exit status and error lines of ``tool`` pointed at ``folder``."""
    tree, out = packed
    if tool == "ukdpack-validate":
        r = _validate(folder)
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("ukdpack-validate: error: ")]
    else:
        args = {"verify": [str(folder), "--source-root", str(tree)],
                "diff": [str(out / ARCH), str(folder)]}.get(tool, [str(folder)])
        r = ukdpack(tool, *args)
        lines = errors(r.stderr)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    return r.returncode, lines


TOOLS = ["inspect", "desk-check", "verify", "diff", "ukdpack-validate"]


@pytest.mark.parametrize("tool", TOOLS)
def test_an_empty_folder_holds_no_shard(packed: tuple[Path, Path], tmp_path: Path,
                                        tool: str) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "README.md").write_text("not a descriptor\n")
    code, lines = _wrong_folder_lines(tool, empty, packed)
    prefix = "ukdpack-validate" if tool == "ukdpack-validate" else "ukdpack"
    assert code == 1
    assert lines == [f"{prefix}: error: {empty}: holds no shard: no descriptor file "
                     "(<name>.<type>.json) lies under it"]


@pytest.mark.parametrize("tool", TOOLS)
def test_the_out_root_holds_no_shard_and_names_one(packed: tuple[Path, Path],
                                                   tool: str) -> None:
    _, out = packed
    code, lines = _wrong_folder_lines(tool, out, packed)
    prefix = "ukdpack-validate" if tool == "ukdpack-validate" else "ukdpack"
    assert code == 1
    assert lines == [f"{prefix}: error: {out}: holds no shard: its descriptors lie in the "
                     f"shard folder {ARCH} below it (it is an out root; a shard is "
                     f"OUT_ROOT/<arch>/); did you mean {out / ARCH}?"]


def test_the_runtime_load_of_the_out_root_says_so_in_one_line(packed: tuple[Path, Path]
                                                             ) -> None:
    """A consuming library's loadShard("out") (the extension's load_shard is the same
    call): one NO_SHARD error in the tools' words, not a duplicate id per descriptor."""
    _, out = packed
    dset = _runtime.load_shard(str(out))
    assert dset.diagnostics == [{
        "severity": "error", "code": "NO_SHARD", "file": str(out), "path": "",
        "message": f"holds no shard: its descriptors lie in the shard folder {ARCH} below it "
                   f"(it is an out root; a shard is OUT_ROOT/<arch>/); did you mean "
                   f"{out / ARCH}?"}]
    assert not _runtime.load_shard(str(out / ARCH)).diagnostics


def test_an_empty_folder_beside_arch_folders_suggests_one(tmp_path: Path) -> None:
    (tmp_path / "gfx1030").mkdir()
    r = ukdpack("desk-check", str(tmp_path))
    assert r.returncode == 1
    assert errors(r.stderr) == [f"ukdpack: error: {tmp_path}: holds no shard: no descriptor "
                                f"file (<name>.<type>.json) lies under it; did you mean "
                                f"{tmp_path / 'gfx1030'}?"]


def test_the_shard_itself_still_passes(packed: tuple[Path, Path], tmp_path: Path) -> None:
    """The judgement is not a blanket refusal: the right folder passes every tool, also
    when it is reached through a path that ends in a separator."""
    tree, out = packed
    shard = shutil.copytree(out / ARCH, tmp_path / ARCH)
    for args in (["inspect", f"{shard}/"], ["desk-check", f"{shard}/"],
                 ["verify", f"{shard}/", "--source-root", str(tree)],
                 ["diff", str(out / ARCH), f"{shard}/"]):
        r = ukdpack(*args)
        assert r.returncode == 0, (args, r.stderr)
    assert _validate(shard).returncode == 0
