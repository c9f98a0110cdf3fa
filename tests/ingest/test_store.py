"""Ingest of generated copies in both layouts: numbers, equivalence, idempotence, history."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from pipeline.core.paths import DATA_SAMPLES_DIR
from tests.helpers import assert_views_equal, frame, ingest, views


@pytest.fixture(scope="module")
def built(tmp_path_factory, timeline) -> dict:
    """SQLite copies named as `sqlite_copy` names them (`store-4`, `a-3`, `b-4`: the name is the source id), only
    read, and the warehouses several tests start from, each ingested once per module: `store` (store-4 alone,
    with its summary), `a`, `b` (a-3 or b-4 alone) and `a_b` (a-3 then b-4)."""
    root = tmp_path_factory.mktemp("built")
    stores = {
        name: timeline.copy(last_epoch=epoch).write_sqlite(root / f"{name}-{epoch}")
        for name, epoch in (("store", 4), ("a", 3), ("b", 4))
    }
    warehouses = {name: root / f"{name}.duckdb" for name in ("store", "a", "b", "a_b")}
    summary = ingest(warehouses["store"], stores["store"])
    for name, sources in (("a", ["a"]), ("b", ["b"]), ("a_b", ["a", "b"])):
        for source in sources:
            ingest(warehouses[name], stores[source])
    assert not list(root.glob("*.wal"))  # closed, so checkpointed: each file alone is its warehouse
    return {"stores": stores, "warehouses": warehouses, "summary": summary}


def own(built: dict, name: str, path: Path) -> Path:
    """The test's own copy, at `path`, of the module's warehouse `name`."""
    shutil.copyfile(built["warehouses"][name], path)
    return path


def test_numbers_match_the_generated_truth(tmp_path, built, timeline):
    copy = timeline.copy(last_epoch=4)
    wh = own(built, "store", tmp_path / "w.duckdb")  # store-4 ingested
    truth = copy.truth

    per_kind = frame(wh, "SELECT kind, count(*) AS n FROM txs GROUP BY kind ORDER BY kind")
    expected_kind = truth.txs.group_by("kind").agg(n=pl.len()).sort("kind")
    assert per_kind.to_dicts() == expected_kind.with_columns(pl.col("n").cast(pl.Int64)).to_dicts()

    got = frame(
        wh,
        "SELECT escrow_id, inference_id, executor, executor_slot, status, challenged, sealed, finished, drained, "
        "votes_valid, votes_invalid FROM inferences ORDER BY escrow_id, inference_id",
    )
    want = truth.inferences.select(
        "escrow_id",
        "inference_id",
        "executor",
        "executor_slot",
        "status",
        "challenged",
        "sealed",
        pl.col("has_finish_tx").alias("finished"),
        "drained",
        "votes_valid",
        "votes_invalid",
    ).sort("escrow_id", "inference_id")
    assert_frame_equal(got, want, check_dtypes=False)

    per_status = frame(wh, "SELECT status, count(*) AS n FROM inferences GROUP BY ALL ORDER BY status")
    assert (
        per_status.to_dicts()
        == truth.inferences.group_by("status")
        .agg(n=pl.len())
        .sort("status")
        .with_columns(pl.col("n").cast(pl.Int64))
        .to_dicts()
    )
    per_executor = frame(wh, "SELECT executor, count(*) AS n FROM inferences GROUP BY ALL ORDER BY executor")
    assert per_executor["n"].sum() == truth.inferences.height
    assert (
        per_executor.to_dicts()
        == truth.inferences.group_by("executor")
        .agg(n=pl.len())
        .sort("executor")
        .with_columns(pl.col("n").cast(pl.Int64))
        .to_dicts()
    )
    # Every inference the replay derived agrees with the copy's full sealed rows.
    assert frame(wh, "SELECT count(*) AS n FROM replay_disagreements")["n"][0] == 0


def test_postgres_and_sqlite_layouts_give_identical_views(tmp_path, built, pg_copy):
    own(built, "store", tmp_path / "a.duckdb")  # store-4 ingested
    ingest(tmp_path / "b.duckdb", pg_copy(4))
    assert_views_equal(views(tmp_path / "a.duckdb"), views(tmp_path / "b.duckdb"))


def test_reingesting_the_same_copy_changes_nothing(tmp_path, built):
    store, first = built["stores"]["store"], built["summary"]
    wh = own(built, "store", tmp_path / "w.duckdb")  # store-4 ingested, `first` its summary
    before = views(wh)
    second = ingest(wh, store)
    assert first.escrows_changed > 0
    assert second.escrows_changed == 0 and second.rows.get("diffs", 0) == 0
    assert_views_equal(before, views(wh))
    assert frame(wh, "SELECT count(*) AS n FROM ingest_runs WHERE status = 'ok'")["n"][0] == 2


def test_history_accumulates_and_the_newest_copy_wins(tmp_path, built):
    wh = own(built, "a_b", tmp_path / "w.duckdb")  # a-3, then b-4
    own(built, "a", tmp_path / "only_a.duckdb")
    own(built, "b", tmp_path / "only_b.duckdb")
    got, only_a, only_b = views(wh), views(tmp_path / "only_a.duckdb"), views(tmp_path / "only_b.duckdb")
    b_escrows = set(only_b["escrows"]["escrow_id"])
    pruned = set(only_a["escrows"]["escrow_id"]) - b_escrows
    assert pruned, "copy B must have pruned an epoch of copy A"
    for name, keys in {
        "escrows": ["escrow_id"],
        "inferences": ["escrow_id", "inference_id"],
        "txs": ["escrow_id", "nonce", "tx_index"],
        "validations": ["escrow_id", "nonce", "tx_index"],
    }.items():
        expected = pl.concat([only_b[name], only_a[name].filter(pl.col("escrow_id").is_in(list(pruned)))]).sort(keys)
        assert_frame_equal(got[name], expected)
    # Statuses advanced between the copies, and the warehouse holds B's.
    advanced = (
        only_a["inferences"]
        .join(only_b["inferences"], on=["escrow_id", "inference_id"], suffix="_b")
        .filter(pl.col("status") != pl.col("status_b"))
    )
    assert advanced.height > 0


def test_an_older_copy_after_a_newer_one_does_not_roll_back(tmp_path, built):
    wh = own(built, "b", tmp_path / "w.duckdb")  # b-4 ingested
    ingest(wh, built["stores"]["a"])
    own(built, "a_b", tmp_path / "ab.duckdb")  # a-3, then b-4
    assert_views_equal(views(wh), views(tmp_path / "ab.duckdb"))


def test_two_hosts_of_one_escrow_do_not_double_count(tmp_path, built, pg_copy):
    """Copies of different hosts hold the same diff log; deduplication is by (escrow_id, nonce, tx_index)."""
    wh = own(built, "store", tmp_path / "w.duckdb")  # store-4 ingested
    single = views(wh)
    ingest(wh, pg_copy(4))
    assert_views_equal(single, views(wh))


def test_schema_scripts_run_again_only_when_their_text_changed(tmp_path, monkeypatch):
    """open_for_write skips the idempotent schema and view scripts when the text that last ran on the
    warehouse is the same (a no-op ingest's start-up), and runs them when it differs."""
    import shutil

    import pipeline.warehouse.database as warehouse
    from pipeline.core.paths import SQL_DIR

    wh = tmp_path / "w.duckdb"
    warehouse.open_for_write(wh).close()
    with warehouse.open_for_write(wh) as con:
        digest = con.execute("SELECT value FROM warehouse_meta WHERE key = 'schema_digest'").fetchone()[0]
        con.execute("DROP VIEW inferences")  # what the scripts would create again
    warehouse.open_for_write(wh).close()
    tables = frame(wh, "SELECT table_name FROM duckdb_tables() UNION ALL SELECT view_name FROM duckdb_views()")
    assert len(digest) == 64 and "inferences" not in tables["table_name"].to_list()

    changed = tmp_path / "sql"
    shutil.copytree(SQL_DIR, changed)
    (changed / "warehouse" / "views" / "99_extra.sql").write_text("CREATE OR REPLACE VIEW extra AS SELECT 1 AS one;\n")
    monkeypatch.setattr(warehouse, "SQL_DIR", changed)
    warehouse.open_for_write(wh).close()
    assert frame(wh, "SELECT one FROM extra")["one"].to_list() == [1]
    assert frame(wh, "SELECT count(*) AS n FROM inferences")["n"][0] == 0  # every script ran again
    assert frame(wh, "SELECT value FROM warehouse_meta WHERE key = 'schema_digest'")["value"][0] != digest


def test_a_chunks_transactions_are_freed_before_its_derive(tmp_path, pg_copy, monkeypatch):
    """The derive is where the ingest peaks, inside the chunk's transaction: the chunk's decoded
    transactions (its largest rows) must be gone from Arrow's memory by then. DuckDB keeps a table
    registered in a transaction until the transaction ends, so they are handed over as a stream."""
    import pyarrow as pa

    import pipeline.ingest.derive as derive
    import pipeline.sources.decode.txs as txs

    decoded_bytes: list[int] = []
    held_at_derive: list[tuple[int, int]] = []  # (Arrow bytes allocated, the chunk's decoded transactions)
    decode, derive_escrows = txs.decode_diffs, derive.derive_escrows

    def spy_decode(batch):
        out = decode(batch)
        decoded_bytes.append(out.txs.nbytes)
        return out

    def spy_derive(con, escrow_ids):
        held_at_derive.append((pa.total_allocated_bytes(), sum(decoded_bytes)))
        decoded_bytes.clear()
        return derive_escrows(con, escrow_ids)

    monkeypatch.setattr(txs, "decode_diffs", spy_decode)
    monkeypatch.setattr(derive, "derive_escrows", spy_derive)
    ingest(tmp_path / "w.duckdb", pg_copy())
    assert held_at_derive and all(chunk_txs > 0 for _, chunk_txs in held_at_derive)
    assert all(allocated < chunk_txs for allocated, chunk_txs in held_at_derive), held_at_derive


def test_a_small_delta_writes_the_chunks_of_every_epoch_as_one(tmp_path, monkeypatch):
    """A delta of at most one chunk's new diffs (here the sample copy: three epochs, a chunk each) is written and
    derived once, in one transaction: the statements' and the derive's fixed costs were most of a small ingest."""
    import pipeline.ingest.derive as derive
    import pipeline.ingest.store as store_mod

    chunk_epochs: list[int] = []
    derived: list[list[str]] = []
    read_chunk, derive_escrows = store_mod._read_chunk, derive.derive_escrows
    monkeypatch.setattr(store_mod, "_read_chunk", lambda s, e, *a: chunk_epochs.append(e) or read_chunk(s, e, *a))
    monkeypatch.setattr(derive, "derive_escrows", lambda con, ids: derived.append(ids) or derive_escrows(con, ids))
    wh = tmp_path / "w.duckdb"
    ingest(wh, DATA_SAMPLES_DIR / "store")
    assert chunk_epochs == [2, 3, 4]
    escrows = frame(wh, "SELECT escrow_id FROM escrows ORDER BY ALL")["escrow_id"].to_list()
    assert len(derived) == 1 and sorted(derived[0]) == escrows
