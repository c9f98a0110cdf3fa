"""`Evidence`: one evidence table as the facade returns it, rendered in every format of the command line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

    from pipeline.evidence import EvidenceResult


@dataclass
class Evidence:
    """One evidence table: rows, statistics, provenance, notes; renders in every CLI format."""

    result: EvidenceResult
    chart: dict | None = None  # a Vega-Lite chart of the table, where it has one (network `executors`)

    @property
    def name(self) -> str:
        return self.result.evidence

    def save_chart(self, path: str | Path) -> Path:
        """The chart as `path`: .json (Vega-Lite), .svg, .png or .html (vl-convert, no browser)."""
        import altair as alt

        if self.chart is None:
            raise ValueError(f"{self.name} has no chart")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        from pipeline.output.render.charts import utc_times
        from pipeline.output.render.fonts import drawn_spec

        spec = utc_times(drawn_spec(self.chart))  # the same bytes on any machine: shipped font, UTC times
        kind = alt.LayerChart if "layer" in spec else alt.Chart
        kind.from_dict(spec).save(str(path))
        return path

    @property
    def title(self) -> str:
        return self.result.title

    @property
    def frame(self) -> pl.DataFrame:
        return self.result.rows

    @property
    def stats(self) -> dict[str, Any]:
        return self.result.stats

    @property
    def provenance(self):
        return self.result.provenance

    @property
    def notes(self) -> list[str]:
        return self.result.notes

    def render(self, fmt: str) -> str:
        """The table as the `evidence` command prints it with ``--format fmt``."""
        from pipeline.output.render import render

        return render(self.result, fmt)

    def to_markdown(self) -> str:
        return self.render("markdown")

    def to_json(self) -> str:
        return self.render("json")

    def to_csv(self) -> str:
        return self.render("csv")

    def _repr_markdown_(self) -> str:  # Jupyter shows the Markdown table
        return self.to_markdown()

    @property
    def failed(self) -> list[str]:
        """The failed checks of a table that has checks (`preflight`: ``build: number name``); else empty."""
        return list(self.result.stats.get("failed", []))
