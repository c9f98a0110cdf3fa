"""vLLM logs as real servers wrote them: excerpts pasted in public GitHub issues, one file each in
tests/data/vllm_real/ (the `.source.md` beside each file names the issue, the vLLM version and what was
trimmed). Each file is ingested into a real DuckDB warehouse (`ingest_logs`), and the test checks the exact
events (kind, line, process, time), the exact stats and spec-decode rows, the deaths and OOMs as
`engine_deaths` and `evidence stability` count them, and what went to quarantine.

The formats (docs/sources.md, vLLM logs): V0 lines without the opening bracket, header-less tracebacks
and asyncio's failed-task report, `AsyncEngineDeadError` / `Engine background task failed`, worker deaths,
start-up failures before the engine is ready, data-parallel engines (`Engine 001:`, `EngineCore_1`), collector
prefixes (docker compose, `docker logs --timestamps`), a progress bar glued in front of a record, and the
SpecDecoding / Speculative metrics lines of several versions.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from pipeline.core.address import sample_address
from pipeline.evidence import compute
from pipeline.ingest.logs import ingest_logs
from pipeline.warehouse.database import fetch_frame

UTC = dt.UTC
DATA = Path(__file__).parents[2] / "data" / "vllm_real"
HOST = sample_address("vllmlgs")  # a made-up host of the real logs


def at(*args) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


@pytest.fixture
def load(tmp_path, new_warehouse):
    """Ingest one real file (year given: the excerpts carry no year) into a fresh warehouse."""
    cons = []

    def _load(name: str, year: int = 2025):
        con = new_warehouse(tmp_path / f"{name}.duckdb")
        cons.append(con)
        summary = ingest_logs(con, [DATA / name], host=HOST, kind="vllm", year=year)
        return con, summary

    yield _load
    for con in cons:
        con.close()


def events(con) -> list[tuple]:
    return fetch_frame(con, 'SELECT line, kind, level, proc, "at" FROM engine_events ORDER BY line, kind').rows()


def deaths(con) -> list[tuple]:
    return fetch_frame(con, 'SELECT "at", oom, kinds, records, proc, line FROM engine_deaths ORDER BY "at"').rows()


def quarantined(con) -> list[str]:
    return fetch_frame(con, "SELECT reason FROM quarantine WHERE table_name = 'vllm_log' ORDER BY reason")[
        "reason"
    ].to_list()


def stability(con) -> tuple[int, int]:
    rows = compute("stability", con, host=HOST, command="gonka-evidence evidence stability").rows
    return int(rows["engine_deaths"].sum()), int(rows["ooms"].sum())


def test_every_real_file_has_its_source_noted():
    logs = sorted(DATA.glob("*.log"))
    assert len(logs) >= 10
    for log in logs:
        note = log.with_name(log.name + ".source.md").read_text()
        assert "https://github.com/" in note and "vLLM" in note, log.name


# -- V0 ------------------------------------------------------------------------------------------


def test_v0_background_task_failed_is_one_death(load):
    """vLLM 0.5.x (V0, no opening bracket): the engine loop times out and `Engine background task failed`
    prints its traceback with the header on every line; one death, not an OOM."""
    con, summary = load("v05_engine_background_task_failed.log")
    assert (summary.lines, summary.unparsed) == (10, 0)
    stats = fetch_frame(
        con, "SELECT line, engine, running, waiting, kv_cache_usage, preemptions FROM log_engine_stats"
    ).rows()
    assert stats == [(1, None, 8, 0, pytest.approx(0.035), None)]
    assert events(con) == [(3, "engine_dead", "ERROR", None, at(2025, 7, 7, 15, 20, 11))]
    assert deaths(con) == [(at(2025, 7, 7, 15, 20, 11), False, ["engine_dead"], 1, None, 3)]
    assert stability(con) == (1, 0)
    assert quarantined(con) == []


def test_v0_asyncio_callback_traceback_without_header_is_folded(load):
    """vLLM ~0.2 (V0): asyncio's `Exception in callback …` / `handle: <Handle …>` report and the header-less
    traceback after two stats lines fold into the last stats record; the excerpt ends before the exception
    line, so there is no event, and nothing is quarantined."""
    con, summary = load("v02_callback_traceback.log")
    assert (summary.lines, summary.unparsed) == (11, 0)
    stats = fetch_frame(
        con, "SELECT line, running, waiting, kv_cache_usage, generation_tps FROM log_engine_stats ORDER BY line"
    ).rows()
    assert stats == [(1, 1, 0, pytest.approx(0.91), 67.0), (2, 1, 0, pytest.approx(0.956), 66.0)]
    assert events(con) == [] and deaths(con) == []
    assert fetch_frame(con, "SELECT records FROM log_files").rows() == [(2,)]


def test_v0_worker_oom_with_empty_header_lines(load):
    """vLLM 0.6 V0 multiprocessing worker: the OOM is the record's message; the header lines with an empty
    message and the chained traceback are folded into it: one record, one OOM death."""
    con, summary = load("v06_worker_oom.log")
    assert (summary.lines, summary.unparsed) == (6, 0)
    assert fetch_frame(con, "SELECT records FROM log_files").rows() == [(1,)]
    assert events(con) == [(1, "oom", "ERROR", "VllmWorkerProcess", at(2025, 10, 14, 12, 32, 47))]
    assert deaths(con) == [(at(2025, 10, 14, 12, 32, 47), True, ["oom"], 1, "VllmWorkerProcess", 1)]
    assert stability(con) == (1, 1)


def test_v0_startup_failure_before_ready_behind_a_compose_prefix(load):
    """vLLM 0.6.4 (V0, docker compose `vllm-1  | ` prefix): the engine process fails to start with `No
    available memory for the cache blocks`, printed as a traceback with the header on every line; one OOM
    death before any `Application startup complete.`."""
    con, summary = load("v064_startup_no_cache_blocks.log")
    assert (summary.lines, summary.unparsed) == (6, 0)
    assert fetch_frame(con, "SELECT records FROM log_files").rows() == [(4,)]
    assert events(con) == [(4, "oom", "ERROR", None, at(2025, 11, 18, 18, 7, 28))]
    detail = fetch_frame(con, "SELECT detail FROM engine_events")["detail"][0]
    assert detail.startswith("ValueError: No available memory for the cache blocks.")
    assert deaths(con) == [(at(2025, 11, 18, 18, 7, 28), True, ["oom"], 1, None, 4)]
    assert stability(con) == (1, 1)


def test_v0_speculative_metrics_line(load):
    """vLLM 0.6.3 (V0): `Speculative metrics:` with the rate as a fraction and token counts since the engine
    started; drafts = drafted / K (K = 3). The next line, `Prefix cache hit rate: GPU: …`, is a plain record."""
    con, summary = load("v063_speculative_metrics.log")
    assert (summary.lines, summary.unparsed) == (2, 0)
    assert fetch_frame(con, "SELECT records FROM log_files").rows() == [(2,)]
    row = fetch_frame(
        con,
        "SELECT line, accepted, drafted, drafts, spec_tokens, cumulative, acceptance_rate_printed, "
        "per_position, mal_printed FROM log_spec_decode",
    ).rows()
    assert row == [(1, 8547, 13311, 4437, 3, True, pytest.approx(64.2), None, None)]
    windows = fetch_frame(
        con, "SELECT accepted, drafted, drafts, mean_acceptance_length FROM spec_decode_windows"
    ).rows()
    assert windows == [(8547, 13311, 4437, pytest.approx(1 + 8547 / 4437))]


def test_v0_speculative_metrics_are_cumulative(load):
    """Two V0 lines of one engine lifetime (1 → 1 accepted, 5 → 15 drafted, K = 5): the second window is the
    increase (0 accepted, 10 drafted, 2 drafts), so the acceptance totals are the last line's counts, not a sum
    of lines."""
    con, summary = load("v06_speculative_metrics_cumulative.log")
    assert (summary.lines, summary.unparsed) == (2, 0)
    windows = fetch_frame(
        con, 'SELECT "at", accepted, drafted, drafts, mean_acceptance_length FROM spec_decode_windows ORDER BY "at"'
    ).rows()
    assert windows == [(at(2025, 2, 6, 3, 5, 53), 1, 5, 1, 2.0), (at(2025, 2, 6, 3, 18, 9), 0, 10, 2, 1.0)]
    acc = compute("acceptance", con, host=HOST, command="gonka-evidence evidence acceptance").rows.row(0, named=True)
    assert (acc["windows"], acc["drafts"], acc["drafted"], acc["accepted"]) == (2, 3, 15, 1)


def test_v0_speculative_metrics_restart_without_start_line(tmp_path, new_warehouse):
    """The two real V0 excerpts above one after the other in one file (composed here; each line as the issue
    printed it): the counts fall from 8547 to 1 accepted, a restart whose start line is missing, so the
    counting starts again from the line after the fall instead of giving negative windows."""
    path = tmp_path / "v0-restart.log"
    path.write_text(
        (DATA / "v063_speculative_metrics.log").read_text()
        + (DATA / "v06_speculative_metrics_cumulative.log").read_text()
    )
    con = new_warehouse(tmp_path / "w.duckdb")
    try:
        ingest_logs(con, [path], host=HOST, kind="vllm", year=2024)
        windows = fetch_frame(con, 'SELECT accepted, drafted, drafts FROM spec_decode_windows ORDER BY "at"').rows()
        assert windows == [(8547, 13311, 4437), (1, 5, 1), (0, 10, 2)]
    finally:
        con.close()


def test_v0_header_less_async_engine_dead_error(load, tmp_path, new_warehouse):
    """A header-less V0 traceback ending in `AsyncEngineDeadError`: on its own nothing dates it (15 unparsed
    lines, no event); after a record (the excerpt of v02_callback_traceback.log, composed here) it is folded
    into that record and makes it an engine death, dated by the record."""
    con, summary = load("v0_asyncenginedead_tail.log", year=2023)
    assert (summary.lines, summary.unparsed) == (15, 15) and events(con) == []
    path = tmp_path / "v0-dead.log"
    path.write_text(
        (DATA / "v02_callback_traceback.log").read_text() + (DATA / "v0_asyncenginedead_tail.log").read_text()
    )
    con = new_warehouse(tmp_path / "w.duckdb")
    try:
        summary = ingest_logs(con, [path], host=HOST, kind="vllm", year=2023)
        assert (summary.lines, summary.unparsed) == (26, 0)
        assert events(con) == [(2, "engine_dead", "INFO", None, at(2023, 9, 27, 11, 35, 18))]
        detail = fetch_frame(con, "SELECT detail FROM engine_events")["detail"][0]
        assert detail.startswith("vllm.engine.async_llm_engine.AsyncEngineDeadError: Task finished unexpectedly.")
        assert stability(con) == (1, 0)
    finally:
        con.close()


# -- V1: worker deaths, data-parallel engines, start-up failures -----------------------------------


def test_v1_worker_death_then_engine_fatal_is_one_death(load):
    """V1 behind a compose prefix: `Worker proc VllmWorker-3 died unexpectedly` and a second later the engine
    core's fatal error: two signals, one death dated by the first."""
    con, summary = load("v1_worker_died_compose.log")
    assert (summary.lines, summary.unparsed) == (10, 0)
    assert events(con) == [
        (2, "worker_died", "ERROR", None, at(2025, 11, 8, 11, 1, 29)),
        (3, "fatal", "ERROR", None, at(2025, 11, 8, 11, 1, 30)),
    ]
    assert deaths(con) == [(at(2025, 11, 8, 11, 1, 29), False, ["fatal", "worker_died"], 2, None, 2)]
    assert stability(con) == (1, 0)


