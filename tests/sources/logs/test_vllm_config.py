"""What vLLM start lines state: real lines of several versions (tests/data/vllm_start_lines/, each with
its source noted) read into config facts, and their start cycles fingerprinted in a warehouse."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline.core.address import sample_address
from pipeline.sources.logs.vllm_config import line_facts
from tests.helpers import con_frame

DATA = Path(__file__).parents[2] / "data" / "vllm_start_lines"
HOST = sample_address("start")


def facts(name: str, line: int = 1) -> dict[str, str]:
    text = (DATA / name).read_text(encoding="utf-8").splitlines()[line - 1]
    msg = text.split("] ", 1)[1]  # after the envelope's `[file.py:123]` / `file.py:123]`
    return {key: value for _, key, value in line_facts(msg)}


def test_a_v0_start_line_states_version_parallelism_and_no_speculation():
    f = facts("v066_v0_engine.log")
    assert f["vllm_version"] == "0.6.6"
    assert f["model"] == "/workspace/models/models--Qwen--Qwen2-0.5B"
    assert (f["tensor_parallel_size"], f["pipeline_parallel_size"]) == ("1", "2")
    assert (f["spec_method"], f["quantization"], f["kv_cache_dtype"]) == ("none", "None", "auto")
    assert (f["dtype"], f["max_seq_len"], f["chunked_prefill_enabled"]) == ("torch.bfloat16", "131072", "True")
    assert "spec_tokens" not in f and "compilation_config" not in f  # the cut nested config states nothing


def test_a_development_build_names_its_full_version():
    f = facts("v064dev_v0_engine.log")
    assert f["vllm_version"] == "0.6.4.post2.dev395+g02222a02.d20241217"
    assert (f["dtype"], f["enforce_eager"], f["trust_remote_code"]) == ("torch.float16", "True", "True")
    assert f["kv_cache_dtype"] == "auto"  # followed by two spaces as printed


def test_the_speculative_config_gives_method_and_k_not_the_draft_path():
    f = facts("v0101dev_eagle3.log")
    assert (f["spec_method"], f["spec_tokens"]) == ("eagle3", "3")
    assert f["vllm_version"] == "0.10.1.dev2081+gc44ef9fc0.d20250930"
    assert f["data_parallel_size"] == "1" and f["enable_prefix_caching"] == "True"


def test_quantization_of_a_data_parallel_engine():
    f = facts("v01011_fp8_dp.log")
    assert (f["vllm_version"], f["quantization"], f["spec_method"]) == ("0.10.1.1", "fp8", "none")


def test_non_default_args_name_what_the_operator_passed_but_not_where_it_listens():
    server, args = facts("v0141_nondefault_args.log", 1), facts("v0141_nondefault_args.log", 2)
    assert server == {"vllm_version": "0.14.1"}
    model = "/root/.cache/modelscope/hub/models/LLM-Research/Meta-Llama-3___1-8B-Instruct"
    assert args == {"model": model, "kv_cache_dtype": "bfloat16"}  # model_tag, host and port left out


def test_start_up_facts():
    assert facts("v010_model_loading.log", 2) == {"model_load_gib": "15.3341", "model_load_s": "135.263237"}
    assert line_facts("GPU KV cache size: 1,160,160 tokens") == [("startup", "kv_cache_tokens", "1160160")]
    assert line_facts("Maximum concurrency for 131,072 tokens per request: 8.85x") == [
        ("startup", "concurrency_tokens", "131072"),
        ("startup", "max_concurrency", "8.85"),
    ]
    assert line_facts("non-default args: {'model': 'x', broken") == []  # unreadable: states nothing


# The PoC lines as gonka-ai/gonka-vllm-plugins src/gonka_poc/poc/routes.py @04ae0271 writes them, each test's
# message built from the format string with upstream's own formatting (the f-string's spec applied here).
def test_a_poc_window_end_is_read_as_upstream_prints_it():
    # routes.py @04ae0271, `_generation_loop`: f"PoC stopped: {stats['total_processed']} nonces in {elapsed_min:.2f}min"
    msg = f"PoC stopped: {642} nonces in {3.1:.2f}min"
    assert msg == "PoC stopped: 642 nonces in 3.10min"  # no space before `min`
    assert line_facts(msg) == [("startup", "poc_nonces", "642"), ("startup", "poc_minutes", "3.10")]
    assert line_facts("PoC stopped: 6000 nonces in 2.5 min")[1] == ("startup", "poc_minutes", "2.5")  # older text
    assert line_facts("PoC stopped: 642 nonces in 3.10minutes later") == []  # not a minutes unit


def test_the_mining_path_states_its_batch():
    # routes.py @04ae0271, `init_generate`: f"PoC /init/generate: block_hash={body.block_hash} "
    # f"block_height={body.block_height} node={body.node_id}/{body.node_count} "
    # f"group={body.group_id}/{body.n_groups} batch_size={body.batch_size} "
    # f"url={bool(body.url)} poc_stronger_rng={body.poc_stronger_rng}"
    init = (
        f"PoC /init/generate: block_hash={'0xabc'} block_height={1204400} node={0}/{2} group={0}/{1} "
        f"batch_size={32} url={True} poc_stronger_rng={False}"
    )
    assert line_facts(init) == [("startup", "poc_batch_size", "32")]
    # routes.py @04ae0271, `generate`: f"PoC /generate: block_hash={body.block_hash} "
    # f"block_height={body.block_height} node={body.node_id}/{body.node_count} "
    # f"batch_size={body.batch_size} nonces={len(body.nonces)} "
    # f"wait={body.wait} validation={bool(body.validation)} url={bool(body.url)} poc_stronger_rng={...}"
    generate = (
        f"PoC /generate: block_hash={'0xabc'} block_height={1204400} node={1}/{2} batch_size={16} nonces={1000} "
        f"wait={False} validation={False} url={True} poc_stronger_rng={False}"
    )
    assert line_facts(generate) == [("startup", "poc_batch_size", "16")]


def test_the_mining_path_batch_of_the_decode_poc_release():
    # routes.py @a6a28429 (the decode-PoC release: poc_stronger_rng accepted but no longer printed),
    # `init_generate`: f"PoC /init/generate: block_hash={body.block_hash} block_height={body.block_height} "
    # f"node={body.node_id}/{body.node_count} group={body.group_id}/{body.n_groups} batch_size={body.batch_size} "
    # f"url={bool(body.url)}"
    init = f"PoC /init/generate: block_hash={'0xabc'} block_height={1204400} node={0}/{2} group={0}/{1} "
    assert line_facts(init + f"batch_size={128} url={False}") == [("startup", "poc_batch_size", "128")]
    # `generate`: f"PoC /generate: block_hash=… block_height=… node=…/… batch_size={body.batch_size} "
    # f"nonces={len(body.nonces)} wait={body.wait} validation={bool(body.validation)} url={bool(body.url)}"
    generate = (
        f"PoC /generate: block_hash={'0xabc'} block_height={1204400} node={1}/{2} batch_size={0} nonces={1000} "
        f"wait={True} validation={True} url={False}"
    )
    assert line_facts(generate) == [("startup", "poc_batch_size", "0")]  # 0: the plugin's AUTO, as printed
    # its wait path prints no batch: "PoC /generate decode: %d nonces x %d steps in %.2fs (%.2f/s)"
    decode = "PoC /generate decode: {:d} nonces x {:d} steps in {:.2f}s ({:.2f}/s)"  # the same specs
    assert line_facts(decode.format(1000, 257, 60.0, 16.67)) == []
    # the mining loop's end, unchanged: f"PoC stopped: {n} nonces in {elapsed_min:.2f}min"; a long window, 0 nonces
    assert line_facts(f"PoC stopped: {123456} nonces in {125.0:.2f}min")[1] == ("startup", "poc_minutes", "125.00")
    assert line_facts(f"PoC stopped: {0} nonces in {0.004:.2f}min") == [
        ("startup", "poc_nonces", "0"),
        ("startup", "poc_minutes", "0.00"),
    ]


def test_the_wait_path_states_its_batch():
    # routes.py @04ae0271, `generate` (wait=True): f"PoC /generate: {total_nonces} nonces, batch_size={B}, chunks={C}"
    assert line_facts(f"PoC /generate: {1000} nonces, batch_size={8}, chunks={125}") == [
        ("startup", "poc_batch_size", "8")
    ]
    # routes.py @04ae0271: f"PoC /generate completed: {total_nonces} nonces in {elapsed:.2f}s ({rate:.0f}/s)"
    assert line_facts(f"PoC /generate completed: {1000} nonces in {12.0:.2f}s ({83.3:.0f}/s)") == []


def test_the_v2_runner_line_states_the_runner():
    # vLLM's worker (gonka-ai/vllm vllm/v1/worker/gpu_worker.py @4ce2d014: `if self.use_v2_model_runner:
    # logger.info_once("Using V2 Model Runner")`) logs it whenever the V2 runner is selected: by
    # VLLM_USE_V2_MODEL_RUNNER=1, or with it unset by default for the architectures of vllm/config/vllm.py's
    # DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (Qwen3ForCausalLM from v0.22.0, Llama and Mistral from v0.23.0)
    assert line_facts("Using V2 Model Runner") == [("startup", "model_runner", "V2")]
    assert line_facts("Using V1 Model Runner is not a line vLLM prints") == []


@pytest.fixture
def cycles(tmp_path, new_warehouse):
    """The real start lines ingested as one host's logs (year 2025), then its engine_cycles."""
    from pipeline.ingest.logs import ingest_logs

    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("v066_v0_engine.log", "v0101dev_eagle3.log", "v01011_fp8_dp.log", "v0141_nondefault_args.log"):
        shutil.copy(DATA / name, logs / name)
    # the eagle3 build restarted with the same config: a second start of it, a month later
    again = (DATA / "v0101dev_eagle3.log").read_text(encoding="utf-8").replace("10-30 14:20:52", "11-30 09:00:00")
    (logs / "v0101dev_eagle3_again.log").write_text(again, encoding="utf-8")
    con = new_warehouse(tmp_path / "w.duckdb")
    try:
        ingest_logs(con, [logs], host=HOST, kind="vllm", year=2025)
        yield con_frame(con, "SELECT * FROM engine_cycles ORDER BY started_at")
    finally:
        con.close()


def test_real_start_lines_fingerprint_by_what_they_state(cycles):
    dev = "0.10.1.dev2081+gc44ef9fc0.d20250930"
    assert cycles["vllm_version"].to_list() == ["0.6.6", "0.14.1", "0.10.1.1", dev, dev]
    prints = cycles["fingerprint"].to_list()
    assert len(set(prints[:4])) == 4  # four configurations
    assert prints[3] == prints[4]  # the same build started twice: one fingerprint, one build segment
    v0141 = json.loads(cycles["config"][1])
    # the API server's lines before the engine's start line belong to its cycle
    assert v0141["kv_cache_dtype"] == "bfloat16" and v0141["vllm_version"] == "0.14.1"
    assert len(cycles["lines"][1]) == 3  # it rests on the version, args and engine config lines
