"""Slow end-to-end cases move to the heavy tier only where a faster test covers the same behaviour: each heavy
marker in tests/ says, in a comment on its line or in the comment lines just above it, either
``stands in the default tier: tests/PATH.py::TEST[, ...]`` (each named test a function of that file, not
itself heavy as a whole) or ``no default-tier stand-in: WHY``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STANDS_IN = "stands in the default tier:"
NO_STAND_IN = "no default-tier stand-in:"
MARKER = re.compile(r"\bmark\.heavy\b")
NAMED = re.compile(r"(tests/[\w/]+\.py)::(\w+)")


def _marker_note(lines: list[str], i: int) -> str:
    """The marker's line and the comment lines just above it, joined."""
    start = i
    while start > 0 and lines[start - 1].lstrip().startswith("#"):
        start -= 1
    return " ".join(line.strip() for line in lines[start : i + 1])


def _is_heavy(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "heavy"


def _default_tier_functions(path: Path) -> set[str]:
    """The names of the test functions of `path` that are not heavy as a whole (heavy params may be)."""
    module = ast.parse(path.read_text(), str(path))
    for node in module.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            if any(_is_heavy(n) for n in ast.walk(node.value)):
                return set()
    return {
        node.name
        for node in module.body
        if isinstance(node, ast.FunctionDef) and not any(_is_heavy(d) for d in node.decorator_list)
    }


def heavy_markers(root: Path = ROOT) -> tuple[int, list[str]]:
    """How many heavy markers tests/ under `root` holds, and ``path:line what is wrong`` for each marker
    whose comment does not follow the convention or names a test that does not stand for it."""
    count, problems = 0, []
    for path in sorted((root / "tests").rglob("*.py")):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if not MARKER.search(line) or line.lstrip().startswith("#"):
                continue
            count += 1
            where = f"{path.relative_to(root)}:{i + 1}"
            note = _marker_note(lines, i)
            if (STANDS_IN in note) == (NO_STAND_IN in note):
                problems.append(f"{where} says neither or both of {STANDS_IN!r} and {NO_STAND_IN!r}")
                continue
            if NO_STAND_IN in note:
                continue
            named = NAMED.findall(note.split(STANDS_IN, 1)[1])
            if not named:
                problems.append(f"{where} names no tests/PATH.py::TEST after {STANDS_IN!r}")
            for file, test in named:
                target = root / file
                if not target.is_file():
                    problems.append(f"{where} names {file}, which does not exist")
                elif test not in _default_tier_functions(target):
                    problems.append(f"{where} names {file}::{test}, no default-tier test function of that file")
    return count, problems


def test_every_heavy_marker_names_its_default_tier_stand_in_or_says_why_there_is_none():
    count, problems = heavy_markers()
    assert count > 0
    assert problems == [], "\n".join(problems)


def test_a_heavy_marker_without_the_comment_or_naming_a_missing_test_is_found(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    heavy = "pytest.mark." + "heavy"
    (tests / "test_fast.py").write_text(
        f"import pytest\n\ndef test_fast():\n    pass\n\n@{heavy}  # {NO_STAND_IN} it is slow\ndef test_slow():\n"
        "    pass\n"
    )
    (tests / "test_whole.py").write_text(
        f"import pytest\n\npytestmark = {heavy}  # {NO_STAND_IN} a cluster\n\ndef test_all():\n    pass\n"
    )
    (tests / "test_heavy.py").write_text(
        "import pytest\n\n"
        f"# {STANDS_IN}\n# tests/test_fast.py::test_fast\n@{heavy}\ndef test_a():\n    pass\n\n"
        f"@{heavy}\ndef test_b():\n    pass\n\n"
        f"@{heavy}  # {STANDS_IN} tests/test_fast.py::test_gone\ndef test_c():\n    pass\n\n"
        f"@{heavy}  # {STANDS_IN} tests/test_fast.py::test_slow, tests/test_whole.py::test_all\ndef test_d():\n"
        "    pass\n\n"
        f"@pytest.mark.parametrize('n', [1, pytest.param(2, marks={heavy})])  # {STANDS_IN} the case n=1\n"
        "def test_e(n):\n    pass\n"
    )
    count, problems = heavy_markers(tmp_path)
    assert count == 7
    assert [p.split(" ", 1)[0] for p in problems] == [
        "tests/test_heavy.py:9",
        "tests/test_heavy.py:13",
        "tests/test_heavy.py:17",
        "tests/test_heavy.py:17",
        "tests/test_heavy.py:21",
    ]
    assert "test_gone, no default-tier test function" in problems[1]
    assert "test_slow," in problems[2] and "test_all," in problems[3] and "names no tests/PATH.py" in problems[4]
