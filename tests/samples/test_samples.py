"""The sample generator: real SQLite files, a real PostgreSQL database, facts checked against the truth."""

from __future__ import annotations

import base64
import json
import sqlite3
import subprocess
import sys
import tomllib
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import psycopg
import pytest
from google.protobuf import unknown_fields

from pipeline.samples import SampleSpec, generate_timeline
from pipeline.samples.model import Status
from pipeline.samples.postgres_writer import TABLE_NAMES
from pipeline.samples.spec import BUILD_CHUNK, BUILD_FIX, BUILD_RAW, BUILD_V1
from pipeline.sources.decode import devshard_pb2 as pb

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
EPOCH_TABLES = [
    "sessions",
    "diffs",
    "signatures",
    "snapshots",
    "sealed_inferences",
    "inference_validation_obs",
    "sealed_validation_obs",
]


@pytest.fixture(scope="module")
def timeline():
    return generate_timeline(SampleSpec(seed=7))


@pytest.fixture(scope="module")
def copy3(timeline):
    return timeline.copy(last_epoch=3)


@pytest.fixture(scope="module")
def copy4(timeline):
    return timeline.copy(last_epoch=4)


@pytest.fixture(scope="module")
def store3(copy3, tmp_path_factory):
    return copy3.write_sqlite(tmp_path_factory.mktemp("store3"))


@pytest.fixture(scope="module")
def store4(copy4, tmp_path_factory):
    return copy4.write_sqlite(tmp_path_factory.mktemp("store4"))


@pytest.fixture(scope="module")
def pg3(copy3):
    name = f"samples_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    conninfo = PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"
    try:
        copy3.write_postgres(conninfo)
        with psycopg.connect(conninfo) as connection:
            yield connection
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _sqlite(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [info[1] for info in db.execute(f"PRAGMA table_info({table})")]


def _normal(value):
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, bool):
        return int(value)
    return value


def test_same_seed_same_bytes_other_seed_other_bytes(timeline):
    again = generate_timeline(SampleSpec(seed=7))
    assert [p.diffs for p in again.escrows] == [p.diffs for p in timeline.escrows]
    assert again.copy(4).truth.inferences.equals(timeline.copy(4).truth.inferences)
    other = generate_timeline(SampleSpec(seed=8))
    assert [p.diffs for p in other.escrows] != [p.diffs for p in timeline.escrows]


def test_sqlite_and_postgres_hold_identical_rows(copy3, store3, pg3):
    for epoch in copy3.epochs:
        db = _sqlite(store3 / f"epoch_{epoch}.db")
        for table in EPOCH_TABLES:
            if not db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone():
                count = pg3.execute(f"SELECT count(*) FROM {TABLE_NAMES[table]} WHERE epoch_id = %s", (epoch,))
                assert count.fetchone()[0] == 0, (epoch, table)
                continue
            columns = ", ".join(_columns(db, table))
            lite = sorted(tuple(map(_normal, r)) for r in db.execute(f"SELECT {columns} FROM {table}"))
            pg = sorted(
                tuple(map(_normal, r))
                for r in pg3.execute(f"SELECT {columns} FROM {TABLE_NAMES[table]} WHERE epoch_id = %s", (epoch,))
            )
            assert lite == pg, (epoch, table)
            assert len(lite) == sum(r["epoch_id"] == epoch for r in copy3.tables[table])
    meta = _sqlite(store3 / "_meta.db")
    assert sorted(meta.execute("SELECT escrow_id, epoch_id FROM escrow_epoch")) == sorted(
        pg3.execute("SELECT escrow_id, epoch_id FROM devshard_session_index")
    )
    assert sorted(meta.execute("SELECT * FROM escrow_cache")) == sorted(
        pg3.execute("SELECT * FROM devshard_escrow_cache")
    )
    # payloads: base64 files and bytea columns give the same bytes
    stored = {
        (e, s, i): (bytes(p), bytes(r))
        for e, s, i, p, r in pg3.execute(
            "SELECT epoch_id, escrow_id, inference_id, prompt_payload, response_payload FROM payload_storage"
        )
    }
    files = {}
    for path in (store3 / "payloads").glob("*/*/*.json"):
        body = json.loads(path.read_bytes())
        files[(int(path.parts[-3]), path.parts[-2], int(path.stem))] = (
            base64.b64decode(body["prompt_payload"]),
            base64.b64decode(body["response_payload"]),
        )
    assert files == stored and len(files) == len(copy3.payloads) > 50
    identity = pg3.execute("SELECT identity FROM devshard_storage_identity").fetchone()[0]
    assert str(identity) == copy3.truth.planted["lineage"]


