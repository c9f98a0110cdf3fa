"""`gonka-evidence run`: config, closed epochs, reports over successive copies, idempotence, lock, \
concurrent readers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from pipeline.core.address import sample_address
from pipeline.core.roles import OUTPUT_MARKER
from pipeline.jobs.config import CONFIG_KEYS, ConfigError, load_config, parse_duration, sample_config
from pipeline.jobs.run import RunOutcome, publish_staged, run_job, run_lock, staged_warehouse
from pipeline.sources.store.base import SourceError
from pipeline.warehouse.database import WarehouseError
from tests.helpers import frame

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
SCRIPT = str(Path(sys.executable).with_name("gonka-evidence"))


def _config(dir: Path, timeline, lag: str = "6h") -> Path:
    """A deployment as the docs describe it: copies land in ./copy/, reports go to ./out/."""
    timeline.write_builds_toml(dir / "builds.toml")
    cfg = dir / "gonka-evidence.toml"
    cfg.write_text(
        f'warehouse = "wh/warehouse.duckdb"\noutput = "out"\nhost = "{timeline.focal_host}"\n'
        f'builds = "builds.toml"\nfinality_lag = "{lag}"\n\n[[sources]]\npath = "copy"\nlabel = "host-copy"\n'
    )
    return cfg


def _place_copy(dir: Path, timeline, last_epoch: int) -> None:
    shutil.rmtree(dir / "copy", ignore_errors=True)
    timeline.copy(last_epoch=last_epoch).write_sqlite(dir / "copy")


def _snapshot(dir: Path) -> dict[str, int]:
    return {str(p.relative_to(dir)): p.stat().st_mtime_ns for p in sorted((dir / "out").rglob("*")) if p.is_file()}


# a whole run end to end (.ci/run runs it); stands in the default tier:
# tests/evidence/test_closure.py::test_the_finality_lag_decides_whether_an_epoch_with_an_unsettled_escrow_is_closed,
# tests/jobs/test_run.py::test_the_bundled_run_reports_the_samples_and_their_vllm_log,
# tests/jobs/test_run.py::test_the_next_run_removes_what_killed_runs_left_and_marks_their_ingests_aborted
@pytest.mark.heavy
def test_run_over_two_successive_copies_writes_the_right_reports_then_nothing(tmp_path, timeline):
    cfg = _config(tmp_path, timeline)
    _place_copy(tmp_path, timeline, 3)
    first = run_job(cfg, None)
    # Copy of epoch 3: epoch 1 is settled, epoch 2 has an escrow that never settles (closed by the lag).
    assert (first.written, first.rewritten, first.published) == ([1, 2], [], True)
    wh = tmp_path / "wh" / "warehouse.duckdb"
    state = frame(wh, "SELECT epoch_id, closed_by FROM epoch_reports ORDER BY 1").rows()
    assert state == [(1, "all escrows settled"), (2, "finality lag")]

    _place_copy(tmp_path, timeline, 4)
    second = run_job(cfg, None)
    assert (second.written, second.rewritten, second.published) == ([3], [], True)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        OUTPUT_MARKER,  # the run marks the directory it writes as its own
        "epoch-1",
        "epoch-2",
        "epoch-3",
        "index-charts",
        "index.html",
        "index.md",
    ]
    assert "closed at 2026-10-26T00:20:09Z (all escrows settled)" in (tmp_path / "out/epoch-3/report.md").read_text()

    files, warehouse_state = _snapshot(tmp_path), wh.stat()
    result = runner.invoke(app, ["run", "--config", str(cfg)])
    assert result.exit_code == 0, result.output
    assert "reports: nothing new" in result.output and "warehouse: unchanged" in result.output
    assert _snapshot(tmp_path) == files
    assert (wh.stat().st_ino, wh.stat().st_mtime_ns) == (warehouse_state.st_ino, warehouse_state.st_mtime_ns)
    assert not list(wh.parent.glob("*.tmp*")) and not list((tmp_path / "out").glob(".epoch-*"))
    assert sorted(p.name for p in wh.parent.iterdir()) == ["warehouse.duckdb"]  # the lock file went with its run

    # New data that changes the newest closed epoch's numbers (a relabelled build) rewrites that report only.
    builds = tmp_path / "builds.toml"
    builds.write_text(builds.read_text().replace("raw_logprobs", "raw logprobs (relabelled)"))
    fourth = run_job(cfg, None)
    assert (fourth.written, fourth.rewritten) == ([], [3])
    assert "raw logprobs (relabelled)" in (tmp_path / "out/epoch-3/report.md").read_text()
    assert "relabelled" not in (tmp_path / "out/epoch-2/report.md").read_text()
    assert frame(wh, "SELECT rewrites FROM epoch_reports WHERE epoch_id = 3")["rewrites"][0] == 1


# no default-tier stand-in: the newest report's rebuild rule needs whole runs over moved inputs (.ci/run runs it)
@pytest.mark.heavy
def test_a_run_builds_the_newest_report_again_only_when_its_inputs_moved(tmp_path, timeline, monkeypatch):
    """The newest closed epoch's report is built again to see whether it changed only when what it is
    built from moved (data, data clock, host, lag, warehouse, version); a run whose inputs are those of
    the last build builds nothing. A warehouse from before the inputs were kept builds once, keeps them."""
    import pipeline.output.report

    built: list[int] = []
    real = pipeline.output.report.build_epoch_report
    monkeypatch.setattr(
        pipeline.output.report,
        "build_epoch_report",
        lambda con, epoch, *a, **k: built.append(epoch) or real(con, epoch, *a, **k),
    )
    cfg = _config(tmp_path, timeline)
    _place_copy(tmp_path, timeline, 3)
    wh = tmp_path / "wh" / "warehouse.duckdb"
    assert run_job(cfg, None).written == [1, 2] and built == [1, 2]
    assert run_job(cfg, None).published is False and built == [1, 2]  # same inputs: nothing built

    con = duckdb.connect(str(wh))  # a warehouse written before the inputs were kept
    con.execute("UPDATE epoch_reports_t SET inputs = NULL")
    con.close()
    again = run_job(cfg, None)
    assert (again.written, again.rewritten, again.published) == ([], [], True) and built == [1, 2, 2]
    assert (
        frame(wh, "SELECT count(*) AS n FROM epoch_reports_t WHERE inputs IS NULL")["n"][0] == 1
    )  # epoch 1: not the newest
    assert run_job(cfg, None).published is False and built == [1, 2, 2]

    monkeypatch.setenv("GONKA_EVIDENCE_FINALITY_LAG", "7h")  # another input: built again (epoch 2 closes an hour later)
    lag = run_job(cfg, None)
    assert (lag.written, lag.rewritten) == ([], [2]) and built == [1, 2, 2, 2]
    assert run_job(cfg, None).published is False and built == [1, 2, 2, 2]


# a whole run; stands in the default tier:
# tests/evidence/test_closure.py::test_the_finality_lag_decides_whether_an_epoch_with_an_unsettled_escrow_is_closed,
# tests/jobs/test_run.py::test_config_keys_env_overrides_and_errors,
# tests/jobs/test_run.py::test_the_bundled_run_reports_the_samples_and_their_vllm_log (run writes the closed epochs)
@pytest.mark.heavy
def test_finality_lag_decides_epochs_with_an_unsettled_escrow(tmp_path, timeline, monkeypatch):
    cfg = _config(tmp_path, timeline)
    _place_copy(tmp_path, timeline, 3)
    monkeypatch.setenv("GONKA_EVIDENCE_FINALITY_LAG", "30d")
    outcome = run_job(cfg, None)
    assert outcome.written == [1]  # epoch 2's last settlement is < 30 days before the copy


def test_config_keys_env_overrides_and_errors(tmp_path, monkeypatch):
    cfg = tmp_path / "c.toml"
    cfg.write_text('warehouse = "w.duckdb"\nfinality_lag = "1d12h"\n[[sources]]\npath = "s"\n')
    loaded = load_config(cfg)
    assert loaded.warehouse == tmp_path / "w.duckdb" and loaded.finality_lag_delta == timedelta(hours=36)
    assert loaded.sources == [{"path": str(tmp_path / "s")}]
    monkeypatch.setenv("GONKA_EVIDENCE_OUTPUT", "/srv/reports")
    override = sample_address("0verr7de")  # the environment's host is checked (and folded) like the file's
    monkeypatch.setenv("GONKA_EVIDENCE_HOST", override.upper())
    monkeypatch.setenv("GONKA_EVIDENCE_FINALITY_LAG", "30d")  # the lag `run` closes epochs by, over the file's
    loaded = load_config(cfg)
    assert loaded.output == Path("/srv/reports") and loaded.host == override
    assert loaded.finality_lag_delta == timedelta(days=30)
    monkeypatch.delenv("GONKA_EVIDENCE_FINALITY_LAG")  # the file's own (bad) lags are read below
    assert [parse_duration(x).total_seconds() for x in ("6h", "90m", "45s", "3600", "2d")] == [
        21600,
        5400,
        45,
        3600,
        172800,
    ]
    cfg.write_text('[[sources]]\npath = "logs"\nkind = "vllm"\nyear = 2025\n')
    assert load_config(cfg).sources == [{"path": str(tmp_path / "logs"), "kind": "vllm", "year": 2025}]
    for bad, message in [
        ("nope = 1", "unknown key(s) nope"),
        ('finality_lag = "soon"', "not a duration"),
        ('[[sources]]\nlabel = "x"', "needs exactly one of url or path"),
        ('[[sources]]\npath = "x"\nkind = "ftp"', "source kind 'ftp'"),
        ('[[sources]]\npath = "x"\npassword = "y"', "unknown key(s) password"),
        ('[[sources]]\npath = "x"\nkind = "vllm"\nyear = "2026"', "entry 1: year must be an integer, not a string"),
        ('[[sources]]\npath = "x"\nkind = "vllm"\nyear = 26', "entry 1: year 26 is not a plausible year"),
    ]:
        cfg.write_text(bad)
        with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
            load_config(cfg)
    assert set(CONFIG_KEYS) == {"warehouse", "output", "host", "builds", "finality_lag"}


def test_the_shipped_config_is_the_no_configuration_default(monkeypatch):
    for key in CONFIG_KEYS:
        monkeypatch.delenv(f"GONKA_EVIDENCE_{key.upper()}", raising=False)
    shipped, default = load_config(ROOT / "gonka-evidence.toml"), sample_config()
    assert shipped.host == default.host and shipped.finality_lag == default.finality_lag
    assert shipped.builds.resolve() == default.builds.resolve()
    assert [Path(s["path"]).resolve() for s in shipped.sources] == [Path(s["path"]).resolve() for s in default.sources]
    assert [s["label"] for s in shipped.sources] == ["data-samples", "data-samples vLLM log"]
    # The same kinds and the same year for the log (its lines print none), whichever way run finds them.
    assert [(s["kind"], s.get("year")) for s in shipped.sources] == [
        (s["kind"], s.get("year")) for s in default.sources
    ]
    assert [s.get("year") for s in default.sources] == [None, 2026]


def _section_rows(report: str, heading: str) -> dict[str, list[str]]:
    """The rows of the first table under a report heading, by their first cell."""
    section = report.split(f". {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split(" | ") for line in section.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [c.strip() for c in cells] for cells in rows[2:]}  # after the header and its rule


def _check_the_bundled_reports(said: list[str], out: Path) -> None:
    """What the bundled run (no configuration: the bundled store and vLLM log) says and writes: the reports show
    the log sections with numbers."""
    assert "new reports: epoch 2, epoch 3 in out" in said
    (logs,) = [line for line in said if line.startswith("ingested vllm logs ")]
    assert ": 1 files, " in logs and "log_spec_decode " in logs and "log_engine_events " in logs
    raw, fix, v1 = "V2 + DSpark, raw_logprobs", "V2 + DSpark, processed_logprobs, vLLM fix", "V1, no DSpark"
    epoch3 = (out / "epoch-3" / "report.md").read_text()
    assert "_Skipped" not in epoch3.split("## 8.", 1)[1].split("## 12.", 1)[0]
    acceptance = _section_rows(epoch3, "Speculative-decoding acceptance")
    assert list(acceptance) == [raw, fix] and all(int(r[2]) > 0 for r in acceptance.values())  # windows
    assert list(_section_rows(epoch3, "Engine throughput")) == [raw, fix]
    stability = _section_rows(epoch3, "Engine stability")
    # build, hours, engine_deaths, ooms, restarts: the OOM death, once, and the restart after it; the fix build's start.
    assert [r[2:5] for r in stability.values()] == [["1", "1", "1"], ["0", "0", "1"]] and list(stability) == [raw, fix]
    # The engine died while it served the host's empty answer of the epoch: the death explains it.
    (integrity,) = _section_rows(epoch3, "Answer integrity").values()
    assert integrity[6:] == ["1", "1", "0", "0"]  # empty_answers, …_in_engine_death, …_in_poc, …_unexplained
    epoch2 = (out / "epoch-2" / "report.md").read_text()
    assert list(_section_rows(epoch2, "Speculative-decoding acceptance")) == [raw]  # V1 has no speculative decoding
    assert list(_section_rows(epoch2, "Engine throughput")) == [v1, raw]


def test_the_bundled_run_reports_the_samples_and_their_vllm_log(tmp_path_factory):
    """No configuration anywhere, in-process (`pipeline.api.run`, the run tests/api/test_api.py and
    tests/output/report/test_index.py read, made once per session): the bundled store and vLLM log."""
    from tests.output.shared import bundled_run

    run = bundled_run(tmp_path_factory)
    assert run.warned == [] and run.said == run.log
    _check_the_bundled_reports(run.said, run.directory / "out")


# a whole `gonka-evidence run` in a process of its own; stands in the default tier:
# tests/jobs/test_run.py::test_the_bundled_run_reports_the_samples_and_their_vllm_log (the same run in-process)
@pytest.mark.heavy
def test_the_bundled_run_in_a_process_of_its_own_reports_the_samples_and_their_vllm_log(tmp_path):
    """No configuration anywhere: the bundled store and vLLM log; the reports show the log sections with numbers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GONKA_EVIDENCE_")}
    result = subprocess.run([SCRIPT, "run"], cwd=tmp_path, capture_output=True, text=True, timeout=900, env=env)
    assert result.returncode == 0 and result.stderr == "", result.stdout + result.stderr
    _check_the_bundled_reports(result.stdout.splitlines(), tmp_path / "out")


