"""The JSON Schemas: valid Draft 2020-12, shipped in the package, each file usable on
its own with nothing fetched (what an editor or check-jsonschema does offline), the
bundles of their sources, and agreeing with the example tree and the runtime."""

from __future__ import annotations

import ast
import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomllib
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from schema_oracle import check, explain, is_valid, read_versions

from ukdpack import _runtime, schema, schema_bundle

DESCRIPTOR_TYPES = ("ukd", "kdp", "udd", "ued", "kmd", "umd", "uhd")

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", schema.schema_names())
def test_each_schema_is_valid_draft_2020_12(name: str) -> None:
    doc = schema.load_schema(name)
    Draft202012Validator.check_schema(doc)
    assert doc["$id"] == schema.SCHEMA_BASE + name


def test_every_type_and_version_has_a_schema() -> None:
    names = set(schema.schema_names())
    for dtype in DESCRIPTOR_TYPES:
        assert f"{dtype}.schema.json" in names
        for version in read_versions(dtype):
            assert f"{dtype}-{version}.schema.json" in names


SHIPPED = REPO / "python" / "ukdpack" / "schemas"
SOURCES = REPO / "schemas"
TYPE_TOKEN = re.compile(r"\.(" + "|".join(DESCRIPTOR_TYPES) + r")\.json$")


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                yield v
            else:
                yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def _no_retrieval(uri: str) -> Resource[Any]:
    pytest.fail(f"a shipped schema tried to retrieve {uri}")


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any socket connection or name lookup fails the test."""
    def refuse(*args: object, **kwargs: object) -> None:
        pytest.fail(f"network access: {args!r}")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def test_shipped_schemas_are_the_bundles_of_their_sources() -> None:
    assert schema_bundle.stale(SOURCES, SHIPPED) == [], (
        "run: python -m ukdpack.schema_bundle schemas python/ukdpack/schemas")
    assert set(schema.schema_names()) == {p.name for p in SHIPPED.glob("*.schema.json")}


@pytest.mark.parametrize("name", sorted(p.name for p in SHIPPED.glob("*.schema.json")))
def test_each_shipped_schema_refers_only_to_itself(name: str) -> None:
    doc = json.loads((SHIPPED / name).read_text(encoding="utf-8"))
    refs = list(_refs(doc))
    assert all(r.startswith("#/") for r in refs), [r for r in refs if not r.startswith("#/")]


def test_bundler_refuses_references_it_cannot_make_local() -> None:
    common = {"$defs": {"a": {"type": "string"}}}
    with pytest.raises(schema_bundle.BundleError, match="whole schema file"):
        schema_bundle.bundle({"common.schema.json": common,
                              "x.schema.json": {"$ref": "y.schema.json#/properties/z"},
                              "y.schema.json": {}})
    with pytest.raises(schema_bundle.BundleError, match="no definition 'b'"):
        schema_bundle.bundle({"common.schema.json": common,
                              "x.schema.json": {"$ref": "common.schema.json#/$defs/b"}})


def test_example_tree_validates_offline_with_plain_jsonschema(no_network: None) -> None:
    """What an editor does offline: each descriptor of descriptors/, comments stripped,
    against its type's shipped schema file alone, with a plain Draft 2020-12 validator
    that can retrieve nothing."""
    registry: Registry[Any] = Registry(retrieve=_no_retrieval)  # type: ignore[call-arg]
    seen = 0
    for path in sorted((REPO / "descriptors").rglob("*.json")):
        rel = path.relative_to(REPO / "descriptors")
        m = TYPE_TOKEN.search(path.name)
        if m is None or any(part.startswith(".") for part in rel.parts):
            continue
        doc, _, why = _runtime.read_json_file(str(path))  # the runtime's reader strips comments
        assert why is None, (rel, why)
        top = json.loads((SHIPPED / f"{m.group(1)}.schema.json").read_text(encoding="utf-8"))
        errors = [e.message for e in Draft202012Validator(top, registry=registry).iter_errors(doc)]
        assert errors == [], (rel, errors)
        seen += 1
    assert seen >= 15


def _runtime_schema_key_problems(dtype: str, doc: dict[str, Any], tmp: Path) -> list[tuple[str, str]]:
    """The runtime parser's errors at `$schema` for one top-level descriptor."""
    if dtype == "ukd":
        diags = _runtime.check_kernel(doc, "x.ukd.json", "$")
    elif dtype == "kdp":
        (tmp / "x.kdp.json").write_text(json.dumps(doc), encoding="utf-8")
        diags = _runtime.load_shard(str(tmp), authored=True).diagnostics
    else:
        diags = _runtime.check_descriptor(dtype, doc, f"x.{dtype}.json")
    return [(d["path"], d["message"]) for d in diags
            if d["severity"] == "error" and "$schema" in d.get("path", "")]


