"""Copies of every upstream release line, in both layouts: the drain rules, reason-3 error misses,
migration lists, older ledgers and checkpoints (including an escrow joined by import) are read as
defined, and PostgreSQL and SQLite give identical views."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from typer.testing import CliRunner

from pipeline.cli.app import app
from pipeline.samples.release_lines import SAMPLE_LINES
from pipeline.sources.store import open_store
from pipeline.warehouse.database import open_for_write
from tests.helpers import con_frame, frame, ingest

# Public views compared between layouts, with their ordering keys.
KEYS = {
    "inferences": "escrow_id, inference_id",
    "txs": "escrow_id, nonce, tx_index",
    "validations": "escrow_id, nonce, tx_index",
    "escrows": "escrow_id",
    "snapshot_host_stats": "escrow_id, slot_id",
    "replay_disagreements": "escrow_id, inference_id, field",
    "tracker_participants": "epoch_id, participant, model",
    "answer_checks": "escrow_id, inference_id",  # payloads: payload_storage.inference_id INT or BIGINT
    "snapshot_model_stats": "escrow_id, slot_id, model",
}
# Columns that say which layout a row came from, so differ between the layouts by definition.
LAYOUT_COLUMNS = {"answer_checks": ["payload_format"]}
RECOGNISED = {  # (PostgreSQL database, SQLite epoch file) as doctor names them
    "v0.2.13": ("v0.2.13", "pre-squash epoch list"),
    "v0.2.14": ("v0.2.14", "pre-squash epoch list"),
    "ha": ("HA line", "squashed epoch list"),
    "snapshot-import": ("snapshot-import line", "squashed epoch list with snapshot import"),
}
TRUTH_COLUMNS = [
    "escrow_id",
    "inference_id",
    "executor",
    "status",
    "challenged",
    "sealed",
    "finished",
    "drained",
    "pre_drain_status",
    "drain_outcome",
    "miss_kind",
    "votes_valid",
    "votes_invalid",
]


def _views(wh) -> dict[str, pl.DataFrame]:
    con = open_for_write(wh)  # one connection for all the views: opening one costs as much as a view
    try:
        return {v: con_frame(con, f"SELECT * FROM {v} ORDER BY {k}") for v, k in KEYS.items()}
    finally:
        con.close()


@pytest.fixture(scope="module")
def line_copies(timeline):
    return {name: timeline.copy(last_epoch=4, line=name) for name in SAMPLE_LINES}


@pytest.fixture(scope="module")
def host_a(line_copies, tmp_path_factory):
    """The warehouse of a line's copy as host-a holds it (SQLite, no ledger), each ingested once: tests read
    them, or copy one to add to it."""
    made: dict[str, Path] = {}

    def warehouse(line: str) -> Path:
        if line not in made:
            root = tmp_path_factory.mktemp(line)
            ingest(root / "w.duckdb", line_copies[line].write_sqlite(root / "host-a"))
            made[line] = root / "w.duckdb"
        return made[line]

    return warehouse


BETWEEN = ("v0.2.14", "ha")
# The oldest line (pre-squash SQLite lists, the fewest PostgreSQL tables, the older ledger) and the newest (an
# escrow joined by import) in the default tier; the two lines between them in the heavy tier;
# stands in the default tier: those two cases of the same sweep,
# tests/sources/store/test_release_lines.py::test_each_release_line_reads_as_defined_in_both_layouts,
# each line's tables and migration lists known in both layouts,
# tests/sources/store/test_release_lines.py::test_each_release_line_is_recognised_in_both_layouts,
# each line's SQLite copy read to its truth (drain rules, reason-3 misses, imports),
# tests/samples/test_samples.py::test_each_shipped_copy_ingests_to_its_truth
LINES = [pytest.param(n, marks=[pytest.mark.heavy] if n in BETWEEN else []) for n in SAMPLE_LINES]


@pytest.mark.parametrize("line", LINES)
def test_each_release_line_reads_as_defined_in_both_layouts(line, tmp_path, line_copies, pg_database):
    copy = line_copies[line]
    store = copy.write_sqlite(tmp_path / "store", ledger=True)
    url = pg_database()
    copy.write_postgres(url, ledger=True)
    sqlite_summary = ingest(tmp_path / "a.duckdb", store)
    pg_summary = ingest(tmp_path / "b.duckdb", url)

    a, b = _views(tmp_path / "a.duckdb"), _views(tmp_path / "b.duckdb")
    for name in KEYS:
        # An older PostgreSQL ledger lacks set tables that the SQLite blob of the same ledger has.
        if name != "tracker_participants" or not copy.release_line.ledger_tables_absent:
            layout = LAYOUT_COLUMNS.get(name, [])
            assert_frame_equal(a[name].drop(layout), b[name].drop(layout), check_exact=True)
    assert b["tracker_participants"].height > 0
    assert set(b["answer_checks"]["payload_format"]) == {"postgres"}
    assert set(a["answer_checks"]["payload_format"]) <= {"json", "json_zst"}

    want = (
        copy.truth.inferences.rename({"has_finish_tx": "finished"})
        .select(TRUTH_COLUMNS)
        .sort("escrow_id", "inference_id")
    )
    assert_frame_equal(a["inferences"].select(TRUTH_COLUMNS), want, check_dtypes=False)
    assert a["replay_disagreements"].height == 0
    # The three drain rules are all in the copy, and none of their records is an answer or a miss.
    drained = a["inferences"].filter(pl.col("drained"))
    assert set(drained["drain_outcome"]) == {"unchanged", "refunded", "paid"}
    assert not drained["finished"].any() and drained["miss_kind"].is_null().all()
    # Checkpoint host stats: what the host wrote, and the diff log agrees wherever it holds the whole history.
    stats = a["snapshot_host_stats"]
    want = copy.truth.snapshot_host_stats.sort("escrow_id", "slot_id")  # PR #1757's counters included
    assert_frame_equal(stats.select(want.columns), want, check_dtypes=False)
    assert stats.filter(~pl.col("history_before_import"))["agrees_log"].all()
    imported = copy.truth.planted["imported"]
    assert stats.filter(pl.col("history_before_import"))["escrow_id"].unique().to_list() == [
        i["escrow_id"] for i in imported
    ]
    if imported:
        assert not stats.filter(pl.col("history_before_import"))["agrees_log"].all()  # shown, not hidden
        assert sqlite_summary.snapshot_disagreements_imported > 0
    # Nothing but the planted unknown transaction kinds is quarantined: no gap before an import.
    for wh in (tmp_path / "a.duckdb", tmp_path / "b.duckdb"):
        reasons = frame(wh, "SELECT DISTINCT reason FROM quarantine")["reason"].to_list()
        assert all(r.startswith("unknown tx kind") for r in reasons), reasons
    assert sqlite_summary.snapshot_disagreements == pg_summary.snapshot_disagreements

    for source, expected in ((url, RECOGNISED[line][0]), (str(store), RECOGNISED[line][1])):
        described = open_store(source)
        try:
            d = described.describe()
        finally:
            described.close()
        assert any(v.split(" (")[0] == expected for k, v in d.release_lines.items() if k != "_meta.db"), d.release_lines
        assert "0 undecodable" in d.snapshots and f"{len(imported)} escrows joined by import" in d.snapshots
        assert d.unrecognised == []  # every table the line creates is known


@pytest.mark.parametrize("line", BETWEEN)
def test_each_release_line_is_recognised_in_both_layouts(line, tmp_path, line_copies, pg_database):
    """The copy (with its ledger) of each line whose whole read is in the heavy tier, as doctor describes it: the
    line named in both layouts, every table it creates known, no snapshot undecodable, no escrow joined by import.
    The other lines' cases of the sweep above check the same."""
    copy = line_copies[line]
    store = copy.write_sqlite(tmp_path / "store", ledger=True)
    url = pg_database()
    copy.write_postgres(url, ledger=True)
    imported = copy.truth.planted["imported"]
    for source, expected in ((url, RECOGNISED[line][0]), (str(store), RECOGNISED[line][1])):
        described = open_store(source)
        try:
            d = described.describe()
        finally:
            described.close()
        named = {v.split(" (")[0] for k, v in d.release_lines.items() if k != "_meta.db"}
        assert named == {expected}, d.release_lines
        assert "0 undecodable" in d.snapshots and f"{len(imported)} escrows joined by import" in d.snapshots
        assert d.unrecognised == []  # every table the line creates is known


