"""The configuration of `gonka-evidence run` (the keys are public: docs/configuration.md).

Where it comes from: `--config FILE`, else `gonka-evidence.toml` in the working
directory, else the bundled `data-samples/` (so a fresh checkout runs with no
configuration). Relative paths in a file are relative to the file's directory.
Environment variables `GONKA_EVIDENCE_<KEY>` (upper case) override the keys of
any of these, e.g. `GONKA_EVIDENCE_FINALITY_LAG=2h`.

    warehouse    = "warehouse.duckdb"   # the DuckDB warehouse
    output       = "out"                # reports go to OUTPUT/epoch-N/
    host         = "gonka1..."          # the host the reports are about
    builds       = "builds.toml"        # host build timeline, reloaded every run
    finality_lag = "6h"                 # see pipeline.jobs.run (closed epochs)
    [[sources]]
    url   = "postgresql://reader@db-copy/devshard"   # or path = "copies/latest/"
    kind  = "postgres"                   # optional: auto-detected when omitted
    label = "db-copy"                    # optional: name in provenance footers
    [[chain]]                            # optional: a chain parameter the defaults have wrong
    name  = "validation_threshold"       # pipeline/core/chain.py PARAMS
    model = "GLM-5.2-FP8"                # optional: every model when left out
    value = 0.8
    since = "2026-11-01T00:00:00Z"       # optional: from the start of the data when left out
    source = "governance proposal 42"    # optional: the config file when left out
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from pipeline.core.chain import PARAMS as CHAIN_PARAMS
from pipeline.core.chain import ChainParam
from pipeline.core.errors import UserError
from pipeline.core.paths import DATA_SAMPLES_DIR, DEFAULT_WAREHOUSE
from pipeline.core.text import label_refusal
from pipeline.core.tomlfile import read_toml, require_string, toml_type
from pipeline.ingest import kinds
from pipeline.sources.errors import SourceError
from pipeline.warehouse.held import UnheldValue, check_value


class ConfigError(UserError):
    """A config file (or an environment override of its keys) that cannot be used: one line naming the file
    and the key (not a SourceError: the config is no source)."""


CONFIG_KEYS = ("warehouse", "output", "host", "builds", "finality_lag")
# Keys a config may leave out, alone or together (each has a default, docs/configuration.md); `host` may be
# left out too, but then no report is written.
OPTIONAL_KEYS = ("warehouse", "output", "builds", "finality_lag")
# The [[sources]] keys and kinds: those of the registered kinds (pipeline/ingest/kinds.py).
SOURCE_KEYS = kinds.SOURCE_KEYS
SOURCE_KINDS = tuple(kinds.SOURCE_KINDS)
PATH_KEYS = ("warehouse", "output", "builds")
DEFAULT_CONFIG_FILE = Path("gonka-evidence.toml")
ENV_PREFIX = "GONKA_EVIDENCE_"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(d|h|m|s)")
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


@dataclass
class RunConfig:
    warehouse: Path = DEFAULT_WAREHOUSE
    output: Path = Path("out")
    host: str | None = None
    builds: Path | None = None
    finality_lag: str = "6h"
    sources: list[dict] = field(default_factory=list)
    chain: list[ChainParam] = field(default_factory=list)  # [[chain]]: overrides of the chain parameters
    origin: str = "data-samples"
    # The keys whose value an option or a GONKA_EVIDENCE_<KEY> variable set over the file's (or the samples'),
    # each with that option or variable.
    set_by: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def origin_of(self, key: str) -> str:
        """Where `key`'s value came from, as an error names it: its option or variable, else the config file."""
        return self.set_by.get(key, self.origin)

    def named(self, key: str) -> str:
        """`key` as an error names it: its option or variable (GONKA_EVIDENCE_HOST), else ``FILE: key``."""
        return self.set_by.get(key) or f"{self.origin}: {key}"

    @property
    def finality_lag_delta(self) -> timedelta:
        return parse_duration(self.finality_lag)


