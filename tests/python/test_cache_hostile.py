"""The compile cache is an optimisation (hostile input 5): a cache folder that cannot be
written costs one warning and the pack goes on; the cache key follows the compiler hipcc
really runs; ``ukdpack cache verify`` recompiles entries and catches a poisoned one that
every digest vouches for; ``ukdpack cache stats`` counts what is there."""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from machine import need_mount_namespaces
from pack_support import SLOTTED, compiles, copy_example, counting_compiler, shard_files
from reliability_support import ARCH, pack_env

from ukdpack.digest import canonical_json, sha256_hex
from ukdpack.produce import cache as cache_mod
from ukdpack.produce.cache import CompileCache

WARNING = "ukdpack: warning: compile cache {dir}: {why}; packing without it"


def _env(**extra: str) -> dict[str, str]:
    """The pack environment, with no cache folder chosen by it (so --cache-dir or HOME
    decides) and none of the variables the compiler identity reads unless given."""
    env = pack_env()
    for name in ("UKDPACK_CACHE_DIR", "XDG_CACHE_HOME", "HIP_CLANG_PATH", "ROCM_PATH",
                 "HIP_PATH", "HIPCC_COMPILE_FLAGS_APPEND", "HIPCC_LINK_FLAGS_APPEND"):
        env.pop(name, None)
    env.update(extra)
    return env


def _pack_argv(tree: Path, out: Path, hipcc: Path, cache: Path | None) -> list[str]:
    argv = [sys.executable, "-m", "ukdpack", "pack", "--source-root", str(tree),
            "--out-root", str(out), "--arch", ARCH, "--plain", "--jobs", "2",
            "--hipcc", str(hipcc)]
    return argv + (["--cache-dir", str(cache)] if cache is not None else [])


