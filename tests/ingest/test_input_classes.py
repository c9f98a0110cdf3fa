"""Every class of hostile input: each is a clear error or a counted quarantine, never a
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


# -- PoC results and duplicate keys -----------------------------------------------------------------------


def _poc_doc(**changes) -> dict:
    doc = {
        "request_id": "req-ok",
        "n_total": 200,
        "n_mismatch": 30,
        "p_value": 0.5,
        "fraud_detected": False,
        "participant_address": HOST,
        "validator": "gonka1valA",
        "stat_test": {"dist_threshold": 0.4, "p_mismatch": 0.1, "fraud_threshold": 0.01},
        "timestamp": "2026-01-03T05:00:00Z",
    }
    return doc | changes


def _poc_quarantine(warehouse: Path) -> dict[str, str]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return dict(con.execute("SELECT row_key, reason FROM quarantine WHERE table_name = 'poc_result'").fetchall())
    finally:
        con.close()


def test_poc_results_with_out_of_range_numbers_are_quarantined_with_the_reason(tmp_path):
    """31-digit counts, negative or impossible mismatches, NaN or infinite p-values, a time past any
    calendar: each result is a counted quarantine row naming the number (today a traceback for the
    31-digit count, and a stored NaN or a p-value of 1 for the others); the good result is kept."""
    import json

    bad = {
        "req-31-digits": _poc_doc(n_total=10**30),
        "req-negative": _poc_doc(n_mismatch=-3),
        "req-more-than-total": _poc_doc(n_mismatch=201),
        "req-half": _poc_doc(n_total=200.5),
        "req-nan": _poc_doc(p_value=float("nan")),
        "req-inf": _poc_doc(p_value=float("inf")),
        "req-p-mismatch": _poc_doc(stat_test={"p_mismatch": float("nan")}),
        "req-time": _poc_doc(timestamp=1e30),
        "req-bool": _poc_doc(n_total=True),
    }
    docs = [_poc_doc()] + [doc | {"request_id": key} for key, doc in bad.items()]
    (tmp_path / "poc").mkdir()
    (tmp_path / "poc" / "results.json").write_text(json.dumps(docs))  # NaN and Infinity as Python writes them
    (tmp_path / "poc" / "validate.txt").write_text(
        f"[validate] n_total={'9' * 31} n_mismatch=1 p_value=0.5 fraud_detected=False\n"
        "[validate] n_total=100 n_mismatch=1 p_value=nan fraud_detected=False\n"
        "[validate] n_total=100 n_mismatch=1 p_value=0.5 fraud_detected=False\n"
    )
    summary = _ingest_logs(tmp_path / "w.duckdb", [tmp_path / "poc"])
    kept = frame(tmp_path / "w.duckdb", "SELECT request_id, n_total FROM poc_results_t ORDER BY ALL")
    assert set(kept.rows()) == {(None, 100), ("req-ok", 200)}
    reasons = _poc_quarantine(tmp_path / "w.duckdb")
    assert len(reasons) == len(bad) + 2 == summary.unparsed
    text = "\n".join(reasons.values())
    for word in (
        f"n_total {10**30} is out of range",
        "n_mismatch -3 is out of range",
        "n_mismatch 201 is more than n_total 200",
        "n_total is not a whole number (200.5)",
        "p_value nan is out of range",
        "p_value inf is out of range",
        "p_mismatch nan is out of range",
        "time 1e+30 is out of range",
        "n_total is not a count (True)",
        f"n_total {'9' * 31} is out of range",
        "p_value 'nan' is out of range",
    ):
        assert word in text, word
    acct, _ = _accounted(tmp_path / "w.duckdb")
    assert acct["log lines"][3] == summary.unparsed


def test_a_record_that_gives_one_key_twice_with_two_values_is_quarantined(tmp_path, log_samples):
    """A JSON object with one key twice and two values (which one the writer meant is unknown; JSON readers
    keep the last in silence): a saved API response is quarantined whole, a PoC result and a validator JSON
    line are counted quarantine rows. The same key twice with one value is read."""
    import json

    from pipeline.ingest.json_responses import ingest_json_files

    record = '{"epoch_index":5,"participant":"gonka1x","model":"m","assigned_nonces":%s,"counters":[]}'
    (tmp_path / "twice.json").write_text(record % '3,"assigned_nonces":4')
    (tmp_path / "same.json").write_text((record % '3,"assigned_nonces":3').replace("gonka1x", "gonka1y"))
    con = open_for_write(tmp_path / "json.duckdb")
    try:
        summary = ingest_json_files(con, [tmp_path / "twice.json", tmp_path / "same.json"])
    finally:
        con.close()
    assert summary.quarantined == 1 and any(
        "'assigned_nonces' given twice with two values" in u for u in summary.unreadable
    )
    read = frame(tmp_path / "json.duckdb", "SELECT participant, assigned_nonces FROM api_participants")
    assert read.rows() == [("gonka1y", 3)]

    poc = json.dumps(_poc_doc()).replace('"n_mismatch": 30', '"n_mismatch": 30, "n_mismatch": 0')
    (tmp_path / "poc").mkdir()
    (tmp_path / "poc" / "results.json").write_text(poc)
    validator = (log_samples / "dapi.log").read_text().splitlines()
    line = next(i for i, text in enumerate(validator) if text.startswith("{") and "cosineSimValue" in text)
    validator[line] = validator[line].replace('"cosineSimValue":', '"cosineSimValue": 0.1, "cosineSimValue":')
    (tmp_path / "dapi.log").write_text("\n".join(validator) + "\n")
    summary = _ingest_logs(tmp_path / "logs.duckdb", [tmp_path / "poc", tmp_path / "dapi.log"])
    assert frame(tmp_path / "logs.duckdb", "SELECT count(*) AS n FROM poc_results_t")["n"][0] == 0
    assert "'n_mismatch' given twice with two values" in "".join(_poc_quarantine(tmp_path / "logs.duckdb").values())
    lines = frame(tmp_path / "logs.duckdb", "SELECT line FROM log_validation_scores")["line"].to_list()
    assert line + 1 not in lines
    reasons = frame(tmp_path / "logs.duckdb", "SELECT reason FROM quarantine WHERE table_name = 'validator_log'")
    assert any(f"unparsed line {line + 1} of dapi.log" in r for r in reasons["reason"])


# -- run ids ----------------------------------------------------------------------------------------------


def _run_ids(warehouse: Path) -> list[str]:
    return frame(warehouse, "SELECT run_id FROM ingest_runs ORDER BY started_at")["run_id"].to_list()


def test_two_different_inputs_never_get_one_run_id(tmp_path, log_samples):
    """Run ids derive from the warehouse's run history, the source and what the run reads, so that the same
    inputs give the same ids in two fresh warehouses. Two different inputs under one source (two logs of one
    host, two versions of one saved response at one path) got one id, and a footer naming it named either;
    now what a run reads enters its id, and the same input still gives the same id."""
    from pipeline.ingest.json_responses import ingest_json_files

    first, second = log_samples / "vllm" / "vllm-b.log", log_samples / "longer" / "vllm-a-full.log"
    ids = {}
    for name, paths in (("a", [first]), ("a-again", [first]), ("b", [second])):
        _ingest_logs(tmp_path / f"logs-{name}.duckdb", paths)
        ids[name] = _run_ids(tmp_path / f"logs-{name}.duckdb")
    assert ids["a"] == ids["a-again"] and ids["a"] != ids["b"]

    saved = tmp_path / "response.json"
    record = '{"epoch_index":5,"participant":"gonka1x","model":"m","assigned_nonces":%d,"counters":[]}'
    for n in (3, 4, 3):
        saved.write_text(record % n)
        con = open_for_write(tmp_path / f"json-{n}-{len(ids)}.duckdb")
        try:
            ids[f"json-{n}-{len(ids)}"] = ingest_json_files(con, [saved]).run_ids
        finally:
            con.close()
    assert ids["json-3-3"] == ids["json-3-5"] != ids["json-4-4"]


# -- an ingest-logs killed part-way -----------------------------------------------------------------------


def _log_tables(warehouse: Path) -> dict[str, list[tuple]]:
    """Every table of the warehouse but the run bookkeeping, without run ids: what a re-run must converge to."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        tables = [
            t
            for (t,) in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' AND table_type = "
                "'BASE TABLE' AND table_name NOT IN ('ingest_runs', 'ingest_accounting')"
            ).fetchall()
        ]
        out = {}
        for table in tables:
            cols = [
                c
                for (c,) in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table]
                ).fetchall()
                if c != "run_id"
            ]
            select = ", ".join(f'CAST("{c}" AS VARCHAR)' for c in cols)
            out[table] = sorted(con.execute(f"SELECT {select} FROM {table}").fetchall(), key=str)
        return out
    finally:
        con.close()


