"""The `gonka-evidence` command line: a few lines per command over the library.

Exit codes: 0 success; 1 user error (bad arguments, missing source) with a
one-line message; 2 data problems that were reported (quarantine), only with
--strict. Never a traceback for a user error.
"""

from __future__ import annotations

import sys
from functools import wraps
from pathlib import Path
from typing import Annotated, Optional

import typer

from pipeline import __version__
from pipeline.cli_evidence import OPTIONS_KEY, EvidenceCommand

app = typer.Typer(
    help="Reproducible evidence about Gonka devshard hosts: ingest database copies into a DuckDB warehouse, "
    "query it, and print evidence tables.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
)

WarehouseOpt = Annotated[Path, typer.Option("--warehouse", "-w", help="DuckDB warehouse file.", envvar="GONKA_EVIDENCE_WAREHOUSE")]
DEFAULT_WAREHOUSE = Path("warehouse.duckdb")


def _fail(message: str, code: int = 1) -> None:
    from pipeline.console import err
    from pipeline.secrets import scrub

    err.print(f"error: {scrub(' '.join(message.split()))}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def user_errors(func):
    """Turn the library's one-line errors into exit code 1 without a traceback."""

    @wraps(func)
    def wrapper(*args, **kwargs):
        from pipeline.builds import BuildsError
        from pipeline.evidence.window import EvidenceError
        from pipeline.query import QueryError
        from pipeline.sources.base import SourceError
        from pipeline.warehouse import WarehouseError

        try:
            return func(*args, **kwargs)
        except (SourceError, WarehouseError, QueryError, BuildsError, EvidenceError) as exc:
            _fail(str(exc))
        except KeyboardInterrupt:
            _fail("interrupted; committed chunks are kept, re-run to continue", 130)

    return wrapper


@app.command()
@user_errors
def ingest(
    source: Annotated[str, typer.Argument(help="postgresql:// URL, `postgres` (libpq environment), or a SQLite store directory.")],
    warehouse: WarehouseOpt = DEFAULT_WAREHOUSE,
    label: Annotated[Optional[str], typer.Option(help="A name for this copy in provenance footers.")] = None,
    strict: Annotated[bool, typer.Option(help="Exit 2 when rows were quarantined.")] = False,
) -> None:
    """Ingest a devshard database copy (read-only) into the warehouse.

    Example: gonka-evidence ingest data-samples/store --warehouse warehouse.duckdb
    """
    from pipeline.console import ingest_progress, print_ingest_summary
    from pipeline.ingest import ingest_store
    from pipeline.sources import open_store
    from pipeline.warehouse import open_for_write

    store = open_store(source)
    try:
        con = open_for_write(warehouse)
        with ingest_progress() as progress:
            summary = ingest_store(con, store, label=label, progress=progress)
        con.close()
    finally:
        store.close()
    print_ingest_summary(summary)
    if strict and summary.quarantined:
        raise typer.Exit(2)


@app.command()
@user_errors
def builds(
    file: Annotated[Path, typer.Argument(help="builds.toml with [[builds]] host, label, since entries.")],
    warehouse: WarehouseOpt = DEFAULT_WAREHOUSE,
) -> None:
    """Replace the host build timeline with the entries of FILE.

    Example: gonka-evidence builds data-samples/builds.toml
    """
    from pipeline.builds import load_builds
    from pipeline.console import out
    from pipeline.warehouse import open_for_write

    con = open_for_write(warehouse)
    n = load_builds(con, file)
    con.close()
    out.print(f"host_builds: {n} entries from {file}")


@app.command()
@user_errors
def doctor(source: Annotated[str, typer.Argument(help="postgresql:// URL, `postgres`, or a SQLite store directory.")]) -> None:
    """Describe what a source holds (layout, schema version, lineage, rows per epoch) without ingesting.

    Example: gonka-evidence doctor data-samples/store
    """
    from pipeline.console import print_description
    from pipeline.sources import open_store

    store = open_store(source)
    try:
        print_description(store.describe())
    finally:
        store.close()


@app.command()
@user_errors
def query(
    sql: Annotated[Optional[str], typer.Argument(help="SQL text or the name of a query in sql/queries/.")] = None,
    file: Annotated[Optional[Path], typer.Option("--file", "-f", help="Read the SQL from a file.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, csv, json, markdown or parquet.")] = "table",
    param: Annotated[Optional[list[str]], typer.Option("--param", "-p", help="k=v, bound to $k in the SQL.")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to a file (required for parquet on a terminal).")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the named queries with their parameters.")] = False,
    warehouse: WarehouseOpt = DEFAULT_WAREHOUSE,
) -> None:
    """Run SQL on the warehouse views, in a sandbox: the warehouse is opened read-only, and DuckDB is
    locked so that the SQL cannot reach files, the network or extensions (no ATTACH, COPY, EXPORT,
    INSTALL/LOAD, read_csv/read_text/glob) nor change settings. Export results with --format/--output.

    Example: gonka-evidence query "SELECT status, count(*) FROM inferences GROUP BY ALL" --format markdown
    """
    from pipeline.console import out, print_frame
    from pipeline.query import QueryError, frame_to_bytes, frame_to_csv, frame_to_json, named_queries, resolve_sql, run_query
    from pipeline.warehouse import open_sandboxed

    if list_:
        for q in named_queries().values():
            out.print(f"{q.name}: {q.description} [params: {q.params or 'none'}]", markup=False)
        return
    if fmt not in ("table", "csv", "json", "markdown", "parquet"):
        raise QueryError(f"unknown --format {fmt!r} (table, csv, json, markdown, parquet)")
    params = {}
    for item in param or []:
        if "=" not in item:
            raise QueryError(f"--param {item!r} is not k=v")
        k, v = item.split("=", 1)
        params[k] = v
    text = resolve_sql(sql, file)
    con = open_sandboxed(warehouse)
    try:
        frame = run_query(con, text, params)
    finally:
        con.close()
    if fmt == "parquet":
        data = frame_to_bytes(frame, fmt)
        if output:
            output.write_bytes(data)
        elif sys.stdout.isatty():
            raise QueryError("parquet is binary: give --output FILE or redirect stdout")
        else:
            sys.stdout.buffer.write(data)
        return
    if fmt == "table" and output is None:
        print_frame(frame)
        return
    if fmt == "csv":
        text_out = frame_to_csv(frame)
    elif fmt == "json":
        text_out = frame_to_json(frame)
    elif fmt == "markdown":
        from pipeline.render.markdown import frame_markdown

        text_out = frame_markdown(frame)
    else:
        text_out = str(frame)
    if output:
        output.write_text(text_out)
    else:
        sys.stdout.write(text_out if text_out.endswith("\n") else text_out + "\n")


