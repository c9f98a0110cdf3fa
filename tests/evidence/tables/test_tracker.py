"""The accounting ledger (tracker) in both layouts, saved API / chain JSON, findings, cross-checks
and the `tracker` evidence table: every number against the generator's per-nonce truth."""

from __future__ import annotations

import json
import sqlite3

import polars as pl
import psycopg
import pytest

from pipeline.evidence import EvidenceError, compute
from pipeline.ingest.json_responses import ingest_json_files
from pipeline.warehouse.database import fetch_frame, open_for_write
from tests.factories import sample_warehouse
from tests.helpers import ingest, throwaway_database

LAST_EPOCH = 4
COUNTS = [
    "assigned_nonces",
    "protocol_only",
    "finished_used",
    "finished_unused",
    "finished_usage_unknown",
    "unfinished_refused",
    "unfinished_execution",
    "delivered",
    "warmup_probes",
    "delivered_outside_poc",
    "slow_decode",
    "slow_chunk",
    "slow_receipt",
    "clock_drifted",
    "logprobs_decoded",
    "slow_decode_in_poc",
    "protocol_misses",
    "protocol_invalid",
    "unresolved_challenges",
    "recorded_invalid_transitions",
]
KEY = ["epoch_id", "participant", "model"]


@pytest.fixture(scope="module")
def copy4(timeline):
    return timeline.copy(last_epoch=LAST_EPOCH)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def ledger_wh(request, copy4):
    built = sample_warehouse(request, copy4, layout=request.param, ledger=True)
    con = open_for_write(built.path)
    yield request.param, con, built.summary
    con.close()


def expected(truth: pl.DataFrame) -> pl.DataFrame:
    # The view's `delivered` leaves the gateway's warm-up probes out.
    return truth.with_columns(delivered=pl.col("delivered") - pl.col("warmup_probes")).select(KEY + COUNTS).sort(KEY)


def view(con, origin: str = "ledger") -> pl.DataFrame:
    return fetch_frame(
        con, f"SELECT {', '.join(KEY + COUNTS)} FROM tracker_participants WHERE origin = '{origin}' ORDER BY ALL"
    )


def test_tracker_participants_exact(ledger_wh, copy4):
    from polars.testing import assert_frame_equal

    _, con, summary = ledger_wh
    assert summary.rows["ledger_escrows"] == 9 and summary.rows["ledger_quarantined"] == 0
    truth = expected(copy4.truth.tracker)
    assert_frame_equal(view(con), truth, check_dtypes=False)
    # planted facts are really there: PoC-phase slow decodes excluded, warm-up probes, multi-slot hosts
    assert truth["slow_decode_in_poc"].sum() > 10 and truth["warmup_probes"].sum() >= 15
    assert truth["slow_decode"].sum() > 20 and truth["unresolved_challenges"].sum() > 0


def test_legacy_baseline_and_two_writers_are_merged(ledger_wh, copy4):
    layout, con, _ = ledger_wh
    legacy = copy4.truth.planted["ledger"]["legacy_escrow"]
    rows = copy4.ledger.postgres_rows()
    assert {r["writer_id"] for r in rows["accounting_escrow_counters"]} == {"gw-a", "gw-b"}
    assert any(r["slot_id"] == -1 for r in rows["accounting_escrow_invalid_nonces"] if r["escrow_id"] == legacy)
    sets = fetch_frame(con, f"SELECT sum(invalid_transitions) AS n FROM ledger_slot_sets WHERE escrow_id = '{legacy}'")
    invalidated = copy4.truth.inferences.filter((pl.col("escrow_id") == legacy) & (pl.col("status") == "invalidated"))
    assert sets["n"][0] == invalidated.height > 0


def test_cross_checks_list_the_planted_disagreement_only(ledger_wh, copy4):
    _, con, _ = ledger_wh
    planted = copy4.truth.planted["ledger"]["miss_disagreement"]
    rows = fetch_frame(con, "SELECT * FROM tracker_disagreements").to_dicts()
    assert len(rows) == 1
    row = rows[0]
    assert (row["epoch_id"], row["escrow_id"], row["participant"]) == (
        planted["epoch_id"],
        planted["escrow_id"],
        planted["participant"],
    )
    assert row["check_name"] == "protocol_misses vs timed_out" and row["difference"] == 1
    # every other (escrow, participant) agrees with the replayed session storage
    inf = copy4.truth.inferences
    session = inf.group_by("epoch_id", "executor").agg(invalidated=(pl.col("status") == "invalidated").sum())
    tracker = fetch_frame(con, "SELECT epoch_id, participant AS executor, protocol_invalid FROM tracker_participants")
    joined = tracker.join(session, on=["epoch_id", "executor"], how="left").with_columns(
        pl.col("invalidated").fill_null(0)
    )
    assert (joined["protocol_invalid"] == joined["invalidated"]).all()


