"""`gonka-evidence init`: a commented run configuration for your host (docs/quickstart.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeline.cli.conventions import user_errors
from pipeline.cli.paths import path_option, role
from pipeline.core.roles import Role

ORDER = 5


@user_errors
def init(
    host: Annotated[str, typer.Option(help="Your host's address (gonka1…, checked as bech32).")],
    source: Annotated[
        list[str] | None,
        typer.Option(
            "--source",
            help="A copy of your devshard database: a SQLite store directory or a postgresql:// URL "
            "(repeatable; placeholders when none).",
            parser=role(Role.SOURCE),
        ),
    ] = None,
    vllm: Annotated[
        str | None,
        typer.Option("--vllm", help="Your vLLM server log directory or file.", parser=role(Role.INPUT, as_text=True)),
    ] = None,
    builds: Annotated[
        str | None,
        typer.Option(
            "--builds",
            help="Your builds.toml (a commented placeholder when omitted).",
            parser=role(Role.INPUT_FILE, as_text=True),
        ),
    ] = None,
    config: Annotated[
        Path,
        path_option(Role.OUTPUT_FILE, "--config", help="The file to write; an existing one is never overwritten."),
    ] = Path("gonka-evidence.toml"),
) -> None:
    """Write a commented gonka-evidence.toml for your host: its address, its sources and its build timeline,
    every key explained, placeholders for what was not given. Refuses to overwrite an existing file.

    Paths are written relative to the config file, as `run --config FILE` reads them. Then:
    gonka-evidence run --config FILE (docs/quickstart.md walks through it).

    Example: gonka-evidence init --host gonka1... --source copies/store --vllm /var/log/vllm
    """
    from pipeline import api
    from pipeline.cli.console import info

    written = api.init_config(host, config=config, sources=source or (), vllm=vllm, builds=builds)
    info(f"wrote {written}; next: gonka-evidence run --config {written}")


def register(app: typer.Typer) -> None:
    app.command()(init)
