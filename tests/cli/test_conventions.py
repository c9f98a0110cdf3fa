"""Conventions of the whole command line: exit codes, which stream carries what, --version,
--quiet/--verbose, --format choices, shell completion, config defaults, and help text printed as
written. Checked in real subprocesses where the process itself matters (the console script's exit
codes, --version; the streams of a process and its terminal width also in-process, the processes in the
heavy tier); help text, completion, usage errors, the stream a summary goes to, exit 3 and config
defaults, which the command decides, in-process (`invoke`, its stdout and stderr apart)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline import __version__
from pipeline.cli.app import app
from tests.cli.copy4_warehouse import copy4_warehouse

ROOT = Path(__file__).resolve().parents[2]
HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"


def invoke(*args: str, env: dict | None = None):
    """The command in-process, under the console script's name (its usage lines and completion variable) and
    with the command line as sys.argv (which a table's reproducing command is made from), as a process has it."""
    argv = sys.argv
    sys.argv = ["gonka-evidence", *args]
    try:
        return CliRunner().invoke(app, list(args), prog_name="gonka-evidence", env=env)
    finally:
        sys.argv = argv


@pytest.fixture
def no_settings_env(monkeypatch):
    """As `cli` gives a subprocess: no GONKA_EVIDENCE_* variable and no COLUMNS."""
    for name in [k for k in os.environ if k.startswith("GONKA_EVIDENCE_")] + ["COLUMNS"]:
        monkeypatch.delenv(name, raising=False)


def cli(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GONKA_EVIDENCE_") and k != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env={**base, **(env or {})},
        timeout=300,
    )


@pytest.fixture(scope="module")
def warehouse(request, timeline) -> Path:
    return copy4_warehouse(request, timeline)  # a copy of the one built in this process


def test_version_is_an_option_and_a_command():
    for args in (["--version"], ["version"]):
        result = cli(*args)
        assert result.returncode == 0 and result.stdout == f"{__version__}\n" and result.stderr == "", args


def test_exit_codes_0_1_2(warehouse, no_settings_env):
    ok = cli("query", "SELECT 1 AS n", "--format", "csv", "-w", str(warehouse))
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "n\n1\n", "")
    user_error = cli("query", "SELECT nope FROM nothing", "-w", str(warehouse))
    assert user_error.returncode == 1 and user_error.stdout == ""
    assert user_error.stderr.startswith("error: ") and len(user_error.stderr.splitlines()) == 1
    # The console script's 2 in a process of its own; which command lines are usage errors the command decides:
    # the others in-process.
    xml = cli("query", "x", "--format", "xml")
    assert xml.returncode == 2 and xml.stdout == "" and "Traceback" not in xml.stderr
    assert "'xml' is not one of 'table', 'csv', 'json', 'markdown', 'parquet'" in xml.stderr
    for usage in (
        ["query", "SELECT 1", "--format", "xml"],
        ["ingest"],
        ["--no-such-option"],
        ["evidence", "tracker", "--format", "html"],
    ):
        result = invoke(*usage)
        assert result.exit_code == 2 and result.stdout == "" and "Traceback" not in result.stderr, usage


# three ingests of a copy of four epochs; stands in the default tier:
# tests/cli/test_conventions.py::test_strict_quarantine_exits_3_with_the_summary_on_stderr
@pytest.mark.heavy
def test_strict_quarantine_of_a_copy_of_four_epochs_exits_3_with_the_summary_on_stderr(tmp_path, sqlite_copy):
    _strict_quarantine(tmp_path, sqlite_copy(4))


def test_strict_quarantine_exits_3_with_the_summary_on_stderr(tmp_path, sqlite_copy):
    """Over a copy of its first epoch: what --strict does with a quarantined row is the same."""
    _strict_quarantine(tmp_path, sqlite_copy(1))


def _strict_quarantine(tmp_path: Path, store: Path) -> None:
    epoch_file = sorted(store.glob("epoch_*.db"), key=lambda p: int(p.stem.split("_")[1]))[-1]
    with sqlite3.connect(epoch_file) as db:  # one diff whose txs no longer decode: quarantined
        escrow, nonce = db.execute("SELECT escrow_id, max(nonce) FROM diffs GROUP BY escrow_id LIMIT 1").fetchone()
        db.execute("UPDATE diffs SET txs_proto = x'12ffff01' WHERE escrow_id = ? AND nonce = ?", (escrow, nonce))
    wh = str(tmp_path / "w.duckdb")
    strict = invoke("ingest", str(store), "-w", wh, "--strict")
    assert strict.exit_code == 3, strict.stderr
    assert strict.stdout == ""  # the summary is not data
    assert re.search(r"quarantined rows: [1-9]", strict.stderr)
    lenient = invoke("ingest", str(store), "-w", str(tmp_path / "lenient.duckdb"))
    assert lenient.exit_code == 0 and re.search(r"quarantined rows: [1-9]", lenient.stderr)
    quiet = invoke("ingest", str(store), "-w", str(tmp_path / "quiet.duckdb"), "--strict", "--quiet")
    assert (quiet.exit_code, quiet.stdout, quiet.stderr) == (3, "", "")


