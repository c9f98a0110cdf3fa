"""The conventions every command shares: its options, one-line errors, exit codes, where output goes.

Data goes to stdout, progress and summaries to stderr; `--quiet`/`--verbose`; the exit codes below;
one-line errors, never a traceback for a user error (`user_errors`).
"""

from __future__ import annotations

import errno
import inspect
import os
import sys
from contextlib import ExitStack, redirect_stdout
from enum import StrEnum
from functools import wraps
from pathlib import Path
from typing import Annotated

import typer

from pipeline.cli.paths import path_option
from pipeline.cli.process import say_interrupted
from pipeline.core.roles import Role

# The exit codes, one place (docs/cli.md lists them): a user error (pipeline.core.errors.UserError, mapped by
# `user_errors` below) is not a check that ran and found a problem.
EXIT_USER_ERROR = 1  # bad arguments, missing source, failed query: a one-line message
# 2 is click's own: the command line itself is wrong (unknown option, missing argument, bad choice).
EXIT_QUARANTINED = 3  # rows were quarantined and --strict was given: a data problem reported
# A check ran and found a problem, which it reported: `verify` (a file differs), `builds check` (a
# contradiction), `preflight --strict` (a check failed). A data problem reported, as above.
EXIT_CHECK_FAILED = 3
EXIT_BROKEN_PIPE = 141  # the reader of stdout went away (`| head`): quietly, as a process killed by SIGPIPE
EXIT_CODES_HELP = (
    "Exit codes: 0 success; 1 user error (one-line message on stderr); 2 usage error; 3 rows quarantined with "
    "--strict, or a check found a problem (verify, builds check, preflight --strict): a data problem reported; "
    "141 the reader of stdout stopped reading (`| head`)."
)

# The largest epoch number (and any other count) the warehouse can hold: DuckDB's BIGINT. A larger one
# on the command line is a usage error, not an overflow deep inside a query.
MAX_BIGINT = 2**63 - 1

HostOpt = Annotated[
    str | None,
    typer.Option(
        help="The host address (gonka1…; default: GONKA_EVIDENCE_HOST, else the config's host).",
        envvar="GONKA_EVIDENCE_HOST",
    ),
]
WAREHOUSE_HELP = (
    "DuckDB warehouse file (default: GONKA_EVIDENCE_WAREHOUSE, else the config's warehouse, else ./warehouse.duckdb)."
)


def warehouse_option(kind: Role = Role.WAREHOUSE_READ, help: str = WAREHOUSE_HELP) -> typer.models.OptionInfo:
    """The one warehouse option of every command that touches a warehouse: `--warehouse/-w`, from
    GONKA_EVIDENCE_WAREHOUSE when not given, else resolved from the config (`pipeline.jobs.settings`)."""
    return path_option(kind, "--warehouse", "-w", help=help, envvar="GONKA_EVIDENCE_WAREHOUSE")


WarehouseOpt = Annotated[Path | None, warehouse_option()]
# For commands that write the warehouse (created when missing): the same option in the writer's role.
WriteWarehouseOpt = Annotated[Path | None, warehouse_option(Role.WAREHOUSE_WRITE)]
ConfigOpt = Annotated[
    Path | None,
    path_option(
        Role.INPUT_FILE,
        "--config",
        noun="config file",
        help="Config file whose host and warehouse are the defaults (default: gonka-evidence.toml here, if any; "
        "docs/configuration.md).",
    ),
]


VERBOSITY_OPTIONS = ("quiet", "verbose")
CONTEXT = "_cli_context"  # the parameter of every command's wrapper that Typer fills with the command's context


def _set_verbosity(level: int):
    def callback(value: bool) -> None:
        if value:
            from pipeline.core.verbosity import set_verbosity

            set_verbosity(level)

    return callback


