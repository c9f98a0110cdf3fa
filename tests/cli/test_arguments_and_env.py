"""Arguments and environment variables that cannot be right end with one line (exit 1) or a usage
error (exit 2), never a traceback: numbers past what the warehouse holds, widths past a timedelta,
garbage in GONKA_EVIDENCE_* variables, a table name holding a quote, a full disk under an ingest."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from pipeline.core.paths import DATA_SAMPLES_DIR
from tests.factories import data_samples_warehouse

runner = CliRunner()
HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"
SCRIPT = str(Path(sys.executable).with_name("gonka-evidence"))


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    return data_samples_warehouse(tmp_path_factory.mktemp("args") / "w.duckdb")


@pytest.mark.parametrize(
    "args",
    [
        ["evidence", "epoch-summary", "--epoch", str(2**70)],
        ["evidence", "tracker", "--epoch", "3", "--compare", str(2**64)],
        ["bundle", "--epoch", str(2**63), "--out", "b"],
        ["report", "epoch", str(2**63)],
        ["query", "SELECT 1", "--max-rows", "-1"],
        ["query", "SELECT 1", "--timeout", "nan"],
        ["query", "SELECT 1", "--timeout", "1e300"],
    ],
)
def test_numbers_past_what_the_warehouse_holds_are_usage_errors(warehouse, args):
    result = runner.invoke(
        app, [*args, "--host", HOST, "-w", str(warehouse)] if args[0] != "query" else [*args, "-w", str(warehouse)]
    )
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "Invalid value" in result.output


@pytest.mark.parametrize("limit", ["lots", "0KB", "-2GB"])
def test_a_network_memory_limit_that_is_no_size_is_one_line_before_anything_is_written(tmp_path, limit):
    lake = tmp_path / "lake"
    copy = str(DATA_SAMPLES_DIR / "network" / "host-0")
    result = runner.invoke(app, ["network", "ingest", copy, "--lake", str(lake), "--memory-limit", limit])
    assert result.exit_code == 1
    assert result.output == f"error: --memory-limit {limit!r}: expected a size of at least 1MB, such as 512MB or 2GB\n"
    assert not lake.exists()


def test_a_bucket_wider_than_any_window_is_one_line(warehouse):
    result = runner.invoke(
        app, ["evidence", "timeline", "--host", HOST, "--bucket", "99999999999d", "-w", str(warehouse)]
    )
    assert result.exit_code == 1 and result.output.startswith("error: --bucket '99999999999d' is wider than any window")


READ_AT_IMPORT = {"GONKA_EVIDENCE_CHUNK_NONCES"}  # pipeline/ingest/store.py reads it as it is imported


@pytest.mark.parametrize("command", [["ingest", str(DATA_SAMPLES_DIR / "store")], ["query", "SELECT 1"]])
def test_a_warehouse_read_from_its_variable_is_refused_naming_the_variable(tmp_path, monkeypatch, command):
    """GONKA_EVIDENCE_WAREHOUSE fills --warehouse; a path it names that cannot be the warehouse was refused as
    "--warehouse PATH", an option nobody gave. Now the error names the variable."""
    monkeypatch.chdir(tmp_path)
    for name in [k for k in os.environ if k.startswith("GONKA_EVIDENCE_")]:
        monkeypatch.delenv(name)
    result = runner.invoke(app, command, env={"GONKA_EVIDENCE_WAREHOUSE": "/dev/null"})
    assert result.exit_code == 1, result.stderr
    assert result.stderr == "error: GONKA_EVIDENCE_WAREHOUSE /dev/null: a character device, not a warehouse file\n"
    given = runner.invoke(app, [*command, "-w", "/dev/null"])
    assert given.stderr == "error: --warehouse /dev/null: a character device, not a warehouse file\n"


def test_a_warehouse_and_an_output_of_one_path_name_where_each_came_from(tmp_path, monkeypatch):
    """`run -w w.duckdb` under GONKA_EVIDENCE_OUTPUT=w.duckdb was refused as "data-samples: warehouse w.duckdb
    and output w.duckdb": the samples set neither. Each is now named by the option or variable that set it."""
    monkeypatch.chdir(tmp_path)
    for name in [k for k in os.environ if k.startswith("GONKA_EVIDENCE_")]:
        monkeypatch.delenv(name)
    result = runner.invoke(app, ["run", "-w", "w.duckdb"], env={"GONKA_EVIDENCE_OUTPUT": "w.duckdb"})
    assert result.exit_code == 1 and result.stderr.startswith(
        "error: --warehouse w.duckdb and GONKA_EVIDENCE_OUTPUT w.duckdb name the same path; "
    ), result.stderr
    (tmp_path / "c.toml").write_text('warehouse = "w.duckdb"\noutput = "w.duckdb"\n')
    result = runner.invoke(app, ["run", "--config", "c.toml"])
    assert result.exit_code == 1 and result.stderr.startswith(
        "error: c.toml: warehouse w.duckdb and c.toml: output w.duckdb name the same path; "
    ), result.stderr


