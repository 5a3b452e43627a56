"""The packer's toc-key rule as ``validate`` runs it: over the runtime's set, without a
model of every kernel, with the keys and findings the models give."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pack_support import write_json

from ukdpack import _runtime
from ukdpack.authored import tockey
from ukdpack.authored.validate import validate

COLLISION = _runtime.Code.TOC_KEY_COLLISION


def _kernel(kid: str, name: str, source: str, entry: str = "k") -> dict[str, Any]:
    return {"id": kid, "version": "1.0", "name": name, "priority": 0,
            "metadata": {"dtype": name},
            "kernel_source": {"kind": "hip", "source": source, "entry": entry, "build": {}}}


def _tree(root: Path) -> Path:
    """Two sources named k.hip in two folders (the same stem, other inputs: other toc
    keys), a multi-launch kernel, and a standalone UKD reached from the pack."""
    write_json(root / "eng.kmd.json", {"id": "kmd-1", "version": "1.0", "name": "md",
                                       "fields": [{"name": "dtype", "type": "string"}]})
    write_json(root / "eng.ued.json", {"id": "ued-1", "version": "1.0", "name": "t:e",
                                       "metadata": "kmd-1"})
    write_json(root / "eng.umd.json", {"id": "umd-1", "version": "1.0", "name": "m",
                                       "scope": "graph", "match_symbol": "m"})
    write_json(root / "one.udd.json", {"id": "udd-1", "version": "1.0", "name": "d",
                                       "dispatch_symbol": "sym"})
    write_json(root / "two.udd.json", {"id": "udd-2", "version": "1.1", "name": "d2",
                                       "dispatch_symbol": "sym2",
                                       "launches": ["produce", "consume"]})
    for folder in ("a", "b"):
        (root / folder).mkdir()
        (root / folder / "k.hip").write_text('extern "C" __global__ void k() {}\n')
    write_json(root / "b" / "s.ukd.json", _kernel("ukd-s", "s", "k.hip"))
    write_json(root / "p.kdp.json", {
        "id": "kdp-1", "version": "1.0", "name": "p", "arch": [], "matchers": ["umd-1"],
        "engine": "ued-1", "dispatch": "udd-1",
        "kernelDescriptors": [_kernel("ukd-a", "a", "a/k.hip"), "ukd-s",
                              _kernel("ukd-c", "c", "a/k.hip", entry="k2")]})
    multi = {"id": "ukd-m", "version": "1.1", "name": "m", "priority": 0,
             "metadata": {"dtype": "m"},
             "sources": {"produce": {"kind": "hip", "source": "b/k.hip", "entry": "p",
                                     "build": {"defines": {"X": 1}}},
                         "consume": {"kind": "hip", "source": "a/k.hip", "entry": "c",
                                     "build": {}}}}
    write_json(root / "q.kdp.json", {
        "id": "kdp-2", "version": "1.0", "name": "q", "arch": [], "matchers": ["umd-1"],
        "engine": "ued-1", "dispatch": "udd-2", "kernelDescriptors": [multi]})
    return root


def test_validate_makes_no_models_and_keys_as_the_models_do(tmp_path: Path) -> None:
    result = validate(_tree(tmp_path / "t"))
    assert result.valid, [p.line() for p in result.problems]
    assert "descriptors" not in result.tree.__dict__  # the rules read the runtime's set
    assert result.summary() == "valid: 8 descriptors, 2 packs, 4 kernels"
    keys = dict(result.tree.toc_keys)
    # The models, made now, give each launch the key the rule took.
    launches = [(m.ukd, src) for m in result.tree.members for _, src in m.ukd.launches]
    assert len(launches) == len(keys) == 5
    for ukd, src in launches:
        rel = ukd.file_of(src)
        assert keys[(ukd.file, src.json_path)] == tockey.toc_key(src.kind, src.fields, rel)
    assert result.summary() == "valid: 8 descriptors, 2 packs, 4 kernels"  # counted anew


def test_a_collision_names_the_first_kernel_and_where_it_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every identity digests alike: launches built from other inputs now share a key.
    monkeypatch.setattr(tockey, "sha256_hex", lambda data: "0" * 64)
    result = validate(_tree(tmp_path / "t"))
    found = [p for p in result.problems if p.code == COLLISION]
    first = ("kernel 'a' (id ukd-a) (p.kdp.json: $.kernelDescriptors[0]), built from other "
             "inputs (a collision of the 48-bit digest); change either kernel's build inputs")
    assert [(p.file, p.path, p.severity, p.message) for p in found] == [
        ("b/s.ukd.json", "$.kernel_source", "error",
         f"toc key 'k_000000000000' is also the toc key of {first}"),
        ("q.kdp.json", "$.kernelDescriptors[0].sources.produce", "error",
         f"toc key 'k_000000000000' is also the toc key of {first}"),
    ]
    # Kernel 'c' and the consume launch build a/k.hip as 'a' does: the same inputs.
    assert not result.valid
    assert result.summary() == "invalid: 2 errors (8 descriptors, 2 packs, 4 kernels)"


_FILES = ["k.kdp.json", "e/k.kdp.json", "e/f/k.kdp.json", "./k.kdp.json", "e//k.kdp.json",
          "e/../k.kdp.json", "/abs/k.kdp.json", ".e/k.kdp.json", "e./k.kdp.json"]
_NAMES = ["a.o", "sub/a.o", "sub/deep/a.o", "./a.o", "sub/./a.o", "../a.o", "sub/../a.o",
          "sub/..", "sub/.", "..", ".", "", "/abs/a.o", "//a.o", "a//b.o", "a.o/", ".hidden",
          "..dots", "...", "sub/.hidden", "a\\b.o", "é.o", "with space.o"]


@pytest.mark.parametrize("file", _FILES)
def test_joined_is_the_normalized_join(file: str) -> None:
    """``joined`` spells a plain name's join without ``normpath``: the same path as the
    normalized join, for every corner ('.', '..', empty components, absolute names)."""
    import posixpath

    from ukdpack.authored.model import joined

    for name in _NAMES:
        want = posixpath.normpath(posixpath.join(posixpath.dirname(file), name))
        assert joined(file, name) == want, (file, name)


@pytest.mark.parametrize("file", _FILES)
def test_a_launchs_stem_read_off_its_name_is_its_joined_paths(file: str) -> None:
    """The rule reads a prebuilt object's stem off the name as written, not the joined
    path: the same stem for every corner of the name ('.', '..', empty, absolute)."""
    from ukdpack.authored.model import joined

    for name in [*_NAMES, "objects/009/obj018400.hsaco", "a/b.c.d", "sub/..dots.o"]:
        want = tockey.stem_of("hsaco", {"file": name}, joined(file, name))
        # the runtime's view is read only on the joined path's way, which needs none here
        no_view: Any = None
        assert tockey.launch_stem(file, "hsaco", name, no_view) == want, (file, name)


def test_stem_of_is_the_file_name_less_its_extension() -> None:
    """A prebuilt object's stem is its file's name less the extension, as
    ``posixpath.splitext(posixpath.basename(...))`` gives it (a leading dot is no
    extension), with what a toc key may not hold replaced."""
    import posixpath

    for rel in ["objects/009/obj018400.hsaco", "a.o", "sub/.hidden", "sub/..dots.o", "x",
                "a/b.c.d", "a/b c.o", "é.o", "a/.o", "a/...", "a/.b.o"]:
        base = posixpath.splitext(posixpath.basename(rel))[0]
        want = tockey._NOT_STEM.sub("_", base) or "object"
        assert tockey.stem_of("hsaco", {"file": rel}, rel) == want, rel


def test_launches_of_one_unit_share_a_key_only_when_built_alike(tmp_path: Path) -> None:
    """The rule keys each distinct identity once (``tockey.identity_inputs``): kernels of
    one unit with other symbols share its key; builds that differ only by a value's type
    (1, true, "1", 1.0) or a flag's order do not, and every key is the models' own."""
    root = _tree(tmp_path / "t")
    builds: list[dict[str, Any]] = [
        {}, {"defines": {"X": 1}}, {"defines": {"X": True}}, {"defines": {"X": "1"}},
        {"defines": {"X": 1.0}}, {"flags": ["-O3", "-g"]}, {"flags": ["-g", "-O3"]},
        {"defines": {"X": 1, "Y": 2}}, {"defines": {"Y": 2, "X": 1}}]
    kernels = []
    for i, build in enumerate(builds):
        for entry in ("k", "k2"):
            kernel = _kernel(f"ukd-u{i}{entry}", f"u{i}{entry}", "a/k.hip", entry=entry)
            kernel["kernel_source"]["build"] = build
            kernels.append(kernel)
    write_json(root / "u.kdp.json", {
        "id": "kdp-3", "version": "1.0", "name": "u", "arch": [], "matchers": ["umd-1"],
        "engine": "ued-1", "dispatch": "udd-1", "kernelDescriptors": kernels})
    result = validate(root)
    assert result.valid, [p.line() for p in result.problems]
    keys = dict(result.tree.toc_keys)
    for m in result.tree.members:
        for _, src in m.ukd.launches:
            want = tockey.toc_key(src.kind, src.fields, m.ukd.file_of(src))
            assert keys[(m.ukd.file, src.json_path)] == want
    unit = [keys[("u.kdp.json", f"$.kernelDescriptors[{i}].kernel_source")]
            for i in range(len(kernels))]
    assert unit[0::2] == unit[1::2]  # the symbol is no part of the object
    # {} is the build of a/k.hip in p.kdp.json too; the defines' order is normalized.
    assert len(set(unit[0::2])) == len(builds) - 1
    assert unit[14] == unit[16]


def test_no_kind_keys_its_object_by_the_symbol() -> None:
    """What ``identity_inputs`` leaves out: every kind's toc key is the same whichever
    symbol a launch names (a kind whose key read it would need it kept there)."""
    from ukdpack.authored.kinds import KINDS

    sample = {"source": "k.hip", "file": "k.hsaco", "build": {"defines": {"X": 1}},
              "module": "m", "function": "f", "spec": {"n": 1}}
    checked = []
    for k in KINDS.values():
        if k.identity is None or k.symbol_field is None:
            continue
        keys = {tockey.toc_key(k.name, {**sample, k.symbol_field: symbol}, "a/k.x")
                for symbol in ("k1", "k2")}
        assert len(keys) == 1, k.name
        assert tockey.identity_inputs(k.name, {**sample, k.symbol_field: "k1"}, "a/k.x") == \
            tockey.identity_inputs(k.name, {**sample, k.symbol_field: "k2"}, "a/k.x")
        checked.append(k.name)
    assert {"hip", "hsaco"} <= set(checked)


def test_a_prebuilt_identity_is_encoded_as_the_canonical_form() -> None:
    """The toc key's digest of a prebuilt object's identity, spelled directly, is taken
    over the very bytes ``canonical_json`` gives (a changed byte changes every key)."""
    from ukdpack.digest import canonical_json

    names = [*_NAMES, 'q"uote', "back\\slash", "tab\tnew\nline", "\x00\x1f\x7f", "é/ü.o",
             "\u2028\u2029", "😀.co", "</script>"]
    for kind_name in ("hsaco", "co", 'k"ind'):
        for name in names:
            ident = {"kind": kind_name, "file": name}
            assert tockey._identity_json(ident) == canonical_json(ident), (kind_name, name)
    # anything else takes the general encoder
    for other in ({"kind": "hsaco", "file": None}, {"kind": "hsaco", "file": 1},
                  {"kind": "hip", "source": "a.hip", "build": {"defines": {}, "flags": []}},
                  {"file": "a", "kinds": "b"}):
        assert tockey._identity_json(other) == canonical_json(other), other
