"""A column the ingest reads that the copy lacks (renamed in the copy, or an older build's table) is said per
table and column, in the ingest's output and its run record; it was read as NULL silently."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import duckdb

from tests.helpers import ingest

DATA = Path(__file__).resolve().parents[2] / "data-samples"


def _renamed_copy(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    shutil.copytree(DATA / "store", store)
    with sqlite3.connect(store / "epoch_3.db") as db:
        db.execute("ALTER TABLE sessions RENAME COLUMN settled_at TO settled_at_v2")
    return store


def test_a_column_renamed_in_the_copy_is_named_in_the_run_record(tmp_path):
    summary = ingest(tmp_path / "w.duckdb", _renamed_copy(tmp_path))
    missing = {r.input: r.note for r in summary.accounting}.get("columns missing, read as NULL")
    assert missing == "sessions.settled_at (in epoch 3)"
    con = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True)
    try:
        (note,) = con.execute(
            "SELECT note FROM ingest_accounting WHERE run_id = ? AND input = 'columns missing, read as NULL'",
            [summary.run_id],
        ).fetchall()[0]
    finally:
        con.close()
    assert note == missing


def test_a_column_the_copy_lacks_is_a_warning_of_ingest(tmp_path):
    store = _renamed_copy(tmp_path)
    entry = str(Path(sys.executable).with_name("gonka-evidence"))
    result = subprocess.run(
        [entry, "ingest", str(store), "-w", str(tmp_path / "w.duckdb")], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    assert "warning: columns the copy lacks, read as NULL (unknown): sessions.settled_at (in epoch 3)" in result.stderr


def test_the_bundled_copy_lacks_no_column(tmp_path):
    summary = ingest(tmp_path / "w.duckdb", DATA / "store")
    assert "columns missing, read as NULL" not in {r.input for r in summary.accounting}
