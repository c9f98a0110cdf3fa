"""The command line: query formats and parameters, read-only queries, doctor, run, secrets, docs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from tests.cli.copy4_warehouse import copy4_warehouse
from tests.helpers import frame, ingest

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def warehouse(request, timeline) -> Path:
    """One warehouse for the module: its tests only query it (read-only; one checks a write is refused)."""
    return copy4_warehouse(request, timeline)  # a copy of the one built in this process


def test_query_json_is_an_array_of_row_objects_with_utc_timestamps(warehouse):
    result = runner.invoke(
        app,
        [
            "query",
            "SELECT escrow_id, nonce, event_at FROM txs ORDER BY escrow_id, nonce LIMIT 2",
            "--format",
            "json",
            "-w",
            str(warehouse),
        ],
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [sorted(r) for r in rows] == [["escrow_id", "event_at", "nonce"]] * 2
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["event_at"]) for r in rows)


def test_query_params_named_queries_and_formats(warehouse, timeline):
    host = timeline.focal_host
    expected = frame(warehouse, f"SELECT count(*) AS n FROM inferences WHERE executor = '{host}'")["n"][0]
    result = runner.invoke(
        app, ["query", "host_executor_counts", "--param", f"host={host}", "--format", "csv", "-w", str(warehouse)]
    )
    assert result.exit_code == 0, result.output
    counts = pl.read_csv(result.output.encode())
    assert counts["inferences"].sum() == expected > 0
    md = runner.invoke(app, ["query", "SELECT 1234567 AS n", "--format", "markdown", "-w", str(warehouse)])
    assert md.output.splitlines()[:3] == ["| n |", "| ---: |", "| 1,234,567 |"]
    listing = runner.invoke(app, ["query", "--list"])
    assert (
        "host_executor_counts: Inferences executed by one host, per epoch and status. [params: host" in listing.output
    )
    missing = runner.invoke(app, ["query", "host_executor_counts", "-w", str(warehouse)])
    assert missing.exit_code == 1 and "missing --param for: host" in missing.output


def test_query_writes_parquet_to_a_file(warehouse, tmp_path):
    out = tmp_path / "x.parquet"
    result = runner.invoke(
        app,
        [
            "query",
            "SELECT kind, count(*) AS n FROM txs GROUP BY ALL",
            "--format",
            "parquet",
            "-o",
            str(out),
            "-w",
            str(warehouse),
        ],
    )
    assert result.exit_code == 0
    assert pl.read_parquet(out)["n"].sum() == frame(warehouse, "SELECT count(*) AS n FROM txs")["n"][0]


def test_query_is_read_only(warehouse):
    result = runner.invoke(app, ["query", "CREATE TABLE x AS SELECT 1", "-w", str(warehouse)])
    assert result.exit_code == 1
    assert "read-only" in result.output.lower()


def test_doctor_describes_a_sqlite_store_without_writing(sqlite_copy, tmp_path):
    store = sqlite_copy(3)
    result = runner.invoke(app, ["doctor", str(store)])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.replace("│", " ").split())
    assert "layout: sqlite" in out and "epochs: 1, 2, 3" in out
    assert "lineage id: – (none; the path is the source id)" in out
    # The narrow old-epoch table and the missing sessions.version are named with their file.
    assert re.search(r"sealed_inferences .*missing epoch_1\.db: obs_present, sealed_status", out)
    assert "missing epoch_1.db: version, imported_nonce" in out
    assert "planes: session storage" in out and "payloads" in out
    assert not list(tmp_path.glob("*.duckdb"))


def test_doctor_prints_names_as_written(sqlite_copy):
    # A path (and the source id made from it) is data: "[bold]" in it is not Rich markup, and a
    # long one is not wrapped over lines when stdout is not a terminal.
    store = sqlite_copy(3, name="copy-[bold]x-" + "y" * 150)
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "doctor", str(store)],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{store}  layout: sqlite  source id: sqlite:{store.name}"
    assert lines[1] == "lineage id: – (none; the path is the source id)"


def test_doctor_describes_a_postgres_copy(pg_copy, timeline):
    url = pg_copy(4)
    result = runner.invoke(app, ["doctor", url])
    assert result.exit_code == 0, result.output
    lineage = timeline.copy(last_epoch=4).truth.planted["lineage"]
    assert f"lineage id: {lineage}" in result.output
    assert "layout: postgres" in result.output and "epochs: 2, 3, 4" in result.output


def test_passwords_never_reach_the_warehouse(tmp_path, pg_copy):
    url = pg_copy(4)
    with_secret = url.replace("postgres@", "postgres:TopSecret123@")
    wh = tmp_path / "w.duckdb"
    ingest(wh, with_secret)
    runs = frame(wh, "SELECT * FROM ingest_runs")
    assert "TopSecret123" not in json.dumps(runs.to_dicts(), default=str)
    assert runs["source_display"][0].count("***") == 1


# a second whole run of the samples in this tier; stands in the default tier:
# tests/cli/test_summary_json.py::test_run_json_holds_its_outcome_and_its_log_lines_preflight_included (the same
# run with no configuration, its new-reports and open-epoch lines, and a second run that changes nothing),
# tests/api/test_api.py::test_run_says_its_lines_to_the_listener_and_keeps_them (the default ./warehouse.duckdb),
# tests/cli/test_summary_json.py::test_ingest_json_of_a_new_warehouse_counts_the_samples (epochs 2, 3 and 4)
@pytest.mark.heavy
def test_run_with_no_configuration_ingests_the_samples(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["run"])
    assert result.exit_code == 0, result.output
    assert "new reports: epoch 2, epoch 3 in" in result.output and "open: epoch 4 " in result.output
    assert (tmp_path / "warehouse.duckdb").exists()
    epochs = frame(tmp_path / "warehouse.duckdb", "SELECT DISTINCT epoch_id FROM escrows ORDER BY 1")[
        "epoch_id"
    ].to_list()
    assert epochs == [2, 3, 4]
    again = runner.invoke(app, ["run"])
    assert "escrows changed 0" in again.output


def test_every_command_has_an_example_in_its_help():
    for command in ("ingest", "builds", "doctor", "query", "run"):
        result = runner.invoke(app, [command, "--help"])
        assert result.exit_code == 0
        assert "Example: gonka-evidence" in result.output, command


def test_postgres_source_from_libpq_environment(tmp_path, pg_copy, monkeypatch):
    url = pg_copy(4)
    server, dbname = url.rsplit("/", 1)
    user, hostport = server.split("://", 1)[1].split("@", 1)
    host, port = hostport.split(":")
    for key, value in {"PGHOST": host, "PGPORT": port, "PGUSER": user, "PGDATABASE": dbname}.items():
        monkeypatch.setenv(key, value)
    wh = tmp_path / "w.duckdb"
    summary = ingest(wh, "postgres")
    assert summary.rows["diffs"] > 0
    assert frame(wh, "SELECT source_display FROM ingest_runs")["source_display"][0] == "postgres (libpq environment)"


def test_a_new_command_is_one_module(tmp_path, monkeypatch):
    """A module added to pipeline.cli.commands is found and registered in its ORDER: no list names it."""
    import typer

    import pipeline.cli.commands as commands

    (tmp_path / "zz_hello.py").write_text(
        "import typer\n\nORDER = 15\n\n\ndef hello() -> None:\n    typer.echo('hello')\n\n\n"
        "def register(app):\n    app.command()(hello)\n"
    )
    monkeypatch.setattr(commands, "__path__", [*commands.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "pipeline.cli.commands.zz_hello", raising=False)
    fresh = typer.Typer()
    commands.register_all(fresh)
    names = [c.name or c.callback.__name__ for c in fresh.registered_commands]
    assert names[:4] == ["init", "ingest", "hello", "builds"]  # ORDER 15: between ingest (10) and builds (20)
    assert CliRunner().invoke(fresh, ["hello"]).stdout == "hello\n"
