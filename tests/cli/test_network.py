"""`gonka-evidence network ingest|evidence` through the Typer app, in this process (--workers 0, no Dask)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from pipeline.samples.network import write_network

runner = CliRunner()


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    root = tmp_path_factory.mktemp("network")
    truth = write_network(root / "copies", hosts=3)
    copies = [str(root / "copies" / name) for name in truth.copies]
    # One bucket: a partition per epoch (16 gave six); that the tables do not depend on the bucket count is
    # tests/network/test_network.py's.
    args = ["network", "ingest", *copies, "--lake", str(root / "lake"), "--workers", "0", "--buckets", "1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "forks: 1" in result.output and "after dedupe" in result.output
    return root / "lake", truth, result.output


@pytest.fixture(scope="module")
def lake(ingested):
    return ingested[:2]


def test_network_ingest_names_each_fork_and_the_copies_of_each_version(ingested):
    """Before: "forks: 1" only; which escrow and nonce forked, and which copies disagree, was not said."""
    from pipeline.network.lake import Lake
    from pipeline.warehouse.database import open_read_only

    path, truth, output = ingested
    fork = truth.fork
    lines = [line for line in output.splitlines() if "fork: " in line]
    assert len(lines) == 1, output
    head, versions = lines[0].split("fork: ", 1)[1].split(": ", 1)
    assert head.endswith(f"escrow {fork['escrow_id']} nonce {fork['nonce']}")
    holders = [part.split(" (sha256:")[0].split(", ") for part in versions.split(" vs ")]
    assert len(holders) == 2 and [fork["copy"]] in holders  # the forked copy alone against the others
    assert sorted(c for copies in holders for c in copies) == sorted(truth.copies)
    # and in a view of the partition warehouse
    lake = Lake(path)
    rows = []
    for e, b in lake.partitions():
        con = open_read_only(lake.warehouse_path(e, b))
        try:
            rows += con.execute("SELECT escrow_id, nonce, versions, len(copies) FROM forked_diffs").fetchall()
        finally:
            con.close()
    assert rows == [(fork["escrow_id"], fork["nonce"], 2, len(truth.copies))]


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
    refused = runner.invoke(app, [*args, "--host", truth.focal_host, "--epoch", "3"])
    assert refused.exit_code == 1  # epoch 3 of the network samples is open: its tests are not evidence yet
    assert "error: epoch 3 open (0 of 2 escrows settled; closes when all escrows settle" in refused.output
    assert "a statistical test over an open epoch is not evidence yet; give --allow-open" in refused.output
    result = runner.invoke(app, [*args, "--host", truth.focal_host, "--epoch", "3", "--allow-open"])
    assert result.exit_code == 0, result.output
    assert "| host |" in result.stdout and "Provisional: epoch 3 open (0 of 2 escrows settled" in result.stdout
    closed = runner.invoke(app, [*args, "--host", truth.focal_host, "--epoch", "2"])
    assert closed.exit_code == 0 and "Closed: epoch 2 closed at " in closed.stdout
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