def test_a_warehouse_changed_by_another_writer_is_not_overwritten(tmp_path):
    from pipeline.warehouse.database import open_for_write

    wh = tmp_path / "w.duckdb"
    open_for_write(wh).close()
    with staged_warehouse(wh) as staged:
        open_for_write(staged.path).close()
        con = open_for_write(wh)  # e.g. `gonka-evidence ingest` while the run works
        con.execute("CREATE TABLE x AS SELECT 1 AS a")
        con.close()
        with pytest.raises(WarehouseError, match="changed while this run worked on a copy"):
            publish_staged(staged)
    assert frame(wh, "SELECT a FROM x")["a"].to_list() == [1]
    assert not list(tmp_path.glob("*.tmp"))


def _cli(*args: str, cwd: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([SCRIPT, *args], cwd=cwd, capture_output=True, text=True, timeout=120, **kw)


@dataclass(frozen=True)
class FirstRun:
    directory: Path  # the deployment (`_config`) over copy 3, after its first run
    outcome: RunOutcome  # that run's


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, timeline) -> FirstRun:
    """The first run of a deployment over copy 3: the starting state of the killed-runs test (which works on a
    copy)."""
    directory = tmp_path_factory.mktemp("first-run")
    cfg = _config(directory, timeline)
    _place_copy(directory, timeline, 3)
    return FirstRun(directory, run_job(cfg, None))


