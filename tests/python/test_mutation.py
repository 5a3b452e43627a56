"""Mutation tests: damaged descriptor trees and packed shards only ever get reports.

Hypothesis takes a valid corpus tree (or packed shard), breaks one file — deletes,
replaces or retypes a JSON value, inserts an unknown key, breaks a reference,
truncates the file or splices in bad UTF-8 — and checks that ``ukdpack validate``
answers with exit 0 or 1 and ``ukdpack: error:`` lines, never a traceback, and that
the C++ loader either loads or raises the extension's own error types.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ukdpack import _runtime
from ukdpack.cli import main

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
TREES = ("ok_minimal", "ok_all_types", "ok_multi_launch_udd", "ok_standalone_ukd",
         "ok_hsaco_bare", "slot_ok")
SHARDS = ("shard_ok", "shard_ok_multi_launch")
# Derandomized so a run is reproducible; the example budget keeps both under a minute.
SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
# The runtime's refusals; anything else escaping the extension is a bug.
RUNTIME_ERRORS = (_runtime.RuntimeCheckError, _runtime.KpackError, _runtime.CodeObjectError)

JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                         st.floats(allow_nan=False), st.text(max_size=12))
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=6)


def _slots(doc: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key) of ``doc``, so one value can be picked and changed."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append((doc, k))
            _slots(v, out)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.append((doc, i))
            _slots(v, out)
    return out


def _retyped(value: Any) -> Any:
    # A value of another JSON type, the commonest authoring slip.
    if isinstance(value, str):
        return [value]
    if isinstance(value, bool):
        return "true" if value else 0
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return {"0": value[0]} if value else None
    return list(value.values()) if isinstance(value, dict) else True


@st.composite
def _mutation(draw: st.DrawFn, files: list[str]) -> tuple[str, str, Any]:
    name = draw(st.sampled_from(files))
    op = draw(st.sampled_from(["delete", "replace", "retype", "unknown_key", "break_ref",
                               "truncate", "bad_utf8"]))
    arg: Any
    if op == "replace":
        arg = (draw(st.integers(0, 10**6)), draw(JSON_VALUES))
    elif op == "unknown_key":
        arg = (draw(st.integers(0, 10**6)), draw(st.text(min_size=1, max_size=10)),
               draw(JSON_VALUES))
    elif op == "bad_utf8":
        arg = (draw(st.integers(0, 10**6)),
               draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88"])))
    else:
        arg = draw(st.integers(0, 10**6))
    return name, op, arg


def _apply(path: Path, op: str, arg: Any) -> None:
    """Break ``path`` in the way ``op`` says; ``arg`` picks where and with what."""
    data = path.read_bytes()
    if op == "truncate":
        path.write_bytes(data[: arg % max(len(data), 1)])
        return
    if op == "bad_utf8":
        at, junk = arg
        at %= len(data) + 1
        path.write_bytes(data[:at] + junk + data[at:])
        return
    doc = json.loads(data)
    slots = _slots(doc, [])
    if op == "unknown_key":
        objects = [doc, *(c[k] for c, k in slots if isinstance(c[k], dict))]
        pick, key, value = arg
        target = objects[pick % len(objects)]
        target[key if key not in target else key + "_x"] = value
    elif not slots:
        return
    else:
        where = arg[0] if op == "replace" else arg
        container, key = slots[where % len(slots)]
        if op == "delete":
            del container[key]
        elif op == "replace":
            container[key] = arg[1]
        elif op == "retype":
            container[key] = _retyped(container[key])
        else:  # break_ref: a reference (or id) that names nothing
            value = container[key]
            container[key] = (value + "-gone") if isinstance(value, str) else "nope-404"
    path.write_text(json.dumps(doc, indent=1))


def _json_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.json") if p.is_file())


def _validate(tree: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["validate", str(tree)])
    return code, out.getvalue() + err.getvalue()


@contextlib.contextmanager
def _mutated_copy(source: Path, mutation: tuple[str, str, Any]) -> Iterator[Path]:
    """A scratch copy of a corpus tree or shard with ``mutation`` (file, op, arg) applied."""
    name, op, arg = mutation
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / source.name
        shutil.copytree(source, copy)
        _apply(copy / name, op, arg)
        yield copy


@st.composite
def _tree_mutation(draw: st.DrawFn) -> tuple[str, tuple[str, str, Any]]:
    case = draw(st.sampled_from(TREES))
    return case, draw(_mutation(_json_files(CORPUS / case / "tree")))


@SETTINGS
@given(_tree_mutation())
def test_validate_only_reports_on_mutated_trees(m: tuple[str, tuple[str, str, Any]]) -> None:
    case, mutation = m
    with _mutated_copy(CORPUS / case / "tree", mutation) as tree:
        code, text = _validate(tree)
    assert code in (0, 1), text  # 2 is "internal error": a bug, never bad input
    assert "Traceback" not in text and "internal error" not in text, text
    errors = [ln for ln in text.splitlines() if ln.startswith("ukdpack: error: ")]
    # Exit 1 always comes with the reasons; exit 0 never carries an error line.
    assert bool(errors) == (code == 1), text


def test_mutations_do_break_trees() -> None:
    """Guards the generator: a retyped id and a truncation must be refused, so the
    property above is not passing on mutations that change nothing."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        shutil.copytree(CORPUS / "ok_minimal" / "tree", tree)
        _apply(tree / "one.udd.json", "retype", 0)
        code, text = _validate(tree)
        assert code == 1 and "one.udd.json: $.id: expected string, found array" in text, text
        shutil.copy(CORPUS / "ok_minimal" / "tree" / "one.udd.json", tree / "one.udd.json")
        _apply(tree / "a.kdp.json", "truncate", 50)
        code, text = _validate(tree)
        assert code == 1 and "a.kdp.json: not valid JSON" in text, text


