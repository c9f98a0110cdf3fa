"""The `startup` evidence table: the host's vLLM start-up facts per build, from its start cycles."""

from __future__ import annotations

import duckdb

from pipeline.core.paths import sql_text
from pipeline.evidence.log_window import in_build_order, time_bounds
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.spec import Column, EvidenceSpec, ReportSection, column_group, register
from pipeline.evidence.window import Window
from pipeline.warehouse.database import fetch_frame

NAME = "startup"
COLUMNS = (
    Column("build", "the host's build at the cycle's start; `unattributed` outside any entry"),
    Column("cycles", "start cycles (engine_cycles) that began in the window"),
    Column("ready_cycles", "cycles that reached `Application startup complete.`"),
    Column("vllm_versions", "the vLLM versions the cycles' start lines state"),
    Column(
        "fingerprints", "the cycles' config fingerprints (engine_cycles): more than one = the build's config changed"
    ),
    *column_group(
        "time_to_ready_median_s",
        "time_to_ready_max_s",
        meaning="seconds from the start line to `Application startup complete.`, median (linear interpolation) "
        "and maximum over the ready cycles",
    ),
    Column("model_load_median_s", "median seconds of `Model loading took X GiB and Y seconds`"),
    Column("model_load_gib", "median GiB of the same line (weights per worker)"),
    Column("kv_cache_gib", "median over cycles of `Available KV cache memory` (GiB, the smallest worker)"),
    Column("kv_cache_tokens", "median of `GPU KV cache size: N tokens`"),
    Column("max_concurrency", "median of `Maximum concurrency for N tokens per request: Xx`"),
    Column("poc_nonces_per_min", "median over cycles of PoC nonces per minute (`PoC stopped: N nonces in M.MMmin`)"),
)


def startup(con: duckdb.DuckDBPyConnection, host: str, window: Window) -> EvidenceResult:
    """Time to ready, model loading, KV cache and concurrency per build over the window's start cycles."""
    since, until = time_bounds(con, window)
    rows = fetch_frame(con, sql_text("evidence/startup.sql"), {"host": host, "since": since, "until": until})
    rows = in_build_order(con, host, rows).select(COLUMNS)
    notes = []
    if rows.height == 0:
        notes.append(
            f"no vLLM start cycles of host {host} began in {window.describe()} "
            "(a start lies outside the window, or no vLLM logs were ingested)."
        )
    notes.append(
        "One start cycle per launch of the engine (engine_cycles); a value is a median over the cycles that print "
        "its line. Empty where the logs of that version print no such line."
    )
    return EvidenceResult(
        evidence=NAME,
        title=f"vLLM start-up of {host}, by build ({window.describe()})",
        params={"host": host, **window.params},
        rows=rows,
        stats={"cycles": int(rows["cycles"].sum())} if rows.height else {},
        notes=notes,
    )


SPEC = register(
    EvidenceSpec(
        name=NAME,
        summary="vLLM start-up facts per build from the start cycles: time to ready, model loading, KV cache, "
        "maximum concurrency, PoC nonces per minute.",
        compute=startup,
        columns=COLUMNS,
        sql=("evidence/startup.sql", "evidence/log_window_bounds.sql", "evidence/host_builds.sql"),
        report=ReportSection(order=57, heading="Engine start-up"),
        description="What the host's vLLM logs print at every start (view `engine_cycles`: docs/sources.md, "
        "start-up): the time from the start line (`Initializing a V1 LLM engine …`) to `Application startup "
        "complete.`, `Model loading took X GiB and Y seconds`, `Available KV cache memory`, `GPU KV cache size`, "
        "`Maximum concurrency for N tokens per request`, and PoC throughput from `PoC stopped:` lines. Window on "
        "the cycle's start (`--epoch`: the epoch's time span, first to last event of its inferences).",
        notes="Builds in the order they started (`host_builds`), then any other label, `unattributed` last. "
        "Statistics: `cycles` in the window.",
    )
)
