"""Bad input gets a one-line error (exit 1) or a counted quarantine row — never a traceback or a silent drop."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.helpers import cli_in, frame, ingest


@pytest.fixture(scope="module")
def written_store(tmp_path_factory, timeline) -> Path:
    """The SQLite store of `timeline.copy(last_epoch=2)`, written once for the module: two epochs, the newest cut
    as a copy's newest is (what the tests break is in its newest epoch file; one test reads the epoch before)."""
    return timeline.copy(last_epoch=2).write_sqlite(tmp_path_factory.mktemp("bad-input") / "store")


@pytest.fixture
def store_copy(tmp_path, written_store) -> Path:
    """A copy of that store of the test's own, to break: a fraction of writing it again."""
    return Path(shutil.copytree(written_store, tmp_path / "store-2"))


def cli(*args):
    """In-process: what a command says and exits with (the one test of what its process leaves at exit has a
    process of its own, `cli_process`)."""
    return cli_in(Path.cwd(), *args)


def cli_process(*args):
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True)


def _one_line_error(result) -> str:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_unreachable_server(tmp_path):
    line = _one_line_error(cli("ingest", "postgresql://someone@127.0.0.1:1/x", "-w", str(tmp_path / "w.duckdb")))
    assert "cannot connect" in line
    assert not (tmp_path / "w.duckdb").exists()  # a source that cannot be read leaves no new warehouse


def test_wrong_password_is_never_shown(tmp_path, pg_database, pg_server):
    url = pg_database()
    role = "ge_pw_test"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {role}")
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'right-one'")
    try:
        host = pg_server.split("@", 1)[1]
        secret = "Sup3rSecretPw"
        result = cli(
            "ingest", f"postgresql://{role}:{secret}@{host}/{url.rsplit('/', 1)[1]}", "-w", str(tmp_path / "w.duckdb")
        )
        # The local server may trust every login; then the empty database is the error. Either way: one line, no secret.
        line = _one_line_error(result)
        assert secret not in result.stderr + result.stdout
        assert "***" in line or "no devshard" in line
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP ROLE {role}")


def test_directory_that_is_not_a_store(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "notes.txt").write_text("hello")
    # The warehouse beside the directory: inside it, it would be refused before the directory is read.
    line = _one_line_error(cli("ingest", str(tmp_path / "notes"), "-w", str(tmp_path / "w.duckdb")))
    assert "not a devshard SQLite store" in line


def test_missing_source(tmp_path):
    line = _one_line_error(cli("ingest", str(tmp_path / "nope"), "-w", str(tmp_path / "w.duckdb")))
    assert "no such directory" in line
    assert not (tmp_path / "w.duckdb").exists()


def test_empty_database(tmp_path, pg_database):
    line = _one_line_error(cli("ingest", pg_database(), "-w", str(tmp_path / "w.duckdb")))
    assert "no devshard_* tables" in line


def _newest_epoch_file(store):
    return sorted(store.glob("epoch_*.db"), key=lambda p: int(p.stem.split("_")[1]))[-1]


def test_corrupt_txs_proto_is_quarantined(tmp_path, store_copy):
    store = store_copy
    with sqlite3.connect(_newest_epoch_file(store)) as db:
        escrow, nonce = db.execute("SELECT escrow_id, max(nonce) FROM diffs GROUP BY escrow_id LIMIT 1").fetchone()
        db.execute("UPDATE diffs SET txs_proto = x'12ffff01' WHERE escrow_id = ? AND nonce = ?", (escrow, nonce))
    wh = tmp_path / "w.duckdb"
    summary = ingest(wh, store)
    q = frame(wh, "SELECT table_name, row_key, reason FROM quarantine")
    assert q.filter(q["row_key"] == f"{escrow}/{nonce}").height == 1
    assert "does not decode" in q.filter(q["row_key"] == f"{escrow}/{nonce}")["reason"][0]
    assert summary.quarantined >= 1
    # The escrow's other diffs are still there.
    assert frame(wh, f"SELECT count(*) AS n FROM txs WHERE escrow_id = '{escrow}'")["n"][0] > 0


