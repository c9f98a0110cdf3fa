"""The diff-log replay on hand-written logs, one state-machine rule per scenario (docs/data-model.md, replay)."""

from __future__ import annotations

import polars as pl

from pipeline.ingest.derive import drain_outcomes
from pipeline.sources.decode.txs import TX_SCHEMA
from pipeline.transforms.replay import replay

# Group of 5 slots: A holds 0, B holds 1 and 2 (weight 2), C holds 3, D holds 4. VoteThreshold 2.
ADDRESSES = ["A", "B", "B", "C", "D"]
SLOTS = pl.DataFrame(
    {
        "escrow_id": ["E"] * 5,
        "slot_id": list(range(5)),
        "address": ADDRESSES,
        "address_slots": [ADDRESSES.count(a) for a in ADDRESSES],
    }
)


def escrow(latest_nonce: int) -> pl.DataFrame:
    return pl.DataFrame({"escrow_id": ["E"], "group_size": [5], "vote_threshold": [2], "latest_nonce": [latest_nonce]})


def log(*diffs: list[dict]) -> pl.DataFrame:
    """One list of tx dicts per diff; nonce = position + 1."""
    rows = []
    for nonce, txs in enumerate(diffs, 1):
        for index, tx in enumerate(txs):
            rows.append({"epoch_id": 1, "escrow_id": "E", "nonce": nonce, "tx_index": index, **tx})
    return pl.DataFrame(rows, schema=pl.from_arrow(TX_SCHEMA.empty_table()).schema)


def start(i):
    return {"kind": "start", "inference_id": i, "started_at": 1_700_000_000 + i}


def confirm(i):
    return {"kind": "confirm", "inference_id": i, "confirmed_at": 1_700_000_000 + i}


def finish(i, slot):
    return {"kind": "finish", "inference_id": i, "slot": slot, "input_tokens": 5, "output_tokens": 7}


def validation(i, slot, valid):
    return {"kind": "validation", "inference_id": i, "slot": slot, "valid": valid}


def vote(i, slot, valid):
    return {"kind": "vote", "inference_id": i, "slot": slot, "valid": valid}


def timeout(i, reason, *accepting):
    return {
        "kind": "timeout",
        "inference_id": i,
        "timeout_reason": reason,
        "votes": [{"voter_slot": s, "accept": True} for s in accepting],
    }


def error_miss(i, *accepting):
    return {"kind": "error_miss", "inference_id": i, "votes": [{"voter_slot": s, "accept": True} for s in accepting]}


def run(txs: pl.DataFrame, latest: int | None = None) -> tuple[dict, pl.DataFrame]:
    inferences, verdicts = replay(txs, escrow(latest or int(txs["nonce"].max())), SLOTS)
    return {r["inference_id"]: r for r in inferences.iter_rows(named=True)}, verdicts


def test_challenge_then_votes_by_slot_weight_and_a_no_op_after_resolution():
    # Inference 1 is executed by slot 1 (B). A challenges (weight 1); C votes invalid (total 2, not > 2);
    # D votes invalid (3 > 2) → invalidated; B's late vote is a no-op that stays in the log.
    txs = log(
        [start(1)],
        [confirm(1)],
        [finish(1, 1)],
        [validation(1, 0, False)],
        [vote(1, 3, False)],
        [vote(1, 4, False), vote(1, 1, True)],
    )
    inf, verdicts = run(txs)
    assert inf[1]["status"] == "invalidated" and inf[1]["challenged"] and not inf[1]["cleared"]
    assert (inf[1]["votes_valid"], inf[1]["votes_invalid"]) == (0, 3)
    late = verdicts.filter(pl.col("validator") == "B").row(0, named=True)
    assert late["after_resolution"] and not late["counted"]