def test_v1_start_failure_under_a_logging_wrappers_prefix(load):
    """A launcher's Python logging puts its own prefix before every line of the server's output: the records are
    found after it, and the API server's traceback (no vLLM header, only the wrapper's prefix) is read as if the
    prefix were not there, so its `Engine core initialization failed.` is the engine's death, dated by the record
    before it; no line is quarantined."""
    con, summary = load("v09_logging_wrapper_start_failure.log")
    assert (summary.lines, summary.unparsed) == (12, 0)
    assert fetch_frame(con, "SELECT records FROM log_files").rows() == [(2,)]
    assert events(con) == [(2, "engine_dead", "INFO", None, at(2025, 6, 27, 12, 57, 45))]
    detail = fetch_frame(con, "SELECT detail FROM engine_events")["detail"][0]
    assert detail == 'raise RuntimeError("Engine core initialization failed. "'
    assert stability(con) == (1, 0)


def test_v1_core_client_engine_core_died(load):
    """V1's front end: `Engine core proc EngineCore_DP1 died unexpectedly, shutting down client.` is the engine's
    death seen from the client, one death."""
    con, summary = load("v1_core_client_engine_died.log", year=2026)
    assert summary.unparsed == 0
    assert events(con) == [(1, "engine_dead", "ERROR", None, at(2026, 1, 29, 8, 37, 48))]
    assert stability(con) == (1, 0)


