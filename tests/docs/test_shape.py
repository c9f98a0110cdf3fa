"""The shape of the code: no function of the pipeline longer than MAX_FUNCTION_LINES, and ruff's
complexity and statement limits selected, so that a long function is split by the steps it names."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_FUNCTION_LINES = 120


def long_functions(package: Path, root: Path = ROOT, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``path:line name (N lines)`` for every function or method under `package` longer than `limit`
    lines (decorators excluded, docstring included)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_pipeline_function_is_longer_than_the_limit():
    found = long_functions(ROOT / "pipeline")
    assert found == [], "split these by the steps they name:\n" + "\n".join(found)


def test_a_long_function_is_named(tmp_path):
    (tmp_path / "short.py").write_text("def short():\n" + "    x = 1\n" * 119)
    (tmp_path / "long.py").write_text("class C:\n    @staticmethod\n    def long():\n" + "        x = 1\n" * 120)
    assert long_functions(tmp_path, tmp_path) == ["long.py:3 long (121 lines)"]


def test_ruff_limits_the_pipelines_complexity_and_statements():
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert {"C90", "PLR0915"} <= set(lint["select"])
    assert lint["mccabe"]["max-complexity"] == 15 and lint["pylint"]["max-statements"] == 40
    assert not any(
        rule in ignored
        for pattern, ignored in lint.get("per-file-ignores", {}).items()
        if "pipeline" in pattern
        for rule in ("C90", "PLR0915")
    )
