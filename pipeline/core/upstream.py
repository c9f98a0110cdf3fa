"""Facts of upstream code that evidence rules rest on, each stated once with where it comes from.

Shared by the rules that need them (the `preflight` checks; build descriptions), so that a fact that changes
upstream changes in one place.
"""

from __future__ import annotations

# Chain parameters (the logprobs mode validation expects, thresholds, the PoC sequence length) are data, with
# their sources: pipeline/core/chain.py.

# vLLM's engine-wide default when --logprobs-mode is not passed (vllm/config/model.py, `logprobs_mode`).
VLLM_DEFAULT_LOGPROBS_MODE = "raw_logprobs"
# The speculative method of DSpark in vLLM's start lines. The draft block size of each DSpark checkpoint is the
# view dspark_block_sizes (sql/warehouse/views/30_logs.sql), read by acceptance and preflight alike.
DSPARK_METHOD = "dspark"
# One PoC forward pass is batch x seq_len tokens (the chain's `poc_seq_len`), in a buffer sized by
# --max-num-batched-tokens (gonka-ai/vllm vllm/v1/attention/backend.py: `assert buffer.shape[0] >= num_output_tokens`).
