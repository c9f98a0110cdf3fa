"""The Python API: everything the command line does, as functions returning result objects.

    from pipeline import api, open_warehouse

    api.ingest("data-samples/store", "warehouse.duckdb")      # an IngestSummary; api.run() the scheduled job
    with open_warehouse() as wh:              # the warehouse the CLI would use, read-only
        ev = wh.evidence("peer-invalidation", host="gonka1…", epoch=3)
        ev.frame, ev.stats, ev.provenance     # Polars rows, statistics, provenance footer
        print(ev.to_markdown())
        wh.query("SELECT status, count(*) AS n FROM inferences WHERE epoch_id = $epoch GROUP BY ALL", epoch=3)

Every command of `gonka-evidence` is a thin layer over this module, so what a notebook computes is
what the command line prints; nothing here prints. What a job says while it works (`run`'s log
lines, warnings, progress) goes to the callbacks of a `Listener` the caller passes
(`pipeline.core.events`).

Read and write are separate: `open_warehouse(path)` is read-only and sandboxed (DuckDB opened
read-only and locked so that SQL cannot reach files, the network or extensions, nor change
settings); `open_warehouse(path, write=True)` may ingest. The module-level functions open the
warehouse they need, use it and close it. docs/api.md is the reference.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from pipeline.core.events import Listener, Progress, listening
from pipeline.core.paths import DEFAULT_WAREHOUSE
from pipeline.core.roles import Role
from pipeline.ingest import MISSING_COLUMNS, MISSING_COLUMNS_QUARANTINED  # noqa: F401  (the CLI's warnings name them)
from pipeline.output.query_format import DEFAULT_TIMEOUT_S as QUERY_TIMEOUT_S
from pipeline.output.query_format import MAX_TIMEOUT_S as MAX_QUERY_TIMEOUT_S
from pipeline.output.query_format import QueryFormat, terminal_width

if TYPE_CHECKING:  # importing `pipeline` stays cheap: the engines load when a warehouse opens
    import duckdb
    import polars as pl

    from pipeline.evidence import EvidenceResult
    from pipeline.evidence.buildcheck import BuildCheck
    from pipeline.evidence.spec import EvidenceSpec, Option
    from pipeline.ingest.accounting import AccountingRow
    from pipeline.ingest.json_responses import JsonIngestSummary
    from pipeline.ingest.logs import LogIngestSummary
    from pipeline.ingest.runs import IngestSummary
    from pipeline.jobs.run import RunOutcome
    from pipeline.network.jobs import NetworkIngestSummary
    from pipeline.output.bundle import FileCheck
    from pipeline.output.query import NamedQuery, RenderedQuery
    from pipeline.output.safety import OutputGuard
    from pipeline.sources.store.base import SourceDescription

__all__ = [
    "BuildsLoaded",
    "BundleWritten",
    "Evidence",
    "Listener",
    "MAX_QUERY_TIMEOUT_S",
    "QUERY_TIMEOUT_S",
    "QueryFormat",
    "ReportWritten",
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
    "report",
    "resolve_sql",
    "resolve_warehouse",
    "run",
    "terminal_width",
    "user_error",
    "user_errors",
    "verify",
]

WAREHOUSE_ENV, HOST_ENV = "GONKA_EVIDENCE_WAREHOUSE", "GONKA_EVIDENCE_HOST"


def config_defaults(config: Path | None = None) -> tuple[str | None, Path]:
    """The host and warehouse used when none is given: those of the config file (`config`, else
    gonka-evidence.toml here), else no host and ./warehouse.duckdb. Unlike `run`, the bundled
    samples' host is never assumed."""
    from pipeline.jobs.config import DEFAULT_CONFIG_FILE, load_config
    from pipeline.sources.store.base import SourceError

    if config is not None and not Path(config).exists():
        raise SourceError(f"{config}: no such config file")
    if config is None and not DEFAULT_CONFIG_FILE.exists():
        return None, DEFAULT_WAREHOUSE
    cfg = load_config(Path(config) if config is not None else DEFAULT_CONFIG_FILE)
    return cfg.host, cfg.warehouse


