"""Keeping the local compile cache in bounds (docs/packing.md, "Keeping the cache in
bounds"): ``cache stats --json``, the size limit (``cache config --max-size``,
``$UKDPACK_CACHE_MAX_SIZE``, ``cache.conf``) enforced after each pack by evicting the
least recently used objects, ``cache prune --older-than``, ``cache clear``, and a pack
in progress that keeps every entry it uses while they wait for it."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from pack_support import REPO, compiles, run_pack

from ukdpack.produce import cache_admin
from ukdpack.produce.cache import CompileCache

KERNELS = REPO / "examples" / "cpp-consumer" / "kernels"  # two hip sources: two compiles
ARCH = "gfx90a"
HOUR = 3600.0


def _ukdpack(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ukdpack", *args], capture_output=True,
                          text=True, env=dict(os.environ, **(env or {})), check=False)


def _gated_compiler(folder: Path) -> Path:
    """hipcc behind a wrapper that logs each compile and, while ``folder/gate`` exists,
    holds a compile of twostage.hip until ``folder/go`` appears (saying so in
    ``folder/reached``): a pack held in the middle, with a real compile."""
    real = shutil.which("hipcc")
    assert real, "hipcc is installed by scripts/setup.sh"
    wrapper = folder / "hipcc"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'case " $* " in *" --genco "*) echo "$*" >> "{folder}/compiles.log";; esac\n'
        f'case "$*" in *twostage.hip*) if [ -e "{folder}/gate" ]; then\n'
        f'  touch "{folder}/reached"; while [ ! -e "{folder}/go" ]; do sleep 0.05; done; fi;; esac\n'
        f'exec "{real}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return wrapper


@dataclass(frozen=True)
class Warm:
    base: Path
    cache: Path  # after one pack of KERNELS: kept pristine, each test works on a copy
    hipcc: Path
    objects: dict[str, str]  # source file name -> sha256 of its object


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Warm:
    base = tmp_path_factory.mktemp("cache-admin")
    hipcc = _gated_compiler(base)
    tree = base / "tree"
    shutil.copytree(KERNELS, tree)
    cache = base / "cache"
    r = run_pack(tree, base / "out", [ARCH], "--hipcc", str(hipcc), cache=cache)
    assert r.returncode == 0, r.stderr
    objects = {}
    for key, entry in CompileCache(cache).entries():
        assert entry is not None, key
        objects[entry["rerun"]["source"].rsplit("/", 1)[-1]] = entry["object"]
    assert sorted(objects) == ["scale.hip", "twostage.hip"], objects
    return Warm(base, cache, hipcc, objects)


@dataclass(frozen=True)
class Case:
    tree: Path
    cache: Path
    out: Path
    log: Path
    hipcc: Path

    def pack(self, *extra: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
        self.log.unlink(missing_ok=True)
        return run_pack(self.tree, self.out, [ARCH], "--hipcc", str(self.hipcc), *extra,
                        cache=self.cache, env=env)

    def compiled(self) -> list[str]:
        """The sources the last pack compiled."""
        return sorted(name for line in compiles(self.log)
                      for name in ("scale.hip", "twostage.hip") if name in line)

    def object_path(self, sha: str) -> Path:
        return self.cache / "v1" / "objects" / sha[:2] / sha


@pytest.fixture
def case(warm: Warm, tmp_path: Path) -> Case:
    tree = tmp_path / "tree"
    shutil.copytree(KERNELS, tree)
    cache = tmp_path / "cache"
    shutil.copytree(warm.cache, cache)  # copy2: the objects keep their times
    return Case(tree, cache, tmp_path / "out", warm.base / "compiles.log", warm.hipcc)


def _stats(cache: Path, env: dict[str, str] | None = None) -> dict[str, object]:
    r = _ukdpack("cache", "stats", "--cache-dir", str(cache), "--json", env=env)
    assert r.returncode == 0, r.stderr
    doc: dict[str, object] = json.loads(r.stdout)
    return doc


def _age(path: Path, seconds: float) -> None:
    when = time.time() - seconds
    os.utime(path, (when, when))


def test_stats_json_counts_entries_objects_and_bytes(case: Case, warm: Warm) -> None:
    doc = _stats(case.cache)
    assert doc["format_version"] == 1 and doc["ok"] is True and doc["problems"] == []
    assert doc["cache"] == str(case.cache)
    assert (doc["entries"], doc["manifests"], doc["objects"]) == (2, 2, 2)
    sizes = [case.object_path(sha).stat().st_size for sha in warm.objects.values()]
    assert doc["object_bytes"] == sum(sizes)
    total = sum(p.stat().st_size for p in case.cache.rglob("*") if p.is_file())
    assert doc["bytes"] == total and doc["files"] == len(
        [p for p in case.cache.rglob("*") if p.is_file()])
    assert doc["max_size"] is None and doc["max_size_origin"] == "none"
    assert isinstance(doc["newest_use"], str) and doc["newest_use"].endswith("Z")


def test_a_limit_evicts_the_least_recently_used_after_a_pack(case: Case, warm: Warm) -> None:
    """A pack of the twostage kernel alone uses its object; over the limit, the scale
    object (used before it) goes, with its manifest entry, and twostage's stays."""
    for sha in warm.objects.values():
        _age(case.object_path(sha), HOUR)
    (case.tree / "scale.kdp.json").unlink()
    (case.tree / "scale.udd.json").unlink()
    # Packed once unlimited first: the cache's record of the pack's hits is then in the
    # total, as it is when the limit is reached.
    assert case.pack().returncode == 0
    scale = case.object_path(warm.objects["scale.hip"])
    total = sum(p.stat().st_size for p in case.cache.rglob("*") if p.is_file())
    limit = total - scale.stat().st_size // 2
    r = case.pack(env={"UKDPACK_CACHE_MAX_SIZE": f"{limit}B"})
    assert r.returncode == 0, r.stderr
    assert case.compiled() == []
    assert "evicted 1 least recently used object" in r.stderr, r.stderr
    assert not scale.exists()
    assert case.object_path(warm.objects["twostage.hip"]).exists()
    doc = _stats(case.cache)
    assert (doc["entries"], doc["objects"]) == (1, 1)  # the manifest entry went with it
    assert isinstance(doc["bytes"], int) and doc["bytes"] <= limit
    # The full tree again: only scale compiles; under no limit nothing is evicted.
    shutil.copytree(KERNELS, case.tree, dirs_exist_ok=True)
    r = case.pack()
    assert r.returncode == 0, r.stderr
    assert case.compiled() == ["scale.hip"] and "evicted" not in r.stderr


