"""The replay against a step-by-step model of upstream's verdict rules, on generated verdict sequences.

The model applies one transaction at a time as gonka-ai/gonka devshard/state/machine.go does: applyValidation
(@d5fbfa38 for late-validation, @39854687 for finished-only), applyValidationVote and addChallengeVoteLocked
(the same in both). A transaction that upstream refuses (self-validation, a vote while Finished, a second
verdict of an address by vote: ErrDuplicateVote) is dropped, as best-effort composition drops it, so the log
holds only what a host accepted, no-ops included. Status, vote totals and each verdict's `counted` and
`after_resolution` must equal the model's under each rule set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.sources.decode.txs import TX_SCHEMA
from pipeline.transforms.replay import replay
from pipeline.transforms.rule_sets import RULE_SETS, ruled

EXECUTOR = 1  # inference 1 of a group of N is executed by slot 1 % N = 1 (N >= 2)


class Refused(Exception):
    """Upstream returns an error: the transaction is not in the accepted log."""


@dataclass
class Record:
    """One Finished inference's validation state: status, the ValidatedBy slots and the weighted tallies."""

    addresses: list[str]
    threshold: int
    late: bool  # late-validation: a MsgValidation while Challenged goes to the challenge tally
    status: str = "finished"
    validated_by: set[int] = field(default_factory=set)
    valid: int = 0
    invalid: int = 0

    def slots(self, address: str) -> list[int]:
        return [s for s, a in enumerate(self.addresses) if a == address]

    def participated(self, slot: int) -> bool:
        return any(s in self.validated_by for s in self.slots(self.addresses[slot]))

    def tally(self, address: str, valid: bool) -> None:
        """addChallengeVoteLocked: mark every slot of the address, add its weight, then check the threshold
        (invalid first, strictly above it)."""
        self.validated_by.update(self.slots(address))
        weight = len(self.slots(address))
        if valid:
            self.valid += weight
        else:
            self.invalid += weight
        if self.invalid > self.threshold:
            self.status = "invalidated"
        elif self.valid > self.threshold:
            self.status = "validated"

    def validation(self, slot: int, valid: bool) -> None:
        if slot == EXECUTOR:
            raise Refused  # ErrSelfValidation
        if self.participated(slot):
            return  # idempotent no-op
        if self.status == "challenged" and self.late:
            self.tally(self.addresses[slot], valid)
            return
        self.validated_by.add(slot)
        if self.status == "finished":
            weight = len(self.slots(self.addresses[slot]))
            if valid:
                self.valid += weight
            else:
                self.invalid += weight
                self.status = "challenged"  # no threshold check here

    def vote(self, slot: int, valid: bool) -> None:
        if self.status in ("validated", "invalidated"):
            return  # resolved: a no-op
        if self.status != "challenged":
            raise Refused  # ErrInvalidTransition
        if self.participated(slot):
            raise Refused  # ErrDuplicateVote
        self.tally(self.addresses[slot], valid)


def model(addresses: list[str], threshold: int, late: bool, diffs: list[list[tuple[str, int, bool]]]):
    """(accepted diffs, final record, per accepted verdict (counted, after_resolution))."""
    record = Record(addresses, threshold, late)
    accepted, flags = [], []
    for diff in diffs:
        kept = []
        for kind, slot, valid in diff:
            before = (record.status, record.valid, record.invalid, set(record.validated_by))
            resolved_before = record.status in ("validated", "invalidated")
            try:
                getattr(record, kind)(slot, valid)
            except Refused:
                record.status, record.valid, record.invalid, record.validated_by = before
                continue
            kept.append((kind, slot, valid))
            flags.append(((record.valid, record.invalid) != before[1:3], resolved_before))
        accepted.append(kept)
    return accepted, record, flags