def test_reason_3_timeouts_are_error_misses(line_copies, host_a):
    copy = line_copies["ha"]
    planted = pl.DataFrame(copy.truth.planted["reason3_error_misses"])
    assert planted.height > 0
    wh = host_a("ha")
    got = frame(
        wh,
        "SELECT i.epoch_id, i.escrow_id, i.inference_id, i.status, i.miss_kind, t.kind, t.reason "
        "FROM inferences i JOIN txs t ON t.escrow_id = i.escrow_id AND t.inference_id = i.inference_id "
        "AND t.kind = 'timeout' WHERE t.reason = 'error' ORDER BY ALL",
    )
    assert got.select("epoch_id", "escrow_id", "inference_id").to_dicts() == planted.sort(pl.all()).to_dicts()
    assert set(got["miss_kind"]) == {"error_miss"} and set(got["status"]) == {"timed_out"}


def target_status(copy, target) -> str:
    row = copy.truth.inferences.filter(
        (pl.col("escrow_id") == target["escrow_id"]) & (pl.col("inference_id") == target["inference_id"])
    )
    return row["status"][0]


def test_copies_disagreeing_on_a_drained_record_are_reported_not_resolved(tmp_path, line_copies, host_a):
    copy = line_copies["ha"]
    target = next(d for d in copy.truth.planted["drained"] if d["escrow_id"].endswith("100") and d["epoch_id"] == 2)
    rows = [dict(r) for r in copy.tables["sealed_inferences"]]
    for r in rows:
        if (r["escrow_id"], r["inference_id"]) == (target["escrow_id"], target["inference_id"]):
            r["sealed_status"] = 6  # this host claims the record was refunded
    other = dataclasses.replace(copy, tables={**copy.tables, "sealed_inferences": rows})
    wh = tmp_path / "w.duckdb"
    shutil.copy(host_a("ha"), wh)  # the copy ingested from host-a
    ingest(wh, other.write_sqlite(tmp_path / "host-b"))
    where = f"escrow_id = '{target['escrow_id']}' AND inference_id = {target['inference_id']}"
    row = frame(wh, f"SELECT drained, drain_outcome, status FROM inferences WHERE {where}").row(0, named=True)
    # One seal stays (a seal is final: the one of the source that sorts first, host-a, whatever the
    # order, docs/ingest.md); the outcome is left unknown rather than picked.
    assert row == {"drained": True, "drain_outcome": None, "status": target_status(copy, target)}
    fields = frame(wh, f"SELECT field FROM replay_disagreements WHERE {where}")["field"].to_list()
    assert fields == ["drained_between_copies"]
    reasons = frame(wh, "SELECT reason FROM quarantine WHERE table_name = 'sealed_inferences'")["reason"].to_list()
    assert len(reasons) == 1 and "copies disagree on the sealed row: sealed_status" in reasons[0]
    shown = CliRunner().invoke(app, ["doctor", str(tmp_path / "host-b"), "--warehouse", str(wh)])
    assert shown.exit_code == 0, shown.output
    assert "1 sealed rows disagree with another copy (1 of drained records" in " ".join(shown.output.split())
    # The same copy from a third place agrees, and adds nothing.
    ingest(wh, copy.write_sqlite(tmp_path / "host-c"))
    assert frame(wh, "SELECT count(*) AS n FROM quarantine WHERE table_name = 'sealed_inferences'")["n"][0] == 1


