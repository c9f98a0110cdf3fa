"""The one factory of sample warehouses: a generated copy (or data-samples/) ingested into a fresh DuckDB file.

Fixtures call it with their own scope's `request`, so a module fixture builds its warehouse once per module
and a throwaway PostgreSQL database lives as long as that fixture.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pipeline.ingest.store import IngestSummary
from tests.helpers import ingest, throwaway_database


@dataclass(frozen=True)
class SampleWarehouse:
    path: Path  # the DuckDB file
    root: Path  # the directory holding it, the SQLite store and builds.toml
    source: str | Path  # what was ingested: the SQLite store directory or the PostgreSQL URL
    summary: IngestSummary


def sample_warehouse(
    request: Any,
    copy: Any,
    *,
    layout: Literal["sqlite", "postgres"] = "sqlite",
    ledger: bool = False,
    label: str | None = None,
    builds: Any = None,
    name: str = "warehouse.duckdb",
    root: Path | None = None,
) -> SampleWarehouse:
    """A warehouse holding ``copy`` (a generated `timeline.copy(...)`) ingested from ``layout``.

    ``ledger`` writes the accounting ledger too; ``builds`` (a timeline) loads its build timeline;
    ``root`` defaults to a fresh directory named after the requesting test or fixture.
    """
    if root is None:
        root = request.getfixturevalue("tmp_path_factory").mktemp(request.fixturename or "warehouse")
    source: str | Path
    if layout == "sqlite":
        source = copy.write_sqlite(root / "store", ledger=ledger)
    else:
        source = throwaway_database(request)
        copy.write_postgres(source, ledger=ledger)
    path = root / name
    summary = ingest(path, source, label=label)
    if builds is not None:
        load_builds_of(path, builds.write_builds_toml(root / "builds.toml"))
    return SampleWarehouse(path, root, source, summary)


def load_builds_of(warehouse: Path, builds_toml: Path) -> None:
    """Load a builds.toml into ``warehouse``."""
    from pipeline.ingest.builds import load_builds
    from pipeline.warehouse.database import open_for_write

    con = open_for_write(warehouse)
    try:
        load_builds(con, builds_toml)
    finally:
        con.close()


# Warehouses of the bundled store, built once per test process (per vLLM log host) and copied for each caller:
# copying the DuckDB file costs a fraction of the ingest. data-samples/ is never written during a run (conftest).
_BUNDLED: dict[str | None, Path] = {}


def data_samples_warehouse(warehouse: Path, store: Path | None = None, *, vllm_log_host: str | None = None) -> Path:
    """``warehouse`` built from a copy of data-samples/ (``store``, default the bundled one), labelled
    data-samples, with the samples' build timeline and, given ``vllm_log_host``, the bundled vLLM log
    as that host's: what the bundled `run` ingests. The bundled store's warehouse is a copy of one built
    once per process; a ``store`` of the caller's is always ingested afresh."""
    if store is None:
        if vllm_log_host not in _BUNDLED:
            built = Path(tempfile.mkdtemp(prefix="gonka-test-samples-"))
            atexit.register(shutil.rmtree, built, ignore_errors=True)
            _BUNDLED[vllm_log_host] = _data_samples_warehouse(built / "warehouse.duckdb", None, vllm_log_host)
        warehouse.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_BUNDLED[vllm_log_host], warehouse)  # closed, so checkpointed: no .wal beside it
        return warehouse
    return _data_samples_warehouse(warehouse, store, vllm_log_host)


def _data_samples_warehouse(warehouse: Path, store: Path | None, vllm_log_host: str | None) -> Path:
    from pipeline.core.paths import DATA_SAMPLES_DIR

    ingest(warehouse, store or DATA_SAMPLES_DIR / "store", label="data-samples")
    if vllm_log_host is not None:
        from pipeline.ingest.logs import ingest_logs
        from pipeline.jobs.config import sample_config
        from pipeline.warehouse.database import open_for_write

        (log,) = [s for s in sample_config().sources if s["kind"] == "vllm"]
        con = open_for_write(warehouse)
        try:
            ingest_logs(con, [log["path"]], host=vllm_log_host, kind="vllm", year=log["year"])
        finally:
            con.close()
    load_builds_of(warehouse, DATA_SAMPLES_DIR / "builds.toml")
    return warehouse


LOG_PARTS = ("vllm", "metrics", "dapi.log", "poc")  # every kind the log samples hold


@dataclass(frozen=True)
class LogSamplesWarehouse:
    path: Path  # the DuckDB file
    root: Path  # the directory holding the log samples
    truth: Any  # what write_log_samples planted
    summary: Any  # what ingest_logs returned


def log_samples_warehouse(request: Any, parts: tuple[str, ...] = LOG_PARTS) -> LogSamplesWarehouse:
    """A warehouse of the generated log samples (``parts`` of them) for their host, with their builds."""
    from pipeline.ingest.logs import ingest_logs
    from pipeline.samples.logs import HOST, write_log_samples
    from pipeline.warehouse.database import open_for_write

    root = request.getfixturevalue("tmp_path_factory").mktemp(request.fixturename or "logs")
    truth = write_log_samples(root)
    path = root / "warehouse.duckdb"
    load_builds_of(path, truth.files["builds"])
    con = open_for_write(path)
    try:
        summary = ingest_logs(con, [root / part for part in parts], host=HOST)
    finally:
        con.close()
    return LogSamplesWarehouse(path, root, truth, summary)
