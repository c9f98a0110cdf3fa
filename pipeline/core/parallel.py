"""Ordered batch map over worker processes, for CPU-bound pure functions (payload scanning).

`BatchPool.map(fn, items, weight)` cuts `items` into batches of about `batch_bytes` (by
`weight(item)`), runs `fn(batch) -> list of results` and yields the results in item order.
By default (`GONKA_EVIDENCE_WORKERS` unset or 1) everything is mapped in this process. With
more workers, processes start only when more than `min_bytes` is pending; a smaller input is
mapped in this process, with exactly the same results. At most two batches per worker are in
flight, so memory stays bounded whatever the input size.

Workers come from a `forkserver` context: forking the calling process is unsafe once DuckDB's
threads run in it, and the fork server imports `__main__` and the modules named in `preload` once,
so each worker starts in milliseconds. `fn` must be a module-level function and its items and
results picklable; a program that opts into workers needs the `if __name__ == "__main__":` guard
of Python multiprocessing.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TypeVar

from pipeline.core import resources
from pipeline.core.env import EnvError

WORKERS_ENV = "GONKA_EVIDENCE_WORKERS"
BATCH_BYTES = 4_000_000  # ~10 answers of ~1,000 tokens: small enough to balance, big enough for cheap IPC
MIN_POOL_BYTES = 32_000_000  # below this, starting the fork server and workers costs more than it saves

T = TypeVar("T")
R = TypeVar("R")


def worker_count() -> int:
    """`GONKA_EVIDENCE_WORKERS`, else 1 (this process only).

    Workers are opt-in: on the payload benchmark they paid off only for large stores on free
    cores (bench/BENCHMARKS.md), and they oblige library callers to guard `__main__`.
    """
    value = os.environ.get(WORKERS_ENV, "").strip()
    if not value:
        return 1
    try:
        workers = int(value)
    except ValueError:
        workers = 0
    if workers < 1:
        raise EnvError(f"{WORKERS_ENV}={value!r}: expected a whole number of processes >= 1")
    return workers


class BatchPool:
    """Worker processes started on first need, shut down when the `with` block ends."""

    def __init__(
        self,
        workers: int | None = None,
        batch_bytes: int = BATCH_BYTES,
        min_bytes: int = MIN_POOL_BYTES,
        preload: Sequence[str] = (),
    ):
        self.workers = worker_count() if workers is None else workers
        self.batch_bytes, self.min_bytes, self.preload = batch_bytes, min_bytes, list(preload)
        self._executor: ProcessPoolExecutor | None = None

    @property
    def started(self) -> bool:
        return self._executor is not None

    def __enter__(self) -> BatchPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def map(self, fn: Callable[[list[T]], list[R]], items: Iterable[T], weight: Callable[[T], int]) -> Iterator[R]:
        batches = _batches(iter(items), weight, self.batch_bytes)
        if self.workers < 2:
            for batch, _ in batches:
                yield from fn(batch)
            return
        head, head_bytes = [], 0  # decide on the first min_bytes of input: pool or this process
        for batch, size in batches:
            head.append(batch)
            head_bytes += size
            if head_bytes > self.min_bytes:
                break
        else:
            for batch in head:
                yield from fn(batch)
            return
        executor = self.start()
        in_flight: deque[Future] = deque()
        try:
            for batch in _chain(head, (batch for batch, _ in batches)):
                in_flight.append(executor.submit(fn, batch))
                if len(in_flight) >= 2 * self.workers:
                    yield from in_flight.popleft().result()
            while in_flight:
                yield from in_flight.popleft().result()
        finally:
            for future in in_flight:  # the consumer stopped early or a batch failed: drop queued work
                future.cancel()

    def start(self) -> ProcessPoolExecutor:
        """The worker processes, started now if they are not running yet."""
        if self._executor is None:
            context = multiprocessing.get_context("forkserver")
            if self.preload:
                # a no-op once the fork server runs; `__main__` kept so workers do not each import it
                context.set_forkserver_preload(["__main__", *self.preload])
            # Each worker sized to its share of the cores (DuckDB, Arrow: `resources.worker_env`).
            share = resources.worker_env(self.workers)
            self._executor = ProcessPoolExecutor(
                self.workers, mp_context=context, initializer=_enter_share, initargs=(share,)
            )
            for ready in [self._executor.submit(int) for _ in range(self.workers)]:
                ready.result()  # the pool spawns workers on demand: make them all exist now
        return self._executor


def _enter_share(env: dict[str, str]) -> None:
    """A worker's start: its share of the machine in its environment, Arrow's pools sized to it (Polars'
    pool was sized when the fork server imported it: the fork server's environment is this process's)."""
    os.environ.update(env)
    resources.size_pools()


def _batches(items: Iterator[T], weight: Callable[[T], int], batch_bytes: int) -> Iterator[tuple[list[T], int]]:
    """Consecutive batches of about `batch_bytes`, each with its total weight."""
    batch, size = [], 0
    for item in items:
        batch.append(item)
        size += weight(item)
        if size >= batch_bytes:
            yield batch, size
            batch, size = [], 0
    if batch:
        yield batch, size


def _chain(head: list[list[T]], rest: Iterator[list[T]]) -> Iterator[list[T]]:
    while head:
        yield head.pop(0)  # released as it is submitted, not held until the end
    yield from rest


__all__ = ["BATCH_BYTES", "MIN_POOL_BYTES", "WORKERS_ENV", "BatchPool", "worker_count"]
