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

from pipeline.cli.app import app
from pipeline.evidence import EVIDENCE, EvidenceError, EvidenceResult

runner = CliRunner()
GOLDEN = Path(__file__).parents[2] / "golden" / "report-epoch-3.md"
HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # focal host of data-samples/
IDLE = "gonka1vd2rragg2cycdlzhqzdakt3cuhqj3cd8f9kwme"  # holds slots of data-samples/ in epoch 2 only


def test_golden_markdown_of_the_sample_data(report_dir):
    # Byte for byte, footer included: run ids derive from the inputs, so they are a function of the data too.
    text = (report_dir / "report.md").read_text()
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), (
        "report.md differs from tests/golden/report-epoch-3.md (UPDATE_GOLDEN=1 to accept)"
    )


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


# The reviewer summary at the top of report.md on the bundled samples, line for line. Its numbers are
# checked against the generator's truth of the bundled samples in the test after the next.
FINDINGS = [
    "- [The host's answers](#4-peer-invalidation-in-the-epochs-escrows): 31 of 49 answers (63.27%, "
    "Wilson score 95%: 49.27–75.33%) challenged or invalidated (challenges later cleared included)",
    "- [The host's inferences](#2-epoch-summary): 31 of 52 executed inferences (59.62%, Wilson score "
    "95%: 46.07–71.84%) ended invalidated; 0 of 31 challenged cleared by the vote",
    "- [Other executors in the same escrows](#4-peer-invalidation-in-the-epochs-escrows): 33 of 378 "
    "answers (8.73%, Wilson score 95%: 6.28–12.01%) challenged or invalidated, in the 3 escrows where "
    "the host answered",
    "- [Host against the others, tests](#4-peer-invalidation-in-the-epochs-escrows): Fisher exact "
    "(two-sided) p = 3.14e-17 (Holm p = 6.28e-17), OR 18.01; Cochran–Mantel–Haenszel by escrow "
    "(two-sided, continuity-corrected) p = 2.40e-18 (Holm p = 7.20e-18), pooled OR 22.09 (95% CI "
    "9.791–49.84); Breslow–Day (one odds ratio in every escrow) p = 0.04951 (Holm p = 0.04951)",
    "- [The host's verdicts by build](#6-votes-by-build): under V2 + DSpark, raw_logprobs: 20 of 22 "
    "validations invalid (90.91%, Wilson score 95%: 72.19–97.47%); 8 of 9 votes invalid (88.89%, Wilson "
    "score 95%: 56.50–98.01%)",
    "- [The host's verdicts by build](#6-votes-by-build): under V2 + DSpark, processed_logprobs, vLLM "
    "fix: 0 of 5 validations invalid (0.00%, Wilson score 95%: 0.00–43.45%); 1 of 2 votes invalid "
    "(50.00%, Wilson score 95%: 9.45–90.55%)",
    "- [Invalid share between builds](#6-votes-by-build): validations: Fisher–Freeman–Halton (two-sided) "
    "p = 6.00e-04 (Holm p = 0.0012), 2 builds; votes: Fisher–Freeman–Halton (two-sided) p = 0.3485 (Holm "
    "p = 0.3485), 2 builds; no verdicts under V1, no DSpark, V2 + DSpark, vLLM fix, raw_logprobs, chunk 2048",
    "- [Timeouts and misses](#2-epoch-summary): 3 of 52 executed inferences (5.77%, Wilson score 95%: "
    "1.98–15.64%) timed out (refusals, execution timeouts, error misses)",
    # The bundled vLLM log (data-samples/vllm/vllm.log, its truth in tests/samples/test_samples.py): one OOM death.
    "- [Engine deaths and OOMs](#11-engine-stability): under V2 + DSpark, raw_logprobs: 1 engine death (1 OOM), "
    "1 restart, 8 preemptions in 44.00 hours of logs",
    "- [Engine deaths and OOMs](#11-engine-stability): under V2 + DSpark, processed_logprobs, vLLM fix: 0 engine "
    "deaths (0 OOM), 1 restart, 0 preemptions in 23.27 hours of logs",
    "- [Speculative-decoding acceptance](#8-speculative-decoding-acceptance): under V2 + DSpark, raw_logprobs: mean "
    "acceptance length 2.787 tokens per step (percentile bootstrap 95% over log windows: 2.698–2.881) over 45,300 "
    "drafts in 93 windows; 80,951 of 224,515 drafted tokens (36.06%, percentile bootstrap 95% over log windows: "
    "34.25–37.96%) accepted",
    "- [Speculative-decoding acceptance](#8-speculative-decoding-acceptance): under V2 + DSpark, processed_logprobs, "
    "vLLM fix: mean acceptance length 2.936 tokens per step (percentile bootstrap 95% over log windows: 2.810–3.061) "
    "over 22,600 drafts in 48 windows; 43,753 of 112,220 drafted tokens (38.99%, percentile bootstrap 95% over log "
    "windows: 36.41–41.53%) accepted",
]


