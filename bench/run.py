"""The benchmark: one command, every measurement side by side in one process run.

    python bench/run.py [--sizes 500k,2m] [--url postgresql://postgres@127.0.0.1:5432] [--regenerate]

Per size (a PostgreSQL copy `gonka_bench_<size>` made by bench/scale_copy.py, generated
here when missing), each step runs in its own child process so its peak RSS
(`os.wait4` → `ru_maxrss` of exactly that child) is comparable across steps:

  floor     psycopg `COPY (SELECT <ingested columns>) TO STDOUT (FORMAT binary)` of the
            flat tables, bytes discarded (the raw floor); the diff blobs timed separately
  flat      our PostgresStore.read_many (ADBC `fetch_record_batch`, two reads at once in one
            snapshot, per epoch, conformed: how the ingest reads a chunk) of the
            flat tables (sessions, sealed_inferences, both validation-obs tables, escrow
            cache: what the ingest stores as it is) streamed into plain tables of a fresh
            DuckDB file: flat-table transfer alone
  flat_raw  the same into the warehouse's raw_* tables (primary keys) with the ingest's
            INSERT OR REPLACE / INSERT OR IGNORE statements
  dlt       dlt `sql_database` tables (backend="pyarrow", same tables and columns) into DuckDB
  decode    `decode_diffs` over the diffs batches as they arrive (only the decode is timed)
  blobs     the diff blobs (`txs_proto` …) streamed into DuckDB as bytes: not something the
            ingest does (it decodes them), kept as a labelled reference row
  ingest    `ingest_store` into a fresh warehouse, with the time inside reads, decode
            and derive measured by wrapping those functions
  reingest  the same copy again into the same warehouse (nothing changed: a no-op), through the full
            path (`ingest_store`); it leaves the stamp that `reingest_cli` then stops at
  reingest_cli  `gonka-evidence ingest` of the unchanged copy, process start to exit, median of 5:
            it reads the copy's change markers only (pipeline/ingest/unchanged.py)
  evidence  votes-by-build, epoch-summary, peer-invalidation from that warehouse
            (after `gonka-evidence builds` for the address holding the most slots) vs the
            closest SQL on the PostgreSQL copy, median of 3 runs each

Results print as a table and go to bench/results/latest.json. Targets (`TARGETS`
below) are evaluated and reported as pass/fail; the exit code is 0 either way
unless a step crashed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
DATA = BENCH / "data"
RESULTS = BENCH / "results"
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

import scale_copy  # noqa: E402
from harness import StepTimer  # noqa: E402

# "Flat tables": the tables our ingest stores as they are. The diff
# blobs (`diffs.txs_proto`) are NOT flat: the ingest decodes them and never stores them; their
# throughput is the decode step and the full ingest ("blobs" keeps the old blobs→DuckDB number).
FLAT_TABLES = ("sessions", "sealed_inferences", "inference_validation_obs", "sealed_validation_obs", "escrow_cache")
BLOB_TABLES = ("diffs",)
STEPS = ("floor", "flat", "flat_raw", "dlt", "decode", "blobs", "ingest", "reingest", "reingest_cli", "evidence")
OURS = ("flat", "flat_raw", "decode", "ingest", "reingest")  # steps of our ingest path (peak RSS targets)
EVIDENCE_TABLES = ("votes-by-build", "epoch-summary", "peer-invalidation")
EVIDENCE_RUNS = 3  # timed runs per side (after one warm-up run); the median is reported
TARGETS = {
    "flat_vs_floor": 0.5,  # flat rows/s >= 50% of the COPY floor
    "flat_vs_dlt": 3.0,  # flat rows/s >= 3x dlt
    "ingest_vs_floor": 0.35,  # the full ingest within ~3x of the binary COPY of every table it reads
    "decode_tx_per_s": 200_000,
    "reingest_share_2m": 0.05,  # no-op re-ingest of the 2M copy <= 5% of its full ingest
    "reingest_cli_share": 0.01,  # `gonka-evidence ingest` of an unchanged copy, process start included, <= 1%
    "peak_rss_bytes": int(1.5 * 2**30),
    "rss_growth": 1.10,  # peak RSS of a step at the largest size <= 110% of the same step at the smallest
    "evidence_speedup": 20.0,  # each evidence table >= 20x faster than the same question on PostgreSQL
}


# -- steps (run in child processes) -------------------------------------------------------------


def _columns(store, table: str) -> list[str]:
    from pipeline.sources.store.base import TABLES

    present = store.columns(table, None) or []
    return [f.name for f in TABLES[table].schema if f.name in present]


def _copy_floor(cur, tables: tuple[str, ...], cols: dict[str, list[str]]) -> dict:
    from pipeline.sources.store.postgres import PREFIX

    rows, nbytes, per_table = 0, 0, {}
    started = time.perf_counter()
    for table in tables:
        select = ", ".join(f'"{c}"' for c in cols[table])
        with cur.copy(f'COPY (SELECT {select} FROM "{PREFIX}{table}") TO STDOUT (FORMAT binary)') as copy:
            for block in copy:
                nbytes += len(block)
        per_table[table] = cur.rowcount
        rows += cur.rowcount
    elapsed = time.perf_counter() - started
    return {"elapsed_s": elapsed, "rows": rows, "bytes": nbytes, "rows_per_s": rows / elapsed, "per_table": per_table}


def step_floor(url: str, size: str) -> dict:
    """COPY floor of the flat tables (the result) and, timed separately, of the diff blobs (a SQLite store
    directory: `_sqlite_floor`)."""
    if Path(url).is_dir():
        return _sqlite_floor(Path(url), size)
    import psycopg

    from pipeline.sources.store.postgres import PostgresStore

    store = PostgresStore(url)  # only for the physical column list
    cols = {t: _columns(store, t) for t in FLAT_TABLES + BLOB_TABLES}
    store.close()
    with psycopg.connect(url) as con:
        con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        with con.cursor() as cur:
            flat = _copy_floor(cur, FLAT_TABLES, cols)
            blobs = _copy_floor(cur, BLOB_TABLES, cols)
        con.rollback()
    return flat | {"blobs": blobs}


def _sqlite_floor(store: Path, size: str) -> dict:
    """The SQLite layout's floor, as the COPY floor is PostgreSQL's: every table of the store's session files
    (`_meta.db`, `epoch_*.db`) read into Arrow (ADBC, the driver the ingest reads with) and written as it is to
    a fresh DuckDB file, one table at a time, no transform; the diffs tables timed apart (`blobs`)."""
    import adbc_driver_sqlite.dbapi as adbc_sqlite
    import duckdb

    from pipeline.sources.store.sqlite import sqlite_uri

    path = DATA / f"floor_{size}.duckdb"
    path.unlink(missing_ok=True)
    con = duckdb.connect(str(path))
    parts: dict[str, dict] = {name: {"elapsed_s": 0.0, "rows": 0, "per_table": {}} for name in ("flat", "blobs")}
    files = sorted(store.glob("epoch_*.db")) + [store / "_meta.db"]
    for file in files:
        source = adbc_sqlite.connect(sqlite_uri(file, "mode=ro&immutable=1"))
        cur = source.cursor()
        cur.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        names = [r[0] for r in cur.fetchall()]
        for name in names:
            part = parts["blobs" if name == "diffs" else "flat"]
            started = time.perf_counter()
            cur.execute(f'SELECT * FROM "{name}"')
            reader = cur.fetch_record_batch()  # noqa: F841 (DuckDB scans it by name below)
            target = f"{file.stem}__{name}"
            con.execute(f'CREATE TABLE "{target}" AS SELECT * FROM reader')
            rows = con.execute(f'SELECT count(*) FROM "{target}"').fetchone()[0]
            part["elapsed_s"] += time.perf_counter() - started
            part["rows"] += rows
            part["per_table"][target] = rows
        cur.close()
        source.close()
    con.close()
    flat, blobs = parts["flat"], parts["blobs"]
    for part in parts.values():
        part["rows_per_s"] = part["rows"] / part["elapsed_s"] if part["elapsed_s"] else None
    return flat | {"blobs": blobs, "layout": "sqlite", "duckdb_bytes": path.stat().st_size}


def _stream_into_duckdb(url: str, path: Path, tables: tuple[str, ...]) -> dict:
    """Our PostgresStore.read of `tables` (per epoch where per epoch) streamed into plain
    DuckDB tables of a fresh file, through a RecordBatchReader (no Python rows)."""
    import duckdb
    import pyarrow as pa

    from pipeline.sources.store import open_store
    from pipeline.sources.store.base import TABLES
    from pipeline.warehouse.database import ingest_budget

    path.unlink(missing_ok=True)
    # Like the floor (whose connection is open before its timer starts), time from an open source:
    # loading the ADBC driver and connecting (~0.5 s, once per process) is reported as open_s.
    opened = time.perf_counter()
    store = open_store(url)
    started = time.perf_counter()
    open_s = started - opened
    con = duckdb.connect(str(path))
    # The ingest's DuckDB settings (the default buffer pool is 80% of RAM and grows with the data).
    con.execute(f"SET memory_limit = '{ingest_budget(con).memory_limit}'")
    per_table = {}
    read_timer = StepTimer()  # time waiting for the next batch of a read (ADBC + conform); the rest is DuckDB
    batches = 0
    max_batch_bytes = 0

    def counted(it):
        nonlocal batches, max_batch_bytes
        for b in it:
            batches += 1
            max_batch_bytes = max(max_batch_bytes, b.nbytes)
            yield b

    epochs = store.epochs()
    requests = [(t, e, None) for t in tables for e in (epochs if TABLES[t].per_epoch else [None])]
    created = set()
    # read_many, as the ingest reads a chunk: up to two reads stream at once in one snapshot.
    with store.read_many(requests) as streams:
        for (table, _, _), stream in zip(requests, streams, strict=True):
            reader = pa.RecordBatchReader.from_batches(  # noqa: F841 (DuckDB scans it by name below)
                TABLES[table].schema, counted(read_timer.wrap_iter(iter)(stream))
            )
            into = f"INSERT INTO {table}" if table in created else f"CREATE TABLE {table} AS"
            con.execute(f"{into} SELECT * FROM reader")
            created.add(table)
    for table in tables:
        per_table[table] = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    con.close()
    store.close()
    elapsed = time.perf_counter() - started
    rows = sum(per_table.values())
    return {
        "elapsed_s": elapsed,
        "rows": rows,
        "rows_per_s": rows / elapsed,
        "per_table": per_table,
        "read_s": read_timer.seconds,
        "duckdb_s": elapsed - read_timer.seconds,
        "batches": batches,
        "max_batch_bytes": max_batch_bytes,
        "read_rows_per_s": rows / read_timer.seconds if read_timer.seconds else None,
        "duckdb_bytes": path.stat().st_size,
        "open_s": open_s,
    }


def step_flat(url: str, size: str) -> dict:
    """Flat-table transfer: the tables our ingest stores as they are, read by us, into DuckDB."""
    return _stream_into_duckdb(url, DATA / f"flat_{size}.duckdb", FLAT_TABLES)


def step_blobs(url: str, size: str) -> dict:
    """The diff blobs streamed into DuckDB as bytes (the old "flat" number; the ingest never stores them)."""
    return _stream_into_duckdb(url, DATA / f"blobs_{size}.duckdb", BLOB_TABLES)


# The flat tables into the warehouse's own raw_* tables (primary keys), with the ingest's statements.
_RAW_INSERT = {
    "sessions": "INSERT OR REPLACE INTO raw_sessions BY NAME (SELECT * FROM reader)",
    "sealed_inferences": "INSERT OR REPLACE INTO raw_sealed_inferences BY NAME (SELECT * FROM reader)",
    "inference_validation_obs": "INSERT OR IGNORE INTO raw_validation_obs BY NAME "
    "(SELECT escrow_id, inference_id, slot_id, epoch_id FROM reader)",
    "sealed_validation_obs": "INSERT OR IGNORE INTO raw_validation_obs BY NAME "
    "(SELECT escrow_id, inference_id, slot_id, epoch_id FROM reader)",
    "escrow_cache": "INSERT OR REPLACE INTO raw_escrow_cache BY NAME (SELECT * FROM reader)",
}


def step_flat_raw(url: str, size: str) -> dict:
    """Like flat, but into the warehouse schema (raw_* tables with primary keys) with the ingest's
    upsert / insert-or-ignore statements, read and committed as the ingest does: sessions per
    epoch, then per chunk of <= CHUNK_NONCES diffs the chunk's sealed and obs rows (read_many with
    the chunk's escrow cursors), one transaction per chunk: what storing them costs in the ingest."""
    import polars as pl
    import pyarrow as pa

    from pipeline.ingest.store import CHUNK_TABLES, _chunks
    from pipeline.sources.store import open_store
    from pipeline.sources.store.base import TABLES
    from pipeline.warehouse.database import ingest_budget, open_for_write, transaction

    path = DATA / f"flat_raw_{size}.duckdb"
    for p in (path, path.with_name(path.name + ".wal")):
        p.unlink(missing_ok=True)
    con = open_for_write(path)  # schema creation is not timed
    con.execute(f"SET memory_limit = '{ingest_budget(con).memory_limit}'")  # as during an ingest
    started = time.perf_counter()
    store = open_store(url)
    rows, chunks = 0, 0

    def store_rows(table: str, batches) -> None:
        nonlocal rows
        batches = list(batches)  # the ingest holds a chunk's rows before its transaction, too
        rows += sum(b.num_rows for b in batches)
        reader = pa.RecordBatchReader.from_batches(TABLES[table].schema, iter(batches))  # noqa: F841 (used by name)
        con.execute(_RAW_INSERT[table])

    with transaction(con):
        store_rows("escrow_cache", store.read("escrow_cache", None))
    for epoch_id in store.epochs():
        sessions = list(store.read("sessions", epoch_id))
        with transaction(con):
            store_rows("sessions", sessions)
        frame = pl.from_arrow(pa.Table.from_batches(sessions, schema=TABLES["sessions"].schema))
        cursors = dict.fromkeys(frame["escrow_id"].to_list(), 0)  # a fresh warehouse: every escrow from the start
        for chunk in _chunks(frame, cursors):
            chunk_cursors = {e: 0 for e in chunk["escrow_id"].to_list()}
            tables = [t for t in CHUNK_TABLES[1:] if t in _RAW_INSERT]  # flat ones: diffs and snapshots are decoded
            with store.read_many([(t, epoch_id, chunk_cursors) for t in tables]) as streams:
                parts = [(t, list(stream)) for t, stream in zip(tables, streams, strict=True)]
            with transaction(con):
                for table, batches in parts:
                    store_rows(table, batches)
            chunks += 1
    store.close()
    con.close()
    elapsed = time.perf_counter() - started
    return {
        "elapsed_s": elapsed,
        "rows": rows,
        "rows_per_s": rows / elapsed,
        "chunks": chunks,
        "duckdb_bytes": path.stat().st_size,
    }


