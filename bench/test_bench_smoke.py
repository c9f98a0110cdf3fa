"""Smoke test of the benchmark harness on a tiny scale copy (needs PostgreSQL; marked slow).

pytest -m slow bench/test_bench_smoke.py
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

pytestmark = pytest.mark.slow

SIZE = "12000"  # inferences: one escrow (escrows hold 5–20k)


@pytest.fixture(scope="module")
def copy_url():
    import psycopg
    import scale_copy

    try:
        psycopg.connect(scale_copy.db_url(scale_copy.DEFAULT_URL, "postgres"), connect_timeout=3).close()
    except psycopg.Error as exc:
        pytest.skip(f"no PostgreSQL at {scale_copy.DEFAULT_URL}: {exc}")
    info = scale_copy.generate(SIZE, log=lambda *_: None)
    assert info["inferences"] == int(SIZE)
    assert info["diffs"] >= info["inferences"] and info["sealed_rows"] > 0.95 * info["inferences"]
    yield scale_copy.db_url(scale_copy.DEFAULT_URL, info["database"]), info
    with psycopg.connect(scale_copy.db_url(scale_copy.DEFAULT_URL, "postgres"), autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {info['database']} WITH (FORCE)")


def test_steps_agree_and_reingest_is_a_noop(copy_url):
    import run

    url, info = copy_url
    steps = ["floor", "flat", "flat_raw", "blobs", "decode", "ingest", "reingest", "evidence"]
    if importlib.util.find_spec("dlt"):
        steps.append("dlt")
    r = {step: run.run_step(step, url, SIZE) for step in steps}
    for step, result in r.items():
        assert "error" not in result, (step, result)
        assert result["peak_rss_bytes"] > 0
    cache = r["floor"]["per_table"]["escrow_cache"]
    expected = info["sealed_rows"] + info["obs_rows"] + info["escrows"] + cache  # flat tables: no diffs
    assert r["floor"]["rows"] == r["flat"]["rows"] == r["flat_raw"]["rows"] == expected
    assert r["floor"]["blobs"]["rows"] == r["blobs"]["rows"] == info["diffs"]
    if "dlt" in r:
        assert r["dlt"]["rows"] == expected
    assert r["decode"]["txs"] == info["txs"] and r["decode"]["quarantined"] == 0
    ingest = r["ingest"]
    assert ingest["summary_rows"]["inferences"] == info["inferences"]
    assert ingest["quarantined"] == 0 and ingest["disagreements"] == 0
    assert ingest["rows"] == info["diffs"] + info["sealed_rows"]
    assert r["reingest"]["escrows_changed"] == 0 and r["reingest"]["rows"] == 0
    assert set(r["evidence"]["tables"]) == set(run.EVIDENCE_TABLES)
    targets = run.evaluate({SIZE: {"steps": r}})
    assert set(targets[SIZE]) >= {
        "flat_vs_floor",
        "decode_tx_per_s",
        "reingest_share",
        "peak_rss",
        "evidence epoch-summary",
    }


def test_the_sqlite_layout_ingests_to_the_warehouse_of_the_postgres_copy(copy_url, tmp_path):
    """`scale_copy.py --layout sqlite` writes the PostgreSQL copy's rows (no server needed): the same public views."""
    import scale_copy

    from tests.helpers import assert_views_equal, ingest, views

    url, info = copy_url
    made = scale_copy.generate_sqlite(SIZE, tmp_path, log=lambda *_: None)
    counts = ("escrows", "inferences", "diffs", "sealed_rows", "obs_rows", "txs")
    assert {k: made[k] for k in counts} == {k: info[k] for k in counts}
    assert sorted(p.name for p in Path(made["store"]).iterdir()) == ["_meta.db"] + [
        f"epoch_{e}.db" for e in scale_copy.EPOCHS
    ]
    from_pg, from_sqlite = ingest(tmp_path / "pg.duckdb", url), ingest(tmp_path / "sqlite.duckdb", made["store"])
    # Each escrow's one snapshot is random bytes behind a field tag: quarantined from either layout alike.
    assert from_sqlite.quarantined == from_pg.quarantined == info["escrows"]
    assert_views_equal(views(tmp_path / "pg.duckdb"), views(tmp_path / "sqlite.duckdb"))
