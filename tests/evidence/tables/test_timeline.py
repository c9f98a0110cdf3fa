"""The timeline table on sample warehouses, every count checked against a recomputation from the public
views (`txs`, `inferences`) or the log samples' truth."""

from __future__ import annotations

import datetime as dt

import orjson
import polars as pl
import pytest

from pipeline.evidence import EVIDENCE, EvidenceError
from pipeline.evidence.stats import wilson_interval
from pipeline.output.render import render
from tests.helpers import approx_equal as close
from tests.helpers import build_at, quiet_window
from tests.helpers import con_frame as frame
from tests.helpers import evidence as run

UTC = dt.UTC


def expected_timeline(con, host: str, epoch: int | None, every: str) -> pl.DataFrame:
    """Answers of the host and of others in its escrows, and its verdicts cast, per bucket, from `inferences`/`txs`."""
    answers = frame(
        con,
        """
        SELECT escrow_id, executor, started_at, challenged OR status = 'invalidated' AS bad
        FROM inferences WHERE finished AND status <> 'timed_out' AND ($epoch::BIGINT IS NULL OR epoch_id = $epoch)""",
        {"epoch": epoch},
    )
    escrows = answers.filter(pl.col("executor") == host)["escrow_id"].unique()
    answers = answers.filter(pl.col("escrow_id").is_in(escrows.implode())).with_columns(
        b=pl.col("started_at").dt.convert_time_zone("UTC").dt.truncate(every), mine=pl.col("executor") == host
    )
    cast = frame(
        con,
        """
        SELECT t.event_at, t.valid FROM txs t JOIN inferences i USING (escrow_id, inference_id)
        WHERE t.kind IN ('validation', 'vote') AND t.address = $host AND i.executor IS DISTINCT FROM $host
          AND ($epoch::BIGINT IS NULL OR t.epoch_id = $epoch)""",
        {"host": host, "epoch": epoch},
    ).with_columns(b=pl.col("event_at").dt.convert_time_zone("UTC").dt.truncate(every))
    mine = answers.filter("mine").group_by("b").agg(answers=pl.len(), bad=pl.col("bad").sum())
    others = answers.filter(~pl.col("mine")).group_by("b").agg(others=pl.len(), others_bad=pl.col("bad").sum())
    verdicts = cast.group_by("b").agg(cast=pl.len(), invalid=(~pl.col("valid")).sum())
    return (
        mine.join(others, on="b", how="full", coalesce=True)
        .join(verdicts, on="b", how="full", coalesce=True)
        .fill_null(0)
    )


@pytest.mark.parametrize(("epoch", "bucket"), [(3, None), (4, "30m"), (None, "1d")])
def test_timeline_matches_a_recount_from_inferences_and_txs(sample, epoch, bucket):
    con, focal, _ = sample
    result = run(con, "timeline", focal, epoch=epoch, bucket=bucket)
    every = bucket or "1h"
    rows = result.rows
    expected = expected_timeline(con, focal, epoch, every)
    got = rows.filter((pl.col("answers") + pl.col("others_answers") + pl.col("verdicts_cast")) > 0).select(
        "bucket_start",
        "answers",
        "challenged_or_invalidated",
        "others_answers",
        "others_challenged_or_invalidated",
        "verdicts_cast",
        "invalid_cast",
    )
    want = expected.select(
        pl.col("b").dt.cast_time_unit("us"),
        *(pl.col(c).cast(pl.Int64) for c in ("answers", "bad", "others", "others_bad", "cast", "invalid")),
    )
    assert got.sort("bucket_start").rows() == want.sort("b").rows()
    # Consecutive buckets of the chosen width from the first to the last one with data.
    width = {"1h": dt.timedelta(hours=1), "30m": dt.timedelta(minutes=30), "1d": dt.timedelta(days=1)}[every]
    starts = rows["bucket_start"].to_list()
    assert all(b - a == width for a, b in zip(starts, starts[1:], strict=False))
    assert starts[0] == want["b"].min() and starts[-1] == want["b"].max()
    assert result.params["bucket"] == every
    # Summed over the buckets, the counts are peer-invalidation's pooled rows.
    peer = {r["group"]: r for r in run(con, "peer-invalidation", focal, epoch=epoch).rows.iter_rows(named=True)}
    assert (rows["answers"].sum(), rows["challenged_or_invalidated"].sum()) == (
        peer["host"]["answers"],
        peer["host"]["challenged_or_invalidated"],
    )
    assert (rows["others_answers"].sum(), rows["others_challenged_or_invalidated"].sum()) == (
        peer["others"]["answers"],
        peer["others"]["challenged_or_invalidated"],
    )
    for row in rows.filter(pl.col("answers") > 0).iter_rows(named=True):
        close(row["rate"], row["challenged_or_invalidated"] / row["answers"])
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(
            wilson_interval(row["challenged_or_invalidated"], row["answers"])
        )
    for row in rows.filter(pl.col("others_answers") > 0).iter_rows(named=True):
        assert (row["others_ci_low"], row["others_ci_high"]) == pytest.approx(
            wilson_interval(row["others_challenged_or_invalidated"], row["others_answers"])
        )
    assert rows.filter(pl.col("answers") == 0)["rate"].null_count() == rows.filter(pl.col("answers") == 0).height


