"""throughput: the host's engine speed per build, from its vLLM stats log lines.

Rows ``build, windows, busy_windows, generation_tps_median, generation_tps_p90,
prompt_tps_median, prompt_tps_p90, running_median, running_max, waiting_median, waiting_max``:

- a **window** is one periodic engine stats log line of the host (``engine_stats`` with
  source ``log``: ``Avg prompt throughput: … tokens/s, Avg generation throughput: … tokens/s,
  Running: N reqs, Waiting: N reqs``, about every 10 seconds), in the window on its time
  (``--epoch N``: the epoch's time span, first to last event of its inferences), per build
  (the as-of join of ``host_builds``; ``unattributed`` outside any entry). Lines logged at
  DEBUG while idle count when the logs hold them. ``/metrics`` scrapes carry no throughput
  and are not used;
- ``busy_windows``: windows with at least one running request (an idle engine's 0 tokens/s
  says nothing about its speed); ``generation_tps_*`` and ``prompt_tps_*``: the median and the
  90th percentile of the printed average throughputs (tokens/s) over the busy windows, by
  linear interpolation between windows (DuckDB ``quantile_cont``); null without busy windows;
- ``running_*`` / ``waiting_*``: the median (same interpolation) and the maximum of the running
  and waiting requests over every window.

Builds in the order they started (``host_builds``), then any other label, ``unattributed`` last.
"""

from __future__ import annotations

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.evidence.log_window import build_order, time_bounds
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.spec import EvidenceSpec, ReportSection, register
from pipeline.evidence.window import Window
from pipeline.warehouse.database import fetch_frame

NAME = "throughput"
COLUMNS = (
    "build",
    "windows",
    "busy_windows",
    "generation_tps_median",
    "generation_tps_p90",
    "prompt_tps_median",
    "prompt_tps_p90",
    "running_median",
    "running_max",
    "waiting_median",
    "waiting_max",
)


def throughput(con: duckdb.DuckDBPyConnection, host: str, window: Window) -> EvidenceResult:
    """Median and 90th-percentile prompt and generation throughput per build, with the request load."""
    since, until = time_bounds(con, window)
    rows = fetch_frame(con, sql_text("evidence/throughput.sql"), {"host": host, "since": since, "until": until})
    order = build_order(con, host, rows["build"].to_list())
    rows = rows.with_columns(order=pl.col("build").replace_strict(order, list(range(len(order))), default=len(order)))
    rows = rows.sort("order").select(COLUMNS)

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
        definitions=__doc__,
    )
)