def _findings_block(text: str) -> list[str]:
    """The list under ``## Main findings``."""
    return text.split("\n## Main findings\n\n", 1)[1].split("\n\n", 1)[0].splitlines()


def _github_slug(heading: str) -> str:
    """The id GitHub gives a heading (github-slugger): lower case, only letters, digits, spaces,
    hyphens and underscores kept, spaces as hyphens."""
    return "".join(c for c in heading.lower() if c.isalnum() or c in " -_").replace(" ", "-")


def test_main_findings_open_the_report_and_link_to_their_sections(report_dir):
    text = (report_dir / "report.md").read_text()
    assert _findings_block(text) == FINDINGS
    assert text.index("\n## Main findings\n") < text.index("\nContents: ") < text.index("\n## 1. Epoch overview")
    # Every link of the report into itself names a heading, by the id GitHub gives it.
    headings = re.findall(r"^## (.*)$", text, re.M)
    links = re.findall(r"\]\(#([^)]*)\)", text)
    assert len(links) == len(FINDINGS) and set(links) <= {_github_slug(h) for h in headings}
    assert not any(line.rstrip().endswith(":") or line.strip() == "-" for line in _findings_block(text))


def test_main_findings_match_an_independent_count_of_the_samples():
    """The numbers of `FINDINGS` from the generator's truth of data-samples/ (seed 7, the bundled
    release line), with the intervals and tests from statsmodels and scipy directly."""
    from types import SimpleNamespace

    from scipy import stats as scipy_stats
    from statsmodels.stats.contingency_tables import StratifiedTable
    from statsmodels.stats.proportion import proportion_confint

    from pipeline.samples import SampleSpec, generate_timeline
    from pipeline.samples.__main__ import BUNDLED_LINE
    from tests.evidence.test_evidence import expected_epoch_summary, expected_peer, expected_votes

    timeline = generate_timeline(SampleSpec(seed=7))
    assert timeline.focal_host == HOST
    truth = timeline.copy(timeline.spec.epochs[-1], line=BUNDLED_LINE).truth
    loaded = SimpleNamespace(truth=truth, focal=HOST, builds=list(timeline.builds), member_epochs=[3])

    def share(k: int, n: int, noun: str) -> str:
        low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
        return f"{k} of {n} {noun} ({k / n * 100:.2f}%, Wilson score 95%: {low * 100:.2f}–{high * 100:.2f}%)"

    peer = expected_peer(loaded, epoch=3)
    (hy, hn), (oy, on) = ([sum(e[g][i] for e in peer.values()) for i in (0, 1)] for g in ("host", "others"))
    executed = truth.inferences.filter((pl.col("executor") == HOST) & (pl.col("epoch_id") == 3)).height
    summary = expected_epoch_summary(loaded, epoch=3)[0]
    votes = expected_votes(loaded, epoch=3)

    assert FINDINGS[0].endswith(
        ": " + share(hy, hn, "answers") + " challenged or invalidated (challenges later cleared included)"
    )
    assert FINDINGS[1].endswith(
        f": {share(summary['invalidated'], executed, 'executed inferences')} ended invalidated; "
        f"{summary['cleared']} of {summary['challenged']} challenged cleared by the vote"
    )
    assert FINDINGS[2].endswith(
        f": {share(oy, on, 'answers')} challenged or invalidated, in the {len(peer)} escrows where the host answered"
    )
    fisher = scipy_stats.fisher_exact([[hy, hn - hy], [oy, on - oy]])
    strata = StratifiedTable(
        [
            [[e["host"][0], e["host"][1] - e["host"][0]], [e["others"][0], e["others"][1] - e["others"][0]]]
            for _, e in sorted(peer.items())
        ]
    )
    assert f"Fisher exact (two-sided) p = {fisher.pvalue:.2e} " in FINDINGS[3]
    assert f", OR {fisher.statistic:.2f};" in FINDINGS[3]
    cmh_p = scipy_stats.chi2.sf(strata.test_null_odds(correction=True).statistic, 1)  # statsmodels' p underflows to 0
    assert f"by escrow (two-sided, continuity-corrected) p = {cmh_p:.2e} " in FINDINGS[3]
    assert f"pooled OR {strata.oddsratio_pooled:.2f} " in FINDINGS[3]
    with_verdicts = [
        b
        for b in dict.fromkeys(build for build, _ in votes)
        if votes[(b, "validation")]["valid"]
        + votes[(b, "validation")]["invalid"]
        + votes[(b, "vote")]["valid"]
        + votes[(b, "vote")]["invalid"]
    ]
    assert len(with_verdicts) == 2
    for line, build in zip(FINDINGS[4:6], with_verdicts, strict=True):
        parts = [
            share(
                votes[(build, kind)]["invalid"],
                votes[(build, kind)]["valid"] + votes[(build, kind)]["invalid"],
                f"{kind}s invalid",
            )
            for kind in ("validation", "vote")
        ]
        assert line.endswith(f": under {build}: {'; '.join(parts)}")
    silent = [b for b in dict.fromkeys(build for build, _ in votes) if b not in with_verdicts]
    assert FINDINGS[6].endswith(f"; no verdicts under {', '.join(silent)}")
    assert FINDINGS[7].endswith(
        f": {share(summary['timed_out'], executed, 'executed inferences')} timed out "
        "(refusals, execution timeouts, error misses)"
    )


