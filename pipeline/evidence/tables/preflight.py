"""The `preflight` evidence table: per build of the host, the six ways a plain DSpark setup loses a host its
answers, votes or epoch (gonka-ai/gonka#2198, "What a host needs"), each checked on the host's own data and
answered pass, fail or cannot tell, with the counts or log lines that decide it.

Each check's rule and thresholds are defined once, in `CHECKS` and the constants below; the docs
(docs/evidence.md) and the `preflight` command read them from here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

import duckdb
import polars as pl

from pipeline.core.chain import DEFAULTS as CHAIN_DEFAULTS
from pipeline.core.chain import ChainValue, chain_value
from pipeline.core.paths import sql_text
from pipeline.core.times import iso_utc
from pipeline.core.upstream import DSPARK_METHOD, VLLM_DEFAULT_LOGPROBS_MODE
from pipeline.evidence.buildcheck import attribute, build_spans
from pipeline.evidence.log_window import time_bounds
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.spec import Column, EvidenceSpec, Option, ReportSection, register
from pipeline.evidence.stats import fisher_exact_2x2
from pipeline.evidence.tables.answers_by_sampling import sampling_label
from pipeline.evidence.tables.stability import stability
from pipeline.evidence.window import EvidenceError, Window
from pipeline.evidence.window import _utc as utc_time
from pipeline.ingest.chain import read_chain_params
from pipeline.warehouse.database import fetch_frame

NAME = "preflight"
PASS, FAIL, CANNOT_TELL = "pass", "fail", "cannot tell"
VERDICTS = (PASS, FAIL, CANNOT_TELL)
UNATTRIBUTED = "unattributed"

# The thresholds of the rules (docs/evidence.md quotes them from here).
MIN_VERDICTS = 10  # check 1: verdicts of a build, and of a reference, needed to judge an INVALID share
NEARLY_ALL = 0.5  # checks 1 and 2: an INVALID (invalidated) share at or above this is "nearly all"
ALPHA = 0.01  # checks 1 and 2: one-sided Fisher exact p-value below which a share is higher than its reference
MIN_SAMPLED = 10  # check 2: judged sampled answers needed to see the symptom, or its absence
MIN_LOG_HOURS = 6.0  # check 3: hours of vLLM log a build needs before "no death" means anything
NEAR_DEATH_S = 600  # check 3: a prompt is "near" a death when it started this many seconds before it
LONG_PROMPT_TOKENS = 32768  # check 3: a death with a prompt this long near it is a death during a long prefill
HANG_S = 300  # check 5: a launch with no engine start line for this long is a start-up hang
# The chain values the checks compare with, as the defaults state them (docs; a check names the value it used)
CHAIN_MODE = chain_value("logprobs_mode", table=CHAIN_DEFAULTS).value
SEQ_LEN = chain_value("poc_seq_len", table=CHAIN_DEFAULTS).value


@dataclass(frozen=True)
class Finding:
    verdict: str  # pass, fail or cannot tell
    evidence: str  # the counts or lines that decide it
    decide: str = ""  # for cannot tell: what data would decide it


@dataclass(frozen=True)
class BuildData:
    """What the checks read for one build: its verdicts, judged answers, start cycles, deaths and PoC lines."""

    build: str
    verdicts: tuple[int, int]  # (valid, invalid) the host cast on other hosts' answers in the window
    earlier: tuple[str, int, int] | None  # the host's previous build: (label, valid, invalid) over all data
    network: tuple[int, int]  # other validators' (valid, invalid) on answers of others, in the window
    answers: pl.DataFrame  # judged answers: sampling, invalidated
    cycles: pl.DataFrame  # preflight_cycles.sql rows of the build
    deaths: pl.DataFrame  # preflight_deaths.sql rows of the build
    poc: dict  # the build's PoC lines: windows, empty_windows, first_empty_*, batch_size, batch_record
    log_hours: float  # hours of the host's vLLM log files under the build in the window (`stability`)
    chain_mode: ChainValue  # the logprobs mode the chain validates with (`chain_params`)
    seq_len: ChainValue  # the chain's PoC sequence length for the build's model


@dataclass(frozen=True)
class Check:
    number: int
    name: str  # short name, the `check` column
    needs: str  # what the host needs (the seed's row)
    rule: str  # pass / fail / cannot tell, with the thresholds (docs)
    run: Callable[[BuildData], Finding]


def _share(invalid: int, total: int) -> str:
    return f"{invalid} of {total} ({invalid / total:.0%})" if total else "0 of 0"


def check_replay(d: BuildData) -> Finding:
    valid, invalid = d.verdicts
    total = valid + invalid
    seen = f"INVALID on {_share(invalid, total)} of its verdicts on other hosts' answers"
    if total < MIN_VERDICTS:
        return Finding(
            CANNOT_TELL,
            f"{seen}; {_runner(d.cycles)}",
            f"at least {MIN_VERDICTS} verdicts of this build on other hosts' answers",
        )
    references = []
    if d.earlier is not None and d.earlier[1] + d.earlier[2] >= MIN_VERDICTS:
        label, ev, ei = d.earlier
        references.append((f"the host's earlier build {label!r}", ev, ei))
    nv, ni = d.network
    if nv + ni >= MIN_VERDICTS:
        references.append(("the network (other validators on other hosts' answers)", nv, ni))
    compared = []
    higher = []
    for label, rv, ri in references:
        p = fisher_exact_2x2(invalid, valid, ri, rv, alternative="greater").p_value
        compared.append(f"{label}: {_share(ri, rv + ri)}, one-sided Fisher exact p = {p:.2g}")
        higher.append(p < ALPHA)
    evidence = "; ".join([seen, *compared, _runner(d.cycles)])
    if invalid / total < NEARLY_ALL:
        return Finding(PASS, evidence)
    if references and all(higher):
        return Finding(FAIL, evidence)
    return Finding(
        CANNOT_TELL,
        evidence,
        f"a reference with at least {MIN_VERDICTS} verdicts whose INVALID share is significantly lower "
        f"(p < {ALPHA}): the host's earlier build or the network in the same window",
    )


def _modes(cycles: pl.DataFrame) -> list[str]:
    """The logprobs modes the build's cycles run: as stated, or vLLM's default where the cycle's non-default
    arguments are printed without one; none from a cycle that prints no arguments."""
    stated = cycles.filter(pl.col("args_stated"))
    return sorted(set(stated["logprobs_mode"].fill_null(VLLM_DEFAULT_LOGPROBS_MODE).to_list()))


def _runners(cycles: pl.DataFrame) -> list[str]:
    """The model runners the build's cycles state (engine_cycles.model_runner: `Using V2 Model Runner`)."""
    return sorted({r for r in cycles["model_runner"].to_list() if r is not None})


