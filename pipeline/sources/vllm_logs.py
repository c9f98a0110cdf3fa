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
(``CHUNK_BYTES``). Two paths give the same rows (tests/test_vllm_scanner.py):

- the C scanner (``pipeline/native/vllmscan.c``, built as an optional extension) reads every
  ASCII line: envelope, ANSI codes, process prefix, the spec / stats fields with the regexes'
  semantics, and the record hash; it runs on the next chunks in threads without the GIL while
  this chunk's rows are assembled from its arrays (``_native_chunk``);
- the Polars path (``_polars_chunk``) does the same with vectorised string expressions; it is
  the reference, and takes the chunks the scanner leaves (non-ASCII, ``\r`` line ends, numbers
  beyond Int64) and everything when the extension is not built.

Either way only the rare lines (events, version lines, uvicorn lines, tracebacks, unparsed
lines) go through Python (``_walk``). What crosses a chunk boundary is a small state: rollovers
and the last month, the vLLM version, the open record (its level, whether lines were folded into
it, its pending events) and the set of record-key hashes already seen (~10 bytes per keyed record,
for the occurrence number of the key). `iter_vllm_batches` yields one `VllmBatch` of row frames
per chunk; nothing else is kept.
"""

from __future__ import annotations

import calendar
import hashlib
import re
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import date, datetime, timezone

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.extensions import optional_extension
from pipeline.gcpause import gc_paused
from pipeline.sources.logfiles import LogFile

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
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

CHUNK_BYTES = 32 << 20  # whole lines per chunk; peak memory is a small multiple of this (32 MiB: ~12% faster than 16, +150 MiB)
# the first chunks are smaller (doubling up to CHUNK_BYTES): the walk waits for the first chunk's scan
FIRST_CHUNK_BYTES = 8 << 20
_WS = r"[\s\x1c-\x1f]"  # Python's str.isspace() also counts \x1c-\x1f, Rust's \s does not
_PY_SPACE = "".join(c for c in map(chr, range(0x3001)) if c.isspace())  # what str.strip() strips
_LEVEL = "DEBUG|INFO|WARNING|ERROR|CRITICAL"
_RX_ANSI = r"\x1b\[[0-9;]*[A-Za-z]"
_RX_PREFIX = rf"^(\([A-Za-z][\w-]* pid=\d+\){_WS}?)"
# MM-DD HH:MM:SS of a calendar time: a line with month 13 or hour 25 is not an envelope line (it is
# folded or unparsed), rather than a record that cannot be dated
_MONTH, _DAY, _HOUR, _MIN = r"0[1-9]|1[0-2]", r"0[1-9]|[12]\d|3[01]", r"[01]\d|2[0-3]", r"[0-5]\d"
_TIME = rf"(?:{_MONTH})-(?:{_DAY}) (?:{_HOUR}):(?:{_MIN}):(?:{_MIN})"
_RX_ENV = rf"^(.{{0,{MAX_PREFIX}}}?(?:{_LEVEL}) {_TIME}(?:[.,]\d+)? \[[^\]]*\] )"
_RX_ENV0 = rf"^((?:{_LEVEL}) {_TIME}(?:[.,]\d+)? \[[^\]]*\] )"
_RX_STAMP = rf"({_LEVEL}) ({_MONTH})-({_DAY}) ({_HOUR}):({_MIN}):({_MIN})"
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


@dataclass
class VllmBatch:
    """Rows of one chunk. Every row frame has line and record_key; spec, stats and events also level, proc
    and `at` (null when the file has no year to go by)."""

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
    keys: object = field(default_factory=lambda: _native.KeyState() if _native is not None else _NumpyKeys())

    def at(self, stamp) -> datetime | None:
        if stamp is None or self.base is None:
            return None
        r, mo, d, h, mi, s = stamp
        try:
            return datetime(self.base + r, mo, d, h, mi, s, tzinfo=timezone.utc)
        except ValueError:  # 02-29 in a year we guessed wrong; keep the row, on the 28th
            return datetime(self.base + r, mo, min(d, 28), h, mi, s, tzinfo=timezone.utc)


def _chunks(file: LogFile, chunk_bytes: int, spare: list[bytearray] | None = None) -> Iterator[memoryview]:
    """The file in blocks of whole lines (a block ends at a \n, or at the end of the file), each a view of
    a buffer it was read into; the part line after its last \n starts the next block (no copy of a
    block). Buffers the caller puts back into `spare` are reused (no fresh memory to fault in)."""
    import gzip

    with gzip.open(file.path, "rb") if file.gzipped else open(file.path, "rb") as fh:
        carry = b""
        size = min(chunk_bytes, FIRST_CHUNK_BYTES)
        while True:
            need = len(carry) + size
            size = min(2 * size, chunk_bytes)
            while spare and len(spare[-1]) < need:  # too small for this block: let it go
                spare.pop()
            # room for the usual part line too, so that the next block can reuse this buffer
            buffer = spare.pop() if spare else bytearray(need + max(len(carry), 1 << 16))
            view = memoryview(buffer)
            view[:len(carry)] = carry
            filled = len(carry)
            while filled < need:  # a read may return less than asked (gzip) before the end
                got = fh.readinto(view[filled:need])
                if not got:
                    break
                filled += got
            if filled < need:  # the end of the file
                if filled:
                    yield view[:filled]
                return
            end = buffer.rfind(b"\n", 0, filled) + 1
            if end == 0:  # one line longer than the block: read on
                carry = bytes(view[:filled])
                continue
            carry = bytes(view[end:filled])
            yield view[:end]


def _split(data: bytes | memoryview) -> pl.Series:
    data = bytes(data)
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


def _lines_frame(raw: pl.Series, first_line: int | pl.Series) -> pl.DataFrame:
    """Per line: body (ANSI stripped, process prefix removed), proc, and for envelope lines the level,
    stamp and message. Lines are numbered from `first_line`, or given as a Series."""
    raw = raw.alias("raw")
    line = (first_line.cast(pl.Int64).alias("line") if isinstance(first_line, pl.Series)
            else pl.int_range(first_line, first_line + raw.len(), dtype=pl.Int64, eager=True).alias("line"))
    df = pl.DataFrame({"raw": raw, "line": line})
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
    """`parse_spec_line`'s rules as column expressions over the extracted fields (`_spec_regex`, or the C
    scanner's columns); `ok` False where it returns None."""
    total = pl.col("pp_total")
    mal = pl.col("mal_printed")
    mal_ok = mal.is_not_null() & mal.is_not_nan()
    closer = (mal - total).abs() < (mal - (1 + total)).abs()
    old = pl.col("ver").is_not_null() & (pl.col("ver") < _V090)
    no_plus1 = pl.col("accepted_tps").is_null() & mal_ok & pl.when(pl.col("usable")).then(closer).otherwise(old)
    d = d.with_columns(mal_semantics=pl.when(no_plus1).then(pl.lit("no_plus1")).otherwise(pl.lit("plus1")))
    ratio = pl.when(pl.col("mal_semantics") == "plus1").then(mal - 1).otherwise(mal)
    ratio = pl.when(mal_ok & (pl.col("accepted") > 0) & (ratio > 0)).then(ratio)  # else no drafts
    return d.with_columns(
        drafts=(pl.col("accepted") / ratio).round(0, mode="half_to_even").cast(pl.Int64, strict=False).clip(lower_bound=1),
        ok=pl.col("accepted").is_not_null() & pl.col("drafted").is_not_null(),
    )


