"""Hostile bytes (issue 32): ELF headers that disagree with their metadata, names and
text that are not UTF-8, a syntax error beside non-ASCII bytes, an object of many keys,
numbers of a million digits, names with a newline or an escape, FIFOs where files
belong, an empty root. Every command and both judges answer each with a message (exit 1
or 2), never an internal error, and every --json report stays JSON.

Code objects are the real ones the example tree's prebuilt kernels ship (compiled by
hipcc, fetched through DVC); the broken inputs change their e_flags byte only."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kpack_oracle import Archive
from pack_support import EXAMPLE, copy_example, run_pack
from shard_support import edit, kernel, read

from ukdpack import _runtime
from ukdpack.shard import archive as kpack
from ukdpack.shard.depfile import write_depfile

VALIDATE = Path(sys.executable).parent / "ukdpack-validate"
LIMIT = 120
E_FLAGS = 0x30  # offset of e_flags in an ELF64 header; its low byte is EF_AMDGPU_MACH
MACH = {"gfx90a": 0x3F, "gfx1030": 0x36, "gfx10-3-generic": 0x53, "gfx11-generic": 0x54}


def _env() -> dict[str, str]:
    return dict(os.environ, HIP_PLATFORM="amd")


def _ukdpack(*args: str | Path, timeout: float = LIMIT) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "ukdpack", *map(str, args)],
                          capture_output=True, check=False, timeout=timeout, env=_env())


def _validate(*args: str | Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(VALIDATE), *map(str, args)], capture_output=True, check=False,
                          timeout=LIMIT, env=_env())


def _clean(r: subprocess.CompletedProcess[bytes]) -> str:
    """stderr as text, checked free of crashes."""
    err = r.stderr.decode("utf-8")  # a UnicodeDecodeError here: raw bytes were printed
    assert "Traceback" not in err and "internal error" not in err, err
    assert "type_error" not in err, err
    return err


def _prebuilt_tree(base: Path) -> Path:
    """The example's prebuilt kernels alone: a root that packs with no compile."""
    tree = base / "tree"
    tree.mkdir(parents=True)
    shutil.copytree(EXAMPLE / "prebuilt", tree / "prebuilt", symlinks=True)
    return tree


def _patched(data: bytes, mach: int, was: int) -> bytes:
    """The real object ``data`` with only its e_flags machine byte changed."""
    offset, _ = _runtime.code_object_elf_span(data)
    assert data[offset + E_FLAGS] == was, hex(data[offset + E_FLAGS])
    out = bytearray(data)
    out[offset + E_FLAGS] = mach
    return bytes(out)


def _one_object(folder: Path) -> Path:
    found = sorted(folder.glob("*.hsaco"))
    assert found, f"no object under {folder}: run `ukdpack dvc-pull descriptors` first"
    return found[0]


# ------------------------------------------------------------------ ELF header vs metadata

@pytest.mark.parametrize(("arch", "folder", "truth", "lie"), [
    ("gfx90a", "gfx90a", "gfx90a", "gfx11-generic"),
    # the case: a gfx10-3-generic object whose header says gfx11-generic
    ("gfx1030", "gfx10-3-generic", "gfx10-3-generic", "gfx11-generic"),
    ("gfx1030", "gfx10-3-generic", "gfx10-3-generic", "gfx90a"),
])
def test_an_elf_header_that_disagrees_with_its_metadata_note_is_not_packed(
        tmp_path: Path, arch: str, folder: str, truth: str, lie: str) -> None:
    """Before: packed into the shard, and both judges passed it; ROCm's loader picks the
    ISA from e_flags, so the shard would hand the device code for another processor."""
    tree = _prebuilt_tree(tmp_path)
    obj = _one_object(tree / "prebuilt" / "objects" / folder)
    obj.write_bytes(_patched(obj.read_bytes(), MACH[lie], MACH[truth]))
    out = tmp_path / "out"
    r = run_pack(tree, out, [arch], "--jobs", "1", "--cache-dir", str(tmp_path / "cache"))
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    line = next((ln for ln in r.stderr.splitlines() if "e_flags" in ln), "")
    assert line.startswith("ukdpack: error: prebuilt/"), r.stderr
    assert f"names {lie} but its AMDGPU metadata note" in line, line
    assert f"names {truth};" in line, line
    assert not (out / arch).exists()


