"""The `gonka-evidence` console script.

Importing the CLI (typer, polars, duckdb, …) takes a moment; a Ctrl-C in that moment, or in any
other place the commands' own handlers do not reach, must end with the same one-line message and
exit code 130 as a Ctrl-C during a command, never a traceback. So the script's entry point imports
the CLI inside the handler.

A command that has closed everything it opened may call `skip_teardown()`: the script then ends the
process without the interpreter's teardown (see `_end_now`).
"""

import atexit
import os
import signal
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


def skip_teardown() -> None:
    """Let this process end without the interpreter's teardown once the command has returned.
    Only for a command that has closed its warehouse connection and its source, and holds no open
    file, so that no destructor is left with work to do."""
    global _skip_teardown
    _skip_teardown = True


def _end_now(code: int) -> None:
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


def main() -> None:
    try:
        from pipeline.cli import app

        app(prog_name="gonka-evidence")
    except KeyboardInterrupt:
        say_interrupted()
        sys.exit(130)
    except SystemExit as done:  # typer ends every command this way, 0 included
        if done.code == 130:  # typer turns a Ctrl-C while it parses the arguments into a silent exit 130
            say_interrupted()
        if _skip_teardown and (done.code is None or isinstance(done.code, int)):
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # as below: the command is over
            _end_now(done.code or 0)
        raise
    finally:
        # The command is over: a Ctrl-C during interpreter shutdown would only turn its exit status
        # into a death by signal.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