def test_postgres_partitions_and_narrow_epoch(copy3, pg3):
    children = {r[0] for r in pg3.execute("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid")}
    assert {f"devshard_diffs_epoch_{e}" for e in (1, 2, 3)} <= children
    assert "payload_storage_epoch_1" in children
    versions = dict(pg3.execute("SELECT epoch_id, count(version) FROM devshard_sessions GROUP BY 1").fetchall())
    assert versions[1] == 0 and versions[2] == 3
    rows = pg3.execute(
        "SELECT bool_or(obs_present), max(sealed_status) FROM devshard_sealed_inferences WHERE epoch_id = 1"
    ).fetchone()
    assert rows == (False, 0)  # the old build wrote bare rows only


def test_oldest_epoch_file_is_narrow_and_has_no_created_at(store3):
    db = _sqlite(store3 / "epoch_1.db")
    assert _columns(db, "sealed_inferences") == ["escrow_id", "inference_id", "sealed_nonce"]
    assert "version" not in _columns(db, "sessions")
    assert db.execute("SELECT max(created_at) FROM diffs").fetchone() == (0,)
    newer = _sqlite(store3 / "epoch_2.db")
    assert "obs_present" in _columns(newer, "sealed_inferences")
    assert newer.execute("SELECT min(created_at) FROM diffs").fetchone()[0] > 1_700_000_000
    ms = _sqlite(store3 / "epoch_3.db").execute("SELECT min(created_at) FROM diffs").fetchone()[0]
    assert ms > 1_700_000_000_000


def test_truth_status_matches_sealed_rows(copy4, store4):
    truth = copy4.truth.inferences
    sealed, live = Counter(), Counter()
    for epoch in copy4.epochs:
        db = _sqlite(store4 / f"epoch_{epoch}.db")
        for nonce, present, status in db.execute(
            "SELECT sealed_nonce, obs_present, sealed_status FROM sealed_inferences"
        ):
            if present:
                (sealed if nonce else live)[Status(status).label] += 1
    full = truth.filter(pl.col("sealed") & ~pl.col("bare"))
    assert sealed == Counter(dict(full.group_by("status").len().iter_rows()))
    unsealed = truth.filter(~pl.col("sealed") & pl.col("status").is_in(["challenged", "validated", "invalidated"]))
    assert live == Counter(dict(unsealed.group_by("status").len().iter_rows()))
    assert set(truth["status"]) == {s.label for s in Status}  # the cut epoch shows pending and started
    assert truth.filter(pl.col("drained"))["has_finish_tx"].not_().all()
    assert truth.filter(pl.col("drained")).height >= 3
    assert len(copy4.truth.planted["bare_rows"]) > 0


def test_validated_by_bitmap_follows_positive_validations(timeline, copy4, store4):
    groups = {p.escrow_id: p.group for p in timeline.escrows}
    positive = {}
    txs = copy4.truth.txs.filter(pl.col("kind") == "validation").sort("nonce", "tx_index")
    for escrow, inference, address, valid in txs.select("escrow_id", "inference_id", "address", "valid").iter_rows():
        seen = positive.setdefault((escrow, inference), {})
        seen.setdefault(address, valid)  # a second verdict of one address changes nothing
    db = _sqlite(store4 / "epoch_3.db")
    checked = 0
    for escrow, inference, bitmap in db.execute(
        "SELECT escrow_id, inference_id, sealed_validated_by FROM sealed_inferences WHERE obs_present = 1"
    ):
        expected = 0
        for address, valid in positive.get((escrow, inference), {}).items():
            if valid:
                for slot in groups[escrow].slots_of(address):
                    expected |= 1 << slot
        assert bitmap == expected.to_bytes(16, "little")
        checked += expected > 0
    assert checked > 20


