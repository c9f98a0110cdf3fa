"""The `peer-invalidation` evidence table: the host's answers against other executors' in the same escrows."""

from __future__ import annotations

from collections.abc import Callable

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.evidence.log_window import build_order
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.spec import Column, EvidenceSpec, Option, ReportSection, column_group, register
from pipeline.evidence.stats import (
    breslow_day_test,
    cmh_test,
    fisher_exact_2x2,
    holm_adjust,
    interval_stat,
    with_wilson,
)
from pipeline.evidence.window import EvidenceError, Window
from pipeline.warehouse.database import fetch_frame

NAME = "peer-invalidation"
GROUPS = ("host", "others")
POOLED = "all"


def peer_invalidation(
    con: duckdb.DuckDBPyConnection,
    host: str,
    window: Window,
    *,
    by_escrow: bool = False,
    by_build: bool = False,
    control: str | None = None,
) -> EvidenceResult:
    """Challenged-or-invalidated rate of the host's answers against other executors (or one control) in the
    same escrows."""
    control = control.strip() if control else None
    if control == host:
        raise EvidenceError(f"--control {control} is the host itself; name another executor")
    return peer_invalidation_of(
        peer_answers(con, host, window, control),
        host,
        window,
        by_escrow=by_escrow,
        control=control,
        builds=(lambda present: build_order(con, host, present)) if by_build else None,
    )


def peer_answers(con: duckdb.DuckDBPyConnection, host: str, window: Window, control: str | None) -> pl.DataFrame:
    """The answers per escrow, host against the others (sql/evidence/peer_answers.sql): additive over
    escrows, so the network mode sums them over partitions of the lake."""
    return fetch_frame(con, sql_text("evidence/peer_answers.sql"), {"host": host, "control": control, **window.params})


def _tests(
    pooled: pl.DataFrame, per_escrow: pl.DataFrame, per_build: dict[str, pl.DataFrame] | None, notes: list[str]
) -> dict:
    """The pooled tests, and with `per_build` the per-build ones (a note when there is only one build); Holm's
    adjustment over the family."""
    stats = _stats(pooled, per_escrow)
    if per_build is not None:
        by = {build: _strata(counts) for build, counts in per_build.items()}
        stats["cmh_by_build"] = {build: cmh_test(strata).as_stat() for build, strata in by.items()}
        stats["breslow_day_by_build"] = {build: breslow_day_test(strata).as_stat() for build, strata in by.items()}
        if len(by) == 1:
            notes.append(
                f"every answer falls in one build of the host ({next(iter(by))}): the per-build "
                "tests repeat the pooled ones (`gonka-evidence builds FILE.toml` loads the timeline)."
            )
    if family := holm_adjust(stats):
        stats["multiple_testing"] = family
    stats["interval"] = interval_stat("challenged_or_invalidated / answers, per row")
    return stats


