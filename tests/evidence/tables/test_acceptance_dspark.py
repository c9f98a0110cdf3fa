"""DSpark's K and its draft block (docs/sources.md, vLLM logs, DSpark): a DSpark build whose per-position lists are not
as long as the checkpoint's draft block is flagged by the acceptance table.

The spec lines are the two quoted from a DeepSeek-V4-Flash-0731 deployment (`dspark_block_size: 5`) in a comment of
vllm-project/vllm pull request #41834 (2026-08-01): K = 7 collapses acceptance (mean length 1.31), K = 5 is healthy
(2.74). The comment quotes the throughputs only; the token counts here are those throughputs over the 10-second window.
"""

from __future__ import annotations

import pytest

from pipeline.core.address import sample_address
from pipeline.evidence import compute
from pipeline.ingest.logs import ingest_logs
from pipeline.warehouse.database import open_for_write

HOST = sample_address("dspark")
MODEL = "deepseek-ai/DeepSeek-V4-Flash-0731"
SPEC_LINES = {
    7: "SpecDecoding metrics: Mean acceptance length: 1.31, Accepted throughput: 13.40 tokens/s, Drafted throughput: "
    "302.37 tokens/s, Accepted: 134 tokens, Drafted: 3024 tokens, Per-position acceptance rate: 0.181, 0.067, 0.039, "
    "0.014, 0.009, 0.000, 0.000, Avg Draft acceptance rate: 4.4%",
    5: "SpecDecoding metrics: Mean acceptance length: 2.74, Accepted throughput: 75.04 tokens/s, Drafted throughput: "
    "216.25 tokens/s, Accepted: 750 tokens, Drafted: 2162 tokens, Per-position acceptance rate: 0.579, 0.447, 0.316, "
    "0.237, 0.158, Avg Draft acceptance rate: 34.7%",
}


def _log(k: int) -> list[str]:
    return [
        "(APIServer pid=1) INFO 08-01 10:00:00 [api_server.py:1885] vLLM API server version 0.26.0",
        f"(EngineCore_DP0 pid=7) INFO 08-01 10:00:05 [core.py:93] Initializing a V1 LLM engine (v0.26.0) with config: "
        f"model='{MODEL}', speculative_config=SpeculativeConfig(method='dspark', model='{MODEL}', "
        f"num_spec_tokens={k}), tokenizer='{MODEL}', seed=0",
        "(APIServer pid=1) INFO:     Application startup complete.",
        f"(APIServer pid=1) INFO 08-01 10:05:00 [v1/spec_decode/metrics.py:88] {SPEC_LINES[k]}",
    ]


@pytest.mark.parametrize(("k", "off"), [(7, True), (5, False)])
def test_a_dspark_build_whose_k_is_not_the_block_size_is_flagged(tmp_path, k, off):
    path = tmp_path / "vllm.log"
    path.write_text("\n".join(_log(k)) + "\n")
    con = open_for_write(tmp_path / "w.duckdb")
    try:
        ingest_logs(con, [path], host=HOST, kind="vllm", year=2026)
        result = compute("acceptance", con, host=HOST, command="test")
    finally:
        con.close()
    row = result.rows.row(0, named=True)
    assert (row["k"], row["block_size"], row["k_off_block"]) == (k, 5, off)
    flagged = [n for n in result.notes if "draft block size 5" in n]
    assert len(flagged) == int(off)
    assert round(row["mean_acceptance_length"], 2) == (1.31 if k == 7 else 2.74)
