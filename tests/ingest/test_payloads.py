"""Stored answers (payload storage) in both layouts: answer_checks, quarantine of malformed
bodies, and the answers-by-sampling and answer-integrity evidence tables, against the truth."""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipeline.evidence import compute
from pipeline.evidence.stats import wilson_interval
from pipeline.ingest.payloads import check_payload, scan_response
from pipeline.sources.store.payloads import RawPayload
from pipeline.warehouse.database import fetch_frame, open_for_write
from tests.factories import sample_warehouse
from tests.helpers import throwaway_database

CHECKS = [
    "epoch_id",
    "escrow_id",
    "inference_id",
    "temperature",
    "top_p",
    "completion_tokens",
    "logprob_tokens",
    "duplicate_top_logprob_positions",
    "nan_logprobs",
    "missing_logprobs",
    "tokens_not_ids",
    "empty",
    "sse",
    "complete",
]


@pytest.fixture(scope="module")
def copy4(timeline):
    return timeline.copy(last_epoch=4, malformed_payloads=True)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def answers_wh(request, copy4, timeline):
    built = sample_warehouse(request, copy4, layout=request.param, builds=timeline)
    con = open_for_write(built.path)
    yield con, built.summary
    con.close()


def test_answer_checks_exact(answers_wh, copy4, timeline):
    from polars.testing import assert_frame_equal

    con, summary = answers_wh
    truth = copy4.truth.answers.select(CHECKS).sort("escrow_id", "inference_id")
    got = fetch_frame(con, f"SELECT {', '.join(CHECKS)} FROM answer_checks ORDER BY escrow_id, inference_id")
    assert_frame_equal(got, truth, check_dtypes=False)
    assert summary.rows["answer_checks"] == len(copy4.payloads) and summary.rows["payloads_quarantined"] == 2
    faults = copy4.truth.answers.filter(pl.col("fault").is_not_null())
    assert faults.height == 14 and set(faults.filter(pl.col("sse"))["fault"]) >= {"truncated", "empty", "nan_logprob"}
    executors = fetch_frame(con, "SELECT DISTINCT executor FROM answer_checks")["executor"].to_list()
    assert executors == [timeline.focal_host]


def test_malformed_bodies_are_quarantined(answers_wh, copy4):
    con, _ = answers_wh
    q = fetch_frame(con, "SELECT row_key, reason FROM quarantine WHERE table_name = 'payload_storage' ORDER BY 1")
    bad = copy4.truth.answers.filter(pl.col("fault").is_in(["not_json", "truncated"])).sort("epoch_id", "escrow_id")
    assert sorted(q["row_key"]) == sorted(
        f"{r['epoch_id']}/{r['escrow_id']}/{r['inference_id']}" for r in bad.iter_rows(named=True)
    )
    assert any("truncated" in r for r in q["reason"]) and any("not JSON" in r for r in q["reason"])


def test_bodies_are_not_stored(answers_wh):
    con, _ = answers_wh
    cols = fetch_frame(
        con, "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'answer_checks_t'"
    )
    assert not any(t in ("BLOB",) for t in cols["data_type"])
    assert not {"prompt_payload", "response_payload", "content"} & set(cols["column_name"])


def test_reingest_adds_nothing(answers_wh, copy4, tmp_path):
    con, _ = answers_wh
    assert fetch_frame(con, "SELECT count(*) AS n FROM answer_checks_t")["n"][0] == len(copy4.payloads)


def test_answer_integrity(answers_wh, copy4, timeline):
    con, _ = answers_wh
    t = copy4.truth.answers
    for epoch in (None, 3):
        sub = t if epoch is None else t.filter(pl.col("epoch_id") == epoch)
        complete = sub.filter(pl.col("complete"))
        row = compute("answer-integrity", con, host=timeline.focal_host, epoch=epoch, command="x").rows.to_dicts()[0]
        assert row == {
            "answers_scanned": sub.height,
            "complete": complete.height,
            "token_count_mismatches": complete.filter(pl.col("completion_tokens") != pl.col("logprob_tokens")).height,
            "duplicate_top_logprob_positions": int(complete["duplicate_top_logprob_positions"].sum()),
            "nan_or_missing_logprob_answers": complete.filter(
                (pl.col("nan_logprobs") > 0) | (pl.col("missing_logprobs") > 0)
            ).height,
            "tokens_not_ids_answers": complete.filter(pl.col("tokens_not_ids") > 0).height,
            "empty_answers": complete.filter(pl.col("empty")).height,
            # no engine events were ingested: the matching columns are unknown, not zero
            "empty_answers_in_engine_death": None,
            "empty_answers_in_poc": None,
            "empty_answers_unexplained": None,
        }
    full = compute("answer-integrity", con, host=timeline.focal_host, command="x").rows.to_dicts()[0]
    assert full["token_count_mismatches"] == 2 and full["empty_answers"] == 2 and full["tokens_not_ids_answers"] == 2


