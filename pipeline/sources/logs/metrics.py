"""vLLM `/metrics` scrapes (Prometheus text, one file per scrape; docs/sources.md, /metrics scrapes).

Only the series the evidence needs are kept: the spec-decode counters, the
preemption counter and the running / waiting / KV-cache gauges. A scrape's time is
the samples' own timestamp when the exposition carries one, else the file's
modification time. Increases between scrapes (with counter resets) are computed in
the warehouse view `metric_increases`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

import polars as pl

from pipeline.sources.logs.files import LogFile, LogRecords

FAMILIES = {
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_per_pos_total",
    "vllm:num_preemptions_total",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
}
SCHEMA = pl.Schema(
    {
        "host": pl.String(),
        "scraped_at": pl.Datetime("us", "UTC"),
        "family": pl.String(),
        "engine": pl.String(),
        "model_name": pl.String(),
        "position": pl.String(),
        "value": pl.Float64(),
    }
)
SERIES = re.compile(r"(?m)^(?:# (?:TYPE|HELP) )?vllm:[a-z_]+")
MAX_TIMESTAMP_MS = 253402300799999  # 9999-12-31T23:59:59.999Z, the last time a datetime holds
SAMPLE = re.compile(r"(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+(?P<ts>-?\d+))?\s*$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass
class ParsedScrape:
    samples: list[dict] = field(default_factory=list)
    unparsed: list[tuple[int, str, str]] = field(default_factory=list)
    lines: int = 0


def parse_scrape(file: LogFile) -> ParsedScrape:
    out = ParsedScrape()
    rows = []
    for number, line in enumerate(file.lines(), 1):
        out.lines = number
        if not line.startswith("vllm:"):
            continue
        m = SAMPLE.match(line)
        if m is None:
            out.unparsed.append((number, f"line {number}", line[:500]))
            continue
        name = m.group("name")
        if name == "vllm:gpu_cache_usage_perc":
            name = "vllm:kv_cache_usage_perc"
        if name not in FAMILIES:
            continue
        labels = dict(LABEL.findall(m.group("labels") or ""))
        try:
            value = float(m.group("value"))
        except ValueError:
            out.unparsed.append((number, f"line {number}", line[:500]))
            continue
        ts = m.group("ts")
        # NaN, ±Inf or 1e400 (read as inf) is no gauge reading; a time past the year 9999 is no time
        what = None
        if not math.isfinite(value):
            what = f"value {m.group('value')} is not a finite number"
        elif ts and not 0 <= int(ts) <= MAX_TIMESTAMP_MS:
            what = f"timestamp {ts[:30]} is out of range"
        if what:
            out.unparsed.append((number, f"line {number}", f"{line[:400]} ({what})"))
            continue
        rows.append(
            {
                "family": name,
                "engine": labels.get("engine", labels.get("replica", "")),
                "model_name": labels.get("model_name", ""),
                "position": labels.get("position", ""),
                "value": value,
                "ts": int(ts) if ts else None,
            }
        )
    stamps = [r["ts"] for r in rows if r["ts"] is not None]
    scraped_at = (datetime.fromtimestamp(max(stamps) / 1000, UTC) if stamps else file.mtime).replace(microsecond=0)
    for row in rows:
        del row["ts"]
        row["scraped_at"] = scraped_at
    out.samples = rows
    return out


def is_scrape(head: str) -> bool:
    """a file with `vllm:` series (Prometheus text)"""
    return SERIES.search(head) is not None


def read_scrape(file: LogFile, host: str) -> LogRecords:
    """The samples of one scrape of `host` (metric_samples); the file's identity is the scrape's time."""
    parsed = parse_scrape(file)
    rows = pl.DataFrame([{**r, "host": host} for r in parsed.samples], schema=SCHEMA)
    first = last = parsed.samples[0]["scraped_at"] if parsed.samples else None
    file_id = f"scrape@{first.isoformat()}" if first else file.identity()
    return LogRecords(rows, file_id, parsed.lines, parsed.unparsed, first, last)
