"""A re-ingest of an unchanged copy reads only its change markers, and a real change is still found:
a new diff, a ledger counter that moved with its escrow's latest_nonce, a writer's updated_at."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from pipeline.ingest.store import ingest_store
from pipeline.sources.store import open_store
from pipeline.warehouse.database import open_for_write
from tests.helpers import assert_views_equal, frame, views

# What only a full ledger read asks for: the per-escrow tables, the SQLite blobs, PostgreSQL's legacy blob rows.
LEDGER_BODY_READS = (
    "accounting_escrow_counters",
    "accounting_escrow_host_stats",
    "accounting_escrow_challenges",
    "accounting_escrow_invalid_nonces",
    "accounting_escrow_protocol_nonces",
    "AS BLOB) FROM accounting_escrows",
    "SELECT escrow_id FROM accounting_escrows",
)


def traced_ingest(warehouse: Path, source: str | Path):
    """Ingest, recording every query the ledger and payload planes sent to the copy."""
    con, store = open_for_write(warehouse), open_store(str(source))
    queries: list[str] = []
    for name in ("query_batches", "query_file_batches"):
        original = getattr(store, name, None)
        if original is not None:

            def traced(*args, _original=original, **kwargs):
                queries.append(next(a for a in args if isinstance(a, str)))
                return _original(*args, **kwargs)

            setattr(store, name, traced)
    try:
        return ingest_store(con, store), queries
    finally:
        store.close()
        con.close()


def ledger_body_reads(queries: list[str]) -> list[str]:
    return [q for q in queries if any(t in q for t in LEDGER_BODY_READS)]


@pytest.fixture
def pg_ledger_copy(pg_database, pg_copy_templates) -> str:
    """`timeline.copy(4)` with its ledger (a copy of one written once: tests/conftest.py)."""
    return pg_database(template=pg_copy_templates(4, ledger=True))


@pytest.fixture(scope="module")
def sqlite_ledger_store(tmp_path_factory, timeline) -> Path:
    return timeline.copy(last_epoch=4).write_sqlite(tmp_path_factory.mktemp("ledger") / "store", ledger=True)


@pytest.fixture
def sqlite_ledger_copy(tmp_path, sqlite_ledger_store) -> Path:
    """`timeline.copy(4)` with its ledger in SQLite, the test's own (a copy of one written once per module)."""
    return shutil.copytree(sqlite_ledger_store, tmp_path / "store")


def pg_ingested(pg_ingested_once, tmp_path) -> tuple[str, Path, tuple]:
    """The PostgreSQL copy and a warehouse of its first `traced_ingest`, with what that returned (the ingest
    runs once per module: tests/ingest/conftest.py)."""
    done = pg_ingested_once(traced_ingest, tmp_path)
    return done.url, done.warehouse, done.results[0]


def counter_count(warehouse: Path, escrow_id: str, counter_id: str) -> int:
    return frame(
        warehouse, f"SELECT count FROM ledger_counters WHERE escrow_id = '{escrow_id}' AND counter_id = '{counter_id}'"
    )["count"][0]


@pytest.mark.parametrize("layout", ["pg", "sqlite"])
def test_unchanged_copy_reads_no_ledger_rows_and_changes_nothing(layout, request, pg_ingested_once, tmp_path):
    if layout == "pg":
        source, wh, (first, first_queries) = pg_ingested(pg_ingested_once, tmp_path)
    else:
        source, wh = request.getfixturevalue("sqlite_ledger_copy"), tmp_path / "w.duckdb"
        first, first_queries = traced_ingest(wh, source)
    before = views(wh), frame(wh, "SELECT * FROM ledger_counters ORDER BY ALL")
    second, second_queries = traced_ingest(wh, source)
    assert first.rows["ledger_escrows"] == 9 and ledger_body_reads(first_queries)
    assert ledger_body_reads(second_queries) == []
    assert second.escrows_changed == 0 and second.rows.get("diffs", 0) == 0
    assert "ledger_escrows" not in second.rows and second.quarantined == 0
    assert_views_equal(before[0], views(wh))
    assert before[1].equals(frame(wh, "SELECT * FROM ledger_counters ORDER BY ALL"))