def _runner(cycles: pl.DataFrame) -> str:
    runners = _runners(cycles)
    if not runners:
        return "runner not stated (no 'Using V2 Model Runner' line and no model loading line)"
    said = {"V2": "V2 ('Using V2 Model Runner')", "V1": "V1 (the model loaded without 'Using V2 Model Runner')"}
    return "runner " + ", ".join(said[r] for r in runners)


def _chain(value: ChainValue) -> str:
    """A chain value as a check's evidence names it: assumed when it is this release's default."""
    return f"{value.value} ({'assumed' if value.assumed else value.source})"


def check_logprobs(d: BuildData) -> Finding:
    modes, runners, chain = _modes(d.cycles), _runners(d.cycles), d.chain_mode
    a = d.answers
    greedy, sampled = a.filter(pl.col("sampling") == "greedy"), a.filter(pl.col("sampling") == "sampled")
    g_inv, s_inv = int(greedy["invalidated"].sum()), int(sampled["invalidated"].sum())
    parts = [
        f"logprobs_mode {', '.join(modes)}" if modes else "logprobs_mode not stated (no non-default args line)",
        f"chain expects {_chain(chain)}",
        _runner(d.cycles),
        f"invalidated: sampled {_share(s_inv, sampled.height)}, greedy {_share(g_inv, greedy.height)}",
    ]
    symptom = False
    if sampled.height >= MIN_SAMPLED and greedy.height and s_inv / sampled.height >= NEARLY_ALL:
        p = fisher_exact_2x2(s_inv, sampled.height - s_inv, g_inv, greedy.height - g_inv, alternative="greater")
        parts.append(f"sampled vs greedy one-sided Fisher exact p = {p.p_value:.2g}")
        symptom = p.p_value < ALPHA
    evidence = "; ".join(parts)
    wrong = [m for m in modes if m != chain.value]
    v2 = "V2" in runners
    if symptom or (wrong and v2):
        return Finding(FAIL, evidence + ("; the V2 runner ignores the per-request mode" if wrong and v2 else ""))
    if modes and not wrong:
        return Finding(PASS, evidence)
    if modes and sampled.height >= MIN_SAMPLED and s_inv / sampled.height < NEARLY_ALL:
        return Finding(
            PASS, evidence + ("; the V1 runner honours the per-request mode" if runners == ["V1"] else "; no symptom")
        )
    return Finding(
        CANNOT_TELL,
        evidence,
        f"a start line stating --logprobs-mode (vLLM's non-default args) and, for another mode than the chain's, "
        f"the runner (a worker's 'Using V2 Model Runner', or the model loading line without it); or at least "
        f"{MIN_SAMPLED} judged sampled answers and one greedy",
    )


