"""The epoch report: every evidence table of one epoch for one host, as Markdown, HTML, CSV and charts.

    report = build_epoch_report(con, epoch=3, host="gonka1…", finality_lag=timedelta(hours=6))
    write_epoch_report(report, Path("out"))   # out/epoch-3/{report.md, report.html, charts/, tables/}

A report is a list of sections, one per evidence table in `EVIDENCE` (the tables of
other feature areas join as they are registered), plus the epoch overview and the
quarantine counts. A table that cannot be computed for the epoch (its data is absent,
e.g. no engine logs) becomes a skipped section with the reason. Every count a reader
sees in the Markdown comes with its denominator ("31 of 55"): the tables that hold
bare counts (the epoch summary) are shown as "count | of | share" rows.

The Markdown holds no wall-clock time, so the same warehouse gives the same bytes
(`fingerprint` hashes it without the provenance lines, which name run ids); the
scheduled `run` rewrites a report only when that fingerprint changes.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import shutil
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from pipeline.evidence import EVIDENCE, EvidenceError, EvidenceResult, compute
from pipeline.evidence.provenance import provenance as provenance_of
from pipeline.evidence.window import Window
from pipeline.paths import REPORTS_DIR, sql_text
from pipeline.query import named_queries
from pipeline.render.csv import render_csv
from pipeline.render.text import format_percent, format_value, iso_utc, provenance_lines, stat_lines, table_cells
from pipeline.warehouse import fetch_frame

# The order of the report (issue 6); tables registered later that are not listed here follow them.
SECTION_ORDER = (
    "epoch-summary", "peer-invalidation", "votes-by-build", "tracker", "acceptance", "stability",
    "answer-integrity", "answers-by-sampling", "similarity", "poc",
)
# Options the report asks of a table when the table accepts them (see `compute`).
SECTION_OPTIONS = {"peer-invalidation": {"by_escrow": True}}
HEADINGS = {
    "peer-invalidation": "Peer invalidation in the epoch's escrows",
    "tracker": "Tracker (against the previous epoch)",
    "acceptance": "Speculative-decoding acceptance",
    "stability": "Engine stability",
    "poc": "PoC validation",
}


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
    lines: list[str] = field(default_factory=list)  # statistics, as bullets
    notes: list[str] = field(default_factory=list)
    provenance: list[str] = field(default_factory=list)
    chart: dict | None = None  # a Vega-Lite spec
    skipped: str | None = None


@dataclass
class EpochReport:
    epoch: int
    host: str
    closure: Closure
    summary: list[str]
    sections: list[Section]
    provenance: list[str]
    command: str


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
    closure = epoch_closure(con, finality_lag).filter(pl.col("epoch_id") == epoch)
    if closure.height == 0:
        raise EvidenceError(f"epoch {epoch}: no escrows of this epoch in the warehouse")
    c = closure.row(0, named=True)
    closure_info = Closure(c["escrows"], c["escrows_settled"], c["last_settled_at"], c["closed_at"], c["closed_by"])
    w_opt = f" -w {warehouse_arg}" if warehouse_arg else ""
    command = f"gonka-evidence report epoch {epoch} --host {host}" + (f" --out {out_arg}" if out_arg else "") + w_opt

    overview, summary = _overview(con, epoch, host, closure_info)
    sections = [overview]
    names = [n for n in SECTION_ORDER if n in EVIDENCE] + [n for n in EVIDENCE if n not in SECTION_ORDER]
    for name in names:
        sections.append(_evidence_section(con, name, epoch, host, w_opt))
    missing = [n for n in SECTION_ORDER if n not in EVIDENCE]
    if missing:
        sections.append(Section(key="not-included", heading="Not in this report",
                                skipped=f"{', '.join(missing)}: not available in this pipeline version."))
    sections.append(_quarantine(con))
    prov = provenance_of(con, Window(epoch=epoch), command)
    return EpochReport(epoch, host, closure_info, summary, sections, provenance_lines(prov, quote_command=_code), command)


def epoch_closure(con: duckdb.DuckDBPyConnection, finality_lag: timedelta) -> pl.DataFrame:
    """Per epoch: escrows, settled escrows, last settlement, closed_at and closed_by (named query closed_epochs)."""
    sql = named_queries()["closed_epochs"].sql
    return fetch_frame(con, sql, {"lag_seconds": finality_lag.total_seconds()})


# --- sections -------------------------------------------------------------------------------------------


def _of(n: int, total: int) -> str:
    return f"{n:,} of {total:,}" + (f" ({format_percent(n / total)})" if total else "")


def _overview(con, epoch: int, host: str, closure: Closure) -> tuple[Section, list[str]]:
    statuses = fetch_frame(
        con,
        "SELECT status, count(*) AS inferences, count(*) FILTER (executor = $host) AS by_host "
        "FROM inferences WHERE epoch_id = $epoch GROUP BY ALL ORDER BY status",
        {"epoch": epoch, "host": host},
    )
    total, by_host = int(statuses["inferences"].sum() or 0), int(statuses["by_host"].sum() or 0)
    table = statuses.select(
        pl.col("status"),
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
        key="overview", heading="Epoch overview", title=f"Inferences of epoch {epoch} by final status",
        table=table, csv=table.write_csv().rstrip("\n"),
        notes=["share = inferences / of_all; host_share = executed_by_host / of_host (final status from the diff-log replay)."],
    )
    return section, summary


def _evidence_section(con, name: str, epoch: int, host: str, w_opt: str) -> Section:
    accepted = inspect.signature(EVIDENCE[name]).parameters
    options = {k: v for k, v in SECTION_OPTIONS.get(name, {}).items() if k in accepted}
    if "compare" in accepted and epoch > 0:
        options["compare"] = epoch - 1  # tracker: against the previous epoch
    flags = "".join(f" --{k.replace('_', '-')}" + ("" if v is True else f" {v}") for k, v in options.items())
    command = f"gonka-evidence evidence {name} --host {host} --epoch {epoch}{flags}{w_opt}"
    heading = HEADINGS.get(name) or name.replace("-", " ").capitalize()
    try:
        result = compute(name, con, host=host, epoch=epoch, command=command, **options)
    except EvidenceError as exc:
        return Section(key=name, heading=heading, skipped=str(exc))
    except duckdb.Error as exc:  # a table whose warehouse data was never ingested (e.g. no logs)
        return Section(key=name, heading=heading, skipped=f"its data is absent from the warehouse ({str(exc).splitlines()[0]})")
    if result.rows.height == 0:
        reason = " ".join(result.notes[:1]) or f"no rows for epoch {epoch}"
        return Section(key=name, heading=heading, skipped=f"no data for this epoch: {reason}")
    executed = _executed_by_epoch(con, host, epoch)
    table = _with_denominators(result, executed)
    return Section(
        key=name, heading=heading, title=result.title, table=table, csv=render_csv(result),
        lines=stat_lines(result.stats), notes=list(result.notes),
        provenance=[f"window: epoch {epoch}; reproduce: {_code(command)}"], chart=_chart(result, table),
    )


def _with_denominators(result: EvidenceResult, executed_by_epoch: dict[int, int]) -> pl.DataFrame:
    """The rows as the reader sees them: bare counts become ``count | of | share`` rows.

    ``executed_by_epoch``: the inferences the host executed per epoch (any final status),
    the whole that the epoch summary's outcome counts are parts of."""
    if result.evidence != "epoch-summary":
        return result.rows
    # One row per epoch; each count is shown against the whole it is part of.
    out = []
    for row in result.rows.iter_rows(named=True):
        executed = executed_by_epoch.get(row["epoch"], 0)
        checks = row["validations_valid"] + row["validations_invalid"]
        votes = row["votes_valid"] + row["votes_invalid"]
        parts = [
            ("sealed", row["sealed"], executed, "inferences executed"),
            ("finished", row["finished"], executed, "inferences executed"),
            ("validated", row["validated"], executed, "inferences executed"),
            ("invalidated", row["invalidated"], executed, "inferences executed"),
            ("timed_out", row["timed_out"], executed, "inferences executed"),
            ("challenged", row["challenged"], executed, "inferences executed"),
            ("cleared", row["cleared"], row["challenged"], "challenged"),
            ("validations_valid", row["validations_valid"], checks, "sampled validations"),
            ("validations_invalid", row["validations_invalid"], checks, "sampled validations"),
            ("votes_valid", row["votes_valid"], votes, "challenge votes"),
            ("votes_invalid", row["votes_invalid"], votes, "challenge votes"),
            ("input_tokens", row["input_tokens"], row["finished"], "finished inferences (sum of tokens)"),
            ("output_tokens", row["output_tokens"], row["finished"], "finished inferences (sum of tokens)"),
        ]
        for measure, n, whole, unit in parts:
            share = None if not whole or measure.endswith("_tokens") else n / whole
            out.append({"epoch": row["epoch"], "measure": measure, "count": n, "of": whole, "of_what": unit, "share": share})
    return pl.DataFrame(out, schema={"epoch": pl.Int64, "measure": pl.String, "count": pl.Int64, "of": pl.Int64,
                                     "of_what": pl.String, "share": pl.Float64})


