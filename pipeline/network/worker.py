"""What a network worker imports as it starts: a Dask worker preload (`cluster.WORKER_PRELOAD`; for a
cluster of your own, `dask worker --preload pipeline.network.worker`, docs/network.md).

The modules the lake's tasks run, with Polars, Arrow and DuckDB: otherwise each worker's first task pays
for them (bench/BENCHMARKS.md, network lake). The worker's environment (`resources.worker_env`) is set
before this runs; Arrow's pools are sized to the worker's share here (`POOLS`: the threads of each pool),
and DuckDB's connections take theirs from the share as they open.
"""

from __future__ import annotations

import duckdb  # noqa: F401
import polars  # noqa: F401
import pyarrow.compute  # noqa: F401
import pyarrow.parquet  # noqa: F401

import pipeline.ingest.derive  # noqa: F401  (imported by the partition's derive, on first use)
import pipeline.ingest.store  # noqa: F401
import pipeline.network.copies  # noqa: F401  (stage 1)
import pipeline.network.jobs  # noqa: F401  (network evidence partials)
import pipeline.network.partition  # noqa: F401  (stage 2)
import pipeline.sources.decode.snapshots  # noqa: F401
import pipeline.sources.decode.txs  # noqa: F401
import pipeline.sources.decode.workers  # noqa: F401
import pipeline.sources.store.postgres  # noqa: F401  (the copies a stage-1 task reads)
import pipeline.sources.store.sqlite  # noqa: F401
import pipeline.warehouse.database  # noqa: F401
from pipeline.core.resources import size_pools

POOLS = size_pools()