def test_unknown_member_decodes_as_no_oneof(copy4, store4):
    planted = copy4.truth.planted["unknown_txs"]
    assert planted
    for where in planted:
        db = _sqlite(store4 / f"epoch_{where['epoch_id']}.db")
        (blob,) = db.execute(
            "SELECT txs_proto FROM diffs WHERE escrow_id = ? AND nonce = ?", (where["escrow_id"], where["nonce"])
        ).fetchone()
        tx = pb.DiffContent.FromString(blob).txs[where["tx_index"]]
        assert tx.WhichOneof("tx") is None
        assert [f.field_number for f in unknown_fields.UnknownFieldSet(tx)] == [15]
    kinds = copy4.truth.txs.filter(pl.col("kind") == "other")
    assert kinds.height == len(planted) + len(copy4.truth.planted["heartbeats"])


def test_copy_prunes_old_epochs_and_advances_statuses(copy3, copy4, store4):
    assert sorted(p.name for p in store4.glob("epoch_*.db")) == ["epoch_2.db", "epoch_3.db", "epoch_4.db"]
    assert not list(store4.glob("*-wal")) and not list(store4.glob("*-shm"))
    assert {e for (e,) in _sqlite(store4 / "_meta.db").execute("SELECT epoch_id FROM escrow_epoch")} == {2, 3, 4}
    assert not (store4 / "payloads" / "1").exists()
    before = copy3.truth.escrows.filter(pl.col("epoch_id") == 3)
    after = copy4.truth.escrows.filter(pl.col("epoch_id") == 3)
    assert set(before["status"]) == {"active"} and set(after["status"]) == {"settled"}
    assert (after["latest_nonce"] > before["latest_nonce"]).all()
    # The later copy extends the earlier one's diff log byte for byte.
    old = {(r["escrow_id"], r["nonce"]): r["txs_proto"] for r in copy3.tables["diffs"] if r["epoch_id"] == 3}
    new = {(r["escrow_id"], r["nonce"]): r["txs_proto"] for r in copy4.tables["diffs"] if r["epoch_id"] == 3}
    assert all(new[key] == blob for key, blob in old.items())
    epoch2 = copy4.truth.escrows.filter(pl.col("epoch_id") == 2)
    assert sorted(epoch2["status"]) == ["active", "settled", "settled"]  # one escrow never finalizes


def test_planted_variants(timeline, copy4):
    truth, planted = copy4.truth, copy4.truth.planted
    txs = truth.txs
    assert planted["votes_after_resolution"] and planted["duplicate_validations"]
    assert planted["challenged_at_settlement"] and planted["heartbeats"]
    assert {"timeout", "error_miss", "finalize"} <= set(txs["kind"])
    inferences = truth.inferences
    challenged = inferences.filter(pl.col("challenged"))
    assert {"validated", "invalidated"} <= set(challenged["status"])
    multi_slot = [p for p in timeline.escrows if p.group.weight(timeline.focal_host) >= 2]
    assert multi_slot and all(timeline.focal_host in p.group.slots for p in timeline.escrows)
    assert (truth.escrows["n_addresses"] < truth.escrows["group_size"]).all()
    reasons = Counter()
    timeouts = txs.filter(pl.col("kind") == "timeout").select("epoch_id", "escrow_id", "nonce", "tx_index")
    for where in timeouts.iter_rows():
        row = next(r for r in copy4.tables["diffs"] if (r["epoch_id"], r["escrow_id"], r["nonce"]) == where[:3])
        reasons[pb.DiffContent.FromString(row["txs_proto"]).txs[where[3]].timeout_inference.reason] += 1
    assert reasons[pb.TIMEOUT_REASON_REFUSED] and reasons[pb.TIMEOUT_REASON_EXECUTION]


def _build_at(timeline, at: int) -> str:
    return timeline.cast.focal_build(at)


