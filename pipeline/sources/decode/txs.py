"""`diffs.txs_proto` → one row per transaction.

Each blob is a `devshard.v1.DiffContent` with only field 2 (`txs`) set. A
`DevshardTx` whose oneof member this schema does not know decodes with no member
set; it becomes kind `other` with the field number of its unknown field, never a
drop. Bytes that do not parse, parse but are not a stored DiffContent, or hold transactions that
contradict the diff's own key go to quarantine with the reason, and none of their transactions
is kept.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet

from pipeline.core.arrowbuf import value_bytes
from pipeline.sources.decode.devshard_pb2 import DiffContent

# oneof member → public `txs.kind` (docs/data-model.md, txs). Members that carry no quality
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
        ("epoch_id", pa.int64()),
        ("escrow_id", pa.string()),
        ("nonce", pa.int64()),
        ("tx_index", pa.int64()),
        ("kind", pa.string()),
        ("member", pa.string()),
        ("field_number", pa.int64()),
        ("inference_id", pa.int64()),
        ("slot", pa.int64()),
        ("valid", pa.bool_()),
        ("timeout_reason", pa.int64()),
        ("votes", pa.list_(VOTE)),
        ("model", pa.string()),
        ("input_length", pa.int64()),
        ("max_tokens", pa.int64()),
        ("started_at", pa.int64()),
        ("confirmed_at", pa.int64()),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("diff_created_at", pa.int64()),
    ]
)
DIFF_SCHEMA = pa.schema(
    [
        ("epoch_id", pa.int64()),
        ("escrow_id", pa.string()),
        ("nonce", pa.int64()),
        ("created_at", pa.int64()),
        ("tx_count", pa.int64()),
        ("digest", pa.string()),
    ]
)
# Every diff row of a batch, decoded or not, by the sha256 of its txs_proto (hex): what copies are compared by.
HELD_SCHEMA = pa.schema([("escrow_id", pa.string()), ("nonce", pa.int64()), ("digest", pa.string())])
EMPTY_DIGEST = hashlib.sha256(b"").hexdigest()  # a DiffContent without transactions encodes as no bytes


@dataclass
class DecodedDiffs:
    txs: pa.Table
    diffs: pa.Table
    held: pa.Table  # HELD_SCHEMA, one row per diff row of the batch (copied: no reader buffer stays alive)
    quarantined: list[tuple[str, str]] = field(default_factory=list)  # (row_key, reason)


def decode_diffs(batch: pa.RecordBatch | pa.Table) -> DecodedDiffs:
    """Decode a batch of canonical `diffs` rows (epoch_id, escrow_id, nonce, txs_proto, created_at).

    This loop is the ingest's hottest Python code, so per transaction it does only the field
    extraction (`_tx_fields`, one tuple); the per-diff columns are gathered afterwards with
    Arrow `take` on the diff's position. Each blob's sha256 is taken in the same pass.
    """
    fields: list[tuple] = []
    diff_of_tx: list[int] = []
    tx_index: list[int] = []
    decoded: list[int] = []  # positions of the diffs that parsed
    tx_counts: list[int] = []
    quarantined: list[tuple[str, str]] = []
    digests: list[str] = []
    escrows, nonces = batch.column("escrow_id"), batch.column("nonce")
    blobs = batch.column("txs_proto")
    halves_alike = _halves_alike(blobs)
    for pos, blob in enumerate(blobs.to_pylist()):
        blob = blob or b""
        digests.append(hashlib.sha256(blob).hexdigest())
        try:
            content = DiffContent.FromString(blob)
            problem = _not_stored_content(content, blob, pos in halves_alike)
        except DecodeError as exc:
            problem = f"txs_proto does not decode: {exc}"
        if problem:
            quarantined.append((f"{escrows[pos].as_py()}/{nonces[pos].as_py()}", problem))
            continue
        txs = content.txs
        n = len(txs)
        decoded.append(pos)
        tx_counts.append(n)
        fields.extend(map(_tx_fields, txs))
        diff_of_tx.extend([pos] * n)
        tx_index.extend(range(n))
    take = pa.array(diff_of_tx, type=pa.int64())
    per_tx = _tx_columns(batch, take, tx_index, fields)
    contradicted = _contradicting_diffs(per_tx, take)
    if contradicted:
        quarantined += [(f"{escrows[pos].as_py()}/{nonces[pos].as_py()}", why) for pos, why in contradicted.items()]
        keep_tx = pc.invert(pc.is_in(take, value_set=pa.array(list(contradicted), pa.int64())))
        per_tx = {name: column.filter(keep_tx) for name, column in per_tx.items()}
        decoded_kept = [(pos, n) for pos, n in zip(decoded, tx_counts, strict=True) if pos not in contradicted]
        decoded, tx_counts = [p for p, _ in decoded_kept], [n for _, n in decoded_kept]
    diffs, held = _diff_tables(batch, decoded, tx_counts, digests)
    return DecodedDiffs(
        txs=pa.Table.from_arrays([per_tx[f.name] for f in TX_SCHEMA], schema=TX_SCHEMA),
        diffs=diffs,
        held=held,
        quarantined=quarantined,
    )


def _tx_columns(batch: pa.RecordBatch | pa.Table, take: pa.Array, tx_index: list[int], fields: list[tuple]) -> dict:
    """The transactions' columns: their diff's columns taken at each transaction's diff position, then the
    transaction's own fields."""
    per_tx = {
        name: batch.column(source).take(take)
        for name, source in (
            ("epoch_id", "epoch_id"),
            ("escrow_id", "escrow_id"),
            ("nonce", "nonce"),
            ("diff_created_at", "created_at"),
        )
    }
    per_tx["tx_index"] = pa.array(tx_index, type=pa.int64())
    columns: list[Sequence[Any]] = list(zip(*fields, strict=True)) if fields else [[] for _ in TX_FIELDS]
    return per_tx | {
        name: pa.array(values, type=TX_SCHEMA.field(name).type) for name, values in zip(TX_FIELDS, columns, strict=True)
    }


