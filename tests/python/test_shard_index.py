"""The shard's index (index.ukdx, docs/cpp-consumer.md): the packer writes it beside a
shard whose load says nothing, the runtime's load reads the kernels through it, and a
shard edited after packing is read from its JSON and reported by ukdpack-validate."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from shard_support import ARCH, edit, pack_example

from ukdpack import _runtime

INDEX = _runtime.SHARD_INDEX_FILE


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pack_example(tmp_path_factory, "index")[1] / ARCH


def _validate(folder: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "ukdpack-validate"
    return subprocess.run([str(exe), str(folder)], capture_output=True, text=True, check=False,
                          timeout=120)


def _without_views(packs: list[dict[str, object]]) -> list[object]:
    return [{**p, "kernels": [{k: v for k, v in kd.items() if k != "view"}
                              for kd in p["kernels"]]}  # type: ignore[attr-defined]
            for p in packs]


def test_the_packer_writes_an_index_the_runtime_loads_through(shard: Path) -> None:
    assert (shard / INDEX).is_file()
    indexed = _runtime.load_shard(str(shard))
    assert indexed.from_index, indexed.index_reason
    assert indexed.index_reason == ""
    json_set = _runtime.load_shard(str(shard), use_index=False)
    assert not json_set.from_index and json_set.index_reason == ""
    assert indexed.diagnostics == json_set.diagnostics == []
    assert _without_views(indexed.packs) == _without_views(json_set.packs)
    # Written from the descriptors alone: the same bytes again.
    data, why = _runtime.shard_index(str(shard))
    assert why == "" and data == (shard / INDEX).read_bytes()
    assert _runtime.check_shard_index(str(shard)) == {"present": True, "binds": True, "why": "",
                                                      "difference": ""}
    assert _validate(shard).returncode == 0


def test_an_edited_descriptor_is_read_as_written_and_validate_says_why(shard: Path,
                                                                        tmp_path: Path) -> None:
    copy = tmp_path / ARCH
    shutil.copytree(shard, copy)
    kdp = sorted(copy.rglob("*.kdp.json"))[0]
    rel = kdp.relative_to(copy).as_posix()
    edit(kdp, lambda d: d["kernelDescriptors"][0].__setitem__("priority", 91), keep_index=True)
    dset = _runtime.load_shard(str(copy))
    assert not dset.from_index
    assert f"{rel} is not the file it was written for" in dset.index_reason
    assert dset.pack(dset.packs[0]["id"]) is not None
    first = next(p for p in dset.packs if p["file"] == rel)
    assert first["kernels"][0]["priority"] == 91  # the JSON, never the stale index
    r = _validate(copy)
    assert r.returncode == 1
    assert f"{rel} is not the file it was written for" in r.stderr
    assert "repack the shard" in r.stderr
    # Deleting it clears the finding; the load is the same.
    (copy / INDEX).unlink()
    assert _validate(copy).returncode == 0
    assert _runtime.load_shard(str(copy)).index_reason == f"the shard has no {INDEX}"


def test_a_damaged_index_changes_nothing(shard: Path, tmp_path: Path) -> None:
    copy = tmp_path / ARCH
    shutil.copytree(shard, copy)
    want = _without_views(_runtime.load_shard(str(copy), use_index=False).packs)
    data = (copy / INDEX).read_bytes()
    for damaged in (data[: len(data) // 2], data[:-1], data + b"\0", b"UKDX" + data[4:20],
                    data[:60] + bytes([data[60] ^ 1]) + data[61:]):
        (copy / INDEX).write_bytes(damaged)
        dset = _runtime.load_shard(str(copy))
        assert not dset.from_index and dset.index_reason.startswith(INDEX)
        assert _without_views(dset.packs) == want
        assert dset.diagnostics == []
        assert _validate(copy).returncode == 1


def test_a_shard_whose_load_says_anything_gets_no_index(tmp_path: Path) -> None:
    shard = tmp_path / "s"
    shard.mkdir()
    (shard / "a.kdp.json").write_text("{}\n")
    data, why = _runtime.shard_index(str(shard))
    assert data is None and "gives diagnostics" in why


def test_the_index_drafted_from_the_checks_load_is_the_same_and_confirmed(
        shard: Path, tmp_path: Path) -> None:
    # The packer makes the index from the runtime check's own JSON load and checks the
    # load through it once that load is freed: the same bytes as a load of its own.
    copy = tmp_path / ARCH
    shutil.copytree(shard, copy)
    (copy / INDEX).unlink()
    dset = _runtime.load_shard(str(copy), use_index=False)
    draft, why = _runtime.shard_index_draft(dset)
    del dset
    assert draft is not None and why == ""
    assert draft.data == (shard / INDEX).read_bytes()
    assert draft.confirm(str(copy)) == ""
    # A kernel changed after the draft: the load through it no longer binds.
    kdp = sorted(copy.rglob("*.kdp.json"))[0]
    edit(kdp, lambda d: d["kernelDescriptors"][0].__setitem__("priority", 91), keep_index=True)
    assert "does not bind" in draft.confirm(str(copy))
    # Only a JSON load gets one: not a load through an index, nor one that says anything.
    indexed = _runtime.load_shard(str(shard))
    assert indexed.from_index
    assert _runtime.shard_index_draft(indexed)[0] is None
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a.kdp.json").write_text("{}\n")
    draft, why = _runtime.shard_index_draft(_runtime.load_shard(str(bad), use_index=False))
    assert draft is None and "gives diagnostics" in why


def test_a_file_copied_over_with_an_older_time_is_refused_at_first_use(shard: Path,
                                                                        tmp_path: Path) -> None:
    """A KDP of the recorded size modified before the index was written is not read at
    load (the index's skeleton stands for it): one copied over with its old time and
    another content of that size is seen when a kernel of it is first built, which is
    refused with the cause, and by ukdpack-validate, which reads every file."""
    copy = tmp_path / ARCH
    shutil.copytree(shard, copy)
    index_time = (copy / INDEX).stat().st_mtime_ns
    for f in copy.rglob("*.json"):  # the shard as installed: every file older than its index
        os.utime(f, ns=(index_time - 60 * 10**9, index_time - 60 * 10**9))
    json_set = _runtime.load_shard(str(copy), use_index=False)
    unread = _runtime.load_shard(str(copy))
    assert unread.from_index, unread.index_reason
    assert _without_views(unread.packs) == _without_views(json_set.packs)
    kdp = next(p for p in sorted(copy.rglob("*.kdp.json")) if b'"priority":' in p.read_bytes())
    text = kdp.read_bytes()
    at = text.index(b'"priority":') + len(b'"priority":')
    digit = text[at:at + 1]
    assert digit.isdigit()
    kdp.write_bytes(text[:at] + (b"7" if digit != b"7" else b"3") + text[at + 1:])  # same size
    os.utime(kdp, ns=(index_time - 60 * 10**9, index_time - 60 * 10**9))
    dset = _runtime.load_shard(str(copy))
    assert dset.from_index, dset.index_reason  # not read at load
    rel = kdp.relative_to(copy).as_posix()
    kernel_id = next(p for p in dset.packs if p["file"] == rel)["kernels"][0]["id"]
    with pytest.raises(Exception, match=re.escape("is not the one the shard's index.ukdx records")):
        _runtime.load_launch_code(dset, kernel_id, arch=ARCH)
    r = _validate(copy)
    assert r.returncode == 1
    assert f"{rel} is not the file it was written for" in r.stderr
    # Its time moved to after the index's: read at load, and the JSON is what loads.
    os.utime(kdp, ns=(index_time + 10**9, index_time + 10**9))
    again = _runtime.load_shard(str(copy))
    assert not again.from_index
    assert f"{rel} is not the file it was written for" in again.index_reason


def test_an_installed_shard_is_listed_from_its_index_until_a_folder_changes(
        shard: Path, tmp_path: Path) -> None:
    """A shard installed with its times (every file and folder older than its index) is
    loaded without a walk: its files are the ones the index lists. A descriptor added
    to one of its folders changes that folder: the walk runs again and finds it."""
    copy = tmp_path / ARCH
    shutil.copytree(shard, copy)
    back = (copy / INDEX).stat().st_mtime_ns - 60 * 10**9
    for f in sorted(copy.rglob("*"), key=lambda p: -len(p.parts)):
        if f.name != INDEX:
            os.utime(f, ns=(back, back))
    json_set = _runtime.load_shard(str(copy), use_index=False)
    listed = _runtime.load_shard(str(copy))
    assert listed.from_index and listed.listed_by_index, listed.index_reason
    assert listed.files == json_set.files
    assert _without_views(listed.packs) == _without_views(json_set.packs)
    assert not _runtime.load_shard(str(copy), use_index=False).listed_by_index
    kdp = sorted(copy.rglob("*.kdp.json"))[0]
    shutil.copyfile(kdp, kdp.with_name("copy-" + kdp.name))
    again = _runtime.load_shard(str(copy))
    assert not again.listed_by_index and not again.from_index
    assert "is stale" in again.index_reason
    assert len(again.files) == len(json_set.files) + 1
