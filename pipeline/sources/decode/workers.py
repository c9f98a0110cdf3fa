"""`decode_diffs` in worker processes, so the decode (CPU-bound Python) runs on every core while the
ingest reads and writes the warehouse.

`DiffDecoder.submit(batch)` hands a batch of diff rows to the next worker and returns at once; the
returned handle's `result()` is what `decode_diffs(batch)` returns, the same rows in the same order.
Workers are plain `python -m pipeline.sources.decode.workers` processes fed Arrow IPC over their
standard streams (not multiprocessing: it would re-import a library caller's unguarded `__main__`, and
forking a process that runs DuckDB's threads is unsafe). They start on the first batch; with no worker
(one core, or GONKA_EVIDENCE_DECODE_WORKERS=0) `submit` decodes in this process.
"""

from __future__ import annotations

import os
import queue
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pyarrow as pa

from pipeline.core import resources
from pipeline.core.env import env_int
from pipeline.sources.decode import txs
from pipeline.sources.errors import SourceError, one_line
from pipeline.sources.store.base import TABLES

WORKERS_ENV = "GONKA_EVIDENCE_DECODE_WORKERS"
MAX_WORKERS = 64
_LENGTH = struct.Struct("<Q")
_QUARANTINE = pa.schema([("row_key", pa.string()), ("reason", pa.string())])
# the canonical diff rows decode_diffs reads: only these cross to a worker
DIFF_COLUMNS = TABLES["diffs"].schema.names


def decode_workers() -> int:
    """GONKA_EVIDENCE_DECODE_WORKERS, else one worker per core this process may use when there are two or more
    (a large ingest stages its rows and writes them once, pipeline/ingest/staging.py, so the decode is its long
    part, on every core), else none: on one core the ingesting process decodes between its writes."""
    cores = resources.cores()
    default = min(cores, MAX_WORKERS) if cores > 1 else 0
    return env_int(WORKERS_ENV, default, 0, MAX_WORKERS, "decode processes")


class DecodeWorkerError(SourceError):
    """A decode worker stopped (killed, out of memory) or failed; one-line message. The chunk being
    written is rolled back, as on any failed read of the copy."""


def _ipc(table: pa.Table | pa.RecordBatch) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write(table)
    return sink.getvalue()


def _from_ipc(data: pa.Buffer) -> pa.Table:
    return pa.ipc.open_stream(data).read_all()


def _write_frame(fd: int, data: bytes | pa.Buffer) -> None:
    """A frame (its length, then its bytes) written whole to the descriptor `fd`, each part on until it is all
    out: through Python's buffered writer, a writer stopped and continued mid-write (Ctrl-Z, SIGSTOP) lost
    the frames' alignment and the reader took a payload's bytes for a length."""
    for part in (_LENGTH.pack(len(data)), data):
        view = memoryview(part).cast("B")
        while view:
            view = view[os.write(fd, view) :]


