"""A large ingest staged beside the warehouse and written once (pipeline/ingest/staging.py) gives the warehouse
the chunk-by-chunk path gives; a kill in either of its stages leaves the chunks' tables as they were, and the
next ingest removes what it staged."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

import pipeline.ingest.staging as staging
import pipeline.ingest.store as store_mod
from pipeline.samples import SampleSpec, generate_timeline
from pipeline.warehouse.database import fetch_frame, open_for_write
from tests.helpers import assert_views_equal, frame, ingest, views

# What the chunks write: raw rows, coverage and the derived rows (the run's bookkeeping, the escrow cache and
# the quarantine of refused inputs are written before them, as in the chunk-by-chunk path).
CHUNK_TABLES = (
    "raw_sessions",
    "raw_diffs",
    "tx_log",
    "raw_diff_coverage",
    "raw_diff_forks",
    "raw_sealed_inferences",
    "raw_sealed_conflicts",
    "raw_snapshots",
    "raw_snapshot_host_stats",
    "raw_snapshot_model_stats",
    "raw_snapshot_live",
    "raw_validation_obs",
    "raw_signature_digests",
    "raw_signature_forks",
    "d_escrows",
    "d_escrow_slots",
    "d_escrow_coverage",
    "d_inferences",
    "d_validations",
    "d_tx_times",
    "d_replay_disagreements",
)
SMALL = SampleSpec(seed=11, epochs=(2, 3, 4), escrows_per_epoch=2, inferences_per_escrow=80)
BOOKKEEPING = (
    "SELECT table_name, row_key, reason FROM quarantine ORDER BY ALL",
    "SELECT run_id, status, input_digest, rows FROM ingest_runs ORDER BY ALL",
    "SELECT * EXCLUDE (run_id) FROM ingest_accounting ORDER BY ALL",
)


def _staging(warehouse):
    return warehouse.with_name(warehouse.name + staging.SUFFIX)


def _run_ids_excluded(con, table: str) -> str:
    columns = fetch_frame(con, f"SELECT * FROM {table} LIMIT 0").columns
    return "* EXCLUDE (run_id)" if "run_id" in columns else "*"


def _chunk_tables(warehouse) -> dict:
    con = open_for_write(warehouse)  # one connection for every table (an open per query took seconds in all)
    try:
        return {t: fetch_frame(con, f"SELECT {_run_ids_excluded(con, t)} FROM {t} ORDER BY ALL") for t in CHUNK_TABLES}
    finally:
        con.close()


@pytest.mark.parametrize(
    "later",
    [
        "sqlite",
        # The sample network's copies, the later one in PostgreSQL (four ingests of copies ten times larger);
        # stands in the default tier: its "sqlite" case, a small network's later copy of another source over the
        # first, tests/ingest/test_staging.py::test_staged_and_chunked_ingests_give_the_same_warehouse
        pytest.param("postgres", marks=pytest.mark.heavy),
    ],
)
def test_staged_and_chunked_ingests_give_the_same_warehouse(tmp_path, sqlite_copy, pg_copy, monkeypatch, later):
    """A first copy, then a later copy of another source over it (dedupe, ranges, upserts against stored rows):
    the same raw and derived rows, quarantine, runs and accounting whether each is staged or written by chunk."""
    if later == "sqlite":  # copies of a small network (two escrows an epoch), the later one of another source
        small = generate_timeline(SMALL)
        copies = [small.copy(last_epoch=e).write_sqlite(tmp_path / name) for e, name in ((3, "first"), (4, "later"))]
        chunk_nonces, part_diffs = 40, 50
    else:
        copies, chunk_nonces, part_diffs = [sqlite_copy(3), pg_copy(4)], 60, 150
    monkeypatch.setattr(store_mod, "CHUNK_NONCES", chunk_nonces)  # several chunks per copy
    monkeypatch.setattr(store_mod, "STAGE_PART_DIFFS", part_diffs)  # and several staged parts, each its own transaction
    staged: list[int] = []
    parts: list[int] = []
    finish = staging.Stager.finish
    monkeypatch.setattr(
        staging.Stager, "finish", lambda self: staged.append(1) or parts.append(len(self.parts)) or finish(self)
    )
    writes: list[int] = []  # unstaged: the write units, each of at most CHUNK_NONCES diffs
    write_chunk = store_mod._write_chunk
    monkeypatch.setattr(store_mod, "_write_chunk", lambda con, rows, *a: writes.append(1) or write_chunk(con, rows, *a))
    built = {}
    for name, threshold in (("chunked", 10**12), ("staged", 1)):
        monkeypatch.setattr(store_mod, "STAGE_MIN_DIFFS", threshold)
        built[name] = tmp_path / f"{name}.duckdb"
        summaries = [ingest(built[name], copy) for copy in copies]
        assert all(s.rows["diffs"] > 0 for s in summaries)
    assert len(writes) > 4  # the chunks held in memory were written in several units, not one per copy
    assert staged == [1, 1]  # each copy of the second warehouse took the staged path
    assert parts[0] > 2 and parts[1] > 2
    assert not _staging(built["staged"]).exists()  # removed after
    assert_views_equal(views(built["chunked"]), views(built["staged"]))
    chunked, staged_tables = _chunk_tables(built["chunked"]), _chunk_tables(built["staged"])
    for table in CHUNK_TABLES:
        assert chunked[table].equals(staged_tables[table]), table
    assert chunked["raw_diffs"].height and chunked["d_inferences"].height
    for sql in BOOKKEEPING:
        assert frame(built["chunked"], sql).equals(frame(built["staged"], sql)), sql


def _ingest_cmd(warehouse, store) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli", "ingest", str(store), "--warehouse", str(warehouse)]


@pytest.fixture(scope="module")
def first_and_next(tmp_path_factory, timeline):
    """A first copy and the next one (SQLite stores, only read), a warehouse of the first with its chunks' tables,
    and a clean warehouse of both: built once for both kill tests, each of which kills an ingest into a copy."""
    root = tmp_path_factory.mktemp("first-and-next")
    first = timeline.copy(last_epoch=3).write_sqlite(root / "store-3")
    second = timeline.copy(last_epoch=4).write_sqlite(root / "store-4")
    clean = root / "clean.duckdb"
    for copy in (first, second):
        ingest(clean, copy)
    wh = root / "first.duckdb"
    ingest(wh, first)  # closed, so checkpointed: the file alone is the warehouse
    return second, clean, wh, _chunk_tables(wh)


# A kill in stage 2 (the transaction) in the default tier, one in stage 1 (before any write) in the heavy one
# (each kills a subprocess ingest and runs it again); its stage 2 case stands in the default tier:
# tests/ingest/test_staging.py::test_a_kill_in_either_stage_leaves_the_tables_and_the_next_run_removes_the_staged_files  # noqa: E501
@pytest.mark.parametrize("stage", [pytest.param(1, marks=pytest.mark.heavy), 2])
def test_a_kill_in_either_stage_leaves_the_tables_and_the_next_run_removes_the_staged_files(
    tmp_path, first_and_next, stage
):
    """A warehouse holding a first copy; the next copy's staged ingest (one part) killed in stage 1 (files being
    staged) or stage 2 (the transaction writing them): the chunks' tables are as before the kill, and the next
    ingest (the chunk-by-chunk path) removes the staged files and ends as a clean run does."""
    second, clean, first_wh, before = first_and_next
    wh = tmp_path / "killed.duckdb"
    shutil.copyfile(first_wh, wh)
    env = os.environ | {"GONKA_EVIDENCE_STAGE_DIFFS": "1", "GONKA_EVIDENCE_CHUNK_NONCES": "40"}
    proc = subprocess.Popen(_ingest_cmd(wh, second), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mark = _staging(wh) / (staging.STAGE2_MARK if stage == 2 else f"part-0/{staging.PROBLEMS}.parquet")
    deadline = time.monotonic() + 120
    while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the ingest ended before the kill"
    assert _staging(wh).exists()  # what the killed run staged is still there
    after_kill = _chunk_tables(wh)
    for table in CHUNK_TABLES:
        assert after_kill[table].equals(before[table]), table
    # The next run, below the staging threshold, removes the stray files and converges to the clean state.
    subprocess.run(_ingest_cmd(wh, second), check=True, stdout=subprocess.DEVNULL)
    assert not _staging(wh).exists()
    assert_views_equal(views(clean), views(wh))
    statuses = frame(wh, "SELECT status FROM ingest_runs ORDER BY started_at")["status"].to_list()
    assert statuses == ["ok", "aborted", "ok"]


# A kill later in stage 2, between its parts (another subprocess ingest killed and run again);
# stands in the default tier: a kill in stage 2, whose next run ends as a clean one,
# tests/ingest/test_staging.py::test_a_kill_in_either_stage_leaves_the_tables_and_the_next_run_removes_the_staged_files  # noqa: E501
@pytest.mark.heavy
def test_a_kill_between_staged_parts_leaves_whole_parts_and_the_next_run_completes(tmp_path, sqlite_copy):
    """Stage 2 commits part by part (GONKA_EVIDENCE_STAGE_PART_DIFFS): killed after its first part, the warehouse
    holds whole parts (their escrows' raw and derived rows), and the next run reads the rest from the cursors."""
    store = sqlite_copy(4)
    clean = tmp_path / "clean.duckdb"
    ingest(clean, store)
    wh = tmp_path / "killed.duckdb"
    env = os.environ | {
        "GONKA_EVIDENCE_STAGE_DIFFS": "1",
        "GONKA_EVIDENCE_CHUNK_NONCES": "40",
        "GONKA_EVIDENCE_STAGE_PART_DIFFS": "100",
    }
    proc = subprocess.Popen(_ingest_cmd(wh, store), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mark = _staging(wh) / staging.STAGE2_MARK
    deadline = time.monotonic() + 120
    while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the ingest ended before the kill"
    # every escrow with raw diffs is derived (a part commits its writes and its derive together)
    underived = frame(
        wh,
        "SELECT count(*) AS n FROM (SELECT DISTINCT escrow_id FROM raw_diffs) r ANTI JOIN d_escrows USING (escrow_id)",
    )
    assert underived["n"][0] == 0
    subprocess.run(_ingest_cmd(wh, store), env=env, check=True, stdout=subprocess.DEVNULL)
    assert not _staging(wh).exists()
    assert_views_equal(views(clean), views(wh))
