"""Sources stay untouched; a killed ingest leaves a consistent, resumable warehouse."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import psycopg
import pytest

from pipeline.sources.store.postgres import PostgresStore
from tests.helpers import assert_views_equal, frame, ingest, views


@pytest.fixture(scope="module")
def written(tmp_path_factory, timeline) -> dict:
    """`timeline.copy(4)` in SQLite, written once per module (named as `sqlite_copy(4)` names it), and a warehouse
    of its clean ingest, built the first time a test asks for it; each test takes its own copy of the store."""
    root = tmp_path_factory.mktemp("safety")
    return {"root": root, "store": timeline.copy(last_epoch=4).write_sqlite(root / "store-4")}


@pytest.fixture
def store_4(tmp_path, written):
    """The test's own copy of the module's `timeline.copy(4)` store (the bytes `sqlite_copy(4)` writes)."""
    return shutil.copytree(written["store"], tmp_path / "store-4")


@pytest.fixture
def clean_of_store_4(written):
    """A warehouse that ingested the module's `timeline.copy(4)` store once, with nothing else (only read)."""
    if "clean" not in written:
        clean = written["root"] / "clean.duckdb"
        ingest(clean, written["store"])
        written["clean"] = clean
    return written["clean"]


def _digest(directory) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_sqlite_files_are_byte_identical_and_no_wal_appears(tmp_path, store_4):
    store = store_4
    before = _digest(store)
    assert not any(name.endswith(("-wal", "-shm")) for name in before)
    ingest(tmp_path / "w.duckdb", store)
    assert _digest(store) == before


def test_a_copy_with_its_wal_is_read_without_touching_it(tmp_path, store_4):
    import sqlite3

    store = store_4
    epoch_file = sorted(store.glob("epoch_*.db"))[-1]
    # Leave committed rows in a -wal file, as a copy taken together with its WAL would.
    writer = sqlite3.connect(epoch_file)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("UPDATE sessions SET version = 'from-the-wal' WHERE rowid = (SELECT min(rowid) FROM sessions)")
    writer.commit()
    snapshot = tmp_path / "snap"
    snapshot.mkdir()
    for p in store.iterdir():
        if p.is_file():
            (snapshot / p.name).write_bytes(p.read_bytes())
    writer.close()
    assert (snapshot / f"{epoch_file.name}-wal").exists()
    before = _digest(snapshot)
    wh = tmp_path / "w.duckdb"
    ingest(wh, snapshot)
    assert _digest(snapshot) == before
    assert frame(wh, "SELECT count(*) AS n FROM escrows WHERE version = 'from-the-wal'")["n"][0] == 1


def test_postgres_ingest_works_with_a_select_only_role(tmp_path, pg_copy, pg_server):
    url = pg_copy(4)
    role = f"ge_reader_{uuid.uuid4().hex[:8]}"
    dbname = url.rsplit("/", 1)[1]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    try:
        host = pg_server.split("@", 1)[1]
        summary = ingest(tmp_path / "w.duckdb", f"postgresql://{role}@{host}/{dbname}")
        assert summary.rows["diffs"] > 0
        with psycopg.connect(url) as conn:  # the source has no object the reader could have created
            n = conn.execute("SELECT count(*) FROM pg_tables WHERE tableowner = %s", (role,)).fetchone()[0]
        assert n == 0
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}")
            conn.execute(f"DROP ROLE {role}")


def test_parallel_postgres_reads_share_the_snapshot_of_the_first_query(pg_copy):
    url = pg_copy(4)
    with psycopg.connect(url) as conn:
        truth = dict(conn.execute("SELECT epoch_id, count(*) FROM devshard_sealed_inferences GROUP BY 1").fetchall())
        diffs = dict(conn.execute("SELECT epoch_id, count(*) FROM devshard_diffs GROUP BY 1").fetchall())
    store = PostgresStore(url)
    try:
        # A writer commits after the store opened, before the second connection exists.
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM devshard_sealed_inferences")
            conn.execute("DELETE FROM devshard_diffs WHERE nonce > 2")
        epochs = store.epochs()
        requests = [(t, e, None) for e in epochs for t in ("diffs", "sealed_inferences")]
        with store.read_many(requests) as streams:
            counts = [sum(b.num_rows for b in stream) for stream in streams]
        assert len(store._reader_connections()) == 2  # the parallel path ran
        assert counts == [n for e in epochs for n in (diffs[e], truth[e])]
        # Whatever the scheduling, the second connection on its own sees the first one's snapshot.
        second = store._reader_connections()[1]
        assert sum(b.num_rows for b in store._read_on(second, "sealed_inferences", None, None, 65536)) == sum(
            truth.values()
        )
    finally:
        store.close()


def _ingest_cmd(warehouse, store) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli", "ingest", str(store), "--warehouse", str(warehouse)]


# One instant in the default tier, the others in the heavy one (each kill and re-run takes a while);
# stands in the default tier: tests/ingest/test_safety.py::test_sigkill_then_rerun_equals_a_clean_run (delay 0.3)
@pytest.mark.parametrize("delay", [0.3, *(pytest.param(d, marks=pytest.mark.heavy) for d in (0.0, 0.6, 0.9, 1.5))])
def test_sigkill_then_rerun_equals_a_clean_run(tmp_path, store_4, clean_of_store_4, delay):
    """Kill at several instants after the warehouse file appears (schema creation, mid-chunk, between chunks)."""
    store, clean = store_4, clean_of_store_4  # a clean ingest of the same bytes, under the same source name
    wh = tmp_path / "killed.duckdb"
    env = os.environ | {"GONKA_EVIDENCE_CHUNK_NONCES": "40"}  # one escrow per chunk, each its own transaction
    proc = subprocess.Popen(_ingest_cmd(wh, store), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not wh.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # The killed warehouse opens, holds only whole chunks, and a re-run converges to the clean state.
    subprocess.run(_ingest_cmd(wh, store), env=env, check=True, stdout=subprocess.DEVNULL)
    assert_views_equal(views(clean), views(wh))
    statuses = frame(wh, "SELECT status FROM ingest_runs ORDER BY started_at")["status"].to_list()
    assert statuses[-1] == "ok"
    # The killed run's row, left 'running', is marked 'aborted' by the next writer (unless the run had
    # finished its work before the kill).
    assert set(statuses[:-1]) <= {"aborted", "ok"}


def test_postgres_reads_stream_in_bounded_batches(pg_copy):
    """The batch size bounds what the reads hold at once (READ_CONNECTIONS x read-ahead batches):
    a table larger than a batch arrives in several batches, complete and in one snapshot."""
    url = pg_copy(4)
    with psycopg.connect(url) as conn:
        total = conn.execute("SELECT count(*) FROM devshard_diffs").fetchone()[0]
    store = PostgresStore(url)
    try:
        with store.read_many([("diffs", None, None), ("sealed_inferences", None, None)], batch_rows=8) as streams:
            diffs = list(streams[0])
            list(streams[1])
        assert sum(b.num_rows for b in diffs) == total
        assert len(diffs) > 1
        # the driver cuts a batch once it holds batch_rows x 256 bytes (a hint: plus the last row)
        assert max(b.num_rows for b in diffs) < total
    finally:
        store.close()
