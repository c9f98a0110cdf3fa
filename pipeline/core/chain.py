"""Chain parameters the evidence rules rest on, as data: each value with the model it is for (None: every
model), the time it applies from (None: as far back as the data goes), and where it comes from.

`DEFAULTS` is the one definition of today's values, read from upstream; the config file's `[[chain]]` entries
(docs/configuration.md) override them, and `gonka-evidence run` stores the table the rules use in the
warehouse (`chain_params_t`, view `chain_params`). A value taken from `DEFAULTS` is *assumed* (the chain may
have changed it since: thresholds are resolved from chain per escrow and epoch, the logprobs mode is a
governance parameter); one given in the config is not. `chain_value(name, model, at)` is the lookup.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from pipeline.core.sqlnames import quote_string

# The parameters and the type of their values.
PARAMS: dict[str, type] = {"validation_threshold": float, "logprobs_mode": str, "poc_seq_len": int}

SHORT_OUTPUT_DOC = "gonka-ai/gonka devshard/docs/proposals/short-output-validation.md @fd475011"
# The v0.2.13 upgrade sets Qwen/Qwen3-235B-A22B-Instruct-2507-FP8's governance threshold to 0.940
# (qwenValidationThreshold); its height is not known here, so the value applies from the start of the data.
QWEN_SOURCE = (
    "gonka-ai/gonka inference-chain/app/upgrades/v0_2_13/upgrades.go @2bb97262 (qwenValidationThreshold: "
    "Decimal{940, -3} for Qwen/Qwen3-235B-A22B-Instruct-2507-FP8; the upgrade's height is not known here)"
)
LOGPROBS_SOURCE = (
    "gonka-ai/gonka chainParams.LogprobsMode(): ValidationParams.LogprobsMode, DefaultLogprobsMode = "
    'processed_logprobs (inference-chain/x/inference/types/params.go), "the chain\'s current mode" in '
    "devshard/docs/proposals/short-output-validation.md @fd475011; the executor's devshardd rewrites every "
    "request with it (gonka-ai/vllm docs/gonka-infval-old-vs-new-gumbel.md, section 1)"
)
# The chain code's default for a fresh chain is 256 (DefaultPoCModelConfig, genesis_poc_models.go); the value the
# network mines with, one forward = batch x 1024 tokens, is the seed's measurement on mainnet.
SEQ_LEN_SOURCE = (
    "gonka-ai/gonka#2198 item 4 (one PoC forward is batch x 1024 tokens, gonka-ai/vllm "
    "vllm/v1/attention/backend.py); per model on chain as schemes[PREFILL].seq_len since gonka-ai/gonka "
    "inference-chain/app/upgrades/v0_2_17/upgrades.go (a fresh chain's default: 256, "
    "inference-chain/x/inference/types/params.go)"
)


@dataclass(frozen=True)
class ChainParam:
    name: str
    model: str | None  # None: every model; else matched as a substring of the model name (organisation dropped)
    value: str  # as written; `typed` by the parameter's type
    since: datetime | None  # None: from the start of the data
    source: str
    assumed: bool = True  # a default of this code, not a value the config states

    @property
    def typed(self) -> float | int | str:
        return PARAMS[self.name](self.value)


DEFAULTS: tuple[ChainParam, ...] = (
    # per-model validation thresholds of the short-output validation document (gonka#1955)
    *(
        ChainParam("validation_threshold", model, value, None, SHORT_OUTPUT_DOC)
        for model, value in (
            ("DeepSeek-V4-Flash-0731", "0.900"),
            ("GLM-5.2-FP8", "0.750"),
            ("GLM-5.3-Flash", "0.951"),
            ("MiniMax-M2.7", "0.922"),
            ("Kimi-K2.6", "0.900"),
        )
    ),
    # matches the chain's id and the shorter names logs use (Qwen/Qwen3-235B-A22B-FP8)
    ChainParam("validation_threshold", "Qwen3-235B-A22B", "0.940", None, QWEN_SOURCE),
    ChainParam("logprobs_mode", None, "processed_logprobs", None, LOGPROBS_SOURCE),
    ChainParam("poc_seq_len", None, "1024", None, SEQ_LEN_SOURCE),
)


@dataclass(frozen=True)
class ChainValue:
    """What `chain_value` answers: the value and what it rests on."""

    name: str
    value: float | int | str
    source: str
    since: datetime | None
    assumed: bool

    def describe(self) -> str:
        """`processed_logprobs (assumed: …)` or `processed_logprobs (config …)` for a check's evidence."""
        return f"{self.value} ({'assumed: ' if self.assumed else ''}{self.source})"


