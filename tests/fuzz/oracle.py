"""The fuzzer's oracle: what must hold after any command on any input, however broken.

- the exit code is 0, 1, 2 or 3 and nothing is a traceback;
- stderr holds at most one line (the commands run with --quiet, so a success says nothing and a
  failure says one `error:` line; a usage error, exit 2, is click's usage block);
- no source changed (every file under it hashed before and after; a PostgreSQL copy's tables too);
- the accounting identity holds for every ingest run (`accounting_violations`);
- no planted secret appears in stdout, stderr, any warehouse text or any file written.

Commands run on the real CLI through typer's CliRunner, under a watchdog: a command that does not
return within `HANG_SECONDS` is a hang, reported as such.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
from typer.testing import CliRunner

from pipeline.cli.app import app

ALLOWED_EXIT = {0, 1, 2, 3}
HANG_SECONDS = 60
runner = CliRunner()


class Hang(Exception):
    """A command that did not return within HANG_SECONDS."""


@dataclass
class Outcome:
    args: list[str]
    exit_code: int
    stdout: str
    stderr: str
    exception: BaseException | None


@contextlib.contextmanager
def _watchdog(seconds: int, args: list[str]) -> Iterator[None]:
    def fire(signum, frame):
        raise Hang(f"no answer after {seconds} s: gonka-evidence {' '.join(args)}")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def invoke(args: list[str], env: dict[str, str] | None = None, seconds: int = HANG_SECONDS) -> Outcome:
    with _watchdog(seconds, args):
        result = runner.invoke(app, args, env=env)
    exception = result.exception if not isinstance(result.exception, SystemExit) else None
    return Outcome(args, result.exit_code, result.stdout, result.stderr, exception)


def check(outcome: Outcome, secrets: Iterable[str] = ()) -> None:
    """The per-command part of the oracle: exit code, stderr, tracebacks, secrets."""
    where = f"gonka-evidence {' '.join(outcome.args)}"
    assert outcome.exception is None, f"{where}: raised {outcome.exception!r}"
    assert outcome.exit_code in ALLOWED_EXIT, f"{where}: exit {outcome.exit_code}\n{outcome.stderr}"
    text = outcome.stdout + outcome.stderr
    assert "Traceback" not in text, f"{where}: traceback\n{text}"
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    if outcome.exit_code != 2:
        assert len(lines) <= 1, f"{where}: {len(lines)} lines on stderr\n{outcome.stderr}"
        if outcome.exit_code == 1:
            assert lines and lines[0].startswith("error: "), f"{where}: exit 1 without an error line\n{outcome.stderr}"
    for secret in secrets:
        assert secret not in text, f"{where}: the secret {secret!r} was printed"


def tree_digest(*roots: Path) -> dict[str, str]:
    """Every entry under `roots` (not following links) with the sha256 of a regular file's bytes, or
    its kind and target: a source changed in any way differs."""
    found: dict[str, str] = {}
    for root in roots:
        paths = [root, *root.rglob("*")] if root.is_dir() and not root.is_symlink() else [root]
        for path in paths:
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                continue
            if stat.S_ISREG(mode):
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            elif stat.S_ISLNK(mode):
                found[str(path)] = f"link:{os.readlink(path)}"
            else:
                found[str(path)] = f"mode:{stat.S_IFMT(mode)}"
    return found


def pg_digest(url: str) -> str:
    """The content of every table of a PostgreSQL database, as one sha256."""
    import psycopg

    digest = hashlib.sha256()
    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "SELECT quote_ident(schemaname) || '.' || quote_ident(tablename) FROM pg_tables "
            "WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1"
        ).fetchall()
        for (table,) in tables:
            rows = conn.execute(f"SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM {table} t")
            digest.update(f"{table}:{rows.fetchone()[0]}\n".encode())  # type: ignore[index]
    return digest.hexdigest()


# --- the accounting identity -----------------------------------------------------------
ACCOUNTING_TABLE = "ingest_accounting"  # one row per ingest run and input


def accounting_violations(warehouse: Path) -> list[str]:
    """HOOK for the accounting identity: the rows of `ingest_accounting` where rows read is not rows
    used + deduplicated + quarantined. A warehouse without the table (made before it existed) has
    nothing to check; wire `pipeline.ingest.accounting.identity_violations` here once it exists."""
    if not warehouse.is_file():
        return []
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        exists = con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [ACCOUNTING_TABLE]
        ).fetchone()[0]  # type: ignore[index]
        if not exists:
            return []
        rows = con.execute(
            f"SELECT run_id, input, rows_read, rows_used, rows_deduplicated, rows_quarantined FROM {ACCOUNTING_TABLE} "
            "WHERE rows_read IS DISTINCT FROM rows_used + rows_deduplicated + rows_quarantined"
        ).fetchall()
    finally:
        con.close()
    return [
        f"run {r[0]} input {r[1]}: read {r[2]} != used {r[3]} + deduplicated {r[4]} + quarantined {r[5]}" for r in rows
    ]


def warehouse_text(warehouse: Path) -> str:
    """Every text value of every table of a warehouse, for the secret check."""
    if not warehouse.is_file():
        return ""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        parts = []
        columns = con.execute(
            "SELECT table_name, column_name FROM duckdb_columns() "
            "WHERE data_type IN ('VARCHAR', 'JSON') AND NOT internal AND schema_name = 'main'"
        ).fetchall()
        for table, column in columns:
            quoted = '"' + column.replace('"', '""') + '"'
            parts += [str(v) for (v,) in con.execute(f'SELECT DISTINCT {quoted} FROM "{table}"').fetchall()]
        return "\n".join(parts)
    finally:
        con.close()
