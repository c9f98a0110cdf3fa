"""Every job summary, rendered once from its result object: the lines an ingest, a log ingest, a JSON ingest,
a network ingest, the run's outcome and its preflight say. The terminal (pipeline/cli/console.py), `run`'s
log (pipeline/jobs/run.py) and `--format json` (`document`: the result object's facts and the same lines) all
take them from here; nothing here prints. Each function returns `Said` lines: ("info", text) or ("warning", text)."""

from __future__ import annotations

import dataclasses
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import polars as pl

    from pipeline.ingest.json_responses import JsonIngestSummary
    from pipeline.ingest.logs import LogIngestSummary
    from pipeline.ingest.runs import IngestSummary

Said = list[tuple[Literal["info", "warning"], str]]


def ingest(summary: IngestSummary, *, verbose: bool = False, other_builds: str | None = None) -> Said:
    """A copy's ingest (`ingest`, and each store or postgres source of `run`)."""
    from pipeline.ingest import missing_column_warnings

    said: Said = []
    if verbose:
        said += [("info", f"  {name}: {n:,} rows") for name, n in summary.rows.items()]
        said += [("info", f"  accounting {_accounting(r)}") for r in summary.accounting]
    said.append(
        (
            "info",
            f"ingested {summary.source_display}: {sum(summary.rows.values()):,} rows written; "
            f"escrows changed {summary.escrows_changed:,}, unchanged {summary.escrows_unchanged:,}; "
            f"new epochs: {', '.join(map(str, summary.new_epochs)) or 'none'}; "
            f"quarantined rows: {summary.quarantined:,}; replay/sealed disagreements: {summary.disagreements:,}; "
            f"snapshot disagreements: {summary.snapshot_disagreements:,} slots; elapsed {summary.elapsed_s:.1f} s"
            + ("; not read: its change markers are those of its last ingest" if summary.markers_unchanged else ""),
        )
    )
    if summary.snapshot_disagreements:
        said.append(
            (
                "info",
                f"  snapshot host stats disagreeing with the diff log or the ledger: "
                f"{summary.snapshot_disagreements:,} slots ({summary.snapshot_disagreements_imported:,} in escrows "
                "joined by import); query snapshot_host_stats_check lists them",
            )
        )
    if summary.rule_sets:  # escrows were derived (a no-op ingest imports no derive)
        from pipeline.ingest.derive import rule_set_lines

        said += [("info", f"  {line}") for line in rule_set_lines(list(summary.rule_sets.values()), every=verbose)]
    said += [("warning", line) for line in missing_column_warnings(summary.accounting)]
    if other_builds:
        said.append(("info", f"  {other_builds}"))
    return said


def _accounting(r: Any) -> str:
    return (
        f"{r.input}: {r.read:,} {r.unit} read = {r.used:,} used + {r.deduplicated:,} deduplicated + "
        f"{r.quarantined:,} quarantined" + (f" ({r.note})" if r.note else "")
    )


def ingest_logs(summary: LogIngestSummary, *, year: int | None = None) -> Said:
    """A log ingest (`ingest-logs`)."""
    from pipeline.ingest.logs import unrecognised_warnings

    kinds = ", ".join(f"{n} {k}" for k, n in sorted(summary.kinds.items()))
    said: Said = [
        (
            "info",
            f"ingest-logs {summary.run_id}: {summary.files} files ({kinds}), {summary.lines:,} lines, "
            f"{summary.elapsed_s:.1f}s",
        )
    ]
    said += [("info", f"  {table}: {n:,} new rows") for table, n in sorted(summary.rows.items())]
    if summary.replaced:
        said.append(
            (
                "info",
                f"  replaced {summary.replaced:,} records of files read before (times read with year "
                f"{year or 'from the file time'}, time zone {summary.timezone})",
            )
        )
    if summary.unparsed:
        said.append(("info", f"  unparsed lines: {summary.unparsed:,} (in quarantine)"))
    if summary.undecodable:
        said.append(
            (
                "info",
                f"  lines with bytes that are not UTF-8: {summary.undecodable:,} (at a line's end dropped, "
                "elsewhere read as U+FFFD)",
            )
        )
    said += [("warning", line) for line in unrecognised_warnings(summary)]
    if summary.unrecognised:
        said.append(("info", f"  files with nothing recognised: {len(summary.unrecognised)}"))
    said += [("warning", f"{line}; not read (in quarantine)") for line in summary.not_read]
    return said


def log_source(summary: LogIngestSummary, kind: str, path: str) -> Said:
    """A log source of `run`: one line, and a warning per file with nothing recognised."""
    from pipeline.ingest.logs import unrecognised_warnings

    new = ", ".join(f"{t} {n:,}" for t, n in summary.rows.items() if n) or "nothing new"
    said: Said = [
        (
            "info",
            f"ingested {kind} logs {path} ({summary.run_id}): {summary.files} files, {summary.lines:,} lines; {new}"
            + (f"; files with nothing recognised: {len(summary.unrecognised):,}" if summary.unrecognised else ""),
        )
    ]
    return said + [("warning", line) for line in unrecognised_warnings(summary)]


def ingest_json(summary: JsonIngestSummary, *, quiet: bool = False) -> Said:
    """`ingest-json`: a warning per file quarantined whole (with --quiet one, naming them all), then the counts."""
    if quiet:
        said: Said = [("warning", f"quarantined whole: {'; '.join(summary.unreadable)}")] if summary.unreadable else []
    else:
        said = [("warning", f"{line}; quarantined") for line in summary.unreadable]
    rows = ", ".join(f"{table} {n}" for table, n in summary.rows.items())
    return said + [
        (
            "info",
            f"ingested {summary.files} file(s): {rows}; quarantined {summary.quarantined} "
            f"({summary.elapsed_s:.2f} s, runs {', '.join(summary.run_ids)})",
        )
    ]


