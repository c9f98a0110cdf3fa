"""The provenance footer of an evidence table: which copies, which runs, which window, which command."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

import duckdb

from pipeline.core.paths import sql_text
from pipeline.core.times import iso_utc
from pipeline.core.version import pipeline_version
from pipeline.evidence.result import Provenance
from pipeline.evidence.spec import EvidenceSpec
from pipeline.evidence.window import Window
from pipeline.warehouse.database import fetch_frame


def provenance(con: duckdb.DuckDBPyConnection, window: Window, command: str) -> Provenance:
    """Provenance of a table computed now from the warehouse behind `con`.

    Sources are those with at least one successful ingest run (``status = 'ok'``);
    each carries the kind, label, copy time and input digest of its latest successful run.
    ``run_ids`` are all successful runs, per source in run order. Quarantined rows
    are counted over the whole warehouse: a row that could not be decoded may
    belong to any table. A source whose latest run failed (or was killed) is listed in
    ``failed_runs``: what that run committed before it stopped may be in the table. Escrows of the
    window with a partial diff log or copies that disagree are in ``escrow_findings``.
    """
    sources = fetch_frame(con, sql_text("evidence/sources.sql"))
    quarantined = fetch_frame(con, "SELECT count(*) AS n FROM quarantine")["n"][0]
    return Provenance(
        sources=sources.select("source_id", "source_kind", "label", "copy_at", "input_digest").to_dicts(),
        run_ids=[run for runs in sources["run_ids"].to_list() for run in runs],
        window=window.as_dict(),
        quarantined_rows=int(quarantined),
        command=command,
        pipeline_version=pipeline_version(),
        failed_runs=fetch_frame(con, sql_text("evidence/failed_runs.sql")).to_dicts(),
        escrow_findings=escrow_findings(con, window),
    )


def escrow_findings(con: duckdb.DuckDBPyConnection, window: Window | None = None) -> list[dict[str, Any]]:
    """Escrows (of `window`, else all) whose diff log no copy held whole, or whose copies disagree."""
    params = (window or Window()).params
    return fetch_frame(con, sql_text("evidence/escrow_coverage_findings.sql"), params).to_dicts()


def command_path(path: Path | str) -> str:
    """A path as a reproducing command names it: relative to the working directory, so that no
    command in a footer or report names an absolute path of this machine."""
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive (Windows): nothing relative to point at
        return str(path)


def window_args(window: Window) -> list[str]:
    """The window as command-line options: ``--epoch N`` or ``--since T --until T`` (UTC, ``Z``)."""
    if window.epoch is not None:
        return ["--epoch", str(window.epoch)]
    if window.since is not None and window.until is not None:
        return ["--since", iso_utc(window.since), "--until", iso_utc(window.until)]
    return []


def evidence_command(
    spec: EvidenceSpec,
    host: str,
    window: Window,
    options: dict[str, Any],
    warehouse_arg: str | None = None,
    *,
    allow_open: bool = False,
) -> str:
    """The ``gonka-evidence evidence`` command that prints `spec`'s table with these options (and
    ``--allow-open`` when it covers an open epoch)."""
    args = ["gonka-evidence", "evidence", spec.name, "--host", host, *window_args(window)]
    for name, value in options.items():
        option = spec.option(name)
        assert option is not None, name  # the report's options are the spec's own
        args += [option.flag] + ([] if value is True else [str(value)])
    if allow_open:
        args.append("--allow-open")
    if warehouse_arg:
        args += ["--warehouse", warehouse_arg]
    return shlex.join(args)
