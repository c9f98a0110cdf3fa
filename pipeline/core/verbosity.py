"""The `--quiet` / `--verbose` setting of this process (see pipeline/cli/console.py, which prints by it).

A module of its own so that the command line can take the options without loading the printing
machinery (Rich, Polars) that a command may never need.
"""

QUIET, NORMAL, VERBOSE = 0, 1, 2
_verbosity = NORMAL


def set_verbosity(level: int) -> None:
    """The `--quiet` (QUIET) / `--verbose` (VERBOSE) setting of this process."""
    global _verbosity
    _verbosity = level


def verbosity() -> int:
    return _verbosity
