"""The kinds of source the pipeline ingests: one `SourceKind` per kind, declared once, here.

A kind says what it is (name, one line of summary), which `[[sources]]` keys it reads, which
warehouse tables it fills, how an entry given without ``kind = …`` is recognised, and the
``"module:function"`` that ingests one configured entry. A log kind also says how `ingest-logs`
reads its files (`LogFormat`): how a file of it is recognised and which reader turns a file into
rows. Everything else is derived from this registry: the config's key and kind checks
(`pipeline.jobs.config`), `run`'s dispatch, `ingest-logs --kind` and its detection
(`detect_kind`), and the table of kinds in the docs (`describe_kinds`).

Functions are named as ``"module:function"`` strings, imported only when used, so reading a
config imports no engine (Polars, Arrow, DuckDB).

Adding a kind: its reader in `pipeline/sources/` (for a log kind, a ``read`` function returning
`pipeline.sources.logs.files.LogRecords` and a detector of its files' first lines), one entry in
`SOURCE_KINDS` below, and its test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.sources.logs.files import LogFile

# The keys every [[sources]] entry may carry (exactly one of url and path).
COMMON_KEYS = ("url", "path", "kind", "label")
LOG_INGESTER = "pipeline.ingest.logs:ingest_log_source"
KEYED_FILE_INGESTER = "pipeline.ingest.logs:ingest_keyed_file"


@cache
def resolve(target: str) -> Any:
    """The object a ``"module:function"`` string names (imported on first use)."""
    module, name = target.split(":")
    return getattr(import_module(module), name)


@dataclass(frozen=True)
class LogFormat:
    """How `ingest-logs` reads the files of a log kind."""

    quarantine_table: str  # `quarantine.table_name` of the lines it could not read
    # (head of the file: its first 256 KiB of text) -> bool; None: the kind of a file no detector claims
    detects: str | None = None
    rank: int = 0  # detectors are tried in rank order
    # (LogFile, host) -> LogRecords: the file's rows for the kind's one table, inserted on their keys
    reader: str | None = None
    # (con, run, file, kind, job) -> FileRead: one file's transaction (default: the keyed insert of `reader`)
    ingests: str = KEYED_FILE_INGESTER


@dataclass(frozen=True)
class SourceKind:
    name: str
    summary: str  # one line for the docs, help texts and error messages
    ingester: str  # "module:function" (con, [[sources]] entry, run config) -> the kind's summary
    tables: tuple[str, ...] = ()  # the warehouse tables it fills
    keys: tuple[str, ...] = ()  # [[sources]] keys it reads beyond COMMON_KEYS
    recognises: Callable[[dict], bool] | None = None  # detects an entry given without `kind`
    log: LogFormat | None = None  # a log kind: files read by `ingest-logs`

    def ingest(self, con: Any, source: dict, cfg: Any) -> object:
        return resolve(self.ingester)(con, source, cfg)


def _is_postgres_entry(entry: dict) -> bool:
    """a `url`"""
    return "url" in entry


def _is_store_directory(entry: dict) -> bool:
    """a directory with `_meta.db` or `epoch_<N>.db`"""
    if "path" not in entry:
        return False
    path = Path(entry["path"])
    return (path / "_meta.db").exists() or any(path.glob("epoch_*.db"))


def _is_json_directory(entry: dict) -> bool:
    """a directory of `*.json`"""
    if "path" not in entry:
        return False
    path = Path(entry["path"])
    return path.is_dir() and any(path.glob("*.json"))


STORE_TABLES = (
    "sessions",
    "diffs",
    "txs",
    "sealed_inferences",
    "validation_obs",
    "snapshots",
    "inferences",
    "escrow_cache",
    "ledger_escrows",
    "ledger_counters",
    "answer_checks_t",
)

SOURCE_KINDS: dict[str, SourceKind] = {
    kind.name: kind
    for kind in (
        SourceKind(
            "store",
            "a SQLite store directory (_meta.db + epoch_<N>.db, optional accounting.db, payloads/)",
            "pipeline.ingest.copies:ingest_store_source",
            STORE_TABLES,
            recognises=_is_store_directory,
        ),
        SourceKind(
            "postgres",
            "a PostgreSQL copy (`url`: postgresql://… or `postgres` for libpq's environment)",
            "pipeline.ingest.copies:ingest_store_source",
            STORE_TABLES,
            recognises=_is_postgres_entry,
        ),
        SourceKind(
            "vllm",
            "vLLM server logs of the configured host",
            LOG_INGESTER,
            ("log_spec_decode", "log_engine_stats", "log_engine_events", "log_start_facts"),
            keys=("timezone", "year"),
            log=LogFormat("vllm_log", ingests="pipeline.ingest.logs:ingest_vllm_file"),
        ),
        SourceKind(
            "validator",
            "validator (dapi) logs of the configured host",
            LOG_INGESTER,
            ("log_validation_scores",),
            log=LogFormat(
                "validator_log",
                detects="pipeline.sources.logs.validator:is_validator_log",
                rank=3,
                reader="pipeline.sources.logs.validator:read_validator_log",
            ),
        ),
        SourceKind(
            "poc",
            "PoC validation results of the configured host",
            LOG_INGESTER,
            ("poc_results_t",),
            log=LogFormat(
                "poc_result",
                detects="pipeline.sources.logs.poc:is_poc_result",
                rank=1,
                reader="pipeline.sources.logs.poc:read_poc",
            ),
        ),
        SourceKind(
            "metrics",
            "vLLM /metrics scrapes of the configured host",
            LOG_INGESTER,
            ("metric_samples",),
            log=LogFormat(
                "metrics_scrape",
                detects="pipeline.sources.logs.metrics:is_scrape",
                rank=2,
                reader="pipeline.sources.logs.metrics:read_scrape",
            ),
        ),
        SourceKind(
            "json",
            "saved accounting-API / chain REST responses (*.json)",
            "pipeline.ingest.json_responses:ingest_json_source",
            ("api_participants", "api_counters", "chain_participant_stats"),
            recognises=_is_json_directory,
        ),
    )
}
# Every key a [[sources]] entry may carry: the common ones, then each kind's own.
SOURCE_KEYS = tuple(dict.fromkeys(COMMON_KEYS + tuple(k for kind in SOURCE_KINDS.values() for k in kind.keys)))
LOG_KINDS: dict[str, SourceKind] = {name: kind for name, kind in SOURCE_KINDS.items() if kind.log is not None}


def kind_of(entry: dict) -> SourceKind | None:
    """The kind of a `[[sources]]` entry: as given, else the first kind that recognises it."""
    if entry.get("kind"):
        return SOURCE_KINDS.get(entry["kind"])
    return next((kind for kind in SOURCE_KINDS.values() if kind.recognises and kind.recognises(entry)), None)


def detect_kind(file: LogFile) -> str:
    """The log kind of a file, from its first lines: the first detector (in rank order) that claims
    them, else the kind without a detector (vLLM server logs)."""
    head = file.head()
    formats = sorted((kind.log.rank, name, kind.log.detects) for name, kind in LOG_KINDS.items() if kind.log)
    for _, name, detects in formats:
        if detects is not None and resolve(detects)(head):
            return name
    return next(name for _, name, detects in formats if detects is None)


def log_kind_help() -> str:
    """`ingest-logs --kind`'s choices, for its help text: "vllm, validator, poc or metrics"."""
    names = list(LOG_KINDS)
    return f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]


def describe_kinds() -> list[dict[str, Any]]:
    """Every kind for the docs: name, summary, the [[sources]] keys it reads, the tables it fills,
    whether it is a log kind (read as the configured host's), and how an entry without `kind` is
    recognised (None: `kind` must be given)."""
    return [
        {
            "name": kind.name,
            "summary": kind.summary,
            "keys": COMMON_KEYS + kind.keys,
            "tables": kind.tables,
            "log": kind.log is not None,
            "recognised_by": (kind.recognises.__doc__ or "").strip() or None if kind.recognises else None,
        }
        for kind in SOURCE_KINDS.values()
    ]
