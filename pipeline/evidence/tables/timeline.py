"""The `timeline` evidence table: the host hour by hour (or per `--bucket`), with its build switches marked."""

from __future__ import annotations

import datetime as dt
import re

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.evidence.log_window import time_bounds
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.spec import Column, EvidenceSpec, Option, ReportSection, column_group, register
from pipeline.evidence.stats import interval_stat, with_wilson
from pipeline.evidence.window import EvidenceError, Window
from pipeline.warehouse.database import fetch_frame

NAME = "timeline"
DEFAULT_BUCKET = "1h"
BUCKET_PATTERN = re.compile(r"^([1-9][0-9]*)(m|h|d)$")  # also the Polars duration syntax
UTC = dt.UTC
MAX_BUCKETS = 100_000  # a table, not a data dump: about eleven years of hours, ten weeks of minutes
COUNTS = (
    "answers",
    "challenged_or_invalidated",
    "others_answers",
    "others_challenged_or_invalidated",
    "verdicts_cast",
    "invalid_cast",
    "engine_deaths",
    "restarts",
)
COLUMNS = (
    Column("bucket_start", "start of the bucket (UTC)"),
    Column(
        "build",
        "the host's builds in effect during the bucket (`host_builds`), in order, `A → B` when one starts inside it; "
        "empty before its first entry",
    ),
    Column("build_switch", "an entry of a different build starts inside the bucket (the host's first entry counts)"),
    Column("answers", "the host's [answers](evidence-rules.md#common-rules), as in peer-invalidation, on `started_at`"),
    Column(
        "challenged_or_invalidated",
        "answers that ever received an invalid sampled validation or ended invalidated (a challenge later cleared "
        "counts)",
    ),
    *column_group("rate", "ci_low", "ci_high", meaning="`challenged_or_invalidated / answers`, Wilson 95%"),
    *column_group(
        "others_answers",
        "others_challenged_or_invalidated",
        meaning="the same for every other executor in the escrows where the host has an answer in the window; over "
        "all buckets they are peer-invalidation's `others` row",
    ),
    *column_group("others_rate", "others_ci_low", "others_ci_high", meaning="their rate, Wilson 95%"),
    Column(
        "verdicts_cast",
        "verdicts the host cast on other hosts' answers (as in [votes-by-build](#votes-by-build), one per "
        "transaction), on `event_at`",
    ),
    Column("invalid_cast", "the invalid ones among them"),
    Column("engine_deaths", "as in [stability](#stability): rows of `engine_deaths` (one per crash); 0 without logs"),
    Column("restarts", "start cycles after the logs already show the engine, as in stability; 0 without logs"),
)


# What the interval columns are (docs/evidence.md, statistics): one Wilson interval per rate.
INTERVALS = {
    "rate": interval_stat("challenged_or_invalidated / answers, per bucket"),
    "others_rate": interval_stat(
        "others_challenged_or_invalidated / others_answers, per bucket", ("others_ci_low", "others_ci_high")
    ),
}


def bucket_width(text: str) -> tuple[str, dt.timedelta]:
    """``"30m"`` → the Polars duration and its length; anything else is a one-line user error."""
    match = BUCKET_PATTERN.match(text.strip().lower())
    if not match:
        raise EvidenceError(f"--bucket {text!r} is not a width such as 30m, 1h or 1d")
    count, unit = int(match.group(1)), match.group(2)
    try:
        return f"{count}{unit}", dt.timedelta(**{{"m": "minutes", "h": "hours", "d": "days"}[unit]: count})
    except OverflowError:
        raise EvidenceError(
            f"--bucket {text!r} is wider than any window (at most {dt.timedelta.max.days:,}d)"
        ) from None