KILLED_LOGS = ("vllm", "longer", "metrics", "dapi.log", "poc")


@pytest.fixture(scope="module")
def clean_log_tables(tmp_path_factory, log_samples) -> dict[str, list[tuple]]:
    """The tables a clean ingest of the killed test's logs gives: the same for each of its cases, built once."""
    clean = tmp_path_factory.mktemp("clean-logs") / "clean.duckdb"
    _ingest_logs(clean, [log_samples / p for p in KILLED_LOGS])
    return _log_tables(clean)


@pytest.mark.parametrize(
    "files_before_the_kill",
    # Killed before any file and mid-way in the default tier, at the other points in the heavy one;
    # stands in the default tier: its cases 0 and 4,
    # tests/ingest/test_input_classes.py::test_an_ingest_logs_killed_part_way_then_run_again_equals_a_clean_ingest
    [0, *(pytest.param(n, marks=pytest.mark.heavy) for n in (1, 2)), 4, pytest.param(7, marks=pytest.mark.heavy)],
)
def test_an_ingest_logs_killed_part_way_then_run_again_equals_a_clean_ingest(
    tmp_path, log_samples, clean_log_tables, monkeypatch, files_before_the_kill
):
    """The process dies as a file's transaction starts (after `files_before_the_kill` files committed, a
    rotated file and its longer twin among them); running the same command again gives every table a
    clean ingest gives (run ids aside), and the killed run is not 'ok'."""
    import pipeline.ingest.logs as logs

    paths = [log_samples / p for p in KILLED_LOGS]
    real = logs._ingest_file
    calls = []

    def dies(*args, **kwargs):
        calls.append(1)
        if len(calls) > files_before_the_kill:
            raise KeyboardInterrupt  # what a kill leaves: the committed files, nothing of this one
        return real(*args, **kwargs)

    monkeypatch.setattr(logs, "_ingest_file", dies)
    with pytest.raises(KeyboardInterrupt):
        _ingest_logs(tmp_path / "killed.duckdb", paths)
    monkeypatch.setattr(logs, "_ingest_file", real)
    _ingest_logs(tmp_path / "killed.duckdb", paths)
    assert _log_tables(tmp_path / "killed.duckdb") == clean_log_tables
    statuses = frame(tmp_path / "killed.duckdb", "SELECT status FROM ingest_runs ORDER BY started_at")["status"]
    assert statuses.to_list() == ["failed", "ok"]


