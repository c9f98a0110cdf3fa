"""`gonka-evidence doctor`: what a source holds, without ingesting it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeline.cli.conventions import prints_data, user_errors

ORDER = 30


@user_errors
@prints_data
def doctor(
    source: Annotated[str, typer.Argument(help="postgresql:// URL, `postgres`, or a SQLite store directory.")],
    warehouse: Annotated[
        Path | None,
        typer.Option(
            "--warehouse",
            "-w",
            help="Also show what this warehouse found about the source "
            "(copies that disagree, escrows with a partial diff log, checkpoint cross-checks).",
        ),
    ] = None,
) -> None:
    """Describe what a source holds (layout, release line, lineage, rows per epoch, checkpoints) without ingesting.

    Example: gonka-evidence doctor data-samples/store
    """
    from pipeline import api
    from pipeline.cli.console import print_description

    found = api.doctor(source, warehouse)
    print_description(found.description, found.findings, found.escrow_lines)


def register(app: typer.Typer) -> None:
    app.command()(doctor)
