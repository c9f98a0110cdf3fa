"""Nothing skipped in silence: every sample store, in both layouts,
of every release line in data-samples/release-lines and of the generator's lines, ingested into a fresh
warehouse: every file of the store directory and every table of every database is read or named with the
reason, every column of a table read is read or named, and every row of a table read is counted."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from pipeline.samples.release_lines import DEFAULT_LINE, SAMPLE_LINES
from pipeline.sources.store.base import TABLES
from pipeline.warehouse.database import open_read_only
from tests.helpers import ingest

DATA = Path(__file__).resolve().parents[2] / "data-samples"
SQLITE_READ = {"escrow_cache": "escrow_cache", **{t: t for t in TABLES if t != "escrow_cache"}}
# Where the accounting counts the rows of each table read.
ACCOUNTED_AS = {"inference_validation_obs": "validation_obs", "sealed_validation_obs": "validation_obs"}


def _accounting(warehouse: Path) -> dict[str, tuple]:
    con = open_read_only(warehouse)
    try:
        rows = con.execute(
            "SELECT input, rows_read, rows_used, rows_deduplicated, rows_quarantined, coalesce(note, '') "
            "FROM ingest_accounting"
        ).fetchall()
        assert con.execute(
            "SELECT count(*) FROM ingest_accounting WHERE rows_read <> rows_used + rows_deduplicated + rows_quarantined"
        ).fetchone() == (0,)
        named = {
            r[0] for r in con.execute("SELECT row_key FROM quarantine WHERE table_name = 'store_files'").fetchall()
        }
        payloads_quarantined = con.execute(
            "SELECT count(*) FROM quarantine WHERE table_name IN ('payload_files', 'payload_storage')"
        ).fetchone()[0]
    finally:
        con.close()
    acct = {r[0]: r[1:] for r in rows}
    acct["__quarantined_files"] = tuple(sorted(named))
    acct["__quarantined_payloads"] = (payloads_quarantined,)
    return acct


def _check_sqlite_store(store: Path, warehouse: Path) -> None:
    ingest(warehouse, store)
    acct = _accounting(warehouse)
    entries = sorted(p.name for p in store.iterdir())
    assert acct["store files"][0] == len(entries)
    assert acct["store files"][1] + len(acct["__quarantined_files"]) == len(entries)
    not_read, unread_columns = acct["tables not read"][4], acct.get("columns not read", (0, 0, 0, 0, ""))[4]
    rows: dict[str, int] = {}
    for file in sorted(store.glob("*.db")):
        if file.name == "accounting.db":  # read by the ledger plane
            continue
        with sqlite3.connect(f"file:{file}?mode=ro&immutable=1", uri=True) as c:
            tables = [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in tables:
                if table.startswith("sqlite_"):
                    continue
                if table not in SQLITE_READ:
                    assert f"{table} in " in not_read and file.name in not_read.split(f"{table} in ")[1].split("(")[0]
                    continue
                for (column,) in c.execute(f"SELECT name FROM pragma_table_info('{table}')"):
                    assert column in TABLES[table].schema.names or f"{table}.{column}" in unread_columns
                n = c.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
                rows[ACCOUNTED_AS.get(table, table)] = rows.get(ACCOUNTED_AS.get(table, table), 0) + n
    for table, n in rows.items():
        assert acct.get(table, (0,))[0] == n, table
    # every row of every table of the ledger's accounting.db
    if (store / "accounting.db").exists():
        with sqlite3.connect(f"file:{store / 'accounting.db'}?mode=ro&immutable=1", uri=True) as c:
            for (table,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
                n = c.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
                assert acct.get(table, (0,))[0] == n, table
    # every file of the payload directory: read, and used, deduplicated or quarantined (with its row)
    payload_files = sum(1 for p in (store / "payloads").rglob("*") if p.is_file())
    assert acct.get("payload files", (0, 0, 0, 0))[0] == payload_files
    assert acct.get("payload files", (0, 0, 0, 0))[3] == acct["__quarantined_payloads"][0]


SQLITE_SAMPLES = [
    DATA / "store",
    *sorted((DATA / "release-lines").glob("*/store")),
    *sorted(p for p in (DATA / "network").glob("*") if (p / "_meta.db").exists()),
]


# The network's hosts 1-3 hold copies of the "ha" line, as release-lines/ha/store does, and host 0 one of the
# snapshot-import line: hosts 1-3 are checked in the heavy tier.
SAME_LINE_AS_ANOTHER = {DATA / "network" / f"host-{n}" for n in (1, 2, 3)}


@pytest.mark.parametrize(
    "store",
    [
        # stands in the default tier: its release-lines/ha/store and network/host-0 cases,
        # tests/ingest/test_every_input_accounted.py::test_every_file_table_column_and_row_of_a_bundled_sample_store_is_accounted_for  # noqa: E501
        pytest.param(p, marks=[pytest.mark.heavy] if p in SAME_LINE_AS_ANOTHER else [])
        for p in SQLITE_SAMPLES
    ],
    ids=lambda p: str(p.relative_to(DATA)),
)
def test_every_file_table_column_and_row_of_a_bundled_sample_store_is_accounted_for(tmp_path, store):
    _check_sqlite_store(store, tmp_path / "w.duckdb")


@pytest.mark.parametrize(
    "line",
    # stands in the default tier: its DEFAULT_LINE case,
    # tests/ingest/test_every_input_accounted.py::test_every_input_of_a_generated_copy_is_accounted_for_in_both_layouts
    [pytest.param(n, marks=[] if n == DEFAULT_LINE else [pytest.mark.heavy]) for n in SAMPLE_LINES],
)
def test_every_input_of_a_generated_copy_is_accounted_for_in_both_layouts(
    tmp_path, timeline, pg_database, pg_copy_templates, line
):
    copy = timeline.copy(last_epoch=4, line=line)
    store = copy.write_sqlite(tmp_path / "store", ledger=True)
    _check_sqlite_store(store, tmp_path / "a.duckdb")
    if line == DEFAULT_LINE:  # timeline.copy(4) itself: a copy of the session's template of it (tests/conftest.py)
        url = pg_database(template=pg_copy_templates(4, ledger=True))
    else:
        url = pg_database()
        copy.write_postgres(url, ledger=True)
    wh = tmp_path / "b.duckdb"
    ingest(wh, url)
    acct = _accounting(wh)
    not_read, unread_columns = acct["tables not read"][4], acct.get("columns not read", (0, 0, 0, 0, ""))[4]
    rows: dict[str, int] = {}
    with psycopg.connect(url) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition"
            )
        ]
        for table in tables:
            logical = table.removeprefix("devshard_")
            if table.startswith("accounting_") or table == "payload_storage":  # the ledger and payload planes
                continue
            if not table.startswith("devshard_") or logical not in TABLES:
                assert f"{table} in database" in not_read, table
                continue
            columns = [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s", (table,)
                )
            ]
            for column in columns:
                assert column in TABLES[logical].schema.names or f"{logical}.{column}" in unread_columns
            n = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
            rows[ACCOUNTED_AS.get(logical, logical)] = rows.get(ACCOUNTED_AS.get(logical, logical), 0) + n
        payload_rows = conn.execute("SELECT count(*) FROM payload_storage").fetchone()[0]
        ledger = {
            t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables if t.startswith("accounting_")
        }
    assert ledger
    for table, n in ledger.items():  # every row of every ledger table read, the others named
        assert acct.get(table, (0,))[0] == n or f"{table} in database" in not_read, table
    assert payload_rows and acct["payload_storage"][0] == payload_rows
    assert acct["payload_storage"][3] == acct["__quarantined_payloads"][0]
    for table, n in rows.items():
        assert acct.get(table, (0,))[0] == n, table
