"""`snapshots.state_data` → the escrow state a host checkpointed: escrow facts, per-slot host stats
and the records still live at the checkpoint.

The blob is a `StateSnapshotProto`. Newer builds put the 26-byte marker
`devshard-snapshot-root-v1\\0` and the 32-byte state root in front of it; the prefix is
stripped when present. Live records are in the state's `inferences` map and, as encoded
`InferenceRecordProto` bytes, in `committed_entries`; both are read (by inference id). A blob that
does not parse goes to quarantine with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from google.protobuf.message import DecodeError

from pipeline.sources.decode.snapshot_pb2 import InferenceRecordProto, StateSnapshotProto

ROOT_PREFIX = b"devshard-snapshot-root-v1\x00"
ROOT_BYTES = 32

I64 = pa.int64()
SNAPSHOT_SCHEMA = pa.schema(
    [
        ("epoch_id", I64),
        ("escrow_id", pa.string()),
        ("snapshot_nonce", I64),
        ("created_at", I64),
        ("state_latest_nonce", I64),
        ("phase", I64),
        ("finalize_nonce", I64),
        ("balance", I64),
        ("fees", I64),
        ("token_price", I64),
        ("vote_threshold", I64),
        ("group_size", I64),
        ("live_records", I64),
        ("root_prefixed", pa.bool_()),
    ]
)
HOST_STATS_SCHEMA = pa.schema(
    [
        ("epoch_id", I64),
        ("escrow_id", pa.string()),
        ("slot_id", I64),
        ("snapshot_nonce", I64),
        ("missed", I64),
        ("invalid", I64),
        ("cost", I64),
        ("required_validations", I64),
        ("completed_validations", I64),
    ]
)
LIVE_SCHEMA = pa.schema(
    [
        ("epoch_id", I64),
        ("escrow_id", pa.string()),
        ("inference_id", I64),
        ("snapshot_nonce", I64),
        ("status", I64),
        ("executor_slot", I64),
        ("model", pa.string()),
        ("input_length", I64),
        ("max_tokens", I64),
        ("input_tokens", I64),
        ("output_tokens", I64),
        ("reserved_cost", I64),
        ("actual_cost", I64),
        ("started_at", I64),
        ("confirmed_at", I64),
        ("votes_valid", I64),
        ("votes_invalid", I64),
    ]
)


@dataclass
class DecodedSnapshots:
    snapshots: pa.Table
    host_stats: pa.Table
    live: pa.Table
    quarantined: list[tuple[str, str]] = field(default_factory=list)  # (row_key, reason)


def strip_root_prefix(blob: bytes) -> tuple[bytes, bool]:
    """The protobuf bytes of a state blob, and whether the root prefix was present."""
    if blob.startswith(ROOT_PREFIX):
        return blob[len(ROOT_PREFIX) + ROOT_BYTES :], True
    return blob, False


def parse_snapshot(blob: bytes) -> tuple[StateSnapshotProto, bool]:
    """Decode one `state_data` blob; raises ValueError when it is not a snapshot."""
    if blob.startswith(ROOT_PREFIX) and len(blob) < len(ROOT_PREFIX) + ROOT_BYTES:
        raise ValueError("root prefix without its 32-byte state root")
    body, prefixed = strip_root_prefix(blob)
    try:
        snapshot = StateSnapshotProto.FromString(body)
    except DecodeError as exc:
        raise ValueError(f"state_data does not parse as StateSnapshotProto: {exc}") from None
    if not snapshot.HasField("state"):
        raise ValueError("state_data holds no escrow state")
    return snapshot, prefixed


def _record_row(record: InferenceRecordProto) -> dict:
    return {
        "inference_id": record.inference_id,
        "status": record.status,
        "executor_slot": record.executor_slot,
        "model": record.model,
        "input_length": record.input_length,
        "max_tokens": record.max_tokens,
        "input_tokens": record.input_tokens,
        "output_tokens": record.output_tokens,
        "reserved_cost": record.reserved_cost,
        "actual_cost": record.actual_cost,
        "started_at": record.started_at,
        "confirmed_at": record.confirmed_at,
        "votes_valid": record.votes_valid,
        "votes_invalid": record.votes_invalid,
    }


def decode_snapshots(batch: pa.RecordBatch | pa.Table) -> DecodedSnapshots:
    """Canonical `snapshots` rows (epoch_id, escrow_id, nonce, state_data, created_at) → decoded tables."""
    snaps, stats, live, bad = [], [], [], []
    for row in batch.to_pylist():
        key = {"epoch_id": row["epoch_id"], "escrow_id": row["escrow_id"], "snapshot_nonce": row["nonce"]}
        try:
            snapshot, prefixed = parse_snapshot(row["state_data"] or b"")
            records = {i: _record_row(r) | {"inference_id": i} for i, r in snapshot.state.inferences.items()}
            for i, raw in snapshot.committed_entries.items():
                # An entry of an id the snapshot lists as sealed is not live (docs/sources.md, checkpoints).
                if i not in records and i not in snapshot.sealed_nonces:
                    records[i] = _record_row(InferenceRecordProto.FromString(raw)) | {"inference_id": i}
        except (ValueError, DecodeError) as exc:
            bad.append((f"{row['escrow_id']}/{row['nonce']}", str(exc)))
            continue
        state = snapshot.state
        snaps.append(
            key
            | {
                "created_at": row["created_at"],
                "state_latest_nonce": state.latest_nonce,
                "phase": state.phase,
                "finalize_nonce": state.finalize_nonce or None,
                "balance": state.balance,
                "fees": state.fees,
                "token_price": state.config.token_price if state.HasField("config") else None,
                "vote_threshold": state.config.vote_threshold if state.HasField("config") else None,
                "group_size": len(state.group),
                "live_records": len(records),
                "root_prefixed": prefixed,
            }
        )
        for slot, hs in state.host_stats.items():
            stats.append(
                key
                | {
                    "slot_id": slot,
                    "missed": hs.missed,
                    "invalid": hs.invalid,
                    "cost": hs.cost,
                    "required_validations": hs.required_validations,
                    "completed_validations": hs.completed_validations,
                }
            )
        live += [key | r for r in records.values()]
    return DecodedSnapshots(
        pa.Table.from_pylist(snaps, schema=SNAPSHOT_SCHEMA),
        pa.Table.from_pylist(stats, schema=HOST_STATS_SCHEMA),
        pa.Table.from_pylist(live, schema=LIVE_SCHEMA),
        bad,
    )
