"""The lake on a Dask cluster gives the single-host numbers: per host, per worker count, per bucket count,
with a worker killed mid-task; forks and disagreeing sealed rows are quarantined."""

from __future__ import annotations

import math
import os
import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from pipeline.evidence.tables.peer_invalidation import peer_invalidation
from pipeline.evidence.window import EvidenceError, Window
from pipeline.network.jobs import lake_quarantine, network_evidence, network_ingest
from pipeline.network.lake import Lake
from pipeline.network.tables import NETWORK_TABLES, NetworkParams
from pipeline.samples.network import write_network
from pipeline.warehouse.database import open_read_only
from tests.helpers import ingest, without_closure

# a real Dask LocalCluster per module; stands in the default tier:
# tests/network/test_lake.py::test_a_copy_cut_into_pieces_writes_the_rows_of_the_whole_copy,
# tests/network/test_lake_agrees.py::test_an_escrow_in_two_epoch_files_is_a_conflict_in_the_lake_as_in_a_warehouse
pytestmark = pytest.mark.heavy


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    root = tmp_path_factory.mktemp("network")
    truth = write_network(root / "copies")
    copies = [str(root / "copies" / name) for name in truth.copies]
    network_ingest(copies, root / "lake", workers=2, buckets=4)
    return root, truth, copies


def _own_warehouse(root: Path, name: str, stores: list[str]) -> Path:
    path = root / f"{name}.duckdb"
    if not path.exists():
        for store in stores:
            ingest(path, store)
    return path


def _single_host(path: Path, table: str, params: NetworkParams):
    """The table from a single-host warehouse: the same partial and reduce on the whole warehouse."""
    con = open_read_only(path)
    try:
        if table == "peer-invalidation":
            assert params.host is not None
            return peer_invalidation(con, params.host, params.window)
        spec = NETWORK_TABLES[table]
        return spec.reduce([spec.partial(con, params)], params)
    finally:
        con.close()


