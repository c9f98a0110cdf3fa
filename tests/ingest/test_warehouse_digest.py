"""The warehouse an ingest writes, row for row, against the one the code before the ingest's redesign wrote.

`tests/golden/warehouse-parts.json` holds, per table, the row count and the sum of the rows' hashes
(`pipeline.jobs.run.content_parts`: run bookkeeping excluded) of two ingests made by the code at 7ae5335:
`data-samples/store` (SQLite) and the sample timeline (seed 11, epochs up to 4) as a PostgreSQL copy. A
change to the ingest must leave every table's part as it was; a change that means to alter the warehouse
rewrites the file with UPDATE_GOLDEN=1 and says why in its commit.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from pipeline.core.paths import DATA_SAMPLES_DIR
from pipeline.jobs.run import content_parts
from pipeline.warehouse.database import open_for_write
from tests.helpers import ingest

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "warehouse-parts.json"


def _parts(tmp_path: Path, source: str | Path) -> dict[str, str]:
    tmp_path.mkdir()
    warehouse = tmp_path / "w.duckdb"
    ingest(warehouse, source)
    con = open_for_write(warehouse)
    try:
        return content_parts(con)
    finally:
        con.close()


# no default-tier stand-in: the golden digest needs two whole ingests (SQLite samples, PostgreSQL timeline)
@pytest.mark.heavy
def test_the_samples_warehouse_is_the_recorded_one(tmp_path, pg_copy):
    store = tmp_path / "store"
    shutil.copytree(DATA_SAMPLES_DIR / "store", store)  # the samples are never written
    found = {
        "data-samples/store": _parts(tmp_path / "sqlite", store),
        "timeline seed 11, epochs to 4, PostgreSQL": _parts(tmp_path / "postgres", pg_copy(4)),
    }
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    expected = json.loads(GOLDEN.read_text())
    for copy, parts in expected.items():
        assert sum(int(p.split(":")[0]) for p in parts.values()) > 10_000, copy  # the copy was ingested
        differ = {t: (p, found[copy].get(t)) for t, p in parts.items() if found[copy].get(t) != p}
        assert not differ and found[copy].keys() == parts.keys(), f"{copy}: tables differ {differ}"
