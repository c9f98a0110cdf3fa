"""Chain parameters as data: the defaults with their sources, the config's [[chain]] overrides, the warehouse
table, and a preflight check that names a default `assumed` and an override by its source."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pipeline.core.chain import DEFAULTS, QWEN_SOURCE, SHORT_OUTPUT_DOC, ChainParam, ChainParamError, chain_value
from pipeline.evidence import compute
from pipeline.ingest.chain import load_chain_params, read_chain_params
from pipeline.ingest.logs import ingest_logs
from pipeline.jobs.config import ConfigError, load_config
from pipeline.samples.logs import HOST, MODEL, write_log_samples
from pipeline.warehouse.database import fetch_frame, open_for_write
from tests.helpers import con_frame


def test_the_thresholds_of_the_short_output_document_per_model():
    # gonka-ai/gonka devshard/docs/proposals/short-output-validation.md @fd475011
    expected = {
        "DeepSeek-V4-Flash-0731": 0.900,
        "GLM-5.2-FP8": 0.750,
        "GLM-5.3-Flash": 0.951,
        "MiniMax-M2.7": 0.922,
        "Kimi-K2.6": 0.900,
    }
    for model, threshold in expected.items():
        found = chain_value("validation_threshold", model)
        assert (found.value, found.source, found.since, found.assumed) == (threshold, SHORT_OUTPUT_DOC, None, True)
    assert chain_value("validation_threshold", "deepseek-ai/DeepSeek-V4-Flash-0731").value == 0.9  # org ignored
    with pytest.raises(ChainParamError, match="no validation_threshold for model 'Qwen3'"):
        chain_value("validation_threshold", "Qwen3")  # no threshold is invented for a model the document lacks
    with pytest.raises(ChainParamError, match="unknown chain parameter"):
        chain_value("threshold")


def test_the_qwen3_235b_threshold_is_the_v0_2_13_upgrades():
    # gonka-ai/gonka inference-chain/app/upgrades/v0_2_13/upgrades.go @2bb97262: qwenValidationThreshold
    # = Decimal{Value: 940, Exponent: -3} for Qwen/Qwen3-235B-A22B-Instruct-2507-FP8
    for model in ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", MODEL):
        found = chain_value("validation_threshold", model)
        assert (found.value, found.source, found.assumed) == (0.94, QWEN_SOURCE, True)
    # a stated entry for the same model (its organisation named) wins over the default of equal scope
    stated = ChainParam("validation_threshold", "Qwen/Qwen3-235B-A22B", "0.95", None, "gov 30", False)
    assert chain_value("validation_threshold", MODEL, table=[*DEFAULTS, stated]).value == 0.95


def test_the_warehouse_thresholds_are_the_chain_tables(tmp_path):
    """model_validation_thresholds is chain_params' validation_threshold rows (the defaults while empty)."""
    con = open_for_write(tmp_path / "w.duckdb")
    try:
        sql = "SELECT model_pattern, threshold, source, assumed FROM model_validation_thresholds ORDER BY ALL"
        defaults = sorted(
            (p.model, float(p.value), p.source, True) for p in DEFAULTS if p.name == "validation_threshold"
        )
        assert fetch_frame(con, sql).rows() == defaults
        load_chain_params(
            con, [ChainParam("validation_threshold", "zai-org/GLM-5.2-FP8", "0.8", None, "gov 12", False)]
        )
        rows = fetch_frame(con, sql).rows()
        assert ("GLM-5.2-FP8", 0.8, "gov 12", False) in rows
        # the entry (its organisation named) replaced the default of the same model: one table, one row
        assert [r for r in rows if r[0] == "GLM-5.2-FP8"] == [("GLM-5.2-FP8", 0.8, "gov 12", False)]
    finally:
        con.close()


