"""`gonka-evidence bundle` and `verify`: every table, chart and report file with a manifest; verify
passes on an untouched bundle and names each changed, missing or unexpected file."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from pipeline.core.digest import tree_digest
from pipeline.core.paths import DATA_SAMPLES_DIR
from pipeline.evidence import EVIDENCE
from tests.output.shared import samples_bundle

runner = CliRunner()
HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # focal host of data-samples/


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A working directory with ./warehouse.duckdb (data-samples/ and its builds) and ./bundle of epoch 3,
    shared with test_same_bytes.py (read only: tests tamper with copies)."""
    return samples_bundle(tmp_path_factory)


def _run(cwd: Path, args: list[str]):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return runner.invoke(app, args)
    finally:
        os.chdir(old)


@pytest.fixture
def bundle(workdir, tmp_path) -> Path:
    """A private copy of the bundle, free to be tampered with."""
    copy = tmp_path / "bundle"
    shutil.copytree(workdir / "bundle", copy)
    return copy


def test_the_manifest_lists_every_file_with_its_sha256_command_and_the_inputs(workdir):
    root = workdir / "bundle"
    manifest = json.loads((root / "MANIFEST.json").read_text())
    files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} - {"MANIFEST.json"}
    listed = {f["path"]: f for f in manifest["files"]}
    assert set(listed) == files
    for path, entry in listed.items():
        assert entry["sha256"] == hashlib.sha256((root / path).read_bytes()).hexdigest(), path
        assert entry["command"].startswith("gonka-evidence "), path
    computed = {name for name in EVIDENCE} - {s["table"] for s in manifest["skipped"]}
    assert {f"tables/{n}.{x}" for n in computed for x in ("md", "csv", "json")} <= files
    assert "report/report.md" in files and "report/report.html" in files
    assert any(re.fullmatch(r"charts/.+\.svg", p) for p in files)
    assert listed["tables/votes-by-build.json"]["command"] == (
        f"gonka-evidence evidence votes-by-build --host {HOST} --epoch 3 --format json"
    )
    assert manifest["pipeline_version"] and manifest["window"] == {"epoch": 3}
    [source] = manifest["inputs"]
    assert source["label"] == "data-samples" and source["input_digest"] == tree_digest(DATA_SAMPLES_DIR / "store")


# a whole recomputation for the verdict "all match", which two default-tier verifies also give;
# stands in the default tier: tests/output/test_bundle.py::test_a_time_window_bundle_has_the_tables_and_no_report
# (an untouched bundle verifies, exit 0), tests/output/test_same_bytes.py::test_verify_compares_evidence_not_labels
# (this epoch-3 bundle verifies, "all … match", against a warehouse ingested afresh)
@pytest.mark.heavy
def test_verify_passes_on_an_untouched_bundle(workdir, bundle):
    result = _run(workdir, ["verify", str(bundle)])
    assert result.exit_code == 0, result.output
    assert "all " in result.output and "files match" in result.output


@pytest.fixture(scope="module")
def tampered(workdir, tmp_path_factory):
    """`verify` of a copy of the bundle with one number changed, one file deleted and one added: one verify for
    the tests below, each of which checks its files and that no other is named. Its recomputation is given the
    files `bundle` computed from this same warehouse (the untouched bundle): these check the comparison; a whole
    recomputation that matches is checked by test_a_time_window_bundle_has_the_tables_and_no_report and
    tests/output/test_same_bytes.py::test_verify_compares_evidence_not_labels."""
    import pipeline.output.bundle

    untouched = workdir / "bundle"
    computed = {p.relative_to(untouched).as_posix(): p.read_bytes() for p in untouched.rglob("*") if p.is_file()}
    bundle = tmp_path_factory.mktemp("tampered") / "bundle"
    shutil.copytree(workdir / "bundle", bundle)
    csv = bundle / "tables" / "votes-by-build.csv"
    header, first, rest = csv.read_text().split("\n", 2)
    changed = re.sub(r"(?<=,)(\d+)(?=,|$)", lambda m: str(int(m.group(1)) + 1), first, count=1)
    assert changed != first
    csv.write_text(f"{header}\n{changed}\n{rest}")
    (bundle / "report" / "report.md").unlink()
    (bundle / "tables" / "extra.md").write_text("not from the pipeline\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline.output.bundle, "build_bundle", lambda con, request: dict(computed))
        result = _run(workdir, ["verify", str(bundle)])
    statuses = dict((path, status) for status, path in re.findall(r"^ *(\w+)  (\S+)$", result.output, flags=re.M))
    return result, {path: status for path, status in statuses.items() if status != "ok"}


def test_verify_names_the_file_in_which_one_number_changed(tampered):
    result, flagged = tampered
    assert result.exit_code == 3  # a check that found a problem, not a user error (docs/cli.md)
    assert flagged["tables/votes-by-build.csv"] == "differs" and "tables/votes-by-build.csv (differs)" in result.output
    assert re.search(r"^\s+ok  tables/votes-by-build\.md$", result.output, flags=re.M)


def test_verify_names_a_missing_and_an_unexpected_file(tampered):
    result, flagged = tampered
    assert result.exit_code == 3  # a check that found a problem, not a user error (docs/cli.md)
    assert "report/report.md (missing)" in result.output and "tables/extra.md (unexpected)" in result.output
    # Only the three files tampered with are named: the summary counts them, and every other line says ok.
    assert "3 of " in result.output and flagged == {
        "report/report.md": "missing",
        "tables/extra.md": "unexpected",
        "tables/votes-by-build.csv": "differs",
    }


def test_verify_of_a_directory_without_manifest_is_a_one_line_error(workdir, tmp_path):
    result = _run(workdir, ["verify", str(tmp_path)])
    assert result.exit_code == 1 and "no MANIFEST.json" in result.output and "Traceback" not in result.output


def test_a_time_window_bundle_has_the_tables_and_no_report(workdir, tmp_path):
    result = _run(
        workdir,
        ["bundle", "--host", HOST, "--since", "2026-10-28", "--until", "2026-10-29", "--out", str(tmp_path / "w")],
    )
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "w" / "MANIFEST.json").read_text())
    assert manifest["window"] == {"since": "2026-10-28T00:00:00Z", "until": "2026-10-29T00:00:00Z"}
    paths = [f["path"] for f in manifest["files"]]
    assert "tables/votes-by-build.md" in paths and not any(p.startswith("report/") for p in paths)
    assert _run(workdir, ["verify", str(tmp_path / "w")]).exit_code == 0
