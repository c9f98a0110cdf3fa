"""The facade's shape: one `Warehouse` whose methods call one task each, which every command calls; module-level
functions that are those methods on the warehouse of their arguments (no near-copies); `Context`, the older
facade, a deprecated alias of the same methods; result types beside the stage that makes them, network
orchestration once in `pipeline.network`."""

from __future__ import annotations

import ast
import inspect
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
    "run",
    "report",
    "bundle",
    "verify",
)
# Commands that need no warehouse, or not always: module functions (a source's doctor; the lake's commands).
WAREHOUSELESS = ("doctor", "network_ingest", "network_evidence", "network_quarantine")


def _module_functions() -> dict[str, ast.FunctionDef]:
    tree = ast.parse((ROOT / "pipeline" / "api.py").read_text())
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def _body(function: ast.FunctionDef) -> list[ast.stmt]:
    """The statements of `function` after its docstring."""
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return body


def _is_warehouse_resolve(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "resolve"
        and isinstance(node.func.value, ast.Name | ast.Attribute)
        and (getattr(node.func.value, "id", None) or getattr(node.func.value, "attr", None)) == "Warehouse"
    )


def test_each_command_function_is_one_call_of_its_warehouse_method():
    """`with Warehouse.resolve(...) as wh: return wh.<name>(...)`, nothing else."""
    functions = _module_functions()
    wrong = []
    for name in COMMANDS:
        body = _body(functions[name])
        block = body[0] if len(body) == 1 and isinstance(body[0], ast.With) else None
        inner = block.body if block is not None else []
        call = inner[0].value if len(inner) == 1 and isinstance(inner[0], ast.Return) else None
        ok = (
            block is not None
            and _is_warehouse_resolve(block.items[0].context_expr)
            and isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == name
        )
        if not ok:
            wrong.append(name)
    assert wrong == [], f"not `with Warehouse.resolve(...) as wh: return wh.{{name}}(...)`: {wrong}"
    assert all(callable(getattr(api.Warehouse, name)) for name in (*COMMANDS, "doctor"))


def test_the_context_is_a_deprecated_alias_of_the_warehouse_methods():
    """`Context`'s command methods are the `Warehouse` methods themselves (same signature), each on a
    warehouse opened for the call; it keeps every name of the public contract."""
    for name in COMMANDS:
        method = getattr(api.Context, name)
        assert method.__wrapped__ is getattr(api.Warehouse, name), name
        assert inspect.signature(method) == inspect.signature(getattr(api.Warehouse, name)), name
    assert "Deprecated" in (api.Context.__doc__ or "")


def test_the_commands_call_the_warehouse_not_the_context_nor_the_module_functions():
    """command -> Warehouse -> stage: no command module calls `Context` or a module-level command function
    (those needing no warehouse aside)."""
    wrong = []
    for path in sorted((ROOT / "pipeline" / "cli" / "commands").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name) and node.id == "Context":
                wrong.append(f"{path.name}:{node.lineno} Context")
            if isinstance(node, ast.Attribute) and node.attr in (*COMMANDS, "open_warehouse", "Context"):
                if isinstance(node.value, ast.Name) and node.value.id == "api":
                    wrong.append(f"{path.name}:{node.lineno} api.{node.attr}")
    assert wrong == []


def test_the_network_functions_are_the_facade_methods_themselves():
    for name in ("network_ingest", "network_evidence", "network_quarantine"):
        assert getattr(api, name) is getattr(api.Context, name), name
    assert "open_warehouse" in _module_functions()
    assert len(_body(_module_functions()["open_warehouse"])) == 1  # Warehouse.resolve(...).open()


def test_a_resolved_warehouse_opens_on_first_use(tmp_path):
    """A command whose input is refused first creates no warehouse: `Warehouse.resolve` opens it when a method
    first needs it, `open()` at once."""
    from pipeline.core.errors import UserError

    path = tmp_path / "w.duckdb"
    with api.Warehouse.resolve(path, write=True) as wh, pytest.raises(UserError):
        wh.ingest(str(tmp_path / "no-such-store"))
    assert not path.exists()
    with api.Warehouse.resolve(path, write=True).open() as wh:
        assert wh.writable and path.exists()


@pytest.mark.parametrize(
    ("name", "module"),
    [
        ("Evidence", "pipeline.output.evidence"),
        ("ReportWritten", "pipeline.output.report.task"),
        ("BundleWritten", "pipeline.output.bundle"),
        ("Verified", "pipeline.output.bundle"),
        ("BuildsLoaded", "pipeline.ingest.builds"),
        ("SourceReport", "pipeline.output.doctor.report"),
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