@st.composite
def _shard_mutation(draw: st.DrawFn) -> tuple[str, tuple[str, str, Any]]:
    case = draw(st.sampled_from(SHARDS))
    return case, draw(_mutation(_json_files(CORPUS / case / "shard")))


def _load_everything(shard: Path) -> list[str]:
    """Load, build a state manager, and load every kept launch; the runtime's own
    refusals are returned as text, anything else propagates and fails the test."""
    messages: list[str] = []
    dset = _runtime.load_shard(str(shard))
    messages += [d["message"] for d in dset.diagnostics]
    sm = _runtime.StateManager(dset, handlers=_runtime.stub_handlers(dset), arch="gfx90a")
    messages += [d["reason"] for d in sm.dropped()]
    for k in sm.kept():
        for launch in (k["launches"] or [None]) if k["packed"] else []:
            try:
                sm.load_launch_code(k["kernel_id"], launch, "gfx90a")
            except RUNTIME_ERRORS as e:
                messages.append(str(e))
    return messages


@SETTINGS
@given(_shard_mutation())
def test_loader_only_reports_on_mutated_shards(m: tuple[str, tuple[str, str, Any]]) -> None:
    case, mutation = m
    with _mutated_copy(CORPUS / case / "shard", mutation) as shard:
        try:
            messages = _load_everything(shard)
        except RUNTIME_ERRORS as e:
            messages = [str(e)]
    assert all(isinstance(msg, str) and msg for msg in messages), messages


def test_shard_mutations_are_reported() -> None:
    """A broken digest and a cut-off KDP must surface as the runtime's messages."""
    with tempfile.TemporaryDirectory() as tmp:
        shard = Path(tmp) / "shard"
        shutil.copytree(CORPUS / "shard_ok" / "shard", shard)
        doc = json.loads((shard / "a.kdp.json").read_text())
        doc["kernelDescriptors"][0]["kernel_source"]["sha256"] = "1" * 64
        (shard / "a.kdp.json").write_text(json.dumps(doc))
        assert any("has sha256" in m for m in _load_everything(shard))
        _apply(shard / "a.kdp.json", "truncate", 40)
        assert any("not valid JSON" in m for m in _load_everything(shard))
