"""Rows of an epoch whose sessions stage 1 set aside are quarantined by the lake as by a warehouse: a partition
is every (epoch, bucket) holding rows of a copy, not only one holding sessions."""

from __future__ import annotations

import shutil
import sqlite3

import polars as pl

from pipeline.network.lake import Lake
from tests.helpers import cli_in, frame, ingest
from tests.network.test_lake_agrees import DATA, _lake_frame

REASONS = (
    "SELECT table_name, reason, count(*) AS n FROM quarantine WHERE table_name <> 'signatures' GROUP BY ALL "
    "ORDER BY ALL"
)


def test_the_rows_of_an_epoch_whose_sessions_are_all_set_aside_are_quarantined_not_lost(tmp_path):
    # Every session of the samples' epoch 3 is settled: without sessions.settled_at all three are set aside,
    # and the epoch's diffs, seals and snapshots have no session row. The lake built no partition of epoch 3
    # and dropped them unsaid (2 quarantined rows against the warehouse's 1,471).
    store = tmp_path / "store"
    shutil.copytree(DATA / "store", store)
    with sqlite3.connect(store / "epoch_3.db") as db:
        sessions, settled = db.execute("SELECT count(*), count(settled_at) FROM sessions").fetchone()
        db.execute("ALTER TABLE sessions RENAME COLUMN settled_at TO settled_at_v2")
    db.close()
    assert sessions == settled > 0
    single = tmp_path / "single.duckdb"
    ingest(single, store)
    result = cli_in(
        tmp_path, "network", "ingest", str(store), "--lake", str(tmp_path / "lake"), "--workers", "0", "--buckets", "2"
    )
    assert result.returncode == 0, result.stderr
    expected = frame(single, REASONS)
    unclaimed = expected.filter(expected["reason"] == "epoch 3: no session row claims it")
    assert set(unclaimed["table_name"]) >= {"diffs", "sealed_inferences"} and unclaimed["n"].min() > 0
    lake = Lake(tmp_path / "lake")
    got = (
        _lake_frame(lake, REASONS).group_by("table_name", "reason").agg(pl.col("n").sum()).sort("table_name", "reason")
    )
    assert got.rows() == expected.rows()
    quarantined = f"quarantined rows: {expected['n'].sum():,};"
    assert quarantined in result.stderr, result.stderr  # the summary, a notice
    assert 3 in {e for e, _ in lake.partitions()} and 3 not in lake.epochs()  # rows, but no escrow, of epoch 3
    held = frame(single, "SELECT epoch_id FROM escrows GROUP BY ALL ORDER BY ALL")["epoch_id"].to_list()
    assert lake.epochs() == held