@pytest.mark.parametrize("dtype", DESCRIPTOR_TYPES)
def test_dollar_schema_string_is_accepted_at_the_top_of_every_type(dtype: str,
                                                                   tmp_path: Path) -> None:
    tree = REPO / "tests" / "corpus" / "ok_schema_key" / "tree"
    files = {t: f for f, t, _ in _runtime.load_shard(str(tree), authored=True).files}
    doc, _, _ = _runtime.read_json_file(str(tree / files[dtype]))
    assert isinstance(doc["$schema"], str)
    assert check(doc, dtype) == []
    assert _runtime_schema_key_problems(dtype, doc, tmp_path) == []
    bad = {**doc, "$schema": {"url": "x"}}
    want = [('$["$schema"]', "expected string, found object")]
    assert check(bad, dtype) == want
    assert _runtime_schema_key_problems(dtype, bad, tmp_path) == want


def test_dollar_schema_is_refused_on_an_inline_ukd() -> None:
    kernel = {"$schema": "ukd.schema.json", "id": "k", "version": "1.0", "name": "k",
              "priority": 0, "metadata": {},
              "kernel_source": {"kind": "hip", "source": "k.hip", "entry": "k", "build": {}}}
    kdp = {"id": "p", "version": "1.0", "name": "p", "arch": [], "matchers": [],
           "engine": None, "dispatch": None, "kernelDescriptors": [kernel]}
    want = [('$.kernelDescriptors[0]["$schema"]',
             "'$schema' belongs at the top of a descriptor file; an inline UKD takes none")]
    assert check(kdp, "kdp") == want
    got = _runtime.check_kernel(kernel, "p.kdp.json", "$.kernelDescriptors[0]")
    assert [(d["path"], d["message"]) for d in got if d["severity"] == "error"] == want


def test_messages_name_the_path_and_finding() -> None:
    doc = {"id": "u", "version": "1.0", "name": "d", "dispatch_symbol": 5, "extra": 1}
    assert check(doc, "udd") == [
        ("$.dispatch_symbol", "expected string, found integer 5"),
        ("$.extra", "unknown key 'extra'; extension keys start with 'x-' or '_'"),
    ]


def test_fast_and_wording_validators_agree_on_the_corpus() -> None:
    """jsonschema-rs gives the verdict, jsonschema the wording: never two verdicts."""
    seen = 0
    for path in sorted(p for p in (REPO / "tests" / "corpus").rglob("*.json") if p.is_file()):
        parts = path.name.split(".")
        dtype = parts[-2] if len(parts) >= 3 and parts[-2] in DESCRIPTOR_TYPES else None
        if dtype is None:
            continue
        doc, _, why = _runtime.read_json_file(str(path))
        if why is not None:
            continue
        assert is_valid(doc, dtype) == (explain(doc, dtype) == []), path
        seen += 1
    assert seen > 300


SLOT_CASES = sorted(p.parent.name for p in (REPO / "tests" / "corpus").glob("slot_*/expect.json"))
#: Slot cases whose refusal no JSON Schema states, with why.
BEYOND_SCHEMA = {
    "slot_name_repeated": "a name unique across list items: a schema compares whole items only",
}


