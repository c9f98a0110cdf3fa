"""The cores and memory this process may use, read from cgroup files laid out as the kernel does (v2's
unified tree, v1's hierarchy per controller), and DuckDB's threads and memory limit sized from them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.core import resources
from pipeline.core.env import EnvError
from pipeline.core.resources import (
    PER_THREAD_BYTES,
    Machine,
    Share,
    cgroup_cpus,
    cgroup_memory,
    duckdb_budget,
    machine,
    share,
    worker_env,
)

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


# -- a worker's share of the machine --------------------------------------------------------------------


def _share_env(monkeypatch, **values: str) -> None:
    names = ("GONKA_EVIDENCE_PROCESSES", "GONKA_EVIDENCE_MEMORY", "GONKA_EVIDENCE_THREADS")
    for name in (*names, "POLARS_MAX_THREADS", "OMP_NUM_THREADS", "ARROW_IO_THREADS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)


def test_the_machine_is_the_affinity_and_ram_at_most_the_cgroup_limits(tmp_path):
    limits = {"user.slice/cpu.max": "600000 100000", "user.slice/memory.max": "8000000000"}
    root = _files(tmp_path, {"cgroup.controllers": "cpu memory"} | limits)
    assert machine(root, "0::/user.slice\n", cpus=16, ram=64 * 10**9) == Machine(6, 8 * 10**9)
    assert machine(root, "0::/user.slice\n", cpus=4, ram=2 * 10**9) == Machine(4, 2 * 10**9)  # under the limits
    v1 = _files(tmp_path / "v1", {"cpu/cpu.cfs_quota_us": "250000", "cpu/cpu.cfs_period_us": "100000"})
    assert machine(v1, "3:cpu:/\n", cpus=16, ram=10**9) == Machine(3, 10**9)  # 2.5 CPUs rounded up


def test_a_worker_gets_the_machine_divided_by_the_workers(tmp_path, monkeypatch):
    root = _files(tmp_path, {"cgroup.controllers": "cpu memory", "cpu.max": "1600000 100000", "memory.max": "max"})
    sixteen = machine(root, "0::/\n", cpus=64, ram=64 * 10**9)  # a 16-CPU quota on a 64-core host
    _share_env(monkeypatch)
    assert share(sixteen) == Share(1, 16, 64 * 10**9)  # not a worker: the whole machine
    monkeypatch.setenv("GONKA_EVIDENCE_PROCESSES", "4")
    assert share(sixteen) == Share(4, 4, 16 * 10**9)
    monkeypatch.setenv("GONKA_EVIDENCE_PROCESSES", "32")
    assert share(sixteen) == Share(32, 1, 2 * 10**9)  # more workers than cores: one each
    monkeypatch.setenv("GONKA_EVIDENCE_MEMORY", "3GB")  # set: the memory as given
    assert share(sixteen) == Share(32, 1, 3 * 10**9)


def test_worker_env_sizes_the_pools_to_the_share_and_keeps_what_is_set(monkeypatch):
    monkeypatch.setattr(resources, "this_machine", lambda: Machine(16, 64 * 10**9))
    _share_env(monkeypatch)
    pools = {"POLARS_MAX_THREADS": "4", "OMP_NUM_THREADS": "4", "ARROW_IO_THREADS": "4"}
    assert worker_env(4) == {"GONKA_EVIDENCE_PROCESSES": "4"} | pools
    assert worker_env(16, "2GB")["GONKA_EVIDENCE_MEMORY"] == "2GB" and worker_env(16)["POLARS_MAX_THREADS"] == "1"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # an override: kept in every worker
    assert worker_env(4)["OMP_NUM_THREADS"] == "3" and worker_env(4)["POLARS_MAX_THREADS"] == "4"
    # A worker that starts workers: they share its share (2 of 2 of 16 cores: 4 each).
    monkeypatch.setenv("GONKA_EVIDENCE_PROCESSES", "2")
    assert worker_env(2)["GONKA_EVIDENCE_PROCESSES"] == "4" and worker_env(2)["POLARS_MAX_THREADS"] == "4"


def test_duckdb_in_a_worker_takes_its_share_unless_the_threads_are_set(monkeypatch):
    monkeypatch.setattr(resources, "this_machine", lambda: Machine(16, 64 * 10**9))
    _share_env(monkeypatch, GONKA_EVIDENCE_PROCESSES="8")
    assert (resources.cores(), resources.memory_available()) == (2, 8 * 10**9)
    assert duckdb_budget("GONKA_EVIDENCE_DUCKDB_MEMORY", "1GB").threads == 2
    assert resources.pool_threads("POLARS_MAX_THREADS") == 2
    monkeypatch.setenv("GONKA_EVIDENCE_THREADS", "16")  # the override wins over the share
    assert duckdb_budget("GONKA_EVIDENCE_DUCKDB_MEMORY", "1GB").threads == 16
    monkeypatch.setenv("POLARS_MAX_THREADS", "5")
    assert resources.pool_threads("POLARS_MAX_THREADS") == 5


@pytest.mark.parametrize(("name", "value"), [("GONKA_EVIDENCE_PROCESSES", "0"), ("GONKA_EVIDENCE_MEMORY", "lots")])
def test_a_bad_share_variable_is_an_env_error_naming_it(monkeypatch, name, value):
    _share_env(monkeypatch, **{name: value})
    with pytest.raises(EnvError, match=name):
        share(Machine(2, 10**9))


def test_the_limit_grows_with_the_work_up_to_the_share(monkeypatch):
    _share_env(monkeypatch, GONKA_EVIDENCE_THREADS="16")
    monkeypatch.delenv("GONKA_EVIDENCE_INGEST_MEMORY", raising=False)
    monkeypatch.setattr(resources, "this_machine", lambda: Machine(16, 64 * 10**9))
    assert duckdb_budget("GONKA_EVIDENCE_INGEST_MEMORY", "200MB").memory_limit == "264MB"  # no work: as before
    budget = duckdb_budget("GONKA_EVIDENCE_INGEST_MEMORY", "200MB", work_bytes=229 * 10**6)
    assert budget.memory_limit == "493MB"  # the fifth of the 1M network's copies: 229MB of warehouse
    # A worker of 64 on the machine: its share (1GB) caps the limit at half of it.
    monkeypatch.setenv("GONKA_EVIDENCE_PROCESSES", "64")
    assert duckdb_budget("GONKA_EVIDENCE_INGEST_MEMORY", "200MB", work_bytes=4 * 10**9).memory_limit == "500MB"
    monkeypatch.setenv("GONKA_EVIDENCE_INGEST_MEMORY", "300MB")  # set: the limit as given, whatever the work
    assert duckdb_budget("GONKA_EVIDENCE_INGEST_MEMORY", "200MB", work_bytes=4 * 10**9).memory_limit == "300MB"


def test_the_ingest_budget_counts_the_warehouse_data(tmp_path, monkeypatch):
    from pipeline.warehouse.database import data_bytes, ingest_budget, open_for_write

    _share_env(monkeypatch, GONKA_EVIDENCE_THREADS="4")
    monkeypatch.delenv("GONKA_EVIDENCE_INGEST_MEMORY", raising=False)
    con = open_for_write(tmp_path / "w.duckdb")
    try:
        assert data_bytes(con) == 0 and ingest_budget(con).memory_limit == "216MB"
        con.execute("CREATE TABLE filler AS SELECT range AS i, md5(range::VARCHAR) AS s FROM range(300000)")
        con.execute("CHECKPOINT")
        held = data_bytes(con)
        assert held > 5 * 10**6
        assert ingest_budget(con).memory_limit == f"{216 + held // 10**6}MB"
    finally:
        con.close()
