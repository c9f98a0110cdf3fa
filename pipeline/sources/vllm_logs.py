"""vLLM server logs (sources.md §7): spec-decode windows, engine stats and engine events.

Every line is read once. ANSI colour is stripped and the ``(EngineCore_DP0 pid=N)``
process prefix set aside before matching (§7.1); lines that do not start a record
(tracebacks) are folded into the record before them, so a crash counts once.
A line that neither starts a known record nor continues one is *unparsed*: it is
reported and quarantined, never fatal (a newer vLLM may print a format we do not
know yet). Fields are matched by name, not position, and the per-position list is
pulled out before anything splits on commas (§7.2).

Timestamps have no year (§7.1): each record carries the number of December →
January rollovers seen before it in its file; ``--year`` is the year of the file's
first record, otherwise the file's modification time is taken as the time of its
last record (then a first, cheaper pass counts the rollovers). Times are taken as UTC.

Streaming (bench/BENCHMARKS.md, log parsing): the file is read in chunks of whole lines
(``CHUNK_BYTES``); each chunk is one Polars frame of lines on which the envelope,
the ANSI codes, the process prefix and the stats / SpecDecoding fields are handled
by vectorised string expressions. Only the rare lines (events, version lines,
uvicorn lines, tracebacks, unparsed lines) go through Python. What crosses a chunk
boundary is a small state: rollovers and the last month, the vLLM version, the open
record (its level, whether lines were folded into it, its pending events) and the
set of record-key hashes already seen (8 bytes per keyed record, for the occurrence
number of the key). `iter_vllm_batches` yields one `VllmBatch` of row frames per
chunk; nothing else is kept.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np
import polars as pl

from pipeline.sources.logfiles import LogFile

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Lines that belong to a traceback or exception report even after a non-error record.
TRACE_LINE = re.compile(
    r"\s|Traceback \(most recent call last\)|During handling of|The above exception|[\w.]+(?:Error|Exception|Exit|Interrupt)\b"
)
MAX_PREFIX = 64  # VLLM_LOGGING_PREFIX: free text before the level

NUMBER = r"(?:nan|-?\d+(?:\.\d+)?)"
PER_POSITION = re.compile(rf"Per-position acceptance rate: ({NUMBER}(?:, {NUMBER})*)")
SPEC_FIELDS = {
    "mal_printed": re.compile(rf"(?:^|, )Mean acceptance length: ({NUMBER})"),
    "accepted_tps": re.compile(rf"(?:^|, )Accepted throughput: ({NUMBER}) tokens/s"),
    "drafted_tps": re.compile(rf"(?:^|, )Drafted throughput: ({NUMBER}) tokens/s"),
    "accepted": re.compile(r"(?:^|, )Accepted: (\d+) tokens"),
    "drafted": re.compile(r"(?:^|, )Drafted: (\d+) tokens"),
    "acceptance_rate_printed": re.compile(rf"(?:^|, )(?:Avg )?Draft acceptance rate: ({NUMBER})%"),
}
STATS_HEAD = re.compile(
    rf"^(?:Engine (?P<engine>\d+): |(?P<engines>\d+) Engines Aggregated: )?"
    rf"Avg prompt throughput: (?P<prompt>{NUMBER}) tokens/s, Avg generation throughput: (?P<gen>{NUMBER}) tokens/s"
)
STATS_FIELDS = {
    "running": re.compile(r", Running: (\d+) reqs"),
    "waiting": re.compile(r", (?:Waiting|Pending): (\d+) reqs"),
    "preemptions": re.compile(r", Preemptions: (\d+)"),
    "kv_cache_usage": re.compile(rf", GPU KV cache usage: ({NUMBER})%"),
    "prefix_cache_hit_rate": re.compile(rf", Prefix cache hit rate: ({NUMBER})%"),
}
VERSION = re.compile(r"(?:Initializing an? (?:V1 )?LLM engine \(v|vLLM API server version |vLLM server version )(?P<v>\d+\.\d+\.\d+[\w.+-]*)")
OOM = re.compile(
    r"OutOfMemoryError|CUDA out of memory|not enough GPU memory|No available memory for the cache blocks"
    r"|larger than the available KV cache memory"
)
PREEMPTIONS_ALWAYS_PRINTED = (0, 11, 1)  # from 0.11.1 a missing `Preemptions:` field means 0 (§7.5)


@dataclass
class ParsedLog:
    """Rows of one file as lists of dicts (small files, tests and the benchmark's expected counts);
    large files go through `iter_vllm_batches`, which never holds more than a chunk."""

    spec: list[dict] = field(default_factory=list)
    stats: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    unparsed: list[tuple[int, str, str]] = field(default_factory=list)  # (line, key, text)
    lines: int = 0
    records: int = 0
    first_at: datetime | None = None
    last_at: datetime | None = None


def parse_version(text: str) -> tuple[int, ...] | None:
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(x) for x in m.groups()) if m else None


def _float(text: str | None) -> float | None:
    return None if text is None else float(text)


def parse_spec_line(text: str, version: tuple[int, ...] | None = None) -> dict | None:
    """Fields of a `SpecDecoding metrics:` message, by name; None when Accepted/Drafted are missing.

    ``mal_semantics`` is ``no_plus1`` for the 0.8.5 line (MAL = accepted/drafts) and
    ``plus1`` otherwise; ``drafts`` is recovered as accepted/(MAL − 1) (or accepted/MAL
    for 0.8.5) because the line does not print it (§7.3).
    """
    per_position = None
    m = PER_POSITION.search(text)
    rest = text
    if m:
        per_position = [float(v) for v in m.group(1).split(", ")]
        rest = text[: m.start()] + text[m.end():]
    row: dict = {}
    for name, rx in SPEC_FIELDS.items():
        found = rx.search(rest)
        row[name] = found.group(1) if found else None
    if row["accepted"] is None or row["drafted"] is None:
        return None
    accepted, drafted = int(row["accepted"]), int(row["drafted"])
    mal = _float(row["mal_printed"])
    semantics = "plus1"
    if row["accepted_tps"] is None and mal is not None and mal == mal:
        usable = per_position and all(v == v for v in per_position)
        if usable:
            total = sum(per_position)
            if abs(mal - total) < abs(mal - (1 + total)):
                semantics = "no_plus1"
        elif version is not None and version < (0, 9, 0):
            semantics = "no_plus1"
    drafts = None
    if mal is not None and mal == mal and accepted > 0:
        ratio = mal - 1 if semantics == "plus1" else mal
        if ratio > 0:
            drafts = max(1, round(accepted / ratio))
    return {
        "accepted": accepted,
        "drafted": drafted,
        "drafts": drafts,
        "per_position": per_position,
        "mal_printed": mal,
        "mal_semantics": semantics,
        "accepted_tps": _float(row["accepted_tps"]),
        "drafted_tps": _float(row["drafted_tps"]),
        "acceptance_rate_printed": _float(row["acceptance_rate_printed"]),
    }


def parse_stats_line(text: str, version: tuple[int, ...] | None = None) -> dict | None:
    head = STATS_HEAD.match(text)
    if not head:
        return None
    row = {name: (rx.search(text, head.end()) or None) for name, rx in STATS_FIELDS.items()}
    if row["running"] is None:
        return None
    aggregated = head.group("engines") is not None
    preemptions = row["preemptions"]
    if preemptions is not None:
        preemptions = int(preemptions.group(1))
    elif aggregated or (version is not None and version >= PREEMPTIONS_ALWAYS_PRINTED):
        preemptions = 0  # the field is printed only when > 0 from 0.11.1; before that it is unknown
    kv = row["kv_cache_usage"]
    prefix = row["prefix_cache_hit_rate"]
    return {
        "engine": head.group("engine") or ("all" if aggregated else None),
        "prompt_tps": float(head.group("prompt")),
        "generation_tps": float(head.group("gen")),
        "running": int(row["running"].group(1)),
        "waiting": int(row["waiting"].group(1)) if row["waiting"] else None,
        "preemptions": preemptions,
        "kv_cache_usage": float(kv.group(1)) / 100 if kv else None,
        "prefix_cache_hit_rate": float(prefix.group(1)) / 100 if prefix else None,
    }


def _events(msg: str, uvicorn: bool = False, more_cause: str = "", more_oom: bool = False) -> list[tuple[str, str]]:
    """(kind, detail) of the engine events a record holds (§7.6–7.8).

    ``more_cause`` is the last folded line that does not start with a space (stripped), ``more_oom``
    whether any folded line matches `OOM` — all the traceback `_events` needs, kept as it streams by.
    """
    if uvicorn:
        return [("ready", msg)] if msg.startswith("Application startup complete") else []
    if "LLM engine (v" in msg and msg.startswith("Initializing"):
        version = VERSION.search(msg)
        return [("start", f"vLLM {version.group('v')}" if version else msg[:200])]
    if "EngineCore encountered a fatal error" in msg or "EngineCore failed to start" in msg:
        detail = msg.strip() + (f" — {more_cause[:300]}" if more_cause else "")
        events = [("fatal", detail)]
        if more_oom or OOM.search(msg):
            events.append(("oom", detail))
        return events
    if "EngineDeadError" in msg or ("Engine core process" in msg and "died unexpectedly" in msg) or "AsyncLLM output_handler failed" in msg:
        return [("engine_dead", msg[:300])]
    if ("Worker proc" in msg and "died unexpectedly" in msg) or ("died with exit code" in msg and DIED_EXIT.search(msg)):
        return [("worker_died", msg[:300])]
    if msg.startswith("PoC generation started"):
        return [("poc_start", msg[:300])]
    if msg.startswith("PoC stopped") or msg.startswith("PoC generation crashed"):
        return [("poc_stop", msg[:300])]
    if OOM.search(msg):
        return [("oom", msg[:300])]
    return []


DIED_EXIT = re.compile(r"Process .* died with exit code")
# Every record `_events` can return something for contains one of these (a superset filter, run in Rust).
EVENT_WORDS = [
    "LLM engine (v", "EngineCore encountered a fatal error", "EngineCore failed to start", "EngineDeadError",
    "died unexpectedly", "died with exit code", "AsyncLLM output_handler failed", "PoC generation started",
    "PoC stopped", "PoC generation crashed", "OutOfMemoryError", "CUDA out of memory", "not enough GPU memory",
    "No available memory for the cache blocks", "larger than the available KV cache memory",
]

# -- streaming, vectorised parser ----------------------------------------------------------------

CHUNK_BYTES = 8 << 20  # whole lines per chunk; peak memory is a small multiple of this (bench: 8 ≈ 16 ≈ 32 MiB in speed)
_WS = r"[\s\x1c-\x1f]"  # Python's str.isspace() also counts \x1c-\x1f, Rust's \s does not
_PY_SPACE = "".join(c for c in map(chr, range(0x3001)) if c.isspace())  # what str.strip() strips
_LEVEL = "DEBUG|INFO|WARNING|ERROR|CRITICAL"
_RX_ANSI = r"\x1b\[[0-9;]*[A-Za-z]"
_RX_PREFIX = rf"^(\([A-Za-z][\w-]* pid=\d+\){_WS}?)"
_RX_ENV = rf"^(.{{0,{MAX_PREFIX}}}?(?:{_LEVEL}) \d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? \[[^\]]*\] )"
_RX_ENV0 = rf"^((?:{_LEVEL}) \d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? \[[^\]]*\] )"
_RX_STAMP = rf"({_LEVEL}) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)"
_RX_UVICORN = rf"^(?:{_LEVEL}):{_WS}+(.*)$"
_RX_TRACE = (rf"^(?:{_WS}|Traceback \(most recent call last\)|During handling of|The above exception"
             r"|[\w.]+(?:Error|Exception|Exit|Interrupt)\b)")
_RX_BLANK = rf"^{_WS}*$"
_RX_VERSION = r"(?:Initializing an? (?:V1 )?LLM engine \(v|vLLM API server version |vLLM server version )(\d+)\.(\d+)\.(\d+)"
_RX_PP = rf"Per-position acceptance rate: ({NUMBER}(?:, {NUMBER})*)"
_RX_STATS_HEAD = (rf"^(?:Engine (?P<engine>\d+): |(?P<engines>\d+) Engines Aggregated: )?"
                  rf"Avg prompt throughput: (?P<prompt>{NUMBER}) tokens/s, Avg generation throughput: (?P<gen>{NUMBER}) tokens/s")
_V090, _V0111 = 9 * 10**6, 11 * 10**6 + 1  # version code = major·10^12 + minor·10^6 + patch
STAMP_COLS = ("rollovers", "month", "day", "h", "m", "s")


def _version_code(v: tuple[int, ...] | None) -> int | None:
    return None if v is None else v[0] * 10**12 + v[1] * 10**6 + v[2]


@dataclass
class VllmBatch:
    """Rows of one chunk. Every row frame has record_key, line, level, proc and the stamp columns
    (rollovers, month, day, h, m, s; `at` once the base year is known, see `with_at`)."""

    spec: pl.DataFrame
    stats: pl.DataFrame
    events: pl.DataFrame
    unparsed: pl.DataFrame  # line, record_key, text (first 500 characters)


@dataclass
class _Open:
    """The current record, carried across chunk boundaries."""

    line: int
    level_err: bool
    stamp: tuple[int, int, int, int, int, int]  # rollovers, month, day, h, m, s
    more: bool = False
    pending: dict | None = None  # an event candidate whose events wait for its folded lines


@dataclass
class VllmStream:
    """State and totals of one streaming parse; filled in while `iter_vllm_batches` runs."""

    year: int | None
    lines: int = 0
    records: int = 0
    unparsed: int = 0
    rollovers: int = 0
    last_month: int | None = None
    version: int | None = None
    cur: _Open | None = None
    first: tuple | None = None  # stamp of the first / last record
    last: tuple | None = None
    base: int | None = None  # year of rollover 0
    _seen: list = field(default_factory=list)  # sorted uint64 runs of the key hashes seen (see _assign_keys)
    _multi: dict = field(default_factory=dict)  # hash64 -> occurrences so far, only for hashes seen twice or more

    def at(self, stamp) -> datetime | None:
        if stamp is None or self.base is None:
            return None
        r, mo, d, h, mi, s = stamp
        try:
            return datetime(self.base + r, mo, d, h, mi, s, tzinfo=timezone.utc)
        except ValueError:  # 02-29 in a year we guessed wrong; keep the row, on the 28th
            return datetime(self.base + r, mo, min(d, 28), h, mi, s, tzinfo=timezone.utc)


def _chunks(file: LogFile, chunk_bytes: int) -> Iterator[pl.Series]:
    """The file's lines, chunk by chunk, split like Python's text-mode iteration (\\n, \\r\\n, \\r)."""
    import gzip

    with gzip.open(file.path, "rb") if file.gzipped else open(file.path, "rb") as fh:
        while True:
            block = fh.read(chunk_bytes)
            if not block:
                return
            if not block.endswith(b"\n"):
                block += fh.readline()  # up to the end of the line (a lone \r inside is split below)
            yield _split(block)


def _split(data: bytes) -> pl.Series:
    n = data.count(b"\n") + (not data.endswith(b"\n"))
    if (b"\r" not in data and b"\x1f" not in data and b"\n\n" not in data and not data.startswith(b"\n")
            and not data.startswith(b"\xef\xbb\xbf")):  # the CSV reader would drop empty lines and a BOM
        valid = data.isascii()
        if not valid:
            try:
                data.decode("utf-8")
                valid = True
            except UnicodeDecodeError:
                pass
        if valid:  # the multi-threaded CSV reader as a line splitter (no separator, no quotes)
            s = pl.read_csv(data, has_header=False, separator="\x1f", quote_char=None, new_columns=["raw"],
                            schema_overrides={"raw": pl.String}, comment_prefix=None)["raw"]
            if s.len() == n and s.null_count() == 0:
                return s
    text = data.decode("utf-8", "replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    return pl.Series("raw", parts, dtype=pl.String)


def _hashes_series(s: pl.Series) -> pl.Series:
    """line_hash of every string (the record key's hash, unchanged from the line-by-line parser)."""
    b2 = hashlib.blake2b
    return pl.Series([b2(b, digest_size=10).digest() for b in s.cast(pl.Binary).to_list()], dtype=pl.Binary).bin.encode("hex")


def _lines_frame(raw: pl.Series, first_line: int) -> pl.DataFrame:
    """Per line: body (ANSI stripped, process prefix removed), proc, and for envelope lines the level,
    stamp and message."""
    raw = raw.alias("raw")
    df = pl.DataFrame({"raw": raw}).with_columns(line=pl.int_range(first_line, first_line + raw.len(), dtype=pl.Int64))
    l = pl.col("raw").str.replace_all(_RX_ANSI, "")
    df = df.with_columns(l=l).with_columns(pre=pl.col("l").str.extract(_RX_PREFIX, 1))
    df = df.with_columns(
        body=pl.when(pl.col("pre").is_null()).then(pl.col("l")).otherwise(pl.col("l").str.slice(pl.col("pre").str.len_chars())),
        proc=pl.col("pre").str.extract(r"^\(([A-Za-z][\w-]*) pid=", 1),
    ).drop("raw", "l", "pre")
    df = df.with_columns(env=pl.col("body").str.extract(_RX_ENV0, 1))
    missed = df["env"].is_null()
    if missed.any():  # VLLM_LOGGING_PREFIX text before the level: the lazy-prefix form, only on those lines
        idx = missed.arg_true()
        env = df["body"].gather(idx).str.extract(_RX_ENV, 1)
        if env.null_count() < env.len():
            df = df.with_columns(env=df["env"].scatter(idx, env))
    df = df.with_columns(
        msg=pl.col("body").str.slice(pl.col("env").str.len_chars()),
        stamp=pl.col("env").str.extract_groups(_RX_STAMP),
    )
    f = pl.col("stamp").struct
    return df.with_columns(
        level=f.field("1"), month=f.field("2").cast(pl.Int32), day=f.field("3").cast(pl.Int32),
        h=f.field("4").cast(pl.Int32), m=f.field("5").cast(pl.Int32), s=f.field("6").cast(pl.Int32),
    ).drop("stamp", "env")


def _spec_rows(d: pl.DataFrame) -> pl.DataFrame:
    """`parse_spec_line` as column expressions (see it for the rules); `ok` False where it returns None."""
    # msg.split("SpecDecoding metrics:", 1)[1].strip() (trailing whitespace cannot change a match)
    d = d.with_columns(st=pl.col("msg").str.splitn("SpecDecoding metrics:", 2).struct.field("field_1")
                       .str.strip_chars_start(_PY_SPACE))
    d = d.with_columns(pp_text=pl.col("st").str.extract(_RX_PP, 1))
    d = d.with_columns(rest=pl.lit(", ") + pl.when(pl.col("pp_text").is_null()).then(pl.col("st"))
                       .otherwise(pl.col("st").str.replace(_RX_PP, "")))
    r = pl.col("rest").str
    d = d.with_columns(
        mal_printed=r.extract(rf", Mean acceptance length: ({NUMBER})", 1).cast(pl.Float64),
        accepted_tps=r.extract(rf", Accepted throughput: ({NUMBER}) tokens/s", 1).cast(pl.Float64),
        drafted_tps=r.extract(rf", Drafted throughput: ({NUMBER}) tokens/s", 1).cast(pl.Float64),
        accepted=r.extract(r", Accepted: (\d+) tokens", 1).cast(pl.Int64),
        drafted=r.extract(r", Drafted: (\d+) tokens", 1).cast(pl.Int64),
        acceptance_rate_printed=r.extract(rf", (?:Avg )?Draft acceptance rate: ({NUMBER})%", 1).cast(pl.Float64),
        per_position=pl.col("pp_text").str.split(", ").cast(pl.List(pl.Float64)),
    )
    k = int(d["per_position"].list.len().max() or 0) if d.height else 0
    total = pl.lit(0.0)
    for i in range(k):  # left to right, as Python's sum(): the 0.8.5 test can sit on a tie
        total = total + pl.col("per_position").list.get(i, null_on_oob=True).fill_null(0.0)
    mal = pl.col("mal_printed")
    mal_ok = mal.is_not_null() & mal.is_not_nan()
    usable = pl.col("pp_text").is_not_null() & ~pl.col("pp_text").str.contains("nan", literal=True)
    closer = (mal - total).abs() < (mal - (1 + total)).abs()
    old = pl.col("ver").is_not_null() & (pl.col("ver") < _V090)
    no_plus1 = pl.col("accepted_tps").is_null() & mal_ok & pl.when(usable).then(closer).otherwise(old)
    d = d.with_columns(mal_semantics=pl.when(no_plus1).then(pl.lit("no_plus1")).otherwise(pl.lit("plus1")))
    ratio = pl.when(pl.col("mal_semantics") == "plus1").then(mal - 1).otherwise(mal)
    ratio = pl.when(mal_ok & (pl.col("accepted") > 0) & (ratio > 0)).then(ratio)  # else no drafts
    return d.with_columns(
        drafts=(pl.col("accepted") / ratio).round(0, mode="half_to_even").cast(pl.Int64).clip(lower_bound=1),
        ok=pl.col("accepted").is_not_null() & pl.col("drafted").is_not_null(),
    )


def _stats_rows(d: pl.DataFrame) -> pl.DataFrame:
    """`parse_stats_line` as column expressions; `ok` False where it returns None."""
    d = d.with_columns(head=pl.col("msg").str.extract_groups(_RX_STATS_HEAD))
    f = pl.col("head").struct
    m = pl.col("msg").str
    d = d.with_columns(
        matched=f.field("gen").is_not_null(), engine_n=f.field("engine"), engines=f.field("engines"),
        prompt_tps=f.field("prompt").cast(pl.Float64), generation_tps=f.field("gen").cast(pl.Float64),
        running=m.extract(r", Running: (\d+) reqs", 1).cast(pl.Int64),
        waiting=m.extract(r", (?:Waiting|Pending): (\d+) reqs", 1).cast(pl.Int64),
        pre=m.extract(r", Preemptions: (\d+)", 1).cast(pl.Int64),
        kv_cache_usage=m.extract(rf", GPU KV cache usage: ({NUMBER})%", 1).cast(pl.Float64),
        prefix_cache_hit_rate=m.extract(rf", Prefix cache hit rate: ({NUMBER})%", 1).cast(pl.Float64),
    ).drop("head")
    # x / 100 with a true division (Polars turns division by a scalar into a multiplication by 0.01)
    d = d.with_columns(pl.Series(c, d[c].to_numpy() / 100.0, dtype=pl.Float64) for c in ("kv_cache_usage", "prefix_cache_hit_rate"))
    aggregated = pl.col("engines").is_not_null()
    new = pl.col("ver").is_not_null() & (pl.col("ver") >= _V0111)
    return d.with_columns(
        engine=pl.when(pl.col("engine_n").is_not_null()).then(pl.col("engine_n"))
        .when(aggregated).then(pl.lit("all")).otherwise(pl.lit(None, pl.String)),
        preemptions=pl.when(pl.col("pre").is_not_null()).then(pl.col("pre"))
        .when(aggregated | new).then(pl.lit(0, pl.Int64)).otherwise(pl.lit(None, pl.Int64)),
        ok=pl.col("matched") & pl.col("running").is_not_null(),
    )


SPEC_COLS = ["accepted", "drafted", "drafts", "per_position", "mal_printed", "mal_semantics", "accepted_tps",
             "drafted_tps", "acceptance_rate_printed"]
STATS_COLS = ["engine", "prompt_tps", "generation_tps", "running", "waiting", "preemptions", "kv_cache_usage",
              "prefix_cache_hit_rate"]
_BASE = {"line": pl.Int64, "head": pl.String, "level": pl.String, "proc": pl.String, "rollovers": pl.Int32,
         "month": pl.Int32, "day": pl.Int32, "h": pl.Int32, "m": pl.Int32, "s": pl.Int32}
_EVENT_SCHEMA = _BASE | {"kind": pl.String, "detail": pl.String}
_UNPARSED_SCHEMA = {"line": pl.Int64, "head": pl.String, "text": pl.String}


def _parse_chunk(raw: pl.Series, st: VllmStream) -> tuple[pl.DataFrame, pl.DataFrame, list, list]:
    """One chunk → (spec rows, stats rows, event rows, unparsed rows), each still keyed by `head`."""
    df = _lines_frame(raw, st.lines + 1)
    st.lines += raw.len()
    is_env = pl.col("level").is_not_null()
    # year rollovers and the month of the last envelope line, carried over chunks
    prev = pl.col("month").shift(1).forward_fill()
    if st.last_month is not None:
        prev = prev.fill_null(st.last_month)
    df = df.with_columns(rollovers=(st.rollovers + (pl.col("month") < prev - 6).fill_null(False).cast(pl.Int32).cum_sum()))
    df = df.with_columns(rollovers=pl.when(is_env).then(pl.col("rollovers")).otherwise(None))
    env_lines = df.filter(is_env).select(["line", *STAMP_COLS])
    had_cur = st.cur is not None
    # rare lines: everything that is not an envelope line, and envelope lines that may hold an event or a version
    rare_mask = (~is_env & ~pl.col("body").str.contains(_RX_BLANK)) | (
        is_env & (pl.col("msg").str.contains_any(EVENT_WORDS) | pl.col("msg").str.contains("version", literal=True)))
    n_env_before = is_env.cast(pl.Int64).cum_sum() - is_env.cast(pl.Int64)
    # the stamp of the latest envelope record at or before each line (uvicorn records copy it)
    ffill = [pl.when(is_env).then(pl.col(c)).otherwise(None).forward_fill().alias(f"p_{c}") for c in STAMP_COLS]
    ffill += [pl.when(is_env).then(pl.col("line")).otherwise(None).forward_fill().alias("p_line"),
              pl.when(is_env).then(pl.col("level").is_in(["ERROR", "CRITICAL"])).otherwise(None).forward_fill().alias("p_err")]
    rare = df.with_columns(*ffill, n_env_before=n_env_before).filter(rare_mask)
    rare = rare.with_columns(
        uv_msg=pl.when(pl.col("level").is_null()).then(pl.col("body").str.extract(_RX_UVICORN, 1)),
        trace=pl.when(pl.col("level").is_null()).then(pl.col("body").str.contains(_RX_TRACE)),
    )
    rare = rare.with_columns(uv_rec=pl.col("uv_msg").is_not_null() & ((pl.col("n_env_before") > 0) | had_cur))
    # version (of records: envelope and uvicorn), forward-filled over the chunk
    vtext = pl.when(pl.col("level").is_not_null()).then(pl.col("msg")).when(pl.col("uv_rec")).then(pl.col("uv_msg"))
    vg = vtext.str.extract_groups(_RX_VERSION).struct
    rare = rare.with_columns(ver_new=vg.field("1").cast(pl.Int64) * 10**12 + vg.field("2").cast(pl.Int64) * 10**6
                             + vg.field("3").cast(pl.Int64))
    versions = rare.filter(pl.col("ver_new").is_not_null()).select("line", "ver_new")
    if versions.height or st.version is not None:
        df = (df.join(versions, on="line", how="left", maintain_order="left") if versions.height
              else df.with_columns(ver_new=pl.lit(None, pl.Int64)))
        ver = pl.col("ver_new").forward_fill()
        if st.version is not None:
            ver = ver.fill_null(st.version)
        df = df.with_columns(ver=ver).drop("ver_new")
        if versions.height:
            st.version = int(versions["ver_new"][-1])
    else:
        df = df.with_columns(ver=pl.lit(None, pl.Int64))

    # spec / stats rows (vectorised)
    spec_mask = is_env & pl.col("msg").str.contains("SpecDecoding metrics:", literal=True)
    stats_mask = is_env & ~pl.col("msg").str.contains("SpecDecoding metrics:", literal=True) & pl.col("msg").str.contains(
        "Avg prompt throughput:", literal=True)
    keep = ["line", "body", "level", "proc", *STAMP_COLS, "msg", "ver"]
    spec = _spec_rows(df.filter(spec_mask).select(keep))
    stats = _stats_rows(df.filter(stats_mask).select(keep))
    failed = set(spec.filter(~pl.col("ok"))["line"].to_list()) | set(stats.filter(~pl.col("ok"))["line"].to_list())
    unparsed: list[tuple[int, str, str]] = [(r[0], r[1], r[1][:500]) for r in pl.concat([
        spec.filter(~pl.col("ok")).select("line", "body"), stats.filter(~pl.col("ok")).select("line", "body")]).sort("line").iter_rows()]
    spec = spec.filter(pl.col("ok")).select("line", pl.col("body").alias("head"), "level", "proc", *STAMP_COLS, *SPEC_COLS)
    stats = stats.filter(pl.col("ok")).select("line", pl.col("body").alias("head"), "level", "proc", *STAMP_COLS, *STATS_COLS)

    # the rare lines, in order: uvicorn records, traceback folding, events, unparsed lines
    events: list[tuple] = []

    def flush(cur: _Open | None) -> None:
        if cur is not None and cur.pending is not None:
            p = cur.pending
            for kind, detail in _events(p["msg"], p["uvicorn"], p["cause"], p["oom"]):
                events.append((p["line"], p["head"], p["level"], p["proc"], *p["stamp"], kind, detail))
            cur.pending = None

    cur = st.cur
    st.records += env_lines.height
    cols = ["line", "body", "proc", "level", "msg", *STAMP_COLS, "p_line", "p_err", *[f"p_{c}" for c in STAMP_COLS],
            "uv_msg", "uv_rec", "trace"]
    for (line, body, proc, level, msg, r, mo, d, h, mi, s, p_line, p_err, pr, pmo, pd, ph, pmi, ps,
         uv_msg, uv_rec, trace) in rare.select(cols).iter_rows():
        if level is not None:  # an envelope record that may hold events
            flush(cur)
            stamp = (r, mo, d, h, mi, s)
            cur = _Open(line, level in ("ERROR", "CRITICAL"), stamp)
            if line not in failed:
                cur.pending = {"line": line, "head": body, "level": level, "proc": proc, "stamp": stamp, "msg": msg,
                               "uvicorn": False, "cause": "", "oom": False}
            continue
        if p_line is not None and (cur is None or cur.line < p_line):  # a plain envelope record came in between
            flush(cur)
            cur = _Open(p_line, bool(p_err), (pr, pmo, pd, ph, pmi, ps))
        if uv_msg is not None:
            if cur is None:
                continue  # before any timed record: nothing to date it by
            flush(cur)
            r, mo, d, h, mi, s = cur.stamp
            head = f"{mo:02d}-{d:02d} {(h, mi, s)} {body}"
            st.records += 1
            cur = _Open(line, False, cur.stamp)
            cur.pending = {"line": line, "head": head, "level": "INFO", "proc": proc, "stamp": cur.stamp, "msg": uv_msg,
                           "uvicorn": True, "cause": "", "oom": False}
            continue
        if cur is not None and (cur.level_err or cur.more or trace):
            cur.more = True
            if cur.pending is not None:
                if not body.startswith(" ") and body.strip():
                    cur.pending["cause"] = body.strip()
                if not cur.pending["oom"] and OOM.search(body):
                    cur.pending["oom"] = True
            continue
        unparsed.append((line, body, body[:500]))
    if env_lines.height:  # the chunk's last record may be a plain one after the last rare line
        last = env_lines.row(-1)
        if cur is None or cur.line < last[0]:
            flush(cur)
            cur = _Open(last[0], bool(df.filter(pl.col("line") == last[0])["level"][0] in ("ERROR", "CRITICAL")), tuple(last[1:]))
        if st.first is None:
            st.first = tuple(env_lines.row(0)[1:])
        st.last = tuple(last[1:])
        st.rollovers, st.last_month = int(last[1]), int(last[2])
    st.cur = cur
    return spec, stats, events, sorted(unparsed)


_RUN_CAP = 1 << 21  # 16 MiB per run of seen hashes


def _assign_keys(st: VllmStream, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """record_key = line_hash(head):n, n = earlier occurrences of the same hash in the file (as before).

    The earlier occurrences are looked up by the first 64 bits of the hash in a sorted array of the
    hashes seen so far (8 bytes per keyed record; a 64-bit collision between two different heads in
    one file, p ≈ n²/2⁶⁵, would give the second one n = 1)."""
    keys = pl.concat([f.select("line", "head") for f in frames]).unique("line").sort("line")
    if keys.height == 0:
        return pl.DataFrame(schema={"line": pl.Int64, "record_key": pl.String})
    keys = keys.with_columns(hash=_hashes_series(keys["head"]))
    h = keys["hash"].str.slice(0, 16).str.to_integer(base=16, dtype=pl.UInt64).to_numpy()
    order = np.argsort(h, kind="stable")  # stable: equal hashes stay in line order
    hs = h[order]
    idx = np.arange(len(hs))
    starts = np.ones(len(hs), dtype=bool)
    starts[1:] = hs[1:] != hs[:-1]
    rank_s = idx - np.maximum.accumulate(np.where(starts, idx, 0))  # occurrence within this chunk
    prior_s = np.zeros(len(hs), dtype=np.int64)
    found_s = np.zeros(len(hs), dtype=bool)
    for run in st._seen:
        found_s |= run[np.searchsorted(run, hs).clip(max=len(run) - 1)] == hs
    for i in np.flatnonzero(found_s):  # a head seen in an earlier chunk (rare)
        prior_s[i] = st._multi.get(int(hs[i]), 1)
    n_s = prior_s + rank_s
    ends = np.ones(len(hs), dtype=bool)
    ends[:-1] = starts[1:]
    for i in np.flatnonzero(ends & (n_s >= 1)):  # hashes now seen twice or more
        st._multi[int(hs[i])] = int(n_s[i]) + 1
    new = hs[starts & ~found_s]  # unique and sorted: a new run
    runs = st._seen
    if len(new):
        runs.append(new)
    # merge runs of similar size (binary-counter style), never beyond _RUN_CAP entries: few runs to search,
    # and no transient copy of the whole set (which would show in the peak RSS of a large file)
    while len(runs) >= 2 and len(runs[-1]) >= len(runs[-2]) // 2 and len(runs[-1]) + len(runs[-2]) <= _RUN_CAP:
        b, a = runs.pop(), runs.pop()
        runs.append(np.insert(a, np.searchsorted(a, b), b))
    n = np.empty(len(h), dtype=np.int64)
    n[order] = n_s
    return keys.select("line", record_key=pl.col("hash") + ":" + pl.Series(n).cast(pl.String))


def with_at(frame: pl.DataFrame, base: int) -> pl.DataFrame:
    """`at` from the stamp columns and the year of rollover 0 (an impossible day → the 28th, as before)."""
    year = pl.col("rollovers") + base
    month_days = pl.date(year, pl.col("month"), 1).dt.month_end().dt.day().cast(pl.Int32)
    day = pl.when(pl.col("day") <= month_days).then(pl.col("day")).otherwise(pl.min_horizontal(pl.col("day"), 28))
    return frame.with_columns(at=pl.datetime(year, pl.col("month"), day, pl.col("h"), pl.col("m"), pl.col("s"),
                                             time_zone="UTC")).drop(STAMP_COLS)


def scan_years(file: LogFile, chunk_bytes: int = CHUNK_BYTES) -> tuple[int, tuple | None]:
    """(rollovers, stamp of the last record): the first pass when no --year is given."""
    rollovers, last_month, last = 0, None, None
    for raw in _chunks(file, chunk_bytes):
        df = _lines_frame(raw, 0).filter(pl.col("level").is_not_null()).select(STAMP_COLS[1:])
        if not df.height:
            continue
        prev = pl.col("month").shift(1)
        if last_month is not None:
            prev = prev.fill_null(last_month)
        df = df.with_columns(rollovers=rollovers + (pl.col("month") < prev - 6).fill_null(False).cast(pl.Int32).cum_sum())
        row = df.row(-1, named=True)
        rollovers, last_month = int(row["rollovers"]), int(row["month"])
        last = (rollovers, row["month"], row["day"], row["h"], row["m"], row["s"])
    return rollovers, last


def base_year(file: LogFile, year: int | None, chunk_bytes: int = CHUNK_BYTES) -> int | None:
    """--year = year of the first record (rollover 0), else the file time = time of the last record."""
    if year is not None:
        return year
    rollovers, last = scan_years(file, chunk_bytes)
    if last is None:
        return None
    base = file.mtime.year - rollovers
    if (last[1], last[2]) > (file.mtime.month, file.mtime.day):
        base -= 1  # the file time is just past a new year; the last line is from the old one
    return base


def iter_vllm_batches(file: LogFile, year: int | None = None, stream: VllmStream | None = None,
                      chunk_bytes: int = CHUNK_BYTES) -> Iterator[VllmBatch]:
    """Row frames chunk by chunk (with `at`); totals and first/last record in `stream`."""
    st = stream if stream is not None else VllmStream(year)
    st.base = base_year(file, year, chunk_bytes)
    pending_tail = False
    for spec, stats, events, unparsed in _pipelined(_parse_chunks(file, st, chunk_bytes)):
        yield _finish(st, spec, stats, events, unparsed)
        pending_tail = True
    if pending_tail and st.cur is not None and st.cur.pending is not None:  # the file's last record
        p, st.cur.pending = st.cur.pending, None
        events = [(p["line"], p["head"], p["level"], p["proc"], *p["stamp"], kind, detail)
                  for kind, detail in _events(p["msg"], p["uvicorn"], p["cause"], p["oom"])]
        if events:
            yield _finish(st, spec.clear(), stats.clear(), events, [])


def _parse_chunks(file: LogFile, st: VllmStream, chunk_bytes: int):
    for raw in _chunks(file, chunk_bytes):
        yield _parse_chunk(raw, st)


def _pipelined(items: Iterator, depth: int = 1) -> Iterator:
    """Run a generator one step ahead in a thread. The producer (reading, the Polars expressions, which
    release the GIL) overlaps the consumer (record-key hashing, Python); at most `depth` + 2 chunks
    are alive at once. Exceptions in the producer are raised in the consumer."""
    import queue
    import threading

    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def put(entry) -> bool:
        while not stop.is_set():
            try:
                q.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False  # the consumer has gone

    def run() -> None:
        try:
            for item in items:
                if not put((item, None)):
                    return
            put((done, None))
        except BaseException as exc:  # noqa: BLE001 — handed to the consumer
            put((done, exc))

    worker = threading.Thread(target=run, name="vllm-log-parse", daemon=True)
    worker.start()
    try:
        while True:
            item, exc = q.get()
            if exc is not None:
                raise exc
            if item is done:
                return
            yield item
    finally:
        stop.set()
        worker.join()


def _finish(st: VllmStream, spec, stats, events: list, unparsed: list) -> VllmBatch:
    ev = pl.DataFrame(events, schema=_EVENT_SCHEMA, orient="row")
    un = pl.DataFrame(unparsed, schema=_UNPARSED_SCHEMA, orient="row")
    st.unparsed += un.height
    keys = _assign_keys(st, [spec, stats, ev, un])
    out = []
    for frame in (spec, stats, ev, un):
        frame = frame.join(keys, on="line", how="left", maintain_order="left").drop("head")
        if "rollovers" in frame.columns:
            frame = with_at(frame, st.base) if st.base is not None else frame.with_columns(
                at=pl.lit(None, pl.Datetime("us", "UTC"))).drop(STAMP_COLS)
        out.append(frame)
    return VllmBatch(*out)


def parse_vllm_log(file: LogFile, year: int | None = None, chunk_bytes: int = CHUNK_BYTES) -> ParsedLog:
    """The whole file as lists of dicts (small files; `iter_vllm_batches` streams)."""
    st = VllmStream(year)
    out = ParsedLog()
    for b in iter_vllm_batches(file, year, st, chunk_bytes):
        out.spec += b.spec.to_dicts()
        out.stats += b.stats.to_dicts()
        out.events += b.events.to_dicts()
        out.unparsed += [(r["line"], r["record_key"], r["text"]) for r in b.unparsed.iter_rows(named=True)]
    out.lines, out.records = st.lines, st.records
    out.first_at, out.last_at = st.at(st.first), st.at(st.last)
    return out
