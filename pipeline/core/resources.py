"""The cores and memory this process may use, and the thread pools and DuckDB memory limits sized from them.

The machine: the CPUs the process may run on (its affinity mask), fewer under a cgroup CPU quota (a
container's ``--cpus``), and the cgroup's memory limit (v2 ``memory.max``, v1 ``memory.limit_in_bytes``;
the tightest of the process's group and its parents), else the machine's RAM.

A process that is one of N workers on the machine (a Dask worker of the network mode, a decode worker of
the ingest) gets its share, the machine's cores and memory divided by N (`share`): its parent starts it
with `worker_env(N)`, which says N (``GONKA_EVIDENCE_PROCESSES``) and sizes the pools a library reads at
import (Polars' ``POLARS_MAX_THREADS``, Arrow's ``OMP_NUM_THREADS`` and ``ARROW_IO_THREADS``) to the share.
Every DuckDB connection's threads come from the share too, and its memory limit is capped by it.

DuckDB needs memory for each thread it runs (its per-thread hash tables and pinned blocks) and for the
data its statements read, so a connection's threads and memory limit are set together (`duckdb_budget`):
the limit is a base plus `PER_THREAD_BYTES` for each thread plus what the work holds (an ingest: the
warehouse's data), never more than `MEMORY_SHARE` of the memory this process may use.
The variables stay overrides: `GONKA_EVIDENCE_THREADS` sets the threads, a memory variable (such as
``GONKA_EVIDENCE_INGEST_MEMORY``) the limit itself, ``GONKA_EVIDENCE_MEMORY`` the memory this process
may use, ``GONKA_EVIDENCE_PROCESSES`` the N it shares the machine with.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pipeline.core.env import env_int, env_size, env_text, size_bytes

THREADS_ENV = "GONKA_EVIDENCE_THREADS"
MAX_THREADS = 1024
# This process is one of N workers on the machine (set by the process that starts it, `worker_env`).
PROCESSES_ENV = "GONKA_EVIDENCE_PROCESSES"
MAX_PROCESSES = 4096
# The memory this process may use, as given (default: its share of the machine's).
PROCESS_MEMORY_ENV = "GONKA_EVIDENCE_MEMORY"
# The variables that size Polars' pool (read at import) and Arrow's CPU and I/O pools (read at first use).
POLARS_THREADS_ENV, ARROW_CPU_ENV, ARROW_IO_ENV = "POLARS_MAX_THREADS", "OMP_NUM_THREADS", "ARROW_IO_THREADS"
POOL_VARIABLES = (POLARS_THREADS_ENV, ARROW_CPU_ENV, ARROW_IO_ENV)
# What each DuckDB thread adds to the memory an ingest needs. The smallest GONKA_EVIDENCE_INGEST_MEMORY
# that completes, threads forced on 2 cores: generated copies (seed 11, 30 escrows per epoch, four into
# one warehouse) 81MB at 1-2 threads, 93MB at 16, 151MB at 64, 275MB at 128; data-samples/store 65MB
# at 2, 76MB at 16, 150MB at 64, 287MB at 128: at most 1.8MB a thread. 4MB leaves room for larger chunks.
PER_THREAD_BYTES = 4_000_000
# At most this share of the process's memory goes to one DuckDB pool; the rest holds the Arrow and
# Polars data of an ingest chunk and Python itself (DuckDB's own default is 80% of RAM).
MEMORY_SHARE = 0.5
CGROUP_ROOT = Path("/sys/fs/cgroup")
_V1_UNLIMITED = 2**60  # cgroup v1 writes "no limit" as the largest page-aligned 64-bit number


@dataclass(frozen=True)
class DuckDBBudget:
    """DuckDB's `threads` and `memory_limit` for one connection, and the variable that sets the limit."""

    threads: int
    memory_limit: str  # as DuckDB takes it: 264MB
    memory_env: str

    def describe(self) -> str:
        return f"limit {self.memory_limit} with {self.threads} thread{'s' if self.threads != 1 else ''}"


