"""The Dask `distributed` cluster the network jobs run on: the only module that imports Dask.

By default a `LocalCluster` on this machine: one worker process per core, one thread each, a memory
limit per worker. The worker processes are the parallelism, so within one the thread pools of Polars,
Arrow and DuckDB are sized to the worker's share of the machine, its cores divided by the workers
(`pipeline.core.resources.worker_env`; one thread each at one worker per core), unless this process's
environment sets them. With
a scheduler address, the workers of an existing cluster (docs/network.md shows how to start one); they
need gonka-evidence installed and the lake directory at the same path (a shared file system).

A task is a pure function of the lake's files: when a worker dies, the scheduler runs its tasks again
on another worker and they give the same result; what they write appears by rename only.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pipeline.core.env import MIN_SIZE_BYTES, env_size, size_bytes
from pipeline.core.errors import UserError
from pipeline.core.events import Progress
from pipeline.core.resources import POOL_VARIABLES, cores, worker_env

# A worker holds one partition's DuckDB session (buffer pool GONKA_EVIDENCE_INGEST_MEMORY, 200 MB) plus
# the Arrow batches of one chunk: 2 GB leaves room at the 2M scale (bench/BENCHMARKS.md, network).
MEMORY_ENV, DEFAULT_MEMORY_LIMIT = "GONKA_EVIDENCE_NETWORK_MEMORY", "2GB"
# Imported by each local worker as it starts, after `worker_env` is set: the task modules and their engines,
# which a worker's first task would otherwise pay for (bench/BENCHMARKS.md, network lake).
WORKER_PRELOAD = "pipeline.network.worker"


class ClusterError(UserError):
    """A cluster that cannot be started or reached; one-line message."""


def worker_memory(memory_limit: str | None) -> str:
    """The memory limit of a local worker: `memory_limit`, else GONKA_EVIDENCE_NETWORK_MEMORY, else 2GB; a
    size with its unit (512MB, 2GiB), else a one-line error."""
    if memory_limit is None:
        return env_size(MEMORY_ENV, DEFAULT_MEMORY_LIMIT)
    if size_bytes(memory_limit) < MIN_SIZE_BYTES:
        raise ClusterError(f"--memory-limit {memory_limit!r}: expected a size of at least 1MB, such as 512MB or 2GB")
    return memory_limit.strip()


@contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None, memory_limit: str | None = None) -> Iterator:
    """A `distributed.Client` on a new LocalCluster, or on the cluster at `scheduler` (tcp://HOST:PORT);
    with `workers=0` and no scheduler, None: the tasks run in this process, one after another (no Dask).
    `memory_limit`: per local worker (`worker_memory`)."""
    memory_limit = worker_memory(memory_limit)
    if workers == 0 and not scheduler:
        yield None
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ClusterError(
            "the network mode needs Dask: pip install 'gonka-evidence[network]' (dask[distributed])"
        ) from None
    if scheduler:
        try:
            client = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as exc:
            raise ClusterError(f"{scheduler}: no Dask scheduler answers ({str(exc).splitlines()[0]})") from None
        with client:
            yield client
        return
    if workers is not None and workers < 0:
        raise ClusterError("--workers must be 0 (this process) or more")
    n = workers or cores()
    env = worker_env(n, memory_limit)
    with (
        _before_spawn(env),
        LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            memory_limit=memory_limit,
            env=env,
            preload=[WORKER_PRELOAD],
            dashboard_address=":0",  # a free port: no clash with another cluster on this machine
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


@contextmanager
def _before_spawn(env: dict[str, str]) -> Iterator[None]:
    """The pools' variables in the worker processes' environment as they are spawned. A nanny sets its
    `env` in the new process only after the process has imported this program's `__main__` (which may
    import Polars, sizing its pool to the machine: measured, two threads a worker on 2 cores where one was
    set); Dask's pre-spawn variables are set in this process, before each spawn (Dask's own include
    OMP_NUM_THREADS=1). This process's Polars and Arrow pools are sized first, so they keep their size,
    and every variable the spawns set here is restored when the cluster ends."""
    import dask
    import polars  # noqa: F401  (sized now, before the variables change here)
    import pyarrow

    pyarrow.cpu_count(), pyarrow.io_thread_count()  # Arrow's pools made now, sized by this process's variables
    key = "distributed.nanny.pre-spawn-environ"
    pre_spawn = dict(dask.config.get(key, {})) | {name: env[name] for name in POOL_VARIABLES}
    before = {name: os.environ.get(name) for name in pre_spawn}
    try:
        with dask.config.set({key: pre_spawn}):
            yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_tasks(
    client: Any,
    fn: Callable[..., Any],
    arguments: Sequence[tuple],
    name: str,
    progress: Progress,
    bytes_of: Callable[[Any], int] | None = None,
    sizes: Sequence[int] | None = None,
) -> list[Any]:
    """`fn(*args)` for each of `arguments` on the cluster, results in argument order; progress counts
    tasks done (and the bytes each read, with `bytes_of`). With `sizes` (one per argument), the tasks
    are submitted largest first, with that priority, so that the largest is not the last to start.
    A task that raises stops the job with its error; a task whose worker died is run again by the
    scheduler (up to its allowed failures)."""
    progress(name, 0, len(arguments))
    results: list[Any] = [None] * len(arguments)
    order = list(range(len(arguments)))
    if sizes is not None:
        order.sort(key=lambda i: -sizes[i])  # stable: equal sizes keep argument order

    def done(i: int, result: Any) -> None:
        results[i] = result
        progress(name, 1, 0)
        if bytes_of is not None:
            n = bytes_of(result)
            progress("bytes read", n, n)

    if client is None:
        for i in order:
            done(i, fn(*arguments[i]))
        return results
    from distributed import as_completed

    # Dask runs a higher priority first; one submit per task would otherwise run them first come, first served.
    futures = [client.submit(fn, *arguments[i], pure=False, priority=len(order) - rank) for rank, i in enumerate(order)]
    index = {f.key: i for f, i in zip(futures, order, strict=True)}
    try:
        for future in as_completed(futures):
            done(index[future.key], future.result())
    finally:
        for future in futures:
            future.release()
    return results
