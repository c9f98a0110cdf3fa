"""The `acceptance` evidence table: speculative-decoding acceptance of the host per build."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.evidence.log_window import build_order, time_bounds
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.spec import Column, EvidenceSpec, ReportSection, column_group, register
from pipeline.evidence.stats import BOOTSTRAP_RESAMPLES, SEED, bootstrap_ratio, interval_stat, with_wilson
from pipeline.evidence.window import Window
from pipeline.warehouse.database import fetch_frame

if TYPE_CHECKING:
    import altair as alt

NAME = "acceptance"
SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "build": pl.String,
    "source": pl.String,
    "windows": pl.Int64,
    "drafts": pl.Int64,
    "drafted": pl.Int64,
    "accepted": pl.Int64,
    "acceptance_rate": pl.Float64,
    "mean_acceptance_length": pl.Float64,
    "per_position": pl.List(pl.Float64),
    "length_distribution": pl.List(pl.Float64),
    "k": pl.Int64,
    "block_size": pl.Int64,
    "k_off_block": pl.Boolean,
    "rate_boot_low": pl.Float64,
    "rate_boot_high": pl.Float64,
    "mal_boot_low": pl.Float64,
    "mal_boot_high": pl.Float64,
}
COLUMNS = (
    Column("build", "the host's build at the window time"),
    Column(
        "source",
        "`metrics` when the build has any `/metrics` windows (exact drafts), else `log`; only that source's windows "
        "are used",
    ),
    Column("windows", "windows used"),
    Column("drafts", "Σ verification steps, over the windows whose drafts are known"),
    Column("drafted", "Σ drafted tokens"),
    Column("accepted", "Σ accepted tokens"),
    Column("acceptance_rate", "`Σaccepted / Σdrafted`"),
    *column_group(
        "ci_low",
        "ci_high",
        meaning="Wilson 95% interval of the acceptance rate on the token counts (treats tokens as independent: too "
        "narrow)",
    ),
    *column_group(
        "rate_boot_low",
        "rate_boot_high",
        meaning="percentile bootstrap 95% interval of the acceptance rate, resampling whole windows",
    ),
    Column("mean_acceptance_length", "`1 + Σaccepted / Σdrafts` over the windows with known drafts"),
    *column_group(
        "mal_boot_low",
        "mal_boot_high",
        meaning="percentile bootstrap 95% interval of the mean acceptance length, resampling whole windows",
    ),
    Column(
        "per_position",
        "the K per-position rates weighted by drafts: rᵢ = Σ(rᵢ · drafts) / Σdrafts, over windows with K values and "
        "no NaN",
    ),
    Column("length_distribution", "P(len = 1) = 1 − r₀, P(len = i+1) = rᵢ₋₁ − rᵢ, P(len = K+1) = r_{K−1}"),
    Column("k", "K, the length of the build's per-position lists (the most common one)"),
    Column(
        "block_size",
        "the draft block size of the DSpark checkpoint the build's start lines name (view `dspark_block_sizes`); "
        "null when the build does not run DSpark or the checkpoint's is not known",
    ),
    Column("k_off_block", "K differs from the DSpark block size (null when either is unknown)"),
)


def length_distribution(rates: list[float]) -> list[float]:
    """P(accepted length = 1 … K+1) from prefix-wise per-position rates (a draft token accepted at position i
    was accepted at every earlier one)."""
    if not rates:
        return []
    return [1 - rates[0], *(rates[i - 1] - rates[i] for i in range(1, len(rates))), rates[-1]]


def _row(build: str, windows: pl.DataFrame, block_size: int | None = None) -> tuple[dict, int, list[str]]:
    source = "metrics" if (windows["source"] == "metrics").any() else "log"
    w = windows.filter(pl.col("source") == source)
    known = w.filter(pl.col("drafts").is_not_null() & (pl.col("drafts") > 0))
    drafts = int(known["drafts"].sum())
    accepted_known = int(known["accepted"].sum())
    shaped = known.filter(pl.col("per_position").is_not_null())
    rates: list[float] = []
    k: int | None = None
    if shaped.height:
        lengths = Counter(len(p) for p in shaped["per_position"].to_list())
        k = lengths.most_common(1)[0][0]
        usable = [
            (p, d)
            for p, d in zip(shaped["per_position"].to_list(), shaped["drafts"].to_list(), strict=True)
            if len(p) == k and all(v == v for v in p)
        ]
        weight = sum(d for _, d in usable)
        if weight:
            rates = [sum(p[i] * d for p, d in usable) / weight for i in range(k)]
    row: dict = {
        "build": build,
        "source": source,
        "windows": w.height,
        "drafts": drafts,
        "drafted": int(w["drafted"].sum()),
        "accepted": int(w["accepted"].sum()),
        "mean_acceptance_length": 1 + accepted_known / drafts if drafts else None,
        "per_position": rates or None,
        "length_distribution": length_distribution(rates) or None,
        "k": k,
        "block_size": block_size,
        "k_off_block": None if k is None or block_size is None else k != block_size,
    }
    row["acceptance_rate"] = row["accepted"] / row["drafted"] if row["drafted"] else None
    rate = bootstrap_ratio(w["accepted"].to_list(), w["drafted"].to_list())
    mal = bootstrap_ratio(known["accepted"].to_list(), known["drafts"].to_list(), transform=lambda r: 1 + r)
    row |= {
        "rate_boot_low": _known(rate.low),
        "rate_boot_high": _known(rate.high),
        "mal_boot_low": _known(mal.low),
        "mal_boot_high": _known(mal.high),
    }
    remarks = [
        f"build {build}: no bootstrap interval of the {what}: {r.note}"
        for what, r in (("acceptance rate", rate), ("mean acceptance length", mal))
        if r.note
    ]
    if row["k_off_block"]:
        remarks.append(
            f"build {build}: DSpark with K = {k} per-position values against the checkpoint's draft block size "
            f"{block_size}: vLLM refuses K below the block (vllm-project/vllm #47419), and K = 7 on the 5-token "
            "block of DeepSeek-V4-Flash-0731 was reported to collapse acceptance (mean length 1.31 against 2.74 at "
            "K = 5, vllm-project/vllm #41834)."
        )
    return row, w.height - known.height, remarks


def _known(value: float) -> float | None:
    return None if value != value else value


def acceptance(con: duckdb.DuckDBPyConnection, host: str, window: Window) -> EvidenceResult:
    """Mean acceptance length, acceptance rate and per-position rates of the host, per build."""
    since, until = time_bounds(con, window)
    windows = fetch_frame(con, sql_text("evidence/spec_windows.sql"), {"host": host, "since": since, "until": until})
    configs = fetch_frame(con, sql_text("evidence/spec_configs.sql"), {"host": host})
    # a build's DSpark block size: the one its start cycles' model has (the last cycle's, when they differ)
    blocks = {b: s for b, s in configs.drop_nulls("block_size").select("build", "block_size").iter_rows()}
    rows, without_drafts, remarks = [], 0, []
    for build in build_order(con, host, windows["build"].unique().to_list()):
        part = windows.filter(pl.col("build") == build)
        if part.height == 0:
            continue
        row, missing, why = _row(build, part, blocks.get(build))
        rows.append(row)
        without_drafts += missing
        remarks += why
    frame = pl.DataFrame(rows, schema=SCHEMA) if rows else pl.DataFrame(schema=SCHEMA)
    frame = with_wilson(frame, "accepted", "drafted").select(COLUMNS)
    notes = list(remarks)
    if windows.height == 0:
        notes.append(
            f"no speculative-decoding windows for host {host} in {window.describe()} "
            "(`gonka-evidence ingest-logs` vLLM logs or /metrics scrapes first)."
        )
    notes.append(
        "Sums first, then ratios: mean acceptance length = 1 + Σaccepted / Σdrafts (vLLM 0.8.5 lines "
        "normalised), never an average of window means; per-position rates weighted by drafts. Log lines "
        "do not print drafts: they are recovered as accepted / (MAL − 1); /metrics counters are exact and "
        "are used for a build whenever it has any."
    )
    return EvidenceResult(
        evidence=NAME,
        title=f"Speculative decoding acceptance of {host}, by build ({window.describe()})",
        params={"host": host, **window.params},
        rows=frame,
        stats={
            "windows": windows.height,
            "windows_without_drafts": without_drafts,
            "interval": interval_stat("accepted / drafted (tokens; treats tokens as independent, too narrow)"),
            "bootstrap": interval_stat(
                "acceptance_rate and mean_acceptance_length, per build",
                ("rate_boot_*", "mal_boot_*"),
                method="percentile bootstrap",
                resamples=BOOTSTRAP_RESAMPLES,
                seed=SEED,
                unit="log windows",
            ),
        },
        notes=notes,
    )


def acceptance_chart(result: EvidenceResult) -> alt.VConcatChart:
    """Mean acceptance length per build (bars, with the bootstrap 95% interval the table reports) above the
    per-position acceptance rates per build (lines); one colour per build in both, as the legend says."""
    import altair as alt

    rows = result.rows
    mal = rows.select(
        "build", "mean_acceptance_length", "mal_boot_low", "mal_boot_high", "windows", "drafts"
    ).to_pandas()
    positions = (
        rows.select("build", "per_position")
        .drop_nulls("per_position")
        .with_columns(position=pl.int_ranges(pl.col("per_position").list.len()))
        .explode("per_position", "position")
        .rename({"per_position": "rate"})
        .to_pandas()
    )
    order = rows["build"].to_list()
    # the colour is encoded on both charts with one domain: a bar has its build's colour, as the legend says
    color = alt.Color("build:N", sort=order, scale=alt.Scale(domain=order), title="build")
    # horizontal bars: build names are read as written, not rotated under the axis title
    base = alt.Chart(mal, title="Mean acceptance length (bar), percentile bootstrap 95% interval (whisker)")
    x_title = "tokens per step (1 + Σaccepted / Σdrafts)"
    bars = base.mark_bar().encode(
        y=alt.Y("build:N", sort=order, title=None, axis=alt.Axis(labelLimit=0)),
        x=alt.X("mean_acceptance_length:Q", title=x_title),
        color=color,
        tooltip=["build", "mean_acceptance_length", "mal_boot_low", "mal_boot_high", "windows", "drafts"],
    )
    interval = base.mark_errorbar(ticks=True, color="black").encode(
        y=alt.Y("build:N", sort=order), x=alt.X("mal_boot_low:Q", title=x_title), x2="mal_boot_high:Q"
    )
    lines = (
        alt.Chart(positions, title="Per-position acceptance rate (weighted by drafts)")
        .mark_line(point=True)
        .encode(
            x=alt.X("position:O", title="draft position", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("rate:Q", title="acceptance rate", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
            color=color,
            tooltip=["build", "position", alt.Tooltip("rate:Q", format=".2%")],
        )
        .properties(width=420, height=200)
    )
    return alt.vconcat(alt.layer(bars, interval).properties(width=420), lines).configure_legend(orient="bottom")


def _chart(result: EvidenceResult, table: pl.DataFrame) -> dict:
    return acceptance_chart(result).to_dict()


SPEC = register(
    EvidenceSpec(
        name=NAME,
        summary="Speculative-decoding acceptance per build (mean acceptance length, per-position rates), from vLLM "
        "logs or `/metrics` scrapes.",
        compute=acceptance,
        columns=COLUMNS,
        sql=(
            "evidence/log_window_bounds.sql",
            "evidence/spec_windows.sql",
            "evidence/spec_configs.sql",
            "evidence/host_builds.sql",
        ),
        report=ReportSection(order=50, heading="Speculative-decoding acceptance", chart=_chart),
        description="Speculative-decoding acceptance of the host per build, from `spec_decode_windows` (SpecDecoding "
        "log lines or `/metrics` counter increases). Window on the window time `at` (`--epoch`: the epoch's time "
        "span).",
        notes="Sums first, then ratios: never an average of per-window means (that would weigh idle and busy windows "
        "alike). Log lines do not print drafts: they are recovered as accepted / (MAL − 1) (vLLM 0.8.5 lines "
        "normalised); log windows whose drafts cannot be recovered (MAL missing or NaN) count in `drafted` and "
        "`accepted` but not in the MAL, and `stats.windows_without_drafts` counts them. The bootstrap uses 2,000 "
        "resamples, seed 0 (the same windows give the same bytes); `stats.interval` and `stats.bootstrap` say "
        "which interval is which. **DSpark's K and its block.** A DSpark build whose per-position lists are not "
        "as long as its checkpoint's draft block (`k_off_block`) is flagged in the notes: vLLM refuses K below the "
        "block (vllm-project/vllm #47419) and K = 7 on the 5-token block of DeepSeek-V4-Flash-0731 was reported to "
        "collapse acceptance (vllm-project/vllm #41834); the block size is the checkpoint's (view "
        "`dspark_block_sizes`), not in the logs.",
    )
)
