"""Protobuf encoding of diffs, including transactions our schema does not know."""

from __future__ import annotations

import hashlib

from pipeline.sources.decode import devshard_pb2 as pb

# Wire type 2 (length-delimited) of DiffContent field 2 (txs).
_TXS_TAG = bytes([(2 << 3) | 2])


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def unknown_member(field_number: int, body: bytes) -> bytes:
    """A DevshardTx whose only content is a length-delimited field the schema does not declare."""
    return varint((field_number << 3) | 2) + varint(len(body)) + body


def encode_tx(tx: pb.DevshardTx | bytes) -> bytes:
    if isinstance(tx, bytes):
        return tx
    return tx.SerializeToString(deterministic=True)


def encode_diff(txs: list[pb.DevshardTx | bytes]) -> bytes:
    """`diffs.txs_proto`: a DiffContent with only field 2 set, transactions in order."""
    out = bytearray()
    for tx in txs:
        body = encode_tx(tx)
        out += _TXS_TAG + varint(len(body)) + body
    return bytes(out)


def fake_bytes(*key: object, size: int = 32) -> bytes:
    """Deterministic opaque bytes (hashes, signatures, state roots) for a key."""
    seed = "\x1f".join(map(str, key)).encode()
    out = b""
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(seed + counter.to_bytes(4, "little")).digest()
        counter += 1
    return out[:size]


def signature(*key: object) -> bytes:
    """A 65-byte recoverable-signature lookalike."""
    return fake_bytes("sig", *key, size=64) + b"\x01"