# --- hand-edited copies: what the generator never writes, read as docs/data-model.md (replay) defines it ----


def _escrow(copy, escrow_id: str) -> dict:
    return next(s for s in copy.tables["sessions"] if s["escrow_id"] == escrow_id)


def _settlement_nonce(copy, escrow_id: str) -> int:
    from pipeline.sources.decode import devshard_pb2 as pb

    session = _escrow(copy, escrow_id)
    for d in copy.tables["diffs"]:
        if d["escrow_id"] == escrow_id and any(
            t.WhichOneof("tx") == "finalize_round" for t in pb.DiffContent.FromString(d["txs_proto"]).txs
        ):
            return d["nonce"] + len(json.loads(session["group_json"]))
    raise AssertionError(f"{escrow_id} never finalizes")


def _all_accept(copy, escrow_id: str):
    from pipeline.sources.decode import devshard_pb2 as pb

    n = len(json.loads(_escrow(copy, escrow_id)["group_json"]))
    return [pb.TimeoutVote(voter_slot=s, accept=True, signature=b"s") for s in range(n)]


def _drained(copy, escrow_id: str, pre: str) -> list[int]:
    t = copy.truth.inferences
    return sorted(
        t.filter((pl.col("escrow_id") == escrow_id) & pl.col("drained") & (pl.col("pre_drain_status") == pre))[
            "inference_id"
        ].to_list()
    )


