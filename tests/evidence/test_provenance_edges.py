"""Provenance at the edges: the latest ingest is the last run made, whatever the clock said; every
reproducing command is shell-quoted by one builder; a working directory deleted before the command
started does not break the footer."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.evidence.provenance import command_line, command_path
from pipeline.output.report.model import build_epoch_report
from pipeline.warehouse.database import open_for_write, open_read_only
from tests.factories import data_samples_warehouse
from tests.helpers import ingest

ROOT = Path(__file__).resolve().parents[2]
HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # focal host of data-samples/


def test_the_latest_ingest_is_the_last_run_not_the_latest_clock(tmp_path, timeline):
    """Copy 3 ingested, then copy 4 with the clock set back a day: the footer named copy 3 (the later
    `started_at`) while the numbers came from copy 4. Copies 1 and 2 here: an older and a newer copy of one
    store, as many epochs as needed (nothing checked depends on an epoch)."""
    from pipeline.evidence.provenance import provenance
    from pipeline.evidence.window import Window

    warehouse = tmp_path / "w.duckdb"
    for part, last_epoch, label in (("a", 1, "older copy"), ("b", 2, "newer copy")):
        store = tmp_path / part / "store"  # one source: the same store, copied twice
        timeline.copy(last_epoch=last_epoch).write_sqlite(store)
        ingest(warehouse, store, label=label)
    con = open_for_write(warehouse)
    try:
        (newer_run,) = con.execute(
            "SELECT run_id FROM ingest_runs WHERE label = 'newer copy' AND status = 'ok'"
        ).fetchone()
        con.execute(  # as if the clock had been set back before the second ingest
            "UPDATE ingest_runs SET started_at = started_at - INTERVAL 1 DAY, "
            "finished_at = finished_at - INTERVAL 1 DAY "
            "WHERE run_id = ?",
            [newer_run],
        )
    finally:
        con.close()
    con = open_read_only(warehouse)
    try:
        footer = provenance(con, Window(), "c")
        (source,) = footer.sources
        assert source["label"] == "newer copy"
        assert footer.run_ids[-1] == newer_run
        (latest,) = con.execute("SELECT run_id FROM ingest_runs ORDER BY run_seq DESC LIMIT 1").fetchone()
        assert latest == newer_run
    finally:
        con.close()


def test_the_report_command_line_is_shell_quoted_like_its_sections(tmp_path):
    """report.md's `command:` line joined its words with spaces while its sections' lines were quoted: a
    warehouse path with a space did not reproduce."""
    warehouse = data_samples_warehouse(tmp_path / "my warehouse.duckdb")
    con = open_read_only(warehouse)
    try:
        report = build_epoch_report(con, 3, HOST, warehouse_arg=str(warehouse), out_arg=str(tmp_path / "out dir"))
    finally:
        con.close()
    words = shlex.split(report.command)
    assert words[words.index("--warehouse") + 1] == command_path(warehouse)
    assert words[words.index("--out") + 1] == command_path(tmp_path / "out dir")
    assert report.command == command_line(*words[1:])
    for section in report.sections:
        if section.command:
            assert section.command == command_line(*shlex.split(section.command)[1:])


def test_a_working_directory_deleted_before_the_command_keeps_the_paths_as_given(tmp_path, monkeypatch):
    """`report epoch 3` in-process, every path absolute, in a working directory removed before it started:
    os.path.relpath (os.getcwd) raised FileNotFoundError from the footer; the paths are kept as given."""
    from typer.testing import CliRunner

    from pipeline.cli.app import app

    warehouse = data_samples_warehouse(tmp_path / "w.duckdb")
    gone = tmp_path / "gone"
    gone.mkdir()
    args = ["report", "epoch", "3", "--host", HOST, "-w", str(warehouse), "--out", str(tmp_path / "out")]
    monkeypatch.setattr(sys, "argv", ["gonka-evidence", *args])  # as the process has it: the footers quote it
    monkeypatch.chdir(gone)
    os.rmdir(gone)
    result = CliRunner().invoke(app, args)
    monkeypatch.chdir(tmp_path)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 0, result.output
    report = (tmp_path / "out" / "epoch-3" / "report.md").read_text(encoding="utf-8")
    assert f"--warehouse {warehouse}" in report


# a process started in a deleted working directory; stands in the default tier:
# tests/evidence/test_provenance_edges.py::test_a_working_directory_deleted_before_the_command_keeps_the_paths_as_given
@pytest.mark.heavy
def test_a_working_directory_deleted_before_start_is_no_traceback(tmp_path):
    """All paths absolute, the working directory removed: FileNotFoundError from the footer's relative
    path (os.path.relpath calls getcwd)."""
    warehouse = data_samples_warehouse(tmp_path / "w.duckdb")
    gone = tmp_path / "gone"
    gone.mkdir()
    script = (
        "import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
        "sys.argv = ['gonka-evidence', *sys.argv[2:]]; from pipeline.cli.main import main; main()"
    )
    args = ["report", "epoch", "3", "--host", HOST, "-w", str(warehouse), "--out", str(tmp_path / "out")]
    done = subprocess.run(
        [sys.executable, "-c", script, str(gone), *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    report = (tmp_path / "out" / "epoch-3" / "report.md").read_text(encoding="utf-8")
    assert f"--warehouse {warehouse}" in report


def test_a_warehouse_made_before_the_run_order_column_still_reads(tmp_path):
    """Opened read-only, an older warehouse has no `run_seq` (only a write adds it): its footers order runs
    by their start time, as before, instead of failing on the missing column."""
    from pipeline.evidence.provenance import provenance
    from pipeline.evidence.window import Window

    warehouse = data_samples_warehouse(tmp_path / "w.duckdb")
    con = open_for_write(warehouse)
    try:
        con.execute("ALTER TABLE ingest_runs DROP COLUMN run_seq")
    finally:
        con.close()
    con = open_read_only(warehouse)
    try:
        footer = provenance(con, Window(epoch=3), "c")
        assert [s["label"] for s in footer.sources] == ["data-samples"]
    finally:
        con.close()