def test_postgres_counter_moved_with_its_escrow_nonce_is_read_again(pg_ingested_once, tmp_path):
    pg_ledger_copy, wh, _ = pg_ingested(pg_ingested_once, tmp_path)
    with psycopg.connect(pg_ledger_copy, autocommit=True) as pg:
        escrow_id, counter_id = pg.execute(
            "SELECT escrow_id, counter_id FROM accounting_escrow_counters "
            "ORDER BY escrow_id, counter_id, writer_id LIMIT 1"
        ).fetchone()
        before = counter_count(wh, escrow_id, counter_id)
        pg.execute(
            "UPDATE accounting_escrow_counters SET count = count + 5 WHERE escrow_id = %s AND counter_id = %s "
            "AND writer_id = (SELECT min(writer_id) FROM accounting_escrow_counters WHERE escrow_id = %s "
            "AND counter_id = %s)",
            (escrow_id, counter_id, escrow_id, counter_id),
        )
        pg.execute(
            "UPDATE accounting_escrow_state SET latest_nonce = latest_nonce + 1 WHERE escrow_id = %s", (escrow_id,)
        )
    summary, queries = traced_ingest(wh, pg_ledger_copy)
    assert ledger_body_reads(queries) and summary.rows["ledger_escrows"] == 9
    assert counter_count(wh, escrow_id, counter_id) == before + 5


def test_postgres_writer_updated_at_alone_makes_the_ledger_read_again(pg_ingested_once, tmp_path):
    pg_ledger_copy, wh, _ = pg_ingested(pg_ingested_once, tmp_path)
    with psycopg.connect(pg_ledger_copy, autocommit=True) as pg:
        escrow_id, counter_id = pg.execute(
            "SELECT escrow_id, counter_id FROM accounting_escrow_counters ORDER BY escrow_id DESC, counter_id LIMIT 1"
        ).fetchone()
        before = counter_count(wh, escrow_id, counter_id)
        pg.execute(
            "UPDATE accounting_escrow_counters SET count = count + 3 WHERE escrow_id = %s AND counter_id = %s "
            "AND writer_id = (SELECT min(writer_id) FROM accounting_escrow_counters WHERE escrow_id = %s "
            "AND counter_id = %s)",
            (escrow_id, counter_id, escrow_id, counter_id),
        )
        (writer,) = pg.execute("SELECT min(writer_id) FROM accounting_writers").fetchone()
        pg.execute(
            "UPDATE accounting_writers SET updated_at = '2026-12-01T00:00:00.000000001Z' WHERE writer_id = %s",
            (writer,),
        )
    summary, queries = traced_ingest(wh, pg_ledger_copy)
    assert ledger_body_reads(queries) and summary.rows["ledger_escrows"] == 9
    assert counter_count(wh, escrow_id, counter_id) == before + 3


def test_sqlite_blob_saved_with_a_new_updated_at_is_read_again(sqlite_ledger_copy, tmp_path):
    wh = tmp_path / "w.duckdb"
    traced_ingest(wh, sqlite_ledger_copy)
    db = sqlite3.connect(sqlite_ledger_copy / "accounting.db")
    escrow_id, payload = db.execute(
        "SELECT escrow_id, payload FROM accounting_escrows ORDER BY escrow_id LIMIT 1"
    ).fetchone()
    blob = json.loads(payload)
    blob["counters"][0]["count"] += 7
    counters = frame(wh, f"SELECT counter_id, count, key_json FROM ledger_counters WHERE escrow_id = '{escrow_id}'")
    key = json.dumps(blob["counters"][0]["key"], sort_keys=True, separators=(",", ":"))
    target = counters.filter(
        counters["key_json"].map_elements(
            lambda k: json.dumps(json.loads(k), sort_keys=True, separators=(",", ":")) == key, return_dtype=bool
        )
    )
    assert target.height == 1
    db.execute("UPDATE accounting_escrows SET payload = ? WHERE escrow_id = ?", (json.dumps(blob).encode(), escrow_id))
    db.execute("UPDATE accounting_meta SET value = '2026-12-01T00:00:00.000000001Z' WHERE key = 'updated_at'")
    db.commit()
    db.close()
    summary, queries = traced_ingest(wh, sqlite_ledger_copy)
    assert ledger_body_reads(queries) and summary.rows["ledger_escrows"] == 9
    assert counter_count(wh, escrow_id, target["counter_id"][0]) == target["count"][0] + 7