def test_the_loader_refuses_an_archived_object_whose_header_disagrees(tmp_path: Path) -> None:
    """A shard packed from good objects, one archive entry then swapped for the same
    object with its header changed (digest and sidecar rebound, as a tool rewriting the
    shard would): the runtime's load check refuses it, naming both processors."""
    tree = _prebuilt_tree(tmp_path)
    out = tmp_path / "out"
    r = run_pack(tree, out, ["gfx90a"], "--jobs", "1", "--cache-dir", str(tmp_path / "cache"))
    assert r.returncode == 0, r.stderr
    shard = out / "gfx90a"
    kdp = shard / "prebuilt" / "reduce.kdp.json"
    key = kernel(read(kdp), "reduce_sum.gfx90a")["kernel_source"]["toc_key"]
    path = shard / "kpack" / "kernels_gfx90a.kpack"
    old = Archive.open(path)
    writer = kpack.ArchiveWriter(old.group, ["gfx90a"])
    bad = b""
    for k, arch in old:
        data = old.get(k, arch)
        if k == key:
            data = bad = _patched(data, MACH["gfx11-generic"], MACH["gfx90a"])
        writer.add(k, arch, data)
    old.close()
    writer.write(path)
    assert bad

    def rebind(doc: Any) -> None:  # every launch that names the entry (twostage shares it)
        for k in doc["kernelDescriptors"]:
            for src in [k.get("kernel_source", {}), *k.get("sources", {}).values()]:
                if src.get("toc_key") == key:
                    src["sha256"] = hashlib.sha256(bad).hexdigest()

    for other in sorted((shard / "prebuilt").glob("*.kdp.json")):
        edit(other, rebind)
    v = _validate(shard)
    err = _clean(v)
    assert v.returncode == 1, err
    assert "prebuilt/reduce.kdp.json" in err
    assert "ELF header (e_flags) names gfx11-generic but its AMDGPU metadata note" in err, err
    assert "names gfx90a;" in err, err


# ------------------------------------------------------------------ names that are not UTF-8

def _every_judge(root: Path, tmp_path: Path) -> list[tuple[str, subprocess.CompletedProcess[bytes]]]:
    """validate (text and --json), pack --json and both runs of ukdpack-validate."""
    return [
        ("validate", _ukdpack("validate", root)),
        ("validate --json", _ukdpack("validate", root, "--json")),
        ("pack --json", _ukdpack("pack", "--source-root", root, "--out-root", tmp_path / "out",
                                 "--arch", "gfx90a", "--plain", "--json", "--cache-dir",
                                 tmp_path / "cache")),
        ("ukdpack-validate", _validate(root, "--authored")),
        ("ukdpack-validate --json", _validate(root, "--authored", "--json")),
    ]


