"""Every class of hostile input (issue 34, point 5): each is a clear error or a counted quarantine, never a
silent change, a traceback or a hang. One test per class; the inputs come from the project's sample
generators, mutated the way a broken writer or copy would."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import duckdb
import pytest

from pipeline.ingest.accounting import identity_violations
from pipeline.ingest.logs import ingest_logs
from pipeline.samples.logs import HOST, write_log_samples
from pipeline.warehouse.database import open_for_write, open_read_only
from tests.helpers import frame, ingest


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, timeline) -> Path:
    store = tmp_path_factory.mktemp("pristine") / "store"
    timeline.copy(last_epoch=2).write_sqlite(store)
    return store


@pytest.fixture
def store(pristine, tmp_path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(pristine, copy)
    return copy


@pytest.fixture(scope="module")
def log_samples(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("logs")
    write_log_samples(root)
    return root


def _accounted(warehouse: Path) -> tuple[dict[str, tuple], list[tuple[str, str, str]]]:
    """The accounting rows by input (read, used, deduplicated, quarantined, note) and the quarantine rows."""
    con = open_read_only(warehouse)
    try:
        assert identity_violations(con) == []
        rows = con.execute(
            "SELECT input, rows_read, rows_used, rows_deduplicated, rows_quarantined, note FROM ingest_accounting"
        ).fetchall()
        bad = con.execute("SELECT table_name, row_key, reason FROM quarantine ORDER BY ALL").fetchall()
    finally:
        con.close()
    return {r[0]: tuple(r[1:]) for r in rows}, bad


# -- store directories ----------------------------------------------------------------------------------


def test_payloads_that_is_a_regular_file_is_a_counted_quarantine_not_an_absent_plane(tmp_path, store):
    shutil.rmtree(store / "payloads")
    (store / "payloads").write_text("not a directory")
    summary = ingest(tmp_path / "w.duckdb", store)
    acct, bad = _accounted(tmp_path / "w.duckdb")
    named = {(b[0], b[1]): b[2] for b in bad}
    assert "not a directory (a regular file)" in named[("store_files", "payloads")]
    assert "payload plane is not read" in named[("store_files", "payloads")]
    assert acct["store files"][3] == 1 and summary.quarantined >= 1


def test_a_payload_beyond_the_size_limit_is_quarantined_from_its_size_without_reading_it(tmp_path, store):
    from pipeline.sources.store.payloads import MAX_PAYLOAD_FILE_BYTES

    victim = sorted((store / "payloads").rglob("*.json*"))[0]
    size = MAX_PAYLOAD_FILE_BYTES + (1 << 20)
    with open(victim, "r+b") as fh:  # sparse: the size is there, the bytes never were written
        fh.truncate(size)
    ingest(tmp_path / "w.duckdb", store)
    acct, bad = _accounted(tmp_path / "w.duckdb")
    epoch, escrow, name = victim.relative_to(store / "payloads").parts
    key = f"{epoch}/{escrow}/{name.split('.')[0]}"
    reasons = [b[2] for b in bad if b[:2] == ("payload_storage", key)]
    # the size in the reason is the file's stat: the limit was checked before any byte was read
    assert reasons == [f"payload file larger than {MAX_PAYLOAD_FILE_BYTES:,} bytes ({size:,})"]
    assert acct["payload files"][3] == 1


def test_an_empty_diff_blob_is_counted_with_its_note_and_holds_no_transaction(tmp_path, store):
    """An empty txs_proto is how upstream encodes a diff without transactions (an empty DiffContent):
    used as such, and counted in the run's accounting with that word, never passed by in silence."""
    files = sorted(store.glob("epoch_*.db"))
    before = 0
    for f in files:
        with sqlite3.connect(f) as c:
            before += c.execute("SELECT count(*) FROM diffs WHERE length(txs_proto) = 0").fetchone()[0]
    with sqlite3.connect(files[-1]) as c:
        escrow, nonce = c.execute(
            "SELECT escrow_id, nonce FROM diffs WHERE length(txs_proto) > 0 ORDER BY escrow_id, nonce DESC LIMIT 1"
        ).fetchone()
        c.execute("UPDATE diffs SET txs_proto = X'' WHERE escrow_id = ? AND nonce = ?", (escrow, nonce))
    ingest(tmp_path / "w.duckdb", store)
    acct, _ = _accounted(tmp_path / "w.duckdb")
    assert f"{before + 1} with an empty txs_proto (diffs without transactions)" in acct["diffs"][4]
    txs = frame(
        tmp_path / "w.duckdb", f"SELECT count(*) AS n FROM txs WHERE escrow_id = '{escrow}' AND nonce = {nonce}"
    )
    assert txs["n"][0] == 0


