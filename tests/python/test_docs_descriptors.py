"""docs/descriptors.md cannot drift: every JSON block of it is checked against the
shipped schema of its type and read through the runtime's loader, its field tables
list exactly the fields the schemas know, and its VS Code settings name schema files
that ship."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from schema_oracle import explain, is_valid, read_versions

from ukdpack import _runtime
from ukdpack.cli import main
from ukdpack.shard.runtime_check import load_handler_manifest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "descriptors.md"
TYPES = ("kdp", "ukd", "udd", "ued", "kmd", "umd", "uhd")
KINDS = ("hip", "cuda", "hsaco", "builder", "embedded_source", "kpack")
FENCE = re.compile(r"^```(json|jsonc)\n(.*?)^```", re.M | re.S)
FILE_LINE = re.compile(r"^// ([\w./-]+\.(" + "|".join(TYPES) + r")\.json)$")
KIND_LINE = re.compile(r"^// kernel_source: (\w+)")
#: Fields that name files a loader checks exist: created (empty) beside the examples.
FILE_FIELDS = {"source", "file", "artifact", "library"}


@dataclass(frozen=True)
class Block:
    """One JSON block of the doc: what its first line says it is, and its text."""

    label: str
    text: str


def _blocks() -> list[Block]:
    out = []
    for m in FENCE.finditer(DOC.read_text(encoding="utf-8")):
        text = m.group(2)
        out.append(Block(text.splitlines()[0] if text.strip() else "", text))
    return out


def _read(text: str, tmp: Path, name: str = "block.json") -> Any:
    """The block as the runtime's reader reads a descriptor (comments allowed)."""
    path = tmp / name
    path.write_text(text, encoding="utf-8")
    doc, where, why = _runtime.read_json_file(str(path))
    assert why is None, (text[:60], where, why)
    return doc


def _files(tmp: Path) -> dict[str, tuple[str, Any]]:
    """Every descriptor example: its file path -> (type, document)."""
    out: dict[str, tuple[str, Any]] = {}
    for b in _blocks():
        m = FILE_LINE.match(b.label)
        if m:
            assert m.group(1) not in out, f"two examples are {m.group(1)}"
            out[m.group(1)] = (m.group(2), _read(b.text, tmp))
    return out


