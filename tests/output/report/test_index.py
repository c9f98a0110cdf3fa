"""`run` writes OUTPUT/index.html and index.md across the closed epochs: its numbers are the epoch reports'
numbers (read from both), it renders offline in headless Chromium, and it is rebuilt only when a report changed."""

from __future__ import annotations

import csv
import json
import os
import re
from html import unescape
from pathlib import Path

import pytest

from pipeline.evidence.stats import poisson_rate_interval
from pipeline.jobs.run import run_job
from pipeline.output.render.text import format_number, format_rate
from tests.output.report.test_report import _Html, render_in_chromium
from tests.output.shared import bundled_run

HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # focal host of data-samples/


def _run(directory: Path):
    """The bundled run (no configuration: data-samples/ and its vLLM log) in `directory`."""
    cwd = os.getcwd()
    os.chdir(directory)
    try:
        return run_job(None, None)
    finally:
        os.chdir(cwd)


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    """out/ of the bundled run, shared with tests/api/test_api.py (read only)."""
    run = bundled_run(tmp_path_factory)
    assert run.written == [2, 3] and run.index == str(Path("out") / "index.html")
    return run.directory / "out"


@pytest.fixture
def own_out(tmp_path) -> Path:
    """out/ of a bundled run of the test's own, free to be run again and changed."""
    outcome = _run(tmp_path)
    assert outcome.written == [2, 3] and outcome.index == Path("out") / "index.html"
    return tmp_path / "out"


def _index_rows(out: Path) -> dict[str, dict[str, str]]:
    lines = [line for line in (out / "index.md").read_text().splitlines() if line.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split(" | ")]
    rows = [dict(zip(header, (c.strip() for c in line.strip("|").split(" | ")), strict=True)) for line in lines[2:]]
    return {r["epoch"]: r for r in rows}


def _finding(report: str, label: str) -> list[str]:
    return [line for line in report.splitlines() if line.startswith(f"- [{label}]")]


def _csv(out: Path, epoch: str, table: str) -> list[dict[str, str]]:
    with (out / f"epoch-{epoch}" / "tables" / f"{table}.csv").open() as f:
        return list(csv.DictReader(f))


def test_the_index_numbers_are_the_epoch_reports_numbers(out):
    rows = _index_rows(out)
    assert list(rows) == ["2", "3"]
    for epoch, row in rows.items():
        report = (out / f"epoch-{epoch}" / "report.md").read_text()
        assert row["report"] == f"[report](epoch-{epoch}/report.md)"
        # challenged or invalidated: the findings' counts, share and Wilson interval
        for column, label in (
            ("host challenged or invalidated", "The host's answers"),
            ("others in the same escrows", "Other executors in the same escrows"),
        ):
            bad, whole, rate, low, high = re.fullmatch(
                r"([\d,]+) of ([\d,]+): ([\d.]+)% \(([\d.]+)–([\d.]+)%\)", row[column]
            ).groups()
            (line,) = _finding(report, label)
            assert f"{bad} of {whole} answers ({rate}%, Wilson score 95%: {low}–{high}%)" in line
        # verdicts cast per build: the votes-by-build table's totals
        totals: dict[str, int] = {}
        for r in _csv(out, epoch, "votes-by-build"):
            totals[r["build"]] = totals.get(r["build"], 0) + int(r["total"])
        assert row["verdicts cast"] == "; ".join(f"{b}: {n:,}" for b, n in totals.items() if n)
        # mean acceptance length and its interval: the findings' numbers
        for part in row["mean acceptance length"].split("; "):
            build, mal, low, high = re.fullmatch(r"(.+): ([\d.]+) \(([\d.]+)–([\d.]+)\)", part).groups()
            (line,) = [x for x in _finding(report, "Speculative-decoding acceptance") if f"under {build}:" in x]
            assert f"mean acceptance length {mal} tokens per step" in line and f": {low}–{high})" in line
        # deaths and OOMs per 24 hours: the stability table's counts over its hours of logs
        stab = _csv(out, epoch, "stability")
        hours = sum(float(r["hours_observed"]) for r in stab)
        deaths, ooms = sum(int(r["engine_deaths"]) for r in stab), sum(int(r["ooms"]) for r in stab)
        # each per 24 h with its exact Poisson 95% interval (the stability table has counts and hours only)
        per_day = []
        for label, n in (("deaths", deaths), ("OOMs", ooms)):
            low, high = poisson_rate_interval(n, hours / 24)
            per_day.append(f"{label} {format_number(n / hours * 24)} ({format_number(low)}–{format_number(high)})")
        assert row["deaths / OOMs per 24 h"] == (
            f"{', '.join(per_day)} per 24 h; {deaths} / {ooms} in {format_number(hours)} h"
        )
        # the tracker's protocol-invalid share of the host in that epoch, with its denominator and interval
        (mine,) = [r for r in _csv(out, epoch, "tracker") if r["participant"] == HOST and r["epoch"] == epoch]
        assert row["tracker protocol invalid"] == (
            f"{int(mine['protocol_invalid']):,} of {int(mine['assigned_nonces']):,}: "
            + format_rate(
                float(mine["protocol_invalid_share"]),
                float(mine["protocol_invalid_ci_low"]),
                float(mine["protocol_invalid_ci_high"]),
            )
        )
    assert rows["3"]["deaths / OOMs per 24 h"].endswith("; 1 / 1 in 67.28 h")  # the sample's one OOM death
    index = (out / "index.md").read_text()
    assert "Build segments: V1, no DSpark (epochs 2–2); V2 + DSpark, raw_logprobs (epochs 2–3); " in index


