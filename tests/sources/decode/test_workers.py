"""Diffs decoded by worker processes are the diffs decoded in this process, and an ingest that uses them
writes the same warehouse."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time

import pyarrow as pa
import pytest

from pipeline.sources.decode import txs, workers
from pipeline.sources.decode.workers import DecodeWorkerError, DiffDecoder
from pipeline.sources.store.base import TABLES
from tests.helpers import frame, views


def _diff_batches(store) -> list[pa.RecordBatch]:
    """Every diff row of the copy, in batches of at most 50 rows, with bytes that do not decode and bytes
    that decode but are no stored diff mixed in (their quarantine rows cross the pipes too)."""
    rows = []
    for db_file in sorted(store.glob("epoch_*.db")):
        epoch = int(db_file.stem.split("_")[1])
        with sqlite3.connect(db_file) as db:
            for escrow, nonce, blob, created in db.execute(
                "SELECT escrow_id, nonce, txs_proto, created_at FROM diffs ORDER BY 1, 2"
            ):
                rows.append(
                    {"epoch_id": epoch, "escrow_id": escrow, "nonce": nonce, "txs_proto": blob, "created_at": created}
                )
    rows[3]["txs_proto"] = b"\xff\xff\xff"  # does not parse
    rows[7]["txs_proto"] = bytes.fromhex("089601")  # a DiffContent with a nonce and no transactions
    rows[11]["txs_proto"] = None
    table = pa.Table.from_pylist(rows, schema=TABLES["diffs"].schema)
    return table.to_batches(max_chunksize=50)


@pytest.fixture(scope="module")
def diff_batches(tmp_path_factory, timeline) -> list[pa.RecordBatch]:
    """`_diff_batches` of `timeline.copy(4)` in SQLite (what `sqlite_copy()` writes), written and read once per
    module: the tests only read the batches (Arrow's are immutable), none writes the copy."""
    return _diff_batches(timeline.copy(last_epoch=4).write_sqlite(tmp_path_factory.mktemp("workers") / "store-4"))


def test_workers_decode_every_batch_as_this_process_does_in_order(diff_batches):
    batches = diff_batches
    assert len(batches) > 4
    with DiffDecoder(workers=2) as decoder:
        handles = [decoder.submit(b) for b in batches]
        assert decoder.workers == 2 and len(decoder._pool) == 2  # decoded elsewhere, not in this process
        decoded = [h.result() for h in handles]
    quarantined = 0
    for batch, got in zip(batches, decoded, strict=True):
        want = txs.decode_diffs(batch)
        assert got.txs.equals(want.txs) and got.diffs.equals(want.diffs) and got.held.equals(want.held)
        assert got.quarantined == want.quarantined
        quarantined += len(got.quarantined)
    assert quarantined == 2  # the two blobs that are no stored diff (an absent one is an empty diff)


def test_a_worker_that_dies_is_a_one_line_error(diff_batches):
    batches = diff_batches
    with DiffDecoder(workers=1) as decoder:
        decoder.submit(batches[0]).result()
        decoder._pool[0].process.kill()
        handle = decoder.submit(batches[1])
        with pytest.raises(DecodeWorkerError, match=r"^a diff decode worker ended unexpectedly \(exit code -9\)$"):
            handle.result()


def test_a_worker_that_cannot_start_says_why_in_the_one_line(diff_batches, tmp_path, monkeypatch):
    """What a worker prints on stderr (a traceback of a failed start) is not shown: its last line is in the error."""
    failing = tmp_path / "python"
    failing.write_text(
        "#!/bin/sh\necho 'Traceback (most recent call last):' >&2\necho 'ImportError: no pyarrow' >&2\nexit 3\n"
    )
    failing.chmod(0o755)
    monkeypatch.setattr(workers.sys, "executable", str(failing))
    with DiffDecoder(workers=1) as decoder:
        handle = decoder.submit(diff_batches[0])
        with pytest.raises(DecodeWorkerError) as failed:
            handle.result()
    assert str(failed.value) == "a diff decode worker ended unexpectedly (exit code 3: ImportError: no pyarrow)"


def test_a_worker_stopped_and_continued_mid_write_answers_whole(diff_batches):
    """Ctrl-Z then `fg` (SIGSTOP, SIGCONT) while a worker wrote an answer of more than a pipe's 64 KiB lost
    the frames' alignment: the reader took a payload's bytes for a length, failed in its thread, and the
    ingest waited for ever. The answers now come whole, however often the worker is stopped."""
    rows = pa.Table.from_batches(diff_batches)
    batch = pa.concat_tables([rows] * 8).combine_chunks().to_batches()[0]  # answers of about a MB
    want = txs.decode_diffs(batch)
    with DiffDecoder(workers=1) as decoder:
        decoder.submit(batch).result()  # started
        pid, done = decoder._pool[0].process.pid, threading.Event()

        def stop_and_continue() -> None:
            while not done.is_set():
                os.kill(pid, signal.SIGSTOP)
                time.sleep(0.005)
                os.kill(pid, signal.SIGCONT)
                time.sleep(0.005)

        stopper = threading.Thread(target=stop_and_continue)
        stopper.start()
        try:
            handles = [decoder.submit(batch) for _ in range(4)]
            results = [h.result() for h in handles]
        finally:
            done.set()
            stopper.join()
            os.kill(pid, signal.SIGCONT)
    assert all(got.txs.equals(want.txs) and got.diffs.equals(want.diffs) for got in results)


def test_a_worker_whose_answer_cannot_be_read_is_a_one_line_error(diff_batches, tmp_path, monkeypatch):
    """A length no frame has (a worker that writes something else on its stdout) failed the reading thread
    with a traceback of its own and left the ingest waiting for ever; now it is the worker's one-line error."""
    garbage = tmp_path / "python"
    garbage.write_text("#!/bin/sh\nhead -c 8 >/dev/null\nprintf 'deepseek-ai/DeepSeek'\n")
    garbage.chmod(0o755)
    monkeypatch.setattr(workers.sys, "executable", str(garbage))
    said: list[str] = []

    def wait(handle) -> None:
        try:
            handle.result()
        except DecodeWorkerError as exc:
            said.append(str(exc))

    with DiffDecoder(workers=1) as decoder:
        waiter = threading.Thread(target=wait, args=(decoder.submit(diff_batches[0]),), daemon=True)
        waiter.start()
        waiter.join(60)  # it waited for ever before
    assert said == ["a diff decode worker ended unexpectedly (exit code 0)"]


def test_a_worker_answer_of_whole_frames_that_are_not_tables_is_a_one_line_error(diff_batches, tmp_path, monkeypatch):
    """Frames of plausible lengths after "ok" that hold no Arrow stream (something else writing on the
    worker's stdout) raised Arrow's own error from `result()`; now it is the worker's one-line error."""
    answer = tmp_path / "answer"
    answer.write_bytes(b"".join(workers._LENGTH.pack(len(part)) + part for part in [b"ok", *[b"oops"] * 4]))
    garbage = tmp_path / "python"
    garbage.write_text(f"#!/bin/sh\nhead -c 8 >/dev/null\ncat '{answer}'\ncat >/dev/null\n")
    garbage.chmod(0o755)
    monkeypatch.setattr(workers.sys, "executable", str(garbage))
    with DiffDecoder(workers=1) as decoder:
        with pytest.raises(DecodeWorkerError) as raised:
            decoder.submit(diff_batches[0]).result()
    assert str(raised.value).startswith("a diff decode worker's answer cannot be read (")
    assert "\n" not in str(raised.value)


def test_each_worker_is_sized_to_its_share_of_the_cores(diff_batches, monkeypatch):
    """A worker of N starts with its pools sized to the machine's cores / N (one thread each here, where
    2 workers share 2 cores; each pool took every core before): Polars and Arrow read these at import."""
    for name in ("GONKA_EVIDENCE_PROCESSES", "POLARS_MAX_THREADS", "OMP_NUM_THREADS", "ARROW_IO_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(workers.resources, "this_machine", lambda: workers.resources.Machine(8, 16 * 10**9))
    monkeypatch.setenv("ARROW_IO_THREADS", "3")  # set here: an override every worker keeps
    with DiffDecoder(workers=2) as decoder:
        decoder.submit(diff_batches[0]).result()
        environs = [
            dict(
                item.split("=", 1) for item in open(f"/proc/{w.process.pid}/environ").read().split("\0") if "=" in item
            )
            for w in decoder._pool
        ]
    wanted = {
        "GONKA_EVIDENCE_PROCESSES": "2",
        "POLARS_MAX_THREADS": "4",
        "OMP_NUM_THREADS": "4",
        "ARROW_IO_THREADS": "3",
    }
    assert [{k: env.get(k) for k in wanted} for env in environs] == [wanted] * 2


def test_decode_workers_default_to_the_cores_and_read_their_variable(monkeypatch):
    monkeypatch.setattr(workers.resources, "cores", lambda: 1)
    assert workers.decode_workers() == 0  # one core: decoded in this process
    monkeypatch.setattr(workers.resources, "cores", lambda: 3)
    assert workers.decode_workers() == 3
    monkeypatch.setattr(workers.resources, "cores", lambda: 16)
    assert workers.decode_workers() == 16  # every core: not capped at 4 since the ingest stages its rows
    monkeypatch.setattr(workers.resources, "cores", lambda: 200)
    assert workers.decode_workers() == workers.MAX_WORKERS == 64
    monkeypatch.setenv(workers.WORKERS_ENV, "3")
    assert workers.decode_workers() == 3
    monkeypatch.setenv(workers.WORKERS_ENV, "many")
    from pipeline.core.env import EnvError

    with pytest.raises(EnvError, match="GONKA_EVIDENCE_DECODE_WORKERS='many'"):
        workers.decode_workers()


@pytest.mark.parametrize(
    "last_epoch",
    [
        pytest.param(1, id="one-epoch"),
        # the copy of four epochs; stands in the default tier: the copy of one epoch (three escrows, a chunk each),
        # tests/sources/decode/test_workers.py::test_an_ingest_decoded_by_workers_equals_one_decoded_here
        pytest.param(4, marks=pytest.mark.heavy, id="four-epochs"),
    ],
)
def test_an_ingest_decoded_by_workers_equals_one_decoded_here(tmp_path, pg_copy, monkeypatch, last_epoch):
    """Several chunks (the next one read while this one is written): same views, quarantine and runs."""
    import pipeline.ingest.store as store_mod
    from pipeline.ingest.store import ingest_store
    from pipeline.sources.store import open_store
    from pipeline.warehouse.database import open_for_write

    monkeypatch.setattr(store_mod, "CHUNK_NONCES", 60)
    url = pg_copy(last_epoch)
    chunks: list[int] = []  # escrows of each chunk of both ingests
    monkeypatch.setattr(
        store_mod, "_chunks", lambda *a, real=store_mod._chunks: (chunks.append(c.height) or c for c in real(*a))
    )
    started = []
    monkeypatch.setattr(workers, "_Worker", lambda n, real=workers._Worker: started.append(1) or real(n))

    def ingest(path, decode_workers):
        con, store = open_for_write(path), open_store(url)
        try:
            return ingest_store(con, store, decode_workers=decode_workers)
        finally:
            store.close()
            con.close()

    here, there = ingest(tmp_path / "here.duckdb", 0), ingest(tmp_path / "there.duckdb", 2)
    assert started == [1, 1]
    assert len(chunks) % 2 == 0 and len(chunks) // 2 >= 3, chunks  # several chunks in each ingest
    assert here.rows == there.rows and here.quarantined == there.quarantined
    from tests.helpers import assert_views_equal

    assert_views_equal(views(tmp_path / "here.duckdb"), views(tmp_path / "there.duckdb"))
    for sql in (
        "SELECT table_name, row_key, reason FROM quarantine ORDER BY ALL",
        "SELECT run_id, input_digest, rows FROM ingest_runs ORDER BY ALL",
        "SELECT * EXCLUDE (run_id) FROM ingest_accounting ORDER BY ALL",
    ):
        assert frame(tmp_path / "here.duckdb", sql).equals(frame(tmp_path / "there.duckdb", sql)), sql


def test_workers_import_this_package_not_a_pipeline_folder_in_the_working_directory(
    diff_batches, tmp_path, monkeypatch
):
    """`python -m` puts the working directory first on the path: a folder named `pipeline` there (another
    project's checkout) would have been the workers' code."""
    batches = diff_batches[:2]
    shadow = tmp_path / "pipeline"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise SystemExit('the shadowing pipeline package was imported')\n")
    monkeypatch.chdir(tmp_path)
    with DiffDecoder(workers=1) as decoder:
        got = [decoder.submit(b).result() for b in batches]
    assert [g.txs.num_rows for g in got] == [txs.decode_diffs(b).txs.num_rows for b in batches]