def test_v1_data_parallel_stats_and_fatal(load):
    """vLLM 0.9.1 with --data-parallel-size 2: one stats line per engine (`Engine 000:`, `Engine 001:`), then
    the fatal error of `EngineCore_0`."""
    con, summary = load("v091_dp_stats_fatal.log")
    assert (summary.lines, summary.unparsed) == (4, 0)
    stats = fetch_frame(
        con, "SELECT line, engine, prompt_tps, generation_tps, running FROM log_engine_stats ORDER BY line"
    ).rows()
    assert stats == [(1, "0", 1.9, 10.3, 0), (2, "1", 1.5, 10.0, 0)]  # the engine number, as /metrics labels it
    assert events(con) == [(3, "fatal", "ERROR", "EngineCore_0", at(2025, 6, 11, 11, 46, 39))]
    assert stability(con) == (1, 0)


def test_v1_two_data_parallel_engines_dying_are_one_death(load):
    """vLLM 0.8.5 offline, four DP engines: a progress bar glued in front of `(EngineCore_1 pid=…) ERROR …`
    still starts a record; EngineCore_1 and EngineCore_3 both report the fatal error, their traceback lines
    interleaved: two fatal records, one death. The progress bar line on its own is not a record."""
    con, summary = load("v085_dp_two_engines_fatal.log")
    assert (summary.lines, summary.unparsed) == (12, 1)
    t = at(2025, 8, 25, 16, 35, 26)
    assert events(con) == [(6, "fatal", "ERROR", "EngineCore_1", t), (11, "fatal", "ERROR", "EngineCore_3", t)]
    assert deaths(con) == [(t, False, ["fatal"], 2, "EngineCore_1", 6)]
    assert stability(con) == (1, 0)
    assert len(quarantined(con)) == 1 and quarantined(con)[0].startswith(
        "unparsed line 5 of v085_dp_two_engines_fatal.log"
    )


