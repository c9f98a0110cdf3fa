"""Other planes a copy may hold beside session storage (accounting ledger, payloads).

`gonka-evidence ingest SOURCE` ingests every plane it finds: after the session
store, each registered plane ingester gets the same open source (same snapshot
for PostgreSQL) and the ingest run it writes through.
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from pipeline.ingest.ledger import ingest_ledger
from pipeline.ingest.payloads import ingest_payloads
from pipeline.ingest.runs import IngestRun
from pipeline.sources.store.base import SessionStore

# (con, store, run): writes and quarantines through the run, which counts the rows per table.
PlaneIngester = Callable[[duckdb.DuckDBPyConnection, SessionStore, IngestRun], None]
PLANE_INGESTERS: list[PlaneIngester] = [ingest_ledger, ingest_payloads]