def test_timeline_marks_the_buckets_where_a_build_starts(sample):
    con, focal, builds = sample
    rows = run(con, "timeline", focal).rows
    first, last = rows["bucket_start"].min(), rows["bucket_start"].max() + dt.timedelta(hours=1)
    mine = sorted((w for w in builds if w.host == focal), key=lambda w: w.since)
    switched = {
        dt.datetime.fromtimestamp(w.since - w.since % 3600, UTC)
        for i, w in enumerate(mine)
        if first.timestamp() <= w.since < last.timestamp() and (i == 0 or mine[i - 1].label != w.label)
    }
    assert switched, "the sample's builds start inside its data"
    assert set(rows.filter("build_switch")["bucket_start"].to_list()) == switched
    for row in rows.iter_rows(named=True):
        end = row["bucket_start"] + dt.timedelta(hours=1)
        in_effect = build_at(builds, focal, end - dt.timedelta(microseconds=1))
        assert row["build"] is None if in_effect is None else row["build"].endswith(in_effect)
    for row in rows.filter("build_switch").iter_rows(named=True):
        start = row["bucket_start"].timestamp()
        inside = [w for w in mine if start < w.since < start + 3600]  # not at the bucket's first instant
        assert (" → " in row["build"]) == bool(inside and build_at(builds, focal, row["bucket_start"]))


def test_timeline_counts_engine_deaths_and_restarts_from_the_logs(logs):
    from pipeline.samples.logs import HOST

    con, truth = logs
    result = run(con, "timeline", HOST, since="2025-12-01T00:00:00Z", until="2026-02-01T00:00:00Z")
    rows = result.rows
    deaths = sum(s["engine_deaths"] for s in truth.stability.values())
    restarts = sum(s["restarts"] for s in truth.stability.values())
    assert deaths > 0 and restarts > 0
    assert (rows["engine_deaths"].sum(), rows["restarts"].sum()) == (deaths, restarts)
    assert rows["answers"].sum() == 0 and rows["rate"].null_count() == rows.height
    # A death is dated by its first signal (a fatal error, or a worker's death) since the last start of its file.
    first_signals = frame(
        con,
        """
        WITH e AS (SELECT file_id, line, "at", kind, lag(kind) OVER (PARTITION BY file_id ORDER BY line) AS before
                   FROM engine_events WHERE host = $h AND kind IN ('start', 'fatal', 'worker_died'))
        SELECT date_trunc('hour', "at") AS b, count(*) AS n FROM e
        WHERE kind <> 'start' AND (before IS NULL OR before = 'start') GROUP BY 1""",
        {"h": HOST},
    )
    assert first_signals["n"].sum() == deaths
    by_bucket = dict(rows.filter(pl.col("engine_deaths") > 0).select("bucket_start", "engine_deaths").rows())
    assert {k.astimezone(UTC): v for k, v in by_bucket.items()} == {
        b.astimezone(UTC): n for b, n in first_signals.rows()
    }
    # Build B starts inside the logs' span (A before it, C after it): one switch, on the empty bucket of its start.
    switch = rows.filter("build_switch").select("bucket_start", "build").rows()
    assert switch == [(dt.datetime(2026, 1, 2, tzinfo=UTC), "B")]
    assert rows.filter(pl.col("bucket_start") < switch[0][0])["build"].unique().to_list() == ["A"]


@pytest.mark.parametrize("bucket", ["0h", "1w", "an hour", "-1h"])
def test_a_bad_bucket_is_a_one_line_error(sample, bucket):
    con, focal, _ = sample
    with pytest.raises(EvidenceError, match="is not a width such as 30m, 1h or 1d"):
        run(con, "timeline", focal, epoch=3, bucket=bucket)


def test_a_timeline_of_too_many_buckets_is_a_one_line_error(sample, monkeypatch):
    con, focal, _ = sample
    monkeypatch.setattr("pipeline.evidence.tables.timeline.MAX_BUCKETS", 24)
    with pytest.raises(EvidenceError, match="spans more than 24 buckets of 1h; choose a wider --bucket"):
        run(con, "timeline", focal, epoch=3)
    assert 0 < run(con, "timeline", focal, epoch=3, bucket="1d").rows.height <= 24


def test_timeline_of_an_idle_window_is_empty_with_a_note(sample):
    con, focal, _ = sample
    since, until = quiet_window(con, focal)  # inside the data, before the host's first act
    result = run(con, "timeline", focal, since=since, until=until)
    assert result.rows.height == 0 and result.stats == {}
    assert "nothing to show" in result.notes[0]
    assert orjson.loads(render(result, "json"))["rows"] == []


def test_timeline_chart_marks_build_switches(sample):
    con, focal, _ = sample
    result = run(con, "timeline", focal)
    chart = EVIDENCE["timeline"].report.chart(result, result.rows)
    marks = [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in chart["layer"]]
    assert marks == ["line", "rule", "text"]
