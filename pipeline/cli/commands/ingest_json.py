"""`gonka-evidence ingest-json`: saved accounting-API and chain REST responses."""

from __future__ import annotations

from pathlib import Path
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
from pipeline.core.roles import Role

ORDER = 90


@user_errors
@prints_data_as_json
def ingest_json(
    files: Annotated[
        list[Path],
        typer.Argument(help="Saved JSON responses (accounting API v2–7, chain REST).", parser=role(Role.INPUT_FILE)),
    ],
    warehouse: WriteWarehouseOpt = None,
    config: ConfigOpt = None,
    strict: Annotated[bool, typer.Option(help="Exit 3 when a file or a record was quarantined.")] = False,
    fmt: SummaryFormatOpt = SummaryFormat.text,
) -> None:
    """Ingest saved gateway accounting-API and chain REST JSON responses into the tracker views.

    Example: gonka-evidence ingest-json participants-437.json epoch_performance_summary-437.json
    """
    from pipeline import api

    with api.Warehouse.resolve(warehouse, config=config, write=True) as wh:
        summary = wh.ingest_json(files)
    from pipeline.cli.console import QUIET, print_document, say, verbosity

    said = api.summaries.ingest_json(summary, quiet=verbosity() == QUIET)
    if fmt is SummaryFormat.json:
        print_document(api.summaries.document("ingest-json", summary, said))
    else:
        say(said)
    if strict and summary.quarantined:
        raise typer.Exit(EXIT_QUARANTINED)


def register(app: typer.Typer) -> None:
    app.command(name="ingest-json")(ingest_json)