def test_the_limit_comes_from_the_variable_else_the_config_file(case: Case) -> None:
    r = _ukdpack("cache", "config", "--cache-dir", str(case.cache), "--max-size", "5G")
    assert r.returncode == 0, r.stderr
    conf = case.cache / "cache.conf"
    assert "max_size = 5000000000B" in conf.read_text()
    doc = _stats(case.cache)
    assert doc["max_size"] == 5_000_000_000
    assert doc["max_size_origin"] == f"{conf}:2"
    r = _ukdpack("cache", "config", "--cache-dir", str(case.cache))
    assert r.stdout.startswith(f"compile cache {case.cache}: max_size 4.7 GiB ({conf}:2)")
    env = {"UKDPACK_CACHE_MAX_SIZE": "2MiB"}
    doc = _stats(case.cache, env)
    assert (doc["max_size"], doc["max_size_origin"]) == (2 << 20, "$UKDPACK_CACHE_MAX_SIZE")
    # A limit below what the cache holds applies at once: `config` evicts.
    r = _ukdpack("cache", "config", "--cache-dir", str(case.cache), "--max-size", "1k")
    assert r.returncode == 0, r.stderr
    assert "evicted (least recently used first): 2 objects" in r.stdout, r.stdout
    assert _stats(case.cache)["objects"] == 0
    r = _ukdpack("cache", "config", "--cache-dir", str(case.cache), "--max-size", "0")
    assert r.returncode == 0 and _stats(case.cache)["max_size"] is None


@pytest.mark.parametrize(("where", "value", "status", "message"), [
    ("env", "12", 2, "$UKDPACK_CACHE_MAX_SIZE: expected a size with a unit such as 5G"),
    ("env", "lots", 2, "$UKDPACK_CACHE_MAX_SIZE: expected a size with a unit"),
    ("file", "max_size = 12", 1, "cache.conf: line 1: max_size: expected a size with a unit"),
    ("file", "maxsize = 1G", 1, "cache.conf: line 1: expected 'max_size = SIZE' (the one "
                                "setting), found unknown key 'maxsize'"),
])
def test_a_bad_limit_fails_the_pack_before_any_compile(case: Case, where: str, value: str,
                                                       status: int, message: str) -> None:
    env = {"UKDPACK_CACHE_MAX_SIZE": value} if where == "env" else {}
    if where == "file":
        (case.cache / "cache.conf").write_text(value + "\n")
    (case.tree / "kernels" / "scale.hip").write_text(
        (KERNELS / "kernels" / "scale.hip").read_text() + "// changed\n")
    r = case.pack(env=env)
    assert r.returncode == status, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    assert case.compiled() == [] and not (case.out / ARCH).exists()


def test_prune_removes_what_no_pack_used_for_that_long(case: Case, warm: Warm) -> None:
    _age(case.object_path(warm.objects["scale.hip"]), 40 * 24 * HOUR)
    r = _ukdpack("cache", "prune", "--cache-dir", str(case.cache), "--older-than", "30d")
    assert r.returncode == 0, r.stderr
    assert "pruned (not used for 30d): 1 object," in r.stdout, r.stdout
    assert not case.object_path(warm.objects["scale.hip"]).exists()
    assert not list((case.cache / "v1" / "info").glob(f"*/{warm.objects['scale.hip']}.json"))
    r = case.pack()
    assert r.returncode == 0, r.stderr
    assert case.compiled() == ["scale.hip"]
    r = _ukdpack("cache", "prune", "--cache-dir", str(case.cache), "--older-than", "30 days")
    assert r.returncode == 2 and "expected a duration such as 30d" in r.stderr


