"""The `report epoch` task: one epoch report built from the warehouse and written to OUT/epoch-N/."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import duckdb

from pipeline.core.roles import Role
from pipeline.output.guards.roles import check_path, claim_output_dir
from pipeline.output.guards.safety import OutputError, OutputGuard
from pipeline.output.report.model import build_epoch_report
from pipeline.output.report.render import write_epoch_report


@dataclass(frozen=True)
class ReportWritten:
    """An epoch report written: ``path`` is OUT/epoch-N."""

    epoch: int
    host: str
    path: Path


def write_report(
    con: duckdb.DuckDBPyConnection,
    warehouse: Path,
    epoch: int,
    host: str,
    out: Path,
    *,
    finality_lag: timedelta,
    warehouse_arg: str | None,
) -> ReportWritten:
    """Write the report of `epoch` for `host` to OUT/epoch-N/ (never over the warehouse or a source; OUT
    new, empty or the tool's own); `warehouse_arg` names the warehouse in the reproducing commands."""
    OutputGuard.of(con, warehouse).check(out / f"epoch-{epoch}", "--out")
    check_path(out, Role.OUTPUT_DIR, "--out")  # new, empty or the tool's own, as the CLI's option
    built = build_epoch_report(
        con,
        epoch,
        host,
        finality_lag=finality_lag,
        warehouse_arg=warehouse_arg,
        out_arg=None if out == Path("out") else str(out),
    )
    try:
        claim_output_dir(out)
        return ReportWritten(epoch, host, write_epoch_report(built, out))
    except OSError as exc:  # --out is a file or a device, or cannot be written
        raise OutputError(f"--out {out}: cannot write the report there ({exc.strerror or exc})") from None