def test_a_run_while_another_holds_the_lock_is_refused_in_one_line_and_does_nothing(tmp_path, timeline):
    """In-process (the lock is an flock: another open of the file in this process is refused as another
    process's is): the refused run says who holds it, in one line, and writes nothing; the lock goes with its
    holder."""
    from tests.helpers import cli_in

    cfg = _config(tmp_path, timeline)
    _place_copy(tmp_path, timeline, 3)
    wh = tmp_path / "wh" / "warehouse.duckdb"
    with run_lock(wh):  # what a running `gonka-evidence run` holds
        refused = cli_in(tmp_path, "run", "--config", str(cfg))
    assert refused.returncode == 1 and "Traceback" not in refused.stdout + refused.stderr
    (message,) = [line for line in refused.stderr.splitlines() if line.strip()]
    assert message.startswith("error: another `gonka-evidence run` is working on") and f"pid {os.getpid()}" in message
    assert not wh.exists() and not (tmp_path / "out").exists()
    assert sorted(p.name for p in wh.parent.iterdir()) == []  # the holder took its lock file with it
    with run_lock(wh):  # released: the next run takes it
        pass


# a run in a process of its own refused by this one's lock, then a whole run; stands in the default tier:
# tests/jobs/test_run.py::test_a_run_while_another_holds_the_lock_is_refused_in_one_line_and_does_nothing,
# tests/jobs/test_run.py::test_the_next_run_removes_what_killed_runs_left_and_marks_their_ingests_aborted (its
# first_run: a whole run over copy 3 writes epochs 1 and 2)
@pytest.mark.heavy
def test_a_second_run_while_one_holds_the_lock_stops_with_a_clear_message(tmp_path, timeline):
    cfg = _config(tmp_path, timeline)
    _place_copy(tmp_path, timeline, 3)
    wh = tmp_path / "wh" / "warehouse.duckdb"
    with run_lock(wh):  # what a running `gonka-evidence run` holds
        result = _cli("run", "--config", str(cfg), cwd=tmp_path)
    untouched = not wh.exists() and not (tmp_path / "out").exists()
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    message = result.stderr.strip()
    assert message.startswith("error: another `gonka-evidence run` is working on") and f"pid {os.getpid()}" in message
    assert untouched
    assert run_job(cfg, None).written == [1, 2]  # released with the holder


