"""Copies from other builds (docs/sources.md: checkpoints, accounting ledger, payloads), in both layouts:
JSON checkpoints, HostStatsProto fields 7/8 by wire type, PR #1757's ledger counters, self-verdicts,
`.json.zst` payload files and what else a payload directory holds, the v0.2.12 single-file store, and a
row-layout ledger without the legacy blob table."""

from __future__ import annotations

import shutil

import polars as pl
import psycopg
import pytest
import zstandard
from polars.testing import assert_frame_equal

from pipeline.ingest.ledger import LEDGER_MARKER_KEY
from pipeline.sources.store import SourceError, open_store
from pipeline.sources.store.payloads import NOT_A_PAYLOAD
from pipeline.warehouse.database import open_for_write
from tests.helpers import evidence, frame, ingest, throwaway_database

VIEWS = {
    "snapshot_host_stats": "escrow_id, slot_id",
    "snapshot_model_stats": "escrow_id, slot_id, model",
    "validations": "escrow_id, nonce, tx_index",
    "tracker_cross_checks": "escrow_id, participant, check_name",
}


@pytest.fixture(scope="module")
def copy4(timeline):
    return timeline.copy(last_epoch=4)


@pytest.fixture(scope="module")
def both(copy4, tmp_path_factory, request, pg_copy_templates):
    """The same copy ingested from SQLite and from PostgreSQL (ledgers included)."""
    base = tmp_path_factory.mktemp("other-builds")
    store = copy4.write_sqlite(base / "store", ledger=True)
    # copy4 in PostgreSQL with its ledger: a copy of the session's template of it (tests/conftest.py)
    url = throwaway_database(request, pg_copy_templates(4, ledger=True))
    ingest(base / "sqlite.duckdb", store)
    ingest(base / "pg.duckdb", url)
    return {"sqlite": base / "sqlite.duckdb", "postgres": base / "pg.duckdb", "store": store, "url": url}


def _view(wh, name: str) -> pl.DataFrame:
    return frame(wh, f"SELECT * FROM {name} ORDER BY {VIEWS[name]}")


def test_both_layouts_give_identical_views_of_the_other_builds(both):
    for name in VIEWS:
        a, b = _view(both["sqlite"], name), _view(both["postgres"], name)
        assert a.height > 0, name
        assert_frame_equal(a, b, check_exact=True)


@pytest.mark.parametrize("layout", ["sqlite", "postgres"])
def test_checkpoint_formats_and_counters_as_the_writer_wrote_them(both, copy4, layout):
    planted = copy4.truth.planted
    stats = _view(both[layout], "snapshot_host_stats")
    formats = dict(stats.select("escrow_id", "checkpoint_format").unique().iter_rows())
    assert {e for e, f in formats.items() if f == "json"} == set(planted["json_checkpoint_escrows"]) != set()
    assert set(formats.values()) == {"json", "protobuf_rooted"}  # the snapshot-import line prefixes the rest
    # Every slot's host stats as the simulation had them at the checkpoint, #1757 counters NULL elsewhere.
    want = copy4.truth.snapshot_host_stats.sort("escrow_id", "slot_id")
    got = stats.select(want.columns)
    assert_frame_equal(got, want, check_dtypes=False)
    counters = [e for e, line in planted["host_stats_lines"].items() if line == "counters"]
    with_counters = stats.filter(pl.col("validated").is_not_null())
    assert with_counters["escrow_id"].unique().to_list() == counters
    assert with_counters["finished"].sum() > 0 and with_counters["validated"].sum() > 0
    # The counters agree with the diff log, as missed / invalid / cost do.
    assert (with_counters["validated"] == with_counters["log_validated"]).all()
    assert (with_counters["finished"] == with_counters["log_finished"]).all()
    assert with_counters["agrees_log"].all()
    assert (
        stats.filter(pl.col("validated").is_null())[["log_validated", "log_finished"]].null_count().row(0)
        == (stats.filter(pl.col("validated").is_null()).height,) * 2
    )
    # The per-model rows of the model_stats line.
    models = _view(both[layout], "snapshot_model_stats")
    want_models = copy4.truth.snapshot_model_stats.sort("escrow_id", "slot_id", "model")
    assert want_models.height > 0
    assert_frame_equal(models.select(want_models.columns), want_models, check_dtypes=False)


