"""Outputs cannot destroy inputs, and `query` is bounded: the warehouse, a source and anything inside
them are never an output; `bundle` replaces only its own unchanged bundles; a DuckDB file of another
application is never written; `query` reads --file only from a bounded regular file, stops at its
time limit, caps the terminal table and streams everything else."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from pipeline.core.paths import DATA_SAMPLES_DIR
from tests.factories import data_samples_warehouse
from tests.output.shared import bundle_computed_once

runner = CliRunner()
HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # the samples' focal host (data-samples/builds.toml)


def _digest(path: Path) -> str:
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    return hashlib.sha256(
        b"".join(
            p.relative_to(path).as_posix().encode() + p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
        )
    ).hexdigest()


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A directory holding a copy of the sample store and a warehouse built from it."""
    root = tmp_path_factory.mktemp("site")
    shutil.copytree(DATA_SAMPLES_DIR / "store", root / "store")
    data_samples_warehouse(root / "w.duckdb", root / "store")
    return root


def _one_line_error(result) -> str:
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.output, result.output
    return lines[0]


@pytest.mark.parametrize(
    "target",
    ["w.duckdb", "w.duckdb.wal", "store", "store/epoch_3.db", "store/new.csv", "link-to-warehouse", "hard-link"],
)
def test_query_never_writes_over_the_warehouse_or_into_a_source(site, target):
    warehouse = site / "w.duckdb"
    (site / "link-to-warehouse").unlink(missing_ok=True)
    (site / "link-to-warehouse").symlink_to(warehouse)
    (site / "hard-link").unlink(missing_ok=True)
    os.link(warehouse, site / "hard-link")
    before = {p: _digest(site / p) for p in ("w.duckdb", "store")}
    result = runner.invoke(app, ["query", "SELECT 1", "-w", str(warehouse), "-o", str(site / target)])
    assert "would overwrite the warehouse or a source" in _one_line_error(result)
    assert {p: _digest(site / p) for p in before} == before
    assert not (site / "store" / "new.csv").exists()