def test_clear_removes_every_entry_and_keeps_what_ukdpack_did_not_write(case: Case) -> None:
    (case.cache / "cache.conf").write_text("max_size = 1G\n")
    (case.cache / "notes.txt").write_text("mine\n")
    r = _ukdpack("cache", "clear", "--cache-dir", str(case.cache))
    assert r.returncode == 0, r.stderr
    assert "cleared: 2 objects" in r.stdout
    assert not (case.cache / "v1").exists()
    assert (case.cache / "notes.txt").read_text() == "mine\n"
    assert (case.cache / "cache.conf").read_text() == "max_size = 1G\n"
    r = case.pack()
    assert r.returncode == 0, r.stderr
    assert case.compiled() == ["scale.hip", "twostage.hip"]


def test_a_pack_in_progress_keeps_its_entries_while_clear_waits(case: Case, warm: Warm) -> None:
    """A real pack held in its twostage compile (edited: a miss) while scale's entry is
    a hit: clear cannot take the cache from it, and the pack packs scale from it."""
    (case.tree / "kernels" / "twostage.hip").write_text(
        (KERNELS / "kernels" / "twostage.hip").read_text() + "// edited\n")
    gate, go, reached = (warm.base / n for n in ("gate", "go", "reached"))
    gate.touch()
    for f in (go, reached):
        f.unlink(missing_ok=True)
    case.log.unlink(missing_ok=True)
    env = dict(os.environ, HIP_PLATFORM="amd")
    pack = subprocess.Popen(
        [sys.executable, "-m", "ukdpack", "pack", "--source-root", str(case.tree),
         "--out-root", str(case.out), "--arch", ARCH, "--plain", "--jobs", "2",
         "--hipcc", str(case.hipcc), "--cache-dir", str(case.cache)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while not reached.exists():
            assert pack.poll() is None, pack.communicate()
            assert time.monotonic() < deadline, "the pack never reached its compile"
            time.sleep(0.05)
        r = _ukdpack("cache", "clear", "--cache-dir", str(case.cache), "--wait", "1")
        assert r.returncode == 1, r.stdout + r.stderr
        assert "packs still use it after 1 s; nothing removed" in r.stderr
        assert case.object_path(warm.objects["scale.hip"]).exists()
        r = _ukdpack("cache", "prune", "--cache-dir", str(case.cache), "--older-than", "0s",
                     "--wait", "0")
        assert r.returncode == 1 and "nothing removed" in r.stderr
        clear = subprocess.Popen(
            [sys.executable, "-m", "ukdpack", "cache", "clear", "--cache-dir", str(case.cache)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        assert clear.poll() is None  # waiting for the pack
        go.touch()
        out, err = pack.communicate(timeout=300)
        assert pack.returncode == 0, err
        assert case.compiled() == ["twostage.hip"]  # scale came from the cache
        assert "2 code objects: 1 compiled, 1 from cache" in err, err
        out, err = clear.communicate(timeout=60)
        assert clear.returncode == 0, err
        assert "waiting for the packs using it to finish" in err
        # scale and twostage: the comment changed the key (a miss), not the object's bytes
        assert "cleared: 2 objects" in out, out
    finally:
        gate.unlink(missing_ok=True)
        go.touch()
        for p in (pack,):
            if p.poll() is None:
                p.kill()
                p.communicate()


def test_a_pack_that_finishes_while_another_runs_leaves_eviction_to_it(case: Case) -> None:
    """Eviction never waits: while a pack holds the cache, a finishing pack skips it; the
    last one to finish evicts."""
    lines: list[str] = []
    os.environ["UKDPACK_CACHE_MAX_SIZE"] = "1k"
    try:
        with cache_admin.pack_lock(case.cache, 1.0, lines.append):
            assert cache_admin.evict_after_pack(case.cache, lines.append) is None
            assert len(list((case.cache / "v1" / "objects").glob("*/*"))) == 2
        removed = cache_admin.evict_after_pack(case.cache, lines.append)
    finally:
        del os.environ["UKDPACK_CACHE_MAX_SIZE"]
    assert removed is not None and removed.objects == 2
    assert lines and "evicted 2 least recently used objects" in lines[-1]


@pytest.mark.parametrize(("text", "size"), [
    ("5G", 5_000_000_000), ("500M", 500_000_000), ("2GiB", 2 << 30), ("1.5k", 1500),
    ("300000B", 300_000), ("64 MiB", 64 << 20), ("0", None),
])
def test_sizes_read_as_ccache_writes_them(text: str, size: int | None) -> None:
    assert cache_admin.parse_size(text) == size


@pytest.mark.parametrize("text", ["12", "-1G", "5X", "", "G", "0.0000001B"])
def test_a_size_without_a_unit_or_above_nothing_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="expected a size"):
        cache_admin.parse_size(text)