def _stated(cycles: pl.DataFrame, column: str) -> str:
    values = sorted({v for v in cycles[column].to_list() if v is not None})
    return ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values) or "not stated"


def check_memory(d: BuildData) -> Finding:
    hours = d.log_hours
    settings = (
        f"gpu_memory_utilization {_stated(d.cycles, 'gpu_memory_utilization')}, "
        f"max_num_batched_tokens {_stated(d.cycles, 'max_num_batched_tokens')}"
    )
    deaths = d.deaths
    long_near = pl.col("prompt_tokens_near").fill_null(0) >= LONG_PROMPT_TOKENS
    bad = deaths.filter(pl.col("oom") | long_near)
    described = []
    for r in bad.iter_rows(named=True):
        near = r["prompt_tokens_near"]
        described.append(
            f"{'OOM' if r['oom'] else 'engine'} death at {iso_utc(r['at'])} (line {r['record_key']}; longest prompt "
            f"started in the {NEAR_DEATH_S // 60} min before: {f'{near:,} tokens' if near is not None else 'none'})"
        )
    head = f"{deaths.height} engine death(s), {bad.height} by OOM or during a long prefill, in {hours:.1f} h of log"
    evidence = "; ".join([head, *described, settings])
    if bad.height:
        return Finding(FAIL, evidence)
    if deaths.height:
        return Finding(
            CANNOT_TELL,
            evidence,
            f"the deaths' cause: none is an OOM and no prompt of {LONG_PROMPT_TOKENS:,} tokens or more started "
            f"in the {NEAR_DEATH_S // 60} min before one",
        )
    if hours >= MIN_LOG_HOURS:
        return Finding(PASS, evidence)
    return Finding(CANNOT_TELL, evidence, f"at least {MIN_LOG_HOURS:g} h of this build's vLLM log")


