"""The launch helpers, reached from Python through the extension."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from ukdpack import _runtime


def _multi(order: tuple[str, ...] = ("produce", "consume")) -> dict[str, Any]:
    return {"id": "k", "version": "1.1", "name": "m", "priority": 0, "metadata": {},
            "sources": {name: {"kind": "hip", "source": "s.hip", "entry": f"e_{name}", "build": {}}
                        for name in order}}


def _single() -> dict[str, Any]:
    return {"id": "k", "version": "1.0", "name": "s", "priority": 0, "metadata": {},
            "kernel_source": {"kind": "hsaco", "file": "a.hsaco", "symbol": "f"}, "arch": ["gfx90a"]}


def test_launch_names_sorted_whatever_the_key_order() -> None:
    assert _runtime.launch_names_of(_multi(("produce", "consume"))) == ["consume", "produce"]
    assert _runtime.launch_names_of(_multi(("consume", "produce"))) == ["consume", "produce"]


def test_single_launch_kernel_has_empty_launch_set() -> None:
    assert _runtime.launch_names_of(_single()) == []


def test_accepts_json_text_with_comments() -> None:
    text = "// a kernel\n" + json.dumps(_multi())
    assert _runtime.launch_names_of(text) == ["consume", "produce"]


def test_single_launch_source() -> None:
    assert _runtime.single_launch_source(_single()) == _single()["kernel_source"]
    assert _runtime.single_launch_source(_multi()) is None


def test_all_launch_sources_asks_every_launch() -> None:
    seen: list[str] = []

    def is_hip(src: dict[str, Any]) -> bool:
        seen.append(src["entry"])
        return bool(src["kind"] == "hip")

    assert _runtime.all_launch_sources(_multi(), is_hip)
    assert sorted(seen) == ["e_consume", "e_produce"]
    assert not _runtime.all_launch_sources(_multi(), lambda s: s["entry"] == "e_produce")
    assert _runtime.all_launch_sources(_single(), lambda s: s["kind"] == "hsaco")
    assert not _runtime.all_launch_sources(_single(), lambda s: s["kind"] == "hip")


def test_malformed_kernel_raises_with_paths() -> None:
    bad = _multi()
    bad["sources"]["_x"] = bad["sources"]["produce"]
    with pytest.raises(ValueError, match=r"\$\.sources\._x: expected a launch name"):
        _runtime.launch_names_of(bad)
    with pytest.raises(ValueError, match="not valid JSON"):
        _runtime.launch_names_of("{nope")


def test_check_kernel_reports_rules_beyond_the_schema() -> None:
    mixed = _multi()
    mixed["sources"]["consume"] = {"kind": "hsaco", "file": "a.hsaco", "symbol": "c"}
    found = _runtime.check_kernel(mixed, "x.kdp.json", "$.kernelDescriptors[2]")
    messages = {(d["path"], d["message"]) for d in found}
    assert ("$.kernelDescriptors[2].sources",
            "all launches of a sources map take one kind, found hip {produce}, hsaco {consume}"
            ) in messages
    assert all(d["file"] == "x.kdp.json" and d["severity"] == "error" for d in found)
    assert _runtime.check_kernel(_multi()) == []


def test_arch_helpers() -> None:
    assert _runtime.bare_arch("gfx90a:sramecc+:xnack-") == "gfx90a"
    assert _runtime.is_arch_name("gfx1030") and not _runtime.is_arch_name("amd64")
    assert _runtime.target_runs_on("gfx11-generic", "gfx1100")
    assert not _runtime.target_runs_on("gfx1030", "gfx1100")


def test_document_launches_read_a_document_the_runtime_does_not_judge() -> None:
    multi = _multi(("produce", "consume"))
    assert _runtime.document_launches(multi, "$.kernelDescriptors[1]") == [
        ("consume", "$.kernelDescriptors[1].sources.consume", multi["sources"]["consume"]),
        ("produce", "$.kernelDescriptors[1].sources.produce", multi["sources"]["produce"])]
    single = _single()
    (only,) = _runtime.document_launches(single)
    assert only == (None, "$.kernel_source", single["kernel_source"])
    assert only[2] is single["kernel_source"]  # the very object, for rewriting tools
    # Legacy and broken forms are read as they stand: a null kernel_source gives way to
    # sources, a sources that is no mapping holds nothing, odd names are quoted.
    assert _runtime.document_launches({"kernel_source": None, "sources": {"a-b": 1}}) == [
        ("a-b", '$.sources["a-b"]', 1)]
    assert _runtime.document_launches({"sources": [1, 2]}) == []
    assert _runtime.document_launches({}) == []
    assert _runtime.document_form_version(multi) == "1.1"
    assert _runtime.document_form_version(single) == "1.0"
    assert _runtime.document_form_version({"sources": None}) == "1.1"  # the form, not its value


def _package() -> Path:
    """The source tree's python/ukdpack (what the checks below read)."""
    return Path(__file__).resolve().parents[2] / "python" / "ukdpack"


#: The keys a UKD holds its launches under: only the extension reads them.
_LAUNCH_KEYS = {"kernel_source", "sources"}


def _key_reads(tree: ast.AST) -> list[int]:
    """Lines where a launch key is read: any use of the name as a constant but as the key
    of a subscript assignment (a generator writing a document) or an argparse name."""
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            allowed.add(id(node.slice))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            allowed.update(id(a) for a in node.args)
    return sorted(node.lineno for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and node.value in _LAUNCH_KEYS
                  and id(node) not in allowed)


def test_no_module_outside_the_bindings_reads_launch_keys() -> None:
    """Python reads a kernel's launches through the extension's Kernel, Launch and Source
    views (or document_launches): no module names kernel_source or sources to read it."""
    package = _package()
    found = [f"{path.relative_to(package)}:{line}" for path in sorted(package.rglob("*.py"))
             for line in _key_reads(ast.parse(path.read_text(encoding="utf-8")))]
    assert found == []


def test_the_key_read_check_finds_reads() -> None:
    code = ('a = doc["kernel_source"]\nb = doc.get("sources")\nc = "sources" in doc\n'
            'doc["sources"] = {}\np.add_argument("sources")\nk == "kernel_source"\n')
    assert _key_reads(ast.parse(code)) == [1, 2, 3, 6]


def test_the_shard_tools_name_no_kind() -> None:
    """verify, desk-check and the shard reader ask what a kind does (tools/shard.py's
    helpers over the kinds table), never name one."""
    kinds = {k["name"] for k in _runtime.source_kinds()}
    tools = _package() / "tools"
    found = [f"{path.name}:{node.lineno}" for path in sorted(tools.glob("*.py"))
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Constant) and node.value in kinds]
    assert found == []


def test_the_shard_tools_recompute_no_finding_of_the_runtime() -> None:
    """Whether a launch's code loads (its archive holds the toc key, the bytes have the
    recorded digest) is the runtime's finding: no module of tools/ hashes (hashlib, the
    packer's digest helpers) or reads an archive entry's bytes (``archive.get``) to judge
    it again. test_verify's and test_deskcheck's damaged shards show the runtime's lines,
    one per finding."""
    tools = _package() / "tools"
    found = []
    for path in sorted(tools.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] in ("hashlib", "hmac") or n == "ukdpack.digest"
                   for n in names):
                found.append(f"{path.name}:{node.lineno} imports {', '.join(names)}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "get" \
                    and ast.unparse(node.func.value).split(".")[-1] == "archive":
                found.append(f"{path.name}:{node.lineno} reads {ast.unparse(node.func)}")
    assert found == []
