"""The similarity of each verdict rule set (pipeline/evidence/scoring.py) on upstream's own scenarios.

Scenarios and numbers from gonka-ai/gonka common/validation/short_output_validation_test.go and
short_output_lengths_test.go @d2343c05 (the policy constants of scoring.go @d2343c05), and
devshard/docs/proposals/short-output-validation.md @fd475011. Per-position distances stand for upstream's
positionDistance values (each below 0.5), so no logprobs are re-scored here.
"""

from __future__ import annotations

import math
import random

import pytest

from pipeline.evidence.scoring import (
    SHORT_OUTPUT,
    CheckFailure,
    checks_enforced,
    output_checks,
    similarity,
)

DEEPSEEK = "deepseek-ai/DeepSeek-V4-Flash-0731"
GLM = "zai-org/GLM-5.3-Flash"
MINIMAX_T, QWEN_T, DEEPSEEK_T = 0.922, 0.94, 0.900  # the tests' live thresholds
NEAR_HALF = 0.5 - 1e-7  # farthestExecutor: each term approaches the 0.5 supremum


def test_the_formula():
    # mean = max(Σd/N − 0.10/√N, Σd/max(100, N)), similarity 1 − mean
    d = [0.2] * 25
    assert similarity(d, SHORT_OUTPUT) == pytest.approx(1 - max(5 / 25 - 0.10 / 5, 5 / 100))  # 0.82
    assert similarity(d, "#1487") == pytest.approx(1 - 5 / 100)  # legacy 0.95
    assert similarity([], SHORT_OUTPUT) == 1.0  # no output positions: Value 1 (shortOutputVerdict)
    with pytest.raises(ValueError, match="unknown verdict rule set"):
        similarity(d, "newest")


def test_phantom_slot_dilution_closed():
    """TestShortOutputClosesPhantomSlotDilution: 12 positions as wrong as the metric registers clear even the
    strictest threshold (Qwen 0.94) under max(100, N), and fail now; processed mode rejects them outright."""
    d = [NEAR_HALF] * 12
    assert similarity(d, "before #1487") > QWEN_T
    short = similarity(d, SHORT_OUTPUT)
    assert short == pytest.approx(1 - (NEAR_HALF - 0.10 / math.sqrt(12)))  # 0.5289
    assert short < MINIMAX_T
    # every position above the 0.30 ceiling, more than the processed floor of 3: rejected on DeepSeek
    ceiling = CheckFailure("per-position ceiling check", "Output positions diverge from the validator.", True)
    assert output_checks(d, 0, "processed", DEEPSEEK) == [ceiling]
    assert ceiling.message == "per-position ceiling check failed: Output positions diverge from the validator."


def test_proposal_legacy_hole():
    """The proposal: under the legacy score an output with N ≤ 2·(1−T)·100 passes T whatever it claims."""
    for n in range(1, 21):  # T = 0.900: N ≤ 20
        assert similarity([NEAR_HALF] * n, "#1487") > DEEPSEEK_T
        assert similarity([NEAR_HALF] * n, SHORT_OUTPUT) < DEEPSEEK_T


def test_repetition_scored_on_true_mean():
    """TestShortOutputRepetitionScoredOnTrueMean: 64 positions, one of them off (0.974 against 0.99995); the
    score is 1 − max(Σd/64 − 0.10/8, Σd/100), here the legacy term (the allowance exceeds the mean)."""
    a, b = math.log(0.99995), math.log(0.974)
    d0 = abs(a - b) / (1e-6 + abs(a) + abs(b)) / 2  # the one distinct entry of that position
    d = [d0] + [0.0] * 63
    assert similarity(d, SHORT_OUTPUT) == pytest.approx(1 - max(d0 / 64 - 0.10 / 8, d0 / 100), abs=1e-12)
    assert similarity(d, SHORT_OUTPUT) == pytest.approx(similarity(d, "#1487"), abs=1e-12)


def test_never_more_lenient_than_legacy_and_legacy_from_100():
    """TestShortOutputMeanDistanceNeverMoreLenientThanLegacy: short ≤ legacy at every N 1..300, equal from 100."""
    rng = random.Random(1955)
    d = [rng.uniform(0, 0.08) for _ in range(300)]
    for n in range(1, 301):
        short, legacy = similarity(d[:n], SHORT_OUTPUT), similarity(d[:n], "#1487")
        assert short <= legacy + 1e-12
        if n >= 100:
            assert short == pytest.approx(legacy, abs=1e-12)


def test_sampler_support_budget():
    """TestShortOutputSamplerSupportBudgetScalesWithLength / ...RejectsOutOfSupportTokens: 4 of 112 within
    ceil(3%), 5 rejected; of 8, one tolerated, two rejected; raw logprobs never read it."""
    support = CheckFailure("sampler-support check", "Output tokens outside the sampler support.", True)
    assert output_checks([0.01] * 112, 4, "processed", DEEPSEEK) == []
    assert output_checks([0.01] * 112, 5, "processed", DEEPSEEK) == [support]
    assert output_checks([0.01] * 8, 1, "processed", GLM) == []
    assert output_checks([0.01] * 8, 2, "processed_logprobs", GLM) == [support]
    assert output_checks([0.01] * 8, 2, "raw_logprobs", GLM) == []


def test_ceiling_tolerance():
    """TestShortOutputCeilingCheckTolerance: 1 of 112 above the ceiling is within 2%; of 40, one rejects in raw
    mode and stays within the processed floor of 3, four reject in processed mode too."""
    long = [0.01] * 112
    long[100] = 0.42
    assert output_checks(long, 0, "processed", DEEPSEEK) == []
    short = [0.01] * 40
    short[10] = 0.42
    assert [f.check for f in output_checks(short, 0, "raw_logprobs", DEEPSEEK)] == ["per-position ceiling check"]
    assert output_checks(short, 0, "processed", DEEPSEEK) == []
    for i in (15, 20, 25):
        short[i] = 0.42
    assert [f.check for f in output_checks(short, 0, "processed", DEEPSEEK)] == ["per-position ceiling check"]


def test_checks_only_log_outside_the_enforced_models():
    """Per-model enforcement: DeepSeek-V4-Flash-0731 and GLM-5.3-Flash reject; others log `would fail (log-only)`
    and go on to the next check (scoring.go @d2343c05, outputCheck)."""
    assert checks_enforced(DEEPSEEK) and checks_enforced(GLM)
    assert not checks_enforced("MiniMaxAI/MiniMax-M2.7") and not checks_enforced(None)
    failures = output_checks([NEAR_HALF] * 12, 5, "processed", "MiniMaxAI/MiniMax-M2.7")
    assert [f.message for f in failures] == [
        "sampler-support check would fail (log-only): Output tokens outside the sampler support.",
        "per-position ceiling check would fail (log-only): Output positions diverge from the validator.",
    ]
