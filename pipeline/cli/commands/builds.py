"""`gonka-evidence builds`: the host build timeline from a builds.toml; `builds infer` proposes one from
the vLLM logs' start cycles, `builds check` compares one with them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeline.cli.console import data as console_data
from pipeline.cli.conventions import EXIT_CHECK_FAILED, ConfigOpt, WriteWarehouseOpt, prints_data, user_errors
from pipeline.cli.paths import path_option, role
from pipeline.core.roles import Role

ORDER = 20
ACTIONS = ("load", "infer", "check")


@user_errors
@prints_data
def builds(
    file: Annotated[
        str,
        typer.Argument(
            metavar="[load|infer|check] FILE.toml",
            help="[[builds]] host, label, since entries (and optional [[devshard_versions]] version, rules: the "
            "verdict rule set each devshard version runs): the builds.toml to load (`load FILE` says the same); "
            "or `infer` (propose one from the logs) or `check [FILE]` (FILE, default the loaded timeline, against "
            "the logs).",
            parser=role(Role.INPUT_FILE, keywords=ACTIONS, as_text=True),
        ),
    ],
    toml: Annotated[
        str | None,
        typer.Argument(
            metavar="[FILE.toml]",
            help="The builds.toml of `load` or `check`.",
            parser=role(Role.INPUT_FILE, as_text=True),
        ),
    ] = None,
    host: Annotated[
        str | None, typer.Option("--host", help="infer / check: only this host (default: every host).")
    ] = None,
    out: Annotated[
        Path | None,
        path_option(Role.OUTPUT_FILE, "--out", help="infer: write the proposal here (default: stdout)."),
    ] = None,
    warehouse: WriteWarehouseOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Load, propose (infer) or check the host build timeline.

    `builds FILE` (or `builds load FILE`) replaces the timeline with the entries of FILE; `builds infer`
    proposes a builds.toml from the start cycles of the vLLM logs (engine_cycles), on stdout unless --out;
    `builds check [FILE]` names each place where FILE (or the loaded timeline) contradicts those cycles, one
    line each, and exits 3 when there is one.

    Example: gonka-evidence builds data-samples/builds.toml
    """
    from pipeline.api import Warehouse
    from pipeline.cli.console import info, warning

    action = file if file in ACTIONS else "load"
    path = toml if file in ACTIONS else file
    if (host is not None or out is not None) and action == "load":
        raise typer.BadParameter("--host and --out go with `builds infer` or `builds check`")
    if out is not None and action == "check":
        raise typer.BadParameter("--out goes with `builds infer`")
    if action == "infer":
        if toml is not None:
            raise typer.BadParameter(f"`builds infer` takes no file (got {toml}); --out FILE writes the proposal")
        with Warehouse.resolve(warehouse, config=config) as wh:
            text = wh.infer_builds(host, out)
        if out is None:
            console_data(text, nl=False)
        else:
            info(f"proposed builds.toml written to {out}")
        return
    if action == "check":
        with Warehouse.resolve(warehouse, config=config) as wh:
            result = wh.check_builds(path, host)
        for note in result.notes:
            info(note)
        for line in result.contradictions:
            console_data(line)
        if not result.ok:
            raise typer.Exit(EXIT_CHECK_FAILED)
        info(f"{path or 'the loaded build timeline'}: consistent with the vLLM logs")
        return
    if path is None:
        raise typer.BadParameter("`builds load` needs a FILE.toml")
    if toml is not None and file not in ACTIONS:
        raise typer.BadParameter(f"one builds file at a time (got {file} and {toml})")
    with Warehouse.resolve(warehouse, config=config, write=True) as wh:
        loaded = wh.load_builds(Path(path))
    for message in loaded.warnings:
        warning(message)
    info(f"host_builds: {loaded.entries} entries from {path}")


def register(app: typer.Typer) -> None:
    app.command()(builds)
