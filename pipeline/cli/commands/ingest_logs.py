"""`gonka-evidence ingest-logs`: engine/validator logs, /metrics scrapes and PoC results of one host."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeline.api import log_kind_help
from pipeline.cli.conventions import (
    EXIT_QUARANTINED,
    ConfigOpt,
    HostOpt,
    SummaryFormat,
    SummaryFormatOpt,
    WriteWarehouseOpt,
    prints_data_as_json,
    user_errors,
)
from pipeline.cli.paths import role
from pipeline.core.roles import Role

ORDER = 80


@user_errors
@prints_data_as_json
def ingest_logs_command(
    files: Annotated[
        list[Path],
        typer.Argument(help="Log files (gzip accepted) or directories (every file in them).", parser=role(Role.INPUT)),
    ],
    host: HostOpt = None,
    kind: Annotated[str | None, typer.Option(help=f"{log_kind_help()} (default: detected per file).")] = None,
    year: Annotated[
        int | None, typer.Option(help="Year of the first line of each vLLM log (default: from the file time).")
    ] = None,
    timezone: Annotated[
        str | None,
        typer.Option(
            help="Time zone of the vLLM logs' local times: an IANA name (Europe/Berlin) "
            "or a UTC offset (+02:00); default UTC."
        ),
    ] = None,
    warehouse: WriteWarehouseOpt = None,
    config: ConfigOpt = None,
    strict: Annotated[
        bool,
        typer.Option(
            help="Exit 3 when lines could not be parsed, a file held nothing of its kind, "
            "or a file was empty or no regular file."
        ),
    ] = False,
    fmt: SummaryFormatOpt = SummaryFormat.text,
) -> None:
    """Ingest vLLM logs, validator (dapi) logs, /metrics scrapes or PoC validation results of one host.

    Re-ingesting a file, its rotated or gzipped twin, or a longer version adds nothing twice; a file read
    again with another --year or --timezone has its records replaced (the summary says how many).
    Example: gonka-evidence ingest-logs /var/log/vllm/ --host gonka1...
    """
    from pipeline import api
    from pipeline.cli.console import print_document, say

    with api.Warehouse.resolve(warehouse, config=config, write=True) as wh:
        summary = wh.ingest_logs(files, host=host, kind=kind, year=year, timezone=timezone)
    said = api.summaries.ingest_logs(summary, year=year)
    if fmt is SummaryFormat.json:
        print_document(api.summaries.document("ingest-logs", summary, said))
    else:
        say(said)
    if strict and (summary.unparsed or summary.unrecognised or summary.not_read):
        raise typer.Exit(EXIT_QUARANTINED)


def register(app: typer.Typer) -> None:
    app.command(name="ingest-logs")(ingest_logs_command)
