"""Answers by sampling are grouped by the client's parameters (the stored request is the client's) and say which
parameters devshardd injected before execution (gonka-ai/vllm docs/gonka-infval-old-vs-new-gumbel.md, devshard
v5.0.2: logprobs, top_logprobs 5, min_tokens 64, seed = int32(inference_id) unless given, logprobs_mode
processed_logprobs)."""

from __future__ import annotations

import json

import polars as pl

from pipeline.evidence import compute
from pipeline.transforms.answer_scan import scan_request


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
