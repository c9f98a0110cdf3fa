"""The `similarity` evidence table: similarity scores and field verdicts, answers' build × validator's build."""

from __future__ import annotations

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.evidence.log_window import time_bounds
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.spec import Column, EvidenceSpec, Option, ReportSection, column_group, register
from pipeline.evidence.stats import interval_stat, with_wilson
from pipeline.evidence.window import EvidenceError, Window
from pipeline.warehouse.database import fetch_frame

NAME = "similarity"
SCHEMA = {
    "source": pl.String,
    "answers_build": pl.String,
    "validator_build": pl.String,
    "n": pl.Int64,
    "min": pl.Float64,
    "median": pl.Float64,
    "judged": pl.Int64,
    "passed": pl.Int64,
}
COLUMNS = (*SCHEMA, "passed_share", "ci_low", "ci_high")


def similarity(
    con: duckdb.DuckDBPyConnection, host: str, window: Window, *, threshold: float | None = None
) -> EvidenceResult:
    """Similarity distribution and pass share per answers-build × validator-build, with the field votes beside."""
    if threshold is not None and not 0 <= threshold <= 1:
        raise EvidenceError(f"--threshold {threshold:g} is not a similarity threshold (between 0 and 1)")
    since, until = time_bounds(con, window)
    scores = fetch_frame(
        con,
        sql_text("evidence/similarity_scores.sql"),
        {"host": host, "since": since, "until": until, "threshold": threshold},
    )
    votes = fetch_frame(con, sql_text("evidence/similarity_votes.sql"), {"host": host, **window.params})
    keys = ["answers_build", "validator_build"]
    score_rows = (
        scores.group_by(keys)
        .agg(
            n=pl.len().cast(pl.Int64),
            min=pl.col("value").min(),
            median=pl.col("value").median(),
            judged=pl.col("passed").is_not_null().sum().cast(pl.Int64),
            passed=pl.col("passed").fill_null(False).sum().cast(pl.Int64),
        )
        .with_columns(source=pl.lit("scores"))
    )
    vote_rows = (
        votes.group_by(keys)
        .agg(
            n=pl.len().cast(pl.Int64),
            judged=pl.len().cast(pl.Int64),
            passed=pl.col("valid").sum().cast(pl.Int64),
        )
        .with_columns(source=pl.lit("votes"), min=pl.lit(None, pl.Float64), median=pl.lit(None, pl.Float64))
    )
    schema = pl.Schema(SCHEMA)
    frame = pl.concat([score_rows.select(list(SCHEMA)).cast(schema), vote_rows.select(list(SCHEMA)).cast(schema)])
    frame = frame.sort("source", "answers_build", "validator_build").with_columns(
        passed_share=pl.when(pl.col("judged") > 0).then(pl.col("passed") / pl.col("judged")).otherwise(None)
    )
    frame = with_wilson(frame, "passed", "judged").select(COLUMNS)
    notes = []
    if unjudged := scores.filter(pl.col("passed").is_null()).height:
        notes.append(
            f"{unjudged} score(s) have no known validation threshold (not on their line, not known for "
            "their model): they are not judged; --threshold T judges them against T."
        )
    if scores.height == 0:
        notes.append(
            f"no similarity scores for host {host} in {window.describe()} "
            "(`gonka-evidence ingest-logs --kind validator` the dapi logs first)."
        )
    notes.append(
        "Scores are the dapi's `cosineSimValue` (a logprob similarity, 0 for different tokens/length); "
        "passed = strictly above the model's validation threshold. Short answers score higher (the "
        "distance is padded to 100 tokens): compare like with like. votes rows: field verdicts from the "
        "devshard diff log, split by both builds."
    )
    return EvidenceResult(
        evidence=NAME,
        title=f"Validation similarity around {host}: answers build × validator build ({window.describe()})",
        params={"host": host, **window.params, "threshold": threshold},
        rows=frame,
        stats={
            "scores": scores.height,
            "votes": votes.height,
            **({"interval": interval_stat("passed / judged, per row")} if frame.height else {}),
        },
        notes=notes,
    )


SPEC = register(
    EvidenceSpec(
        name=NAME,
        summary="Validation similarity scores (dapi logs) and field verdicts, answers' build × validator's build.",
        compute=similarity,
        columns=(
            Column(
                "source",
                "`scores` (validator dapi logs, view `validation_scores`; window on the log time) or `votes` (field "
                "verdicts of the diff log, view `validations`; window as votes-by-build, validator ≠ executor)",
            ),
            *column_group(
                "answers_build", "validator_build", meaning="the executor's and the validator's build at the time"
            ),
            Column("n", "score lines / verdicts"),
            *column_group("min", "median", meaning="of the similarity values (`scores` only)"),
            Column(
                "judged",
                "`scores`: values whose threshold is known (the line's own, else the model's, else `--threshold`); "
                "`votes`: every verdict",
            ),
            Column("passed", "`scores`: value strictly above the threshold; `votes`: valid verdicts"),
            *column_group("passed_share", "ci_low", "ci_high", meaning="`passed / judged`, Wilson 95%"),
        ),
        sql=("evidence/log_window_bounds.sql", "evidence/similarity_scores.sql", "evidence/similarity_votes.sql"),
        options=(
            Option(
                "threshold",
                "--threshold",
                "Validation threshold for scores whose line and model carry none "
                "(e.g. DeepSeek-V4-Flash): a score passes when strictly above it.",
                type=float,
                metavar="T",
            ),
        ),
        report=ReportSection(order=90),
        description="Validation similarity scores and field verdicts, split by the answer's build × the validator's "
        "build. Rows involve the host as validator or as executor.",
        notes="`--threshold T` judges the scores that have no threshold of their own and none known for their model "
        "(DeepSeek-V4-Flash's is not known): a score passes when strictly above T; a line's or its model's own "
        "threshold wins. A value is the dapi's `cosineSimValue` (a logprob similarity), 0 for different-length, "
        "different-tokens and invalid results. Short answers score higher (distances are averaged over at least 100 "
        "tokens): compare like with like. `stats.interval` names the interval of `passed_share`.",
    )
)
