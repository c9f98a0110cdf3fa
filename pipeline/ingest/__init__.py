"""Stage 2, ingest: sources into the warehouse, with run bookkeeping and quarantine.

`copies.ingest_source` ingests a copy by name (store, ledger, payloads); `logs` and `json_responses`
the files of one host; `kinds` registers what a run's `[[sources]]` entries may be.
"""

# The accounting input that names the columns a copy lacks (its note: `table.column (in epoch N, …)`).
MISSING_COLUMNS = "columns missing, read as NULL"
# The input that names the columns a copy lacks that some of its rows need (those rows are quarantined).
MISSING_COLUMNS_QUARANTINED = "columns missing, rows that need them quarantined"
_SAID = {MISSING_COLUMNS: "read as NULL (unknown)", MISSING_COLUMNS_QUARANTINED: "the rows that need them quarantined"}


def missing_column_warnings(accounting) -> list[str]:
    """The warnings naming a copy's missing columns, one per class, from its accounting rows."""
    return [f"columns the copy lacks, {_SAID[r.input]}: {r.note}" for r in accounting if r.input in _SAID and r.note]