READER = r"""
import sys, time, duckdb
from pipeline.warehouse.database import open_read_only, WarehouseError
path, stop = sys.argv[1], sys.argv[2]
import os
while not os.path.exists(stop):
    try:
        con = open_read_only(path)
        n = con.sql("SELECT count(*) FROM escrows").fetchall()[0][0]
        con.close()
        print(n, flush=True)
    except WarehouseError as exc:
        print("ERROR", exc, flush=True)
    time.sleep(0.1)
"""


# a reader process beside a real run; stands in the default tier:
# tests/jobs/test_run.py::test_a_warehouse_changed_by_another_writer_is_not_overwritten (the staged copy)
@pytest.mark.heavy
def test_analysts_read_the_old_or_the_new_state_while_a_run_writes(tmp_path, timeline):
    cfg = _config(tmp_path, timeline)
    _place_copy(tmp_path, timeline, 2)
    run_job(cfg, None)
    wh = tmp_path / "wh" / "warehouse.duckdb"
    old = frame(wh, "SELECT count(*) AS n FROM escrows")["n"][0]
    _place_copy(tmp_path, timeline, 4)
    stop = tmp_path / "stop"
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(wh), str(stop)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert reader.stdout.readline().strip().isdigit()  # the reader is up and reading
        run = subprocess.Popen(
            [SCRIPT, "run", "--config", str(cfg)],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        analyst = []
        while run.poll() is None and len(analyst) < 2:  # an analyst's `query` during the run
            analyst.append(
                _cli("query", "SELECT count(*) AS n FROM escrows", "--format", "csv", "-w", str(wh), cwd=tmp_path)
            )
        out, err = run.communicate()
        assert run.returncode == 0, err
    finally:
        stop.touch()
        reads = reader.communicate(timeout=60)[0].split("\n")
    new = frame(wh, "SELECT count(*) AS n FROM escrows")["n"][0]
    assert new > old
    seen = [line for line in reads if line]
    assert len(seen) > 5 and not [s for s in seen if s.startswith("ERROR")], seen[:5]
    assert set(map(int, seen)) <= {old, new} and int(seen[-1]) == new
    assert analyst and all(a.returncode == 0 and a.stdout.split()[1] in (str(old), str(new)) for a in analyst), analyst


# --- runs clean up after themselves and after killed runs; bad config and full disks get one line ----


def _one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()  # reaped: nothing runs under this id until the kernel hands it out again
    return child.pid


def test_a_failed_run_takes_its_lock_file_with_it(tmp_path, timeline):
    cfg = _config(tmp_path, timeline)
    lock = tmp_path / "wh" / "warehouse.duckdb.run.lock"
    (tmp_path / "copy").mkdir()  # empty: not a source of any kind, found once the run holds its lock
    with pytest.raises(SourceError, match="copy"):
        run_job(cfg, None)
    assert not lock.exists() and not list((tmp_path / "wh").glob("*.tmp*"))


def test_the_next_run_removes_what_killed_runs_left_and_marks_their_ingests_aborted(tmp_path, first_run):
    from pipeline.warehouse.database import open_for_write

    assert first_run.outcome.written == [1, 2]  # copy 3: epoch 1 settled, epoch 2 closed by the lag
    # the deployment after its first run over copy 3 (`first_run`), copied: mtimes kept, paths relative
    tmp_path = tmp_path / "deployment"
    shutil.copytree(first_run.directory, tmp_path)
    cfg = tmp_path / "gonka-evidence.toml"
    wh = tmp_path / "wh" / "warehouse.duckdb"
    con = open_for_write(wh)  # what a killed `ingest` leaves: its run row, still `running`
    con.execute(
        "INSERT INTO ingest_runs (run_id, source_id, source_kind, started_at, status) "
        "VALUES ('killed', 'x', 'store', now(), 'running')"
    )
    con.close()
    dead, alive = _dead_pid(), os.getppid()
    out = tmp_path / "out"
    debris = [
        wh.with_name(f"warehouse.duckdb.run-{dead}.tmp"),
        wh.with_name(f"warehouse.duckdb.run-{dead}.tmp.wal"),
        out / f".epoch-3.tmp-{dead}",
        out / f".epoch-2.old-{dead}",
        out / f".epoch-1.old-{dead}",
    ]
    kept = [wh.with_name(f"warehouse.duckdb.run-{alive}.tmp"), out / f".epoch-3.tmp-{alive}"]
    (out / "epoch-1").rename(debris[-1])  # killed between setting the old report aside and renaming the new one in
    for path in debris[:-1] + kept:
        if path.name.startswith(".epoch"):
            path.mkdir()
            (path / "report.md").write_text("half")
        else:
            path.write_bytes(b"x" * 100)
    epoch_1 = (debris[-1] / "report.md").read_text()

    result = runner.invoke(app, ["run", "--config", str(cfg)])
    assert result.exit_code == 0, result.output
    assert [p for p in debris if p.exists()] == [] and all(p.exists() for p in kept)
    assert (out / "epoch-1" / "report.md").read_text() == epoch_1 and (out / "epoch-2" / "report.md").exists()
    assert f"removed {debris[0]}: left by an interrupted run" in result.output
    assert "1 run(s) left `running` by a killed writer marked aborted" in result.output
    assert "warehouse: updated" in result.output  # the correction is published, though no data changed
    status = frame(wh, "SELECT status, finished_at IS NOT NULL AS finished FROM ingest_runs WHERE run_id = 'killed'")
    assert status.rows() == [("aborted", True)]
    assert "running" not in frame(wh, "SELECT status FROM ingest_runs")["status"].to_list()


def test_a_writer_aborts_only_runs_that_no_live_process_carries_out(tmp_path):
    from pipeline.ingest.runs import ingest_run
    from pipeline.warehouse.database import open_for_write

    wh = tmp_path / "w.duckdb"
    con = open_for_write(wh)
    con.execute(
        "INSERT INTO ingest_runs (run_id, source_id, source_kind, started_at, status) "
        "VALUES ('abandoned', 'x', 'store', now(), 'running')"
    )
    with ingest_run(con, source_id="y", kind="store", display="y") as live:
        open_for_write(wh).close()  # another writer in this process while the ingest runs
        statuses = dict(con.execute("SELECT run_id, status FROM ingest_runs").fetchall())
        assert statuses == {"abandoned": "aborted", live.run_id: "running"}
    assert dict(con.execute("SELECT run_id, status FROM ingest_runs").fetchall()) == {
        "abandoned": "aborted",
        live.run_id: "ok",
    }
    con.close()


def test_postgres_connections_give_up_on_a_server_that_never_answers(monkeypatch, capsys):
    """The store's connection and the one that reads the change markers first (pipeline/ingest/unchanged.py).
    In-process: what each says when the server accepts and never answers, no property of a process of its own."""
    import socket

    import pipeline.sources.store.postgres_address as address
    from pipeline.sources.store.postgres import PostgresStore
    from pipeline.sources.store.postgres_markers import read_markers

    monkeypatch.delenv("PGCONNECTTIMEOUT", raising=False)
    monkeypatch.setattr(address, "CONNECT_TIMEOUT_SECONDS", 1)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)  # accepts the connection, never answers
        url = f"postgresql://reader:s3cr3t-pw@127.0.0.1:{server.getsockname()[1]}/devshard"
        lines = []
        for connect in (PostgresStore, lambda url: read_markers(url, duckdb.connect)):
            with pytest.raises(SourceError) as refused:
                connect(url)
            lines.append(str(refused.value))
    said = capsys.readouterr()
    assert len(lines) == 2, lines
    assert all("cannot connect" in line and "timeout expired" in line for line in lines), lines
    assert "s3cr3t-pw" not in "".join(lines) + said.out + said.err