def test_a_query_output_is_written_whole_or_not_at_all(site, tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("kept\n")
    os.chmod(out, 0o640)
    failed = runner.invoke(
        app, ["query", "SELECT 1/0::INT AS x, error('boom')", "-w", str(site / "w.duckdb"), "-o", str(out)]
    )
    _one_line_error(failed)
    assert out.read_text() == "kept\n" and list(tmp_path.iterdir()) == [out]  # no staging file left
    ok = runner.invoke(
        app, ["query", "SELECT 42 AS x", "--format", "csv", "-w", str(site / "w.duckdb"), "-o", str(out)]
    )
    assert ok.exit_code == 0, ok.output
    assert out.read_text() == "x\n42\n" and stat.S_IMODE(out.stat().st_mode) == 0o640


@pytest.mark.parametrize("target, message", [("/dev/full", "No space left on device"), ("dir", "is a directory")])
def test_an_unwritable_output_is_one_line(site, tmp_path, target, message):
    (tmp_path / "dir").mkdir()
    path = target if target.startswith("/") else str(tmp_path / target)
    result = runner.invoke(app, ["query", "SELECT 1", "-w", str(site / "w.duckdb"), "-o", path])
    assert message in _one_line_error(result)


def test_a_named_pipe_without_reader_is_refused_not_waited_for(site, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    out = runner.invoke(app, ["query", "SELECT 1", "-w", str(site / "w.duckdb"), "-o", str(fifo)])
    assert "a named pipe that nothing reads" in _one_line_error(out)
    sql = runner.invoke(app, ["query", "-f", str(fifo), "-w", str(site / "w.duckdb")])
    assert "not a regular file" in _one_line_error(sql)


@pytest.mark.parametrize(
    "name, data, message", [("zero", None, "not a regular file"), ("bad.sql", b"SELECT '\xff'", "not UTF-8")]
)
def test_query_file_must_be_a_regular_utf8_file(site, tmp_path, name, data, message):
    path = Path("/dev/zero") if data is None else tmp_path / name
    if data is not None:
        path.write_bytes(data)
    result = runner.invoke(app, ["query", "-f", str(path), "-w", str(site / "w.duckdb")])
    assert message in _one_line_error(result)


def test_query_stops_at_its_time_limit_and_the_limit_can_be_lifted(site):
    slow = "SELECT count(*) AS n FROM range(100000000000)"
    stopped = runner.invoke(app, ["query", slow, "--timeout", "0.5", "-w", str(site / "w.duckdb")])
    assert "longer than its limit of 0.5 s" in _one_line_error(stopped)
    quick = runner.invoke(
        app, ["query", "SELECT 7 AS n", "--timeout", "0", "--format", "csv", "-w", str(site / "w.duckdb")]
    )
    assert quick.exit_code == 0 and quick.stdout == "n\n7\n"


@pytest.mark.parametrize("seconds", ["0.001", "0.02"])
def test_any_positive_time_limit_stops_the_query_whenever_its_timer_fires(site, seconds):
    """A limit that runs out before the query starts, or between two fetches, still stops it (an interrupt only
    lands while a statement runs: it is repeated until the query ends). Both queries end by themselves within
    seconds, so a lost interrupt fails the test rather than hanging it."""
    wh = str(site / "w.duckdb")
    error = f"error: the query ran longer than its limit of {float(seconds):g} s and was stopped"
    slow = "SELECT count(*) AS n FROM range(10000000000)"
    stopped = runner.invoke(app, ["query", slow, "--timeout", seconds, "-w", wh])
    assert _one_line_error(stopped).startswith(error)
    many = "SELECT i FROM range(5000000) t(i)"
    streamed = runner.invoke(app, ["query", many, "--format", "csv", "--timeout", seconds, "-w", wh])
    assert streamed.exit_code == 1  # the rows streamed before the stop are on stdout, the error alone on stderr
    assert len(streamed.stderr.splitlines()) == 1 and streamed.stderr.startswith(error)


@pytest.mark.parametrize("item", ["a b=1", "1x=2", "=3", "x-y=4"])
def test_a_param_key_must_be_a_name(site, item):
    result = runner.invoke(app, ["query", "SELECT 1", "--param", item, "-w", str(site / "w.duckdb")])
    assert "is not a parameter name" in _one_line_error(result)


def test_the_table_is_capped_and_other_formats_stream_every_row(site):
    table = runner.invoke(app, ["query", "SELECT i FROM range(10005) t(i)", "-w", str(site / "w.duckdb")])
    assert table.exit_code == 0
    assert "9,999" in table.stdout and "10,000" not in table.stdout
    assert "only the first 10,000 rows were written (--max-rows 0 writes them all)" in table.stderr
    capped = runner.invoke(
        app,
        ["query", "SELECT i FROM range(5) t(i)", "--max-rows", "2", "--format", "json", "-w", str(site / "w.duckdb")],
    )
    assert json.loads(capped.stdout) == [{"i": 0}, {"i": 1}] and "only the first 2 rows" in capped.stderr
    every = runner.invoke(
        app, ["query", "SELECT i FROM range(25000) t(i)", "--format", "csv", "-w", str(site / "w.duckdb")]
    )
    assert every.exit_code == 0 and every.stdout.splitlines()[-1] == "24999" and len(every.stdout.splitlines()) == 25001


def test_query_spills_only_into_a_bounded_directory_of_its_own(site):
    from pipeline.warehouse.database import open_sandboxed

    con = open_sandboxed(site / "w.duckdb")
    try:
        temp, limit = con.execute(
            "SELECT current_setting('temp_directory'), current_setting('max_temp_directory_size')"
        ).fetchone()
    finally:
        con.close()
    assert Path(temp).name.startswith("gonka-evidence-query-") and Path(temp).parent != site
    assert limit.endswith("GiB") and float(limit.split()[0]) < 4


def _replaces_only_its_own_unchanged_bundle(site: Path, tmp_path: Path) -> None:
    args = ["bundle", "--host", HOST, "--since", "2026-10-28", "--until", "2026-10-29", "-w", str(site / "w.duckdb")]
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "MANIFEST.json").write_text("{}")  # a file name anyone can have
    (theirs / "notes.txt").write_text("mine\n")
    refused = runner.invoke(app, [*args, "--out", str(theirs)])
    assert "not an unchanged gonka-evidence bundle" in _one_line_error(refused)
    assert sorted(p.name for p in theirs.iterdir()) == ["MANIFEST.json", "notes.txt"]

    ours = tmp_path / "ours"
    assert runner.invoke(app, [*args, "--out", str(ours)]).exit_code == 0
    first = _digest(ours)
    again = runner.invoke(app, [*args, "--out", str(ours)])
    assert again.exit_code == 0 and _digest(ours) == first  # replaced by the same bundle
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ours", "theirs"]  # no staging left beside it
    (ours / "tables" / "added-by-a-user.md").write_text("keep me\n")
    changed = runner.invoke(app, [*args, "--out", str(ours)])
    assert "not an unchanged gonka-evidence bundle" in _one_line_error(changed)
    assert (ours / "tables" / "added-by-a-user.md").read_text() == "keep me\n"
    inside = runner.invoke(app, [*args, "--out", str(site / "store" / "bundle")])
    assert "would overwrite the warehouse or a source" in _one_line_error(inside)


def test_bundle_writes_over_only_its_own_unchanged_bundle(site, tmp_path, monkeypatch):
    """The commands and checks of the test below, in-process, with the bundle computed once for all of them (the
    first `bundle` computes it, the others are given the same files): where `bundle` may write, not what it
    computes (tests/output/test_bundle.py checks that), is what these check."""
    computed = bundle_computed_once(monkeypatch)
    _replaces_only_its_own_unchanged_bundle(site, tmp_path)
    assert len(computed) == 1


# four whole bundles of a day (.ci/run runs it); stands in the default tier:
# tests/output/test_output_safety.py::test_bundle_writes_over_only_its_own_unchanged_bundle (the same commands
# and checks over one bundle computed once)
@pytest.mark.heavy
def test_bundle_replaces_only_its_own_unchanged_bundle(site, tmp_path):
    _replaces_only_its_own_unchanged_bundle(site, tmp_path)


def test_a_report_is_never_written_into_a_source(site):
    result = runner.invoke(
        app, ["report", "epoch", "3", "--host", HOST, "-w", str(site / "w.duckdb"), "--out", str(site / "store")]
    )
    assert "would overwrite the warehouse or a source" in _one_line_error(result)
    assert not (site / "store" / "epoch-3").exists()


def test_another_applications_duckdb_file_is_never_written(tmp_path):
    theirs = tmp_path / "theirs.duckdb"
    con = duckdb.connect(str(theirs))
    con.execute("CREATE TABLE orders (id INTEGER); INSERT INTO orders VALUES (1)")
    con.close()
    before = _digest(theirs)
    for args in (
        ["ingest", str(DATA_SAMPLES_DIR / "store")],
        ["ingest-logs", "--host", HOST, "--year", "2026", str(DATA_SAMPLES_DIR / "vllm" / "vllm.log")],
        ["query", "SELECT 1"],
        ["evidence", "epoch-summary", "--host", HOST],
    ):
        result = runner.invoke(app, [*args, "-w", str(theirs)])
        assert "a DuckDB file of another application" in _one_line_error(result), args
    assert _digest(theirs) == before
    con = duckdb.connect(str(theirs), read_only=True)
    assert [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()] == ["orders"]
    con.close()


def test_an_empty_duckdb_file_is_no_warehouse_to_read_but_one_to_fill(tmp_path, sqlite_copy):
    empty = tmp_path / "empty.duckdb"
    duckdb.connect(str(empty)).close()
    read = runner.invoke(app, ["query", "SELECT 1", "-w", str(empty)])
    assert "an empty DuckDB file, no warehouse yet" in _one_line_error(read)
    zero = tmp_path / "zero.duckdb"
    zero.write_bytes(b"")
    assert "cannot open the warehouse" in _one_line_error(runner.invoke(app, ["query", "SELECT 1", "-w", str(zero)]))
    # any store fills it: a generated copy of one epoch, a fraction of the samples' four
    filled = runner.invoke(app, ["ingest", str(sqlite_copy(last_epoch=1)), "-w", str(empty)])
    assert filled.exit_code == 0, filled.output


def test_a_file_of_another_kind_is_refused_before_duckdb_reads_it(tmp_path):
    """DuckDB would take a SQLite file for a database of its sqlite extension, and try to download that
    extension: a file that does not begin as a DuckDB database is refused first, read or written, untouched."""
    import sqlite3

    other = tmp_path / "copy.db"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE sessions (escrow_id TEXT)")
    con.close()
    text = tmp_path / "notes.duckdb"
    text.write_text("a warehouse, or so the name says\n")
    for path in (other, text):
        before = _digest(path)
        for args in (["query", "SELECT 1"], ["ingest", str(DATA_SAMPLES_DIR / "store")]):
            error = _one_line_error(runner.invoke(app, [*args, "-w", str(path)]))
            assert error == f"error: {path}: not a DuckDB database file, not a warehouse file"
        assert _digest(path) == before


def test_a_regular_file_that_cannot_be_read_is_said_so_not_cannot_write():
    """/proc/self/mem is a regular file whose first bytes cannot be read: `query` said "cannot write"."""
    for args in (["query", "SELECT 1"], ["ingest", str(DATA_SAMPLES_DIR / "store")]):
        error = _one_line_error(runner.invoke(app, [*args, "-w", "/proc/self/mem"]))
        assert error == "error: /proc/self/mem: cannot be read (Input/output error)"