# no default-tier stand-in: the index's rebuild rule needs two more whole runs
@pytest.mark.heavy
def test_the_index_is_rebuilt_only_when_an_epoch_report_changed(own_out):
    out = own_out
    d = out.parent
    stamps = {p: p.stat().st_mtime_ns for p in (out / "index.md", out / "index.html")}
    again = _run(d)
    assert (again.written, again.rewritten, again.index) == ([], [], None)
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    (out / "index.md").unlink()
    rebuilt = _run(d)
    assert rebuilt.index is not None and (out / "index.md").exists()


def test_the_index_is_offline_with_its_table_and_a_drawn_chart_per_trend(out):
    """The page as written (what Chromium draws, tests/output/report/test_index.py::
    test_the_index_is_offline_and_renders_in_headless_chromium, heavy)."""
    html = (out / "index.html").read_text()
    assert "<script" not in html and not re.search(r"""(?:src|href)=["']https?:""", html)
    links = re.findall(r'href="(epoch-\d+/report\.html)"', html)
    assert links and all((out / link).exists() for link in links)
    _check_index_page(html)


# a real browser; stands in the default tier:
# tests/output/report/test_index.py::test_the_index_is_offline_with_its_table_and_a_drawn_chart_per_trend
@pytest.mark.heavy
def test_the_index_is_offline_and_renders_in_headless_chromium(out, tmp_path):
    html = (out / "index.html").read_text()
    assert "<script" not in html and not re.search(r"""(?:src|href)=["']https?:""", html)
    for link in re.findall(r'href="(epoch-\d+/report\.html)"', html):
        assert (out / link).exists()
    _, dom = render_in_chromium(out / "index.html", tmp_path, name="index")
    _check_index_page(dom)


def _check_index_page(page: str) -> None:
    """The index page (as written, or as Chromium drew it): one table of the closed epochs, and a section per
    trend whose chart has its marks, not an empty frame."""
    parsed = _Html()
    parsed.feed(page)
    tags = [t for t, _ in parsed.tags]
    assert tags.count("table") == 1 and tags.count("tr") == 3  # the header and one row per closed epoch
    trends = [
        attrs["id"] for t, attrs in parsed.tags if t == "section" and "id" in attrs and attrs["id"].startswith("trend-")
    ]
    assert trends == ["trend-rates", "trend-verdicts", "trend-acceptance", "trend-stability", "trend-tracker"]
    for trend in trends:
        part = page.split(f'id="{trend}"', 1)[1].split("</section>", 1)[0]
        assert "<svg" in part and part.count("<path") >= 2, trend


