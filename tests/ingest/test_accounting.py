"""The accounting identity itself: a run whose rows do not balance fails with one line (never a silent
pass), and rows that claim one key are settled without a choice."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.ingest.accounting import AccountingError, identity_violations, settle_claims
from pipeline.ingest.runs import ingest_run
from pipeline.warehouse.database import open_for_write


def test_a_run_whose_rows_do_not_balance_fails_with_one_line(tmp_path):
    con = open_for_write(tmp_path / "w.duckdb")
    try:
        with pytest.raises(AccountingError, match=r"^ingest accounting does not balance \(t: 3 rows read, 2 used"):
            with ingest_run(con, source_id="s", kind="test", display="s") as run:
                run.accounting.read("t", 3)
                run.accounting.used("t", 2)
                run.accounting.read("u", 1)
                run.accounting.quarantined("u", 1)
        assert con.execute("SELECT status FROM ingest_runs").fetchall() == [("failed",)]
        # recorded as it was, so that the failure can be looked at
        assert identity_violations(con) == [f"run {run.run_id}: t: 3 read <> 2 used + 0 deduplicated + 0 quarantined"]
    finally:
        con.close()


def test_a_balanced_run_is_ok_and_recorded(tmp_path):
    con = open_for_write(tmp_path / "w.duckdb")
    try:
        with ingest_run(con, source_id="s", kind="test", display="s") as run:
            run.accounting.read("t", 5)
            run.accounting.used("t", 2)
            run.accounting.deduplicated("t", 1)
            run.accounting.quarantined("t", 2)
        assert con.execute("SELECT status FROM ingest_runs").fetchall() == [("ok",)]
        assert con.execute("SELECT input, rows_read FROM ingest_accounting").fetchall() == [("t", 5)]
        assert identity_violations(con, run.run_id) == []
    finally:
        con.close()


def test_claims_identical_rows_are_one_and_disagreeing_rows_all_quarantined():
    frame = pl.DataFrame({"k": ["a", "a", "b", "b", "b", "c"], "v": [1, 1, 2, 3, 2, 4]})
    kept, dedup, problems = settle_claims(frame, ["k"], "t", "here")
    assert kept.sort("k").rows() == [("a", 1), ("c", 4)]
    assert dedup == 1
    assert [p[1] for p in problems] == ["b #1", "b #2", "b #3"]
    assert all(p[2] == "here: 3 rows claim k b and disagree" for p in problems)
    assert kept.height + dedup + len(problems) == frame.height
