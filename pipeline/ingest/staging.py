"""Stage 1's files: a large ingest's settled rows staged beside the warehouse, then written once.

A full ingest (or a delta of more than STAGE_MIN_DIFFS new diffs, pipeline/ingest/store.py) reads,
decodes and settles its chunks as always, but instead of writing each chunk into the warehouse (the
compression of rows each chunk adds in less than a row group, once per chunk and table: half of a
full ingest's time, bench/BENCHMARKS.md) it appends each relation the chunk's statements read
(`new_diffs`, `new_txs`, `new_sealed`, …) to one Parquet file per relation here. Stage 2 then runs the
same statements once per part (STAGE_PART_DIFFS diffs), over views of those files, each part in one
transaction with its derive: a kill leaves whole parts (the next run continues from the cursors), and
the next ingest of the warehouse removes what the killed one staged (`remove_stale`). The directory
is removed when the ingest ends, however.

    <warehouse>.ingest-staging/part-N/<relation>.parquet     one row group per chunk
    <warehouse>.ingest-staging/stage2                        written when stage 2 begins
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

from pipeline.core.sqlnames import quote_string

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
    """The staged relations of one ingest, in parts: `add` appends a chunk's tables to the current part,
    `next_part` starts another; stage 2 writes each part in one transaction (`view` makes its files views)."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        remove_stale(con)
        target = staging_dir(con)
        if target is None:
            self.root = Path(tempfile.mkdtemp(prefix="gonka-ingest-staging-"))
        else:
            target.mkdir()
            self.root = target
        self._writers: dict[str, pq.ParquetWriter] = {}
        self.parts: list[Path] = []
        self._new_part = True
        self.counts: list[Any] = []  # per part, the sum of its chunks' counts (pipeline/ingest/store.py `_Counts`)

    def _part(self) -> Path:
        """The part being written (the first `add` after `next_part` starts one)."""
        if self._new_part:
            self.parts.append(self.root / f"part-{len(self.parts)}")
            self.parts[-1].mkdir()
            self.counts.append(None)
            self._new_part = False
        return self.parts[-1]

    def add(self, name: str, table: pa.Table | None) -> None:
        """Append `table` (the chunk's rows of relation `name`; every chunk's have one schema) as a row group."""
        if table is None:
            return
        part = self._part()
        writer = self._writers.get(name)
        if writer is None:
            writer = pq.ParquetWriter(part / f"{name}.parquet", table.schema, compression=COMPRESSION)
            self._writers[name] = writer
        elif table.schema != writer.schema:
            table = table.cast(writer.schema)
        writer.write_table(table, row_group_size=max(table.num_rows, 1))

    def add_counts(self, counts: Any) -> None:
        self._part()
        if self.counts[-1] is None:
            self.counts[-1] = type(counts)()
        self.counts[-1].add(counts)

    def next_part(self) -> None:
        """Close the current part: the next chunk starts another."""
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()
        self._new_part = True

    def finish(self) -> None:
        """Close the files (stage 1 done) and mark stage 2 begun."""
        self.next_part()
        (self.root / STAGE2_MARK).touch()

    def staged(self, part: int, name: str) -> bool:
        return (self.parts[part] / f"{name}.parquet").exists()

    def view(self, con: duckdb.DuckDBPyConnection, part: int, name: str) -> None:
        """Relation `name` as a temporary view of the part's file (what a chunk registers under that name)."""
        path = quote_string(str(self.parts[part] / f"{name}.parquet"))
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM read_parquet({path})")

    def row_groups(self, part: int, name: str) -> Iterator[pa.Table]:
        """The part's file's row groups in order: each chunk's rows of relation `name`."""
        if not self.staged(part, name):
            return
        file = pq.ParquetFile(self.parts[part] / f"{name}.parquet")
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