def _run(argv: Sequence[str], env: dict[str, str], mounts: str = ""
         ) -> subprocess.CompletedProcess[str]:
    """Run ``argv``; with ``mounts`` (sh commands) first, in a private mount namespace of
    its own, so the mounts exist for that process only and vanish with it. Tests run as
    root, for whom no permission bit stops a write: a read-only or full file system
    does."""
    if mounts:
        need_mount_namespaces()
        ns = ["unshare", "--mount"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
        argv = [*ns, "sh", "-euc", f'{mounts}\nexec "$@"', "sh", *argv]
    return subprocess.run(list(argv), capture_output=True, text=True, env=env, check=False)


def _clean(stderr: str) -> None:
    assert "Traceback" not in stderr
    assert "internal error" not in stderr


def _cache_cli(*args: str, log_env: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ukdpack", "cache", *args],
                          capture_output=True, text=True, env=log_env or _env(), check=False)


@dataclass(frozen=True)
class Warm:
    tree: Path
    cache: Path  # warm, kept pristine: tests that change it work on a copy
    good: dict[str, bytes]  # the shard it packs
    hipcc: Path  # the counting compiler
    log: Path  # the compiles it ran


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Warm:
    base = tmp_path_factory.mktemp("cache-hostile")
    # The example as before slots: these tests count its three compiled objects.
    tree, cache = copy_example(base / "tree", SLOTTED), base / "cache"
    hipcc, log = counting_compiler(base)
    r = _run(_pack_argv(tree, base / "out", hipcc, cache), _env())
    assert r.returncode == 0, r.stderr
    assert len(compiles(log)) == 3
    return Warm(tree, cache, shard_files(base / "out" / ARCH), hipcc, log)


def _copy_cache(warm: Warm, tmp_path: Path) -> Path:
    return shutil.copytree(warm.cache, tmp_path / "cache")


# ------------------------------------------------------------------ unusable folders

#: case -> (sh mount commands or "", the cache folder (None: HOME's default), the why)
#: ``{t}`` is the test's tmp_path. Permission denied, which root never meets, is the
#: in-process test's (EACCES) below.
UNUSABLE = {
    "a file": ("", "{t}/cache-file", "it is a file, not a folder"),
    "under /proc": ("", "/proc/self/ukdpack-cache", "cannot write to it: No such file or "
                                                    "directory"),
    "read-only home": ("mount -t tmpfs -o ro,size=64k ukdpack-ro {t}/home", None,
                       "cannot write to it: Read-only file system"),
    "full disk": ("mount -t tmpfs -o size=64k ukdpack-full {t}/disk\n"
                  "head -c 1048576 /dev/zero > {t}/disk/fill 2>/dev/null || true",
                  "{t}/disk/cache", "cannot write to it: No space left on device"),
}


@pytest.mark.parametrize("case", sorted(UNUSABLE))
def test_an_unusable_cache_costs_one_warning_and_the_pack_goes_on(
        warm: Warm, tmp_path: Path, case: str) -> None:
    mounts, folder, why = (x.format(t=tmp_path) if x else x for x in UNUSABLE[case])
    (tmp_path / "cache-file").write_text("not a folder\n")
    (tmp_path / "home").mkdir()
    (tmp_path / "disk").mkdir()
    hipcc, log = counting_compiler(tmp_path)
    cache = Path(folder) if folder else None
    r = _run(_pack_argv(warm.tree, tmp_path / "out", hipcc, cache),
             _env(HOME=str(tmp_path / "home")), mounts)
    assert r.returncode == 0, r.stderr
    _clean(r.stderr)
    shown = str(cache) if cache else f"{tmp_path}/home/.cache/ukdpack"
    warnings = [ln for ln in r.stderr.splitlines() if "warning: compile cache" in ln]
    assert warnings == [WARNING.format(dir=shown, why=why)], r.stderr
    assert len(compiles(log)) == 3  # every object compiled, none skipped
    assert shard_files(tmp_path / "out" / ARCH) == warm.good
    assert (tmp_path / "cache-file").read_text() == "not a folder\n"


def test_a_read_only_warm_cache_is_still_read_without_a_word(
        warm: Warm, tmp_path: Path) -> None:
    """Nothing to write, nothing to warn about: every object comes from the cache."""
    ro = tmp_path / "ro"
    ro.mkdir()
    count = len(compiles(warm.log))
    r = _run(_pack_argv(warm.tree, tmp_path / "out", warm.hipcc, ro), _env(),
             f"mount --bind {warm.cache} {ro}\nmount -o remount,bind,ro {ro}")
    assert r.returncode == 0, r.stderr
    _clean(r.stderr)
    assert "warning" not in r.stderr
    assert len(compiles(warm.log)) == count
    assert shard_files(tmp_path / "out" / ARCH) == warm.good


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EACCES, errno.EROFS, errno.EIO])
def test_a_write_that_fails_midway_warns_once_and_stops_writing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    lines: list[str] = []
    cache = CompileCache(tmp_path / "c", warn=lines.append)
    src = tmp_path / "a.hip"
    src.write_text("// a\n")
    cache.store("k" * 64, tmp_path, [str(src)], b"object one")
    assert lines == []

    attempts: list[Path] = []

    def failing(path: Path, data: bytes) -> None:
        attempts.append(path)
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(cache_mod, "write_atomic", failing)
    cache.store("j" * 64, tmp_path, [str(src)], b"object two")  # the disk fills up here
    cache.put_info("0" * 64, {"target": ARCH, "signatures": {}})
    cache.put_compiler_record("c" * 64, {"version": "v", "identity": "i", "watched": {}})
    cache.store("m" * 64, tmp_path, [str(src)], b"object three")
    assert lines == [WARNING.format(dir=tmp_path / "c",
                                    why=f"cannot write to it: {os.strerror(code)}")]
    assert len(attempts) == 1, "writes went on after the first failure"
    assert cache.unusable
    # What was written before still serves: reads go on, each checked.
    hit = cache.lookup("k" * 64, tmp_path)
    assert hit is not None and hit.data == b"object one"
    assert cache.lookup("j" * 64, tmp_path) is None


# ------------------------------------------------------------------ compiler identity

def _fake_clang(folder: Path, log: Path) -> Path:
    """A HIP_CLANG_PATH folder whose clang (named as the one hipcc runs: Debian's
    hipcc.pl runs $HIP_CLANG_PATH/clang++-<N>) logs every run, then runs the real one;
    ../lib points where the real one's is, as hipcc looks for clang's headers there."""
    said = subprocess.run(["hipcc", "--version"], capture_output=True, text=True,
                          env=_env(HIPCC_VERBOSE="1"), check=True).stdout
    real = next(ln.split()[1] for ln in said.splitlines() if ln.startswith("hipcc-cmd:"))
    (folder / "bin").mkdir(parents=True)
    (folder / "lib").symlink_to(Path(os.path.realpath(real)).parent.parent / "lib")
    clang = folder / "bin" / Path(real).name
    clang.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    clang.chmod(clang.stat().st_mode | stat.S_IEXEC)
    return clang


