"""Strict decoding of the diff log: a diff that is not what the writer stores is quarantined whole."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from tests.helpers import frame, ingest

runner = CliRunner()


def _diffs_with_start(store: Path) -> list[tuple[Path, str, int, bytes]]:
    """(epoch file, escrow, nonce, txs_proto) of the first diff of each escrow that starts an inference and holds
    more after it."""
    import sqlite3

    from pipeline.sources.decode import devshard_pb2 as pb

    found: dict[str, tuple[Path, str, int, bytes]] = {}
    for db_file in sorted(store.glob("epoch_*.db")):
        with sqlite3.connect(db_file) as db:
            for escrow, nonce, blob in db.execute("SELECT escrow_id, nonce, txs_proto FROM diffs ORDER BY 1, 2"):
                txs = pb.DiffContent.FromString(blob).txs
                if escrow not in found and len(txs) > 1 and any(tx.WhichOneof("tx") == "start_inference" for tx in txs):
                    found[escrow] = (db_file, escrow, nonce, blob)
    return list(found.values())


def _plant(db_file: Path, escrow: str, nonce: int, blob: bytes) -> None:
    import sqlite3

    with sqlite3.connect(db_file) as db:
        db.execute("UPDATE diffs SET txs_proto = ? WHERE escrow_id = ? AND nonce = ?", (blob, escrow, nonce))


def _tampered(name: str, blob: bytes, nonce: int) -> bytes:
    from pipeline.samples.wire import encode_diff
    from pipeline.sources.decode import devshard_pb2 as pb

    txs = list(pb.DiffContent.FromString(blob).txs)
    start = next(tx for tx in txs if tx.WhichOneof("tx") == "start_inference")
    if name == "another message":  # valid protobuf, but a DiffContent with nonce 150 and no txs
        return bytes.fromhex("089601")
    if name == "an overlong length":  # the first tx's length as a two-byte varint: parses, does not round-trip
        assert blob[0] == 0x12 and blob[1] < 0x80
        return bytes([0x12, blob[1] | 0x80, 0x00]) + blob[2:]
    if name == "two starts":
        return encode_diff(txs + [start])
    if name == "a start of another nonce":
        moved = pb.DevshardTx()
        moved.CopyFrom(start)
        moved.start_inference.inference_id = nonce + 7
        return encode_diff([moved if tx is start else tx for tx in txs])
    if name == "an inference from the future":
        later = pb.DevshardTx()
        later.validation.inference_id = nonce + 1000
        later.validation.validator_slot = 1
        return encode_diff(txs + [later])
    raise KeyError(name)


CASES = [
    ("another message", "sets DiffContent field(s) nonce"),
    ("an overlong length", "does not round-trip"),
    ("two starts", "holds 2 MsgStartInference"),
    ("a start of another nonce", "is not the diff's nonce"),
    ("an inference from the future", "started after this diff's nonce"),
]


@pytest.fixture(scope="module")
def tampered(timeline, tmp_path_factory):
    """The copy up to epoch 3 with one diff per case tampered, each in an escrow of its own (escrows replay
    apart), ingested once with --strict: ({case: (escrow, nonce)}, warehouse, the command's result)."""
    root = tmp_path_factory.mktemp("tampered")
    store = timeline.copy(last_epoch=3).write_sqlite(root / "store")
    found = _diffs_with_start(store)
    assert len(found) >= len(CASES), "the sample copy has too few diffs with a start and more transactions"
    planted = {}
    for (name, _), (db_file, escrow, nonce, blob) in zip(CASES, found, strict=False):
        _plant(db_file, escrow, nonce, _tampered(name, blob, nonce))
        planted[name] = (escrow, nonce)
    wh = root / "w.duckdb"
    return planted, wh, runner.invoke(app, ["ingest", str(store), "-w", str(wh), "--strict"])


@pytest.mark.parametrize("name, reason", CASES)
def test_a_diff_that_is_not_what_the_writer_stores_is_quarantined_whole(tampered, name, reason):
    planted, wh, result = tampered
    escrow, nonce = planted[name]
    assert result.exit_code != 0, result.output
    q = frame(wh, f"SELECT reason FROM quarantine WHERE row_key = '{escrow}/{nonce}'")
    assert q.height == 1 and reason in q["reason"][0], q
    # None of its transactions is kept; the escrow's other diffs are.
    txs = frame(wh, f"SELECT nonce FROM txs WHERE escrow_id = '{escrow}'")["nonce"].to_list()
    assert nonce not in txs and len(txs) > 0


def test_untouched_samples_quarantine_no_diff_for_strictness(tmp_path, timeline):
    """The strict checks reject nothing the writer really stores (only the samples' planted unknown tx kinds)."""
    store = tmp_path / "store"
    timeline.copy(last_epoch=4).write_sqlite(store)
    wh = tmp_path / "w.duckdb"
    ingest(wh, store)
    reasons = frame(wh, "SELECT DISTINCT reason FROM quarantine WHERE table_name = 'diffs'")["reason"].to_list()
    assert all(r.startswith("unknown tx kind") for r in reasons), reasons


def test_halves_alike_picks_the_blobs_whose_halves_are_compared_in_a_sliced_batch():
    """The vectorised guard of the doubled-transactions check: even length and the first byte again at
    the half, whatever the array's offset (a slice of a reader's batch), chunked or not."""
    import pyarrow as pa

    from pipeline.sources.decode.txs import _halves_alike

    blobs = [b"skip", b"abab", None, b"", b"x", b"abcabd", b"aXaY", b"abc"]
    array = pa.array(blobs, pa.binary())
    assert _halves_alike(array) == {1, 5, 6}  # 'abcabd' and 'aXaY' pass the guard; the full compare rejects them
    assert _halves_alike(array.slice(1)) == {0, 4, 5}
    assert _halves_alike(pa.chunked_array([array.slice(0, 3), array.slice(3)])) == {1, 5, 6}
    assert _halves_alike(pa.array(blobs, pa.large_binary()).slice(2)) == {3, 4}
