"""Chain parameters as data: the defaults with their sources, the config's [[chain]] overrides, the warehouse
table, and a preflight check that names a default `assumed` and an override by its source."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pipeline.core.chain import DEFAULTS, SHORT_OUTPUT_DOC, ChainParam, ChainParamError, chain_value
from pipeline.ingest.chain import load_chain_params, read_chain_params
from pipeline.jobs.config import ConfigError, load_config
from pipeline.warehouse.database import open_for_write
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
