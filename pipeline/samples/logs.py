"""Deterministic engine/validator logs, /metrics scrapes and PoC results, with the facts they must yield.

    from pipeline.samples.logs import write_log_samples
    truth = write_log_samples(directory, seed=5)
    # directory/vllm/ (rotated + gzipped + live logs), directory/metrics/, directory/dapi.log,
    # directory/poc/, directory/builds.toml; truth.acceptance["A"]["drafts"], ...

Lines follow the real formats of docs/sources.md (vLLM, validator and PoC lines) by vLLM version: 0.8.5 (MAL without
the +1), 0.9.1 (``Engine 000:`` stats), 0.10.2 (throughput fields, ANSI-coloured
``(EngineCore_DP0 pid=N)`` prefixes) and 0.11.1 (``Preemptions:`` printed when > 0,
relative source paths, coloured levels). The scenario has a December → January
rollover inside one file, log rotation (``vllm.log.1.gz`` then ``vllm.log``), DEBUG
stats lines during idle periods, a fatal out-of-memory crash with its traceback, an
engine death with a worker death, restarts with time-to-ready, PoC windows, and one
line of an unknown future format. Window sizes are chosen so that the printed
2-decimal MAL and 3-decimal per-position rates are exact, so drafts recovered from
the log equal the true drafts and every evidence number can be asserted exactly.
"""

from __future__ import annotations

import gzip
import json
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pipeline.core.address import sample_address

UTC = UTC
HOST = sample_address("l0gh0st")
EXECUTOR = sample_address("execut0r")
K = 5
BUILDS = [  # (host, label, since)
    (HOST, "A", datetime(2025, 12, 31, 0, 0, tzinfo=UTC)),
    (HOST, "B", datetime(2026, 1, 2, 0, 0, tzinfo=UTC)),
    (HOST, "C", datetime(2026, 1, 4, 0, 0, tzinfo=UTC)),
    (EXECUTOR, "E-old", datetime(2025, 12, 1, 0, 0, tzinfo=UTC)),
    (EXECUTOR, "E-new", datetime(2026, 1, 3, 0, 0, tzinfo=UTC)),
]
SIMILARITY_THRESHOLD = 0.94  # Qwen3-235B-A22B-FP8
MODEL = "Qwen/Qwen3-235B-A22B-FP8"
ESC = "\x1b"


def build_of(host: str, at: datetime) -> str | None:
    label = None
    for h, name, since in sorted(BUILDS, key=lambda b: b[2]):
        if h == host and at >= since:
            label = name
    return label


def _host_build(at: datetime) -> str:
    build = build_of(HOST, at)
    assert build is not None, f"no build of {HOST} at {at}"  # BUILDS covers every time the samples log
    return build


@dataclass
class LogTruth:
    host: str = HOST
    executor: str = EXECUTOR
    acceptance: dict[str, dict] = field(default_factory=dict)  # build → windows, drafts, drafted, accepted, pos counts
    stability: dict[str, dict] = field(default_factory=dict)  # build → deaths, ooms, restarts, ready, preemptions, kv
    events: dict[str, int] = field(default_factory=dict)  # kind → count
    spans: list[tuple[datetime, datetime]] = field(default_factory=list)  # vLLM file coverage
    stats_lines: int = 0
    spec_lines: int = 0
    unparsed: int = 0
    scores: list[dict] = field(default_factory=list)
    poc: list[dict] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)


def _acc(truth: LogTruth, build: str) -> dict:
    return truth.acceptance.setdefault(
        build, {"windows": 0, "drafts": 0, "drafted": 0, "accepted": 0, "pos": [0] * K, "source": "log"}
    )


def _stab(truth: LogTruth, build: str) -> dict:
    return truth.stability.setdefault(
        build, {"engine_deaths": 0, "ooms": 0, "restarts": 0, "ready": [], "preemptions": None, "max_kv": None}
    )


# the PoC round a mining window's `PoC /init/generate` line names (VllmFile.poc)
POC_BLOCK_HASH, POC_BLOCK_HEIGHT = "0x" + "5c" * 32, 1_204_400


