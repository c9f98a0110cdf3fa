"""`diffs.txs_proto` → one row per transaction.

Each blob is a `devshard.v1.DiffContent` with only field 2 (`txs`) set. A
`DevshardTx` whose oneof member this schema does not know decodes with no member
set; it becomes kind `other` with the field number of its unknown field, never a
drop. Bytes that do not parse, parse but are not a stored DiffContent, or hold transactions that
contradict the diff's own key go to quarantine with the reason, and none of their transactions
is kept. ptars decodes the batch at once; protobuf, one by one, every diff ptars cannot vouch for
(docs/sources.md, "Two decoders, one result").
"""

from __future__ import annotations

import functools
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
from pipeline.sources.decode.devshard_pb2 import DevshardTx, DiffContent

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
# ptars costs about 2 ms more per batch than protobuf and less per diff: from about 300 to 400 diffs a
# batch decodes faster through it (bench/BENCHMARKS.md, 2026-12-07 ptars section).
PTARS_MIN_DIFFS = 384
# Every diff row of a batch, decoded or not, by the sha256 of its txs_proto (hex): what copies are compared by.
HELD_SCHEMA = pa.schema([("escrow_id", pa.string()), ("nonce", pa.int64()), ("digest", pa.string())])
EMPTY_DIGEST = hashlib.sha256(b"").hexdigest()  # a DiffContent without transactions encodes as no bytes


@dataclass
class DecodedDiffs:
    txs: pa.Table
    diffs: pa.Table
    held: pa.Table  # HELD_SCHEMA, one row per diff row of the batch (copied: no reader buffer stays alive)
    quarantined: list[tuple[str, str]] = field(default_factory=list)  # (row_key, reason)


def decode_diffs(batch: pa.RecordBatch | pa.Table, *, fast: bool | None = None) -> DecodedDiffs:
    """Decode a batch of canonical `diffs` rows (epoch_id, escrow_id, nonce, txs_proto, created_at).

    With ``fast`` (by default: a batch of at least PTARS_MIN_DIFFS rows), ptars (Rust, protobuf to Arrow)
    decodes the whole batch at once and a diff whose rows it cannot vouch for (`_ptars_rows`) is decoded
    one by one with protobuf (`_upb_rows`); without, every diff is: both give the same rows. The per-diff
    columns are gathered afterwards with Arrow `take` on the diff's position.
    """
    if fast is None:
        fast = batch.num_rows >= PTARS_MIN_DIFFS
    escrows, nonces = batch.column("escrow_id"), batch.column("nonce")
    blobs = batch.column("txs_proto")
    blob_list = [blob or b"" for blob in blobs.to_pylist()]
    digests = [hashlib.sha256(blob).hexdigest() for blob in blob_list]
    halves_alike = _halves_alike(blobs)
    if fast and blob_list:
        rows, vouched = _ptars_rows(blobs, blob_list, halves_alike)
        rest = np.flatnonzero(~vouched).tolist()
    else:
        rows, rest = _Rows.empty(), list(range(len(blob_list)))
    if rest:
        slow, quarantined = _upb_rows(blob_list, rest, halves_alike, escrows, nonces)
        rows = rows.merge(slow)
    else:
        quarantined = []
    take = pa.array(rows.pos, type=pa.int64())
    per_tx = _tx_columns(batch, take, rows.tx_index, rows.columns)
    decoded, tx_counts = rows.decoded.tolist(), rows.tx_counts.tolist()
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


@dataclass
class _Rows:
    """Transactions of some diffs of a batch, in (diff position, tx_index) order, and those diffs."""

    pos: np.ndarray  # the diff position of each transaction
    tx_index: np.ndarray
    columns: dict[str, pa.Array]  # TX_FIELDS
    decoded: np.ndarray  # positions of the diffs decoded, ascending
    tx_counts: np.ndarray  # their transaction counts

    @classmethod
    def empty(cls) -> _Rows:
        none = np.empty(0, np.int64)
        columns = {name: pa.array([], TX_SCHEMA.field(name).type) for name in TX_FIELDS}
        return cls(none, none, columns, none, none)

    def merge(self, other: _Rows) -> _Rows:
        """Both sets of rows, back in diff position order (each diff is in one of the two)."""
        if not len(self.decoded):
            return other
        pos = np.concatenate([self.pos, other.pos])
        order = pa.array(np.argsort(pos, kind="stable"))
        columns = {name: pa.concat_arrays([self.columns[name], other.columns[name]]).take(order) for name in TX_FIELDS}
        decoded = np.concatenate([self.decoded, other.decoded])
        by_diff = np.argsort(decoded, kind="stable")
        return _Rows(
            pos[order.to_numpy()],
            np.concatenate([self.tx_index, other.tx_index])[order.to_numpy()],
            columns,
            decoded[by_diff],
            np.concatenate([self.tx_counts, other.tx_counts])[by_diff],
        )


