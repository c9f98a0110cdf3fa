"""Ctrl-C at any moment ends the CLI with one line, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest


# A Ctrl-C as the ingest ends (or after it): seconds of a core. stands in the default tier:
# tests/cli/test_interrupts.py::test_ctrl_c_at_any_moment_is_one_line (its 0.6 s to 1.8 s cases: importing,
# reading the copy, writing the warehouse)
@pytest.mark.parametrize("delay", [0.6, 1.2, 1.8, pytest.param(2.5, marks=pytest.mark.heavy)])
def test_ctrl_c_at_any_moment_is_one_line(tmp_path, delay):
    """SIGINT while the CLI is still importing, reading the copy or writing the warehouse: the one-line
    message and exit code 130 (or a finished ingest when it came too late), never a traceback. (The
    delays start after the interpreter's own start-up, whose interrupts Python itself reports.)"""
    import signal
    import subprocess
    import sys
    import time

    script = Path(sys.executable).with_name("gonka-evidence")
    store = Path(__file__).resolve().parents[2] / "data-samples" / "store"
    proc = subprocess.Popen(
        [str(script), "ingest", str(store), "-w", str(tmp_path / "w.duckdb")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert "Traceback" not in err, err
    if proc.returncode == -signal.SIGINT:  # outside Python's handler (interpreter start or exit): no output of ours
        assert "error:" not in err, err
    elif proc.returncode != 0:
        assert proc.returncode == 130, (proc.returncode, err)
        assert err.strip().splitlines()[-1].startswith("error: interrupted"), err


def test_a_ctrl_c_that_duckdb_reports_is_an_interrupt_however_it_is_wrapped():
    """The shapes seen from a real Ctrl-C (the test above, under load): DuckDB's error naming the
    KeyboardInterrupt raised in a Python source it read, then an error of the aborted transaction while
    cleaning up; and DuckDB's error with the KeyboardInterrupt as its cause. Other errors are not."""
    import duckdb

    from pipeline.cli.conventions import _is_interrupt

    def chained(first: BaseException, then: Exception) -> Exception:
        try:
            try:
                raise first
            except BaseException:
                raise then  # noqa: B904 - the clean-up's error, chained implicitly (as __context__) on purpose
        except Exception as exc:
            return exc

    named = duckdb.InvalidInputException(
        "Invalid Input Error: reading the schema of the object registered as 'rows_to_insert' failed: "
        "KeyboardInterrupt: "
    )
    aborted = duckdb.TransactionException("TransactionContext Error: Current transaction is aborted (please ROLLBACK)")
    assert _is_interrupt(chained(named, aborted))
    caused = duckdb.InvalidInputException("offering a filter to the source registered as 'x' failed")
    caused.__cause__ = KeyboardInterrupt()
    assert _is_interrupt(caused)
    assert _is_interrupt(chained(RuntimeError("Query interrupted"), aborted))
    assert not _is_interrupt(chained(duckdb.InvalidInputException("failed: ValueError: bad"), aborted))
    assert not _is_interrupt(aborted)


def test_clean_up_that_a_ctrl_c_breaks_prints_nothing_after_the_one_line():
    """A Ctrl-C leaves a generator suspended whose clean-up fails once the process ends (seen under load:
    `ingest_memory` resetting a setting on a connection already closed, the SQLite driver's open
    statement): the script ends with the one line and 130, and no "Exception ignored" traceback."""
    import subprocess
    import sys

    script = """
import os, signal, sys, time
import pipeline.cli.app
from pipeline.cli import main

def setting_reset():
    try:
        yield
    finally:
        raise RuntimeError("Connection Error: Connection already closed!")

held = setting_reset()
next(held)
pipeline.cli.app.app = lambda **_: (os.kill(os.getpid(), signal.SIGINT), time.sleep(30))
main.main()
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    from pipeline.cli.process import INTERRUPTED

    assert (done.returncode, done.stderr) == (130, f"error: {INTERRUPTED}\n")


def test_a_ctrl_c_stops_a_running_query_even_where_its_keyboardinterrupt_is_lost():
    """A Ctrl-C into `query` was lost about one time in three to ten: the handler's KeyboardInterrupt landed
    where DuckDB swallowed it (or between two fetches) and the query ran on to its limit. The handler now
    also interrupts the running query through DuckDB itself (`pipeline.core.interrupts`), and the query
    ends in KeyboardInterrupt however the handler's own exception fared: here it is lost entirely (the
    handler's work is done from another thread, raising nothing)."""
    import io
    import threading
    import time

    import duckdb

    from pipeline.core.interrupts import interrupt_all
    from pipeline.output.query.execute import stream_query
    from pipeline.output.query.formats import QueryFormat

    con = duckdb.connect()
    sql = "SELECT sum(a.range * b.range) FROM range(1000000) a, range(1000000) b"  # minutes of work
    timer = threading.Timer(1.0, interrupt_all)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            stream_query(con, sql, {}, QueryFormat.csv, io.BytesIO(), timeout_s=120)
    finally:
        timer.cancel()
        con.close()
    assert time.monotonic() - started < 10


# The same running query interrupted earlier or later: seconds of a core each. stands in the default tier:
# tests/cli/test_interrupts.py::test_ctrl_c_into_a_running_query_ends_it_at_once (its 1.6 s case),
# tests/cli/test_interrupts.py::test_ctrl_c_at_any_moment_is_one_line (a Ctrl-C at 0.6 s to 2.5 s)
EARLIER_AND_LATER = [pytest.param(d, marks=pytest.mark.heavy) for d in (0.8, 2.4)]


@pytest.mark.parametrize("delay", [EARLIER_AND_LATER[0], 1.6, EARLIER_AND_LATER[1]])
def test_ctrl_c_into_a_running_query_ends_it_at_once(tmp_path, delay):
    """SIGINT into a long query: it ends within seconds with the one line, never at its --timeout."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from pipeline.warehouse.database import open_for_write

    open_for_write(tmp_path / "w.duckdb").close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "query", "--timeout", "120", "--format", "csv", "-w"]
        + [str(tmp_path / "w.duckdb"), "SELECT sum(a.range * b.range) FROM range(1000000) a, range(1000000) b"],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(delay)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=100)
    assert time.monotonic() - sent < 20, err
    assert "Traceback" not in err, err
    assert proc.returncode in (130, -signal.SIGINT), (proc.returncode, err)
