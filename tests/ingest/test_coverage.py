"""Several copies of one network in one warehouse (pipeline/ingest/coverage.py): every range a copy
holds is filled whatever the order, a gap no copy fills is reported, a fork is quarantined with both
versions, and any order of the same copies gives the same views and evidence."""

from __future__ import annotations

import itertools
import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from pipeline.samples import SampleSpec, generate_timeline
from pipeline.sources.decode.devshard_pb2 import DiffContent
from pipeline.warehouse.database import fetch_frame, open_for_write
from tests.helpers import assert_views_equal, evidence, frame, ingest, views

# Small enough to ingest 18 times in a test: two escrows per epoch, epochs 2..4 (the smallest spec
# whose three copies below all plant their payload faults).
SPEC = SampleSpec(seed=11, epochs=(2, 3, 4), escrows_per_epoch=2, inferences_per_escrow=80)
EVIDENCE_TABLES = ("epoch-summary", "votes-by-build", "validators")


@pytest.fixture(scope="module")
def small_timeline():
    return generate_timeline(SPEC)


@pytest.fixture(scope="module")
def copies(tmp_path_factory, small_timeline) -> dict[str, Path]:
    """Three copies of one network: `imported` joined escrow 4101 by import at nonce 30 (no diffs
    at or below it), `full` holds every escrow's whole log, `older` was taken an epoch earlier (its
    epoch-3 escrows are cut). Epoch 2 is left out of each, to keep the tests' 30-odd ingests fast."""
    root = tmp_path_factory.mktemp("copies")
    imported = small_timeline.copy(last_epoch=4, line="snapshot-import")
    assert imported.truth.planted["imported"] == [{"epoch_id": 4, "escrow_id": "4101", "imported_nonce": 30}]
    stores = {
        "imported": imported.write_sqlite(root / "imported", payloads=False),
        "full": small_timeline.copy(last_epoch=4).write_sqlite(root / "full", payloads=False),
        "older": small_timeline.copy(last_epoch=3).write_sqlite(root / "older", payloads=False),
    }
    for store in stores.values():
        (store / "epoch_2.db").unlink()
    return stores


@pytest.fixture(scope="module")
def full_first(tmp_path_factory, copies):
    """A factory: `make(path)` puts at `path` a warehouse that ingested the full copy alone and returns that
    ingest's summary; the ingest runs once per module, each test gets a copy of its file."""
    built = tmp_path_factory.mktemp("full-first") / "w.duckdb"
    summary = ingest(built, copies["full"])
    assert not built.with_name(built.name + ".wal").exists()  # closed, so checkpointed: the file is the warehouse

    def make(path: Path):
        shutil.copyfile(built, path)
        return summary

    return make


def ingest_all(warehouse: Path, *sources) -> None:
    for source in sources:
        ingest(warehouse, source)


def evidence_of(warehouse: Path, host: str) -> dict[str, dict]:
    """Every compared evidence table over epoch 4: rows, stats, notes and the footer's escrow findings."""
    con = open_for_write(warehouse)
    try:
        out = {}
        for name in EVIDENCE_TABLES:
            result = evidence(con, name, host, epoch=4)
            assert result.provenance is not None
            out[name] = {
                "rows": result.rows.to_dicts(),
                "stats": repr(result.stats),
                "notes": result.notes,
                "escrow_findings": result.provenance.escrow_findings,
            }
        return out
    finally:
        con.close()


def every_view(warehouse: Path) -> dict[str, pl.DataFrame]:
    """Every public view of the warehouse, whole and in a stable order (ingest_runs and quarantine are
    tables: they carry run ids and times, which depend on the order by nature)."""
    con = open_for_write(warehouse)
    try:
        names = [r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()]
        return {name: fetch_frame(con, f"SELECT * FROM {name} ORDER BY ALL") for name in sorted(names)}
    finally:
        con.close()


def escrow(warehouse: Path, escrow_id: str) -> dict:
    return frame(warehouse, f"SELECT * FROM escrows WHERE escrow_id = '{escrow_id}'").row(0, named=True)


