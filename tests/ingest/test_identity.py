"""An unrelated copy is not a fork: a copy whose escrow ids collide with settled escrows of another identity
(creator, config, group) is refused before anything is written, and never rewrites a closed epoch."""

from __future__ import annotations

import shutil

import pytest

from pipeline.samples import SampleSpec, generate_timeline
from pipeline.sources.errors import SourceError
from pipeline.warehouse.database import open_read_only
from tests.helpers import ingest


def _state(warehouse) -> tuple:
    con = open_read_only(warehouse)
    try:
        return (
            con.execute("SELECT count(*) FROM ingest_runs").fetchone()[0],
            con.execute("SELECT count(*) FROM quarantine").fetchone()[0],
            con.execute(
                "SELECT epoch_id, count(*) FILTER (status = 'invalidated'), count(*) FROM inferences "
                "GROUP BY ALL ORDER BY ALL"
            ).fetchall(),
            con.execute("SELECT escrow_id, creator_addr FROM escrows ORDER BY ALL").fetchall(),
        )
    finally:
        con.close()


@pytest.fixture(scope="module")
def ours_and_theirs(tmp_path_factory, timeline):
    """Our copy and another network's (the sample generator under another seed), only read, and a warehouse of
    ours: built once for the tests below, each of which ingests theirs into a copy of that warehouse."""
    root = tmp_path_factory.mktemp("ours-and-theirs")
    ours = timeline.copy(last_epoch=4).write_sqlite(root / "ours")
    # another network, small (two escrows an epoch): its escrow ids are ours (3100, 3101, 4100, …), its creators not
    theirs_spec = SampleSpec(seed=12, epochs=(2, 3, 4), escrows_per_epoch=2, inferences_per_escrow=80)
    theirs = generate_timeline(theirs_spec).copy(last_epoch=4).write_sqlite(root / "theirs")
    warehouse = root / "w.duckdb"
    ingest(warehouse, ours)  # closed, so checkpointed: the file alone is the warehouse
    return theirs, warehouse


def _ours_ingested(ours_and_theirs, tmp_path):
    """The test's own warehouse of our copy (a copy of the file), and their copy."""
    theirs, built = ours_and_theirs
    warehouse = tmp_path / "w.duckdb"
    shutil.copyfile(built, warehouse)
    return warehouse, theirs


def test_an_unrelated_copy_with_colliding_escrow_ids_is_refused_before_anything_is_written(ours_and_theirs, tmp_path):
    """Before: ingesting another network's copy (the sample generator under another seed: the same escrow ids
    3100.. with other creators and groups) replayed its diffs as forks of the stored escrows, resolved by
    "sha256 sorts first", and changed closed epoch 3's counts, exit 0."""
    warehouse, theirs = _ours_ingested(ours_and_theirs, tmp_path)
    before = _state(warehouse)
    with pytest.raises(SourceError) as refused:
        ingest(warehouse, theirs)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{theirs}: escrow ids of escrows in the warehouse name other escrows")
    assert "3100 (creator, config, group)" in message and "nothing was ingested" in message
    assert _state(warehouse) == before  # no run row, no quarantine row, epoch 3 as it was


# Three ingests of copies written for it; stands in the default tier: the same copy under another source, ingested
# and deduplicated, tests/ingest/test_store.py::test_two_hosts_of_one_escrow_do_not_double_count, and a newer copy
# of the same escrows over an older one (and the older after the newer),
# tests/ingest/test_store.py::test_history_accumulates_and_the_newest_copy_wins,
# tests/ingest/test_store.py::test_an_older_copy_after_a_newer_one_does_not_roll_back
@pytest.mark.heavy
def test_the_same_copy_again_and_a_newer_copy_of_the_same_escrows_are_not_refused(timeline, tmp_path):
    warehouse = tmp_path / "w.duckdb"
    ingest(warehouse, timeline.copy(last_epoch=3).write_sqlite(tmp_path / "three"))
    ingest(warehouse, timeline.copy(last_epoch=3).write_sqlite(tmp_path / "three-again"))
    ingest(warehouse, timeline.copy(last_epoch=4).write_sqlite(tmp_path / "four"))
    assert {e for e, *_ in _state(warehouse)[2]} >= {2, 3, 4}  # every copy ingested


def test_an_unrelated_copy_colliding_only_with_open_escrows_is_refused_too(ours_and_theirs, tmp_path):
    """The refusal looked at settled escrows only: another network's copy holding just its epoch 4 (escrow
    ids 4100.. of the open epoch, other creators) was merged as forks of ours, exit 0, and epoch 4's counts
    and creators became a mix of both networks'."""
    warehouse, whole = _ours_ingested(ours_and_theirs, tmp_path)
    theirs = shutil.copytree(whole, tmp_path / "theirs")
    for old in (2, 3):  # a copy of the open epoch alone: no settled escrow of ours is named
        (theirs / f"epoch_{old}.db").unlink()
        shutil.rmtree(theirs / "payloads" / str(old), ignore_errors=True)
    before = _state(warehouse)
    con = open_read_only(warehouse)
    try:
        open_escrows = con.execute("SELECT count(*) FROM escrows WHERE epoch_id = 4 AND settled_at IS NULL").fetchone()
    finally:
        con.close()
    assert open_escrows[0] > 0  # the collision is with escrows not settled yet
    with pytest.raises(SourceError) as refused:
        ingest(warehouse, theirs)
    message = str(refused.value)
    assert "\n" not in message and "4100 (creator" in message and "nothing was ingested" in message
    assert _state(warehouse) == before
