"""Network-wide evidence: many hosts' copies in a lake of Parquet files, worked per partition on Dask.

`lake` (layout), `copies` (stage 1: a copy into the lake), `partition` (stage 2: a partition through the
single-host ingest), `tables` (network evidence: partials per partition, reduced with the same statistics),
`cluster` (the only module that imports Dask, an optional extra: `pip install gonka-evidence[network]`),
`jobs` (the network jobs the facade calls: the lake ingest with its path checks, a network table with its
chart, the lake's quarantine).
"""
