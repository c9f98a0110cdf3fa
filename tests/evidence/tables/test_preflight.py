"""The preflight table and command: each of the six checks passes, fails and cannot tell on sample builds.

The warehouse is data-samples/ with its vLLM log (builds V1, raw_logprobs, processed_logprobs + fix), plus a
second vLLM log of the focal host written by the sample generator's `VllmFile` for three probe builds laid
before the samples' data: one whose start hangs on a DSpark config without K, chunk 2048 and PoC batch 8
(PoC 0 nonces); one with K = 7, chunk 8192 and PoC batch 4 that produced nonces; one with no log at all.
"""

from __future__ import annotations

import random
import shlex
import sys
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from pipeline.core.paths import DATA_SAMPLES_DIR
from pipeline.evidence.stats import fisher_exact_2x2
from pipeline.evidence.window import EvidenceError
from pipeline.samples.logs import LogTruth, VllmFile
from pipeline.samples.spec import BUILD_CHUNK, BUILD_FIX, BUILD_RAW, BUILD_V1
from pipeline.samples.vllm_log import ARGS, ENGINE_CONFIG
from pipeline.warehouse.database import fetch_frame, open_for_write, open_read_only
from tests.factories import data_samples_warehouse, load_builds_of
from tests.helpers import evidence as run

HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # focal host of data-samples/
COUPLED = "probe: DSpark without K, chunk 2048, PoC batch 8, start-up hang"
SOUND = "probe: DSpark K 7, chunk 8192, PoC batch 4"
SILENT = "probe: no vLLM log"
PROBES = {
    COUPLED: datetime(2026, 10, 8, tzinfo=UTC),
    SOUND: datetime(2026, 10, 10, tzinfo=UTC),
    SILENT: datetime(2026, 10, 12, tzinfo=UTC),
    BUILD_V1: datetime(2026, 10, 13, tzinfo=UTC),  # the samples' first build again, before its data
}
runner = CliRunner()
DSPARK_MODEL = "deepseek-ai/DeepSeek-V4-Flash"  # the served model the bundled samples' DSpark builds run


def _probe_log(path) -> None:
    """Two start cycles of the probes, in the samples' V1 log format (0.23.1 prints its non-default args)."""

    def build_at(at: datetime) -> str:
        return max((since, label) for label, since in PROBES.items() if since <= at)[1]

    f = VllmFile(
        LogTruth(host=HOST, executor=""),
        random.Random(3),
        "0.23.1",
        PROBES[COUPLED] + (PROBES[SOUND] - PROBES[COUPLED]) / 2,
        proc="EngineCore_DP0",
        api_pid=1,
        build_at=build_at,
        stats_proc="APIServer",
    )
    f.engine_config = ENGINE_CONFIG
    f.start_args = ARGS | {
        "max_num_batched_tokens": 2048,
        "logprobs_mode": "processed_logprobs",
        "speculative_config": {"method": "dspark"},
    }
    f.spec_config = "SpeculativeConfig(method='dspark')"
    f.start(ready_after=300, hang_s=900)  # 15 minutes with no engine line, as on the hub lookup
    f.poc(0, batch_size=8)  # one forward is 8 x 1024 tokens in a 2048-token buffer: no nonce
    f.t = PROBES[SOUND] + (PROBES[SILENT] - PROBES[SOUND]) / 2
    # DeepSeek-V4-Flash, whose DSpark block size is known (5, view dspark_block_sizes), at K = 7
    f.start_args = ARGS | {
        "model_tag": DSPARK_MODEL,
        "model": DSPARK_MODEL,
        "logprobs_mode": "processed_logprobs",
        "speculative_config": {"method": "dspark", "num_speculative_tokens": 7},
    }
    f.spec_config = "SpeculativeConfig(method='dspark', num_spec_tokens=7)"
    f.model = DSPARK_MODEL
    f.start(ready_after=300)
    f.poc(3000, batch_size=4)
    f.write(path)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    from pipeline.ingest.logs import ingest_logs

    root = tmp_path_factory.mktemp("preflight")
    path = data_samples_warehouse(root / "w.duckdb", vllm_log_host=HOST)
    _probe_log(root / "probe" / "vllm.log")
    con = open_for_write(path)
    try:
        ingest_logs(con, [root / "probe" / "vllm.log"], host=HOST, kind="vllm", year=2026)
    finally:
        con.close()
    probes = "".join(
        f'\n[[builds]]\nhost  = "{HOST}"\nlabel = "{label}"\nsince = "{since:%Y-%m-%dT%H:%M:%SZ}"\n'
        for label, since in PROBES.items()
    )
    (root / "builds.toml").write_text((DATA_SAMPLES_DIR / "builds.toml").read_text() + probes)
    load_builds_of(path, root / "builds.toml")
    return path


