"""Hostile input and faults: nothing ukdpack did not write is deleted, a misbehaving
producer fails its arch (never the process, never silently), nothing hangs; names that
become paths are checked, files that are not files are refused unread, a handler
manifest must cover the shard, Ctrl-C leaves nothing behind, and odd names keep each
problem on one line (docs/hostile-input.md).

Each probe checks the whole outcome: exit status, the message (file or flag and
what to do), no traceback or "internal error", and what is left on disk."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pack_support import (
    BUILDERS,
    EXAMPLE,
    compiles,
    copy_example,
    counting_compiler,
    run_pack,
    shard_files,
    write_engine,
    write_json,
)

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
    write_engine(root)
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


# ------------------------------------------------------------------ helpers

def _env() -> dict[str, str]:
    """The environment a build gives ukdpack (as pack_support.run_pack builds it)."""
    env = dict(os.environ, HIP_PLATFORM="amd")
    env["PYTHONPATH"] = os.pathsep.join([str(BUILDERS), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _ukdpack(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """``python -m ukdpack ARGS`` with a timeout, so a regression that hangs fails."""
    return subprocess.run([sys.executable, "-m", "ukdpack", *map(str, args)],
                          capture_output=True, text=True, env=_env(), timeout=60, check=False)


def _pack(src: Path, out: Path | str, *extra: str | Path, cache: Path,
          arches: Sequence[str] = (ARCH,)) -> subprocess.CompletedProcess[str]:
    args: list[str | Path] = ["pack", "--source-root", src, "--out-root", out, "--plain",
                              "--jobs", "2", "--cache-dir", cache]
    for a in arches:
        args += ["--arch", a]
    return _ukdpack(*args, *extra)


def _wrapper(folder: Path, on_version: str = "", on_compile: str = "") -> Path:
    """A hipcc that runs ``on_version`` before answering ``--version`` as the real one and
    ``on_compile`` before each compile (``--genco``), then the real hipcc."""
    real = shutil.which("hipcc")
    assert real
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "hipcc"
    path.write_text("#!/bin/sh\n"
                    f'case " $* " in *" --version "*) {on_version or ":"};; esac\n'
                    f'case " $* " in *" --genco "*) {on_compile or ":"};; esac\n'
                    f'exec "{real}" "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def _fifo(path: Path) -> Path:
    if path.exists():
        path.unlink()
    os.mkfifo(path)
    return path


def _socket(path: Path, monkeypatch: pytest.MonkeyPatch) -> socket.socket:
    """A UNIX socket bound at ``path`` (bound by a name relative to its folder: a socket's
    path may not exceed 108 bytes). Keep the returned object alive while it is needed."""
    if path.exists():
        path.unlink()
    monkeypatch.chdir(path.parent)
    s = socket.socket(socket.AF_UNIX)
    s.bind(path.name)
    return s


def _kpacks_outside(top: Path, out: Path) -> list[Path]:
    """Archives anywhere under ``top`` but in a shard of ``out``."""
    return [p for p in top.rglob("*.kpack") if out not in p.parents]


def _one_line_each(stderr: str) -> None:
    """Every line is a ukdpack line (a name with a newline split none)."""
    for line in stderr.splitlines():
        assert line.startswith(("ukdpack", "skipping ", "    ")), repr(line)


# ------------------------------------------------------------------ names that become paths

@pytest.fixture
def shards(packed: Path, tmp_path: Path) -> Path:
    """A copy of the packed out root, to be left untouched by a refused run."""
    return _shard_copy(packed, tmp_path)


@pytest.mark.parametrize("group", ["../../x", "ABSOLUTE", "a/b", ".hidden", "", "a..b",
                                   "x" * 200, "-rf", "a\nb"])
def test_a_group_that_is_no_plain_file_name_is_a_usage_error(
        shards: Path, tmp_path: Path, cache: Path, group: str) -> None:
    """Before: --group ../../x wrote OUT/x_gfx90a.kpack outside every shard and left it."""
    group = str(tmp_path / "abs" / "x") if group == "ABSOLUTE" else group
    src = copy_example(tmp_path / "src")
    before = _snapshot(shards)
    r = _pack(src, shards, f"--group={group}", cache=cache)
    assert r.returncode == 2, r.stderr
    assert ("ukdpack: error: --group: expected an archive group name of at most 128 letters, "
            "digits and '_.+-'") in r.stderr
    assert f"found {group!r}; nothing was packed" in r.stderr
    _clean(r.stderr)
    _one_line_each(r.stderr)
    assert _snapshot(shards) == before
    assert _kpacks_outside(tmp_path, shards) == []
    assert not (tmp_path / "abs").exists()


def test_a_group_of_cmake_target_characters_packs(tmp_path: Path, cache: Path) -> None:
    src = copy_example(tmp_path / "src")
    r = _pack(src, tmp_path / "out", "--group", "lib++.v2-x_y", cache=cache)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / ARCH / "kpack" / "lib++.v2-x_y_gfx90a.kpack").is_file()


@pytest.mark.parametrize("what", ["empty", "file", "dangling", "under-a-file"])
def test_an_unusable_out_root_is_refused_before_any_compile(
        tmp_path: Path, what: str) -> None:
    hipcc, log = counting_compiler(tmp_path)
    src = copy_example(tmp_path / "src")
    (tmp_path / "afile").write_text("keep me\n")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    out, fragment = {
        "empty": ("", "--out-root '': expected a path, found an empty string"),
        "file": (str(tmp_path / "afile"), "expected a folder for the shards (or nothing, and "
                                          "one is made), found a regular file"),
        "dangling": (str(tmp_path / "dangling"), "found a symbolic link to nothing (-> "
                                                 f"{tmp_path / 'nowhere'})"),
        "under-a-file": (str(tmp_path / "afile" / "out"), f"found nothing, and none can be "
                                                          f"made: {tmp_path / 'afile'} is a "
                                                          "regular file"),
    }[what]
    r = _pack(src, out, "--hipcc", hipcc, cache=tmp_path / "cache")
    assert r.returncode == 2, r.stderr
    assert fragment in r.stderr
    assert "nothing was packed" in r.stderr
    _clean(r.stderr)
    assert compiles(log) == []
    assert (tmp_path / "afile").read_text() == "keep me\n"
    assert (tmp_path / "dangling").is_symlink() and not (tmp_path / "nowhere").exists()
    assert not (tmp_path / ".gfx90a.lock").exists()


@pytest.mark.parametrize("flag", ["--source-root", "--handlers", "--cache-dir", "--depfile"])
def test_an_empty_path_option_is_a_usage_error(
        shards: Path, tmp_path: Path, cache: Path, flag: str) -> None:
    """Path('') is the current folder: an unset build variable must not pack (or cache,
    or write a depfile) there."""
    src = copy_example(tmp_path / "src")
    args = ["pack", "--out-root", shards, "--arch", ARCH, "--plain"]
    args += ["--source-root", "" if flag == "--source-root" else src]
    args += [] if flag == "--source-root" else [flag, ""]
    if flag != "--cache-dir":
        args += ["--cache-dir", cache]
    before = _snapshot(shards)
    r = _ukdpack(*args)
    assert r.returncode == 2, r.stderr
    assert f"ukdpack: error: {flag} '': expected a path, found an empty string" in r.stderr
    _clean(r.stderr)
    assert _snapshot(shards) == before


@pytest.mark.parametrize("flag,value,fragment", [
    ("--label", "lib\nx", "--label 'lib\\nx': expected a label that fits on one line"),
    ("--depfile-target", "stamp\nall: evil", "--depfile-target 'stamp\\nall: evil': expected "
                                             "the build's target"),
    ("--depfile-target", "", "--depfile-target '': expected the build's target"),
])
def test_a_name_that_would_break_its_line_is_a_usage_error(
        shards: Path, tmp_path: Path, cache: Path, flag: str, value: str, fragment: str
        ) -> None:
    src = copy_example(tmp_path / "src")
    before = _snapshot(shards)
    r = _pack(src, shards, "--depfile", tmp_path / "x.d", flag, value, cache=cache)
    assert r.returncode == 2, r.stderr
    assert fragment in r.stderr
    _clean(r.stderr)
    _one_line_each(r.stderr)
    assert _snapshot(shards) == before
    assert not (tmp_path / "x.d").exists()


# ------------------------------------------------------------------ files that are not files

@pytest.mark.parametrize("what", ["fifo", "folder"])
def test_a_depfile_path_holding_no_regular_file_is_refused_and_kept(
        shards: Path, tmp_path: Path, cache: Path, what: str) -> None:
    dep = tmp_path / "pack.d"
    if what == "fifo":
        _fifo(dep)
    else:
        dep.mkdir()
    src = copy_example(tmp_path / "src")
    before = _snapshot(shards)
    r = _pack(src, shards, "--depfile", dep, cache=cache)
    assert r.returncode == 2, r.stderr
    found = "a FIFO" if what == "fifo" else "a folder"
    assert (f"--depfile {dep}: expected a regular file to replace (or nothing), found "
            f"{found}") in r.stderr
    _clean(r.stderr)
    assert stat.S_ISFIFO(dep.lstat().st_mode) if what == "fifo" else dep.is_dir()
    assert _snapshot(shards) == before


def test_a_handler_manifest_that_is_a_fifo_is_refused_unread(
        shards: Path, tmp_path: Path, cache: Path) -> None:
    manifest = _fifo(tmp_path / "handlers.json")
    before = _snapshot(shards)
    r = _pack(copy_example(tmp_path / "src"), shards, "--handlers", manifest, cache=cache)
    assert r.returncode == 1, r.stderr
    assert f"ukdpack: error: {manifest}: expected a regular file, found a FIFO" in r.stderr
    _clean(r.stderr)
    assert _snapshot(shards) == before


@pytest.mark.parametrize("what,found", [("fifo", "a FIFO"), ("socket", "a socket"),
                                        ("folder", "a folder")])
def test_a_prebuilt_object_that_is_not_a_file_fails_its_arch_unread(
        shards: Path, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch,
        what: str, found: str) -> None:
    src = copy_example(tmp_path / "src")
    obj = src / "prebuilt" / "objects" / ARCH / "reduce.hsaco"
    kept = None
    if what == "fifo":
        _fifo(obj)
    elif what == "socket":
        kept = _socket(obj, monkeypatch)
    else:
        obj.unlink()
        obj.mkdir()
    r = _pack(src, shards, cache=cache)
    assert r.returncode == 1, r.stderr
    assert (f"cannot read prebuilt object prebuilt/objects/{ARCH}/reduce.hsaco: expected a "
            f"regular file, found {found}") in r.stderr
    assert f"failed: {ARCH}" in r.stderr
    _clean(r.stderr)
    assert not (shards / ARCH).exists(), "a failed arch leaves no stale shard"
    assert not (shards / f".{ARCH}.staging").exists()
    assert not stat.S_ISREG(obj.lstat().st_mode), "the packer replaced it"
    if kept is not None:
        kept.close()


def test_a_hip_source_that_is_a_fifo_fails_without_waiting(tmp_path: Path, cache: Path
                                                            ) -> None:
    """Refused by the tree's loader, before anything reads it."""
    src = copy_example(tmp_path / "src")
    _fifo(src / "attention" / "kernels" / "scale.hip")
    r = _pack(src, tmp_path / "out", cache=cache)
    assert r.returncode == 1, r.stderr
    assert "kernels/scale.hip" in r.stderr
    _clean(r.stderr)
    assert not (tmp_path / "out" / ARCH).exists()