def test_focal_host_behaviour_by_build(timeline, copy4):
    focal = timeline.focal_host
    inferences = copy4.truth.inferences.filter(pl.col("has_finish_tx") & (pl.col("executor") == focal))
    inferences = inferences.with_columns(
        build=pl.col("started_at").map_elements(lambda t: _build_at(timeline, t), return_dtype=pl.String),
        sampled=pl.col("temperature").fill_null(1.0) > 0,
    )
    raw = inferences.filter(pl.col("build") == BUILD_RAW)
    assert raw.filter(pl.col("sampled") & (pl.col("status") != "timed_out"))["status"].to_list() == (
        ["invalidated"] * raw.filter(pl.col("sampled") & (pl.col("status") != "timed_out")).height
    )
    assert raw.filter(pl.col("sampled")).height > 20
    assert not raw.filter(~pl.col("sampled"))["challenged"].any()
    assert not inferences.filter(pl.col("build") == BUILD_FIX)["status"].is_in(["invalidated"]).any()
    verdicts = copy4.truth.txs.filter((pl.col("address") == focal) & pl.col("kind").is_in(["validation", "vote"]))
    verdicts = verdicts.with_columns(
        build=pl.col("event_at").map_elements(lambda t: _build_at(timeline, t), return_dtype=pl.String)
    )
    raw_invalid = verdicts.filter(pl.col("build") == BUILD_RAW)["valid"].not_().mean()
    fix_invalid = verdicts.filter(pl.col("build") == BUILD_FIX)["valid"].not_().mean()
    assert raw_invalid > 0.85 and fix_invalid < 0.5


def test_the_generator_command_writes_store_and_builds(tmp_path, monkeypatch, capsys):
    """`python -m pipeline.samples OUT --seed 3 --last-epoch 2`, its main() in this process: the copy of that seed
    taken in epoch 2, the builds of its focal host (named on stdout) and of one other host, the vLLM log."""
    import functools

    import pipeline.samples.__main__ as samples_main

    generate = functools.cache(samples_main.generate_timeline)  # the timeline of seed 3 generated once here
    monkeypatch.setattr(samples_main, "generate_timeline", generate)
    out = tmp_path / "samples"
    samples_main.main([str(out), "--seed", "3", "--last-epoch", "2"])
    focal = capsys.readouterr().out.strip()
    assert focal == generate(SampleSpec(seed=3)).focal_host
    assert generate.cache_info().currsize == 1
    _check_generated(out, focal)


def _check_generated(out: Path, focal: str) -> None:
    """What the generator command writes for seed 3 up to epoch 2: the store, the builds and the vLLM log."""
    assert sorted(p.name for p in (out / "store").iterdir()) == [
        "_meta.db",
        "accounting.db",
        "epoch_1.db",
        "epoch_2.db",
        "payloads",
    ]
    builds = tomllib.loads((out / "builds.toml").read_text())["builds"]
    labels = [b["label"] for b in builds if b["host"] == focal]
    assert labels == [BUILD_V1, BUILD_RAW, BUILD_FIX, BUILD_CHUNK]  # the fourth deployed after the copies
    assert len({b["host"] for b in builds}) == 2
    assert (out / "vllm" / "vllm.log").is_file()  # the focal host's vLLM log over the copy's epochs


# the command as a process of its own; stands in the default tier: its main() in this process,
# tests/samples/test_samples.py::test_the_generator_command_writes_store_and_builds
@pytest.mark.heavy
def test_cli_writes_store_and_builds(tmp_path):
    out = tmp_path / "samples"
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.samples", str(out), "--seed", "3", "--last-epoch", "2"],
        capture_output=True,
        text=True,
        check=True,
    )
    focal = result.stdout.strip()
    assert focal == generate_timeline(SampleSpec(seed=3)).focal_host
    _check_generated(out, focal)


# -- the shipped data-samples/ -------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "data-samples"
NETWORK = SHIPPED / "network"  # the network mode's sample copies (pipeline/samples/network.py)
# Each shipped store directory and the release line that wrote it (data-samples/README.md).
SHIPPED_STORES = {
    "store": "snapshot-import",
    "release-lines/ha/store": "ha",
    "release-lines/v0.2.13/store": "v0.2.13",
    "release-lines/v0.2.14/store": "v0.2.14",
}


def _readme_commands() -> list[list[str]]:
    """The generator commands data-samples/README.md gives, as argument lists (OUT_DIR first)."""
    text = (SHIPPED / "README.md").read_text()
    return [
        line.split()[3:] for line in text.splitlines() if line.startswith("python -m pipeline.samples data-samples")
    ]