def preflight(path, build: str | None = None):
    """The preflight table of the samples' host, over all data or one build, read from `path`."""
    con = open_read_only(path)
    try:
        return run(con, "preflight", HOST, **({"build": build} if build else {}))
    finally:
        con.close()


@pytest.fixture(scope="module")
def verdicts(warehouse):
    """(build, check name) → (verdict, evidence, to_decide) over all data."""
    result = preflight(warehouse)
    rows = result.rows.iter_rows(named=True)
    return {(r["build"], r["name"]): (r["verdict"], r["evidence"], r["to_decide"]) for r in rows}


def verdict(verdicts, build: str, check: str) -> str:
    return verdicts[(build, check)][0]


def test_every_build_gets_the_six_checks_in_order(warehouse):
    result = preflight(warehouse)
    builds = [BUILD_V1, COUPLED, SOUND, SILENT, BUILD_RAW, BUILD_FIX, BUILD_CHUNK]  # by first start
    assert result.rows["build"].to_list() == [b for b in builds for _ in range(6)]
    assert result.rows["name"].to_list()[:6] == ["replay", "logprobs", "memory", "poc", "startup", "speculative"]
    assert set(result.rows["verdict"]) == {"pass", "fail", "cannot tell"}
    # cannot tell always says what would decide it; pass and fail never leave it open
    for row in result.rows.iter_rows(named=True):
        assert bool(row["to_decide"]) == (row["verdict"] == "cannot tell"), row


def test_replay_fails_on_nearly_all_invalid_verdicts_against_the_network(verdicts):
    v, evidence, _ = verdicts[(BUILD_RAW, "replay")]
    assert v == "fail"
    assert evidence.startswith("INVALID on 45 of 49 (92%)") and "the network" in evidence and "p = " in evidence
    v, evidence, _ = verdicts[(BUILD_FIX, "replay")]
    assert v == "pass" and evidence.startswith("INVALID on 3 of 23 (13%)")
    assert "earlier build 'V2 + DSpark, raw_logprobs': 45 of 49" in evidence
    assert "runner V2 ('Using V2 Model Runner')" in evidence  # the runner as the start lines state it
    v, evidence, decide = verdicts[(BUILD_V1, "replay")]
    assert (v, evidence) == (
        "cannot tell",
        "INVALID on 1 of 9 (11%) of its verdicts on other hosts' answers; "
        "runner V1 (the model loaded without 'Using V2 Model Runner')",
    )
    assert decide == "at least 10 verdicts of this build on other hosts' answers"


def test_logprobs_fails_on_the_default_mode_under_dspark_and_on_the_sampling_symptom(verdicts):
    v, evidence, _ = verdicts[(BUILD_RAW, "logprobs")]
    assert v == "fail"
    assert "logprobs_mode raw_logprobs" in evidence  # not stated: vLLM's default, since the args line is printed
    assert "sampled 51 of 51 (100%), greedy 0 of 9 (0%)" in evidence
    # the chain's mode is this release's default (no [[chain]] entry in the warehouse): said to be assumed
    assert "chain expects processed_logprobs (assumed)" in evidence
    assert "the V2 runner ignores the per-request mode" in evidence
    assert verdict(verdicts, BUILD_FIX, "logprobs") == "pass"
    # V1 without DSpark honours the per-request mode, and 2 judged sampled answers cannot show the symptom
    v, evidence, decide = verdicts[(BUILD_V1, "logprobs")]
    assert v == "cannot tell" and "sampled 0 of 2" in evidence and "10 judged sampled answers" in decide
    assert verdict(verdicts, SILENT, "logprobs") == "cannot tell"


