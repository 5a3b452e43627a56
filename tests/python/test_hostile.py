"""Hostile input and faults: nothing ukdpack did not write is deleted, a misbehaving
producer fails its arch (never the process, never silently), nothing hangs.

Each probe checks the whole outcome: exit status, the message (file or flag and
what to do), no traceback or "internal error", and what is left on disk."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path
from typing import Any

import pytest
from pack_support import copy_example, run_pack, shard_files, write_json

ARCH = "gfx90a"


def _clean(stderr: str) -> None:
    assert "Traceback" not in stderr
    assert "internal error" not in stderr


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> Path:
    """The example tree packed once for gfx90a: OUT/gfx90a is a real shard."""
    base = tmp_path_factory.mktemp("packed")
    src = copy_example(base / "src")
    r = run_pack(src, base / "out", [ARCH], cache=cache)
    assert r.returncode == 0, r.stderr
    return base / "out"


# ------------------------------------------------------------------ never delete

def _shard_copy(packed: Path, tmp_path: Path) -> Path:
    out = tmp_path / "w"
    shutil.copytree(packed, out, symlinks=True)
    return out


@pytest.mark.parametrize("inside", ["", "attention", "kpack"])
def test_source_root_inside_a_shard_is_refused_untouched(
        packed: Path, tmp_path: Path, cache: Path, inside: str) -> None:
    out = _shard_copy(packed, tmp_path)
    src = out / ARCH / inside if inside else out / ARCH
    before = _snapshot(out)
    r = run_pack(src, out, [ARCH], cache=cache)
    assert r.returncode == 2, r.stderr
    assert f"lies inside {out / ARCH}, a shard folder the packer replaces or removes" in r.stderr
    _clean(r.stderr)
    assert _snapshot(out) == before


def test_source_root_inside_another_arch_shard_is_refused(
        packed: Path, tmp_path: Path, cache: Path) -> None:
    """Packing gfx1030 from the gfx90a shard would not touch it, but reading a shard as
    an authored tree is always a mistake: refused before anything is read."""
    out = _shard_copy(packed, tmp_path)
    before = _snapshot(out)
    r = run_pack(out / ARCH, out, ["gfx1030"], cache=cache)
    assert r.returncode == 2
    assert "a shard folder the packer replaces or removes" in r.stderr
    assert _snapshot(out) == before


@pytest.mark.parametrize("name", [f".{ARCH}.staging", f".{ARCH}.lock", f".{ARCH}.old"])
def test_source_root_in_a_staging_or_lock_name_is_refused(
        packed: Path, tmp_path: Path, cache: Path, name: str) -> None:
    out = _shard_copy(packed, tmp_path)
    (out / name).unlink(missing_ok=True)  # the lock file of the pack that made the copy
    src = copy_example(out / name)
    before = _snapshot(src)
    r = run_pack(src, out, [ARCH], cache=cache)
    assert r.returncode == 2
    assert "a shard folder the packer replaces or removes" in r.stderr
    assert _snapshot(src) == before


def test_source_root_reached_through_a_link_into_a_shard_is_refused(
        packed: Path, tmp_path: Path, cache: Path) -> None:
    out = _shard_copy(packed, tmp_path)
    link = tmp_path / "looks-authored"
    link.symlink_to(out / ARCH, target_is_directory=True)
    before = _snapshot(out)
    r = run_pack(link, out, [ARCH], cache=cache)
    assert r.returncode == 2
    assert _snapshot(out) == before


def test_broken_tree_inside_a_shard_deletes_nothing(
        packed: Path, tmp_path: Path, cache: Path) -> None:
    """The reported case: a refused tree removes stale shards, and the source tree was
    one of them."""
    out = _shard_copy(packed, tmp_path)
    (out / ARCH / "broken.udd.json").write_text("{not json")
    before = _snapshot(out)
    r = run_pack(out / ARCH, out, [ARCH], cache=cache)
    assert r.returncode == 2
    assert _snapshot(out) == before


@pytest.mark.parametrize("what", ["missing", "file"])
def test_missing_source_root_is_a_usage_error_that_keeps_shards(
        packed: Path, tmp_path: Path, cache: Path, what: str) -> None:
    out = _shard_copy(packed, tmp_path)
    src = tmp_path / "descriptros"  # a typo
    if what == "file":
        src.write_text("")
    before = _snapshot(out)
    r = run_pack(src, out, [ARCH], cache=cache)
    assert r.returncode == 2
    found = "a file" if what == "file" else "nothing at that path"
    assert f"--source-root {src}: expected a descriptor root folder, found {found}" in r.stderr
    _clean(r.stderr)
    assert _snapshot(out) == before


def test_an_authored_root_beside_the_shards_still_packs(tmp_path: Path, cache: Path) -> None:
    """Only shard names are refused: a source root in the out root's other folders (a
    build tree holding generated descriptors) packs as before."""
    out = tmp_path / "build"
    src = copy_example(out / "generated")
    r = run_pack(src, out, [ARCH], cache=cache)
    assert r.returncode == 0, r.stderr
    assert (out / ARCH / "kpack").is_dir()


# ------------------------------------------------------------------ producers

def _builder_tree(root: Path, module: str, function: str) -> Path:
    write_json(root / "e.kmd.json", {"id": "kmd", "version": "1.0", "name": "md",
                                     "fields": [{"name": "v", "type": "int"}]})
    write_json(root / "e.ued.json", {"id": "ued", "version": "1.0", "name": "t:e",
                                     "metadata": "kmd"})
    write_json(root / "d.udd.json", {"id": "udd", "version": "1.0", "name": "d",
                                     "dispatch_symbol": "sym"})
    kernel: dict[str, Any] = {"id": "gen", "version": "1.0", "name": "gen", "priority": 0,
                              "metadata": {"v": 1},
                              "kernel_source": {"kind": "builder", "module": module,
                                                "function": function,
                                                "spec": {"kernels": {"k": 1}}}}
    write_json(root / "b.kdp.json", {"id": "kdp", "version": "1.0", "name": "b", "arch": [],
                                     "matchers": [], "engine": "ued", "dispatch": "udd",
                                     "kernelDescriptors": [kernel]})
    return root


@pytest.mark.parametrize("function,fragment", [
    ("exits", "builder hostile:exits failed for gfx90a: it called sys.exit(0)"),
    ("interrupts", "builder hostile:interrupts failed for gfx90a: KeyboardInterrupt"),
    ("base_exception", "builder hostile:base_exception failed for gfx90a: _Odd: not an "
                       "Exception"),
])
def test_a_builder_that_ends_the_process_fails_its_arch(
        tmp_path: Path, cache: Path, function: str, fragment: str) -> None:
    """Before: sys.exit(0) in a builder ended the pack with exit 0, no message, and the
    previous shard left in place looking current."""
    root = _builder_tree(tmp_path / "t", "hipgen", "build")
    out = tmp_path / "out"
    assert run_pack(root, out, [ARCH], cache=cache).returncode == 0
    assert (out / ARCH).is_dir()
    _builder_tree(root, "hostile", function)
    r = run_pack(root, out, [ARCH], cache=cache)
    assert r.returncode == 1, r.stderr
    assert fragment in r.stderr
    assert "b.kdp.json: $.kernelDescriptors[0].kernel_source" in r.stderr
    assert f"failed: {ARCH}" in r.stderr
    _clean(r.stderr)
    assert not (out / ARCH).exists(), "the stale shard must not look current"


def test_a_builder_module_that_exits_on_import_fails_its_arch(tmp_path: Path, cache: Path
                                                              ) -> None:
    root = _builder_tree(tmp_path / "t", "exits_on_import", "build")
    r = run_pack(root, tmp_path / "out", [ARCH], cache=cache)
    assert r.returncode == 1
    assert "cannot import builder exits_on_import:build: it called sys.exit(3)" in r.stderr
    _clean(r.stderr)


def test_a_hung_builder_times_out(tmp_path: Path, cache: Path) -> None:
    root = _builder_tree(tmp_path / "t", "hostile", "hangs")
    r = run_pack(root, tmp_path / "out", [ARCH], "--job-timeout", "2", cache=cache)
    assert r.returncode == 1
    assert ("builder hostile:hangs failed for gfx90a: it did not return within 2 s "
            "(raise --job-timeout") in r.stderr
    _clean(r.stderr)
    assert not (tmp_path / "out" / ARCH).exists()


def _fake_compiler(folder: Path, body: str) -> Path:
    path = folder / "hipcc"
    folder.mkdir(parents=True, exist_ok=True)
    real = shutil.which("hipcc")
    assert real
    # --version answers as the real one, so only the compile misbehaves.
    path.write_text(f'#!/bin/sh\ncase " $* " in *" --version "*) exec "{real}" "$@";; esac\n'
                    f"{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_a_hung_compiler_fails_its_arch_naming_source_and_arch(
        packed: Path, tmp_path: Path) -> None:
    hipcc = _fake_compiler(tmp_path / "bin", "sleep 3600")
    src = copy_example(tmp_path / "src")
    r = run_pack(src, tmp_path / "out", [ARCH], "--job-timeout", "2", "--hipcc", str(hipcc),
                 cache=tmp_path / "empty-cache")
    assert r.returncode == 1
    assert "hipcc did not finish within 2 s and was stopped" in r.stderr
    assert "for gfx90a" in r.stderr and ".hip" in r.stderr
    _clean(r.stderr)


def test_compiler_output_that_is_not_utf8_is_shown(tmp_path: Path) -> None:
    hipcc = _fake_compiler(tmp_path / "bin", r"printf 'caf\351: error: bad\n' >&2; exit 1")
    src = copy_example(tmp_path / "src")
    r = run_pack(src, tmp_path / "out", [ARCH], "--hipcc", str(hipcc),
                 cache=tmp_path / "empty-cache")
    assert r.returncode == 1
    assert "caf\N{REPLACEMENT CHARACTER}: error: bad" in r.stderr
    _clean(r.stderr)


def test_the_packed_shard_is_untouched_by_a_refused_run(packed: Path) -> None:
    """The module's packed shard stayed as packed (the probes above copied it)."""
    assert (packed / ARCH / "kpack").is_dir()
    assert shard_files(packed / ARCH)
