"""The Python API (`from pipeline import open_warehouse`) on a sample warehouse, and that the
`evidence` and `query` commands print exactly what it returns."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

from pipeline import open_warehouse
from pipeline.core.address import sample_address
from pipeline.evidence import EvidenceError
from pipeline.output.query.execute import QueryError
from pipeline.warehouse.database import WarehouseError
from tests.cli.copy4_warehouse import copy4_warehouse
from tests.helpers import Done, cli_in
from tests.output.shared import bundled_run

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, cwd: Path = ROOT) -> Done:
    """`gonka-evidence ARGS` in-process, without the GONKA_EVIDENCE_* variables: what it prints."""
    return cli_in(cwd, *args, env={k: None for k in os.environ if k.startswith("GONKA_EVIDENCE_")})


@pytest.fixture(scope="module")
def warehouse(request, timeline) -> Path:
    return copy4_warehouse(request, timeline)  # a copy of the one built in this process


@pytest.fixture(scope="module")
def HOST(timeline) -> str:
    return timeline.focal_host


@pytest.fixture(autouse=True)
def no_env_defaults(monkeypatch):
    for name in ("GONKA_EVIDENCE_WAREHOUSE", "GONKA_EVIDENCE_HOST"):
        monkeypatch.delenv(name, raising=False)


def test_evidence_has_frame_stats_provenance_and_renders_as_the_cli_prints_it(warehouse, HOST):
    with open_warehouse(warehouse) as wh:
        ev = wh.evidence("peer-invalidation", host=HOST, epoch=3)
        by_escrow = wh.evidence("peer-invalidation", host=HOST, epoch=3, by_escrow=True)
    assert isinstance(ev.frame, pl.DataFrame) and ev.frame.height > 0 and ev.name == "peer-invalidation"
    assert ev.stats and ev.provenance.window == {"epoch": 3}
    assert (
        ev.provenance.command
        == f"gonka-evidence evidence peer-invalidation --host {HOST} --epoch 3 --warehouse {warehouse}"
    )
    assert by_escrow.provenance.command.endswith("--by-escrow --warehouse " + str(warehouse))
    assert by_escrow.frame.height > ev.frame.height  # the per-escrow rows follow the pooled ones
    assert json.loads(ev.to_json())["evidence"] == "peer-invalidation"
    assert ev.to_csv().splitlines()[0].split(",") == ev.frame.columns
    # The derived command is the command line that reproduces the table: run it, get the same bytes.
    markdown = cli(*ev.provenance.command.split()[1:])
    assert (markdown.returncode, markdown.stdout) == (0, ev.to_markdown() + "\n"), markdown.stderr
    as_json = cli(*ev.provenance.command.split()[1:], "--format", "json")  # its footer names --format json
    assert as_json.stdout.replace(" --format json", "") == ev.to_json() + "\n"


def test_query_returns_a_polars_frame_with_bound_parameters_in_the_sandbox(warehouse):
    with open_warehouse(warehouse) as wh:
        counts = wh.query(
            "SELECT epoch_id, count(*) AS n FROM escrows WHERE epoch_id >= $first GROUP BY ALL ORDER BY 1", first=3
        )
        closure = wh.query("closed_epochs", lag_seconds=21600)  # a named query, as on the command line
        with pytest.raises(QueryError, match="missing --param for: first"):
            wh.query("SELECT $first")
        with pytest.raises(QueryError, match="(?i)read-only"):
            wh.query("CREATE TABLE x AS SELECT 1")
        with pytest.raises(QueryError, match="(?i)disabled|permission"):
            wh.query("SELECT * FROM read_text('/etc/hostname')")
        with pytest.raises(QueryError, match="read-only here: SELECT only \\(this is a SET statement\\)"):
            wh.query("SET enable_external_access = true")  # the engine's own lock: tests/output/test_query_sandbox.py
    assert counts["epoch_id"].to_list() == [3, 4] and counts["n"].min() > 0
    assert closure.columns[:2] == ["epoch_id", "escrows"] and closure["epoch_id"].to_list() == [2, 3, 4]
    csv = cli(
        "query",
        "SELECT epoch_id, count(*) AS n FROM escrows WHERE epoch_id >= $first GROUP BY ALL ORDER BY 1",
        "--param",
        "first=3",
        "--format",
        "csv",
        "-w",
        str(warehouse),
    )
    assert csv.stdout == counts.write_csv()


def test_the_default_warehouse_and_host_are_the_ones_the_cli_uses(tmp_path, warehouse, HOST, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(WarehouseError, match="no warehouse here yet"):
        open_warehouse()
    (tmp_path / "gonka-evidence.toml").write_text(f'warehouse = "{warehouse}"\nhost = "{HOST}"\n')
    with open_warehouse() as wh:
        assert (wh.path, wh.host) == (warehouse, HOST)
        ev = wh.evidence("votes-by-build", epoch=3)  # the config's host
    assert ev.provenance.command == f"gonka-evidence evidence votes-by-build --host {HOST} --epoch 3"
    assert (
        cli("evidence", "votes-by-build", "--host", HOST, "--epoch", "3", cwd=tmp_path).stdout
        == ev.to_markdown() + "\n"
    )
    other = sample_address("0ther")  # well-formed: the environment's host is checked like the file's
    monkeypatch.setenv("GONKA_EVIDENCE_HOST", other)
    with open_warehouse() as wh:
        assert wh.host == other
        with pytest.raises(EvidenceError, match="--compare is not available for votes-by-build"):
            wh.evidence("votes-by-build", host=HOST, compare=2)
        with pytest.raises(EvidenceError, match="unknown evidence table 'nope'"):
            wh.evidence("nope")


def test_a_closed_warehouse_says_so(warehouse):
    wh = open_warehouse(warehouse)
    wh.close()
    with pytest.raises(QueryError, match="(?i)closed"):
        wh.query("SELECT 1")


def test_importing_the_api_loads_no_engine():
    probe = (
        "import sys; from pipeline import open_warehouse, Warehouse; "
        "print(sorted(m for m in ('polars', 'duckdb', 'scipy', 'pyarrow') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert (result.returncode, result.stdout) == (0, "[]\n"), result.stderr


def test_compute_derives_the_reproducing_command_when_none_is_given(warehouse, HOST):
    # `pipeline.evidence.compute` is the library call under the API: once it required `command`.
    from pipeline.evidence import compute
    from pipeline.warehouse.database import open_sandboxed

    con = open_sandboxed(warehouse)
    try:
        result = compute("peer-invalidation", con, host=HOST, epoch=3, by_escrow=True)
        windowed = compute(
            "votes-by-build",
            con,
            host=HOST,
            since="2026-10-23",
            until=dt.datetime(2026, 10, 24, 12, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        )
    finally:
        con.close()
    assert result.provenance.command == f"gonka-evidence evidence peer-invalidation --host {HOST} --epoch 3 --by-escrow"
    assert windowed.provenance.command == (
        f"gonka-evidence evidence votes-by-build --host {HOST} --since 2026-10-23 --until 2026-10-24T10:00:00Z"
    )
    with open_warehouse(warehouse) as wh:  # the API adds the warehouse it was given by name
        assert wh.evidence("peer-invalidation", host=HOST, epoch=3, by_escrow=True).provenance.command == (
            result.provenance.command + f" --warehouse {warehouse}"
        )


def test_query_frames_hold_every_duckdb_value_exactly(warehouse):
    # Arrow hands HUGEINT/UHUGEINT over as DECIMAL(38,0) (39 digits wrapped: UHUGEINT's largest read -1),
    # and Polars cannot take INTERVAL or UNION at all: the frame holds them exactly, as `query` prints them.
    hugeint, uhugeint = 2**127 - 1, 2**128 - 1
    sql = (
        f"SELECT {hugeint}::HUGEINT AS h, -{hugeint}::HUGEINT AS nh, {uhugeint}::UHUGEINT AS uh, "
        "CAST(NULL AS HUGEINT) AS null_h, INTERVAL '1 year 2 months 3 days 04:05:06.5' AS i, "
        "union_value(n := 2)::UNION(n INT, s VARCHAR) AS u, TIMETZ '12:34:56+05:30' AS ttz, '0101'::BIT AS bit, "
        f"{10**50}::BIGNUM AS bn, [INTERVAL 1 day, NULL] AS li, "
        f"{{'u': {uhugeint}::UHUGEINT, 'f': 'nan'::DOUBLE}} AS su, "
        "1.50::DECIMAL(4,2) AS d, [1, NULL] AS l"
    )
    with open_warehouse(warehouse) as wh:
        frame = wh.query(sql)
    assert frame.schema["h"] == pl.Int128 and frame.schema["uh"] == pl.UInt128 and frame.schema["null_h"] == pl.Int128
    assert frame.row(0, named=True) == {
        "h": hugeint,
        "nh": -hugeint,
        "uh": uhugeint,
        "null_h": None,
        "i": "1 year 2 months 3 days 04:05:06.5",
        "u": '{"n":2}',
        "ttz": "12:34:56+05:30",
        "bit": "0101",
        "bn": str(10**50),
        "li": '["1 day",null]',
        "su": f'{{"u":{uhugeint},"f":"NaN"}}',
        "d": Decimal("1.50"),
        "l": [1, None],
    }


# a whole run end to end (.ci/run runs it); stands in the default tier:
# tests/api/test_facade.py::test_each_command_function_is_one_call_of_its_warehouse_method,
# tests/api/test_api.py::test_run_says_its_lines_to_the_listener_and_keeps_them
@pytest.mark.heavy
def test_the_facade_does_what_the_commands_do_and_prints_nothing(tmp_path, monkeypatch, capfd):
    """Ingest, builds, doctor, run, report, bundle and verify through `pipeline.api` on the bundled
    samples: result objects, the same files as the commands, and not a byte on stdout or stderr."""
    from pipeline import api
    from pipeline.core.paths import DATA_SAMPLES_DIR
    from pipeline.jobs.config import load_config

    monkeypatch.chdir(tmp_path)  # no gonka-evidence.toml: the samples' configuration
    wh_path = tmp_path / "w.duckdb"
    store = str(DATA_SAMPLES_DIR / "store")
    with pytest.raises(Exception, match="no such|not|cannot"):
        api.ingest(str(tmp_path / "missing"), wh_path)
    assert not wh_path.exists()  # a source that cannot be read leaves no warehouse behind
    summary = api.ingest(store, wh_path, label="samples")
    assert summary.new_epochs == [2, 3, 4] and sum(summary.rows.values()) > 0
    loaded = api.load_builds(DATA_SAMPLES_DIR / "builds.toml", wh_path)
    assert loaded.entries == 5 and loaded.warnings == []  # five [[build]] entries
    described = api.doctor(store, wh_path)
    assert described.description.epochs == [2, 3, 4] and set(described.findings or {}) >= {"seal_conflicts"}

    assert api.run().written == [2, 3]  # the scheduled job, on its own ./warehouse.duckdb
    again = api.run()
    assert again.written == [] and again.log[-1] == "warehouse: unchanged (nothing new)"
    first = (tmp_path / "out" / "epoch-3" / "report.md").read_text()

    host = load_config(None).host  # the samples' focal host
    written = api.report(3, host, out=tmp_path / "again", warehouse=tmp_path / "warehouse.duckdb")
    assert written.path == tmp_path / "again" / "epoch-3" and (written.path / "report.html").exists()
    assert (written.path / "report.md").read_text().splitlines()[0] == first.splitlines()[0]
    bundled = api.bundle(tmp_path / "b", host, epoch=3, warehouse=wh_path)
    assert "MANIFEST.json" in bundled.files and (tmp_path / "b" / "MANIFEST.json").exists()
    assert api.verify(tmp_path / "b", wh_path).ok
    (tmp_path / "b" / "MANIFEST.json").write_text("{}")
    with pytest.raises(EvidenceError, match="not a bundle manifest"):
        api.verify(tmp_path / "b", wh_path)
    assert capfd.readouterr() == ("", "")


def test_run_says_its_lines_to_the_listener_and_keeps_them(tmp_path_factory):
    # `api.run(listener=…)` in a directory of its own, run once for this and tests/output/report/test_index.py
    run = bundled_run(tmp_path_factory)
    said, warned = run.said, run.warned
    assert said == run.log and "new reports: epoch 2, epoch 3 in out" in said
    assert said[0] == "config: data-samples; warehouse: warehouse.duckdb; output: out" and warned == []


def test_a_read_only_warehouse_refuses_to_write(warehouse):
    with open_warehouse(warehouse) as wh, pytest.raises(WarehouseError, match="opened read-only"):
        wh.ingest("data-samples/store")
    with open_warehouse(warehouse, write=True) as wh:
        assert wh.writable and wh.query("SELECT 1 AS one")["one"].to_list() == [1]


def test_the_schema_listing_writes_no_file_in_the_working_directory(tmp_path, monkeypatch):
    # an in-memory warehouse stays in memory: made absolute, ":memory:" named a file in the working directory
    from pipeline import api

    monkeypatch.chdir(tmp_path)
    relations, _ = api.schema()
    assert "inferences" in relations["name"].to_list()
    assert list(tmp_path.iterdir()) == []
