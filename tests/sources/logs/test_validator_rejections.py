"""Validator rejection lines read with their reason and inference id (docs/sources.md, validator logs).

Each fixture is upstream's format string as its source writes it, rendered as the dapi's slog text line
(`time=… level=WARN msg="…" subsystem=Validation inferenceId=…`, as the score lines of tests/ingest/test_logs.py).
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import pytest

from pipeline.core.address import sample_address
from pipeline.evidence import compute
from pipeline.ingest.logs import ingest_logs
from pipeline.warehouse.database import fetch_frame, open_for_write
from tests.factories import sample_warehouse

VALIDATOR = sample_address("vald8t0r")

# (upstream msg, source, expected result, expected reason)
LINES = (
    # decentralized-api/internal/devshard/shared_runtime.go @dd8711ab: logPrefix+" validation failed: inflated token
    # counts" with logPrefix "devshardd" (devshard/cmd/devshardd) or "devshard" (the dapi's ValidationAdapter)
    ("devshardd validation failed: inflated token counts", "rejected", "inflated token counts"),
    ("devshard validation failed: inflated token counts", "rejected", "inflated token counts"),
    # common/validation/validation.go @72770819, ExecuteValidation
    ("validation failed: inflated token counts", "rejected", "inflated token counts"),
    (
        "validation failed: logit presence mismatch between original and validation response",
        "rejected",
        "logit presence mismatch between original and validation response",
    ),
    # common/validation/validation.go @d2343c05, ExecuteValidationWithPolicy
    (
        "validation failed: enforced tokens exceed the replay limits, not sent to the validator node",
        "rejected",
        "enforced tokens exceed the replay limits, not sent to the validator node",
    ),
    (
        "validation failed: more output positions than max_tokens, not sent to the validator node",
        "rejected",
        "more output positions than max_tokens, not sent to the validator node",
    ),
    (
        "validation failed: validator node rejected the executor's enforced tokens",
        "rejected",
        "validator node rejected the executor's enforced tokens",
    ),
    # common/validation/validation.go @d2343c05, shortOutputChecks (the short-output version's own length checks)
    (
        "validation failed: output below the requested min_tokens",
        "rejected",
        "output below the requested min_tokens",
    ),
    (
        "validation failed: output continues past a requested stop token",
        "rejected",
        "output continues past a requested stop token",
    ),
    # common/validation/scoring.go @d2343c05, shortOutputVerdict: check+" failed: "+reason and
    # check+" would fail (log-only): "+reason, check and reason as the code passes them
    (
        "sampler-support check failed: Output tokens outside the sampler support.",
        "rejected",
        "sampler-support check: Output tokens outside the sampler support.",
    ),
    (
        "per-position ceiling check failed: Output positions diverge from the validator.",
        "rejected",
        "per-position ceiling check: Output positions diverge from the validator.",
    ),
    (
        "sampler-support check would fail (log-only): Output tokens outside the sampler support.",
        "log_only",
        "sampler-support check: Output tokens outside the sampler support.",
    ),
    (
        "per-position ceiling check would fail (log-only): Output positions diverge from the validator.",
        "log_only",
        "per-position ceiling check: Output positions diverge from the validator.",
    ),
)


def _line(msg: str, inference_id: int, minute: int, extra: str = "") -> str:
    return (
        f'time=2026-10-24T12:{minute:02d}:00.000Z level=WARN msg="{msg}" subsystem=Validation '
        f"inferenceId={inference_id}{extra}"
    )


@pytest.mark.parametrize(("msg", "result", "reason"), LINES, ids=[m for m, _, _ in LINES])
def test_rejection_line(tmp_path, new_warehouse, msg, result, reason):
    (tmp_path / "dapi.log").write_text(_line(msg, 17, 0, " claimedInput=120 validationInput=80") + "\n")
    con = new_warehouse(tmp_path / "w.duckdb")
    try:
        ingest_logs(con, [tmp_path / "dapi.log"], host=VALIDATOR, kind="validator")
        rows = fetch_frame(con, "SELECT result, reason, inference_id, value FROM validation_scores").rows()
    finally:
        con.close()
    assert rows == [(result, reason, "17", None)]


def test_json_line_and_mainnet_invalid_reason(tmp_path, new_warehouse):
    # the same message as a JSON slog record; and the mainnet path's "Invalid inference result" with its reason
    # attribute (decentralized-api/internal/validation, ToMsgValidation: logging.Warn("Invalid inference result",
    # types.Validation, "reason", r.Reason, "inferenceId", …)), reason text from validation.go @72770819
    lines = [
        '{"time":"2026-10-24T12:00:00Z","level":"WARN","msg":"validation failed: inflated token counts",'
        '"subsystem":"Validation","inferenceId":"5"}',
        'time=2026-10-24T12:01:00.000Z level=WARN msg="Invalid inference result" subsystem=Validation '
        'reason="Inflated token counts." inferenceId=5',
        # a message that only quotes the words is no rejection
        'time=2026-10-24T12:02:00.000Z level=INFO msg="retrying" error="validation failed: timeout"',
    ]
    (tmp_path / "dapi.log").write_text("\n".join(lines) + "\n")
    con = new_warehouse(tmp_path / "w.duckdb")
    try:
        report = ingest_logs(con, [tmp_path / "dapi.log"], host=VALIDATOR, kind="validator")
        rows = fetch_frame(con, 'SELECT result, reason, value FROM validation_scores ORDER BY "at"').rows()
    finally:
        con.close()
    assert rows == [("rejected", "inflated token counts", None), ("invalid", "Inflated token counts.", 0.0)]
    assert report.unrecognised == []


def test_rejections_are_no_scores_and_are_named(tmp_path, new_warehouse):
    """The similarity table counts rejection lines apart from the scores, by reason, and says what it sees."""
    lines = [
        'time=2026-10-24T11:00:00.000Z level=INFO msg="Cosine similarity validation result" subsystem=Validation '
        "cosineSimValue=0.95 inferenceId=4 executor=gonka1peer model=MiniMax-M2.7",
        _line("per-position ceiling check failed: Output positions diverge from the validator.", 5, 1),
        _line("sampler-support check would fail (log-only): Output tokens outside the sampler support.", 6, 2),
    ]
    (tmp_path / "dapi.log").write_text("\n".join(lines) + "\n")
    con = new_warehouse(tmp_path / "w.duckdb")
    try:
        ingest_logs(con, [tmp_path / "dapi.log"], host=VALIDATOR, kind="validator")
        result = compute("similarity", con, host=VALIDATOR, command="test")
    finally:
        con.close()
    scores = result.rows.filter(pl.col("source") == "scores")
    assert scores.select("n", "min", "judged", "passed").rows() == [(1, 0.95, 1, 1)]
    assert result.stats["rejections"] == 1
    assert (
        "1 validation(s) rejected without a score, by reason: per-position ceiling check: Output positions "
        "diverge from the validator. (1)." in result.notes
    )
    assert any(n.startswith("1 validation(s) logged as would fail (log-only)") for n in result.notes)
    assert any("the devshard path logs no similarity value" in n for n in result.notes)


def test_invalid_verdict_gets_the_logs_reason(request, timeline, tmp_path):
    """An invalid sampled validation in the diff log is named by its validator's rejection line for the same
    inference id a minute before the verdict; one with no such line keeps no reason."""
    built = sample_warehouse(request, timeline.copy(last_epoch=2), label="rejections")
    con = open_for_write(built.path)
    try:
        verdicts = fetch_frame(
            con,
            "SELECT validator, inference_id, event_at FROM validations WHERE kind = 'validation' AND NOT valid "
            "ORDER BY event_at LIMIT 2",
        ).rows()
        assert len(verdicts) == 2
        (validator, inference_id, at), _ = verdicts
        stamp = (at - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        (tmp_path / "dapi.log").write_text(
            f'time={stamp} level=WARN msg="devshardd validation failed: inflated token counts" '
            f"subsystem=Validation inferenceId={inference_id}\n"
        )
        ingest_logs(con, [tmp_path / "dapi.log"], host=validator, kind="validator")
        named = fetch_frame(con, "SELECT inference_id, reason FROM validation_rejections ORDER BY event_at").rows()
    finally:
        con.close()
    assert named[0] == (inference_id, "inflated token counts")
    assert named[1][1] is None
