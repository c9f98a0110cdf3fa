"""The Python API: everything the command line does, as methods of one facade returning result objects.

    from pipeline import api, open_warehouse

    api.ingest("data-samples/store", "warehouse.duckdb")      # an IngestSummary; api.run() the scheduled job
    with open_warehouse() as wh:              # the warehouse the CLI would use, read-only
        ev = wh.evidence("peer-invalidation", host="gonka1…", epoch=3)
        ev.frame, ev.stats, ev.provenance     # Polars rows, statistics, provenance footer
        print(ev.to_markdown())
        wh.query("SELECT status, count(*) AS n FROM inferences WHERE epoch_id = $epoch GROUP BY ALL", epoch=3)

`Warehouse` is the facade: the warehouse of what a command resolves once (`Settings`: the warehouse, the
default host, the run configuration), with one method per command, each calling the one task of its stage
(`pipeline.output.report.task`, `pipeline.output.bundle`, `pipeline.ingest.copies`, …); every command calls
`Warehouse.resolve(...)` and its method, and each module-level function is that method on the warehouse of
its arguments (`Context` is its deprecated older form). The commands that need no warehouse (a source's
`doctor`, the lake's `network_*`) are module functions. Every command of `gonka-evidence` is a thin layer
over this module,
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
from functools import cached_property, wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from pipeline.core.errors import UserError
from pipeline.core.events import Listener, Progress
from pipeline.core.roles import Role  # noqa: F401  (the roles of check_path)
from pipeline.ingest import missing_column_warnings  # noqa: F401  (the CLI says them)
from pipeline.jobs.listing import (  # noqa: F401  (the facade's names besides its commands)
    check_address,
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
from pipeline.output.query.formats import DEFAULT_TIMEOUT_S as QUERY_TIMEOUT_S
from pipeline.output.query.formats import MAX_TIMEOUT_S as MAX_QUERY_TIMEOUT_S
from pipeline.output.query.formats import QueryFormat, terminal_width

if TYPE_CHECKING:  # importing `pipeline` stays cheap: the engines load when a warehouse opens
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
    from pipeline.output.doctor.report import SourceReport
    from pipeline.output.guards.safety import OutputError, OutputGuard
    from pipeline.output.query.execute import QueryError, RenderedQuery
    from pipeline.output.report.task import ReportWritten

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
    "check_address",
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
        from pipeline.output.doctor.report import SourceReport

        return SourceReport
    if name == "ReportWritten":
        from pipeline.output.report.task import ReportWritten

        return ReportWritten
    if name == "QueryError":
        from pipeline.output.query.execute import QueryError

        return QueryError
    if name == "OutputError":
        from pipeline.output.guards.safety import OutputError

        return OutputError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def resolve_warehouse(path: str | Path | None = None, config: Path | None = None) -> Path:
    """The warehouse a command uses: `path`, else GONKA_EVIDENCE_WAREHOUSE, else the config's, else
    ./warehouse.duckdb (`Settings.resolve`)."""
    return Warehouse.resolve(path, config=config).path


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


# --- the commands that need no warehouse: a source's doctor, the lake's network commands -----------------


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
    from pipeline.network import jobs

    return jobs.network_ingest(
        list(copies),
        lake,
        workers=workers,
        scheduler=scheduler,
        buckets=buckets,
        memory_limit=memory_limit,
        piece_rows=piece_rows,
        progress=progress,
    )


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


def network_quarantine(lake: str | Path) -> pl.DataFrame:
    """The quarantine rows of every partition of the lake (forks, disagreeing sealed rows, …)."""
    from pipeline.network.jobs import lake_quarantine

    return lake_quarantine(lake)


def network_tables() -> dict[str, str]:
    """The network evidence tables: name -> one-line summary."""
    from pipeline.network.tables import NETWORK_TABLES

    return {name: table.summary for name, table in NETWORK_TABLES.items()}


def doctor(source: str, warehouse: str | Path | None = None, *, config: str | Path | None = None) -> SourceReport:
    """`gonka-evidence doctor`: what a source holds, without ingesting; with a warehouse named (`warehouse`,
    or `config`'s), also what that warehouse found about the source (`Warehouse.doctor`)."""
    from pipeline.output.doctor.report import doctor as source_doctor

    if warehouse is None and config is None:  # the source alone: no warehouse is opened
        return source_doctor(source)
    with Warehouse.resolve(warehouse, config=config) as wh:
        return wh.doctor(source)


class Warehouse:
    """The facade every command calls: the warehouse of a command's resolved `Settings`, read-only and
    sandboxed unless ``write=True``, with one method per command, each calling the one task of its stage.
    `con`: an open connection; without it the warehouse is opened on first use (a command whose input is
    refused first never creates or locks a warehouse). Close it, or use it as a context manager."""

    def __init__(
        self, context: Settings | Context, con: duckdb.DuckDBPyConnection | None = None, *, write: bool = False
    ):
        self.settings = context.settings if isinstance(context, Context) else context
        self.path, self._opened, self.writable = self.settings.warehouse, con, write

    @classmethod
    def resolve(
        cls,
        warehouse: str | Path | None = None,
        *,
        host: str | None = None,
        config: str | Path | None = None,
        write: bool = False,
    ) -> Warehouse:
        """The warehouse of `Settings.resolve(warehouse, host=, config=)` (argument, else environment, else
        config file, else default), opened on first use: what every command calls."""
        from pipeline.jobs.settings import Settings

        return cls(Settings.resolve(warehouse, host=host, config=config), write=write)

    def open(self) -> Warehouse:
        """This warehouse opened now (a missing or locked one is an error here, not at first use)."""
        self._connect()
        return self

    @property
    def _con(self) -> duckdb.DuckDBPyConnection:
        return self._connect()

    def _connect(self) -> duckdb.DuckDBPyConnection:
        """The connection, opened on first use (created when missing if writable; one writer at a time)."""
        if self._opened is None:
            from pipeline.warehouse.database import disk_errors, open_for_write, open_sandboxed

            with disk_errors(self.path):
                self._opened = open_for_write(self.path) if self.writable else open_sandboxed(self.path)
        return self._opened

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
        from pipeline.output.query.execute import resolve_sql, run_query

        return run_query(self._con, resolve_sql(sql, None), params)

    def render_query(
        self, sql: str, params: dict[str, Any], fmt: QueryFormat, *, vertical: bool = False, width: int | None = None
    ) -> RenderedQuery:
        """`sql` rendered exactly as the `query` command prints it (`pipeline.output.query.execute.render_query`)."""
        from pipeline.output.query.execute import render_query

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
        from pipeline.output.query.execute import write_query

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
        from pipeline.output.guards.safety import OutputGuard

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

    def infer_builds(self, host: str | None = None, out: str | Path | None = None) -> str:
        """A proposed builds.toml (text) from the start cycles of the vLLM logs (`builds infer`); also written
        to `out` when given (never over the warehouse or a source; whole or not at all)."""
        from pipeline.evidence.buildcheck import infer
        from pipeline.evidence.request import check_host
        from pipeline.output.guards.safety import output_file

        if host is not None:  # a typo must not read as "no start cycles"
            host = check_host(self._con, host)
        text = infer(self._con, host)
        if out is not None:
            self.guard().check(Path(out), "--out")
            with output_file(Path(out)) as sink:
                sink.write(text.encode("utf-8"))
        return text

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
        `gonka-evidence report epoch` does. `host` defaults to the resolved one (the samples' focal host only on
        the samples' own warehouse); none is an error naming where to set it."""
        from pipeline.output.report.task import write_report

        if not (host or self.host or self.settings.samples_host):  # no host: said before the warehouse opens
            self.settings.host_for(None, "report")
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

        # Not a bundle: an error before the warehouse opens. No epoch report: no finality lag.
        has_report = read_request(Path(directory)).epoch is not None
        return verify(self._con, Path(directory), self.settings.run.finality_lag_delta if has_report else None)

    def doctor(self, source: str) -> SourceReport:
        """What a source holds, without ingesting, and what this warehouse found about it (`doctor --warehouse`)."""
        from pipeline.output.doctor.report import doctor

        return doctor(source, lambda: self._con)

    def run(self, *, listener: Listener | None = None) -> RunOutcome:
        """`gonka-evidence run`, the scheduled job on these settings: ingest what is new, write the due epoch
        reports. It opens (and publishes) the warehouse itself, so this one must not be open yet. The job's log
        lines go to `listener.line` as they happen and are kept in `RunOutcome.log`; `listener.progress` gives
        the progress callback of each store ingest."""
        from pipeline.jobs.run import run_logged

        if self._opened is not None:
            from pipeline.warehouse.database import WarehouseError

            raise WarehouseError(f"{self.path}: run opens the warehouse itself; call it on Warehouse.resolve(...)")
        return run_logged(self.settings, listener)

    # --- writing (write=True) ----------------------------------------------------------------------------

    def ingest(self, source: str, *, label: str | None = None, progress: Progress | None = None) -> IngestSummary:
        """Ingest a devshard database copy (a postgresql:// URL, `postgres`, or a SQLite store
        directory): only what moved since its last ingest. `progress(table, advance, total)` is called
        as rows are read. A warehouse not open yet is opened once the source has answered (a source that
        cannot be read leaves no new warehouse behind)."""
        from pipeline.core.roles import is_url
        from pipeline.core.text import label_refusal
        from pipeline.ingest.copies import ingest_source
        from pipeline.sources.errors import SourceError
        from pipeline.warehouse.database import disk_errors

        if label and (refusal := label_refusal(label, "--label")):
            raise SourceError(refusal)
        if not is_url(source):  # the warehouse is never the copy, inside it or holding it
            check_outputs({"warehouse": self.path}, inputs=[Path(source)])
        with disk_errors(self.path):
            return ingest_source(self._writer, source, label=label, progress=progress)

    def ingest_logs(
        self,
        files: Iterable[str | Path],
        *,
        host: str | None = None,
        kind: str | None = None,
        year: int | None = None,
        timezone: str | None = None,
    ) -> LogIngestSummary:
        """Ingest vLLM logs, validator logs, /metrics scrapes or PoC results of one host (`host` None: the
        resolved one; `kind` None: detected per file)."""
        from pipeline.ingest.logs import check_log_request, ingest_logs
        from pipeline.warehouse.database import disk_errors

        host = check_log_request(host or self.settings.host_for(None, "ingest-logs"), kind, year)  # before it opens
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
        if self._opened is not None:
            self._opened.close()

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = ", write=True" if self.writable else ""
        return f"Warehouse({str(self.path)!r}, host={self.host!r}{mode})"


def _each_call(name: str, *, write: bool = False) -> Any:
    """`Warehouse.<name>` on this Context's warehouse, opened for the one call and closed."""
    method = getattr(Warehouse, name)

    @wraps(method)
    def call(self: Context, *args: Any, **kwargs: Any) -> Any:
        with Warehouse(self.settings, write=write) as wh:
            return method(wh, *args, **kwargs)

    return call


class Context:
    """Deprecated (kept: the public API only grows): use `Warehouse.resolve(...)`, whose methods these are,
    each on the warehouse opened for the one call and closed. `warehouse`, `host`, `config`: the arguments
    (None: not given), resolved once into `settings`, a frozen `Settings`."""

    def __init__(
        self,
        warehouse: str | Path | None = None,
        *,
        host: str | None = None,
        config: str | Path | None = None,
        settings: Settings | None = None,
    ):
        self.given, self.host_arg = warehouse, host
        self.config = Path(config) if config is not None else None
        self._settings = settings

    @cached_property
    def settings(self) -> Settings:
        """The settings, resolved once (on first use: a command that fails earlier reads no config)."""
        from pipeline.jobs.settings import Settings

        return self._settings or Settings.resolve(self.given, host=self.host_arg, config=self.config)

    path = property(lambda self: self.settings.warehouse, doc="The warehouse (see `Settings.resolve`).")
    named = property(lambda self: self.settings.warehouse_named, doc="Whether the warehouse was named.")
    host = property(lambda self: self.settings.host, doc="The default host (see `Settings.resolve`).")
    finality_lag = property(lambda self: self.settings.run.finality_lag_delta, doc="The run's finality lag.")

    def report_host(self, host: str | None) -> str:
        """The host of a report: the one given, else the resolved one; none is an error naming where to set it."""
        return host or self.settings.host_for(None, "report")

    def bundle_request(self, host: str | None, epoch: int | None, since: str | None, until: str | None) -> Any:
        """The bundle's request, checked before anything is computed: see `bundle_request`."""
        return bundle_request(self.settings, host, epoch, since, until)

    def open(self, *, write: bool = False) -> Warehouse:
        """The warehouse, opened now: see `open_warehouse`."""
        return Warehouse(self.settings, write=write).open()

    def doctor(self, source: str) -> SourceReport:
        """`gonka-evidence doctor`: see `doctor`."""
        return doctor(source, self.given, config=self.config)

    ingest = _each_call("ingest", write=True)
    ingest_logs = _each_call("ingest_logs", write=True)
    ingest_json = _each_call("ingest_json", write=True)
    load_builds = _each_call("load_builds", write=True)
    infer_builds = _each_call("infer_builds")
    check_builds = _each_call("check_builds")
    run = _each_call("run")
    report = _each_call("report")
    bundle = _each_call("bundle")
    verify = _each_call("verify")
    network_ingest = staticmethod(network_ingest)
    network_evidence = staticmethod(network_evidence)
    network_quarantine = staticmethod(network_quarantine)

    def __repr__(self) -> str:
        return f"Context({self.given!r}, host={self.host_arg!r}, config={self.config!r})"


def open_warehouse(
    path: str | Path | None = None,
    *,
    host: str | None = None,
    config: str | Path | None = None,
    write: bool = False,
) -> Warehouse:
    """The warehouse at `path`, opened now: read-only and sandboxed, or with `write` open for ingesting
    (created when missing; one writer at a time). Without `path`, the one the CLI resolves:
    ``GONKA_EVIDENCE_WAREHOUSE``, else the config's warehouse (`config`, else gonka-evidence.toml
    here), else ./warehouse.duckdb. `host` is the default host of `evidence`, `report` and `bundle`;
    without it, ``GONKA_EVIDENCE_HOST``, else the config's host, looked up when first needed."""
    return Warehouse.resolve(path, host=host, config=config, write=write).open()


# --- one call, one command: the `Warehouse` method on the warehouse of the call's arguments, then closed ---


def ingest(
    source: str,
    warehouse: str | Path | None = None,
    *,
    config: str | Path | None = None,
    label: str | None = None,
    progress: Progress | None = None,
) -> IngestSummary:
    """`gonka-evidence ingest`: see `Warehouse.ingest`."""
    with Warehouse.resolve(warehouse, config=config, write=True) as wh:
        return wh.ingest(source, label=label, progress=progress)


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
    with Warehouse.resolve(warehouse, config=config, write=True) as wh:
        return wh.ingest_logs(files, host=host, kind=kind, year=year, timezone=timezone)


def ingest_json(
    files: Iterable[str | Path], warehouse: str | Path | None = None, *, config: str | Path | None = None
) -> JsonIngestSummary:
    """`gonka-evidence ingest-json`: see `Warehouse.ingest_json`."""
    with Warehouse.resolve(warehouse, config=config, write=True) as wh:
        return wh.ingest_json(files)


def load_builds(
    file: str | Path, warehouse: str | Path | None = None, *, config: str | Path | None = None
) -> BuildsLoaded:
    """`gonka-evidence builds`: see `Warehouse.load_builds`."""
    with Warehouse.resolve(warehouse, config=config, write=True) as wh:
        return wh.load_builds(file)


def infer_builds(
    host: str | None = None,
    out: str | Path | None = None,
    warehouse: str | Path | None = None,
    *,
    config: str | Path | None = None,
) -> str:
    """`gonka-evidence builds infer`: see `Warehouse.infer_builds`."""
    with Warehouse.resolve(warehouse, config=config) as wh:
        return wh.infer_builds(host, out)


def check_builds(
    file: str | Path | None = None,
    host: str | None = None,
    warehouse: str | Path | None = None,
    *,
    config: str | Path | None = None,
) -> BuildCheck:
    """`gonka-evidence builds check`: see `Warehouse.check_builds`."""
    with Warehouse.resolve(warehouse, config=config) as wh:
        return wh.check_builds(file, host)


def run(
    config: str | Path | None = None, warehouse: str | Path | None = None, *, listener: Listener | None = None
) -> RunOutcome:
    """`gonka-evidence run`, the scheduled job: see `Warehouse.run`."""
    with Warehouse.resolve(warehouse, config=config) as wh:
        return wh.run(listener=listener)


def report(
    epoch: int,
    host: str | None = None,
    *,
    out: str | Path = "out",
    warehouse: str | Path | None = None,
    config: str | Path | None = None,
) -> ReportWritten:
    """`gonka-evidence report epoch N`: see `Warehouse.report`."""
    with Warehouse.resolve(warehouse, config=config) as wh:
        return wh.report(epoch, host, out=out)


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
    """`gonka-evidence bundle`: see `Warehouse.bundle`; `host` defaults to the resolved one."""
    with Warehouse.resolve(warehouse, host=host, config=config) as wh:
        return wh.bundle(out, host, epoch=epoch, since=since, until=until)


def verify(directory: str | Path, warehouse: str | Path | None = None, *, config: str | Path | None = None) -> Verified:
    """`gonka-evidence verify`: see `Warehouse.verify`."""
    with Warehouse.resolve(warehouse, config=config) as wh:
        return wh.verify(directory)
