"""Stage 1's files: a large ingest's settled rows staged beside the warehouse, then written once.

A full ingest (or a delta of more than STAGE_MIN_DIFFS new diffs, pipeline/ingest/store.py) reads,
decodes and settles its chunks as always, but instead of writing each chunk into the warehouse (the
compression of rows each chunk adds in less than a row group, once per chunk and table: half of a
full ingest's time, bench/BENCHMARKS.md) it appends each relation the chunk's statements read
(`new_diffs`, `new_txs`, `new_sealed`, …) to one Parquet file per relation here. Stage 2 then runs the
same statements once, over views of those files, in one transaction with the derive: a kill in
either stage leaves the chunks' tables as they were, and the next ingest of the warehouse removes
what the killed one staged (`remove_stale`). The directory is removed when the ingest ends, however.

    <warehouse>.ingest-staging/<relation>.parquet     one row group per chunk
    <warehouse>.ingest-staging/stage2                 written when stage 2 begins
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

SUFFIX = ".ingest-staging"
STAGE2_MARK = "stage2"
PROBLEMS = "problems"  # (table_name, row_key, reason) of each chunk, quarantined in stage 2 in chunk order
# Staged for one write: fast to write and read back, a few times smaller than the rows (txs are repetitive).
COMPRESSION = "lz4"


def warehouse_file(con: duckdb.DuckDBPyConnection) -> Path | None:
    """The file of the connection's database, or None for an in-memory one."""
    rows = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchall()
    path = rows[0][0] if rows else None
    return Path(path) if path else None


def staging_dir(con: duckdb.DuckDBPyConnection) -> Path | None:
    """Where the warehouse's ingest stages its rows (None for an in-memory warehouse: a temporary directory)."""
    path = warehouse_file(con)
    return path.with_name(path.name + SUFFIX) if path is not None else None


def remove_stale(con: duckdb.DuckDBPyConnection) -> None:
    """Remove what a killed ingest of this warehouse staged (one writer holds a warehouse at a time)."""
    path = staging_dir(con)
    if path is not None and path.exists():
        shutil.rmtree(path, ignore_errors=True)


class Stager:
    """The staged relations of one ingest: `add` appends a chunk's tables, `view` makes each a DuckDB view."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        remove_stale(con)
        target = staging_dir(con)
        if target is None:
            self.root = Path(tempfile.mkdtemp(prefix="gonka-ingest-staging-"))
        else:
            target.mkdir()
            self.root = target
        self._writers: dict[str, pq.ParquetWriter] = {}
        self.counts: Any = None  # the sum of the chunks' counts (pipeline/ingest/store.py `_Counts`)

    def add_counts(self, counts: Any) -> None:
        if self.counts is None:
            self.counts = type(counts)()
        self.counts.add(counts)

    def add(self, name: str, table: pa.Table | None) -> None:
        """Append `table` (the chunk's rows of relation `name`; every chunk's have one schema) as a row group."""
        if table is None:
            return
        writer = self._writers.get(name)
        if writer is None:
            writer = pq.ParquetWriter(self.root / f"{name}.parquet", table.schema, compression=COMPRESSION)
            self._writers[name] = writer
        elif table.schema != writer.schema:
            table = table.cast(writer.schema)
        writer.write_table(table, row_group_size=max(table.num_rows, 1))

    def finish(self) -> None:
        """Close the files (stage 1 done) and mark stage 2 begun."""
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()
        (self.root / STAGE2_MARK).touch()

    def staged(self, name: str) -> bool:
        return (self.root / f"{name}.parquet").exists()

    def view(self, con: duckdb.DuckDBPyConnection, name: str) -> None:
        """Relation `name` as a temporary view of its staged file (what a chunk registers under that name)."""
        path = str(self.root / f"{name}.parquet").replace("'", "''")
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM read_parquet('{path}')")

    def row_groups(self, name: str) -> Iterator[pa.Table]:
        """The staged file's row groups in order: each chunk's rows of relation `name`."""
        if not self.staged(name):
            return
        file = pq.ParquetFile(self.root / f"{name}.parquet")
        try:
            for i in range(file.num_row_groups):
                yield file.read_row_group(i)
        finally:
            file.close()

    def close(self) -> None:
        """Remove the staged files (the ingest ended, committed or not)."""
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()
        shutil.rmtree(self.root, ignore_errors=True)
