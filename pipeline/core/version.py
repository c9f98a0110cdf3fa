"""The pipeline's version, as installed (recorded in every ingest run, stamp, footer and manifest)."""

from __future__ import annotations

from functools import cache


@cache
def pipeline_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gonka-evidence")
    except PackageNotFoundError:  # a source tree without install
        return "0.0.0+local"
