"""`gonka-evidence init` writes a commented run configuration that the run's own loader reads back as
given, refuses a malformed address, and never overwrites a file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.core.paths import DATA_SAMPLES_DIR
from pipeline.jobs.config import load_config
from tests.helpers import Done, cli_in

FOCAL = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # data-samples/builds.toml focal_host


def cli(*args: str, cwd: Path) -> Done:
    """In-process: what a command writes, says and exits with, no property of a process of its own."""
    return cli_in(cwd, *args)


def _one_line_error(done: Done) -> str:
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


@pytest.fixture
def site(tmp_path) -> Path:
    """A working directory with a store copy, a vLLM log directory and a builds file, as a host has them."""
    shutil.copytree(DATA_SAMPLES_DIR / "store", tmp_path / "copies" / "store")
    shutil.copytree(DATA_SAMPLES_DIR / "vllm", tmp_path / "logs" / "vllm")
    shutil.copy(DATA_SAMPLES_DIR / "builds.toml", tmp_path / "builds.toml")
    return tmp_path


def test_init_writes_a_config_the_loader_reads_back(site):
    args = ["--source", "copies/store", "--source", "postgresql://reader@db-copy/devshard"]
    done = cli("init", "--host", FOCAL, *args, "--vllm", "logs/vllm", "--builds", "builds.toml", cwd=site)
    assert done.returncode == 0, done.stderr
    assert "wrote gonka-evidence.toml; next: gonka-evidence run --config gonka-evidence.toml" in done.stderr
    path = site / "gonka-evidence.toml"
    cfg = load_config(path)
    assert cfg.host == FOCAL
    assert cfg.builds == site / "builds.toml"
    assert cfg.warehouse == site / "warehouse.duckdb" and cfg.output == site / "out"
    assert cfg.sources == [
        {"path": str(site / "copies" / "store"), "kind": "store"},
        {"url": "postgresql://reader@db-copy/devshard"},
        {"path": str(site / "logs" / "vllm"), "kind": "vllm"},
    ]
    text = path.read_text()
    # Commented: every key line says what it is, and the file points at the quickstart's next step.
    keys = [line for line in text.splitlines() if line and not line.startswith(("#", " ", "["))]
    assert keys and all("#" in line for line in keys), keys
    assert "gonka-evidence run --config FILE" in text and "# year = " in text


def test_init_in_another_directory_writes_paths_relative_to_the_file(site):
    (site / "etc").mkdir()
    done = cli("init", "--host", FOCAL, "--source", "copies/store", "--config", "etc/host.toml", cwd=site)
    assert done.returncode == 0, done.stderr
    assert 'path  = "../copies/store"' in (site / "etc" / "host.toml").read_text()
    cfg = load_config(site / "etc" / "host.toml")
    assert Path(cfg.sources[0]["path"]).resolve() == (site / "copies" / "store").resolve()
    assert cfg.builds is None  # a commented placeholder only


def test_init_with_only_an_address_writes_placeholders_and_a_config_that_loads(tmp_path):
    done = cli("init", "--host", FOCAL, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    cfg = load_config(tmp_path / "gonka-evidence.toml")
    assert cfg.host == FOCAL and cfg.sources == [] and cfg.builds is None
    text = (tmp_path / "gonka-evidence.toml").read_text()
    assert "# [[sources]]" in text and "# builds     =" in text


def test_init_never_overwrites(site):
    path = site / "gonka-evidence.toml"
    path.write_text("# mine\n")
    line = _one_line_error(cli("init", "--host", FOCAL, cwd=site))
    assert line == (
        "error: gonka-evidence.toml already exists: init never overwrites a configuration (give --config NEW.toml)"
    )
    assert path.read_text() == "# mine\n"
    (site / "conf").mkdir()  # a directory at the path is refused too (by the output-file role, before init runs)
    line = _one_line_error(cli("init", "--host", FOCAL, "--config", "conf", cwd=site))
    assert line == "error: --config conf: is a directory; give a file name"


def test_init_refuses_a_malformed_address_or_a_source_it_cannot_read(site):
    typo = FOCAL[:-1] + ("q" if FOCAL[-1] != "q" else "p")
    line = _one_line_error(cli("init", "--host", typo, cwd=site))
    assert line == f"error: --host '{typo}' is not a gonka1… address: it fails its bech32 checksum (a typo?)"
    line = _one_line_error(cli("init", "--host", FOCAL, "--source", "nowhere", cwd=site))
    assert line == "error: --source nowhere: no such directory"
    line = _one_line_error(cli("init", "--host", FOCAL, "--source", "logs", cwd=site))
    assert line.startswith("error: --source logs: cannot tell what this source is")
    assert not (site / "gonka-evidence.toml").exists()  # a refused init writes nothing


# a whole run; stands in the default tier: tests/jobs/test_init.py::test_init_writes_a_config_the_loader_reads_back
@pytest.mark.heavy
def test_a_run_on_the_written_config_reports_the_host(site):
    done = cli("init", "--host", FOCAL, "--source", "copies/store", "--builds", "builds.toml", cwd=site)
    assert done.returncode == 0, done.stderr
    run = cli("run", "--config", "gonka-evidence.toml", cwd=site)
    assert run.returncode == 0, run.stderr
    assert "new reports: epoch 2, epoch 3 in out" in run.stdout + run.stderr
    assert f"# Epoch 3 report: {FOCAL}" in (site / "out" / "epoch-3" / "report.md").read_text()