def _plain(value):
    """`value` with NaN as None, so that equal statistics compare equal (NaN != NaN)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return None if isinstance(value, float) and math.isnan(value) else value


def _same(a, b) -> None:
    a, b = without_closure(a), without_closure(b)  # the lake's closure marks: tests/cli/test_network.py
    assert a.rows.equals(b.rows), (a.rows, b.rows)
    assert _plain(a.stats) == _plain(b.stats)
    assert a.notes == b.notes


def test_peer_invalidation_from_the_lake_is_each_hosts_own(network):
    root, truth, copies = network
    lake = root / "lake"
    for copy, (name, planted) in zip(copies, truth.copies.items(), strict=True):
        host = planted["host"]
        for epoch in (None, 3):
            params = NetworkParams(Window(epoch=epoch), host)
            lake_result = network_evidence(
                "peer-invalidation", lake, host=host, epoch=epoch, workers=0, allow_open=True
            )  # epoch 3 is open
            own = _single_host(_own_warehouse(root, name, [copy]), "peer-invalidation", params)
            if name != "host-0":
                _same(lake_result, own)
                continue
            # host-0 joined escrow 3101 by import: its copy has no answers before the import nonce, the
            # other copies do. The lake holds them (it equals a warehouse of every copy, the whole ones
            # first); its own warehouse does not.
            whole = _single_host(_own_warehouse(root, "all", copies[1:] + copies[:1]), "peer-invalidation", params)
            _same(lake_result, whole)
            pooled = lambda r: r.rows.filter(pl.col("group") == "others")["answers"].item()  # noqa: E731
            assert pooled(lake_result) > pooled(own)


def test_executors_and_concentration_equal_a_warehouse_of_every_copy(network):
    root, truth, copies = network
    whole = _own_warehouse(root, "all", copies[1:] + copies[:1])
    for table in ("executors", "concentration"):
        for epoch in (None, 2):
            params = NetworkParams(Window(epoch=epoch))
            _same(network_evidence(table, root / "lake", epoch=epoch, workers=0), _single_host(whole, table, params))
    executors = network_evidence("executors", root / "lake", workers=0)
    assert truth.focal_host in executors.rows["executor"].to_list()
    assert executors.provenance is not None
    assert [s["label"] for s in executors.provenance.sources] == sorted(truth.copies)
    assert all(s["input_digest"].startswith("sha256:") and s["copy_at"] for s in executors.provenance.sources)


def test_a_malformed_host_or_control_is_refused_before_the_lake_is_read(network):
    root, truth, _ = network
    typo = truth.focal_host[:-1] + ("q" if truth.focal_host[-1] != "q" else "p")  # one character off
    for option, kwargs in (("--host", {"host": typo}), ("--control", {"host": truth.focal_host, "control": typo})):
        with pytest.raises(EvidenceError, match=rf"^{option} '{typo}' is not a gonka1… address: it fails its bech32"):
            network_evidence("peer-invalidation", root / "lake", workers=0, **kwargs)


def _results(lake: Path, host: str) -> list:
    return [
        network_evidence("executors", lake, workers=0),
        network_evidence("concentration", lake, workers=0),
        network_evidence("peer-invalidation", lake, host=host, workers=0),
    ]


def test_one_or_three_workers_one_or_four_buckets_give_the_same_tables(network, tmp_path, monkeypatch):
    root, truth, copies = network
    reference = _results(root / "lake", truth.focal_host)
    network_ingest(copies, tmp_path / "one", workers=1, buckets=1)
    network_ingest(copies, tmp_path / "three", workers=3, buckets=4)
    # Every copy cut into pieces of about 100 diffs (stage 1's tasks), by the variable as by the argument.
    monkeypatch.setenv("GONKA_EVIDENCE_NETWORK_PIECE_ROWS", "100")
    network_ingest(copies, tmp_path / "pieces", workers=2, buckets=4)
    assert len(Lake(tmp_path / "one").partitions()) == 3  # one bucket: a partition per epoch
    pieces = {m.label: {f.rsplit("-p", 1)[1] for f in m.files} for m in Lake(tmp_path / "pieces").manifests()}
    assert all(len(found) >= 3 for found in pieces.values()), pieces  # written by several tasks each
    assert not any("-p" in f for m in Lake(root / "lake").manifests() for f in m.files)  # there, one each
    for lake in ("one", "three", "pieces"):
        for got, want in zip(_results(tmp_path / lake, truth.focal_host), reference, strict=True):
            _same(got, want)
            assert got.provenance.sources == want.provenance.sources  # labels, copy times, input digests
            assert got.provenance.quarantined_rows == want.provenance.quarantined_rows > 0


def test_on_one_worker_the_partitions_run_largest_first(network, tmp_path):
    """The scheduler runs stage 2's tasks by their size, largest first; the summary is in (epoch, bucket) order."""
    _, _, copies = network
    summary = network_ingest(copies, tmp_path / "lake", workers=1, buckets=4)
    lake = Lake(tmp_path / "lake")
    sizes = lake.partition_bytes()
    assert len(set(sizes.values())) > 2
    # One worker of one thread runs one task at a time, and each writes its partition's info last.
    finished = sorted(sizes, key=lambda k: lake.partition_info_path(*k).stat().st_mtime_ns)
    assert finished == sorted(sizes, key=lambda k: -sizes[k]) != sorted(sizes)
    assert [(p.epoch, p.bucket) for p in summary.partitions] == sorted(sizes)


def test_a_worker_killed_during_a_partition_task_changes_nothing(network, tmp_path):
    from distributed import Client, LocalCluster
    from distributed.diagnostics.plugin import WorkerPlugin

    root, truth, copies = network
    marker = tmp_path / "killed"

    class KillOnce(WorkerPlugin):
        """The first partition task to start kills its worker process once its warehouse is being written."""

        def __init__(self, marker: str, tmp: str):
            self.marker, self.tmp = marker, tmp

        def transition(self, key, start, finish, **kwargs):
            import glob
            import threading
            import time

            if finish != "executing" or "build_partition" not in str(key):
                return
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.close(fd)

            def kill():
                deadline = time.monotonic() + 30
                while not glob.glob(os.path.join(self.tmp, "partition-*.duckdb")) and time.monotonic() < deadline:
                    time.sleep(0.005)
                os._exit(1)

            threading.Thread(target=kill, daemon=True).start()

    lake = tmp_path / "lake"
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        client.register_plugin(KillOnce(str(marker), str(lake / "_tmp")))
        network_ingest(copies, lake, scheduler=cluster.scheduler_address, buckets=4)
    assert marker.exists()
    for got, want in zip(_results(lake, truth.focal_host), _results(root / "lake", truth.focal_host), strict=True):
        _same(got, want)
    built = sorted(p.relative_to(lake).as_posix() for p in (lake / "_partitions").rglob("*.duckdb"))
    assert built == [f"_partitions/epoch={e}/bucket={b}.duckdb" for e, b in Lake(lake).partitions()]
    assert not (lake / "_tmp").exists()


