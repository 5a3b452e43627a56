"""``ukdpack migrate``: each legacy construct rewritten into today's form (and the result
validates), what is refused, and every byte the rewrite does not touch kept."""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pack_support import copy_example, read_json, run_pack, write_json

from ukdpack import _runtime, jsonpath
from ukdpack.authored.migrate import plan
from ukdpack.cli import main

KMD_ID = "00000000-0000-4000-8000-000000000001"
UDD_ID = "00000000-0000-4000-8000-000000000002"
UED_ID = "00000000-0000-4000-8000-000000000003"
UHD_ID = "00000000-0000-4000-8000-000000000004"
KDP_ID = "00000000-0000-4000-8000-000000000005"
UKD_ID = "00000000-0000-4000-8000-000000000006"
PACK2_ID = "00000000-0000-4000-8000-000000000007"
SOLO_ID = "00000000-0000-4000-8000-000000000008"
ROCKE_ID = "00000000-0000-4000-8000-000000000009"

KMD = f"""// fields every kernel fills
{{
  "id": "{KMD_ID}",
  "version": "1.0",
  "name": "meta",
  "revision": "1.0",
  "fields": []
}}
"""
UDD = f"""{{
  "id": "{UDD_ID}",
  "version": "1.0",
  "name": "d",
  "dispatch_symbol": "sym_d"
}}
"""
LEGACY_UED = f"""// the engine
{{
  "id": "{UED_ID}",
  "version": "1.0",
  "name": "ex:engine",
  "metadata": "{KMD_ID}", // the KMD
  "heuristic": "{UHD_ID}",
  "revision": "2.1"
}}
"""
LEGACY_UHD = f"""{{
  "id": "{UHD_ID}",
  "version": "1.0",
  "name": "rank", // ranks kernels
  "kind": "native",
  "payload": "rank_kernels"
}}
"""
# A pack without arch; its inline kernel without version. The hip source is an escape test too.
LEGACY_KDP = f"""// pack a
{{
  "id": "{KDP_ID}",
  "version": "1.0",
  "name": "a",
  "engine": "{UED_ID}", /* keep me */
  "dispatch": "{UDD_ID}",
  "matchers": [],
  "kernelDescriptors": [
    {{
      "id": "{UKD_ID}",
      "name": "a.f32", // the f32 one
      "priority": 0,
      "kernel_source": {{"kind": "hip", "source": "kernels/a.hip", "entry": "a_f32", "build": {{}}}},
      "metadata": {{}}
    }}
  ]
}}
"""


def hsaco_kdp(arch: str, solo: bool = True) -> str:
    """A pack naming ``arch`` with an inline hsaco_file kernel and a standalone one."""
    refs = f',\n    "{SOLO_ID}"' if solo else ""
    return f"""{{
  "id": "{PACK2_ID}",
  "version": "1.0",
  "name": "p",
  "arch": {arch},
  "engine": null,
  "dispatch": null,
  "matchers": [],
  "kernelDescriptors": [
    {{
      "id": "00000000-0000-4000-8000-00000000000a",
      "version": "1.0",
      "name": "p.inline",
      "metadata": {{}},
      "priority": 0,
      "kernel_source": {{
        "kind": "hsaco_file", // prebuilt
        "code_object_file": "objects/p.hsaco",
        "code_object_symbol": "p_inline"
      }}
    }}{refs}
  ]
}}
"""


SOLO_UKD = f"""// a standalone prebuilt kernel
{{
  "id": "{SOLO_ID}",
  "version": "1.0",
  "name": "p.solo",
  "metadata": {{}},
  "priority": 0,
  "kernel_source": {{"kind": "hsaco_file", "code_object_file": "objects/p.hsaco", "code_object_symbol": "p_solo"}}
}}
"""


def rocke_kdp(kind: str) -> str:
    return f"""{{
  "id": "{ROCKE_ID}",
  "version": "1.0",
  "name": "r",
  "arch": ["gfx90a"],
  "engine": null,
  "dispatch": null,
  "matchers": [],
  "kernelDescriptors": [
    {{"id": "00000000-0000-4000-8000-00000000000b", "version": "1.0", "name": "r.gemm", "metadata": {{}}, "priority": 0,
      "kernel_source": {{"kind": "{kind}", "recipe": "gemm.yaml"}}}}
  ]
}}
"""


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text)
    return root


def base() -> dict[str, str | bytes]:
    """What every fixture tree holds: a KMD, a UDD, the kernels' files and a sidecar."""
    return {"meta.kmd.json": KMD, "d.udd.json": UDD, "kernels/a.hip": "// a\n",
            "objects/p.hsaco": b"\x7fELF-not-really\x00\xff", "objects/p.hsaco.dvc": "outs: []\n",
            "README.txt": "not a descriptor\n"}