def test_memory_fails_on_the_oom_death_and_needs_hours_of_log_to_pass(verdicts):
    v, evidence, _ = verdicts[(BUILD_RAW, "memory")]
    assert v == "fail"
    assert "OOM death at 2026-10-23T04:15:45Z" in evidence
    assert "gpu_memory_utilization 0.92, max_num_batched_tokens 8192" in evidence
    assert verdict(verdicts, BUILD_FIX, "memory") == "pass"
    v, evidence, _ = verdicts[(COUPLED, "memory")]  # the probe file runs a day under it, without a death
    assert v == "pass" and "in 24.0 h of log" in evidence and "max_num_batched_tokens 2048" in evidence
    v, evidence, decide = verdicts[(SILENT, "memory")]  # no log under it at all
    assert v == "cannot tell" and "in 0.0 h of log" in evidence and decide == "at least 6 h of this build's vLLM log"


def test_poc_fails_on_batch_coupling_and_empty_windows(verdicts):
    # the probes only mine: their batch is stated by the mining path's `PoC /init/generate: … batch_size=B …`
    # (gonka-ai/gonka-vllm-plugins src/gonka_poc/poc/routes.py @04ae0271), not by the wait path's line
    v, evidence, _ = verdicts[(COUPLED, "poc")]
    assert v == "fail"
    assert "PoC batch 8" in evidence and "8 x 1024 = 8192 > 2048 (PoC seq_len 1024 (assumed))" in evidence
    assert "PoC rate 0 nonces/min" in evidence  # `PoC stopped: 0 nonces in 1.00min`
    assert "1 of 1 PoC windows stopped with 0 nonces or crashed" in evidence
    v, evidence, _ = verdicts[(SOUND, "poc")]
    assert v == "pass" and "4 x 1024 = 4096 <= 8192" in evidence and "PoC rate 3000 nonces/min" in evidence
    v, evidence, decide = verdicts[(BUILD_FIX, "poc")]  # the samples' log states no PoC batch and has no window
    assert v == "cannot tell" and "PoC batch not stated" in evidence and "batch_size=B" in decide


def test_startup_fails_on_a_launch_with_no_engine_line_for_minutes(verdicts):
    v, evidence, _ = verdicts[(COUPLED, "startup")]
    assert v == "fail" and "engine line after 900 s" in evidence
    assert "HF_HUB_OFFLINE not stated" in evidence
    assert verdict(verdicts, SOUND, "startup") == verdict(verdicts, BUILD_FIX, "startup") == "pass"
    assert verdict(verdicts, SILENT, "startup") == "cannot tell"


def test_speculative_fails_when_k_is_unset_and_flags_k_above_the_block(verdicts):
    assert verdict(verdicts, COUPLED, "speculative") == "fail"
    assert "num_speculative_tokens unset" in verdicts[(COUPLED, "speculative")][1]
    # K = 7 on the 5-token block: the engine started (vLLM refuses only K below the block): not a failure,
    # the acceptance table's flag (changed on purpose: a failure was reported for an engine that started)
    v, evidence, _ = verdicts[(SOUND, "speculative")]
    assert v == "pass" and "num_speculative_tokens 7; DSpark block size 5" in evidence
    assert "K above the block starts" in evidence and "`k_off_block`" in evidence
    assert verdict(verdicts, BUILD_FIX, "speculative") == "pass"
    assert verdict(verdicts, BUILD_V1, "speculative") == "pass"  # no DSpark: stated, the rule does not apply
    assert verdict(verdicts, SILENT, "speculative") == "cannot tell"


def test_one_build_and_the_builds_since_a_time(warehouse):
    con = open_read_only(warehouse)
    try:
        one = run(con, "preflight", HOST, build=BUILD_FIX)
        assert set(one.rows["build"]) == {BUILD_FIX} and one.rows.height == 6
        since = run(con, "preflight", HOST, builds_since="2026-10-22T00:00:00Z")
        assert since.rows["build"].unique(maintain_order=True).to_list() == [BUILD_RAW, BUILD_FIX, BUILD_CHUNK]
        assert since.stats["failed"] == [
            f"{BUILD_RAW}: 1 replay",
            f"{BUILD_RAW}: 2 logprobs",
            f"{BUILD_RAW}: 3 memory",
            f"{BUILD_CHUNK}: 2 logprobs",
            f"{BUILD_CHUNK}: 4 poc",
        ]
        with pytest.raises(EvidenceError, match="has no build 'V3'"):
            run(con, "preflight", HOST, build="V3")
        with pytest.raises(EvidenceError, match="not both"):
            run(con, "preflight", HOST, build=BUILD_FIX, builds_since="2026-10-22")
    finally:
        con.close()