BAD_CONFIGS = {
    "builds given as an array": ("builds = [1, 2]\n", "c.toml: builds must be a string, not an array"),
    "host given as a number": ("host = 7\n", "c.toml: host must be a string, not an integer"),
    "finality lag given as a table": (
        "finality_lag = {h = 6}\n",
        "finality_lag must be a duration string or a number of seconds, not a table",
    ),
    "sources that are not tables": ("sources = [1, 2]\n", "sources must be [[sources]] tables"),
    "a source path given as an array": (
        '[[sources]]\npath = ["a", "b"]\n',
        "[[sources]] entry 1: path must be a string, not an array",
    ),
    "a config that is not UTF-8": (b'host = "\xff"\n', "c.toml: not UTF-8 text (byte 0xff at offset 8)"),
    "a config that is not TOML": ("host = \n", "c.toml: not valid TOML"),
    "a builds file that is not UTF-8": ('builds = "b.toml"\n', "b.toml: not UTF-8 text"),
    "a builds host given as an array": ('builds = "b.toml"\n', "b.toml: entry 1: host must be a string, not an array"),
}
BUILDS_FILES = {
    "a builds file that is not UTF-8": b'[[builds]]\nhost = "h\xe9"\n',
    "a builds host given as an array": b'[[builds]]\nhost = ["h1"]\nlabel = "a"\nsince = 2026-10-01T00:00:00Z\n',
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_a_bad_config_or_builds_file_stops_the_run_with_one_line(tmp_path, monkeypatch, case):
    text, message = BAD_CONFIGS[case]
    (tmp_path / "c.toml").write_bytes(text if isinstance(text, bytes) else text.encode())
    if case in BUILDS_FILES:
        (tmp_path / "b.toml").write_bytes(BUILDS_FILES[case])
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["run", "--config", "c.toml"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output  # not an exception
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["c.toml", *(["b.toml"] if case in BUILDS_FILES else [])]
    )


def _in_own_mount(mount: str, options: str, argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run `argv` with a fresh tmpfs (`options`, e.g. size=600k or ro) mounted on `mount`, in a mount
    namespace of its own: a real full or read-only file system that vanishes with the process. What is left
    on the mount is listed, but for the marker that claims an output directory as the tool's (no report)."""
    script = (
        'mount -t tmpfs -o "$1" tmpfs "$2" || exit 99; m=$2; shift 2; "$@"; rc=$?; '
        'echo "left on the mount: $(ls -A -I .gonka-evidence-output "$m")"; exit $rc'
    )
    result = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh", options, mount, *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode == 99 or "unshare failed" in result.stderr:
        pytest.skip(f"cannot mount a tmpfs in a user namespace here: {result.stderr.strip()}")
    return result


FULL_OR_READ_ONLY = {
    # case: (what is mounted, mount options, config lines, what the message says)
    "disk full under the warehouse": (
        "wh",
        "size=600k",
        'warehouse = "wh/warehouse.duckdb"\n',
        "No space left on device",
    ),
    "disk full under the reports": (
        "out",
        "size=100k",
        'output = "out"\n',
        "out/epoch-1: cannot write the report (No space left on device)",
    ),
    "read-only reports directory": (
        "out",
        "ro",
        'output = "out"\n',
        "out/epoch-1: cannot write the report (Read-only file system)",
    ),
}


# a real full or read-only tmpfs; stands in the default tier:
# tests/jobs/test_run.py::test_a_bad_config_or_builds_file_stops_the_run_with_one_line,
# tests/output/test_output_safety.py::test_an_unwritable_output_is_one_line
@pytest.mark.heavy
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1) to mount a private tmpfs")
@pytest.mark.parametrize("case", sorted(FULL_OR_READ_ONLY))
def test_a_full_disk_or_a_read_only_directory_stops_the_run_with_one_line_and_nothing_half_written(
    tmp_path, timeline, case
):
    mount, options, lines, message = FULL_OR_READ_ONLY[case]
    _place_copy(tmp_path, timeline, 3)
    timeline.write_builds_toml(tmp_path / "builds.toml")
    (tmp_path / "c.toml").write_text(
        f'{lines}host = "{timeline.focal_host}"\nbuilds = "builds.toml"\n[[sources]]\npath = "copy"\n'
    )
    (tmp_path / mount).mkdir()
    result = _in_own_mount(mount, options, [SCRIPT, "run", "--config", "c.toml"], cwd=tmp_path)
    line = _one_line_error(result)
    assert message in line and "the run stopped and replaced nothing" in line, line
    assert result.stdout.rstrip().endswith("left on the mount:"), result.stdout[-300:]
    # What the failed run leaves beside its files: nothing (no warehouse, no copy, no lock, no staging).
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["builds.toml", "c.toml", "copy", mount])