def check_poc(d: BuildData) -> Finding:
    batch = d.poc.get("batch_size")
    chunks = [v for v in d.cycles["max_num_batched_tokens"].to_list() if v is not None]
    chunk = min(chunks) if chunks else None
    windows, empty = int(d.poc.get("windows") or 0), int(d.poc.get("empty_windows") or 0)
    seq = int(d.seq_len.value)
    if batch is not None:
        stated = f"PoC batch {batch} (line {d.poc.get('batch_record')})"
    elif d.poc.get("batch_auto_record"):
        # routes.py @a6a28429: "batch_size == 0 means AUTO" (the plugin sizes the batch itself, up to
        # POC_DECODE_MAX_BATCH, with its own prefill sub-chunks): a 0 in the log is no batch of 0
        stated = f"PoC batch automatic (batch_size=0 on line {d.poc['batch_auto_record']}: not stated by the log)"
    else:
        stated = "PoC batch not stated"
    parts = [
        stated,
        f"max_num_batched_tokens {chunk}" if chunk is not None else "max_num_batched_tokens not stated",
    ]
    coupled = None
    if batch is not None and chunk is not None:
        coupled = batch * seq > chunk
        parts.append(
            f"{batch} x {seq} = {batch * seq} {'>' if coupled else '<='} {chunk} (PoC seq_len {_chain(d.seq_len)})"
        )
    parts.append(f"{empty} of {windows} PoC windows stopped with 0 nonces or crashed")
    rates = [v for v in d.cycles["poc_nonces_per_min"].to_list() if v is not None]
    if rates:
        parts.append(f"PoC rate {', '.join(f'{v:g}' for v in sorted(set(rates)))} nonces/min ('PoC stopped' lines)")
    if empty:
        parts.append(f"first at {iso_utc(d.poc['first_empty_at'])} (line {d.poc['first_empty_record']})")
    evidence = "; ".join(parts)
    if coupled or empty:
        return Finding(FAIL, evidence)
    if coupled is False or windows:
        return Finding(PASS, evidence)
    return Finding(
        CANNOT_TELL,
        evidence,
        "a line stating the PoC batch ('PoC /init/generate: … batch_size=B …' or 'PoC /generate: … batch_size=B …', "
        "B > 0: 0 is the plugin's automatic sizing) and the max_num_batched_tokens argument in this build's logs, "
        "or a PoC window's 'PoC stopped' line",
    )


def check_startup(d: BuildData) -> Finding:
    launched = d.cycles.filter(pl.col("launch_at").is_not_null())
    offline = "HF_HUB_OFFLINE not stated (vLLM's start lines do not print the environment)"
    waits = []
    for r in launched.iter_rows(named=True):
        end = r["engine_at"] or r["ended_at"]
        waits.append((max((end - r["launch_at"]).total_seconds(), 0.0), r["engine_at"] is None, r["record_key"]))
    hung = [w for w in waits if w[0] >= HANG_S]
    parts = [f"{len(waits)} launch(es) of {d.cycles.height} start cycle(s)"]
    if waits:
        parts.append(f"longest wait for the first engine line {max(w[0] for w in waits):.0f} s")
    parts += [
        f"{'no engine line in' if never else 'engine line after'} {s:.0f} s (launch line {key})"
        for s, never, key in hung
    ]
    evidence = "; ".join([*parts, offline])
    if hung:
        return Finding(FAIL, evidence)
    if waits:
        return Finding(PASS, evidence)
    return Finding(
        CANNOT_TELL,
        evidence,
        "a launch line (the API server's 'vLLM API server version') of this build and what follows it",
    )


def check_speculative(d: BuildData) -> Finding:
    methods = sorted({m for m in d.cycles["spec_method"].to_list() if m is not None})
    errors = d.cycles.filter(pl.col("spec_error").is_not_null())
    said = [
        f"start-up error naming the speculative config (line {r['spec_error_record']}): {r['spec_error'][:300]}"
        for r in errors.iter_rows(named=True)
    ]
    if not methods and not said:
        return Finding(
            CANNOT_TELL,
            "no start line states the speculative config",
            "an engine start line ('Initializing a V1 LLM engine … speculative_config=…') of this build",
        )
    dspark = d.cycles.filter(pl.col("spec_method") == DSPARK_METHOD)
    tokens = sorted({t for t in dspark["spec_tokens"].to_list() if t is not None})
    unset = dspark["spec_tokens"].null_count()
    # the block size of each DSpark cycle's model, looked up as the acceptance table's block_size is
    blocks = sorted({b for b in dspark["block_size"].to_list() if b is not None})
    models = sorted({m for m in dspark.filter(pl.col("block_size").is_null())["model"].to_list() if m is not None})
    parts = [f"speculative method {', '.join(methods) or 'not stated'}"]
    if dspark.height:
        parts.append(
            f"num_speculative_tokens {', '.join(map(str, tokens)) or 'unset'}"
            + (f" (unset in {unset} cycle(s))" if unset and tokens else "")
            + f"; DSpark block size {', '.join(map(str, blocks)) or 'unknown'}"
        )
    evidence = "; ".join(parts + said)
    known = dspark.filter(pl.col("block_size").is_not_null() & pl.col("spec_tokens").is_not_null())
    below = known.filter(pl.col("spec_tokens") < pl.col("block_size")).height
    above = known.filter(pl.col("spec_tokens") > pl.col("block_size")).height
    if unset or below or said:  # what vLLM refuses: K unset or below the block; or the start-up error itself
        return Finding(FAIL, evidence)
    if dspark.height == 0:
        return Finding(PASS, evidence + "; no DSpark, so its block size does not apply")
    if dspark["block_size"].null_count():
        return Finding(
            CANNOT_TELL,
            evidence + (f" (model {', '.join(models)} not in view dspark_block_sizes)" if models else ""),
            "the DSpark block size of the build's model (view dspark_block_sizes)",
        )
    if above:
        return Finding(
            PASS,
            evidence + "; K above the block starts (vLLM refuses only K below it): flagged in the acceptance table "
            "(`k_off_block`)",
        )
    return Finding(PASS, evidence)


