"""DuckDB on many threads (a many-core machine, forced here through GONKA_EVIDENCE_THREADS on few cores):
the ingest's memory limit grows with the threads, so copies ingested one after another complete, and
the warehouse is the one ingested on 2 threads, row for row."""

from __future__ import annotations

from pathlib import Path

import pytest
from polars.testing import assert_frame_equal

from pipeline.jobs.run import content_parts
from pipeline.samples import SampleSpec, generate_timeline
from pipeline.warehouse.database import fetch_frame, ingest_budget, open_for_write
from tests.helpers import ingest, views

# three ingests of ~25 MB copies, up to 128 threads on this machine's cores; stands in the default tier:
# tests/core/test_resources.py::test_the_memory_limit_grows_with_the_threads
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
        assert ingest_budget(con).memory_limit == f"{200 + 4 * threads}MB"
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
