"""The roles a path plays in a command: what the command reads, writes or keeps (see pipeline/output/guards/roles.py,
which checks a path in its role)."""

from __future__ import annotations

from enum import StrEnum

from pipeline.core.errors import UserError


class PathError(UserError):
    """A path that cannot play its role; one-line message naming the option and the path."""


class Role(StrEnum):
    INPUT_FILE = "input file"
    INPUT_DIR = "input directory"
    INPUT = "input file or directory"
    SOURCE = "source"  # a postgresql:// URL, `postgres`, or an input directory
    WAREHOUSE_READ = "warehouse (read)"
    WAREHOUSE_WRITE = "warehouse (write)"
    OUTPUT_FILE = "output file"
    OUTPUT_DIR = "output directory"
    LAKE_READ = "lake (read)"
    LAKE_WRITE = "lake (write)"

    @property
    def is_output(self) -> bool:
        return self in (Role.OUTPUT_FILE, Role.OUTPUT_DIR, Role.LAKE_WRITE, Role.WAREHOUSE_WRITE)


# A directory holding only what the tool writes (reports of `report` and `run`, the run's index, their
# staging) or a bundle it wrote is its own; any other non-empty directory is someone else's and is never
# written into. The tool leaves this file in every report directory it writes (a user may also mark a
# directory with it); the content heuristic stays for directories written by older versions.
OUTPUT_MARKER = ".gonka-evidence-output"
LAKE_DESCRIPTION = "_lake.json"


def is_url(value: str) -> bool:
    """A source named by URL (or `postgres`, the libpq environment), not by path."""
    return value == "postgres" or "://" in value