def test_multi_slot_weight_clears_a_challenge_and_pre_challenge_validations_count():
    # Inference 3 (executor slot 3, C): B validates valid (weight 2, while Finished), A challenges;
    # D votes valid → valid weight 3 > 2 → validated (cleared).
    txs = log(
        [start(3)], [confirm(3), finish(3, 3)], [validation(3, 1, True)], [validation(3, 0, False)], [vote(3, 4, True)]
    )
    inf, _ = run(txs)
    assert inf[3]["status"] == "validated" and inf[3]["cleared"]
    assert (inf[3]["votes_valid"], inf[3]["votes_invalid"]) == (3, 1)


def test_one_verdict_per_address_whatever_the_slot():
    # B validates from slot 1, then again from slot 2: the second is a no-op.
    txs = log([start(5)], [confirm(5), finish(5, 0)], [validation(5, 1, True)], [validation(5, 2, False)])
    inf, verdicts = run(txs)
    assert inf[5]["status"] == "finished" and inf[5]["votes_valid"] == 2 and inf[5]["votes_invalid"] == 0
    assert verdicts["counted"].to_list() == [True, False]
    # challenged = ever received an invalid MsgValidation, even one that was a no-op
    assert inf[5]["challenged"]


def test_timeouts_need_accept_weight_above_the_threshold():
    # Refusal on Pending: A + C accept (2, not > 2) would not apply; B (2) + D (1) = 3 applies.
    txs = log(
        [start(2)], [timeout(2, 1, 0, 3)], [timeout(2, 1, 1, 4)], [start(4)], [confirm(4)], [timeout(4, 2, 1, 2, 0)]
    )
    inf, _ = run(txs)
    assert inf[2]["status"] == "timed_out"
    # Execution timeout on Started: B twice (one address, weight 2) + A = 3 > 2.
    assert inf[4]["status"] == "timed_out"


def test_an_execution_timeout_on_a_pending_record_does_not_apply():
    txs = log([start(6)], [timeout(6, 2, 1, 3, 4)])
    inf, _ = run(txs)
    assert inf[6]["status"] == "pending"


def test_error_miss_ends_a_finished_record():
    txs = log([start(7)], [confirm(7), finish(7, 2)], [error_miss(7, 0, 3, 4)])
    inf, _ = run(txs)
    assert inf[7]["status"] == "timed_out" and inf[7]["finished"]


def test_a_reason_3_timeout_is_an_error_miss_on_a_finished_record():
    # One build line sent the error miss as MsgTimeoutInference reason 3 (ERROR): it needs Finished.
    txs = log([start(7)], [confirm(7), finish(7, 2)], [timeout(7, 3, 0, 3, 4)], [start(8)], [timeout(8, 3, 0, 3, 4)])
    inf, _ = run(txs)
    assert inf[7]["status"] == "timed_out" and inf[7]["finished"] and inf[7]["miss_kind"] == "error_miss"
    # On a Pending record it does not apply, and it is never an ordinary refusal.
    assert inf[8]["status"] == "pending" and inf[8]["miss_kind"] is None


def test_miss_kind_splits_refusals_execution_timeouts_and_error_misses():
    txs = log(
        [start(2)],
        [timeout(2, 1, 1, 4)],
        [start(4)],
        [confirm(4)],
        [timeout(4, 2, 1, 2, 0)],
        [start(6)],
        [confirm(6), finish(6, 1)],
        [error_miss(6, 0, 3, 4)],
    )
    inf, _ = run(txs)
    assert [inf[i]["miss_kind"] for i in (2, 4, 6)] == ["refused", "execution", "error_miss"]


def test_settlement_marks_live_records_drained_with_their_pre_drain_status():
    # Finalize at nonce 3; N = 5 → settlement at nonce 8 once the log reaches it. Inference 4 starts
    # and finishes before it: not drained.
    txs = log(
        [start(1)],
        [start(2), confirm(1)],
        [{"kind": "finalize"}],
        [start(4)],
        [confirm(4), finish(4, 4)],
        *[[{"kind": "other"}]] * 3,
    )
    inf, _ = run(txs)
    assert inf[1]["drained"] and inf[1]["pre_drain_status"] == "started" and not inf[1]["finished"]
    assert inf[2]["drained"] and inf[2]["pre_drain_status"] == "pending"
    assert not inf[4]["drained"] and inf[4]["pre_drain_status"] is None
    # Drained records are never misses; the replay keeps the log's status, the drain rule comes later.
    assert inf[1]["miss_kind"] is None and inf[1]["status"] == "started"
    not_yet, _ = run(txs.filter(pl.col("nonce") < 8))
    assert not_yet[1]["status"] == "started" and not not_yet[1]["drained"]