def duckdb_budget(memory_env: str, base: str, threads: int | None = None, work_bytes: int = 0) -> DuckDBBudget:
    """Threads and memory limit sized together, to the work and to the memory this process may use:
    `threads` (default: `duckdb_threads()`) and `base` plus PER_THREAD_BYTES per thread plus `work_bytes`
    (what the work holds: an ingest's warehouse, `ingest_budget`), at most MEMORY_SHARE of
    `memory_available()` (this process's share of the machine). Where that cap binds, the threads the
    machine suggested are lowered so that their share is at most half the limit; threads the caller or
    GONKA_EVIDENCE_THREADS asked for are kept. `memory_env`, when set, is the limit as given."""
    asked = threads is not None or env_text(THREADS_ENV) is not None
    threads = duckdb_threads() if threads is None else threads
    if env_text(memory_env) is not None:
        return DuckDBBudget(threads, env_size(memory_env, base), memory_env)
    cap = int(memory_available() * MEMORY_SHARE)
    limit = min(size_bytes(base) + PER_THREAD_BYTES * threads + max(work_bytes, 0), cap)
    if not asked:
        threads = max(1, min(threads, limit // 2 // PER_THREAD_BYTES))
    return DuckDBBudget(threads, f"{max(limit // 10**6, 1)}MB", memory_env)


def duckdb_threads() -> int:
    """GONKA_EVIDENCE_THREADS, else the cores this process may use."""
    return env_int(THREADS_ENV, cores(), 1, MAX_THREADS, "threads")


@dataclass(frozen=True)
class Machine:
    """The cores and bytes of memory of the machine as this process sees it (affinity, cgroup limits)."""

    cores: int
    memory: int


@dataclass(frozen=True)
class Share:
    """This process's share of the machine: one of `processes` workers, `cores` and `memory` its part."""

    processes: int
    cores: int
    memory: int


def machine(
    root: Path = CGROUP_ROOT, membership: str | None = None, cpus: int | None = None, ram: int | None = None
) -> Machine:
    """`cpus` (default: the CPUs this process may run on) at most the cgroup CPU quota (rounded up), at
    least 1; `ram` (default: the machine's) at most the cgroup memory limit. The cgroup files are read
    under `root` for the groups `membership` names (/proc/self/cgroup's text, read when None)."""
    if membership is None:
        membership = _read(Path("/proc/self/cgroup"))
    if cpus is None:
        try:
            cpus = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cpus = os.cpu_count() or 1
    if ram is None:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    quota, limit = cgroup_cpus(root, membership), cgroup_memory(root, membership)
    return Machine(max(1, min(cpus, math.ceil(quota)) if quota else cpus), min(ram, limit) if limit else ram)


@cache
def this_machine() -> Machine:
    """`machine()` of this process, read once."""
    return machine()


def share(of: Machine | None = None) -> Share:
    """This process's share of `of` (default: `this_machine()`): GONKA_EVIDENCE_PROCESSES=N (default 1,
    set by `worker_env` in the workers a process starts) divides the cores (rounded down, at least 1) and
    the memory; GONKA_EVIDENCE_MEMORY, when set, is the memory as given."""
    of = of or this_machine()
    n = env_int(PROCESSES_ENV, 1, 1, MAX_PROCESSES, "processes")
    memory = of.memory // n
    if env_text(PROCESS_MEMORY_ENV) is not None:
        memory = size_bytes(env_size(PROCESS_MEMORY_ENV, "1GB"))
    return Share(n, max(1, of.cores // n), memory)


def cores() -> int:
    """The cores this process may use: its share of the machine's (`share`)."""
    return share().cores


def memory_available() -> int:
    """The bytes this process may use: its share of the machine's (`share`)."""
    return share().memory


def pool_threads(variable: str) -> int:
    """The threads of the library pool that `variable` sizes (POLARS_MAX_THREADS, OMP_NUM_THREADS for
    Arrow's CPU pool, ARROW_IO_THREADS): its value when set, else the cores this process may use."""
    return env_int(variable, cores(), 1, MAX_THREADS, "threads")


def worker_env(workers: int, memory: str | None = None) -> dict[str, str]:
    """The variables of a process that this one starts as one of `workers` workers: N (this process's
    own N times `workers`: a worker's workers share its share) and the library pools, which read their
    variable once, at import or first use, sized to the worker's cores; a pool variable that is set here
    is kept (an override). `memory`: the memory each worker may use (a Dask worker's limit), else its
    share of this process's."""
    n = share().processes * max(1, workers)
    if n > MAX_PROCESSES:
        n = MAX_PROCESSES
    threads = str(max(1, this_machine().cores // n))
    env = {PROCESSES_ENV: str(n)} | {name: env_text(name) or threads for name in POOL_VARIABLES}
    if memory is not None:
        env[PROCESS_MEMORY_ENV] = memory
    elif env_text(PROCESS_MEMORY_ENV) is not None:
        env[PROCESS_MEMORY_ENV] = f"{max(memory_available() // max(1, workers) // 10**6, 1)}MB"
    return env


def size_pools() -> dict[str, int]:
    """Arrow's CPU and I/O pools sized to this process's share now (they can be resized; Polars' cannot,
    so `worker_env` sets POLARS_MAX_THREADS before the worker starts); the threads of each pool, and
    DuckDB's for a connection opened now, as a worker reports them."""
    import pyarrow as pa

    pa.set_cpu_count(pool_threads(ARROW_CPU_ENV))
    pa.set_io_thread_count(pool_threads(ARROW_IO_ENV))
    sizes = {"arrow_cpu": pa.cpu_count(), "arrow_io": pa.io_thread_count(), "duckdb": duckdb_threads()}
    if "polars" in sys.modules:
        sizes["polars"] = sys.modules["polars"].thread_pool_size()
    return sizes


def cgroup_cpus(root: Path = CGROUP_ROOT, membership: str | None = None) -> float | None:
    """The CPUs the cgroup quotas of this process allow (quota / period, the tightest of its group and
    its parents); None without a quota. `membership` is /proc/self/cgroup's text (read when None)."""
    quotas = []
    for version, group in _groups(root, membership, "cpu"):
        if version == 2:
            fields = _read(group / "cpu.max").split()
            if len(fields) == 2 and fields[0] != "max":
                quotas.append(_number(fields[0]) / max(_number(fields[1]), 1))
        else:
            quota, period = _number(_read(group / "cpu.cfs_quota_us")), _number(_read(group / "cpu.cfs_period_us"))
            if quota > 0 and period > 0:
                quotas.append(quota / period)
    return min(quotas) if quotas else None


def cgroup_memory(root: Path = CGROUP_ROOT, membership: str | None = None) -> int | None:
    """The bytes the cgroup memory limits of this process allow (the tightest of its group and its
    parents); None without a limit."""
    limits = []
    for version, group in _groups(root, membership, "memory"):
        limit = _number(_read(group / ("memory.max" if version == 2 else "memory.limit_in_bytes")))
        if 0 < limit < _V1_UNLIMITED:
            limits.append(limit)
    return min(limits) if limits else None


def _groups(root: Path, membership: str | None, controller: str) -> list[tuple[int, Path]]:
    """(cgroup version, directory) of this process's group for `controller` and of its parents that
    exist below `root`: the unified (v2) tree when `root` is one, else the v1 hierarchy of `controller`.
    A group path that is not below the mount (a container without a cgroup namespace) leaves the mount."""
    if membership is None:
        membership = _read(Path("/proc/self/cgroup"))
    unified = (root / "cgroup.controllers").exists()
    for line in membership.splitlines():
        hierarchy, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if unified and hierarchy == "0" and not controllers:
            mount, version = root, 2
        elif not unified and controller in controllers.split(","):
            mount, version = next((d for d in (root / controllers, root / controller) if d.is_dir()), root), 1
        else:
            continue
        parts = [p for p in path.split("/") if p]
        dirs = [mount.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]
        return [(version, d) for d in dirs if d.is_dir()]
    return []


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def _number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


__all__ = [
    "MEMORY_SHARE",
    "PER_THREAD_BYTES",
    "POOL_VARIABLES",
    "PROCESSES_ENV",
    "PROCESS_MEMORY_ENV",
    "THREADS_ENV",
    "DuckDBBudget",
    "Machine",
    "Share",
    "cgroup_cpus",
    "cgroup_memory",
    "cores",
    "duckdb_budget",
    "duckdb_threads",
    "machine",
    "memory_available",
    "pool_threads",
    "share",
    "size_pools",
    "this_machine",
    "worker_env",
]