def _resolve(path: str | Path | None, config: Path | None) -> tuple[Path, bool]:
    """The warehouse path (given, else GONKA_EVIDENCE_WAREHOUSE, else the config's, else the default)
    and whether it was named (a named warehouse goes into the reproducing commands)."""
    given = path or os.environ.get(WAREHOUSE_ENV) or None
    resolved = Path(given) if given else config_defaults(config)[1]
    return resolved, given is not None and resolved != DEFAULT_WAREHOUSE


def resolve_warehouse(path: str | Path | None = None, config: Path | None = None) -> Path:
    """The warehouse a command uses: `path`, else GONKA_EVIDENCE_WAREHOUSE, else the config's, else
    ./warehouse.duckdb."""
    return _resolve(path, config)[0]


def check_path(path: Path, role: Role, what: str = "", noun: str | None = None) -> None:
    """PathError unless `path` can play `role` (pipeline/core/roles.py); never blocks. `what` names the
    option in the message."""
    from pipeline.output.roles import check_path

    check_path(path, role, what, noun)


def check_outputs(
    outputs: dict[str, Path],
    *,
    inputs: Iterable[Path] = (),
    warehouse: Path | None = None,
    warehouse_option: str | None = None,
) -> None:
    """PathError when an output is, holds or lies inside an input, the warehouse or one of its sources."""
    from pipeline.output.roles import check_outputs

    check_outputs(outputs, inputs=inputs, warehouse=warehouse, warehouse_option=warehouse_option)


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
    from pipeline.warehouse.database import disk_errors, open_for_write, open_sandboxed

    config = Path(config) if config is not None else None
    resolved, named = _resolve(path, config)
    with disk_errors(resolved):
        con = open_for_write(resolved) if write else open_sandboxed(resolved)
    return Warehouse(resolved, con, host, config, named=named, write=write)


@dataclass
class Evidence:
    """One evidence table: rows, statistics, provenance, notes; renders in every CLI format."""

    result: EvidenceResult
    chart: dict | None = None  # a Vega-Lite chart of the table, where it has one (network `executors`)

    @property
    def name(self) -> str:
        return self.result.evidence

    def save_chart(self, path: str | Path) -> Path:
        """The chart as `path`: .json (Vega-Lite), .svg, .png or .html (vl-convert, no browser)."""
        import altair as alt

        if self.chart is None:
            raise ValueError(f"{self.name} has no chart")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        kind = alt.LayerChart if "layer" in self.chart else alt.Chart
        kind.from_dict(self.chart).save(str(path))
        return path

    @property
    def title(self) -> str:
        return self.result.title

    @property
    def frame(self) -> pl.DataFrame:
        return self.result.rows

    @property
    def stats(self) -> dict[str, Any]:
        return self.result.stats

    @property
    def provenance(self):
        return self.result.provenance

    @property
    def notes(self) -> list[str]:
        return self.result.notes

    def render(self, fmt: str) -> str:
        """The table as the `evidence` command prints it with ``--format fmt``."""
        from pipeline.output.render import render

        return render(self.result, fmt)

    def to_markdown(self) -> str:
        return self.render("markdown")

    def to_json(self) -> str:
        return self.render("json")

    def to_csv(self) -> str:
        return self.render("csv")

    def _repr_markdown_(self) -> str:  # Jupyter shows the Markdown table
        return self.to_markdown()

    @property
    def failed(self) -> list[str]:
        """The failed checks of a table that has checks (`preflight`: ``build: number name``); else empty."""
        return list(self.result.stats.get("failed", []))


@dataclass(frozen=True)
class BuildsLoaded:
    """A builds file loaded: its entries, and the warnings (hosts no escrow has as a participant)."""

    file: Path
    entries: int
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SourceReport:
    """What `doctor` says about a source: its description, and with a warehouse what it found there."""

    description: SourceDescription
    findings: dict[str, int] | None = None
    builds: BuildCheck | None = None  # with a warehouse: its build timeline against the vLLM logs
    # With a warehouse: one line per escrow of the source whose diff log is partial or whose copies disagree.
    escrow_lines: list[str] = field(default_factory=list)
    # With a warehouse: the newest run of the source that read it, and where every row it read went.
    accounting: tuple[str, list[AccountingRow]] | None = None


