"""vLLM server logs: spec-decode windows, engine stats and engine events.

Every line is read once. ANSI colour is stripped and the ``(EngineCore_DP0 pid=N)``
process prefix set aside before matching; lines that do not start a record
(tracebacks) are folded into the record before them, so a crash counts once.
A line that neither starts a known record nor continues one is *unparsed*: it is
reported and quarantined, never fatal (a newer vLLM may print a format we do not
know yet). Fields are matched by name, not position, and the per-position list is
pulled out before anything splits on commas.

Timestamps have no year and no zone: each record carries the number of December →
January rollovers seen before it in its file; ``--year`` is the year of the file's
first record, otherwise the file's modification time is taken as the time of its
last record (then a first, cheaper pass counts the rollovers). Times are local
wall-clock times of the log's `LogTimezone` (UTC unless told), stored as UTC.

The grammar is written once, as vectorised Polars expressions over a chunk of whole lines
(``CHUNK_BYTES``, see bench/BENCHMARKS.md, log parsing); only the rare lines (events,
version lines, uvicorn lines, tracebacks, unparsed lines) go through Python (``_walk``).
What crosses a chunk boundary is a small state: line count, rollovers and the last month,
the vLLM version, and the open record (its level, whether lines were folded into it, its
pending events). Rows carry their line number; a record is keyed by (file, line), so the
parser holds nothing that grows with the file. `iter_vllm_batches` yields one `VllmBatch`
of row frames per chunk.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime

import numpy as np
import polars as pl

from pipeline.core.gcpause import gc_paused
from pipeline.core.limits import limit
from pipeline.sources.logs import catalogue
from pipeline.sources.logs.catalogue import DEATH, ENGINE_DEAD, FATAL, OOM, WORKER_DIED
from pipeline.sources.logs.files import LogFile, LogTimezone
from pipeline.sources.logs.vllm_config import LOGO_VERSION, RX_LAUNCH, START_WORDS, start_facts

_RX_ANSI = r"\x1b\[[0-9;]*[A-Za-z]"
ANSI = re.compile(_RX_ANSI)
MAX_PREFIX = 512  # free text before a uvicorn line's level (a collector's prefix); a vLLM envelope may follow any text

NUMBER = r"(?:nan|-?\d+(?:\.\d+)?)"
# the lines that name the vLLM version: engine start (V0, V1) and API server start
_RX_VERSION_INTRO = rf"(?:Initializing an? (?:V1 )?LLM engine \(v|{RX_LAUNCH})"
VERSION = re.compile(rf"{_RX_VERSION_INTRO}(?P<v>\d+\.\d+\.\d+[\w.+-]*)")
LAUNCH = re.compile(rf"^{RX_LAUNCH}(?P<v>\d+\.\d+\.\d+[\w.+-]*)")


@dataclass
class ParsedLog:
    """Rows of one file as lists of dicts (small files, tests and the benchmark's expected counts);
    large files go through `iter_vllm_batches`, which never holds more than a chunk."""

    spec: list[dict] = field(default_factory=list)
    stats: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    unparsed: list[tuple[int, str]] = field(default_factory=list)  # (line, text)
    lines: int = 0
    records: int = 0
    first_at: datetime | None = None
    last_at: datetime | None = None


def _events(
    msg: str,
    uvicorn: bool = False,
    more_cause: str = "",
    more_oom: bool = False,
    more_dead: bool = False,
    more_spec: str = "",
) -> list[tuple[str, str]]:
    """`_record_events`, and a `config_error` when ``more_spec`` (the folded exception line that names the
    speculative config: a start-up that vLLM refused, e.g. DSpark without num_speculative_tokens) is given."""
    events = _record_events(msg, uvicorn, more_cause, more_oom, more_dead)
    if more_spec:
        events.append(("config_error", ((msg.strip()[:200] + " — ") if msg.strip() else "") + more_spec[:400]))
    return events


def _record_events(
    msg: str, uvicorn: bool = False, more_cause: str = "", more_oom: bool = False, more_dead: bool = False
) -> list[tuple[str, str]]:
    """(kind, detail) of the engine events a record holds (kinds: docs/data-model.md, logs, metrics and PoC results).

    ``more_cause`` is the last folded exception line (else the first unindented folded line), ``more_oom``
    whether any folded line holds an OOM text of the catalogue, ``more_dead`` whether one holds a death text
    (an engine-death exception raised inside a traceback, as V0 prints it, or the `Process EngineCore:` header
    of a dying engine core's traceback) — all the traceback `_events` needs, kept as it streams by. Death and
    OOM texts come from the catalogue (`catalogue.py`, derived from vLLM's source).
    """
    if uvicorn:
        return [("ready", msg)] if msg.startswith("Application startup complete") else []
    if msg.startswith(CLIENT_TEXT):  # a client's prompt or an answer, quoted: data, never an event of the engine
        return []
    launch = LAUNCH.match(msg)
    if launch:
        return [("launch", f"vLLM {launch.group('v')}"), *_folded(msg, more_cause, more_oom, more_dead)]
    if msg.startswith("Initializing") and (
        "LLM engine (v" in msg or "LLM engine with config" in msg
    ):  # early V0: no version
        version = VERSION.search(msg)
        start = ("start", f"vLLM {version.group('v')}" if version else msg[:200])
        return [start, *_folded(msg, more_cause, more_oom, more_dead)]
    if FATAL.search(msg):
        detail = msg.strip() + (f" — {more_cause[:300]}" if more_cause else "")
        events = [("fatal", detail)]
        if more_oom or OOM.search(msg):
            events.append(("oom", detail))
        return events
    if ENGINE_DEAD.search(msg):
        events = [
            ("engine_dead", msg[:300] + (f" — {more_cause[:300]}" if more_cause and more_cause not in msg else ""))
        ]
        return events + ([("oom", events[0][1])] if more_oom or OOM.search(msg) else [])
    if WORKER_DIED.search(msg):
        return [("worker_died", msg[:300])]
    if msg.startswith(SHUTDOWN):
        return [("shutdown", msg[:300])]
    if msg.startswith("PoC generation started"):
        return [("poc_start", msg[:300])]
    if msg.startswith("PoC stopped") or msg.startswith("PoC generation crashed"):
        return [("poc_stop", msg[:300])]
    if OOM.search(msg):
        return [("oom", msg[:300])]
    return _folded(msg, more_cause, more_oom, more_dead)


def _folded(msg: str, more_cause: str, more_oom: bool, more_dead: bool) -> list[tuple[str, str]]:
    """A death or OOM in a record's folded traceback (V0 header-less tracebacks, or one cut right after a
    launch or start line, as a failed start prints it)."""
    if not (more_dead or more_oom):
        return []
    detail = ((msg.strip() + " — " if msg.strip() else "") + more_cause[:300])[:600]
    return ([("engine_dead", detail)] if more_dead else []) + ([("oom", detail)] if more_oom else [])


# vLLM's request log quotes the client's prompt and the answer (`%r`, one line) after these words
# (vllm/entrypoints/logger.py, RequestLogger.log_inputs / log_outputs): a prompt may quote vLLM's own error
# texts ("CUDA out of memory", "EngineCore encountered a fatal error"), which are then no event.
CLIENT_TEXT = ("Received request ", "Generated response ")

# the API server stopping (vllm/entrypoints/launcher.py; the second form from vllm-project/vllm #43707, vLLM 0.23):
# the server was running, so a launch after it is a restart even when nothing else of that run was collected
SHUTDOWN = ("Shutting down FastAPI HTTP server", "[shutdown] API server: shutting down FastAPI HTTP server")
EXCEPTION = re.compile(r"[\w.]+(?:Error|Exception|Exit|Interrupt)\b")  # `torch.OutOfMemoryError: …`
# a traceback's exception line that names the speculative config: pydantic's `…ValidationError: 1 validation
# error for SpeculativeConfig` (vLLM's configs are pydantic dataclasses), or an error about num_speculative_tokens
# or DSpark
SPEC_ERROR = re.compile(r"speculative|num_spec|dspark", re.IGNORECASE)
# pydantic's header, `1 validation error for SpeculativeConfig`, whose next line is the reason
PYDANTIC_HEAD = re.compile(r"\d+ validation errors? for \w+$")


def _spec_error(body: str) -> bool:
    return EXCEPTION.match(body) is not None and SPEC_ERROR.search(body) is not None


# Every record `_events` can return something for contains one of these (a superset filter, run in Rust).
EVENT_WORDS = [
    "LLM engine (v",
    "LLM engine with config",
    "vLLM API server version",
    "vLLM server version",
    LOGO_VERSION,
    "PoC generation started",
    "PoC stopped",
    "PoC generation crashed",
    *SHUTDOWN,
    *catalogue.LITERALS,
]
# what `_scan_chunk` looks for in one pass, as one regex of literals (faster than `contains_any` over a
# chunk's messages: bench/BENCHMARKS.md)
_RX_WORDS = "|".join(pl.escape_regex(w) for w in dict.fromkeys([*EVENT_WORDS, *START_WORDS, "version"]))

# -- streaming, vectorised parser ----------------------------------------------------------------

CHUNK_BYTES = 32 << 20  # whole lines per chunk; peak memory is a small multiple of this (bench/BENCHMARKS.md)
# the first chunks are smaller (doubling up to CHUNK_BYTES): the walk waits for the first chunk's scan
FIRST_CHUNK_BYTES = 8 << 20
_WS = r"[\s\x1c-\x1f]"  # Python's str.isspace() also counts \x1c-\x1f, Rust's \s does not
_PY_SPACE = "".join(c for c in map(chr, range(0x3001)) if c.isspace())  # what str.strip() strips
_LEVEL = "DEBUG|INFO|WARNING|ERROR|CRITICAL"
# `(EngineCore_DP0 pid=7)`, `(VllmWorker rank=0 pid=7)`, Ray's `(RayWorkerWrapper pid=7, ip=…)`,
# vLLM 0.2's Ray actor `(_AsyncLLMEngine pid=7)`; the process's name is the first word
_RX_NAME, _RX_PROC_REST = r"[A-Za-z_][\w-]*", r"(?: [\w=-]+)* pid=\d+(?:, ip=[^)\s]+)?\)"
_RX_PROC = rf"\(({_RX_NAME}){_RX_PROC_REST}"
# without a group: taken whole (group 0), a match the regex engine finds without its slower capture engines
_RX_PREFIX = rf"^\({_RX_NAME}{_RX_PROC_REST}{_WS}?"
# MM-DD HH:MM:SS of a calendar time: a line with month 13 or hour 25 is not an envelope line (it is
# folded or unparsed), rather than a record that cannot be dated
_MONTH, _DAY, _HOUR, _MIN = r"0[1-9]|1[0-2]", r"0[1-9]|[12]\d|3[01]", r"[01]\d|2[0-3]", r"[0-5]\d"
_TIME = rf"(?:{_MONTH})-(?:{_DAY}) (?:{_HOUR}):(?:{_MIN}):(?:{_MIN})"
# the envelope (level, stamp, [file:line]) at the start of the line, or after a free-text prefix
_RX_STAMP = (
    rf"(?P<level>{_LEVEL}) (?P<month>{_MONTH})-(?P<day>{_DAY}) (?P<h>{_HOUR}):(?P<m>{_MIN}):(?P<s>{_MIN})"
    rf"(?:[.,]\d+)? "
)
# every line goes through the V1 form `[file.py:123] `; only the lines it misses through the others (`_RX_ENV`)
_RX_ENV0 = rf"^(?P<env>{_RX_STAMP}\[[^\]]*\] )"
# `[file.py:123]` (V1) or `file.py:123]` (V0, up to about 0.7 / early 0.8); an empty message ends the line
_RX_ENV_BODY = rf"{_RX_STAMP}(?:\[[^\]]*\]|[\w./-]+:\d+\])(?: |$)"
# after any text: a collector's prefix (compose `service |`, a docker or Kubernetes time stamp, journald's
# `Mon DD HH:MM:SS host unit[pid]: `, a sidecar's JSON-ish head), maybe a process prefix (Ray's actors), or a
# progress bar glued in front of the level: the first envelope in the line is the line's
_RX_ENV = rf"^(?P<env>.*?{_RX_ENV_BODY})"
# Ray's log deduplication marks a line printed by several actors at once (`… [repeated 3x across cluster]`)
_RX_RAY_REPEATED = rf"{_WS}*\[repeated \d+x across cluster\]{_WS}*$"
# the free text before an envelope (and before its process prefix): a collector's prefix, written before the
# file's other lines (tracebacks, plain prints) too; its digits vary from line to line
_RX_FREE = rf"^(\S.*?)(?:{_RX_PREFIX[1:]})?(?:{_LEVEL}) \d\d-\d\d \d\d:"
MAX_LEARNED = 16  # distinct prefix shapes a file is read with (the first ones, in file order)
_RX_UVICORN = rf"^(?:\S.{{0,{MAX_PREFIX - 1}}}?{_WS})?(?:{_LEVEL}):{_WS}+(.*)$"  # after a collector's prefix too
_RX_TRACE = (
    rf"^(?:{_WS}|Traceback \(most recent call last\)|During handling of|The above exception|Process [\w-]+:$"
    r"|[\w.]+(?:Error|Exception|Exit|Interrupt)\b"
    r"|Exception in callback |handle: <Handle )"
)  # asyncio's report of a failed task (V0 engine loop)
_RX_BLANK = rf"^{_WS}*$"
# a line prefix a log collector puts on every line (records, tracebacks, uvicorn lines alike), removed before
# anything else: journald (`Jan 28 10:40:07 host unit[pid]: `, or its ISO form), Kubernetes' CRI files
# (`2025-05-06T12:00:00.123456789Z stdout F `), `docker logs --timestamps`, a sidecar collector
# (`[VllmSidecar id]: 2024-11-13T03:15:08.672Z 1 stdout: `), `kubectl logs --prefix` (`[pod/name/container] `)
_RX_COLLECTOR = (
    r"^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [^\s\[:]+(?:\[\d+\])?: "
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)? "
    r"(?:(?:stdout|stderr) [FP] |\S+ [^\s\[:]+\[\d+\]: )?"
    r"|\[[^\]\s]+(?: [^\]\s]+)?\]: \S+ \d+ (?:stdout|stderr): "
    r"|\[pod/[^\]]+\] )"
)
_RX_VERSION = rf"{_RX_VERSION_INTRO}(\d+)\.(\d+)\.(\d+)"
_PP = "Per-position acceptance rate: "
_RX_RATES = rf"{NUMBER}(?:, {NUMBER})*"
_RX_PP = f"{_PP}{_RX_RATES}"
_RX_STATS_HEAD = (
    rf"^(?:Engine (?P<engine>\d+): |(?P<engines>\d+) Engines Aggregated: )?"
    rf"Avg prompt throughput: (?P<prompt>{NUMBER}) tokens/s, Avg generation throughput: (?P<gen>{NUMBER}) tokens/s"
)
# version code = major·10^12 + minor·10^6 + patch. Before 0.9.0 a MAL without per-position rates is read as
# accepted/drafts (no +1); from 0.11.1 a missing `Preemptions:` field means 0 (before: unknown)
_V090, _V0111 = 9 * 10**6, 11 * 10**6 + 1
STAMP_COLS = ("rollovers", "month", "day", "h", "m", "s")


@dataclass
class VllmBatch:
    """Rows of one chunk. Every row frame has `line` (1-based, of the record's first line); spec, stats and
    events also level, proc and `at` (UTC; null when the file has no year to go by)."""

    spec: pl.DataFrame
    stats: pl.DataFrame
    events: pl.DataFrame
    unparsed: pl.DataFrame  # line, text (first 500 characters)
    startup: pl.DataFrame = field(default_factory=pl.DataFrame)  # what start lines state (`vllm_config`)


@dataclass
class _Open:
    """The current record, carried across chunk boundaries."""

    line: int
    level: str
    stamp: tuple[int, int, int, int, int, int]  # rollovers, month, day, h, m, s
    more: bool = False
    pending: dict | None = None  # an event candidate whose events wait for its folded lines

    @property
    def level_err(self) -> bool:
        return self.level in ("ERROR", "CRITICAL")


@dataclass
class VllmStream:
    """State and totals of one streaming parse; filled in while `iter_vllm_batches` runs."""

    year: int | None
    tz: LogTimezone = field(default_factory=LogTimezone)
    lines: int = 0
    records: int = 0
    unparsed: int = 0
    undecodable: int = 0  # lines with bytes that are not UTF-8
    rollovers: int = 0
    last_month: int | None = None
    version: int | None = None
    cur: _Open | None = None
    first: tuple | None = None  # stamp of the first / last record
    last: tuple | None = None
    base: int | None = None  # year of rollover 0
    # a file that holds parts of other files (pipeline/ingest/logs.py, `_segments`): the first line of each
    # part, and per part [stamp of its first record, of its last record, records]
    part_starts: list[int] = field(default_factory=lambda: [1])
    parts: list[list] = field(default_factory=list)
    # (line, why) of records whose date does not exist in the year given (02-29 under a non-leap --year)
    impossible: list[tuple[int, str]] = field(default_factory=list)
    # the collector prefixes seen before an envelope so far (shapes, file order), and one regex of them
    learned: list[str] = field(default_factory=list)
    learned_rx: re.Pattern | None = None
    cut: int = 0  # lines past the line limit (each also unparsed, in quarantine)

    def learn(self, shape: str) -> None:
        if len(self.learned) < MAX_LEARNED and shape not in self.learned:
            self.learned.append(shape)
            self.learned_rx = re.compile("|".join(re.escape(s).replace("0", r"\d+") for s in self.learned))

    def at(self, stamp) -> datetime | None:
        if stamp is None or self.base is None:
            return None
        return _at_series(np.array([stamp[0]]), np.array([stamp[1:]]), self.base, self.tz)[0]


def _chunks(file: LogFile, chunk_bytes: int) -> Iterator[bytes]:
    """The file in blocks of whole lines (a block ends at a \n, or at the end of the file; never between two
    lines of one message, see `_cut`); what follows a block's end starts the next one. The first blocks are
    smaller (doubling up to `chunk_bytes`), so that the first rows come early.

    A line longer than the line limit (pipeline/core/limits.py) is never held whole: past the limit, only its
    first `line_bytes + 1` bytes are kept and the rest is read past; `_scan_chunk` cuts and counts it."""
    most = limit().line_bytes
    with file.open_bytes() as fh:
        carry = b""
        size = min(chunk_bytes, FIRST_CHUNK_BYTES)
        while True:
            data = fh.read(size)
            size = min(2 * size, chunk_bytes)
            if not data:
                if carry:
                    yield carry
                return
            data = carry + data if carry else data
            end = _cut(data)
            if end == 0 and len(data) > most and data.find(b"\n") < 0:  # one line past the limit: read past it
                carry = _past_line(fh, data[: most + 1], size)
                continue
            if end == 0 and len(data) > 2 * max(chunk_bytes, CHUNK_BYTES):  # one message that long: cut it anyway
                end = data.rfind(b"\n") + 1
            if end == 0:  # no line end in this read (or one message throughout): read on
                carry = data
                continue
            block, carry = [data[:end]], data[end:]
            del data
            yield block.pop()  # held here no longer than it takes to hand it on (see `_scanned`)


def _past_line(fh, head: bytes, size: int) -> bytes:
    """The kept head of an over-long line, with what follows the line's end: the rest of the line is read
    and dropped, a block at a time."""
    while more := fh.read(size):
        end = more.find(b"\n")
        if end >= 0:
            return head + more[end:]
    return head


_HEADER = re.compile(
    rb"(?:%s|%s|.){0,%d}?(?:%s)(?:\x1b\[[0-9;]*m)* "
    rb"\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? (?:\[[^\]]*\]|[\w./-]+:\d+\])(?: |$)"
    % (_RX_ANSI.encode(), _RX_PREFIX[1:].encode(), MAX_PREFIX + 64, _LEVEL.encode())
)


_COLLECTOR = re.compile(_RX_COLLECTOR.encode())
_PROCESS = re.compile(rf"{_RX_PROC}{_WS}?")
_TRACE = re.compile(_RX_TRACE)


def _cut(data: bytes, max_back: int = 10_000) -> int:
    """Where a block may end: after its last line end, moved back while the lines on both sides start with
    the same envelope header (one message printed over several lines stays in one block); 0 when the block
    has no line end. After `max_back` lines of one header it cuts anyway."""
    end = last = data.rfind(b"\n") + 1
    for _ in range(max_back):
        if end == 0:  # one message throughout: the caller reads on
            return 0
        start = data.rfind(b"\n", 0, end - 1) + 1
        collector = _COLLECTOR.match(data, start, end)  # a collector's prefix differs from line to line
        found = _HEADER.match(data, collector.end() if collector else start, end)
        if found is None:
            return end
        head = found.group()
        stop = data.find(b"\n", end)
        after = data[end : stop if stop >= 0 else len(data)]
        collector = _COLLECTOR.match(after)
        after = after[collector.end() :] if collector else after
        if not after.startswith(head) and (len(after) >= len(head) or not head.startswith(after)):
            return end
        end = start
    return last


_CR_LF = re.compile(r"\r+\n")


def _split_counted(data: bytes) -> tuple[pl.Series, int]:
    """The block's lines, and how many held bytes that are not UTF-8: those at a line's end are dropped
    (a character cut by the writer is no text of the record), the others read as U+FFFD."""
    n = data.count(b"\n") + (not data.endswith(b"\n"))
    if (
        b"\r" not in data
        and b"\x1f" not in data
        and b"\n\n" not in data
        and not data.startswith(b"\n")
        and not data.startswith(b"\xef\xbb\xbf")
    ):  # the CSV reader would drop empty lines and a BOM
        valid = data.isascii()
        if not valid:
            try:
                data.decode("utf-8")
                valid = True
            except UnicodeDecodeError:
                pass
        if valid:  # the multi-threaded CSV reader as a line splitter (no separator, no quotes)
            s = pl.read_csv(
                data,
                has_header=False,
                separator="\x1f",
                quote_char=None,
                new_columns=["raw"],
                schema_overrides={"raw": pl.String},
                comment_prefix=None,
            )["raw"]
            if s.len() == n and s.null_count() == 0:
                return s, 0
    try:
        text, undecodable = data.decode("utf-8"), False
    except UnicodeDecodeError:
        text, undecodable = data.decode("utf-8", "replace"), True
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\r" in text:  # CR… CR LF is one line end (the CRs before an LF); a lone CR ends a line (a redraw)
            text = _CR_LF.sub("\n", text).replace("\r", "\n")
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    raw = pl.Series("raw", parts, dtype=pl.String)
    if not undecodable:
        return raw, 0
    return raw.str.strip_chars_end("\ufffd"), int(raw.str.contains("\ufffd", literal=True).sum())


def _bounded(data: bytes) -> tuple[pl.Series, list[tuple[int, str]], int]:
    """The block's lines (`_split_counted`), each longer than the line limit made blank, (line in the block,
    why) of those: they are quarantined, not parsed; and the lines with bytes that are not UTF-8. One look
    at the lines' lengths, no pass over them."""
    raw, undecodable = _split_counted(data)
    most = limit().line_bytes
    if raw.len() == 0 or raw.str.len_bytes().max() <= most:  # type: ignore[operator]
        return raw, [], undecodable
    over = (raw.str.len_bytes() > most).arg_true()
    heads = raw.gather(over).str.slice(0, 200).to_list()
    cut = [
        (i + 1, f"longer than {most:,} bytes (the line limit, pipeline/core/limits.py), cut: {head}")
        for i, head in zip(over.to_list(), heads, strict=True)
    ]
    return raw.scatter(over, ""), cut, undecodable


def _head(text: pl.Series) -> pl.DataFrame:
    """Per line: body (the process prefix removed), proc, and the groups of the V1 envelope at its start."""
    pre = text.str.extract(_RX_PREFIX, 0)
    df = pl.DataFrame({"l": text, "pre": pre}).select(
        body=pl.when(pl.col("pre").is_null()).then("l").otherwise(pl.col("l").str.slice(pl.col("pre").str.len_chars())),
        proc=pl.col("pre").str.extract(rf"^\(({_RX_NAME})", 1),
    )
    return pl.concat([df, df["body"].str.extract_groups(_RX_ENV0).struct.unnest()], how="horizontal")


def _lines_frame(raw: pl.Series, first_line: int | pl.Series, stamps_only: bool = False) -> pl.DataFrame:
    """Per line: body (ANSI stripped, process prefix removed), proc, and for envelope lines the level,
    stamp and message. Lines are numbered from `first_line`, or given as a Series. With `stamps_only`,
    the level and stamp of each line only (the year scan: a folded line of a record repeats its stamp)."""
    raw = raw.alias("raw")
    line = (
        first_line.cast(pl.Int64).alias("line")
        if isinstance(first_line, pl.Series)
        else pl.int_range(first_line, first_line + raw.len(), dtype=pl.Int64, eager=True).alias("line")
    )
    coloured = raw.str.contains("\x1b", literal=True).arg_true()
    if coloured.len():  # ANSI codes stripped from the lines that have any (a regex pass over each line costs)
        raw = raw.scatter(coloured, raw.gather(coloured).str.replace_all(_RX_ANSI, ""))
    head = _head(raw)
    orig = pl.repeat(None, raw.len(), dtype=pl.String, eager=True)  # the line as written, where a prefix went
    missed = head["env"].is_null().arg_true()
    # a collector's prefix is looked for only where the V1 envelope missed: no line it matches starts with one
    collected = missed.gather(raw.gather(missed).str.contains(_RX_COLLECTOR).arg_true())
    if collected.len():
        orig = orig.scatter(collected, raw.gather(collected))
        again = _head(raw.gather(collected).str.replace(_RX_COLLECTOR, ""))
        head = head.with_columns(head[c].scatter(collected, again[c]) for c in head.columns)
        missed = head["env"].is_null().arg_true()
    if missed.len():  # V0's `file.py:123]`, text before the level: only on those lines
        found = head["body"].gather(missed).str.extract_groups(_RX_ENV).struct.unnest()
        if found["env"].null_count() < found.height:
            head = head.with_columns(head[c].scatter(missed, found[c]) for c in found.columns)
            # a process prefix after the free text (`service | (APIServer pid=1) INFO …`) names the process too
            inner = found["env"].str.extract(_RX_PROC, 1)
            if inner.null_count() < inner.len():
                proc = head["proc"]
                head = head.with_columns(proc=proc.scatter(missed, proc.gather(missed).fill_null(inner)))
            # the free text before the envelope, digits as 0: a collector prefix that `_walk` strips from the
            # file's later lines without an envelope
            shape = found["env"].str.extract(_RX_FREE, 1)
            if shape.null_count() < shape.len():
                head = head.with_columns(
                    shape=pl.repeat(None, raw.len(), dtype=pl.String, eager=True).scatter(
                        missed, shape.str.replace_all(r"\d+", "0")
                    )
                )
    stamps = {c: pl.col(c).cast(pl.Int32) for c in ("month", "day", "h", "m", "s")}
    if stamps_only:
        return head.select("level", **stamps)
    df = pl.concat([pl.DataFrame({"line": line, "orig": orig}), head], how="horizontal").with_columns(
        msg=pl.col("body").str.slice(pl.col("env").str.len_chars()), **stamps
    )
    repeated_ray = df["msg"].str.contains("x across cluster]", literal=True)
    if repeated_ray.any():  # only where Ray's mark is: a regex over every line costs
        idx = repeated_ray.arg_true()
        df = df.with_columns(msg=df["msg"].scatter(idx, df["msg"].gather(idx).str.replace(_RX_RAY_REPEATED, "")))
    # vLLM's formatter prints each line of a multi-line message (a traceback) with the full header: a line
    # with the header of the line before it whose message continues a traceback is a folded line of that
    # record, not a record (`_chunks` never cuts between two lines of one header)
    same_header = pl.col("proc").eq_missing(pl.col("proc").shift(1)) & (pl.col("env") == pl.col("env").shift(1))
    repeated = same_header & (pl.col("msg").str.contains(_RX_TRACE) | (pl.col("msg") == ""))
    return (
        df.with_columns(repeated=repeated.fill_null(False))
        .with_columns(
            body=pl.when("repeated").then(pl.col("msg")).otherwise(pl.col("body")),
            **{
                c: pl.when("repeated").then(None).otherwise(pl.col(c))
                for c in ("level", "month", "day", "h", "m", "s", "msg")
            },
        )
        .drop("env", "repeated")
    )


def _spec_rows(d: pl.DataFrame) -> pl.DataFrame:
    """The rules of a spec record over its extracted fields (`_spec_regex`). `mal_semantics` is ``no_plus1``
    (MAL = accepted/drafts, the 0.8.5 line) when MAL is closer to the per-position sum than to 1 + it, or,
    without usable per-position rates, before 0.9.0; else ``plus1``. The line does not print `drafts`: it is
    recovered as accepted/(MAL − 1), or accepted/MAL. `ok` False where Accepted or Drafted is missing."""
    total = pl.col("pp_total")
    mal = pl.col("mal_printed")
    mal_ok = mal.is_not_null() & mal.is_not_nan()
    closer = (mal - total).abs() < (mal - (1 + total)).abs()
    old = pl.col("ver").is_not_null() & (pl.col("ver") < _V090)
    no_plus1 = pl.col("accepted_tps").is_null() & mal_ok & pl.when(pl.col("usable")).then(closer).otherwise(old)
    d = d.with_columns(mal_semantics=pl.when(no_plus1).then(pl.lit("no_plus1")).otherwise(pl.lit("plus1")))
    ratio = pl.when(pl.col("mal_semantics") == "plus1").then(mal - 1).otherwise(mal)
    ratio = pl.when(mal_ok & (pl.col("accepted") > 0) & (ratio > 0)).then(ratio)  # else no drafts
    drafts = (pl.col("accepted") / ratio).round(0, mode="half_to_even").cast(pl.Int64, strict=False).clip(lower_bound=1)
    # V0: drafts = drafted / K (every verification step proposes K tokens), counts since the engine started
    v0_drafts = (pl.col("drafted") / pl.col("spec_tokens")).round(0, mode="half_to_even").cast(pl.Int64, strict=False)
    return d.with_columns(
        drafts=pl.when(pl.col("cumulative")).then(pl.when(pl.col("spec_tokens") > 0).then(v0_drafts)).otherwise(drafts),
        ok=pl.col("accepted").is_not_null() & pl.col("drafted").is_not_null(),
    )


def _spec_regex(d: pl.DataFrame) -> pl.DataFrame:
    """The fields of `SpecDecoding metrics:` messages, by name (the per-position list set aside first)."""
    # msg.split("SpecDecoding metrics:", 1)[1].strip() (trailing whitespace cannot change a match)
    d = d.with_columns(
        st=pl.col("msg").str.splitn("SpecDecoding metrics:", 2).struct.field("field_1").str.strip_chars_start(_PY_SPACE)
    )
    # the per-position list (the first `_RX_PP`) set aside: where `_PP` first occurs, by a literal split and a
    # match anchored after it (cheaper than a regex search and a regex replace of each message)
    pp = pl.col("st").str.splitn(_PP, 2).struct
    d = d.with_columns(before=pp.field("field_0"), after=pp.field("field_1"))
    d = d.with_columns(pp_text=pl.col("after").str.extract(f"^{_RX_RATES}", 0))
    cut = pl.col("before") + pl.col("after").str.slice(pl.col("pp_text").str.len_chars())
    d = d.with_columns(rest=pl.lit(", ") + pl.when(pl.col("pp_text").is_null()).then("st").otherwise(cut))
    odd = (d["after"].is_not_null() & d["pp_text"].is_null()).arg_true()
    if odd.len():  # no rate after the first `_PP`: the list may follow a later one
        st = d["st"].gather(odd)
        d = d.with_columns(
            pp_text=d["pp_text"].scatter(odd, st.str.extract(_RX_PP, 0).str.slice(len(_PP))),
            rest=d["rest"].scatter(odd, ", " + st.str.replace(_RX_PP, "")),
        )
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
    ).drop("st", "before", "after", "pp_text", "rest")
    # the V0 engine's `Speculative metrics:` line: counts since the engine started, the rate a fraction. (A
    # V1 development line of early 2025 also began `Speculative metrics:` but counted per interval and printed
    # no K: it is not read as V0's, and is reported as unparsed.)
    v0 = pl.col("msg").str.extract(r"Speculative metrics: (.*Number of speculative tokens: .*)$", 1)
    v0 = pl.when(~pl.col("msg").str.contains("SpecDecoding metrics:", literal=True)).then(v0)
    d = d.with_columns(cumulative=v0.is_not_null(), _v0=v0)
    f = pl.col("_v0").str
    d = d.with_columns(
        accepted=pl.coalesce(
            "accepted", f.extract(r"Number of accepted tokens: (\d+)", 1).cast(pl.Int64, strict=False)
        ),
        # 0.4.1 – 0.5.2 printed `Number of draft tokens tokens: N` (vllm/engine/metrics.py, fixed by vLLM #6470)
        drafted=pl.coalesce(
            "drafted", f.extract(r"Number of draft tokens(?: tokens)?: (\d+)", 1).cast(pl.Int64, strict=False)
        ),
        spec_tokens=f.extract(r"Number of speculative tokens: (\d+)", 1).cast(pl.Int64, strict=False),
        acceptance_rate_printed=pl.coalesce(
            "acceptance_rate_printed", f.extract(rf"Draft acceptance rate: ({NUMBER})", 1).cast(pl.Float64) * 100.0
        ),
    ).drop("_v0")
    longest = d["per_position"].list.len().max() if d.height else None
    k = longest if isinstance(longest, int) else 0  # None: no row has a per-position list
    total = pl.lit(0.0)
    for i in range(k):  # left to right, as Python's sum(): the 0.8.5 test can sit on a tie
        total = total + pl.col("per_position").list.get(i, null_on_oob=True).fill_null(0.0)
    return d.with_columns(pp_total=total)


def _stats_rows(d: pl.DataFrame) -> pl.DataFrame:
    """The rules of a stats record over its extracted fields (`_stats_regex`): percentages as fractions, the
    engine label, a missing `Preemptions:` as 0 where vLLM prints it only when > 0; `ok` False without `Running:`."""
    # x / 100 with a true division (Polars turns division by a scalar into a multiplication by 0.01)
    # (the numpy round trip turns nulls into NaN: an absent field stays null, a printed `nan%` stays NaN)
    d = d.with_columns(
        pl.when(pl.col(c).is_not_null()).then(pl.Series(c, d[c].to_numpy() / 100.0, dtype=pl.Float64))
        for c in ("kv_cache_usage", "prefix_cache_hit_rate")
    )
    aggregated = pl.col("aggregated")
    new = pl.col("ver").is_not_null() & (pl.col("ver") >= _V0111)
    return d.with_columns(
        # `Engine 001:` is engine 1, as the `engine` label of /metrics numbers it
        engine=pl.when(pl.col("engine_n").is_not_null())
        .then(pl.col("engine_n").cast(pl.Int64, strict=False).cast(pl.String))
        .when(aggregated)
        .then(pl.lit("all"))
        .otherwise(pl.lit(None, pl.String)),
        preemptions=pl.when(pl.col("pre").is_not_null())
        .then(pl.col("pre"))
        .when(aggregated | new)
        .then(pl.lit(0, pl.Int64))
        .otherwise(pl.lit(None, pl.Int64)),
        ok=pl.col("matched") & pl.col("running").is_not_null(),
    )


def _stats_regex(d: pl.DataFrame) -> pl.DataFrame:
    """The fields of `Avg prompt throughput:` messages, by name (percentages as printed)."""
    d = d.with_columns(_groups=pl.col("msg").str.extract_groups(_RX_STATS_HEAD))
    f = pl.col("_groups").struct
    m = pl.col("msg").str
    return d.with_columns(
        matched=f.field("gen").is_not_null(),
        engine_n=f.field("engine"),
        aggregated=f.field("engines").is_not_null(),
        prompt_tps=f.field("prompt").cast(pl.Float64),
        generation_tps=f.field("gen").cast(pl.Float64),
        running=m.extract(r", Running: (\d+) reqs", 1).cast(pl.Int64, strict=False),
        waiting=m.extract(r", (?:Waiting|Pending): (\d+) reqs", 1).cast(pl.Int64, strict=False),
        pre=m.extract(r", Preemptions: (\d+)", 1).cast(pl.Int64, strict=False),
        kv_cache_usage=m.extract(rf", GPU KV cache usage: ({NUMBER})%", 1).cast(pl.Float64),
        prefix_cache_hit_rate=m.extract(rf", Prefix cache hit rate: ({NUMBER})%", 1).cast(pl.Float64),
    ).drop("_groups")


SPEC_COLS = [
    "accepted",
    "drafted",
    "drafts",
    "per_position",
    "mal_printed",
    "mal_semantics",
    "accepted_tps",
    "drafted_tps",
    "acceptance_rate_printed",
    "cumulative",
    "spec_tokens",
]
STATS_COLS = [
    "engine",
    "prompt_tps",
    "generation_tps",
    "running",
    "waiting",
    "preemptions",
    "kv_cache_usage",
    "prefix_cache_hit_rate",
]
_BASE = {
    "line": pl.Int64,
    "level": pl.String,
    "proc": pl.String,
    "rollovers": pl.Int32,
    "month": pl.Int32,
    "day": pl.Int32,
    "h": pl.Int32,
    "m": pl.Int32,
    "s": pl.Int32,
}
_EVENT_SCHEMA = _BASE | {"kind": pl.String, "detail": pl.String}
_UNPARSED_SCHEMA = {"line": pl.Int64, "text": pl.String}


@dataclass
class _Chunk:
    """One chunk as the record walk (`_walk`) needs it."""

    spec: pl.DataFrame  # line, body, level, proc, at, the extracted spec fields
    stats: pl.DataFrame  # the same with the stats fields
    rare: pl.DataFrame  # lines that may start, continue or date a record the vectorised part does not handle
    env: int  # envelope lines (records)
    first: tuple | None  # stamp of the first envelope line
    last: tuple | None  # (line, level, stamp) of the last envelope line
    lines: int = 0  # lines in the chunk
    undecodable: int = 0  # lines with bytes that are not UTF-8 (`_split_counted`)
    env_lines: pl.DataFrame | None = None  # line and stamp of every envelope line
    startup: pl.DataFrame | None = None  # line, level, proc, stamp, part, key, value (`vllm_config.start_facts`)
    prefixes: pl.DataFrame | None = None  # shape, line: each collector prefix shape before an envelope, first line
    cut: list[tuple[int, str]] = field(default_factory=list)  # (line, why) of lines past the line limit


def _parse_chunk(chunk: _Chunk, st: VllmStream) -> VllmBatch:
    """One scanned chunk → its rows (with `at`), placed after what `st` has read. The cyclic garbage
    collector is paused meanwhile: the walk allocates many short-lived acyclic objects, and its
    collections cost as much as the rest."""
    with gc_paused():
        st.undecodable += chunk.undecodable
        chunk = _place(chunk, st)
        st.lines += chunk.lines
        spec, stats, events, unparsed = _walk(chunk, st)
        if chunk.cut:  # lines past the limit: quarantined as unparsed lines, with why
            st.cut += len(chunk.cut)
            unparsed = sorted(unparsed + chunk.cut)
        return _finish(st, spec, stats, events, unparsed, startup=chunk.startup)


def _scan_chunk(box: list[bytes]) -> _Chunk:
    """Every line of the chunk (the one block in `box`, taken out of it: its bytes are freed once split)
    through the Polars expressions, on its own: lines numbered from 1 and year rollovers counted from 0
    within the chunk (`_place` shifts both). Needs no state, so the next chunks are scanned in threads
    while this one is walked (Polars runs without the GIL)."""
    raw, cut, undecodable = _bounded(box.pop())
    df = _lines_frame(raw, 1)
    is_env = pl.col("level").is_not_null()
    # year rollovers within the chunk: a month that falls back by more than six
    prev = pl.col("month").shift(1).forward_fill()
    df = df.with_columns(rollovers=(pl.col("month") < prev - 6).fill_null(False).cast(pl.Int32).cum_sum())
    df = df.with_columns(rollovers=pl.when(is_env).then(pl.col("rollovers")).otherwise(None))
    env_lines = df.filter(is_env).select("line", "level", *STAMP_COLS)
    # Rare lines: every line that is not an envelope line, and envelope lines that may hold an event or a
    # version. One pass of every word list over the messages finds those and the lines that may state
    # start-up facts; the lists are told apart on the few lines it keeps.
    worded = (df["level"].is_not_null() & df["msg"].str.contains(_RX_WORDS)).fill_null(False).arg_true()
    said = df["msg"].gather(worded)
    eventful = pl.repeat(False, df.height, eager=True).scatter(
        worded, said.str.contains_any(EVENT_WORDS) | said.str.contains("version", literal=True)
    )
    rare_mask = (~is_env & ~pl.col("body").str.contains(_RX_BLANK)) | pl.lit(eventful)
    n_env_before = is_env.cast(pl.Int64).cum_sum() - is_env.cast(pl.Int64)
    # the stamp of the latest envelope record at or before each line (uvicorn records copy it)
    ffill = [pl.when(is_env).then(pl.col(c)).otherwise(None).forward_fill().alias(f"p_{c}") for c in STAMP_COLS]
    ffill += [
        pl.when(is_env).then(pl.col("line")).otherwise(None).forward_fill().alias("p_line"),
        pl.when(is_env).then(pl.col("level")).otherwise(None).forward_fill().alias("p_level"),
    ]
    rare = _rare_text(df.with_columns(*ffill, n_env_before=n_env_before).filter(rare_mask).select(_RARE_COLS))
    spec_mask = is_env & pl.col("msg").str.contains_any(["SpecDecoding metrics:", "Speculative metrics:"])
    stats_mask = (
        is_env
        & ~pl.col("msg").str.contains("SpecDecoding metrics:", literal=True)
        & pl.col("msg").str.contains("Avg prompt throughput:", literal=True)
    )
    spec = _spec_regex(df.filter(spec_mask))
    stats = _stats_regex(df.filter(stats_mask))
    first = last = None
    if env_lines.height:
        first = env_lines.select(STAMP_COLS).row(0)
        row = env_lines.row(-1)
        last = (row[0], row[1], tuple(row[2:]))
    return _Chunk(
        spec,
        stats,
        rare,
        env_lines.height,
        first,
        last,
        lines=df.height,
        undecodable=undecodable,
        env_lines=env_lines.select("line", *STAMP_COLS),
        startup=start_facts(
            df[worded.filter(said.str.contains_any(START_WORDS))].select("line", "level", "proc", "msg", *STAMP_COLS)
        ),
        prefixes=None
        if "shape" not in df.columns
        else df.group_by("shape").agg(pl.col("line").min()).drop_nulls().sort("line"),
        cut=cut,
    )


def _place(chunk: _Chunk, st: VllmStream) -> _Chunk:
    """The chunk as it comes after the lines `st` has read: lines and rollovers shifted, spec and stats dated.
    One rollover more when its first envelope line's month falls back from the last one seen."""
    offset = st.lines
    fell_back = chunk.first is not None and st.last_month is not None and chunk.first[1] < st.last_month - 6
    shift = st.rollovers + fell_back

    def moved(frame: pl.DataFrame, columns: tuple[str, ...]) -> pl.DataFrame:
        return frame.with_columns(
            *(pl.col(c) + offset for c in columns if c in frame.columns),
            *(pl.col(c) + shift for c in ("rollovers", "p_rollovers") if c in frame.columns),
        )

    def stamp(value: tuple) -> tuple:
        return (value[0] + shift, *value[1:])

    last = chunk.last and (chunk.last[0] + offset, chunk.last[1], stamp(chunk.last[2]))
    if len(st.part_starts) > 1:
        assert chunk.env_lines is not None  # `_scan_chunk` sets it
        _track_parts(st, moved(chunk.env_lines, ("line",)))
    return _Chunk(
        with_at(_real_days(moved(chunk.spec, ("line",)), st), st.base, st.tz),
        with_at(_real_days(moved(chunk.stats, ("line",)), st), st.base, st.tz),
        moved(chunk.rare, ("line", "p_line")),
        chunk.env,
        chunk.first and stamp(chunk.first),
        last,
        chunk.lines,
        startup=None if chunk.startup is None else with_at(moved(chunk.startup, ("line",)), st.base, st.tz),
        prefixes=None if chunk.prefixes is None else moved(chunk.prefixes, ("line",)),
        cut=[(line + offset, why) for line, why in chunk.cut],
    )


_RARE_COLS = [
    "line",
    "body",
    "orig",
    "proc",
    "level",
    "msg",
    *STAMP_COLS,
    "p_line",
    "p_level",
    *[f"p_{c}" for c in STAMP_COLS],
    "n_env_before",
]


def _track_parts(st: VllmStream, env_lines: pl.DataFrame) -> None:
    """First and last record stamps and record counts of each part of the file (`VllmStream.part_starts`)."""
    if not st.parts:
        st.parts = [[None, None, 0] for _ in st.part_starts]
    ends = [*st.part_starts[1:], None]
    for span, start, end in zip(st.parts, st.part_starts, ends, strict=True):
        mask = pl.col("line") >= start if end is None else pl.col("line").is_between(start, end, closed="left")
        part = env_lines.filter(mask).select(STAMP_COLS)
        if part.height:
            span[0] = span[0] or part.row(0)
            span[1] = part.row(-1)
            span[2] += part.height


def _rare_text(rare: pl.DataFrame) -> pl.DataFrame:
    """What the walk reads of a rare line's text, vectorised ahead of the walk: the uvicorn message, whether
    it continues a traceback, and a version code in the envelope message or in the uvicorn message (which
    counts only for a uvicorn record, see `_walk`)."""

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

    spec: pl.DataFrame  # the rows that parse: line, level, proc, at, SPEC_COLS
    stats: pl.DataFrame  # the same with STATS_COLS
    failed: set[int]  # record lines that do not parse (no events either)
    unparsed: list  # (line, text) of those
    version: int | None  # the version in force after the chunk


def _record_rows(chunk: _Chunk, version: int | None, had_record: bool) -> _Rows:
    """The spec / stats rows of a chunk with their version and rules, given the version in force before
    it and whether a record came before it (a uvicorn line is a record only after one)."""
    rare = chunk.rare.lazy().with_columns(
        uv_rec=pl.col("uv_msg").is_not_null() & ((pl.col("n_env_before") > 0) | had_record)
    )
    # the vLLM version of records (envelope and uvicorn) holds until the next version line
    versions = (
        rare.select(
            "line",
            ver=pl.when(pl.col("level").is_not_null())
            .then(pl.col("ver_msg"))
            .when(pl.col("uv_rec"))
            .then(pl.col("ver_uv")),
        )
        .drop_nulls("ver")
        .collect()
    )
    spec = _spec_rows(_with_version(chunk.spec, versions, version))
    stats = _stats_rows(_with_version(chunk.stats, versions, version))
    bad = pl.concat(
        [spec.filter(~pl.col("ok")).select("line", "body"), stats.filter(~pl.col("ok")).select("line", "body")]
    )
    keep = ["line", "level", "proc", "at"]
    return _Rows(
        spec.filter(pl.col("ok")).select(*keep, *SPEC_COLS),
        stats.filter(pl.col("ok")).select(*keep, *STATS_COLS),
        set(bad["line"].to_list()),
        [(line, body[:500]) for line, body in bad.iter_rows()],
        int(versions["ver"][-1]) if versions.height else version,
    )


def _pending(line: int, level: str, proc, stamp: tuple, msg: str, uvicorn: bool = False) -> dict:
    """A record that may hold events, open until the next record (its traceback lines fold into it)."""
    return {
        "line": line,
        "level": level,
        "proc": proc,
        "stamp": stamp,
        "msg": msg,
        "uvicorn": uvicorn,
        "cause": "",
        "oom": False,
        "dead": False,
        "spec": "",  # the exception line naming the speculative config, if one folds in
    }


_WALK_COLS = [*(c for c in _RARE_COLS if c != "n_env_before"), "uv_msg", "trace"]  # what the walk reads, in order


def _walk(chunk: _Chunk, st: VllmStream) -> tuple[pl.DataFrame, pl.DataFrame, list, list]:
    """The record walk over the rare lines (uvicorn records, traceback folding, events, unparsed lines)
    and the state carried to the next chunk; the spec / stats rows get their version and rules."""
    rows = _record_rows(chunk, st.version, st.cur is not None)
    st.version = rows.version
    spec, stats, failed, unparsed = rows.spec, rows.stats, rows.failed, rows.unparsed

    events: list[tuple] = []
    cur = st.cur
    st.records += chunk.env
    # collector prefixes strip a line only once an envelope line before it had them (file order: every cut of
    # the file into chunks reads each line alike)
    prefixes = [] if chunk.prefixes is None else chunk.prefixes.rows()
    ahead = 0
    for (
        line,
        body,
        orig,
        proc,
        level,
        msg,
        r,
        mo,
        d,
        h,
        mi,
        s,
        p_line,
        p_level,
        pr,
        pmo,
        pd,
        ph,
        pmi,
        ps,
        uv_msg,
        trace,
    ) in zip(*(chunk.rare[c].to_list() for c in _WALK_COLS), strict=True):  # column lists: cheaper than iter_rows
        if level is not None:  # an envelope record that may hold events
            _flush(cur, events)
            stamp = (r, mo, d, h, mi, s)
            cur = _Open(line, level, stamp)
            if line not in failed:
                cur.pending = _pending(line, level, proc, stamp, msg)
            continue
        if p_line is not None and (cur is None or cur.line < p_line):  # a plain envelope record came in between
            _flush(cur, events)
            cur = _Open(p_line, p_level, (pr, pmo, pd, ph, pmi, ps))
        if uv_msg is not None:
            if cur is None:
                continue  # before any timed record: nothing to date it by
            _flush(cur, events)
            st.records += 1
            cur = _Open(line, "INFO", cur.stamp)
            cur.pending = _pending(line, "INFO", proc, cur.stamp, uv_msg, uvicorn=True)
            continue
        while ahead < len(prefixes) and prefixes[ahead][1] < line:
            st.learn(prefixes[ahead][0])
            ahead += 1
        if not trace and st.learned_rx is not None and (found := st.learned_rx.match(body)):
            orig, body, proc, trace = _unprefixed(orig, body, proc, found.end())
        if cur is not None and (cur.level_err or cur.more or trace):
            _fold(cur, body, proc)
            continue
        unparsed.append((line, (orig if orig is not None else body)[:500]))
    for shape, _ in prefixes[ahead:]:
        st.learn(shape)
    st.cur = _close_chunk(chunk, st, cur, events)
    return spec, stats, events, sorted(unparsed)


def _unprefixed(orig: str | None, body: str, proc, end: int) -> tuple[str, str, object, bool]:
    """A line under the prefix the file's records carry (a logging wrapper's, a compose service's), read as
    if the prefix were not there: (orig, body, proc, trace)."""
    orig, body = orig if orig is not None else body, body[end:]
    process = _PROCESS.match(body)
    if process:
        proc, body = process.group(1), body[process.end() :]
    return orig, body, proc, _TRACE.match(body) is not None


def _fold(cur: _Open, body: str, proc) -> None:
    """A continuation line (a traceback's, an error record's) folded into the open record: its cause, OOM
    and engine death."""
    cur.more = True
    launch = "version" in body and LAUNCH.match(body) is not None
    if cur.pending is None and (launch or OOM.search(body) or DEATH.search(body) or _spec_error(body)):
        # a plain record (its message holds no event) whose traceback ends the engine: V0 prints
        # tracebacks without the header after whatever record came before; or the logo a launch
        # prints from 0.15, one message over several lines, its version on the second
        cur.pending = _pending(cur.line, cur.level, proc, cur.stamp, body if launch else "")
    if cur.pending is not None:
        if not body.startswith(" ") and body.strip() and (not cur.pending["cause"] or EXCEPTION.match(body)):
            cur.pending["cause"] = body.strip()  # the exception line, else the first unindented one
        if not cur.pending["oom"] and OOM.search(body):
            cur.pending["oom"] = True
            cur.pending["cause"] = cur.pending["cause"] or body.strip()  # an indented `raise …(` line
        if not cur.pending["dead"] and DEATH.search(body):
            cur.pending["dead"] = True
            cur.pending["cause"] = cur.pending["cause"] or body.strip()
        if not cur.pending["spec"] and _spec_error(body):
            cur.pending["spec"] = body.strip()
        elif PYDANTIC_HEAD.search(cur.pending["spec"]) and body.strip():
            # pydantic's message line under its header: vLLM's reason (`Value error, DSpark requires …`)
            cur.pending["spec"] += ": " + body.strip()


def _flush(cur: _Open | None, events: list[tuple]) -> None:
    """The events of the open record, once no more lines can fold into it."""
    if cur is not None and cur.pending is not None:
        p = cur.pending
        for kind, detail in _events(p["msg"], p["uvicorn"], p["cause"], p["oom"], p["dead"], p["spec"]):
            events.append((p["line"], p["level"], p["proc"], *p["stamp"], kind, detail))
        cur.pending = None


def _close_chunk(chunk: _Chunk, st: VllmStream, cur: _Open | None, events: list[tuple]) -> _Open | None:
    """The record open at the chunk's end (its last record may be a plain one after the last rare line),
    and the stream's first and last stamps."""
    if chunk.last is not None:
        line, last_level, stamp = chunk.last
        if cur is None or cur.line < line:
            _flush(cur, events)
            cur = _Open(line, last_level, stamp)
        if st.first is None:
            st.first = chunk.first
        st.last = stamp
        st.rollovers, st.last_month = int(stamp[0]), int(stamp[1])
    return cur


def _with_version(rows: pl.DataFrame, versions: pl.DataFrame, prior: int | None) -> pl.DataFrame:
    """`ver`: the version of the latest version line at or before each row (else the one carried in)."""
    if not versions.height:
        return rows.with_columns(ver=pl.lit(prior, pl.Int64))
    rows = rows.join_asof(versions, on="line", strategy="backward")
    return rows.with_columns(pl.col("ver").fill_null(prior)) if prior is not None else rows


def _month_lengths(years: range) -> np.ndarray:
    """Days in each month (columns 0-11) of each of `years` (rows)."""
    return np.array([[calendar.monthrange(y, m)[1] for m in range(1, 13)] for y in years], np.int64)


def _epoch_micros(rollovers: np.ndarray, stamps: np.ndarray, base: int) -> np.ndarray:
    """Microseconds since 1970 of (year of rollover 0 + rollovers, MM-DD HH:MM:SS) rows as wall-clock
    times; a day past the month's end (02-30, or 02-29 in a year guessed wrong) becomes the 28th."""
    rollovers = rollovers.astype(np.int64)
    low = int(rollovers.min()) if len(rollovers) else 0
    years = range(base + low, base + (int(rollovers.max()) if len(rollovers) else 0) + 1)
    first = np.array([[(date(y, m, 1) - _EPOCH).days for m in range(1, 13)] for y in years], np.int64)
    length = _month_lengths(years)
    y, mo = rollovers - low, stamps[:, 0].astype(np.int64) - 1
    day = stamps[:, 1].astype(np.int64)
    day = np.where(day <= length[y, mo], day, 28)
    seconds = stamps[:, 2].astype(np.int64) * 3600 + stamps[:, 3].astype(np.int64) * 60 + stamps[:, 4]
    return ((first[y, mo] + day - 1) * 86400 + seconds) * 1_000_000


_EPOCH = date(1970, 1, 1)
_AT = pl.Datetime("us", "UTC")
_UTC = LogTimezone()  # the default zone of a log's wall-clock times (a frozen value, shared)


def _at_series(rollovers: np.ndarray, stamps: np.ndarray, base: int | None, tz: LogTimezone) -> pl.Series:
    """`at` (UTC) of the rows' local stamps."""
    if base is None:
        return pl.repeat(None, len(rollovers), dtype=_AT, eager=True).alias("at")
    return tz.to_utc(pl.Series("at", _epoch_micros(rollovers, stamps, base)).cast(pl.Datetime("us")))


def with_at(frame: pl.DataFrame, base: int | None, tz: LogTimezone) -> pl.DataFrame:
    """`at` from the stamp columns (see `_epoch_micros`), which it replaces; null where they are."""
    missing = frame["month"].is_null()
    stamps = (
        np.column_stack([frame[c].fill_null(1).to_numpy() for c in STAMP_COLS[1:]])
        if frame.height
        else np.zeros((0, 5), np.int64)
    )
    at = _at_series(frame["rollovers"].fill_null(0).to_numpy(), stamps, base, tz)
    if missing.any():
        at = at.set(missing, None)
    return frame.with_columns(at).drop(STAMP_COLS)


def scan_years(file: LogFile, chunk_bytes: int = CHUNK_BYTES) -> tuple[int, tuple | None]:
    """(rollovers, stamp of the last record): the first pass when no --year is given."""
    rollovers, last_month, last = 0, None, None
    for block in _chunks(file, chunk_bytes):
        df = _lines_frame(_bounded(block)[0], 0, stamps_only=True).filter(pl.col("level").is_not_null()).drop("level")
        if not df.height:
            continue
        prev = pl.col("month").shift(1)
        if last_month is not None:
            prev = prev.fill_null(last_month)
        df = df.with_columns(
            rollovers=rollovers + (pl.col("month") < prev - 6).fill_null(False).cast(pl.Int32).cum_sum()
        )
        row = df.row(-1, named=True)
        rollovers, last_month = int(row["rollovers"]), int(row["month"])
        last = (rollovers, row["month"], row["day"], row["h"], row["m"], row["s"])
    return rollovers, last


def base_year(file: LogFile, year: int | None, chunk_bytes: int = CHUNK_BYTES, tz: LogTimezone = _UTC) -> int | None:
    """--year = year of the first record (rollover 0), else the file time (as local time) = time of the
    last record."""
    if year is not None:
        return year
    rollovers, last = scan_years(file, chunk_bytes)
    if last is None:
        return None
    mtime = tz.local(file.mtime)
    base = mtime.year - rollovers
    if (last[1], last[2]) > (mtime.month, mtime.day):
        base -= 1  # the file time is just past a new year; the last line is from the old one
    return base


def iter_vllm_batches(
    file: LogFile,
    year: int | None = None,
    stream: VllmStream | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    tz: LogTimezone = _UTC,
) -> Iterator[VllmBatch]:
    """Row frames chunk by chunk (with `at`); totals and first/last record in `stream`."""
    st = stream if stream is not None else VllmStream(year, tz)
    st.base = base_year(file, year, chunk_bytes, st.tz)
    parsed = False
    for chunk in _scanned(file, chunk_bytes):
        parsed = True
        yield _parse_chunk(chunk, st)
    if parsed and st.cur is not None and st.cur.pending is not None:  # the file's last record
        p, st.cur.pending = st.cur.pending, None
        events = [
            (p["line"], p["level"], p["proc"], *p["stamp"], kind, detail)
            for kind, detail in _events(p["msg"], p["uvicorn"], p["cause"], p["oom"], p["dead"], p["spec"])
        ]
        if events:
            yield _finish(st, None, None, events, [])


SCAN_AHEAD = 2  # chunks scanned ahead of the walk, each in its own thread


def _scanned(file: LogFile, chunk_bytes: int) -> Iterator[_Chunk]:
    """`_scan_chunk` of each block in file order, the next SCAN_AHEAD blocks scanned in threads meanwhile
    (at most SCAN_AHEAD + 1 chunks alive at once)."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(SCAN_AHEAD, thread_name_prefix="vllm-scan") as pool:
        pending: deque = deque()
        try:
            for block in _chunks(file, chunk_bytes):
                box = [block]
                del block  # a block's bytes live until its scan has split them, not until the next one
                pending.append(pool.submit(_scan_chunk, box))
                if len(pending) > SCAN_AHEAD:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:  # the caller stopped early: the chunks not started yet are dropped
            for future in pending:
                future.cancel()


def _real_days(frame: pl.DataFrame, st: VllmStream) -> pl.DataFrame:
    """Under a --year the user gave, the rows whose day exists in their year; the others (02-29 in a
    year that is not a leap year) go to `st.impossible`, never to the 28th. A guessed year keeps
    `_epoch_micros`' rule."""
    if st.year is None or st.base is None or not frame.height:
        return frame
    # in numpy: the walk's thread would wait for Polars' pool, busy with the next chunks' scans
    days = frame["day"].to_numpy()
    late = np.flatnonzero(days > 28)  # only a 29th-31st can be missing from its month (01-12 by the grammar)
    if not late.size:
        return frame
    years = st.base + frame["rollovers"].fill_null(0).to_numpy()[late].astype(np.int64)
    low = int(years.min())
    length = _month_lengths(range(low, int(years.max()) + 1))
    missing = days[late] > length[years - low, frame["month"].to_numpy()[late].astype(np.int64) - 1]
    if not missing.any():
        return frame
    bad = frame[late[missing]].select("line", "month", "day")
    st.impossible += [
        (line, f"{month:02d}-{day:02d} does not exist in {year} (--year {st.year}): the record is not dated")
        for (line, month, day), year in zip(bad.rows(), years[missing].tolist(), strict=True)
    ]
    return frame.join(bad.select("line"), on="line", how="anti", maintain_order="left")


def _finish(
    st: VllmStream,
    spec: pl.DataFrame | None,
    stats: pl.DataFrame | None,
    events: list,
    unparsed: list,
    startup: pl.DataFrame | None = None,
) -> VllmBatch:
    """The chunk's frames, events and unparsed lines dated (`at`)."""
    ev = with_at(pl.DataFrame(events, schema=_EVENT_SCHEMA, orient="row"), st.base, st.tz)
    unparsed, st.impossible = [*unparsed, *st.impossible], []
    un = pl.DataFrame(unparsed, schema=_UNPARSED_SCHEMA, orient="row")
    st.unparsed += un.height
    empty = pl.DataFrame()
    return VllmBatch(
        spec if spec is not None else empty,
        stats if stats is not None else empty,
        ev,
        un,
        startup if startup is not None else empty,
    )


def parse_vllm_log(
    file: LogFile, year: int | None = None, chunk_bytes: int = CHUNK_BYTES, tz: LogTimezone = _UTC
) -> ParsedLog:
    """The whole file as lists of dicts (small files; `iter_vllm_batches` streams)."""
    st = VllmStream(year, tz)
    out = ParsedLog()
    for b in iter_vllm_batches(file, year, st, chunk_bytes):
        out.spec += b.spec.to_dicts()
        out.stats += b.stats.to_dicts()
        out.events += b.events.to_dicts()
        out.unparsed += [(r["line"], r["text"]) for r in b.unparsed.iter_rows(named=True)]
    out.lines, out.records = st.lines, st.records
    out.first_at, out.last_at = st.at(st.first), st.at(st.last)
    return out
