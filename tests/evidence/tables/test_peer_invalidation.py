"""peer-invalidation --control on a sample warehouse, checked against a recomputation from the public views."""

from __future__ import annotations

import polars as pl
import pytest
from scipy import stats as scipy_stats

from pipeline.evidence import EvidenceError
from tests.helpers import approx_equal as close
from tests.helpers import con_frame as frame
from tests.helpers import evidence as run


def test_peer_invalidation_against_one_control(sample):
    con, focal, _ = sample
    answers = frame(
        con,
        """
        SELECT escrow_id, executor, challenged OR status = 'invalidated' AS bad
        FROM inferences WHERE finished AND status <> 'timed_out' AND epoch_id = 3""",
    )
    escrows = answers.filter(pl.col("executor") == focal)["escrow_id"].unique().implode()
    peers = answers.filter(pl.col("escrow_id").is_in(escrows) & (pl.col("executor") != focal))
    control = peers.group_by("executor").len().sort("len", "executor", descending=[True, False])["executor"][0]
    shared = answers.filter(pl.col("executor") == control)["escrow_id"].unique().implode()
    kept = answers.filter(pl.col("escrow_id").is_in(escrows) & pl.col("escrow_id").is_in(shared))

    result = run(con, "peer-invalidation", focal, epoch=3, control=control)
    rows = {r["group"]: r for r in result.rows.iter_rows(named=True)}
    assert list(rows) == ["host", "control"]
    expected = {}
    for group, who in (("host", focal), ("control", control)):
        mine = kept.filter(pl.col("executor") == who)
        expected[group] = (mine["escrow_id"].n_unique(), mine.height, int(mine["bad"].sum()))
        assert (rows[group]["escrows"], rows[group]["answers"], rows[group]["challenged_or_invalidated"]) == expected[
            group
        ]
    (_, n1, a), (_, n2, c) = expected["host"], expected["control"]
    fisher = scipy_stats.fisher_exact([[a, n1 - a], [c, n2 - c]])
    close(result.stats["fisher"]["p_value"], float(fisher.pvalue), rel=1e-9)
    assert result.stats["cmh"]["strata_used"] + result.stats["cmh"]["strata_dropped"] == expected["host"][0]
    assert result.params["control"] == control and control in result.title
    # Without --control the second group is every other executor, in more answers.
    plain = {r["group"]: r for r in run(con, "peer-invalidation", focal, epoch=3).rows.iter_rows(named=True)}
    assert plain["others"]["answers"] > rows["control"]["answers"]


def test_a_control_that_never_shares_an_escrow_gives_an_empty_table(sample):
    con, focal, _ = sample
    # a slot holder of the warehouse with no slot in an escrow of epoch 3 where the host has one
    (control,) = con.execute(
        """
        SELECT min(address) FROM escrow_slots WHERE address NOT IN (
          SELECT s.address FROM escrow_slots s JOIN escrows e USING (escrow_id)
          WHERE e.epoch_id = 3 AND s.escrow_id IN (SELECT escrow_id FROM escrow_slots WHERE address = $focal))""",
        {"focal": focal},
    ).fetchone()
    assert control is not None
    result = run(con, "peer-invalidation", focal, epoch=3, control=control)
    assert result.rows.height == 0 and result.stats == {}
    assert f"control {control}" in result.notes[0]
    with pytest.raises(EvidenceError, match="is the host itself"):
        run(con, "peer-invalidation", focal, epoch=3, control=focal)
    # a control that is no address, or one the warehouse does not hold, is refused: never an empty table
    with pytest.raises(EvidenceError, match="^--control 'gonka1nobodyhere' is not a gonka1… address"):
        run(con, "peer-invalidation", focal, epoch=3, control="gonka1nobodyhere")