def _upb_rows(
    blob_list: list[bytes], positions: list[int], halves_alike: set[int], escrows: Any, nonces: Any
) -> tuple[_Rows, list[tuple[str, str]]]:
    """The diffs at `positions` decoded one by one with protobuf, and those quarantined (row_key, reason).

    Per transaction it does only the field extraction (`_tx_fields`, one tuple); each blob is
    checked by `_not_stored_content`."""
    fields: list[tuple] = []
    diff_of_tx: list[int] = []
    tx_index: list[int] = []
    decoded: list[int] = []  # positions of the diffs that parsed
    tx_counts: list[int] = []
    quarantined: list[tuple[str, str]] = []
    for pos in positions:
        blob = blob_list[pos]
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
    columns: list[Sequence[Any]] = list(zip(*fields, strict=True)) if fields else [[] for _ in TX_FIELDS]
    rows = _Rows(
        np.array(diff_of_tx, np.int64),
        np.array(tx_index, np.int64),
        {
            name: pa.array(values, type=TX_SCHEMA.field(name).type)
            for name, values in zip(TX_FIELDS, columns, strict=True)
        },
        np.array(decoded, np.int64),
        np.array(tx_counts, np.int64),
    )
    return rows, quarantined


# The DevshardTx oneof members in declaration order; index len(_MEMBERS) is a transaction with none set.
_MEMBERS = [f.name for f in DevshardTx.DESCRIPTOR.oneofs_by_name["tx"].fields]
_KINDS = pa.array([KIND[m] for m in _MEMBERS] + ["other"], pa.string())
_MEMBER_NAMES = pa.array([*_MEMBERS, "empty"], pa.string())
_NUMBERS = pa.array([FIELD_NUMBER[m] for m in _MEMBERS] + [None], pa.int64())
# Each TX_FIELDS column past field_number ← the (member, field) pairs it is read from, as in `_tx_fields`
# (at most one member is set in a vouched transaction, so the first present one is its value).
_SOURCES: dict[str, list[tuple[str, str]]] = {
    "inference_id": [
        (m, "inference_id")
        for m in (
            "start_inference",
            "confirm_start",
            "finish_inference",
            "timeout_inference",
            "validation",
            "validation_vote",
            "error_miss",
        )
    ],
    "slot": [
        ("validation", "validator_slot"),
        ("finish_inference", "executor_slot"),
        ("validation_vote", "voter_slot"),
        ("reveal_seed", "slot_id"),
    ],
    "valid": [("validation", "valid"), ("validation_vote", "vote_valid")],
    "timeout_reason": [("timeout_inference", "reason")],
    "votes": [("timeout_inference", "votes"), ("error_miss", "votes")],
    "model": [("start_inference", "model")],
    "input_length": [("start_inference", "input_length")],
    "max_tokens": [("start_inference", "max_tokens")],
    "started_at": [("start_inference", "started_at")],
    "confirmed_at": [("confirm_start", "confirmed_at")],
    "input_tokens": [("finish_inference", "input_tokens")],
    "output_tokens": [("finish_inference", "output_tokens")],
}
_INT64_MAX = pa.scalar(2**63 - 1, pa.uint64())  # compared as uint64: an int64 scalar would cast the column
_BISECT_FLOOR = 64  # a refused part this small goes to protobuf whole instead of being split again


@functools.cache
def _handler() -> Any:
    """ptars' DiffContent converter (ptars is imported here: not every command decodes diffs)."""
    from ptars import HandlerPool

    return HandlerPool([DiffContent.DESCRIPTOR.file]).get_for_message(DiffContent.DESCRIPTOR)


