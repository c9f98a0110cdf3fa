"""The Python API: everything the command line does, as methods of one facade returning result objects.

    from pipeline import api, open_warehouse

    api.ingest("data-samples/store", "warehouse.duckdb")      # an IngestSummary; api.run() the scheduled job
    with open_warehouse() as wh:              # the warehouse the CLI would use, read-only
        ev = wh.evidence("peer-invalidation", host="gonka1…", epoch=3)
        ev.frame, ev.stats, ev.provenance     # Polars rows, statistics, provenance footer
        print(ev.to_markdown())
        wh.query("SELECT status, count(*) AS n FROM inferences WHERE epoch_id = $epoch GROUP BY ALL", epoch=3)

`Context` holds what a command resolves once (the warehouse, the default host, the run configuration)
and has one method per command, each calling the one task of its stage (`pipeline.output.report.task`,
`pipeline.output.bundle`, `pipeline.network.jobs`, …); the module-level functions are those methods
on a `Context` of their arguments. Every command of `gonka-evidence` is a thin layer over this module,
so what a notebook computes is what the command line prints; nothing here prints. What a job says
while it works (`run`'s log lines, warnings, progress) goes to the callbacks of a `Listener` the caller
passes (`pipeline.core.events`).

Read and write are separate: `open_warehouse(path)` is read-only and sandboxed (DuckDB opened
read-only and locked so that SQL cannot reach files, the network or extensions, nor change
settings); `open_warehouse(path, write=True)` may ingest. The module-level functions open the
warehouse they need, use it and close it. docs/api.md is the reference.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from pipeline.core.errors import UserError
from pipeline.core.events import Listener, Progress
from pipeline.core.roles import Role  # noqa: F401  (the roles of check_path)
from pipeline.ingest import missing_column_warnings  # noqa: F401  (the CLI says them)
from pipeline.jobs.listing import (  # noqa: F401  (the facade's names besides its commands)
    check_outputs,
    check_path,
    evidence_options,
    evidence_reference,
    evidence_tables,
    init_config,
    log_kind_help,
    named_queries,
    parse_params,
    query_output_format,
    resolve_sql,
    rule_set_lines,
    schema,
    source_kinds,
    unrecognised_warnings,
    user_error,
    user_errors,
)
from pipeline.output import summaries  # noqa: F401  (every job summary, rendered once: the CLI says them)
from pipeline.output.evidence import Evidence
from pipeline.output.query_format import DEFAULT_TIMEOUT_S as QUERY_TIMEOUT_S
from pipeline.output.query_format import MAX_TIMEOUT_S as MAX_QUERY_TIMEOUT_S
from pipeline.output.query_format import QueryFormat, terminal_width

if TYPE_CHECKING:  # importing `pipeline` stays cheap: the engines load when a warehouse opens
    from datetime import timedelta

    import duckdb
    import polars as pl

    from pipeline.evidence.buildcheck import BuildCheck
    from pipeline.ingest.accounting import AccountingRow
    from pipeline.ingest.builds import BuildsLoaded
    from pipeline.ingest.json_responses import JsonIngestSummary
    from pipeline.ingest.logs import LogIngestSummary
    from pipeline.ingest.runs import IngestSummary
    from pipeline.jobs.run import RunOutcome
    from pipeline.jobs.settings import Settings
    from pipeline.network.jobs import NetworkIngestSummary
    from pipeline.output.bundle import BundleWritten, Verified
    from pipeline.output.doctor import SourceReport
    from pipeline.output.query import QueryError, RenderedQuery
    from pipeline.output.report.task import ReportWritten
    from pipeline.output.safety import OutputError, OutputGuard

__all__ = [
    "BuildsLoaded",
    "BundleWritten",
    "Context",
    "Evidence",
    "Listener",
    "MAX_QUERY_TIMEOUT_S",
    "OutputError",
    "QUERY_TIMEOUT_S",
    "QueryError",
    "QueryFormat",
    "ReportWritten",
    "Settings",
    "SourceReport",
    "Verified",
    "Warehouse",
    "bundle",
    "check_builds",
    "check_outputs",
    "check_path",
    "doctor",
    "evidence_options",
    "evidence_tables",
    "ingest",
    "ingest_json",
    "infer_builds",
    "init_config",
    "ingest_logs",
    "load_builds",
    "named_queries",
    "network_evidence",
    "network_ingest",
    "network_quarantine",
    "network_tables",
    "open_warehouse",
    "parse_params",
    "query_output_format",
    "report",
    "resolve_sql",
    "resolve_warehouse",
    "rule_set_lines",
    "run",
    "terminal_width",
    "UserError",
    "unrecognised_warnings",
    "user_error",
    "user_errors",
    "verify",
]


def __getattr__(name: str) -> Any:
    """The result and error types, which live beside the stage that makes them, looked up on first use
    (importing their modules loads the engines)."""
    if name in ("BundleWritten", "Verified"):
        from pipeline.output import bundle

        return getattr(bundle, name)
    if name == "BuildsLoaded":
        from pipeline.ingest.builds import BuildsLoaded

        return BuildsLoaded
    if name == "Settings":
        from pipeline.jobs.settings import Settings

        return Settings
    if name == "SourceReport":
        from pipeline.output.doctor import SourceReport

        return SourceReport
    if name == "ReportWritten":
        from pipeline.output.report.task import ReportWritten

        return ReportWritten
    if name == "QueryError":
        from pipeline.output.query import QueryError

        return QueryError
    if name == "OutputError":
        from pipeline.output.safety import OutputError

        return OutputError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def resolve_warehouse(path: str | Path | None = None, config: Path | None = None) -> Path:
    """The warehouse a command uses: `path`, else GONKA_EVIDENCE_WAREHOUSE, else the config's, else
    ./warehouse.duckdb (`Settings.resolve`)."""
    return Context(path, config=config).path


def bundle_request(
    settings: Settings, host: str | None, epoch: int | None, since: str | None, until: str | None
) -> Any:
    """A bundle's request, checked before anything is computed (only an epoch report reads the run
    configuration, for its finality lag)."""
    from pipeline.evidence.provenance import command_path
    from pipeline.output.bundle import bundle_request as request

    lag = settings.run.finality_lag_delta if epoch is not None and host else None
    named = command_path(settings.warehouse) if settings.warehouse_named else None
    return request(host, epoch, since, until, named, lag)


class Context:
    """The facade's commands: what a command resolves once (`settings`, a frozen `Settings`: the warehouse,
    the default host, the run configuration, each argument → environment → config → default), and one
    method per command, each calling the one task of its stage. `warehouse`, `host`, `config`: the
    arguments (None: not given)."""

    def __init__(
        self,
        warehouse: str | Path | None = None,
        *,
        host: str | None = None,
        config: str | Path | None = None,
        settings: Settings | None = None,
    ):
        self.given = warehouse
        self.host_arg = host
        self.config = Path(config) if config is not None else None
        self._settings = settings

    @cached_property
    def settings(self) -> Settings:
        """The settings, resolved once (on first use: a command that fails earlier reads no config)."""
        from pipeline.jobs.settings import Settings

        return self._settings or Settings.resolve(self.given, host=self.host_arg, config=self.config)

    @property
    def path(self) -> Path:
        """The warehouse: the one given, else GONKA_EVIDENCE_WAREHOUSE, else the config's, else the default."""
        return self.settings.warehouse

    @property
    def named(self) -> bool:
        """Whether the warehouse was named (a named warehouse goes into the reproducing commands)."""
        return self.settings.warehouse_named

    @property
    def host(self) -> str | None:
        """The default host: the one given, else GONKA_EVIDENCE_HOST, else the config's."""
        return self.settings.host

    @property
    def finality_lag(self) -> timedelta:
        """The run configuration's finality lag (of the epoch report)."""
        return self.settings.run.finality_lag_delta

    def report_host(self, host: str | None) -> str:
        """The host of a report: the one given, else the resolved one; none is an error naming where to set it."""
        return host or self.settings.host_for(None, "report")

    def bundle_request(self, host: str | None, epoch: int | None, since: str | None, until: str | None) -> Any:
        """The bundle's request, checked before anything is computed: see `bundle_request`."""
        return bundle_request(self.settings, host, epoch, since, until)

    def open(self, *, write: bool = False) -> Warehouse:
        """The warehouse, read-only and sandboxed, or with `write` open for ingesting (created when
        missing; one writer at a time)."""
        from pipeline.warehouse.database import disk_errors, open_for_write, open_sandboxed

        with disk_errors(self.path):
            con = open_for_write(self.path) if write else open_sandboxed(self.path)
        return Warehouse(self.settings, con, write=write)

    # --- one method per command: each opens the warehouse it needs and closes it ----------------------

    def ingest(self, source: str, *, label: str | None = None, progress: Progress | None = None) -> IngestSummary:
        """`gonka-evidence ingest`: ingest a copy into the warehouse, opened for writing once the source
        has answered (a source that cannot be read leaves no new warehouse behind)."""
        from pipeline.core.roles import is_url
        from pipeline.core.text import label_refusal
        from pipeline.ingest.copies import ingest_source
        from pipeline.sources.errors import SourceError
        from pipeline.warehouse.database import disk_errors

        if label and (refusal := label_refusal(label, "--label")):
            raise SourceError(refusal)
        opened: list[Warehouse] = []

        def connection() -> duckdb.DuckDBPyConnection:
            if not opened:
                opened.append(self.open(write=True))
            return opened[0]._writer()

        if not is_url(source):  # the warehouse is never the copy, inside it or holding it
            check_outputs({"warehouse": self.path}, inputs=[Path(source)])
        try:
            with disk_errors(self.path):
                return ingest_source(connection, source, label=label, progress=progress)
        finally:
            for wh in opened:
                wh.close()

    def ingest_logs(
        self,
        files: Iterable[str | Path],
        *,
        host: str | None = None,
        kind: str | None = None,
        year: int | None = None,
        timezone: str | None = None,
    ) -> LogIngestSummary:
        """`gonka-evidence ingest-logs`: see `Warehouse.ingest_logs`; `host` defaults to the resolved one."""
        from pipeline.ingest.logs import check_log_request

        host = check_log_request(host or self.settings.host_for(None, "ingest-logs"), kind, year)  # before it is made
        with self.open(write=True) as wh:
            return wh.ingest_logs(files, host=host, kind=kind, year=year, timezone=timezone)

    def ingest_json(self, files: Iterable[str | Path]) -> JsonIngestSummary:
        """`gonka-evidence ingest-json`: see `Warehouse.ingest_json`."""
        with self.open(write=True) as wh:
            return wh.ingest_json(files)

    def load_builds(self, file: str | Path) -> BuildsLoaded:
        """`gonka-evidence builds`: see `Warehouse.load_builds`."""
        with self.open(write=True) as wh:
            return wh.load_builds(file)

    def infer_builds(self, host: str | None = None, out: str | Path | None = None) -> str:
        """`gonka-evidence builds infer`: see `Warehouse.infer_builds`; also written to `out` when given
        (never over the warehouse or a source; whole or not at all)."""
        from pipeline.output.safety import output_file

        with self.open() as wh:
            text = wh.infer_builds(host)
            if out is not None:
                wh.guard().check(Path(out), "--out")
                with output_file(Path(out)) as sink:
                    sink.write(text.encode("utf-8"))
        return text

    def check_builds(self, file: str | Path | None = None, host: str | None = None) -> BuildCheck:
        """`gonka-evidence builds check`: see `Warehouse.check_builds`."""
        with self.open() as wh:
            return wh.check_builds(file, host)

    def doctor(self, source: str) -> SourceReport:
        """`gonka-evidence doctor`: what a source holds, without ingesting; with a warehouse given, also
        what that warehouse found about the source."""
        from pipeline.output.doctor import source_report
        from pipeline.sources.store import open_store

        store = open_store(source)
        try:
            if self.given is None and self.config is None:  # no warehouse named (--warehouse, or --config's)
                return source_report(store, None)
            with self.open() as wh:
                return source_report(store, wh._con)
        finally:
            store.close()

    def run(self, *, listener: Listener | None = None) -> RunOutcome:
        """`gonka-evidence run`, the scheduled job: ingest what is new, write the due epoch reports.
        The job's log lines go to `listener.line` as they happen and are kept in `RunOutcome.log`;
        `listener.progress` gives the progress callback of each store ingest."""
        from pipeline.jobs.run import run_logged

        return run_logged(self.settings, listener)

    def report(self, epoch: int, host: str | None = None, *, out: str | Path = "out") -> ReportWritten:
        """`gonka-evidence report epoch N`: see `Warehouse.report`. Without a host (given, configured, or
        the samples' on their own warehouse) it is an error, before the warehouse is opened when it can be."""
        if not (host or self.host or self.settings.samples_host):
            self.settings.host_for(None, "report")
        with self.open() as wh:
            return wh.report(epoch, host, out=out)

    def bundle(
        self,
        out: str | Path,
        host: str | None = None,
        *,
        epoch: int | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> BundleWritten:
        """`gonka-evidence bundle`: see `Warehouse.bundle`; `host` is required here. A missing host or a
        bad window is an error before the warehouse is opened."""
        request = bundle_request(self.settings, host or self.host, epoch, since, until)
        with self.open() as wh:
            return wh.write_bundle(request, out)

    def verify(self, directory: str | Path) -> Verified:
        """`gonka-evidence verify`: see `Warehouse.verify`. A directory that is not a bundle is an error
        before the warehouse is opened."""
        from pipeline.output.bundle import read_request

        read_request(Path(directory))
        with self.open() as wh:
            return wh.verify(directory)

    @staticmethod
    def network_ingest(
        copies: Iterable[str],
        lake: str | Path,
        *,
        workers: int | None = None,
        scheduler: str | None = None,
        buckets: int | None = None,
        memory_limit: str | None = None,
        piece_rows: int | None = None,
        progress: Progress | None = None,
    ) -> NetworkIngestSummary:
        """`gonka-evidence network ingest`: copies into the lake, then their partitions into partition
        warehouses, on a Dask cluster (a LocalCluster of `workers` processes, or the one at `scheduler`;
        `workers=0`: in this process). Needs the `network` extra (`pip install gonka-evidence[network]`).
        `piece_rows`: the diffs of one stage-1 task (a larger copy is read in pieces; default
        GONKA_EVIDENCE_NETWORK_PIECE_ROWS, else from the network's size and the workers)."""
        from pipeline.network.jobs import network_ingest

        return network_ingest(
            list(copies),
            lake,
            workers=workers,
            scheduler=scheduler,
            buckets=buckets,
            memory_limit=memory_limit,
            piece_rows=piece_rows,
            progress=progress,
        )

    @staticmethod
    def network_evidence(
        name: str,
        lake: str | Path,
        *,
        host: str | None = None,
        epoch: int | None = None,
        control: str | None = None,
        by_escrow: bool = False,
        workers: int | None = None,
        scheduler: str | None = None,
        command: str = "",
        progress: Progress | None = None,
        allow_open: bool = False,
    ) -> Evidence:
        """`gonka-evidence network evidence`: a network table from the lake (partials per partition on the
        cluster, reduced here), with the lake's provenance footer; `Evidence.chart` holds its chart, if any.
        A statistical test over an open epoch is refused unless `allow_open` (then marked provisional)."""
        from pipeline.network.jobs import network_table

        return network_table(
            name,
            lake,
            host=host,
            epoch=epoch,
            control=control,
            by_escrow=by_escrow,
            workers=workers,
            scheduler=scheduler,
            command=command,
            progress=progress,
            allow_open=allow_open,
        )

    @staticmethod
    def network_quarantine(lake: str | Path) -> pl.DataFrame:
        """The quarantine rows of every partition of the lake (forks, disagreeing sealed rows, …)."""
        from pipeline.network.jobs import lake_quarantine

        return lake_quarantine(lake)

    def __repr__(self) -> str:
        return f"Context({self.given!r}, host={self.host_arg!r}, config={self.config!r})"


class Warehouse:
    """A warehouse connection, read-only and sandboxed unless opened with ``write=True``; close it,
    or use it as a context manager. Each method calls one task on the connection."""

    def __init__(self, context: Settings | Context, con: duckdb.DuckDBPyConnection, *, write: bool = False):
        self.settings = context.settings if isinstance(context, Context) else context
        self.path, self._con, self.writable = self.settings.warehouse, con, write

    @property
    def host(self) -> str | None:
        """The default host of `evidence`: the one given, else GONKA_EVIDENCE_HOST, else the config's."""
        return self.settings.host

    # --- reading -------------------------------------------------------------------------------------

    def evidence(
        self,
        name: str,
        host: str | None = None,
        *,
        epoch: int | None = None,
        since: Any = None,
        until: Any = None,
        command: str | None = None,
        **options: Any,
    ) -> Evidence:
        """The evidence table `name` (see `evidence_tables()`) for `host` (default: the
        warehouse's host) over all data, one `epoch`, or ``[since, until)``; other keywords are the
        table's options (``by_escrow=True``, ``compare=2``, …). `command`, the command line that
        reproduces the table in its provenance, is derived from the arguments when not given."""
        from pipeline.evidence import compute, reproducing_command

        host = host or self.host
        if command is None:
            warehouse = str(self.path) if self.settings.warehouse_named else None
            command = reproducing_command(
                name, host, epoch=epoch, since=since, until=until, warehouse=warehouse, **options
            )
        options.setdefault("finality_lag", self.settings.run.finality_lag_delta)  # the closed-epoch rule of `run`
        return Evidence(
            compute(name, self._con, host=host, epoch=epoch, since=since, until=until, command=command, **options)
        )

    def preflight(
        self,
        host: str | None = None,
        *,
        build: str | None = None,
        since: Any = None,
        command: str | None = None,
    ) -> Evidence:
        """The `preflight` table for `host`: the six checks of what a DSpark host needs, for every build of the
        host, or only `build`, or only the builds in effect at or after `since`; `.failed` names the failed
        checks."""
        since = since.isoformat() if hasattr(since, "isoformat") else since
        return self.evidence("preflight", host, build=build, builds_since=since, command=command)

    def query(self, sql: str, **params: Any) -> pl.DataFrame:
        """The result of `sql` (SQL text or a named query of ``gonka-evidence query --list``) with
        ``$name`` bound to ``params``, as a Polars frame."""
        from pipeline.output.query import resolve_sql, run_query

        return run_query(self._con, resolve_sql(sql, None), params)

    def render_query(
        self, sql: str, params: dict[str, Any], fmt: QueryFormat, *, vertical: bool = False, width: int | None = None
    ) -> RenderedQuery:
        """`sql` rendered exactly as the `query` command prints it (see `pipeline.output.query.render_query`)."""
        from pipeline.output.query import render_query

        return render_query(self._con, sql, params, fmt, vertical=vertical, width=width)

    def write_query(
        self,
        sql: str,
        params: dict[str, Any],
        fmt: QueryFormat,
        *,
        output: str | Path | None = None,
        sink: BinaryIO | None = None,
        vertical: bool = False,
        width: int | None = None,
        max_rows: int | None = None,
        timeout_s: float | None = None,
    ) -> RenderedQuery:
        """`sql` written as the `query` command writes it, streamed as DuckDB hands the rows over: to the
        file `output` (whole or not at all; never the warehouse, a source or inside one) or to `sink`.
        `max_rows` 0 means every row, None the default (10,000 for the table format, else every row);
        `timeout_s` None is the default limit (`QUERY_TIMEOUT_S`), 0 none."""
        from pipeline.output.query import write_query

        return write_query(
            self._con,
            self.path,
            sql,
            params,
            fmt,
            output=Path(output) if output is not None else None,
            sink=sink,
            vertical=vertical,
            width=width,
            max_rows=max_rows,
            timeout_s=timeout_s,
        )

    def guard(self) -> OutputGuard:
        """The paths no output may overwrite: this warehouse and every file source ingested into it."""
        from pipeline.output.safety import OutputGuard

        return OutputGuard.of(self._con, self.path)

    def source_findings(self, source_id: str) -> dict[str, int]:
        """What the warehouse found about a source (copies that disagree, checkpoint cross-checks)."""
        from pipeline.ingest.store import source_findings

        return source_findings(self._con, source_id)

    def source_accounting(self, source_id: str) -> tuple[str, list[AccountingRow]] | None:
        """The newest run of a source that read it, and its accounting rows (read = used +
        deduplicated + quarantined per input); None when no run of the source read anything."""
        from pipeline.ingest.accounting import last_source_accounting

        return last_source_accounting(self._con, source_id)

    def escrow_findings(self, source_id: str) -> list[dict[str, Any]]:
        """Escrows of a source whose diff log no copy held whole, or whose copies disagree."""
        from pipeline.ingest.coverage import source_escrow_findings

        return source_escrow_findings(self._con, source_id)

    def infer_builds(self, host: str | None = None) -> str:
        """A proposed builds.toml (text) from the start cycles of the vLLM logs (`builds infer`)."""
        from pipeline.evidence.buildcheck import infer
        from pipeline.evidence.request import check_host

        if host is not None:  # a typo must not read as "no start cycles"
            host = check_host(self._con, host)
        return infer(self._con, host)

    def check_builds(self, file: str | Path | None = None, host: str | None = None) -> BuildCheck:
        """A builds.toml (default: the loaded timeline) against the vLLM logs' start cycles (`builds check`)."""
        from pipeline.evidence.buildcheck import check, loaded_timeline
        from pipeline.evidence.request import check_host
        from pipeline.ingest.builds import read_builds

        if host is not None:  # a typo must not read as "not checked" or "consistent"
            host = check_host(self._con, host)
        timeline = read_builds(Path(file)) if file is not None else loaded_timeline(self._con)
        for entry_host in timeline["host"].unique(maintain_order=True).to_list():  # each entry's host too
            check_host(self._con, entry_host, f"{file or 'the loaded timeline'}: host")
        return check(self._con, timeline, host)

    def report(self, epoch: int, host: str | None = None, *, out: str | Path = "out") -> ReportWritten:
        """Write the epoch report to OUT/epoch-N/ (report.md, report.html, charts/, tables/), as
        `gonka-evidence report epoch` does. `host` defaults to the run configuration's host."""
        from pipeline.output.report.task import write_report

        lag = self.settings.run.finality_lag_delta
        host = host or self.settings.host_for(self._con, "report")
        warehouse_arg = str(self.path) if self.settings.warehouse_named else None
        return write_report(self._con, self.path, epoch, host, Path(out), finality_lag=lag, warehouse_arg=warehouse_arg)

    def bundle(
        self,
        out: str | Path,
        host: str | None = None,
        *,
        epoch: int | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> BundleWritten:
        """Write every evidence table, the charts, the epoch report and MANIFEST.json to `out`, as
        `gonka-evidence bundle` does; check it later with `verify`."""
        return self.write_bundle(bundle_request(self.settings, host or self.host, epoch, since, until), out)

    def write_bundle(self, request: Any, out: str | Path) -> BundleWritten:
        """The bundle of a checked request (`bundle_request`) written to `out`."""
        from pipeline.output.bundle import bundle

        return bundle(self._con, self.path, request, Path(out))

    def verify(self, directory: str | Path) -> Verified:
        """Recompute the bundle in `directory` from this warehouse and compare it file by file."""
        from pipeline.output.bundle import read_request, verify

        has_report = read_request(Path(directory)).epoch is not None  # no epoch report: no finality lag
        return verify(self._con, Path(directory), self.settings.run.finality_lag_delta if has_report else None)

    # --- writing (open_warehouse(..., write=True)) -----------------------------------------------------

    def ingest(self, source: str, *, label: str | None = None, progress: Progress | None = None) -> IngestSummary:
        """Ingest a devshard database copy (a postgresql:// URL, `postgres`, or a SQLite store
        directory): only what moved since its last ingest. `progress(table, advance, total)` is called
        as rows are read."""
        from pipeline.ingest.copies import ingest_source
        from pipeline.warehouse.database import disk_errors

        with disk_errors(self.path):
            return ingest_source(self._writer(), source, label=label, progress=progress)

    def ingest_logs(
        self,
        files: Iterable[str | Path],
        *,
        host: str,
        kind: str | None = None,
        year: int | None = None,
        timezone: str | None = None,
    ) -> LogIngestSummary:
        """Ingest vLLM logs, validator logs, /metrics scrapes or PoC results of one host (`kind`
        None: detected per file)."""
        from pipeline.ingest.logs import ingest_logs
        from pipeline.warehouse.database import disk_errors

        with disk_errors(self.path):
            return ingest_logs(self._writer(), list(files), host=host, kind=kind, year=year, timezone=timezone)

    def ingest_json(self, files: Iterable[str | Path]) -> JsonIngestSummary:
        """Ingest saved accounting-API and chain REST JSON responses."""
        from pipeline.ingest.json_responses import ingest_json_files
        from pipeline.warehouse.database import disk_errors

        with disk_errors(self.path):
            return ingest_json_files(self._writer(), [Path(f) for f in files])

    def load_builds(self, file: str | Path) -> BuildsLoaded:
        """Replace the host build timeline with the entries of a builds.toml."""
        from pipeline.ingest.builds import load_builds_file
        from pipeline.warehouse.database import disk_errors

        with disk_errors(self.path):
            return load_builds_file(self._writer(), Path(file))

    def _writer(self) -> duckdb.DuckDBPyConnection:
        if not self.writable:
            from pipeline.warehouse.database import WarehouseError

            raise WarehouseError(f"{self.path}: opened read-only; open it with open_warehouse(..., write=True)")
        return self._con

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = ", write=True" if self.writable else ""
        return f"Warehouse({str(self.path)!r}, host={self.host!r}{mode})"


def open_warehouse(
    path: str | Path | None = None,
    *,
    host: str | None = None,
    config: str | Path | None = None,
    write: bool = False,
) -> Warehouse:
    """The warehouse at `path`: read-only and sandboxed, or with `write` open for ingesting (created
    when missing; one writer at a time). Without `path`, the one the CLI resolves:
    ``GONKA_EVIDENCE_WAREHOUSE``, else the config's warehouse (`config`, else gonka-evidence.toml
    here), else ./warehouse.duckdb. `host` is the default host of `evidence`, `report` and `bundle`;
    without it, ``GONKA_EVIDENCE_HOST``, else the config's host, looked up when first needed."""
    return Context(path, host=host, config=config).open(write=write)


# --- one call, one command: `Context`'s method on a Context of the call's arguments --------------------


def ingest(
    source: str,
    warehouse: str | Path | None = None,
    *,
    config: str | Path | None = None,
    label: str | None = None,
    progress: Progress | None = None,
) -> IngestSummary:
    """`gonka-evidence ingest`: see `Context.ingest`."""
    return Context(warehouse, config=config).ingest(source, label=label, progress=progress)


def ingest_logs(
    files: Iterable[str | Path],
    *,
    host: str | None = None,
    warehouse: str | Path | None = None,
    config: str | Path | None = None,
    kind: str | None = None,
    year: int | None = None,
    timezone: str | None = None,
) -> LogIngestSummary:
    """`gonka-evidence ingest-logs`: see `Warehouse.ingest_logs`."""
    return Context(warehouse, config=config).ingest_logs(files, host=host, kind=kind, year=year, timezone=timezone)


def ingest_json(
    files: Iterable[str | Path], warehouse: str | Path | None = None, *, config: str | Path | None = None
) -> JsonIngestSummary:
    """`gonka-evidence ingest-json`: see `Warehouse.ingest_json`."""
    return Context(warehouse, config=config).ingest_json(files)


def load_builds(
    file: str | Path, warehouse: str | Path | None = None, *, config: str | Path | None = None
) -> BuildsLoaded:
    """`gonka-evidence builds`: see `Warehouse.load_builds`."""
    return Context(warehouse, config=config).load_builds(file)


def infer_builds(
    host: str | None = None,
    out: str | Path | None = None,
    warehouse: str | Path | None = None,
    *,
    config: str | Path | None = None,
) -> str:
    """`gonka-evidence builds infer`: see `Context.infer_builds`."""
    return Context(warehouse, config=config).infer_builds(host, out)


def check_builds(
    file: str | Path | None = None,
    host: str | None = None,
    warehouse: str | Path | None = None,
    *,
    config: str | Path | None = None,
) -> BuildCheck:
    """`gonka-evidence builds check`: see `Warehouse.check_builds`."""
    return Context(warehouse, config=config).check_builds(file, host)


def doctor(source: str, warehouse: str | Path | None = None, *, config: str | Path | None = None) -> SourceReport:
    """`gonka-evidence doctor`: what a source holds, without ingesting; with `warehouse`, also what
    that warehouse found about the source."""
    return Context(warehouse, config=config).doctor(source)


def run(
    config: str | Path | None = None, warehouse: str | Path | None = None, *, listener: Listener | None = None
) -> RunOutcome:
    """`gonka-evidence run`, the scheduled job: see `Context.run`."""
    return Context(warehouse, config=config).run(listener=listener)


def report(
    epoch: int,
    host: str | None = None,
    *,
    out: str | Path = "out",
    warehouse: str | Path | None = None,
    config: str | Path | None = None,
) -> ReportWritten:
    """`gonka-evidence report epoch N`: see `Context.report`."""
    return Context(warehouse, config=config).report(epoch, host, out=out)


def bundle(
    out: str | Path,
    host: str | None = None,
    *,
    epoch: int | None = None,
    since: str | None = None,
    until: str | None = None,
    warehouse: str | Path | None = None,
    config: str | Path | None = None,
) -> BundleWritten:
    """`gonka-evidence bundle`: see `Context.bundle`; `host` defaults to the resolved one."""
    return Context(warehouse, host=host, config=config).bundle(out, host, epoch=epoch, since=since, until=until)


def verify(directory: str | Path, warehouse: str | Path | None = None, *, config: str | Path | None = None) -> Verified:
    """`gonka-evidence verify`: see `Context.verify`."""
    return Context(warehouse, config=config).verify(directory)


# The network commands read no warehouse and no configuration: the facade's methods themselves.
network_ingest = Context.network_ingest
network_evidence = Context.network_evidence
network_quarantine = Context.network_quarantine


# --- what the command line lists -------------------------------------------------------------------------


def network_tables() -> dict[str, str]:
    """The network evidence tables: name -> one-line summary."""
    from pipeline.network.tables import NETWORK_TABLES

    return {name: table.summary for name, table in NETWORK_TABLES.items()}
