"""The documentation stands on its own: every relative link in README.md and docs/*.md reaches a
file (and heading) of the repository, and the code refers to no document outside it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# A reference to a document that is not in the repository: the project's former planning documents
# (`design.md §5`, `sources.md §3.6`), issue and turn numbers, numbered design invariants. A page of
# this repository (`docs/sources.md`) is not one. The comment sweep script uses the same patterns.
OUTSIDE_REFERENCE = re.compile(
    r"(?<![\w/])(?:design|sources)\.md|§|shared/docs|example-evidence"
    r"|\bissues? #?\d|\bissue's\b|\bturns? \d|\binvariants? \d|\bdesign invariant",
    re.IGNORECASE,
)
SCANNED = ("pipeline", "sql", "tests", "bench", "deploy", "reports", "README.md", "gonka-evidence.toml")

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """Markdown without code blocks and inline code, where link syntax is not a link."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = text.replace("`", "").replace("*", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        m = re.match(r"^#{1,6} (.+?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(_prose(page.read_text())) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def test_the_docs_pages_exist_and_the_index_lists_them():
    names = {p.name for p in PAGES if p.parent.name == "docs"}
    assert {"README.md", "data-model.md", "sources.md", "evidence.md", "schema.md", "commands.md"} <= names
    assert {"contributing.md", "architecture.md", "configuration.md", "deployment.md", "api.md"} <= names
    index = relative_links(ROOT / "docs" / "README.md")
    for name in names - {"README.md"}:
        assert any(t.split("#")[0] == name for t in index), f"docs/README.md does not link {name}"
    assert "docs/README.md" in relative_links(ROOT / "README.md")


def test_the_slugs_follow_github():
    assert slug("What `run` does") == "what-run-does"
    assert slug("Warehouse schema (public views)") == "warehouse-schema-public-views"
    assert slug("/metrics scrapes") == "metrics-scrapes"
    assert slug("`tracker_findings`") == "tracker_findings"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_reaches_a_file_and_heading(page: Path):
    links = relative_links(page)
    assert links, f"{page.name}: no relative links found (the link pattern is broken)"
    broken = []
    for target in links:
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif not dest.resolve().is_relative_to(ROOT):
            broken.append(f"{target}: outside the repository")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_outside_reference_pattern():
    for text in (
        "(design.md §5)",
        "sources.md §3.6",
        "issue 12",
        "(issues 2 and 3,",
        "Issue 3: each",
        "the logs issue's engine events",
        "turn 2",
        "design invariant 2",
        "Invariants 1–2",
        "shared/docs/sources.md",
        "example-evidence-issue.txt",
    ):
        assert OUTSIDE_REFERENCE.search(text), text
    for text in (
        "docs/sources.md, payloads",
        "see docs/data-model.md",
        "EngineCore encountered an issue.",
        "a governance issue",
        "returns 2 rows",
        "test_cmh_invariant_under_reordering_strata",
    ):
        assert not OUTSIDE_REFERENCE.search(text), text


def _outside_references() -> list[str]:
    found = []
    for name in SCANNED:
        base = ROOT / name
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for file in files:
            rel = file.relative_to(ROOT).as_posix()
            if file == Path(__file__).resolve() or "__pycache__" in file.parts or "/data/" in f"/{rel}":
                continue
            data = file.read_bytes()
            if b"\0" in data:  # binary: SQLite files, compiled extensions
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            found += [
                f"{rel}:{n}: {line.strip()[:120]}"
                for n, line in enumerate(text.splitlines(), 1)
                if OUTSIDE_REFERENCE.search(line)
            ]
    return found


def test_no_file_refers_to_a_document_outside_the_repository():
    found = _outside_references()
    assert not found, f"{len(found)} reference(s) to documents outside the repository:\n" + "\n".join(found)