# A hand-edited copy is read in the SQLite layout; in the heavy tier in PostgreSQL too, the views compared. The
# two readers compared on each line's unedited copy, which stands in the default tier:
# tests/sources/store/test_release_lines.py::test_each_release_line_reads_as_defined_in_both_layouts
LAYOUTS = pytest.mark.parametrize("both", [False, pytest.param(True, marks=pytest.mark.heavy, id="both-layouts")])


def _read(copy, tmp_path, pg_database, both: bool) -> dict:
    """The views of the edited copy's SQLite store; with `both`, equal to those of its PostgreSQL database."""
    ingest(tmp_path / "a.duckdb", copy.write_sqlite(tmp_path / "store"))
    a = _views(tmp_path / "a.duckdb")
    if both:
        url = pg_database()
        copy.write_postgres(url)
        ingest(tmp_path / "b.duckdb", url)
        b = _views(tmp_path / "b.duckdb")
        for name in ("inferences", "txs", "validations", "escrows", "replay_disagreements"):
            assert_frame_equal(a[name], b[name], check_exact=True)
    return a


def _rows(views, escrow_id: str, ids) -> dict[int, dict]:
    got = views["inferences"].filter((pl.col("escrow_id") == escrow_id) & pl.col("inference_id").is_in(list(ids)))
    return {r["inference_id"]: r for r in got.iter_rows(named=True)}