CHECKS = (
    Check(
        1,
        "replay",
        "V2 runner with the enforced-tokens replay fix (gonka-ai/vllm#124)",
        f"fail: the build's INVALID share of its verdicts on other hosts' answers is at least {NEARLY_ALL:.0%} "
        f"and higher than every reference with {MIN_VERDICTS}+ verdicts (the host's previous build, over all data; "
        f"the network in the window), one-sided Fisher exact p < {ALPHA}; pass: {MIN_VERDICTS}+ verdicts with a "
        f"share below {NEARLY_ALL:.0%}; cannot tell: fewer verdicts, or a high share no reference is below; the "
        "runner the build's start lines state (a worker's 'Using V2 Model Runner', else V1 where the model loaded) "
        "is reported",
        check_replay,
    ),
    Check(
        2,
        "logprobs",
        f"logprobs mode {CHAIN_MODE}, as the chain validates",
        f"fail: a start line states (or, printing the non-default args without it, defaults to "
        f"{VLLM_DEFAULT_LOGPROBS_MODE}) a mode other than the chain's (`chain_params` logprobs_mode, default "
        f"{CHAIN_MODE}, assumed) on the V2 runner (a worker's 'Using V2 Model Runner' line), or the symptom: "
        f"{MIN_SAMPLED}+ judged sampled answers, at least {NEARLY_ALL:.0%} invalidated, more than the greedy ones "
        f"(one-sided Fisher exact p < {ALPHA}); pass: the chain's mode stated and no symptom, or "
        f"{MIN_SAMPLED}+ sampled answers mostly valid (the V1 runner honours the per-request mode); else cannot "
        "tell",
        check_logprobs,
    ),
    Check(
        3,
        "memory",
        "memory headroom for long prefills",
        f"fail: an engine death by OOM, or one with a prompt of {LONG_PROMPT_TOKENS:,}+ tokens started in the "
        f"{NEAR_DEATH_S // 60} minutes before it; pass: no death in {MIN_LOG_HOURS:g}+ hours of the build's vLLM "
        "log; cannot tell: other deaths, or less log; gpu_memory_utilization and max_num_batched_tokens as stated",
        check_memory,
    ),
    Check(
        4,
        "poc",
        f"POC batch x seq_len ({SEQ_LEN}) <= max_num_batched_tokens",
        f"fail: both stated and batch x seq_len (`chain_params` poc_seq_len, default {SEQ_LEN}, assumed) > "
        "max_num_batched_tokens, or a PoC window that stopped with 0 nonces or crashed; pass: both stated and "
        "within, or PoC windows that all produced nonces; cannot tell: neither. The batch is read from the mining "
        "path's 'PoC /init/generate' and 'PoC /generate: block_hash=…' lines and the wait path's 'PoC /generate: N "
        "nonces, …' line; batch_size=0 is the plugin's automatic sizing (gonka-ai/gonka-vllm-plugins "
        "src/gonka_poc/poc/routes.py @a6a28429: 'batch_size == 0 means AUTO'), a batch the log does not state",
        check_poc,
    ),
    Check(
        5,
        "startup",
        "no start-up hang (HF_HUB_OFFLINE=1)",
        f"fail: a launch line with no engine start line for {HANG_S // 60}+ minutes; pass: launches, each "
        "followed by an engine line sooner; cannot tell: no launch line; whether HF_HUB_OFFLINE is stated is "
        "reported",
        check_startup,
    ),
    Check(
        6,
        "speculative",
        "num_speculative_tokens set to the DSpark block size of the model (view dspark_block_sizes, the "
        "acceptance table's block_size; 5 for DeepSeek-V4-Flash)",
        "fail: what vLLM refuses: a DSpark start with num_speculative_tokens unset or below its model's block size, "
        "or a start-up traceback naming the speculative config (`config_error`); pass: every DSpark start at its "
        "model's block size or above (above: flagged in the acceptance table, `k_off_block`), or no DSpark; "
        "cannot tell: no start line states the speculative config, or the model's block size is not known",
        check_speculative,
    ),
)

