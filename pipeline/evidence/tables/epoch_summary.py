"""The `epoch-summary` evidence table: the host as executor, one row per epoch."""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.spec import Column, EvidenceSpec, Option, ReportSection, column_group, register
from pipeline.evidence.stats import interval_stat, with_wilson
from pipeline.evidence.window import Window
from pipeline.warehouse.database import fetch_frame

NAME = "epoch-summary"
COLUMNS = [
    Column("epoch", "the escrows' epoch"),
    Column("sealed", "inferences with a real sealed row (`sealed_nonce > 0`, bare rows included)"),
    Column(
        "finished",
        "inferences with a finish transaction, whatever followed (validation, challenge, error miss); drained records "
        "are not included",
    ),
    Column("validated", "inferences whose final status is validated"),
    Column("invalidated", "inferences whose final status is invalidated"),
    Column(
        "timed_out",
        "inferences whose final status is timed_out: refusals, execution timeouts and error misses, not records the "
        "settlement drain refunded",
    ),
    Column(
        "drained",
        "inferences still pending or started when their escrow entered settlement (never an answer, never a miss, "
        "whatever status the drain left them in)",
    ),
    Column(
        "challenged",
        "inferences that ever received an invalid sampled validation (cleared and invalidated ones included)",
    ),
    Column("cleared", "challenged, then validated by the vote"),
    *column_group(
        "validations_valid",
        "validations_invalid",
        meaning="sampled validation transactions (MsgValidation) on those inferences",
    ),
    *column_group(
        "votes_valid", "votes_invalid", meaning="challenge vote transactions (MsgValidationVote) on those inferences"
    ),
    Column(
        "self_verdicts",
        "of those validation and vote transactions, the ones cast by the host's own address (another of its slots "
        "validating its answer, or a vote on its own challenge): upstream counted them, so they are in the "
        "columns above, and named here",
    ),
    *column_group("input_tokens", "output_tokens", meaning="token counts of the finish transactions"),
]


def epoch_summary(
    con: duckdb.DuckDBPyConnection, host: str, window: Window, denominators: bool = False
) -> EvidenceResult:
    """Per epoch: the host's answers by outcome, the verdicts on them, and their tokens
    (``denominators``: one row per measure and epoch, next to its whole)."""
    params = {"host": host, **window.params}
    per_answer = fetch_frame(con, sql_text("evidence/host_answer_counts.sql"), params)
    per_verdict = fetch_frame(con, sql_text("evidence/verdict_counts_on_host_answers.sql"), params)
    if window.since is None:
        member = fetch_frame(con, sql_text("evidence/host_epochs.sql"), {"host": host, "epoch": window.epoch})
        epochs = member["epoch_id"].append(per_answer["epoch_id"]).unique().sort()
    else:
        epochs = per_answer["epoch_id"].unique().sort()

    rows = (
        pl.DataFrame({"epoch_id": epochs}, schema={"epoch_id": pl.Int64})
        .join(per_answer, on="epoch_id", how="left")
        .join(per_verdict, on="epoch_id", how="left")
        .rename({"epoch_id": "epoch"})
        .with_columns(pl.col(c).fill_null(0).cast(pl.Int64) for c in COLUMNS[1:])
        .select(COLUMNS)
        .sort("epoch")
    )
    stats: dict[str, Any] = {}
    if denominators:
        executed = fetch_frame(con, sql_text("evidence/host_answers.sql"), params).group_by("epoch_id").len()
        rows = with_denominators(rows, dict(executed.iter_rows()))
        stats["interval"] = interval_stat("count / of, per row (none for token sums)")

    notes = []
    if per_answer.height == 0:
        notes.append(f"host {host} executed nothing in {window.describe()}.")
    notes.append(
        "finished = inferences with a finish transaction; validated / invalidated / timed_out = final status; "
        "drained = still pending or started at settlement (not answers, not misses, not in timed_out); "
        "challenged = ever received an invalid sampled validation (cleared ones included); "
        "cleared = challenged, then validated; validations_* = sampled checks and votes_* = challenge votes "
        "on the host's answers, one per transaction; self_verdicts = those cast by the host's own address "
        "(counted upstream, so included above); tokens from finish transactions."
    )
    below = fetch_frame(con, sql_text("evidence/host_escrows_below_quorum.sql"), params)
    if below.height:
        named = ", ".join(
            f"{r['escrow_id']} ({r['distinct_signers']} validators on {r['signing_slots']} slots, quorum {r['quorum']})"
            for r in below.head(10).iter_rows(named=True)
        )
        more = f" and {below.height - 10} more" if below.height > 10 else ""
        notes.append(
            f"{below.height} settled escrow(s) of the host rest on signatures of fewer distinct validators than the "
            f"settlement quorum (met in slots by validators holding several; gonka-ai/gonka #1356, view "
            f"escrow_signers): {named}{more}."
        )
        stats["below_distinct_quorum"] = below.height
    return EvidenceResult(
        evidence=NAME,
        title=f"Epoch summary of {host} as executor ({window.describe()})",
        params={"host": host, **window.params, **({"denominators": True} if denominators else {})},
        rows=rows,
        stats=stats,
        notes=notes,
    )


