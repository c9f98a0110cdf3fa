"""Answers by sampling are grouped by the client's parameters (the stored request is the client's) and say which
parameters devshardd injected before execution (gonka-ai/vllm docs/gonka-infval-old-vs-new-gumbel.md, devshard
v5.0.2: logprobs, top_logprobs 5, min_tokens 64, seed = int32(inference_id) unless given, logprobs_mode
processed_logprobs)."""

from __future__ import annotations

import json

import polars as pl

from pipeline.evidence import compute
from pipeline.transforms.answer_scan import scan_request
from pipeline.warehouse.database import open_for_write
from tests.factories import load_builds_of


def test_the_clients_injected_parameters_are_read_from_the_stored_request():
    given = {"model": "m", "messages": [], "seed": 7, "min_tokens": 80, "logprobs_mode": "processed_logprobs"}
    row = scan_request(json.dumps(given).encode())
    assert (row["seed_given"], row["min_tokens"], row["logprobs_mode"]) == (True, 80, "processed_logprobs")
    bare = scan_request(json.dumps({"model": "m", "messages": [], "seed": None}).encode())
    assert (bare["seed_given"], bare["min_tokens"], bare["logprobs_mode"]) == (False, None, None)


def test_answers_by_sampling_names_what_devshardd_injected(sample):
    """The sample's clients ask for logprobs and top_logprobs 5 but set no seed, min_tokens or logprobs_mode: those
    three were injected into every judged answer with a stored request, and the grouping stays the client's."""
    con, focal, _ = sample
    rows = compute("answers-by-sampling", con, host=focal, command="test").rows
    known = rows.filter(pl.col("sampling") != "unknown")
    assert known.height > 0
    for row in known.iter_rows(named=True):
        n = row["judged"]
        assert row["injected"] == f"min_tokens {n}, seed {n}, logprobs_mode {n}", row
    assert set(rows["sampling"]) <= {"greedy", "sampled", "unknown"}


def _injected(rows: pl.DataFrame, name: str) -> int:
    """How many answers of all rows `injected` counts for `name`."""
    total = 0
    for text in rows["injected"].drop_nulls():
        total += sum(int(part.split()[-1]) for part in text.split(", ") if part.startswith(f"{name} "))
    return total


def test_no_min_tokens_floor_under_the_short_output_version(bare_copy4, timeline, tmp_path):
    """devshard/docs/proposals/short-output-validation.md @fd475011: the short-output version injects no
    min_tokens floor. Once the builds file names v0.2.5 as short-output #1955, that version's judged answers no
    longer count min_tokens as injected (their seed still is); other versions' answers are counted as before."""
    focal = timeline.focal_host
    con = open_for_write(bare_copy4)
    try:
        before = compute("answers-by-sampling", con, host=focal, command="test").rows
        (short,) = con.execute(
            "SELECT count(*) FROM answer_checks_t a JOIN escrows e USING (escrow_id) "
            "JOIN inferences i ON i.escrow_id = a.escrow_id AND i.inference_id = a.inference_id "
            "WHERE e.version = 'v0.2.5' AND i.executor = ? AND i.finished AND i.status <> 'timed_out' "
            "AND EXISTS (SELECT 1 FROM validations v WHERE v.escrow_id = i.escrow_id "
            "AND v.inference_id = i.inference_id AND v.kind = 'validation')",
            [focal],
        ).fetchone()
    finally:
        con.close()
    assert short > 0
    (tmp_path / "b.toml").write_text(
        f'[[builds]]\nhost = "{focal}"\nlabel = "one"\nsince = "2026-01-01T00:00:00Z"\n\n'
        '[[devshard_versions]]\nversion = "v0.2.5"\nrules = "short-output #1955"\n'
    )
    load_builds_of(bare_copy4, tmp_path / "b.toml")
    con = open_for_write(bare_copy4)
    try:
        after = compute("answers-by-sampling", con, host=focal, command="test").rows
    finally:
        con.close()
    assert _injected(after, "seed") == _injected(before, "seed")
    assert _injected(after, "min_tokens") == _injected(before, "min_tokens") - short