def test_a_hip_source_that_becomes_a_fifo_is_not_handed_to_hipcc(tmp_path: Path) -> None:
    """The loader saw a file; by the time the producer reads it (after the compiler's
    --version probe) it is a FIFO: refused unread, and hipcc never sees it."""
    src = copy_example(tmp_path / "src")
    source = src / "attention" / "kernels" / "scale.hip"
    log = tmp_path / "compiled"
    hipcc = _wrapper(tmp_path / "bin",
                     on_version=f'[ -p "{source}" ] || {{ rm -f "{source}"; mkfifo "{source}"; }}',
                     on_compile=f'echo "$*" >> "{log}"')
    r = _pack(src, tmp_path / "out", "--hipcc", hipcc, cache=tmp_path / "cache")
    assert r.returncode == 1, r.stderr
    assert ("cannot read source attention/kernels/scale.hip: expected a regular file, found "
            "a FIFO") in r.stderr
    _clean(r.stderr)
    assert "scale.hip" not in (log.read_text() if log.exists() else "")
    assert not (tmp_path / "out" / ARCH).exists()


def test_an_artifact_that_becomes_a_fifo_fails_its_arch(tmp_path: Path) -> None:
    """A UHD artifact is copied into the shard after the compiles: one that became a FIFO
    meanwhile fails the arch at its UHD, and no staging folder is left."""
    src = copy_example(tmp_path / "src")
    model = src / "attention" / "heuristics" / "ranking.model"
    hipcc = _wrapper(tmp_path / "bin",
                     on_compile=f'[ -p "{model}" ] || {{ rm -f "{model}"; mkfifo "{model}"; }}')
    out = tmp_path / "out"
    r = _pack(src, out, "--hipcc", hipcc, cache=tmp_path / "cache")
    assert r.returncode == 1, r.stderr
    assert ("attention/heuristics/ranking.uhd.json: $.tree_data.artifact: UHD 'attention_ranking': "
            "cannot read artifact attention/heuristics/ranking.model: expected a regular file, "
            "found a FIFO") in r.stderr
    _clean(r.stderr)
    assert not (out / ARCH).exists()
    assert not (out / f".{ARCH}.staging").exists()


