"""Other planes a copy may hold beside session storage (accounting ledger, payloads).

`gonka-evidence ingest SOURCE` ingests every plane it finds: after the session
store, each registered plane ingester gets the same open source (same snapshot
for PostgreSQL) and the run id, and adds its row counts to the run summary.
"""

from __future__ import annotations

from typing import Callable

import duckdb

from pipeline.sources.base import SessionStore

# (con, store, run_id) -> {table: rows}; quarantined rows are recorded by the ingester itself.
PlaneIngester = Callable[[duckdb.DuckDBPyConnection, SessionStore, str], dict[str, int]]
PLANE_INGESTERS: list[PlaneIngester] = []


def _register_issue4_planes() -> None:
    # Imported here, not at the top: the ingesters import the warehouse helpers, and
    # `pipeline.ingest` imports this module lazily.
    from pipeline.transforms.answers import ingest_payloads
    from pipeline.transforms.ledger import ingest_ledger

    PLANE_INGESTERS.extend([ingest_ledger, ingest_payloads])


_register_issue4_planes()