def test_the_command_exits_3_with_strict_when_a_check_fails(warehouse, monkeypatch):
    args = ["preflight", "--host", HOST, "--warehouse", str(warehouse)]
    failing = runner.invoke(app, [*args, "--build", BUILD_RAW, "--strict"])
    assert failing.exit_code == 3, failing.output
    assert "| V2 + DSpark, raw_logprobs | 1 | replay |" in failing.stdout
    assert runner.invoke(app, [*args, "--build", BUILD_RAW]).exit_code == 0  # without --strict: reported only
    # the processed_logprobs build fails nothing (PoC cannot tell): --strict passes
    clean_args = [*args, "--build", BUILD_FIX, "--strict", "--format", "json"]
    monkeypatch.setattr(sys, "argv", ["gonka-evidence", *clean_args])  # as the console script sees it
    clean = runner.invoke(app, clean_args)
    assert clean.exit_code == 0, clean.output
    document = orjson.loads(clean.stdout)
    assert document["evidence"] == "preflight" and document["stats"]["failed"] == []
    assert [r["verdict"] for r in document["rows"]] == ["pass", "pass", "pass", "cannot tell", "pass", "pass"]
    assert document["provenance"]["command"] == shlex.join(["gonka-evidence", *clean_args])


def test_the_command_rejects_build_with_since_and_unknown_builds_in_one_line(warehouse):
    args = ["preflight", "--host", HOST, "--warehouse", str(warehouse)]
    both = runner.invoke(app, [*args, "--build", BUILD_FIX, "--since", "2026-10-22"])
    assert both.exit_code == 2 and "not both" in both.output
    unknown = runner.invoke(app, [*args, "--build", "V3"])
    assert unknown.exit_code == 1 and "Traceback" not in unknown.output
    assert unknown.stderr.strip().splitlines()[-1].startswith("error: host ")


def test_one_sided_fisher_is_exact():
    # 29 sampled answers all invalid against 2 greedy all valid: the observed table is the most extreme of C(31, 2)
    assert fisher_exact_2x2(29, 0, 0, 2, alternative="greater").p_value == pytest.approx(1 / 465)
    assert fisher_exact_2x2(29, 0, 0, 2).alternative == "two-sided"


def test_the_samples_chunk_build_fails_logprobs_and_poc(verdicts):
    """The samples' fourth build, deployed after the copy: vLLM's default logprobs mode under DSpark, and a 2048-token
    chunk that its PoC batch 8 does not fit (its PoC window stops with 0 nonces)."""
    found = {check: verdicts[(BUILD_CHUNK, check)] for check in ("replay", "logprobs", "memory", "poc", "startup")}
    assert [v for v, _, _ in found.values()] == ["cannot tell", "fail", "cannot tell", "fail", "pass"]
    assert "logprobs_mode raw_logprobs" in found["logprobs"][1] and "V2 runner" in found["logprobs"][1]
    poc = found["poc"][1]
    assert "PoC batch 8" in poc and "8 x 1024 = 8192 > 2048" in poc and "1 of 1 PoC windows stopped with 0" in poc
    assert verdict(verdicts, BUILD_CHUNK, "speculative") == "pass"


