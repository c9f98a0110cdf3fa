"""The `gonka-evidence` command line: the Typer app, its global options, and its commands.

Each command is a module of `pipeline.cli.commands` with a `register(app)` function, found by
package discovery (`pipeline.cli.commands.register_all`); the conventions they share are in
`pipeline.cli.conventions`. Commands call only `pipeline.api`, and are the only code that prints.
"""

from __future__ import annotations

from typing import Annotated

import typer

from pipeline.cli.commands import register_all
from pipeline.cli.console import data as console_data
from pipeline.cli.conventions import EXIT_CODES_HELP
from pipeline.core.version import pipeline_version

app = typer.Typer(
    help="Reproducible evidence about Gonka devshard hosts: ingest database copies into a DuckDB warehouse, "
    "query it, and print evidence tables. Data goes to stdout; progress and summaries to stderr. " + EXIT_CODES_HELP,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    # Help texts are plain text: "[[builds]]" or "[since, until)" must print as written.
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        console_data(pipeline_version())
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", callback=_print_version, is_eager=True)
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only data and errors, for every command.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="More detail on stderr, for every command.")] = False,
) -> None:
    from pipeline.core.verbosity import NORMAL, QUIET, VERBOSE, set_verbosity

    set_verbosity(QUIET if quiet else VERBOSE if verbose else NORMAL)


register_all(app)
