"""The `stability` evidence table: engine deaths, OOMs, restarts and readiness of the host, per build (and per day)."""

from __future__ import annotations

import datetime as dt
import statistics

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.evidence.log_window import build_order, time_bounds
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.spec import Column, EvidenceSpec, Option, ReportSection, column_group, register
from pipeline.evidence.window import EvidenceError, Window
from pipeline.warehouse.database import fetch_frame

NAME = "stability"
UTC = dt.UTC
COLUMNS = [
    Column(
        "hours_observed",
        "the union of the spans (first to last record) of the host's vLLM log files, cut at build boundaries, days and "
        "the window. A gap inside a file counts as observed: idle engines log at DEBUG, so missing INFO lines are not "
        "downtime",
    ),
    Column(
        "engine_deaths",
        "crashes: rows of the view `engine_deaths`, where the death signals of one engine cycle of a log file "
        "(the engine core's fatal error or failed start, the API server's `EngineDeadError` under another pid, V0's "
        "`AsyncEngineDeadError` / `Engine background task failed`, every data-parallel engine, a worker's death, an "
        "OOM) are one death",
    ),
    Column("ooms", "deaths with an out-of-memory signal (the root cause)"),
    Column(
        "restarts",
        "engine cycles begun (`engine_events.cycle_start`: one per launch of the server, though every data-parallel "
        "engine core prints its own start line) after the host's logs already show the engine (any earlier record)",
    ),
    *column_group(
        "ready_seconds_median",
        "ready_seconds_max",
        meaning="from a cycle's start (its launch line, else its first engine start line) to the next `Application "
        "startup complete.` before the next cycle",
    ),
    Column(
        "preemptions",
        "Σ of the stats lines' `Preemptions: N` (absent = 0 from vLLM 0.11.1; lines of earlier versions are left out; "
        "NULL when no line reports it)",
    ),
    Column("max_kv_cache_usage", "the highest GPU KV cache usage (0..1) of a stats line"),
]