def test_postgres_new_diff_is_ingested_and_equals_a_fresh_ingest(pg_ledger_copy, pg_ingested_once, tmp_path):
    """The copy first lacks the newest diff of one active escrow; once it is back, the re-ingest
    reads that escrow only, and the warehouse equals one that ingested the full copy at once."""
    with psycopg.connect(pg_ledger_copy, autocommit=True) as pg:
        epoch_id, escrow_id, nonce = pg.execute(
            "SELECT d.epoch_id, d.escrow_id, max(d.nonce) FROM devshard_diffs d JOIN devshard_sessions s "
            "USING (epoch_id, escrow_id) WHERE s.status = 'active' GROUP BY 1, 2 ORDER BY 2 LIMIT 1"
        ).fetchone()
        pg.execute(
            "CREATE TABLE held_back AS SELECT * FROM devshard_diffs WHERE epoch_id = %s AND escrow_id = %s "
            "AND nonce = %s",
            (epoch_id, escrow_id, nonce),
        )
        pg.execute(
            "DELETE FROM devshard_diffs WHERE epoch_id = %s AND escrow_id = %s AND nonce = %s",
            (epoch_id, escrow_id, nonce),
        )
        pg.execute(
            "UPDATE devshard_sessions SET latest_nonce = %s WHERE epoch_id = %s AND escrow_id = %s",
            (nonce - 1, epoch_id, escrow_id),
        )
    wh = tmp_path / "w.duckdb"
    held, _ = traced_ingest(wh, pg_ledger_copy)
    with psycopg.connect(pg_ledger_copy, autocommit=True) as pg:
        pg.execute("INSERT INTO devshard_diffs SELECT * FROM held_back")
        pg.execute("DROP TABLE held_back")
        pg.execute(
            "UPDATE devshard_sessions SET latest_nonce = %s WHERE epoch_id = %s AND escrow_id = %s",
            (nonce, epoch_id, escrow_id),
        )
    again, _ = traced_ingest(wh, pg_ledger_copy)
    assert held.escrows_changed > 1
    assert again.escrows_changed == 1 and again.rows["diffs"] == 1
    # A fresh ingest of the whole copy (of the same template: once per module, tests/ingest/conftest.py).
    fresh = pg_ingested_once(traced_ingest, tmp_path, file="fresh.duckdb").warehouse
    assert_views_equal(views(fresh), views(wh))


# What a no-op `gonka-evidence ingest` of a PostgreSQL copy must not import (bench/BENCHMARKS.md, the
# no-op re-ingest): it reads the copy's change markers through the ADBC driver's C API and DuckDB, so
# none of the readers of the full path (pyarrow, Polars, numpy, pandas, the ADBC DB-API), the statistics
# and chart libraries of the evidence tables and reports, the protobuf decoders and the derivations
# (nothing to decode), nor Rich (its summary is plain lines, and no progress off a terminal).
NOT_FOR_A_NO_OP = (
    "pyarrow",
    "polars",
    "numpy",
    "pandas",
    "adbc_driver_postgresql.dbapi",
    "scipy",
    "statsmodels",
    "altair",
    "vl_convert",
    "sqlalchemy",
    "google.protobuf",
    "pipeline.sources.decode.txs",
    "pipeline.ingest.derive",
    "pipeline.ingest.store",
    "rich",
)
MODULES_MARK = "modules loaded: "
# Printed by an object's destructor when the interpreter's teardown frees the script's globals.
TEARDOWN_MARK = "interpreter teardown"
CONSOLE_SCRIPT = "from pipeline.cli.main import main\nmain()\n"  # what the `gonka-evidence` script runs
APP_ALONE = "from pipeline.cli.app import app\napp(prog_name='gonka-evidence')\n"  # the CLI with the usual exit


def run_cli(*args: str, call: str = CONSOLE_SCRIPT) -> subprocess.CompletedProcess:
    """A `gonka-evidence` process whose atexit handler prints the modules it had loaded, and whose
    teardown (if it has one) prints TEARDOWN_MARK on stderr."""
    script = (
        "import atexit, json, sys\n"
        f"atexit.register(lambda: print({MODULES_MARK!r} + json.dumps(sorted(sys.modules)), flush=True))\n"
        "class Witness:\n"
        f"    def __del__(self):\n        sys.stderr.write({TEARDOWN_MARK!r} + '\\n')\n"
        "witness = Witness()\n" + call
    )
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parents[2],
    )


def cli_modules(*args: str) -> tuple[list[str], str]:
    """The modules a `gonka-evidence` process had loaded when it exited, and its stderr."""
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    line = next(out for out in done.stdout.splitlines() if out.startswith(MODULES_MARK))
    return json.loads(line[len(MODULES_MARK) :]), done.stderr


