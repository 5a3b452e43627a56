"""The libFuzzer targets (tests/fuzz/) build, take the corpus as seeds, and survive a
30-second run each under ASan and UBSan (ISSUE: reliability, fuzzing)."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ("fuzz_loader", "fuzz_kpack", "fuzz_codeobject")
SECONDS = 30

sys.path.insert(0, str(ROOT / "tests/fuzz"))
import seeds  # noqa: E402  (tests/fuzz/seeds.py: what the seeds are made of)


def test_seeds_cover_every_corpus_tree_and_shard(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(ROOT / "tests/fuzz/seeds.py"), str(tmp_path)],
                       capture_output=True, text=True, check=True)
    cases = [c for c in (ROOT / "tests/corpus").iterdir()
             if any((c / top).rglob("*.json") for top in ("tree", "shard"))]
    counts = {t: len(list((tmp_path / t).iterdir())) for t in TARGETS}
    # Cases that differ only outside their JSON (a damaged archive, a broken object)
    # make one seed between them: most cases still give a seed of their own. The
    # inputs the fuzzer once found failing are seeds beside them.
    regressions = len(seeds.LOADER_REGRESSIONS)
    assert len(cases) * 3 // 4 <= counts["fuzz_loader"] - regressions <= len(cases), \
        (counts, r.stdout)
    for found in seeds.LOADER_REGRESSIONS:
        assert (tmp_path / "fuzz_loader" / hashlib.sha1(found).hexdigest()).read_bytes() == found
    assert counts["fuzz_kpack"] >= 10 and counts["fuzz_codeobject"] >= 10, counts
    # The loader's input format: files as "<path>\n<content>", NUL-separated.
    seed = next((tmp_path / "fuzz_loader").iterdir()).read_bytes()
    first = seed.split(b"\0")[0]
    assert re.match(rb"[^\n]+\.json\n", first), first[:80]


@pytest.mark.slow
def test_fuzz_targets_survive_a_short_run() -> None:
    r = subprocess.run([str(ROOT / "tests/fuzz/run.sh"), str(SECONDS)], cwd=ROOT,
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    for target in TARGETS:
        m = re.search(rf"^{target}: (\d+) executions in {SECONDS}s, cov (\d+) of (\d+) edges", r.stdout, re.M)
        assert m, r.stdout
        # Real progress, not a target that returns at once: thousands of inputs and
        # more than a handful of covered edges.
        assert int(m.group(1)) > 1000 and int(m.group(2)) > 100, m.group(0)
    assert "FOUND" not in r.stdout
