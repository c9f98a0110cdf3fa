"""`gonka-evidence preflight`: what a DSpark host needs, checked per build on the host's own data."""

from __future__ import annotations

from typing import Annotated

import typer

from pipeline.cli.console import rendered
from pipeline.cli.conventions import (
    EXIT_CHECK_FAILED,
    ConfigOpt,
    EvidenceFormat,
    HostOpt,
    WarehouseOpt,
    prints_data,
    reproducing_command,
    user_errors,
)

ORDER = 52


@user_errors
@prints_data
def preflight(
    ctx: typer.Context,
    host: HostOpt = None,
    build: Annotated[
        str | None, typer.Option(metavar="LABEL", help="Only this build (its label in the build timeline).")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(metavar="T", help="Only the builds in effect at or after T (ISO-8601; UTC when no zone)."),
    ] = None,
    strict: Annotated[bool, typer.Option(help="Exit 3 when a check fails.")] = False,
    fmt: Annotated[EvidenceFormat, typer.Option("--format", help="Output format.")] = EvidenceFormat.markdown,
    warehouse: WarehouseOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Check, per build, the six ways a plain DSpark setup loses a host its answers, votes or epoch
    (replay fix, logprobs mode, memory headroom, PoC batch coupling, start-up hang, speculative config):
    pass, fail or cannot tell, with the counts and log lines that decide it (docs/evidence.md#preflight).

    Example: gonka-evidence preflight --host gonka1... --build "V2 + DSpark, processed_logprobs, vLLM fix" --strict
    """
    from pipeline.api import Warehouse

    if build is not None and since is not None:
        raise typer.BadParameter("give either --build or --since, not both")
    with Warehouse.resolve(warehouse, host=host, config=config).open() as wh:
        result = wh.preflight(build=build, since=since, command=reproducing_command(ctx))
    rendered(result.render(fmt.value), fmt.value)
    if strict and result.failed:
        raise typer.Exit(EXIT_CHECK_FAILED)


def register(app: typer.Typer) -> None:
    app.command(short_help="Check per build what a DSpark host needs: pass, fail or cannot tell.")(preflight)
