"""`gonka-evidence network`: many hosts' copies in a lake, worked on a Dask cluster (docs/network.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeline.cli.console import rendered
from pipeline.cli.conventions import (
    EvidenceFormat,
    SummaryFormat,
    SummaryFormatOpt,
    prints_data,
    prints_data_as_json,
    reproducing_command,
    user_errors,
)
from pipeline.cli.paths import path_option, role
from pipeline.core.roles import Role

ORDER = 55

network_app = typer.Typer(
    help="Network-wide evidence: many hosts' copies in a Parquet lake, on a Dask cluster (pip install "
    "'gonka-evidence[network]'). Example: gonka-evidence network ingest data-samples/network/host-* --lake lake",
    no_args_is_help=True,
)

LakeOpt = Annotated[
    Path,
    path_option(Role.LAKE_READ, "--lake", help="The lake directory (created by `network ingest`)."),
]
WriteLakeOpt = Annotated[
    Path,
    path_option(Role.LAKE_WRITE, "--lake", help="The lake directory (created by `network ingest`)."),
]
WorkersOpt = Annotated[
    int | None,
    typer.Option(
        "--workers",
        min=0,
        help="Worker processes of the local Dask cluster, one thread each (default: the cores; 0: in this process).",
    ),
]
SchedulerOpt = Annotated[
    str | None, typer.Option("--scheduler", help="An existing Dask cluster's scheduler, tcp://HOST:PORT.")
]


@user_errors
@prints_data_as_json
def network_ingest(
    copies: Annotated[
        list[str],
        typer.Argument(
            help="Copies: postgresql:// URLs or SQLite store directories, one per host.", parser=role(Role.SOURCE)
        ),
    ],
    lake: WriteLakeOpt,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
    buckets: Annotated[
        int | None, typer.Option(min=1, help="Buckets per epoch of a new lake (default 16); fixed once created.")
    ] = None,
    memory_limit: Annotated[
        str | None, typer.Option(help="Memory limit per local worker (default 2GB, or GONKA_EVIDENCE_NETWORK_MEMORY).")
    ] = None,
    fmt: SummaryFormatOpt = SummaryFormat.text,
) -> None:
    """Write each copy's raw rows into the lake (a task per copy, or per piece of a large one), then build
    each partition (epoch, bucket) whose copies changed: duplicates dropped by digest before decoding, forks
    quarantined, the single-host ingest and derive per partition (one task per partition). Re-running a copy
    replaces it.

    Example: gonka-evidence network ingest data-samples/network/host-0 data-samples/network/host-1 --lake lake
    """
    from pipeline import api
    from pipeline.cli.console import ingest_progress, print_document, say

    with ingest_progress() as progress:
        summary = api.network_ingest(
            copies,
            lake,
            workers=workers,
            scheduler=scheduler,
            buckets=buckets,
            memory_limit=memory_limit,
            progress=progress,
        )
    said = api.summaries.network_ingest(summary)
    if fmt is SummaryFormat.json:
        print_document(api.summaries.document("network ingest", summary, said, built=summary.built))
    else:
        say(said)


@user_errors
@prints_data
def network_evidence(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="executors, concentration or peer-invalidation.")],
    lake: LakeOpt,
    host: Annotated[str | None, typer.Option(help="The host (gonka1…), for peer-invalidation.")] = None,
    epoch: Annotated[int | None, typer.Option(help="The escrows of epoch N.")] = None,
    control: Annotated[
        str | None, typer.Option(metavar="ADDR", help="peer-invalidation: compare with this one executor.")
    ] = None,
    by_escrow: Annotated[bool, typer.Option("--by-escrow", help="peer-invalidation: per-escrow rows.")] = False,
    allow_open: Annotated[
        bool,
        typer.Option(
            "--allow-open", help="Compute a statistical test over an epoch that is not closed yet, marked provisional."
        ),
    ] = False,
    fmt: Annotated[EvidenceFormat, typer.Option("--format", help="Output format.")] = EvidenceFormat.markdown,
    chart: Annotated[
        Path | None,
        path_option(
            Role.OUTPUT_FILE, help="Also write the table's chart (executors: a funnel plot): .svg, .png, .json."
        ),
    ] = None,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
) -> None:
    """Print a network evidence table from the lake, with statistics and a provenance footer naming every
    copy (label, copy time, input digest).

    Example: gonka-evidence network evidence executors --lake lake --epoch 3
    """
    from pipeline import api
    from pipeline.cli.console import ingest_progress

    with ingest_progress() as progress:
        result = api.network_evidence(
            name,
            lake,
            host=host,
            epoch=epoch,
            control=control,
            by_escrow=by_escrow,
            workers=workers,
            scheduler=scheduler,
            command=reproducing_command(ctx),
            progress=progress,
            allow_open=allow_open,
        )
    if chart is not None:
        if result.chart is None:
            raise typer.BadParameter(f"{name} has no chart", param_hint="--chart")
        result.save_chart(chart)
    rendered(result.render(fmt.value), fmt.value)


def register(app: typer.Typer) -> None:
    network_app.command("ingest")(network_ingest)
    network_app.command("evidence")(network_evidence)
    app.add_typer(network_app, name="network")