def _executed_by_epoch(con, host: str, epoch: int) -> dict[int, int]:
    answers = fetch_frame(con, sql_text("evidence/host_answers.sql"), {"host": host, **Window(epoch=epoch).params})
    return dict(answers.group_by("epoch_id").len().iter_rows())


def _quarantine(con) -> Section:
    q = fetch_frame(con, named_queries()["quarantine_summary"].sql)
    if q.height == 0:
        return Section(key="quarantine", heading="Quarantine", skipped="no quarantined rows in the warehouse.")
    read = _rows_read(con)
    table = q.select(pl.coalesce("label", "source_id").alias("source"), "table_name", "reason", "rows").with_columns(
        pl.col("table_name").replace_strict(read, default=None, return_dtype=pl.Int64).alias("rows_in_table"),
    ).rename({"rows": "quarantined"})
    table = table.with_columns((pl.col("quarantined") / pl.col("rows_in_table")).alias("quarantined_share"))
    return Section(
        key="quarantine", heading="Quarantine", title="Quarantined rows (whole warehouse, all open)",
        table=table, csv=table.write_csv().rstrip("\n"),
        notes=["Rows that could not be decoded; rows_in_table = rows of that source table kept in the warehouse "
               "(for diffs: diff records, each holding several transactions). Quarantine is not tied to an epoch, "
               "so it is counted over the whole warehouse."],
    )


