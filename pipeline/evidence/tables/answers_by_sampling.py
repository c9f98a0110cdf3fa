"""The `answers-by-sampling` evidence table: the host's judged answers by build and sampling parameters."""

from __future__ import annotations

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.scoring import SHORT_OUTPUT
from pipeline.evidence.spec import Column, EvidenceSpec, Option, ReportSection, column_group, register
from pipeline.evidence.stats import (
    breslow_day_test,
    cmh_test,
    fisher_exact_2x2,
    holm_adjust,
    interval_stat,
    with_wilson,
)
from pipeline.evidence.window import Window
from pipeline.warehouse.database import fetch_frame

NAME = "answers-by-sampling"
BANDS = ((0.5, "(0, 0.5]"), (0.8, "(0.5, 0.8]"), (1.0, "(0.8, 1]"))
COLUMNS = (
    Column("build", "the host's build at the answer's event time (as-of join of `host_builds`)"),
    Column(
        "sampling",
        "`greedy`: the stored request has temperature 0 (whatever its top_p); `sampled`: anything else (absent "
        "parameters are the API defaults, temperature 1 and top_p 1); `unknown`: no stored request",
    ),
    Column("judged", "judged answers"),
    Column("invalidated", "of those, final status invalidated"),
    Column("challenged", "of those, ever challenged"),
    *column_group("invalidated_rate", "ci_low", "ci_high", meaning="`invalidated / judged`, Wilson 95%"),
    Column(
        "injected",
        "the parameters devshardd set on the row's stored requests before execution, with how many answers each: "
        "`logprobs` (client's not true), `top_logprobs` (absent or below 5), `min_tokens` (absent or below 64, "
        "except on an escrow whose devshard version runs short-output #1955, which injects no floor), "
        "`seed` (absent: int32(inference_id)), `logprobs_mode` (not the chain's mode when the answer started, "
        "`chain_params` logprobs_mode: processed_logprobs unless a [[chain]] entry says otherwise); the grouping is "
        "by the client's values",
    ),
)
# What devshardd sets on a request before it reaches vLLM, unless the client already asked for it (gonka-ai/vllm
# docs/gonka-infval-old-vs-new-gumbel.md, 2026-10-01, devshard v5.0.2): (name, injected-when expression). The
# short-output version (gonka#1955, devshard/docs/proposals/short-output-validation.md @fd475011) injects no
# min_tokens floor and keeps max_tokens and stop_token_ids; an escrow of unknown version is taken as before it.
INJECTED = (
    ("logprobs", pl.col("logprobs_requested").fill_null(False).not_()),
    ("top_logprobs", pl.col("top_logprobs").fill_null(0) < 5),
    ("min_tokens", (pl.col("min_tokens").fill_null(0) < 64) & (pl.col("escrow_rules").fill_null("") != SHORT_OUTPUT)),
    ("seed", pl.col("seed_given").fill_null(False).not_()),
    # devshardd rewrites every request to the chain's mode at the time (chain_params logprobs_mode, per answer)
    ("logprobs_mode", pl.col("logprobs_mode").fill_null("") != pl.col("chain_mode").struct.field("value")),
)


def sampling_label(temperature: float | None, top_p: float | None, detail: bool) -> str:
    if temperature is None:
        return "unknown"
    if temperature == 0:
        return "greedy"
    if not detail:
        return "sampled"
    band = next((label for high, label in BANDS if temperature <= high), "> 1")
    return f"sampled t{band} top_p {top_p:g}"


