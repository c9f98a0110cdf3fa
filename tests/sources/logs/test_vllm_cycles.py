"""Restarts by launch: an engine cycle begins at the server's launch (its `vLLM API server version`
line), or at the engine's start line when no launch or start line comes right before it; the start lines of
data-parallel engines after one launch are one cycle; a second launch in the same file is a restart even when the
same engine name follows. The rule is the view `engine_events` (`cycle_start`, `cycle`); deaths are counted per
cycle (`engine_deaths`) and restarts by the stability table.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from pipeline.core.address import sample_address
from pipeline.evidence import compute
from pipeline.ingest.logs import ingest_logs
from pipeline.warehouse.database import fetch_frame

HOST = sample_address("cycles")
UTC = dt.UTC


def launch(t: str, version: str = "0.11.1") -> str:
    return f"(APIServer pid=1) INFO 12-03 {t} [api_server.py:1885] vLLM API server version {version}"


def start(t: str, proc: str = "EngineCore_DP0") -> str:
    return f"({proc} pid=7) INFO 12-03 {t} [core.py:93] Initializing a V1 LLM engine (v0.11.1) with config: seed=0"


def ready() -> str:
    return "(APIServer pid=1) INFO:     Application startup complete."


def stats(t: str) -> str:
    return (
        f"(APIServer pid=1) INFO 12-03 {t} [loggers.py:215] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
        "Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%"
    )


def fatal(t: str, oom: bool = False) -> list[str]:
    lines = [f"(EngineCore_DP0 pid=7) ERROR 12-03 {t} [core.py:710] EngineCore encountered a fatal error."]
    if oom:
        lines += ["Traceback (most recent call last):", "torch.OutOfMemoryError: CUDA out of memory."]
    return lines


def dead(t: str) -> str:
    return f"(APIServer pid=1) ERROR 12-03 {t} [async_llm.py:480] AsyncLLM output_handler failed."


@pytest.fixture
def load(tmp_path, new_warehouse):
    cons = []

    def _load(*files: list[str]):
        con = new_warehouse(tmp_path / "w.duckdb")
        cons.append(con)
        paths = []
        for i, lines in enumerate(files):
            path = tmp_path / f"vllm-{i}.log"
            path.write_text("\n".join(lines) + "\n")
            paths.append(path)
        ingest_logs(con, paths, host=HOST, kind="vllm", year=2025)
        return con

    yield _load
    for con in cons:
        con.close()


def cycles(con) -> list[tuple]:
    return fetch_frame(
        con, "SELECT line, kind, cycle_start, cycle FROM engine_events WHERE kind <> 'ready' ORDER BY line, kind"
    ).rows()


def table(con) -> list[tuple]:
    rows = compute("stability", con, host=HOST, command="test").rows
    return rows.select("engine_deaths", "ooms", "restarts", "ready_seconds_max").rows()


def test_data_parallel_starts_of_one_launch_are_one_cycle_and_a_second_launch_is_a_restart(load):
    con = load(
        [
            launch("10:00:00"),
            start("10:00:05", "EngineCore_DP0"),
            start("10:00:05", "EngineCore_DP1"),
            ready(),
            stats("10:01:00"),
            launch("11:00:00"),  # relaunched, killed while loading: no ready
            start("11:00:04", "EngineCore_DP0"),
            launch("12:00:00"),  # the same engine name again: still a new launch
            start("12:00:06", "EngineCore_DP0"),
            ready(),
        ]
    )
    assert cycles(con) == [
        (1, "launch", True, 1),
        (2, "start", False, 1),
        (3, "start", False, 1),
        (6, "launch", True, 2),
        (7, "start", False, 2),
        (8, "launch", True, 3),
        (9, "start", False, 3),
    ]
    # ready is timed from the launch (the first cycle's ready line is dated by the record before it)
    assert table(con) == [(0, 0, 2, 6.0)]


def test_start_lines_without_launch_lines(load):
    """No launch lines (the API server's lines not collected): a start line begins a cycle unless a start line
    comes right before it, so a start after the engine was ready or died is a restart."""
    con = load([start("10:00:00"), start("10:00:00", "EngineCore_DP1"), ready(), stats("10:01:00"), start("10:05:00")])
    assert cycles(con) == [(1, "start", True, 1), (2, "start", False, 1), (5, "start", True, 2)]
    assert table(con)[0][2] == 1


def test_deaths_are_counted_per_launch(load):
    con = load(
        [
            launch("10:00:00"),
            start("10:00:05"),
            ready(),
            *fatal("10:30:00", oom=True),
            dead("10:30:01"),
            launch("10:31:00"),
            start("10:31:05"),
            ready(),
            *fatal("11:00:00"),
            dead("11:00:01"),
        ]
    )
    deaths = fetch_frame(con, 'SELECT line, oom, kinds FROM engine_deaths ORDER BY "at"').rows()
    assert deaths == [(4, True, ["engine_dead", "fatal", "oom"]), (11, False, ["engine_dead", "fatal"])]
    assert table(con) == [(2, 1, 1, 5.0)]


def test_a_file_that_starts_mid_run(load):
    """The file begins while a server runs (stats, then its crash): those records are cycle 0, its death counts,
    and the file's first launch is a restart (the engine was already seen running)."""
    con = load([stats("09:59:00"), *fatal("09:59:30", oom=True), launch("10:00:00"), start("10:00:05"), ready()])
    assert cycles(con) == [(2, "fatal", False, 0), (2, "oom", False, 0), (5, "launch", True, 1), (6, "start", False, 1)]
    assert table(con) == [(1, 1, 1, 5.0)]


def access() -> str:
    return '(APIServer pid=1) INFO:     10.0.0.5:52344 - "POST /v1/chat/completions HTTP/1.1" 200 OK'


@pytest.mark.parametrize(
    "shutdown",
    [
        "Shutting down FastAPI HTTP server.",  # vllm/entrypoints/launcher.py up to vLLM 0.22
        "[shutdown] API server: shutting down FastAPI HTTP server",  # from vLLM 0.23 (vllm-project/vllm #43707)
    ],
)
@pytest.mark.parametrize("stamp", ["09:59:58", "10:00:00"])
def test_a_relaunch_after_only_access_and_shutdown_lines_is_a_restart(load, shutdown, stamp):
    """The file begins mid-run with an access line and the server's shutdown, then the server is launched again:
    the shutdown shows the engine was running (any earlier record), so the launch is a restart, also when both
    carry the same second (earlier in the file is earlier)."""
    stop = f"(APIServer pid=1) INFO 12-03 {stamp} [launcher.py:110] {shutdown}"
    con = load([access(), stop, launch("10:00:00"), start("10:00:05"), ready()])
    assert cycles(con) == [(2, "shutdown", False, 0), (3, "launch", True, 1), (4, "start", False, 1)]
    assert table(con) == [(0, 0, 1, 5.0)]
    restarts = fetch_frame(con, "SELECT line, restart FROM engine_cycle_starts").rows()
    assert restarts == [(3, True)]


def test_a_fresh_launch_with_lines_before_it_is_not_a_restart(load):
    """Lines a fresh launch prints before its version line (platform detection) show no running engine."""
    before = "(APIServer pid=1) INFO 12-03 09:59:59 [__init__.py:216] Automatically detected platform cuda."
    con = load([before, launch("10:00:00"), start("10:00:05"), ready()])
    assert table(con) == [(0, 0, 0, 5.0)]


def test_a_ready_line_right_after_a_death_begins_a_cycle(load):
    """The server came back but its launch and start lines were not collected: the ready line after the death
    begins a cycle (a restart, without a time to ready), so the next crash is a second death."""
    con = load([start("10:00:00"), ready(), stats("10:00:10"), *fatal("10:10:00"), ready(), *fatal("10:20:00")])
    got = fetch_frame(con, "SELECT line, kind, cycle_start, cycle FROM engine_events ORDER BY line").rows()
    assert got == [
        (1, "start", True, 1),
        (2, "ready", False, 1),
        (4, "fatal", False, 1),
        (5, "ready", True, 2),
        (6, "fatal", False, 2),
    ]
    assert table(con) == [(2, 0, 1, 0.0)]


def test_a_second_file_begins_with_a_restart(load):
    first = [launch("10:00:00"), start("10:00:05"), ready(), stats("10:01:00")]
    second = [launch("11:00:00"), start("11:00:05"), ready()]
    con = load(first, second)
    assert fetch_frame(con, "SELECT count(*) FROM engine_events WHERE cycle_start").rows() == [(2,)]
    assert table(con)[0][2] == 1


def logo(t: str, version: str = "0.26.0", prefix: str = "(APIServer pid=1) ", blank: str = "") -> list[str]:
    """The launch of vLLM 0.15 and later: `log_version_and_model` (vllm/entrypoints/utils.py) logs its logo as one
    message, which vLLM's formatter prints line by line with the header on each (a blank line printed with or
    without the header's trailing space), the version on the logo's second line."""
    head = f"{prefix}INFO 12-03 {t} [api_utils.py:345] "
    art = [
        "       █     █     █▄   ▄█",
        f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {version}",
        "  █▄█▀ █     █     █     █  model   Qwen/Qwen3-8B",
        "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀",
    ]
    return [head.rstrip() + blank, *(head + a for a in art), head.rstrip() + blank]


@pytest.mark.parametrize("blank", ["", " "])
def test_the_logo_of_newer_servers_is_their_launch(load, blank):
    """From vLLM 0.15 the API server announces itself with its logo (`version X` on the second line) instead of
    `vLLM API server version X`; each logo begins a cycle, so a relaunch is a restart, and the cycle's version is
    the logo's. `vLLM server version X, serving model M` (the same call with VLLM_DISABLE_LOG_LOGO) too."""
    bare = "(APIServer pid=1) INFO 12-03 12:00:00 [api_utils.py:345] vLLM server version 0.26.0, serving model m"
    con = load(
        [
            *logo("10:00:00", blank=blank),
            start("10:00:05"),
            ready(),
            stats("10:01:00"),
            *logo("11:00:00", "0.27.1", blank=blank),
            start("11:00:05"),
            ready(),
            bare,
            start("12:00:05"),
        ]
    )
    first = 1 if blank == " " else 2  # the blank line is a record of its own when it lost its trailing space
    assert cycles(con) == [
        (first, "launch", True, 1),
        (7, "start", False, 1),
        (first + 9, "launch", True, 2),
        (16, "start", False, 2),
        (18, "launch", True, 3),
        (19, "start", False, 3),
    ]
    assert table(con)[0][2] == 2
    details = fetch_frame(con, "SELECT detail FROM engine_events WHERE kind = 'launch' ORDER BY line")
    assert details["detail"].to_list() == ["vLLM 0.26.0", "vLLM 0.27.1", "vLLM 0.26.0"]


def test_a_start_failure_right_after_the_launch_line_is_a_death(load):
    """The server's traceback printed without the header right after its launch line (a launch that fails at
    once, `Engine process failed to start`): the traceback belongs to the launch record, which is then both the
    cycle's launch and its death."""
    con = load(
        [
            launch("10:00:00"),
            "Traceback (most recent call last):",
            '  File "/v/api_server.py", line 223, in build_async_engine_client_from_engine_args',
            "    raise RuntimeError(",
            "RuntimeError: Engine process failed to start. See stack trace for the root cause.",
        ]
    )
    assert cycles(con) == [(1, "engine_dead", False, 1), (1, "launch", True, 1)]
    assert fetch_frame(con, "SELECT line, kinds FROM engine_deaths").rows() == [(1, ["engine_dead"])]


# vLLM's refusal of a DSpark draft shorter than its block (vllm-project/vllm#47419, vllm/config/speculative.py
# at v0.26.0, as vllm-project/vllm#50012 quotes it); K left out defaults to the draft's n_predict, below the block.
# vLLM's configs are pydantic dataclasses, so the ValueError reaches the log as pydantic's ValidationError.
DSPARK_REFUSAL = (
    "DSpark requires num_speculative_tokens >= dspark_block_size (5); got 1. Smaller values produce incorrect "
    "output. Use num_speculative_tokens=5 or larger (e.g. 7)."
)


def test_a_refused_start_keeps_its_own_arguments_and_its_config_error(load):
    """A launch whose speculative config vLLM refused: its non-default args and the traceback's exception line
    (pydantic's `ValidationError: 1 validation error for SpeculativeConfig`) with pydantic's message line under
    it (vLLM's reason) stay with that launch, not with the next launch's cycle; the error is no death."""
    args = "(APIServer pid=1) INFO 12-03 {t} [utils.py:233] non-default args: {{'model': 'm', {spec}}}"
    refused = [
        launch("10:00:00", "0.23.1"),
        args.format(t="10:00:00", spec="'speculative_config': {'method': 'dspark'}"),
        "(APIServer pid=1) Traceback (most recent call last):",
        '(APIServer pid=1)   File "/usr/lib/vllm/engine/arg_utils.py", line 1370, in create_speculative_config',
        "(APIServer pid=1) pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
        f"(APIServer pid=1)   Value error, {DSPARK_REFUSAL} [type=value_error, input_value=ArgsKwargs(()), "
        "input_type=ArgsKwargs]",
        "(APIServer pid=1)     For further information visit https://errors.pydantic.dev/2.11/v/value_error",
    ]
    again = [
        launch("10:05:00", "0.23.1"),
        args.format(t="10:05:00", spec="'speculative_config': {'method': 'dspark', 'num_speculative_tokens': 5}"),
        start("10:05:10"),
        ready(),
    ]
    con = load(refused + again)
    events = fetch_frame(con, "SELECT line, kind, detail FROM engine_events WHERE kind = 'config_error'").rows()
    assert events == [
        (
            2,
            "config_error",
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig: "
            f"Value error, {DSPARK_REFUSAL} [type=value_error, input_value=ArgsKwargs(()), input_type=ArgsKwargs]",
        )
    ]
    rows = fetch_frame(con, "SELECT line, config FROM engine_cycles ORDER BY line").rows()
    configs = [(line, json.loads(config)) for line, config in rows]
    assert [(line, c.get("spec_method"), c.get("spec_tokens")) for line, c in configs] == [
        (1, "dspark", None),
        (8, "dspark", "5"),  # after the refusal's 7 lines
    ]
    # no death, no OOM; the second launch is a restart, ready 10 s after its start
    assert table(con) == [(0, 0, 1, 10.0)]
