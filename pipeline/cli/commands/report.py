"""`gonka-evidence report epoch N`: the epoch report on demand (the scheduled `run` writes the same files)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeline.cli.conventions import MAX_BIGINT, ConfigOpt, HostOpt, WarehouseOpt, user_errors
from pipeline.cli.paths import path_option
from pipeline.core.roles import Role

ORDER = 100

report_app = typer.Typer(
    help="Write reports (Markdown, self-contained HTML, charts, CSV) from the warehouse. "
    "Example: gonka-evidence report epoch 3 --out out",
    no_args_is_help=True,
)


@user_errors
def report_epoch(
    epoch: Annotated[int, typer.Argument(help="The epoch number.", min=0, max=MAX_BIGINT)],
    host: HostOpt = None,
    out: Annotated[
        Path,
        path_option(Role.OUTPUT_DIR, "--out", "-o", help="Output directory; the report goes to OUT/epoch-N/."),
    ] = Path("out"),
    warehouse: WarehouseOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Write OUT/epoch-N/report.md, report.html (self-contained), charts/*.svg|png and tables/*.csv.

    The report opens with its main findings (the host's answers against the other executors',
    its verdicts by build, timeouts, engine deaths and acceptance when logs exist), each with its
    denominator and interval and linked to its section, then the sections.

    Reads the warehouse read-only; the host is --host, else GONKA_EVIDENCE_HOST, else the config's host
    (the bundled samples' focal host only on the samples' own warehouse; docs/configuration.md).

    Example: gonka-evidence report epoch 3 --host gonka1... --out out
    """
    from pipeline.api import Warehouse
    from pipeline.cli.console import show

    with Warehouse.resolve(warehouse, config=config) as wh:
        written = wh.report(epoch, host, out=out)
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(written.path))  # one line, whatever the name
    show(f"wrote {shown}/report.md, report.html, charts/ and tables/")


def register(app: typer.Typer) -> None:
    report_app.command("epoch")(report_epoch)
    app.add_typer(report_app, name="report")