@pytest.mark.parametrize("what,found", [("fifo", "a FIFO"), ("socket", "a socket")])
def test_verify_refuses_a_sidecar_that_is_not_a_file(
        shards: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str, found: str
        ) -> None:
    sidecar = shards / ARCH / "prebuilt" / "reduce.kdp.provenance.json.gz"
    kept = _fifo(sidecar) if what == "fifo" else _socket(sidecar, monkeypatch)
    r = _ukdpack("verify", shards / ARCH, "--source-root", EXAMPLE)
    assert r.returncode == 1, r.stderr
    assert ("ukdpack: error: prebuilt/reduce.kdp.provenance.json.gz: cannot read the "
            f"provenance sidecar: expected a regular file, found {found}") in r.stderr
    _clean(r.stderr)
    if isinstance(kept, socket.socket):
        kept.close()


def test_shard_tools_refuse_a_descriptor_that_is_a_fifo(shards: Path) -> None:
    _fifo(shards / ARCH / "prebuilt" / "reduce.udd.json")
    for tool in ("inspect", "desk-check"):
        r = _ukdpack(tool, shards / ARCH)
        assert r.returncode == 1, (tool, r.stderr)
        assert "prebuilt/reduce.udd.json" in r.stderr and "a FIFO" in r.stderr
        _clean(r.stderr)


