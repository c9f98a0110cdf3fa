"""The documentation is true: the generated pages are current, the commands it names exist, the README's
examples print what it shows, every config key and named query is described, and the deployment
commands work as written."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import docs
from pipeline.cli.app import app
from pipeline.core.paths import DATA_SAMPLES_DIR
from pipeline.jobs.config import CONFIG_KEYS, SOURCE_KEYS, SOURCE_KINDS
from pipeline.output.query.execute import named_queries, run_query
from pipeline.warehouse.database import open_for_write

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PREFIX = "/srv/gonka-evidence"  # the install prefix the deployment files and the README's examples use
FOCAL_HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"
runner = CliRunner()


def _page(name: str) -> str:
    return (ROOT / "docs" / name).read_text()


# --- generated pages ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(docs.PAGES))
def test_the_generated_pages_are_current(name):
    assert _page(name) == docs.PAGES[name](), f"docs/{name} is not current: run python -m pipeline.cli.docs"


def test_the_check_mode_finds_a_stale_page(tmp_path, monkeypatch):
    # The pages as committed: current, as test_the_generated_pages_are_current checks (generated once less here).
    for name in docs.PAGES:
        (tmp_path / name).write_text(_page(name))
    monkeypatch.setattr(docs, "DOCS", tmp_path)
    assert docs.main(["--check"]) == 0
    (tmp_path / "schema.md").write_text("stale\n")
    assert docs.main(["--check"]) == 1


def test_every_view_and_evidence_column_has_a_definition():
    schema = _page("schema.md")
    assert "## inferences" in schema and "`votes_invalid` bigint" in schema
    assert "(no comment)" not in schema, "a public view lacks its COMMENT ON text"
    evidence = _page("evidence.md")
    assert "| `busy_windows` | lines with at least one running request and both throughputs printed |" in evidence


# --- commands --------------------------------------------------------------------------------------------


def test_every_command_has_an_example_in_its_help():
    paths = docs.command_paths()
    assert ("report", "epoch") in paths and ("run",) in paths
    for path in paths:
        if path != ("version",):
            assert "Example: gonka-evidence" in docs.help_text(path), path


def _documented_commands() -> set[tuple[str, str]]:
    """(page, the word after `gonka-evidence`) for every command a page names in code."""
    found = set()
    for page in PAGES:
        text = page.read_text()
        blocks = re.findall(r"```(\w*)\n(.*?)```", text, re.S)
        spans = [code for lang, code in blocks if lang != "ini"] + re.findall(r"`([^`\n]+)`", text)
        for code in spans:
            for word in re.findall(r"(?:^|[\s/`$(])gonka-evidence ([a-z][\w-]*|--[\w-]+)", code, re.M):
                found.add((page.relative_to(ROOT).as_posix(), word))
    return found


def test_the_commands_the_docs_name_exist():
    commands = {path[0] for path in docs.command_paths()}
    options = {"--install-completion", "--show-completion", "--help", "--version", "-q", "--quiet"}
    documented = _documented_commands()
    assert ("README.md", "run") in documented and ("README.md", "evidence") in documented
    unknown = sorted(f"{page}: gonka-evidence {word}" for page, word in documented if word not in commands | options)
    assert not unknown, "documented commands that do not exist:\n" + "\n".join(unknown)


# --- the README ------------------------------------------------------------------------------------------


def test_the_readme_test_command_is_what_ci_runs():
    blocks = re.findall(r"```sh\n(.*?)\n```", README, re.S)
    assert len(blocks) >= 2
    assert "gonka-evidence run" in blocks[0]
    assert blocks[1].strip() in (ROOT / ".ci" / "run").read_text()


def test_the_readme_is_short():
    assert len(README.splitlines()) <= 200


@pytest.fixture
def install(tmp_path) -> Path:
    """A stand-in for /srv/gonka-evidence: this venv's script, the shipped config and the samples beside it."""
    prefix = tmp_path / "srv"
    (prefix / ".venv" / "bin").mkdir(parents=True)
    (prefix / ".venv" / "bin" / "gonka-evidence").symlink_to(Path(sys.executable).with_name("gonka-evidence"))
    (prefix / "gonka-evidence.toml").write_text((ROOT / "gonka-evidence.toml").read_text())
    (prefix / "data-samples").symlink_to(DATA_SAMPLES_DIR)
    return prefix


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GONKA_EVIDENCE_") and k != "COLUMNS"}


def _seconds(text: str) -> str:
    return re.sub(r"\b\d+(\.\d+)? s$", "N s", text, flags=re.M)


