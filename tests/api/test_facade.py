"""The facade's shape: one `Context` whose methods call one task each, module-level functions that are
those methods (no near-copies), result types beside the stage that makes them, network orchestration
once in `pipeline.network`."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from pipeline import api

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = (
    "ingest",
    "ingest_logs",
    "ingest_json",
    "load_builds",
    "infer_builds",
    "check_builds",
    "doctor",
    "run",
    "report",
    "bundle",
    "verify",
)


def _module_functions() -> dict[str, ast.FunctionDef]:
    tree = ast.parse((ROOT / "pipeline" / "api.py").read_text())
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def _body(function: ast.FunctionDef) -> list[ast.stmt]:
    """The statements of `function` after its docstring."""
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return body


def test_each_command_function_is_one_call_of_its_context_method():
    functions = _module_functions()
    wrong = []
    for name in COMMANDS:
        body = _body(functions[name])
        call = body[0].value if len(body) == 1 and isinstance(body[0], ast.Return) else None
        method = call.func if isinstance(call, ast.Call) else None
        ok = (
            isinstance(method, ast.Attribute)
            and method.attr == name
            and isinstance(method.value, ast.Call)
            and isinstance(method.value.func, ast.Name)
            and method.value.func.id == "Context"
        )
        if not ok:
            wrong.append(name)
    assert wrong == [], f"not `return Context(...).{{name}}(...)`: {wrong}"
    assert all(callable(getattr(api.Context, name)) for name in COMMANDS)


def test_the_network_functions_are_the_facade_methods_themselves():
    for name in ("network_ingest", "network_evidence", "network_quarantine"):
        assert getattr(api, name) is getattr(api.Context, name), name
    assert "open_warehouse" in _module_functions()
    assert len(_body(_module_functions()["open_warehouse"])) == 1  # Context(...).open(write=...)


@pytest.mark.parametrize(
    ("name", "module"),
    [
        ("Evidence", "pipeline.output.evidence"),
        ("ReportWritten", "pipeline.output.report.task"),
        ("BundleWritten", "pipeline.output.bundle"),
        ("Verified", "pipeline.output.bundle"),
        ("BuildsLoaded", "pipeline.ingest.builds"),
        ("SourceReport", "pipeline.output.doctor"),
    ],
)
def test_result_types_live_beside_the_stage_that_makes_them(name, module):
    assert getattr(api, name).__module__ == module
    assert name in api.__all__


def test_a_context_resolves_its_warehouse_once_as_open_warehouse_does(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GONKA_EVIDENCE_WAREHOUSE", raising=False)
    assert (api.Context().path, api.Context().named) == (Path("warehouse.duckdb"), False)
    assert (api.Context(tmp_path / "w.duckdb").path, api.Context(tmp_path / "w.duckdb").named) == (
        tmp_path / "w.duckdb",
        True,
    )
    monkeypatch.setenv("GONKA_EVIDENCE_WAREHOUSE", "env.duckdb")
    assert (api.Context().path, api.Context().named) == (Path("env.duckdb"), True)
    assert api.resolve_warehouse() == Path("env.duckdb")


def test_the_network_job_itself_refuses_a_lake_inside_a_copy(tmp_path):
    """The lake's path checks are part of the network job, so every caller (the facade, the benchmarks,
    the tests) gets them, not only the command line."""
    from pipeline.core.paths import DATA_SAMPLES_DIR
    from pipeline.core.roles import PathError
    from pipeline.network.jobs import network_ingest

    store = tmp_path / "store"
    shutil.copytree(DATA_SAMPLES_DIR / "store", store)
    before = sorted(p.name for p in store.iterdir())
    with pytest.raises(PathError, match="would overwrite the warehouse or a source"):
        network_ingest([str(store)], store / "lake", workers=0)
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "notes.txt").write_text("theirs\n")
    with pytest.raises(PathError, match="is not a lake"):
        network_ingest([str(store)], tmp_path / "theirs", workers=0)
    assert sorted(p.name for p in store.iterdir()) == before