def test_a_postgres_payload_beyond_the_size_limit_is_quarantined_without_reading_its_bodies(
    tmp_path, pg_copy, monkeypatch
):
    """The PostgreSQL copy's answers over the limit come without their bodies (the query leaves them out
    by their stored size) and are quarantined with it, like an oversized payload file; today they were
    read whole, whatever their size."""
    import psycopg

    import pipeline.sources.store.payloads as payloads

    url = pg_copy(2)
    with psycopg.connect(url) as c:
        sizes = c.execute(
            "SELECT epoch_id, escrow_id, inference_id, coalesce(octet_length(prompt_payload), 0) "
            "+ coalesce(octet_length(response_payload), 0) FROM payload_storage ORDER BY 4 DESC"
        ).fetchall()
    limit = sizes[0][3] - 1  # the largest answer is over it
    monkeypatch.setattr(payloads, "MAX_PAYLOAD_FILE_BYTES", limit)
    ingest(tmp_path / "w.duckdb", url)
    acct, bad = _accounted(tmp_path / "w.duckdb")
    over = {f"{e}/{s}/{i}": n for e, s, i, n in sizes if n > limit}
    reasons = {b[1]: b[2] for b in bad if b[0] == "payload_storage"}
    assert {k: reasons.get(k) for k in over} == {
        k: f"payload larger than {limit:,} bytes ({n:,})" for k, n in over.items()
    }
    assert acct["payload_storage"][3] == len(over)