def parse_duration(text: str | int | float) -> timedelta:
    """``"6h"``, ``"90m"``, ``"1d12h"``, ``"45s"`` or a number of seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    else:
        value = str(text).strip().lower()
        if re.fullmatch(r"\d+(\.\d+)?", value):
            seconds = float(value)
        elif value and re.fullmatch(rf"(?:{_DURATION.pattern}\s*)+", value):
            seconds = sum(float(n) * _UNITS[u] for n, u in _DURATION.findall(value))
        else:
            raise ConfigError(f"finality_lag {text!r} is not a duration (e.g. 6h, 90m, 1d12h, or seconds)")
    if seconds < 0:
        raise ConfigError(f"finality_lag {text!r} is negative")
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise ConfigError(f"finality_lag {text!r} is too long (at most {timedelta.max.days} days)") from None


# The bundled vLLM log of the samples' focal host (data-samples/README.md): its lines print no year,
# and the samples' calendar is in 2026.
SAMPLES_LOG_YEAR = 2026


def sample_config() -> RunConfig:
    """The bundled samples: what `run` does on a fresh checkout (the same as the shipped gonka-evidence.toml)."""
    builds = DATA_SAMPLES_DIR / "builds.toml"
    sources: list[dict] = [{"path": str(DATA_SAMPLES_DIR / "store"), "kind": "store", "label": "data-samples"}]
    if (DATA_SAMPLES_DIR / "vllm").is_dir():
        sources.append(
            {
                "path": str(DATA_SAMPLES_DIR / "vllm"),
                "kind": "vllm",
                "label": "data-samples vLLM log",
                "year": SAMPLES_LOG_YEAR,
            }
        )
    return RunConfig(builds=builds if builds.exists() else None, host=_focal_host(builds), sources=sources)


def _focal_host(builds: Path) -> str | None:
    """The sample builds file names its focal host in `focal_host` (else its first entry's host)."""
    if not builds.exists():
        return None
    from pipeline.ingest.builds import read_builds_document

    doc = read_builds_document(builds)
    return doc.get("focal_host") or doc["builds"][0]["host"]


def load_config(path: Path | None) -> RunConfig:
    """The run configuration from `path`, the working directory's file, or the samples; env overrides applied."""
    if path is None:
        if not DEFAULT_CONFIG_FILE.exists():
            return _checked(_env_overrides(sample_config()))
        path = DEFAULT_CONFIG_FILE
    doc = read_toml(path, ConfigError, "config file")
    base = path.parent
    unknown = set(doc) - set(CONFIG_KEYS) - {"sources", "chain"}
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) {', '.join(sorted(unknown))} "
            f"(keys: {', '.join(CONFIG_KEYS)}, [[sources]], [[chain]])"
        )
    cfg_chain = _chain_entries(doc.get("chain", []), path)
    cfg = RunConfig(origin=str(path))
    for key in PATH_KEYS:
        if key in doc:
            setattr(cfg, key, config_path(base, require_string(doc[key], ConfigError, f"{path}: {key}")))
    if "host" in doc:
        cfg.host = require_string(doc["host"], ConfigError, f"{path}: host")  # its form: `_checked`
    lag = doc.get("finality_lag", cfg.finality_lag)
    if isinstance(lag, bool) or not isinstance(lag, (str, int, float)):
        raise ConfigError(
            f"{path}: finality_lag must be a duration string or a number of seconds, not {toml_type(lag)}"
        )
    cfg.finality_lag = str(lag)
    sources = doc.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(s, dict) for s in sources):
        raise ConfigError(f"{path}: sources must be [[sources]] tables")
    for i, s in enumerate(sources, 1):
        bad = set(s) - set(SOURCE_KEYS)
        if bad:
            keys = ", ".join(SOURCE_KEYS)
            raise ConfigError(
                f"{path}: [[sources]] entry {i} has unknown key(s) {', '.join(sorted(bad))} (keys: {keys})"
            )
        if ("url" in s) == ("path" in s):
            raise ConfigError(f"{path}: [[sources]] entry {i} needs exactly one of url or path")
        entry: dict[str, Any] = {
            k: require_string(v, ConfigError, f"{path}: [[sources]] entry {i}: {k}")
            for k, v in s.items()
            if k != "year"
        }
        if "year" in s:
            entry["year"] = _year(s["year"], f"{path}: [[sources]] entry {i}: year")
        if "path" in entry:
            entry["path"] = str(config_path(base, entry["path"]))
        cfg.sources.append(entry)
    cfg.chain = cfg_chain
    return _checked(_env_overrides(cfg))


