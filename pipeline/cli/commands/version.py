"""`gonka-evidence version`."""

from __future__ import annotations

import typer

from pipeline.cli.console import data as console_data
from pipeline.cli.conventions import prints_data, user_errors
from pipeline.core.version import pipeline_version

ORDER = 70


@user_errors
@prints_data
def version() -> None:
    """Print the pipeline version."""
    console_data(pipeline_version())


def register(app: typer.Typer) -> None:
    app.command()(version)