def test_a_counter_the_diff_log_contradicts_is_a_disagreement(both, tmp_path):
    wh = tmp_path / "w.duckdb"
    shutil.copy(both["sqlite"], wh)
    con = open_for_write(wh)
    try:
        escrow, slot = con.execute(
            "SELECT escrow_id, slot_id FROM raw_snapshot_host_stats WHERE finished > 0 ORDER BY 1, 2 LIMIT 1"
        ).fetchone()
        con.execute(
            "UPDATE raw_snapshot_host_stats SET finished = finished + 1 WHERE escrow_id = ? AND slot_id = ?",
            [escrow, slot],
        )
        bad = con.execute("SELECT escrow_id, slot_id FROM snapshot_host_stats_disagreements").fetchall()
    finally:
        con.close()
    assert (escrow, slot) in bad


@pytest.mark.parametrize("layout", ["sqlite", "postgres"])
def test_ledger_counters_of_pr_1757_checked_against_the_diff_log(both, copy4, layout):
    counters = [e for e, line in copy4.truth.planted["host_stats_lines"].items() if line == "counters"]
    checks = _view(both[layout], "tracker_cross_checks")
    new = checks.filter(
        pl.col("check_name").is_in(["protocol_validated vs validated", "protocol_finished vs finished"])
    )
    assert set(new["escrow_id"]) == set(counters)
    assert new["agrees"].all() and new["tracker"].sum() > 0
    stored = frame(both[layout], "SELECT escrow_id, protocol_validated, protocol_finished FROM ledger_host_stats")
    assert set(stored.filter(pl.col("protocol_finished").is_not_null())["escrow_id"]) == set(counters)


def test_a_validated_count_that_dropped_after_the_ledgers_flush_is_no_disagreement(both, tmp_path):
    """PR #1757's `validated` loses an inference's credited passes when it is challenged: a ledger flushed before
    the challenge holds more than the whole diff log gives. The cross-check reads the log up to the ledger's
    latest_nonce, so that decrease is not a disagreement; a ledger value the log never had still is."""
    wh = tmp_path / "w.duckdb"
    shutil.copy(both["sqlite"], wh)
    con = open_for_write(wh)
    try:
        # an inference of a ledger escrow that was passed, then challenged
        escrow, slot, participant, challenge = con.execute(
            "SELECT c.escrow_id, c.executor_slot, s.address, c.challenge_nonce FROM inference_counter_nonces c "
            "JOIN ledger_escrows USING (escrow_id) "
            "JOIN escrow_slots s ON s.escrow_id = c.escrow_id AND s.slot_id = c.executor_slot "
            "WHERE len(c.pass_nonces) > 0 AND c.challenge_nonce > c.pass_nonces[1] ORDER BY 1, 4 LIMIT 1"
        ).fetchone()

        def flush(upto: int) -> None:
            """The ledger of a #1757 build as flushed at nonce `upto`: its counters and latest_nonce."""
            con.execute(
                "UPDATE ledger_host_stats h SET protocol_validated = coalesce(k.validated, 0),"
                "  protocol_finished = coalesce(k.finished, 0) FROM ledger_host_stats h2 LEFT JOIN ("
                "  SELECT c.executor_slot AS slot_id,"
                "         sum(CASE WHEN coalesce(c.challenge_nonce <= $n, FALSE)"
                "                  THEN coalesce(c.cleared_nonce <= $n, FALSE)::BIGINT"
                "                  ELSE len(list_filter(c.pass_nonces, lambda x: x <= $n)) END)::BIGINT AS validated,"
                "         count(*) FILTER (WHERE c.finish_nonce <= $n) AS finished"
                "  FROM inference_counter_nonces c WHERE c.escrow_id = $e GROUP BY ALL) k USING (slot_id) "
                "WHERE h.escrow_id = $e AND h2.escrow_id = $e AND h.slot_id = h2.slot_id",
                {"n": upto, "e": escrow},
            )
            con.execute("UPDATE ledger_escrows SET latest_nonce = ? WHERE escrow_id = ?", [upto, escrow])

        def check(name: str) -> tuple:
            return con.execute(
                "SELECT tracker, session, agrees FROM tracker_cross_checks "
                "WHERE escrow_id = ? AND participant = ? AND check_name = ?",
                [escrow, participant, name],
            ).fetchone()

        flush(challenge)
        challenged, _, agrees = check("protocol_validated vs validated")
        assert agrees
        flush(challenge - 1)  # the ledger as flushed just before the challenge; the diff log goes on
        flushed, _, agrees = check("protocol_validated vs validated")
        assert flushed > challenged  # the challenge took the passes back: the count decreased after the flush
        assert agrees and check("protocol_finished vs finished")[2]
        # a real inconsistency: the ledger states one validated more than the log up to its nonce
        con.execute(
            "UPDATE ledger_host_stats SET protocol_validated = protocol_validated + 1 "
            "WHERE escrow_id = ? AND slot_id = ?",
            [escrow, slot],
        )
        tracker, session, agrees = check("protocol_validated vs validated")
        assert not agrees and tracker - session == 1
        bad = con.execute(
            "SELECT check_name FROM tracker_disagreements WHERE escrow_id = ? AND participant = ?",
            [escrow, participant],
        ).fetchall()
        assert ("protocol_validated vs validated",) in bad and ("protocol_finished vs finished",) not in bad
    finally:
        con.close()


