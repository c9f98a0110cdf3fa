"""The `votes-by-build` evidence table: the host as validator, its verdicts on other hosts' answers per build."""

from __future__ import annotations

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.spec import Column, EvidenceSpec, ReportSection, column_group, register
from pipeline.evidence.stats import fisher_freeman_halton, holm_adjust, interval_stat, with_wilson
from pipeline.evidence.window import Window
from pipeline.warehouse.database import fetch_frame

NAME = "votes-by-build"
KINDS = ("validation", "vote")
UNATTRIBUTED = "unattributed"
COLUMNS = (
    Column(
        "build",
        "the host's build when it cast the verdict; every build of the host appears (with zeros and null rates "
        "when it cast nothing), `unattributed` only when there are such verdicts, last",
    ),
    Column(
        "kind",
        "`validation` (the sampled MsgValidation) or `vote` (MsgValidationVote after a challenge); both "
        "rows for every build",
    ),
    *column_group(
        "valid",
        "invalid",
        meaning="verdict transactions the host cast on answers executed by another address",
    ),
    Column("total", "`valid + invalid`"),
    *column_group("invalid_rate", "ci_low", "ci_high", meaning="`invalid / total`, Wilson 95%"),
    Column(
        "disagreed",
        "of the resolved verdicts, those that contradict the final status (valid on an invalidated answer, invalid "
        "on a validated one)",
    ),
    Column("resolved", "verdicts on inferences whose final status is validated or invalidated"),
    Column(
        "validation_rule",
        "the verdict rule the host ran (view `verdict_rules`): `before #1487` (a 400/422 of its own re-run and an "
        "executor answer without logprobs are valid), `#1487` (both invalid) or `short-output #1955` (the escrow's "
        "devshard version runs the short-output score and checks), ` + `-joined when the row's verdicts "
        "fall under both; null without verdicts",
    ),
    Column(
        "rule_by",
        "`version` (the escrow's devshard version names its rule set, view `devshard_version_rules`); assumed: "
        "`build` (by when the host's build was deployed) or `date` (build unknown: by the verdict's date)",
    ),
)


def votes_by_build(con: duckdb.DuckDBPyConnection, host: str, window: Window) -> EvidenceResult:
    """Valid and invalid verdicts the host cast on other hosts' answers, per build and kind."""
    counts = fetch_frame(con, sql_text("evidence/host_verdict_counts.sql"), {"host": host, **window.params})
    builds = fetch_frame(con, sql_text("evidence/host_builds.sql"), {"host": host})["build"].to_list()
    labels = [b for b in builds if b != UNATTRIBUTED]
    if (counts["build"] == UNATTRIBUTED).any():
        labels.append(UNATTRIBUTED)

    grid = pl.DataFrame(
        [(label, kind, order) for order, (label, kind) in enumerate((b, k) for b in labels for k in KINDS)],
        schema={"build": pl.String, "kind": pl.String, "order": pl.Int64},
        orient="row",
    )
    count_cols = ["valid", "invalid", "disagreed", "resolved"]
    rows = (
        grid.join(counts, on=["build", "kind"], how="left")
        .with_columns(pl.col(c).fill_null(0).cast(pl.Int64) for c in count_cols)
        .with_columns(total=pl.col("valid") + pl.col("invalid"))
        .with_columns(
            invalid_rate=pl.when(pl.col("total") > 0).then(pl.col("invalid") / pl.col("total")).otherwise(None)
        )
        .sort("order")
    )
    rows = with_wilson(rows, "invalid", "total").select(COLUMNS)

    notes = []
    if counts.height == 0:
        notes.append(f"host {host} validated nothing in {window.describe()}.")
    if not builds:
        notes.append(f"host {host} has no entry in the build timeline (`gonka-evidence builds FILE.toml`).")
    notes.append(
        "Verdicts the host cast on other hosts' answers, one per transaction (an address with several "
        "slots counts once), including repeated validations and votes cast after resolution. "
        "disagreed / resolved: verdicts that contradict the final validated or invalidated status."
    )
    if rules := sorted({r for v in counts["validation_rule"].drop_nulls().to_list() for r in v.split(" + ")}):
        notes.append(
            f"Verdict rule(s) applied: {', '.join(rules)}. Before gonka-ai/gonka #1487 (merged 2026-07-20) a "
            "400/422 from the host's own re-run and an executor answer without logprobs were valid verdicts; from it "
            "they are invalid, so invalid rates of builds under different rules are not comparable."
        )
    return EvidenceResult(
        evidence=NAME,
        title=f"Verdicts of {host} on other hosts' answers, by build ({window.describe()})",
        params={"host": host, **window.params},
        rows=rows,
        stats=_stats(rows) if counts.height else {},
        notes=notes,
    )


def _stats(rows: pl.DataFrame) -> dict:
    """Between-build test of the invalid share per kind, Holm over the kinds, and the interval used."""
    between = {}
    for kind in KINDS:
        part = rows.filter((pl.col("kind") == kind) & (pl.col("build") != UNATTRIBUTED) & (pl.col("total") > 0))
        between[kind] = fisher_freeman_halton(part.select("invalid", "valid").rows()).as_stat(
            builds=part["build"].to_list()
        )
    stats: dict = {"between_builds": between}
    if family := holm_adjust(stats):
        stats["multiple_testing"] = family
    stats["interval"] = interval_stat("invalid / total, per row")
    return stats


def _chart(result: EvidenceResult, table: pl.DataFrame) -> dict | None:
    """Invalid share of the verdicts per build and kind, with the Wilson interval as a rule."""
    import altair as alt

    data = result.rows.filter(pl.col("total") > 0)
    if data.height == 0:
        return None
    data = data.with_columns(label=pl.format("{} ({} of {})", pl.col("kind"), pl.col("invalid"), pl.col("total")))
    base = alt.Chart(data).encode(y=alt.Y("build:N", title=None), yOffset="kind:N", color=alt.Color("kind:N"))
    chart = base.mark_bar().encode(
        x=alt.X("invalid_rate:Q", title="invalid verdicts / verdicts", axis=alt.Axis(format="%")),
        tooltip=["build", "kind", "invalid", "total"],
    )
    bars = chart + base.mark_rule(color="black").encode(x="ci_low:Q", x2="ci_high:Q")
    return bars.properties(title="Invalid verdicts by build (Wilson 95%)", width=420).to_dict()


SPEC = register(
    EvidenceSpec(
        name=NAME,
        summary="The verdicts the host cast on other hosts' answers, by the host's build at the time.",
        compute=votes_by_build,
        columns=COLUMNS,
        sql=("evidence/host_verdict_counts.sql", "evidence/host_builds.sql"),
        report=ReportSection(order=30, chart=_chart),
        description="The host as validator, one row per build and kind. Window on the "
        "verdict's `event_at` (`--epoch`: the escrows of that epoch). Every transaction counts: a repeated validation "
        "and a vote after resolution are verdicts the host cast, even though the tally ignored them; an address "
        "holding several slots counts once per transaction.",
        notes="Builds in the order of their first `valid_from`. `stats.between_builds`: per kind, the "
        "Fisher–Freeman–Halton test (the r×2 extension of Fisher's exact test) that the invalid share is the same "
        "under every build with verdicts (`unattributed` left out: it is not a build), its p-value a seeded Monte "
        "Carlo estimate; `stats.multiple_testing`: Holm over the kinds tested; `stats.interval`: what `ci_low`, "
        "`ci_high` are.",
    )
)
