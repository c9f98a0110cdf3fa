"""BatchPool: ordered results, worker processes only when there is enough work, bounded batches."""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

import pytest

from pipeline.core.parallel import WORKERS_ENV, BatchPool, worker_count


def tag_with_pid(batch: list[int]) -> list[tuple[int, int, int]]:
    return [(item, os.getpid(), len(batch)) for item in batch]


def tag_when_both_serve(meeting: str, batch: list[int]) -> list[tuple[int, int, int]]:
    """`tag_with_pid`, once two processes have each taken a batch (up to 60 s): on a loaded machine the
    second worker may start after the first has served every batch, which is not what is tested here."""
    Path(meeting, str(os.getpid())).touch()
    deadline = time.monotonic() + 60
    while len(os.listdir(meeting)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    return tag_with_pid(batch)


def fail_on_13(batch: list[int]) -> list[int]:
    if 13 in batch:
        raise ValueError("13 is not welcome")
    return batch


def test_small_input_stays_in_this_process():
    with BatchPool(workers=2, batch_bytes=3, min_bytes=100) as pool:
        got = list(pool.map(tag_with_pid, range(10), lambda _: 10))  # 100 bytes: not more than min_bytes
        assert not pool.started
    assert [item for item, _, _ in got] == list(range(10))
    assert {pid for _, pid, _ in got} == {os.getpid()}
    assert [size for _, _, size in got] == [1] * 10  # every item reaches batch_bytes alone


def test_large_input_goes_to_workers_in_order_and_in_batches(tmp_path):
    items = list(range(500))
    with BatchPool(workers=2, batch_bytes=7, min_bytes=20) as pool:
        got = list(pool.map(functools.partial(tag_when_both_serve, str(tmp_path)), items, lambda _: 1))
        assert pool.started
        again = list(pool.map(tag_with_pid, items, lambda _: 1))  # the same workers serve a second map
    assert [item for item, _, _ in got] == items
    assert os.getpid() not in {pid for _, pid, _ in got}
    assert len({pid for _, pid, _ in got + again}) == 2
    assert {size for _, _, size in got[:-3]} == {7} and got[-1][2] == 500 % 7
    assert [item for item, _, _ in again] == items


def share_seen(batch: list[int]) -> list[tuple[str | None, int]]:
    import pyarrow

    return [(os.environ.get("GONKA_EVIDENCE_PROCESSES"), pyarrow.cpu_count()) for _ in batch]


def test_each_worker_takes_its_share_of_the_cores(monkeypatch):
    for name in ("GONKA_EVIDENCE_PROCESSES", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    from pipeline.core.resources import this_machine

    with BatchPool(workers=2, batch_bytes=1, min_bytes=0) as pool:
        seen = set(pool.map(share_seen, range(20), lambda _: 1))
    assert seen == {("2", max(1, this_machine().cores // 2))}


def test_one_worker_maps_here_without_processes():
    with BatchPool(workers=1, batch_bytes=2, min_bytes=0) as pool:
        assert [x for x, _, _ in pool.map(tag_with_pid, range(9), lambda _: 1)] == list(range(9))
        assert not pool.started


def test_a_failing_batch_raises_its_error_in_the_caller():
    with BatchPool(workers=2, batch_bytes=1, min_bytes=0) as pool:
        results = pool.map(fail_on_13, range(40), lambda _: 1)
        assert [next(results) for _ in range(13)] == list(range(13))
        with pytest.raises(ValueError, match="13 is not welcome"):
            next(results)


def test_a_consumer_that_stops_early_leaves_a_usable_pool():
    with BatchPool(workers=2, batch_bytes=1, min_bytes=0) as pool:
        first = pool.map(tag_with_pid, range(1000), lambda _: 1)
        assert [next(first)[0] for _ in range(5)] == [0, 1, 2, 3, 4]
        first.close()
        assert [x for x, _, _ in pool.map(tag_with_pid, range(50), lambda _: 1)] == list(range(50))


def test_worker_count_from_the_environment(monkeypatch):
    monkeypatch.setenv(WORKERS_ENV, "3")
    assert worker_count() == 3 and BatchPool().workers == 3
    monkeypatch.setenv(WORKERS_ENV, " ")
    assert worker_count() == 1
    monkeypatch.delenv(WORKERS_ENV)
    assert worker_count() == 1 and BatchPool().workers == 1  # workers are opt-in
    for bad in ("0", "-2", "two"):
        monkeypatch.setenv(WORKERS_ENV, bad)
        with pytest.raises(ValueError, match=f"{WORKERS_ENV}='{bad}': expected a whole number of processes >= 1"):
            worker_count()