def timeline(con: duckdb.DuckDBPyConnection, host: str, window: Window, *, bucket: str | None = None) -> EvidenceResult:
    """The host's answers, their rate against the others', its verdicts and its engine events per time bucket."""
    every, width = bucket_width(bucket or DEFAULT_BUCKET)
    params = {"host": host, **window.params}
    answers = fetch_frame(con, sql_text("evidence/timeline_answers.sql"), params)
    verdicts = fetch_frame(con, sql_text("evidence/timeline_verdicts_cast.sql"), params)
    builds = fetch_frame(con, sql_text("evidence/host_build_windows.sql"), {"host": host})
    events = fetch_frame(
        con, sql_text("evidence/timeline_engine_events.sql"), {"host": host, **_event_bounds(con, window)}
    )

    host_answers = answers.filter(pl.col("is_host"))
    other_answers = answers.filter(~pl.col("is_host"))
    parts = [
        _count(
            host_answers, every, answers=pl.len(), challenged_or_invalidated=pl.col("challenged_or_invalidated").sum()
        ),
        _count(
            other_answers,
            every,
            others_answers=pl.len(),
            others_challenged_or_invalidated=pl.col("challenged_or_invalidated").sum(),
        ),
        _count(verdicts, every, verdicts_cast=pl.len(), invalid_cast=(~pl.col("valid")).sum()),
        _count(events, every, engine_deaths=pl.col("death").sum(), restarts=pl.col("restart").sum()),
    ]
    starts = pl.concat([p.select("bucket_start") for p in parts])
    notes = []
    if starts.height == 0:
        rows = pl.DataFrame(schema={"bucket_start": pl.Datetime("us", "UTC")})
        notes.append(f"host {host} has no answers, verdicts or engine events in {window.describe()}; nothing to show.")
    else:
        first, last = starts["bucket_start"].min(), starts["bucket_start"].max()
        assert isinstance(first, dt.datetime) and isinstance(last, dt.datetime)  # a non-empty Datetime column
        if (last - first) / width >= MAX_BUCKETS:
            raise EvidenceError(
                f"{window.describe()} spans more than {MAX_BUCKETS:,} buckets of {every}; "
                "choose a wider --bucket or a shorter window"
            )
        rows = pl.DataFrame(
            {"bucket_start": pl.datetime_range(first, last, interval=every, time_zone="UTC", eager=True)}
        )
    rows = rows.with_columns(pl.col("bucket_start").dt.cast_time_unit("us"))
    for part in parts:
        rows = rows.join(
            part.with_columns(pl.col("bucket_start").dt.cast_time_unit("us")), on="bucket_start", how="left"
        )
    rows = rows.with_columns(pl.col(c).fill_null(0).cast(pl.Int64) for c in COUNTS)
    labels, switches = _builds(rows["bucket_start"].to_list(), width, builds)
    rows = rows.with_columns(
        build=pl.Series(labels, dtype=pl.String),
        build_switch=pl.Series(switches, dtype=pl.Boolean),
        rate=pl.when(pl.col("answers") > 0).then(pl.col("challenged_or_invalidated") / pl.col("answers")),
        others_rate=pl.when(pl.col("others_answers") > 0).then(
            pl.col("others_challenged_or_invalidated") / pl.col("others_answers")
        ),
    )
    rows = with_wilson(rows, "challenged_or_invalidated", "answers")
    rows = with_wilson(rows, "others_challenged_or_invalidated", "others_answers", prefix="others_ci").select(COLUMNS)

    notes.append(
        f"Buckets of {every} (UTC). answers and others_answers on started_at (others = other executors in the "
        "escrows where the host answered); verdicts_cast on the verdict time; engine_deaths and restarts from the "
        "host's vLLM logs (zero without logs). build_switch marks a bucket in which a new build of the host starts."
    )
    return EvidenceResult(
        evidence=NAME,
        title=f"Timeline of {host} per {every} ({window.describe()})",
        params={"host": host, **window.params, "bucket": every},
        rows=rows,
        stats={
            "buckets": rows.height,
            "buckets_with_data": _active_buckets(rows).height,
            "build_switches": int(rows["build_switch"].sum()),
            "interval": INTERVALS,
        }
        if rows.height
        else {},
        notes=notes,
    )


def _event_bounds(con: duckdb.DuckDBPyConnection, window: Window) -> dict:
    """The time bounds of log events; an epoch without inferences has no time span, hence no events."""
    try:
        since, until = time_bounds(con, window)
    except EvidenceError:
        since = until = dt.datetime(1970, 1, 1, tzinfo=UTC)  # an empty range
    return {"since": since, "until": until}


def _count(frame: pl.DataFrame, every: str, **aggregations: pl.Expr) -> pl.DataFrame:
    """The aggregations per bucket of the frame's ``at``."""
    return frame.group_by(bucket_start=pl.col("at").dt.convert_time_zone("UTC").dt.truncate(every)).agg(**aggregations)