@LAYOUTS
def test_transactions_in_and_after_the_settlement_diff(both, tmp_path, line_copies, pg_database):
    """The drain runs after the transactions of the settlement diff (finalize nonce + N): a refusal in that
    diff is a miss, not a drain. Transactions after it find no live record and change nothing, so the
    records they name stay drained: never a miss, never an answer (docs/data-model.md, replay)."""
    from pipeline.sources.decode import devshard_pb2 as pb

    copy = line_copies["ha"]
    escrow_id = "2101"  # settled under the refund rule: Pending -> timed out, Started -> paid
    pending, started = _drained(copy, escrow_id, "pending"), _drained(copy, escrow_id, "started")
    assert len(pending) == 2 and len(started) == 2
    in_settlement, after = pending
    settle = _settlement_nonce(copy, escrow_id)
    session = _escrow(copy, escrow_id)
    assert session["latest_nonce"] == settle
    diffs = [dict(d) for d in copy.tables["diffs"]]
    at_settle = next(d for d in diffs if d["escrow_id"] == escrow_id and d["nonce"] == settle)
    content = pb.DiffContent.FromString(at_settle["txs_proto"])
    content.txs.append(
        pb.DevshardTx(
            timeout_inference=pb.MsgTimeoutInference(
                inference_id=in_settlement, reason=pb.TIMEOUT_REASON_REFUSED, votes=_all_accept(copy, escrow_id)
            )
        )
    )
    at_settle["txs_proto"] = content.SerializeToString()
    late = pb.DiffContent(
        txs=[
            pb.DevshardTx(
                timeout_inference=pb.MsgTimeoutInference(
                    inference_id=after, reason=pb.TIMEOUT_REASON_REFUSED, votes=_all_accept(copy, escrow_id)
                )
            ),
            pb.DevshardTx(
                finish_inference=pb.MsgFinishInference(
                    inference_id=started[0],
                    input_tokens=10,
                    output_tokens=10,
                    executor_slot=started[0] % len(json.loads(session["group_json"])),
                )
            ),
            pb.DevshardTx(
                timeout_inference=pb.MsgTimeoutInference(
                    inference_id=started[1], reason=pb.TIMEOUT_REASON_EXECUTION, votes=_all_accept(copy, escrow_id)
                )
            ),
        ]
    )
    diffs.append(at_settle | {"nonce": settle + 1, "txs_proto": late.SerializeToString()})
    sessions = [s | {"latest_nonce": settle + 1} if s["escrow_id"] == escrow_id else s for s in copy.tables["sessions"]]
    edited = dataclasses.replace(copy, tables={**copy.tables, "diffs": diffs, "sessions": sessions})
    a = _read(edited, tmp_path, pg_database, both)

    rows = _rows(a, escrow_id, pending + started)
    assert {k: (r["drained"], r["miss_kind"], r["status"]) for k, r in rows.items()} == {
        in_settlement: (False, "refused", "timed_out"),
        after: (True, None, "timed_out"),
        started[0]: (True, None, "finished"),
        started[1]: (True, None, "finished"),
    }
    assert [rows[i]["drain_outcome"] for i in (after, *started)] == ["refunded", "paid", "paid"]
    assert not any(rows[i]["finished"] for i in (after, *started))
    assert rows[started[0]]["output_tokens"] is None  # the late finish reported nothing
    # The late transactions are in the log all the same.
    late_txs = a["txs"].filter((pl.col("escrow_id") == escrow_id) & (pl.col("nonce") == settle + 1))
    assert late_txs["kind"].to_list() == ["timeout", "finish", "timeout"]


def test_old_epoch_files_with_three_column_sealed_rows(tmp_path, timeline):
    """The old epoch list (steps 1-7, 7 = noop) has a 3-column sealed_inferences: id and seal nonce only.
    Those rows are bare, like obs_present = false; they confirm nothing and contradict nothing."""
    copy = timeline.copy(last_epoch=2)
    assert copy.epochs == {1: True, 2: False}
    store = copy.write_sqlite(tmp_path / "store")
    wh = tmp_path / "w.duckdb"
    ingest(wh, store)
    assert frame(wh, "SELECT count(*) AS n FROM replay_disagreements")["n"][0] == 0
    got = frame(
        wh, "SELECT escrow_id, inference_id, status, sealed, miss_kind FROM inferences WHERE epoch_id = 1 ORDER BY ALL"
    )
    want = (
        copy.truth.inferences.filter(pl.col("epoch_id") == 1)
        .select("escrow_id", "inference_id", "status", "sealed", "miss_kind")
        .sort("escrow_id", "inference_id")
    )
    assert got.height == 438 and got["sealed"].sum() == want["sealed"].sum() > 400
    assert_frame_equal(got, want, check_dtypes=False)
    described = open_store(str(store))
    try:
        assert (
            described.describe().release_lines["epoch_1.db"]
            == "old epoch list (sealed_inferences has only id and seal nonce)"
        )
    finally:
        described.close()


