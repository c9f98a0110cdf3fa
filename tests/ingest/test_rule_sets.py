"""Replay rule sets chosen per escrow by its own seals, on stores the sample generator writes.

The scenarios are upstream's own: gonka-ai/gonka devshard/state/late_validation_challenge_test.go @d5fbfa38
(5 hosts, VoteThreshold 2, inference 1 executed by slot 1; slot 0's invalid MsgValidation challenges it).
Under the newer rule (devshard/state/machine.go @d5fbfa38, applyValidation) a validation arriving while the
record is Challenged goes to the challenge tally; under the older one (machine.go @39854687) it adds nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib

import polars as pl
import pytest

from pipeline.ingest.derive import rule_set_lines
from pipeline.samples import wire
from pipeline.samples.scenario import EscrowPlanner
from pipeline.samples.spec import MODEL, SampleSpec
from pipeline.samples.timeline import Timeline, generate_timeline
from pipeline.sources.decode import devshard_pb2 as pb
from tests.factories import sample_warehouse
from tests.helpers import frame

# Five hosts with one slot each: VoteThreshold floor(5 × 50 / 100) = 2, as upstream's newChallengeSM. The
# spec's own escrows ride along (the generator plants its payload faults in their answers).
SPEC = SampleSpec(
    seed=5, epochs=(1,), escrows_per_epoch=3, inferences_per_escrow=150, group_size_range=(5, 5), n_hosts=5,
    max_slots_per_host=1,
)  # fmt: skip


def validation(slot: int, valid: bool) -> pb.DevshardTx:
    msg = pb.MsgValidation(inference_id=1, validator_slot=slot, valid=valid, proposer_sig=wire.signature(slot))
    return pb.DevshardTx(validation=msg)


def vote(slot: int, valid: bool) -> pb.DevshardTx:
    msg = pb.MsgValidationVote(inference_id=1, voter_slot=slot, vote_valid=valid, proposer_sig=wire.signature(slot))
    return pb.DevshardTx(validation_vote=msg)


# Upstream's cases, as diffs after inference 1 is finished (each inner list is one diff).
SCENARIOS = {
    # TestLateInitialValidationCountsTowardTheChallenge
    "late_invalid_later_diff": [[validation(0, False)], [validation(2, False)], [vote(3, False)]],
    "late_invalid_same_diff": [[validation(0, False), validation(2, False)], [vote(3, False)]],
    "late_valid_then_valid_votes": [[validation(0, False)], [validation(2, True)], [vote(3, True), vote(4, True)]],
    "late_valid_then_one_invalid_vote": [[validation(0, False)], [validation(2, True)], [vote(3, False)]],
    # TestLateInitialValidationAfterResolutionIsNotCounted
    "late_after_resolution": [[validation(0, False)], [vote(2, False), vote(3, False)], [validation(4, True)]],
}
# (status, votes_valid, votes_invalid) per rule set: late-validation as upstream's test asserts, finished-only
# as machine.go @39854687 gives (the late validation adds nothing).
EXPECTED = {
    "late_invalid_later_diff": {"late-validation": ("invalidated", 0, 3), "finished-only": ("challenged", 0, 2)},
    "late_invalid_same_diff": {"late-validation": ("invalidated", 0, 3), "finished-only": ("challenged", 0, 2)},
    "late_valid_then_valid_votes": {"late-validation": ("validated", 3, 1), "finished-only": ("challenged", 2, 1)},
    "late_valid_then_one_invalid_vote": {
        "late-validation": ("challenged", 1, 2),
        "finished-only": ("challenged", 0, 2),
    },
    "late_after_resolution": {"late-validation": ("invalidated", 0, 3), "finished-only": ("invalidated", 0, 3)},
}


def _inference(planner: EscrowPlanner, base, escrow_id: str, i: int):
    """Inference `i`'s plan and its start, receipt and finish (executor slot i mod 5), as the generator writes them."""
    inference = planner._inference_payload(base, i)
    start = pb.MsgStartInference(
        inference_id=i,
        prompt_hash=hashlib.sha256(inference.prompt).digest(),
        model=MODEL,
        input_length=inference.input_length,
        max_tokens=inference.max_tokens,
        started_at=inference.started_at,
    )
    confirm = pb.MsgConfirmStart(
        inference_id=i, executor_sig=wire.signature(escrow_id, i), confirmed_at=start.started_at
    )
    finish = pb.MsgFinishInference(
        inference_id=i,
        response_hash=hashlib.sha256(inference.response).digest(),
        input_tokens=inference.input_length,
        output_tokens=inference.output_tokens,
        executor_slot=i % base.group.size,
        proposer_sig=wire.signature(escrow_id, i, "finish"),
        escrow_id=escrow_id,
    )
    txs = [pb.DevshardTx(start_inference=start), pb.DevshardTx(confirm_start=confirm)]
    return inference, [*txs, pb.DevshardTx(finish_inference=finish)]