def _rows_read(con) -> dict[str, int]:
    counts = {}
    for name in fetch_frame(con, "SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'raw\\_%' ESCAPE '\\'")["table_name"]:
        counts[name.removeprefix("raw_")] = int(fetch_frame(con, f'SELECT count(*) AS n FROM "{name}"')["n"][0])
    return counts


# --- charts ---------------------------------------------------------------------------------------------


def _chart(result: EvidenceResult, table: pl.DataFrame) -> dict | None:
    """A Vega-Lite spec for the tables that have a natural picture (rates with their Wilson intervals)."""
    import altair as alt

    rows = result.rows
    external = _external_chart(result)
    if external is not None:
        return external
    if result.evidence == "votes-by-build":
        data = rows.filter(pl.col("total") > 0)
        if data.height == 0:
            return None
        data = data.with_columns(label=pl.format("{} ({} of {})", pl.col("kind"), pl.col("invalid"), pl.col("total")))
        base = alt.Chart(data).encode(y=alt.Y("build:N", title=None), yOffset="kind:N", color=alt.Color("kind:N"))
        chart = base.mark_bar().encode(x=alt.X("invalid_rate:Q", title="invalid verdicts / verdicts", axis=alt.Axis(format="%")),
                                       tooltip=["build", "kind", "invalid", "total"])
        bars = chart + base.mark_rule(color="black").encode(x="ci_low:Q", x2="ci_high:Q")
        return bars.properties(title="Invalid verdicts by build (Wilson 95%)", width=420).to_dict()
    if result.evidence == "peer-invalidation":
        data = rows.filter(pl.col("escrow_id") == "all") if "escrow_id" in rows.columns else rows
        data = data.with_columns(label=pl.format("{} ({} of {})", pl.col("group"), pl.col("challenged_or_invalidated"), pl.col("answers")))
        base = alt.Chart(data).encode(y=alt.Y("label:N", title=None))
        chart = base.mark_bar().encode(x=alt.X("rate:Q", title="challenged or invalidated / answers", axis=alt.Axis(format="%")))
        return (chart + base.mark_rule(color="black").encode(x="ci_low:Q", x2="ci_high:Q")).properties(
            title="Host vs other executors (Wilson 95%)", width=420).to_dict()
    if result.evidence == "epoch-summary":
        data = table.filter(pl.col("share").is_not_null() & (pl.col("of_what") == "inferences executed"))
        if data.height == 0:
            return None
        chart = alt.Chart(data).mark_bar().encode(
            y=alt.Y("measure:N", sort=None, title=None),
            x=alt.X("share:Q", title="share of the host's inferences", axis=alt.Axis(format="%")),
            tooltip=["measure", "count", "of"],
        )
        return chart.properties(title="Outcomes of the host's inferences", width=420).to_dict()
    return None


