"""builds infer and builds check on data-samples/ (its store, vLLM log and builds.toml): the proposal
reproduces the bundled boundaries, the bundled timeline passes, and each kind of fault is named once."""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.paths import DATA_SAMPLES_DIR
from pipeline.evidence.buildcheck import check, infer, labels, segments
from pipeline.ingest.builds import read_builds
from pipeline.warehouse.database import open_read_only
from tests.factories import data_samples_warehouse

HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # focal host of data-samples/, the one with the log
OTHER = "gonka1h2aeruh3tq2uvu3ehetjnngp4fcc2kdv4nxajn"


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    path = data_samples_warehouse(tmp_path_factory.mktemp("builds") / "w.duckdb", vllm_log_host=HOST)
    con = open_read_only(path)
    yield con
    con.close()


def timeline(*entries: tuple[str, str]) -> pl.DataFrame:
    """A focal-host timeline of (label, since) entries."""
    rows = [{"host": HOST, "build": b, "valid_from": datetime.fromisoformat(t).astimezone(UTC)} for b, t in entries]
    return pl.DataFrame(rows)


def bundled() -> list[dict]:
    return tomllib.loads((DATA_SAMPLES_DIR / "builds.toml").read_text())["builds"]


def test_infer_reproduces_the_bundled_boundaries(con, tmp_path):
    proposal = infer(con)
    entries = tomllib.loads(proposal)["builds"]
    ours = [e for e in bundled() if e["host"] == HOST]
    # the first bundled entry begins before the log does: the proposal starts at the log's first start
    assert (
        [e["since"] for e in entries[1:]]
        == [e["since"] for e in ours[1:]]
        == [
            "2026-10-20T12:00:00Z",
            "2026-10-25T00:00:00Z",
            "2026-10-30T06:00:00Z",
        ]
    )
    assert entries[0]["since"] == "2026-10-19T07:13:23Z" > ours[0]["since"]
    # the chunk-2048 build differs in max_num_batched_tokens too, so every label names it
    assert [e["label"] for e in entries] == [
        "vLLM 0.20.1, no spec decode, raw_logprobs, max_num_batched_tokens=8192",
        "vLLM 0.23.1, dspark K=5, raw_logprobs, max_num_batched_tokens=8192",
        "vLLM 0.23.1, dspark K=5, processed_logprobs, max_num_batched_tokens=8192",
        "vLLM 0.23.1, dspark K=5, raw_logprobs, max_num_batched_tokens=2048",
    ]
    # each entry says which log lines it rests on; the raw_logprobs build is two start cycles (the OOM restart)
    assert "# rests on vllm.log:1 (vLLM API server version), vllm.log:2 (non-default args), vllm.log:3" in proposal
    assert "# fingerprint d058fbc222fd: 2 start cycles from 2026-10-20T12:00:00Z" in proposal
    assert "# changed: logprobs_mode – → processed_logprobs" in proposal
    # the proposal is a loadable builds.toml, and consistent with the logs it came from
    (tmp_path / "proposal.toml").write_text(proposal)
    assert check(con, read_builds(tmp_path / "proposal.toml")).contradictions == []


def test_the_bundled_timeline_passes_and_what_cannot_be_checked_is_said(con):
    result = check(con, read_builds(DATA_SAMPLES_DIR / "builds.toml"))
    assert result.ok and result.contradictions == []
    assert result.notes == [
        f"{OTHER}: no vLLM start cycles in the warehouse: its builds are not checked",
        f"{HOST}: 'V1, no DSpark' since 2026-10-05T00:00:00Z begins before the logs (2026-10-19T07:13:23Z): "
        "its boundary is not checked",
    ]


def test_a_shifted_boundary_a_missing_build_and_a_wrong_label_are_named_once_each(con):
    bad = timeline(
        ("V1, no DSpark", "2026-10-05T00:00:00+00:00"),
        ("V2, no DSpark", "2026-10-21T00:00:00+00:00"),  # wrong label (the logs run DSpark) and 12 h late
        # the processed_logprobs build of 2026-10-25 is missing
        ("V2 + DSpark, chunk 2048", "2026-10-30T06:00:00+00:00"),  # the samples' build deployed after the copy
    )
    assert check(con, bad).contradictions == [
        f"{HOST}: boundary of 'V2, no DSpark' at 2026-10-21T00:00:00Z is shifted: the logs' config changes at the "
        "restart of 2026-10-20T12:00:00Z, 12 h earlier (spec_method none → dspark; spec_tokens – → 5; "
        "vllm_version 0.20.1 → 0.23.1)",
        f"{HOST}: the restart of 2026-10-25T00:00:00Z changes the config (logprobs_mode – → processed_logprobs) "
        "but the timeline has no boundary near it",
        f"{HOST}: 'V2, no DSpark' says no speculative decoding; its cycles run dspark",
    ]


