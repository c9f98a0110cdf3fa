"""The lake reports what a single warehouse of the same copy reports: an escrow whose session lies in two
epoch files of one SQLite copy is a conflict (its session rows and its other rows quarantined, the escrow not
counted), not an escrow counted once per epoch; a forked diff is in the command's output and in quarantine."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from pipeline.ingest import MISSING_COLUMNS, MISSING_COLUMNS_QUARANTINED
from pipeline.network.copies import write_copy
from pipeline.network.jobs import lake_quarantine
from pipeline.network.lake import Lake
from pipeline.network.partition import build_partition
from pipeline.sources.errors import SourceError
from tests.helpers import cli_in, frame, ingest

DATA = Path(__file__).resolve().parents[2] / "data-samples"


def _lake(tmp_path: Path, copies: list[Path], buckets: int = 2) -> Lake:
    lake_dir = tmp_path / "lake"
    Lake(lake_dir, buckets, create=True)
    for copy in copies:
        write_copy(str(lake_dir), str(copy))
    lake = Lake(lake_dir)
    for epoch, bucket in lake.partitions():
        build_partition(str(lake_dir), epoch, bucket)
    return lake


def _lake_frame(lake: Lake, sql: str) -> pl.DataFrame:
    frames = [frame(lake.warehouse_path(e, b), sql) for e, b in lake.partitions()]
    return pl.concat([f for f in frames if f.height]) if any(f.height for f in frames) else frames[0]


def test_an_escrow_in_two_epoch_files_is_a_conflict_in_the_lake_as_in_a_warehouse(tmp_path):
    store = tmp_path / "store"
    shutil.copytree(DATA / "store", store)
    with sqlite3.connect(store / "epoch_2.db") as a:
        escrow = a.execute("SELECT min(escrow_id) FROM sessions").fetchone()[0]
        cursor = a.execute("SELECT * FROM sessions WHERE escrow_id = ?", (escrow,))
        row, cols = cursor.fetchone(), [d[0] for d in cursor.description]
    a.close()
    with sqlite3.connect(store / "epoch_3.db") as b:
        b.execute(f"INSERT INTO sessions ({', '.join(cols)}) VALUES ({', '.join('?' * len(row))})", row)
    b.close()
    single = tmp_path / "single.duckdb"
    ingest(single, store)
    lake = _lake(tmp_path, [store], buckets=1)  # an escrow's bucket is the same in every epoch: one will do

    count = "SELECT escrow_id FROM escrows ORDER BY 1"
    assert sorted(_lake_frame(lake, count)["escrow_id"].to_list()) == frame(single, count)["escrow_id"].to_list()
    assert escrow not in frame(single, count)["escrow_id"].to_list()
    named = (
        f"SELECT table_name, row_key, reason FROM quarantine WHERE row_key LIKE '%{escrow}%' "
        "AND table_name IN ('sessions', 'diffs', 'sealed_inferences', 'snapshots') ORDER BY ALL"
    )
    expected = frame(single, named)
    assert expected.filter(pl.col("table_name") == "sessions").height == 2
    assert expected.filter(pl.col("table_name") == "diffs").height > 0
    assert _lake_frame(lake, named).sort(pl.all()).rows() == expected.rows()


# the bundled store twice and a whole `network ingest`; stands in the default tier: the partition's fork rows,
# quarantine reasons included, as a warehouse's,
# tests/network/test_lake.py::test_a_forked_diff_is_reported_as_a_single_warehouse_reports_it,
# and what `network ingest` says of a fork,
# tests/cli/test_network.py::test_network_ingest_names_each_fork_and_the_copies_of_each_version
@pytest.mark.heavy
def test_a_forked_diff_is_said_by_network_ingest_and_kept_in_quarantine(tmp_path):
    # Two copies of the bundled store, one diff's bytes changed in the second: a fork of that (escrow, nonce).
    first, second = tmp_path / "host-a", tmp_path / "host-b"
    shutil.copytree(DATA / "store", first)
    shutil.copytree(DATA / "store", second)
    with sqlite3.connect(second / "epoch_3.db") as db:
        escrow, nonce, blob = db.execute(
            "SELECT escrow_id, nonce, txs_proto FROM diffs ORDER BY escrow_id, nonce DESC LIMIT 1"
        ).fetchone()
        forked = blob + b"\x12\x00"  # one more (empty) transaction: other bytes that still decode
        db.execute("UPDATE diffs SET txs_proto = ? WHERE escrow_id = ? AND nonce = ?", (forked, escrow, nonce))
    db.close()
    single = tmp_path / "single.duckdb"
    for copy in (first, second):
        ingest(single, copy)
    lake_dir = tmp_path / "lake"
    args = ["network", "ingest", str(first), str(second), "--lake", str(lake_dir), "--workers", "0"]
    result = cli_in(tmp_path, *args, "--buckets", "2")  # what it says: in-process
    assert result.returncode == 0, result.stderr
    said = "\n".join([result.stdout, result.stderr])
    assert "forks: 1;" in said, said
    key = f"{escrow}/{nonce}"
    forks = lake_quarantine(lake_dir).filter((pl.col("table_name") == "diffs") & (pl.col("row_key") == key))
    held = f"SELECT source_id, reason FROM quarantine WHERE table_name = 'diffs' AND row_key = '{key}'"
    expected = frame(single, held)
    assert forks.height == expected.height == 2
    assert sorted(forks["reason"].to_list()) == sorted(expected["reason"].to_list())


def test_rows_set_aside_and_columns_missing_agree_between_lake_and_warehouse(tmp_path):
    """One copy with both faults of the two tests below, read once by `ingest` and once by `network ingest`: a
    diff whose bytes the copy holds as text and the settled sessions of an epoch without sessions.settled_at are
    set aside by stage 1 and quarantined by the lake as by a warehouse; the columns the copy lacks are said, and
    noted in the run record of each partition of their epoch."""
    store = tmp_path / "store"
    shutil.copytree(DATA / "store", store)
    with sqlite3.connect(store / "epoch_3.db") as db:
        escrow, nonce = db.execute("SELECT escrow_id, max(nonce) FROM diffs GROUP BY 1 ORDER BY 1 LIMIT 1").fetchone()
        db.execute("UPDATE diffs SET txs_proto = txs_proto || X'00' WHERE escrow_id = ? AND nonce = ?", (escrow, nonce))
        db.execute("ALTER TABLE sessions RENAME COLUMN version TO version_v2")
    db.close()
    with sqlite3.connect(store / "epoch_2.db") as db:
        settled = db.execute("SELECT count(*) FROM sessions WHERE settled_at IS NOT NULL").fetchone()[0]
        db.execute("ALTER TABLE sessions RENAME COLUMN settled_at TO settled_at_v2")
    db.close()
    single = tmp_path / "single.duckdb"
    ingest(single, store)
    cli = ["network", "ingest", str(store), "--lake", str(tmp_path / "lake")]
    result = cli_in(tmp_path, *cli, "--workers", "0", "--buckets", "2")  # what it says: in-process
    assert result.returncode == 0, result.stderr
    assert (
        "warning: copy store lacks columns, read as NULL or their rows quarantined: "
        "sessions.settled_at (in epoch 2); sessions.version (in epoch 3)"
    ) in result.stderr.splitlines(), result.stderr
    lake = Lake(tmp_path / "lake")
    named = "SELECT table_name, row_key, reason FROM quarantine WHERE table_name <> 'signatures' ORDER BY ALL"
    expected = frame(single, named)
    assert f"{escrow}/{nonce}" in expected.filter(pl.col("table_name") == "diffs")["row_key"].to_list()
    assert expected.filter(pl.col("reason").str.contains("sessions.settled_at is absent")).height == settled > 0
    assert _lake_frame(lake, named).sort(pl.all()).rows() == expected.rows()
    notes = "SELECT DISTINCT input, note FROM ingest_accounting WHERE input LIKE 'columns missing%' ORDER BY ALL"
    expected = frame(single, notes).rows()
    assert expected == [
        (MISSING_COLUMNS, "sessions.version (in epoch 3)"),
        (MISSING_COLUMNS_QUARANTINED, "sessions.settled_at (in epoch 2)"),
    ]
    epochs = set()
    for epoch, bucket in lake.partitions():
        epochs.add(epoch)
        assert frame(lake.warehouse_path(epoch, bucket), notes).rows() == [
            (i, n) for i, n in expected if n.endswith(f"(in epoch {epoch})")
        ]
    assert {2, 3} < epochs


# a warehouse and a lake of their own; stands in the default tier: both faults in one copy, read once each way,
# tests/network/test_lake_agrees.py::test_rows_set_aside_and_columns_missing_agree_between_lake_and_warehouse
@pytest.mark.heavy
def test_rows_stage_1_sets_aside_are_quarantined_by_the_lake_as_by_a_warehouse(tmp_path):
    # A diff whose bytes a copy holds as text (SQLite `||` makes text), and a copy without sessions.settled_at:
    # the reader sets the diff and the settled sessions aside; the lake dropped them unsaid.
    store = tmp_path / "store"
    shutil.copytree(DATA / "store", store)
    with sqlite3.connect(store / "epoch_3.db") as db:
        escrow, nonce = db.execute("SELECT escrow_id, max(nonce) FROM diffs GROUP BY 1 ORDER BY 1 LIMIT 1").fetchone()
        db.execute("UPDATE diffs SET txs_proto = txs_proto || X'00' WHERE escrow_id = ? AND nonce = ?", (escrow, nonce))
    db.close()
    with sqlite3.connect(store / "epoch_2.db") as db:
        db.execute("ALTER TABLE sessions RENAME COLUMN settled_at TO settled_at_v2")
    db.close()
    single = tmp_path / "single.duckdb"
    ingest(single, store)
    lake = _lake(tmp_path, [store])
    # the lake keeps no signatures (only compared between copies by a warehouse): their orphans are not its own
    named = "SELECT table_name, row_key, reason FROM quarantine WHERE table_name <> 'signatures' ORDER BY ALL"
    expected = frame(single, named)
    assert (escrow and f"{escrow}/{nonce}") in expected.filter(pl.col("table_name") == "diffs")["row_key"].to_list()
    assert expected.filter(pl.col("reason").str.contains("sessions.settled_at is absent")).height == 2
    assert _lake_frame(lake, named).sort(pl.all()).rows() == expected.rows()


def test_a_copy_without_a_column_no_row_can_be_read_without_is_refused_before_the_lake_is_written(tmp_path):
    store = tmp_path / "store"
    shutil.copytree(DATA / "store", store)
    with sqlite3.connect(store / "epoch_4.db") as db:
        db.execute("ALTER TABLE sessions DROP COLUMN latest_nonce")
    db.close()
    lake_dir = tmp_path / "lake"
    Lake(lake_dir, 2, create=True)
    with pytest.raises(SourceError, match=r"lacks required column\(s\) sessions\.latest_nonce \(in epoch 4\)"):
        write_copy(str(lake_dir), str(store))
    assert Lake(lake_dir).manifests() == [] and not list(lake_dir.glob("*/epoch=*/bucket=*/*.parquet"))


# a warehouse and a lake of their own; stands in the default tier: both faults in one copy, read once each way,
# tests/network/test_lake_agrees.py::test_rows_set_aside_and_columns_missing_agree_between_lake_and_warehouse
@pytest.mark.heavy
def test_a_partition_names_the_columns_its_copy_lacks_in_its_run_record(tmp_path):
    store = tmp_path / "store"
    shutil.copytree(DATA / "store", store)
    with sqlite3.connect(store / "epoch_3.db") as db:
        db.execute("ALTER TABLE sessions RENAME COLUMN version TO version_v2")
        db.execute("ALTER TABLE sessions RENAME COLUMN settled_at TO settled_at_v2")
    db.close()
    single = tmp_path / "single.duckdb"
    ingest(single, store)
    # `network ingest` builds the lake (its partitions' run records are read below) and says the columns as
    # `ingest` does, per table and column with their epochs.
    cli = ["network", "ingest", str(store), "--lake", str(tmp_path / "said")]
    result = cli_in(tmp_path, *cli, "--workers", "0", "--buckets", "2")  # what it says: in-process
    assert result.returncode == 0, result.stderr
    assert (
        "warning: copy store lacks columns, read as NULL or their rows quarantined: "
        "sessions.settled_at (in epoch 3); sessions.version (in epoch 3)"
    ) in result.stderr.splitlines(), result.stderr
    lake = Lake(tmp_path / "said")
    notes = "SELECT DISTINCT input, note FROM ingest_accounting WHERE input LIKE 'columns missing%' ORDER BY ALL"
    expected = frame(single, notes).rows()
    assert expected == [
        (MISSING_COLUMNS, "sessions.version (in epoch 3)"),
        (MISSING_COLUMNS_QUARANTINED, "sessions.settled_at (in epoch 3)"),
    ]
    for epoch, bucket in lake.partitions():
        assert frame(lake.warehouse_path(epoch, bucket), notes).rows() == (expected if epoch == 3 else [])