def _verbosity_options() -> list[inspect.Parameter]:
    from pipeline.core.verbosity import QUIET, VERBOSE

    quiet = typer.Option(
        "--quiet",
        "-q",
        help="Only data and errors: no progress or summaries on stderr.",
        callback=_set_verbosity(QUIET),
        expose_value=False,
    )
    verbose = typer.Option(
        "--verbose", "-v", help="More detail on stderr.", callback=_set_verbosity(VERBOSE), expose_value=False
    )
    return [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[bool, option])
        for name, option in zip(VERBOSITY_OPTIONS, (quiet, verbose), strict=True)
    ]


def _fail(message: str, code: int = EXIT_USER_ERROR) -> None:
    from pipeline.cli.console import error
    from pipeline.core.secrets import scrub
    from pipeline.core.text import visible

    error(visible(scrub(" ".join(message.split()))))
    raise typer.Exit(code)


def _stream_error(exc: BaseException | None) -> OSError | None:
    """The failed write to stdout behind `exc` (itself, or what it was raised while handling), if any."""
    from pipeline.core.streams import StandardStreamError

    for _ in range(8):
        if exc is None or isinstance(exc, StandardStreamError):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def stream_failed(exc: OSError) -> None:
    """stdout could not be written: the reader went away (quietly, 141), or it is closed or full (one line)."""
    from pipeline.core.streams import quiet_stdout

    quiet_stdout()  # what is still buffered must not fail again at exit
    if exc.errno == errno.EPIPE:
        raise typer.Exit(EXIT_BROKEN_PIPE)
    reason = "it is closed" if exc.errno == errno.EBADF else exc.strerror or str(exc)
    _fail(f"{getattr(exc, 'stream', 'standard output')}: cannot write ({reason})")


def _interrupted() -> None:
    say_interrupted()
    raise typer.Exit(130)


def prints_data_as_json(func):
    """Marks a job command whose stdout is data with --format json only (its summary as one JSON document);
    with --format text its summary goes to stderr."""
    func.prints_data = lambda kwargs: kwargs.get("fmt") == SummaryFormat.json
    return func


def prints_data(func):
    """Marks a command whose stdout is data (query results, tables); under `user_errors` it is
    put below it. Every other command's stdout is a summary and goes to stderr."""
    func.prints_data = True
    return func


def _one_line_error(exc: Exception) -> Exception | None:
    """The library's error that ends a command with a one-line message for `exc`, None for a bug (looked
    up when one is raised: `ingest` of an unchanged copy should not pay for importing them)."""
    from pipeline.api import user_error

    return user_error(exc)


def _is_interrupt(exc: BaseException | None) -> bool:
    """A Ctrl-C that DuckDB caught during a query: it raises its own error instead of KeyboardInterrupt
    (the interrupted statement, a COMMIT included, took effect whole or not at all); a Ctrl-C inside
    Python code that DuckDB was calling (an Arrow source it registers or scans) comes back as DuckDB's
    error naming the KeyboardInterrupt, sometimes with it as its cause. The clean-up that follows (a
    rollback, the run's `failed` row) may raise again on the aborted transaction, so the exceptions it
    happened during count too."""
    seen, pending = set(), [exc]
    while pending:
        exc = pending.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        duckdb_error = type(exc).__module__.lstrip("_").startswith("duckdb")
        if (
            isinstance(exc, KeyboardInterrupt)
            or type(exc).__name__ == "InterruptException"
            or (isinstance(exc, RuntimeError) and str(exc).startswith("Query interrupted"))
            or (duckdb_error and "failed: KeyboardInterrupt" in str(exc))
        ):
            return True
        pending += [exc.__cause__, exc.__context__]
    return False