def _json_report(r: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(r.stdout)  # valid UTF-8 and valid JSON
    assert doc["ok"] is False
    return doc


@pytest.mark.parametrize("name", [b"caf\xe9.udd.json", b"\xff\xfe/inner.udd.json"])
def test_a_name_that_is_not_utf8_gets_a_message_from_every_command(
        tmp_path: Path, name: bytes) -> None:
    """Before: validate and pack ended in 'internal error' (exit 2, no --json report);
    ukdpack-validate read the file and said ok."""
    tree = _prebuilt_tree(tmp_path)
    target = os.path.join(bytes(tree), name)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copy(tree / "prebuilt" / "reduce.udd.json", target)
    shown = name.split(b"/")[0].decode("latin-1").encode("ascii", "backslashreplace").decode()
    for what, r in _every_judge(tree, tmp_path):
        err = _clean(r)
        assert r.returncode == 1, (what, err)
        if what.endswith("--json"):
            doc = _json_report(r)
            assert any(p["file"] == shown for p in doc["problems"]), (what, doc["problems"])
            assert any("not UTF-8" in p["message"] for p in doc["problems"]), what
        else:
            assert f"{shown}: the " in err and "name is not UTF-8" in err, (what, err)
    # migrate reads the tree with the same walk: the same message, and nothing written.
    for args in (("--out", str(tmp_path / "migrated")), ("--in-place",)):
        r = _ukdpack("migrate", tree, *args)
        err = _clean(r)
        assert r.returncode == 1, (args, err)
        assert f"{shown}: the " in err and "name is not UTF-8" in err, (args, err)
        assert "nothing was written" in r.stdout.decode()
    assert not (tmp_path / "migrated").exists()


# ------------------------------------------------------------------ syntax errors beside non-ASCII

BROKEN = {
    "nbsp": b'{\xc2\xa0"id": "x"}',
    "unquoted": '{"name": été}'.encode(),
    "second-bom": b'\xef\xbb\xbf\xef\xbb\xbf{"id": "x"}',
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_syntax_error_beside_non_ascii_bytes_is_a_message(tmp_path: Path, case: str) -> None:
    """Before: validate and pack crashed (UnicodeDecodeError) and ukdpack-validate --json
    died in nlohmann's type_error.316: the parser quotes the bytes it last read, which
    end inside a character."""
    tree = _prebuilt_tree(tmp_path)
    (tree / "prebuilt" / "broken.udd.json").write_bytes(BROKEN[case])
    for what, r in _every_judge(tree, tmp_path):
        err = _clean(r)
        assert r.returncode == 1, (what, err)
        if what.endswith("--json"):
            doc = _json_report(r)
            found = [p for p in doc["problems"] if p["file"] == "prebuilt/broken.udd.json"]
            assert found and "not valid JSON" in found[0]["message"], (what, doc["problems"])
        else:
            assert "prebuilt/broken.udd.json: " in err and "not valid JSON" in err, (what, err)


# ------------------------------------------------------------------ sizes

def _cpu_of(run: Any) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def test_the_duplicate_key_check_is_linear(tmp_path: Path) -> None:
    """A 2.5 MB UDD of 160k extension keys. Before: 33 s of CPU in ukdpack-validate (each
    key compared with every earlier one); now well under a second. CPU time, not wall
    time, so a busy machine does not fail it."""
    root = tmp_path / "root"
    root.mkdir()
    keys = ",\n".join(f'"x-k{i:06d}": 0' for i in range(160_000))
    (root / "big.udd.json").write_text(
        '{"id": "5b8d38a3-1017-5c4e-a6b2-5e31bf5a1e8c", "version": "1.1", "name": "big", '
        '"dispatch_symbol": "big_dispatch", "launches": ["a", "b"],\n' + keys + "}\n")
    results: list[subprocess.CompletedProcess[bytes]] = []
    cpu = _cpu_of(lambda: results.append(_validate(root, "--authored")))
    _clean(results[0])
    assert results[0].returncode == 0, results[0].stderr  # it reads as valid
    assert cpu < 5, f"{cpu:.1f} s of CPU"
    # A key said twice among them is still found, past the scan of the first few.
    (root / "big.udd.json").write_text(
        '{"id": "5b8d38a3-1017-5c4e-a6b2-5e31bf5a1e8c", "version": "1.1", "name": "big", '
        '"dispatch_symbol": "big_dispatch", "launches": ["a", "b"],\n' + keys
        + ',\n"x-k100000": 1}\n')
    r = _validate(root, "--authored")
    assert r.returncode == 1
    assert "duplicate key 'x-k100000' in one object" in _clean(r)


def test_a_million_digit_integer_is_quoted_short(tmp_path: Path) -> None:
    """Before: the refusal quoted the whole number, a 1 MB line."""
    tree = _prebuilt_tree(tmp_path)
    udd = tree / "prebuilt" / "reduce.udd.json"
    text = udd.read_text()
    udd.write_text(text.replace('"name"', '"x-huge": ' + "7" * 1_000_000 + ', "name"', 1))
    for what, r in _every_judge(tree, tmp_path)[:4]:
        err = _clean(r)
        assert r.returncode == 1, (what, err)
        text = r.stdout.decode() + err
        assert len(max(text.splitlines(), key=len)) < 1000, what
        if what.endswith("--json"):
            _json_report(r)
        assert "(1000000 characters)" in text, what


# ------------------------------------------------------------------ names with controls

def test_names_with_a_newline_or_an_escape_are_printed_escaped(tmp_path: Path) -> None:
    """Before: ukdpack-validate and the "skipping ..." notes printed such names raw: a
    newline split the line, an escape sequence drove the terminal."""
    tree = _prebuilt_tree(tmp_path)
    (tree / "prebuilt" / "evil\x1b[2J.json").write_text("{}")  # no type token: skipped
    (tree / "prebuilt" / "two\nlines.udd.json").write_text("{}")  # an error
    for what, r in _every_judge(tree, tmp_path):
        err = _clean(r)
        assert r.returncode == 1, (what, err)
        assert "\x1b" not in err and "two\nlines" not in err, (what, err)
        if what.endswith("--json"):
            _json_report(r)
            continue
        assert "two\\nlines.udd.json" in err, (what, err)
        if what != "pack --json":
            assert "skipping prebuilt/evil\\x1b[2J.json" in err, (what, err)


# ------------------------------------------------------------------ FIFOs and empty roots

def test_a_fifo_source_is_called_what_it_is(tmp_path: Path) -> None:
    """Before: the C++ loader said the source was "not found" while it was there."""
    tree = copy_example(tmp_path / "tree")
    source = tree / "attention" / "kernels" / "scale.hip"
    source.unlink()
    os.mkfifo(source)
    r = _validate(tree, "--authored")
    err = _clean(r)
    assert r.returncode == 1, err
    assert "'kernels/scale.hip' is not a regular file" in err and "found a FIFO" in err, err
    assert "not found" not in err, err


def test_a_fifo_header_is_refused_before_the_compile(tmp_path: Path) -> None:
    """Before: hipcc opened the FIFO and waited until --job-timeout ended the compile."""
    tree = copy_example(tmp_path / "tree")
    header = tree / "attention" / "kernels" / "common.h"
    header.unlink()
    os.mkfifo(header)
    start = time.monotonic()
    r = run_pack(tree, tmp_path / "out", ["gfx90a"], "--jobs", "1", "--job-timeout", "90",
                 "--cache-dir", str(tmp_path / "cache"))
    took = time.monotonic() - start
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert took < 60, f"took {took:.0f} s: the compile waited on the FIFO"
    assert ('includes "common.h", which is a FIFO (attention/kernels/common.h), not a regular '
            "file") in r.stderr, r.stderr


def test_validate_on_a_root_with_no_descriptors_fails(tmp_path: Path) -> None:
    """Before: exit 0, "valid: 0 descriptors": a wrong path passed as a good tree."""
    (tmp_path / "empty" / "docs").mkdir(parents=True)
    (tmp_path / "empty" / "docs" / "notes.txt").write_text("no descriptors here\n")
    r = _ukdpack("validate", tmp_path / "empty")
    err = _clean(r)
    assert r.returncode == 1, err
    assert "ukdpack: error: .: holds no descriptor file (<name>.<type>.json)" in err, err
    j = _ukdpack("validate", tmp_path / "empty", "--json")
    assert j.returncode == 1
    assert [p["code"] for p in _json_report(j)["problems"]] == ["NO_DESCRIPTORS"]
    v = _validate(tmp_path / "empty", "--authored")  # the other judge agrees
    assert v.returncode == 1 and b"holds no shard" in v.stderr + v.stdout


# ------------------------------------------------------------------ init and the depfile

def test_init_under_a_file_names_the_file(tmp_path: Path) -> None:
    """Before: 'File exists' (mkdir's word for a file on the way)."""
    (tmp_path / "file").write_text("x")
    r = _ukdpack("init", tmp_path / "file" / "sub")
    err = _clean(r)
    assert r.returncode == 2, err
    assert f"{tmp_path / 'file'} is a regular file, not a folder; nothing was written" in err, err
    assert "File exists" not in err


def test_init_prints_a_name_with_a_newline_escaped(tmp_path: Path) -> None:
    """Before: the name went out raw, its newline splitting the 'wrote' line and the
    commands printed after it."""
    r = _ukdpack("init", tmp_path / "new\nname")
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr
    assert "new\nname" not in out, out
    assert "new\\nname" in out
    assert (tmp_path / "new\nname" / "handlers.json").is_file()


def test_the_depfile_refuses_a_path_with_a_line_break(tmp_path: Path) -> None:
    """Before: the newline was written raw, and the depfile named two bogus files."""
    from ukdpack.shard.depfile import UnwritablePath

    depfile = tmp_path / "x.d"
    with pytest.raises(UnwritablePath):
        write_depfile(depfile, "stamp", ["ok.h", "bad\nname.h"])
    assert not depfile.exists()
    write_depfile(depfile, "stamp", ["a b.h", os.fsdecode(b"caf\xe9.h")])
    assert depfile.read_bytes() == b"stamp: \\\n a\\ b.h \\\n caf\xe9.h\n"


def test_the_shared_name_helpers_escape_stray_bytes() -> None:
    """The helpers every command that lists files itself uses (migrate among them): a name
    that is not UTF-8 is told apart and shown as the runtime shows it."""
    from ukdpack.errors import escape_bytes, is_utf8, quote_name

    name = os.fsdecode(b"caf\xe9\n.udd.json")
    assert not is_utf8(name) and is_utf8("café.udd.json")
    assert escape_bytes(name) == "caf\\xe9\n.udd.json"  # JSON escapes the newline itself
    assert quote_name(name) == "'caf\\xe9\\n.udd.json'"


def test_a_folder_named_not_utf8_without_descriptors_is_left_alone(tmp_path: Path) -> None:
    """Only names the walk would read are refused: a folder of other files (notes, build
    outputs) named with stray bytes is no business of the judges."""
    tree = _prebuilt_tree(tmp_path)
    folder = os.path.join(bytes(tree), b"notes\xff")
    os.mkdir(folder)
    with open(os.path.join(folder, b"readme.txt"), "w") as f:
        f.write("not a descriptor\n")
    r = _ukdpack("validate", tree)
    assert r.returncode == 0, _clean(r)
    v = _validate(tree, "--authored")
    assert v.returncode == 0, _clean(v)


@pytest.mark.parametrize("ignored", [True, False])
def test_a_sighup_ignored_on_entry_stays_ignored(tmp_path: Path, ignored: bool) -> None:
    """`nohup ukdpack pack` must outlive its terminal: the stop handler is installed only
    for a signal not ignored on entry. The command signals itself mid-run."""
    tree = _prebuilt_tree(tmp_path)
    script = (
        "import os, signal, sys\n"
        f"if {ignored}: signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "import ukdpack.authored.validate as v\n"
        "real = v.validate\n"
        "def hup(*a, **k):\n"
        "    os.kill(os.getpid(), signal.SIGHUP)\n"
        "    return real(*a, **k)\n"
        "v.validate = hup\n"
        "from ukdpack.cli import main\n"
        f"sys.exit(main(['validate', {str(tree)!r}]))\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, check=False,
                       timeout=LIMIT, env=_env())
    err = _clean(r)
    if ignored:
        assert r.returncode == 0, err
        assert "stopped by" not in err
    else:
        assert r.returncode == 129, err
        assert err.count("ukdpack: stopped by SIGHUP") == 1, err