def _builds(starts: list[dt.datetime], width: dt.timedelta, builds: pl.DataFrame) -> tuple[list, list[bool]]:
    """Per bucket: the builds in effect (``A → B``) and whether an entry of a different build starts in it."""
    entries = builds.rows(named=True)
    labels, switches = [], []
    for start in starts:
        end = start + width
        current = [e for e in entries if e["valid_from"] < end and (e["valid_to"] is None or e["valid_to"] > start)]
        names: list[str] = []
        for entry in current:
            if not names or names[-1] != entry["build"]:
                names.append(entry["build"])
        labels.append(" → ".join(names) or None)
        switched = False
        for i, entry in enumerate(entries):
            if start <= entry["valid_from"] < end and (i == 0 or entries[i - 1]["build"] != entry["build"]):
                switched = True
        switches.append(switched)
    return labels, switches


def _active_buckets(rows: pl.DataFrame) -> pl.DataFrame:
    """The buckets with something in them or a build switch."""
    return rows.filter(pl.any_horizontal(pl.col(c) > 0 for c in COUNTS) | pl.col("build_switch"))


def _report_view(result: EvidenceResult, context) -> pl.DataFrame:
    """The report's table lists the buckets with data (``buckets_with_data``); its CSV and chart keep them all."""
    return _active_buckets(result.rows)


def _chart(result: EvidenceResult, table: pl.DataFrame) -> dict | None:
    """The host's and the others' rate per bucket as lines, build switches as labelled vertical rules."""
    import altair as alt

    rows = result.rows
    if rows.height == 0:
        return None
    rates = pl.concat(
        [
            rows.select("bucket_start", pl.lit("host").alias("group"), pl.col("rate"), pl.col("answers")),
            rows.select(
                "bucket_start",
                pl.lit("others").alias("group"),
                pl.col("others_rate").alias("rate"),
                pl.col("others_answers").alias("answers"),
            ),
        ]
    )  # a bucket without answers has a null rate, which breaks the line instead of bridging the gap
    lines = (
        alt.Chart(rates)
        .mark_line(point=True)
        .encode(
            x=alt.X("bucket_start:T", title=f"bucket start (UTC, {result.params['bucket']})"),
            y=alt.Y("rate:Q", title="challenged or invalidated / answers", axis=alt.Axis(format="%")),
            color=alt.Color("group:N", title=None),
            tooltip=["bucket_start:T", "group", "rate", "answers"],
        )
    )
    switches = rows.filter(pl.col("build_switch")).select("bucket_start", "build")
    layers = [lines]
    if switches.height:
        rule = alt.Chart(switches).encode(x="bucket_start:T")
        layers += [
            rule.mark_rule(color="gray", strokeDash=[4, 3]),
            rule.mark_text(align="left", dx=3, dy=-6, angle=0, fontSize=10, limit=0).encode(
                y=alt.value(0), text="build:N"
            ),
        ]
    return (
        alt.layer(*layers)
        .properties(title="Challenged or invalidated answers per bucket, build switches marked", width=640, height=260)
        .to_dict()
    )


SPEC = register(
    EvidenceSpec(
        name=NAME,
        summary="The host per hour (or --bucket): answers, challenged-or-invalidated rate against the others' in the "
        "same escrows, verdicts cast, engine deaths and restarts, build switches marked.",
        compute=timeline,
        columns=COLUMNS,
        sql=(
            "evidence/timeline_answers.sql",
            "evidence/timeline_verdicts_cast.sql",
            "evidence/host_build_windows.sql",
            "evidence/timeline_engine_events.sql",
            "evidence/log_window_bounds.sql",
        ),
        options=(
            Option(
                "bucket",
                "--bucket",
                "Width of a time bucket: N followed by m, h or d, e.g. 30m or 1d (default 1h).",
                type=str,
                metavar="WIDTH",
            ),
        ),
        report=ReportSection(order=15, view=_report_view, chart=_chart),
        description="Time buckets (`--bucket`: N followed by `m`, `h` or `d`; default `1h`), UTC, aligned "
        "to multiples of the width since 1970-01-01, every bucket from the first to the last holding anything (empty "
        "ones included, so the chart shows gaps; the report's table lists the non-empty ones). Answers and "
        "verdicts: `--epoch` on the escrow's epoch, `--since/--until` on each row's own time; log events: the "
        "epoch's time span (first to last event of its inferences).",
        notes="`stats`: `buckets` (rows), `buckets_with_data` (rows with a count above zero or a build switch: the "
        "rows the epoch report lists), `build_switches` and `interval` (what each rate's interval columns are). The "
        "chart draws each build switch as a labelled rule.",
    )
)