def test_ledger_counters_follow_the_copy_further_along_not_the_greatest(both, tmp_path):
    """`validated` can decrease (a challenge takes an inference's passes back): a later copy's smaller value
    replaces the stored one (docs/sources.md, accounting ledger: merged by nonce, not GREATEST)."""
    from pipeline.ingest.ledger import write_ledger
    from pipeline.ingest.runs import ingest_run
    from pipeline.sources.store.accounting import read_sqlite_ledger

    wh = tmp_path / "w.duckdb"
    shutil.copy(both["sqlite"], wh)
    store = open_store(str(both["store"]))
    try:
        read = read_sqlite_ledger(store)
    finally:
        store.close()
    assert read is not None
    target = next(h for h in read.host_stats if (h["protocol_validated"] or 0) > 0)
    escrow = next(e for e in read.escrows if e["escrow_id"] == target["escrow_id"])
    target["protocol_validated"] -= 1
    escrow["latest_nonce"] += 1
    con = open_for_write(wh)
    try:
        with ingest_run(con, source_id="later", kind="sqlite", display="later copy") as run:
            write_ledger(con, read, run)
        got = con.execute(
            "SELECT protocol_validated FROM ledger_host_stats WHERE escrow_id = ? AND slot_id = ?",
            [target["escrow_id"], target["slot_id"]],
        ).fetchone()[0]
    finally:
        con.close()
    assert got == target["protocol_validated"]


@pytest.mark.parametrize("layout", ["sqlite", "postgres"])
def test_self_verdicts_are_flagged_and_counted(both, copy4, layout):
    truth = copy4.truth
    own = (
        truth.txs.filter(pl.col("kind").is_in(["validation", "vote"]))
        .join(truth.inferences.select("escrow_id", "inference_id", "executor"), on=["escrow_id", "inference_id"])
        .filter(pl.col("address") == pl.col("executor"))
    )
    flagged = _view(both[layout], "validations").filter(pl.col("self_verdict"))
    assert own.height > 0
    assert sorted(flagged.select("escrow_id", "nonce", "tx_index").iter_rows()) == sorted(
        own.select("escrow_id", "nonce", "tx_index").iter_rows()
    )
    assert flagged["counted"].all()  # replayed as upstream did: it counted
    host = copy4.focal_host
    epoch = int(own["epoch_id"][0])
    con = open_for_write(both[layout])
    try:
        summary = evidence(con, "epoch-summary", host, epoch=epoch)
        validators = evidence(con, "validators", host, epoch=epoch)
    finally:
        con.close()
    mine = own.filter(pl.col("executor") == host)
    assert summary.rows.filter(pl.col("epoch") == epoch)["self_verdicts"].to_list() == [mine.height]
    assert validators.rows.filter(pl.col("validator") == host)["self_verdicts"].sum() == mine.height
    assert validators.rows.filter(pl.col("validator") != host)["self_verdicts"].sum() == 0