def _spec_regex(d: pl.DataFrame) -> pl.DataFrame:
    """The fields of `SpecDecoding metrics:` messages, by name (the per-position list set aside first)."""
    # msg.split("SpecDecoding metrics:", 1)[1].strip() (trailing whitespace cannot change a match)
    d = d.with_columns(st=pl.col("msg").str.splitn("SpecDecoding metrics:", 2).struct.field("field_1")
                       .str.strip_chars_start(_PY_SPACE))
    d = d.with_columns(pp_text=pl.col("st").str.extract(_RX_PP, 1))
    d = d.with_columns(rest=pl.lit(", ") + pl.when(pl.col("pp_text").is_null()).then(pl.col("st"))
                       .otherwise(pl.col("st").str.replace(_RX_PP, "")))
    r = pl.col("rest").str
    # integers beyond Int64 become null (the record is then unparsed), never an error
    d = d.with_columns(
        mal_printed=r.extract(rf", Mean acceptance length: ({NUMBER})", 1).cast(pl.Float64),
        accepted_tps=r.extract(rf", Accepted throughput: ({NUMBER}) tokens/s", 1).cast(pl.Float64),
        drafted_tps=r.extract(rf", Drafted throughput: ({NUMBER}) tokens/s", 1).cast(pl.Float64),
        accepted=r.extract(r", Accepted: (\d+) tokens", 1).cast(pl.Int64, strict=False),
        drafted=r.extract(r", Drafted: (\d+) tokens", 1).cast(pl.Int64, strict=False),
        acceptance_rate_printed=r.extract(rf", (?:Avg )?Draft acceptance rate: ({NUMBER})%", 1).cast(pl.Float64),
        per_position=pl.col("pp_text").str.split(", ").cast(pl.List(pl.Float64)),
        usable=pl.col("pp_text").is_not_null() & ~pl.col("pp_text").str.contains("nan", literal=True),
    ).drop("st", "pp_text", "rest")
    k = int(d["per_position"].list.len().max() or 0) if d.height else 0
    total = pl.lit(0.0)
    for i in range(k):  # left to right, as Python's sum() (and the C scanner): the 0.8.5 test can sit on a tie
        total = total + pl.col("per_position").list.get(i, null_on_oob=True).fill_null(0.0)
    return d.with_columns(pp_total=total)


def _stats_rows(d: pl.DataFrame) -> pl.DataFrame:
    """`parse_stats_line`'s rules over the extracted fields; `ok` False where it returns None."""
    # x / 100 with a true division (Polars turns division by a scalar into a multiplication by 0.01)
    d = d.with_columns(pl.Series(c, d[c].to_numpy() / 100.0, dtype=pl.Float64) for c in ("kv_cache_usage", "prefix_cache_hit_rate"))
    aggregated = pl.col("aggregated")
    new = pl.col("ver").is_not_null() & (pl.col("ver") >= _V0111)
    return d.with_columns(
        engine=pl.when(pl.col("engine_n").is_not_null()).then(pl.col("engine_n"))
        .when(aggregated).then(pl.lit("all")).otherwise(pl.lit(None, pl.String)),
        preemptions=pl.when(pl.col("pre").is_not_null()).then(pl.col("pre"))
        .when(aggregated | new).then(pl.lit(0, pl.Int64)).otherwise(pl.lit(None, pl.Int64)),
        ok=pl.col("matched") & pl.col("running").is_not_null(),
    )


def _stats_regex(d: pl.DataFrame) -> pl.DataFrame:
    """The fields of `Avg prompt throughput:` messages, by name (percentages as printed)."""
    d = d.with_columns(_groups=pl.col("msg").str.extract_groups(_RX_STATS_HEAD))
    f = pl.col("_groups").struct
    m = pl.col("msg").str
    return d.with_columns(
        matched=f.field("gen").is_not_null(), engine_n=f.field("engine"), aggregated=f.field("engines").is_not_null(),
        prompt_tps=f.field("prompt").cast(pl.Float64), generation_tps=f.field("gen").cast(pl.Float64),
        running=m.extract(r", Running: (\d+) reqs", 1).cast(pl.Int64, strict=False),
        waiting=m.extract(r", (?:Waiting|Pending): (\d+) reqs", 1).cast(pl.Int64, strict=False),
        pre=m.extract(r", Preemptions: (\d+)", 1).cast(pl.Int64, strict=False),
        kv_cache_usage=m.extract(rf", GPU KV cache usage: ({NUMBER})%", 1).cast(pl.Float64),
        prefix_cache_hit_rate=m.extract(rf", Prefix cache hit rate: ({NUMBER})%", 1).cast(pl.Float64),
    ).drop("_groups")


