"""Evidence tables: one module per table, each registering an `EvidenceSpec` (see `spec.py`).

    from pipeline.evidence import compute
    result = compute("votes-by-build", con, host="gonka1…", epoch=437)

`compute` checks the request against the table's spec, runs the table on the warehouse views
and attaches the provenance footer. User errors raise `EvidenceError` with a one-line message,
among them a host or window the warehouse does not hold (`request.py`). A held host that executed
or validated nothing in a held window is not an error: the table is empty and says so in its notes.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import duckdb

from pipeline.evidence.closure import ALLOW_OPEN, DEFAULT_FINALITY_LAG, check_open, closure, mark
from pipeline.evidence.provenance import provenance
from pipeline.evidence.registry import load_specs
from pipeline.evidence.request import check_request
from pipeline.evidence.result import EvidenceResult, Provenance
from pipeline.evidence.spec import EvidenceSpec, Option, ReportContext, ReportSection
from pipeline.evidence.window import EvidenceError, Window

# Public name → spec, in report order. The one registry that the CLI, the report and the docs read.
EVIDENCE: dict[str, EvidenceSpec] = load_specs()


# Table options whose value names a host or an epoch (`pipeline.warehouse.held`): a typo or a value the
# warehouse does not hold is refused, never an empty table ("_no rows_", "compare: none") with exit 0.
VALUE_OPTIONS = {"control": "slot_host", "compare": "epoch"}


def _held_option(con: duckdb.DuckDBPyConnection, kind: str, key: str, value: Any) -> Any:
    from pipeline.warehouse.held import UnheldValue, check_value

    option = f"--{key.replace('_', '-')}"
    try:
        return check_value(con, kind, value, option)  # type: ignore[arg-type]
    except UnheldValue as exc:
        text = str(exc)
        raise EvidenceError(text if text.startswith(f"{option} ") else f"{option}: {text}") from None


def report_options(con: duckdb.DuckDBPyConnection, spec: EvidenceSpec, epoch: int) -> dict[str, Any]:
    """The options the epoch report (and a bundle) gives `spec` for `epoch`; a comparison with an epoch the
    warehouse does not hold (the one before the first) is left out, the table shows the epoch alone."""
    from pipeline.warehouse.held import held_epochs

    options = spec.report.options(epoch) if spec.report is not None else {}
    if options.get("compare") is not None and int(options["compare"]) not in held_epochs(con):
        options = {k: v for k, v in options.items() if k != "compare"}
    return options


def compute(
    name: str,
    con: duckdb.DuckDBPyConnection,
    *,
    host: str | None,
    epoch: int | str | None = None,
    since: dt.datetime | str | None = None,
    until: dt.datetime | str | None = None,
    command: str | None = None,
    allow_open: bool = False,
    finality_lag: dt.timedelta = DEFAULT_FINALITY_LAG,
    **options: Any,
) -> EvidenceResult:
    """The evidence table `name` for `host` over all data, one epoch, or ``[since, until)``.

    ``since``/``until`` are datetimes or ISO-8601 strings (naive = UTC) and go together;
    ``epoch`` excludes them. ``command`` is the exact command line that reproduces the table
    (provenance footer); without it, the one `reproducing_command` derives from the arguments.
    Other keyword options are the table's own (its spec's ``options``, e.g. ``by_escrow``,
    ``all_participants``, ``compare``, ``detail``, ``by``); unset ones (None or False) are ignored,
    a set one the table does not declare is a user error.

    The result says whether its epochs are closed (``closure.py``, by ``finality_lag``); a comparison
    with an open epoch or a statistical test over one is refused unless ``allow_open``, and is then
    marked provisional.
    """
    try:
        spec = EVIDENCE[name]
    except KeyError:
        raise EvidenceError(f"unknown evidence table {name!r}; choose one of {', '.join(EVIDENCE)}") from None
    chosen = {key: value for key, value in options.items() if value is not None and value is not False}
    host = str(host).strip() if host is not None and str(host).strip() else None
    if host is None and not any((option := spec.option(key)) and option.without_host for key in chosen):
        raise EvidenceError(f"{name} needs --host ADDR (the host address, gonka1…)")
    window = Window.parse(epoch=epoch, since=since, until=until)
    for key in chosen:
        if spec.option(key) is None:
            raise EvidenceError(f"--{key.replace('_', '-')} is not available for {name}")
    host = check_request(con, host, window)
    for key, kind in VALUE_OPTIONS.items():  # a table option that names a host or an epoch, checked as --host is
        if key in chosen:
            chosen[key] = _held_option(con, kind, key, chosen[key])
    compared = (int(chosen["compare"]),) if "compare" in chosen else ()
    state = closure(con, window, finality_lag, also=compared)
    check_open(state, comparing=bool(compared), allow_open=allow_open)
    result = mark(spec.compute(con, host, window, **chosen), state, window, allow_open=allow_open)
    if command is None:
        command = reproducing_command(
            name, host, epoch=epoch, since=since, until=until, allow_open=allow_open and not state.closed, **chosen
        )
    result.provenance = provenance(con, window, command)
    return result


def reproducing_command(
    name: str,
    host: str | None,
    *,
    epoch: int | str | None = None,
    since: Any = None,
    until: Any = None,
    warehouse: str | None = None,
    allow_open: bool = False,
    **options: Any,
) -> str:
    """The `gonka-evidence evidence` command line that computes table `name` with these arguments:
    the window's times in UTC, the set table options by their flags, `--warehouse` when given."""
    from pipeline.core.command import command_line
    from pipeline.core.times import iso_utc

    args = ["evidence", name]
    if host is not None:
        args += ["--host", host]
    if epoch is not None:
        args += ["--epoch", str(epoch)]
    for flag, value in (("--since", since), ("--until", until)):
        if value is not None:
            args += [flag, iso_utc(value)]
    spec = EVIDENCE.get(name)
    for key, value in options.items():
        option = spec.option(key) if spec else None
        if option is None or value is None or value is False:
            continue  # compute() rejects an unknown option; an unset one is not on the command line
        args += [option.flag] if option.type is bool else [option.flag, str(value)]
    if allow_open:
        args.append(ALLOW_OPEN)
    if warehouse is not None:
        args += ["--warehouse", str(warehouse)]
    return command_line(*args)


__all__ = [
    "EVIDENCE",
    "EvidenceError",
    "EvidenceResult",
    "EvidenceSpec",
    "Option",
    "Provenance",
    "ReportContext",
    "ReportSection",
    "Window",
    "compute",
    "report_options",
    "reproducing_command",
]