def _build_at(timeline, at: int) -> str:
    label = "unattributed"
    for w in sorted(timeline.builds, key=lambda w: w.since):
        if w.host == timeline.focal_host and w.since <= at:
            label = w.label
    return label


def test_answers_by_sampling(answers_wh, copy4, timeline):
    con, _ = answers_wh
    focal = timeline.focal_host
    inf = copy4.truth.inferences
    txs = copy4.truth.txs
    sampled_validation = txs.filter(pl.col("kind") == "validation").select("escrow_id", "inference_id").unique()
    event_at = txs.filter(pl.col("kind") == "start").select("escrow_id", "inference_id", "event_at")
    judged = (
        inf.filter((pl.col("executor") == focal) & pl.col("has_finish_tx") & (pl.col("status") != "timed_out"))
        .join(sampled_validation, on=["escrow_id", "inference_id"])
        .join(event_at, on=["escrow_id", "inference_id"], how="left")
        .with_columns(
            build=pl.col("event_at").map_elements(lambda t: _build_at(timeline, t), return_dtype=pl.String),
            sampling=pl.when(pl.col("temperature").fill_null(1.0) == 0)
            .then(pl.lit("greedy"))
            .otherwise(pl.lit("sampled")),
        )
    )
    want = (
        judged.group_by("build", "sampling")
        .agg(
            judged=pl.len(),
            invalidated=(pl.col("status") == "invalidated").sum(),
            challenged=pl.col("challenged").sum(),
        )
        .sort("build", "sampling")
    )
    result = compute("answers-by-sampling", con, host=focal, command="x")
    got = result.rows
    assert got.select("build", "sampling", "judged", "invalidated", "challenged").to_dicts() == [
        {k: (int(v) if isinstance(v, int) else v) for k, v in r.items()} for r in want.to_dicts()
    ]
    for r in got.iter_rows(named=True):
        low, high = wilson_interval(r["invalidated"], r["judged"])
        assert r["ci_low"] == pytest.approx(low) and r["ci_high"] == pytest.approx(high)
    # the planted rule: raw_logprobs answers with sampling get invalidated, greedy ones do not
    assert result.stats["fisher"]["p_value"] < 0.05
    detail = compute("answers-by-sampling", con, host=focal, detail=True, command="x").rows
    assert detail["judged"].sum() == got["judged"].sum()
    assert any(s.startswith("sampled t") for s in detail["sampling"])


def test_scanner_edge_cases():
    assert (
        scan_response(
            b'{"choices": [{"message": {"content": "x"}, "logprobs": {"content": '
            b'[{"token": "12", "logprob": NaN, "top_logprobs": []}]}}], "usage": {"completion_tokens": 1}}'
        )["nan_logprobs"]
        == 1
    )
    row, problems = check_payload(RawPayload(1, "e", 1, b"not json", b'data: {"choices": []}\n\n'))
    assert row["complete"] is False and row["temperature"] is None and len(problems) == 2
    row, problems = check_payload(
        RawPayload(
            1,
            "e",
            2,
            json.dumps({"request": {"messages": [], "temperature": 0}}).encode(),
            b'{"choices": [], "usage": {}}',
        )
    )
    assert row["temperature"] == 0 and row["top_p"] == 1.0 and not row["top_p_given"] and not problems


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def payload_source(request, copy4, tmp_path_factory):
    """The copy with planted payload faults, in both layouts, opened as a store."""
    from pipeline.sources.store import open_store

    if request.param == "sqlite":
        spec = copy4.write_sqlite(tmp_path_factory.mktemp("pooled") / "store")
    else:
        spec = throwaway_database(request)
        copy4.write_postgres(spec)
    store = open_store(str(spec))
    yield store
    store.close()