# --- in the epoch report ---------------------------------------------------------------------------------

# Each count of a row against the whole it is part of: (column, whole, what the whole counts).
# "executed" is the host's inferences in the epoch (any final status); a whole named by a tuple is
# the sum of those columns.
VERDICTS = ("validations_valid", "validations_invalid", "votes_valid", "votes_invalid")
DENOMINATORS = (
    ("sealed", "executed", "inferences executed"),
    ("finished", "executed", "inferences executed"),
    ("validated", "executed", "inferences executed"),
    ("invalidated", "executed", "inferences executed"),
    ("timed_out", "executed", "inferences executed"),
    ("challenged", "executed", "inferences executed"),
    ("cleared", "challenged", "challenged"),
    ("validations_valid", ("validations_valid", "validations_invalid"), "sampled validations"),
    ("validations_invalid", ("validations_valid", "validations_invalid"), "sampled validations"),
    ("votes_valid", ("votes_valid", "votes_invalid"), "challenge votes"),
    ("votes_invalid", ("votes_valid", "votes_invalid"), "challenge votes"),
    ("self_verdicts", VERDICTS, "verdicts (validations and votes)"),
    ("input_tokens", "finished", "finished inferences (sum of tokens)"),
    ("output_tokens", "finished", "finished inferences (sum of tokens)"),
)


def with_denominators(rows: pl.DataFrame, executed_by_epoch: dict[int, int]) -> pl.DataFrame:
    """One ``count | of | share | ci_low | ci_high`` row per measure and epoch: the share with its Wilson
    95% interval (token sums have neither: they are not parts of the inferences they are summed over)."""
    out = []
    for row in rows.iter_rows(named=True):
        values = {**row, "executed": executed_by_epoch.get(row["epoch"], 0)}
        for measure, whole_of, unit in DENOMINATORS:
            n = row[measure]
            whole = sum(values[c] for c in whole_of) if isinstance(whole_of, tuple) else values[whole_of]
            share = None if not whole or measure.endswith("_tokens") else n / whole
            out.append(
                {"epoch": row["epoch"], "measure": measure, "count": n, "of": whole, "of_what": unit, "share": share}
            )
    frame = pl.DataFrame(
        out,
        schema={
            "epoch": pl.Int64,
            "measure": pl.String,
            "count": pl.Int64,
            "of": pl.Int64,
            "of_what": pl.String,
            "share": pl.Float64,
        },
    )
    parts = frame.with_columns(part=pl.when(pl.col("share").is_not_null()).then(pl.col("count")))
    return with_wilson(parts, "part", "of").drop("part")


def _chart(result: EvidenceResult, table: pl.DataFrame) -> dict | None:
    """Shares of the host's inferences by outcome."""
    import altair as alt

    data = table.filter(pl.col("share").is_not_null() & (pl.col("of_what") == "inferences executed"))
    if data.height == 0:
        return None
    chart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            y=alt.Y("measure:N", sort=None, title=None),
            x=alt.X("share:Q", title="share of the host's inferences", axis=alt.Axis(format="%")),
            tooltip=["measure", "count", "of"],
        )
    )
    return chart.properties(title="Outcomes of the host's inferences", width=420).to_dict()


SPEC = register(
    EvidenceSpec(
        name=NAME,
        summary="The host as executor, one row per epoch: sealed, finished, final statuses, challenges, the verdicts "
        "on its answers and its tokens.",
        compute=epoch_summary,
        columns=tuple(COLUMNS),
        sql=(
            "evidence/host_answer_counts.sql",
            "evidence/verdict_counts_on_host_answers.sql",
            "evidence/host_epochs.sql",
            "evidence/host_answers.sql",
            "evidence/host_escrows_below_quorum.sql",
        ),
        options=(
            Option(
                "denominators",
                "--denominators",
                "One row per measure and epoch: its count, the whole it is part of and the share with its "
                "Wilson 95% interval, as the epoch report shows it",
            ),
        ),
        # The report shows the long form through the option, so its reproduce command prints the same table.
        report=ReportSection(order=10, options=lambda epoch: {"denominators": True}, chart=_chart),
        description="Counts over the inferences the host executed (the "
        "address holding the inference's executor slot). Rows: every epoch in which the host holds a slot "
        "(`--epoch`: that epoch); with `--since/--until`, the epochs of the host's inferences started in the window "
        "(window on `started_at`).",
        notes="Verdict counts are per transaction (an address with several slots once; repeats and votes after "
        "resolution that the tally ignored included) and use the same window on the judged inference. No "
        "statistics.\n\n`--denominators` prints the counts as the epoch report does: one row per `epoch` and "
        "`measure` (a column name above) with its `count`, the whole it is part of (`of`, `of_what`: the "
        "inferences the host executed in the epoch, any final status; the challenged ones for `cleared`; the "
        "sampled validations or challenge votes; the finished inferences for token sums) and `share` = count / of "
        "with its Wilson 95% interval `ci_low`, `ci_high` (none for token sums).",
    )
)
