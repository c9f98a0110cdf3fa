"""answer-integrity: empty answers matched against the host's engine deaths and PoC windows.

A warehouse is built from a generated session copy with payloads (the planted faults hold two
empty answers: one JSON body in epoch 2, one SSE body in epoch 3), then small vLLM 0.11.1 logs
written here are ingested for the focal host, placed around the empty answers' times so that
exact counts are known. Definitions: pipeline/evidence/tables/answer_integrity.py.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from pipeline.evidence import compute
from pipeline.evidence.tables.answer_integrity import CAP_S, TOLERANCE_S
from pipeline.ingest.logs import ingest_logs
from pipeline.output.render import render
from pipeline.warehouse.database import fetch_frame, open_for_write
from tests.factories import sample_warehouse
from tests.helpers import without_closure

UTC = UTC
OLD_NOTE = "Empty answers are not yet matched against engine deaths or PoC windows"
NEW = ["empty_answers_in_engine_death", "empty_answers_in_poc", "empty_answers_unexplained"]
API = "(APIServer pid=1) "
CORE = "(EngineCore_DP0 pid=412) "


@dataclass(frozen=True)
class Empty:
    """One planted empty answer and its matching interval, computed from the generator's truth."""

    epoch_id: int
    escrow_id: str
    inference_id: int
    started: datetime
    t_from: datetime  # started_at − tolerance
    t_to: datetime  # latest of started_at, confirmed_at, finish tx + tolerance
    receipt_to: datetime  # latest of started_at, confirmed_at + tolerance (what t_to would be without the finish)


@pytest.fixture(scope="module")
def copy4(timeline):
    return timeline.copy(last_epoch=4, malformed_payloads=True)


@pytest.fixture(scope="module")
def empties(copy4) -> tuple[Empty, Empty]:
    t = copy4.truth
    keys = t.answers.filter(pl.col("empty").fill_null(False)).select("epoch_id", "escrow_id", "inference_id")
    finish = (
        t.txs.filter(pl.col("kind") == "finish")
        .group_by("escrow_id", "inference_id")
        .agg(pl.col("event_at").min().alias("finish_at"))
    )
    rows = (
        keys.join(
            t.inferences.select("escrow_id", "inference_id", "started_at", "confirmed_at"),
            on=["escrow_id", "inference_id"],
        )
        .join(finish, on=["escrow_id", "inference_id"], how="left")
        .sort("started_at")
    )
    out = []
    for r in rows.iter_rows(named=True):
        end = max(x for x in (r["started_at"], r["confirmed_at"], r["finish_at"]) if x is not None)
        started = datetime.fromtimestamp(r["started_at"], UTC)
        receipt = max(x for x in (r["started_at"], r["confirmed_at"]) if x is not None)
        out.append(
            Empty(
                r["epoch_id"],
                r["escrow_id"],
                r["inference_id"],
                started,
                started - timedelta(seconds=TOLERANCE_S),
                datetime.fromtimestamp(end, UTC) + timedelta(seconds=TOLERANCE_S),
                datetime.fromtimestamp(receipt, UTC) + timedelta(seconds=TOLERANCE_S),
            )
        )
    assert len(out) == 2 and [e.epoch_id for e in out] == [2, 3]  # the planted faults: one empty per body form
    return out[0], out[1]


@pytest.fixture(scope="module")
def base_warehouse(request, copy4, timeline) -> Path:
    return sample_warehouse(request, copy4, builds=timeline).path


@pytest.fixture
def wh(base_warehouse, tmp_path):
    """A fresh copy of the session warehouse (no logs yet), opened for writing."""
    cons = []

    def make():
        path = tmp_path / f"wh{len(cons)}.duckdb"
        shutil.copy(base_warehouse, path)
        cons.append(open_for_write(path))
        return cons[-1]

    yield make
    for con in cons:
        con.close()


