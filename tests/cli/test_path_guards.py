"""Each path option that blocked, overwrote an input or crashed: now a one-line refusal, nothing changed.

Special files as inputs (they blocked for ever), outputs onto the warehouse or a source, warehouses and
lakes of another release or of nobody's, and a second writer of a lake.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from tests.cli.one_section import one_section_reports
from tests.helpers import ingest

runner = CliRunner()


def _one_line_error(result) -> str:
    output = result.stderr if hasattr(result, "stderr") else result.output
    assert "Traceback" not in output, output
    lines = [line for line in output.splitlines() if line.strip()]
    code = result.returncode if hasattr(result, "returncode") else result.exit_code
    assert code == 1 and len(lines) == 1 and lines[0].startswith("error: "), (code, output)
    return lines[0]


def _cli(*args: str) -> subprocess.CompletedProcess:
    """In a subprocess with a time limit: on the code before, these blocked for ever."""
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    for p in [path, *sorted(path.rglob("*"))] if path.is_dir() else [path]:
        h.update(str(p).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def ingested(tmp_path_factory, timeline) -> tuple[Path, Path]:
    """A store and the warehouse it was ingested into."""
    root = tmp_path_factory.mktemp("ingested")
    store = root / "store"
    timeline.copy(last_epoch=2).write_sqlite(store)
    warehouse = root / "warehouse.duckdb"
    ingest(warehouse, store)
    return store, warehouse


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_builds_toml_that_is_a_fifo_or_dev_zero_is_refused(tmp_path, kind):
    path = tmp_path / "builds.toml"
    os.mkfifo(path) if kind == "fifo" else path.symlink_to("/dev/zero")
    line = _one_line_error(_cli("builds", str(path), "-w", str(tmp_path / "w.duckdb")))
    assert f"error: {path}: not a regular file" in line
    assert not (tmp_path / "w.duckdb").exists()


@pytest.mark.parametrize("command", [["query", "SELECT 1"], ["ingest-json", "x.json"]])
def test_a_warehouse_that_is_a_fifo_is_refused(tmp_path, command):
    (tmp_path / "x.json").write_text("{}")
    os.mkfifo(tmp_path / "w.duckdb")
    args = [a if a != "x.json" else str(tmp_path / a) for a in command]
    line = _one_line_error(_cli(*args, "-w", str(tmp_path / "w.duckdb")))
    assert "a FIFO, not a warehouse file" in line


def test_a_config_file_whose_warehouse_is_a_fifo_is_refused(tmp_path):
    os.mkfifo(tmp_path / "w.duckdb")
    (tmp_path / "c.toml").write_text('warehouse = "w.duckdb"\n')
    line = _one_line_error(_cli("query", "SELECT 1", "--config", str(tmp_path / "c.toml")))
    assert "a FIFO, not a warehouse file" in line


def _special(path: Path, kind: str) -> None:
    """A path that cannot be read as an input: a FIFO, a device, a symlink loop, or nothing."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "loop":
        path.symlink_to(path.name)
    # "missing": nothing there


SPECIAL = {
    "fifo": "not a regular file (a FIFO)",
    "device": "not a regular file (a character device)",
    "loop": "a symlink loop",
    "missing": "no such",
}


@pytest.mark.parametrize("kind", sorted(SPECIAL))
def test_a_config_source_that_cannot_be_read_is_one_line_naming_its_key(tmp_path, kind):
    _special(tmp_path / "src", kind)
    config = tmp_path / "c.toml"
    config.write_text('warehouse = "wh.duckdb"\noutput = "out"\n[[sources]]\npath = "src"\nkind = "json"\n')
    line = _one_line_error(_cli("run", "--config", str(config)))
    assert f"{config}: [[sources]] entry 1 path {tmp_path / 'src'}: {SPECIAL[kind]}" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["c.toml", *(["src"] if kind != "missing" else [])])


@pytest.mark.parametrize("kind", sorted(SPECIAL))
def test_a_config_builds_file_that_cannot_be_read_is_one_line_naming_its_key(tmp_path, kind):
    _special(tmp_path / "builds.toml", kind)
    config = tmp_path / "c.toml"
    config.write_text('warehouse = "wh.duckdb"\noutput = "out"\nbuilds = "builds.toml"\n')
    line = _one_line_error(_cli("run", "--config", str(config)))
    expected = "no such builds file" if kind == "missing" else SPECIAL[kind]
    assert f"{config}: builds {tmp_path / 'builds.toml'}: {expected}" in line, line
    assert not (tmp_path / "wh.duckdb").exists() and not (tmp_path / "out").exists()