def _expected_findings(truth: pl.DataFrame) -> set[tuple]:
    out = set()
    for r in truth.iter_rows(named=True):
        delivered = r["delivered"] - r["warmup_probes"]
        reached = delivered + r["unfinished_refused"] + r["unfinished_execution"]
        rules = {
            "slow_decode": (r["slow_decode"], r["delivered_outside_poc"], 0.10),
            "chain_recorded_invalid": (r["protocol_invalid"], r["assigned_nonces"], 0.01),
            "chain_recorded_misses": (r["protocol_misses"], r["assigned_nonces"], 0.01),
            "logprobs_not_token_ids": (r["logprobs_decoded"], delivered, 0.001),
            "execution_timeouts": (r["unfinished_execution"], reached, 0.01),
        }
        for code, (part, whole, warn) in rules.items():
            if whole >= 20 and part > 0 and part >= warn * whole:
                out.add((r["epoch_id"], r["participant"], code))
    return out


def test_findings_recomputed_with_the_20_minimum(ledger_wh, copy4):
    _, con, _ = ledger_wh
    codes = (
        "slow_decode",
        "chain_recorded_invalid",
        "chain_recorded_misses",
        "logprobs_not_token_ids",
        "execution_timeouts",
    )
    found = fetch_frame(con, "SELECT epoch_id, participant, code, whole FROM tracker_findings")
    assert (found["whole"] >= 20).all()
    got = {(r["epoch_id"], r["participant"], r["code"]) for r in found.iter_rows(named=True) if r["code"] in codes}
    want = _expected_findings(copy4.truth.tracker)
    assert got == want and len(want) > 5
    small = copy4.truth.tracker.filter(pl.col("assigned_nonces") < 20)
    for r in small.iter_rows(named=True):  # never a protocol finding below 20 assigned nonces
        assert (r["epoch_id"], r["participant"], "chain_recorded_invalid") not in got


def test_tracker_evidence(ledger_wh, copy4, timeline):
    _, con, _ = ledger_wh
    focal = timeline.focal_host
    truth = copy4.truth.tracker.filter(pl.col("participant") == focal).sort("epoch_id")
    result = compute("tracker", con, host=focal, command="gonka-evidence evidence tracker")
    rows = result.rows
    assert rows.columns[:4] == ["epoch", "participant", "assigned_nonces", "delivered"]
    assert rows["epoch"].to_list() == truth["epoch_id"].to_list()
    assert rows["assigned_nonces"].to_list() == truth["assigned_nonces"].to_list()
    assert rows["slow_decode"].to_list() == truth["slow_decode"].to_list()
    assert rows["protocol_invalid"].to_list() == truth["protocol_invalid"].to_list()
    for got, r in zip(rows.iter_rows(named=True), truth.iter_rows(named=True), strict=True):
        assert got["slow_decode_share"] == pytest.approx(r["slow_decode"] / r["delivered_outside_poc"])
        assert got["protocol_misses_share"] == pytest.approx(r["protocol_misses"] / r["assigned_nonces"])
    assert len(result.stats["disagreements"]) == 1

    everyone = compute("tracker", con, host=None, epoch=3, all_participants=True, command="x")
    n = copy4.truth.tracker.filter(pl.col("epoch_id") == 3).height
    assert everyone.rows["rank"].to_list() == list(range(1, n + 1))

    with pytest.raises(EvidenceError, match=r"^epoch 4 open .*: a comparison over an open epoch is not evidence yet"):
        compute("tracker", con, host=focal, epoch=2, compare=4, command="x")
    side = compute("tracker", con, host=focal, epoch=2, compare=4, allow_open=True, command="x")
    assert side.rows["epoch"].to_list() == [2, 4]
    assert side.rows["provisional"].to_list() == [True, True] and side.params["closure"]["open_epochs"] == [4]
    assert set(side.stats["compare"]) >= {"slow_decode_share", "protocol_invalid_share"}
    with pytest.raises(EvidenceError):
        compute("tracker", con, host=focal, compare=4, command="x")
    with pytest.raises(EvidenceError):
        compute("tracker", con, host=None, command="x")