def _files(root: Path, skip: list[Path] = ()) -> set[str]:
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and not any(p == s or s in p.parents for s in skip)
    }


def test_every_shipped_file_is_what_the_readme_commands_write(tmp_path, monkeypatch):
    import functools

    import pipeline.samples.__main__ as samples_main
    from pipeline.samples.__main__ import main

    # The commands differ in what they write of one timeline (seed 7): it is generated once, not per command
    # (the same spec gives the same timeline: test_same_seed_same_bytes_other_seed_other_bytes).
    monkeypatch.setattr(samples_main, "generate_timeline", functools.cache(samples_main.generate_timeline))
    commands = _readme_commands()
    outs = [Path(argv[0]) for argv in commands]
    assert sorted(map(str, outs)) == sorted(
        ["data-samples"] + [f"data-samples/release-lines/{p.name}" for p in (SHIPPED / "release-lines").iterdir()]
    )
    assert {str(Path("data-samples") / s) for s in SHIPPED_STORES} == {str(o / "store") for o in outs}
    for argv in commands:
        out = Path(argv[0])
        main([str(tmp_path / out), *argv[1:]])
        written = tmp_path / out
        # The shipped folder holds exactly what the command writes, besides the other commands' folders.
        nested = [ROOT / o for o in outs if o != out and out in o.parents] + [SHIPPED / "README.md", NETWORK]
        assert _files(ROOT / out, nested) == _files(written), argv
        for name in _files(written):
            assert (ROOT / out / name).read_bytes() == (written / name).read_bytes(), f"{out / name} is not current"
    # The wheel carries it (all but network/, which setup.py leaves out).
    assert sum(p.stat().st_size for p in SHIPPED.rglob("*") if p.is_file() and NETWORK not in p.parents) < 8_000_000


def test_the_shipped_network_is_what_its_command_writes(tmp_path):
    """data-samples/network/ is `python -m pipeline.samples.network data-samples/network` (data-samples/README.md)."""
    from pipeline.samples.network import main

    assert "python -m pipeline.samples.network data-samples/network\n" in (SHIPPED / "README.md").read_text()
    main([str(tmp_path / "network")])
    assert _files(NETWORK) == _files(tmp_path / "network")
    for name in _files(NETWORK):
        assert (NETWORK / name).read_bytes() == (tmp_path / "network" / name).read_bytes(), f"{name} is not current"
    assert sum(p.stat().st_size for p in NETWORK.rglob("*") if p.is_file()) < 3_000_000


@pytest.mark.parametrize("path", list(SHIPPED_STORES))
def test_each_shipped_copy_ingests_to_its_truth(path, tmp_path, timeline):
    from pipeline.sources.store import open_store
    from tests.helpers import frame, ingest
    from tests.sources.store.test_release_lines import RECOGNISED

    line = SHIPPED_STORES[path]
    copy = timeline.copy(last_epoch=4, line=line)
    wh = tmp_path / "w.duckdb"
    ingest(wh, SHIPPED / path)
    # Drained records by escrow, pre-drain status and outcome: all three drain rules, as the truth says.
    by = ["epoch_id", "escrow_id", "pre_drain_status", "drain_outcome"]
    drained = frame(
        wh, f"SELECT {', '.join(by)}, count(*) AS n FROM inferences WHERE drained GROUP BY ALL ORDER BY ALL"
    )
    want = copy.truth.inferences.filter(pl.col("drained")).group_by(by).agg(n=pl.len()).sort(by)
    assert drained.to_dicts() == want.to_dicts()
    assert set(drained["drain_outcome"]) == {"unchanged", "refunded", "paid"}
    # Timeouts with reason 3 are error misses.
    reason3 = frame(
        wh,
        "SELECT i.epoch_id, i.escrow_id, i.inference_id FROM inferences i JOIN txs t "
        "ON t.escrow_id = i.escrow_id AND t.inference_id = i.inference_id "
        "WHERE t.kind = 'timeout' AND t.reason = 'error' AND i.miss_kind = 'error_miss' ORDER BY ALL",
    )
    planted = copy.truth.planted["reason3_error_misses"]
    assert reason3.to_dicts() == sorted(planted, key=lambda r: (r["epoch_id"], r["escrow_id"], r["inference_id"]))
    assert len(planted) == 1
    # Escrows joined by import: only the snapshot-import line has one.
    imported = frame(
        wh,
        "SELECT DISTINCT epoch_id, escrow_id, imported_nonce FROM snapshot_host_stats "
        "WHERE imported_nonce > 0 ORDER BY ALL",
    )
    assert imported.to_dicts() == copy.truth.planted["imported"]
    assert imported.height == (line == "snapshot-import")
    store = open_store(str(SHIPPED / path))
    try:
        described = store.describe()
    finally:
        store.close()
    assert {v.split(" (")[0] for k, v in described.release_lines.items() if k != "_meta.db"} == {RECOGNISED[line][1]}