def test_cli_ingest_ends_without_the_teardown_and_prints_the_same(pg_ingested_once, tmp_path):
    """A completed ingest ends without the interpreter's teardown (pipeline/cli/main.py): same exit code,
    stdout and stderr as with the usual exit, its atexit handlers run; other commands and failed
    ingests keep the teardown."""
    (pg_ledger_copy, wh, _), twin = pg_ingested(pg_ingested_once, tmp_path), tmp_path / "twin.duckdb"
    shutil.copyfile(wh, twin)  # the same run history: the same run id
    fast = run_cli("ingest", pg_ledger_copy, "--warehouse", str(wh))
    usual = run_cli("ingest", pg_ledger_copy, "--warehouse", str(twin), call=APP_ALONE)
    assert fast.returncode == usual.returncode == 0, fast.stderr
    assert TEARDOWN_MARK not in fast.stderr and TEARDOWN_MARK in usual.stderr
    assert MODULES_MARK in fast.stdout and "escrows changed 0," in fast.stderr

    def same(text: str) -> str:
        return re.sub(r"elapsed \d+\.\d s", "elapsed _ s", text.replace(TEARDOWN_MARK + "\n", ""))

    assert same(fast.stderr) == same(usual.stderr)
    assert fast.stdout.split(MODULES_MARK)[0] == usual.stdout.split(MODULES_MARK)[0]
    version = run_cli("version")
    failed = run_cli("ingest", str(tmp_path / "no-such-store"), "--warehouse", str(wh))
    assert version.returncode == 0 and TEARDOWN_MARK in version.stderr
    assert failed.returncode == 1 and failed.stderr.startswith("error: ") and TEARDOWN_MARK in failed.stderr


def test_postgres_noop_cli_ingest_imports_nothing_it_does_not_need(pg_ingested_once, tmp_path):
    pg_ledger_copy, wh, (first, _) = pg_ingested(pg_ingested_once, tmp_path)
    loaded, stderr = cli_modules("ingest", pg_ledger_copy, "--warehouse", str(wh))
    assert first.escrows_changed > 0 and "escrows changed 0," in stderr  # it was a no-op
    assert {"duckdb", "adbc_driver_postgresql", "pipeline.ingest.unchanged"} <= set(loaded)  # the listing works
    assert [m for m in NOT_FOR_A_NO_OP if m in loaded] == []


def test_postgres_cli_ingest_with_a_change_still_decodes_and_derives(pg_ledger_copy, tmp_path):
    """The lazy imports of the no-op path are imported where a changed escrow needs them."""
    loaded, stderr = cli_modules("ingest", pg_ledger_copy, "--warehouse", str(tmp_path / "w.duckdb"))
    assert "escrows changed 0," not in stderr
    assert {"pipeline.sources.decode.txs", "pipeline.sources.decode.snapshots", "pipeline.ingest.derive"} <= set(loaded)
    assert frame(tmp_path / "w.duckdb", "SELECT count(*) AS n FROM d_inferences")["n"][0] > 0


def test_postgres_escrow_cache_row_changed_at_the_same_cached_at_is_updated(pg_ingested_once, tmp_path):
    """The escrow cache upsert skips rows that would stay as they are; a changed one is still written."""
    pg_ledger_copy, wh, _ = pg_ingested(pg_ingested_once, tmp_path)
    with psycopg.connect(pg_ledger_copy, autocommit=True) as pg:
        escrow_id, cached_at = pg.execute(
            "SELECT escrow_id, cached_at FROM devshard_escrow_cache ORDER BY escrow_id LIMIT 1"
        ).fetchone()
        pg.execute("UPDATE devshard_escrow_cache SET escrow_json = '{\"moved\": 1}' WHERE escrow_id = %s", (escrow_id,))
    before = frame(wh, f"SELECT * FROM raw_escrow_cache WHERE escrow_id <> '{escrow_id}' ORDER BY escrow_id")
    traced_ingest(wh, pg_ledger_copy)
    row = frame(wh, f"SELECT escrow_json, cached_at FROM raw_escrow_cache WHERE escrow_id = '{escrow_id}'").row(0)
    assert row == ('{"moved": 1}', cached_at)
    assert before.equals(
        frame(wh, f"SELECT * FROM raw_escrow_cache WHERE escrow_id <> '{escrow_id}' ORDER BY escrow_id")
    )
