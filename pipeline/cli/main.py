"""The `gonka-evidence` console script.

Importing the CLI (typer, polars, duckdb, …) takes a moment; a Ctrl-C in that moment, or in any
other place the commands' own handlers do not reach, must end with the same one-line message and
exit code 130 as a Ctrl-C during a command, never a traceback. So the entry point imports the CLI
inside the handler.
"""

import signal
import sys

from pipeline.cli import process


def main() -> None:
    from pipeline.core import streams

    streams.install()  # closed or full streams, a terminal that cannot show UTF-8: never a traceback
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # an ignored Ctrl-C stays ignored
        signal.signal(signal.SIGINT, process.on_interrupt)
    try:
        from pipeline.cli.app import app

        app(prog_name="gonka-evidence")
    except KeyboardInterrupt:
        process.say_interrupted()
        sys.exit(130)
    except SystemExit as done:  # typer ends every command this way, 0 included
        if done.code == 130:  # typer turns a Ctrl-C while it parses the arguments into a silent exit 130
            process.say_interrupted()
        if process.skip_requested() and (done.code is None or isinstance(done.code, int)):
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # as below: the command is over
            process.end_now(done.code or 0)
        raise
    finally:
        # The command is over: a Ctrl-C during interpreter shutdown would only turn its exit status
        # into a death by signal.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