def config_path(base: Path, text: str) -> Path:
    """A path of the config (or its environment overrides): ``~`` expanded here, once, as a shell would
    (a TOML file has no shell), then relative to `base`. Every part of the run then uses this one path:
    nothing downstream expands it again."""
    return base / Path(text).expanduser()


CHAIN_KEYS = ("name", "model", "value", "since", "source")


def _chain_entries(entries: object, path: Path) -> list[ChainParam]:
    """The config's [[chain]] entries (pipeline/core/chain.py), each checked: a known name, a value of its
    type, an ISO-8601 `since`."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{path}: chain must be [[chain]] tables")
    out = []
    for i, e in enumerate(entries, 1):
        where = f"{path}: [[chain]] entry {i}"
        bad = set(e) - set(CHAIN_KEYS)
        if bad:
            raise ConfigError(f"{where} has unknown key(s) {', '.join(sorted(bad))} (keys: {', '.join(CHAIN_KEYS)})")
        name = e.get("name")
        if name not in CHAIN_PARAMS:
            raise ConfigError(f"{where}: name {name!r} is not one of {', '.join(CHAIN_PARAMS)}")
        value = e.get("value")
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ConfigError(f"{where}: value must be a string or a number, not {toml_type(value)}")
        try:
            if CHAIN_PARAMS[name] is int and isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            typed = CHAIN_PARAMS[name](value)
        except ValueError:
            kind = {int: "a whole number", float: "a number"}.get(CHAIN_PARAMS[name], "a string")
            raise ConfigError(f"{where}: value {value!r} is not {kind}") from None
        model = require_string(e["model"], ConfigError, f"{where}: model") if "model" in e else None
        source = require_string(e["source"], ConfigError, f"{where}: source") if "source" in e else f"config {path}"
        since = _chain_since(e["since"], where) if "since" in e else None
        out.append(ChainParam(name, model, str(typed), since, source, assumed=False))
    return out


def _chain_since(value: object, where: str):
    from datetime import UTC, datetime

    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{where}: since {value!r} is not an ISO-8601 time") from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _year(value: object, where: str) -> int:
    """A log source's `year`: the year of its files' first records (as `ingest-logs --year`)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where} must be an integer, not {toml_type(value)}")
    if not 1970 <= value <= 9999:
        raise ConfigError(f"{where} {value} is not a plausible year")
    return value


def _env_overrides(cfg: RunConfig) -> RunConfig:
    for key in CONFIG_KEYS:
        value = os.environ.get(f"{ENV_PREFIX}{key.upper()}")
        if value:
            setattr(cfg, key, config_path(Path("."), value) if key in PATH_KEYS else value)
            cfg.set_by[key] = f"{ENV_PREFIX}{key.upper()}"
    return cfg


def _checked(cfg: RunConfig) -> RunConfig:
    try:
        parse_duration(cfg.finality_lag)
    except ConfigError as exc:
        raise ConfigError(f"{cfg.origin_of('finality_lag')}: {exc}") from None
    if cfg.host:  # the file's or GONKA_EVIDENCE_HOST's: well-formed, in lower case (the warehouse's spelling)
        try:
            cfg.host = str(check_value(None, "host", cfg.host, cfg.named("host")))
        except UnheldValue as exc:
            raise ConfigError(str(exc)) from None
    for i, s in enumerate(cfg.sources, 1):
        if refusal := label_refusal(s.get("label") or "", f"{cfg.origin}: [[sources]] entry {i}"):
            raise ConfigError(refusal)
        if s.get("kind") is not None and s["kind"] not in SOURCE_KINDS:
            raise ConfigError(f"{cfg.origin}: source kind {s['kind']!r} is not one of {', '.join(SOURCE_KINDS)}")
        if "timezone" in s:
            from pipeline.sources.logs.files import LogTimezone

            try:
                LogTimezone.parse(s["timezone"])
            except SourceError as exc:
                raise ConfigError(f"{cfg.origin}: {exc}") from None
    return cfg


def source_kind(source: dict) -> str:
    """The kind of a [[sources]] entry: as given, else detected (URL → postgres, store directory → store,
    a directory of *.json → json)."""
    kind = kinds.kind_of(source)
    if kind is None:
        raise SourceError(
            f"{source.get('path')}: cannot tell what this source is; give kind = one of {', '.join(SOURCE_KINDS)}"
        )
    return kind.name
