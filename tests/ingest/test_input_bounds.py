"""Every parser bounded: nesting depth of TOML and JSON, integers in names, the longest log
line, how far a gzip log may inflate. Past a limit of pipeline/core/limits.py an input is a counted quarantine or
a one-line error naming the file and the limit, never a traceback; the limits are made small here through
`limits.bounded`, so each case runs in about a second."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from pipeline.core import limits
from pipeline.ingest.logs import ingest_logs
from pipeline.jobs.config import ConfigError, load_config
from pipeline.sources.logs import vllm
from pipeline.sources.logs.files import LogFile, expand
from pipeline.sources.store.payloads import PayloadListing, payload_files
from pipeline.warehouse.database import open_for_write

DATA = Path(__file__).resolve().parents[2] / "data-samples"
HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"


def _quarantine(wh: Path) -> list[tuple[str, str, str]]:
    con = open_for_write(wh)
    try:
        return con.execute("SELECT table_name, row_key, reason FROM quarantine ORDER BY row_key").fetchall()
    finally:
        con.close()


def _ingest(wh: Path, path: Path, kind: str = "vllm"):
    con = open_for_write(wh)
    try:
        return ingest_logs(con, [path], host=HOST, kind=kind, year=2026)
    finally:
        con.close()


# -- nesting depth ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["[" * 5000 + "]" * 5000, "{ a = " * 3000 + "1" + " }" * 3000, "[" * 40 + "]" * 40])
def test_a_config_nested_past_the_depth_limit_is_one_line(tmp_path, value):
    """tomllib recursed per level: a few thousand ended in a RecursionError traceback."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"finality_lag = 60\nx = {value}\n")
    with limits.bounded(depth=32), pytest.raises(ConfigError) as err:
        load_config(cfg)
    assert str(err.value) == f"{cfg}: nested deeper than 32 levels (limit: pipeline/core/limits.py)"


def test_a_poc_result_nested_past_the_depth_limit_is_quarantined(tmp_path):
    """json.loads of a PoC result nested 5,000 deep raised a RecursionError traceback."""
    logs = tmp_path / "poc"
    logs.mkdir()
    (logs / "poc_results.json").write_text('{"n_total": 10, "results": ' + "[" * 5000 + "]" * 5000 + "}\n")
    summary = _ingest(tmp_path / "w.duckdb", logs, kind="poc")
    assert summary.unparsed == 1 and summary.rows.get("poc_results", 0) == 0
    assert summary.unrecognised == [(str(logs / "poc_results.json"), "poc")]


def test_nesting_is_counted_outside_strings_only():
    deep = b'{"a": "' + b"[" * 500 + b'"}'  # brackets in a string do not nest
    assert limits.nesting_past(deep) is None
    assert limits.nesting_past(b"[" * 300 + b"]" * 300) == 300


# -- integers in names ------------------------------------------------------------------------------------------


def test_payload_and_epoch_names_past_int64_are_strays_not_tracebacks(tmp_path):
    """A payload file or an epoch directory named by a number past int64 ended in an overflow traceback."""
    root = tmp_path / "payloads"
    shutil.copytree(DATA / "store" / "payloads", root)
    escrow = next((root / "2").iterdir())
    huge = "9" * 30
    (escrow / f"{huge}.json").write_text("{}")
    (root / huge / "escrow").mkdir(parents=True)
    listing = PayloadListing()
    found = list(payload_files(root, set(), listing))
    assert found and all(f.inference_id < 2**63 and f.epoch_id < 2**63 for f in found)
    assert f"2/{escrow.name}/{huge}.json" in listing.strays and huge in listing.strays


# -- the longest log line ---------------------------------------------------------------------------------------


def test_a_line_less_log_is_never_held_whole(tmp_path):
    """One line without a newline was carried whole from read to read (300 MiB peaked at 8.6 GB): past the line
    limit only its head is kept, the rest is read past."""
    log = tmp_path / "vllm.log"
    log.write_bytes(b"\0" * (4 << 20))
    (file,) = expand([log])
    with limits.bounded(line_bytes=64 << 10):
        blocks = list(vllm._chunks(file, 256 << 10))
    assert [len(b) for b in blocks] == [(64 << 10) + 1]


def test_a_line_past_the_limit_is_cut_counted_and_quarantined_and_the_rest_read(tmp_path):
    lines = (DATA / "vllm" / "vllm.log").read_bytes().splitlines(keepends=True)
    log = tmp_path / "vllm.log"
    long_line = b"INFO 01-02 03:04:05 [x.py:1] " + b"y" * (200 << 10) + b"\n"
    log.write_bytes(b"".join(lines[:50]) + long_line + b"".join(lines[50:]) + b"z" * (300 << 10))
    plain = tmp_path / "plain.log"
    plain.write_bytes(b"".join(lines))
    wh_plain, wh = tmp_path / "plain.duckdb", tmp_path / "w.duckdb"
    with limits.bounded(line_bytes=100 << 10):
        before = _ingest(wh_plain, plain)
        summary = _ingest(wh, log)
    assert summary.lines == before.lines + 2  # the cut lines keep their numbers
    assert summary.unparsed == before.unparsed + 2 and summary.cut == 2
    assert {t: n for t, n in summary.rows.items() if n} == {t: n for t, n in before.rows.items() if n}
    cut = [r for r in _quarantine(wh) if "the line limit" in r[2]]
    assert sorted(int(r[1].rsplit(":", 1)[1]) for r in cut) == [51, len(lines) + 2]
    assert all(f"longer than {100 << 10:,} bytes" in r[2] for r in cut)


# -- how far a gzip log inflates --------------------------------------------------------------------------------


def test_a_gzip_log_that_inflates_past_the_ratio_is_quarantined_whole(tmp_path):
    """A small gzip of newlines (1 GiB inflated ran for minutes) stops once it inflates past the ratio."""
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(DATA / "vllm" / "vllm.log", logs / "vllm.log")
    with gzip.open(logs / "bomb.log.gz", "wb", compresslevel=9) as fh:
        fh.write(b"\n" * (4 << 20))
    with limits.bounded(inflate_floor=256 << 10):
        summary = _ingest(tmp_path / "w.duckdb", logs)
    assert summary.files == 1 and summary.rows["log_engine_stats"] > 0  # the plain log is read
    (bomb,) = summary.not_read
    assert bomb.startswith(f"{logs / 'bomb.log.gz'}: inflates more than 200 times")
    assert ("log_file", str(logs / "bomb.log.gz")) in [r[:2] for r in _quarantine(tmp_path / "w.duckdb")]


def test_a_gzip_log_that_inflates_like_a_log_is_read(tmp_path):
    log = tmp_path / "vllm.log.gz"
    with gzip.open(log, "wb") as fh:
        fh.write((DATA / "vllm" / "vllm.log").read_bytes())
    with limits.bounded(inflate_floor=1 << 10):
        summary = _ingest(tmp_path / "w.duckdb", log)
    assert summary.not_read == [] and summary.rows["log_engine_stats"] > 0


def test_a_file_read_whole_is_bounded(tmp_path):
    big = tmp_path / "poc_results.json"
    big.write_text('{"n_total": 1}\n' * 1000)
    with limits.bounded(whole_file_bytes=1000), pytest.raises(limits.PastLimit, match="the most read whole"):
        LogFile(big, expand([big])[0].mtime).read_whole()
