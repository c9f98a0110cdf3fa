"""The kinds of `[[sources]]` entry a run ingests: one registry entry per kind.

A kind names the module function that ingests one configured entry (``"module:function"``,
imported only when a source of that kind is ingested, so reading a config stays cheap) and,
optionally, how an entry without ``kind = …`` is recognised. The config reader checks kinds
against this registry and `run` dispatches through it; the README's source table lists it.

Adding a source kind: write its module (it reads the source and yields Arrow/Polars data; the
pipeline's `loading.ingest_run` records the run, its rows and its quarantine), give it an
``ingest_source(con, source, cfg)`` function, and add one `SourceKind` below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

# (con, source entry, run config) -> the kind's ingest summary (printed by the ingester itself).
SourceIngester = Callable[[Any, dict, Any], object]


def _is_postgres_entry(entry: dict) -> bool:
    return "url" in entry


def _is_store_directory(entry: dict) -> bool:
    if "path" not in entry:
        return False
    path = Path(entry["path"])
    return (path / "_meta.db").exists() or any(path.glob("epoch_*.db"))


def _is_json_directory(entry: dict) -> bool:
    if "path" not in entry:
        return False
    path = Path(entry["path"])
    return path.is_dir() and any(path.glob("*.json"))


@dataclass(frozen=True)
class SourceKind:
    name: str
    summary: str  # one line for the docs and error messages
    ingester: str  # "module:function", imported when a source of this kind is ingested
    recognises: Callable[[dict], bool] | None = None  # detects an entry given without `kind`

    def ingest(self, con, source: dict, cfg) -> object:
        module, function = self.ingester.split(":")
        ingest: SourceIngester = getattr(import_module(module), function)
        return ingest(con, source, cfg)


SOURCE_KINDS: dict[str, SourceKind] = {
    kind.name: kind
    for kind in (
        SourceKind(
            "store",
            "a SQLite store directory (_meta.db + epoch_<N>.db, optional accounting.db, payloads/)",
            "pipeline.ingest.copies:ingest_store_source",
            _is_store_directory,
        ),
        SourceKind(
            "postgres",
            "a PostgreSQL copy (`url`: postgresql://… or `postgres` for libpq's environment)",
            "pipeline.ingest.copies:ingest_store_source",
            _is_postgres_entry,
        ),
        SourceKind("vllm", "vLLM server logs of the configured host", "pipeline.ingest.logs:ingest_log_source"),
        SourceKind(
            "validator", "validator (dapi) logs of the configured host", "pipeline.ingest.logs:ingest_log_source"
        ),
        SourceKind("poc", "PoC validation results of the configured host", "pipeline.ingest.logs:ingest_log_source"),
        SourceKind("metrics", "vLLM /metrics scrapes of the configured host", "pipeline.ingest.logs:ingest_log_source"),
        SourceKind(
            "json",
            "saved accounting-API / chain REST responses (*.json)",
            "pipeline.ingest.json_responses:ingest_json_source",
            _is_json_directory,
        ),
    )
}


def kind_of(entry: dict) -> SourceKind | None:
    """The kind of a `[[sources]]` entry: as given, else the first kind that recognises it."""
    if entry.get("kind"):
        return SOURCE_KINDS.get(entry["kind"])
    return next((kind for kind in SOURCE_KINDS.values() if kind.recognises and kind.recognises(entry)), None)
