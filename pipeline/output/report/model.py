"""The epoch report as data: which sections, which evidence and SQL behind each, the rows a reader
sees (denominators included), statistics, notes and charts (Vega-Lite specs). Nothing here
formats text for a medium; `pipeline.output.report.render` does.

A report is the epoch overview, one section per evidence table whose spec has a `ReportSection`
(in its order), and the quarantine counts. A table that cannot be computed for the epoch (its
data is absent, e.g. no engine logs) becomes a skipped section with the reason. Every count a
reader sees comes with its denominator ("31 of 55"): a table that holds bare counts declares a
view that shows them as "count | of | share" rows (see `ReportSection.view`).

The report opens with its main findings (`pipeline.output.report.findings`): a few lines read from the
evidence results of the sections, each pointing at the section it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.evidence import (
    EVIDENCE,
    EvidenceError,
    EvidenceResult,
    EvidenceSpec,
    Provenance,
    ReportContext,
    compute,
    report_options,
)
from pipeline.evidence.closure import is_closure_note
from pipeline.evidence.provenance import command_line, command_path, evidence_command
from pipeline.evidence.provenance import provenance as provenance_of
from pipeline.evidence.request import check_request
from pipeline.evidence.window import Window
from pipeline.output.query.execute import named_queries
from pipeline.output.render.csv import frame_csv, render_csv
from pipeline.output.render.text import format_percent, iso_utc, stat_lines
from pipeline.output.report.findings import NO_DATA, Finding, epoch_findings
from pipeline.warehouse.database import fetch_frame, out_of_memory, reads_once
from pipeline.warehouse.held import UnheldValue, check_value


@dataclass
class Closure:
    escrows: int
    escrows_settled: int
    last_settled_at: Any
    closed_at: Any  # None while the epoch is open
    closed_by: str | None  # "all escrows settled" | "finality lag"


@dataclass
class Section:
    key: str  # file stem of its CSV and chart: the evidence name, "overview" or "quarantine"
    heading: str
    title: str | None = None
    table: pl.DataFrame | None = None  # what the reader sees (denominators included)
    csv: str | None = None  # every row, machine-readable
    lines: list[str] = field(default_factory=list)  # statistics, one per line
    notes: list[str] = field(default_factory=list)
    command: str | None = None  # the command that reproduces an evidence section on its own
    sql: tuple[str, ...] = ()  # the files below sql/ behind the section
    chart: dict | None = None  # a Vega-Lite spec
    skipped: str | None = None
    result: EvidenceResult | None = field(default=None, repr=False)  # the evidence behind a section (findings read it)


@dataclass
class EpochReport:
    epoch: int
    host: str
    closure: Closure
    summary: list[str]
    sections: list[Section]
    provenance: Provenance
    command: str
    # The main findings, first in the report, each pointing at its section (pipeline/output/report/findings.py).
    findings: list[Finding] = field(default_factory=list)
    # The host's builds over the epoch's time span: {"build", "from", "to"} as fractions of it, in time order
    # (where the index draws each build's band inside the epoch's column).
    build_segments: list[dict] = field(default_factory=list)


def build_epoch_report(
    con: duckdb.DuckDBPyConnection,
    epoch: int,
    host: str,
    *,
    finality_lag: timedelta = timedelta(hours=6),
    warehouse_arg: str | None = None,
    out_arg: str | None = None,
) -> EpochReport:
    """Every section of the epoch report; ``warehouse_arg``/``out_arg`` go into the reproducing commands."""
    with reads_once(con):  # the sections ask the same of the warehouse: its epochs, sources, closure
        return _build_epoch_report(con, epoch, host, finality_lag, warehouse_arg, out_arg)


def _build_epoch_report(
    con: duckdb.DuckDBPyConnection,
    epoch: int,
    host: str,
    finality_lag: timedelta,
    warehouse_arg: str | None,
    out_arg: str | None,
) -> EpochReport:
    try:  # a host or epoch the warehouse lacks, or a host with no slot in its escrows: an error, not a report
        check_request(con, host, Window(epoch=epoch))
        host = str(check_value(con, "slot_host", host, "--host"))
    except UnheldValue as exc:
        raise EvidenceError(str(exc)) from None
    except duckdb.OutOfMemoryException:
        raise out_of_memory("the report") from None
    closure = epoch_closure(con, finality_lag).filter(pl.col("epoch_id") == epoch)
    if closure.height == 0:  # held by the tracker's ledger only: a report needs the epoch's escrows
        raise EvidenceError(f"epoch {epoch}: no escrows of this epoch in the warehouse")
    c = closure.row(0, named=True)
    closure_info = Closure(c["escrows"], c["escrows_settled"], c["last_settled_at"], c["closed_at"], c["closed_by"])
    # Reproduce lines name no absolute path of this machine: paths are relative to the working directory.
    warehouse_arg, out_arg = (command_path(arg) if arg else None for arg in (warehouse_arg, out_arg))
    command = command_line(
        *("report", "epoch", str(epoch), "--host", host),
        *(("--out", out_arg) if out_arg else ()),
        *(("--warehouse", warehouse_arg) if warehouse_arg else ()),
    )

    overview, summary = _overview(con, epoch, host, closure_info)
    summary.append(builds_note(con, host))
    context = ReportContext(epoch=epoch, host=host, executed_by_epoch=_executed_by_epoch(con, host, epoch))
    sections = [overview]
    open_epochs = set(epoch_closure(con, finality_lag).filter(pl.col("closed_at").is_null())["epoch_id"].to_list())
    sections += [
        _evidence_section(con, spec, context, warehouse_arg, finality_lag, open_epochs)
        for spec in EVIDENCE.values()
        if spec.report is not None
    ]
    sections.append(_quarantine(con))
    prov = provenance_of(con, Window(epoch=epoch), command)
    findings = epoch_findings(
        {s.key: s.result for s in sections if s.result is not None}, {s.key: s.skipped for s in sections if s.skipped}
    )
    segments = epoch_build_segments(con, host, epoch)
    return EpochReport(epoch, host, closure_info, summary, sections, prov, command, findings, segments)


def epoch_build_segments(con: duckdb.DuckDBPyConnection, host: str, epoch: int) -> list[dict]:
    """The host's builds in effect over epoch ``epoch``'s time span (the one log-based tables use), each with
    the fractions of that span where it starts and ends."""
    from pipeline.evidence.log_window import time_bounds

    try:
        since, until = time_bounds(con, Window(epoch=epoch))
    except EvidenceError:
        return []
    assert since is not None and until is not None  # an epoch's span is bounded
    span = (until - since).total_seconds()
    rows = fetch_frame(
        con, sql_text("evidence/epoch_build_segments.sql"), {"host": host, "since": since, "until": until}
    )
    return [
        {
            "build": r["build"],
            "from": (r["seg_from"] - since).total_seconds() / span,
            "to": (r["seg_to"] - since).total_seconds() / span,
        }
        for r in rows.iter_rows(named=True)
        if span > 0 and r["seg_to"] > r["seg_from"]
    ]


def epoch_closure(con: duckdb.DuckDBPyConnection, finality_lag: timedelta) -> pl.DataFrame:
    """Per epoch: escrows, settled escrows, last settlement, closed_at and closed_by (named query closed_epochs)."""
    sql = named_queries()["closed_epochs"].sql
    return fetch_frame(con, sql, {"lag_seconds": finality_lag.total_seconds()})


def _of(n: int, total: int) -> str:
    return f"{n:,} of {total:,}" + (f" ({format_percent(n / total)})" if total else "")


def _overview(con, epoch: int, host: str, closure: Closure) -> tuple[Section, list[str]]:
    statuses = fetch_frame(con, sql_text("evidence/report_statuses.sql"), {"epoch": epoch, "host": host})
    total, by_host = int(statuses["inferences"].sum() or 0), int(statuses["by_host"].sum() or 0)
    table = statuses.select(
        pl.col("final_status"),
        pl.col("inferences"),
        pl.lit(total, pl.Int64).alias("of_all"),
        (pl.col("inferences") / total if total else pl.lit(None, pl.Float64)).alias("share"),
        pl.col("by_host").alias("executed_by_host"),
        pl.lit(by_host, pl.Int64).alias("of_host"),
        (pl.col("by_host") / by_host if by_host else pl.lit(None, pl.Float64)).alias("host_share"),
    )
    if closure.closed_at is not None:
        state = f"closed at {iso_utc(closure.closed_at)} ({closure.closed_by})"
    else:
        state = "not closed yet: its numbers may still change"
    summary = [
        f"Epoch {epoch}: {_of(closure.escrows_settled, closure.escrows)} escrows settled; {state}.",
        f"Inferences in the epoch's escrows: {total:,}; executed by the host: {_of(by_host, total)}.",
    ]
    section = Section(
        key="overview",
        heading="Epoch overview",
        title=f"Inferences of epoch {epoch} by final status",
        table=table,
        csv=frame_csv(table),
        sql=("evidence/report_statuses.sql",),
        notes=[
            "share = inferences / of_all; host_share = executed_by_host / of_host. Each inference counts once, "
            "under its final status from the diff-log replay: finished_no_verdict = finished, no verdict settled it "
            "(status finished); challenged_unresolved = challenged, the vote had not resolved it (status "
            "challenged); drained = still pending or started when the escrow entered settlement, under no other "
            "status. The epoch summary's finished (every inference with a finish transaction, whatever followed) "
            "and challenged (ever challenged, cleared and invalidated included) are other counts; its validated, "
            "invalidated and timed_out are these."
        ],
    )
    return section, summary


def _evidence_section(
    con,
    spec: EvidenceSpec,
    context: ReportContext,
    warehouse_arg: str | None,
    finality_lag: timedelta,
    open_epochs: set[int],
) -> Section:
    """One evidence section; over an open epoch (the report's, or the one it compares with) every section is
    computed marked provisional, and its command says --allow-open."""
    report = spec.report
    assert report is not None  # only the tables with a report section are in the report
    options = report_options(con, spec, context.epoch)
    allow_open = bool(open_epochs & {context.epoch, options.get("compare")})
    window = Window(epoch=context.epoch)
    command = evidence_command(spec, context.host, window, options, warehouse_arg, allow_open=allow_open)
    skipped = Section(key=spec.name, heading=spec.heading, sql=spec.sql)
    try:
        result = compute(
            spec.name,
            con,
            host=context.host,
            epoch=context.epoch,
            command=command,
            allow_open=allow_open,
            finality_lag=finality_lag,
            **options,
        )
    except EvidenceError as exc:
        skipped.skipped = str(exc)
        return skipped
    except duckdb.OutOfMemoryException:  # not a section without data: the whole report needs more memory
        raise out_of_memory("the report") from None
    except duckdb.Error as exc:  # a table whose warehouse data was never ingested (e.g. no logs)
        skipped.skipped = f"its data is absent from the warehouse ({str(exc).splitlines()[0]})"
        return skipped
    if result.rows.height == 0:
        reason = (
            " ".join([n for n in result.notes if not is_closure_note(n)][:1]) or f"no rows for epoch {context.epoch}"
        )
        skipped.skipped = NO_DATA + reason
        return skipped
    table = report.view(result, context) if report.view else result.rows
    from pipeline.output.render.charts import legible  # loads Altair, as drawing a chart does anyway

    return Section(
        key=spec.name,
        heading=spec.heading,
        # the page names the host once, in its heading; a section's title says "the host"
        title=result.title.replace(context.host, "the host"),
        table=table,
        csv=render_csv(result),
        lines=stat_lines(result.stats),
        notes=list(result.notes),
        command=command,
        sql=spec.sql,
        chart=legible(report.chart(result, table)) if report.chart else None,
        result=result,
    )


def builds_note(con, host: str) -> str:
    """One line on the host's build timeline against its vLLM logs (`builds check`): every by-build number
    rests on that timeline."""
    from pipeline.evidence.buildcheck import check, loaded_timeline

    result = check(con, loaded_timeline(con), host)
    if result.contradictions:
        prefix = f"{host}: "
        lines = "; ".join(line.removeprefix(prefix) for line in result.contradictions)
        return (
            f"Build timeline: {len(result.contradictions)} contradiction(s) with the vLLM logs, so the by-build "
            f"numbers may be misattributed ({lines}; `gonka-evidence builds check`)."
        )
    if any("no vLLM start cycles" in note for note in result.notes):
        return "Build timeline: not checked (no vLLM start cycles of the host in the warehouse)."
    return "Build timeline: consistent with the host's vLLM start cycles (`gonka-evidence builds check`)."


def _executed_by_epoch(con, host: str, epoch: int) -> dict[int, int]:
    answers = fetch_frame(con, sql_text("evidence/host_answers.sql"), {"host": host, **Window(epoch=epoch).params})
    return dict(answers.group_by("epoch_id").len().iter_rows())


def _quarantine(con) -> Section:
    from pipeline.evidence.provenance import source_label

    q = fetch_frame(con, named_queries()["quarantine_summary"].sql)
    q = q.with_columns(  # the label provenance shows (a bundle's own, under `verify`)
        label=pl.Series(
            [source_label(s, label) for s, label in q.select("source_id", "label").iter_rows()], dtype=pl.String
        )
    )
    sql = ("queries/quarantine_summary.sql", "evidence/report_raw_tables.sql", "evidence/report_table_rows.sql")
    if q.height == 0:
        return Section(key="quarantine", heading="Quarantine", skipped="no quarantined rows in the warehouse.", sql=sql)
    read = _rows_read(con)
    table = (
        q.select(pl.coalesce("label", "source_id").alias("source"), "table_name", "reason", "rows")
        .with_columns(
            pl.col("table_name").replace_strict(read, default=None, return_dtype=pl.Int64).alias("rows_in_table"),
        )
        .rename({"rows": "quarantined"})
    )
    table = table.with_columns((pl.col("quarantined") / pl.col("rows_in_table")).alias("quarantined_share"))
    return Section(
        key="quarantine",
        heading="Quarantine",
        title="Quarantined rows (whole warehouse, all open)",
        table=table,
        csv=frame_csv(table),
        sql=sql,
        notes=[
            "Rows that could not be decoded; rows_in_table = rows of that source table kept in the warehouse "
            "(for diffs: diff records, each holding several transactions). Quarantine is not tied to an epoch, "
            "so it is counted over the whole warehouse."
        ],
    )


def _rows_read(con) -> dict[str, int]:
    """Rows kept per source table, by the name quarantine uses (``raw_diffs`` → ``diffs``)."""
    counts = {}
    for name in fetch_frame(con, sql_text("evidence/report_raw_tables.sql"))["table_name"]:
        counts[name.removeprefix("raw_")] = int(
            fetch_frame(con, sql_text("evidence/report_table_rows.sql"), {"table": name})["n"][0]
        )
    return counts
