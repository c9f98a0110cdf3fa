"""The samples' epoch-3 report, written once per test session: the report tests' shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.factories import data_samples_warehouse
from tests.output.shared import HOST, built_once, succeeds_in


def _write(directory: Path) -> None:
    data_samples_warehouse(directory / "warehouse.duckdb", vllm_log_host=HOST)
    succeeds_in(directory, "report", "epoch", "3", "--host", HOST)


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory) -> Path:
    """A working directory with ./warehouse.duckdb holding data-samples/ (label data-samples), its vLLM log
    and its builds (what the bundled `run` ingests), and ./out/epoch-3 of `report epoch 3` run there: built
    once for every module of this folder, which only read it."""
    return built_once(tmp_path_factory, "report-samples", _write)


@pytest.fixture(scope="module")
def report_dir(sample_dir) -> Path:
    """out/epoch-3 of `report epoch 3` run in `sample_dir`."""
    return sample_dir / "out" / "epoch-3"