# a real run killed; stands in the default tier:
# tests/jobs/test_run.py::test_the_next_run_removes_what_killed_runs_left_and_marks_their_ingests_aborted
@pytest.mark.heavy
def test_a_run_killed_mid_way_is_cleaned_up_by_the_next_one(tmp_path, timeline):
    import signal
    import time

    cfg = _config(tmp_path, timeline)
    _place_copy(tmp_path, timeline, 4)
    wh = tmp_path / "wh" / "warehouse.duckdb"
    run = subprocess.Popen(
        [SCRIPT, "run", "--config", str(cfg)], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    copy = wh.with_name(f"warehouse.duckdb.run-{run.pid}.tmp")
    deadline = time.monotonic() + 300
    while not copy.exists() and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    run.send_signal(signal.SIGKILL)
    run.wait()
    assert copy.exists() and not wh.exists()  # killed while it worked on its copy: nothing published

    second = runner.invoke(app, ["run", "--config", str(cfg)])
    assert second.exit_code == 0, second.output
    assert f"removed {copy}: left by an interrupted run" in second.output
    assert "new reports: epoch 2, epoch 3" in second.output  # the copy of epoch 4 holds epochs 2-4
    assert sorted(p.name for p in wh.parent.iterdir()) == ["warehouse.duckdb"]  # no copy, no lock, no WAL
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        OUTPUT_MARKER,
        "epoch-2",
        "epoch-3",
        "index-charts",
        "index.html",
        "index.md",
    ]


BOX_DRAWING = set("─━│┃┌┐└┘├┤┬┴┼╇╈┡┩")


