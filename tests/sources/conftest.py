"""Fixtures of the source tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.warehouse.database import open_for_write


@pytest.fixture(scope="session")
def new_warehouse(tmp_path_factory):
    """`open_for_write(path)`, a new file made as a copy of a new warehouse made once (its schema and views,
    nothing else), which `open_for_write` finds up to date: making each anew runs every schema script again."""
    template = tmp_path_factory.mktemp("new-warehouse") / "w.duckdb"
    open_for_write(template).close()

    def open_new(path: Path):
        if not path.exists():
            shutil.copyfile(template, path)
        return open_for_write(path)

    return open_new