def test_malformed_group_json_is_quarantined_and_the_log_kept(tmp_path, store_copy):
    store = store_copy
    with sqlite3.connect(_newest_epoch_file(store)) as db:
        escrow = db.execute("SELECT escrow_id FROM sessions LIMIT 1").fetchone()[0]
        db.execute("UPDATE sessions SET group_json = '[{\"SlotID\": 0' WHERE escrow_id = ?", (escrow,))
    wh = tmp_path / "w.duckdb"
    ingest(wh, store)
    q = frame(wh, f"SELECT reason FROM quarantine WHERE table_name = 'sessions' AND row_key = '{escrow}'")
    assert q.height == 1 and "malformed group_json" in q["reason"][0]
    assert frame(wh, f"SELECT count(*) AS n FROM txs WHERE escrow_id = '{escrow}'")["n"][0] > 0
    assert frame(wh, f"SELECT count(*) AS n FROM escrows WHERE escrow_id = '{escrow}'")["n"][0] == 0


def test_unknown_tx_kind_is_kept_as_other_and_quarantined(tmp_path, store_copy):
    wh = tmp_path / "w.duckdb"
    summary = ingest(wh, store_copy)
    others = frame(
        wh, "SELECT escrow_id, nonce, tx_index, reason FROM txs WHERE kind = 'other' AND reason LIKE 'field_15%'"
    )
    assert others.height >= 1
    keys = {f"{r['escrow_id']}/{r['nonce']}/{r['tx_index']}" for r in others.to_dicts()}
    q = frame(wh, "SELECT row_key FROM quarantine WHERE reason LIKE 'unknown tx kind%'")
    assert keys == set(q["row_key"])
    assert summary.quarantined >= len(keys)


def test_unknown_status_value_is_quarantined(tmp_path, store_copy):
    store = store_copy
    with sqlite3.connect(_newest_epoch_file(store)) as db:
        escrow, inference = db.execute(
            "SELECT escrow_id, inference_id FROM sealed_inferences WHERE sealed_nonce > 0 LIMIT 1"
        ).fetchone()
        db.execute(
            "UPDATE sealed_inferences SET sealed_status = 9 WHERE escrow_id = ? AND inference_id = ?",
            (escrow, inference),
        )
    wh = tmp_path / "w.duckdb"
    ingest(wh, store)
    q = frame(wh, "SELECT row_key, reason FROM quarantine WHERE table_name = 'sealed_inferences'")
    assert q.to_dicts() == [{"row_key": f"{escrow}/{inference}", "reason": "unknown sealed_status 9"}]
    # The replay still decides the status from the diff log.
    assert (
        frame(wh, f"SELECT status FROM inferences WHERE escrow_id = '{escrow}' AND inference_id = {inference}")[
            "status"
        ][0]
        is not None
    )


def test_missing_table_is_a_one_line_error(tmp_path, store_copy):
    store = store_copy
    with sqlite3.connect(_newest_epoch_file(store)) as db:
        db.execute("ALTER TABLE diffs RENAME COLUMN txs_proto TO payload")
    line = _one_line_error(cli("ingest", str(store), "-w", str(tmp_path / "w.duckdb")))
    assert "lacks required column(s) diffs.txs_proto (in epoch " in line


def test_an_epoch_file_of_random_bytes_is_one_line_and_nothing_after_it(tmp_path, store_copy):
    """The driver's half-open connection is closed with the error: no finalizer traceback at exit."""
    store = store_copy
    _newest_epoch_file(store).write_bytes(bytes(range(256)) * 400)
    line = _one_line_error(cli_process("ingest", str(store), "-w", str(tmp_path / "w.duckdb")))
    assert line.endswith("cannot be read as SQLite (INVALID_ARGUMENT: Failed to prepare query: file is not a "
                         "database query: SELECT count(*) FROM sqlite_master)")  # fmt: skip


def test_missing_optional_table_is_tolerated(tmp_path, store_copy):
    store = store_copy
    with sqlite3.connect(_newest_epoch_file(store)) as db:
        db.execute("DROP TABLE sealed_validation_obs")
        db.execute("DROP TABLE inference_validation_obs")
    summary = ingest(tmp_path / "w.duckdb", store)
    assert summary.rows["diffs"] > 0


def test_missing_diffs_table_is_quarantined_and_other_epochs_ingested(tmp_path, store_copy):
    store = store_copy
    newest = _newest_epoch_file(store)
    epoch = int(newest.stem.split("_")[1])
    with sqlite3.connect(newest) as db:
        db.execute("DROP TABLE diffs")
    wh = tmp_path / "w.duckdb"
    summary = ingest(wh, store)
    q = frame(wh, "SELECT table_name, row_key, reason FROM quarantine")
    assert {"table_name": "diffs", "row_key": f"epoch {epoch}", "reason": "table missing in this copy"} in q.to_dicts()
    assert summary.quarantined >= 1
    assert frame(wh, f"SELECT count(*) AS n FROM txs WHERE epoch_id < {epoch}")["n"][0] > 0
