"""`gonka-evidence report epoch N`: the epoch report on demand (the scheduled `run` writes the same files)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeline.cli.app import DEFAULT_WAREHOUSE, WarehouseOpt, app, user_errors

report_app = typer.Typer(
    help="Write reports (Markdown, self-contained HTML, charts, CSV) from the warehouse. Example: gonka-evidence report epoch 3 --out out",
    no_args_is_help=True,
)
app.add_typer(report_app, name="report")


@report_app.command("epoch")
@user_errors
def report_epoch(
    epoch: Annotated[int, typer.Argument(help="The epoch number.", min=0)],
    host: Annotated[
        str | None,
        typer.Option(
            help="The host address (default: GONKA_EVIDENCE_HOST, else the config's host).",
            envvar="GONKA_EVIDENCE_HOST",
        ),
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory; the report goes to OUT/epoch-N/.")] = Path(
        "out"
    ),
    warehouse: WarehouseOpt = DEFAULT_WAREHOUSE,
) -> None:
    """Write OUT/epoch-N/report.md, report.html (self-contained), charts/*.svg|png and tables/*.csv.

    The report opens with its main findings (the host's answers against the other executors',
    its verdicts by build, timeouts, engine deaths and acceptance when logs exist), each with its
    denominator and interval and linked to its section, then the sections.

    Reads the warehouse read-only; the host defaults to the run configuration's host
    (gonka-evidence.toml here, else the bundled samples' focal host).

    Example: gonka-evidence report epoch 3 --host gonka1... --out out
    """
    from pipeline.cli.console import out as console
    from pipeline.evidence import EvidenceError
    from pipeline.jobs.config import load_config
    from pipeline.output.report import build_epoch_report, write_epoch_report
    from pipeline.warehouse.database import open_read_only

    cfg = load_config(None)
    host = host or cfg.host
    if not host:
        raise EvidenceError("report needs --host ADDR (or host in gonka-evidence.toml)")
    con = open_read_only(warehouse)
    try:
        report = build_epoch_report(
            con,
            epoch,
            host,
            finality_lag=cfg.finality_lag_delta,
            warehouse_arg=None if warehouse == DEFAULT_WAREHOUSE else str(warehouse),
            out_arg=None if out == Path("out") else str(out),
        )
    finally:
        con.close()
    path = write_epoch_report(report, out)
    console.print(f"wrote {path}/report.md, report.html, charts/ and tables/", markup=False)
