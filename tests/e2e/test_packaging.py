"""The package stands on its own: a wheel carries the SQL, the report templates and the samples, and
an install from it works in an empty directory with no checkout in view."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
FOCAL_HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # the samples' focal host (data-samples/builds.toml)
runner = CliRunner()


def test_query_list_fails_when_it_finds_no_named_queries(tmp_path, monkeypatch):
    import pipeline.output.query.execute

    monkeypatch.setattr(pipeline.output.query.execute, "QUERIES_DIR", tmp_path)
    result = runner.invoke(app, ["query", "--list"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert result.stderr.startswith(f"error: {tmp_path}: no named queries found"), result.stderr


def _run(argv: list, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"{argv}: {result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, ROOT], cwd=dist, env=dict(os.environ))
    (found,) = dist.glob("gonka_evidence-*.whl")
    return found


@pytest.mark.heavy  # no default-tier stand-in: it builds the wheel
def test_the_wheel_carries_the_assets_and_no_local_debris(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for asset in [
        "sql/queries/epoch_summary.sql",
        "sql/warehouse/schema/00_core.sql",
        "reports/epoch_report.md.j2",
        "data-samples/builds.toml",
        "data-samples/store/_meta.db",
        "data-samples/vllm/vllm.log",
        "data-samples/release-lines/v0.2.13/store/epoch_2.db",
        "data-samples/README.md",
    ]:
        assert f"pipeline/_data/{asset}" in names, asset
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert not [n for n in names if n.endswith(("-wal", "-shm", "-journal", ".pyc"))]


@pytest.mark.heavy  # no default-tier stand-in: it installs the wheel into a fresh venv
def test_an_installed_wheel_works_from_an_empty_directory_without_the_checkout(wheel, tmp_path):
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp_path, env=dict(os.environ))
    python = venv / "bin" / "python"
    _run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", wheel],
        cwd=tmp_path,
        env=dict(os.environ),
    )
    # The dependencies come from this test's environment (appended to sys.path by a .pth line, so its own
    # .pth files, among them the editable install of this checkout, are not run); .ci/run installs them afresh.
    site = Path(
        _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path, {}).stdout.strip()
    )
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GONKA_EVIDENCE_", "PYTHON", "VIRTUAL_ENV"))}
    cli = venv / "bin" / "gonka-evidence"
    where = _run(
        [python, "-c", "import sys, pipeline; print(pipeline.__file__); print(*sys.path, sep='\\n')"], empty, env
    ).stdout.splitlines()
    assert where[0] == str(site / "pipeline" / "__init__.py"), where
    assert str(ROOT) not in where[1:], where  # ("" is the empty working directory of `python -c`)

    run = _run([cli, "run"], empty, env)
    assert "config: data-samples" in run.stdout and "new reports: epoch 2, epoch 3 in out" in run.stdout
    assert "ingested vllm logs " in run.stdout  # the bundled vLLM log, with its year, from the installed samples
    stability = (empty / "out" / "epoch-3" / "report.md").read_text().split(". Engine stability\n", 1)[1]
    assert "| V2 + DSpark, raw_logprobs | 44.00 | 1 | 1 | 1 |" in stability.split("\n## ", 1)[0]
    assert sorted(p.name for p in empty.iterdir()) == ["out", "warehouse.duckdb"]  # no lock, no copy left
    listing = _run([cli, "query", "--list"], empty, env).stdout
    assert "closed_epochs: Per epoch" in listing and "epoch_summary:" in listing
    votes = _run([cli, "evidence", "votes-by-build", "--host", FOCAL_HOST, "--epoch", "3"], empty, env).stdout
    assert "| V2 + DSpark, raw_logprobs | validation |" in votes
    _run([cli, "report", "epoch", "3", "--out", "again"], empty, env)
    tables = {p.name: p.read_text() for p in (empty / "out" / "epoch-3" / "tables").iterdir()}
    assert tables and tables == {p.name: p.read_text() for p in (empty / "again" / "epoch-3" / "tables").iterdir()}
    assert (empty / "again" / "epoch-3" / "report.html").exists()
    focal = _run([python, "-m", "pipeline.samples", "generated"], empty, env).stdout.strip()
    assert focal == FOCAL_HOST and (empty / "generated" / "store" / "_meta.db").exists()