COLUMNS = (
    Column("build", "the host's build (`host_builds`), in the order the builds started"),
    Column("check", "the failure mode's number in the seed's table (gonka-ai/gonka#2198, \"What a host needs\")"),
    Column("name", "its short name: " + ", ".join(f"{c.number} `{c.name}`" for c in CHECKS)),
    Column("needs", "what the host needs against it"),
    Column("verdict", "`pass`, `fail` or `cannot tell` by the check's rule (below)"),
    Column("evidence", "the counts, settings and log lines (record keys file_id:line) the verdict rests on"),
    Column("to_decide", "for `cannot tell`: the data that would decide it; empty otherwise"),
)


def preflight(
    con: duckdb.DuckDBPyConnection,
    host: str,
    window: Window,
    *,
    build: str | None = None,
    builds_since: str | None = None,
) -> EvidenceResult:
    """The six checks for every build of the host in effect in the window, or the one named by `build`, or
    those in effect at or after `builds_since` (an ISO-8601 time)."""
    if build is not None and builds_since is not None:
        raise EvidenceError("give either --build or --since (the builds in effect since a time), not both")
    since, until = time_bounds(con, window)
    order = fetch_frame(con, sql_text("evidence/host_builds.sql"), {"host": host})["build"].to_list()
    if build is not None and build not in order:
        known = ", ".join(repr(b) for b in order) or "none"
        raise EvidenceError(f"host {host} has no build {build!r} in the build timeline (its builds: {known})")
    live = _live_builds(con, host, since, until)
    if builds_since is not None:
        live &= _live_builds(con, host, utc_time(builds_since, "--since"), None)
    builds = [b for b in order if (b == build if build is not None else b in live)]
    data = _build_data(con, host, window, since, until, order)
    rows = []
    for label in builds:
        d = data(label)
        for check in CHECKS:
            f = check.run(d)
            rows.append((label, check.number, check.name, check.needs, f.verdict, f.evidence, f.decide))
    frame = pl.DataFrame(rows, schema={str(c): t for c, t in zip(COLUMNS, _TYPES, strict=True)}, orient="row")
    counts = {v: int((frame["verdict"] == v).sum()) for v in VERDICTS}
    notes = []
    if not order:
        notes.append(f"host {host} has no entry in the build timeline (gonka-evidence builds FILE.toml).")
    elif not builds:
        notes.append(f"no build of host {host} was in effect in {window.describe()}.")
    notes.append(
        "Each check answers from the host's own data only: 'cannot tell' says what data would decide it, and no "
        "check passes by default. Rules and thresholds: docs/evidence.md#preflight."
    )
    return EvidenceResult(
        evidence=NAME,
        title=f"Preflight of {host}: what a DSpark host needs, by build ({_describe(window, build, builds_since)})",
        params={"host": host, **window.params, "build": build, "builds_since": builds_since},
        rows=frame,
        stats={
            "verdicts": counts,
            "failed": [
                f"{r['build']}: {r['check']} {r['name']}"
                for r in frame.filter(pl.col("verdict") == FAIL).iter_rows(named=True)
            ],
            "test": f"Fisher exact, one-sided (greater), alpha {ALPHA}",
        },
        notes=notes,
    )


