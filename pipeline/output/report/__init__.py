"""The epoch report: every evidence table of one epoch for one host, as Markdown, HTML, CSV and charts.

    report = build_epoch_report(con, epoch=3, host="gonka1…", finality_lag=timedelta(hours=6))
    write_epoch_report(report, Path("out"))   # out/epoch-3/{report.md, report.html, charts/, tables/}

`model` builds the report as data (sections, the evidence and SQL behind each, denominators,
charts as Vega-Lite specs); `render` turns it into Markdown and HTML and writes the files.
"""

from pipeline.output.report.model import Closure, EpochReport, Section, build_epoch_report, epoch_closure
from pipeline.output.report.render import fingerprint, render_report_html, render_report_markdown, write_epoch_report

__all__ = [
    "Closure",
    "EpochReport",
    "Section",
    "build_epoch_report",
    "epoch_closure",
    "fingerprint",
    "render_report_html",
    "render_report_markdown",
    "write_epoch_report",
]
