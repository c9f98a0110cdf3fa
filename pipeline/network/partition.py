"""Stage 2 of the lake: one (epoch, bucket) partition into its own warehouse, through the single-host ingest.

Every copy of an escrow lies in one partition. Its task

1. deduplicates the diffs of all copies on (escrow, nonce) by their digests, before decoding: each
   distinct diff is delivered once, by the first copy (in the partition's copy order) that holds it;
   a copy holding other bytes under the same key (a fork) delivers its version too, so that the
   ingest records the fork as a single warehouse does (``diff_forks``, a quarantine row under each
   copy, the escrow conflicted, the replay on the version whose sha256 sorts first);
2. ingests the copies one after another into a fresh partition warehouse with the single-host
   ingest itself (`pipeline.ingest.store.ingest_store`, reading each copy's partition through
   `LakeCopyStore`): the same replay, the same "further along wins" for sessions, the same
   quarantine of sealed (drained) records two copies disagree on;
3. derives each escrow once, after the last copy (`pipeline.ingest.store.derive_deferred`): an
   escrow held by many copies is not derived again after each;
4. moves the warehouse into place by rename, then writes what it was built from and found.

Evidence tasks then run the single-host evidence SQL on each partition warehouse (read-only) and
return additive partials (pipeline/network/tables.py).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.network.copies import DIFF_BYTES, DIGEST
from pipeline.network.lake import CACHE_ENTRY, REJECTED, CopyManifest, Lake, bucket_of, write_atomically
from pipeline.sources.store.base import TABLES, ReadRequest, SourceDescription, row_key

# Rows reach the ingest in key order whatever the file layout (the first report of a problem row wins).
_ORDER = {
    "sessions": "d.escrow_id",
    "diffs": "d.escrow_id, d.nonce",
    "snapshots": "d.escrow_id, d.nonce",
    "sealed_inferences": "d.escrow_id, d.inference_id",
    "inference_validation_obs": "d.escrow_id, d.inference_id, d.slot_id",
    "sealed_validation_obs": "d.escrow_id, d.inference_id, d.slot_id",
    "escrow_cache": "d.escrow_id",
}
DERIVE_SOURCE = "lake:derive"  # its run that derives every escrow once, after the copies (and quarantines)


@dataclass
class PartitionBuilt:
    """What one stage-2 task did (returned to the client, and kept beside the partition warehouse)."""

    epoch: int
    bucket: int
    fingerprint: list[str]
    copies: list[str]  # copy ids in the order they were ingested
    diffs_before: int = 0  # diff rows of all copies
    diffs_after: int = 0  # distinct diffs delivered to the ingest (decoded once each)
    bytes_before: int = 0  # txs_proto bytes of all copies' diff rows
    bytes_after: int = 0
    bytes_read: int = 0  # Parquet bytes of the partition's files
    forks: int = 0
    # One per forked (escrow, nonce): escrow_id, nonce and its versions, each a digest (sha256 of the diff's
    # bytes) with the copies (labels) holding it; the partition warehouse's view forked_diffs lists them too.
    fork_keys: list[dict] = field(default_factory=list)
    quarantined: int = 0
    derived_escrows: int = 0  # escrows derived, each once after the last copy
    copy_at: dict[str, str | None] = field(default_factory=dict)  # copy id -> its newest event in the partition
    elapsed_s: float = 0.0
    skipped: bool = False  # already built from the same copies


class LakeCopyStore:
    """One copy's rows of one partition, as a session store (`pipeline.sources.store.base.SessionStore`).

    Diffs are only those the partition's dedupe delivers to this copy, whatever the ingest's cursor:
    a later copy fills the nonces an earlier one lacks (e.g. before an import)."""

    kind = "lake"

    def __init__(self, lake: Lake, manifest: CopyManifest, epoch: int, bucket: int, rank: int, scratch):
        self.lake, self.manifest, self.epoch, self.bucket, self.rank = lake, manifest, epoch, bucket, rank
        self.display = manifest.label
        # Unique per copy (two copies may be directories of the same name).
        self.source_id = f"{manifest.source_id}#{manifest.copy_id[:8]}"
        self.path = lake.root / "_no_planes"  # no ledger, no payloads: the lake holds session storage only
        # What the partition's ingest records as its input: the copy's digest, known before reading
        # (so the ingest does not hash the rows again).
        self.input_digest = manifest.input_digest
        self._scratch = scratch
        self._rejected_taken = False

    def epochs(self) -> list[int]:
        """The partition's epoch, and the other epochs of the escrows whose sessions lie in two epochs of
        the copy and whose rows are all here (pipeline/network/copies.py): the ingest then finds the same
        conflict a single warehouse finds."""
        if not self.manifest.holds("sessions", self.epoch):
            return []
        others = {
            e
            for escrow, found in self.manifest.split_escrows.items()
            if found[0] == self.epoch and bucket_of(escrow, self.lake.buckets) == self.bucket
            for e in found[1:]
        }
        return [self.epoch, *sorted(others)]

    def columns(self, table: str, epoch_id: int | None) -> list[str] | None:
        if not self.manifest.holds(table, epoch_id) or (epoch_id is not None and epoch_id not in self.epochs()):
            return None
        absent = self.manifest.absent_columns.get(CACHE_ENTRY if epoch_id is None else f"{table}/{epoch_id}", [])
        return [c for c in TABLES[table].schema.names if c not in absent]  # the files hold them as NULL

    def _files(self, table: str) -> list[str]:
        return [str(p) for p in self.lake.files(self.manifest, table, self.epoch, self.bucket)]

    def read(
        self, table: str, epoch_id: int | None, cursors: dict[str, int] | None = None, batch_rows: int = 65536
    ) -> Iterator[pa.RecordBatch]:
        schema = TABLES[table].schema
        files = self._files(table)
        if not files or (epoch_id is not None and epoch_id not in self.epochs()):
            return
        con = self._scratch.cursor()
        try:
            select = ", ".join(f'd."{c}"' for c in schema.names)
            where, params = ["TRUE"], []
            if epoch_id is not None:  # a split escrow's rows of its other epochs lie here too
                where.append("d.epoch_id = ?")
                params.append(epoch_id)
            if table == "diffs":
                where.append(
                    "EXISTS (SELECT 1 FROM delivered a WHERE a.escrow_id = d.escrow_id AND a.nonce = d.nonce "
                    f"AND a.rank = ? AND a.digest IS NOT DISTINCT FROM d.{DIGEST})"
                )
                params.append(self.rank)
            if cursors is not None:
                con.register("wanted", pa.table({"escrow_id": pa.array(sorted(cursors), pa.string())}))
                where.append("d.escrow_id IN (SELECT escrow_id FROM wanted)")
            sql = f"SELECT {select} FROM read_parquet(?) d WHERE {' AND '.join(where)} ORDER BY {_ORDER[table]}"
            reader = con.sql(sql, params=[files, *params]).to_arrow_reader(batch_rows)
            for batch in reader:
                yield batch.cast(schema) if batch.schema != schema else batch
        finally:
            con.close()

    def take_rejected(self) -> list[tuple[str, str, str]]:
        """The rows stage 1's read of the copy set aside in this partition (table, key, reason), once."""
        files = [str(p) for p in self.lake.files(self.manifest, REJECTED, self.epoch, self.bucket)]
        if self._rejected_taken or not files:
            return []
        self._rejected_taken = True
        con = self._scratch.cursor()
        try:
            sql = "SELECT table_name, row_key, reason FROM read_parquet(?) ORDER BY ALL"
            return con.sql(sql, params=[files]).fetchall()
        finally:
            con.close()

    def read_orphans(self, table: str, epoch_id: int, escrows: list[str]) -> list[str]:
        """Keys of the copy's rows of a table and epoch whose escrow is none of `escrows` (the sessions the
        ingest uses), as the SQLite store names them: quarantined by the ingest, as in a single warehouse."""
        files = self._files(table)
        if not files or epoch_id not in self.epochs():
            return []
        con = self._scratch.cursor()
        try:
            con.register("used", pa.table({"escrow_id": pa.array(sorted(escrows), pa.string())}))
            key = ", ".join(f'd."{c}"' for c in TABLES[table].key)
            rows = con.sql(
                f"SELECT {key} FROM read_parquet(?) d WHERE d.epoch_id = ? "
                "AND d.escrow_id NOT IN (SELECT escrow_id FROM used) ORDER BY ALL",
                params=[files, epoch_id],
            ).fetchall()
        finally:
            con.close()
        return [row_key(list(r)) for r in rows]

    @contextmanager
    def read_many(self, requests: Sequence[ReadRequest], batch_rows: int = 65536):
        yield [self.read(t, e, c, batch_rows) for t, e, c in requests]

    def describe(self) -> SourceDescription:
        return SourceDescription(
            kind=self.kind,
            display=self.display,
            source_id=self.source_id,
            lineage_id=None,
            epochs=self.epochs(),
            schema_versions={},
            tables=[],
            unrecognised=[],
            planes=["session storage"],
        )

    def close(self) -> None:
        return None


