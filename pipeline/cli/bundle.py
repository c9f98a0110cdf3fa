"""`gonka-evidence bundle` and `gonka-evidence verify`: evidence bundles a reviewer can check."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeline.cli.app import DEFAULT_WAREHOUSE, WarehouseOpt, app, user_errors


@app.command()
@user_errors
def bundle(
    out: Annotated[Path, typer.Option("--out", "-o", help="The bundle directory (new, empty, or an earlier bundle).")],
    host: Annotated[
        str | None, typer.Option(help="The host address (gonka1…).", envvar="GONKA_EVIDENCE_HOST")
    ] = None,
    epoch: Annotated[
        int | None, typer.Option(help="The escrows of epoch N (the bundle then holds the epoch report).")
    ] = None,
    since: Annotated[str | None, typer.Option(help="Window start, ISO-8601 (inclusive; UTC when no zone).")] = None,
    until: Annotated[str | None, typer.Option(help="Window end, ISO-8601 (exclusive).")] = None,
    warehouse: WarehouseOpt = DEFAULT_WAREHOUSE,
) -> None:
    """Write every evidence table (md, csv, json), the charts, the epoch report and MANIFEST.json
    (pipeline version, input digests, the command of each file, sha256 of every file) to OUT.

    Example: gonka-evidence bundle --host gonka1... --epoch 3 --out bundle-3
    """
    from pipeline.cli.console import out as console
    from pipeline.evidence import EvidenceError
    from pipeline.evidence.provenance import command_path
    from pipeline.output.bundle import BundleRequest, build_bundle, write_bundle
    from pipeline.warehouse.database import open_read_only

    if not host:
        raise EvidenceError("bundle needs --host ADDR (the host address, gonka1…)")
    request = BundleRequest(
        host=host,
        epoch=epoch,
        since=since,
        until=until,
        warehouse_arg=None if warehouse == DEFAULT_WAREHOUSE else command_path(warehouse),
    )
    request.window  # a bad window is a one-line error before anything is computed
    con = open_read_only(warehouse)
    try:
        files = build_bundle(con, request)
    finally:
        con.close()
    path = write_bundle(files, out)
    console.print(f"wrote {len(files)} files to {path} (check them with: gonka-evidence verify {path})", markup=False)


@app.command()
@user_errors
def verify(
    directory: Annotated[Path, typer.Argument(help="A bundle directory written by `gonka-evidence bundle`.")],
    warehouse: WarehouseOpt = DEFAULT_WAREHOUSE,
) -> None:
    """Recompute a bundle from the warehouse and compare it file by file (exit 0 only when every
    file matches; exit 1 naming each file that differs, is missing or was not expected).

    Example: gonka-evidence verify bundle-3 --warehouse warehouse.duckdb
    """
    from pipeline.cli.console import out as console
    from pipeline.output.bundle import read_request, verify_bundle
    from pipeline.warehouse.database import open_read_only

    read_request(directory)  # not a bundle: a one-line error before the warehouse is opened
    con = open_read_only(warehouse)
    try:
        checks = verify_bundle(con, directory)
    finally:
        con.close()
    bad = [check for check in checks if check.status != "ok"]
    for check in checks:
        console.print(f"{check.status:>10}  {check.path}", markup=False, highlight=False)
    if bad:
        console.print(
            f"{len(bad)} of {len(checks)} files do not match: " + ", ".join(f"{c.path} ({c.status})" for c in bad),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)
    console.print(f"all {len(checks)} files match", markup=False)