def _imported_after_finalize(copy, timeline, escrow_id: str, checkpoint_after: int = 0):
    """The copy as a host holds it that joined escrow `escrow_id` by import one nonce after its finalize:
    no diffs and no sealed rows up to the import, the checkpoint `checkpoint_after` nonces after the
    import as the latest snapshot."""
    from pipeline.samples.model import EscrowMachine
    from pipeline.samples.snapshots import snapshot_blob

    plan = next(p for p in timeline.escrows if p.escrow_id == escrow_id)
    imported = _settlement_nonce(copy, escrow_id) - plan.group.size + 1
    machine = EscrowMachine(
        plan.group,
        plan.threshold,
        plan.config["TokenPrice"],
        plan.config["InferenceSealGraceNonces"],
        plan.config["AutoSealEveryNNonces"],
        drain_rule=plan.drain_rule,
    ).replay(plan.diffs[: imported + checkpoint_after])
    keep = lambda r: r["escrow_id"] != escrow_id  # noqa: E731
    tables = {
        **copy.tables,
        "diffs": [d for d in copy.tables["diffs"] if keep(d) or d["nonce"] > imported],
        "sealed_inferences": [r for r in copy.tables["sealed_inferences"] if keep(r) or r["sealed_nonce"] > imported],
        "sessions": [s if keep(s) else s | {"imported_nonce": imported} for s in copy.tables["sessions"]],
        "snapshots": [
            s
            if keep(s)
            else s
            | {
                "nonce": imported + checkpoint_after,
                "state_data": snapshot_blob(plan, machine, copy.release_line.snapshot_root_prefix),
            }
            for s in copy.tables["snapshots"]
        ],
    }
    live_at_import = {i for i, r in machine.records.items() if i <= imported and r.sealed_nonce == 0}
    return dataclasses.replace(copy, tables=tables), live_at_import


@LAYOUTS
@pytest.mark.parametrize("escrow_id,checkpoint_after", [("2101", 0), ("3100", 0), ("2101", 2)])  # refund, paid rule
def test_an_escrow_joined_by_import_after_its_finalize(
    escrow_id, checkpoint_after, both, tmp_path, line_copies, timeline, pg_database
):
    """No diffs before imported_nonce, so neither the finalize nor the starts of the records live at the
    import are in the log: the checkpoint gives both. Records still pending or started at settlement are
    drained (never a miss, never an answer) as in any other escrow; what happened to the others after the
    import is replayed from the checkpoint's state."""
    copy, live_at_import = _imported_after_finalize(
        line_copies["snapshot-import"], timeline, escrow_id, checkpoint_after
    )
    a = _read(copy, tmp_path, pg_database, both)
    columns = ["inference_id", "status", "drained", "pre_drain_status", "drain_outcome", "miss_kind"]
    got = a["inferences"].filter(pl.col("escrow_id") == escrow_id).select(columns)
    want = (
        copy.truth.inferences.filter(pl.col("escrow_id") == escrow_id)
        .rename({"has_finish_tx": "finished"})
        .select(columns)
    )
    live = got.filter(pl.col("inference_id").is_in(list(live_at_import)))
    assert live.height == len(live_at_import) >= 5
    assert_frame_equal(live, want.filter(pl.col("inference_id").is_in(list(live_at_import))), check_dtypes=False)
    assert live["drained"].sum() == 4 and set(live["drain_outcome"].drop_nulls()) == (
        {"refunded", "paid"} if escrow_id == "2101" else {"paid"}
    )
    drained = a["inferences"].filter((pl.col("escrow_id") == escrow_id) & pl.col("drained"))
    assert not drained["finished"].any() and drained["miss_kind"].is_null().all()
    assert a["escrows"].filter(pl.col("escrow_id") == escrow_id)["finalize_nonce"].to_list() == [
        _settlement_nonce(line_copies["snapshot-import"], escrow_id)
        - len(json.loads(_escrow(copy, escrow_id)["group_json"]))
    ]
    assert a["replay_disagreements"].filter(pl.col("escrow_id") == escrow_id).height == 0