def test_findings_of_a_host_with_one_build_and_of_a_host_without_data(sample_dir):
    """Degenerate cases say what they are: one escrow, no challenge, a test that needs two strata or two
    builds; a host with nothing in the epoch gets one "not measured" line per finding, no empty bullet (a
    host of the warehouse that holds no slot in epoch 3: one that is not in it at all is an error)."""
    from pipeline.output.report import build_epoch_report, render_report_markdown

    v1_host = "gonka1h2aeruh3tq2uvu3ehetjnngp4fcc2kdv4nxajn"  # a V1 validator of data-samples/builds.toml
    con = duckdb.connect(str(sample_dir / "warehouse.duckdb"), read_only=True)
    try:
        v1 = _findings_block(render_report_markdown(build_epoch_report(con, 3, v1_host)))
        nobody = _findings_block(render_report_markdown(build_epoch_report(con, 3, IDLE)))
    finally:
        con.close()
    assert v1[1].endswith("ended invalidated; none challenged")
    assert v1[2].endswith("challenged or invalidated, in the 1 escrow where the host answered")
    assert v1[3].endswith(
        "Breslow–Day (one odds ratio in every escrow) p undefined (needs at least two strata with "
        "observations in both groups, has 1)"
    )
    assert v1[4].startswith("- [The host's verdicts by build](#6-votes-by-build): under V1, no DSpark: ")
    assert v1[5] == (
        "- [Invalid share between builds](#6-votes-by-build): validations: not tested (needs at least two "
        "groups with observations); votes: not tested (needs at least two groups with observations)"
    )
    assert nobody == [
        "- [The host's answers against the other executors](#4-peer-invalidation-in-the-epochs-escrows): not measured: "
        f"host {IDLE} executed no answers in epoch 3; nothing to compare",
        f"- [The host's inferences](#2-epoch-summary): not measured: host {IDLE} executed nothing in epoch 3",
        f"- [The host's verdicts by build](#6-votes-by-build): not measured: host {IDLE} validated nothing in epoch 3",
        f"- [Engine deaths and OOMs](#11-engine-stability): not measured: no vLLM log records for host {IDLE} in "
        "epoch 3 (`gonka-evidence ingest-logs` first)",
        f"- [Speculative-decoding acceptance](#8-speculative-decoding-acceptance): not measured: "
        f"no speculative-decoding windows for host {IDLE} in epoch 3 "
        "(`gonka-evidence ingest-logs` vLLM logs or /metrics scrapes first)",
    ]