# a whole run end to end (.ci/run runs it); stands in the default tier:
# tests/api/test_api.py::test_run_says_its_lines_to_the_listener_and_keeps_them,
# tests/cli/test_conventions.py::test_data_on_stdout_notices_on_stderr_quiet_and_verbose
@pytest.mark.heavy
def test_run_prints_one_line_per_fact_and_the_tables_only_with_verbose(tmp_path, timeline):
    import polars as pl

    from pipeline import open_warehouse
    from pipeline.core.times import iso_utc

    # A long lag keeps epoch 2 (one escrow never settles) open: both kinds of open epoch are shown.
    cfg = _config(tmp_path, timeline, lag="100d")
    _place_copy(tmp_path, timeline, 3)

    def run(*flags: str) -> list[str]:  # stdout is a pipe here, as in a cron job's log
        result = subprocess.run(
            [SCRIPT, "run", "--config", str(cfg), *flags], cwd=tmp_path, capture_output=True, text=True, timeout=600
        )
        assert result.returncode == 0 and result.stderr == "", result.stdout + result.stderr
        return result.stdout.splitlines()

    def open_epoch_lines() -> list[str]:
        with open_warehouse(tmp_path / "wh/warehouse.duckdb") as wh:
            still_open = wh.query("closed_epochs", lag_seconds=100 * 86400).filter(pl.col("closed_at").is_null())
        lines = []
        for e in still_open.iter_rows(named=True):
            head = f"open: epoch {e['epoch_id']} ({e['escrows_settled']} of {e['escrows']} escrows settled"
            lines.append(
                f"{head}): no escrow settled yet; closes when all settle, or 100d after the last settlement"
                if e["last_settled_at"] is None
                else f"{head}, last at {iso_utc(e['last_settled_at'])}): closes when all escrows settle, or at "
                f"{iso_utc(e['last_settled_at'] + timedelta(days=100))} (finality_lag 100d) if none settles "
                f"before; data clock {iso_utc(e['data_clock'])}"
            )
        return lines

    first = run()
    with open_warehouse(tmp_path / "wh/warehouse.duckdb") as wh:
        quarantined, escrows = wh.query("SELECT (SELECT count(*) FROM quarantine), (SELECT count(*) FROM escrows)").row(
            0
        )
    assert first[0].startswith("config: ")
    (ingested,) = [line for line in first if line.startswith("ingested ")]
    assert ingested.startswith(f"ingested {tmp_path / 'copy'}: ")  # the whole source name, on one line
    assert f"escrows changed {escrows}, unchanged 0;" in ingested and f"quarantined rows: {quarantined};" in ingested
    assert f"new reports: epoch 1 in {tmp_path / 'out'}" in first
    expected_open = open_epoch_lines()
    assert [line.split(" (")[0] for line in expected_open] == ["open: epoch 2", "open: epoch 3"]
    assert "(finality_lag 100d)" in expected_open[0] and "no escrow settled yet" in expected_open[1]
    assert [line for line in first if line.startswith("open: ")] == expected_open
    assert first[-1] == "warehouse: updated"
    assert f"index of every closed epoch: {tmp_path / 'out' / 'index.html'}" in first
    details = [line for line in first if line.startswith("  ")]  # indented under the ingest line
    detail_heads = (
        "  other builds in this copy, read: ",
        "  warning: columns the copy lacks, read as NULL (unknown): ",
        "  replay rule sets (escrows): ",  # the rule set each escrow's seals chose (escrow_rule_sets)
    )
    assert all(line.startswith(detail_heads) for line in details), "\n".join(first)
    # One preflight line per build label of builds.toml (the sample names one label twice), no table.
    preflight = [line for line in first if line.startswith("preflight of ")]
    assert len(preflight) == 4 and any(
        line.startswith("preflight of V2 + DSpark, raw_logprobs: fail ") for line in preflight
    )
    assert len(first) - len(details) - len(preflight) <= 8 and not any(line.startswith(("|", "###")) for line in first)

    _place_copy(tmp_path, timeline, 4)
    assert f"new reports: epoch 3 in {tmp_path / 'out'}" in run()
    assert [line.split(" (")[0] for line in open_epoch_lines()] == ["open: epoch 2", "open: epoch 4"]
    verbose = run("--verbose")
    assert "reports: nothing new" in verbose and verbose[-1] == "warehouse: unchanged (nothing new)"
    assert [line for line in verbose if line.startswith("open: ")] == open_epoch_lines()
    assert any("per-epoch summary" in line for line in verbose)
    assert any(line.startswith("### ") for line in verbose) and any(line.startswith("| ") for line in verbose)
    assert not BOX_DRAWING & set("".join(verbose))  # a log file gets plain columns
    # Nothing wraps in a log file: every Markdown row is whole on its line, however wide.
    table_lines = [line for line in verbose if line.startswith("| ")]
    assert all(line.endswith(" |") for line in table_lines), [line for line in table_lines if not line.endswith(" |")]
    assert any(len(line) > 200 and "output_tokens" in line for line in table_lines)

    assert run("--quiet") == []


# -- the config file as an input: every optional key left out ------------------------------------------------


def _full_config(dir: Path) -> dict:
    """A config with every key set: the samples' store and vLLM log, as the shipped config names them."""
    samples = ROOT / "data-samples"
    return {
        "warehouse": "wh/warehouse.duckdb",
        "output": "reports",
        "host": sample_config().host,
        "builds": str(samples / "builds.toml"),
        "finality_lag": "6h",
        "sources": [
            {"path": str(samples / "store"), "kind": "store", "label": "copy"},
            {"path": str(samples / "vllm"), "kind": "vllm", "label": "log", "timezone": "UTC", "year": 2026},
        ],
    }


