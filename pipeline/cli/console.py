"""Terminal output of the CLI: progress bars, run summaries, doctor reports.

Data goes to stdout (`out`); progress, summaries and notices go to stderr (`err`),
so that `gonka-evidence query ... > file` and pipes carry data only. `--quiet` silences
stderr's progress and summaries (errors still print), `--verbose` adds detail there.

Rich and Polars are imported when something is printed with them, not with this module: the
one-line summaries (`info`, `run_line`) need neither, and an ingest of an unchanged copy prints
nothing else (bench/BENCHMARKS.md, the no-op re-ingest).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING

from pipeline.core.verbosity import NORMAL, QUIET, VERBOSE, set_verbosity, verbosity  # noqa: F401  (re-exported)

if TYPE_CHECKING:
    import polars as pl
    from rich.console import Console

    from pipeline.core.events import Listener
    from pipeline.ingest.accounting import AccountingRow
    from pipeline.ingest.runs import IngestSummary
    from pipeline.sources.store.base import SourceDescription


@cache
def _console(stderr: bool) -> Console:
    from rich.console import Console

    # Off a terminal (pipes, CI logs) tables keep their full width instead of 80 columns.
    stream = sys.stderr if stderr else sys.stdout

    class StreamConsole(Console):
        def on_broken_pipe(self) -> None:
            # Rich would end the process with a silent SystemExit(1) when the reader of stdout goes away;
            # re-raised, the command's conventions make it exit 141 (`| head`) as `query` does.
            raise  # Rich calls this inside its `except BrokenPipeError`

    return StreamConsole(stderr=stderr, highlight=False, width=None if stream.isatty() else 200)


def __getattr__(name: str):
    """`out` (stdout) and `err` (stderr): Rich consoles, made on first use."""
    if name in ("out", "err"):
        return _console(name == "err")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _line(stream, message: str) -> None:
    """One line as written, never read as markup, no character of it acting on the terminal (an ANSI
    sequence, a carriage return or a line feed from a label or a log shows as ``\x1b``, ``\x0d``, ``\x0a``:
    it can never start a line of its own in `run`'s log)."""
    from pipeline.core.text import visible

    stream.write(visible(message, one_line=True) + "\n")
    stream.flush()


def info(message: str) -> None:
    """A summary or notice for the person at the terminal: stderr, silent with --quiet."""
    if verbosity() >= NORMAL:
        _line(sys.stderr, message)


def detail(message: str) -> None:
    """Detail shown only with --verbose (stderr)."""
    if verbosity() >= VERBOSE:
        _line(sys.stderr, message)


@contextmanager
def ingest_progress() -> Iterator:
    """A progress callback for `ingest_store`: bars on a terminal, silence otherwise (and with --quiet)."""
    if not sys.stderr.isatty() or verbosity() < NORMAL:
        yield None
        return
    # Imported here: a scheduled job (no terminal) does not need it.
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    tasks: dict[str, TaskID] = {}
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("rows"),
        TimeElapsedColumn(),
        console=_console(True),
        transient=True,
    ) as bars:

        def update(name: str, advance: int, total: int) -> None:
            if name not in tasks:
                tasks[name] = bars.add_task(name, total=None)  # unknown until a total arrives
            task = tasks[name]
            if total:
                bars.update(task, total=(bars.tasks[task].total or 0) + total)
            if advance:
                bars.advance(task, advance)

        yield update


def print_accounting(rows: list[AccountingRow], stderr: bool = True, title: str = "accounting") -> None:
    """Where every row an ingest read went (`ingest --verbose`, `doctor --warehouse`): read = used +
    deduplicated + quarantined per input, and what was seen and not read."""
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=True, title=f"{title}: read = used + deduplicated + quarantined")
    for name in ("input", "read", "used", "deduplicated", "quarantined", "note"):
        table.add_column(name, justify="left" if name in ("input", "note") else "right")
    for r in rows:
        table.add_row(
            Text(f"{r.input} ({r.unit})"),
            f"{r.read:,}",
            f"{r.used:,}",
            f"{r.deduplicated:,}",
            f"{r.quarantined:,}",
            Text(r.note or ""),
        )
    _console(stderr).print(table)


def print_ingest_summary(summary: IngestSummary) -> None:
    """The rows per table of an ingest as a table, then its summary as every ingest says it
    (pipeline/output/summaries.py), on stderr (a summary, not data)."""
    if verbosity() < NORMAL:
        return
    # The heading on its own line: as a table title it would wrap to the two narrow columns.
    info(f"ingest {summary.run_id} — {summary.source_display}")
    if summary.rows:
        from rich.table import Table
        from rich.text import Text

        table = Table(show_header=True)
        table.add_column("table")
        table.add_column("rows", justify="right")
        for name, n in summary.rows.items():
            table.add_row(Text(name), f"{n:,}")
        _console(True).print(table)
    if verbosity() >= VERBOSE and summary.accounting:
        print_accounting(summary.accounting)
    from pipeline import api

    say(api.summaries.ingest(summary))


def data(text: str, nl: bool = True) -> None:
    """Data on stdout (a table, a proposal, the version): as written, never wrapped or read as markup."""
    import typer

    typer.echo(text, nl=nl)


# Formats whose every character is a value: written as UTF-8 whatever the locale, as `query` writes.
UTF8_FORMATS = frozenset({"csv", "json"})


def rendered(text: str, fmt: str) -> None:
    """An evidence table rendered as `fmt`, on stdout: csv and json as UTF-8 bytes (the terminal's escape of
    a character it cannot show, ``\\u2013``, would change a value there), markdown and table as `data`."""
    if fmt not in UTF8_FORMATS:
        data(text)
        return
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode("utf-8") + b"\n")
    sys.stdout.buffer.flush()


