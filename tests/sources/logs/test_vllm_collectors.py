"""A vLLM envelope found anywhere in a line is still that line: the same log behind every collector
prefix operators use gives the same rows as the bare log — journald, Kubernetes' CRI files, a sidecar or log
shipper with a prefix longer than 64 characters, Ray's actor prefixes (with the node address and the
`[repeated Nx across cluster]` mark), OpenRLHF's `(AsyncVLLMInferenceEngine pid=N)` actor, tqdm progress text
glued in front of a record. Also the V0 spec line as 0.4.1 – 0.5.2 printed it (`Number of draft tokens tokens:`).
"""

from __future__ import annotations

import datetime as dt

import pytest

from pipeline.sources.logs.files import LogFile
from pipeline.sources.logs.vllm import parse_vllm_log

UTC = dt.UTC

# One engine lifetime in V1's format: launch, start, stats and spec windows, ready, an OOM crash with traceback.
BASE = [
    "INFO 12-03 10:00:00 [api_server.py:1885] vLLM API server version 0.11.1",
    "INFO 12-03 10:00:01 [core.py:93] Initializing a V1 LLM engine (v0.11.1) with config: model='Qwen/Qwen3-8B'",
    "INFO:     Application startup complete.",
    "INFO 12-03 10:00:20 [loggers.py:215] Engine 000: Avg prompt throughput: 12.5 tokens/s, Avg generation "
    "throughput: 40.0 tokens/s, Running: 3 reqs, Waiting: 1 reqs, GPU KV cache usage: 12.5%, Prefix cache hit "
    "rate: 50.0%",
    "INFO 12-03 10:00:20 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.50, Accepted throughput: "
    "30.00 tokens/s, Drafted throughput: 60.00 tokens/s, Accepted: 300 tokens, Drafted: 600 tokens, Per-position "
    "acceptance rate: 0.700, 0.500, 0.300, Avg Draft acceptance rate: 50.0%",
    "INFO 12-03 10:00:30 [loggers.py:215] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
    "throughput: 41.5 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 13.0%, Prefix cache hit "
    "rate: 50.0%",
    "ERROR 12-03 10:00:35 [core.py:710] EngineCore encountered a fatal error.",
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 701, in run_engine_core',
    "    engine_core.run_busy_loop()",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.1 GiB",
    "ERROR 12-03 10:00:36 [async_llm.py:480] AsyncLLM output_handler failed.",
    "CRITICAL 12-03 10:00:36 [launcher.py:116] MQLLMEngine is already dead, terminating server process",
]
LONG = "[fluent-bit] kubernetes.var.log.containers.vllm-7d9f8c6b5-x2x4z_inference_vllm-0a1b2c3d.log: "
PREFIXES = {
    "journald": lambda i, line: f"Dec 03 10:00:{i:02d} gpu-node-01 vllm[4242]: {line}",
    "journald_iso": lambda i, line: f"2025-12-03T10:00:{i:02d}+0000 gpu-node-01 vllm[4242]: {line}",
    "kubernetes_cri": lambda i, line: f"2025-12-03T10:00:{i:02d}.123456789Z stdout F {line}",
    "long_shipper_prefix": lambda i, line: LONG + line,
    "ray_actor_with_address": lambda i, line: (
        f"(RayWorkerWrapper pid=3446, ip=10.0.0.5) {line}" + (" [repeated 2x across cluster]" if i % 3 == 0 else "")
    ),
    "openrlhf_actor": lambda i, line: f"(AsyncVLLMInferenceEngine pid=77) {line}",
    "journald_and_process": lambda i, line: f"Dec 03 10:00:{i:02d} gpu-node-01 vllm[4242]: (APIServer pid=4242) {line}",
}


def _parse(tmp_path, name: str, lines: list[str]):
    path = tmp_path / f"{name}.log"
    path.write_text("\n".join(lines) + "\n")
    return parse_vllm_log(LogFile(path, dt.datetime(2025, 12, 31, tzinfo=UTC)), 2025)


