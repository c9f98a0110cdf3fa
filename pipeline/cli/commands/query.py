"""`gonka-evidence query`: SQL on the warehouse views, in a sandbox."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from pipeline.api import MAX_QUERY_TIMEOUT_S, QUERY_TIMEOUT_S, QueryFormat, terminal_width
from pipeline.cli.conventions import (
    ConfigOpt,
    WarehouseOpt,
    complete_named_query,
    prints_data,
    stream_failed,
    user_errors,
)
from pipeline.cli.paths import path_option
from pipeline.core.roles import Role

ORDER = 40


@user_errors
@prints_data
def query(
    sql: Annotated[
        str | None,
        typer.Argument(help="SQL text or the name of a query in sql/queries/.", autocompletion=complete_named_query),
    ] = None,
    file: Annotated[
        Path | None,
        path_option(Role.INPUT_FILE, "--file", "-f", help="Read the SQL from a file."),
    ] = None,
    fmt: Annotated[
        QueryFormat | None,
        typer.Option(
            "--format",
            help="Output format. Default: the one --output's extension names (.csv, .json, .md, .parquet), "
            "else table; a --format the extension contradicts is refused.",
            show_default=False,
        ),
    ] = None,
    vertical: Annotated[
        bool, typer.Option("--vertical", "-x", help="Table format as one block per record (every column shown).")
    ] = False,
    param: Annotated[list[str] | None, typer.Option("--param", "-p", help="k=v, bound to $k in the SQL.")] = None,
    output: Annotated[
        Path | None,
        path_option(Role.OUTPUT_FILE, "--output", "-o", help="Write to a file (required for parquet on a terminal)."),
    ] = None,
    max_rows: Annotated[
        int | None,
        typer.Option(
            "--max-rows",
            min=0,
            help="Write at most N rows (0: all). Default: all, except 10,000 for the table format.",
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            min=0,
            max=MAX_QUERY_TIMEOUT_S,
            help="Stop the query after this many seconds, its output included (0: no limit).",
        ),
    ] = QUERY_TIMEOUT_S,
    list_: Annotated[bool, typer.Option("--list", help="List the named queries with their parameters.")] = False,
    warehouse: WarehouseOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Run SQL on the warehouse views, in a sandbox: the warehouse is opened read-only, and DuckDB is
    locked so that the SQL cannot reach files, the network or extensions (no ATTACH, COPY, EXPORT,
    INSTALL/LOAD, read_csv/read_text/glob) nor change settings. Export results with --format/--output.

    Results stream to the output as DuckDB produces them; a query stops after --timeout seconds (default
    300), spills large sorts only to a temporary directory of its own (at most
    GONKA_EVIDENCE_QUERY_TEMP_LIMIT, default 4GB), and --output is written whole, never over the
    warehouse or an ingested source.

    Every value prints exactly as DuckDB holds it (decimals, HUGEINT, intervals, nested values as JSON);
    on a terminal the table leaves out the columns that do not fit and says which (see them with
    --vertical or --format csv/json).

    Example: gonka-evidence query "SELECT status, count(*) FROM inferences GROUP BY ALL" --format markdown
    """
    from pipeline import api
    from pipeline.cli.console import detail, info, show

    if list_:
        for q in api.named_queries(required=True).values():
            show(f"{q.name}: {q.description} [params: {q.params or 'none'}]")
        return
    fmt = api.query_output_format(fmt, output)  # from --output's extension when not given
    # Command lines that cannot be right: usage errors (exit 2), like a missing argument.
    if vertical and fmt is not QueryFormat.table:
        raise typer.BadParameter(
            "--vertical is a layout of the table format; leave out --format", param_hint="'--vertical'"
        )
    if sql is None and file is None:
        raise typer.BadParameter(
            "give SQL, a query name (see `gonka-evidence query --list`) or --file", param_hint="'SQL'"
        )
    text = api.resolve_sql(sql, file)
    if fmt is QueryFormat.parquet and output is None and sys.stdout.isatty():
        raise api.QueryError("parquet is binary: give --output FILE or redirect stdout")
    width = terminal_width() if fmt is QueryFormat.table and output is None and not vertical else None
    params = api.parse_params(param or [])
    with api.Warehouse.resolve(warehouse, config=config).open() as wh:
        if output is not None:
            rendered = wh.write_query(
                text, params, fmt, output=output, vertical=vertical, width=width, max_rows=max_rows, timeout_s=timeout
            )
        else:
            sys.stdout.flush()
            try:
                rendered = wh.write_query(
                    text,
                    params,
                    fmt,
                    sink=sys.stdout.buffer,
                    vertical=vertical,
                    width=width,
                    max_rows=max_rows,
                    timeout_s=timeout,
                )
                sys.stdout.buffer.flush()
            except OSError as exc:  # the reader (`| head`) has had enough, or stdout is full or closed
                stream_failed(exc)
    if rendered.hidden:
        info(
            f"{len(rendered.hidden)} of {rendered.columns} columns left out to fit the terminal: "
            f"{', '.join(rendered.hidden)} (see every column with --vertical, or --format csv/json)"
        )
    if rendered.truncated:
        info(f"only the first {rendered.rows:,} rows were written (--max-rows 0 writes them all)")
    detail(f"rows: {rendered.rows:,}, columns: {rendered.columns}, {rendered.elapsed_s:.3f} s")


def register(app: typer.Typer) -> None:
    app.command()(query)
