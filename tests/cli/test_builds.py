"""`gonka-evidence builds`: FILE and `load FILE` load as before; `infer` proposes, `check` compares (exit 1
with one line per contradiction)."""

from __future__ import annotations

import tomllib

import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from pipeline.core.paths import DATA_SAMPLES_DIR
from tests.factories import data_samples_warehouse

runner = CliRunner()
HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"
BAD = f"""
[[builds]]
host = "{HOST}"
label = "V1, no DSpark"
since = "2026-10-05T00:00:00Z"

[[builds]]
host = "{HOST}"
label = "V2, no DSpark"
since = "2026-10-21T00:00:00Z"
"""


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> str:
    return str(data_samples_warehouse(tmp_path_factory.mktemp("cli-builds") / "w.duckdb", vllm_log_host=HOST))


def test_infer_prints_a_proposal_or_writes_it(warehouse, tmp_path):
    result = runner.invoke(app, ["builds", "infer", "-w", warehouse])
    assert result.exit_code == 0, result.output
    assert [e["since"] for e in tomllib.loads(result.stdout)["builds"]][1:] == [
        "2026-10-20T12:00:00Z",
        "2026-10-25T00:00:00Z",
        "2026-10-30T06:00:00Z",
    ]
    out = tmp_path / "proposal.toml"
    written = runner.invoke(app, ["builds", "infer", "--host", HOST, "--out", str(out), "-w", warehouse])
    assert written.exit_code == 0 and written.stdout == ""
    assert out.read_text() == result.stdout
    assert f"proposed builds.toml written to {out}" in written.stderr


def test_check_exits_0_when_consistent_and_3_with_a_line_per_contradiction(warehouse, tmp_path):
    ok = runner.invoke(app, ["builds", "check", str(DATA_SAMPLES_DIR / "builds.toml"), "-w", warehouse])
    assert ok.exit_code == 0 and ok.stdout == ""
    assert "consistent with the vLLM logs" in ok.stderr
    loaded = runner.invoke(app, ["builds", "check", "-w", warehouse])  # the loaded timeline: the bundled one
    assert loaded.exit_code == 0 and "the loaded build timeline: consistent" in loaded.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text(BAD)
    result = runner.invoke(app, ["builds", "check", str(bad), "--host", HOST, "-w", warehouse])
    assert result.exit_code == 3  # a check that found a problem, not a user error (docs/cli.md)
    lines = result.stdout.splitlines()
    assert len(lines) == 4 and all(line.startswith(f"{HOST}: ") for line in lines)
    assert "is shifted" in lines[0] and "says no speculative" in lines[3]
    # neither the processed_logprobs build nor the samples' chunk-2048 build has an entry
    assert "2026-10-25T00:00:00Z" in lines[1] and "2026-10-30T06:00:00Z" in lines[2]
    assert "no boundary near it" in lines[1] and "no boundary near it" in lines[2]


def test_load_keeps_both_spellings_and_rejects_what_does_not_go_with_it(tmp_path):
    w = str(tmp_path / "w.duckdb")
    for args in (
        ["builds", str(DATA_SAMPLES_DIR / "builds.toml")],
        ["builds", "load", str(DATA_SAMPLES_DIR / "builds.toml")],
    ):
        result = runner.invoke(app, [*args, "-w", w])
        assert result.exit_code == 0, result.output
        assert result.stderr.strip() == f"host_builds: 5 entries from {DATA_SAMPLES_DIR / 'builds.toml'}"
    assert runner.invoke(app, ["builds", "load", "-w", w]).exit_code == 2  # load needs a file
    assert runner.invoke(app, ["builds", str(DATA_SAMPLES_DIR / "builds.toml"), "--out", "x", "-w", w]).exit_code == 2
    missing = runner.invoke(app, ["builds", "check", str(tmp_path / "nope.toml"), "-w", w])
    assert missing.exit_code == 1 and "nope.toml" in missing.stderr
