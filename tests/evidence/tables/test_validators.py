"""The validators table on a sample warehouse, every count checked against a recomputation from the
public views (`txs`, `inferences`)."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.evidence import EVIDENCE
from pipeline.evidence.stats import wilson_interval
from pipeline.output.render import render
from tests.helpers import approx_equal as close
from tests.helpers import build_at, idle_host
from tests.helpers import con_frame as frame
from tests.helpers import evidence as run


def verdicts_on(con, host: str, epoch: int | None) -> pl.DataFrame:
    """Validation and vote transactions on the host's inferences, from `txs` and `inferences` (not `validations`)."""
    return frame(
        con,
        """
        SELECT t.address AS validator, t.kind, t.valid, t.event_at, i.status
        FROM txs t JOIN inferences i ON i.escrow_id = t.escrow_id AND i.inference_id = t.inference_id
        WHERE t.kind IN ('validation', 'vote') AND i.executor = $host
          AND ($epoch::BIGINT IS NULL OR i.epoch_id = $epoch)""",
        {"host": host, "epoch": epoch},
    )


@pytest.mark.parametrize("epoch", [None, 3, 4])
def test_validators_match_a_recount_from_txs(sample, epoch):
    con, focal, builds = sample
    result = run(con, "validators", focal, epoch=epoch)
    txs = verdicts_on(con, focal, epoch)
    assert txs.height > 0
    txs = txs.with_columns(
        build=pl.Series(
            [build_at(builds, v, at) for v, at in txs.select("validator", "event_at").rows()], dtype=pl.String
        )
    )
    expected = txs.group_by("validator", "build").agg(
        validations=(pl.col("kind") == "validation").sum(),
        votes=(pl.col("kind") == "vote").sum(),
        verdicts=pl.len(),
        invalid=(~pl.col("valid")).sum(),
        resolved=pl.col("status").is_in(["validated", "invalidated"]).sum(),
        agreed=(
            (pl.col("valid") & (pl.col("status") == "validated"))
            | (~pl.col("valid") & (pl.col("status") == "invalidated"))
        ).sum(),
    )
    counts = ["validations", "votes", "verdicts", "invalid", "resolved", "agreed"]
    got = result.rows.select("validator", "build", *counts).sort("validator", "build", nulls_last=True)
    want = expected.select("validator", "build", *(pl.col(c).cast(pl.Int64) for c in counts)).sort(
        "validator", "build", nulls_last=True
    )
    assert got.rows() == want.rows()
    assert result.rows["verdicts"].to_list() == sorted(result.rows["verdicts"].to_list(), reverse=True)
    assert result.rows.columns == list(EVIDENCE["validators"].columns)
    for row in result.rows.iter_rows(named=True):
        close(row["invalid_share"], row["invalid"] / row["verdicts"])
        low, high = wilson_interval(row["invalid"], row["verdicts"])
        close(row["invalid_ci_low"], low)
        close(row["invalid_ci_high"], high)
        if row["resolved"]:
            close(row["agreement_rate"], row["agreed"] / row["resolved"])
            assert (row["agreement_ci_low"], row["agreement_ci_high"]) == pytest.approx(
                wilson_interval(row["agreed"], row["resolved"])
            )
        else:
            assert row["agreement_rate"] is None and row["agreement_ci_low"] is None
    # Every verdict of epoch-summary's verdict columns is some validator's.
    summary = run(con, "epoch-summary", focal, epoch=epoch).rows
    total = sum(
        int(summary[c].sum()) for c in ("validations_valid", "validations_invalid", "votes_valid", "votes_invalid")
    )
    assert result.stats["verdicts"] == int(result.rows["verdicts"].sum()) == total


def test_validators_name_builds_only_where_the_timeline_has_them(sample):
    con, focal, builds = sample
    rows = run(con, "validators", focal, epoch=3).rows
    with_builds = {w.host for w in builds}
    assert rows.filter(pl.col("build").is_not_null())["validator"].is_in(list(with_builds)).all()
    assert rows["build"].null_count() > 0 and rows["build"].null_count() < rows.height


def test_validators_of_a_host_without_answers_is_empty_with_a_note(sample):
    con, _, _ = sample
    idle = idle_host(con, 3)  # held by the warehouse, no slot in epoch 3
    result = run(con, "validators", idle, epoch=3)
    assert result.rows.height == 0 and result.stats == {}
    assert result.notes[0].startswith(f"host {idle} ") and "nothing" in result.notes[0]
    assert "_no rows_" in render(result, "markdown")