def test_forks_and_disagreeing_sealed_rows_are_quarantined(network, tmp_path):
    root, truth, copies = network
    quarantine = lake_quarantine(root / "lake")
    forks = quarantine.filter(pl.col("reason").str.contains("fork"))
    # one quarantine row per copy holding the forked diff, as in a single warehouse
    assert forks.select("table_name", "row_key").unique().rows() == [
        ("diffs", f"{truth.fork['escrow_id']}/{truth.fork['nonce']}")
    ]
    assert forks.height >= 2 and any(truth.fork["copy"] in source for source in forks["source_id"])
    # A copy of host-2 whose one sealed (drained) record differs from the original's.
    variant = tmp_path / "host-2-variant"
    shutil.copytree(copies[2], variant)
    epoch_file = next(variant.glob("epoch_*.db"))
    with sqlite3.connect(epoch_file) as db:
        escrow, inference = db.execute(
            "SELECT escrow_id, inference_id FROM sealed_inferences WHERE sealed_nonce > 0 ORDER BY 1, 2 LIMIT 1"
        ).fetchone()
        db.execute(
            "UPDATE sealed_inferences SET sealed_actual_cost = sealed_actual_cost + 1 "
            "WHERE escrow_id = ? AND inference_id = ?",
            (escrow, inference),
        )
    network_ingest([copies[2], str(variant)], tmp_path / "lake", workers=1, buckets=2)
    found = lake_quarantine(tmp_path / "lake").filter(pl.col("table_name") == "sealed_inferences")
    assert found["row_key"].to_list() == [f"{escrow}/{inference}"]
    assert "copies disagree on the sealed row" in found["reason"].item()


def test_inside_a_worker_polars_arrow_and_duckdb_run_one_thread_each():
    """The worker processes are the parallelism: a task's pools do not each take every core."""
    from pipeline.network.cluster import dask_client, run_tasks

    def pools(_: int) -> tuple[int, int, int, int]:
        import polars
        import pyarrow

        from pipeline.warehouse.database import open_scratch

        con = open_scratch()
        try:
            ((threads,),) = con.execute("SELECT current_setting('threads')").fetchall()
        finally:
            con.close()
        return polars.thread_pool_size(), pyarrow.cpu_count(), pyarrow.io_thread_count(), int(threads)

    with dask_client(workers=2) as client:
        assert run_tasks(client, pools, [(0,), (1,)], "pools", lambda *_: None) == [(1, 1, 1, 1)] * 2


def test_a_worker_takes_its_share_of_the_cores_in_every_pool(monkeypatch):
    """One worker on this machine has every core (each pool took one before, whatever the share); an override
    set here (GONKA_EVIDENCE_THREADS for DuckDB) reaches the worker. Polars' pool is sized at the spawn."""
    from pipeline.core.resources import this_machine
    from pipeline.network.cluster import dask_client, run_tasks

    def pools(_: int) -> tuple[int, ...]:
        import polars
        import pyarrow

        from pipeline.warehouse.database import open_scratch

        con = open_scratch()
        try:
            ((threads, io),) = con.execute(
                "SELECT current_setting('threads'), current_setting('async_threads')"
            ).fetchall()
        finally:
            con.close()
        return polars.thread_pool_size(), pyarrow.cpu_count(), pyarrow.io_thread_count(), int(threads), int(io)

    for name in ("GONKA_EVIDENCE_THREADS", "POLARS_MAX_THREADS", "OMP_NUM_THREADS", "ARROW_IO_THREADS"):
        monkeypatch.delenv(name, raising=False)
    cores = this_machine().cores
    with dask_client(workers=1) as client:
        assert run_tasks(client, pools, [(0,)], "pools", lambda *_: None) == [(cores,) * 5]
    monkeypatch.setenv("GONKA_EVIDENCE_THREADS", "3")
    with dask_client(workers=1) as client:
        assert run_tasks(client, pools, [(0,)], "pools", lambda *_: None) == [(cores, cores, cores, 3, 3)]


def test_a_worker_has_imported_the_task_modules_before_its_first_task():
    """The local cluster's workers preload the task modules and engines, so no first task pays for them."""
    from pipeline.network.cluster import dask_client

    wanted = ("pipeline.network.partition", "pipeline.network.copies", "pipeline.ingest.store", "polars", "duckdb")

    def loaded() -> list[bool]:
        import sys

        return [name in sys.modules for name in wanted]

    with dask_client(workers=2) as client:
        assert list(client.run(loaded).values()) == [[True] * len(wanted)] * 2  # client.run is not a task
        assert client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == 0
    # Without the preload, a fresh worker has none of them: what the test sees is the preload's doing.
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as client:
        assert list(client.run(loaded).values()) == [[False] * len(wanted)]
