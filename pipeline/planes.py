"""Other planes a copy may hold beside session storage (accounting ledger, payloads).

`gonka-evidence ingest SOURCE` ingests every plane it finds: after the session
store, each registered plane ingester gets the same open source (same snapshot
for PostgreSQL) and the run id, and adds its row counts to the run summary.
"""

from __future__ import annotations

from typing import Callable

import duckdb

from pipeline.sources.base import SessionStore
from pipeline.transforms.answers import ingest_payloads
from pipeline.transforms.ledger import ingest_ledger

# (con, store, run_id) -> {table: rows}; quarantined rows are recorded by the ingester itself
# and reported as "<plane>_quarantined".
PlaneIngester = Callable[[duckdb.DuckDBPyConnection, SessionStore, str], dict[str, int]]
PLANE_INGESTERS: list[PlaneIngester] = [ingest_ledger, ingest_payloads]