def test_the_index_opens_with_main_findings_across_epochs(out):
    html = (out / "index.html").read_text()
    parsed = _Html()
    parsed.feed(html)
    # the findings come before the epoch table, as in the epoch report; each links to its trend chart
    assert html.index('id="findings"') < html.index('<table class="epochs">')
    ids = {attrs["id"] for _, attrs in parsed.tags if "id" in attrs}
    findings = html.split('id="findings"', 1)[1].split("</section>", 1)[0]
    targets = re.findall(r'href="#([^"]+)"', findings)
    assert targets and set(targets) <= ids
    lines = re.findall(r"<li>(.*?)</li>", findings, re.S)
    text = {unescape(re.sub(r"<[^>]+>", "", line)).split(":", 1)[0]: unescape(line) for line in lines}
    # every epoch's number, with its denominator and its interval (method named)
    tracker = text["Protocol invalid (tracker)"]
    for epoch in ("2", "3"):
        (mine,) = [r for r in _csv(out, epoch, "tracker") if r["participant"] == HOST and r["epoch"] == epoch]
        share = format_rate(float(mine["protocol_invalid_share"])).removesuffix("%")
        assert (
            f"epoch {epoch}: {mine['protocol_invalid']} of {mine['assigned_nonces']} assigned nonces ({share}%, "
            "Wilson score 95%: " in tracker
        )
    stability = text["Engine deaths and OOMs"]
    hours = sum(float(r["hours_observed"]) for r in _csv(out, "3", "stability"))
    low, high = poisson_rate_interval(1, hours / 24)
    assert (
        f"epoch 3: 1 engine death (0.3567 per 24 h, exact Poisson (Garwood) 95%: {format_number(low)}–"
        f"{format_number(high)})" in stability
    )
    assert "Wilson score 95%" in text["The host's answers"] and "epoch 2: " in text["The host's answers"]
    assert "percentile bootstrap 95%" in text["Mean acceptance length"]
    md = (out / "index.md").read_text()
    assert md.index("## Main findings across epochs") < md.index("| epoch |")


def test_index_charts_colours_match_their_legends_and_a_build_keeps_its_colour(out):
    from tests.output.report.svg_legends import colour_mismatches, legends

    colours: dict[str, set[str]] = {}
    builds = {s for h in json.loads((out / "index-charts" / "headlines.json").read_text()) for s in h["builds"]}
    for svg_path in sorted((out / "index-charts").glob("*.svg")):
        svg = svg_path.read_text()
        assert colour_mismatches(svg) == [], svg_path.name
        for legend in legends(svg):
            for label, colour in legend.entries.items():
                if label in builds:
                    colours.setdefault(label, set()).add(colour)
    # one colour per build across every trend chart (its shading, its bars and its points)
    assert colours and all(len(c) == 1 for c in colours.values()), colours
    assert len({next(iter(c)) for c in colours.values()}) == len(colours)


def test_index_charts_draw_the_intervals_and_keep_equal_series_apart(out):
    from pipeline.output.report.index import build_bands, charts
    from tests.output.report.svg_legends import marks

    headlines = json.loads((out / "index-charts" / "headlines.json").read_text())
    specs = charts(headlines)
    for stem in ("rates", "acceptance", "stability", "tracker"):  # every plotted estimate with its interval
        fields = set(re.findall(r'"field": "([^"]+)"', json.dumps(specs[stem])))
        assert {"low", "high"} <= fields, stem
    # deaths and OOMs per 24 h are equal in epoch 3 (1 and 1): both series stay visible, side by side
    points = [m for m in marks((out / "index-charts" / "stability.svg").read_text()) if m.role == "point"]
    at = {m.fields["kind"]: m.transform for m in points if m.fields.get("epoch") == "3"}
    assert set(at) == {"deaths", "ooms"} and at["deaths"] != at["ooms"]
    # the build shading fills each epoch's column whole: no sliver between epochs, no overlap
    bands = build_bands(sorted(headlines, key=lambda h: h["epoch"]))
    for epoch, part in bands.group_by("epoch"):
        edges = sorted(zip(part["x0"], part["x1"], strict=True))
        assert edges[0][0] == pytest.approx(epoch[0] - 0.5) and edges[-1][1] == pytest.approx(epoch[0] + 0.5)
        assert all(a[1] == pytest.approx(b[0]) for a, b in zip(edges, edges[1:], strict=False))