_TYPES = (pl.String, pl.Int64, pl.String, pl.String, pl.String, pl.String, pl.String)


def _describe(window: Window, build: str | None, builds_since: str | None) -> str:
    if build is not None:
        return f"{window.describe()}, build {build!r}"
    if builds_since is not None:
        return f"{window.describe()}, builds in effect since {builds_since}"
    return window.describe()


def _live_builds(con, host: str, since: dt.datetime | None, until: dt.datetime | None) -> set[str]:
    """The builds of the host in effect at some time of ``[since, until)``."""
    spans = fetch_frame(con, sql_text("evidence/host_build_windows.sql"), {"host": host})
    return {
        r["build"]
        for r in spans.iter_rows(named=True)
        if (until is None or r["valid_from"] < until)
        and (since is None or r["valid_to"] is None or r["valid_to"] > since)
    }


def _build_data(con, host: str, window: Window, since, until, order: list[str]) -> Callable[[str], BuildData]:
    """Load what the checks read once, and cut it per build."""
    params = {"host": host, **window.params}
    bounds = {"host": host, "since": since, "until": until}
    verdicts = fetch_frame(con, sql_text("evidence/host_verdict_counts.sql"), params)
    overall = fetch_frame(
        con, sql_text("evidence/host_verdict_counts.sql"), {"host": host, "epoch": None, "since": None, "until": None}
    )
    network = fetch_frame(con, sql_text("evidence/preflight_network_verdicts.sql"), params).row(0, named=True)
    answers = fetch_frame(con, sql_text("evidence/judged_answers.sql"), params).with_columns(
        sampling=pl.struct("temperature", "top_p").map_elements(
            lambda s: sampling_label(s["temperature"], s["top_p"], False), return_dtype=pl.String
        ),
        invalidated=(pl.col("status") == "invalidated").cast(pl.Int64),
    )
    # start cycles, deaths and PoC lines belong to builds as `builds check` attributes them (build_spans)
    spans = build_spans(
        fetch_frame(con, sql_text("evidence/host_build_windows.sql"), {"host": host}),
        fetch_frame(con, sql_text("evidence/host_cycle_starts.sql"), {"host": host})["started_at"].to_list(),
    )

    def attributed(frame: pl.DataFrame, at: str) -> pl.DataFrame:
        builds = pl.Series("build", attribute(frame[at].to_list(), spans), dtype=pl.String).fill_null(UNATTRIBUTED)
        return frame.with_columns(builds)

    cycles = attributed(fetch_frame(con, sql_text("evidence/preflight_cycles.sql"), bounds), "started_at")
    deaths = attributed(
        fetch_frame(con, sql_text("evidence/preflight_deaths.sql"), {**bounds, "near_s": NEAR_DEATH_S}), "at"
    )
    hours = stability(con, host, window).rows.select("build", "hours_observed").rows()
    poc_lines = fetch_frame(con, sql_text("evidence/preflight_poc.sql"), bounds)
    poc_lines = attributed(poc_lines, "at") if poc_lines.height else poc_lines.with_columns(build=pl.lit(None))
    chain = read_chain_params(con)

    def counts(frame: pl.DataFrame, label: str) -> tuple[int, int]:
        part = frame.filter(pl.col("build") == label)
        return int(part["valid"].sum()), int(part["invalid"].sum())

    def of(label: str) -> BuildData:
        position = order.index(label)
        earlier = None
        if position > 0:
            previous = order[position - 1]
            earlier = (previous, *counts(overall, previous))
        mine = cycles.filter(pl.col("build") == label)
        models = [m for m in mine["model"].to_list() if m is not None]
        at = max(mine["started_at"].to_list(), default=None)
        return BuildData(
            build=label,
            verdicts=counts(verdicts, label),
            earlier=earlier,
            network=(int(network["valid"] or 0), int(network["invalid"] or 0)),
            answers=answers.filter(pl.col("build") == label),
            cycles=mine,
            deaths=deaths.filter(pl.col("build") == label),
            poc=_poc(poc_lines.filter(pl.col("build") == label)),
            log_hours=sum(h for b, h in hours if b == label),
            chain_mode=chain_value("logprobs_mode", models[-1] if models else None, at, chain),
            seq_len=chain_value("poc_seq_len", models[-1] if models else None, at, chain),
        )

    return of


