"""A finding's text is data except a skipped section's reason: a build label's backtick opens no code span
in the report's Markdown or HTML, while the commands a reason names still read as code."""

from __future__ import annotations

import dataclasses
import re

import duckdb
import polars as pl

from pipeline.evidence import EVIDENCE, EvidenceResult

HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # focal host of data-samples/
LABEL = "V2`x*"


def _report(sample_dir, monkeypatch):
    from pipeline.output.report import build_epoch_report

    votes = EVIDENCE["votes-by-build"]

    def renamed(con, host, window, **options):  # the real table, its first build renamed
        result = votes.compute(con, host, window, **options)
        first = result.rows["build"][0]
        rows = result.rows.with_columns(pl.col("build").replace(first, LABEL))
        return dataclasses.replace(result, rows=rows)

    def stability(con, host, window):
        note = "no engine logs for this host (`gonka-evidence ingest-logs`)."
        return EvidenceResult("stability", "Stability", {}, pl.DataFrame({"x": []}), notes=[note])

    monkeypatch.setitem(EVIDENCE, "votes-by-build", dataclasses.replace(votes, compute=renamed))
    monkeypatch.setitem(EVIDENCE, "stability", dataclasses.replace(EVIDENCE["stability"], compute=stability))
    con = duckdb.connect(str(sample_dir / "warehouse.duckdb"), read_only=True)
    try:
        return build_epoch_report(con, 3, HOST)
    finally:
        con.close()


def test_a_backtick_in_a_build_label_opens_no_code_span_and_a_reason_keeps_its_commands(sample_dir, monkeypatch):
    from pipeline.output.report import render_report_html, render_report_markdown

    report = _report(sample_dir, monkeypatch)
    markdown = render_report_markdown(report)
    (label_line,) = [line for line in markdown.splitlines() if line.startswith("- [") and r"V2\`x\*" in line]
    assert not re.search(r"(?<!\\)`", label_line)  # every backtick escaped: no code span opens
    (reason_line,) = [line for line in markdown.splitlines() if line.startswith("- [Engine deaths and OOMs]")]
    assert reason_line.endswith("not measured: no engine logs for this host (`gonka-evidence ingest-logs`)")

    html = render_report_html(report, {})
    items = re.findall(r"<li><a href=\"#[^\"]+\">[^<]*</a>: (.*?)</li>", html)
    (label_item,) = [i for i in items if "V2`x*" in i]
    assert "<code>" not in label_item
    (reason_item,) = [i for i in items if i.startswith("not measured: no engine logs")]
    assert "(<code>gonka-evidence ingest-logs</code>)" in reason_item
