"""The C++ runtime's layers (cpp/LAYERS.md): every `#include "..."` under cpp/ names a
file that exists, goes down the table or stays in its folder (never up a layer, never
across to a folder its row does not name), a public header includes only public
headers, and no include circle runs between files. Paths of C++ files the docs and
comments name exist."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CPP = REPO / "cpp"
SRC = CPP / "src"
INCLUDE = CPP / "include"
INCLUDE_LINE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layers(text: str) -> dict[str, list[str]]:
    """The table of cpp/LAYERS.md: folder -> the folders it may include, in row order."""
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("folder", "") or set(cells[0]) <= {"-"}:
            continue
        rows[cells[0]] = [c.strip() for c in cells[2].split(",") if c.strip()]
    return rows


LAYERS = layers((CPP / "LAYERS.md").read_text(encoding="utf-8"))
OUTER = ("bindings", "tools")  # cpp/bindings, cpp/tools: public headers only


def folder_of(path: Path) -> str:
    """The concern a file under cpp/ belongs to."""
    rel = path.relative_to(CPP).parts
    if rel[0] == "src":
        return rel[1]
    if rel[0] == "include":
        return rel[2]
    return rel[0]


def resolve(path: Path, name: str) -> Path | None:
    """The file `#include "name"` in `path` reaches, as the build's include paths do."""
    candidates = [path.parent / name]  # beside it (cpp/bindings' own headers)
    if name.startswith("ukdpack/"):
        candidates = [INCLUDE / name]
    elif path.is_relative_to(SRC) or path.is_relative_to(INCLUDE):
        candidates = [SRC / name]
    for c in candidates:
        if c.is_file():
            return c
    return None


def includes(path: Path, edited: dict[Path, str]) -> list[str]:
    """The quoted includes of a file (its text in `edited`, when there)."""
    text = edited[path] if path in edited else path.read_text(encoding="utf-8")
    return INCLUDE_LINE.findall(text)


def include_problems(files: list[Path], edited: dict[Path, str] | None = None) -> list[str]:
    """Every include that names no file, goes up or across, or leaves the public headers."""
    problems = []
    for path in files:
        mine = folder_of(path)
        for name in includes(path, edited or {}):
            where = f"{path.relative_to(CPP)} includes \"{name}\""
            target = resolve(path, name)
            if target is None:
                problems.append(f"{where}: no such header")
                continue
            theirs = folder_of(target)
            public = target.is_relative_to(INCLUDE)
            if (path.is_relative_to(INCLUDE) or mine in OUTER) and not public and theirs != mine:
                problems.append(f"{where}: a private header (only ukdpack/... headers here)")
            elif path.is_relative_to(SRC) and target.is_relative_to(SRC) and name.count("/") == 0:
                problems.append(f"{where}: name a private header by its folder (\"{theirs}/{name}\")")
            if theirs != mine and theirs not in LAYERS.get(mine, []):
                problems.append(f"{where}: {mine} may include only {', '.join(LAYERS.get(mine, [])) or 'itself'}"
                                " (cpp/LAYERS.md)")
    return problems


def include_circles(files: list[Path], edited: dict[Path, str] | None = None) -> list[list[str]]:
    """Include circles between files: each as the files it runs through."""
    graph: dict[Path, list[Path]] = {}
    for path in files:
        targets = (resolve(path, n) for n in includes(path, edited or {}))
        graph[path] = [t for t in targets if t is not None]
    circles: list[list[str]] = []
    state: dict[Path, int] = {}  # 1: on the current path, 2: done
    stack: list[Path] = []

    def visit(node: Path) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                circle = [*stack[stack.index(nxt):], nxt]
                circles.append([p.relative_to(CPP).as_posix() for p in circle])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return circles


def cpp_files() -> list[Path]:
    return sorted(p for p in CPP.rglob("*") if p.suffix in (".cpp", ".hpp", ".h", ".def") and p.is_file())


