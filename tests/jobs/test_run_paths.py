"""`run`'s paths at the edges: a warehouse path that is a symlink, `~` in the config, the warehouse and
the output naming one path."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest

from pipeline.jobs.config import load_config
from pipeline.jobs.run import RunError, run_job

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "data-samples" / "store"
HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # focal host of data-samples/


def _config(directory: Path, warehouse: str, output: str = "out", store: Path = STORE, host: str = HOST) -> Path:
    cfg = directory / "gonka-evidence.toml"
    cfg.write_text(
        f'warehouse = "{warehouse}"\noutput = "{output}"\nhost = "{host}"\n'
        f'[[sources]]\npath = "{store}"\nkind = "store"\nlabel = "data-samples"\n',
        encoding="utf-8",
    )
    return cfg


def _small_store(directory: Path, timeline) -> Path:
    """A copy of epoch 1 only: a whole run (ingest, staged copy, publish) that closes no epoch, so builds no
    report: the paths below are the warehouse's, whatever the reports."""
    return timeline.copy(last_epoch=1).write_sqlite(directory / "copy")


def _runs(warehouse: Path) -> int:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute("SELECT count(*) FROM ingest_runs").fetchone()[0]


def test_a_warehouse_symlink_is_written_through_to_its_target(tmp_path, timeline):
    """The link was replaced by a regular file holding the new data, while the file it named stayed old."""
    real = tmp_path / "data" / "w.duckdb"
    real.parent.mkdir()
    link = tmp_path / "w.duckdb"
    link.symlink_to(real)
    run_job(_config(tmp_path, "w.duckdb", store=_small_store(tmp_path, timeline), host=timeline.focal_host), None)
    assert link.is_symlink() and link.resolve() == real
    assert _runs(real) >= 1
    assert not (tmp_path / "w.duckdb.run.lock").exists()


def test_a_tilde_in_the_config_is_the_home_directory_everywhere(tmp_path, monkeypatch, timeline):
    """`warehouse = "~/w.duckdb"` was taken literally by the run (a directory named `~`) and expanded by
    DuckDB, leaving a temporary copy in $HOME."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    cfg = _config(Path("."), "~/w.duckdb", store=_small_store(tmp_path, timeline), host=timeline.focal_host)
    assert load_config(cfg).warehouse == home / "w.duckdb"
    run_job(cfg, None)
    assert _runs(home / "w.duckdb") >= 1
    assert not (work / "~").exists()
    assert sorted(p.name for p in home.iterdir()) == ["w.duckdb"]


def test_warehouse_and_output_naming_one_path_is_refused_up_front(tmp_path):
    """In a fresh directory the reports went into a directory `w.duckdb/`, and the run then blamed
    "another writer"."""
    with pytest.raises(RunError, match="name the same path"):
        run_job(_config(tmp_path, "w.duckdb", output="w.duckdb"), None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gonka-evidence.toml"]


def test_a_path_as_given_on_the_command_line_is_never_expanded_by_duckdb(tmp_path, monkeypatch):
    """A `-w '~/x'` that reached the pipeline unexpanded (quoted) is a directory named `~` to every part,
    DuckDB included."""
    from pipeline.warehouse.database import open_for_write

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "~").mkdir()
    open_for_write(Path("~/w.duckdb")).close()
    assert (tmp_path / "~" / "w.duckdb").exists()
    assert not os.listdir(home)
