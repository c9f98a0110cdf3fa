"""`snapshots.state_data` → the escrow state a host checkpointed: escrow facts, per-slot host stats
(and per-model rows where the line keeps them) and the records still live at the checkpoint.

Three formats (docs/sources.md, blob encodings), named in `checkpoint_format`:
- `protobuf`: a `StateSnapshotProto`; `protobuf_rooted`: the same behind the 26-byte marker
  `devshard-snapshot-root-v1\\0` and the 32-byte state root of newer builds (stripped);
- `json`: pre-devshard-v2 builds wrote UTF-8 JSON `{"state": EscrowState}` or a bare `EscrowState`
  (PascalCase state and host-stats keys, snake_case inside inference records).
Live records are in the state's `inferences` map and, as encoded `InferenceRecordProto` bytes, in
`committed_entries`; both are read (by inference id). `HostStatsProto` field 7 is told by its wire type:
length-delimited = per-model rows (`model_stats`), varint = PR #1757's `validated` with `finished` at 8;
`validated`/`finished` are NULL on lines without them. A blob that does not parse goes to quarantine
with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson
import pyarrow as pa
from google.protobuf.internal.wire_format import WIRETYPE_LENGTH_DELIMITED, WIRETYPE_VARINT
from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet

from pipeline.sources.decode.snapshot_pb2 import (
    EscrowStateProto,
    HostStatsCounterLineProto,
    HostStatsModelLineProto,
    InferenceRecordProto,
    StateSnapshotProto,
)

ROOT_PREFIX = b"devshard-snapshot-root-v1\x00"
ROOT_BYTES = 32

I64 = pa.int64()
CHECKPOINT_FORMATS = ("protobuf", "protobuf_rooted", "json")
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
        ("checkpoint_format", pa.string()),
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
        ("validated", I64),
        ("finished", I64),
    ]
)
MODEL_STATS_SCHEMA = pa.schema(
    [
        ("epoch_id", I64),
        ("escrow_id", pa.string()),
        ("slot_id", I64),
        ("snapshot_nonce", I64),
        ("model", pa.string()),
        ("prompt_tokens", I64),
        ("completion_tokens", I64),
        ("inference_count", I64),
        ("cost", I64),
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
RECORD_FIELDS = tuple(f.name for f in LIVE_SCHEMA if f.name not in ("epoch_id", "escrow_id", "snapshot_nonce"))
HOST_STAT_FIELDS = ("missed", "invalid", "cost", "required_validations", "completed_validations")


@dataclass
class DecodedSnapshots:
    snapshots: pa.Table
    host_stats: pa.Table
    live: pa.Table
    quarantined: list[tuple[str, str]] = field(default_factory=list)  # (row_key, reason)
    model_stats: pa.Table = field(default_factory=MODEL_STATS_SCHEMA.empty_table)


@dataclass
class Checkpoint:
    """One decoded `state_data` blob, whatever its format."""

    checkpoint_format: str
    state: dict  # state_latest_nonce, phase, finalize_nonce, balance, fees, token_price, vote_threshold, group_size
    host_stats: dict[int, dict]  # slot -> missed … completed_validations, validated, finished
    model_stats: list[dict]  # slot_id, model, prompt_tokens, completion_tokens, inference_count, cost
    records: dict[int, dict]  # inference id -> RECORD_FIELDS


def strip_root_prefix(blob: bytes) -> tuple[bytes, bool]:
    """The protobuf bytes of a state blob, and whether the root prefix was present."""
    if blob.startswith(ROOT_PREFIX):
        return blob[len(ROOT_PREFIX) + ROOT_BYTES :], True
    return blob, False


def parse_snapshot(blob: bytes) -> tuple[StateSnapshotProto, bool]:
    """Decode one protobuf `state_data` blob; raises ValueError when it is not a snapshot."""
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


def parse_checkpoint(blob: bytes) -> Checkpoint:
    """Decode one `state_data` blob of any format; raises ValueError when it is not a checkpoint."""
    if blob.lstrip()[:1] == b"{":
        return _json_checkpoint(blob)
    snapshot, prefixed = parse_snapshot(blob)
    state = snapshot.state
    records = {i: _record_row(r) for i, r in state.inferences.items()}
    for i, raw in snapshot.committed_entries.items():
        # An entry of an id the snapshot lists as sealed is not live (docs/sources.md, checkpoints).
        if i not in records and i not in snapshot.sealed_nonces:
            records[i] = _record_row(InferenceRecordProto.FromString(raw))
    host_stats, model_stats = _host_stats(state)
    return Checkpoint(
        "protobuf_rooted" if prefixed else "protobuf",
        {
            "state_latest_nonce": state.latest_nonce,
            "phase": state.phase,
            "finalize_nonce": state.finalize_nonce or None,
            "balance": state.balance,
            "fees": state.fees,
            "token_price": state.config.token_price if state.HasField("config") else None,
            "vote_threshold": state.config.vote_threshold if state.HasField("config") else None,
            "group_size": len(state.group),
        },
        host_stats,
        model_stats,
        {i: r | {"inference_id": i} for i, r in records.items()},
    )


def _record_row(record: InferenceRecordProto) -> dict:
    return {name: getattr(record, name) for name in RECORD_FIELDS}


def _host_stats(state: EscrowStateProto) -> tuple[dict[int, dict], list[dict]]:
    """Per-slot stats and per-model rows; field 7/8 read by wire type. On a #1757 line a slot whose
    counters are both 0 carries neither field, so the counters are 0 there, not NULL."""
    stats: dict[int, dict] = {}
    models: list[dict] = []
    counter_line = False
    for slot, hs in state.host_stats.items():
        row = {name: getattr(hs, name) for name in HOST_STAT_FIELDS} | {"validated": None, "finished": None}
        wire = {(f.field_number, f.wire_type) for f in UnknownFieldSet(hs) if f.field_number in (7, 8)}
        if (7, WIRETYPE_LENGTH_DELIMITED) in wire:
            line = HostStatsModelLineProto.FromString(hs.SerializeToString())
            models += [
                {
                    "slot_id": slot,
                    "model": m.model,
                    "prompt_tokens": m.prompt_tokens,
                    "completion_tokens": m.completion_tokens,
                    "inference_count": m.inference_count,
                    "cost": m.cost,
                }
                for m in line.model_stats
            ]
        elif (7, WIRETYPE_VARINT) in wire or (8, WIRETYPE_VARINT) in wire:
            counters = HostStatsCounterLineProto.FromString(hs.SerializeToString())
            row |= {"validated": counters.validated, "finished": counters.finished}
            counter_line = True
        stats[slot] = row
    if counter_line:
        for row in stats.values():
            row["validated"] = row["validated"] or 0
            row["finished"] = row["finished"] or 0
    return stats, models


def _json_int(value, what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"JSON checkpoint: {what} is not an integer ({value!r})")
    return value


def _json_checkpoint(blob: bytes) -> Checkpoint:
    """A pre-devshard-v2 checkpoint: `{"state": EscrowState}` or a bare `EscrowState` (Go's encoding/json:
    PascalCase fields without tags, snake_case tags inside inference records, map keys as strings)."""
    try:
        doc = orjson.loads(blob)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"state_data starts like JSON but is not JSON ({exc})") from None
    state = doc.get("state", doc) if isinstance(doc, dict) else None
    if not isinstance(state, dict) or not {"EscrowID", "Config", "Group", "HostStats", "Inferences"} & state.keys():
        raise ValueError("JSON checkpoint holds no escrow state")
    config: dict = _json_container(state, "Config", dict)
    group: list = _json_container(state, "Group", list)
    host_stats: dict[int, dict] = {}
    for slot, hs in _json_container(state, "HostStats", dict).items():
        if not isinstance(hs, dict):
            raise ValueError(f"JSON checkpoint: HostStats[{slot}] is not a JSON object")
        row = {
            name: _json_int(hs.get(_pascal(name)), f"HostStats[{slot}].{_pascal(name)}") for name in HOST_STAT_FIELDS
        }
        counters = {k: hs.get(_pascal(k)) for k in ("validated", "finished")}
        host_stats[_json_int(_key(slot), "a HostStats slot")] = row | {
            k: (None if v is None else _json_int(v, f"HostStats[{slot}].{_pascal(k)}")) for k, v in counters.items()
        }
    records: dict[int, dict] = {}
    for key, record in _json_container(state, "Inferences", dict).items():
        if not isinstance(record, dict):
            raise ValueError(f"JSON checkpoint: Inferences[{key}] is not a JSON object")
        i = _json_int(_key(key), "an Inferences key")
        records[i] = {
            name: (record.get(name) or "")
            if name == "model"
            else _json_int(record.get(name), f"Inferences[{key}].{name}")
            for name in RECORD_FIELDS
            if name != "inference_id"
        } | {"inference_id": i}
    finalize = _json_int(state.get("FinalizeNonce"), "FinalizeNonce")
    return Checkpoint(
        "json",
        {
            "state_latest_nonce": _json_int(state.get("LatestNonce"), "LatestNonce"),
            "phase": _json_int(state.get("Phase"), "Phase"),
            "finalize_nonce": finalize or None,
            "balance": _json_int(state.get("Balance"), "Balance"),
            "fees": _json_int(state.get("Fees"), "Fees"),
            "token_price": _json_int(config.get("TokenPrice"), "Config.TokenPrice") if config else None,
            "vote_threshold": _json_int(config.get("VoteThreshold"), "Config.VoteThreshold") if config else None,
            "group_size": len(group),
        },
        host_stats,
        [],
        records,
    )


def _json_container(state: dict, key: str, kind: type):
    """A JSON object or array of the state; absent or null is empty, anything else is not a checkpoint."""
    value = state.get(key)
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise ValueError(f"JSON checkpoint: {key} is not a JSON {'object' if kind is dict else 'array'}")
    return value


def _pascal(name: str) -> str:
    return "".join(part.title() for part in name.split("_"))


def _key(text: str) -> int | str:
    """A JSON object key that Go wrote from an integer map key."""
    return int(text) if text.lstrip("-").isdigit() else text


def decode_snapshots(batch: pa.RecordBatch | pa.Table) -> DecodedSnapshots:
    """Canonical `snapshots` rows (epoch_id, escrow_id, nonce, state_data, created_at) → decoded tables."""
    snaps, stats, models, live, bad = [], [], [], [], []
    for row in batch.to_pylist():
        key = {"epoch_id": row["epoch_id"], "escrow_id": row["escrow_id"], "snapshot_nonce": row["nonce"]}
        try:
            checkpoint = parse_checkpoint(row["state_data"] or b"")
        except (ValueError, DecodeError) as exc:
            bad.append((f"{row['escrow_id']}/{row['nonce']}", str(exc)))
            continue
        snaps.append(
            key
            | {"created_at": row["created_at"]}
            | checkpoint.state
            | {
                "live_records": len(checkpoint.records),
                "root_prefixed": checkpoint.checkpoint_format == "protobuf_rooted",
                "checkpoint_format": checkpoint.checkpoint_format,
            }
        )
        stats += [key | {"slot_id": slot} | hs for slot, hs in checkpoint.host_stats.items()]
        models += [key | m for m in checkpoint.model_stats]
        live += [key | r for r in checkpoint.records.values()]
    return DecodedSnapshots(
        pa.Table.from_pylist(snaps, schema=SNAPSHOT_SCHEMA),
        pa.Table.from_pylist(stats, schema=HOST_STATS_SCHEMA),
        pa.Table.from_pylist(live, schema=LIVE_SCHEMA),
        bad,
        pa.Table.from_pylist(models, schema=MODEL_STATS_SCHEMA),
    )