def test_the_cache_key_follows_the_compiler_hipcc_runs(tmp_path: Path) -> None:
    """hipcc picks its clang, device libraries and flags from the environment: changing
    any of them, or the clang itself, misses; unchanged, a warm pack runs no process."""
    tree = copy_example(tmp_path / "tree", SLOTTED)  # three compiles, as counted below
    hipcc, log = counting_compiler(tmp_path)
    cache = tmp_path / "cache"
    clang_log = tmp_path / "clang.log"
    clang = _fake_clang(tmp_path / "fake", clang_log)
    fake = clang.parent
    seen = 0

    def pack(expect: int, **env: str) -> None:
        nonlocal seen
        r = _run(_pack_argv(tree, tmp_path / "out", hipcc, cache), _env(**env))
        assert r.returncode == 0, r.stderr
        _clean(r.stderr)
        assert len(compiles(log)) - seen == expect, (env, compiles(log)[seen:])
        seen = len(compiles(log))
        assert shard_files(tmp_path / "out" / ARCH) == first

    r = _run(_pack_argv(tree, tmp_path / "out", hipcc, cache), _env())
    assert r.returncode == 0, r.stderr
    first = shard_files(tmp_path / "out" / ARCH)
    seen = len(compiles(log))
    assert seen == 3
    pack(0)

    pack(3, HIP_CLANG_PATH=str(fake))  # another clang: every object again
    ran = [ln for ln in clang_log.read_text().splitlines()
           if "--cuda-device-only" in ln and "-###" not in ln]
    assert len(ran) == 3, "the compiles did not go through HIP_CLANG_PATH's clang"
    before = clang_log.read_text()
    pack(0, HIP_CLANG_PATH=str(fake))
    assert clang_log.read_text() == before, "a warm pack ran the compiler"

    # The same path, another compiler.
    clang.write_text(clang.read_text().replace("exec", "# swapped\nexec"))
    pack(3, HIP_CLANG_PATH=str(fake))
    pack(0, HIP_CLANG_PATH=str(fake))

    pack(3, ROCM_PATH="/usr")
    pack(0, ROCM_PATH="/usr")
    pack(3, HIPCC_COMPILE_FLAGS_APPEND="-DUKDPACK_UNUSED=1")
    pack(0)  # back as first: its entries are still there


# ------------------------------------------------------------------ cache verify

def _rebind(manifest: Path, entries: list[dict[str, Any]]) -> None:
    """Rewrite a manifest with the digest a pack would give it, as someone who knows the
    format would: nothing but recompiling can tell."""
    key = manifest.name.removesuffix(".json")
    digest = sha256_hex(key.encode() + b"\0" + canonical_json(entries))
    manifest.write_bytes(canonical_json({"digest": digest, "entries": entries}))


def _manifests(cache: Path) -> dict[Path, list[dict[str, Any]]]:
    return {p: json.loads(p.read_bytes())["entries"]
            for p in sorted((cache / "v1" / "manifests").rglob("*.json"))}


def _summary(stdout: str) -> str:
    return stdout.strip().splitlines()[-1].split(": ", 2)[2]


def test_verify_passes_a_clean_cache_by_compiling_every_entry(
        warm: Warm, tmp_path: Path) -> None:
    cache = _copy_cache(warm, tmp_path)
    count = len(compiles(warm.log))
    r = _cache_cli("verify", "--cache-dir", str(cache))
    assert r.returncode == 0, r.stderr
    _clean(r.stderr)
    assert _summary(r.stdout) == "3 entries: 3 same when compiled again, 0 differ, 0 skipped"
    assert len(compiles(warm.log)) == count + 3  # really compiled, with the recorded hipcc

    r = _cache_cli("verify", "--cache-dir", str(cache), "--sample", "1")
    assert r.returncode == 0, r.stderr
    assert _summary(r.stdout) == "1 of 3 entries: 1 same when compiled again, 0 differ, " \
                                 "0 skipped"
    assert len(compiles(warm.log)) == count + 4


