"""`gonka-evidence ingest-json`: saved accounting-API and chain REST responses."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeline.cli.app import DEFAULT_WAREHOUSE, EXIT_QUARANTINED, WarehouseOpt, app, user_errors


@app.command(name="ingest-json")
@user_errors
def ingest_json(
    files: Annotated[list[Path], typer.Argument(help="Saved JSON responses (accounting API v2–7, chain REST).")],
    warehouse: WarehouseOpt = DEFAULT_WAREHOUSE,
    strict: Annotated[bool, typer.Option(help="Exit 3 when a file or a record was quarantined.")] = False,
) -> None:
    """Ingest saved gateway accounting-API and chain REST JSON responses into the tracker views.

    Example: gonka-evidence ingest-json participants-437.json epoch_performance_summary-437.json
    """
    from pipeline.ingest.json_responses import ingest_json_files
    from pipeline.warehouse.database import open_for_write

    con = open_for_write(warehouse)
    try:
        summary = ingest_json_files(con, files)
    finally:
        con.close()
    for line in summary.unreadable:
        typer.echo(f"warning: {line}; quarantined", err=True)
    rows = ", ".join(f"{table} {n}" for table, n in summary.rows.items())
    typer.echo(
        f"ingested {summary.files} file(s): {rows}; quarantined {summary.quarantined} "
        f"({summary.elapsed_s:.2f} s, runs {', '.join(summary.run_ids)})"
    )
    if strict and summary.quarantined:
        raise typer.Exit(EXIT_QUARANTINED)