def answers_by_sampling(
    con: duckdb.DuckDBPyConnection, host: str, window: Window, *, detail: bool = False
) -> EvidenceResult:
    """Invalidated rate of the host's judged answers, greedy vs sampled, per build."""
    answers = fetch_frame(con, sql_text("evidence/judged_answers.sql"), {"host": host, **window.params})
    answers = answers.with_columns(
        sampling=pl.struct("temperature", "top_p").map_elements(
            lambda s: sampling_label(s["temperature"], s["top_p"], detail), return_dtype=pl.String
        )
    )
    rows = (
        answers.group_by("build", "sampling")
        .agg(
            judged=pl.len().cast(pl.Int64),
            invalidated=(pl.col("status") == "invalidated").sum().cast(pl.Int64),
            challenged=pl.col("challenged").fill_null(False).sum().cast(pl.Int64),
            **{f"_inj_{name}": (when & pl.col("stored")).sum().cast(pl.Int64) for name, when in INJECTED},
        )
        .sort("build", "sampling")
    )
    rows = rows.with_columns(
        injected=pl.concat_str(
            [pl.when(pl.col(f"_inj_{n}") > 0).then(pl.format(f"{n} {{}}", pl.col(f"_inj_{n}"))) for n, _ in INJECTED],
            separator=", ",
            ignore_nulls=True,
        )
    ).drop(f"_inj_{n}" for n, _ in INJECTED)
    rows = rows.with_columns(injected=pl.when(pl.col("injected") != "").then(pl.col("injected")))
    rows = rows.with_columns(
        invalidated_rate=pl.when(pl.col("judged") > 0).then(pl.col("invalidated") / pl.col("judged"))
    )
    rows = with_wilson(rows, "invalidated", "judged")
    coarse = answers.with_columns(greedy=pl.col("sampling") == "greedy").filter(pl.col("sampling") != "unknown")
    stats = {}
    fisher = _fisher(coarse)
    if fisher:
        stats["fisher"] = fisher
    by_build = {b: f for (b,), frame in coarse.group_by("build") if (f := _fisher(frame))}
    if by_build:
        stats["fisher_by_build"] = dict(sorted(by_build.items()))
    if coarse.height:
        strata = [_table(frame) for _, frame in coarse.sort("build").group_by("build", maintain_order=True)]
        stats["cmh"] = cmh_test(strata).as_stat(rows=["sampled", "greedy"], strata="build")
        stats["breslow_day"] = breslow_day_test(strata).as_stat(strata="build")
    if family := holm_adjust(stats):
        stats["multiple_testing"] = family
    if rows.height:
        stats["interval"] = interval_stat("invalidated / judged, per row")
    notes = []
    if answers.height == 0:
        notes.append(f"host {host} has no judged answers in {window.describe()}.")
    unknown = answers.filter(pl.col("sampling") == "unknown").height
    if unknown:
        notes.append(f"{unknown} judged answer(s) have no stored request (sampling unknown).")
    notes.append(
        "judged = the host's answers with at least one sampled validation; greedy = temperature 0 "
        "(absent parameters are the API defaults, temperature 1 and top_p 1); Fisher: invalidated, "
        "sampled vs greedy."
    )
    notes.append(
        "Sampling is the client's: devshardd stores the request as the client sent it (gonka-ai/gonka "
        "decentralized-api/internal/devshard/shared_runtime.go) and then sets logprobs, top_logprobs 5, min_tokens "
        "64, seed = int32(inference_id) and the chain's logprobs_mode where the client did not (gonka-ai/vllm "
        "docs/gonka-infval-old-vs-new-gumbel.md, devshard v5.0.2); `injected` counts them per row. The short-output "
        "devshard version (gonka#1955) injects no min_tokens floor, so its escrows' answers (where the builds file "
        "names the version's rule set) never count min_tokens; escrows of unknown version are counted as before it."
    )
    notes.extend(_chain_mode_notes(answers))
    return EvidenceResult(
        evidence=NAME,
        title=f"Judged answers of {host} by build and sampling ({window.describe()})",
        params={"host": host, **window.params, "detail": detail},
        rows=rows.select(COLUMNS),
        stats=stats,
        notes=notes,
    )


def _chain_mode_notes(answers: pl.DataFrame) -> list[str]:
    """The chain's logprobs mode the answers were compared with, per value and source, `assumed` for a default."""
    stored = answers.filter(pl.col("stored")).unnest("chain_mode")
    if not stored.height:
        return []
    parts = stored.group_by("value", "source", "assumed").len().sort("value", "source")
    which = "; ".join(
        f"{r['value']} ({'assumed: ' if r['assumed'] else ''}{r['source']}): {r['len']} answer(s)"
        for r in parts.iter_rows(named=True)
    )
    return [f"`injected` logprobs_mode compares the client's with the chain's mode when the answer started: {which}."]


def _table(frame: pl.DataFrame) -> list[list[int]]:
    """``[[sampled invalidated, sampled not], [greedy invalidated, greedy not]]`` of judged answers."""
    table = []
    for greedy in (False, True):
        part = frame.filter(pl.col("greedy") == greedy)
        invalidated = int((part["status"] == "invalidated").sum())
        table.append([invalidated, part.height - invalidated])
    return table


def _fisher(frame: pl.DataFrame) -> dict | None:
    """Fisher's exact test, sampled (first row) vs greedy, of invalidated judged answers."""
    (a, b), (c, d) = _table(frame)
    if not (a + b) or not (c + d):
        return None
    return fisher_exact_2x2(a, b, c, d).as_stat(rows=["sampled", "greedy"])


SPEC = register(
    EvidenceSpec(
        name=NAME,
        summary="The host's judged answers split by build and by greedy vs sampled requests.",
        compute=answers_by_sampling,
        columns=COLUMNS,
        sql=("evidence/judged_answers.sql",),
        options=(Option("detail", "--detail", "Split sampled answers by temperature band and top_p."),),
        report=ReportSection(order=80),
        description="The host's [judged answers](evidence-rules.md#common-rules) (answers with at least one sampled "
        "validation), by the executor's build and by the sampling parameters of the stored request (view "
        "`answer_checks`). Window: `--epoch` on the escrow's epoch, `--since/--until` on `started_at`.",
        notes="`--detail` splits `sampled` into temperature bands `(0, 0.5]`, `(0.5, 0.8]`, `(0.8, 1]`, `> 1` and the "
        "top_p value. `stats.fisher`: Fisher's exact two-sided test of invalidated, sampled vs greedy, over all builds "
        "(`unknown` left out); `stats.fisher_by_build`: the same per build, for builds that have both; `stats.cmh`: "
        "the Cochran–Mantel–Haenszel test of sampled vs greedy stratified by build (so that a build with more sampled "
        "traffic does not pass for an effect of sampling), with `breslow_day`, whether one odds ratio fits every "
        "build; `multiple_testing`: Holm over all of these tests; `interval`: what `ci_low`, `ci_high` are.",
    )
)