def drained_rows(*rows) -> pl.DataFrame:
    """(inference_id, pre_drain_status, sealed_status or None, obs_present) of drained records of escrow E."""
    return pl.DataFrame(
        [
            {
                "epoch_id": 1,
                "escrow_id": "E",
                "inference_id": i,
                "drained": True,
                "pre_drain_status": pre,
                "status": pre,
                "sealed_status": code,
                "sealed_nonce": None if code is None else 8,
                "obs_present": rich,
            }
            for i, pre, code, rich in rows
        ],
        schema={
            "epoch_id": pl.Int64,
            "escrow_id": pl.String,
            "inference_id": pl.Int64,
            "drained": pl.Boolean,
            "pre_drain_status": pl.String,
            "status": pl.String,
            "sealed_status": pl.Int64,
            "sealed_nonce": pl.Int64,
            "obs_present": pl.Boolean,
        },
    )


NO_CONFLICTS = pl.DataFrame(
    schema={
        "escrow_id": pl.String,
        "inference_id": pl.Int64,
        "field": pl.String,
        "stored": pl.String,
        "copy": pl.String,
        "stored_source_id": pl.String,
        "copy_source_id": pl.String,
    }
)


def outcomes(frame, conflicts=NO_CONFLICTS):
    result, disagreements = drain_outcomes(frame, conflicts)
    return {r["inference_id"]: (r["drain_outcome"], r["status"]) for r in result.iter_rows(named=True)}, disagreements


def test_the_three_drain_rules_and_records_whose_rows_do_not_tell():
    # Sealed unchanged (up to v0.2.14): 0 / 1 as they were; the bare row (3) follows the escrow's rule.
    got, bad = outcomes(drained_rows((1, "pending", 0, True), (2, "started", 1, True), (3, "pending", None, False)))
    assert (
        got == {1: ("unchanged", "pending"), 2: ("unchanged", "started"), 3: ("unchanged", "pending")}
        and bad.height == 0
    )
    # Refunded (the rule after v0.2.14): Pending → timed out, Started → finished and paid.
    got, _ = outcomes(
        drained_rows(
            (1, "pending", 6, True), (2, "started", 2, True), (3, "started", None, False), (4, "pending", None, False)
        )
    )
    assert got == {
        1: ("refunded", "timed_out"),
        2: ("paid", "finished"),
        3: ("paid", "finished"),
        4: ("refunded", "timed_out"),
    }
    # Paid (the newest rule): both finished at reserved cost.
    got, _ = outcomes(drained_rows((1, "pending", 2, True), (2, "started", 2, True), (3, "pending", None, False)))
    assert got == {1: ("paid", "finished"), 2: ("paid", "finished"), 3: ("paid", "finished")}
    # Only a paid Started record: either of the two later rules, so a Pending one stays unknown.
    got, _ = outcomes(drained_rows((2, "started", 2, True), (3, "pending", None, False)))
    assert got == {2: ("paid", "finished"), 3: (None, "pending")}


def test_contradicting_drain_rows_and_disagreeing_copies_are_reported_not_resolved():
    got, bad = outcomes(drained_rows((1, "pending", 0, True), (2, "pending", 6, True), (3, "started", 6, True)))
    assert got == {1: (None, "pending"), 2: (None, "timed_out"), 3: (None, "timed_out")}
    assert sorted(bad["inference_id"].to_list()) == [1, 2, 3] and set(bad["field"]) == {"drain_outcome"}
    conflict = NO_CONFLICTS.vstack(
        pl.DataFrame(
            [
                {
                    "escrow_id": "E",
                    "inference_id": 1,
                    "field": "sealed_status",
                    "stored": "0",
                    "copy": "6",
                    "stored_source_id": "a",
                    "copy_source_id": "b",
                }
            ],
            schema=NO_CONFLICTS.schema,
        )
    )
    got, bad = outcomes(drained_rows((1, "pending", 0, True), (2, "started", 1, True)), conflict)
    assert got[1][0] is None and got[2] == ("unchanged", "started")
    assert bad.select("inference_id", "field").rows() == [(1, "drained_between_copies")]


