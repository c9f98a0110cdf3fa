"""What a vLLM start cycle's lines state: the build's configuration and its start-up facts.

The lines (docs/sources.md, start-up, readiness and restarts): the version (`vLLM API server version X` or
the logo's `version X` line,
`Initializing a V1 LLM engine (vX) with config: k=v, …`, V0's `Initializing an LLM engine (vX) …`), the
`non-default args: {…}` line of newer versions (the arguments the operator passed), and the start-up facts
(`Model loading took X GiB and Y seconds`, `Available KV cache memory: X GiB`, `GPU KV cache size: N tokens`,
`Maximum concurrency for N tokens per request: Xx`, `init engine (…) took X s`), the runner the worker
chose (`Using V2 Model Runner`), the PoC window's end (`PoC stopped: N nonces in M.MMmin`) and the PoC batch
of the mining path (`PoC /init/generate: … batch_size=B …`, `PoC /generate: block_hash=… batch_size=B
nonces=N …`) and of the wait path (`PoC /generate: N nonces, batch_size=B, chunks=C`); the PoC lines as
gonka-ai/gonka-vllm-plugins src/gonka_poc/poc/routes.py @04ae0271 prints them.

The log scanner picks those lines out of a chunk's envelope lines by `START_WORDS` (vectorised, in Rust);
`start_facts(lines)` turns the few it finds into one row per (line, key, value), with `part` ``config``
(the engine's start line), ``server`` (the API server's version line) or ``args`` (the non-default
arguments) — what a build is, the fingerprint is over these; the API server prints the last two just before
the engine starts — or ``startup`` (what one start measured). Keys are the
config line's own names (`tensor_parallel_size`, `kv_cache_dtype`, …), the speculative config split into
`spec_method` and `spec_tokens`, and the non-default arguments under their own names; values are strings
as printed, quotes stripped.
"""

from __future__ import annotations

import ast
import re

import polars as pl