def test_builds_infer_never_writes_over_the_warehouse_or_a_store_file(ingested):
    store, warehouse = ingested
    for target in (warehouse, store / "_meta.db"):
        before = _digest(target)
        result = runner.invoke(app, ["builds", "infer", "--out", str(target), "-w", str(warehouse)])
        assert "would overwrite the warehouse or a source" in _one_line_error(result)
        assert _digest(target) == before


def test_query_output_that_is_a_hard_link_of_a_store_file_is_refused(ingested, tmp_path):
    store, warehouse = ingested
    os.link(store / "_meta.db", tmp_path / "meta-link.db")
    result = runner.invoke(app, ["query", "SELECT 1", "-w", str(warehouse), "-o", str(tmp_path / "meta-link.db")])
    assert "would overwrite the warehouse or a source" in _one_line_error(result)


def test_a_warehouse_inside_the_store_being_ingested_is_refused(ingested):
    store, _ = ingested
    before = _digest(store)
    result = runner.invoke(app, ["ingest", str(store), "-w", str(store / "w.duckdb")])
    assert "--warehouse" in _one_line_error(result)
    assert _digest(store) == before


def test_network_ingest_lake_never_lands_in_a_store_a_file_or_a_foreign_directory(ingested, tmp_path):
    store, _ = ingested
    (tmp_path / "file").write_text("mine\n")
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "notes.txt").write_text("theirs\n")
    for lake, expected in (
        (store, "would overwrite"),
        (store / "lake", "would overwrite"),
        (tmp_path / "file", "not a lake directory"),
        (tmp_path / "theirs", "is not a lake"),
    ):
        before = _digest(store), _digest(tmp_path)
        result = runner.invoke(app, ["network", "ingest", str(store), "--lake", str(lake), "--workers", "0"])
        assert expected in _one_line_error(result)
        assert (_digest(store), _digest(tmp_path)) == before


def test_report_and_bundle_out_that_is_a_file_is_one_line(ingested, tmp_path):
    _, warehouse = ingested
    (tmp_path / "file").write_text("mine\n")
    for command in (["report", "epoch", "1", "--host", "x"], ["bundle", "--host", "x"]):
        result = runner.invoke(app, [*command, "--out", str(tmp_path / "file"), "-w", str(warehouse)])
        assert "a regular file, not a directory" in _one_line_error(result)
    assert (tmp_path / "file").read_text() == "mine\n"


# a whole report; stands in the default tier:
# tests/cli/test_path_guards.py::test_a_report_epoch_directory_that_is_a_file_is_left_alone
@pytest.mark.heavy
def test_a_report_epoch_directory_that_is_a_file_is_left_alone_by_a_whole_report(ingested, tmp_path):
    """The test below, its report of every section."""
    _epoch_directory_that_is_a_file(ingested, tmp_path)


def test_a_report_epoch_directory_that_is_a_file_is_left_alone(ingested, tmp_path, monkeypatch):
    """Its report of one section (tests/cli/one_section.py): where a report may be written is the same."""
    one_section_reports(monkeypatch)
    _epoch_directory_that_is_a_file(ingested, tmp_path)


def _epoch_directory_that_is_a_file(ingested: tuple[Path, Path], tmp_path: Path) -> None:
    _, warehouse = ingested
    out = tmp_path / "out"
    out.mkdir()
    (out / "epoch-1").write_text("mine\n")
    import duckdb

    with duckdb.connect(str(warehouse), read_only=True) as con:  # a host the warehouse holds: not refused as one
        host = con.execute("SELECT min(address) FROM escrow_slots").fetchall()[0][0]
    result = runner.invoke(app, ["report", "epoch", "1", "--host", host, "--out", str(out), "-w", str(warehouse)])
    assert "epoch-1" in _one_line_error(result)
    assert (out / "epoch-1").read_text() == "mine\n"


# two whole reports; stands in the default tier:
# tests/cli/test_path_guards.py::test_report_out_is_marked_as_the_tools_and_a_foreign_directory_is_refused
@pytest.mark.heavy
def test_report_out_of_a_whole_report_is_marked_as_the_tools_and_a_foreign_directory_is_refused(ingested, tmp_path):
    """The test below, its reports of every section."""
    _report_out_is_the_tools(ingested, tmp_path)


