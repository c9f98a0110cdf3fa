"""`gonka-evidence builds`: the host build timeline from a builds.toml."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeline.cli.conventions import WarehouseOpt, user_errors
from pipeline.core.paths import DEFAULT_WAREHOUSE

ORDER = 20


@user_errors
def builds(
    file: Annotated[Path, typer.Argument(help="builds.toml with [[builds]] host, label, since entries.")],
    warehouse: WarehouseOpt = DEFAULT_WAREHOUSE,
) -> None:
    """Replace the host build timeline with the entries of FILE.

    Example: gonka-evidence builds data-samples/builds.toml
    """
    from pipeline import api
    from pipeline.cli.console import info, warning

    loaded = api.load_builds(file, warehouse)
    for message in loaded.warnings:
        warning(message)
    info(f"host_builds: {loaded.entries} entries from {file}")


def register(app: typer.Typer) -> None:
    app.command()(builds)