def _kind_snippets(tmp: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for b in _blocks():
        m = KIND_LINE.match(b.label)
        if m:
            out[m.group(1)] = _read(b.text, tmp)
    return out


def _named_files(node: Any) -> list[str]:
    """Every path a source or UHD body names, anywhere in a document."""
    found: list[str] = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k in FILE_FIELDS and isinstance(v, str) and node.get("kind") != "kpack":
                found.append(v)
            else:
                found += _named_files(v)
    elif isinstance(node, list):
        for v in node:
            found += _named_files(v)
    return found


def _write_tree(root: Path, files: dict[str, tuple[str, Any]], texts: dict[str, str]) -> None:
    for rel, (_, doc) in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(texts[rel], encoding="utf-8")
        for named in _named_files(doc):
            # The loader checks these exist; nothing is compiled.
            (path.parent / named).parent.mkdir(parents=True, exist_ok=True)
            (path.parent / named).write_bytes(b"placeholder\n")


def _errors(dset: Any, extra: list[dict[str, str]] | None = None) -> list[str]:
    return [f"{d.get('file')}: {d.get('path')}: {d.get('message')}"
            for d in list(dset.diagnostics) + (extra or []) if d["severity"] == "error"]


def test_every_block_is_one_the_test_knows() -> None:
    labels = [b.label for b in _blocks()]
    assert len(labels) > 15
    for label in labels:
        assert (FILE_LINE.match(label) or KIND_LINE.match(label)
                or label in ("// handlers.json", "// .vscode/settings.json")), (
            f"docs/descriptors.md: a JSON block starting {label!r} is checked by nothing; "
            "start it with '// NAME.TYPE.json', '// kernel_source: KIND', '// handlers.json' "
            "or '// .vscode/settings.json'")


def test_every_type_version_and_kind_has_an_example(tmp_path: Path) -> None:
    files = _files(tmp_path)
    forms: set[str] = set()
    for dtype, doc in files.values():
        kernels = ([k for k in doc["kernelDescriptors"] if isinstance(k, dict)]
                   if dtype == "kdp" else [doc] if dtype == "ukd" else [])
        forms.add(f"{dtype}-{doc['version']}")
        for k in kernels:
            forms.add(f"ukd-{k['version']}")
            forms.add(f"ukd-{k['version']}-{'sources' if 'sources' in k else 'kernel_source'}")
        if dtype == "udd" and "launches" in doc:
            forms.add("udd-launches")
        if "$schema" in doc:
            forms.add("$schema")
    want = {f"{t}-{v}" for t in TYPES for v in read_versions(t)}
    want |= {"ukd-1.0-kernel_source", "ukd-1.1-sources", "udd-launches", "$schema"}
    assert want <= forms, want - forms
    assert set(_kind_snippets(tmp_path)) == set(KINDS)


def test_descriptor_examples_match_the_shipped_schemas(tmp_path: Path) -> None:
    for rel, (dtype, doc) in _files(tmp_path).items():
        assert explain(doc, dtype) == [], rel
        assert is_valid(doc, dtype), rel


def test_descriptor_examples_load_as_one_tree(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The examples make one tree the runtime loads with no error, every file loaded,
    every whole-set rule passed; `ukdpack validate` accepts it."""
    files = _files(tmp_path)
    texts = {}
    for b in _blocks():
        m = FILE_LINE.match(b.label)
        if m:
            texts[m.group(1)] = b.text
    root = tmp_path / "tree"
    _write_tree(root, files, texts)
    dset = _runtime.load_shard(str(root), authored=True)
    assert _errors(dset, _runtime.check_set_rules(dset)) == []
    assert sorted(rel for rel, _, _ in dset.files) == sorted(files)
    assert main(["validate", str(root)]) == 0, capsys.readouterr()


def _wrapped(kind: str, source: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": f"kind-{kind}", "version": "1.0", "name": f"k.{kind}",
                           "priority": 0, "metadata": {}, "kernel_source": source}
    if kind == "hsaco":
        doc["arch"] = ["gfx90a"]
    return doc


@pytest.mark.parametrize("kind", KINDS)
def test_kind_example_matches_its_schema_and_the_loader(kind: str, tmp_path: Path) -> None:
    """Each kind's example as the source of a standalone UKD: the schema accepts it, and
    the authored loader too, except kpack, which it refuses (packed only)."""
    source = _kind_snippets(tmp_path)[kind]
    assert source["kind"] == kind
    doc = _wrapped(kind, source)
    assert explain(doc, "ukd") == []
    root = tmp_path / "tree"
    root.mkdir()
    # In a folder, as in the doc's tree: the kpack example's library is ../kpack/...
    rel = f"demo/k.{kind}.ukd.json"
    _write_tree(root, {rel: ("ukd", doc)}, {rel: json.dumps(doc)})
    errors = _errors(_runtime.load_shard(str(root), authored=True))
    if kind == "kpack":
        assert len(errors) == 1 and "kpack" in errors[0], errors
        assert _errors(_runtime.load_shard(str(root))) == []  # a shard's loader reads it
    else:
        assert errors == []


def test_handler_manifest_example_serves_the_example_dispatches(tmp_path: Path) -> None:
    [block] = [b for b in _blocks() if b.label == "// handlers.json"]
    path = tmp_path / "handlers.json"
    path.write_text(block.text, encoding="utf-8")
    handlers = load_handler_manifest(path).handlers
    udds = [doc for dtype, doc in _files(tmp_path).values() if dtype == "udd"]
    assert {d["dispatch_symbol"]: d.get("launches", []) for d in udds} == handlers


def test_vscode_settings_map_every_type_to_a_shipped_schema(tmp_path: Path) -> None:
    [block] = [b for b in _blocks() if b.label == "// .vscode/settings.json"]
    settings = _read(block.text, tmp_path)
    assert settings["files.associations"] == {f"*.{t}.json": "jsonc" for t in TYPES}
    mapped = {}
    for entry in settings["json.schemas"]:
        [match] = entry["fileMatch"]
        url = entry["url"]
        assert url.startswith("./third_party/ukdpack/"), url
        assert (REPO / url.removeprefix("./third_party/ukdpack/")).is_file(), url
        mapped[match] = Path(url).name
    assert mapped == {f"**/*.{t}.json": f"{t}.schema.json" for t in TYPES}


def _section(title_start: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("\n## " + title_start)
    end = text.find("\n## ", start + 1)
    return text[start:end]


def _first_table_fields(section: str) -> list[str]:
    """The fields of the first table of a section (its rows that start with a code span)."""
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(line)
    return [m.group(1) for m in (re.match(r"^\| `([^`]+)` \|", r) for r in table) if m]


@pytest.mark.parametrize("dtype", TYPES)
def test_field_table_lists_exactly_the_schema_fields(dtype: str) -> None:
    """Each type's table names every top-level field its schema sources know (any
    version), and no other; `$schema` and extension keys are told once, for all types."""
    known: set[str] = set()
    for version in read_versions(dtype):
        doc = json.loads((REPO / "schemas" / f"{dtype}-{version}.schema.json").read_text())
        # A field a version refuses (`"not": {}`, e.g. UKD 1.0 `sources`) is another's.
        known |= {f for f, sub in doc["properties"].items() if f != "$schema" and "not" not in sub}
    listed = _first_table_fields(_section(dtype.upper() + ":"))
    assert len(listed) == len(set(listed))
    assert set(listed) == known, set(listed) ^ known
