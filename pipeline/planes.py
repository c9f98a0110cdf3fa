"""Other planes a copy may hold beside session storage (accounting ledger, payloads).

`gonka-evidence ingest SOURCE` ingests every plane it finds: after the session
store, each registered plane ingester gets the same open source (same snapshot
for PostgreSQL) and the ingest run it writes through.
"""

from __future__ import annotations

from typing import Callable

import duckdb

from pipeline.loading import IngestRun
from pipeline.sources.base import SessionStore
from pipeline.transforms.answers import ingest_payloads
from pipeline.transforms.ledger import ingest_ledger

# (con, store, run): writes and quarantines through the run, which counts the rows per table.
PlaneIngester = Callable[[duckdb.DuckDBPyConnection, SessionStore, IngestRun], None]
PLANE_INGESTERS: list[PlaneIngester] = [ingest_ledger, ingest_payloads]
