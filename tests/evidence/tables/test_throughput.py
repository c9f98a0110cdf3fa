"""The throughput table on the log samples, checked against their stats lines."""

from __future__ import annotations

import numpy as np
import polars as pl

from tests.helpers import approx_equal as close
from tests.helpers import con_frame as frame
from tests.helpers import evidence as run


def test_throughput_per_build_matches_the_stats_lines(logs):
    from pipeline.samples.logs import HOST

    con, truth = logs
    result = run(con, "throughput", HOST)
    rows = result.rows
    assert rows["build"].to_list() == ["A", "B"]  # build C has only /metrics scrapes, which carry no throughput
    assert int(rows["windows"].sum()) == truth.stats_lines == result.stats["windows"]
    lines = frame(
        con,
        "SELECT coalesce(build, 'unattributed') AS build, prompt_tps, generation_tps, running, waiting "
        "FROM engine_stats WHERE host = $h AND source = 'log'",
        {"h": HOST},
    )
    for row in rows.iter_rows(named=True):
        mine = lines.filter(pl.col("build") == row["build"])
        busy = mine.filter(pl.col("running") > 0)
        assert (row["windows"], row["busy_windows"]) == (mine.height, busy.height)
        assert busy.height > 0
        for kind in ("generation", "prompt"):
            values = busy[f"{kind}_tps"].to_numpy()
            close(row[f"{kind}_tps_median"], float(np.percentile(values, 50)))
            close(row[f"{kind}_tps_p90"], float(np.percentile(values, 90)))
        close(row["running_median"], float(np.percentile(mine["running"].to_numpy(), 50)))
        assert (row["running_max"], row["waiting_max"]) == (mine["running"].max(), mine["waiting"].max())
    a = rows.filter(pl.col("build") == "A").row(0, named=True)
    assert a["busy_windows"] < a["windows"]  # build A's idle DEBUG lines count as windows, not as busy ones


def test_throughput_window_cuts_on_the_line_time(logs):
    from pipeline.samples.logs import HOST

    con, _ = logs
    result = run(con, "throughput", HOST, since="2026-01-02T00:00:00Z", until="2026-01-03T00:00:00Z")
    assert result.rows["build"].to_list() == ["B"]
    n = frame(
        con,
        "SELECT count(*) AS n FROM engine_stats WHERE host = $h AND source = 'log' AND \"at\" >= "
        "'2026-01-02T00:00:00Z' AND \"at\" < '2026-01-03T00:00:00Z'",
        {"h": HOST},
    )["n"][0]
    assert result.rows["windows"][0] == n


def test_throughput_without_logs_is_empty_with_a_note(sample):
    con, focal, _ = sample
    result = run(con, "throughput", focal)
    assert result.rows.height == 0 and "ingest-logs" in result.notes[0]