SPEC_COLS = ["accepted", "drafted", "drafts", "per_position", "mal_printed", "mal_semantics", "accepted_tps",
             "drafted_tps", "acceptance_rate_printed"]
STATS_COLS = ["engine", "prompt_tps", "generation_tps", "running", "waiting", "preemptions", "kv_cache_usage",
              "prefix_cache_hit_rate"]
_BASE = {"line": pl.Int64, "head": pl.String, "level": pl.String, "proc": pl.String, "rollovers": pl.Int32,
         "month": pl.Int32, "day": pl.Int32, "h": pl.Int32, "m": pl.Int32, "s": pl.Int32}
_EVENT_SCHEMA = _BASE | {"kind": pl.String, "detail": pl.String}
_UNPARSED_SCHEMA = {"line": pl.Int64, "head": pl.String, "text": pl.String}


@dataclass
class _Chunk:
    """One chunk as the record walk (`_walk`) needs it, from either path."""

    spec: pl.DataFrame  # line, head (None from the scanner), level, proc, at, the extracted spec fields
    stats: pl.DataFrame  # the same with the stats fields
    rare: pl.DataFrame  # lines that may start, continue or date a record the vectorised part does not handle
    env: int  # envelope lines (records)
    first: tuple | None  # stamp of the first envelope line
    last: tuple | None  # (line, level is ERROR/CRITICAL, stamp) of the last envelope line
    failed: set[int] = field(default_factory=set)  # record lines whose fields do not parse (C scanner)
    unparsed: list = field(default_factory=list)  # (line, head, text) of those
    records: tuple | None = None  # the C scanner's spec and stats rows in line order: (lines, hashes, is_spec)
    lines: int = 0  # lines in the chunk
    rows: _Rows | None = None  # `_record_rows` already applied (C scanner, `_prepare`)


@dataclass(frozen=True)
class _Placement:
    """What places a chunk after the ones before it: their lines, the year rollovers of their last
    envelope line and its month, the version in force and whether they hold a record (VllmStream.lines /
    rollovers / last_month / version / cur is not None, once they are walked)."""

    lines: int
    rollovers: int
    last_month: int | None
    version: int | None
    had_record: bool

    @classmethod
    def of(cls, st: VllmStream) -> _Placement:
        """The placement after what `st` has walked."""
        return cls(st.lines, st.rollovers, st.last_month, st.version, st.cur is not None)

    def shift(self, first: tuple | None) -> int:
        """The rollovers before a chunk whose first envelope line has the stamp `first`: one more when its
        month falls back from the last one seen."""
        fell_back = first is not None and self.last_month is not None and first[1] < self.last_month - 6
        return self.rollovers + fell_back

    def place(self, scanned: tuple, base_year: int | None) -> _Chunk:
        """A scanned chunk as it comes after these lines: numbered, dated, its rows made."""
        (_, _, first_idx, first_stamp, *_), _ = scanned
        chunk = _native_chunk(scanned, base_year, self.lines, self.shift((0, *first_stamp) if first_idx >= 0 else None))
        chunk.rows = _record_rows(chunk, self.version, self.had_record)
        return chunk

    def after(self, chunk: _Chunk) -> _Placement:
        """The placement after `chunk` (placed after these lines, its rows made)."""
        lines, version = self.lines + chunk.lines, chunk.rows.version
        if chunk.last is None:  # no envelope line: no record either (a uvicorn one needs one before)
            return _Placement(lines, self.rollovers, self.last_month, version, self.had_record)
        _, _, (rollovers, month, *_) = chunk.last
        return _Placement(lines, int(rollovers), int(month), version, True)


def _parse_chunk(block: bytes, prepared: _Chunk | None, st: VllmStream) -> VllmBatch:
    """One chunk → its rows (with record keys and `at`); `prepared` is what the scanning thread made of it
    (`_prepare`), None for the Polars path. The cyclic garbage collector is paused meanwhile: the walk
    allocates many short-lived acyclic objects, and its collections cost as much as the rest."""
    with gc_paused():
        chunk = prepared if prepared is not None else _polars_chunk(block, st)
        st.lines += chunk.lines
        return _finish(st, *_walk(chunk, st), chunk.records)


def _scan(block: memoryview, summary_only: bool = False) -> tuple | None:
    """The C scanner's reading of a chunk, or None: no scanner, or a chunk it leaves to Polars (not
    ASCII, \r line ends, or a line it cannot read exactly). `summary_only`: just the chunk summary
    (line and envelope counts, first / last stamp, rollovers), for the year pass."""
    return _native.scan(block, summary_only) if _native is not None else None


def _prepare(block: bytes, base_year: int | None, before: Future, after: Future) -> _Chunk | None:
    """In a scanning thread: the chunk as `_native_chunk` makes it, or None for the Polars path. Once
    scanned, it waits for the placement after the chunk before (`before`: set by that chunk's thread as
    soon as it is placed, or by the walk for a chunk of the Polars path), so the chunk is numbered, dated
    and given its rows here, not in the main thread; its own placement goes to `after`."""
    try:
        scanned = _scan(block)
        if scanned is None:
            return None  # `after` is set once the walk has read the chunk (iter_vllm_batches)
        prior = before.result()
        chunk = prior.place(scanned, base_year)
        after.set_result(prior.after(chunk))
        return chunk
    except BaseException as exc:  # the chunks after this one stop too
        after.set_exception(exc)
        raise


