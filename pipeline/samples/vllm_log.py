"""The focal host's vLLM server log over a sample timeline, with the facts it must yield.

    from pipeline.samples.vllm_log import write_vllm_log
    copy = timeline.copy(last_epoch=4)
    truth = write_vllm_log(timeline, copy, out / "vllm" / "vllm.log")
    truth.acceptance[BUILD_RAW]["drafts"], truth.stability[BUILD_RAW]["ooms"], ...

The log is what `docker logs` of the host's vLLM container shows, in the V1 format of docs/sources.md
(vLLM logs): every line carries its process, `(APIServer pid=1)` or `(EngineCore_DP0 pid=N)` (and
`(Worker_TP<i> pid=N)` for the two tensor-parallel workers); the API server prints the stats and
spec-decode lines; vLLM's formatter repeats the whole header on every line of a multi-line message and
joins them with ``\\r\\n``, so traceback lines end in ``\\r``. Times are UTC and carry no year (the
timeline is in 2026: a run gives the source ``year = 2026``).

It follows the copy's timeline: the engine runs through the host's build windows (builds.toml), one
start cycle per build, at its builds.toml boundary, whose start lines state the build (`START_ARGS`; the
vLLM version: 0.20 for the V1 runner without speculative
decoding, so no spec-decode lines; 0.23 with DSpark, K = 5), and prints busy stats windows while the
escrows of the copy run (idle windows log at DEBUG and are absent). In the raw_logprobs build the
engine dies once of an out-of-memory error on a long prefill (docs/sources.md, fatal errors: the
worker's traceback, the engine core's fatal error whose last line carries the CUDA OOM, the API
server's `EngineDeadError` under another pid, the engine core's uncaught traceback without header)
and the container restarts it; it dies while it serves the copy's latest empty answer of that build,
which the answer-integrity table then explains by the death. The truth counts one death and one OOM.
A build deployed within `TAIL` after the last busy window (the bundled copy's `BUILD_CHUNK`) is logged after
it: its start and, at its PoC batch, a PoC window that yields no nonce.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from .host_copy import copied_nonces
from .logs import LogTruth, VllmFile
from .spec import BUILD_CHUNK, BUILD_FIX, BUILD_RAW, BUILD_V1, MODEL

# The vLLM version and speculative config of each build (a build not listed runs the newest).
VERSIONS = {BUILD_V1: "0.20.1", BUILD_RAW: "0.23.1", BUILD_FIX: "0.23.1", BUILD_CHUNK: "0.23.1"}
DSPARK = "SpeculativeConfig(method='dspark', num_spec_tokens=5)"
SPEC_CONFIGS = {BUILD_V1: None, BUILD_RAW: DSPARK, BUILD_FIX: DSPARK, BUILD_CHUNK: DSPARK}
# What each build's start lines state (docs/sources.md, start-up): the operator's non-default arguments
# (the raw_logprobs build runs vLLM's default logprobs_mode, so its arguments do not name it) and the
# engine config line's fields of a V1 start of these versions.
ARGS = {
    "model_tag": MODEL,
    "host": "0.0.0.0",
    "port": 5000,
    "model": MODEL,
    "trust_remote_code": True,
    "max_model_len": 131072,
    "tensor_parallel_size": 2,
    "gpu_memory_utilization": 0.92,
    "max_num_batched_tokens": 8192,
}
DSPARK_ARGS = {"speculative_config": {"method": "dspark", "num_speculative_tokens": 5}}
START_ARGS = {
    BUILD_V1: ARGS,
    BUILD_RAW: ARGS | DSPARK_ARGS,
    BUILD_FIX: ARGS | DSPARK_ARGS | {"logprobs_mode": "processed_logprobs"},
    BUILD_CHUNK: ARGS | DSPARK_ARGS | {"max_num_batched_tokens": 2048},
}
ENGINE_CONFIG = (
    f"tokenizer='{MODEL}', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, tokenizer_revision=None, "
    "trust_remote_code=True, dtype=torch.bfloat16, max_seq_len=131072, download_dir=None, load_format=auto, "
    "tensor_parallel_size=2, pipeline_parallel_size=1, data_parallel_size=1, disable_custom_all_reduce=False, "
    "quantization=fp8, enforce_eager=False, kv_cache_dtype=auto, device_config=cuda, "
    "structured_outputs_config=StructuredOutputsConfig(backend='auto', disable_fallback=False, "
    "disable_any_whitespace=False, disable_additional_properties=False, reasoning_parser=''), "
    "observability_config=ObservabilityConfig(show_hidden_metrics_for_version=None, otlp_traces_endpoint=None, "
    "collect_detailed_traces=None), "
)
# Per-position acceptance rates drawn per window: a mean acceptance length near 2.9 at K = 5.
ACCEPTANCE = (0.08, 0.66)
READY_SECONDS = {BUILD_V1: 214, BUILD_RAW: 322, BUILD_FIX: 318, BUILD_CHUNK: 316}
# A build deployed within TAIL after the last busy window is logged too: its start and, for the builds listed
# here, a mining PoC window at this batch (its `PoC /init/generate` line) that yields no nonce, POC_AFTER
# seconds after ready.
TAIL = timedelta(hours=6)
POC_BATCH = {BUILD_CHUNK: 8}
POC_AFTER = 600
RESTART_READY_SECONDS = 305  # the container's restart after the OOM death
BURSTS = (0.1, 0.35, 0.6, 0.85)  # where in each escrow's span the engine logs busy windows
BURST_WINDOWS = 12  # 10-second windows per burst
OOM_BURST, OOM_WINDOW = 1, 6  # the death: in this burst of the OOM escrow, after this many windows
API_PID = 1
SITE = "/usr/local/lib/python3.12/dist-packages"
OOM_TEXT = (
    "CUDA out of memory. Tried to allocate 3.02 GiB. GPU 0 has a total capacity of 94.97 GiB of which "
    "2.19 GiB is free. Including non-PyTorch memory, this process has 92.76 GiB memory in use. Of the "
    "allocated memory 88.41 GiB is allocated by PyTorch, and 1.87 GiB is reserved by PyTorch but unallocated."
)


def write_vllm_log(timeline, copy, path: str | Path) -> LogTruth:
    """Write the focal host's vLLM log over `copy` (`timeline.copy(...)`); the truth is per build."""
    last_epoch = copy.last_epoch
    rng = random.Random(f"{timeline.spec.seed}:vllm-log")
    truth = LogTruth(host=timeline.focal_host, executor="")
    windows = _busy_windows(timeline, last_epoch)
    if not windows:
        raise ValueError(f"epoch {last_epoch}: the copy has no escrow activity to log")
    builds = sorted(w.since for w in timeline.builds if w.host == timeline.focal_host)

    def build_at(at: datetime) -> str:
        return timeline.cast.focal_build(at.timestamp())

    first = windows[0]
    f = VllmFile(
        truth,
        rng,
        "0.0.0",
        first - timedelta(seconds=3600 + 17),
        proc="EngineCore_DP0",
        api_pid=API_PID,
        repeat_header=True,
        build_at=build_at,
        stats_proc="APIServer",
        model=MODEL,
        acceptance=ACCEPTANCE,
    )
    switches = [
        datetime.fromtimestamp(since, UTC) for since in builds if f.t < datetime.fromtimestamp(since, UTC) < windows[-1]
    ]
    _start(f, rng, build_at(f.t), READY_SECONDS.get(build_at(f.t), 300))
    death = _death_time(timeline, copy, build_at)
    if death is not None:  # the engine is busy up to its death
        windows = sorted(set(windows) | {death - timedelta(seconds=10 * k) for k in range(1, BURST_WINDOWS // 2)})
    for at in windows:
        while switches and switches[0] <= at + timedelta(seconds=10):
            _redeploy(f, rng, switches.pop(0))
        if death is not None and at >= death:
            f.t = max(f.t, death)
            _oom_death(f, rng)
            f.advance(40)
            _start(f, rng, build_at(f.t), RESTART_READY_SECONDS)
            death = None
        if at < f.t:  # the engine was not ready yet: nothing to log in this window
            continue
        f.t = at
        f.window(preemptions=_preemptions(rng, build_at(at)))
        if rng.random() < 0.3:
            f.raw(
                f"(APIServer pid={API_PID}) INFO:     172.18.0.1:{rng.randint(32768, 60999)} - "
                '"POST /v1/chat/completions HTTP/1.1" 200 OK'
            )
    for since in (datetime.fromtimestamp(s, UTC) for s in builds):
        if windows[-1] < since <= windows[-1] + TAIL:  # the next build, deployed after the copy was taken
            build = _redeploy(f, rng, since)
            if build in POC_BATCH:  # one forward is batch x 1024 tokens: more than its chunk holds, no nonce
                f.advance(POC_AFTER)
                f.poc(0, batch_size=POC_BATCH[build])
    f.write(Path(path))
    truth.files["vllm"] = Path(path)
    assert f.first is not None
    truth.spans.append((f.first, f.ended()))
    return truth


def _redeploy(f: VllmFile, rng: random.Random, since: datetime) -> str:
    """The host deploys its next build: the running one shuts down a minute before, the next starts at its
    builds.toml boundary `since`; its label."""
    _shutdown(f, max(f.t + timedelta(seconds=1), since - timedelta(seconds=55)))
    f.t = since
    build = f.build_at(f.t)
    _start(f, rng, build, READY_SECONDS.get(build, 300))
    return build


def _busy_windows(timeline, last_epoch: int) -> list[datetime]:
    """Start times of the busy stats windows: bursts inside each copied escrow's span, in time order."""
    spec = timeline.spec
    out = []
    for plan in timeline.escrows:
        if not last_epoch - 2 <= plan.epoch_id <= last_epoch:
            continue
        upto = copied_nonces(plan, spec, last_epoch)
        begin, end = plan.nonce_times[0], plan.nonce_times[upto - 1]
        length = BURST_WINDOWS * 10
        for fraction in BURSTS:
            start = min(begin + int(fraction * (end - begin)), end - length)
            if start < begin:
                continue  # a span too short for a burst
            out += [datetime.fromtimestamp(start + 10 * k, UTC) for k in range(BURST_WINDOWS)]
    return sorted(set(out))


def _death_time(timeline, copy, build_at) -> datetime | None:
    """When the engine dies: as the latest empty answer the host served under the raw_logprobs build
    starts (an answer cut off by the crash), else `OOM_WINDOW` windows into burst `OOM_BURST` of the
    last copied escrow run wholly by that build; None when neither exists."""
    answers = copy.truth.answers
    if answers is not None and answers.height:
        starts = (
            answers.filter(pl.col("empty"))
            .join(copy.truth.inferences, on=["epoch_id", "escrow_id", "inference_id"])
            .filter(pl.col("executor") == timeline.focal_host)["started_at"]
            .to_list()
        )
        served = [datetime.fromtimestamp(t, UTC) for t in starts]
        served = [t for t in served if build_at(t) == BUILD_RAW]
        if served:
            return max(served)
    spec, last_epoch = timeline.spec, copy.last_epoch
    chosen = None
    for plan in timeline.escrows:
        if not last_epoch - 2 <= plan.epoch_id <= last_epoch:
            continue
        upto = copied_nonces(plan, spec, last_epoch)
        begin, end = plan.nonce_times[0], plan.nonce_times[upto - 1]
        if all(build_at(datetime.fromtimestamp(t, UTC)) == BUILD_RAW for t in (begin, end)):
            if end - begin >= BURST_WINDOWS * 10:
                chosen = (begin, end)
    if chosen is None:
        return None
    begin, end = chosen
    start = min(begin + int(BURSTS[OOM_BURST] * (end - begin)), end - BURST_WINDOWS * 10)
    return datetime.fromtimestamp(start + 10 * OOM_WINDOW, UTC)


def _preemptions(rng: random.Random, build: str) -> int:
    """The raw_logprobs build runs short of KV cache now and then; the others never preempt."""
    return rng.choice([1, 2, 4]) if build == BUILD_RAW and rng.random() < 0.04 else 0


def _start(f: VllmFile, rng: random.Random, build: str, ready_after: int) -> None:
    """One start cycle of the build's vLLM: the engine core and both workers get new pids."""
    f.version = VERSIONS.get(build, VERSIONS[BUILD_FIX])
    f.spec_config = SPEC_CONFIGS.get(build, DSPARK)
    f.start_args, f.engine_config = START_ARGS.get(build, START_ARGS[BUILD_FIX]), ENGINE_CONFIG
    f.v2_runner = build != BUILD_V1  # the DSpark builds run vLLM's V2 model runner (their labels say "V2")
    f.pid = rng.randint(120, 400)
    f.start(ready_after=ready_after)


def _shutdown(f: VllmFile, at: datetime) -> None:
    """A deliberate stop (the host deploys its next build): SIGTERM, uvicorn shuts down."""
    f.t = at
    f.log("INFO", "launcher.py:110", "Shutting down FastAPI HTTP server.", proc="APIServer")
    _uvicorn_shutdown(f)


def _uvicorn_shutdown(f: VllmFile) -> None:
    """uvicorn's shutdown lines of the API server."""
    api = f"(APIServer pid={API_PID}) "
    for text in (
        "INFO:     Shutting down",
        "INFO:     Waiting for application shutdown.",
        "INFO:     Application shutdown complete.",
        f"INFO:     Finished server process [{API_PID}]",
    ):
        f.raw(api + text)


def _frames(*calls: tuple[str, int, str, str]) -> list[str]:
    """Traceback lines of (file, line, function, source line) frames; relative files are under site-packages."""
    lines = []
    for file, line, function, code in calls:
        path = file if file.startswith("/") else f"{SITE}/{file}"
        lines += [f'  File "{path}", line {line}, in {function}', f"    {code}"]
    return lines


def _oom_death(f: VllmFile, rng: random.Random) -> None:
    """The V1 engine's death by CUDA OOM with two tensor-parallel workers (docs/sources.md, fatal errors)."""
    f.advance(rng.randint(2, 7))
    build = f.build_at(f.t)
    workers = {f"Worker_TP{i}": f.pid + 66 + i for i in range(2)}
    req = f"chatcmpl-{rng.getrandbits(128):032x}"
    _worker_oom(f, workers["Worker_TP0"])
    engine_frames, root = _engine_core_death(f, rng, req)
    f.died(build, oom=True)
    f.truth.events["fatal"] = f.truth.events.get("fatal", 0) + 1
    for name, pid in workers.items():
        f.raw(
            f"({name} pid={pid}) INFO {f.t:%m-%d %H:%M:%S} [multiproc_executor.py:558] Parent process exited, "
            "terminating worker"
        )
    _api_server_errors(f)
    # The engine core's uncaught exception, printed by multiprocessing itself: no logger, no header.
    core = f"(EngineCore_DP0 pid={f.pid}) "
    for line in [
        "Process EngineCore_DP0:",
        "Traceback (most recent call last):",
        *_frames(("/usr/lib/python3.12/multiprocessing/process.py", 314, "_bootstrap", "self.run()")),
        *engine_frames,
        root,
    ]:
        f.raw(core + line)
    _uvicorn_shutdown(f)


def _worker_oom(f: VllmFile, pid: int) -> None:
    """The worker that ran out of memory logs its exception first, under its own process and pid."""
    saved_proc, saved_pid = f.proc, f.pid
    f.proc, f.pid = "Worker_TP0", pid
    f.log(
        "ERROR",
        "multiproc_executor.py:796",
        "WorkerProc hit an exception.",
        more=[
            "Traceback (most recent call last):",
            *_frames(
                ("vllm/v1/executor/multiproc_executor.py", 791, "worker_busy_loop", "output = func(*args, **kwargs)"),
                (
                    "vllm/v1/worker/gpu_worker.py",
                    586,
                    "execute_model",
                    "output = self.model_runner.execute_model(scheduler_output, intermediate_tensors)",
                ),
                ("vllm/v1/worker/gpu_model_runner.py", 2483, "execute_model", "model_output = self.model("),
            ),
            "                   ^^^^^^^^^^^",
            *_frames(
                ("torch/nn/modules/module.py", 1775, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
                (
                    "vllm/model_executor/layers/fused_moe/layer.py",
                    1911,
                    "forward_impl",
                    "final_hidden_states = self.quant_method.apply(",
                ),
            ),
            f"torch.OutOfMemoryError: {OOM_TEXT}",
        ],
    )
    f.proc, f.pid = saved_proc, saved_pid


def _engine_core_death(f: VllmFile, rng: random.Random, req: str) -> tuple[list[str], str]:
    """The engine core dumps its input and dies; the root cause is in its last line. Its frames and root
    cause, which multiprocessing prints again."""
    f.log(
        "ERROR",
        "dump_input.py:69",
        f"Dumping input data for V1 LLM engine (v{f.version}) with config: "
        f"model='{MODEL}', speculative_config={f.spec_config}, tensor_parallel_size=2, seed=0, ",
    )
    f.log(
        "ERROR",
        "dump_input.py:76",
        "Dumping scheduler output for model execution: SchedulerOutput("
        f"scheduled_new_reqs=[NewRequestData(req_id={req}, prompt_token_ids_len=96311, ...)], "
        f"num_scheduled_tokens={{{req}: 8192}}, total_num_scheduled_tokens=8192)",
    )
    f.log(
        "ERROR",
        "dump_input.py:79",
        "Dumping scheduler stats: SchedulerStats(num_running_reqs=11, "
        f"num_waiting_reqs=3, kv_cache_usage={rng.randint(850, 990) / 1000})",
    )
    root = f"RuntimeError: Worker failed with error '{OOM_TEXT}', please check the stack trace above for the root cause"
    engine_frames = _frames(
        ("vllm/v1/engine/core.py", 711, "run_engine_core", "engine_core.run_busy_loop()"),
        ("vllm/v1/engine/core.py", 738, "run_busy_loop", "self._process_engine_step()"),
        ("vllm/v1/engine/core.py", 764, "_process_engine_step", "outputs, model_executed = self.step_fn()"),
        ("vllm/v1/engine/core.py", 292, "step", "model_output = self.execute_model_with_error_logging("),
        ("vllm/v1/engine/core.py", 278, "execute_model_with_error_logging", "raise err"),
        ("vllm/v1/executor/multiproc_executor.py", 268, "collective_rpc", "result = get_response(w, dequeue_timeout,"),
        ("vllm/v1/executor/multiproc_executor.py", 251, "get_response", "raise RuntimeError("),
    )
    f.log(
        "ERROR",
        "core.py:720",
        "EngineCore encountered a fatal error.",
        more=["Traceback (most recent call last):", *engine_frames, root],
    )
    return engine_frames, root


def _api_server_errors(f: VllmFile) -> None:
    """The API server learns of it a moment later, under its own pid."""
    f.advance(1)
    client = _frames(
        ("vllm/v1/engine/async_llm.py", 439, "output_handler", "outputs = await engine_core.get_output_async()"),
        ("vllm/v1/engine/core_client.py", 846, "get_output_async", "raise self._format_exception(outputs) from None"),
    )
    dead = (
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) "
        "for the root cause."
    )
    f.log(
        "ERROR",
        "async_llm.py:480",
        "AsyncLLM output_handler failed.",
        proc="APIServer",
        more=["Traceback (most recent call last):", *client, dead],
    )
    f.log(
        "ERROR",
        "serving_chat.py:1145",
        "Error in chat completion stream generator.",
        proc="APIServer",
        more=[
            "Traceback (most recent call last):",
            *_frames(
                (
                    "vllm/entrypoints/openai/serving_chat.py",
                    574,
                    "chat_completion_stream_generator",
                    "async for res in result_generator:",
                ),
                ("vllm/v1/engine/async_llm.py", 387, "generate", "out = q.get_nowait() or await q.get()"),
            ),
            *client,
            dead,
        ],
    )
