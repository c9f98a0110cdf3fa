"""Every epoch on one page: OUTPUT/index.html and index.md, one row per closed epoch with its report's
headline numbers and a link to it, and trend charts across epochs with the host's build segments marked.

The numbers are the epoch reports' own: `headline(report)` reads them from the evidence results of a report
as it is written (the same results its findings print), `run` stores them with the report's row
(`epoch_reports_t.headline`), and `write_index` draws the page from the stored headlines alone, so the index
can be rebuilt without recomputing any epoch and says nothing its reports do not.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from pipeline.output.render.markdown import cell, literal
from pipeline.output.report.index_charts import (  # noqa: F401  (the index's charts, here as before)
    BUILD_COLOURS,
    SERIES_COLOURS,
    band_centre,
    build_bands,
    build_spans,
    charts,
    epoch_bands,
)
from pipeline.output.report.index_data import (  # noqa: F401  (the index's data, here as before)
    HOURS_PER_DAY,
    TRACKER_SHARES,
    headline,
    index_findings,
    index_rows,
)


def render_index_markdown(host: str, headlines: list[dict], chart_stems: list[str]) -> str:
    rows = index_rows(headlines)
    header = list(rows[0]) if rows else []
    lines = [
        f"# Every epoch: {literal(host)}",
        "",
        f"{len(rows)} closed epoch{'s' if len(rows) != 1 else ''}; each row of the table links to its report.",
        "",
    ]
    findings = index_findings(headlines)
    if findings:
        lines += ["## Main findings across epochs", ""]
        lines += [f"- [{f['label']}](index-charts/{f['chart']}.svg): {literal(f['text'])}" for f in findings]
        lines.append("")
    if rows:
        lines += ["## Epoch by epoch", ""]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("| " + " | ".join("---" for _ in header) + " |")
        for r in rows:
            cells = [cell(v) for k, v in r.items() if k != "report"] + [
                f"[report]({r['report'].replace('.html', '.md')})"
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    spans = build_spans(headlines)
    if spans:
        lines.append(
            "Build segments: "
            + "; ".join(f"{literal(s['build'])} (epochs {s['first']}–{s['last']})" for s in spans)
            + "."
        )
        lines.append("")
    if chart_stems:
        lines += ["## Trends", ""]
    for stem in chart_stems:
        lines += [f"![{stem}](index-charts/{stem}.svg)", ""]
    return "\n".join(lines)


def render_index_html(host: str, headlines: list[dict], svgs: dict[str, str]) -> str:
    from jinja2 import Environment, FunctionLoader, StrictUndefined

    from pipeline.core.paths import REPORTS_DIR
    from pipeline.output.report.render import visible_value

    env = Environment(
        loader=FunctionLoader(lambda name: (REPORTS_DIR / name).read_text(encoding="utf-8")),
        undefined=StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=visible_value,
    )
    return env.get_template("index.html.j2").render(
        host=host,
        rows=index_rows(headlines),
        findings=index_findings(headlines),
        spans=build_spans(headlines),
        svgs=svgs,
    )


def write_index(host: str, headlines: list[dict], out_dir: Path) -> Path:
    """Write OUT/index.md, index.html and index-charts/ (SVG and PNG of each trend chart, headlines.json):
    everything is written beside its place first and renamed into it, so a failure (a full disk, Ctrl-C)
    leaves the previous index whole and no temporary file behind."""
    from pipeline.output.render.images import svg_and_png

    out_dir.mkdir(parents=True, exist_ok=True)
    specs = charts(headlines) if headlines else {}
    pid = os.getpid()
    staging = out_dir / f".index-charts.tmp-{pid}"
    pages = {name: out_dir / f".{name}.tmp-{pid}" for name in ("index.md", "index.html")}
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir()
        svgs = {}
        for stem, spec in specs.items():
            svgs[stem], png = svg_and_png(spec)
            (staging / f"{stem}.svg").write_text(svgs[stem], encoding="utf-8")
            (staging / f"{stem}.png").write_bytes(png)
        ordered = sorted(headlines, key=lambda h: h["epoch"])
        (staging / "headlines.json").write_text(json.dumps(ordered, indent=1) + "\n", encoding="utf-8")
        pages["index.md"].write_text(render_index_markdown(host, headlines, list(specs)), encoding="utf-8")
        pages["index.html"].write_text(render_index_html(host, headlines, svgs), encoding="utf-8")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for tmp in pages.values():
            tmp.unlink(missing_ok=True)
        raise
    final = out_dir / "index-charts"
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    for name, tmp in pages.items():
        tmp.replace(out_dir / name)
    return out_dir / "index.html"