def test_v083_data_parallel_start_failure_with_interleaved_tracebacks(load):
    """vLLM 0.8.3, eight DP engine cores failing at start: `EngineCore hit an exception` (0.8's fatal text) of
    EngineCore_0 cuts into EngineCore_7's traceback, whose next line then starts a record of its own; one
    fatal event, one death."""
    con, summary = load("v083_dp_start_failure_interleaved.log")
    assert (summary.lines, summary.unparsed) == (8, 0)
    assert fetch_frame(con, "SELECT records FROM log_files").rows() == [(3,)]
    assert events(con) == [(7, "fatal", "ERROR", "EngineCore_0", at(2025, 4, 17, 23, 5, 6))]
    assert stability(con) == (1, 0)


def test_data_parallel_engines_each_printing_a_start_line_are_one_launch(tmp_path, new_warehouse):
    """Each data-parallel engine core prints its own `Initializing a V1 LLM engine` line (the trl comment beside
    v083_dp_start_failure_interleaved.log shows it for 0.8.3); one launch, so one start cycle: the further lines
    are not restarts, and time-to-ready runs from the first. Lines constructed in that shape (two engines,
    ready, a fatal error, a second launch)."""
    head = "(EngineCore_{i} pid=10{i}) {lvl} 04-17 23:{t} [core.py:{n}] "
    init = "Initializing a V1 LLM engine (v0.8.3) with config: model='/m', seed=None"
    lines = [
        head.format(i=0, lvl="INFO", t="05:00", n=61) + init,
        head.format(i=1, lvl="INFO", t="05:01", n=61) + init,
        "INFO:     Application startup complete.",
        head.format(i=1, lvl="ERROR", t="15:00", n=390)
        + "EngineCore hit an exception: Traceback (most recent call last):",
        head.format(i=0, lvl="INFO", t="16:00", n=61) + init,
        head.format(i=1, lvl="INFO", t="16:02", n=61) + init,
    ]
    path = tmp_path / "dp.log"
    path.write_text("\n".join(lines) + "\n")
    con = new_warehouse(tmp_path / "w.duckdb")
    try:
        ingest_logs(con, [path], host=HOST, kind="vllm", year=2025)
        starts = fetch_frame(
            con, "SELECT line, cycle_start FROM engine_events WHERE kind = 'start' ORDER BY line"
        ).rows()
        assert starts == [(1, True), (2, False), (5, True), (6, False)]
        row = compute("stability", con, host=HOST, command="x").rows.row(0, named=True)
        # ready is dated by the record before it (23:05:01): 1 s from the first start line, not 0 from the second
        assert (row["engine_deaths"], row["restarts"], row["ready_seconds_max"]) == (1, 1, 1.0)
    finally:
        con.close()


