"""Network evidence tables: additive partials per partition warehouse, reduced with the same statistics.

Each table is a `NetworkTable`: `partial(con, params)` runs on one partition warehouse (on a worker) and
returns rows that add up over partitions (every escrow lies in one partition, so per-escrow rows are
simply concatenated); `reduce(frames, params)` runs on the client and computes the statistics with
pipeline/evidence/stats.py. `peer-invalidation` is the single-host table itself: its per-escrow answers
(sql/evidence/peer_answers.sql) are the partial, and the same function computes the table from them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.stats import CONFIDENCE, holm_adjust, interval_stat, wilson_interval, with_wilson
from pipeline.evidence.tables.peer_invalidation import peer_answers, peer_invalidation_of
from pipeline.evidence.window import EvidenceError, Window
from pipeline.warehouse.database import fetch_frame

ALPHA = 1 - CONFIDENCE
COUNTS = (
    "answers",
    "challenged_or_invalidated",
    "invalidated",
    "misses_refused",
    "misses_execution",
    "misses_error",
)


@dataclass(frozen=True)
class NetworkParams:
    """What a network table is asked: the window (epoch) and the table's options."""

    window: Window
    host: str | None = None
    control: str | None = None
    by_escrow: bool = False


@dataclass(frozen=True)
class NetworkTable:
    name: str
    summary: str
    partial: Callable[[duckdb.DuckDBPyConnection, NetworkParams], pl.DataFrame]
    reduce: Callable[[list[pl.DataFrame], NetworkParams], EvidenceResult]
    needs_host: bool = False
    chart: Callable[[EvidenceResult], dict | None] | None = None


# --- executors ---------------------------------------------------------------------------------------


def executor_partial(con: duckdb.DuckDBPyConnection, params: NetworkParams) -> pl.DataFrame:
    return fetch_frame(con, sql_text("network/executor_counts.sql"), {"epoch": params.window.epoch})


def binomial_p(successes: int, n: int, p0: float) -> float:
    """Two-sided exact binomial test of `successes` of `n` against the rate `p0` (scipy)."""
    from scipy.stats import binomtest

    if n == 0 or p0 in (0.0, 1.0):
        return 1.0 if n == 0 or successes == round(p0 * n) else 0.0
    return float(binomtest(successes, n, p0).pvalue)


def funnel(rows: pl.DataFrame, successes: str, n: str, prefix: str) -> tuple[pl.DataFrame, dict[str, Any]]:
    """`rows` with `{prefix}_p_holm` and `{prefix}_flag` (high / low / empty): each executor's rate against
    the network's pooled rate, by an exact binomial test, Holm-adjusted over the executors."""
    total_s, total_n = int(rows[successes].sum() or 0), int(rows[n].sum() or 0)
    pooled = total_s / total_n if total_n else float("nan")
    family = {
        r["executor"]: {"test": "binomial exact", "p_value": binomial_p(r[successes], r[n], pooled)}
        for r in rows.iter_rows(named=True)
        if r[n] > 0 and total_n
    }
    described = holm_adjust({"funnel": family})
    p_holm = [family[e].get("p_holm", family[e]["p_value"]) if e in family else None for e in rows["executor"]]
    rows = rows.with_columns(pl.Series(f"{prefix}_p_holm", p_holm, dtype=pl.Float64))
    rate = pl.col(successes) / pl.col(n)
    rows = rows.with_columns(
        pl.when(pl.col(f"{prefix}_p_holm") < ALPHA)
        .then(pl.when(rate > pooled).then(pl.lit("high")).otherwise(pl.lit("low")))
        .otherwise(pl.lit(""))
        .alias(f"{prefix}_flag")
    )
    low, high = wilson_interval(total_s, total_n) if total_n else (None, None)
    stat = {
        "method": "exact binomial test per executor against the pooled rate",
        "alternative": "two-sided",
        "pooled_rate": pooled if total_n else None,
        "pooled_ci": [low, high],
        "of": f"{successes} / {n}",
        "alpha": ALPHA,
        "correction": "Holm over the executors" if described else "none (fewer than two executors)",
        "flagged": int((rows[f"{prefix}_flag"] != "").sum()),
    }
    return rows, stat


