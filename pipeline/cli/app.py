"""The `gonka-evidence` command line: a few lines per command over the library.

Conventions shared by every command (set up here, once): data on stdout, progress
and summaries on stderr; `--quiet`/`--verbose`; the exit codes below; one-line errors,
never a traceback for a user error.
"""

from __future__ import annotations

import inspect
import os
import sys
from contextlib import ExitStack, redirect_stdout
from enum import Enum
from functools import wraps
from pathlib import Path
from typing import Annotated

import typer

from pipeline.cli.evidence_options import OPTIONS_KEY, EvidenceCommand
from pipeline.cli.process import say_interrupted, skip_teardown
from pipeline.core.paths import DEFAULT_WAREHOUSE
from pipeline.core.version import pipeline_version
from pipeline.output.query_format import QueryFormat, terminal_width

EXIT_USER_ERROR = 1  # bad arguments, missing source, failed query: a one-line message
# 2 is click's own: the command line itself is wrong (unknown option, missing argument, bad choice).
EXIT_QUARANTINED = 3  # rows were quarantined and --strict was given
EXIT_CODES_HELP = (
    "Exit codes: 0 success; 1 user error (one-line message on stderr); 2 usage error; 3 rows quarantined with --strict."
)

app = typer.Typer(
    help="Reproducible evidence about Gonka devshard hosts: ingest database copies into a DuckDB warehouse, "
    "query it, and print evidence tables. Data goes to stdout; progress and summaries to stderr. " + EXIT_CODES_HELP,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    # Help texts are plain text: "[[builds]]" or "[since, until)" must print as written.
    rich_markup_mode=None,
)

WarehouseOpt = Annotated[
    Path, typer.Option("--warehouse", "-w", help="DuckDB warehouse file.", envvar="GONKA_EVIDENCE_WAREHOUSE")
]
# For commands that fall back to the config file's warehouse when none is given.
ConfigWarehouseOpt = Annotated[
    Path | None,
    typer.Option(
        "--warehouse",
        "-w",
        envvar="GONKA_EVIDENCE_WAREHOUSE",
        help="DuckDB warehouse file (default: the config's warehouse, else ./warehouse.duckdb).",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="Config file whose host and warehouse are the defaults (default: gonka-evidence.toml here, if any).",
    ),
]


VERBOSITY_OPTIONS = ("quiet", "verbose")


def _set_verbosity(level: int):
    def callback(value: bool) -> None:
        if value:
            from pipeline.core.verbosity import set_verbosity

            set_verbosity(level)

    return callback


def _verbosity_options() -> list[inspect.Parameter]:
    from pipeline.core.verbosity import QUIET, VERBOSE

    quiet = typer.Option(
        "--quiet",
        "-q",
        help="Only data and errors: no progress or summaries on stderr.",
        callback=_set_verbosity(QUIET),
        expose_value=False,
    )
    verbose = typer.Option(
        "--verbose", "-v", help="More detail on stderr.", callback=_set_verbosity(VERBOSE), expose_value=False
    )
    return [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[bool, option])
        for name, option in zip(VERBOSITY_OPTIONS, (quiet, verbose))
    ]


