"""answer-integrity: the host's stored answers in a window, checked (view answer_checks).

One row: ``answers_scanned`` (stored answers of the host), ``complete`` (bodies read to the end:
JSON parsed, or an SSE stream that reached ``data: [DONE]``), ``token_count_mismatches``
(complete answers whose usage.completion_tokens differs from the number of logprob entries),
``duplicate_top_logprob_positions`` (positions whose top_logprobs repeat a token, summed),
``nan_or_missing_logprob_answers``, ``tokens_not_ids_answers`` (answers with at least one token
named by text instead of a numeric id), ``empty_answers``. Bodies that could not be read are in
``quarantine`` (table payload_storage) and counted in answers_scanned but not in complete.
Window: ``--epoch`` on the escrow's epoch, ``--since/--until`` on started_at.
"""

from __future__ import annotations

import duckdb

from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.window import Window
from pipeline.paths import sql_text
from pipeline.warehouse import fetch_frame

NAME = "answer-integrity"


def answer_integrity(con: duckdb.DuckDBPyConnection, host: str, window: Window) -> EvidenceResult:
    """Integrity counts over the host's stored answers."""
    rows = fetch_frame(con, sql_text("evidence/answer_integrity.sql"), {"host": host, **window.params})
    notes = []
    if rows["answers_scanned"][0] == 0:
        notes.append(f"no stored answers of {host} in {window.describe()} (payload storage not in the copy, or pruned).")
    notes.append("Empty answers are not yet matched against engine deaths or PoC windows (needs the logs issue's "
                 "engine events).")
    return EvidenceResult(
        evidence=NAME, title=f"Integrity of the stored answers of {host} ({window.describe()})",
        params={"host": host, **window.params}, rows=rows, notes=notes)