def _polars_chunk(block: bytes, st: VllmStream) -> _Chunk:
    """Every line through the Polars expressions (the reference path; the C scanner gives the same)."""
    df = _lines_frame(_split(block), st.lines + 1)
    is_env = pl.col("level").is_not_null()
    # year rollovers and the month of the last envelope line, carried over chunks
    prev = pl.col("month").shift(1).forward_fill()
    if st.last_month is not None:
        prev = prev.fill_null(st.last_month)
    df = df.with_columns(rollovers=(st.rollovers + (pl.col("month") < prev - 6).fill_null(False).cast(pl.Int32).cum_sum()))
    df = df.with_columns(rollovers=pl.when(is_env).then(pl.col("rollovers")).otherwise(None))
    env_lines = df.filter(is_env).select("line", "level", *STAMP_COLS)
    # rare lines: everything that is not an envelope line, and envelope lines that may hold an event or a version
    rare_mask = (~is_env & ~pl.col("body").str.contains(_RX_BLANK)) | (
        is_env & (pl.col("msg").str.contains_any(EVENT_WORDS) | pl.col("msg").str.contains("version", literal=True)))
    n_env_before = is_env.cast(pl.Int64).cum_sum() - is_env.cast(pl.Int64)
    # the stamp of the latest envelope record at or before each line (uvicorn records copy it)
    ffill = [pl.when(is_env).then(pl.col(c)).otherwise(None).forward_fill().alias(f"p_{c}") for c in STAMP_COLS]
    ffill += [pl.when(is_env).then(pl.col("line")).otherwise(None).forward_fill().alias("p_line"),
              pl.when(is_env).then(pl.col("level").is_in(["ERROR", "CRITICAL"])).otherwise(None).forward_fill().alias("p_err")]
    rare = _rare_text(df.with_columns(*ffill, n_env_before=n_env_before).filter(rare_mask).select(_RARE_COLS))
    spec_mask = is_env & pl.col("msg").str.contains("SpecDecoding metrics:", literal=True)
    stats_mask = is_env & ~pl.col("msg").str.contains("SpecDecoding metrics:", literal=True) & pl.col("msg").str.contains(
        "Avg prompt throughput:", literal=True)
    spec = with_at(_spec_regex(df.filter(spec_mask).with_columns(head=pl.col("body"))), st.base)
    stats = with_at(_stats_regex(df.filter(stats_mask).with_columns(head=pl.col("body"))), st.base)
    first = last = None
    if env_lines.height:
        first = env_lines.select(STAMP_COLS).row(0)
        row = env_lines.row(-1)
        last = (row[0], row[1] in ("ERROR", "CRITICAL"), tuple(row[2:]))
    return _Chunk(spec, stats, rare, env_lines.height, first, last, lines=df.height)


_RARE_COLS = ["line", "body", "proc", "level", "msg", *STAMP_COLS, "p_line", "p_err", *[f"p_{c}" for c in STAMP_COLS],
              "n_env_before"]


def _rare_text(rare: pl.DataFrame) -> pl.DataFrame:
    """What the walk reads of a rare line's text, ahead of the walk (in the scanning threads when the C
    scanner runs): the uvicorn message, whether it continues a traceback, and a version code in the
    envelope message or in the uvicorn message (which counts only for a uvicorn record, see `_walk`)."""
    def version(text: pl.Expr) -> pl.Expr:
        g = text.str.extract_groups(_RX_VERSION).struct
        return g.field("1").cast(pl.Int64) * 10**12 + g.field("2").cast(pl.Int64) * 10**6 + g.field("3").cast(pl.Int64)

    rare = rare.with_columns(
        uv_msg=pl.when(pl.col("level").is_null()).then(pl.col("body").str.extract(_RX_UVICORN, 1)),
        trace=pl.when(pl.col("level").is_null()).then(pl.col("body").str.contains(_RX_TRACE)),
    )
    return rare.with_columns(ver_msg=version(pl.col("msg")), ver_uv=version(pl.col("uv_msg")))


@dataclass
class _Rows:
    """A chunk's spec and stats rows with their version and rules applied (`_record_rows`)."""

    spec: pl.DataFrame  # the rows that parse: line, head, level, proc, at, SPEC_COLS
    stats: pl.DataFrame  # the same with STATS_COLS
    failed: set[int]  # record lines that do not parse (no events either)
    unparsed: list  # (line, head, text) of those
    version: int | None  # the version in force after the chunk


def _record_rows(chunk: _Chunk, version: int | None, had_record: bool) -> _Rows:
    """The spec / stats rows of a chunk with their version and rules, given the version in force before
    it and whether a record came before it (a uvicorn line is a record only after one)."""
    rare = chunk.rare.lazy().with_columns(
        uv_rec=pl.col("uv_msg").is_not_null() & ((pl.col("n_env_before") > 0) | had_record))
    # the vLLM version of records (envelope and uvicorn) holds until the next version line
    versions = rare.select("line", ver=pl.when(pl.col("level").is_not_null()).then(pl.col("ver_msg"))
                           .when(pl.col("uv_rec")).then(pl.col("ver_uv"))).drop_nulls("ver").collect()
    spec = _spec_rows(_with_version(chunk.spec, versions, version))
    stats = _stats_rows(_with_version(chunk.stats, versions, version))
    bad = pl.concat([spec.filter(~pl.col("ok")).select("line", "head"), stats.filter(~pl.col("ok")).select("line", "head")])
    keep = ["line", "head", "level", "proc", "at"]
    return _Rows(spec.filter(pl.col("ok")).select(*keep, *SPEC_COLS), stats.filter(pl.col("ok")).select(*keep, *STATS_COLS),
                 chunk.failed | set(bad["line"].to_list()),
                 chunk.unparsed + [(line, head, head[:500]) for line, head in bad.iter_rows()],
                 int(versions["ver"][-1]) if versions.height else version)