def test_an_imported_copy_and_a_full_copy_fill_each_other_in_either_order(tmp_path, copies, small_timeline, full_first):
    only_full = tmp_path / "full.duckdb"
    full_first(only_full)
    expected = views(only_full)
    for order in (("imported", "full"), ("full", "imported")):
        wh = tmp_path / f"{'-'.join(order)}.duckdb"
        if order[0] == "full":
            first, second = full_first(wh), ingest(wh, copies["imported"])
        else:
            first, second = (ingest(wh, copies[name]) for name in order)
        # The second copy's diffs that the first had are deduplicated, not written again.
        held_by_both = frame(
            wh, "SELECT sum(hi - lo + 1) AS n FROM escrow_coverage WHERE source_id = 'sqlite:imported'"
        )
        assert (first.diffs_deduplicated, second.diffs_deduplicated) == (0, held_by_both["n"][0])
        assert_views_equal(views(wh), expected)
        nonces = frame(wh, "SELECT min(nonce) AS lo, count(DISTINCT nonce) AS n FROM txs WHERE escrow_id = '4101'")
        row = escrow(wh, "4101")
        assert (nonces["lo"][0], nonces["n"][0]) == (1, row["latest_nonce"])
        assert (row["held_ranges"], row["missing_nonces"], row["complete"]) == (f"1-{row['latest_nonce']}", 0, True)
        ranges = frame(wh, "SELECT source_id, lo, hi FROM escrow_coverage WHERE escrow_id = '4101' ORDER BY source_id")
        assert ranges.rows() == [("sqlite:full", 1, row["latest_nonce"]), ("sqlite:imported", 31, row["latest_nonce"])]
        assert evidence_of(wh, small_timeline.focal_host) == evidence_of(only_full, small_timeline.focal_host)
        assert_keys_unique(wh)


# 19 ingests (about 12 s of CPU, .ci/run runs it); stands in the default tier:
# tests/ingest/test_coverage.py::test_an_imported_copy_and_a_full_copy_fill_each_other_in_either_order
@pytest.mark.heavy
def test_three_copies_in_all_six_orders_give_identical_views_and_evidence(tmp_path, copies, small_timeline):
    host = small_timeline.focal_host
    first_views, first_evidence = None, None
    for i, order in enumerate(itertools.permutations(("imported", "full", "older"))):
        wh = tmp_path / f"order-{i}.duckdb"
        ingest_all(wh, *(copies[name] for name in order))
        got_views, got_evidence = every_view(wh), evidence_of(wh, host)
        if first_views is None:
            first_views, first_evidence = got_views, got_evidence
            assert frame(wh, "SELECT count(*) AS n FROM escrows WHERE NOT complete OR conflicted")["n"][0] == 0
            # Re-ingesting a copy changes nothing and reads no escrow again.
            again = ingest(wh, copies[order[0]])
            assert (again.escrows_changed, sum(again.rows.values())) == (0, 0)
            assert_every_view_equal(every_view(wh), got_views)
            continue
        assert_every_view_equal(got_views, first_views)
        assert got_evidence == first_evidence, order


def assert_every_view_equal(got: dict[str, pl.DataFrame], expected: dict[str, pl.DataFrame]) -> None:
    assert list(got) == list(expected)
    assert all(expected[name].height for name in ("escrows", "txs", "inferences", "validations", "escrow_coverage"))
    for name, frame_ in expected.items():
        assert_frame_equal(got[name], frame_, check_exact=True)


