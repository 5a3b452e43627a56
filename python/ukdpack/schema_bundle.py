"""Bundling the JSON Schema sources into self-contained shipped schemas.

The sources (``schemas/`` at the top of the repository) share definitions through
``common.schema.json`` and refer to each other by file name. An editor or
``check-jsonschema`` given one of those would resolve the references against the
``$id`` URL and try to download them, which fails offline. So every shipped schema
(``python/ukdpack/schemas/<name>.schema.json``) is a bundle: the source with every
definition it reaches copied into its own ``$defs`` and every ``$ref`` made local
(``#/$defs/...``). A shipped file then validates a descriptor on its own, with
nothing fetched and no other file read.

Run ``python -m ukdpack.schema_bundle schemas python/ukdpack/schemas`` after editing
a source; ``--check`` exits 1 when a shipped file is not the bundle of its source
(a test runs it).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ukdpack.schema import SCHEMA_BASE

#: The source that holds shared definitions only: it is merged, never shipped.
COMMON = "common.schema.json"
SUFFIX = ".schema.json"


class BundleError(ValueError):
    """A source uses a reference form the bundler does not rewrite."""


def _stem(name: str) -> str:
    return name[: -len(SUFFIX)]


class _Bundle:
    """The bundle of one shipped schema: the definitions it has gathered so far."""

    def __init__(self, sources: Mapping[str, Mapping[str, Any]], top: str) -> None:
        self.sources = sources
        self.top = top
        self.defs: dict[str, Any] = {}

    def _common_def(self, name: str) -> None:
        if name in self.defs:
            return
        common_defs = self.sources[COMMON].get("$defs", {})
        if name not in common_defs:
            raise BundleError(f"{COMMON} has no definition '{name}'")
        self.defs[name] = None  # reserved first: definitions may refer to each other
        self.defs[name] = self.rewrite(copy.deepcopy(common_defs[name]), COMMON)

    def _embed(self, file: str) -> str:
        key = _stem(file)
        if key not in self.defs:
            if file not in self.sources:
                raise BundleError(f"a $ref names {file}, which is no schema source")
            body = {k: copy.deepcopy(v) for k, v in self.sources[file].items()
                    if k not in ("$schema", "$id", "$defs")}
            if self.sources[file].get("$defs"):
                raise BundleError(f"{file}: only {COMMON} may hold $defs")
            self.defs[key] = None
            self.defs[key] = self.rewrite(body, file)
        return f"#/$defs/{key}"

    def _ref(self, ref: str, where: str) -> str:
        file, _, fragment = ref.partition("#")
        if file == COMMON or (file == "" and where == COMMON):
            if not fragment.startswith("/$defs/") or fragment.count("/") != 2:
                raise BundleError(f"{where}: $ref {ref!r}: expected {COMMON}#/$defs/NAME")
            name = fragment.split("/")[2]
            self._common_def(name)
            return f"#/$defs/{name}"
        if file == "":
            if where != self.top:
                raise BundleError(f"{where}: a local $ref {ref!r} is not bundled")
            return ref
        if fragment:
            raise BundleError(f"{where}: $ref {ref!r}: name a whole schema file or "
                              f"{COMMON}#/$defs/NAME")
        return self._embed(file)

    def rewrite(self, node: Any, where: str) -> Any:
        """``node`` with every ``$ref`` made local, gathering what the refs reach."""
        if isinstance(node, dict):
            return {k: (self._ref(v, where) if k == "$ref" and isinstance(v, str)
                        else self.rewrite(v, where)) for k, v in node.items()}
        if isinstance(node, list):
            return [self.rewrite(v, where) for v in node]
        return node


def bundle(sources: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every shipped schema by file name, bundled from ``sources`` (file name -> schema)."""
    if COMMON not in sources:
        raise BundleError(f"the sources hold no {COMMON}")
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(sources):
        if name == COMMON:
            continue
        src = sources[name]
        if src.get("$defs"):
            raise BundleError(f"{name}: only {COMMON} may hold $defs")
        b = _Bundle(sources, name)
        body = b.rewrite({k: copy.deepcopy(v) for k, v in src.items()
                          if k not in ("$schema", "$id", "title")}, name)
        if _stem(name) in b.defs:
            raise BundleError(f"{name} refers to itself")
        doc: dict[str, Any] = {
            "$schema": src.get("$schema", "https://json-schema.org/draft/2020-12/schema"),
            "$id": SCHEMA_BASE + name,
            "$comment": f"Generated from schemas/{name} by python -m ukdpack.schema_bundle; "
                        "edit the source. Self-contained: no $ref leaves this file.",
        }
        if "title" in src:
            doc["title"] = src["title"]
        doc.update(body)
        if b.defs:
            doc["$defs"] = {k: b.defs[k] for k in sorted(b.defs)}
        out[name] = doc
    return out


def text(doc: Mapping[str, Any]) -> str:
    """The shipped text of one schema: two-space indented JSON and a newline."""
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def read_sources(folder: Path) -> dict[str, dict[str, Any]]:
    """Every ``*.schema.json`` of ``folder`` by file name."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*" + SUFFIX)):
        out[path.name] = json.loads(path.read_text(encoding="utf-8"))
    return out


def stale(sources: Path, shipped: Path) -> list[str]:
    """Shipped files that differ from the bundle of their source, are missing, or have
    no source, by file name."""
    want = {name: text(doc) for name, doc in bundle(read_sources(sources)).items()}
    have = {p.name: p.read_text(encoding="utf-8") for p in shipped.glob("*" + SUFFIX)}
    return sorted(n for n in set(want) | set(have) if want.get(n) != have.get(n))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ukdpack.schema_bundle SOURCES SHIPPED [--check]``."""
    parser = argparse.ArgumentParser(prog="python -m ukdpack.schema_bundle",
                                     description="Bundle the JSON Schema sources into "
                                                 "self-contained shipped schemas.")
    parser.add_argument("sources", type=Path, help="folder of the sources (schemas/)")
    parser.add_argument("shipped", type=Path, help="folder of the shipped schemas "
                                                   "(python/ukdpack/schemas/)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when a shipped schema is out of date")
    args = parser.parse_args(argv)
    try:
        docs = bundle(read_sources(args.sources))
        if args.check:
            bad = stale(args.sources, args.shipped)
            for name in bad:
                print(f"schema_bundle: error: {args.shipped / name}: not the bundle of "
                      f"{args.sources / name}; run python -m ukdpack.schema_bundle "
                      f"{args.sources} {args.shipped}", file=sys.stderr)
            return 1 if bad else 0
        for path in args.shipped.glob("*" + SUFFIX):
            if path.name not in docs:
                path.unlink()
        for name, doc in docs.items():
            path = args.shipped / name
            new = text(doc)
            if not path.is_file() or path.read_text(encoding="utf-8") != new:
                path.write_text(new, encoding="utf-8")
    except (BundleError, OSError, json.JSONDecodeError) as e:
        print(f"schema_bundle: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