def _diff_rows(lake: Lake, manifest: CopyManifest, epoch: int, bucket: int) -> int:
    return sum(pq.ParquetFile(f).metadata.num_rows for f in lake.files(manifest, "diffs", epoch, bucket))


def build_partition(lake_root: str, epoch: int, bucket: int, force: bool = False) -> PartitionBuilt:
    """Stage 2 for one partition (see the module docstring); skipped when built from the same copies."""
    from pipeline.warehouse.database import open_scratch

    started = time.monotonic()
    lake = Lake(lake_root)
    fingerprint = lake.fingerprint(epoch, bucket)
    info = lake.partition_info(epoch, bucket)
    if not force and info is not None and info.get("fingerprint") == fingerprint:
        return PartitionBuilt(**{**info, "skipped": True})
    manifests = [m for m in lake.manifests() if f"{m.copy_id}:{m.generation}" in fingerprint]
    # The copy holding most diffs goes first, so that most diffs are delivered by one copy; ties by label.
    manifests.sort(key=lambda m: (-_diff_rows(lake, m, epoch, bucket), m.label, m.copy_id))
    built = PartitionBuilt(epoch, bucket, fingerprint, [m.copy_id for m in manifests])
    built.bytes_read = sum(f.stat().st_size for m in manifests for t in TABLES for f in lake.files(m, t, epoch, bucket))
    target = lake.warehouse_path(epoch, bucket)
    lake.tmp.mkdir(parents=True, exist_ok=True)
    tmp = lake.tmp / f"partition-{epoch}-{bucket}-{uuid.uuid4().hex}.duckdb"
    scratch = open_scratch()
    try:
        _dedupe(scratch, lake, manifests, epoch, bucket, built)
        _ingest_copies(tmp, scratch, lake, manifests, epoch, bucket, built)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, target)
    finally:
        scratch.close()
        tmp.unlink(missing_ok=True)
        Path(f"{tmp}.wal").unlink(missing_ok=True)
    built.elapsed_s = time.monotonic() - started
    write_atomically(lake.partition_info_path(epoch, bucket), json.dumps(asdict(built), indent=1).encode(), lake.tmp)
    return built


