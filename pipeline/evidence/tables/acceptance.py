"""acceptance: speculative-decoding acceptance per build of the host (docs/evidence.md, acceptance).

Rows ``build, source, windows, drafts, drafted, accepted, acceptance_rate,
mean_acceptance_length, per_position, length_distribution``:

- windows are ``spec_decode_windows`` of the host in the window (on ``at``), per build
  (as-of join of ``host_builds``); a build's windows come from ``/metrics`` counter
  increases when it has any (exact drafts), else from log lines (``source``);
- sums first, then ratios — never an average of window means:
  ``mean_acceptance_length = 1 + Σaccepted / Σdrafts`` and
  ``acceptance_rate = Σaccepted / Σdrafted`` (Wilson 95% interval on the tokens);
  log windows whose drafts cannot be recovered (MAL missing or nan) count in
  ``drafted``/``accepted`` but not in the MAL, and are reported in the stats;
- ``per_position``: the K per-position rates weighted by drafts, r_i = Σ(r_i·drafts)/Σdrafts;
- ``length_distribution``: P(len = 1) = 1 − r_0, P(len = i+1) = r_{i−1} − r_i, P(len = K+1) = r_{K−1};
- ``rate_boot_low``/``rate_boot_high`` and ``mal_boot_low``/``mal_boot_high``: 95% percentile
  bootstrap intervals of the acceptance rate and of the mean acceptance length that resample whole
  windows (2,000 resamples, seed 0: the same windows give the same bytes). Tokens of one window
  are not independent draws, so the Wilson interval on the tokens (``ci_low``/``ci_high``) is too
  narrow; both are kept, and ``stats.interval`` / ``stats.bootstrap`` say which is which.
"""

from __future__ import annotations

from collections import Counter

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.evidence.log_window import build_order, time_bounds
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.spec import EvidenceSpec, ReportSection, register
from pipeline.evidence.stats import BOOTSTRAP_RESAMPLES, SEED, bootstrap_ratio, interval_stat, with_wilson
from pipeline.evidence.window import Window
from pipeline.warehouse.database import fetch_frame

NAME = "acceptance"
SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "build": pl.String,
    "source": pl.String,
    "windows": pl.Int64,
    "drafts": pl.Int64,
    "drafted": pl.Int64,
    "accepted": pl.Int64,
    "acceptance_rate": pl.Float64,
    "mean_acceptance_length": pl.Float64,
    "per_position": pl.List(pl.Float64),
    "length_distribution": pl.List(pl.Float64),
    "rate_boot_low": pl.Float64,
    "rate_boot_high": pl.Float64,
    "mal_boot_low": pl.Float64,
    "mal_boot_high": pl.Float64,
}
COLUMNS = (
    "build",
    "source",
    "windows",
    "drafts",
    "drafted",
    "accepted",
    "acceptance_rate",
    "ci_low",
    "ci_high",
    "rate_boot_low",
    "rate_boot_high",
    "mean_acceptance_length",
    "mal_boot_low",
    "mal_boot_high",
    "per_position",
    "length_distribution",
)


def length_distribution(rates: list[float]) -> list[float]:
    """P(accepted length = 1 … K+1) from prefix-wise per-position rates (a draft token accepted at position i
    was accepted at every earlier one)."""
    if not rates:
        return []
    return [1 - rates[0], *(rates[i - 1] - rates[i] for i in range(1, len(rates))), rates[-1]]


