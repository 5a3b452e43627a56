"""The docs stand alone: every relative link of README.md and docs/*.md names a path
of the repository (and an anchor of a linked markdown file, a heading of it), and no
doc refers to a design document outside the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
# [text](target) outside code: inline links; images too. Autolinks and URLs are skipped.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def _prose(path: Path) -> str:
    """The text of a doc without code blocks and code spans (links there are examples)."""
    return CODE_SPAN.sub("", FENCE.sub("", path.read_text(encoding="utf-8")))


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors of a markdown file's headings."""
    out = set()
    for line in FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
            out.add(slug)
    return out


def _links() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        for m in LINK.finditer(_prose(doc)):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            out.append((doc.relative_to(REPO).as_posix(), target))
    return out


LINKS = _links()


def test_the_docs_have_links() -> None:
    assert len(LINKS) > 20


@pytest.mark.parametrize(("doc", "target"), LINKS, ids=[f"{d}->{t}" for d, t in LINKS])
def test_relative_link_names_a_path_of_the_repository(doc: str, target: str) -> None:
    path_part, _, anchor = target.partition("#")
    base = (REPO / doc).parent
    path = (base / path_part).resolve() if path_part else REPO / doc
    assert path.is_relative_to(REPO), f"{doc}: link {target} leaves the repository"
    assert path.exists(), f"{doc}: link {target}: {path.relative_to(REPO)} does not exist"
    if anchor and path.suffix == ".md":
        assert anchor in _anchors(path), f"{doc}: link {target}: no heading #{anchor}"


@pytest.mark.parametrize("doc", DOCS, ids=[d.relative_to(REPO).as_posix() for d in DOCS])
def test_no_doc_refers_to_the_design_document(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    assert "SPEC" not in text, f"{doc.relative_to(REPO)} mentions SPEC; the docs stand alone"


def test_no_source_comment_cites_a_document_outside_the_repository() -> None:
    """Comments point at docs/ (which ship), never at a design document that does not."""
    cited = re.compile(r"\bSPEC \d")
    tracked = subprocess.run(["git", "ls-files", "python", "cpp", "tests", "cmake", "scripts",
                              "bench", "CMakeLists.txt"], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout.split()
    found = [f"{name}:{n}" for name in tracked
             if name.endswith((".py", ".cpp", ".hpp", ".cmake", ".sh", ".txt"))
             for n, line in enumerate((REPO / name).read_text(encoding="utf-8",
                                                               errors="replace").splitlines(), 1)
             if cited.search(line)]
    assert not found, f"comments cite SPEC sections: {found}"