def executors_reduce(frames: list[pl.DataFrame], params: NetworkParams) -> EvidenceResult:
    counts = (
        pl.concat(frames) if frames else pl.DataFrame(schema={"executor": pl.String, **dict.fromkeys(COUNTS, pl.Int64)})
    )
    rows = (
        counts.group_by("executor")
        .agg(*(pl.col(c).sum().cast(pl.Int64) for c in COUNTS))
        .with_columns(misses=pl.col("misses_refused") + pl.col("misses_execution") + pl.col("misses_error"))
        .with_columns(assigned=pl.col("answers") + pl.col("misses"))
        .sort("executor")
    )
    rows = rows.with_columns(
        rate=pl.when(pl.col("answers") > 0).then(pl.col("challenged_or_invalidated") / pl.col("answers")),
        invalidated_rate=pl.when(pl.col("answers") > 0).then(pl.col("invalidated") / pl.col("answers")),
        miss_rate=pl.when(pl.col("assigned") > 0).then(pl.col("misses") / pl.col("assigned")),
    )
    rows = with_wilson(rows, "challenged_or_invalidated", "answers")
    rows = with_wilson(rows, "invalidated", "answers", prefix="invalidated_rate_ci")
    rows = with_wilson(rows, "misses", "assigned", prefix="miss_rate_ci")
    stats: dict[str, Any] = {}
    rows, stats["funnel_rate"] = funnel(rows, "challenged_or_invalidated", "answers", "rate")
    rows, stats["funnel_miss_rate"] = funnel(rows, "misses", "assigned", "miss_rate")
    stats["interval"] = interval_stat("challenged_or_invalidated / answers, per row")
    stats["interval_invalidated"] = interval_stat(
        "invalidated / answers, per row", columns=("invalidated_rate_ci_low", "invalidated_rate_ci_high")
    )
    stats["interval_miss"] = interval_stat(
        "misses / (answers + misses), per row", columns=("miss_rate_ci_low", "miss_rate_ci_high")
    )
    columns = [
        "executor",
        *COUNTS,
        "rate",
        "ci_low",
        "ci_high",
        "rate_flag",
        "invalidated_rate",
        "invalidated_rate_ci_low",
        "invalidated_rate_ci_high",
        "miss_rate",
        "miss_rate_ci_low",
        "miss_rate_ci_high",
        "miss_rate_flag",
    ]
    return EvidenceResult(
        evidence="executors",
        title=f"Every executor of the pooled escrows ({params.window.describe()})",
        params={**params.window.params},
        rows=rows.select(columns),
        stats=stats,
        notes=[
            "answers = inferences with a finish transaction whose final status is not timed_out; "
            "challenged_or_invalidated = ever received an invalid validation or ended invalidated; "
            "miss_rate = misses / (answers + misses), misses = refused + execution + error misses (drained records "
            "are never misses). rate_flag / miss_rate_flag: high or low when the executor's rate differs from the "
            "network's pooled rate (exact binomial test, Holm over the executors, 5%); the funnel chart shows "
            "the 95% limits around the pooled rate."
        ],
    )


def funnel_chart(result: EvidenceResult) -> dict | None:
    """Funnel plot: each executor's rate against its answers, with the pooled rate and 95% limits."""
    import altair as alt

    rows = result.rows.filter(pl.col("answers") > 0)
    if rows.height == 0:
        return None
    pooled = result.stats["funnel_rate"]["pooled_rate"]
    top = max(rows["answers"].to_list())
    grid = pl.DataFrame({"n": list(range(1, top + 1))})
    limits = pl.DataFrame(
        [(n, *wilson_interval(round(pooled * n), n)) for n in grid["n"].to_list()],
        schema=["n", "low", "high"],
        orient="row",
    )
    points = (
        alt.Chart(rows.with_columns(flagged=pl.col("rate_flag") != ""))
        .mark_point(filled=True)
        .encode(
            x=alt.X("answers:Q", title="answers"),
            y=alt.Y("rate:Q", title="challenged or invalidated / answers", axis=alt.Axis(format="%")),
            color=alt.Color("flagged:N", title="outside (Holm)"),
            tooltip=["executor", "answers", "challenged_or_invalidated", "rate"],
        )
    )
    band = alt.Chart(limits).mark_area(opacity=0.15).encode(x="n:Q", y="low:Q", y2="high:Q")
    line = alt.Chart(pl.DataFrame({"rate": [pooled]})).mark_rule(strokeDash=[4, 4]).encode(y="rate:Q")
    return (
        alt.layer(band, line, points)
        .properties(title="Executors against the network's pooled rate (funnel, 95%)", width=520)
        .to_dict()
    )


# --- concentration -----------------------------------------------------------------------------------


