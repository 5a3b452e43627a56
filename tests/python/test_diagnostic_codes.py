"""One list of diagnostic codes: cpp/include/ukdpack/base/diagnostic_codes.def. The runtime
emits codes only through its names (codes::X), the packer reads them from the extension
(_runtime.Code.X), _runtime.pyi types exactly them, docs/diagnostics.md lists exactly
them with their meanings, and no code is written as a string anywhere else."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

from ukdpack import _runtime

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "python" / "ukdpack"
DEF = REPO / "cpp" / "include" / "ukdpack" / "base" / "diagnostic_codes.def"
LIST = _runtime.diagnostic_codes()
NAMES = [name for name, _ in LIST]

#: Python files writing codes as strings, with why: errors.py is imported before the
#: extension (``ukdpack doctor`` reports a missing one).
STRINGS_ALLOWED: dict[str, set[str]] = {
    "errors.py": {"ERROR", "USAGE"},
}


def _python_strings(path: Path) -> set[str]:
    """Every plain string literal of the file whose text is a code's name."""
    found = set()
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        if tok.type == tokenize.STRING:
            body = re.sub(r"^[rRbBuUfF]*", "", tok.string).strip("'\"")
            if body in NAMES:
                found.add(body)
    return found


def _cpp_strings(text: str) -> set[str]:
    """Every C++ string literal of ``text`` (// comments left out) that is a code's name."""
    code = "\n".join(re.sub(r'^((?:[^"/]|"(?:[^"\\]|\\.)*"|/(?!/))*)//.*$', r"\1", line)
                     for line in text.splitlines())
    return set(re.findall(r'"(\w+)"', code)) & set(NAMES)


def test_the_list_is_sorted_unique_and_each_code_has_a_meaning() -> None:
    assert sorted(set(NAMES)) == NAMES
    assert all(re.fullmatch(r"[A-Z][A-Z0-9_]*", n) for n in NAMES)
    assert all(meaning and "\n" not in meaning for _, meaning in LIST)
    def_names = re.findall(r"^UKD_DIAGNOSTIC\((\w+), ", DEF.read_text(), re.M)
    assert def_names == NAMES


def test_python_reads_the_names_from_the_extension() -> None:
    assert {n: getattr(_runtime.Code, n) for n in NAMES} == {n: n for n in NAMES}
    stub = (PACKAGE / "_runtime.pyi").read_text()
    body = stub[stub.index("class Code:"):].split("\n\n")[0]
    assert re.findall(r"^    (\w+): ClassVar\[str\]$", body, re.M) == NAMES


def test_the_doc_lists_exactly_the_codes() -> None:
    rows = re.findall(r"^\| `(\w+)` \| (.*) \|$", (REPO / "docs" / "diagnostics.md").read_text(),
                      re.M)
    expected = "".join(f"| `{n}` | {m} |\n" for n, m in LIST)
    assert rows == LIST, f"docs/diagnostics.md's table should read:\n{expected}"


def test_no_code_is_a_string_outside_the_list() -> None:
    wrong: dict[str, list[str]] = {}
    for folder in ("src", "bindings", "tools", "include"):
        for path in sorted((REPO / "cpp" / folder).rglob("*")):
            if path.suffix in (".cpp", ".hpp") and (found := _cpp_strings(path.read_text())):
                wrong[path.relative_to(REPO).as_posix()] = sorted(found)
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        found = _python_strings(path) - STRINGS_ALLOWED.get(rel, set())
        if found:
            wrong[rel] = sorted(found)
    assert not wrong, f"codes written as strings (use codes::X, or _runtime.Code.X): {wrong}"


def test_the_pending_list_holds_nothing_stale() -> None:
    stale = {rel: sorted(lits - _python_strings(PACKAGE / rel))
             for rel, lits in STRINGS_ALLOWED.items() if lits - _python_strings(PACKAGE / rel)}
    assert not stale, f"no longer written as strings (remove from STRINGS_ALLOWED): {stale}"


def test_every_code_is_emitted_somewhere() -> None:
    """A code nothing emits any more leaves the list."""
    used = set()
    for path in (REPO / "cpp").rglob("*.[ch]pp"):
        used |= set(re.findall(r"\bcodes::(\w+)", path.read_text()))
    for path in PACKAGE.rglob("*.py"):
        used |= set(re.findall(r"\bCode\.(\w+)", path.read_text()))
    used |= set().union(*STRINGS_ALLOWED.values())
    assert sorted(set(NAMES) - used) == []


def test_the_grep_sees_a_code_literal() -> None:
    assert _cpp_strings('return makeError("DUPLICATE_ID", f, p, m);  // "SCHEMA"\n'
                        'std::string u = "http://x"; f("KPACK_IO");') == {"DUPLICATE_ID",
                                                                         "KPACK_IO"}