def test_a_gap_no_copy_fills_is_reported(tmp_path, copies, small_timeline):
    """The imported copy alone lacks 1-30 of escrow 4101; a full copy with a hole at 20-25 fills the
    rest of 1-30 but not the hole: the escrow stays partial, in the escrows view, the footer and doctor."""
    from pipeline import api
    from pipeline.output.render import render

    holed = tmp_path / "holed"
    shutil.copytree(copies["full"], holed)
    with sqlite3.connect(holed / "epoch_4.db") as db:
        db.execute("DELETE FROM diffs WHERE escrow_id = '4101' AND nonce BETWEEN 20 AND 25")
    wh = tmp_path / "w.duckdb"
    ingest(wh, copies["imported"])
    alone = escrow(wh, "4101")
    assert (alone["missing_ranges"], alone["missing_nonces"], alone["complete"]) == ("1-30", 30, False)
    ingest(wh, holed)
    row = escrow(wh, "4101")
    latest = row["latest_nonce"]
    assert (row["held_ranges"], row["missing_ranges"], row["missing_nonces"], row["complete"]) == (
        f"1-19,26-{latest}",
        "20-25",
        6,
        False,
    )
    # Per copy, ranges (not nonces): the holed copy gave two, the imported one one.
    ranges = frame(wh, "SELECT source_id, lo, hi FROM escrow_coverage WHERE escrow_id = '4101' ORDER BY 1, 2")
    assert ranges.rows() == [("sqlite:holed", 1, 19), ("sqlite:holed", 26, latest), ("sqlite:imported", 31, latest)]
    assert frame(wh, "SELECT escrow_id FROM escrows WHERE NOT complete")["escrow_id"].to_list() == ["4101"]
    con = open_for_write(wh)
    try:
        over_4 = evidence(con, "epoch-summary", small_timeline.focal_host, epoch=4)
        over_3 = evidence(con, "epoch-summary", small_timeline.focal_host, epoch=3)
    finally:
        con.close()
    footer = render(over_4, "markdown")
    assert f"partial: escrow 4101 (epoch 4): no copy holds diff-log nonces 20-25 (6 of {latest:,})" in footer
    assert "partial:" not in render(over_3, "markdown")
    report = api.doctor(str(holed), wh)
    assert any(line.startswith("partial: escrow 4101 (epoch 4)") for line in report.escrow_lines)


def plant_fork(store: Path, escrow_id: str, epoch_id: int) -> int:
    """Flip the first validation verdict of the escrow's log in this copy; returns its nonce."""
    with sqlite3.connect(store / f"epoch_{epoch_id}.db") as db:
        for nonce, blob in db.execute(
            "SELECT nonce, txs_proto FROM diffs WHERE escrow_id = ? ORDER BY nonce", [escrow_id]
        ).fetchall():
            content = DiffContent.FromString(blob)
            for tx in content.txs:
                if tx.WhichOneof("tx") == "validation":
                    tx.validation.valid = not tx.validation.valid
                    db.execute(
                        "UPDATE diffs SET txs_proto = ? WHERE escrow_id = ? AND nonce = ?",
                        [content.SerializeToString(), escrow_id, nonce],
                    )
                    return nonce
    raise AssertionError(f"no validation in escrow {escrow_id}")