@LAYOUTS
def test_an_escrow_joined_by_import_with_its_settlement_checkpoint(both, tmp_path, line_copies, timeline, pg_database):
    """As above, but the latest checkpoint is the one at settlement, which holds no live records: the
    records drained at settlement are known only from their sealed rows. Sealed Pending/Started, or
    Finished without a finish's tokens at the settlement nonce, is the drain's doing."""
    base = line_copies["snapshot-import"]
    imported, live_at_import = _imported_after_finalize(base, timeline, "3100")
    copy = dataclasses.replace(imported, tables={**imported.tables, "snapshots": base.tables["snapshots"]})
    a = _read(copy, tmp_path, pg_database, both)
    columns = ["inference_id", "status", "drained", "pre_drain_status", "drain_outcome", "miss_kind", "finished"]
    got = a["inferences"].filter(pl.col("inference_id").is_in(list(live_at_import)) & (pl.col("escrow_id") == "3100"))
    want = copy.truth.inferences.filter(
        pl.col("inference_id").is_in(list(live_at_import)) & (pl.col("escrow_id") == "3100")
    )
    assert_frame_equal(
        got.select(columns), want.rename({"has_finish_tx": "finished"}).select(columns), check_dtypes=False
    )
    assert got["drained"].sum() == 4


def test_doctor_lists_unknown_migrations_and_knows_every_table_of_a_line(tmp_path, line_copies, pg_database):
    """Every table a line creates is known to doctor (the HA line's connection lineage of step 15 too);
    a migration no line has is listed by (id, name), next to the line the rest of the list matches."""
    import sqlite3

    import psycopg

    copy = line_copies["ha"]
    store = copy.write_sqlite(tmp_path / "store")
    url = pg_database()
    copy.write_postgres(url)
    for source in (url, str(store)):
        described = open_store(source)
        try:
            assert described.describe().unrecognised == []
        finally:
            described.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_migrations (id, name) VALUES (16, 'devshard_future_step')")
    with sqlite3.connect(store / "epoch_3.db") as conn:
        conn.execute("INSERT INTO schema_migrations (id, name) VALUES (8, 'future_epoch_step')")
    conn.close()
    lines = {}
    for source in (url, str(store)):
        described = open_store(source)
        try:
            lines |= described.describe().release_lines
        finally:
            described.close()
    assert (
        lines["database"] == "not a known release line (closest: HA line; unknown migrations 16 devshard_future_step)"
    )
    assert lines["epoch_3.db"] == (
        "not a known release line (closest: squashed epoch list; unknown migrations 8 future_epoch_step)"
    )
    assert lines["epoch_2.db"] == "squashed epoch list"


@LAYOUTS
def test_records_left_live_by_the_drain_are_unchanged(both, tmp_path, line_copies, timeline, pg_database):
    """A build whose drain did not seal the records still pending or started leaves them live in the
    settlement checkpoint, as they were, with no sealed rows: the checkpoint shows the unchanged rule."""
    from pipeline.samples.model import EscrowMachine
    from pipeline.samples.snapshots import snapshot_blob

    copy, escrow_id = line_copies["ha"], "2100"  # settled under the oldest rule
    plan = next(p for p in timeline.escrows if p.escrow_id == escrow_id)
    machine = EscrowMachine(
        plan.group,
        plan.threshold,
        plan.config["TokenPrice"],
        plan.config["InferenceSealGraceNonces"],
        plan.config["AutoSealEveryNNonces"],
        drain_rule=plan.drain_rule,
    ).replay(plan.diffs[: _escrow(copy, escrow_id)["latest_nonce"]])
    drained = {r.inference_id for r in machine.records.values() if r.drained}
    assert len(drained) == 4
    for record in machine.records.values():
        if record.drained:
            record.sealed_nonce = 0
    keep = lambda r: r["escrow_id"] != escrow_id or r["inference_id"] not in drained  # noqa: E731
    tables = {
        **copy.tables,
        "sealed_inferences": [r for r in copy.tables["sealed_inferences"] if keep(r)],
        "snapshots": [
            s
            if s["escrow_id"] != escrow_id
            else s | {"state_data": snapshot_blob(plan, machine, copy.release_line.snapshot_root_prefix)}
            for s in copy.tables["snapshots"]
        ],
    }
    a = _read(dataclasses.replace(copy, tables=tables), tmp_path, pg_database, both)
    rows = _rows(a, escrow_id, drained)
    assert {
        i: (r["drained"], r["drain_outcome"], r["status"], r["sealed"], r["miss_kind"]) for i, r in rows.items()
    } == {i: (True, "unchanged", r["pre_drain_status"], False, None) for i, r in rows.items()}
    assert sorted(r["pre_drain_status"] for r in rows.values()) == ["pending", "pending", "started", "started"]