def test_records_of_an_import_start_from_the_checkpoint_state_where_the_log_begins():
    # Joined by import at nonce 4: the log begins at 5. The checkpoint (nonce 7) holds record 2 finished
    # and record 3 pending; C's valid validation of 2 at nonce 6 counts (2 was finished before the log
    # began), and 3 is refused at nonce 8. Finalize at 9, N = 5: 1 (started at the checkpoint) is drained.
    txs = log(
        [],
        [],
        [],
        [],
        [{"kind": "other"}],
        [validation(2, 3, True)],
        [{"kind": "other"}],
        [timeout(3, 1, 1, 4)],
        [{"kind": "finalize"}],
        *[[{"kind": "other"}]] * 5,
    )
    txs = txs.filter(pl.col("nonce") > 4)
    checkpoint = pl.DataFrame(
        {"escrow_id": ["E"] * 3, "inference_id": [1, 2, 3], "snapshot_nonce": [7] * 3, "status": [1, 2, 0]}
    )
    inferences, verdicts = replay(txs, escrow(14), SLOTS, checkpoint)
    inf = {r["inference_id"]: r for r in inferences.iter_rows(named=True)}
    assert inf[2]["status"] == "finished" and inf[2]["votes_valid"] == 1 and verdicts["counted"].to_list() == [True]
    assert inf[3]["status"] == "timed_out" and inf[3]["miss_kind"] == "refused"
    assert inf[1]["drained"] and inf[1]["pre_drain_status"] == "started" and inf[1]["miss_kind"] is None


def test_a_late_validation_can_itself_resolve_the_challenge_under_the_newer_rule_set():
    # gonka-ai/gonka devshard/state/machine.go @d5fbfa38: applyValidation while Challenged calls
    # addChallengeVoteLocked, which checks the threshold after adding the weight. Inference 1 (executor B):
    # A challenges (1), D votes invalid (2), C's late invalid validation makes 3 > 2 → invalidated at nonce 6.
    txs = log(
        [start(1)],
        [confirm(1)],
        [finish(1, 1)],
        [validation(1, 0, False)],
        [vote(1, 4, False)],
        [validation(1, 3, False)],
    )
    inf, verdicts = run(txs)
    assert (inf[1]["status"], inf[1]["votes_invalid"], inf[1]["resolved_nonce"]) == ("invalidated", 3, 6)
    assert verdicts.filter(pl.col("validator") == "C")["counted"].to_list() == [True]
    # Under the older rule set (machine.go @39854687) the late validation adds nothing.
    assert (inf[1]["status@finished-only"], inf[1]["votes_invalid@finished-only"]) == ("challenged", 2)
    assert verdicts.filter(pl.col("validator") == "C")["counted@finished-only"].to_list() == [False]


def test_the_rule_set_column_of_the_escrows_picks_the_plain_columns():
    txs = log(
        [start(1)],
        [confirm(1)],
        [finish(1, 1)],
        [validation(1, 0, False)],
        [validation(1, 3, False)],
        [vote(1, 4, False)],
    )
    old = escrow(6).with_columns(rule_set=pl.lit("finished-only"))
    inferences, verdicts = replay(txs, old, SLOTS)
    row = inferences.row(0, named=True)
    assert (row["status"], row["votes_invalid"]) == ("challenged", 2)
    assert (row["status@late-validation"], row["votes_invalid@late-validation"]) == ("invalidated", 3)
    assert verdicts.filter(pl.col("validator") == "C")["counted"].to_list() == [False]