# a whole run end to end (.ci/run runs it); stands in the default tier:
# tests/jobs/test_run.py::test_the_bundled_run_reports_the_samples_and_their_vllm_log,
# tests/docs/test_docs.py::test_the_commands_the_docs_name_exist
@pytest.mark.heavy
def test_the_readme_examples_print_what_it_shows(install):
    """Each ```console block is `$ COMMAND` and its output, run in order in the checkout (here a stand-in)."""
    examples = re.findall(r"```console\n\$ (.*?)\n(.*?)```", README, re.S)
    assert [shlex.split(c)[1] for c, _ in examples] == ["run", "query", "evidence"]
    for command, shown in examples:
        argv = [str(install / ".venv" / "bin" / "gonka-evidence"), *shlex.split(command)[1:]]
        done = subprocess.run(argv, cwd=install, capture_output=True, text=True, timeout=300, env=_clean_env())
        assert done.returncode == 0, done.stderr
        printed = done.stdout.replace(str(DATA_SAMPLES_DIR), f"{PREFIX}/data-samples")
        assert _seconds(printed) == _seconds(shown), command
    # The Python example, on the warehouse the run wrote.
    (example,) = re.findall(r"```python\n(.*?)```", README, re.S)
    probe = example + "print(counts.height, votes.frame.height)\n"
    done = subprocess.run([sys.executable, "-c", probe], cwd=install, capture_output=True, text=True, env=_clean_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["5", "8"]  # votes-by-build: every build of the host, two kinds each


# --- reference pages -------------------------------------------------------------------------------------


def test_every_config_key_source_kind_and_named_query_is_described():
    config = _page("configuration.md")
    for key in CONFIG_KEYS:
        assert f"| `{key}` |" in config and f"`GONKA_EVIDENCE_{key.upper()}`" in config, key
    for key in SOURCE_KEYS:
        assert f"| `{key}` |" in config, key
    kinds = _page("source-kinds.md")
    for kind in SOURCE_KINDS:
        assert f"| `{kind}` |" in kinds, kind
    cli = _page("cli.md")
    for name, query in named_queries().items():
        assert f"| `{name}` |" in cli, f"named query {name} is missing from docs/cli.md"
        assert query.description and query.params, f"{name}: needs -- description: and -- params: lines"


def test_named_queries_run_on_the_sample_warehouse(tmp_path):
    from tests.factories import data_samples_warehouse

    data_samples_warehouse(tmp_path / "w.duckdb")  # the bundled store's, ingested once per process: a copy
    samples = {"host": FOCAL_HOST, "epoch": "3", "lag_seconds": "21600"}
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


def _code_block(text: str, lang: str, containing: str) -> str:
    blocks = [b for b in re.findall(rf"```{lang}\n(.*?)\n```", text, re.S) if containing in b]
    assert len(blocks) == 1, f"one ```{lang} block with {containing!r} expected"
    return blocks[0]


# two whole runs; stands in the default tier:
# tests/jobs/test_run.py::test_the_shipped_config_is_the_no_configuration_default,
# tests/jobs/test_run.py::test_the_bundled_run_reports_the_samples_and_their_vllm_log
@pytest.mark.heavy
def test_the_deployment_files_are_in_the_docs_and_their_commands_work(tmp_path):
    deployment = _page("deployment.md")
    service = (ROOT / "deploy" / "gonka-evidence.service").read_text().rstrip("\n")
    timer = (ROOT / "deploy" / "gonka-evidence.timer").read_text().rstrip("\n")
    cron = (ROOT / "deploy" / "crontab").read_text().rstrip("\n")
    assert _code_block(deployment, "ini", "ExecStart=") == service
    assert _code_block(deployment, "ini", "[Timer]") == timer
    assert _code_block(deployment, "crontab", "gonka-evidence run") == cron
    assert "Unit=" not in timer or "gonka-evidence.service" in timer  # the timer starts the service of the same name

    install = tmp_path / "srv"
    (install / ".venv" / "bin").mkdir(parents=True)
    (install / ".venv" / "bin" / "gonka-evidence").symlink_to(Path(sys.executable).with_name("gonka-evidence"))
    shipped = (ROOT / "gonka-evidence.toml").read_text()
    (install / "gonka-evidence.toml").write_text(shipped.replace('"data-samples/', f'"{DATA_SAMPLES_DIR}/'))

    # systemd: ExecStart in WorkingDirectory.
    settings = dict(line.split("=", 1) for line in service.splitlines() if "=" in line)
    workdir = settings["WorkingDirectory"].replace(PREFIX, str(install))
    argv = shlex.split(settings["ExecStart"].replace(PREFIX, str(install)))
    first = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, timeout=300, env=_clean_env())
    assert first.returncode == 0, first.stderr
    assert "new reports: epoch 2, epoch 3" in first.stdout
    assert (install / "out" / "epoch-3" / "report.html").exists()

    # cron: the command part of the line, run by sh as cron does.
    command = cron.split(None, 5)[5].replace(PREFIX, str(install))
    second = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=300, env=_clean_env())
    assert second.returncode == 0
    log = (install / "run.log").read_text()
    assert "reports: nothing new" in log and "warehouse: unchanged" in log
