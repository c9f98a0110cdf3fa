"""Similarity of devshard validation by verdict rule set (docs/sources.md, verdict rules by version).

The rule sets are named in SQL (view `verdict_rules`); this module holds their scores, one definition each.
Legacy (before #1487, #1487): distance = Σd / max(100, N) over the N output positions, similarity 1 − distance
(gonka-ai/gonka common/validation/validation.go @72770819, customDistance). Short-output #1955: distance =
max(Σd/N − 0.10/√N, Σd/max(100, N)) and three checks on output positions (gonka-ai/gonka
common/validation/scoring.go @d2343c05, devshard/docs/proposals/short-output-validation.md @fd475011).
`d` is upstream's per-position logprob distance (positionDistance), each below 0.5.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

LEGACY_RULES = ("before #1487", "#1487")
SHORT_OUTPUT = "short-output #1955"
# DefaultShortOutputScoringPolicy (scoring.go @d2343c05)
MEAN_ALLOWANCE = 0.10
OUTPUT_POSITION_CEILING = 0.30
OUTPUT_CEILING_TOLERANCE = 0.02
PROCESSED_CEILING_FLOOR = 3
MAX_OUT_OF_SUPPORT_POSITIONS = 1
OUT_OF_SUPPORT_TOLERANCE = 0.03
OUTPUT_CHECKS_ENFORCED_MODELS = ("deepseek-ai/DeepSeek-V4-Flash-0731", "zai-org/GLM-5.3-Flash")
# the reasons upstream's checks give (InvalidInferenceResult.Reason, scoring.go @d2343c05)
SAMPLER_SUPPORT = ("sampler-support check", "Output tokens outside the sampler support.")
POSITION_CEILING = ("per-position ceiling check", "Output positions diverge from the validator.")


def legacy_distance(distances: Sequence[float]) -> float:
    """Σd / max(100, N): below 100 positions the missing slots count as perfect agreement."""
    return sum(distances) / max(100, len(distances)) if distances else 0.0


def short_output_distance(distances: Sequence[float]) -> float:
    """max(Σd/N − 0.10/√N, Σd/max(100, N)): never below the legacy distance, equal to it from N = 100 on."""
    n = len(distances)
    if n == 0:
        return 0.0
    total = sum(distances)
    return max(total / n - MEAN_ALLOWANCE / math.sqrt(n), total / max(n, 100))


def similarity(distances: Sequence[float], rule: str) -> float:
    """The similarity the rule set gives: 1 − distance, 0 for a distance that is not finite (or above 1 under #1955,
    where the legacy scorer clamps a negative similarity to 0)."""
    if rule == SHORT_OUTPUT:
        distance = short_output_distance(distances)
        return 0.0 if not math.isfinite(distance) or distance > 1 else 1 - distance
    if rule not in LEGACY_RULES:
        raise ValueError(f"unknown verdict rule set {rule!r}")
    distance = legacy_distance(distances)
    return 0.0 if not math.isfinite(distance) else max(1 - distance, 0.0)


def checks_enforced(model: str | None) -> bool:
    """Whether the per-position ceiling and sampler-support checks reject on `model` (else they only log). The one
    place a per-model list is read: upstream keys it by the request's chain model id."""
    return model in OUTPUT_CHECKS_ENFORCED_MODELS


@dataclass(frozen=True)
class CheckFailure:
    check: str
    reason: str
    enforced: bool  # False: logged as "… would fail (log-only): …", the mean-distance check decides

    @property
    def message(self) -> str:
        """The validator's log message for this failure, as scoring.go writes it."""
        return f"{self.check} {'failed' if self.enforced else 'would fail (log-only)'}: {self.reason}"


def output_checks(
    distances: Sequence[float], out_of_support: int, logprobs_mode: str, model: str | None
) -> list[CheckFailure]:
    """The short-output checks that fail, in upstream's order (sampler support, then per-position ceiling); an
    enforced failure rejects and ends the list, a log-only one lets the next check run. `out_of_support` = output
    positions whose validator logprob is ≤ −9999 or NaN (read in processed mode only)."""
    n = len(distances)
    failures: list[CheckFailure] = []
    if n == 0:
        return failures
    enforced = checks_enforced(model)
    processed = logprobs_mode in ("processed", "processed_logprobs")
    budget = max(MAX_OUT_OF_SUPPORT_POSITIONS, math.ceil(OUT_OF_SUPPORT_TOLERANCE * n))
    if processed and out_of_support > budget:
        failures.append(CheckFailure(*SAMPLER_SUPPORT, enforced))
        if enforced:
            return failures
    allowed = int(OUTPUT_CEILING_TOLERANCE * n)
    if processed:
        allowed = max(allowed, PROCESSED_CEILING_FLOOR)
    if sum(1 for d in distances if d > OUTPUT_POSITION_CEILING) > allowed:
        failures.append(CheckFailure(*POSITION_CEILING, enforced))
    return failures