def test_read_regular_never_opens_a_fifo_for_long(tmp_path: Path) -> None:
    """The helper itself, in a child with a timeout: a FIFO without a writer, a character
    device, a folder, a missing file."""
    fifo = _fifo(tmp_path / "f")
    code = ("import sys\nfrom ukdpack.files import read_regular, NotRegularFileError\n"
            "for p in sys.argv[1:]:\n"
            "    try:\n        read_regular(p)\n"
            "    except NotRegularFileError as e:\n        print(e.strerror)\n"
            "    except FileNotFoundError:\n        print('missing')\n")
    r = subprocess.run([sys.executable, "-c", code, str(fifo), "/dev/null", str(tmp_path),
                        str(tmp_path / "none")], capture_output=True, text=True, timeout=20,
                       check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "expected a regular file, found a FIFO",
        "expected a regular file, found a character device",
        "expected a regular file, found a folder", "missing"]


# ------------------------------------------------------------------ handler manifests

EXAMPLE_HANDLERS = {"example_split_kv_dispatch": ["produce", "consume"],
                    "example_scale_dispatch": [], "example_reduce_dispatch": [],
                    "example_twostage_dispatch": ["partial", "combine"],
                    # the slotted engine's (attention_bwd/)
                    "example_bwd_prep_dispatch": [], "example_bwd_dkdv_dispatch": [],
                    "example_bwd_dq_dispatch": ["partial", "reduce"]}


