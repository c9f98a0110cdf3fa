"""The `answer-integrity` evidence table: the host's stored answers checked, empty ones against engine events."""

from __future__ import annotations

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.spec import Column, EvidenceSpec, ReportSection, column_group, register
from pipeline.evidence.window import Window
from pipeline.warehouse.database import fetch_frame

NAME = "answer-integrity"
TOLERANCE_S = 60  # seconds added to both ends of an answer's time (clock skew between gateway, chain and host)
CAP_S = 3600  # longest engine-death / PoC window when the closing ready / poc_stop is missing or later
MATCH_COLUMNS = column_group(
    "empty_answers_in_engine_death",
    "empty_answers_in_poc",
    "empty_answers_unexplained",
    meaning="empty answers overlapping an engine death, a PoC window, or neither (see below); NULL when the host "
    "has no engine events at all",
)


def answer_integrity(con: duckdb.DuckDBPyConnection, host: str, window: Window) -> EvidenceResult:
    """Integrity counts over the host's stored answers, empty answers matched against engine events."""
    params = {"host": host, **window.params}
    rows = fetch_frame(con, sql_text("evidence/answer_integrity.sql"), params)
    notes = []
    if rows["answers_scanned"][0] == 0:
        notes.append(
            f"no stored answers of {host} in {window.describe()} (payload storage not in the copy, or pruned)."
        )
    events = fetch_frame(con, sql_text("evidence/answer_integrity_events.sql"), {"host": host})
    if events["events"][0] == 0:
        matched: dict[str, int | None] = dict.fromkeys(MATCH_COLUMNS)
        notes.append(
            "Empty answers are not yet matched against engine deaths or PoC windows "
            "(needs `gonka-evidence ingest-logs` for the host's engine events)."
        )
    else:
        empty = fetch_frame(
            con, sql_text("evidence/answer_integrity_empty.sql"), {**params, "tolerance_s": TOLERANCE_S, "cap_s": CAP_S}
        )
        in_death, in_poc = empty["in_engine_death"], empty["in_poc"]
        matched = {
            "empty_answers_in_engine_death": int(in_death.sum()),
            "empty_answers_in_poc": int(in_poc.sum()),
            "empty_answers_unexplained": int((~in_death & ~in_poc).sum()),
        }
        notes.append(
            f"Empty answers matched against {events['events'][0]} engine events of {host} "
            f"(logged {events['first_at'][0]:%Y-%m-%d %H:%M:%S} .. {events['last_at'][0]:%Y-%m-%d %H:%M:%S} UTC): "
            f"an answer's time is started_at − {TOLERANCE_S} s to the latest of started_at, confirmed_at and its "
            f"finish transaction + {TOLERANCE_S} s; an engine death lasts from a fatal, engine_dead, oom or "
            f"worker_died event to the next ready (Application startup complete.), a PoC window from poc_start to "
            f"the next poc_stop, each at most {CAP_S // 60} min. An answer overlapping a window counts in its "
            "column (in both when it overlaps both); unexplained = overlapping neither."
        )
        outside = empty.filter(~pl.col("in_vllm_logs") & ~pl.col("in_engine_death") & ~pl.col("in_poc")).height
        if outside:
            notes.append(
                f"{outside} of the unexplained empty answers lie outside every ingested vLLM log file of "
                f"{host}: unexplained there means unlogged, not ruled out."
            )
    rows = rows.with_columns(pl.lit(value, dtype=pl.Int64).alias(name) for name, value in matched.items())
    return EvidenceResult(
        evidence=NAME,
        title=f"Integrity of the stored answers of {host} ({window.describe()})",
        params=params,
        rows=rows,
        notes=notes,
    )


SPEC = register(
    EvidenceSpec(
        name=NAME,
        summary="Checks of the stored answers (payloads): token counts, logprob positions, empty answers.",
        compute=answer_integrity,
        columns=(
            Column("answers_scanned", "stored answers of the host (unreadable bodies included)"),
            Column("complete", "bodies read to the end: JSON parsed, or an SSE stream that reached `data: [DONE]`"),
            Column(
                "token_count_mismatches",
                "complete answers whose `usage.completion_tokens` differs from the number of logprob entries",
            ),
            Column(
                "duplicate_top_logprob_positions",
                "positions whose `top_logprobs` name a token twice, summed over answers",
            ),
            Column("nan_or_missing_logprob_answers", "answers with at least one NaN or missing logprob"),
            Column("tokens_not_ids_answers", "answers with at least one token named by text instead of a numeric id"),
            Column("empty_answers", "answers with no content text and no logprob entries"),
            *MATCH_COLUMNS,
        ),
        sql=(
            "evidence/answer_integrity.sql",
            "evidence/answer_integrity_events.sql",
            "evidence/answer_integrity_empty.sql",
        ),
        report=ReportSection(order=70),
        description="One row about the host's stored answers (view `answer_checks`). Window: `--epoch` on the "
        "escrow's epoch, `--since/--until` on `started_at`. Bodies that could not be read are in `quarantine` "
        "(table `payload_storage`), counted in `answers_scanned` but not in `complete`.",
        notes=f"""Empty answers are matched against the host's engine events (view `engine_events`, from its vLLM logs):

- an answer's time is `[started_at − {TOLERANCE_S} s, max(started_at, confirmed_at, event time of its first finish
  transaction) + {TOLERANCE_S} s]`. The three times come from three clocks (gateway, executor, diff log), and log
  times are the host's whole seconds; the {TOLERANCE_S} s absorb the skew;
- an engine death lasts from a `fatal`, `engine_dead`, `oom` or `worker_died` event to the host's next `ready`
  event at or after it, at most {CAP_S // 3600} hour (no ready: death + {CAP_S // 3600} h);
- a PoC window lasts from a `poc_start` to the next `poc_stop` at or after it, at most {CAP_S // 3600} hour;
- overlaps are of closed intervals; an answer overlapping both kinds counts in both columns; `unexplained`
  overlaps neither. A note says how many empty answers lie outside every ingested vLLM log file of the host
  (unexplained only for lack of logs).""",
    )
)
