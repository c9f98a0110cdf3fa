"""The lake without a cluster: buckets, stage 1's files and their replacement, stage 2's dedupe and its skip."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline.network.copies import write_copy
from pipeline.network.lake import LAKE_TABLES, Lake, LakeError, bucket_of
from pipeline.network.partition import build_partition
from pipeline.samples.network import write_network


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    root = tmp_path_factory.mktemp("copies")
    truth = write_network(root, hosts=3)
    return [str(root / name) for name in truth.copies], truth


@pytest.fixture(scope="module")
def written(copies, tmp_path_factory) -> Path:
    """A lake of one bucket with stage 1 done for every copy, written once: the tests that build its
    partitions (which writes to the lake) each build them in a copy of it."""
    paths, _ = copies
    lake_dir = tmp_path_factory.mktemp("written") / "lake"
    Lake(lake_dir, 1, create=True)
    for path in paths:
        write_copy(str(lake_dir), path)
    return lake_dir


def _copy_of(lake_dir: Path, to: Path) -> Path:
    shutil.copytree(lake_dir, to, dirs_exist_ok=True)
    return to


@pytest.fixture(scope="module")
def built(written, tmp_path_factory):
    """A copy of `written` with every partition built once, each escrow's derivations counted per partition:
    (lake directory, {(epoch, bucket): (what build_partition returned, the escrows it derived, counted)}). The
    tests that only read the built partitions share it; one that builds again does so in a copy of it."""
    from collections import Counter

    import pipeline.ingest.derive as derive

    lake_dir = _copy_of(written, tmp_path_factory.mktemp("built") / "lake")
    derived: Counter[str] = Counter()
    real = derive.derive_escrows

    def counting(con, escrow_ids):
        derived.update(escrow_ids)
        return real(con, escrow_ids)

    results = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(derive, "derive_escrows", counting)
        for epoch, bucket in Lake(lake_dir).partitions():
            derived.clear()
            results[(epoch, bucket)] = (build_partition(str(lake_dir), epoch, bucket), Counter(derived))
    return lake_dir, results


@pytest.fixture(scope="module")
def ingested(copies, tmp_path_factory):
    """`network ingest` of every copy into a new lake of four buckets, once, and the partitions in the order
    stage 2 started them: (lake directory, summary, started)."""
    import pipeline.network.jobs as jobs

    paths, _ = copies
    lake_dir = tmp_path_factory.mktemp("ingested") / "lake"
    started: list[tuple[int, int]] = []
    real = jobs.build_partition

    def recording(lake_root: str, epoch: int, bucket: int):
        started.append((epoch, bucket))
        return real(lake_root, epoch, bucket)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jobs, "build_partition", recording)
        summary = jobs.network_ingest(paths, lake_dir, workers=0, buckets=4)
    return lake_dir, summary, started


def test_the_bucket_is_a_stable_hash_of_the_escrow():
    # md5("3101") begins 62f91ce9b820a491 (= 7131… mod 16 is 1): the bucket never depends on the engine,
    # the process or the run.
    assert [bucket_of("3101", n) for n in (1, 4, 16, 1000)] == [0, 1, 1, int("62f91ce9b820a491", 16) % 1000]
    assert bucket_of("2100", 16) == bucket_of("2100", 16)


def test_a_lake_keeps_its_bucket_count(tmp_path):
    Lake(tmp_path, 4, create=True)
    assert Lake(tmp_path).buckets == 4
    with pytest.raises(LakeError, match="has 4 buckets, not 8"):
        Lake(tmp_path, 8, create=True)
    with pytest.raises(LakeError, match="no lake here yet"):
        Lake(tmp_path / "none")


def test_re_running_a_copy_replaces_its_files(copies, tmp_path):
    paths, _ = copies
    lake = Lake(tmp_path, 2, create=True)
    first = write_copy(str(tmp_path), paths[0])
    before = {p.relative_to(tmp_path) for p in tmp_path.rglob("*.parquet")}
    again = write_copy(str(tmp_path), paths[0])
    after = {p.relative_to(tmp_path) for p in tmp_path.rglob("*.parquet")}
    assert (again.copy_id, again.files, again.rows) == (first.copy_id, first.files, first.rows)
    assert len(after) == len(before) == first.files and after.isdisjoint(before)  # a new generation, the old gone
    (manifest,) = lake.manifests()
    assert {tmp_path / f for f in manifest.files} == {tmp_path / p for p in after}
    assert not list(lake.tmp.glob("*"))


def test_a_partition_decodes_each_diff_once_and_is_skipped_when_unchanged(copies, built, tmp_path):
    paths, truth = copies
    lake = Lake(_copy_of(built[0], tmp_path))  # every copy written, in one bucket, its partitions built once
    fork = truth.fork
    epoch = next(e for e, _ in lake.partitions() if str(e) == fork["escrow_id"][0])
    first, _ = built[1][(epoch, 0)]  # the partition's first build
    assert first.diffs_before > first.diffs_after > 0 and first.bytes_before > first.bytes_after
    assert first.forks == 1
    info = json.loads(lake.partition_info_path(epoch, 0).read_text())
    assert info["fingerprint"] == lake.fingerprint(epoch, 0) and len(info["copies"]) == len(paths)
    assert build_partition(str(tmp_path), epoch, 0).skipped
    write_copy(str(tmp_path), paths[1])  # a new generation of one copy: the partition is built again
    assert not build_partition(str(tmp_path), epoch, 0).skipped


def test_a_partition_derives_each_escrow_once_after_its_copies(built):
    from collections import Counter

    from pipeline.warehouse.database import open_read_only

    lake_dir, results = built
    lake = Lake(lake_dir)  # every copy written, in one bucket; each partition built once, its derivations counted
    assert sorted(results) == lake.partitions()
    shared = 0  # escrows held by several copies: each derived once all the same
    for epoch, bucket in lake.partitions():
        result, derived = results[(epoch, bucket)]
        con = open_read_only(lake.warehouse_path(epoch, bucket))
        try:
            escrows = {r[0] for r in con.execute("SELECT escrow_id FROM raw_sessions").fetchall()}
        finally:
            con.close()
        held = Counter(
            e for m in lake.manifests() for f in lake.files(m, "sessions", epoch, bucket) for e in _escrows(f)
        )
        shared += sum(1 for n in held.values() if n > 1)
        assert set(derived) == escrows and set(derived.values()) == {1}
        assert result.derived_escrows == len(escrows)
    assert shared > 0


def _escrows(parquet_file) -> list[str]:
    import pyarrow.parquet as pq

    return pq.read_table(parquet_file, columns=["escrow_id"])["escrow_id"].to_pylist()


def test_stage_2_starts_the_largest_partitions_first_and_reports_them_in_order(copies, tmp_path, monkeypatch):
    """The test below, with each partition's dedupe and ingest left out (an empty warehouse file in their
    place): stage 1 writes the copies' files, stage 2 starts each partition by what its files weigh and reports
    the bytes it read, and the order is the one below."""
    import pipeline.network.jobs as jobs
    import pipeline.network.partition as partition

    paths, _ = copies
    monkeypatch.setattr(partition, "_dedupe", lambda *args: None)
    monkeypatch.setattr(partition, "_ingest_copies", lambda tmp, *args: Path(tmp).touch())
    started: list[tuple[int, int]] = []
    real = jobs.build_partition

    def recording(lake_root: str, epoch: int, bucket: int):
        started.append((epoch, bucket))
        return real(lake_root, epoch, bucket)

    monkeypatch.setattr(jobs, "build_partition", recording)
    summary = jobs.network_ingest(paths, tmp_path / "lake", workers=0, buckets=4)
    _started_largest_first(tmp_path / "lake", summary, started)


# a whole `network ingest` of every copy (stage 2 built); stands in the default tier: the same order with each
# partition's dedupe and ingest left out,
# tests/network/test_lake.py::test_stage_2_starts_the_largest_partitions_first_and_reports_them_in_order
@pytest.mark.heavy
def test_stage_2_runs_the_largest_partitions_first_and_reports_them_in_order(ingested):
    """Partitions start largest first (by the bytes of their files), so the largest does not end the stage
    alone; the summary still lists them by (epoch, bucket)."""
    _started_largest_first(*ingested)


def _started_largest_first(lake_dir, summary, started) -> None:
    lake = Lake(lake_dir)
    sizes = lake.partition_bytes()
    assert sizes == {
        key: sum(f.stat().st_size for m in lake.manifests() for t in LAKE_TABLES for f in lake.files(m, t, *key))
        for key in lake.partitions()
    }
    assert len(set(sizes.values())) > 2  # the order below is not an accident of equal sizes
    assert started == sorted(sizes, key=lambda k: -sizes[k])
    assert started != sorted(sizes)
    assert [(p.epoch, p.bucket) for p in summary.partitions] == sorted(sizes)
    assert [p.bytes_read for p in summary.partitions] == [sizes[k] for k in sorted(sizes)]


def test_a_forked_diff_is_reported_as_a_single_warehouse_reports_it(copies, built, tmp_path):
    """Two copies with other bytes at one (escrow, nonce): the partition warehouse holds both versions in
    diff_forks, quarantines each under its copy, marks the escrow conflicted and replays the version whose
    sha256 sorts first, as a warehouse of the same copies does (today the lake dropped the second version:
    no diff_forks row, the escrow not conflicted, the replay on the first copy's version)."""
    from pipeline.warehouse.database import open_read_only
    from tests.helpers import ingest

    paths, truth = copies
    fork = truth.fork
    single = tmp_path / "single.duckdb"
    for path in paths:
        ingest(single, path)
    lake_dir, results = built  # every copy written, in one bucket, its partitions built: read here
    lake = Lake(lake_dir)
    epoch = next(e for e, _ in lake.partitions() if str(e) == fork["escrow_id"][0])
    assert results[(epoch, 0)][0].forks == 1

    def seen(warehouse) -> tuple:
        con = open_read_only(warehouse)
        try:
            key = [fork["escrow_id"], fork["nonce"]]
            versions = con.execute(
                "SELECT DISTINCT digest, replayed FROM diff_forks WHERE escrow_id = ? AND nonce = ? ORDER BY ALL", key
            ).fetchall()
            row_key = [f"{fork['escrow_id']}/{fork['nonce']}"]
            quarantined = con.execute(
                "SELECT count(DISTINCT source_id) FROM quarantine WHERE table_name = 'diffs' AND row_key = ?", row_key
            ).fetchall()[0][0]
            reasons = con.execute(
                "SELECT reason FROM quarantine WHERE table_name = 'diffs' AND row_key = ? ORDER BY ALL", row_key
            ).fetchall()
            conflicted = con.execute("SELECT conflicted FROM escrows WHERE escrow_id = ?", key[:1]).fetchall()
            txs = con.execute(
                "SELECT nonce, tx_index, kind, inference_id, address, valid FROM txs WHERE escrow_id = ? ORDER BY ALL",
                key[:1],
            ).fetchall()
            return versions, quarantined, reasons, conflicted, txs
        finally:
            con.close()

    versions, quarantined, reasons, conflicted, txs = seen(lake.warehouse_path(epoch, 0))
    assert len(versions) == 2 and [r for _, r in versions].count(True) == 1
    assert quarantined >= 2 and len(reasons) == quarantined and conflicted == [(True,)]
    assert (versions, quarantined, reasons, conflicted, txs) == seen(single)


@pytest.mark.parametrize("layout", ["sqlite", "postgres"])
def test_a_copy_cut_into_pieces_writes_the_rows_of_the_whole_copy(layout, sqlite_copy, pg_copy, tmp_path):
    """Stage 1 in pieces (ranges of escrow ids, every table and epoch): the lake holds exactly the rows the
    copy read whole gives, each once; the pieces hold about the same diffs."""
    import duckdb

    from pipeline.network.copies import commit_copy, cut_copy, plan_copy, write_piece

    spec = str(sqlite_copy()) if layout == "sqlite" else pg_copy()
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    Lake(whole, 2, create=True)
    Lake(cut, 2, create=True)
    one = write_copy(str(whole), spec)
    plan = plan_copy(spec)
    assert [e for e, _ in plan.escrows] == sorted(e for e, _ in plan.escrows) and len(plan.escrows) > 3
    pieces = cut_copy(plan, 3, "g0")
    assert len(pieces) == 3 and pieces[0].low is None and pieces[-1].below is None
    assert [p.below for p in pieces[:-1]] == [p.low for p in pieces[1:]]
    assert max(p.weight for p in pieces) < plan.weight / 2
    three = commit_copy(str(cut), [write_piece(str(cut), spec, p) for p in reversed(pieces)])
    assert (three.copy_id, three.label, three.rows) == (one.copy_id, one.label, one.rows)
    (a,), (b,) = Lake(whole).manifests(), Lake(cut).manifests()
    assert {f.rsplit("-p", 1)[1] for f in b.files} == {"0.parquet", "1.parquet", "2.parquet"}
    assert (a.tables, a.rows, a.source_id) == (b.tables, b.rows, b.source_id)
    if layout == "sqlite":  # the store's files, hashed once
        assert a.input_digest == b.input_digest
        # A store with a write-ahead log is read from a private copy of its files: not once per piece.
        next(Path(spec).glob("epoch_*.db")).with_suffix(".db-wal").touch()
        assert [(p.low, p.below) for p in cut_copy(plan_copy(spec), 3, "g1")] == [(None, None)]
    else:  # the rows read, per piece
        assert a.input_digest != b.input_digest and b.input_digest.startswith("sha256:")
    con = duckdb.connect()
    for table in LAKE_TABLES:
        rows = [
            con.execute(
                "SELECT * FROM read_parquet(?, hive_partitioning = false) ORDER BY ALL",
                [[str(lake.root / f) for f in m.files if f.startswith(f"{table}/")]],
            ).fetchall()
            if any(f.startswith(f"{table}/") for f in m.files)
            else []
            for lake, m in ((Lake(whole), a), (Lake(cut), b))
        ]
        assert rows[0] == rows[1], table
        assert len(rows[0]) == a.rows.get(table, 0) and (table != "diffs" or rows[0])


def test_escrow_ranges_that_meet_read_every_row_once_odd_ids_included(sqlite_copy):
    """A NULL escrow id lies below every bound, a blob above (a number in a TEXT column is stored as text):
    the pieces' reads together set aside the same rows as the whole read, each once, and keep the same rows."""
    import sqlite3

    from pipeline.sources.store import open_store

    path = sqlite_copy()
    epoch_file = sorted(path.glob("epoch_*.db"))[-1]
    with sqlite3.connect(epoch_file) as db:
        db.executemany("INSERT INTO diffs (escrow_id, nonce, txs_proto) VALUES (?, 1, x'00')", [(None,), (b"\xff",)])
    epoch = int(epoch_file.stem.split("_")[1])
    store = open_store(str(path))
    try:
        escrows = [e for e, _ in store.escrow_weights()]
        bounds = [None, escrows[1], escrows[-1], None]
        ranges = list(zip(bounds[:-1], bounds[1:], strict=True))

        def read(**kw):
            rows = [r for b in store.read("diffs", epoch, **kw) for r in zip(*b.to_pydict().values(), strict=True)]
            return rows, sorted(store.take_rejected())

        whole, set_aside = read()
        parts = [read(escrows=r) for r in ranges]
    finally:
        store.close()
    assert len(set_aside) == 2 and sorted(r for rows, _ in parts for r in rows) == sorted(whole)
    assert sorted(p for _, problems in parts for p in problems) == set_aside
    assert [len(problems) for _, problems in parts] == [1, 0, 1]  # NULL first, the blob last


def test_a_copy_is_cut_between_escrows_into_pieces_of_about_the_same_diffs():
    from pipeline.network.copies import CopyPlan, cut_copy

    def cut(weights: list[int], pieces: int) -> list[tuple[str | None, str | None, int]]:
        plan = CopyPlan("copy", [(f"e{i:02d}", n) for i, n in enumerate(weights)])
        found = cut_copy(plan, pieces, "g")
        assert [(p.index, p.count) for p in found] == [(i, len(found)) for i in range(len(found))]
        return [(p.low, p.below, p.weight) for p in found]

    assert cut([10] * 12, 3) == [(None, "e04", 40), ("e04", "e08", 40), ("e08", None, 40)]
    # an escrow larger than a share is a piece of its own, and the rest is shared by the pieces after it
    assert cut([100, 1, 1, 1, 1, 1, 1], 3) == [(None, "e01", 100), ("e01", "e04", 3), ("e04", None, 3)]
    assert cut([5, 5], 3) == [(None, "e01", 5), ("e01", None, 5)]  # never more pieces than escrows
    assert cut([5, 5], 1) == [(None, None, 10)]


def _lake_files(lake_dir: Path) -> list[Path]:
    return sorted(p.relative_to(lake_dir) for p in lake_dir.rglob("*") if p.is_file() and p.name != "_lake.lock")


def test_a_copy_whose_escrows_name_other_creators_is_refused_before_it_is_written_to_the_lake(
    copies, written, tmp_path
):
    """A copy whose sessions give escrow ids of the lake's copies other creators (an unrelated network's
    copy) is refused in one line, naming the escrows, once its stage 1 is done and before its manifest names
    its files: not one of the lake's files changes, none of the refused copy's is left."""
    import sqlite3

    from pipeline.network.jobs import network_ingest

    paths, _ = copies
    lake_dir = _copy_of(written, tmp_path / "lake")  # stage 1 of every copy done
    theirs = Path(shutil.copytree(paths[0], tmp_path / "theirs"))
    for db_file in theirs.glob("epoch_*.db"):
        with sqlite3.connect(db_file) as db:
            db.execute("UPDATE sessions SET creator_addr = 'gonka1another' || creator_addr")
        db.close()
    before = _lake_files(lake_dir)
    with pytest.raises(LakeError) as refused:
        network_ingest([str(theirs)], lake_dir, workers=0)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{theirs}: escrow ids of escrows in the lake name other")
    assert "(creator" in message and "nothing was written to the lake" in message
    assert _lake_files(lake_dir) == before  # not one file of the refused copy, no temporary one either
    assert len(Lake(lake_dir).manifests()) == len(paths)


# another network's generated copy, then a whole `network ingest` again; stands in the default tier:
# tests/network/test_lake.py::test_a_copy_whose_escrows_name_other_creators_is_refused_before_it_is_written_to_the_lake
@pytest.mark.heavy
def test_an_unrelated_copy_is_refused_before_it_is_written_to_the_lake(copies, ingested, tmp_path):
    """Another network's copy (the sample generator under another seed: escrow ids 2100.. with other
    creators) was written into the lake, then its partitions refused it naming a copy already there
    ("host-0: escrow ids ..."): the lake kept the unrelated rows, and every later `network ingest` and
    `network evidence` of that lake failed."""
    from pipeline.network.jobs import network_ingest
    from pipeline.samples import SampleSpec, generate_timeline

    paths, _ = copies
    lake_dir = _copy_of(ingested[0], tmp_path / "lake")  # `network ingest` of the copies
    before = sorted(p.relative_to(lake_dir) for p in lake_dir.rglob("*") if p.is_file() and p.name != "_lake.lock")
    theirs = generate_timeline(SampleSpec(seed=12)).copy(last_epoch=4).write_sqlite(tmp_path / "theirs")
    with pytest.raises(LakeError) as refused:
        network_ingest([str(theirs)], lake_dir, workers=0)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{theirs}: escrow ids of escrows in the lake name other")
    assert "(creator" in message and "nothing was written to the lake" in message
    after = sorted(p.relative_to(lake_dir) for p in lake_dir.rglob("*") if p.is_file() and p.name != "_lake.lock")
    assert after == before  # not one file of the unrelated copy, no temporary one either
    again = network_ingest(paths, lake_dir, workers=0)  # the lake is as it was: its copies ingest again
    assert len(again.copies) == len(paths)
