"""epoch-summary: the host as executor, one row per epoch.

Counts over the inferences the host executed (executor = the address holding the
inference's executor slot), selected by epoch (``--epoch``: the escrows of that epoch)
or by ``started_at`` in ``[since, until)``:

- ``sealed``: inferences with a sealed row (``sealed_nonce > 0``, bare rows included);
- ``finished``: inferences with a finish transaction, whatever followed (validation,
  challenge, an error miss); records drained to Finished at settlement are not included;
- ``validated``, ``invalidated``, ``timed_out``: inferences in that final status
  (``timed_out`` covers refusals, execution timeouts and error misses, not records the
  settlement drain refunded);
- ``drained``: inferences still pending or started when their escrow entered settlement
  (never an answer, never a miss, whatever status the drain left them in);
- ``challenged``: inferences that ever received an invalid sampled validation, including
  those later cleared or invalidated; ``cleared``: challenged, then validated by the vote;
- ``validations_valid`` / ``validations_invalid``: sampled validation transactions
  (MsgValidation) on those inferences; ``votes_valid`` / ``votes_invalid``: challenge vote
  transactions (MsgValidationVote). Each transaction counts once (an address with several
  slots once), including repeats and votes after resolution that the tally ignored;
- ``input_tokens`` / ``output_tokens``: token counts of the finish transactions.

Rows: every epoch in which the host holds a slot (``--epoch``: that epoch); with
``--since/--until``, the epochs of the host's inferences started in the window.
"""

from __future__ import annotations

import duckdb
import polars as pl

from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.window import Window
from pipeline.paths import sql_text
from pipeline.warehouse import fetch_frame

NAME = "epoch-summary"
COLUMNS = [
    "epoch", "sealed", "finished", "validated", "invalidated", "timed_out", "drained", "challenged", "cleared",
    "validations_valid", "validations_invalid", "votes_valid", "votes_invalid", "input_tokens", "output_tokens",
]


def epoch_summary(con: duckdb.DuckDBPyConnection, host: str, window: Window) -> EvidenceResult:
    """Per epoch: the host's answers by outcome, the verdicts on them, and their tokens."""
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

    notes = []
    if per_answer.height == 0:
        notes.append(f"host {host} executed nothing in {window.describe()}.")
    notes.append(
        "finished = inferences with a finish transaction; validated / invalidated / timed_out = final status; "
        "drained = still pending or started at settlement (not answers, not misses, not in timed_out); "
        "challenged = ever received an invalid sampled validation (cleared ones included); "
        "cleared = challenged, then validated; validations_* = sampled checks and votes_* = challenge votes "
        "on the host's answers, one per transaction; tokens from finish transactions."
    )
    return EvidenceResult(
        evidence=NAME,
        title=f"Epoch summary of {host} as executor ({window.describe()})",
        params={"host": host, **window.params},
        rows=rows,
        notes=notes,
    )
