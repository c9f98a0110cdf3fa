"""The one builder of a reproducing command: a ``gonka-evidence`` command line as a shell reads it back,
each argument quoted where needed (shlex). Footers (pipeline/evidence), reports and bundles
(pipeline/output) and the command line's own (pipeline/cli/conventions.py) all build theirs here."""

from __future__ import annotations

import os
import shlex
from pathlib import Path


def command_line(*args: str) -> str:
    """``gonka-evidence ARGS…``, shell-quoted."""
    return shlex.join(["gonka-evidence", *args])


def command_path(path: Path | str) -> str:
    """A path as a reproducing command names it: relative to the working directory, so that no
    command in a footer or report names an absolute path of this machine. Where there is no working
    directory (deleted before the command started) the path is kept as given."""
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive (Windows): nothing relative to point at
        return str(path)
    except OSError:  # the working directory is gone (FileNotFoundError from getcwd)
        return str(path)