def test_a_manifest_lacking_a_symbol_fails_the_arch_naming_symbol_and_manifest(
        shards: Path, tmp_path: Path, cache: Path) -> None:
    """Before: the stub rule silently filled the symbol in; the consuming library, which
    has no handler for it, would have had the runtime drop the pack at run time."""
    manifest = tmp_path / "handlers.json"
    write_json(manifest, {k: v for k, v in EXAMPLE_HANDLERS.items()
                          if k != "example_twostage_dispatch"})
    r = _pack(copy_example(tmp_path / "src"), shards, "--handlers", manifest, cache=cache)
    assert r.returncode == 1, r.stderr
    assert ("ukdpack: error: prebuilt/twostage.udd.json: $.dispatch_symbol: dispatch symbol "
            f"'example_twostage_dispatch' is not in the handler manifest {manifest}, so the "
            "runtime would drop pack 'twostage' (1 kernel) at run time: add "
            '"example_twostage_dispatch": ["partial", "combine"] to handlers.json if the '
            "library handles it, else leave the pack out of the tree") in r.stderr
    assert r.stderr.count("is not in the handler manifest") == 1
    assert "the runtime drops kernel 'twostage" not in r.stderr, "said once, per symbol"
    assert f"failed: {ARCH}" in r.stderr
    _clean(r.stderr)
    assert not (shards / ARCH).exists()
    assert not (shards / f".{ARCH}.staging").exists()


def test_an_empty_manifest_names_every_symbol_the_shard_uses(tmp_path: Path, cache: Path
                                                             ) -> None:
    manifest = tmp_path / "handlers.json"
    write_json(manifest, {})
    r = _pack(copy_example(tmp_path / "src"), tmp_path / "out", "--handlers", manifest,
              cache=cache)
    assert r.returncode == 1, r.stderr
    for symbol in EXAMPLE_HANDLERS:
        assert f"dispatch symbol '{symbol}' is not in the handler manifest" in r.stderr
    assert r.stderr.count("is not in the handler manifest") == len(EXAMPLE_HANDLERS)
    _clean(r.stderr)


def test_a_manifest_may_declare_handlers_the_shard_does_not_use(tmp_path: Path, cache: Path
                                                                ) -> None:
    manifest = tmp_path / "handlers.json"
    write_json(manifest, {**EXAMPLE_HANDLERS, "another_librarys_dispatch": ["a", "b"]})
    r = _pack(copy_example(tmp_path / "src"), tmp_path / "out", "--handlers", manifest,
              cache=cache)
    assert r.returncode == 0, r.stderr
    assert "another_librarys_dispatch" not in r.stderr
    assert (tmp_path / "out" / ARCH / "kpack").is_dir()


# ------------------------------------------------------------------ interrupts and odd names

