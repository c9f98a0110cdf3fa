"""SQLite layout (docs/sources.md, SQLite layout): `_meta.db`, one `epoch_<N>.db` per epoch, payload files."""

from __future__ import annotations

import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import zstandard

from pipeline.core.paths import sql_text

from .payloads import payload_file
from .release_lines import (
    EPOCH_TABLES,
    PRE_SQUASH_MISSING_SEALED,
    SQLITE_META,
    SQLITE_OLD_EPOCH,
    SQLITE_PRE_SQUASH_EPOCH,
)
from .spec import CALENDAR_START

if TYPE_CHECKING:  # the copy calls its writers: a type-only import, not a cycle
    from .host_copy import HostCopy


def _open(path: Path, ddl: str) -> sqlite3.Connection:
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=DELETE")  # no -wal/-shm files left beside the copy
    connection.executescript(ddl)
    return connection


def _insert(connection: sqlite3.Connection, table: str, rows: list[dict]) -> None:
    if not rows:
        return
    present = {info[1] for info in connection.execute(f"PRAGMA table_info({table})")}
    columns = [c for c in rows[0] if c in present]
    placeholders = ", ".join(f":{c}" for c in columns)
    connection.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders})", rows)


def _migrations(connection: sqlite3.Connection, steps, applied_at: int) -> None:
    stamp = datetime.fromtimestamp(applied_at, UTC).strftime("%Y-%m-%d %H:%M:%S")
    connection.executemany(
        "INSERT INTO schema_migrations (id, name, applied_at) VALUES (?, ?, ?)",
        [(step, name, stamp) for step, name in steps],
    )


def write_store(copy: HostCopy, store: Path, payloads: bool = True) -> Path:
    """Write the copy as a devshardd SQLite store directory, replacing an earlier one there; without
    `payloads`, no payloads/ folder (the stored request and response bodies)."""
    store.mkdir(parents=True, exist_ok=True)
    for old in [*store.glob("_meta.db*"), *store.glob("epoch_*.db*")]:
        old.unlink()
    shutil.rmtree(store / "payloads", ignore_errors=True)

    with _open(store / "_meta.db", sql_text("upstream/sqlite_meta.sql")) as meta:
        cached = "devshard_escrow_cache" not in copy.release_line.tables_absent  # lines before the escrow cache
        _migrations(meta, SQLITE_META if cached else SQLITE_META[:3], CALENDAR_START - 30 * 86400)
        _insert(meta, "escrow_epoch", copy.tables["escrow_epoch"])
        if cached:
            _insert(meta, "escrow_cache", copy.tables["escrow_cache"])
        else:
            meta.execute("DROP TABLE escrow_cache")
    meta.close()

    for epoch, narrow in copy.epochs.items():
        ddl = sql_text("upstream/sqlite_epoch_narrow.sql" if narrow else "upstream/sqlite_epoch.sql")
        with _open(store / f"epoch_{epoch}.db", ddl) as db:
            first_open = min(r["cached_at"] for r in copy.tables["escrow_cache"] if r["epoch_id"] == epoch)
            steps = SQLITE_OLD_EPOCH if narrow else copy.release_line.sqlite_epoch_migrations
            _migrations(db, steps, first_open)
            if not narrow and not copy.release_line.imports:  # only import-capable lines have the column
                db.execute("ALTER TABLE sessions DROP COLUMN imported_nonce")
            if steps == SQLITE_PRE_SQUASH_EPOCH:
                for column in PRE_SQUASH_MISSING_SEALED:
                    db.execute(f"ALTER TABLE sealed_inferences DROP COLUMN {column}")
            for table in EPOCH_TABLES:
                rows = [r for r in copy.tables[table] if r["epoch_id"] == epoch]
                if rows and not db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone():
                    raise ValueError(f"epoch {epoch}: rows for {table}, which the old schema lacks")
                _insert(db, table, rows)
        db.close()

    first_compressed: set[str] = set()
    for payload in copy.payloads if payloads else ():
        path = store / "payloads" / str(payload["epoch_id"]) / payload["escrow_id"] / f"{payload['inference_id']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = payload_file(payload["prompt_payload"], payload["response_payload"])
        if payload["escrow_id"] in copy.compressed_payloads:
            if payload["escrow_id"] not in first_compressed:  # written before compression was on
                first_compressed.add(payload["escrow_id"])
                path.write_bytes(body)
            path = path.with_name(path.name + ".zst")
            body = zstandard.ZstdCompressor(level=3).compress(body)
        path.write_bytes(body)
    return store
