"""``ukdpack init``: the starter tree validates, packs with the real hipcc, and its shard
passes ``ukdpack-validate`` and the runtime with its own handler manifest; a folder that
holds anything, or a bad name, is refused with nothing written."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pack_support import REPO, compiles, counting_compiler, read_json, run_pack

from ukdpack import _runtime
from ukdpack.init import scaffold
from ukdpack.shard.runtime_check import load_handler_manifest

ARCH = "gfx90a"


def _ukdpack(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ukdpack", *map(str, args)],
                          capture_output=True, text=True, check=False, cwd=cwd,
                          env=dict(os.environ, HIP_PLATFORM="amd"))


def _ids(root: Path) -> set[str]:
    found = set()
    for p in root.rglob("*.json"):
        found |= set(re.findall(r'"id": "([^"]+)"', p.read_text()))
    return found


def test_init_writes_a_tree_that_validates_packs_and_loads_with_its_manifest(
        tmp_path: Path) -> None:
    root = tmp_path / "kernels"
    r = _ukdpack("init", root, "--name", "acme-gpu:demo")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    handlers = root / "handlers.json"
    # The next commands, with the paths given, run as they were: `python -m ukdpack`.
    me = f"{sys.executable} -m ukdpack"
    assert f"  {me} validate {root}\n" in r.stdout
    assert (f"  {me} pack --source-root {root} --out-root out --arch gfx90a "
            f"--handlers {handlers}\n") in r.stdout
    # ukdpack-validate: bare where PATH finds this one, else by its path.
    (line,) = [ln.split() for ln in r.stdout.splitlines() if ln.endswith(" out/gfx90a")
               and "inspect" not in ln]
    found = shutil.which(line[0])
    assert found and Path(found).resolve() == (Path(sys.executable).parent
                                               / "ukdpack-validate").resolve()
    assert "\n  ukdpack " not in r.stdout


    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == sorted(scaffold.render("a:b")), "exactly the template's files"
    for rel in files:
        text = (root / rel).read_text()
        assert text.startswith("// "), f"{rel}: a comment says what to change"
        assert "${" not in text, f"{rel}: a placeholder left unfilled"
    assert len(_ids(root)) == len(scaffold.ID_KEYS)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no staging left"

    ued = read_json(root / "engine.ued.json")
    assert ued["name"] == "acme-gpu:demo"
    manifest = load_handler_manifest(handlers)
    assert dict(manifest.handlers) == {"acme_gpu_demo_scale_dispatch": [],
                                       "acme_gpu_demo_twostage_dispatch": ["partial", "combine"]}
    assert read_json(root / "twostage.udd.json")["dispatch_symbol"] == \
        "acme_gpu_demo_twostage_dispatch"

    v = _ukdpack("validate", root)
    assert v.returncode == 0, v.stdout + v.stderr
    assert "error" not in v.stderr and "warning" not in v.stderr, v.stderr

    # The real hipcc, through a wrapper counting compiles: the two launches of twostage
    # come from one translation unit, so two compiles make the whole shard.
    hipcc, log = counting_compiler(tmp_path)
    out = tmp_path / "out"
    p = run_pack(root, out, [ARCH], "--handlers", str(handlers), "--hipcc", str(hipcc),
                 cache=tmp_path / "cache")
    assert p.returncode == 0, p.stderr
    assert len(compiles(log)) == 2, compiles(log)
    shard = out / ARCH
    packed = read_json(shard / "twostage.kdp.json")["kernelDescriptors"][0]["sources"]
    assert set(packed) == {"partial", "combine"}
    assert packed["partial"]["toc_key"] == packed["combine"]["toc_key"]
    assert packed["partial"]["sha256"] == packed["combine"]["sha256"]
    assert {packed["partial"]["symbol"], packed["combine"]["symbol"]} == \
        {"twostage_partial", "twostage_combine"}

    exe = Path(sys.executable).parent / "ukdpack-validate"
    c = subprocess.run([str(exe), str(shard), "--expect-engine", "acme-gpu:demo"],
                       capture_output=True, text=True, check=False)
    assert c.returncode == 0, c.stdout + c.stderr

    # The runtime with the tree's own manifest (what the library declares) keeps both.
    dset = _runtime.load_shard(str(shard))
    sm = _runtime.StateManager(dset, handlers=dict(manifest.handlers), arch=ARCH)
    assert not sm.dropped()
    assert sorted(k["name"] for k in sm.kept()) == ["scale.f32", "twostage.f32"]


def test_init_into_an_empty_folder_fills_it(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    r = _ukdpack("init", root)
    assert r.returncode == 0, r.stderr
    assert read_json(root / "engine.ued.json")["name"] == scaffold.DEFAULT_NAME
    assert (root / "kernels" / "twostage.hip").is_file()


def test_two_trees_share_no_id(tmp_path: Path) -> None:
    assert _ukdpack("init", tmp_path / "a").returncode == 0
    assert _ukdpack("init", tmp_path / "b").returncode == 0
    a, b = _ids(tmp_path / "a"), _ids(tmp_path / "b")
    assert len(a) == len(b) == len(scaffold.ID_KEYS)
    assert not a & b


@pytest.mark.parametrize("what", ["file", "folder", "dotfile"])
def test_init_refuses_a_folder_that_holds_anything(tmp_path: Path, what: str) -> None:
    root = tmp_path / "taken"
    root.mkdir()
    name = {"file": "notes.txt", "folder": "sub", "dotfile": ".git"}[what]
    if what == "folder":
        (root / name).mkdir()
    else:
        (root / name).write_text("mine\n")
    r = _ukdpack("init", root)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr == (f"ukdpack: error: {root}: expected a new or empty folder; it holds 1 "
                        f"entry (first: '{name}'); nothing was written\n")
    assert r.stdout == ""
    assert sorted(p.name for p in root.iterdir()) == [name]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"], "no staging left"


def test_init_refuses_a_file_and_a_bad_name(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("")
    r = _ukdpack("init", f)
    assert r.returncode == 2
    assert r.stderr == (f"ukdpack: error: {f}: expected a new or empty folder, found a "
                        "regular file; nothing was written\n")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir()
    r = _ukdpack("init", link)
    assert r.returncode == 2
    assert r.stderr == (f"ukdpack: error: {link}: expected a new or empty folder, found a "
                        f"symbolic link (-> {tmp_path / 'elsewhere'}); nothing was written\n")
    (tmp_path / "elsewhere").rmdir()
    link.unlink()
    r = _ukdpack("init", tmp_path / "new", "--name", "no_namespace")
    assert r.returncode == 2
    assert "--name 'no_namespace': expected a scoped engine name 'namespace:local'" in r.stderr
    assert not (tmp_path / "new").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_a_failed_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure at the last step (the rename) removes the staging folder and the parent
    folders this call made."""
    def refuse(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(scaffold.os, "rename", refuse)
    with pytest.raises(scaffold.UkdError) as e:
        scaffold.write(tmp_path / "a" / "b" / "tree")
    assert str(e.value) == (f"{tmp_path / 'a' / 'b' / 'tree'}: cannot write the tree: "
                            "No space left on device; nothing was written")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_move_into_an_empty_folder_leaves_it_empty(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """An existing empty folder is kept (a shell may stand in it): the entries move in one
    by one, and a failure halfway takes back the ones already moved."""
    root = tmp_path / "empty"
    root.mkdir()
    real_rename = os.rename
    calls: list[str] = []

    def third_fails(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        calls.append(str(dst))
        if len(calls) == 3:
            raise OSError(5, "Input/output error")
        real_rename(src, dst)

    monkeypatch.setattr(scaffold.os, "rename", third_fails)
    with pytest.raises(scaffold.UkdError, match="cannot write the tree: Input/output error"):
        scaffold.write(root)
    assert len(calls) == 3 and all(c.startswith(str(root) + os.sep) for c in calls)
    assert root.is_dir() and list(root.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


def test_init_dot_fills_the_empty_working_folder(tmp_path: Path) -> None:
    inode = tmp_path.stat().st_ino
    r = _ukdpack("init", ".", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert tmp_path.stat().st_ino == inode, "the folder itself is kept"
    assert "-m ukdpack validate .\n" in r.stdout
    assert _ukdpack("validate", ".", cwd=tmp_path).returncode == 0


def test_the_template_ships_with_the_package() -> None:
    """``init`` reads its files as package data: the package imported here (the installed
    one under scripts/test.sh) holds every file of the source template."""
    source = REPO / "python" / "ukdpack" / "init" / "template"
    expected = sorted(str(p.relative_to(source)) for p in source.rglob("*") if p.is_file()
                      and "__pycache__" not in p.parts)
    assert sorted(scaffold.render("a:b", slots=True)) == expected
    assert len(expected) == 11


def test_init_prints_commands_that_run_as_typed(tmp_path: Path) -> None:
    """Through the console script named by its path (as the README's .venv/bin/ukdpack
    is, with .venv/bin not on PATH), every printed command runs as printed."""
    script = Path(sys.executable).parent / "ukdpack"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if Path(p).resolve() != script.parent.resolve())
    root = tmp_path / "kernels"
    r = subprocess.run([str(script), "init", str(root)], capture_output=True, text=True,
                       env=env, cwd=tmp_path, check=False)
    assert r.returncode == 0, r.stderr
    lines = [ln.strip() for ln in r.stdout.splitlines() if ln.startswith("  ")]
    assert lines[0] == f"{script} validate {root}"
    v = subprocess.run(lines[0].split(), capture_output=True, text=True, env=env, cwd=tmp_path,
                       check=False)
    assert v.returncode == 0, v.stderr
    assert lines[2].split()[0] == str(script.parent / "ukdpack-validate")


def test_init_slots_writes_a_slotted_engine_that_validates_and_packs(tmp_path: Path) -> None:
    """Three slots in run order, each KDP naming its slot; slot finish has two candidates
    and slot reduce the two-launch kernel. It validates, packs and every slot ships."""
    root = tmp_path / "kernels"
    r = _ukdpack("init", root, "--slots")
    assert r.returncode == 0, r.stderr
    assert "three slots run in order: prep (scale), reduce (twostage" in r.stdout
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == sorted(scaffold.render("a:b", slots=True))
    assert "finish.kdp.json" in files and "finish.kdp.json" not in scaffold.render("a:b")
    assert all("${" not in (root / rel).read_text() for rel in files)
    assert len(_ids(root)) == len(scaffold.ID_KEYS) + len(scaffold.SLOT_ID_KEYS)
    ued = read_json(root / "engine.ued.json")
    assert ued["version"] == "1.1" and "knobs" not in ued
    assert ued["slots"] == [{"name": "prep"}, {"name": "reduce"},
                            {"name": "finish", "knobs": ["block"]}]
    slots = {stem: read_json(root / f"{stem}.kdp.json") for stem in ("scale", "twostage",
                                                                      "finish")}
    assert {k: (d["version"], d["slot"]) for k, d in slots.items()} == {
        "scale": ("1.1", "prep"), "twostage": ("1.1", "reduce"), "finish": ("1.1", "finish")}
    assert len(slots["finish"]["kernelDescriptors"]) == 2

    v = _ukdpack("validate", root)
    assert v.returncode == 0, v.stdout + v.stderr
    assert "error" not in v.stderr and "warning" not in v.stderr, v.stderr
    out = tmp_path / "out"
    p = run_pack(root, out, [ARCH], "--handlers", str(root / "handlers.json"),
                 cache=tmp_path / "cache")
    assert p.returncode == 0, p.stderr
    shard = out / ARCH
    assert read_json(shard / "engine.ued.json")["slots"] == ued["slots"]
    assert read_json(shard / "finish.kdp.json")["slot"] == "finish"
    i = _ukdpack("inspect", shard, "--json")
    (engine,) = json.loads(i.stdout)["engines"]
    assert [(s["name"], len(s["kernels"])) for s in engine["slots"]] == [
        ("prep", 1), ("reduce", 1), ("finish", 2)]


def test_init_without_slots_writes_the_unslotted_tree_as_before() -> None:
    """The slot placeholders leave the unslotted files as they were: UED and KDP 1.0,
    no slot key, no finish pack."""
    files = scaffold.render("a:b")
    assert "finish.kdp.json" not in files
    for rel in ("engine.ued.json", "scale.kdp.json", "twostage.kdp.json"):
        top = re.search(r'"version": "([0-9.]+)"', files[rel])  # the file's own, first
        assert top is not None and top.group(1) == "1.0", rel
        assert "slot" not in files[rel], rel
