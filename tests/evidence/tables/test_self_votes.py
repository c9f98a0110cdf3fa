"""Self-verdicts by address (docs/sources.md, self-verdicts): a vote cast by the
executor's address from a slot other than the one that ran the answer is flagged as a self-verdict exactly like one
from its own slot, whichever guard the writing build had."""

from __future__ import annotations

import sqlite3

import polars as pl

from pipeline.sources.decode import devshard_pb2 as pb
from tests.helpers import frame, ingest


def _self_vote_copy(copy, store):
    """The copy's SQLite store with one vote on an answer of the focal host (holding two slots in the escrow) moved
    onto the focal host's other slot; returns (escrow, nonce, tx_index, executor slot, voter slot)."""
    truth, focal = copy.truth, copy.focal_host
    slots = truth.txs.filter(pl.col("slot").is_not_null()).select("escrow_id", "slot", "address").unique()
    mine = slots.filter(pl.col("address") == focal)
    focal_slots = mine.group_by("escrow_id").agg(pl.col("slot").alias("focal_slots"))
    finishes = truth.txs.filter(pl.col("kind") == "finish").select(
        "escrow_id", "inference_id", pl.col("slot").alias("executor_slot"), pl.col("address").alias("executor")
    )
    votes = (
        truth.txs.filter(pl.col("kind") == "vote")
        .join(finishes, on=["escrow_id", "inference_id"])
        .join(focal_slots, on="escrow_id")
        .filter((pl.col("executor") == focal) & (pl.col("focal_slots").list.len() >= 2))
        .sort("escrow_id", "nonce", "tx_index")
    )
    assert votes.height > 0, "the sample has votes on answers of a focal host holding two slots"
    vote = votes.row(0, named=True)
    other = next(s for s in vote["focal_slots"] if s != vote["executor_slot"])
    path = store / f"epoch_{vote['epoch_id']}.db"
    db = sqlite3.connect(path)
    try:
        (blob,) = db.execute(
            "SELECT txs_proto FROM diffs WHERE escrow_id = ? AND nonce = ?", [vote["escrow_id"], vote["nonce"]]
        ).fetchone()
        diff = pb.DiffContent.FromString(blob)
        diff.txs[vote["tx_index"]].validation_vote.voter_slot = other
        db.execute(
            "UPDATE diffs SET txs_proto = ? WHERE escrow_id = ? AND nonce = ?",
            [diff.SerializeToString(), vote["escrow_id"], vote["nonce"]],
        )
        db.commit()
    finally:
        db.close()
    return vote["escrow_id"], vote["nonce"], vote["tx_index"], vote["executor_slot"], other


def test_a_vote_by_the_executors_address_from_another_slot_is_a_self_verdict(timeline, tmp_path):
    copy = timeline.copy(last_epoch=4)
    store = copy.write_sqlite(tmp_path / "store")
    escrow, nonce, tx_index, executor_slot, voter_slot = _self_vote_copy(copy, store)
    ingest(tmp_path / "w.duckdb", store)
    rows = frame(
        tmp_path / "w.duckdb",
        f"SELECT kind, validator, executor, validator_slot, self_verdict FROM validations "
        f"WHERE escrow_id = '{escrow}' AND nonce = {nonce} AND tx_index = {tx_index}",
    )
    assert rows.rows() == [("vote", copy.focal_host, copy.focal_host, voter_slot, True)]
    assert voter_slot != executor_slot
    # flagged like the planted validation from the executor's other slot, and nothing cast by another address is
    flagged = frame(
        tmp_path / "w.duckdb", "SELECT kind, validator = executor AS own FROM validations WHERE self_verdict"
    )
    assert set(flagged["kind"]) == {"validation", "vote"} and flagged["own"].all()