class ChainParamError(ValueError):
    """A chain parameter the table does not hold, or a config entry that is not one."""


def _norm(model: str | None) -> str | None:
    """A model id as the table holds it: the name after its organisation (`deepseek-ai/X` → `X`)."""
    return model.rsplit("/", 1)[-1] if model else None


def _key(p: ChainParam) -> tuple[str, str | None, datetime | None]:
    return (p.name, (_norm(p.model) or "").lower() or None, p.since)


def merged(overrides: Iterable[ChainParam] = ()) -> tuple[ChainParam, ...]:
    """The defaults with the config's entries: an entry replaces the default of the same (name, model, since)."""
    given = list(overrides)
    keys = {_key(p) for p in given}
    return tuple(p for p in DEFAULTS if _key(p) not in keys) + tuple(given)


def _fits(row_model: str | None, wanted: str | None) -> bool:
    """An entry is for `wanted` when it is for every model or its model is part of the name (case aside);
    the warehouse's `model_validation_thresholds` matches the same way."""
    pattern = _norm(row_model)
    return pattern is None or (wanted is not None and pattern.lower() in wanted.lower())


def _rank(p: ChainParam) -> tuple[int, bool, datetime, bool]:
    """The order among the entries that fit, best last: the longest model name (every-model entries last of
    all), then the latest `since`, then a stated value over a default."""
    pattern = _norm(p.model)
    return (len(pattern) if pattern else -1, p.since is not None, p.since or datetime.min, not p.assumed)


def chain_value(
    name: str, model: str | None = None, at: datetime | None = None, table: Iterable[ChainParam] | None = None
) -> ChainValue:
    """The value of parameter `name` for `model` at time `at` (None: the newest): the model's own entry (the
    longest model name that is part of `model`), else the every-model one; of those, the latest whose `since`
    is at or before `at`. `table`: the rows to look in (the warehouse's `chain_params`, `read_chain_params`),
    else the defaults."""
    if name not in PARAMS:
        raise ChainParamError(f"unknown chain parameter {name!r} (known: {', '.join(PARAMS)})")
    rows = list(DEFAULTS if table is None else table)
    wanted = _norm(model)
    fits = [
        p
        for p in rows
        if p.name == name and _fits(p.model, wanted) and (at is None or p.since is None or p.since <= at)
    ]
    if fits:
        best = max(fits, key=_rank)
        return ChainValue(name, best.typed, best.source, best.since, best.assumed)
    raise ChainParamError(f"no {name} for model {model!r}" + (f" at {at.isoformat()}" if at else ""))


def _sql_literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return f"TIMESTAMPTZ '{value.isoformat()}'"
    return quote_string(str(value))


def defaults_sql() -> str:
    """The table macro `chain_param_defaults()` over `DEFAULTS`: the warehouse's rules read the defaults from
    it while `chain_params_t` is empty (pipeline/warehouse/database.py runs it with the schema scripts)."""
    rows = ",\n  ".join(
        "(" + ", ".join(_sql_literal(v) for v in (p.name, p.model, p.value, p.since, p.source, p.assumed)) + ")"
        for p in DEFAULTS
    )
    return (
        "-- The defaults of pipeline/core/chain.py (generated: defaults_sql).\n"
        "CREATE OR REPLACE MACRO chain_param_defaults() AS TABLE\n"
        "SELECT name::VARCHAR AS name, model::VARCHAR AS model, value::VARCHAR AS value, since::TIMESTAMPTZ AS since,\n"
        "       source::VARCHAR AS source, assumed::BOOLEAN AS assumed\n"
        f"FROM (VALUES\n  {rows}) AS t(name, model, value, since, source, assumed);\n"
    )
