"""`run` writes OUTPUT/index.html and index.md across the closed epochs: its numbers are the epoch reports'
numbers (read from both), it renders offline in headless Chromium, and it is rebuilt only when a report changed."""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path

import pytest

from pipeline.jobs.run import run_job
from pipeline.output.render.text import format_number, format_percent
from tests.output.report.test_report import _Html, render_in_chromium

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
    d = tmp_path_factory.mktemp("index")
    outcome = _run(d)
    assert outcome.written == [2, 3] and outcome.index == Path("out") / "index.html"
    return d / "out"


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
                r"([\d,]+) of ([\d,]+) \(([\d.]+)%; ([\d.]+)%–([\d.]+)%\)", row[column]
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
        assert row["deaths / OOMs per 24 h"] == (
            f"{format_number(deaths / hours * 24)} / {format_number(ooms / hours * 24)} "
            f"({deaths} / {ooms} in {format_number(hours)} h)"
        )
        # the tracker's protocol-invalid share of the host in that epoch
        (mine,) = [r for r in _csv(out, epoch, "tracker") if r["participant"] == HOST and r["epoch"] == epoch]
        assert row["tracker protocol invalid"] == format_percent(float(mine["protocol_invalid_share"]))
    assert rows["3"]["deaths / OOMs per 24 h"].endswith("(1 / 1 in 67.28 h)")  # the sample's one OOM death
    index = (out / "index.md").read_text()
    assert "Build segments: V1, no DSpark (epochs 2–2); V2 + DSpark, raw_logprobs (epochs 2–3); " in index


@pytest.mark.heavy  # two more whole runs
def test_the_index_is_rebuilt_only_when_an_epoch_report_changed(out):
    d = out.parent
    stamps = {p: p.stat().st_mtime_ns for p in (out / "index.md", out / "index.html")}
    again = _run(d)
    assert (again.written, again.rewritten, again.index) == ([], [], None)
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    (out / "index.md").unlink()
    rebuilt = _run(d)
    assert rebuilt.index is not None and (out / "index.md").exists()


def test_the_index_is_offline_and_renders_in_headless_chromium(out, tmp_path):
    html = (out / "index.html").read_text()
    assert "<script" not in html and not re.search(r"""(?:src|href)=["']https?:""", html)
    for link in re.findall(r'href="(epoch-\d+/report\.html)"', html):
        assert (out / link).exists()
    _, dom = render_in_chromium(out / "index.html", tmp_path)
    parsed = _Html()
    parsed.feed(dom)
    tags = [t for t, _ in parsed.tags]
    assert tags.count("table") == 1 and tags.count("tr") == 3  # the header and one row per closed epoch
    trends = [
        attrs["id"] for t, attrs in parsed.tags if t == "section" and "id" in attrs and attrs["id"].startswith("trend-")
    ]
    assert trends == ["trend-rates", "trend-verdicts", "trend-acceptance", "trend-stability", "trend-tracker"]
    for trend in trends:  # each chart drew marks, not an empty frame
        part = dom.split(f'id="{trend}"', 1)[1].split("</section>", 1)[0]
        assert "<svg" in part and part.count("<path") >= 2, trend
