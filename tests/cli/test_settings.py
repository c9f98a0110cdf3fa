"""One precedence for every command (docs/configuration.md): the option, else the environment, else the
config file, else the default; for the warehouse and for the host, on every command that touches a
warehouse. A read command names the warehouse it tried when it is missing; a write command creates it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from pipeline.core.paths import DATA_SAMPLES_DIR
from tests.cli.one_section import one_section_reports, one_table_bundles
from tests.factories import data_samples_warehouse

runner = CliRunner()
FOCAL = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # data-samples/builds.toml focal_host
OTHER = "gonka125zvxdyeddaxmr3kyzun33ssw62w8a9fuc3tsj"  # another host of the samples' warehouse
MISSING = "no warehouse here yet"


@pytest.fixture(scope="module")
def samples_wh(tmp_path_factory) -> Path:
    return data_samples_warehouse(tmp_path_factory.mktemp("settings") / "samples.duckdb")


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("GONKA_EVIDENCE_WAREHOUSE", "GONKA_EVIDENCE_HOST"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _config(here: Path, warehouse: str, host: str | None = None) -> None:
    lines = [f'warehouse = "{warehouse}"'] + ([f'host = "{host}"'] if host else [])
    (here / "gonka-evidence.toml").write_text("\n".join(lines) + "\n")


# Commands that only read: a warehouse that is not there is named in the error.
READERS = {
    "query": ["query", "SELECT 1"],
    "evidence": ["evidence", "epoch-summary"],
    "preflight": ["preflight"],
    "report": ["report", "epoch", "3", "--out", "rep"],
    "bundle": ["bundle", "--epoch", "3", "--out", "bun"],
    "builds check": ["builds", "check"],
    "builds infer": ["builds", "infer"],
}


@pytest.mark.parametrize("argv", READERS.values(), ids=READERS.keys())
def test_a_reader_uses_the_option_over_the_environment_over_the_config(here, monkeypatch, argv):
    _config(here, "fromconfig.duckdb", FOCAL)
    result = runner.invoke(app, argv)
    assert result.exit_code == 1 and f"fromconfig.duckdb: {MISSING}" in result.output, result.output
    monkeypatch.setenv("GONKA_EVIDENCE_WAREHOUSE", "fromenv.duckdb")
    result = runner.invoke(app, argv)
    assert result.exit_code == 1 and f"fromenv.duckdb: {MISSING}" in result.output, result.output
    result = runner.invoke(app, [*argv, "-w", "fromoption.duckdb"])
    assert result.exit_code == 1 and f"fromoption.duckdb: {MISSING}" in result.output, result.output
    # --config names another file: its warehouse, not gonka-evidence.toml's
    monkeypatch.delenv("GONKA_EVIDENCE_WAREHOUSE")
    (here / "other.toml").write_text(f'warehouse = "fromother.duckdb"\nhost = "{FOCAL}"\n')
    result = runner.invoke(app, [*argv, "--config", "other.toml"])
    assert f"fromother.duckdb: {MISSING}" in result.output, result.output


# An hour's window, not an epoch: a bundle (and each verify, which recomputes it) a third of an epoch's work.
WINDOW = ["--since", "2026-10-29T00:00:00", "--until", "2026-10-29T01:00:00"]


# a bundle of every table, computed again by each verify; stands in the default tier:
# tests/cli/test_settings.py::test_verify_uses_the_config_s_warehouse
@pytest.mark.heavy
def test_verify_of_a_whole_bundle_uses_the_config_s_warehouse(here, samples_wh, monkeypatch):
    """The test below, its bundle of every evidence table."""
    _verify_where(here, samples_wh, monkeypatch)


def test_verify_uses_the_config_s_warehouse(here, samples_wh, monkeypatch):
    """Its bundle of one table (tests/cli/one_section.py): which warehouse verify reads is the same for one."""
    one_table_bundles(monkeypatch)
    _verify_where(here, samples_wh, monkeypatch)


def _verify_where(here: Path, samples_wh: Path, monkeypatch) -> None:
    _config(here, str(samples_wh), FOCAL)
    made = runner.invoke(app, ["bundle", *WINDOW, "--out", "bun"])
    assert made.exit_code == 0, made.output
    assert runner.invoke(app, ["verify", "bun"]).exit_code == 0
    _config(here, "fromconfig.duckdb")
    assert f"fromconfig.duckdb: {MISSING}" in runner.invoke(app, ["verify", "bun"]).output
    monkeypatch.setenv("GONKA_EVIDENCE_WAREHOUSE", "fromenv.duckdb")
    assert f"fromenv.duckdb: {MISSING}" in runner.invoke(app, ["verify", "bun"]).output
    assert runner.invoke(app, ["verify", "bun", "-w", str(samples_wh)]).exit_code == 0


def _log_file(here: Path) -> Path:
    return next(p for p in (DATA_SAMPLES_DIR / "vllm").iterdir() if p.is_file())


WRITERS = {
    "ingest": lambda here: ["ingest", str(DATA_SAMPLES_DIR / "store")],
    "ingest-logs": lambda here: ["ingest-logs", str(_log_file(here)), "--kind", "vllm", "--year", "2026"],
    "ingest-json": lambda here: ["ingest-json", str(here / "json" / "empty.json")],
    "builds": lambda here: ["builds", str(DATA_SAMPLES_DIR / "builds.toml")],
}


# Three ingests of the samples' store are seconds; the same command over a copy of one epoch resolves its
# warehouse as this one does. stands in the default tier:
# tests/cli/test_settings.py::test_ingest_of_a_small_copy_uses_the_option_over_the_environment_over_the_config
WHOLE_STORE = {"ingest": pytest.mark.heavy}


@pytest.mark.parametrize(
    "make_argv", [pytest.param(make, id=name, marks=WHOLE_STORE.get(name, ())) for name, make in WRITERS.items()]
)
def test_a_writer_uses_the_option_over_the_environment_over_the_config(here, monkeypatch, make_argv):
    _writer_precedence(here, monkeypatch, make_argv(here))


def test_ingest_of_a_small_copy_uses_the_option_over_the_environment_over_the_config(here, monkeypatch, sqlite_copy):
    """The `ingest` case of the test above over a store of one epoch."""
    _writer_precedence(here, monkeypatch, ["ingest", str(sqlite_copy(1))])


def _writer_precedence(here: Path, monkeypatch, argv: list[str]) -> None:
    (here / "json").mkdir()
    (here / "json" / "empty.json").write_text("{}\n")
    _config(here, "fromconfig.duckdb", FOCAL)
    made = []
    for env, option, expected in (
        (None, None, "fromconfig.duckdb"),
        ("fromenv.duckdb", None, "fromenv.duckdb"),
        ("fromenv.duckdb", "fromoption.duckdb", "fromoption.duckdb"),
    ):
        if env:
            monkeypatch.setenv("GONKA_EVIDENCE_WAREHOUSE", env)
        result = runner.invoke(app, [*argv, *(["-w", option] if option else [])])
        made.append(sorted(p.name for p in here.glob("*.duckdb")))
        assert (here / expected).exists(), (expected, result.output)
    assert made == [
        ["fromconfig.duckdb"],
        ["fromconfig.duckdb", "fromenv.duckdb"],
        ["fromconfig.duckdb", "fromenv.duckdb", "fromoption.duckdb"],
    ]
    assert not (here / "warehouse.duckdb").exists()


def test_run_uses_the_config_s_warehouse_unless_one_is_given(here, monkeypatch):
    (here / "gonka-evidence.toml").write_text('warehouse = "fromconfig.duckdb"\noutput = "out"\n')
    assert runner.invoke(app, ["run"]).exit_code == 0
    assert (here / "fromconfig.duckdb").exists() and not (here / "warehouse.duckdb").exists()
    monkeypatch.setenv("GONKA_EVIDENCE_WAREHOUSE", "fromenv.duckdb")
    assert runner.invoke(app, ["run"]).exit_code == 0 and (here / "fromenv.duckdb").exists()
    assert runner.invoke(app, ["run", "-w", "fromoption.duckdb"]).exit_code == 0
    assert (here / "fromoption.duckdb").exists()


# Commands that take a host: the config's when none is given; the environment's over it; the option's over both.
# bundle resolves its host as evidence and preflight do (Warehouse.resolve(host=), then its settings' host), and
# writes the same epoch report as report; two bundles are seconds. stands in the default tier:
# tests/cli/test_settings.py::test_the_host_is_the_option_over_the_environment_over_the_config (its other cases)
BUNDLE = pytest.param(["bundle", "--epoch", "3", "--out", "bun"], id="bundle", marks=pytest.mark.heavy)
REPORT = ["report", "epoch", "3", "--out", "rep"]
# Two whole reports of the samples are seconds; the same command whose reports hold one section resolves and
# checks its host as this one does. stands in the default tier:
# tests/cli/test_settings.py::test_the_report_s_host_is_the_option_over_the_environment_over_the_config
WHOLE_REPORT = pytest.param(REPORT, id="report", marks=pytest.mark.heavy)
HOSTED = [
    pytest.param(["evidence", "epoch-summary"], id="evidence"),
    pytest.param(["preflight"], id="preflight"),
    WHOLE_REPORT,
    BUNDLE,
    pytest.param(["ingest-logs", "--kind", "vllm", "--year", "2026"], id="ingest-logs"),
]


@pytest.mark.parametrize("argv", HOSTED)
def test_the_host_is_the_option_over_the_environment_over_the_config(here, samples_wh, monkeypatch, argv):
    _host_precedence(here, samples_wh, monkeypatch, argv)


def test_the_report_s_host_is_the_option_over_the_environment_over_the_config(here, samples_wh, monkeypatch):
    """The `report` case of the test above, its reports of one section (tests/cli/one_section.py)."""
    one_section_reports(monkeypatch)
    _host_precedence(here, samples_wh, monkeypatch, REPORT)


def _host_precedence(here: Path, samples_wh: Path, monkeypatch, argv: list[str]) -> None:
    wh = here / "w.duckdb"
    shutil.copy(samples_wh, wh)
    if argv[0] == "ingest-logs":
        argv = [*argv, str(_log_file(here))]
    _config(here, str(wh), OTHER)
    used = runner.invoke(app, argv)
    if argv[0] in ("report", "bundle"):
        assert used.exit_code == 0, used.output
        text = "".join(p.read_text() for p in here.rglob("*.md"))
        assert f"Epoch 3 report: {OTHER}" in text and f"Epoch 3 report: {FOCAL}" not in text
    elif argv[0] == "ingest-logs":  # it needed --host before
        assert used.exit_code == 0, used.output
    else:
        assert used.exit_code == 0 and OTHER in used.output, used.output
    monkeypatch.setenv("GONKA_EVIDENCE_HOST", FOCAL)  # a malformed one is refused wherever it is read
    fresh = ["--out", "from-env"] if argv[0] in ("report", "bundle") else []
    env = runner.invoke(app, [*argv, *fresh])
    assert env.exit_code == 0, env.output
    if argv[0] in ("report", "bundle"):
        text = "".join(p.read_text() for p in (here / "from-env").rglob("*.md"))
        assert f"Epoch 3 report: {FOCAL}" in text and f"Epoch 3 report: {OTHER}" not in text
    elif argv[0] != "ingest-logs":
        assert FOCAL in env.output and OTHER not in env.output.split("command:")[-1]
    result = runner.invoke(app, [*argv, "--host", "gonka1option"])
    assert result.exit_code == 1 and "'gonka1option'" in result.output, result.output


def test_ingest_then_query_under_a_config_naming_another_warehouse(here, sqlite_copy):
    """A new user's first session: the ingest wrote ./warehouse.duckdb while the query read the config's (over
    a store of one epoch: which warehouse each command takes does not depend on the store)."""
    _config(here, "mywh.duckdb")
    assert runner.invoke(app, ["ingest", str(sqlite_copy(1))]).exit_code == 0
    result = runner.invoke(app, ["query", "SELECT count(*) > 0 AS some FROM inferences", "--format", "csv"])
    assert result.exit_code == 0 and result.output.splitlines()[-1] == "true", result.output
    assert (here / "mywh.duckdb").exists() and not (here / "warehouse.duckdb").exists()


# a whole report of the samples; stands in the default tier:
# tests/cli/test_settings.py::test_no_host_on_a_warehouse_that_is_not_the_samples_is_one_line_naming_where
@pytest.mark.heavy
def test_no_host_on_a_warehouse_that_is_not_the_samples_with_a_whole_report(here, samples_wh):
    """The test below, its report of every section."""
    _no_host_but_on_the_samples(here, samples_wh)


def test_no_host_on_a_warehouse_that_is_not_the_samples_is_one_line_naming_where(here, samples_wh, monkeypatch):
    """Without a config, the samples' focal host is used only on the samples' own warehouse (its report of one
    section: tests/cli/one_section.py)."""
    one_section_reports(monkeypatch)
    _no_host_but_on_the_samples(here, samples_wh)


def _no_host_but_on_the_samples(here: Path, samples_wh: Path) -> None:
    wh = here / "w.duckdb"
    shutil.copy(samples_wh, wh)
    ok = runner.invoke(app, ["report", "epoch", "3", "--out", "rep", "-w", str(wh)])
    assert ok.exit_code == 0, ok.output  # the samples' warehouse: their focal host
    import duckdb

    con = duckdb.connect(str(wh))
    con.execute("UPDATE ingest_runs SET source_display = '/srv/copies/mine' WHERE true")
    con.close()
    result = runner.invoke(app, ["report", "epoch", "3", "--out", "rep2", "-w", str(wh)])
    assert result.exit_code == 1 and "report needs a host: give --host ADDR, set GONKA_EVIDENCE_HOST" in result.output
    assert not (here / "rep2").exists()
    run = runner.invoke(app, ["run", "-w", str(wh)])
    assert run.exit_code == 1 and "is not the bundled samples'" in run.output, run.output


def test_doctor_reads_a_warehouse_only_when_one_is_named(here, samples_wh, monkeypatch):
    """`doctor` describes a source without a warehouse; --warehouse, or --config's warehouse, adds what that
    warehouse found (the option over the environment over the config)."""
    store = str(DATA_SAMPLES_DIR / "store")
    _config(here, "fromconfig.duckdb")
    alone = runner.invoke(app, ["doctor", store])
    assert alone.exit_code == 0 and "accounting of its last ingest" not in alone.output, alone.output
    named = runner.invoke(app, ["doctor", store, "--config", "gonka-evidence.toml"])
    assert named.exit_code == 1 and f"fromconfig.duckdb: {MISSING}" in named.output, named.output
    monkeypatch.setenv("GONKA_EVIDENCE_WAREHOUSE", "fromenv.duckdb")
    assert f"fromenv.duckdb: {MISSING}" in runner.invoke(app, ["doctor", store]).output
    used = runner.invoke(app, ["doctor", store, "-w", str(samples_wh)])
    assert used.exit_code == 0 and "accounting of its last ingest" in used.output, used.output
