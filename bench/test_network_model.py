"""The scheduling model's simulator (bench/network_model.py) on hand-made tasks: no cluster, no copies.

pytest -m slow bench/test_network_model.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

pytestmark = pytest.mark.slow


def test_two_tasks_on_two_workers_end_with_the_larger():
    from network_model import bound, list_schedule

    assert list_schedule([3.0, 5.0], 2) == 5.0
    assert list_schedule([3.0, 5.0], 1) == 8.0
    assert bound([3.0, 5.0], 2) == 5.0 and bound([3.0, 3.0, 3.0], 2) == 4.5
    # each task pays the dispatch gap, a worker's first task its extra once
    assert list_schedule([1.0, 1.0], 1, gap=0.5, first=2.0) == 5.0


def test_largest_first_meets_the_bound_where_submission_order_does_not():
    from network_model import bound, largest_first, list_schedule

    sizes = [1.0, 1.0, 1.0, 1.0, 4.0]
    assert largest_first([2, 5, 5, 1]) == [1, 2, 0, 3]  # equal sizes keep their order
    assert list_schedule(sizes, 2) == 6.0  # the 4 s task starts at 2 s
    assert list_schedule([sizes[i] for i in largest_first(sizes)], 2) == 4.0 == bound(sizes, 2)


def test_the_fit_and_the_cut_follow_network_ingest():
    from network_model import fit_line, piece_weights

    fit = fit_line([1.0, 2.0, 3.0], [1.5, 2.5, 3.5])
    assert fit["overhead_s"] == pytest.approx(0.5) and fit["rate_s_per_unit"] == pytest.approx(1.0)
    assert fit["r2"] == pytest.approx(1.0)
    copies = [[(f"{c}{e:04d}", 10_000) for e in range(6)] for c in ("a", "b")]
    assert piece_weights(copies, 1) == [60_000, 60_000]  # one slot: every copy whole
    # 120k diffs over 2 slots x 3 pieces: 20k a piece; at 16 slots the 20k floor holds
    assert piece_weights(copies, 2) == piece_weights(copies, 16) == [20_000] * 6


def test_a_sweep_of_equal_tasks():
    from network_model import simulate, sweep

    fit = {"overhead_s": 1.0, "rate_s_per_unit": 0.0, "r2": 1.0, "n": 2}
    model = {
        "fits": {"plan_copy": {**fit, "overhead_s": 0.0}, "write_piece": fit, "build_partition": fit},
        "dispatch_gap_s": 0.0,
        "first_task_extra_s": 0.0,
        "outside_s": 2.0,
    }
    network = {"copies": [[(f"{c}{e:04d}", 10_000) for e in range(6)] for c in "abcd"], "partition_bytes": [1.0] * 8}
    one = simulate(model, network, 1)
    assert (one["stage1_tasks"], one["stage1_s"], one["stage2_s"], one["wall_s"]) == (4, 4.0, 8.0, 14.0)
    rows = sweep(model, network, [1, 4], slowdown=2.0)
    # 4 workers: 12 pieces of 1 s and 8 partitions of 1 s, each twice as slow: 3 + 2 rounds of 2 s
    assert rows[1]["stage1_tasks"] == 12 and rows[1]["wall_s"] == 2.0 + 6.0 + 4.0
    assert rows[1]["efficiency"] == pytest.approx(14.0 / (4 * 12.0))


def test_a_negative_overhead_is_fitted_through_the_origin():
    from network_model import fit_line

    # the free fit is -1.5 + 2x; no task costs less than nothing: y = 1.1 x
    fit = fit_line([1.0, 2.0], [0.5, 2.5])
    assert fit["overhead_s"] == 0.0 and fit["rate_s_per_unit"] == pytest.approx(1.1)