def _walk(chunk: _Chunk, st: VllmStream) -> tuple[pl.DataFrame, pl.DataFrame, list, list]:
    """The record walk over the rare lines (uvicorn records, traceback folding, events, unparsed lines)
    and the state carried to the next chunk; the spec / stats rows get their version and rules (in
    the scanning thread already when the chunks before it were known there, `_prepare`)."""
    rows = chunk.rows if chunk.rows is not None else _record_rows(chunk, st.version, st.cur is not None)
    st.version = rows.version
    spec, stats, failed, unparsed = rows.spec, rows.stats, rows.failed, rows.unparsed

    events: list[tuple] = []

    def flush(cur: _Open | None) -> None:
        if cur is not None and cur.pending is not None:
            p = cur.pending
            for kind, detail in _events(p["msg"], p["uvicorn"], p["cause"], p["oom"]):
                events.append((p["line"], p["head"], p["level"], p["proc"], *p["stamp"], kind, detail))
            cur.pending = None

    cur = st.cur
    st.records += chunk.env
    cols = ["line", "body", "proc", "level", "msg", *STAMP_COLS, "p_line", "p_err", *[f"p_{c}" for c in STAMP_COLS],
            "uv_msg", "trace"]
    for (line, body, proc, level, msg, r, mo, d, h, mi, s, p_line, p_err, pr, pmo, pd, ph, pmi, ps,
         uv_msg, trace) in zip(*(chunk.rare[c].to_list() for c in cols)):  # column lists: far cheaper than iter_rows
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
    if chunk.last is not None:  # the chunk's last record may be a plain one after the last rare line
        line, err, stamp = chunk.last
        if cur is None or cur.line < line:
            flush(cur)
            cur = _Open(line, err, stamp)
        if st.first is None:
            st.first = chunk.first
        st.last = stamp
        st.rollovers, st.last_month = int(stamp[0]), int(stamp[1])
    st.cur = cur
    return spec, stats, events, sorted(unparsed)


def _with_version(rows: pl.DataFrame, versions: pl.DataFrame, prior: int | None) -> pl.DataFrame:
    """`ver`: the version of the latest version line at or before each row (else the one carried in)."""
    if not versions.height:
        return rows.with_columns(ver=pl.lit(prior, pl.Int64))
    rows = rows.join_asof(versions, on="line", strategy="backward")
    return rows.with_columns(pl.col("ver").fill_null(prior)) if prior is not None else rows


# -- the C scanner (pipeline/native/vllmscan.c): the same chunk from compact arrays ---------------------

_native = optional_extension("_vllmscan", "GONKA_EVIDENCE_NATIVE_LOGS")  # None: the Polars path does everything
if _native is not None:
    _native.configure([*EVENT_WORDS, "version"])  # what makes an envelope line rare, as in `_polars_chunk`

_F_PP, _F_PP_NAN, _F_AGGREGATED = 1, 2, 4  # vllmscan.c `flags`
_K_RARE, _K_FAILED = 1, 2  # vllmscan.c rare-row kinds


