"""The `gonka-evidence` console script.

Importing the CLI (typer, polars, duckdb, …) takes a moment; a Ctrl-C in that moment, or in any
other place the commands' own handlers do not reach, must end with the same one-line message and
exit code 130 as a Ctrl-C during a command, never a traceback. So the script's entry point imports
the CLI inside the handler.
"""

import signal
import sys

INTERRUPTED = "interrupted; committed chunks are kept, re-run to continue"


def main() -> None:
    try:
        from pipeline.cli import app

        app(prog_name="gonka-evidence")
    except KeyboardInterrupt:
        sys.stderr.write(f"error: {INTERRUPTED}\n")
        sys.exit(130)
    finally:
        # The command is over: a Ctrl-C during interpreter shutdown would only turn its exit status
        # into a death by signal.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