def _rows(parsed):
    drop = {"proc"}
    return (
        [{k: v for k, v in r.items() if k not in drop} for r in parsed.spec],
        [{k: v for k, v in r.items() if k not in drop} for r in parsed.stats],
        [(e["line"], e["kind"], e["level"], e["at"], e["detail"]) for e in parsed.events],
        parsed.unparsed,
        parsed.records,
    )


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    return _parse(tmp_path_factory.mktemp("bare"), "bare", BASE)


def test_the_bare_log(bare):
    spec, stats, events, unparsed, records = _rows(bare)
    assert (len(spec), len(stats), unparsed, records) == (1, 2, [], 9)
    assert [(line, kind) for line, kind, *_ in events] == [
        (1, "launch"),
        (2, "start"),
        (3, "ready"),
        (7, "fatal"),
        (7, "oom"),
        (12, "engine_dead"),
        (13, "engine_dead"),
    ]


@pytest.mark.parametrize("style", sorted(PREFIXES))
def test_every_collector_prefix_reads_like_the_bare_log(tmp_path, bare, style):
    prefixed = [PREFIXES[style](i, line) for i, line in enumerate(BASE)]
    parsed = _parse(tmp_path, style, prefixed)
    # an unknown prefix (the long shipper's) is learned from the envelope lines and leaves the traceback lines
    # too: the fatal record quotes the same cause as in the bare log
    assert _rows(parsed) == _rows(bare)
    procs = {r["proc"] for r in parsed.stats}
    expected = {"ray_actor_with_address": "RayWorkerWrapper", "openrlhf_actor": "AsyncVLLMInferenceEngine"}
    expected["journald_and_process"] = "APIServer"
    assert procs == {expected.get(style)}


def test_progress_text_glued_in_front_of_a_record(tmp_path, bare):
    """tqdm writes its bar without a newline; the next record is glued to it (and a `\\r` ends each redraw)."""
    bar = "Processed prompts: 100%|██████████| 8/8 [00:01<00:00,  5.12it/s, est. speed input: 81.9 toks/s]"
    glued = [bar + line if i in (3, 4) else line for i, line in enumerate(BASE)]
    assert _rows(_parse(tmp_path, "tqdm", glued)) == _rows(bare)
    redrawn = ["Adding requests:  50%|█████     | 4/8\rAdding requests: 100%|██████████| 8/8 " + BASE[3]]
    stats = _parse(tmp_path, "tqdm_cr", [BASE[0], *redrawn]).stats
    assert [(r["running"], r["generation_tps"]) for r in stats] == [(3, 40.0)]


def test_an_envelope_deep_in_a_line_names_its_process(tmp_path):
    """Any text (here 120 characters) before a process prefix and the envelope: the record and its process."""
    line = "x" * 120 + " (EngineCore_DP1 pid=9) " + BASE[3]
    parsed = _parse(tmp_path, "deep", [line])
    assert [(r["proc"], r["running"], r["waiting"]) for r in parsed.stats] == [("EngineCore_DP1", 3, 1)]


def test_v0_spec_line_with_the_doubled_tokens_word(tmp_path):
    """vLLM 0.4.1 – 0.5.2 printed `Number of draft tokens tokens: N` (vllm/engine/metrics.py; fixed in 0.5.3 by
    vLLM #6470): the drafted count is read, drafts = drafted / K."""
    line = (
        "INFO 06-20 10:00:00 metrics.py:341] Speculative metrics: Draft acceptance rate: 0.642, System efficiency: "
        "0.598, Number of speculative tokens: 3, Number of accepted tokens: 8547, Number of draft tokens tokens: "
        "13311, Number of emitted tokens tokens: 10616."
    )
    parsed = _parse(tmp_path, "v0spec", [line])
    assert parsed.unparsed == []
    row = parsed.spec[0]
    assert (row["accepted"], row["drafted"], row["spec_tokens"], row["drafts"], row["cumulative"]) == (
        8547,
        13311,
        3,
        4437,
        True,
    )
    assert row["acceptance_rate_printed"] == pytest.approx(64.2)