def user_errors(func):
    """The conventions of every command: the library's one-line errors become exit code 1
    without a traceback; the command takes --quiet and --verbose; and unless it `prints_data`,
    what it prints goes to stderr (nowhere with --quiet)."""

    @wraps(func)
    def wrapper(*args, **kwargs):
        from pipeline.core.verbosity import NORMAL, verbosity

        for name in VERBOSITY_OPTIONS:
            kwargs.pop(name, None)  # handled by the option's callback, not the command
        # The command's context: where each option's value came from (the command line, a variable).
        context = kwargs.get(own_context) if own_context else kwargs.pop(CONTEXT, None)
        try:
            with ExitStack() as stack:
                data = getattr(func, "prints_data", False)
                if not (data(kwargs) if callable(data) else data):
                    # What a command without data output prints is a summary: stderr, or nothing with --quiet.
                    sink = sys.stderr if verbosity() >= NORMAL else stack.enter_context(open(os.devnull, "w"))
                    stack.enter_context(redirect_stdout(sink))
                from pipeline.cli.paths import check_paths

                check_paths(func, kwargs, context)  # every path in its role, before any work
                _check_host_variable(kwargs.get("host"), context)
                result = func(*args, **kwargs)
            sys.stdout.flush()  # here, not at exit: a full or closed stdout is this command's error
            return result
        except typer.Exit:  # already said (a stream's failure included)
            raise
        except Exception as exc:
            stream_error = _stream_error(exc)
            if stream_error is not None:
                stream_failed(stream_error)
            if _is_interrupt(exc):
                _interrupted()
            error = _one_line_error(exc)
            if error is None:
                raise
            _fail(str(error))
        except KeyboardInterrupt:
            _interrupted()

    # Typer reads the options from the signature; these two are handled by their callbacks, and Typer passes
    # the command's context as CONTEXT unless the command takes it itself (Typer fills one parameter).
    signature = inspect.signature(func, eval_str=True)
    own_context = next((n for n, p in signature.parameters.items() if p.annotation is typer.Context), None)
    context = (
        [] if own_context else [inspect.Parameter(CONTEXT, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)]
    )
    wrapper.__signature__ = signature.replace(
        parameters=[*signature.parameters.values(), *_verbosity_options(), *context]
    )
    return wrapper


def _check_host_variable(host: object, context: typer.Context | None) -> None:
    """A --host that GONKA_EVIDENCE_HOST filled, refused in its form naming the variable, not an option nobody gave."""
    from pipeline.api import check_address
    from pipeline.cli.paths import variable_of

    if isinstance(host, str) and (variable := variable_of(context, "host")):
        check_address(host, variable)


class SummaryFormat(StrEnum):
    """How a job says its summary (pipeline/output/summaries.py): its lines, or one JSON document."""

    text = "text"
    json = "json"


SummaryFormatOpt = Annotated[
    SummaryFormat,
    typer.Option(
        "--format",
        help="text: the summary's lines on stderr; json: one JSON document on stdout (the result's facts and "
        "the same lines).",
    ),
]


class EvidenceFormat(StrEnum):
    """The formats of pipeline.output.render (kept equal to its FORMATS by a test)."""

    markdown = "markdown"
    csv = "csv"
    json = "json"
    table = "table"


def complete_named_query(incomplete: str) -> list[str]:
    from pipeline.api import named_queries

    return [name for name in named_queries() if name.startswith(incomplete)]


def complete_evidence_name(incomplete: str) -> list[str]:
    from pipeline.api import evidence_tables

    return [name for name in evidence_tables() if name.startswith(incomplete)]


def reproducing_command(ctx: typer.Context | None = None) -> str:
    """The command line as typed, with any password redacted (it lands in provenance footers).
    A host or warehouse that came from the environment (GONKA_EVIDENCE_HOST, GONKA_EVIDENCE_WAREHOUSE)
    is added as ``--host H`` / ``--warehouse W``: the command must reproduce the table where those
    variables are not set."""
    from pipeline.core.command import command_line
    from pipeline.core.secrets import redact_url

    args = [redact_url(a) for a in sys.argv[1:]]
    for name in ("host", "warehouse"):
        source = ctx.get_parameter_source(name) if ctx is not None else None
        if ctx is not None and source is not None and source.name == "ENVIRONMENT":
            args += [f"--{name}", str(ctx.params[name])]
    return command_line(*args)