def test_engine_and_acceptance_findings_when_logs_are_present(tmp_path):
    """With the host's vLLM logs, the findings give deaths, OOMs and restarts per build in the hours
    the logs cover, and the acceptance per build with its bootstrap interval; checked against the
    log generator's truth (pipeline/samples/logs.py)."""
    from pipeline.evidence import compute
    from pipeline.ingest.builds import load_builds
    from pipeline.ingest.logs import ingest_logs
    from pipeline.output.report.findings import epoch_findings
    from pipeline.samples.logs import HOST as LOG_HOST
    from pipeline.samples.logs import write_log_samples
    from pipeline.warehouse.database import open_for_write

    truth = write_log_samples(tmp_path)
    con = open_for_write(tmp_path / "warehouse.duckdb")
    try:
        load_builds(con, truth.files["builds"])
        ingest_logs(con, [tmp_path / "vllm", tmp_path / "metrics"], host=LOG_HOST)
        results = {name: compute(name, con, host=LOG_HOST, command="c") for name in ("stability", "acceptance")}
    finally:
        con.close()
    findings = epoch_findings(results, {})
    deaths = [f.text for f in findings if f.section == "stability"]
    hours = dict(results["stability"].rows.select("build", "hours_observed").iter_rows())
    assert deaths == [
        f"under {build}: {t['engine_deaths']} engine death{'s' if t['engine_deaths'] != 1 else ''} ({t['ooms']} OOM), "
        f"{t['restarts']} restart{'s' if t['restarts'] != 1 else ''}"
        + (f", {t['preemptions']} preemptions" if t["preemptions"] is not None else "")
        + f" in {hours[build]:.4g} hours of logs"
        for build, t in sorted(truth.stability.items())
    ]
    # A: an OOM crash, then a lone worker death at the end of the log (a death too: docs/sources.md).
    assert deaths[0] == "under A: 2 engine deaths (1 OOM), 1 restart in 1.412 hours of logs"
    acceptance = [f.text for f in findings if f.section == "acceptance"]
    assert len(acceptance) == len(truth.acceptance) == 3
    boot = results["acceptance"].rows
    for text, (build, t) in zip(acceptance, sorted(truth.acceptance.items()), strict=True):
        row = boot.row(by_predicate=pl.col("build") == build, named=True)
        method = "percentile bootstrap 95% over log windows"
        assert text == (
            f"under {build}: mean acceptance length {1 + t['accepted'] / t['drafts']:.3f} tokens per step "
            f"({method}: {row['mal_boot_low']:.3f}–{row['mal_boot_high']:.3f}) over {t['drafts']:,} drafts in "
            f"{t['windows']} windows; {t['accepted']:,} of {t['drafted']:,} drafted tokens "
            f"({t['accepted'] / t['drafted'] * 100:.2f}%, {method}: {row['rate_boot_low'] * 100:.2f}–"
            f"{row['rate_boot_high'] * 100:.2f}%) accepted"
        )
    assert all(f.label in ("Engine deaths and OOMs", "Speculative-decoding acceptance") for f in findings)


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
    """Tags, table cells, the text of every list item, of the findings list's items, and all text."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.cells = 0
        self.items: list[str] = []  # text of every <li>
        self.findings: list[str] = []  # text of the <li> of <ul class="findings">
        self.text: list[str] = []
        self._in_findings = self._in_item = self._in_style = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "td":
            self.cells += 1
        if tag == "ul" and dict(attrs).get("class") == "findings":
            self._in_findings = True
        if tag == "li":
            self.items.append("")
            self._in_item = True
            if self._in_findings:
                self.findings.append("")
        self._in_style = tag in ("style", "svg") or self._in_style

    def handle_endtag(self, tag):
        if tag == "ul":
            self._in_findings = False
        if tag == "li":
            self._in_item = False
        if tag in ("style", "svg"):
            self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            return
        self.text.append(data)
        if self._in_item:
            self.items[-1] += data
            if self._in_findings:
                self.findings[-1] += data


def test_html_is_self_contained_with_inline_charts_and_tables(report_dir):
    html = (report_dir / "report.html").read_text()
    parsed = _Html()
    parsed.feed(html)
    tags = [t for t, _ in parsed.tags]
    charts = sorted(p.stem for p in (report_dir / "charts").glob("*.svg"))
    assert charts == [
        "acceptance",
        "epoch-summary",
        "peer-invalidation",
        "throughput",
        "timeline",
        "validators",
        "votes-by-build",
    ]  # acceptance and throughput: the bundled vLLM log
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
    from pipeline.output.report import build_epoch_report, render_report_markdown

    def acceptance(con, host, window):  # a log-based table whose warehouse tables were never created
        con.sql("SELECT * FROM engine_stats_that_do_not_exist").fetchall()

    def stability(con, host, window):
        return EvidenceResult(
            "stability", "Stability", {}, pl.DataFrame({"x": []}), notes=["no engine logs for this host."]
        )

    monkeypatch.setitem(EVIDENCE, "acceptance", dataclasses.replace(EVIDENCE["acceptance"], compute=acceptance))
    monkeypatch.setitem(EVIDENCE, "stability", dataclasses.replace(EVIDENCE["stability"], compute=stability))
    con = duckdb.connect(str(sample_dir / "warehouse.duckdb"), read_only=True)
    try:
        text = render_report_markdown(build_epoch_report(con, 3, HOST))
    finally:
        con.close()
    assert re.search(
        r"## \d+\. Speculative-decoding acceptance\n\n_Skipped: its data is absent from the warehouse \(", text
    )
    assert re.search(
        r"## \d+\. Engine stability\n\n_Skipped: no data for this epoch: no engine logs for this host\._", text
    )
    headings = re.findall(r"^## \d+\. (.*)$", text, re.M)
    assert (
        headings.index("Speculative-decoding acceptance")
        < headings.index("Engine stability")
        < headings.index("Quarantine")
    )
    # Their findings say why in one line each, instead of numbers.
    findings = _findings_block(text)
    assert "- [Engine deaths and OOMs](#11-engine-stability): not measured: no engine logs for this host" in findings
    assert [line for line in findings if line.startswith("- [Speculative-decoding acceptance]")] == [
        next(
            line
            for line in findings
            if line.startswith(
                "- [Speculative-decoding acceptance](#8-speculative-decoding-acceptance): not measured: "
                "its data is absent from the warehouse ("
            )
        )
    ]


def test_unknown_epoch_and_missing_warehouse_are_one_line_errors(sample_dir, tmp_path):
    result = runner.invoke(
        app,
        ["report", "epoch", "99", "--host", HOST, "-w", str(sample_dir / "warehouse.duckdb"), "--out", str(tmp_path)],
    )
    assert result.exit_code == 1
    assert result.output.strip() == (
        "error: epoch 99 is not in the warehouse: it holds epochs 2–4 (2026-10-19T07:13:23Z to 2026-10-30T06:16:21Z)"
    )
    missing = runner.invoke(app, ["report", "epoch", "3", "--host", HOST, "-w", str(tmp_path / "none.duckdb")])
    assert missing.exit_code == 1 and "no warehouse here yet" in missing.output
    assert not list(tmp_path.glob("epoch-*"))


def test_report_help_has_an_example():
    result = runner.invoke(app, ["report", "epoch", "--help"])
    assert result.exit_code == 0 and "Example: gonka-evidence report epoch" in result.output


def _chromium() -> str | None:
    path = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if path is None and shutil.which("apt-get") and os.geteuid() == 0:
        subprocess.run(
            "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium",
            shell=True,
            capture_output=True,
            timeout=600,
        )
        path = shutil.which("chromium")
    return path


# Screenshots the browser tests take are kept here (GONKA_TEST_ARTEFACTS, else test-artefacts/ in the checkout,
# ignored by git) for a reviewer to look at after the run.
ARTEFACTS = Path(os.environ.get("GONKA_TEST_ARTEFACTS", Path(__file__).parents[3] / "test-artefacts"))


def render_in_chromium(
    page: Path, tmp_path: Path, name: str | None = None, size: tuple[int, int] = (1280, 2400)
) -> tuple[Path, str]:
    """Draw `page` in headless Chromium (skips when it is missing): asserts the screenshot has colour, keeps
    it under ARTEFACTS/screenshots/ as `name`.png, and returns it with the DOM after the page's scripts ran."""
    chromium = _chromium()
    if chromium is None:
        pytest.skip("Debian's chromium is not installed and apt-get cannot install it here (.ci/run installs it)")
    flags = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    url = page.resolve().as_uri()
    shot = tmp_path / f"{page.stem}.png"
    subprocess.run(
        [*flags, f"--screenshot={shot}", f"--window-size={size[0]},{size[1]}", url],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.exists() and _png_colours(shot.read_bytes()) > 20
    (ARTEFACTS / "screenshots").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, ARTEFACTS / "screenshots" / f"{name or page.stem}.png")
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, timeout=120, check=True, text=True).stdout
    return shot, dom


