"""The host build timeline (`builds.toml`): which build each host ran from when.

Each entry lasts until the same host's next entry (design.md §4). Loading a file
replaces the whole timeline in one transaction; the public views pick it up at
once through their as-of joins.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import duckdb
import polars as pl

from pipeline.tomlfile import read_toml
from pipeline.transforms.derive import attribute_builds
from pipeline.warehouse import transaction


class BuildsError(Exception):
    """A builds file that cannot be used; one-line message."""


def read_builds(path: Path) -> pl.DataFrame:
    doc = read_toml(path, BuildsError)
    entries = doc.get("builds")
    if not isinstance(entries, list) or not entries:
        raise BuildsError(f"{path}: no [[builds]] entries")
    rows = []
    for i, entry in enumerate(entries, 1):
        missing = [k for k in ("host", "label", "since") if k not in entry]
        if missing:
            raise BuildsError(f"{path}: entry {i} lacks {', '.join(missing)}")
        rows.append({"host": str(entry["host"]), "build": str(entry["label"]), "valid_from": _utc(entry["since"], path, i)})
    frame = pl.DataFrame(rows, schema={"host": pl.String, "build": pl.String, "valid_from": pl.Datetime("us", "UTC")})
    dupes = frame.filter(pl.struct("host", "valid_from").is_duplicated())
    if dupes.height:
        raise BuildsError(f"{path}: two entries for {dupes['host'][0]} start at the same time")
    return frame.sort("host", "valid_from").with_columns(valid_to=pl.col("valid_from").shift(-1).over("host"))


def _utc(value, path: Path, i: int) -> datetime:
    if isinstance(value, datetime):
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise BuildsError(f"{path}: entry {i} has since = {value!r}, not an ISO-8601 time") from None
    return parsed.replace(tzinfo=timezone.utc) if parsed.tzinfo is None else parsed.astimezone(timezone.utc)


def load_builds(con: duckdb.DuckDBPyConnection, path: Path) -> int:
    frame = read_builds(path)
    with transaction(con):
        con.execute("DELETE FROM host_builds_t")
        con.register("new_builds", frame.to_arrow())
        con.execute("INSERT INTO host_builds_t BY NAME (SELECT * FROM new_builds)")
        con.unregister("new_builds")
        attribute_builds(con, "d_escrows")
    return frame.height
