"""`gonka-evidence run`: the scheduled job."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeline.cli.conventions import SummaryFormat, SummaryFormatOpt, WriteWarehouseOpt, prints_data, user_errors
from pipeline.cli.paths import path_option
from pipeline.core.roles import Role

ORDER = 60


@user_errors
@prints_data  # the job's log is its output: cron and systemd keep stdout (`>> run.log`)
def run(
    config: Annotated[
        Path | None,
        path_option(
            Role.INPUT_FILE,
            noun="config file",
            help="Config file (default: gonka-evidence.toml here, else the bundled samples).",
        ),
    ] = None,
    warehouse: WriteWarehouseOpt = None,
    fmt: SummaryFormatOpt = SummaryFormat.text,
) -> None:
    """The scheduled job: ingest what is new, print the summary, write a report for every closed epoch.

    With no configuration (and no gonka-evidence.toml here) it ingests the bundled data-samples/
    into ./warehouse.duckdb and reports on the samples' focal host.
    Example: gonka-evidence run --config gonka-evidence.toml
    """
    from pipeline import api
    from pipeline.cli.console import QUIET, listener, out, print_document, verbosity

    # The job's own lines are its summary: --quiet silences them too (errors still print).
    out.quiet = verbosity() == QUIET
    try:
        with api.Warehouse.resolve(warehouse, config=config) as wh:
            outcome = wh.run(listener=listener(log=fmt is SummaryFormat.text))
    finally:
        out.quiet = False
    if fmt is SummaryFormat.json:  # the log's lines, kept by the job, in its document
        print_document(api.summaries.document("run", outcome, api.summaries.run_log(outcome.log)))


def register(app: typer.Typer) -> None:
    app.command()(run)