def replayed(addresses: list[str], threshold: int, accepted: list[list[tuple[str, int, bool]]]):
    rows = [
        {"kind": "start", "inference_id": 1, "nonce": 1, "tx_index": 0},
        {"kind": "confirm", "inference_id": 1, "nonce": 2, "tx_index": 0},
        {"kind": "finish", "inference_id": 1, "nonce": 3, "tx_index": 0, "slot": EXECUTOR, "output_tokens": 3},
    ]
    for nonce, diff in enumerate(accepted, 4):
        for index, (kind, slot, valid) in enumerate(diff):
            rows.append(
                {"kind": kind, "inference_id": 1, "nonce": nonce, "tx_index": index, "slot": slot, "valid": valid}
            )
    txs = pl.DataFrame(
        [{"epoch_id": 1, "escrow_id": "E", **r} for r in rows], schema=pl.from_arrow(TX_SCHEMA.empty_table()).schema
    )
    n = len(addresses)
    escrows = pl.DataFrame(
        {"escrow_id": ["E"], "group_size": [n], "vote_threshold": [threshold], "latest_nonce": [3 + len(accepted)]}
    )
    slots = pl.DataFrame(
        {
            "escrow_id": ["E"] * n,
            "slot_id": list(range(n)),
            "address": addresses,
            "address_slots": [addresses.count(a) for a in addresses],
        }
    )
    inferences, verdicts = replay(txs, escrows, slots)
    return inferences.row(0, named=True), verdicts.sort("nonce", "tx_index")


@st.composite
def cases(draw):
    n = draw(st.integers(3, 7))
    hosts = draw(st.integers(2, n))
    addresses = [draw(st.sampled_from("ABCDEFG"[:hosts])) for _ in range(n)]
    threshold = draw(st.integers(0, n))
    verdict = st.tuples(st.sampled_from(["validation", "vote"]), st.integers(0, n - 1), st.booleans())
    diffs = draw(st.lists(st.lists(verdict, min_size=1, max_size=3), min_size=1, max_size=5))
    return addresses, threshold, diffs


STEP_BY_STEP = settings(deadline=None, derandomize=True)


@settings(STEP_BY_STEP, max_examples=50)  # the heavy tier runs 150 (below)
@given(cases())
def test_replay_equals_upstreams_rules_step_by_step(case):
    addresses, threshold, diffs = case
    for rule, late in zip(RULE_SETS, (False, True), strict=True):
        accepted, record, flags = model(addresses, threshold, late, diffs)
        if not any(accepted):
            continue
        row, verdicts = replayed(addresses, threshold, accepted)
        got = (row[ruled("status", rule)], row[ruled("votes_valid", rule)], row[ruled("votes_invalid", rule)])
        assert got == (record.status, record.valid, record.invalid), (rule, accepted)
        counted = list(zip(verdicts[ruled("counted", rule)], verdicts[ruled("after_resolution", rule)], strict=True))
        assert counted == flags, (rule, accepted)


# 150 examples; stands in the default tier: the same on 50 examples,
# tests/transforms/test_replay_upstream_model.py::test_replay_equals_upstreams_rules_step_by_step
@pytest.mark.heavy
@settings(STEP_BY_STEP, max_examples=150)
@given(cases())
def test_replay_equals_upstreams_rules_step_by_step_heavy(case):
    test_replay_equals_upstreams_rules_step_by_step.hypothesis.inner_test(case)


def test_the_model_gives_upstreams_own_cases():
    """The model itself against devshard/state/late_validation_challenge_test.go @d5fbfa38 (5 hosts, T = 2)."""
    hosts = list("ABCDE")
    late = [[("validation", 0, False)], [("validation", 2, False)], [("vote", 3, False)]]
    assert model(hosts, 2, True, late)[1].status == "invalidated"
    assert model(hosts, 2, False, late)[1].status == "challenged"
    valid = [[("validation", 0, False)], [("validation", 2, True)], [("vote", 3, True), ("vote", 4, True)]]
    record = model(hosts, 2, True, valid)[1]
    assert (record.status, record.valid, record.invalid) == ("validated", 3, 1)
    # the late validator's vote is refused (ErrDuplicateVote) and leaves the log
    accepted, record, _ = model(
        hosts, 2, True, [[("validation", 0, False)], [("validation", 2, False)], [("vote", 2, False)]]
    )
    assert accepted[-1] == [] and record.invalid == 2