@pytest.mark.parametrize("version", [4, 7])
def test_other_schema_versions(timeline, tmp_path, version):
    """v4 keys have no flags; v7 keys say phase/terminal/timeout_action; both parse as maps. Over copy 2 (its
    ledger has slow decodes in the current schema, and both phases): the keys' schema, not the epochs, is checked."""
    from polars.testing import assert_frame_equal

    copy = timeline.copy(last_epoch=2).with_ledger_schema(version)
    store = copy.write_sqlite(tmp_path / "store", ledger=True)
    ingest(tmp_path / "w.duckdb", store)
    con = open_for_write(tmp_path / "w.duckdb")
    assert_frame_equal(view(con), expected(copy.truth.tracker), check_dtypes=False)
    if version == 4:
        assert copy.truth.tracker["slow_decode"].sum() == 0
    else:
        phases = fetch_frame(con, "SELECT DISTINCT phase FROM ledger_counters ORDER BY 1")["phase"].to_list()
        assert phases == ["normal", "poc"]
    con.close()


def test_ingest_json_api_and_chain(copy4, tmp_path):
    """Saved API responses (v6 nested, v7 flattened) and chain REST JSON give the same numbers."""
    from polars.testing import assert_frame_equal

    files = []
    for epoch, version in ((2, 6), (3, 7), (4, 6)):
        path = tmp_path / f"participants-{epoch}.json"
        path.write_text(json.dumps(copy4.ledger.api_response(epoch, version)))
        files.append(path)
        chain = tmp_path / f"chain-{epoch}.json"
        chain.write_text(json.dumps(copy4.ledger.chain_responses(epoch)))
        files.append(chain)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    files.append(bad)
    con = open_for_write(tmp_path / "w.duckdb")
    summary = ingest_json_files(con, files)
    assert summary.files == 7 and summary.quarantined == 1
    truth = expected(copy4.truth.tracker)
    got = view(con, "api")
    # flags in v7 counters come back the same way; protocol_only is not a v7 counter disposition
    assert_frame_equal(got.drop("protocol_only"), truth.drop("protocol_only"), check_dtypes=False)
    v6 = truth.filter(pl.col("epoch_id") != 3)
    assert got.filter(pl.col("epoch_id") != 3)["protocol_only"].to_list() == v6["protocol_only"].to_list()
    chain = fetch_frame(
        con,
        "SELECT epoch_id, participant, chain_missed, chain_invalid, chain_invalidated_inferences "
        "FROM tracker_participants ORDER BY ALL",
    )
    t = copy4.truth.tracker.sort("epoch_id", "participant")
    assert chain["chain_missed"].to_list() == t["protocol_misses"].to_list()
    assert chain["chain_invalidated_inferences"].to_list() == t["protocol_invalid"].to_list()
    llr = fetch_frame(con, "SELECT DISTINCT invalid_llr FROM chain_participant_stats WHERE invalid_llr IS NOT NULL")
    assert llr["invalid_llr"].to_list() == [pytest.approx(-1.234)]
    again = ingest_json_files(con, files[:2])  # a re-read replaces, never doubles
    assert again.quarantined == 0
    assert_frame_equal(view(con, "api").drop("protocol_only"), truth.drop("protocol_only"), check_dtypes=False)
    con.close()


