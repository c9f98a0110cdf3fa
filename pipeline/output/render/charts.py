"""Charts of log evidence (Altair), saved as SVG and PNG without a browser (vl-convert).

from pipeline.output.render.charts import acceptance_chart, engine_events_chart, save_chart
save_chart(acceptance_chart(result), out_dir / "acceptance")   # acceptance.svg + acceptance.png
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import altair as alt
import duckdb

from pipeline.evidence.tables.acceptance import acceptance_chart  # noqa: F401  (drawn by its table)
from pipeline.warehouse.database import fetch_frame


def engine_events_chart(con: duckdb.DuckDBPyConnection, host: str) -> alt.LayerChart:
    """Engine events of the host on a time line, over its build windows shaded."""
    events = fetch_frame(
        con, 'SELECT "at", kind, detail FROM engine_events WHERE host = $host ORDER BY "at"', {"host": host}
    )
    builds = fetch_frame(
        con,
        "SELECT build, valid_from, coalesce(valid_to, greatest(valid_from, "
        '(SELECT max("at") FROM engine_events WHERE host = $host))) AS valid_to FROM host_builds WHERE host = $host',
        {"host": host},
    )
    # times keep their zone (UTC): a time without one would be read in the renderer's local time
    shade = (
        alt.Chart(builds.to_pandas())
        .mark_rect(opacity=0.15)
        .encode(
            x=alt.X("valid_from:T", title="time (UTC)", scale=alt.Scale(type="utc")),
            x2="valid_to:T",
            color=alt.Color("build:N", title="build"),
        )
    )
    points = (
        alt.Chart(events.to_pandas())
        .mark_point(filled=True, size=70)
        .encode(
            x="at:T",
            y=alt.Y("kind:N", title="event"),
            shape="kind:N",
            tooltip=["at:T", "kind", "detail"],
        )
    )
    chart = alt.layer(shade, points).properties(title=f"Engine events of {host}", width=700, height=220)
    assert isinstance(chart, alt.LayerChart)  # altair types properties() as any top-level chart
    return chart


# Charts of the report and the bundle are read at their own size on a page: axis and legend labels
# are not cut short (Vega-Lite cuts them at 180 px, and build labels such as "V2 + DSpark,
# processed_logprobs, vLLM fix" are longer) and text is large enough to read without zooming.
LEGIBLE = {
    "axis": {"labelLimit": 480, "labelFontSize": 12, "titleFontSize": 12},
    "legend": {"labelLimit": 480, "labelFontSize": 12, "titleFontSize": 12},
    "title": {"fontSize": 14},
}


def legible(spec: dict | None) -> dict | None:
    """``spec`` (a Vega-Lite dict) with the `LEGIBLE` settings (a chart's own settings win), its times on UTC
    scales (`utc_times`) and its text in the shipped font (`pipeline.output.render.fonts`)."""
    if spec is None:
        return None
    from pipeline.output.render.fonts import with_shipped_font

    config = spec.setdefault("config", {})
    for key, values in LEGIBLE.items():
        config[key] = {**values, **config.get(key, {})}
    return with_shipped_font(utc_times(spec))


def utc_times(spec: Any) -> Any:
    """Every temporal encoding of ``spec`` on a UTC scale: its ticks and labels in UTC whatever the renderer's
    time zone (`TZ`), as the axis titles say. The data's times carry their zone, so they parse the same way."""
    if isinstance(spec, dict):
        if spec.get("type") == "temporal" and "field" in spec:
            scale = spec.get("scale") or {}
            spec["scale"] = {**scale, "type": "utc"}
        for value in spec.values():
            utc_times(value)
    elif isinstance(spec, list):
        for value in spec:
            utc_times(value)
    return spec


def save_chart(chart: alt.TopLevelMixin, stem: Path | str) -> list[Path]:
    """Write ``stem.svg`` and ``stem.png`` as the report draws its charts (`svg_and_png`: shipped font, texts
    escaped, times in UTC); returns both paths."""
    from pipeline.output.render.images import svg_and_png

    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    svg, png = svg_and_png(utc_times(chart.to_dict()))
    stem.with_suffix(".svg").write_text(svg, encoding="utf-8")
    stem.with_suffix(".png").write_bytes(png)
    return [stem.with_suffix(".svg"), stem.with_suffix(".png")]