# a real browser; stands in the default tier:
# tests/output/report/test_report.py::test_html_tables_scroll_in_their_own_box_and_no_internal_wording
@pytest.mark.heavy
def test_report_html_renders_in_headless_chromium(report_dir, tmp_path):
    shot, dom = render_in_chromium(report_dir / "report.html", tmp_path, name="report-epoch-3")
    _check_report_page(dom)
    # The screenshot is a page of the size asked for, with text and charts on it (not a blank image).
    width, height = struct.unpack(">II", shot.read_bytes()[16:24])
    assert (width, height) == (1280, 2400)


def test_html_tables_scroll_in_their_own_box_and_no_internal_wording(report_dir):
    """The page as written (what Chromium draws, tests/output/report/test_report.py::
    test_report_html_renders_in_headless_chromium, heavy): findings first and in order, links that land, charts."""
    html = (report_dir / "report.html").read_text()
    parsed = _check_report_page(html)
    assert ".table-scroll { overflow-x: auto;" in html
    tables = [i for i, (tag, _) in enumerate(parsed.tags) if tag == "table"]
    assert tables and all(
        parsed.tags[i - 1][0] == "div" and parsed.tags[i - 1][1]["class"] in ("table-scroll", "table-scroll wide")
        for i in tables
    )
    assert len(parsed.findings) == len(FINDINGS) and all(text.strip() for text in parsed.items)
    text = " ".join(parsed.text)
    for leftover in ("None", "nan", "{'", "`", "NaN", "null"):
        assert leftover not in text.split() and leftover not in text.replace("(", " ").split(), leftover
    assert "{'" not in text and "`" not in text
    # Charts do not cut long build labels (Vega-Lite cuts axis labels at 180 px unless told otherwise).
    votes = (report_dir / "charts" / "votes-by-build.svg").read_text()
    assert "V2 + DSpark, processed_logprobs, vLLM fix" in votes and "…" not in votes