def test_bad_ledger_input_is_quarantined_not_fatal(timeline, tmp_path, request):
    # copy 2: three escrows' blobs are all it changes (its ledger alone quarantines nothing, as copy 4's)
    store = timeline.copy(last_epoch=2).write_sqlite(tmp_path / "store", ledger=True)
    db = sqlite3.connect(store / "accounting.db")
    blobs = dict(db.execute("SELECT escrow_id, payload FROM accounting_escrows"))
    first, second, third = sorted(blobs)[:3]
    doc = json.loads(blobs[first])
    del doc["host_stats"]  # missing keys decode as zero
    doc["counters"].append({"key": [1, 2], "count": 5})  # unknown shape: not an object
    doc["counters"].append({"key": {"disposition": "finished_used", "weird": 1}, "count": 2})  # no slot
    doc["counters"][0]["key"]["brand_new_field"] = "kept"  # unknown extra field: kept, not quarantined
    db.execute("UPDATE accounting_escrows SET payload = ? WHERE escrow_id = ?", (json.dumps(doc).encode(), first))
    db.execute("UPDATE accounting_escrows SET payload = ? WHERE escrow_id = ?", (b"\x00garbage", second))
    db.commit()
    db.close()
    summary = ingest(tmp_path / "w.duckdb", store)
    assert summary.rows["ledger_quarantined"] == 4
    con = open_for_write(tmp_path / "w.duckdb")
    q = fetch_frame(
        con, "SELECT table_name, row_key, reason FROM quarantine WHERE table_name LIKE 'accounting%' ORDER BY ALL"
    )
    assert q.height == 4
    assert any("lacks host_stats" in r for r in q["reason"]) and any("not a JSON object" in r for r in q["reason"])
    escrows = fetch_frame(con, "SELECT escrow_id FROM ledger_escrows")["escrow_id"].to_list()
    assert second not in escrows and first in escrows and third in escrows
    kept = fetch_frame(
        con, f"SELECT extra_keys FROM ledger_counters WHERE escrow_id = '{first}' AND extra_keys IS NOT NULL"
    )
    assert kept.height == 1 and "brand_new_field" in kept["extra_keys"][0]
    misses = fetch_frame(con, f"SELECT sum(missed) AS n FROM ledger_host_stats WHERE escrow_id = '{first}'")
    assert misses["n"][0] is None  # no host stats in the blob: nothing stored, the view reads zero
    con.close()


def test_postgres_unknown_counter_key_and_leftover_blob(copy4, tmp_path, request):
    url = throwaway_database(request)
    copy4.write_postgres(url, ledger=True)
    with psycopg.connect(url) as conn:
        conn.execute("INSERT INTO accounting_escrow_counters VALUES ('2100', 'gw-a', 'bad1', '\"just a string\"', 3)")
        conn.execute("INSERT INTO accounting_escrow_counters VALUES ('orphan', 'gw-a', 'x', '{\"slot_id\": 0}', 3)")
        conn.execute("INSERT INTO accounting_escrows VALUES ('leftover', 2, 'm', '{}')")
    summary = ingest(tmp_path / "w.duckdb", url)
    # the bad key, the leftover legacy blob, and the orphan (a counter of no state row: named, not skipped)
    assert summary.rows["ledger_quarantined"] == 3
    con = open_for_write(tmp_path / "w.duckdb")
    assert fetch_frame(con, "SELECT table_name FROM quarantine WHERE row_key = 'orphan'").rows() == [
        ("accounting_escrow_counters",)
    ]
    from polars.testing import assert_frame_equal

    assert_frame_equal(view(con), expected(copy4.truth.tracker), check_dtypes=False)
    con.close()


def test_reingest_is_idempotent_and_an_older_copy_does_not_win(timeline, copy4, tmp_path):
    from polars.testing import assert_frame_equal

    store4 = copy4.write_sqlite(tmp_path / "store4", ledger=True)
    store3 = timeline.copy(last_epoch=3).write_sqlite(tmp_path / "store3", ledger=True)
    warehouse = tmp_path / "w.duckdb"
    ingest(warehouse, store3)
    ingest(warehouse, store4)
    con = open_for_write(warehouse)
    first = view(con)
    counters = fetch_frame(con, "SELECT count(*) AS n FROM ledger_counters")["n"][0]
    con.close()
    ingest(warehouse, store4)
    ingest(warehouse, store3)  # older copy of epochs 1-3: epoch 3 escrows are behind, epoch 1 is new history
    con = open_for_write(warehouse)
    again = view(con)
    assert fetch_frame(con, "SELECT count(*) AS n FROM ledger_counters")["n"][0] >= counters
    assert_frame_equal(again.filter(pl.col("epoch_id") >= 2), first.filter(pl.col("epoch_id") >= 2))
    assert_frame_equal(again.filter(pl.col("epoch_id") >= 2), expected(copy4.truth.tracker), check_dtypes=False)
    assert 1 in again["epoch_id"].to_list()
    con.close()


def test_ingest_json_cli(copy4, tmp_path):
    from typer.testing import CliRunner

    from pipeline.cli.app import app

    path = tmp_path / "p.json"
    path.write_text(json.dumps(copy4.ledger.api_response(3, 7)))
    result = CliRunner().invoke(app, ["ingest-json", str(path), "--warehouse", str(tmp_path / "w.duckdb")])
    assert result.exit_code == 0, result.output
    assert "api_participants" in result.output
    missing = CliRunner().invoke(
        app, ["ingest-json", str(tmp_path / "nope.json"), "--warehouse", str(tmp_path / "w.duckdb")]
    )
    assert missing.exit_code == 1 and "no such file" in missing.output