def test_v1_startup_failure_no_kv_cache_memory(load):
    """vLLM 0.11 (`EngineCore_DP0`): the engine core fails at start with `No available memory for the cache
    blocks`; the excerpt starts inside the traceback, whose lines all carry the header: one record, one
    OOM death."""
    con, summary = load("v011_startup_no_cache_blocks.log")
    assert (summary.lines, summary.unparsed) == (9, 0)
    assert fetch_frame(con, "SELECT records FROM log_files").rows() == [(1,)]
    assert events(con) == [(1, "oom", "ERROR", "EngineCore_DP0", at(2025, 10, 25, 13, 8, 43))]
    assert stability(con) == (1, 1)


def test_v1_header_traceback_oom_and_engine_dead_are_one_oom_death(load):
    """The V1 crash of the original example (tests/data/vllm_v1_header_traceback.log, lines 1–13): the engine
    core's OOM and the API server's EngineDeadError under another pid are one death, an OOM. (Its lines
    14–21, a start-up failure from another issue, follow without a start line between, so they belong to the
    same death here.)"""
    con, summary = load("../vllm_v1_header_traceback.log")
    assert deaths(con) == [(at(2025, 5, 1, 14, 39, 6), True, ["engine_dead", "fatal", "oom"], 3, "EngineCore", 2)]
    assert stability(con) == (1, 1)


# -- stats and spec-decode lines of several versions -------------------------------------------------


def test_v1_docker_timestamps_keep_the_process(load):
    """`docker logs --timestamps` puts an RFC 3339 stamp before the process prefix: the line is a record and
    the process is still `APIServer`."""
    con, summary = load("v1_docker_timestamps_stats.log", year=2026)
    assert summary.unparsed == 0
    stats = fetch_frame(
        con,
        'SELECT line, proc, "at", engine, prompt_tps, running, waiting, kv_cache_usage '
        "FROM log_engine_stats ORDER BY line",
    ).rows()
    assert stats == [
        (1, "APIServer", at(2026, 5, 12, 8, 1, 39), "0", 6335.3, 9, 0, pytest.approx(0.628)),
        (2, "APIServer", at(2026, 5, 12, 8, 1, 49), "0", 0.0, 9, 1, pytest.approx(0.688)),
    ]


def test_spec_line_0102_dev_with_throughput_and_old_rate_first(load):
    """The spec line of the PR that added the throughputs (0.10.2 development): `Draft acceptance rate` still
    first, then MAL with the +1, throughputs, counts and five per-position rates."""
    con, summary = load("v0102dev_spec_line.log")
    assert summary.unparsed == 0
    row = fetch_frame(
        con,
        "SELECT s.proc, s.accepted, s.drafted, s.drafts, s.per_position, s.mal_printed, "
        "s.mal_semantics, s.accepted_tps, s.drafted_tps, s.acceptance_rate_printed, "
        "w.mean_acceptance_length FROM log_spec_decode s JOIN spec_decode_windows w USING (record_key)",
    ).row(0)
    assert row[:4] == ("APIServer", 262, 295, 59)  # drafts = round(262 / 4.44)
    assert row[4] == [0.983, 0.949, 0.915, 0.881, 0.712]
    assert row[5:10] == (5.44, "plus1", 4.37, 4.92, 88.8)
    assert row[10] == pytest.approx(1 + 262 / 59)


