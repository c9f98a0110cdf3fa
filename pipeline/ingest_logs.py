"""Ingest engine and validator logs, /metrics scrapes and PoC results for one host.

    from pipeline.ingest_logs import ingest_logs
    summary = ingest_logs(con, ["logs/"], host="gonka1…", kind=None, year=None)

Small files (validator logs, scrapes, PoC results) are one transaction each. vLLM logs
stream: each chunk's rows and unparsed lines (quarantine) commit as they are parsed
(`pipeline.sources.vllm_logs.iter_vllm_batches`), so neither the parser's nor DuckDB's
memory grows with the file, and the file's coverage row in ``log_files`` commits last.
Rows are inserted with ``INSERT OR IGNORE`` on their natural keys (see
``sql/warehouse/schema/30_logs.sql``), so re-ingesting a file, its rotated or
gzipped twin, or a longer version of it adds only what is new. The run is a row
in ``ingest_runs`` (source id ``logs:<host>``) with the rows added per table.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import polars as pl

from pipeline import __version__
from pipeline.loading import derived_run_id
from pipeline.sources.base import SourceError
from pipeline.sources.logfiles import KINDS, LogFile, detect_kind, expand
from pipeline.sources.metrics_scrapes import parse_scrape
from pipeline.sources.poc_results import parse_poc
from pipeline.sources.validator_logs import parse_validator_log
from pipeline.sources.vllm_logs import VllmStream, iter_vllm_batches
from pipeline.warehouse import duckdb_setting, transaction

TS = pl.Datetime("us", "UTC")
SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "log_spec_decode": {
        "host": pl.String, "record_key": pl.String, "at": TS, "accepted": pl.Int64, "drafted": pl.Int64,
        "drafts": pl.Int64, "per_position": pl.List(pl.Float64), "mal_printed": pl.Float64,
        "mal_semantics": pl.String, "accepted_tps": pl.Float64, "drafted_tps": pl.Float64,
        "acceptance_rate_printed": pl.Float64, "level": pl.String, "proc": pl.String, "file_id": pl.String,
        "line": pl.Int64, "run_id": pl.String,
    },
    "log_engine_stats": {
        "host": pl.String, "record_key": pl.String, "at": TS, "engine": pl.String, "running": pl.Int64,
        "waiting": pl.Int64, "preemptions": pl.Int64, "kv_cache_usage": pl.Float64,
        "prefix_cache_hit_rate": pl.Float64, "prompt_tps": pl.Float64, "generation_tps": pl.Float64,
        "level": pl.String, "proc": pl.String, "file_id": pl.String, "line": pl.Int64, "run_id": pl.String,
    },
    "log_engine_events": {
        "host": pl.String, "record_key": pl.String, "kind": pl.String, "at": TS, "detail": pl.String,
        "level": pl.String, "proc": pl.String, "file_id": pl.String, "line": pl.Int64, "run_id": pl.String,
    },
    "metric_samples": {
        "host": pl.String, "scraped_at": TS, "family": pl.String, "engine": pl.String, "model_name": pl.String,
        "position": pl.String, "value": pl.Float64, "run_id": pl.String,
    },
    "log_validation_scores": {
        "validator": pl.String, "record_key": pl.String, "at": TS, "result": pl.String, "value": pl.Float64,
        "threshold": pl.Float64, "escrow_id": pl.String, "inference_id": pl.String, "executor": pl.String,
        "model": pl.String, "file_id": pl.String, "line": pl.Int64, "run_id": pl.String,
    },
    "poc_results_t": {
        "host": pl.String, "result_key": pl.String, "at": TS, "request_id": pl.String, "validator": pl.String,
        "participant": pl.String, "model": pl.String, "event": pl.String, "n_total": pl.Int64,
        "n_mismatch": pl.Int64, "reported_p_value": pl.Float64, "reported_fraud": pl.Boolean,
        "dist_threshold": pl.Float64, "p_mismatch": pl.Float64, "cutoff": pl.Float64, "params_source": pl.String,
        "p_value": pl.Float64, "fraud": pl.Boolean, "file": pl.String, "run_id": pl.String,
    },
}
QUARANTINE_TABLE = {"vllm": "vllm_log", "validator": "validator_log", "metrics": "metrics_scrape", "poc": "poc_result"}


@dataclass
class LogIngestSummary:
    run_id: str
    host: str
    files: int = 0
    kinds: dict[str, int] = field(default_factory=dict)  # files per kind
    rows: dict[str, int] = field(default_factory=dict)  # rows added per table (0 on a re-ingest)
    lines: int = 0
    unparsed: int = 0  # lines no parser understood in this run (each also in quarantine)
    elapsed_s: float = 0.0

    def add(self, table: str, n: int) -> None:
        self.rows[table] = self.rows.get(table, 0) + n


def ingest_logs(
    con: duckdb.DuckDBPyConnection,
    paths: list[Path | str],
    host: str,
    kind: str | None = None,
    year: int | None = None,
) -> LogIngestSummary:
    """Ingest files and directories of one host; ``kind`` None = detected per file."""
    if not host or not host.strip():
        raise SourceError("ingest-logs needs --host ADDR (the host the logs belong to)")
    if kind is not None and kind not in KINDS:
        raise SourceError(f"unknown --kind {kind!r}; choose one of {', '.join(KINDS)}")
    if year is not None and not 1970 <= year <= 9999:
        raise SourceError(f"--year {year} is not a plausible year")
    files = expand(paths)
    started = time.monotonic()
    source_id = f"logs:{host}"
    run_id = derived_run_id(con, source_id, "logs")
    summary = LogIngestSummary(run_id=run_id, host=host)
    with transaction(con):
        con.execute(
            "INSERT INTO ingest_runs (run_id, source_id, source_kind, source_display, started_at, status, pipeline_version) "
            "VALUES (?, ?, 'logs', ?, now(), 'running', ?)",
            [run_id, source_id, ", ".join(str(p) for p in paths), __version__],
        )
    status, copy_at = "failed", None
    try:
        # Log rows commit per chunk (~32 MB of log each); at DuckDB's default 16MB WAL threshold every
        # commit also checkpointed, a third of a large file's ingest time. Checkpoint every 256MB of WAL
        # instead (peak RSS unchanged at 1 GB of log, bench/BENCHMARKS.md).
        with duckdb_setting(con, "checkpoint_threshold", "256MB"):
            for file in files:
                file_kind = kind or detect_kind(file)
                last = _ingest_file(con, file, file_kind, host, year, run_id, summary)
                copy_at = max(copy_at, last) if copy_at and last else (last or copy_at)
        status = "ok"
    finally:
        summary.elapsed_s = time.monotonic() - started
        with transaction(con):
            con.execute(
                "UPDATE ingest_runs SET finished_at = now(), status = ?, rows = ?, copy_at = ? WHERE run_id = ?",
                [status, json.dumps(summary.rows | {"unparsed": summary.unparsed, "files": summary.files}), copy_at, run_id],
            )
    return summary


def _insert(con, table: str, frame: pl.DataFrame) -> int:
    con.register("new_log_rows", frame.to_arrow())
    try:
        return int(con.execute(f"INSERT OR IGNORE INTO {table} BY NAME (SELECT * FROM new_log_rows)").fetchone()[0])
    finally:
        con.unregister("new_log_rows")


def _quarantine_frame(run_id: str, host: str, file_id: str, kind: str, file: LogFile, unparsed: pl.DataFrame) -> pl.DataFrame:
    return unparsed.select(
        run_id=pl.lit(run_id), source_id=pl.lit(f"logs:{host}:{file_id}"), table_name=pl.lit(QUARANTINE_TABLE[kind]),
        row_key=pl.col("record_key"),
        reason=pl.format("unparsed line {} of {}: {}", pl.col("line"), pl.lit(file.path.name), pl.col("text").str.slice(0, 300)),
    )


def _ingest_vllm(con, file: LogFile, host: str, year: int | None, run_id: str, summary: LogIngestSummary):
    """Stream the file: each chunk's rows go in as parsed, inside the file's one transaction."""
    file_id = file.identity()
    stream = VllmStream(year)
    added = {"log_spec_decode": 0, "log_engine_stats": 0, "log_engine_events": 0}
    extra = {"host": host, "file_id": file_id, "run_id": run_id}
    for batch in iter_vllm_batches(file, year, stream):
        # One transaction per chunk keeps DuckDB's memory bounded by the chunk, not the file;
        # keys are stable, so a re-run after an interruption adds exactly the missing rows.
        with transaction(con):
            for table, frame in (("log_spec_decode", batch.spec), ("log_engine_stats", batch.stats),
                                 ("log_engine_events", batch.events)):
                if frame.height:
                    frame = frame.with_columns(**{k: pl.lit(v) for k, v in extra.items()}).select(
                        [pl.col(c).cast(t) for c, t in SCHEMAS[table].items()])
                    added[table] += _insert(con, table, frame)
            if batch.unparsed.height:
                bad = _quarantine_frame(run_id, host, file_id, "vllm", file, batch.unparsed)
                con.register("new_quarantine", bad.to_arrow())
                con.execute("INSERT OR IGNORE INTO quarantine BY NAME (SELECT * FROM new_quarantine)")
                con.unregister("new_quarantine")
    # The coverage row is written last: a file is only listed as ingested once all its chunks are in.
    first, last = stream.at(stream.first), stream.at(stream.last)
    with transaction(con):
        _log_file_row(con, host, file_id, "vllm", file, first, last, stream.lines, stream.records, stream.unparsed, run_id)
    for table, n in added.items():
        summary.add(table, n)
    summary.files += 1
    summary.kinds["vllm"] = summary.kinds.get("vllm", 0) + 1
    summary.lines += stream.lines
    summary.unparsed += stream.unparsed
    return last


def _log_file_row(con, host, file_id, kind, file, first, last, lines, records, unparsed, run_id) -> None:
    con.execute(
        """INSERT INTO log_files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (host, file_id, kind) DO UPDATE SET
             path = excluded.path, first_at = least(log_files.first_at, excluded.first_at),
             last_at = greatest(log_files.last_at, excluded.last_at), lines = greatest(log_files.lines, excluded.lines),
             records = greatest(log_files.records, excluded.records),
             unparsed = greatest(log_files.unparsed, excluded.unparsed), run_id = excluded.run_id""",
        [host, file_id, kind, str(file.path), first, last, lines, records, unparsed, run_id],
    )


def _ingest_file(con, file: LogFile, kind: str, host: str, year: int | None, run_id: str, summary: LogIngestSummary):
    if kind == "vllm":
        return _ingest_vllm(con, file, host, year, run_id, summary)
    file_id = file.identity()
    tables: dict[str, list[dict]] = {}
    base = {"run_id": run_id, "file_id": file_id}
    if kind == "validator":
        parsed = parse_validator_log(file, host)
        tables["log_validation_scores"] = [{**r, **base} for r in parsed.scores]
        first, last, records = parsed.first_at, parsed.last_at, len(parsed.scores)
    elif kind == "metrics":
        parsed = parse_scrape(file)
        tables["metric_samples"] = [{**r, "host": host, "run_id": run_id} for r in parsed.samples]
        at = parsed.samples[0]["scraped_at"] if parsed.samples else None
        first, last, records = at, at, len(parsed.samples)
        file_id = f"scrape@{at.isoformat()}" if at else file_id
    else:
        parsed = parse_poc(file, host)
        tables["poc_results_t"] = [{**r, "file": str(file.path), "run_id": run_id} for r in parsed.results]
        times = [r["at"] for r in parsed.results]
        first, last, records = (min(times), max(times), len(times)) if times else (None, None, 0)
    bad = pl.DataFrame(
        [{"run_id": run_id, "source_id": f"logs:{host}:{file_id}", "table_name": QUARANTINE_TABLE[kind],
          "row_key": key, "reason": f"unparsed line {number} of {file.path.name}: {text[:300]}"}
         for number, key, text in parsed.unparsed],
        schema={"run_id": pl.String, "source_id": pl.String, "table_name": pl.String, "row_key": pl.String,
                "reason": pl.String},
    )
    with transaction(con):
        for table, rows in tables.items():
            frame = pl.DataFrame(rows, schema=SCHEMAS[table]) if rows else pl.DataFrame(schema=SCHEMAS[table])
            summary.add(table, _insert(con, table, frame))
        if bad.height:
            con.register("new_quarantine", bad.to_arrow())
            con.execute("INSERT OR IGNORE INTO quarantine BY NAME (SELECT * FROM new_quarantine)")
            con.unregister("new_quarantine")
        _log_file_row(con, host, file_id, kind, file, first, last, parsed.lines, records, len(parsed.unparsed), run_id)
    summary.files += 1
    summary.kinds[kind] = summary.kinds.get(kind, 0) + 1
    summary.lines += parsed.lines
    summary.unparsed += len(parsed.unparsed)
    return last