def _ptars_rows(
    blobs: pa.Array | pa.ChunkedArray, blob_list: list[bytes], halves_alike: set[int]
) -> tuple[_Rows, np.ndarray]:
    """The rows of the diffs ptars vouches for, and which those are (a mask over the batch).

    ptars drops unknown fields, keeps every oneof member it reads and is not protobuf, so a diff is
    vouched only when ptars parsed it, wrote it back byte for byte (so the blob holds no unknown,
    repeated, overlong or default-valued field: what protobuf reads from it is what ptars read),
    sets only txs, holds no transaction with two members, is not one byte string twice, and no value
    taken exceeds int64 (where protobuf's path fails the batch). Every other diff is `_upb_rows`' to
    decode, quarantine or fail on."""
    array = blobs.combine_chunks() if isinstance(blobs, pa.ChunkedArray) else blobs
    array = pc.fill_null(array.cast(pa.binary()), b"")  # an absent blob is an empty diff, as in `decode_diffs`
    parsed, refused = _parse(array)
    n = len(array)
    vouched = pc.equal(_handler().record_batch_to_array(parsed), array).to_numpy(zero_copy_only=False)
    vouched[refused] = False
    only_txs = pc.and_(
        pc.and_(pc.equal(parsed.column("nonce"), 0), pc.equal(pc.binary_length(parsed.column("escrow_id")), 0)),
        pc.and_(
            pc.equal(pc.binary_length(parsed.column("post_state_root")), 0),
            pc.equal(pc.list_value_length(parsed.column("sealed_inference_ids")), 0),
        ),
    )
    vouched &= only_txs.to_numpy(zero_copy_only=False)
    for at in halves_alike:
        blob = blob_list[at]
        vouched[at] &= not blob.startswith(memoryview(blob)[len(blob) // 2 :])
    lists = parsed.column("txs")
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    tx = lists.flatten()
    pos = np.repeat(np.arange(n, dtype=np.int64), lengths)
    members = {m: pc.struct_field(tx, m) for m in _MEMBERS}
    member = np.full(len(tx), len(_MEMBERS), np.int64)
    present = np.zeros(len(tx), np.int64)
    for i, m in enumerate(_MEMBERS):
        here = members[m].is_valid().to_numpy(zero_copy_only=False)
        member[here] = i
        present += here
    bad_tx = present > 1
    values = {
        name: pc.coalesce(*(pc.struct_field(members[m], f) for m, f in sources)) for name, sources in _SOURCES.items()
    }
    for column in values.values():
        if column.type == pa.uint64():
            bad_tx |= pc.fill_null(pc.greater(column, _INT64_MAX), False).to_numpy(zero_copy_only=False)
    vouched[pos[bad_tx]] = False
    keep = vouched[pos]
    kept = pa.array(keep)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    columns = {
        "kind": _KINDS.take(member[keep]),
        "member": _MEMBER_NAMES.take(member[keep]),
        "field_number": _NUMBERS.take(member[keep]),
    } | {name: column.filter(kept).cast(TX_SCHEMA.field(name).type) for name, column in values.items()}
    rows = _Rows(
        pos[keep],
        (np.arange(len(tx), dtype=np.int64) - np.repeat(starts, lengths))[keep],
        {name: columns[name] for name in TX_FIELDS},
        np.flatnonzero(vouched).astype(np.int64),
        lengths[vouched],
    )
    return rows, vouched


def _parse(blobs: pa.BinaryArray) -> tuple[pa.RecordBatch, list[int]]:
    """ptars' record batch of the blobs, and the positions of those it refused (read as empty instead).
    ptars refuses a whole array for one bad blob, so a refused array is split until the bad ones are found."""
    try:
        return _handler().array_to_record_batch(blobs), []
    except ValueError:
        pass
    refused = _refused(blobs, 0) or list(range(len(blobs)))  # no half refused: none is vouched for
    mask = np.zeros(len(blobs), bool)
    mask[refused] = True
    return _handler().array_to_record_batch(pc.if_else(pa.array(mask), pa.scalar(b"", pa.binary()), blobs)), refused


def _refused(blobs: pa.BinaryArray, offset: int) -> list[int]:
    """Positions (from `offset`) of the blobs in a part ptars refused: each half is tried again."""
    if len(blobs) <= _BISECT_FLOOR:
        return list(range(offset, offset + len(blobs)))
    half = len(blobs) // 2
    refused: list[int] = []
    for start, part in ((0, blobs.slice(0, half)), (half, blobs.slice(half))):
        try:
            _handler().array_to_record_batch(part)
        except ValueError:
            refused += _refused(part, offset + start)
    return refused


def _tx_columns(
    batch: pa.RecordBatch | pa.Table, take: pa.Array, tx_index: np.ndarray, columns: dict[str, pa.Array]
) -> dict:
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
    return per_tx | columns


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
