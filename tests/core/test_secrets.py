"""Passwords in a PostgreSQL address never reach an output, a warehouse row, a report or an error message."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from tests.cli.one_section import one_section_reports

runner = CliRunner()


PLANTED = "Pl4nted9Secret"  # the user-part password; the query-string one differs
PLANTED_QS = "Qu3ryString7Pw"


def _with_passwords(url: str) -> str:
    scheme, rest = url.split("://", 1)
    user, host = rest.split("@", 1)
    return f"{scheme}://{user}:{PLANTED}@{host}?password={PLANTED_QS}"


def _all_warehouse_text(warehouse: Path) -> str:
    """Every string value of every table of the warehouse, as one text."""
    import duckdb

    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        parts = []
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
            cols = [
                c
                for c, t in con.execute(
                    f"SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = '{table}'"
                ).fetchall()
                if t in ("VARCHAR", "JSON")
            ]
            for col in cols:
                parts += [str(v) for (v,) in con.execute(f'SELECT DISTINCT "{col}" FROM "{table}"').fetchall()]
        return "\n".join(parts)
    finally:
        con.close()


# a whole report; stands in the default tier:
# tests/core/test_secrets.py::test_a_planted_password_appears_in_no_output_row_or_report
@pytest.mark.heavy
def test_a_planted_password_appears_in_no_output_row_or_whole_report(pg_copy, tmp_path, timeline):
    """The test below, its report of every section."""
    _planted_password_nowhere(pg_copy, tmp_path, timeline)


def test_a_planted_password_appears_in_no_output_row_or_report(pg_copy, tmp_path, timeline, monkeypatch):
    """Its report of one section (tests/cli/one_section.py): a report is made from the warehouse alone, whose
    every string is checked here, and its provenance, overview and quarantine section are those of any."""
    one_section_reports(monkeypatch)
    _planted_password_nowhere(pg_copy, tmp_path, timeline)


def _planted_password_nowhere(pg_copy, tmp_path: Path, timeline) -> None:
    url = _with_passwords(pg_copy(4))
    wh = tmp_path / "w.duckdb"
    outputs = [runner.invoke(app, ["ingest", url, "-w", str(wh)])]
    assert outputs[0].exit_code == 0, outputs[0].output
    outputs.append(runner.invoke(app, ["doctor", url]))
    outputs.append(runner.invoke(app, ["evidence", "epoch-summary", "--host", timeline.focal_host, "-w", str(wh)]))
    outputs.append(
        runner.invoke(
            app, ["report", "epoch", "3", "--host", timeline.focal_host, "--out", str(tmp_path / "out"), "-w", str(wh)]
        )
    )
    assert all(r.exit_code == 0 for r in outputs), [r.output for r in outputs]
    text = "\n".join(r.output for r in outputs) + _all_warehouse_text(wh)
    text += "\n".join(p.read_text(errors="replace") for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert "postgres:***@" in outputs[0].output or "***" in _all_warehouse_text(wh)
    for secret in (PLANTED, PLANTED_QS):
        assert secret not in text


@pytest.mark.parametrize(
    "url, secrets",
    [
        ("postgresql://postgres:Se/cr@t9xyz@127.0.0.1:1/db", ["Se/cr@t9xyz", "cr@t9xyz", "t9xyz"]),
        ("postgresql://postgres:q@127.0.0.1:1/db", []),  # one letter: its other occurrences stay readable
        ("postgresql://postgres@127.0.0.1:1/db?sslmode=disable&password=Qs9Secret", ["Qs9Secret"]),
        ("host=127.0.0.1 port=1 password=Kw9Secret dbname=x", ["Kw9Secret"]),
    ],
)
def test_connection_errors_never_show_a_password(url, secrets):
    result = runner.invoke(app, ["ingest", url, "-w", "unused.duckdb"])
    assert result.exit_code == 1 and result.output.startswith("error: ")
    assert "Traceback" not in result.output
    for secret in secrets:
        assert secret not in result.output
    if ":q@" in url:  # the host is still named in full: no letter was starred away
        assert "127.0.0.1" in result.output and "postgresql://postgres:***@127.0.0.1:1/db" in result.output