def _external_chart(result: EvidenceResult) -> dict | None:
    """A chart from the charts module of the log-based tables, when it offers one for this table."""
    try:
        from pipeline.render import charts  # type: ignore[attr-defined]
    except ImportError:
        return None
    make = getattr(charts, f"{result.evidence.replace('-', '_')}_chart", None)  # e.g. acceptance_chart(result)
    if make is None or len(inspect.signature(make).parameters) != 1:
        return None
    chart = make(result)
    if chart is None:
        return None
    return chart if isinstance(chart, dict) else chart.to_dict()


# --- rendering ------------------------------------------------------------------------------------------


def _code(text: str) -> str:
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _md_table(frame: pl.DataFrame) -> str:
    header, numeric, body = table_cells(frame)
    esc = lambda c: c.replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(map(esc, header)) + " |", "| " + " | ".join("---:" if n else "---" for n in numeric) + " |"]
    lines += ["| " + " | ".join(map(esc, cells)) + " |" for cells in body]
    return "\n".join(lines)


def _environment():
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(loader=FileSystemLoader(REPORTS_DIR), undefined=StrictUndefined, keep_trailing_newline=True,
                      trim_blocks=True, lstrip_blocks=True, autoescape=False)
    env.filters["md_table"] = _md_table
    env.filters["cells"] = table_cells
    env.globals["format_value"] = format_value
    return env


def render_report_markdown(report: EpochReport, with_provenance: bool = True) -> str:
    return _environment().get_template("epoch_report.md.j2").render(r=report, with_provenance=with_provenance)


def render_report_html(report: EpochReport, svgs: dict[str, str]) -> str:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    env = Environment(loader=FileSystemLoader(REPORTS_DIR), undefined=StrictUndefined,
                      autoescape=select_autoescape(["html", "j2"]), trim_blocks=True, lstrip_blocks=True)
    env.filters["cells"] = table_cells
    return env.get_template("epoch_report.html.j2").render(r=report, svgs=svgs)


def fingerprint(report: EpochReport) -> str:
    """What the report says, without its provenance lines (run ids change with every ingest)."""
    return hashlib.sha256(render_report_markdown(report, with_provenance=False).encode()).hexdigest()


def write_epoch_report(report: EpochReport, out_dir: Path) -> Path:
    """Write ``out_dir/epoch-N/`` whole: built in a temporary directory, then renamed into place."""
    import vl_convert as vlc

    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / f"epoch-{report.epoch}"
    staging = out_dir / f".epoch-{report.epoch}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "charts").mkdir(parents=True)
    (staging / "tables").mkdir()
    svgs = {}
    for section in report.sections:
        if section.csv is not None:
            (staging / "tables" / f"{section.key}.csv").write_text(section.csv + "\n")
        if section.chart is not None:
            svg = vlc.vegalite_to_svg(section.chart)
            (staging / "charts" / f"{section.key}.svg").write_text(svg)
            (staging / "charts" / f"{section.key}.png").write_bytes(vlc.vegalite_to_png(section.chart, scale=2))
            svgs[section.key] = svg
    (staging / "report.md").write_text(render_report_markdown(report))
    (staging / "report.html").write_text(render_report_html(report, svgs))
    old = out_dir / f".epoch-{report.epoch}.old-{os.getpid()}"
    if final.exists():
        final.rename(old)
    staging.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    return final