def test_report_out_is_marked_as_the_tools_and_a_foreign_directory_is_refused(ingested, tmp_path, monkeypatch):
    """Its reports of one section (tests/cli/one_section.py): where a report may be written is the same."""
    one_section_reports(monkeypatch)
    _report_out_is_the_tools(ingested, tmp_path)


def _report_out_is_the_tools(ingested: tuple[Path, Path], tmp_path: Path) -> None:
    from pipeline.core.roles import OUTPUT_MARKER

    _, warehouse = ingested
    with duckdb.connect(str(warehouse), read_only=True) as con:
        host = con.execute("SELECT min(address) FROM escrow_slots").fetchall()[0][0]
    report = ["report", "epoch", "1", "--host", host, "-w", str(warehouse), "--out"]
    out = tmp_path / "out"
    assert runner.invoke(app, [*report, str(out)]).exit_code == 0
    assert (out / OUTPUT_MARKER).is_file() and (out / "epoch-1" / "report.md").is_file()
    # The output of an earlier report (marked) stays the tool's, even with a file the user put beside it.
    (out / "notes.txt").write_text("mine\n")
    result = runner.invoke(app, [*report, str(out)])
    assert result.exit_code == 0, result.output
    # A non-empty directory the tool did not write is refused, left as it was.
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine\n")
    before = _digest(foreign)
    assert "a directory gonka-evidence did not write" in _one_line_error(runner.invoke(app, [*report, str(foreign)]))
    assert _digest(foreign) == before


def _warehouse_with_meta(path: Path, version: str, extra: str | None = None) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE warehouse_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        con.execute("INSERT INTO warehouse_meta VALUES ('schema_version', ?)", [version])
        if extra:
            con.execute(extra)


@pytest.mark.parametrize(
    ("version", "extra", "expected"),
    [
        ("99", None, "written by a newer release (schema version 99); this release reads schema version 1"),
        ("one", None, "schema version 'one' is not a number; this release reads schema version 1"),
        ("1", "CREATE TABLE ingest_runs (theirs INTEGER)", "not a gonka-evidence warehouse of this release"),
    ],
)
def test_a_warehouse_of_another_release_or_not_ours_is_never_written(tmp_path, version, extra, expected):
    warehouse = tmp_path / "w.duckdb"
    _warehouse_with_meta(warehouse, version, extra)
    before = _digest(warehouse)
    (tmp_path / "r.json").write_text("{}")
    commands = [["ingest-json", str(tmp_path / "r.json")]]
    if "schema version" in expected:  # a newer release's warehouse is not read either
        commands.append(["query", "SELECT 1"])
    for command in commands:
        result = runner.invoke(app, [*command, "-w", str(warehouse)])
        assert expected in _one_line_error(result)
    assert _digest(warehouse) == before


def test_a_lake_of_a_newer_format_is_refused(tmp_path):
    from pipeline.network.lake import Lake, LakeError

    Lake(tmp_path / "lake", create=True)
    (tmp_path / "lake" / "_lake.json").write_text('{"format": 9, "buckets": 16}')
    with pytest.raises(LakeError, match="written by a newer release \\(lake format 9\\); this release uses format 1"):
        Lake(tmp_path / "lake")


def test_a_second_lake_writer_gets_one_line_naming_the_first(ingested, tmp_path):
    from pipeline.network.lake import Lake

    store, _ = ingested
    lake = Lake(tmp_path / "lake", create=True)
    before = _digest(lake.root)
    with lake.writer():  # the first writer, as a running `network ingest` holds it
        result = runner.invoke(app, ["network", "ingest", str(store), "--lake", str(lake.root), "--workers", "0"])
        line = _one_line_error(result)
    assert "the lake is in use by another gonka-evidence writer (pid " in line
    assert f"pid {os.getpid()}" in line
    assert not (lake.root / "_copies").exists()  # the second wrote nothing
    (lake.root / "_lake.lock").unlink()
    assert _digest(lake.root) == before


def test_the_library_refuses_a_warehouse_or_a_lake_inside_the_copy(ingested):
    from pipeline import api
    from pipeline.core.roles import PathError

    store, _ = ingested
    before = _digest(store)
    with pytest.raises(PathError, match="would overwrite the warehouse or a source"):
        api.ingest(str(store), store / "w.duckdb")
    with pytest.raises(PathError, match="would overwrite the warehouse or a source"):
        api.network_ingest([str(store)], store / "lake", workers=0)
    assert _digest(store) == before
