"""Broken and hostile copies: every row read is used, deduplicated or
quarantined with its reason; the ingest never ends in a traceback, never hangs, never picks between
rows that claim one key, and never reads what is not a regular file of the store.

Each test writes a copy with the project's sample generator, mutates it with sqlite3 or psycopg, and
checks the quarantine reason, the `ingest_accounting` row and the identity."""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

import psycopg
import pytest

from pipeline.ingest.accounting import identity_violations
from pipeline.sources.decode.devshard_pb2 import DiffContent
from pipeline.warehouse.database import open_read_only
from tests.helpers import frame, ingest


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, timeline) -> Path:
    store = tmp_path_factory.mktemp("pristine") / "store"
    timeline.copy(last_epoch=2).write_sqlite(store, payloads=False)
    return store


@pytest.fixture
def store(pristine, tmp_path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(pristine, copy)
    return copy


def _loosen(db: Path, table: str) -> None:
    """Drop the table's constraints and declared types (a hostile writer's table): same rows, any value fits."""
    with sqlite3.connect(db) as c:
        c.execute(f"CREATE TABLE loose AS SELECT * FROM {table}")
        c.execute(f"DROP TABLE {table}")
        c.execute(f"ALTER TABLE loose RENAME TO {table}")


def _run(tmp_path: Path, source) -> tuple[dict[str, tuple], list[tuple[str, str, str]]]:
    """Ingest into a fresh warehouse; the accounting rows by input and the quarantine rows. Asserts the identity."""
    wh = tmp_path / "w.duckdb"
    ingest(wh, source)
    con = open_read_only(wh)
    try:
        assert identity_violations(con) == []
        rows = con.execute(
            "SELECT input, rows_read, rows_used, rows_deduplicated, rows_quarantined FROM ingest_accounting"
        ).fetchall()
        bad = con.execute("SELECT table_name, row_key, reason FROM quarantine ORDER BY ALL").fetchall()
    finally:
        con.close()
    return {r[0]: tuple(r[1:]) for r in rows}, bad


def _epoch_file(store: Path) -> Path:
    return sorted(store.glob("epoch_*.db"))[-1]


def test_a_pristine_copy_balances_with_nothing_quarantined(tmp_path, store):
    acct, bad = _run(tmp_path, store)
    with sqlite3.connect(_epoch_file(store)) as c:
        diffs = sum(sqlite3.connect(f).execute("SELECT count(*) FROM diffs").fetchone()[0] for f in store.glob("e*.db"))
        assert c.execute("SELECT count(*) FROM sessions").fetchone()[0] > 0
    assert acct["diffs"] == (diffs, diffs, 0, 0)
    assert [b for b in bad if not b[2].startswith("unknown tx kind")] == []
    # A second ingest reads nothing new: what it reads is held already.
    acct2, _ = _run(tmp_path, store)
    assert acct2["sessions"][0] == acct2["sessions"][2] and acct2["sessions"][1] == 0


def test_values_that_are_not_what_their_column_claims_are_quarantined_with_the_reason(tmp_path, store):
    db = _epoch_file(store)
    _loosen(db, "sealed_inferences")
    _loosen(db, "diffs")
    with sqlite3.connect(db) as c:
        ids = [r[0] for r in c.execute("SELECT rowid FROM sealed_inferences ORDER BY rowid LIMIT 3")]
        c.execute("UPDATE sealed_inferences SET sealed_status = 'finished' WHERE rowid = ?", (ids[0],))
        c.execute("UPDATE sealed_inferences SET sealed_model = CAST(X'61FF62' AS TEXT) WHERE rowid = ?", (ids[1],))
        # a 31-digit count: SQLite keeps it as a real number
        c.execute(
            "UPDATE sealed_inferences SET sealed_input_tokens = 1000000000000000000000000000000 WHERE rowid = ?",
            (ids[2],),
        )
        escrow, nonce = c.execute("SELECT escrow_id, max(nonce) FROM diffs GROUP BY 1 LIMIT 1").fetchone()
        c.execute("UPDATE diffs SET nonce = 'x' WHERE escrow_id = ? AND nonce = ?", (escrow, nonce))
        c.execute("UPDATE diffs SET nonce = -5 WHERE escrow_id = ? AND nonce = ?", (escrow, nonce - 1))
        c.execute("UPDATE diffs SET txs_proto = NULL WHERE escrow_id = ? AND nonce = ?", (escrow, nonce - 2))
        diffs = c.execute("SELECT count(*) FROM diffs").fetchone()[0]
        sealed = c.execute("SELECT count(*) FROM sealed_inferences").fetchone()[0]
    acct, bad = _run(tmp_path, store)
    reasons = [b[2] for b in bad]
    assert any("sealed_status holds text, not integer" in r for r in reasons)
    assert any("sealed_model is not valid UTF-8" in r for r in reasons)
    assert any("sealed_input_tokens holds real, not integer" in r for r in reasons)
    assert any(r.endswith("nonce holds text, not integer") for r in reasons)
    assert any("nonce is negative (-5)" in r for r in reasons)
    assert any("txs_proto is NULL" in r for r in reasons)
    # every row of the epoch file was read, three of each table set aside
    assert acct["sealed_inferences"][3] == 3 and acct["diffs"][3] == 3
    assert acct["diffs"][0] >= diffs and acct["sealed_inferences"][0] >= sealed


def test_a_diff_at_nonce_0_is_quarantined_not_skipped_by_the_first_cursor(tmp_path, store):
    db = _epoch_file(store)
    with sqlite3.connect(db) as c:
        escrow = c.execute("SELECT escrow_id FROM diffs ORDER BY escrow_id LIMIT 1").fetchone()[0]
        c.execute(
            "INSERT INTO diffs SELECT escrow_id, 0, txs_proto, user_sig, post_state_root, state_hash, warm_keys_json, "
            "created_at FROM diffs WHERE escrow_id = ? AND nonce = 1",
            (escrow,),
        )
        diffs = c.execute("SELECT count(*) FROM diffs").fetchone()[0]
    acct, bad = _run(tmp_path, store)
    assert ("diffs", f"{escrow}/0", f"{db.name}: nonce is 0 (a diff log's nonces start at 1)") in bad
    assert acct["diffs"][3] == 1 and acct["diffs"][0] >= diffs


def test_keys_that_are_null_bytes_or_not_utf8_are_counted_not_skipped(tmp_path, store):
    db = _epoch_file(store)
    _loosen(db, "diffs")
    with sqlite3.connect(db) as c:
        row = c.execute("SELECT * FROM diffs LIMIT 1").fetchone()
        cols = [d[0] for d in c.execute("SELECT * FROM diffs LIMIT 1").description]
        i = cols.index("escrow_id")
        marks = ", ".join("?" * len(cols))
        for bad_id in (None, b"\x00\x01", sqlite3.Binary(b"e\xff")):
            values = list(row)
            values[i] = bad_id
            values[cols.index("nonce")] = 10_000 + len(str(bad_id))
            c.execute(f"INSERT INTO diffs VALUES ({marks})", values)
        c.execute("UPDATE diffs SET escrow_id = CAST(X'33FF' AS TEXT) WHERE rowid = (SELECT max(rowid) FROM diffs)")
    acct, bad = _run(tmp_path, store)
    orphans = [b for b in bad if b[0] == "diffs" and "no session row claims it" in b[2]]
    assert len(orphans) == 3
    assert {b[1].split("/")[0] for b in orphans} >= {"NULL", "0001"}
    assert acct["diffs"][3] == 3


def test_a_diff_without_its_session_row_is_quarantined(tmp_path, store):
    db = _epoch_file(store)
    with sqlite3.connect(db) as c:
        c.execute(
            "INSERT INTO diffs (escrow_id, nonce, txs_proto, created_at) SELECT 'ghost', nonce, txs_proto, created_at "
            "FROM diffs WHERE escrow_id = (SELECT min(escrow_id) FROM diffs) AND nonce <= 4"
        )
    acct, bad = _run(tmp_path, store)
    ghosts = [b for b in bad if b[1].startswith("ghost/")]
    assert len(ghosts) == 4 and all("no session row claims it" in b[2] for b in ghosts)
    assert acct["diffs"][3] == 4


def test_a_blob_holding_its_transactions_twice_is_quarantined(tmp_path, store):
    db = _epoch_file(store)
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT escrow_id, nonce, txs_proto FROM diffs ORDER BY escrow_id, nonce").fetchall()
        # a diff of verdicts (no start, which a second copy would already contradict)
        escrow, nonce, blob = next(
            (e, n, b)
            for e, n, b in rows
            if (txs := DiffContent.FromString(b).txs) and all(t.WhichOneof("tx") == "validation" for t in txs)
        )
        c.execute("UPDATE diffs SET txs_proto = ? WHERE escrow_id = ? AND nonce = ?", (blob + blob, escrow, nonce))
    _, bad = _run(tmp_path, store)
    assert ("diffs", f"{escrow}/{nonce}") in {(b[0], b[1]) for b in bad}
    assert any("twice" in b[2] for b in bad if b[1] == f"{escrow}/{nonce}")


def test_two_files_claiming_one_epoch_are_both_quarantined(tmp_path, store):
    db = _epoch_file(store)
    epoch = int(db.stem.split("_")[1])
    shutil.copy(db, store / f"epoch_0{epoch}.db")
    acct, bad = _run(tmp_path, store)
    named = {b[1]: b[2] for b in bad if b[0] == "store_files"}
    assert set(named) == {db.name, f"epoch_0{epoch}.db"}
    assert all(f"2 files claim epoch {epoch}" in why for why in named.values())
    assert acct["store files"][3] == 2
    assert frame(tmp_path / "w.duckdb", f"SELECT count(*) AS n FROM escrows WHERE epoch_id = {epoch}")["n"][0] == 0


def test_the_same_escrow_in_two_epoch_files_is_a_conflict(tmp_path, store):
    first, last = sorted(store.glob("epoch_*.db"))[:2]
    with sqlite3.connect(first) as a:
        escrow = a.execute("SELECT min(escrow_id) FROM sessions").fetchone()[0]
        cursor = a.execute("SELECT * FROM sessions WHERE escrow_id = ?", (escrow,))
        row, cols = cursor.fetchone(), [d[0] for d in cursor.description]
        diffs = a.execute("SELECT count(*) FROM diffs WHERE escrow_id = ?", (escrow,)).fetchone()[0]
    with sqlite3.connect(last) as b:
        b.execute(f"INSERT INTO sessions ({', '.join(cols)}) VALUES ({', '.join('?' * len(row))})", row)
    acct, bad = _run(tmp_path, store)
    sessions = [b for b in bad if b[0] == "sessions"]
    assert len(sessions) == 2 and all("none used" in b[2] for b in sessions)
    conflicted_diffs = [b for b in bad if b[0] == "diffs" and b[1].startswith(f"{escrow}/")]
    assert len(conflicted_diffs) == diffs and all("session rows conflict" in b[2] for b in conflicted_diffs)
    assert frame(tmp_path / "w.duckdb", f"SELECT count(*) AS n FROM escrows WHERE escrow_id = '{escrow}'")["n"][0] == 0
    assert acct["sessions"][3] == 2


def test_duplicate_sealed_rows_that_disagree_are_both_quarantined(tmp_path, store):
    db = _epoch_file(store)
    _loosen(db, "sealed_inferences")
    with sqlite3.connect(db) as c:
        cols = [d[0] for d in c.execute("SELECT * FROM sealed_inferences LIMIT 1").description]
        row = list(c.execute("SELECT * FROM sealed_inferences ORDER BY rowid LIMIT 1").fetchone())
        same = list(c.execute("SELECT * FROM sealed_inferences ORDER BY rowid LIMIT 1 OFFSET 1").fetchone())
        row[cols.index("sealed_votes_valid")] = (row[cols.index("sealed_votes_valid")] or 0) + 7
        marks = ", ".join("?" * len(cols))
        c.execute(f"INSERT INTO sealed_inferences VALUES ({marks})", row)
        c.execute(f"INSERT INTO sealed_inferences VALUES ({marks})", same)  # an identical duplicate
    acct, bad = _run(tmp_path, store)
    key = f"{row[cols.index('escrow_id')]}/{row[cols.index('inference_id')]}"
    claims = [b for b in bad if b[0] == "sealed_inferences" and b[1].startswith(key + " #")]
    assert len(claims) == 2 and all("disagree" in b[2] for b in claims)
    assert acct["sealed_inferences"][2] >= 1  # the identical one is deduplicated
    assert acct["sealed_inferences"][3] == 2


def test_a_recursive_view_named_diffs_is_refused_by_name(tmp_path, store):
    db = _epoch_file(store)
    with sqlite3.connect(db) as c:
        c.execute("DROP TABLE diffs")
        c.execute(
            "CREATE VIEW diffs AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
            "SELECT 'e' AS escrow_id, n AS nonce, X'' AS txs_proto, 0 AS created_at FROM r"
        )
    _, bad = _run(tmp_path, store)
    assert any(b[0] == "diffs" and "is a view, not a table" in b[2] for b in bad)


def test_a_wal_symlink_to_dev_zero_is_refused_and_never_copied(tmp_path, store, monkeypatch):
    db = _epoch_file(store)
    os.symlink("/dev/zero", f"{db}-wal")
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    acct, bad = _run(tmp_path, store)
    why = {b[1]: b[2] for b in bad if b[0] == "store_files"}
    assert "a symlink leaving the store" in why[db.name]
    assert why[f"{db.name}-wal"] == f"companion of {db.name}, which is not read"
    assert list(private.rglob("*")) == []
    assert acct["store files"][3] == 2


def test_a_symlink_loop_is_refused_by_name(tmp_path, store):
    """A file of the store that is a symlink leading back to itself: one quarantine row, no traceback."""
    (store / "_meta.db").unlink()
    os.symlink(store / "_meta.db", store / "_meta.db")
    acct, bad = _run(tmp_path, store)
    why = {b[1]: b[2] for b in bad if b[0] == "store_files"}
    assert why["_meta.db"] == "a symlink loop: not read"
    assert acct["store files"][3] == 1


def test_a_fifo_and_an_epoch_past_64_bits_are_refused(tmp_path, store):
    os.mkfifo(store / "epoch_9.db")
    (store / "_meta.db").unlink()
    os.mkfifo(store / "_meta.db")
    (store / "epoch_99999999999999999999.db").write_bytes(b"")
    (store / "notes.txt").write_text("hello")
    acct, bad = _run(tmp_path, store)
    why = {b[1]: b[2] for b in bad if b[0] == "store_files"}
    assert why["epoch_9.db"].startswith("not a regular file (a FIFO)")
    assert why["_meta.db"].startswith("not a regular file (a FIFO)")
    assert "past 64 bits" in why["epoch_99999999999999999999.db"]
    assert why["notes.txt"] == "not part of a devshard store: not read"
    assert acct["store files"][0] == len(list(store.iterdir()))


def test_a_detached_postgres_partition_is_counted_not_lost(tmp_path, pg_copy):
    url = pg_copy(2)
    with psycopg.connect(url, autocommit=True) as conn:
        epoch = conn.execute("SELECT max(epoch_id) FROM devshard_diffs").fetchone()[0]
        n = conn.execute("SELECT count(*) FROM devshard_diffs WHERE epoch_id = %s", (epoch,)).fetchone()[0]
        conn.execute(f"ALTER TABLE devshard_diffs DETACH PARTITION devshard_diffs_epoch_{epoch}")
    acct, bad = _run(tmp_path, url)
    detached = [b for b in bad if b[0] == "diffs" and "detached" in b[2]]
    assert len(detached) == n > 0
    assert acct["diffs"][3] >= n


def test_a_postgres_column_of_another_type_sets_its_rows_aside(tmp_path, pg_copy):
    url = pg_copy(2)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE devshard_sealed_inferences ALTER COLUMN sealed_input_tokens TYPE numeric")
        conn.execute("ALTER TABLE devshard_sealed_inferences ALTER COLUMN sealed_model TYPE text")
        escrow, inference = conn.execute(
            "SELECT escrow_id, inference_id FROM devshard_sealed_inferences ORDER BY 1, 2 LIMIT 1"
        ).fetchone()
        conn.execute(
            "UPDATE devshard_sealed_inferences SET sealed_input_tokens = 1e30 "
            "WHERE escrow_id = %s AND inference_id = %s",
            (escrow, inference),
        )
        total = conn.execute("SELECT count(*) FROM devshard_sealed_inferences").fetchone()[0]
    acct, bad = _run(tmp_path, url)
    assert [b for b in bad if b[0] == "sealed_inferences"] == [
        (
            "sealed_inferences",
            f"{escrow}/{inference}",
            "devshard_sealed_inferences: sealed_input_tokens does not fit int64",
        )
    ]
    assert acct["sealed_inferences"][0] == total and acct["sealed_inferences"][3] == 1


def test_a_view_in_place_of_a_table_that_is_not_required_is_named(tmp_path, store):
    db = _epoch_file(store)
    with sqlite3.connect(db) as c:
        c.execute("ALTER TABLE sealed_inferences RENAME TO sealed_backup")
        c.execute("CREATE VIEW sealed_inferences AS SELECT * FROM sealed_backup")
    _, bad = _run(tmp_path, store)
    assert ("sealed_inferences", f"epoch {db.stem.split('_')[1]}") in {(b[0], b[1]) for b in bad}
    assert any("sealed_inferences is a view, not a table" in b[2] for b in bad)


def test_a_cell_larger_than_the_bound_sets_its_row_aside(tmp_path, store, monkeypatch):
    from pipeline.sources.store import sqlite as sqlite_store

    monkeypatch.setattr(sqlite_store, "MAX_VALUE_BYTES", 4096)
    db = _epoch_file(store)
    with sqlite3.connect(db) as c:
        escrow, nonce = c.execute("SELECT escrow_id, max(nonce) FROM diffs GROUP BY 1 ORDER BY 1 LIMIT 1").fetchone()
        c.execute("UPDATE diffs SET txs_proto = zeroblob(5000) WHERE escrow_id = ? AND nonce = ?", (escrow, nonce))
    acct, bad = _run(tmp_path, store)
    assert ("diffs", f"{escrow}/{nonce}", f"{db.name}: txs_proto is larger than 4,096 bytes") in bad