def _interrupted_pack(tmp_path: Path, out: Path, signals: int, gap: float, *,
                      jobs: str = "2", on: str = "compile",
                      sig: signal.Signals = signal.SIGINT) -> tuple[
                          subprocess.CompletedProcess[str], float, list[int]]:
    """A pack of the example tree whose compiles (or compiler probe) sleep for an hour,
    sent ``signals`` ``sig`` (SIGINT) ``gap`` s apart once one is sleeping: (its outcome, seconds
    from the first SIGINT to its exit, the pids of the sleeps that outlived it)."""
    pids = tmp_path / "sleeping"
    sleep = f'echo $$ >> "{pids}"; exec sleep 3600'
    hipcc = _wrapper(tmp_path / "bin", **{f"on_{on}": sleep})
    src = copy_example(tmp_path / "src")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ukdpack", "pack", "--source-root", str(src), "--out-root",
         str(out), "--arch", ARCH, "--plain", "--jobs", jobs, "--hipcc", str(hipcc),
         "--cache-dir", str(tmp_path / "cache")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        deadline = time.monotonic() + 60
        while not (pids.exists() and pids.read_text().strip()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no compile started"
            time.sleep(0.05)
        time.sleep(0.3)  # let the other jobs start too
        start = time.monotonic()
        for _ in range(signals):
            proc.send_signal(sig)
            time.sleep(gap)
        stdout, stderr = proc.communicate(timeout=60)
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:  # a regression: end the pack
            proc.kill()
            proc.communicate()
        # The sleeps that outlived the pack (a regression), ended here so none is left.
        started = pids.read_text().split() if pids.exists() else []
        outlived = [int(p) for p in started if not _gone(int(p))]
        for pid in outlived:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    outcome = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    return outcome, took, outlived


def _gone(pid: int, wait: float = 5) -> bool:
    """Whether ``pid`` has ended within ``wait`` s (a zombie waiting for init counts)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("signals,gap,jobs,on", [
    (2, 0.2, "2", "compile"),   # Ctrl-C twice while compiles run in threads
    (3, 0.02, "2", "compile"),  # three in a burst
    (2, 0.2, "1", "compile"),   # the compile in the main thread
    (2, 0.2, "2", "version"),   # during the compiler's --version probe
])
def test_a_second_ctrl_c_exits_130_quietly_leaving_nothing_behind(
        shards: Path, tmp_path: Path, signals: int, gap: float, jobs: str, on: str) -> None:
    """Before: the first Ctrl-C waited for every running compile (up to --job-timeout);
    a second one then printed 'Exception ignored in: <module threading>' with a
    traceback, and the compilers, in sessions of their own, ran on as orphans."""
    before = _snapshot(shards)
    r, took, outlived = _interrupted_pack(tmp_path, shards, signals, gap, jobs=jobs, on=on)
    assert r.returncode == 130, r.stderr
    assert r.stderr.count("ukdpack: interrupted") == 1
    assert "Exception ignored" not in r.stderr
    assert "KeyboardInterrupt" not in r.stderr
    _clean(r.stderr)
    assert took < 20, f"took {took:.1f} s to stop"
    assert outlived == [], "a compile outlived the pack"
    assert not (shards / f".{ARCH}.staging").exists()
    assert _snapshot(shards) == before, "an interrupted pack leaves the previous shard"


@pytest.mark.parametrize("sig,word", [(signal.SIGTERM, "stopped by SIGTERM"),
                                      (signal.SIGHUP, "stopped by SIGHUP")])
def test_sigterm_and_sighup_end_the_pack_as_ctrl_c_does(
        shards: Path, tmp_path: Path, sig: signal.Signals, word: str) -> None:
    """Before: SIGTERM (a CI cancel) or SIGHUP (a closed terminal) killed the packer at
    once, and its compiles, each in a session of its own, ran on as orphans; a second
    signal mid-cleanup is ignored, as a second Ctrl-C is."""
    before = _snapshot(shards)
    r, took, outlived = _interrupted_pack(tmp_path, shards, 2, 0.2, sig=sig)
    assert r.returncode == 128 + sig, (r.returncode, r.stderr)
    assert r.stderr.count(f"ukdpack: {word}") == 1, r.stderr
    assert "Traceback" not in r.stderr and "KeyboardInterrupt" not in r.stderr
    assert took < 20, f"took {took:.1f} s to stop"
    assert outlived == [], "a compile outlived the pack"
    assert not (shards / f".{ARCH}.staging").exists()
    assert _snapshot(shards) == before, "a stopped pack leaves the previous shard"


def test_an_interrupt_under_the_lock_leaves_the_previous_shard_and_no_staging(
        shards: Path) -> None:
    """Ctrl-C while the new shard is being staged (in the process: the timing is the
    point): the lock's exit clears the staging folder before it releases the lock."""
    from ukdpack.shard import publish

    before = _snapshot(shards)
    with pytest.raises(KeyboardInterrupt), publish.shard_lock(shards, ARCH, 5, print):
        staging = publish.fresh_staging(shards, ARCH)
        (staging / "half.kdp.json").write_text("{")
        raise KeyboardInterrupt
    assert not (shards / f".{ARCH}.staging").exists()
    assert _snapshot(shards) == before


def test_an_interrupted_removal_leaves_no_half_shard(shards: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A stale shard leaves its name in one rename before its files go: Ctrl-C in the
    middle of removing them leaves no half shard under the shard's name, and the lock's
    exit removes the rest."""
    from ukdpack.shard import publish

    real = shutil.rmtree
    calls: list[Path] = []

    def interrupted(path: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(Path(path))
        if len(calls) == 1:  # Ctrl-C lands half-way through the removal
            real(Path(path) / "attention")
            raise KeyboardInterrupt
        real(path, *args, **kwargs)

    monkeypatch.setattr(publish.shutil, "rmtree", interrupted)
    with pytest.raises(KeyboardInterrupt), publish.shard_lock(shards, ARCH, 5, print):
        publish.remove_shard(shards, ARCH)
    assert not (shards / ARCH).exists()
    assert not (shards / f".{ARCH}.staging").exists()
    assert calls[0] == shards / f".{ARCH}.staging"


def test_removing_a_shard_follows_no_link_out_of_it(tmp_path: Path) -> None:
    """A shard's files go in one concurrent batch before its folders: a link in it (to a
    file or a folder outside) is removed, never what it points at."""
    from ukdpack.shard import publish

    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "keep.bin").write_bytes(b"keep")
    shard = tmp_path / "out" / ARCH
    for i in range(40):
        publish.write_file(shard, f"e{i % 3}/k{i}.kdp.json", b"{}\n")
    (shard / "to-folder").symlink_to(outside, target_is_directory=True)
    (shard / "e0" / "to-file").symlink_to(outside / "deep" / "keep.bin")
    publish._rmtree(shard)
    assert not os.path.lexists(shard)
    assert (outside / "deep" / "keep.bin").read_bytes() == b"keep"


def test_problem_lines_quote_names_with_control_characters() -> None:
    from ukdpack.errors import Problem

    p = Problem("a\nb.kdp.json", '$["x\ry"]', "source 'k\x1b[2J.hip' not found\u2028 here",
                detail="error: one\n\tline\x1b[0m two")
    assert p.line().splitlines() == [
        "ukdpack: error: 'a\\nb.kdp.json': '$[\"x\\ry\"]': source 'k\\x1b[2J.hip' not found"
        "\\u2028 here",
        "    error: one",
        "    \tline\\x1b[0m two"]
    assert Problem("a b.json", "$.x", "plain").line() == "ukdpack: error: a b.json: $.x: plain"
    assert p.as_dict()["message"] == ("source 'k\x1b[2J.hip' not found\u2028 here\n"
                                      "    error: one\n    \tline\x1b[0m two")


@pytest.mark.parametrize("name", ["bad\nname", "bad\x1b[2Jname", "bad\rname"])
def test_a_descriptor_named_with_control_characters_stays_on_one_line(
        tmp_path: Path, name: str) -> None:
    root = copy_example(tmp_path / "src")
    (root / f"{name}.udd.json").write_text("{not json")
    r = _ukdpack("validate", root)
    assert r.returncode == 1, r.stderr
    assert f"ukdpack: error: {f'{name}.udd.json'!r}: " in r.stderr
    assert "\x1b" not in r.stderr and "\r" not in r.stderr
    _one_line_each(r.stderr)
    _clean(r.stderr)


def test_a_source_named_with_a_newline_stays_on_one_line_at_pack(
        tmp_path: Path, cache: Path) -> None:
    root = copy_example(tmp_path / "src")
    kdp = root / "attention" / "scale.kdp.json"
    kdp.write_text(kdp.read_text().replace('"kernels/scale.hip"', '"kernels/sc\\nale.hip"'))
    r = _pack(root, tmp_path / "out", cache=cache)
    assert r.returncode == 1, r.stderr
    assert "kernels/sc\\nale.hip" in r.stderr
    _one_line_each(r.stderr)
    _clean(r.stderr)


def test_an_out_root_named_with_a_newline_packs_on_one_line_each(
        tmp_path: Path, cache: Path) -> None:
    out = tmp_path / "out\nroot"
    r = _pack(copy_example(tmp_path / "src"), out, cache=cache)
    assert r.returncode == 0, r.stderr
    assert "out\\nroot" in r.stderr
    _one_line_each(r.stderr)
    assert (out / ARCH / "kpack").is_dir()