def _row(build: str, windows: pl.DataFrame) -> tuple[dict, int, list[str]]:
    source = "metrics" if (windows["source"] == "metrics").any() else "log"
    w = windows.filter(pl.col("source") == source)
    known = w.filter(pl.col("drafts").is_not_null() & (pl.col("drafts") > 0))
    drafts = int(known["drafts"].sum())
    accepted_known = int(known["accepted"].sum())
    shaped = known.filter(pl.col("per_position").is_not_null())
    rates: list[float] = []
    if shaped.height:
        lengths = Counter(len(p) for p in shaped["per_position"].to_list())
        k = lengths.most_common(1)[0][0]
        usable = [
            (p, d)
            for p, d in zip(shaped["per_position"].to_list(), shaped["drafts"].to_list(), strict=True)
            if len(p) == k and all(v == v for v in p)
        ]
        weight = sum(d for _, d in usable)
        if weight:
            rates = [sum(p[i] * d for p, d in usable) / weight for i in range(k)]
    row: dict = {
        "build": build,
        "source": source,
        "windows": w.height,
        "drafts": drafts,
        "drafted": int(w["drafted"].sum()),
        "accepted": int(w["accepted"].sum()),
        "mean_acceptance_length": 1 + accepted_known / drafts if drafts else None,
        "per_position": rates or None,
        "length_distribution": length_distribution(rates) or None,
    }
    row["acceptance_rate"] = row["accepted"] / row["drafted"] if row["drafted"] else None
    rate = bootstrap_ratio(w["accepted"].to_list(), w["drafted"].to_list())
    mal = bootstrap_ratio(known["accepted"].to_list(), known["drafts"].to_list(), transform=lambda r: 1 + r)
    row |= {
        "rate_boot_low": _known(rate.low),
        "rate_boot_high": _known(rate.high),
        "mal_boot_low": _known(mal.low),
        "mal_boot_high": _known(mal.high),
    }
    remarks = [
        f"build {build}: no bootstrap interval of the {what}: {r.note}"
        for what, r in (("acceptance rate", rate), ("mean acceptance length", mal))
        if r.note
    ]
    return row, w.height - known.height, remarks


def _known(value: float) -> float | None:
    return None if value != value else value


def acceptance(con: duckdb.DuckDBPyConnection, host: str, window: Window) -> EvidenceResult:
    """Mean acceptance length, acceptance rate and per-position rates of the host, per build."""
    since, until = time_bounds(con, window)
    windows = fetch_frame(con, sql_text("evidence/spec_windows.sql"), {"host": host, "since": since, "until": until})
    rows, without_drafts, remarks = [], 0, []
    for build in build_order(con, host, windows["build"].unique().to_list()):
        part = windows.filter(pl.col("build") == build)
        if part.height == 0:
            continue
        row, missing, why = _row(build, part)
        rows.append(row)
        without_drafts += missing
        remarks += why
    frame = pl.DataFrame(rows, schema=SCHEMA) if rows else pl.DataFrame(schema=SCHEMA)
    frame = with_wilson(frame, "accepted", "drafted").select(COLUMNS)
    notes = list(remarks)
    if windows.height == 0:
        notes.append(
            f"no speculative-decoding windows for host {host} in {window.describe()} "
            "(`gonka-evidence ingest-logs` vLLM logs or /metrics scrapes first)."
        )
    notes.append(
        "Sums first, then ratios: mean acceptance length = 1 + Σaccepted / Σdrafts (vLLM 0.8.5 lines "
        "normalised), never an average of window means; per-position rates weighted by drafts. Log lines "
        "do not print drafts: they are recovered as accepted / (MAL − 1); /metrics counters are exact and "
        "are used for a build whenever it has any."
    )
    return EvidenceResult(
        evidence=NAME,
        title=f"Speculative decoding acceptance of {host}, by build ({window.describe()})",
        params={"host": host, **window.params},
        rows=frame,
        stats={
            "windows": windows.height,
            "windows_without_drafts": without_drafts,
            "interval": interval_stat("accepted / drafted (tokens; treats tokens as independent, too narrow)"),
            "bootstrap": interval_stat(
                "acceptance_rate and mean_acceptance_length, per build",
                ("rate_boot_*", "mal_boot_*"),
                method="percentile bootstrap",
                resamples=BOOTSTRAP_RESAMPLES,
                seed=SEED,
                unit="log windows",
            ),
        },
        notes=notes,
    )


def _chart(result: EvidenceResult, table: pl.DataFrame) -> dict:
    from pipeline.output.render.charts import acceptance_chart

    return acceptance_chart(result).to_dict()


SPEC = register(
    EvidenceSpec(
        name=NAME,
        summary="Speculative-decoding acceptance per build (mean acceptance length, per-position rates), from vLLM "
        "logs or `/metrics` scrapes.",
        compute=acceptance,
        columns=COLUMNS,
        sql=("evidence/log_window_bounds.sql", "evidence/spec_windows.sql", "evidence/host_builds.sql"),
        report=ReportSection(order=50, heading="Speculative-decoding acceptance", chart=_chart),
        definitions=__doc__,
    )
)