def _read_frame(stream) -> pa.Buffer | None:
    """The next frame, in memory of Arrow's pool (not this thread's malloc arena): the tables read from it
    are views of it, and the pool hands its pages back when the chunk is done."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    data = pa.allocate_buffer(size)
    view, got = memoryview(data), 0
    while got < size and (n := stream.readinto(view[got:])):
        got += n
    return data if got == size else None


class _Worker:
    """One worker process of `workers`; a thread writes its requests, so `submit` never waits on a busy worker."""

    def __init__(self, workers: int) -> None:
        package_root = str(Path(__file__).resolve().parents[3])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        # The workers are the parallelism: each one's pools sized to its share of the cores (one thread at
        # one worker per core), set before it imports Polars and Arrow.
        env |= resources.worker_env(workers)
        # What the worker says on stderr (a failed start, a crash) is kept, not shown: its last line goes
        # into the one-line error.
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            # -P: the working directory is not put first on the path (a `pipeline` folder there is not ours)
            [sys.executable, "-P", "-m", "pipeline.sources.decode.workers"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
        )
        self.requests: queue.Queue[pa.Buffer | None] = queue.Queue()
        # Answers are read as they come, one ahead of the ingest: a worker decodes on while the ingest takes
        # the one before, and what waits for the ingest is bounded (one more waits in this thread, one in the worker).
        self.answers: queue.Queue[list[pa.Buffer] | None] = queue.Queue(maxsize=1)
        self.writer = threading.Thread(target=self._write, daemon=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.writer.start()
        self.reader.start()

    def _write(self) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        try:
            while (request := self.requests.get()) is not None:
                _write_frame(stdin.fileno(), request)
            stdin.close()
        except (BrokenPipeError, OSError):
            pass  # the worker is gone: its next result says so

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            while (status := _read_frame(stdout)) is not None:
                read = [_read_frame(stdout) for _ in range(4 if status.to_pybytes() == b"ok" else 0)]
                frames = [status, *(frame for frame in read if frame is not None)]
                if len(frames) < len(read) + 1:
                    break  # it ended in the middle of an answer
                self.answers.put(frames)
        except (OSError, ValueError, pa.ArrowException):  # closed under it, or a length no frame has
            pass
        self.answers.put(None)  # the worker ended, or what it said cannot be read: its result says so

    def result(self) -> txs.DecodedDiffs:
        frames = self.answers.get()
        if frames is None:
            self.answers.put(None)  # every later result fails alike
            try:
                code = self.process.wait(timeout=5)  # its output ended: it is exiting, or has
            except subprocess.TimeoutExpired:
                code = None
            said = self._last_words()
            raise DecodeWorkerError(
                f"a diff decode worker ended unexpectedly (exit code {code}{': ' if said else ''}{said})"
            )
        if (status := frames[0].to_pybytes()) != b"ok":
            raise DecodeWorkerError(f"a diff decode worker failed: {status.decode(errors='replace')}")
        try:  # whole frames that hold no tables: something else wrote on the worker's stdout
            decoded, diffs, held, quarantined = (_from_ipc(frame) for frame in frames[1:])
            rejected = list(zip(*quarantined.to_pydict().values(), strict=True))
        except (pa.ArrowException, ValueError) as exc:
            raise DecodeWorkerError(f"a diff decode worker's answer cannot be read ({one_line(exc)})") from None
        return txs.DecodedDiffs(txs=decoded, diffs=diffs, held=held, quarantined=rejected)

    def _last_words(self) -> str:
        self.stderr.seek(0)
        lines = [line for line in self.stderr.read().decode(errors="replace").splitlines() if line.strip()]
        return one_line(Exception(lines[-1])) if lines else ""

    def close(self) -> None:
        # Killed, not asked to end: a worker holds nothing worth finishing (after a failed chunk, batches may wait).
        self.requests.put(None)
        self.process.kill()
        self.process.wait()
        self.writer.join()
        while self.reader.is_alive():  # it may wait to hand over an answer nobody will take
            try:
                self.answers.get_nowait()
            except queue.Empty:
                self.reader.join(0.01)
        for stream in (self.process.stdin, self.process.stdout, self.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:  # what stdin still buffered for a worker that is gone
                    pass


class Decoding:
    """A submitted batch: `result()` waits for it (results are taken in the order batches were submitted)."""

    def __init__(self, worker: _Worker | None, inline: txs.DecodedDiffs | None = None):
        self._worker, self._result = worker, inline

    def result(self) -> txs.DecodedDiffs:
        if self._result is None:
            assert self._worker is not None
            self._result = self._worker.result()
            self._worker = None
        return self._result


class DiffDecoder:
    """Worker processes for `decode_diffs`, started at the first batch and stopped by `close` (or the
    `with` block). Batches go to the workers in turn; each worker answers in the order it was asked,
    so the handles must be resolved in submission order per decoder (the ingest resolves them all in order)."""

    def __init__(self, workers: int | None = None):
        self.workers = decode_workers() if workers is None else workers
        self._pool: list[_Worker] = []
        self._next = 0

    def __enter__(self) -> DiffDecoder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def submit(self, batch: pa.RecordBatch) -> Decoding:
        if self.workers < 1:
            return Decoding(None, txs.decode_diffs(batch))  # looked up now: tests and bench/ wrap it
        if not self._pool:
            self._pool = [_Worker(self.workers) for _ in range(self.workers)]
        worker = self._pool[self._next % len(self._pool)]
        self._next += 1
        worker.requests.put(_ipc(batch.select(list(DIFF_COLUMNS))))
        return Decoding(worker)

    def close(self) -> None:
        for worker in self._pool:
            worker.close()
        self._pool = []


def _serve(stdin, stdout: int) -> None:
    """The worker's loop: a batch in, its decoded tables out (to the descriptor `stdout`), until its input ends."""
    while (request := _read_frame(stdin)) is not None:
        try:
            decoded = txs.decode_diffs(_from_ipc(request))
            quarantined = pa.Table.from_pylist(
                [{"row_key": k, "reason": r} for k, r in decoded.quarantined], schema=_QUARANTINE
            )
            frames = [_ipc(t) for t in (decoded.txs, decoded.diffs, decoded.held, quarantined)]
        except Exception as exc:  # said to the parent, which fails the ingest with it
            _write_frame(stdout, f"{type(exc).__name__}: {one_line(exc)}".encode())
        else:
            _write_frame(stdout, b"ok")
            for frame in frames:
                _write_frame(stdout, frame)


if __name__ == "__main__":
    _serve(sys.stdin.buffer, sys.stdout.fileno())
