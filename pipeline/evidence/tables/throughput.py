"""The `throughput` evidence table: the host's engine speed per build, from its vLLM stats log lines."""

from __future__ import annotations

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.evidence.log_window import in_build_order, time_bounds
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.spec import Column, EvidenceSpec, ReportSection, column_group, register
from pipeline.evidence.window import Window
from pipeline.warehouse.database import fetch_frame

NAME = "throughput"
COLUMNS = (
    Column("build", "the host's build at the line's time; `unattributed` outside any entry"),
    Column("windows", "stats lines (DEBUG lines of idle periods count when the logs hold them)"),
    Column("busy_windows", "lines with at least one running request and both throughputs printed"),
    *column_group(
        "generation_tps_median",
        "generation_tps_p90",
        meaning="median and 90th percentile of `Avg generation throughput` (tokens/s) over the busy windows, "
        "linear interpolation (DuckDB `quantile_cont`); null without busy windows",
    ),
    *column_group("prompt_tps_median", "prompt_tps_p90", meaning="the same for `Avg prompt throughput`"),
    *column_group(
        "running_median",
        "running_max",
        "waiting_median",
        "waiting_max",
        meaning="median (same interpolation) and maximum of the running and waiting requests over every window",
    ),
)


def throughput(con: duckdb.DuckDBPyConnection, host: str, window: Window) -> EvidenceResult:
    """Median and 90th-percentile prompt and generation throughput per build, with the request load."""
    since, until = time_bounds(con, window)
    rows = fetch_frame(con, sql_text("evidence/throughput.sql"), {"host": host, "since": since, "until": until})
    rows = in_build_order(con, host, rows).select(COLUMNS)

    notes = []
    if rows.height == 0:
        notes.append(
            f"no vLLM stats log lines for host {host} in {window.describe()} (`gonka-evidence ingest-logs` first)."
        )
    notes.append(
        "One window = one vLLM stats log line. Throughput median and p90 (linear interpolation) over the busy "
        "windows (at least one running request); running and waiting requests over every window. /metrics "
        "scrapes carry no throughput and are not used."
    )
    return EvidenceResult(
        evidence=NAME,
        title=f"Engine throughput of {host}, by build ({window.describe()})",
        params={"host": host, **window.params},
        rows=rows,
        stats={"windows": int(rows["windows"].sum()), "busy_windows": int(rows["busy_windows"].sum())}
        if rows.height
        else {},
        notes=notes,
    )


def _chart(result: EvidenceResult, table: pl.DataFrame) -> dict | None:
    """Generation and prompt throughput per build: the median as a bar, the 90th percentile as a tick."""
    import altair as alt

    rows = result.rows.filter(pl.col("busy_windows") > 0)
    if rows.height == 0:
        return None
    data = pl.concat(
        [
            rows.select(
                "build",
                "busy_windows",
                pl.lit(kind).alias("throughput"),
                pl.col(f"{kind}_tps_median").alias("median"),
                pl.col(f"{kind}_tps_p90").alias("p90"),
            )
            for kind in ("generation", "prompt")
        ]
    )
    base = alt.Chart(data).encode(
        y=alt.Y("build:N", sort=None, title=None, axis=alt.Axis(labelLimit=0)),
        yOffset="throughput:N",
        color=alt.Color("throughput:N", title=None),
    )
    bars = base.mark_bar().encode(
        x=alt.X("median:Q", title="tokens/s (bar: median, tick: p90)"),
        tooltip=["build", "throughput", "median", "p90", "busy_windows"],
    )
    ticks = base.mark_tick(color="black", thickness=2).encode(x="p90:Q")
    return (bars + ticks).properties(title="Engine throughput per build (busy windows)", width=420).to_dict()


SPEC = register(
    EvidenceSpec(
        name=NAME,
        summary="Generation and prompt throughput per build from vLLM stats log lines (median, p90, windows), with "
        "running and waiting requests.",
        compute=throughput,
        columns=COLUMNS,
        sql=("evidence/throughput.sql", "evidence/log_window_bounds.sql", "evidence/host_builds.sql"),
        report=ReportSection(order=55, heading="Engine throughput", chart=_chart),
        description="The host's engine speed per build, from its vLLM stats log lines (view `engine_stats`, source "
        "`log`: `Avg prompt throughput: … tokens/s, Avg generation throughput: … tokens/s, Running: N reqs, "
        "Waiting: N reqs`, about every 10 seconds): one line is one window. Window on the line's time "
        "(`--epoch`: the epoch's time span, first to last event of its inferences). Throughput is taken over the "
        "busy windows only: an idle engine's 0 tokens/s says nothing about its speed.",
        notes="Builds in the order they started (`host_builds`), then any other label, `unattributed` last. "
        "`/metrics` scrapes carry no throughput and are not used.",
    )
)