def test_a_chain_entry_changes_the_verdicts_of_the_similarity_table(tmp_path):
    """The sample validator log (model Qwen/Qwen3-235B-A22B-FP8, no threshold on its lines) is judged by
    the chain table: the default 0.940, assumed; a [[chain]] entry of 0.97 from a time on judges the lines
    from then on by 0.97, stated, and the earlier ones still by the default."""
    truth = write_log_samples(tmp_path / "samples")
    scores = sorted(truth.scores, key=lambda s: s["at"])
    since = scores[len(scores) // 2]["at"]
    path = _config(
        tmp_path,
        f'[[chain]]\nname = "validation_threshold"\nmodel = "Qwen3-235B-A22B"\nvalue = 0.97\n'
        f'since = "{since.isoformat()}"\nsource = "gov 31"\n',
    )
    cfg = load_config(path)
    con = open_for_write(tmp_path / "w.duckdb")
    try:
        ingest_logs(con, [truth.files["dapi"]], host=HOST, kind="validator")

        def table():
            row = compute("similarity", con, host=HOST, command="test").rows.row(0, named=True)
            sql = (
                "SELECT threshold, threshold_assumed, passed FROM validation_scores "
                'WHERE value IS NOT NULL ORDER BY "at"'
            )
            return row, fetch_frame(con, sql).rows()

        row, lines = table()
        assert lines == [(0.94, True, s["value"] > 0.94) for s in scores]
        assert (row["judged"], row["passed"]) == (len(scores), sum(s["value"] > 0.94 for s in scores))
        notes = compute("similarity", con, host=HOST, command="test").notes
        assert any(f"{len(scores)} score(s) judged against an assumed validation threshold" in n for n in notes)

        load_chain_params(con, cfg.chain)
        row, lines = table()
        expected = [
            (0.97, False, s["value"] > 0.97) if s["at"] >= since else (0.94, True, s["value"] > 0.94) for s in scores
        ]
        assert lines == expected
        passed = sum(p for _, _, p in expected)
        assert passed < sum(s["value"] > 0.94 for s in scores)  # the entry changes the verdicts
        assert (row["judged"], row["passed"]) == (len(scores), passed)
    finally:
        con.close()


def test_every_model_values_and_the_time_they_apply_from():
    assert chain_value("logprobs_mode", "GLM-5.2-FP8").value == "processed_logprobs"
    assert chain_value("poc_seq_len").value == 1024
    later = ChainParam("logprobs_mode", None, "raw_logprobs", datetime(2026, 12, 1, tzinfo=UTC), "gov 57", False)
    table = [*DEFAULTS, later]
    before = chain_value("logprobs_mode", at=datetime(2026, 11, 30, tzinfo=UTC), table=table)
    after = chain_value("logprobs_mode", at=datetime(2026, 12, 2, tzinfo=UTC), table=table)
    assert (before.value, before.assumed) == ("processed_logprobs", True)
    assert (after.value, after.source, after.assumed) == ("raw_logprobs", "gov 57", False)
    assert chain_value("logprobs_mode", table=table).value == "raw_logprobs"  # no time: the newest


def _config(tmp_path, chain: str):
    path = tmp_path / "gonka-evidence.toml"
    path.write_text(f'host = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"\n{chain}', encoding="utf-8")
    return path


def test_a_config_entry_overrides_a_default_and_is_not_assumed(tmp_path):
    path = _config(
        tmp_path,
        '[[chain]]\nname = "validation_threshold"\nmodel = "GLM-5.2-FP8"\nvalue = 0.8\nsource = "gov 12"\n'
        '[[chain]]\nname = "poc_seq_len"\nvalue = 2048\n',
    )
    cfg = load_config(path)
    con = open_for_write(tmp_path / "w.duckdb")
    try:
        assert load_chain_params(con, cfg.chain) == len(DEFAULTS)  # both replace a default of the same key
        rows = con_frame(con, "SELECT * FROM chain_params WHERE NOT assumed ORDER BY name")
        assert rows.select("name", "model", "value", "source").rows() == [
            ("poc_seq_len", None, "2048", f"config {path}"),
            ("validation_threshold", "GLM-5.2-FP8", "0.8", "gov 12"),
        ]
        table = read_chain_params(con)
    finally:
        con.close()
    glm = chain_value("validation_threshold", "GLM-5.2-FP8", table=table)
    assert (glm.value, glm.source, glm.assumed) == (0.8, "gov 12", False)
    kimi = chain_value("validation_threshold", "Kimi-K2.6", table=table)
    assert (kimi.value, kimi.assumed) == (0.9, True)
    assert chain_value("poc_seq_len", table=table).describe() == f"2048 (config {path})"


def test_an_empty_table_means_the_defaults(tmp_path):
    con = open_for_write(tmp_path / "w.duckdb")
    try:
        assert read_chain_params(con) is None
    finally:
        con.close()


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('name = "threshold"\nvalue = 1', "name 'threshold' is not one of validation_threshold"),
        ('name = "poc_seq_len"\nvalue = "long"', "value 'long' is not a whole number"),
        ('name = "logprobs_mode"\nvalue = true', "value must be a string or a number, not a boolean"),
        ('name = "poc_seq_len"\nvalue = 2.5', "value 2.5 is not a whole number"),
        ('name = "logprobs_mode"\nvalue = "x"\nsince = "yesterday"', "since 'yesterday' is not an ISO-8601 time"),
        ('name = "logprobs_mode"\nvalue = "x"\nmodels = "y"', "unknown key(s) models"),
    ],
)
def test_a_bad_chain_entry_is_a_one_line_error(tmp_path, entry, message):
    with pytest.raises(ConfigError) as err:
        load_config(_config(tmp_path, f"[[chain]]\n{entry}\n"))
    assert message in str(err.value) and "[[chain]] entry 1" in str(err.value) and "\n" not in str(err.value)
