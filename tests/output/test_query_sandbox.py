"""`query` is read-only and sandboxed by the engine: no ATTACH/COPY/EXPORT/INSTALL/LOAD, no file readers,
no SET; the warehouse and the file system are left exactly as they were."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from tests.factories import sample_warehouse
from tests.helpers import frame

runner = CliRunner()


@pytest.fixture(scope="module")
def warehouse(request, timeline) -> Path:
    return sample_warehouse(request, timeline.copy(last_epoch=4)).path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _query(warehouse: Path, sql: str):
    return runner.invoke(app, ["query", sql, "-w", str(warehouse)])


ESCAPES = {
    "attach a writable database": "ATTACH '{dir}/other.duckdb' AS s (READ_WRITE)",
    "re-attach the warehouse read-write": "ATTACH '{wh}' AS w2 (READ_WRITE)",
    "copy to a file": "COPY (SELECT 1) TO '{dir}/leak.csv'",
    "export the database": "EXPORT DATABASE '{dir}/export'",
    "read a system file": "SELECT * FROM read_text('/etc/passwd')",
    "read a csv": "SELECT * FROM read_csv('/etc/passwd')",
    "list a directory": "SELECT * FROM glob('/root/*')",
    "install an extension": "INSTALL httpfs",
    "load an extension": "LOAD httpfs",
    "turn the sandbox off": "SET enable_external_access = true",
    "unlock the configuration": "SET lock_configuration = false",
    "delete rows": "DELETE FROM raw_sessions",
    "create a secret": "CREATE SECRET s (TYPE s3, KEY_ID 'x', SECRET 'y')",
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_query_cannot_escape_its_sandbox(warehouse, name):
    before = _digest(warehouse)
    files_before = sorted(p.name for p in warehouse.parent.iterdir())
    sql = ESCAPES[name].format(dir=warehouse.parent, wh=warehouse)
    result = _query(warehouse, sql)
    assert result.exit_code == 1, result.output
    assert result.output.startswith("error: ") and "Traceback" not in result.output
    assert _digest(warehouse) == before
    assert sorted(p.name for p in warehouse.parent.iterdir()) == files_before


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_the_engine_itself_refuses_every_escape(warehouse, name):
    """`query` refuses a statement that is not a query by its kind before it runs; the sandboxed connection
    must refuse every escape on its own all the same (the engine enforces it, not the check)."""
    import duckdb

    from pipeline.warehouse.database import open_sandboxed

    before = _digest(warehouse)
    con = open_sandboxed(warehouse)
    try:
        with pytest.raises(duckdb.Error) as refused:
            con.execute(ESCAPES[name].format(dir=warehouse.parent, wh=warehouse))
    finally:
        con.close()
    if name.startswith(("turn the sandbox off", "unlock")):
        assert "lock" in str(refused.value).lower()
    assert _digest(warehouse) == before


def test_a_write_or_an_unknown_table_says_what_query_takes(warehouse):
    for sql, kind in (("DELETE FROM inferences", "DELETE"), ("SELECT 1; DROP VIEW escrows", "DROP")):
        result = _query(warehouse, sql)
        assert result.exit_code == 1
        assert result.output == f"error: the warehouse is read-only here: SELECT only (this is a {kind} statement)\n"
    result = _query(warehouse, "SELECT * FROM inference")
    assert result.exit_code == 1 and len(result.output.splitlines()) == 1
    assert result.output.startswith("error: no table or view inference in the warehouse (closest views: inferences")
    assert "`gonka-evidence query --list`" in result.output
    result = _query(warehouse, "SELECT * FROM zzzqqq")
    assert result.exit_code == 1 and "closest" not in result.output and "docs/schema.md" in result.output


def test_the_attack_chain_of_attach_use_detach_leaves_the_warehouse_whole(warehouse):
    sessions = frame(warehouse, "SELECT count(*) AS n FROM raw_sessions")["n"][0]
    chain = (
        f"ATTACH '{warehouse.parent}/x.duckdb' AS s (READ_WRITE); USE s; DETACH warehouse; "
        f"ATTACH '{warehouse}' AS w (READ_WRITE); DELETE FROM w.raw_sessions"
    )
    result = _query(warehouse, chain)
    assert result.exit_code == 1
    assert frame(warehouse, "SELECT count(*) AS n FROM raw_sessions")["n"][0] == sessions > 0
    assert not (warehouse.parent / "x.duckdb").exists()


def test_ordinary_and_named_queries_still_work_in_the_sandbox(warehouse, timeline):
    result = runner.invoke(
        app, ["query", "SELECT count(*) AS n FROM inferences", "--format", "csv", "-w", str(warehouse)]
    )
    assert result.exit_code == 0, result.output
    assert result.output.split() == ["n", str(frame(warehouse, "SELECT count(*) AS n FROM inferences")["n"][0])]
    named = runner.invoke(
        app,
        [
            "query",
            "host_executor_counts",
            "--param",
            f"host={timeline.focal_host}",
            "--format",
            "csv",
            "-w",
            str(warehouse),
        ],
    )
    assert named.exit_code == 0, named.output
    assert named.output.splitlines()[0].startswith("epoch_id")


def test_a_sandbox_leaves_the_other_connections_of_its_process_as_they_were(warehouse):
    """DuckDB shares one instance between a process's connections to a file: a sandbox opened on it must not
    lock the settings of the others (a second read-only open failed on its time zone) nor share its own."""
    from pipeline.warehouse.database import open_read_only, open_sandboxed

    def settings(con) -> tuple:
        return con.execute(
            "SELECT current_setting('lock_configuration'), current_setting('enable_external_access')"
        ).fetchone()

    held = open_read_only(warehouse)
    sandbox = open_sandboxed(warehouse)
    again = open_read_only(warehouse)
    try:
        assert settings(sandbox) == (True, False)
        assert settings(held) == settings(again) == (False, True)
        count = "SELECT count(*) FROM raw_sessions"
        assert sandbox.execute(count).fetchone() == held.execute(count).fetchone() == again.execute(count).fetchone()
        assert sandbox.execute("SELECT current_database()").fetchone() == (warehouse.stem,)
    finally:
        for con in (held, sandbox, again):
            con.close()


def test_a_sandbox_on_a_warehouse_this_process_writes_is_a_one_line_error(warehouse, tmp_path):
    import shutil

    from pipeline.warehouse.database import WarehouseError, open_for_write, open_sandboxed

    copy = tmp_path / "warehouse.duckdb"
    shutil.copy(warehouse, copy)
    writer = open_for_write(copy)
    try:
        with pytest.raises(WarehouseError) as refused:
            open_sandboxed(copy)
    finally:
        writer.close()
    assert str(refused.value) == f"{copy}: the warehouse is open for writing in this process; close it first"
    open_sandboxed(copy).close()  # once the writer is closed