def _poc(lines: pl.DataFrame) -> dict:
    """A build's PoC lines (preflight_poc.sql rows): its windows, those that stopped empty (the first one's time
    and record) and the largest batch stated (and its record)."""
    stops, batches = lines.filter(pl.col("what") == "stop"), lines.filter(pl.col("what") == "batch")
    empty = stops.filter(pl.col("empty"))
    out: dict = {"windows": stops.height, "empty_windows": empty.height}
    if empty.height:
        out |= {"first_empty_at": empty["at"][0], "first_empty_record": empty["record_key"][0]}
    # batch_size=0 is the plugin's automatic sizing (gonka-vllm-plugins routes.py @a6a28429), no stated batch
    stated = batches.filter(pl.col("batch_size") > 0)
    if stated.height:
        top = stated.sort("batch_size", "at", descending=[True, False]).row(0, named=True)
        out |= {"batch_size": top["batch_size"], "batch_record": top["record_key"]}
    elif (auto := batches.filter(pl.col("batch_size") == 0).sort("at")).height:
        out["batch_auto_record"] = auto["record_key"][0]
    return out


def failed(result: EvidenceResult) -> bool:
    """Whether any check of the result failed (the `preflight --strict` exit status)."""
    return bool((result.rows["verdict"] == FAIL).any()) if result.rows.height else False


def _view(result: EvidenceResult, context) -> pl.DataFrame:
    """The report shows the verdicts and what decides them, not the static `needs` column."""
    return result.rows.drop("needs")


SPEC = register(
    EvidenceSpec(
        name=NAME,
        summary="What a DSpark host needs, per build: the seed's six failure modes (replay fix, logprobs mode, "
        "memory headroom, PoC batch coupling, start-up hang, speculative config), each pass, fail or cannot tell "
        "from the host's own data.",
        compute=preflight,
        columns=COLUMNS,
        sql=(
            "evidence/host_builds.sql",
            "evidence/host_build_windows.sql",
            "evidence/host_verdict_counts.sql",
            "evidence/preflight_network_verdicts.sql",
            "evidence/judged_answers.sql",
            "evidence/preflight_cycles.sql",
            "evidence/preflight_deaths.sql",
            "evidence/preflight_poc.sql",
            "evidence/host_cycle_starts.sql",
            "evidence/log_window_bounds.sql",
        ),
        options=(
            Option("build", "--build", "Only this build (its label in the build timeline).", str, "LABEL"),
            Option(
                "builds_since",
                "--builds-since",
                "Only the builds in effect at or after this time (ISO-8601; `preflight --since`).",
                str,
                "T",
            ),
        ),
        report=ReportSection(order=110, heading="Preflight: what a DSpark host needs", view=_view),
        description="Six rows per build of the host in effect in the window (`--build LABEL`: that build only): "
        'the failure modes of a plain DSpark setup that gonka-ai/gonka#2198 lists under "What a host needs", each '
        "checked on what the warehouse holds. Verdicts and answers honour the window as `votes-by-build` and "
        "`answers-by-sampling` do; log-based checks read the start cycles, deaths and PoC lines in its time span "
        "(`--epoch`: the epoch's first to last event); hours of log are `stability`'s `hours_observed`. "
        "`--builds-since T` keeps the builds in effect at or after T, each checked on the window's data. "
        "`gonka-evidence preflight` prints the same table (its `--since T` is "
        "`--builds-since T`) and exits 3 with `--strict` when a check fails.",
        notes="Rules, in check order (thresholds are constants of `pipeline/evidence/tables/preflight.py`, upstream "
        "facts those of `pipeline/core/upstream.py`):\n\n"
        + "\n".join(f"{c.number}. **{c.name}** ({c.needs}): {c.rule}." for c in CHECKS)
        + "\n\n`stats.verdicts`: rows per verdict; `stats.failed`: `build: number name` of each failed check.",
    )
)
