"""A bundle made on one machine verifies on another: other fonts, another time zone and locale,
other source labels for the same copies; the charts name the shipped font and their times are UTC."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from pipeline.core.paths import DATA_SAMPLES_DIR
from tests.factories import load_builds_of
from tests.helpers import ingest
from tests.output.shared import bundle_computed_once, samples_bundle

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def _run(cwd: Path, args: list[str]):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return runner.invoke(app, args)
    finally:
        os.chdir(old)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """./warehouse.duckdb (data-samples/, labelled data-samples, with its builds) and ./bundle of epoch 3,
    shared with test_bundle.py (read only: the reviewer's copy below is a copy)."""
    return samples_bundle(tmp_path_factory)


def test_every_chart_names_the_shipped_font_and_its_times_are_utc(workdir):
    svgs = sorted((workdir / "bundle").rglob("*.svg"))
    assert svgs
    for svg in svgs:
        families = set(svg.read_text().split('font-family="')[1:])
        assert {f.split('"')[0].split(",")[0] for f in families} == {"Gonka Evidence Sans"}, svg
    from pipeline.output.render.charts import legible

    spec = legible({"mark": "point", "encoding": {"x": {"field": "t", "type": "temporal"}}, "data": {"values": []}})
    assert spec["encoding"]["x"]["scale"] == {"type": "utc"}
    assert spec["config"]["font"].startswith("Gonka Evidence Sans,")


def _no_fonts(tmp_path: Path) -> str:
    """A fontconfig file under which the machine has no font at all."""
    (tmp_path / "no-fonts").mkdir()
    conf = tmp_path / "fonts.conf"
    conf.write_text(
        '<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>\n'
        f"  <dir>{tmp_path / 'no-fonts'}</dir>\n  <cachedir>{tmp_path / 'fc-cache'}</cachedir>\n</fontconfig>\n"
    )
    return str(conf)


# a whole verify in a process without fonts, in another time zone (.ci/run runs it); stands in the default tier:
# tests/output/test_same_bytes.py::test_a_label_the_shipped_font_cannot_draw_is_escaped_and_the_same_bytes_anywhere,
# tests/output/test_same_bytes.py::test_every_chart_names_the_shipped_font_and_its_times_are_utc
@pytest.mark.heavy
def test_a_bundle_verifies_under_other_fonts_time_zone_and_locale(workdir, tmp_path):
    # A machine whose fontconfig finds no font at all, in Tokyo: the charts' bytes must not change.
    env = os.environ | {
        "PYTHONPATH": str(ROOT),
        "FONTCONFIG_FILE": _no_fonts(tmp_path),
        "TZ": "Asia/Tokyo",
        "LC_ALL": "C.UTF-8",
        "LANG": "C.UTF-8",
    }
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "verify", "bundle", "--warehouse", "warehouse.duckdb"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert "files match" in said and "labels differ" not in said


# Cyrillic, CJK and an emoji: none of them in the shipped font; this machine's DejaVu Sans draws the first.
DRAWN_ELSEWHERE = "V2 + DSpark, тест 测试 \U0001f680"
_RENDER = """
import hashlib, sys
from pipeline.output.render.images import svg_and_png
spec = {"mark": "bar", "data": {"values": [{"build": sys.argv[1], "n": 3}]},
        "encoding": {"x": {"field": "n", "type": "quantitative"}, "color": {"field": "build", "type": "nominal"}}}
svg, png = svg_and_png(spec)
print(hashlib.sha256(svg.encode() + png).hexdigest(), "\\\\u0442\\\\u0435" in svg, "\\\\U0001f680" in svg)
"""


def test_a_label_the_shipped_font_cannot_draw_is_escaped_and_the_same_bytes_anywhere(tmp_path):
    here, bare = (
        subprocess.run(
            [sys.executable, "-c", _RENDER, DRAWN_ELSEWHERE],
            env=os.environ | {"PYTHONPATH": str(ROOT), **fonts},
            capture_output=True,
            text=True,
            timeout=120,
        )
        for fonts in ({}, {"FONTCONFIG_FILE": _no_fonts(tmp_path)})
    )
    assert here.returncode == 0 and bare.returncode == 0, here.stderr[-2000:] + bare.stderr[-2000:]
    assert here.stdout.split()[1:] == ["True", "True"]  # shown as escapes in the shipped font's characters
    assert here.stdout == bare.stdout  # the same SVG and PNG with this machine's fonts and with none


@pytest.fixture(scope="module")
def relabelled(workdir, tmp_path_factory) -> Path:
    """A reviewer's warehouse: the same copy and builds, ingested under another label."""
    d = tmp_path_factory.mktemp("reviewer")
    ingest(d / "warehouse.duckdb", DATA_SAMPLES_DIR / "store", label="reviewer's copy")
    load_builds_of(d / "warehouse.duckdb", DATA_SAMPLES_DIR / "builds.toml")
    shutil.copytree(workdir / "bundle", d / "bundle")
    return d


def test_verify_compares_evidence_not_labels(relabelled, monkeypatch):
    # The first verify recomputes the bundle from the reviewer's warehouse; the second, over the same warehouse
    # and labels, compares the tampered copy with those same files (what is checked there is the comparison).
    computed = bundle_computed_once(monkeypatch)
    result = _run(relabelled, ["verify", "bundle", "--warehouse", "warehouse.duckdb"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "labels differ" in line]
    assert len(lines) == 1 and "labelled \"reviewer's copy\" here, 'data-samples' in the bundle" in lines[0]
    assert result.output.rstrip().splitlines()[-1].startswith("all ")
    # any other difference is still named: one number changed in one table
    table = relabelled / "bundle" / "tables" / "epoch-summary.json"
    doc = json.loads(table.read_text())
    doc["rows"][0]["count"] += 1
    table.write_text(json.dumps(doc))
    result = _run(relabelled, ["verify", "bundle", "--warehouse", "warehouse.duckdb"])
    assert result.exit_code == 3  # a check that found a problem, not a user error (docs/cli.md)
    assert "1 of " in result.output and "tables/epoch-summary.json (differs)" in result.output
    assert "labels differ" in result.output
    assert len(computed) == 1


def test_every_chart_writer_escapes_what_the_shipped_font_cannot_draw(tmp_path):
    """`Evidence.save_chart` (the API's and `network evidence --chart`) and `charts.save_chart` draw as the
    report does: a label's Cyrillic, CJK or emoji as escapes, never a glyph of the machine's fonts."""
    import altair as alt
    import polars as pl

    from pipeline.evidence.result import EvidenceResult
    from pipeline.output.evidence import Evidence
    from pipeline.output.render.charts import save_chart

    values = [{"build": DRAWN_ELSEWHERE, "n": 3}]
    spec = {
        "mark": "bar",
        "data": {"values": values},
        "encoding": {"x": {"field": "n", "type": "quantitative"}, "color": {"field": "build", "type": "nominal"}},
    }
    result = EvidenceResult(evidence="executors", title="t", params={}, rows=pl.DataFrame(values), stats={}, notes=[])
    api_svg = Evidence(result, chart=spec).save_chart(tmp_path / "api.svg").read_text(encoding="utf-8")
    chart = alt.Chart(pl.DataFrame(values).to_pandas()).mark_bar().encode(x="n:Q", color="build:N")
    module_svg = save_chart(chart, tmp_path / "module")[0].read_text(encoding="utf-8")
    for svg in (api_svg, module_svg):
        assert "\\u0442\\u0435\\u0441\\u0442" in svg and "\\U0001f680" in svg
        assert "тест" not in svg