def peer_invalidation_of(
    answers: pl.DataFrame,
    host: str,
    window: Window,
    *,
    by_escrow: bool = False,
    control: str | None = None,
    builds: Callable[[list[str]], list[str]] | None = None,
) -> EvidenceResult:
    """The table from `peer_answers` rows (of one warehouse, or of every partition of a lake); `builds`
    orders the host's builds for the `--by-build` rows (None: no per-build rows)."""
    by_build = builds is not None
    answers = answers.with_columns(group=pl.when(pl.col("is_host")).then(pl.lit("host")).otherwise(pl.lit("others")))
    per_escrow = _per_escrow(answers)
    pooled = _pooled(per_escrow)
    columns = ["group", "escrows", "answers", "challenged_or_invalidated"]
    rows = pooled.select("escrow_id", *columns)
    if answers.height == 0:  # no escrow to compare in: no rows rather than two rows of zeros
        rows = rows.clear()
    if by_escrow:
        detail = per_escrow.with_columns(escrows=(pl.col("answers") > 0).cast(pl.Int64)).sort(
            "epoch_id", "escrow_id", "group"
        )
        rows = pl.concat([rows, detail.select("escrow_id", *columns)])
    per_build = {}  # build -> its per-escrow counts, builds in the order they started
    if by_build:
        present = answers["host_build"].unique().to_list()
        assert builds is not None
        per_build = {b: _per_escrow(answers.filter(pl.col("host_build") == b)) for b in builds(present) if b in present}
        rows = rows.with_columns(build=pl.lit(POOLED))
        rows = pl.concat(
            [
                rows,
                *(
                    _pooled(counts).with_columns(build=pl.lit(build)).select(rows.columns)
                    for build, counts in per_build.items()
                ),
            ]
        )
    rows = rows.with_columns(
        rate=pl.when(pl.col("answers") > 0).then(pl.col("challenged_or_invalidated") / pl.col("answers"))
    )
    rows = with_wilson(rows, "challenged_or_invalidated", "answers")
    if not by_escrow:
        rows = rows.drop("escrow_id")

    notes: list[str] = []
    stats: dict = {}
    if answers.height == 0 and control:
        notes.append(
            f"host {host} and control {control} executed no answers in the same escrows in "
            f"{window.describe()}; nothing to compare."
        )
    elif answers.height == 0:
        notes.append(f"host {host} executed no answers in {window.describe()}; nothing to compare.")
    else:
        stats = _tests(pooled, per_escrow, per_build if by_build else None, notes)
    compared = (
        "others = every other executor in the escrows where the host answered."
        if control is None
        else f"control = {control}, in the escrows where both answered."
    )
    notes.append(
        "answers = inferences with a finish transaction whose final status is not timed_out; "
        "challenged_or_invalidated = ever received an invalid validation or ended invalidated "
        "(challenges later cleared count); " + compared
    )
    if control is not None:  # the comparison group is the one named executor
        rows = rows.with_columns(group=pl.col("group").replace("others", "control"))
    return EvidenceResult(
        evidence=NAME,
        title=f"Challenged or invalidated answers of {host} and of "
        f"{'other executors' if control is None else control} in the same escrows ({window.describe()})",
        params={"host": host, **window.params, "by_escrow": by_escrow, "by_build": by_build, "control": control},
        rows=rows.select(
            *(["escrow_id"] if by_escrow else []),
            *(["build"] if by_build else []),
            *columns,
            "rate",
            "ci_low",
            "ci_high",
        ),
        stats=stats,
        notes=notes,
    )


def _per_escrow(answers: pl.DataFrame) -> pl.DataFrame:
    """answers and challenged_or_invalidated per escrow and group, both groups in every escrow."""
    counts = answers.group_by("epoch_id", "escrow_id", "group").agg(
        answers=pl.col("answers").sum().cast(pl.Int64),
        challenged_or_invalidated=pl.col("challenged_or_invalidated").sum().cast(pl.Int64),
    )
    grid = answers.select("epoch_id", "escrow_id").unique().join(pl.DataFrame({"group": GROUPS}), how="cross")
    return grid.join(counts, on=["epoch_id", "escrow_id", "group"], how="left").with_columns(
        pl.col("answers").fill_null(0), pl.col("challenged_or_invalidated").fill_null(0)
    )


def _pooled(per_escrow: pl.DataFrame) -> pl.DataFrame:
    """The per-escrow counts summed per group (both groups, zeros when absent), ``escrow_id`` = all."""
    pooled = per_escrow.group_by("group").agg(
        escrows=(pl.col("answers") > 0).sum(),
        answers=pl.col("answers").sum(),
        challenged_or_invalidated=pl.col("challenged_or_invalidated").sum(),
    )
    return (
        pl.DataFrame({"group": GROUPS})
        .join(pooled, on="group", how="left")
        .with_columns(
            escrow_id=pl.lit(POOLED),
            escrows=pl.col("escrows").fill_null(0).cast(pl.Int64),
            answers=pl.col("answers").fill_null(0).cast(pl.Int64),
            challenged_or_invalidated=pl.col("challenged_or_invalidated").fill_null(0).cast(pl.Int64),
        )
    )


def _table(frame: pl.DataFrame) -> list[list[int]]:
    """``[[host yes, host no], [others yes, others no]]`` of a frame with one row per group."""
    cells = {r["group"]: r for r in frame.iter_rows(named=True)}
    return [
        [cells[g]["challenged_or_invalidated"], cells[g]["answers"] - cells[g]["challenged_or_invalidated"]]
        for g in GROUPS
    ]