def _check_report_page(page: str) -> _Html:
    """The epoch-3 report page (as written, or as Chromium drew it), parsed: its tables and charts' marks, the
    findings first and in order, each link landing on an element of the page, the timeline's section with its chart."""
    parsed = _Html()
    parsed.feed(page)
    tags = [t for t, _ in parsed.tags]
    assert tags.count("svg") >= 3 and tags.count("table") >= 4 and parsed.cells > 50
    assert page.count("<path") > 10  # the charts' marks (Vega's SVG paths), not empty frames
    # (the Markdown's `code` spans are <code> elements in the HTML)
    assert parsed.findings == [
        (line.split("](", 1)[0].removeprefix("- [") + line.split(")", 1)[1]).replace("`", "") for line in FINDINGS
    ]
    ids = {attrs["id"] for _, attrs in parsed.tags if "id" in attrs}
    targets = [attrs["href"] for tag, attrs in parsed.tags if tag == "a" and attrs.get("href", "").startswith("#")]
    assert len(targets) == len(FINDINGS) and {t[1:] for t in targets} <= ids
    assert page.index('id="findings"') < page.index('id="overview"')
    timeline = page.split('id="timeline"', 1)[1].split("</section>", 1)[0]
    assert "<svg" in timeline and timeline.count("<path") > 3
    return parsed


