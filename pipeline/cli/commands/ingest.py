"""`gonka-evidence ingest`: a devshard database copy into the warehouse."""

from __future__ import annotations

from typing import Annotated

import typer

from pipeline.cli.conventions import (
    EXIT_QUARANTINED,
    ConfigOpt,
    SummaryFormat,
    SummaryFormatOpt,
    WriteWarehouseOpt,
    prints_data_as_json,
    user_errors,
)
from pipeline.cli.paths import role
from pipeline.cli.process import skip_teardown
from pipeline.core.roles import Role

ORDER = 10


@user_errors
@prints_data_as_json
def ingest(
    source: Annotated[
        str,
        typer.Argument(
            help="postgresql:// URL, `postgres` (libpq environment), or a SQLite store directory.",
            parser=role(Role.SOURCE),
        ),
    ],
    warehouse: WriteWarehouseOpt = None,
    config: ConfigOpt = None,
    label: Annotated[str | None, typer.Option(help="A name for this copy in provenance footers.")] = None,
    strict: Annotated[bool, typer.Option(help="Exit 3 when rows were quarantined.")] = False,
    fmt: SummaryFormatOpt = SummaryFormat.text,
) -> None:
    """Ingest a devshard database copy (read-only) into the warehouse.

    Only what moved since the last ingest of the copy is read; a PostgreSQL copy whose change markers
    are those of its last ingest is recorded without being read at all. Every row read is used,
    deduplicated or quarantined with its reason (the ingest checks it); --verbose shows the count per
    table and file, and what the copy holds that is not read.

    Example: gonka-evidence ingest data-samples/store --warehouse warehouse.duckdb
    """
    from pipeline import api
    from pipeline.cli.console import ingest_progress, print_document, print_ingest_summary

    with api.Warehouse.resolve(warehouse, config=config, write=True) as wh, ingest_progress() as progress:
        summary = wh.ingest(source, label=label, progress=progress)
    if fmt is SummaryFormat.json:
        print_document(api.summaries.document("ingest", summary, api.summaries.ingest(summary)))
    else:
        print_ingest_summary(summary)
    # The warehouse and the source are closed: the process can end without the interpreter's
    # teardown (pipeline/cli/process.py).
    skip_teardown()
    if strict and summary.quarantined:
        raise typer.Exit(EXIT_QUARANTINED)


def register(app: typer.Typer) -> None:
    app.command()(ingest)