class VllmFile:
    """Lines of one vLLM log file in the format of `version`, with the truth they carry."""

    def __init__(
        self,
        truth: LogTruth,
        rng: random.Random,
        version: str,
        t: datetime,
        proc: str | None = None,
        pid: int = 0,
        colour: bool = False,
        *,
        api_pid: int | None = None,
        repeat_header: bool = False,
        build_at: Callable[[datetime], str] | None = None,
        stats_proc: str | None = "engine",
        model: str = MODEL,
        spec_config: str | None = "SpeculativeConfig(method='eagle3', num_spec_tokens=5)",
        acceptance: tuple[float, float] = (0.2, 0.9),
    ):
        """`api_pid`: the API server's own pid (V1 runs the engine core in another process; default `pid`);
        `repeat_header`: vLLM's formatter puts the whole header on every line of a multi-line message and
        joins them with ``\r\n`` (docs/sources.md, fatal errors); `build_at(t)`: the host's build at a time
        (default the module's BUILDS); `stats_proc`: the process that prints stats and spec lines (the API
        server in V1 logs); `spec_config` None: no speculative decoding, so no spec lines; `acceptance`: the
        range of per-position acceptance rates drawn per window."""
        self.truth, self.rng, self.version, self.t = truth, rng, version, t
        self.proc, self.pid, self.colour = proc, pid, colour
        self.api_pid, self.repeat_header, self.stats_proc = api_pid, repeat_header, stats_proc
        self.build_at = build_at or _host_build
        self.model, self.spec_config, self.acceptance = model, spec_config, acceptance
        self.lines: list[str] = []
        self.first: datetime | None = None
        self.last: datetime | None = None
        self.death: dict | None = None  # the death of the current start cycle, once one was signalled
        # a fuller start (vllm_log.py): the non-default args line, these config fields before `seed=0` in the
        # engine's config line ("k=v, " each), the KV-cache memory and concurrency lines
        self.start_args: dict | None = None
        self.v2_runner = False  # the workers print `Using V2 Model Runner` (vllm/v1/worker/gpu_worker.py)
        self.engine_config = ""

    def ended(self) -> datetime:
        """The time of the last line written."""
        assert self.last is not None, "nothing logged yet"
        return self.last

    # -- envelope ---------------------------------------------------------------------------
    def _v(self) -> tuple[int, int, int]:
        major, minor, patch = (int(x) for x in self.version.split(".")[:3])
        return major, minor, patch

    def _prefix(self, proc: str | None) -> str:
        if proc is None or self._v() < (0, 10, 1):
            return ""
        pid = self.api_pid if proc == "APIServer" and self.api_pid is not None else self.pid
        text = f"({proc} pid={pid})"
        return f"{ESC}[1;36m{text}{ESC}[0;0m " if self.colour else text + " "

    def log(self, level: str, src: str, msg: str, proc: str | None = "engine", more: Sequence[str] = ()) -> None:
        proc = self.proc if proc == "engine" else proc
        stamp = self.t.strftime("%m-%d %H:%M:%S")
        if self.colour and self._v() >= (0, 11, 1):
            head = f"{ESC}[32m{level}{ESC}[0m {ESC}[90m{stamp}{ESC}[0m [{src}] "
        else:
            head = f"{level} {stamp} [{src}] "
        prefix = self._prefix(proc)
        if self.repeat_header:  # every line but the last ends in the \r of the \r\n joint
            lines = [msg, *more]
            self.lines.extend(
                prefix + head + line + ("\r" if i < len(lines) - 1 else "") for i, line in enumerate(lines)
            )
        else:
            self.lines.append(prefix + head + msg)
            self.lines.extend(prefix + line for line in more)
        self.first = self.first or self.t
        self.last = self.t

    def raw(self, line: str) -> None:
        self.lines.append(line)

    def advance(self, seconds: float) -> None:
        self.t += timedelta(seconds=seconds)

    # -- start-up ---------------------------------------------------------------------------
    def start(self, ready_after: int, hang_s: float = 0) -> None:
        """One start cycle; `hang_s`: seconds between the API server's launch lines and the engine's first line
        (a start-up that hangs, e.g. on the hub lookup; gonka-ai/gonka#2198 item 5)."""
        build = self.build_at(self.t)
        # A restart: an initialization after the host's logs already show the engine (docs/evidence.md, stability).
        _stab(self.truth, build)["restarts"] += int(self.first is not None or bool(self.truth.spans))
        self.death = None
        self.log("INFO", "api_server.py:1043", f"vLLM API server version {self.version}", proc="APIServer")
        self.truth.events["launch"] = self.truth.events.get("launch", 0) + 1
        if self.start_args is not None:  # the arguments the operator passed (newer versions print them)
            self.log("INFO", "utils.py:233", f"non-default args: {self.start_args!r}", proc="APIServer")
        self.advance(hang_s)
        self.log(
            "INFO",
            "core.py:61",
            f"Initializing a V1 LLM engine (v{self.version}) with config: model='{self.model}', "
            f"speculative_config={self.spec_config}, {self.engine_config}seed=0",
        )
        self.truth.events["start"] = self.truth.events.get("start", 0) + 1
        if self.v2_runner:  # the worker picks its runner before it loads the model
            self.log("INFO", "gpu_worker.py:500", "Using V2 Model Runner")
        self.advance(ready_after / 2)
        self.log("INFO", "gpu_model_runner.py:1595", "Model loading took 54.2 GiB and 41.118230 seconds")
        if self.start_args is not None:
            self.log("INFO", "gpu_worker.py:298", "Available KV cache memory: 21.43 GiB")
        self.log("INFO", "kv_cache_utils.py:634", "GPU KV cache size: 1,160,160 tokens")
        if self.start_args is not None:
            self.log("INFO", "kv_cache_utils.py:638", "Maximum concurrency for 131,072 tokens per request: 8.85x")
        self.advance(ready_after / 2)
        self.log("INFO", "core.py:159", "init engine (profile, create kv cache, warmup model) took 38.61 seconds")
        self.log("INFO", "api_server.py:1089", "Starting vLLM API server 0 on http://0.0.0.0:5000", proc="APIServer")
        self.log("INFO", "launcher.py:28", "Available routes are:", proc="APIServer")
        self.log("INFO", "launcher.py:36", "Route: /health, Methods: GET", proc="APIServer")
        api = self._prefix("APIServer")
        self.raw(api + "INFO:     Started server process [1]")
        self.raw(api + "INFO:     Waiting for application startup.")
        self.raw(api + "INFO:     Application startup complete.")
        self.truth.events["ready"] = self.truth.events.get("ready", 0) + 1
        _stab(self.truth, build)["ready"].append(ready_after)

    # -- periodic lines ---------------------------------------------------------------------
    def window(self, preemptions: int = 0, level: str = "INFO", idle: bool = False, extra: str = "") -> None:
        """One 10-second window: the stats line and (when drafts happened) the spec line."""
        self.advance(10)
        build = self.build_at(self.t)
        self._stats_line(build, preemptions, level, idle)
        if idle or self.spec_config is None:
            return
        self._spec_line(build, level, extra)

    def _stats_line(self, build: str, preemptions: int, level: str, idle: bool) -> None:
        rng, v = self.rng, self._v()
        running = 0 if idle else rng.randint(4, 40)
        waiting = 0 if idle else rng.randint(0, 6)
        kv_tenths = 0 if idle else rng.randint(50, 950)
        prompt = 0.0 if idle else rng.randint(100, 9000) / 10
        gen = 0.0 if idle else rng.randint(100, 9000) / 10
        src = "v1/metrics/loggers.py:236" if v >= (0, 11, 1) else "loggers.py:118"
        engine = "" if v < (0, 9, 0) else "Engine 000: "
        stats = (
            f"{engine}Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation throughput: {gen:.1f} tokens/s, "
            f"Running: {running} reqs, Waiting: {waiting} reqs"
        )
        if v >= (0, 11, 1) and preemptions > 0:
            stats += f", Preemptions: {preemptions}"
        stats += f", GPU KV cache usage: {kv_tenths / 10:.1f}%, Prefix cache hit rate: {rng.randint(0, 900) / 10:.1f}%"
        self.log(level, src, stats, proc=self.stats_proc)
        self.truth.stats_lines += 1
        s = _stab(self.truth, build)
        if v >= (0, 11, 1):
            s["preemptions"] = (s["preemptions"] or 0) + preemptions
        kv = kv_tenths / 1000
        s["max_kv"] = kv if s["max_kv"] is None else max(s["max_kv"], kv)

    def _spec_line(self, build: str, level: str, extra: str) -> None:
        rng, v = self.rng, self._v()
        drafts = rng.choice([100, 200, 500, 1000])
        low, high = self.acceptance
        pos = sorted((rng.randint(int(drafts * low), int(drafts * high)) for _ in range(K)), reverse=True)
        step = {100: 1, 200: 2, 500: 5, 1000: 10}[drafts]  # accepted/drafts must print exactly with 2 decimals
        pos[0] += (-sum(pos)) % step
        accepted = sum(pos)
        drafted = K * drafts - rng.randint(0, drafts // 10)
        rates = ", ".join(f"{p / drafts:.3f}" for p in pos)
        mal = accepted / drafts if v < (0, 9, 0) else 1 + accepted / drafts
        rate = 100 * accepted / drafted
        if v < (0, 10, 2):
            spec = (
                f"SpecDecoding metrics: Draft acceptance rate: {rate:.1f}%, Mean acceptance length: {mal:.2f}, "
                f"Accepted: {accepted} tokens, Drafted: {drafted} tokens, Per-position acceptance rate: {rates}"
            )
        else:
            spec = (
                f"SpecDecoding metrics: Mean acceptance length: {mal:.2f}, "
                f"Accepted throughput: {accepted / 10:.2f} tokens/s, "
                f"Drafted throughput: {drafted / 10:.2f} tokens/s, "
                f"Accepted: {accepted} tokens, Drafted: {drafted} tokens, "
                f"Per-position acceptance rate: {rates}, Avg Draft acceptance rate: {rate:.1f}%"
            )
        self.log(
            level,
            "v1/spec_decode/metrics.py:88" if v >= (0, 11, 1) else "metrics.py:86",
            spec + extra,
            proc=self.stats_proc,
        )
        self.truth.spec_lines += 1
        a = _acc(self.truth, build)
        a["windows"] += 1
        a["drafts"] += drafts
        a["drafted"] += drafted
        a["accepted"] += accepted
        a["pos"] = [x + y for x, y in zip(a["pos"], pos, strict=True)]

    def idle(self, windows: int, debug: bool) -> None:
        """An idle period: stats lines move to DEBUG (absent from INFO logs); not downtime."""
        for _ in range(windows):
            if debug:
                self.window(level="DEBUG", idle=True)
            else:
                self.advance(10)

    # -- failures ---------------------------------------------------------------------------
    def fatal(self, oom: bool) -> None:
        self.advance(3)
        build = self.build_at(self.t)
        cause = (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
            "of 79.19 GiB of which 1.12 GiB is free."
            if oom
            else "RuntimeError: CUDA error: an illegal memory access was encountered"
        )
        self.log(
            "ERROR",
            "core.py:700",
            "EngineCore encountered a fatal error.",
            more=[
                "Traceback (most recent call last):",
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 691, in run_engine_core',
                "    engine_core.run_busy_loop()",
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", '
                "line 1401, in execute_model",
                "    hidden_states = self.model(",
                "                    ^^^^^^^^^^^",
                cause,
            ],
        )
        self.truth.events["fatal"] = self.truth.events.get("fatal", 0) + 1
        self.died(build, oom)
        if oom:
            self.truth.events["oom"] = self.truth.events.get("oom", 0) + 1
        self.log(
            "ERROR",
            "async_llm.py:420",
            "AsyncLLM output_handler failed.",
            proc="APIServer",
            more=[
                "Traceback (most recent call last):",
                "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
                "See stack trace (above) for the root cause.",
            ],
        )
        self.truth.events["engine_dead"] = self.truth.events.get("engine_dead", 0) + 1

    def worker_died(self) -> None:
        self.advance(1)
        self.log(
            "ERROR", "multiproc_executor.py:146", "Worker proc VllmWorker-0 died unexpectedly, shutting down executor."
        )
        self.truth.events["worker_died"] = self.truth.events.get("worker_died", 0) + 1
        self.died(self.build_at(self.t), oom=False)

    def died(self, build: str, oom: bool) -> None:
        """Every death signal of one start cycle is the same death (docs/sources.md, engine deaths),
        dated and attributed by the first; an OOM when any signal is one."""
        if self.death is None:
            self.death = {"build": build, "oom": False}
            _stab(self.truth, build)["engine_deaths"] += 1
        if oom and not self.death["oom"]:
            self.death["oom"] = True
            _stab(self.truth, self.death["build"])["ooms"] += 1

    def poc(self, nonces: int, batch_size: int | None = None, release: str = "04ae0271", stopped: bool = True) -> None:
        """A PoC window on the mining path, in the lines of gonka-ai/gonka-vllm-plugins
        src/gonka_poc/poc/routes.py @04ae0271 (`release` "a6a28429": the decode-PoC release, whose
        `PoC /init/generate` line has no `poc_stronger_rng=…`); `batch_size`: also that request line, which
        states the batch (left out: a log that did not keep it; 0: the plugin's automatic sizing);
        `stopped`: the window's end is in the log."""
        self.advance(5)
        if batch_size is not None:
            rng = " poc_stronger_rng=False" if release == "04ae0271" else ""
            self.log(
                "INFO",
                "routes.py:468",
                f"PoC /init/generate: block_hash={POC_BLOCK_HASH} block_height={POC_BLOCK_HEIGHT} node=0/1 "
                f"group=0/1 batch_size={batch_size} url=True{rng}",
                proc="APIServer",
            )
        self.log("INFO", "routes.py:395", "PoC generation started (node 0/1, group 0/1)", proc="APIServer")
        if not stopped:
            self.truth.events["poc_start"] = self.truth.events.get("poc_start", 0) + 1
            return
        self.advance(60)
        self.log("INFO", "routes.py:436", f"Generated: {nonces} nonces ({nonces}/min)", proc="APIServer")
        self.log("INFO", "routes.py:445", f"PoC stopped: {nonces} nonces in {1.0:.2f}min", proc="APIServer")
        self.truth.events["poc_start"] = self.truth.events.get("poc_start", 0) + 1
        self.truth.events["poc_stop"] = self.truth.events.get("poc_stop", 0) + 1

    def write(self, path: Path, gz: bool = False, lines: list[str] | None = None) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "\n".join(self.lines if lines is None else lines) + "\n"
        if gz:
            with gzip.open(path, "wt", encoding="utf-8") as fh:
                fh.write(text)
        else:
            path.write_text(text, encoding="utf-8")
        return path


def _touch(path: Path, at: datetime) -> None:
    os.utime(path, (at.timestamp(), at.timestamp()))


def write_log_samples(directory: str | Path, seed: int = 5) -> LogTruth:
    directory = Path(directory)
    rng = random.Random(seed)
    truth = LogTruth()
    _build_a(directory, truth, rng)
    _build_b(directory, truth, rng)
    _metrics_scrapes(directory, truth, rng)
    _dapi_log(directory, truth, rng)
    _poc_results(directory, truth)
    _builds_toml(directory, truth)
    return truth


def _build_a(directory: Path, truth: LogTruth, rng: random.Random) -> None:
    """Build A: vLLM 0.8.5 then 0.9.1, one log rotated across the new year (also whole, before rotation)."""
    a = VllmFile(truth, rng, "0.8.5", datetime(2025, 12, 31, 23, 50, tzinfo=UTC))
    a.start(ready_after=90)
    for _ in range(30):
        a.window()
    a.idle(40, debug=True)  # 23:57 → 00:04: the rollover happens on DEBUG lines
    for _ in range(20):
        a.window()
    a.fatal(oom=True)
    a.advance(30)
    a.version = "0.9.1"
    a.start(ready_after=120)
    for _ in range(25):
        a.window()
    rotate_at = 90  # lines before rotation: the start-up block, the first windows and part of the idle period
    a.idle(360, debug=False)  # one hour of idle without DEBUG lines: a gap, not downtime
    for _ in range(10):
        a.window()
    a.worker_died()
    rotated, live = a.lines[:rotate_at], a.lines[rotate_at:]
    truth.spans.append((datetime(2025, 12, 31, 23, 50, tzinfo=UTC), a.ended()))
    vdir = directory / "vllm"
    truth.files["rotated"] = a.write(vdir / "vllm.log.1.gz", gz=True, lines=rotated)
    _touch(truth.files["rotated"], datetime(2026, 1, 1, 0, 1, tzinfo=UTC))
    truth.files["live"] = a.write(vdir / "vllm.log", lines=live)
    _touch(truth.files["live"], a.ended() + timedelta(minutes=5))
    truth.files["full_a"] = a.write(directory / "longer" / "vllm-a-full.log")  # the same log before rotation
    _touch(truth.files["full_a"], a.ended() + timedelta(minutes=5))


def _build_b(directory: Path, truth: LogTruth, rng: random.Random) -> None:
    """Build B: vLLM 0.10.2 with process prefixes and colour, then 0.11.1 with Preemptions."""
    vdir = directory / "vllm"
    b = VllmFile(
        truth, rng, "0.10.2", datetime(2026, 1, 2, 9, 0, tzinfo=UTC), proc="EngineCore_DP0", pid=2834, colour=True
    )
    b.start(ready_after=150)
    for i in range(40):
        b.window(extra=", top1: 0.812" if i == 3 else "")
    b.raw("2027-01-05T10:00:00.123Z | INFO | vllm.v2.metrics | SpecDecoding metrics: mal=3.10 acc=1000 drafted=2500")
    truth.unparsed += 1
    b.poc(nonces=4200)
    b.fatal(oom=False)
    b.worker_died()
    b.advance(45)
    b.version = "0.11.1"
    b.pid = 3120
    b.start(ready_after=200)
    for i in range(60):
        b.window(preemptions=(i % 7 == 0) * (i // 7 + 1))
    b.t = datetime(2026, 1, 3, 0, 0, 5, tzinfo=UTC)  # past midnight: a second day for --by day
    for i in range(30):
        b.window(preemptions=3 if i == 10 else 0)
    truth.spans.append((datetime(2026, 1, 2, 9, 0, tzinfo=UTC), b.ended()))
    truth.files["b"] = b.write(vdir / "vllm-b.log")
    _touch(truth.files["b"], b.ended())


def _metrics_scrapes(directory: Path, truth: LogTruth, rng: random.Random) -> None:
    """Build C: only /metrics scrapes (exact counters), one counter reset (restart) between scrapes."""
    mdir = directory / "metrics"
    counters: dict[str, Any] = {"drafts": 0, "tokens": 0, "accepted": 0, "pos": [0] * K, "preempt": 0}
    t = datetime(2026, 1, 4, 6, 0, tzinfo=UTC)
    acc = _acc(truth, "C")
    acc["source"] = "metrics"
    for scrape in range(7):
        if scrape == 4:  # restart: counters start again from zero; this scrape holds the increase since the restart
            counters = {"drafts": 0, "tokens": 0, "accepted": 0, "pos": [0] * K, "preempt": 0}
        if scrape > 0:
            drafts = rng.randint(500, 3000)
            pos = sorted((rng.randint(int(drafts * 0.2), int(drafts * 0.9)) for _ in range(K)), reverse=True)
            tokens = K * drafts - rng.randint(0, drafts // 10)
            counters["drafts"] += drafts
            counters["tokens"] += tokens
            counters["accepted"] += sum(pos)
            counters["pos"] = [x + y for x, y in zip(counters["pos"], pos, strict=True)]
            counters["preempt"] += scrape % 2
            acc["windows"] += 1
            acc["drafts"] += drafts
            acc["drafted"] += tokens
            acc["accepted"] += sum(pos)
            acc["pos"] = [x + y for x, y in zip(acc["pos"], pos, strict=True)]
        labels = f'engine="0",model_name="{MODEL}"'
        body = [
            "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.",
            "# TYPE vllm:spec_decode_num_drafts_total counter",
            f"vllm:spec_decode_num_drafts_total{{{labels}}} {float(counters['drafts'])}",
            f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {float(counters['tokens'])}",
            f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {float(counters['accepted'])}",
            *(
                f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}} {float(c)}'
                for i, c in enumerate(counters["pos"])
            ),
            f"vllm:num_preemptions_total{{{labels}}} {float(counters['preempt'])}",
            f"vllm:num_requests_running{{{labels}}} {rng.randint(0, 30)}.0",
            f"vllm:num_requests_waiting{{{labels}}} 0.0",
            f"vllm:kv_cache_usage_perc{{{labels}}} 0.{rng.randint(10, 90)}",
            f"vllm:spec_decode_num_drafts_created{{{labels}}} 1.767e+09",
        ]
        path = mdir / f"scrape-{scrape:02d}.prom"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(body) + "\n", encoding="utf-8")
        _touch(path, t)
        t += timedelta(minutes=1)
    truth.files["metrics"] = mdir


def _dapi_log(directory: Path, truth: LogTruth, rng: random.Random) -> None:
    """Validator (dapi) log of the host: scores on the executor's answers, text and JSON slog lines."""
    lines = []
    t = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)
    for i in range(40):
        t += timedelta(hours=1, minutes=rng.randint(0, 30))
        value = round(rng.uniform(0.90, 1.0), 6)
        if i % 13 == 5:
            msg, result, value = "Different tokens validation result", "different_tokens", 0.0
        else:
            msg, result = "Cosine similarity validation result", "similarity"
        stamp = t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{rng.randint(0, 999):03d}Z"
        if i % 4 == 3:
            doc: dict[str, Any] = {
                "time": stamp,
                "level": "INFO",
                "msg": msg,
                "subsystem": "Validation",
                "inferenceId": str(100 + i),
                "executor": EXECUTOR,
                "model": MODEL,
            }
            if result == "similarity":
                doc["cosineSimValue"] = value
            lines.append(json.dumps(doc))
        else:
            sim = f" cosineSimValue={value}" if result == "similarity" else ""
            lines.append(
                f'time={stamp} level={"INFO" if result == "similarity" else "WARN"} msg="{msg}" '
                f"subsystem=Validation{sim} inferenceId={100 + i} executor={EXECUTOR} model={MODEL}"
            )
        lines.append(f'time={stamp} level=INFO msg="Submitting validation" subsystem=Validation inferenceId={100 + i}')
        truth.scores.append(
            {
                "at": datetime.fromisoformat(stamp.replace("Z", "+00:00")),
                "value": value,
                "passed": value > SIMILARITY_THRESHOLD,
                "validator_build": build_of(HOST, t),
                "executor_build": build_of(EXECUTOR, t),
            }
        )
    lines.append(
        'time=2026-01-05T00:00:00.000Z level=INFO msg="Cosine similarity validation result" cosineSimValue=oops'
    )
    truth.unparsed += 1
    truth.files["dapi"] = directory / "dapi.log"
    truth.files["dapi"].write_text("\n".join(lines) + "\n", encoding="utf-8")


