"""The warehouse of `timeline.copy(last_epoch=4)` (tests/conftest.py's session timeline) for the modules that
only read it (tests/cli/test_cli.py, tests/cli/test_conventions.py, tests/api/test_api.py): ingested once per
test process and copied to each module, as `tests.factories.data_samples_warehouse` gives the bundled store's.
Each module still has a file of its own, the same rows as its own ingest gave: seconds of ingest once, not once
per module."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tests.factories import sample_warehouse

_BUILT: dict[int, Path] = {}


def copy4_warehouse(request: Any, timeline: Any, name: str = "w.duckdb") -> Path:
    """A copy, in a directory of the requesting fixture's own, of the one warehouse of `timeline.copy(4)`."""
    factory = request.getfixturevalue("tmp_path_factory")
    key = id(timeline)  # the session's timeline: one per process
    if key not in _BUILT:
        root = factory.mktemp("copy4-warehouse")
        _BUILT[key] = sample_warehouse(request, timeline.copy(last_epoch=4), name=name, root=root).path
    path = factory.mktemp(request.fixturename or "warehouse") / name
    shutil.copyfile(_BUILT[key], path)  # ingest closed it, so checkpointed: no .wal beside it
    return path
