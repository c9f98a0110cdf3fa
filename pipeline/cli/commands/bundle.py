"""`gonka-evidence bundle` and `gonka-evidence verify`: evidence bundles a reviewer can check."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeline.cli.conventions import EXIT_CHECK_FAILED, MAX_BIGINT, ConfigOpt, HostOpt, WarehouseOpt, user_errors
from pipeline.cli.paths import path_option, role
from pipeline.core.roles import Role

ORDER = 110


@user_errors
def bundle(
    out: Annotated[
        Path,
        path_option(Role.OUTPUT_DIR, "--out", "-o", help="The bundle directory (new, empty, or an earlier bundle)."),
    ],
    host: HostOpt = None,
    epoch: Annotated[
        int | None,
        typer.Option(help="The escrows of epoch N (the bundle then holds the epoch report).", min=0, max=MAX_BIGINT),
    ] = None,
    since: Annotated[str | None, typer.Option(help="Window start, ISO-8601 (inclusive; UTC when no zone).")] = None,
    until: Annotated[str | None, typer.Option(help="Window end, ISO-8601 (exclusive).")] = None,
    warehouse: WarehouseOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Write every evidence table (md, csv, json), the charts, the epoch report and MANIFEST.json
    (pipeline version, input digests, the command of each file, sha256 of every file) to OUT.

    Example: gonka-evidence bundle --host gonka1... --epoch 3 --out bundle-3
    """
    from pipeline.api import Warehouse
    from pipeline.cli.console import show

    with Warehouse.resolve(warehouse, host=host, config=config) as wh:
        written = wh.bundle(out, host, epoch=epoch, since=since, until=until)
    path = written.path
    show(f"wrote {len(written.files)} files to {path} (check them with: gonka-evidence verify {path})")


@user_errors
def verify(
    directory: Annotated[
        Path, typer.Argument(help="A bundle directory written by `gonka-evidence bundle`.", parser=role(Role.INPUT_DIR))
    ],
    warehouse: WarehouseOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Recompute a bundle from the warehouse and compare it file by file (exit 0 only when every
    file matches; exit 3 naming each file that differs, is missing or was not expected).

    Example: gonka-evidence verify bundle-3 --warehouse warehouse.duckdb
    """
    from pipeline.api import Warehouse
    from pipeline.cli.console import show

    with Warehouse.resolve(warehouse, config=config) as wh:
        verified = wh.verify(directory)
    checks, bad = verified.checks, verified.bad
    for check in checks:
        show(f"{check.status:>10}  {check.path}")
    if verified.label_differences:  # names given at ingest, not evidence: said, and compared under the bundle's
        show(
            "source labels differ from the bundle's (compared under the bundle's labels): "
            + "; ".join(verified.label_differences),
            soft_wrap=True,
        )
    if bad:
        show(
            f"{len(bad)} of {len(checks)} files do not match: " + ", ".join(f"{c.path} ({c.status})" for c in bad),
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_CHECK_FAILED)
    show(f"all {len(checks)} files match")


def register(app: typer.Typer) -> None:
    app.command()(bundle)
    app.command()(verify)