def test_spec_and_stats_lines_of_020(load):
    """vLLM 0.20 (Kimi-K2.6 issue): spec lines with K=3 alternate with stats lines that carry an `MM cache hit
    rate`; the acceptance evidence sums the windows."""
    con, summary = load("v020_spec_and_stats.log")
    assert summary.unparsed == 0
    spec = fetch_frame(
        con,
        "SELECT line, accepted, drafted, drafts, per_position, acceptance_rate_printed "
        "FROM log_spec_decode ORDER BY line",
    ).rows()
    assert spec == [(1, 195, 261, 87, [0.851, 0.747, 0.644], 74.7), (3, 218, 261, 87, [0.920, 0.816, 0.770], 83.5)]
    stats = fetch_frame(
        con,
        "SELECT line, engine, generation_tps, running, kv_cache_usage, prefix_cache_hit_rate "
        "FROM log_engine_stats ORDER BY line",
    ).rows()
    assert stats == [
        (2, "0", 30.5, 1, pytest.approx(0.167), pytest.approx(0.858)),
        (4, "0", 29.3, 1, pytest.approx(0.167), pytest.approx(0.858)),
    ]
    acc = compute("acceptance", con, host=HOST, command="gonka-evidence evidence acceptance").rows.row(0, named=True)
    assert (acc["windows"], acc["drafts"], acc["drafted"], acc["accepted"]) == (2, 174, 522, 413)
    assert acc["mean_acceptance_length"] == pytest.approx(1 + 413 / 174)


def test_spec_lines_with_k15_and_nothing_accepted(load):
    """K = 15 per-position rates (trailing zeros kept), and a window with `Accepted: 0 tokens`: its drafts
    cannot be recovered from MAL 1.00 and stay unknown, its drafted tokens still count."""
    con, summary = load("v1_spec_k15_and_zero_accepted.log")
    assert summary.unparsed == 0
    spec = fetch_frame(
        con, "SELECT line, accepted, drafted, drafts, len(per_position), mal_printed FROM log_spec_decode ORDER BY line"
    ).rows()
    assert spec == [(1, 89, 975, 65, 15, 2.37), (2, 0, 495, None, 5, 1.0)]


# -- collectors and accelerators (envelopes anywhere, deaths and OOMs from the catalogue) ---------------------


def test_v06_sidecar_prefix_longer_than_64_and_launcher_shutdowns_are_one_death(load):
    """A Kubernetes sidecar's 69-character prefix in front of every line: the launcher's CRITICAL `MQLLMEngine is
    already dead, terminating server process` (once per failed request) are four engine_dead records and one
    death; uvicorn's access lines behind the same prefix are records too, nothing is quarantined."""
    con, summary = load("v06_sidecar_mqllmengine_dead.log")
    assert (summary.lines, summary.unparsed) == (8, 0)
    assert fetch_frame(con, "SELECT records FROM log_files").rows() == [(8,)]
    t = at(2025, 11, 12, 19, 15, 8)
    assert events(con) == [(line, "engine_dead", "CRITICAL", None, t) for line in (1, 3, 5, 7)]
    assert deaths(con) == [(t, False, ["engine_dead"], 4, None, 1)]
    assert stability(con) == (1, 0)
    assert quarantined(con) == []


def test_v063_engine_loop_has_died_then_launcher_is_one_death(load):
    """V0 MQLLMEngine: the client's `RuntimeError('Engine loop has died')` (a catalogue text of vLLM 0.6.2 –
    0.6.3) with its header-on-every-line traceback, a stats line, then the launcher's `MQLLMEngine is already
    dead`: one death (no launch in between), not an OOM; the stats line still counts."""
    con, summary = load("v063_mq_engine_loop_died.log")
    assert (summary.lines, summary.unparsed) == (12, 0)
    assert events(con) == [
        (2, "engine_dead", "ERROR", None, at(2025, 11, 5, 12, 3, 0)),
        (12, "engine_dead", "CRITICAL", None, at(2025, 11, 5, 12, 3, 3)),
    ]
    detail = fetch_frame(con, "SELECT detail FROM engine_events ORDER BY line")["detail"][0]
    assert detail == "RuntimeError('Engine loop has died') — RuntimeError: Engine loop has died"
    assert deaths(con) == [(at(2025, 11, 5, 12, 3, 0), False, ["engine_dead"], 2, None, 2)]
    stats = fetch_frame(con, "SELECT line, running, waiting, kv_cache_usage, generation_tps FROM log_engine_stats")
    assert stats.rows() == [(9, 1, 0, pytest.approx(0.05), 0.0)]
    assert stability(con) == (1, 0)


