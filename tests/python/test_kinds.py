"""One kinds table: the runtime's ``sourceKinds()`` drives the reader, and the packer's
``KINDS`` is read from it. No code names a kernel-source kind as a literal outside the
table (a grep over python/ukdpack and the C++ runtime), so adding a kind is a row and
a producer."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from ukdpack import _runtime
from ukdpack.authored import kinds

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "python" / "ukdpack"
CPP = [REPO / "cpp" / d for d in ("src", "include", "bindings")]
NAMES = tuple(k["name"] for k in _runtime.source_kinds())

#: Literals equal to a kind's name that name something else: file -> {literal: what}.
NOT_KINDS: dict[str, dict[str, str]] = {
    "cli.py": {"hip": "compiler", "cuda": "compiler"},
    "doctor/checks.py": {"hip": "compiler", "cuda": "compiler"},
    "produce/compiler.py": {"hip": "compiler", "cuda": "compiler"},
    "produce/command_line.py": {"hip": "compiler (and hipcc's -x language)", "cuda": "compiler"},
    "produce/remote_exec.py": {"hip": "compiler"},
    "shard/pack.py": {"hip": "compiler", "cuda": "compiler"},
    "shard/archive.py": {"hsaco": "archive entry type"},
    "include/ukdpack/load/loader.hpp": {"kpack": "the shard's archive folder"},
    "src/device/backend_hip.cpp": {"hip": "backend"},
    "src/device/backend_cuda.cpp": {"cuda": "backend"},
    "src/plan/plan.cpp": {"hip": "backend", "cuda": "backend"},
}
#: Where the table is.
TABLES = {"authored/kinds.py"}

_QUOTED_KIND = re.compile(r"""kinds?\s+['"](\w+)['"]""")


def _python_literals(path: Path) -> set[str]:
    """Kind names the file's strings are (``"hip"``) or quote as a kind (``kind 'hip'``)."""
    found: set[str] = set()
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    for tok in tokens:
        if tok.type != tokenize.STRING:
            continue
        body = re.sub(r"^[rRbBuUfF]*", "", tok.string).strip("'\"")
        if body in NAMES:
            found.add(body)
        found |= {m for m in _QUOTED_KIND.findall(tok.string) if m in NAMES}
    return found


def _without_comments(text: str) -> str:
    """C++ text with its // comments blanked (a // inside a string literal is kept)."""
    out = []
    for line in text.splitlines():
        quoted = False
        for i, c in enumerate(line):
            if c == '"' and (i == 0 or line[i - 1] != "\\"):
                quoted = not quoted
            elif not quoted and line.startswith("//", i):
                line = line[:i]
                break
        out.append(line)
    return "\n".join(out)


def _cpp_literals(path: Path) -> set[str]:
    text = _without_comments(path.read_text(encoding="utf-8"))
    if path.name == "descriptors.cpp":  # the table itself
        start = text.index("const std::vector<SourceKindInfo>& sourceKinds() {")
        text = text[:start] + text[text.index("\n}\n", start):]
    found = set(re.findall(r'"(\w+)"', text)) & set(NAMES)
    found |= {m for m in _QUOTED_KIND.findall(text) if m in NAMES}
    return found


def _all_literals() -> dict[str, set[str]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel not in TABLES and (found := _python_literals(path)):
            out[rel] = found
    for folder in CPP:
        for path in sorted(folder.rglob("*")):
            if path.suffix in (".cpp", ".hpp", ".def") and (found := _cpp_literals(path)):
                out[path.relative_to(REPO / "cpp").as_posix()] = found
    return out


def test_no_kind_literal_outside_the_tables() -> None:
    wrong = {}
    for rel, found in _all_literals().items():
        left = found - set(NOT_KINDS.get(rel, {}))
        if left:
            wrong[rel] = sorted(left)
    assert not wrong, ("kind names written as literals (read the kinds table instead: "
                       f"ukdpack.authored.kinds, sourceKind() in C++): {wrong}")


def test_the_allow_lists_hold_nothing_stale() -> None:
    """An allow-listed literal that is gone leaves the list too."""
    found = _all_literals()
    stale = {rel: sorted(lits - found.get(rel, set()))
             for rel, lits in [*((r, set(d)) for r, d in NOT_KINDS.items())]
             if lits - found.get(rel, set())}
    assert not stale, f"allow-listed literals no longer used (remove them): {stale}"


def test_the_grep_sees_a_kind_literal(tmp_path: Path) -> None:
    """The scanners find what they look for: a comparison, a quoted kind in a message,
    and nothing in a comment."""
    py = tmp_path / "sample.py"
    py.write_text('if src.kind == "hsaco":\n    x = f"kind \'kpack\' here"  # "cuda"\n')
    assert _python_literals(py) == {"hsaco", "kpack"}
    cpp = tmp_path / "sample.cpp"
    cpp.write_text('if (s.kind == "builder") return;  // "hip"\nstd::string u = "http://x";\n')
    assert _cpp_literals(cpp) == {"builder"}


def test_the_packer_reads_the_runtime_table() -> None:
    rows = {r["name"]: r for r in _runtime.source_kinds()}
    assert tuple(kinds.KINDS) == tuple(rows)
    for name, k in kinds.KINDS.items():
        row = rows[name]
        assert k.fields == tuple(f["name"] for f in row["fields"])
        assert k.required == tuple(f["name"] for f in row["fields"] if f["required"])
        assert (k.producer, k.packed, k.launchable) == (row["producer"], row["packed"],
                                                         row["launchable"])
    assert [kinds.KINDS[n].packed for n in kinds.KINDS].count(True) == 1
    assert kinds.PACKED not in kinds.AUTHORED


@pytest.mark.parametrize("name", NAMES)
def test_the_reader_takes_exactly_the_fields_of_the_row(name: str) -> None:
    """parseSource reads each kind's fields from its row: a source with every field of
    the row but one required field misses that one, and an extra field is refused."""
    k = kinds.KINDS[name]
    sample = {"string": "x", "relative_path": "a/b.hip", "object": {}, "build": {},
              "sha256": "0" * 64, "signature": [], "target_digests": {}}
    full = {"kind": name, **{f.name: sample[f.type] for f in k.field_rows}}
    ukd = {"id": "k", "name": "k", "version": "1.0", "priority": 0, "metadata": {},
           "kernel_source": full,
           **({"arch": ["gfx90a"]} if k.producer == "prebuilt" else {})}
    assert _runtime.check_kernel(ukd) == []
    for field in k.required:
        less = {**ukd, "kernel_source": {x: v for x, v in full.items() if x != field}}
        found = _runtime.check_kernel(less)
        assert [f"$.kernel_source {d['message']}" for d in found] == [
            f"$.kernel_source missing required field '{field}'"], (name, field)
    extra = _runtime.check_kernel({**ukd, "kernel_source": {**full, "surplus": 1}})
    assert len(extra) == 1 and "surplus" in extra[0]["message"]
    if "role" not in k.fields:
        role = _runtime.check_kernel({**ukd, "kernel_source": {**full, "role": "x"}})
        assert [d["message"] for d in role] == [
            f"'role' is a builder-only field; a {name} source takes no role"]
