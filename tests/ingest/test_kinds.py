"""The registry of source kinds (pipeline/ingest/kinds.py) and what is derived from it: config keys and
kinds, `ingest-logs --kind`, log-file detection, run's dispatch and the docs' table of kinds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.ingest.kinds import LOG_KINDS, SOURCE_KINDS, describe_kinds, detect_kind, kind_of, resolve
from pipeline.ingest.logs import ingest_logs
from pipeline.jobs.config import SOURCE_KEYS, ConfigError, load_config, source_kind
from pipeline.samples.logs import HOST, write_log_samples
from pipeline.sources.logs.files import expand
from pipeline.sources.store.base import SourceError
from pipeline.warehouse.database import open_for_write

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("store", "postgres", "vllm", "validator", "poc", "metrics", "json")


def test_every_registered_function_resolves_and_each_log_format_is_complete():
    assert tuple(SOURCE_KINDS) == NAMES
    assert tuple(LOG_KINDS) == ("vllm", "validator", "poc", "metrics")
    for kind in SOURCE_KINDS.values():
        assert callable(resolve(kind.ingester)), kind.name
        assert kind.summary and kind.tables, kind.name
    fallbacks = [name for name, kind in LOG_KINDS.items() if kind.log and kind.log.detects is None]
    assert fallbacks == ["vllm"]
    ranks = [kind.log.rank for kind in LOG_KINDS.values() if kind.log and kind.log.detects]
    assert len(set(ranks)) == len(ranks)
    quarantine = [kind.log.quarantine_table for kind in LOG_KINDS.values() if kind.log]
    assert quarantine == ["vllm_log", "validator_log", "poc_result", "metrics_scrape"]
    for kind in LOG_KINDS.values():
        assert kind.log is not None
        assert callable(resolve(kind.log.ingests))
        for target in (kind.log.detects, kind.log.reader):
            assert target is None or callable(resolve(target)), (kind.name, target)
        if kind.log.reader is not None:  # the keyed insert fills the kind's one table
            assert len(kind.tables) == 1, kind.name


def test_config_keys_and_kinds_are_the_registrys():
    assert SOURCE_KEYS == ("url", "path", "kind", "label", "timezone", "year")
    assert SOURCE_KINDS["vllm"].keys == ("timezone", "year")
    docs = {row["name"]: row for row in describe_kinds()}
    assert tuple(docs) == NAMES
    assert docs["vllm"]["keys"] == SOURCE_KEYS and docs["vllm"]["log"] is True
    assert docs["store"]["recognised_by"] == "a directory with `_meta.db` or `epoch_<N>.db`"
    assert docs["postgres"]["recognised_by"] == "a `url`"
    assert docs["validator"]["recognised_by"] is None and docs["validator"]["tables"] == ("log_validation_scores",)
    assert docs["json"]["tables"] == ("api_participants", "api_counters", "chain_participant_stats")


def test_kind_of_an_entry_given_without_kind(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (store / "_meta.db").write_bytes(b"")
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "participants-3.json").write_text("{}")
    assert source_kind({"url": "postgres"}) == "postgres"
    assert source_kind({"path": str(store)}) == "store"
    assert source_kind({"path": str(saved)}) == "json"
    assert kind_of({"path": str(tmp_path), "kind": "poc"}) is SOURCE_KINDS["poc"]
    with pytest.raises(SourceError) as err:
        source_kind({"path": str(tmp_path / "logs")})
    assert str(err.value) == (
        f"{tmp_path / 'logs'}: cannot tell what this source is; "
        "give kind = one of store, postgres, vllm, validator, poc, metrics, json"
    )


def test_a_config_with_an_unknown_key_or_kind_names_the_registered_ones(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[[sources]]\npath = "x"\nzone = "UTC"\n')
    with pytest.raises(ConfigError) as err:
        load_config(config)
    assert str(err.value) == (
        f"{config}: [[sources]] entry 1 has unknown key(s) zone (keys: url, path, kind, label, timezone, year)"
    )
    config.write_text('[[sources]]\npath = "x"\nkind = "syslog"\n')
    with pytest.raises(ConfigError) as err:
        load_config(config)
    assert str(err.value) == (
        f"{config}: source kind 'syslog' is not one of store, postgres, vllm, validator, poc, metrics, json"
    )


def test_reading_a_config_loads_no_engine(tmp_path):
    """The registry names its functions as strings: reading a config and telling its sources' kinds
    imports neither Polars nor DuckDB."""
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "_meta.db").write_bytes(b"")
    (tmp_path / "c.toml").write_text('[[sources]]\npath = "store"\n[[sources]]\npath = "logs"\nkind = "vllm"\n')
    probe = (
        "import sys; from pathlib import Path; from pipeline.jobs.config import load_config, source_kind; "
        f"cfg = load_config(Path({str(tmp_path / 'c.toml')!r})); "
        "print([source_kind(s) for s in cfg.sources], [m for m in ('polars', 'duckdb') if m in sys.modules])"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert (result.returncode, result.stdout) == (0, "['store', 'vllm'] []\n"), result.stderr


def test_ingest_logs_kind_choices_and_help_come_from_the_registry(tmp_path):
    from pipeline.cli.app import app

    help_text = " ".join(CliRunner().invoke(app, ["ingest-logs", "--help"], terminal_width=200).output.split())
    assert "vllm, validator, poc or metrics (default: detected per file)." in help_text
    con = open_for_write(tmp_path / "w.duckdb")
    with pytest.raises(SourceError) as err:
        ingest_logs(con, [tmp_path], host=HOST, kind="store")
    con.close()
    assert str(err.value) == "unknown --kind 'store'; choose one of vllm, validator, poc, metrics"


def test_each_sample_file_is_detected_and_fills_only_its_kinds_tables(tmp_path):
    """Every sample file, read with the kind detected for it, fills rows of that kind's tables only."""
    root = tmp_path / "samples"
    write_log_samples(root)
    con = open_for_write(tmp_path / "w.duckdb")
    seen = set()
    for file in expand([root / "vllm", root / "metrics", root / "dapi.log", root / "poc"]):
        name = detect_kind(file)
        summary = ingest_logs(con, [file.path], host=HOST, kind=name)
        filled = {table for table, n in summary.rows.items() if n}
        assert filled and filled <= set(SOURCE_KINDS[name].tables), (file.path.name, name, filled)
        seen.add(name)
    con.close()
    assert seen == set(LOG_KINDS)
