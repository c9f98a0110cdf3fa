"""Logs and saved JSON that are empty, hostile or not files: each gets a word (a
warning and `--strict` exit 3, or a one-line error), a counted quarantine row, and the accounting
identity holds. Inputs that could block a read (a FIFO, a device) run through the console script with a timeout:
a hang fails the test; regular files run the same command in-process (tests.helpers.cli_in), which asserts the
same exit code and stderr (an exception the CLI did not turn into an exit is raised there)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb

from pipeline.ingest.accounting import identity_violations
from pipeline.samples.logs import HOST
from tests.helpers import Done, cli_in

DATA = Path(__file__).resolve().parents[2] / "data-samples"


def _cli(*args: str) -> subprocess.CompletedProcess:
    entry_point = Path(sys.executable).with_name("gonka-evidence")
    return subprocess.run([str(entry_point), *args], capture_output=True, text=True, timeout=120)


def _in(*args: str) -> Done:
    """The same command in-process, for regular files (nothing that could block a read)."""
    return cli_in(Path.cwd(), *args)


def _warehouse(path: Path) -> tuple[list[tuple], dict[str, tuple]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        assert identity_violations(con) == []
        bad = con.execute("SELECT table_name, row_key, reason FROM quarantine").fetchall()
        acct = con.execute(
            "SELECT input, rows_read, rows_used, rows_deduplicated, rows_quarantined FROM ingest_accounting"
        ).fetchall()
    finally:
        con.close()
    return bad, {r[0]: r[1:] for r in acct}


def _one_line_error(proc: subprocess.CompletedProcess | Done, *words: str) -> None:
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and all(w in lines[0] for w in words), proc.stderr


def test_a_fifo_or_dev_zero_given_to_ingest_logs_is_refused(tmp_path):
    fifo = tmp_path / "vllm.log"
    os.mkfifo(fifo)
    _one_line_error(_cli("ingest-logs", str(fifo), "--host", HOST, "-w", str(tmp_path / "w.duckdb")), "a FIFO")
    _one_line_error(
        _cli("ingest-logs", "/dev/zero", "--host", HOST, "-w", str(tmp_path / "w.duckdb")), "character device"
    )


def test_a_fifo_inside_a_log_directory_is_named_and_counted(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "vllm.log").write_bytes((DATA / "vllm" / "vllm.log").read_bytes())
    os.mkfifo(logs / "pipe.log")
    wh = tmp_path / "w.duckdb"
    proc = _cli("ingest-logs", str(logs), "--host", HOST, "-w", str(wh), "--strict")
    assert proc.returncode == 3, proc.stderr
    assert "pipe.log: not a regular file (a FIFO)" in proc.stderr
    bad, acct = _warehouse(wh)
    assert [b for b in bad if b[0] == "log_file"] == [
        ("log_file", str(logs / "pipe.log"), "not a regular file (a FIFO): not read")
    ]
    assert acct["log files"] == (2, 1, 0, 1)


def test_a_gzip_log_with_a_bad_crc_is_one_line(tmp_path):
    data = bytearray(gzip.compress((DATA / "vllm" / "vllm.log").read_bytes() * 2))
    data[-6] ^= 0xFF  # the CRC32 in the trailer
    bad = tmp_path / "vllm.log.gz"
    bad.write_bytes(bytes(data))
    _one_line_error(_in("ingest-logs", str(bad), "--host", HOST, "-w", str(tmp_path / "w.duckdb")), "CRC check failed")


def test_an_empty_log_gets_a_word_and_strict_exits_3(tmp_path):
    empty = tmp_path / "vllm.log"
    empty.write_text("")
    wh = tmp_path / "w.duckdb"
    proc = _in("ingest-logs", str(empty), "--host", HOST, "-w", str(wh), "--kind", "vllm", "--strict")
    assert proc.returncode == 3, proc.stderr
    assert "empty (no lines)" in proc.stderr
    bad, acct = _warehouse(wh)
    assert ("log_file", str(empty), "empty: no lines") in bad
    assert acct["log files"] == (1, 0, 0, 1)


def test_non_finite_metrics_are_quarantined_not_stored(tmp_path):
    scrape = tmp_path / "metrics.prom"
    scrape.write_text(
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="m"} 2 1764720000000\n'
        'vllm:num_requests_waiting{model_name="m"} NaN 1764720000000\n'
        'vllm:num_requests_waiting{model_name="m"} +Inf 1764720000000\n'
        'vllm:kv_cache_usage_perc{model_name="m"} 1e400 1764720000000\n'
        'vllm:kv_cache_usage_perc{model_name="m"} 0.5 99999999999999999999999999999\n'
    )
    wh = tmp_path / "w.duckdb"
    proc = _in("ingest-logs", str(scrape), "--host", HOST, "-w", str(wh), "--strict")
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr
    bad, acct = _warehouse(wh)
    reasons = sorted(b[2] for b in bad)
    assert sum("is not a finite number" in r for r in reasons) == 3
    assert sum("timestamp 99999999999999999999999999999 is out of range" in r for r in reasons) == 1
    con = duckdb.connect(str(wh), read_only=True)
    try:
        values = [r[0] for r in con.execute("SELECT value FROM metric_samples").fetchall()]
        assert con.execute("SELECT count(*) FROM engine_stats").fetchone()[0] >= 0  # the view still answers
    finally:
        con.close()
    assert values == [2.0]
    assert acct["log lines"] == (6, 2, 0, 4)


def _json(tmp_path: Path, name: str, document) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def test_saved_json_of_a_negative_epoch_is_rejected_with_a_count(tmp_path):
    record = {"participant": "gonka1abc", "model": "m", "assigned_nonces": 3, "counters": []}
    path = _json(
        tmp_path,
        "participants.json",
        [{"epoch_index": -4, "participants": [record]}, {"epoch_index": 5, "participants": [record]}],
    )
    wh = tmp_path / "w.duckdb"
    proc = _in("ingest-json", str(path), "-w", str(wh), "--strict")
    assert proc.returncode == 3, proc.stderr
    bad, acct = _warehouse(wh)
    assert any("epoch_index -4 is negative" in b[2] for b in bad)
    con = duckdb.connect(str(wh), read_only=True)
    try:
        assert con.execute("SELECT epoch_id FROM api_participants").fetchall() == [(5,)]
    finally:
        con.close()
    assert acct["json api_participants"] == (1, 1, 0, 0)
    assert acct["json json_file"] == (1, 0, 0, 1)


def test_json_with_nothing_recognisable_gets_a_word_and_strict_exits_3(tmp_path):
    path = _json(tmp_path, "other.json", {"hello": [1, 2, {"world": True}]})
    wh = tmp_path / "w.duckdb"
    proc = _in("ingest-json", str(path), "-w", str(wh), "--strict")
    assert proc.returncode == 3, proc.stderr
    assert "nothing recognisable" in proc.stderr
    bad, acct = _warehouse(wh)
    assert [b[0] for b in bad] == ["json_file"]
    assert acct["json files"] == (1, 0, 0, 1)


STATS_LINE = (
    "(APIServer pid=1) INFO {date} 08:13:50 [v1/metrics/loggers.py:236] Engine 000: Avg prompt throughput: "
    "357.4 tokens/s, Avg generation throughput: 160.9 tokens/s, Running: 13 reqs, Waiting: 3 reqs, "
    "GPU KV cache usage: 70.9%, Prefix cache hit rate: 57.7%\n"
)


def _stats_dated(tmp_path, dates: tuple[str, ...], year: int, name: str = "w") -> tuple[int, list, dict, list]:
    """(exit code, quarantine rows, accounting, MM-DD of the stats rows) of a log of one stats line per date."""
    log = tmp_path / "vllm.log"
    log.write_text("".join(STATS_LINE.format(date=d) for d in dates))
    wh = tmp_path / f"{name}.duckdb"
    proc = _in("ingest-logs", str(log), "--host", HOST, "--year", str(year), "-w", str(wh), "--strict")
    bad, acct = _warehouse(wh)
    con = duckdb.connect(str(wh), read_only=True)
    try:
        read = [
            d for (d,) in con.execute('SELECT strftime("at", \'%m-%d\') FROM log_engine_stats ORDER BY "at"').fetchall()
        ]
    finally:
        con.close()
    return proc.returncode, [b[2] for b in bad], acct, read


def test_feb_29_under_a_non_leap_year_is_quarantined_not_moved_to_the_28th(tmp_path):
    code, bad, acct, read = _stats_dated(tmp_path, ("02-28", "02-29"), 2025)
    assert code == 3
    assert bad == ["unparsed line 2 of vllm.log: 02-29 does not exist in 2025 (--year 2025): the record is not dated"]
    assert read == ["02-28"]
    assert acct["log lines"] == (2, 1, 0, 1)
    # in a leap year the same line is read as written
    code, bad, _, read = _stats_dated(tmp_path, ("02-28", "02-29"), 2024, "w2")
    assert (code, bad, read) == (0, [], ["02-28", "02-29"])


def test_a_31st_of_a_30_day_month_is_quarantined_and_the_31st_of_a_long_month_kept(tmp_path):
    code, bad, _, read = _stats_dated(tmp_path, ("03-31", "04-30", "04-31", "05-31"), 2024)
    assert code == 3
    assert bad == ["unparsed line 3 of vllm.log: 04-31 does not exist in 2024 (--year 2024): the record is not dated"]
    assert read == ["03-31", "04-30", "05-31"]