# Builds attributed as `builds check` does: the next build's first start line comes 2 minutes
# before its declared since, which `builds check` accepts; and a DSpark start vLLM refused for want of K.
EARLY_V1 = "probe: V1, processed_logprobs"
EARLY_V2 = "probe: V2 + DSpark, raw_logprobs"
REFUSED = "probe: DSpark without K, refused at start"
SHORT_K = "probe: DSpark K=3, below the block"
EARLY = {
    EARLY_V1: datetime(2026, 9, 1, tzinfo=UTC),
    EARLY_V2: datetime(2026, 9, 2, 12, tzinfo=UTC),
    REFUSED: datetime(2026, 9, 3, tzinfo=UTC),
    SHORT_K: datetime(2026, 9, 3, 12, tzinfo=UTC),
    BUILD_V1: datetime(2026, 9, 4, tzinfo=UTC),  # the samples' first build, before its data
}
# What the API server prints when vLLM refuses the speculative config at start-up: its configs are pydantic
# dataclasses, so the traceback ends in pydantic's `ValidationError: 1 validation error for <class>` and the
# message line under it. The message is vLLM's DSpark guard (vllm-project/vllm#47419, vllm/config/speculative.py
# at v0.26.0, as vllm-project/vllm#50012 quotes it): K left out defaults to the draft's n_predict (1), below
# the block.
DSPARK_REFUSAL = (
    "DSpark requires num_speculative_tokens >= dspark_block_size (5); got 1. Smaller values produce incorrect "
    "output. Use num_speculative_tokens=5 or larger (e.g. 7)."
)
REFUSAL = (
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/engine/arg_utils.py", line 1370, '
    "in create_speculative_config",
    "    return SpeculativeConfig(**self.speculative_config)",
    "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
    f"  Value error, {DSPARK_REFUSAL} [type=value_error, input_value=ArgsKwargs(()), input_type=ArgsKwargs]",
    "    For further information visit https://errors.pydantic.dev/2.11/v/value_error",
)


def _attribution_log(path) -> None:
    def build_at(at: datetime) -> str:
        return max((since, label) for label, since in EARLY.items() if since <= at + timedelta(minutes=5))[1]

    f = VllmFile(
        LogTruth(host=HOST, executor=""),
        random.Random(5),
        "0.23.1",
        EARLY[EARLY_V1],
        proc="EngineCore_DP0",
        api_pid=1,
        build_at=build_at,
        stats_proc="APIServer",
    )
    f.engine_config, f.spec_config = ENGINE_CONFIG, None
    f.start_args = ARGS | {"logprobs_mode": "processed_logprobs"}  # every V1 start line says processed_logprobs
    f.start(ready_after=300)
    f.t = EARLY[EARLY_V2] - timedelta(minutes=2)  # the next build starts 2 minutes before its declared since
    f.start_args = ARGS | {  # DeepSeek-V4-Flash: its DSpark block size is known (5, view dspark_block_sizes)
        "model_tag": DSPARK_MODEL,
        "model": DSPARK_MODEL,
        "speculative_config": {"method": "dspark", "num_speculative_tokens": 5},
    }
    f.spec_config, f.v2_runner, f.model = "SpeculativeConfig(method='dspark', num_spec_tokens=5)", True, DSPARK_MODEL
    f.start(ready_after=300)
    f.advance(600)  # serving: an error that names DSpark after the server was ready is no start-up error
    f.log("ERROR", "core.py:842", "Request chatcmpl-1 failed")
    f.raw("Traceback (most recent call last):")
    f.raw("RuntimeError: dspark proposer: draft tokens out of range")
    f.t = EARLY[REFUSED] + timedelta(minutes=1)
    f.log("INFO", "api_server.py:1043", "vLLM API server version 0.23.1", proc="APIServer")
    f.log(
        "INFO",
        "utils.py:233",
        f"non-default args: {ARGS | {'speculative_config': {'method': 'dspark'}}!r}",
        proc="APIServer",
    )
    for line in REFUSAL:  # the API server's traceback: the engine never starts
        f.raw(f"(APIServer pid=1) {line}")
    f.t = EARLY[SHORT_K] + timedelta(minutes=1)  # K = 3 on the 5-token block: the same guard refuses it
    f.log("INFO", "api_server.py:1043", "vLLM API server version 0.23.1", proc="APIServer")
    spec = {"method": "dspark", "num_speculative_tokens": 3}
    f.log("INFO", "utils.py:233", f"non-default args: {ARGS | {'speculative_config': spec}!r}", proc="APIServer")
    for line in REFUSAL:
        f.raw(f"(APIServer pid=1) {line.replace('got 1.', 'got 3.')}")
    f.write(path)