# The API server's launch line: `vLLM API server version X` (to 0.14), `vLLM server version X, serving model M`
# (from 0.15 with VLLM_DISABLE_LOG_LOGO), else from 0.15 its logo, printed line by line, whose second line is
# `▄▄ ▄█ █     █     █ ▀▄▀ █  version X` (vllm/entrypoints/utils.py, `log_version_and_model`)
RX_LAUNCH = r"(?:vLLM API server version |vLLM server version |\s*▄▄ [^\n]*?▀▄▀ █ +version )"
LOGO_VERSION = "▀▄▀ █"
# Envelope messages that state configuration or start-up facts (a superset filter, run in Rust).
START_WORDS = [
    "LLM engine (v",
    "vLLM API server version ",
    "vLLM server version ",
    LOGO_VERSION,
    "non-default args: ",
    "Model loading took ",
    "Available KV cache memory: ",
    "GPU KV cache size: ",
    "Maximum concurrency for ",
    "init engine (profile, create kv cache",
    "PoC stopped: ",
    "PoC /generate: ",
    "PoC /init/generate: ",
    "Using V2 Model Runner",
]
_RX_VERSION = re.compile(rf"(?:Initializing an? (?:V\d )?LLM engine \(v|{RX_LAUNCH})(\d+\.\d+\.\d+[\w.+-]*)")
_RX_ENGINE = re.compile(r"Initializing an? (?:V\d )?LLM engine (?:\(v[^)]*\) )?with config: (.*)$")
# config-line keys that say what a build is (the rest — tokenizer paths, revisions, nested observability
# and compilation configs — are noise or restate these)
CONFIG_KEYS = (
    "model",
    "dtype",
    "max_seq_len",
    "max_model_len",
    "load_format",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "quantization",
    "kv_cache_dtype",
    "enforce_eager",
    "enable_prefix_caching",
    "chunked_prefill_enabled",
    "enable_chunked_prefill",
    "seed",
    "trust_remote_code",
)
# non-default arguments that are where a server listens or how it logs, not what it runs
ARGS_IGNORED = frozenset(
    {
        "model_tag",
        "host",
        "port",
        "api_key",
        "ssl_keyfile",
        "ssl_certfile",
        "root_path",
        "uvicorn_log_level",
        "disable_log_requests",
        "enable_log_requests",
        "disable_log_stats",
        "disable_uvicorn_access_log",
        "served_model_name",
    }
)
_STARTUP = (
    (re.compile(r"Model loading took ([\d.]+) GiB(?: memory)? and ([\d.]+) s"), ("model_load_gib", "model_load_s")),
    (re.compile(r"Available KV cache memory: ([\d.]+) GiB"), ("kv_cache_gib",)),
    (re.compile(r"GPU KV cache size: ([\d,]+) tokens"), ("kv_cache_tokens",)),
    (
        re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x"),
        ("concurrency_tokens", "max_concurrency"),
    ),
    (re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"), ("init_engine_s",)),
    # gonka-ai/gonka-vllm-plugins src/gonka_poc/poc/routes.py @04ae0271 (`_generation_loop`):
    # f"PoC stopped: {n} nonces in {elapsed_min:.2f}min" (no space before `min`; a space is read too)
    (re.compile(r"PoC stopped: (\d+) nonces in (\d+(?:\.\d+)?) ?min\b"), ("poc_nonces", "poc_minutes")),
    # the PoC batch (the preflight's PoC coupling check), same file: the mining path's `init_generate`
    # (f"PoC /init/generate: block_hash=… block_height=… node=… group=… batch_size={B} url=… …") and `generate`
    # (f"PoC /generate: block_hash=… node=… batch_size={B} nonces={N} wait=… …"), and the wait path
    # (f"PoC /generate: {N} nonces, batch_size={B}, chunks={C}"); the decode-PoC release (@a6a28429) prints the
    # first two without `poc_stronger_rng=…` and its wait path no batch
    (re.compile(r"PoC /init/generate: block_hash=\S* .*?\bbatch_size=(\d+)\b"), ("poc_batch_size",)),
    (re.compile(r"PoC /generate: block_hash=\S* .*?\bbatch_size=(\d+) nonces=\d+\b"), ("poc_batch_size",)),
    (re.compile(r"PoC /generate: \d+ nonces, batch_size=(\d+)"), ("poc_batch_size",)),
    # the worker's runner: vLLM prints this line (vllm/v1/worker/gpu_worker.py) only when it selects the V2
    # model runner: VLLM_USE_V2_MODEL_RUNNER=1, or, unset, by default for the architectures of
    # vllm/config/vllm.py's DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (from v0.22.0); the line says it either way
    (re.compile(r"^Using V2 Model Runner\b"), ("model_runner",)),
)

MAX_ARGS_CHARS = 65536  # a longer "dict" is no argument list vLLM printed (and not worth evaluating)
FACT_SCHEMA = {"msg": pl.String, "part": pl.String, "key": pl.String, "value": pl.String}


def start_facts(lines: pl.DataFrame) -> pl.DataFrame:
    """(line, part, key, value) of what each start line states, joined back to the lines' other columns.
    Python per distinct message: every restart of one build prints the same start lines again."""
    rows = [(msg, *fact) for msg in lines["msg"].unique() for fact in line_facts(msg)]
    facts = pl.DataFrame(rows, schema=FACT_SCHEMA, orient="row")
    return lines.join(facts, on="msg", how="inner", maintain_order="left_right").drop("msg")


def line_facts(msg: str) -> list[tuple[str, str, str]]:
    """(part, key, value) of one message; nothing for a message that states none."""
    out: list[tuple[str, str, str]] = []
    version = _RX_VERSION.search(msg)
    if version:  # the API server prints its version before the engine starts
        out.append(("config" if "LLM engine" in msg else "server", "vllm_version", version.group(1)))
    engine = _RX_ENGINE.search(msg)
    if engine:
        fields = dict(_split_fields(engine.group(1)))
        for key in CONFIG_KEYS:
            if key in fields:
                out.append(("config", key, _unquote(fields[key])))
        if "speculative_config" in fields:
            out += [("config", k, v) for k, v in _spec_fields(fields["speculative_config"])]
        return out
    if "non-default args: " in msg:
        return out + _arg_facts(msg.split("non-default args: ", 1)[1])
    for rx, keys in _STARTUP:
        m = rx.search(msg)
        if m:
            values = m.groups() or ("V2",)  # the runner line states V2 by being printed
            out += [("startup", k, v.replace(",", "")) for k, v in zip(keys, values, strict=True)]
    return out


def _split_fields(text: str) -> list[tuple[str, str]]:
    """`k=v, k=v, …` at nesting depth 0 (values may hold brackets, braces and quoted commas)."""
    out, depth, quote, start = [], 0, "", 0
    for i, c in enumerate(text + ","):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth <= 0:
            part = text[start:i].strip()
            if "=" in part:
                key, value = part.split("=", 1)
                if key.isidentifier():
                    out.append((key, value.strip()))
            start = i + 1
    return out


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" else value


def _spec_fields(value: str) -> list[tuple[str, str]]:
    """`SpeculativeConfig(method='eagle3', model=…, num_spec_tokens=3)` → spec_method, spec_tokens; `None` → none."""
    if value == "None":
        return [("spec_method", "none")]
    fields = dict(_split_fields(value[value.find("(") + 1 : value.rfind(")")] if "(" in value else value))
    out = [("spec_method", _unquote(fields.get("method", "unknown")))]
    tokens = fields.get("num_spec_tokens", fields.get("num_speculative_tokens"))
    return out + ([("spec_tokens", tokens)] if tokens is not None else [])


def _arg_facts(text: str) -> list[tuple[str, str, str]]:
    """The `non-default args: {…}` dict (a Python repr); an unreadable or outsized one states nothing."""
    if len(text) > MAX_ARGS_CHARS:
        return []
    try:
        args = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return []
    if not isinstance(args, dict):
        return []
    out = []
    for key, value in sorted(args.items()):
        if key in ARGS_IGNORED:
            continue
        if key == "speculative_config" and isinstance(value, dict):
            out.append(("args", "spec_method", str(value.get("method", "unknown"))))
            tokens = value.get("num_speculative_tokens", value.get("num_spec_tokens"))
            out += [("args", "spec_tokens", str(tokens))] if tokens is not None else []
            continue
        out.append(("args", str(key), value if isinstance(value, str) else repr(value)))
    return out
