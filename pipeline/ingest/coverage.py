"""Several copies of one escrow: which nonce ranges each copy holds, and where copies disagree.

A warehouse often holds more than one copy of an escrow (HA replicas, yesterday's and today's copy,
a host that joined by import beside one that was there from the start). Per escrow and source, the
nonce ranges the source's copies held are kept as ranges (``raw_diff_coverage``). A copy's diffs
above the highest nonce its source already gave are read, whatever the warehouse holds from other
sources, so every range a copy has and the warehouse lacks is filled in any order; those below are
not read again (a source's diffs are immutable), so an unchanged copy costs nothing.

Every diff carries the sha256 of its bytes (``raw_diffs.digest``). A copy whose diff at one
(escrow, nonce) has other bytes than the stored one is a fork: both versions go to
``raw_diff_forks`` and to quarantine, each under its source, and the replay uses the version whose
digest sorts first, so the warehouse is the same in every order. ``d_escrow_coverage`` (the
``escrows`` view's coverage columns) says per escrow what is held, what no copy held and whether
copies disagree; the provenance footer and `doctor` name partial and conflicted escrows.
"""

from __future__ import annotations

import hashlib

import duckdb
import polars as pl
import pyarrow as pa

from pipeline.core.paths import sql_text
from pipeline.ingest.runs import IngestRun
from pipeline.warehouse.database import fetch_frame

SIGNATURE_REASON = (
    "copies disagree on this host signature: this copy holds sha256:{digest} (query raw_signature_forks for every "
    "version and copy)"
)
FORK_REASON = (
    "copies disagree on this diff's bytes: this copy holds sha256:{digest}; the replay uses the version whose "
    "sha256 sorts first (query diff_forks for every version and copy)"
)


def own_cursors(con: duckdb.DuckDBPyConnection, source_id: str) -> dict[str, int]:
    """Per escrow, the highest nonce `source_id` already gave: its diffs are read past it."""
    return dict(con.execute(sql_text("warehouse/coverage/own_cursors.sql"), {"source_id": source_id}).fetchall())


def record_copy_diffs(con: duckdb.DuckDBPyConnection, run: IngestRun) -> tuple[int, int]:
    """Inside the write's transaction, before the diffs are inserted (``new_diffs`` and
    ``new_diff_digests``, the nonces the copy holds once each with their digests, registered or staged
    views): record this copy's forks with the stored versions (quarantined under each source), make the
    replay's version the one whose digest sorts first, and merge the nonces the copy holds into its
    source's ranges. Returns this copy's diffs that the warehouse already held with the same bytes
    (deduplicated) and with other bytes (forked)."""
    params = {"source_id": run.source_id, "run_id": run.run_id}
    deduplicated = fetch_frame(con, sql_text("warehouse/coverage/deduplicated.sql"))["n"][0]
    forks = fetch_frame(con, sql_text("warehouse/coverage/forks.sql"), params)
    if forks.height:
        _record_forks(con, run, forks, "diffs", "raw_diff_forks", ["escrow_id", "nonce"], FORK_REASON)
        con.execute(sql_text("warehouse/coverage/replace_forked.sql"))
    con.execute(sql_text("warehouse/coverage/new_held.sql"), {"source_id": run.source_id})
    con.execute(sql_text("warehouse/coverage/merge_ranges.sql"))
    con.execute("DROP TABLE new_held")
    return int(deduplicated), int(forks.filter(pl.col("source_id") == run.source_id).height)


def signature_digests(batch: pa.RecordBatch) -> pa.Table:
    """(epoch_id, escrow_id, nonce, slot_id, digest) of a batch of canonical signatures rows: the sha256 of
    sig, hex. The columns are copies (a column of the batch would keep its reader's buffers alive)."""
    every = pa.array(range(batch.num_rows), pa.int64())
    digest = pa.array([hashlib.sha256(sig or b"").hexdigest() for sig in batch.column("sig").to_pylist()], pa.string())
    return pa.table(
        {name: batch.column(name).take(every) for name in ("epoch_id", "escrow_id", "nonce", "slot_id")}
        | {"digest": digest}
    )


def record_copy_signatures(con: duckdb.DuckDBPyConnection, run: IngestRun) -> int:
    """Inside the write's transaction, with this copy's signature digests as ``new_signatures`` (registered, or a
    staged view): compare them with the stored ones (a difference is recorded with both versions and
    quarantined under each source) and keep per (escrow, nonce, slot) the one whose digest sorts first.
    Returns this copy's disagreeing signatures."""
    params = {"source_id": run.source_id, "run_id": run.run_id}
    forks = fetch_frame(con, sql_text("warehouse/coverage/signature_forks.sql"), params)
    if forks.height:
        _record_forks(
            con,
            run,
            forks,
            "signatures",
            "raw_signature_forks",
            ["escrow_id", "nonce", "slot_id"],
            SIGNATURE_REASON,
        )
    con.execute(sql_text("warehouse/coverage/upsert_signatures.sql"), {"source_id": run.source_id})
    return int(forks.filter(pl.col("source_id") == run.source_id).height)


def _record_forks(
    con: duckdb.DuckDBPyConnection,
    run: IngestRun,
    forks: pl.DataFrame,
    table: str,
    fork_table: str,
    key: list[str],
    reason: str,
) -> None:
    """Store every version of the forked rows of `table` in `fork_table` and quarantine each under its own
    source, keyed by `key` joined with "/"."""
    con.register("new_forks", forks.to_arrow())
    try:
        con.execute(f"INSERT OR IGNORE INTO {fork_table} BY NAME (SELECT * FROM new_forks)")
    finally:
        con.unregister("new_forks")
    run.quarantine(
        forks.select(
            "source_id",
            table_name=pl.lit(table),
            row_key=pl.concat_str([pl.col(k).cast(pl.String) for k in key], separator="/"),
            reason=pl.col("digest").map_elements(lambda d: reason.format(digest=d[:16]), pl.String),
        )
    )


def refresh_escrow_coverage(con: duckdb.DuckDBPyConnection, escrow_ids: list[str]) -> None:
    """Recompute ``d_escrow_coverage`` for `escrow_ids` (inside the caller's transaction)."""
    if not escrow_ids:
        return
    con.register("coverage_escrows", pa.table({"escrow_id": pa.array(escrow_ids, pa.string())}))
    try:
        con.execute(sql_text("warehouse/coverage/escrow_coverage.sql"))
    finally:
        con.unregister("coverage_escrows")


def source_escrow_findings(con: duckdb.DuckDBPyConnection, source_id: str) -> list[dict]:
    """Escrows `source_id` gave whose diff log is partial or whose copies disagree (`doctor --warehouse`)."""
    return fetch_frame(con, sql_text("warehouse/coverage/source_escrows.sql"), {"source_id": source_id}).to_dicts()