def test_a_fork_is_quarantined_with_both_versions_whatever_the_order(tmp_path, copies, full_first):
    forked = tmp_path / "forked"
    shutil.copytree(copies["full"], forked)
    nonce = plant_fork(forked, "3100", 3)
    got = {}
    for order in (("full", "forked"), ("forked", "full")):
        wh = tmp_path / f"{'-'.join(order)}.duckdb"
        paths = {"full": copies["full"], "forked": forked}
        summaries = [
            full_first(wh) if i == 0 and name == "full" else ingest(wh, paths[name]) for i, name in enumerate(order)
        ]
        assert summaries[1].diff_forks == 1 and summaries[0].diff_forks == 0
        versions = frame(wh, "SELECT nonce, source_id, digest, replayed FROM diff_forks ORDER BY source_id")
        assert versions["nonce"].to_list() == [nonce, nonce]
        assert versions["source_id"].to_list() == ["sqlite:forked", "sqlite:full"]
        assert versions["digest"].n_unique() == 2 and versions["replayed"].sum() == 1
        quarantined = frame(
            wh,
            f"SELECT source_id, reason FROM quarantine WHERE table_name = 'diffs' AND row_key = '3100/{nonce}' "
            "ORDER BY source_id",
        )
        assert quarantined["source_id"].to_list() == ["sqlite:forked", "sqlite:full"]
        for source, digest in zip(versions["source_id"], versions["digest"], strict=True):
            reason = quarantined.filter(pl.col("source_id") == source)["reason"][0]
            assert f"this copy holds sha256:{digest[:16]}" in reason
        conflicted = frame(wh, "SELECT escrow_id, forked_nonces FROM escrows WHERE conflicted ORDER BY 1")
        assert conflicted.rows() == [("3100", 1)]
        # The replay uses the version whose digest sorts first: its verdict is the one in the log.
        replayed_source = versions.filter(pl.col("replayed"))["source_id"][0]
        verdict_sql = f"SELECT valid FROM txs WHERE escrow_id = '3100' AND nonce = {nonce} AND kind = 'validation'"
        one_copy = tmp_path / f"only-{replayed_source.split(':')[1]}.duckdb"
        if not one_copy.exists():  # that copy alone (the full one's warehouse is built once per module)
            name = replayed_source.split(":")[1]
            full_first(one_copy) if name == "full" else ingest(one_copy, paths[name])
        verdict, expected = frame(wh, verdict_sql), frame(one_copy, verdict_sql)
        assert_frame_equal(verdict, expected)
        got[order] = views(wh)
        assert_keys_unique(wh)
    assert_views_equal(got[("full", "forked")], got[("forked", "full")])


def assert_keys_unique(wh) -> None:
    """The tables kept without a key index hold each key once (copies overlap, a fork replaced a diff)."""
    for table, key in (
        ("tx_log", "escrow_id, nonce, tx_index"),
        ("d_validations", "escrow_id, nonce, tx_index"),
        ("d_tx_times", "escrow_id, nonce"),
        ("d_inferences", "escrow_id, inference_id"),
    ):
        counts = frame(wh, f"SELECT count(*) AS n, count(DISTINCT ({key})) AS keys FROM {table}")
        assert counts["n"][0] > 0 and counts["n"][0] == counts["keys"][0], table


def test_sealed_rows_that_disagree_mark_the_escrow_whatever_the_order(tmp_path, copies, full_first):
    other = tmp_path / "other"
    shutil.copytree(copies["full"], other)
    with sqlite3.connect(other / "epoch_3.db") as db:
        inference_id = db.execute(
            "SELECT min(inference_id) FROM sealed_inferences "
            "WHERE escrow_id = '3101' AND sealed_nonce > 0 AND obs_present"
        ).fetchone()[0]
        db.execute(
            "UPDATE sealed_inferences SET sealed_actual_cost = sealed_actual_cost + 1 "
            "WHERE escrow_id = '3101' AND inference_id = ?",
            [inference_id],
        )
    got = {}
    for order in (("full", "other"), ("other", "full")):
        wh = tmp_path / f"{'-'.join(order)}.duckdb"
        for j, name in enumerate(order):  # a copy of the full copy's warehouse, where that comes first
            full_first(wh) if j == 0 and name == "full" else ingest(wh, {"full": copies["full"], "other": other}[name])
        assert frame(wh, "SELECT escrow_id, conflicting_seals FROM escrows WHERE conflicted").rows() == [("3101", 1)]
        got[order] = views(wh)
        got[order]["sealed_conflicts"] = frame(
            wh,
            "SELECT escrow_id, inference_id, field, stored, copy, stored_source_id, copy_source_id "
            "FROM raw_sealed_conflicts ORDER BY ALL",
        )
    assert_views_equal(got[("full", "other")], got[("other", "full")])
    assert_frame_equal(got[("full", "other")]["sealed_conflicts"], got[("other", "full")]["sealed_conflicts"])