def _plan(base, planner: EscrowPlanner, escrow: tuple, after_finish: list):
    """An escrow of the spec's group whose log is inference 1's start, receipt and finish, then `after_finish`,
    then (when settled) the finalize and the N diffs to settlement; seals written under the escrow's rule.
    With `second`, inference 2 is started in diff 2 and finished in diff 3 (no verdict on it)."""
    escrow_id, _, rule, version, settle, *second = escrow
    first, (start, confirm, finish) = _inference(planner, base, escrow_id, 1)
    diffs = [[start], [confirm], [finish]]
    inferences = {1: first}
    if second:
        inferences[2], (start2, confirm2, finish2) = _inference(planner, base, escrow_id, 2)
        diffs[1].append(start2)
        diffs[2] += [confirm2, finish2]
    diffs += [list(txs) for txs in after_finish]
    if settle:
        diffs += [[pb.DevshardTx(finalize_round=pb.MsgFinalizeRound())]] + [[] for _ in range(base.group.size)]
    encoded = []
    for txs in diffs:
        own = []
        for tx in txs:  # copies: the scenarios' messages are shared by every escrow
            copied = pb.DevshardTx()
            copied.CopyFrom(tx)
            member = getattr(copied, copied.WhichOneof("tx"))
            if hasattr(member, "escrow_id"):
                member.escrow_id = escrow_id
            own.append(copied)
        encoded.append(wire.encode_diff(own))
    return dataclasses.replace(
        base,
        escrow_id=escrow_id,
        diffs=encoded,
        inferences=inferences,
        bare_sealed_ids=frozenset(),
        unknown_tx=[],
        finalizes=settle,
        drains=False,
        legacy_build=False,
        created_at_unit="s",
        self_validation=False,
        version=version,
        validation_rule=rule,
    )


def _timeline(escrows: list[tuple]) -> Timeline:
    """A timeline of the given escrows: (escrow id, scenario, rule the writer applied, version, settled[, second])."""
    base_timeline = generate_timeline(SPEC)
    base = base_timeline.escrows[0]
    planner = EscrowPlanner(SPEC, base_timeline.cast, base.epoch_id, 0)
    plans = tuple(_plan(base, planner, escrow, SCENARIOS[escrow[1]]) for escrow in escrows)
    # Written by a build with the full sealed_inferences (the spec's first epoch is the narrow old file).
    own = tuple(dataclasses.replace(p, legacy_build=False) for p in base_timeline.escrows)
    return Timeline(SPEC, base_timeline.cast, plans + own)


def _results(wh) -> tuple[dict, dict, pl.DataFrame]:
    inferences = {
        r["escrow_id"]: r
        for r in frame(
            wh, "SELECT escrow_id, status, votes_valid, votes_invalid, sealed FROM inferences WHERE inference_id = 1"
        ).iter_rows(named=True)
    }
    rules = {r["escrow_id"]: r for r in frame(wh, "SELECT * FROM escrow_rule_sets").iter_rows(named=True)}
    verdicts = frame(
        wh, "SELECT escrow_id, nonce, kind, validator_slot, valid, counted, after_resolution FROM validations"
    )
    return inferences, rules, verdicts


@pytest.fixture(scope="module")
def upstream_scenarios(request):
    """Each upstream scenario in an escrow whose writer applied the newer rule, settled (every record sealed)."""
    escrows = [(f"21{k:02d}", name, "late-validation", "v0.2.7", True) for k, name in enumerate(SCENARIOS)]
    copy = _timeline(escrows).copy(last_epoch=2)
    wh = sample_warehouse(request, copy)
    return dict(zip(SCENARIOS, (e[0] for e in escrows), strict=True)), wh


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_upstream_late_validation_scenario(upstream_scenarios, scenario):
    ids, wh = upstream_scenarios
    inferences, rules, verdicts = _results(wh.path)
    escrow_id = ids[scenario]
    got = inferences[escrow_id]
    assert got["sealed"]
    assert (got["status"], got["votes_valid"], got["votes_invalid"]) == EXPECTED[scenario]["late-validation"]
    rule = rules[escrow_id]
    assert rule["rule_set"] == "late-validation"
    assert (rule["seals_compared"], rule["seals_reproduced"]) == (1, 1)
    late = verdicts.filter(
        (pl.col("escrow_id") == escrow_id) & (pl.col("kind") == "validation") & (pl.col("validator_slot") != 0)
    ).row(0, named=True)
    if scenario == "late_after_resolution":
        # Both rule sets give the same outcome: the seal does not tell them apart.
        assert (rule["chosen_by"], rule["reproduced_by"]) == ("seals_tie", "finished-only,late-validation")
        assert late["after_resolution"] and not late["counted"]
    else:
        assert (rule["chosen_by"], rule["reproduced_by"]) == ("seals", "late-validation")
        assert late["counted"] and not late["after_resolution"]
    assert wh.summary.disagreements == 0


