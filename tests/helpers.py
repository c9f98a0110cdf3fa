"""Helpers shared by tests: ingest into a fresh warehouse, read public views in a stable order."""

from __future__ import annotations

import contextlib
import gc
import shutil
import sys
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import polars as pl
import psycopg

from pipeline.ingest.store import IngestSummary, ingest_store
from pipeline.sources.store import open_store
from pipeline.warehouse.database import fetch_frame, open_for_write

# Public data views and the key that orders them; ingest_runs/quarantine carry run ids and are compared apart.
VIEW_KEYS = {
    "escrows": ["escrow_id"],
    "escrow_slots": ["escrow_id", "slot_id"],
    "txs": ["escrow_id", "nonce", "tx_index"],
    "inferences": ["escrow_id", "inference_id"],
    "validations": ["escrow_id", "nonce", "tx_index"],
}


@cache
def _blank_warehouse() -> Path:
    """A new warehouse (schema and views, nothing else) made once per test process, in a directory removed at exit."""
    directory = tempfile.TemporaryDirectory(prefix="gonka-blank-warehouse-")
    path = Path(directory.name) / "w.duckdb"
    open_for_write(path).close()
    _blank_warehouse.directory = directory  # type: ignore[attr-defined]  # kept alive with the cache
    return path


def open_new(warehouse: Path):
    """`open_for_write(warehouse)`; a warehouse not there yet starts as a copy of `_blank_warehouse`, which
    `open_for_write` finds up to date (making each anew would run every schema script again)."""
    if not warehouse.exists():
        shutil.copyfile(_blank_warehouse(), warehouse)
    return open_for_write(warehouse)


def ingest(warehouse: Path, source: str | Path, label: str | None = None) -> IngestSummary:
    con = open_new(warehouse)
    store = open_store(str(source))
    try:
        return ingest_store(con, store, label=label)
    finally:
        store.close()
        con.close()


def views(warehouse: Path) -> dict[str, pl.DataFrame]:
    con = open_for_write(warehouse)
    try:
        return {v: fetch_frame(con, f"SELECT * FROM {v} ORDER BY {', '.join(k)}") for v, k in VIEW_KEYS.items()}
    finally:
        con.close()


def frame(warehouse: Path, sql: str) -> pl.DataFrame:
    con = open_for_write(warehouse)
    try:
        return fetch_frame(con, sql)
    finally:
        con.close()


def assert_views_equal(a: dict[str, pl.DataFrame], b: dict[str, pl.DataFrame]) -> None:
    from polars.testing import assert_frame_equal

    for name in VIEW_KEYS:
        assert a[name].height > 0, f"{name} is empty"
        assert_frame_equal(a[name], b[name], check_dtypes=True, check_exact=True)


def throwaway_database(request, template: str | None = None) -> str:
    """An empty PostgreSQL database (or a copy of database `template`) dropped when the requesting fixture's
    scope ends (any scope)."""
    server = request.getfixturevalue("pg_server")
    name = f"ge_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))

    def drop() -> None:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    request.addfinalizer(drop)
    return f"{server}/{name}"


def evidence(con, name: str, host: str, **options):
    """One evidence table computed on an open connection, as `gonka-evidence evidence NAME --allow-open` does,
    its closure marks set aside (`without_closure`): the tests that use it compare counts."""
    from pipeline.evidence import compute

    options.setdefault("allow_open", True)
    return without_closure(compute(name, con, host=host, command=f"gonka-evidence evidence {name}", **options))


def without_closure(result):
    """`result` without its closure marks (pipeline/evidence/closure.py: a ``provisional`` column,
    ``params.closure``, ``stats.provisional``, the closure note), which tests/evidence/test_closure.py tests,
    so that tests comparing counts compare them as before."""
    from pipeline.evidence.closure import PROVISIONAL_COLUMN, is_closure_note

    if PROVISIONAL_COLUMN in result.rows.columns:
        result.rows = result.rows.drop(PROVISIONAL_COLUMN)
    result.params = {k: v for k, v in result.params.items() if k != "closure"}
    result.stats = {k: v for k, v in result.stats.items() if k != "provisional"}
    result.notes = [n for n in result.notes if not is_closure_note(n)]
    return result


def approx_equal(a, b, rel: float = 1e-9) -> None:
    import pytest

    assert a == pytest.approx(b, rel=rel, abs=1e-12)


def con_frame(con, sql: str, params: dict | None = None) -> pl.DataFrame:
    """``sql`` on an open connection as a frame."""
    return fetch_frame(con, sql, params or {})


def build_at(builds, host: str, at) -> str | None:
    """The label of ``host``'s build in effect at ``at`` (a datetime), from a timeline's build windows."""
    label = None
    for window in sorted(builds, key=lambda w: w.since):
        if window.host == host and window.since <= at.timestamp():
            label = window.label
    return label


def idle_host(con, epoch: int) -> str:
    """A host the warehouse holds (it holds slots) that holds none in ``epoch``'s escrows: present, with
    nothing there (a host the warehouse does not hold at all is an error, not an empty table)."""
    rows = con_frame(
        con,
        "SELECT address FROM escrow_slots GROUP BY address "
        "HAVING count(*) FILTER (epoch_id = $epoch) = 0 ORDER BY address",
        {"epoch": epoch},
    )
    assert rows.height, f"the samples have a host with no slot in epoch {epoch}"
    return rows["address"][0]


def quiet_window(con, host: str) -> tuple:
    """A ``(since, until)`` inside the warehouse's data in which ``host`` neither started an answer nor cast
    a verdict: from the data's first instant to the host's first act."""
    from pipeline.core.paths import sql_text

    first = con_frame(con, sql_text("evidence/held_span.sql"))["first_at"][0]
    acts = con_frame(
        con,
        "SELECT least((SELECT min(started_at) FROM inferences WHERE executor = $host), "
        "(SELECT min(event_at) FROM validations WHERE validator = $host)) AS at",
        {"host": host},
    )["at"][0]
    assert first < acts, "the host's first act is after the data's first instant"
    return first, acts


@dataclass(frozen=True)
class Done:
    """What `gonka-evidence ARGS` gave, as `subprocess.run(..., capture_output=True, text=True)` holds it."""

    returncode: int
    stdout: str
    stderr: str


def cli_in(directory: Path, *args: str, env: Mapping[str, str | None] | None = None) -> Done:
    """`gonka-evidence ARGS` run in-process (typer's CliRunner) with `directory` as the working directory, ARGS
    as sys.argv and `env` over this process's environment (None unsets a variable): its exit code and its stdout
    and stderr apart, as a process of its own gives them. For tests of what a command says and exits with; a
    property of a real process (a signal, a closed or full stream, the locale, a variable read at import, what
    is left at exit, a time limit on a command that could block) needs one. An exception the CLI did not turn
    into an exit (a traceback in a process of its own) is raised here. A command that writes a warehouse the test
    holds open needs a copy of it: in this process DuckDB refuses a writer beside the held connection."""
    from typer.testing import CliRunner

    from pipeline.cli.app import app

    argv = sys.argv
    sys.argv = ["gonka-evidence", *args]  # as the process would have it: provenance footers quote sys.argv
    try:
        with contextlib.chdir(directory):
            result = CliRunner().invoke(app, list(args), env=dict(env) if env else None)
    finally:
        sys.argv = argv
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    done = Done(result.exit_code, result.stdout, result.stderr)
    del result  # its exception's frames hold the command's DuckDB connections: freed, as its exit frees them
    gc.collect()
    return done