def _ingest_copies(
    tmp: Path, scratch, lake: Lake, manifests: list[CopyManifest], epoch: int, bucket: int, built: PartitionBuilt
) -> None:
    """The partition's warehouse at `tmp`: each copy's delivered diffs through the single-host ingest, in
    rank order, then one derive over all of them; each copy's time and the quarantined rows in `built`."""
    from pipeline.ingest.runs import ingest_run
    from pipeline.ingest.store import derive_deferred, ingest_store
    from pipeline.warehouse.database import open_for_write

    con = open_for_write(tmp)
    try:
        summaries = []
        for rank, manifest in enumerate(manifests):
            store = LakeCopyStore(lake, manifest, epoch, bucket, rank, scratch)
            # decoded here: the Dask workers are the parallelism
            summaries.append(ingest_store(con, store, label=manifest.label, derive=False, decode_workers=0))
        with ingest_run(con, source_id=DERIVE_SOURCE, kind="lake", display="lake derive") as run:
            built.derived_escrows = derive_deferred(con, run, summaries)
        for manifest, summary in zip(manifests, summaries, strict=True):
            built.copy_at[manifest.copy_id] = summary.copy_at.isoformat() if summary.copy_at else None
        built.quarantined = int(con.execute("SELECT count(*) FROM quarantine").fetchall()[0][0])
        con.execute("CHECKPOINT")
    finally:
        con.close()