def test_build_bands_start_at_build_boundaries_and_marks_sit_in_their_builds_band(out):
    """The bands are drawn where the build timeline switches inside an epoch, and the epoch-3 OOM
    (the stability table's, under V2 + DSpark, raw_logprobs) sits in that build's band."""
    from datetime import UTC, datetime

    from pipeline.output.report.index import build_bands, charts

    headlines = sorted(json.loads((out / "index-charts" / "headlines.json").read_text()), key=lambda h: h["epoch"])
    bands = build_bands(headlines)
    raw, fix = "V2 + DSpark, raw_logprobs", "V2 + DSpark, processed_logprobs, vLLM fix"
    (band,) = bands.filter((bands["epoch"] == 3) & (bands["build"] == raw)).iter_rows(named=True)
    # epoch 3's span as log evidence bounds it, and the switch to the vLLM fix (data-samples/builds.toml)
    from pipeline.warehouse.database import open_read_only

    con = open_read_only(out.parent / "warehouse.duckdb")
    try:
        since, until = con.execute(
            "SELECT min(least(started_at, event_at)), max(greatest(confirmed_at, event_at)) + INTERVAL 1 SECOND "
            "FROM inferences WHERE epoch_id = 3"
        ).fetchone()
    finally:
        con.close()
    switch = datetime(2026, 10, 25, tzinfo=UTC)
    assert band["x1"] - 2.5 == pytest.approx((switch - since) / (until - since))
    assert band["x1"] - 2.5 != pytest.approx(0.5)  # not the even split of the column
    stability = _csv(out, "3", "stability")
    assert {r["build"]: r["ooms"] for r in stability} == {raw: "1", fix: "0"}
    spec = charts(headlines)["stability"]
    rows = next(v for v in spec["datasets"].values() if v and "kind" in v[0])
    (oom,) = [r for r in rows if r["epoch"] == 3 and r["kind"] == "ooms" and r["count"] == 1]
    assert oom["build"] == raw and band["x0"] <= oom["at"] <= band["x1"]
    for r in rows:  # every mark inside the band of the build it counts
        (b,) = bands.filter((bands["epoch"] == r["epoch"]) & (bands["build"] == r["build"])).iter_rows(named=True)
        assert b["x0"] <= r["at"] <= b["x1"], r


def test_a_build_label_with_a_pipe_or_backtick_keeps_the_index_table_and_its_text(out):
    """A label is data: in index.md a `|` in it split its row's cell in two and a backtick opened a code
    span (its other escapes then shown as backslashes); each is now shown as itself, one cell per column."""
    from pipeline.output.report.index import render_index_markdown

    label = "V2|spec`x*"
    text = (out / "index-charts" / "headlines.json").read_text(encoding="utf-8")
    builds = sorted({v["build"] for h in json.loads(text) for v in h["verdicts"] if v["build"] != "unattributed"})
    renamed = json.loads(text.replace(json.dumps(builds[0]), json.dumps(label)))
    markdown = render_index_markdown(HOST, renamed, [])
    table = [line for line in markdown.splitlines() if line.startswith("| ")]
    widths = {len(re.split(r"(?<!\\)\|", line)) for line in table}
    assert len(widths) == 1, table  # every row has the header's columns
    assert r"V2\|spec\`x\*" in "".join(table)
    assert r"V2|spec\`x\* (epochs " in markdown  # the build segments line: no code span opens
    assert re.search(r"^- \[The host's verdicts by build\].*[:;] epoch \d, V2\|spec\\`x\\\*: \d", markdown, re.M)