@pytest.fixture(scope="module")
def attributed(tmp_path_factory):
    from pipeline.ingest.logs import ingest_logs

    root = tmp_path_factory.mktemp("preflight-attribution")
    path = data_samples_warehouse(root / "w.duckdb", vllm_log_host=HOST)
    _attribution_log(root / "probe" / "vllm.log")
    con = open_for_write(path)
    try:
        ingest_logs(con, [root / "probe" / "vllm.log"], host=HOST, kind="vllm", year=2026)
    finally:
        con.close()
    probes = "".join(
        f'\n[[builds]]\nhost  = "{HOST}"\nlabel = "{label}"\nsince = "{since:%Y-%m-%dT%H:%M:%SZ}"\n'
        for label, since in EARLY.items()
    )
    (root / "builds.toml").write_text((DATA_SAMPLES_DIR / "builds.toml").read_text() + probes)
    load_builds_of(path, root / "builds.toml")
    return path, root / "builds.toml"


def test_a_start_line_before_its_builds_since_is_that_builds_as_builds_check_says(attributed):
    from pipeline.evidence.buildcheck import check
    from pipeline.ingest.builds import read_builds

    path, toml = attributed
    con = open_read_only(path)
    try:
        result = run(con, "preflight", HOST)
        found = check(con, read_builds(toml), HOST)
    finally:
        con.close()
    # `builds check` takes the start 2 minutes early as the boundary: no contradiction about it
    assert not [c for c in found.contradictions if "probe:" in c], found.contradictions
    rows = {(r["build"], r["name"]): r for r in result.rows.iter_rows(named=True)}
    v1 = rows[(EARLY_V1, "logprobs")]
    # the V1 build keeps only its own start (processed_logprobs, V1 runner); before, the V2 start 2 minutes early
    # was its by the as-of join, and its raw_logprobs under DSpark failed the V1 build
    assert v1["verdict"] == "pass" and v1["evidence"].startswith("logprobs_mode processed_logprobs;")
    assert "; runner V1 (the model loaded without 'Using V2 Model Runner'); invalidated" in v1["evidence"]
    v2 = rows[(EARLY_V2, "logprobs")]
    assert v2["verdict"] == "fail" and "logprobs_mode raw_logprobs" in v2["evidence"]
    assert "runner V2 ('Using V2 Model Runner')" in v2["evidence"]
    assert rows[(EARLY_V2, "speculative")]["verdict"] == "pass"  # its DSpark error came after ready


def test_a_start_up_error_naming_the_speculative_config_fails_check_6(attributed):
    path, _ = attributed
    result = preflight(path, build=REFUSED)
    row = result.rows.filter(result.rows["name"] == "speculative").row(0, named=True)
    assert row["verdict"] == "fail"
    assert "num_speculative_tokens unset" in row["evidence"]  # the launch's own non-default args, K left out
    assert "start-up error naming the speculative config (line " in row["evidence"]
    assert (
        "1 validation error for SpeculativeConfig: Value error, DSpark requires num_speculative_tokens"
        in (row["evidence"])
    )  # vLLM's reason, the message line under pydantic's header
    con = open_read_only(path)
    try:  # the serving error after ready is a config_error event too; only the start-up one fails check 6
        kinds = fetch_frame(con, "SELECT detail FROM engine_events WHERE kind = 'config_error' ORDER BY \"at\"", {})
    finally:
        con.close()
    assert kinds["detail"].to_list()[0].endswith("RuntimeError: dspark proposer: draft tokens out of range")
    assert len(kinds) == 3  # and the K = 3 probe's refusal
    startup = result.rows.filter(result.rows["name"] == "startup").row(0, named=True)
    assert "1 launch(es)" in startup["evidence"]  # a launch, and no engine line after it


def test_k_below_the_block_fails_check_6(attributed):
    path, _ = attributed
    result = preflight(path, build=SHORT_K)
    row = result.rows.filter(result.rows["name"] == "speculative").row(0, named=True)
    assert row["verdict"] == "fail"
    assert "num_speculative_tokens 3; DSpark block size 5" in row["evidence"]
    assert "got 3. Smaller values produce incorrect output" in row["evidence"]