def test_verify_catches_a_poisoned_object_every_digest_vouches_for(
        warm: Warm, tmp_path: Path) -> None:
    cache = _copy_cache(warm, tmp_path)
    manifests = _manifests(cache)
    scale = {json.dumps(e[0]["rerun"]["argv"]): (p, e) for p, e in manifests.items()
             if e[0]["rerun"]["source"] == "attention/kernels/scale.hip"}
    assert len(scale) == 2  # BLOCK=128 and BLOCK=256
    (victim, entries), (_, other) = sorted(scale.values())
    # The victim now names the other build's object: a real code object, stored under its
    # own digest, named by a manifest whose digest holds.
    entries[0]["object"] = other[0]["object"]
    _rebind(victim, entries)

    count = len(compiles(warm.log))
    r = _run(_pack_argv(warm.tree, tmp_path / "out", warm.hipcc, cache), _env())
    assert len(compiles(warm.log)) == count, "the pack did not trust the poisoned entry"
    assert r.returncode != 0 or shard_files(tmp_path / "out" / ARCH) != warm.good

    r = _cache_cli("verify", "--cache-dir", str(cache))
    assert r.returncode == 1, r.stdout + r.stderr
    _clean(r.stderr)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("ukdpack: error:")]
    assert len(errors) == 1, r.stderr
    source = warm.tree / "attention" / "kernels" / "scale.hip"
    key = victim.name.removesuffix(".json")
    assert f"entry {key[:16]} ({source}, {ARCH})" in errors[0]
    assert "damaged or poisoned" in errors[0]
    assert _summary(r.stdout) == "3 entries: 2 same when compiled again, 1 differ, 0 skipped"


def test_verify_skips_what_it_cannot_rerun_with_a_note(warm: Warm, tmp_path: Path) -> None:
    cache = _copy_cache(warm, tmp_path)
    manifests = _manifests(cache)
    by_source = {e[0]["rerun"]["source"]: (p, e) for p, e in manifests.items()}
    # An entry from before entries recorded how to rerun them.
    legacy, entries = by_source["attention/kernels/split_kv.hip"]
    del entries[0]["rerun"]
    _rebind(legacy, entries)
    # An entry whose source is gone (moved away for the test, then back).
    scale = warm.tree / "attention" / "kernels" / "scale.hip"
    moved = tmp_path / "scale.hip"
    shutil.move(scale, moved)
    try:
        r = _cache_cli("verify", "--cache-dir", str(cache))
    finally:
        shutil.move(moved, scale)
    assert r.returncode == 0, r.stdout + r.stderr
    _clean(r.stderr)
    notes = [ln for ln in r.stderr.splitlines() if ln.startswith("ukdpack: note:")]
    assert len(notes) == 3, r.stderr  # the two scale.hip entries, the old one
    assert sum(f"({scale}, {ARCH}): its source is no longer there; skipped" in n
               for n in notes) == 2
    assert any("1 entry lacks a rerun record" in n for n in notes)
    assert _summary(r.stdout) == "2 entries: 0 same when compiled again, 0 differ, 2 skipped"


# ------------------------------------------------------------------ cache stats

def test_stats_counts_entries_bytes_and_ages(warm: Warm, tmp_path: Path) -> None:
    cache = _copy_cache(warm, tmp_path)
    objects = sorted(p for p in (cache / "v1" / "objects").rglob("*") if p.is_file())
    assert len(objects) == 3
    old, new = time.mktime((2001, 2, 3, 4, 5, 6, 0, 0, -1)), \
        time.mktime((2002, 3, 4, 5, 6, 7, 0, 0, -1))
    for p, t in zip(objects, (old, new, new - 60), strict=True):
        os.utime(p, (t, t))
    everything = [p for p in cache.rglob("*") if p.is_file()]
    r = _cache_cli("stats", "--cache-dir", str(cache))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"compile cache {cache}",
        "  entries  3 in 3 manifests (0 without a rerun record, 0 manifests failing their "
        "digest)",
        f"  objects  3, {sum(p.stat().st_size for p in objects):,} bytes",
        f"  total    {sum(p.stat().st_size for p in everything):,} bytes in "
        f"{len(everything)} files",
        "  oldest   2001-02-03 04:05:06",
        "  newest   2002-03-04 05:06:07",
        "  limit    none",
    ]

    r = _cache_cli("stats", "--cache-dir", str(tmp_path / "nothing"))
    assert r.returncode == 2
    assert f"{tmp_path / 'nothing'}: no compile cache there" in r.stderr