def _diff_tables(
    batch: pa.RecordBatch | pa.Table, decoded: list[int], tx_counts: list[int], digests: list[str]
) -> tuple[pa.Table, pa.Table]:
    """The decoded diffs (DIFF_SCHEMA) and every diff row of the batch with its digest (HELD_SCHEMA)."""
    kept = pa.array(decoded, type=pa.int64())
    digest = pa.array(digests, pa.string())
    diffs = pa.Table.from_arrays(
        [
            batch.column("epoch_id").take(kept),
            batch.column("escrow_id").take(kept),
            batch.column("nonce").take(kept),
            batch.column("created_at").take(kept),
            pa.array(tx_counts, type=pa.int64()),
            digest.take(kept),
        ],
        schema=DIFF_SCHEMA,
    )
    every = pa.array(range(batch.num_rows), pa.int64())
    held = pa.Table.from_arrays(
        [batch.column("escrow_id").take(every), batch.column("nonce").take(every), digest], schema=HELD_SCHEMA
    )
    return diffs, held


TX_FIELDS = [n for n in TX_SCHEMA.names if n not in ("epoch_id", "escrow_id", "nonce", "tx_index", "diff_created_at")]
_TOP_LEVEL = ("nonce", "escrow_id", "post_state_root", "sealed_inference_ids")


