"""vLLM server logs (sources.md §7): spec-decode windows, engine stats and engine events.

Every line is read once. ANSI colour is stripped and the ``(EngineCore_DP0 pid=N)``
process prefix set aside before matching (§7.1); lines that do not start a record
(tracebacks) are folded into the record before them, so a crash counts once.
A line that neither starts a known record nor continues one is *unparsed*: it is
reported and quarantined, never fatal (a newer vLLM may print a format we do not
know yet). Fields are matched by name, not position, and the per-position list is
pulled out before anything splits on commas (§7.2).

Timestamps have no year (§7.1): each record carries the number of December →
January rollovers seen before it in its file, and the year is fixed once the file
is read — ``--year`` is the year of the file's first record, otherwise the file's
modification time is taken as the time of its last record. Times are taken as UTC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from pipeline.sources.logfiles import LogFile, line_hash

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
PROC_PREFIX = re.compile(r"\((?P<proc>[A-Za-z][\w-]*) pid=(?P<pid>\d+)\)\s?")
ENVELOPE = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<mon>\d\d)-(?P<day>\d\d) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)"
    r"(?:[.,]\d+)? \[(?P<src>[^\]]*)\] (?P<msg>.*)"
)
ENVELOPE_START = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d")
UVICORN = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+(?P<msg>.*)")
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
class Record:
    line: int  # 1-based line number of the first line
    head: str  # first line, ANSI stripped (the dedup key is its hash)
    level: str
    month: int
    day: int
    hms: tuple[int, int, int]  # a uvicorn line has the time of the record before it
    msg: str
    rollovers: int
    more: list[str] = field(default_factory=list)
    proc: str | None = None
    uvicorn: bool = False

    @property
    def text(self) -> str:
        return "\n".join([self.msg, *self.more])


@dataclass
class ParsedLog:
    """Rows of one file; `at` is filled in by `resolve_years` once the whole file is read."""

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


def _events(record: Record) -> list[tuple[str, str]]:
    """(kind, detail) of the engine events a record holds (§7.6–7.8)."""
    msg = record.msg
    if record.uvicorn:
        return [("ready", msg)] if msg.startswith("Application startup complete") else []
    if "LLM engine (v" in msg and msg.startswith("Initializing"):
        version = VERSION.search(msg)
        return [("start", f"vLLM {version.group('v')}" if version else msg[:200])]
    if "EngineCore encountered a fatal error" in msg or "EngineCore failed to start" in msg:
        text = record.text
        cause = next((ln.strip() for ln in reversed(record.more) if ln.strip() and not ln.startswith(" ")), "")
        detail = msg.strip() + (f" — {cause[:300]}" if cause else "")
        events = [("fatal", detail)]
        if OOM.search(text):
            events.append(("oom", detail))
        return events
    if "EngineDeadError" in msg or ("Engine core process" in msg and "died unexpectedly" in msg) or "AsyncLLM output_handler failed" in msg:
        return [("engine_dead", msg[:300])]
    if ("Worker proc" in msg and "died unexpectedly" in msg) or re.search(r"Process .* died with exit code", msg):
        return [("worker_died", msg[:300])]
    if msg.startswith("PoC generation started"):
        return [("poc_start", msg[:300])]
    if msg.startswith("PoC stopped") or msg.startswith("PoC generation crashed"):
        return [("poc_stop", msg[:300])]
    if OOM.search(msg):
        return [("oom", msg[:300])]
    return []


def iter_records(lines, on_unparsed):
    """Records with their continuation lines folded in; `on_unparsed(line_no, text)` for orphans."""
    current: Record | None = None
    rollovers, last_month = 0, None
    for number, raw in enumerate(lines, 1):
        line = ANSI.sub("", raw) if "\x1b" in raw else raw
        proc = None
        if line.startswith("("):
            p = PROC_PREFIX.match(line)
            if p:
                proc, line = p.group("proc"), line[p.end():]
        if not line.strip():
            continue
        m = ENVELOPE_START.search(line, 0, MAX_PREFIX + 40)  # only where a level can start; the message is read below
        if m is not None and m.start() <= MAX_PREFIX:
            m = ENVELOPE.match(line, m.start())
            month = int(m.group("mon"))
            if last_month is not None and month < last_month - 6:  # December → January
                rollovers += 1
            last_month = month
            if current is not None:
                yield current
            current = Record(number, line, m.group("level"), month, int(m.group("day")),
                             (int(m.group("h")), int(m.group("m")), int(m.group("s"))), m.group("msg"), rollovers,
                             proc=proc)
            continue
        u = UVICORN.match(line)
        if u is not None and current is None:
            continue  # before any timed record: nothing to date it by
        if u is not None:
            yield current
            # uvicorn lines carry no time: they take the previous record's, which is also part of their key
            stamp = f"{current.month:02d}-{current.day:02d} {current.hms}"
            current = Record(number, f"{stamp} {line}", "INFO", current.month, current.day, current.hms, u.group("msg"),
                             current.rollovers, proc=proc, uvicorn=True)
            continue
        if current is not None and (
            current.level in ("ERROR", "CRITICAL") or current.more or TRACE_LINE.match(line)
        ):
            current.more.append(line)
            continue
        on_unparsed(number, line)
    if current is not None:
        yield current


def parse_vllm_log(file: LogFile, year: int | None = None) -> ParsedLog:
    out = ParsedLog()
    seen: dict[str, int] = {}
    version: tuple[int, ...] | None = None
    pending: list[tuple[dict, Record]] = []

    def key(text: str) -> str:
        h = line_hash(text)
        n = seen.get(h, 0)
        seen[h] = n + 1
        return f"{h}:{n}"

    def unparsed(number: int, text: str) -> None:
        out.unparsed.append((number, key(text), text[:500]))

    counter = _Counter(file.lines())
    for record in iter_records(counter, unparsed):
        out.records += 1
        _track_span(out, record)
        msg = record.msg
        rows: list[tuple[str, dict]] = []
        v = VERSION.search(msg) if ("version" in msg or "LLM engine (v" in msg) else None
        if v:
            version = parse_version(v.group("v"))
        if "SpecDecoding metrics:" in msg:
            spec = parse_spec_line(msg.split("SpecDecoding metrics:", 1)[1].strip(), version)
            if spec is None:
                unparsed(record.line, record.head)
                continue
            rows.append(("spec", spec))
        elif "Avg prompt throughput:" in msg:
            stats = parse_stats_line(msg, version)
            if stats is None:
                unparsed(record.line, record.head)
                continue
            rows.append(("stats", stats))
        for kind, detail in _events(record):
            rows.append(("event", {"kind": kind, "detail": detail}))
        if not rows:
            continue
        record_key = key(record.head)
        for table, row in rows:
            row.update(record_key=record_key, line=record.line, level=record.level, proc=record.proc)
            pending.append((row, record))
            getattr(out, {"spec": "spec", "stats": "stats", "event": "events"}[table]).append(row)
    out.lines = counter.n
    resolve_years(out, pending, file, year)
    return out


class _Counter:
    def __init__(self, lines):
        self._lines, self.n = lines, 0

    def __iter__(self):
        for line in self._lines:
            self.n += 1
            yield line


def _track_span(out: ParsedLog, record: Record) -> None:
    out._first = getattr(out, "_first", None) or record
    out._last = record


def resolve_years(out: ParsedLog, pending: list[tuple[dict, Record]], file: LogFile, year: int | None) -> None:
    """Fix the year of every row: --year = year of the first record, else the file time = time of the last."""
    last: Record | None = getattr(out, "_last", None)
    first: Record | None = getattr(out, "_first", None)
    if last is None:
        return
    if year is not None:
        base = year - first.rollovers
    else:
        base = file.mtime.year - last.rollovers
        if (last.month, last.day) > (file.mtime.month, file.mtime.day):
            base -= 1  # the file time is just past a new year; the last line is from the old one

    def at(record: Record) -> datetime:
        h, m, s = record.hms
        y = base + record.rollovers
        try:
            return datetime(y, record.month, record.day, h, m, s, tzinfo=timezone.utc)
        except ValueError:  # 02-29 in a year we guessed wrong; keep the row, on the 28th
            return datetime(y, record.month, min(record.day, 28), h, m, s, tzinfo=timezone.utc)

    for row, record in pending:
        row["at"] = at(record)
    out.first_at, out.last_at = at(first), at(last)