def _dedupe(scratch, lake: Lake, manifests: list[CopyManifest], epoch: int, bucket: int, built: PartitionBuilt) -> None:
    """The `delivered` table of (escrow, nonce, rank of the copy that delivers it, digest): each version of
    a diff once; the counts before and after, and the forks, in `built`."""
    files = [(rank, str(f)) for rank, m in enumerate(manifests) for f in lake.files(m, "diffs", epoch, bucket)]
    scratch.execute("CREATE TABLE delivered (escrow_id VARCHAR, nonce BIGINT, rank BIGINT, digest BLOB)")
    if not files:
        return
    scratch.register("copy_files", pa.table({"rank": [r for r, _ in files], "file": [f for _, f in files]}))
    scratch.execute(
        f"CREATE TABLE all_diffs AS SELECT c.rank, d.escrow_id, d.nonce, d.{DIGEST} AS digest, "
        f"d.{DIFF_BYTES} AS bytes FROM read_parquet(?, filename = true) d JOIN copy_files c ON c.file = d.filename",
        [[f for _, f in files]],
    )
    # each diff once, by the first copy holding it; a forked one by every copy holding it, so that each
    # copy's version is recorded and quarantined under it as in a single warehouse
    scratch.execute(
        "INSERT INTO delivered SELECT escrow_id, nonce, min(rank), any_value(digest) FROM all_diffs GROUP BY ALL "
        "HAVING count(DISTINCT digest) = 1 AND count(digest) = count(*)"
    )
    scratch.execute(
        "INSERT INTO delivered SELECT a.escrow_id, a.nonce, a.rank, a.digest FROM all_diffs a "
        "SEMI JOIN (SELECT escrow_id, nonce FROM all_diffs GROUP BY ALL "
        "HAVING count(DISTINCT digest) > 1 OR count(digest) < count(*)) f USING (escrow_id, nonce)"
    )
    before = scratch.execute("SELECT count(*), coalesce(sum(bytes), 0) FROM all_diffs").fetchall()[0]
    after = scratch.execute(
        "SELECT count(*), coalesce(sum(a.bytes), 0) FROM all_diffs a JOIN delivered d ON a.escrow_id = d.escrow_id "
        "AND a.nonce = d.nonce AND a.rank = d.rank AND a.digest IS NOT DISTINCT FROM d.digest"
    ).fetchall()[0]
    built.diffs_before, built.bytes_before = int(before[0]), int(before[1])
    built.diffs_after, built.bytes_after = int(after[0]), int(after[1])
    # the copies' diffs whose bytes differ from the first copy's at their key (counted as before; each is
    # recorded and quarantined by the ingest, pipeline/ingest/coverage.py)
    versions = scratch.execute(
        "SELECT a.escrow_id, a.nonce, a.digest, list(DISTINCT a.rank ORDER BY a.rank) AS ranks FROM all_diffs a "
        "SEMI JOIN (SELECT escrow_id, nonce FROM all_diffs GROUP BY ALL "
        "HAVING count(DISTINCT digest) > 1 OR count(digest) < count(*)) f USING (escrow_id, nonce) "
        "GROUP BY ALL ORDER BY a.escrow_id, a.nonce, a.digest NULLS LAST"
    ).fetchall()
    forked: dict[tuple[str, int], list[dict]] = {}
    for escrow, nonce, digest, ranks in versions:
        forked.setdefault((escrow, int(nonce)), []).append(
            {
                "digest": f"sha256:{bytes(digest).hex()}" if digest is not None else None,
                "copies": [manifests[r].label for r in ranks],
            }
        )
    built.fork_keys = [{"escrow_id": e, "nonce": n, "versions": v} for (e, n), v in forked.items()]
    built.forks = int(
        scratch.execute(
            "SELECT count(*) FROM all_diffs a JOIN (SELECT escrow_id, nonce, arg_min(digest, rank) AS first "
            "FROM all_diffs GROUP BY ALL) f USING (escrow_id, nonce) WHERE a.digest IS DISTINCT FROM f.first"
        ).fetchall()[0][0]
    )
