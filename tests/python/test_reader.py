"""The one reader of descriptor files (the C++ loader, reached through the
extension): JSON with comments, one set of limits, regular files only, no link
out of the root. ``validate``, ``ukdpack-validate`` and the loader give one
verdict and one message on each limit, and none of them hangs or prints an
internal error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pack_support import write_json

from ukdpack import _runtime

UDD = '{"id": "u", "version": "1.0", "name": "d", "dispatch_symbol": "s", "x-data": %s}'


def _judges(root: Path) -> dict[str, tuple[int, str]]:
    """Exit status and output of each judge of an authored tree."""
    out: dict[str, tuple[int, str]] = {}
    for name, argv in {
        "validate": [sys.executable, "-m", "ukdpack", "validate", str(root)],
        "ukdpack-validate": [str(Path(sys.executable).parent / "ukdpack-validate"), "--authored",
                             str(root)],
    }.items():
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        out[name] = (r.returncode, r.stdout + r.stderr)
    dset = _runtime.load_shard(str(root), authored=True)
    errors = [d for d in dset.diagnostics if d["severity"] == "error"]
    out["loader"] = (1 if errors else 0, "\n".join(f"{d['file']}: {d['path']}: {d['message']}"
                                                  for d in errors))
    return out


def _refused_by_all(root: Path, *fragments: str) -> None:
    for judge, (code, text) in _judges(root).items():
        assert code == 1, (judge, text)
        for f in fragments:
            assert f in text, (judge, f, text)
        assert "internal error" not in text and "Traceback" not in text, (judge, text)


@pytest.mark.parametrize(("value", "fragments"), [
    ("18446744073709551615", ['$["x-data"]', "integer 18446744073709551615 does not fit a "
                              "signed 64-bit value"]),
    ("[1, 123456789012345678901234567890]", ['$["x-data"][1]', "integer 12345678901234567890"
                                             "1234567890 does not fit a signed 64-bit value"]),
    ("-99999999999999999999", ["integer -99999999999999999999 does not fit"]),
    ("1e999", ["number overflow parsing '1e999'"]),
    ('"\\ud800"', ["surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF"]),
    ("[" * 200 + "]" * 200, ["nested deeper than 128 levels of objects and arrays"]),
    ('{"a": 1, "a": 2}', ['$["x-data"]: duplicate key \'a\' in one object']),
])
def test_each_limit_is_one_refusal_from_every_judge(tmp_path: Path, value: str,
                                                     fragments: list[str]) -> None:
    (tmp_path / "a.udd.json").write_text(UDD % value)
    _refused_by_all(tmp_path, "a.udd.json", *fragments)


def test_the_largest_int64_and_a_float_are_read(tmp_path: Path) -> None:
    (tmp_path / "a.udd.json").write_text(UDD % "[9223372036854775807, -9223372036854775808, "
                                               "1.5e300]")
    for judge, (code, text) in _judges(tmp_path).items():
        assert code == 0, (judge, text)


def test_invalid_utf8_names_the_byte(tmp_path: Path) -> None:
    (tmp_path / "a.udd.json").write_bytes((UDD % '"caf\xe9"').encode("latin-1"))
    _refused_by_all(tmp_path, "a.udd.json", "not UTF-8 text: byte")


def test_comments_are_read_and_errors_point_into_the_file(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text('// head\n{"url": "http://x/*y*/", /* inline */ "n": 1}\n')
    assert _runtime.read_json_file(str(path)) == ({"url": "http://x/*y*/", "n": 1}, None, None)
    path.write_text('{\n/* one\ntwo */\n "a": ,}')
    doc, _, why = _runtime.read_json_file(str(path))
    assert doc is None and why is not None and "at line 4 column 7" in why
    path.write_text('{"s": "/* in a string */"}\n/*/ never closed')
    assert "unterminated /* comment starting on line 2" in str(_runtime.read_json_file(str(path)))


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    write_json(tmp_path / "ok.udd.json", {"id": "u", "version": "1.0", "name": "d",
                                          "dispatch_symbol": "s"})
    os.mkfifo(tmp_path / "x.udd.json")
    # A judge that opens the FIFO for reading waits for a writer: the timeout catches it.
    _refused_by_all(tmp_path, "x.udd.json", "expected a regular file, found a FIFO",
                    "it was not opened")
    doc, _, why = _runtime.read_json_file(str(tmp_path / "x.udd.json"))
    assert doc is None and why == "expected a regular file, found a FIFO"


def test_a_link_leaving_the_root_is_refused_unread(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    write_json(outside / "a.udd.json", {"id": "u", "version": "1.0", "name": "d",
                                        "dispatch_symbol": "s"})
    root.mkdir()
    (root / "a.udd.json").symlink_to(outside / "a.udd.json")
    _refused_by_all(root, "a.udd.json", "a symbolic link that leaves the descriptor root")


def test_a_link_inside_the_root_is_read(tmp_path: Path) -> None:
    write_json(tmp_path / "real" / "a.udd.json", {"id": "u", "version": "1.0", "name": "d",
                                                  "dispatch_symbol": "s"})
    (tmp_path / "b.udd.json").symlink_to(tmp_path / "real" / "a.udd.json")
    # Both names are read: the same id twice is the finding, not the link.
    _refused_by_all(tmp_path, "real/a.udd.json: $.id: id 'u' is already used by b.udd.json")


def test_a_dangling_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.udd.json").symlink_to(tmp_path / "nowhere.json")
    _refused_by_all(tmp_path, "a.udd.json", "expected a regular file, found nothing (a "
                                            "dangling symbolic link)")
