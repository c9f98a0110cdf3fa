"""Content digests of ingest inputs: what a run read, identified by content, not by where it lay.

- A SQLite store directory: sha256 over every file the ingest may read (epoch files, `_meta.db`,
  `accounting.db`, payloads, WAL files), in the order of their paths relative to the store, each
  as ``path, size, bytes``. The files are only read. `-shm` files are skipped: they are SQLite's
  shared-memory index, not content.
- A PostgreSQL snapshot: sha256 over the rows the run read, in the order it read them. Each Arrow
  batch is hashed row by row (DuckDB renders each row as text; md5 of that text feeds the sha256),
  so the digest does not depend on where batches happen to split.

Both are "sha256:<64 hex>"; two machines holding the same copy compute the same digest.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import duckdb
import pyarrow as pa

PREFIX = "sha256:"
BLOCK = 1 << 20


def tree_digest(root: Path) -> str:
    """The digest of the files below ``root`` (see the module docstring)."""
    digest = hashlib.sha256()
    files = sorted((p for p in Path(root).rglob("*") if p.is_file() and not p.name.endswith("-shm")),
                   key=lambda p: p.relative_to(root).as_posix())
    for file in files:
        digest.update(f"{file.relative_to(root).as_posix()}\0{file.stat().st_size}\0".encode())
        with open(file, "rb") as handle:
            while block := handle.read(BLOCK):
                digest.update(block)
    return PREFIX + digest.hexdigest()


class RowDigest:
    """A running sha256 over Arrow batches, row by row, each batch under the name it was read as."""

    def __init__(self) -> None:
        self._digest = hashlib.sha256()
        self._con = duckdb.connect()  # private, in memory: renders rows, touches no warehouse

    def update(self, name: str, batch: pa.RecordBatch) -> None:
        self._digest.update(f"{name}\0{batch.num_rows}\0".encode())
        if batch.num_rows == 0:
            return
        self._con.register("batch", batch)
        try:
            rows = self._con.execute("SELECT md5(CAST(b AS VARCHAR)) FROM batch AS b").fetchall()
        finally:
            self._con.unregister("batch")
        self._digest.update("".join(r[0] for r in rows).encode())

    def hexdigest(self) -> str:
        return PREFIX + self._digest.hexdigest()

    def close(self) -> None:
        self._con.close()


class DigestingStore:
    """A session store whose reads also feed a `RowDigest`; everything else is the store's own."""

    def __init__(self, store: Any, digest: RowDigest):
        self._store = store
        self.digest = digest

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def _hashed(self, name: str, batches) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            self.digest.update(name, batch)
            yield batch

    def read(self, table: str, epoch_id: int | None, *args: Any, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        return self._hashed(f"{table}/{epoch_id}", self._store.read(table, epoch_id, *args, **kwargs))

    def query_batches(self, sql: str, *args: Any, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        return self._hashed(sql, self._store.query_batches(sql, *args, **kwargs))

    @contextmanager
    def read_many(self, requests, *args: Any, **kwargs: Any):
        # The streams are consumed one after another by the ingest, so hashing them in
        # request order is reading order.
        with self._store.read_many(requests, *args, **kwargs) as streams:
            yield [self._hashed(f"{t}/{e}", s) for (t, e, _), s in zip(requests, streams)]


def input_digest_before(store: Any) -> str | None:
    """The digest of a copy that can be known before reading it: a SQLite store's files."""
    return tree_digest(store.path) if getattr(store, "kind", None) == "sqlite" else None
