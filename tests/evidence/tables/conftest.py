"""Sample warehouses shared by the evidence-table tests of this folder: built once per worker, read only."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.warehouse.database import open_for_write, open_read_only
from tests.factories import log_samples_warehouse, sample_warehouse


@pytest.fixture(scope="session")
def sample(request, timeline):
    """A warehouse of `timeline.copy(4)` (SQLite layout) with the build timeline; (con, focal, builds)."""
    warehouse = sample_warehouse(request, timeline.copy(last_epoch=4), label="sample", builds=timeline).path
    con = open_read_only(warehouse)
    yield con, timeline.focal_host, list(timeline.builds)
    con.close()


@pytest.fixture(scope="session")
def _bare_copy4(request, timeline) -> Path:
    """A warehouse of `timeline.copy(4)` (SQLite layout) without builds: built once per worker, never written
    (`bare_copy4` hands out copies of it)."""
    return sample_warehouse(request, timeline.copy(last_epoch=4), label="copy-4").path


@pytest.fixture
def bare_copy4(_bare_copy4, tmp_path) -> Path:
    """A private copy of the warehouse a fresh ingest of `timeline.copy(4)` gives (no builds), free to write:
    the closed DuckDB file copied (no .wal beside it), a fraction of the ingest."""
    path = tmp_path / "copy-4" / "warehouse.duckdb"
    path.parent.mkdir()
    shutil.copyfile(_bare_copy4, path)
    return path


@pytest.fixture(scope="session")
def logs(request):
    """A warehouse of the log samples (vLLM logs, /metrics scrapes) with their builds; (con, truth)."""
    built = log_samples_warehouse(request, parts=("vllm", "metrics"))
    con = open_for_write(built.path)
    yield con, built.truth
    con.close()
