"""Hardening: what an attacker or an unlucky user tries must end safely.

- `query` is read-only and sandboxed by the engine: no ATTACH/COPY/EXPORT/INSTALL/LOAD, no file
  readers, no SET; the warehouse and the file system are left exactly as they were.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from tests.factories import sample_warehouse
from tests.helpers import frame, ingest

runner = CliRunner()


@pytest.fixture(scope="module")
def warehouse(request, timeline) -> Path:
    return sample_warehouse(request, timeline.copy(last_epoch=4)).path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _query(warehouse: Path, sql: str):
    return runner.invoke(app, ["query", sql, "-w", str(warehouse)])


ESCAPES = {
    "attach a writable database": "ATTACH '{dir}/other.duckdb' AS s (READ_WRITE)",
    "re-attach the warehouse read-write": "ATTACH '{wh}' AS w2 (READ_WRITE)",
    "copy to a file": "COPY (SELECT 1) TO '{dir}/leak.csv'",
    "export the database": "EXPORT DATABASE '{dir}/export'",
    "read a system file": "SELECT * FROM read_text('/etc/passwd')",
    "read a csv": "SELECT * FROM read_csv('/etc/passwd')",
    "list a directory": "SELECT * FROM glob('/root/*')",
    "install an extension": "INSTALL httpfs",
    "load an extension": "LOAD httpfs",
    "turn the sandbox off": "SET enable_external_access = true",
    "unlock the configuration": "SET lock_configuration = false",
    "delete rows": "DELETE FROM raw_sessions",
    "create a secret": "CREATE SECRET s (TYPE s3, KEY_ID 'x', SECRET 'y')",
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_query_cannot_escape_its_sandbox(warehouse, name):
    before = _digest(warehouse)
    files_before = sorted(p.name for p in warehouse.parent.iterdir())
    sql = ESCAPES[name].format(dir=warehouse.parent, wh=warehouse)
    result = _query(warehouse, sql)
    assert result.exit_code == 1, result.output
    assert result.output.startswith("error: ") and "Traceback" not in result.output
    assert _digest(warehouse) == before
    assert sorted(p.name for p in warehouse.parent.iterdir()) == files_before


def test_the_attack_chain_of_attach_use_detach_leaves_the_warehouse_whole(warehouse):
    sessions = frame(warehouse, "SELECT count(*) AS n FROM raw_sessions")["n"][0]
    chain = (
        f"ATTACH '{warehouse.parent}/x.duckdb' AS s (READ_WRITE); USE s; DETACH warehouse; "
        f"ATTACH '{warehouse}' AS w (READ_WRITE); DELETE FROM w.raw_sessions"
    )
    result = _query(warehouse, chain)
    assert result.exit_code == 1
    assert frame(warehouse, "SELECT count(*) AS n FROM raw_sessions")["n"][0] == sessions > 0
    assert not (warehouse.parent / "x.duckdb").exists()


def test_ordinary_and_named_queries_still_work_in_the_sandbox(warehouse, timeline):
    result = runner.invoke(
        app, ["query", "SELECT count(*) AS n FROM inferences", "--format", "csv", "-w", str(warehouse)]
    )
    assert result.exit_code == 0, result.output
    assert result.output.split() == ["n", str(frame(warehouse, "SELECT count(*) AS n FROM inferences")["n"][0])]
    named = runner.invoke(
        app,
        [
            "query",
            "host_executor_counts",
            "--param",
            f"host={timeline.focal_host}",
            "--format",
            "csv",
            "-w",
            str(warehouse),
        ],
    )
    assert named.exit_code == 0, named.output
    assert named.output.splitlines()[0].startswith("epoch_id")


# --- secrets --------------------------------------------------------------------------------------------

PLANTED = "Pl4nted9Secret"  # the user-part password; the query-string one differs
PLANTED_QS = "Qu3ryString7Pw"


def _with_passwords(url: str) -> str:
    scheme, rest = url.split("://", 1)
    user, host = rest.split("@", 1)
    return f"{scheme}://{user}:{PLANTED}@{host}?password={PLANTED_QS}"


def _all_warehouse_text(warehouse: Path) -> str:
    """Every string value of every table of the warehouse, as one text."""
    import duckdb

    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        parts = []
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
            cols = [
                c
                for c, t in con.execute(
                    f"SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = '{table}'"
                ).fetchall()
                if t in ("VARCHAR", "JSON")
            ]
            for col in cols:
                parts += [str(v) for (v,) in con.execute(f'SELECT DISTINCT "{col}" FROM "{table}"').fetchall()]
        return "\n".join(parts)
    finally:
        con.close()


def test_a_planted_password_appears_in_no_output_row_or_report(pg_copy, tmp_path, timeline):
    url = _with_passwords(pg_copy(4))
    wh = tmp_path / "w.duckdb"
    outputs = [runner.invoke(app, ["ingest", url, "-w", str(wh)])]
    assert outputs[0].exit_code == 0, outputs[0].output
    outputs.append(runner.invoke(app, ["doctor", url]))
    outputs.append(runner.invoke(app, ["evidence", "epoch-summary", "--host", timeline.focal_host, "-w", str(wh)]))
    outputs.append(
        runner.invoke(
            app, ["report", "epoch", "3", "--host", timeline.focal_host, "--out", str(tmp_path / "out"), "-w", str(wh)]
        )
    )
    assert all(r.exit_code == 0 for r in outputs), [r.output for r in outputs]
    text = "\n".join(r.output for r in outputs) + _all_warehouse_text(wh)
    text += "\n".join(p.read_text(errors="replace") for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert "postgres:***@" in outputs[0].output or "***" in _all_warehouse_text(wh)
    for secret in (PLANTED, PLANTED_QS):
        assert secret not in text


@pytest.mark.parametrize(
    "url, secrets",
    [
        ("postgresql://postgres:Se/cr@t9xyz@127.0.0.1:1/db", ["Se/cr@t9xyz", "cr@t9xyz", "t9xyz"]),
        ("postgresql://postgres:q@127.0.0.1:1/db", []),  # one letter: its other occurrences stay readable
        ("postgresql://postgres@127.0.0.1:1/db?sslmode=disable&password=Qs9Secret", ["Qs9Secret"]),
        ("host=127.0.0.1 port=1 password=Kw9Secret dbname=x", ["Kw9Secret"]),
    ],
)
def test_connection_errors_never_show_a_password(url, secrets):
    result = runner.invoke(app, ["ingest", url, "-w", "unused.duckdb"])
    assert result.exit_code == 1 and result.output.startswith("error: ")
    assert "Traceback" not in result.output
    for secret in secrets:
        assert secret not in result.output
    if ":q@" in url:  # the host is still named in full: no letter was starred away
        assert "127.0.0.1" in result.output and "postgresql://postgres:***@127.0.0.1:1/db" in result.output


# --- paths ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["s%41", "st#x", "st?y", "st ore"])
def test_store_paths_are_paths_never_uri_syntax(tmp_path, timeline, name):
    """A store under a name with URI characters reads its own epochs, and its directory is left unchanged
    (``s%41`` once read the sibling ``sA``; ``#`` and ``?`` created empty files beside the store)."""
    mine, sibling = tmp_path / name, tmp_path / "sA"
    timeline.copy(last_epoch=3).write_sqlite(mine)
    timeline.copy(last_epoch=4).write_sqlite(sibling)  # one epoch more than `mine`
    before = sorted(p.name for p in tmp_path.rglob("*"))
    wh = tmp_path.parent / f"{tmp_path.name}-w.duckdb"
    result = runner.invoke(app, ["ingest", str(mine), "-w", str(wh)])
    assert result.exit_code == 0, result.output
    assert frame(wh, "SELECT DISTINCT epoch_id FROM escrows ORDER BY 1")["epoch_id"].to_list() == [1, 2, 3]
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


# --- strict decoding of the diff log --------------------------------------------------------------------


def _diff_with_start(store: Path) -> tuple[Path, str, int, bytes]:
    """(epoch file, escrow, nonce, txs_proto) of a diff that starts an inference and holds more after it."""
    import sqlite3

    from pipeline.sources.decode import devshard_pb2 as pb

    for db_file in sorted(store.glob("epoch_*.db")):
        with sqlite3.connect(db_file) as db:
            for escrow, nonce, blob in db.execute("SELECT escrow_id, nonce, txs_proto FROM diffs ORDER BY 1, 2"):
                txs = pb.DiffContent.FromString(blob).txs
                if len(txs) > 1 and any(tx.WhichOneof("tx") == "start_inference" for tx in txs):
                    return db_file, escrow, nonce, blob
    raise AssertionError("the sample copy has no diff with a start and more transactions")


def _plant(db_file: Path, escrow: str, nonce: int, blob: bytes) -> None:
    import sqlite3

    with sqlite3.connect(db_file) as db:
        db.execute("UPDATE diffs SET txs_proto = ? WHERE escrow_id = ? AND nonce = ?", (blob, escrow, nonce))


def _tampered(name: str, blob: bytes, nonce: int) -> bytes:
    from pipeline.samples.wire import encode_diff
    from pipeline.sources.decode import devshard_pb2 as pb

    txs = list(pb.DiffContent.FromString(blob).txs)
    start = next(tx for tx in txs if tx.WhichOneof("tx") == "start_inference")
    if name == "another message":  # valid protobuf, but a DiffContent with nonce 150 and no txs
        return bytes.fromhex("089601")
    if name == "an overlong length":  # the first tx's length as a two-byte varint: parses, does not round-trip
        assert blob[0] == 0x12 and blob[1] < 0x80
        return bytes([0x12, blob[1] | 0x80, 0x00]) + blob[2:]
    if name == "two starts":
        return encode_diff(txs + [start])
    if name == "a start of another nonce":
        moved = pb.DevshardTx()
        moved.CopyFrom(start)
        moved.start_inference.inference_id = nonce + 7
        return encode_diff([moved if tx is start else tx for tx in txs])
    if name == "an inference from the future":
        later = pb.DevshardTx()
        later.validation.inference_id = nonce + 1000
        later.validation.validator_slot = 1
        return encode_diff(txs + [later])
    raise KeyError(name)


@pytest.mark.parametrize(
    "name, reason",
    [
        ("another message", "sets DiffContent field(s) nonce"),
        ("an overlong length", "does not round-trip"),
        ("two starts", "holds 2 MsgStartInference"),
        ("a start of another nonce", "is not the diff's nonce"),
        ("an inference from the future", "started after this diff's nonce"),
    ],
)
def test_a_diff_that_is_not_what_the_writer_stores_is_quarantined_whole(tmp_path, timeline, name, reason):
    store = tmp_path / "store"
    timeline.copy(last_epoch=3).write_sqlite(store)
    db_file, escrow, nonce, blob = _diff_with_start(store)
    _plant(db_file, escrow, nonce, _tampered(name, blob, nonce))
    wh = tmp_path / "w.duckdb"
    result = runner.invoke(app, ["ingest", str(store), "-w", str(wh), "--strict"])
    assert result.exit_code != 0, result.output
    q = frame(wh, f"SELECT reason FROM quarantine WHERE row_key = '{escrow}/{nonce}'")
    assert q.height == 1 and reason in q["reason"][0], q
    # None of its transactions is kept; the escrow's other diffs are.
    txs = frame(wh, f"SELECT nonce FROM txs WHERE escrow_id = '{escrow}'")["nonce"].to_list()
    assert nonce not in txs and len(txs) > 0


def test_untouched_samples_quarantine_no_diff_for_strictness(tmp_path, timeline):
    """The strict checks reject nothing the writer really stores (only the samples' planted unknown tx kinds)."""
    store = tmp_path / "store"
    timeline.copy(last_epoch=4).write_sqlite(store)
    wh = tmp_path / "w.duckdb"
    ingest(wh, store)
    reasons = frame(wh, "SELECT DISTINCT reason FROM quarantine WHERE table_name = 'diffs'")["reason"].to_list()
    assert all(r.startswith("unknown tx kind") for r in reasons), reasons


# --- Ctrl-C ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("delay", [0.6, 1.2, 1.8, 2.5])
def test_ctrl_c_at_any_moment_is_one_line(tmp_path, delay):
    """SIGINT while the CLI is still importing, reading the copy or writing the warehouse: the one-line
    message and exit code 130 (or a finished ingest when it came too late), never a traceback. (The
    delays start after the interpreter's own start-up, whose interrupts Python itself reports.)"""
    import signal
    import subprocess
    import sys
    import time

    script = Path(sys.executable).with_name("gonka-evidence")
    store = Path(__file__).resolve().parents[2] / "data-samples" / "store"
    proc = subprocess.Popen(
        [str(script), "ingest", str(store), "-w", str(tmp_path / "w.duckdb")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert "Traceback" not in err, err
    if proc.returncode == -signal.SIGINT:  # outside Python's handler (interpreter start or exit): no output of ours
        assert "error:" not in err, err
    elif proc.returncode != 0:
        assert proc.returncode == 130, (proc.returncode, err)
        assert err.strip().splitlines()[-1].startswith("error: interrupted"), err


def test_doctor_names_an_unreadable_ledger(tmp_path, timeline):
    store = tmp_path / "store"
    timeline.copy(last_epoch=3).write_sqlite(store)
    (store / "accounting.db").write_bytes(b"not a database" * 300)
    result = runner.invoke(app, ["doctor", str(store)])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    assert "accounting.db: not readable, the ingest would stop on it" in result.output


def test_a_ctrl_c_that_duckdb_reports_is_an_interrupt_however_it_is_wrapped():
    """The shapes seen from a real Ctrl-C (the test above, under load): DuckDB's error naming the
    KeyboardInterrupt raised in a Python source it read, then an error of the aborted transaction while
    cleaning up; and DuckDB's error with the KeyboardInterrupt as its cause. Other errors are not."""
    import duckdb

    from pipeline.cli.app import _is_interrupt

    def chained(first: BaseException, then: Exception) -> Exception:
        try:
            try:
                raise first
            except BaseException:
                raise then
        except Exception as exc:
            return exc

    named = duckdb.InvalidInputException(
        "Invalid Input Error: reading the schema of the object registered as 'rows_to_insert' failed: KeyboardInterrupt: "
    )
    aborted = duckdb.TransactionException("TransactionContext Error: Current transaction is aborted (please ROLLBACK)")
    assert _is_interrupt(chained(named, aborted))
    caused = duckdb.InvalidInputException("offering a filter to the source registered as 'x' failed")
    caused.__cause__ = KeyboardInterrupt()
    assert _is_interrupt(caused)
    assert _is_interrupt(chained(RuntimeError("Query interrupted"), aborted))
    assert not _is_interrupt(chained(duckdb.InvalidInputException("failed: ValueError: bad"), aborted))
    assert not _is_interrupt(aborted)
