"""The cores and memory this process may use, read from cgroup files laid out as the kernel does (v2's
unified tree, v1's hierarchy per controller), and DuckDB's threads and memory limit sized from them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.core import resources
from pipeline.core.env import EnvError
from pipeline.core.resources import PER_THREAD_BYTES, cgroup_cpus, cgroup_memory, duckdb_budget

V1_UNLIMITED = "9223372036854771712"


def _files(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text + "\n")
    return root


def test_v2_takes_the_tightest_limit_of_the_group_and_its_parents(tmp_path):
    root = _files(
        tmp_path,
        {
            "cgroup.controllers": "cpu memory",
            "cpu.max": "max 100000",
            "memory.max": "max",
            "user.slice/cpu.max": "150000 100000",
            "user.slice/memory.max": "536870912",
            "user.slice/app/cpu.max": "max 100000",
            "user.slice/app/memory.max": "1073741824",
        },
    )
    membership = "0::/user.slice/app\n"
    assert cgroup_cpus(root, membership) == 1.5
    assert cgroup_memory(root, membership) == 536870912


def test_v1_reads_the_hierarchy_of_each_controller(tmp_path):
    root = _files(
        tmp_path,
        {
            "cpu,cpuacct/cpu.cfs_quota_us": "-1",
            "cpu,cpuacct/cpu.cfs_period_us": "100000",
            "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "250000",
            "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000",
            "memory/memory.limit_in_bytes": V1_UNLIMITED,
            "memory/docker/abc/memory.limit_in_bytes": "2147483648",
        },
    )
    membership = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n"
    assert cgroup_cpus(root, membership) == 2.5
    assert cgroup_memory(root, membership) == 2147483648


def test_a_group_path_outside_the_mount_reads_the_mount_itself(tmp_path):
    # A container without a cgroup namespace: /proc/self/cgroup names the host's path, the mount is its group.
    root = _files(tmp_path, {"cgroup.controllers": "cpu memory", "cpu.max": "50000 100000", "memory.max": "268435456"})
    membership = "0::/kubepods/pod1/c1\n"
    assert cgroup_cpus(root, membership) == 0.5
    assert cgroup_memory(root, membership) == 268435456


def test_no_quota_and_no_limit_are_none(tmp_path):
    v2 = _files(tmp_path / "v2", {"cgroup.controllers": "cpu memory", "cpu.max": "max 100000", "memory.max": "max"})
    assert cgroup_cpus(v2, "0::/\n") is None and cgroup_memory(v2, "0::/\n") is None
    v1 = _files(tmp_path / "v1", {"cpu/cpu.cfs_quota_us": "-1", "memory/memory.limit_in_bytes": V1_UNLIMITED})
    assert cgroup_cpus(v1, "3:cpu:/\n2:memory:/\n") is None and cgroup_memory(v1, "3:cpu:/\n2:memory:/\n") is None


def test_hybrid_mode_reads_the_v1_hierarchies_beside_an_empty_unified_tree(tmp_path):
    root = _files(
        tmp_path,
        {"unified/cgroup.procs": "", "cpu/cpu.cfs_quota_us": "100000", "cpu/cpu.cfs_period_us": "100000"},
    )
    assert cgroup_cpus(root, "0::/\n4:cpu:/\n") == 1.0


def test_this_machine_offers_at_least_one_core_and_no_more_than_its_affinity():
    assert 1 <= resources.cores() <= len(os.sched_getaffinity(0))
    assert resources.memory_available() > 0


def test_the_memory_limit_grows_with_the_threads(monkeypatch):
    monkeypatch.delenv("GONKA_EVIDENCE_INGEST_MEMORY", raising=False)
    monkeypatch.setattr(resources, "memory_available", lambda: 64 * 10**9)
    monkeypatch.setenv("GONKA_EVIDENCE_THREADS", "16")
    budget = duckdb_budget("GONKA_EVIDENCE_INGEST_MEMORY", "200MB")
    assert (budget.threads, budget.memory_limit) == (16, f"{200 + 16 * PER_THREAD_BYTES // 10**6}MB")
    assert duckdb_budget("GONKA_EVIDENCE_INGEST_MEMORY", "200MB", threads=64).memory_limit == "456MB"
    monkeypatch.setenv("GONKA_EVIDENCE_INGEST_MEMORY", "150MiB")  # set: the limit as given
    assert duckdb_budget("GONKA_EVIDENCE_INGEST_MEMORY", "200MB").memory_limit == "150MiB"


def test_a_small_machine_caps_the_limit_and_lowers_the_threads_it_suggested(monkeypatch):
    monkeypatch.delenv("GONKA_EVIDENCE_THREADS", raising=False)
    monkeypatch.delenv("GONKA_EVIDENCE_DUCKDB_MEMORY", raising=False)
    monkeypatch.setattr(resources, "memory_available", lambda: 400 * 10**6)
    monkeypatch.setattr(resources, "cores", lambda: 64)
    budget = duckdb_budget("GONKA_EVIDENCE_DUCKDB_MEMORY", "1GB")
    assert budget.memory_limit == "200MB"  # half the 400 MB the process may use
    assert budget.threads == 200 * 10**6 // 2 // PER_THREAD_BYTES
    monkeypatch.setenv("GONKA_EVIDENCE_THREADS", "64")  # asked for: kept, whatever the limit
    assert duckdb_budget("GONKA_EVIDENCE_DUCKDB_MEMORY", "1GB").threads == 64


@pytest.mark.parametrize("value", ["0", "many", "2000"])
def test_bad_threads_are_an_env_error_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("GONKA_EVIDENCE_THREADS", value)
    with pytest.raises(EnvError, match="GONKA_EVIDENCE_THREADS"):
        duckdb_budget("GONKA_EVIDENCE_DUCKDB_MEMORY", "1GB")