def step_decode(url: str, size: str) -> dict:
    from pipeline.sources.decode.txs import decode_diffs
    from pipeline.sources.store import open_store

    store = open_store(url)
    decode_s, diffs, txs, quarantined = 0.0, 0, 0, 0
    started = time.perf_counter()
    for epoch_id in store.epochs():
        for batch in store.read("diffs", epoch_id):
            t0 = time.perf_counter()
            out = decode_diffs(batch)
            decode_s += time.perf_counter() - t0
            diffs += batch.num_rows
            txs += out.txs.num_rows
            quarantined += len(out.quarantined)
    store.close()
    total = time.perf_counter() - started
    return {
        "elapsed_s": decode_s,
        "wall_s": total,
        "diffs": diffs,
        "txs": txs,
        "quarantined": quarantined,
        "tx_per_s": txs / decode_s,
        "diffs_per_s": diffs / decode_s,
    }


def step_dlt(url: str, size: str) -> dict:
    os.environ.setdefault("RUNTIME__DLTHUB_TELEMETRY", "false")
    os.environ.setdefault("RUNTIME__LOG_LEVEL", "WARNING")
    import dlt
    import duckdb
    from dlt.sources.sql_database import sql_table

    from pipeline.sources.store.postgres import PREFIX, PostgresStore

    store = PostgresStore(url)
    cols = {t: _columns(store, t) for t in FLAT_TABLES}
    store.close()
    work = DATA / f"dlt_{size}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    path = work / "dlt.duckdb"
    sa_url = url.replace("postgresql://", "postgresql+psycopg://", 1)
    started = time.perf_counter()
    resources = [
        sql_table(credentials=sa_url, table=f"{PREFIX}{t}", backend="pyarrow", included_columns=cols[t])
        for t in FLAT_TABLES
    ]
    pipeline = dlt.pipeline(
        pipeline_name=f"bench_{size}",
        destination=dlt.destinations.duckdb(str(path)),
        dataset_name="raw",
        pipelines_dir=str(work / "pipelines"),
    )
    info = pipeline.run(resources)
    elapsed = time.perf_counter() - started
    con = duckdb.connect(str(path), read_only=True)
    loaded = {
        r[0]
        for r in con.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'raw'").fetchall()
    }
    per_table = {
        t: con.execute(f'SELECT count(*) FROM raw."{PREFIX}{t}"').fetchone()[0] if f"{PREFIX}{t}" in loaded else 0
        for t in FLAT_TABLES
    }  # dlt creates no table for an empty one
    con.close()
    rows = sum(per_table.values())
    return {
        "elapsed_s": elapsed,
        "rows": rows,
        "rows_per_s": rows / elapsed,
        "per_table": per_table,
        "dlt_version": dlt.__version__,
        "load_ok": not info.has_failed_jobs,
    }