def show(text: str, *, soft_wrap: bool = False) -> None:
    """A line of a command's own output on stdout (a summary's is sent to stderr by `user_errors` unless the
    command prints data): never read as markup; `soft_wrap`: never wrapped, however wide."""
    _console(False).print(text, markup=False, highlight=False, soft_wrap=soft_wrap)


def error(message: str) -> None:
    """The one line of a failed command, on stderr (with --quiet too): 'error: …', whole."""
    _console(True).print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)


def print_document(document: dict) -> None:
    """A job summary as one JSON document (`--format json`, pipeline/output/summaries.py `document`) on stdout."""
    import json

    data(json.dumps(document, indent=2))


def say(said: Sequence[tuple[str, str]]) -> None:
    """The lines of a job summary (pipeline/output/summaries.py): information, or warnings."""
    for level, text in said:
        (warning if level == "warning" else info)(text)


# --- `run`'s log: its stdout, one line per fact (see pipeline/jobs/run.py) ----------------------------------


def run_line(message: str) -> None:
    """One line of `run`'s log on stdout: never wrapped, never read as markup; nothing with --quiet."""
    if verbosity() > QUIET:
        _line(sys.stdout, message)


def print_frame(frame: pl.DataFrame, title: str | None = None) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    out = _console(False)
    # Off a terminal (a log file) no box drawing: plain columns.
    table = Table(title=None if title is None else Text(title), box=box.HEAVY_HEAD if out.is_terminal else None)
    for col in frame.columns:
        table.add_column(Text(col), justify="right" if frame.schema[col].is_numeric() else "left")
    from pipeline.core.text import visible

    for row in frame.iter_rows():  # Text cells: a value is never read as Rich markup nor acts on the terminal
        table.add_row(
            *[
                Text(
                    "–"
                    if v is None
                    else f"{v:,}"
                    if isinstance(v, int) and not isinstance(v, bool)
                    else visible(str(v), one_line=True)
                )
                for v in row
            ]
        )
    out.print(table)


def print_description(
    d: SourceDescription, findings: dict[str, int] | None = None, escrow_lines: list[str] | None = None
) -> None:
    from rich.table import Table
    from rich.text import Text

    out = _console(False)

    # Paths, names and notes come from the source: printed as written (Text, never markup), each line whole.
    def say(text: str | Text) -> None:
        from pipeline.core.text import visible

        out.print(text if isinstance(text, Text) else Text(visible(text)), highlight=False, soft_wrap=True)

    say(Text.assemble((d.display, "bold"), f"  layout: {d.kind}  source id: {d.source_id}"))
    say(f"lineage id: {d.lineage_id or '– (none; the path is the source id)'}")
    say(f"planes: {', '.join(d.planes)}")
    say("schema versions: " + ", ".join(f"{k}={v}" for k, v in d.schema_versions.items()))
    for where, release_line in d.release_lines.items():
        say(f"release line ({where}): {release_line}")
    if d.snapshots:
        say(f"snapshots: {d.snapshots}")
    if findings is not None:
        say(
            f"in the warehouse: {findings['seal_conflicts']:,} sealed rows disagree with another copy "
            f"({findings['drained_conflicts']:,} of drained records; see replay_disagreements and quarantine), "
            f"{findings['snapshot_disagreements']:,} checkpoint slots disagree with the diff log or the ledger "
            "(query snapshot_host_stats_check)"
        )
        for line in escrow_lines or []:
            say(f"in the warehouse: {line}")
    say(f"epochs: {', '.join(map(str, d.epochs)) or 'none'}")
    epochs = sorted({e for t in d.tables for e in t.rows_by_epoch if e is not None})
    table = Table()
    table.add_column("table")
    for e in epochs:
        table.add_column(f"epoch {e}", justify="right")
    table.add_column("unscoped", justify="right")
    table.add_column("schema notes")
    for t in sorted(d.tables, key=lambda t: t.name):
        notes = []
        if t.missing_columns:
            notes.append("missing " + "; ".join(t.missing_columns))
        if t.extra_columns:
            notes.append("extra " + "; ".join(t.extra_columns))
        cells = [f"{t.rows_by_epoch[e]:,}" if e in t.rows_by_epoch else "" for e in epochs]
        unscoped = t.rows_by_epoch.get(None)
        table.add_row(Text(t.name), *cells, "" if unscoped is None else f"{unscoped:,}", Text("; ".join(notes)))
    out.print(table)
    if d.unrecognised:
        say(Text("unrecognised:", "bold"))
        for u in d.unrecognised:
            say(f"  - {u}")
    else:
        say("unrecognised: nothing")


def warning(message: str) -> None:
    """A warning of the library, on stderr (with --quiet too)."""
    from pipeline.core.text import visible

    _console(True).print(f"warning: {visible(message, one_line=True)}", markup=False, highlight=False, soft_wrap=True)


def print_text(text: str) -> None:
    """A block of text (a Markdown table) on stdout, then a blank line; each line whole, however wide."""
    out = _console(False)
    out.print(text, markup=False, highlight=False, soft_wrap=True)
    out.print()


def listener(*, log: bool = True) -> Listener:
    """What the library says, printed the CLI's way: `run`'s lines on stdout, warnings on stderr,
    progress bars on a terminal, tables and text with --verbose. Without `log` (`run --format json`, whose
    stdout is its JSON document) the lines, tables and text are not printed (the job keeps its lines)."""
    from pipeline.core.events import Listener

    if not log:
        return Listener(warning=warning, progress=ingest_progress, verbose=verbosity() >= VERBOSE)
    return Listener(
        line=run_line,
        warning=warning,
        table=print_frame,
        text=print_text,
        progress=ingest_progress,
        verbose=verbosity() >= VERBOSE,
    )