def test_checkpoint_blobs_with_and_without_the_root_prefix():
    """state_data: the optional prefix (26-byte marker + 32-byte root) is stripped; live records come
    from the inferences map and from committed entries, except entries of ids the snapshot lists as
    sealed; a marker without its root, or bytes that are no snapshot, are quarantined with a reason."""
    import pyarrow as pa

    from pipeline.sources.decode.snapshot_pb2 import InferenceRecordProto, StateSnapshotProto
    from pipeline.sources.decode.snapshots import ROOT_PREFIX, decode_snapshots

    snap = StateSnapshotProto()
    snap.state.escrow_id, snap.state.phase, snap.state.finalize_nonce, snap.state.latest_nonce = "E", 1, 40, 44
    snap.state.inferences[41].CopyFrom(InferenceRecordProto(inference_id=41, status=1, executor_slot=1))
    snap.committed_entries[42] = InferenceRecordProto(inference_id=42, status=0).SerializeToString()
    snap.committed_entries[7] = InferenceRecordProto(inference_id=7, status=2).SerializeToString()
    snap.sealed_nonces[7] = 30
    snap.state.host_stats[1].missed = 3
    body = snap.SerializeToString()
    rows = [
        {"epoch_id": 5, "escrow_id": e, "nonce": 44, "state_data": blob, "created_at": 0}
        for e, blob in (
            ("plain", body),
            ("rooted", ROOT_PREFIX + bytes(32) + body),
            ("cut", ROOT_PREFIX + bytes(10)),
            ("junk", b"\xff\xff\xff"),
        )
    ]
    decoded = decode_snapshots(pa.Table.from_pylist(rows))
    assert decoded.snapshots.select(["escrow_id", "root_prefixed", "finalize_nonce", "phase"]).to_pylist() == [
        {"escrow_id": "plain", "root_prefixed": False, "finalize_nonce": 40, "phase": 1},
        {"escrow_id": "rooted", "root_prefixed": True, "finalize_nonce": 40, "phase": 1},
    ]
    assert sorted((r["escrow_id"], r["inference_id"], r["status"]) for r in decoded.live.to_pylist()) == [
        ("plain", 41, 1),
        ("plain", 42, 0),
        ("rooted", 41, 1),
        ("rooted", 42, 0),
    ]
    assert [r["missed"] for r in decoded.host_stats.to_pylist()] == [3, 3]
    assert [k for k, _ in decoded.quarantined] == ["cut/44", "junk/44"]


def test_imported_nonce_zero_or_null_means_not_imported(tmp_path, line_copies, host_a, pg_database):
    """A session that was not joined by import may carry imported_nonce 0 (a column default) in one
    layout and NULL in the other: the views are the same."""
    copy = line_copies["snapshot-import"]
    sessions = [s | {"imported_nonce": s["imported_nonce"] or 0} for s in copy.tables["sessions"]]
    url = pg_database()
    dataclasses.replace(copy, tables={**copy.tables, "sessions": sessions}).write_postgres(url)
    ingest(tmp_path / "b.duckdb", url)
    a, b = _views(host_a("snapshot-import")), _views(tmp_path / "b.duckdb")  # a: the copy as SQLite holds it
    for name in ("inferences", "snapshot_host_stats", "escrows"):
        assert_frame_equal(a[name], b[name], check_exact=True)
    assert a["snapshot_host_stats"].filter(pl.col("imported_nonce").is_not_null())["escrow_id"].unique().to_list() == [
        i["escrow_id"] for i in copy.truth.planted["imported"]
    ]