@pytest.mark.parametrize("with_config", [False, True], ids=["no config", "a config"])
@pytest.mark.parametrize(
    "variable, value, command, said",
    [
        ("GONKA_EVIDENCE_HOST", "nothost", ["evidence", "epoch-summary"], "GONKA_EVIDENCE_HOST 'nothost' is not a"),
        ("GONKA_EVIDENCE_HOST", "nothost", ["run"], "GONKA_EVIDENCE_HOST 'nothost' is not a"),
        ("GONKA_EVIDENCE_FINALITY_LAG", "soon", ["run"], "GONKA_EVIDENCE_FINALITY_LAG: finality_lag 'soon' is not a"),
        ("GONKA_EVIDENCE_BUILDS", "none.toml", ["run"], "GONKA_EVIDENCE_BUILDS "),
        ("GONKA_EVIDENCE_OUTPUT", "/dev/null", ["run"], "GONKA_EVIDENCE_OUTPUT /dev/null: a character device"),
        (
            "GONKA_EVIDENCE_HOST",
            "nothost",
            ["ingest-logs", str(DATA_SAMPLES_DIR / "vllm"), "--kind", "vllm", "--year", "2026"],
            "GONKA_EVIDENCE_HOST 'nothost' is not a",
        ),
    ],
)
def test_a_config_key_set_by_its_variable_is_refused_naming_the_variable(
    tmp_path, monkeypatch, variable, value, command, said, with_config
):
    """A value of GONKA_EVIDENCE_<KEY> over the config file's (or the samples') was refused as the config
    file's own ("c.toml: host 'nothost'…", "data-samples: …"): the file never held it. Now the error names
    the variable that did."""
    monkeypatch.chdir(tmp_path)
    for name in [k for k in os.environ if k.startswith("GONKA_EVIDENCE_")]:
        monkeypatch.delenv(name)
    if command[0] == "evidence":  # a warehouse to read: the host is checked after the warehouse is found
        shutil.copy(data_samples_warehouse(tmp_path / "base.duckdb"), tmp_path / "w.duckdb")
    args = [*command, "-w", "w.duckdb"]
    if with_config:
        host = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"
        (tmp_path / "c.toml").write_text(f'host = "{host}"\nwarehouse = "w.duckdb"\nfinality_lag = "6h"\n')
        args = [*command, "--config", "c.toml"]
    result = runner.invoke(app, args, env={variable: value})
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {said}"), lines