def _native_chunk(scanned: tuple, base_year: int | None, offset: int, shift: int) -> _Chunk:
    """`_polars_chunk` from the scanner's arrays, in a scanning thread: record rows (spec / stats lines
    read in full, with their hash), rare rows (with what `_lines_frame` gives for them), and the chunk
    summary, with lines numbered from offset + 1 and `shift` year rollovers before its first envelope
    line (`_Placement.place`)."""
    (lines, n_env, first_idx, first_stamp, last_idx, last_level, last_stamp, last_roll), a = scanned
    base = offset + 1

    def arr(name: str, dtype, width: int = 0) -> np.ndarray:
        v = np.frombuffer(a[name], dtype)
        return v.reshape(-1, width) if width else v

    def masked(values: np.ndarray, valid: np.ndarray) -> pl.Series:
        bits = pa.py_buffer(np.packbits(valid, bitorder="little"))
        data = np.packbits(values, bitorder="little") if values.dtype == bool else np.ascontiguousarray(values)
        return pl.Series(pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [bits, pa.py_buffer(data)]))

    def stamp_columns(stamps: np.ndarray, valid: np.ndarray, prefix: str = "") -> dict:
        return {prefix + c: masked(stamps[:, i].astype(np.int32), valid) for i, c in enumerate(STAMP_COLS[1:])}

    def records(kind: str, fields: dict) -> pl.DataFrame:
        """The rows of one kind of record."""
        def col(name: str, dtype, width: int = 0) -> np.ndarray:
            return arr(f"{kind}_{name}", dtype, width)

        valid, ints, floats = col("valid", np.uint8), col("ints", np.int64, 3), col("floats", np.float64, 4)
        values = {"ints": ints, "floats": floats}
        return pl.DataFrame({
            "line": col("idx", np.int32).astype(np.int64) + base, "head": pl.repeat(None, len(valid), dtype=pl.String, eager=True),
            "level": _levels(a[f"{kind}_level"]), "proc": _strings(a[f"{kind}_procs"], col("proc_len", np.int32)),
            "at": _at_series(col("roll", np.int32) + shift, col("stamp", np.uint8, 5), base_year),
            **{name: masked(values[array][:, slot], (valid & bit) != 0) for name, (array, slot, bit) in fields.items()},
        })

    spec = records("spec", {
        "accepted": ("ints", 0, 1), "drafted": ("ints", 1, 2), "mal_printed": ("floats", 0, 8),
        "accepted_tps": ("floats", 1, 16), "drafted_tps": ("floats", 2, 32), "acceptance_rate_printed": ("floats", 3, 64)})
    flags = arr("spec_flags", np.uint8)
    has_pp = (flags & _F_PP) != 0
    list_offsets = np.zeros(len(flags) + 1, np.int64)
    np.cumsum(arr("spec_pp_count", np.int32), out=list_offsets[1:])  # values were pushed in row order
    # Arrow arrays are built from buffers: pa.array() of a read-only numpy array (np.frombuffer) takes a
    # slow per-element path, and a list array with a validity bitmap converts ~10× slower than nulling it
    # in Polars; large (int64) offsets convert without a copy
    values = pa.Array.from_buffers(pa.float64(), len(a["spec_pp_values"]) // 8, [None, pa.py_buffer(a["spec_pp_values"])])
    spec = spec.with_columns(
        per_position=pl.Series(pa.Array.from_buffers(pa.large_list(pa.float64()), len(flags), [None, pa.py_buffer(list_offsets)],
                                                      children=[values])),
        has_pp=has_pp, usable=has_pp & ((flags & _F_PP_NAN) == 0), pp_total=arr("spec_pp_total", np.float64),
    ).with_columns(per_position=pl.when(pl.col("has_pp")).then(pl.col("per_position"))).drop("has_pp")
    stats = records("stats", {
        "prompt_tps": ("floats", 0, 8), "generation_tps": ("floats", 1, 16), "running": ("ints", 0, 1),
        "waiting": ("ints", 1, 2), "pre": ("ints", 2, 4), "kv_cache_usage": ("floats", 2, 32),
        "prefix_cache_hit_rate": ("floats", 3, 64)})
    flags = arr("stats_flags", np.uint8)
    stats = stats.with_columns(matched=pl.lit(True), aggregated=(flags & _F_AGGREGATED) != 0,
                               engine_n=_strings(a["stats_engines"], arr("stats_eng_len", np.int32)))
    # the records in line order, for their keys
    is_spec, hashes = arr("cls", np.uint8) == 2, arr("digest", np.uint8, 10)
    record_lines = arr("rec_idx", np.int32).astype(np.int64) + base

    kind = arr("x_kind", np.uint8)
    env, p_idx = arr("x_level", np.uint8) > 0, arr("x_p_idx", np.int32)
    has_p = p_idx >= 0
    p_roll = arr("x_p_roll", np.int32) + shift
    frame = pl.DataFrame({
        "line": arr("x_idx", np.int32).astype(np.int64) + base,
        "body": _strings(a["x_bodies"], arr("x_body_len", np.int32), nullable=False),
        "proc": _strings(a["x_procs"], arr("x_proc_len", np.int32)), "level": _levels(a["x_level"]),
        "_msg_off": arr("x_msg_off", np.int32), "rollovers": masked(p_roll, env),
        **stamp_columns(arr("x_stamp", np.uint8, 5), env),
        "p_line": masked(p_idx.astype(np.int64) + base, has_p), "p_err": masked(arr("x_p_level", np.uint8) >= 4, has_p),
        "p_rollovers": masked(p_roll, has_p), **stamp_columns(arr("x_p_stamp", np.uint8, 5), has_p, "p_"),
        "n_env_before": arr("x_n_env", np.int32).astype(np.int64),
    }).with_columns(msg=pl.when(pl.col("level").is_not_null()).then(pl.col("body").str.slice(pl.col("_msg_off"))))
    rare = _rare_text(frame.filter(pl.Series((kind & _K_RARE) != 0)).select(_RARE_COLS))
    failed = frame.filter(pl.Series((kind & _K_FAILED) != 0)).select("line", "body")
    first = (shift, *first_stamp) if first_idx >= 0 else None
    last = (last_idx + base, last_level >= 4, (last_roll + shift, *last_stamp)) if last_idx >= 0 else None
    return _Chunk(spec, stats, rare, n_env, first, last, failed=set(failed["line"].to_list()),
                  unparsed=[(line, body, body[:500]) for line, body in failed.iter_rows()],
                  records=(record_lines, hashes, is_spec), lines=lines)


_LEVEL_DICTIONARY = [None, "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]  # vllmscan.c level codes


_LEVEL_NAMES = pl.Series(_LEVEL_DICTIONARY, dtype=pl.String)


def _levels(codes: bytes) -> pl.Series:
    return _LEVEL_NAMES.gather(np.frombuffer(codes, np.uint8))  # (pyarrow's take is ~20× slower under load)


def _strings(data: bytes, lengths: np.ndarray, nullable: bool = True) -> pl.Series:
    """Strings laid end to end in `data`; when nullable, a length of 0 is null (no process prefix, no engine)."""
    offsets = np.zeros(len(lengths) + 1, np.int64)  # large (int64) offsets: Polars takes them without a copy
    np.cumsum(lengths, out=offsets[1:])
    nulls = pa.py_buffer(np.packbits(lengths > 0, bitorder="little")) if nullable else None
    return pl.Series(pa.LargeStringArray.from_buffers(len(lengths), pa.py_buffer(offsets), pa.py_buffer(data), nulls))


def _record_keys(st: VllmStream, records: tuple, others: list[pl.DataFrame]) -> tuple[pl.Series, list[pl.Series]]:
    """record_key = hex(head hash):n, n = earlier rows of the file with the same hash.

    `records` = (lines, hashes (n, 10) uint8) of the spec and stats rows in line order; `others` = the
    event and unparsed frames (hashed here from `head`). Records take their keys first, then the other
    rows in line order: rows with the same hash have the same head, so they are all records or all
    not, and only their own order matters: the keys are those of one pass in line order. An event of
    a record's line shares the record's key. Returns (record keys, keys of each frame of `others`)."""
    lines, hashes = records
    record_keys = _key_series(st.keys.assign(np.ascontiguousarray(hashes).tobytes()))
    other_lines = np.concatenate([f["line"].to_numpy() for f in others])
    pos = np.searchsorted(lines, other_lines).clip(max=max(len(lines) - 1, 0))
    shared = (lines[pos] == other_lines) if len(lines) else np.zeros(len(other_lines), bool)
    keys = pl.Series("record_key", [None] * len(other_lines), dtype=pl.String)
    if shared.any():
        keys = keys.scatter(np.flatnonzero(shared), record_keys.gather(pos[shared]))
    own = np.flatnonzero(~shared)
    if len(own):  # in line order; the rows of one line (a fatal record and its oom event) share a key
        own = own[np.argsort(other_lines[own], kind="stable")]
        own_lines = other_lines[own]
        first = np.ones(len(own), bool)
        first[1:] = own_lines[1:] != own_lines[:-1]
        heads = pl.concat([f["head"] for f in others]).gather(own[first])
        assigned = _key_series(st.keys.assign(_digests(heads).tobytes()))
        keys = keys.scatter(own, assigned.gather(np.cumsum(first) - 1))
    bounds = np.cumsum([0, *(f.height for f in others)])
    return record_keys, [keys.slice(int(lo), int(hi - lo)) for lo, hi in zip(bounds[:-1], bounds[1:])]


def _key_series(assigned: tuple[bytes, bytes]) -> pl.Series:
    offsets, text = assigned
    return pl.Series("record_key", pa.LargeStringArray.from_buffers((len(offsets) // 8) - 1, pa.py_buffer(offsets), pa.py_buffer(text)))


def _digests(heads: pl.Series) -> np.ndarray:
    """The record hash of each head, (n, 10) uint8: BLAKE2b with a 10-byte digest (as the C scanner)."""
    b2 = hashlib.blake2b
    data = b"".join(b2(h, digest_size=10).digest() for h in heads.cast(pl.Binary).to_list())
    return np.frombuffer(data, np.uint8).reshape(-1, 10)


class _NumpyKeys:
    """`_vllmscan.KeyState` without the C extension: the same keys. The hashes seen so far are kept by their
    first 64 bits in sorted runs (8 bytes per record; a 64-bit collision between two different heads in
    one file, p ≈ n²/2⁶⁵, would give the second one n = 1, in both implementations)."""

    _RUN_CAP = 1 << 21  # 16 MiB per run of seen hashes

    def __init__(self) -> None:
        self.runs: list[np.ndarray] = []
        self.multi: dict[int, int] = {}  # hash64 -> occurrences so far, only for hashes seen twice or more

    def reserve(self, n: int) -> None:  # the runs grow as they go
        pass

    def assign(self, digests: bytes) -> tuple[bytes, bytes]:
        d = np.frombuffer(digests, np.uint8).reshape(-1, 10)
        h = np.ascontiguousarray(d[:, :8]).view(">u8").ravel().astype(np.uint64)
        order = np.argsort(h, kind="stable")  # stable: equal hashes stay in line order
        hs = h[order]
        idx = np.arange(len(hs))
        starts = np.ones(len(hs), dtype=bool)
        starts[1:] = hs[1:] != hs[:-1]
        rank_s = idx - np.maximum.accumulate(np.where(starts, idx, 0))  # occurrence within this chunk
        prior_s = np.zeros(len(hs), dtype=np.int64)
        found_s = np.zeros(len(hs), dtype=bool)
        for run in self.runs:
            found_s |= run[np.searchsorted(run, hs).clip(max=len(run) - 1)] == hs
        for i in np.flatnonzero(found_s):  # a head seen in an earlier chunk (rare)
            prior_s[i] = self.multi.get(int(hs[i]), 1)
        n_s = prior_s + rank_s
        ends = np.ones(len(hs), dtype=bool)
        ends[:-1] = starts[1:]
        for i in np.flatnonzero(ends & (n_s >= 1)):  # hashes now seen twice or more
            self.multi[int(hs[i])] = int(n_s[i]) + 1
        new = hs[starts & ~found_s]  # unique and sorted: a new run
        runs = self.runs
        if len(new):
            runs.append(new)
        # merge runs of similar size (binary-counter style), never beyond _RUN_CAP entries: few runs to search,
        # and no transient copy of the whole set (which would show in the peak RSS of a large file)
        while len(runs) >= 2 and len(runs[-1]) >= len(runs[-2]) // 2 and len(runs[-1]) + len(runs[-2]) <= self._RUN_CAP:
            b, a = runs.pop(), runs.pop()
            runs.append(np.insert(a, np.searchsorted(a, b), b))
        n = np.empty(len(h), dtype=np.int64)
        n[order] = n_s
        text = [f"{x.hex()}:{k}".encode() for x, k in zip(map(bytes, d), n.tolist())]
        offsets = np.zeros(len(text) + 1, np.int64)
        np.cumsum([len(t) for t in text], out=offsets[1:])
        return offsets.tobytes(), b"".join(text)


def _epoch_micros(rollovers: np.ndarray, stamps: np.ndarray, base: int) -> np.ndarray:
    """Microseconds since 1970 of (year of rollover 0 + rollovers, MM-DD HH:MM:SS) rows, UTC; a day past
    the month's end (02-30, or 02-29 in a year guessed wrong) becomes the 28th."""
    rollovers = rollovers.astype(np.int64)
    low = int(rollovers.min()) if len(rollovers) else 0
    years = range(base + low, base + (int(rollovers.max()) if len(rollovers) else 0) + 1)
    first = np.array([[(date(y, m, 1) - _EPOCH).days for m in range(1, 13)] for y in years], np.int64)
    length = np.array([[calendar.monthrange(y, m)[1] for m in range(1, 13)] for y in years], np.int64)
    y, mo = rollovers - low, stamps[:, 0].astype(np.int64) - 1
    day = stamps[:, 1].astype(np.int64)
    day = np.where(day <= length[y, mo], day, 28)
    seconds = stamps[:, 2].astype(np.int64) * 3600 + stamps[:, 3].astype(np.int64) * 60 + stamps[:, 4]
    return ((first[y, mo] + day - 1) * 86400 + seconds) * 1_000_000


_EPOCH = date(1970, 1, 1)
_AT = pl.Datetime("us", "UTC")


def _at_series(rollovers: np.ndarray, stamps: np.ndarray, base: int | None) -> pl.Series:
    if base is None:
        return pl.repeat(None, len(rollovers), dtype=_AT, eager=True).alias("at")
    return pl.Series("at", _epoch_micros(rollovers, stamps, base)).cast(_AT)


def with_at(frame: pl.DataFrame, base: int | None) -> pl.DataFrame:
    """`at` from the stamp columns (see `_epoch_micros`), which it replaces; null where they are."""
    missing = frame["month"].is_null()
    stamps = np.column_stack([frame[c].fill_null(1).to_numpy() for c in STAMP_COLS[1:]]) if frame.height else \
        np.zeros((0, 5), np.int64)
    at = _at_series(frame["rollovers"].fill_null(0).to_numpy(), stamps, base)
    if missing.any():
        at = at.set(missing, None)
    return frame.with_columns(at).drop(STAMP_COLS)


def scan_years(file: LogFile, chunk_bytes: int = CHUNK_BYTES) -> tuple[int, tuple | None]:
    """(rollovers, stamp of the last record): the first pass when no --year is given."""
    rollovers, last_month, last = 0, None, None
    for block in _chunks(file, chunk_bytes):
        scanned = _scan(block, summary_only=True)
        if scanned is not None:  # the scanner's summary: rollovers within the chunk, first / last stamp
            (_, _, first_idx, first_stamp, last_idx, _, last_stamp, roll), _ = scanned
            if last_idx < 0:
                continue
            rollovers += roll + (last_month is not None and first_stamp[0] < last_month - 6)
            last_month = last_stamp[0]
            last = (rollovers, *last_stamp)
            continue
        df = _lines_frame(_split(block), 0).filter(pl.col("level").is_not_null()).select(STAMP_COLS[1:])
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
    if not file.gzipped:  # room for the record hashes at once (a record is ~256 bytes of log)
        st.keys.reserve(file.path.stat().st_size // 256)
    parsed = False
    for block, prepared, placement in _scanned(file, chunk_bytes, st.base, _Placement.of(st)):
        batch = _parse_chunk(block, prepared, st)
        if placement is not None and prepared is None:  # a Polars-path chunk: placed once walked
            placement.set_result(_Placement.of(st))
        parsed = True
        yield batch
    if parsed and st.cur is not None and st.cur.pending is not None:  # the file's last record
        p, st.cur.pending = st.cur.pending, None
        events = [(p["line"], p["head"], p["level"], p["proc"], *p["stamp"], kind, detail)
                  for kind, detail in _events(p["msg"], p["uvicorn"], p["cause"], p["oom"])]
        if events:
            yield _finish(st, None, None, events, [])


SCAN_AHEAD = 2  # chunks the C scanner reads ahead, each in its own thread (it runs without the GIL)


def _scanned(file: LogFile, chunk_bytes: int, base_year: int | None,
             start: _Placement) -> Iterator[tuple[memoryview, _Chunk | None, Future | None]]:
    """(block, `_prepare(block)`, the placement after it) in file order, the first block placed after
    `start`. The next chunks are scanned, placed and assembled in threads while the caller works on
    this one, so the C scanner, the assembly (much of it in Polars and Arrow, without the GIL) and the
    walk use both cores; at most SCAN_AHEAD + 1 chunks are alive at once. For a chunk of the Polars
    path (None) the caller sets the placement after it once walked; the chunks after it wait for it."""
    if _native is None:
        yield from ((block, None, None) for block in _chunks(file, chunk_bytes))
        return
    from collections import deque
    from concurrent.futures import CancelledError, InvalidStateError, ThreadPoolExecutor

    spare: list[bytearray] = []  # the buffers of chunks the caller is done with
    placement: Future = Future()
    placement.set_result(start)
    pending: deque = deque()
    with ThreadPoolExecutor(SCAN_AHEAD, thread_name_prefix="vllm-scan") as pool:
        try:
            for block in _chunks(file, chunk_bytes, spare):
                before, placement = placement, Future()
                pending.append((block, pool.submit(_prepare, block, base_year, before, placement), placement))
                if len(pending) > SCAN_AHEAD:
                    block, scan, after = pending[0]
                    yield block, scan.result(), after
                    pending.popleft()
                    spare.append(block.obj)  # the caller has parsed it: nothing refers to its bytes any more
            while pending:
                block, scan, after = pending[0]
                yield block, scan.result(), after
                pending.popleft()
        finally:  # the caller stopped early: chunks waiting for a placement the walk will not set stop too
            for _, _, after in pending:
                try:
                    after.set_exception(CancelledError())
                except InvalidStateError:  # set already
                    pass


def _finish(st: VllmStream, spec: pl.DataFrame | None, stats: pl.DataFrame | None, events: list, unparsed: list,
            records: tuple | None = None) -> VllmBatch:
    """The chunk's frames with their record keys and `at`. `records` = (lines, hashes, is_spec) of the spec
    and stats rows in line order, as the C scanner gives them; else they are hashed here from `head`."""
    ev = pl.DataFrame(events, schema=_EVENT_SCHEMA, orient="row")
    un = pl.DataFrame(unparsed, schema=_UNPARSED_SCHEMA, orient="row")
    st.unparsed += un.height
    none = spec is None
    spec = spec if spec is not None else pl.DataFrame(schema={"line": pl.Int64, "head": pl.String})
    stats = stats if stats is not None else pl.DataFrame(schema={"line": pl.Int64, "head": pl.String})
    if records is None:  # merge the spec and stats rows into line order
        lines = np.concatenate([spec["line"].to_numpy(), stats["line"].to_numpy()])
        order = np.argsort(lines, kind="stable")
        heads = pl.concat([spec["head"], stats["head"]]).gather(order)
        records = (lines[order], _digests(heads), order < spec.height)
    lines, hashes, is_spec = records
    record_keys, (ev_keys, un_keys) = _record_keys(st, (lines, hashes), [ev, un])
    is_spec = pl.Series(is_spec)
    out = []
    for frame, key in ((spec, record_keys.filter(is_spec)), (stats, record_keys.filter(~is_spec)), (ev, ev_keys), (un, un_keys)):
        frame = frame.drop("head").with_columns(key)
        if "rollovers" in frame.columns:  # events and unparsed lines; records have `at` already
            frame = with_at(frame, st.base)
        out.append(frame)
    if none:  # the file's last record only: events
        out[:2] = pl.DataFrame(), pl.DataFrame()
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
