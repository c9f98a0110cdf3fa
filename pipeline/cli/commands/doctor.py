"""`gonka-evidence doctor`: what a source holds, without ingesting it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeline.cli.conventions import ConfigOpt, prints_data, user_errors, warehouse_option
from pipeline.cli.paths import role
from pipeline.core.roles import Role

ORDER = 30


@user_errors
@prints_data
def doctor(
    source: Annotated[
        str,
        typer.Argument(help="postgresql:// URL, `postgres`, or a SQLite store directory.", parser=role(Role.SOURCE)),
    ],
    warehouse: Annotated[
        Path | None,
        warehouse_option(
            help="Also show what this warehouse found about the source "
            "(copies that disagree, escrows with a partial diff log, checkpoint cross-checks), whether its "
            "build timeline contradicts its vLLM logs (builds check), and where every row its last ingest "
            "read went (read = used + deduplicated + quarantined).",
        ),
    ] = None,
    config: ConfigOpt = None,
) -> None:
    """Describe what a source holds (layout, release line, lineage, rows per epoch, checkpoints) without ingesting.

    Example: gonka-evidence doctor data-samples/store
    """
    from pipeline import api
    from pipeline.cli.console import print_accounting, print_description, print_text

    # A module function, not a Warehouse method: without a warehouse named it reads the source alone.
    found = api.doctor(source, warehouse, config=config)
    print_description(found.description, found.findings, found.escrow_lines)
    if found.builds is not None:  # the warehouse's build timeline against its vLLM logs
        from pipeline.cli.console import show

        verdict = "consistent with the vLLM logs" if found.builds.ok else "contradicts the vLLM logs"
        show(f"build timeline: {verdict}")
        for line in found.builds.contradictions:
            show(f"  {line}", soft_wrap=True)
    for line in found.quarantine_lines():
        print_text(line)
    if found.accounting is not None:
        run_id, rows = found.accounting
        print_accounting(rows, stderr=False, title=f"accounting of its last ingest that read it ({run_id})")
    elif warehouse is not None or config is not None:
        print_text("accounting: no ingest of this source read it into this warehouse")


def register(app: typer.Typer) -> None:
    app.command()(doctor)