def test_a_late_validator_cannot_vote_again():
    # TestLateInitialValidatorCannotVoteAgain: upstream rejects slot 2's vote (ErrDuplicateVote), so the tally
    # stays at 2 invalid; a log holding it anyway gets it counted by neither rule set.
    from pipeline.sources.decode.txs import TX_SCHEMA
    from pipeline.transforms.replay import replay
    from pipeline.transforms.rule_sets import ruled

    rows = [
        {"kind": "start", "inference_id": 1, "nonce": 1},
        {"kind": "confirm", "inference_id": 1, "nonce": 2},
        {"kind": "finish", "inference_id": 1, "nonce": 3, "slot": 1, "output_tokens": 3},
        {"kind": "validation", "inference_id": 1, "nonce": 4, "slot": 0, "valid": False},
        {"kind": "validation", "inference_id": 1, "nonce": 5, "slot": 2, "valid": False},
        {"kind": "vote", "inference_id": 1, "nonce": 6, "slot": 2, "valid": False},
    ]
    txs = pl.DataFrame(
        [{"epoch_id": 1, "escrow_id": "E", "tx_index": 0, **r} for r in rows],
        schema=pl.from_arrow(TX_SCHEMA.empty_table()).schema,
    )
    escrows = pl.DataFrame({"escrow_id": ["E"], "group_size": [5], "vote_threshold": [2], "latest_nonce": [6]})
    slots = pl.DataFrame(
        {"escrow_id": ["E"] * 5, "slot_id": list(range(5)), "address": list("ABCDE"), "address_slots": [1] * 5}
    )
    inferences, verdicts = replay(txs, escrows, slots)
    row = inferences.row(0, named=True)
    assert (row["status"], row["votes_invalid"]) == ("challenged", 2)
    assert (row[ruled("status", "finished-only")], row[ruled("votes_invalid", "finished-only")]) == ("challenged", 1)
    assert verdicts.filter(pl.col("kind") == "vote")["counted"].to_list() == [False]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def mixed_store(request):
    """Older escrows whose writer counted validations only while Finished (v0.2.3), newer ones whose writer
    counts late validations (v0.2.7), one open escrow of each version and one of a version no seal ties,
    and two settled escrows whose seals no rule set reproduces all of (stored votes tampered with)."""
    escrows = []
    for k, name in enumerate(SCENARIOS):
        escrows.append((f"31{k:02d}", name, "finished-only", "v0.2.3", True))
        escrows.append((f"32{k:02d}", name, "late-validation", "v0.2.7", True))
    escrows += [
        ("3300", "late_invalid_later_diff", "finished-only", "v0.2.3", False),
        ("3301", "late_invalid_later_diff", "late-validation", "v0.2.7", False),
        ("3302", "late_invalid_later_diff", "late-validation", "v0.9.9", False),
        ("3303", "late_valid_then_valid_votes", "late-validation", "v0.2.7", True),
        ("3304", "late_invalid_later_diff", "finished-only", "v0.2.3", True, "second"),
    ]
    copy = _timeline(escrows).copy(last_epoch=2)
    tampered = {("3303", 1): {"sealed_votes_invalid": 9}, ("3304", 2): {"sealed_votes_valid": 7}}
    sealed = [
        r | tampered.get((r["escrow_id"], r["inference_id"]), {}) if r.get("sealed_nonce") else r
        for r in copy.tables["sealed_inferences"]
    ]
    copy = dataclasses.replace(copy, tables={**copy.tables, "sealed_inferences": sealed})
    return sample_warehouse(request, copy, layout=request.param)


