"""Parameters of a sample timeline and the fixed calendar it is laid on."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

# Epoch i of the spec (by position, not by number) starts here + i * EPOCH_SECONDS.
CALENDAR_START = int(datetime(2026, 10, 15, tzinfo=UTC).timestamp())
EPOCH_SECONDS = 4 * 86400

MODEL = "deepseek-ai/DeepSeek-V4-Flash"

BUILD_V1 = "V1, no DSpark"
BUILD_RAW = "V2 + DSpark, raw_logprobs"
BUILD_FIX = "V2 + DSpark, processed_logprobs, vLLM fix"
# Deployed after the copy is taken: the fix, but vLLM's default logprobs mode and a 2048-token chunk that PoC
# batch 8 does not fit (gonka-ai/gonka#2198 items 2 and 4); only its start and a PoC window are logged.
BUILD_CHUNK = "V2 + DSpark, vLLM fix, raw_logprobs, chunk 2048"


@dataclass(frozen=True)
class SampleSpec:
    """What to simulate. Every field has a default; the same spec always gives the same bytes."""

    seed: int = 7
    epochs: tuple[int, ...] = (1, 2, 3, 4)
    escrows_per_epoch: int = 3
    inferences_per_escrow: int = 150  # each escrow varies by about ±20%
    group_size_range: tuple[int, int] = (8, 16)
    n_hosts: int = 10
    n_gateways: int = 2
    max_slots_per_host: int = 3
    vote_threshold_factor: int = 50
    validation_rate: int = 5000  # basis points
    token_price: int = 10
    challenge_rate: float = 0.01  # ordinary executors, outside the planted window
    refused_rate: float = 0.02
    execution_timeout_rate: float = 0.02
    focal_invalid_vote_rate: float = 0.95  # focal host as validator during the raw_logprobs window
    copy_cut_fraction: float = 0.6  # how far the newest epoch's escrows have run in a copy

    def __post_init__(self):
        if not self.epochs or list(self.epochs) != sorted(set(self.epochs)) or self.epochs[0] < 0:
            raise ValueError("epochs must be distinct, increasing and >= 0")
        low, high = self.group_size_range
        if not 4 <= low <= high <= 128:
            raise ValueError("group_size_range must satisfy 4 <= low <= high <= 128")
        factor = self.vote_threshold_factor or 50
        if low - self.max_slots_per_host <= low * factor // 100:
            # Timeouts need accept weight above the threshold from the hosts other than the executor.
            raise ValueError("groups too small for the vote threshold: raise the low group size")
        if (self.n_hosts - 1) * self.max_slots_per_host + 1 < high or self.inferences_per_escrow < 30:
            raise ValueError("need enough hosts to fill the largest group and inferences_per_escrow >= 30")

    def epoch_start(self, epoch_id: int) -> int:
        """Unix seconds at which an epoch of this spec begins."""
        return CALENDAR_START + self.epochs.index(epoch_id) * EPOCH_SECONDS