@pytest.mark.parametrize("case", SLOT_CASES)
def test_schemas_and_the_runtime_parser_agree_on_the_slot_cases(case: str) -> None:
    """Each descriptor of a slot case: the shipped schema refuses it exactly where the
    runtime's parser does (its SCHEMA errors), at the same paths with the same words."""
    tree = REPO / "tests" / "corpus" / case / "tree"
    dset = _runtime.load_shard(str(tree), authored=True)
    runtime: dict[str, list[tuple[str, str]]] = {}
    for d in dset.diagnostics:
        if d["severity"] == "error" and d["code"] == _runtime.Code.SCHEMA:
            runtime.setdefault(d["file"], []).append((d["path"], d["message"]))
    seen = 0
    for rel, dtype, _ in dset.files:
        doc, _, why = _runtime.read_json_file(str(tree / rel))
        assert why is None, (case, rel, why)
        want = sorted(runtime.get(rel, []))
        if case in BEYOND_SCHEMA and want:
            assert is_valid(doc, dtype), (case, rel)
            continue
        # The schema words a refusal as the parser does, up to the parser's own tail.
        got = check(doc, dtype)
        assert [p for p, _ in got] == [p for p, _ in want], (case, rel, got, want)
        for (_, schema_says), (_, parser_says) in zip(got, want, strict=True):
            assert parser_says.startswith(schema_says.split(" (")[0]), (case, rel, schema_says, parser_says)
        seen += 1
    assert seen


def test_pack_leaves_dollar_schema_out_and_the_shard_tools_agree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`$schema` is authored-only: no packed descriptor carries it, and verify, which
    compares the shard with the root field by field, accepts the shard."""
    from ukdpack.cli import main

    monkeypatch.setenv("HIP_PLATFORM", "amd")
    tree = REPO / "tests" / "corpus" / "ok_schema_key" / "tree"
    out = tmp_path / "out"
    assert main(["pack", "--source-root", str(tree), "--out-root", str(out), "--arch", "gfx90a",
                 "--plain", "--jobs", "1", "--cache-dir", str(tmp_path / "cache")]) == 0
    shard = out / "gfx90a"
    packed = sorted(p.relative_to(shard).as_posix() for p in shard.rglob("*.json"))
    assert packed == ["a.kdp.json", "eng.kmd.json", "eng.ued.json", "eng.umd.json",
                      "h/order.uhd.json", "one.udd.json", "s/one.ukd.json"]
    for rel in packed:
        assert "$schema" not in json.loads((shard / rel).read_text(encoding="utf-8")), rel
    capsys.readouterr()
    assert main(["verify", str(shard), "--source-root", str(tree)]) == 0, capsys.readouterr()


#: The schema oracle's dependencies: test extras, never the packer's.
ORACLE_DEPS = ("jsonschema", "jsonschema_rs", "referencing")


def test_the_package_needs_no_schema_validator() -> None:
    """The packer judges descriptors with the runtime alone: no module of the package
    imports a JSON Schema validator, and the runtime dependencies (which the CMake
    configure check reads) name none; the test extra carries them."""
    imports: list[str] = []
    for path in sorted((REPO / "python" / "ukdpack").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            imports += [f"{path.name}: {n}" for n in names if n.split(".")[0] in ORACLE_DEPS]
    assert imports == []
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not {_dist(r) for r in project["dependencies"]} & set(ORACLE_DEPS)
    assert {"jsonschema", "jsonschema_rs"} <= {_dist(r) for r in project["optional-dependencies"]["test"]}


def _dist(requirement: str) -> str:
    """A requirement's distribution name, as an import name ('jsonschema-rs>=1' -> 'jsonschema_rs')."""
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].replace("-", "_")


def test_read_versions_are_the_loaders_limits() -> None:
    assert _runtime.read_versions("ukd") == ["1.0", "1.1"]
    assert _runtime.read_versions("kdp") == ["1.0", "1.1"]
    assert _runtime.read_versions("ued") == ["1.0", "1.1"]
    assert _runtime.read_versions("uhd") == ["1.0", "1.1"]
    assert _runtime.read_versions("kmd") == ["1.0"]
    with pytest.raises(ValueError, match="unknown descriptor type 'xyz'"):
        _runtime.read_versions("xyz")
