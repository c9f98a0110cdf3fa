"""The README documents every command, view, column, config key, named query and evidence table,
and the deployment commands it shows work as written."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

import pipeline.cli.reports  # noqa: F401 (registers `report`)
from pipeline.cli.app import app
from pipeline.core.paths import DATA_SAMPLES_DIR
from pipeline.evidence import EVIDENCE
from pipeline.jobs.config import CONFIG_KEYS, SOURCE_KEYS, SOURCE_KINDS
from pipeline.output.query import named_queries, run_query
from pipeline.warehouse.database import fetch_frame, open_for_write

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PREFIX = "/srv/gonka-evidence"  # the install prefix the deployment files use
runner = CliRunner()


def _commands(group, prefix=()) -> list[tuple[str, ...]]:
    found = []
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            found += _commands(command, (*prefix, name))
        else:
            found.append((*prefix, name))
    return found


def test_every_command_is_documented_with_an_example_in_its_help():
    commands = _commands(typer.main.get_command(app))
    assert ("report", "epoch") in commands and ("run",) in commands
    for command in commands:
        assert f"`gonka-evidence {' '.join(command)}" in README, f"README lacks a row for {' '.join(command)}"
        if command != ("version",):
            help_text = runner.invoke(app, [*command, "--help"]).output
            assert "Example: gonka-evidence" in help_text, command
    assert "--install-completion" in README


def test_every_public_view_and_column_is_documented(tmp_path):
    con = open_for_write(tmp_path / "w.duckdb")
    columns = fetch_frame(
        con,
        """
        SELECT c.table_name, list(c.column_name ORDER BY c.column_index) AS columns
        FROM duckdb_columns() c
        WHERE c.table_name IN (SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main')
           OR c.table_name IN ('ingest_runs', 'quarantine')
        GROUP BY ALL ORDER BY 1""",
    )
    con.close()
    schema = README.split("## Warehouse schema", 1)[1]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \|(.*)\|\s*$", schema, re.M)}
    for view, cols in columns.iter_rows():
        assert view in rows, f"view {view} is missing from the README's schema section"
        documented = {c.strip() for c in rows[view].split("|")[-1].split(",")}
        missing = [c for c in cols if c not in documented]
        assert not missing, f"{view}: columns {missing} are not documented"


def test_every_config_key_evidence_table_and_named_query_is_documented():
    config = README.split("## Configuration reference", 1)[1].split("\n## ", 1)[0]
    for key in CONFIG_KEYS:
        assert f"| `{key}` |" in config and f"`GONKA_EVIDENCE_{key.upper()}`" in config, key
    for key in SOURCE_KEYS:
        assert f"| `{key}` |" in config, key
    for kind in SOURCE_KINDS:
        assert f"`{kind}`" in config, kind
    for name in EVIDENCE:
        assert f"### `{name}`" in README, f"evidence table {name} has no README section"
    for name, query in named_queries().items():
        assert f"| `{name}` |" in README, f"named query {name} is missing from the README"
        assert query.description and query.params, f"{name}: needs -- description: and -- params: lines"


def test_named_queries_run_on_the_sample_warehouse(tmp_path):
    from tests.helpers import ingest

    ingest(tmp_path / "w.duckdb", DATA_SAMPLES_DIR / "store")
    samples = {"host": "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkv8m42lk", "epoch": "3", "lag_seconds": "21600"}
    con = open_for_write(tmp_path / "w.duckdb")
    try:
        for name, query in named_queries().items():
            used = set(re.findall(r"\$([A-Za-z_]\w*)", query.sql))
            for param in used:
                assert param in query.params, f"{name}: ${param} is not in its -- params: line"
            run_query(con, query.sql, {p: samples[p] for p in used})
    finally:
        con.close()
    listing = runner.invoke(app, ["query", "--list"]).output
    assert "closed_epochs: Per epoch" in listing and "[params: lag_seconds" in listing


def test_every_evidence_column_is_listed_in_the_readme(tmp_path):
    from pipeline.evidence import compute
    from tests.helpers import ingest

    ingest(tmp_path / "w.duckdb", DATA_SAMPLES_DIR / "store")
    con = open_for_write(tmp_path / "w.duckdb")
    try:
        for name in EVIDENCE:
            section = README.split(f"### `{name}`", 1)[1].split("\n### ", 1)[0]
            listed = re.search(r"\*Columns:\* (.*)\.", section)
            assert listed, f"{name}: no *Columns:* line in its README section"
            columns = compute(name, con, host="gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkv8m42lk", command="x").rows.columns
            assert [c.strip(" `") for c in listed.group(1).split(",")] == columns, name
    finally:
        con.close()


def _code_block(lang: str, containing: str) -> str:
    blocks = [b for b in re.findall(rf"```{lang}\n(.*?)\n```", README, re.S) if containing in b]
    assert len(blocks) == 1, f"one ```{lang} block with {containing!r} expected"
    return blocks[0]


@pytest.fixture
def install(tmp_path) -> Path:
    """A stand-in for /srv/gonka-evidence: this checkout's venv script and a config pointing at the samples."""
    prefix = tmp_path / "srv"
    (prefix / ".venv" / "bin").mkdir(parents=True)
    (prefix / ".venv" / "bin" / "gonka-evidence").symlink_to(Path(sys.executable).with_name("gonka-evidence"))
    shipped = (ROOT / "gonka-evidence.toml").read_text()
    (prefix / "gonka-evidence.toml").write_text(shipped.replace('"data-samples/', f'"{DATA_SAMPLES_DIR}/'))
    return prefix


@pytest.mark.heavy
def test_the_deployment_files_are_in_the_readme_and_their_commands_work(install):
    service = (ROOT / "deploy" / "gonka-evidence.service").read_text().rstrip("\n")
    timer = (ROOT / "deploy" / "gonka-evidence.timer").read_text().rstrip("\n")
    cron = (ROOT / "deploy" / "crontab").read_text().rstrip("\n")
    assert _code_block("ini", "ExecStart=") == service
    assert _code_block("ini", "[Timer]") == timer
    assert _code_block("crontab", "gonka-evidence run") == cron
    assert "Unit=" not in timer or "gonka-evidence.service" in timer  # the timer starts the service of the same name

    # systemd: ExecStart in WorkingDirectory.
    settings = dict(line.split("=", 1) for line in service.splitlines() if "=" in line)
    workdir = settings["WorkingDirectory"].replace(PREFIX, str(install))
    argv = shlex.split(settings["ExecStart"].replace(PREFIX, str(install)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GONKA_EVIDENCE_")}
    first = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, timeout=300, env=env)
    assert first.returncode == 0, first.stderr
    assert "new reports: epoch 2, epoch 3" in first.stdout
    assert (install / "out" / "epoch-3" / "report.html").exists()

    # cron: the command part of the line, run by sh as cron does.
    command = cron.split(None, 5)[5].replace(PREFIX, str(install))
    second = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=300, env=env)
    assert second.returncode == 0
    log = (install / "run.log").read_text()
    assert "reports: nothing new" in log and "warehouse: unchanged" in log
