"""The chain parameters table (`chain_params_t`): the defaults of `pipeline.core.chain` with the config's
`[[chain]]` entries, written by `gonka-evidence run`; read back by the rules that use them."""

from __future__ import annotations

from collections.abc import Iterable

import duckdb
import polars as pl

from pipeline.core.chain import ChainParam, merged
from pipeline.warehouse.database import fetch_frame, transaction

SCHEMA = pl.Schema(
    [
        ("name", pl.String()),
        ("model", pl.String()),
        ("value", pl.String()),
        ("since", pl.Datetime("us", "UTC")),
        ("source", pl.String()),
        ("assumed", pl.Boolean()),
    ]
)


def load_chain_params(con: duckdb.DuckDBPyConnection, overrides: Iterable[ChainParam] = ()) -> int:
    """Replace the table with the defaults and `overrides`; the number of rows."""
    rows = merged(overrides)
    frame = pl.DataFrame(
        [(p.name, p.model, p.value, p.since, p.source, p.assumed) for p in rows], schema=SCHEMA, orient="row"
    )
    with transaction(con):
        con.execute("DELETE FROM chain_params_t")
        con.register("new_chain_params", frame.to_arrow())
        con.execute("INSERT INTO chain_params_t BY NAME (SELECT * FROM new_chain_params)")
        con.unregister("new_chain_params")
    return frame.height


def read_chain_params(con: duckdb.DuckDBPyConnection) -> tuple[ChainParam, ...] | None:
    """The warehouse's chain parameters; None while the table is empty (then the rules use the defaults)."""
    frame = fetch_frame(con, "SELECT name, model, value, since, source, assumed FROM chain_params ORDER BY ALL")
    if not frame.height:
        return None
    return tuple(ChainParam(**row) for row in frame.iter_rows(named=True))
