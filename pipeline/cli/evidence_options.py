"""The `evidence` command's table options and table list, read from the evidence registry.

Each option a table's spec declares (`--by-escrow`, `--all`, ...) becomes one option of the
command, its help naming the tables that accept it, and `--help` lists every table with its
summary and options. The registry imports every table and the statistics libraries behind them
(seconds), so it is read only when `evidence` runs or shows its help, never for other commands.
"""

from __future__ import annotations

import inspect
from functools import cache
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from pipeline.cli.conventions import MAX_BIGINT

OPTIONS_KEY = "evidence_options"  # where `invoke` leaves the table options for the command


@cache
def table_parameters() -> tuple[Any, ...]:
    """The command-line parameters of every table option, built by typer from a signature."""
    from pipeline.api import evidence_options

    parameters = []
    for name, (option, tables) in evidence_options().items():
        value = bool if option.type is bool else option.type | None
        whole = option.type is int  # an epoch number: a BIGINT in the warehouse
        info = typer.Option(
            option.flag,
            help=f"{option.help.rstrip('.')} ({', '.join(tables)}).",
            metavar=option.metavar,
            min=0 if whole else None,
            max=MAX_BIGINT if whole else None,
        )
        parameters.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=Annotated[value, info],
                default=False if option.type is bool else None,
            )
        )

    def options(**values: Any) -> None:
        """Never called: its signature is what typer reads."""

    options.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    probe = typer.Typer(add_completion=False)
    probe.command()(options)
    return tuple(typer.main.get_command(probe).params)


@cache
def table_list() -> str:
    """One paragraph per table: its name, its options and its summary."""
    from pipeline.api import evidence_tables

    return "\n\n".join(
        f"{spec.name}{''.join(f' [{o.usage}]' for o in spec.options)}: {spec.summary}"
        for spec in evidence_tables().values()
    )


class EvidenceCommand(TyperCommand):
    """A typer command whose table options and help come from the evidence registry when needed."""

    @property
    def help(self) -> str | None:
        head, sep, example = (self._help or "").partition("\n\nExample:")
        return f"{head}\n\nTables:\n\n{table_list()}{sep}{example}"

    @help.setter
    def help(self, value: str | None) -> None:
        self._help = value

    def get_params(self, ctx: typer.Context) -> list:  # type: ignore[override]  # typer's Context subclasses click's
        params = super().get_params(ctx)
        at = next((i for i, p in enumerate(params) if p.name == "fmt"), len(params))
        return [*params[:at], *table_parameters(), *params[at:]]

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        ctx.meta[OPTIONS_KEY] = {p.name: ctx.params.pop(p.name) for p in table_parameters() if p.name in ctx.params}
        return super().invoke(ctx)
