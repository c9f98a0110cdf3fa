"""Settlement quorum by distinct validators (gonka-ai/gonka #1356; docs/sources.md, settlement quorum): the chain
counts floor(2N/3) + 1 signing slots, but one validator's signature serves every slot it holds, so per escrow the view
escrow_signers sets the distinct signers beside the signing slots and names escrows whose slot quorum rests on fewer
distinct validators than the quorum."""

from __future__ import annotations

import polars as pl

from pipeline.warehouse.database import fetch_frame


def test_distinct_signers_against_the_slot_quorum(sample):
    con, _, _ = sample
    view = fetch_frame(con, "SELECT * FROM escrow_signers ORDER BY escrow_id")
    assert view.height > 0
    # independently: the sample's hosts sign the last finalised state from every slot of the group
    slots = fetch_frame(con, "SELECT escrow_id, slot_id, address FROM escrow_slots")
    groups = slots.group_by("escrow_id").agg(n=pl.len(), validators=pl.col("address").n_unique())
    want = view.select("escrow_id").join(groups, on="escrow_id", how="left").sort("escrow_id")
    assert view["signing_slots"].to_list() == want["n"].to_list() == view["group_size"].to_list()
    assert view["distinct_signers"].to_list() == want["validators"].to_list()
    quorum = [2 * n // 3 + 1 for n in want["n"].to_list()]
    assert view["quorum"].to_list() == quorum
    below = [v < q for v, q in zip(want["validators"].to_list(), quorum, strict=True)]
    assert view["below_distinct_quorum"].to_list() == below
    assert set(below) == {True, False}  # the sample's multi-slot validators leave some escrows below


def test_epoch_summary_names_the_hosts_escrows_settled_below_the_distinct_quorum(sample):
    from pipeline.evidence import compute

    con, focal, _ = sample
    want = fetch_frame(
        con,
        "SELECT s.escrow_id FROM escrow_signers s WHERE s.status = 'settled' AND s.below_distinct_quorum "
        "AND s.escrow_id IN (SELECT escrow_id FROM escrow_slots WHERE address = $host) ORDER BY 1",
        {"host": focal},
    )["escrow_id"].to_list()
    assert want
    result = compute("epoch-summary", con, host=focal, command="test")
    assert result.stats["below_distinct_quorum"] == len(want)
    (note,) = [n for n in result.notes if "#1356" in n]
    assert all(e in note for e in want[:10])