def test_the_table_names_every_folder_in_an_order_without_circles() -> None:
    on_disk = {p.name for p in SRC.iterdir() if p.is_dir()} | set(OUTER)
    assert set(LAYERS) == on_disk, "cpp/LAYERS.md's rows are the folders of cpp/src (plus bindings, tools)"
    assert {p.name for p in (INCLUDE / "ukdpack").iterdir()} <= on_disk, "public headers sit in a layer's folder"
    order = list(LAYERS)
    for folder, allowed in LAYERS.items():
        below = order[:order.index(folder)]
        assert set(allowed) <= set(below), f"{folder} may include only folders above it in the table: {allowed}"
        if folder in OUTER:
            continue
        readme = SRC / folder / "README.md"
        assert readme.is_file(), f"cpp/src/{folder} has no README.md"
        said = re.search(r"^May include: (.*?) \(see `cpp/LAYERS.md`\)\.$", readme.read_text(encoding="utf-8"), re.M)
        assert said is not None, f"{readme.relative_to(REPO)} says which folders it may include"
        assert said.group(1) == (", ".join(allowed) or "nothing of ukdpack"), f"{readme.relative_to(REPO)}: as the table"
    cmake = (REPO / "CMakeLists.txt").read_text(encoding="utf-8")
    listed = re.search(r"set\(UKDPACK_RUNTIME_FOLDERS ([^)]*)\)", cmake)
    assert listed is not None and listed.group(1).split() == [f for f in order if f not in OUTER]


def test_every_include_goes_down_a_layer_or_stays_in_its_folder() -> None:
    problems = include_problems(cpp_files())
    assert not problems, "\n".join(problems)


def test_no_include_circle_between_files() -> None:
    circles = include_circles(cpp_files())
    assert not circles, "\n".join(" -> ".join(c) for c in circles)


def test_the_checks_catch_the_json_layer_reading_the_model() -> None:
    """The circle the layout removed: the JSON tape included the descriptor model, whose
    parsers read the tape. Written again, both checks refuse it."""
    tape = SRC / "json" / "json_tape.hpp"
    reader = SRC / "model" / "object_reader.hpp"
    model = INCLUDE / "ukdpack" / "model" / "descriptors.hpp"
    edited = {
        tape: tape.read_text(encoding="utf-8").replace('#include "ukdpack/json/json_text.hpp"',
                                                       '#include "ukdpack/model/descriptors.hpp"'),
        # The model's header reaching the tape (through its reader) closes the circle.
        model: model.read_text(encoding="utf-8") + '#include "model/object_reader.hpp"\n',
        reader: reader.read_text(encoding="utf-8") + '#include "json/json_tape.hpp"\n',
    }
    assert include_problems([tape], edited) == [
        'src/json/json_tape.hpp includes "ukdpack/model/descriptors.hpp": json may include only base'
        " (cpp/LAYERS.md)"]
    circles = include_circles([tape, model, reader], edited)
    assert any({"src/json/json_tape.hpp", "include/ukdpack/model/descriptors.hpp"} <= set(c) for c in circles)
    assert include_problems([tape]) == [] and include_circles([tape, model, reader]) == []


CPP_PATH = re.compile(r"\bcpp/(?:src|include|bindings|tools)/[\w/.{},-]*\w")


def test_paths_of_cpp_files_the_docs_and_comments_name_exist() -> None:
    """A doc or comment that names a file of cpp/ names one that is there (after a move)."""
    tracked = subprocess.run(["git", "ls-files", "README.md", "docs", "bench", "python", "cmake", "cpp", "tests",
                              "scripts", "examples", "CMakeLists.txt"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    missing = []
    for name in tracked:
        if not name.endswith((".md", ".py", ".cpp", ".hpp", ".cmake", ".txt", ".sh", ".pyi")):
            continue
        if name == "tests/python/test_layers_cpp.py":
            continue
        for n, line in enumerate((REPO / name).read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for ref in CPP_PATH.findall(line):
                if "*" in ref or ref.endswith(".o"):  # a pattern; a build log's object
                    continue
                stem, brace, rest = ref.partition("{")
                paths = [stem + alt for alt in rest.rstrip("}").split(",")] if brace else [ref]
                missing += [f"{name}:{n}: {p}" for p in paths if not (REPO / p).exists()]
    assert not missing, "\n".join(missing)
