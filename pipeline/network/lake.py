"""The lake: many hosts' copies as Hive-partitioned Parquet, one file per copy and partition.

Layout below the lake directory:

    _lake.json                                  {"format": 1, "buckets": N}
    _copies/<copy_id>.json                      one manifest per copy: label, source, input digest, its files
    <table>/epoch=E/bucket=B/<copy_id>-<gen>.parquet   a copy's raw rows of one partition
    _partitions/epoch=E/bucket=B.duckdb         the partition warehouse (pipeline/network/partition.py)
    _partitions/epoch=E/bucket=B.json           what it was built from, and what it found
    _tmp/                                       files being written (moved into place by rename)

The bucket is a stable hash of the escrow id (md5, not Python's or an engine's own hash), so every
copy of an escrow lands in the same partition. Diff rows carry `diff_digest` (md5 of `txs_proto`),
so duplicates across copies are dropped before any decoding.

A copy's files are named by a generation; its manifest, written last by rename, names the files of
its current generation, and readers read only those. Re-running a copy writes a new generation,
switches the manifest, then deletes the old generation's files: a killed run leaves the previous
generation in force.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.errors import UserError

LAKE_FORMAT = 1
DEFAULT_BUCKETS = 16
# What the lake keeps of a copy: the session store's per-epoch tables, then the escrow cache.
EPOCH_TABLES = (
    "sessions",
    "diffs",
    "sealed_inferences",
    "inference_validation_obs",
    "sealed_validation_obs",
    "snapshots",
)
LAKE_TABLES = (*EPOCH_TABLES, "escrow_cache")
# The rows stage 1's read set aside (table_name, row_key, reason), per partition: its ingest quarantines them.
REJECTED = "rejected"
CACHE_ENTRY = "escrow_cache/all"  # CopyManifest.tables: the copy holds an escrow cache


class LakeError(UserError):
    """A lake that cannot be used as asked; one-line message."""


def bucket_of(escrow_id: str, buckets: int) -> int:
    """The partition bucket of an escrow: the first 8 bytes of md5(escrow id), modulo `buckets`."""
    return int.from_bytes(hashlib.md5(escrow_id.encode()).digest()[:8], "big") % buckets


def write_atomically(path: Path, data: bytes, tmp_dir: Path) -> None:
    """`data` at `path`, written under `tmp_dir` first and moved into place by rename."""
    tmp_dir.mkdir(parents=True, exist_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_dir / f"{path.name}.{uuid.uuid4().hex}.tmp"
    tmp.write_bytes(data)
    os.replace(tmp, path)


@dataclass
class CopyManifest:
    """One copy in the lake: where it came from, what it read, and the files of its current generation."""

    copy_id: str
    label: str
    display: str
    source_id: str
    source_kind: str
    input_digest: str | None
    generation: str
    bytes_read: int = 0  # Arrow bytes of the rows read from the copy
    rows: dict[str, int] = field(default_factory=dict)
    # "<table>/<epoch>": tables the copy holds per epoch (present even when empty), so that a table
    # missing in the copy is told apart from one without rows in a partition.
    tables: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # paths relative to the lake
    # Escrows with session rows in more than one epoch of the copy -> those epochs. All of such an escrow's
    # rows lie in the partition of its first epoch, whose ingest quarantines them as a single warehouse does.
    split_escrows: dict[str, list[int]] = field(default_factory=dict)
    # "<table>/<epoch>" (or CACHE_ENTRY) -> the columns the ingest reads that the copy's table lacks (read as
    # NULL in the files): a partition's ingest names them as a single warehouse's does.
    absent_columns: dict[str, list[str]] = field(default_factory=dict)

    def holds(self, table: str, epoch: int | None) -> bool:
        return (CACHE_ENTRY if epoch is None else f"{table}/{epoch}") in self.tables


class Lake:
    """A lake directory (created on first write with `buckets`)."""

    def __init__(self, root: Path | str, buckets: int | None = None, create: bool = False):
        self.root = Path(root)
        meta = self.root / "_lake.json"
        if self.root.exists() and not self.root.is_dir():
            raise LakeError(f"{self.root}: not a directory; a lake is a directory")
        if meta.exists():
            from pipeline.core.files import FileReadError, read_regular_file

            try:
                stored = json.loads(read_regular_file(meta, 1 << 20))
                stored_format = stored["format"]
                self.buckets = int(stored["buckets"])
            except (ValueError, KeyError, TypeError, FileReadError):
                raise LakeError(f"{meta}: not a gonka-evidence lake description") from None
            _refuse_newer(stored_format, self.root)
            if buckets is not None and buckets != self.buckets:
                raise LakeError(
                    f"{self.root}: the lake has {self.buckets} buckets, not {buckets} (a new lake directory changes it)"
                )
        elif create:
            self.buckets = buckets or DEFAULT_BUCKETS
            if self.buckets < 1:
                raise LakeError("--buckets must be at least 1")
            write_atomically(
                meta, json.dumps({"format": LAKE_FORMAT, "buckets": self.buckets}).encode(), self.root / "_tmp"
            )
        else:
            raise LakeError(f"{self.root}: no lake here yet (run `gonka-evidence network ingest COPY… --lake DIR`)")

    @contextlib.contextmanager
    def writer(self) -> Iterator[None]:
        """Hold the lake's single-writer lock for the block; a second writer gets a one-line LakeError
        naming the first (its process id and command), never a clash of their files."""
        path = self.root / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "another process"
                raise LakeError(
                    f"{self.root}: the lake is in use by another gonka-evidence writer ({holder}); "
                    "try again when it ends"
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}: {' '.join(_command_line())}".encode(), 0)
            try:
                yield
            finally:
                os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing releases the lock

    @property
    def tmp(self) -> Path:
        return self.root / "_tmp"

    def manifest_path(self, copy_id: str) -> Path:
        return self.root / "_copies" / f"{copy_id}.json"

    def manifests(self) -> list[CopyManifest]:
        """Every copy in the lake, by label then id (the order partitions ingest them in, ties aside)."""
        found = []
        for path in sorted((self.root / "_copies").glob("*.json")):
            try:
                found.append(CopyManifest(**json.loads(path.read_text(encoding="utf-8"))))
            except (ValueError, TypeError) as exc:
                raise LakeError(f"{path}: not a copy manifest ({exc})") from None
        return sorted(found, key=lambda m: (m.label, m.copy_id))

    def save_manifest(self, manifest: CopyManifest) -> None:
        write_atomically(
            self.manifest_path(manifest.copy_id), json.dumps(asdict(manifest), indent=1).encode(), self.tmp
        )

    def partition_dir(self, table: str, epoch: int, bucket: int) -> Path:
        return self.root / table / f"epoch={epoch}" / f"bucket={bucket}"

    def partitions(self) -> list[tuple[int, int]]:
        """Every (epoch, bucket) holding rows of some copy's current generation: of any table, so that rows
        no session claims (their sessions all set aside, or absent) are quarantined as a warehouse does."""
        return sorted({_partition_of(file) for manifest in self.manifests() for file in manifest.files})

    def epochs(self) -> list[int]:
        """The epochs holding sessions of some copy's current generation: a warehouse's held epochs (its escrows')."""
        return sorted({_partition_of(f)[0] for m in self.manifests() for f in m.files if f.startswith("sessions/")})

    def partition_bytes(self) -> dict[tuple[int, int], int]:
        """The bytes of every (epoch, bucket)'s Parquet files, all copies and tables: what its stage-2 task
        reads (`PartitionBuilt.bytes_read`), known from one stat per file."""
        sizes: dict[tuple[int, int], int] = {}
        for manifest in self.manifests():
            for file in manifest.files:
                key = _partition_of(file)
                sizes[key] = sizes.get(key, 0) + (self.root / file).stat().st_size
        return sizes

    def files(self, manifest: CopyManifest, table: str, epoch: int, bucket: int) -> list[Path]:
        prefix = f"{table}/epoch={epoch}/bucket={bucket}/"
        return [self.root / f for f in manifest.files if f.startswith(prefix)]

    def warehouse_path(self, epoch: int, bucket: int) -> Path:
        return self.root / "_partitions" / f"epoch={epoch}" / f"bucket={bucket}.duckdb"

    def partition_info_path(self, epoch: int, bucket: int) -> Path:
        return self.warehouse_path(epoch, bucket).with_suffix(".json")

    def partition_info(self, epoch: int, bucket: int) -> dict[str, Any] | None:
        path = self.partition_info_path(epoch, bucket)
        if not path.exists() or not self.warehouse_path(epoch, bucket).exists():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            return None

    def fingerprint(self, epoch: int, bucket: int) -> list[str]:
        """What a partition is built from: each copy's id and generation holding rows in it."""
        return [
            f"{m.copy_id}:{m.generation}" for m in self.manifests() if (epoch, bucket) in map(_partition_of, m.files)
        ]

    def stale_files(self, copy_id: str) -> Iterator[Path]:
        """The copy's Parquet files its manifest does not name (an older generation, or a killed run's)."""
        named = {self.root / f for m in self.manifests() if m.copy_id == copy_id for f in m.files}
        for table in (*LAKE_TABLES, REJECTED):
            for path in (self.root / table).glob(f"epoch=*/bucket=*/{copy_id}-*.parquet"):
                if path not in named:
                    yield path


LOCK_FILE = "_lake.lock"


def _partition_of(file: str) -> tuple[int, int]:
    """(epoch, bucket) of a manifest's file, ``<table>/epoch=E/bucket=B/<name>``."""
    _, epoch, bucket, _ = Path(file).parts
    return int(epoch.split("=")[1]), int(bucket.split("=")[1])


def _command_line() -> list[str]:
    import sys

    from pipeline.core.secrets import redact_url

    return ["gonka-evidence", *(redact_url(a) for a in sys.argv[1:])]


def _refuse_newer(stored: object, root: Path) -> None:
    """A lake of a newer format than this release writes, or of an unreadable one, is never used."""
    if isinstance(stored, bool) or not isinstance(stored, int):
        raise LakeError(f"{root}: the lake's format {stored!r} is not a number; this release uses format {LAKE_FORMAT}")
    if stored > LAKE_FORMAT:
        raise LakeError(
            f"{root}: written by a newer release (lake format {stored}); this release uses format {LAKE_FORMAT}: "
            "upgrade gonka-evidence"
        )


def copy_id_of(key: str) -> str:
    """A copy's id in the lake: the same copy (path or URL as named) keeps it across re-runs."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]