def _union(spans: list[tuple[dt.datetime, dt.datetime]]) -> list[tuple[dt.datetime, dt.datetime]]:
    merged: list[list[dt.datetime]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def _pieces(spans, builds, since, until, by_day: bool):
    """(build, day, seconds) of observed time, cut at build windows, days and the evidence window."""
    out: dict[tuple[str, dt.date | None], float] = {}
    for start, end in spans:
        start = max(start, since) if since else start
        end = min(end, until) if until else end
        for label, b_from, b_to in builds:
            s, e = max(start, b_from), min(end, b_to) if b_to else end
            while s < e:
                if by_day:
                    next_day = dt.datetime.combine(s.date() + dt.timedelta(days=1), dt.time(), UTC)
                    cut = min(e, next_day)
                else:
                    cut = e
                key = (label, s.date() if by_day else None)
                out[key] = out.get(key, 0.0) + (cut - s).total_seconds()
                s = cut
    return out


def _cycles(events: pl.DataFrame) -> list[tuple[dt.datetime, str, bool, float | None]]:
    """(at, build, restart, ready_seconds) of each engine cycle: one per launch, not one per data-parallel
    engine; ready_seconds from its start to the first ready line before the next cycle."""
    starts = events.filter(pl.col("cycle_start"))
    readies = events.filter(pl.col("kind") == "ready")["at"].to_list()
    start_times = starts["at"].to_list()
    cycles = []
    for i, row in enumerate(starts.iter_rows(named=True)):
        nxt = start_times[i + 1] if i + 1 < len(start_times) else None
        ready = None
        if row["kind"] != "ready":  # a cycle begun by its ready line (launch and start lines missing) has no duration
            ready = next((r for r in readies if r >= row["at"] and (nxt is None or r < nxt)), None)
        cycles.append((row["at"], row["build"], row["restart"], (ready - row["at"]).total_seconds() if ready else None))
    return cycles


def _group(groups: dict[tuple, dict], k: tuple) -> dict:
    return groups.setdefault(
        k,
        {
            "engine_deaths": 0,
            "ooms": 0,
            "restarts": 0,
            "ready": [],
            "preemptions": None,
            "max_kv_cache_usage": None,
            "hours_observed": 0.0,
        },
    )


def _tally(deaths: pl.DataFrame, cycles: list, stats: pl.DataFrame, since, until, by_day: bool) -> dict[tuple, dict]:
    """Deaths, OOMs, restarts, ready times, preemptions and KV-cache peaks in the window, per (build, day)
    (day None unless `by_day`)."""

    def in_window(at) -> bool:
        return (since is None or at >= since) and (until is None or at < until)

    def key(build: str, at: dt.datetime):
        return (build, at.astimezone(UTC).date() if by_day else None)

    groups: dict[tuple, dict] = {}
    for row in deaths.iter_rows(named=True):
        if in_window(row["at"]):
            g = _group(groups, key(row["build"], row["at"]))
            g["engine_deaths"] += 1
            g["ooms"] += int(row["oom"])
    for at, build, restart, ready in cycles:
        if in_window(at):
            g = _group(groups, key(build, at))
            g["restarts"] += int(restart)
            if ready is not None:
                g["ready"].append(ready)
    for row in stats.iter_rows(named=True):
        if not in_window(row["at"]):
            continue
        g = _group(groups, key(row["build"], row["at"]))
        if row["preemptions"] is not None:
            g["preemptions"] = (g["preemptions"] or 0) + row["preemptions"]
        if row["kv_cache_usage"] is not None:
            g["max_kv_cache_usage"] = max(g["max_kv_cache_usage"] or 0.0, row["kv_cache_usage"])
    return groups


def _build_windows(timeline: pl.DataFrame) -> list[tuple[str, dt.datetime, dt.datetime | None]]:
    """(build, from, to) of the host's timeline, with the time before its first build as `unattributed`."""
    builds = [(r["build"], r["valid_from"], r["valid_to"]) for r in timeline.iter_rows(named=True)]
    if timeline.height:
        builds.insert(0, ("unattributed", dt.datetime.min.replace(tzinfo=UTC), timeline["valid_from"].min()))
    else:
        builds = [("unattributed", dt.datetime.min.replace(tzinfo=UTC), None)]
    return builds


def _frame(groups: dict[tuple, dict], order: list[str], by_day: bool) -> pl.DataFrame:
    """One row per (build, day) in build order, then day order."""
    rows = []
    for build in order:
        for (b, day), g in sorted(((k, v) for k, v in groups.items() if k[0] == build), key=lambda kv: str(kv[0][1])):
            row = {
                "build": b,
                **({"day": day} if by_day else {}),
                "hours_observed": g["hours_observed"],
                "engine_deaths": g["engine_deaths"],
                "ooms": g["ooms"],
                "restarts": g["restarts"],
                "ready_seconds_median": statistics.median(g["ready"]) if g["ready"] else None,
                "ready_seconds_max": max(g["ready"]) if g["ready"] else None,
                "preemptions": g["preemptions"],
                "max_kv_cache_usage": g["max_kv_cache_usage"],
            }
            rows.append(row)
    schema = {
        "build": pl.String,
        **({"day": pl.Date} if by_day else {}),
        "hours_observed": pl.Float64,
        "engine_deaths": pl.Int64,
        "ooms": pl.Int64,
        "restarts": pl.Int64,
        "ready_seconds_median": pl.Float64,
        "ready_seconds_max": pl.Float64,
        "preemptions": pl.Int64,
        "max_kv_cache_usage": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


NOTE = (
    "A death is one crash however many processes report it (the engine core, the API server, every "
    "data-parallel engine; the signals of one engine cycle of a log file); OOMs are deaths whose root "
    "cause is an out-of-memory error. Restarts are engine cycles (launches of the server) begun after the logs "
    "already show the engine. "
    "Hours observed span each log file from its first to its last record: idle periods log at DEBUG, so "
    "a gap in INFO lines is not downtime. Preemptions are summed from stats lines that report them "
    "(vLLM ≥ 0.11.1); earlier versions do not."
)


def stability(con: duckdb.DuckDBPyConnection, host: str, window: Window, by: str | None = None) -> EvidenceResult:
    """Engine deaths, OOMs, restarts, time to ready and preemptions of the host per build (``by="day"``: per day)."""
    if by not in (None, "day"):
        raise EvidenceError(f"--by {by!r} is not available for stability (use --by day)")
    by_day = by == "day"
    since, until = time_bounds(con, window)
    events = fetch_frame(con, sql_text("evidence/stability_events.sql"), {"host": host})
    deaths = fetch_frame(con, sql_text("evidence/stability_deaths.sql"), {"host": host})
    stats = fetch_frame(con, sql_text("evidence/stability_stats.sql"), {"host": host})
    coverage = fetch_frame(con, sql_text("evidence/stability_coverage.sql"), {"host": host})
    timeline = fetch_frame(con, sql_text("evidence/host_build_windows.sql"), {"host": host})

    groups = _tally(deaths, _cycles(events), stats, since, until, by_day)
    spans = _union([(r["first_at"], r["last_at"]) for r in coverage.iter_rows(named=True)])
    for k, seconds in _pieces(spans, _build_windows(timeline), since, until, by_day).items():
        if seconds > 0:
            _group(groups, k)["hours_observed"] += seconds / 3600
    frame = _frame(groups, build_order(con, host, [b for b, _ in groups]), by_day)
    notes = []
    if not frame.height:
        notes.append(
            f"no vLLM log records for host {host} in {window.describe()} (`gonka-evidence ingest-logs` first)."
        )
    notes.append(NOTE)
    return EvidenceResult(
        evidence=NAME,
        title=f"Engine stability of {host}, by build{' and day' if by_day else ''} ({window.describe()})",
        params={"host": host, **window.params, "by": by},
        rows=frame,
        stats={"log_files": coverage.height, "events": events.height},
        notes=notes,
    )


SPEC = register(
    EvidenceSpec(
        name=NAME,
        summary="Engine deaths, OOMs and restarts per build and per hours observed, from vLLM logs.",
        compute=stability,
        columns=(Column("build", "the host's build at the event time; `unattributed` outside any entry"), *COLUMNS),
        sql=(
            "evidence/log_window_bounds.sql",
            "evidence/stability_events.sql",
            "evidence/stability_deaths.sql",
            "evidence/stability_stats.sql",
            "evidence/stability_coverage.sql",
            "evidence/host_build_windows.sql",
            "evidence/host_builds.sql",
        ),
        options=(Option("by", "--by", "One row per build and day.", type=str, metavar="day"),),
        report=ReportSection(order=60, heading="Engine stability"),
        description="Engine deaths, OOMs, restarts and readiness of the host per build (`--by day`: also per UTC "
        "day, column `day` after `build`), from the views `engine_events` and `engine_stats` (its vLLM logs). Window "
        "on the event time (`--epoch`: the epoch's time span).",
        notes="See [sources](./sources.md#engine-deaths) for what one death is. **Engine cycles and restarts.** A "
        "cycle begins at the server's launch: its `vLLM API server version` line (from 0.15 its logo), or the "
        "engine's start line (`Initializing … LLM engine`) when no launch or start line comes right before it; the "
        "start lines of data-parallel engines after one launch are one cycle, and a second launch in the same file "
        "is a new cycle "
        "even when the same engine name follows. A `ready` line right after a death signal begins a cycle too (the "
        "launch lines were lost). A cycle begun after the host's logs already show the engine (any earlier record, "
        "in any of its files: an engine event, the API server's shutdown line among them, a stats or spec line, "
        "earlier in time or earlier in the same file; view `engine_cycle_starts`) is a restart. **A file that starts "
        "mid-run** (its first lines are stats, spec, death or shutdown lines of a server launched before the file "
        "begins): those records belong to the run in progress (cycle 0 of "
        "the file, counted as observed hours, deaths and OOMs, but no restart); the file's first launch is then a "
        "restart, because the engine was already seen running. The death and OOM texts are the catalogue derived "
        "from vLLM's source (`pipeline/sources/logs/vllm_catalogue.toml`, with the releases and files each comes "
        "from).",
    )
)
