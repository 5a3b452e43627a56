"""Seed corpora for the fuzz targets, made from the conformance corpus and test data.

``python tests/fuzz/seeds.py OUT`` writes ``OUT/fuzz_loader``, ``OUT/fuzz_kpack`` and
``OUT/fuzz_codeobject``: every descriptor tree and packed shard of ``tests/corpus`` as one
loader input (its files as ``<path>\\n<content>`` joined by NUL bytes, the format
``fuzz_loader.cpp`` reads), every kpack archive, and every code object.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
CORPUS = TESTS / "corpus"
# The loader target writes at most 16 files per input.
MAX_FILES = 16
#: Loader inputs the fuzzer once found failing, replayed by every run: a folder whose only
#: file is not named as a descriptor (its index, of no files, did not bind).
LOADER_REGRESSIONS = (b"a.kdp.j\x89\x90{\n{ \"id\": \"kdp-a\", \"version\": \"1.0\" }\n",)


def _write(folder: Path, data: bytes) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / hashlib.sha1(data).hexdigest()).write_bytes(data)


def loader_inputs() -> list[bytes]:
    """One input per corpus tree or shard: its JSON files, path and content. Every
    other one with room for it also carries an ``index.ukdx`` segment: three edits of
    the index the target builds for the files (5 bytes each, a little-endian place in
    its body and a byte XORed in there), taken from the files' digest; the rest load
    through their index unedited."""
    out: list[bytes] = []
    for case in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
        for top in ("tree", "shard"):
            root = case / top
            files = sorted(p for p in root.rglob("*.json") if p.is_file()) if root.is_dir() else []
            if files:
                data = b"\0".join(p.relative_to(root).as_posix().encode() + b"\n"
                                  + p.read_bytes() for p in files[:MAX_FILES])
                if len(out) % 2 and len(files) < MAX_FILES:
                    edits = bytes(b or 1 for b in hashlib.sha256(data).digest()[:15])  # no NUL: it ends a segment
                    data += b"\0index.ukdx\n" + edits
                out.append(data)
    return out


def files_named(*suffixes: str) -> list[bytes]:
    return [p.read_bytes() for p in sorted(TESTS.rglob("*"))
            if p.is_file() and p.name.endswith(suffixes)]


def main(out: Path) -> int:
    seeds = {"fuzz_loader": [*loader_inputs(), *LOADER_REGRESSIONS],
             "fuzz_kpack": files_named(".kpack"),
             "fuzz_codeobject": files_named(".hsaco", ".cubin", ".co")}
    for target, inputs in seeds.items():
        for data in inputs:
            _write(out / target, data)
        print(f"{target}: {len(inputs)} seeds")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1])))