class VllmLog:
    """A vLLM 0.11.1 log in its real line format: ``LEVEL MM-DD HH:MM:SS [file.py:N] message``."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def line(
        self,
        at: datetime,
        msg: str,
        level: str = "INFO",
        src: str = "core.py:93",
        proc: str = CORE,
        more: tuple[str, ...] = (),
    ) -> VllmLog:
        self.lines.append(f"{proc}{level} {at:%m-%d %H:%M:%S} [{src}] {msg}")
        self.lines.extend(proc + m for m in more)
        return self

    def start(self, at: datetime) -> VllmLog:
        self.line(at, "vLLM API server version 0.11.1", src="api_server.py:1839", proc=API)
        return self.line(
            at,
            "Initializing a V1 LLM engine (v0.11.1) with config: model='deepseek-ai/DeepSeek-V4-Flash', "
            "speculative_config=None, tokenizer='deepseek-ai/DeepSeek-V4-Flash', seed=0",
            src="core.py:93",
        )

    def ready(self, at: datetime) -> VllmLog:
        self.line(at, "Route: /health, Methods: GET", src="launcher.py:44", proc=API)
        self.lines += [
            API + "INFO:     Started server process [1]",
            API + "INFO:     Waiting for application startup.",
            API + "INFO:     Application startup complete.",
        ]
        return self

    def stats(self, at: datetime) -> VllmLog:
        return self.line(
            at,
            "Engine 000: Avg prompt throughput: 812.4 tokens/s, Avg generation throughput: 95.1 tokens/s, "
            "Running: 6 reqs, Waiting: 0 reqs, GPU KV cache usage: 12.3%, Prefix cache hit rate: 41.0%",
            src="loggers.py:236",
            proc=API,
        )

    def fatal(self, at: datetime, oom: bool = False) -> VllmLog:
        cause = (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
            "of 79.19 GiB of which 1.12 GiB is free."
            if oom
            else "RuntimeError: CUDA error: an illegal memory access was encountered"
        )
        self.line(
            at,
            "EngineCore encountered a fatal error.",
            level="ERROR",
            src="core.py:710",
            more=(
                "Traceback (most recent call last):",
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 701, in run_engine_core',
                "    engine_core.run_busy_loop()",
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 2196, '
                "in execute_model",
                "    model_output = self.model(",
                "                   ^^^^^^^^^^^",
                cause,
            ),
        )
        return self.line(
            at,
            "AsyncLLM output_handler failed.",
            level="ERROR",
            src="async_llm.py:480",
            proc=API,
            more=(
                "Traceback (most recent call last):",
                "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
                "See stack trace (above) for the root cause.",
            ),
        )

    def worker_died(self, at: datetime) -> VllmLog:
        return self.line(
            at,
            "Worker proc VllmWorker-0 died unexpectedly, shutting down executor.",
            level="ERROR",
            src="multiproc_executor.py:154",
        )

    def poc(self, start: datetime, stop: datetime | None, nonces: int = 4800) -> VllmLog:
        self.line(start, "PoC generation started (node 0/1, group 0/1)", src="routes.py:88", proc=API)
        if stop is not None:
            minutes = (stop - start).total_seconds() / 60
            # gonka-ai/gonka-vllm-plugins src/gonka_poc/poc/routes.py @04ae0271: f"… nonces in {elapsed_min:.2f}min"
            self.line(stop, f"PoC stopped: {nonces} nonces in {minutes:.2f}min", src="routes.py:445", proc=API)
        return self

    def ingest(self, con, path: Path, host: str) -> None:
        path.write_text("\n".join(self.lines) + "\n", encoding="utf-8")
        summary = ingest_logs(con, [path], host=host, kind="vllm", year=2026)
        assert summary.unparsed == 0


def _s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def _row(con, host, **window) -> tuple[dict, list[str]]:
    result = without_closure(compute("answer-integrity", con, host=host, command="x", **window))
    return result.rows.to_dicts()[0], result.notes


def _other_host(con, focal: str) -> str:
    """A slot holder of the warehouse other than the focal host (logs of a host with no slot are refused)."""
    return con.execute("SELECT min(address) FROM escrow_slots WHERE address <> ?", [focal]).fetchone()[0]


def _new(row: dict) -> tuple:
    return tuple(row[c] for c in NEW)


def test_no_engine_events_keeps_the_old_note_and_null_columns(wh, timeline, empties, tmp_path):
    con = wh()
    focal = timeline.focal_host
    row, notes = _row(con, focal)
    assert row["empty_answers"] == 2 and _new(row) == (None, None, None)
    assert any(n.startswith(OLD_NOTE) for n in notes)
    assert list(row)[:7] == [
        "answers_scanned",
        "complete",
        "token_count_mismatches",
        "duplicate_top_logprob_positions",
        "nan_or_missing_logprob_answers",
        "tokens_not_ids_answers",
        "empty_answers",
    ]
    assert list(row)[7:] == NEW
    # Another host's engine death over both empty answers matches nothing of the focal host.
    a, b = empties
    (
        VllmLog()
        .start(a.started - _s(600))
        .ready(a.started - _s(500))
        .fatal(a.started)
        .worker_died(b.started)
        .ingest(con, tmp_path / "other.log", other := _other_host(con, focal))
    )
    row, notes = _row(con, focal)
    assert _new(row) == (None, None, None) and any(n.startswith(OLD_NOTE) for n in notes)
    assert _new(_row(con, other)[0]) == (0, 0, 0)  # it has events but no empty answers
    assert "| 2 | – | – | – |" in render(compute("answer-integrity", con, host=focal, command="x"), "markdown")


def test_death_and_poc_windows(wh, timeline, empties, tmp_path):
    """Empty answer A (epoch 2) falls inside an engine death, B (epoch 3) inside a PoC window."""
    con = wh()
    focal = timeline.focal_host
    a, b = empties
    log = VllmLog().start(a.started - _s(7200)).ready(a.started - _s(7080))
    # A PoC window over non-empty answers before A only (its stop is 5 minutes before A's time starts).
    log.stats(a.started - _s(1800)).poc(a.started - _s(1500), a.t_from - _s(300))
    # The engine dies 2 minutes before A's time starts and is still loading (start logged, not ready) while
    # A runs; it is ready 5 minutes after A's finish. Non-empty answers fall in the window too.
    log.fatal(a.t_from - _s(120), oom=True).start(a.t_from - _s(60)).ready(a.t_to + _s(300)).stats(a.t_to + _s(310))
    # B runs while a PoC window is open: it started 5 minutes before B and stopped 30 s after B's time ended.
    log.stats(b.started - _s(600)).poc(b.started - _s(300), b.t_to + _s(30)).stats(b.t_to + _s(600))
    log.ingest(con, tmp_path / "vllm.log", focal)
    events = fetch_frame(
        con, "SELECT kind, count(*) AS n FROM engine_events WHERE host = $h GROUP BY kind", {"h": focal}
    )
    assert dict(events.iter_rows()) == {
        "launch": 2,  # the API server's version lines: the server's launches
        "start": 2,
        "ready": 2,
        "fatal": 1,
        "oom": 1,
        "engine_dead": 1,
        "poc_start": 2,
        "poc_stop": 2,
    }

    row, notes = _row(con, focal)
    assert row["empty_answers"] == 2
    assert _new(row) == (1, 1, 0)
    assert not any(n.startswith(OLD_NOTE) for n in notes)
    assert any(
        "matched against 13 engine events" in n  # 11 + the two launch events
        and f"{CAP_S // 60} min" in n
        for n in notes
    )
    assert not any("outside every ingested vLLM log file" in n for n in notes)
    # Per window: epoch 2 holds A, epoch 3 holds B, epoch 4 no empty answer (0, not NULL: events exist).
    assert _new(_row(con, focal, epoch=2)[0]) == (1, 0, 0)
    assert _new(_row(con, focal, epoch=3)[0]) == (0, 1, 0)
    row4, _ = _row(con, focal, epoch=4)
    assert row4["empty_answers"] == 0 and _new(row4) == (0, 0, 0)
    since = b.started - _s(1)
    assert _new(_row(con, focal, since=since, until=since + _s(3600))[0]) == (0, 1, 0)
    # Non-empty answers inside the windows are not counted: the death window holds other answers of the host.
    inside = fetch_frame(
        con,
        "SELECT count(*) AS n FROM answer_checks WHERE NOT empty AND started_at BETWEEN $f AND $t",
        {"f": a.t_from - _s(120), "t": a.t_to + _s(300)},
    )
    assert inside["n"][0] > 0


def test_boundaries_caps_and_recovery(wh, timeline, empties, tmp_path):
    """Near misses leave A unexplained; B is in a death window exactly at its capped end, and misses a PoC."""
    con = wh()
    focal = timeline.focal_host
    a, b = empties
    log = VllmLog().start(a.t_from - _s(7300)).ready(a.t_from - _s(7200))
    # A worker dies CAP_S + 1 s before A's time starts; the next ready comes only after A: the capped
    # window ends 1 s before A → no overlap.
    log.worker_died(a.t_from - _s(CAP_S + 1))
    # A PoC window that stops 1 s before A's time starts.
    log.poc(a.t_from - _s(600), a.t_from - _s(1))
    # The engine dies 1 s after A's time ends (tolerance included), ready 100 s later.
    log.fatal(a.t_to + _s(1)).start(a.t_to + _s(30)).ready(a.t_to + _s(100))
    # B: an engine dead CAP_S before B's time starts with no ready until after B → the capped window
    # ends exactly at B's start (closed intervals: overlaps).
    log.stats(b.t_from - _s(CAP_S + 600)).fatal(b.t_from - _s(CAP_S), oom=True)
    # B: a PoC window that started and stopped before B (a stop closes the window even though ready has not come).
    log.poc(b.t_from - _s(900), b.t_from - _s(1))
    # A PoC start 1 s after B's time ends, with no stop logged (capped), then the engine comes back.
    log.poc(b.t_to + _s(1), None)
    log.start(b.t_to + _s(200)).ready(b.t_to + _s(400))
    log.ingest(con, tmp_path / "vllm.log", focal)

    row, notes = _row(con, focal)
    assert _new(row) == (1, 0, 1)
    assert _new(_row(con, focal, epoch=2)[0]) == (0, 0, 1)
    assert _new(_row(con, focal, epoch=3)[0]) == (1, 0, 0)
    assert not any("outside every ingested vLLM log file" in n for n in notes)


def test_answer_in_both_windows_counts_in_both(wh, timeline, empties, tmp_path):
    con = wh()
    focal = timeline.focal_host
    a, b = empties
    log = VllmLog().start(a.started - _s(3600)).ready(a.started - _s(3500))
    # A PoC window over A's start; a worker dies 1 s before A's time ends — a time that only the finish
    # transaction's event time reaches (A's receipt ended minutes earlier).
    assert a.t_to - _s(1) > a.receipt_to
    log.poc(a.started - _s(200), a.started + _s(10)).worker_died(a.t_to - _s(1)).start(a.t_to + _s(60))
    log.ready(a.t_to + _s(120))
    log.ingest(con, tmp_path / "vllm.log", focal)
    row, notes = _row(con, focal)
    # A is in both; B (three days later) lies outside the log file's span: unexplained, and said so.
    assert _new(row) == (1, 1, 1)
    assert any(
        n.startswith("1 of the unexplained empty answers lie outside every ingested vLLM log file") for n in notes
    )
