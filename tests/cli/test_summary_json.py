"""`--format json` of the job commands (ingest, ingest-logs, ingest-json, network ingest, run): one JSON document
on stdout, made by pipeline/output/summaries.py from the result object the text lines are made from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from pipeline.core.paths import DATA_SAMPLES_DIR
from tests.cli.one_section import one_section_reports

runner = CliRunner()
STORE = str(DATA_SAMPLES_DIR / "store")


def _document(args: list[str]) -> dict:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert set(document) == {"command", "result", "lines"}
    assert all(set(line) == {"level", "text"} for line in document["lines"])
    return document


def _samples_host() -> str:
    from pipeline.jobs.config import sample_config

    host = sample_config().host
    assert host
    return host


def test_ingest_json_gives_the_summary_facts_and_the_same_lines(tmp_path):
    wh = tmp_path / "w.duckdb"
    text = runner.invoke(app, ["ingest", STORE, "-w", str(wh), "--label", "samples"])
    assert text.exit_code == 0 and text.stdout == ""  # the text summary is on stderr
    assert f"ingested {STORE}: 9,218 rows written;" in text.stderr

    document = _document(["ingest", STORE, "-w", str(wh), "--label", "samples", "--format", "json", "--quiet"])
    result = document["result"]
    assert document["command"] == "ingest"
    assert result["source_id"] == "sqlite:store" and result["source_display"] == STORE
    assert result["new_epochs"] == [] and sum(result["rows"].values()) == 0  # the same copy again: nothing new
    said = [line for line in document["lines"] if line["text"].startswith("ingested ")]
    assert len(said) == 1 and said[0]["level"] == "info"
    assert (
        f"ingested {STORE}: 0 rows written; escrows changed {result['escrows_changed']:,}, "
        f"unchanged {result['escrows_unchanged']:,}; new epochs: none; quarantined rows: {result['quarantined']:,};"
    ) in said[0]["text"]
    assert "heads" not in result and "to_derive" not in result  # working state is left out


def test_ingest_json_of_a_new_warehouse_counts_the_samples(tmp_path):
    document = _document(["ingest", STORE, "-w", str(tmp_path / "w.duckdb"), "--format", "json"])
    result = document["result"]
    assert result["new_epochs"] == [2, 3, 4]
    assert result["escrows_changed"] == 9 and result["quarantined"] == 3
    assert result["rows"]["sessions"] == 9 and result["rows"]["inferences"] == 1119
    assert result["copy_at"] == "2026-10-30T03:22:22+00:00"
    assert {row["input"] for row in result["accounting"]} >= {"accounting_escrows", "accounting_meta"}


def test_ingest_logs_json(tmp_path):
    host = _samples_host()
    args = ["ingest-logs", str(DATA_SAMPLES_DIR / "vllm"), "--host", host, "-w", str(tmp_path / "w.duckdb")]
    document = _document([*args, "--format", "json"])
    result = document["result"]
    assert document["command"] == "ingest-logs"
    assert (result["host"], result["files"], result["kinds"], result["timezone"]) == (host, 1, {"vllm": 1}, "UTC")
    assert result["lines"] == 1126 and result["unparsed"] == 0  # the summary's count of log lines read
    assert result["rows"]["log_engine_events"] == 26
    assert document["lines"][0] == {
        "level": "info",
        "text": f"ingest-logs {result['run_id']}: 1 files (1 vllm), 1,126 lines, {result['elapsed_s']:.1f}s",
    }


def test_ingest_json_files_json(tmp_path):
    record = {"participant": "gonka1abc", "model": "m", "assigned_nonces": 3, "counters": []}
    saved = tmp_path / "participants.json"
    saved.write_text(json.dumps([{"epoch_index": 5, "participants": [record]}]))
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    document = _document(["ingest-json", str(saved), str(broken), "-w", str(tmp_path / "w.duckdb"), "--format", "json"])
    result = document["result"]
    assert document["command"] == "ingest-json"
    assert (result["files"], result["rows"]["api_participants"], result["quarantined"]) == (2, 1, 1)
    assert len(result["unreadable"]) == 1 and result["unreadable"][0].startswith(str(broken))
    assert [line["level"] for line in document["lines"]] == ["warning", "info"]


def test_network_ingest_json(tmp_path):
    copies = [str(DATA_SAMPLES_DIR / "network" / f"host-{i}") for i in (0, 1)]
    document = _document(
        ["network", "ingest", *copies, "--lake", str(tmp_path / "lake"), "--workers", "0", "--format", "json"]
    )
    result = document["result"]
    assert document["command"] == "network ingest"
    assert [c["label"] for c in result["copies"]] == ["host-0", "host-1"]
    assert result["built"] == len(result["partitions"]) > 0 and result["buckets"] == 16
    warnings = [line["text"] for line in document["lines"] if line["level"] == "warning"]
    forks = [text for text in warnings if text.startswith("fork: epoch ")]
    assert sum(p["forks"] for p in result["partitions"]) == len(forks) == 1
    lacking = [c["label"] for c in result["copies"] if c["absent_columns"]]
    assert [text.split(" lacks columns")[0] for text in warnings if " lacks columns" in text] == [
        f"copy {label}" for label in lacking
    ]


@pytest.fixture
def samples_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no gonka-evidence.toml: the samples' configuration
    monkeypatch.delenv("GONKA_EVIDENCE_WAREHOUSE", raising=False)
    monkeypatch.delenv("GONKA_EVIDENCE_HOST", raising=False)
    return tmp_path


# the bundled run with whole reports; stands in the default tier:
# tests/cli/test_summary_json.py::test_run_json_holds_its_outcome_and_its_log_lines_preflight_included
@pytest.mark.heavy
def test_run_json_of_whole_reports_holds_its_outcome_and_its_log_lines_preflight_included(samples_dir):
    """The test below, its reports of every section."""
    _run_json(samples_dir)


def test_run_json_holds_its_outcome_and_its_log_lines_preflight_included(samples_dir, monkeypatch):
    """The bundled run, its reports of one section (tests/cli/one_section.py): its outcome, its lines and
    what it wrote are those of whole reports."""
    one_section_reports(monkeypatch)
    _run_json(samples_dir)


def _run_json(samples_dir: Path) -> None:
    document = _document(["run", "-w", "w.duckdb", "--format", "json"])
    result = document["result"]
    assert document["command"] == "run"
    assert result["written"] == [2, 3] and result["rewritten"] == [] and result["published"] is True
    assert [s.get("source_display") for s in result["ingested"]][0] == STORE
    texts = [line["text"] for line in document["lines"]]
    assert texts[0].startswith("config: data-samples; warehouse: w.duckdb")
    assert any(t.startswith("preflight of V2 + DSpark, raw_logprobs: fail") for t in texts)
    assert texts[-1] == "warehouse: updated"
    assert "new reports: epoch 2, epoch 3 in out" in texts
    assert any(t.startswith("open: epoch 4 ") for t in texts)
    assert (Path("out") / "epoch-2" / "report.md").exists()
    again = runner.invoke(app, ["run", "-w", "w.duckdb"])  # the text lines of a second run: nothing new
    assert again.exit_code == 0 and "escrows changed 0" in again.output, again.output