def test_the_shipped_vllm_log_yields_its_truth(tmp_path, timeline):
    """V1 format (header on every line, \\r\\n joints, process prefixes); one OOM death, counted once."""
    from pipeline.evidence import compute
    from pipeline.ingest.builds import load_builds
    from pipeline.ingest.logs import ingest_logs
    from pipeline.jobs.config import SAMPLES_LOG_YEAR
    from pipeline.samples.spec import CALENDAR_START
    from pipeline.samples.vllm_log import write_vllm_log
    from pipeline.warehouse.database import open_for_write

    copy = timeline.copy(last_epoch=4, line=SHIPPED_STORES["store"])
    truth = write_vllm_log(timeline, copy, tmp_path / "vllm.log")
    assert (tmp_path / "vllm.log").read_bytes() == (SHIPPED / "vllm" / "vllm.log").read_bytes()
    text = (SHIPPED / "vllm" / "vllm.log").read_bytes().decode()  # read_text would turn \r\n into \n
    assert "\r\n(EngineCore_DP0 pid=" in text and "(APIServer pid=1) INFO " in text
    # The year a run gives the bundled log source is the year of the samples' calendar, first line to last.
    ((first, last),) = truth.spans
    assert SAMPLES_LOG_YEAR == datetime.fromtimestamp(CALENDAR_START, UTC).year == first.year == last.year
    assert truth.stability[BUILD_RAW]["engine_deaths"] == 1 and truth.stability[BUILD_RAW]["ooms"] == 1
    assert BUILD_V1 not in truth.acceptance  # the V1 runner has no speculative decoding

    con = open_for_write(tmp_path / "w.duckdb")
    try:
        load_builds(con, SHIPPED / "builds.toml")
        summary = ingest_logs(con, [SHIPPED / "vllm"], host=timeline.focal_host, kind="vllm", year=SAMPLES_LOG_YEAR)
        assert summary.unparsed == 0 and summary.lines == text.count("\n")
        ev = {
            name: {
                r["build"]: r
                for r in compute(name, con, host=timeline.focal_host, command="x").rows.iter_rows(named=True)
            }
            for name in ("acceptance", "stability", "throughput")
        }
    finally:
        con.close()
    assert list(ev["acceptance"]) == [BUILD_RAW, BUILD_FIX]
    for build, t in truth.acceptance.items():
        r = ev["acceptance"][build]
        assert (r["windows"], r["drafts"], r["drafted"], r["accepted"]) == (
            t["windows"],
            t["drafts"],
            t["drafted"],
            t["accepted"],
        )
        assert r["per_position"] == pytest.approx([p / t["drafts"] for p in t["pos"]], rel=1e-12)
    assert list(ev["stability"]) == [BUILD_V1, BUILD_RAW, BUILD_FIX, BUILD_CHUNK]  # the last: its start only
    for build, t in truth.stability.items():
        r = ev["stability"][build]
        assert (r["engine_deaths"], r["ooms"], r["restarts"], r["preemptions"]) == (
            t["engine_deaths"],
            t["ooms"],
            t["restarts"],
            t["preemptions"],
        ), build
        assert (r["ready_seconds_max"], r["max_kv_cache_usage"]) == (max(t["ready"]), pytest.approx(t["max_kv"]))
    assert sum(r["windows"] for r in ev["throughput"].values()) == truth.stats_lines