def concentration_partial(con: duckdb.DuckDBPyConnection, params: NetworkParams) -> pl.DataFrame:
    return fetch_frame(con, sql_text("network/escrow_concentration.sql"), {"epoch": params.window.epoch})


def concentration_reduce(frames: list[pl.DataFrame], params: NetworkParams) -> EvidenceResult:
    slots = (
        pl.concat(frames)
        if frames
        else pl.DataFrame(
            schema={
                "epoch_id": pl.Int64,
                "escrow_id": pl.String,
                "group_size": pl.Int64,
                "vote_threshold": pl.Int64,
                "address": pl.String,
                "slots": pl.Int64,
            }
        )
    )
    # An address decides a vote alone when its weight exceeds the threshold (accept_weight > vote_threshold);
    # it blocks one when the other slots together cannot exceed it.
    slots = slots.with_columns(
        share=pl.col("slots") / pl.col("group_size"),
        decides=pl.col("slots") > pl.col("vote_threshold"),
        blocks=(pl.col("group_size") - pl.col("slots")) <= pl.col("vote_threshold"),
    )
    rows = (
        slots.group_by("address")
        .agg(
            escrows=pl.len().cast(pl.Int64),
            slots=pl.col("slots").sum().cast(pl.Int64),
            max_slots=pl.col("slots").max().cast(pl.Int64),
            max_share=pl.col("share").max(),
            escrows_deciding=pl.col("decides").sum().cast(pl.Int64),
            escrows_blocking=pl.col("blocks").sum().cast(pl.Int64),
        )
        .sort(["max_share", "slots", "address"], descending=[True, True, False])
    )
    per_escrow = slots.group_by("escrow_id").agg(decided=pl.col("decides").any(), blocked=pl.col("blocks").any())
    n = per_escrow.height
    decided, blocked = int(per_escrow["decided"].sum() or 0), int(per_escrow["blocked"].sum() or 0)
    stats: dict[str, Any] = {"escrows": n}
    for key, count in (("one_address_decides", decided), ("one_address_blocks", blocked)):
        low, high = wilson_interval(count, n) if n else (None, None)
        stats[key] = {"escrows": count, "share": count / n if n else None, "ci_low": low, "ci_high": high}
    stats["interval"] = interval_stat(
        "escrows with such an address / escrows (stats only)", columns=("ci_low", "ci_high")
    )
    return EvidenceResult(
        evidence="concentration",
        title=f"Slots held per address in the pooled escrows ({params.window.describe()})",
        params={**params.window.params},
        rows=rows,
        stats=stats,
        notes=[
            "slots = vote weight (one slot, one vote); max_share = the largest share of one escrow's group the address "
            "held; an address decides an escrow's votes alone when its slots exceed the vote threshold, and blocks "
            "them when the other slots together cannot exceed it. stats: the share of escrows where one address "
            "decides (blocks), Wilson 95%."
        ],
    )


# --- peer-invalidation -------------------------------------------------------------------------------


def peer_partial(con: duckdb.DuckDBPyConnection, params: NetworkParams) -> pl.DataFrame:
    assert params.host is not None
    return peer_answers(con, params.host, params.window, params.control)


def peer_reduce(frames: list[pl.DataFrame], params: NetworkParams) -> EvidenceResult:
    assert params.host is not None
    if params.control == params.host:
        raise EvidenceError(f"--control {params.control} is the host itself; name another executor")
    answers = pl.concat(frames) if frames else None
    if answers is None:
        answers = pl.DataFrame(
            schema={
                "epoch_id": pl.Int64,
                "escrow_id": pl.String,
                "is_host": pl.Boolean,
                "host_build": pl.String,
                "answers": pl.Int64,
                "challenged_or_invalidated": pl.Int64,
            }
        )
    return peer_invalidation_of(answers, params.host, params.window, by_escrow=params.by_escrow, control=params.control)


NETWORK_TABLES: dict[str, NetworkTable] = {
    t.name: t
    for t in (
        NetworkTable(
            "executors",
            "Every executor of the pooled escrows: answers, invalidations, misses, Wilson intervals, funnel flags.",
            executor_partial,
            executors_reduce,
            chart=funnel_chart,
        ),
        NetworkTable(
            "concentration",
            "Slots per address per escrow, and the share of escrows where one address decides the votes.",
            concentration_partial,
            concentration_reduce,
        ),
        NetworkTable(
            "peer-invalidation",
            "A host's answers against other executors' in the same escrows, from every copy in the lake.",
            peer_partial,
            peer_reduce,
            needs_host=True,
        ),
    )
}
