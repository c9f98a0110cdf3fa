"""Renderers of an ``EvidenceResult``: one result object, several formats.

Every renderer takes the result and returns text without a final newline;
the caller prints it.
"""

from __future__ import annotations

from collections.abc import Callable

from pipeline.evidence.result import EvidenceResult
from pipeline.output.render.csv import render_csv
from pipeline.output.render.json import render_json
from pipeline.output.render.markdown import render_markdown
from pipeline.output.render.table import render_table

RENDERERS: dict[str, Callable[[EvidenceResult], str]] = {
    "markdown": render_markdown,
    "csv": render_csv,
    "json": render_json,
    "table": render_table,
}
FORMATS = tuple(RENDERERS)


def render(result: EvidenceResult, fmt: str) -> str:
    """``result`` as text in format ``fmt`` (one of ``FORMATS``)."""
    try:
        renderer = RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}") from None
    return renderer(result)


__all__ = ["FORMATS", "RENDERERS", "render", "render_csv", "render_json", "render_markdown", "render_table"]