def test_a_chain_value_from_the_config_is_named_by_its_source_not_assumed(warehouse, tmp_path):
    import shutil

    from pipeline.core.chain import ChainParam
    from pipeline.ingest.chain import load_chain_params

    path = tmp_path / "w.duckdb"
    shutil.copyfile(warehouse, path)
    con = open_for_write(path)
    try:
        load_chain_params(con, [ChainParam("poc_seq_len", None, "256", None, "gov 12", assumed=False)])
    finally:
        con.close()
    result = preflight(path, build=COUPLED)
    poc = result.rows.filter(result.rows["name"] == "poc").row(0, named=True)
    assert "8 x 256 = 2048 <= 2048 (PoC seq_len 256 (gov 12))" in poc["evidence"] and "assumed" not in poc["evidence"]
    assert poc["verdict"] == "fail"  # its PoC window still stopped with 0 nonces
    logprobs = result.rows.filter(result.rows["name"] == "logprobs").row(0, named=True)
    assert "chain expects processed_logprobs (assumed)" in logprobs["evidence"]  # no entry: the default


AUTO = "probe: decode-PoC release, PoC batch automatic"
AUTO_SINCE = datetime(2026, 10, 6, tzinfo=UTC)


def test_a_batch_size_of_0_is_the_plugins_automatic_sizing_not_a_batch(warehouse, tmp_path):
    """gonka-ai/gonka-vllm-plugins src/gonka_poc/poc/routes.py @a6a28429 (the decode-PoC release): `init_generate`
    logs f"PoC /init/generate: block_hash={…} block_height={…} node={…}/{…} group={…}/{…} batch_size={body.batch_size}
    url={bool(body.url)}", and `_generate_decode` says "batch_size == 0 means AUTO" (the plugin sizes the batch, up
    to POC_DECODE_MAX_BATCH). A mining window opened with batch_size=0 states no batch: check 4 cannot tell
    (before: a batch of 0, 0 x 1024 <= 2048, pass)."""
    import shutil

    from pipeline.ingest.logs import ingest_logs

    path = tmp_path / "w.duckdb"
    shutil.copyfile(warehouse, path)
    f = VllmFile(
        LogTruth(host=HOST, executor=""),
        random.Random(7),
        "0.23.1",
        AUTO_SINCE + timedelta(hours=1),
        proc="EngineCore_DP0",
        api_pid=1,
        build_at=lambda at: AUTO,
        stats_proc="APIServer",
    )
    f.engine_config, f.spec_config = ENGINE_CONFIG, None
    f.start_args = ARGS | {"max_num_batched_tokens": 2048, "logprobs_mode": "processed_logprobs"}
    f.start(ready_after=300)
    f.poc(0, batch_size=0, release="a6a28429", stopped=False)  # the log ends in the window
    log = f.write(tmp_path / "probe" / "vllm.log")
    assert "group=0/1 batch_size=0 url=True\n" in log.read_text()  # the release's format, no poc_stronger_rng
    con = open_for_write(path)
    try:
        ingest_logs(con, [log], host=HOST, kind="vllm", year=2026)
    finally:
        con.close()
    entries = {**PROBES, AUTO: AUTO_SINCE}
    probes = "".join(
        f'\n[[builds]]\nhost  = "{HOST}"\nlabel = "{label}"\nsince = "{since:%Y-%m-%dT%H:%M:%SZ}"\n'
        for label, since in entries.items()
    )
    (tmp_path / "builds.toml").write_text((DATA_SAMPLES_DIR / "builds.toml").read_text() + probes)
    load_builds_of(path, tmp_path / "builds.toml")
    result = preflight(path, build=AUTO)
    poc = result.rows.filter(result.rows["name"] == "poc").row(0, named=True)
    assert poc["verdict"] == "cannot tell", poc
    assert poc["evidence"].startswith("PoC batch automatic (batch_size=0 on line ")
    assert "not stated by the log); max_num_batched_tokens 2048;" in poc["evidence"]
    assert " x 1024" not in poc["evidence"] and "0 of 0 PoC windows" in poc["evidence"]
    assert "0 is the plugin's automatic sizing" in poc["to_decide"]