# A PostgreSQL copy written for it and four ingests; stands in the default tier: the same fill in either order of
# SQLite copies, tests/ingest/test_coverage.py::test_an_imported_copy_and_a_full_copy_fill_each_other_in_either_order,
# and the snapshot-import line's PostgreSQL copy read as its SQLite copy is,
# tests/sources/store/test_release_lines.py::test_each_release_line_reads_as_defined_in_both_layouts
@pytest.mark.heavy
def test_postgres_and_sqlite_copies_fill_each_other_in_either_order(
    tmp_path, pg_database, small_timeline, copies, full_first
):
    """The imported copy in PostgreSQL, the full one in SQLite: the same warehouse in either order."""
    url = pg_database()
    small_timeline.copy(last_epoch=4, line="snapshot-import").write_postgres(url)
    got = []
    for i, order in enumerate(((url, copies["full"]), (copies["full"], url))):
        wh = tmp_path / f"{i}.duckdb"
        for j, source in enumerate(order):  # a copy of the full copy's warehouse, where that comes first
            full_first(wh) if j == 0 and source == copies["full"] else ingest(wh, source)
        row = escrow(wh, "4101")
        assert (row["held_ranges"], row["complete"]) == (f"1-{row['latest_nonce']}", True)
        got.append(views(wh))
    assert_views_equal(got[0], got[1])


def test_a_warehouse_from_before_coverage_gets_its_ranges_and_reingests_nothing(tmp_path, copies, full_first):
    """A warehouse whose diffs were stored before coverage was kept: opening it derives each source's
    ranges from the runs that wrote its diffs, so re-ingesting the copy reads no escrow again."""
    wh = tmp_path / "w.duckdb"
    full_first(wh)
    expected = frame(wh, "SELECT * FROM escrow_coverage ORDER BY ALL")
    con = open_for_write(wh)
    con.execute("DELETE FROM raw_diff_coverage")
    con.execute("DELETE FROM warehouse_meta WHERE key = 'schema_digest'")  # as after an upgrade: the scripts run
    con.close()
    assert_frame_equal(frame(wh, "SELECT * FROM escrow_coverage ORDER BY ALL"), expected)
    again = ingest(wh, copies["full"])
    assert (again.escrows_changed, again.rows) == (0, {})


def test_signatures_that_disagree_mark_the_escrow_whatever_the_order(tmp_path, copies, full_first):
    other = tmp_path / "other"
    shutil.copytree(copies["full"], other)
    with sqlite3.connect(other / "epoch_3.db") as db:
        nonce, slot = db.execute(
            "SELECT nonce, min(slot_id) FROM signatures WHERE escrow_id = '3100' GROUP BY nonce"
        ).fetchone()
        db.execute(
            # a blob: `||` alone makes text, which the reader sets aside as not what the column claims
            "UPDATE signatures SET sig = CAST(x'00' || sig AS BLOB) "
            "WHERE escrow_id = '3100' AND nonce = ? AND slot_id = ?",
            [nonce, slot],
        )
    got = {}
    for order in (("full", "other"), ("other", "full")):
        wh = tmp_path / f"{'-'.join(order)}.duckdb"
        paths = {"full": copies["full"], "other": other}
        summaries = [
            full_first(wh) if i == 0 and name == "full" else ingest(wh, paths[name]) for i, name in enumerate(order)
        ]
        assert [s.signature_forks for s in summaries] == [0, 1]
        conflicted = frame(wh, "SELECT escrow_id, conflicting_signatures, forked_nonces FROM escrows WHERE conflicted")
        assert conflicted.rows() == [("3100", 1, 0)]
        quarantined = frame(
            wh,
            f"SELECT source_id FROM quarantine WHERE table_name = 'signatures' AND row_key = '3100/{nonce}/{slot}' "
            "ORDER BY source_id",
        )
        assert quarantined["source_id"].to_list() == ["sqlite:full", "sqlite:other"]
        got[order] = every_view(wh) | {
            "kept": frame(wh, "SELECT escrow_id, nonce, slot_id, digest FROM raw_signature_digests ORDER BY ALL"),
            "forks": frame(
                wh, "SELECT escrow_id, nonce, slot_id, source_id, digest FROM raw_signature_forks ORDER BY ALL"
            ),
        }
    assert_every_view_equal(got[("full", "other")], got[("other", "full")])
