"""The startup table on data-samples/ (its vLLM log's start cycles), against the sample generator's truth."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pipeline.samples.spec import BUILD_CHUNK, BUILD_FIX, BUILD_RAW, BUILD_V1
from pipeline.samples.vllm_log import READY_SECONDS, RESTART_READY_SECONDS
from pipeline.warehouse.database import open_read_only
from tests.factories import data_samples_warehouse
from tests.helpers import evidence as run

HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    path = data_samples_warehouse(tmp_path_factory.mktemp("startup") / "w.duckdb", vllm_log_host=HOST)
    con = open_read_only(path)
    yield con
    con.close()


def test_startup_per_build_is_what_the_start_lines_print(con):
    result = run(con, "startup", HOST, since=datetime(2026, 10, 1, tzinfo=UTC), until=datetime(2026, 11, 1, tzinfo=UTC))
    rows = {r["build"]: r for r in result.rows.iter_rows(named=True)}
    assert list(rows) == [BUILD_V1, BUILD_RAW, BUILD_FIX, BUILD_CHUNK]  # in the order the builds started
    assert [rows[b]["cycles"] for b in rows] == [1, 2, 1, 1]  # the raw_logprobs build restarted after its OOM
    assert result.stats == {"cycles": 5}
    assert rows[BUILD_V1]["time_to_ready_max_s"] == READY_SECONDS[BUILD_V1]
    raw = rows[BUILD_RAW]
    assert raw["time_to_ready_max_s"] == READY_SECONDS[BUILD_RAW]
    assert raw["time_to_ready_median_s"] == (READY_SECONDS[BUILD_RAW] + RESTART_READY_SECONDS) / 2
    assert (raw["vllm_versions"], raw["ready_cycles"]) == ("0.23.1", 2)
    assert (
        len(rows[BUILD_FIX]["fingerprints"].split(", ")) == 1 != raw["fingerprints"] == rows[BUILD_RAW]["fingerprints"]
    )
    for build, r in rows.items():  # the generator's start lines; the chunk-2048 build's PoC window yields nothing
        assert (r["model_load_median_s"], r["model_load_gib"], r["kv_cache_gib"]) == (41.11823, 54.2, 21.43)
        poc = 0.0 if build == BUILD_CHUNK else None
        assert (r["kv_cache_tokens"], r["max_concurrency"], r["poc_nonces_per_min"]) == (1160160, 8.85, poc)


def test_cycles_state_their_runner_and_poc_batch(con):
    """The generator's `Using V2 Model Runner` lines (the DSpark builds) and the chunk build's mining-path
    `PoC /init/generate: … batch_size=8 …` and `PoC stopped: 0 nonces in 1.00min` (routes.py @04ae0271)."""
    from tests.helpers import con_frame

    rows = con_frame(con, "SELECT * FROM host_build_cycles($host, NULL, NULL) ORDER BY started_at", {"host": HOST})
    runners = dict(zip(rows["build"], rows["model_runner"], strict=False))
    assert runners == {BUILD_V1: "V1", BUILD_RAW: "V2", BUILD_FIX: "V2", BUILD_CHUNK: "V2"}
    chunk = rows.filter(rows["build"] == BUILD_CHUNK).row(0, named=True)
    assert (chunk["poc_batch_size"], chunk["poc_nonces_per_min"]) == (8, 0.0)
    assert rows.filter(rows["build"] != BUILD_CHUNK)["poc_batch_size"].null_count() == rows.height - 1


def test_an_epoch_holds_the_cycles_that_began_in_its_span(con):
    rows = run(con, "startup", HOST, epoch=3).rows
    # epoch 3 runs from 2026-10-23 to 2026-10-25T23:30: the OOM restart and the processed_logprobs build's start
    assert rows["build"].to_list() == [BUILD_RAW, BUILD_FIX] and rows["cycles"].to_list() == [1, 1]
    assert rows["time_to_ready_max_s"].to_list() == [RESTART_READY_SECONDS, READY_SECONDS[BUILD_FIX]]