def test_zst_payload_files_win_and_strays_are_named(copy4, tmp_path):
    store = copy4.write_sqlite(tmp_path / "store")
    escrow = copy4.truth.planted["json_zst_escrows"][0]
    epoch = escrow[0]  # escrow ids are epoch * 1000 + 100 + index
    folder = store / "payloads" / epoch / escrow
    plains = list(folder.glob("*.json"))
    assert len(plains) == 1 and len(list(folder.glob("*.json.zst"))) > 1  # one answer kept a plain .json too
    # Let the plain .json differ from the .zst of the same answer: the .zst is what is read.
    plain = plains[0]
    plain.write_bytes(b'{"prompt_payload": "bm90IHJlYWQ=", "response_payload": "bm90IHJlYWQ="}')
    (folder / "notes.txt").write_text("operator's note")
    (store / "payloads" / "README").write_text("x")
    (folder / "7.json.gz").write_bytes(b"\x1f\x8b")
    (folder / "999999.json.zst").write_bytes(b"not zstd")
    summary = ingest(tmp_path / "w.duckdb", store)
    q = frame(tmp_path / "w.duckdb", "SELECT table_name, row_key, reason FROM quarantine ORDER BY row_key")
    strays = q.filter(pl.col("table_name") == "payload_files")
    assert strays.select("row_key", "reason").rows() == [
        (f"{epoch}/{escrow}/7.json.gz", NOT_A_PAYLOAD),
        (f"{epoch}/{escrow}/notes.txt", NOT_A_PAYLOAD),
        ("README", NOT_A_PAYLOAD),
    ]
    bad = q.filter(pl.col("row_key") == f"{epoch}/{escrow}/999999")
    assert bad["reason"].to_list() == [bad["reason"][0]] and "payload file is not zstd" in bad["reason"][0]
    checks = frame(
        tmp_path / "w.duckdb",
        f"SELECT inference_id, payload_format, temperature, complete FROM answer_checks WHERE escrow_id = '{escrow}'",
    )
    inference = int(plain.name.split(".")[0])
    read = checks.filter(pl.col("inference_id") == inference)
    truth = copy4.truth.answers.filter((pl.col("escrow_id") == escrow) & (pl.col("inference_id") == inference))
    assert read["payload_format"].to_list() == ["json_zst"]
    assert read.select("temperature", "complete").rows() == truth.select("temperature", "complete").rows()
    all_truth = copy4.truth.answers.filter(pl.col("escrow_id") == escrow)
    assert set(checks["payload_format"]) == {"json_zst"} and checks.height == all_truth.height + 1  # + 999999
    (payload_files,) = [a for a in summary.accounting if a.input == "payload files"]
    assert payload_files.deduplicated == 1  # the plain .json beside the .json.zst (a fresh warehouse knows no answer)
    everything = frame(tmp_path / "w.duckdb", "SELECT DISTINCT payload_format FROM answer_checks")
    assert set(everything["payload_format"]) == {"json", "json_zst"}


def test_a_zst_payload_decompressing_past_the_limit_is_quarantined(tmp_path, monkeypatch):
    from pipeline.sources.store import payloads
    from pipeline.sources.store.payloads import PayloadFile, read_payload_file

    monkeypatch.setattr(payloads, "MAX_PAYLOAD_FILE_BYTES", 1000)
    path = tmp_path / "1.json.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(b'{"prompt_payload": "' + b"A" * 4000 + b'"}'))
    got = read_payload_file(PayloadFile(1, "e", 1, path, path.stat().st_size, "json_zst"))
    assert got.problem == "payload file larger than 1,000 bytes once decompressed"


@pytest.mark.parametrize("as_file", [False, True], ids=["directory", "file"])
def test_a_v0_2_12_single_file_store_is_refused_by_name(tmp_path, as_file):
    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "devshard.db").write_bytes(b"SQLite format 3\x00")
    with pytest.raises(SourceError) as err:
        open_store(str(folder / "devshard.db" if as_file else folder))
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(folder / "devshard.db"))
    assert "v0.2.12-era single-file devshard store" in message and "carry no epoch" in message


def test_a_row_layout_ledger_without_the_legacy_table_is_stamped(both, tmp_path, pg_database, pg_copy_templates):
    """`accounting_escrows` is a leftover, absent from a ledger created in the row layout (docs/sources.md);
    such a ledger is a full ledger, so an unchanged re-ingest does not read it again."""
    from pipeline.sources.store.accounting import ledger_marker
    from pipeline.sources.store.postgres_markers import markers_query

    url = pg_database(template=pg_copy_templates(4, ledger=True))  # copy4 with its ledger (tests/conftest.py)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE accounting_escrows")
    store = open_store(url)
    try:
        marker = ledger_marker(store)
    finally:
        store.close()
    assert marker  # a digest, not "" (the partial-ledger answer)
    tables = {"devshard_sessions", "accounting_escrow_state", "accounting_meta", "accounting_writers"}
    assert markers_query(tables) is not None
    wh = tmp_path / "w.duckdb"
    first = ingest(wh, url)
    assert first.rows["ledger_escrows"] > 0
    stamp = frame(wh, f"SELECT value FROM warehouse_meta WHERE key = '{LEDGER_MARKER_KEY}'")["value"][0]
    assert stamp.endswith(":" + marker)
    again = ingest(wh, url)
    assert "ledger_escrows" not in again.rows  # not read again


def test_a_devshard_db_beside_epoch_files_is_named_by_doctor(copy4, tmp_path):
    store = copy4.write_sqlite(tmp_path / "store", payloads=False)
    (store / "devshard.db").write_bytes(b"SQLite format 3\x00")
    described = open_store(str(store))
    try:
        unrecognised = described.describe().unrecognised
    finally:
        described.close()
    assert [u for u in unrecognised if u.startswith("devshard.db")] == [
        "devshard.db: not read, a v0.2.12-era single-file devshard store (before the per-epoch layout, #1145), "
        "not supported: its sessions and diffs carry no epoch"
    ]
