"""A column the ingest reads that the copy lacks, by its class (pipeline/sources/store/columns.py): one an older
layout lacks is read as NULL and said per table and column, in the output and the run record; one that only
some rows need quarantines those rows, naming the column; one no row can be read without refuses the copy
before anything is written. Never a default."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import duckdb
import psycopg
import pytest

from pipeline.ingest import MISSING_COLUMNS, MISSING_COLUMNS_QUARANTINED
from pipeline.output import summaries
from pipeline.sources.errors import SourceError
from pipeline.sources.store.base import TABLES
from pipeline.sources.store.columns import OPTIONAL, REFUSED, ROW_NEEDED
from tests.helpers import cli_in, frame, ingest

DATA = Path(__file__).resolve().parents[2] / "data-samples"


def _store(tmp_path: Path, epoch: int, *statements: str) -> Path:
    """The bundled store with `statements` run on its epoch file."""
    store = tmp_path / "store"
    shutil.copytree(DATA / "store", store)
    with sqlite3.connect(store / f"epoch_{epoch}.db") as db:
        for statement in statements:
            db.execute(statement)
    db.close()
    return store


def _pg(pg_copy, *statements: str) -> str:
    url = pg_copy(4)
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)
    return url


def _notes(summary) -> dict[str, str | None]:
    return {r.input: r.note for r in summary.accounting}


def _written(warehouse: Path) -> dict[str, int]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return {
            t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[index]
            for t in ("ingest_runs", "raw_sessions", "raw_diffs", "raw_escrow_cache", "quarantine")
        }
    finally:
        con.close()


def test_every_column_read_has_one_class():
    required = {(t.name, c) for t in TABLES.values() for c in t.required}
    classes = [required, set(OPTIONAL), set(ROW_NEEDED), set(REFUSED)]
    read = {(t.name, c) for t in TABLES.values() for c in t.schema.names if not (c == "epoch_id" and t.per_epoch)}
    assert set().union(*classes) == read
    assert sum(len(c) for c in classes) == len(read)


# (a) absent in a known older layout: NULL, said per table and column ------------------------------------------


def test_a_column_an_older_layout_lacks_is_null_and_named_in_the_run_record(tmp_path):
    wh = tmp_path / "w.duckdb"
    summary = ingest(wh, _store(tmp_path, 3, "ALTER TABLE sessions RENAME COLUMN version TO version_v2"))
    notes = _notes(summary)
    assert notes.get(MISSING_COLUMNS) == "sessions.version (in epoch 3)"
    assert MISSING_COLUMNS_QUARANTINED not in notes
    (note,) = frame(
        wh, f"SELECT note FROM ingest_accounting WHERE run_id = '{summary.run_id}' AND input = '{MISSING_COLUMNS}'"
    )["note"]
    assert note == "sessions.version (in epoch 3)"
    versions = frame(wh, "SELECT epoch_id, count(*) AS n, count(version) AS known FROM raw_sessions GROUP BY 1")
    assert {r["epoch_id"]: (r["n"], r["known"]) for r in versions.to_dicts()} == {2: (3, 3), 3: (3, 0), 4: (3, 3)}
    # What `ingest` (and `run`'s log) says of it: its warning lines, from the summary (pipeline/output/summaries.py).
    warnings = [text for level, text in summaries.ingest(summary) if level == "warning"]
    assert warnings == ["columns the copy lacks, read as NULL (unknown): sessions.version (in epoch 3)"]


# The CLI (in-process) of another ingest of the same store; stands in the default tier: the same warning line
# from the summary the CLI prints,
# tests/ingest/test_missing_columns.py::test_a_column_an_older_layout_lacks_is_null_and_named_in_the_run_record,
# the summary's lines said by `ingest`, tests/ingest/test_unchanged.py::test_cli_says_the_copy_was_not_read, and a
# summary's warnings said as "warning: …" (console.say),
# tests/ingest/test_bad_payload_and_json_files.py::test_ingest_json_bad_numbers_nesting_and_gzip
@pytest.mark.heavy
def test_a_column_an_older_layout_lacks_is_a_warning_of_ingest(tmp_path):
    store = _store(tmp_path, 3, "ALTER TABLE sessions RENAME COLUMN version TO version_v2")
    result = cli_in(tmp_path, "ingest", str(store), "-w", str(tmp_path / "w.duckdb"))  # what it says: in-process
    assert result.returncode == 0, result.stderr
    assert "warning: columns the copy lacks, read as NULL (unknown): sessions.version (in epoch 3)" in result.stderr


def test_a_postgres_copy_without_a_pre_squash_sealed_column_keeps_its_seals(tmp_path, pg_copy):
    url = _pg(pg_copy, "ALTER TABLE devshard_sealed_inferences DROP COLUMN sealed_model")
    with psycopg.connect(url) as conn:
        (seals,) = conn.execute("SELECT count(*) FROM devshard_sealed_inferences").fetchone()  # type: ignore[misc]
    wh = tmp_path / "w.duckdb"
    summary = ingest(wh, url)
    named = (_notes(summary).get(MISSING_COLUMNS) or "").split("; ")  # this release line has no imported_nonce
    assert "sealed_inferences.sealed_model (in epoch 2, epoch 3, epoch 4)" in named
    held = frame(wh, "SELECT count(*) AS n, count(sealed_model) AS known FROM raw_sealed_inferences").row(0)
    assert held == (seals, 0)


def test_the_old_three_column_sealed_table_is_read_as_bare_rows(tmp_path):
    narrow = (
        "CREATE TABLE narrow AS SELECT escrow_id, inference_id, sealed_nonce FROM sealed_inferences",
        "DROP TABLE sealed_inferences",
        "ALTER TABLE narrow RENAME TO sealed_inferences",
    )
    wh = tmp_path / "w.duckdb"
    summary = ingest(wh, _store(tmp_path, 3, *narrow))
    notes = _notes(summary)
    assert MISSING_COLUMNS_QUARANTINED not in notes  # no row of it claims facts: none needs sealed_status
    assert "sealed_inferences.sealed_status (in epoch 3)" in (notes.get(MISSING_COLUMNS) or "").split("; ")
    assert frame(wh, "SELECT count(*) AS n FROM quarantine WHERE table_name = 'sealed_inferences'")["n"][0] == 0
    held = frame(wh, "SELECT count(*), count(sealed_status) FROM raw_sealed_inferences WHERE epoch_id = 3")
    assert held.row(0) == (460, 0)


# A whole ingest of the bundled copy for this alone; stands in the default tier: the same ingest, the same check,
# tests/ingest/test_accounting.py::test_the_sample_payload_files_balance_and_a_second_copy_is_deduplicated
@pytest.mark.heavy
def test_the_bundled_copy_lacks_no_column(tmp_path):
    summary = ingest(tmp_path / "w.duckdb", DATA / "store")
    assert not {MISSING_COLUMNS, MISSING_COLUMNS_QUARANTINED} & set(_notes(summary))


# (b) a column no row can be read without: the copy refused, nothing written -----------------------------------


@pytest.mark.parametrize(
    ("statement", "named"),
    [
        ("ALTER TABLE sessions DROP COLUMN latest_nonce", "sessions.latest_nonce (in epoch 4)"),
        ("ALTER TABLE diffs RENAME COLUMN txs_proto TO payload", "diffs.txs_proto (in epoch 4)"),
    ],
)
def test_a_sqlite_copy_without_a_required_column_is_refused_before_anything_is_written(tmp_path, statement, named):
    wh = tmp_path / "w.duckdb"
    with pytest.raises(SourceError) as refused:
        ingest(wh, _store(tmp_path, 4, statement))
    assert f"lacks required column(s) {named}, which its rows cannot be read without" in str(refused.value)
    assert set(_written(wh).values()) == {0}


def test_a_postgres_copy_without_session_status_is_refused_before_anything_is_written(tmp_path, pg_copy):
    url = _pg(pg_copy, "ALTER TABLE devshard_sessions DROP COLUMN status")
    wh = tmp_path / "w.duckdb"
    with pytest.raises(SourceError) as refused:
        ingest(wh, url)
    assert "lacks required column(s) sessions.status (in epoch " in str(refused.value)
    assert "\n" not in str(refused.value)
    assert set(_written(wh).values()) == {0}


# (c) a column only some rows need: those rows quarantined, naming it ------------------------------------------


def test_settled_sessions_of_a_copy_without_settled_at_are_quarantined(tmp_path):
    wh = tmp_path / "w.duckdb"
    summary = ingest(wh, _store(tmp_path, 3, "ALTER TABLE sessions RENAME COLUMN settled_at TO settled_at_v2"))
    notes = _notes(summary)
    assert notes.get(MISSING_COLUMNS_QUARANTINED) == "sessions.settled_at (in epoch 3)"
    assert MISSING_COLUMNS not in notes
    q = frame(wh, "SELECT row_key, reason FROM quarantine WHERE table_name = 'sessions'")
    assert q.height == 3  # the epoch's three sessions are settled
    why = "epoch_3.db: sessions.settled_at is absent from the copy, and a settled session needs it"
    assert set(q["reason"]) == {why}
    held = frame(wh, "SELECT epoch_id, status, settled_at FROM raw_sessions")
    assert 3 not in held["epoch_id"].to_list()
    assert held.filter(held["status"] == "settled")["settled_at"].null_count() == 0
    (quarantined,) = frame(
        wh, f"SELECT rows_quarantined FROM ingest_accounting WHERE run_id = '{summary.run_id}' AND input = 'sessions'"
    )["rows_quarantined"]
    assert quarantined == 3
    # What `ingest` (and `run`'s log) says of it: its warning lines, from the summary (pipeline/output/summaries.py).
    warnings = [text for level, text in summaries.ingest(summary) if level == "warning"]
    assert warnings == ["columns the copy lacks, the rows that need them quarantined: sessions.settled_at (in epoch 3)"]


# The CLI (in-process) of another ingest of the same store; stands in the default tier: the same warning line
# from the summary the CLI prints,
# tests/ingest/test_missing_columns.py::test_settled_sessions_of_a_copy_without_settled_at_are_quarantined,
# the summary's lines said by `ingest`, tests/ingest/test_unchanged.py::test_cli_says_the_copy_was_not_read, and a
# summary's warnings said as "warning: …" (console.say),
# tests/ingest/test_bad_payload_and_json_files.py::test_ingest_json_bad_numbers_nesting_and_gzip
@pytest.mark.heavy
def test_rows_quarantined_for_a_missing_column_are_a_warning_of_ingest(tmp_path):
    store = _store(tmp_path, 3, "ALTER TABLE sessions RENAME COLUMN settled_at TO settled_at_v2")
    result = cli_in(tmp_path, "ingest", str(store), "-w", str(tmp_path / "w.duckdb"))  # what it says: in-process
    assert result.returncode == 0, result.stderr
    said = "warning: columns the copy lacks, the rows that need them quarantined: sessions.settled_at (in epoch 3)"
    assert said in result.stderr
    assert "read as NULL (unknown)" not in result.stderr


def test_rich_seals_of_a_postgres_copy_without_sealed_status_are_quarantined(tmp_path, pg_copy):
    url = _pg(pg_copy, "ALTER TABLE devshard_sealed_inferences DROP COLUMN sealed_status")
    with psycopg.connect(url) as conn:
        (rich, bare) = conn.execute(  # type: ignore[misc]
            "SELECT count(*) FILTER (WHERE sealed_nonce > 0 AND obs_present), "
            "count(*) FILTER (WHERE NOT (sealed_nonce > 0 AND obs_present)) FROM devshard_sealed_inferences"
        ).fetchone()
    assert rich and bare
    wh = tmp_path / "w.duckdb"
    summary = ingest(wh, url)
    assert (_notes(summary).get(MISSING_COLUMNS_QUARANTINED) or "").startswith("sealed_inferences.sealed_status (in")
    reasons = frame(wh, "SELECT reason FROM quarantine WHERE table_name = 'sealed_inferences'")["reason"].to_list()
    needed = [r for r in reasons if "sealed_inferences.sealed_status is absent from the copy" in r]
    assert len(needed) == rich
    assert frame(wh, "SELECT count(*) AS n FROM raw_sealed_inferences")["n"][0] == bare