def _ingest_payloads_with(store, pool, path) -> dict[str, pl.DataFrame]:
    from pipeline.ingest.payloads import accounting_input, ingest_payloads
    from pipeline.ingest.runs import ingest_run

    con = open_for_write(path)
    try:
        with ingest_run(con, source_id=store.source_id, kind=store.kind, display="payloads") as run:
            ingest_payloads(con, store, run, pool=pool)
        return {
            "counts": run.rows,
            "deduplicated": run.accounting.tally(accounting_input(store)[0]).deduplicated,
            "rows": fetch_frame(con, "SELECT * EXCLUDE (run_id) FROM answer_checks_t ORDER BY escrow_id, inference_id"),
            "quarantine": fetch_frame(con, "SELECT table_name, row_key, reason FROM quarantine ORDER BY row_key"),
        }
    finally:
        con.close()


def test_worker_processes_give_the_in_process_rows(payload_source, copy4, tmp_path):
    """The same rows, order and quarantine reasons whether the payloads are checked here or in workers
    (for the store directory the workers also read and decode the files)."""
    from polars.testing import assert_frame_equal

    from pipeline.core.parallel import BatchPool
    from pipeline.ingest.payloads import checked_payloads

    in_process = list(checked_payloads(payload_source, set(), BatchPool(workers=1)))
    with BatchPool(workers=2, batch_bytes=1, min_bytes=0) as pool:  # one payload per batch, workers from the start
        pooled = list(checked_payloads(payload_source, set(), pool))
        assert pool.started
        assert [(r["escrow_id"], r["inference_id"]) for r, _ in pooled] == [
            (r["escrow_id"], r["inference_id"]) for r, _ in in_process
        ]
        assert pooled == in_process
        assert len(pooled) == len(copy4.payloads) and sum(bool(found) for _, found in pooled) == 2
        assert sorted(f.split(":")[0] for _, found in pooled for f in found) == ["response_payload"] * 2
        known = {(r["escrow_id"], r["inference_id"]) for r, _ in in_process[::2]}  # known keys are not read again
        assert list(checked_payloads(payload_source, known, pool)) == in_process[1::2]
        wh_pooled = _ingest_payloads_with(payload_source, pool, tmp_path / "pooled.duckdb")
    wh_here = _ingest_payloads_with(payload_source, BatchPool(workers=1), tmp_path / "here.duckdb")
    counts = {"answer_checks": len(copy4.payloads), "payloads_quarantined": 2}
    assert wh_pooled["counts"] == wh_here["counts"] == counts
    # the compressed escrow's first answer also has a plain .json: the .zst is read, the .json deduplicated
    superseded = len(copy4.compressed_payloads) if payload_source.kind == "sqlite" else 0
    assert wh_pooled["deduplicated"] == wh_here["deduplicated"] == superseded
    assert_frame_equal(wh_pooled["rows"], wh_here["rows"])
    assert_frame_equal(wh_pooled["quarantine"], wh_here["quarantine"])
    assert wh_here["quarantine"].height == 2


def test_worker_processes_on_bench_like_bodies(tmp_path):
    """Large generated answers (~1,000 tokens, top-5 logprobs, JSON and SSE) with the faults the
    benchmark plants: workers in 1 MB batches give exactly the in-process facts."""
    import random
    import re

    from pipeline.core.parallel import BatchPool
    from pipeline.samples.payloads import request_body, response_body
    from pipeline.transforms.answer_scan import check_payloads

    rng = random.Random(7)
    payloads = []
    for k in range(40):
        stream = k % 2 == 0
        body = response_body(rng, "m", k, 0, 50, rng.randrange(600, 1400), stream)
        fault = k % 8
        if fault == 1:
            body = re.sub(rb'"logprob":-?[0-9.]+', b'"logprob":NaN', body, count=1)
        elif fault == 3:
            body = re.sub(rb'"token":"(\d+)"', rb'"token":"w\1"', body)
        elif fault == 4:  # a stream cut mid-chunk
            body = body[: len(body) // 2]
        elif fault == 7:
            body = b"upstream error: " + body[:200]
        payloads.append(RawPayload(1, "e", k, request_body(rng, "m", 2048, 0.7, None, stream), body))
    in_process = check_payloads(payloads)
    with BatchPool(workers=2, batch_bytes=1_000_000, min_bytes=2_000_000) as pool:
        pooled = list(pool.map(check_payloads, payloads, lambda p: len(p.response)))
        assert pool.started
    assert pooled == in_process
    rows = [row for row, _ in pooled]
    assert sum(r["nan_logprobs"] or 0 for r in rows) == 5 and sum(bool(r["tokens_not_ids"]) for r in rows) == 5
    problems = [found[0] for _, found in pooled if found]
    assert (
        len(problems) == 10
        and sum("truncated" in p for p in problems) == 5
        and sum(p.startswith("response_payload: not JSON (") for p in problems) == 5
    )