def _fail(message: str, code: int = EXIT_USER_ERROR) -> None:
    from pipeline.cli.console import err
    from pipeline.core.secrets import scrub

    err.print(f"error: {scrub(' '.join(message.split()))}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _interrupted() -> None:
    say_interrupted()
    raise typer.Exit(130)


def prints_data(func):
    """Marks a command whose stdout is data (query results, tables); under `user_errors` it is
    put below it. Every other command's stdout is a summary and goes to stderr."""
    func.prints_data = True
    return func


def _one_line_errors() -> tuple[type[Exception], ...]:
    """The library's errors that end a command with a one-line message. EvidenceError is looked up
    only when its module was imported (none of it can have been raised otherwise): importing it loads
    every evidence table and scipy, seconds that `ingest` of an unchanged copy should not pay."""
    from pipeline.ingest.builds import BuildsError
    from pipeline.output.query import QueryError
    from pipeline.sources.errors import SourceError
    from pipeline.warehouse.database import WarehouseError

    evidence = sys.modules.get("pipeline.evidence.window")
    return (SourceError, WarehouseError, QueryError, BuildsError, *([evidence.EvidenceError] if evidence else []))


def _is_interrupt(exc: BaseException | None) -> bool:
    """A Ctrl-C that DuckDB caught during a query: it raises its own error instead of KeyboardInterrupt
    (the interrupted statement, a COMMIT included, took effect whole or not at all); a Ctrl-C inside
    Python code that DuckDB was calling (an Arrow source it registers or scans) comes back as DuckDB's
    error naming the KeyboardInterrupt, sometimes with it as its cause. The clean-up that follows (a rollback, the run's `failed` row) may
    raise again on the aborted transaction, so the exceptions it happened during count too."""
    seen, pending = set(), [exc]
    while pending:
        exc = pending.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        duckdb_error = type(exc).__module__.lstrip("_").startswith("duckdb")
        if (
            isinstance(exc, KeyboardInterrupt)
            or type(exc).__name__ == "InterruptException"
            or (isinstance(exc, RuntimeError) and str(exc).startswith("Query interrupted"))
            or (duckdb_error and "failed: KeyboardInterrupt" in str(exc))
        ):
            return True
        pending += [exc.__cause__, exc.__context__]
    return False


def user_errors(func):
    """The conventions of every command: the library's one-line errors become exit code 1
    without a traceback; the command takes --quiet and --verbose; and unless it `prints_data`,
    what it prints goes to stderr (nowhere with --quiet)."""

    @wraps(func)
    def wrapper(*args, **kwargs):
        from pipeline.core.verbosity import NORMAL, verbosity

        for name in VERBOSITY_OPTIONS:
            kwargs.pop(name, None)  # handled by the option's callback, not the command
        try:
            with ExitStack() as stack:
                if not getattr(func, "prints_data", False):
                    # What a command without data output prints is a summary: stderr, or nothing with --quiet.
                    sink = sys.stderr if verbosity() >= NORMAL else stack.enter_context(open(os.devnull, "w"))
                    stack.enter_context(redirect_stdout(sink))
                return func(*args, **kwargs)
        except Exception as exc:
            if _is_interrupt(exc):
                _interrupted()
            if not isinstance(exc, _one_line_errors()):
                raise
            _fail(str(exc))
        except KeyboardInterrupt:
            _interrupted()

    # Typer reads the options from the signature; these two are handled by their callbacks.
    signature = inspect.signature(func, eval_str=True)
    wrapper.__signature__ = signature.replace(parameters=[*signature.parameters.values(), *_verbosity_options()])
    return wrapper


def _print_version(value: bool) -> None:
    if value:
        typer.echo(pipeline_version())
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", callback=_print_version, is_eager=True)
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only data and errors, for every command.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="More detail on stderr, for every command.")] = False,
) -> None:
    from pipeline.core.verbosity import NORMAL, QUIET, VERBOSE, set_verbosity

    set_verbosity(QUIET if quiet else VERBOSE if verbose else NORMAL)


class EvidenceFormat(str, Enum):
    """The formats of pipeline.output.render (kept equal to its FORMATS by a test)."""

    markdown = "markdown"
    csv = "csv"
    json = "json"
    table = "table"


def complete_named_query(incomplete: str) -> list[str]:
    from pipeline.output.query import named_queries

    return [name for name in named_queries() if name.startswith(incomplete)]


def complete_evidence_name(incomplete: str) -> list[str]:
    from pipeline.evidence import EVIDENCE

    return [name for name in EVIDENCE if name.startswith(incomplete)]


@app.command()
@user_errors
def ingest(
    source: Annotated[
        str, typer.Argument(help="postgresql:// URL, `postgres` (libpq environment), or a SQLite store directory.")
    ],
    warehouse: WarehouseOpt = DEFAULT_WAREHOUSE,
    label: Annotated[str | None, typer.Option(help="A name for this copy in provenance footers.")] = None,
    strict: Annotated[bool, typer.Option(help="Exit 3 when rows were quarantined.")] = False,
) -> None:
    """Ingest a devshard database copy (read-only) into the warehouse.

    Only what moved since the last ingest of the copy is read; a PostgreSQL copy whose change markers
    are those of its last ingest is recorded without being read at all.

    Example: gonka-evidence ingest data-samples/store --warehouse warehouse.duckdb
    """
    from pipeline.cli.console import ingest_progress, print_ingest_summary
    from pipeline.ingest.copies import ingest_source
    from pipeline.warehouse.database import open_for_write

    opened = []  # the warehouse, opened once the source has answered (a bad source leaves none behind)

    def connection():
        if not opened:
            opened.append(open_for_write(warehouse))
        return opened[0]

    try:
        with ingest_progress() as progress:
            summary = ingest_source(connection, source, label=label, progress=progress)
    finally:
        for con in opened:
            con.close()
    print_ingest_summary(summary)
    # The warehouse and the source are closed: the process can end without the interpreter's
    # teardown (a sixth of a no-op ingest's CPU; pipeline/cli/process.py).
    skip_teardown()
    if strict and summary.quarantined:
        raise typer.Exit(EXIT_QUARANTINED)


