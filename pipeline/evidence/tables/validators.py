"""The `validators` evidence table: who judged the host's answers, per validator address and build."""

from __future__ import annotations

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.spec import Column, EvidenceSpec, ReportSection, column_group, register
from pipeline.evidence.stats import interval_stat, with_wilson
from pipeline.evidence.window import Window
from pipeline.warehouse.database import fetch_frame

NAME = "validators"
COLUMNS = (
    Column("validator", "the address of the slot that cast the verdict"),
    Column(
        "build",
        "the validator's build at the verdict's `event_at` (`host_builds`); empty when no entry covers it (a "
        "validator whose build changed has one row per build)",
    ),
    Column("validations", "sampled validations (MsgValidation) on inferences the host executed, one per transaction"),
    Column("votes", "votes after a challenge (MsgValidationVote) on inferences the host executed, one per transaction"),
    Column("verdicts", "`validations + votes`"),
    Column("invalid", "verdicts that found the answer invalid"),
    Column(
        "self_verdicts",
        "verdicts cast by the host's own address on its own answers (another of its slots, or a vote on its own "
        "challenge; gonka-ai/gonka#1573): counted upstream, so included in `verdicts`, and named here",
    ),
    *column_group("invalid_share", "invalid_ci_low", "invalid_ci_high", meaning="`invalid / verdicts`, Wilson 95%"),
    Column("resolved", "verdicts on inferences whose final status is validated or invalidated"),
    Column("agreed", "of those, verdicts that match the final status"),
    *column_group("agreement_rate", "agreement_ci_low", "agreement_ci_high", meaning="`agreed / resolved`, Wilson 95%"),
)


def validators(con: duckdb.DuckDBPyConnection, host: str, window: Window) -> EvidenceResult:
    """Verdicts on the host's answers per validator address and build, with their agreement with the outcome."""
    counts = fetch_frame(con, sql_text("evidence/validator_verdicts.sql"), {"host": host, **window.params})
    rows = counts.sort(["verdicts", "validator", "first_at"], descending=[True, False, False]).with_columns(
        invalid_share=pl.when(pl.col("verdicts") > 0).then(pl.col("invalid") / pl.col("verdicts")),
        agreement_rate=pl.when(pl.col("resolved") > 0).then(pl.col("agreed") / pl.col("resolved")),
    )
    rows = with_wilson(rows, "invalid", "verdicts", prefix="invalid_ci")
    rows = with_wilson(rows, "agreed", "resolved", prefix="agreement_ci").select(COLUMNS)

    notes = []
    if rows.height == 0:
        notes.append(f"host {host} received no verdicts on its answers in {window.describe()}; nothing to show.")
    notes.append(
        "Verdicts on the host's answers, one per transaction (an address with several slots counts once): "
        "sampled validations and votes after a challenge, repeated ones and votes after resolution included. "
        "build = the validator's build at the verdict (empty: not in the build timeline); agreed / resolved: "
        "verdicts that match the final validated or invalidated status; self_verdicts: cast by the host's own "
        "address (counted upstream, flagged here)."
    )
    stats = {}
    if rows.height:
        stats = {
            "validators": rows["validator"].n_unique(),
            "verdicts": int(rows["verdicts"].sum()),
            "invalid": int(rows["invalid"].sum()),
            "self_verdicts": int(rows["self_verdicts"].sum()),
            "interval": {
                "invalid_share": interval_stat("invalid / verdicts, per row", ("invalid_ci_low", "invalid_ci_high")),
                "agreement_rate": interval_stat(
                    "agreed / resolved, per row", ("agreement_ci_low", "agreement_ci_high")
                ),
            },
        }
    return EvidenceResult(
        evidence=NAME,
        title=f"Validators of the answers of {host} ({window.describe()})",
        params={"host": host, **window.params},
        rows=rows,
        stats=stats,
        notes=notes,
    )


def _chart(result: EvidenceResult, table: pl.DataFrame) -> dict | None:
    """Invalid share of each validator's verdicts, with the Wilson interval as a rule."""
    import altair as alt

    data = result.rows.with_columns(
        label=pl.format(
            "{} · {} ({} of {})",
            pl.col("validator"),
            pl.col("build").fill_null("no build"),
            pl.col("invalid"),
            pl.col("verdicts"),
        )
    )
    if data.height == 0:
        return None
    base = alt.Chart(data).encode(y=alt.Y("label:N", sort=None, title=None, axis=alt.Axis(labelLimit=0)))
    bars = base.mark_bar().encode(
        x=alt.X(
            "invalid_share:Q",
            title="invalid verdicts / verdicts",
            axis=alt.Axis(format="%", tickCount=5),
            scale=alt.Scale(domain=[0, 1]),
        ),
        tooltip=["validator", "build", "invalid", "verdicts", "agreed", "resolved"],
    )
    rules = base.mark_rule(color="black").encode(x="invalid_ci_low:Q", x2="invalid_ci_high:Q")
    return (
        (bars + rules)
        .properties(title="Invalid verdicts on the host's answers, per validator (Wilson 95%)", width=360)
        .to_dict()
    )


SPEC = register(
    EvidenceSpec(
        name=NAME,
        summary="Who judged the host's answers: verdicts per validator address and build, invalid share and agreement "
        "with the final outcome.",
        compute=validators,
        columns=COLUMNS,
        sql=("evidence/validator_verdicts.sql",),
        report=ReportSection(order=25, heading="Validators of the host's answers", chart=_chart),
        description="One row per validator address and its build. A verdict is one "
        "validation or vote transaction on an inference the host executed, as counted by "
        "[epoch-summary](#epoch-summary): repeats and votes after resolution included, an address with several "
        "slots once per transaction. Window on the judged inference (`--epoch`: the escrows of that epoch; "
        "`--since/--until`: inferences started in the window).",
        notes="Rows by verdicts (most first), then address, then the build's first verdict. The rows sum to "
        "epoch-summary's verdict columns. `stats.interval` says what the two interval column pairs are.",
    )
)
