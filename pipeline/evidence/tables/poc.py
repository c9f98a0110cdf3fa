"""The `poc` evidence table: PoC validation results per PoC event, with recomputed binomial p-values."""

from __future__ import annotations

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.evidence.log_window import time_bounds
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.spec import Column, EvidenceSpec, ReportSection, column_group, register
from pipeline.evidence.window import Window
from pipeline.sources.logs.poc import binomial_p_value
from pipeline.warehouse.database import fetch_frame

NAME = "poc"
SCHEMA = {
    "event": pl.String,
    "participant": pl.String,
    "validators": pl.Int64,
    "invalid": pl.Int64,
    "nonces": pl.Int64,
    "mismatches": pl.Int64,
    "p_value": pl.Float64,
    "p_mismatch": pl.Float64,
    "cutoff": pl.Float64,
    "verdict": pl.String,
    "reported_disagrees": pl.Int64,
}


def poc(con: duckdb.DuckDBPyConnection, host: str, window: Window) -> EvidenceResult:
    """PoC results per event and participant, with the p-value recomputed and the parameters used."""
    since, until = time_bounds(con, window)
    results = fetch_frame(con, sql_text("evidence/poc_rows.sql"), {"host": host, "since": since, "until": until})
    rows = []
    results = results.with_columns(pl.col("event").fill_null(""), pl.col("participant").fill_null(""))
    for (event, participant), part in results.group_by(["event", "participant"], maintain_order=True):
        params = part.select("p_mismatch", "cutoff").unique()
        nonces, mismatches = int(part["n_total"].sum()), int(part["n_mismatch"].sum())
        p_mismatch = cutoff = p_value = None
        if params.height == 1:
            p_mismatch, cutoff = params["p_mismatch"][0], params["cutoff"][0]
            p_value = binomial_p_value(mismatches, nonces, p_mismatch)
        validators = part["validator"].n_unique()
        invalid = part.filter(pl.col("fraud"))["validator"].n_unique()
        rows.append(
            {
                "event": event or None,
                "participant": participant or None,
                "validators": validators,
                "invalid": invalid,
                "nonces": nonces,
                "mismatches": mismatches,
                "p_value": p_value,
                "p_mismatch": p_mismatch,
                "cutoff": cutoff,
                "verdict": "rejected" if 2 * invalid > validators else "accepted",
                "reported_disagrees": int(part["reported_disagrees"].sum()),
            }
        )
    frame = pl.DataFrame(rows, schema=SCHEMA) if rows else pl.DataFrame(schema=SCHEMA)
    frame = frame.sort("event", "participant", nulls_last=True)
    notes = []
    if results.height == 0:
        notes.append(
            f"no PoC validation results for host {host} in {window.describe()} "
            "(`gonka-evidence ingest-logs --kind poc` the result files first)."
        )
    notes.append(
        "p-values recomputed: P(X ≥ mismatches), X ~ Binomial(nonces, p_mismatch), fraud when below the "
        "cutoff. The parameters are the result's own stat_test when it has one, else p_mismatch 0.1 (chain) "
        "and cutoff 0.01 (the MLNode's effective fraud_threshold)."
    )
    return EvidenceResult(
        evidence=NAME,
        title=f"PoC validation results for {host}, per PoC event ({window.describe()})",
        params={"host": host, **window.params},
        rows=frame,
        stats={
            "results": results.height,
            "params_sources": sorted(
                set(fetch_frame(con, sql_text("evidence/poc_params_sources.sql"))["params_source"].to_list())
            ),
        },
        notes=notes,
    )


SPEC = register(
    EvidenceSpec(
        name=NAME,
        summary="PoC validation results per PoC event with recomputed binomial p-values.",
        compute=poc,
        columns=(
            Column("event", "the PoC stage (its start block height when the result carries it)"),
            Column("participant", "the validated participant"),
            Column("validators", "distinct validators with a result"),
            Column("invalid", "validators whose recomputed one-sided binomial test flags fraud (`p_value < cutoff`)"),
            *column_group("nonces", "mismatches", meaning="Σ `n_total`, Σ `n_mismatch`"),
            Column(
                "p_value",
                "the one-sided binomial test on the pooled counts, when every result used the same `p_mismatch` and "
                "cutoff (else NULL)",
            ),
            *column_group("p_mismatch", "cutoff", meaning="the parameters (NULL when results differ)"),
            Column(
                "verdict",
                "`rejected` when more than half the validators flag fraud, else `accepted` (the chain weighs "
                "validators by power, which these files do not carry)",
            ),
            Column("reported_disagrees", "results whose own `fraud_detected` differs from the recomputation"),
        ),
        sql=("evidence/log_window_bounds.sql", "evidence/poc_rows.sql", "evidence/poc_params_sources.sql"),
        report=ReportSection(order=100, heading="PoC validation"),
        description="PoC validation results per (PoC event, validated participant), from `poc_results`, involving the "
        "host (ingested by it, validating it, or validated by it). Window on the result time.",
        notes="p-values recomputed: P(X ≥ mismatches), X ~ Binomial(nonces, p_mismatch), fraud when below the cutoff. "
        "`stats.params_sources` says where the parameters came from: the result's own `stat_test`, or the defaults "
        "p_mismatch 0.1 (chain) and cutoff 0.01 (the MLNode's effective threshold); see "
        "[sources](./sources.md#poc-validation-results).",
    )
)
