"""How the console script ends: the one Ctrl-C line, and ending without the interpreter's teardown.

A command that has closed everything it opened may call `skip_teardown()`: the script then ends the
process without the interpreter's teardown (see `end_now`).
"""

import atexit
import os
import sys
import threading

INTERRUPTED = "interrupted; committed chunks are kept, re-run to continue"

_skip_teardown = False
_interrupt_said = False


def say_interrupted() -> None:
    """The one line a Ctrl-C ends with (exit code 130), said once however many layers catch it."""
    global _interrupt_said
    if not _interrupt_said:
        _interrupt_said = True
        sys.stderr.write(f"error: {INTERRUPTED}\n")
        sys.stderr.flush()


def on_interrupt(signum: int, frame: object) -> None:
    """SIGINT's handler for the console script: a KeyboardInterrupt, as Python's own, after which clean-up
    that the interrupt broke part way (a generator closed over a connection already closed, a driver
    handle still open at exit) is not printed as "Exception ignored" tracebacks: the one line says it."""
    from pipeline.core.interrupts import interrupt_all

    sys.unraisablehook = _after_interrupt
    interrupt_all()  # a running query is stopped by DuckDB itself, whatever becomes of the exception below
    raise KeyboardInterrupt


def _after_interrupt(unraisable: object) -> None:
    """Nothing: the process is ending on a Ctrl-C, and what it could not close is the warehouse's
    transactions' business (each committed whole or not at all)."""


def skip_teardown() -> None:
    """Let this process end without the interpreter's teardown once the command has returned.
    Only for a command that has closed its warehouse connection and its source, and holds no open
    file, so that no destructor is left with work to do."""
    global _skip_teardown
    _skip_teardown = True


def skip_requested() -> bool:
    return _skip_teardown


def end_now(code: int) -> None:
    """End the process with `code` now, as the interpreter would, minus its teardown.

    What the interpreter does at exit: join the non-daemon threads, run the atexit handlers (logging's
    flush, multiprocessing's worker clean-up, weakref finalizers such as tempfile's, Polars'), flush
    stdout and stderr, and then free every module and object one by one. The last part is ~0.1-0.2
    CPU-s with Polars, pyarrow, numpy and DuckDB loaded, a sixth of a no-op ingest (bench/BENCHMARKS.md,
    the no-op re-ingest) and work with no effect once the command closed what it opened. So: the
    first three here, then `os._exit`. Where a non-daemon thread is still alive (the interpreter
    would wait for it), or stdout cannot be flushed (the interpreter reports that), it returns and
    the interpreter exits as usual."""
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        return
    atexit._run_exitfuncs()  # the registered handlers, once (the list is emptied)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)
