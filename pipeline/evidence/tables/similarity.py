"""The `similarity` evidence table: similarity scores and field verdicts, answers' build × validator's build."""

from __future__ import annotations

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.evidence.log_window import time_bounds
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.scoring import LEGACY_RULES, SHORT_OUTPUT
from pipeline.evidence.spec import Column, EvidenceSpec, Option, ReportSection, column_group, register
from pipeline.evidence.stats import interval_stat, with_wilson
from pipeline.evidence.window import EvidenceError, Window
from pipeline.warehouse.database import fetch_frame

NAME = "similarity"
SCHEMA = {
    "source": pl.String,
    "answers_build": pl.String,
    "validator_build": pl.String,
    "validation_rule": pl.String,
    "rule_by": pl.String,
    "n": pl.Int64,
    "min": pl.Float64,
    "median": pl.Float64,
    "judged": pl.Int64,
    "passed": pl.Int64,
}
COLUMNS = (*SCHEMA, "passed_share", "ci_low", "ci_high")
# gonka-ai/vllm docs/gonka-infval-old-vs-new-gumbel.md (2026-10-01): the deployed (devshard v5.0.2) values
DEEPSEEK_NOTE = (
    "DeepSeek-V4-Flash: validation threshold 0.900 and sampling rate 10% (each validator samples an inference with "
    "p = rate · own slots / (16 − executor slots)) under devshard v5.0.2, as gonka-ai/vllm "
    "docs/gonka-infval-old-vs-new-gumbel.md (2026-10-01) states; `chain_params` holds 0.900 for "
    "DeepSeek-V4-Flash-0731 (the short-output validation document's value, assumed), so a line whose model names "
    "that checkpoint is judged by it, and one naming DeepSeek-V4-Flash alone only with --threshold (0.9) or a "
    "[[chain]] entry for it."
)


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
    rejections = fetch_frame(
        con, sql_text("evidence/similarity_rejections.sql"), {"host": host, "since": since, "until": until}
    )
    keys = ["answers_build", "validator_build", "validation_rule", "rule_by"]
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
    frame = frame.sort("source", "answers_build", "validator_build", "validation_rule", "rule_by").with_columns(
        passed_share=pl.when(pl.col("judged") > 0).then(pl.col("passed") / pl.col("judged")).otherwise(None)
    )
    frame = with_wilson(frame, "passed", "judged").select(COLUMNS)
    notes = []
    if unjudged := scores.filter(pl.col("passed").is_null()).height:
        notes.append(
            f"{unjudged} score(s) have no known validation threshold (not on their line, not known for "
            "their model): they are not judged; --threshold T judges them against T."
        )
    notes.extend(_assumed_threshold_notes(scores))
    if scores.height == 0:
        notes.append(
            f"no similarity scores for host {host} in {window.describe()} "
            "(`gonka-evidence ingest-logs --kind validator` the dapi logs first)."
        )
    rules = sorted(set(scores["validation_rule"].drop_nulls()) | set(votes["validation_rule"].drop_nulls()))
    notes.extend(_rule_notes(rules))
    notes.extend(_rejection_notes(rejections))
    notes.append(DEEPSEEK_NOTE)
    notes.append(SEES_NOTE)
    return EvidenceResult(
        evidence=NAME,
        title=f"Validation similarity around {host}: answers build × validator build ({window.describe()})",
        params={"host": host, **window.params, "threshold": threshold},
        rows=frame,
        stats={
            "scores": scores.height,
            "votes": votes.height,
            "rejections": int(rejections.filter(pl.col("result") == "rejected")["n"].sum()),
            **({"interval": interval_stat("passed / judged, per row")} if frame.height else {}),
        },
        notes=notes,
    )


SCORE_NOTES = {
    "legacy": "Under {rules} the score is 1 − Σd/max(100, N) over the N output positions (gonka-ai/gonka "
    "common/validation/validation.go): below 100 positions the missing slots count as agreement, so short answers "
    "score higher; compare like with like.",
    SHORT_OUTPUT: "Under 'short-output #1955' (a devshard version of its own; gonka-ai/gonka "
    "common/validation/scoring.go) the score is 1 − max(Σd/N − 0.10/√N, Σd/max(100, N)): never above the legacy "
    "score, equal to it from N = 100 on, so short answers no longer score higher; per-position ceiling and "
    "sampler-support checks reject without a score on DeepSeek-V4-Flash-0731 and GLM-5.3-Flash and only log "
    "elsewhere.",
}
SEES_NOTE = (
    "Scores are the dapi's `cosineSimValue` (a logprob similarity, 0 for different tokens/length), logged by the "
    "mainnet validation path (`Cosine similarity validation result`); the devshard path logs no similarity value "
    "(EvaluateValidationResult returns the verdict only), so devshard verdicts appear here as votes rows and, when "
    "rejected with a reason, as rejections; a devshard score below its threshold leaves no line. passed = strictly "
    "above the model's validation threshold. votes rows: field verdicts from the devshard diff log, split by both "
    "builds."
)


