"""How long the configure-time DVC presence check takes on 100 sidecars.

Makes a DVC-style tree of 100 sidecars (each a folder output of 3 files, with real
md5s), then times ``ukdpack.dvc.status`` (presence, what configure runs) and
``status(verify=True)`` in this process, and the whole ``ukdpack dvc-status``
command as CMake runs it. Prints the figures and writes bench/results/dvc_status.json.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ukdpack.authored import dvc

RESULTS = Path(__file__).resolve().parent / "results"


def make_tree(root: Path, n: int) -> None:
    for i in range(n):
        folder = root / f"op{i:03d}" / "objects"
        out = folder / "gfx90a"
        out.mkdir(parents=True)
        for j in range(3):
            (out / f"k{j}.hsaco").write_bytes(os.urandom(4096))
        md5 = dvc.dir_md5(out)
        (folder / "gfx90a.dvc").write_text(
            f"outs:\n- md5: {md5}\n  size: 12288\n  nfiles: 3\n  hash: md5\n  path: gfx90a\n")


def timed(fn: object, runs: int = 7) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / ".dvc").mkdir()
        make_tree(root, 100)
        presence = timed(lambda: dvc.status(root))
        verify = timed(lambda: dvc.status(root, verify=True))
        cmd = timed(lambda: subprocess.run([sys.executable, "-m", "ukdpack", "dvc-status",
                                            str(root), "--require"], check=True,
                                           capture_output=True), runs=5)
    result = {"sidecars": 100, "presence_s": round(presence, 4), "verify_s": round(verify, 4),
              "command_s": round(cmd, 4)}
    print(f"dvc-status on 100 sidecars: presence {presence * 1000:.1f} ms, "
          f"with --verify {verify * 1000:.1f} ms, whole command (python start included) "
          f"{cmd * 1000:.0f} ms")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "dvc_status.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