def test_ingest_logs_strict_exits_3(tmp_path):
    from pipeline.samples.logs import write_log_samples

    write_log_samples(tmp_path)
    result = invoke("ingest-logs", str(tmp_path / "vllm"), "--host", HOST, "-w", str(tmp_path / "w.duckdb"), "--strict")
    assert result.exit_code == 3, result.stderr
    # A command without data output prints its summary on stderr.
    assert result.stdout == "" and "unparsed lines: 1" in result.stderr


# seven processes; stands in the default tier:
# tests/cli/test_conventions.py::test_data_on_stdout_notices_on_stderr_quiet_and_verbose
@pytest.mark.heavy
def test_data_on_stdout_notices_on_stderr_quiet_and_verbose_in_a_process(warehouse):
    """The test below in processes of their own: their stdout and stderr as a shell's pipes see them."""
    _data_on_stdout_notices_on_stderr(cli, warehouse)


def test_data_on_stdout_notices_on_stderr_quiet_and_verbose(warehouse, no_settings_env):
    """What goes to stdout and to stderr, and how wide, is the command's to decide: in this process."""

    def here(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        done = invoke(*args, env=env)
        return subprocess.CompletedProcess(args, done.exit_code, done.stdout, done.stderr)

    _data_on_stdout_notices_on_stderr(here, warehouse)


def _data_on_stdout_notices_on_stderr(cli, warehouse: Path) -> None:
    wide = "SELECT " + ", ".join(f"{i} AS column_number_{i}" for i in range(12))
    fitted = cli("query", wide, "-w", str(warehouse), env={"COLUMNS": "60"})
    assert fitted.returncode == 0
    assert max(len(line) for line in fitted.stdout.splitlines()) <= 60
    assert "column_number_0" in fitted.stdout and "column_number_11" not in fitted.stdout
    assert "columns left out to fit the terminal: " in fitted.stderr and "column_number_11" in fitted.stderr
    assert "--vertical" in fitted.stderr and "--format csv/json" in fitted.stderr
    quiet = cli("query", wide, "-w", str(warehouse), "-q", env={"COLUMNS": "60"})
    assert quiet.stdout == fitted.stdout and quiet.stderr == ""
    global_quiet = cli("--quiet", "query", wide, "-w", str(warehouse), env={"COLUMNS": "60"})
    assert global_quiet.stdout == fitted.stdout and global_quiet.stderr == ""
    verbose = cli("query", "SELECT 1 AS n", "--format", "json", "-w", str(warehouse), "--verbose")
    assert json.loads(verbose.stdout) == [{"n": 1}]
    assert "rows: 1, columns: 1" in verbose.stderr
    piped = cli("query", wide, "-w", str(warehouse))  # not a terminal and no COLUMNS: every column
    assert "column_number_11" in piped.stdout and piped.stderr == ""
    vertical = cli("query", wide, "-w", str(warehouse), "--vertical", env={"COLUMNS": "60"})
    assert "column_number_11 | 11" in vertical.stdout.splitlines()


def test_builds_summary_goes_to_stderr_and_its_help_prints_as_written(tmp_path):
    builds = tmp_path / "builds.toml"
    builds.write_text(f'[[builds]]\nhost = "{HOST}"\nlabel = "[bold]V2[/bold]"\nsince = "2026-10-23T00:00:00Z"\n')
    result = invoke("builds", str(builds), "-w", str(tmp_path / "w.duckdb"))
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr.strip() == f"host_builds: 1 entries from {builds}"
    assert invoke("builds", str(builds), "-w", str(tmp_path / "w.duckdb"), "-q").stderr == ""
    label = invoke("query", "SELECT build FROM host_builds", "--format", "csv", "-w", str(tmp_path / "w.duckdb"))
    assert label.stdout == "build\n[bold]V2[/bold]\n"
    help_text = invoke("builds", "--help").stdout
    assert "[[builds]] host, label, since entries" in help_text


def test_every_command_takes_quiet_and_verbose_and_help_lists_the_exit_codes():
    top = invoke("--help").stdout
    assert "Exit codes: 0 success; 1 user error" in " ".join(top.split())
    assert "3 rows quarantined with --strict" in " ".join(top.split())
    commands = [
        ["ingest"],
        ["ingest-logs"],
        ["ingest-json"],
        ["builds"],
        ["doctor"],
        ["query"],
        ["evidence"],
        ["report", "epoch"],
        ["run"],
        ["version"],
    ]
    for command in commands:
        text = invoke(*command, "--help").stdout
        assert "--quiet" in text and "--verbose" in text, command
    assert "Exit 3 when" in " ".join(invoke("ingest", "--help").stdout.split())


def _complete(words: str) -> list[str]:
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    result = invoke(env={"_GONKA_EVIDENCE_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)})
    assert result.exit_code == 0, result.stderr
    return result.stdout.split()


def test_shell_completion_of_evidence_names_named_queries_and_formats():
    from pipeline.evidence import EVIDENCE
    from pipeline.output.query.execute import named_queries
    from pipeline.output.render import FORMATS

    assert _complete("gonka-evidence evidence ") == list(EVIDENCE)
    assert _complete("gonka-evidence evidence peer") == ["peer-invalidation"]
    assert _complete("gonka-evidence query host_") == [n for n in named_queries() if n.startswith("host_")]
    assert _complete("gonka-evidence query --format ") == ["table", "csv", "json", "markdown", "parquet"]
    assert _complete("gonka-evidence evidence tracker --format ") == list(FORMATS)


def test_query_and_evidence_take_host_and_warehouse_from_the_config(
    tmp_path, warehouse, timeline, monkeypatch, no_settings_env
):
    host = timeline.focal_host  # a host the warehouse holds (one it does not is an error)
    config = tmp_path / "gonka-evidence.toml"
    config.write_text(f'warehouse = "{warehouse}"\nhost = "{host}"\n')
    monkeypatch.chdir(tmp_path)
    here = invoke("query", "SELECT count(*) AS n FROM escrows", "--format", "json")
    assert here.exit_code == 0, here.stderr
    assert json.loads(here.stdout)[0]["n"] > 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    named = invoke("query", "SELECT count(*) AS n FROM escrows", "--format", "csv", "--config", str(config))
    assert named.exit_code == 0 and named.stdout.startswith("n\n"), named.stderr
    monkeypatch.chdir(tmp_path)
    evidence = invoke("evidence", "peer-invalidation", "--format", "json")
    assert evidence.exit_code == 0, evidence.stderr
    assert f"--host {host}" not in evidence.stdout  # the host came from the config, not the command line
    assert json.loads(evidence.stdout)["evidence"] == "peer-invalidation"
    # No config here: no host is assumed, and the warehouse is ./warehouse.duckdb.
    monkeypatch.chdir(elsewhere)
    bare = invoke("evidence", "peer-invalidation", "-w", str(warehouse))
    assert bare.exit_code == 1 and "needs --host" in bare.stderr
    missing = invoke("query", "SELECT 1", "--config", str(tmp_path / "nope.toml"))
    assert missing.exit_code == 1 and "no such config file" in missing.stderr


def test_a_host_from_the_environment_is_named_in_the_reproducing_command(
    tmp_path, warehouse, timeline, monkeypatch, no_settings_env
):
    host = timeline.focal_host  # a host the warehouse holds (one it does not is an error)
    monkeypatch.chdir(tmp_path)
    # As a warehouse from GONKA_EVIDENCE_WAREHOUSE is: the footer must reproduce the table without the variable.
    from_env = invoke(
        "evidence",
        "votes-by-build",
        "--epoch",
        "3",
        env={"GONKA_EVIDENCE_HOST": host, "GONKA_EVIDENCE_WAREHOUSE": str(warehouse)},
    )
    assert from_env.exit_code == 0, from_env.stderr
    (command,) = [line for line in from_env.stdout.splitlines() if line.startswith("- command: ")]
    assert (
        command
        == f"- command: `gonka-evidence evidence votes-by-build --epoch 3 --host {host} --warehouse {warehouse}`"
    )
    again = invoke(*command.removeprefix("- command: `gonka-evidence ").rstrip("`").split())
    assert (again.exit_code, again.stdout) == (0, from_env.stdout), again.stderr


def test_query_without_sql_or_with_vertical_in_another_format_is_a_usage_error(warehouse):
    for args in (["query"], ["query", "SELECT 1", "--vertical", "--format", "csv"]):
        result = invoke(*args, "-w", str(warehouse))
        assert result.exit_code == 2 and result.stdout == "" and "Usage: gonka-evidence query" in result.stderr, args
        assert "Traceback" not in result.stderr
    assert "give SQL, a query name" in " ".join(invoke("query", "-w", str(warehouse)).stderr.split())
