"""What the ingest does with a column it reads that a copy lacks (docs/sources.md, session storage schema).

Every canonical column of the tables read falls in exactly one class; none is ever filled with a default:

- OPTIONAL: absent in a known older layout, or only stored and shown, so NULL reads honestly as
  "unknown" in every use downstream. Read as NULL; the ingest names it per table and column in its
  output and in the run record (`ingest_accounting`).
- ROW_NEEDED: only some rows need it. Those rows are set aside at the read (quarantined, the reason
  naming the column); the others read it as NULL, as above.
- everything else (each table's `required` columns, and REFUSED): a row cannot be read without it.
  The copy is refused with a one-line error naming table and column, before the ingest writes anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.sources.errors import SourceError

_PRE_SQUASH = "pre-squash epoch files have no such column (step 8 kept only the obs snapshot)"
_NARROW = "old epoch files have a 3-column sealed_inferences: their rows are bare, facts come from the log"

# (table, column) -> why NULL is honest there.
OPTIONAL: dict[tuple[str, str], str] = {
    ("sessions", "version"): "old epoch files (the squashed migration list) have no sessions.version",
    ("sessions", "imported_nonce"): "builds before snapshot_import_watermark import nothing",
    ("sessions", "creator_addr"): "stored and shown only",
    ("sessions", "initial_balance"): "stored only",
    ("sessions", "last_finalized"): "stored only",
    ("diffs", "created_at"): "the event time falls back to the nonce clock, as for a 0",
    ("snapshots", "created_at"): "stored only",
    ("sealed_inferences", "obs_present"): _NARROW,
    **{
        ("sealed_inferences", c): _PRE_SQUASH
        for c in (
            "sealed_model",
            "sealed_input_length",
            "sealed_max_tokens",
            "sealed_input_tokens",
            "sealed_output_tokens",
            "sealed_reserved_cost",
            "sealed_actual_cost",
            "sealed_started_at",
            "sealed_confirmed_at",
        )
    },
}


def _settled(batch: pa.RecordBatch) -> pa.Array:
    status = batch.column("status")
    return pc.equal(status, "settled") if pa.types.is_string(status.type) else pa.nulls(len(status), pa.bool_())


def _rich_seal(batch: pa.RecordBatch) -> pa.Array:
    """A real seal with its facts (sealed_nonce > 0, obs_present true): the row that carries them."""
    obs = batch.column("obs_present")
    present = obs if pa.types.is_boolean(obs.type) else pc.not_equal(obs, 0)
    return pc.and_(pc.greater(batch.column("sealed_nonce"), 0), present)


# (table, column) -> (which rows need it, in words; the columns that tell them; those rows of a raw batch).
# Where the copy lacks a telling column too, no row can need it (the old 3-column sealed_inferences, whose
# rows are all bare): the column is then OPTIONAL, read as NULL.
ROW_NEEDED: dict[tuple[str, str], tuple[str, tuple[str, ...], Callable[[pa.RecordBatch], pa.Array]]] = {
    ("sessions", "settled_at"): ("a settled session", ("status",), _settled),
    **{
        ("sealed_inferences", c): ("a sealed row with obs_present true", ("obs_present", "sealed_nonce"), _rich_seal)
        for c in (
            "sealed_status",
            "sealed_executor_slot",
            "sealed_votes_valid",
            "sealed_votes_invalid",
            "sealed_validated_by",
        )
    },
}


def rows_need(table: str, column: str, present: list[str]) -> bool:
    """Whether some rows of a table with the `present` columns need `column` (ROW_NEEDED, telling columns present)."""
    needed = ROW_NEEDED.get((table, column))
    return needed is not None and all(c in present for c in needed[1])


# Columns beyond the tables' `required` ones without which no row of the table can be read.
REFUSED: dict[tuple[str, str], str] = {
    ("sessions", "latest_nonce"): "coverage and the change cursor count the escrow's nonces by it",
    ("sessions", "status"): "a session is active or settled by it",
    ("escrow_cache", "epoch_id"): "the cache row's epoch",
    ("escrow_cache", "escrow_json"): "the cache row itself",
    ("escrow_cache", "cached_at"): "copies' cache rows are ranked by it",
}


class _Store(Protocol):
    display: str

    def epochs(self) -> list[int]: ...

    def columns(self, table: str, epoch_id: int | None) -> list[str] | None: ...


def absent_columns(store: _Store, tables: Mapping[str, Any]) -> dict[tuple[str, str, bool], list[str]]:
    """(table, column, whether rows need it) -> where the copy lacks it (`epoch N` or `the store`), for every
    column the ingest reads of the tables the copy has (`tables`: base.TABLES, which imports this module;
    a table the copy does not have is named elsewhere)."""
    lacking: dict[tuple[str, str, bool], list[str]] = {}
    for name, spec in tables.items():
        for e in store.epochs() if spec.per_epoch else [None]:
            present = store.columns(name, e)
            if present is None:
                continue
            for column in spec.schema.names:
                if column not in present and not (column == "epoch_id" and spec.per_epoch):
                    where = "the store" if e is None else f"epoch {e}"
                    lacking.setdefault((name, column, rows_need(name, column, present)), []).append(where)
    return lacking


def refuse_absent_columns(store: _Store, tables: Mapping[str, Any]) -> None:
    """A one-line SourceError naming every table and column the copy lacks that its rows cannot be read
    without (class REFUSED or a table's `required`): raised before anything is written."""
    refused = [
        f"{table}.{column} (in {', '.join(where)})"
        for (table, column, _), where in absent_columns(store, tables).items()
        if column in tables[table].required or (table, column) in REFUSED
    ]
    if refused:
        raise SourceError(
            f"{store.display}: the copy lacks required column(s) {'; '.join(refused)}, which its rows cannot be "
            "read without: refused, nothing written"
        )


def needed_absent(batch: pa.RecordBatch, table: str) -> list[tuple[int, str]]:
    """(row, reason) of the rows of a raw batch (the copy's columns, before they are conformed) that
    need a column the copy lacks (ROW_NEEDED)."""
    found = []
    for (name, column), (who, _, needs) in ROW_NEEDED.items():
        if name != table or column in batch.schema.names or not rows_need(table, column, batch.schema.names):
            continue
        mask = needs(batch)
        if pc.any(mask).as_py():
            for i, need in enumerate(mask.to_pylist()):
                if need:
                    found.append((i, f"{table}.{column} is absent from the copy, and {who} needs it"))
    return found
