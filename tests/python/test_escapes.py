"""Paths that leave the source root are refused at pack, and a shard whose library
leaves the shard (or hops through a link) is refused by the loader.

The corpus already checks one message fragment for a hip ``..`` source, a hip symlink
and a UHD artifact ``..``; here every referencing field meets every kind of escape, and
the whole refusal is checked: exit 1, file, JSON path, finding, no shard left behind."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pack_support import copy_example, read_json, run_pack, write_json
from reliability_support import ARCH, assert_loads, residue

from ukdpack import _runtime

#: field -> (descriptor, JSON path, the authored file it names, root-relative)
FIELDS = {
    "hip": ("attention/scale.kdp.json", "$.kernelDescriptors[0].kernel_source.source",
            "attention/kernels/scale.hip"),
    "hsaco": ("prebuilt/reduce.kdp.json", "$.kernelDescriptors[0].kernel_source.file",
              "prebuilt/objects/gfx90a/reduce.hsaco"),
    "artifact": ("attention/heuristics/ranking.uhd.json", "$.tree_data.artifact",
                 "attention/heuristics/ranking.model"),
}


def _set(doc: Any, json_path: str, value: str) -> None:
    """Set the field a simple ``$.a[0].b`` path names."""
    parts = json_path[2:].replace("[", ".").replace("]", "").split(".")
    for p in parts[:-1]:
        doc = doc[int(p)] if p.isdigit() else doc[p]
    doc[parts[-1]] = value


def _escape(tree: Path, outside: Path, field: str, how: str) -> tuple[str, str, str]:
    """Point ``field`` out of the tree ``how``; (descriptor, JSON path, expected finding)."""
    descriptor, json_path, target = FIELDS[field]
    folder = (tree / descriptor).parent
    copy = outside / Path(target).name
    shutil.copy2(tree / target, copy)
    if field == "hip":  # the source includes its header from its own folder
        shutil.copy2(tree / "attention" / "kernels" / "common.h", outside / "common.h")
    if how == "dotdot":
        name = str(Path(*[".."] * len(folder.relative_to(tree.parent).parts)) / "outside"
                   / copy.name)
        finding = f"path '{name}' leaves the descriptor root"
    elif how == "file-link":  # a link inside the root to a file outside it
        name = "away." + copy.name
        (folder / name).symlink_to(copy)
        finding = f"path '{name}' leaves the descriptor root through a symbolic link"
    else:  # folder-link: a linked folder on the way
        (folder / "away").symlink_to(outside, target_is_directory=True)
        name = "away/" + copy.name
        finding = f"path '{name}' leaves the descriptor root through a symbolic link"
    doc = read_json(tree / descriptor)
    _set(doc, json_path, name)
    write_json(tree / descriptor, doc)
    return descriptor, json_path, finding


@pytest.mark.parametrize("how", ["dotdot", "file-link", "folder-link"])
@pytest.mark.parametrize("field", sorted(FIELDS))
def test_escape_from_source_root_is_refused_at_pack(tmp_path: Path, field: str,
                                                    how: str) -> None:
    tree = copy_example(tmp_path / "tree")
    outside = tmp_path / "outside"
    outside.mkdir()
    out, cache = tmp_path / "out", tmp_path / "cache"
    assert run_pack(tree, out, [ARCH], "--jobs", "1", cache=cache).returncode == 0
    descriptor, json_path, finding = _escape(tree, outside, field, how)
    r = run_pack(tree, out, [ARCH], "--jobs", "1", cache=cache)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert f"ukdpack: error: {descriptor}: {json_path}: {finding}" in r.stderr, r.stderr
    # No shard: not a new one with the outside file, not the stale one either.
    assert not (out / ARCH).exists()
    assert residue(out) == []


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("esc-load")
    tree = copy_example(base / "tree")
    r = run_pack(tree, base / "out", [ARCH], "--jobs", "1", cache=base / "cache")
    assert r.returncode == 0, r.stderr
    return base / "out" / ARCH


def _library_edit(shard: Path, change: Callable[[dict[str, Any]], None]) -> str:
    """Change the first scale kernel's packed source; its id."""
    path = shard / "attention" / "scale.kdp.json"
    doc = json.loads(path.read_text())
    kernel = doc["kernelDescriptors"][0]
    change(kernel["kernel_source"])
    path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    return str(kernel["id"])


def _relink_archive_outside(shard: Path, outside: Path) -> None:
    archive = shard / "kpack" / f"kernels_{ARCH}.kpack"
    outside.mkdir()
    shutil.move(archive, outside / archive.name)
    archive.symlink_to(outside / archive.name)


LOADER_CASES: dict[str, tuple[str, Callable[[Path, Path], str]]] = {
    "dotdot": ("LIBRARY_ESCAPES", lambda s, _: _library_edit(
        s, lambda src: src.update(library="../../x.kpack"))),
    "absolute": ("LIBRARY_ESCAPES", lambda s, o: _library_edit(
        s, lambda src: src.update(library=str(s / "kpack" / f"kernels_{ARCH}.kpack")))),
    "folder-link": ("LIBRARY_SYMLINK", lambda s, _: (
        (s / "linked").symlink_to(s / "kpack", target_is_directory=True),
        _library_edit(s, lambda src: src.update(library=f"../linked/kernels_{ARCH}.kpack")))[1]),
    "archive-link": ("LIBRARY_SYMLINK", lambda s, o: (
        _relink_archive_outside(s, o), _library_edit(s, lambda src: None))[1]),
}


@pytest.mark.parametrize("case", sorted(LOADER_CASES))
def test_loader_refuses_library_outside_shard(packed: Path, tmp_path: Path, case: str) -> None:
    code, damage = LOADER_CASES[case]
    shard = shutil.copytree(packed, tmp_path / "shard", symlinks=True)
    assert_loads(shard)  # the undamaged copy loads
    kernel_id = damage(shard, tmp_path / "outside")
    dset = _runtime.load_shard(str(shard))
    sm = _runtime.StateManager(dset, handlers=_runtime.stub_handlers(dset), arch=ARCH)
    with pytest.raises(_runtime.RuntimeCheckError) as err:
        sm.load_launch_code(kernel_id, None)
    assert err.value.code == code  # type: ignore[attr-defined]
    assert "attention/scale.kdp.json" in str(err.value)
    assert "$.kernelDescriptors[0].kernel_source.library" in str(err.value)
    verdict = _runtime.validate_roots([str(shard)])
    assert not verdict["ok"]
    assert code in {d["code"] for d in verdict["diagnostics"] if d["severity"] == "error"}
