"""Ingest engine and validator logs, /metrics scrapes and PoC results for one host.

    from pipeline.ingest.logs import ingest_logs
    summary = ingest_logs(con, ["logs/"], host="gonka1…", kind=None, year=None, timezone="UTC")

Each file is read as its log kind says (`pipeline.ingest.kinds`: detected from its first lines
unless ``kind`` is given) and is one transaction: its rows, its quarantined lines and its
coverage row in ``log_files`` commit together. A kind with a reader (validator logs, scrapes,
PoC results) is read whole and inserted on its natural keys (`ingest_keyed_file`). vLLM logs
stream (`ingest_vllm_file`): each chunk's rows are appended as they are parsed
(`pipeline.sources.logs.vllm.iter_vllm_batches`), so the parser's memory does not grow with the
file, and the vLLM tables carry no index to maintain per row.

A vLLM record is keyed by (file identity, line): a file read before (same identity in
``log_files``) has its records at the lines read now *replaced*, so a re-ingest with another
``--year`` or ``--timezone`` corrects the times, while a rotated or gzipped twin or a longer
version of the file adds only its new lines. Validator logs, scrapes and PoC results carry
full timestamps and keep ``INSERT OR IGNORE`` on their natural keys
(``sql/warehouse/schema/30_logs.sql``). The run is a row in ``ingest_runs`` (source id
``logs:<host>``, label = the config entry's label, if any, and the time zone the vLLM times were read in).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import duckdb
import polars as pl

from pipeline.core.digest import files_digest, sample_digest
from pipeline.core.events import say
from pipeline.core.limits import PastLimit
from pipeline.core.paths import sql_text
from pipeline.ingest.kinds import LOG_KINDS, SourceKind, detect_kind, resolve
from pipeline.ingest.runs import IngestRun, ingest_run, scalar
from pipeline.sources.errors import SourceError, one_line
from pipeline.sources.logs.files import LogFile, LogRecords, LogTimezone, expand, not_regular
from pipeline.sources.logs.vllm import VllmBatch, VllmStream, iter_vllm_batches
from pipeline.warehouse.database import duckdb_setting, fetch_frame, transaction
from pipeline.warehouse.held import UnheldValue, check_value

VLLM_TABLES = {
    "spec": "log_spec_decode",
    "stats": "log_engine_stats",
    "events": "log_engine_events",
    "startup": "log_start_facts",
}


class FileRead(NamedTuple):
    """What one file's transaction read: its lines, records and unparsed lines, and its last record's time."""

    lines: int
    records: int
    unparsed: int
    last: datetime | None
    undecodable: int = 0  # lines with bytes that are not UTF-8 (vLLM logs: trailing ones dropped, others U+FFFD)


# (con, run, file, kind, job): one file's transaction (a kind's `LogFormat.ingests`)
FileIngester = Callable[[duckdb.DuckDBPyConnection, IngestRun, LogFile, SourceKind, "LogJob"], FileRead]


@dataclass
class LogIngestSummary:
    run_id: str
    host: str
    timezone: str = "UTC"
    files: int = 0
    kinds: dict[str, int] = field(default_factory=dict)  # files per kind
    rows: dict[str, int] = field(default_factory=dict)  # rows added per table (0 on a re-ingest)
    replaced: int = 0  # records of files read before, written again (another --year / --timezone corrects them)
    lines: int = 0
    unparsed: int = 0  # lines no parser understood in this run (each also in quarantine)
    cut: int = 0  # of those, lines past the line limit (pipeline/core/limits.py), cut and not parsed
    undecodable: int = 0  # lines with bytes that are not UTF-8 (counted in the accounting's note)
    unrecognised: list[tuple[str, str]] = field(default_factory=list)  # (file, kind) with lines but 0 records
    # "PATH: reason" of what was named or found and not read: empty files, FIFOs and devices in a directory
    not_read: list[str] = field(default_factory=list)
    vllm_lines_read: dict[str, int] = field(default_factory=dict, repr=False)  # identity -> lines read in this run
    elapsed_s: float = 0.0


@dataclass(frozen=True)
class LogJob:
    """What every file of one `ingest_logs` call is read with."""

    host: str
    year: int | None
    tz: LogTimezone
    summary: LogIngestSummary


def check_log_request(host: str, kind: str | None, year: int | None) -> str:
    """Refuse an ingest-logs request that cannot be right, before its warehouse is opened; the host in lower
    case (an all-upper-case address is the same address)."""
    if not host or not host.strip():
        raise SourceError("ingest-logs needs --host ADDR (the host the logs belong to)")
    try:  # a typo would file the logs under a host that does not exist
        host = str(check_value(None, "host", host, "--host"))
    except UnheldValue as exc:
        raise SourceError(str(exc)) from None
    if kind is not None and kind not in LOG_KINDS:
        raise SourceError(f"unknown --kind {kind!r}; choose one of {', '.join(LOG_KINDS)}")
    if year is not None and not 1970 <= year <= 9999:
        raise SourceError(f"--year {year} is not a plausible year")
    return host


def check_log_host(con: duckdb.DuckDBPyConnection, host: str) -> str:
    """`host` checked against the escrows: logs of a host that holds no slot in them would be evidence of
    nobody. A warehouse with no escrow yet (logs ingested first) cannot tell: said in one line."""
    if fetch_frame(con, "SELECT count(*) AS n FROM escrow_slots")["n"][0] == 0:
        say(f"warning: the warehouse holds no escrow yet; the logs are filed under {host} unchecked")
        return host
    try:
        return str(check_value(con, "slot_host", host, "--host"))
    except UnheldValue as exc:
        raise SourceError(str(exc)) from None


def ingest_logs(
    con: duckdb.DuckDBPyConnection,
    paths: list[Path | str],
    host: str,
    kind: str | None = None,
    year: int | None = None,
    timezone: str | None = None,
    label: str | None = None,
) -> LogIngestSummary:
    """Ingest files and directories of one host; ``kind`` None = detected per file; ``timezone`` = the
    zone of the vLLM logs' local times (IANA name or UTC offset, default UTC); ``label`` = the name of the
    source in provenance footers (a config entry's `label`), shown with the time zone."""
    host = check_log_host(con, check_log_request(host, kind, year))
    tz = LogTimezone.parse(timezone)
    files = expand(paths)
    started = time.monotonic()
    display = ", ".join(str(p) for p in paths)
    label = ", ".join(filter(None, [label, f"timezone {tz.name}"]))
    # The input digest (provenance) is hashed beside the parse, in a thread: hashlib releases the GIL.
    with (
        ThreadPoolExecutor(max_workers=1) as pool,
        ingest_run(
            con,
            source_id=f"logs:{host}",
            kind="logs",
            display=display,
            label=label,
            sample_digest=_sample_digest(files),
        ) as run,
    ):
        content = pool.submit(files_digest, [file.path for file in files])
        summary = LogIngestSummary(run_id=run.run_id, host=host, timezone=tz.name)
        job = LogJob(host, year, tz, summary)
        try:
            # A large file is one transaction; at DuckDB's default 16MB WAL threshold its commit would
            # also checkpoint mid-run. Checkpoint every 256MB of WAL instead.
            with duckdb_setting(con, "checkpoint_threshold", "256MB"):
                _refuse_irregular(con, run, paths, summary)
                empty, files_with_bytes = _split_empty(files)
                _ingest_empty_files(con, run, empty, kind, job)
                for file in files_with_bytes:
                    _ingest_file(con, run, file, LOG_KINDS[kind or detect_kind(file)], job)
            run.input_digest = content.result()
        finally:
            summary.elapsed_s = time.monotonic() - started
            summary.rows = dict(run.rows)
            run.extra = {
                "files": summary.files,
                "lines": summary.lines,
                "unparsed": summary.unparsed,
                "cut_lines": summary.cut,
                "replaced": summary.replaced,
                "unrecognised_files": len(summary.unrecognised),
            }
    return summary


def _sample_digest(files: list[LogFile]) -> str:
    """The run id's material of the files (`pipeline.core.digest.sample_digest`); a read error is one line."""
    try:
        return sample_digest([file.path for file in files])
    except OSError as exc:
        raise SourceError(f"cannot read the logs ({one_line(exc)})") from None


def _refuse_irregular(con: duckdb.DuckDBPyConnection, run: IngestRun, paths: list, summary: LogIngestSummary) -> None:
    """What the directories named hold besides regular files: never opened, counted and quarantined."""
    found = not_regular(paths)
    if found:
        run.accounting.read("log files", len(found), unit="files")
        run.accounting.quarantined("log files", len(found))
        summary.not_read += [f"{path}: {why}" for path, why in found]
        with transaction(con):
            run.quarantine([("log_file", str(path), f"{why}: not read") for path, why in found])


def _ingest_file(con: duckdb.DuckDBPyConnection, run: IngestRun, file: LogFile, kind: SourceKind, job: LogJob) -> None:
    assert kind.log is not None
    ingest: FileIngester = resolve(kind.log.ingests)
    try:
        with transaction(con):
            lines, records, unparsed, last, undecodable = ingest(con, run, file, kind, job)
            if not lines:  # an empty file gets a word: nothing of it could be read
                run.quarantine([("log_file", str(file.path), "empty: no lines")])
    except (OSError, EOFError, zlib.error) as exc:  # a gzip member with a bad CRC or cut short, a read error
        raise SourceError(f"{file.path}: cannot read ({one_line(exc)})") from None
    except PastLimit as exc:  # e.g. a gzip bomb: nothing of the file is kept; it is named and counted
        _refuse_file(con, run, file, str(exc), job.summary)
        return
    summary = job.summary
    acct = run.accounting
    acct.read("log files", 1, unit="files")
    (acct.used if lines else acct.quarantined)("log files", 1)
    acct.read("log lines", lines, unit="lines")
    acct.quarantined("log lines", unparsed)  # each in quarantine with its text
    acct.used("log lines", lines - unparsed)  # part of a record, or a line the grammar knows and passes by
    acct.flag(
        "log lines", "with bytes that are not UTF-8 (at a line's end dropped, elsewhere read as U+FFFD)", undecodable
    )
    if not lines:
        summary.not_read.append(f"{file.path}: empty (no lines)")
    if lines and not records:  # nothing recognised: a wrong --kind, or a file of another kind
        summary.unrecognised.append((str(file.path), kind.name))
    if last is not None:
        run.copy_at = max(run.copy_at, last) if run.copy_at else last
    summary.files += 1
    summary.kinds[kind.name] = summary.kinds.get(kind.name, 0) + 1
    summary.lines += lines
    summary.unparsed += unparsed
    summary.undecodable += undecodable


def _split_empty(files: list[LogFile]) -> tuple[list[LogFile], list[LogFile]]:
    """The files of no bytes (nothing to read, whatever their kind), and the others, each in order."""
    empty: list[LogFile] = []
    rest: list[LogFile] = []
    for file in files:
        try:
            size = file.path.stat().st_size
        except OSError as exc:
            raise SourceError(f"{file.path}: cannot read ({one_line(exc)})") from None
        (empty if size == 0 else rest).append(file)
    return empty, rest


def _ingest_empty_files(
    con: duckdb.DuckDBPyConnection, run: IngestRun, files: list[LogFile], kind: str | None, job: LogJob
) -> None:
    """Files of no bytes, all at once: each named and quarantined as an empty file is one by one (in one
    transaction, not one each: thousands of empty files cost what one does)."""
    if not files:
        return
    with transaction(con):
        run.quarantine([("log_file", str(file.path), "empty: no lines") for file in files])
    acct, summary = run.accounting, job.summary
    acct.read("log files", len(files), unit="files")
    acct.quarantined("log files", len(files))
    acct.read("log lines", 0, unit="lines")
    for file in files:
        name = kind or "unknown"  # nothing to detect a kind from
        summary.kinds[name] = summary.kinds.get(name, 0) + 1
        summary.not_read.append(f"{file.path}: empty (no lines)")
    summary.files += len(files)


def _refuse_file(con: duckdb.DuckDBPyConnection, run: IngestRun, file: LogFile, why: str, summary) -> None:
    """A file past a limit of pipeline/core/limits.py: its transaction rolled back, it is quarantined whole."""
    run.accounting.read("log files", 1, unit="files")
    run.accounting.quarantined("log files", 1)
    summary.not_read.append(f"{file.path}: {why}")
    with transaction(con):
        run.quarantine([("log_file", str(file.path), why)])


def _quarantine_frame(host: str, table: str, file: LogFile, unparsed: pl.DataFrame) -> pl.DataFrame:
    """Quarantine rows of a vLLM log's unparsed lines (line, text, file_id); `table` = the kind's quarantine table."""
    return unparsed.select(
        source_id=pl.format("logs:{}:{}", pl.lit(host), pl.col("file_id")),
        table_name=pl.lit(table),
        row_key=pl.format("{}:{}", pl.col("file_id"), pl.col("line")),
        reason=pl.format(
            "unparsed line {} of {}: {}", pl.col("line"), pl.lit(file.path.name), pl.col("text").str.slice(0, 300)
        ),
    )


def _segments(con, file: LogFile, host: str) -> list[tuple[int, str, int]]:
    """(first line here, identity, lines before it here) of each known file this one continues.

    A copy taken before logrotate's copytruncate holds the rotated file and the start of the next one:
    past the lines known of its identity, the next line may be the first line of another file of the
    host already read. Those lines are that file's records (its identity, its line numbers), not new
    ones. (A longer copy read *before* its parts cannot be told apart this way: its tail is kept under
    its own identity.)"""
    known = dict(
        con.execute("SELECT file_id, lines FROM log_files WHERE host = ? AND kind = 'vllm'", [host]).fetchall()
    )
    segments = [(1, file.identity(), 0)]
    while segments[-1][1] in known and known[segments[-1][1]]:
        start, ident, _ = segments[-1]
        after = start + known[ident]
        following = file.identity_from(after)
        if following is None or following not in known or any(following == s[1] for s in segments):
            break
        segments.append((after, following, after - 1))
    return segments


def ingest_vllm_file(
    con: duckdb.DuckDBPyConnection, run: IngestRun, file: LogFile, kind: SourceKind, job: LogJob
) -> FileRead:
    """Stream the file's rows into the vLLM tables, replacing what an earlier read of the same lines wrote."""
    assert kind.log is not None
    host, year, tz, summary = job.host, job.year, job.tz, job.summary
    # A second copy of a file in this run (a log and its gzipped twin) gives the same rows for the lines
    # read already: only its lines beyond them are written.
    segments = [
        (start, file_id, before, summary.vllm_lines_read.get(file_id, 0))
        for start, file_id, before in _segments(con, file, host)
    ]
    stream = VllmStream(year, tz, part_starts=[start for start, *_ in segments])
    params = {"host": host, "run_id": run.run_id}
    replaced = 0
    # The next chunk is parsed while this one is written (DuckDB and Polars both release the GIL): one
    # writer thread, at most one chunk waiting for it.
    with ThreadPoolExecutor(1, thread_name_prefix="log-writer") as writer:
        pending = None
        for batch in iter_vllm_batches(file, year, stream):
            if pending is not None:
                pending.result()
            pending = writer.submit(
                _append_batch, con, run, batch, params, segments, host, file, kind.log.quarantine_table
            )
        if pending is not None:
            pending.result()
    bounds = [s[0] for s in segments[1:]] + [stream.lines + 1]
    for i, ((start, file_id, _, _), end) in enumerate(zip(segments, bounds, strict=True)):
        summary.vllm_lines_read[file_id] = max(summary.vllm_lines_read.get(file_id, 0), end - start)
        replaced += _delete(con, run, "replace_earlier_read.sql", params | {"file_id": file_id, "lines": end - start})
        if len(segments) == 1:
            first, last, records, unparsed = stream.first, stream.last, stream.records, stream.unparsed
        else:  # a part of the file; the copy shows it runs on into the next part, so it is observed until then
            first, last, records = stream.parts[i] if stream.parts else (None, None, 0)
            if i + 1 < len(segments) and stream.parts and stream.parts[i + 1][0] is not None:
                last = stream.parts[i + 1][0]
            unparsed = scalar(con.execute(sql_text("logs/part_unparsed.sql"), params | {"file_id": file_id}))
        _log_file_row(
            con,
            host,
            file_id,
            kind.name,
            file,
            stream.at(first),
            stream.at(last),
            end - start,
            records,
            unparsed,
            run.run_id,
        )
    summary.replaced += replaced
    summary.cut += stream.cut
    return FileRead(stream.lines, stream.records, stream.unparsed, stream.at(stream.last), stream.undecodable)


def _placed(frame: pl.DataFrame, segments: list[tuple[int, str, int, int]]) -> pl.DataFrame:
    """The rows with the identity and line number of the file each belongs to (`_segments`), without the
    lines of it this run has written already."""
    if len(segments) == 1:
        _, file_id, _, done = segments[0]
        frame = frame.filter(pl.col("line") > done) if done else frame
        return frame.with_columns(file_id=pl.lit(file_id))
    parts = pl.DataFrame(
        segments,
        schema={"first_line": pl.Int64, "file_id": pl.String, "before": pl.Int64, "done": pl.Int64},
        orient="row",
    )
    return (
        frame.sort("line")
        .join_asof(parts, left_on="line", right_on="first_line")
        .with_columns(line=pl.col("line") - pl.col("before"))
        .filter(pl.col("line") > pl.col("done"))
        .drop("first_line", "before", "done")
    )


def _append_batch(
    con, run: IngestRun, batch: VllmBatch, params: dict, segments: list, host: str, file: LogFile, quarantine: str
) -> None:
    """One chunk's rows appended to the vLLM tables, its unparsed lines to the quarantine."""
    for name, table in VLLM_TABLES.items():
        frame = _placed(getattr(batch, name), segments) if getattr(batch, name).height else None
        if frame is not None and frame.height:
            # Arrow's string views as Polars holds them (the default export copies every string)
            con.register("new_log_rows", frame.to_arrow(compat_level=pl.CompatLevel.newest()))
            try:
                con.execute(sql_text("logs/append_vllm_rows.sql").format(table=table), params)
            finally:
                con.unregister("new_log_rows")
            run.count(table, frame.height)
    if batch.unparsed.height:  # (a line quarantined before is not added twice)
        run.quarantine(_quarantine_frame(host, quarantine, file, _placed(batch.unparsed, segments)))


def _delete(con, run: IngestRun, script: str, params: dict) -> int:
    """Run a DELETE of earlier rows of one file over the vLLM tables; the spec and stats rows it removed (its
    records: an event is part of its record). The rows counted as new go down by what was removed."""
    records = 0
    for table in VLLM_TABLES.values():
        n = int(con.execute(sql_text(f"logs/{script}").format(table=table), params).fetchall()[0][0])
        run.count(table, -n)
        records += n if table in ("log_spec_decode", "log_engine_stats") else 0
    return records


def _log_file_row(con, host, file_id, kind, file, first, last, lines, records, unparsed, run_id) -> None:
    con.execute(
        sql_text("logs/log_file_row.sql"),
        [host, file_id, kind, str(file.path), first, last, lines, records, unparsed, run_id],
    )


def ingest_keyed_file(
    con: duckdb.DuckDBPyConnection, run: IngestRun, file: LogFile, kind: SourceKind, job: LogJob
) -> FileRead:
    """A file of a kind with a reader (validator logs, scrapes, PoC results): read whole, its rows
    inserted on their natural keys into the kind's table (what the warehouse has is kept)."""
    assert kind.log is not None and kind.log.reader is not None
    (table,) = kind.tables
    read: LogRecords = resolve(kind.log.reader)(file, job.host)
    run.insert(table, read.rows.with_columns(run_id=pl.lit(run.run_id, pl.String)), on_conflict="ignore")
    run.quarantine(
        pl.DataFrame(
            [
                (
                    f"logs:{job.host}:{read.file_id}",
                    kind.log.quarantine_table,
                    key,
                    f"unparsed line {number} of {file.path.name}: {text[:300]}",
                )
                for number, key, text in read.unparsed
            ],
            schema=["source_id", "table_name", "row_key", "reason"],
            orient="row",
        )
    )
    records, unparsed = read.rows.height, len(read.unparsed)
    _log_file_row(
        con, job.host, read.file_id, kind.name, file, read.first, read.last, read.lines, records, unparsed, run.run_id
    )
    return FileRead(read.lines, records, unparsed, read.last, file.undecodable[0])


def unrecognised_warnings(summary: LogIngestSummary) -> list[str]:
    """The warning for each file in which nothing was recognised as its kind (a wrong kind, a file of
    another kind), said alike by `ingest-logs` and `run`."""
    return [
        f"{path}: nothing recognised as a {kind} log (wrong --kind?); its unreadable lines are in quarantine"
        for path, kind in summary.unrecognised
    ]


def ingest_log_source(con: duckdb.DuckDBPyConnection, source: dict, cfg) -> LogIngestSummary:
    """`run`'s ingest of an entry of a log kind (pipeline/ingest/kinds.py) as the config's host (its summary
    is said by the run: pipeline/output/summaries.py)."""
    if not cfg.host:
        raise SourceError(f"{source['path']}: a log source needs the config's host (the host the logs belong to)")
    summary = ingest_logs(
        con,
        [source["path"]],
        host=cfg.host,
        kind=source["kind"],
        year=source.get("year"),
        timezone=source.get("timezone"),
        label=source.get("label"),
    )
    return summary
