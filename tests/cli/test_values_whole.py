"""Values never cut: `evidence` and `preflight --format table` piped print every cell whole;
`query -o FILE` takes its format from the extension and refuses a --format the extension contradicts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from tests.factories import data_samples_warehouse

HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # focal host of data-samples/
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("whole")
    return data_samples_warehouse(d / "warehouse.duckdb", vllm_log_host=HOST)


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The command with stdout a pipe (as `| cat` or a file gives it), in a narrow terminal's environment."""
    env = os.environ | {"PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


# two processes; stands in the default tier:
# tests/cli/test_values_whole.py::test_piped_evidence_and_preflight_tables_cut_no_cell
@pytest.mark.heavy
def test_piped_evidence_and_preflight_tables_cut_no_cell_in_a_process(warehouse):
    """The test below with stdout a pipe of a process of its own."""
    _tables_cut_no_cell(cli, warehouse)


def test_piped_evidence_and_preflight_tables_cut_no_cell(warehouse):
    """In this process, stdout not a terminal (as a pipe is not), in the same narrow terminal's environment."""

    def here(*args: str) -> subprocess.CompletedProcess:
        done = invoke(*args)
        return subprocess.CompletedProcess(args, done.exit_code, done.stdout, done.stderr)

    _tables_cut_no_cell(here, warehouse)


def _tables_cut_no_cell(cli, warehouse: Path) -> None:
    votes = cli("evidence", "votes-by-build", "--host", HOST, "--epoch", "3", "--format", "table", "-w", str(warehouse))
    assert votes.returncode == 0, votes.stderr
    assert "(72.19–97.47%)" in votes.stdout  # the interval whole, not "(72.19–97.47…"
    assert "V2 + DSpark, processed_logprobs, vLLM fix" in votes.stdout
    preflight = cli("preflight", "--host", HOST, "--format", "table", "-w", str(warehouse))
    assert preflight.returncode == 0, preflight.stderr
    for label in ("V2 + DSpark, processed_logprobs, vLLM fix", "V2 + DSpark, vLLM fix, raw_logprobs, chunk 2048"):
        assert label in preflight.stdout
    # every ellipsis in the output is the data's own (a quoted log line), none a cut
    for line in votes.stdout.splitlines() + preflight.stdout.splitlines():
        assert "…" not in line or "PoC /generate: …" in line or "'Initializing a V1 LLM engine …" in line, line


def invoke(*args: str):
    """The command in-process, in the same narrow terminal's environment: for output written to a file (-o),
    where no stdout is involved, and for what a command prints on a stdout that is not a terminal."""
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "80"})


def test_query_output_takes_its_format_from_the_extension(warehouse, tmp_path):
    for name, check in (
        (
            "q.csv",
            lambda t: (
                t.splitlines()[0] == "epoch,escrows,inferences,pending,started,finished_no_verdict,"
                "challenged_unresolved,validated,invalidated,timed_out,drained,validations_valid,validations_invalid"
            ),
        ),
        ("q.json", lambda t: [r["epoch"] for r in json.loads(t)] == [2, 3, 4]),
        ("q.md", lambda t: t.startswith("| epoch | escrows |")),
    ):
        done = invoke("query", "epoch_summary", "-o", str(tmp_path / name), "-w", str(warehouse))
        assert done.exit_code == 0, done.stderr
        text = (tmp_path / name).read_text()
        assert check(text) and "┃" not in text and "│" not in text, text[:300]
    assert (tmp_path / "q.parquet").exists() is False
    done = invoke("query", "epoch_summary", "-o", str(tmp_path / "q.parquet"), "-w", str(warehouse))
    assert done.exit_code == 0 and (tmp_path / "q.parquet").read_bytes()[:4] == b"PAR1"


def test_query_refuses_a_format_its_output_extension_contradicts(warehouse, tmp_path):
    done = invoke("query", "epoch_summary", "-o", str(tmp_path / "q.csv"), "--format", "json", "-w", str(warehouse))
    assert done.exit_code != 0 and not (tmp_path / "q.csv").exists()
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--format json contradicts q.csv's extension (csv)" in lines[0], done.stderr
    same = invoke("query", "epoch_summary", "-o", str(tmp_path / "q.csv"), "--format", "csv", "-w", str(warehouse))
    assert same.exit_code == 0 and (tmp_path / "q.csv").read_text().startswith("epoch,")
