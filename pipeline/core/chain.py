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

# The parameters and the type of their values.
PARAMS: dict[str, type] = {"validation_threshold": float, "logprobs_mode": str, "poc_seq_len": int}

SHORT_OUTPUT_DOC = "gonka-ai/gonka devshard/docs/proposals/short-output-validation.md @fd475011"
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
    model: str | None  # None: every model
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


def merged(overrides: Iterable[ChainParam] = ()) -> tuple[ChainParam, ...]:
    """The defaults with the config's entries: an entry replaces the default of the same (name, model, since)."""
    given = list(overrides)
    keys = {(p.name, p.model, p.since) for p in given}
    return tuple(p for p in DEFAULTS if (p.name, p.model, p.since) not in keys) + tuple(given)


def _norm(model: str | None) -> str | None:
    """A model id as the table holds it: the name after its organisation (`deepseek-ai/X` → `X`)."""
    return model.rsplit("/", 1)[-1] if model else None


def chain_value(
    name: str, model: str | None = None, at: datetime | None = None, table: Iterable[ChainParam] | None = None
) -> ChainValue:
    """The value of parameter `name` for `model` at time `at` (None: the newest): the model's own entry, else
    the every-model one; of those, the latest whose `since` is at or before `at`. `table`: the rows to look
    in (the warehouse's `chain_params`, `read_chain_params`), else the defaults."""
    if name not in PARAMS:
        raise ChainParamError(f"unknown chain parameter {name!r} (known: {', '.join(PARAMS)})")
    rows = list(DEFAULTS if table is None else table)
    wanted = _norm(model)
    for scope in ([wanted] if wanted else []) + [None]:
        fits = [
            p
            for p in rows
            if p.name == name
            and (p.model is None if scope is None else _norm(p.model) == scope)
            and (at is None or p.since is None or p.since <= at)
        ]
        if fits:
            best = max(fits, key=lambda p: (p.since is not None, p.since or datetime.min))
            return ChainValue(name, best.typed, best.source, best.since, best.assumed)
    raise ChainParamError(f"no {name} for model {model!r}" + (f" at {at.isoformat()}" if at else ""))