def test_boundaries_near_a_restart_pass_and_far_ones_without_a_config_change_are_named(con):
    near = timeline(
        ("V1, no DSpark", "2026-10-05T00:00:00+00:00"),
        ("V2 + DSpark", "2026-10-20T12:20:00+00:00"),  # 20 min after the restart: within NEAR
        ("V2 + DSpark, processed_logprobs", "2026-10-24T23:45:00+00:00"),
        ("V2 + DSpark, patched image", "2026-10-23T04:16:26+00:00"),  # a restart with the same config: fine
        ("V2 + DSpark, chunk 2048", "2026-10-30T06:00:00+00:00"),  # the samples' build deployed after the copy
    )
    assert check(con, near).contradictions == []
    extra = timeline(
        ("V1, no DSpark", "2026-10-05T00:00:00+00:00"),
        ("V2 + DSpark", "2026-10-20T12:00:00+00:00"),
        ("V2 + DSpark, hotfix", "2026-10-22T00:00:00+00:00"),  # no restart anywhere near
        ("V2 + DSpark, processed_logprobs", "2026-10-25T00:00:00+00:00"),
        ("V2 + DSpark, chunk 2048", "2026-10-30T06:00:00+00:00"),  # the samples' build deployed after the copy
    )
    assert check(con, extra).contradictions == [
        f"{HOST}: boundary of 'V2 + DSpark, hotfix' at 2026-10-22T00:00:00Z has no restart within 30 min in the "
        "vLLM logs (nearest start: 2026-10-23T04:16:26Z)"
    ]


def test_a_version_or_method_the_logs_contradict(con):
    wrong = timeline(
        ("vLLM 0.23, no DSpark", "2026-10-05T00:00:00+00:00"),  # the logs run 0.20.1
        ("vLLM 0.23.1 + EAGLE-3", "2026-10-20T12:00:00+00:00"),  # the logs run dspark
        ("vLLM v0.23.1, DSpark K=5", "2026-10-25T00:00:00+00:00"),
        ("V2 + DSpark, chunk 2048", "2026-10-30T06:00:00+00:00"),  # the samples' build deployed after the copy
    )
    assert check(con, wrong).contradictions == [
        f"{HOST}: 'vLLM 0.23, no DSpark' says vLLM 0.23; its cycles run 0.20.1",
        f"{HOST}: 'vLLM 0.23.1 + EAGLE-3' names eagle; its cycles run dspark",
    ]


def test_labels_name_only_what_differs_beyond_version_and_speculation(con):
    segs = segments(con, HOST)
    assert [len(s.starts) for s in segs] == [1, 2, 1, 1]
    same_tp = labels(segs)
    assert not any("TP" in label for label in same_tp)  # every segment runs TP2: not a difference
    segs[0].config["tensor_parallel_size"] = "1"
    assert labels(segs)[0] == "vLLM 0.20.1, no spec decode, raw_logprobs, max_num_batched_tokens=8192, TP1"
    assert labels(segs)[1] == "vLLM 0.23.1, dspark K=5, raw_logprobs, max_num_batched_tokens=8192, TP2"


def test_no_logs_no_proposal(tmp_path):
    path = data_samples_warehouse(tmp_path / "w.duckdb")  # no vLLM log
    con = open_read_only(path)
    try:
        text = infer(con)
        assert "[[builds]]" not in text and "(no start cycles in the warehouse's vLLM logs)" in text
        assert check(con, read_builds(DATA_SAMPLES_DIR / "builds.toml")).contradictions == []
    finally:
        con.close()


def test_the_proposal_file_round_trips_through_builds_load(con, tmp_path):
    path: Path = tmp_path / "p.toml"
    path.write_text(infer(con, HOST))
    frame = read_builds(path)
    assert frame["build"].to_list()[-1] == "vLLM 0.23.1, dspark K=5, raw_logprobs, max_num_batched_tokens=2048"