def _assumed_threshold_notes(scores: pl.DataFrame) -> list[str]:
    """Scores judged by a threshold this release assumes (a default of `chain_params`), per threshold and source."""
    assumed = scores.filter(pl.col("threshold_assumed").fill_null(False))
    if not assumed.height:
        return []
    parts = assumed.group_by("threshold", "threshold_source").len().sort("threshold", "threshold_source")
    which = "; ".join(
        f"{r['threshold']:.3f} ({r['threshold_source']}): {r['len']}" for r in parts.iter_rows(named=True)
    )
    return [
        f"{assumed.height} score(s) judged against an assumed validation threshold (a default of `chain_params`, "
        f"neither on the log line nor in a [[chain]] entry; the chain resolves thresholds per escrow and epoch): "
        f"{which}."
    ]


def _rule_notes(rules: list[str]) -> list[str]:
    """What the applied rule sets mean and how each score is computed (pipeline.evidence.scoring)."""
    if not rules:
        return []
    notes = [
        f"Verdict rule(s) applied: {', '.join(rules)}. Under 'before #1487' a 400/422 from the validator's own "
        "re-run counted as valid without a score line, and an executor answer without logprobs scored 1.0 "
        "against one with them; under '#1487' (gonka-ai/gonka, merged 2026-07-20) both are invalid. "
        "rule_by: 'version' = the escrow's devshard version names the rule set (devshard_version_rules); "
        "assumed otherwise: 'build' = by the validator's build (deployed before or after #1487), 'date' = by the "
        "verdict's date (build unknown)."
    ]
    if legacy := [r for r in rules if r in LEGACY_RULES]:
        notes.append(SCORE_NOTES["legacy"].format(rules=", ".join(f"'{r}'" for r in legacy)))
    if SHORT_OUTPUT in rules:
        notes.append(SCORE_NOTES[SHORT_OUTPUT])
    return notes


def _rejection_notes(rejections: pl.DataFrame) -> list[str]:
    """Rejection lines by reason (invalid verdicts without a score) and log-only check failures (no verdict)."""
    notes = []
    for result, what in (("rejected", "rejected without a score"), ("log_only", "logged as would fail (log-only)")):
        part = rejections.filter(pl.col("result") == result)
        if part.height:
            reasons = "; ".join(f"{r['reason']} ({r['n']})" for r in part.iter_rows(named=True))
            notes.append(f"{int(part['n'].sum())} validation(s) {what}, by reason: {reasons}.")
    return notes


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
            Column(
                "validation_rule",
                "the verdict rule the validator ran (view `verdict_rules`): `before #1487` (a 400/422 of its own "
                "re-run and an executor answer without logprobs pass), `#1487` (both invalid) or `short-output "
                "#1955` (the short-output score and checks of its devshard version)",
            ),
            Column(
                "rule_by",
                "how the rule is known: `version` (the escrow's devshard version, view `devshard_version_rules`); "
                "assumed: `build` (the validator's build was deployed before or after #1487) or `date` (its build "
                "is unknown: the verdict's date)",
            ),
            Column("n", "score lines / verdicts"),
            *column_group("min", "median", meaning="of the similarity values (`scores` only)"),
            Column(
                "judged",
                "`scores`: values whose threshold is known (the line's own, else the model's in `chain_params`, "
                "else `--threshold`); "
                "`votes`: every verdict",
            ),
            Column("passed", "`scores`: value strictly above the threshold; `votes`: valid verdicts"),
            *column_group("passed_share", "ci_low", "ci_high", meaning="`passed / judged`, Wilson 95%"),
        ),
        sql=(
            "evidence/log_window_bounds.sql",
            "evidence/similarity_scores.sql",
            "evidence/similarity_votes.sql",
            "evidence/similarity_rejections.sql",
        ),
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
        "different-tokens and invalid results. **What the table sees.** Score lines come from the mainnet validation "
        "path; the devshard path logs no similarity value (gonka-ai/gonka "
        "decentralized-api/internal/devshard/shared_runtime.go: EvaluateValidationResult returns the verdict only), "
        "so a devshard verdict is seen as a `votes` row, and its cause only where a rejection line names one "
        "(`validation failed: …`, a short-output check's `… failed: …`; counted in the notes and `stats.rejections`, "
        "per verdict in view `validation_rejections`); a devshard score below its threshold leaves no line. "
        "**Scores by rule set.** Under `before #1487` and `#1487` a score is 1 − Σd/max(100, N), so short answers "
        "score higher (compare like with like); under `short-output #1955` it is 1 − max(Σd/N − 0.10/√N, "
        "Σd/max(100, N)), never above the legacy score and equal to it from N = 100 on. `stats.interval` names the "
        "interval of `passed_share`. **Verdict rules by version.** Rows are split by the rule the validator ran "
        "(`validation_rule`, `rule_by`): the escrow's devshard version where the builds file names its rule set "
        "(`version`), else, assumed, the validator's build or the verdict's date: before gonka-ai/gonka #1487 "
        "(merged 2026-07-20) a 400/422 of the validator's own re-run passed without a score line and an executor "
        "answer without logprobs scored 1.0; from it both are invalid, so `votes` rows of the two rules are not "
        "comparable. The DeepSeek-V4-Flash threshold (0.900) and sampling rate (10%) of the notes are "
        "gonka-ai/vllm's account of devshard v5.0.2.",
    )
)