def _png_colours(png: bytes) -> int:
    """Distinct pixel byte values of a PNG (a blank image has one or two)."""
    pos, idat = 8, b""
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos : pos + 8])
        if kind == b"IDAT":
            idat += png[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return len(set(zlib.decompress(idat)[:2_000_000]))


def test_untrusted_build_labels_and_host_cannot_inject_markdown(sample_dir, tmp_path):
    """builds.toml labels and a host address full of HTML, links and pipes: report.md and the evidence
    Markdown show them as text, in one cell each, and the HTML escapes them."""
    from pipeline.evidence import compute
    from pipeline.ingest.builds import load_builds
    from pipeline.output.render import render
    from pipeline.output.report import build_epoch_report, render_report_html, render_report_markdown
    from pipeline.warehouse.database import open_for_write
    from tests.output.render.test_render import HOSTILE, injected, parse_markdown, table_rows

    labels = [label for label in HOSTILE if "\n" not in label]  # a TOML basic string cannot hold a raw newline
    entries = "".join(
        f'[[builds]]\nhost = "{HOST}"\nlabel = {json.dumps(label)}\nsince = "2026-10-{5 + 2 * i:02d}T00:00:00Z"\n\n'
        for i, label in enumerate(labels)
    )
    (tmp_path / "builds.toml").write_text(entries)
    shutil.copy(sample_dir / "warehouse.duckdb", tmp_path / "w.duckdb")
    con = open_for_write(tmp_path / "w.duckdb")
    try:
        assert load_builds(con, tmp_path / "builds.toml") == len(labels)
        report = build_epoch_report(con, 3, HOST)
        evidence = render(compute("votes-by-build", con, host=HOST, epoch=3, command="c"), "markdown")
        # A host address from the command line full of HTML is not an address: refused before any output.
        with pytest.raises(EvidenceError, match=r"^--host '<img src=x onerror=alert\(1\)>' is not a gonka1… address"):
            build_epoch_report(con, 3, HOSTILE[1])
    finally:
        con.close()
    text = render_report_markdown(report)
    tokens = parse_markdown(text)
    # the template's bold captions aside; a label's emphasis would break the cells' text checked below
    assert injected(tokens, allowed_links=("tables/", "charts/", "#"), emphasis=True) == []
    # The findings name the hostile builds as text, after links made by the template only.
    findings = _findings_block(text)
    assert sum(line.startswith("- [The host's verdicts by build](#6-votes-by-build): under ") for line in findings) >= 1
    votes = re.split(r"## \d+\. Votes by build", text, maxsplit=1)[1].split("\n## ", 1)[0]
    assert {r[0] for r in table_rows(parse_markdown(votes))[1:]} == set(labels)
    assert all(len(r) == len(table_rows(parse_markdown(votes))[0]) for r in table_rows(parse_markdown(votes)))
    evidence_tokens = parse_markdown(evidence)
    assert injected(evidence_tokens) == []
    assert {r[0] for r in table_rows(evidence_tokens)[1:]} == set(labels)
    html = render_report_html(report, {})
    assert "<script>alert" not in html and "<img src=x" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_a_failed_write_leaves_no_partial_copy(sample_dir, tmp_path):
    from pipeline.output.report import build_epoch_report, write_epoch_report

    con = duckdb.connect(str(sample_dir / "warehouse.duckdb"), read_only=True)
    try:
        report = build_epoch_report(con, 3, HOST)
    finally:
        con.close()
    next(s for s in report.sections if s.chart is not None).chart = {"mark": "no-such-mark", "data": {"values": []}}
    with pytest.raises(ValueError, match="Vega-Lite to SVG conversion failed"):
        write_epoch_report(report, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_every_report_chart_has_the_colours_its_legend_says(report_dir):
    from tests.output.report.svg_legends import colour_mismatches, legends

    with_legend = 0
    for svg_path in sorted((report_dir / "charts").glob("*.svg")):
        svg = svg_path.read_text()
        assert colour_mismatches(svg) == [], svg_path.name
        with_legend += bool(legends(svg))
    assert with_legend >= 3  # acceptance, timeline, throughput, votes-by-build draw legends


def test_the_acceptance_chart_draws_the_tables_interval_with_labels_read_as_written(report_dir):
    from tests.output.report.svg_legends import legends, marks

    svg = (report_dir / "charts" / "acceptance.svg").read_text()
    rows = list(csv_rows(report_dir / "tables" / "acceptance.csv"))
    (legend,) = legends(svg)
    bars = {m.fields["build"]: m for m in marks(svg) if m.role == "bar"}
    assert set(bars) == {r["build"] for r in rows} == set(legend.entries)
    for build, bar in bars.items():
        assert bar.colours == {legend.entries[build]}  # each bar in its build's colour
    # the whisker of each bar: the bootstrap interval the table reports (mal_boot_low … mal_boot_high)
    spec = json.dumps(dict(EVIDENCE["acceptance"].report.chart(_acceptance_result(report_dir), pl.DataFrame())))
    assert '"field": "mal_boot_low"' in spec and '"field": "mal_boot_high"' in spec
    assert len([m for m in marks(svg) if m.role == "errorbar"]) == len(rows)
    # no axis label is drawn rotated (the build names were turned 90° under the axis title)
    assert not re.search(r"role-axis-label[^>]*>(?:<[^>]*>)*?<text[^>]*rotate\((?:-90|270)\)", svg)


def csv_rows(path: Path):
    import csv

    with path.open() as f:
        yield from csv.DictReader(f)


def _acceptance_result(report_dir: Path) -> EvidenceResult:
    """The acceptance result of the report's epoch, from the sample warehouse the report was drawn from."""
    from pipeline.evidence import compute

    con = duckdb.connect(str(report_dir.parents[1] / "warehouse.duckdb"), read_only=True)
    try:
        return compute("acceptance", con, host=HOST, epoch=3)
    finally:
        con.close()


def _md_section(text: str, heading: str) -> str:
    """The Markdown of a numbered report section, up to the next heading."""
    return re.split(rf"\n## \d+\. {re.escape(heading)}\n", text, maxsplit=1)[1].split("\n## ", 1)[0]


def test_one_unit_per_quantity_in_the_report_tables(report_dir):
    text = (report_dir / "report.md").read_text()
    # usage is a fraction of the KV cache: in percent, as rates are
    stability = _md_table_after(_md_section(text, "Engine stability"), "**")
    assert all(re.fullmatch(r"\d+\.\d\d%", v) for v in stability["max_kv_cache_usage"].to_list())
    # the acceptance rate carries its bootstrap interval (whole windows resampled); the Wilson interval of the
    # tokens, which its notes call too narrow, is its own column; the MAL carries its bootstrap interval
    acceptance = _md_table_after(_md_section(text, "Speculative-decoding acceptance"), "**")
    assert "rate_boot_low" not in acceptance.columns and "mal_boot_low" not in acceptance.columns
    # two methods in one table: each header names its own
    rate, wilson, mal = (
        "acceptance_rate (bootstrap 95%)",
        "ci_low–ci_high (Wilson 95%)",
        "mean_acceptance_length (bootstrap 95%)",
    )
    assert {rate, wilson, mal} <= set(acceptance.columns)
    for row, raw in zip(
        acceptance.iter_rows(named=True), csv_rows(report_dir / "tables" / "acceptance.csv"), strict=True
    ):
        pct = lambda v: f"{float(v) * 100:.2f}"  # noqa: E731
        assert row[rate] == (
            f"{pct(raw['acceptance_rate'])}% ({pct(raw['rate_boot_low'])}–{pct(raw['rate_boot_high'])}%)"
        )
        assert row[wilson] == f"{pct(raw['ci_low'])}–{pct(raw['ci_high'])}%"
        assert re.fullmatch(r"\d\.\d{3} \(\d\.\d{3}–\d\.\d{3}\)", row[mal])


def test_wide_tables_fit_the_page_and_the_host_is_named_once(report_dir):
    html = (report_dir / "report.html").read_text()
    # the tracker's two epochs are read transposed, the timeline's many columns in smaller type on the page
    tracker = html.split('id="tracker"', 1)[1].split("</section>", 1)[0]
    assert '<table class="evidence transposed">' in tracker
    timeline = html.split('id="timeline"', 1)[1].split("</section>", 1)[0]
    assert 'class="table-scroll wide"' in timeline and "_<wbr>" in timeline
    # in print every table wraps inside the page rather than being cut at its edge
    assert re.search(r"@media print \{.*?\.table-scroll \{ overflow: visible; \}", html, re.S)
    # the host's address is in the page heading, not in every section title
    titles = re.findall(r"<p><strong>(.*?)</strong></p>", html)
    assert titles and not [t for t in titles if HOST in t]
    assert HOST in html.split("</h1>", 1)[0]