def test_v1_ray_worker_line_is_unparsed_and_stats_lines_count(load):
    """A Ray worker's NCCL line behind two process prefixes and Ray's repeat mark is not a vLLM line: one
    unparsed line in quarantine; the API server's five `Engine 000:` stats lines are read."""
    con, summary = load("v1_ray_nested_prefix_stats.log")
    assert (summary.lines, summary.unparsed) == (6, 1)
    stats = fetch_frame(con, "SELECT line, engine, running, waiting, kv_cache_usage, prompt_tps FROM log_engine_stats")
    assert stats.sort("line").rows() == [
        (2, "0", 8, 0, pytest.approx(0.166), 410.1),
        (3, "0", 10, 0, pytest.approx(0.208), 2870.5),
        (4, "0", 10, 0, pytest.approx(0.208), 820.2),
        (5, "0", 10, 0, pytest.approx(0.211), 0.0),
        (6, "0", 10, 0, pytest.approx(0.211), 0.0),
    ]
    assert fetch_frame(con, "SELECT DISTINCT proc FROM log_engine_stats").rows() == [("APIServer",)]
    assert len(quarantined(con)) == 1 and events(con) == []


def test_v07_ascend_npu_out_of_memory_is_one_oom_death(load):
    """vllm-ascend: torch_npu's `NPU out of memory` from a worker and from the MQLLMEngine at start-up: two OOM
    records, one death, an OOM."""
    con, summary = load("v07_ascend_npu_oom.log")
    assert (summary.lines, summary.unparsed) == (7, 0)
    t = at(2025, 3, 5, 7, 15, 39)
    assert events(con) == [(1, "oom", "ERROR", "VllmWorkerProcess", t), (2, "oom", "ERROR", None, t)]
    assert deaths(con) == [(t, True, ["oom"], 2, "VllmWorkerProcess", 1)]
    assert stability(con) == (1, 1)


def test_v1_cuda_driver_error_out_of_memory(load):
    """The engine core's failed start ends in PyTorch's `RuntimeError: CUDA driver error: out of memory`, inside
    a traceback whose lines repeat the header; the process's own traceback follows without it: one OOM death."""
    con, summary = load("v1_enginecore_cuda_driver_oom.log")
    assert (summary.lines, summary.unparsed) == (14, 0)
    t = at(2025, 5, 5, 7, 35, 19)
    assert events(con) == [(1, "oom", "ERROR", "EngineCore", t)]
    detail = fetch_frame(con, "SELECT detail FROM engine_events")["detail"][0]
    assert detail.endswith("RuntimeError: CUDA driver error: out of memory")
    assert deaths(con) == [(t, True, ["oom"], 1, "EngineCore", 1)]
    assert stability(con) == (1, 1)


def test_v1_process_enginecore_traceback_header_is_folded(load):
    """`Process EngineCore:` (Python's multiprocessing header of a dying engine core's traceback) after the API
    server's EngineDeadError: folded into that record with its traceback, one death, nothing unparsed."""
    con, summary = load("v1_process_enginecore_header.log")
    assert (summary.lines, summary.unparsed) == (11, 0)
    assert events(con) == [(1, "engine_dead", "ERROR", "APIServer", at(2025, 5, 5, 12, 36, 59))]
    assert deaths(con) == [(at(2025, 5, 5, 12, 36, 59), False, ["engine_dead"], 1, "APIServer", 1)]


def test_v010_worker_prefix_with_rank_and_progress_lines(load):
    """`(VllmWorker rank=0 pid=N) ` is a process prefix (a prefix with nothing after it is a blank line, not an
    unparsed one); the weight loader's progress lines have no envelope and are the only unparsed lines."""
    con, summary = load("v010_worker_rank_prefix_progress.log")
    assert (summary.lines, summary.unparsed) == (10, 3)
    assert fetch_frame(con, "SELECT records FROM log_files").rows() == [(6,)]
    assert quarantined(con) == [
        f"unparsed line {n} of v010_worker_rank_prefix_progress.log: Loading safetensors checkpoint shards: {text}"
        for n, text in (
            (2, "  0% Completed | 0/1 [00:00<?, ?it/s]"),
            (3, "100% Completed | 1/1 [00:00<00:00,  2.76it/s]"),
            (4, "100% Completed | 1/1 [00:00<00:00,  2.76it/s]"),
        )
    ]


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.log")))
def test_every_real_file_reads_the_same_at_every_chunk_cut(name):
    """The rows and stream state of each real file do not depend on where it is cut into chunks, including
    inside its tracebacks (the grammar's own check, tests/sources/logs/test_vllm_grammar.py)."""
    from tests.sources.logs.test_vllm_grammar import _same_at_every_cut

    out = _same_at_every_cut(DATA / name, year=2025, chunks=(1 << 20, 300, 64))
    assert any(out[k] is not None and out[k].height for k in ("spec", "stats", "events", "unparsed"))