@app.command()
@user_errors
def builds(
    file: Annotated[Path, typer.Argument(help="builds.toml with [[builds]] host, label, since entries.")],
    warehouse: WarehouseOpt = DEFAULT_WAREHOUSE,
) -> None:
    """Replace the host build timeline with the entries of FILE.

    Example: gonka-evidence builds data-samples/builds.toml
    """
    from pipeline.cli.console import info
    from pipeline.ingest.builds import load_builds
    from pipeline.warehouse.database import open_for_write

    con = open_for_write(warehouse)
    n = load_builds(con, file)
    con.close()
    info(f"host_builds: {n} entries from {file}")


@app.command()
@user_errors
@prints_data
def doctor(
    source: Annotated[str, typer.Argument(help="postgresql:// URL, `postgres`, or a SQLite store directory.")],
    warehouse: Annotated[
        Path | None,
        typer.Option(
            "--warehouse",
            "-w",
            help="Also show what this warehouse found about the source (copies that disagree, checkpoint cross-checks).",
        ),
    ] = None,
) -> None:
    """Describe what a source holds (layout, release line, lineage, rows per epoch, checkpoints) without ingesting.

    Example: gonka-evidence doctor data-samples/store
    """
    from pipeline.cli.console import print_description
    from pipeline.sources.store import open_store

    store = open_store(source)
    try:
        findings = None
        if warehouse is not None:
            from pipeline.ingest.store import source_findings
            from pipeline.warehouse.database import open_read_only

            con = open_read_only(warehouse)
            try:
                findings = source_findings(con, store.source_id)
            finally:
                con.close()
        print_description(store.describe(), findings)
    finally:
        store.close()


@app.command()
@user_errors
@prints_data
def query(
    sql: Annotated[
        str | None,
        typer.Argument(help="SQL text or the name of a query in sql/queries/.", autocompletion=complete_named_query),
    ] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Read the SQL from a file.")] = None,
    fmt: Annotated[QueryFormat, typer.Option("--format", help="Output format.")] = QueryFormat.table,
    vertical: Annotated[
        bool, typer.Option("--vertical", "-x", help="Table format as one block per record (every column shown).")
    ] = False,
    param: Annotated[list[str] | None, typer.Option("--param", "-p", help="k=v, bound to $k in the SQL.")] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to a file (required for parquet on a terminal).")
    ] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the named queries with their parameters.")] = False,
    warehouse: ConfigWarehouseOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Run SQL on the warehouse views, in a sandbox: the warehouse is opened read-only, and DuckDB is
    locked so that the SQL cannot reach files, the network or extensions (no ATTACH, COPY, EXPORT,
    INSTALL/LOAD, read_csv/read_text/glob) nor change settings. Export results with --format/--output.

    Every value prints exactly as DuckDB holds it (decimals, HUGEINT, intervals, nested values as JSON);
    on a terminal the table leaves out the columns that do not fit and says which (see them with
    --vertical or --format csv/json).

    Example: gonka-evidence query "SELECT status, count(*) FROM inferences GROUP BY ALL" --format markdown
    """
    from pipeline.api import open_warehouse
    from pipeline.cli.console import detail, info, out
    from pipeline.output.query import QueryError, named_queries, parse_params, resolve_sql

    if list_:
        queries = named_queries()
        if not queries:
            from pipeline.output.query import QUERIES_DIR

            raise QueryError(
                f"{QUERIES_DIR}: no named queries found (an incomplete installation? reinstall gonka-evidence)"
            )
        for q in queries.values():
            out.print(f"{q.name}: {q.description} [params: {q.params or 'none'}]", markup=False, highlight=False)
        return
    # Command lines that cannot be right: usage errors (exit 2), like a missing argument.
    if vertical and fmt is not QueryFormat.table:
        raise typer.BadParameter(
            "--vertical is a layout of the table format; leave out --format", param_hint="'--vertical'"
        )
    if sql is None and file is None:
        raise typer.BadParameter(
            "give SQL, a query name (see `gonka-evidence query --list`) or --file", param_hint="'SQL'"
        )
    text = resolve_sql(sql, file)
    if fmt is QueryFormat.parquet and output is None and sys.stdout.isatty():
        raise QueryError("parquet is binary: give --output FILE or redirect stdout")
    width = terminal_width() if fmt is QueryFormat.table and output is None and not vertical else None
    with open_warehouse(warehouse, config=config) as wh:
        rendered = wh.render_query(text, parse_params(param or []), fmt, vertical=vertical, width=width)
    if rendered.hidden:
        info(
            f"{len(rendered.hidden)} of {rendered.columns} columns left out to fit the terminal: "
            f"{', '.join(rendered.hidden)} (see every column with --vertical, or --format csv/json)"
        )
    detail(f"rows: {rendered.rows:,}, columns: {rendered.columns}, {rendered.elapsed_s:.3f} s")
    data = (
        rendered.data if isinstance(rendered.data, bytes) else (rendered.data + "\n" if rendered.data else "").encode()
    )
    if output:
        output.write_bytes(data)
    else:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


@app.command(cls=EvidenceCommand, short_help="Print an evidence table with statistics and a provenance footer.")
@user_errors
@prints_data
def evidence(
    ctx: typer.Context,
    name: Annotated[
        str, typer.Argument(help="The evidence table (listed below).", autocompletion=complete_evidence_name)
    ],
    host: Annotated[
        str | None,
        typer.Option(
            help="The host address (gonka1…; default: GONKA_EVIDENCE_HOST, else the config's host).",
            envvar="GONKA_EVIDENCE_HOST",
        ),
    ] = None,
    epoch: Annotated[int | None, typer.Option(help="The escrows of epoch N.")] = None,
    since: Annotated[str | None, typer.Option(help="Window start, ISO-8601 (inclusive; UTC when no zone).")] = None,
    until: Annotated[str | None, typer.Option(help="Window end, ISO-8601 (exclusive).")] = None,
    fmt: Annotated[EvidenceFormat, typer.Option("--format", help="Output format.")] = EvidenceFormat.markdown,
    warehouse: ConfigWarehouseOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Print an evidence table with statistics and a provenance footer. The table options
    (--by-escrow, --all, ...) come from the tables that declare them.

    Example: gonka-evidence evidence votes-by-build --host gonka1... --epoch 3 --format markdown
    """
    from pipeline.api import open_warehouse

    with open_warehouse(warehouse, host=host, config=config) as wh:
        result = wh.evidence(
            name, epoch=epoch, since=since, until=until, command=reproducing_command(ctx), **ctx.meta[OPTIONS_KEY]
        )
    typer.echo(result.render(fmt.value))


