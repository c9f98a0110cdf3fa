"""DuckDB on many threads (a many-core machine, forced here through GONKA_EVIDENCE_THREADS on few cores):
the ingest's memory limit grows with the threads and with the warehouse, so copies ingested one after
another complete with the default settings, and the warehouse is the one ingested on 2 threads, row for row."""

from __future__ import annotations

from pathlib import Path

import pytest
from polars.testing import assert_frame_equal

from pipeline.jobs.run import content_parts
from pipeline.samples import SampleSpec, generate_timeline
from pipeline.warehouse.database import data_bytes, fetch_frame, ingest_budget, open_for_write
from tests.helpers import ingest, views

# ingests of ~25 MB copies, up to 128 threads on this machine's cores; stands in the default tier:
# tests/core/test_resources.py::test_the_memory_limit_grows_with_the_threads,
# tests/core/test_resources.py::test_the_ingest_budget_counts_the_warehouse_data
pytestmark = pytest.mark.heavy

# Ten times the default escrows: chunks large enough that 128 threads need more than the 200MB the
# ingest's memory limit was fixed at before it grew with the threads (275MB measured).
SPEC = SampleSpec(seed=11, escrows_per_epoch=30)
EPOCHS = (2, 3, 4)


@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("many-threads")
    timeline = generate_timeline(SPEC)
    return [timeline.copy(last_epoch=e).write_sqlite(root / f"store-{e}", ledger=True) for e in EPOCHS]


def _ingest_all(warehouse: Path, copies: list[Path], threads: int, monkeypatch) -> Path:
    monkeypatch.setenv("GONKA_EVIDENCE_THREADS", str(threads))
    monkeypatch.delenv("GONKA_EVIDENCE_INGEST_MEMORY", raising=False)
    monkeypatch.delenv("GONKA_EVIDENCE_DUCKDB_MEMORY", raising=False)
    for store in copies:  # one after another into one warehouse, as a scheduled run does
        summary = ingest(warehouse, store)
        assert summary.escrows_changed > 0
    return warehouse


@pytest.fixture(scope="module")
def two_threads(copies, tmp_path_factory) -> Path:
    with pytest.MonkeyPatch.context() as monkeypatch:
        return _ingest_all(tmp_path_factory.mktemp("two") / "w.duckdb", copies, 2, monkeypatch)


@pytest.mark.parametrize("threads", [16, 64, 128])
def test_many_threads_ingest_the_same_warehouse_as_two(copies, two_threads, tmp_path, monkeypatch, threads):
    warehouse = _ingest_all(tmp_path / "w.duckdb", copies, threads, monkeypatch)
    con = open_for_write(warehouse)
    try:
        assert fetch_frame(con, "SELECT current_setting('threads') AS t")["t"][0] == threads
        # the base, 4MB a thread and the warehouse's data (no longer the base and the threads alone)
        assert ingest_budget(con).memory_limit == f"{200 + 4 * threads + data_bytes(con) // 10**6}MB"
        statuses = fetch_frame(con, "SELECT status FROM ingest_runs")["status"].to_list()
        assert statuses == ["ok"] * len(EPOCHS)
        many = content_parts(con)
    finally:
        con.close()
    reference = open_for_write(two_threads)
    try:
        assert many == content_parts(reference)  # every table, its rows hashed (run bookkeeping apart)
    finally:
        reference.close()
    mine = views(warehouse)
    for name, frame in views(two_threads).items():  # the public views, ordered by their keys
        assert frame.height > 0, name
        assert_frame_equal(mine[name], frame)


# Six copies of a host's store, one a day as a scheduled run makes them (each three epochs, so they overlap),
# ingested one after another into one warehouse, every connection at 16 threads as on a 16-core machine;
# the 1M network's six copies (bench/BENCHMARKS.md, sizing) ran out at the fifth with the limit fixed by the
# threads (264MB).
SIX = SampleSpec(seed=11, epochs=tuple(range(1, 9)), escrows_per_epoch=30)


@pytest.fixture(scope="module")
def six_copies(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("six")
    timeline = generate_timeline(SIX)
    return [timeline.copy(last_epoch=e).write_sqlite(root / f"store-{e}", ledger=True) for e in range(3, 9)]


def _six(warehouse: Path, copies: list[Path], threads: int, monkeypatch) -> list[int]:
    """Each copy in turn at `threads` with the default limits; the ingest's limit (MB) before each."""
    monkeypatch.setenv("GONKA_EVIDENCE_THREADS", str(threads))
    for name in ("GONKA_EVIDENCE_INGEST_MEMORY", "GONKA_EVIDENCE_DUCKDB_MEMORY", "GONKA_EVIDENCE_MEMORY"):
        monkeypatch.delenv(name, raising=False)
    limits = []
    for store in copies:
        con = open_for_write(warehouse)
        try:
            limits.append(int(ingest_budget(con).memory_limit.removesuffix("MB")))
        finally:
            con.close()
        assert ingest(warehouse, store).escrows_changed > 0
    return limits


def test_six_copies_at_16_threads_complete_with_the_defaults_and_equal_two_threads(six_copies, tmp_path, monkeypatch):
    two, sixteen = tmp_path / "two.duckdb", tmp_path / "sixteen.duckdb"
    _six(two, six_copies, 2, monkeypatch)
    limits = _six(sixteen, six_copies, 16, monkeypatch)
    # The limit follows the warehouse: the base and 16 threads' 264MB for the first copy, more for each later one.
    assert limits[0] == 264 and all(a < b for a, b in zip(limits, limits[1:], strict=False)), limits
    con = open_for_write(sixteen)
    try:
        assert fetch_frame(con, "SELECT status FROM ingest_runs")["status"].to_list() == ["ok"] * len(six_copies)
        assert limits[-1] < 264 + data_bytes(con) // 10**6  # sized before the last copy added its rows
        many = content_parts(con)
    finally:
        con.close()
    reference = open_for_write(two)
    try:
        assert many == content_parts(reference)
    finally:
        reference.close()
    mine = views(sixteen)
    for name, frame in views(two).items():
        assert frame.height > 0, name
        assert_frame_equal(mine[name], frame)
