"""`doctor` on a store whose ledger is unreadable."""

from __future__ import annotations

from typer.testing import CliRunner

from pipeline.cli.app import app

runner = CliRunner()


def test_doctor_names_an_unreadable_ledger(tmp_path, timeline):
    store = tmp_path / "store"
    timeline.copy(last_epoch=3).write_sqlite(store)
    (store / "accounting.db").write_bytes(b"not a database" * 300)
    result = runner.invoke(app, ["doctor", str(store)])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    assert "accounting.db: not readable, the ingest would stop on it" in result.output