def reproducing_command(ctx: typer.Context | None = None) -> str:
    """The command line as typed, with any password redacted (it lands in provenance footers).
    A host or warehouse that came from the environment (GONKA_EVIDENCE_HOST, GONKA_EVIDENCE_WAREHOUSE)
    is added as ``--host H`` / ``--warehouse W``: the command must reproduce the table where those
    variables are not set."""
    import shlex

    from pipeline.core.secrets import scrub

    args = [scrub(a) for a in sys.argv[1:]]
    for name in ("host", "warehouse"):
        source = ctx.get_parameter_source(name) if ctx is not None else None
        if source is not None and source.name == "ENVIRONMENT":
            args += [f"--{name}", str(ctx.params[name])]
    return shlex.join(["gonka-evidence", *args])


@app.command()
@user_errors
@prints_data  # the job's log is its output: cron and systemd keep stdout (`>> run.log`)
def run(
    config: Annotated[
        Path | None, typer.Option(help="Config file (default: gonka-evidence.toml here, else the bundled samples).")
    ] = None,
    warehouse: Annotated[
        Path | None,
        typer.Option("--warehouse", "-w", help="Override the warehouse file.", envvar="GONKA_EVIDENCE_WAREHOUSE"),
    ] = None,
) -> None:
    """The scheduled job: ingest what is new, print the summary, write a report for every closed epoch.

    With no configuration (and no gonka-evidence.toml here) it ingests the bundled data-samples/
    into ./warehouse.duckdb and reports on the samples' focal host.
    Example: gonka-evidence run --config gonka-evidence.toml
    """
    from pipeline.cli.console import QUIET, out, verbosity
    from pipeline.jobs.run import run_job

    # The job's own lines are its summary: --quiet silences them too (errors still print).
    out.quiet = verbosity() == QUIET
    try:
        run_job(config, warehouse)
    finally:
        out.quiet = False


@app.command()
@user_errors
@prints_data
def version() -> None:
    """Print the pipeline version."""
    typer.echo(pipeline_version())


# Feature areas register their commands on `app` when imported (one module each).
for _module in ("pipeline.cli.logs", "pipeline.cli.ingest_json", "pipeline.cli.reports", "pipeline.cli.bundle"):
    __import__(_module)

if __name__ == "__main__":
    # `python -m pipeline.cli.app`: the feature modules registered their commands on the app of the
    # importable module `pipeline.cli.app`, not on this `__main__` copy of it.
    from pipeline.cli.app import app as registered_app

    registered_app(prog_name="gonka-evidence")
