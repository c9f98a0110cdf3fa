"""`snapshots.state_data` as the host writes it: a `StateSnapshotProto` of the escrow state at the
checkpoint nonce, prefixed with the root marker and the 32-byte state root on newer builds."""

from __future__ import annotations

from pipeline.sources.decode.snapshot_pb2 import InferenceRecordProto, StateSnapshotProto
from pipeline.sources.decode.snapshots import ROOT_PREFIX

from . import wire
from .model import EscrowMachine, Record

# EscrowStateProto.phase: 0 Active, 1 Finalizing, 2 Settlement.
ACTIVE, FINALIZING, SETTLEMENT = 0, 1, 2


def _record(record: Record) -> InferenceRecordProto:
    return InferenceRecordProto(
        inference_id=record.inference_id,
        status=int(record.status),
        executor_slot=record.executor_slot,
        model=record.model,
        prompt_hash=record.prompt_hash,
        response_hash=record.response_hash or b"",
        input_length=record.input_length,
        max_tokens=record.max_tokens,
        input_tokens=record.input_tokens,
        output_tokens=record.output_tokens,
        reserved_cost=record.reserved_cost,
        actual_cost=record.actual_cost,
        started_at=record.started_at,
        confirmed_at=record.confirmed_at,
        votes_valid=record.votes_valid,
        votes_invalid=record.votes_invalid,
        validated_by=record.validated_by_bytes(),
    )


def snapshot_blob(plan, machine: EscrowMachine, root_prefix: bool) -> bytes:
    """The checkpoint of `machine` (replayed up to the checkpoint nonce) for escrow `plan`."""
    snapshot = StateSnapshotProto()
    state = snapshot.state
    state.escrow_id = plan.escrow_id
    config = plan.config
    state.config.refusal_timeout, state.config.execution_timeout = config["RefusalTimeout"], config["ExecutionTimeout"]
    state.config.token_price, state.config.vote_threshold = config["TokenPrice"], plan.threshold
    state.config.create_devshard_fee, state.config.fee_per_nonce = config["CreateDevshardFee"], config["FeePerNonce"]
    state.config.validation_rate, state.config.seal_grace_nonces = (
        config["ValidationRate"],
        config["InferenceSealGraceNonces"],
    )
    for slot, holder in enumerate(plan.group.slots):
        state.group.add(slot_id=slot, validator_address=holder)
    live = machine.live
    # The sample plans more work than a small initial balance pays for; a balance cannot go below 0.
    state.balance = max(
        0,
        plan.initial_balance
        - sum(r.reserved_cost for r in live)
        - sum(r.actual_cost for r in machine.records.values() if r.sealed_nonce),
    )
    state.fees = config["CreateDevshardFee"] + config["FeePerNonce"] * (machine.finalize_nonce or machine.latest_nonce)
    state.phase = SETTLEMENT if machine.settled_nonce else FINALIZING if machine.finalize_nonce else ACTIVE
    state.finalize_nonce = machine.finalize_nonce or 0
    state.latest_nonce = machine.latest_nonce
    for record in live:
        state.inferences[record.inference_id].CopyFrom(_record(record))
        snapshot.committed_entries[record.inference_id] = _record(record).SerializeToString()
    for slot, stats in machine.host_stats.items():
        entry = state.host_stats[slot]
        entry.slot_id, entry.missed, entry.invalid, entry.cost = slot, stats.missed, stats.invalid, stats.cost
    for record in machine.records.values():
        if record.sealed_nonce:
            snapshot.sealed_nonces[record.inference_id] = record.sealed_nonce
    body = snapshot.SerializeToString(deterministic=True)
    if root_prefix:
        return ROOT_PREFIX + wire.fake_bytes("state-root", plan.escrow_id, machine.latest_nonce, size=32) + body
    return body