@dataclass(frozen=True)
class ReportWritten:
    """An epoch report written: ``path`` is OUT/epoch-N."""

    epoch: int
    host: str
    path: Path


@dataclass(frozen=True)
class BundleWritten:
    path: Path
    files: list[str]  # relative paths, MANIFEST.json included


@dataclass(frozen=True)
class Verified:
    """A bundle recomputed and compared: one check per file (status ok, differs, missing, unexpected)."""

    checks: list[FileCheck]

    @property
    def bad(self) -> list[FileCheck]:
        return [check for check in self.checks if check.status != "ok"]

    @property
    def ok(self) -> bool:
        return not self.bad


class Warehouse:
    """A warehouse connection, read-only and sandboxed unless opened with ``write=True``; close it,
    or use it as a context manager."""

    def __init__(
        self,
        path: Path,
        con: duckdb.DuckDBPyConnection,
        host: str | None = None,
        config: Path | None = None,
        *,
        named: bool = False,
        write: bool = False,
    ):
        self.path, self._con, self._host, self._config = path, con, host, config
        self._named = named  # a warehouse given by name goes into the reproducing commands
        self.writable = write

    @cached_property
    def host(self) -> str | None:
        """The default host of `evidence`: the one given, else GONKA_EVIDENCE_HOST, else the config's."""
        return self._host or os.environ.get(HOST_ENV) or config_defaults(self._config)[0]

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
        from pipeline.evidence import compute

        host = host or self.host
        if command is None:
            command = self._command(name, host, epoch, since, until, options)
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
        from pipeline.output.query import stream_query
        from pipeline.output.safety import output_file

        limit = QUERY_TIMEOUT_S if timeout_s is None else timeout_s
        if output is None:
            if sink is None:
                raise ValueError("write_query needs an output file or a sink")
            return stream_query(
                self._con, sql, params, fmt, sink, vertical=vertical, width=width, max_rows=max_rows, timeout_s=limit
            )
        self.guard().check(Path(output), "--output")
        with output_file(Path(output)) as file:
            return stream_query(
                self._con, sql, params, fmt, file, vertical=vertical, width=width, max_rows=max_rows, timeout_s=limit
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
            check_host(self._con, host)
        return infer(self._con, host)

    def check_builds(self, file: str | Path | None = None, host: str | None = None) -> BuildCheck:
        """A builds.toml (default: the loaded timeline) against the vLLM logs' start cycles (`builds check`)."""
        from pipeline.evidence.buildcheck import check, loaded_timeline
        from pipeline.evidence.request import check_host
        from pipeline.ingest.builds import read_builds

        if host is not None:  # a typo must not read as "not checked" or "consistent"
            check_host(self._con, host)
        timeline = read_builds(Path(file)) if file is not None else loaded_timeline(self._con)
        return check(self._con, timeline, host)

    def report(self, epoch: int, host: str | None = None, *, out: str | Path = "out") -> ReportWritten:
        """Write the epoch report to OUT/epoch-N/ (report.md, report.html, charts/, tables/), as
        `gonka-evidence report epoch` does. `host` defaults to the run configuration's host."""
        from pipeline.core.roles import Role
        from pipeline.jobs.config import load_config
        from pipeline.output.report import build_epoch_report, write_epoch_report
        from pipeline.output.roles import check_path, claim_output_dir

        cfg = load_config(self._config)
        host = _report_host(host or self._host, self._config)
        out = Path(out)
        self.guard().check(out / f"epoch-{epoch}", "--out")
        check_path(out, Role.OUTPUT_DIR, "--out")  # new, empty or the tool's own, as the CLI's option
        built = build_epoch_report(
            self._con,
            epoch,
            host,
            finality_lag=cfg.finality_lag_delta,
            warehouse_arg=str(self.path) if self._named else None,
            out_arg=None if out == Path("out") else str(out),
        )
        from pipeline.output.safety import OutputError

        try:
            claim_output_dir(out)
            return ReportWritten(epoch, host, write_epoch_report(built, out))
        except OSError as exc:  # --out is a file or a device, or cannot be written
            raise OutputError(f"--out {out}: cannot write the report there ({exc.strerror or exc})") from None

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
        from pipeline.output.bundle import build_bundle, write_bundle

        request = _bundle_request(self.path, self._named, self._config, host or self.host, epoch, since, until)
        self.guard().check(Path(out), "--out")
        files = build_bundle(self._con, request)
        return BundleWritten(write_bundle(files, Path(out)), sorted(files))

    def verify(self, directory: str | Path) -> Verified:
        """Recompute the bundle in `directory` from this warehouse and compare it file by file."""
        from pipeline.jobs.config import load_config
        from pipeline.output.bundle import read_request, verify_bundle

        if read_request(Path(directory)).epoch is None:  # no epoch report: no finality lag
            return Verified(verify_bundle(self._con, Path(directory)))
        return Verified(verify_bundle(self._con, Path(directory), load_config(self._config).finality_lag_delta))

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
        from pipeline.ingest.builds import load_builds
        from pipeline.warehouse.database import disk_errors

        warnings: list[str] = []
        with listening(Listener(warning=warnings.append)):
            with disk_errors(self.path):
                n = load_builds(self._writer(), Path(file))
        return BuildsLoaded(Path(file), n, warnings)

    def _writer(self) -> duckdb.DuckDBPyConnection:
        if not self.writable:
            from pipeline.warehouse.database import WarehouseError

            raise WarehouseError(f"{self.path}: opened read-only; open it with open_warehouse(..., write=True)")
        return self._con

    def _command(self, name: str, host: str | None, epoch, since, until, options: dict[str, Any]) -> str:
        from pipeline.evidence import reproducing_command

        return reproducing_command(
            name,
            host,
            epoch=epoch,
            since=since,
            until=until,
            warehouse=str(self.path) if self._named else None,
            **options,
        )

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = ", write=True" if self.writable else ""
        return f"Warehouse({str(self.path)!r}, host={self.host!r}{mode})"


def _report_host(host: str | None, config: Path | None) -> str:
    """The host of a report: the one given, else the run configuration's (the samples' focal host
    when there is no gonka-evidence.toml)."""
    from pipeline.evidence import EvidenceError
    from pipeline.jobs.config import load_config

    host = host or load_config(config).host
    if not host:
        raise EvidenceError("report needs --host ADDR (or host in gonka-evidence.toml)")
    return host


def _bundle_request(
    path: Path, named: bool, config: Path | None, host: str | None, epoch: int | None, since, until
) -> Any:
    """The bundle's request, checked: a missing host or a bad window is a one-line error before
    anything is computed."""
    from dataclasses import replace

    from pipeline.evidence import EvidenceError
    from pipeline.evidence.provenance import command_path
    from pipeline.jobs.config import load_config
    from pipeline.output.bundle import BundleRequest

    if not host:
        raise EvidenceError("bundle needs --host ADDR (the host address, gonka1…)")
    request = BundleRequest(
        host=host,
        epoch=epoch,
        since=since,
        until=until,
        warehouse_arg=command_path(path) if named else None,
    )
    if epoch is not None:  # only the epoch report uses the finality lag (and reads the run configuration)
        request = replace(request, finality_lag=load_config(config).finality_lag_delta)
    _ = request.window  # a bad window is an error here
    return request


# --- one call, one command: each opens the warehouse it needs and closes it ----------------------------


def ingest(
    source: str, warehouse: str | Path | None = None, *, label: str | None = None, progress: Progress | None = None
) -> IngestSummary:
    """`gonka-evidence ingest`: ingest a copy into the warehouse, opened for writing once the source
    has answered (a source that cannot be read leaves no new warehouse behind)."""
    from pipeline.ingest.copies import ingest_source
    from pipeline.warehouse.database import disk_errors

    opened: list[Warehouse] = []

    def connection() -> duckdb.DuckDBPyConnection:
        if not opened:
            opened.append(open_warehouse(warehouse, write=True))
        return opened[0]._con

    from pipeline.core.roles import is_url

    if not is_url(source):  # the warehouse is never the copy, inside it or holding it
        check_outputs({"warehouse": _resolve(warehouse, None)[0]}, inputs=[Path(source)])
    try:
        with disk_errors(_resolve(warehouse, None)[0]):
            return ingest_source(connection, source, label=label, progress=progress)
    finally:
        for wh in opened:
            wh.close()


def ingest_logs(
    files: Iterable[str | Path],
    *,
    host: str,
    warehouse: str | Path | None = None,
    kind: str | None = None,
    year: int | None = None,
    timezone: str | None = None,
) -> LogIngestSummary:
    """`gonka-evidence ingest-logs`: see `Warehouse.ingest_logs`."""
    with open_warehouse(warehouse, write=True) as wh:
        return wh.ingest_logs(files, host=host, kind=kind, year=year, timezone=timezone)


def ingest_json(files: Iterable[str | Path], warehouse: str | Path | None = None) -> JsonIngestSummary:
    """`gonka-evidence ingest-json`: see `Warehouse.ingest_json`."""
    with open_warehouse(warehouse, write=True) as wh:
        return wh.ingest_json(files)


def load_builds(file: str | Path, warehouse: str | Path | None = None) -> BuildsLoaded:
    """`gonka-evidence builds`: see `Warehouse.load_builds`."""
    with open_warehouse(warehouse, write=True) as wh:
        return wh.load_builds(file)


def infer_builds(host: str | None = None, out: str | Path | None = None, warehouse: str | Path | None = None) -> str:
    """`gonka-evidence builds infer`: see `Warehouse.infer_builds`; also written to `out` when given."""
    from pipeline.output.safety import output_file

    with open_warehouse(warehouse) as wh:
        text = wh.infer_builds(host)
        if out is not None:  # never over the warehouse or a source; whole or not at all
            wh.guard().check(Path(out), "--out")
            with output_file(Path(out)) as sink:
                sink.write(text.encode("utf-8"))
    return text


def init_config(
    host: str,
    *,
    config: str | Path = "gonka-evidence.toml",
    sources: Iterable[str] = (),
    vllm: str | None = None,
    builds: str | None = None,
) -> Path:
    """`gonka-evidence init`: write a commented run configuration for `host` to `config` (never over an
    existing file); see `pipeline.jobs.init`."""
    from pipeline.jobs.init import write_config

    return write_config(Path(config), host, sources=list(sources), vllm=vllm, builds=builds)


def check_builds(
    file: str | Path | None = None, host: str | None = None, warehouse: str | Path | None = None
) -> BuildCheck:
    """`gonka-evidence builds check`: see `Warehouse.check_builds`."""
    with open_warehouse(warehouse) as wh:
        return wh.check_builds(file, host)


def doctor(source: str, warehouse: str | Path | None = None) -> SourceReport:
    """`gonka-evidence doctor`: what a source holds, without ingesting; with `warehouse`, also what
    that warehouse found about the source."""
    from pipeline.sources.store import open_store

    store = open_store(source)
    try:
        findings = builds = accounting = None
        lines: list[str] = []
        if warehouse is not None:
            from pipeline.output.render.text import escrow_finding_lines

            with open_warehouse(warehouse) as wh:
                findings = wh.source_findings(store.source_id)
                lines = escrow_finding_lines(wh.escrow_findings(store.source_id))
                builds = wh.check_builds()
                accounting = wh.source_accounting(store.source_id)
        return SourceReport(store.describe(), findings, builds, lines, accounting)
    finally:
        store.close()


def run(
    config: str | Path | None = None, warehouse: str | Path | None = None, *, listener: Listener | None = None
) -> RunOutcome:
    """`gonka-evidence run`, the scheduled job: ingest what is new, write the due epoch reports.
    The job's log lines go to `listener.line` as they happen and are kept in `RunOutcome.log`;
    `listener.progress` gives the progress callback of each store ingest."""
    from dataclasses import replace

    from pipeline.jobs.run import run_job

    log: list[str] = []
    given = listener or Listener()

    def line(message: str) -> None:
        log.append(message)
        given.line(message)

    with listening(replace(given, line=line)):
        outcome = run_job(Path(config) if config is not None else None, Path(warehouse) if warehouse else None)
    outcome.log = log
    return outcome


def report(
    epoch: int, host: str | None = None, *, out: str | Path = "out", warehouse: str | Path | None = None
) -> ReportWritten:
    """`gonka-evidence report epoch N`: see `Warehouse.report`. Without a host (given or configured)
    it is an error before the warehouse is opened."""
    host = _report_host(host, None)
    with open_warehouse(warehouse) as wh:
        return wh.report(epoch, host, out=out)


def bundle(
    out: str | Path,
    host: str | None = None,
    *,
    epoch: int | None = None,
    since: str | None = None,
    until: str | None = None,
    warehouse: str | Path | None = None,
) -> BundleWritten:
    """`gonka-evidence bundle`: see `Warehouse.bundle`; `host` is required here. A missing host or a
    bad window is an error before the warehouse is opened."""
    _bundle_request(*_resolve(warehouse, None), None, host, epoch, since, until)
    with open_warehouse(warehouse, host=host) as wh:
        return wh.bundle(out, host, epoch=epoch, since=since, until=until)


def verify(directory: str | Path, warehouse: str | Path | None = None) -> Verified:
    """`gonka-evidence verify`: see `Warehouse.verify`. A directory that is not a bundle is an error
    before the warehouse is opened."""
    from pipeline.output.bundle import read_request

    read_request(Path(directory))
    with open_warehouse(warehouse) as wh:
        return wh.verify(directory)


# --- what the command line lists -------------------------------------------------------------------------


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
    from pipeline.core.roles import is_url
    from pipeline.network.jobs import network_ingest as ingest_lake

    copies = list(copies)
    # The lake is never a copy, inside one or holding one; then it is new, empty or a lake.
    check_outputs({"lake": Path(lake)}, inputs=[Path(c) for c in copies if not is_url(c)])
    check_path(Path(lake), Role.LAKE_WRITE, "lake")
    return ingest_lake(
        copies,
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
) -> Evidence:
    """`gonka-evidence network evidence`: a network table from the lake (partials per partition on the
    cluster, reduced here), with the lake's provenance footer; `Evidence.chart` holds its chart, if any."""
    from pipeline.network.jobs import network_evidence as lake_evidence
    from pipeline.network.tables import NETWORK_TABLES

    result = lake_evidence(
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
    )
    chart = NETWORK_TABLES[name].chart
    return Evidence(result, chart=chart(result) if chart else None)


def network_quarantine(lake: str | Path) -> pl.DataFrame:
    """The quarantine rows of every partition of the lake (forks, disagreeing sealed rows, …)."""
    from pipeline.network.jobs import lake_quarantine

    return lake_quarantine(lake)


def network_tables() -> dict[str, str]:
    """The network evidence tables: name -> one-line summary."""
    from pipeline.network.tables import NETWORK_TABLES

    return {name: table.summary for name, table in NETWORK_TABLES.items()}


def evidence_tables() -> dict[str, EvidenceSpec]:
    """Every evidence table, name → spec (columns, options, summary), in report order."""
    from pipeline.evidence import EVIDENCE

    return EVIDENCE


def evidence_options() -> dict[str, tuple[Option, list[str]]]:
    """Every table option once (``--by-escrow``, …), with the tables that accept it."""
    from pipeline.evidence.registry import shared_options

    return shared_options(evidence_tables())


def evidence_reference() -> str:
    """Every evidence table described from its spec: summary, options, columns and their definitions
    (Markdown; docs/evidence.md is this text)."""
    from pipeline.evidence.catalogue import reference

    return reference(evidence_tables())


def schema() -> tuple[pl.DataFrame, pl.DataFrame]:
    """The public views and commented tables of a new warehouse, (name, kind, comment), and their columns,
    (name, column_name, data_type): what docs/schema.md lists, from the views' ``COMMENT ON``."""
    from pipeline.core.paths import sql_text
    from pipeline.warehouse.database import fetch_frame, open_for_write

    con = open_for_write(":memory:")
    try:
        return fetch_frame(con, sql_text("warehouse/catalog/relations.sql")), fetch_frame(
            con, sql_text("warehouse/catalog/columns.sql")
        )
    finally:
        con.close()


def source_kinds() -> list[dict[str, Any]]:
    """Every kind of `[[sources]]` entry: name, summary, keys, tables it fills, whether it is a log
    kind, and how an entry without `kind` is recognised (docs/source-kinds.md lists them)."""
    from pipeline.ingest.kinds import describe_kinds

    return describe_kinds()


def log_kind_help() -> str:
    """The log kinds `ingest-logs --kind` accepts, as its help text says them."""
    from pipeline.ingest.kinds import log_kind_help

    return log_kind_help()


def named_queries(*, required: bool = False) -> dict[str, NamedQuery]:
    """The named queries of ``sql/queries/`` (``gonka-evidence query --list``); with `required`, none
    found is an error (an incomplete installation)."""
    from pipeline.output.query import QUERIES_DIR, QueryError, named_queries

    queries = named_queries()
    if required and not queries:
        raise QueryError(
            f"{QUERIES_DIR}: no named queries found (an incomplete installation? reinstall gonka-evidence)"
        )
    return queries


def resolve_sql(sql: str | None, file: Path | None = None) -> str:
    """The SQL of `sql` (text, or the name of a named query) or of `file`."""
    from pipeline.output.query import resolve_sql

    return resolve_sql(sql, file)


def parse_params(items: list[str]) -> dict[str, str]:
    """``["k=v", …]`` as query parameters (``$k``)."""
    from pipeline.output.query import parse_params

    return parse_params(items)


def __getattr__(name: str) -> Any:
    """The library's error types, looked up on first use (importing them loads Polars)."""
    if name == "QueryError":
        from pipeline.output.query import QueryError

        return QueryError
    if name == "OutputError":
        from pipeline.output.safety import OutputError

        return OutputError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def user_errors() -> tuple[type[Exception], ...]:
    """The library's errors that mean the input or the request is wrong (the CLI prints them as one
    line, exit code 1). EvidenceError is included only once its module was imported (none can have
    been raised otherwise): importing it loads every evidence table and the statistics libraries."""
    import sys

    from pipeline.core.env import EnvError
    from pipeline.core.roles import PathError
    from pipeline.ingest.builds import BuildsError
    from pipeline.output.query import QueryError
    from pipeline.output.safety import OutputError
    from pipeline.sources.errors import SourceError
    from pipeline.warehouse.database import WarehouseError

    evidence = sys.modules.get("pipeline.evidence.window")
    lake, cluster = sys.modules.get("pipeline.network.lake"), sys.modules.get("pipeline.network.cluster")
    return (
        SourceError,
        WarehouseError,
        QueryError,
        BuildsError,
        EnvError,
        OutputError,
        PathError,
        *([evidence.EvidenceError] if evidence else []),
        *([lake.LakeError] if lake else []),
        *([cluster.ClusterError] if cluster else []),
    )


def user_error(exc: Exception) -> Exception | None:
    """The one-line error the CLI prints for `exc`: itself when it is one of `user_errors()`, DuckDB
    running out of memory as an OutOfMemory naming the variable to raise; None for anything else (a bug)."""
    from pipeline.warehouse.database import out_of_memory, ran_out_of_memory

    if isinstance(exc, user_errors()):
        return exc
    return out_of_memory("the command") if ran_out_of_memory(exc) else None
