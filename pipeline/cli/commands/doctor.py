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
            "(copies that disagree, checkpoint cross-checks) and whether its build timeline contradicts its "
            "vLLM logs (builds check).",
        ),
    ] = None,
) -> None:
    """Describe what a source holds (layout, release line, lineage, rows per epoch, checkpoints) without ingesting.

    Example: gonka-evidence doctor data-samples/store
    """
    from pipeline import api
    from pipeline.cli.console import print_description

    found = api.doctor(source, warehouse)
    print_description(found.description, found.findings)
    if found.builds is not None:  # the warehouse's build timeline against its vLLM logs
        from pipeline.cli.console import out

        verdict = "consistent with the vLLM logs" if found.builds.ok else "contradicts the vLLM logs"
        out.print(f"build timeline: {verdict}", markup=False, highlight=False)
        for line in found.builds.contradictions:
            out.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command()(doctor)
