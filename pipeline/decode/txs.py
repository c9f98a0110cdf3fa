"""`diffs.txs_proto` → one row per transaction.

Each blob is a `devshard.v1.DiffContent` with only field 2 (`txs`) set. A
`DevshardTx` whose oneof member this schema does not know decodes with no member
set; it becomes kind `other` with the field number of its unknown field, never a
drop. Bytes that do not parse go to quarantine with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet

from pipeline.decode.devshard_pb2 import DiffContent

# oneof member → public `txs.kind` (design.md §5). Members that carry no quality
# signal (deprecated reveal_seed, height-sync plumbing) are kept as `other`.
KIND = {
    "start_inference": "start",
    "confirm_start": "confirm",
    "finish_inference": "finish",
    "timeout_inference": "timeout",
    "validation": "validation",
    "validation_vote": "vote",
    "error_miss": "error_miss",
    "finalize_round": "finalize",
    "reveal_seed": "other",
    "force_height_sync_turn": "other",
    "heartbeat": "other",
    "height_ack": "other",
}
FIELD_NUMBER = {f.name: f.number for f in DiffContent.DESCRIPTOR.fields_by_name["txs"].message_type.fields}

VOTE = pa.struct([("voter_slot", pa.int64()), ("accept", pa.bool_())])
TX_SCHEMA = pa.schema(
    [
        ("epoch_id", pa.int64()), ("escrow_id", pa.string()), ("nonce", pa.int64()), ("tx_index", pa.int64()),
        ("kind", pa.string()), ("member", pa.string()), ("field_number", pa.int64()),
        ("inference_id", pa.int64()), ("slot", pa.int64()), ("valid", pa.bool_()),
        ("timeout_reason", pa.int64()), ("votes", pa.list_(VOTE)),
        ("model", pa.string()), ("input_length", pa.int64()), ("max_tokens", pa.int64()),
        ("started_at", pa.int64()), ("confirmed_at", pa.int64()),
        ("input_tokens", pa.int64()), ("output_tokens", pa.int64()), ("diff_created_at", pa.int64()),
    ]
)
DIFF_SCHEMA = pa.schema(
    [("epoch_id", pa.int64()), ("escrow_id", pa.string()), ("nonce", pa.int64()),
     ("created_at", pa.int64()), ("tx_count", pa.int64())]
)


@dataclass
class DecodedDiffs:
    txs: pa.Table
    diffs: pa.Table
    quarantined: list[tuple[str, str]] = field(default_factory=list)  # (row_key, reason)


def decode_diffs(batch: pa.RecordBatch | pa.Table) -> DecodedDiffs:
    """Decode a batch of canonical `diffs` rows (epoch_id, escrow_id, nonce, txs_proto, created_at)."""
    cols = {name: [] for name in TX_SCHEMA.names}
    diff_cols = {name: [] for name in DIFF_SCHEMA.names}
    quarantined: list[tuple[str, str]] = []
    epochs = batch.column("epoch_id").to_pylist()
    escrows = batch.column("escrow_id").to_pylist()
    nonces = batch.column("nonce").to_pylist()
    blobs = batch.column("txs_proto").to_pylist()
    created = batch.column("created_at").to_pylist()
    append = {name: cols[name].append for name in cols}
    for epoch_id, escrow_id, nonce, blob, created_at in zip(epochs, escrows, nonces, blobs, created):
        try:
            diff = DiffContent.FromString(blob or b"")
        except DecodeError as exc:
            quarantined.append((f"{escrow_id}/{nonce}", f"txs_proto does not decode: {exc}"))
            continue
        n = len(diff.txs)
        for key, value in (("epoch_id", epoch_id), ("escrow_id", escrow_id), ("nonce", nonce),
                           ("created_at", created_at), ("tx_count", n)):
            diff_cols[key].append(value)
        for index, tx in enumerate(diff.txs):
            row = _tx_row(tx)
            append["epoch_id"](epoch_id)
            append["escrow_id"](escrow_id)
            append["nonce"](nonce)
            append["tx_index"](index)
            append["diff_created_at"](created_at)
            for name in _TX_FIELDS:
                append[name](row.get(name))
    return DecodedDiffs(
        txs=pa.Table.from_pydict(cols, schema=TX_SCHEMA),
        diffs=pa.Table.from_pydict(diff_cols, schema=DIFF_SCHEMA),
        quarantined=quarantined,
    )


_TX_FIELDS = [n for n in TX_SCHEMA.names if n not in ("epoch_id", "escrow_id", "nonce", "tx_index", "diff_created_at")]


def _tx_row(tx) -> dict:
    member = tx.WhichOneof("tx")
    if member is None:
        numbers = sorted({f.field_number for f in UnknownFieldSet(tx)})
        number = numbers[0] if numbers else None
        return {"kind": "other", "member": f"field_{number}" if number else "empty", "field_number": number}
    msg = getattr(tx, member)
    row = {"kind": KIND[member], "member": member, "field_number": FIELD_NUMBER[member]}
    if member == "start_inference":
        row.update(inference_id=msg.inference_id, model=msg.model, input_length=msg.input_length,
                   max_tokens=msg.max_tokens, started_at=msg.started_at)
    elif member == "confirm_start":
        row.update(inference_id=msg.inference_id, confirmed_at=msg.confirmed_at)
    elif member == "finish_inference":
        row.update(inference_id=msg.inference_id, slot=msg.executor_slot,
                   input_tokens=msg.input_tokens, output_tokens=msg.output_tokens)
    elif member == "validation":
        row.update(inference_id=msg.inference_id, slot=msg.validator_slot, valid=msg.valid)
    elif member == "validation_vote":
        row.update(inference_id=msg.inference_id, slot=msg.voter_slot, valid=msg.vote_valid)
    elif member == "timeout_inference":
        row.update(inference_id=msg.inference_id, timeout_reason=msg.reason,
                   votes=[{"voter_slot": v.voter_slot, "accept": v.accept} for v in msg.votes])
    elif member == "error_miss":
        row.update(inference_id=msg.inference_id,
                   votes=[{"voter_slot": v.voter_slot, "accept": v.accept} for v in msg.votes])
    elif member == "reveal_seed":
        row.update(slot=msg.slot_id)
    return row
