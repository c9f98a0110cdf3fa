"""`gonka-evidence network ingest|evidence` through the Typer app, in this process (--workers 0, no Dask)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from pipeline.samples.network import write_network

runner = CliRunner()


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("network")
    truth = write_network(root / "copies", hosts=3)
    copies = [str(root / "copies" / name) for name in truth.copies]
    result = runner.invoke(app, ["network", "ingest", *copies, "--lake", str(root / "lake"), "--workers", "0"])
    assert result.exit_code == 0, result.output
    assert "forks: 1" in result.output and "after dedupe" in result.output
    return root / "lake", truth


def test_executors_as_json_with_a_funnel_chart(lake, tmp_path):
    path, truth = lake
    chart = tmp_path / "funnel.json"
    args = ["network", "evidence", "executors", "--lake", str(path), "--workers", "0", "--format", "json"]
    result = runner.invoke(app, [*args, "--chart", str(chart)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    rows = {r["executor"]: r for r in doc["rows"]}
    focal = rows[truth.focal_host]
    assert focal["ci_low"] <= focal["rate"] <= focal["ci_high"]
    assert {"misses_refused", "misses_execution", "misses_error", "rate_flag"} <= set(focal)
    assert doc["stats"]["funnel_rate"]["correction"] == "Holm over the executors"
    assert "layer" in json.loads(chart.read_text())


def test_peer_invalidation_markdown_names_every_copy(lake):
    path, truth = lake
    args = ["network", "evidence", "peer-invalidation", "--lake", str(path), "--workers", "0"]
    result = runner.invoke(app, [*args, "--host", truth.focal_host, "--epoch", "3"])
    assert result.exit_code == 0, result.output
    assert "| host |" in result.stdout
    for label in truth.copies:
        assert f"source: {label} (sqlite)" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["network", "evidence", "nope"], "unknown network evidence table 'nope'"),
        (["network", "evidence", "peer-invalidation"], "needs --host"),
    ],
)
def test_bad_requests_are_one_line_errors(lake, args, message):
    path, _ = lake
    result = runner.invoke(app, [*args, "--lake", str(path), "--workers", "0"])
    assert result.exit_code == 1
    assert message in result.output and "Traceback" not in result.output


def test_no_lake_is_a_one_line_error(tmp_path):
    result = runner.invoke(app, ["network", "evidence", "executors", "--lake", str(tmp_path / "none")])
    assert result.exit_code == 1
    assert "no lake here yet" in result.output