def test_mixed_store_each_escrow_reproduces_its_own_seals(mixed_store):
    inferences, rules, verdicts = _results(mixed_store.path)
    for k, name in enumerate(SCENARIOS):
        for prefix, rule in (("31", "finished-only"), ("32", "late-validation")):
            escrow_id = f"{prefix}{k:02d}"
            got = inferences[escrow_id]
            assert (got["status"], got["votes_valid"], got["votes_invalid"]) == EXPECTED[name][rule], escrow_id
            chosen = rules[escrow_id]
            assert (chosen["seals_compared"], chosen["seals_reproduced"]) == (1, 1)
            if name == "late_after_resolution":
                assert chosen["chosen_by"] == "seals_tie"
            else:
                assert (chosen["rule_set"], chosen["chosen_by"]) == (rule, "seals"), escrow_id
            late = verdicts.filter(
                (pl.col("escrow_id") == escrow_id) & (pl.col("kind") == "validation") & (pl.col("validator_slot") == 2)
            )
            if name != "late_after_resolution":
                assert late["counted"].to_list() == [rule == "late-validation"], escrow_id
    # A tie takes the rule set the escrow's version chose by seals elsewhere.
    assert rules["3104"]["rule_set"] == "finished-only" and rules["3204"]["rule_set"] == "late-validation"


def test_open_escrows_assume_their_versions_rule_set_else_the_newest(mixed_store):
    inferences, rules, _ = _results(mixed_store.path)
    assert (rules["3300"]["rule_set"], rules["3300"]["chosen_by"]) == ("finished-only", "assumed_version")
    assert inferences["3300"]["status"] == "challenged" and inferences["3300"]["votes_invalid"] == 2
    assert (rules["3301"]["rule_set"], rules["3301"]["chosen_by"]) == ("late-validation", "assumed_version")
    assert inferences["3301"]["status"] == "invalidated"
    assert (rules["3302"]["rule_set"], rules["3302"]["chosen_by"]) == ("late-validation", "assumed")
    assert rules["3302"]["seals_compared"] == 0 and rules["3302"]["best_rule_set"] is None
    # marked assumed in the public view; a choice made by seals is not
    assert [rules[e]["assumed"] for e in ("3300", "3301", "3302", "3100", "3204")] == [True, True, True, False, False]


def test_seals_no_rule_set_reproduces_are_said_not_picked_silently(mixed_store):
    _, rules, _ = _results(mixed_store.path)
    flagged = rules["3303"]
    assert (flagged["chosen_by"], flagged["rule_set"], flagged["reproduced_by"]) == (
        "none_reproduces",
        "late-validation",
        None,
    )
    # Status validated matches under late-validation only, but neither gives 9 invalid votes.
    assert (flagged["seals_compared"], flagged["seals_reproduced"], flagged["best_reproduced"]) == (1, 0, 0)
    # Two seals: inference 1's follows the older rule, inference 2's no rule: the older rule set reproduces
    # more of them than the newest, and is used (flagged).
    flagged = rules["3304"]
    assert (flagged["chosen_by"], flagged["rule_set"], flagged["best_rule_set"]) == (
        "none_reproduces",
        "finished-only",
        "finished-only",
    )
    assert (flagged["seals_compared"], flagged["seals_reproduced"], flagged["best_reproduced"]) == (2, 1, 1)
    inferences, _, _ = _results(mixed_store.path)
    assert (inferences["3304"]["status"], inferences["3304"]["votes_invalid"]) == ("challenged", 2)
    lines = rule_set_lines(list(mixed_store.summary.rule_sets.values()))
    assert "seals reproduced by no rule set: 2 escrows" in lines[0]
    assert lines[1].startswith("  escrow 3303: no rule set reproduces its 1 seals (best late-validation, 0)")
    assert lines[2].startswith("  escrow 3304: no rule set reproduces its 2 seals (best finished-only, 1)")


def test_a_counted_late_validation_is_not_a_pass_of_pr_1757s_counter(upstream_scenarios):
    # PR #1757's validated counter counts passing validations while Finished (docs/sources.md): slot 2's late
    # valid validation goes to the challenge tally (counted) but is no pass; the clearing is.
    ids, wh = upstream_scenarios
    row = frame(
        wh.path,
        "SELECT pass_nonces, challenge_nonce, cleared_nonce FROM inference_counter_nonces "
        f"WHERE escrow_id = '{ids['late_valid_then_valid_votes']}'",
    ).row(0, named=True)
    assert (row["pass_nonces"], row["challenge_nonce"], row["cleared_nonce"]) == ([], 4, 6)
