"""`snapshots.state_data` as the host writes it: a `StateSnapshotProto` of the escrow state at the
checkpoint nonce, prefixed with the root marker and the 32-byte state root on newer builds; on
pre-devshard-v2 builds the same state as Go's encoding/json writes an `EscrowState` wrapped in
`{"state": …}`. `HostStatsProto` fields 7/8 follow the escrow's line: per-model rows, or PR #1757's
`validated` and `finished`."""

from __future__ import annotations

import base64
import json

from pipeline.sources.decode.snapshot_pb2 import (
    HostStatsCounterLineProto,
    HostStatsModelLineProto,
    InferenceRecordProto,
    StateSnapshotProto,
)
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


def _balance(plan, machine: EscrowMachine) -> int:
    # The sample plans more work than a small initial balance pays for; a balance cannot go below 0.
    return max(
        0,
        plan.initial_balance
        - sum(r.reserved_cost for r in machine.live)
        - sum(r.actual_cost for r in machine.records.values() if r.sealed_nonce),
    )


def _phase(machine: EscrowMachine) -> int:
    return SETTLEMENT if machine.settled_nonce else FINALIZING if machine.finalize_nonce else ACTIVE


def _fees(plan, machine: EscrowMachine) -> int:
    config = plan.config
    return config["CreateDevshardFee"] + config["FeePerNonce"] * (machine.finalize_nonce or machine.latest_nonce)


def json_snapshot_blob(plan, machine: EscrowMachine) -> bytes:
    """A pre-devshard-v2 checkpoint: `{"state": EscrowState}` (PascalCase fields without tags, snake_case
    tags with omitempty inside inference records, integer map keys as strings, bytes as base64)."""
    config = plan.config
    records = {}
    for r in machine.live:
        record = {
            "status": int(r.status),
            "executor_slot": r.executor_slot,
            "model": r.model,
            "prompt_hash": base64.b64encode(r.prompt_hash).decode(),
            "response_hash": base64.b64encode(r.response_hash).decode() if r.response_hash else None,
            "input_length": r.input_length,
            "max_tokens": r.max_tokens,
            "input_tokens": r.input_tokens,
            "output_tokens": r.output_tokens,
            "reserved_cost": r.reserved_cost,
            "actual_cost": r.actual_cost,
            "started_at": r.started_at,
            "confirmed_at": r.confirmed_at,
            "votes_valid": r.votes_valid,
            "votes_invalid": r.votes_invalid,
        }
        omitempty = ("response_hash", "input_tokens", "output_tokens", "actual_cost", "confirmed_at", "votes_valid")
        records[str(r.inference_id)] = {
            k: v for k, v in record.items() if not (k in (*omitempty, "votes_invalid") and not v)
        }
    state = {
        "EscrowID": plan.escrow_id,
        "Version": "",
        "Config": {
            "RefusalTimeout": config["RefusalTimeout"],
            "ExecutionTimeout": config["ExecutionTimeout"],
            "TokenPrice": config["TokenPrice"],
            "CreateDevshardFee": config["CreateDevshardFee"],
            "FeePerNonce": config["FeePerNonce"],
            "VoteThreshold": plan.threshold,
            "ValidationRate": config["ValidationRate"],
        },
        "Group": [{"SlotID": slot, "ValidatorAddress": holder} for slot, holder in enumerate(plan.group.slots)],
        "Balance": _balance(plan, machine),
        "Fees": _fees(plan, machine),
        "Phase": _phase(machine),
        "FinalizeNonce": machine.finalize_nonce or 0,
        "Inferences": records,
        "HostStats": {
            str(slot): {
                "Missed": hs.missed,
                "Invalid": hs.invalid,
                "Cost": hs.cost,
                "RequiredValidations": 0,
                "CompletedValidations": 0,
            }
            for slot, hs in sorted(machine.host_stats.items())
        },
        "WarmKeys": None,
        "LatestNonce": machine.latest_nonce,
    }
    return json.dumps({"state": state}, separators=(",", ":")).encode()


def snapshot_blob(plan, machine: EscrowMachine, root_prefix: bool) -> bytes:
    """The checkpoint of `machine` (replayed up to the checkpoint nonce) for escrow `plan`."""
    if plan.checkpoint_format == "json":
        return json_snapshot_blob(plan, machine)
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
    state.balance = _balance(plan, machine)
    state.fees = _fees(plan, machine)
    state.phase = _phase(machine)
    state.finalize_nonce = machine.finalize_nonce or 0
    state.latest_nonce = machine.latest_nonce
    for record in live:
        state.inferences[record.inference_id].CopyFrom(_record(record))
        snapshot.committed_entries[record.inference_id] = _record(record).SerializeToString()
    for slot, stats in machine.host_stats.items():
        entry = state.host_stats[slot]
        entry.slot_id, entry.missed, entry.invalid, entry.cost = slot, stats.missed, stats.invalid, stats.cost
        # Fields 7/8 by the escrow's line; our HostStatsProto declares 1-6 only, so they go in as bytes.
        if plan.host_stats_line == "model_stats":
            line = HostStatsModelLineProto()
            for model, (prompt, completion, count, cost) in sorted(stats.models.items()):
                line.model_stats.add(
                    model=model, prompt_tokens=prompt, completion_tokens=completion, inference_count=count, cost=cost
                )
            entry.MergeFromString(line.SerializeToString())
        elif plan.host_stats_line == "counters":
            counters = HostStatsCounterLineProto(validated=stats.validated, finished=stats.finished)
            entry.MergeFromString(counters.SerializeToString())
    for record in machine.records.values():
        if record.sealed_nonce:
            snapshot.sealed_nonces[record.inference_id] = record.sealed_nonce
    body = snapshot.SerializeToString(deterministic=True)
    if root_prefix:
        return ROOT_PREFIX + wire.fake_bytes("state-root", plan.escrow_id, machine.latest_nonce, size=32) + body
    return body