def _ingest(url: str, size: str, fresh: bool) -> dict:
    import pipeline.ingest.derive as derive_mod
    import pipeline.ingest.store as ingest_mod
    import pipeline.sources.decode.txs as decode_mod
    from pipeline.sources.store import open_store
    from pipeline.warehouse.database import open_for_write

    path = DATA / f"warehouse_{size}.duckdb"
    if fresh:
        for p in (path, path.with_name(path.name + ".wal")):
            p.unlink(missing_ok=True)
    import pipeline.sources.decode.workers as workers_mod

    timers = {name: StepTimer() for name in ("read", "decode", "derive", "value_checks")}
    # The ingest imports these from their modules when a chunk starts: wrapped there. With decode workers
    # the decode's time here is the wait for their results (their CPU is in `workers_cpu_s`).
    decode_mod.decode_diffs = timers["decode"].wrap(decode_mod.decode_diffs)
    workers_mod.Decoding.result = timers["decode"].wrap(workers_mod.Decoding.result)
    derive_mod.derive_escrows = timers["derive"].wrap(derive_mod.derive_escrows)
    ingest_mod._value_checks = timers["value_checks"].wrap(ingest_mod._value_checks)
    profile = os.environ.get("GONKA_BENCH_PROFILE")
    started = time.perf_counter()
    con = open_for_write(path)
    store = open_store(url)
    store.read = timers["read"].wrap_iter(store.read)
    read_many = store.read_many

    @contextmanager
    def timed_read_many(requests, *args, **kwargs):  # time spent waiting for each stream's next batch
        with read_many(requests, *args, **kwargs) as streams:
            yield [timers["read"].wrap_iter(iter)(stream) for stream in streams]

    store.read_many = timed_read_many
    if profile:
        import cProfile

        prof = cProfile.Profile()
        summary = prof.runcall(ingest_mod.ingest_store, con, store)
        prof.dump_stats(profile)
    else:
        summary = ingest_mod.ingest_store(con, store)
    store.close()
    con.close()
    elapsed = time.perf_counter() - started
    rows = summary.rows.get("diffs", 0) + summary.rows.get("sealed_inferences", 0)
    breakdown = {name: t.seconds for name, t in timers.items()}
    breakdown["other (duckdb writes, chunking, bookkeeping)"] = summary.elapsed_s - sum(breakdown.values())
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "elapsed_s": elapsed,
        "workers": workers_mod.decode_workers(),
        "workers_cpu_s": children.ru_utime + children.ru_stime,
        "workers_peak_rss_bytes": children.ru_maxrss * 1024,
        "ingest_elapsed_s": summary.elapsed_s,
        "rows": rows,
        "rows_per_s": rows / summary.elapsed_s if summary.elapsed_s else None,
        "summary_rows": summary.rows,
        "escrows_changed": summary.escrows_changed,
        "quarantined": summary.quarantined,
        "disagreements": summary.disagreements,
        "breakdown_s": breakdown,
        "decode_share": breakdown["decode"] / summary.elapsed_s if summary.elapsed_s else None,
        "warehouse_bytes": path.stat().st_size,
    }