def _write_toml(path: Path, doc: dict) -> Path:
    lines = [f"{k} = {v!r}".replace("'", '"') for k, v in doc.items() if k != "sources"]
    for s in doc.get("sources", []):
        lines += ["", "[[sources]]", *(f"{k} = {v!r}".replace("'", '"') for k, v in s.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def _optional_source_keys(entry: dict) -> list[str]:
    """The keys of a [[sources]] entry that it may leave out: all but its url/path, and its kind only where
    the kind is detected without it (pipeline/ingest/kinds.py)."""
    from pipeline.ingest.kinds import kind_of

    found = kind_of({k: v for k, v in entry.items() if k != "kind"})
    return [k for k in entry if k not in ("url", "path") and (k != "kind" or found is not None)]


def _left_out_cases() -> dict[str, tuple[list[str], dict[int, list[str]]]]:
    """Per case: the top-level keys and, per source entry, the keys left out; from the config's own
    definition (OPTIONAL_KEYS, the source kinds), one case per key, all of them together, and the config a
    new host writes first (store only: no builds, no log source)."""
    from pipeline.jobs.config import OPTIONAL_KEYS

    entries = _full_config(Path("."))["sources"]
    cases: dict[str, tuple[list[str], dict[int, list[str]]]] = {key: ([key], {}) for key in OPTIONAL_KEYS}
    for i, entry in enumerate(entries):
        for key in _optional_source_keys(entry):
            cases[f"sources[{i}].{key}"] = ([], {i: [key]})
    cases["all together"] = (list(OPTIONAL_KEYS), {i: _optional_source_keys(e) for i, e in enumerate(entries)})
    cases["store only, no builds"] = (["builds"], {1: ["*"]})
    return cases


# a whole run per case; stands in the default tier:
# tests/jobs/test_run.py::test_the_warehouse_layer_never_meets_an_unfinished_result,
# tests/jobs/test_run.py::test_config_keys_env_overrides_and_errors
@pytest.mark.heavy
@pytest.mark.parametrize("case", sorted(_left_out_cases()))
def test_a_config_without_an_optional_key_still_writes_the_reports(tmp_path, monkeypatch, case):
    """The config a new host writes first (host, warehouse, output, one store source) ended `run` in a DuckDB
    `ResourceInUseException` (an unfinished result left on the connection): every key the config calls optional
    may be left out, alone or together, and the run still writes its reports."""
    for key in CONFIG_KEYS:
        monkeypatch.delenv(f"GONKA_EVIDENCE_{key.upper()}", raising=False)
    monkeypatch.chdir(tmp_path)
    top, per_source = _left_out_cases()[case]
    doc = _full_config(tmp_path)
    for key in top:
        del doc[key]
    sources = []
    for i, entry in enumerate(doc["sources"]):
        if per_source.get(i) != ["*"]:
            sources.append({k: v for k, v in entry.items() if k not in per_source.get(i, [])})
    doc["sources"] = sources
    cfg = _write_toml(tmp_path / "gonka-evidence.toml", doc)
    outcome = run_job(cfg, None)
    out = tmp_path / doc.get("output", "out")
    assert sorted(p.parent.name for p in out.glob("epoch-*/report.md")) == ["epoch-2", "epoch-3"], outcome


# a whole run; stands in the default tier:
# tests/jobs/test_run.py::test_the_warehouse_layer_never_meets_an_unfinished_result
@pytest.mark.heavy
def test_a_postgres_only_config_writes_the_reports(tmp_path, monkeypatch, timeline, pg_database):
    """host, warehouse, output and one PostgreSQL source (no builds, no logs) ended like the store-only config,
    in DuckDB's ResourceInUseException."""
    for key in CONFIG_KEYS:
        monkeypatch.delenv(f"GONKA_EVIDENCE_{key.upper()}", raising=False)
    url = pg_database()
    timeline.copy(last_epoch=4).write_postgres(url)
    cfg = _write_toml(
        tmp_path / "gonka-evidence.toml",
        {"host": timeline.focal_host, "warehouse": "w.duckdb", "output": "out", "sources": [{"url": url}]},
    )
    run_job(cfg, None)
    assert sorted(p.parent.name for p in (tmp_path / "out").glob("epoch-*/report.md"))


def test_the_warehouse_layer_never_meets_an_unfinished_result(tmp_path):
    """DuckDB 2 refuses a connection's next relation or registration while an `execute()` result is unread:
    `scalar` read a count with fetchone(), and `run`'s `content_parts` once failed so. Whether DuckDB refuses
    depends on the state of the query (the same code later ran clean), so this states the contract of the
    warehouse layer rather than replaying that failure: results read to the end, relations made after
    completing what an earlier `execute()` left."""
    import pyarrow as pa

    from pipeline.ingest.runs import scalar
    from pipeline.jobs.run import content_parts
    from pipeline.warehouse.database import fetch_frame, open_for_write

    con = open_for_write(tmp_path / "w.duckdb")
    try:
        assert scalar(con.execute("SELECT count(*) FROM range(1000)")) == 1000
        con.register("rows_after", pa.table({"a": [1]}))  # refused after a result read in part
        con.unregister("rows_after")
        assert content_parts(con)  # a relation right after
        con.execute("SELECT * FROM range(100000)")  # a caller that reads nothing of its result
        assert fetch_frame(con, "SELECT 1 AS one")["one"].to_list() == [1]
    finally:
        con.close()
