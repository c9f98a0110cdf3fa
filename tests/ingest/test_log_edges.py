"""Smaller edges of the log ingest and the build timeline: a log still being appended to, thousands of
empty files, a source of the wrong kind in `run`, an unknown key in a builds.toml entry."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from pipeline.ingest.builds import BuildsError, read_builds_document
from pipeline.sources.logs.files import expand

ROOT = Path(__file__).resolve().parents[2]
HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # the samples' focal host


def test_a_log_being_appended_to_is_read_as_it_was_when_opened(tmp_path):
    """The reader went on until it caught the writer (61 s, 2.17M lines in the probe): now it stops at the
    size the file had when it was first opened, whatever is appended meanwhile (larger than the read buffer)."""
    path = tmp_path / "vllm.log"
    line = "INFO 01-02 03:04:05 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s\n"
    count = 3 * (1 << 20) // len(line) + 1
    path.write_text(line * count, encoding="utf-8")
    (file,) = expand([path])
    lines = file.lines()
    assert next(lines) == line.rstrip("\n")
    with path.open("a", encoding="utf-8") as writer:
        writer.write(line * count)  # the writer goes on
    assert 1 + sum(1 for _ in lines) == count
    with file.open_bytes() as fh:  # a second pass (the parse after the identity) stops at the same place
        assert len(fh.read()) == count * len(line)


def test_thousands_of_empty_log_files_cost_little(tmp_path):
    """3,000 empty files took 100 s: one transaction and one quarantine insert each. Now one for all,
    each still named and quarantined."""
    from pipeline.ingest.logs import ingest_logs
    from pipeline.warehouse.database import open_for_write

    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(3000):
        (logs / f"vllm-{i:04d}.log").touch()
    con = open_for_write(tmp_path / "w.duckdb")
    try:
        started = time.monotonic()
        summary = ingest_logs(con, [logs], host=HOST, kind="vllm")
        elapsed = time.monotonic() - started
        assert len(summary.not_read) == 3000 and summary.files == 3000
        assert con.execute("SELECT count(*) FROM quarantine WHERE reason = 'empty: no lines'").fetchone() == (3000,)
    finally:
        con.close()
    assert elapsed < 15, elapsed  # ~0.5 s here; the old path took ~60 s on this machine


def test_run_warns_of_a_source_of_the_wrong_kind_as_ingest_logs_does(tmp_path):
    """A store directory configured as `vllm`: `run` said "nothing new" where `ingest-logs` warns."""
    from pipeline.core.events import Listener, listening
    from pipeline.jobs.run import run_job

    # The bundled store's database files without its 120 payload files (each read as a log: most of the
    # test's time, and the same warning of every file).
    store = tmp_path / "store"
    shutil.copytree(ROOT / "data-samples" / "store", store, ignore=shutil.ignore_patterns("payloads"))
    cfg = tmp_path / "gonka-evidence.toml"
    cfg.write_text(
        f'warehouse = "w.duckdb"\noutput = "out"\nhost = "{HOST}"\n'
        f'[[sources]]\npath = "{store}"\nkind = "vllm"\nlabel = "mistaken"\n',
        encoding="utf-8",
    )
    lines: list[str] = []
    with listening(Listener(line=lines.append)):
        run_job(cfg, None)
    assert any("files with nothing recognised" in line for line in lines), lines
    # run's warnings stay in its log (stdout), as '  warning: …' lines
    assert any(
        line.startswith("  warning: ")
        and line.endswith(
            "_meta.db: nothing recognised as a vllm log (wrong --kind?); its unreadable lines are in quarantine"
        )
        for line in lines
    ), lines


@pytest.mark.parametrize(
    "entry, key",
    [('lable = "x"', "lable"), ('until = "2026-01-02T00:00:00Z"', "until"), ('build = "x"', "build")],
)
def test_an_unknown_key_in_a_builds_entry_is_refused_by_name(tmp_path, entry, key):
    path = tmp_path / "builds.toml"
    path.write_text(
        f'[[builds]]\nhost = "{HOST}"\nlabel = "a"\nsince = "2026-01-01T00:00:00Z"\n{entry}\n', encoding="utf-8"
    )
    with pytest.raises(BuildsError, match=f"entry 1 has unknown key\\(s\\) {key} \\(keys: host, label, since\\)"):
        read_builds_document(path)