def _strata(per_escrow: pl.DataFrame) -> list[list[list[int]]]:
    return [_table(frame) for _, frame in per_escrow.sort("escrow_id").group_by("escrow_id", maintain_order=True)]


def _stats(pooled: pl.DataFrame, per_escrow: pl.DataFrame) -> dict:
    (a, b), (c, d) = _table(pooled)
    strata = _strata(per_escrow)
    return {
        "fisher": fisher_exact_2x2(a, b, c, d).as_stat(rows=list(GROUPS)),
        "cmh": cmh_test(strata).as_stat(strata="escrow"),
        "breslow_day": breslow_day_test(strata).as_stat(strata="escrow"),
    }


def _chart(result: EvidenceResult, table: pl.DataFrame) -> dict | None:
    """The pooled rate of the host and of the other executors, with the Wilson interval as a rule."""
    import altair as alt

    rows = result.rows
    pooled = [pl.col(c) == POOLED for c in ("escrow_id", "build") if c in rows.columns]
    data = rows.filter(*pooled) if pooled else rows
    data = data.with_columns(
        label=pl.format("{} ({} of {})", pl.col("group"), pl.col("challenged_or_invalidated"), pl.col("answers"))
    )
    base = alt.Chart(data).encode(y=alt.Y("label:N", title=None))
    chart = base.mark_bar().encode(
        x=alt.X("rate:Q", title="challenged or invalidated / answers", axis=alt.Axis(format="%"))
    )
    return (
        (chart + base.mark_rule(color="black").encode(x="ci_low:Q", x2="ci_high:Q"))
        .properties(title="Host vs other executors (Wilson 95%)", width=420)
        .to_dict()
    )


SPEC = register(
    EvidenceSpec(
        name=NAME,
        summary="The host's answers against other executors' in the same escrows.",
        compute=peer_invalidation,
        columns=(
            Column("group", "`host`, or `others` (every other executor of those escrows; `control` with `--control`)"),
            Column("escrows", "escrows in which the group has at least one answer"),
            Column("answers", "[answers](evidence-rules.md#common-rules) of the group"),
            Column(
                "challenged_or_invalidated",
                "answers that ever received an invalid validation or ended invalidated (a challenge later cleared "
                "still counts)",
            ),
            *column_group("rate", "ci_low", "ci_high", meaning="`challenged_or_invalidated / answers`, Wilson 95%"),
        ),
        sql=("evidence/peer_answers.sql", "evidence/host_builds.sql"),
        options=(
            Option("by_escrow", "--by-escrow", "Per-escrow rows after the pooled ones."),
            Option("by_build", "--by-build", "Rows and a CMH test (stratified by escrow) per build of the host."),
            Option(
                "control",
                "--control",
                "Compare with this one executor instead of all others.",
                type=str,
                metavar="ADDR",
            ),
        ),
        report=ReportSection(
            order=20,
            heading="Peer invalidation in the epoch's escrows",
            options=lambda epoch: {"by_escrow": True},
            chart=_chart,
        ),
        description="The escrows compared are those (in the window) where the host executed at least one answer; "
        "`others` are every other executor of them. Window: `--epoch` on the escrow's epoch, "
        "`--since/--until` on `started_at`.",
        notes="`stats.fisher`: Fisher's exact two-sided test on the pooled table (host / others × "
        "challenged-or-invalidated / not). `stats.cmh`: the Cochran–Mantel–Haenszel test stratified by escrow "
        "(two-sided, continuity correction), with the pooled odds ratio and its Robins–Breslow–Greenland 95% "
        "interval; escrows where one group has no answers drop out and are counted. `stats.breslow_day`: whether one "
        "odds ratio fits every escrow. `stats.multiple_testing`: Holm over all of them (`p_holm`).\n\n"
        "`--by-escrow` adds a column `escrow_id` (`all` on the pooled rows) and one row per escrow and group after "
        "them. `--by-build` adds a column `build` (the host's build when the answer was given, the others' answers at "
        "the same times; `all` on the pooled rows), one row per build and group, and per build `cmh_by_build` and "
        "`breslow_day_by_build` stratified by escrow: a pooled odds ratio over an epoch that mixes builds can hide "
        "effects of opposite sign. `--control ADDR` compares the host with that one executor instead (group "
        "`control`), in the escrows where both have at least one answer in the window.",
    )
)
