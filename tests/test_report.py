"""`report epoch N`: the golden Markdown of the sample data, the HTML, CSV and charts, skipped sections, Chromium."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import duckdb
import polars as pl
import pytest
from typer.testing import CliRunner

import pipeline.cli_reports  # noqa: F401 (registers `report`)
from pipeline.cli import app
from pipeline.evidence import EVIDENCE, EvidenceResult
from pipeline.paths import DATA_SAMPLES_DIR
from tests.helpers import ingest

runner = CliRunner()
GOLDEN = Path(__file__).parent / "golden" / "report-epoch-3.md"
HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkv8m42lk"  # focal host of data-samples/


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory) -> Path:
    """A working directory with ./warehouse.duckdb holding data-samples/ (label data-samples), its vLLM log
    and its builds: what the bundled `run` ingests."""
    from pipeline.builds import load_builds
    from pipeline.config import sample_config
    from pipeline.ingest_logs import ingest_logs
    from pipeline.warehouse import open_for_write

    d = tmp_path_factory.mktemp("report")
    ingest(d / "warehouse.duckdb", DATA_SAMPLES_DIR / "store", label="data-samples")
    con = open_for_write(d / "warehouse.duckdb")
    (log,) = [s for s in sample_config().sources if s["kind"] == "vllm"]
    ingest_logs(con, [log["path"]], host=HOST, kind="vllm", year=log["year"])
    load_builds(con, DATA_SAMPLES_DIR / "builds.toml")
    con.close()
    return d


@pytest.fixture(scope="module")
def report_dir(sample_dir) -> Path:
    cwd = os.getcwd()
    os.chdir(sample_dir)
    try:
        result = runner.invoke(app, ["report", "epoch", "3", "--host", HOST])
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.output
    return sample_dir / "out" / "epoch-3"


def test_golden_markdown_of_the_sample_data(report_dir):
    # Byte for byte, footer included: run ids derive from the inputs, so they are a function of the data too.
    text = (report_dir / "report.md").read_text()
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), "report.md differs from tests/golden/report-epoch-3.md (UPDATE_GOLDEN=1 to accept)"


def test_every_count_in_the_markdown_has_its_denominator(report_dir):
    text = (report_dir / "report.md").read_text()
    for line in text.splitlines():
        if line.startswith("- Epoch") or line.startswith("- Inferences"):
            assert re.search(r"\d+ of [\d,]+", line), line
    summary = _md_table_after(text, "## 2. Epoch summary")
    assert summary.columns[:6] == ["epoch", "measure", "count", "of", "of_what", "share"]
    overview = _md_table_after(text, "## 1. Epoch overview")
    assert {"inferences", "of_all", "executed_by_host", "of_host"} <= set(overview.columns)
    assert "{{" not in text and "{%" not in text  # no template leftovers


def _md_table_after(text: str, heading: str) -> pl.DataFrame:
    block = text.split(heading, 1)[1]
    lines = [ln for ln in block.splitlines() if ln.startswith("|")]
    rows = []
    for ln in lines:
        if set(ln.replace("|", "").strip()) <= set("-: "):
            if rows:
                continue
        cells = [c.strip() for c in ln.strip("|").split(" | ")]
        if rows and len(cells) != len(rows[0]):
            break
        rows.append(cells)
    return pl.DataFrame(rows[1:], schema=rows[0], orient="row")


class _Html(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.cells = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "td":
            self.cells += 1


def test_html_is_self_contained_with_inline_charts_and_tables(report_dir):
    html = (report_dir / "report.html").read_text()
    parsed = _Html()
    parsed.feed(html)
    tags = [t for t, _ in parsed.tags]
    charts = sorted(p.stem for p in (report_dir / "charts").glob("*.svg"))
    assert charts == ["acceptance", "epoch-summary", "peer-invalidation", "throughput", "timeline", "validators",
                      "votes-by-build"]  # acceptance and throughput: the bundled vLLM log
    assert tags.count("svg") >= len(charts)
    assert tags.count("table") == (report_dir / "report.md").read_text().count("\nFiles: ")  # one per section with data
    assert parsed.cells > 50
    for tag, attrs in parsed.tags:  # nothing to fetch: no script, stylesheet, image or frame from elsewhere
        assert tag not in ("script", "link", "img", "iframe"), tag
        for key in ("src", "href"):
            assert not str(attrs.get(key, "")).startswith(("http:", "https:", "//")), (tag, attrs)


def test_every_table_is_a_csv_and_every_chart_a_png_and_svg(report_dir):
    tables = {p.stem: pl.read_csv(p) for p in (report_dir / "tables").glob("*.csv")}
    assert {"overview", "epoch-summary", "peer-invalidation", "votes-by-build", "quarantine"} <= set(tables)
    assert len(tables) == (report_dir / "report.md").read_text().count("\nFiles: ")
    assert all(t.height > 0 for t in tables.values())
    assert tables["peer-invalidation"].filter(pl.col("escrow_id") == "all")["answers"].sum() == 49 + 378
    for svg in (report_dir / "charts").glob("*.svg"):
        png = svg.with_suffix(".png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and _png_colours(png) > 3, svg.name


def test_a_table_without_data_is_a_skipped_section(sample_dir, monkeypatch, tmp_path):
    from pipeline.report import build_epoch_report, render_report_markdown

    def acceptance(con, host, window):  # a log-based table whose warehouse tables were never created
        con.sql("SELECT * FROM engine_stats_that_do_not_exist").fetchall()

    def stability(con, host, window):
        return EvidenceResult("stability", "Stability", {}, pl.DataFrame({"x": []}), notes=["no engine logs for this host."])

    monkeypatch.setitem(EVIDENCE, "acceptance", dataclasses.replace(EVIDENCE["acceptance"], compute=acceptance))
    monkeypatch.setitem(EVIDENCE, "stability", dataclasses.replace(EVIDENCE["stability"], compute=stability))
    con = duckdb.connect(str(sample_dir / "warehouse.duckdb"), read_only=True)
    try:
        text = render_report_markdown(build_epoch_report(con, 3, HOST))
    finally:
        con.close()
    assert re.search(r"## \d+\. Speculative-decoding acceptance\n\n_Skipped: its data is absent from the warehouse \(", text)
    assert re.search(r"## \d+\. Engine stability\n\n_Skipped: no data for this epoch: no engine logs for this host\._", text)
    headings = re.findall(r"^## \d+\. (.*)$", text, re.M)
    assert headings.index("Speculative-decoding acceptance") < headings.index("Engine stability") < headings.index("Quarantine")


def test_unknown_epoch_and_missing_warehouse_are_one_line_errors(sample_dir, tmp_path):
    result = runner.invoke(app, ["report", "epoch", "99", "--host", HOST, "-w", str(sample_dir / "warehouse.duckdb"),
                                 "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output.strip() == "error: epoch 99: no escrows of this epoch in the warehouse"
    missing = runner.invoke(app, ["report", "epoch", "3", "--host", HOST, "-w", str(tmp_path / "none.duckdb")])
    assert missing.exit_code == 1 and "no warehouse here yet" in missing.output
    assert not list(tmp_path.glob("epoch-*"))


def test_report_help_has_an_example():
    result = runner.invoke(app, ["report", "epoch", "--help"])
    assert result.exit_code == 0 and "Example: gonka-evidence report epoch" in result.output


def _chromium() -> str | None:
    path = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if path is None and shutil.which("apt-get") and os.geteuid() == 0:
        subprocess.run("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium",
                       shell=True, capture_output=True, timeout=600)
        path = shutil.which("chromium")
    return path


def test_report_html_renders_in_headless_chromium(report_dir, tmp_path):
    chromium = _chromium()
    if chromium is None:
        pytest.skip("Debian's chromium is not installed and apt-get cannot install it here (.ci/run installs it)")
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}"]
    url = (report_dir / "report.html").resolve().as_uri()
    shot = tmp_path / "report.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1280,2400", url],
                   capture_output=True, timeout=120, check=True)
    assert shot.exists() and _png_colours(shot.read_bytes()) > 20
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, timeout=120, check=True, text=True).stdout
    parsed = _Html()
    parsed.feed(dom)
    tags = [t for t, _ in parsed.tags]
    assert tags.count("svg") >= 3 and tags.count("table") >= 4 and parsed.cells > 50
    # The charts drew marks (Vega's SVG paths), not empty frames.
    assert dom.count("<path") > 10


def _png_colours(png: bytes) -> int:
    """Distinct pixel byte values of a PNG (a blank image has one or two)."""
    pos, idat = 8, b""
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        if kind == b"IDAT":
            idat += png[pos + 8:pos + 8 + length]
        pos += 12 + length
    return len(set(zlib.decompress(idat)[:2_000_000]))


def test_untrusted_build_labels_and_host_cannot_inject_markdown(sample_dir, tmp_path):
    """builds.toml labels and a host address full of HTML, links and pipes: report.md and the evidence
    Markdown show them as text, in one cell each, and the HTML escapes them."""
    from pipeline.builds import load_builds
    from pipeline.evidence import compute
    from pipeline.render import render
    from pipeline.report import build_epoch_report, render_report_html, render_report_markdown
    from pipeline.warehouse import open_for_write
    from tests.test_render import HOSTILE, injected, parse_markdown, table_rows

    labels = [label for label in HOSTILE if "\n" not in label]  # a TOML basic string cannot hold a raw newline
    entries = "".join(f'[[builds]]\nhost = "{HOST}"\nlabel = {json.dumps(label)}\nsince = "2026-10-{5 + 3 * i:02d}T00:00:00Z"\n\n'
                      for i, label in enumerate(labels))
    (tmp_path / "builds.toml").write_text(entries)
    shutil.copy(sample_dir / "warehouse.duckdb", tmp_path / "w.duckdb")
    con = open_for_write(tmp_path / "w.duckdb")
    try:
        assert load_builds(con, tmp_path / "builds.toml") == len(labels)
        report = build_epoch_report(con, 3, HOST)
        evidence = render(compute("votes-by-build", con, host=HOST, epoch=3, command="c"), "markdown")
        stranger = build_epoch_report(con, 3, HOSTILE[1])
    finally:
        con.close()
    text = render_report_markdown(report)
    tokens = parse_markdown(text)
    assert injected(tokens, allowed_links=("tables/", "charts/")) == []
    votes = re.split(r"## \d+\. Votes by build", text, maxsplit=1)[1].split("\n## ", 1)[0]
    assert {r[0] for r in table_rows(parse_markdown(votes))[1:]} == set(labels)
    assert all(len(r) == len(table_rows(parse_markdown(votes))[0]) for r in table_rows(parse_markdown(votes)))
    evidence_tokens = parse_markdown(evidence)
    assert injected(evidence_tokens) == []
    assert {r[0] for r in table_rows(evidence_tokens)[1:]} == set(labels)
    # A host address from the command line is data too: in the heading, the titles and the notes.
    stranger_text = render_report_markdown(stranger)
    assert injected(parse_markdown(stranger_text), allowed_links=("tables/", "charts/")) == []
    assert stranger_text.startswith("# Epoch 3 report: &lt;img src=x onerror=alert(1)>\n")
    html = render_report_html(report, {})
    assert "<script>alert" not in html and "<img src=x" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_a_failed_write_leaves_no_partial_copy(sample_dir, tmp_path):
    from pipeline.report import build_epoch_report, write_epoch_report

    con = duckdb.connect(str(sample_dir / "warehouse.duckdb"), read_only=True)
    try:
        report = build_epoch_report(con, 3, HOST)
    finally:
        con.close()
    next(s for s in report.sections if s.chart is not None).chart = {"mark": "no-such-mark", "data": {"values": []}}
    with pytest.raises(ValueError, match="Vega-Lite to SVG conversion failed"):
        write_epoch_report(report, tmp_path)
    assert list(tmp_path.iterdir()) == []