def _poc_results(directory: Path, truth: LogTruth) -> None:
    """PoC validation results: JSON responses with their stat_test, and a golden-vector report line."""
    pdir = directory / "poc"
    pdir.mkdir(parents=True, exist_ok=True)
    stat = {"dist_threshold": 0.4, "p_mismatch": 0.1, "fraud_threshold": 0.01}
    results = []
    for validator, mismatches in (("gonka1valA", 30), ("gonka1valB", 31), ("gonka1valC", 12)):
        results.append(
            {
                "status": "completed",
                "request_id": f"req-{validator}",
                "n_total": 200,
                "n_mismatch": mismatches,
                "p_value": 0.5,
                "fraud_detected": False,
                "participant_address": HOST,
                "validator": validator,
                "poc_stage_start_block_height": 1200,
                "stat_test": stat,
                "timestamp": "2026-01-03T05:00:00Z",
            }
        )
    results.append(
        {
            "status": "completed",
            "request_id": "req-empty",
            "n_total": 0,
            "n_mismatch": 0,
            "mismatch_nonces": [],
            "p_value": 1.0,
            "fraud_detected": False,
            "participant_address": HOST,
            "validator": "gonka1valA",
            "poc_stage_start_block_height": 1300,
            "timestamp": "2026-01-04T05:00:00Z",
        }
    )
    (pdir / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    (pdir / "validate_report.txt").write_text(
        "[validate] n_total=1000 n_mismatch=12 p_value=1.0 fraud_detected=False "
        "-> PASS (with mismatches within stat-test tolerance)\n",
        encoding="utf-8",
    )
    truth.poc = results
    truth.files["poc"] = pdir


def _builds_toml(directory: Path, truth: LogTruth) -> None:
    """The builds file of the samples' timeline."""
    blocks = []
    for host, label, since in BUILDS:
        blocks.append(
            f'[[builds]]\nhost  = "{host}"\nlabel = "{label}"\nsince = "{since.strftime("%Y-%m-%dT%H:%M:%SZ")}"\n'
        )
    truth.files["builds"] = directory / "builds.toml"
    truth.files["builds"].write_text("\n".join(blocks), encoding="utf-8")
