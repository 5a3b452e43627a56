"""The Python package's layers (python/ukdpack/README.md): every import points down or
within a layer, never up. Read from the source with ``ast``, so an import inside a
function or under ``TYPE_CHECKING`` counts as much as one at the top."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "ukdpack"

#: Low to high. A module belongs to the layer of its subpackage; the modules at the
#: package top belong to ``base`` unless named here.
LAYERS = ("base", "authored", "produce", "shard", "tools", "commands")
TOP_MODULES = {
    "progress": "shard",  # a pack's progress lines (it names the walk's skipped files)
    "cli": "commands",
    "__main__": "commands",
}
SUBPACKAGES = {
    "authored": "authored", "produce": "produce", "remote": "produce", "shard": "shard",
    "tools": "tools",
    "doctor": "commands", "generate": "commands", "init": "commands", "resident": "commands",
}


def layer_of(module: str) -> str:
    """The layer of a module named ``ukdpack.x[.y]`` (``ukdpack`` itself is base)."""
    parts = module.split(".")[1:]
    if not parts:
        return "base"
    if parts[0] in SUBPACKAGES:
        return SUBPACKAGES[parts[0]]
    return TOP_MODULES.get(parts[0], "base")


def module_name(path: Path, package: Path = PACKAGE) -> str:
    """``ukdpack.authored.rules`` for python/ukdpack/authored/rules.py."""
    rel = path.relative_to(package.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, package: Path = PACKAGE) -> list[tuple[int, str]]:
    """(line, imported module) of every import of ``ukdpack`` in one file; ``from
    ukdpack import x`` names ``ukdpack.x``, which may be a module or a name of the
    package itself (base either way, unless x is a subpackage or a named module)."""
    out = []
    name = module_name(path, package)
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the file's package, up level - 1
                anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            out += [(node.lineno, f"{base}.{a.name}" if base == "ukdpack" else base)
                    for a in node.names]
    return [(line, name) for line, name in out if re.match(r"ukdpack(\.|$)", name)]


def up_imports() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        here = layer_of(module_name(path))
        for line, name in imports_of(path):
            there = layer_of(name)
            if LAYERS.index(there) > LAYERS.index(here):
                found.append(f"{path.relative_to(PACKAGE)}:{line}: {here} imports {name} ({there})")
    return found


def test_no_import_runs_up_a_layer() -> None:
    assert up_imports() == []


def test_every_subpackage_has_a_layer() -> None:
    """A new subpackage must be placed, or it would count as base and pass unseen."""
    folders = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert folders == set(SUBPACKAGES)


def test_the_check_sees_an_import_up_a_layer(tmp_path: Path) -> None:
    """The check reads imports inside functions, relative ones and ``from ukdpack import``."""
    f = tmp_path / "ukdpack" / "authored" / "x.py"
    f.parent.mkdir(parents=True)
    f.write_text("def g():\n    from ..shard import pack\n    from ukdpack import cli\n"
                 "import ukdpack.produce.plan\n")
    got = [(line, name, layer_of(name)) for line, name in sorted(imports_of(f, f.parents[1]))]
    assert got == [(2, "ukdpack.shard", "shard"), (3, "ukdpack.cli", "commands"),
                   (4, "ukdpack.produce.plan", "produce")]