def step_ingest(url: str, size: str) -> dict:
    return _ingest(url, size, fresh=True)


def step_reingest(url: str, size: str) -> dict:
    return _ingest(url, size, fresh=False)


# Runs of the no-op CLI per reingest_cli step: one process start is at the mercy of a shared machine's
# scheduler (on 2 cores shared by ~8 agents single runs varied 2x), so the step reports the median.
REINGEST_CLI_RUNS = 5


def step_reingest_cli(url: str, size: str) -> dict:
    """`gonka-evidence ingest` of the unchanged copy into the warehouse of the ingest step, timed from
    process start to exit (start-up and imports included), CPU from the child's rusage; the median of
    REINGEST_CLI_RUNS runs (each run's wall and CPU seconds in `runs`)."""
    command = [
        str(Path(sys.executable).with_name("gonka-evidence")),
        "ingest",
        url,
        "--warehouse",
        str(DATA / f"warehouse_{size}.duckdb"),
    ]
    runs = []
    for _ in range(REINGEST_CLI_RUNS):
        started = time.perf_counter()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - started
        out = proc.stdout.read().decode()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"gonka-evidence ingest exited {proc.returncode}: {proc.stderr.read().decode()[-400:]}")
        runs.append((elapsed, usage.ru_utime + usage.ru_stime))
    elapsed, cpu = sorted(runs)[len(runs) // 2]
    return {
        "elapsed_s": elapsed,
        "cli_cpu_s": cpu,
        "cli_cpu_median_s": sorted(c for _, c in runs)[len(runs) // 2],
        "runs": runs,
        "stdout_tail": out[-300:],
    }


# -- evidence tables from the warehouse vs the same question asked of PostgreSQL -----------

# Slot -> address of every escrow, from the session's group_json (slot = position in the array).
_PG_SLOTS = """
slots AS (
  SELECT s.epoch_id, s.escrow_id, (g.ord - 1)::int AS slot, g.e->>'ValidatorAddress' AS address
  FROM devshard_sessions s, jsonb_array_elements(s.group_json::jsonb) WITH ORDINALITY AS g(e, ord)
),
host_slots AS (SELECT epoch_id, escrow_id, slot FROM slots WHERE address = %(host)s)"""

# Sealed status codes (pipeline/ingest/derive.py STATUS_NAMES): 2 finished, 3 challenged,
# 4 validated, 5 invalidated, 6 timed_out.
PG_EVIDENCE_SQL = {
    # The host as executor, per epoch: outcomes from sealed_status, tallies and tokens from the
    # sealed row, and the number of (inference, slot) validation-obs rows on its answers.
    "epoch-summary": f"""
WITH {_PG_SLOTS},
answers AS (
  SELECT si.epoch_id, si.escrow_id, si.inference_id, si.sealed_nonce, si.sealed_status AS st,
         si.sealed_votes_valid, si.sealed_votes_invalid, si.sealed_input_tokens, si.sealed_output_tokens
  FROM devshard_sealed_inferences si
  JOIN host_slots h ON h.epoch_id = si.epoch_id AND h.escrow_id = si.escrow_id AND h.slot = si.sealed_executor_slot
),
obs AS (
  SELECT epoch_id, escrow_id, inference_id FROM devshard_sealed_validation_obs
  UNION ALL
  SELECT epoch_id, escrow_id, inference_id FROM devshard_inference_validation_obs
),
verdicts AS (
  SELECT a.epoch_id, count(*) AS verdict_slots
  FROM obs o JOIN answers a USING (epoch_id, escrow_id, inference_id)
  GROUP BY a.epoch_id
),
per_epoch AS (
  SELECT epoch_id,
         count(*) FILTER (WHERE sealed_nonce > 0) AS sealed,
         count(*) FILTER (WHERE st IN (2, 3, 4, 5)) AS finished,
         count(*) FILTER (WHERE st = 4) AS validated,
         count(*) FILTER (WHERE st = 5) AS invalidated,
         count(*) FILTER (WHERE st = 6) AS timed_out,
         count(*) FILTER (WHERE st IN (3, 4, 5)) AS challenged,
         count(*) FILTER (WHERE st = 4) AS cleared,
         count(*) FILTER (WHERE st = 2 AND sealed_votes_valid > 0) AS validations_valid,
         count(*) FILTER (WHERE st IN (3, 4, 5)) AS validations_invalid,
         coalesce(sum(sealed_votes_valid) FILTER (WHERE st IN (3, 4, 5)), 0) AS votes_valid,
         coalesce(sum(sealed_votes_invalid) FILTER (WHERE st IN (3, 4, 5)), 0) AS votes_invalid,
         coalesce(sum(sealed_input_tokens) FILTER (WHERE st IN (2, 3, 4, 5)), 0) AS input_tokens,
         coalesce(sum(sealed_output_tokens) FILTER (WHERE st IN (2, 3, 4, 5)), 0) AS output_tokens
  FROM answers GROUP BY epoch_id
)
SELECT e.epoch_id AS epoch, p.sealed, p.finished, p.validated, p.invalidated, p.timed_out, p.challenged,
       p.cleared, p.validations_valid, p.validations_invalid, p.votes_valid, p.votes_invalid,
       p.input_tokens, p.output_tokens, v.verdict_slots
FROM (SELECT DISTINCT epoch_id FROM host_slots) e
LEFT JOIN per_epoch p USING (epoch_id)
LEFT JOIN verdicts v USING (epoch_id)
ORDER BY epoch""",
    # The host's answers against the other executors of the same escrows: per escrow and pooled.
    "peer-invalidation": f"""
WITH {_PG_SLOTS},
host_escrows AS (SELECT DISTINCT epoch_id, escrow_id FROM host_slots),
answers AS MATERIALIZED (  -- only escrows where the host holds a slot: 2.6x faster than all sealed rows
  SELECT si.escrow_id, sl.address = %(host)s AS is_host, si.sealed_status IN (3, 4, 5) AS ci
  FROM devshard_sealed_inferences si
  JOIN host_escrows he ON he.epoch_id = si.epoch_id AND he.escrow_id = si.escrow_id
  JOIN slots sl ON sl.epoch_id = si.epoch_id AND sl.escrow_id = si.escrow_id AND sl.slot = si.sealed_executor_slot
  WHERE si.sealed_status IN (2, 3, 4, 5)
)
SELECT escrow_id, is_host, count(*) AS answers, count(*) FILTER (WHERE ci) AS challenged_or_invalidated
FROM answers
WHERE escrow_id IN (SELECT escrow_id FROM answers WHERE is_host)
GROUP BY GROUPING SETS ((escrow_id, is_host), (is_host))
ORDER BY escrow_id NULLS FIRST, is_host DESC""",
    # The host as validator: its (inference, slot) obs rows on other executors' answers, one per
    # inference per address; valid = the host's slot bit in sealed_validated_by; kind = vote when
    # the inference was challenged (status 3/4/5), else validation; build = as-of the inference's
    # sealed_started_at (PostgreSQL has no per-verdict time); the windows are inlined as VALUES.
    "votes-by-build": f"""
WITH {_PG_SLOTS},
builds(build, valid_from, valid_to) AS (VALUES %(builds)s),
obs AS (
  SELECT epoch_id, escrow_id, inference_id, slot_id FROM devshard_sealed_validation_obs
  UNION ALL
  SELECT epoch_id, escrow_id, inference_id, slot_id FROM devshard_inference_validation_obs
),
verdicts AS (
  SELECT si.escrow_id, si.inference_id,
         bool_or(length(si.sealed_validated_by) > o.slot_id / 8
                 AND get_byte(si.sealed_validated_by, (o.slot_id / 8)::int)
                     & (1 << mod(o.slot_id, 8)::int) <> 0) AS valid,
         min(si.sealed_status) AS st, min(si.sealed_started_at) AS started_at
  FROM obs o
  JOIN host_slots h ON h.epoch_id = o.epoch_id AND h.escrow_id = o.escrow_id AND h.slot = o.slot_id
  JOIN devshard_sealed_inferences si
    ON si.epoch_id = o.epoch_id AND si.escrow_id = o.escrow_id AND si.inference_id = o.inference_id
  WHERE NOT EXISTS (SELECT 1 FROM host_slots x
                    WHERE x.epoch_id = si.epoch_id AND x.escrow_id = si.escrow_id AND x.slot = si.sealed_executor_slot)
  GROUP BY si.escrow_id, si.inference_id
)
SELECT coalesce(b.build, 'unattributed') AS build,
       CASE WHEN v.st IN (3, 4, 5) THEN 'vote' ELSE 'validation' END AS kind,
       count(*) FILTER (WHERE v.valid) AS valid,
       count(*) FILTER (WHERE NOT v.valid) AS invalid,
       count(*) AS total,
       count(*) FILTER (WHERE (v.valid AND v.st = 5) OR (NOT v.valid AND v.st = 4)) AS disagreed,
       count(*) FILTER (WHERE v.st IN (4, 5)) AS resolved
FROM verdicts v
LEFT JOIN builds b ON to_timestamp(v.started_at) >= b.valid_from
                  AND (b.valid_to IS NULL OR to_timestamp(v.started_at) < b.valid_to)
GROUP BY 1, 2
ORDER BY 1, 2""",
}


def _focal_host(url: str) -> tuple[str, int, int]:
    """The address holding the most slots over all escrows of the copy (ties: smallest address)."""
    import psycopg

    with psycopg.connect(url) as con:
        return con.execute(
            "SELECT g.e->>'ValidatorAddress' AS address, count(*) AS slots, count(DISTINCT s.escrow_id) AS escrows "
            "FROM devshard_sessions s, jsonb_array_elements(s.group_json::jsonb) WITH ORDINALITY AS g(e, ord) "
            "GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1"
        ).fetchone()


def _write_builds(url: str, host: str, path: Path) -> list[tuple[str, int, int | None]]:
    """Three builds of the focal host over the copy's time span (the first ~10% stays unattributed)."""
    import psycopg

    with psycopg.connect(url) as con:
        t0, t1 = con.execute(
            "SELECT min(sealed_started_at), max(sealed_started_at) FROM devshard_sealed_inferences "
            "WHERE sealed_started_at > 0"
        ).fetchone()
    starts = [
        ("v0.2.9", t0 + (t1 - t0) // 10),
        ("v0.2.10", t0 + (t1 - t0) * 4 // 10),
        ("v0.2.11", t0 + (t1 - t0) * 3 // 4),
    ]
    fmt = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))  # noqa: E731
    path.write_text(
        "# bench/run.py: builds of the focal host of the bench copy\n"
        + "".join(f'\n[[builds]]\nhost = "{host}"\nlabel = "{label}"\nsince = "{fmt(t)}"\n' for label, t in starts)
    )
    return [(label, t, starts[i + 1][1] if i + 1 < len(starts) else None) for i, (label, t) in enumerate(starts)]


def _median_runs(fn, runs: int = EVIDENCE_RUNS) -> dict:
    t0 = time.perf_counter()
    first = fn()
    cold = time.perf_counter() - t0
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return {"median_s": times[len(times) // 2], "runs_s": times, "first_s": cold, "result": first}


def step_evidence(url: str, size: str) -> dict:
    """Each evidence table from the ingested warehouse (after `gonka-evidence builds`) vs
    the closest SQL on the PostgreSQL copy; median of EVIDENCE_RUNS runs after a warm-up, each side."""
    import polars as pl
    import psycopg

    from pipeline.evidence import compute
    from pipeline.evidence.stats import cmh_test, fisher_exact_2x2, with_wilson
    from pipeline.warehouse.database import open_read_only

    warehouse = DATA / f"warehouse_{size}.duckdb"
    if not warehouse.exists():
        return {"error": f"{warehouse} missing: run the ingest step first"}
    host, host_slots, host_escrows = _focal_host(url)
    builds_file = DATA / f"builds_{size}.toml"
    builds = _write_builds(url, host, builds_file)
    cli = shutil.which("gonka-evidence") or str(Path(sys.executable).with_name("gonka-evidence"))
    subprocess.run(
        [cli, "builds", str(builds_file), "--warehouse", str(warehouse)], check=True, stdout=subprocess.DEVNULL
    )
    values = ", ".join(
        f"('{label}', to_timestamp({start}), {f'to_timestamp({end})' if end else 'NULL::timestamptz'})"
        for label, start, end in builds
    )

    t0 = time.perf_counter()
    con = open_read_only(warehouse)
    open_s = time.perf_counter() - t0
    pg = psycopg.connect(url, autocommit=True)

    def pg_question(name: str):
        sql = PG_EVIDENCE_SQL[name].replace("%(builds)s", values)
        rows = pg.execute(sql, {"host": host}).fetchall()
        if name == "peer-invalidation":  # the same statistics on the PostgreSQL counts
            pooled = {r[1]: r for r in rows if r[0] is None}
            cells = lambda r: [r[3], r[2] - r[3]] if r else [0, 0]  # noqa: E731
            a, b = cells(pooled.get(True))
            c, d = cells(pooled.get(False))
            fisher_exact_2x2(a, b, c, d)
            per = {}
            for r in rows:
                if r[0] is not None:
                    per.setdefault(r[0], {})[r[1]] = r
            cmh_test([[cells(g.get(True)), cells(g.get(False))] for g in per.values()])
        elif name == "votes-by-build":
            with_wilson(
                pl.DataFrame(
                    rows, schema=["build", "kind", "valid", "invalid", "total", "disagreed", "resolved"], orient="row"
                ),
                "invalid",
                "total",
            )
        return rows

    out = {
        "host": host,
        "host_slots": host_slots,
        "host_escrows": host_escrows,
        "builds_file": str(builds_file),
        "warehouse_open_s": open_s,
        "tables": {},
    }
    for name in EVIDENCE_TABLES:
        wh = _median_runs(lambda name=name: compute(name, con, host=host, command="bench"))
        result = wh.pop("result")
        pq = _median_runs(lambda name=name: pg_question(name))
        pg_rows = pq.pop("result")
        out["tables"][name] = {
            "warehouse": wh,
            "postgres": pq,
            "speedup": pq["median_s"] / wh["median_s"],
            "warehouse_rows": result.rows.to_dicts()[:12],
            "postgres_rows": [list(r) for r in pg_rows[:12]],
            "postgres_row_count": len(pg_rows),
        }
    con.close()
    pg.close()
    worst = min(t["speedup"] for t in out["tables"].values())
    out["elapsed_s"] = sum(t["warehouse"]["median_s"] for t in out["tables"].values())
    out["worst_speedup"] = worst
    return out


STEP_FUNCS = {
    "floor": step_floor,
    "flat": step_flat,
    "flat_raw": step_flat_raw,
    "blobs": step_blobs,
    "decode": step_decode,
    "dlt": step_dlt,
    "ingest": step_ingest,
    "reingest": step_reingest,
    "reingest_cli": step_reingest_cli,
    "evidence": step_evidence,
}


# -- orchestration -------------------------------------------------------------------------------


def run_step(step: str, url: str, size: str, env: dict | None = None) -> dict:
    """Run one step in a child process; its own peak RSS comes from wait4 (ru_maxrss, KiB on Linux)."""
    with tempfile.NamedTemporaryFile(suffix=".json", dir=DATA, delete=False) as tmp:
        out = Path(tmp.name)
    child_env = os.environ | (env or {})
    load_before = os.getloadavg()[0]  # the machine is shared: record the load around each step
    proc = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--step",
            step,
            "--size",
            size,
            "--url",
            url,
            "--out",
            str(out),
        ],
        env=child_env,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    try:
        if proc.returncode != 0:
            return {"error": f"exit code {proc.returncode}", "peak_rss_bytes": usage.ru_maxrss * 1024}
        result = json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)
    result["peak_rss_bytes"] = usage.ru_maxrss * 1024
    result["cpu_s"] = usage.ru_utime + usage.ru_stime
    result["loadavg_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return result


def _version(dist: str) -> str | None:
    """An installed distribution's version (None where it is not installed: a bare SQLite-only machine)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def machine() -> dict:
    import duckdb
    import google.protobuf
    import polars
    import pyarrow
    from google.protobuf.internal import api_implementation

    try:
        import dlt

        dlt_version = dlt.__version__
    except ImportError:
        dlt_version = None
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    mem = next(
        int(line.split()[1]) * 1024
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal")
    )
    try:
        import psycopg

        with psycopg.connect(scale_copy.db_url(scale_copy.DEFAULT_URL, "postgres")) as con:
            pg = con.execute("SHOW server_version").fetchone()[0]
            shared_buffers = con.execute("SHOW shared_buffers").fetchone()[0]
    except Exception:
        pg, shared_buffers = None, None
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "ram_bytes": mem,
        "python": platform.python_version(),
        "os": platform.platform(),
        "postgres": pg,
        "postgres_shared_buffers": shared_buffers,
        "duckdb": duckdb.__version__,
        "pyarrow": pyarrow.__version__,
        "polars": polars.__version__,
        "adbc_driver_postgresql": _version("adbc-driver-postgresql"),
        "adbc_driver_sqlite": _version("adbc-driver-sqlite"),
        "psycopg": _version("psycopg"),
        "protobuf": f"{google.protobuf.__version__} ({api_implementation.Type()})",
        "dlt": dlt_version,
    }


def evaluate(sizes: dict) -> dict:
    """Targets per size and overall, with the measured values next to them."""
    out = {}
    for size, r in sizes.items():
        s = r["steps"]
        t = {}
        if "rows_per_s" in s.get("flat", {}) and "rows_per_s" in s.get("floor", {}):
            ratio = s["flat"]["rows_per_s"] / s["floor"]["rows_per_s"]
            t["flat_vs_floor"] = {
                "value": ratio,
                "target": f">= {TARGETS['flat_vs_floor']}",
                "pass": ratio >= TARGETS["flat_vs_floor"],
            }
        if "rows_per_s" in s.get("flat", {}) and "rows_per_s" in s.get("dlt", {}):
            ratio = s["flat"]["rows_per_s"] / s["dlt"]["rows_per_s"]
            t["flat_vs_dlt"] = {
                "value": ratio,
                "target": f">= {TARGETS['flat_vs_dlt']}",
                "pass": ratio >= TARGETS["flat_vs_dlt"],
            }
        if "ingest_elapsed_s" in s.get("ingest", {}) and "blobs" in s.get("floor", {}):
            ratio = (s["floor"]["elapsed_s"] + s["floor"]["blobs"]["elapsed_s"]) / s["ingest"]["ingest_elapsed_s"]
            t["ingest_vs_floor"] = {
                "value": ratio,
                "target": f">= {TARGETS['ingest_vs_floor']}",
                "pass": ratio >= TARGETS["ingest_vs_floor"],
            }
        if "blobs" in s.get("floor", {}) and "elapsed_s" in s.get("decode", {}):
            # The best ratio any ingest could reach here: the decode alone (all of it, spread over every
            # core), every read and write free. Below the target, the target is out of reach on this machine.
            from pipeline.core.resources import cores

            floor = s["floor"]["elapsed_s"] + s["floor"]["blobs"]["elapsed_s"]
            decode, n = s["decode"]["elapsed_s"], cores()
            bound = floor / (decode / n)
            t["ingest_vs_floor_bound"] = {
                "value": bound,
                "target": f">= {TARGETS['ingest_vs_floor']}",
                "pass": bound >= TARGETS["ingest_vs_floor"],
                "note": f"floor {floor:.2f} s / (decode {decode:.2f} s in one process / {n} cores)",
            }
        if "tx_per_s" in s.get("decode", {}):
            rate = s["decode"]["tx_per_s"]
            t["decode_tx_per_s"] = {
                "value": rate,
                "target": f">= {TARGETS['decode_tx_per_s']}",
                "pass": rate >= TARGETS["decode_tx_per_s"],
            }
        if "ingest_elapsed_s" in s.get("ingest", {}) and "ingest_elapsed_s" in s.get("reingest", {}):
            share = s["reingest"]["ingest_elapsed_s"] / s["ingest"]["ingest_elapsed_s"]
            entry = {
                "value": share,
                "target": f"<= {TARGETS['reingest_share_2m']}",
                "pass": share <= TARGETS["reingest_share_2m"],
            }
            if size != "2m":
                entry["note"] = "the target is stated for the 2M copy; shown for reference"
            t["reingest_share"] = entry
        if "ingest_elapsed_s" in s.get("ingest", {}) and "elapsed_s" in s.get("reingest_cli", {}):
            share = s["reingest_cli"]["elapsed_s"] / s["ingest"]["elapsed_s"]
            t["reingest_cli_share"] = {
                "value": share,
                "target": f"<= {TARGETS['reingest_cli_share']}",
                "pass": share <= TARGETS["reingest_cli_share"],
                "cpu_share": s["reingest_cli"]["cli_cpu_s"] / s["ingest"]["cpu_s"]
                if s["ingest"].get("cpu_s")
                else None,
            }
        rss = {k: s[k]["peak_rss_bytes"] for k in OURS if "peak_rss_bytes" in s.get(k, {})}
        if rss:
            peak = max(rss.values())
            t["peak_rss"] = {
                "value": peak,
                "by_step": rss,
                "target": f"< {TARGETS['peak_rss_bytes']}",
                "pass": peak < TARGETS["peak_rss_bytes"],
            }
        ev = s.get("evidence", {}).get("tables")
        if ev:
            for name, e in ev.items():
                entry = {
                    "value": e["speedup"],
                    "target": f">= {TARGETS['evidence_speedup']}",
                    "pass": e["speedup"] >= TARGETS["evidence_speedup"],
                }
                if size != "2m":
                    entry["note"] = "the target is stated for the 2M copy; shown for reference"
                t[f"evidence {name}"] = entry
        out[size] = t
    names = list(sizes)
    if len(names) >= 2:
        # Like with like: the same step (same code path, same batch sizes) at the smallest and the
        # largest size, each in its own fresh child process; dlt and the floor are not ours.
        small, large = names[0], names[-1]
        growth = {}
        for step in OURS:
            a = sizes[small]["steps"].get(step, {}).get("peak_rss_bytes")
            b = sizes[large]["steps"].get(step, {}).get("peak_rss_bytes")
            if a and b:
                growth[step] = b / a
        if growth:
            worst = max(growth.values())
            out["rss_growth"] = {
                "value": worst,
                "by_step": growth,
                "between": [small, large],
                "target": f"<= {TARGETS['rss_growth']}",
                "pass": worst <= TARGETS["rss_growth"],
            }
    return out


def _mb(n) -> str:
    return f"{n / 2**20:,.0f}" if n else "-"


LABELS = {
    "floor": "floor: COPY binary of the flat tables (psycopg)",
    "flat": "**flat: our read → DuckDB file**",
    "flat_raw": "flat → warehouse raw_* (PKs, ingest's upserts)",
    "dlt": "dlt (pyarrow backend) → DuckDB, flat tables",
    "blobs_floor": "floor: COPY binary of diffs (blobs)",
    "floor_sqlite": "floor: every table of the SQLite store into Arrow, then a fresh DuckDB file (diffs apart)",
    "blobs": "diff blobs → DuckDB (not stored by ingest)",
    "ingest": "full ingest (diffs + sealed rows)",
    "reingest": "no-op re-ingest, full path (`ingest_store`)",
    "reingest_cli": "no-op `gonka-evidence ingest` (process start to exit)",
}


def render(results: dict) -> str:
    lines = []
    for size, r in results["sizes"].items():
        s = r["steps"]
        floor = s.get("floor", {}).get("rows_per_s")
        blobs_floor = s.get("floor", {}).get("blobs", {}).get("rows_per_s")
        dlt_rate = s.get("dlt", {}).get("rows_per_s")
        c = r["copy"]
        n = lambda k, c=c: f"{c[k]:,}" if isinstance(c.get(k), int) else "?"  # noqa: E731
        lines.append(
            f"\n## {size}: {n('inferences')} inferences in {n('escrows')} escrows, {n('diffs')} diffs, "
            f"{n('txs')} txs, {n('sealed_rows')} sealed rows, {n('obs_rows')} obs rows, "
            f"database {_mb(c.get('db_bytes'))} MiB"
        )
        lines.append("| step | rows | seconds | rows/s | vs floor | vs dlt | peak RSS MiB |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|")

        def row(label, x, rate_floor, with_dlt=True, dlt_rate=dlt_rate):
            secs = x.get("ingest_elapsed_s", x["elapsed_s"])
            rate = x.get("rows_per_s") or 0
            vs_floor = f"{rate / rate_floor:.2f}×" if rate_floor and rate else ""
            vs_dlt = f"{rate / dlt_rate:.2f}×" if with_dlt and dlt_rate and rate else ""
            rss = _mb(x.get("peak_rss_bytes"))
            lines.append(f"| {label} | {x['rows']:,} | {secs:.2f} | {rate:,.0f} | {vs_floor} | {vs_dlt} | {rss} |")

        for step in STEPS:
            x = s.get(step)
            if not x or step == "evidence":
                continue
            if "error" in x:
                lines.append(f"| {step} | error: {x['error']} | | | | | {_mb(x.get('peak_rss_bytes'))} |")
                continue
            if step == "decode":
                lines.append(
                    f"| decode (`decode_diffs`, txs) | {x['txs']:,} | {x['elapsed_s']:.2f} | {x['tx_per_s']:,.0f} tx/s "
                    f"| | | {_mb(x['peak_rss_bytes'])} |"
                )
                continue
            if step == "blobs":
                if "blobs" in s.get("floor", {}):
                    row(LABELS["blobs_floor"], s["floor"]["blobs"], blobs_floor, with_dlt=False)
                row(LABELS["blobs"], x, blobs_floor, with_dlt=False)
                continue
            if step == "reingest":
                secs = x["ingest_elapsed_s"]
                lines.append(
                    f"| {LABELS['reingest']} | 0 changed escrows | {secs:.2f} ({x['elapsed_s']:.2f} with opening) "
                    f"| | | | {_mb(x['peak_rss_bytes'])} |"
                )
                continue
            if step == "reingest_cli":
                runs = f", median of {len(x['runs'])}" if "runs" in x else ""
                lines.append(
                    f"| {LABELS['reingest_cli']} | 0 changed escrows | {x['elapsed_s']:.2f} "
                    f"(CPU {x['cli_cpu_s']:.2f}{runs}) | | | | {_mb(x['peak_rss_bytes'])} |"
                )
                continue
            if step == "ingest" and "floor" in s and "blobs" in s["floor"]:
                # the floor of the whole ingest: binary COPY of every table it reads, flat tables and blobs
                floor_s = s["floor"]["elapsed_s"] + s["floor"]["blobs"]["elapsed_s"]
                secs = x["ingest_elapsed_s"]
                workers = f", {x['workers']} decode workers" if x.get("workers") else ""
                lines.append(
                    f"| {LABELS['ingest']}{workers} | {x['rows']:,} | {secs:.2f} | {x['rows_per_s']:,.0f} | "
                    f"{floor_s / secs:.3f} of the floor ({floor_s:.2f} s) | | {_mb(x['peak_rss_bytes'])}"
                    + (f" (largest worker {_mb(x['workers_peak_rss_bytes'])})" if x.get("workers") else "")
                    + " |"
                )
                continue
            sqlite_floor = step == "floor" and x.get("layout") == "sqlite"
            label = LABELS["floor_sqlite"] if sqlite_floor else LABELS.get(step, step)
            row(label, x, None if step in ("ingest",) else floor, with_dlt=step not in ("ingest",))
        ing = s.get("ingest", {})
        if "breakdown_s" in ing:
            parts = ", ".join(
                f"{k} {v:.1f}s ({v / ing['ingest_elapsed_s']:.0%})" for k, v in ing["breakdown_s"].items()
            )
            lines.append(f"\ningest time: {parts}")
        ev = s.get("evidence", {})
        if ev.get("tables"):
            lines.append(
                f"\nevidence, host {ev['host']} ({ev['host_slots']} slots in {ev['host_escrows']} escrows), "
                f"median of {EVIDENCE_RUNS} after a warm-up; "
                f"warehouse open {ev['warehouse_open_s'] * 1000:.0f} ms (not included)"
            )
            lines.append(
                "| evidence table | warehouse (compute) s | first run s | PostgreSQL SQL s | first run s "
                "| PostgreSQL / warehouse |"
            )
            lines.append("|---|---:|---:|---:|---:|---:|")
            for name, e in ev["tables"].items():
                lines.append(
                    f"| {name} | {e['warehouse']['median_s']:.3f} | {e['warehouse']['first_s']:.3f} | "
                    f"{e['postgres']['median_s']:.3f} | {e['postgres']['first_s']:.3f} | {e['speedup']:.1f}× |"
                )
        elif "error" in ev:
            lines.append(f"\nevidence: error {ev['error']}")
    lines.append("\n## targets")
    for size, t in results["targets"].items():
        if size == "rss_growth":
            by = ", ".join(f"{k} ×{v:.2f}" for k, v in t["by_step"].items())
            lines.append(
                f"- peak RSS growth {t['between'][0]}→{t['between'][1]} (same step): worst ×{t['value']:.2f} ({by}) "
                f"(target {t['target']}): {'PASS' if t['pass'] else 'FAIL'}"
            )
            continue
        for name, e in t.items():
            value = (
                f"{e['value'] / 2**30:.2f} GiB"
                if name == "peak_rss"
                else f"{e['value']:,.3f}"
                if e["value"] < 100
                else f"{e['value']:,.0f}"
            )
            note = f" ({e['note']})" if "note" in e else ""
            target = f"< {TARGETS['peak_rss_bytes'] / 2**30:.1f} GiB" if name == "peak_rss" else e["target"]
            if name == "peak_rss":
                note = " (" + ", ".join(f"{k} {v / 2**30:.2f}" for k, v in e["by_step"].items()) + " GiB)"
            lines.append(f"- {size} {name}: {value} (target {target}): {'PASS' if e['pass'] else 'FAIL'}{note}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="gonka-evidence ingest benchmark (see bench/BENCHMARKS.md)")
    parser.add_argument("--sizes", default="500k,2m")
    parser.add_argument("--url", default=scale_copy.DEFAULT_URL, help="PostgreSQL server (database part replaced)")
    parser.add_argument("--steps", default=",".join(STEPS), help="subset of: " + ",".join(STEPS))
    parser.add_argument("--regenerate", action="store_true", help="re-create the copies even when present")
    parser.add_argument(
        "--store",
        type=Path,
        help="a SQLite store directory instead of the PostgreSQL copies (steps floor, decode, ingest, reingest;"
        " the floor is then every table read into Arrow and written to a fresh DuckDB file)",
    )
    parser.add_argument("--output", default=str(RESULTS / "latest.json"))
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("--size", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.step:  # child process: one measured step
        result = STEP_FUNCS[args.step](args.url, args.size)
        Path(args.out).write_text(json.dumps(result, default=str))
        return 0

    DATA.mkdir(parents=True, exist_ok=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    steps = [s for s in args.steps.split(",") if s]
    results = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "command": " ".join([Path(sys.executable).name, "bench/run.py", *(argv or sys.argv[1:])]),
        "targets_spec": TARGETS,
        "sizes": {},
    }
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    if args.store:  # one SQLite store directory, labelled by its name
        sizes = [args.store.resolve().name]
    for size in sizes:
        dbname = f"gonka_bench_{size}"
        copy_info = None
        if args.store:
            url = str(args.store.resolve())
            size_bytes = sum(f.stat().st_size for f in args.store.glob("*.db"))
            copy_info = {"layout": "sqlite", "store": url, "bytes": size_bytes}
        elif args.regenerate or not scale_copy.exists(size, args.url):
            print(f"[{size}] generating {dbname} …", flush=True)
            copy_info = scale_copy.generate(size, args.url)
        if not args.store:
            url = scale_copy.db_url(args.url, dbname)
        copy_info = copy_info or copy_stats(url, size)
        copy_info["database"] = dbname
        print(f"[{size}] copy: {json.dumps(copy_info)}", flush=True)
        run_step("floor", url, size)  # warm-up: the OS page cache holds the copy for every step alike
        entry = {"copy": copy_info, "steps": {}}
        for step in steps:
            print(f"[{size}] {step} …", flush=True)
            r = run_step(step, url, size)
            entry["steps"][step] = r
            brief = {
                k: r[k]
                for k in (
                    "elapsed_s",
                    "ingest_elapsed_s",
                    "rows",
                    "rows_per_s",
                    "tx_per_s",
                    "worst_speedup",
                    "peak_rss_bytes",
                    "error",
                )
                if k in r
            }
            print(f"[{size}] {step}: {json.dumps(brief)}", flush=True)
        results["sizes"][size] = entry
        results["targets"] = evaluate(results["sizes"])
        Path(args.output).write_text(json.dumps(results, indent=2, default=str))  # partial results survive
    results["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    results["targets"] = evaluate(results["sizes"])
    results["rendered"] = render(results)
    Path(args.output).write_text(json.dumps(results, indent=2, default=str))
    print(results["rendered"])
    print(f"\nwritten: {args.output}")
    return 1 if any("error" in s for r in results["sizes"].values() for s in r["steps"].values()) else 0


def copy_stats(url: str, size: str) -> dict:
    """What bench/scale_copy.py recorded about the copy, else counted from the database."""
    recorded = scale_copy.DATA / f"copy_{size}.json"
    if recorded.exists():
        return json.loads(recorded.read_text())
    import psycopg

    with psycopg.connect(url) as con:
        q = lambda s: con.execute(s).fetchone()[0]  # noqa: E731
        return {
            "escrows": q("SELECT count(*) FROM devshard_sessions"),
            "diffs": q("SELECT count(*) FROM devshard_diffs"),
            "sealed_rows": q("SELECT count(*) FROM devshard_sealed_inferences"),
            "obs_rows": q(
                "SELECT (SELECT count(*) FROM devshard_sealed_validation_obs) + "
                "(SELECT count(*) FROM devshard_inference_validation_obs)"
            ),
            "db_bytes": q("SELECT pg_database_size(current_database())"),
        }


if __name__ == "__main__":
    sys.exit(main())


def rerender(path: str = str(RESULTS / "latest.json")) -> str:
    """The table of a results file again (e.g. `python -c 'import bench.run as r; print(r.rerender())'`)."""
    return render(json.loads(Path(path).read_text()))