def engine_tree(root: Path) -> Path:
    return write(root, {**base(), "e.ued.json": LEGACY_UED, "h.uhd.json": LEGACY_UHD,
                        "a.kdp.json": LEGACY_KDP})


def migrate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["migrate", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def doc(path: Path) -> object:
    value, _, message = _runtime.read_json_file(str(path))
    assert message is None, message
    return value


def validate_rc(root: Path, capsys: pytest.CaptureFixture[str]) -> int:
    rc = main(["validate", str(root)])
    capsys.readouterr()
    return rc


def test_ued_heuristic_becomes_sort_kernel_catalog(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    root = engine_tree(tmp_path / "old")
    rc, out, err = migrate(capsys, str(root), "--out", str(tmp_path / "new"))
    assert rc == 0, out + err
    text = (tmp_path / "new/e.ued.json").read_text()
    assert text == LEGACY_UED.replace(f'"heuristic": "{UHD_ID}"',
                                      f'"sort_kernel_catalog": {{"default": "{UHD_ID}"}}')
    assert '"metadata": "' + KMD_ID + '", // the KMD' in text  # a comment beside it survives
    assert "rewrote e.ued.json: heuristic rewritten as sort_kernel_catalog.default" in out
    assert validate_rc(tmp_path / "new", capsys) == 0


def test_uhd_kind_native_becomes_adapter(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    root = engine_tree(tmp_path / "old")
    rc, _, _ = migrate(capsys, str(root), "--out", str(tmp_path / "new"))
    assert rc == 0
    text = (tmp_path / "new/h.uhd.json").read_text()
    assert '"name": "rank", // ranks kernels\n' in text
    assert ('"adapter": "native",\n  "objective": "max",\n'
            '  "native": {"symbol": "rank_kernels"}\n}') in text
    d = doc(tmp_path / "new/h.uhd.json")
    assert isinstance(d, dict)
    assert list(d) == sorted(d)  # the reader sorts; the text order is checked above
    assert d["id"] == UHD_ID and "kind" not in d and "payload" not in d


def test_kdp_arch_and_inline_version_added(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    root = engine_tree(tmp_path / "old")
    rc, out, _ = migrate(capsys, str(root), "--out", str(tmp_path / "new"))
    assert rc == 0
    text = (tmp_path / "new/a.kdp.json").read_text()
    assert '  "name": "a",\n  "arch": [],\n  "engine"' in text
    assert f'"id": "{UKD_ID}",\n      "version": "1.0",\n      "name": "a.f32", // the f32 one' in text
    assert f'"engine": "{UED_ID}", /* keep me */' in text
    assert "rewrote a.kdp.json: arch added, 1 kernel's version added" in out
    # Key order of untouched members: the text differs from the old only by the inserts.
    old = LEGACY_KDP
    assert text.replace('\n  "arch": [],', "").replace('\n      "version": "1.0",', "") == old


def test_untouched_files_are_copied_byte_for_byte(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    root = engine_tree(tmp_path / "old")
    rc, _, _ = migrate(capsys, str(root), "--out", str(tmp_path / "new"))
    assert rc == 0
    for rel in ("meta.kmd.json", "d.udd.json", "kernels/a.hip", "objects/p.hsaco",
                "objects/p.hsaco.dvc", "README.txt"):
        assert (tmp_path / "new" / rel).read_bytes() == (root / rel).read_bytes(), rel
    assert (root / "e.ued.json").read_text() == LEGACY_UED  # --out leaves ROOT alone


def test_hsaco_file_becomes_hsaco_with_the_pack_arch(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    root = write(tmp_path / "old", {**base(), "p.kdp.json": hsaco_kdp('["gfx90a"]'),
                                    "s.ukd.json": SOLO_UKD})
    rc, out, err = migrate(capsys, str(root), "--out", str(tmp_path / "new"))
    assert rc == 0, out + err
    text = (tmp_path / "new/p.kdp.json").read_text()
    assert ('"name": "p.inline",\n      "arch": ["gfx90a"],\n      "metadata": {},\n      "priority": 0,\n      "kernel_source": {\n'
            '        "kind": "hsaco", // prebuilt\n        "file": "objects/p.hsaco",\n'
            '        "symbol": "p_inline"\n') in text
    solo = (tmp_path / "new/s.ukd.json").read_text()
    assert ('"name": "p.solo",\n  "arch": ["gfx90a"],\n  "metadata": {},\n  "priority": 0,\n  "kernel_source": {"kind": "hsaco", '
            '"file": "objects/p.hsaco", "symbol": "p_solo"}') in solo
    assert "rewrote p.kdp.json: 1 hsaco_file source rewritten as hsaco" in out
    assert "rewrote s.ukd.json: hsaco_file source rewritten as hsaco" in out
    assert validate_rc(tmp_path / "new", capsys) == 0


def test_hsaco_file_with_an_empty_pack_arch_is_refused(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    root = write(tmp_path / "old", {**base(), "p.kdp.json": hsaco_kdp("[]"),
                                    "s.ukd.json": SOLO_UKD})
    rc, _, err = migrate(capsys, str(root), "--out", str(tmp_path / "new"))
    assert rc == 1
    lines = err.splitlines()
    assert any(ln.startswith("ukdpack: error: p.kdp.json: $.kernelDescriptors[0]: kernel "
                             "'p.inline' has a hsaco_file source and no arch") for ln in lines), err
    assert any(ln.startswith("ukdpack: error: s.ukd.json: $: kernel 'p.solo'") for ln in lines)
    assert not (tmp_path / "new").exists() or not any((tmp_path / "new").iterdir())


@pytest.mark.parametrize("kind", ["rocke", "rocke_recipe", "rocke_builder"])
def test_rocke_kinds_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 kind: str) -> None:
    root = write(tmp_path / "old", {**base(), "r.kdp.json": rocke_kdp(kind)})
    rc, _, err = migrate(capsys, str(root), "--in-place")
    assert rc == 1
    assert (f"ukdpack: error: r.kdp.json: $.kernelDescriptors[0].kernel_source.kind: kernel "
            f"'r.gemm' uses the rocKE source kind '{kind}'") in err
    assert "'builder' kernel" in err
    assert (root / "r.kdp.json").read_text() == rocke_kdp(kind)  # nothing written


def test_in_place_rewrites_only_the_files_that_change(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    root = engine_tree(tmp_path / "old")
    before = {rel: os.stat(root / rel).st_ino for rel in ("meta.kmd.json", "e.ued.json")}
    rc, out, err = migrate(capsys, str(root), "--in-place")
    assert rc == 0, out + err
    assert os.stat(root / "meta.kmd.json").st_ino == before["meta.kmd.json"]
    assert os.stat(root / "e.ued.json").st_ino != before["e.ued.json"]  # replaced by rename
    assert "sort_kernel_catalog" in (root / "e.ued.json").read_text()
    assert "valid" in out.splitlines()[-1]
    rc, out, _ = migrate(capsys, str(root), "--in-place")  # a second run has nothing to do
    assert rc == 0 and "rewrote" not in out


def test_out_refuses_a_non_empty_folder_or_one_inside_root(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    root = engine_tree(tmp_path / "old")
    write(tmp_path / "full", {"x": "y"})
    rc, _, err = migrate(capsys, str(root), "--out", str(tmp_path / "full"))
    assert rc == 2 and "not empty" in err
    rc, _, err = migrate(capsys, str(root), "--out", str(root / "sub"))
    assert rc == 2 and "inside" in err
    assert not (root / "sub").exists()
    rc, _, _ = migrate(capsys, str(root), "--out", str(root))
    assert rc == 2
    rc, _, err = migrate(capsys, str(root), "--out", str(root / "README.txt"))
    assert rc == 2 and "found a regular file" in err
    (tmp_path / "empty").mkdir()
    rc, _, _ = migrate(capsys, str(root), "--out", str(tmp_path / "empty"))
    assert rc == 0


def test_crlf_files_get_crlf_inserts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write(tmp_path / "old", {**base(), "a.kdp.json": LEGACY_KDP.replace("\n", "\r\n"),
                                    "e.ued.json": LEGACY_UED, "h.uhd.json": LEGACY_UHD})
    rc, out, err = migrate(capsys, str(root), "--out", str(tmp_path / "new"))
    assert rc == 0, out + err
    data = (tmp_path / "new/a.kdp.json").read_bytes()
    assert b'"name": "a",\r\n  "arch": [],\r\n' in data
    assert data.count(b"\n") == data.count(b"\r\n")


def test_usage(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as e:
        main(["migrate", str(tmp_path)])  # neither --out nor --in-place
    assert e.value.code == 2
    capsys.readouterr()
    rc, _, _ = migrate(capsys, str(tmp_path / "nothing"), "--in-place")
    assert rc == 2


def test_a_mixed_tree_with_every_construct(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    root = write(engine_tree(tmp_path / "old"), {"p.kdp.json": hsaco_kdp('["gfx90a", "gfx940"]'),
                                                 "s.ukd.json": SOLO_UKD})
    rc, out, err = migrate(capsys, str(root), "--out", str(tmp_path / "new"))
    assert rc == 0, out + err
    rewrote = [ln for ln in out.splitlines() if ln.startswith("ukdpack: rewrote ")]
    assert [ln.split(":")[1].split()[-1] for ln in rewrote] == [
        "a.kdp.json", "e.ued.json", "h.uhd.json", "p.kdp.json", "s.ukd.json"]
    assert "5 of 7 descriptors rewritten; valid" in out
    new = tmp_path / "new"
    for rel, ident in (("a.kdp.json", KDP_ID), ("e.ued.json", UED_ID), ("h.uhd.json", UHD_ID),
                       ("p.kdp.json", PACK2_ID), ("s.ukd.json", SOLO_ID)):
        d = doc(new / rel)
        assert isinstance(d, dict) and d["id"] == ident
    assert validate_rc(new, capsys) == 0
    # Migrating the result again changes nothing.
    rc, out, _ = migrate(capsys, str(new), "--in-place")
    assert rc == 0 and "0 of 7 descriptors rewritten" in out


def test_json_spans_binding() -> None:
    text = b'{"a": 1, // c\n  "b\\"": [true, "x"]}'
    spans, where, message = _runtime.json_spans(text)
    assert message is None and where is None and spans is not None
    by = {s["path"]: s for s in spans}
    assert list(by) == ["$", "$.a", '$["b\\""]', '$["b\\""][0]', '$["b\\""][1]']
    b = by['$["b\\""]']
    assert text[b["key_begin"]:b["key_end"]] == b'"b\\""'
    assert text[b["begin"]:b["end"]] == b'[true, "x"]'
    assert b["indent"] == "  " and not b["inline"] and by["$.a"]["inline"]
    assert _runtime.json_spans(b'{"a": 1, "a": 2}')[2] is not None
    assert _runtime.descriptor_type("x.kdp.json") == "kdp"
    assert _runtime.descriptor_type("kdp.json") is None


def test_an_integer_revision_becomes_major_dot_zero(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """ukdpack's own earlier form: UED, KMD and UMD revisions were integers."""
    root = tmp_path / "old"
    root.mkdir()
    (root / "meta.kmd.json").write_text(KMD.replace('"revision": "1.0"', '"revision": 3'))
    _, out, err = migrate(capsys, str(root), "--out", str(tmp_path / "new"))
    assert 'rewrote meta.kmd.json: revision 3 written as "3.0"' in out + err, out + err
    text = (tmp_path / "new" / "meta.kmd.json").read_text()
    assert '"revision": "3.0",' in text and text.startswith("// fields every kernel fills")


def test_a_legacy_example_tree_migrates_to_one_that_packs_and_loads(tmp_path: Path) -> None:
    """The example tree turned into older forms (no pack arch where it was every arch, no
    inline kernel versions, hsaco_file sources, integer revisions) migrates to a tree that
    validate, pack (real compiles, real prebuilt objects) and ukdpack-validate accept."""
    old = copy_example(tmp_path / "old")
    reduce_kdp = read_json(old / "prebuilt" / "reduce.kdp.json")
    for k in reduce_kdp["kernelDescriptors"]:
        src = k["kernel_source"]
        k["kernel_source"] = {"kind": "hsaco_file", "code_object_file": src["file"],
                              "code_object_symbol": src["symbol"]}
        del k["version"]
    write_json(old / "prebuilt" / "reduce.kdp.json", reduce_kdp)
    scale = read_json(old / "attention" / "scale.kdp.json")
    assert scale["arch"] == []
    del scale["arch"]
    for k in scale["kernelDescriptors"]:
        del k["version"]
    write_json(old / "attention" / "scale.kdp.json", scale)
    ued = read_json(old / "attention" / "attention.ued.json")
    ued["revision"] = 1
    write_json(old / "attention" / "attention.ued.json", ued)
    new = tmp_path / "new"
    r = subprocess.run([sys.executable, "-m", "ukdpack", "migrate", str(old), "--out", str(new)],
                       capture_output=True, text=True, check=False, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "valid:" in r.stdout
    p = run_pack(new, tmp_path / "out", ["gfx90a"], cache=tmp_path / "cache")
    assert p.returncode == 0, p.stderr
    v = subprocess.run([str(Path(sys.executable).parent / "ukdpack-validate"),
                        str(tmp_path / "out" / "gfx90a")], capture_output=True, text=True,
                       check=False, timeout=60)
    assert v.returncode == 0, v.stdout + v.stderr


# ---------------------------------------------------------------------------
# The span scanner and the reader agree on every byte (issue 32, High 3)

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def _values(value: object, path: str = "$") -> Iterator[tuple[str, object]]:
    """Every (path, value) of a document as the reader built it."""
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _values(v, jsonpath.key(path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _values(v, jsonpath.index(path, i))


def _corpus_texts() -> list[bytes]:
    """Every JSON file of the conformance corpus and every file of the fuzz seeds
    (tests/fuzz/seeds.py), each once."""
    sys.path.insert(0, str(CORPUS.parent / "fuzz"))
    try:
        import seeds  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    texts = {p.read_bytes() for p in CORPUS.rglob("*.json") if p.is_file()}
    for data in seeds.loader_inputs():
        for file in data.split(b"\0"):
            texts.add(file.partition(b"\n")[2])
    return sorted(texts)


def _variants(data: bytes) -> list[bytes]:
    """The text, and its line ends as CRLF, as lone CR, and ended by a `//` comment
    that CR, CRLF or LF closes, each with and without a byte order mark."""
    out = []
    for ends in (b"\n", b"\r\n", b"\r", b" // c\r", b" // c\r\n", b"/* c */\r"):
        body = data.replace(b"\n", ends)
        out += [body, b"\xef\xbb\xbf" + body]
    return out


def _check_spans_agree(text: bytes) -> None:
    doc, where, message = _runtime.read_json_text(text)
    spans, s_where, s_message = _runtime.json_spans(text)
    if message is not None:
        assert spans is None and (s_where, s_message) == (where, message)
        return
    assert spans is not None, (text[:80], s_message)
    values = dict(_values(doc))
    by = {s["path"]: s for s in spans}
    assert len(by) == len(spans) and by.keys() == values.keys(), text[:200]
    for path, s in by.items():
        value, raw = values[path], text[s["begin"]:s["end"]]
        if isinstance(value, dict):
            assert raw[:1] == b"{" and raw[-1:] == b"}", (path, raw[:40])
        elif isinstance(value, list):
            assert raw[:1] == b"[" and raw[-1:] == b"]", (path, raw[:40])
        else:
            assert _runtime.read_json_text(raw)[0] == value, (path, raw)
        if s["key_begin"] is not None:
            key = _runtime.read_json_text(text[s["key_begin"]:s["key_end"]])[0]
            assert path.endswith(jsonpath.key("", key)), (path, key)
        assert set(s["indent"]) <= {" ", "\t"}


def test_spans_agree_with_the_reader_on_every_byte_of_the_corpora() -> None:
    """The differential: for every text of the corpus and the fuzz seeds, in every
    line-end and BOM variant, the spans name exactly the reader's values, each span's
    bytes read as its value and each key's as its name."""
    texts = _corpus_texts()
    assert len(texts) > 500
    for data in texts:
        for text in _variants(data):
            _check_spans_agree(text)


@pytest.mark.parametrize("text", [
    b'{"a": [1, // c\r 2, 3], "b": {"x": // y\r "z"}}',
    b'[// only a comment, ended by CR\r1]',
    b'{"a": 1} // to the end, no line end',
    b'{"a": 1}\0',
    b'{"\\u00e9": "\\"", "a\\nb": -1.5e3, "": null}',
    b'\xef\xbb\xbf/* a\r\n */{"a"/*k*/:/*v*/[]/**/}',
    b'{"a": 1 // c\r, "b": 2}',
])
def test_spans_agree_with_the_reader_on_hand_made_texts(text: bytes) -> None:
    _check_spans_agree(text)


def test_a_comment_ended_by_cr_does_not_move_an_insert(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The red team's probe: a `//` comment ended by a lone CR hid the next kernel from
    the span scanner, so the version insert of a later kernel landed in another one."""
    kernels = ",".join(
        f'\n    // kernel {i}\r    {{"id": "00000000-0000-4000-8000-0000000001{i:02d}", '
        f'"name": "a.k{i}", "priority": 0, "metadata": {{}}, "kernel_source": {{"kind": "hip", '
        f'"source": "kernels/a.hip", "entry": "k{i}", "build": {{}}}}}}' for i in range(3))
    kdp = (f'{{"id": "{KDP_ID}", "version": "1.0", "name": "a", "engine": null, "dispatch": '
           f'null, "matchers": [],\r    "kernelDescriptors": [{kernels}\n  ]\n}}\n')
    root = write(tmp_path / "old", {**base(), "a.kdp.json": kdp})
    rc, out, err = migrate(capsys, str(root), "--in-place")
    assert rc == 0, out + err
    d = doc(root / "a.kdp.json")
    assert isinstance(d, dict)
    assert [k.get("version") for k in d["kernelDescriptors"]] == ["1.0", "1.0", "1.0"]
    assert "3 kernels' version added" in out


# ---------------------------------------------------------------------------
# Hostile trees and failed writes (issue 32, Medium 5 and Low)


def _run_migrate(*argv: str, fsize: int | None = None,
                 cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``ukdpack migrate`` in its own process; ``fsize`` caps the bytes of any file it
    writes (RLIMIT_FSIZE: a write past it fails with EFBIG, as a full disk fails)."""
    def limit() -> None:
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    return subprocess.run([sys.executable, "-m", "ukdpack", "migrate", *argv],
                          capture_output=True, text=True, check=False, timeout=60,
                          preexec_fn=limit, cwd=cwd)


@pytest.mark.parametrize("where", ["--in-place", "--out"])
def test_a_fifo_named_like_a_descriptor_is_refused_at_once(tmp_path: Path, where: str) -> None:
    root = engine_tree(tmp_path / "old")
    os.mkfifo(root / "x.kdp.json")
    argv = [str(root), "--in-place"] if where == "--in-place" else [str(root), "--out",
                                                                     str(tmp_path / "new")]
    r = _run_migrate(*argv)  # before the fix: waited for a writer forever
    assert r.returncode == 1, r.stdout + r.stderr
    assert "x.kdp.json" in r.stderr and "expected a regular file, found a FIFO" in r.stderr
    assert "internal error" not in r.stderr
    assert "nothing was written" in r.stdout
    assert (root / "e.ued.json").read_text() == LEGACY_UED
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("special", ["fifo", "socket"])
def test_out_refuses_a_tree_holding_a_fifo_or_socket_before_writing(
        tmp_path: Path, special: str) -> None:
    root = engine_tree(tmp_path / "old")
    if special == "fifo":
        os.mkfifo(root / "kernels" / "pipe")
    else:
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(root / "kernels" / "sock"))
        s.close()
    r = _run_migrate(str(root), "--out", str(tmp_path / "new"))
    assert r.returncode == 1, r.stdout + r.stderr
    name = "kernels/pipe" if special == "fifo" else "kernels/sock"
    found = "a FIFO" if special == "fifo" else "a socket"
    assert f"ukdpack: error: {name}: --out copies regular files, folders and symbolic links; " \
           f"this is {found}" in r.stderr
    assert "internal error" not in r.stderr and "nothing was written" in r.stdout
    assert not (tmp_path / "new").exists()


def test_out_in_a_folder_that_cannot_be_made_is_a_clear_error(tmp_path: Path) -> None:
    root = engine_tree(tmp_path / "old")
    r = _run_migrate(str(root), "--out", "/proc/ukdpack-migrate-test/new")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "internal error" not in r.stderr
    assert "ukdpack: error: /proc/ukdpack-migrate-test/new: cannot write there: " in r.stderr
    assert "nothing was written" in r.stderr


def test_out_empty_is_a_usage_error(tmp_path: Path) -> None:
    root = engine_tree(tmp_path / "old")
    (tmp_path / "cwd").mkdir()
    r = _run_migrate(str(root), "--out", "", cwd=tmp_path / "cwd")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--out '': expected a folder" in r.stderr
    assert not any((tmp_path / "cwd").iterdir())


def test_a_failed_in_place_write_says_what_was_rewritten(tmp_path: Path) -> None:
    """Each file is replaced atomically and listed as soon as it is: a write that fails
    part way (here a file-size limit, as a full disk) leaves the files before it
    rewritten and listed, the failing one and the rest as they were."""
    big = LEGACY_UHD.replace('"name": "rank",', '"name": "rank",' + " " * 4000)
    root = write(tmp_path / "old", {**base(), "e.ued.json": LEGACY_UED, "h.uhd.json": big})
    r = _run_migrate(str(root), "--in-place", fsize=3000)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "ukdpack: rewrote e.ued.json: heuristic rewritten as sort_kernel_catalog.default" \
        in r.stdout
    assert "ukdpack: error: h.uhd.json: cannot write it: File too large; 1 of 2 changed " \
           "descriptors were rewritten before it (listed above)" in r.stderr
    assert "internal error" not in r.stderr
    assert "sort_kernel_catalog" in (root / "e.ued.json").read_text()
    assert (root / "h.uhd.json").read_text() == big
    assert [p.name for p in root.iterdir() if p.name.endswith(".tmp")] == []


def test_an_interrupted_out_is_finished_by_the_same_command(tmp_path: Path) -> None:
    root = engine_tree(tmp_path / "old")
    (root / "objects" / "big.bin").write_bytes(b"\0" * 5000)
    new = tmp_path / "new"
    r = _run_migrate(str(root), "--out", str(new), fsize=3000)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "ukdpack: error: objects/big.bin: cannot copy it to " in r.stderr
    assert "run the same command again to finish it" in r.stderr
    assert (new / ".ukdpack-migrate-unfinished").is_file()
    r = _run_migrate(str(root), "--out", str(new))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "finishing the unfinished migrate" in r.stdout
    assert not (new / ".ukdpack-migrate-unfinished").exists()
    assert (new / "objects" / "big.bin").read_bytes() == b"\0" * 5000
    assert "sort_kernel_catalog" in (new / "e.ued.json").read_text()
    # Another root's unfinished copy is not taken over.
    other = engine_tree(tmp_path / "other")
    (new / ".ukdpack-migrate-unfinished").write_text("/somewhere/else")
    r = _run_migrate(str(other), "--out", str(new))
    assert r.returncode == 2 and "holds an unfinished migrate of /somewhere/else" in r.stderr


@pytest.mark.parametrize("launch", ["é", "x\n", "λ-2"])
def test_a_non_ascii_launch_name_is_rewritten(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              launch: str) -> None:
    """A launch named outside ASCII (or ending in a newline) was looked up under
    another path than the runtime wrote: internal error: KeyError."""
    src = '{"kind": "hsaco_file", "code_object_file": "objects/p.hsaco", "code_object_symbol": "%s"}'
    ukd = (f'{{"id": "{SOLO_ID}", "version": "1.1", "name": "p.solo", "arch": ["gfx90a"], '
           f'"metadata": {{}}, "priority": 0, "sources": {{{json.dumps(launch)}: {src % "a"}, '
           f'"zz": {src % "b"}}}}}\n')
    root = write(tmp_path / "old", {**base(), "s.ukd.json": ukd})
    _, out, err = migrate(capsys, str(root), "--out", str(tmp_path / "new"))
    assert "internal error" not in out + err
    d = doc(tmp_path / "new" / "s.ukd.json")
    assert isinstance(d, dict)
    assert d["sources"][launch] == {"kind": "hsaco", "file": "objects/p.hsaco", "symbol": "a"}
    assert "rewrote s.ukd.json" in out


def test_json_paths_are_written_as_the_runtime_writes_them() -> None:
    names = ["é", "a\n", "plain_1", "a b", "1x", "\x7f", "q\"", "\t", ""]
    text = json.dumps({n: i for i, n in enumerate(names)}, ensure_ascii=False).encode()
    spans, _, message = _runtime.json_spans(text)
    assert spans is not None, message
    assert [s["path"] for s in spans[1:]] == [jsonpath.key("$", n) for n in names]


def _kdp_without_versions(n: int) -> str:
    kernels = ",\n".join(
        f'    {{"id": "k{i}", "name": "k{i}", "priority": 0, "metadata": {{}}, '
        f'"kernel_source": {{"kind": "hip", "source": "k.hip", "entry": "k{i}", "build": {{}}}}}}'
        for i in range(n))
    return (f'{{\n  "id": "p", "version": "1.0", "name": "p", "arch": [], "engine": null, '
            f'"dispatch": null, "matchers": [],\n  "kernelDescriptors": [\n{kernels}\n  ]\n}}\n')


def test_the_plan_is_linear_in_the_kernels(tmp_path: Path) -> None:
    """One KDP of N kernels without version: 8 times the kernels take about 8 times as
    long (it took 64 times: 1.2 s for 2k kernels, 76 s for 16k)."""
    times = {}
    for n in (1000, 8000):
        root = tmp_path / str(n)
        write(root, {"p.kdp.json": _kdp_without_versions(n)})
        best = float("inf")
        for _ in range(2):
            start = time.perf_counter()
            m = plan(root)
            best = min(best, time.perf_counter() - start)
        assert len(m.changed()) == 1
        times[n] = best
    assert times[8000] < 24 * times[1000] + 0.05, times


# ---------------------------------------------------------------------------
# Issue 29: what migrate writes where versions and objectives are missing


def test_a_multi_launch_kernel_gets_version_1_1(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    multi = ('{"id": "%s", "name": "%s", "priority": 0, "metadata": {}, "sources": {'
             '"a": {"kind": "hip", "source": "kernels/a.hip", "entry": "a", "build": {}}, '
             '"b": {"kind": "hip", "source": "kernels/a.hip", "entry": "b", "build": {}}}}')
    kdp = (f'{{"id": "{KDP_ID}", "version": "1.0", "name": "a", "arch": [], "engine": null, '
           f'"dispatch": null, "matchers": [], "kernelDescriptors": [\n    '
           f'{multi % ("00000000-0000-4000-8000-0000000000c1", "a.multi")},\n    "{SOLO_ID}"\n  ]}}\n')
    root = write(tmp_path / "old", {**base(), "a.kdp.json": kdp,
                                    "s.ukd.json": multi % (SOLO_ID, "a.solo") + "\n"})
    rc, out, err = migrate(capsys, str(root), "--out", str(tmp_path / "new"))
    assert rc == 0, out + err
    d = doc(tmp_path / "new" / "a.kdp.json")
    assert isinstance(d, dict)
    assert d["kernelDescriptors"][0]["version"] == "1.1"  # sources (a kernel_source: 1.0)
    s = doc(tmp_path / "new" / "s.ukd.json")
    assert isinstance(s, dict) and s["version"] == "1.1"
    assert 'rewrote s.ukd.json: version "1.1" added' in out


@pytest.mark.parametrize(("score", "objective"), [(None, "max"), ({"metric": "tflops"}, "max"),
                                                  ({"metric": "time"}, "min")])
def test_a_uhd_without_objective_gets_one(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          score: dict[str, str] | None, objective: str) -> None:
    """Upstream's earlier native UHDs carry no objective: validate names the legacy form
    with what to write, migrate writes it."""
    scored = f',\n  "score": {json.dumps(score)}' if score else ""
    uhd = (f'{{\n  "id": "{UHD_ID}",\n  "version": "1.0",\n  "name": "rank",\n  "adapter": '
           f'"native", // no objective\n  "native": {{"symbol": "rank_kernels"}}{scored}\n}}\n')
    ued = LEGACY_UED.replace(f'"heuristic": "{UHD_ID}"',
                             f'"sort_kernel_catalog": {{"default": "{UHD_ID}"}}')
    root = write(tmp_path / "old", {**base(), "e.ued.json": ued, "h.uhd.json": uhd,
                                    "a.kdp.json": LEGACY_KDP})
    (tmp_path / "v").mkdir()
    write(tmp_path / "v", {**base(), "e.ued.json": ued, "h.uhd.json": uhd})
    rc = main(["validate", str(tmp_path / "v")])
    _, verr = capsys.readouterr()
    assert rc == 1
    assert (f"h.uhd.json: $: legacy form: a UHD without 'objective' (adapter 'native'); write "
            f'"objective": "{objective}" instead (`ukdpack migrate ROOT --out NEW` rewrites it)') \
        in verr
    rc, out, err = migrate(capsys, str(root), "--in-place")
    assert rc == 0, out + err
    text = (root / "h.uhd.json").read_text()
    assert f'"adapter": "native",\n  "objective": "{objective}", // no objective\n' in text
    assert f'rewrote h.uhd.json: objective "{objective}" added' in out


def test_comments_inside_a_rewritten_member_are_kept(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    ued = LEGACY_UED.replace(f'"heuristic": "{UHD_ID}"',
                             f'"heuristic" /* k */ : /* v */ "{UHD_ID}" /* after */')
    uhd = LEGACY_UHD.replace('"kind": "native"', '"kind": /* kind */ "native"').replace(
        '"payload": "rank_kernels"', '"payload": // the symbol\n    "rank_kernels"')
    root = write(tmp_path / "old", {**base(), "e.ued.json": ued, "h.uhd.json": uhd,
                                    "a.kdp.json": LEGACY_KDP})
    rc, out, err = migrate(capsys, str(root), "--in-place")
    assert rc == 0, out + err
    assert (f'"sort_kernel_catalog" /* k */ : /* v */ {{"default": "{UHD_ID}"}} /* after */'
            in (root / "e.ued.json").read_text())
    text = (root / "h.uhd.json").read_text()
    assert '"adapter": /* kind */ "native",\n  "objective": "max",\n' in text
    assert '"native": // the symbol\n    {"symbol": "rank_kernels"}' in text


def test_exclude_folder_is_left_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = engine_tree(tmp_path / "old")
    write(root, {"vendor/v.kdp.json": rocke_kdp("rocke")})  # refused, were it migrated
    rc, out, err = migrate(capsys, str(root), "--out", str(tmp_path / "new"),
                           "--exclude-folder", "vendor")
    assert rc == 0, out + err
    assert (tmp_path / "new" / "vendor" / "v.kdp.json").read_text() == rocke_kdp("rocke")
    assert "3 of 5 descriptors rewritten" in out