def _chain_mode_injected(client: dict, chain_mode: str) -> bool:
    """Whether answers-by-sampling counts logprobs_mode as injected for a stored request `client` while the
    chain's mode is `chain_mode`."""
    from pipeline.evidence.tables.answers_by_sampling import INJECTED

    row = scan_request(json.dumps(client).encode())
    frame = pl.DataFrame(
        [{"logprobs_mode": row["logprobs_mode"], "chain_mode": {"value": chain_mode, "source": "s", "assumed": True}}]
    )
    (expr,) = [when for name, when in INJECTED if name == "logprobs_mode"]
    return frame.select(expr).item()


def test_the_logprobs_mode_is_compared_with_the_chains():
    # devshardd rewrites every request to the chain's mode (chainParams.LogprobsMode(); gonka-ai/vllm
    # docs/gonka-infval-old-vs-new-gumbel.md, section 1): a client's processed_logprobs is a rewrite under raw
    processed = {"model": "m", "messages": [], "logprobs_mode": "processed_logprobs"}
    assert not _chain_mode_injected(processed, "processed_logprobs")
    assert _chain_mode_injected(processed, "raw_logprobs")
    assert _chain_mode_injected({"model": "m", "messages": []}, "processed_logprobs")


def test_the_chain_mode_is_the_one_at_the_answers_time_and_a_default_is_assumed(bare_copy4, timeline, tmp_path):
    """Each answer is compared with the chain's logprobs mode when it started (chain_params): the default,
    named assumed, until a [[chain]] entry's since, then the entry's value with its source."""
    from pipeline.core.chain import LOGPROBS_SOURCE, ChainParam
    from pipeline.ingest.chain import load_chain_params
    from pipeline.warehouse.database import fetch_frame

    focal = timeline.focal_host
    sql = "SELECT started_at, chain_mode.value AS mode, chain_mode.assumed AS assumed FROM ({}) ORDER BY started_at"
    judged = (
        "SELECT i.started_at, chain_value_of('logprobs_mode', i.model, i.started_at) AS chain_mode "
        "FROM inferences i JOIN answer_checks_t a USING (escrow_id, inference_id) "
        "WHERE i.executor = $host AND i.finished AND i.status <> 'timed_out' AND EXISTS (SELECT 1 FROM validations v "
        "WHERE v.escrow_id = i.escrow_id AND v.inference_id = i.inference_id AND v.kind = 'validation')"
    )
    con = open_for_write(bare_copy4)
    try:
        answers = fetch_frame(con, sql.format(judged), {"host": focal})
        n = answers.height
        assert n > 2 and set(answers.select("mode", "assumed").rows()) == {("processed_logprobs", True)}
        notes = compute("answers-by-sampling", con, host=focal, command="test").notes
        assert f"processed_logprobs (assumed: {LOGPROBS_SOURCE}): {n} answer(s)" in " ".join(notes)
        since = answers["started_at"][n // 2]
        load_chain_params(con, [ChainParam("logprobs_mode", None, "raw_logprobs", since, "gov 57", assumed=False)])
        answers = fetch_frame(con, sql.format(judged), {"host": focal})
        later = answers.filter(pl.col("started_at") >= since).height
        assert (
            answers.select("mode", "assumed").rows()
            == [("processed_logprobs", True)] * (n - later) + [("raw_logprobs", False)] * later
        )
        text = " ".join(compute("answers-by-sampling", con, host=focal, command="test").notes)
        assert f"processed_logprobs (assumed: {LOGPROBS_SOURCE}): {n - later} answer(s)" in text
        assert f"raw_logprobs (gov 57): {later} answer(s)" in text
    finally:
        con.close()