# -- logs -----------------------------------------------------------------------------------------------


def _log_rows(warehouse: Path) -> dict[str, list[tuple]]:
    """Every log table's rows (file identity aside), and the files' line counts."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        out = {}
        for table in ("log_engine_events", "log_spec_decode", "log_engine_stats", "log_validation_scores"):
            cols = [
                c
                for (c,) in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table]
                ).fetchall()
                if c not in ("run_id", "file_id", "record_key")
            ]
            select = ", ".join(f'CAST("{c}" AS VARCHAR)' for c in cols)
            out[table] = sorted(con.execute(f"SELECT {select} FROM {table}").fetchall(), key=str)
        out["lines"] = sorted(con.execute("SELECT kind, lines, records, unparsed FROM log_files").fetchall())
        return out
    finally:
        con.close()


def _ingest_logs(warehouse: Path, paths: list[Path]):
    con = open_for_write(warehouse)
    try:
        return ingest_logs(con, paths, host=HOST)
    finally:
        con.close()


def _rewritten(src: Path, dst: Path, old: bytes, new: bytes) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(src.read_bytes().replace(old, new))
    return dst


def test_cr_cr_lf_line_ends_are_one_line_end(tmp_path, log_samples):
    """A writer that puts CR CR LF at each line's end: the same lines, numbers and records as LF (today each
    such end added an empty line, so every line number, and every record key, doubled)."""
    sources = [log_samples / "vllm" / "vllm-b.log", log_samples / "dapi.log"]
    lf = [_rewritten(p, tmp_path / "lf" / p.name, b"", b"") for p in sources]
    crcrlf = [_rewritten(p, tmp_path / "crcrlf" / p.name, b"\n", b"\r\r\n") for p in sources]
    a = _ingest_logs(tmp_path / "lf.duckdb", lf)
    b = _ingest_logs(tmp_path / "crcrlf.duckdb", crcrlf)
    assert (b.lines, b.unparsed) == (a.lines, a.unparsed)
    clean, odd = _log_rows(tmp_path / "lf.duckdb"), _log_rows(tmp_path / "crcrlf.duckdb")
    for table in clean:
        assert odd[table] == clean[table], table


def test_invalid_utf8_at_line_ends_changes_no_value_and_is_counted(tmp_path, log_samples):
    """Bytes that are not UTF-8 at the end of every line (a stray 0xFF, a multi-byte character cut short):
    every record reads as without them (today a logfmt value or an event's text kept them as U+FFFD), and
    the lines that had them are counted in the command's summary and the run's accounting."""
    vllm, validator = log_samples / "vllm" / "vllm-b.log", log_samples / "dapi.log"
    _ingest_logs(tmp_path / "clean.duckdb", [vllm, validator])
    want = _log_rows(tmp_path / "clean.duckdb")
    for tail in (b"\xff", b"\xe2\x80"):
        odd = tmp_path / f"odd-{tail.hex()}"
        paths = [_rewritten(p, odd / p.name, b"\n", tail + b"\n") for p in (vllm, validator)]
        summary = _ingest_logs(tmp_path / f"{tail.hex()}.duckdb", paths)
        got = _log_rows(tmp_path / f"{tail.hex()}.duckdb")
        assert got == want
        acct, _ = _accounted(tmp_path / f"{tail.hex()}.duckdb")
        every_line = sum(lines for _, lines, _, _ in want["lines"])
        assert summary.undecodable == every_line
        assert f"{every_line} with bytes that are not UTF-8" in acct["log lines"][4]