@pytest.mark.parametrize(
    "variable, value, command",
    [
        ("GONKA_EVIDENCE_DUCKDB_MEMORY", "garbage", ["query", "SELECT 1"]),
        ("GONKA_EVIDENCE_DUCKDB_MEMORY", "0KB", ["query", "SELECT 1"]),
        ("GONKA_EVIDENCE_QUERY_TEMP_LIMIT", "lots", ["query", "SELECT 1"]),
        ("GONKA_EVIDENCE_CHUNK_NONCES", "abc", ["ingest", str(DATA_SAMPLES_DIR / "store")]),
        ("GONKA_EVIDENCE_CHUNK_NONCES", "0", ["ingest", str(DATA_SAMPLES_DIR / "store")]),
        ("GONKA_EVIDENCE_INGEST_MEMORY", "-1GB", ["ingest", str(DATA_SAMPLES_DIR / "store")]),
        ("GONKA_EVIDENCE_WORKERS", "many", ["ingest", str(DATA_SAMPLES_DIR / "store")]),
        ("GONKA_EVIDENCE_THREADS", "many", ["query", "SELECT 1"]),
        ("GONKA_EVIDENCE_THREADS", "0", ["ingest", str(DATA_SAMPLES_DIR / "store")]),
        ("GONKA_EVIDENCE_PROCESSES", "none", ["ingest", str(DATA_SAMPLES_DIR / "store")]),
        ("GONKA_EVIDENCE_MEMORY", "plenty", ["query", "SELECT 1"]),
        ("GONKA_EVIDENCE_FINALITY_LAG", "soon", ["run"]),
        ("GONKA_EVIDENCE_NETWORK_MEMORY", "lots", ["network", "ingest", str(DATA_SAMPLES_DIR / "network" / "host-0")]),
    ],
)
def test_garbage_in_an_environment_variable_is_one_line_naming_it(tmp_path, monkeypatch, variable, value, command):
    """In a process of its own where a module reads the variable when it is first imported (this process imported
    it long before); in-process where the command reads it, as each invocation does anew."""
    warehouse = tmp_path / "w.duckdb"
    if command[0] == "query":
        shutil.copy(data_samples_warehouse(tmp_path / "base.duckdb"), warehouse)
    args = [*command, *(["--lake", "lake"] if command[0] == "network" else ["-w", str(warehouse)])]
    if variable in READ_AT_IMPORT:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), variable: value}
        done = subprocess.run([SCRIPT, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        code, stderr = done.returncode, done.stderr
    else:
        monkeypatch.chdir(tmp_path)
        for name in [k for k in os.environ if k.startswith("GONKA_EVIDENCE_")]:
            monkeypatch.delenv(name)
        result = runner.invoke(app, args, env={variable: value})
        code, stderr = result.exit_code, result.stderr
    assert code == 1, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and (variable in lines[0] or value in lines[0]), lines


@pytest.mark.parametrize(
    "variable, limit, command, what",
    [
        ("GONKA_EVIDENCE_INGEST_MEMORY", "10MB", ["ingest", str(DATA_SAMPLES_DIR / "store")], "the ingest"),
        (
            "GONKA_EVIDENCE_DUCKDB_MEMORY",
            "3MB",
            ["query", "SELECT count(*) FROM (SELECT x FROM range(5000000) t(x) ORDER BY x DESC)"],
            "the query",
        ),
        ("GONKA_EVIDENCE_DUCKDB_MEMORY", "3MB", ["report", "epoch", "3", "--host", HOST, "--out", "out"], "the report"),
    ],
)
def test_a_memory_limit_too_small_for_the_work_is_one_line_naming_the_variable(
    tmp_path, warehouse, variable, limit, command, what
):
    """16 threads in DuckDB's smallest workable pools: the command ends with one line naming the variable
    to raise, exit code 1, not DuckDB's OutOfMemoryException; a failed ingest leaves a failed run."""
    target = tmp_path / "w.duckdb"
    if command[0] != "ingest":
        shutil.copy(warehouse, target)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), variable: limit, "GONKA_EVIDENCE_THREADS": "16"}
    result = subprocess.run(
        [SCRIPT, *command, "-w", str(target)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: {what} ran out of memory (DuckDB limit {limit} with 16 threads): "
        f"raise {variable} or lower GONKA_EVIDENCE_THREADS"
    ]
    assert "Traceback" not in result.stderr and "OutOfMemoryException" not in result.stderr
    if command[0] == "ingest":
        con = duckdb.connect(str(target), read_only=True)
        try:
            assert con.execute("SELECT status FROM ingest_runs").fetchall() == [("failed",)]
        finally:
            con.close()


def test_doctor_reads_a_table_whose_name_holds_a_quote(tmp_path):
    store = shutil.copytree(DATA_SAMPLES_DIR / "store", tmp_path / "store")
    con = sqlite3.connect(store / "epoch_3.db")
    con.execute('CREATE TABLE "we""ird" (a INTEGER)')
    con.execute('INSERT INTO "we""ird" VALUES (1)')
    con.commit()
    con.close()
    result = runner.invoke(app, ["doctor", str(store)])
    assert result.exit_code == 0, result.output
    assert 'table we"ird' in result.output


def test_doctor_reads_a_postgres_table_whose_name_holds_a_quote(pg_copy):
    import psycopg

    url = pg_copy(3)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute('CREATE TABLE "devshard_we""ird" (a INTEGER)')
    result = runner.invoke(app, ["doctor", url])
    assert result.exit_code == 0, result.output
    assert 'we"ird' in result.output


def _in_full_tmpfs(size: str, argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    script = 'mount -t tmpfs -o size="$1" tmpfs "$2" || exit 99; shift 2; "$@"'
    result = subprocess.run(
        ["unshare", "--mount", "--map-root-user", "sh", "-c", script, "sh", size, "disk", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode == 99 or "unshare:" in result.stderr:
        pytest.skip(f"cannot mount a tmpfs in a namespace here: {result.stderr.strip()}")
    return result


# a real full tmpfs; stands in the default tier:
# tests/output/test_output_safety.py::test_an_unwritable_output_is_one_line
@pytest.mark.heavy
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1) to mount a private tmpfs")
@pytest.mark.parametrize(
    "argv",
    [
        ["ingest-logs", "--host", HOST, "--year", "2026", str(DATA_SAMPLES_DIR / "vllm" / "vllm.log")],
        ["ingest", str(DATA_SAMPLES_DIR / "store")],
    ],
)
@pytest.mark.parametrize("size", ["150k", "300k"])
def test_a_full_disk_during_an_ingest_is_one_line(tmp_path, argv, size):
    (tmp_path / "disk").mkdir()
    result = _in_full_tmpfs(size, [SCRIPT, *argv, "-w", "disk/w.duckdb"], tmp_path)
    assert result.returncode == 1, result.stderr
    lines = [line for line in result.stderr.splitlines() if not line.startswith("  ")]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and "No space left on device" in errors[0] and "Traceback" not in result.stderr, lines
