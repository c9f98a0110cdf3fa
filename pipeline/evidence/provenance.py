"""The provenance footer of an evidence table: which copies, which runs, which window, which command."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import duckdb

if TYPE_CHECKING:
    import polars as pl

from pipeline.core.command import command_line, command_path  # noqa: F401  (the one builder)
from pipeline.core.paths import sql_text
from pipeline.core.times import iso_utc
from pipeline.core.version import pipeline_version
from pipeline.evidence.result import Provenance
from pipeline.evidence.spec import EvidenceSpec
from pipeline.evidence.window import Window
from pipeline.warehouse.database import fetch_frame, run_order

# Labels to show in place of the warehouse's, by source id (`verify`: a bundle's own labels for the same copies).
_LABELS: ContextVar[dict[str, str | None] | None] = ContextVar("source_labels", default=None)


@contextmanager
def labelled_as(labels: dict[str, str | None]) -> Iterator[None]:
    """Within the block, provenance and the report's quarantine name each source in ``labels`` (source id →
    label) by that label: a label is a name given at ingest, not evidence, so `verify` recomputes a bundle
    under the bundle's own labels."""
    token = _LABELS.set(labels)
    try:
        yield
    finally:
        _LABELS.reset(token)


def source_label(source_id: str, label: str | None) -> str | None:
    """The label to show for ``source_id`` (its own, unless `labelled_as` says otherwise)."""
    labels = _LABELS.get()
    return labels[source_id] if labels is not None and source_id in labels else label


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
    sources = latest_sources(con)
    quarantined = fetch_frame(con, "SELECT count(*) AS n FROM quarantine")["n"][0]
    listed = sources.select("source_id", "source_kind", "label", "copy_at", "input_digest").to_dicts()
    return Provenance(
        sources=[source | {"label": source_label(source["source_id"], source["label"])} for source in listed],
        run_ids=[run for runs in sources["run_ids"].to_list() for run in runs],
        window=window.as_dict(),
        quarantined_rows=int(quarantined),
        command=command,
        pipeline_version=pipeline_version(),
        failed_runs=fetch_frame(con, sql_text("evidence/failed_runs.sql").format(run_order=run_order(con))).to_dicts(),
        escrow_findings=escrow_findings(con, window),
    )


def latest_sources(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Each source with a successful ingest run, with its latest run's kind, label, copy time and digest."""
    return fetch_frame(con, sql_text("evidence/sources.sql").format(run_order=run_order(con)))


def escrow_findings(con: duckdb.DuckDBPyConnection, window: Window | None = None) -> list[dict[str, Any]]:
    """Escrows (of `window`, else all) whose diff log no copy held whole, or whose copies disagree."""
    params = (window or Window()).params
    return fetch_frame(con, sql_text("evidence/escrow_coverage_findings.sql"), params).to_dicts()


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
    args = ["evidence", spec.name, "--host", host, *window_args(window)]
    for name, value in options.items():
        option = spec.option(name)
        assert option is not None, name  # the report's options are the spec's own
        args += [option.flag] + ([] if value is True else [str(value)])
    if allow_open:
        args.append("--allow-open")
    if warehouse_arg:
        args += ["--warehouse", warehouse_arg]
    return command_line(*args)
