"""The cores and memory this process may use, and DuckDB's threads and memory limit sized from them.

Cores: the CPUs the process may run on (its affinity mask), fewer under a cgroup CPU quota (a
container's ``--cpus``). Memory: the cgroup's memory limit (v2 ``memory.max``, v1
``memory.limit_in_bytes``; the tightest of the process's group and its parents), else the machine's RAM.

DuckDB needs memory for each thread it runs (its per-thread hash tables and pinned blocks), so a
connection's threads and memory limit are set together (`duckdb_budget`): the limit is a base plus
`PER_THREAD_BYTES` for each thread, never more than `MEMORY_SHARE` of the memory this process may use.
The variables stay overrides: `GONKA_EVIDENCE_THREADS` sets the threads, a memory variable (such as
``GONKA_EVIDENCE_INGEST_MEMORY``) the limit itself.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pipeline.core.env import env_int, env_size, env_text, size_bytes

THREADS_ENV = "GONKA_EVIDENCE_THREADS"
MAX_THREADS = 1024
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


def duckdb_budget(memory_env: str, base: str, threads: int | None = None) -> DuckDBBudget:
    """Threads and memory limit sized together: `threads` (default: `duckdb_threads()`) and `base` plus
    PER_THREAD_BYTES per thread, at most MEMORY_SHARE of `memory_available()`. Where that cap binds, the
    threads the machine suggested are lowered so that their share is at most half the limit; threads the
    caller or GONKA_EVIDENCE_THREADS asked for are kept. `memory_env`, when set, is the limit as given."""
    asked = threads is not None or env_text(THREADS_ENV) is not None
    threads = duckdb_threads() if threads is None else threads
    if env_text(memory_env) is not None:
        return DuckDBBudget(threads, env_size(memory_env, base), memory_env)
    cap = int(memory_available() * MEMORY_SHARE)
    limit = min(size_bytes(base) + PER_THREAD_BYTES * threads, cap)
    if not asked:
        threads = max(1, min(threads, limit // 2 // PER_THREAD_BYTES))
    return DuckDBBudget(threads, f"{max(limit // 10**6, 1)}MB", memory_env)


def duckdb_threads() -> int:
    """GONKA_EVIDENCE_THREADS, else the cores this process may use."""
    return env_int(THREADS_ENV, cores(), 1, MAX_THREADS, "threads")


@cache
def cores() -> int:
    """The CPUs this process may run on, at most its cgroup's CPU quota (rounded up); at least 1."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    quota = cgroup_cpus()
    return max(1, min(n, math.ceil(quota)) if quota else n)


@cache
def memory_available() -> int:
    """The bytes this process may use: its cgroup's memory limit, at most the machine's RAM."""
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = cgroup_memory()
    return min(ram, limit) if limit else ram


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
    "THREADS_ENV",
    "DuckDBBudget",
    "cgroup_cpus",
    "cgroup_memory",
    "cores",
    "duckdb_budget",
    "duckdb_threads",
    "memory_available",
]
