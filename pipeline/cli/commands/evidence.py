"""`gonka-evidence evidence`: one evidence table with statistics and a provenance footer."""

from __future__ import annotations

from typing import Annotated

import typer

from pipeline.cli.console import rendered
from pipeline.cli.conventions import (
    MAX_BIGINT,
    ConfigOpt,
    EvidenceFormat,
    HostOpt,
    WarehouseOpt,
    complete_evidence_name,
    prints_data,
    reproducing_command,
    user_errors,
)
from pipeline.cli.evidence_options import OPTIONS_KEY, EvidenceCommand

ORDER = 50


@user_errors
@prints_data
def evidence(
    ctx: typer.Context,
    name: Annotated[
        str, typer.Argument(help="The evidence table (listed below).", autocompletion=complete_evidence_name)
    ],
    host: HostOpt = None,
    epoch: Annotated[int | None, typer.Option(help="The escrows of epoch N.", min=0, max=MAX_BIGINT)] = None,
    since: Annotated[str | None, typer.Option(help="Window start, ISO-8601 (inclusive; UTC when no zone).")] = None,
    until: Annotated[str | None, typer.Option(help="Window end, ISO-8601 (exclusive).")] = None,
    allow_open: Annotated[
        bool,
        typer.Option(
            "--allow-open",
            help="Compute a comparison or statistical test over an epoch that is not closed yet, marked provisional.",
        ),
    ] = False,
    fmt: Annotated[EvidenceFormat, typer.Option("--format", help="Output format.")] = EvidenceFormat.markdown,
    warehouse: WarehouseOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Print an evidence table with statistics and a provenance footer. The table options
    (--by-escrow, --all, ...) come from the tables that declare them.

    Example: gonka-evidence evidence votes-by-build --host gonka1... --epoch 3 --format markdown
    """
    from pipeline.api import Warehouse

    with Warehouse.resolve(warehouse, host=host, config=config).open() as wh:
        result = wh.evidence(
            name,
            epoch=epoch,
            since=since,
            until=until,
            command=reproducing_command(ctx),
            allow_open=allow_open,
            **ctx.meta[OPTIONS_KEY],
        )
    rendered(result.render(fmt.value), fmt.value)


def register(app: typer.Typer) -> None:
    app.command(cls=EvidenceCommand, short_help="Print an evidence table with statistics and a provenance footer.")(
        evidence
    )