@app.command(cls=EvidenceCommand, short_help="Print an evidence table with statistics and a provenance footer.")
@user_errors
def evidence(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The evidence table (listed below).")],
    host: Annotated[Optional[str], typer.Option(help="The host address (gonka1…).", envvar="GONKA_EVIDENCE_HOST")] = None,
    epoch: Annotated[Optional[int], typer.Option(help="The escrows of epoch N.")] = None,
    since: Annotated[Optional[str], typer.Option(help="Window start, ISO-8601 (inclusive; UTC when no zone).")] = None,
    until: Annotated[Optional[str], typer.Option(help="Window end, ISO-8601 (exclusive).")] = None,
    fmt: Annotated[str, typer.Option("--format", help="markdown, csv, json or table.")] = "markdown",
    warehouse: WarehouseOpt = DEFAULT_WAREHOUSE,
) -> None:
    """Print an evidence table with statistics and a provenance footer. The table options
    (--by-escrow, --all, ...) come from the tables that declare them.

    Example: gonka-evidence evidence votes-by-build --host gonka1... --epoch 3 --format markdown
    """
    from pipeline.evidence import compute
    from pipeline.render import render
    from pipeline.warehouse import open_read_only

    if fmt not in ("markdown", "csv", "json", "table"):
        _fail(f"unknown --format {fmt!r} (markdown, csv, json, table)")
    con = open_read_only(warehouse)
    try:
        result = compute(name, con, host=host, epoch=epoch, since=since, until=until,
                         command=reproducing_command(ctx), **ctx.meta[OPTIONS_KEY])
    finally:
        con.close()
    typer.echo(render(result, fmt))


def reproducing_command(ctx: typer.Context | None = None) -> str:
    """The command line as typed, with any password redacted (it lands in provenance footers).
    A warehouse that came from the environment (GONKA_EVIDENCE_WAREHOUSE) is added as
    ``--warehouse W``: the command must reproduce the table where that variable is not set."""
    import shlex

    from pipeline.secrets import scrub

    args = [scrub(a) for a in sys.argv[1:]]
    source = ctx.get_parameter_source("warehouse") if ctx is not None else None
    if source is not None and source.name == "ENVIRONMENT":
        args += ["--warehouse", str(ctx.params["warehouse"])]
    return shlex.join(["gonka-evidence", *args])


@app.command()
@user_errors
def run(
    config: Annotated[Optional[Path], typer.Option(help="Config file (default: gonka-evidence.toml here, else the bundled samples).")] = None,
    warehouse: Annotated[Optional[Path], typer.Option("--warehouse", "-w", help="Override the warehouse file.", envvar="GONKA_EVIDENCE_WAREHOUSE")] = None,
) -> None:
    """The scheduled job: ingest what is new, print the summary, write a report for every closed epoch.

    With no configuration (and no gonka-evidence.toml here) it ingests the bundled data-samples/
    into ./warehouse.duckdb and reports on the samples' focal host.
    Example: gonka-evidence run --config gonka-evidence.toml
    """
    from pipeline.runner import run_job

    run_job(config, warehouse)


@app.command()
def version() -> None:
    """Print the pipeline version."""
    typer.echo(__version__)


# Feature areas register their commands on `app` when imported (one module each).
for _module in ("pipeline.cli_logs", "pipeline.cli_tracker", "pipeline.cli_reports", "pipeline.cli_bundle"):
    __import__(_module)

if __name__ == "__main__":
    app()