def json_source(summary: JsonIngestSummary, path: str) -> Said:
    """A JSON source of `run`."""
    return [("info", f"ingested JSON {path}: {summary.files} files, quarantined rows: {summary.quarantined:,}")]


def network_ingest(summary: Any) -> Said:
    """`network ingest`: each copy, then the lake."""
    said: Said = []
    for copy in summary.copies:
        said.append(
            (
                "info",
                f"copy {copy.label}: {sum(copy.rows.values()):,} rows, {copy.bytes_read:,} bytes read, "
                f"{copy.files} files",
            )
        )
        if missing := copy.missing():  # as `ingest` says them; each partition's run record names the class
            said.append(
                ("warning", f"copy {copy.label} lacks columns, read as NULL or their rows quarantined: {missing}")
            )
    said.append(
        (
            "info",
            f"lake {summary.lake}: {len(summary.partitions)} partitions ({summary.built} built, "
            f"{len(summary.partitions) - summary.built} unchanged) in {summary.buckets} buckets per epoch; diffs "
            f"{summary.total('diffs_before'):,} -> {summary.total('diffs_after'):,} after dedupe "
            f"({summary.total('bytes_before'):,} -> {summary.total('bytes_after'):,} bytes); forks: "
            f"{summary.total('forks'):,}; quarantined rows: {summary.total('quarantined'):,}; "
            f"{summary.elapsed_s:.1f} s",
        )
    )
    return said + [("warning", line) for line in fork_lines(summary.fork_keys())]


FORKS_NAMED = 50  # forks named one per line; the rest are counted (the view forked_diffs lists every one)


def fork_lines(keys: list[dict]) -> list[str]:
    """One line per forked diff: the escrow, the nonce and the copies whose bytes differ there."""
    lines = [
        f"fork: epoch {k['epoch']} escrow {k['escrow_id']} nonce {k['nonce']}: "
        + " vs ".join(f"{', '.join(v['copies'])} ({(v['digest'] or 'no digest')[:19]}…)" for v in k["versions"])
        for k in keys[:FORKS_NAMED]
    ]
    if len(keys) > FORKS_NAMED:
        lines.append(f"fork: {len(keys) - FORKS_NAMED:,} more (view forked_diffs of each partition warehouse)")
    return lines


def preflight(rows: pl.DataFrame) -> Said:
    """One line per build of the `preflight` table: the checks that fail or cannot tell."""
    import polars as pl

    said: Said = []
    for build in rows["build"].unique(maintain_order=True).to_list():
        part = rows.filter(pl.col("build") == build)
        found = []
        for verdict in ("fail", "cannot tell"):
            checks = part.filter(pl.col("verdict") == verdict)
            if checks.height:
                found.append(f"{verdict} {', '.join(f'{c} {n}' for c, n in checks.select('check', 'name').rows())}")
        said.append(("info", f"preflight of {build}: {'; '.join(found) or 'every check passes'}"))
    return said


def run_outcome(outcome: Any, *, output: Any, host: str | None, open_epochs: list[str]) -> Said:
    """The end of the run's log: reports written or refreshed, epochs still open, the warehouse."""
    said: Said = []
    if outcome.written:
        said.append(("info", f"new reports: {', '.join(f'epoch {e}' for e in outcome.written)} in {output}"))
    if outcome.rewritten:
        said.append(
            ("info", f"rewritten (data changed): {', '.join(f'epoch {e}' for e in outcome.rewritten)} in {output}")
        )
    if not outcome.written and not outcome.rewritten and host:
        said.append(("info", "reports: nothing new"))
    if outcome.index is not None:
        said.append(("info", f"index of every closed epoch: {outcome.index}"))
    said += [("info", line) for line in open_epochs]
    said.append(("info", "warehouse: updated" if outcome.published else "warehouse: unchanged (nothing new)"))
    return said


def as_json(said: Said) -> list[dict[str, str]]:
    """The lines as `--format json` gives them: [{"level": "info", "text": …}, …]."""
    return [{"level": level, "text": text} for level, text in said]


# How `run`'s log (stdout, kept by cron and systemd) writes a warning line; `run_log` reads it back.
LOG_WARNING = "  warning: "


def log_line(level: str, text: str) -> str:
    """One said line as `run`'s log writes it."""
    return LOG_WARNING + text if level == "warning" else text


def run_log(log: list[str]) -> Said:
    """The lines of `run`'s log (`RunOutcome.log`) as said lines again (`log_line` reversed)."""
    n = len(LOG_WARNING)
    return [("warning", line[n:]) if line.startswith(LOG_WARNING) else ("info", line) for line in log]


# Working state and bulky detail of a result object, left out of its JSON document (the lines say them).
HIDDEN_FIELDS = {"heads", "to_derive", "vllm_lines_read", "log", "closure", "rule_sets"}


def facts(value: Any) -> Any:
    """A result object as JSON values: a dataclass's fields (less `HIDDEN_FIELDS`), mappings, sequences, sets
    (sorted), paths and times as text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: facts(getattr(value, f.name)) for f in dataclasses.fields(value) if f.name not in HIDDEN_FIELDS}
    if isinstance(value, dict):
        return {str(k): facts(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [facts(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(facts(v) for v in value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    return value


def document(command: str, result: Any, said: Said, **extra: Any) -> dict[str, Any]:
    """The `--format json` document of a job: {"command": …, "result": the result object's facts and `extra`,
    "lines": the lines the text format says, as `as_json` gives them}."""
    return {
        "command": command,
        "result": facts(result) | {k: facts(v) for k, v in extra.items()},
        "lines": as_json(said),
    }