def _halves_alike(blobs: pa.Array | pa.ChunkedArray) -> set[int]:
    """Positions of the blobs that may be one byte string twice (even length, the first byte again at
    the half), found over the whole batch at once: the only ones whose halves are compared."""
    offsets, data = value_bytes(blobs)
    starts, lengths = offsets[:-1], np.diff(offsets)
    even = np.flatnonzero((lengths >= 2) & (lengths % 2 == 0))
    alike = data[starts[even]] == data[starts[even] + lengths[even] // 2]
    return set(even[alike].tolist())


def _not_stored_content(content: DiffContent, blob: bytes, halves_alike: bool) -> str | None:
    """Why bytes that parse as protobuf are still not a stored DiffContent, or None.

    Protobuf parses almost anything (``08 96 01`` is a DiffContent with nonce 150 and no
    transactions), so a blob must also be what the writer stores: only field 2 (txs) set,
    nothing unknown at the top level, and the same size when re-encoded (no duplicated or overlong fields)."""
    if content.nonce or content.escrow_id or content.post_state_root or content.sealed_inference_ids:
        others = [name for name in _TOP_LEVEL if getattr(content, name)]
        return f"txs_proto sets DiffContent field(s) {', '.join(others)}; a stored diff holds only txs"
    unknown = UnknownFieldSet(content)
    if len(unknown):
        numbers = sorted({f.field_number for f in unknown})
        return f"txs_proto holds unknown DiffContent field(s) {', '.join(map(str, numbers))}"
    if content.ByteSize() != len(blob):
        return f"txs_proto does not round-trip as DiffContent ({len(blob)} bytes, {content.ByteSize()} re-encoded)"
    half = len(blob) // 2
    doubled = halves_alike and blob.startswith(memoryview(blob)[half:])
    if doubled and DiffContent.FromString(blob[:half]).txs:  # compared in place: no copy of either half
        # A writer appends a diff's transactions once; the same list twice would count each verdict twice.
        return f"txs_proto holds its {len(content.txs) // 2} transaction(s) twice"
    return None


def _contradicting_diffs(per_tx: dict[str, pa.Array], diff_pos: pa.Array) -> dict[int, str]:
    """Diffs whose transactions contradict the diff's own key, by position: more than one
    MsgStartInference, a start whose inference_id is not the diff's nonce, or a transaction about
    an inference started after this diff (an inference's id is the nonce of the diff that started
    it, so no diff can name a later one). Checked over the whole batch at once: per-transaction
    Python checks would double the decode time."""
    import polars as pl

    txs = pl.DataFrame(
        {"pos": diff_pos, "kind": per_tx["kind"], "inference_id": per_tx["inference_id"], "nonce": per_tx["nonce"]}
    )
    bad = (
        txs.group_by("pos")
        .agg(
            starts=(pl.col("kind") == "start").sum(),
            wrong_start=pl.col("inference_id")
            .filter((pl.col("kind") == "start") & (pl.col("inference_id") != pl.col("nonce")))
            .first(),
            later=pl.col("inference_id").filter(pl.col("inference_id") > pl.col("nonce")).first(),
            nonce=pl.col("nonce").first(),
        )
        .filter((pl.col("starts") > 1) | pl.col("wrong_start").is_not_null() | pl.col("later").is_not_null())
    )

    def why(starts: int, wrong_start: int | None, later: int | None, nonce: int) -> str:
        if starts > 1:
            return f"txs_proto holds {starts} MsgStartInference; a diff holds at most one"
        if wrong_start is not None:
            return f"MsgStartInference.inference_id {wrong_start} is not the diff's nonce {nonce}"
        return f"txs_proto names inference {later}, started after this diff's nonce {nonce}"

    return {pos: why(*rest) for pos, *rest in bad.sort("pos").iter_rows()}


# Fields between tx_index and diff_created_at, in TX_SCHEMA order:
# kind, member, field_number, inference_id, slot, valid, timeout_reason, votes,
# model, input_length, max_tokens, started_at, confirmed_at, input_tokens, output_tokens
def _tx_fields(tx) -> tuple:
    """One transaction's fields, one tuple (the hot loop of the decode: one branch per member, no call)."""
    member = tx.WhichOneof("tx")
    no = None  # a local, as fast as the constant, keeps each row of fields on one line
    if member == "validation":
        m = tx.validation
        return ("validation", member, 5, m.inference_id, m.validator_slot, m.valid, no, no, no, no, no, no, no, no, no)
    if member == "start_inference":
        m = tx.start_inference
        return (
            "start",
            member,
            1,
            m.inference_id,
            no,
            no,
            no,
            no,
            m.model,
            m.input_length,
            m.max_tokens,
            m.started_at,
            no,
            no,
            no,
        )
    if member == "confirm_start":
        m = tx.confirm_start
        return ("confirm", member, 2, m.inference_id, no, no, no, no, no, no, no, no, m.confirmed_at, no, no)
    if member == "finish_inference":
        m = tx.finish_inference
        return (
            "finish",
            member,
            3,
            m.inference_id,
            m.executor_slot,
            no,
            no,
            no,
            no,
            no,
            no,
            no,
            no,
            m.input_tokens,
            m.output_tokens,
        )
    if member == "validation_vote":
        m = tx.validation_vote
        return ("vote", member, 6, m.inference_id, m.voter_slot, m.vote_valid, no, no, no, no, no, no, no, no, no)
    if member == "timeout_inference":
        m = tx.timeout_inference
        return ("timeout", member, 4, m.inference_id, no, no, m.reason, _votes(m.votes), no, no, no, no, no, no, no)
    if member == "error_miss":
        m = tx.error_miss
        return ("error_miss", member, 14, m.inference_id, no, no, no, _votes(m.votes), no, no, no, no, no, no, no)
    if member is None:
        numbers = sorted({f.field_number for f in UnknownFieldSet(tx)})
        number = numbers[0] if numbers else None
        member = f"field_{number}" if number else "empty"
        return ("other", member, number, no, no, no, no, no, no, no, no, no, no, no, no)
    slot = tx.reveal_seed.slot_id if member == "reveal_seed" else None
    return (KIND[member], member, FIELD_NUMBER[member], no, slot, no, no, no, no, no, no, no, no, no, no)


def _votes(votes) -> list[dict]:
    return [{"voter_slot": v.voter_slot, "accept": v.accept} for v in votes]
