"""``ukdpack migrate``: each legacy construct rewritten into today's form (and the result
validates), what is refused, and every byte the rewrite does not touch kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pack_support import copy_example, read_json, run_pack, write_json

from ukdpack import _runtime
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
