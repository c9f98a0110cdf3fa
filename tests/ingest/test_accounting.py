"""The accounting identity itself: a run whose rows do not balance fails with one line (never a silent
pass), and rows that claim one key are settled without a choice."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import polars as pl
import psycopg
import pytest

from pipeline.ingest import MISSING_COLUMNS, MISSING_COLUMNS_QUARANTINED
from pipeline.ingest.accounting import AccountingError, identity_violations, settle_claims
from pipeline.ingest.runs import ingest_run
from pipeline.sources.store.payloads import NOT_A_PAYLOAD
from pipeline.warehouse.database import open_for_write, open_read_only
from tests.helpers import ingest


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


# -- the payload plane: every file of a store's payloads/ directory, by class ----------------------------

SAMPLE_STORE = Path(__file__).resolve().parents[2] / "data-samples" / "store"
# data-samples/store/payloads: 120 files, one a .json superseded by the .json.zst of the same answer
SAMPLE_PAYLOAD_FILES = (120, 119, 1, 0)


def _stray(payloads: Path) -> str:
    (payloads / "2" / "2100" / "notes.txt").write_text("not an answer")
    return "2/2100/notes.txt"


def _superseded(payloads: Path) -> str:
    zst = sorted(payloads.glob("*/*/*.json.zst"))[-1]
    zst.with_suffix("").write_bytes(next(payloads.glob("2/2100/*.json")).read_bytes())
    return ""


def _corrupt_zst(payloads: Path) -> str:
    json_file = sorted(payloads.glob("2/2100/*.json"))[0]
    json_file.with_name(json_file.name + ".zst").write_bytes(b"not zstd at all")
    json_file.unlink()
    return json_file.name.removesuffix(".json")


def _unknown_inference(payloads: Path) -> str:
    (payloads / "2" / "2100" / "999999.json").write_bytes(next(payloads.glob("2/2100/*.json")).read_bytes())
    return ""


@pytest.mark.parametrize(
    ("mutate", "counts", "note"),
    [
        (_stray, (121, 119, 1, 1), None),  # quarantined, named in a payload_files row
        (_superseded, (121, 119, 2, 0), None),  # the .zst is read, the .json deduplicated
        (_corrupt_zst, (120, 118, 1, 1), None),  # its row is written, and quarantined with the reason
        (_unknown_inference, (121, 120, 1, 0), "1 of no inference in the warehouse"),  # used, and said
    ],
    ids=["stray file", "superseded json", "corrupt zst", "unknown inference"],
)
def test_each_payload_file_is_accounted_for_by_class(tmp_path, mutate, counts, note):
    store = tmp_path / "store"
    shutil.copytree(SAMPLE_STORE, store)
    named = mutate(store / "payloads")
    summary = ingest(tmp_path / "w.duckdb", store)
    rows = {r.input: r for r in summary.accounting}
    got = rows["payload files"]
    assert (got.unit, got.read, got.used, got.deduplicated, got.quarantined, got.note) == ("files", *counts, note)
    con = open_read_only(tmp_path / "w.duckdb")
    try:
        assert identity_violations(con) == []
        quarantined = con.execute(
            "SELECT table_name, row_key, reason FROM quarantine "
            "WHERE table_name IN ('payload_files', 'payload_storage')"
        ).fetchall()
    finally:
        con.close()
    assert len(quarantined) == counts[3]
    if mutate is _stray:
        assert quarantined == [("payload_files", named, NOT_A_PAYLOAD)]
    if mutate is _corrupt_zst:
        assert quarantined[0][1] == f"2/2100/{named}" and quarantined[0][2].startswith("payload file is not zstd")


def test_the_sample_payload_files_balance_and_a_second_copy_is_deduplicated(tmp_path):
    warehouse = tmp_path / "w.duckdb"
    accounting = {r.input: r for r in ingest(warehouse, SAMPLE_STORE).accounting}
    first = accounting["payload files"]
    assert (first.read, first.used, first.deduplicated, first.quarantined) == SAMPLE_PAYLOAD_FILES
    # The bundled copy lacks no column the ingest reads (pipeline/sources/store/columns.py): none named.
    assert not {MISSING_COLUMNS, MISSING_COLUMNS_QUARANTINED} & set(accounting)
    copy = tmp_path / "copy"
    shutil.copytree(SAMPLE_STORE, copy)  # another source holding the same answers: all held already
    again = {r.input: r for r in ingest(warehouse, copy).accounting}["payload files"]
    assert (again.read, again.used, again.deduplicated, again.quarantined) == (120, 0, 120, 0)


# -- the ledger plane: every row of every ledger table -------------------------------------------------


def _ledger_rows(summary) -> dict[str, tuple]:
    return {
        r.input: (r.read, r.used, r.deduplicated, r.quarantined)
        for r in summary.accounting
        if r.input.startswith("accounting_")
    }


def test_a_sqlite_ledger_blob_that_is_no_json_object_is_quarantined(tmp_path):
    store = tmp_path / "store"
    shutil.copytree(SAMPLE_STORE, store)
    with sqlite3.connect(store / "accounting.db") as c:
        c.execute("INSERT INTO accounting_escrows VALUES ('9999', 2, 'm', CAST('not json' AS BLOB))")
    summary = ingest(tmp_path / "w.duckdb", store)
    # 9 escrows of the sample written, the tenth set aside with its reason
    assert _ledger_rows(summary) == {"accounting_meta": (3, 3, 0, 0), "accounting_escrows": (10, 9, 0, 1)}
    con = open_read_only(tmp_path / "w.duckdb")
    try:
        assert con.execute("SELECT row_key FROM quarantine WHERE table_name = 'accounting_escrows'").fetchall() == [
            ("9999",)
        ]
    finally:
        con.close()


def test_postgres_ledger_rows_of_an_escrow_without_state_are_quarantined_not_skipped(
    tmp_path, pg_database, pg_copy_templates
):
    url = pg_database(template=pg_copy_templates(4, ledger=True))  # timeline.copy(4) with its ledger
    with psycopg.connect(url) as conn:
        escrow, counters, host_stats = conn.execute(
            "SELECT s.escrow_id, (SELECT count(*) FROM accounting_escrow_counters c WHERE c.escrow_id = s.escrow_id), "
            "(SELECT count(*) FROM accounting_escrow_host_stats h WHERE h.escrow_id = s.escrow_id) "
            "FROM accounting_escrow_state s ORDER BY s.escrow_id LIMIT 1"
        ).fetchone()
        states = conn.execute("SELECT count(*) FROM accounting_escrow_state").fetchone()[0]
        all_counters = conn.execute("SELECT count(*) FROM accounting_escrow_counters").fetchone()[0]
        conn.execute("DELETE FROM accounting_escrow_state WHERE escrow_id = %s", (escrow,))
    summary = ingest(tmp_path / "w.duckdb", url)
    rows = _ledger_rows(summary)
    assert counters and host_stats
    assert rows["accounting_escrow_state"] == (states - 1, states - 1, 0, 0)
    assert rows["accounting_escrow_counters"] == (all_counters, all_counters - counters, 0, counters)
    assert rows["accounting_escrow_host_stats"][3] == host_stats
    con = open_read_only(tmp_path / "w.duckdb")
    try:
        assert identity_violations(con) == []
        named = con.execute("SELECT table_name FROM quarantine WHERE row_key = ?", [escrow]).fetchall()
    finally:
        con.close()
    assert {("accounting_escrow_counters",), ("accounting_escrow_host_stats",)} <= set(named)
